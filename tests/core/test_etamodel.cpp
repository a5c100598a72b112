// The ETA model (core/runtime/etamodel): what a run remembers of the last, what the next one
// predicts before it has measured anything, a countdown that does not jump back up when one
// step is slow, and a run-times file that survives a restart and never fails a run when it
// is damaged. Simulated clocks: no test here waits.
#include "core/runtime/etamodel.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

using vireo::runtime::EtaModel;
using vireo::runtime::EtaTracker;

namespace {

const std::vector<std::pair<QString, qint64>> kPhases{
    {QStringLiteral("encode prompt"), 1}, {QStringLiteral("denoise"), 8}, {QStringLiteral("decode video"), 1}};

// One run: 2 s encoding, 8 denoise steps of `step` seconds, 3 s decoding; returns the
// remaining times shown at each report.
std::vector<double> run(EtaTracker& t, double step, double spikeAt = -1, double spike = 0, double* end = nullptr)
{
    std::vector<double> shown;
    double now = 0;
    shown.push_back(t.update(QStringLiteral("encode prompt"), 0, 1, now));
    now += 2;
    shown.push_back(t.update(QStringLiteral("encode prompt"), 1, 1, now));
    shown.push_back(t.update(QStringLiteral("denoise"), 0, 8, now));
    for (int i = 1; i <= 8; ++i) {
        now += step + (i == spikeAt ? spike : 0);
        shown.push_back(t.update(QStringLiteral("denoise"), i, 8, now));
    }
    shown.push_back(t.update(QStringLiteral("decode video"), 0, 1, now));
    now += 3;
    shown.push_back(t.update(QStringLiteral("decode video"), 1, 1, now));
    if (end)
        *end = now;
    return shown;
}

}  // namespace

class TestEtaModel : public QObject {
    Q_OBJECT

private slots:
    // A first run has nothing to go on for the phases ahead: unknown, never a made-up number.
    void aFirstRunSaysItDoesNotKnow()
    {
        EtaModel model;
        EtaTracker t(&model, QStringLiteral("k"), kPhases);
        QCOMPARE(t.update(QStringLiteral("encode prompt"), 0, 1, 0), -1.0);
    }

    // After one run, the next predicts its whole length from the start (2 + 8 x 1.5 + 3 = 17 s)
    // and counts down to zero.
    void theNextRunPredictsFromTheLast()
    {
        EtaModel model;
        {
            EtaTracker first(&model, QStringLiteral("k"), kPhases);
            double end = 0;
            run(first, 1.5, -1, 0, &end);
            first.commit(model, end);
        }
        QCOMPARE(model.expectedSeconds(QStringLiteral("k"), QStringLiteral("encode prompt")), 2.0);
        QCOMPARE(model.stepSeconds(QStringLiteral("k")).first, 1.5);
        QCOMPARE(model.expectedSeconds(QStringLiteral("other"), QStringLiteral("encode prompt")), -1.0);
        EtaTracker second(&model, QStringLiteral("k"), kPhases);
        const auto shown = run(second, 1.5);
        QVERIFY2(std::abs(shown.front() - 17.0) < 1e-9, qPrintable(QString::number(shown.front())));
        QCOMPARE(shown.back(), 0.0);
        for (std::size_t i = 1; i < shown.size(); ++i)
            QVERIFY2(shown[i] <= shown[i - 1] + 1e-9,
                qPrintable(QStringLiteral("report %1: %2 after %3").arg(i).arg(shown[i]).arg(shown[i - 1])));
    }

    // One step four seconds slower than the rest raises the shown time by no more than the
    // allowance (0.5 s when the steps were steady), however the rate extrapolates.
    void aSlowStepDoesNotMakeTheCountdownJump()
    {
        EtaModel model;
        {
            EtaTracker first(&model, QStringLiteral("k"), kPhases);
            double end = 0;
            run(first, 1.0, -1, 0, &end);
            first.commit(model, end);
        }
        EtaTracker t(&model, QStringLiteral("k"), kPhases);
        const auto shown = run(t, 1.0, 2, 4.0);
        // Report 4 is the slow step's (encode 0, encode 1, denoise 0, step 1, step 2).
        const double before = shown[3], after = shown[4];
        QVERIFY2(after <= before - 5.0 + 0.5 + 1e-9, qPrintable(QStringLiteral("%1 -> %2").arg(before).arg(after)));
    }

    // Recent runs weigh most: a phase that took 10 s and then 20 s is expected to take 15 s.
    void recentRunsWeighMost()
    {
        EtaModel model;
        model.record(QStringLiteral("k"), QStringLiteral("decode video"), 10);
        model.record(QStringLiteral("k"), QStringLiteral("decode video"), 20);
        QCOMPARE(model.expectedSeconds(QStringLiteral("k"), QStringLiteral("decode video")), 15.0);
        // Nonsense is not remembered.
        model.record(QStringLiteral("k"), QStringLiteral("decode video"), std::nan(""));
        model.record(QStringLiteral("k"), QStringLiteral("decode video"), -3);
        QCOMPARE(model.expectedSeconds(QStringLiteral("k"), QStringLiteral("decode video")), 15.0);
    }

    // The run-times file comes back after a restart; a damaged, hostile or oversized one is
    // ignored (the studio then just does not know yet).
    void theFileSurvivesARestartAndDamageIsIgnored()
    {
        QTemporaryDir dir;
        const QString file = dir.filePath(QStringLiteral("run-times.json"));
        {
            EtaModel model(file);
            model.record(QStringLiteral("k"), QStringLiteral("mux"), 0.75);
            model.recordSteps(QStringLiteral("k"), {1.0, 3.0});
            QVERIFY(model.save());
        }
        EtaModel again(file);
        QCOMPARE(again.expectedSeconds(QStringLiteral("k"), QStringLiteral("mux")), 0.75);
        QCOMPARE(again.stepSeconds(QStringLiteral("k")).first, 2.0);
        QCOMPARE(again.stepSeconds(QStringLiteral("k")).second, 1.0);
        const QByteArray damaged[] = {
            "{\"k\": {\"phases\": {\"mux\": -1, \"vocoder\": \"x\"}, \"step_mean\": \"nan\"}}",
            "not json at all",
            "[1, 2, 3]",
            QByteArray(5 << 20, ' '),
        };
        for (const auto& bytes : damaged) {
            QFile f(file);
            QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
            f.write(bytes);
            f.close();
            EtaModel model(file);
            QCOMPARE(model.expectedSeconds(QStringLiteral("k"), QStringLiteral("mux")), -1.0);
            QCOMPARE(model.expectedSeconds(QStringLiteral("k"), QStringLiteral("vocoder")), -1.0);
            QVERIFY(model.stepSeconds(QStringLiteral("k")).first < 0 || std::isfinite(model.stepSeconds(QStringLiteral("k")).first));
        }
    }
};

QTEST_GUILESS_MAIN(TestEtaModel)
#include "test_etamodel.moc"
