#include "core/studio/studio.h"

#include "core/hub/cachemanager.h"
#include "core/hub/downloadmanager.h"
#include "core/runtime/engine.h"
#include "core/runtime/modelresolver.h"
#include "core/settings/studiosettings.h"

#include <QCoreApplication>
#include <QDir>
#include <QStandardPaths>

namespace vireo::core {

Result<std::unique_ptr<Studio>> Studio::create(QObject* parent)
{
    auto catalog = catalog::Catalog::loadBuiltin();
    if (!catalog)
        return catalog.error();
    return std::unique_ptr<Studio>(new Studio(std::move(*catalog), parent));
}

Studio::Studio(catalog::Catalog catalog, QObject* parent) : QObject(parent)
{
    m_settings = new StudioSettings(this);
    m_downloads = new hub::DownloadManager(m_settings, std::move(catalog), this);
    m_models = new runtime::ModelResolver(m_downloads, m_settings, this);
    // Files any engine reads (loaded, loading or queued) are never deleted from the cache.
    m_cache = new hub::CacheManager(m_downloads, [this] {
        QStringList files;
        for (const auto& [_, e] : m_engines)
            files += e->filesInUse();
        return files;
    }, this);
}

Studio::~Studio()
{
    // Engines first: their threads may still report to the other services.
    for (auto& [_, e] : m_engines)
        delete e;
    m_engines.clear();
}

QString Studio::dataFolder() const
{
    const auto folder = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    QDir().mkpath(folder);
    return folder;
}

runtime::Engine* Studio::engine(const QString& deviceIn)
{
    const auto device = deviceIn.isEmpty() ? m_settings->resolvedComputeDevice() : deviceIn;
    if (const auto it = m_engines.find(device); it != m_engines.end())
        return it->second;
    runtime::Engine::Options o;
    o.device = device;
    o.etaFile = QDir(dataFolder()).filePath(QStringLiteral("run-times.json"));
    o.repoTrusted = [models = m_models](const QString& repo) { return models->trusted(repo); };
    o.appName = QStringLiteral("vireo-studio ") + QCoreApplication::applicationVersion();
    auto* e = new runtime::Engine(std::move(o));
    m_engines[device] = e;
    return e;
}

} // namespace vireo::core
