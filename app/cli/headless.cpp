#include "app/cli/headless.h"

#include "core/util/logging.h"

namespace vireo::cli {

Result<HeadlessStudio> openHeadlessStudio(bool recordOutputs)
{
    // QCoreApplication keeps references to these for its whole life.
    static int argc = 1;
    static char name[] = "vireo-cli";
    static char* argv[] = {name, nullptr};
    HeadlessStudio h;
    h.app = std::make_unique<QCoreApplication>(argc, argv);
    core::initCommandLineLogging();
    core::Studio::Options options;
    options.headless = true;
    options.recordOutputs = recordOutputs;
    auto studio = core::Studio::create(options);
    if (!studio)
        return makeError(studio.error().code, "the built-in catalog is damaged: " + studio.error().message);
    h.studio = std::move(*studio);
    return h;
}

}  // namespace vireo::cli
