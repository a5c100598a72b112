// The gallery's store against real files and a real SQLite database: migration from a stored
// v1 database, recipe round trips (stored samples from every version), outputs carrying their
// recipe (MP4 tags, PNG text chunks), rescan adoption and missing files, thumbnails of damaged
// files, a loop of writer processes killed with SIGKILL mid-write, and a full disk.
#include "core/gallery/gallery.h"
#include "core/gallery/gallerystore.h"
#include "core/output/outputfile.h"
#include "core/output/recipe.h"
#include "media/mp4writer.h"
#include "tests/core/mediafixtures.h"

#include <nlohmann/json.hpp>

#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QGuiApplication>
#include <QImage>
#include <QPainter>
#include <QProcess>
#include <QRandomGenerator>
#include <QScopeGuard>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unistd.h>
#include <sys/mount.h>

using namespace vireo;
using gallery::GalleryStore;

namespace {

QString sourceFile(const QString& relative)
{
    return QDir(qEnvironmentVariable("VIREO_SOURCE_DIR")).filePath(relative);
}

std::string readText(const QString& path)
{
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll().toStdString() : std::string();
}

output::Recipe sampleRecipe(std::int64_t seed, const std::string& prompt)
{
    output::Recipe r;
    r.app = "vireo-studio test";
    r.modelTitle = "LTX-2.3 · tiny";
    r.modelKey = "local:/models/tiny";
    r.modelVersion = "2.3";
    r.request.prompt = prompt;
    r.request.seed = seed;
    r.request.steps = 8;
    r.request.width = 96;
    r.request.height = 64;
    r.request.frames = 9;
    r.request.fps = 24;
    r.created = "2026-11-30T12:00:00Z";
    r.files.push_back({"/models/tiny/transformer.safetensors", 1234, std::string(64, 'a')});
    r.secondsPerPhase = {{"denoise", 1.5}, {"decode video", 0.25}};
    return r;
}

using test::writeClip;

// The child side of the kill -9 loop: records rows (with thumbnails) as fast as it can and
// prints each path once its transaction committed.
int writerLoop(const QString& database, const QString& folder)
{
    auto store = GalleryStore::open(database);
    if (!store) {
        std::fprintf(stderr, "%s\n", store.error().message.c_str());
        return 1;
    }
    std::printf("opened\n");
    std::fflush(stdout);
    QByteArray blob(48 * 1024, '\0');
    for (int i = 0;; ++i) {
        const QString path = QDir(folder).filePath(QStringLiteral("out-%1-%2.mp4").arg(QCoreApplication::applicationPid()).arg(i));
        auto id = (*store)->add(path, sampleRecipe(i, std::string(200 + i % 700, 'p')));
        if (!id)
            return 2;
        std::printf("committed %s\n", path.toUtf8().constData());
        std::fflush(stdout);
        for (auto& c : blob)
            c = static_cast<char>(QRandomGenerator::global()->generate());
        if (!(*store)->setThumbnail(*id, blob))
            return 3;
        if (i % 5 == 0) {
            // Either way after this line, certainly gone after the next.
            std::printf("removing %s\n", path.toUtf8().constData());
            std::fflush(stdout);
            if (!(*store)->remove(*id))
                return 4;
            std::printf("removed %s\n", path.toUtf8().constData());
            std::fflush(stdout);
        }
    }
}

}  // namespace

