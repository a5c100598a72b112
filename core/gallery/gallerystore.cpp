#include "core/gallery/gallerystore.h"

#include "media/mediareader.h"

#include <nlohmann/json.hpp>

#include "inference/util/text.h"

#include <QBuffer>

#include <algorithm>
#include <dirent.h>
#include <string_view>
#include <sys/stat.h>
#include <QDir>
#include <QDirIterator>
#include <QRegularExpression>
#include <QFileInfo>
#include <QImage>
#include <QImageReader>
#include <QSqlDatabase>
#include <QSqlError>
#include <QSqlQuery>
#include <QThread>
#include <QUuid>
#include <QVariant>

namespace vireo::gallery {

namespace {

Error sqlError(const QString& file, const QString& what, const QSqlError& e)
{
    const QString text = e.text();
    // SQLITE_FULL: say it plainly, the output file itself is not touched.
    if (text.contains(QStringLiteral("full"), Qt::CaseInsensitive))
        return makeError(ErrorCode::Io,
            QString(
                file + QStringLiteral(": the disk is full while ") + what + QStringLiteral(" (the output file is kept; free some space)"))
                .toStdString());
    return makeError(ErrorCode::Io, QString(file + QStringLiteral(": ") + what + QStringLiteral(" failed: ") + text).toStdString());
}

// The v1 layout, as the first studio versions created it; migrations take it to the current one.
const char* kSchemaV1[] = {
    "CREATE TABLE outputs ("
    " id INTEGER PRIMARY KEY,"
    " path TEXT NOT NULL UNIQUE,"
    " kind TEXT NOT NULL,"
    " created_unix INTEGER NOT NULL,"
    " prompt TEXT NOT NULL DEFAULT '',"
    " model TEXT NOT NULL DEFAULT '',"
    " recipe TEXT,"
    " thumbnail BLOB)",
    "CREATE INDEX outputs_created ON outputs(created_unix)",
};

const char* kMigrateV1toV2[] = {
    "ALTER TABLE outputs ADD COLUMN width INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE outputs ADD COLUMN height INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE outputs ADD COLUMN frames INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE outputs ADD COLUMN fps REAL NOT NULL DEFAULT 0",
    "ALTER TABLE outputs ADD COLUMN duration REAL NOT NULL DEFAULT 0",
    "ALTER TABLE outputs ADD COLUMN seed INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE outputs ADD COLUMN family TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE outputs ADD COLUMN variant TEXT NOT NULL DEFAULT ''",
    "ALTER TABLE outputs ADD COLUMN seconds TEXT NOT NULL DEFAULT '{}'",
    "ALTER TABLE outputs ADD COLUMN file_bytes INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE outputs ADD COLUMN missing INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE outputs ADD COLUMN thumb_state INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE outputs ADD COLUMN problem TEXT NOT NULL DEFAULT ''",
    "CREATE INDEX outputs_model ON outputs(model)",
};

// What the index keeps of a recipe from a file: its prompt for the list and search, and the
// recipe whole up to a size no real recipe reaches.
constexpr std::size_t kListedPromptBytes = 4096;
constexpr std::size_t kStoredPromptBytes = 32768;
constexpr std::size_t kStoredRecipeBytes = 256 * 1024;

struct Fields {
    QString kind = QStringLiteral("video");
    int width = 0, height = 0, frames = 0;
    double fps = 0, duration = 0;
    qint64 seed = 0;
    QString prompt, model, family, variant, recipe, seconds = QStringLiteral("{}");
};

Fields fieldsFrom(const output::Recipe& r)
{
    const auto& q = r.request;
    Fields f;
    f.kind = QString::fromStdString(r.kind);
    f.width = static_cast<int>(q.width);
    f.height = static_cast<int>(q.height);
    f.frames = static_cast<int>(q.frames);
    f.fps = q.fps;
    f.duration = q.fps > 0 && q.frames > 0 ? static_cast<double>(q.frames) / q.fps : 0;
    f.seed = q.seed;
    // The list shows and searches the start of a prompt; a model reads at most about a thousand
    // tokens of it. A megabyte "prompt" from a file anyone made stays in that file.
    f.prompt = QString::fromStdString(output::truncatedUtf8(q.prompt, kListedPromptBytes));
    f.model = QString::fromStdString(!r.modelTitle.empty() ? r.modelTitle : r.modelVersion.empty() ? r.pipeline : "LTX-" + r.modelVersion);
    f.family = QString::fromStdString(r.family);
    f.variant = QString::fromStdString(r.variant);
    auto json = r.toJson();
    if (json.size() > kStoredRecipeBytes) {
        // Kept in the index with its prompts cut (Generate again reads a recipe this size back
        // from the file itself); the rest of the recipe is what the detail view shows.
        auto bounded = r;
        bounded.request.prompt = output::truncatedUtf8(q.prompt, kStoredPromptBytes);
        bounded.request.negativePrompt = output::truncatedUtf8(q.negativePrompt, kStoredPromptBytes);
        bounded.extraJson = "{}";
        json = bounded.toJson();
        if (json.size() > kStoredRecipeBytes)
            json.clear();
    }
    f.recipe = QString::fromStdString(json);
    f.seconds = QString::fromStdString(nlohmann::json(r.secondsPerPhase).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return f;
}

bool isOutputFile(const QString& path)
{
    const auto s = QFileInfo(path).suffix().toLower();
    if (s != QStringLiteral("mp4") && s != QStringLiteral("png"))
        return false;
    // "<stem>.cond0.png", "<stem>.ref0.mp4": a conditioning image or clip, or an IC-LoRA's
    // reference frames, kept beside a video for its recipe, not an output.
    static const QRegularExpression conditionCopy(QStringLiteral("\\.(cond|ref)\\d+(-\\d+)?\\.[^.]+$"));
    return !conditionCopy.match(QFileInfo(path).fileName()).hasMatch();
}

GalleryItem itemFrom(const QSqlQuery& q)
{
    GalleryItem i;
    i.id = q.value(0).toLongLong();
    i.path = q.value(1).toString();
    i.kind = q.value(2).toString();
    i.created = QDateTime::fromSecsSinceEpoch(q.value(3).toLongLong());
    i.prompt = q.value(4).toString();
    i.modelTitle = q.value(5).toString();
    // The list leaves the recipe text out (its column holds "1" when there is one): 10,000
    // rows reload in milliseconds, and the detail view reads the one it shows.
    const QString recipe = q.value(6).toString();
    i.hasRecipe = !recipe.isEmpty();
    if (recipe != QStringLiteral("1"))
        i.recipeJson = recipe;
    i.width = q.value(7).toInt();
    i.height = q.value(8).toInt();
    i.frames = q.value(9).toInt();
    i.fps = q.value(10).toDouble();
    i.durationSeconds = q.value(11).toDouble();
    i.seed = q.value(12).toLongLong();
    i.family = q.value(13).toString();
    i.variant = q.value(14).toString();
    i.secondsJson = q.value(15).toString();
    i.fileBytes = q.value(16).toLongLong();
    i.missing = q.value(17).toInt() != 0;
    i.thumbnailState = q.value(18).toInt();
    i.problem = q.value(19).toString();
    return i;
}

const char* kListColumns =
    "id, path, kind, created_unix, prompt, model, CASE WHEN recipe IS NULL OR recipe = '' THEN '' ELSE '1' END, width, height, "
    "frames, fps, duration, seed, family, variant, seconds, file_bytes, missing, thumb_state, problem";
const char* kColumns = "id, path, kind, created_unix, prompt, model, recipe, width, height, frames, fps, duration, seed, family, variant, "
                       "seconds, file_bytes, missing, thumb_state, problem";

}  // namespace

Result<std::unique_ptr<GalleryStore>> GalleryStore::open(const QString& file)
{
    if (!QSqlDatabase::isDriverAvailable(QStringLiteral("QSQLITE")))
        return makeError(ErrorCode::Unsupported, "Qt's SQLite driver is missing (install libqt6sql6-sqlite)");
    QDir().mkpath(QFileInfo(file).absolutePath());
    // The database and its journals are written in place: never through a link someone put
    // there, which could point at any file of the user's.
    for (const QString& name : QStringList{file, file + QStringLiteral("-wal"), file + QStringLiteral("-shm")})
        if (QFileInfo(name).isSymLink())
            return makeError(ErrorCode::PermissionDenied,
                name.toStdString()
                    + " is a symbolic link; the gallery is not written through "
                      "links (remove it, or put the real database there)");
    std::unique_ptr<GalleryStore> store(new GalleryStore);
    store->m_file = file;
    store->m_connection = QStringLiteral("gallery-") + QUuid::createUuid().toString(QUuid::WithoutBraces);
    auto db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), store->m_connection);
    db.setDatabaseName(file);
    db.setConnectOptions(QStringLiteral("QSQLITE_BUSY_TIMEOUT=10000"));
    if (!db.open())
        return sqlError(file, QStringLiteral("opening the gallery"), db.lastError());
    QSqlQuery q(db);
    // WAL: readers never block the writer, and a killed writer leaves the database sound.
    // FULL sync: a row that was committed survives a crash of the machine too.
    for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"})
        if (!q.exec(QString::fromLatin1(pragma)))
            return sqlError(file, QStringLiteral("setting up the gallery"), q.lastError());
    if (auto m = store->migrate(); !m)
        return m.error();
    return store;
}

