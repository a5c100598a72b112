#include "core/output/recipe.h"

#include "inference/util/jsonlimits.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>
#include <set>

namespace vireo::output {

namespace {

using nlohmann::json;

// Bytes of the UTF-8 sequence that starts at i, or 0 when it is not a valid one (overlong
// forms, surrogates and code points past U+10FFFF are invalid, as RFC 3629 says).
std::size_t validSequence(const std::string& s, std::size_t i)
{
    const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = b(i);
    if (c < 0x80)
        return 1;
    std::size_t n = 0;
    std::uint32_t cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0)
        n = 2, cp = c & 0x1F, min = 0x80;
    else if ((c & 0xF0) == 0xE0)
        n = 3, cp = c & 0x0F, min = 0x800;
    else if ((c & 0xF8) == 0xF0)
        n = 4, cp = c & 0x07, min = 0x10000;
    else
        return 0;
    if (i + n > s.size())
        return 0;
    for (std::size_t k = 1; k < n; ++k) {
        if ((b(i + k) & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (b(i + k) & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

const std::set<std::string>& knownKeys()
{
    static const std::set<std::string> keys{"recipe_version", "app", "kind", "pipeline", "family", "variant", "model_version", "repo",
        "commit", "model_title", "model_key", "files", "prompt", "negative_prompt", "seed", "schedule", "steps", "sigmas", "guidance_scale",
        "audio_guidance_scale", "guidance_rescale", "width", "height", "frames", "fps", "device", "dtype", "placement", "speed",
        "steps_skipped", "cuda_graphs", "paths", "planned_paths", "path_warnings", "loras", "conditions", "stages", "stages_requested",
        "stages_reason", "predicted_seconds", "enhance_prompt", "enhanced_prompt", "knobs", "guidance_schedule", "audio_sample_rate",
        "audio_channels", "seconds", "created", "audio", "retake", "references"};
    return keys;
}

struct Reader {
    const json& j;
    std::string error;

    template <typename T>
    void get(const char* key, T& out)
    {
        if (!error.empty() || !j.contains(key) || j.at(key).is_null())
            return;
        const auto& v = j.at(key);
        if constexpr (std::is_same_v<T, std::string>) {
            if (!v.is_string())
                return fail(key, "text");
            out = sanitizedText(v.get<std::string>());
        } else if constexpr (std::is_same_v<T, double>) {
            if (!v.is_number())
                return fail(key, "a number");
            out = v.get<double>();
        } else if constexpr (std::is_same_v<T, bool>) {
            if (!v.is_boolean())
                return fail(key, "true or false");
            out = v.get<bool>();
        } else {
            // Integers: whole numbers in range, also when written as 3.0.
            if (!v.is_number())
                return fail(key, "a whole number");
            const double d = v.get<double>();
            // The range first: converting a double outside long long's range is undefined.
            if (v.is_number_float() && (!(d < 9.2e18 && d > -9.2e18) || d != static_cast<double>(static_cast<long long>(d))))
                return fail(key, "a whole number");
            if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
                return fail(key, "a whole number in range");
            const auto value = v.is_number_float() ? static_cast<long long>(d) : v.get<long long>();
            if (value < static_cast<long long>(std::numeric_limits<T>::min())
                || value > static_cast<long long>(std::numeric_limits<T>::max()))
                return fail(key, "a whole number in range");
            out = static_cast<T>(value);
        }
    }

    void fail(const char* key, const char* what) { error = std::string("recipe field '") + key + "' is not " + what; }
};

}  // namespace

std::string sanitizedText(const std::string& text)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto n = validSequence(text, i);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        const unsigned char c = static_cast<unsigned char>(text[i]);
        const bool control = n == 1 && (c < 0x20 || c == 0x7F) && c != '\n' && c != '\t';
        // C1 controls (U+0080..U+009F) are two bytes: C2 80..9F.
        const bool c1 = n == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0;
        if (!control && !c1)
            out.append(text, i, n);
        i += n;
    }
    return out;
}

std::string truncatedUtf8(const std::string& text, std::size_t maxBytes)
{
    if (text.size() <= maxBytes)
        return text;
    std::size_t cut = maxBytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
        --cut;
    return text.substr(0, cut);
}

std::string Recipe::toJson() const
{
    json j = json::parse(extraJson, nullptr, false, true);
    if (!j.is_object())
        j = json::object();
    json files_ = json::array();
    for (const auto& f : files)
        files_.push_back({{"path", f.path}, {"bytes", f.bytes}, {"sha256", f.sha256}});
    json loras_ = json::array();
    for (const auto& l : loras)
        loras_.push_back({{"path", l.path}, {"sha256", l.sha256}, {"strength", l.strength}, {"status", l.status}});
    j["recipe_version"] = version;
    j["app"] = app;
    j["kind"] = kind;
    j["pipeline"] = pipeline;
    j["family"] = family;
    j["variant"] = variant;
    j["model_version"] = modelVersion;
    j["repo"] = repo;
    j["commit"] = commit;
    j["model_title"] = modelTitle;
    j["model_key"] = modelKey;
    j["files"] = files_;
    // The request's fields stay at the top level, where every earlier version wrote them.
    const auto& q = request;
    j["prompt"] = q.prompt;
    j["negative_prompt"] = q.negativePrompt;
    j["seed"] = q.seed;
    j["schedule"] = q.schedule;
    j["steps"] = q.steps;
    j["sigmas"] = sigmas;
    j["guidance_scale"] = q.guidance;
    j["audio_guidance_scale"] = q.audioGuidance;
    j["guidance_rescale"] = q.guidanceRescale;
    if (!q.guidanceSchedule.empty())
        j["guidance_schedule"] = q.guidanceSchedule;
    j["width"] = q.width;
    j["height"] = q.height;
    j["frames"] = q.frames;
    j["fps"] = q.fps;
    if (audioSampleRate > 0) {
        j["audio_sample_rate"] = audioSampleRate;
        j["audio_channels"] = audioChannels;
    }
    j["device"] = device;
    j["dtype"] = dtype;
    j["placement"] = placement;
    j["speed"] = q.speed;
    j["steps_skipped"] = stepsSkipped;
    if (!cudaGraphs.empty())
        j["cuda_graphs"] = cudaGraphs;
    if (!paths.empty())
        j["paths"] = paths;
    if (!plannedPaths.empty())
        j["planned_paths"] = plannedPaths;
    if (!pathWarnings.empty())
        j["path_warnings"] = pathWarnings;
    j["loras"] = loras_;
    json conditions_ = json::array();
    for (const auto& c : conditions)
        conditions_.push_back({{"source", c.source}, {"copy", c.copy}, {"sha256", c.sha256}, {"frame", c.frame}, {"strength", c.strength},
            {"crf", c.crf}, {"frames", c.frames}, {"from_end", c.fromEnd}, {"copy_sha256", c.copySha256}, {"copy_frames", c.copyIsFrames},
            {"sound_copy", c.soundCopy}, {"sound_copy_sha256", c.soundCopySha256}});
    j["conditions"] = conditions_;
    if (audio)
        j["audio"] = {{"source", audio->source}, {"sha256", audio->sha256}, {"copy", audio->copy}, {"copy_sha256", audio->copySha256},
            {"seconds", audio->seconds}, {"sample_rate", audio->sampleRate}, {"channels", audio->channels}};
    if (retake)
        j["retake"] = {{"source", retake->source}, {"sha256", retake->sha256}, {"copy", retake->copy}, {"copy_sha256", retake->copySha256},
            {"sound_copy", retake->soundCopy}, {"sound_copy_sha256", retake->soundCopySha256}, {"start", retake->start},
            {"end", retake->end}, {"video", retake->video}, {"audio", retake->audio}};
    if (!references.empty()) {
        json references_ = json::array();
        for (const auto& r : references)
            references_.push_back({{"source", r.source}, {"sha256", r.sha256}, {"copy", r.copy}, {"copy_sha256", r.copySha256},
                {"strength", r.strength}, {"frames", r.frames}});
        j["references"] = references_;
    }
    j["stages"] = stages;
    j["stages_requested"] = q.stages;
    j["stages_reason"] = stagesReason;
    if (predictedSeconds)
        j["predicted_seconds"] = *predictedSeconds;
    if (q.enhancePrompt) {
        j["enhance_prompt"] = true;
        j["enhanced_prompt"] = enhancedPrompt;
    }
    if (!q.knobs.empty())
        j["knobs"] = q.knobs;
    j["seconds"] = secondsPerPhase;
    j["created"] = created;
    // Invalid UTF-8 in any string (a prompt from a file, a path) is replaced, never thrown.
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

using Failure = std::optional<Error>;

Failure invalid(const std::string& message)
{
    return makeError(ErrorCode::InvalidFormat, message);
}

// The field's value, or null when it is absent or null (both mean "this version's default").
const json* field(const json& j, const char* key)
{
    if (!j.contains(key) || j.at(key).is_null())
        return nullptr;
    return &j.at(key);
}

// The fields that are one value each (texts and numbers).
void readScalars(Reader& rd, Recipe& r)
{
    rd.get("app", r.app);
    rd.get("kind", r.kind);
    rd.get("pipeline", r.pipeline);
    rd.get("family", r.family);
    rd.get("variant", r.variant);
    rd.get("model_version", r.modelVersion);
    rd.get("repo", r.repo);
    rd.get("commit", r.commit);
    rd.get("model_title", r.modelTitle);
    rd.get("model_key", r.modelKey);
    auto& q = r.request;
    rd.get("prompt", q.prompt);
    rd.get("negative_prompt", q.negativePrompt);
    rd.get("seed", q.seed);
    rd.get("schedule", q.schedule);
    rd.get("steps", q.steps);
    rd.get("guidance_scale", q.guidance);
    rd.get("audio_guidance_scale", q.audioGuidance);
    rd.get("guidance_rescale", q.guidanceRescale);
    rd.get("width", q.width);
    rd.get("height", q.height);
    rd.get("frames", q.frames);
    rd.get("fps", q.fps);
    rd.get("audio_sample_rate", r.audioSampleRate);
    rd.get("audio_channels", r.audioChannels);
    rd.get("device", r.device);
    rd.get("dtype", r.dtype);
    rd.get("placement", r.placement);
    rd.get("speed", q.speed);
    rd.get("steps_skipped", r.stepsSkipped);
    rd.get("cuda_graphs", r.cudaGraphs);
    rd.get("paths", r.paths);
    rd.get("planned_paths", r.plannedPaths);
    rd.get("created", r.created);
    rd.get("stages", r.stages);
    rd.get("stages_requested", q.stages);
    rd.get("stages_reason", r.stagesReason);
    rd.get("enhance_prompt", q.enhancePrompt);
    rd.get("enhanced_prompt", r.enhancedPrompt);
    double predicted = -1.0;
    rd.get("predicted_seconds", predicted);
    if (std::isfinite(predicted) && predicted > 0.0)
        r.predictedSeconds = predicted;
}

// The lists of plain values: path warnings, the guidance schedule and sigmas.
Failure readValueLists(const json& j, Recipe& r)
{
    if (const auto* a = field(j, "path_warnings")) {
        if (!a->is_array())
            return invalid("recipe field 'path_warnings' is not a list of texts");
        for (const auto& v : *a) {
            if (!v.is_string())
                return invalid("recipe field 'path_warnings' is not a list of texts");
            r.pathWarnings.push_back(v.get<std::string>());
        }
    }
    if (const auto* a = field(j, "guidance_schedule")) {
        if (!a->is_array() || a->size() > 1000)
            return invalid("recipe field 'guidance_schedule' is not a list of at most 1000 numbers");
        for (const auto& v : *a) {
            if (!v.is_number())
                return invalid("recipe field 'guidance_schedule' is not a list of at most 1000 numbers");
            r.request.guidanceSchedule.push_back(v.get<double>());
        }
    }
    if (const auto* a = field(j, "sigmas")) {
        if (!a->is_array())
            return invalid("recipe field 'sigmas' is not a list of numbers");
        for (const auto& v : *a) {
            if (!v.is_number())
                return invalid("recipe field 'sigmas' is not a list of numbers");
            r.sigmas.push_back(v.get<double>());
        }
    }
    return std::nullopt;
}

// The weight files and LoRAs, each an object of its own.
Failure readFilesAndLoras(const json& j, Recipe& r)
{
    if (const auto* a = field(j, "files")) {
        if (!a->is_array())
            return invalid("recipe field 'files' is not a list");
        for (const auto& f : *a) {
            if (!f.is_object())
                return invalid("an entry of recipe field 'files' is not an object");
            WeightFile w;
            Reader fr{f, {}};
            fr.get("path", w.path);
            fr.get("bytes", w.bytes);
            fr.get("sha256", w.sha256);
            if (!fr.error.empty())
                return invalid("files: " + fr.error);
            r.files.push_back(std::move(w));
        }
    }
    if (const auto* a = field(j, "loras")) {
        if (!a->is_array())
            return invalid("recipe field 'loras' is not a list");
        for (const auto& l : *a) {
            if (!l.is_object())
                return invalid("an entry of recipe field 'loras' is not an object");
            LoraUse u;
            Reader lr{l, {}};
            lr.get("path", u.path);
            lr.get("sha256", u.sha256);
            lr.get("strength", u.strength);
            lr.get("status", u.status);
            if (!lr.error.empty())
                return invalid("loras: " + lr.error);
            r.loras.push_back(std::move(u));
        }
    }
    return std::nullopt;
}

// The stills and clips the video was conditioned on, at most 64.
Failure readConditions(const json& j, Recipe& r)
{
    if (const auto* a = field(j, "conditions")) {
        if (!a->is_array())
            return invalid("recipe field 'conditions' is not a list");
        if (a->size() > 64)
            return invalid("recipe field 'conditions' lists " + std::to_string(a->size()) + " conditions (at most 64)");
        for (const auto& c : *a) {
            if (!c.is_object())
                return invalid("an entry of recipe field 'conditions' is not an object");
            ConditionUse u;
            Reader cr{c, {}};
            cr.get("source", u.source);
            cr.get("copy", u.copy);
            cr.get("sha256", u.sha256);
            cr.get("frame", u.frame);
            cr.get("strength", u.strength);
            cr.get("crf", u.crf);
            cr.get("frames", u.frames);
            cr.get("from_end", u.fromEnd);
            cr.get("copy_sha256", u.copySha256);
            cr.get("copy_frames", u.copyIsFrames);
            cr.get("sound_copy", u.soundCopy);
            cr.get("sound_copy_sha256", u.soundCopySha256);
            if (!cr.error.empty())
                return invalid("conditions: " + cr.error);
            r.conditions.push_back(std::move(u));
        }
    }
    if (const auto* a = field(j, "audio"); a && !a->is_null()) {
        if (!a->is_object())
            return invalid("recipe field 'audio' is not an object");
        AudioUse u;
        Reader ar{*a, {}};
        ar.get("source", u.source);
        ar.get("sha256", u.sha256);
        ar.get("copy", u.copy);
        ar.get("copy_sha256", u.copySha256);
        ar.get("seconds", u.seconds);
        ar.get("sample_rate", u.sampleRate);
        ar.get("channels", u.channels);
        if (!ar.error.empty())
            return invalid("audio: " + ar.error);
        if (!(u.seconds >= 0 && u.seconds <= 1e7) || u.sampleRate < 0 || u.sampleRate > 10000000 || u.channels < 0 || u.channels > 64)
            return invalid("recipe field 'audio' holds numbers out of range");
        r.audio = std::move(u);
    }
    if (const auto* k = field(j, "retake"); k && !k->is_null()) {
        if (!k->is_object())
            return invalid("recipe field 'retake' is not an object");
        RetakeUse u;
        Reader kr{*k, {}};
        kr.get("source", u.source);
        kr.get("sha256", u.sha256);
        kr.get("copy", u.copy);
        kr.get("copy_sha256", u.copySha256);
        kr.get("sound_copy", u.soundCopy);
        kr.get("sound_copy_sha256", u.soundCopySha256);
        kr.get("start", u.start);
        kr.get("end", u.end);
        kr.get("video", u.video);
        kr.get("audio", u.audio);
        if (!kr.error.empty())
            return invalid("retake: " + kr.error);
        if (!(u.start >= 0 && u.end > u.start && u.end <= 1e6))
            return invalid("recipe field 'retake' holds a window that is not one");
        r.retake = std::move(u);
    }
    if (const auto* a = field(j, "references"); a && !a->is_null()) {
        if (!a->is_array())
            return invalid("recipe field 'references' is not a list");
        if (a->size() > 8)
            return invalid("recipe field 'references' lists " + std::to_string(a->size()) + " clips (at most 8)");
        for (const auto& c : *a) {
            if (!c.is_object())
                return invalid("an entry of recipe field 'references' is not an object");
            ReferenceUse u;
            Reader rr{c, {}};
            rr.get("source", u.source);
            rr.get("sha256", u.sha256);
            rr.get("copy", u.copy);
            rr.get("copy_sha256", u.copySha256);
            rr.get("strength", u.strength);
            rr.get("frames", u.frames);
            if (!rr.error.empty())
                return invalid("references: " + rr.error);
            if (!(u.strength >= 0 && u.strength <= 1) || u.frames < 0 || u.frames > 100000)
                return invalid("recipe field 'references' holds numbers out of range");
            r.references.push_back(std::move(u));
        }
    }
    return std::nullopt;
}

// The family's knobs and the seconds per phase: objects of numbers.
Failure readNumberMaps(const json& j, Recipe& r)
{
    if (const auto* k = field(j, "knobs")) {
        if (!k->is_object() || k->size() > 64)
            return invalid("recipe field 'knobs' is not an object of at most 64 numbers");
        for (const auto& [id, v] : k->items()) {
            // Checked as kept, so what this writes always reads back.
            auto key = sanitizedText(id);
            if (!v.is_number() || key.empty() || key.size() > 64)
                return invalid("recipe field 'knobs' is not an object of at most 64 numbers");
            r.request.knobs[std::move(key)] = v.get<double>();
        }
    }
    if (const auto* s = field(j, "seconds"); s && s->is_object())
        for (const auto& [k, v] : s->items())
            if (v.is_number())
                r.secondsPerPhase[sanitizedText(k)] = v.get<double>();
    return std::nullopt;
}

}  // namespace

Result<Recipe> Recipe::fromJson(const std::string& text)
{
    // Bounded in size, depth and node count: a recipe comes inside files anyone could have made.
    jsonutil::JsonLimits limits;
    limits.maxBytes = 16u << 20;
    limits.maxValues = 1u << 20;
    auto parsed = jsonutil::parseUntrusted(text, "recipe", limits);
    if (!parsed)
        return parsed.error();
    const json& j = *parsed;
    if (!j.is_object())
        return makeError(ErrorCode::InvalidFormat, "recipe is not a JSON object");
    Recipe r;
    Reader rd{j, {}};
    rd.get("recipe_version", r.version);
    if (!rd.error.empty())
        return makeError(ErrorCode::InvalidFormat, rd.error);
    if (!j.contains("recipe_version"))
        r.version = 0;  // written before the field existed (vireo-cli of stop 9)
    if (r.version > kVersion + 100)
        return makeError(ErrorCode::Unsupported, "recipe version " + std::to_string(r.version) + " is from a much newer Vireo");
    readScalars(rd, r);
    if (!rd.error.empty())
        return makeError(ErrorCode::InvalidFormat, rd.error);
    for (const auto& read : {readValueLists, readFilesAndLoras, readConditions, readNumberMaps})
        if (auto failed = read(j, r))
            return *failed;
    json extra = json::object();
    for (const auto& [k, v] : j.items())
        if (!knownKeys().count(k))
            extra[k] = v;
    r.extraJson = extra.dump(-1, ' ', false, json::error_handler_t::replace);
    return r;
}

}  // namespace vireo::output
