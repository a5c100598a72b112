#pragma once

// The studio's runtime for one device: a job queue (load, generate, unload) worked through in
// order on the engine's own thread, which owns the loaded model. The GUI thread only queues
// jobs, reads snapshots and receives signals; it never waits on a tensor.
//
// The engine is also the device's arbiter: a load waits for the generation in flight (the
// queue keeps order; cancel() frees the way), a swap releases the old model first unless the
// memory plan says both fit, a failed or cancelled load frees everything it allocated, and a
// generation that ran out of memory leaves the engine ready for the next job.

#include "core/output/recipe.h"
#include "core/runtime/conditioning.h"
#include "inference/facade/generator.h"

#include <QImage>
#include <QObject>
#include <QString>

#include <functional>
#include <map>
#include <memory>
#include <optional>

namespace vireo::runtime {

class EtaModel;

// What to load: the files, how, and where they came from (for the recipe and the trust check).
struct ModelRef {
    QString key;  // "catalog:ltx-2.3/distilled-fp8", "repo:org/name@main", "local:/path"
    QString title;  // what the user picked
    facade::LoadPlan plan;
    QString family, variant;  // catalog ids, when from the catalog
    QStringList repos;  // Hub repos the files come from (each must be trusted to load)
    QString commit;
    bool sameLoadAs(const ModelRef& other) const;
};

struct GenerateJob {
    ModelRef model;
    facade::GenerateRequest request;
    // Stills and clips to condition the video on, read on the engine's thread right before the
    // model loads (a file that is missing or does not decode fails this job, with its name),
    // and copied beside the output so the recipe can make it again.
    std::vector<ConditionFile> conditions;
    // The sound the video follows (audio-to-video), read there too; with frames 0 the clip is
    // as long as the sound (facade::framesForSound). Its samples are kept beside the output.
    std::optional<AudioFile> audio;
    // Retake: the clip whose window the request makes again (the request holds the window),
    // read there too; what of it was used is kept beside the output.
    std::optional<RetakeFile> retake;
    // An IC-LoRA's reference clips (its LoRA among the request's), read there too: the output's
    // first frames of each, fitted to its size; their frames used are kept beside the output.
    std::vector<ReferenceFile> references;
    QString outputFolder;  // the MP4 gets a fresh name there
    QString outputPath;  // or exactly this name, which must not exist
    bool writeOutput = true;  // false: generate only (warm-up and timing runs)
    bool forcePlacement = false;  // run although the memory plan says it will not fit
};

enum class JobKind { Load, Generate, Unload };
enum class JobState { Queued, Running, Done, Failed, Cancelled };
QString jobStateName(JobState state);

struct JobStatus {
    quint64 id = 0;
    JobKind kind = JobKind::Generate;
    JobState state = JobState::Queued;
    QString title;
    QString phase;  // "denoise", "decode video", "mux", ...
    qint64 done = 0, total = 0;
    double elapsedSeconds = 0;
    double etaSeconds = -1;  // -1: not known yet
    QString outputPath;  // a finished generation's file
    double loadSeconds = 0, generateSeconds = 0, writeSeconds = 0;
    output::Recipe recipe;  // a finished generation's recipe
    QString error;  // a failed job's reason, for the user
    ErrorCode errorCode = ErrorCode::Internal;
};

class Engine : public QObject {
    Q_OBJECT
public:
    struct Options {
        QString device = QStringLiteral("cpu");
        QString etaFile;  // remembered run times; empty: not kept
        // Whether a Hub repo may be loaded (the catalog's publishers and the user's approvals).
        std::function<bool(const QString& repo)> repoTrusted;
        QString appName = QStringLiteral("vireo-studio");
    };
    explicit Engine(Options options, QObject* parent = nullptr);
    ~Engine() override;  // cancels everything and joins the engine thread

    quint64 enqueueLoad(const ModelRef& model, facade::SizeRequest size = {}, bool forcePlacement = false);
    quint64 enqueueGenerate(const GenerateJob& job);
    quint64 enqueueUnload();
    // A queued job is dropped; a running one stops at its next check (within a second).
    bool cancel(quint64 id);
    void cancelAll();

    QList<JobStatus> jobs() const;
    std::optional<JobStatus> job(quint64 id) const;
    // Ids come from one counter for every engine of the process (and the jobs on other hosts):
    // a front end that follows several devices (the device pool, the API) keys on the id alone.
    static quint64 newJobId();
    // Jobs queued or running (what the device pool ranks devices by).
    int pending() const;
    // Forgets finished jobs (the queue view's "clear").
    void clearFinished();

    struct Resident {
        ModelRef model;
        facade::MemoryPlan plan;
        std::map<std::string, std::int64_t> bytes;
        std::map<std::string, int> matmulPaths;
        // What runs where, in one line: "240 FP8 tensor-core GEMM, 8 dense GEMM; self-attention:
        // FP8 flash attention (cuDNN)" (the log and the Generate page show it after a load).
        QString pathsText() const;
    };
    std::optional<Resident> resident() const;
    // After a GPU fault that poisoned the device context: every later job on it fails with
    // this reason (restarting the studio is the only cure); empty while the device is fine.
    QString deviceLost() const;
    // Every file the resident model and the queued or running jobs read (what must not be
    // deleted from the cache now).
    QStringList filesInUse() const;
    QString device() const;

    // The memory plan, from headers only, on a helper thread; memoryPlanReady(ticket) follows.
    quint64 requestMemoryPlan(const ModelRef& model, facade::SizeRequest size, facade::Placement placement);
    std::optional<Result<facade::MemoryPlan>> memoryPlan(quint64 ticket) const;

signals:
    void jobAdded(quint64 id);
    // State or progress changed; progress is throttled to about 10 per second per job.
    void jobChanged(quint64 id);
    // The same progress as values: every phase's first and last report, others throttled.
    void jobProgress(quint64 id, const QString& phase, qint64 done, qint64 total, double etaSeconds);
    void jobFinished(quint64 id);
    // The clean estimate after `step` denoise steps: the latent frames side by side (one for an image).
    void previewReady(quint64 id, const QImage& strip, int step);
    void residentChanged();
    void memoryPlanReady(quint64 ticket);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

// A remembered-run-times key: the model, size, device and the settings that change the time.
QString etaKey(const ModelRef& model, const facade::GenerateRequest& request);

}  // namespace vireo::runtime
