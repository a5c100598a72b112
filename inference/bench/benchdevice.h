#pragma once

// What every device benchmark checks first: the device it was asked for exists here and the
// dtype is one it runs (bf16 | f32), said in one line that names the bench.

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace vireo::bench {

Result<std::pair<c10::Device, c10::ScalarType>> benchDeviceAndDtype(
    const std::string& bench, const std::string& device, const std::string& dtype);

// One op timed as the device benches time it: a warm-up, then `repeats` runs, each
// synchronized on both ends; one output alive at a time, so the peak is one run's.
struct TimedRuns {
    std::vector<double> seconds;  // every timed run
    double medianSeconds = 0;
    // CUDA: the caching allocator's peak during the runs above what was allocated before
    // (weights and inputs), and the absolute peak. CPU: growth of the peak resident set over
    // the warm-up run (a lower bound: freed heap stays resident and is reused); -1 = unknown.
    std::int64_t peakBytes = -1, peakTotalBytes = -1;
    at::Tensor output;  // of the last run
};
Result<TimedRuns> timeRuns(c10::Device device, int repeats, const std::function<Result<at::Tensor>()>& op);

}  // namespace vireo::bench
