#pragma once

// The latent upsampler of the LTX-2 / LTX-2.3 two-stage pipelines, ported from diffusers 0.42.1
// (pipelines/ltx2/latent_upsampler.py: LTX2LatentUpsamplerModel) and read in both layouts users
// download: the diffusers `latent_upsampler/` folder and the Lightricks single files
// (ltx-2-spatial-upscaler-x2-1.0, ltx-2.3-spatial-upscaler-x2-1.1 / x1.5-1.0, the temporal x2
// files), whose tensor names are the same module paths (ltx-core model/upsampler/model.py) and
// whose __metadata__["config"] is ltx-core's LatentUpsampler config.

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <stop_token>
#include <string>

namespace vireo::ltx2 {

// LTX2LatentUpsamplerModel's config, diffusers' names and defaults. ltx-core spells the last two
// `spatial_scale` and `rational_resampler` (and defaults mid_channels to 512, the resampler off).
struct LatentUpsamplerConfig {
    std::int64_t inChannels = 128;
    std::int64_t midChannels = 1024;
    std::int64_t numBlocksPerStage = 4;
    std::int64_t dims = 3;  // 3: Conv3d everywhere but the spatial upsampler; 2: every conv per frame
    bool spatialUpsample = true;
    bool temporalUpsample = false;
    // Only read for a spatial-only upsampler with the rational resampler: 0.75, 1.5, 2.0 or 4.0.
    double rationalSpatialScale = 2.0;
    // false: Conv2d + PixelShuffle(2), always x2 (LTX-2.3's x2 files).
    bool useRationalResampler = true;
};

// latent_upsampler/config.json text -> config, bounds-checked. Absent keys keep diffusers'
// defaults; a config of another class is refused.
Result<LatentUpsamplerConfig> latentUpsamplerConfigFromDiffusers(const std::string& json);
// A Lightricks file's __metadata__["config"] (ltx-core keys and defaults), bounds-checked.
// NotFound when the JSON is no LatentUpsampler config (another model's, or none of its keys).
Result<LatentUpsamplerConfig> latentUpsamplerConfigFromLtxCore(const std::string& json);
// "spatial x1.5 (rational 3/2), Conv3d, 128 -> 1024 channels, 4 + 4 ResBlocks"
std::string describeLatentUpsampler(const LatentUpsamplerConfig& config);

// Headers only: whether a file or folder is an LTX-2 latent upsampler, and its config (from
// config.json, else the embedded ltx-core config, else the tensor shapes), checked against
// every tensor's shape. A folder holding `latent_upsampler/` (a diffusers repo) is read there.
// NotFound: not a latent upsampler (a DiT, a VAE, ...); InvalidFormat: an upsampler whose
// tensors or config are broken; Unsupported: a config this port does not run.
Result<LatentUpsamplerConfig> probeLatentUpsampler(const std::filesystem::path& fileOrFolder);

struct LatentUpsamplerLoadOptions {
    c10::Device device = c10::kCPU;
    c10::ScalarType dtype = c10::kFloat;  // compute dtype: float32, bfloat16 or float16
};

class LatentUpsampler {
public:
    ~LatentUpsampler();
    LatentUpsampler(LatentUpsampler&&) noexcept;
    LatentUpsampler& operator=(LatentUpsampler&&) noexcept;

    static Result<LatentUpsampler> load(const std::filesystem::path& fileOrFolder, const LatentUpsamplerLoadOptions& options = {});

    // latents: DE-normalized [B, C, F, H, W]. Returns [B, C, F', H', W'] in the compute dtype
    // (LTX2LatentUpsamplerModel.forward): F' = 2F - 1 when upsampling in time (the first frame
    // of the doubled sequence is dropped), H' = ceil(H * s) for the spatial scale s.
    Result<at::Tensor> upsample(const at::Tensor& latents, std::stop_token stop = {}) const;
    // The pipelines' step on normalized latents, float32 in and out: x * std + mean, upsample,
    // (y - mean) / std, with the video VAE's per-channel statistics (both [C]).
    Result<at::Tensor> upsampleNormalized(
        const at::Tensor& latents, const at::Tensor& latentsMean, const at::Tensor& latentsStd, std::stop_token stop = {}) const;

    const LatentUpsamplerConfig& config() const;
    double spatialScale() const;  // 1 when only upsampling in time
    int temporalScale() const;  // 2 or 1
    std::int64_t residentBytes() const;
    c10::Device device() const;
    c10::ScalarType dtype() const;

private:
    struct Impl;
    explicit LatentUpsampler(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::ltx2
