#pragma once

// The studio's own services without a window, for the commands that run jobs (generate, batch,
// generate --host): the same catalog, settings, engines and gallery the window is made of
// (core::Studio, the composition root), behind a QCoreApplication of the command's own.

#include "core/studio/studio.h"

#include <QCoreApplication>

#include <memory>
#include <string>

namespace vireo::cli {

struct HeadlessStudio {
    std::unique_ptr<QCoreApplication> app;
    std::unique_ptr<core::Studio> studio;
};

// recordOutputs false: nothing is listed in the gallery (--no-gallery). An error says why the
// studio cannot start (the built-in catalog is damaged: a packaging defect).
Result<HeadlessStudio> openHeadlessStudio(bool recordOutputs);

}  // namespace vireo::cli
