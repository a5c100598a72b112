#include "inference/lora/lora.h"

#include "inference/models/nn/layers.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/util/format.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_map>

namespace vireo::lora {

namespace {

using json = nlohmann::json;

bool startsWith(const std::string& s, std::string_view p)
{
    return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

bool endsWith(const std::string& s, std::string_view p)
{
    return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

enum class Role { Down, Up, Alpha, Dora, Mid, FullPatch, LoHa, LoKr, Other };

struct Classified {
    Role role = Role::Other;
    std::string module;
};

// The spellings ComfyUI's loader accepts for a pair, longest first so ".lora_A.weight" is not
// read as ".weight".
Classified classify(const std::string& name)
{
    static const std::pair<std::string_view, Role> kSuffixes[] = {
        {".lora_A.default.weight", Role::Down},
        {".lora_B.default.weight", Role::Up},
        {".lora_linear_layer.down.weight", Role::Down},
        {".lora_linear_layer.up.weight", Role::Up},
        {".lora_A.weight", Role::Down},
        {".lora_B.weight", Role::Up},
        {".lora_down.weight", Role::Down},
        {".lora_up.weight", Role::Up},
        {".lora.down.weight", Role::Down},
        {".lora.up.weight", Role::Up},
        {"_lora.down.weight", Role::Down},
        {"_lora.up.weight", Role::Up},
        {".lora_A", Role::Down},
        {".lora_B", Role::Up},
        {".lora_a", Role::Down},
        {".lora_b", Role::Up},
        {".alpha", Role::Alpha},
        {".lora_mid.weight", Role::Mid},
        {".dora_scale", Role::Dora},
        {".lora_magnitude_vector.default.weight", Role::Dora},
        {".lora_magnitude_vector.weight", Role::Dora},
        {".lora_magnitude_vector", Role::Dora},
        {".diff_b", Role::FullPatch},
        {".diff", Role::FullPatch},
        {".set_weight", Role::FullPatch},
        {".reshape_weight", Role::FullPatch},
        {".w_norm", Role::FullPatch},
        {".b_norm", Role::FullPatch},
    };
    for (const auto& [suffix, role] : kSuffixes)
        if (endsWith(name, suffix))
            return {role, name.substr(0, name.size() - suffix.size())};
    for (const char* marker : {".hada_", "_hada_"})
        if (const auto at = name.find(marker); at != std::string::npos)
            return {Role::LoHa, name.substr(0, at)};
    for (const char* marker : {".lokr_", "_lokr_"})
        if (const auto at = name.find(marker); at != std::string::npos)
            return {Role::LoKr, name.substr(0, at)};
    return {Role::Other, name};
}

const char* refusalReason(Role role)
{
    switch (role) {
    case Role::Dora: return "DoRA (weight-decomposed LoRA) modules are not supported";
    case Role::Mid: return "LoCon modules with a Tucker core (lora_mid) are not supported";
    case Role::FullPatch: return "full-weight patches (diff, set_weight, norm patches) are not supported";
    case Role::LoHa: return "LyCORIS LoHa (Hadamard product) modules are not supported";
    case Role::LoKr: return "LyCORIS LoKr (Kronecker product) modules are not supported";
    default: return "not a LoRA tensor";
    }
}

struct Module {
    std::string key;
    std::string down, up, alpha;  // tensor names
    std::set<Role> other;  // anything that makes it more than a plain pair
    std::int64_t keys = 0;
};

struct Naming {
    std::string name;  // prefix removed
    bool underscored = false;
    std::string refusal;  // a component this version does not apply LoRAs to
    std::string prefix;
};

Naming normalise(const std::string& key)
{
    Naming n{key, false, {}, {}};
    for (std::string_view te : {"lora_te_", "lora_te1_", "lora_te2_", "lora_te3_", "text_encoder.", "text_encoders.", "text_encoder_2."})
        if (startsWith(key, te)) {
            n.refusal = "text-encoder modules (LoRAs are applied to the transformer)";
            return n;
        }
    std::string name = key;
    for (std::string_view p : {"base_model.model.", "transformer.", "model.diffusion_model.", "diffusion_model."})
        if (startsWith(name, p)) {
            n.prefix += std::string(p);
            name = name.substr(p.size());
        }
    for (std::string_view c : {"text_embedding_projection.", "connectors."})
        if (startsWith(name, c)) {
            n.refusal = "text-connector modules (this version applies LoRAs to the transformer only)";
            return n;
        }
    for (std::string_view p : {"lora_unet_", "lycoris_", "lora_transformer_"})
        if (startsWith(name, p)) {
            n.prefix += std::string(p);
            name = name.substr(p.size());
            n.underscored = true;
        }
    n.name = name;
    return n;
}

// PEFT's LoraConfig as diffusers stores it with the weights: default rank and alpha, and
// per-module exceptions (keys are module names or their trailing parts).
struct PeftConfig {
    std::optional<double> r, alpha;
    bool rslora = false;
    std::vector<std::pair<std::string, double>> rankPattern, alphaPattern;
};

std::optional<PeftConfig> peftConfig(const tensorfile::Checkpoint& cp, std::string* problem)
{
    const auto it = cp.metadata.find("lora_adapter_metadata");
    if (it == cp.metadata.end())
        return std::nullopt;
    jsonutil::JsonLimits limits;
    limits.maxBytes = 1u << 20;
    limits.maxValues = 1u << 18;
    const auto parsed = jsonutil::parseUntrusted(it->second, "its lora_adapter_metadata", limits);
    if (!parsed || !parsed->is_object()) {
        *problem = parsed ? "its lora_adapter_metadata is not a JSON object" : parsed.error().message;
        return std::nullopt;
    }
    const json& j = *parsed;
    PeftConfig c;
    // A value that is there but no number is an error: taking the rank instead would apply the
    // LoRA at another strength than it was trained with, without a word.
    auto number = [&](const json& v, const std::string& key) -> std::optional<double> {
        if (v.is_number() && std::isfinite(v.get<double>()))
            return v.get<double>();
        if (!v.is_null() && problem->empty())
            *problem = "its lora_adapter_metadata gives " + key + " as " + jsonutil::shortDump(v) + ", not a number";
        return std::nullopt;
    };
    // diffusers writes the keys under the component ("transformer.lora_alpha"); PEFT bare.
    auto field = [&](const std::string& name) -> const json* {
        for (const auto& key : {"transformer." + name, name})
            if (j.contains(key))
                return &j[key];
        return nullptr;
    };
    if (const auto* v = field("r"))
        c.r = number(*v, "r");
    if (const auto* v = field("lora_alpha"))
        c.alpha = number(*v, "lora_alpha");
    if (const auto* v = field("use_rslora"); v && v->is_boolean())
        c.rslora = v->get<bool>();
    for (const auto& [name, out] : {std::pair{"rank_pattern", &c.rankPattern}, std::pair{"alpha_pattern", &c.alphaPattern}})
        if (const auto* v = field(name); v && v->is_object())
            for (const auto& [k, value] : v->items())
                if (auto n = number(value, std::string(name) + "[\"" + k.substr(0, 80) + "\"]"); n && out->size() < 100000)
                    out->emplace_back(k, *n);
    if (!problem->empty())
        return std::nullopt;
    return c;
}

bool patternMatches(const std::string& pattern, const std::string& module)
{
    // PEFT matches `(.*\.)?<key>$`; keys are taken literally here.
    return module == pattern || endsWith(module, "." + pattern);
}

// A LoRA for the largest model has a few thousand tensors (a header of a few hundred KB): a
// header that declares far more is refused from its first bytes, before it is parsed (a
// million tiny tensors took a minute and gigabytes to refuse after).
constexpr std::uint64_t kMaxLoraHeaderBytes = 16ull << 20;
constexpr std::uint64_t kMaxLoraTensors = 200000;
constexpr std::int64_t kMaxRank = 4096;
constexpr double kMaxDeltaMagnitude = 1e3;
constexpr double kUsualStrength = 4.0;

std::string formatNumber(double v)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", v);
    return text;
}

Result<void> checkLoraHeader(const std::filesystem::path& file)
{
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
    if (!f)
        return {};  // the reader that opens it says why
    unsigned char head[24] = {};
    const auto n = std::fread(head, 1, sizeof head, f.get());
    auto le64 = [&](int at) {
        std::uint64_t v = 0;
        for (int i = 7; i >= 0; --i)
            v = (v << 8) | head[at + i];
        return v;
    };
    if (n >= 24 && std::memcmp(head, "GGUF", 4) == 0) {
        if (const auto tensors = le64(8); tensors > kMaxLoraTensors)
            return makeError(ErrorCode::InvalidFormat,
                file.string() + ": declares " + std::to_string(tensors) + " tensors; a LoRA has at most " + std::to_string(kMaxLoraTensors)
                    + " (is it a LoRA?)");
        return {};
    }
    if (n >= 8)
        if (const auto header = le64(0); header > kMaxLoraHeaderBytes && header < (1ull << 40))
            return makeError(ErrorCode::InvalidFormat,
                file.string() + ": its safetensors header is " + humanBytes(header) + "; a LoRA's is at most "
                    + humanBytes(kMaxLoraHeaderBytes) + " (a few thousand tensors), so it is no LoRA Vireo can apply");
    return {};
}

std::optional<double> scalarOf(const tensorfile::Checkpoint& cp, const std::string& name)
{
    auto w = quant::loadWeight(cp, name);
    if (!w)
        return std::nullopt;
    auto t = w->dequantize(c10::kFloat);
    if (!t || t->numel() != 1)
        return std::nullopt;
    const double v = t->item<double>();
    return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

void addRefusal(std::vector<Refusal>& refused, const std::string& reason, const std::string& example, std::int64_t keys)
{
    for (auto& r : refused)
        if (r.reason == reason) {
            r.keys += keys;
            if (r.examples.size() < 5)
                r.examples.push_back(example);
            return;
        }
    refused.push_back({reason, keys, {example}});
}

std::string countOf(std::int64_t n, const char* one, const char* many)
{
    return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string shapeText(std::int64_t out, std::int64_t in)
{
    return "[" + std::to_string(out) + " x " + std::to_string(in) + "]";
}

}  // namespace

std::string underscored(const std::string& name)
{
    std::string s = name;
    for (auto& c : s)
        if (c == '.')
            c = '_';
    return s;
}

int MatchReport::matched() const
{
    int n = 0;
    for (const auto& m : modules)
        n += m.state == ModuleState::Matched;
    return n;
}

int MatchReport::unmatched() const
{
    return static_cast<int>(modules.size()) - matched();
}

std::int64_t MatchReport::refusedKeys() const
{
    std::int64_t n = 0;
    for (const auto& r : refused)
        n += r.keys;
    return n;
}

std::string MatchReport::status() const
{
    if (matched() == 0) {
        std::string why;
        if (!modules.empty())
            why = countOf(static_cast<std::int64_t>(modules.size()), "module matches", "modules match") + " no layer of this model"
                + (trainedFor.empty() ? "" : " (" + trainedFor + ")");
        else if (!refused.empty())
            why = refused.front().reason;
        else
            why = "the file holds no LoRA module";
        return "refused: " + why;
    }
    if (unmatched() == 0 && refused.empty())
        return "applied";
    std::string s = "partial: ";
    if (unmatched() > 0)
        s += std::to_string(unmatched()) + " of " + std::to_string(modules.size()) + " modules unmatched";
    if (!refused.empty())
        s += std::string(unmatched() > 0 ? ", " : "") + countOf(refusedKeys(), "key", "keys") + " refused (" + refused.front().reason + ")";
    return s;
}

std::string MatchReport::toJson() const
{
    json mods = json::array();
    std::map<std::int64_t, int> ranks;
    for (const auto& m : modules) {
        json j{{"key", m.key}, {"target", m.target}, {"rank", m.rank}, {"in", m.in}, {"out", m.out}, {"scale", m.scale},
            {"state",
                m.state == ModuleState::Matched           ? "matched"
                    : m.state == ModuleState::NoSuchLayer ? "no such layer"
                                                          : "shape"}};
        if (m.alpha)
            j["alpha"] = *m.alpha;
        if (!m.reason.empty())
            j["reason"] = m.reason;
        mods.push_back(std::move(j));
        ++ranks[m.rank];
    }
    json ref = json::array();
    for (const auto& r : refused)
        ref.push_back({{"reason", r.reason}, {"keys", r.keys}, {"examples", r.examples}});
    json rankJson = json::object();
    for (const auto& [r, n] : ranks)
        rankJson[std::to_string(r)] = n;
    return json{{"file", file.string()}, {"layout", layout}, {"tensors", tensors}, {"bytes", tensorBytes}, {"matched", matched()},
        {"unmatched", unmatched()}, {"refused_keys", refusedKeys()}, {"status", status()}, {"trained_for", trainedFor}, {"ranks", rankJson},
        {"modules", mods}, {"refused", ref}}
        .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string MatchReport::toText() const
{
    std::ostringstream o;
    o << file.string() << "\n  layout " << layout << ", " << tensors << " tensors, " << humanBytes(static_cast<std::uint64_t>(tensorBytes))
      << "\n  " << status() << "\n";
    std::map<std::int64_t, int> ranks;
    std::map<double, int> scales;
    for (const auto& m : modules)
        if (m.state == ModuleState::Matched) {
            ++ranks[m.rank];
            ++scales[m.scale];
        }
    if (!ranks.empty()) {
        o << "  " << countOf(matched(), "module", "modules") << " matched; rank";
        for (const auto& [r, n] : ranks)
            o << " " << r << " (" << n << ")";
        o << "; scale";
        for (const auto& [s, n] : scales)
            o << " " << s << " (" << n << ")";
        o << "\n";
    }
    if (!trainedFor.empty())
        o << "  trained for " << trainedFor << "\n";
    int listed = 0;
    for (const auto& m : modules)
        if (m.state != ModuleState::Matched && listed++ < 50)
            o << "  unmatched " << m.key << ": " << m.reason << "\n";
    if (unmatched() > 50)
        o << "  ... and " << unmatched() - 50 << " more unmatched\n";
    for (const auto& r : refused) {
        o << "  refused " << countOf(r.keys, "key", "keys") << ": " << r.reason << " (e.g. " << r.examples.front() << ")\n";
    }
    return o.str();
}

namespace {

// Parsing: the file's tensors grouped into modules by name; what no role fits is refused here.
std::map<std::string, Module> groupModules(const tensorfile::Checkpoint& cp, std::vector<Refusal>& refused)
{
    std::map<std::string, Module> modules;
    for (const auto& t : cp.tensors) {
        const auto c = classify(t.name);
        if (c.role == Role::Other) {
            // A GGUF adapter's own bookkeeping is not a stray tensor.
            addRefusal(refused, refusalReason(Role::Other), t.name, 1);
            continue;
        }
        auto& m = modules[c.module];
        m.key = c.module;
        ++m.keys;
        if (c.role == Role::Down)
            m.down = t.name;
        else if (c.role == Role::Up)
            m.up = t.name;
        else if (c.role == Role::Alpha)
            m.alpha = t.name;
        else
            m.other.insert(c.role);
    }
    return modules;
}

// The matching pass's state: what it reads (the file, its PEFT config, the targets by name) and
// what it gathers besides the report (the naming prefixes, the widths of mismatched modules).
struct Matching {
    Matching(const tensorfile::Checkpoint& cp, const std::optional<PeftConfig>& peft, const std::vector<Target>& targets)
        : cp(cp), peft(peft)
    {
        // Every target under its own name and its aliases, and their '.'-collapsed forms (kohya).
        for (const auto& t : targets) {
            byName.emplace(t.name, &t);
            byUnderscored.emplace(underscored(t.name), &t);
            for (const auto& a : t.aliases) {
                byName.emplace(a, &t);
                byUnderscored.emplace(underscored(a), &t);
            }
        }
    }

    const tensorfile::Checkpoint& cp;
    const std::optional<PeftConfig>& peft;
    std::unordered_map<std::string, const Target*> byName, byUnderscored;
    std::set<std::string> prefixes;
    std::map<std::int64_t, int> mismatchedIn;
};

// A module's down and up tensors when it is a plain LoRA pair of a rank this version applies;
// else why not, for the refusal.
struct LoraPair {
    const tensorfile::TensorInfo* down = nullptr;
    const tensorfile::TensorInfo* up = nullptr;
    std::string refusal;
};

// The checks a module must pass before its shapes mean anything, in the order they report.
LoraPair loraPair(const tensorfile::Checkpoint& cp, const Module& m, const Naming& naming)
{
    LoraPair p;
    if (!naming.refusal.empty()) {
        p.refusal = naming.refusal;
        return p;
    }
    if (!m.other.empty()) {
        p.refusal = refusalReason(*m.other.begin());
        return p;
    }
    if (m.down.empty() || m.up.empty()) {
        if (m.down.empty() && m.up.empty())
            p.refusal = "an alpha without its LoRA pair";
        else
            p.refusal = "half a LoRA pair (down without up, or up without down)";
        return p;
    }
    const auto* d = cp.find(m.down);
    const auto* u = cp.find(m.up);
    if (d->shape.size() != 2 || u->shape.size() != 2)
        p.refusal = d->shape.size() == 4 || u->shape.size() == 4 ? "convolution LoRA modules (LoCon) are not supported"
                                                                 : "LoRA tensors that are not matrices";
    else if (d->shape[0] != u->shape[1])
        p.refusal = "down and up of different ranks";
    else if (d->shape[0] <= 0)
        p.refusal = "rank 0 (an empty adapter: nothing to apply)";
    else if (d->shape[0] > kMaxRank)
        p.refusal = "rank " + std::to_string(d->shape[0]) + ", above the " + std::to_string(kMaxRank)
            + " this version applies (larger than the layers a LoRA adapts)";
    p.down = d;
    p.up = u;
    return p;
}

// The layer a module names, looked up the way its naming spells layers.
const Target* findTarget(const Matching& mt, const Naming& naming)
{
    const Target* target = nullptr;
    if (naming.underscored) {
        if (const auto it = mt.byUnderscored.find(naming.name); it != mt.byUnderscored.end())
            target = it->second;
    } else if (const auto it = mt.byName.find(naming.name); it != mt.byName.end()) {
        target = it->second;
    }
    return target;
}

// Matching: one module refused, or measured, scaled and matched against the targets.
void matchModule(Matching& mt, const std::string& key, const Module& m, MatchReport& report)
{
    const auto naming = normalise(key);
    const auto pair = loraPair(mt.cp, m, naming);
    if (!pair.refusal.empty()) {
        addRefusal(report.refused, pair.refusal, key, m.keys);
        return;
    }
    const auto* d = pair.down;
    const auto* u = pair.up;
    mt.prefixes.insert(naming.prefix);
    ModuleReport r;
    r.key = key;
    r.rank = d->shape[0];
    r.in = d->shape[1];
    r.out = u->shape[0];
    if (!m.alpha.empty()) {
        r.alpha = scalarOf(mt.cp, m.alpha);
        if (!r.alpha) {
            addRefusal(report.refused, "an alpha that is not a finite number", key, m.keys);
            return;
        }
    }
    // The scale each convention gives (alpha / rank; no alpha: 1, as the Lightricks trainer,
    // ComfyUI and PEFT without metadata all apply it; alpha 0 means "rank", as kohya reads it).
    if (r.alpha && *r.alpha != 0)
        r.scale = *r.alpha / static_cast<double>(r.rank);
    const Target* target = findTarget(mt, naming);
    r.target = target ? target->name : naming.name;
    const auto& peft = mt.peft;
    if (peft && !r.alpha) {
        double alpha = peft->alpha.value_or(static_cast<double>(r.rank));
        for (const auto& [pattern, value] : peft->alphaPattern)
            if (patternMatches(pattern, r.target) || patternMatches(pattern, naming.name))
                alpha = value;
        r.alpha = alpha;
        r.scale = peft->rslora ? alpha / std::sqrt(static_cast<double>(r.rank)) : alpha / static_cast<double>(r.rank);
    }
    if (!target) {
        r.state = ModuleState::NoSuchLayer;
        r.reason = "no such layer in this model";
    } else if (r.in != target->in || r.out != target->out) {
        r.state = ModuleState::ShapeMismatch;
        r.reason = "LoRA " + shapeText(r.out, r.in) + " does not fit the layer's " + shapeText(target->out, target->in);
        ++mt.mismatchedIn[r.in];
    }
    report.modules.push_back(std::move(r));
}

// Reporting: the layout the naming prefixes of the accepted modules say the file was written in.
std::string layoutOf(const std::set<std::string>& prefixes)
{
    return prefixes.empty()                                                                                                    ? "none"
        : prefixes.size() > 1                                                                                                  ? "mixed"
        : prefixes.begin()->find("lora_unet_") != std::string::npos || prefixes.begin()->find("lycoris_") != std::string::npos ? "kohya"
        : prefixes.begin()->find("diffusion_model.") != std::string::npos                                                      ? "comfy"
        : prefixes.begin()->find("transformer.") != std::string::npos                                                          ? "peft"
                                                                                                                               : "bare";
}

// Reporting: what the widths of the mismatched modules say about the model the LoRA was made for.
void noteTrainedFor(const std::map<std::int64_t, int>& mismatchedIn, MatchReport& report)
{
    int mismatched = 0;
    for (const auto& [in, n] : mismatchedIn)
        mismatched += n;
    // Most modules of the wrong width: the LoRA was made for another model, and saying so
    // helps more than a list of shapes.
    if (mismatched > 0 && mismatched >= report.matched()) {
        auto most = mismatchedIn.begin();
        for (auto it = mismatchedIn.begin(); it != mismatchedIn.end(); ++it)
            if (it->second > most->second)
                most = it;
        report.trainedFor = "layers " + std::to_string(most->first)
            + " wide where this model's differ: a LoRA for another model size or version (LTX-2.0 and 2.3 differ)";
    }
}

}  // namespace

Result<MatchReport> inspect(const std::filesystem::path& file, const std::vector<Target>& targets)
{
    if (auto bounded = checkLoraHeader(file); !bounded)
        return bounded.error();
    auto source = tensorfile::ModelSource::open(file);
    if (!source)
        return source.error();
    if (source->checkpoints.size() != 1)
        return makeError(ErrorCode::InvalidFormat,
            file.string() + ": a LoRA is one .safetensors or .gguf file, not a folder of " + std::to_string(source->checkpoints.size())
                + " checkpoints");
    const auto& cp = source->checkpoints.front();
    MatchReport report;
    report.file = file;
    report.tensors = static_cast<std::int64_t>(cp.tensors.size());
    report.tensorBytes = static_cast<std::int64_t>(cp.tensorBytes());

    const auto modules = groupModules(cp, report.refused);

    std::string peftProblem;
    const auto peft = peftConfig(cp, &peftProblem);
    if (!peftProblem.empty())
        return makeError(ErrorCode::InvalidFormat, file.string() + ": " + peftProblem);

    Matching matching(cp, peft, targets);
    for (const auto& [key, m] : modules)
        matchModule(matching, key, m, report);
    report.layout = layoutOf(matching.prefixes);
    noteTrainedFor(matching.mismatchedIn, report);
    return report;
}

Result<std::vector<nn::LoraDelta>> loadDeltas(const MatchReport& report, double strength, c10::ScalarType dtype, c10::Device device)
{
    auto source = tensorfile::ModelSource::open(report.file);
    if (!source)
        return source.error();
    if (source->checkpoints.size() != 1)
        return makeError(ErrorCode::InvalidFormat, report.file.string() + ": not a single LoRA file");
    const auto& cp = source->checkpoints.front();
    // The pairs by module key, found again (the report keeps the key, not the spelling).
    std::unordered_map<std::string, std::pair<std::string, std::string>> pairs;
    for (const auto& t : cp.tensors) {
        const auto c = classify(t.name);
        if (c.role == Role::Down)
            pairs[c.module].first = t.name;
        else if (c.role == Role::Up)
            pairs[c.module].second = t.name;
    }
    std::vector<nn::LoraDelta> out;
    try {
        for (const auto& m : report.modules) {
            if (m.state != ModuleState::Matched)
                continue;
            const auto it = pairs.find(m.key);
            if (it == pairs.end() || it->second.first.empty() || it->second.second.empty())
                return makeError(ErrorCode::InvalidFormat, report.file.string() + ": module " + m.key + " changed since it was inspected");
            auto d = quant::loadWeight(cp, it->second.first);
            auto u = quant::loadWeight(cp, it->second.second);
            if (!d)
                return d.error();
            if (!u)
                return u.error();
            auto df = d->dequantize(c10::kFloat);
            auto uf = u->dequantize(c10::kFloat);
            if (!df)
                return df.error();
            if (!uf)
                return uf.error();
            if (df->sizes() != at::IntArrayRef{m.rank, m.in} || uf->sizes() != at::IntArrayRef{m.out, m.rank})
                return makeError(ErrorCode::InvalidFormat, report.file.string() + ": module " + m.key + " changed since it was inspected");
            // The scale in float32 before the cast, as the references compute the delta.
            auto scaled = *uf * (m.scale * strength);
            if (!at::isfinite(*df).all().item<bool>() || !at::isfinite(scaled).all().item<bool>())
                return makeError(ErrorCode::InvalidFormat, report.file.string() + ": module " + m.key + " holds NaN or infinite values");
            // What the pair can add to one weight: |up| max x |down| max x rank. Trained LoRAs
            // change weights by hundredths; a bound of thousands is a damaged file (or one made
            // to overflow the activations), not a style.
            const double bound = df->abs().max().item<double>() * scaled.abs().max().item<double>() * static_cast<double>(m.rank);
            if (!(bound <= kMaxDeltaMagnitude))
                return makeError(ErrorCode::InvalidFormat,
                    report.file.string() + ": module " + m.key + " could change a weight by up to " + formatNumber(bound) + " at strength "
                        + formatNumber(strength)
                        + " (trained LoRAs change them by hundredths): "
                          "the file is damaged, or the strength far too high");
            out.push_back({m.target, df->to(device, dtype).contiguous(), scaled.to(device, dtype).contiguous()});
        }
    } catch (const c10::Error& e) {
        return makeError(ErrorCode::Internal, report.file.string() + ": " + e.what_without_backtrace());
    }
    return out;
}

std::vector<Outcome> prepare(const std::vector<Request>& requests, const std::vector<Target>& targets, c10::ScalarType dtype,
    c10::Device device, std::vector<nn::LoraDelta>* deltas)
{
    std::vector<Outcome> outcomes;
    for (const auto& l : requests) {
        Outcome o{l.path, l.strength, {}, 0, 0, 0, 0, {}};
        auto report = inspect(l.path, targets);
        if (!report) {
            o.status = "refused: " + report.error().message;
        } else {
            o.report = report->toText();
            o.matched = report->matched();
            o.unmatched = report->unmatched();
            o.refusedKeys = report->refusedKeys();
            o.status = report->status();
            if (report->usable()) {
                // Far outside what LoRAs are trained for, yet applied as asked: said, not hidden.
                if (std::abs(l.strength) > kUsualStrength)
                    o.status += "; strength " + formatNumber(l.strength) + " is far outside the -2 to 2 LoRAs are made for";
                auto loaded = loadDeltas(*report, l.strength, dtype, device);
                if (!loaded) {
                    o.status = "refused: " + loaded.error().message;
                    o.matched = 0;
                } else {
                    for (const auto& d : *loaded)
                        o.deviceBytes += d.down.numel() * d.down.element_size() + d.up.numel() * d.up.element_size();
                    deltas->insert(deltas->end(), std::make_move_iterator(loaded->begin()), std::make_move_iterator(loaded->end()));
                }
            }
        }
        outcomes.push_back(std::move(o));
    }
    return outcomes;
}

}  // namespace vireo::lora
