#include "app/cli/again.h"

#include "core/gallery/gallerystore.h"
#include "core/output/recipe.h"
#include "core/runtime/modelresolver.h"
#include "core/generation/generation.h"
#include "core/studio/studio.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QString>

#include <memory>

namespace vireo::cli {

Result<MadeAgain> madeAgain(const std::string& file)
{
    QString problem;
    const auto path = QString::fromStdString(file);
    if (!QFileInfo(path).isFile())
        return makeError(ErrorCode::NotFound, file + ": no such file to make again");
    const auto recipe = gallery::readEmbeddedRecipe(path, &problem);
    if (!recipe)
        return makeError(ErrorCode::InvalidFormat,
            problem.isEmpty() ? file + ": it holds no Vireo recipe (was it made by Vireo Studio?)" : problem.toStdString());
    auto again = generation::askFromRecipe(*recipe, QFileInfo(path).absolutePath());
    if (!again)
        return makeError(again.error().code, file + ": " + again.error().message);
    if (!again->missing.empty())
        return makeError(ErrorCode::NotFound, file + ": " + again->missing.front());
    MadeAgain out;
    out.ask = std::move(again->ask);
    out.image = again->image;

    // The model: a local key names its files; a catalog variant or Hub repo is resolved in this
    // machine's cache, as the window does.
    std::unique_ptr<QCoreApplication> app;
    int argc = 1;
    char name[] = "vireo-cli";
    char* argv[] = {name, nullptr};
    if (!QCoreApplication::instance())
        app = std::make_unique<QCoreApplication>(argc, argv);
    core::Studio::Options headless;
    headless.headless = true;
    headless.recordOutputs = false;
    auto studio = core::Studio::create(headless);
    if (!studio)
        return studio.error();
    auto model = (*studio)->models()->resolve(again->modelKey);
    if (!model)
        return makeError(model.error().code,
            file + ": made by " + again->modelKey.toStdString() + ", which is not ready here: " + model.error().message);
    // The device and placement are this machine's choice (options after --again); the files are the recipe's.
    out.load.modelPaths = model->plan.modelPaths;
    out.load.textEncoderPath = model->plan.textEncoderPath;
    if (!out.image) {
        out.load.spatialUpsamplerPath = model->plan.spatialUpsamplerPath;
        out.load.temporalUpsamplerPath = model->plan.temporalUpsamplerPath;
        out.load.distilledLoraPath = model->plan.distilledLoraPath;
        out.load.promptEnhancerPath = model->plan.promptEnhancerPath;
    }
    if (!again->dtype.empty())
        out.load.dtype = again->dtype;
    if (out.load.modelPaths.empty())
        return makeError(ErrorCode::InvalidFormat, file + ": its recipe names no model file");
    if (const auto changed = generation::weightsChanged(*recipe); !changed.empty())
        return makeError(ErrorCode::InvalidArgument, changed + " (" + file + ")");
    return out;
}

}  // namespace vireo::cli