class TestGalleryStore : public QObject {
    Q_OBJECT
private slots:
    void recipeSamplesLoad()
    {
        // Written by vireo-cli generate before the recipe type existed (no recipe_version).
        auto v0 = output::Recipe::fromJson(readText(sourceFile(QStringLiteral("tests/core/data/recipe-v0.json"))));
        QVERIFY2(v0.ok(), v0.ok() ? "" : v0.error().message.c_str());
        QCOMPARE(v0->version, 0);
        QCOMPARE(v0->request.seed, 7);
        QCOMPARE(v0->request.steps, 8);
        QCOMPARE(v0->sigmas.size(), std::size_t(9));
        QCOMPARE(v0->files.size(), std::size_t(2));
        QCOMPARE(v0->files[1].bytes, 22630400);
        QCOMPARE(v0->modelVersion, std::string("2.3"));
        QCOMPARE(v0->request.width, 96);
        QCOMPARE(v0->kind, std::string("video"));

        auto v1 = output::Recipe::fromJson(readText(sourceFile(QStringLiteral("tests/core/data/recipe-v1.json"))));
        QVERIFY2(v1.ok(), v1.ok() ? "" : v1.error().message.c_str());
        QCOMPARE(v1->version, 1);
        QCOMPARE(v1->modelKey, std::string("catalog:ltx-2.3/distilled-fp8"));
        QCOMPARE(v1->loras.size(), std::size_t(1));
        QCOMPARE(v1->loras[0].strength, 0.8);
        QCOMPARE(v1->secondsPerPhase.at("denoise"), 18.9);
        QCOMPARE(v1->request.seed, 1234567);
        // A key this version does not know survives a round trip.
        const auto again = output::Recipe::fromJson(v1->toJson());
        QVERIFY(again.ok());
        QCOMPARE(nlohmann::json::parse(again->toJson()).at("future_option").at("nested").size(), std::size_t(3));
        QCOMPARE(again->toJson(), v1->toJson());
        QCOMPARE(again->request.prompt, v1->request.prompt);

        // Recipes older than conditioning have none, and no stage path.
        QVERIFY(v0->conditions.empty() && v1->conditions.empty());
        QVERIFY(v1->stages.empty() && v1->stagesReason.empty());

        // Conditions and the stage path round-trip.
        auto withImage = *v1;
        withImage.conditions.push_back({"/home/ana/Pictures/harbour at dawn.jpg", "2026-11-30_21-14-03_a-lighthouse.cond0.jpg",
            std::string(64, 'a'), 0, 1.0, 33, 1, false, {}, false});
        withImage.conditions.push_back({"/home/ana/keyframe.png", "", std::string(64, 'b'), 57, 0.65, 0, 1, false, {}, false});
        withImage.conditions.push_back({"/home/ana/Videos/pier.mp4", "", std::string(64, 'c'), 0, 1.0, 0, 17, true, {}, false});
        withImage.stages = "two";
        withImage.request.stages = "auto";
        withImage.stagesReason = "two stages: the distilled model's default (half size, latent upsample x2, 3 refining steps)";
        auto back = output::Recipe::fromJson(withImage.toJson());
        QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
        QCOMPARE(back->conditions.size(), std::size_t(3));
        QVERIFY(!back->conditions[0].fromEnd);
        QCOMPARE(back->conditions[2].frames, 17);
        QVERIFY(back->conditions[2].fromEnd);  // a clip extended from its end
        QCOMPARE(back->conditions[0].source, withImage.conditions[0].source);
        QCOMPARE(back->conditions[0].copy, withImage.conditions[0].copy);
        QCOMPARE(back->conditions[0].sha256, std::string(64, 'a'));
        QCOMPARE(back->conditions[0].crf, 33);
        QCOMPARE(back->conditions[1].frame, std::int64_t(57));
        QCOMPARE(back->conditions[1].strength, 0.65);
        QCOMPARE(back->conditions[1].crf, 0);
        QCOMPARE(back->conditions[1].frames, 1);
        QCOMPARE(back->stages, std::string("two"));
        QCOMPARE(back->request.stages, std::string("auto"));
        QCOMPARE(back->stagesReason, withImage.stagesReason);
        QCOMPARE(back->toJson(), withImage.toJson());
        // What became of the CUDA graphs: absent from a CPU run's recipe, kept from a GPU run's.
        QVERIFY(!nlohmann::json::parse(withImage.toJson()).contains("cuda_graphs"));
        withImage.cudaGraphs = "denoise: on: 1 captured, 6 of 8 forwards replayed; refine: on: 1 captured, 1 of 3 forwards replayed";
        auto graphs = output::Recipe::fromJson(withImage.toJson());
        QVERIFY(graphs.ok() && graphs->cudaGraphs == withImage.cudaGraphs && graphs->toJson() == withImage.toJson());
        QVERIFY(!nlohmann::json::parse(graphs->extraJson).contains("cuda_graphs"));
        // What ran where: kept when said, absent from older recipes.
        QVERIFY(v1->paths.empty() && !nlohmann::json::parse(withImage.toJson()).contains("paths"));
        withImage.paths = "240 FP8 tensor-core GEMM; self-attention: FP8 flash attention (cuDNN)";
        auto withPaths = output::Recipe::fromJson(withImage.toJson());
        QVERIFY(withPaths.ok() && withPaths->paths == withImage.paths && !nlohmann::json::parse(withPaths->extraJson).contains("paths"));
        // The new keys are known keys, not kept twice as unknown ones.
        QVERIFY(!nlohmann::json::parse(back->extraJson).contains("conditions"));
        for (const char* badCondition : {R"({"conditions":{"frame":1}})", R"({"conditions":[7]})", R"({"conditions":[{"frame":"nine"}]})",
                 R"({"conditions":[{"strength":"full"}]})", R"({"conditions":[{"from_end":"yes"}]})"}) {
            auto refused = output::Recipe::fromJson(badCondition);
            QVERIFY2(!refused.ok() && QString::fromStdString(refused.error().message).contains(QStringLiteral("conditions")), badCondition);
        }

        // Wrong types name the field; hostile nesting is refused before parsing.
        auto bad = output::Recipe::fromJson(R"({"recipe_version":1,"seed":"seven"})");
        QVERIFY(!bad.ok());
        QVERIFY2(QString::fromStdString(bad.error().message).contains(QStringLiteral("seed")), bad.error().message.c_str());
        QVERIFY(!output::Recipe::fromJson(std::string(5000, '[') + std::string(5000, ']')).ok());
        // Whole numbers written as floats beyond any integer are refused, not converted (found by
        // fuzz_recipe: the conversion itself was undefined).
        for (const char* huge : {R"({"width": 7.68e30})", R"({"seed": -1e300})", R"({"steps": 1e10})"}) {
            auto refused = output::Recipe::fromJson(huge);
            QVERIFY2(!refused.ok(), huge);
        }
        QCOMPARE(output::Recipe::fromJson(R"({"width": 768.0})")->request.width, std::int64_t(768));
    }

