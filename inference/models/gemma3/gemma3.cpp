#include "inference/models/gemma3/gemma3.h"

#include "inference/util/device.h"

#include "inference/models/nn/layers.h"
#include "inference/models/nn/strictweights.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace vireo::gemma3 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool startsWith(const std::string& s, std::string_view prefix)
{
    return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

using nn::listNames;
using nn::shapeText;

// ------------------------------------------------------------------ config

using jsonutil::boolField;
using jsonutil::ConfigError;
using jsonutil::configFail;
using jsonutil::intField;
using jsonutil::numberField;
RopeConfig ropeFrom(const json& p, const char* layerType, const std::string& where)
{
    if (!p.is_object())
        configFail(where + ": rope_parameters." + layerType + " must be an object, got " + jsonutil::shortDump(p));
    RopeConfig r;
    r.theta = numberField(p, "rope_theta", 0.0, where);
    std::string type = "default";
    if (p.contains("rope_type") && p["rope_type"].is_string())
        type = p["rope_type"].get<std::string>();
    else if (p.contains("type") && p["type"].is_string())
        type = p["type"].get<std::string>();
    const double partial = p.contains("partial_rotary_factor") ? numberField(p, "partial_rotary_factor", 1.0, where) : 1.0;
    if (type == "proportional") {
        // Gemma 4's full-attention RoPE (modeling_rope_utils._compute_proportional_rope_parameters).
        r.proportional = true;
        r.partialRotaryFactor = partial;
        r.linearFactor = p.contains("factor") ? numberField(p, "factor", 1.0, where) : 1.0;
        if (!(partial > 0.0 && partial <= 1.0) || !(r.linearFactor > 0.0))
            configFail(where + ": proportional rope for " + std::string(layerType)
                + " needs 0 < partial_rotary_factor <= 1 and a positive factor");
        return r;
    }
    if (partial != 1.0)
        configFail(where + ": partial_rotary_factor " + jsonutil::shortDump(p["partial_rotary_factor"]) + " for " + layerType
            + " is not supported by this version");
    if (type == "linear") {
        r.linearFactor = numberField(p, "factor", 0.0, where);
        if (!(r.linearFactor > 0.0))
            configFail(where + ": linear rope scaling for " + std::string(layerType) + " needs a positive 'factor'");
    } else if (type != "default") {
        configFail(where + ": rope_type '" + type + "' for " + layerType
            + " is not supported by this version (default, linear and proportional are)");
    }
    return r;
}

// eos_token_id as a config or generation_config.json writes it: one id or a list (others ignored).
std::vector<std::int64_t> eosIdsOf(const json& j)
{
    std::vector<std::int64_t> ids;
    if (!j.is_object() || !j.contains("eos_token_id"))
        return ids;
    const auto& e = j["eos_token_id"];
    for (const auto& id : e.is_array() ? e : json::array({e}))
        if (id.is_number_integer() && id.get<std::int64_t>() >= 0)
            ids.push_back(id.get<std::int64_t>());
    return ids;
}

TextConfig parseGemma4(const json& top, const std::string& where);
// The text config's sizes and flags both generations name alike (absent keys keep c's values).
void readCommonFields(const json& tc, TextConfig& c, const std::string& where)
{
    c.vocabSize = intField(tc, "vocab_size", c.vocabSize, where);
    c.hiddenSize = intField(tc, "hidden_size", c.hiddenSize, where);
    c.intermediateSize = intField(tc, "intermediate_size", c.intermediateSize, where);
    c.layers = intField(tc, "num_hidden_layers", c.layers, where);
    c.heads = intField(tc, "num_attention_heads", c.heads, where);
    c.kvHeads = intField(tc, "num_key_value_heads", c.kvHeads, where);
    if (tc.contains("head_dim") && tc["head_dim"].is_null())
        configFail(where + ": head_dim is null");
    c.headDim = intField(tc, "head_dim", c.headDim, where);
    c.rmsNormEps = numberField(tc, "rms_norm_eps", c.rmsNormEps, where);
    c.attentionBias = boolField(tc, "attention_bias", false, where);
    c.tieLastHiddenStates = boolField(tc, "tie_last_hidden_states", true, where);
}
std::vector<LayerType> layerTypesFrom(const json& tc, std::int64_t layers, std::int64_t defaultPattern, const std::string& where);

TextConfig parseText(const json& top, const std::string& where)
{
    if (!top.is_object())
        configFail(where + ": is not a JSON object");
    const std::string modelType = top.contains("model_type") && top["model_type"].is_string() ? top["model_type"].get<std::string>() : "";
    if (modelType.starts_with("gemma4"))
        return parseGemma4(top, where);
    TextConfig c;
    json tc = json::object();
    if (top.contains("text_config") && !top["text_config"].is_null()) {
        if (!top["text_config"].is_object())
            configFail(where + ": 'text_config' is not an object");
        if (!modelType.empty() && modelType != "gemma3")
            configFail(where + ": is a '" + modelType + "' config, not Gemma 3 (model_type gemma3 or gemma3_text)");
        tc = top["text_config"];
        // Gemma3Config: image_token_index (alias image_token_id), default 262144.
        c.imageTokenId = top.contains("image_token_index") ? intField(top, "image_token_index", 262144, where)
                                                           : intField(top, "image_token_id", 262144, where);
    } else if (modelType == "gemma3") {
        c.imageTokenId = intField(top, "image_token_index", 262144, where);  // no text_config: all defaults
    } else if (modelType == "gemma3_text" || modelType.empty()) {
        tc = top;
    } else {
        configFail(where + ": is a '" + modelType + "' config, not Gemma 3 (model_type gemma3 or gemma3_text)");
    }
    const std::string textType = tc.contains("model_type") && tc["model_type"].is_string() ? tc["model_type"].get<std::string>() : "";
    if (!textType.empty() && textType != "gemma3_text")
        configFail(where + ": the text config is a '" + textType + "' config, not gemma3_text");

    readCommonFields(tc, c, where);
    c.queryPreAttnScalar = numberField(tc, "query_pre_attn_scalar", c.queryPreAttnScalar, where);
    if (c.vocabSize <= 0 || c.hiddenSize <= 0 || c.intermediateSize <= 0 || c.layers <= 0 || c.heads <= 0 || c.kvHeads <= 0
        || c.headDim <= 0 || c.heads % c.kvHeads != 0 || c.headDim % 2 != 0
        || !(c.queryPreAttnScalar > 0)
        // Far beyond any Gemma (12B: 262208 x 3840, 48 layers of 16 x 256); the loader loops,
        // allocates and multiplies by these.
        || c.vocabSize > (1 << 24) || c.hiddenSize > (1 << 16) || c.intermediateSize > (1 << 20) || c.layers > 1024 || c.heads > 1024
        || c.kvHeads > 1024 || c.headDim > 4096 || !(c.rmsNormEps > 0 && c.rmsNormEps < 1) || !std::isfinite(c.queryPreAttnScalar))
        configFail(where + ": inconsistent sizes (vocab " + std::to_string(c.vocabSize) + ", hidden " + std::to_string(c.hiddenSize)
            + ", layers " + std::to_string(c.layers) + ", heads " + std::to_string(c.heads) + "/" + std::to_string(c.kvHeads)
            + ", head_dim " + std::to_string(c.headDim) + ")");

    const std::string act = tc.contains("hidden_activation") && tc["hidden_activation"].is_string()
        ? tc["hidden_activation"].get<std::string>()
        : "gelu_pytorch_tanh";
    if (act == "gelu_pytorch_tanh")
        c.geluTanh = true;
    else if (act == "gelu")
        c.geluTanh = false;
    else
        configFail(where + ": hidden_activation '" + act + "' is not supported by this version (gelu_pytorch_tanh and gelu are)");

    if (boolField(tc, "use_bidirectional_attention", false, where))
        configFail(where + ": use_bidirectional_attention (EmbeddingGemma) is not supported; LTX-2 uses the causal Gemma 3");
    if (tc.contains("attn_logit_softcapping") && !tc["attn_logit_softcapping"].is_null())
        // transformers 5.24's Gemma3Attention never passes it on (its SDPA path would even
        // reject it), and Gemma 3 checkpoints leave it null; refuse rather than guess.
        configFail(where + ": attn_logit_softcapping " + jsonutil::shortDump(tc["attn_logit_softcapping"])
            + " is set; transformers 5.24 ignores it for Gemma 3 and this port does not implement it");

    // Layer types: layer_types, else the legacy sliding_window_pattern (default 6).
    c.layerTypes = layerTypesFrom(tc, c.layers, 6, where);
    const bool anySliding = std::find(c.layerTypes.begin(), c.layerTypes.end(), LayerType::Sliding) != c.layerTypes.end();
    if (tc.contains("sliding_window") && tc["sliding_window"].is_null()) {
        if (anySliding)
            configFail(where + ": sliding_window is null but some layers are sliding_attention");
    } else {
        c.slidingWindow = intField(tc, "sliding_window", c.slidingWindow, where);
        if (anySliding && c.slidingWindow <= 0)
            configFail(where + ": sliding_window must be positive");
    }

    // RoPE (Gemma3TextConfig.convert_rope_params_to_dict): nested rope_parameters per layer
    // type, or the legacy rope_scaling (global layers only), rope_theta, rope_local_base_freq.
    json rp = tc.contains("rope_parameters") && !tc["rope_parameters"].is_null() ? tc["rope_parameters"] : json::object();
    if (!rp.is_object())
        configFail(where + ": rope_parameters is not an object");
    if (!rp.empty() && !rp.contains("full_attention") && !rp.contains("sliding_attention"))
        configFail(where + ": rope_parameters is not keyed by layer type (full_attention / sliding_attention): " + jsonutil::shortDump(rp));
    if (!rp.contains("full_attention") || rp["full_attention"].is_null())
        rp["full_attention"] = json{{"rope_type", "default"}};
    if (!rp.contains("sliding_attention") || rp["sliding_attention"].is_null())
        rp["sliding_attention"] = json{{"rope_type", "default"}};
    if (tc.contains("rope_scaling") && !tc["rope_scaling"].is_null()) {
        if (!tc["rope_scaling"].is_object())
            configFail(where + ": rope_scaling is not an object");
        for (const auto& [k, v] : tc["rope_scaling"].items())
            rp["full_attention"][k] = v;
    }
    if (!rp["full_attention"].contains("rope_theta"))
        rp["full_attention"]["rope_theta"] = numberField(tc, "rope_theta", 1'000'000.0, where);
    if (!rp["sliding_attention"].contains("rope_theta"))
        rp["sliding_attention"]["rope_theta"] = numberField(tc, "rope_local_base_freq", 10'000.0, where);
    c.ropeFull = ropeFrom(rp["full_attention"], "full_attention", where);
    c.ropeSliding = ropeFrom(rp["sliding_attention"], "sliding_attention", where);
    if (!(c.ropeFull.theta > 0) || !(c.ropeSliding.theta > 0))
        configFail(where + ": rope_theta must be positive");
    return c;
}

// Layer types as listed, else the pattern of `pattern` sliding layers then one full.
std::vector<LayerType> layerTypesFrom(const json& tc, std::int64_t layers, std::int64_t defaultPattern, const std::string& where)
{
    std::vector<LayerType> types;
    if (tc.contains("layer_types") && !tc["layer_types"].is_null()) {
        if (!tc["layer_types"].is_array() || static_cast<std::int64_t>(tc["layer_types"].size()) != layers)
            configFail(where + ": layer_types must list " + std::to_string(layers) + " layer types");
        for (const auto& t : tc["layer_types"]) {
            const auto name = t.is_string() ? t.get<std::string>() : jsonutil::shortDump(t);
            if (name == "sliding_attention")
                types.push_back(LayerType::Sliding);
            else if (name == "full_attention")
                types.push_back(LayerType::Full);
            else
                configFail(where + ": layer type '" + name + "' is not supported (sliding_attention and full_attention are)");
        }
        return types;
    }
    const auto pattern = intField(tc, "sliding_window_pattern", defaultPattern, where);
    if (pattern <= 0)
        configFail(where + ": sliding_window_pattern must be positive");
    for (std::int64_t i = 0; i < layers; ++i)
        types.push_back((i + 1) % pattern ? LayerType::Sliding : LayerType::Full);
    return types;
}

// Gemma4UnifiedConfig (configuration_gemma4_unified.py): the text model of LTX-2.5's encoder.
TextConfig parseGemma4(const json& top, const std::string& where)
{
    const std::string modelType = top["model_type"].get<std::string>();
    TextConfig c;
    c.family = Family::Gemma4;
    c.vocabSize = 262144;
    c.layers = 30;
    c.slidingWindow = 1024;
    json tc = top;
    if (modelType == "gemma4_unified") {
        if (!top.contains("text_config") || !top["text_config"].is_object())
            configFail(where + ": a gemma4_unified config without a text_config object");
        tc = top["text_config"];
        // The multimodal wrapper swaps these to the pad id before the lookup (get_placeholder_mask).
        for (const auto& [key, fallback] : {std::pair{"image_token_id", 258880}, {"video_token_id", 258884}, {"audio_token_id", 258881}})
            if (!(top.contains(key) && top[key].is_null()))
                c.placeholderIds.push_back(intField(top, key, fallback, where));
    } else if (modelType == "gemma4") {
        // Gemma4ForConditionalGeneration: the dense models (gemma-4-E2B-it and its siblings).
        if (!top.contains("text_config") || !top["text_config"].is_object())
            configFail(where + ": a gemma4 config without a text_config object");
        tc = top["text_config"];
        c.dense = true;
        for (const auto& [key, fallback] : {std::pair{"image_token_id", 258880}, {"video_token_id", 258884}, {"audio_token_id", 258881}})
            if (!(top.contains(key) && top[key].is_null()))
                c.placeholderIds.push_back(intField(top, key, fallback, where));
        if (!(top.contains("image_token_id") && top["image_token_id"].is_null()))
            c.imageTokenId = intField(top, "image_token_id", 258880, where);
    } else if (modelType == "gemma4_text") {
        c.dense = true;
    } else if (modelType != "gemma4_unified_text") {
        configFail(where + ": is a '" + modelType + "' config, not Gemma 4 (gemma4, gemma4_text, gemma4_unified or gemma4_unified_text)");
    }
    const std::string wantedText = c.dense ? "gemma4_text" : "gemma4_unified_text";
    const std::string textType = tc.contains("model_type") && tc["model_type"].is_string() ? tc["model_type"].get<std::string>() : "";
    if (!textType.empty() && textType != wantedText)
        configFail(where + ": the text config is a '" + textType + "' config, not " + wantedText);
    if (c.dense) {
        // Gemma4TextConfig's defaults where they differ from the unified one.
        c.slidingWindow = 512;
        c.perLayerDim = 256;
        c.perLayerVocab = 262144;
    }
    readCommonFields(tc, c, where);
    c.padTokenId = tc.contains("pad_token_id") && tc["pad_token_id"].is_null() ? 0 : intField(tc, "pad_token_id", 0, where);
    c.fullKeyIsValue = boolField(tc, "attention_k_eq_v", false, where);
    c.kvSharedLayers = intField(tc, "num_kv_shared_layers", 0, where);
    if (c.kvSharedLayers != 0 && !c.dense)
        configFail(where + ": num_kv_shared_layers is set in a unified config; key/value sharing is read for the dense Gemma 4 only");
    if (c.dense) {
        c.perLayerDim = tc.contains("hidden_size_per_layer_input") && tc["hidden_size_per_layer_input"].is_null()
            ? 0
            : intField(tc, "hidden_size_per_layer_input", c.perLayerDim, where);
        c.perLayerVocab = intField(tc, "vocab_size_per_layer_input", c.perLayerVocab, where);
        c.doubleWideMlp = boolField(tc, "use_double_wide_mlp", false, where);
        if (boolField(tc, "enable_moe_block", false, where))
            configFail(where + ": enable_moe_block is set; Gemma 4's mixture-of-experts models are not supported by this version");
        if (tc.contains("final_logit_softcapping") && !tc["final_logit_softcapping"].is_null()) {
            c.finalLogitSoftcap = numberField(tc, "final_logit_softcapping", 0.0, where);
            if (!(*c.finalLogitSoftcap > 0) || !std::isfinite(*c.finalLogitSoftcap))
                configFail(where + ": final_logit_softcapping must be positive");
        }
        const json& tieFrom = top.contains("tie_word_embeddings") ? top : tc;
        c.tieWordEmbeddings = boolField(tieFrom, "tie_word_embeddings", true, where);
        if (c.perLayerDim < 0 || c.perLayerDim > 4096 || c.perLayerVocab < 0 || c.perLayerVocab > (1 << 24)
            || (c.perLayerDim > 0 && c.perLayerVocab == 0) || c.kvSharedLayers < 0)
            configFail(where + ": inconsistent per-layer embedding or sharing sizes (" + std::to_string(c.perLayerDim) + " x "
                + std::to_string(c.perLayerVocab) + ", " + std::to_string(c.kvSharedLayers) + " shared layers)");
    }
    c.eosIds = eosIdsOf(tc);
    if (c.eosIds.empty())
        c.eosIds = eosIdsOf(top);
    if (tc.contains("use_bidirectional_attention") && tc["use_bidirectional_attention"].is_string()
        && tc["use_bidirectional_attention"] == "all")
        configFail(where + ": use_bidirectional_attention \"all\" (a non-causal encoder) is not supported; LTX-2.5's encoder is causal");
    // Gemma4Model: "vision" lets an image's tokens see each other on sliding layers; without it
    // they are read causally like text.
    c.imageAttention = tc.contains("use_bidirectional_attention") && tc["use_bidirectional_attention"] == "vision"
        ? TextConfig::ImageAttention::BothWaysSliding
        : TextConfig::ImageAttention::Causal;
    const std::string act = tc.contains("hidden_activation") && tc["hidden_activation"].is_string()
        ? tc["hidden_activation"].get<std::string>()
        : "gelu_pytorch_tanh";
    if (act != "gelu_pytorch_tanh" && act != "gelu")
        configFail(where + ": hidden_activation '" + act + "' is not supported by this version (gelu_pytorch_tanh and gelu are)");
    c.geluTanh = act == "gelu_pytorch_tanh";
    if (c.layers <= 0 || c.layers > 1024)
        configFail(where + ": num_hidden_layers " + std::to_string(c.layers) + " is out of range");
    c.layerTypes = layerTypesFrom(tc, c.layers, 6, where);
    c.layerTypes.back() = LayerType::Full;  // Gemma4UnifiedTextConfig forces it (with a warning)
    c.slidingWindow = intField(tc, "sliding_window", c.slidingWindow, where);
    if (c.kvSharedLayers >= c.layers)
        configFail(where + ": num_kv_shared_layers " + std::to_string(c.kvSharedLayers) + " leaves no layer to produce keys and values");
    for (std::int64_t i = c.layers - c.kvSharedLayers; i < c.layers; ++i)
        if (c.kvSourceOf(i) < 0)
            configFail(where + ": shared layer " + std::to_string(i) + " has no earlier layer of its type to take keys and values from");

    // Full-attention layers: per_layer_config as saved, else global_head_dim and
    // num_global_key_value_heads as given to the constructor (__post_init__).
    c.fullHeadDim = intField(tc, "global_head_dim", 512, where);
    c.fullKvHeads = c.fullKeyIsValue && tc.contains("num_global_key_value_heads") && !tc["num_global_key_value_heads"].is_null()
        ? intField(tc, "num_global_key_value_heads", c.kvHeads, where)
        : c.kvHeads;
    if (tc.contains("per_layer_config") && !tc["per_layer_config"].is_null()) {
        if (!tc["per_layer_config"].is_object())
            configFail(where + ": per_layer_config is not an object");
        bool first = true;
        for (const auto& [key, entry] : tc["per_layer_config"].items()) {
            std::int64_t index = -1;
            try {
                index = std::stoll(key);
            } catch (const std::exception&) {
            }
            if (index < 0 || index >= c.layers || !entry.is_object())
                configFail(where + ": per_layer_config names layer '" + key + "', which is not a layer of this model");
            if (c.layerTypes[static_cast<std::size_t>(index)] != LayerType::Full)
                configFail(where + ": per_layer_config overrides sliding layer " + key + "; only full-attention overrides are supported");
            for (const auto& [k, _] : entry.items())
                if (k != "head_dim" && k != "num_key_value_heads")
                    configFail(where + ": per_layer_config." + key + "." + k + " is not supported by this version");
            const auto headDim = intField(entry, "head_dim", c.headDim, where);
            const auto kvHeads = intField(entry, "num_key_value_heads", c.kvHeads, where);
            if (!first && (headDim != c.fullHeadDim || kvHeads != c.fullKvHeads))
                configFail(where + ": per_layer_config gives full-attention layers different shapes; this version needs one");
            c.fullHeadDim = headDim;
            c.fullKvHeads = kvHeads;
            first = false;
        }
        if (first) {  // an empty table: every layer as the sliding ones
            c.fullHeadDim = c.headDim;
            c.fullKvHeads = c.kvHeads;
        }
    }
    for (const auto t : {LayerType::Sliding, LayerType::Full})
        if (c.headDimOf(t) <= 0 || c.headDimOf(t) > 4096 || c.headDimOf(t) % 2 || c.kvHeadsOf(t) <= 0 || c.heads % c.kvHeadsOf(t))
            configFail(where + ": head_dim " + std::to_string(c.headDimOf(t)) + " with " + std::to_string(c.kvHeadsOf(t))
                + " key/value heads for " + std::to_string(c.heads) + " heads is not a usable attention shape");
    if (c.vocabSize <= 0 || c.hiddenSize <= 0 || c.intermediateSize <= 0 || c.heads <= 0 || c.vocabSize > (1 << 24)
        || c.hiddenSize > (1 << 16) || c.intermediateSize > (1 << 20) || c.heads > 1024 || !(c.rmsNormEps > 0 && c.rmsNormEps < 1)
        || c.padTokenId < 0 || c.padTokenId >= c.vocabSize || c.slidingWindow <= 0)
        configFail(where + ": inconsistent sizes (vocab " + std::to_string(c.vocabSize) + ", hidden " + std::to_string(c.hiddenSize)
            + ", heads " + std::to_string(c.heads) + ", pad " + std::to_string(c.padTokenId) + ", window " + std::to_string(c.slidingWindow)
            + ")");

    json rp = tc.contains("rope_parameters") && !tc["rope_parameters"].is_null() ? tc["rope_parameters"] : json::object();
    if (!rp.is_object())
        configFail(where + ": rope_parameters is not an object");
    if (!rp.contains("sliding_attention") || rp["sliding_attention"].is_null())
        rp["sliding_attention"] = json{{"rope_type", "default"}, {"rope_theta", 10'000.0}};
    if (!rp.contains("full_attention") || rp["full_attention"].is_null())
        rp["full_attention"] = json{{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1'000'000.0}};
    c.ropeSliding = ropeFrom(rp["sliding_attention"], "sliding_attention", where);
    c.ropeFull = ropeFrom(rp["full_attention"], "full_attention", where);
    if (!(c.ropeFull.theta > 0) || !(c.ropeSliding.theta > 0))
        configFail(where + ": rope_theta must be given and positive for both layer types");
    return c;
}

// ------------------------------------------------------------------ weights

const std::vector<std::string> kIgnoredPrefixes{"vision_tower.", "model.vision_tower.", "multi_modal_projector.",
    "model.multi_modal_projector.", "lm_head.", "language_model.lm_head.",
    // Gemma 4 unified: its towers and embedders (both namings), and what Lightricks' single
    // file carries beside the language model: the LTX text projection (the connectors read
    // it), the tokenizer and the other Hub files as byte tensors.
    "vision_model.", "audio_projector.", "model.audio_tower.", "model.embed_vision.", "model.embed_audio.", "model.vision_embedder.",
    "model.audio_embedder.", "text_embedding_projection.", "tokenizer_json", "hf_asset__"};
// Tried in order; the first under which embed_tokens.weight exists names the language model.
const std::vector<std::string> kLanguageModelPrefixes{"model.language_model.", "language_model.model.", "model.", ""};

using nn::Embedding;
using nn::StoredTensor;
using Stored = nn::StoredTensor;

// Gemma's norm weights in float32 as the reference computes with them: Gemma3RMSNorm scales by
// (1 + w), Gemma4UnifiedRMSNorm by w.
class Taker : public nn::StrictWeights {
public:
    Taker(std::map<std::string, Stored> index, quant::LoadOptions options, c10::ScalarType dtype, std::string origin, const char* model,
        bool plusOne)
        : nn::StrictWeights(std::move(index), std::move(options), dtype, std::move(origin), model, "language model"), m_plusOne(plusOne)
    {
    }

    at::Tensor norm(const std::string& name, std::int64_t size)
    {
        auto w = dense(name, {size}, at::kFloat);
        return w.defined() && m_plusOne ? (w + 1.0).contiguous() : w;
    }

private:
    bool m_plusOne;
};

struct Layer {
    nn::Linear q, k, v, o, gate, up, down;
    at::Tensor inputNorm, postAttentionNorm, preFeedforwardNorm, postFeedforwardNorm, qNorm, kNorm;
    at::Tensor scalar;  // Gemma 4: the output is scaled by it; undefined for Gemma 3
    bool sliding = false;
    std::int64_t headDim = 0, kvHeads = 0;
    bool valueIsKey = false;  // Gemma 4's attention_k_eq_v on a full layer: no v_proj
    std::int64_t kvSource = 0;  // the layer whose keys and values it attends with (itself unless shared)
    nn::Linear perLayerGate, perLayerProjection;  // dense Gemma 4's per-layer input
    at::Tensor postPerLayerNorm;
};

using quant::bytesOf;

// The config Lightricks embeds in its single text-encoder file (safetensors metadata
// `gemma_config`, ltx-core gemma_assets.py), with where it came from for errors.
std::optional<std::pair<std::string, std::string>> embeddedConfig(const tensorfile::ModelSource& source, const std::string& component)
{
    for (const auto& cp : source.checkpoints)
        if (cp.component.empty() || cp.component == component)
            if (const auto it = cp.metadata.find("gemma_config"); it != cp.metadata.end())
                return std::pair{it->second, cp.path.filename().string() + " (gemma_config metadata)"};
    return std::nullopt;
}

// Gemma 4 when the config the source carries says so (model_type gemma4*); Gemma 3 otherwise,
// whose loader then names what is wrong.
Family familyOf(
    const tensorfile::ModelSource& source, const std::optional<std::pair<std::string, std::string>>& embedded, const std::string& component)
{
    std::optional<std::string> text;
    for (const std::string& name : {component, std::string()})
        if (const auto it = source.configs.find(name); !text && it != source.configs.end())
            text = it->second;
    if (!text && embedded)
        text = embedded->first;
    if (!text)
        return Family::Gemma3;
    const auto parsed = jsonutil::parseUntrusted(*text, "config.json");
    if (!parsed || !parsed->is_object())
        return Family::Gemma3;
    const auto type = jsonutil::stringOr(*parsed, "model_type");
    return type.starts_with("gemma4") ? Family::Gemma4 : Family::Gemma3;
}

// repeat_kv: [B, KV, T, D] -> [B, KV * n, T, D], each key head used by n consecutive query heads.
at::Tensor repeatKv(const at::Tensor& x, std::int64_t n)
{
    if (n == 1)
        return x;
    const auto b = x.size(0), kv = x.size(1), t = x.size(2), d = x.size(3);
    return x.unsqueeze(2).expand({b, kv, n, t, d}).reshape({b, kv * n, t, d});
}

}  // namespace

std::int64_t TextConfig::kvSourceOf(std::int64_t i) const
{
    const auto firstShared = layers - kvSharedLayers;
    if (i < firstShared)
        return i;
    for (auto j = firstShared - 1; j >= 0; --j)
        if (layerTypes[static_cast<std::size_t>(j)] == layerTypes[static_cast<std::size_t>(i)])
            return j;
    return -1;
}

TextConfig TextConfig::gemma3_12b()
{
    TextConfig c;
    c.vocabSize = 262208;
    c.hiddenSize = 3840;
    c.intermediateSize = 15360;
    c.layers = 48;
    c.heads = 16;
    c.kvHeads = 8;
    c.headDim = 256;
    c.rmsNormEps = 1e-6;
    c.queryPreAttnScalar = 256.0;
    c.slidingWindow = 1024;
    for (std::int64_t i = 0; i < c.layers; ++i)
        c.layerTypes.push_back((i + 1) % 6 ? LayerType::Sliding : LayerType::Full);
    c.ropeFull = {1'000'000.0, 8.0};
    c.ropeSliding = {10'000.0, 1.0};
    c.imageTokenId = 262144;
    return c;
}

Result<GenerationDefaults> parseGenerationConfig(const std::string& text, const std::string& origin)
{
    auto parsed = jsonutil::parseUntrusted(text, origin);
    if (!parsed)
        return parsed.error();
    const auto& j = *parsed;
    if (!j.is_object())
        return makeError(ErrorCode::InvalidFormat, origin + ": is not a JSON object");
    GenerationDefaults d;
    d.eosIds = eosIdsOf(j);
    auto number = [&](const char* key) -> std::optional<double> {
        if (!j.contains(key) || j[key].is_null())
            return std::nullopt;
        if (!j[key].is_number())
            throw makeError(ErrorCode::InvalidFormat, origin + ": " + key + " is not a number");
        return j[key].get<double>();
    };
    try {
        if (j.contains("do_sample") && j["do_sample"].is_boolean())
            d.doSample = j["do_sample"].get<bool>();
        if (const auto t = number("temperature")) {
            if (!std::isfinite(*t) || *t <= 0)
                throw makeError(ErrorCode::InvalidFormat, origin + ": temperature must be a positive number, not " + std::to_string(*t));
            d.temperature = *t;
        }
        if (const auto k = number("top_k")) {
            if (*k < 0 || *k > 1e9 || std::floor(*k) != *k)
                throw makeError(ErrorCode::InvalidFormat, origin + ": top_k must be a whole number from 0, not " + std::to_string(*k));
            d.topK = static_cast<std::int64_t>(*k);
        }
        if (const auto p = number("top_p")) {
            if (!(*p > 0 && *p <= 1))
                throw makeError(ErrorCode::InvalidFormat, origin + ": top_p must lie in (0, 1], not " + std::to_string(*p));
            d.topP = *p;
        }
        // Sampling fields transformers would also apply; neutral values change nothing.
        for (const auto& [key, neutral] : {std::pair{"min_p", -1.0}, {"top_h", -1.0}, {"typical_p", 1.0}, {"repetition_penalty", 1.0},
                 {"epsilon_cutoff", 0.0}, {"eta_cutoff", 0.0}})
            if (const auto v = number(key); v && *v != neutral)
                d.unapplied.emplace_back(key);
    } catch (const Error& e) {
        return e;
    }
    return d;
}

Result<TextConfig> parseTextConfig(const std::string& configJson, const std::string& origin)
{
    try {
        auto parsed = jsonutil::parseUntrusted(configJson, origin);
        if (!parsed)
            return parsed.error();
        return parseText(*parsed, origin);
    } catch (const json::exception& e) {
        return makeError(ErrorCode::InvalidFormat, origin + ": not a usable Gemma 3 config (" + e.what() + ")");
    } catch (const ConfigError& e) {
        return makeError(ErrorCode::InvalidFormat, e.message);
    }
}

// ====================================================================== the model

namespace {

// What the text encoder and the causal LM share: the config, the weights and the RoPE tables.
struct Model {
    TextConfig config;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::string origin;
    Embedding embed;
    std::vector<Layer> layers;
    at::Tensor finalNorm;
    at::Tensor invFreqFull, invFreqSliding;  // float32 [its layers' head_dim / 2] on the device
    // Per-layer embeddings (dense Gemma 4): the table in host memory, the projection and its norm.
    Embedding perLayerEmbed;
    nn::Linear perLayerModelProjection;
    at::Tensor perLayerProjectionNorm;
    GenerationDefaults generation;  // generation_config.json's, transformers' defaults without one

    at::Tensor norm(const at::Tensor& x, const at::Tensor& scale) const { return gemmaNorm(x, scale, config.rmsNormEps, config.family); }
    // Gemma3TextScaledWordEmbedding: rows * sqrt(hidden), the scale rounded to the model dtype.
    at::Tensor embedTokens(const at::Tensor& ids) const;
    // The ids as the embeddings see them: out-of-vocabulary image ids and Gemma 4's multimodal
    // placeholders swapped, the range checked.
    at::Tensor modelIds(const at::Tensor& inputIds) const;
    // Gemma4TextModel.get_per_layer_inputs + project_per_layer_inputs: [B, T, layers, ple].
    at::Tensor perLayerInputs(const at::Tensor& ids, const at::Tensor& embeds) const;
    at::Tensor mlp(const Layer& l, const at::Tensor& x) const;
};

// The weights and config at `path` into m; causal: as a language model (dense Gemma 4 allowed,
// the tied head needed), else as LTX's text encoder.
Result<void> loadModel(Model& m, const fs::path& path, const TextEncoderLoadOptions& options, bool causal);

}  // namespace

struct TextEncoder::Impl : Model {
    at::Tensor run(const at::Tensor& inputIds, const at::Tensor& attentionMask, const std::stop_token& stop, bool& cancelled) const;
    at::Tensor attention(const Layer& layer, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& mask,
        const at::Tensor& rowHasKey) const;
};

TextEncoder::TextEncoder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
TextEncoder::~TextEncoder() = default;
TextEncoder::TextEncoder(TextEncoder&&) noexcept = default;
TextEncoder& TextEncoder::operator=(TextEncoder&&) noexcept = default;

const TextConfig& TextEncoder::config() const
{
    return m_impl->config;
}
c10::Device TextEncoder::device() const
{
    return m_impl->device;
}
c10::ScalarType TextEncoder::dtype() const
{
    return m_impl->dtype;
}

Result<TextEncoder> TextEncoder::load(const fs::path& path, const TextEncoderLoadOptions& options)
{
    auto impl = std::make_unique<Impl>();
    if (auto loaded = loadModel(*impl, path, options, false); !loaded)
        return loaded.error();
    return TextEncoder(std::move(impl));
}

namespace {

Result<void> loadModel(Model& m, const fs::path& path, const TextEncoderLoadOptions& options, bool causal)
{
    if (auto bad = checkComputeDtype("Gemma", options.dtype); !bad)
        return bad.error();
    auto opened = tensorfile::ModelSource::open(path);
    if (!opened)
        return opened.error();
    const auto& source = *opened;
    const std::string origin = path.string();
    // Which Gemma, before the weights are looked at, so errors name it: the given config, the
    // config.json the source carries, or the one Lightricks embeds in its single file.
    const std::string component = causal ? "prompt_enhancer" : "text_encoder";
    const auto embedded = embeddedConfig(source, component);
    const auto family = options.config ? options.config->family : familyOf(source, embedded, component);
    const char* model = family == Family::Gemma4 ? "Gemma 4" : "Gemma 3";

    nn::LanguageModelLayout layout{model, kLanguageModelPrefixes, kIgnoredPrefixes,
        [&](const std::map<std::string, Stored>& all) {
            std::optional<Error> refused;
            if (all.count("token_embd.weight")
                || std::any_of(all.begin(), all.end(), [](const auto& kv) { return startsWith(kv.first, "blk."); }))
                refused = makeError(ErrorCode::Unsupported,
                    origin
                        + ": uses llama.cpp's GGUF names (token_embd, blk.N.*), whose norms carry "
                          "Gemma's +1 baked in; this version reads Gemma in transformers' layout only");
            return refused;
        },
        component};
    auto found = nn::findLanguageModel(source, origin, layout);
    if (!found)
        return found.error();
    auto& index = found->index;

    // Config: the override, config.json, or Gemma 3 12B when the shapes are its.
    TextConfig config;
    if (options.config) {
        config = *options.config;
    } else if (found->configText) {
        auto parsed = parseTextConfig(*found->configText, found->configPath);
        if (!parsed)
            return parsed.error();
        config = *parsed;
    } else if (embedded) {
        auto parsed = parseTextConfig(embedded->first, embedded->second);
        if (!parsed)
            return parsed.error();
        config = *parsed;
    } else {
        const auto twelveB = TextConfig::gemma3_12b();
        const auto* embedInfo = index.at("embed_tokens.weight").checkpoint->find(index.at("embed_tokens.weight").name);
        const bool shapesMatch = embedInfo && embedInfo->shape == std::vector<std::int64_t>{twelveB.vocabSize, twelveB.hiddenSize}
            && index.count("layers." + std::to_string(twelveB.layers - 1) + ".mlp.down_proj.weight")
            && !index.count("layers." + std::to_string(twelveB.layers) + ".mlp.down_proj.weight");
        if (!shapesMatch)
            return makeError(ErrorCode::NotFound,
                origin
                    + ": no config.json beside the weights and they are not Gemma 3 12B's "
                      "shapes; put the model's config.json next to them or pass a config");
        config = twelveB;
    }
    // Read for the text encoder too: LTX-2.0/2.3's Gemma 3 also writes the enhanced prompt.
    if (const auto it = source.generationConfigs.find(found->component); it != source.generationConfigs.end()) {
        auto parsed =
            parseGenerationConfig(it->second, (found->component.empty() ? "" : found->component + "/") + "generation_config.json");
        if (!parsed)
            return parsed.error();
        m.generation = std::move(*parsed);
    }
    if (static_cast<std::int64_t>(config.layerTypes.size()) != config.layers)
        return makeError(ErrorCode::InvalidArgument,
            origin + ": the config lists " + std::to_string(config.layerTypes.size()) + " layer types for " + std::to_string(config.layers)
                + " layers");

    if (!causal && config.dense)
        return makeError(ErrorCode::Unsupported,
            origin
                + ": is the dense Gemma 4 (a prompt enhancer such as gemma-4-E2B-it), not a text encoder; LTX-2.5 encodes with the "
                  "unified Gemma 4 (model_type gemma4_unified)");
    if (causal && !config.tieWordEmbeddings)
        return makeError(ErrorCode::Unsupported,
            origin + ": the LM head is not tied to the embeddings (tie_word_embeddings false); this version reads tied heads only");
    auto* impl = &m;  // the fields below, as the loader has always named them
    impl->config = config;
    impl->device = options.device;
    impl->dtype = options.dtype;
    impl->origin = origin;
    const auto& c = impl->config;
    try {
        quant::LoadOptions lo;
        lo.device = options.device;
        const bool gemma4 = c.family == Family::Gemma4;
        Taker w(std::move(index), lo, options.dtype, origin, model, !gemma4);
        const auto d = c.hiddenSize;
        // NF4 or block-scaled FP8 tables: rows are not separable, so they are expanded once.
        if (auto set = impl->embed.set(w.weight("embed_tokens.weight", {c.vocabSize, d}), options.dtype, options.device); !set)
            return makeError(ErrorCode::InvalidFormat, origin + ": embed_tokens: " + set.error().message);
        for (std::int64_t i = 0; i < c.layers; ++i) {
            const auto p = "layers." + std::to_string(i) + ".";
            Layer l;
            const auto type = c.layerTypes[static_cast<std::size_t>(i)];
            l.sliding = type == LayerType::Sliding;
            l.headDim = c.headDimOf(type);
            l.kvHeads = c.kvHeadsOf(type);
            l.valueIsKey = gemma4 && !l.sliding && c.fullKeyIsValue;
            const auto qd = c.heads * l.headDim, kvd = l.kvHeads * l.headDim;
            l.kvSource = c.kvSourceOf(i);
            const bool shared = l.kvSource != i;
            l.q = w.linear(p + "self_attn.q_proj", qd, d, c.attentionBias);
            if (!shared) {
                l.k = w.linear(p + "self_attn.k_proj", kvd, d, c.attentionBias);
                if (!l.valueIsKey)
                    l.v = w.linear(p + "self_attn.v_proj", kvd, d, c.attentionBias);
            } else {
                // transformers builds none for a shared layer and ignores them in a file.
                for (const char* unused : {"k_proj.weight", "v_proj.weight", "k_norm.weight", "k_proj.bias", "v_proj.bias"})
                    if (w.has(p + "self_attn." + unused))
                        (void)w.raw(p + "self_attn." + unused, {});
            }
            l.o = w.linear(p + "self_attn.o_proj", d, qd, c.attentionBias);
            l.qNorm = w.norm(p + "self_attn.q_norm.weight", l.headDim);
            if (!shared)
                l.kNorm = w.norm(p + "self_attn.k_norm.weight", l.headDim);
            if (gemma4)
                l.scalar = w.dense(p + "layer_scalar", {1}, options.dtype);
            const auto width = c.intermediateSize * (shared && c.doubleWideMlp ? 2 : 1);
            l.gate = w.linear(p + "mlp.gate_proj", width, d, false);
            l.up = w.linear(p + "mlp.up_proj", width, d, false);
            l.down = w.linear(p + "mlp.down_proj", d, width, false);
            if (c.perLayerDim > 0) {
                l.perLayerGate = w.linear(p + "per_layer_input_gate", c.perLayerDim, d, false);
                l.perLayerProjection = w.linear(p + "per_layer_projection", d, c.perLayerDim, false);
                l.postPerLayerNorm = w.norm(p + "post_per_layer_input_norm.weight", d);
            }
            l.inputNorm = w.norm(p + "input_layernorm.weight", d);
            l.postAttentionNorm = w.norm(p + "post_attention_layernorm.weight", d);
            l.preFeedforwardNorm = w.norm(p + "pre_feedforward_layernorm.weight", d);
            l.postFeedforwardNorm = w.norm(p + "post_feedforward_layernorm.weight", d);
            impl->layers.push_back(std::move(l));
        }
        impl->finalNorm = w.norm("norm.weight", d);
        if (c.perLayerDim > 0) {
            // Read one row per token: kept in host memory, where it does not compete with the
            // model for device memory (E2B's table is 262144 x 35 x 256).
            quant::LoadOptions host = lo;
            host.device = c10::Device(c10::kCPU);
            auto table = w.raw("embed_tokens_per_layer.weight", {c.perLayerVocab, c.layers * c.perLayerDim}, host);
            if (table) {
                if (auto set = impl->perLayerEmbed.set(std::move(*table), options.dtype, host.device); !set)
                    return makeError(ErrorCode::InvalidFormat, origin + ": embed_tokens_per_layer: " + set.error().message);
            }
            impl->perLayerModelProjection = w.linear("per_layer_model_projection", c.layers * c.perLayerDim, d, false);
            impl->perLayerProjectionNorm = w.norm("per_layer_projection_norm.weight", c.perLayerDim);
        }
        if (auto done = w.finish(); !done)
            return done.error();

        // Gemma3RotaryEmbedding: 1 / base^(arange(0, dim, 2) / dim), divided by the linear factor;
        // proportional: only the first int(partial * dim // 2) of them, zeros after.
        auto invFreq = [&](const RopeConfig& r, std::int64_t dim) {
            const auto angles =
                r.proportional ? static_cast<std::int64_t>(std::floor(r.partialRotaryFactor * static_cast<double>(dim) / 2.0)) : dim / 2;
            const auto exponent =
                at::arange(0, 2 * angles, 2, at::TensorOptions().dtype(at::kLong)).to(at::kFloat) / static_cast<double>(dim);
            auto f = at::reciprocal(at::pow(at::Scalar(r.theta), exponent));
            if (angles < dim / 2)
                f = at::cat({f, at::zeros({dim / 2 - angles}, f.options())});
            if (r.linearFactor != 1.0)
                f = f / r.linearFactor;
            return f.to(options.device);
        };
        impl->invFreqFull = invFreq(c.ropeFull, c.headDimOf(LayerType::Full));
        impl->invFreqSliding = invFreq(c.ropeSliding, c.headDimOf(LayerType::Sliding));
    } catch (const c10::Error& e) {
        return errorFromException(e, origin + ": loading " + model + " failed", ErrorCode::Internal);
    }
    return {};
}

at::Tensor Model::modelIds(const at::Tensor& inputIds) const
{
    const auto& c = config;
    auto ids = inputIds.to(device, at::kLong);
    if (c.imageTokenId && *c.imageTokenId >= c.vocabSize)
        ids = at::where(ids == *c.imageTokenId, at::zeros({}, ids.options()), ids);
    for (const auto placeholder : c.placeholderIds)
        ids = at::where(ids == placeholder, at::full({}, c.padTokenId, ids.options()), ids);
    if (ids.numel() > 0) {
        const auto lo = ids.min().item<std::int64_t>(), hi = ids.max().item<std::int64_t>();
        TORCH_CHECK(lo >= 0 && hi < c.vocabSize, "token ids must lie in [0, ", c.vocabSize, "), got ", lo, "..", hi,
            "; the tokenizer does not belong to this model");
    }
    return ids;
}

at::Tensor Model::embedTokens(const at::Tensor& ids) const
{
    const auto embedScale =
        at::scalar_tensor(std::sqrt(static_cast<double>(config.hiddenSize)), at::TensorOptions().dtype(at::kFloat)).to(dtype).to(device);
    return embed.lookup(ids, dtype).to(dtype) * embedScale;
}

at::Tensor Model::perLayerInputs(const at::Tensor& ids, const at::Tensor& embeds) const
{
    const auto& c = config;
    const auto b = ids.size(0), t = ids.size(1);
    TORCH_CHECK(ids.numel() == 0 || ids.max().item<std::int64_t>() < c.perLayerVocab, "token ids beyond the per-layer table's ",
        c.perLayerVocab, " rows");
    const auto scale =
        at::scalar_tensor(std::sqrt(static_cast<double>(c.perLayerDim)), at::TensorOptions().dtype(at::kFloat)).to(dtype).to(device);
    const auto identity = perLayerEmbed.lookup(ids.cpu(), dtype).to(device).to(dtype).view({b, t, c.layers, c.perLayerDim}) * scale;
    auto context = perLayerModelProjection(embeds) * (1.0 / std::sqrt(static_cast<double>(c.hiddenSize)));
    context = norm(context.view({b, t, c.layers, c.perLayerDim}), perLayerProjectionNorm);
    return (context + identity) * (1.0 / std::sqrt(2.0));
}

at::Tensor Model::mlp(const Layer& l, const at::Tensor& x) const
{
    const auto gate = l.gate(x);
    return l.down((config.geluTanh ? nn::geluTanh(gate) : at::gelu(gate)) * l.up(x));
}

}  // namespace

at::Tensor TextEncoder::Impl::attention(const Layer& layer, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
    const at::Tensor& mask, const at::Tensor& rowHasKey) const
{
    const auto& c = config;
    const auto b = x.size(0), t = x.size(1);
    const auto hd = layer.headDim;
    auto q = layer.q(x).view({b, t, c.heads, hd}).transpose(1, 2);
    auto k = layer.k(x).view({b, t, layer.kvHeads, hd}).transpose(1, 2);
    // Gemma 4: the values are the raw keys where there is no v_proj, and are normalized without
    // a weight either way.
    auto v = (layer.valueIsKey ? k : layer.v(x).view({b, t, layer.kvHeads, hd}).transpose(1, 2));
    if (c.family == Family::Gemma4)
        v = norm(v, at::Tensor());
    q = norm(q, layer.qNorm);
    k = norm(k, layer.kNorm);
    q = q * cos + rotateHalf(q) * sin;
    k = k * cos + rotateHalf(k) * sin;
    k = repeatKv(k, c.heads / layer.kvHeads);
    v = repeatKv(v, c.heads / layer.kvHeads);
    // Gemma 4 leaves the scale to its q/k norms.
    const double scale = c.family == Family::Gemma4 ? 1.0 : 1.0 / std::sqrt(c.queryPreAttnScalar);
    // Queries in chunks so the score matrix of a math fallback stays bounded.
    const auto perRow = b * c.heads * t;
    const auto rows = std::max<std::int64_t>(1, (std::int64_t{1} << 28) / std::max<std::int64_t>(1, perRow));
    at::Tensor out;
    if (rows >= t) {
        out = at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, scale);
    } else {
        out = at::empty({b, c.heads, t, hd}, q.options());
        for (std::int64_t start = 0; start < t; start += rows) {
            const auto len = std::min(rows, t - start);
            out.narrow(2, start, len)
                .copy_(at::scaled_dot_product_attention(q.narrow(2, start, len), k, v, mask.narrow(2, start, len), 0.0, false, scale));
        }
    }
    // A query that may see no key (a left-padded position) gets 0, as torch's SDPA gives the
    // reference on the CPU; fused kernels elsewhere may return NaN there instead.
    out = at::where(rowHasKey, out, at::zeros({}, out.options()));
    return layer.o(out.transpose(1, 2).reshape({b, t, c.heads * hd}));
}

at::Tensor TextEncoder::Impl::run(
    const at::Tensor& inputIds, const at::Tensor& attentionMask, const std::stop_token& stop, bool& cancelled) const
{
    const auto& c = config;
    TORCH_CHECK(inputIds.dim() == 2, c.familyName(), " expects input ids [B, T], got ", inputIds.sizes());
    TORCH_CHECK(attentionMask.sizes() == inputIds.sizes(), "the attention mask ", attentionMask.sizes(), " does not match the ids ",
        inputIds.sizes());
    TORCH_CHECK(!at::isFloatingType(inputIds.scalar_type()), "input ids must be integers, got ", inputIds.scalar_type());
    const auto b = inputIds.size(0), t = inputIds.size(1);
    const auto ids = modelIds(inputIds);
    const auto valid = attentionMask.to(device).to(at::kBool);
    auto h = embedTokens(ids);

    auto out = at::empty({b, t, c.hiddenSize, c.layers + 1}, h.options());
    out.select(3, 0).copy_(h);

    // Masks as transformers builds them: causal (kv <= q), sliding (kv > q - window), and the
    // key padding from the attention mask. Positions are the indices of the padded sequence.
    const auto pos = at::arange(t, at::TensorOptions().dtype(at::kLong).device(device));
    const auto causal = pos.view({1, t}) <= pos.view({t, 1});
    const auto window = pos.view({1, t}) > (pos.view({t, 1}) - c.slidingWindow);
    const auto keys = valid.view({b, 1, 1, t});
    const auto fullMask = causal.view({1, 1, t, t}).logical_and(keys);
    const auto slidingMask = causal.logical_and(window).view({1, 1, t, t}).logical_and(keys);
    const auto fullRows = fullMask.any(-1, true);
    const auto slidingRows = slidingMask.any(-1, true);

    auto rope = [&](const at::Tensor& invFreq) {
        const auto freqs = pos.to(at::kFloat).view({1, t, 1}) * invFreq.view({1, 1, -1});
        const auto emb = at::cat({freqs, freqs}, -1);
        return std::make_pair(emb.cos().to(dtype).unsqueeze(1), emb.sin().to(dtype).unsqueeze(1));
    };
    const auto [cosFull, sinFull] = rope(invFreqFull);
    const auto [cosSliding, sinSliding] = rope(invFreqSliding);

    for (std::size_t i = 0; i < layers.size(); ++i) {
        if (stop.stop_requested()) {
            cancelled = true;
            return {};
        }
        const auto& l = layers[i];
        auto a = norm(h, l.inputNorm);
        a = l.sliding ? attention(l, a, cosSliding, sinSliding, slidingMask, slidingRows)
                      : attention(l, a, cosFull, sinFull, fullMask, fullRows);
        h = h + norm(a, l.postAttentionNorm);
        h = h + norm(mlp(l, norm(h, l.preFeedforwardNorm)), l.postFeedforwardNorm);
        if (l.scalar.defined())
            h = h * l.scalar;
        if (i + 1 < layers.size())
            out.select(3, static_cast<std::int64_t>(i) + 1).copy_(h);
    }
    out.select(3, c.layers).copy_(c.tieLastHiddenStates ? norm(h, finalNorm) : h);
    return out;
}

Result<at::Tensor> TextEncoder::forward(const at::Tensor& inputIds, const at::Tensor& attentionMask, std::stop_token stop) const
{
    try {
        bool cancelled = false;
        auto out = m_impl->run(inputIds, attentionMask, stop, cancelled);
        if (cancelled)
            return makeError(ErrorCode::Cancelled, std::string(m_impl->config.familyName()) + " text encoding was cancelled");
        return out;
    } catch (const nn::ForwardError& e) {
        return makeError(e.code, m_impl->origin + ": " + m_impl->config.familyName() + ": " + e.what());
    } catch (const c10::Error& e) {
        return errorFromException(e, m_impl->origin + ": " + m_impl->config.familyName());
    }
}

std::int64_t TextEncoder::residentBytes() const
{
    std::int64_t n = 0;
    for (const auto& [name, bytes] : bytesByRepresentation())
        n += bytes;
    return n;
}

std::map<std::string, std::int64_t> TextEncoder::bytesByRepresentation() const
{
    const auto& m = *m_impl;
    std::map<std::string, std::int64_t> out;
    auto addLinear = [&](const nn::Linear& l) {
        if (l.defined())
            out[std::string(quant::representationName(l.weight.representation()))] += l.residentBytes();
    };
    if (m.embed.table.defined())
        out["dense"] += m.embed.residentBytes();
    else if (m.embed.weight.defined())
        out[std::string(quant::representationName(m.embed.weight.representation()))] += m.embed.residentBytes();
    for (const auto& l : m.layers) {
        for (const auto* lin : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down})
            addLinear(*lin);
        for (const auto* t :
            {&l.inputNorm, &l.postAttentionNorm, &l.preFeedforwardNorm, &l.postFeedforwardNorm, &l.qNorm, &l.kNorm, &l.scalar})
            out["dense"] += bytesOf(*t);
    }
    out["dense"] += bytesOf(m.finalNorm);
    return out;
}

// ====================================================================== the causal LM

std::vector<std::int64_t> noRepeatNgramBans(const std::vector<std::int64_t>& sequence, int n)
{
    std::vector<std::int64_t> banned;
    const auto len = static_cast<std::int64_t>(sequence.size());
    if (n < 1 || len + 1 < n)
        return banned;
    const auto tail = len - (n - 1);
    for (std::int64_t i = 0; i + n <= len; ++i) {
        bool same = true;
        for (int j = 0; j < n - 1 && same; ++j)
            same = sequence[static_cast<std::size_t>(i + j)] == sequence[static_cast<std::size_t>(tail + j)];
        if (same)
            banned.push_back(sequence[static_cast<std::size_t>(i + n - 1)]);
    }
    std::sort(banned.begin(), banned.end());
    banned.erase(std::unique(banned.begin(), banned.end()), banned.end());
    return banned;
}

struct CausalLm::Impl : Model {
    nn::Linear head;  // the embedding table, tied
    std::vector<std::int64_t> eos;

    // Keys and values of every layer that makes its own, [1, kv heads, capacity, head_dim], and
    // which of the capacity's positions may be attended to (left padding may not).
    struct Cache {
        std::vector<at::Tensor> k, v;
        at::Tensor keyValid;  // bool [capacity]
        std::int64_t length = 0;
    };
    // New tokens (model ids [1, t]) at RoPE positions [1, t] after cache.length cached ones:
    // the caches extended, the final-norm hidden state of the last token returned [1, hidden].
    // With an image (the prompt's read only): imageRows bool [1, t] marks the placeholders the
    // features [n, hidden] replace, blocks long [t] each one's image run (-1 for text).
    at::Tensor forward(const at::Tensor& ids, const at::Tensor& positions, Cache& cache, const at::Tensor& imageRows = {},
        const at::Tensor& features = {}, const at::Tensor& blocks = {}) const;
    at::Tensor logits(const at::Tensor& hidden) const;
    // The tied head and the EOS ids (generation_config.json's, else config.json's).
    Result<void> finishHead();
};

namespace {

// TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper (min_tokens_to_keep 1) and softmax
// on scores [1, vocab] float32 where they are, op for op as transformers 5.24; torch.multinomial
// on the CPU with the CPU generator (a sort of 262k logits costs a CPU ~10 ms a token, the draw
// alone ~5: only the draw stays on the CPU, where a seed means the same numbers everywhere).
std::int64_t sampleToken(at::Tensor scores, const Sampling& s, at::Generator& generator)
{
    if (s.temperature != 1.0)
        scores = scores / s.temperature;
    if (s.topK > 0) {
        const auto k = std::min<std::int64_t>(s.topK, scores.size(-1));
        const auto kth = std::get<0>(at::topk(scores, k)).select(-1, k - 1).unsqueeze(-1);
        scores = scores.masked_fill(scores < kth, -std::numeric_limits<float>::infinity());
    }
    if (s.topP < 1.0) {
        const auto [sorted, order] = at::sort(scores, -1, false);
        auto remove = sorted.softmax(-1).cumsum(-1) <= (1.0 - s.topP);
        remove.select(-1, -1).fill_(false);
        scores = scores.masked_fill(remove.scatter(1, order, remove), -std::numeric_limits<float>::infinity());
    }
    const auto probs = scores.softmax(-1).to(at::kCPU);
    return at::multinomial(probs, 1, false, generator).item<std::int64_t>();
}

}  // namespace

at::Tensor CausalLm::Impl::forward(const at::Tensor& ids, const at::Tensor& positions, Cache& cache, const at::Tensor& imageRows,
    const at::Tensor& features, const at::Tensor& blocks) const
{
    const auto& c = config;
    const auto past = cache.length, t = ids.size(1), total = past + t;
    TORCH_CHECK(total <= cache.keyValid.size(0), "the key/value cache holds ", cache.keyValid.size(0), " positions, ", total, " asked");
    auto h = embedTokens(ids);
    // Gemma3Model: the features overwrite the scaled embeddings of the placeholders.
    if (features.defined())
        h = h.masked_scatter(imageRows.to(device).unsqueeze(-1), features.to(device, dtype));
    const auto ple = c.perLayerDim > 0 ? perLayerInputs(ids, h) : at::Tensor();

    // Causal order and the sliding window go by index in the padded sequence (transformers'
    // masks over cache positions); RoPE by the real-token positions.
    const auto opts = at::TensorOptions().dtype(at::kLong).device(device);
    const auto q = at::arange(past, total, opts).view({t, 1});
    const auto k = at::arange(0, total, opts).view({1, total});
    const auto order = k <= q;
    // An image's tokens see each other both ways (blockwise_overlay, OR-ed with the causal
    // order; the sliding window and the padding still apply after): on every layer for Gemma 3,
    // on sliding layers only for Gemma 4 (create_masks_for_vision_model).
    auto imageOrder = order;
    if (blocks.defined() && c.imageAttention != TextConfig::ImageAttention::Causal) {
        TORCH_CHECK(past == 0 && blocks.size(0) == t, "image blocks are for the prompt's first read");
        const auto b = blocks.to(device);
        imageOrder = order.logical_or((b.view({t, 1}) == b.view({1, t})).logical_and(b.view({t, 1}) >= 0));
    }
    const auto valid = cache.keyValid.narrow(0, 0, total).view({1, total});
    const auto fullOrder = c.imageAttention == TextConfig::ImageAttention::BothWays ? imageOrder : order;
    const auto fullMask = fullOrder.logical_and(valid).view({1, 1, t, total});
    const auto slidingMask = imageOrder.logical_and(valid).logical_and(k > q - c.slidingWindow).view({1, 1, t, total});
    const auto fullRows = fullMask.any(-1, true), slidingRows = slidingMask.any(-1, true);
    auto rope = [&](const at::Tensor& invFreq) {
        const auto freqs = positions.to(device).to(at::kFloat).view({1, t, 1}) * invFreq.view({1, 1, -1});
        const auto emb = at::cat({freqs, freqs}, -1);
        return std::make_pair(emb.cos().to(dtype).unsqueeze(1), emb.sin().to(dtype).unsqueeze(1));
    };
    const auto [cosFull, sinFull] = rope(invFreqFull);
    const auto [cosSliding, sinSliding] = rope(invFreqSliding);
    const double scale = c.family == Family::Gemma4 ? 1.0 : 1.0 / std::sqrt(c.queryPreAttnScalar);

    for (std::size_t i = 0; i < layers.size(); ++i) {
        const auto& l = layers[i];
        const auto& cos = l.sliding ? cosSliding : cosFull;
        const auto& sin = l.sliding ? sinSliding : sinFull;
        const auto& mask = l.sliding ? slidingMask : fullMask;
        const auto hd = l.headDim;
        const auto x = norm(h, l.inputNorm);
        auto query = norm(l.q(x).view({1, t, c.heads, hd}).transpose(1, 2), l.qNorm);
        query = query * cos + rotateHalf(query) * sin;
        if (l.kvSource == static_cast<std::int64_t>(i)) {
            const auto rawKey = l.k(x).view({1, t, l.kvHeads, hd}).transpose(1, 2);
            auto value = l.valueIsKey ? rawKey : l.v(x).view({1, t, l.kvHeads, hd}).transpose(1, 2);
            if (c.family == Family::Gemma4)
                value = norm(value, at::Tensor());
            auto key = norm(rawKey, l.kNorm);
            key = key * cos + rotateHalf(key) * sin;
            cache.k[i].narrow(2, past, t).copy_(key);
            cache.v[i].narrow(2, past, t).copy_(value);
        }
        // Grouped-query attention reads each key/value head for its query heads in place: a
        // copy of the whole cache per layer and token is what repeating them would cost.
        const auto src = static_cast<std::size_t>(l.kvSource);
        const auto keys = cache.k[src].narrow(2, 0, total);
        const auto values = cache.v[src].narrow(2, 0, total);
        auto out = at::scaled_dot_product_attention(query, keys, values, mask, 0.0, false, scale, l.kvHeads != c.heads);
        // A left-padded query sees no key: 0, not the NaN an all-masked softmax may give, since
        // its keys and values are cached (masked) and must stay finite.
        out = at::where(l.sliding ? slidingRows : fullRows, out, at::zeros({}, out.options()));
        h = h + norm(l.o(out.transpose(1, 2).reshape({1, t, c.heads * hd})), l.postAttentionNorm);
        h = h + norm(mlp(l, norm(h, l.preFeedforwardNorm)), l.postFeedforwardNorm);
        if (ple.defined()) {
            const auto gate = l.perLayerGate(h);
            const auto mixed = (c.geluTanh ? nn::geluTanh(gate) : at::gelu(gate)) * ple.select(2, static_cast<std::int64_t>(i));
            h = h + norm(l.perLayerProjection(mixed), l.postPerLayerNorm);
        }
        if (l.scalar.defined())
            h = h * l.scalar;
    }
    cache.length = total;
    return norm(h.select(1, t - 1), finalNorm);
}

at::Tensor CausalLm::Impl::logits(const at::Tensor& hidden) const
{
    auto out = head(hidden);
    if (config.finalLogitSoftcap)
        out = at::tanh(out / *config.finalLogitSoftcap) * *config.finalLogitSoftcap;
    return out.to(at::kFloat).view({-1});
}

CausalLm::CausalLm(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
CausalLm::~CausalLm() = default;
CausalLm::CausalLm(CausalLm&&) noexcept = default;
CausalLm& CausalLm::operator=(CausalLm&&) noexcept = default;

const TextConfig& CausalLm::config() const
{
    return m_impl->config;
}
const std::vector<std::int64_t>& CausalLm::eosIds() const
{
    return m_impl->eos;
}

Result<CausalLm> CausalLm::load(const fs::path& path, const TextEncoderLoadOptions& options)
{
    auto impl = std::make_unique<Impl>();
    if (auto loaded = loadModel(*impl, path, options, true); !loaded)
        return loaded.error();
    if (auto done = impl->finishHead(); !done)
        return done.error();
    return CausalLm(std::move(impl));
}

Result<void> CausalLm::Impl::finishHead()
{
    head.name = "lm_head (tied to embed_tokens)";
    head.weight = embed.table.defined() ? quant::QuantizedWeight::dense(embed.table) : embed.weight;
    if (generation.eosIds.empty())
        generation.eosIds = config.eosIds;
    eos = generation.eosIds;
    if (eos.empty())
        return makeError(ErrorCode::InvalidFormat,
            origin + ": neither generation_config.json nor config.json names an end-of-sequence token (eos_token_id)");
    return {};
}

Result<CausalLm> CausalLm::sharing(const TextEncoder& encoder)
{
    const Model& model = *encoder.m_impl;
    if (model.config.family != Family::Gemma3)
        return makeError(ErrorCode::Unsupported,
            model.origin + ": is " + model.config.familyName()
                + "; only Gemma 3 text encoders (LTX-2.0 / 2.3) write prompts, LTX-2.5's is not trained to");
    // Tensors are reference-counted: the copy shares every weight with the encoder.
    auto impl = std::make_unique<Impl>();
    static_cast<Model&>(*impl) = model;
    if (auto done = impl->finishHead(); !done)
        return done.error();
    return CausalLm(std::move(impl));
}

const GenerationDefaults& CausalLm::generationDefaults() const
{
    return m_impl->generation;
}

Result<Generation> CausalLm::generate(
    const at::Tensor& inputIds, const at::Tensor& attentionMask, const GenerateOptions& options, std::stop_token stop) const
{
    const auto& m = *m_impl;
    const auto& c = m.config;
    try {
        TORCH_CHECK(inputIds.dim() == 2 && inputIds.size(0) == 1 && inputIds.size(1) > 0, "generation takes one prompt [1, T], got ",
            inputIds.sizes());
        TORCH_CHECK(attentionMask.sizes() == inputIds.sizes(), "the attention mask ", attentionMask.sizes(), " does not match the ids ",
            inputIds.sizes());
        TORCH_CHECK(
            options.maxNewTokens > 0 && options.maxNewTokens <= 1 << 16, "max new tokens must lie in 1..65536, got ", options.maxNewTokens);
        const auto mask = attentionMask.to(at::kCPU, at::kLong).contiguous();
        TORCH_CHECK(mask[0][-1].item<std::int64_t>() == 1, "the prompt's last token is padding; pad on the left");
        const auto t = inputIds.size(1);
        const auto capacity = t + options.maxNewTokens;

        Impl::Cache cache;
        cache.k.resize(m.layers.size());
        cache.v.resize(m.layers.size());
        for (std::size_t i = 0; i < m.layers.size(); ++i)
            if (m.layers[i].kvSource == static_cast<std::int64_t>(i)) {
                const auto& l = m.layers[i];
                cache.k[i] = at::zeros({1, l.kvHeads, capacity, l.headDim}, at::TensorOptions().dtype(m.dtype).device(m.device));
                cache.v[i] = at::zeros_like(cache.k[i]);
            }
        cache.keyValid = at::cat({mask[0].to(at::kBool), at::ones({options.maxNewTokens}, at::kBool)}).to(m.device);

        // GenerationMixin._prepare_position_ids_for_generation: real tokens count from 0.
        const auto positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0);
        auto lastPosition = positions[0][-1].item<std::int64_t>();
        const auto hostIds = inputIds.to(at::kCPU, at::kLong).contiguous();
        std::vector<std::int64_t> sequence(hostIds.data_ptr<std::int64_t>(), hostIds.data_ptr<std::int64_t>() + t);
        const auto& eos = options.eosIds.empty() ? m.eos : options.eosIds;

        if (options.sampling) {
            const auto& s = *options.sampling;
            TORCH_CHECK(
                std::isfinite(s.temperature) && s.temperature > 0, "the temperature must be a positive number, got ", s.temperature);
            TORCH_CHECK(s.topK >= 0, "top_k must be 0 (off) or more, got ", s.topK);
            TORCH_CHECK(s.topP > 0 && s.topP <= 1, "top_p must lie in (0, 1], got ", s.topP);
        }
        auto generator = at::make_generator<at::CPUGeneratorImpl>(options.sampling ? options.sampling->seed : 0);

        // The image's placeholders and their runs (get_block_sequence_ids_for_mask).
        at::Tensor imageRows, blocks;
        if (options.imageFeatures.defined()) {
            TORCH_CHECK(c.imageTokenId.has_value(), "this model's config names no image token (image_token_id)");
            imageRows = hostIds == *c.imageTokenId;
            const auto placeholders = imageRows.sum().item<std::int64_t>();
            TORCH_CHECK(options.imageFeatures.dim() == 2 && options.imageFeatures.size(1) == c.hiddenSize
                    && options.imageFeatures.size(0) == placeholders,
                "image features and image tokens do not match: ", placeholders, " tokens, features ", options.imageFeatures.sizes());
            blocks = at::full({t}, -1, at::kLong);
            auto* b = blocks.data_ptr<std::int64_t>();
            const auto* is = imageRows.data_ptr<bool>();
            std::int64_t group = -1;
            for (std::int64_t i = 0; i < t; ++i)
                if (is[i]) {
                    if (i == 0 || !is[i - 1])
                        ++group;
                    b[i] = group;
                }
        }

        Generation out;
        std::vector<at::Tensor> steps;
        auto hidden = m.forward(m.modelIds(inputIds), positions, cache, imageRows, options.imageFeatures, blocks);
        for (int step = 0; step < options.maxNewTokens; ++step) {
            if (stop.stop_requested())
                return makeError(ErrorCode::Cancelled, std::string(c.familyName()) + " generation was cancelled");
            auto scores = m.logits(hidden);
            // A copy: on the CPU .cpu() is the same tensor, which the n-gram rule then edits.
            steps.push_back(scores.to(at::kCPU, false, true));
            if (options.noRepeatNgram > 0)
                for (const auto banned : noRepeatNgramBans(sequence, options.noRepeatNgram))
                    if (banned >= 0 && banned < scores.size(0))
                        scores[banned] = -std::numeric_limits<float>::infinity();
            const auto next =
                options.sampling ? sampleToken(scores.view({1, -1}), *options.sampling, generator) : scores.argmax().item<std::int64_t>();
            out.ids.push_back(next);
            sequence.push_back(next);
            if (options.progress)
                options.progress(step + 1, options.maxNewTokens);
            if (std::find(eos.begin(), eos.end(), next) != eos.end()) {
                out.stoppedAtEos = true;
                break;
            }
            if (step + 1 == options.maxNewTokens)
                break;
            hidden = m.forward(m.modelIds(at::full({1, 1}, next, at::kLong)), at::full({1, 1}, ++lastPosition, at::kLong), cache);
        }
        out.logits = at::stack(steps);
        return out;
    } catch (const nn::ForwardError& e) {
        return makeError(e.code, m.origin + ": " + c.familyName() + ": " + e.what());
    } catch (const c10::Error& e) {
        return errorFromException(e, m.origin + ": " + c.familyName() + " generation");
    }
}

std::int64_t CausalLm::residentBytes() const
{
    const auto& m = *m_impl;
    std::int64_t n = m.embed.residentBytes() + bytesOf(m.finalNorm) + bytesOf(m.perLayerProjectionNorm);
    if (m.perLayerModelProjection.defined())
        n += m.perLayerModelProjection.residentBytes();
    for (const auto& l : m.layers) {
        for (const auto* lin : {&l.q, &l.k, &l.v, &l.o, &l.gate, &l.up, &l.down, &l.perLayerGate, &l.perLayerProjection})
            if (lin->defined())
                n += lin->residentBytes();
        for (const auto* t : {&l.inputNorm, &l.postAttentionNorm, &l.preFeedforwardNorm, &l.postFeedforwardNorm, &l.qNorm, &l.kNorm,
                 &l.scalar, &l.postPerLayerNorm})
            n += bytesOf(*t);
    }
    return n;
}

std::int64_t CausalLm::hostBytes() const
{
    return m_impl->perLayerEmbed.residentBytes();
}

at::Tensor gemmaNorm(const at::Tensor& x, const at::Tensor& scale, double eps, Family family)
{
    const auto xf = x.to(at::kFloat);
    const auto meanSquare = xf.pow(2).mean(-1, true) + eps;
    auto normed = xf * (family == Family::Gemma4 ? at::pow(meanSquare, -0.5) : at::rsqrt(meanSquare));
    if (scale.defined())
        normed = normed * scale;
    return normed.to(x.scalar_type());
}

at::Tensor rotateHalf(const at::Tensor& x)
{
    const auto half = x.size(-1) / 2;
    return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

bool isUnusedByTextEncoder(const std::string& name)
{
    return std::any_of(kIgnoredPrefixes.begin(), kIgnoredPrefixes.end(), [&](const std::string& p) { return name.rfind(p, 0) == 0; });
}

}  // namespace vireo::gemma3
