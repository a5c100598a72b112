#pragma once

// What the studio's models take on disk and how to get it back: sizes per repo and per
// catalog variant (a blob two variants share counts once, and is kept while another installed
// variant still uses it), deleting a variant or a whole repo, and cleaning up stale partial
// and rejected files. Every deletion is planned first (what goes, what it frees, what stays
// and why) and checked again right before it runs; nothing in use is touched (a model that is
// loaded, loading or queued, or a repo that is downloading).

#include <QObject>
#include <QString>
#include <QStringList>

#include <functional>

namespace vireo::hub {

class DownloadManager;

struct RepoUsage {
    QString repo;
    qint64 bytes = 0;  // its blobs, each once
    int files = 0;  // snapshot entries
    int snapshots = 0;
    QStringList variants;  // installed catalog variants that read from it
};

struct VariantUsage {
    QString id;  // "ltx-2.3/distilled-fp8"
    QString title;
    qint64 bytes = 0;  // every file it reads
    qint64 ownBytes = 0;  // what deleting it would free (not shared with another installed model)
};

struct CachePlan {
    QString what;  // for the user: "LTX-2.3 · Distilled · fp8", "repo org/name", "stale partial files"
    QStringList remove;  // absolute paths inside the cache, removed in this order
    qint64 freedBytes = 0;
    QStringList kept;  // what stays and why ("text_encoder/… is also used by LTX-2 · Distilled · bf16")
    QStringList blockers;  // why it cannot run now (in use); empty: it can
    QStringList forgetKeys;  // download tasks and finished-download records it drops
    bool empty() const { return remove.isEmpty() && forgetKeys.isEmpty(); }
};

class CacheManager : public QObject {
    Q_OBJECT
public:
    // inUse: absolute paths of the files models in use read (loaded, loading or queued).
    CacheManager(DownloadManager* downloads, std::function<QStringList()> inUse, QObject* parent = nullptr);

    QList<RepoUsage> repos() const;
    QList<VariantUsage> variants() const;  // installed catalog variants

    CachePlan planDeleteVariant(const QString& id) const;
    CachePlan planDeleteRepo(const QString& repo) const;
    // Vireo partial files no download task would resume, files that failed verification, and
    // huggingface_hub's own `.incomplete` leftovers older than a day.
    CachePlan planCleanup() const;
    // Checks the plan again (in use now? still inside the cache?) and runs it; returns the
    // bytes freed, or -1 with the reason in *error.
    qint64 execute(const CachePlan& plan, QString* error = nullptr);

signals:
    void changed();

private:
    QStringList blockersFor(const QStringList& paths, const QStringList& repos) const;

    DownloadManager* m_downloads;
    std::function<QStringList()> m_inUse;
};

}  // namespace vireo::hub
