#include "core/hub/cachemanager.h"

#include "core/hub/downloadmanager.h"
#include "core/hub/hfcache.h"
#include "inference/util/format.h"

#include <QDateTime>
#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>

#include <map>
#include <set>

namespace vireo::hub {

namespace {

QString q(const std::string& s)
{
    return QString::fromStdString(s);
}

// One repo folder of the cache as it is on disk: regular blob files and the snapshot links
// that point at them. Links that leave the repo's blobs/ are ignored (never followed).
struct RepoScan {
    QString repo;
    QString dir;
    std::map<QString, qint64> blobs;  // blob name -> bytes
    std::map<QString, QString> links;  // absolute link path -> blob name
    std::map<QString, QStringList> linksOfBlob;  // blob name -> its links
    int snapshots = 0;
};

RepoScan scanRepo(const QString& repo, const QString& dir)
{
    RepoScan s;
    s.repo = repo;
    s.dir = dir;
    const QString blobsDir = QDir(dir).filePath(QStringLiteral("blobs"));
    QDirIterator blobs(blobsDir, QDir::Files | QDir::Hidden | QDir::System);
    while (blobs.hasNext()) {
        const QFileInfo info(blobs.next());
        if (!info.isSymLink() && info.isFile() && !info.fileName().endsWith(QStringLiteral(".incomplete")))
            s.blobs[info.fileName()] = info.size();
    }
    const QString snapshotsDir = QDir(dir).filePath(QStringLiteral("snapshots"));
    s.snapshots = static_cast<int>(QDir(snapshotsDir).entryList(QDir::Dirs | QDir::NoDotAndDotDot).size());
    QDirIterator links(snapshotsDir, QDir::Files | QDir::System | QDir::Hidden, QDirIterator::Subdirectories);
    const QString canonicalBlobs = QFileInfo(blobsDir).canonicalFilePath();
    while (links.hasNext()) {
        const QFileInfo info(links.next());
        if (!info.isSymLink())
            continue;
        const QFileInfo target(info.symLinkTarget());
        if (target.absolutePath() != canonicalBlobs && target.absolutePath() != blobsDir)
            continue;
        s.links[info.absoluteFilePath()] = target.fileName();
        s.linksOfBlob[target.fileName()].append(info.absoluteFilePath());
    }
    return s;
}

}  // namespace

CacheManager::CacheManager(DownloadManager* downloads, std::function<QStringList()> inUse, QObject* parent)
    : QObject(parent), m_downloads(downloads), m_inUse(std::move(inUse))
{
}

QList<RepoUsage> CacheManager::repos() const
{
    QList<RepoUsage> out;
    const auto variants = this->variants();
    for (const auto& r : m_downloads->scanCache()) {
        auto dir = m_downloads->hfCache()->repoDir(r.repo.toStdString());
        if (!dir)
            continue;
        const auto scan = scanRepo(r.repo, q(dir->string()));
        RepoUsage u;
        u.repo = r.repo;
        for (const auto& [_, bytes] : scan.blobs)
            u.bytes += bytes;
        u.files = static_cast<int>(scan.links.size());
        u.snapshots = scan.snapshots;
        for (const auto& v : variants)
            if (const auto* variant = m_downloads->catalog().find(v.id.toStdString()))
                for (const auto& s : variant->sources)
                    if (q(s.repo) == r.repo && !u.variants.contains(v.title))
                        u.variants << v.title;
        out.append(u);
    }
    return out;
}

QList<VariantUsage> CacheManager::variants() const
{
    QList<VariantUsage> out;
    const auto& catalog = m_downloads->catalog();
    // Which installed model uses each blob: a blob used by two counts for neither's own bytes.
    std::map<std::pair<std::string, std::string>, int> users;  // (repo, etag) -> installed models using it
    struct Installed {
        QString id, title;
        std::vector<DownloadManager::ReadySource> sources;
    };
    std::vector<Installed> installed;
    for (const auto& family : catalog.families)
        for (const auto& v : family.variants) {
            const QString id = q(family.id + "/" + v.id);
            if (auto ready = m_downloads->readyFiles(QStringLiteral("catalog:") + id))
                installed.push_back({id, q(family.name + " · " + v.name), std::move(*ready)});
        }
    for (const auto& i : installed) {
        std::set<std::pair<std::string, std::string>> mine;
        for (const auto& s : i.sources)
            for (const auto& f : s.files)
                mine.insert({s.repo, f.etag()});
        for (const auto& key : mine)
            ++users[key];
    }
    for (const auto& i : installed) {
        VariantUsage u{i.id, i.title, 0, 0};
        std::set<std::pair<std::string, std::string>> seen;
        for (const auto& s : i.sources)
            for (const auto& f : s.files) {
                if (!seen.insert({s.repo, f.etag()}).second)
                    continue;
                u.bytes += static_cast<qint64>(f.size);
                if (users[{s.repo, f.etag()}] == 1)
                    u.ownBytes += static_cast<qint64>(f.size);
            }
        out.append(u);
    }
    return out;
}

QStringList CacheManager::blockersFor(const QStringList& paths, const QStringList& repos) const
{
    QStringList blockers;
    const auto used = m_inUse ? m_inUse() : QStringList{};
    for (const auto& p : paths) {
        const auto canonical = QFileInfo(p).canonicalFilePath();
        for (const auto& u : used) {
            const auto cu = QFileInfo(u).canonicalFilePath();
            // A model folder in use covers every file under it.
            if (!cu.isEmpty()
                && (canonical == cu || canonical.startsWith(cu + QLatin1Char('/')) || p == u || p.startsWith(u + QLatin1Char('/')))) {
                blockers
                    << tr("%1 is in use by a loaded or queued model: unload it (or wait for its jobs) first").arg(QFileInfo(p).fileName());
                break;
            }
        }
        if (blockers.size() > 3)
            break;
    }
    for (const auto* t : m_downloads->tasks()) {
        if (!t->busy())
            continue;
        for (const auto& s : t->spec().sources)
            if (repos.contains(q(s.repo)))
                blockers << tr("%1 is downloading: cancel the download or let it finish first").arg(q(s.repo));
    }
    blockers.removeDuplicates();
    return blockers;
}

CachePlan CacheManager::planDeleteVariant(const QString& id) const
{
    CachePlan plan;
    const QString key = QStringLiteral("catalog:") + id;
    const auto* variant = m_downloads->catalog().find(id.toStdString());
    const auto ready = m_downloads->readyFiles(key);
    plan.what = id;
    if (variant)
        if (const auto* f = m_downloads->catalog().family(id.section(QLatin1Char('/'), 0, 0).toStdString()))
            plan.what = q(f->name + " · " + variant->name);
    if (!ready) {
        plan.blockers << tr("%1 is not complete in the cache; delete its repo instead, or clean up partial files").arg(plan.what);
        return plan;
    }
    // What every other installed model reads: those links and blobs stay.
    std::set<QString> keepLinks;
    std::map<std::pair<std::string, std::string>, QString> keepBlobs;  // (repo, etag) -> who uses it
    for (const auto& family : m_downloads->catalog().families)
        for (const auto& v : family.variants) {
            const QString other = q(family.id + "/" + v.id);
            if (other == id)
                continue;
            if (auto r = m_downloads->readyFiles(QStringLiteral("catalog:") + other))
                for (const auto& s : *r)
                    for (const auto& f : s.files) {
                        keepBlobs[{s.repo, f.etag()}] = q(family.name + " · " + v.name);
                        if (auto p = m_downloads->hfCache()->snapshotPath(s.repo, s.commit, f.path))
                            keepLinks.insert(q(p->string()));
                    }
        }
    for (const auto* t : m_downloads->tasks())
        if (t->spec().catalogId.isEmpty())
            if (auto r = m_downloads->readyFiles(t->spec().key))
                for (const auto& s : *r)
                    for (const auto& f : s.files) {
                        keepBlobs[{s.repo, f.etag()}] = t->spec().title;
                        if (auto p = m_downloads->hfCache()->snapshotPath(s.repo, s.commit, f.path))
                            keepLinks.insert(q(p->string()));
                    }
    QStringList repos;
    for (const auto& s : *ready) {
        repos << q(s.repo);
        auto dir = m_downloads->hfCache()->repoDir(s.repo);
        if (!dir)
            continue;
        auto scan = scanRepo(q(s.repo), q(dir->string()));
        for (const auto& f : s.files) {
            auto link = m_downloads->hfCache()->snapshotPath(s.repo, s.commit, f.path);
            if (!link)
                continue;
            const auto linkPath = QFileInfo(q(link->string())).absoluteFilePath();
            const auto who = keepBlobs.find({s.repo, f.etag()});
            if (who != keepBlobs.end()) {
                plan.kept << tr("%1 (also used by %2)").arg(q(f.path), who->second);
                if (!keepLinks.count(linkPath) && scan.links.count(linkPath))
                    plan.remove << linkPath;
                continue;
            }
            if (scan.links.count(linkPath) && !keepLinks.count(linkPath))
                plan.remove << linkPath;
            // The blob goes when no link would be left pointing at it.
            const QString blob = q(f.etag());
            bool otherLink = false;
            for (const auto& l : scan.linksOfBlob[blob])
                if (l != linkPath && !plan.remove.contains(l))
                    otherLink = true;
            if (!otherLink && scan.blobs.count(blob) && !plan.remove.contains(QDir(scan.dir).filePath(QStringLiteral("blobs/") + blob))) {
                plan.remove << QDir(scan.dir).filePath(QStringLiteral("blobs/") + blob);
                plan.freedBytes += scan.blobs[blob];
            } else if (otherLink) {
                plan.kept << tr("%1 (another snapshot of %2 links to it)").arg(q(f.path), q(s.repo));
            }
        }
    }
    plan.forgetKeys << key;
    plan.blockers = blockersFor(plan.remove, repos);
    return plan;
}

CachePlan CacheManager::planDeleteRepo(const QString& repo) const
{
    CachePlan plan;
    plan.what = tr("repo %1").arg(repo);
    auto dir = m_downloads->hfCache()->repoDir(repo.toStdString());
    if (!dir) {
        plan.blockers << q(dir.error().message);
        return plan;
    }
    const QString d = q(dir->string());
    if (!QFileInfo(d).isDir() || QFileInfo(d).isSymLink()) {
        plan.blockers << tr("%1 is not in the cache").arg(repo);
        return plan;
    }
    // Deepest first, so folders are empty when their turn comes; links are removed as links.
    QStringList files, folders;
    QDirIterator it(d, QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QFileInfo info(it.next());
        if (info.isDir() && !info.isSymLink())
            folders << info.absoluteFilePath();
        else {
            files << info.absoluteFilePath();
            if (!info.isSymLink())
                plan.freedBytes += info.size();
        }
    }
    std::sort(folders.begin(), folders.end(),
        [](const QString& a, const QString& b) { return a.count(QLatin1Char('/')) > b.count(QLatin1Char('/')); });
    plan.remove = files + folders + QStringList{d};
    for (const auto& v : variants())
        if (const auto* variant = m_downloads->catalog().find(v.id.toStdString()))
            for (const auto& s : variant->sources)
                if (q(s.repo) == repo) {
                    plan.forgetKeys << QStringLiteral("catalog:") + v.id;
                    plan.kept << tr("%1 will no longer be ready (it reads from this repo)").arg(v.title);
                }
    for (const auto* t : m_downloads->tasks())
        for (const auto& s : t->spec().sources)
            if (q(s.repo) == repo && t->spec().catalogId.isEmpty())
                plan.forgetKeys << t->spec().key;
    plan.forgetKeys.removeDuplicates();
    plan.kept.removeDuplicates();
    plan.blockers = blockersFor({d}, {repo});
    return plan;
}

CachePlan CacheManager::planCleanup() const
{
    CachePlan plan;
    plan.what = tr("stale partial and rejected files");
    QSet<QString> reposWithTasks;
    for (const auto* t : m_downloads->tasks())
        for (const auto& s : t->spec().sources)
            reposWithTasks.insert(q(s.repo));
    const auto now = QDateTime::currentDateTimeUtc();
    QStringList repos;
    for (const auto& r : m_downloads->scanCache()) {
        auto dir = m_downloads->hfCache()->repoDir(r.repo.toStdString());
        if (!dir)
            continue;
        const QString d = q(dir->string());
        const auto scan = scanRepo(r.repo, d);
        QDirIterator parts(QDir(d).filePath(QStringLiteral(".vireo-partial")), QDir::Files | QDir::Hidden | QDir::System);
        while (parts.hasNext()) {
            const QFileInfo info(parts.next());
            if (info.isSymLink())
                continue;  // never ours: the downloader refuses to write through one
            const auto name = info.fileName();
            QString reason;
            if (name.endsWith(QStringLiteral(".rejected"))) {
                reason = tr("failed verification");
            } else if (name.endsWith(QStringLiteral(".part"))) {
                const auto etag = name.chopped(5);
                if (scan.blobs.count(etag))
                    reason = tr("its file is complete in the cache");
                else if (!reposWithTasks.contains(r.repo))
                    reason = tr("no download of %1 would resume it").arg(r.repo);
                else if (info.lastModified().toUTC().daysTo(now) > 30)
                    reason = tr("untouched for over 30 days");
            } else if (name.endsWith(QStringLiteral(".part.json"))) {
                if (!QFileInfo::exists(info.absoluteFilePath().chopped(5)))
                    reason = tr("its partial file is gone");
            }
            if (reason.isEmpty())
                continue;
            plan.remove << info.absoluteFilePath();
            plan.freedBytes += info.size();
            plan.kept << tr("%1: %2").arg(name, reason);  // listed for the user as what goes and why
            repos << r.repo;
        }
        QDirIterator incomplete(QDir(d).filePath(QStringLiteral("blobs")), {QStringLiteral("*.incomplete")}, QDir::Files | QDir::Hidden);
        while (incomplete.hasNext()) {
            const QFileInfo info(incomplete.next());
            if (info.isSymLink() || info.lastModified().toUTC().secsTo(now) < 24 * 3600)
                continue;  // a Python download may still be writing it
            plan.remove << info.absoluteFilePath();
            plan.freedBytes += info.size();
            plan.kept << tr("%1: huggingface_hub leftover, untouched for a day").arg(info.fileName());
            repos << r.repo;
        }
    }
    repos.removeDuplicates();
    plan.blockers = blockersFor({}, repos);
    return plan;
}

qint64 CacheManager::execute(const CachePlan& plan, QString* error)
{
    auto fail = [&](const QString& why) {
        if (error)
            *error = why;
        return qint64(-1);
    };
    if (!plan.blockers.isEmpty())
        return fail(plan.blockers.join(QLatin1Char('\n')));
    // Again, right before: a model may have been loaded or a download started since the plan.
    QStringList repos;
    for (const auto& r : m_downloads->scanCache())
        repos << r.repo;
    const auto now = blockersFor(plan.remove, repos);
    if (!now.isEmpty())
        return fail(now.join(QLatin1Char('\n')));
    const QString rootCanonical = QFileInfo(QString::fromStdString(m_downloads->hfCache()->root().string())).canonicalFilePath();
    if (rootCanonical.isEmpty())
        return fail(tr("the cache folder does not exist"));
    for (const auto& key : plan.forgetKeys)
        m_downloads->forget(key);
    qint64 freed = 0;
    QStringList failed;
    for (const auto& path : plan.remove) {
        const QFileInfo info(path);
        // Only what lies inside the cache root, by its own path (links are never followed).
        const QString parent = QFileInfo(info.absolutePath()).canonicalFilePath();
        if (!(parent == rootCanonical || parent.startsWith(rootCanonical + QLatin1Char('/'))) || path.contains(QStringLiteral("/../"))) {
            failed << tr("%1 is outside the cache; left alone").arg(path);
            continue;
        }
        if (!info.exists() && !info.isSymLink())
            continue;
        const qint64 bytes = info.isSymLink() || info.isDir() ? 0 : info.size();
        const bool ok = info.isDir() && !info.isSymLink() ? QDir(parent).rmdir(info.fileName()) : QFile::remove(path);
        if (ok)
            freed += bytes;
        else
            failed << path;
    }
    emit changed();
    emit m_downloads->availabilityChanged();
    if (!failed.isEmpty())
        return fail(tr("could not remove %1 of %2 entries: %3")
                        .arg(failed.size())
                        .arg(plan.remove.size())
                        .arg(failed.mid(0, 5).join(QStringLiteral(", "))));
    return freed;
}

}  // namespace vireo::hub
