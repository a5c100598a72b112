#include "core/studio/studio.h"

#include "core/batch/batch.h"
#include "core/gallery/gallery.h"
#include "core/hub/cachemanager.h"
#include "core/hub/downloadmanager.h"
#include "core/output/outputfile.h"
#include "core/remote/remotejobs.h"
#include "core/runtime/devicepool.h"
#include "core/runtime/engine.h"
#include "core/runtime/modelresolver.h"
#include "core/settings/studiosettings.h"

#include <QCoreApplication>
#include <QDir>
#include <QStandardPaths>

#include <algorithm>

#include <spdlog/spdlog.h>

namespace vireo::core {

Result<std::unique_ptr<Studio>> Studio::create(Options options, QObject* parent)
{
    auto catalog = catalog::Catalog::loadBuiltin();
    if (!catalog)
        return catalog.error();
    return std::unique_ptr<Studio>(new Studio(std::move(*catalog), options, parent));
}

Studio::Studio(catalog::Catalog catalog, Options options, QObject* parent) : QObject(parent), m_options(options)
{
    m_settings = new StudioSettings(this);
    // Without a window nothing shows or resumes the unfinished downloads: they stay as saved.
    m_downloads = new hub::DownloadManager(m_settings, std::move(catalog), this, !m_options.headless);
    m_models = new runtime::ModelResolver(m_downloads, m_settings, this);
    // Files any engine reads (loaded, loading or queued) are never deleted from the cache.
    m_cache = new hub::CacheManager(
        m_downloads,
        [this] {
            QStringList files;
            for (const auto& [_, e] : m_engines)
                files += e->filesInUse();
            return files;
        },
        this);
    // A window or server killed while it wrote a video left a hidden part file there.
    if (!m_options.headless || m_options.listGallery)
        output::removeStalePartials(m_settings->outputsFolder().toStdString());
    m_gallery = new gallery::Gallery(galleryDatabaseFile(), m_settings->outputsFolder(), this);
    // Batch folders (vireo-cli batch) are watched until every task has its marker.
    m_gallery->setWatch({[settings = m_settings] { return settings->watchedFolders(); },
        [](const QString& folder) {
            const auto tasks = batch::status(folder.toStdString());
            return tasks && std::all_of(tasks->begin(), tasks->end(), [](const batch::TaskState& t) { return t.done; });
        },
        [settings = m_settings](const QString& folder) { settings->removeWatchedFolder(folder); }});
    QString error;
    const bool opened = !m_options.recordOutputs       ? true
        : m_options.headless && !m_options.listGallery ? m_gallery->openForRecording(&error)
                                                       : m_gallery->open(&error);
    if (!opened) {
        m_galleryError = error;
        spdlog::error("gallery: {}", error.toStdString());  // the Gallery page shows it too
    }
    connect(m_settings, &StudioSettings::changed, this, [this] {
        const auto folder = m_settings->outputsFolder();
        if (folder != m_gallery->outputsFolder()) {
            m_gallery->setOutputsFolder(folder);
            m_gallery->rescan();
        }
    });
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
    return defaultDataFolder();
}

QString Studio::defaultDataFolder()
{
    const auto folder = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    QDir().mkpath(folder);
    return folder;
}

QString Studio::galleryDatabaseFile()
{
    return QDir(defaultDataFolder()).filePath(QStringLiteral("gallery.sqlite"));
}

runtime::DevicePool* Studio::devicePool()
{
    if (!m_pool)
        m_pool =
            new runtime::DevicePool({runtime::DevicePool::machineSlots, [this](const QString& device) { return engine(device); }}, this);
    return m_pool;
}

remote::RemoteJobs* Studio::remoteJobs()
{
    if (m_remote)
        return m_remote;
    m_remote = new remote::RemoteJobs(
        [settings = m_settings] {
            std::vector<remote::Host> hosts;
            for (const auto& h : settings->remoteHosts())
                hosts.push_back({h.name.toStdString(), h.url.toStdString(), h.token.toStdString()});
            return hosts;
        },
        this);
    connect(m_remote, &remote::RemoteJobs::jobFinished, this, [this](quint64 id) {
        const auto job = m_remote->job(id);
        if (job && job->state == runtime::JobState::Done && !job->outputPath.isEmpty() && m_gallery->isOpen())
            if (auto added = m_gallery->add(job->outputPath, job->recipe); !added)
                emit outputNotRecorded(job->outputPath, QString::fromStdString(added.error().message));
    });
    return m_remote;
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
    connect(e, &runtime::Engine::jobFinished, this, [this, e](quint64 id) {
        const auto job = e->job(id);
        if (job && job->kind == runtime::JobKind::Generate && job->state == runtime::JobState::Done && !job->outputPath.isEmpty()
            && m_gallery->isOpen())
            // A row that cannot be written is reported by the gallery (problem); the file stays.
            if (auto added = m_gallery->add(job->outputPath, job->recipe); !added)
                emit outputNotRecorded(job->outputPath, QString::fromStdString(added.error().message));
    });
    return e;
}

}  // namespace vireo::core
