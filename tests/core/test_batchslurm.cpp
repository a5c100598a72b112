// What Slurm answers, read by vireo-cli batch (core/batch): sbatch's job id and squeue's task
// states, including the answers a broken or odd Slurm gives: nothing is guessed, nothing throws.
#include "core/batch/batch.h"

#include <QTest>

using vireo::batch::parseSbatchJobId;
using vireo::batch::parseSqueue;

class TestBatchSlurm : public QObject {
    Q_OBJECT
private slots:
    void sbatchJobIds()
    {
        QCOMPARE(parseSbatchJobId("1234\n").value(), std::int64_t{1234});
        QCOMPARE(parseSbatchJobId("  77;cluster-a \n").value(), std::int64_t{77});  // --parsable on a federation
        for (const char* bad : {"", "\n", "Submitted batch job 12", "12 13", "-4", "abc", "99999999999999999999", "12;a b", "1e3"})
            QVERIFY2(!parseSbatchJobId(bad), bad);
    }

    void squeueTaskStates()
    {
        const auto states = parseSqueue("12_3 RUNNING None\n12_[4-6%2] PENDING JobArrayTaskLimit\n12_0 COMPLETING None\n", 12);
        QCOMPARE(states.size(), std::size_t{5});
        QCOMPARE(states.at(3), std::string("RUNNING"));
        QCOMPARE(states.at(4), std::string("PENDING"));
        QCOMPARE(states.at(6), std::string("PENDING"));
        QCOMPARE(states.at(0), std::string("COMPLETING"));
        // Other jobs, other formats and garbage are skipped, not guessed at.
        const auto none = parseSqueue("13_1 RUNNING None\n12 RUNNING None\n12_x RUNNING\n12_1\n\n12_[9-] PENDING\n"
                                      "12_[99999999999999999999-1] PENDING\n12_99999999999 RUNNING\n",
            12);
        QVERIFY2(none.empty(), std::to_string(none.size()).c_str());
        // A huge but well-formed range stops at 100,000 tasks.
        QCOMPARE(parseSqueue("12_[0-999999999] PENDING\n", 12).size(), std::size_t{100000});
        QVERIFY(parseSqueue("12_[5-3] PENDING\n", 12).empty());
    }
};

QTEST_GUILESS_MAIN(TestBatchSlurm)
#include "test_batchslurm.moc"
