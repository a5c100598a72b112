// The Generate page driven as a user would, offscreen, on the tiny LTX-2.3 checkpoint: pick
// the model, type a prompt, Generate, watch the progress and previews, and get an MP4 in the
// outputs folder that ffprobe reads, playing in place. Also: inline validation, cancel, the
// queue, and screenshots of the page mid-run and done (when VIREO_SCREENSHOT_DIR is set).
#include "core/settings/studiosettings.h"
#include "core/gallery/gallery.h"
#include "core/gallery/gallerystore.h"
#include "core/output/recipe.h"
#include "core/remote/remotejobs.h"
#include "core/runtime/devicepool.h"
#include "core/studio/studio.h"
#include "media/mediareader.h"
#include "media/mp4writer.h"
#include "tests/core/mediafixtures.h"
#include "tests/ui/studiowindow.h"
#include "tests/ui/uitest.h"
#include "ui/dialogs/localmodeldialog.h"
#include "ui/pages/generatepage.h"
#include "ui/pages/modelspage.h"
#include "ui/pages/settingspage.h"
#include "ui/pages/lorapanel.h"
#include "ui/theme.h"

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QImage>
#include <QDialogButtonBox>
#include <QDir>
#include <QDirIterator>
#include <QElapsedTimer>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QListWidget>
#include <QMediaPlayer>
#include <QMimeData>
#include <QTextDocument>
#include <QTimer>
#include <QMessageBox>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QUrl>
#include <QWheelEvent>
#include <QPlainTextEdit>
#include <QPointer>
#include <QSignalSpy>
#include <QProcess>
#include <QTableWidget>
#include <QProgressBar>
#include <QScrollArea>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <cstdlib>

using vireo::ui::GeneratePage;
using vireo::ui::MainWindow;

using vireo::test::child;
using vireo::test::saveScreenshot;
using vireo::test::tinyModel;

