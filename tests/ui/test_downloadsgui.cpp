// The studio window against the local test Hub (tests/hub/hubserver.py): pick a model,
// read its plan, download with per-file control, restart and resume, the trust gate, a
// plan that does not fit, a gated repo without a token, and the token's privacy.
#include "core/hub/downloadmanager.h"
#include "core/settings/studiosettings.h"
#include "ui/dialogs/trustdialog.h"
#include "tests/ui/studiowindow.h"
#include "ui/mainwindow.h"
#include "ui/pages/catalogpanel.h"
#include "ui/pages/downloadspage.h"
#include "ui/pages/modelspage.h"
#include "ui/pages/settingspage.h"
#include "ui/theme.h"
#include "tests/hub/testhub.h"

#include <QApplication>
#include <QDoubleSpinBox>
#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <QTreeWidget>

#include <memory>

using vireo::hub::DownloadTask;
using vireo::hub::FileState;
using vireo::ui::MainWindow;
using State = DownloadTask::State;

namespace {

constexpr const char* kVariant = "ltx-2.3/distilled-fp8";

}  // namespace

class TestDownloadsGui : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_work;
    vireo::test::TestHub m_server;
    QString m_hub;

    // Every CDN transfer throttled until the faults are cleared, so a person (or this test)
    // can act mid-download.
    void throttle(int bytesPerSecond)
    {
        const QJsonObject rule{{QStringLiteral("match"), QStringLiteral("/blobs/")}, {QStringLiteral("server"), QStringLiteral("cdn")},
            {QStringLiteral("times"), -1},
            {QStringLiteral("action"),
                QJsonObject{{QStringLiteral("kind"), QStringLiteral("slow")}, {QStringLiteral("bytes_per_second"), bytesPerSecond}}}};
        m_server.addFaults(QJsonArray{rule});
    }
    void unthrottle() { m_server.clearFaults(); }

    QString cacheDir() const { return m_work.filePath(QStringLiteral("cache")); }

    static vireo::test::StudioWindow openWindow()
    {
        auto w = vireo::test::openStudioWindow();
        w->show();
        return w;
    }

    static DownloadTask* planVariant(MainWindow& w, const QString& id)
    {
        w.modelsPage()->catalogPanel()->planVariant(id);
        auto* task = w.downloads()->task(QStringLiteral("catalog:") + id);
        if (task && !QTest::qWaitFor([task]() { return !task->busy(); }, 30000))
            return nullptr;
        return task;
    }

    static int rowInState(const DownloadTask& task, FileState state)
    {
        for (std::size_t i = 0; i < task.rows().size(); ++i)
            if (task.rows()[i].status.state == state)
                return static_cast<int>(i);
        return -1;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_work.isValid());
        QStandardPaths::setTestModeEnabled(true);
        QApplication::setOrganizationName(QStringLiteral("VireoTest"));
        QApplication::setApplicationName(QStringLiteral("vireo-downloads-test"));
        qunsetenv("HF_TOKEN");
        qunsetenv("HUGGING_FACE_HUB_TOKEN");
        qunsetenv("HF_HUB_OFFLINE");
        qputenv("HF_HOME", m_work.filePath(QStringLiteral("hf-home")).toUtf8());
        vireo::ui::applyStudioTheme(*qApp);

        QString error;
        QVERIFY2(m_server.start(m_work.path(), {}, &error), qPrintable(error));
        m_hub = m_server.hubUrl();
        QVERIFY(!m_hub.isEmpty());
    }

    void cleanupTestCase() { m_server.stop(); }

    void init()
    {
        unthrottle();
        QSettings().clear();
        QSettings().setValue(QStringLiteral("hub/cacheDir"), cacheDir());
        QSettings().setValue(QStringLiteral("hub/endpoint"), m_hub);
        QSettings().setValue(QStringLiteral("hub/parallelDownloads"), 2);
        // The default 2 GiB margin would make these tests depend on the machine's free space.
        QSettings().setValue(QStringLiteral("hub/headroomBytes"), quint64(16) << 20);
        vireo::core::StudioSettings().setToken(QString());
    }

    void pickPlanDownloadCancelRestartResumeFinish()
    {
        QDir(cacheDir()).removeRecursively();
        auto w = openWindow();
        auto* panel = w->modelsPage()->catalogPanel();
        QVERIFY(panel->variantItem(QString::fromLatin1(kVariant)));
        QCOMPARE(panel->variantItem(QString::fromLatin1(kVariant))->text(4), QStringLiteral("Not downloaded"));

        // The plan, before a byte moves.
        auto* task = planVariant(*w, QString::fromLatin1(kVariant));
        QVERIFY(task);
        QCOMPARE(task->state(), State::Planned);
        QCOMPARE(w->currentPage(), MainWindow::Page::Downloads);
        auto* page = w->downloadsPage();
        QCOMPARE(page->currentTask(), task);
        const auto files = static_cast<int>(task->rows().size());
        QVERIFY(files >= 3);
        QCOMPARE(page->fileTable()->topLevelItemCount(), files);
        QVERIFY2(page->summary()->text().contains(QStringLiteral("%1 files").arg(files)), qPrintable(page->summary()->text()));
        QVERIFY(page->summary()->text().contains(QStringLiteral("to download")));
        QVERIFY(page->startButton()->isEnabled());
        QVERIFY(page->blockReason()->isHidden());
        QVERIFY(task->preflight().fits);
        QCOMPARE(task->totals().presentBytes, std::uint64_t{0});
        QVERIFY(!panel->variantItem(QString::fromLatin1(kVariant))->text(2).startsWith(QLatin1Char('~')));
        // A repo that gives several parts is named once, with its parts (issue #27: a GGUF
        // variant's line said unsloth/LTX-2.3-GGUF four times).
        {
            auto* gguf = planVariant(*w, QStringLiteral("ltx-2.3/dev-gguf-q4_k_m"));
            QVERIFY(gguf);
            QString from;
            for (auto* label : w->downloadsPage()->findChildren<QLabel*>())
                if (label->text().startsWith(QStringLiteral("From ")))
                    from = label->text();
            QCOMPARE(from.count(QStringLiteral("unsloth/LTX-2.3-GGUF")), 1);
            QVERIFY2(from.contains(QStringLiteral("transformer")) && from.contains(QStringLiteral("Lightricks/LTX-2 @")), qPrintable(from));
            planVariant(*w, QString::fromLatin1(kVariant));
        }
        // A variant the catalog has no estimate for says how to learn its size (issue #27: blank).
        if (auto* unsized = panel->variantItem(QStringLiteral("ltx-2.3/dev-gguf-q8_0")))
            QCOMPARE(unsized->text(2), QStringLiteral("plan to see"));
        else
            QFAIL("ltx-2.3/dev-gguf-q8_0 is not listed");

        // Progress is recorded on every change: it must never pass 100 % or move backwards.
        std::uint64_t lastTotal = 0;
        bool monotonic = true;
        std::vector<int> lastBar(static_cast<std::size_t>(files), 0);
        auto watch = connect(task, &DownloadTask::totalsChanged, this, [&]() {
            const auto t = task->totals();
            monotonic = monotonic && t.bytesDone >= lastTotal && t.bytesDone <= t.totalBytes;
            lastTotal = t.bytesDone;
            monotonic = monotonic && page->totalProgress()->value() <= 1000;
            for (int i = 0; i < files; ++i) {
                const int v = page->rowProgress(i)->value();
                monotonic = monotonic && v >= lastBar[static_cast<std::size_t>(i)] && v <= 1000;
                lastBar[static_cast<std::size_t>(i)] = v;
            }
        });

        throttle(20000);
        QTest::mouseClick(page->startButton(), Qt::LeftButton);
        QCOMPARE(task->state(), State::Downloading);
        QTRY_VERIFY_WITH_TIMEOUT(rowInState(*task, FileState::Downloading) >= 0, 20000);
        QTRY_VERIFY_WITH_TIMEOUT(task->totals().bytesDone > 0, 20000);
        const int victim = rowInState(*task, FileState::Downloading);
        QCOMPARE(page->rowAction(victim)->text(), QStringLiteral("Cancel"));
        QTest::mouseClick(page->rowAction(victim), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(task->rows()[static_cast<std::size_t>(victim)].status.state, FileState::Cancelled, 10000);
        QCOMPARE(page->fileTable()->topLevelItem(victim)->text(5), QStringLiteral("Cancelled"));
        QVERIFY(task->state() == State::Downloading);  // the other files go on

        // Cancel all: the run ends cancelled and keeps its bytes.
        QTRY_VERIFY_WITH_TIMEOUT(page->cancelAllButton()->isEnabled(), 5000);
        QTest::mouseClick(page->cancelAllButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(task->state(), State::Cancelled, 15000);
        const auto kept = task->totals().bytesDone;
        QVERIFY(kept > 0);
        QVERIFY(monotonic);
        disconnect(watch);
        QCOMPARE(page->startButton()->text(), QStringLiteral("Resume download"));

        // Restart the application: a new window with the same settings and cache.
        w.reset();
        unthrottle();
        w = openWindow();
        task = w->downloads()->task(QStringLiteral("catalog:") + QString::fromLatin1(kVariant));
        QVERIFY2(task, "the unfinished download was not remembered");
        QTRY_COMPARE_WITH_TIMEOUT(task->state(), State::Planned, 30000);
        QVERIFY2(task->totals().presentBytes >= kept, "partial bytes were lost across the restart");
        page = w->downloadsPage();
        QCOMPARE(page->currentTask(), task);
        QCOMPARE(page->startButton()->text(), QStringLiteral("Resume download"));
        QCOMPARE(w->modelsPage()->catalogPanel()->variantItem(QString::fromLatin1(kVariant))->text(4), QStringLiteral("Partly downloaded"));
        QTest::mouseClick(page->startButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(task->state(), State::Done, 60000);
        QCOMPARE(page->totalProgress()->value(), 1000);
        for (int i = 0; i < files; ++i)
            QCOMPARE(page->rowProgress(i)->value(), 1000);
        QCOMPARE(w->modelsPage()->catalogPanel()->variantItem(QString::fromLatin1(kVariant))->text(4), QStringLiteral("Ready"));

        // Ready is remembered without the network and shows in the cache list.
        w.reset();
        QSettings().setValue(QStringLiteral("hub/endpoint"), QStringLiteral("http://127.0.0.1:9"));
        w = openWindow();
        QCOMPARE(w->modelsPage()->catalogPanel()->variantItem(QString::fromLatin1(kVariant))->text(4), QStringLiteral("Ready"));
        QStringList cached;
        for (int i = 0; i < w->modelsPage()->catalogPanel()->cacheList()->topLevelItemCount(); ++i)
            cached << w->modelsPage()->catalogPanel()->cacheList()->topLevelItem(i)->text(0);
        QVERIFY2(cached.contains(QStringLiteral("Lightricks/LTX-2.3-fp8")), qPrintable(cached.join(QLatin1Char(','))));
    }

    // Resume (or Repair) on one row fetches that file only; the files the user cancelled stay
    // cancelled until asked for.
    void resumingOneFileLeavesTheOthersAlone()
    {
        QDir(cacheDir()).removeRecursively();
        auto w = openWindow();
        auto* task = planVariant(*w, QString::fromLatin1(kVariant));
        QVERIFY(task);
        auto* page = w->downloadsPage();
        throttle(20000);
        QTest::mouseClick(page->startButton(), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(task->totals().bytesDone > 0, 20000);
        QTest::mouseClick(page->cancelAllButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(task->state(), State::Cancelled, 15000);
        unthrottle();
        auto cancelledRows = [task] {
            return std::count_if(
                task->rows().begin(), task->rows().end(), [](const auto& r) { return r.status.state == FileState::Cancelled; });
        };
        const auto before = cancelledRows();
        QVERIFY2(before >= 2, qPrintable(QString::number(before)));
        const int row = rowInState(*task, FileState::Cancelled);
        QCOMPARE(page->rowAction(row)->text(), QStringLiteral("Resume"));
        QTest::mouseClick(page->rowAction(row), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(!task->busy(), 30000);
        QCOMPARE(task->rows()[static_cast<std::size_t>(row)].status.state, FileState::Done);
        QCOMPARE(cancelledRows(), before - 1);
        QCOMPARE(task->state(), State::Cancelled);
        QCOMPARE(page->startButton()->text(), QStringLiteral("Resume download"));

        QTest::mouseClick(page->startButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(task->state(), State::Done, 60000);
    }

    void aPlanThatDoesNotFitCannotStart()
    {
        QSettings().setValue(QStringLiteral("hub/headroomBytes"), quint64(1) << 55);  // 32 PiB of margin
        auto w = openWindow();
        auto* task = planVariant(*w, QStringLiteral("ltx-2.3/dev-bf16"));
        QVERIFY(task);
        QCOMPARE(task->state(), State::Planned);
        QVERIFY(!task->preflight().fits);
        auto* page = w->downloadsPage();
        QVERIFY(!page->startButton()->isEnabled());
        QVERIFY(page->blockReason()->isVisible());
        QVERIFY2(page->blockReason()->text().startsWith(QStringLiteral("Does not fit")), qPrintable(page->blockReason()->text()));
        QVERIFY(page->blockReason()->text().contains(QStringLiteral("free")));
        QCOMPARE(QSettings().value(QStringLiteral("hub/headroomBytes")).toULongLong(), quint64(1) << 55);  // shown, not changed

        // A smaller margin in Settings applies to the plan at once, without asking the Hub again.
        m_server.clearLog();
        w->settingsPage()->keepFreeBox()->setValue(0.5);
        QCOMPARE(w->settings()->headroomBytes(), quint64(500000000));
        QVERIFY(task->preflight().fits);
        QCOMPARE(task->state(), State::Planned);
        QVERIFY(page->startButton()->isEnabled());
        QVERIFY(!page->blockReason()->isVisible());
        QVERIFY2(page->summary()->text().contains(QStringLiteral("keeping 500")), qPrintable(page->summary()->text()));
        QCOMPARE(m_server.requestLog().size(), 0);
    }

    void anUntrustedRepoNeedsApprovalThenIsRemembered()
    {
        auto w = openWindow();
        auto* panel = w->modelsPage()->catalogPanel();
        panel->planRepo(QStringLiteral("not a repo"));
        QVERIFY(panel->repoError()->isVisible());
        QVERIFY(panel->repoError()->text().contains(QStringLiteral("owner/name")));

        panel->repoEdit()->setText(QStringLiteral("tiny/plain"));
        QTest::keyClick(panel->repoEdit(), Qt::Key_Return);
        auto* task = w->downloads()->task(QStringLiteral("repo:tiny/plain@main"));
        QVERIFY(task);
        QTRY_COMPARE_WITH_TIMEOUT(task->state(), State::Planned, 20000);
        auto* page = w->downloadsPage();
        QCOMPARE(page->currentTask(), task);
        QVERIFY(!page->startButton()->isEnabled());
        QVERIFY2(
            page->blockReason()->text().contains(QStringLiteral("not from a catalog publisher")), qPrintable(page->blockReason()->text()));
        QVERIFY(page->approveButton()->isVisible());

        // Cancelling the dialog changes nothing.
        page->requestApproval();
        auto* dialog = page->findChild<vireo::ui::TrustDialog*>();
        QVERIFY(dialog);
        QTRY_VERIFY(dialog->isVisible());
        auto* list = dialog->findChild<QTreeWidget*>(QStringLiteral("trustFiles"));
        QCOMPARE(list->topLevelItemCount(), static_cast<int>(task->rows().size()));
        QVERIFY(dialog->windowTitle().contains(QStringLiteral("tiny/plain")));
        dialog->reject();
        QVERIFY(!page->startButton()->isEnabled());

        page->requestApproval();
        QTRY_VERIFY((dialog = page->findChild<vireo::ui::TrustDialog*>()) && dialog->isVisible());
        QTest::mouseClick(dialog->findChild<QPushButton*>(QStringLiteral("trustButton")), Qt::LeftButton);
        QVERIFY(page->startButton()->isEnabled());
        QVERIFY(page->approveButton()->isHidden());
        QVERIFY(w->settings()->trustedRepos().contains(QStringLiteral("tiny/plain")));
        QTest::mouseClick(page->startButton(), Qt::LeftButton);
        QTRY_COMPARE_WITH_TIMEOUT(task->state(), State::Done, 30000);

        // Remembered: a new window can download it without asking.
        w.reset();
        w = openWindow();
        QVERIFY(w->downloads()->isTrusted(std::string("tiny/plain")));
        w->settingsPage()->trustedList()->setCurrentRow(0);
        QCOMPARE(w->settingsPage()->trustedList()->currentItem()->text(), QStringLiteral("tiny/plain"));
        QTest::mouseClick(w->settingsPage()->revokeButton(), Qt::LeftButton);
        QVERIFY(!w->downloads()->isTrusted(std::string("tiny/plain")));
        QCOMPARE(w->settingsPage()->trustedList()->count(), 0);
    }

    void aGatedRepoWithoutATokenSaysWhatToDo()
    {
        auto w = openWindow();
        auto* task = w->downloads()->openRepo(QStringLiteral("gated/model"));
        QVERIFY(task);
        QTRY_VERIFY_WITH_TIMEOUT(!task->busy(), 20000);
        QCOMPARE(task->state(), State::PlanFailed);
        QCOMPARE(task->errorKind(), vireo::hub::HubErrorKind::GatedNoToken);
        w->downloadsPage()->showTask(task->spec().key);
        w->showPage(MainWindow::Page::Downloads);
        auto* error = w->downloadsPage()->taskError();
        QVERIFY(error->isVisible());
        QVERIFY2(error->text().contains(QStringLiteral("gated")) && error->text().contains(QStringLiteral("token in Settings")),
            qPrintable(error->text()));
        QCOMPARE(w->downloadsPage()->startButton()->text(), QStringLiteral("Try again"));

        // What the message says to do works: a token saved in Settings, then Try again.
        QVERIFY(w->settings()->setToken(QStringLiteral("hf_goodtoken000000000000000000000000")));
        QTest::mouseClick(w->downloadsPage()->startButton(), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(!task->busy() && task->state() != State::PlanFailed, 30000);
        QCOMPARE(task->state(), State::Planned);
        QVERIFY(!error->isVisible());
    }

    void anUnreachableHubSaysSoAndTryAgainRecovers()
    {
        QSettings().setValue(QStringLiteral("hub/endpoint"), QStringLiteral("http://127.0.0.1:9"));  // nothing listens
        auto w = openWindow();
        auto* task = planVariant(*w, QStringLiteral("ltx-2.3/dev-bf16"));
        QVERIFY(task);
        QCOMPARE(task->state(), State::PlanFailed);
        auto* page = w->downloadsPage();
        QCOMPARE(page->currentTask(), task);
        QVERIFY(page->taskError()->isVisible());
        const auto message = page->taskError()->text();
        qInfo("%s", qPrintable(message));
        QVERIFY2(message.contains(QStringLiteral("127.0.0.1:9")) && message.contains(QStringLiteral("Settings")), qPrintable(message));
        QCOMPARE(page->startButton()->text(), QStringLiteral("Try again"));
        QVERIFY(page->startButton()->isEnabled());

        // The endpoint fixed in Settings applies to the next try, without a restart.
        w->settings()->setEndpoint(m_hub);
        QTest::mouseClick(page->startButton(), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(!task->busy() && task->state() != State::PlanFailed, 30000);
        QCOMPARE(task->state(), State::Planned);
        QVERIFY(!page->taskError()->isVisible());
        QVERIFY(page->fileTable()->topLevelItemCount() > 0);
    }

    // What is "present" depends on the folder: a plan made against another one must not keep
    // saying Done. A run in progress finishes where it started; the new plan follows it.
    void anotherCacheFolderPlansAgain()
    {
        const QString second = m_work.filePath(QStringLiteral("second-cache"));
        QDir(second).removeRecursively();
        QDir(cacheDir()).removeRecursively();
        auto w = openWindow();
        w->settings()->setCacheFolder(second);
        auto* task = planVariant(*w, QString::fromLatin1(kVariant));
        QVERIFY(task);
        QCOMPARE(task->state(), State::Planned);
        throttle(200000);
        task->start();
        QTRY_VERIFY_WITH_TIMEOUT(task->totals().bytesDone > 0, 30000);

        w->settings()->setCacheFolder(cacheDir());
        QCOMPARE(task->state(), State::Downloading);
        unthrottle();
        QTRY_VERIFY_WITH_TIMEOUT(!task->busy() && task->state() != State::Downloading, 60000);
        QCOMPARE(task->state(), State::Planned);
        QCOMPARE(task->totals().presentBytes, std::uint64_t{0});
        QVERIFY2(QDir(second).entryList(QDir::Dirs | QDir::NoDotAndDotDot).contains(QStringLiteral("models--Lightricks--LTX-2.3-fp8")),
            qPrintable(QDir(second).entryList().join(QLatin1Char(' '))));

        w->settings()->setCacheFolder(second);
        QTRY_COMPARE_WITH_TIMEOUT(task->state(), State::Done, 30000);
        QCOMPARE(w->modelsPage()->catalogPanel()->variantItem(QString::fromLatin1(kVariant))->text(4), QStringLiteral("Ready"));
    }

    void theTokenIsPrivateAndNeverShownInFull()
    {
        const QString token = QStringLiteral("hf_goodtoken000000000000000000000000");
        auto w = openWindow();
        auto* settings = w->settingsPage();
        // A malformed token is refused with a reason and nothing is stored.
        settings->tokenEdit()->setText(QStringLiteral("hf_two words"));
        QTest::mouseClick(settings->saveTokenButton(), Qt::LeftButton);
        QVERIFY(settings->tokenStatus()->text().contains(QStringLiteral("one word")));
        QVERIFY(!QFileInfo::exists(w->settings()->tokenFilePath()));
        // So is an endpoint that is not an http(s) address; the old one stays.
        const QString endpoint = w->settings()->endpoint();
        settings->endpointEdit()->setText(QStringLiteral("ftp://mirror.example"));
        QMetaObject::invokeMethod(settings->endpointEdit(), "editingFinished");
        QCOMPARE(w->settings()->endpoint(), endpoint);
        settings->tokenEdit()->setText(token);
        QTest::mouseClick(settings->saveTokenButton(), Qt::LeftButton);
        QVERIFY(settings->tokenEdit()->text().isEmpty());
        const QString path = w->settings()->tokenFilePath();
        QVERIFY(QFileInfo::exists(path));
        QCOMPARE(QFileInfo(path).permissions() & (QFile::ReadGroup | QFile::ReadOther | QFile::WriteGroup | QFile::WriteOther),
            QFileDevice::Permissions());
        QVERIFY(settings->tokenStatus()->text().contains(QStringLiteral("hf_…0000")));
        for (auto* label : w->findChildren<QLabel*>())
            QVERIFY2(!label->text().contains(token), qPrintable(label->objectName()));
        QVERIFY(!QSettings().allKeys().join(QLatin1Char(' ')).contains(QStringLiteral("token"), Qt::CaseInsensitive)
            || !QFile(QSettings().fileName()).open(QIODevice::ReadOnly)
            || !QFile(QSettings().fileName()).readAll().contains(token.toUtf8()));

        // With the token the gated repo plans.
        auto* task = w->downloads()->openRepo(QStringLiteral("gated/model"));
        QTRY_VERIFY_WITH_TIMEOUT(!task->busy(), 20000);
        QCOMPARE(task->state(), State::Planned);
    }

    // Not a check: with VIREO_SCREENSHOT_DIR set (tests/ui/take_screenshots.sh, under Xvfb)
    // it saves the picker and the download panel mid-download.
    void screenshots()
    {
        const auto dir = qEnvironmentVariable("VIREO_SCREENSHOT_DIR");
        if (dir.isEmpty())
            QSKIP("set VIREO_SCREENSHOT_DIR to write screenshots");
        QDir(cacheDir()).removeRecursively();
        QDir().mkpath(dir);
        QSettings().remove(QStringLiteral("hub/headroomBytes"));  // the margin a user starts with
        auto w = openWindow();
        w->resize(1360, 820);
        w->showPage(MainWindow::Page::Models);
        auto* panel = w->modelsPage()->catalogPanel();
        planVariant(*w, QStringLiteral("ltx-2/distilled-fp8"));
        w->showPage(MainWindow::Page::Models);
        panel->catalogTree()->setCurrentItem(panel->variantItem(QStringLiteral("ltx-2.3/distilled-gguf-q4_k_m")));
        QTest::qWait(300);
        QVERIFY(w->grab().save(dir + QStringLiteral("/model-picker.png")));
        throttle(60000);
        auto* task = planVariant(*w, QString::fromLatin1(kVariant));
        QTest::mouseClick(w->downloadsPage()->startButton(), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(task->totals().bytesDone > task->totals().totalBytes / 3, 60000);
        QTest::qWait(300);
        QVERIFY(w->grab().save(dir + QStringLiteral("/download-panel.png")));
        task->cancelAll();
        QTRY_VERIFY_WITH_TIMEOUT(!task->busy(), 15000);
        w->showPage(MainWindow::Page::Settings);
        QTest::qWait(200);
        QVERIFY(w->grab().save(dir + QStringLiteral("/settings.png")));
    }
};

QTEST_MAIN(TestDownloadsGui)
#include "test_downloadsgui.moc"
