#pragma once

#include "core/hub/fileplan.h"

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace vireo::hub {

enum class FileState { Queued, Downloading, Retrying, Verifying, Done, Failed, Cancelled };
const char* fileStateName(FileState state);

struct FileStatus {
    std::string path;
    FileState state = FileState::Queued;
    std::uint64_t bytesDone = 0;  // durably written (or already cached), never above size
    std::uint64_t size = 0;
    double bytesPerSecond = 0;
    double etaSeconds = -1;  // -1: unknown
    int attempt = 0;  // retries in a row (Retrying)
    int maxAttempts = 0;
    std::string message;  // the failure reason, or the retry cause
};

struct PlanStatus {
    std::uint64_t bytesDone = 0;  // monotonic, clamped to totalBytes
    std::uint64_t totalBytes = 0;
    double bytesPerSecond = 0;
    double etaSeconds = -1;
    int filesDone = 0;
    int filesFailed = 0;
    int filesCancelled = 0;
};

struct DownloadOptions {
    int parallelFiles = 4;
    std::uint64_t headroomBytes = 2ull << 30;
    std::chrono::milliseconds progressInterval{100};  // per file; state changes always report
    // A file that fails verification (hash or size after a resume, a 416, a wrong range) is
    // fetched again from byte 0 this many times before it fails for the user to Repair.
    int autoRefetches = 2;
};

// Runs a plan: per-file jobs with bounded parallelism, Range resume from partial files,
// size and hash verification, atomic moves into the cache. Progress arrives on worker
// threads through the callback (a GUI marshals it to its own thread). A job that throws
// (it should not) fails that file only, with the reason in its status.
class PlanDownload {
public:
    using ProgressFn = std::function<void(const FileStatus& file, const PlanStatus& plan)>;

    PlanDownload(const HubClient& client, const HfCache& cache, FilePlan plan, DownloadOptions options = {}, ProgressFn progress = {});
    ~PlanDownload();

    // Checks disk space over the whole remaining plan first; then downloads. Returns an
    // error naming the first failed file, Cancelled if anything was cancelled.
    HubResult<void> run();
    void cancelAll();
    void cancelFile(const std::string& path);

    std::vector<FileStatus> fileStatuses() const;
    PlanStatus planStatus() const;
    const FilePlan& plan() const { return m_plan; }

private:
    struct Job;
    HubResult<void> runJob(Job& job);
    HubResult<void> fetch(Job& job, bool& damaged);
    void report(Job& job, bool force);
    PlanStatus planStatusLocked() const;

    const HubClient& m_client;
    const HfCache& m_cache;
    FilePlan m_plan;
    DownloadOptions m_options;
    ProgressFn m_progress;
    std::atomic<bool> m_cancelAll{false};
    std::vector<std::unique_ptr<Job>> m_jobs;
    mutable std::mutex m_mutex;
    std::uint64_t m_reportedTotal = 0;
};

}  // namespace vireo::hub
