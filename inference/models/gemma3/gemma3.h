#pragma once

// Gemma 3's language model as LTX-2's text encoder, ported from transformers 5.24
// (models/gemma3/modeling_gemma3.py: Gemma3TextModel inside Gemma3ForConditionalGeneration),
// and Gemma 4's unified one as LTX-2.5's (models/gemma4_unified/modeling_gemma4_unified.py:
// Gemma4UnifiedTextModel inside Gemma4UnifiedForConditionalGeneration). The two share the
// layer structure; Gemma 4 differs in the norms (w, not 1 + w), an unscaled attention with a
// weightless norm on the values, wider full-attention heads with fewer key/value heads whose
// values may be the raw keys, proportional (partial) RoPE on those, and a learned scalar per
// layer. forward() returns what diffusers' LTX2Pipeline._get_gemma_prompt_embeds builds from
// output_hidden_states=True: the embeddings, the output of every layer but the last, and the
// final-norm output of the last layer, stacked on a new last axis.
//
// Padded query rows (left padding): a padded position attends to nothing (every key it may
// see is padding), so its attention output is zero, exactly as torch's SDPA returns for a
// fully masked row; the row then only carries its own embedding through the MLPs. This port
// zeroes those rows explicitly, so the values match transformers on any device and backend
// instead of depending on how a fused kernel treats an all-masked row. Downstream, the LTX-2
// connectors drop padded rows with masked_fill / where anyway.

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

namespace vireo::gemma3 {

enum class LayerType { Sliding, Full };

struct RopeConfig {
    double theta = 10000.0;
    double linearFactor = 1.0;  // rope_type "linear": inverse frequencies / factor; 1 = "default"
    // rope_type "proportional" (Gemma 4): only the first partial * headDim / 2 frequencies
    // turn, the others are 0 (the rotation covers the whole head).
    bool proportional = false;
    double partialRotaryFactor = 1.0;
};

enum class Family { Gemma3, Gemma4 };

// Gemma3TextConfig or Gemma4UnifiedTextConfig; the defaults are transformers' (a config.json
// only lists what differs), Gemma 3's here and Gemma 4's where parseTextConfig reads one.
struct TextConfig {
    Family family = Family::Gemma3;
    std::int64_t vocabSize = 262208;
    std::int64_t hiddenSize = 2304;
    std::int64_t intermediateSize = 9216;
    std::int64_t layers = 26;
    std::int64_t heads = 8;
    std::int64_t kvHeads = 4;
    std::int64_t headDim = 256;
    double rmsNormEps = 1e-6;
    double queryPreAttnScalar = 256.0;
    std::int64_t slidingWindow = 4096;
    std::vector<LayerType> layerTypes;  // one per layer
    RopeConfig ropeFull{1'000'000.0, 1.0};
    RopeConfig ropeSliding{10'000.0, 1.0};
    bool attentionBias = false;
    bool geluTanh = true;  // gelu_pytorch_tanh; false = exact gelu
    bool tieLastHiddenStates = true;  // the last hidden state is the final norm's output
    // Gemma3Model replaces this id by 0 before the embedding when it is outside the vocabulary.
    std::optional<std::int64_t> imageTokenId;
    // How an image's soft tokens attend to each other while the prompt is read: both ways on
    // every layer (Gemma 3), on sliding layers only (Gemma 4 with use_bidirectional_attention
    // "vision"), or causally like text (Gemma 4 without it: gemma-4-E2B-it and the small ones).
    enum class ImageAttention { BothWays, BothWaysSliding, Causal };
    ImageAttention imageAttention = ImageAttention::BothWays;

    // Gemma 4: full-attention layers' head width and key/value heads (0: as the sliding ones),
    // and whether their values are the raw key projection (attention_k_eq_v: no v_proj).
    std::int64_t fullHeadDim = 0, fullKvHeads = 0;
    bool fullKeyIsValue = false;
    // Gemma 4's multimodal placeholders (image, video, audio): swapped to padTokenId before the
    // embedding, whatever the vocabulary.
    std::vector<std::int64_t> placeholderIds;
    std::int64_t padTokenId = 0;

    // Gemma 4's dense models (Gemma4TextConfig: gemma-4-E2B-it, LTX-2.5's prompt enhancer), read
    // only as a causal language model: per-layer embeddings (PLE) of perLayerDim values per
    // layer (0: none) from a table of perLayerVocab rows plus a projection of the embeddings;
    // the last kvSharedLayers layers reuse the keys and values of the last earlier layer of
    // their type and, with doubleWideMlp, have twice as wide an MLP; logits soft-capped.
    bool dense = false;
    std::int64_t perLayerDim = 0, perLayerVocab = 0, kvSharedLayers = 0;
    bool doubleWideMlp = false;
    std::optional<double> finalLogitSoftcap;
    bool tieWordEmbeddings = true;
    std::vector<std::int64_t> eosIds;  // the config's eos_token_id (one or a list)

    std::int64_t headDimOf(LayerType t) const { return t == LayerType::Full && fullHeadDim > 0 ? fullHeadDim : headDim; }
    std::int64_t kvHeadsOf(LayerType t) const { return t == LayerType::Full && fullKvHeads > 0 ? fullKvHeads : kvHeads; }
    const char* familyName() const { return family == Family::Gemma4 ? "Gemma 4" : "Gemma 3"; }
    // The layer whose keys and values layer i attends with: i itself, or under key/value
    // sharing the last layer of its type before the shared ones.
    std::int64_t kvSourceOf(std::int64_t i) const;

    // LTX-2's text encoder, google/gemma-3-12b-it(-qat-q4_0-unquantized) (ltx-core
    // text_encoders/gemma/config.py): used when a weights file comes without config.json.
    static TextConfig gemma3_12b();
};

// config.json of a Gemma3ForConditionalGeneration (its text_config) or of a Gemma3TextConfig,
// in the current (layer_types, rope_parameters) or the older (sliding_window_pattern,
// rope_theta, rope_local_base_freq, rope_scaling) form; or of a
// Gemma4UnifiedForConditionalGeneration / Gemma4UnifiedTextConfig (per_layer_config, or
// global_head_dim and num_global_key_value_heads). origin names the file in errors.
Result<TextConfig> parseTextConfig(const std::string& configJson, const std::string& origin);
// A tensor of a Gemma 3 checkpoint the text encoder never loads (the vision tower, its
// projector, the LM head): what a memory plan leaves out.
bool isUnusedByTextEncoder(const std::string& name);

// Gemma's RMS norm, in float32 and back to x's dtype: x * rsqrt(mean(x^2) + eps) (Gemma 3), or
// with pow(., -0.5) as Gemma 4 writes it for JAX parity; times scale (float32: Gemma 3's 1 + w
// already added, Gemma 4's w), or without one when scale is undefined (Gemma 4's value norm).
at::Tensor gemmaNorm(const at::Tensor& x, const at::Tensor& scale, double eps, Family family = Family::Gemma3);
// RoPE's rotate_half: the last dimension's halves swapped, the first negated.
at::Tensor rotateHalf(const at::Tensor& x);

struct TextEncoderLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;  // compute dtype; quantized weights stay quantized
    std::optional<TextConfig> config;  // instead of config.json
};

class TextEncoder {
public:
    ~TextEncoder();
    TextEncoder(TextEncoder&&) noexcept;
    TextEncoder& operator=(TextEncoder&&) noexcept;

