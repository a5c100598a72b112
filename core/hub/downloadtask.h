#pragma once

#include "core/hub/plandownload.h"

#include <QObject>
#include <QString>

#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace vireo::hub {

// What one model needs from the Hub: one or more repos, each with the rule that picks the
// files its pipeline reads. A catalog variant or a repo the user typed.
struct TaskSpec {
    struct Source {
        std::string repo;
        std::string revision = "main";
        std::string role;
        PlanRule rule;
        bool autoRule = false;  // a typed repo: diffusers layout if it has model_index.json, else weights + configs
    };
    QString key;  // "catalog:ltx-2.3/distilled-fp8" or "repo:org/name@main"
    QString title;
    QString catalogId;  // empty for a typed repo
    std::vector<Source> sources;

    static TaskSpec forRepo(const std::string& repo, const std::string& revision = "main");
    QByteArray toJson() const;
    static std::optional<TaskSpec> fromJson(const QByteArray& json);
};

// Plans and downloads one TaskSpec on a worker thread and reports to the thread that owns
// it through queued calls. Progress per file and in total never moves backwards and never
// passes the size within a run.
class DownloadTask : public QObject {
    Q_OBJECT
public:
    enum class State { Idle, Planning, PlanFailed, Planned, Downloading, Done, Failed, Cancelled };
    Q_ENUM(State)

    struct Row {
        int source = 0;
        RepoFile file;
        FileStatus status;
    };
    struct Totals {
        std::uint64_t bytesDone = 0, totalBytes = 0, presentBytes = 0;
        double bytesPerSecond = 0, etaSeconds = -1;
        int files = 0, filesDone = 0, filesFailed = 0, filesCancelled = 0;
    };

    DownloadTask(TaskSpec spec, std::shared_ptr<const HubClient> client, std::shared_ptr<const HfCache> cache, DownloadOptions options,
        QObject* parent = nullptr);
    ~DownloadTask() override;

    const TaskSpec& spec() const { return m_spec; }
    State state() const { return m_state; }
    QString message() const { return m_message; }
    HubErrorKind errorKind() const { return m_errorKind; }
    const std::vector<FilePlan>& plans() const { return m_plans; }
    const Preflight& preflight() const { return m_preflight; }
    const std::vector<Row>& rows() const { return m_rows; }
    Totals totals() const;
    bool busy() const { return m_state == State::Planning || m_state == State::Downloading; }
    // Every planned file is in the cache.
    bool complete() const;

    void plan();
    // Starts (or resumes, or repairs: files already verified are not fetched again); with a
    // row, only that file (the others keep their state).
    void start(std::optional<int> onlyRow = std::nullopt);
    void cancelAll();
    void cancelFile(int row);
    // New settings (endpoint, token, cache folder, parallelism, headroom) for the next plan
    // or run; a run in progress keeps what it started with. A different cache folder makes
    // the plan stale, so the task plans again (now, or when its run ends).
    void reconfigure(std::shared_ptr<const HubClient> client, std::shared_ptr<const HfCache> cache, DownloadOptions options);

signals:
    void stateChanged(vireo::hub::DownloadTask::State state);
    void planned();
    void rowChanged(int row);
    void totalsChanged();

private:
    void setState(State state, const QString& message = {}, HubErrorKind kind = HubErrorKind::Network);
    void applyPlans(std::vector<FilePlan> plans, Preflight preflight);
    void applyProgress(int source, const FileStatus& status);
    void finishRun(const QString& failure, bool cancelled);
    void join();

    TaskSpec m_spec;
    std::shared_ptr<const HubClient> m_client;
    std::shared_ptr<const HfCache> m_cache;
    std::shared_ptr<const HfCache> m_runCache;  // the cache the current run writes into
    DownloadOptions m_options;
    bool m_replanAfterRun = false;
    State m_state = State::Idle;
    QString m_message;
    HubErrorKind m_errorKind = HubErrorKind::Network;
    std::vector<FilePlan> m_plans;
    Preflight m_preflight;
    std::vector<Row> m_rows;
    std::uint64_t m_reportedDone = 0;
    std::thread m_worker;
    std::mutex m_mutex;  // guards m_running and m_cancelledPaths
    std::vector<std::pair<int, PlanDownload*>> m_running;  // the sources downloading now
    std::vector<std::pair<int, std::string>> m_cancelledPaths;
    std::atomic<bool> m_cancelAll{false};
};

}  // namespace vireo::hub
