#include "inference/facade/generator.h"

#include "base/envswitch.h"
#include "inference/families/common.h"
#include "inference/models/nn/layers.h"
#include "inference/quant/quantizedweight.h"
#include "inference/util/device.h"
#include "inference/util/heap.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

// The facade's value types and the machine-wide calls that need no model family, kept apart
// from the dispatcher so the families can use them without linking it.

namespace vireo::facade {

using families::lower;
using families::parseDevice;

std::string_view modelKindName(ModelKind kind)
{
    return kind == ModelKind::Image ? "image" : "video";
}

const Knob* FamilyRules::knob(std::string_view id) const
{
    for (const auto& k : knobs)
        if (k.id == id)
            return &k;
    return nullptr;
}

double GenerateRequest::knob(const Knob& k) const
{
    const auto it = knobs.find(k.id);
    return it == knobs.end() ? k.defaultValue : it->second;
}

std::string_view placementName(Placement placement)
{
    switch (placement) {
    case Placement::Auto: return "auto";
    case Placement::AllResident: return "all-resident";
    case Placement::TextEncoderOnCpu: return "text-encoder-on-cpu";
    case Placement::OffloadTransformerBlocks: return "offload-transformer-blocks";
    }
    return "auto";
}

std::optional<Placement> parsePlacement(std::string_view name)
{
    const auto l = lower(name);
    for (auto p : {Placement::Auto, Placement::AllResident, Placement::TextEncoderOnCpu, Placement::OffloadTransformerBlocks})
        if (l == placementName(p))
            return p;
    return std::nullopt;
}

std::string_view speedModeName(SpeedMode mode)
{
    switch (mode) {
    case SpeedMode::Quality: return "quality";
    case SpeedMode::Balanced: return "balanced";
    case SpeedMode::Fast: return "fast";
    }
    return "quality";
}

std::optional<SpeedMode> parseSpeedMode(std::string_view name)
{
    const auto l = lower(name);
    for (auto m : {SpeedMode::Quality, SpeedMode::Balanced, SpeedMode::Fast})
        if (l == speedModeName(m))
            return m;
    return std::nullopt;
}

StepCacheSettings stepCacheSettings(SpeedMode mode)
{
    // The thresholds peers ship for first-block caches on DiTs (0.05-0.12 relative L1);
    // `vireo-bench speed` measures what they cost on a given model.
    switch (mode) {
    case SpeedMode::Quality: return {0.0, 1};
    case SpeedMode::Balanced: return {0.05, 1};
    case SpeedMode::Fast: return {0.12, 2};
    }
    return {};
}

std::string_view phaseName(Phase phase)
{
    switch (phase) {
    case Phase::EnhancePrompt: return "enhance prompt";
    case Phase::LoadTextEncoder: return "load text encoder";
    case Phase::EncodePrompt: return "encode prompt";
    case Phase::LoadTransformer: return "load transformer";
    case Phase::Denoise: return "denoise";
    case Phase::LoadDecoders: return "load decoders";
    case Phase::DecodeVideo: return "decode video";
    case Phase::DecodeAudio: return "decode audio";
    case Phase::Vocoder: return "vocoder";
    case Phase::DecodeImage: return "decode image";
    case Phase::EncodeConditions: return "encode conditions";
    case Phase::UpsampleLatents: return "upsample latents";
    case Phase::Refine: return "refine";
    case Phase::TemporalRefine: return "temporal refine";
    case Phase::ThirdStage: return "third stage";
    }
    return "?";
}

std::vector<DeviceInfo> availableDevices()
{
    std::vector<DeviceInfo> out;
    out.push_back({"cpu", "CPU (" + std::to_string(at::get_num_threads()) + " threads)", families::hostAvailableBytes()});
    // Every CUDA device this process sees (CUDA_VISIBLE_DEVICES applies), each its own engine.
    for (int i = 0; i < cudaDeviceCount(); ++i)
        out.push_back({"cuda:" + std::to_string(i), cudaDeviceSummary(i), cudaTotalMemory(i)});
    return out;
}

void releaseDeviceCaches()
{
    heap::releaseFreeMemory();
    releaseCachedDeviceMemory();
}

bool deviceHealthy(const std::string& device)
{
    const auto d = parseDevice(device);
    return !d || !d->is_cuda() || cudaContextHealthy(d->has_index() ? d->index() : 0);
}

std::optional<bool> parseFlag(std::string_view text)
{
    return env::parseFlag(text);
}

MemoryBudget measureBudget(const std::string& device)
{
    MemoryBudget b;
    b.hostAvailableBytes = families::hostAvailableBytes();
    if (auto d = parseDevice(device); d && d->is_cuda()) {
        const auto [freeBytes, totalBytes] = cudaMemoryInfo(*d);
        // Memory the caching allocator holds but does not use is free for our purposes.
        b.deviceFreeBytes = freeBytes;
        b.deviceTotalBytes = totalBytes;
    }
    return b;
}

ProcessSettings ProcessSettings::capture()
{
    ProcessSettings s;
    s.threads = at::get_num_threads();
    s.attentionKernel = std::string(nn::attentionKernelName(nn::attentionKernel()));
    s.fp8FastAccumulation = quant::fp8FastAccumulation();
    s.tf32Matmul = at::globalContext().allowTF32CuBLAS();
    s.tf32Cudnn = at::globalContext().allowTF32CuDNN();
    return s;
}

void ProcessSettings::apply() const
{
    if (threads > 0 && at::get_num_threads() != threads)
        at::set_num_threads(threads);
    if (auto k = nn::parseAttentionKernel(attentionKernel))
        nn::setAttentionKernel(*k);
    quant::setFp8FastAccumulation(fp8FastAccumulation);
    at::globalContext().setAllowTF32CuBLAS(tf32Matmul);
    at::globalContext().setAllowTF32CuDNN(tf32Cudnn);
}

}  // namespace vireo::facade
