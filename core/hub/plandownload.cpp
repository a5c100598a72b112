#include "core/hub/plandownload.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>
#include <QStorageInfo>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <set>
#include <thread>

namespace vireo::hub {

namespace {

using Clock = std::chrono::steady_clock;

QString q(const std::filesystem::path& p)
{
    return QString::fromStdString(p.string());
}

// OpenSSL's digests use the CPU's SHA extensions: hashing keeps up with the network where
// a portable implementation would be the bottleneck.
class Digest {
public:
    explicit Digest(bool sha256) : m_ctx(EVP_MD_CTX_new())
    {
        EVP_DigestInit_ex(m_ctx, sha256 ? EVP_sha256() : EVP_sha1(), nullptr);
    }
    ~Digest() { EVP_MD_CTX_free(m_ctx); }
    Digest(const Digest&) = delete;
    Digest& operator=(const Digest&) = delete;
    void add(const void* data, std::size_t bytes) { EVP_DigestUpdate(m_ctx, data, bytes); }
    std::string hex()
    {
        unsigned char out[EVP_MAX_MD_SIZE];
        unsigned int length = 0;
        EVP_DigestFinal_ex(m_ctx, out, &length);
        static const char* digits = "0123456789abcdef";
        std::string s;
        for (unsigned int i = 0; i < length; ++i) {
            s += digits[out[i] >> 4];
            s += digits[out[i] & 0xF];
        }
        return s;
    }

private:
    EVP_MD_CTX* m_ctx;
};

} // namespace

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

PlanDownload::PlanDownload(const HubClient& client, const HfCache& cache, FilePlan plan, DownloadOptions options,
                           ProgressFn progress)
    : m_client(client)
    , m_cache(cache)
    , m_plan(std::move(plan))
    , m_options(options)
    , m_progress(std::move(progress))
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

    if (m_cache.hasFile(repo, m_plan.commit, file)) {
        setState(FileState::Done);
        return {};
    }
    if (m_cache.hasBlob(repo, file)) {
        auto linked = m_cache.linkSnapshot(repo, m_plan.commit, file);
        if (!linked)
            return fail(linked.error());
        setState(FileState::Done);
        return {};
    }
    auto partialPath = m_cache.partialPath(repo, file.etag());
    if (!partialPath)
        return fail(partialPath.error());
    QDir().mkpath(q(partialPath->parent_path()));
    QFile partial(q(*partialPath));
    // The journal says which file a partial belongs to; a partial of the wrong size is a
    // different download and restarts (it is named by its content hash, so this is rare).
    const QString journalPath = q(*partialPath) + QStringLiteral(".json");
    {
        nlohmann::json journal{{"repo", repo}, {"commit", m_plan.commit}, {"path", file.path}, {"etag", file.etag()},
            {"size", file.size}, {"url", m_client.resolveUrl(repo, m_plan.commit, file.path)}};
        QSaveFile out(journalPath);
        if (out.open(QIODevice::WriteOnly)) {
            out.write(QByteArray::fromStdString(journal.dump(2)));
            out.commit();
        }
    }
    if (!partial.open(QIODevice::ReadWrite))
        return fail({HubErrorKind::Io, 0, partialPath->string() + ": cannot open the partial file (" + partial.errorString().toStdString() + ")"});
    if (static_cast<std::uint64_t>(partial.size()) > file.size)
        partial.resize(0);

    // Hash the bytes already on disk: resuming never refetches them.
    Digest hash(file.lfs());
    if (!file.lfs()) {
        const std::string header = "blob " + std::to_string(file.size);
        hash.add(header.c_str(), header.size() + 1); // with its NUL
    }
    std::uint64_t offset = 0;
    {
        QByteArray buffer;
        partial.seek(0);
        while (!(buffer = partial.read(8 << 20)).isEmpty()) {
            hash.add(buffer.constData(), static_cast<std::size_t>(buffer.size()));
            offset += static_cast<std::uint64_t>(buffer.size());
        }
    }
    partial.seek(static_cast<qint64>(offset));
    {
        std::lock_guard lock(m_mutex);
        job.status.bytesDone = std::max(job.status.bytesDone, offset);
        job.speedSince = Clock::now();
        job.speedBytes = 0;
    }
    setState(FileState::Downloading);

    bool diskFull = false;
    const auto sink = [&](const char* data, std::size_t n) {
        if (partial.write(data, static_cast<qint64>(n)) != static_cast<qint64>(n)) {
            diskFull = partial.error() == QFileDevice::ResourceError || errno == ENOSPC;
            return false;
        }
        hash.add(data, n);
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
        return true;
    };
    const auto onRetry = [&](int attempt, int maxAttempts, const std::string& why) {
        {
            std::lock_guard lock(m_mutex);
            job.status.attempt = attempt;
            job.status.maxAttempts = maxAttempts;
        }
        setState(FileState::Retrying, why);
    };
    auto got = m_client.download(repo, m_plan.commit, file.path, offset, file.size, sink, &job.cancel, onRetry);
    partial.flush();
    ::fsync(partial.handle());
    const auto written = static_cast<std::uint64_t>(partial.size());
    partial.close();
    if (!got) {
        auto error = got.error();
        if (diskFull || error.kind == HubErrorKind::Io) {
            QStorageInfo storage(q(partialPath->parent_path()));
            if (diskFull || storage.bytesAvailable() < (1 << 20))
                error = {HubErrorKind::DiskFull, 0, repo + ": " + file.path + ": the disk is full (" + humanSize(written)
                        + " of " + humanSize(file.size) + " kept); free space and resume"};
        }
        return fail(error);
    }

    setState(FileState::Verifying);
    const auto digest = hash.hex();
    if (written != file.size || digest != file.etag()) {
        // Keep the damaged bytes aside for inspection; a repair starts from zero.
        const QString rejected = q(*partialPath) + QStringLiteral(".rejected");
        QFile::remove(rejected);
        QFile::rename(q(*partialPath), rejected);
        return fail({HubErrorKind::Integrity, 0, repo + ": " + file.path + ": "
                + (written != file.size ? "size " + std::to_string(written) + " instead of " + std::to_string(file.size)
                                        : std::string(file.lfs() ? "SHA-256" : "git hash") + " mismatch")
                + "; the download was damaged, use Repair to fetch it again"});
    }
    auto committed = m_cache.commitPartial(repo, m_plan.commit, file, *partialPath);
    if (!committed)
        return fail(committed.error());
    QFile::remove(journalPath);
    setState(FileState::Done);
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
            auto r = runJob(*job);
            if (!r) {
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
    refreshPresence(m_plan, m_cache);
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

} // namespace vireo::hub
