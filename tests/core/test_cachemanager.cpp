// Disk management against a real cache filled from the local test Hub: two LTX-2.3 variants
// that share the Gemma text encoder, then sizes, deleting one (the shared files stay), refusal
// while a model uses the files, cleanup of stale partials (and never through a planted link),
// and deleting a whole repo.
#include "core/hub/cachemanager.h"
#include "core/hub/downloadmanager.h"
#include "core/settings/studiosettings.h"
#include "tests/hub/testhub.h"

#include <QDir>
#include <QFile>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace vireo;
using hub::CacheManager;
using hub::DownloadManager;
using hub::DownloadTask;

class TestCacheManager : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QVERIFY(m_work.isValid());
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("VireoTest"));
        QCoreApplication::setApplicationName(QStringLiteral("vireo-cache-test"));
        qunsetenv("HF_TOKEN");
        qunsetenv("HF_HUB_OFFLINE");
        qputenv("HF_HOME", m_work.filePath(QStringLiteral("hf-home")).toUtf8());
        QSettings().clear();
        QString error;
        QVERIFY2(m_server.start(m_work.path(), {}, &error), qPrintable(error));
        QSettings().setValue(QStringLiteral("hub/cacheDir"), cache());
        QSettings().setValue(QStringLiteral("hub/endpoint"), m_server.hubUrl());
        QSettings().setValue(QStringLiteral("hub/headroomBytes"), quint64(16) << 20);
    }

    void cleanupTestCase() { m_server.stop(); }

    void sizesDeletionsAndCleanup()
    {
        auto catalog = catalog::Catalog::loadBuiltin();
        QVERIFY(catalog.ok());
        core::StudioSettings settings;
        DownloadManager downloads(&settings, std::move(*catalog));
        for (const auto* id : {"ltx-2.3/distilled-fp8", "ltx-2.3/distilled-bf16"}) {
            auto* t = downloads.openVariant(QString::fromLatin1(id));
            QVERIFY(t);
            QVERIFY(QTest::qWaitFor([t] { return t->state() == DownloadTask::State::Planned; }, 30000));
            t->start();
            QVERIFY2(QTest::qWaitFor(
                         [t] { return t->state() == DownloadTask::State::Done || t->state() == DownloadTask::State::Failed; }, 60000),
                qPrintable(t->message()));
            QCOMPARE(t->state(), DownloadTask::State::Done);
        }
        QStringList inUse;
        CacheManager cm(&downloads, [&] { return inUse; });

        // Sizes: each variant reads the shared text encoder; its own bytes exclude it.
        const auto variants = cm.variants();
        QCOMPARE(variants.size(), 2);
        for (const auto& v : variants) {
            std::printf("   %s: %lld bytes, %lld its own\n", qPrintable(v.title), static_cast<long long>(v.bytes),
                static_cast<long long>(v.ownBytes));
            QVERIFY(v.ownBytes > 0 && v.ownBytes < v.bytes);
        }
        const auto repos = cm.repos();
        QVERIFY(repos.size() >= 2);
        for (const auto& r : repos)
            if (r.repo == QStringLiteral("Lightricks/LTX-2"))
                QCOMPARE(r.variants.size(), 2);

        // Deleting fp8: its own files go, the shared ones stay, with the reason.
        const auto fp8 =
            std::find_if(variants.begin(), variants.end(), [](const auto& v) { return v.id == QStringLiteral("ltx-2.3/distilled-fp8"); });
        auto plan = cm.planDeleteVariant(QStringLiteral("ltx-2.3/distilled-fp8"));
        QVERIFY2(plan.blockers.isEmpty(), qPrintable(plan.blockers.join(QLatin1Char('\n'))));
        QCOMPARE(plan.freedBytes, fp8->ownBytes);
        QVERIFY(std::any_of(plan.kept.begin(), plan.kept.end(),
            [](const QString& k) { return k.contains(QStringLiteral("text_encoder")) && k.contains(QStringLiteral("bf16")); }));
        for (const auto& p : plan.remove)
            QVERIFY2(p.startsWith(QFileInfo(cache()).canonicalFilePath()) || p.startsWith(cache()), qPrintable(p));

        // While a model reads its files: refused, and nothing changes.
        auto ready = downloads.readyFiles(QStringLiteral("catalog:ltx-2.3/distilled-fp8"));
        QVERIFY(ready.has_value());
        const auto transformer = downloads.hfCache()->snapshotPath((*ready)[0].repo, (*ready)[0].commit, (*ready)[0].files[0].path);
        QVERIFY(transformer.ok());
        inUse = {QString::fromStdString(transformer->string())};
        plan = cm.planDeleteVariant(QStringLiteral("ltx-2.3/distilled-fp8"));
        QVERIFY(!plan.blockers.isEmpty());
        QString error;
        QCOMPARE(cm.execute(plan, &error), qint64(-1));
        QVERIFY(error.contains(QStringLiteral("in use")));
        QVERIFY(downloads.readyFiles(QStringLiteral("catalog:ltx-2.3/distilled-fp8")).has_value());

        inUse.clear();
        plan = cm.planDeleteVariant(QStringLiteral("ltx-2.3/distilled-fp8"));
        const auto freed = cm.execute(plan, &error);
        QVERIFY2(freed == plan.freedBytes, qPrintable(error));
        QVERIFY(!downloads.readyFiles(QStringLiteral("catalog:ltx-2.3/distilled-fp8")).has_value());
        QVERIFY2(downloads.readyFiles(QStringLiteral("catalog:ltx-2.3/distilled-bf16")).has_value(), "the shared text encoder was removed");

        // Cleanup: a rejected file and a partial of a blob that is complete go; a resumable
        // partial stays; a planted link is never followed.
        const auto repoDir = QString::fromStdString(downloads.hfCache()->repoDir("Lightricks/LTX-2.3")->string());
        const QString partial = repoDir + QStringLiteral("/.vireo-partial");
        QDir().mkpath(partial);
        auto write = [](const QString& path, int bytes) {
            QFile f(path);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QByteArray(bytes, 'x'));
        };
        write(partial + QStringLiteral("/aaaa.part.rejected"), 1000);
        const auto someBlob = QDir(repoDir + QStringLiteral("/blobs")).entryList(QDir::Files).first();
        write(partial + QLatin1Char('/') + someBlob + QStringLiteral(".part"), 500);
        write(partial + QStringLiteral("/bbbb.part"), 700);  // a download of this repo would resume it
        const QString outside = m_work.filePath(QStringLiteral("precious.txt"));
        write(outside, 10);
        QVERIFY(QFile::link(outside, partial + QStringLiteral("/evil.part.rejected")));
        auto clean = cm.planCleanup();
        QCOMPARE(clean.freedBytes, qint64(1500));
        QCOMPARE(clean.remove.size(), 2);
        QVERIFY(cm.execute(clean, &error) == 1500);
        QVERIFY(QFile::exists(partial + QStringLiteral("/bbbb.part")));
        QVERIFY(QFile::exists(outside));
        QVERIFY(QFileInfo(partial + QStringLiteral("/evil.part.rejected")).isSymLink());

        // A whole repo: bf16 reads from it, so it is no longer ready afterwards.
        plan = cm.planDeleteRepo(QStringLiteral("Lightricks/LTX-2.3"));
        QVERIFY(plan.blockers.isEmpty());
        QVERIFY(std::any_of(plan.kept.begin(), plan.kept.end(), [](const QString& k) { return k.contains(QStringLiteral("bf16")); }));
        QVERIFY(cm.execute(plan, &error) >= 0);
        QVERIFY(!QFileInfo::exists(repoDir));
        QVERIFY(!downloads.readyFiles(QStringLiteral("catalog:ltx-2.3/distilled-bf16")).has_value());
        QVERIFY(QFile::exists(outside));
    }

private:
    QString cache() const { return m_work.filePath(QStringLiteral("cache")); }
    QTemporaryDir m_work;
    test::TestHub m_server;
};

QTEST_GUILESS_MAIN(TestCacheManager)
#include "test_cachemanager.moc"
