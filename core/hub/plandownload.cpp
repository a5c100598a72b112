#include "core/hub/plandownload.h"

#include "core/hub/digest.h"

#include <QStorageInfo>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace vireo::hub {

namespace {

using Clock = std::chrono::steady_clock;

// Writes and hashes on its own thread what the network thread receives: the transfer never
// waits on the disk or on SHA-256, and the file gets large writes (curl hands over 16 KB at a
// time on a fast link). Write-back is started as it goes (sync_file_range), so the fsync
// before the file is verified only has the tail left to flush.
class FileWriter {
public:
    using Written = std::function<void(std::uint64_t bytes)>;

    FileWriter(int fd, std::uint64_t offset, Digest& hash, Written onWritten)
        : m_fd(fd), m_offset(offset), m_synced(offset), m_hash(hash), m_onWritten(std::move(onWritten))
    {
        m_current.reserve(kBlock);
        m_thread = std::thread([this] { run(); });
    }
    ~FileWriter() { finish(); }
    FileWriter(const FileWriter&) = delete;
    FileWriter& operator=(const FileWriter&) = delete;

    // Copies the bytes in; false once a write has failed (the transfer should stop).
    bool add(const char* data, std::size_t n)
    {
        while (n > 0) {
            if (m_failed)
                return false;
            const auto take = std::min(n, kBlock - m_current.size());
            m_current.insert(m_current.end(), data, data + take);
            data += take;
            n -= take;
            // Large writes on a fast link; on a slow one the bytes still reach the file (and the
            // progress bar, and a resume after a cancel) within a fraction of a second.
            if (m_current.size() == kBlock || (!m_current.empty() && Clock::now() - m_handed >= kHandEvery))
                hand(false);
        }
        return !m_failed;
    }

    // Writes what is buffered and waits for the thread; true when every byte reached the file.
    bool finish()
    {
        if (m_thread.joinable()) {
            hand(true);
            m_thread.join();
        }
        return !m_failed;
    }

    int error() const { return m_errno; }

private:
    static constexpr std::size_t kBlock = 8u << 20;
    static constexpr std::size_t kQueued = 4;  // 32 MiB in flight at most
    static constexpr std::uint64_t kSyncEvery = 64u << 20;
    static constexpr auto kHandEvery = std::chrono::milliseconds(100);

    void hand(bool last)
    {
        std::unique_lock lock(m_mutex);
        m_space.wait(lock, [&] { return m_queue.size() < kQueued || m_failed; });
        if (!m_current.empty() && !m_failed)
            m_queue.push_back(std::move(m_current));
        m_current = std::vector<char>();
        if (!last)
            m_current.reserve(kBlock);
        m_done = m_done || last;
        m_handed = Clock::now();
        m_ready.notify_one();
    }

    void run()
    {
        for (;;) {
            std::vector<char> block;
            {
                std::unique_lock lock(m_mutex);
                m_ready.wait(lock, [&] { return !m_queue.empty() || m_done; });
                if (m_queue.empty())
                    return;
                block = std::move(m_queue.front());
                m_queue.pop_front();
                m_space.notify_one();
            }
            if (!safefs::writeAll(m_fd, block.data(), block.size(), m_offset)) {
                // The bytes before the failure that reached the file are valid: the partial
                // keeps them, and its size says where a resume starts.
                m_errno = errno;
                std::lock_guard lock(m_mutex);
                m_failed = true;
                m_queue.clear();
                m_space.notify_all();
                return;
            }
            m_hash.add(block.data(), block.size());
            m_offset += block.size();
            if (m_offset - m_synced >= kSyncEvery) {
                ::sync_file_range(m_fd, static_cast<off_t>(m_synced), static_cast<off_t>(m_offset - m_synced), SYNC_FILE_RANGE_WRITE);
                m_synced = m_offset;
            }
            m_onWritten(block.size());
        }
    }