GalleryStore::~GalleryStore()
{
    {
        auto db = QSqlDatabase::database(m_connection, false);
        db.close();
    }
    QSqlDatabase::removeDatabase(m_connection);
}

int GalleryStore::schemaVersion() const
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    return q.exec(QStringLiteral("PRAGMA user_version")) && q.next() ? q.value(0).toInt() : -1;
}

Result<void> GalleryStore::migrate()
{
    auto db = QSqlDatabase::database(m_connection);
    const int version = schemaVersion();
    if (version > kSchemaVersion)
        return makeError(ErrorCode::Unsupported,
            m_file.toStdString() + ": the gallery was written by a newer Vireo (schema " + std::to_string(version)
                + "); update Vireo Studio, or move the file away to start a new gallery");
    if (version == kSchemaVersion)
        return {};
    if (!db.transaction())
        return sqlError(m_file, QStringLiteral("starting the migration"), db.lastError());
    QSqlQuery q(db);
    auto run = [&](const char* sql) { return q.exec(QString::fromLatin1(sql)); };
    bool ok = true;
    if (version == 0)
        for (const char* sql : kSchemaV1)
            ok = ok && run(sql);
    if (ok && version <= 1) {
        for (const char* sql : kMigrateV1toV2)
            ok = ok && run(sql);
        // The new columns from the recipes v1 rows already hold.
        QSqlQuery rows(db);
        ok = ok && rows.exec(QStringLiteral("SELECT id, recipe FROM outputs WHERE recipe IS NOT NULL AND recipe != ''"));
        while (ok && rows.next()) {
            auto r = output::Recipe::fromJson(rows.value(1).toString().toStdString());
            if (!r)
                continue;
            const auto f = fieldsFrom(*r);
            QSqlQuery u(db);
            u.prepare(QStringLiteral("UPDATE outputs SET width=?, height=?, frames=?, fps=?, duration=?, seed=?, family=?, variant=?, "
                                     "seconds=? WHERE id=?"));
            auto text = [](const QString& s) { return QVariant(s.isNull() ? QStringLiteral("") : s); };
            for (const auto& v : {QVariant(f.width), QVariant(f.height), QVariant(f.frames), QVariant(f.fps), QVariant(f.duration),
                     QVariant(f.seed), text(f.family), text(f.variant), text(f.seconds), rows.value(0)})
                u.addBindValue(v);
            ok = u.exec();
        }
    }
    ok = ok && q.exec(QStringLiteral("PRAGMA user_version=%1").arg(kSchemaVersion));
    if (!ok) {
        const auto e = q.lastError();
        db.rollback();
        return sqlError(m_file, QStringLiteral("migrating the gallery from schema %1").arg(version), e);
    }
    if (!db.commit())
        return sqlError(m_file, QStringLiteral("migrating the gallery"), db.lastError());
    return {};
}

