#pragma once

#include <QWidget>

namespace vireo::ui {

// Pages whose features arrive with later parts of the studio. Each says so plainly and
// offers nothing that does not work yet.
class GalleryPage : public QWidget {
    Q_OBJECT
public:
    explicit GalleryPage(QWidget* parent = nullptr);
};

} // namespace vireo::ui
