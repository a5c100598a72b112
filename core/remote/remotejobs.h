#pragma once

// The window's jobs on other machines: each runs runRemoteJob (remotejob.h) on a thread of its
// own and reports as an engine does (the same signals, runtime::JobStatus, ids from the same
// counter), so the Generate page and its queue follow a host's job as they follow a GPU's. It
// also keeps what each configured host said of itself at the last look (Settings → Hosts, the
// "Run on" box).

#include "core/remote/remotejob.h"
#include "core/runtime/engine.h"

#include <QImage>
#include <QObject>

#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace vireo::remote {

class RemoteJobs : public QObject {
    Q_OBJECT
public:
    // `hosts` gives the configured hosts (read when a job starts and at each look).
    explicit RemoteJobs(std::function<std::vector<Host>()> hosts, QObject* parent = nullptr);
    ~RemoteJobs() override;  // cancels every job and waits for their threads

    // Queues nothing: the job starts at once (its host has the queue). The request's target is a
    // host's name or "any".
    quint64 submit(RemoteRequest request, const QString& title, RemoteOptions options = {});
    bool cancel(quint64 id);
    QList<runtime::JobStatus> jobs() const;
    std::optional<runtime::JobStatus> job(quint64 id) const;
    int pending() const;
    // The host a job runs on now ("" before it is placed).
    QString hostOf(quint64 id) const;

    // Asks every host for its state on a helper thread; hostsChanged follows.
    void refreshHosts();
    const std::vector<HostState>& hostStates() const { return m_states; }

signals:
    void jobAdded(quint64 id);
    void jobChanged(quint64 id);
    void jobProgress(quint64 id, const QString& phase, qint64 done, qint64 total, double etaSeconds);
    void jobFinished(quint64 id);
    void previewReady(quint64 id, const QImage& strip, int step);
    void hostsChanged();

private:
    struct Job;
    std::function<std::vector<Host>()> m_hosts;
    std::map<quint64, std::shared_ptr<Job>> m_jobs;
    std::vector<HostState> m_states;
    struct Prober;
    std::unique_ptr<Prober> m_prober;
};

}  // namespace vireo::remote
