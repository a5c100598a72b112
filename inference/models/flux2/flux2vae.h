#pragma once

// The decoder of FLUX.2's VAE (diffusers 0.42.1 models/autoencoders/autoencoder_kl_flux2.py:
// AutoencoderKLFlux2 = post_quant_conv + vae.py's Decoder), with the latent statistics its
// `bn` buffers hold (per packed channel: 2 x 2 patches of the latent channels). Ideogram-4
// decodes with it; only the diffusers layout is read (the encoder and quant_conv are ignored).

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace vireo::flux2 {

// AutoencoderKLFlux2's config; the defaults are diffusers' (FLUX.2's).
struct VaeConfig {
    std::int64_t latentChannels = 32;
    std::int64_t outChannels = 3;
    std::vector<std::int64_t> blockOut{128, 256, 512, 512};  // decoder_block_out_channels when set
    std::int64_t layersPerBlock = 2;  // the decoder has one more per level
    std::int64_t groups = 32;
    bool midAttention = true;
    bool postQuantConv = true;
    double batchNormEps = 1e-4;
    std::vector<std::int64_t> patch{2, 2};

    std::int64_t scaleFactor() const { return std::int64_t{1} << (blockOut.size() - 1); }
};

Result<VaeConfig> parseVaeConfig(const std::string& configJson, const std::string& origin);

struct VaeLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::optional<VaeConfig> config;
    std::string component = "vae";  // the sub-folder read when the path is a pipeline
};

class VaeDecoder {
public:
    ~VaeDecoder();
    VaeDecoder(VaeDecoder&&) noexcept;
    VaeDecoder& operator=(VaeDecoder&&) noexcept;

    static Result<VaeDecoder> load(const std::filesystem::path& path, const VaeLoadOptions& options = {});

    // z: [B, latentChannels, h, w] -> [B, outChannels, h * scale, w * scale] in the compute
    // dtype (values around [-1, 1], not clamped).
    Result<at::Tensor> decode(const at::Tensor& z, std::stop_token stop = {}) const;

    // bn's running statistics, float32 [latentChannels * patch^2]: mean and sqrt(var + eps).
    const at::Tensor& latentMean() const;
    const at::Tensor& latentStd() const;
    const VaeConfig& config() const;
    std::int64_t residentBytes() const;

private:
    struct Impl;
    explicit VaeDecoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::flux2
