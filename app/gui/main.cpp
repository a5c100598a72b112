// vireo: the studio window. Wires logging, theme and the main window; nothing else.
#include "core/util/logging.h"
#include "inference/util/heap.h"
#include "ui/mainwindow.h"
#include "ui/pages/modelspage.h"
#include "ui/theme.h"

#include <QApplication>
#include <QCommandLineParser>

#include <spdlog/spdlog.h>

int main(int argc, char** argv)
{
    vireo::heap::keepLargeAllocationsInTheHeap();
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
    vireo::ui::MainWindow window;
    if (!parser.positionalArguments().isEmpty()) {
        window.showPage(vireo::ui::MainWindow::Page::Models);
        window.modelsPage()->openPath(parser.positionalArguments().constFirst());
    }
    window.show();
    return QApplication::exec();
}
