#pragma once

// The gallery as a service of the studio. The store's rows live on the GUI thread; a worker
// thread with its own connection makes thumbnails and walks folders (rescan, import) so the
// window never waits on a decoder or a disk. New outputs from the engines are added as they
// finish; outputs recorded by another process (vireo-cli generate) are noticed by polling the
// database's data version; a rescan of the outputs folder at start adopts files whose row
// never made it (a crash between the file and its row).

#include "core/gallery/gallerystore.h"

#include <QCache>
#include <QHash>
#include <QImage>
#include <QList>
#include <QObject>
#include <QSet>
#include <QThread>
#include <QTimer>

#include <functional>

namespace vireo::gallery {

class GalleryWorker;

class Gallery : public QObject {
    Q_OBJECT
public:
    Gallery(QString databaseFile, QString outputsFolder, QObject* parent = nullptr);
    ~Gallery() override;

    // Opens the database and starts a rescan of the outputs folder in the background; false
    // with the reason when the database cannot be opened (the studio runs on without it).
    bool open(QString* error = nullptr);
    // Opens the database to record outputs only: no scan, no watching for other writers (a
    // front end without a window, vireo-cli, whose run ends in seconds).
    bool openForRecording(QString* error = nullptr);
    bool isOpen() const { return m_store != nullptr; }
    QString databaseFile() const { return m_file; }
    QString outputsFolder() const { return m_outputs; }
    void setOutputsFolder(const QString& folder) { m_outputs = folder; }

    const QList<GalleryItem>& items() const { return m_items; }
    std::optional<GalleryItem> item(qint64 id) const;
    // The recipe of a row, read from the database; nullopt for a file without one.
    std::optional<output::Recipe> recipe(qint64 id) const;
    int indexOf(qint64 id) const;

    // A thumbnail from memory, or a null image and a request to the worker (thumbnailReady(id)
    // follows). The most recent requests go first, so the rows on screen are served before
    // those scrolled past.
    QImage thumbnail(qint64 id);

    Result<qint64> add(const QString& path, const std::optional<output::Recipe>& recipe);
    // In the background: files in the folder (4 levels deep), with their recipe when they
    // carry one; scanFinished follows.
    void importFolder(const QString& folder);
    void rescan();
    // Folders looked at again every 10 s while the gallery is open (a batch whose outputs other
    // machines write): `folders` gives the list now, `finished` says no more outputs will come
    // to one (it gets a last look, then `forget`), and a folder that is gone is forgotten too.
    struct Watch {
        std::function<QStringList()> folders;
        std::function<bool(const QString&)> finished;
        std::function<void(const QString&)> forget;
    };
    void setWatch(Watch watch);
    bool scanning() const { return m_scans > 0; }

    // To the freedesktop trash; the returned token undoes it (restore).
    Result<QString> trash(qint64 id);
    Result<qint64> restore(const QString& token);
    Result<void> forget(qint64 id);
    // The file was found gone (or back) outside a rescan.
    void markMissing(qint64 id, bool missing);
    Result<void> relocate(qint64 id, const QString& newPath);
    // A copy under another name; never overwrites.
    Result<void> exportTo(qint64 id, const QString& destination);

    // Re-reads the rows now (also done when another connection committed).
    void reload();

signals:
    void itemsChanged();
    void thumbnailReady(qint64 id);
    // A folder walk ended: how many files were added, or why it stopped.
    void scanFinished(const QString& folder, int added, const QString& error);
    // Something the user should read (the database is full, a row could not be written).
    void problem(const QString& message);

private:
    void poll();
    void pump();

    QString m_file, m_outputs;
    std::unique_ptr<GalleryStore> m_store;
    QList<GalleryItem> m_items;
    QHash<qint64, int> m_index;
    QCache<qint64, QImage> m_thumbnails;
    QList<qint64> m_wanted;  // most recent first
    QSet<qint64> m_queued;  // wanted or being made
    QSet<qint64> m_none;  // nothing to show (missing without a stored thumbnail)
    bool m_busy = false;  // one thumbnail in flight at a time keeps the queue reorderable
    int m_scans = 0;
    int m_pollTicks = 0;
    Watch m_watch;
    QThread m_thread;
    GalleryWorker* m_worker = nullptr;
    QTimer m_poll;
    qint64 m_dataVersion = -1;
    bool m_recordOnly = false;  // openForRecording(): the items list is not kept
    struct Trashed {
        GalleryItem item;
        std::optional<output::Recipe> recipe;
        QString trashPath;
    };
    QHash<QString, Trashed> m_trashed;
};

}  // namespace vireo::gallery
