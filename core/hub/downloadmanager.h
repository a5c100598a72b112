#pragma once

#include "core/catalog/catalog.h"
#include "core/hub/downloadtask.h"

#include <QList>
#include <QObject>
#include <QString>

namespace vireo::core {
class StudioSettings;
}

namespace vireo::hub {

// The studio's downloads: one task per model (catalog variant or typed repo), created with
// the Hub settings of the moment. Unfinished tasks are remembered across restarts and
// planned again on the next start (their partial files resume); finished ones leave a
// manifest so the model shows as ready without asking the network.
class DownloadManager : public QObject {
    Q_OBJECT
public:
    // restore: plan the unfinished downloads of the last session again (the window does; a
    // command that only reads the cache does not, and then leaves that list as it found it).
    DownloadManager(core::StudioSettings* settings, catalog::Catalog catalog, QObject* parent = nullptr, bool restore = true);
    ~DownloadManager() override;

    const catalog::Catalog& catalog() const { return m_catalog; }
    core::StudioSettings* settings() const { return m_settings; }

    QList<DownloadTask*> tasks() const { return m_tasks; }
    DownloadTask* task(const QString& key) const;
    // Creates the task (or returns the existing one) and plans it.
    DownloadTask* openVariant(const QString& familySlashVariant, QString* error = nullptr);
    DownloadTask* openRepo(const QString& repo, QString* error = nullptr);
    void removeTask(const QString& key);
    // Drops a task (unless it is busy) and the record of its finished download: the model no
    // longer shows as ready (its files were deleted).
    void forget(const QString& key);

    // A repo needs the user's approval unless its publisher is in the catalog or the user
    // approved it before.
    bool isTrusted(const std::string& repo) const;
    bool isTrusted(const DownloadTask& task) const;

    enum class Availability { NotDownloaded, InCache, Partial, Ready };
    // From the task's plan when there is one, else the manifest of a finished download
    // checked against the cache, else whether the repos have any files in the cache.
    Availability availability(const QString& familySlashVariant) const;

    // The files of a finished download, where they sit in the cache: per source (in the
    // task's source order) the repo, its commit and its files. Empty when the model is not
    // complete in the cache (a file missing or of the wrong size).
    struct ReadySource {
        std::string repo, commit;
        std::vector<RepoFile> files;
    };
    std::optional<std::vector<ReadySource>> readyFiles(const QString& taskKey) const;
    std::shared_ptr<const HfCache> hfCache() const { return cache(); }

    struct CachedRepo {
        QString repo;
        quint64 bytes = 0;
        int snapshots = 0;
    };
    // Every model repo in the huggingface_hub cache, whoever downloaded it.
    QList<CachedRepo> scanCache() const;

signals:
    void taskAdded(vireo::hub::DownloadTask* task);
    void taskRemoved(const QString& key);
    void availabilityChanged();

private:
    DownloadTask* addTask(TaskSpec spec);
    void persist() const;
    void restore();
    void rememberReady(const DownloadTask& task) const;
    bool manifestPresent(const QString& key) const;
    std::shared_ptr<const HfCache> cache() const;
    DownloadOptions downloadOptions() const;

    core::StudioSettings* m_settings;
    catalog::Catalog m_catalog;
    bool m_restored = true;  // false: the saved list of unfinished downloads is not ours to rewrite
    QList<DownloadTask*> m_tasks;
};

}  // namespace vireo::hub