Result<qint64> GalleryStore::add(const QString& pathIn, const std::optional<output::Recipe>& recipe)
{
    const QFileInfo info(pathIn);
    const QString path = info.absoluteFilePath();
    Fields f;
    if (recipe)
        f = fieldsFrom(*recipe);
    // What the file is, not what its recipe claims.
    f.kind = info.suffix().toLower() == QStringLiteral("png") ? QStringLiteral("image") : QStringLiteral("video");
    if (!recipe || f.width == 0) {
        if (f.kind == QStringLiteral("video")) {
            if (auto m = media::probeMedia(path.toStdString())) {
                f.width = m->width;
                f.height = m->height;
                f.frames = static_cast<int>(m->frames);
                f.fps = m->fps;
                f.duration = m->durationSeconds;
            }
        } else if (QImageReader reader(path); reader.canRead()) {
            f.width = reader.size().width();
            f.height = reader.size().height();
        }
    }
    qint64 created = recipe && !recipe->created.empty()
        ? QDateTime::fromString(QString::fromStdString(recipe->created), Qt::ISODate).toSecsSinceEpoch()
        : info.lastModified().toSecsSinceEpoch();
    // A date in the future (9999, a wrong clock) would sort first forever: the file's own time.
    if (created > QDateTime::currentSecsSinceEpoch() + 86400)
        created = std::min(info.lastModified().toSecsSinceEpoch(), QDateTime::currentSecsSinceEpoch());
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral(
        "INSERT INTO outputs (path, kind, created_unix, prompt, model, recipe, width, height, frames, fps, duration, seed, family, "
        "variant, seconds, file_bytes, missing) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,0) "
        "ON CONFLICT(path) DO UPDATE SET kind=excluded.kind, prompt=excluded.prompt, model=excluded.model, "
        "recipe=COALESCE(excluded.recipe, recipe), width=excluded.width, height=excluded.height, frames=excluded.frames, fps=excluded.fps, "
        "duration=excluded.duration, seed=excluded.seed, family=excluded.family, variant=excluded.variant, seconds=excluded.seconds, "
        "file_bytes=excluded.file_bytes, missing=0"));
    // A null QString binds as SQL NULL, which the NOT NULL text columns refuse.
    auto text = [](const QString& s) { return QVariant(s.isNull() ? QStringLiteral("") : s); };
    for (const auto& v : {QVariant(path), text(f.kind), QVariant(created > 0 ? created : QDateTime::currentSecsSinceEpoch()),
             text(f.prompt), text(f.model), recipe ? QVariant(f.recipe) : QVariant(QMetaType::fromType<QString>()), QVariant(f.width),
             QVariant(f.height), QVariant(f.frames), QVariant(f.fps), QVariant(f.duration), QVariant(f.seed), text(f.family),
             text(f.variant), text(f.seconds), QVariant(info.size())})
        q.addBindValue(v);
    if (!q.exec())
        return sqlError(m_file, QStringLiteral("recording %1").arg(path), q.lastError());
    QSqlQuery id(QSqlDatabase::database(m_connection));
    id.prepare(QStringLiteral("SELECT id FROM outputs WHERE path = ?"));
    id.addBindValue(path);
    if (!id.exec() || !id.next())
        return sqlError(m_file, QStringLiteral("reading back %1").arg(path), id.lastError());
    return id.value(0).toLongLong();
}

