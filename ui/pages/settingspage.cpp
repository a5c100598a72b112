#include "ui/pages/settingspage.h"

#include "core/hub/hubpaths.h"
#include "core/util/logging.h"
#include "ui/pages/pagehelpers.h"

#include <QDesktopServices>
#include <QFileInfo>
#include <QFormLayout>
#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QUrl>
#include <QVBoxLayout>

namespace vireo::ui {

namespace {

QLabel* valueLabel(const QString& text, const QString& tip)
{
    auto* label = new QLabel(text);
    label->setTextInteractionFlags(Qt::TextSelectableByMouse);
    label->setToolTip(tip);
    label->setWordWrap(true);
    return label;
}

QWidget* pathRow(const QString& path, const QString& tip)
{
    auto* row = new QWidget;
    auto* layout = new QHBoxLayout(row);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addWidget(valueLabel(path, tip), 1);
    auto* open = new QPushButton(QObject::tr("Open"));
    open->setToolTip(QObject::tr("Show this folder in the file manager"));
    open->setEnabled(QFileInfo(path).isDir());
    QObject::connect(open, &QPushButton::clicked, row, [path]() { QDesktopServices::openUrl(QUrl::fromLocalFile(path)); });
    layout->addWidget(open);
    return row;
}

} // namespace

SettingsPage::SettingsPage(QWidget* parent) : QWidget(parent)
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(28, 24, 28, 24);
    addPageHeader(layout, tr("Settings"),
        tr("Shown as resolved from the environment, the way huggingface_hub resolves them, so Vireo and Python "
           "tools share one cache. Editing them here is not available in this version."));

    const auto hub = core::HubPaths::fromEnvironment();
    auto* card = new QFrame;
    card->setObjectName(QStringLiteral("card"));
    auto* form = new QFormLayout(card);
    form->setContentsMargins(18, 16, 18, 16);
    form->setHorizontalSpacing(24);
    form->setVerticalSpacing(12);
    const QString source = hub.cacheDirSource == QStringLiteral("default") ? tr("default location")
                                                                           : tr("from %1").arg(hub.cacheDirSource);
    form->addRow(tr("Model cache"), pathRow(hub.cacheDir, tr("huggingface_hub cache folder (%1)").arg(source)));
    form->addRow(tr("Hub endpoint"), valueLabel(hub.endpoint, tr("HF_ENDPOINT, or the public Hub")));
    const bool tokenFile = QFileInfo::exists(hub.tokenPath);
    const bool tokenEnv = qEnvironmentVariableIsSet("HF_TOKEN") || qEnvironmentVariableIsSet("HUGGING_FACE_HUB_TOKEN");
    form->addRow(tr("Access token"),
        valueLabel(tokenEnv ? tr("set in the environment (HF_TOKEN)")
                : tokenFile ? tr("stored in %1").arg(hub.tokenPath)
                            : tr("none; gated models will need one"),
            tr("The token itself is never shown or logged")));
    form->addRow(tr("Offline mode"),
        valueLabel(hub.offline ? tr("on (HF_HUB_OFFLINE)") : tr("off"), tr("When on, nothing is fetched from the network")));
    form->addRow(tr("Logs"), pathRow(core::logDirectory(), tr("Rotating log files, readable only by you")));
    layout->addWidget(card);
    layout->addStretch(1);
}

} // namespace vireo::ui
