// The Gallery page driven offscreen over real files: outputs adopted from the outputs folder
// and added live by another connection (as vireo-cli generate does), filtering and sorting,
// the detail view playing a clip and stepping frames, "Generate again" and "Vary" filling the
// Generate page, missing and damaged files, delete to the trash with undo, export. A
// benchmark prints how long 10,000 rows take to first paint and to scroll to the end.
// Screenshots of the grid and the detail view when VIREO_SCREENSHOT_DIR is set.
#include "core/gallery/gallery.h"
#include "core/gallery/gallerystore.h"
#include "core/output/outputfile.h"
#include "core/settings/studiosettings.h"
#include "core/studio/studio.h"
#include "tests/core/mediafixtures.h"
#include "tests/ui/studiowindow.h"
#include "tests/ui/uitest.h"
#include "ui/models/gallerymodel.h"
#include "ui/pages/gallerypage.h"
#include "ui/pages/generatepage.h"
#include "ui/pages/lorapanel.h"
#include "ui/theme.h"
#include "ui/widgets/videoview.h"

#include <QApplication>
#include <QBuffer>
#include <QCheckBox>
#include <QComboBox>
#include <QCryptographicHash>
#include <QDir>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QMediaPlayer>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSettings>
#include <QSpinBox>
#include <QSqlDatabase>
#include <QSqlQuery>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>

#include <cmath>
#include <cstdio>
#include <cstring>

using vireo::gallery::Gallery;
using vireo::gallery::GalleryStore;
using vireo::ui::GalleryModel;
using vireo::ui::GalleryPage;
using vireo::ui::GeneratePage;
using vireo::ui::MainWindow;

using vireo::test::child;
using vireo::test::saveScreenshot;
using vireo::test::tinyModel;

namespace {

// The recipe "Generate again" must reproduce: every field away from the page's defaults.
vireo::output::Recipe fullRecipe()
{
    vireo::output::Recipe r;
    r.app = "vireo-studio test";
    r.modelKey = QString(QStringLiteral("local:") + tinyModel()).toStdString();
    r.modelTitle = "tiny LTX-2.3";
    r.modelVersion = "2.3";
    r.request.prompt = "a red fox trots across a frozen lake at dawn, breath steaming, ice creaking";
    r.request.negativePrompt = "blurry, watermark";
    r.request.seed = 424242;
    r.request.schedule = "dev";
    r.request.steps = 13;
    r.request.guidance = 3.5;
    r.request.audioGuidance = 2.25;
    r.request.guidanceRescale = 0.3;
    r.request.width = 160;
    r.request.height = 96;
    r.request.frames = 25;
    r.request.fps = 25;
    r.device = "cpu";
    r.paths = "68 dense GEMM; self-attention: float32 SDPA (its GEMMs do not run FP8 here)";
    r.created = "2026-11-30T18:00:00Z";
    r.secondsPerPhase = {{"encode prompt", 0.4}, {"denoise", 3.2}, {"decode video", 0.6}, {"mux", 0.1}};
    r.files.push_back({QString(tinyModel() + QStringLiteral("/transformer/diffusion_pytorch_model.safetensors")).toStdString(), 22630400,
        std::string(64, 'c')});
    return r;
}

const char* kPrompts[] = {
    "sunset over rolling hills, warm light, a slow pan to the right",
    "a lighthouse on a cliff at dusk, waves crashing, gulls calling",
    "aurora over a snowy valley, the camera rises slowly",
    "desert dunes at golden hour, wind lifting sand off the crests",
    "a misty pine forest at dawn, birdsong, soft rays through the trees",
    "lavender fields under a violet sky, bees humming",
    "a quiet harbour at blue hour, ropes creaking, distant bells",
    "tropical island at noon, turquoise water, palm leaves rustling",
};

}  // namespace

