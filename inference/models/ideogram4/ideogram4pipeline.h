#pragma once

// Text to image with Ideogram-4, following diffusers 0.42.1's Ideogram4Pipeline: the prompt in
// Qwen3-VL's chat template, the 13 tapped text-tower layers as per-token features, the
// resolution-aware logit-normal flow-matching schedule, asymmetric guidance (the conditional
// DiT on text + image tokens, the unconditional DiT on image tokens only, blended
// g * v_cond + (1 - g) * v_uncond), Euler steps in float32, then the FLUX.2 VAE decoder on the
// de-normalized, unpatchified latents.

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace vireo::pipelines {

struct Ideogram4PipelineOptions {
    // A diffusers Ideogram-4 folder: tokenizer/, text_encoder/, transformer/,
    // unconditional_transformer/, vae/ (and scheduler/, which must be the identity shift).
    std::filesystem::path modelPath;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    // Both transformers' blocks in host memory, streamed to the device one at a time: for a
    // GPU that cannot hold the two DiTs together (slower, the PCIe copies dominate).
    bool offloadTransformerBlocks = false;
};

struct Ideogram4Request {
    std::string prompt;
    std::int64_t width = 2048, height = 2048;  // multiples of 16
    int steps = 48;
    // Per step, noisiest first. Empty: the reference's default (45 x 7.0 then 3 x 3.0) when
    // steps is 48 and guidanceScale is unset, else guidanceScale at every step.
    std::vector<double> guidanceSchedule;
    std::optional<double> guidanceScale;
    double mu = 0.0, std = 1.5;
    std::int64_t seed = 0;
    std::int64_t maxSequenceLength = 2048;  // the prompt may not be longer (in tokens)
    // Start state instead of seeded noise: [height/16 * width/16, 128] float32.
    std::optional<at::Tensor> noise;
};

struct Ideogram4Progress {
    std::string phase;  // "encode", "denoise", "decode"
    std::int64_t done = 0, total = 0;
    // After each denoise step (done = 1..total): the current clean estimate, the reference's
    // x0 = x - sigma * (-v) (the Euler step to sigma 0), as the VAE decoder takes it:
    // de-normalized and unpatchified, float32 [1, C, 2 gridH, 2 gridW] on the compute device.
    // The last step's is the latent the image decodes from. Empty in other reports.
    at::Tensor estimate;
};

struct Ideogram4Output {
    at::Tensor image;  // uint8 [H, W, 3]
    at::Tensor decoded;  // float32 [3, H, W] in [0, 1] (the reference's "pt" output)
    at::Tensor finalLatents;  // float32 [tokens, 128], packed
    std::vector<double> sigmas, guidance;
    std::vector<std::int64_t> promptIds;
};

// The resolution-aware logit-normal sigmas, noisiest first, N values then the terminal 0,
// rounded to float32 as the reference hands them to its scheduler.
std::vector<float> ideogram4Sigmas(int steps, std::int64_t height, std::int64_t width, double mu, double std);
// The start state for a seed: [tokens, channels] float32 on the CPU, the values of diffusers'
// randn_tensor with torch.Generator("cpu").manual_seed(seed) (a CUDA generator draws others).
at::Tensor ideogram4Noise(std::int64_t seed, std::int64_t tokens, std::int64_t channels);
// The guidance weights a request resolves to (errors name the mismatch).
Result<std::vector<double>> ideogram4Guidance(const Ideogram4Request& request);
// Packed latents [gridH * gridW, C * 4] (bn-normalized, token channel (ph, pw, c)) -> what the
// FLUX.2 decoder takes: [1, C, 2 gridH, 2 gridW], de-normalized with bn's mean and std
// ([C * 4], VaeDecoder::latentMean / latentStd).
at::Tensor ideogram4DecoderLatents(
    const at::Tensor& packed, std::int64_t gridH, std::int64_t gridW, const at::Tensor& mean, const at::Tensor& std);
// The token layout of a spatial latent, no normalization: [1, C, 2 gridH, 2 gridW] -> [tokens, C * 4].
at::Tensor ideogram4Patchify(const at::Tensor& spatial);

class Ideogram4Pipeline {
public:
    ~Ideogram4Pipeline();
    Ideogram4Pipeline(Ideogram4Pipeline&&) noexcept;
    Ideogram4Pipeline& operator=(Ideogram4Pipeline&&) noexcept;

    static Result<Ideogram4Pipeline> load(const Ideogram4PipelineOptions& options, std::stop_token stop = {});
    Result<Ideogram4Output> generate(const Ideogram4Request& request, const std::function<void(const Ideogram4Progress&)>& progress = {},
        std::stop_token stop = {}) const;
    // A linear map from the decoder's latent channels to RGB in [-1, 1] ([C + 1, 3], the last
    // row the offset), fitted by ridge regression to what this model's FLUX.2 decoder makes of
    // a smooth random latent: previews of Ideogram4Progress::estimate at the cost of a matrix
    // product. Computed once.
    Result<at::Tensor> previewProjection();

private:
    struct Impl;
    explicit Ideogram4Pipeline(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::pipelines
