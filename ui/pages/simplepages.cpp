#include "ui/pages/simplepages.h"

#include "ui/pages/pagehelpers.h"

#include <QVBoxLayout>

namespace vireo::ui {

GeneratePage::GeneratePage(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(28, 24, 28, 24);
    addPageHeader(layout, tr("Generate"), tr("Prompts, settings and live progress for images and video with sound."));
    layout->addWidget(makeEmptyState(tr("No model loaded"),
        tr("Generating from this window arrives in the next version. LTX-2 and LTX-2.3 video with sound already "
           "runs from the command line: vireo-cli generate --model PATH --prompt TEXT --out clip.mp4")), 1);
}

GalleryPage::GalleryPage(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(28, 24, 28, 24);
    addPageHeader(layout, tr("Gallery"), tr("Every output, with playback and the recipe that made it."));
    layout->addWidget(makeEmptyState(tr("Nothing generated yet"),
        tr("Images and videos you generate will be listed here with their full recipe.")), 1);
}

} // namespace vireo::ui
