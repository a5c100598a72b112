#pragma once

// Every LTX-2 checkpoint layout users have, indexed under one naming scheme (diffusers'
// module names, the scheme of the reference we test against): Lightricks single files
// (`model.diffusion_model.*`, `text_embedding_projection.*`), diffusers folders
// (`transformer/`, `connectors/`), ComfyUI GGUF (`ltxv`, names without the prefix) and
// scaled-FP8 files (F8 weights with `weight_scale` / `input_scale` siblings).

#include "inference/models/nn/layers.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/util/result.h"

#include <c10/core/ScalarType.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace vireo::ltx2 {

// DurationHead (LTX-2.5): a single file's `duration_head.*` with the prefix removed, or a
// diffusers `duration_head/` folder. DiffusionDecoder (LTX-2.5): a diffusers
// `diffusion_decoder/` folder, or the `decoder.` tensors of a Lightricks video VAE file whose
// embedded config names a diffusion VAE (a stand-alone file with bare `decoder.` / `encoder.` /
// `per_channel_statistics.` names is read as a single file's `vae.` ones).
enum class Part { Transformer, Connectors, VideoVae, AudioVae, Vocoder, DurationHead, DiffusionDecoder };
constexpr int kPartCount = 7;
const char* partName(Part part);  // "LTX-2 transformer", ...
const char* partComponent(Part part);  // the diffusers folder: "transformer", "vae", ...
const char* partClassName(Part part);  // the diffusers class of that folder

struct SourceTensor {
    const tensorfile::Checkpoint* checkpoint = nullptr;
    std::string name;  // as stored
    const tensorfile::TensorInfo* info = nullptr;
};

// Canonical (diffusers) name of an ltx-core DiT key with `model.diffusion_model.` removed.
std::string ltxCoreToDiffusersTransformer(const std::string& name);
// The inverse, for names a LoRA trained against ltx-core checkpoints uses.
std::string diffusersToLtxCoreTransformer(const std::string& name);
// Canonical name of an ltx-core connector or text-projection key (prefix removed).
std::string ltxCoreToDiffusersConnector(const std::string& name);
// ltx-core's flat VAE lists to diffusers' nested blocks (`vae.` removed): decoder
// up_blocks.0 = mid_block, 2m+1 = up_blocks.m.upsamplers.0, 2m+2 = up_blocks.m; res_blocks =
// resnets; per_channel_statistics.{mean,std}-of-means = latents_{mean,std}. Encoder keys keep
// their ltx-core indices here: their mid block is the list's last entry, so
// mapLtxCoreVideoEncoder renames them once all names are known.
std::string ltxCoreToDiffusersVideoVae(const std::string& name);
// The encoder half of the map over a whole video VAE part, for tensors stored as
// `vae.encoder.down_blocks.K.*`: 2m = down_blocks.m, 2m+1 = down_blocks.m.downsamplers.0, the
// last (even) K = mid_block. Fails when a renamed tensor collides with a stored one.
Result<void> mapLtxCoreVideoEncoder(std::map<std::string, SourceTensor>& part);
// LTX-2.5's diffusion decoder, `decoder.` (or `vae.decoder.`) removed, to diffusers' names:
// attn.proj / q_norm / k_norm and t_embedder.mlp.{0,2} renamed; the fused attn.qkv and the
// gates (gate_msa / gate_mlp / gate_ctx) keep their names for the loader to split and fold.
// nullopt: a tensor no decoder reads (type_emb, a coarse_* preview head).
std::optional<std::string> ltxCoreToDiffusersDiffusionDecoder(const std::string& name);
// `audio_vae.` removed: only the statistics are renamed.
std::string ltxCoreToDiffusersAudioVae(const std::string& name);
// `vocoder.` removed: ups/resblocks/conv_pre/conv_post/act_post/downsample.lowpass renamed.
std::string ltxCoreToDiffusersVocoder(const std::string& name);

class Ltx2Weights {
public:
    // Each path may be a file, a folder, a diffusers pipeline or a Hub cache folder; a GGUF
    // transformer is typically given together with its text-projection file.
    static Result<Ltx2Weights> open(const std::vector<std::filesystem::path>& paths);

