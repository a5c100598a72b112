#include "ui/pages/simplepages.h"

#include "ui/pages/pagehelpers.h"

#include <QVBoxLayout>

namespace vireo::ui {

GalleryPage::GalleryPage(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(28, 24, 28, 24);
    addPageHeader(layout, tr("Gallery"), tr("Every output, with playback and the recipe that made it."));
    layout->addWidget(makeEmptyState(tr("Nothing generated yet"),
        tr("Images and videos you generate will be listed here with their full recipe.")), 1);
}

} // namespace vireo::ui