class TestGenerateGui : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setOrganizationName(QStringLiteral("VireoTest"));
        QApplication::setApplicationName(QStringLiteral("vireo-generate-test"));
        QSettings().clear();
        for (const auto* suffix : {"", "-wal", "-shm"})
            QFile::remove(vireo::core::Studio::galleryDatabaseFile() + QString::fromLatin1(suffix));
        QVERIFY(m_work.isValid());
        QSettings().setValue(QStringLiteral("hub/cacheDir"), m_work.filePath(QStringLiteral("cache")));
        QSettings().setValue(QStringLiteral("hub/offline"), true);
        QSettings().setValue(QStringLiteral("studio/device"), QStringLiteral("cpu"));
        QSettings().setValue(QStringLiteral("studio/outputsFolder"), outputs());
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel()});
        vireo::ui::applyStudioTheme(*qApp);
    }

    void generatesAVideoFromThePage()
    {
        auto w = videoPage("a red fox runs through fresh snow at dusk, wind howling", 128, 96, 17);
        QVERIFY(w);
        auto* page = w->generatePage();
        auto* generate = child<QPushButton>(page, "generate");
        QTRY_VERIFY(generate->isEnabled());
        QTRY_VERIFY(child<QLabel>(page, "memoryPlan")->text().contains(QStringLiteral("Everything runs in RAM")));

        QTest::mouseClick(generate, Qt::LeftButton);
        const auto id = page->currentJob();
        QVERIFY(id != 0);
        auto* progress = child<QProgressBar>(page, "progress");
        auto* phase = child<QLabel>(page, "phase");
        QStringList phases;
        connect(
            w->studio()->engine(), &vireo::runtime::Engine::jobProgress, this, [&](quint64 job, const QString& p, qint64, qint64, double) {
                if (job == id && (phases.isEmpty() || phases.last() != p))
                    phases << p;
            });
        QTRY_VERIFY_WITH_TIMEOUT(!page->lastOutput().isEmpty() || phase->text().startsWith(QStringLiteral("Failed")), 120000);
        QVERIFY2(!page->lastOutput().isEmpty(), qPrintable(child<QLabel>(page, "result")->text()));
        QCOMPARE(progress->value(), 1000);
        QVERIFY(phase->text().startsWith(QStringLiteral("Done")));
        // Once loaded, the status says where the model runs and which paths it takes.
        // In words on the line (issue #27: "88 dense GEMM…"), the counts in its tooltip.
        const QString status = child<QLabel>(page, "modelStatus")->text();
        QVERIFY2(status == QStringLiteral("Loaded on the CPU · full-size weights, standard attention"), qPrintable(status));
        const QString detail = child<QLabel>(page, "modelStatus")->toolTip();
        QVERIFY2(detail.contains(QStringLiteral("dense GEMM")) && detail.contains(QStringLiteral("self-attention: float32 SDPA")),
            qPrintable(detail));
        // The recipe keeps what the capability gate planned and what ran, counted as it ran,
        // for the Gallery's details; nothing ran slower than planned.
        const auto job = w->studio()->engine()->jobs().last();
        const auto ran = QString::fromStdString(job.recipe.paths);
        QVERIFY2(ran.startsWith(QStringLiteral("GEMM: ")) && ran.contains(QStringLiteral(" dense GEMM"))
                && ran.contains(QStringLiteral("attention: ")) && ran.contains(QStringLiteral(" f32 SDPA")),
            qPrintable(ran));
        QVERIFY2(QString::fromStdString(job.recipe.plannedPaths).contains(QStringLiteral("transformer: dense GEMM in f32 on the CPU")),
            job.recipe.plannedPaths.c_str());
        QVERIFY(job.recipe.pathWarnings.empty());
        for (const auto& p : {QStringLiteral("denoise"), QStringLiteral("decode video"), QStringLiteral("vocoder"), QStringLiteral("mux")})
            QVERIFY2(phases.contains(p), qPrintable(phases.join(QStringLiteral(", "))));
        QVERIFY(!child<QLabel>(page, "preview")->pixmap().isNull());

        // The MP4 is in the outputs folder and ffprobe reads both streams and the recipe.
        const QString out = page->lastOutput();
        QVERIFY(out.startsWith(outputs()));
        QProcess probe;
        probe.start(QStringLiteral("ffprobe"),
            {QStringLiteral("-v"), QStringLiteral("error"), QStringLiteral("-count_frames"), QStringLiteral("-show_streams"),
                QStringLiteral("-show_format"), QStringLiteral("-of"), QStringLiteral("json"), out});
        QVERIFY(probe.waitForFinished(30000));
        const auto info = QJsonDocument::fromJson(probe.readAllStandardOutput()).object();
        int video = 0, audio = 0;
        QString frames;
        for (const auto& s : info.value(QStringLiteral("streams")).toArray()) {
            const auto o = s.toObject();
            if (o.value(QStringLiteral("codec_type")).toString() == QStringLiteral("video")) {
                ++video;
                frames = o.value(QStringLiteral("nb_read_frames")).toString();
            } else if (o.value(QStringLiteral("codec_type")).toString() == QStringLiteral("audio")) {
                ++audio;
            }
        }
        QCOMPARE(video, 1);
        QCOMPARE(audio, 1);
        QCOMPARE(frames, QStringLiteral("17"));
        const auto recipe = QJsonDocument::fromJson(info.value(QStringLiteral("format"))
                                                        .toObject()
                                                        .value(QStringLiteral("tags"))
                                                        .toObject()
                                                        .value(QStringLiteral("vireo_recipe"))
                                                        .toString()
                                                        .toUtf8());
        QCOMPARE(recipe.object().value(QStringLiteral("width")).toInt(), 128);
        QCOMPARE(recipe.object().value(QStringLiteral("seed")).toInteger(), child<QSpinBox>(page, "seed")->value());
        QVERIFY(recipe.object().value(QStringLiteral("prompt")).toString().startsWith(QStringLiteral("a red fox")));

        // The gallery lists it as it lands, with its recipe.
        auto* gallery = w->studio()->gallery();
        QTRY_VERIFY_WITH_TIMEOUT(
            std::any_of(gallery->items().begin(), gallery->items().end(), [&](const auto& i) { return i.path == out && i.hasRecipe; }),
            5000);

        // The clip plays in place.
        QVERIFY(page->player());
        QCOMPARE(page->player()->source().toLocalFile(), out);
        QTRY_VERIFY_WITH_TIMEOUT(page->player()->mediaStatus() != QMediaPlayer::LoadingMedia, 10000);
        QVERIFY2(page->player()->error() == QMediaPlayer::NoError, qPrintable(page->player()->errorString()));
        QTest::qWait(300);
        saveScreenshot(w.get(), QStringLiteral("generate-done.png"));

        // A wide strip of previews (a long clip's) and a long "Saved …" line leave the layout
        // whole at the default and the smallest window sizes (issue #27: the settings column was
        // drawn over the right one once the first preview came).
        QImage strip(2400, 96, QImage::Format_RGB888);
        strip.fill(Qt::darkCyan);
        emit w->studio()->engine()->previewReady(id, strip, 3);
        QVERIFY(child<QLabel>(page, "preview")->pixmap().width() < 2400);
        for (const QSize size : {QSize(1180, 760), QSize(1024, 700)}) {
            w->resize(size);
            QTest::qWait(50);
            const auto problems = vireo::test::layoutProblems(w.get());
            QVERIFY2(problems.isEmpty(), qPrintable(problems.join(QLatin1Char('\n'))));
        }
    }

    void invalidInputIsMarkedBesideTheField()
    {
        auto w = vireo::test::openStudioWindow();
        w->show();
        w->showPage(MainWindow::Page::Generate);
        auto* page = w->generatePage();
        QVERIFY(page->selectModel(QStringLiteral("local:") + tinyModel()));
        child<QPlainTextEdit>(page, "prompt")->setPlainText(QStringLiteral("a fox"));
        QTRY_VERIFY(page->canGenerate());
        child<QSpinBox>(page, "frames")->setValue(20);
        auto* error = child<QLabel>(page, "sizeError");
        QVERIFY(!error->isHidden());
        QVERIFY2(
            error->text().contains(QStringLiteral("8k + 1")) && error->text().contains(QStringLiteral("17")), qPrintable(error->text()));
        QVERIFY(!page->canGenerate());
        child<QSpinBox>(page, "frames")->setValue(25);
        QVERIFY(error->isHidden());
        child<QSpinBox>(page, "width")->setValue(100);
        QVERIFY(error->text().contains(QStringLiteral("multiples of 32")));
        QVERIFY(!page->canGenerate());
        child<QSpinBox>(page, "width")->setValue(96);
        child<QPlainTextEdit>(page, "prompt")->setPlainText(QStringLiteral("   "));
        QVERIFY(!page->canGenerate());
        QCOMPARE(page->generate(), quint64(0));
    }

    void cancelStopsTheRunAndTheQueueShowsIt()
    {
        auto w = videoPage("waves crash on black rocks, seagulls cry overhead", 768, 768, 97);
        QVERIFY(w);
        auto* page = w->generatePage();
        QTRY_VERIFY(page->canGenerate());
        const auto before = QDir(outputs()).entryList(QDir::Files | QDir::Hidden).size();
        const auto first = page->generate();
        const auto second = page->generate();  // waits in the queue behind the first
        QVERIFY(first && second);
        auto* queue = child<QListWidget>(page, "queue");
        QTRY_VERIFY(queue->count() >= 2);
        QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(page, "phase")->text().startsWith(QStringLiteral("denoise")), 60000);
        // Mid-run: the screenshot the README shows.
        QTest::qWait(400);
        saveScreenshot(w.get(), QStringLiteral("generate-running.png"));
        auto* engine = w->studio()->engine();
        QCOMPARE(page->currentJob(), first);
        QCOMPARE(engine->job(second)->state, vireo::runtime::JobState::Queued);
        // The queued one from the queue list, the running one with Cancel.
        for (int i = 0; i < queue->count(); ++i)
            if (queue->item(i)->data(Qt::UserRole).toULongLong() == second)
                queue->setCurrentRow(i);
        QTest::mouseClick(child<QPushButton>(page, "cancelSelected"), Qt::LeftButton);
        QCOMPARE(engine->job(second)->state, vireo::runtime::JobState::Cancelled);
        QElapsedTimer clock;
        clock.start();
        QTest::mouseClick(child<QPushButton>(page, "cancel"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(engine->job(first)->state == vireo::runtime::JobState::Cancelled, 5000);
        std::printf("   cancel from the page: %lld ms until the job ended\n", static_cast<long long>(clock.elapsed()));
        QVERIFY(clock.elapsed() < 1000);
        QTRY_VERIFY(child<QLabel>(page, "phase")->text().contains(QStringLiteral("nothing was written")));
        QCOMPARE(QDir(outputs()).entryList(QDir::Files | QDir::Hidden).size(), before);
    }

    // The "Run on" box: the settings' device by default (the plan shown is for it), every device
    // of the box, and "Best GPU", which hands the job to the device pool; the page says where it
    // went and follows it there like any other job.
    void runOnBestGpuGoesThroughTheDevicePool()
    {
        auto w = videoPage("a heron over a misty lake", 96, 64, 9);
        QVERIFY(w);
        auto* page = w->generatePage();
        auto* runOn = child<QComboBox>(page, "runOn");
        QCOMPARE(runOn->currentData().toString(), QStringLiteral("cpu"));
        QCOMPARE(runOn->itemData(0).toString(), QStringLiteral("auto"));
        QVERIFY(runOn->findData(QStringLiteral("cpu")) > 0);
        runOn->setCurrentIndex(0);
        QTRY_VERIFY(page->canGenerate());
        const auto id = page->generate();
        QVERIFY(id != 0);
        const QString placed = child<QLabel>(page, "result")->text();
        QVERIFY2(placed == QStringLiteral("On cpu: cpu: the box has no GPU"), qPrintable(placed));
        QVERIFY(w->studio()->devicePool()->engineOf(id) != nullptr);
        QTRY_VERIFY_WITH_TIMEOUT(
            !page->lastOutput().isEmpty() || child<QLabel>(page, "phase")->text().startsWith(QStringLiteral("Failed")), 120000);
        QVERIFY2(!page->lastOutput().isEmpty(), qPrintable(child<QLabel>(page, "result")->text()));
        QCOMPARE(w->studio()->devicePool()->job(id)->state, vireo::runtime::JobState::Done);
    }

    // Another machine's Vireo server (issue #30): a `vireo-cli serve` of the same tiny model,
    // added as a host, is offered in "Run on"; the job runs there, its progress shows on the
    // page, and the MP4 comes home into the outputs folder and the gallery.
    void runOnAHostBringsTheOutputHome()
    {
        QTemporaryDir home;
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("HOME"), home.path());
        env.insert(QStringLiteral("XDG_CONFIG_HOME"), home.filePath(QStringLiteral("config")));
        env.insert(QStringLiteral("XDG_DATA_HOME"), home.filePath(QStringLiteral("data")));
        QProcess serve;
        serve.setProcessEnvironment(env);
        serve.setProcessChannelMode(QProcess::ForwardedChannels);
        const auto portFile = home.filePath(QStringLiteral("port"));
        serve.start(qEnvironmentVariable("VIREO_CLI"),
            {QStringLiteral("serve"), QStringLiteral("--listen"), QStringLiteral("127.0.0.1:0"), QStringLiteral("--port-file"), portFile,
                QStringLiteral("--model"), tinyModel(), QStringLiteral("--outputs"), home.filePath(QStringLiteral("outputs")),
                QStringLiteral("--journal"), home.filePath(QStringLiteral("journal.jsonl"))});
        QTRY_VERIFY_WITH_TIMEOUT(QFileInfo(portFile).size() > 0, 60000);
        QFile f(portFile);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto port = QString::fromUtf8(f.readAll()).trimmed();
        auto w = videoPage("a kite over the dunes", 96, 64, 9);
        QVERIFY(w);
        auto* settings = w->studio()->settings();
        QVERIFY(settings->addRemoteHost(QStringLiteral("dunes"), QStringLiteral("http://127.0.0.1:") + port, {}));
        auto* page = w->generatePage();
        auto* runOn = child<QComboBox>(page, "runOn");
        QVERIFY(runOn->findData(QStringLiteral("host:any")) > 0);
        const int host = runOn->findData(QStringLiteral("host:dunes"));
        QVERIFY(host > 0);
        // The Settings page lists the host with what it said of itself.
        auto* hosts = w->settingsPage()->hostsTable();
        w->studio()->remoteJobs()->refreshHosts();
        QTRY_VERIFY_WITH_TIMEOUT(
            hosts->rowCount() == 1 && hosts->item(0, 2) && hosts->item(0, 2)->text().startsWith(QStringLiteral("ready")), 20000);
        QVERIFY2(hosts->item(0, 4)->text().contains(QStringLiteral("local/diffusers")), qPrintable(hosts->item(0, 4)->text()));
        runOn->setCurrentIndex(host);
        QTRY_VERIFY(page->canGenerate());
        QTRY_VERIFY2(child<QLabel>(page, "memoryPlan")->text().startsWith(QStringLiteral("Runs on host dunes, which plans its own memory")),
            qPrintable(child<QLabel>(page, "memoryPlan")->text()));
        const auto id = page->generate();
        QVERIFY(id != 0);
        QCOMPARE(child<QLabel>(page, "result")->text(), QStringLiteral("On host dunes"));
        QStringList phases;
        connect(w->studio()->remoteJobs(), &vireo::remote::RemoteJobs::jobProgress, this,
            [&](quint64 job, const QString& p, qint64, qint64, double) {
                if (job == id && (phases.isEmpty() || phases.last() != p))
                    phases << p;
            });
        // Previews come as they do locally: the host's JPEGs, on the page.
        int previews = 0;
        connect(w->studio()->remoteJobs(), &vireo::remote::RemoteJobs::previewReady, this,
            [&](quint64 job, const QImage& strip, int) { previews += job == id && !strip.isNull() ? 1 : 0; });
        QTRY_VERIFY_WITH_TIMEOUT(
            !page->lastOutput().isEmpty() || child<QLabel>(page, "phase")->text().startsWith(QStringLiteral("Failed")), 120000);
        QVERIFY2(!page->lastOutput().isEmpty(), qPrintable(child<QLabel>(page, "result")->text()));
        QVERIFY2(phases.contains(QStringLiteral("denoise")) && phases.contains(QStringLiteral("download")), qPrintable(phases.join(u',')));
        QVERIFY2(previews > 0, "no preview came from the host");
        QVERIFY(page->lastOutput().startsWith(settings->outputsFolder()));
        QCOMPARE(w->studio()->remoteJobs()->hostOf(id), QStringLiteral("dunes"));
        QVERIFY(QFileInfo(page->lastOutput()).size() > 1000);
        QTRY_VERIFY(std::any_of(w->studio()->gallery()->items().begin(), w->studio()->gallery()->items().end(),
            [&](const auto& item) { return item.path == page->lastOutput(); }));
        settings->removeRemoteHost(QStringLiteral("dunes"));
        QTRY_VERIFY(runOn->findData(QStringLiteral("host:dunes")) < 0);
        serve.terminate();
        serve.waitForFinished(30000);
    }

    // The page without a mouse (issue #27): Tab leaves the prompt instead of typing a tab,
    // Ctrl+Enter generates, Esc cancels; a cancelled job leaves an empty bar and no "Saved …"
    // line of an earlier output.
    void theKeyboardGeneratesAndCancels()
    {
        auto w = videoPage("a slow pan over a frozen lake", 768, 768, 97);
        QVERIFY(w);
        w->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(w.get()));
        auto* page = w->generatePage();
        QTRY_VERIFY(page->canGenerate());
        auto* prompt = child<QPlainTextEdit>(page, "prompt");
        prompt->setFocus();
        QTRY_VERIFY(prompt->hasFocus());
        QTest::keyClick(prompt, Qt::Key_Tab);
        QVERIFY(!prompt->hasFocus());
        QVERIFY(!prompt->toPlainText().contains(QLatin1Char('\t')));
        child<QLabel>(page, "result")->setText(QStringLiteral("Saved an earlier output"));
        auto* engine = w->studio()->engine();
        const auto jobsBefore = engine->jobs().size();
        QTest::keyClick(prompt, Qt::Key_Return, Qt::ControlModifier);
        QTRY_COMPARE(engine->jobs().size(), jobsBefore + 1);
        const auto id = engine->jobs().last().id;
        QTRY_VERIFY_WITH_TIMEOUT(child<QLabel>(page, "phase")->text().startsWith(QStringLiteral("denoise")), 60000);
        QTest::keyClick(prompt, Qt::Key_Escape);
        QTRY_VERIFY_WITH_TIMEOUT(engine->job(id)->state == vireo::runtime::JobState::Cancelled, 5000);
        QTRY_VERIFY(child<QLabel>(page, "phase")->text().startsWith(QStringLiteral("Cancelled")));
        QCOMPARE(child<QProgressBar>(page, "progress")->value(), 0);
        QVERIFY(child<QLabel>(page, "result")->text().isEmpty());
    }

    // Generate again from the file alone gives the same pixels and sound (issue #26): the recipe
    // read back from the MP4 fills the page, which makes the video again; the prompt keeps its
    // runs of spaces, tab and no-break space.
    void generateAgainMakesTheSameVideo()
    {
        const char* prompt = "  a lighthouse  at dusk,\tgulls\u00a0crying   ";
        auto w = videoPage(prompt, 64, 64, 9);
        QVERIFY(w);
        auto* page = w->generatePage();
        child<QCheckBox>(page, "randomSeed")->setChecked(false);
        child<QSpinBox>(page, "seed")->setValue(4242);
        QTRY_VERIFY(page->canGenerate());
        auto* engine = w->studio()->engine();
        auto run = [&]() -> QString {
            const auto id = page->generate();
            if (!id
                || !QTest::qWaitFor(
                    [&] {
                        return engine->job(id)->state != vireo::runtime::JobState::Queued
                            && engine->job(id)->state != vireo::runtime::JobState::Running;
                    },
                    120000))
                return {};
            return engine->job(id)->state == vireo::runtime::JobState::Done ? engine->job(id)->outputPath : QString();
        };
        auto decoded = [](const QString& file) {
            QProcess ffmpeg;
            ffmpeg.start(QStringLiteral("ffmpeg"),
                {QStringLiteral("-v"), QStringLiteral("error"), QStringLiteral("-i"), file, QStringLiteral("-f"),
                    QStringLiteral("rawvideo"), QStringLiteral("-pix_fmt"), QStringLiteral("rgb24"), QStringLiteral("-")});
            ffmpeg.waitForFinished(60000);
            QByteArray out = ffmpeg.readAllStandardOutput();
            ffmpeg.start(QStringLiteral("ffmpeg"),
                {QStringLiteral("-v"), QStringLiteral("error"), QStringLiteral("-i"), file, QStringLiteral("-vn"), QStringLiteral("-f"),
                    QStringLiteral("s16le"), QStringLiteral("-")});
            ffmpeg.waitForFinished(60000);
            return QByteArray(out + ffmpeg.readAllStandardOutput());
        };
        const QString first = run();
        QVERIFY(!first.isEmpty());
        QString problem;
        const auto recipe = vireo::gallery::readEmbeddedRecipe(first, &problem);
        QVERIFY2(recipe, qPrintable(problem));
        QCOMPARE(QString::fromStdString(recipe->request.prompt), QString::fromUtf8(prompt));
        // Another size and seed on the page first, so the recipe has to put them back.
        child<QSpinBox>(page, "width")->setValue(96);
        child<QSpinBox>(page, "seed")->setValue(1);
        QVERIFY(page->applyRecipe(*recipe, false));
        QCOMPARE(child<QPlainTextEdit>(page, "prompt")->document()->toRawText(), QString::fromUtf8(prompt));
        QTRY_VERIFY(page->canGenerate());
        const QString second = run();
        QVERIFY(!second.isEmpty() && second != first);
        const auto a = decoded(first), b = decoded(second);
        QVERIFY(a.size() > 64 * 64 * 3 * 9);
        QVERIFY2(a == b, "Generate again made other pixels or another sound");
    }

    // Tab walks the page in reading order and reaches every control Generate needs, the
    // button last (issue #27: focus was trapped in the prompt).
    void tabWalksThePageInReadingOrder()
    {
        auto w = videoPage("a lantern on a jetty", 96, 64, 9);
        QVERIFY(w);
        w->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(w.get()));
        auto* page = w->generatePage();
        auto* model = child<QComboBox>(page, "model");
        model->setFocus();
        QTRY_VERIFY(model->hasFocus());
        QStringList order;
        for (int i = 0; i < 120 && !order.contains(QStringLiteral("generate")); ++i) {
            QTest::keyClick(QApplication::focusWidget(), Qt::Key_Tab);
            auto* f = QApplication::focusWidget();
            // A spin box's line edit stands for its spin box.
            if (f && f->objectName().isEmpty() && f->parentWidget())
                f = f->parentWidget();
            if (f && !f->objectName().isEmpty() && (order.isEmpty() || order.last() != f->objectName()))
                order << f->objectName();
        }
        const QStringList expected{QStringLiteral("prompt"), QStringLiteral("width"), QStringLiteral("height"), QStringLiteral("frames"),
            QStringLiteral("fps"), QStringLiteral("generate")};
        int at = -1;
        for (const auto& name : expected) {
            const int index = order.indexOf(name);
            QVERIFY2(index > at, qPrintable(QStringLiteral("%1 out of order in: %2").arg(name, order.join(QStringLiteral(", ")))));
            at = index;
        }
    }

    void lorasAreCheckedAppliedAndRestored()
    {
        auto w = vireo::test::openStudioWindow();
        w->resize(1280, 820);
        w->show();
        w->showPage(MainWindow::Page::Generate);
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        auto* page = w->generatePage();
        QVERIFY(page->selectModel(QStringLiteral("local:") + tinyModel()));
        auto* panel = page->loraPanel();
        const QString loras = qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2pipeline/v23/loras/");
        panel->addLora(loras + QStringLiteral("style.safetensors"), 0.8);
        panel->addLora(loras + QStringLiteral("loha.safetensors"));
        panel->addLora(loras + QStringLiteral("style.safetensors"));  // the same file twice is one entry
        QCOMPARE(panel->entries().size(), 2);
        // Checked against the chosen model before anything runs.
        QTRY_COMPARE_WITH_TIMEOUT(panel->pendingChecks(), 0, 10000);
        QTRY_COMPARE(panel->entries()[0].status, QStringLiteral("applied"));
        QVERIFY2(panel->entries()[1].status.startsWith(QStringLiteral("refused: LyCORIS LoHa")), qPrintable(panel->entries()[1].status));
        QVERIFY(child<QLabel>(page, "loraStatus1")->text().startsWith(QStringLiteral("refused")));

        child<QPlainTextEdit>(page, "prompt")->setPlainText(QStringLiteral("a paper boat drifts down a rain gutter"));
        child<QSpinBox>(page, "width")->setValue(96);
        child<QSpinBox>(page, "height")->setValue(64);
        child<QSpinBox>(page, "frames")->setValue(9);
        QTRY_VERIFY(page->canGenerate());
        const auto id = page->generate();
        QVERIFY(id);
        auto* engine = w->studio()->engine();
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, id), 120000);
        const auto job = engine->job(id);
        QVERIFY2(job->state == vireo::runtime::JobState::Done, qPrintable(job->error));
        // Both are in the recipe: the applied one with its hash and strength, the refused one with why.
        const auto& used = job->recipe.loras;
        QCOMPARE(used.size(), std::size_t(2));
        QCOMPARE(used[0].status, std::string("applied"));
        QCOMPARE(used[0].strength, 0.8);
        QCOMPARE(used[0].sha256.size(), std::size_t(64));
        QVERIFY(used[1].status.rfind("refused", 0) == 0);
        QTRY_COMPARE(panel->entries()[0].status, QStringLiteral("applied"));

        // Generate again restores them.
        panel->clear();
        QVERIFY(page->applyRecipe(job->recipe, false));
        QCOMPARE(panel->entries().size(), 2);
        QCOMPARE(panel->entries()[0].strength, 0.8);
        QCOMPARE(QFileInfo(panel->entries()[1].path).fileName(), QStringLiteral("loha.safetensors"));
        // The panel in view for the screenshot.
        if (auto* scroll = qobject_cast<QScrollArea*>(panel->parentWidget()->parentWidget()->parentWidget()))
            scroll->ensureWidgetVisible(panel);
        QTest::qWait(100);
        saveScreenshot(w.get(), QStringLiteral("generate-loras.png"));
    }

    // A model from outside the catalog gets what its own files call for, as vireo-cli gives it
    // (tests/cli checks the CLI on the same folders): 2.0's dev defaults for a folder named dev,
    // the distilled ones with the reason for one that says nothing, and the dev numbers when
    // the user picks Dev. Every catalog family the studio runs is offered, Ideogram-4 included.
    void modelsGetTheDefaultsTheirFilesCallFor()
    {
        const QString v20 = qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2pipeline/v20/diffusers");
        const QString named = m_work.filePath(QStringLiteral("LTX-2-19b-dev"));
        QVERIFY(QFileInfo::exists(named) || QFile::link(v20, named));
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel(), named, v20});
        auto w = vireo::test::openStudioWindow();
        w->showPage(MainWindow::Page::Generate);
        auto* page = w->generatePage();
        auto* model = child<QComboBox>(page, "model");
        QVERIFY(model->findData(QStringLiteral("catalog:ideogram-4/fp8")) >= 0);
        QVERIFY(model->findData(QStringLiteral("catalog:ltx-2.3/dev-gguf-q4_k_m")) >= 0);
        // The size set for one video model stays for the next (issue #27: it was reset).
        child<QSpinBox>(page, "width")->setValue(384);
        child<QSpinBox>(page, "height")->setValue(256);
        QVERIFY(page->selectModel(QStringLiteral("local:") + named));
        QCOMPARE(child<QSpinBox>(page, "width")->value(), 384);
        QCOMPARE(child<QSpinBox>(page, "height")->value(), 256);
        auto* schedule = child<QComboBox>(page, "schedule");
        QCOMPARE(schedule->currentData().toString(), QStringLiteral("dev"));
        QCOMPARE(child<QSpinBox>(page, "steps")->value(), 40);
        QCOMPARE(child<QDoubleSpinBox>(page, "guidance")->value(), 3.0);
        QVERIFY2(child<QLabel>(page, "notes")->text().contains(QStringLiteral("LTX-2.0 dev defaults: the name LTX-2-19b-dev says dev")),
            qPrintable(child<QLabel>(page, "notes")->text()));
        QVERIFY(page->selectModel(QStringLiteral("local:") + v20));
        QCOMPARE(schedule->currentData().toString(), QStringLiteral("distilled"));
        QCOMPARE(child<QSpinBox>(page, "steps")->value(), 8);
        QVERIFY2(child<QLabel>(page, "notes")->text().contains(QStringLiteral("nothing in its files says dev or distilled")),
            qPrintable(child<QLabel>(page, "notes")->text()));
        // Choosing Dev there takes the dev numbers (issue #27: it kept 8 steps at guidance 1).
        schedule->setCurrentIndex(schedule->findData(QStringLiteral("dev")));
        QCOMPARE(child<QSpinBox>(page, "steps")->value(), 40);
        QCOMPARE(child<QDoubleSpinBox>(page, "guidance")->value(), 3.0);
        QVERIFY(child<QSpinBox>(page, "steps")->isEnabled());
        // The HQ recipe's knob (on or off: a check box) shows Lightricks' HQ preset on the page,
        // and turning it off the defaults again; the request is what the page shows.
        auto* hq = child<QCheckBox>(page, "knob_hq");
        QVERIFY(hq && !hq->isChecked());
        const double rescale = child<QDoubleSpinBox>(page, "rescale")->value();
        hq->setChecked(true);
        QCOMPARE(child<QSpinBox>(page, "steps")->value(), 15);
        QCOMPARE(child<QDoubleSpinBox>(page, "rescale")->value(), 0.45);
        QCOMPARE(child<QDoubleSpinBox>(page, "knob_stg_scale")->value(), 0.0);
        QCOMPARE(child<QDoubleSpinBox>(page, "knob_audio_guidance_rescale")->value(), 1.0);
        QCOMPARE(page->request().steps, 15);
        QCOMPARE(page->request().knobs.at("hq"), 1.0);
        hq->setChecked(false);
        QCOMPARE(child<QSpinBox>(page, "steps")->value(), 40);
        QCOMPARE(child<QDoubleSpinBox>(page, "rescale")->value(), rescale);
        QCOMPARE(child<QDoubleSpinBox>(page, "knob_audio_guidance_rescale")->value(), -1.0);
        schedule->setCurrentIndex(schedule->findData(QStringLiteral("distilled")));
        QCOMPARE(child<QSpinBox>(page, "steps")->value(), 8);
        QCOMPARE(child<QDoubleSpinBox>(page, "guidance")->value(), 1.0);
        // Generate again names the recipe's size, never the preset of another (issue #27:
        // "768 × 512" above a 384x256 size).
        child<QComboBox>(page, "sizePreset")->setCurrentIndex(0);
        QCOMPARE(child<QSpinBox>(page, "width")->value(), 768);
        vireo::output::Recipe again;
        again.modelKey = QString(QStringLiteral("local:") + tinyModel()).toStdString();
        again.request.prompt = "a quiet pier";
        again.request.width = 384;
        again.request.height = 256;
        again.request.frames = 17;
        again.request.fps = 24;
        again.request.schedule = "distilled";
        again.request.steps = 8;
        again.request.guidance = 1.0;
        again.request.audioGuidance = 1.0;
        again.request.knobs = {{"fast", 1.0}, {"temporal_rounds", 0.0}};
        QVERIFY(page->applyRecipe(again, false));
        QCOMPARE(child<QSpinBox>(page, "width")->value(), 384);
        // A recipe's on/off knob comes back ticked.
        QVERIFY(child<QCheckBox>(page, "knob_fast")->isChecked());
        QCOMPARE(page->request().knobs.at("fast"), 1.0);
        QVERIFY2(!child<QComboBox>(page, "sizePreset")->currentData().toSize().isValid(),
            qPrintable(child<QComboBox>(page, "sizePreset")->currentText()));
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel()});
    }

    // The window and vireo-cli derive one request from one service: for local 2.0 and 2.3
    // folders, distilled and dev (by name), the page's request and the CLI's --dry-run --json
    // request agree on every number the defaults set (issue #26: 30 steps in one, 40 in the
    // other for the same 2.0 dev model).
    void windowAndCliAskTheSameOfEveryModel()
    {
        const QString cli = qEnvironmentVariable("VIREO_CLI");
        QVERIFY2(QFileInfo(cli).isExecutable(), "VIREO_CLI names no vireo-cli program");
        const QString root = qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2pipeline");
        const QString v20 = root + QStringLiteral("/v20/diffusers"), v23 = root + QStringLiteral("/v23/diffusers");
        const QString dev20 = m_work.filePath(QStringLiteral("LTX-2-19b-dev")), dev23 = m_work.filePath(QStringLiteral("ltx-2.3-22b-dev"));
        QVERIFY(QFileInfo::exists(dev20) || QFile::link(v20, dev20));
        QVERIFY(QFileInfo::exists(dev23) || QFile::link(v23, dev23));
        const QStringList models{v23, v20, dev20, dev23};
        QSettings().setValue(QStringLiteral("studio/localModels"), models);
        auto w = vireo::test::openStudioWindow();
        w->showPage(MainWindow::Page::Generate);
        auto* page = w->generatePage();
        child<QPlainTextEdit>(page, "prompt")->setPlainText(QStringLiteral("a quiet pier"));
        QSet<QString> schedules;
        for (const auto& path : models) {
            QVERIFY(page->selectModel(QStringLiteral("local:") + path));
            const auto r = page->request();
            QProcess p;
            // The tiny models have three blocks: the dev defaults' STG block 28 is refused by the plan.
            p.start(cli,
                {QStringLiteral("generate"), QStringLiteral("--model"), path, QStringLiteral("--prompt"), QStringLiteral("a quiet pier"),
                    QStringLiteral("--set"), QStringLiteral("stg_block=1"), QStringLiteral("--dry-run"), QStringLiteral("--json")});
            QVERIFY(p.waitForFinished(120000));
            const auto out = p.readAllStandardOutput().trimmed();
            QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
            const auto j = QJsonDocument::fromJson(out.mid(out.lastIndexOf('\n') + 1)).object().value(QStringLiteral("request")).toObject();
            QVERIFY2(!j.isEmpty(), out.constData());
            const auto what = QStringLiteral("%1: window %2 %3 steps g %4/%5 r %6, CLI %7")
                                  .arg(path, QString::fromStdString(r.schedule))
                                  .arg(r.steps)
                                  .arg(r.guidance)
                                  .arg(r.audioGuidance)
                                  .arg(r.guidanceRescale)
                                  .arg(QString::fromUtf8(QJsonDocument(j).toJson(QJsonDocument::Compact)));
            QVERIFY2(j.value(QStringLiteral("schedule")).toString() == QString::fromStdString(r.schedule)
                    && j.value(QStringLiteral("steps")).toInt() == r.steps && j.value(QStringLiteral("guidance")).toDouble() == r.guidance
                    && j.value(QStringLiteral("audio_guidance")).toDouble() == r.audioGuidance
                    && j.value(QStringLiteral("guidance_rescale")).toDouble() == r.guidanceRescale
                    && j.value(QStringLiteral("guidance_schedule")).toArray().isEmpty() && r.guidanceSchedule.empty(),
                qPrintable(what));
            // Sizes the user set stay from one video model to the next, so only the first is
            // the defaults' own.
            if (path == models.front())
                QVERIFY2(j.value(QStringLiteral("width")).toInt() == r.width && j.value(QStringLiteral("height")).toInt() == r.height
                        && j.value(QStringLiteral("frames")).toInt() == r.frames && j.value(QStringLiteral("fps")).toDouble() == r.fps,
                    qPrintable(what));
            schedules.insert(QString::fromStdString(r.schedule));
        }
        QCOMPARE(schedules, (QSet<QString>{QStringLiteral("distilled"), QStringLiteral("dev")}));
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel()});
    }

    // LTX-2.5 reads a length from the prompt: "auto" beside the frames asks for it (frames 0 in
    // the request, the frames field idle); the temporal rounds are the family's own control.
    void theLengthCanBeLeftToTheModel()
    {
        const QString v25 = qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2pipeline/v25/diffusers");
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel(), v25});
        auto w = vireo::test::openStudioWindow();
        w->showPage(MainWindow::Page::Generate);
        auto* page = w->generatePage();
        child<QPlainTextEdit>(page, "prompt")->setPlainText(QStringLiteral("a fox in the snow"));
        QVERIFY(page->selectModel(QStringLiteral("local:") + v25));
        auto* box = child<QCheckBox>(page, "autoLength");
        auto* frames = child<QSpinBox>(page, "frames");
        QVERIFY(!box->isHidden());
        box->setChecked(true);
        QVERIFY(!frames->isEnabled());
        QCOMPARE(page->request().frames, std::int64_t(0));
        // 0 to 2 rounds: a spin box.
        QVERIFY(
            child<QDoubleSpinBox>(page, "knob_temporal_rounds") && !page->findChild<QCheckBox*>(QStringLiteral("knob_temporal_rounds")));
        // The 4K path: its size is a preset, its third stage a check box the request carries.
        auto* third = child<QCheckBox>(page, "knob_third_stage");
        QVERIFY(third && !third->isChecked());
        third->setChecked(true);
        QCOMPARE(page->request().knobs.at("third_stage"), 1.0);
        third->setChecked(false);
        QCOMPARE(page->request().knobs.at("third_stage"), 0.0);
        // LTX Desktop's Fast recipe: the same.
        auto* fast = child<QCheckBox>(page, "knob_fast");
        QVERIFY(fast && !fast->isChecked() && fast->toolTip().contains(QStringLiteral("LTX Desktop")));
        fast->setChecked(true);
        QCOMPARE(page->request().knobs.at("fast"), 1.0);
        fast->setChecked(false);
        auto* presets = child<QComboBox>(page, "sizePreset");
        presets->setCurrentIndex(presets->findData(QSize(3840, 2176)));
        QCOMPARE(page->request().width, std::int64_t(3840));
        QCOMPARE(page->request().height, std::int64_t(2176));
        box->setChecked(false);
        QVERIFY(frames->isEnabled());
        QCOMPARE(page->request().frames, std::int64_t(frames->value()));
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel()});
    }

    // LTX-2.5's prompt enhancer: "Enhance prompt" under the prompt, for the family that has one;
    // the stage line says it runs first, or why it cannot (a model without one, and Generate
    // waits); the run's recipe keeps what it wrote, and Generate again brings the box back.
    void thePromptCanBeEnhancedFirst()
    {
        const QString root = qEnvironmentVariable("VIREO_FIXTURES_ROOT");
        const QString v25 = root + QStringLiteral("/ltx2pipeline/v25/diffusers");
        const QString enhanced = m_work.filePath(QStringLiteral("ltx25-with-enhancer"));
        auto copyTree = [](const QString& from, const QString& to) {
            QDirIterator it(from, QDir::Files, QDirIterator::Subdirectories);
            while (it.hasNext()) {
                const QString file = it.next();
                const QString target = to + QLatin1Char('/') + QDir(from).relativeFilePath(file);
                QDir().mkpath(QFileInfo(target).path());
                if (!QFile::exists(target) && !QFile::copy(file, target))
                    return false;
            }
            return true;
        };
        QVERIFY(copyTree(v25, enhanced));
        for (const auto* part : {"/prompt_enhancer", "/processor"})
            QVERIFY(copyTree(root + QStringLiteral("/gemma4enhancer") + QLatin1String(part), enhanced + QLatin1String(part)));
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel(), v25, enhanced});
        auto w = vireo::test::openStudioWindow();
        w->showPage(MainWindow::Page::Generate);
        auto* page = w->generatePage();
        child<QPlainTextEdit>(page, "prompt")->setPlainText(QStringLiteral("a fox in the snow"));
        QVERIFY(page->selectModel(QStringLiteral("local:") + enhanced));
        child<QSpinBox>(page, "width")->setValue(64);
        child<QSpinBox>(page, "height")->setValue(64);
        child<QSpinBox>(page, "frames")->setValue(9);
        auto* box = child<QCheckBox>(page, "enhancePrompt");
        QVERIFY(!box->isHidden() && !box->isChecked());
        QVERIFY(!page->request().enhancePrompt);
        box->setChecked(true);
        QVERIFY(page->request().enhancePrompt);
        auto* stagePlan = child<QLabel>(page, "stagePlan");
        QTRY_VERIFY2(
            stagePlan->text().contains(QStringLiteral("the prompt enhancer rewrites the prompt first")), qPrintable(stagePlan->text()));
        QTRY_VERIFY(page->canGenerate());
        auto* engine = w->studio()->engine();
        const auto id = page->generate();
        QVERIFY(id);
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, id), 120000);
        const auto s = engine->job(id);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QVERIFY(s->recipe.request.enhancePrompt && !s->recipe.enhancedPrompt.empty());
        QCOMPARE(QString::fromStdString(s->recipe.request.prompt), QStringLiteral("a fox in the snow"));

        // The same folder without its enhancer: the box stays, the stage line says why not.
        QVERIFY(page->selectModel(QStringLiteral("local:") + v25));
        QVERIFY(box->isChecked());
        QTRY_VERIFY2(stagePlan->text().contains(QStringLiteral("no prompt enhancer")), qPrintable(stagePlan->text()));
        QTRY_VERIFY(!page->canGenerate());
        box->setChecked(false);
        QTRY_VERIFY(page->canGenerate());

        // Generate again: the box comes back checked.
        QVERIFY(page->selectModel(QStringLiteral("local:") + enhanced));
        QString why;
        QVERIFY2(page->applyRecipe(s->recipe, false, &why), qPrintable(why));
        QVERIFY(box->isChecked() && page->request().enhancePrompt);
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel()});
    }

    // A model on disk comes in through one dialog that takes its companions, text encoder and
    // upsampler and checks them from the headers before it is listed; Cancel closes it and
    // nothing else; a listed one can be taken off the list; a model inspected on the Models page
    // is one click from Generate (issue #27).
    void localModelsAreAddedCheckedAndRemoved()
    {
        const QString root = qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2pipeline/v23");
        const QString single = root + QStringLiteral("/single/ltx-2.3-tiny.safetensors");
        const QString gemma = root + QStringLiteral("/single/gemma");
        const QString upsampler = root + QStringLiteral("/publisher/lightricks/ltx-2.3-spatial-upscaler-x2-1.1.safetensors");
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel()});
        auto w = vireo::test::openStudioWindow();
        w->show();
        w->showPage(MainWindow::Page::Generate);
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        auto* page = w->generatePage();
        auto* model = child<QComboBox>(page, "model");

        // Cancel: the dialog closes and no second one opens.
        QTest::mouseClick(child<QPushButton>(page, "addLocal"), Qt::LeftButton);
        QPointer<vireo::ui::LocalModelDialog> dialog = page->findChild<vireo::ui::LocalModelDialog*>(QStringLiteral("localModelDialog"));
        QVERIFY(dialog);
        QTRY_VERIFY(dialog->isVisible());
        auto* buttons = dialog->findChild<QDialogButtonBox*>();
        QTest::mouseClick(buttons->button(QDialogButtonBox::Cancel), Qt::LeftButton);
        QTRY_VERIFY(!dialog);
        QTest::qWait(100);
        QVERIFY(!QApplication::activeModalWidget());

        // A single file alone lacks its text encoder: said, and Add stays off until it is given.
        QTest::mouseClick(child<QPushButton>(page, "addLocal"), Qt::LeftButton);
        dialog = page->findChild<vireo::ui::LocalModelDialog*>(QStringLiteral("localModelDialog"));
        QVERIFY(dialog);
        buttons = dialog->findChild<QDialogButtonBox*>();
        auto* add = buttons->button(QDialogButtonBox::Ok);
        auto* verdict = dialog->findChild<QLabel*>(QStringLiteral("verdict"));
        QVERIFY(!add->isEnabled());
        dialog->setModelPath(single);
        QVERIFY(!add->isEnabled());
        QVERIFY2(verdict->text().contains(QStringLiteral("Gemma 3 text encoder")), qPrintable(verdict->text()));
        dialog->setTextEncoder(gemma);
        dialog->setUpsampler(upsampler);
        QVERIFY2(add->isEnabled() && verdict->text().startsWith(QStringLiteral("Ready to add: LTX-2.3")), qPrintable(verdict->text()));
        QTest::mouseClick(add, Qt::LeftButton);
        const QString key = QStringLiteral("local:") + single + QStringLiteral("|te=") + gemma + QStringLiteral("|up=") + upsampler;
        QTRY_COMPARE(model->currentData().toString(), key);
        QTRY_VERIFY2(child<QLabel>(page, "modelStatus")->text().startsWith(QStringLiteral("Ready")),
            qPrintable(child<QLabel>(page, "modelStatus")->text()));
        QVERIFY(QSettings().value(QStringLiteral("studio/localModels")).toStringList().contains(key.mid(6)));

        // Off the list, files untouched.
        auto* remove = child<QPushButton>(page, "removeLocal");
        QVERIFY(remove->isVisible());
        QTest::mouseClick(remove, Qt::LeftButton);
        QCOMPARE(model->findData(key), -1);
        QVERIFY(!QSettings().value(QStringLiteral("studio/localModels")).toStringList().contains(key.mid(6)));
        QVERIFY(QFileInfo::exists(single));

        // From the Models page to Generate.
        auto* models = w->modelsPage();
        w->showPage(MainWindow::Page::Models);
        QSignalSpy inspected(models, &vireo::ui::ModelsPage::inspectionFinished);
        models->openPath(root + QStringLiteral("/diffusers"));
        QTRY_COMPARE_WITH_TIMEOUT(inspected.count(), 1, 20000);
        auto* use = child<QPushButton>(models, "useModel");
        QVERIFY(use->isVisible());
        QTest::mouseClick(use, Qt::LeftButton);
        QCOMPARE(w->currentPage(), MainWindow::Page::Generate);
        QCOMPARE(
            model->currentData().toString(), QStringLiteral("local:") + QFileInfo(root + QStringLiteral("/diffusers")).absoluteFilePath());
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel()});
    }

    // Scrolling the settings with the wheel moves the page, not the spin box under the pointer
    // (issue #27: Guidance 1.00 became 0.00 on the way past); a field the user is in still
    // takes the wheel.
    void theWheelScrollsThePageNotTheFieldUnderIt()
    {
        auto w = vireo::test::openStudioWindow();
        w->resize(1180, 760);
        w->show();
        w->showPage(MainWindow::Page::Generate);
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        w->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(w.get()));
        auto* page = w->generatePage();
        auto* guidance = child<QDoubleSpinBox>(page, "guidance");
        auto* schedule = child<QComboBox>(page, "schedule");
        for (QWidget* field : {static_cast<QWidget*>(guidance), static_cast<QWidget*>(schedule)})
            QVERIFY2(field->focusPolicy() != Qt::WheelFocus, field->objectName().toLatin1().constData());
        auto wheel = [](QWidget* target) {
            const QPointF at(target->width() / 2.0, target->height() / 2.0);
            QWheelEvent e(at, target->mapToGlobal(at), QPoint(), QPoint(0, -120), Qt::NoButton, Qt::NoModifier, Qt::NoScrollPhase, false);
            QApplication::sendEvent(target, &e);
            return e.isAccepted();
        };
        child<QPlainTextEdit>(page, "prompt")->setFocus();
        const double before = guidance->value();
        const int scheduleBefore = schedule->currentIndex();
        QVERIFY(!wheel(guidance));
        QVERIFY(!wheel(schedule));
        QCOMPARE(guidance->value(), before);
        QCOMPARE(schedule->currentIndex(), scheduleBefore);
        // In the field, the wheel is the user's: it changes the value.
        guidance->setFocus();
        QTRY_VERIFY(guidance->hasFocus());
        guidance->setValue(2.0);
        wheel(guidance);
        QVERIFY(guidance->value() != 2.0);
    }

    // A local model that lost a part says so on its model line before anything else, and
    // Generate waits with the reason instead of offering to "run anyway" (issue #27: it said
    // "Ready · cpu" and asked "will not fit… Run it anyway?" with Yes as the default).
    void aBrokenModelSaysWhatIsMissingFirst()
    {
        const QString broken = m_work.filePath(QStringLiteral("no-vae"));
        QDir(broken).removeRecursively();
        QProcess copy;
        copy.start(QStringLiteral("cp"), {QStringLiteral("-r"), tinyModel(), broken});
        QVERIFY(copy.waitForFinished(30000) && copy.exitCode() == 0);
        QVERIFY(QDir(broken + QStringLiteral("/vae")).removeRecursively());
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel(), broken});
        auto w = vireo::test::openStudioWindow();
        w->showPage(MainWindow::Page::Generate);
        auto* page = w->generatePage();
        child<QPlainTextEdit>(page, "prompt")->setPlainText(QStringLiteral("a harbour at dawn"));
        QVERIFY(page->selectModel(QStringLiteral("local:") + broken));
        auto* status = child<QLabel>(page, "modelStatus");
        QTRY_VERIFY2_WITH_TIMEOUT(status->text().startsWith(QStringLiteral("Not ready: ")), qPrintable(status->text()), 20000);
        QVERIFY2(status->text().contains(QStringLiteral("video VAE")), qPrintable(status->text()));
        auto* generate = child<QPushButton>(page, "generate");
        QVERIFY(!generate->isEnabled());
        QVERIFY2(generate->toolTip().contains(QStringLiteral("video VAE")), qPrintable(generate->toolTip()));
        // The reason under the button, not only far down the page (issue #27).
        auto* why = child<QLabel>(page, "generateWhy");
        QVERIFY2(why->isVisibleTo(page) && why->text().contains(QStringLiteral("video VAE")), qPrintable(why->text()));
        QCOMPARE(page->generate(), quint64(0));
        // The whole model again: ready, and Generate with it.
        QVERIFY(page->selectModel(QStringLiteral("local:") + tinyModel()));
        QTRY_VERIFY_WITH_TIMEOUT(generate->isEnabled(), 20000);
        QVERIFY(!why->isVisibleTo(page));
        child<QPlainTextEdit>(page, "prompt")->clear();
        QVERIFY(!generate->isEnabled() && why->isVisibleTo(page) && why->text() == QStringLiteral("Write a prompt."));
        child<QPlainTextEdit>(page, "prompt")->setPlainText(QStringLiteral("a harbour at dawn"));
        QVERIFY2(status->text().startsWith(QStringLiteral("Ready")) || status->text().startsWith(QStringLiteral("Loaded")),
            qPrintable(status->text()));
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel()});
    }

    void generatesAnImageWithAnIdeogramModel()
    {
        const QString ideogram = qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ideogram4/pipeline/model");
        QSettings().setValue(QStringLiteral("studio/localModels"), QStringList{tinyModel(), ideogram});
        auto w = vireo::test::openStudioWindow();
        w->resize(1280, 820);
        w->show();
        w->showPage(MainWindow::Page::Generate);
        QVERIFY(QTest::qWaitForWindowExposed(w.get()));
        auto* page = w->generatePage();
        QVERIFY(page->selectModel(QStringLiteral("local:") + ideogram));
        // Image controls: sizes, steps, guidance, seed; nothing of video or sound.
        QTRY_VERIFY(page->imageMode());
        for (const char* hidden : {"frames", "fps", "audioGuidance", "schedule", "speed", "negative"})
            QVERIFY2(!child<QWidget>(page, hidden)->isVisible(), hidden);
        for (const char* shown : {"width", "height", "steps", "guidance", "seed", "sizePreset"})
            QVERIFY2(child<QWidget>(page, shown)->isVisible(), shown);
        QVERIFY(!page->loraPanel()->isVisible());
        auto* presets = child<QComboBox>(page, "sizePreset");
        QVERIFY(presets->findData(QSize(1024, 1024)) >= 0);
        QVERIFY(presets->findData(QSize(768, 512)) < 0);
        // The reference's defaults from the catalog: 1024², 48 steps, guidance 7.
        QCOMPARE(child<QSpinBox>(page, "steps")->value(), 48);
        QCOMPARE(child<QDoubleSpinBox>(page, "guidance")->value(), 7.0);
        QTRY_VERIFY(child<QLabel>(page, "memoryPlan")->text().contains(QStringLiteral("unconditional transformer")));
        // The family's own knobs, one box each with the catalog's defaults, go into the ask.
        auto* mu = child<QDoubleSpinBox>(page, "knob_schedule_mu");
        auto* spread = child<QDoubleSpinBox>(page, "knob_schedule_std");
        QVERIFY(mu->isVisible() && spread->isVisible());
        QCOMPARE(mu->value(), 0.0);
        QCOMPARE(spread->value(), 1.5);
        spread->setValue(1.75);
        QCOMPARE(page->request().knobs.at("schedule_std"), 1.75);

        child<QPlainTextEdit>(page, "prompt")->setPlainText(QStringLiteral("A photo of a cat holding a sign that says hello world"));
        child<QSpinBox>(page, "width")->setValue(72);  // off the 16-pixel grid
        QTRY_VERIFY(child<QLabel>(page, "sizeError")->isVisible());
        QVERIFY(!child<QPushButton>(page, "generate")->isEnabled());
        child<QSpinBox>(page, "width")->setValue(64);
        child<QSpinBox>(page, "height")->setValue(48);
        child<QSpinBox>(page, "steps")->setValue(5);
        child<QDoubleSpinBox>(page, "guidance")->setValue(3.5);
        auto* generate = child<QPushButton>(page, "generate");
        QTRY_VERIFY(generate->isEnabled());
        QTest::mouseClick(generate, Qt::LeftButton);
        auto* phase = child<QLabel>(page, "phase");
        QTRY_VERIFY_WITH_TIMEOUT(
            page->lastOutput().endsWith(QStringLiteral(".png")) || phase->text().startsWith(QStringLiteral("Failed")), 120000);
        QVERIFY2(page->lastOutput().endsWith(QStringLiteral(".png")), qPrintable(child<QLabel>(page, "result")->text()));
        const QString out = page->lastOutput();
        QVERIFY(out.startsWith(outputs()));
        QCOMPARE(QImage(out).size(), QSize(64, 48));
        // The estimate was previewed while it denoised.
        QVERIFY(!child<QLabel>(page, "preview")->pixmap().isNull());
        // Shown in place, not in the player.
        auto* shownImage = child<QLabel>(page, "resultImage");
        QVERIFY(shownImage->isVisible());
        QVERIFY(!shownImage->pixmap().isNull());
        QVERIFY(!child<QWidget>(page, "player")->isVisible());
        // In the gallery as an image with its recipe, which keeps the knobs and gives them back.
        auto* gallery = w->studio()->gallery();
        QTRY_VERIFY_WITH_TIMEOUT(std::any_of(gallery->items().begin(), gallery->items().end(),
                                     [&](const auto& i) { return i.path == out && i.hasRecipe && i.kind == QStringLiteral("image"); }),
            5000);
        saveScreenshot(w.get(), QStringLiteral("generate-image.png"));
        const auto recipe = vireo::gallery::readEmbeddedRecipe(out);
        QVERIFY(recipe);
        QCOMPARE(recipe->request.knobs, (std::map<std::string, double>{{"schedule_mu", 0.0}, {"schedule_std", 1.75}}));
        spread->setValue(1.5);
        QVERIFY(page->applyRecipe(*recipe, false));
        QCOMPARE(spread->value(), 1.75);

        // Back to the video model: the video controls return.
        QVERIFY(page->selectModel(QStringLiteral("local:") + tinyModel()));
        QTRY_VERIFY(!page->imageMode());
        QVERIFY(child<QWidget>(page, "frames")->isVisible());
        QVERIFY(child<QWidget>(page, "player")->isVisible());
    }

    void startImageSlotStagesAndAudio()
    {
        auto w = videoPage("a lighthouse at dusk", 96, 64, 17);
        QVERIFY(w);
        auto* page = w->generatePage();
        QTRY_VERIFY(page->canGenerate());

        // A picture written by Qt: taken, with a thumbnail and a clear button.
        const QString png = m_work.filePath(QStringLiteral("harbour.png"));
        QImage picture(120, 80, QImage::Format_RGB888);
        picture.fill(QColor(30, 90, 160));
        QVERIFY(picture.save(png));
        auto* slot = child<QLabel>(page, "imageSlot");
        auto* clear = child<QPushButton>(page, "clearImage");
        auto* error = child<QLabel>(page, "imageError");
        QVERIFY(!clear->isEnabled());
        QString why;
        QVERIFY2(page->setConditionImage(png, &why), qPrintable(why));
        QCOMPARE(page->conditionImage(), png);
        QVERIFY(!slot->pixmap().isNull());
        QVERIFY(clear->isEnabled());
        QVERIFY(error->isHidden());
        QVERIFY(page->canGenerate());

        // Not a picture: refused beside the slot, naming the file; the slot keeps the last one.
        const QString notes = m_work.filePath(QStringLiteral("notes.png"));
        QFile text(notes);
        QVERIFY(text.open(QIODevice::WriteOnly));
        text.write("shopping list: milk, eggs\n");
        text.close();
        QVERIFY(!page->setConditionImage(notes, &why));
        QVERIFY(error->isVisible());
        QVERIFY2(error->text().contains(QStringLiteral("notes.png")) && error->text().contains(QStringLiteral("not an image")),
            qPrintable(error->text()));
        QCOMPARE(page->conditionImage(), png);

        // Dropped on the slot, as from a file manager.
        const QString second = m_work.filePath(QStringLiteral("second.jpg"));
        QVERIFY(picture.save(second, "JPG"));
        QMimeData mime;
        mime.setUrls({QUrl::fromLocalFile(second)});
        QDragEnterEvent enter(QPoint(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(slot, &enter);
        QVERIFY(enter.isAccepted());
        QDropEvent drop(QPointF(10, 10), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
        QApplication::sendEvent(slot, &drop);
        // Decoded on a worker thread: the window goes on meanwhile.
        QTRY_COMPARE(page->conditionImage(), second);
        QVERIFY(error->isHidden());
        QVERIFY(child<QLabel>(page, "imageName")->text().contains(QStringLiteral("second.jpg")));
        saveScreenshot(w.get(), QStringLiteral("generate-start-image.png"));
        // Two drops in a row, the second refused: the first is superseded unseen, the refusal
        // shows beside the slot, and the slot keeps the picture it had.
        QMimeData firstMime, refusedMime;
        firstMime.setUrls({QUrl::fromLocalFile(png)});
        refusedMime.setUrls({QUrl::fromLocalFile(notes)});
        for (auto* m : {&firstMime, &refusedMime}) {
            QDragEnterEvent enterAgain(QPoint(10, 10), Qt::CopyAction, m, Qt::LeftButton, Qt::NoModifier);
            QApplication::sendEvent(slot, &enterAgain);
            QVERIFY(enterAgain.isAccepted());
            QDropEvent dropAgain(QPointF(10, 10), Qt::CopyAction, m, Qt::LeftButton, Qt::NoModifier);
            QApplication::sendEvent(slot, &dropAgain);
        }
        QVERIFY2(child<QLabel>(page, "imageName")->text().contains(QStringLiteral("Reading notes.png")),
            qPrintable(child<QLabel>(page, "imageName")->text()));
        QTRY_VERIFY(error->isVisible());
        QVERIFY2(error->text().contains(QStringLiteral("notes.png")), qPrintable(error->text()));
        QTest::qWait(200);  // the first drop's result, if it came, would land by now
        QCOMPARE(page->conditionImage(), second);
        QVERIFY(child<QLabel>(page, "imageName")->text().contains(QStringLiteral("second.jpg")));
        QVERIFY(page->setConditionImage(second));

        // A keyframe must sit on 8k + 1 inside the clip; the reason shows beside the field.
        auto* frame = child<QSpinBox>(page, "imageFrame");
        frame->setValue(8);
        QVERIFY(error->isVisible() && error->text().contains(QStringLiteral("8k + 1")));
        QVERIFY(!page->canGenerate());
        frame->setValue(17);
        QVERIFY2(error->text().contains(QStringLiteral("past the last frame")), qPrintable(error->text()));
        QVERIFY(!page->canGenerate());
        frame->setValue(9);
        QVERIFY(error->isHidden());
        QVERIFY(page->canGenerate());
        QTest::mouseClick(clear, Qt::LeftButton);
        QVERIFY(page->conditionImage().isEmpty());
        QVERIFY(slot->pixmap().isNull());
        QVERIFY(!clear->isEnabled());

        // A sound to follow: none at first (the video makes its own), offered and explained.
        auto* audio = child<QPushButton>(page, "audioSlot");
        QVERIFY(audio->isVisible() && audio->isEnabled());
        QVERIFY(audio->toolTip().contains(QStringLiteral("follows it")));
        QVERIFY(!child<QPushButton>(page, "clearAudio")->isEnabled());
        QVERIFY(child<QLabel>(page, "audioNote")->text().contains(QStringLiteral("makes its own sound")));

        // The path line: the tiny diffusers folder brings its latent_upsampler/, so the size
        // decides (96x64 does not halve into whole latent cells).
        auto* line = child<QLabel>(page, "stagePlan");
        QVERIFY(line->isVisible());
        QVERIFY2(line->text().contains(QStringLiteral("multiples of 64")), qPrintable(line->text()));
        // With one (a local model's "up=" part; the plan reads no byte of it), the size decides.
        const QString upsampler = tinyModel() + QStringLiteral("/transformer/config.json");
        const QString entry = tinyModel() + QStringLiteral("|up=") + upsampler;
        w->studio()->settings()->addLocalModel(entry);
        page->refreshModels();
        QVERIFY(page->selectModel(QStringLiteral("local:") + entry));
        child<QSpinBox>(page, "width")->setValue(128);
        child<QSpinBox>(page, "height")->setValue(64);
        QTRY_VERIFY2(line->text().contains(QStringLiteral("Two stages")), qPrintable(line->text()));
        QVERIFY2(line->text().contains(QStringLiteral("Stage 1 at 64 × 32")), qPrintable(line->text()));
        const QString twoStages = page->stagePlanText();
        child<QSpinBox>(page, "width")->setValue(96);
        QVERIFY2(line->text() != twoStages && line->text().contains(QStringLiteral("multiples of 64")), qPrintable(line->text()));
        QVERIFY(page->canGenerate());
        // Asking for two stages where they cannot run is marked and blocks Generate.
        auto* stages = child<QComboBox>(page, "stages");
        stages->setCurrentIndex(stages->findData(QStringLiteral("two")));
        QVERIFY2(line->text().contains(QStringLiteral("cannot run")), qPrintable(line->text()));
        QVERIFY(!page->canGenerate());
        child<QSpinBox>(page, "width")->setValue(128);
        QVERIFY2(line->text().contains(QStringLiteral("as asked")), qPrintable(line->text()));
        QVERIFY(page->canGenerate());
        child<QComboBox>(page, "schedule")->setCurrentIndex(child<QComboBox>(page, "schedule")->findData(QStringLiteral("dev")));
        QVERIFY2(line->text().contains(QStringLiteral("refines with the distilled LoRA")), qPrintable(line->text()));
        QVERIFY(!page->canGenerate());
    }

    void startImageRunsAndComesBackFromTheRecipe()
    {
        auto w = videoPage("the harbour wakes up", 96, 64, 9);
        QVERIFY(w);
        auto* page = w->generatePage();
        const QString png = m_work.filePath(QStringLiteral("dawn.png"));
        QImage picture(64, 96, QImage::Format_RGB888);
        picture.fill(QColor(200, 120, 40));
        QVERIFY(picture.save(png));
        QVERIFY(page->setConditionImage(png));
        child<QDoubleSpinBox>(page, "imageStrength")->setValue(0.75);
        QTRY_VERIFY(page->canGenerate());
        const auto id = page->generate();
        QVERIFY(id);
        auto* engine = w->studio()->engine();
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, id), 120000);
        const auto s = engine->job(id);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QCOMPARE(s->recipe.conditions.size(), std::size_t(1));
        QCOMPARE(s->recipe.conditions[0].strength, 0.75);
        QCOMPARE(s->recipe.conditions[0].source, png.toStdString());
        const QString copy = QFileInfo(s->outputPath).dir().filePath(QString::fromStdString(s->recipe.conditions[0].copy));
        QVERIFY(QFile::exists(copy));

        // The original moves away; the recipe (as the gallery hands it over, with the copy's
        // full path) brings the start image back from the copy beside the video.
        QVERIFY(QFile::rename(png, png + QStringLiteral(".moved")));
        page->clearConditionImage();
        auto r = s->recipe;
        r.conditions[0].copy = copy.toStdString();
        QString why;
        page->applyRecipe(r, false, &why);
        QTRY_COMPARE(page->conditionImage(), copy);
        QTRY_COMPARE(child<QDoubleSpinBox>(page, "imageStrength")->value(), 0.75);
        // A copy whose bytes changed is not taken for the picture the recipe hashed: the engine
        // checks the hash where it reads the file (the page hashes nothing itself), before the
        // model loads.
        QFile tampered(copy);
        QVERIFY(tampered.open(QIODevice::Append));
        tampered.write("x");
        tampered.close();
        page->applyRecipe(r, false, &why);
        QTRY_COMPARE(page->conditionImage(), copy);
        QTRY_VERIFY(page->canGenerate());
        const auto again = page->generate();
        QVERIFY(again);
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, again), 120000);
        const auto refused = engine->job(again);
        QVERIFY(refused->state == vireo::runtime::JobState::Failed);
        QVERIFY2(refused->error.contains(QStringLiteral("changed since the recipe was made")), qPrintable(refused->error));
        // Gone both ways: said at once.
        QVERIFY(QFile::remove(copy));
        page->applyRecipe(r, false, &why);
        QVERIFY(page->conditionImage().isEmpty());
        QVERIFY2(why.contains(QStringLiteral("is gone")), qPrintable(why));
    }

    // Audio-to-video from the page: a sound is read on a worker and described; the length goes to
    // auto and means the sound's; a file that is not a sound is refused with its reason and the
    // sound before stays; the run's video carries the sound, its samples are kept beside it, and
    // Generate again brings the sound back from the recipe.
    void aSoundIsFollowedAndComesBackFromTheRecipe()
    {
        auto w = videoPage("a fox sings", 96, 64, 9);
        QVERIFY(w);
        auto* page = w->generatePage();
        // 0.8 s of 44.1 kHz stereo: 19.2 frames at 24 fps, held by 25.
        const QString wav = m_work.filePath(QStringLiteral("song.wav"));
        vireo::test::writeWav(wav, 44100, 2, 0.8);
        page->loadSound(wav);
        QTRY_COMPARE(page->sound(), wav);
        auto* note = child<QLabel>(page, "audioNote");
        QVERIFY2(
            note->text().contains(QStringLiteral("0.80 s")) && note->text().contains(QStringLiteral("44100 Hz")), qPrintable(note->text()));
        QVERIFY(child<QCheckBox>(page, "autoLength")->isChecked());
        QVERIFY(child<QPushButton>(page, "clearAudio")->isEnabled());
        QTRY_VERIFY(page->canGenerate());
        // Not a sound: refused with the reason; the sound chosen before stays.
        const QString text = m_work.filePath(QStringLiteral("words.wav"));
        {
            QFile f(text);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("these are words, not a sound\n");
        }
        page->loadSound(text);
        QTRY_VERIFY(note->text().contains(QStringLiteral("words.wav")));
        QCOMPARE(page->sound(), wav);
        page->loadSound(wav);
        QTRY_VERIFY(note->text().contains(QStringLiteral("44100 Hz")));
        QTRY_VERIFY(page->canGenerate());
        const auto id = page->generate();
        QVERIFY(id);
        auto* engine = w->studio()->engine();
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, id), 120000);
        const auto s = engine->job(id);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QVERIFY(s->recipe.audio);
        QCOMPARE(s->recipe.audio->source, wav.toStdString());
        QCOMPARE(s->recipe.request.frames, std::int64_t(25));
        QCOMPARE(s->recipe.audioSampleRate, 44100);
        const QString kept = QFileInfo(s->outputPath).dir().filePath(QString::fromStdString(s->recipe.audio->copy));
        QVERIFY(QFile::exists(kept));
        // Cleared: the model makes its own sound again.
        page->clearSound();
        QVERIFY(page->sound().isEmpty());
        QVERIFY(note->text().contains(QStringLiteral("makes its own sound")));
        // Generate again: the kept samples (the gallery hands over the copy's full path).
        auto r = s->recipe;
        r.audio->copy = kept.toStdString();
        QString why;
        QVERIFY(page->applyRecipe(r, false, &why));
        QTRY_COMPARE(page->sound(), kept);
        QTRY_VERIFY(page->canGenerate());
        const auto again = page->generate();
        QVERIFY(again);
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, again), 120000);
        const auto t = engine->job(again);
        QVERIFY2(t->state == vireo::runtime::JobState::Done, qPrintable(t->error));
        QCOMPARE(t->recipe.request.frames, std::int64_t(25));
        QVERIFY(t->recipe.audio && t->recipe.audio->sha256 == s->recipe.audio->copySha256);
        page->clearSound();
    }

    // An IC-LoRA in the LoRA panel (its metadata) asks for its reference clip, and the page cannot
    // generate until it has one; with it the stage line says what follows what, the recipe names
    // the clip and its kept frames, and Generate again brings the clip back; removing the LoRA
    // drops the clip.
    void anInContextLoraAsksForItsReferenceClip()
    {
        auto w = videoPage("a robot dances", 96, 64, 17);
        QVERIFY(w);
        auto* page = w->generatePage();
        auto* panel = page->loraPanel();
        const QString clip = m_work.filePath(QStringLiteral("pose.mp4"));
        vireo::test::writeClip(clip, std::nullopt, 17);
        // A LoRA for the tiny transformer's first block, in-context by its metadata.
        const QString ic = m_work.filePath(QStringLiteral("control.safetensors"));
        {
            QJsonObject header;
            header.insert(QStringLiteral("__metadata__"), QJsonObject{{QStringLiteral("reference_downscale_factor"), QStringLiteral("1")}});
            qint64 offset = 0;
            QByteArray data;
            for (const char* m : {"to_q", "to_k"}) {
                for (const auto& [part, shape] : {std::pair{"lora_A", QJsonArray{4, 64}}, std::pair{"lora_B", QJsonArray{64, 4}}}) {
                    const qint64 bytes = 4 * 64 * 4;
                    header.insert(QStringLiteral("diffusion_model.transformer_blocks.0.attn1.%1.%2.weight")
                                      .arg(QLatin1String(m), QLatin1String(part)),
                        QJsonObject{{QStringLiteral("dtype"), QStringLiteral("F32")}, {QStringLiteral("shape"), shape},
                            {QStringLiteral("data_offsets"), QJsonArray{offset, offset + bytes}}});
                    for (int i = 0; i < 256; ++i) {
                        const float v = 0.01f * static_cast<float>((i * 37) % 17 - 8);
                        data.append(reinterpret_cast<const char*>(&v), 4);
                    }
                    offset += bytes;
                }
            }
            auto json = QJsonDocument(header).toJson(QJsonDocument::Compact);
            while (json.size() % 8)
                json.append(' ');
            QVERIFY(vireo::test::writeRawSafetensors(ic, json, data));
        }
        panel->addLora(ic);
        QTRY_COMPARE(panel->pendingChecks(), 0);
        QTRY_VERIFY(panel->hasInContextLora());
        QTRY_VERIFY(child<QLabel>(panel, "referenceNote")->text().contains(QStringLiteral("Choose one")));
        auto* stagePlan = child<QLabel>(page, "stagePlan");
        QTRY_VERIFY2(stagePlan->text().contains(QStringLiteral("reference clip")), qPrintable(stagePlan->text()));
        QVERIFY(!page->canGenerate());
        panel->setReference(clip, 0.9);
        QTRY_VERIFY(page->canGenerate());
        QVERIFY2(stagePlan->text().contains(QStringLiteral("follows 1 reference clip")), qPrintable(stagePlan->text()));
        QTRY_VERIFY(child<QLabel>(panel, "referenceNote")->text().contains(QStringLiteral("pose.mp4")));
        auto* engine = w->studio()->engine();
        const auto id = page->generate();
        QVERIFY(id);
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, id), 120000);
        const auto s = engine->job(id);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QCOMPARE(s->recipe.references.size(), std::size_t(1));
        QCOMPARE(s->recipe.references[0].source, clip.toStdString());
        QCOMPARE(s->recipe.references[0].strength, 0.9);
        QVERIFY(!s->recipe.loras.empty() && s->recipe.loras[0].status == "applied");
        const QString kept = QFileInfo(s->outputPath).dir().filePath(QString::fromStdString(s->recipe.references[0].copy));
        QVERIFY(QFile::exists(kept));
        // Generate again: the kept frames (the gallery hands over the copy's full path).
        panel->clear();
        QVERIFY(panel->references().empty());
        auto r = s->recipe;
        r.references[0].copy = kept.toStdString();
        QString why;
        QVERIFY2(page->applyRecipe(r, false, &why), qPrintable(why));
        QTRY_COMPARE(panel->pendingChecks(), 0);
        QTRY_COMPARE(panel->referencePath(), kept);
        QTRY_VERIFY(panel->references().size() == 1 && panel->references()[0].strength == 0.9);
        QTRY_VERIFY(page->canGenerate());
        // The clip is its LoRA's: removing the LoRA drops it.
        panel->removeLora(0);
        QVERIFY(panel->referencePath().isEmpty() && panel->references().empty());
    }

    // Retake from the page: the clip's size, length and rate (the size fields off), one pass,
    // the recipe names the window; Generate again brings the retake back from what was kept.
    void aRetakeRunsFromThePageAndComesBack()
    {
        auto w = videoPage("a heron over a misty lake", 96, 64, 17);
        QVERIFY(w);
        auto* page = w->generatePage();
        QTRY_VERIFY(page->canGenerate());
        auto* engine = w->studio()->engine();
        const auto first = page->generate();
        QVERIFY(first);
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, first), 120000);
        const auto clip = engine->job(first)->outputPath;
        QVERIFY(!clip.isEmpty());
        // Another size on the page: the retake takes the clip's own.
        child<QSpinBox>(page, "width")->setValue(128);
        QString why;
        QVERIFY2(page->retakeClip(clip, 0.1, 0.3, true, true, &why), qPrintable(why));
        QTRY_VERIFY(page->canGenerate());
        QVERIFY2(child<QLabel>(page, "stagePlan")->text().contains(QStringLiteral("Retake: one pass")),
            qPrintable(child<QLabel>(page, "stagePlan")->text()));
        const auto id = page->generate();
        QVERIFY(id);
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, id), 120000);
        const auto s = engine->job(id);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QVERIFY(s->recipe.retake);
        QCOMPARE(s->recipe.retake->source, clip.toStdString());
        QCOMPARE(s->recipe.request.width, std::int64_t(96));
        QCOMPARE(s->recipe.request.frames, std::int64_t(17));
        const QString copy = QFileInfo(s->outputPath).dir().filePath(QString::fromStdString(s->recipe.retake->copy));
        QVERIFY(QFile::exists(copy));
        page->clearRetake();
        auto r = s->recipe;
        r.retake->copy = copy.toStdString();
        r.retake->soundCopy = QFileInfo(s->outputPath).dir().filePath(QString::fromStdString(r.retake->soundCopy)).toStdString();
        QVERIFY(page->applyRecipe(r, false, &why));
        QVERIFY(page->retake());
        QCOMPARE(page->retake()->path, copy);
        QCOMPARE(page->retake()->start, 0.1);
        page->clearRetake();
    }

    // A clip cut short (an unfinished download) still serves from its start, but its end is not
    // its end: chosen as the part to continue, the slot says so and Generate is off.
    void aClipCutShortIsNotContinuedFromItsEnd()
    {
        auto w = videoPage("the tide goes out", 96, 64, 17);
        QVERIFY(w);
        auto* page = w->generatePage();
        QTRY_VERIFY(page->canGenerate());
        const QString whole = m_work.filePath(QStringLiteral("ebb.mp4"));
        {
            auto writer = vireo::media::Mp4Writer::open(whole.toStdString(), {64, 48, 24.0, 18}, std::nullopt, {});
            QVERIFY(writer.ok());
            std::vector<std::uint8_t> rgb(64 * 48 * 3);
            for (int f = 0; f < 72; ++f) {
                for (std::size_t i = 0; i < rgb.size(); ++i)
                    rgb[i] = static_cast<std::uint8_t>((i * 7 + static_cast<std::size_t>(f) * 13) % 251);
                QVERIFY((*writer)->writeFrame(rgb.data(), 64 * 3).ok());
            }
            QVERIFY((*writer)->finish().ok());
        }
        QFile in(whole);
        QVERIFY(in.open(QIODevice::ReadOnly));
        const QByteArray bytes = in.readAll();
        const QString cut = m_work.filePath(QStringLiteral("ebb-cut.mp4"));
        QFile out(cut);
        QVERIFY(out.open(QIODevice::WriteOnly) && out.write(bytes.left(bytes.size() / 2)) == bytes.size() / 2);
        out.close();
        QString why;
        QVERIFY2(page->setConditionImage(cut, &why), qPrintable(why));
        auto* error = child<QLabel>(page, "imageError");
        QTRY_VERIFY(page->canGenerate());
        page->setConditionFromEnd(true);
        QVERIFY2(error->isVisible() && error->text().contains(QStringLiteral("cut short")), qPrintable(error->text()));
        QVERIFY(!page->canGenerate());
        page->setConditionFromEnd(false);
        QVERIFY(error->isHidden());
        QTRY_VERIFY(page->canGenerate());
    }

    // A video dropped on the start slot is a start clip: its first "Clip frames" frames (9 at
    // first, at most what it has), checked against the output like a still; it runs, and the
    // recipe brings it back with its frame count.
    void startClipFromAVideo()
    {
        auto w = videoPage("the tide comes in", 96, 64, 17);
        QVERIFY(w);
        auto* page = w->generatePage();
        QTRY_VERIFY(page->canGenerate());
        auto writeClip = [&](const QString& name, int frames) {
            const QString path = m_work.filePath(name);
            auto writer = vireo::media::Mp4Writer::open(path.toStdString(), {64, 48, 24.0, 18}, std::nullopt, {});
            if (!writer.ok())
                return QString();
            std::vector<std::uint8_t> rgb(64 * 48 * 3);
            for (int f = 0; f < frames; ++f) {
                std::fill(rgb.begin(), rgb.end(), static_cast<std::uint8_t>(30 + 15 * f));
                if (!(*writer)->writeFrame(rgb.data(), 64 * 3).ok())
                    return QString();
            }
            return (*writer)->finish().ok() ? path : QString();
        };
        const QString clip = writeClip(QStringLiteral("tide.mp4"), 12);
        QVERIFY(!clip.isEmpty());
        auto* clipFrames = child<QSpinBox>(page, "clipFrames");
        auto* error = child<QLabel>(page, "imageError");
        QVERIFY(clipFrames->isHidden());
        QString why;
        QVERIFY2(page->setConditionImage(clip, &why), qPrintable(why));
        QVERIFY(page->conditionIsClip());
        QCOMPARE(page->conditionImage(), clip);
        QVERIFY(clipFrames->isVisible());
        QCOMPARE(clipFrames->value(), 9);
        QCOMPARE(clipFrames->maximum(), 9);  // 12 frames hold 9 = 8k + 1 at most
        QVERIFY(!child<QLabel>(page, "imageSlot")->pixmap().isNull());
        QVERIFY2(child<QLabel>(page, "imageName")->text().contains(QStringLiteral("first 9 frames")),
            qPrintable(child<QLabel>(page, "imageName")->text()));
        QVERIFY(error->isHidden());
        QVERIFY(page->canGenerate());
        // Nine frames from frame 9 run past a 17-frame video: said beside the slot, Generate off.
        auto* frame = child<QSpinBox>(page, "imageFrame");
        frame->setValue(9);
        QVERIFY2(error->isVisible() && error->text().contains(QStringLiteral("The start clip"))
                && error->text().contains(QStringLiteral("runs past")),
            qPrintable(error->text()));
        QVERIFY(!page->canGenerate());
        frame->setValue(0);
        QVERIFY(error->isHidden());
        // Too short to keep 9 frames: refused with its length, the slot keeps the clip.
        const QString shortClip = writeClip(QStringLiteral("blink.mp4"), 5);
        QVERIFY(!page->setConditionImage(shortClip, &why));
        QVERIFY2(why.contains(QStringLiteral("has 5 frames")), qPrintable(why));
        QCOMPARE(page->conditionImage(), clip);
        // A still after it: the clip row goes.
        const QString png = m_work.filePath(QStringLiteral("shore.png"));
        QImage picture(96, 64, QImage::Format_RGB888);
        picture.fill(QColor(40, 80, 120));
        QVERIFY(picture.save(png));
        QVERIFY(page->setConditionImage(png));
        QVERIFY(!page->conditionIsClip());
        QVERIFY(clipFrames->isHidden());
        QVERIFY(page->setConditionImage(clip));
        QVERIFY(!page->conditionFromEnd());
        // The slot shows the frame the video continues from: grey 30 first, grey 195 last (both
        // read when the clip was chosen; switching decodes nothing).
        auto centreGrey = [&] {
            const QImage shown = child<QLabel>(page, "imageSlot")->pixmap().toImage();
            return shown.isNull() ? -1 : qGray(shown.pixel(shown.width() / 2, shown.height() / 2));
        };
        QVERIFY2(std::abs(centreGrey() - 30) < 12, qPrintable(QString::number(centreGrey())));
        // Its last frames instead: the video extends it.
        auto* part = child<QComboBox>(page, "clipPart");
        part->setCurrentIndex(part->findData(QStringLiteral("last")));
        QVERIFY(page->conditionFromEnd());
        QVERIFY2(std::abs(centreGrey() - 195) < 12, qPrintable(QString::number(centreGrey())));
        QVERIFY2(child<QLabel>(page, "imageName")->text().contains(QStringLiteral("last 9 frames")),
            qPrintable(child<QLabel>(page, "imageName")->text()));
        QTRY_VERIFY(page->canGenerate());
        // The plan for this size, not a stale one for the page's first size (whose "does not
        // fit" under memory pressure would ask before generating).
        auto* plan = child<QLabel>(page, "memoryPlan");
        QTRY_VERIFY2(plan->text().contains(QStringLiteral("96x64x17")), qPrintable(plan->text()));

        const auto id = page->generate();
        QVERIFY(id);
        auto* engine = w->studio()->engine();
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, id), 120000);
        const auto s = engine->job(id);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QCOMPARE(s->recipe.conditions.size(), std::size_t(1));
        QCOMPARE(s->recipe.conditions[0].frames, 9);
        QCOMPARE(s->recipe.conditions[0].source, clip.toStdString());
        QVERIFY(s->recipe.conditions[0].fromEnd);
        // Generate again from the recipe: the clip, its frame count and its end come back.
        page->clearConditionImage();
        QVERIFY(clipFrames->isHidden());
        page->applyRecipe(s->recipe, false, &why);
        QTRY_COMPARE(page->conditionImage(), clip);
        QVERIFY(page->conditionIsClip());
        QTRY_VERIFY(page->conditionFromEnd());
        QCOMPARE(clipFrames->value(), 9);
        QVERIFY(clipFrames->isVisible());

        // What was kept beside the video is the 9 frames used, at its size, not a copy of the
        // clip; from them (the original gone) the same video is made again, frame for frame.
        const auto& use = s->recipe.conditions[0];
        QVERIFY(use.copyIsFrames && QString::fromStdString(use.copy).endsWith(QStringLiteral(".cond0.mp4")));
        const QString kept = QFileInfo(s->outputPath).dir().filePath(QString::fromStdString(use.copy));
        auto keptFrames = vireo::media::readClipFrames(kept.toStdString(), 9);
        QVERIFY2(keptFrames.ok(), keptFrames.ok() ? "" : keptFrames.error().message.c_str());
        QCOMPARE(keptFrames->front().width, 96);
        QCOMPARE(keptFrames->front().height, 64);
        QVERIFY(!vireo::media::readClipFrames(kept.toStdString(), 10).ok());
        QVERIFY(QFile::rename(clip, clip + QStringLiteral(".moved")));
        auto r = s->recipe;
        r.conditions[0].copy = kept.toStdString();
        page->clearConditionImage();
        page->applyRecipe(r, false, &why);
        QTRY_COMPARE(page->conditionImage(), kept);
        QTRY_VERIFY(!page->conditionFromEnd());
        QTRY_VERIFY(page->canGenerate());
        const auto again = page->generate();
        QVERIFY(again);
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, again), 120000);
        const auto s2 = engine->job(again);
        QVERIFY2(s2->state == vireo::runtime::JobState::Done, qPrintable(s2->error));
        auto first = vireo::media::readClipFrames(s->outputPath.toStdString(), 17);
        auto second = vireo::media::readClipFrames(s2->outputPath.toStdString(), 17);
        QVERIFY(first.ok() && second.ok());
        for (std::size_t i = 0; i < first->size(); ++i)
            QVERIFY2((*first)[i].rgb == (*second)[i].rgb, qPrintable(QStringLiteral("frame %1 differs").arg(i)));
        QVERIFY(QFile::rename(clip + QStringLiteral(".moved"), clip));
    }

    // "Generate anyway?" is asked on the plan for the inputs on the page only: a plan still on
    // its way after a change (the page waits a quarter second before asking for one) asks
    // nothing, and the engine, which plans again, decides.
    void memoryPlanAsksOnlyForTheInputsItWasMadeFor()
    {
        auto w = vireo::test::openStudioWindow();
        w->resize(1280, 820);
        w->show();
        w->showPage(MainWindow::Page::Generate);
        auto* page = w->generatePage();
        QVERIFY(page->selectModel(QStringLiteral("local:") + tinyModel()));
        child<QPlainTextEdit>(page, "prompt")->setPlainText(QStringLiteral("a storm over the bay"));
        auto* width = child<QSpinBox>(page, "width");
        auto* height = child<QSpinBox>(page, "height");
        auto* frames = child<QSpinBox>(page, "frames");
        auto* plan = child<QLabel>(page, "memoryPlan");
        width->setValue(4096);
        height->setValue(4096);
        frames->setValue(1025);
        QTRY_VERIFY_WITH_TIMEOUT(plan->text().contains(QStringLiteral("4096x4096x1025")), 20000);
        QVERIFY2(plan->styleSheet().contains(QStringLiteral("#ff8a80")), qPrintable(plan->text()));  // does not fit
        QVERIFY(page->canGenerate());
        // The question comes with No as the default (issue #27: Enter ran it), and No queues nothing.
        int asked = 0;
        bool noByDefault = false;
        QTimer answer;
        answer.setInterval(20);
        connect(&answer, &QTimer::timeout, this, [&] {
            if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
                ++asked;
                noByDefault = box->defaultButton() == box->button(QMessageBox::No);
                box->button(QMessageBox::No)->click();
            }
        });
        answer.start();
        QCOMPARE(page->generate(), quint64(0));
        QCOMPARE(asked, 1);
        QVERIFY(noByDefault);
        // A small size, generated at once: the shown plan is for the big one and asks nothing.
        width->setValue(96);
        height->setValue(64);
        frames->setValue(9);
        QVERIFY(!plan->text().contains(QStringLiteral("96x64x9")));
        const auto id = page->generate();
        QVERIFY(id);
        QCOMPARE(asked, 1);
        auto* engine = w->studio()->engine();
        QTRY_VERIFY_WITH_TIMEOUT(finished(engine, id), 120000);
        QVERIFY2(engine->job(id)->state == vireo::runtime::JobState::Done, qPrintable(engine->job(id)->error));
        answer.stop();
    }