    int m_fd;
    std::uint64_t m_offset, m_synced;
    Digest& m_hash;
    Written m_onWritten;
    std::vector<char> m_current;  // filled by the network thread
    Clock::time_point m_handed = Clock::now();  // network thread only
    std::mutex m_mutex;
    std::condition_variable m_ready, m_space;
    std::deque<std::vector<char>> m_queue;
    bool m_done = false;
    std::atomic<bool> m_failed{false};
    int m_errno = 0;
    std::thread m_thread;
};

}  // namespace

const char* fileStateName(FileState state)
{
    switch (state) {
    case FileState::Queued: return "queued";
    case FileState::Downloading: return "downloading";
    case FileState::Retrying: return "stalled-retrying";
    case FileState::Verifying: return "verifying";
    case FileState::Done: return "done";
    case FileState::Failed: return "failed";
    case FileState::Cancelled: return "cancelled";
    }
    return "?";
}

struct PlanDownload::Job {
    PlannedFile planned;
    FileStatus status;
    std::atomic<bool> cancel{false};
    Clock::time_point lastReport{};
    Clock::time_point speedSince{};
    std::uint64_t speedBytes = 0;
};

PlanDownload::PlanDownload(const HubClient& client, const HfCache& cache, FilePlan plan, DownloadOptions options, ProgressFn progress)
    : m_client(client), m_cache(cache), m_plan(std::move(plan)), m_options(options), m_progress(std::move(progress))
{
    for (const auto& f : m_plan.files) {
        auto job = std::make_unique<Job>();
        job->planned = f;
        job->status.path = f.file.path;
        job->status.size = f.file.size;
        job->status.bytesDone = (f.present || f.blobPresent) ? f.file.size : std::min(f.partialBytes, f.file.size);
        m_jobs.push_back(std::move(job));
    }
}

PlanDownload::~PlanDownload() = default;

void PlanDownload::cancelAll()
{
    m_cancelAll = true;
    std::lock_guard lock(m_mutex);
    for (auto& job : m_jobs)
        job->cancel = true;
}

void PlanDownload::cancelFile(const std::string& path)
{
    std::lock_guard lock(m_mutex);
    for (auto& job : m_jobs)
        if (job->status.path == path)
            job->cancel = true;
}

std::vector<FileStatus> PlanDownload::fileStatuses() const
{
    std::lock_guard lock(m_mutex);
    std::vector<FileStatus> out;
    for (const auto& job : m_jobs)
        out.push_back(job->status);
    return out;
}

PlanStatus PlanDownload::planStatus() const
{
    std::lock_guard lock(m_mutex);
    return planStatusLocked();
}

PlanStatus PlanDownload::planStatusLocked() const
{
    PlanStatus p;
    for (const auto& job : m_jobs) {
        p.totalBytes += job->status.size;
        p.bytesDone += std::min(job->status.bytesDone, job->status.size);
        if (job->status.state == FileState::Downloading)
            p.bytesPerSecond += job->status.bytesPerSecond;
        p.filesDone += job->status.state == FileState::Done;
        p.filesFailed += job->status.state == FileState::Failed;
        p.filesCancelled += job->status.state == FileState::Cancelled;
    }
    p.etaSeconds = p.bytesPerSecond > 0 ? static_cast<double>(p.totalBytes - p.bytesDone) / p.bytesPerSecond : -1;
    return p;
}

void PlanDownload::report(Job& job, bool force)
{
    FileStatus file;
    PlanStatus plan;
    {
        std::lock_guard lock(m_mutex);
        const auto now = Clock::now();
        if (!force && now - job.lastReport < m_options.progressInterval)
            return;
        job.lastReport = now;
        file = job.status;
        plan = planStatusLocked();
        // The plan's figure only moves forward, whatever a file does.
        m_reportedTotal = std::max(m_reportedTotal, plan.bytesDone);
        plan.bytesDone = m_reportedTotal;
    }
    if (m_progress)
        m_progress(file, plan);
}

