#pragma once

class QApplication;

namespace vireo::ui {

// Fusion with a tuned dark palette and a small style sheet for the studio's own roles
// (sidebar, page titles, cards). Colours live here only.
void applyStudioTheme(QApplication& app);

} // namespace vireo::ui
