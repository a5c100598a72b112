#include "core/util/logging.h"

#include "inference/util/log.h"

#include <QDir>
#include <QFile>
#include <QStandardPaths>

#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace vireo::core {

namespace {

void qtMessageToSpdlog(QtMsgType type, const QMessageLogContext&, const QString& message)
{
    const auto text = message.toStdString();
    switch (type) {
    case QtDebugMsg: spdlog::debug("qt: {}", text); break;
    case QtInfoMsg: spdlog::info("qt: {}", text); break;
    case QtWarningMsg: spdlog::warn("qt: {}", text); break;
    case QtCriticalMsg: spdlog::error("qt: {}", text); break;
    case QtFatalMsg: spdlog::critical("qt: {}", text); break;
    }
}

}  // namespace

QString logDirectory()
{
    return QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation) + QStringLiteral("/logs");
}

QString initLogging(const QString& appName)
{
    const QString dir = logDirectory();
    QDir().mkpath(dir);
    QFile::setPermissions(dir, QFileDevice::ReadOwner | QFileDevice::WriteOwner | QFileDevice::ExeOwner);
    const QString file = dir + QLatin1Char('/') + appName + QStringLiteral(".log");
    std::vector<spdlog::sink_ptr> sinks;
    sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    try {
        sinks.push_back(std::make_shared<spdlog::sinks::rotating_file_sink_mt>(file.toStdString(), 8u << 20, 3));
        QFile::setPermissions(file, QFileDevice::ReadOwner | QFileDevice::WriteOwner);
    } catch (const spdlog::spdlog_ex& e) {
        spdlog::warn("cannot write the log file {}: {}", file.toStdString(), e.what());
    }
    auto logger = std::make_shared<spdlog::logger>(appName.toStdString(), sinks.begin(), sinks.end());
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ [%t] %v");
    logger->flush_on(spdlog::level::warn);
    spdlog::set_default_logger(logger);
    qInstallMessageHandler(qtMessageToSpdlog);
    vireo::log::setSink([](vireo::log::Level level, const std::string& message) {
        switch (level) {
        case vireo::log::Level::Debug: spdlog::debug("inference: {}", message); break;
        case vireo::log::Level::Info: spdlog::info("inference: {}", message); break;
        case vireo::log::Level::Warn: spdlog::warn("inference: {}", message); break;
        case vireo::log::Level::Error: spdlog::error("inference: {}", message); break;
        }
    });
    return dir;
}

void initCommandLineLogging(bool info)
{
    auto logger = spdlog::stderr_color_mt("vireo-cli");
    logger->set_level(info ? spdlog::level::info : spdlog::level::warn);
    spdlog::set_default_logger(logger);
}

}  // namespace vireo::core
