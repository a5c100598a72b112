#include "inference/inspect/modelinspector.h"

#include "inference/tensorfile/modelsource.h"
#include "inference/util/format.h"
#include "inference/util/jsonlimits.h"
#include "inference/util/text.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

namespace vireo::inspect {

namespace {

using nlohmann::json;
using tensorfile::Checkpoint;
using tensorfile::DType;
using tensorfile::FileFormat;
using tensorfile::ModelSource;
using tensorfile::TensorInfo;

constexpr std::string_view kLightricksPrefix = "model.diffusion_model.";
const std::vector<std::string> kComponentOrder = {
    "transformer", "connectors", "text_projection", "vae", "audio_vae", "vocoder", "text_encoder", "tokenizer", "scheduler"};

bool startsWith(std::string_view s, std::string_view prefix)
{
    return s.substr(0, prefix.size()) == prefix;
}

bool endsWith(std::string_view s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Tensor names of one checkpoint with the Lightricks single-file prefix removed, so
// single files, diffusers folders and GGUF (which strips it) are matched by one rule set.
class Names {
public:
    explicit Names(const Checkpoint& cp) : m_cp(cp)
    {
        for (const auto& t : cp.tensors) {
            std::string_view n = t.name;
            if (startsWith(n, kLightricksPrefix)) {
                n.remove_prefix(kLightricksPrefix.size());
                m_prefixed = true;
            }
            m_map.emplace(std::string(n), &t);
        }
    }

    const TensorInfo* find(const std::string& name) const
    {
        const auto it = m_map.find(name);
        return it == m_map.end() ? nullptr : it->second;
    }
    bool has(const std::string& name) const { return find(name) != nullptr; }
    bool hasPrefix(std::string_view prefix) const
    {
        const auto it = m_map.lower_bound(std::string(prefix));
        return it != m_map.end() && startsWith(it->first, prefix);
    }
    bool anyContains(std::string_view part) const
    {
        for (const auto& [name, info] : m_map)
            if (name.find(part) != std::string::npos)
                return true;
        return false;
    }
    // Number of distinct N in "<prefix>N." names.
    int countIndexed(std::string_view prefix) const
    {
        std::set<int> seen;
        for (auto it = m_map.lower_bound(std::string(prefix)); it != m_map.end() && startsWith(it->first, prefix); ++it) {
            const auto rest = std::string_view(it->first).substr(prefix.size());
            std::size_t i = 0;
            while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9')
                ++i;
            // Up to 9 digits fit an int; a longer index is no block of a real model.
            if (i > 0 && i <= 9 && i < rest.size() && rest[i] == '.')
                seen.insert(std::stoi(std::string(rest.substr(0, i))));
        }
        return static_cast<int>(seen.size());
    }
    bool prefixed() const { return m_prefixed; }
    const Checkpoint& checkpoint() const { return m_cp; }
    const std::map<std::string, const TensorInfo*>& all() const { return m_map; }

private:
    const Checkpoint& m_cp;
    std::map<std::string, const TensorInfo*> m_map;
    bool m_prefixed = false;
};

struct VersionVotes {
    std::map<std::string, std::vector<std::string>> byVersion;  // version -> evidence
    void vote(const std::string& version, const std::string& why) { byVersion[version].push_back(why); }
};

void addComponent(ModelReport& r, const std::string& name)
{
    if (std::find(r.components.begin(), r.components.end(), name) == r.components.end())
        r.components.push_back(name);
}

void detectLtx(const Names& n, ModelReport& report, VersionVotes& votes, bool& ltxDit, bool& audio)
{
    const std::string component = n.checkpoint().component;
    const bool dit = n.has("transformer_blocks.0.scale_shift_table") && (n.hasPrefix("patchify_proj.") || n.hasPrefix("proj_in."))
        && (n.hasPrefix("adaln_single.") || n.hasPrefix("time_embed."));
    const bool hasAudio = n.hasPrefix("audio_patchify_proj.") || n.hasPrefix("audio_adaln_single.") || n.hasPrefix("av_ca_")
        || n.hasPrefix("audio_proj_in.") || n.hasPrefix("audio_time_embed.") || n.hasPrefix("av_cross_attn_");
    if (dit) {
        ltxDit = true;
        audio = audio || hasAudio;
        addComponent(report, "transformer");
        const auto* table = n.find("transformer_blocks.0.scale_shift_table");
        if (table && !table->shape.empty()) {
            const auto rows = table->shape[0];
            report.facts["Modulation rows"] = std::to_string(rows);
            if (rows == 6)
                votes.vote("2.0", "6-row modulation table");
            else if (rows == 9)
                votes.vote("2.3", "9-row modulation table");
            if (table->shape.size() == 2)
                report.facts["Hidden size"] = std::to_string(table->shape[1]);
        }
        report.facts["Transformer blocks"] = std::to_string(n.countIndexed("transformer_blocks."));
        if (n.has("transformer_blocks.0.attn1.to_gate_logits.weight")) {
            report.facts["Gated attention"] = "yes";
            votes.vote("2.3", "gated attention");
        }
        if (n.hasPrefix("caption_projection."))
            votes.vote("2.0", "caption projection inside the transformer");
        if (n.hasPrefix("prompt_adaln_single.") || n.hasPrefix("prompt_adaln."))
            votes.vote("2.3", "prompt AdaLN");
        if (n.has("keyframes_abs_pos_embedding")) {
            report.facts["Keyframe embedding"] = "yes";
            votes.vote("2.5", "keyframe position embedding");
        }
        if (n.has("transformer_blocks.0.ff.net.0.proj.weight"))
            report.facts["Video FFN bias"] = n.has("transformer_blocks.0.ff.net.0.proj.bias") ? "yes" : "no";
    }
    const bool connectors = n.hasPrefix("video_embeddings_connector.") || n.hasPrefix("video_connector.");
    if (connectors) {
        addComponent(report, "connectors");
        const int blocks = std::max(
            n.countIndexed("video_embeddings_connector.transformer_1d_blocks."), n.countIndexed("video_connector.transformer_blocks."));
        report.facts["Connector blocks"] = std::to_string(blocks);
        if (n.hasPrefix("video_embeddings_connector.learnable_registers") || n.hasPrefix("video_connector.learnable_registers"))
            report.facts["Connector registers"] = "yes";
    }
    // In diffusers folders the projection lives inside the connectors component.
    if (n.hasPrefix("text_embedding_projection."))
        addComponent(report, "text_projection");
    if (n.hasPrefix("text_embedding_projection.aggregate_embed") || n.hasPrefix("text_proj_in."))
        votes.vote("2.0", "single text projection (aggregate_embed)");
    if (n.hasPrefix("text_embedding_projection.video_aggregate_embed") || n.hasPrefix("video_text_proj_in."))
        votes.vote("2.3", "separate video and audio text projections");
    if (n.hasPrefix("vae.") || (component == "vae" && n.hasPrefix("decoder."))) {
        addComponent(report, "vae");
        const int flat = n.countIndexed("vae.decoder.up_blocks.");
        if (flat == 7)
            votes.vote("2.0", "7 VAE decoder stages");
        else if (flat == 9)
            votes.vote("2.3", "9 VAE decoder stages");
        if (flat > 0)
            report.facts["VAE decoder stages"] = std::to_string(flat);
        const int nested = n.countIndexed("decoder.up_blocks.");
        if (component == "vae" && nested > 0)
            report.facts["VAE decoder up blocks"] = std::to_string(nested);
    }
    if (n.hasPrefix("audio_vae.") || component == "audio_vae")
        addComponent(report, "audio_vae");
    if (n.hasPrefix("vocoder.") || component == "vocoder") {
        addComponent(report, "vocoder");
        if (n.hasPrefix("vocoder.bwe_generator.") || n.hasPrefix("bwe_generator.")) {
            report.facts["Vocoder"] = "with bandwidth extension";
            votes.vote("2.3", "vocoder with bandwidth extension");
        } else if (n.hasPrefix("vocoder.") || component == "vocoder") {
            report.facts["Vocoder"] = "plain";
        }
    }
}

void detectIdeogram(const Names& n, ModelReport& report, bool& found)
{
    const bool anchors = n.hasPrefix("llm_cond_proj.") || n.hasPrefix("embed_image_indicator.") || n.hasPrefix("t_embedding.mlp_in.");
    if (!anchors)
        return;
    if (n.hasPrefix("layers.0.attention.qkv.")) {
        report.attention = "fused-qkv";
        report.layout = "ideogram-vendor";
    } else if (n.hasPrefix("layers.0.attention.to_q.")) {
        report.attention = "split-qkv";
    } else {
        return;
    }
    found = true;
    addComponent(report, "transformer");
    report.facts["Transformer blocks"] = std::to_string(n.countIndexed("layers."));
}

// LTX-2's latent upsampler (diffusers' LTX2LatentUpsamplerModel, ltx-core's LatentUpsampler):
// what it scales, from the shapes of its convolutions, as the loader reads them.
void detectLatentUpsampler(const Names& n, ModelReport& report, bool& found)
{
    const auto* initial = n.find("initial_conv.weight");
    const auto* rational = n.find("upsampler.conv.weight");
    const auto* shuffle = n.find("upsampler.0.weight");
    if (!initial || (!rational && !shuffle) || (initial->shape.size() != 4 && initial->shape.size() != 5))
        return;
    found = true;
    const auto mid = initial->shape[0];
    std::string kind = "unrecognized scale";
    if (rational && rational->shape.size() == 4 && mid > 0 && rational->shape[0] % mid == 0) {
        const auto ratio = rational->shape[0] / mid;
        kind = ratio == 4 ? "spatial x2 (rational resampler)"
            : ratio == 9  ? "spatial x1.5 (rational resampler)"
            : ratio == 16 ? "spatial x4 (rational resampler)"
                          : kind;
    } else if (shuffle && !shuffle->shape.empty() && mid > 0) {
        const auto ratio = shuffle->shape[0] / mid;
        kind = shuffle->shape.size() == 4 && ratio == 4 ? "spatial x2"
            : shuffle->shape.size() == 5 && ratio == 2  ? "temporal x2 (doubles the frames, not the size)"
            : shuffle->shape.size() == 5 && ratio == 8  ? "spatial x2 + temporal x2"
                                                        : kind;
    }
    addComponent(report, "latent_upsampler");
    report.facts["Upsampler"] = kind + ", " + std::to_string(initial->shape.size() - 2) + "-D convolutions, "
        + std::to_string(initial->shape[1]) + " latent channels";
    report.facts["Upsampler blocks"] =
        std::to_string(n.countIndexed("res_blocks.")) + " + " + std::to_string(n.countIndexed("post_upsample_res_blocks."));
    if (kind.rfind("spatial x2", 0) != 0 || kind.find("temporal") != std::string::npos)
        report.warnings.push_back("the two-stage path takes an x2 spatial upsampler; this one is " + kind);
}

struct Fp8Scan {
    std::int64_t fp8Weights = 0;
    std::int64_t scaled = 0;
    std::set<std::string> granularities;
    std::map<std::vector<std::int64_t>, int> blockSizes;
    bool inputScale = false;
    bool inputScaleMissing = false;
    bool legacyNames = false;
    bool comfyQuant = false;
    bool allScalar = true;
    std::int64_t oddScales = 0;
};

std::int64_t ceilDiv(std::int64_t a, std::int64_t b)
{
    return b == 0 ? 0 : (a + b - 1) / b;
}

void scanFp8(const Names& n, Fp8Scan& scan)
{
    for (const auto& [name, info] : n.all()) {
        if (endsWith(name, ".comfy_quant"))
            scan.comfyQuant = true;
        if (!info->dtype || (*info->dtype != DType::F8_E4M3 && *info->dtype != DType::F8_E5M2))
            continue;
        if (!endsWith(name, ".weight") || info->shape.empty() || info->numel() == 0)
            continue;
        ++scan.fp8Weights;
        const auto base = name.substr(0, name.size() - std::string_view(".weight").size());
        const TensorInfo* scale = n.find(base + ".weight_scale");
        if (!scale) {
            scale = n.find(base + ".scale_weight");
            if (scale)
                scan.legacyNames = true;
        }
        const bool input = n.has(base + ".input_scale") || n.has(base + ".scale_input");
        if (!scale)
            continue;
        ++scan.scaled;
        (input ? scan.inputScale : scan.inputScaleMissing) = true;
        const auto out = info->shape[0];
        std::int64_t in = 1;
        for (std::size_t i = 1; i < info->shape.size(); ++i)
            in *= info->shape[i];
        const auto& s = scale->shape;
        if (scale->numel() == 1) {
            scan.granularities.insert("per-tensor");
            continue;
        }
        scan.allScalar = false;
        if ((s.size() == 1 && s[0] == out) || (s.size() == 2 && s[0] == out && s[1] == 1)) {
            scan.granularities.insert("per-channel");
        } else if (s.size() == 2 && s[0] > 0 && s[1] > 0) {
            const auto b0 = ceilDiv(out, s[0]);
            const auto b1 = ceilDiv(in, s[1]);
            if (ceilDiv(out, b0) == s[0] && ceilDiv(in, b1) == s[1]) {
                scan.granularities.insert("block");
                ++scan.blockSizes[{b0, b1}];
            } else {
                ++scan.oddScales;
            }
        } else {
            ++scan.oddScales;
        }
    }
}

json metadataValue(const std::string& text)
{
    if (!text.empty() && (text.front() == '{' || text.front() == '[')) {
        // Embedded JSON is shown parsed when it is sane; a hostile one (nested 100,000 deep)
        // stays the string it is.
        auto parsed = jsonutil::parseUntrusted(text, "metadata");
        if (parsed)
            return std::move(*parsed);
    }
    return text;
}

json ggufValueJson(const tensorfile::GgufValue& v, bool summarize)
{
    return std::visit(
        [&](const auto& x) -> json {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::vector<tensorfile::GgufValue>>) {
                if (summarize && x.size() > 16) {
                    json head = json::array();
                    for (std::size_t i = 0; i < 8; ++i)
                        head.push_back(ggufValueJson(x[i], false));
                    return json{{"type", "array"}, {"element_type", std::string(tensorfile::ggufValueTypeName(v.elementType))},
                        {"count", x.size()}, {"head", head}};
                }
                json arr = json::array();
                for (const auto& item : x)
                    arr.push_back(ggufValueJson(item, summarize));
                return arr;
            } else if constexpr (std::is_same_v<T, double>) {
                return std::isfinite(x) ? json(x) : json(std::to_string(x));
            } else {
                return x;
            }
        },
        v.value);
}

std::string relativeName(const ModelSource& source, const std::filesystem::path& p)
{
    if (source.root == p)
        return p.filename().string();
    std::error_code ec;
    auto rel = std::filesystem::relative(p, source.root, ec);
    return ec || rel.empty() ? p.string() : rel.generic_string();
}

// The file list, per-dtype counts and metadata: what describe reports about the bytes
// before it interprets any tensor name.
void describeFiles(const ModelSource& source, ModelReport& report)
{
    json metadata = json::object();
    for (const auto& cp : source.checkpoints) {
        for (const auto& t : cp.tensors)
            ++report.dtypes[t.typeName()];
        std::vector<std::int64_t> perFile(cp.files.size(), 0);
        for (const auto& t : cp.tensors)
            ++perFile[t.fileIndex];
        for (std::size_t i = 0; i < cp.files.size(); ++i) {
            report.files.push_back({relativeName(source, cp.files[i]->path()), std::string(tensorfile::fileFormatName(cp.format)),
                cp.component, perFile[i], cp.files[i]->size()});
            report.bytes += cp.files[i]->size();
        }
        json m = json::object();
        for (const auto& [k, v] : cp.metadata)
            m[k] = metadataValue(v);
        for (const auto& kv : cp.ggufMetadata)
            m[kv.key] = ggufValueJson(kv.value, true);
        if (cp.format == FileFormat::Gguf) {
            m["gguf.version"] = cp.ggufVersion;
            m["gguf.alignment"] = cp.ggufAlignment;
        }
        if (!m.empty())
            metadata[relativeName(source, cp.path)] = std::move(m);
    }
    report.metadataJson = jsonutil::safeDump(metadata);
}

// What the detectors found over every checkpoint: the family and quantization are decided
// only once all of them have been seen.
struct Detection {
    bool ltxDit = false, audio = false, ideogram = false, upsampler = false;
    VersionVotes votes;
    Fp8Scan fp8;
    std::int64_t nf4 = 0;
    bool nf4Nested = false;
};

// The tensor-name detectors, run on each checkpoint; GGUF's own type counts come from here too.
void detectFromTensors(const ModelSource& source, ModelReport& report, Detection& found)
{
    for (const auto& cp : source.checkpoints) {
        Names names(cp);
        detectLtx(names, report, found.votes, found.ltxDit, found.audio);
        detectIdeogram(names, report, found.ideogram);
        detectLatentUpsampler(names, report, found.upsampler);
        scanFp8(names, found.fp8);
        for (const auto& [name, info] : names.all()) {
            if (name.find(".quant_state.bitsandbytes__nf4") != std::string::npos)
                ++found.nf4;
            if (endsWith(name, ".nested_absmax"))
                found.nf4Nested = true;
        }
        if (cp.format == FileFormat::Gguf) {
            report.quantization.scheme = "gguf";
            for (const auto& kv : cp.ggufMetadata)
                if (kv.key == "general.architecture" && kv.value.string())
                    report.quantization.ggufArchitecture = *kv.value.string();
            for (const auto& t : cp.tensors) {
                ++report.quantization.ggufTypes[t.typeName()];
                (t.isQuantizedBlocks() ? report.quantization.quantizedTensors : report.quantization.denseTensors)++;
            }
        }
        if (names.prefixed() && report.layout.empty())
            report.layout = "lightricks";
    }
}

// A diffusers pipeline's model_index names components (and classes) whether or not their
// tensors are present; the source kind fixes the layout.
void detectFromComponents(const ModelSource& source, ModelReport& report, Detection& found)
{
    for (const auto& component : source.components) {
        if (component.present)
            addComponent(report, component.name);
        else
            report.missingComponents.push_back(component.name);
        if (component.className.find("Ideogram4") != std::string::npos)
            found.ideogram = true;
        if (component.className.find("LTX2") != std::string::npos && component.name == "transformer")
            found.audio = true;
    }
    if (source.kind == tensorfile::SourceKind::DiffusersPipeline)
        report.layout = "diffusers";
    else if (source.kind == tensorfile::SourceKind::GgufFile)
        report.layout = "gguf";
}

// Family and version from the detectors' evidence, then checked against the metadata's claim.
void decideFamily(const ModelSource& source, ModelReport& report, const Detection& found)
{
    auto votes = found.votes;
    // 2.5 keeps every 2.3 marker but the prompt AdaLN and adds its own: 2.3's evidence is
    // 2.5's once a 2.5 marker is there, with no disagreement to report.
    if (const auto v25 = votes.byVersion.find("2.5"); v25 != votes.byVersion.end())
        if (const auto v23 = votes.byVersion.find("2.3"); v23 != votes.byVersion.end()) {
            v25->second.insert(v25->second.end(), v23->second.begin(), v23->second.end());
            votes.byVersion.erase(v23);
        }
    // Ideogram-4's vendor names ("layers.N.attention") never collide with LTX markers, but an
    // LTX DiT is the stronger signal when both appear.
    if (found.ltxDit || !votes.byVersion.empty()) {
        report.family = (found.ltxDit && !found.audio) ? "ltx-video" : "ltx-2";
        if (votes.byVersion.size() == 1) {
            report.version = votes.byVersion.begin()->first;
        } else if (votes.byVersion.size() > 1) {
            std::string detail;
            for (const auto& [version, why] : votes.byVersion)
                for (const auto& w : why)
                    detail += (detail.empty() ? "" : "; ") + w + " (" + version + ")";
            // The transformer's own markers decide; report the disagreement.
            std::size_t best = 0;
            for (const auto& [version, why] : votes.byVersion)
                if (why.size() > best) {
                    best = why.size();
                    report.version = version;
                }
            report.warnings.push_back("version markers disagree: " + detail);
        }
    } else if (found.ideogram) {
        report.family = "ideogram-4";
        report.version = "4";
        if (report.attention.empty())
            report.attention = "split-qkv";
    } else if (found.upsampler) {
        report.family = "ltx-2-upsampler";
    }
    for (const auto& cp : source.checkpoints) {
        const auto it = cp.metadata.find("model_version");
        if (it != cp.metadata.end()) {
            report.facts["Metadata version"] = it->second;
            if (!report.version.empty() && it->second.rfind(report.version, 0) != 0)
                report.warnings.push_back(
                    "metadata model_version " + it->second + " disagrees with the tensors, which say " + report.version);
        }
    }
}

// The quantization scheme other than GGUF's (which detectFromTensors settled), from the
// scans; after decideFamily, since the FP8 convention can depend on the family.
void decideQuantization(const ModelSource& source, ModelReport& report, const Detection& found)
{
    const auto& fp8 = found.fp8;
    auto& q = report.quantization;
    if (q.scheme != "gguf") {
        if (found.nf4 > 0) {
            q.scheme = "nf4";
            q.quantizedTensors = found.nf4;
            q.nf4DoubleQuant = found.nf4Nested;
        } else if (fp8.scaled > 0) {
            q.scheme = "fp8-scaled";
            q.quantizedTensors = fp8.scaled;
            q.inputScale = fp8.inputScale;
            // A file is as fine as its finest scales: small edge tensors of a block-scaled file
            // can have a 1x1 block grid and look per-tensor.
            for (const char* g : {"per-tensor", "per-channel", "block"})
                if (fp8.granularities.count(g))
                    q.fp8Granularity = g;
            int best = 0;
            for (const auto& [size, count] : fp8.blockSizes)
                if (count > best) {
                    best = count;
                    q.fp8BlockSize = size;
                }
            if (fp8.legacyNames)
                q.fp8Convention = "comfyui-legacy";
            else if (fp8.comfyQuant)
                q.fp8Convention = "comfyui";
            else if (fp8.allScalar && fp8.inputScale && !fp8.inputScaleMissing)
                q.fp8Convention = "lightricks";
            else if (report.family == "ideogram-4" && q.fp8Granularity == "per-channel")
                q.fp8Convention = "ideogram";
            else
                q.fp8Convention = "weight_scale";
            if (fp8.fp8Weights > fp8.scaled)
                report.warnings.push_back(
                    std::to_string(fp8.fp8Weights - fp8.scaled) + " fp8 weights have no scale tensor (read as scale 1)");
            if (fp8.oddScales > 0)
                report.warnings.push_back(std::to_string(fp8.oddScales) + " fp8 scales have a shape that fits no known layout");
        } else if (fp8.fp8Weights > 0) {
            q.scheme = "fp8";
            q.quantizedTensors = fp8.fp8Weights;
        }
        if (q.scheme != "none")
            q.denseTensors = report.tensors - q.quantizedTensors;
    }
    for (const auto& cp : source.checkpoints)
        for (const auto& [k, v] : cp.metadata)
            if (k == "_quantization_metadata" && q.scheme == "fp8-scaled" && q.fp8Convention != "comfyui-legacy")
                q.fp8Convention = "comfyui";
}

}  // namespace

ModelReport describe(const ModelSource& source)
{
    ModelReport report;
    report.path = source.path.string();
    report.format = std::string(tensorfile::sourceKindName(source.kind));
    report.tensors = static_cast<std::int64_t>(source.tensorCount());
    describeFiles(source, report);

    Detection found;
    detectFromTensors(source, report, found);
    detectFromComponents(source, report, found);
    decideFamily(source, report, found);
    decideQuantization(source, report, found);

    std::stable_sort(report.components.begin(), report.components.end(), [](const std::string& a, const std::string& b) {
        const auto ia = std::find(kComponentOrder.begin(), kComponentOrder.end(), a) - kComponentOrder.begin();
        const auto ib = std::find(kComponentOrder.begin(), kComponentOrder.end(), b) - kComponentOrder.begin();
        return ia < ib;
    });
    return report;
}

Result<ModelReport> inspectPath(const std::filesystem::path& path)
{
    auto source = tensorfile::ModelSource::open(path);
    if (!source)
        return source.error();
    return describe(*source);
}

std::string toJson(const ModelReport& r, int indent)
{
    json j;
    j["path"] = r.path;
    j["format"] = r.format;
    j["tensors"] = r.tensors;
    j["bytes"] = r.bytes;
    j["dtypes"] = r.dtypes;
    j["family"] = r.family;
    j["version"] = r.version.empty() ? json(nullptr) : json(r.version);
    j["layout"] = r.layout.empty() ? json(nullptr) : json(r.layout);
    j["attention"] = r.attention.empty() ? json(nullptr) : json(r.attention);
    const auto& q = r.quantization;
    json qj;
    qj["scheme"] = q.scheme;
    qj["quantized_tensors"] = q.quantizedTensors;
    qj["dense_tensors"] = q.denseTensors;
    qj["fp8_granularity"] = q.fp8Granularity.empty() ? json(nullptr) : json(q.fp8Granularity);
    qj["fp8_block_size"] = q.fp8BlockSize.empty() ? json(nullptr) : json(q.fp8BlockSize);
    qj["input_scale"] = q.inputScale ? json(*q.inputScale) : json(nullptr);
    qj["fp8_convention"] = q.fp8Convention.empty() ? json(nullptr) : json(q.fp8Convention);
    qj["gguf_architecture"] = q.ggufArchitecture.empty() ? json(nullptr) : json(q.ggufArchitecture);
    qj["gguf_types"] = q.ggufTypes;
    qj["nf4_double_quant"] = q.scheme == "nf4" ? json(q.nf4DoubleQuant) : json(nullptr);
    j["quantization"] = qj;
    j["components"] = r.components;
    j["missing_components"] = r.missingComponents;
    j["facts"] = r.facts;
    j["warnings"] = r.warnings;
    json files = json::array();
    for (const auto& f : r.files)
        files.push_back({{"path", f.path}, {"format", f.format}, {"component", f.component}, {"tensors", f.tensors}, {"bytes", f.bytes}});
    j["files"] = files;
    auto metadata = jsonutil::parseUntrusted(r.metadataJson, "metadata", {256ull << 20, 80, 64ull << 20, false});
    j["metadata"] = metadata ? std::move(*metadata) : json::object();
    // GGUF strings and file names need not be UTF-8: replaced, never a type_error.
    return jsonutil::safeDump(j, indent);
}

std::string toText(const ModelReport& r)
{
    std::ostringstream out;
    // Names, metadata and paths come from the files: each value is made terminal-safe, so no
    // escape sequence reaches the terminal and no newline in a name forges a line.
    auto row = [&](const std::string& label, const std::string& value, bool preformatted = false) {
        char buf[40];
        std::snprintf(buf, sizeof buf, "  %-22s", terminalSafe(label).c_str());
        out << buf << (preformatted ? value : terminalSafe(value)) << '\n';
    };
    out << terminalSafe(r.path) << '\n';
    row("format", r.format + " (" + std::to_string(r.files.size()) + (r.files.size() == 1 ? " file)" : " files)"));
    row("tensors", std::to_string(r.tensors) + ", " + humanBytes(r.bytes) + " on disk");
    std::string types;
    for (const auto& [name, count] : r.dtypes)
        types += (types.empty() ? "" : ", ") + name + " x" + std::to_string(count);
    row("types", types.empty() ? "-" : types);
    std::string recognized = r.family == "ltx-2" ? "LTX-2 audio-video model"
        : r.family == "ltx-video"                ? "LTX-Video model (no audio stream)"
        : r.family == "ideogram-4"               ? "Ideogram-4 image model"
        : r.family == "ltx-2-upsampler"
        ? "LTX-2 latent upsampler (" + (r.facts.count("Upsampler") ? r.facts.at("Upsampler") : std::string("?")) + ")"
        : "not a model family Vireo knows";
    if (!r.version.empty() && r.family != "ideogram-4")
        recognized += ", version " + r.version;
    if (!r.attention.empty())
        recognized += ", " + r.attention + " attention";
    row("recognized", recognized);
    std::string components;
    for (const auto& c : r.components)
        components += (components.empty() ? "" : ", ") + c;
    row("components", components.empty() ? "-" : components);
    if (!r.missingComponents.empty()) {
        std::string missing;
        for (const auto& c : r.missingComponents)
            missing += (missing.empty() ? "" : ", ") + c;
        row("missing", missing);
    }
    const auto& q = r.quantization;
    std::string quant = q.scheme;
    if (q.scheme == "fp8-scaled") {
        quant += ", " + q.fp8Granularity + " scales";
        if (!q.fp8BlockSize.empty())
            quant += " (" + std::to_string(q.fp8BlockSize[0]) + "x" + std::to_string(q.fp8BlockSize[1]) + " blocks)";
        quant += q.inputScale.value_or(false) ? ", with input scales" : ", no input scales";
        quant += ", " + q.fp8Convention + " convention";
    } else if (q.scheme == "gguf") {
        quant += ", architecture '" + (q.ggufArchitecture.empty() ? std::string("?") : q.ggufArchitecture) + "'";
    } else if (q.scheme == "nf4") {
        quant += q.nf4DoubleQuant ? ", double-quantized statistics" : "";
    }
    if (q.scheme != "none")
        quant += "; " + std::to_string(q.quantizedTensors) + " quantized tensors, " + std::to_string(q.denseTensors) + " dense";
    row("quantization", quant);
    for (const auto& [k, v] : r.facts)
        row(k, v);
    const auto parsed = jsonutil::parseUntrusted(r.metadataJson, "metadata", {256ull << 20, 80, 64ull << 20, false});
    const auto metadata = parsed ? *parsed : json();
    if (metadata.is_object()) {
        for (const auto& [file, m] : metadata.items()) {
            std::string keys;
            for (const auto& [k, v] : m.items()) {
                std::string shown = v.is_string() ? v.get<std::string>() : v.is_object() ? "{...}" : jsonutil::shortDump(v);
                if (shown.size() > 60)
                    shown = shown.substr(0, 57) + "...";
                keys += "\n      " + terminalSafe(k) + " = " + terminalSafe(shown);
            }
            row("metadata", terminalSafe(file) + keys, true);
        }
    }
    if (r.files.size() > 1)
        for (const auto& f : r.files)
            row("file", f.path + " (" + std::to_string(f.tensors) + " tensors, " + humanBytes(f.bytes) + ")");
    for (const auto& w : r.warnings)
        row("warning", w);
    return out.str();
}

}  // namespace vireo::inspect
