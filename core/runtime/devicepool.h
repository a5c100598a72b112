#pragma once

// Every device's engine behind one submit: a generation goes to the GPU its memory plan fits,
// preferring the one that holds its model, then the shortest queue (runtime::placeJob), or to the
// device the user pinned it to. Engines number their jobs from one process-wide counter, so the
// pool relays every engine's signals under the engines' own ids and a front end follows the jobs
// of all devices by id alone.

#include "core/runtime/deviceplacement.h"
#include "core/runtime/engine.h"

#include <QObject>
#include <QString>

#include <functional>
#include <map>
#include <optional>
#include <vector>

namespace vireo::runtime {

// What a job needs on each slot, from its files' headers (no device is touched): its peak with
// the job's placement, planned for that slot's device and dtype. Auto is planned twice: first
// with everything resident (so a card that holds the whole job wins), and where no card does,
// with the family's own fallbacks (the text encoder on the CPU, then blocks streamed). A slot
// whose plan fails (a GPU this build cannot run) gets no entry; every plan failing is an error.
Result<PlacementNeed> placementNeed(const GenerateJob& job, const std::vector<DeviceSlot>& devices, facade::Placement placement);

class DevicePool : public QObject {
    Q_OBJECT
public:
    struct Options {
        // The devices now, with their total and free memory (this machine's: machineSlots()).
        std::function<std::vector<DeviceSlot>()> probe;
        // The engine that runs a device's jobs, owned by the caller (the Studio's engines).
        std::function<Engine*(const QString& device)> engineFor;
    };
    explicit DevicePool(Options options, QObject* parent = nullptr);

    // The CPU and every CUDA device this process sees, free memory as the driver reports it.
    static std::vector<DeviceSlot> machineSlots();

    struct Placed {
        quint64 id = 0;
        QString device;
        QString reason;  // why there: "cuda:1: 0 jobs queued, 22.0 GB available"
        Engine* engine = nullptr;
    };
    // Plans, places and enqueues the job; `pin` ("cuda:1", "cpu"; empty: any GPU) must name a
    // device of the probe. Refused with placeJob's reason, nothing enqueued, when the pin is
    // unknown or no device can hold the job.
    Result<Placed> submit(GenerateJob job, const QString& pin = {});

    // The probe's slots with what each engine holds and has queued, as placement sees them.
    std::vector<DeviceSlot> devices() const;
    // The engine a submitted job runs on (null for an id this pool did not submit).
    Engine* engineOf(quint64 id) const;
    std::optional<JobStatus> job(quint64 id) const;
    bool cancel(quint64 id);

signals:
    void jobAdded(quint64 id);
    void jobChanged(quint64 id);
    void jobProgress(quint64 id, const QString& phase, qint64 done, qint64 total, double etaSeconds);
    void jobFinished(quint64 id);
    void previewReady(quint64 id, const QImage& strip, int step);

private:
    Engine* engine(const QString& device) const;

    Options m_options;
    mutable std::map<QString, Engine*> m_engines;  // relayed once each
    std::map<quint64, Engine*> m_jobs;
};

}  // namespace vireo::runtime
