#pragma once

// The capability gate: from what a device is (compute capability, memory, driver and library
// versions) and what each model component is stored as, the path each will take and why,
// decided before anything loads. A pure function of its inputs, so the plan can be tested for
// devices this machine does not have, and the runtime's own choices (FP8 GEMM, FP8 attention,
// the compute dtype) ask the same questions here instead of repeating the rules.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vireo::capability {

// A compute device as the plan sees it. For the CPU only `cuda == false` matters.
struct DeviceCaps {
    std::string name;  // "NVIDIA GeForce RTX 3090", "cpu"
    bool cuda = false;
    int major = 0, minor = 0;  // compute capability
    std::int64_t totalBytes = 0;
    int driverCudaVersion = 0;  // the newest CUDA the driver supports (cudaDriverGetVersion: 12080 = 12.8); 0 unknown
    int runtimeCudaVersion = 0;  // the CUDA this build runs with (13000 = 13.0); 0 unknown
    int cudnnVersion = 0;  // cudnnGetVersion (91000 = 9.10.0); 0 none or unknown

    int capability() const { return major * 10 + minor; }
    std::string capabilityText() const;  // "8.6"
};

// Real devices, for tests and what-if plans ("rtx-3090", "h100", ...; nullopt if unknown).
std::optional<DeviceCaps> knownDevice(const std::string& id);
std::vector<std::string> knownDeviceIds();

// The oldest GPU this build runs on: CUDA 13 and the PyTorch wheels built for it start at
// Turing (sm_75).
constexpr int kMinCapability = 75;

// Switches that change a path (read from the environment by the caller).
struct Switches {
    bool fp8TensorCores = true;  // VIREO_FP8_TENSOR_CORES
    bool fp8Attention = true;  // VIREO_FP8_ATTENTION
    bool fp8AttentionBuilt = true;  // the build has cuDNN's frontend
};

enum class Dtype { F32, BF16, F16 };
std::string dtypeName(Dtype dtype);  // "f32", "bf16", "f16"
enum class DtypeRequest { Auto, F32, BF16, F16 };

// How a component's weights are stored (for a mix, see dominantFormat).
enum class WeightFormat { Dense, Fp8Scaled, Gguf, Nf4, Int8 };
std::string weightFormatName(WeightFormat format);

// The form that decides a component's path, from the bytes of its matrix weights per form: a
// quantized form when there is one (the one with most bytes), since the dense rest (blocks kept
// in bf16, the input and output layers) runs dense everywhere; Dense otherwise.
inline WeightFormat dominantFormat(const std::map<WeightFormat, std::int64_t>& bytesByFormat)
{
    WeightFormat best = WeightFormat::Dense;
    std::int64_t most = 0;
    for (const auto& [form, bytes] : bytesByFormat)
        if (form != WeightFormat::Dense && bytes > most) {
            best = form;
            most = bytes;
        }
    return best;
}

enum class GemmPath { Dense, Fp8TensorCores, DequantizeThenGemm };
// "dense GEMM", "FP8 tensor-core GEMM", "dequantize + GEMM": the names the runtime reports.
std::string gemmPathName(GemmPath path);

// Why a device cannot run this build at all (too old, a driver older than the CUDA this build
// needs), with what would work instead; nullopt when it can. Always nullopt for the CPU.
std::optional<std::string> deviceRefusal(const DeviceCaps& device);

// The compute dtype for a request, or why the request cannot run on this device.
struct DtypeChoice {
    Dtype dtype = Dtype::F32;
    std::string reason;  // one sentence; empty for the plain choice
    std::optional<std::string> refusal;
};
DtypeChoice chooseDtype(const DeviceCaps& device, DtypeRequest request);

// What blocks FP8 tensor-core GEMMs for activations of this dtype on this device (the weight's
// own properties are the runtime's to check); nullopt when they can run.
std::optional<std::string> fp8GemmBlocker(const DeviceCaps& device, Dtype dtype, const Switches& switches);
// What blocks cuDNN's FP8 flash attention on this device; nullopt when it may run (cuDNN still
// decides per shape, and a refusal then falls back visibly).
std::optional<std::string> fp8AttentionBlocker(const DeviceCaps& device, Dtype dtype, const Switches& switches);

struct ComponentInput {
    std::string name;  // "transformer", "text_encoder", ...
    WeightFormat format = WeightFormat::Dense;
    bool onCpu = false;  // placed on the CPU although the device is a GPU
    bool attention = false;  // its self-attention may run FP8 (the LTX transformer)
};

struct ComponentPath {
    std::string name;
    std::string device;  // "cuda", "cpu"
    WeightFormat format = WeightFormat::Dense;
    GemmPath gemm = GemmPath::Dense;
    std::string text;  // "FP8 tensor-core GEMM", "dequantize to bf16 + GEMM", ...
    std::string reason;  // why this path; for a slower one, what blocks the faster
};

struct PathPlan {
    std::optional<std::string> refusal;  // the device cannot run this at all, and what would
    Dtype dtype = Dtype::F32;
    std::string dtypeReason;
    std::vector<ComponentPath> components;
    std::string attention;  // the transformer's self-attention: "FP8 flash attention (cuDNN)", "bf16 SDPA"
    std::string attentionReason;
    std::vector<std::string> warnings;
    // One line per component and the attention, for the memory plan and the CLI.
    std::string text() const;
};

PathPlan planPaths(const DeviceCaps& device, DtypeRequest request, const std::vector<ComponentInput>& components, const Switches& switches);

}  // namespace vireo::capability