private:
    // The job ran to its end (done, failed or cancelled).
    static bool finished(vireo::runtime::Engine* engine, quint64 id)
    {
        const auto state = engine->job(id)->state;
        return state != vireo::runtime::JobState::Queued && state != vireo::runtime::JobState::Running;
    }

    // A studio window on the Generate page, the tiny LTX-2.3 model chosen, with a prompt and a
    // size; null when the window or the model does not come up.
    vireo::test::StudioWindow videoPage(const char* prompt, int width, int height, int frames)
    {
        auto w = vireo::test::openStudioWindow();
        w->resize(1280, 820);
        w->show();
        w->showPage(MainWindow::Page::Generate);
        auto* page = w->generatePage();
        if (!QTest::qWaitForWindowExposed(w.get()) || !page->selectModel(QStringLiteral("local:") + tinyModel()))
            return nullptr;
        child<QPlainTextEdit>(page, "prompt")->setPlainText(QString::fromUtf8(prompt));
        child<QSpinBox>(page, "width")->setValue(width);
        child<QSpinBox>(page, "height")->setValue(height);
        child<QSpinBox>(page, "frames")->setValue(frames);
        return w;
    }

    QString outputs() const { return m_work.filePath(QStringLiteral("outputs")); }
    QTemporaryDir m_work;
};

QTEST_MAIN(TestGenerateGui)
#include "test_generategui.moc"
