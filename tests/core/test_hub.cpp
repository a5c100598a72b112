// The Hub client, plans and downloads against the local test Hub (tests/hub/hubserver.py),
// which speaks the Hub's protocol from two loopback ports (Hub and CDN) and injects faults.
#include "core/catalog/catalog.h"
#include "core/hub/hubjson.h"
#include "core/hub/plandownload.h"
#include "tests/hub/testhub.h"

#include <QDir>
#include <QElapsedTimer>
#include <QScopeGuard>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <set>

#include <sys/mount.h>
#include <thread>
#include <unistd.h>

using namespace vireo::hub;

namespace {

const char* kGoodToken = "hf_goodtoken000000000000000000000000";

// A failed QVERIFY returns early; the runner thread must still be stopped and joined, or
// std::thread's destructor aborts the whole test binary.
auto joinOnExit(PlanDownload& download, std::thread& runner)
{
    return qScopeGuard([&download, &runner] {
        if (runner.joinable()) {
            download.cancelAll();
            runner.join();
        }
    });
}

QString python()
{
    return vireo::test::TestHub::python();
}

}  // namespace

class TestHub : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_work;
    vireo::test::TestHub m_server;
    QString m_hub;
    QString m_cdn;
    QJsonObject m_spec;

    QJsonDocument control(const QByteArray& verb, const QString& path, const QByteArray& body = {})
    {
        return m_server.control(verb, path, body);
    }
    void addFault(const QJsonObject& rule) { m_server.addFaults(QJsonArray{rule}); }

    // One fault on the Hub port: requests whose path+query match `match`.
    void hubFault(const QString& match, const QString& method, QJsonObject action, int times = 1)
    {
        addFault({{QStringLiteral("match"), match}, {QStringLiteral("server"), QStringLiteral("hub")}, {QStringLiteral("method"), method},
            {QStringLiteral("times"), times}, {QStringLiteral("action"), action}});
    }

    // One fault on the next CDN request for a blob: the action's kind and its parameters.
    void cdnFault(const QString& kind, QJsonObject action = {}, const QString& method = QStringLiteral("*"))
    {
        action.insert(QStringLiteral("kind"), kind);
        addFault({{QStringLiteral("match"), QStringLiteral("/blobs/")}, {QStringLiteral("server"), QStringLiteral("cdn")},
            {QStringLiteral("method"), method}, {QStringLiteral("times"), 1}, {QStringLiteral("action"), action}});
    }

    QJsonArray requestLog() { return m_server.requestLog(); }
    void clearFaults() { m_server.clearFaults(); }

    // Requests that reached a server ("hub" or "cdn"), with their ranges.
    QStringList rangesSeen(const QString& server)
    {
        QStringList ranges;
        for (const auto& e : requestLog())
            if (e.toObject().value(QStringLiteral("server")).toString() == server)
                ranges << e.toObject().value(QStringLiteral("range")).toString();
        return ranges;
    }

    // A partial download of large.safetensors of `bytes` bytes, as a failed first run leaves it.
    FilePlan planWithPartial(const HubClient& client, const HfCache& cache, qint64 bytes)
    {
        PlanRule rule;
        rule.include = {"large.safetensors"};
        auto o = options();
        o.maxAttempts = 1;
        HubClient once(o);
        cdnFault(QStringLiteral("truncate"), QJsonObject{{QStringLiteral("after_bytes"), bytes}}, QStringLiteral("GET"));
        auto plan = planFor(client, cache, "tiny/plain", rule);
        (void)PlanDownload(once, cache, plan, small()).run();
        auto resumed = planFor(client, cache, "tiny/plain", rule);
        if (resumed.files.front().partialBytes != static_cast<std::uint64_t>(bytes))
            qFatal("no partial of %lld bytes", static_cast<long long>(bytes));
        control("DELETE", QStringLiteral("/_control/log"));
        return resumed;
    }

    HubClientOptions options(std::optional<std::string> token = std::nullopt)
    {
        HubClientOptions o;
        o.endpoint = m_hub.toStdString();
        o.token = std::move(token);
        o.retryBase = std::chrono::milliseconds(20);
        o.stallTimeout = std::chrono::seconds(2);
        o.maxAttempts = 5;
        return o;
    }

    // Bytes the CDN served for one blob (every request, retries included).
    qint64 cdnBytesFor(const std::string& sha256)
    {
        qint64 total = 0;
        for (const auto& e : requestLog()) {
            const auto o = e.toObject();
            if (o.value(QStringLiteral("server")).toString() == QStringLiteral("cdn")
                && o.value(QStringLiteral("path")).toString().contains(QString::fromStdString(sha256)))
                total += o.value(QStringLiteral("bytes_sent")).toInteger();
        }
        return total;
    }

    // Headroom is the preflight's business (preflightRefusesBeforeAnyByteMoves); these tests
    // move a few MB and must not depend on how full the machine's disk happens to be.
    static DownloadOptions small()
    {
        DownloadOptions o;
        o.headroomBytes = 16ull << 20;
        return o;
    }

    FilePlan planFor(const HubClient& client, const HfCache& cache, const std::string& repo, PlanRule rule = {})
    {
        auto plan = makePlan(client, cache, repo, "main", rule);
        if (!plan)
            qFatal("plan failed: %s", plan.error().message.c_str());
        return std::move(*plan);
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_work.isValid());
        QString error;
        QVERIFY2(
            m_server.start(m_work.path(),
                {QStringLiteral("--page-size"), QStringLiteral("7"), QStringLiteral("--cdn-alias"), QStringLiteral("127.0.0.2")}, &error),
            qPrintable(error));
        m_hub = m_server.hubUrl();
        m_cdn = m_server.cdnUrl();
        m_spec = m_server.spec();
        QVERIFY(!m_hub.isEmpty() && !m_cdn.isEmpty());
    }

    void cleanupTestCase() { m_server.stop(); }

    void init()
    {
        control("DELETE", QStringLiteral("/_control/faults"));
        control("DELETE", QStringLiteral("/_control/log"));
    }

    void listingFollowsEveryPage()
    {
        HubClient client(options());
        auto info = client.repoInfo("Lightricks/LTX-2", "main");
        QVERIFY2(info.ok(), info.ok() ? "" : info.error().message.c_str());
        QCOMPARE(info->commit.size(), std::size_t{40});
        auto files = client.listFiles("Lightricks/LTX-2", info->commit);
        QVERIFY(files.ok());
        const auto expected = m_spec.value(QStringLiteral("repos"))
                                  .toObject()
                                  .value(QStringLiteral("Lightricks/LTX-2"))
                                  .toObject()
                                  .value(QStringLiteral("files"))
                                  .toObject()
                                  .size();
        QCOMPARE(static_cast<qsizetype>(files->size()), expected);
        QVERIFY(expected > 7);  // more than one page
    }

    void diffusersPlanReadsOnlyWhatThePipelineNeeds()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.mode = PlanRule::Mode::Diffusers;
        const auto plan = planFor(client, cache, "Lightricks/LTX-2", rule);
        auto all = client.listFiles("Lightricks/LTX-2", plan.commit);
        QVERIFY(all.ok());
        std::uint64_t repoBytes = 0;
        for (const auto& f : *all)
            repoBytes += f.size;
        for (const auto& f : plan.files) {
            QVERIFY2(f.file.path == "model_index.json" || f.file.path.find('/') != std::string::npos,
                ("root file planned: " + f.file.path).c_str());
            QVERIFY2(f.file.path.find(".bin") == std::string::npos, f.file.path.c_str());
        }
        qInfo("LTX-2 diffusers plan: %zu of %zu files, %llu of %llu bytes", plan.files.size(), all->size(),
            static_cast<unsigned long long>(plan.totalBytes()), static_cast<unsigned long long>(repoBytes));
        QVERIFY(plan.totalBytes() < repoBytes / 2);
        QCOMPARE(plan.presentBytes(), std::uint64_t{0});
    }

    void downloadLandsInTheSharedCache()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        auto plan = planFor(client, cache, "tiny/plain");
        std::vector<FileStatus> seen;
        std::uint64_t lastPlanBytes = 0;
        bool monotonic = true;
        std::mutex m;
        PlanDownload download(client, cache, plan, small(), [&](const FileStatus& f, const PlanStatus& p) {
            std::lock_guard lock(m);
            seen.push_back(f);
            monotonic = monotonic && p.bytesDone >= lastPlanBytes && p.bytesDone <= p.totalBytes;
            lastPlanBytes = p.bytesDone;
        });
        auto r = download.run();
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QVERIFY(monotonic);
        QCOMPARE(lastPlanBytes, plan.totalBytes());
        for (const auto& f : plan.files) {
            const auto snapshot = QString::fromStdString(cache.snapshotPath("tiny/plain", plan.commit, f.file.path)->string());
            QVERIFY2(QFileInfo(snapshot).isSymLink(), qPrintable(snapshot));
            QVERIFY(QFileInfo(snapshot).symLinkTarget().endsWith(QString::fromStdString(f.file.etag())));
        }
        QCOMPARE(cache.readRef("tiny/plain", "main").value_or(""), plan.commit);

        // huggingface_hub finds every file offline, at the same paths.
        QProcess py;
        py.setProcessEnvironment([&] {
            auto env = QProcessEnvironment::systemEnvironment();
            env.insert(QStringLiteral("HF_HUB_CACHE"), cacheDir.path());
            env.insert(QStringLiteral("HF_HUB_OFFLINE"), QStringLiteral("1"));
            return env;
        }());
        py.start(python(),
            {QStringLiteral("-c"),
                QStringLiteral("import sys\n"
                               "from huggingface_hub import hf_hub_download, snapshot_download\n"
                               "p = hf_hub_download('tiny/plain', 'large.safetensors', local_files_only=True)\n"
                               "s = snapshot_download('tiny/plain', local_files_only=True)\n"
                               "print(p); print(s)\n")});
        QVERIFY(py.waitForFinished(60000));
        QVERIFY2(py.exitCode() == 0, py.readAllStandardError().constData());
        const auto out = QString::fromUtf8(py.readAllStandardOutput());
        QVERIFY2(out.contains(QString::fromStdString(plan.commit)), qPrintable(out));

        // A second run fetches nothing.
        control("DELETE", QStringLiteral("/_control/log"));
        auto again = planFor(client, cache, "tiny/plain");
        QCOMPARE(again.presentBytes(), again.totalBytes());
        PlanDownload second(client, cache, again, small());
        QVERIFY(second.run().ok());
        for (const auto& e : requestLog())
            QVERIFY2(!e.toObject().value(QStringLiteral("path")).toString().contains(QStringLiteral("/resolve/")),
                "a cached file was requested again");
    }

    void filesPythonDownloadedArePresent()
    {
        QTemporaryDir cacheDir;
        QProcess py;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert(QStringLiteral("HF_HUB_CACHE"), cacheDir.path());
        env.insert(QStringLiteral("HF_ENDPOINT"), m_hub);
        env.insert(QStringLiteral("HF_HUB_DISABLE_XET"), QStringLiteral("1"));
        py.setProcessEnvironment(env);
        py.start(python(),
            {QStringLiteral("-c"), QStringLiteral("from huggingface_hub import snapshot_download\nsnapshot_download('tiny/plain')\n")});
        QVERIFY(py.waitForFinished(120000));
        QVERIFY2(py.exitCode() == 0, py.readAllStandardError().constData());
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        const auto plan = planFor(client, cache, "tiny/plain");
        QCOMPARE(plan.presentBytes(), plan.totalBytes());
        for (const auto& f : plan.files)
            QVERIFY(f.present);
    }

    void droppedConnectionResumesWithoutRefetching()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"large.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        const auto& file = plan.files.front().file;
        // A clean early close: every byte sent arrives, so the bytes served must add up to
        // the file exactly. Then a reset: bytes in flight are lost, but the next request
        // must resume, not restart.
        cdnFault(QStringLiteral("truncate"), QJsonObject{{QStringLiteral("after_bytes"), 500000}}, QStringLiteral("GET"));
        int retries = 0;
        std::mutex m;
        auto counter = [&](const FileStatus& f, const PlanStatus&) {
            std::lock_guard lock(m);
            retries += f.state == FileState::Retrying;
        };
        PlanDownload download(client, cache, plan, small(), counter);
        auto r = download.run();
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QVERIFY2(retries >= 1, QJsonDocument(requestLog()).toJson().constData());
        QVERIFY(cache.hasFile("tiny/plain", plan.commit, file));
        QCOMPARE(cdnBytesFor(file.sha256), static_cast<qint64>(file.size));

        QTemporaryDir secondCache;
        HfCache cache2(secondCache.path().toStdString());
        control("DELETE", QStringLiteral("/_control/log"));
        cdnFault(QStringLiteral("drop"), QJsonObject{{QStringLiteral("after_bytes"), 1500000}}, QStringLiteral("GET"));
        PlanDownload again(client, cache2, planFor(client, cache2, "tiny/plain", rule), small(), counter);
        QVERIFY(again.run().ok());
        QVERIFY(cache2.hasFile("tiny/plain", plan.commit, file));
        QStringList ranges;
        for (const auto& e : requestLog())
            if (e.toObject().value(QStringLiteral("server")).toString() == QStringLiteral("cdn"))
                ranges << e.toObject().value(QStringLiteral("range")).toString();
        QCOMPARE(ranges.size(), 2);
        QVERIFY2(!ranges.at(1).startsWith(QStringLiteral("bytes=0-")), qPrintable(ranges.join(QLatin1Char(' '))));
    }

    void transientErrorsAreRetried()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"small.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        for (int status : {503, 500})
            cdnFault(QStringLiteral("status"), QJsonObject{{QStringLiteral("status"), status}});
        cdnFault(QStringLiteral("retry_after"), QJsonObject{{QStringLiteral("status"), 429}, {QStringLiteral("seconds"), 1}});
        cdnFault(QStringLiteral("expire"));
        PlanDownload download(client, cache, plan, small());
        auto r = download.run();
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QVERIFY(cache.hasFile("tiny/plain", plan.commit, plan.files.front().file));
    }

    void corruptedBytesAreNeverAccepted()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"small.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        const auto& file = plan.files.front().file;
        // Corrupted once: the file is fetched again from byte 0 by itself, and says so.
        cdnFault(QStringLiteral("corrupt"), QJsonObject{{QStringLiteral("offset"), 1234}});
        std::string retryMessage;
        std::mutex m;
        PlanDownload download(client, cache, plan, small(), [&](const FileStatus& f, const PlanStatus&) {
            std::lock_guard lock(m);
            if (f.state == FileState::Retrying)
                retryMessage = f.message;
        });
        auto r = download.run();
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QVERIFY2(retryMessage.find("SHA-256 mismatch") != std::string::npos
                && retryMessage.find("fetching it again from the start (attempt 2 of 3)") != std::string::npos,
            retryMessage.c_str());
        QCOMPARE(cdnBytesFor(file.sha256), 2 * static_cast<qint64>(file.size));
        QVERIFY(cache.hasFile("tiny/plain", plan.commit, file, HfCache::Verify::Hash));

        // Corrupted every time: it fails after the bounded refetches, for the user to Repair.
        QTemporaryDir second;
        HfCache cache2(second.path().toStdString());
        control("DELETE", QStringLiteral("/_control/log"));
        addFault({{QStringLiteral("match"), QStringLiteral("/blobs/")}, {QStringLiteral("server"), QStringLiteral("cdn")},
            {QStringLiteral("times"), -1},
            {QStringLiteral("action"),
                QJsonObject{{QStringLiteral("kind"), QStringLiteral("corrupt")}, {QStringLiteral("offset"), 1234}}}});
        auto failed = PlanDownload(client, cache2, planFor(client, cache2, "tiny/plain", rule), small()).run();
        QVERIFY(!failed.ok());
        QCOMPARE(failed.error().kind, HubErrorKind::Integrity);
        QVERIFY2(failed.error().message.find("Repair") != std::string::npos
                && failed.error().message.find("fetched 3 times") != std::string::npos,
            failed.error().message.c_str());
        QCOMPARE(cdnBytesFor(file.sha256), 3 * static_cast<qint64>(file.size));
        QVERIFY(!cache2.hasBlob("tiny/plain", file));
        QVERIFY(!cache2.hasFile("tiny/plain", plan.commit, file));
        QVERIFY(QFileInfo::exists(
            QString::fromStdString(cache2.partialPath("tiny/plain", file.etag())->string()) + QStringLiteral(".rejected")));
        // Repair: a new run fetches it again and succeeds.
        clearFaults();
        PlanDownload repair(client, cache2, planFor(client, cache2, "tiny/plain", rule), small());
        QVERIFY(repair.run().ok());
        QVERIFY(cache2.hasFile("tiny/plain", plan.commit, file));
    }

    void cancelKeepsThePartialAndResumeContinuesIt()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"large.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        const auto& file = plan.files.front().file;
        cdnFault(QStringLiteral("slow"), QJsonObject{{QStringLiteral("bytes_per_second"), 400000}});
        PlanDownload download(client, cache, plan, small(), {});
        bool cancelledCleanly = false;
        std::thread runner([&] {
            auto r = download.run();
            cancelledCleanly = !r.ok() && r.error().kind == HubErrorKind::Cancelled;
        });
        const auto joinRunner = joinOnExit(download, runner);
        QTRY_VERIFY_WITH_TIMEOUT(download.fileStatuses().front().bytesDone > 200000, 20000);
        download.cancelAll();
        runner.join();
        QVERIFY(cancelledCleanly);
        QCOMPARE(download.fileStatuses().front().state, FileState::Cancelled);
        const auto partial = QString::fromStdString(cache.partialPath("tiny/plain", file.etag())->string());
        const auto kept = QFileInfo(partial).size();
        QVERIFY2(kept > 0, "the partial file was not kept");

        // A new process would see the same partial: plan it, resume it.
        auto resumed = planFor(client, cache, "tiny/plain", rule);
        QCOMPARE(resumed.files.front().partialBytes, static_cast<std::uint64_t>(kept));
        control("DELETE", QStringLiteral("/_control/log"));
        PlanDownload second(client, cache, resumed, small());
        QVERIFY(second.run().ok());
        QCOMPARE(cdnBytesFor(file.sha256), static_cast<qint64>(file.size) - kept);
        QVERIFY(cache.hasFile("tiny/plain", resumed.commit, file));
    }

    void stalledTransferReconnectsAtItsOffset()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());  // watchdog: 2 s without a byte
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"large.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        cdnFault(QStringLiteral("stall"), QJsonObject{{QStringLiteral("after_bytes"), 700000}, {QStringLiteral("seconds"), 60}});
        std::string retryReason;
        std::mutex m;
        PlanDownload download(client, cache, plan, small(), [&](const FileStatus& f, const PlanStatus&) {
            std::lock_guard lock(m);
            if (f.state == FileState::Retrying)
                retryReason = f.message;
        });
        QElapsedTimer timer;
        timer.start();
        auto r = download.run();
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QVERIFY2(retryReason.find("no data") != std::string::npos, retryReason.c_str());
        QVERIFY(timer.elapsed() < 30000);
        QStringList ranges;
        for (const auto& e : requestLog())
            if (e.toObject().value(QStringLiteral("server")).toString() == QStringLiteral("cdn"))
                ranges << e.toObject().value(QStringLiteral("range")).toString();
        QCOMPARE(ranges.size(), 2);
        QVERIFY2(!ranges.at(1).startsWith(QStringLiteral("bytes=0-")), qPrintable(ranges.join(QLatin1Char(' '))));
    }

    void diskFullMidFileKeepsThePartialAndResumes()
    {
        // A real full disk: a 4 MB tmpfs as the cache (the test runs as root, as CI does).
        QTemporaryDir mountPoint;
        QVERIFY2(::mount("tmpfs", mountPoint.path().toLocal8Bit().constData(), "tmpfs", 0, "size=4m") == 0,
            "cannot mount a tmpfs for the disk-full test (needs root, as the CI machine has)");
        const auto unmount = qScopeGuard([&] { ::umount(mountPoint.path().toLocal8Bit().constData()); });
        HubClient client(options());
        HfCache cache(mountPoint.path().toStdString());
        PlanRule rule;
        rule.include = {"large.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        const auto& file = plan.files.front().file;
        cdnFault(QStringLiteral("slow"), QJsonObject{{QStringLiteral("bytes_per_second"), 800000}});
        DownloadOptions noHeadroom;
        noHeadroom.headroomBytes = 0;
        PlanDownload download(client, cache, plan, noHeadroom);
        HubResult<void> result;
        std::thread runner([&] { result = download.run(); });
        const auto joinRunner = joinOnExit(download, runner);
        QTRY_VERIFY_WITH_TIMEOUT(download.fileStatuses().front().bytesDone > 400000, 20000);
        // Another program fills the disk while the download runs.
        QFile filler(mountPoint.filePath(QStringLiteral("filler")));
        QVERIFY(filler.open(QIODevice::WriteOnly));
        const QByteArray block(64 * 1024, 'x');
        while (filler.write(block) == block.size()) {}
        filler.close();
        runner.join();
        QVERIFY(!result.ok());
        QCOMPARE(result.error().kind, HubErrorKind::DiskFull);
        QVERIFY2(result.error().message.find("disk is full") != std::string::npos, result.error().message.c_str());
        const auto partial = QString::fromStdString(cache.partialPath("tiny/plain", file.etag())->string());
        const auto kept = QFileInfo(partial).size();
        QVERIFY(kept > 0);

        QFile::remove(filler.fileName());
        control("DELETE", QStringLiteral("/_control/log"));
        PlanDownload resumed(client, cache, planFor(client, cache, "tiny/plain", rule), noHeadroom);
        auto again = resumed.run();
        QVERIFY2(again.ok(), again.ok() ? "" : again.error().message.c_str());
        QVERIFY(cache.hasFile("tiny/plain", plan.commit, file));
        QCOMPARE(cdnBytesFor(file.sha256), static_cast<qint64>(file.size) - kept);
    }

    void rangesComeInChunksAndSharedBlobsComeOnce()
    {
        QTemporaryDir cacheDir;
        auto o = options();
        o.chunkBytes = 1 << 20;
        HubClient client(o);
        HfCache cache(cacheDir.path().toStdString());
        PlanRule large;
        large.include = {"large.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", large);
        QVERIFY(PlanDownload(client, cache, plan, small()).run().ok());
        QStringList ranges;
        for (const auto& e : requestLog())
            if (e.toObject().value(QStringLiteral("server")).toString() == QStringLiteral("cdn"))
                ranges << e.toObject().value(QStringLiteral("range")).toString();
        QCOMPARE(ranges,
            (QStringList{
                QStringLiteral("bytes=0-1048575"), QStringLiteral("bytes=1048576-2097151"), QStringLiteral("bytes=2097152-3145727")}));

        // A second plan that includes the same file fetches only what it lacks.
        control("DELETE", QStringLiteral("/_control/log"));
        PlanRule both;
        both.include = {"*.safetensors"};
        auto second = planFor(client, cache, "tiny/plain", both);
        QCOMPARE(second.files.size(), std::size_t{2});
        QVERIFY(PlanDownload(client, cache, second, small()).run().ok());
        const auto& largeFile = plan.files.front().file;
        QCOMPARE(cdnBytesFor(largeFile.sha256), qint64{0});
    }

    void cancelDuringABackoffIsPrompt()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"small.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        cdnFault(QStringLiteral("retry_after"), QJsonObject{{QStringLiteral("status"), 429}, {QStringLiteral("seconds"), 120}});
        PlanDownload download(client, cache, plan, small());
        HubResult<void> result;
        std::thread runner([&] { result = download.run(); });
        const auto joinRunner = joinOnExit(download, runner);
        QTRY_VERIFY_WITH_TIMEOUT(download.fileStatuses().front().state == FileState::Retrying, 20000);
        QElapsedTimer timer;
        timer.start();
        download.cancelAll();
        runner.join();
        QVERIFY2(timer.elapsed() < 2000, qPrintable(QString::number(timer.elapsed())));
        QVERIFY(!result.ok());
        QCOMPARE(result.error().kind, HubErrorKind::Cancelled);
    }

    void gatedAndMissingGiveDistinctErrors()
    {
        QTemporaryDir cacheDir;
        HfCache cache(cacheDir.path().toStdString());
        auto noToken = makePlan(HubClient(options()), cache, "gated/model", "main", {});
        QVERIFY(!noToken.ok());
        QCOMPARE(noToken.error().kind, HubErrorKind::GatedNoToken);
        // A valid token that has not accepted this model's licence.
        auto wrongToken = makePlan(HubClient(options("hf_othertoken00000000000000000000000")), cache, "gated/model", "main", {});
        QVERIFY(!wrongToken.ok());
        QCOMPARE(wrongToken.error().kind, HubErrorKind::GatedNoAccess);
        QVERIFY2(wrongToken.error().message.find("hf_other") == std::string::npos, "the token leaked into an error");
        HubClient good(options(kGoodToken));
        auto plan = makePlan(good, cache, "gated/model", "main", {});
        QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
        QVERIFY(PlanDownload(good, cache, *plan, small()).run().ok());
        for (const auto& e : requestLog()) {
            const auto o = e.toObject();
            if (o.value(QStringLiteral("server")).toString() == QStringLiteral("cdn"))
                QVERIFY2(!o.value(QStringLiteral("authorization")).toBool(), "the token was sent to the CDN");
        }
        auto missingRepo = makePlan(good, cache, "nobody/nothing", "main", {});
        QVERIFY(!missingRepo.ok());
        QCOMPARE(missingRepo.error().kind, HubErrorKind::RepoNotFound);
        auto missingFile = good.fileMetadata("tiny/plain", plan->commit, "no-such-file.safetensors");
        QVERIFY(!missingFile.ok());
    }

    void preflightRefusesBeforeAnyByteMoves()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        auto plan = planFor(client, cache, "tiny/plain");
        const auto check = preflight(plan, cache, 1ull << 60);
        QVERIFY(!check.fits);
        QVERIFY2(check.message.find("free some space") != std::string::npos, check.message.c_str());
        DownloadOptions huge;
        huge.headroomBytes = 1ull << 60;
        control("DELETE", QStringLiteral("/_control/log"));
        auto r = PlanDownload(client, cache, plan, huge).run();
        QVERIFY(!r.ok());
        QCOMPARE(r.error().kind, HubErrorKind::DiskFull);
        QCOMPARE(requestLog().size(), 0);
    }

    void unsafePathsAreRefused()
    {
        for (const char* bad : {"../evil", "/etc/passwd", "a/../../b", "a\\b", "a//b", "", "a/./b", "x\ny"})
            QVERIFY2(!HfCache::isSafeRepoPath(bad), bad);
        for (const char* good : {"model.safetensors", "transformer/diffusion_pytorch_model-00001-of-00002.safetensors", "a/b/c.json"})
            QVERIFY2(HfCache::isSafeRepoPath(good), good);
        HfCache cache("/tmp/cache");
        QVERIFY(!cache.snapshotPath("org/name", std::string(40, 'a'), "../../x").ok());
        QVERIFY(!cache.blobPath("org/name", "../../etc").ok());
        QVERIFY(!HfCache::repoFolderName("../x").ok());
    }

    void catalogVariantsPlanAgainstTheirRepos()
    {
        auto catalog = vireo::catalog::Catalog::loadBuiltin();
        QVERIFY2(catalog.ok(), catalog.ok() ? "" : catalog.error().message.c_str());
        QVERIFY(catalog->find("ltx-2.3/distilled-bf16"));
        QVERIFY(catalog->isTrusted("Lightricks/LTX-2.3"));
        QVERIFY(!catalog->isTrusted("someone/LTX-2.3"));
        QTemporaryDir cacheDir;
        HfCache cache(cacheDir.path().toStdString());
        HubClient client(options(kGoodToken));
        const auto repos = m_spec.value(QStringLiteral("repos")).toObject();
        int planned = 0;
        for (const auto& family : catalog->families)
            for (const auto& variant : family.variants)
                for (const auto& source : variant.sources) {
                    QVERIFY2(catalog->isTrusted(source.repo), source.repo.c_str());
                    if (!repos.contains(QString::fromStdString(source.repo)))
                        continue;  // not mirrored by the test Hub
                    auto plan = makePlan(client, cache, source.repo, source.revision, source.rule);
                    QVERIFY2(plan.ok(),
                        (family.id + "/" + variant.id + " " + source.role + ": " + (plan.ok() ? "" : plan.error().message)).c_str());
                    for (const auto& f : plan->files)
                        QVERIFY2(f.file.path.find(".bin") == std::string::npos, f.file.path.c_str());
                    ++planned;
                }
        qInfo("planned %d catalog sources against the test Hub", planned);
        QVERIFY(planned >= 10);
    }

    // An LTX-2.3 variant reads only the text encoder and tokenizer from the LTX-2 (2.0) base
    // repo: never its transformer, VAEs, vocoder or connectors, which 2.3 brings itself (and
    // whose 2.0 versions would be tens of GB the user never uses). Issue #26.
    void ltx23VariantsSkipTheBaseModelsOwnParts()
    {
        auto catalog = vireo::catalog::Catalog::loadBuiltin();
        QVERIFY(catalog.ok());
        QTemporaryDir cacheDir;
        HfCache cache(cacheDir.path().toStdString());
        HubClient client(options());
        const auto* family = catalog->family("ltx-2.3");
        QVERIFY(family);
        int checked = 0;
        for (const auto& variant : family->variants)
            for (const auto& source : variant.sources) {
                if (source.repo != "Lightricks/LTX-2")
                    continue;
                auto plan = makePlan(client, cache, source.repo, source.revision, source.rule);
                QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
                std::set<std::string> folders;
                for (const auto& f : plan->files) {
                    const auto slash = f.file.path.find('/');
                    folders.insert(slash == std::string::npos ? std::string("(root)") : f.file.path.substr(0, slash));
                    QVERIFY2(slash != std::string::npos || f.file.path == "model_index.json", (variant.id + ": " + f.file.path).c_str());
                }
                std::string list;
                for (const auto& f : folders)
                    list += " " + f;
                QVERIFY2(folders.count("text_encoder") && folders.count("tokenizer"), (variant.id + ":" + list).c_str());
                for (const char* other : {"transformer", "vae", "audio_vae", "vocoder", "connectors", "latent_upsampler"})
                    QVERIFY2(!folders.count(other), (variant.id + " plans " + other + " from the 2.0 base:" + list).c_str());
                ++checked;
            }
        QVERIFY2(checked >= 4, "no LTX-2.3 variant reads the 2.0 base repo");
    }

    // ---------------------------------------------------------------- a hostile Hub

    void redirectsToOtherSchemesAreRefused()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"small.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        for (const char* to : {"gopher://127.0.0.1:70/x", "file:///etc/passwd", "ftp://127.0.0.1/x"}) {
            control("DELETE", QStringLiteral("/_control/log"));
            hubFault(QStringLiteral("small\\.safetensors"), QStringLiteral("HEAD"),
                QJsonObject{{QStringLiteral("kind"), QStringLiteral("redirect")}, {QStringLiteral("to"), QString::fromLatin1(to)}}, -1);
            auto r = PlanDownload(client, cache, plan, small()).run();
            clearFaults();
            QVERIFY(!r.ok());
            QCOMPARE(r.error().kind, HubErrorKind::Unsafe);
            QVERIFY2(r.error().message.find("neither http nor https") != std::string::npos, r.error().message.c_str());
            QVERIFY(rangesSeen(QStringLiteral("cdn")).isEmpty());
        }
    }

    void downloadsToPrivateAddressesAreRefused()
    {
        QVERIFY(!m_server.cdnAliasUrl().isEmpty());
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"small.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        // The CDN on 127.0.0.2: this machine, but not the address the Hub (127.0.0.1) is on.
        // The check runs on the connected address, so a name that resolves there (DNS
        // rebinding) is caught the same way.
        hubFault(QStringLiteral("small\\.safetensors"), QStringLiteral("HEAD"),
            QJsonObject{
                {QStringLiteral("kind"), QStringLiteral("redirect")}, {QStringLiteral("to"), QStringLiteral("{cdn_alias}{signed}")}},
            -1);
        auto r = PlanDownload(client, cache, plan, small()).run();
        clearFaults();
        QVERIFY(!r.ok());
        QCOMPARE(r.error().kind, HubErrorKind::Unsafe);
        QVERIFY2(r.error().message.find("127.0.0.2, a loopback address") != std::string::npos, r.error().message.c_str());
        QVERIFY2(rangesSeen(QStringLiteral("cdn")).isEmpty(), "the request reached the refused address");
        QCOMPARE(cache.partialBytes("tiny/plain", plan.files.front().file.etag()), std::uint64_t{0});

        QCOMPARE(classifyAddress("127.0.0.1"), AddressKind::Loopback);
        QCOMPARE(classifyAddress("::1"), AddressKind::Loopback);
        QCOMPARE(classifyAddress("::ffff:10.1.2.3"), AddressKind::Private);
        QCOMPARE(classifyAddress("192.168.0.7"), AddressKind::Private);
        QCOMPARE(classifyAddress("172.31.255.1"), AddressKind::Private);
        QCOMPARE(classifyAddress("172.32.0.1"), AddressKind::Public);
        QCOMPARE(classifyAddress("169.254.169.254"), AddressKind::LinkLocal);
        QCOMPARE(classifyAddress("fe80::1"), AddressKind::LinkLocal);
        QCOMPARE(classifyAddress("fd00::1"), AddressKind::Private);
        QCOMPARE(classifyAddress("0.0.0.0"), AddressKind::Special);
        QCOMPARE(classifyAddress("::"), AddressKind::Special);
        QCOMPARE(classifyAddress("8.8.8.8"), AddressKind::Public);
        QCOMPARE(classifyAddress("2606:4700::1111"), AddressKind::Public);
    }

    void aRangeAnsweredWrongIsNeverWritten()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        auto plan = planWithPartial(client, cache, 500000);
        const auto& file = plan.files.front().file;
        const auto partial = QString::fromStdString(cache.partialPath("tiny/plain", file.etag())->string());
        DownloadOptions noRefetch = small();
        noRefetch.autoRefetches = 0;

        // 200 with the whole file for a resume: it would land at byte 500000.
        cdnFault(QStringLiteral("ignore_range"));
        auto r = PlanDownload(client, cache, plan, noRefetch).run();
        QVERIFY(!r.ok());
        QCOMPARE(r.error().kind, HubErrorKind::Integrity);
        QVERIFY2(r.error().message.find("the server ignores byte ranges (HTTP 200 for bytes 500000-") != std::string::npos,
            r.error().message.c_str());
        QCOMPARE(QFileInfo(partial).size(), qint64{500000});

        // 206 for another range than the one asked for.
        cdnFault(QStringLiteral("header"),
            QJsonObject{{QStringLiteral("name"), QStringLiteral("Content-Range")},
                {QStringLiteral("value"), QStringLiteral("bytes 0-2645727/3145728")}});
        r = PlanDownload(client, cache, plan, noRefetch).run();
        QVERIFY(!r.ok());
        QCOMPARE(r.error().kind, HubErrorKind::Integrity);
        QVERIFY2(r.error().message.find("sent bytes 0-2645727 of 3145728 for bytes 500000-3145727") != std::string::npos,
            r.error().message.c_str());
        QCOMPARE(QFileInfo(partial).size(), qint64{500000});

        // With the refetches on, the same answer makes it start over from byte 0, and finish.
        control("DELETE", QStringLiteral("/_control/log"));
        cdnFault(QStringLiteral("ignore_range"));
        auto fixed = PlanDownload(client, cache, plan, small()).run();
        QVERIFY2(fixed.ok(), fixed.ok() ? "" : fixed.error().message.c_str());
        QVERIFY(cache.hasFile("tiny/plain", plan.commit, file, HfCache::Verify::Hash));
        QVERIFY2(rangesSeen(QStringLiteral("cdn")).last().startsWith(QStringLiteral("bytes=0-")),
            qPrintable(rangesSeen(QStringLiteral("cdn")).join(QLatin1Char(' '))));
    }

    void aResumeAnswered416StartsOver()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        auto plan = planWithPartial(client, cache, 700000);
        const auto& file = plan.files.front().file;
        cdnFault(QStringLiteral("range_not_satisfiable"));
        std::string retryMessage;
        std::mutex m;
        auto r = PlanDownload(client, cache, plan, small(), [&](const FileStatus& f, const PlanStatus&) {
            std::lock_guard lock(m);
            if (f.state == FileState::Retrying)
                retryMessage = f.message;
        }).run();
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QVERIFY2(retryMessage.find("HTTP 416") != std::string::npos, retryMessage.c_str());
        const auto ranges = rangesSeen(QStringLiteral("cdn"));
        QCOMPARE(ranges.size(), 2);  // one 416, then the whole file: no retry of the same range
        QVERIFY2(ranges.at(0).startsWith(QStringLiteral("bytes=700000-")) && ranges.at(1).startsWith(QStringLiteral("bytes=0-")),
            qPrintable(ranges.join(QLatin1Char(' '))));
        QVERIFY(cache.hasFile("tiny/plain", plan.commit, file));
    }

    void aTrickleRunsOutOfAttempts()
    {
        QTemporaryDir cacheDir;
        auto o = options();
        o.stallTimeout = std::chrono::seconds(1);
        o.minBytesPerSecond = 4096;
        o.maxAttempts = 3;
        HubClient client(o);
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"small.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        // 200 bytes a second: every attempt receives something, none enough to count as alive.
        addFault({{QStringLiteral("match"), QStringLiteral("/blobs/")}, {QStringLiteral("server"), QStringLiteral("cdn")},
            {QStringLiteral("times"), -1},
            {QStringLiteral("action"),
                QJsonObject{{QStringLiteral("kind"), QStringLiteral("slow")}, {QStringLiteral("bytes_per_second"), 200}}}});
        QElapsedTimer timer;
        timer.start();
        auto r = PlanDownload(client, cache, plan, small()).run();
        clearFaults();
        QVERIFY(!r.ok());
        QCOMPARE(r.error().kind, HubErrorKind::Network);
        QVERIFY2(r.error().message.find("gave up after 3 attempts (no data (or under 4096 bytes/s) for 1 s)") != std::string::npos,
            r.error().message.c_str());
        QVERIFY2(timer.elapsed() < 30000, qPrintable(QString::number(timer.elapsed())));
        QCOMPARE(rangesSeen(QStringLiteral("cdn")).size(), 3);
    }

    void listingsThatLoopOrLeaveTheHubEnd()
    {
        HubClient client(options());
        const auto commit = client.repoInfo("Lightricks/LTX-2", "main")->commit;
        hubFault(QStringLiteral("/tree/"), QStringLiteral("GET"),
            QJsonObject{{QStringLiteral("kind"), QStringLiteral("header")}, {QStringLiteral("name"), QStringLiteral("Link")},
                {QStringLiteral("value"), QStringLiteral("<{self}>; rel=\"next\"")}},
            -1);
        QElapsedTimer timer;
        timer.start();
        auto looping = client.listFiles("Lightricks/LTX-2", commit);
        clearFaults();
        QVERIFY(!looping.ok());
        QVERIFY2(
            looping.error().message.find("links back to a page it already gave") != std::string::npos, looping.error().message.c_str());
        QVERIFY(timer.elapsed() < 10000);

        hubFault(QStringLiteral("/tree/"), QStringLiteral("GET"),
            QJsonObject{{QStringLiteral("kind"), QStringLiteral("header")}, {QStringLiteral("name"), QStringLiteral("Link")},
                {QStringLiteral("value"), QStringLiteral("<http://169.254.169.254/latest/meta-data>; rel=\"next\"")}});
        auto elsewhere = client.listFiles("Lightricks/LTX-2", commit);
        clearFaults();
        QVERIFY(!elsewhere.ok());
        QCOMPARE(elsewhere.error().kind, HubErrorKind::Unsafe);
        QVERIFY2(elsewhere.error().message.find("not on the Hub") != std::string::npos, elsewhere.error().message.c_str());
    }

    void absurdSizesAreErrorsNeverFits()
    {
        HubClient client(options());
        const auto commit = client.repoInfo("tiny/plain", "main")->commit;
        for (const char* size : {"abc", "99999999999999999999", "-5", "1152921504606846976", "12 34", ""}) {
            hubFault(QStringLiteral("large\\.safetensors"), QStringLiteral("HEAD"),
                QJsonObject{{QStringLiteral("kind"), QStringLiteral("header")}, {QStringLiteral("name"), QStringLiteral("X-Linked-Size")},
                    {QStringLiteral("value"), QString::fromLatin1(size)}});
            auto meta = client.fileMetadata("tiny/plain", commit, "large.safetensors");
            clearFaults();
            QVERIFY2(!meta.ok(), size);
            QCOMPARE(meta.error().kind, HubErrorKind::Protocol);
        }
        // In a listing: negative, fractional, huge, a string.
        for (const char* entry : {R"({"type":"file","path":"a","size":-1,"oid":"0000000000000000000000000000000000000000"})",
                 R"({"type":"file","path":"a","size":1e30,"oid":"0000000000000000000000000000000000000000"})",
                 R"({"type":"file","path":"a","size":1152921504606846976,"oid":"0000000000000000000000000000000000000000"})",
                 R"({"type":"file","path":"a","size":"12","oid":"0000000000000000000000000000000000000000"})"}) {
            hubFault(QStringLiteral("/tree/"), QStringLiteral("GET"),
                QJsonObject{{QStringLiteral("kind"), QStringLiteral("body")},
                    {QStringLiteral("text"), QString(QStringLiteral("[") + QString::fromLatin1(entry) + QStringLiteral("]"))}});
            auto files = client.listFiles("tiny/plain", commit);
            clearFaults();
            QVERIFY2(!files.ok(), entry);
            QVERIFY2(files.error().message.find("entry for 'a' has size") != std::string::npos, files.error().message.c_str());
        }
        // A plan near 2^64 (not one makePlan would make) never fits the disk.
        QTemporaryDir cacheDir;
        HfCache cache(cacheDir.path().toStdString());
        FilePlan plan;
        plan.repo = "tiny/plain";
        for (std::uint64_t size : {UINT64_MAX - 1, std::uint64_t{3}}) {
            PlannedFile f;
            f.file.path = "f" + std::to_string(size);
            f.file.size = size;
            f.file.sha256 = std::string(63, 'a') + (size == 3 ? "b" : "c");
            plan.files.push_back(f);
        }
        QCOMPARE(plan.totalBytes(), UINT64_MAX);
        const auto check = preflight(plan, cache, 2ull << 30);
        QVERIFY(!check.fits);
        QCOMPARE(check.neededBytes, UINT64_MAX);
    }

    void wrongJsonTypesAndNonUtf8NamesAreErrors()
    {
        HubClient client(options());
        const auto commit = client.repoInfo("tiny/plain", "main")->commit;
        // Each of these used to throw a type_error out of the listing (or wrap a size).
        const std::pair<const char*, const char*> cases[] = {
            {R"([{"type":"file","path":5,"size":1,"oid":"0000000000000000000000000000000000000000"}])", "no \"path\" string"},
            {R"([{"type":7}])", "has no \"type\""},
            {R"([{"type":"file","path":"a","size":1,"oid":12}])", "has no git oid"},
            {R"([{"type":"file","path":"a","size":1,"oid":"0000000000000000000000000000000000000000","lfs":{"oid":[],"size":1}}])",
                "without a SHA-256"},
            {R"({"path":"a"})", "is not a JSON array"},
            {R"([{"type":"file","path":"a","size":1,"oid":"0000000000000000000000000000000000000000"},)"
             R"({"type":"file","path":"a","size":1,"oid":"0000000000000000000000000000000000000000"}])",
                "is listed twice"},
        };
        for (const auto& [body, expect] : cases) {
            hubFault(QStringLiteral("/tree/"), QStringLiteral("GET"),
                QJsonObject{{QStringLiteral("kind"), QStringLiteral("body")}, {QStringLiteral("text"), QString::fromUtf8(body)}});
            auto files = client.listFiles("tiny/plain", commit);
            clearFaults();
            QVERIFY2(!files.ok(), body);
            QCOMPARE(files.error().kind, HubErrorKind::Protocol);
            QVERIFY2(files.error().message.find(expect) != std::string::npos, files.error().message.c_str());
        }
        // A file name that is not UTF-8 (raw 0xFF in the JSON text).
        hubFault(QStringLiteral("/tree/"), QStringLiteral("GET"),
            QJsonObject{{QStringLiteral("kind"), QStringLiteral("body")},
                {QStringLiteral("hex"), QStringLiteral("5b7b2274797065223a2266696c65222c2270617468223a2261ff227d5d")}});
        auto latin = client.listFiles("tiny/plain", commit);
        clearFaults();
        QVERIFY(!latin.ok());
        QVERIFY2(latin.error().message.find("is not valid JSON") != std::string::npos, latin.error().message.c_str());
        // Repository info: a commit that is a number, and JSON nested far too deep.
        hubFault(QStringLiteral("/revision/"), QStringLiteral("GET"),
            QJsonObject{{QStringLiteral("kind"), QStringLiteral("body")}, {QStringLiteral("text"), QStringLiteral("{\"sha\": 5}")}});
        auto info = client.repoInfo("tiny/plain", "main");
        clearFaults();
        QVERIFY(!info.ok());
        QVERIFY2(info.error().message.find("has no commit") != std::string::npos, info.error().message.c_str());
        hubFault(QStringLiteral("/revision/"), QStringLiteral("GET"),
            QJsonObject{{QStringLiteral("kind"), QStringLiteral("body")},
                {QStringLiteral("text"),
                    QString(QStringLiteral("{\"sha\":") + QString(100000, QLatin1Char('[')) + QString(100000, QLatin1Char(']'))
                        + QStringLiteral("}"))}});
        info = client.repoInfo("tiny/plain", "main");
        clearFaults();
        QVERIFY(!info.ok());
        QVERIFY2(info.error().message.find("nests objects or lists deeper than 64") != std::string::npos, info.error().message.c_str());
        // model_index.json that is not an object, a shard index whose weight_map holds numbers.
        QTemporaryDir cacheDir;
        HfCache cache(cacheDir.path().toStdString());
        PlanRule diffusers;
        diffusers.mode = PlanRule::Mode::Diffusers;
        hubFault(QStringLiteral("model_index\\.json"), QStringLiteral("GET"),
            QJsonObject{{QStringLiteral("kind"), QStringLiteral("body")}, {QStringLiteral("text"), QStringLiteral("[1, 2]")}}, -1);
        hubFault(QStringLiteral("model_index\\.json"), QStringLiteral("HEAD"),
            QJsonObject{{QStringLiteral("kind"), QStringLiteral("header")}, {QStringLiteral("name"), QStringLiteral("Content-Length")},
                {QStringLiteral("value"), QStringLiteral("6")}},
            -1);
        hubFault(QStringLiteral("model_index\\.json"), QStringLiteral("GET"),
            QJsonObject{{QStringLiteral("kind"), QStringLiteral("header")}, {QStringLiteral("name"), QStringLiteral("Content-Range")},
                {QStringLiteral("value"), QStringLiteral("bytes 0-5/6")}},
            -1);
        auto plan = makePlan(client, cache, "Lightricks/LTX-2", "main", diffusers);
        clearFaults();
        QVERIFY(!plan.ok());
        QVERIFY2(plan.error().message.find("model_index.json is not a JSON object") != std::string::npos, plan.error().message.c_str());
        auto shards = parseShardIndex(R"({"weight_map": {"a": 5}})", "org/name", "x.safetensors.index.json");
        QVERIFY(!shards.ok());
        QVERIFY2(
            shards.error().message.find("weight_map entry 'a' is not a file name") != std::string::npos, shards.error().message.c_str());
    }

    // What a lying Hub can name (issue #25): a file name no filesystem takes is refused at the
    // plan, before a byte moves, and a name of megabytes makes a message of a line; a header
    // line of a megabyte is the server's fault, not "out of memory".
    void overlongNamesAndHeadersAreRefusedByWhatTheyAre()
    {
        for (const auto& name : {std::string(256, 'n') + ".safetensors", "a/" + std::string(300, 'b') + "/c.json", std::string(1100, 'x')})
            QVERIFY2(!HfCache::isSafeRepoPath(name), name.substr(0, 20).c_str());
        QVERIFY(HfCache::isSafeRepoPath(std::string(255, 'n')));
        HubClient client(options());
        const auto commit = client.repoInfo("tiny/plain", "main")->commit;
        QTemporaryDir cacheDir;
        HfCache cache(cacheDir.path().toStdString());
        for (const std::size_t length : {std::size_t(4096), std::size_t(5) << 20}) {
            const std::string name(length, 'n');
            const QString body =
                QStringLiteral(R"([{"type":"file","path":"%1","size":1,"oid":"0000000000000000000000000000000000000000"}])")
                    .arg(QString::fromStdString(name));
            hubFault(QStringLiteral("/tree/"), QStringLiteral("GET"),
                QJsonObject{{QStringLiteral("kind"), QStringLiteral("body")}, {QStringLiteral("text"), body}}, -1);
            auto plan = makePlan(client, cache, "tiny/plain", "main", PlanRule{});
            clearFaults();
            QVERIFY(!plan.ok());
            const auto& m = plan.error().message;
            QVERIFY2(m.find("longer than a filesystem takes") != std::string::npos, m.substr(0, 400).c_str());
            QVERIFY2(m.size() < 600 && m.find(std::to_string(length) + " bytes") != std::string::npos, m.substr(0, 400).c_str());
        }
        QVERIFY(QDir(cacheDir.path()).entryList(QDir::NoDotAndDotDot | QDir::AllEntries).isEmpty());
        hubFault(QStringLiteral("/revision/"), QStringLiteral("GET"),
            QJsonObject{{QStringLiteral("kind"), QStringLiteral("header")}, {QStringLiteral("name"), QStringLiteral("X-Filler")},
                {QStringLiteral("value"), QString(1 << 20, QLatin1Char('h'))}},
            -1);
        auto info = client.repoInfo("tiny/plain", "main");
        clearFaults();
        QVERIFY(!info.ok());
        QVERIFY2(info.error().message.find("header line over 100 KB") != std::string::npos
                && info.error().message.find("Out of memory") == std::string::npos,
            info.error().message.c_str());
        Q_UNUSED(commit);
    }

    void aTokenWithALineBreakIsNeverSent()
    {
        control("DELETE", QStringLiteral("/_control/log"));
        HubClient client(options(std::string(kGoodToken) + "\r\nX-Injected: 1"));
        auto info = client.repoInfo("tiny/plain", "main");
        QVERIFY(!info.ok());
        QCOMPARE(info.error().kind, HubErrorKind::Unauthorized);
        QVERIFY2(info.error().message.find("line break") != std::string::npos, info.error().message.c_str());
        QVERIFY2(info.error().message.find("hf_good") == std::string::npos, "the token leaked into an error");
        QCOMPARE(requestLog().size(), 0);
    }

    void plantedLinksAreNeverFollowed()
    {
        QTemporaryDir cacheDir, outsideDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"small.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        const auto& file = plan.files.front().file;
        const QString repoDir = QString::fromStdString(cache.repoDir("tiny/plain")->string());
        const QString outside = outsideDir.filePath(QStringLiteral("precious"));
        const QByteArray precious = "precious bytes outside the cache\n";
        auto writeOutside = [&] {
            QFile f(outside);
            QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
            f.write(precious);
        };
        auto outsideIntact = [&] {
            QFile f(outside);
            return f.open(QIODevice::ReadOnly) && f.readAll() == precious;
        };
        writeOutside();
        // A partial, its journal and refs/main, each a link to a file outside the cache.
        QVERIFY(QDir().mkpath(repoDir + QStringLiteral("/.vireo-partial")));
        QVERIFY(QDir().mkpath(repoDir + QStringLiteral("/refs")));
        const QString partial = QString::fromStdString(cache.partialPath("tiny/plain", file.etag())->string());
        QVERIFY(QFile::link(outside, partial));
        QVERIFY(QFile::link(outside, partial + QStringLiteral(".json")));
        QVERIFY(QFile::link(outside, repoDir + QStringLiteral("/refs/main")));
        QCOMPARE(cache.partialBytes("tiny/plain", file.etag()), std::uint64_t{0});
        QVERIFY(!cache.readRef("tiny/plain", "main"));
        auto r = PlanDownload(client, cache, planFor(client, cache, "tiny/plain", rule), small()).run();
        QVERIFY2(r.ok(), r.ok() ? "" : r.error().message.c_str());
        QVERIFY2(outsideIntact(), "a download wrote through a planted link");
        QVERIFY(!QFileInfo(repoDir + QStringLiteral("/refs/main")).isSymLink());
        QCOMPARE(cache.readRef("tiny/plain", "main").value_or(""), plan.commit);
        QVERIFY(cache.hasFile("tiny/plain", plan.commit, file, HfCache::Verify::Hash));

        // A blob that is a link to bytes of the right size is not content, not even verified.
        QTemporaryDir second;
        HfCache cache2(second.path().toStdString());
        const QString repo2 = QString::fromStdString(cache2.repoDir("tiny/plain")->string());
        const QString zeros = outsideDir.filePath(QStringLiteral("zeros"));
        {
            QFile f(zeros);
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write(QByteArray(static_cast<qsizetype>(file.size), '\0'));
        }
        QVERIFY(QDir().mkpath(repo2 + QStringLiteral("/blobs")));
        QVERIFY(QFile::link(zeros, repo2 + QStringLiteral("/blobs/") + QString::fromStdString(file.etag())));
        QVERIFY(cache2.linkSnapshot("tiny/plain", plan.commit, file).ok());
        QVERIFY(!cache2.hasBlob("tiny/plain", file));
        QVERIFY(!cache2.hasFile("tiny/plain", plan.commit, file));
        auto replanned = planFor(client, cache2, "tiny/plain", rule);
        QCOMPARE(replanned.presentBytes(), std::uint64_t{0});
        QVERIFY(PlanDownload(client, cache2, replanned, small()).run().ok());
        QVERIFY(cache2.hasFile("tiny/plain", plan.commit, file, HfCache::Verify::Hash));
        QCOMPARE(QFileInfo(zeros).size(), static_cast<qint64>(file.size));
        QVERIFY(!QFileInfo(repo2 + QStringLiteral("/blobs/") + QString::fromStdString(file.etag())).isSymLink());

        // A snapshot entry that points elsewhere (at a file of the right size) is not the file.
        QVERIFY(QFile::remove(
            repo2 + QStringLiteral("/snapshots/") + QString::fromStdString(plan.commit) + QStringLiteral("/small.safetensors")));
        QVERIFY(QFile::link(
            zeros, repo2 + QStringLiteral("/snapshots/") + QString::fromStdString(plan.commit) + QStringLiteral("/small.safetensors")));
        QVERIFY(!cache2.hasFile("tiny/plain", plan.commit, file));

        // A whole folder of the repo that is a link: refused with the reason, nothing written.
        QTemporaryDir third, target;
        HfCache cache3(third.path().toStdString());
        const QString repo3 = QString::fromStdString(cache3.repoDir("tiny/plain")->string());
        QVERIFY(QDir().mkpath(repo3));
        QVERIFY(QFile::link(target.path(), repo3 + QStringLiteral("/.vireo-partial")));
        auto refused = PlanDownload(client, cache3, planFor(client, cache3, "tiny/plain", rule), small()).run();
        QVERIFY(!refused.ok());
        QCOMPARE(refused.error().kind, HubErrorKind::Unsafe);
        QVERIFY2(refused.error().message.find("is a symbolic link") != std::string::npos, refused.error().message.c_str());
        QVERIFY(QDir(target.path()).isEmpty());
    }

    void blobsOtherToolsWroteAreHashedOnce()
    {
        QTemporaryDir cacheDir;
        HubClient client(options());
        HfCache cache(cacheDir.path().toStdString());
        PlanRule rule;
        rule.include = {"large.safetensors"};
        auto plan = planFor(client, cache, "tiny/plain", rule);
        QVERIFY(PlanDownload(client, cache, plan, small()).run().ok());
        const auto& file = plan.files.front().file;
        const QString repoDir = QString::fromStdString(cache.repoDir("tiny/plain")->string());
        const QString blob = QString::fromStdString(cache.blobPath("tiny/plain", file.etag())->string());
        const QString record = repoDir + QStringLiteral("/.vireo-verified/") + QString::fromStdString(file.etag());
        QVERIFY2(QFileInfo::exists(record), "a verified download leaves no record");

        // Another tool overwrote the blob in place with bytes of the same size.
        {
            QFile f(blob);
            QVERIFY(f.open(QIODevice::ReadWrite));
            f.seek(1000);
            f.write("damage");
        }
        QVERIFY2(!cache.hasFile("tiny/plain", plan.commit, file), "a blob changed since its check counts as present");
        // Without the record it looks like another tool's file: present by size until hashed.
        QVERIFY(QFile::remove(record));
        QVERIFY(cache.hasFile("tiny/plain", plan.commit, file));
        QVERIFY(!cache.hasFile("tiny/plain", plan.commit, file, HfCache::Verify::Hash));
        QVERIFY2(!QFileInfo::exists(blob), "a blob that failed its hash stays in blobs/");
        QVERIFY(QFileInfo::exists(
            QString::fromStdString(cache.partialPath("tiny/plain", file.etag())->string()) + QStringLiteral(".rejected")));
        auto again = planFor(client, cache, "tiny/plain", rule);
        QCOMPARE(again.presentBytes(), std::uint64_t{0});
        control("DELETE", QStringLiteral("/_control/log"));
        QVERIFY(PlanDownload(client, cache, again, small()).run().ok());
        QCOMPARE(cdnBytesFor(file.sha256), static_cast<qint64>(file.size));

        // A good blob without a record is hashed once, then remembered.
        QVERIFY(QFile::remove(record));
        QVERIFY(cache.hasFile("tiny/plain", plan.commit, file, HfCache::Verify::Hash));
        QVERIFY(QFileInfo::exists(record));
        QVERIFY(cache.hasFile("tiny/plain", plan.commit, file, HfCache::Verify::Cheap));
    }

    void offlineModeFetchesNothing()
    {
        QTemporaryDir cacheDir;
        auto o = options();
        o.offline = true;
        HfCache cache(cacheDir.path().toStdString());
        control("DELETE", QStringLiteral("/_control/log"));
        auto plan = makePlan(HubClient(o), cache, "tiny/plain", "main", {});
        QVERIFY(!plan.ok());
        QCOMPARE(plan.error().kind, HubErrorKind::Offline);
        QCOMPARE(requestLog().size(), 0);
    }
};

QTEST_GUILESS_MAIN(TestHub)
#include "test_hub.moc"