namespace {

bool validUtf8(const char* name)
{
    const std::string_view s(name);
    for (std::size_t i = 0; i < s.size();) {
        const auto n = utf8SequenceLength(s, i);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

// Names under `folder` that are not UTF-8: Qt's directory listing leaves them out without a
// word (it cannot name them), so they are found with the system's own listing, as far down
// as outputs are looked for, and said.
void undecodableNames(const std::string& folder, int depth, std::vector<std::string>& out)
{
    DIR* dir = ::opendir(folder.c_str());
    if (!dir)
        return;
    while (const dirent* e = ::readdir(dir)) {
        const std::string name = e->d_name;
        if (name == "." || name == ".." || name.front() == '.' || out.size() >= 100)
            continue;
        const std::string path = folder + "/" + name;
        if (!validUtf8(e->d_name)) {
            out.push_back(path);
            continue;
        }
        struct stat st {};
        if (depth > 0 && ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
            undecodableNames(path, depth - 1, out);
    }
    ::closedir(dir);
}

}  // namespace

Result<qint64> GalleryStore::import(const QString& path)
{
    if (!QFileInfo(path).isFile()) {
        // A name that is not UTF-8 comes out of the folder listing with replacement characters,
        // under which no file exists.
        if (path.contains(QChar::ReplacementCharacter))
            return makeError(ErrorCode::InvalidArgument,
                path.toStdString()
                    + ": its name is not valid UTF-8 (shown with \xEF\xBF\xBD), "
                      "so it cannot be opened by name; rename it (convmv or a file manager) and it is listed");
        return makeError(ErrorCode::NotFound, path.toStdString() + ": not a file");
    }
    QString problem;
    const auto recipe = readEmbeddedRecipe(path, &problem);
    auto id = add(path, recipe);
    if (id && !problem.isEmpty())
        (void)setThumbnailProblem(*id, problem);
    return id;
}

Result<int> GalleryStore::importNew(const QString& folder)
{
    return walk(folder, false);
}

Result<int> GalleryStore::rescan(const QString& folder)
{
    return walk(folder, true);
}

Result<int> GalleryStore::walk(const QString& folder, bool checkRows)
{
    QSet<QString> known;
    QList<QPair<qint64, QString>> rows;
    {
        QSqlQuery q(QSqlDatabase::database(m_connection));
        if (!q.exec(QStringLiteral("SELECT id, path, missing FROM outputs")))
            return sqlError(m_file, QStringLiteral("reading the gallery"), q.lastError());
        while (q.next()) {
            known.insert(q.value(1).toString());
            if (!checkRows)
                continue;
            const bool exists = QFileInfo::exists(q.value(1).toString());
            if (exists == (q.value(2).toInt() != 0))
                rows.append({q.value(0).toLongLong(), exists ? QStringLiteral("present") : QStringLiteral("missing")});
        }
    }
    for (const auto& [id, state] : rows)
        if (auto r = setMissing(id, state == QStringLiteral("missing")); !r)
            return r.error();
    int added = 0, failed = 0;
    Error firstError;
    const QString root = QFileInfo(folder).absoluteFilePath();
    if (!QFileInfo(root).isDir())
        return 0;
    QDirIterator it(root, QDir::Files | QDir::NoDotAndDotDot, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QString file = QFileInfo(it.next()).absoluteFilePath();
        if (QDir(root).relativeFilePath(file).count(QLatin1Char('/')) > 4 || !isOutputFile(file) || known.contains(file)
            || QFileInfo(file).isSymLink())
            continue;
        // A hidden name is a file still being written (the MP4 writer's temporary).
        if (QFileInfo(file).fileName().startsWith(QLatin1Char('.')))
            continue;
        if (auto id = import(file); id) {
            ++added;
        } else {
            if (failed == 0)
                firstError = id.error();
            ++failed;
        }
    }
    std::vector<std::string> undecodable;
    undecodableNames(QFile::encodeName(root).toStdString(), 4, undecodable);
    if (!undecodable.empty() && failed == 0) {
        firstError = makeError(ErrorCode::InvalidArgument,
            terminalSafe(undecodable.front())
                + ": its name is not valid UTF-8, so it "
                  "cannot be listed; rename it (convmv, or a file manager) and it is");
    }
    failed += static_cast<int>(undecodable.size());
    if (failed > 0)
        return makeError(firstError.code,
            std::to_string(failed) + (failed == 1 ? " file" : " files") + " could not be listed (" + std::to_string(added)
                + " were): " + firstError.message);
    return added;
}

QList<GalleryItem> GalleryStore::items() const
{
    QList<GalleryItem> out;
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.setForwardOnly(true);
    if (!q.exec(QStringLiteral("SELECT %1 FROM outputs ORDER BY created_unix DESC, id DESC").arg(QString::fromLatin1(kListColumns))))
        return out;
    while (q.next())
        out.append(itemFrom(q));
    return out;
}

std::optional<GalleryItem> GalleryStore::item(qint64 id) const
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("SELECT %1 FROM outputs WHERE id = ?").arg(QString::fromLatin1(kColumns)));
    q.addBindValue(id);
    if (!q.exec() || !q.next())
        return std::nullopt;
    return itemFrom(q);
}

QByteArray GalleryStore::thumbnail(qint64 id) const
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("SELECT thumbnail FROM outputs WHERE id = ?"));
    q.addBindValue(id);
    return q.exec() && q.next() ? q.value(0).toByteArray() : QByteArray();
}

