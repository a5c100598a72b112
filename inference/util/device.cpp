#include "inference/util/device.h"

#include "base/envswitch.h"
#include "kernels/fp8attention.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/core/Allocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

namespace vireo {

namespace {

c10::DeviceIndex indexOf(c10::Device device)
{
    return device.has_index() ? device.index() : c10::cuda::current_device();
}

bool contains(const std::string& text, const char* what)
{
    return text.find(what) != std::string::npos;
}

}  // namespace

bool cudaAvailable()
{
    return at::hasCUDA() && c10::cuda::device_count() > 0;
}

int cudaDeviceCount()
{
    return cudaAvailable() ? static_cast<int>(c10::cuda::device_count()) : 0;
}

std::string cudaDeviceSummary(int index)
{
    if (index < 0 || index >= cudaDeviceCount())
        return {};
    const auto* p = at::cuda::getDeviceProperties(index);
    return std::string(p->name) + " (compute capability " + std::to_string(p->major) + "." + std::to_string(p->minor) + ", "
        + std::to_string(p->totalGlobalMem / (1024 * 1024)) + " MiB)";
}

std::int64_t cudaTotalMemory(int index)
{
    return index >= 0 && index < cudaDeviceCount() ? static_cast<std::int64_t>(at::cuda::getDeviceProperties(index)->totalGlobalMem) : 0;
}

capability::DeviceCaps deviceCaps(c10::Device device)
{
    if (!device.is_cuda() || !cudaAvailable())
        return capability::DeviceCaps{"cpu", false, 0, 0, 0, 0, 0, 0};
    static std::mutex mutex;
    static std::map<int, capability::DeviceCaps> known;
    const auto index = indexOf(device);
    const std::lock_guard lock(mutex);
    if (const auto it = known.find(index); it != known.end())
        return it->second;
    const auto* p = at::cuda::getDeviceProperties(index);
    capability::DeviceCaps caps;
    caps.name = p->name;
    caps.cuda = true;
    caps.major = p->major;
    caps.minor = p->minor;
    caps.totalBytes = static_cast<std::int64_t>(p->totalGlobalMem);
    int driver = 0;
    if (cudaDriverGetVersion(&driver) == cudaSuccess)
        caps.driverCudaVersion = driver;
    caps.runtimeCudaVersion = CUDART_VERSION;
    caps.cudnnVersion = kernels::cudnnVersion();
    known[index] = caps;
    return caps;
}

capability::Switches pathSwitches()
{
    capability::Switches s;
    s.fp8TensorCores = env::flag("VIREO_FP8_TENSOR_CORES");
    s.fp8Attention = kernels::fp8AttentionEnabled();
    s.fp8AttentionBuilt = kernels::fp8AttentionBuilt();
    return s;
}

std::string cudaUnavailableReason()
{
    if (cudaAvailable())
        return {};
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0)
        return "no NVIDIA driver was found (install the NVIDIA driver, version 580 or newer for CUDA 13)";
    if (driver / 1000 < CUDART_VERSION / 1000)
        return "the NVIDIA driver supports CUDA " + std::to_string(driver / 1000) + "." + std::to_string(driver % 1000 / 10)
            + ", but this build needs CUDA " + std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10)
            + ": update the NVIDIA driver (580 or newer)";
    if (!at::hasCUDA())
        return "this build of PyTorch has no CUDA";
    return "the NVIDIA driver reports no usable GPU (is one installed, and not hidden by CUDA_VISIBLE_DEVICES?)";
}

void deviceSynchronize(c10::Device device)
{
    if (device.is_cuda())
        c10::cuda::device_synchronize();
}

std::int64_t cudaAllocatedMemory(c10::Device device)
{
    if (!device.is_cuda() || !cudaAvailable())
        return 0;
    return c10::cuda::CUDACachingAllocator::getDeviceStats(indexOf(device)).allocated_bytes[0].current;
}

std::int64_t cudaGraphPoolMemory(c10::Device device)
{
    if (!device.is_cuda() || !cudaAvailable())
        return 0;
    const auto index = indexOf(device);
    std::int64_t bytes = 0;
    for (const auto& segment : c10::cuda::CUDACachingAllocator::snapshot({0, 0}, false).segments)
        if (segment.device == index && (segment.owner_private_pool_id.first != 0 || segment.owner_private_pool_id.second != 0))
            bytes += static_cast<std::int64_t>(segment.total_size);
    return bytes;
}

std::int64_t cudaPeakMemory(c10::Device device)
{
    if (!device.is_cuda() || !cudaAvailable())
        return 0;
    return c10::cuda::CUDACachingAllocator::getDeviceStats(indexOf(device)).allocated_bytes[0].peak;
}

void cudaResetPeakMemory(c10::Device device)
{
    if (device.is_cuda() && cudaAvailable())
        c10::cuda::CUDACachingAllocator::resetPeakStats(indexOf(device));
}

std::pair<std::int64_t, std::int64_t> cudaMemoryInfo(c10::Device device)
{
    if (!device.is_cuda() || !cudaAvailable())
        return {0, 0};
    const c10::cuda::CUDAGuard guard(indexOf(device));
    std::size_t freeBytes = 0, totalBytes = 0;
    if (cudaMemGetInfo(&freeBytes, &totalBytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return {0, 0};
    }
    return {static_cast<std::int64_t>(freeBytes), static_cast<std::int64_t>(totalBytes)};
}

void releaseCachedDeviceMemory()
{
    if (cudaAvailable())
        c10::cuda::CUDACachingAllocator::emptyCache();
}

Result<void> checkComputeDtype(const std::string& model, c10::ScalarType dtype)
{
    if (dtype != c10::kFloat && dtype != c10::kBFloat16 && dtype != c10::kHalf)
        return makeError(
            ErrorCode::InvalidArgument, model + ": compute dtype " + c10::toString(dtype) + " is not float32, bfloat16 or float16");
    return {};
}

Error errorFromException(const std::exception& e, const std::string& what, ErrorCode fallback)
{
    std::string text;
    if (const auto* c10Error = dynamic_cast<const c10::Error*>(&e))
        text = c10Error->what_without_backtrace();
    else
        text = e.what();
    if (dynamic_cast<const c10::OutOfMemoryError*>(&e) || contains(text, "out of memory")
        || contains(text, "DefaultCPUAllocator: can't allocate") || dynamic_cast<const std::bad_alloc*>(&e))
        return makeError(ErrorCode::OutOfMemory,
            what + " ran out of memory: " + text + " (choose a smaller size, fewer frames, or a placement that offloads more)");
    if (dynamic_cast<const c10::AcceleratorError*>(&e) || contains(text, "CUDA error") || contains(text, "CUBLAS_STATUS")
        || contains(text, "cuDNN error"))
        return makeError(ErrorCode::DeviceFault, what + " failed on the GPU: " + text);
    return makeError(fallback, what + ": " + text);
}

bool cudaContextHealthy(int index)
{
    if (index < 0 || index >= cudaDeviceCount())
        return true;
    try {
        const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
        const auto probe = at::ones({16}, at::TensorOptions().device(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index))));
        return probe.sum().item<double>() == 16.0 && cudaDeviceSynchronize() == cudaSuccess;
    } catch (const std::exception&) {
        return false;
    }
}

}  // namespace vireo
