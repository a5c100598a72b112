// vireo: the studio window. Wires logging, theme and the main window; nothing else.
#include "base/envswitch.h"
#include "core/util/logging.h"
#include "inference/util/heap.h"
#include "ui/mainwindow.h"
#include "ui/pages/modelspage.h"
#include "ui/theme.h"
#include "core/studio/studio.h"

#include <QMessageBox>

#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QLockFile>
#include <QStandardPaths>
#include <QTimer>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace {

// Seconds since the kernel started this process, so the figure includes loading the shared
// libraries (libtorch among them) before main().
double processAgeSeconds()
{
    std::ifstream stat("/proc/self/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    std::istringstream fields(close == std::string::npos ? std::string() : text.substr(close + 2));
    std::string field;
    unsigned long long startTicks = 0;
    for (int i = 3; i <= 22 && fields >> field; ++i)
        if (i == 22)
            startTicks = std::stoull(field);
    double uptime = 0;
    std::ifstream("/proc/uptime") >> uptime;
    return uptime - static_cast<double>(startTicks) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

void nameApplication()
{
    QCoreApplication::setApplicationName(QStringLiteral("vireo"));
    QCoreApplication::setOrganizationName(QStringLiteral("Vireo"));
    QCoreApplication::setApplicationVersion(QStringLiteral(VIREO_VERSION));
}

void describeOptions(QCommandLineParser& parser, const QCommandLineOption& measureStartup)
{
    parser.setApplicationDescription(QStringLiteral("Vireo Studio: local image and video generation"));
    parser.addHelpOption();
    parser.addVersionOption();
    parser.addOption(measureStartup);
    parser.addPositionalArgument(
        QStringLiteral("model"), QStringLiteral("A model file or folder to open on the Models page"), QStringLiteral("[model]"));
}

bool asksForTextOnly(int argc, char** argv)
{
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help" || a == "-?" || a == "--help-all" || a == "-v" || a == "--version")
            return true;
    }
    return false;
}

}  // namespace

int main(int argc, char** argv)
{
    vireo::heap::keepLargeAllocationsInTheHeap();
    const QCommandLineOption measureStartup(QStringLiteral("measure-startup"),
        QStringLiteral("Print the seconds from process start to a usable window, then quit (vireo-bench startup)"));
    // --help and --version answer on a terminal without a display: no window system is opened
    // for them (QApplication aborts when there is none).
    if (asksForTextOnly(argc, argv)) {
        QCoreApplication text(argc, argv);
        nameApplication();
        QCommandLineParser parser;
        describeOptions(parser, measureStartup);
        parser.process(text);  // prints and exits
        return 0;
    }
    if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM") && qEnvironmentVariableIsEmpty("DISPLAY")
        && qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY")) {
        std::fprintf(stderr,
            "vireo: no display to open a window on (neither DISPLAY nor WAYLAND_DISPLAY is set): start it from a "
            "desktop session, or use vireo-cli on a terminal\n");
        return 1;
    }
    // Playback through the FFmpeg libraries the studio already depends on: Qt's GStreamer
    // backend crashes when GStreamer's plugin packages are missing.
    if (qEnvironmentVariableIsEmpty("QT_MEDIA_BACKEND"))
        qputenv("QT_MEDIA_BACKEND", "ffmpeg");
    QApplication app(argc, argv);
    nameApplication();
    QApplication::setApplicationDisplayName(QStringLiteral("Vireo Studio"));
    QApplication::setDesktopFileName(QStringLiteral("studio.vireo.Vireo"));

    QCommandLineParser parser;
    describeOptions(parser, measureStartup);
    parser.process(app);
    if (const auto bad = vireo::env::problems(); !bad.empty()) {
        QStringList lines;
        for (const auto& problem : bad) {
            std::fprintf(stderr, "vireo: %s\n", problem.c_str());
            lines << QString::fromStdString(problem);
        }
        QMessageBox::critical(
            nullptr, QStringLiteral("Vireo Studio"), QStringLiteral("Vireo Studio cannot start:\n\n%1").arg(lines.join(QLatin1Char('\n'))));
        return 2;
    }

    // One window per data folder: two would write the same gallery, settings and downloads.
    const QString data = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    QDir().mkpath(data);
    QLockFile instance(data + QStringLiteral("/vireo.lock"));
    instance.setStaleLockTime(0);  // stale only when its process is gone, never by age: a studio runs for days
    if (!instance.tryLock(0)) {
        qint64 pid = 0;
        QString host, name;
        instance.getLockInfo(&pid, &host, &name);
        const auto text = QStringLiteral("Vireo Studio is already running with this data folder (%1, process %2): switch to its window.")
                              .arg(data)
                              .arg(pid);
        std::fprintf(stderr, "vireo: %s\n", text.toUtf8().constData());
        if (!parser.isSet(measureStartup))
            QMessageBox::information(nullptr, QStringLiteral("Vireo Studio"), text);
        return 1;
    }

    const QString logs = vireo::core::initLogging(QStringLiteral("vireo"));
    spdlog::info("Vireo Studio {} starting; logs in {}", VIREO_VERSION, logs.toStdString());

    vireo::ui::applyStudioTheme(app);
    // The composition root: the services every front end uses, then the window over them.
    auto studio = vireo::core::Studio::create();
    if (!studio) {
        spdlog::critical("the built-in model catalog is damaged: {}", studio.error().message);
        QMessageBox::critical(nullptr, QStringLiteral("Vireo Studio"),
            QStringLiteral("The built-in model catalog is damaged (%1). Reinstall Vireo Studio.")
                .arg(QString::fromStdString(studio.error().message)));
        return 1;
    }
    vireo::ui::MainWindow window(studio->get());
    if (!parser.positionalArguments().isEmpty()) {
        window.showPage(vireo::ui::MainWindow::Page::Models);
        window.modelsPage()->openPath(parser.positionalArguments().constFirst());
    }
    window.show();
    if (parser.isSet(measureStartup)) {
        // Usable: the window is shown and the event loop has handled its first events.
        QTimer::singleShot(0, &app, [&app] {
            std::printf("startup_seconds %.4f\n", processAgeSeconds());
            std::fflush(stdout);
            app.quit();
        });
    }
    return QApplication::exec();
}