Result<void> GalleryStore::setThumbnail(qint64 id, const QByteArray& jpeg)
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("UPDATE outputs SET thumbnail = ?, thumb_state = 1, problem = '' WHERE id = ?"));
    q.addBindValue(jpeg);
    q.addBindValue(id);
    if (!q.exec())
        return sqlError(m_file, QStringLiteral("saving a thumbnail"), q.lastError());
    return {};
}

Result<void> GalleryStore::setThumbnailProblem(qint64 id, const QString& problem)
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("UPDATE outputs SET thumb_state = 2, problem = ? WHERE id = ?"));
    q.addBindValue(problem.left(1000));
    q.addBindValue(id);
    if (!q.exec())
        return sqlError(m_file, QStringLiteral("saving a thumbnail problem"), q.lastError());
    return {};
}

Result<void> GalleryStore::remove(qint64 id)
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("DELETE FROM outputs WHERE id = ?"));
    q.addBindValue(id);
    if (!q.exec())
        return sqlError(m_file, QStringLiteral("forgetting an output"), q.lastError());
    return {};
}

Result<void> GalleryStore::relocate(qint64 id, const QString& newPath)
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    q.prepare(QStringLiteral("UPDATE outputs SET path = ?, missing = 0, problem = '', "
                             "thumb_state = CASE WHEN thumb_state = 2 THEN 0 ELSE thumb_state END WHERE id = ?"));
    q.addBindValue(QFileInfo(newPath).absoluteFilePath());
    q.addBindValue(id);
    if (!q.exec())
        return sqlError(m_file, QStringLiteral("relocating an output (is %1 already in the gallery?)").arg(newPath), q.lastError());
    return {};
}