class TestGalleryGui : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QVERIFY(m_work.isValid());
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setOrganizationName(QStringLiteral("VireoTest"));
        QApplication::setApplicationName(QStringLiteral("vireo-gallery-test"));
        QSettings().clear();
        for (const auto* suffix : {"", "-wal", "-shm"})
            QFile::remove(vireo::core::Studio::galleryDatabaseFile() + QString::fromLatin1(suffix));
        QSettings().setValue(QStringLiteral("hub/cacheDir"), m_work.filePath(QStringLiteral("cache")));
        QSettings().setValue(QStringLiteral("hub/offline"), true);
        QSettings().setValue(QStringLiteral("studio/device"), QStringLiteral("cpu"));
        QSettings().setValue(QStringLiteral("studio/outputsFolder"), outputs());
        vireo::ui::applyStudioTheme(*qApp);
        QDir().mkpath(outputs());
        // Outputs made before this window opened (their rows never written, as after a crash).
        for (int i = 0; i < 8; ++i) {
            auto r = fullRecipe();
            r.request.prompt = kPrompts[i];
            r.request.seed = 1000 + i;
            r.modelTitle = i % 3 == 0 ? "LTX-2.3 · Distilled FP8" : "tiny LTX-2.3";
            r.created = QStringLiteral("2026-11-%1T1%2:00:00Z").arg(20 + i).arg(i).toStdString();
            vireo::test::writeClip(QDir(outputs()).filePath(QStringLiteral("clip-%1.mp4").arg(i)), r, 25, 256, 144, 24, i);
        }
        vireo::test::writeClip(QDir(outputs()).filePath(QStringLiteral("fox.mp4")), fullRecipe(), 25, 160, 96, 25, 3);
    }

    void gridAdoptsFiltersAndSorts()
    {
        auto w = vireo::test::openStudioWindow();
        w->resize(1280, 820);
        w->show();
        w->showPage(MainWindow::Page::Gallery);
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        auto* page = w->galleryPage();
        QTRY_COMPARE_WITH_TIMEOUT(page->model()->rowCount(), 9, 20000);
        QTRY_VERIFY(!w->studio()->gallery()->scanning());
        // Newest first, then the filters.
        QCOMPARE(
            page->filter()->index(0, 0).data(GalleryModel::PromptRole).toString(), QString::fromStdString(fullRecipe().request.prompt));
        QTest::keyClicks(child<QLineEdit>(page, "search"), QStringLiteral("LIGHTHOUSE"));
        QCOMPARE(page->filter()->rowCount(), 1);
        QVERIFY(child<QLabel>(page, "count")->text().contains(QStringLiteral("1 of 9")));
        child<QLineEdit>(page, "search")->clear();
        auto* models = child<QComboBox>(page, "modelFilter");
        QCOMPARE(models->count(), 3);  // all, and the two models
        models->setCurrentIndex(models->findData(QStringLiteral("LTX-2.3 · Distilled FP8")));
        QCOMPARE(page->filter()->rowCount(), 3);
        models->setCurrentIndex(0);
        // By date: the clips' recipes date them in November; the one from the CLI (today) comes later.
        auto* when = child<QComboBox>(page, "dateFilter");
        when->setCurrentIndex(when->findData(7));
        QCOMPARE(page->filter()->rowCount(),
            std::count_if(w->studio()->gallery()->items().begin(), w->studio()->gallery()->items().end(),
                [](const auto& i) { return i.created >= QDateTime(QDate::currentDate().addDays(-6), QTime(0, 0)); }));
        when->setCurrentIndex(0);
        QCOMPARE(page->filter()->rowCount(), 9);
        auto* sort = child<QComboBox>(page, "sort");
        sort->setCurrentIndex(1);  // oldest first
        QCOMPARE(page->filter()->index(0, 0).data(GalleryModel::PromptRole).toString(), QString::fromLatin1(kPrompts[0]));
        sort->setCurrentIndex(3);  // by prompt
        QCOMPARE(page->filter()->index(0, 0).data(GalleryModel::PromptRole).toString(), QString::fromLatin1(kPrompts[1]));
        sort->setCurrentIndex(0);

        // Thumbnails arrive for the tiles on screen.
        auto* grid = page->grid();
        QTRY_VERIFY_WITH_TIMEOUT(!grid->model()->index(0, 0).data(GalleryModel::ThumbnailRole).value<QImage>().isNull(), 20000);
        QTRY_VERIFY_WITH_TIMEOUT(!grid->model()->index(8, 0).data(GalleryModel::ThumbnailRole).value<QImage>().isNull(), 20000);
        grid->viewport()->update();
        QTest::qWait(200);
        saveScreenshot(w.get(), QStringLiteral("gallery-grid.png"));

        // An output recorded by another connection (vireo-cli generate) appears without a restart.
        const QString fromCli = QDir(outputs()).filePath(QStringLiteral("from-cli.mp4"));
        auto r = fullRecipe();
        r.request.prompt = "made by vireo-cli";
        r.created = "2026-12-01T09:00:00Z";
        vireo::test::writeClip(fromCli, r);
        {
            auto other = GalleryStore::open(vireo::core::Studio::galleryDatabaseFile());
            QVERIFY(other.ok());
            QVERIFY((*other)->add(fromCli, r).ok());
        }
        QTRY_COMPARE_WITH_TIMEOUT(page->model()->rowCount(), 10, 5000);
        QCOMPARE(page->filter()->index(0, 0).data(GalleryModel::PromptRole).toString(), QStringLiteral("made by vireo-cli"));
    }

    void detailPlaysStepsAndGeneratesAgain()
    {
        auto w = vireo::test::openStudioWindow();
        w->resize(1280, 820);
        w->show();
        w->showPage(MainWindow::Page::Gallery);
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        auto* page = w->galleryPage();
        const qint64 id = idOf(w->studio()->gallery(), QStringLiteral("fox.mp4"));
        QVERIFY(id > 0);
        // Opened as a user does: the tile activated in the grid.
        const auto index = page->filter()->mapFromSource(page->model()->indexOfId(id));
        QVERIFY(index.isValid());
        page->grid()->setCurrentIndex(index);
        emit page->grid()->activated(index);
        QCOMPARE(page->currentItem(), id);
        auto* player = page->player();
        QVERIFY(player);
        QCOMPARE(QFileInfo(player->source().toLocalFile()).fileName(), QStringLiteral("fox.mp4"));
        QTRY_VERIFY_WITH_TIMEOUT(player->mediaStatus() != QMediaPlayer::LoadingMedia, 10000);
        QVERIFY2(player->error() == QMediaPlayer::NoError, qPrintable(player->errorString()));
        QTRY_VERIFY_WITH_TIMEOUT(player->duration() > 900, 10000);  // 25 frames at 25 fps
        QVERIFY(player->hasVideo() && player->hasAudio());
        QTRY_VERIFY_WITH_TIMEOUT(!page->findChild<vireo::ui::VideoView*>(QStringLiteral("video"))->currentFrame().isNull(), 10000);
        auto* recipe = child<QTextBrowser>(page, "recipe");
        QVERIFY(recipe->toPlainText().contains(QStringLiteral("a red fox trots")));
        QVERIFY(recipe->toPlainText().contains(QStringLiteral("424242")));
        QVERIFY(recipe->toPlainText().contains(QStringLiteral("160 × 96")));
        // What ran where, as the engine recorded it at load.
        QVERIFY2(
            recipe->toPlainText().contains(QStringLiteral("Compute")) && recipe->toPlainText().contains(QStringLiteral("68 dense GEMM")),
            qPrintable(recipe->toPlainText()));

        // Frame stepping pauses and lands in the middle of the next frame.
        QTest::mouseClick(child<QPushButton>(page, "nextFrame"), Qt::LeftButton);
        QTest::mouseClick(child<QPushButton>(page, "nextFrame"), Qt::LeftButton);
        QVERIFY(player->playbackState() != QMediaPlayer::PlayingState);
        QVERIFY2(child<QLabel>(page, "time")->text().contains(QStringLiteral("of 25")), qPrintable(child<QLabel>(page, "time")->text()));
        // The picture follows the counter (issue #27: only the counter moved while paused).
        auto* view = page->findChild<vireo::ui::VideoView*>(QStringLiteral("video"));
        QTest::qWait(300);
        const QImage two = view->currentFrame();
        QTest::mouseClick(child<QPushButton>(page, "nextFrame"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(view->currentFrame() != two, 5000);
        const QImage four = view->currentFrame();
        QTest::mouseClick(child<QPushButton>(page, "prevFrame"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(view->currentFrame() != four, 5000);
        QTest::qWait(300);
        saveScreenshot(w.get(), QStringLiteral("gallery-detail.png"));

        // Generate again: the Generate page holds the recipe's values, the same seed, its model.
        QTest::mouseClick(child<QPushButton>(page, "generateAgain"), Qt::LeftButton);
        QCOMPARE(w->currentPage(), MainWindow::Page::Generate);
        auto* gen = w->generatePage();
        const auto r = fullRecipe();
        QCOMPARE(child<QComboBox>(gen, "model")->currentData().toString(), QString::fromStdString(r.modelKey));
        QCOMPARE(child<QPlainTextEdit>(gen, "prompt")->toPlainText(), QString::fromStdString(r.request.prompt));
        QCOMPARE(child<QPlainTextEdit>(gen, "negative")->toPlainText(), QString::fromStdString(r.request.negativePrompt));
        QCOMPARE(child<QSpinBox>(gen, "width")->value(), 160);
        QCOMPARE(child<QSpinBox>(gen, "height")->value(), 96);
        QCOMPARE(child<QSpinBox>(gen, "frames")->value(), 25);
        QCOMPARE(child<QDoubleSpinBox>(gen, "fps")->value(), 25.0);
        QCOMPARE(child<QComboBox>(gen, "schedule")->currentData().toString(), QStringLiteral("dev"));
        QCOMPARE(child<QSpinBox>(gen, "steps")->value(), 13);
        QCOMPARE(child<QDoubleSpinBox>(gen, "guidance")->value(), 3.5);
        QCOMPARE(child<QDoubleSpinBox>(gen, "audioGuidance")->value(), 2.25);
        QCOMPARE(child<QDoubleSpinBox>(gen, "rescale")->value(), 0.3);
        QVERIFY(!child<QCheckBox>(gen, "randomSeed")->isChecked());
        QCOMPARE(child<QSpinBox>(gen, "seed")->value(), 424242);
        QTRY_VERIFY(gen->canGenerate());

        // Vary: the same, with a new seed.
        w->showPage(MainWindow::Page::Gallery);
        QTest::mouseClick(child<QPushButton>(page, "vary"), Qt::LeftButton);
        QCOMPARE(w->currentPage(), MainWindow::Page::Generate);
        QVERIFY(child<QCheckBox>(gen, "randomSeed")->isChecked());
        QCOMPARE(child<QSpinBox>(gen, "steps")->value(), 13);
        QCOMPARE(child<QPlainTextEdit>(gen, "prompt")->toPlainText(), QString::fromStdString(r.request.prompt));
    }

    void missingDamagedTrashUndoAndExport()
    {
        auto w = vireo::test::openStudioWindow();
        w->resize(1280, 820);
        w->show();
        w->showPage(MainWindow::Page::Gallery);
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        auto* page = w->galleryPage();
        auto* gallery = w->studio()->gallery();

        // Damaged: a copy cut short gets a placeholder and says why.
        const QString cut = QDir(outputs()).filePath(QStringLiteral("cut-short.mp4"));
        {
            QFile whole(QDir(outputs()).filePath(QStringLiteral("clip-1.mp4")));
            QVERIFY(whole.open(QIODevice::ReadOnly));
            QFile part(cut);
            QVERIFY(part.open(QIODevice::WriteOnly));
            part.write(whole.read(whole.size() / 2));
        }
        gallery->rescan();
        QTRY_VERIFY_WITH_TIMEOUT(idOf(gallery, QStringLiteral("cut-short.mp4")) > 0, 10000);
        const qint64 damaged = idOf(gallery, QStringLiteral("cut-short.mp4"));
        const auto damagedIndex = page->model()->indexOfId(damaged);
        QTRY_VERIFY_WITH_TIMEOUT(!damagedIndex.data(GalleryModel::ProblemRole).toString().isEmpty(), 10000);
        QVERIFY2(damagedIndex.data(GalleryModel::ProblemRole).toString().contains(QStringLiteral("cut short")),
            qPrintable(damagedIndex.data(GalleryModel::ProblemRole).toString()));
        QVERIFY(page->openItem(damaged));
        QVERIFY(child<QLabel>(page, "placeholder")->isVisible());
        QVERIFY(child<QLabel>(page, "placeholder")->text().contains(QStringLiteral("cannot be played")));
        page->showGrid();

        // Missing: deleted behind the studio's back; shown with locate and forget, never a crash.
        const qint64 id = idOf(gallery, QStringLiteral("clip-2.mp4"));
        const QString path = gallery->item(id)->path;
        const QString elsewhere = m_work.filePath(QStringLiteral("moved-away.mp4"));
        QVERIFY(QFile::rename(path, elsewhere));
        QVERIFY(page->openItem(id));
        QVERIFY(gallery->item(id)->missing);
        QVERIFY(child<QPushButton>(page, "locate")->isVisible());
        QVERIFY(child<QPushButton>(page, "forget")->isVisible());
        QVERIFY(child<QLabel>(page, "detailProblem")->text().contains(QStringLiteral("gone")));
        QVERIFY(!child<QPushButton>(page, "export")->isEnabled());
        QString error;
        QVERIFY2(page->locateCurrent(elsewhere, &error), qPrintable(error));
        QVERIFY(!gallery->item(id)->missing);
        QCOMPARE(gallery->item(id)->path, elsewhere);
        QVERIFY(!child<QPushButton>(page, "locate")->isVisible());

        // Export: a copy, never over an existing file.
        const QString exported = m_work.filePath(QStringLiteral("exported.mp4"));
        QVERIFY2(page->exportCurrent(exported, &error), qPrintable(error));
        QCOMPARE(QFileInfo(exported).size(), QFileInfo(elsewhere).size());
        QVERIFY(!page->exportCurrent(exported, &error));
        QVERIFY(error.contains(QStringLiteral("exists")));

        // Delete goes to the freedesktop trash, and Undo brings file and recipe back.
        const int rows = page->model()->rowCount();
        QVERIFY(page->deleteCurrent());
        QVERIFY(!QFileInfo::exists(elsewhere));
        QCOMPARE(page->model()->rowCount(), rows - 1);
        QVERIFY(child<QPushButton>(page, "undo")->isVisible());
        QTest::mouseClick(child<QPushButton>(page, "undo"), Qt::LeftButton);
        QVERIFY(QFileInfo::exists(elsewhere));
        QCOMPARE(page->model()->rowCount(), rows);
        const qint64 back = idOf(gallery, QStringLiteral("moved-away.mp4"));
        QVERIFY(back > 0);
        QVERIFY(gallery->item(back)->hasRecipe);
        QCOMPARE(gallery->recipe(back)->request.seed, 1002);

        // Forget: the row goes, the file stays.
        QVERIFY(page->openItem(back));
        QVERIFY(page->forgetCurrent());
        QCOMPARE(page->model()->rowCount(), rows - 1);
        QVERIFY(QFileInfo::exists(elsewhere));
    }

    void startImagesAndGenerateAgainWithOne()
    {
        auto w = vireo::test::openStudioWindow();
        w->resize(1280, 820);
        w->show();
        w->showPage(MainWindow::Page::Gallery);
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        auto* page = w->galleryPage();
        auto* gallery = w->studio()->gallery();
        auto* gen = w->generatePage();

        // A video whose recipe started from a picture kept beside it, and an image output.
        const QString cond = QDir(outputs()).filePath(QStringLiteral("harbour.cond0.png"));
        QImage start = vireo::test::renderScene(120, 80, 0, 2);
        QVERIFY(start.save(cond));
        QFile condFile(cond);
        QVERIFY(condFile.open(QIODevice::ReadOnly));
        auto r = fullRecipe();
        r.request.prompt = "the harbour wakes up, gulls and ropes";
        r.conditions.push_back({"/somewhere/else/harbour.png", "harbour.cond0.png",
            QCryptographicHash::hash(condFile.readAll(), QCryptographicHash::Sha256).toHex().toStdString(), 9, 0.6, 33, 1, false, {},
            false});
        r.stages = "single";
        r.request.stages = "single";
        vireo::test::writeClip(QDir(outputs()).filePath(QStringLiteral("harbour.mp4")), r, 25, 160, 96, 25, 1);
        auto still = fullRecipe();
        still.kind = "image";
        still.pipeline = "ideogram4";
        still.request.frames = 1;
        const QString png = QDir(outputs()).filePath(QStringLiteral("poster.png"));
        QVERIFY(vireo::output::writeImage(png.toStdString(), vireo::test::renderScene(64, 48, 0, 1), still).ok());
        gallery->rescan();
        QTRY_VERIFY_WITH_TIMEOUT(
            idOf(gallery, QStringLiteral("harbour.mp4")) > 0 && idOf(gallery, QStringLiteral("poster.png")) > 0, 10000);
        // The kept picture is not an output of its own.
        QCOMPARE(idOf(gallery, QStringLiteral("harbour.cond0.png")), qint64(0));

        // Generate again: the start image comes back from the copy beside the video.
        QVERIFY(page->openItem(idOf(gallery, QStringLiteral("harbour.mp4"))));
        QVERIFY(child<QTextBrowser>(page, "recipe")->toPlainText().contains(QStringLiteral("harbour.png")));
        QTest::mouseClick(child<QPushButton>(page, "generateAgain"), Qt::LeftButton);
        QCOMPARE(w->currentPage(), MainWindow::Page::Generate);
        // Read on a worker, as every choice of a file is: the settings follow once it is read.
        QTRY_COMPARE(gen->conditionImage(), cond);
        QTRY_COMPARE(child<QSpinBox>(gen, "imageFrame")->value(), 9);
        QCOMPARE(child<QDoubleSpinBox>(gen, "imageStrength")->value(), 0.6);
        QCOMPARE(child<QComboBox>(gen, "stages")->currentData().toString(), QStringLiteral("single"));

        // A video that followed a sound: Generate again brings the sound back from its samples
        // kept beside it (the recipe names them by a plain file name).
        {
            const QString wav = QDir(outputs()).filePath(QStringLiteral("singing.audio.wav"));
            const int rate = 16000;
            vireo::test::writeWav(wav, rate, 1, 0.5, 440.0);
            auto sung = fullRecipe();
            sung.request.prompt = "a fox sings";
            sung.audio = vireo::output::AudioUse{"/somewhere/else/song.wav", "aa", "singing.audio.wav", "bb", 0.5, rate, 1};
            vireo::test::writeClip(QDir(outputs()).filePath(QStringLiteral("singing.mp4")), sung, 25, 160, 96, 25, 1);
            gallery->rescan();
            QTRY_VERIFY_WITH_TIMEOUT(idOf(gallery, QStringLiteral("singing.mp4")) > 0, 10000);
            QCOMPARE(idOf(gallery, QStringLiteral("singing.audio.wav")), qint64(0));
            w->showPage(MainWindow::Page::Gallery);
            QVERIFY(page->openItem(idOf(gallery, QStringLiteral("singing.mp4"))));
            QTest::mouseClick(child<QPushButton>(page, "generateAgain"), Qt::LeftButton);
            QTRY_COMPARE(gen->sound(), wav);
            gen->clearSound();
        }

        // A video that followed an IC-LoRA's reference clip: the kept frames are not an output of
        // their own, and Generate again brings the clip back from them.
        {
            const QString kept = QDir(outputs()).filePath(QStringLiteral("dancing.ref0.mp4"));
            vireo::test::writeClip(kept, std::nullopt, 25, 160, 96, 25, 2);
            auto danced = fullRecipe();
            danced.request.prompt = "a robot dances";
            danced.references = {vireo::output::ReferenceUse{"/somewhere/else/pose.mp4", "aa", "dancing.ref0.mp4", "bb", 0.7, 25}};
            vireo::test::writeClip(QDir(outputs()).filePath(QStringLiteral("dancing.mp4")), danced, 25, 160, 96, 25, 1);
            gallery->rescan();
            QTRY_VERIFY_WITH_TIMEOUT(idOf(gallery, QStringLiteral("dancing.mp4")) > 0, 10000);
            QCOMPARE(idOf(gallery, QStringLiteral("dancing.ref0.mp4")), qint64(0));
            w->showPage(MainWindow::Page::Gallery);
            QVERIFY(page->openItem(idOf(gallery, QStringLiteral("dancing.mp4"))));
            QTest::mouseClick(child<QPushButton>(page, "generateAgain"), Qt::LeftButton);
            QTRY_COMPARE(gen->loraPanel()->referencePath(), kept);
            gen->loraPanel()->clear();
        }

        // "Animate this image": an image output becomes the start image.
        w->showPage(MainWindow::Page::Gallery);
        QVERIFY(page->openItem(idOf(gallery, QStringLiteral("poster.png"))));
        auto* use = child<QPushButton>(page, "useAsStartImage");
        QCOMPARE(use->text(), QStringLiteral("Animate this image"));
        QTest::mouseClick(use, Qt::LeftButton);
        QCOMPARE(w->currentPage(), MainWindow::Page::Generate);
        QTRY_COMPARE(gen->conditionImage(), png);

        // A video's first frame, saved as a PNG, does too.
        w->showPage(MainWindow::Page::Gallery);
        QVERIFY(page->openItem(idOf(gallery, QStringLiteral("harbour.mp4"))));
        QCOMPARE(use->text(), QStringLiteral("Use first frame as start image"));
        QTest::mouseClick(use, Qt::LeftButton);
        QCOMPARE(w->currentPage(), MainWindow::Page::Generate);
        QTRY_VERIFY2(gen->conditionImage().endsWith(QStringLiteral("harbour.first-frame.png")), qPrintable(gen->conditionImage()));
        QCOMPARE(QImage(gen->conditionImage()).size(), QSize(160, 96));
        QFile::remove(gen->conditionImage());

        // "Extend this clip": its recipe with a new seed, and its last 9 frames at frame 0 in
        // place of the recipe's own start image.
        w->showPage(MainWindow::Page::Gallery);
        QVERIFY(page->openItem(idOf(gallery, QStringLiteral("harbour.mp4"))));
        auto* extend = child<QPushButton>(page, "extendClip");
        QVERIFY(extend->isVisible() && extend->isEnabled());
        QTest::mouseClick(extend, Qt::LeftButton);
        QCOMPARE(w->currentPage(), MainWindow::Page::Generate);
        QTRY_COMPARE(gen->conditionImage(), QDir(outputs()).filePath(QStringLiteral("harbour.mp4")));
        QVERIFY(gen->conditionIsClip());
        QTRY_VERIFY(gen->conditionFromEnd());
        QCOMPARE(child<QSpinBox>(gen, "clipFrames")->value(), 9);
        QCOMPARE(child<QSpinBox>(gen, "imageFrame")->value(), 0);
        QCOMPARE(child<QPlainTextEdit>(gen, "prompt")->toPlainText(), QString::fromStdString(r.request.prompt));
        QVERIFY2(child<QLabel>(gen, "imageName")->text().contains(QStringLiteral("last 9 frames")),
            qPrintable(child<QLabel>(gen, "imageName")->text()));
        // "Retake a span…": its recipe with a new seed, and the span to make again (the clip
        // its start, so the start image and sound are cleared).
        w->showPage(MainWindow::Page::Gallery);
        QVERIFY(page->openItem(idOf(gallery, QStringLiteral("harbour.mp4"))));
        auto* retakeSpan = child<QPushButton>(page, "retakeSpan");
        QVERIFY(retakeSpan->isVisible() && retakeSpan->isEnabled());
        QString why;
        QVERIFY2(page->retakeClip(idOf(gallery, QStringLiteral("harbour.mp4")), 0.5, 1.25, true, false, &why), qPrintable(why));
        QCOMPARE(w->currentPage(), MainWindow::Page::Generate);
        QVERIFY(gen->retake());
        QCOMPARE(gen->retake()->path, QDir(outputs()).filePath(QStringLiteral("harbour.mp4")));
        QCOMPARE(gen->retake()->start, 0.5);
        QCOMPARE(gen->retake()->end, 1.25);
        QVERIFY(gen->retake()->video && !gen->retake()->audio);
        QVERIFY(gen->conditionImage().isEmpty());
        QVERIFY2(child<QLabel>(gen, "retakeNote")->text().contains(QStringLiteral("sound kept")),
            qPrintable(child<QLabel>(gen, "retakeNote")->text()));
        QVERIFY(!child<QSpinBox>(gen, "width")->isEnabled());
        QTest::mouseClick(child<QPushButton>(gen, "clearRetake"), Qt::LeftButton);
        QVERIFY(!gen->retake() && child<QSpinBox>(gen, "width")->isEnabled());
        QVERIFY(!page->retakeClip(idOf(gallery, QStringLiteral("harbour.mp4")), 2.0, 1.0, true, true, &why));
        QVERIFY2(why.contains(QStringLiteral("start before it ends")), qPrintable(why));
        // A picture has nothing to extend or retake.
        w->showPage(MainWindow::Page::Gallery);
        QVERIFY(page->openItem(idOf(gallery, QStringLiteral("poster.png"))));
        QVERIFY(extend->isHidden() && retakeSpan->isHidden());
        QVERIFY(!page->extendClip(idOf(gallery, QStringLiteral("poster.png")), &why));
        QVERIFY2(why.contains(QStringLiteral("only a clip")), qPrintable(why));
        QVERIFY(!page->retakeClip(idOf(gallery, QStringLiteral("poster.png")), 0, 1, true, true, &why));
    }

    void tenThousandRowsBenchmark()
    {
        // A gallery of 10,000 outputs with thumbnails, written in one transaction, then shown.
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("big.sqlite"));
        {
            auto store = GalleryStore::open(file);
            QVERIFY(store.ok());
        }
        {
            QImage thumb = vireo::test::renderScene(320, 180, 0, 2);
            QByteArray jpeg;
            QBuffer buffer(&jpeg);
            buffer.open(QIODevice::WriteOnly);
            thumb.save(&buffer, "JPEG", 85);
            auto db = QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("bulk"));
            db.setDatabaseName(file);
            QVERIFY(db.open());
            QVERIFY(db.transaction());
            QSqlQuery q(db);
            q.prepare(QStringLiteral("INSERT INTO outputs (path, kind, created_unix, prompt, model, recipe, width, height, frames, fps, "
                                     "thumbnail, thumb_state) VALUES (?, 'video', ?, ?, ?, '{}', 768, 512, 121, 24, ?, 1)"));
            for (int i = 0; i < 10000; ++i) {
                // Present (empty) files: the stored thumbnails are what the grid shows.
                QFile(dir.filePath(QStringLiteral("out-%1.mp4").arg(i))).open(QIODevice::WriteOnly);
                q.addBindValue(dir.filePath(QStringLiteral("out-%1.mp4").arg(i)));
                q.addBindValue(1764000000 + i * 60);
                q.addBindValue(QString(QString::fromLatin1(kPrompts[i % 8]) + QStringLiteral(" #%1").arg(i)));
                q.addBindValue(i % 4 ? QStringLiteral("LTX-2.3 · Distilled FP8") : QStringLiteral("LTX-2.3 · Q4_K_M"));
                q.addBindValue(jpeg);
                QVERIFY(q.exec());
            }
            QVERIFY(db.commit());
            db.close();
        }
        QSqlDatabase::removeDatabase(QStringLiteral("bulk"));
        // No outputs folder: no rescan, the rows stay as written.
        QElapsedTimer clock;
        clock.start();
        Gallery gallery(file, QString());
        QVERIFY(gallery.open());
        const auto opened = clock.nsecsElapsed();
        GalleryPage page(&gallery);
        page.resize(1280, 800);
        int paints = 0;
        PaintCounter counter(&paints);
        page.grid()->viewport()->installEventFilter(&counter);
        clock.restart();
        page.show();
        QVERIFY(QTest::qWaitForWindowExposed(&page));
        QTRY_VERIFY(paints > 0);
        const auto firstPaint = clock.nsecsElapsed();
        QCOMPARE(page.model()->rowCount(), 10000);
        QTRY_VERIFY_WITH_TIMEOUT(!page.grid()->model()->index(0, 0).data(GalleryModel::ThumbnailRole).value<QImage>().isNull(), 10000);
        const auto firstThumbnails = clock.nsecsElapsed();
        clock.restart();
        const int before = paints;
        page.grid()->scrollToBottom();
        QTRY_VERIFY(paints > before);
        const auto scrolled = clock.nsecsElapsed();
        const auto last = page.grid()->model()->index(9999, 0);
        QTRY_VERIFY_WITH_TIMEOUT(!last.data(GalleryModel::ThumbnailRole).value<QImage>().isNull(), 10000);
        const auto lastThumbnails = clock.nsecsElapsed();
        // Scrolling through all of it, a page at a time, as a user flicking the wheel would.
        clock.restart();
        page.grid()->scrollToTop();
        auto* bar = page.grid()->verticalScrollBar();
        int steps = 0;
        while (bar->value() < bar->maximum()) {
            bar->setValue(bar->value() + bar->pageStep());
            page.grid()->viewport()->repaint();
            ++steps;
        }
        const auto flick = clock.nsecsElapsed();
        std::printf("   10,000 rows: open %.1f ms, first paint %.1f ms, first thumbnails %.1f ms; scroll to end %.1f ms, "
                    "its thumbnails %.1f ms; %d page steps top to bottom in %.1f ms (%.2f ms a page)\n",
            opened / 1e6, firstPaint / 1e6, firstThumbnails / 1e6, scrolled / 1e6, lastThumbnails / 1e6, steps, flick / 1e6,
            flick / 1e6 / std::max(1, steps));
        // The filter over all of it, typed.
        clock.restart();
        QTest::keyClicks(child<QLineEdit>(&page, "search"), QStringLiteral("lighthouse"));
        const auto filtered = clock.nsecsElapsed();
        QCOMPARE(page.filter()->rowCount(), 1250);
        std::printf("   filter typed over 10,000 rows: %.1f ms for 10 keystrokes\n", filtered / 1e6);
    }

private:
    class PaintCounter : public QObject {
    public:
        explicit PaintCounter(int* n) : m_n(n) {}
        bool eventFilter(QObject*, QEvent* e) override
        {
            if (e->type() == QEvent::Paint)
                ++*m_n;
            return false;
        }

    private:
        int* m_n;
    };

    static qint64 idOf(Gallery* gallery, const QString& fileName)
    {
        for (const auto& i : gallery->items())
            if (QFileInfo(i.path).fileName() == fileName)
                return i.id;
        return 0;
    }

    QString outputs() const { return m_work.filePath(QStringLiteral("outputs")); }
    QTemporaryDir m_work;
};

QTEST_MAIN(TestGalleryGui)
#include "test_gallerygui.moc"