    void migratesStoredV1Database()
    {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("gallery.sqlite"));
        QVERIFY(QFile::copy(sourceFile(QStringLiteral("tests/core/data/gallery-v1.sqlite")), file));
        QFile::setPermissions(file, QFile::ReadOwner | QFile::WriteOwner);
        auto store = GalleryStore::open(file);
        QVERIFY2(store.ok(), store.ok() ? "" : store.error().message.c_str());
        QCOMPARE((*store)->schemaVersion(), GalleryStore::kSchemaVersion);
        const auto items = (*store)->items();
        QCOMPARE(items.size(), 3);
        // Newest first; the new columns filled from the recipes the v1 rows held.
        QCOMPARE(items[0].prompt, QStringLiteral("A lighthouse on a cliff at dusk"));
        QCOMPARE(items[0].width, 1280);
        QCOMPARE(items[0].seed, 1234567);
        QCOMPARE(items[0].family, QStringLiteral("ltx-2.3"));
        QVERIFY(items[0].hasRecipe);
        QVERIFY(items[0].recipeJson.isEmpty());  // the list leaves the text out
        QCOMPARE(items[1].seed, 7);
        QCOMPARE(items[1].frames, 17);
        QVERIFY(!items[2].hasRecipe);
        const auto full = (*store)->item(items[0].id);
        QVERIFY(full && output::Recipe::fromJson(full->recipeJson.toStdString()).ok());
        QCOMPARE((*store)->integrityCheck(), QStringLiteral("ok"));
        store->reset();
        // Opened again: nothing to migrate, nothing lost.
        auto reopened = GalleryStore::open(file);
        QVERIFY(reopened.ok());
        QCOMPARE((*reopened)->items().size(), 3);
    }

    void refusesNewerAndDamagedDatabases()
    {
        QTemporaryDir dir;
        const QString newer = dir.filePath(QStringLiteral("newer.sqlite"));
        {
            auto s = GalleryStore::open(newer);
            QVERIFY(s.ok());
        }
        {
            auto db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("raw"));
            db.setDatabaseName(newer);
            QVERIFY(db.open());
            QSqlQuery(db).exec(QStringLiteral("PRAGMA user_version=99"));
            db.close();
        }
        QSqlDatabase::removeDatabase(QStringLiteral("raw"));
        auto s = GalleryStore::open(newer);
        QVERIFY(!s.ok());
        QVERIFY2(QString::fromStdString(s.error().message).contains(QStringLiteral("newer Vireo")), s.error().message.c_str());

        const QString junk = dir.filePath(QStringLiteral("junk.sqlite"));
        QFile f(junk);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray(8192, 'x'));
        f.close();
        auto j = GalleryStore::open(junk);
        QVERIFY(!j.ok());
        QVERIFY2(QString::fromStdString(j.error().message).contains(junk), j.error().message.c_str());
    }

    void outputsCarryTheirRecipe()
    {
        QTemporaryDir dir;
        const QString clip = dir.filePath(QStringLiteral("clip.mp4"));
        writeClip(clip, sampleRecipe(41, "a heron lifts off a misty lake"));
        QString problem;
        const auto fromClip = gallery::readEmbeddedRecipe(clip, &problem);
        QVERIFY2(fromClip.has_value(), qPrintable(problem));
        QCOMPARE(fromClip->request.seed, 41);
        QCOMPARE(fromClip->request.prompt, std::string("a heron lifts off a misty lake"));

        QImage image(64, 48, QImage::Format_RGB32);
        image.fill(QColor(30, 90, 160));
        const QString png = dir.filePath(QStringLiteral("still.png"));
        QVERIFY(output::writeImage(png.toStdString(), image, sampleRecipe(42, "a still life with pears")).ok());
        auto again = output::writeImage(png.toStdString(), image, sampleRecipe(43, "over it"));
        QVERIFY(!again.ok());  // never overwritten
        QVERIFY(QDir(dir.path()).entryList(QStringList{QStringLiteral(".*part*")}, QDir::Hidden | QDir::Files).isEmpty());
        const auto fromPng = gallery::readEmbeddedRecipe(png, &problem);
        QVERIFY2(fromPng.has_value(), qPrintable(problem));
        QCOMPARE(fromPng->request.seed, 42);
        // The prompt comes back byte for byte from both kinds of file: runs of spaces, tabs,
        // line breaks, no-break spaces and other scripts tokenize differently if changed.
        const std::string spaced = "  two  spaces,\ta tab,\n\na blank line,\u00a0no-break\u00a0spaces, \u65e5\u672c\u8a9e, "
                                   "\u0627\u0644\u0639\u0631\u0628\u064a\u0629   ";
        const QString spacedPng = dir.filePath(QStringLiteral("spaced.png"));
        QVERIFY(output::writeImage(spacedPng.toStdString(), image, sampleRecipe(44, spaced)).ok());
        const auto spacedBack = gallery::readEmbeddedRecipe(spacedPng, &problem);
        QVERIFY2(spacedBack.has_value(), qPrintable(problem));
        QVERIFY2(spacedBack->request.prompt == spaced, spacedBack->request.prompt.c_str());
        const QString spacedClip = dir.filePath(QStringLiteral("spaced.mp4"));
        writeClip(spacedClip, sampleRecipe(45, spaced));
        const auto spacedClipBack = gallery::readEmbeddedRecipe(spacedClip, &problem);
        QVERIFY2(spacedClipBack.has_value() && spacedClipBack->request.prompt == spaced, qPrintable(problem));

        auto thumb = gallery::makeThumbnail(clip);
        QVERIFY2(thumb.ok(), thumb.ok() ? "" : thumb.error().message.c_str());
        QImage decoded;
        QVERIFY(decoded.loadFromData(*thumb, "JPEG"));
        QCOMPARE(decoded.size(), QSize(96, 64));
        QVERIFY(gallery::makeThumbnail(png).ok());
    }

    void rescanAdoptsAndMarksMissing()
    {
        QTemporaryDir dir;
        const QString outputs = dir.filePath(QStringLiteral("outputs"));
        QDir().mkpath(outputs + QStringLiteral("/2026-11/deeper"));
        writeClip(outputs + QStringLiteral("/with-recipe.mp4"), sampleRecipe(5, "adopted after a crash"));
        writeClip(outputs + QStringLiteral("/plain.mp4"), std::nullopt);
        writeClip(outputs + QStringLiteral("/2026-11/deeper/nested.mp4"), sampleRecipe(6, "nested"));
        QImage image(32, 32, QImage::Format_RGB32);
        image.fill(Qt::darkGreen);
        QVERIFY(output::writeImage(QString(outputs + QStringLiteral("/still.png")).toStdString(), image, sampleRecipe(8, "still")).ok());
        // Cut short: a copy interrupted, a disk that filled up.
        QFile whole(outputs + QStringLiteral("/with-recipe.mp4"));
        QVERIFY(whole.open(QIODevice::ReadOnly));
        QFile cut(outputs + QStringLiteral("/truncated.mp4"));
        QVERIFY(cut.open(QIODevice::WriteOnly));
        cut.write(whole.read(whole.size() / 3));
        cut.close();
        QFile garbage(outputs + QStringLiteral("/garbage.png"));
        QVERIFY(garbage.open(QIODevice::WriteOnly));
        garbage.write("\x89PNG\r\n\x1a\n this is not an image");
        garbage.close();
        // Never listed: a file still being written, other files, a link out of the folder.
        QFile::copy(outputs + QStringLiteral("/plain.mp4"), outputs + QStringLiteral("/.plain.mp4.part"));
        QFile notes(outputs + QStringLiteral("/notes.txt"));
        QVERIFY(notes.open(QIODevice::WriteOnly));
        notes.close();
        // The start image kept beside a video for its recipe is not an output of its own.
        QVERIFY(image.save(outputs + QStringLiteral("/with-recipe.cond0.png")));
        QVERIFY(image.save(outputs + QStringLiteral("/with-recipe.cond1-2.png")));
        writeClip(dir.filePath(QStringLiteral("elsewhere.mp4")), std::nullopt);
        QVERIFY(QFile::link(dir.filePath(QStringLiteral("elsewhere.mp4")), outputs + QStringLiteral("/link.mp4")));

        auto store = GalleryStore::open(dir.filePath(QStringLiteral("gallery.sqlite")));
        QVERIFY(store.ok());
        auto added = (*store)->rescan(outputs);
        QVERIFY2(added.ok(), added.ok() ? "" : added.error().message.c_str());
        QHash<QString, gallery::GalleryItem> byName;
        for (const auto& i : (*store)->items())
            byName.insert(QFileInfo(i.path).fileName(), i);
        QVERIFY2(byName.size() == 6 && *added == 6, qPrintable(QStringList(byName.keys()).join(QLatin1Char(' '))));
        QVERIFY(byName[QStringLiteral("with-recipe.mp4")].hasRecipe);
        QCOMPARE(byName[QStringLiteral("with-recipe.mp4")].seed, 5);
        QCOMPARE(byName[QStringLiteral("with-recipe.mp4")].prompt, QStringLiteral("adopted after a crash"));
        QVERIFY(byName[QStringLiteral("nested.mp4")].hasRecipe);
        QCOMPARE(byName[QStringLiteral("still.png")].kind, QStringLiteral("image"));
        QCOMPARE(byName[QStringLiteral("still.png")].seed, 8);
        QVERIFY(!byName[QStringLiteral("plain.mp4")].hasRecipe);
        QCOMPARE(byName[QStringLiteral("plain.mp4")].width, 96);  // sizes read from the file
        QVERIFY(byName[QStringLiteral("plain.mp4")].frames >= 9);
        for (const auto* damaged : {"truncated.mp4", "garbage.png"}) {
            const auto& i = byName[QString::fromLatin1(damaged)];
            if (i.thumbnailState != 2) {
                // A file that probes fine but has no decodable frame fails at its thumbnail.
                auto t = gallery::makeThumbnail(i.path);
                QVERIFY2(!t.ok(), damaged);
                QVERIFY2(QString::fromStdString(t.error().message).contains(QString::fromLatin1(damaged)), t.error().message.c_str());
            } else {
                QVERIFY2(i.problem.contains(QString::fromLatin1(damaged)), qPrintable(i.problem));
            }
        }
        QCOMPARE(*(*store)->rescan(outputs), 0);  // nothing twice

        QVERIFY(QFile::remove(outputs + QStringLiteral("/plain.mp4")));
        QCOMPARE(*(*store)->rescan(outputs), 0);
        QVERIFY((*store)->item(byName[QStringLiteral("plain.mp4")].id)->missing);
        writeClip(outputs + QStringLiteral("/plain.mp4"), std::nullopt);
        QCOMPARE(*(*store)->rescan(outputs), 0);
        QVERIFY(!(*store)->item(byName[QStringLiteral("plain.mp4")].id)->missing);

        // Relocating follows a moved file; forgetting removes the row only.
        const QString moved = dir.filePath(QStringLiteral("moved.mp4"));
        QVERIFY(QFile::rename(outputs + QStringLiteral("/2026-11/deeper/nested.mp4"), moved));
        QVERIFY((*store)->relocate(byName[QStringLiteral("nested.mp4")].id, moved).ok());
        QCOMPARE((*store)->item(byName[QStringLiteral("nested.mp4")].id)->path, moved);
        QVERIFY((*store)->remove(byName[QStringLiteral("nested.mp4")].id).ok());
        QVERIFY(QFileInfo::exists(moved));
        QCOMPARE((*store)->integrityCheck(), QStringLiteral("ok"));
    }

    // Outputs made by anyone (issue #25): a megabyte prompt is listed by its start and kept in the
    // index within bounds, a date in the year 9999 does not sort first forever, a name that is
    // not UTF-8 is said, and the database is never written through a link.
    void hostileOutputsAreAdoptedWithinBounds()
    {
        QTemporaryDir dir;
        const QString outputs = dir.filePath(QStringLiteral("outputs"));
        QDir().mkpath(outputs);
        auto huge = sampleRecipe(3, std::string(1 << 20, 'w'));
        writeClip(outputs + QStringLiteral("/huge-prompt.mp4"), huge);
        auto future = sampleRecipe(4, "from the future");
        future.created = "9999-12-31T23:59:59Z";
        writeClip(outputs + QStringLiteral("/future.mp4"), future);
        writeClip(outputs + QStringLiteral("/today.mp4"), sampleRecipe(5, "today"));
        // A name in Latin-1 (0xE9), as an old camera or a copy from another system writes it.
        const QByteArray latin1 = QFile::encodeName(outputs) + "/caf\xe9.mp4";
        const QString placeholder = dir.filePath(QStringLiteral("placeholder"));
        QVERIFY(QFile::copy(outputs + QStringLiteral("/today.mp4"), placeholder));
        QVERIFY(::rename(QFile::encodeName(placeholder).constData(), latin1.constData()) == 0);

        const QString database = dir.filePath(QStringLiteral("gallery.sqlite"));
        auto store = GalleryStore::open(database);
        QVERIFY(store.ok());
        auto added = (*store)->rescan(outputs);
        QVERIFY(!added.ok());
        QVERIFY2(added.error().message.find("not valid UTF-8") != std::string::npos
                && added.error().message.find("rename it") != std::string::npos,
            added.error().message.c_str());
        QHash<QString, gallery::GalleryItem> byName;
        const auto items = (*store)->items();
        for (const auto& i : items)
            byName.insert(QFileInfo(i.path).fileName(), i);
        QVERIFY(byName.contains(QStringLiteral("huge-prompt.mp4")) && byName.contains(QStringLiteral("future.mp4")));
        QVERIFY2(byName[QStringLiteral("huge-prompt.mp4")].prompt.size() <= 4096,
            qPrintable(QString::number(byName[QStringLiteral("huge-prompt.mp4")].prompt.size())));
        const auto full = (*store)->item(byName[QStringLiteral("huge-prompt.mp4")].id);
        QVERIFY(full && full->hasRecipe && full->recipeJson.size() < 300 * 1024);
        QVERIFY2(QFileInfo(database).size() < 4 << 20, qPrintable(QString::number(QFileInfo(database).size())));
        QVERIFY(byName[QStringLiteral("future.mp4")].created <= QDateTime::currentDateTimeUtc().addDays(1));
        store->reset();
        // Qt cannot name it to remove it with the folder.
        ::unlink(latin1.constData());

        // A link where the database goes: refused, and the file it points at left as it was.
        const QString victim = dir.filePath(QStringLiteral("victim.txt"));
        QFile v(victim);
        QVERIFY(v.open(QIODevice::WriteOnly));
        v.write("the user's own file");
        v.close();
        const QString linked = dir.filePath(QStringLiteral("linked.sqlite"));
        QVERIFY(QFile::link(victim, linked));
        auto refused = GalleryStore::open(linked);
        QVERIFY(!refused.ok());
        QVERIFY2(refused.error().message.find("symbolic link") != std::string::npos, refused.error().message.c_str());
        QVERIFY(v.open(QIODevice::ReadOnly));
        QCOMPARE(v.readAll(), QByteArray("the user's own file"));
    }

    // Two engines finishing the same prompt in the same second get two names, and only the
    // partial files of writers that are gone are cleaned up (both temporary-name forms).
    void freshNamesAreClaimedAndOnlyGoneWritersPartialsGo()
    {
        QTemporaryDir dir;
        const auto first = output::freshOutputPath(dir.path().toStdString(), "a fox", "mp4");
        const auto second = output::freshOutputPath(dir.path().toStdString(), "a fox", "mp4");
        QVERIFY(first && second);
        QVERIFY2(*first != *second, first->c_str());
        const auto touch = [&](const QString& name) {
            QFile f(dir.filePath(name));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("partial");
        };
        const QString own = QString::number(QCoreApplication::applicationPid());
        // 999999999 is past any pid_max: a writer that is surely gone.
        touch(QStringLiteral(".a.mp4.part999999999"));
        touch(QStringLiteral(".b.mp4.part999999999-3"));
        touch(QStringLiteral(".c.mp4.part") + own + QStringLiteral("-1"));
        touch(QStringLiteral(".d.mp4.part999999999-"));
        touch(QStringLiteral(".e.mp4.part999999999-x"));
        QCOMPARE(output::removeStalePartials(dir.path().toStdString()), 2);
        const auto left = QDir(dir.path()).entryList(QDir::Hidden | QDir::Files);
        QCOMPARE(left,
            (QStringList{QStringLiteral(".c.mp4.part") + own + QStringLiteral("-1"), QStringLiteral(".d.mp4.part999999999-"),
                QStringLiteral(".e.mp4.part999999999-x")}));
    }

    // A watched folder (a batch's, written by tasks elsewhere): what lands there is adopted within
    // a few seconds while the gallery is open, and a finished folder gets a last look and is
    // forgotten, as is one that is gone.
    void watchedFoldersAdoptOutputsAsTheyLand()
    {
        QTemporaryDir dir;
        const QString batch = dir.filePath(QStringLiteral("batch")), gone = dir.filePath(QStringLiteral("gone"));
        QVERIFY(QDir().mkpath(batch));
        gallery::Gallery g(dir.filePath(QStringLiteral("gallery.sqlite")), dir.filePath(QStringLiteral("outputs")));
        QVERIFY(g.open());
        QStringList watched{batch, gone};
        bool finished = false;
        g.setWatch({[&] { return watched; }, [&](const QString&) { return finished; }, [&](const QString& f) { watched.removeAll(f); }});
        QTest::qWait(500);
        vireo::test::writeClip(batch + QStringLiteral("/fox.mp4"), sampleRecipe(61, "a fox lands in the batch"));
        QTRY_VERIFY_WITH_TIMEOUT(
            std::any_of(g.items().begin(), g.items().end(), [](const auto& i) { return i.path.endsWith(QStringLiteral("/fox.mp4")); }),
            20000);
        QCOMPARE(watched, QStringList{batch});  // the folder that does not exist was dropped
        finished = true;
        vireo::test::writeClip(batch + QStringLiteral("/owl.mp4"), sampleRecipe(62, "the last one"));
        QTRY_VERIFY_WITH_TIMEOUT(watched.isEmpty(), 20000);
        QTRY_VERIFY_WITH_TIMEOUT(
            std::any_of(g.items().begin(), g.items().end(), [](const auto& i) { return i.path.endsWith(QStringLiteral("/owl.mp4")); }),
            20000);
    }

    void survivesKilledWriters()
    {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("gallery.sqlite"));
        QSet<QString> committed, removing, removed;
        int kills = 0;
        for (int round = 0; round < 24; ++round) {
            QProcess writer;
            auto env = QProcessEnvironment::systemEnvironment();
            env.insert(QStringLiteral("VIREO_GALLERY_WRITER"), file);
            env.insert(QStringLiteral("VIREO_GALLERY_WRITER_DIR"), dir.path());
            writer.setProcessEnvironment(env);
            writer.start(QCoreApplication::applicationFilePath(), {});
            QVERIFY(writer.waitForStarted());
            // Timed from the open, not from the start: a loaded machine can take longer than
            // the whole window to start a process. Then anywhere from just after opening the
            // database to deep in a run of commits.
            QByteArray out;
            while (!out.contains("opened\n") && writer.waitForReadyRead(20000))
                out += writer.readAllStandardOutput();
            QVERIFY2(out.contains("opened\n"), qPrintable(QString::fromUtf8(writer.readAllStandardError())));
            QTest::qWait(static_cast<int>(QRandomGenerator::global()->bounded(0, 380)));
            const bool wasRunning = writer.state() == QProcess::Running;
            writer.kill();
            QVERIFY(writer.waitForFinished(10000));
            kills += wasRunning ? 1 : 0;
            QVERIFY2(wasRunning, qPrintable(QString::fromUtf8(writer.readAllStandardError())));
            out += writer.readAllStandardOutput();
            for (const auto& line : QString::fromUtf8(out).split(QLatin1Char('\n'))) {
                // A line cut by the kill was never completed: only whole lines count.
                if (line.startsWith(QStringLiteral("committed ")) && line.endsWith(QStringLiteral(".mp4")))
                    committed.insert(line.mid(10));
                else if (line.startsWith(QStringLiteral("removing ")))
                    removing.insert(line.mid(9));
                else if (line.startsWith(QStringLiteral("removed ")) && line.endsWith(QStringLiteral(".mp4")))
                    removed.insert(line.mid(8));
            }
            auto store = GalleryStore::open(file);
            QVERIFY2(store.ok(), store.ok() ? "" : store.error().message.c_str());
            QCOMPARE((*store)->integrityCheck(), QStringLiteral("ok"));
            QSet<QString> present;
            for (const auto& i : (*store)->items())
                present.insert(i.path);
            for (const auto& path : committed)
                if (!removing.contains(path))
                    QVERIFY2(
                        present.contains(path), qPrintable(QStringLiteral("round %1: %2 was committed and is gone").arg(round).arg(path)));
            for (const auto& path : removed)
                QVERIFY2(!present.contains(path), qPrintable(path));
        }
        qInfo("%d writers killed with SIGKILL, %lld rows committed before the kills, database sound each time", kills,
            static_cast<long long>(committed.size()));
        QVERIFY(committed.size() > 24);
    }

    void fullDiskIsReportedAndNothingIsLost()
    {
        QTemporaryDir mountPoint;
        QVERIFY2(::mount("tmpfs", mountPoint.path().toLocal8Bit().constData(), "tmpfs", 0, "size=1m") == 0,
            "cannot mount a tmpfs for the disk-full test (needs root, as the CI machine has)");
        const auto unmount = qScopeGuard([&] { ::umount2(mountPoint.path().toLocal8Bit().constData(), MNT_DETACH); });
        QTemporaryDir dir;
        const QString clip = dir.filePath(QStringLiteral("done.mp4"));
        writeClip(clip, sampleRecipe(1, "kept"));
        const auto clipBytes = QFileInfo(clip).size();
        {
            auto store = GalleryStore::open(mountPoint.filePath(QStringLiteral("gallery.sqlite")));
            QVERIFY(store.ok());
            auto first = (*store)->add(clip, sampleRecipe(1, "kept"));
            QVERIFY(first.ok());
            QFile filler(mountPoint.filePath(QStringLiteral("filler")));
            QVERIFY(filler.open(QIODevice::WriteOnly));
            const QByteArray chunk(4096, 'f');
            while (filler.write(chunk) == chunk.size() && filler.flush()) {}
            filler.close();
            // A thumbnail, then a row with a long prompt: both refused with a message that says so.
            auto thumb = (*store)->setThumbnail(*first, QByteArray(256 * 1024, 't'));
            QVERIFY(!thumb.ok());
            QVERIFY2(QString::fromStdString(thumb.error().message).contains(QStringLiteral("disk is full")), thumb.error().message.c_str());
            auto row = (*store)->add(dir.filePath(QStringLiteral("other.mp4")), sampleRecipe(2, std::string(300000, 'x')));
            QVERIFY(!row.ok());
            QVERIFY2(QString::fromStdString(row.error().message).contains(QStringLiteral("disk is full")), row.error().message.c_str());
            QVERIFY2(
                QString::fromStdString(row.error().message).contains(QStringLiteral("output file is kept")), row.error().message.c_str());
            QCOMPARE(QFileInfo(clip).size(), clipBytes);
            QVERIFY(QFile::remove(mountPoint.filePath(QStringLiteral("filler"))));
            QVERIFY((*store)->setThumbnail(*first, QByteArray(1024, 't')).ok());
            QVERIFY((*store)->add(dir.filePath(QStringLiteral("other.mp4")), sampleRecipe(2, "fits now")).ok());
        }
        auto store = GalleryStore::open(mountPoint.filePath(QStringLiteral("gallery.sqlite")));
        QVERIFY(store.ok());
        QCOMPARE((*store)->integrityCheck(), QStringLiteral("ok"));
        QCOMPARE((*store)->items().size(), 2);
    }
};

int main(int argc, char** argv)
{
    if (qEnvironmentVariableIsSet("VIREO_GALLERY_WRITER")) {
        QCoreApplication app(argc, argv);
        return writerLoop(qEnvironmentVariable("VIREO_GALLERY_WRITER"), qEnvironmentVariable("VIREO_GALLERY_WRITER_DIR"));
    }
    QGuiApplication app(argc, argv);
    TestGalleryStore test;
    return QTest::qExec(&test, argc, argv);
}

#include "test_gallerystore.moc"
