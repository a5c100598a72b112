// vireo: the studio window. Wires logging, theme and the main window; nothing else.
#include "core/util/logging.h"
#include "inference/util/heap.h"
#include "ui/mainwindow.h"
#include "ui/pages/modelspage.h"
#include "ui/theme.h"
#include "core/studio/studio.h"

#include <QMessageBox>

#include <QApplication>
#include <QCommandLineParser>

#include <spdlog/spdlog.h>

int main(int argc, char** argv)
{
    vireo::heap::keepLargeAllocationsInTheHeap();
    // Playback through the FFmpeg libraries the studio already depends on: Qt's GStreamer
    // backend crashes when GStreamer's plugin packages are missing.
    if (qEnvironmentVariableIsEmpty("QT_MEDIA_BACKEND"))
        qputenv("QT_MEDIA_BACKEND", "ffmpeg");
    QApplication app(argc, argv);
    QApplication::setApplicationName(QStringLiteral("vireo"));
    QApplication::setApplicationDisplayName(QStringLiteral("Vireo Studio"));
    QApplication::setOrganizationName(QStringLiteral("Vireo"));
    QApplication::setApplicationVersion(QStringLiteral(VIREO_VERSION));
    QApplication::setDesktopFileName(QStringLiteral("studio.vireo.Vireo"));

    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Vireo Studio: local image and video generation"));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addPositionalArgument(QStringLiteral("model"), QStringLiteral("A model file or folder to open on the Models page"),
        QStringLiteral("[model]"));
    parser.process(app);

    const QString logs = vireo::core::initLogging(QStringLiteral("vireo"));
    spdlog::info("Vireo Studio {} starting; logs in {}", VIREO_VERSION, logs.toStdString());

    vireo::ui::applyStudioTheme(app);
    // The composition root: the services every front end uses, then the window over them.
    auto studio = vireo::core::Studio::create();
    if (!studio) {
        spdlog::critical("the built-in model catalog is damaged: {}", studio.error().message);
        QMessageBox::critical(nullptr, QStringLiteral("Vireo Studio"),
            QStringLiteral("The built-in model catalog is damaged (%1). Reinstall Vireo Studio.").arg(QString::fromStdString(studio.error().message)));
        return 1;
    }
    vireo::ui::MainWindow window(studio->get());
    if (!parser.positionalArguments().isEmpty()) {
        window.showPage(vireo::ui::MainWindow::Page::Models);
        window.modelsPage()->openPath(parser.positionalArguments().constFirst());
    }
    window.show();
    return QApplication::exec();
}
