#include "app/cli/again.h"

#include "core/gallery/gallerystore.h"
#include "core/output/recipe.h"
#include "core/runtime/modelresolver.h"
#include "core/studio/studio.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QString>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <memory>

namespace vireo::cli {

namespace {

// Every digit a double needs to come back as the same double.
std::string exact(double v)
{
    char text[40];
    std::snprintf(text, sizeof text, "%.17g", v);
    return text;
}

} // namespace

Result<std::vector<std::string>> argumentsFromRecipe(const std::string& file)
{
    QString problem;
    const auto path = QString::fromStdString(file);
    if (!QFileInfo(path).isFile())
        return makeError(ErrorCode::NotFound, file + ": no such file to make again");
    const auto recipe = gallery::readEmbeddedRecipe(path, &problem);
    if (!recipe)
        return makeError(ErrorCode::InvalidFormat, problem.isEmpty() ? file + ": it holds no Vireo recipe (was it made by Vireo Studio?)"
                                                                     : problem.toStdString());
    const auto& r = *recipe;
    std::vector<std::string> a;

    // The model: a local key names its files; a catalog variant or Hub repo is resolved in this
    // machine's cache, as the window does.
    const auto key = QString::fromStdString(r.modelKey);
    if (key.isEmpty())
        return makeError(ErrorCode::InvalidFormat, file + ": its recipe does not say which model made it");
    std::unique_ptr<QCoreApplication> app;
    int argc = 1;
    char name[] = "vireo-cli";
    char* argv[] = {name, nullptr};
    if (!QCoreApplication::instance())
        app = std::make_unique<QCoreApplication>(argc, argv);
    facade::LoadPlan plan;
    if (key.startsWith(QStringLiteral("local:"))) {
        for (const auto& part : key.mid(6).split(QLatin1Char('|'), Qt::SkipEmptyParts)) {
            if (part.startsWith(QStringLiteral("te=")))
                plan.textEncoderPath = part.mid(3).toStdString();
            else if (part.startsWith(QStringLiteral("up=")))
                plan.spatialUpsamplerPath = part.mid(3).toStdString();
            else
                plan.modelPaths.emplace_back(part.toStdString());
        }
    } else {
        auto studio = core::Studio::create();
        if (!studio)
            return studio.error();
        auto model = (*studio)->models()->resolve(key);
        if (!model)
            return makeError(model.error().code, file + ": made by " + key.toStdString() + ", which is not ready here: " + model.error().message);
        plan = model->plan;
    }
    if (plan.modelPaths.empty())
        return makeError(ErrorCode::InvalidFormat, file + ": its recipe names no model file");
    for (const auto& m : plan.modelPaths)
        a.insert(a.end(), {"--model", m.string()});
    if (plan.textEncoderPath)
        a.insert(a.end(), {"--text-encoder", plan.textEncoderPath->string()});
    if (plan.spatialUpsamplerPath && r.kind != "image")
        a.insert(a.end(), {"--upsampler", plan.spatialUpsamplerPath->string()});

    // The same weights, or the output would differ: sizes are checked here (hashing 40 GB
    // would take minutes); the new recipe names each file by its hash again.
    for (const auto& w : r.files) {
        std::error_code ec;
        const auto now = std::filesystem::file_size(w.path, ec);
        if (ec)
            continue;  // a folder, or a file the model no longer reads from there
        if (w.bytes > 0 && static_cast<std::int64_t>(now) != w.bytes)
            return makeError(ErrorCode::InvalidArgument, w.path + " is " + std::to_string(now) + " bytes; it was " + std::to_string(w.bytes)
                    + " when " + file + " was made: these are other weights, and they would make another output");
    }

    a.insert(a.end(), {"--prompt", r.prompt});
    a.insert(a.end(), {"--seed", std::to_string(r.seed)});
    a.insert(a.end(), {"--width", std::to_string(r.width), "--height", std::to_string(r.height)});
    if (!r.dtype.empty())
        a.insert(a.end(), {"--dtype", r.dtype});
    if (r.kind == "image") {
        a.insert(a.end(), {"--steps", std::to_string(r.steps)});
        // The reference's schedule of weights comes back from the defaults at its step count; a
        // constant weight is given as such.
        const auto extra = nlohmann::json::parse(r.extraJson, nullptr, false);
        if (!(extra.is_object() && extra.contains("guidance_schedule")))
            a.insert(a.end(), {"--guidance", exact(r.guidance)});
        return a;
    }
    a.insert(a.end(), {"--frames", std::to_string(r.frames), "--fps", exact(r.fps)});
    a.insert(a.end(), {"--schedule", r.schedule, "--steps", std::to_string(r.steps)});
    a.insert(a.end(), {"--guidance", exact(r.guidance), "--audio-guidance", exact(r.audioGuidance), "--rescale", exact(r.guidanceRescale)});
    if (!r.negativePrompt.empty())
        a.insert(a.end(), {"--negative", r.negativePrompt});
    if (!r.speed.empty())
        a.insert(a.end(), {"--speed", r.speed});
    if (!r.stages.empty())
        a.insert(a.end(), {"--stages", r.stages});
    for (const auto& l : r.loras)
        if (l.status.rfind("refused", 0) != 0)
            a.insert(a.end(), {"--lora", l.path + ":" + exact(l.strength)});
    const auto folder = QFileInfo(path).absolutePath();
    for (const auto& c : r.conditions) {
        // The copy kept beside the output first (a clip's holds exactly the frames used, from
        // its start), else the source as it was given.
        const auto copy = c.copy.empty() ? QString() : folder + QLatin1Char('/') + QString::fromStdString(c.copy);
        const bool useCopy = !copy.isEmpty() && QFileInfo(copy).isFile();
        const auto source = useCopy ? copy.toStdString() : c.source;
        if (!QFileInfo(QString::fromStdString(source)).isFile())
            return makeError(ErrorCode::NotFound, file + ": its start " + (c.frames > 1 ? "clip " : "image ") + c.source
                    + " is gone, and no copy is beside it (" + (c.copy.empty() ? std::string("none was kept") : c.copy) + ")");
        if (c.frames > 1) {
            a.insert(a.end(), {"--clip", source, "--clip-frames", std::to_string(c.frames)});
            if (c.fromEnd && !(useCopy && c.copyIsFrames))
                a.push_back("--clip-from-end");
        } else {
            a.insert(a.end(), {"--image", source, "--image-crf", std::to_string(c.crf)});
        }
        a.insert(a.end(), {"--image-frame", std::to_string(c.frame), "--image-strength", exact(c.strength)});
    }
    return a;
}

} // namespace vireo::cli
