#pragma once

// The LTX-2 / LTX-2.3 audio VAE decoder (identical in both versions), ported from diffusers
// 0.42.1 (AutoencoderKLLTX2Audio's decoder, models/autoencoders/autoencoder_kl_ltx2_audio.py),
// together with what pipeline_ltx2.py does to the audio latents before decoding
// (_denormalize_audio_latents, _unpack_audio_latents).

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

// AutoencoderKLLTX2Audio's configuration (diffusers names and defaults, which are the real
// model's). Only the decoder is built.
struct AudioVaeConfig {
    std::int64_t baseChannels = 128;
    std::int64_t outputChannels = 2;  // stereo
    std::vector<std::int64_t> chMult{1, 2, 4};
    std::int64_t numResBlocks = 2;
    std::vector<std::int64_t> attnResolutions;  // must place no attention block (see load)
    std::int64_t resolution = 256;
    std::int64_t latentChannels = 8;
    std::string normType = "pixel";  // "pixel" only
    std::string causalityAxis = "height";  // "height", "width", "width-compatibility", "none"
    bool midBlockAddAttention = false;  // must be false
    std::int64_t sampleRate = 16000;
    std::int64_t melHopLength = 160;
    std::int64_t melBins = 64;
    // The encoder's front end: STFT length (ltx-core preprocessing.stft.filter_length; diffusers
    // states none, and ltx-core's default is 1024).
    std::int64_t nFft = 1024;
    bool doubleZ = true;  // the encoder returns mean and log-variance (2C channels)

    // The pipeline unpacks tokens with mel_bins / mel_compression_ratio (4) mel bins each.
    std::int64_t latentMelBins() const { return melBins / 4; }
    // Width of one packed latent token, C * M; latents_mean/std have this many entries.
    std::int64_t packedWidth() const { return latentChannels * latentMelBins(); }
    // Mel frames the decoder returns for L latent frames: max(4L - 3, 1).
    std::int64_t melFrames(std::int64_t latentFrames) const;
};

// config.json of a diffusers `audio_vae/` folder; absent keys keep diffusers' defaults.
Result<AudioVaeConfig> audioVaeConfigFromDiffusers(const std::string& json);
// The "audio_vae" section of a Lightricks checkpoint's embedded config (ltx-core names:
// model.params.ddconfig, model.params.sampling_rate, preprocessing.stft/mel), with ltx-core's
// defaults for absent keys.
Result<AudioVaeConfig> audioVaeConfigFromLtxCore(const std::string& json);
std::string toJson(const AudioVaeConfig& config);

struct AudioDecoderLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::optional<AudioVaeConfig> config;  // overrides what the checkpoint says
};

// Config from the diffusers config.json, else the embedded ltx-core config, else diffusers'
// defaults (the published model); then checked against the tensor shapes. No weight bytes read.
Result<AudioVaeConfig> resolveAudioVaeConfig(const Ltx2Weights& weights, const std::optional<AudioVaeConfig>& override);

class AudioDecoder {
public:
    ~AudioDecoder();
    AudioDecoder(AudioDecoder&&) noexcept;
    AudioDecoder& operator=(AudioDecoder&&) noexcept;

    static Result<AudioDecoder> load(const Ltx2Weights& weights, const AudioDecoderLoadOptions& options = {});

    // latents: *normalized, packed* audio latents as the denoising loop holds them and the
    // transformer outputs them, [B, L, C*M] (token = latent frame, feature = c * M + m).
    // Denormalized with latents_mean/std in float32 and unpacked to [B, C, L, M] as
    // pipeline_ltx2.py does, then decoded. Returns the mel spectrogram [B, 2, max(4L-3, 1),
    // mel_bins] in the compute dtype (diffusers' audio_vae.decode(...).sample).
    Result<at::Tensor> decode(const at::Tensor& latents, std::stop_token stop = {}) const;

    // [B, C, L, M] -> [B, L, C*M] (pipeline_ltx2.py _pack_audio_latents), for latents held
    // unpacked; the normalization is unchanged.
    static Result<at::Tensor> packLatents(const at::Tensor& unpacked);

    const AudioVaeConfig& config() const;
    std::int64_t residentBytes() const;

private:
    struct Impl;
    explicit AudioDecoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

// AutoencoderKLLTX2Audio's encoder (diffusers 0.42.1 LTX2AudioEncoder): a mel spectrogram
// [B, 2, T, mel_bins] to the latents a generation is conditioned on, in the form the denoising
// loop holds them: the posterior's mode (its mean), packed [B, L, C*M] and normalized with
// latents_mean/std, as pipeline_ltx2.py prepares given audio latents (_pack_audio_latents, then
// _normalize_audio_latents). Each of the two stride-2 levels takes T to floor((T - 1) / 2) + 1,
// so 4L - 3 mel frames (what the decoder makes of L latents) encode to L.
class AudioEncoder {
public:
    ~AudioEncoder();
    AudioEncoder(AudioEncoder&&) noexcept;
    AudioEncoder& operator=(AudioEncoder&&) noexcept;

    static Result<AudioEncoder> load(const Ltx2Weights& weights, const AudioDecoderLoadOptions& options = {});

    Result<at::Tensor> encode(const at::Tensor& mel, std::stop_token stop = {}) const;
    // The encoder's own output [B, 2C, L, M'] (mean, then log-variance), diffusers' encoder(x).
    Result<at::Tensor> moments(const at::Tensor& mel, std::stop_token stop = {}) const;
    // Latent frames for T mel frames.
    static std::int64_t latentFrames(const AudioVaeConfig& config, std::int64_t melFrames);

    const AudioVaeConfig& config() const;
    std::int64_t residentBytes() const;

private:
    struct Impl;
    explicit AudioEncoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::ltx2
