#include "base/capability.h"

#include <algorithm>
#include <map>

namespace vireo::capability {

namespace {

constexpr std::int64_t kGiB = 1024ll * 1024 * 1024;

std::string versionText(int cudaVersion)
{
    return std::to_string(cudaVersion / 1000) + "." + std::to_string(cudaVersion % 1000 / 10);
}

std::string cudnnText(int version)
{
    return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." + std::to_string(version % 100);
}

std::string deviceName(const DeviceCaps& d)
{
    return d.name.empty() ? std::string("this GPU") : d.name;
}

}  // namespace

std::string DeviceCaps::capabilityText() const
{
    return std::to_string(major) + "." + std::to_string(minor);
}

std::optional<DeviceCaps> knownDevice(const std::string& id)
{
    // Compute capability and memory as NVIDIA lists them; driver, CUDA and cuDNN as the packaged
    // build would find them on a current driver.
    static const std::map<std::string, DeviceCaps> table = [] {
        auto gpu = [](const char* name, int major, int minor, std::int64_t gib) {
            return DeviceCaps{name, true, major, minor, gib * kGiB, 13000, 13000, 91500};
        };
        return std::map<std::string, DeviceCaps>{
            {"gtx-1080", gpu("NVIDIA GeForce GTX 1080", 6, 1, 8)},
            {"v100", gpu("Tesla V100-SXM2-32GB", 7, 0, 32)},
            {"t4", gpu("Tesla T4", 7, 5, 15)},
            {"rtx-2080", gpu("NVIDIA GeForce RTX 2080", 7, 5, 8)},
            {"rtx-3090", gpu("NVIDIA GeForce RTX 3090", 8, 6, 24)},
            {"a100", gpu("NVIDIA A100-SXM4-80GB", 8, 0, 80)},
            {"rtx-4090", gpu("NVIDIA GeForce RTX 4090", 8, 9, 24)},
            {"l40s", gpu("NVIDIA L40S", 8, 9, 45)},
            {"h100", gpu("NVIDIA H100 80GB HBM3", 9, 0, 80)},
            {"h200", gpu("NVIDIA H200", 9, 0, 140)},
            {"b200", gpu("NVIDIA B200", 10, 0, 179)},
            {"rtx-5090", gpu("NVIDIA GeForce RTX 5090", 12, 0, 32)},
        };
    }();
    const auto it = table.find(id);
    if (it == table.end())
        return std::nullopt;
    return it->second;
}

std::vector<std::string> knownDeviceIds()
{
    return {"gtx-1080", "v100", "t4", "rtx-2080", "rtx-3090", "a100", "rtx-4090", "l40s", "h100", "h200", "b200", "rtx-5090"};
}

std::string dtypeName(Dtype dtype)
{
    switch (dtype) {
    case Dtype::F32: return "f32";
    case Dtype::BF16: return "bf16";
    case Dtype::F16: return "f16";
    }
    return "?";
}

std::string weightFormatName(WeightFormat format)
{
    switch (format) {
    case WeightFormat::Dense: return "dense";
    case WeightFormat::Fp8Scaled: return "scaled FP8";
    case WeightFormat::Gguf: return "GGUF";
    case WeightFormat::Nf4: return "NF4";
    case WeightFormat::Int8: return "int8";
    }
    return "?";
}

std::string gemmPathName(GemmPath path)
{
    switch (path) {
    case GemmPath::Dense: return "dense GEMM";
    case GemmPath::Fp8TensorCores: return "FP8 tensor-core GEMM";
    case GemmPath::DequantizeThenGemm: return "dequantize + GEMM";
    }
    return "?";
}

std::optional<std::string> deviceRefusal(const DeviceCaps& d)
{
    if (!d.cuda)
        return std::nullopt;
    if (d.capability() < kMinCapability)
        return deviceName(d) + " (compute capability " + d.capabilityText()
            + ") is older than this build supports: it runs on compute capability 7.5 (Turing: RTX 20xx, T4) and newer, "
              "as CUDA 13 does. Generate on the CPU instead, or on a newer GPU";
    if (d.driverCudaVersion > 0 && d.runtimeCudaVersion > 0 && d.driverCudaVersion / 1000 < d.runtimeCudaVersion / 1000)
        return "the NVIDIA driver supports CUDA " + versionText(d.driverCudaVersion) + ", but this build needs CUDA "
            + versionText(d.runtimeCudaVersion) + ": update the NVIDIA driver (version 580 or newer for CUDA 13), or generate on the CPU";
    return std::nullopt;
}

DtypeChoice chooseDtype(const DeviceCaps& d, DtypeRequest request)
{
    DtypeChoice c;
    if (!d.cuda) {
        switch (request) {
        case DtypeRequest::Auto:
        case DtypeRequest::F32: c.dtype = Dtype::F32; break;
        case DtypeRequest::BF16:
            c.dtype = Dtype::BF16;
            c.reason = "bf16 on the CPU: half the memory of f32, usually slower";
            break;
        case DtypeRequest::F16:
            c.dtype = Dtype::F16;
            c.reason = "f16 on the CPU: half the memory of f32, usually slower";
            break;
        }
        return c;
    }
    const bool bf16Cores = d.capability() >= 80;
    switch (request) {
    case DtypeRequest::Auto:
        if (bf16Cores) {
            c.dtype = Dtype::BF16;
        } else {
            c.dtype = Dtype::F16;
            c.reason = deviceName(d) + " (compute capability " + d.capabilityText()
                + ") has no bf16 tensor cores, so the model computes in f16 instead; models trained in bf16 can overflow in f16 in "
                  "rare layers: if a result comes out black or as noise, generate on the CPU";
        }
        break;
    case DtypeRequest::BF16:
        c.dtype = Dtype::BF16;
        if (!bf16Cores)
            c.refusal = "bf16 needs compute capability 8.0 (Ampere) or newer, and " + deviceName(d) + " is " + d.capabilityText()
                + ": choose auto or f16";
        break;
    case DtypeRequest::F16: c.dtype = Dtype::F16; break;
    case DtypeRequest::F32:
        c.dtype = Dtype::F32;
        c.reason = "f32 on a GPU: twice the memory of bf16 and no tensor-core speed";
        break;
    }
    return c;
}

std::optional<std::string> fp8GemmBlocker(const DeviceCaps& d, Dtype dtype, const Switches& switches)
{
    if (!d.cuda)
        return std::string("the CPU has no FP8 tensor cores");
    if (!switches.fp8TensorCores)
        return std::string("turned off by VIREO_FP8_TENSOR_CORES=0");
    if (dtype == Dtype::F32)
        return std::string("the compute dtype is f32 (FP8 GEMMs run for bf16 and f16)");
    if (d.capability() < 89)
        return "GPU compute capability " + d.capabilityText() + " has no FP8 tensor cores (needs 8.9+)";
    return std::nullopt;
}

std::optional<std::string> fp8AttentionBlocker(const DeviceCaps& d, Dtype dtype, const Switches& switches)
{
    if (!d.cuda)
        return std::string("attention runs on the CPU (FP8 attention needs CUDA)");
    if (!switches.fp8AttentionBuilt)
        return std::string("this build has no FP8 attention (built without cuDNN's frontend)");
    if (!switches.fp8Attention)
        return std::string("turned off by VIREO_FP8_ATTENTION=0");
    if (dtype == Dtype::F32)
        return std::string("the compute dtype is f32");
    if (d.major < 9)
        return "GPU compute capability " + d.capabilityText() + " has no FP8 attention engine in cuDNN (needs 9.0+)";
    if (d.cudnnVersion <= 0)
        return std::string("no cuDNN was found");
    if (d.cudnnVersion < 90100 || d.cudnnVersion == 91000)
        return "cuDNN " + cudnnText(d.cudnnVersion) + " has no FP8 attention this build can use (needs 9.1 or newer, not 9.10.0)";
    return std::nullopt;
}

PathPlan planPaths(const DeviceCaps& d, DtypeRequest request, const std::vector<ComponentInput>& components, const Switches& switches)
{
    PathPlan p;
    p.refusal = deviceRefusal(d);
    const auto choice = chooseDtype(d, request);
    if (!p.refusal && choice.refusal)
        p.refusal = choice.refusal;
    p.dtype = choice.dtype;
    p.dtypeReason = choice.reason;
    if (!choice.reason.empty() && p.dtype == Dtype::F16 && d.cuda)
        p.warnings.push_back(choice.reason);
    const auto dtype = dtypeName(p.dtype);
    const auto gemmBlocker = fp8GemmBlocker(d, p.dtype, switches);
    bool fp8Transformer = false, slowFp8 = false;
    for (const auto& c : components) {
        ComponentPath out;
        out.name = c.name;
        out.format = c.format;
        const bool cpu = !d.cuda || c.onCpu;
        out.device = cpu ? "cpu" : "cuda";
        const auto& here = dtype;  // a component placed on the CPU keeps the plan's dtype
        switch (c.format) {
        case WeightFormat::Dense:
            out.gemm = GemmPath::Dense;
            out.text = "dense GEMM in " + here + (cpu ? " on the CPU" : "");
            break;
        case WeightFormat::Fp8Scaled: {
            const auto blocker = cpu ? std::optional<std::string>("it runs on the CPU, which has no FP8 tensor cores") : gemmBlocker;
            if (!blocker) {
                out.gemm = GemmPath::Fp8TensorCores;
                out.text = gemmPathName(out.gemm);
                out.reason = "scaled FP8 weights on compute capability " + d.capabilityText();
                fp8Transformer = fp8Transformer || c.attention;
            } else {
                out.gemm = GemmPath::DequantizeThenGemm;
                out.text = "dequantize to " + here + " + GEMM" + (cpu ? " on the CPU" : "");
                out.reason = *blocker;
                slowFp8 = slowFp8 || !cpu;
            }
            break;
        }
        case WeightFormat::Gguf:
        case WeightFormat::Nf4:
        case WeightFormat::Int8:
            out.gemm = GemmPath::DequantizeThenGemm;
            out.text = "dequantize to " + here + " + GEMM" + (cpu ? " on the CPU" : "");
            out.reason = weightFormatName(c.format) + " weights have no direct GEMM: each is dequantized before its matmul"
                + (cpu ? std::string() : " by kernels built for compute capability " + d.capabilityText());
            break;
        }
        p.components.push_back(std::move(out));
    }
    if (slowFp8)
        p.warnings.push_back("FP8 weights are dequantized to " + dtype + " before every GEMM on this GPU (" + *gemmBlocker
            + "): they save memory, not time");
    const bool anyAttention = std::any_of(components.begin(), components.end(), [](const ComponentInput& c) { return c.attention; });
    if (anyAttention) {
        const auto sdpa = dtype + " SDPA";
        if (!fp8Transformer) {
            p.attention = sdpa;
            p.attentionReason = "its GEMMs do not run FP8 here";
        } else if (const auto blocker = fp8AttentionBlocker(d, p.dtype, switches)) {
            p.attention = sdpa;
            p.attentionReason = *blocker;
        } else {
            p.attention = "FP8 flash attention (cuDNN)";
            p.attentionReason =
                "for self-attention over 1024 tokens or more; a shape cuDNN refuses runs " + dtype + " SDPA and is reported with a count";
        }
    }
    return p;
}

std::string PathPlan::text() const
{
    std::string out;
    if (refusal)
        return "cannot run: " + *refusal;
    out = "compute in " + dtypeName(dtype);
    for (const auto& c : components)
        out += "; " + c.name + ": " + c.text;
    if (!attention.empty())
        out += "; self-attention: " + attention;
    return out;
}

}  // namespace vireo::capability