HubResult<void> PlanDownload::runJob(Job& job)
{
    const auto& repo = m_plan.repo;
    const auto& file = job.planned.file;
    auto setState = [&](FileState state, std::string message = {}) {
        {
            std::lock_guard lock(m_mutex);
            job.status.state = state;
            job.status.message = std::move(message);
            if (state == FileState::Done)
                job.status.bytesDone = job.status.size;
            if (state != FileState::Downloading && state != FileState::Retrying) {
                job.status.bytesPerSecond = 0;
                job.status.etaSeconds = -1;
            }
        }
        report(job, true);
    };
    auto fail = [&](HubError error) -> HubResult<void> {
        setState(error.kind == HubErrorKind::Cancelled ? FileState::Cancelled : FileState::Failed, error.message);
        return error;
    };

    // On this worker thread a blob another tool wrote may be hashed (once, then remembered).
    if (m_cache.hasFile(repo, m_plan.commit, file, HfCache::Verify::Hash, &job.cancel)) {
        setState(FileState::Done);
        return {};
    }
    if (m_cache.hasBlob(repo, file, HfCache::Verify::Hash, &job.cancel)) {
        auto linked = m_cache.linkSnapshot(repo, m_plan.commit, file);
        if (!linked)
            return fail(linked.error());
        setState(FileState::Done);
        return {};
    }
    if (job.cancel)
        return fail({HubErrorKind::Cancelled, 0, repo + ": " + file.path + ": cancelled"});

    // A damaged result (hash or size mismatch after a resume, a 416, a range the server got
    // wrong) is fetched again from byte 0 a few times before it is the user's to Repair.
    const int rounds = 1 + std::max(0, m_options.autoRefetches);
    for (int round = 1;; ++round) {
        bool damaged = false;
        auto got = fetch(job, damaged);
        if (got)
            break;
        if (!damaged || round >= rounds) {
            auto error = got.error();
            if (damaged && rounds > 1)
                error.message += " (fetched " + std::to_string(round) + " times)";
            if (damaged)
                error.message += "; use Repair to fetch it again";
            return fail(error);
        }
        if (auto rejected = m_cache.rejectPartial(repo, file.etag()); !rejected)
            return fail(rejected.error());
        {
            std::lock_guard lock(m_mutex);
            job.status.bytesDone = 0;
        }
        setState(FileState::Retrying,
            got.error().message + "; fetching it again from the start (attempt " + std::to_string(round + 1) + " of "
                + std::to_string(rounds) + ")");
    }
    auto committed = m_cache.commitPartial(repo, m_plan.commit, file);
    if (!committed)
        return fail(committed.error());
    m_cache.removeJournal(repo, file.etag());
    setState(FileState::Done);
    return {};
}

