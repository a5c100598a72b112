#include "inference/bench/benchdevice.h"

#include "inference/util/device.h"

#include <c10/util/Exception.h>

namespace vireo::bench {

Result<std::pair<c10::Device, c10::ScalarType>> benchDeviceAndDtype(const std::string& bench, const std::string& name,
                                                                    const std::string& dtypeName)
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

} // namespace vireo::bench
