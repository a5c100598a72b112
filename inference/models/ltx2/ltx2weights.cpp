#include "inference/models/ltx2/ltx2weights.h"

#include "inference/models/ltx2/ltx2config.h"
#include "inference/tensorfile/tensorview.h"
#include "inference/util/jsonlimits.h"
#include "inference/util/log.h"
#include "inference/util/text.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <sstream>

namespace vireo::ltx2 {

namespace {

constexpr std::string_view kDitPrefix = "model.diffusion_model.";

bool startsWith(std::string_view s, std::string_view p)
{
    return s.substr(0, p.size()) == p;
}
bool endsWith(std::string_view s, std::string_view p)
{
    return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

void replaceAll(std::string& s, std::string_view from, std::string_view to)
{
    for (std::size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
        s.replace(pos, from.size(), to);
}

std::string listNames(const std::vector<std::string>& names, std::size_t limit = 12)
{
    std::ostringstream out;
    for (std::size_t i = 0; i < names.size() && i < limit; ++i)
        out << (i ? ", " : "") << names[i];
    if (names.size() > limit)
        out << " and " << names.size() - limit << " more";
    return out.str();
}

// The same order as Part: an owner indexes the parts.
enum class Owner { Transformer, Connectors, VideoVae, AudioVae, Vocoder, DurationHead, DiffusionDecoder, Other, Unknown };

// Where a key of a top-level file (single file, GGUF, loose safetensors) belongs, and its
// canonical name.
std::pair<Owner, std::string> classifyTopLevel(const std::string& stored)
{
    std::string name = stored;
    const bool dit = startsWith(name, kDitPrefix);
    if (dit)
        name = name.substr(kDitPrefix.size());
    if (startsWith(name, "video_embeddings_connector.") || startsWith(name, "audio_embeddings_connector.")
        || startsWith(name, "text_embedding_projection."))
        return {Owner::Connectors, ltxCoreToDiffusersConnector(name)};
    if (startsWith(name, "video_connector.") || startsWith(name, "audio_connector.") || startsWith(name, "text_proj_in.")
        || startsWith(name, "video_text_proj_in.") || startsWith(name, "audio_text_proj_in."))
        return {Owner::Connectors, name};
    if (!dit && startsWith(name, "vae."))
        return {Owner::VideoVae, ltxCoreToDiffusersVideoVae(name.substr(4))};
    if (!dit && startsWith(name, "audio_vae."))
        return {Owner::AudioVae, ltxCoreToDiffusersAudioVae(name.substr(10))};
    if (!dit && startsWith(name, "vocoder."))
        return {Owner::Vocoder, ltxCoreToDiffusersVocoder(name.substr(8))};
    if (!dit && startsWith(name, "duration_head."))
        return {Owner::DurationHead, name.substr(14)};
    return {Owner::Transformer, ltxCoreToDiffusersTransformer(name)};
}

// What a top-level file's embedded config says of its video VAE (Lightricks' files): whether
// it is one, and whether its decoder is LTX-2.5's diffusion decoder (ltx-core builds that for
// any vae._class_name but "CausalVideoAutoencoder").
struct VaeFileKind {
    bool vaeSection = false, diffusionDecoder = false;
};
VaeFileKind vaeFileKind(const tensorfile::Checkpoint& cp)
{
    VaeFileKind kind;
    const auto it = cp.metadata.find("config");
    if (it == cp.metadata.end())
        return kind;
    const auto json = jsonutil::parseUntrusted(it->second, cp.path.filename().string() + ": the embedded config");
    if (!json)
        return kind;
    const auto* vae = jsonutil::objectField(*json, "vae");
    if (!vae)
        return kind;
    kind.vaeSection = true;
    const auto cls = jsonutil::stringOr(*vae, "_class_name", "CausalVideoAutoencoder");
    kind.diffusionDecoder = cls != "CausalVideoAutoencoder";
    return kind;
}

// A Lightricks stand-alone VAE file keeps its parts at the top (decoder., encoder.,
// per_channel_statistics.): the same tensors as a single file's `vae.` ones.
bool bareVaeFile(const tensorfile::Checkpoint& cp)
{
    bool any = false;
    for (const auto& t : cp.tensors) {
        if (startsWith(t.name, "decoder.") || startsWith(t.name, "encoder.") || startsWith(t.name, "per_channel_statistics."))
            any = true;
        else if (!quant::isQuantizationSibling(t.name))
            return false;
    }
    return any;
}

// config.json's "_class_name", or "" when the text is no JSON object or names no class (a
// number there is no class either; the part's own config reader reports the damage).
std::string classNameOf(const std::string& configText)
{
    const auto json = jsonutil::parseUntrusted(configText, "config.json");
    return json ? jsonutil::stringOr(*json, "_class_name") : std::string();
}

// A diffusers component folder given on its own (".../vocoder", ".../audio_vae") holds that
// component's names without the folder prefix, so key prefixes cannot place them: the 2.3
// vocoder's own names start with "vocoder." and the audio VAE's carry no marker at all. Its
// config.json's class says which component it is.
std::optional<Owner> ownerFromClass(const std::map<std::string, std::string>& configs)
{
    const auto it = configs.find("");
    if (it == configs.end())
        return std::nullopt;
    const auto cls = classNameOf(it->second);
    if (cls == "LTX2VideoTransformer3DModel")
        return Owner::Transformer;
    if (cls == "LTX2TextConnectors")
        return Owner::Connectors;
    if (cls == "AutoencoderKLLTX2Video")
        return Owner::VideoVae;
    if (cls == "AutoencoderKLLTX2Audio")
        return Owner::AudioVae;
    if (cls == "LTX2Vocoder" || cls == "LTX2VocoderWithBWE")
        return Owner::Vocoder;
    if (cls == "LTX2DurationHead")
        return Owner::DurationHead;
    if (cls == "LTX2VideoDiffusionDecoderModel")
        return Owner::DiffusionDecoder;
    return std::nullopt;
}

}  // namespace

const char* partName(Part part)
{
    switch (part) {
    case Part::Transformer: return "LTX-2 transformer";
    case Part::Connectors: return "LTX-2 text connectors";
    case Part::VideoVae: return "LTX-2 video VAE";
    case Part::AudioVae: return "LTX-2 audio VAE";
    case Part::Vocoder: return "LTX-2 vocoder";
    case Part::DurationHead: return "LTX-2.5 duration head";
    case Part::DiffusionDecoder: return "LTX-2.5 diffusion video decoder";
    }
    return "?";
}

const char* partComponent(Part part)
{
    switch (part) {
    case Part::Transformer: return "transformer";
    case Part::Connectors: return "connectors";
    case Part::VideoVae: return "vae";
    case Part::AudioVae: return "audio_vae";
    case Part::Vocoder: return "vocoder";
    case Part::DurationHead: return "duration_head";
    case Part::DiffusionDecoder: return "diffusion_decoder";
    }
    return "?";
}

const char* partClassName(Part part)
{
    switch (part) {
    case Part::Transformer: return "LTX2VideoTransformer3DModel";
    case Part::Connectors: return "LTX2TextConnectors";
    case Part::VideoVae: return "AutoencoderKLLTX2Video";
    case Part::AudioVae: return "AutoencoderKLLTX2Audio";
    case Part::Vocoder: return "LTX2Vocoder";  // or LTX2VocoderWithBWE
    case Part::DurationHead: return "LTX2DurationHead";
    case Part::DiffusionDecoder: return "LTX2VideoDiffusionDecoderModel";
    }
    return "?";
}

std::optional<std::string> ltxCoreToDiffusersDiffusionDecoder(const std::string& key)
{
    if (key == "type_emb" || startsWith(key, "coarse_"))
        return std::nullopt;
    std::string name = key;
    replaceAll(name, ".attn.proj.", ".attn.to_out.0.");
    replaceAll(name, ".attn.q_norm.", ".attn.norm_q.");
    replaceAll(name, ".attn.k_norm.", ".attn.norm_k.");
    if (startsWith(name, "t_embedder.mlp.0."))
        name = "t_embedder.timestep_embedder.linear_1." + name.substr(17);
    else if (startsWith(name, "t_embedder.mlp.2."))
        name = "t_embedder.timestep_embedder.linear_2." + name.substr(17);
    return "decoder." + name;
}

std::string ltxCoreToDiffusersVideoVae(const std::string& key)
{
    std::string name = key;
    if (name == "per_channel_statistics.mean-of-means")
        return "latents_mean";
    if (name == "per_channel_statistics.std-of-means")
        return "latents_std";
    replaceAll(name, ".res_blocks.", ".resnets.");
    if (startsWith(name, "decoder.up_blocks.")) {
        const auto rest = name.substr(18);
        const auto dot = rest.find('.');
        // Only a plain index of a few digits is renamed; anything else keeps its name and
        // fails the load as an unknown tensor.
        if (dot != std::string::npos && dot > 0 && dot <= 4
            && std::all_of(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(dot), [](char ch) { return ch >= '0' && ch <= '9'; })) {
            const int k = std::stoi(rest.substr(0, dot));
            const auto tail = rest.substr(dot);
            if (k == 0)
                return "decoder.mid_block" + tail;
            if (k % 2 == 1)
                return "decoder.up_blocks." + std::to_string((k - 1) / 2) + ".upsamplers.0" + tail;
            return "decoder.up_blocks." + std::to_string((k - 2) / 2) + tail;
        }
    }
    return name;
}

Result<void> mapLtxCoreVideoEncoder(std::map<std::string, SourceTensor>& part)
{
    constexpr std::string_view kStored = "vae.encoder.down_blocks.";
    constexpr std::string_view kCanonical = "encoder.down_blocks.";
    // ltx-core index of each tensor to rename; -1: not a plain index, the name stays (and the
    // load fails on it as an unknown tensor).
    auto indexOf = [&](const std::string& canonical, const SourceTensor& t) -> int {
        // ltx-core's indices: a single file's `vae.` names, or a Lightricks VAE file's bare ones
        // (it embeds its config; a diffusers folder's files do not, and keep diffusers' indices).
        const bool ltxCore = startsWith(t.name, kStored) || (startsWith(t.name, kCanonical) && t.checkpoint->metadata.count("config") > 0);
        if (!ltxCore || !startsWith(canonical, kCanonical))
            return -1;
        const auto rest = std::string_view(canonical).substr(kCanonical.size());
        const auto dot = rest.find('.');
        if (dot == std::string_view::npos || dot == 0 || dot > 4
            || !std::all_of(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(dot), [](char ch) { return ch >= '0' && ch <= '9'; }))
            return -1;
        return std::stoi(std::string(rest.substr(0, dot)));
    };
    int last = -1;
    for (const auto& [name, t] : part)
        last = std::max(last, indexOf(name, t));
    if (last < 0)
        return {};
    std::map<std::string, SourceTensor> mapped;
    for (auto& [name, t] : part) {
        std::string canonical = name;
        if (const int k = indexOf(name, t); k >= 0) {
            const auto tail = name.substr(name.find('.', kCanonical.size()));
            if (k == last && k % 2 == 0)
                canonical = "encoder.mid_block" + tail;
            else if (k % 2 == 1)
                canonical = "encoder.down_blocks." + std::to_string((k - 1) / 2) + ".downsamplers.0" + tail;
            else
                canonical = "encoder.down_blocks." + std::to_string(k / 2) + tail;
        }
        if (auto [it, inserted] = mapped.emplace(canonical, t); !inserted)
            return makeError(ErrorCode::InvalidFormat,
                "'" + canonical + "' is stored twice: as '" + it->second.name + "' in " + it->second.checkpoint->path.string() + " and as '"
                    + t.name + "' in " + t.checkpoint->path.string() + "; give each LTX-2 component once");
    }
    part = std::move(mapped);
    return {};
}

std::string ltxCoreToDiffusersAudioVae(const std::string& key)
{
    if (key == "per_channel_statistics.mean-of-means")
        return "latents_mean";
    if (key == "per_channel_statistics.std-of-means")
        return "latents_std";
    return key;
}

std::string ltxCoreToDiffusersVocoder(const std::string& key)
{
    std::string name = "." + key;
    replaceAll(name, ".ups.", ".upsamplers.");
    replaceAll(name, ".resblocks.", ".resnets.");
    replaceAll(name, ".conv_pre.", ".conv_in.");
    replaceAll(name, ".conv_post.", ".conv_out.");
    replaceAll(name, ".act_post.", ".act_out.");
    replaceAll(name, ".downsample.lowpass.", ".downsample.");
    return name.substr(1);
}

std::string ltxCoreToDiffusersTransformer(const std::string& key)
{
    // Anchored prefix renames: "adaln_single." is also a suffix of the av_ca_* names.
    static const std::pair<std::string_view, std::string_view> kPrefixes[] = {
        {"adaln_single.", "time_embed."},
        {"audio_adaln_single.", "audio_time_embed."},
        {"prompt_adaln_single.", "prompt_adaln."},
        {"audio_prompt_adaln_single.", "audio_prompt_adaln."},
        {"patchify_proj.", "proj_in."},
        {"audio_patchify_proj.", "audio_proj_in."},
        {"av_ca_video_scale_shift_adaln_single.", "av_cross_attn_video_scale_shift."},
        {"av_ca_audio_scale_shift_adaln_single.", "av_cross_attn_audio_scale_shift."},
        {"av_ca_a2v_gate_adaln_single.", "av_cross_attn_video_a2v_gate."},
        {"av_ca_v2a_gate_adaln_single.", "av_cross_attn_audio_v2a_gate."},
    };
    std::string name = key;
    for (const auto& [from, to] : kPrefixes)
        if (startsWith(name, from)) {
            name = std::string(to) + name.substr(from.size());
            break;
        }
    if (endsWith(name, ".scale_shift_table_a2v_ca_video"))
        name = name.substr(0, name.size() - 30) + "video_a2v_cross_attn_scale_shift_table";
    else if (endsWith(name, ".scale_shift_table_a2v_ca_audio"))
        name = name.substr(0, name.size() - 30) + "audio_a2v_cross_attn_scale_shift_table";
    replaceAll(name, ".q_norm.", ".norm_q.");
    replaceAll(name, ".k_norm.", ".norm_k.");
    return name;
}

std::string diffusersToLtxCoreTransformer(const std::string& key)
{
    static const std::pair<std::string_view, std::string_view> kPrefixes[] = {
        {"time_embed.", "adaln_single."},
        {"audio_time_embed.", "audio_adaln_single."},
        {"prompt_adaln.", "prompt_adaln_single."},
        {"audio_prompt_adaln.", "audio_prompt_adaln_single."},
        {"proj_in.", "patchify_proj."},
        {"audio_proj_in.", "audio_patchify_proj."},
        {"av_cross_attn_video_scale_shift.", "av_ca_video_scale_shift_adaln_single."},
        {"av_cross_attn_audio_scale_shift.", "av_ca_audio_scale_shift_adaln_single."},
        {"av_cross_attn_video_a2v_gate.", "av_ca_a2v_gate_adaln_single."},
        {"av_cross_attn_audio_v2a_gate.", "av_ca_v2a_gate_adaln_single."},
    };
    // Module names (no ".weight") are matched as prefixes with the dot they would have. Layer
    // names only: the scale-shift tables a LoRA never targets keep their diffusers names.
    std::string name = key + ".";
    for (const auto& [from, to] : kPrefixes)
        if (startsWith(name, from)) {
            name = std::string(to) + name.substr(from.size());
            break;
        }
    replaceAll(name, ".norm_q.", ".q_norm.");
    replaceAll(name, ".norm_k.", ".k_norm.");
    return name.substr(0, name.size() - 1);
}

std::string ltxCoreToDiffusersConnector(const std::string& key)
{
    static const std::pair<std::string_view, std::string_view> kPrefixes[] = {
        {"text_embedding_projection.aggregate_embed.", "text_proj_in."},
        {"text_embedding_projection.video_aggregate_embed.", "video_text_proj_in."},
        {"text_embedding_projection.audio_aggregate_embed.", "audio_text_proj_in."},
        {"video_embeddings_connector.", "video_connector."},
        {"audio_embeddings_connector.", "audio_connector."},
    };
    std::string name = key;
    for (const auto& [from, to] : kPrefixes)
        if (startsWith(name, from)) {
            name = std::string(to) + name.substr(from.size());
            break;
        }
    replaceAll(name, ".transformer_1d_blocks.", ".transformer_blocks.");
    replaceAll(name, ".q_norm.", ".norm_q.");
    replaceAll(name, ".k_norm.", ".norm_k.");
    return name;
}

namespace {

// Whether two stored tensors are the same weight: one type, one shape, the same bytes (and, for
// a quantized weight, the same scales beside it).
Result<bool> sameTensor(const SourceTensor& a, const SourceTensor& b)
{
    const auto& x = *a.info;
    const auto& y = *b.info;
    if (x.shape != y.shape || x.dtype != y.dtype || x.ggmlType != y.ggmlType || x.bytes != y.bytes)
        return false;
    auto bytesOf = [](const tensorfile::Checkpoint& cp, const tensorfile::TensorInfo& t) { return tensorfile::rawBytes(cp, t); };
    auto first = bytesOf(*a.checkpoint, x);
    if (!first)
        return first.error();
    auto second = bytesOf(*b.checkpoint, y);
    if (!second)
        return second.error();
    if (!at::equal(*first, *second))
        return false;
    const std::string base =
        a.name.size() > 7 && a.name.compare(a.name.size() - 7, 7, ".weight") == 0 ? a.name.substr(0, a.name.size() - 7) : a.name;
    const std::string otherBase =
        b.name.size() > 7 && b.name.compare(b.name.size() - 7, 7, ".weight") == 0 ? b.name.substr(0, b.name.size() - 7) : b.name;
    for (const char* suffix : {".weight_scale", ".scale_weight", ".input_scale", ".scale_input"}) {
        const auto* s = a.checkpoint->find(base + suffix);
        const auto* t = b.checkpoint->find(otherBase + suffix);
        if (!s && !t)
            continue;
        if (!s || !t)
            return false;
        auto u = bytesOf(*a.checkpoint, *s);
        auto v = bytesOf(*b.checkpoint, *t);
        if (!u)
            return u.error();
        if (!v)
            return v.error();
        if (s->dtype != t->dtype || s->shape != t->shape || !at::equal(*u, *v))
            return false;
    }
    return true;
}

}  // namespace

Result<Ltx2Weights> Ltx2Weights::open(const std::vector<std::filesystem::path>& paths)
{
    if (paths.empty())
        return makeError(ErrorCode::InvalidArgument, "no LTX-2 checkpoint given");
    Ltx2Weights w;
    w.m_sources = std::make_shared<std::vector<tensorfile::ModelSource>>();
    for (const auto& path : paths) {
        auto source = tensorfile::ModelSource::open(path);
        if (!source)
            return source.error();
        // LTX-2.5's diffusion decoder ships as a folder beside the pipeline's components without
        // being one of them (the DFR pipeline does not list it): read it where it is.
        std::optional<std::filesystem::path> beside;
        if (source->kind == tensorfile::SourceKind::DiffusersPipeline) {
            const auto listed = std::any_of(
                source->components.begin(), source->components.end(), [](const auto& c) { return c.name == "diffusion_decoder"; });
            std::error_code ec;
            if (!listed && std::filesystem::is_regular_file(source->root / "diffusion_decoder" / "config.json", ec))
                beside = source->root / "diffusion_decoder";
        }
        w.m_sources->push_back(std::move(*source));
        if (beside) {
            auto extra = tensorfile::ModelSource::open(*beside);
            if (!extra)
                return extra.error();
            w.m_sources->push_back(std::move(*extra));
        }
    }
    for (const auto& source : *w.m_sources) {
        const auto folderOwner = ownerFromClass(source.configs);
        for (const auto& cp : source.checkpoints) {
            // Lightricks' text encoder file (a Gemma with its config embedded as gemma_config)
            // carries the LTX text projection beside the language model: the projection is the
            // connectors', the rest the text encoder's own loader reads.
            const bool gemmaFile = cp.component.empty() && cp.metadata.count("gemma_config") > 0;
            const auto vaeKind = cp.component.empty() ? vaeFileKind(cp) : VaeFileKind{};
            const bool bareVae = cp.component.empty() && vaeKind.vaeSection && bareVaeFile(cp);
            const auto vaeName = [&](const std::string& name) { return bareVae ? "vae." + name : name; };
            std::size_t dropped = 0;
            for (const auto& info : cp.tensors) {
                if (quant::isQuantizationSibling(info.name))
                    continue;
                Owner owner = Owner::Unknown;
                std::string canonical;
                if (cp.component == "transformer") {
                    owner = Owner::Transformer;
                    canonical = info.name;
                } else if (cp.component == "connectors") {
                    owner = Owner::Connectors;
                    canonical = info.name;
                } else if (cp.component == "vae") {
                    owner = Owner::VideoVae;
                    canonical = info.name;
                } else if (cp.component == "audio_vae") {
                    owner = Owner::AudioVae;
                    canonical = info.name;
                } else if (cp.component == "vocoder") {
                    owner = Owner::Vocoder;
                    canonical = info.name;
                } else if (cp.component == "duration_head") {
                    owner = Owner::DurationHead;
                    canonical = info.name;
                } else if (cp.component == "diffusion_decoder") {
                    owner = Owner::DiffusionDecoder;
                    canonical = info.name;
                } else if (cp.component.empty() && folderOwner) {
                    owner = *folderOwner;
                    canonical = info.name;
                } else if (!cp.component.empty()) {
                    owner = Owner::Other;
                } else if (gemmaFile) {
                    owner = startsWith(info.name, "text_embedding_projection.") ? Owner::Connectors : Owner::Other;
                    if (owner == Owner::Connectors)
                        canonical = ltxCoreToDiffusersConnector(info.name);
                } else if (vaeKind.diffusionDecoder && startsWith(vaeName(info.name), "vae.decoder.")) {
                    // LTX-2.5's diffusion decoder in Lightricks' naming; a bundled preview head
                    // and the unused type embedding are dropped as both references drop them.
                    auto mapped = ltxCoreToDiffusersDiffusionDecoder(vaeName(info.name).substr(12));
                    owner = mapped ? Owner::DiffusionDecoder : Owner::Other;
                    if (mapped)
                        canonical = *mapped;
                    else
                        ++dropped;
                } else {
                    std::tie(owner, canonical) = classifyTopLevel(vaeName(info.name));
                    // The statistics serve the diffusion decoder too (the file's only ones).
                    if (vaeKind.diffusionDecoder && owner == Owner::VideoVae && (canonical == "latents_mean" || canonical == "latents_std"))
                        w.m_parts[static_cast<int>(Part::DiffusionDecoder)].emplace(canonical, SourceTensor{&cp, info.name, &info});
                }
                if (owner == Owner::Other)
                    continue;
                if (owner == Owner::Unknown) {
                    w.m_unknown.push_back(cp.path.filename().string() + ": " + info.name);
                    continue;
                }
                auto& part = w.m_parts[static_cast<int>(owner)];
                const SourceTensor tensor{&cp, info.name, &info};
                if (auto [it, inserted] = part.emplace(canonical, tensor); !inserted) {
                    // Publishers repeat tensors across their files (a connectors file that also
                    // carries what the transformer file holds): the same bytes are read once;
                    // different values cannot both be the model, and which is meant is unknown.
                    auto same = sameTensor(it->second, tensor);
                    if (!same)
                        return same.error();
                    if (!*same)
                        return makeError(ErrorCode::InvalidFormat,
                            "'" + canonical + "' is stored twice with different values: as '" + it->second.name + "' in "
                                + it->second.checkpoint->path.string() + " and as '" + info.name + "' in " + cp.path.string()
                                + "; these files are not parts of one model (give the matching companion files)");
                    ++w.m_repeated[it->second.checkpoint->path.filename().string() + " and " + cp.path.filename().string()];
                }
            }
            if (dropped)
                log::info(cp.path.filename().string() + ": " + std::to_string(dropped)
                    + " tensor(s) of the diffusion decoder no decoder reads (a bundled preview head, the type embedding) are skipped");
        }
    }
    if (auto mapped = mapLtxCoreVideoEncoder(w.m_parts[static_cast<int>(Part::VideoVae)]); !mapped)
        return mapped.error();
    for (const auto& [files, count] : w.m_repeated)
        log::info(
            "LTX-2 weights: " + std::to_string(count) + " tensor(s) stored in both " + files + " with the same bytes; each is read once");
    bool any = false;
    for (const auto& part : w.m_parts)
        any = any || !part.empty();
    if (!any)
        return makeError(ErrorCode::InvalidFormat, w.describeFiles() + ": no LTX-2 tensors found");
    return w;
}

const SourceTensor* Ltx2Weights::find(Part part, const std::string& name) const
{
    const auto& map = m_parts[static_cast<int>(part)];
    const auto it = map.find(name);
    return it == map.end() ? nullptr : &it->second;
}

std::optional<std::vector<std::int64_t>> Ltx2Weights::shape(Part part, const std::string& name) const
{
    const auto* t = find(part, name);
    if (!t)
        return std::nullopt;
    return t->info->shape;
}

const std::map<std::string, SourceTensor>& Ltx2Weights::tensors(Part part) const
{
    return m_parts[static_cast<int>(part)];
}

std::optional<std::vector<std::int64_t>> Ltx2Weights::shape(Part part, const std::string& name, std::size_t rank) const
{
    auto s = shape(part, name);
    if (!s || s->size() != rank)
        return std::nullopt;
    return s;
}

Result<std::int64_t> Ltx2Weights::indexCount(Part part, const std::string& prefix) const
{
    std::vector<const SourceTensor*> firstOf;  // per block index, the first tensor naming it
    for (const auto& [name, t] : tensors(part)) {
        if (!startsWith(name, prefix))
            continue;
        const auto rest = std::string_view(name).substr(prefix.size());
        const auto dot = rest.find('.');
        if (dot == 0 || dot == std::string_view::npos
            || !std::all_of(rest.begin(), rest.begin() + static_cast<std::ptrdiff_t>(dot), [](char ch) { return ch >= '0' && ch <= '9'; }))
            continue;
        std::int64_t index = 0;
        for (const char ch : rest.substr(0, dot)) {
            index = index * 10 + (ch - '0');
            if (index >= kMaxBlocks)
                return makeError(ErrorCode::InvalidFormat,
                    describeFiles() + ": tensor '" + t.name + "' names block " + std::string(rest.substr(0, std::min<std::size_t>(dot, 24)))
                        + " of " + prefix + "*; at most " + std::to_string(kMaxBlocks)
                        + " blocks are supported, so the file is damaged or not an LTX-2 checkpoint");
        }
        if (static_cast<std::size_t>(index) >= firstOf.size())
            firstOf.resize(static_cast<std::size_t>(index) + 1, nullptr);
        if (!firstOf[static_cast<std::size_t>(index)])
            firstOf[static_cast<std::size_t>(index)] = &t;
    }
    for (std::size_t i = 0; i < firstOf.size(); ++i)
        if (!firstOf[i])
            return makeError(ErrorCode::InvalidFormat,
                describeFiles() + ": " + prefix + std::to_string(i) + ".* is missing but '" + firstOf.back()->name + "' names block "
                    + std::to_string(firstOf.size() - 1) + "; blocks must run from 0 without a gap (a damaged or partial checkpoint)");
    return static_cast<std::int64_t>(firstOf.size());
}

std::optional<std::string> Ltx2Weights::diffusersConfig(Part part) const
{
    const std::string component = partComponent(part);
    const std::string className = partClassName(part);
    for (const auto& source : *m_sources) {
        if (const auto it = source.configs.find(component); it != source.configs.end())
            return it->second;
        // A component folder given on its own (".../transformer") keeps its config at the top.
        if (const auto it = source.configs.find(""); it != source.configs.end()) {
            const auto cls = classNameOf(it->second);
            if (cls == className || (part == Part::Vocoder && cls == "LTX2VocoderWithBWE"))
                return it->second;
        }
    }
    return std::nullopt;
}

std::optional<std::string> Ltx2Weights::ltxCoreConfig(std::optional<Part> part) const
{
    if (part)
        for (const auto& [_, t] : m_parts[static_cast<int>(*part)])
            if (const auto it = t.checkpoint->metadata.find("config"); it != t.checkpoint->metadata.end())
                return it->second;
    for (const auto& source : *m_sources)
        for (const auto& cp : source.checkpoints)
            if (const auto it = cp.metadata.find("config"); it != cp.metadata.end())
                return it->second;
    return std::nullopt;
}

std::optional<Ltx2Weights::Stamp> Ltx2Weights::metadata(Part part, const std::string& key) const
{
    const auto& tensors = m_parts[static_cast<int>(part)];
    if (tensors.empty())
        return std::nullopt;
    const auto* cp = tensors.begin()->second.checkpoint;
    const auto it = cp->metadata.find(key);
    if (it == cp->metadata.end())
        return std::nullopt;
    return Stamp{it->second, cp->path.filename().string()};
}

namespace {

// "dev" or "distilled" when the words of a name say exactly one of them.
std::string scheduleNamedIn(std::string_view text)
{
    bool dev = false, distilled = false;
    std::string word;
    auto take = [&] {
        dev = dev || word == "dev";
        distilled = distilled || word == "distilled" || word == "distill";
        word.clear();
    };
    for (const char c : text.substr(0, 4096)) {
        if (std::isalnum(static_cast<unsigned char>(c)))
            word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        else
            take();
    }
    take();
    return dev == distilled ? std::string() : dev ? "dev" : "distilled";
}

}  // namespace

Ltx2Weights::TrainedFor Ltx2Weights::trainedFor() const
{
    const auto& parts = m_parts[static_cast<int>(Part::Transformer)];
    if (parts.empty())
        return {};
    // The file holding most of the transformer: a connectors file may carry a projection of it.
    std::map<const tensorfile::Checkpoint*, std::size_t> held;
    for (const auto& [_, t] : parts)
        ++held[t.checkpoint];
    const auto* cp = std::max_element(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.second < b.second; })->first;
    for (const char* key : {"general.finetune", "general.name"})
        for (const auto& kv : cp->ggufMetadata)
            if (kv.key == key && kv.value.string())
                if (auto s = scheduleNamedIn(*kv.value.string()); !s.empty())
                    return {s, std::string("its GGUF ") + key + " \"" + shownName(*kv.value.string(), 80) + "\""};
    const tensorfile::ModelSource* source = nullptr;
    for (const auto& s : *m_sources)
        for (const auto& c : s.checkpoints)
            if (&c == cp)
                source = &s;
    std::vector<std::filesystem::path> places{cp->path.filename()};
    // Folders from the file up to the model root when the user gave a folder (a diffusers
    // transformer/ says nothing, its pipeline folder may); none above what the user gave, where
    // "~/dev/" is where someone keeps things, not what the model is.
    const auto file = cp->path.lexically_normal();
    const auto root = source ? source->root.lexically_normal() : file;
    const auto inside = file.lexically_relative(root);
    if (root != file && !inside.empty() && *inside.begin() != "..") {
        auto folder = file.parent_path();
        for (int depth = 0; depth < 8 && folder.has_relative_path(); ++depth, folder = folder.parent_path()) {
            places.push_back(folder.filename());
            if (folder == root)
                break;
        }
        if (root.parent_path().filename() == "snapshots")
            places.push_back(root.parent_path().parent_path().filename());
    }
    for (const auto& place : places)
        if (auto s = scheduleNamedIn(place.string()); !s.empty())
            return {s, "the name " + shownName(place.string(), 120)};
    return {};
}

std::string Ltx2Weights::describeFiles() const
{
    std::string out;
    for (const auto& source : *m_sources)
        out += (out.empty() ? "" : " + ") + source.path.string();
    return out;
}

WeightTaker::WeightTaker(const Ltx2Weights& weights, Part part, c10::Device device, c10::ScalarType dtype)
    : m_weights(weights), m_part(part), m_dtype(dtype)
{
    m_options.device = device;
}

bool WeightTaker::has(const std::string& name) const
{
    return m_weights.find(m_part, name) != nullptr;
}

Result<quant::QuantizedWeight> WeightTaker::load(const std::string& name)
{
    const auto* t = m_weights.find(m_part, name);
    if (!t) {
        m_missing.push_back(name);
        return makeError(ErrorCode::NotFound, name);
    }
    m_taken.insert(name);
    auto w = quant::loadWeight(*t->checkpoint, t->name, m_options);
    if (!w)
        m_failed.push_back(w.error().message);
    return w;
}

nn::Linear WeightTaker::linear(const std::string& name, bool bias)
{
    nn::Linear l;
    l.name = name;
    auto w = load(name + ".weight");
    if (w) {
        if (w->representation() == quant::Representation::Dense) {
            // Dense weights run in the compute dtype; converting once here beats a cast per call.
            auto dense = w->dequantize(m_dtype);
            if (dense)
                l.weight = quant::QuantizedWeight::dense(dense->to(m_options.device));
            else
                m_failed.push_back(name + ".weight: " + dense.error().message);
        } else {
            l.weight = std::move(*w);
        }
        if (l.weight.defined() && l.weight.shape().size() != 2)
            m_failed.push_back(name + ".weight: expected a 2-D weight");
    }
    if (bias)
        l.bias = tensor(name + ".bias");
    return l;
}

at::Tensor WeightTaker::tensor(const std::string& name)
{
    auto w = load(name);
    if (!w)
        return {};
    auto dense = w->dequantize(m_dtype);
    if (!dense) {
        m_failed.push_back(name + ": " + dense.error().message);
        return {};
    }
    return dense->to(m_options.device).contiguous();
}

std::optional<at::Tensor> WeightTaker::optionalTensor(const std::string& name)
{
    if (!has(name))
        return std::nullopt;
    return tensor(name);
}

Result<void> WeightTaker::finish() const
{
    const char* what = partName(m_part);
    const auto files = m_weights.describeFiles();
    if (!m_failed.empty())
        return makeError(ErrorCode::InvalidFormat,
            files + ": " + std::to_string(m_failed.size()) + " " + what + " weight(s) could not be loaded: " + listNames(m_failed, 4));
    if (!m_missing.empty())
        return makeError(ErrorCode::InvalidFormat,
            files + ": the " + std::string(what) + " is incomplete, " + std::to_string(m_missing.size())
                + " parameter(s) missing: " + listNames(m_missing) + "; the download may be partial or this is a different model");
    std::vector<std::string> unused;
    for (const auto& [name, t] : m_weights.tensors(m_part)) {
        const std::string& key = name;  // clang (and so clang-tidy) will not capture a structured binding
        if (!m_taken.count(key)
            && std::none_of(m_ignored.begin(), m_ignored.end(), [&](const std::string& p) { return startsWith(key, p); }))
            unused.push_back(t.name == key ? key : t.name + " (" + key + ")");
    }
    if (!unused.empty())
        return makeError(ErrorCode::InvalidFormat,
            files + ": " + std::to_string(unused.size()) + " tensor(s) match no " + what + " parameter: " + listNames(unused)
                + "; this checkpoint has a layout this version does not know");
    if (!m_weights.unknown().empty())
        return makeError(ErrorCode::InvalidFormat,
            files + ": " + std::to_string(m_weights.unknown().size())
                + " tensor(s) belong to no LTX-2 component: " + listNames(m_weights.unknown()));
    return {};
}

}  // namespace vireo::ltx2
