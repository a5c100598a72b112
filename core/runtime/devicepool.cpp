#include "core/runtime/devicepool.h"

#include "inference/facade/generator.h"

#include <algorithm>

namespace vireo::runtime {

Result<PlacementNeed> placementNeed(const GenerateJob& job, const std::vector<DeviceSlot>& devices, facade::Placement placement)
{
    const auto& r = job.request;
    const facade::SizeRequest size{r.width, r.height, facade::planningFrames(r), r.guidance > 1.0 || r.audioGuidance > 1.0, r.knobs,
        static_cast<int>(job.references.size())};
    // The host is shared by every device's plan (a CPU-placed encoder, streamed blocks).
    std::int64_t hostAvailable = 0;
    const auto cpu = std::find_if(devices.begin(), devices.end(), [](const DeviceSlot& s) { return s.device == "cpu"; });
    hostAvailable = cpu != devices.end() ? cpu->freeBytes : facade::measureBudget("cpu").hostAvailableBytes;

    PlacementNeed need;
    need.modelKey = job.model.key.toStdString();
    std::optional<Error> firstError;
    for (const auto& slot : devices) {
        auto plan = job.model.plan;
        plan.device = slot.device;
        plan.placement = placement;
        facade::MemoryBudget budget;
        budget.hostAvailableBytes = hostAvailable;
        budget.deviceTotalBytes = slot.totalBytes;
        // What the device holds now is released for another model (or reused by the same one).
        budget.deviceFreeBytes = slot.freeBytes + slot.residentBytes;
        budget.deviceCaps = slot.caps;
        Result<facade::MemoryPlan> planned = makeError(ErrorCode::Internal, "not planned");
        try {
            planned = facade::Generator::planMemory(plan, size, budget);
        } catch (const std::exception& e) {
            planned = makeError(ErrorCode::Internal, slot.device + ": planning memory failed: " + e.what());
        }
        if (!planned) {
            if (!firstError)
                firstError = planned.error();
            continue;
        }
        need.peakBytes[slot.device] = slot.device == "cpu" ? planned->hostPeakBytes : planned->devicePeakBytes;
    }
    if (need.peakBytes.empty())
        return *firstError;
    return need;
}

DevicePool::DevicePool(Options options, QObject* parent) : QObject(parent), m_options(std::move(options)) {}

std::vector<DeviceSlot> DevicePool::machineSlots()
{
    std::vector<DeviceSlot> out;
    for (const auto& d : facade::availableDevices()) {
        DeviceSlot s;
        s.device = d.name;
        s.name = d.description;
        s.totalBytes = d.totalBytes;
        const auto budget = facade::measureBudget(d.name);
        s.freeBytes = d.name == "cpu" ? budget.hostAvailableBytes : budget.deviceFreeBytes;
        out.push_back(std::move(s));
    }
    return out;
}

Engine* DevicePool::engine(const QString& device) const
{
    if (const auto it = m_engines.find(device); it != m_engines.end())
        return it->second;
    auto* e = m_options.engineFor(device);
    if (!e)
        return nullptr;
    m_engines[device] = e;
    auto* self = const_cast<DevicePool*>(this);
    // Ids are unique across engines, so each signal is passed on as it is, for this pool's jobs.
    connect(e, &Engine::jobAdded, self, [self](quint64 id) {
        if (self->m_jobs.count(id))
            emit self->jobAdded(id);
    });
    connect(e, &Engine::jobChanged, self, [self](quint64 id) {
        if (self->m_jobs.count(id))
            emit self->jobChanged(id);
    });
    connect(e, &Engine::jobProgress, self, [self](quint64 id, const QString& phase, qint64 done, qint64 total, double eta) {
        if (self->m_jobs.count(id))
            emit self->jobProgress(id, phase, done, total, eta);
    });
    connect(e, &Engine::jobFinished, self, [self](quint64 id) {
        if (self->m_jobs.count(id))
            emit self->jobFinished(id);
    });
    connect(e, &Engine::previewReady, self, [self](quint64 id, const QImage& strip, int step) {
        if (self->m_jobs.count(id))
            emit self->previewReady(id, strip, step);
    });
    return e;
}

std::vector<DeviceSlot> DevicePool::devices() const
{
    auto out = m_options.probe();
    for (auto& s : out) {
        const auto* e = engine(QString::fromStdString(s.device));
        if (!e)
            continue;
        s.queued = e->pending();
        if (const auto resident = e->resident()) {
            s.residentModel = resident->model.key.toStdString();
            s.residentBytes = resident->plan.deviceWeightBytes;
        }
    }
    return out;
}

Result<DevicePool::Placed> DevicePool::submit(GenerateJob job, const QString& pin)
{
    const auto devices = this->devices();
    const auto place = [&](facade::Placement placement) -> Result<PlacementChoice> {
        auto need = placementNeed(job, devices, placement);
        if (!need)
            return need.error();
        need->pinned = pin.toStdString();
        return placeJob(devices, *need);
    };
    // A job left on Auto is placed where it runs with everything resident if any device can; only
    // where none can, where the family's fallbacks (encoder on the CPU, streamed blocks) fit.
    const auto chosen = job.model.plan.placement;
    auto choice = place(chosen == facade::Placement::Auto ? facade::Placement::AllResident : chosen);
    if (!choice && choice.error().code == ErrorCode::OutOfMemory && chosen == facade::Placement::Auto)
        if (auto fallback = place(facade::Placement::Auto); fallback || fallback.error().code != ErrorCode::OutOfMemory)
            choice = std::move(fallback);
    if (!choice)
        return choice.error();
    auto* e = engine(QString::fromStdString(choice->device));
    if (!e)
        return makeError(ErrorCode::Internal, "no engine for " + choice->device);
    // The engine's own device, which is the slot's except where a test backs a slot with the CPU.
    job.model.plan.device = e->device().toStdString();
    // Registered before the engine can report it (its signals are queued to this thread).
    const auto id = e->enqueueGenerate(job);
    m_jobs[id] = e;
    emit jobAdded(id);
    return Placed{id, QString::fromStdString(choice->device), QString::fromStdString(choice->reason), e};
}

Engine* DevicePool::engineOf(quint64 id) const
{
    const auto it = m_jobs.find(id);
    return it == m_jobs.end() ? nullptr : it->second;
}

std::optional<JobStatus> DevicePool::job(quint64 id) const
{
    const auto* e = engineOf(id);
    return e ? e->job(id) : std::nullopt;
}

bool DevicePool::cancel(quint64 id)
{
    auto* e = engineOf(id);
    return e && e->cancel(id);
}

}  // namespace vireo::runtime
