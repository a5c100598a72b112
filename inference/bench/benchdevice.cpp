#include "inference/bench/benchdevice.h"

#include "inference/util/device.h"
#include "inference/util/heap.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>

namespace vireo::bench {

Result<std::pair<c10::Device, c10::ScalarType>> benchDeviceAndDtype(
    const std::string& bench, const std::string& name, const std::string& dtypeName)
{
    c10::Device device(c10::kCPU);
    try {
        device = c10::Device(name);
    } catch (const c10::Error&) {
        return makeError(ErrorCode::InvalidArgument, bench + ": unknown device '" + name + "' (cpu or cuda)");
    }
    if (device.is_cuda() && !cudaAvailable())
        return makeError(ErrorCode::Unsupported, bench + ": --device " + name + " but this process sees no CUDA device");
    if (!device.is_cuda() && !device.is_cpu())
        return makeError(ErrorCode::Unsupported, bench + ": runs on cpu or cuda, not " + name);
    if (dtypeName == "bf16")
        return std::pair{device, c10::kBFloat16};
    if (dtypeName == "f32")
        return std::pair{device, c10::kFloat};
    return makeError(ErrorCode::InvalidArgument, bench + ": --dtype is bf16 or f32, not " + dtypeName);
}

Result<TimedRuns> timeRuns(c10::Device device, int repeats, const std::function<Result<at::Tensor>()>& op)
{
    using Clock = std::chrono::steady_clock;
    TimedRuns t;
    const bool cuda = device.is_cuda();
    deviceSynchronize(device);
    std::int64_t base = 0;
    bool rss = false;
    if (cuda) {
        cudaResetPeakMemory(device);
        base = cudaAllocatedMemory(device);
    } else if (heap::resetPeakResident()) {
        base = heap::residentBytes();
        rss = base >= 0;
    }
    for (int i = -1; i < repeats; ++i) {
        t.output = at::Tensor();
        deviceSynchronize(device);
        const auto start = Clock::now();
        auto out = op();
        deviceSynchronize(device);
        const double s = std::chrono::duration<double>(Clock::now() - start).count();
        if (!out)
            return out.error();
        t.output = std::move(*out);
        if (i >= 0) {
            t.seconds.push_back(s);
        } else if (rss) {
            const auto peak = heap::peakResidentBytes();
            t.peakBytes = peak >= 0 ? std::max<std::int64_t>(0, peak - base) : -1;
            t.peakTotalBytes = peak;
        }
    }
    if (cuda) {
        t.peakTotalBytes = cudaPeakMemory(device);
        t.peakBytes = t.peakTotalBytes - base;
    }
    if (!t.seconds.empty()) {
        auto sorted = t.seconds;
        std::sort(sorted.begin(), sorted.end());
        t.medianSeconds = sorted[sorted.size() / 2];
    }
    return t;
}

}  // namespace vireo::bench