// One transfer into the partial file, resuming what is there, then its verification. On a
// verification failure `damaged` is set and the partial is left for the caller to set aside.
HubResult<void> PlanDownload::fetch(Job& job, bool& damaged)
{
    const auto& repo = m_plan.repo;
    const auto& file = job.planned.file;
    auto opened = m_cache.openPartial(repo, file.etag());
    if (!opened)
        return opened.error();
    const int fd = opened->get();
    const auto partialPath = m_cache.partialPath(repo, file.etag())->string();
    {
        // The journal says which file a partial belongs to, for people and cleanup.
        nlohmann::json journal{{"repo", repo}, {"commit", m_plan.commit}, {"path", file.path}, {"etag", file.etag()}, {"size", file.size},
            {"url", m_client.resolveUrl(repo, m_plan.commit, file.path)}};
        (void)m_cache.writeJournal(repo, file.etag(), journal.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
    }
    // A partial longer than the file is a different download: it starts over.
    if (safefs::statFd(fd).size > file.size && ::ftruncate(fd, 0) != 0)
        return HubError{HubErrorKind::Io, 0, partialPath + ": cannot truncate the partial file (" + std::strerror(errno) + ")"};

    // Hash the bytes already on disk: resuming never refetches them.
    Digest hash(file.lfs(), file.size);
    std::uint64_t offset = 0;
    {
        std::vector<char> buffer(8 << 20);
        const auto onDisk = safefs::statFd(fd).size;
        while (offset < onDisk) {
            if (job.cancel)
                return HubError{HubErrorKind::Cancelled, 0, repo + ": " + file.path + ": cancelled"};
            const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), onDisk - offset));
            if (!safefs::readAll(fd, buffer.data(), n, offset))
                return HubError{HubErrorKind::Io, 0, partialPath + ": cannot read the partial file (" + std::strerror(errno) + ")"};
            hash.add(buffer.data(), n);
            offset += n;
        }
    }
    {
        std::lock_guard lock(m_mutex);
        job.status.bytesDone = std::max(job.status.bytesDone, offset);
        job.speedSince = Clock::now();
        job.speedBytes = 0;
        if (job.status.state != FileState::Retrying)
            job.status.state = FileState::Downloading;
    }
    report(job, true);

    // Progress counts bytes in the file (written by the writer thread), never bytes in flight.
    FileWriter writer(fd, offset, hash, [&](std::uint64_t n) {
        {
            std::lock_guard lock(m_mutex);
            job.status.bytesDone = std::min(job.status.size, job.status.bytesDone + n);
            job.speedBytes += n;
            const double seconds = std::chrono::duration<double>(Clock::now() - job.speedSince).count();
            if (seconds > 0.25) {
                const double rate = static_cast<double>(job.speedBytes) / seconds;
                job.status.bytesPerSecond = job.status.bytesPerSecond > 0 ? 0.7 * job.status.bytesPerSecond + 0.3 * rate : rate;
                job.status.etaSeconds = static_cast<double>(job.status.size - job.status.bytesDone) / job.status.bytesPerSecond;
                job.speedSince = Clock::now();
                job.speedBytes = 0;
            }
            if (job.status.state == FileState::Retrying)
                job.status.state = FileState::Downloading;
        }
        report(job, false);
    });
    const auto sink = [&](const char* data, std::size_t n) { return writer.add(data, n); };
    const auto onRetry = [&](int attempt, int maxAttempts, const std::string& why) {
        {
            std::lock_guard lock(m_mutex);
            job.status.attempt = attempt;
            job.status.maxAttempts = maxAttempts;
            job.status.state = FileState::Retrying;
            job.status.message = why;
            job.status.bytesPerSecond = 0;
            job.status.etaSeconds = -1;
        }
        report(job, true);
    };
    auto got = m_client.download(repo, m_plan.commit, file.path, offset, file.size, sink, &job.cancel, onRetry);
    const bool writesOk = writer.finish();
    const bool diskFull = !writesOk && (writer.error() == ENOSPC || writer.error() == EDQUOT);
    ::fsync(fd);
    const auto written = safefs::statFd(fd).size;
    if (got && !writesOk)
        got = HubError{
            HubErrorKind::Io, 0, repo + ": " + file.path + ": writing the downloaded bytes failed (" + std::strerror(writer.error()) + ")"};
    if (!got) {
        auto error = got.error();
        if (diskFull || error.kind == HubErrorKind::Io) {
            QStorageInfo storage(QString::fromStdString(std::filesystem::path(partialPath).parent_path().string()));
            if (diskFull || storage.bytesAvailable() < (1 << 20))
                error = {HubErrorKind::DiskFull, 0,
                    repo + ": " + file.path + ": the disk is full (" + humanSize(written) + " of " + humanSize(file.size)
                        + " kept); free space and resume"};
        }
        // The server contradicted the bytes kept (416, another range): they do not belong to
        // this file any more.
        damaged = error.kind == HubErrorKind::Integrity && error.httpStatus != 0;
        return error;
    }

    {
        std::lock_guard lock(m_mutex);
        job.status.state = FileState::Verifying;
    }
    report(job, true);
    const auto digest = hash.hex();
    if (written != file.size || digest != file.etag()) {
        damaged = true;
        return HubError{HubErrorKind::Integrity, 0,
            repo + ": " + file.path + ": "
                + (written != file.size ? "size " + std::to_string(written) + " instead of " + std::to_string(file.size)
                                        : std::string(file.lfs() ? "SHA-256" : "git hash") + " mismatch")
                + "; the download was damaged"};
    }
    return {};
}

