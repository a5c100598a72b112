#pragma once

// The studio's services and a window over them, as app/gui/main.cpp builds them; deleting the
// window deletes the studio after it.

#include "core/studio/studio.h"
#include "ui/mainwindow.h"

#include <memory>
#include <stdexcept>

namespace vireo::test {

struct DeleteWindowAndStudio {
    void operator()(ui::MainWindow* window) const
    {
        auto* studio = window->studio();
        delete window;
        delete studio;
    }
};
using StudioWindow = std::unique_ptr<ui::MainWindow, DeleteWindowAndStudio>;

inline StudioWindow openStudioWindow()
{
    auto studio = core::Studio::create();
    if (!studio)
        throw std::runtime_error(studio.error().message);
    return StudioWindow(new ui::MainWindow(studio->release()));
}

}  // namespace vireo::test
