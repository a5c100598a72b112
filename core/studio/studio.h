#pragma once

// Everything the studio is made of, built once and handed to each front end: the window, the
// CLI and a later local API use the same settings, catalog, downloads, models and engines
// (qBittorrent's Application plays this part for its GUI and WebUI). Widgets never construct
// services.

#include "core/catalog/catalog.h"
#include "inference/util/result.h"

#include <QObject>
#include <QString>

#include <map>
#include <memory>

namespace vireo::hub {
class CacheManager;
class DownloadManager;
}  // namespace vireo::hub
namespace vireo::gallery {
class Gallery;
}
namespace vireo::remote {
class RemoteJobs;
}
namespace vireo::runtime {
class DevicePool;
class Engine;
class ModelResolver;
}  // namespace vireo::runtime

namespace vireo::core {

class StudioSettings;

class Studio : public QObject {
    Q_OBJECT
public:
    struct Options {
        // A front end without a window (vireo-cli): the gallery only records outputs (no scan of
        // the outputs folder, no watching), and `recordOutputs` false records none (--no-gallery).
        bool headless = false;
        bool recordOutputs = true;
        // A headless front end that lists the gallery as the window does (vireo-cli serve): the
        // outputs folder is scanned and other writers are noticed.
        bool listGallery = false;
    };
    // Fails only when the built-in catalog is damaged (a packaging defect).
    static Result<std::unique_ptr<Studio>> create(QObject* parent = nullptr) { return create(Options{}, parent); }
    static Result<std::unique_ptr<Studio>> create(Options options, QObject* parent = nullptr);
    ~Studio() override;

    StudioSettings* settings() const { return m_settings; }
    hub::DownloadManager* downloads() const { return m_downloads; }
    runtime::ModelResolver* models() const { return m_models; }
    hub::CacheManager* cache() const { return m_cache; }
    // Every output kept: finished generations of every engine are added as they land.
    gallery::Gallery* gallery() const { return m_gallery; }
    // The engine of a device ("cpu", "cuda:0"; empty: the settings' device), created on first use.
    runtime::Engine* engine(const QString& device = {});
    // Every device's engine behind one submit: a job goes where its memory plan fits (the GPU
    // holding its model, then the shortest queue) or where it is pinned. Created on first use.
    runtime::DevicePool* devicePool();
    // Jobs on other machines' Vireo servers (Settings → Hosts) and what each host said of itself
    // at the last look. Created on first use; a finished job's output is added to the gallery.
    remote::RemoteJobs* remoteJobs();
    // Where the studio keeps its own data (remembered run times, the gallery).
    QString dataFolder() const;
    static QString defaultDataFolder();
    // The gallery database both the studio and vireo-cli generate record into.
    static QString galleryDatabaseFile();
    // Why the gallery could not be opened; empty when it is open (or not wanted).
    QString galleryError() const { return m_galleryError; }

signals:
    // A finished output that could not be listed in the gallery; the file itself is done.
    void outputNotRecorded(const QString& path, const QString& reason);

private:
    Studio(catalog::Catalog catalog, Options options, QObject* parent);

    Options m_options;
    QString m_galleryError;
    StudioSettings* m_settings = nullptr;
    hub::DownloadManager* m_downloads = nullptr;
    runtime::ModelResolver* m_models = nullptr;
    hub::CacheManager* m_cache = nullptr;
    gallery::Gallery* m_gallery = nullptr;
    std::map<QString, runtime::Engine*> m_engines;
    runtime::DevicePool* m_pool = nullptr;
    remote::RemoteJobs* m_remote = nullptr;
};

}  // namespace vireo::core