HubResult<void> PlanDownload::run()
{
    const auto check = preflight(m_plan, m_cache, m_options.headroomBytes);
    if (!check.fits)
        return HubError{HubErrorKind::DiskFull, 0, m_plan.repo + ": " + check.message};

    // Files that share a blob are fetched once: the first job downloads it, the others link.
    std::vector<Job*> queue;
    std::set<std::string> seen;
    std::vector<Job*> later;
    for (auto& job : m_jobs)
        (seen.insert(job->planned.file.etag()).second ? queue : later).push_back(job.get());

    std::mutex queueMutex;
    std::size_t next = 0;
    std::vector<HubError> errors;
    auto worker = [&](std::vector<Job*>& jobs) {
        for (;;) {
            Job* job = nullptr;
            {
                std::lock_guard lock(queueMutex);
                if (next >= jobs.size())
                    return;
                job = jobs[next++];
            }
            if (job->cancel || m_cancelAll) {
                {
                    std::lock_guard lock(m_mutex);
                    job->status.state = FileState::Cancelled;
                }
                report(*job, true);
                std::lock_guard lock(queueMutex);
                errors.push_back({HubErrorKind::Cancelled, 0, m_plan.repo + ": " + job->status.path + ": cancelled"});
                continue;
            }
            HubResult<void> r;
            try {
                r = runJob(*job);
            } catch (const std::exception& e) {
                // A bug must fail this file, not the process (std::thread would terminate).
                r = HubError{HubErrorKind::Io, 0, m_plan.repo + ": " + job->status.path + ": internal error (" + e.what() + ")"};
            } catch (...) {
                r = HubError{HubErrorKind::Io, 0, m_plan.repo + ": " + job->status.path + ": internal error"};
            }
            if (!r) {
                {
                    std::lock_guard lock(m_mutex);
                    if (job->status.state != FileState::Failed && job->status.state != FileState::Cancelled) {
                        job->status.state = r.error().kind == HubErrorKind::Cancelled ? FileState::Cancelled : FileState::Failed;
                        job->status.message = r.error().message;
                    }
                }
                report(*job, true);
                std::lock_guard lock(queueMutex);
                errors.push_back(r.error());
            }
        }
    };
    for (auto* jobs : {&queue, &later}) {
        next = 0;
        std::vector<std::thread> threads;
        const int n = std::max(1, std::min<int>(m_options.parallelFiles, static_cast<int>(jobs->size())));
        for (int i = 0; i < n; ++i)
            threads.emplace_back(worker, std::ref(*jobs));
        for (auto& t : threads)
            t.join();
    }
    refreshPresence(m_plan, m_cache, HfCache::Verify::Cheap);
    if (errors.empty()) {
        auto ref = m_cache.writeRef(m_plan.repo, m_plan.revision, m_plan.commit);
        if (!ref)
            return ref.error();
        return {};
    }
    // A real failure outranks cancellations in the summary.
    auto first = std::find_if(errors.begin(), errors.end(), [](const HubError& e) { return e.kind != HubErrorKind::Cancelled; });
    auto error = first != errors.end() ? *first : errors.front();
    if (errors.size() > 1)
        error.message += " (and " + std::to_string(errors.size() - 1) + " more)";
    return error;
}

}  // namespace vireo::hub
