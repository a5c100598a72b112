#include "core/generation/generation.h"
#include "media/mediareader.h"

#include <QDir>
#include <QFileInfo>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <sstream>

namespace vireo::generation {

namespace {

Error invalid(const std::string& message)
{
    return makeError(ErrorCode::InvalidArgument, message);
}

}  // namespace

facade::FamilyRules rulesFor(const catalog::Catalog& catalog, const runtime::ModelRef& model)
{
    if (model.key.startsWith(QStringLiteral("catalog:")))
        if (const auto* v = catalog.find(model.key.mid(8).toStdString()))
            if (auto rules = facade::familyRulesById(v->pipeline))
                return *rules;
    return facade::familyRules(model.plan.modelPaths);
}

bool makesImages(const catalog::Catalog& catalog, const runtime::ModelRef& model)
{
    return rulesFor(catalog, model).kind == facade::ModelKind::Image;
}

std::vector<std::string> notForImages(const Ask& ask, const facade::LoadPlan& plan)
{
    std::vector<std::string> out;
    const std::pair<bool, const char*> checks[] = {
        {ask.frames.has_value(), "frames"},
        {ask.fps.has_value(), "fps"},
        {ask.audioGuidance.has_value(), "audio-guidance"},
        {ask.rescale.has_value(), "rescale"},
        {!ask.schedule.empty(), "schedule"},
        {!ask.speed.empty(), "speed"},
        {!ask.negativePrompt.empty(), "negative"},
        {ask.enhancePrompt, "enhance-prompt"},
        {plan.promptEnhancerPath.has_value(), "prompt-enhancer"},
        {!ask.loras.empty(), "lora"},
        {plan.textEncoderPath.has_value(), "text-encoder"},
        {!ask.conditions.empty(), ask.conditions.empty() || ask.conditions.front().clipFrames == 0 ? "image" : "clip"},
        {ask.audio.has_value(), "audio"},
        {ask.retake.has_value(), "retake"},
        {!ask.references.empty(), "reference"},
        {!ask.stages.empty(), "stages"},
        {plan.spatialUpsamplerPath.has_value(), "upsampler"},
        {plan.temporalUpsamplerPath.has_value(), "temporal-upsampler"},
        {plan.distilledLoraPath.has_value(), "distilled-lora"},
    };
    for (const auto& [set, name] : checks)
        if (set)
            out.emplace_back(name);
    return out;
}

std::vector<std::string> sizeProblems(
    const facade::FamilyRules& rules, std::int64_t width, std::int64_t height, std::int64_t frames, bool lengthFromSound)
{
    std::vector<std::string> out;
    const auto cell = rules.sizeMultiple;
    if (cell > 0 && (width % cell || height % cell))
        out.emplace_back(
            "Width and height must be multiples of " + std::to_string(cell) + " (" + rules.title + " works on " + rules.sizeUnit + ").");
    const auto step = rules.frameStep;
    if (step > 0 && frames == 0 && !rules.autoLength && !(lengthFromSound && rules.audioInput))
        out.emplace_back(rules.title + " cannot read a length from the prompt: give the frames (" + std::to_string(step) + "k + 1).");
    else if (step > 0 && frames != 0 && (frames - 1) % step) {
        const auto below = (frames - 1) / step * step + 1, above = ((frames - 1) / step + 1) * step + 1;
        out.emplace_back("Frames must be " + std::to_string(step) + "k + 1 (1, " + std::to_string(step + 1) + ", "
            + std::to_string(2 * step + 1) + ", … " + std::to_string(15 * step + 1) + ", …): " + std::to_string(below) + " or "
            + std::to_string(above) + " would do.");
    }
    return out;
}

namespace {

std::string number(double v)
{
    std::ostringstream out;
    out << v;
    return out.str();
}

}  // namespace

std::string describeKnobs(const facade::FamilyRules& rules)
{
    if (rules.knobs.empty())
        return rules.title + " has no controls of its own";
    std::string out;
    for (const auto& k : rules.knobs)
        out += (out.empty() ? "" : " ") + k.id + " (" + number(k.minimum) + " to " + number(k.maximum) + ", default "
            + number(k.defaultValue) + "): " + k.help;
    return out;
}

std::string knobProblem(const facade::FamilyRules& rules, const std::string& id, double value)
{
    const auto* k = rules.knob(id);
    if (!k) {
        std::string ids;
        for (const auto& known : rules.knobs)
            ids += (ids.empty() ? "" : ", ") + known.id;
        return rules.title + " has no control named '" + id + "'"
            + (ids.empty() ? std::string(" (it has none of its own)") : " (its controls: " + ids + ")");
    }
    if (!(value >= k->minimum && value <= k->maximum))
        return id + " must be from " + number(k->minimum) + " to " + number(k->maximum) + ", not " + number(value);
    return {};
}

Result<runtime::GenerationDefaults> defaultsFor(
    const catalog::Catalog& catalog, const runtime::ModelRef& model, const Ask& ask, const facade::ModelFacts* known)
{
    const bool image = makesImages(catalog, model);
    std::string schedule = image ? std::string() : ask.schedule;
    // A guidance or a step count of one's own means the dev schedule.
    if (schedule.empty() && !image && ((ask.guidance && *ask.guidance > 1) || (ask.steps && *ask.steps != 8)))
        schedule = "dev";
    // A catalog variant keeps its own numbers; the other schedule takes the family's variant of
    // it, as a model outside the catalog does.
    if (model.key.startsWith(QStringLiteral("catalog:"))) {
        auto d = runtime::defaultsForVariant(catalog, model.key.mid(8).toStdString());
        if (d && (schedule.empty() || d->schedule == schedule))
            return d;
    }
    if (known)
        return runtime::defaultsForModel(catalog, *known, schedule);
    if (const auto facts = facade::Generator::readModelFacts(model.plan))
        return runtime::defaultsForModel(catalog, *facts, schedule);
    // Not readable: the family's own defaults stand in; the memory plan says what is wrong.
    return runtime::defaultsForVersion(catalog, image ? "4" : "2.3", schedule.empty() ? "distilled" : schedule);
}

void applyPresets(const facade::FamilyRules& rules, const Ask& ask, facade::GenerateRequest& r)
{
    for (const auto& p : rules.presets) {
        const auto on = r.knobs.find(p.knob);
        if (on == r.knobs.end() || on->second != p.value)
            continue;
        if (p.steps && !ask.steps)
            r.steps = *p.steps;
        if (p.rescale && !ask.rescale)
            r.guidanceRescale = *p.rescale;
        for (const auto& [id, value] : p.knobs)
            if (!ask.knobs.count(id))
                r.knobs[id] = value;
    }
}

facade::GenerateRequest requestFor(const runtime::GenerationDefaults& defaults, bool image, const Ask& ask)
{
    auto r = runtime::requestFrom(defaults);
    // Control characters and invalid UTF-8 never reach the tokenizer or the recipe.
    r.prompt = output::sanitizedText(ask.prompt);
    r.negativePrompt = output::sanitizedText(ask.negativePrompt);
    r.enhancePrompt = ask.enhancePrompt && !image;
    r.schedule = image || ask.schedule.empty() ? defaults.schedule : ask.schedule;
    r.width = ask.width.value_or(r.width);
    r.height = ask.height.value_or(r.height);
    // A sound sets the length unless the user cut it.
    r.frames = ask.frames.value_or(ask.audio ? 0 : r.frames);
    r.fps = ask.fps.value_or(r.fps);
    r.steps = ask.steps.value_or(!image && r.schedule == "distilled" ? 8 : r.steps);
    r.guidance = ask.guidance.value_or(r.guidance);
    // The audio follows a guidance of one's own unless it has its own; the family's rescale
    // belongs to the family's guidance.
    r.audioGuidance = ask.audioGuidance.value_or(ask.guidance.value_or(r.audioGuidance));
    r.guidanceRescale = ask.rescale.value_or(ask.guidance ? 0.0 : r.guidanceRescale);
    r.seed = ask.seed.value_or(defaults.randomSeed ? static_cast<std::int64_t>(std::random_device{}() & 0x7fffffff) : defaults.seed);
    r.loras = ask.loras;
    for (const auto& [id, value] : ask.knobs)
        r.knobs[id] = value;
    if (const auto speed = facade::parseSpeedMode(ask.speed.empty() ? r.speed : ask.speed))
        r.speed = std::string(facade::speedModeName(*speed));
    r.guidanceSchedule.clear();
    if (image) {
        r.frames = 1;
        // The reference's schedule of weights belongs to its steps at its guidance; a guidance
        // or a step count of one's own means that guidance at every step.
        if (!ask.guidance && r.steps == defaults.steps && static_cast<int>(defaults.guidanceSchedule.size()) == r.steps)
            r.guidanceSchedule = defaults.guidanceSchedule;
    } else {
        r.stages = ask.stages.empty() ? "auto" : ask.stages;
    }
    return r;
}

Result<Prepared> prepare(
    const catalog::Catalog& catalog, const runtime::GenerationDefaults& defaults, const runtime::ModelRef& model, const Ask& ask)
{
    Prepared out;
    const auto rules = rulesFor(catalog, model);
    out.image = rules.kind == facade::ModelKind::Image;
    if (const auto extra = out.image ? notForImages(ask, model.plan) : std::vector<std::string>{}; !extra.empty()) {
        std::string list;
        for (const auto& e : extra)
            list += (list.empty() ? "" : ", ") + e;
        return invalid(list + (extra.size() == 1 ? " does" : " do") + " not apply to an image model (Ideogram-4)");
    }
    auto r = requestFor(defaults, out.image, ask);
    applyPresets(rules, ask, r);
    if (ask.retake && !out.image) {
        // The clip's size, length and rate unless set: a retake keeps them (from its header).
        const auto& k = *ask.retake;
        if (!rules.retake)
            return invalid(rules.title + " cannot retake a clip");
        if (!ask.conditions.empty() || ask.audio)
            return invalid("a retake takes no start image, clip or sound to follow: the clip it retakes is its start");
        const auto info = media::probeMedia(k.path.toStdString());
        if (!info)
            return invalid(info.error().message);
        if (!info->hasVideo || info->frames < 1)
            return invalid(k.path.toStdString() + ": has no video to retake");
        if (!ask.width)
            r.width = info->width;
        if (!ask.height)
            r.height = info->height;
        if (!ask.fps && info->fps > 0)
            r.fps = info->fps;
        if (!ask.frames)
            r.frames = std::max<std::int64_t>(1, (info->frames - 1) / 8 * 8 + 1);
        if (r.frames > info->frames)
            return invalid(
                k.path.toStdString() + " has " + std::to_string(info->frames) + " frames; the retake asks for " + std::to_string(r.frames));
        const double seconds = static_cast<double>(r.frames) / std::max(0.5, r.fps);
        if (!(k.start >= 0 && k.end > k.start && k.start < seconds))
            return invalid("the retake window must start before it ends, inside the clip's " + std::to_string(seconds).substr(0, 5) + " s");
        if (!k.video && !k.audio)
            return invalid("a retake makes the video, the sound or both again");
        facade::RetakeInput window;
        window.start = k.start;
        window.end = k.end;
        window.video = k.video;
        window.audio = k.audio;
        r.retake = window;
        if (r.stages == "auto")
            r.stages = "single";
    }
    // The sound's length from its header, so the stage plan, the memory plan and the queue see
    // the clip that runs, not the longest; a header that says none leaves it to the engine.
    if (!out.image && ask.audio && r.frames == 0 && !ask.audio->path.isEmpty())
        if (const auto seconds = runtime::soundSeconds(ask.audio->path))
            r.frames = facade::framesForSound(*seconds, r.fps);
    // Reference clips: frame k guides output frame k, so each must be as long as the output
    // (said from its header); a length left on auto is the shortest's, up to 20 s.
    if (!out.image && !ask.references.empty()) {
        if (!rules.references)
            return invalid(rules.title + " takes no reference clips (they are an IC-LoRA's)");
        if (ask.references.size() > 8)
            return invalid("at most 8 reference clips, got " + std::to_string(ask.references.size()));
        if (ask.retake)
            return invalid("a retake takes no reference clips");
        for (const auto& f : ask.references) {
            const auto name = f.path.toStdString();
            if (!(f.strength >= 0.0 && f.strength <= 1.0))
                return invalid(name + ": a reference clip's strength must be between 0 and 1");
            const auto info = media::probeMedia(name);
            if (!info)
                return invalid(info.error().message);
            if (!info->hasVideo || info->frames < 1)
                return invalid(name + ": has no video frames for the IC-LoRA to follow (a reference clip is a video)");
            if (r.frames == 0 && !ask.audio) {
                const auto longest = static_cast<std::int64_t>(std::floor(20.0 * std::max(0.5, r.fps)));
                r.frames = std::max<std::int64_t>(1, (std::min(info->frames, longest) - 1) / 8 * 8 + 1);
            }
            if (r.frames > info->frames)
                return invalid(name + " has " + std::to_string(info->frames) + " frames; the video it guides has "
                    + std::to_string(r.frames) + ": give a reference clip at least as long, or make the video shorter ("
                    + std::to_string((info->frames - 1) / 8 * 8 + 1) + " frames)");
        }
    }
    if (r.prompt.find_first_not_of(" \t\n") == std::string::npos)
        return invalid("the prompt is empty");
    if (r.seed < 0 || r.seed > 2147483647)
        return invalid("the seed must be between 0 and 2147483647");
    if (!ask.speed.empty() && !facade::parseSpeedMode(ask.speed))
        return invalid("the speed is quality, balanced or fast, not " + ask.speed);
    if (ask.audio && !out.image && !rules.audioInput)
        return invalid(rules.title + " does not follow a sound");
    if (ask.audio && ask.audio->path.isEmpty())
        return invalid("the sound to follow names no file");
    if (const auto problems = sizeProblems(rules, r.width, r.height, r.frames, ask.audio.has_value()); !problems.empty())
        return invalid(problems.front());
    for (const auto& [id, value] : ask.knobs)
        if (const auto problem = knobProblem(rules, id, value); !problem.empty())
            return invalid(problem);
    for (const auto& k : rules.knobs)
        r.knobs.try_emplace(k.id, k.defaultValue);
    if (!out.image) {
        if (r.stages != "auto" && r.stages != "single" && r.stages != "two")
            return invalid("the stages are auto, single or two, not " + r.stages);
        // Which path runs and why, before anything loads; "two" that cannot run is refused here.
        // A length left to the sound is planned at its longest until the engine reads it.
        auto planned = r;
        if (ask.audio && planned.frames == 0)
            planned.frames = facade::planningFrames(r);
        planned.references = referencesToPlan(ask.references);
        auto stages = facade::planStages(model.plan, planned);
        if (!stages)
            return invalid(stages.error().message);
        out.stagesReason = stages->reason;
        for (const auto& c : ask.conditions) {
            const auto problem = runtime::conditionProblem(c.frame, std::max(1, c.clipFrames), c.strength, c.crf, r.frames);
            if (!problem.empty())
                return invalid((c.clipFrames > 0 ? "clip " : "image ") + c.path.toStdString() + ": " + problem);
        }
        out.job.conditions = ask.conditions;
        out.job.audio = ask.audio;
        out.job.retake = ask.retake;
        out.job.references = ask.references;
        // A still's CRF left to the family: its own (LTX-2.5 was trained at 18, the others at 33).
        for (auto& c : out.job.conditions)
            if (c.crf == runtime::kFamilyConditionCrf)
                c.crf = c.clipFrames > 0 ? 0 : defaults.conditionCrf;
    }
    out.job.model = model;
    out.job.request = std::move(r);
    return out;
}

std::vector<facade::ConditionInput> referencesToPlan(const std::vector<runtime::ReferenceFile>& references)
{
    std::vector<facade::ConditionInput> out;
    for (const auto& f : references) {
        facade::ConditionInput c;
        c.source = f.path.toStdString();
        c.strength = f.strength;
        out.push_back(std::move(c));
    }
    return out;
}

Result<void> decodeConditions(const Prepared& prepared)
{
    const auto& r = prepared.job.request;
    if (prepared.job.audio)
        if (auto decoded = runtime::prepareConditionAudio(*prepared.job.audio); !decoded)
            return decoded.error();
    if (prepared.job.retake)
        if (auto decoded = runtime::prepareRetake(*prepared.job.retake, static_cast<int>(r.width), static_cast<int>(r.height), r.frames);
            !decoded)
            return decoded.error();
    for (const auto& c : prepared.job.conditions)
        if (auto decoded = runtime::prepareCondition(c, static_cast<int>(r.width), static_cast<int>(r.height), r.frames); !decoded)
            return decoded.error();
    for (const auto& f : prepared.job.references)
        if (auto decoded = runtime::prepareReference(f, static_cast<int>(r.width), static_cast<int>(r.height), r.frames); !decoded)
            return decoded.error();
    return {};
}

Result<Again> askFromRecipe(const output::Recipe& r, const QString& folder)
{
    const auto& q = r.request;
    Again out;
    out.modelKey = QString::fromStdString(r.modelKey);
    if (out.modelKey.isEmpty())
        return makeError(ErrorCode::InvalidFormat, "its recipe does not say which model made it");
    out.dtype = r.dtype;
    auto& a = out.ask;
    a.prompt = q.prompt;
    a.seed = q.seed;
    a.width = q.width;
    a.height = q.height;
    a.steps = q.steps;
    a.knobs = q.knobs;
    out.image = r.kind == "image";
    if (out.image) {
        // The reference's schedule of weights comes back from the defaults at its step count;
        // a constant weight is given as such.
        if (q.guidanceSchedule.empty())
            a.guidance = q.guidance;
        return out;
    }
    a.negativePrompt = q.negativePrompt;
    a.enhancePrompt = q.enhancePrompt;
    a.frames = q.frames;
    a.fps = q.fps;
    a.schedule = q.schedule;
    a.guidance = q.guidance;
    a.audioGuidance = q.audioGuidance;
    a.rescale = q.guidanceRescale;
    // Case-insensitive, as everywhere speed modes are named.
    a.speed = QString::fromStdString(q.speed).toLower().toStdString();
    // The path that ran, so the same one runs again; older recipes: what was asked.
    a.stages = r.stages.empty() ? q.stages : r.stages;
    for (const auto& l : r.loras)
        if (l.status.rfind("refused", 0) != 0)  // one refused then changed nothing
            a.loras.push_back({l.path, l.strength});
    for (const auto& c : r.conditions) {
        const bool clip = c.frames > 1;
        const auto copyName = QString::fromStdString(c.copy);
        const QString copy = copyName.isEmpty() ? QString() : QFileInfo(copyName).isAbsolute() ? copyName : QDir(folder).filePath(copyName);
        const auto source = QString::fromStdString(c.source);
        runtime::ConditionFile f;
        f.frame = c.frame;
        f.strength = c.strength;
        f.clipFrames = clip ? static_cast<int>(std::min<std::int64_t>(1025, c.frames)) : 0;
        f.crf = clip ? 0 : c.crf;  // clips are never re-compressed
        const auto soundCopyName = QString::fromStdString(c.soundCopy);
        const QString soundCopy = soundCopyName.isEmpty() ? QString()
            : QFileInfo(soundCopyName).isAbsolute()       ? soundCopyName
                                                          : QDir(folder).filePath(soundCopyName);
        if (!copy.isEmpty() && QFileInfo(copy).isFile() && (soundCopy.isEmpty() || QFileInfo(soundCopy).isFile())) {
            // A clip's kept frames are exactly the frames used: read from their start; the sound
            // it continued from its own copy.
            f.path = copy;
            f.clipFromEnd = clip && c.fromEnd && !c.copyIsFrames;
            f.expectedSha256 = c.copySha256.empty() ? c.sha256 : c.copySha256;
            f.soundPath = soundCopy;
            f.soundSha256 = c.soundCopySha256;
        } else if (!source.isEmpty() && QFileInfo(source).isFile()) {
            f.path = source;
            f.clipFromEnd = clip && c.fromEnd;
            f.expectedSha256 = c.sha256;
        } else {
            out.missing.push_back(std::string("the start ") + (clip ? "clip " : "image ") + c.source
                + " is gone, and no copy is beside it (" + (c.copy.empty() ? std::string("none was kept") : c.copy)
                + "): choose it again to make this video again");
            continue;
        }
        a.conditions.push_back(std::move(f));
    }
    if (r.retake) {
        // The kept frames and samples first (the source may have moved), else the source.
        const auto& k = *r.retake;
        const auto beside = [&](const std::string& name) {
            const auto n = QString::fromStdString(name);
            return n.isEmpty() ? QString() : QFileInfo(n).isAbsolute() ? n : QDir(folder).filePath(n);
        };
        runtime::RetakeFile f;
        f.start = k.start;
        f.end = k.end;
        f.video = k.video;
        f.audio = k.audio;
        const auto copy = beside(k.copy), soundCopy = beside(k.soundCopy);
        const auto source = QString::fromStdString(k.source);
        if (!copy.isEmpty() && QFileInfo(copy).isFile() && (k.soundCopy.empty() || QFileInfo(soundCopy).isFile())) {
            f.path = copy;
            f.expectedSha256 = k.copySha256;
            f.soundPath = soundCopy;
            f.soundSha256 = k.soundCopySha256;
        } else if (!source.isEmpty() && QFileInfo(source).isFile()) {
            f.path = source;
            f.expectedSha256 = k.sha256;
        }
        if (f.path.isEmpty())
            out.missing.push_back("the clip " + k.source + " that was retaken is gone, and no copy is beside it ("
                + (k.copy.empty() ? std::string("none was kept") : k.copy) + "): choose it again to retake it again");
        else
            a.retake = std::move(f);
        a.stages.clear();  // a retake is one pass whatever the recipe says
    }
    for (const auto& k : r.references) {
        // The kept frames first (a depth or pose clip is often remade), else the source.
        const auto copyName = QString::fromStdString(k.copy);
        const QString copy = copyName.isEmpty() ? QString() : QFileInfo(copyName).isAbsolute() ? copyName : QDir(folder).filePath(copyName);
        const auto source = QString::fromStdString(k.source);
        if (!copy.isEmpty() && QFileInfo(copy).isFile())
            a.references.push_back({copy, k.strength, k.copySha256});
        else if (!source.isEmpty() && QFileInfo(source).isFile())
            a.references.push_back({source, k.strength, k.sha256});
        else
            out.missing.push_back("the reference clip " + k.source + " is gone, and no copy is beside it ("
                + (k.copy.empty() ? std::string("none was kept") : k.copy) + "): choose it again to make this video again");
    }
    if (r.audio) {
        // The kept samples first (the source may be a long video, or gone), else the source.
        const auto copyName = QString::fromStdString(r.audio->copy);
        const QString copy = copyName.isEmpty() ? QString() : QFileInfo(copyName).isAbsolute() ? copyName : QDir(folder).filePath(copyName);
        const auto source = QString::fromStdString(r.audio->source);
        if (!copy.isEmpty() && QFileInfo(copy).isFile())
            a.audio = runtime::AudioFile{copy, r.audio->copySha256};
        else if (!source.isEmpty() && QFileInfo(source).isFile())
            a.audio = runtime::AudioFile{source, r.audio->sha256};
        else
            out.missing.push_back("the sound " + r.audio->source + " is gone, and no copy is beside it ("
                + (r.audio->copy.empty() ? std::string("none was kept") : r.audio->copy) + "): choose it again to make this video again");
    }
    return out;
}

std::string weightsChanged(const output::Recipe& recipe)
{
    for (const auto& w : recipe.files) {
        std::error_code ec;
        const auto now = std::filesystem::file_size(w.path, ec);
        if (ec)
            continue;  // a folder, or a file the model no longer reads from there
        if (w.bytes > 0 && static_cast<std::int64_t>(now) != w.bytes)
            return w.path + " is " + std::to_string(now) + " bytes; it was " + std::to_string(w.bytes)
                + " when the recipe was written: these are other weights, and they would make another output";
    }
    return {};
}

}  // namespace vireo::generation
