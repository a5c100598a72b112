#pragma once

class QApplication;

namespace vireo::ui {

// Fusion with a tuned dark palette and a small style sheet for the studio's own roles
// (sidebar, page titles, cards). Colours live here only.
void applyStudioTheme(QApplication& app);

// The wheel scrolls what the pointer is over, not a value: a spin box or combo box changes
// under the wheel only once the user has clicked or tabbed into it, so scrolling a long form
// never turns Guidance 1.00 into 0.00 on the way past. Installed once per application.
void guardWheelEdits(QApplication& app);

}  // namespace vireo::ui