Result<void> GalleryStore::setMissing(qint64 id, bool missing)
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    // Only a real change writes: other connections poll the data version.
    q.prepare(QStringLiteral("UPDATE outputs SET missing = ? WHERE id = ? AND missing != ?"));
    q.addBindValue(missing ? 1 : 0);
    q.addBindValue(id);
    q.addBindValue(missing ? 1 : 0);
    if (!q.exec())
        return sqlError(m_file, QStringLiteral("marking an output missing"), q.lastError());
    return {};
}

qint64 GalleryStore::dataVersion() const
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    return q.exec(QStringLiteral("PRAGMA data_version")) && q.next() ? q.value(0).toLongLong() : -1;
}

QString GalleryStore::integrityCheck() const
{
    QSqlQuery q(QSqlDatabase::database(m_connection));
    if (!q.exec(QStringLiteral("PRAGMA integrity_check")))
        return q.lastError().text();
    QStringList out;
    while (q.next())
        out << q.value(0).toString();
    return out.join(QLatin1Char('\n'));
}

std::optional<output::Recipe> readEmbeddedRecipe(const QString& path, QString* problem)
{
    std::string text;
    const auto suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QStringLiteral("png")) {
        QImageReader reader(path);
        if (!reader.canRead()) {
            if (problem)
                *problem = QStringLiteral("%1: not a readable image (%2)").arg(path, reader.errorString());
            return std::nullopt;
        }
        text = reader.text(QStringLiteral("vireo_recipe")).toStdString();
    } else {
        auto info = media::probeMedia(path.toStdString());
        if (!info) {
            if (problem)
                *problem = QString::fromStdString(info.error().message);
            return std::nullopt;
        }
        const auto it = info->tags.find("vireo_recipe");
        if (it != info->tags.end())
            text = it->second;
    }
    if (text.empty())
        return std::nullopt;
    auto recipe = output::Recipe::fromJson(text);
    if (!recipe) {
        if (problem)
            *problem = QStringLiteral("%1: its recipe cannot be read (%2)").arg(path, QString::fromStdString(recipe.error().message));
        return std::nullopt;
    }
    return *recipe;
}

Result<QImage> videoFrame(const QString& path, double seconds, int maxWidth)
{
    auto frame = media::frameAt(path.toStdString(), seconds, maxWidth);
    if (!frame)
        return frame.error();
    return QImage(frame->rgb.data(), frame->width, frame->height, frame->width * 3, QImage::Format_RGB888).copy();
}

Result<QByteArray> makeThumbnail(const QString& path)
{
    QImage image;
    if (QFileInfo(path).suffix().toLower() == QStringLiteral("png")) {
        QImageReader reader(path);
        const auto size = reader.size();
        if (size.isValid() && size.width() > 320)
            reader.setScaledSize(QSize(320, std::max(1, size.height() * 320 / size.width())));
        image = reader.read();
        if (image.isNull())
            return makeError(ErrorCode::InvalidFormat,
                QString(path + QStringLiteral(": the image cannot be read (") + reader.errorString()
                    + QStringLiteral("; truncated or damaged?)"))
                    .toStdString());
    } else {
        auto info = media::probeMedia(path.toStdString());
        if (!info)
            return info.error();
        if (!info->damage.empty())
            return makeError(ErrorCode::Truncated, path.toStdString() + ": " + info->damage + " (an interrupted copy or write?)");
        auto frame = videoFrame(path, info->durationSeconds / 3.0, 320);
        if (!frame)
            return frame.error();
        image = std::move(*frame);
    }
    QByteArray jpeg;
    QBuffer buffer(&jpeg);
    buffer.open(QIODevice::WriteOnly);
    if (!image.save(&buffer, "JPEG", 85))
        return makeError(ErrorCode::Internal, path.toStdString() + ": the thumbnail cannot be encoded");
    return jpeg;
}

}  // namespace vireo::gallery
