#pragma once

// The LTX-2 vocoders, ported from diffusers 0.42.1 (pipelines/ltx2/vocoder.py):
// 2.0 LTX2Vocoder (HiFi-GAN, LeakyReLU, 24 kHz) and 2.3 LTX2VocoderWithBWE (BigVGAN-v2 with
// anti-aliased SnakeBeta activations at 16 kHz, then a bandwidth extension to 48 kHz: causal
// STFT -> log-mel -> a second BigVGAN predicting a residual over a Hann-sinc x3 resampling).

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace vireo::ltx2 {

class Ltx2Weights;

enum class VocoderActivation { LeakyRelu, Snake, SnakeBeta };
enum class VocoderFinalActivation { None, Tanh, Clamp };

// One LTX2Vocoder generator (diffusers names and defaults: the published 2.0 vocoder).
struct VocoderStageConfig {
    std::int64_t inChannels = 128;  // stereo x mel bins, channel = s * mel_bins + m
    std::int64_t hiddenChannels = 1024;
    std::int64_t outChannels = 2;
    std::vector<std::int64_t> upsampleKernelSizes{16, 15, 8, 4, 4};
    std::vector<std::int64_t> upsampleFactors{6, 5, 2, 2, 2};
    std::vector<std::int64_t> resnetKernelSizes{3, 7, 11};
    std::vector<std::vector<std::int64_t>> resnetDilations{{1, 3, 5}, {1, 3, 5}, {1, 3, 5}};
    VocoderActivation act = VocoderActivation::LeakyRelu;
    double leakyReluNegativeSlope = 0.1;
    bool antialias = false;  // snake activations wrapped in x2 up / act / x2 down Kaiser-sinc filters
    std::int64_t antialiasRatio = 2, antialiasKernelSize = 12;
    VocoderFinalActivation finalAct = VocoderFinalActivation::Tanh;
    bool finalBias = true;
    std::int64_t outputSamplingRate = 24000;

    std::int64_t samplesPerFrame() const;
};

struct VocoderConfig {
    VocoderStageConfig vocoder;  // 2.0: the whole model; 2.3: the 16 kHz stage
    bool bwe = false;  // 2.3: LTX2VocoderWithBWE
    VocoderStageConfig bweGenerator;
    std::int64_t filterLength = 512, hopLength = 80, windowLength = 512, numMelChannels = 64;
    std::int64_t inputSamplingRate = 16000, outputSamplingRate = 48000;

    std::int64_t sampleRate() const { return bwe ? outputSamplingRate : vocoder.outputSamplingRate; }
    std::string version() const { return bwe ? "2.3" : "2.0"; }
};

// config.json of a diffusers `vocoder/` folder (LTX2Vocoder or LTX2VocoderWithBWE by its keys
// or _class_name); absent keys keep diffusers' defaults.
Result<VocoderConfig> vocoderConfigFromDiffusers(const std::string& json);
// The "vocoder" section of a Lightricks checkpoint's embedded config: flat (2.0 HiFi-GAN) or
// {"vocoder": ..., "bwe": ...} (2.3), with ltx-core's semantics. Unlike diffusers' converted
// 2.3 config (final_act_fn None), ltx-core applies the 16 kHz stage's final activation
// (clamp when use_tanh_at_final is false). inChannels is left 0: ltx-core hard-codes 128 and
// the loader reads it from conv_pre.
Result<VocoderConfig> vocoderConfigFromLtxCore(const std::string& json);
std::string toJson(const VocoderConfig& config);

struct VocoderLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    // ltx-core runs the BWE vocoder in float32 whatever the model dtype ("bf16 accumulation
    // degrades spectral metrics"); diffusers runs it in the module's dtype. Float32 is advised.
    c10::ScalarType dtype = c10::kFloat;
    std::optional<VocoderConfig> config;
};

// Config from the diffusers config.json, else the embedded ltx-core config, else diffusers'
// defaults for the class the tensors show (the published models); then checked against the
// tensor shapes. No weight bytes are read.
Result<VocoderConfig> resolveVocoderConfig(const Ltx2Weights& weights, const std::optional<VocoderConfig>& override);

class Vocoder {
public:
    ~Vocoder();
    Vocoder(Vocoder&&) noexcept;
    Vocoder& operator=(Vocoder&&) noexcept;

    static Result<Vocoder> load(const Ltx2Weights& weights, const VocoderLoadOptions& options = {});

    // mel: [B, 2, T, mel_bins] as AudioDecoder::decode returns it. Returns the waveform
    // [B, 2, samples] in the compute dtype: 2.0 T * prod(upsample_factors) samples in
    // [-1, 1] (tanh); 2.3 3x the 16 kHz stage's T * prod(upsample_factors), clamped to [-1, 1].
    Result<at::Tensor> run(const at::Tensor& mel, std::stop_token stop = {}) const;

    int sampleRate() const;
    const VocoderConfig& config() const;
    std::int64_t residentBytes() const;

private:
    struct Impl;
    explicit Vocoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::ltx2
