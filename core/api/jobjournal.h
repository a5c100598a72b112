#pragma once

// The local API's crash-safe record of the jobs it accepted: one JSON line per change of a job,
// each the job's whole state, appended and flushed to the disk before the client hears of it.
// Reading folds the lines by job id (the last wins), so a restart knows every job's last state;
// a line cut short by a kill or a power cut is skipped and counted, never taken as a job.
// Opening rewrites the file with the folded state (atomically), so it does not grow forever.

#include "inference/util/result.h"

#include <nlohmann/json.hpp>

#include <QString>

#include <memory>
#include <string>
#include <vector>

namespace vireo::api {

class JobJournal {
public:
    struct Contents {
        std::vector<nlohmann::json> jobs;  // each job's last state, in the order they were accepted
        int damagedLines = 0;  // torn or not JSON: skipped
    };
    // `keepFinished`: how many finished jobs (completed, failed) survive the rewrite, newest kept.
    // A journal another process holds open is refused (PermissionDenied).
    static Result<std::unique_ptr<JobJournal>> open(const QString& file, Contents* contents, std::size_t keepFinished = 1000);
    ~JobJournal();

    // The job's whole state ("id" set); on the disk when this returns.
    Result<void> record(const nlohmann::json& job);
    // The job is gone (deleted by its client).
    Result<void> forget(const std::string& id);
    QString file() const { return m_file; }

private:
    JobJournal() = default;
    Result<void> append(const std::string& line);
    QString m_file;
    int m_fd = -1;
    int m_lockFd = -1;  // flock'd for the journal's lifetime
};

}  // namespace vireo::api
