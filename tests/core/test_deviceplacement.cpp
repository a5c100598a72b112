// Where a job runs in a box of several GPUs (core/runtime/deviceplacement): tables of devices,
// no GPU needed. The rules: a pin is honoured or refused with the shortfall; otherwise the GPU
// holding the model, then the shortest queue, then the most room; two small cards split the
// text encoder off; the CPU only when pinned or alone.
#include "core/runtime/deviceplacement.h"

#include <QTest>

using vireo::runtime::DeviceSlot;
using vireo::runtime::placeJob;
using vireo::runtime::PlacementNeed;

namespace {

constexpr std::int64_t GB = 1000ll * 1000 * 1000;

DeviceSlot gpu(const char* device, std::int64_t freeGb, int queued = 0, const char* model = "", std::int64_t residentGb = 0)
{
    DeviceSlot d;
    d.device = device;
    d.name = "NVIDIA GeForce RTX 4090";
    d.totalBytes = 24 * GB;
    d.freeBytes = freeGb * GB;
    d.queued = queued;
    d.residentModel = model;
    d.residentBytes = residentGb * GB;
    return d;
}

PlacementNeed need(std::int64_t peakGb, std::vector<const char*> devices = {"cuda:0", "cuda:1", "cpu"}, std::int64_t textGb = 0)
{
    PlacementNeed n;
    n.modelKey = "catalog:ltx-2.3/distilled-fp8";
    for (const auto* d : devices) {
        n.peakBytes[d] = peakGb * GB;
        if (textGb)
            n.textEncoderBytes[d] = textGb * GB;
    }
    return n;
}

}  // namespace

class TestDevicePlacement : public QObject {
    Q_OBJECT
private slots:
    void theShortestQueueWinsAmongCardsThatFit()
    {
        const auto c = placeJob({gpu("cuda:0", 20, 2), gpu("cuda:1", 20, 0), gpu("cpu", 100)}, need(18));
        QVERIFY2(c, c ? "" : c.error().message.c_str());
        QCOMPARE(QString::fromStdString(c->device), QStringLiteral("cuda:1"));
        QVERIFY2(c->reason.find("0 jobs queued") != std::string::npos, c->reason.c_str());
        QVERIFY(c->textEncoderDevice.empty());
    }

    void theCardHoldingTheModelWinsOverAShorterQueue()
    {
        // cuda:0 holds the model (its 16 GB count as available again) though one job waits there.
        const auto c = placeJob({gpu("cuda:0", 6, 1, "catalog:ltx-2.3/distilled-fp8", 16), gpu("cuda:1", 22, 0)}, need(18));
        QVERIFY(c);
        QCOMPARE(QString::fromStdString(c->device), QStringLiteral("cuda:0"));
        QVERIFY2(c->reason.find("holds the model already") != std::string::npos, c->reason.c_str());
    }

    void aCardWithoutRoomIsPassedOver()
    {
        // The shorter queue cannot hold it; another model's weights count as room (unloaded first).
        const auto c = placeJob({gpu("cuda:0", 8, 0), gpu("cuda:1", 4, 3, "catalog:other", 16)}, need(18));
        QVERIFY(c);
        QCOMPARE(QString::fromStdString(c->device), QStringLiteral("cuda:1"));
        // A tie on queue and model: the most room, then the lowest index.
        const auto tie = placeJob({gpu("cuda:0", 20), gpu("cuda:1", 22)}, need(18));
        QVERIFY(tie && tie->device == "cuda:1");
        const auto same = placeJob({gpu("cuda:0", 20), gpu("cuda:1", 20)}, need(18));
        QVERIFY(same && same->device == "cuda:0");
        // A device the plan did not cover is not chosen.
        const auto unplanned = placeJob({gpu("cuda:0", 20), gpu("cuda:1", 22)}, need(18, {"cuda:0"}));
        QVERIFY(unplanned && unplanned->device == "cuda:0");
    }

    void aPinIsHonouredOrRefusedWithTheShortfall()
    {
        auto n = need(18);
        n.pinned = "cuda:0";
        const auto pinned = placeJob({gpu("cuda:0", 20, 5), gpu("cuda:1", 22)}, n);
        QVERIFY(pinned && pinned->device == "cuda:0" && pinned->reason == "cuda:0: pinned");
        const auto tooSmall = placeJob({gpu("cuda:0", 10, 0), gpu("cuda:1", 22)}, n);
        QVERIFY(!tooSmall);
        QVERIFY2(tooSmall.error().message.find("needs 18.0 GB, 10.0 GB available") != std::string::npos, tooSmall.error().message.c_str());
        n.pinned = "cuda:7";
        const auto missing = placeJob({gpu("cuda:0", 20), gpu("cuda:1", 22)}, n);
        QVERIFY(!missing && missing.error().message.find("does not have (cuda:0, cuda:1)") != std::string::npos);
        n.pinned = "cpu";
        const auto cpu = placeJob({gpu("cuda:0", 20), gpu("cpu", 64)}, n);
        QVERIFY(cpu && cpu->device == "cpu");
    }

    void twoSmallCardsSplitTheTextEncoderOff()
    {
        // 24 GB with a 9 GB text encoder: neither card (16 and 14 GB free) holds it; the other
        // 15 GB on the larger and the encoder on the smaller do.
        const auto c = placeJob({gpu("cuda:0", 16), gpu("cuda:1", 14)}, need(24, {"cuda:0", "cuda:1"}, 9));
        QVERIFY2(c, c ? "" : c.error().message.c_str());
        QCOMPARE(QString::fromStdString(c->device), QStringLiteral("cuda:0"));
        QCOMPARE(QString::fromStdString(c->textEncoderDevice), QStringLiteral("cuda:1"));
        QVERIFY2(c->reason.find("the text encoder on cuda:1") != std::string::npos, c->reason.c_str());
        // Without an encoder share to move, refused with each card's shortfall.
        const auto no = placeJob({gpu("cuda:0", 16), gpu("cuda:1", 14)}, need(24, {"cuda:0", "cuda:1"}));
        QVERIFY(!no);
        QVERIFY2(no.error().message.find("cuda:0 (NVIDIA GeForce RTX 4090): needs 24.0 GB, 16.0 GB available; cuda:1") != std::string::npos,
            no.error().message.c_str());
    }

    void theCpuRunsOnlyWhenAloneOrPinned()
    {
        // A GPU that cannot hold the job does not send it to the CPU behind the user's back.
        const auto refused = placeJob({gpu("cuda:0", 8), gpu("cpu", 100)}, need(18));
        QVERIFY(!refused && refused.error().message.find("pin it to the CPU") != std::string::npos);
        const auto alone = placeJob({gpu("cpu", 100)}, need(18));
        QVERIFY(alone && alone->device == "cpu" && alone->reason == "cpu: the box has no GPU");
        const auto none = placeJob({}, need(18));
        QVERIFY(!none);
    }
};

QTEST_GUILESS_MAIN(TestDevicePlacement)
#include "test_deviceplacement.moc"
