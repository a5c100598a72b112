// Choosing a host for a job and reading a host's address (core/remote): tables, no network.
// The rules: a host must answer, hold the model ready and have room in its queue; then the
// fewest jobs active, the most free device memory, the order of the list. Hosts already tried
// are passed over, and when none can take the job each host's reason is given.
#include "core/remote/remotejob.h"

#include <QTest>

using vireo::remote::HostState;
using vireo::remote::normalizeBaseUrl;
using vireo::remote::pickHost;

namespace {

HostState host(const char* name, int active = 0, std::int64_t freeGb = 24, std::vector<std::string> models = {"ltx-2.3/distilled-fp8"},
    bool reachable = true)
{
    HostState h;
    h.host.name = name;
    h.host.baseUrl = std::string("http://") + name + ":8188";
    h.reachable = reachable;
    h.error = reachable ? "" : "Connection refused";
    h.jobsActive = active;
    h.maxQueued = 16;
    h.freeBytes = freeGb * 1000 * 1000 * 1000;
    h.modelsReady = std::move(models);
    return h;
}

}  // namespace

class TestRemoteHost : public QObject {
    Q_OBJECT
private slots:
    void fewestJobsThenMostRoomThenOrder()
    {
        const std::string m = "ltx-2.3/distilled-fp8";
        QCOMPARE(pickHost({host("a", 2), host("b", 1), host("c", 3)}, m).value(), 1u);
        QCOMPARE(pickHost({host("a", 1, 24), host("b", 1, 80)}, m).value(), 1u);
        QCOMPARE(pickHost({host("a", 1, 24), host("b", 1, 24)}, m).value(), 0u);
    }

    void unreachableFullOrWithoutTheModelArePassedOver()
    {
        const std::string m = "ltx-2.3/distilled-fp8";
        auto full = host("full", 0);
        full.jobsActive = full.maxQueued = 4;
        std::string why;
        const auto pick =
            pickHost({host("down", 0, 80, {m}, false), full, host("other", 0, 80, {"ideogram-4/bf16"}), host("ok", 5)}, m, {}, &why);
        QCOMPARE(pick.value(), 3u);
        QVERIFY(!pickHost({host("down", 0, 80, {m}, false), full, host("other", 0, 80, {"ideogram-4/bf16"})}, m, {}, &why));
        QVERIFY2(why.find("down: Connection refused") != std::string::npos, why.c_str());
        QVERIFY2(why.find("full: its queue is full (4 jobs)") != std::string::npos, why.c_str());
        QVERIFY2(why.find("other: the model 'ltx-2.3/distilled-fp8' is not ready there") != std::string::npos, why.c_str());
    }

    void hostsTriedAreSkipped()
    {
        const std::string m = "ltx-2.3/distilled-fp8";
        QCOMPARE(pickHost({host("a", 0), host("b", 3)}, m, {"a"}).value(), 1u);
        std::string why;
        QVERIFY(!pickHost({host("a", 0)}, m, {"a"}, &why));
        QVERIFY2(why.find("a: already tried") != std::string::npos, why.c_str());
        QVERIFY(!pickHost({}, m, {}, &why));
        QVERIFY2(why.find("no host is set up") != std::string::npos, why.c_str());
    }

    void addressesAreNormalizedOrRefused()
    {
        QCOMPARE(normalizeBaseUrl("192.168.1.20:8188").value(), std::string("http://192.168.1.20:8188"));
        QCOMPARE(normalizeBaseUrl(" HTTPS://GPU.Example.org/ ").value(), std::string("https://gpu.example.org"));
        QCOMPARE(normalizeBaseUrl("http://[::1]:9000").value(), std::string("http://[::1]:9000"));
        for (const char* bad :
            {"", "ftp://a:1", "file:///etc/passwd", "http://u:p@a:1", "http://a:1/v1", "http://a:1/?x=1", "http://:80", "gopher://a"})
            QVERIFY2(!normalizeBaseUrl(bad), bad);
    }
};

QTEST_GUILESS_MAIN(TestRemoteHost)
#include "test_remotehost.moc"