    // A text_encoder folder (config.json + safetensors, sharded or not), a diffusers pipeline
    // folder (its text_encoder component), or one weights file (config.json beside it, else
    // options.config, else Gemma 3 12B when the shapes are its). Language-model keys may be
    // `language_model.model.*` (what save_pretrained writes), `model.language_model.*` (the
    // module names), `model.*` (Gemma3ForCausalLM) or bare (Gemma3TextModel); the vision tower,
    // the projector and lm_head are ignored.
    static Result<TextEncoder> load(const std::filesystem::path& path, const TextEncoderLoadOptions& options = {});

    // inputIds, attentionMask: [B, T] integers (mask 1 = token, 0 = padding; LTX-2 pads on the
    // left). Returns [B, T, hidden, layers + 1] in the compute dtype on the model's device;
    // diffusers flattens the last two axes (feature index d * (layers + 1) + l).
    Result<at::Tensor> forward(const at::Tensor& inputIds, const at::Tensor& attentionMask, std::stop_token stop = {}) const;

    const TextConfig& config() const;
    c10::Device device() const;
    c10::ScalarType dtype() const;
    // Bytes of every weight as held (quantized ones at their stored size), and per representation.
    std::int64_t residentBytes() const;
    std::map<std::string, std::int64_t> bytesByRepresentation() const;

private:
    friend class CausalLm;
    struct Impl;
    explicit TextEncoder(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

// transformers' NoRepeatNGramLogitsProcessor for one sequence: the tokens that would complete
// an n-gram `sequence` already holds (those that followed an earlier occurrence of its last
// n - 1 tokens). Empty while the sequence is shorter than n - 1 tokens or n < 1.
std::vector<std::int64_t> noRepeatNgramBans(const std::vector<std::int64_t>& sequence, int n);

// transformers' multinomial sampling (generate(do_sample=True)): the scores divided by the
// temperature, cut to the top k, then to the smallest set holding top_p of the probability,
// softmaxed (where the logits are), and one token drawn by torch.multinomial from a CPU
// generator seeded with `seed`, as torch.manual_seed(seed) before generate on the CPU gives.
// The draw is made on the CPU whatever the model's device: a seed draws the same numbers on
// every machine (the probabilities they pick from differ by the device's rounding only).
struct Sampling {
    double temperature = 1.0;
    std::int64_t topK = 50;  // 0: off
    double topP = 1.0;  // 1: off
    std::uint64_t seed = 0;
};

// What a model's generation_config.json asks of generate, transformers' defaults where it is
// silent (GenerationConfig._get_default_generation_params).
struct GenerationDefaults {
    std::vector<std::int64_t> eosIds;  // empty: none given
    bool doSample = false;
    double temperature = 1.0;
    std::int64_t topK = 50;
    double topP = 1.0;
    // Sampling fields it sets that this port does not apply (min_p, typical_p, ...): said, not dropped.
    std::vector<std::string> unapplied;
};
// generation_config.json's text; origin names it in errors (a temperature that is not a positive
// number, top_k below 0, top_p outside (0, 1]).
Result<GenerationDefaults> parseGenerationConfig(const std::string& text, const std::string& origin);

struct GenerateOptions {
    int maxNewTokens = 600;
    int noRepeatNgram = 0;  // 0: off
    std::optional<Sampling> sampling;  // empty: greedy
    std::vector<std::int64_t> eosIds;  // empty: the model's (generation_config.json, else config.json)
    std::function<void(int done, int total)> progress;  // after every new token
    // With an image: the vision tower's embeddings [n, hidden] in place of the prompt's n image
    // placeholder tokens (config().imageTokenId), which attend to each other within one image's
    // run while the prompt is read as config().imageAttention says (Gemma3Model's masks with
    // token_type_ids, Gemma4Model's with mm_token_type_ids).
    at::Tensor imageFeatures;
};

struct Generation {
    std::vector<std::int64_t> ids;  // the new tokens, the EOS that stopped them included
    at::Tensor logits;  // float32 [new tokens, vocab]: each step's soft-capped logits, before the n-gram rule
    bool stoppedAtEos = false;
};

// A Gemma 3 or Gemma 4 language model with its (tied) LM head, generating greedily with a
// key/value cache: what transformers' generate(do_sample=False, no_repeat_ngram_size=n) does
// for one left-padded prompt (positions count real tokens only; the sliding window and the
// causal order go by index in the padded sequence). Loads a Gemma4ForConditionalGeneration /
// Gemma3ForConditionalGeneration folder (its towers ignored), a diffusers pipeline's
// `prompt_enhancer` component, or one weights file with config.json beside it. The per-layer
// embedding table stays in host memory (it is read one row per token and is, for E2B, almost
// half the model).
class CausalLm {
public:
    ~CausalLm();
    CausalLm(CausalLm&&) noexcept;
    CausalLm& operator=(CausalLm&&) noexcept;

    static Result<CausalLm> load(const std::filesystem::path& path, const TextEncoderLoadOptions& options = {});
    // The language model of a loaded text encoder, sharing its weights (no copy, no reload):
    // LTX-2.0/2.3's Gemma 3 writes the enhanced prompt it then encodes. Gemma 3 only (LTX-2.5's
    // unified Gemma 4 is not trained to write).
    static Result<CausalLm> sharing(const TextEncoder& encoder);

    // inputIds, attentionMask: [1, T] (mask 0 = left padding). Cancelled between tokens.
    Result<Generation> generate(
        const at::Tensor& inputIds, const at::Tensor& attentionMask, const GenerateOptions& options, std::stop_token stop = {}) const;

    const TextConfig& config() const;
    const std::vector<std::int64_t>& eosIds() const;
    // generation_config.json's (transformers' defaults without one; eosIds as eosIds()).
    const GenerationDefaults& generationDefaults() const;
    std::int64_t residentBytes() const;  // on the device; the per-layer table is counted apart
    std::int64_t hostBytes() const;

private:
    struct Impl;
    explicit CausalLm(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::gemma3
