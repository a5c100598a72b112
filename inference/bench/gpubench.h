#pragma once

#include "inference/util/result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace vireo::bench {

struct GpuDequantRow {
    std::string type;
    std::int64_t elements = 0;
    std::int64_t storedBytes = 0;
    double seconds = 0;  // median over repeats, CUDA events
};

struct GpuDequantResult {
    std::string device;
    std::int64_t rows = 0, cols = 0;
    double copySeconds = 0;  // device-to-device copy of the bf16 output size, same run
    std::int64_t copyBytes = 0;  // bytes read + written by that copy
    std::vector<GpuDequantRow> rows_;
};

// Every representation dequantized to bf16 on the CUDA device next to a device copy of the
// same output: bandwidth as (stored bytes read + output bytes written) / time.
Result<GpuDequantResult> benchDequantCuda(std::int64_t rows, std::int64_t cols, int repeats);
std::string formatGpuDequant(const GpuDequantResult& r);
std::string gpuDequantJson(const GpuDequantResult& r);

}  // namespace vireo::bench
