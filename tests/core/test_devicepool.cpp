// The device pool with real engines and the tiny LTX-2 model, no mock: a table names two GPUs
// (RTX 4090s, planned as such from the model's headers) and the CPU engines that stand in for
// them run the jobs. Two jobs run at once on the two cards, the shorter queue and the card
// holding the model win, a pin is honoured, a job no card holds is refused naming each card with
// nothing enqueued, and ids never collide across engines.
#include "core/runtime/devicepool.h"

#include "core/runtime/engine.h"
#include "tests/core/tinyjobs.h"

#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <memory>
#include <set>

using namespace vireo;
using runtime::DevicePool;
using runtime::DeviceSlot;
using runtime::Engine;
using runtime::JobState;

namespace {

constexpr std::int64_t GB = 1000ll * 1000 * 1000;

DeviceSlot card(const char* device, std::int64_t freeBytes)
{
    DeviceSlot s;
    s.device = device;
    s.caps = capability::knownDevice("rtx-4090");
    s.name = s.caps->name;
    s.totalBytes = s.caps->totalBytes;
    s.freeBytes = freeBytes;
    return s;
}

// Two cards backed by two CPU engines, and the pool over them.
struct Box {
    std::vector<DeviceSlot> table;
    std::map<QString, std::unique_ptr<Engine>> engines;
    std::unique_ptr<DevicePool> pool;

    explicit Box(std::vector<DeviceSlot> devices) : table(std::move(devices))
    {
        for (const auto& s : table)
            engines[QString::fromStdString(s.device)] = std::make_unique<Engine>(Engine::Options{});
        pool = std::make_unique<DevicePool>(DevicePool::Options{[this] { return table; },
            [this](const QString& device) {
                const auto it = engines.find(device);
                return it == engines.end() ? nullptr : it->second.get();
            }});
    }
};

runtime::GenerateJob smallJob(const QString& folder)
{
    runtime::GenerateJob job;
    job.model = test::tinyModel();
    job.request = test::smallRequest();
    job.outputFolder = folder;
    return job;
}

bool waitPool(DevicePool& pool, quint64 id, int ms = 180000)
{
    auto* e = pool.engineOf(id);
    return e && test::waitFinished(*e, id, ms);
}

}  // namespace

class TestDevicePool : public QObject {
    Q_OBJECT
private slots:
    void idsAreUniqueAcrossEngines()
    {
        Engine a({}), b({});
        std::set<quint64> ids;
        for (int i = 0; i < 3; ++i) {
            ids.insert(a.enqueueUnload());
            ids.insert(b.enqueueUnload());
        }
        QCOMPARE(ids.size(), std::size_t{6});
    }

    void twoJobsRunAtOnceOnTwoCards()
    {
        Box box({card("cuda:0", 20 * GB), card("cuda:1", 20 * GB)});
        QSignalSpy finished(box.pool.get(), &DevicePool::jobFinished);
        const auto first = box.pool->submit(smallJob(m_out.filePath(QStringLiteral("two"))));
        QVERIFY2(first, first ? "" : first.error().message.c_str());
        QCOMPARE(first->device, QStringLiteral("cuda:0"));
        const auto second = box.pool->submit(smallJob(m_out.filePath(QStringLiteral("two"))));
        QVERIFY2(second, second ? "" : second.error().message.c_str());
        // cuda:0 has a job queued now: the second goes to the idle card.
        QCOMPARE(second->device, QStringLiteral("cuda:1"));
        QVERIFY2(second->reason.contains(QStringLiteral("0 jobs queued")), qPrintable(second->reason));
        QVERIFY(first->id != second->id);
        QCOMPARE(box.pool->engineOf(first->id), box.engines.at(QStringLiteral("cuda:0")).get());
        QCOMPARE(box.pool->engineOf(second->id), box.engines.at(QStringLiteral("cuda:1")).get());

        bool together = false;
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < 180000) {
            const auto a = box.pool->job(first->id), b = box.pool->job(second->id);
            QVERIFY(a && b);
            together = together || (a->state == JobState::Running && b->state == JobState::Running);
            if (test::finished(a->state) && test::finished(b->state))
                break;
            QTest::qWait(2);
        }
        for (const auto id : {first->id, second->id}) {
            const auto s = box.pool->job(id);
            QVERIFY2(s->state == JobState::Done, qPrintable(s->error));
            QVERIFY(QFile::exists(s->outputPath));
        }
        QVERIFY2(together, "the two jobs never ran at the same time");
        QTRY_COMPARE(finished.count(), 2);
    }

    void theCardHoldingTheModelWinsAndAPinIsHonoured()
    {
        Box box({card("cuda:0", 20 * GB), card("cuda:1", 20 * GB)});
        // Pinned to cuda:1 although cuda:0 is as good: it runs there, and then holds the model.
        const auto pinned = box.pool->submit(smallJob(m_out.filePath(QStringLiteral("pin"))), QStringLiteral("cuda:1"));
        QVERIFY2(pinned, pinned ? "" : pinned.error().message.c_str());
        QCOMPARE(pinned->device, QStringLiteral("cuda:1"));
        QVERIFY(pinned->reason.contains(QStringLiteral("pinned")));
        QVERIFY(waitPool(*box.pool, pinned->id));
        const auto devs = box.pool->devices();
        QCOMPARE(QString::fromStdString(devs[1].residentModel), test::tinyModel().key);
        QCOMPARE(devs[1].queued, 0);
        // The next job of that model goes where the model is, not to the lower index.
        const auto next = box.pool->submit(smallJob(m_out.filePath(QStringLiteral("pin"))));
        QVERIFY2(next, next ? "" : next.error().message.c_str());
        QCOMPARE(next->device, QStringLiteral("cuda:1"));
        QVERIFY2(next->reason.contains(QStringLiteral("holds the model already")), qPrintable(next->reason));
        QVERIFY(waitPool(*box.pool, next->id));
        // A pin to a device the box does not have is refused by name.
        const auto unknown = box.pool->submit(smallJob(m_out.filePath(QStringLiteral("pin"))), QStringLiteral("cuda:7"));
        QVERIFY(!unknown);
        QVERIFY2(unknown.error().message.find("cuda:7, which this box does not have (cuda:0, cuda:1)") != std::string::npos,
            unknown.error().message.c_str());
    }

    void aJobNoCardHoldsIsRefusedNamingEachCard()
    {
        // 1 MB free on each card: not even the tiny model with its encoder fits, resident or not.
        Box box({card("cuda:0", 1000 * 1000), card("cuda:1", 1000 * 1000)});
        auto job = smallJob(m_out.filePath(QStringLiteral("refused")));
        job.request.width = job.request.height = 1024;
        job.request.frames = 121;
        const auto r = box.pool->submit(job);
        QVERIFY(!r);
        QCOMPARE(r.error().code, ErrorCode::OutOfMemory);
        const auto& m = r.error().message;
        QVERIFY2(m.find("no GPU can hold this job") != std::string::npos
                && m.find("cuda:0 (NVIDIA GeForce RTX 4090): needs") != std::string::npos
                && m.find("cuda:1 (NVIDIA GeForce RTX 4090): needs") != std::string::npos,
            m.c_str());
        for (const auto& [_, e] : box.engines)
            QVERIFY(e->jobs().isEmpty());
    }

private:
    QTemporaryDir m_out;
};

QTEST_GUILESS_MAIN(TestDevicePool)
#include "test_devicepool.moc"
