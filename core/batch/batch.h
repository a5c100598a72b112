#pragma once

// Batches of generations from a JSONL file, one job per non-empty line with the HTTP API's field
// names, for `vireo-cli batch` (run here, or as a Slurm array where each task runs one line).
// A batch lives in one folder: the outputs under fixed names (<id>.mp4 or <id>.png), a marker
// <id>.json written after each output is whole, and .vireo/jobs.jsonl, the lines as they run
// (seeds drawn at submit), so a task run twice makes the same output once.

#include "core/generation/generation.h"
#include "inference/util/result.h"

#include <nlohmann/json.hpp>

#include <QString>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vireo::batch {

struct Line {
    int index = 0;  // among the job lines, from 0: the task index
    int fileLine = 0;  // in the file, from 1: for messages
    std::string id;  // the output's name: [A-Za-z0-9._-]{1,64}, unique in the batch
    QString modelKey;  // "catalog:<family>/<variant>" or a local key (ModelResolver::localKey)
    generation::Ask ask;
    std::string device;  // "", "auto", "cpu" or "cuda:N"
    nlohmann::json fields;  // the line as given, normalized (what the batch's copy keeps)
};

// Every line of a JSONL text (at most 100,000 jobs): an object per non-empty line, fields as the
// API's (id, model, text_encoder, upsampler, prompt, negative_prompt, seed, width, height,
// frames, fps, steps, guidance, audio_guidance, rescale, schedule, speed, stages, knobs, loras
// [{path, strength}], conditions [{image, frame, strength, crf}], device). A bad line, an unknown
// field or a repeated id is an error naming `name`, the line and the field. Relative paths are
// taken from `base` (the file's folder).
Result<std::vector<Line>> parse(const std::string& text, const std::string& name, const std::filesystem::path& base);
// The file (at most 64 MB) through parse().
Result<std::vector<Line>> readFile(const std::filesystem::path& path);

// The batch's own copy of a line, its seed fixed: what every run of the task reads.
std::string copyLine(const Line& line, std::int64_t seed);

// What became of a task, from the batch folder alone: done (its marker), or not yet.
struct TaskState {
    std::string id;
    bool done = false;
    std::string output;  // the output's file name, when done
    std::string sha256;
};
// The batch folder's tasks in order (read from .vireo/jobs.jsonl and the markers).
Result<std::vector<TaskState>> status(const std::filesystem::path& batchFolder);

// The output's file and marker of a task in a batch folder.
std::filesystem::path outputPath(const std::filesystem::path& batchFolder, const Line& line, bool image);
std::filesystem::path markerPath(const std::filesystem::path& batchFolder, const std::string& id);
// Writes the marker (atomically: QSaveFile) once the output is whole: its name, bytes and
// SHA-256, the seconds it took, the device and host it ran on.
Result<void> writeMarker(const std::filesystem::path& batchFolder, const Line& line, const std::filesystem::path& output, double seconds,
    const std::string& device);

// Slurm, the scheduler most GPU clusters run: the batch becomes one array job, task i running
// line i (`vireo-cli batch run-task FOLDER --index i`). The command lines are built and their
// answers read by these pure functions; the caller runs the programs.
struct SlurmOptions {
    std::string partition, account, time, mem;  // empty: the cluster's defaults
    int gpusPerTask = 0, cpusPerTask = 0;  // 0: not asked
    int maxParallel = 0;  // tasks running at once (the array's %N); 0: no limit
    int requeueLimit = 3;  // a task that failed is requeued while SLURM_RESTART_COUNT is below
    std::string cache;  // HF_HUB_CACHE for the tasks (a shared folder); empty: theirs
    std::vector<std::string> extra;  // further sbatch arguments, as given
};
// The task script: runs the line of the array index with the models offline (never a download
// on a node), and requeues a task that failed (not a bad line: exit 2) below the limit. Paths
// with a quote or a line break are refused.
Result<std::string> slurmTaskScript(const std::string& vireoCli, const std::filesystem::path& batchFolder, const SlurmOptions& o);
// sbatch's arguments for `tasks` tasks (indices 0 .. tasks-1), the script last.
std::vector<std::string> sbatchArguments(
    const SlurmOptions& o, int tasks, const std::filesystem::path& batchFolder, const std::string& jobName, const std::string& script);
// sbatch --parsable's answer: "12345" or "12345;cluster" -> 12345; nullopt for anything else.
std::optional<std::int64_t> parseSbatchJobId(const std::string& answer);
// squeue -h -r -j ID -o "%i %T %r" lines: "12_3 RUNNING None" -> task 3 running ("12_[4-5]" as
// pending ranges are expanded); the states by task index.
std::map<int, std::string> parseSqueue(const std::string& text, std::int64_t jobId);

}  // namespace vireo::batch
