#pragma once

// Where a user's work is remembered: a SQLite database (WAL, versioned migrations) indexing
// every output with its recipe, sizes, timings and a thumbnail. The output files carry the
// same recipe (MP4 tags, PNG text chunks), so a rescan of the outputs folder adopts files the
// database never heard of (a crash between writing the file and its row, the CLI, a copy).
//
// One GalleryStore owns one connection and is used from the thread that opened it; open one
// per thread (the thumbnail worker has its own).

#include "core/output/recipe.h"
#include "inference/util/result.h"

#include <QByteArray>
#include <QImage>
#include <QDateTime>
#include <QList>
#include <QString>

#include <memory>
#include <optional>

namespace vireo::gallery {

struct GalleryItem {
    qint64 id = 0;
    QString path;
    QString kind;  // "video" | "image"
    int width = 0, height = 0, frames = 0;
    double fps = 0, durationSeconds = 0;
    QDateTime created;
    QString modelTitle, family, variant;
    QString prompt;
    qint64 seed = 0;
    bool hasRecipe = false;
    QString recipeJson;  // the full recipe (item(id) only); empty for files without one
    QString secondsJson;  // phase timings
    qint64 fileBytes = 0;
    bool missing = false;  // the file was deleted or moved outside the studio
    int thumbnailState = 0;  // 0 not made yet, 1 made, 2 could not be made (see problem)
    QString problem;  // why there is no thumbnail ("truncated or damaged?")
};

class GalleryStore {
public:
    static constexpr int kSchemaVersion = 2;

    // Opens (creating and migrating as needed) the database at `file`.
    static Result<std::unique_ptr<GalleryStore>> open(const QString& file);
    ~GalleryStore();

    int schemaVersion() const;
    QString file() const { return m_file; }

    // Adds (or updates) the row of an output file, with its recipe when known; reads sizes from
    // the recipe, else from the file. Returns the row id.
    Result<qint64> add(const QString& path, const std::optional<output::Recipe>& recipe);
    // Adds a file found on disk, with the recipe embedded in it if any.
    Result<qint64> import(const QString& path);
    // Adopts the outputs in `folder` (and its sub-folders, 4 deep) that have no row, and marks
    // rows whose file is gone as missing (and back when it returns). Returns rows added.
    Result<int> rescan(const QString& folder);
    // Adopts the outputs in `folder` that have no row, without checking the rows it has (what a
    // watched batch folder needs every few seconds).
    Result<int> importNew(const QString& folder);

    // Every row, newest first, without thumbnails and recipe texts (hasRecipe says if there is one).
    QList<GalleryItem> items() const;
    // One row with its recipe.
    std::optional<GalleryItem> item(qint64 id) const;
    QByteArray thumbnail(qint64 id) const;
    Result<void> setThumbnail(qint64 id, const QByteArray& jpeg);
    Result<void> setThumbnailProblem(qint64 id, const QString& problem);
    Result<void> remove(qint64 id);
    // The file was found elsewhere (Locate): the row follows it.
    Result<void> relocate(qint64 id, const QString& newPath);
    Result<void> setMissing(qint64 id, bool missing);

    // Changes when any connection (another thread, another process) commits: cheap polling
    // for live updates.
    qint64 dataVersion() const;
    QString integrityCheck() const;  // "ok" when sound

private:
    GalleryStore() = default;
    Result<void> migrate();
    Result<int> walk(const QString& folder, bool checkRows);

    QString m_file, m_connection;
};

// The recipe embedded in an output file (MP4 `vireo_recipe` tag, PNG `vireo_recipe` text
// chunk); nullopt when there is none, with the reason in *problem for a damaged file.
std::optional<output::Recipe> readEmbeddedRecipe(const QString& path, QString* problem = nullptr);

// The first frame of a video at or after `seconds`, at most maxWidth wide (frame stepping
// while paused, thumbnails).
Result<QImage> videoFrame(const QString& path, double seconds, int maxWidth);

// A JPEG thumbnail (at most 320 pixels wide) of a video (a frame a third of the way in) or an
// image; an error says why a damaged or truncated file has none.
Result<QByteArray> makeThumbnail(const QString& path);

}  // namespace vireo::gallery
