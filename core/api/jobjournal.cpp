#include "core/api/jobjournal.h"

#include <QDir>
#include <QFileInfo>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace vireo::api {

namespace {

constexpr std::size_t kMaxLineBytes = 4 * 1024 * 1024;

bool finished(const nlohmann::json& job)
{
    const auto status = job.value("status", std::string());
    return status == "completed" || status == "failed";
}

Result<void> writeAll(int fd, const std::string& text, const QString& file)
{
    std::size_t done = 0;
    while (done < text.size()) {
        const auto n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return makeError(ErrorCode::Io, file.toStdString() + ": cannot write the API's job journal: " + std::strerror(errno));
        done += static_cast<std::size_t>(n);
    }
    return {};
}

}  // namespace

Result<std::unique_ptr<JobJournal>> JobJournal::open(const QString& file, Contents* contents, std::size_t keepFinished)
{
    const auto path = file.toStdString();
    QDir().mkpath(QFileInfo(file).absolutePath());
    // One server per journal: a second would run the same queued jobs again. The lock is on a
    // file of its own, since the journal itself is replaced below.
    const auto lockPath = path + ".lock";
    const int lock = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0)
        return makeError(ErrorCode::Io, lockPath + ": cannot lock the API's job journal: " + std::strerror(errno));
    if (::flock(lock, LOCK_EX | LOCK_NB) != 0) {
        ::close(lock);
        return makeError(
            ErrorCode::PermissionDenied, path + " is in use by another Vireo server; give this one its own (--journal) or stop the other");
    }
    std::unique_ptr<JobJournal> journal(new JobJournal);
    journal->m_lockFd = lock;
    std::vector<std::string> order;
    std::map<std::string, nlohmann::json> last;
    int damaged = 0;
    {
        std::ifstream in(path, std::ios::binary);
        std::string line;
        while (in && std::getline(in, line)) {
            // A line without its newline is the one a crash cut short; getline cannot tell, so
            // the parse decides: a torn line is not a whole JSON object.
            if (line.empty())
                continue;
            if (line.size() > kMaxLineBytes) {
                ++damaged;
                continue;
            }
            auto j = nlohmann::json::parse(line, nullptr, false);
            if (j.is_discarded() || !j.is_object() || !j.contains("id") || !j["id"].is_string()) {
                ++damaged;
                continue;
            }
            const auto id = j["id"].get<std::string>();
            if (j.value("deleted", false)) {
                last.erase(id);
                continue;
            }
            if (!last.count(id))
                order.push_back(id);
            last[id] = std::move(j);
        }
    }
    Contents folded;
    folded.damagedLines = damaged;
    for (const auto& id : order)
        if (auto it = last.find(id); it != last.end())
            folded.jobs.push_back(it->second);
    // Only the newest finished jobs are kept; unfinished ones always are.
    std::size_t finishedCount = 0;
    for (const auto& j : folded.jobs)
        finishedCount += finished(j) ? 1 : 0;
    if (finishedCount > keepFinished) {
        std::size_t drop = finishedCount - keepFinished;
        std::vector<nlohmann::json> kept;
        for (auto& j : folded.jobs) {
            if (drop > 0 && finished(j)) {
                --drop;
                continue;
            }
            kept.push_back(std::move(j));
        }
        folded.jobs = std::move(kept);
    }
    // The folded state replaces the file in one rename: a crash now leaves either file whole.
    const auto temp = path + ".tmp";
    const int t = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (t < 0)
        return makeError(ErrorCode::Io, temp + ": cannot write the API's job journal: " + std::strerror(errno));
    std::string text;
    for (const auto& j : folded.jobs)
        text += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    auto written = writeAll(t, text, QString::fromStdString(temp));
    if (written && ::fsync(t) != 0)
        written = makeError(ErrorCode::Io, temp + ": cannot flush the API's job journal: " + std::strerror(errno));
    ::close(t);
    if (!written)
        return written.error();
    if (::rename(temp.c_str(), path.c_str()) != 0)
        return makeError(ErrorCode::Io, path + ": cannot replace the API's job journal: " + std::strerror(errno));
    const auto folder = QFileInfo(file).absolutePath().toStdString();
    if (const int d = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
        ::fsync(d);
        ::close(d);
    }
    journal->m_file = file;
    journal->m_fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (journal->m_fd < 0)
        return makeError(ErrorCode::Io, path + ": cannot open the API's job journal: " + std::strerror(errno));
    if (contents)
        *contents = std::move(folded);
    return journal;
}

JobJournal::~JobJournal()
{
    if (m_fd >= 0)
        ::close(m_fd);
    if (m_lockFd >= 0)
        ::close(m_lockFd);
}

Result<void> JobJournal::append(const std::string& line)
{
    // One write of a whole line (O_APPEND): a crash leaves at most this line torn.
    if (auto w = writeAll(m_fd, line, m_file); !w)
        return w;
    if (::fdatasync(m_fd) != 0)
        return makeError(ErrorCode::Io, m_file.toStdString() + ": cannot flush the API's job journal: " + std::strerror(errno));
    return {};
}

Result<void> JobJournal::record(const nlohmann::json& job)
{
    return append(job.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

Result<void> JobJournal::forget(const std::string& id)
{
    return append(nlohmann::json{{"id", id}, {"deleted", true}}.dump() + "\n");
}

}  // namespace vireo::api
