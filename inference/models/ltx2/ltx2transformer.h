#pragma once

// The LTX-2 / 2.3 / 2.5 audio-video DiT, ported from diffusers 0.42.1
// (LTX2VideoTransformer3DModel, models/transformers/transformer_ltx2.py).

#include "inference/models/ltx2/ltx2config.h"
#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <vector>

namespace vireo::tensorfile {
struct TensorSet;
}
namespace vireo::lora {
struct Target;
}
namespace vireo::nn {
struct Linear;
struct LoraDelta;
}  // namespace vireo::nn

namespace vireo::ltx2 {

class Ltx2Weights;

// The first-block step cache of the "balanced" and "fast" speed modes: when the first block's
// residual barely changed since the last fully computed step, the other blocks are skipped
// and the residual they added then is added again. The reference residual moves only on a
// full step, so small changes cannot add up unseen. With classifier-free guidance in one
// batch, every branch (batch row) must be under the threshold for a step to be skipped. One
// cache serves one clip: the pipeline makes a new one per request.
struct StepCache {
    double threshold = 0.0;  // relative L1 change of the first block's residual; 0: never skip
    int maxConsecutive = 1;  // skipped steps in a row before a full step is forced
    bool allowSkip = true;  // set per step by the caller (the first and last steps compute)

    // What the last call decided; counts over the clip.
    bool skipped = false;
    double change = -1.0;  // -1: nothing to compare with
    int skips = 0, computed = 0;

    at::Tensor firstVideo, firstAudio;  // first block's residual at the last full step
    at::Tensor restVideo, restAudio;  // what the other blocks added at that step
    int consecutive = 0;
    void reset();
};

struct TransformerInputs {
    at::Tensor hiddenStates;  // [B, Tv, in_channels], tokens f-major then h, w
    at::Tensor audioHiddenStates;  // [B, Ta, audio_in_channels]
    at::Tensor encoderHiddenStates;  // [B, L, caption_channels (2.0) | cross_attention_dim (2.3)]
    at::Tensor audioEncoderHiddenStates;  // [B, L, caption_channels (2.0) | audio_cross_attention_dim (2.3)]
    at::Tensor timestep;  // sigma * 1000: [B] or per video token [B, Tv]
    std::optional<at::Tensor> audioTimestep;  // [B] or [B, Ta]; default: timestep
    std::optional<at::Tensor> sigma;  // [B] sigma * 1000 for the 2.3 prompt AdaLN; default: timestep when [B]
    std::optional<at::Tensor> audioSigma;  // default: sigma
    std::optional<at::Tensor> encoderAttentionMask;  // [B, L], 1 = attend
    std::optional<at::Tensor> audioEncoderAttentionMask;
    std::int64_t numFrames = 0, height = 0, width = 0;  // latent grid, for RoPE
    std::int64_t audioNumFrames = 0;
    double fps = 24.0;
    std::optional<at::Tensor> videoCoords;  // [B, 3, Tv, 2] pixel-space bounds, instead of the grid
    // Tokens appended after the grid's (keyframe conditions): their [B, 3, K, 2] bounds, added
    // to the grid's coordinates (or to videoCoords).
    std::optional<at::Tensor> extraVideoCoords;
    std::optional<at::Tensor> audioCoords;  // [B, 1, Ta, 2]
    // 2.5: [B, Tv] or [B, Tv, 1], > 0 where a token's latent frame encodes one pixel frame
    // (the causal first frame, keyframe slots); those get the keyframe embedding.
    std::optional<at::Tensor> videoKeyframesMask;
    // [B, Tv, Tv], 1 = a video query may attend to that key (DFR passes); none: all.
    std::optional<at::Tensor> videoSelfAttentionMask;
    bool isolateModalities = false;  // no audio<->video cross-attention (modality guidance)
    bool useCrossTimestep = false;  // cross-modal modulation from the other modality's sigma
    std::vector<int> stgBlocks;  // spatio-temporal guidance: self-attention -> values
    // Which streams' self-attention STG perturbs: both, as diffusers does; ltx-core perturbs a
    // stream only where its own STG scale is set.
    bool stgVideo = true, stgAudio = true;
    std::optional<at::Tensor> perturbationMask;  // [B], 0 = perturbed; default all perturbed
    // Whether every row of perturbationMask is perturbed, when the caller knows: the forward
    // then reads no mask value on the host (a device sync, which a CUDA graph cannot capture).
    std::optional<bool> allPerturbed;
    // [B], 0 where a row runs without the audio-video cross-attention (modality guidance batched
    // with other branches); isolateModalities drops it for every row instead.
    std::optional<at::Tensor> isolationMask;
    std::stop_token stop;  // checked between blocks
    StepCache* stepCache = nullptr;  // none: every block runs
    std::function<void(int block, const at::Tensor& video, const at::Tensor& audio)> onBlock;
};

// Inputs from named tensors (the dit-forward file format): hidden_states,
// audio_hidden_states, encoder_hidden_states, audio_encoder_hidden_states, timestep,
// optional audio_timestep, sigma, audio_sigma, encoder_attention_mask,
// audio_encoder_attention_mask, video_coords, audio_coords, perturbation_mask,
// video_keyframes_mask, video_self_attention_mask; sizes (int64
// [num_frames, height, width, audio_num_frames]) unless coords are given; fps ([1]); and the
// metadata flags isolate_modalities, use_cross_timestep ("0"/"1") and stg_blocks ("1,2").
Result<TransformerInputs> transformerInputsFrom(const tensorfile::TensorSet& set);

struct TransformerOutputs {
    at::Tensor video;  // velocity [B, Tv, out_channels]
    at::Tensor audio;  // [B, Ta, audio_out_channels]
};

struct TransformerLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;  // compute dtype; quantized weights stay quantized
    std::optional<TransformerConfig> config;  // overrides what the checkpoint says or implies
    // The blocks stay in (page-locked) host memory and are copied to the device one at a
    // time during a forward: a model larger than the device runs, slower.
    bool offloadBlocks = false;
};

