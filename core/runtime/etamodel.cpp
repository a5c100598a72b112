#include "core/runtime/etamodel.h"

#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

#include <cmath>
#include <numeric>

namespace vireo::runtime {

EtaModel::EtaModel(QString file) : m_file(std::move(file))
{
    if (m_file.isEmpty())
        return;
    QFile f(m_file);
    // A damaged or oversized file is ignored: run times are a convenience, never a failure.
    if (!f.open(QIODevice::ReadOnly) || f.size() > (4 << 20))
        return;
    const auto doc = QJsonDocument::fromJson(f.readAll());
    const auto root = doc.object();
    for (auto it = root.begin(); it != root.end() && m_entries.size() < 2000; ++it) {
        const auto o = it.value().toObject();
        Entry e;
        const auto phases = o.value(QStringLiteral("phases")).toObject();
        for (auto p = phases.begin(); p != phases.end(); ++p)
            if (p.value().isDouble() && std::isfinite(p.value().toDouble()) && p.value().toDouble() >= 0)
                e.phases[p.key()] = p.value().toDouble();
        e.stepMean = o.value(QStringLiteral("step_mean")).toDouble(-1);
        e.stepSpread = o.value(QStringLiteral("step_spread")).toDouble(0);
        if (!std::isfinite(e.stepMean) || !std::isfinite(e.stepSpread))
            e.stepMean = -1, e.stepSpread = 0;
        m_entries[it.key()] = std::move(e);
    }
}

double EtaModel::expectedSeconds(const QString& key, const QString& phase) const
{
    std::lock_guard lock(m_mutex);
    const auto it = m_entries.find(key);
    if (it == m_entries.end())
        return -1;
    const auto p = it->second.phases.find(phase);
    return p == it->second.phases.end() ? -1 : p->second;
}

std::pair<double, double> EtaModel::stepSeconds(const QString& key) const
{
    std::lock_guard lock(m_mutex);
    const auto it = m_entries.find(key);
    if (it == m_entries.end())
        return {-1, 0};
    return {it->second.stepMean, it->second.stepSpread};
}

void EtaModel::record(const QString& key, const QString& phase, double seconds)
{
    if (!std::isfinite(seconds) || seconds < 0)
        return;
    std::lock_guard lock(m_mutex);
    auto& e = m_entries[key];
    const auto it = e.phases.find(phase);
    // Recent runs weigh most: the machine and its load change.
    e.phases[phase] = it == e.phases.end() ? seconds : 0.5 * it->second + 0.5 * seconds;
}

void EtaModel::recordSteps(const QString& key, const std::vector<double>& seconds)
{
    if (seconds.empty())
        return;
    const double mean = std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(seconds.size());
    double var = 0;
    for (double s : seconds)
        var += (s - mean) * (s - mean);
    const double spread = std::sqrt(var / static_cast<double>(seconds.size()));
    std::lock_guard lock(m_mutex);
    auto& e = m_entries[key];
    e.stepMean = e.stepMean < 0 ? mean : 0.5 * e.stepMean + 0.5 * mean;
    e.stepSpread = std::max(spread, 0.5 * e.stepSpread);
}

bool EtaModel::save() const
{
    if (m_file.isEmpty())
        return true;
    QJsonObject root;
    {
        std::lock_guard lock(m_mutex);
        for (const auto& [key, e] : m_entries) {
            QJsonObject phases;
            for (const auto& [p, s] : e.phases)
                phases[p] = s;
            root[key] = QJsonObject{{QStringLiteral("phases"), phases}, {QStringLiteral("step_mean"), e.stepMean},
                {QStringLiteral("step_spread"), e.stepSpread}};
        }
    }
    QSaveFile f(m_file);
    if (!f.open(QIODevice::WriteOnly))
        return false;
    f.write(QJsonDocument(root).toJson(QJsonDocument::Compact));
    return f.commit();
}

EtaTracker::EtaTracker(const EtaModel* model, QString key, std::vector<std::pair<QString, qint64>> phases)
    : m_model(model), m_key(std::move(key)), m_phases(std::move(phases))
{
}

double EtaTracker::update(const QString& phase, qint64 done, qint64 total, double now)
{
    if (phase != m_phase) {
        if (!m_phase.isEmpty())
            m_measured[m_phase] = now - m_phaseStart;
        m_phase = phase;
        m_phaseStart = now;
        m_lastUnitAt = now;
        m_lastDone = 0;
    }
    if (phase == QStringLiteral("denoise") && done > m_lastDone) {
        // Each new step's duration (several reported at once share the time).
        const double each = (now - m_lastUnitAt) / static_cast<double>(done - m_lastDone);
        for (qint64 i = m_lastDone; i < done; ++i)
            m_steps.push_back(each);
    }
    if (done > m_lastDone) {
        m_lastDone = done;
        m_lastUnitAt = now;
    }

    // The current phase: this run's rate once a unit is done, else what it took last time.
    double left = 0;
    bool known = true;
    const double inPhase = now - m_phaseStart;
    const auto [stepMean, stepSpread] = m_model ? m_model->stepSeconds(m_key) : std::pair<double, double>{-1, 0};
    if (done > 0 && total > 0) {
        left += inPhase / static_cast<double>(done) * static_cast<double>(total - done);
    } else if (phase == QStringLiteral("denoise") && stepMean > 0) {
        left += std::max(0.0, stepMean * static_cast<double>(total) - inPhase);
    } else {
        const double expected = m_model ? m_model->expectedSeconds(m_key, phase) : -1;
        if (expected >= 0)
            left += std::max(0.0, expected - inPhase);
        else
            known = false;
    }
    bool after = false;
    for (const auto& [name, units] : m_phases) {
        if (after) {
            double expected = m_model ? m_model->expectedSeconds(m_key, name) : -1;
            if (name == QStringLiteral("denoise") && stepMean > 0)
                expected = stepMean * static_cast<double>(units);
            if (expected >= 0)
                left += expected;
            else
                known = false;
        }
        if (name == phase)
            after = true;
    }
    if (!known && m_shown < 0)
        return -1;
    // Counting down: the shown time may only grow by the measured spread of the steps left.
    const double stepsLeft = phase == QStringLiteral("denoise") ? static_cast<double>(std::max<qint64>(0, total - done)) : 0.0;
    const double noise = std::max(0.5, 2.0 * stepSpread * std::sqrt(std::max(1.0, stepsLeft)));
    if (m_shown >= 0) {
        const double counted = m_shown - (now - m_shownAt);
        left = std::min(left, counted + noise);
    }
    m_shown = std::max(0.0, left);
    m_shownAt = now;
    return m_shown;
}

void EtaTracker::commit(EtaModel& model, double now) const
{
    auto measured = m_measured;
    if (!m_phase.isEmpty())
        measured[m_phase] = now - m_phaseStart;
    for (const auto& [phase, seconds] : measured)
        model.record(m_key, phase, seconds);
    model.recordSteps(m_key, m_steps);
}

}  // namespace vireo::runtime
