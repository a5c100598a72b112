#include "core/hub/downloadmanager.h"

#include "core/settings/studiosettings.h"

#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSettings>

namespace vireo::hub {

namespace {

const QString kTasks = QStringLiteral("downloads/tasks");
const QString kReady = QStringLiteral("downloads/ready/");

QString settingsKey(const QString& key)
{
    // QSettings treats '/' as a group separator.
    return kReady + QString::fromLatin1(key.toUtf8().toBase64(QByteArray::Base64UrlEncoding | QByteArray::OmitTrailingEquals));
}

}  // namespace

DownloadManager::DownloadManager(core::StudioSettings* settings, catalog::Catalog catalog, QObject* parent, bool restoreTasks)
    : QObject(parent), m_settings(settings), m_catalog(std::move(catalog)), m_restored(restoreTasks)
{
    if (restoreTasks)
        restore();
    // Settings take effect without a restart: the next plan or run of every task uses them.
    connect(m_settings, &core::StudioSettings::changed, this, [this] {
        const auto client = std::make_shared<const HubClient>(m_settings->hubClientOptions());
        const auto folder = cache();
        for (auto* t : m_tasks)
            t->reconfigure(client, folder, downloadOptions());
    });
}

DownloadOptions DownloadManager::downloadOptions() const
{
    DownloadOptions options;
    options.parallelFiles = m_settings->parallelDownloads();
    options.headroomBytes = m_settings->headroomBytes();
    return options;
}

DownloadManager::~DownloadManager()
{
    persist();
    // Tasks stop and join their workers before the manager goes.
    qDeleteAll(m_tasks);
    m_tasks.clear();
}

std::shared_ptr<const HfCache> DownloadManager::cache() const
{
    return std::make_shared<const HfCache>(m_settings->cacheFolder().toStdString());
}

DownloadTask* DownloadManager::task(const QString& key) const
{
    for (auto* t : m_tasks)
        if (t->spec().key == key)
            return t;
    return nullptr;
}

DownloadTask* DownloadManager::addTask(TaskSpec spec)
{
    if (auto* existing = task(spec.key))
        return existing;
    auto client = std::make_shared<const HubClient>(m_settings->hubClientOptions());
    auto* t = new DownloadTask(std::move(spec), client, cache(), downloadOptions(), this);
    m_tasks.append(t);
    connect(t, &DownloadTask::stateChanged, this, [this, t](DownloadTask::State state) {
        if (state == DownloadTask::State::Done)
            rememberReady(*t);
        persist();
        emit availabilityChanged();
    });
    persist();
    emit taskAdded(t);
    return t;
}

DownloadTask* DownloadManager::openVariant(const QString& id, QString* error)
{
    const auto* variant = m_catalog.find(id.toStdString());
    if (!variant) {
        if (error)
            *error = tr("%1 is not in the catalog").arg(id);
        return nullptr;
    }
    const auto slash = id.indexOf(QLatin1Char('/'));
    const auto* family = m_catalog.family(id.left(slash).toStdString());
    TaskSpec spec;
    spec.key = QStringLiteral("catalog:") + id;
    spec.catalogId = id;
    spec.title =
        (family ? QString::fromStdString(family->name) + QStringLiteral(" · ") : QString()) + QString::fromStdString(variant->name);
    for (const auto& s : variant->sources) {
        TaskSpec::Source src;
        src.repo = s.repo;
        src.revision = s.revision;
        src.role = s.role;
        src.rule = s.rule;
        spec.sources.push_back(std::move(src));
    }
    auto* t = addTask(std::move(spec));
    if (!t->busy() && t->state() != DownloadTask::State::Planned)
        t->plan();
    return t;
}

DownloadTask* DownloadManager::openRepo(const QString& repoText, QString* error)
{
    const auto repo = repoText.trimmed();
    static const QRegularExpression pattern(QStringLiteral("^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$"));
    if (!pattern.match(repo).hasMatch() || repo.contains(QStringLiteral(".."))) {
        if (error)
            *error = tr("'%1' is not a Hugging Face repo id; it looks like owner/name, e.g. Lightricks/LTX-2.3").arg(repo);
        return nullptr;
    }
    auto* t = addTask(TaskSpec::forRepo(repo.toStdString()));
    if (!t->busy() && t->state() != DownloadTask::State::Planned)
        t->plan();
    return t;
}

void DownloadManager::removeTask(const QString& key)
{
    auto* t = task(key);
    if (!t)
        return;
    m_tasks.removeOne(t);
    persist();
    delete t;  // cancels and joins
    emit taskRemoved(key);
    emit availabilityChanged();
}

void DownloadManager::forget(const QString& key)
{
    QSettings().remove(settingsKey(key));
    if (auto* t = task(key); t && !t->busy())
        removeTask(key);
    emit availabilityChanged();
}

bool DownloadManager::isTrusted(const std::string& repo) const
{
    return m_catalog.isTrusted(repo) || m_settings->isRepoTrusted(QString::fromStdString(repo));
}

bool DownloadManager::isTrusted(const DownloadTask& task) const
{
    for (const auto& s : task.spec().sources)
        if (!isTrusted(s.repo))
            return false;
    return true;
}

void DownloadManager::persist() const
{
    // A manager that never read the list would write the user's unfinished downloads away.
    if (!m_restored)
        return;
    QStringList specs;
    for (const auto* t : m_tasks)
        if (t->state() != DownloadTask::State::Done)
            specs.append(QString::fromUtf8(t->spec().toJson()));
    QSettings().setValue(kTasks, specs);
}

void DownloadManager::restore()
{
    for (const auto& json : QSettings().value(kTasks).toStringList())
        if (auto spec = TaskSpec::fromJson(json.toUtf8()))
            addTask(std::move(*spec))->plan();
}

void DownloadManager::rememberReady(const DownloadTask& task) const
{
    QJsonArray sources;
    for (const auto& plan : task.plans()) {
        QJsonArray files;
        for (const auto& f : plan.files)
            files.append(QJsonObject{{QStringLiteral("path"), QString::fromStdString(f.file.path)},
                {QStringLiteral("size"), static_cast<qint64>(f.file.size)},
                {QStringLiteral("sha256"), QString::fromStdString(f.file.sha256)},
                {QStringLiteral("oid"), QString::fromStdString(f.file.gitOid)}});
        sources.append(QJsonObject{{QStringLiteral("repo"), QString::fromStdString(plan.repo)},
            {QStringLiteral("commit"), QString::fromStdString(plan.commit)}, {QStringLiteral("files"), files}});
    }
    QSettings().setValue(settingsKey(task.spec().key), QString::fromUtf8(QJsonDocument(sources).toJson(QJsonDocument::Compact)));
}

std::optional<std::vector<DownloadManager::ReadySource>> DownloadManager::readyFiles(const QString& key) const
{
    std::vector<ReadySource> out;
    const auto c = cache();
    if (const auto* t = task(key); t && !t->plans().empty()) {
        if (!t->complete())
            return std::nullopt;
        for (const auto& plan : t->plans()) {
            ReadySource r{plan.repo, plan.commit, {}};
            for (const auto& f : plan.files)
                r.files.push_back(f.file);
            out.push_back(std::move(r));
        }
        return out;
    }
    const auto text = QSettings().value(settingsKey(key)).toString();
    if (text.isEmpty())
        return std::nullopt;
    const auto sources = QJsonDocument::fromJson(text.toUtf8()).array();
    if (sources.isEmpty())
        return std::nullopt;
    for (const auto& s : sources) {
        const auto o = s.toObject();
        ReadySource r{
            o.value(QStringLiteral("repo")).toString().toStdString(), o.value(QStringLiteral("commit")).toString().toStdString(), {}};
        for (const auto& f : o.value(QStringLiteral("files")).toArray()) {
            const auto fo = f.toObject();
            RepoFile file;
            file.path = fo.value(QStringLiteral("path")).toString().toStdString();
            file.size = static_cast<std::uint64_t>(std::max<qint64>(0, fo.value(QStringLiteral("size")).toInteger()));
            file.sha256 = fo.value(QStringLiteral("sha256")).toString().toStdString();
            file.gitOid = fo.value(QStringLiteral("oid")).toString().toStdString();
            if (!c->hasFile(r.repo, r.commit, file))
                return std::nullopt;
            r.files.push_back(std::move(file));
        }
        out.push_back(std::move(r));
    }
    return out;
}

bool DownloadManager::manifestPresent(const QString& key) const
{
    const auto text = QSettings().value(settingsKey(key)).toString();
    if (text.isEmpty())
        return false;
    const auto c = cache();
    const auto sources = QJsonDocument::fromJson(text.toUtf8()).array();
    if (sources.isEmpty())
        return false;
    for (const auto& s : sources) {
        const auto o = s.toObject();
        const auto repo = o.value(QStringLiteral("repo")).toString().toStdString();
        const auto commit = o.value(QStringLiteral("commit")).toString().toStdString();
        for (const auto& f : o.value(QStringLiteral("files")).toArray()) {
            const auto fo = f.toObject();
            RepoFile file;
            file.path = fo.value(QStringLiteral("path")).toString().toStdString();
            file.size = static_cast<std::uint64_t>(std::max<qint64>(0, fo.value(QStringLiteral("size")).toInteger()));
            file.sha256 = fo.value(QStringLiteral("sha256")).toString().toStdString();
            file.gitOid = fo.value(QStringLiteral("oid")).toString().toStdString();
            if (!c->hasFile(repo, commit, file))
                return false;
        }
    }
    return true;
}

DownloadManager::Availability DownloadManager::availability(const QString& id) const
{
    const QString key = QStringLiteral("catalog:") + id;
    if (const auto* t = task(key); t && !t->plans().empty()) {
        if (t->complete())
            return Availability::Ready;
        return t->totals().presentBytes > 0 ? Availability::Partial : Availability::NotDownloaded;
    }
    if (manifestPresent(key))
        return Availability::Ready;
    const auto* variant = m_catalog.find(id.toStdString());
    if (!variant)
        return Availability::NotDownloaded;
    const auto c = cache();
    for (const auto& s : variant->sources) {
        auto dir = c->repoDir(s.repo);
        if (dir && QDir(QString::fromStdString((*dir / "snapshots").string())).exists())
            return Availability::InCache;
    }
    return Availability::NotDownloaded;
}

QList<DownloadManager::CachedRepo> DownloadManager::scanCache() const
{
    QList<CachedRepo> out;
    const QDir root(m_settings->cacheFolder());
    for (const auto& entry : root.entryInfoList({QStringLiteral("models--*")}, QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name)) {
        CachedRepo r;
        const auto parts = entry.fileName().mid(8).split(QStringLiteral("--"));
        r.repo = parts.join(QLatin1Char('/'));
        // Only the blobs themselves: a link planted in blobs/ is no content (and may point at
        // anything on the disk).
        QDirIterator blobs(entry.filePath() + QStringLiteral("/blobs"), QDir::Files | QDir::NoSymLinks);
        while (blobs.hasNext())
            r.bytes += static_cast<quint64>(std::max<qint64>(0, QFileInfo(blobs.next()).size()));
        r.snapshots =
            static_cast<int>(QDir(entry.filePath() + QStringLiteral("/snapshots")).entryList(QDir::Dirs | QDir::NoDotAndDotDot).size());
        out.append(r);
    }
    return out;
}

}  // namespace vireo::hub