// Config from the checkpoint (diffusers config.json, else the embedded ltx-core config, else
// the tensor shapes), checked against the shapes in the headers. No weight bytes are read.
Result<TransformerConfig> resolveTransformerConfig(const Ltx2Weights& weights, const std::optional<TransformerConfig>& override);

// LTX2AudioVideoRotaryPosEmbed.prepare_video_coords (patch size 1): [1, 3, F H W, 2], the
// [start, end) of every latent cell in pixel space, time shifted for the causal first frame and
// in seconds at fps.
at::Tensor videoCoordsFor(
    const TransformerConfig& config, std::int64_t frames, std::int64_t height, std::int64_t width, double fps, c10::Device device);

// The same targets from the checkpoint's headers, before (or without) loading it.
std::vector<lora::Target> loraTargetsFromHeaders(const Ltx2Weights& weights);

class Transformer {
public:
    ~Transformer();
    Transformer(Transformer&&) noexcept;
    Transformer& operator=(Transformer&&) noexcept;

    static Result<Transformer> load(const Ltx2Weights& weights, const TransformerLoadOptions& options = {});

    Result<TransformerOutputs> forward(const TransformerInputs& inputs) const;

    const TransformerConfig& config() const;
    c10::ScalarType dtype() const;
    c10::Device device() const;
    // Bytes of every weight as held (quantized ones at their stored size), and per representation.
    std::int64_t residentBytes() const;
    std::map<std::string, std::int64_t> bytesByRepresentation() const;
    // How many linear layers multiply by each path on this model's device and dtype
    // ("FP8 tensor-core GEMM", "dequantize + GEMM: <reason>", ...), known at load.
    std::map<std::string, int> matmulPaths() const;
    bool offloadsBlocks() const;
    // Changes whenever what a forward reads from memory changes (a load, new LoRA adapters),
    // unique across models: a captured CUDA graph holds the addresses it read.
    std::uint64_t generation() const;

    // Every canonical linear layer (diffusers name with its ltx-core alias, shape), the
    // projections fused into one GEMM listed one by one: what a LoRA can aim at.
    std::vector<lora::Target> loraTargets() const;
    // Replaces every layer's LoRA adapters by these (none: the plain model), without touching
    // a weight; fails without changing anything when a delta names no layer or does not fit.
    // Returns the bytes the adapters hold.
    Result<std::int64_t> setLoraDeltas(const std::vector<nn::LoraDelta>& deltas);

private:
    struct Impl;
    explicit Transformer(std::unique_ptr<Impl> impl);
    void visitLinears(const std::function<void(const nn::Linear&)>& f) const;
    void visitLinearsMutable(const std::function<void(nn::Linear&)>& f);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::ltx2