    const SourceTensor* find(Part part, const std::string& name) const;
    std::optional<std::vector<std::int64_t>> shape(Part part, const std::string& name) const;
    // The shape when the tensor exists with exactly `rank` dims; nullopt otherwise, so a
    // caller may index it up to rank - 1.
    std::optional<std::vector<std::int64_t>> shape(Part part, const std::string& name, std::size_t rank) const;
    const std::map<std::string, SourceTensor>& tensors(Part part) const;
    // Block counts: N + 1 over names "<prefix>N.<rest>" of a part (0 when none). The indices
    // must run 0 .. N without a gap and stay below kMaxBlocks; an error names the tensor (a
    // header naming block 999999999 must not make a loader plan 10^9 blocks).
    Result<std::int64_t> indexCount(Part part, const std::string& prefix) const;
    // Keys that belong to no LTX-2 component: they fail every load.
    const std::vector<std::string>& unknown() const { return m_unknown; }
    // Tensors found in two of the given files with the same bytes (read once), by pair of files.
    const std::map<std::string, int>& repeated() const { return m_repeated; }

    std::optional<std::string> diffusersConfig(Part part) const;
    // The config Lightricks embeds (`config` in the safetensors metadata): the one of a file that
    // holds this part's tensors first, so a companion file (a separate VAE, connectors or
    // vocoder file, each with its own config) answers for its own part.
    std::optional<std::string> ltxCoreConfig(std::optional<Part> part = std::nullopt) const;
    // A metadata entry of the first file holding this part's tensors (Lightricks stamps its
    // transformer file with model_version and gemma_source_checkpoint), and that file's name.
    struct Stamp {
        std::string value, file;
    };
    std::optional<Stamp> metadata(Part part, const std::string& key) const;
    std::string describeFiles() const;

    // What the transformer's own files say it was trained for, so defaults follow the model and
    // not a guess: "dev" or "distilled" from a GGUF's general.name or general.finetune, else the
    // file's name ("ltx-2-19b-dev-fp8.safetensors"), else its folders up to the model root
    // (unsloth keeps its distilled GGUFs under distilled/; a Hub cache names its repo). Empty
    // when nothing says, or a place says both; `evidence` names the place that decided.
    struct TrainedFor {
        std::string schedule, evidence;
    };
    TrainedFor trainedFor() const;

private:
    std::shared_ptr<std::vector<tensorfile::ModelSource>> m_sources;
    std::map<std::string, SourceTensor> m_parts[kPartCount];
    std::vector<std::string> m_unknown;
    std::map<std::string, int> m_repeated;
};

// Hands out the weights of one part and keeps the books: a name asked for that is absent,
// or a stored tensor never asked for, fails finish() with the list, so a partly random
// model can never run.
class WeightTaker {
public:
    WeightTaker(const Ltx2Weights& weights, Part part, c10::Device device, c10::ScalarType dtype);

    bool has(const std::string& name) const;
    // Where the weights taken from now on go (block offloading keeps blocks on the host).
    void setDevice(c10::Device device) { m_options.device = device; }
    nn::Linear linear(const std::string& name, bool bias);
    // A dense tensor in the compute dtype on the target device.
    at::Tensor tensor(const std::string& name);
    std::optional<at::Tensor> optionalTensor(const std::string& name);
    // Tensors under this prefix belong to a module this load does not build (the VAE
    // encoder, spare statistics): finish() does not count them as unknown.
    void ignorePrefix(const std::string& prefix) { m_ignored.push_back(prefix); }

    Result<void> finish() const;

private:
    Result<quant::QuantizedWeight> load(const std::string& name);

    const Ltx2Weights& m_weights;
    Part m_part;
    quant::LoadOptions m_options;
    c10::ScalarType m_dtype;
    std::set<std::string> m_taken;
    std::vector<std::string> m_missing;
    std::vector<std::string> m_failed;
    std::vector<std::string> m_ignored;
};

// A part's hyper-parameters in the order they are trusted: the caller's, diffusers'
// config.json for the part, then the config Lightricks embeds (fromLtxCore answering NotFound
// when it has no section for the part). nullopt: the checkpoint carries none, and the caller
// infers them from shapes or takes the published defaults. Parse errors name the files.
template <typename Config, typename FromDiffusers, typename FromLtxCore>
Result<std::optional<Config>> checkpointConfig(
    const Ltx2Weights& weights, Part part, const std::optional<Config>& override, FromDiffusers fromDiffusers, FromLtxCore fromLtxCore)
{
    if (override)
        return std::optional<Config>(*override);
    const auto named = [&](const Error& e) { return makeError(e.code, weights.describeFiles() + ": " + e.message); };
    if (auto json = weights.diffusersConfig(part)) {
        Result<Config> parsed = fromDiffusers(*json);
        if (!parsed)
            return named(parsed.error());
        return std::optional<Config>(*parsed);
    }
    if (auto json = weights.ltxCoreConfig(part)) {
        Result<Config> parsed = fromLtxCore(*json);
        if (parsed)
            return std::optional<Config>(*parsed);
        if (parsed.error().code != ErrorCode::NotFound)
            return named(parsed.error());
    }
    return std::optional<Config>();
}

}  // namespace vireo::ltx2
