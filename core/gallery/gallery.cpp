#include "core/gallery/gallery.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QUuid>

#include <spdlog/spdlog.h>

namespace vireo::gallery {

// Thumbnails and folder walks on their own thread with their own connection; what it cannot
// decode is recorded as a problem (a placeholder is shown), never retried in a loop.
class GalleryWorker : public QObject {
    Q_OBJECT
public:
    explicit GalleryWorker(QString file) : m_file(std::move(file)) {}

public slots:
    void make(qint64 id, const QString& path)
    {
        if (!ensureOpen()) {
            emit failed(id, m_openError);
            return;
        }
        QByteArray jpeg = m_store->thumbnail(id);
        if (!QFileInfo::exists(path)) {
            // Deleted or moved outside the studio while listed: shown as missing from now on,
            // dimmed over the thumbnail it had.
            (void)m_store->setMissing(id, true);
            emit missing(id);
            QImage image;
            if (!jpeg.isEmpty())
                image.loadFromData(jpeg, "JPEG");
            emit made(id, image);
            return;
        }
        if (jpeg.isEmpty()) {
            auto made = makeThumbnail(path);
            if (!made) {
                const auto message = QString::fromStdString(made.error().message);
                (void)m_store->setThumbnailProblem(id, message);  // a full disk: it is simply tried again next start
                emit failed(id, message);
                return;
            }
            jpeg = *made;
            // A full disk keeps the thumbnail from the database, not from the screen.
            if (auto saved = m_store->setThumbnail(id, jpeg); !saved)
                emit problem(QString::fromStdString(saved.error().message));
        }
        QImage image;
        if (!image.loadFromData(jpeg, "JPEG")) {
            emit failed(id, QStringLiteral("the stored thumbnail is damaged"));
            return;
        }
        emit made(id, image);
    }

    void scan(const QString& folder) { walk(folder, true); }
    // A watched folder: new files only, the rows it has are not checked.
    void scanNew(const QString& folder) { walk(folder, false); }

signals:
    void made(qint64 id, const QImage& image);
    void failed(qint64 id, const QString& problem);
    void missing(qint64 id);
    void problem(const QString& message);
    void scanned(const QString& folder, int added, const QString& error);

private:
    void walk(const QString& folder, bool checkRows)
    {
        if (!ensureOpen()) {
            emit scanned(folder, 0, m_openError);
            return;
        }
        auto n = checkRows ? m_store->rescan(folder) : m_store->importNew(folder);
        emit scanned(folder, n ? *n : 0, n ? QString() : QString::fromStdString(n.error().message));
    }

    bool ensureOpen()
    {
        if (m_store)
            return true;
        auto s = GalleryStore::open(m_file);
        if (!s) {
            m_openError = QString::fromStdString(s.error().message);
            return false;
        }
        m_store = std::move(*s);
        return true;
    }

