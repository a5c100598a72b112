#include "core/remote/remotejobs.h"

#include "core/output/recipe.h"

#include <spdlog/spdlog.h>

#include <QMetaObject>

#include <atomic>
#include <chrono>
#include <thread>

namespace vireo::remote {

using Clock = std::chrono::steady_clock;

struct RemoteJobs::Job {
    runtime::JobStatus status;
    QString host;
    Clock::time_point started = Clock::now();
    std::atomic<bool> cancel{false};
    std::thread thread;
};

struct RemoteJobs::Prober {
    std::thread thread;
    bool busy = false;
};

RemoteJobs::RemoteJobs(std::function<std::vector<Host>()> hosts, QObject* parent)
    : QObject(parent), m_hosts(std::move(hosts)), m_prober(std::make_unique<Prober>())
{
}

RemoteJobs::~RemoteJobs()
{
    for (auto& [_, j] : m_jobs)
        j->cancel = true;
    // Their last posts are dropped with this object: Qt removes an object's pending events.
    for (auto& [_, j] : m_jobs)
        if (j->thread.joinable())
            j->thread.join();
    if (m_prober->thread.joinable())
        m_prober->thread.join();
}

quint64 RemoteJobs::submit(RemoteRequest request, const QString& title, RemoteOptions options)
{
    const auto id = runtime::Engine::newJobId();
    auto job = std::make_shared<Job>();
    job->status.id = id;
    job->status.title = title;
    job->status.state = runtime::JobState::Queued;
    job->status.phase = QStringLiteral("submit");
    m_jobs[id] = job;
    const auto hosts = m_hosts();
    // Every report is posted to this object's thread, where the status lives.
    auto post = [this](std::function<void()> f) { QMetaObject::invokeMethod(this, std::move(f), Qt::QueuedConnection); };
    job->thread = std::thread([this, id, job, hosts, request = std::move(request), options, post]() {
        RemoteEvents ev;
        ev.submitted = [&](const std::string& host, const std::string& remoteId, int attempt) {
            spdlog::info("remote: job {} is {} on host {} (attempt {})", id, remoteId, host, attempt);
            post([this, id, host = QString::fromStdString(host)] {
                if (auto it = m_jobs.find(id); it != m_jobs.end()) {
                    it->second->host = host;
                    emit jobChanged(id);
                }
            });
        };
        auto lastReport = Clock::time_point{};
        ev.progress = [&](const std::string& phase, std::int64_t step, std::int64_t steps, double eta, int) {
            post([this, id, phase = QString::fromStdString(phase), step, steps, eta] {
                if (auto it = m_jobs.find(id); it != m_jobs.end()) {
                    auto& s = it->second->status;
                    s.state = runtime::JobState::Running;
                    s.phase = phase;
                    s.done = step;
                    s.total = steps;
                    s.etaSeconds = eta;
                    emit jobProgress(id, phase, step, steps, eta);
                    emit jobChanged(id);
                }
            });
        };
        ev.preview = [&](const QByteArray& jpeg, int step) {
            const auto image = QImage::fromData(jpeg, "JPEG");
            if (image.isNull())
                return;
            post([this, id, image, step] { emit previewReady(id, image, step); });
        };
        ev.downloading = [&](std::int64_t bytes, std::int64_t total) {
            const auto now = Clock::now();
            if (bytes < total && now - lastReport < std::chrono::milliseconds(100))
                return;
            lastReport = now;
            post([this, id, bytes, total] {
                if (auto it = m_jobs.find(id); it != m_jobs.end()) {
                    auto& s = it->second->status;
                    s.phase = QStringLiteral("download");
                    s.done = bytes;
                    s.total = total;
                    emit jobProgress(id, s.phase, bytes, total, -1);
                }
            });
        };
        ev.note = [id](const std::string& line) { spdlog::info("remote: job {}: {}", id, line); };
        std::optional<Result<RemoteOutcome>> result;
        try {
            result = runRemoteJob(hosts, request, ev, job->cancel, options);
        } catch (const std::exception& e) {
            // A thread boundary: nothing escapes it, a failure fails this job only.
            result = Result<RemoteOutcome>(makeError(ErrorCode::Internal, std::string("remote job: ") + e.what()));
        }
        post([this, id, r = std::move(*result)]() mutable {
            auto it = m_jobs.find(id);
            if (it == m_jobs.end())
                return;
            auto& j = *it->second;
            auto& s = j.status;
            s.elapsedSeconds = std::chrono::duration<double>(Clock::now() - j.started).count();
            s.etaSeconds = -1;
            if (r) {
                s.state = runtime::JobState::Done;
                s.outputPath = r->path;
                j.host = QString::fromStdString(r->host);
                if (!r->recipeJson.empty())
                    if (auto recipe = output::Recipe::fromJson(r->recipeJson))
                        s.recipe = std::move(*recipe);
                for (const auto& left : r->leftOnHosts)
                    spdlog::warn("remote: job {}: an earlier attempt is still on host {} (it did not answer its delete)", id, left);
            } else {
                s.state = r.error().code == ErrorCode::Cancelled ? runtime::JobState::Cancelled : runtime::JobState::Failed;
                s.error = QString::fromStdString(r.error().message);
                s.errorCode = r.error().code;
            }
            if (j.thread.joinable())
                j.thread.join();  // its last act was this post
            emit jobChanged(id);
            emit jobFinished(id);
        });
    });
    emit jobAdded(id);
    return id;
}

bool RemoteJobs::cancel(quint64 id)
{
    const auto it = m_jobs.find(id);
    if (it == m_jobs.end())
        return false;
    const auto state = it->second->status.state;
    if (state != runtime::JobState::Queued && state != runtime::JobState::Running)
        return false;
    it->second->cancel = true;
    return true;
}

QList<runtime::JobStatus> RemoteJobs::jobs() const
{
    QList<runtime::JobStatus> out;
    for (const auto& [_, j] : m_jobs)
        out.append(j->status);
    return out;
}

std::optional<runtime::JobStatus> RemoteJobs::job(quint64 id) const
{
    const auto it = m_jobs.find(id);
    if (it == m_jobs.end())
        return std::nullopt;
    return it->second->status;
}

int RemoteJobs::pending() const
{
    int n = 0;
    for (const auto& [_, j] : m_jobs)
        n += j->status.state == runtime::JobState::Queued || j->status.state == runtime::JobState::Running ? 1 : 0;
    return n;
}

QString RemoteJobs::hostOf(quint64 id) const
{
    const auto it = m_jobs.find(id);
    return it == m_jobs.end() ? QString() : it->second->host;
}

void RemoteJobs::refreshHosts()
{
    if (m_prober->busy)
        return;
    if (m_prober->thread.joinable())
        m_prober->thread.join();
    m_prober->busy = true;
    const auto hosts = m_hosts();
    m_prober->thread = std::thread([this, hosts] {
        std::vector<HostState> states(hosts.size());
        std::vector<std::thread> askers;
        for (std::size_t i = 0; i < hosts.size(); ++i)
            askers.emplace_back([&states, &hosts, i] {
                HostClient::Options o;
                o.requestTimeout = std::chrono::seconds(8);
                states[i] = probeHost(HostClient(hosts[i], o));
            });
        for (auto& t : askers)
            t.join();
        QMetaObject::invokeMethod(
            this,
            [this, states = std::move(states)]() mutable {
                m_states = std::move(states);
                m_prober->busy = false;
                emit hostsChanged();
            },
            Qt::QueuedConnection);
    });
}

}  // namespace vireo::remote
