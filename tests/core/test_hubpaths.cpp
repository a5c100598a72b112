#include "core/hub/hubpaths.h"

#include <QDir>
#include <QTest>

using vireo::core::HubPaths;

class TestHubPaths : public QObject {
    Q_OBJECT
private slots:
    void init()
    {
        for (const char* name : {"HF_ENDPOINT", "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN_PATH", "HF_HUB_OFFLINE",
                 "TRANSFORMERS_OFFLINE", "XDG_CACHE_HOME"})
            qunsetenv(name);
    }

    void defaultsFollowHuggingfaceHub()
    {
        const auto p = HubPaths::fromEnvironment();
        QCOMPARE(p.endpoint, QStringLiteral("https://huggingface.co"));
        QCOMPARE(p.cacheDir, QDir::homePath() + QStringLiteral("/.cache/huggingface/hub"));
        QCOMPARE(p.tokenPath, QDir::homePath() + QStringLiteral("/.cache/huggingface/token"));
        QCOMPARE(p.cacheDirSource, QStringLiteral("default"));
        QVERIFY(!p.offline);
    }

    void precedence()
    {
        qputenv("XDG_CACHE_HOME", "/x/cache");
        QCOMPARE(HubPaths::fromEnvironment().cacheDir, QStringLiteral("/x/cache/huggingface/hub"));
        qputenv("HF_HOME", "~/hfhome");
        auto p = HubPaths::fromEnvironment();
        QCOMPARE(p.cacheDir, QDir::homePath() + QStringLiteral("/hfhome/hub"));
        QCOMPARE(p.tokenPath, QDir::homePath() + QStringLiteral("/hfhome/token"));
        QCOMPARE(p.cacheDirSource, QStringLiteral("HF_HOME"));
        qputenv("HUGGINGFACE_HUB_CACHE", "/legacy");
        QCOMPARE(HubPaths::fromEnvironment().cacheDir, QStringLiteral("/legacy"));
        qputenv("HF_HUB_CACHE", "/new/");
        p = HubPaths::fromEnvironment();
        QCOMPARE(p.cacheDir, QStringLiteral("/new"));
        QCOMPARE(p.cacheDirSource, QStringLiteral("HF_HUB_CACHE"));
        qputenv("HF_TOKEN_PATH", "/secret/token");
        QCOMPARE(HubPaths::fromEnvironment().tokenPath, QStringLiteral("/secret/token"));
    }

    void endpointAndOffline()
    {
        qputenv("HF_ENDPOINT", "http://127.0.0.1:8080//");
        QCOMPARE(HubPaths::fromEnvironment().endpoint, QStringLiteral("http://127.0.0.1:8080"));
        for (const char* truthy : {"1", "on", "YES", "True"}) {
            qputenv("HF_HUB_OFFLINE", truthy);
            QVERIFY2(HubPaths::fromEnvironment().offline, truthy);
        }
        for (const char* falsy : {"0", "off", "no", ""}) {
            qputenv("HF_HUB_OFFLINE", falsy);
            QVERIFY2(!HubPaths::fromEnvironment().offline, falsy);
        }
        qputenv("TRANSFORMERS_OFFLINE", "1");
        QVERIFY(HubPaths::fromEnvironment().offline);
    }
};

QTEST_GUILESS_MAIN(TestHubPaths)
#include "test_hubpaths.moc"