    QString m_file, m_openError;
    std::unique_ptr<GalleryStore> m_store;
};

Gallery::Gallery(QString databaseFile, QString outputsFolder, QObject* parent)
    : QObject(parent), m_file(std::move(databaseFile)), m_outputs(std::move(outputsFolder))
{
    // Costs in KiB: about 64 MiB of decoded thumbnails (some 250 at 320 x 180).
    m_thumbnails.setMaxCost(64 * 1024);
    m_thread.setObjectName(QStringLiteral("gallery"));
    m_worker = new GalleryWorker(m_file);
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    connect(m_worker, &GalleryWorker::made, this, [this](qint64 id, const QImage& image) {
        m_busy = false;
        m_queued.remove(id);
        if (!image.isNull()) {
            m_thumbnails.insert(id, new QImage(image), std::max<qsizetype>(1, image.sizeInBytes() / 1024));
            if (const int i = indexOf(id); i >= 0)
                m_items[i].thumbnailState = 1;
        } else {
            m_none.insert(id);  // missing and never thumbnailed: not asked again until the rows change
        }
        emit thumbnailReady(id);
        pump();
    });
    connect(m_worker, &GalleryWorker::failed, this, [this](qint64 id, const QString& message) {
        m_busy = false;
        m_queued.remove(id);
        spdlog::info("gallery: no thumbnail for {}: {}", id, message.toStdString());
        if (const int i = indexOf(id); i >= 0) {
            m_items[i].thumbnailState = 2;
            m_items[i].problem = message;
        }
        emit thumbnailReady(id);
        pump();
    });
    connect(m_worker, &GalleryWorker::missing, this, [this](qint64 id) {
        if (const int i = indexOf(id); i >= 0)
            m_items[i].missing = true;
    });
    connect(m_worker, &GalleryWorker::problem, this, &Gallery::problem);
    connect(m_worker, &GalleryWorker::scanned, this, [this](const QString& folder, int added, const QString& error) {
        --m_scans;
        if (!error.isEmpty())
            emit problem(error);
        reload();
        emit scanFinished(folder, added, error);
    });
    m_poll.setInterval(2000);
    connect(&m_poll, &QTimer::timeout, this, &Gallery::poll);
}

Gallery::~Gallery()
{
    m_poll.stop();
    m_thread.quit();
    m_thread.wait();
}

bool Gallery::openForRecording(QString* error)
{
    auto s = GalleryStore::open(m_file);
    if (!s) {
        if (error)
            *error = QString::fromStdString(s.error().message);
        return false;
    }
    m_store = std::move(*s);
    m_recordOnly = true;
    return true;
}

bool Gallery::open(QString* error)
{
    if (!openForRecording(error))
        return false;
    m_recordOnly = false;
    m_thread.start(QThread::LowPriority);
    reload();
    rescan();
    m_poll.start();
    return true;
}

void Gallery::reload()
{
    if (!m_store)
        return;
    m_items = m_store->items();
    m_none.clear();
    m_index.clear();
    m_index.reserve(m_items.size());
    for (int i = 0; i < m_items.size(); ++i)
        m_index.insert(m_items[i].id, i);
    m_dataVersion = m_store->dataVersion();
    emit itemsChanged();
}

void Gallery::poll()
{
    // Another connection committed (the CLI, the worker, a second window): read the rows again.
    if (m_store && m_store->dataVersion() != m_dataVersion)
        reload();
    // Watched folders every 10 s, while no walk is under way: outputs that land there (a batch's,
    // written by other machines' tasks) are adopted; a finished or vanished folder is dropped
    // after a last look.
    if (++m_pollTicks % 5 != 0 || m_scans > 0 || !m_watch.folders)
        return;
    for (const auto& folder : m_watch.folders()) {
        if (!QFileInfo(folder).isDir()) {
            if (m_watch.forget)
                m_watch.forget(folder);
            continue;
        }
        const bool finished = m_watch.finished && m_watch.finished(folder);
        ++m_scans;
        QMetaObject::invokeMethod(m_worker, "scanNew", Qt::QueuedConnection, Q_ARG(QString, folder));
        if (finished && m_watch.forget)
            m_watch.forget(folder);
    }
}

void Gallery::setWatch(Watch watch)
{
    m_watch = std::move(watch);
}

std::optional<GalleryItem> Gallery::item(qint64 id) const
{
    const int i = indexOf(id);
    return i < 0 ? std::nullopt : std::optional<GalleryItem>(m_items[i]);
}

std::optional<output::Recipe> Gallery::recipe(qint64 id) const
{
    if (!m_store)
        return std::nullopt;
    const auto row = m_store->item(id);
    if (!row || row->recipeJson.isEmpty())
        return std::nullopt;
    auto r = output::Recipe::fromJson(row->recipeJson.toStdString());
    return r ? std::optional<output::Recipe>(*r) : std::nullopt;
}

int Gallery::indexOf(qint64 id) const
{
    return m_index.value(id, -1);
}

QImage Gallery::thumbnail(qint64 id)
{
    if (const QImage* cached = m_thumbnails.object(id))
        return *cached;
    const int i = indexOf(id);
    if (i < 0 || m_items[i].thumbnailState == 2 || m_none.contains(id))
        return {};
    if (m_queued.contains(id)) {
        // Asked again: it is on screen now, so it moves to the front.
        if (m_wanted.removeOne(id))
            m_wanted.prepend(id);
        return {};
    }
    m_queued.insert(id);
    m_wanted.prepend(id);
    // Rows scrolled far past are dropped; they are asked for again when seen.
    constexpr int kMaxWanted = 256;
    while (m_wanted.size() > kMaxWanted)
        m_queued.remove(m_wanted.takeLast());
    pump();
    return {};
}

void Gallery::pump()
{
    while (!m_busy && !m_wanted.isEmpty()) {
        const qint64 id = m_wanted.takeFirst();
        const int i = indexOf(id);
        if (i < 0) {
            m_queued.remove(id);
            continue;
        }
        m_busy = true;
        QMetaObject::invokeMethod(m_worker, "make", Qt::QueuedConnection, Q_ARG(qint64, id), Q_ARG(QString, m_items[i].path));
    }
}

Result<qint64> Gallery::add(const QString& path, const std::optional<output::Recipe>& recipe)
{
    if (!m_store)
        return makeError(ErrorCode::Internal, "the gallery is not open");
    auto id = m_store->add(path, recipe);
    if (!id) {
        emit problem(QString::fromStdString(id.error().message));
        return id;
    }
    m_thumbnails.remove(*id);
    if (!m_recordOnly)
        reload();
    return id;
}

void Gallery::importFolder(const QString& folder)
{
    ++m_scans;
    QMetaObject::invokeMethod(m_worker, "scan", Qt::QueuedConnection, Q_ARG(QString, folder));
}

void Gallery::rescan()
{
    if (!m_outputs.isEmpty())
        importFolder(m_outputs);
}

Result<QString> Gallery::trash(qint64 id)
{
    const auto it = item(id);
    if (!it)
        return makeError(ErrorCode::NotFound, "no such output");
    QString trashPath;
    if (QFileInfo::exists(it->path)) {
        if (!QFile::moveToTrash(it->path, &trashPath))
            return makeError(ErrorCode::Io, it->path.toStdString() + ": cannot be moved to the trash (no trash on this volume?)");
    }
    auto kept = recipe(id);
    if (auto r = m_store->remove(id); !r) {
        // The row stays, so the file comes back: never a row without its file.
        if (!trashPath.isEmpty())
            QFile::rename(trashPath, it->path);
        return r.error();
    }
    const QString token = QUuid::createUuid().toString(QUuid::WithoutBraces);
    m_trashed.insert(token, {*it, std::move(kept), trashPath});
    m_thumbnails.remove(id);
    reload();
    return token;
}

Result<qint64> Gallery::restore(const QString& token)
{
    const auto it = m_trashed.find(token);
    if (it == m_trashed.end())
        return makeError(ErrorCode::NotFound, "nothing to undo");
    const auto& t = it.value();
    if (!t.trashPath.isEmpty()) {
        if (QFileInfo::exists(t.item.path))
            return makeError(ErrorCode::InvalidArgument, t.item.path.toStdString() + " exists again; the trashed copy stays in the trash");
        if (!QFile::rename(t.trashPath, t.item.path))
            return makeError(ErrorCode::Io, t.trashPath.toStdString() + ": cannot be moved back");
        // The trash's record of it (Trash/info/<name>.trashinfo) goes too.
        const QFileInfo trashed(t.trashPath);
        QFile::remove(trashed.dir().absoluteFilePath(QStringLiteral("../info/") + trashed.fileName() + QStringLiteral(".trashinfo")));
    }
    auto id = m_store->add(t.item.path, t.recipe);
    m_trashed.erase(it);
    reload();
    return id;
}

void Gallery::markMissing(qint64 id, bool missing)
{
    const int i = indexOf(id);
    if (!m_store || i < 0 || m_items[i].missing == missing)
        return;
    if (auto r = m_store->setMissing(id, missing); !r) {
        emit problem(QString::fromStdString(r.error().message));
        return;
    }
    reload();
}

Result<void> Gallery::forget(qint64 id)
{
    if (auto r = m_store->remove(id); !r)
        return r;
    m_thumbnails.remove(id);
    reload();
    return {};
}

Result<void> Gallery::relocate(qint64 id, const QString& newPath)
{
    if (!QFileInfo(newPath).isFile())
        return makeError(ErrorCode::NotFound, newPath.toStdString() + ": not a file");
    if (auto r = m_store->relocate(id, newPath); !r)
        return r;
    m_thumbnails.remove(id);
    reload();
    return {};
}

Result<void> Gallery::exportTo(qint64 id, const QString& destination)
{
    const auto it = item(id);
    if (!it)
        return makeError(ErrorCode::NotFound, "no such output");
    if (QFileInfo::exists(destination))
        return makeError(ErrorCode::InvalidArgument, destination.toStdString() + " exists; choose another name");
    if (!QFile::copy(it->path, destination))
        return makeError(ErrorCode::Io, destination.toStdString() + ": the copy failed (is the disk full or the folder read-only?)");
    return {};
}

}  // namespace vireo::gallery

#include "gallery.moc"
