#include "core/runtime/defaults.h"

#include <nlohmann/json.hpp>

namespace vireo::runtime {

namespace {

Result<GenerationDefaults> parse(const std::string& json, const std::string& pipeline, const std::string& origin)
{
    GenerationDefaults d;
    const bool image = pipeline == "ideogram4";
    d.schedule = image ? "logit-normal" : pipeline == "ltx2-dev" ? "dev" : "distilled";
    if (image)
        d.frames = 1;
    const auto j = nlohmann::json::parse(json, nullptr, false);
    if (j.is_discarded() || !j.is_object())
        return makeError(ErrorCode::InvalidFormat, origin + ": the defaults are not a JSON object");
    std::string error;
    auto number = [&](const char* key, auto& out, double min, double max) {
        if (!error.empty() || !j.contains(key))
            return;
        const auto& v = j.at(key);
        if (!v.is_number() || !(v.get<double>() >= min && v.get<double>() <= max)) {
            error = origin + ": default '" + key + "' must be a number from " + std::to_string(min) + " to " + std::to_string(max);
            return;
        }
        out = static_cast<std::remove_reference_t<decltype(out)>>(v.get<double>());
    };
    number("width", d.width, 32, 8192);
    number("height", d.height, 32, 8192);
    number("frames", d.frames, 1, 1025);
    number("fps", d.fps, 1, 240);
    number("steps", d.steps, 1, 1000);
    number("guidance", d.guidance, 0, 100);
    number("audio_guidance", d.audioGuidance, 0, 100);
    number("guidance_rescale", d.guidanceRescale, 0, 1);
    number("condition_crf", d.conditionCrf, 0, 51);
    double seed = -1;
    number("seed", seed, -1, 9.0e15);
    // The family's own controls, by the ids its rules declare, within their ranges.
    if (const auto rules = facade::familyRulesById(pipeline))
        for (const auto& k : rules->knobs)
            if (j.contains(k.id)) {
                double v = k.defaultValue;
                number(k.id.c_str(), v, k.minimum, k.maximum);
                d.knobs[k.id] = v;
            }
    if (!error.empty())
        return makeError(ErrorCode::InvalidFormat, error);
    d.randomSeed = seed < 0;
    d.seed = d.randomSeed ? 0 : static_cast<std::int64_t>(seed);
    // [[count, weight], ...] runs, noisiest first: Ideogram-4's 45 x 7.0 then 3 x 3.0.
    if (j.contains("guidance_schedule")) {
        const auto& runs = j.at("guidance_schedule");
        bool ok = runs.is_array();
        if (ok)
            for (const auto& run : runs) {
                if (!run.is_array() || run.size() != 2 || !run[0].is_number_integer() || !run[1].is_number()
                    || run[0].get<std::int64_t>() < 1 || run[0].get<std::int64_t>() > 1000
                    || !(run[1].get<double>() >= 0 && run[1].get<double>() <= 100)) {
                    ok = false;
                    break;
                }
                d.guidanceSchedule.insert(d.guidanceSchedule.end(), run[0].get<std::size_t>(), run[1].get<double>());
            }
        if (!ok || static_cast<int>(d.guidanceSchedule.size()) != d.steps)
            return makeError(ErrorCode::InvalidFormat,
                origin + ": default 'guidance_schedule' must be [[steps, weight], ...] covering the " + std::to_string(d.steps)
                    + " default steps");
    }
    // The distilled models run their 8 trained sigmas whatever a family default says.
    if (d.schedule == "distilled")
        d.steps = 8;
    if (!j.contains("audio_guidance"))
        d.audioGuidance = d.guidance;
    // The audio's STG and modality scales follow the video's unless given, as diffusers'
    // LTX2Pipeline defaults them (and as audio_guidance follows guidance above).
    for (const auto& [video, audio] : {std::pair{"stg_scale", "audio_stg_scale"}, std::pair{"modality_scale", "audio_modality_scale"}})
        if (d.knobs.count(video) && !d.knobs.count(audio))
            d.knobs[audio] = d.knobs.at(video);
    return d;
}

}  // namespace

Result<GenerationDefaults> defaultsForVariant(const catalog::Catalog& catalog, const std::string& id)
{
    const auto* v = catalog.find(id);
    if (!v)
        return makeError(ErrorCode::NotFound, id + " is not in the catalog");
    return parse(v->defaultsJson, v->pipeline, id);
}

Result<GenerationDefaults> defaultsForVersion(const catalog::Catalog& catalog, const std::string& version, const std::string& schedule)
{
    const std::string family = version == "4" ? "ideogram-4" : version == "2.0" ? "ltx-2" : version == "2.5" ? "ltx-2.5" : "ltx-2.3";
    const auto* f = catalog.family(family);
    if (!f)
        return makeError(ErrorCode::NotFound, "the catalog has no " + family + " family");
    if (family == "ideogram-4") {
        if (f->variants.empty())
            return makeError(ErrorCode::NotFound, "the catalog has no variant of ideogram-4");
        const auto& v = f->variants.front();
        return parse(v.defaultsJson, v.pipeline, family + "/" + v.id);
    }
    const std::string pipeline = schedule == "dev" ? "ltx2-dev" : "ltx2-distilled";
    for (const auto& v : f->variants)
        if (v.pipeline == pipeline)
            return parse(v.defaultsJson, v.pipeline, family + "/" + v.id);
    return makeError(ErrorCode::NotFound, "the catalog has no " + pipeline + " variant of " + family);
}

Result<GenerationDefaults> defaultsForModel(const catalog::Catalog& catalog, const facade::ModelFacts& plan, const std::string& schedule)
{
    if (plan.kind == facade::ModelKind::Image)
        return defaultsForVersion(catalog, "4", {});
    const std::string chosen = !schedule.empty() ? schedule : !plan.trainedFor.empty() ? plan.trainedFor : "distilled";
    auto d = defaultsForVersion(catalog, plan.version, chosen);
    if (!d)
        return d;
    const std::string what = "LTX-" + plan.version + " " + chosen + " defaults";
    if (!schedule.empty())
        d->basis = what + ": the " + schedule + " schedule was chosen";
    else if (!plan.trainedFor.empty())
        d->basis = what + ": " + plan.trainedForEvidence + " says " + plan.trainedFor;
    else
        d->basis = what + ": nothing in its files says dev or distilled; choose the dev schedule for a dev model";
    return d;
}

facade::GenerateRequest requestFrom(const GenerationDefaults& d)
{
    facade::GenerateRequest r;
    r.width = d.width;
    r.height = d.height;
    r.frames = d.frames;
    r.fps = d.fps;
    r.schedule = d.schedule;
    r.steps = d.steps;
    r.guidance = d.guidance;
    r.audioGuidance = d.audioGuidance;
    r.guidanceRescale = d.guidanceRescale;
    r.seed = d.seed;
    r.guidanceSchedule = d.guidanceSchedule;
    r.knobs = d.knobs;
    return r;
}

}  // namespace vireo::runtime
