#include "core/models/localmodelinspector.h"

#include <QSignalSpy>
#include <QTest>

using vireo::core::LocalModelInspector;
using vireo::core::ModelReport;

class TestLocalModelInspector : public QObject {
    Q_OBJECT
private:
    QString fixture(const char* name) const { return qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QLatin1Char('/') + QLatin1String(name); }

private slots:
    void reportsAModel()
    {
        LocalModelInspector inspector;
        QSignalSpy finished(&inspector, &LocalModelInspector::finished);
        QSignalSpy failed(&inspector, &LocalModelInspector::failed);
        inspector.inspect(fixture("models/ltx23_single.safetensors"));
        QVERIFY(inspector.isBusy());
        QVERIFY(finished.wait(20000));
        QCOMPARE(failed.count(), 0);
        const auto report = finished.at(0).at(1).value<ModelReport>();
        QCOMPARE(QString::fromStdString(report.family), QStringLiteral("ltx-2"));
        QCOMPARE(QString::fromStdString(report.version), QStringLiteral("2.3"));
        QVERIFY(report.tensors > 0);
        QVERIFY(!inspector.isBusy());
    }

    void reportsAnErrorNamingTheFile()
    {
        LocalModelInspector inspector;
        QSignalSpy failed(&inspector, &LocalModelInspector::failed);
        const QString bad = qEnvironmentVariable("VIREO_SOURCE_DIR") + QStringLiteral("/tests/corpus/bad/st_trailing_bytes.safetensors");
        inspector.inspect(bad);
        QVERIFY(failed.wait(20000));
        const QString message = failed.at(0).at(1).toString();
        QVERIFY2(message.startsWith(bad), qPrintable(message));
        QVERIFY2(message.contains(QStringLiteral("trailing bytes")), qPrintable(message));
    }

    void aNewerRequestSupersedesAnOlderOne()
    {
        LocalModelInspector inspector;
        QSignalSpy finished(&inspector, &LocalModelInspector::finished);
        QSignalSpy failed(&inspector, &LocalModelInspector::failed);
        inspector.inspect(fixture("models/ltx20_single.safetensors"));
        inspector.inspect(fixture("tensorfiles/st_all_dtypes.safetensors"));
        QTRY_VERIFY_WITH_TIMEOUT(!inspector.isBusy(), 20000);
        QCOMPARE(failed.count(), 0);
        QCOMPARE(finished.count(), 1);
        QCOMPARE(finished.at(0).at(0).toString(), fixture("tensorfiles/st_all_dtypes.safetensors"));
    }

    void destroyingWhileBusyIsSafe()
    {
        auto* inspector = new LocalModelInspector;
        inspector->inspect(fixture("models/ltx23_diffusers"));
        delete inspector;  // waits for the worker; the queued result is discarded
        QTest::qWait(50);
    }
};

QTEST_GUILESS_MAIN(TestLocalModelInspector)
#include "test_localmodelinspector.moc"
