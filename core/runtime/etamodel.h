#pragma once

// Remembered run times, per model, size, device and settings, so the studio can say how long
// a generation will take before it has measured anything in this run, and an ETA that does
// not jump back up: the shown remaining time never grows by more than the step times'
// measured spread allows.

#include "inference/facade/generator.h"

#include <QString>

#include <map>
#include <mutex>
#include <vector>

namespace vireo::runtime {

class EtaModel {
public:
    explicit EtaModel(QString file = {});  // empty: in memory only

    // Seconds a phase took last time under this key (a moving average), -1 when never seen.
    double expectedSeconds(const QString& key, const QString& phase) const;
    // Mean and spread of one denoise step under this key, from earlier runs; mean -1 when unknown.
    std::pair<double, double> stepSeconds(const QString& key) const;
    void record(const QString& key, const QString& phase, double seconds);
    void recordSteps(const QString& key, const std::vector<double>& seconds);
    bool save() const;

private:
    struct Entry {
        std::map<QString, double> phases;
        double stepMean = -1, stepSpread = 0;
    };
    QString m_file;
    mutable std::mutex m_mutex;
    std::map<QString, Entry> m_entries;
};

// One run's remaining time, from the phases still ahead (remembered durations) and the
// current phase's measured rate. Monotonic within the noise: see remaining().
class EtaTracker {
public:
    // phases: the run's phases in order with the units each has (steps, tiles, ...).
    EtaTracker(const EtaModel* model, QString key, std::vector<std::pair<QString, qint64>> phases);

    // Call on every progress report; returns the seconds left (-1 while unknown).
    double update(const QString& phase, qint64 done, qint64 total, double nowSeconds);
    // Per-phase durations and denoise step times measured in this run, for the model.
    void commit(EtaModel& model, double nowSeconds) const;

private:
    const EtaModel* m_model;
    QString m_key;
    std::vector<std::pair<QString, qint64>> m_phases;
    QString m_phase;
    double m_phaseStart = 0, m_lastUnitAt = 0, m_shown = -1, m_shownAt = 0;
    qint64 m_lastDone = 0;
    std::map<QString, double> m_measured;
    std::vector<double> m_steps;
};

}  // namespace vireo::runtime
