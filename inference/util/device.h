#pragma once

// Device housekeeping shared by the runtime, the CLI and the benchmarks, so none of them
// includes CUDA headers: synchronization, memory statistics, handing cached memory back, and
// telling apart the failures a job can survive from a lost device.

#include "base/capability.h"
#include "inference/util/result.h"

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <exception>
#include <string>

namespace vireo {

void deviceSynchronize(c10::Device device);

// Bytes the CUDA caching allocator holds for tensors now, and the most since the last reset.
std::int64_t cudaAllocatedMemory(c10::Device device);
std::int64_t cudaPeakMemory(c10::Device device);
// Bytes the caching allocator holds in private pools (CUDA graphs' working memory), in use or not.
std::int64_t cudaGraphPoolMemory(c10::Device device);
void cudaResetPeakMemory(c10::Device device);
// Free and total bytes of the device as the driver sees them (0, 0 without CUDA).
std::pair<std::int64_t, std::int64_t> cudaMemoryInfo(c10::Device device);
// Returns the caching allocator's unused blocks to the driver, so the next model (or another
// program) can have them.
void releaseCachedDeviceMemory();

// Whether this process can use CUDA at all, how many devices it sees, and a device's name and
// capability.
bool cudaAvailable();
int cudaDeviceCount();  // 0 without CUDA
std::string cudaDeviceSummary(int index = 0);
// Total memory of a CUDA device, without creating a context (0 without CUDA or that device).
std::int64_t cudaTotalMemory(int index = 0);

// What the capability gate needs to know of a device (read once per device and kept): the
// CPU's for a CPU device; for a CUDA device its compute capability, memory, the driver's and
// this build's CUDA versions and the cuDNN the kernels load.
capability::DeviceCaps deviceCaps(c10::Device device);
// The path switches as the environment sets them (VIREO_FP8_TENSOR_CORES, VIREO_FP8_ATTENTION),
// with whether this build has FP8 attention at all.
capability::Switches pathSwitches();
// Why CUDA cannot be used on this machine, in words a user can act on (no driver, a driver too
// old for this build, a build without CUDA); empty when it can.
std::string cudaUnavailableReason();

// One error for an exception thrown by libtorch inside `what` (a phase or component name):
// out of memory on any device becomes ErrorCode::OutOfMemory, a CUDA fault DeviceFault, the
// rest InvalidArgument. The message says what happened and what to do.
// A module's compute dtype: float32, bfloat16 or float16 (quantized weights dequantize into it);
// anything else is InvalidArgument naming `model` ("Gemma 3").
Result<void> checkComputeDtype(const std::string& model, c10::ScalarType dtype);

Error errorFromException(const std::exception& e, const std::string& what, ErrorCode fallback = ErrorCode::InvalidArgument);

// After a CUDA fault: whether that device still runs work (a sticky error such as an illegal
// address poisons the whole context until the process ends).
bool cudaContextHealthy(int index = 0);

}  // namespace vireo
