#include "core/runtime/deviceplacement.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <tuple>

namespace vireo::runtime {

namespace {

std::string gib(std::int64_t bytes)
{
    char s[32];
    std::snprintf(s, sizeof s, "%.1f GB", static_cast<double>(bytes) / 1e9);
    return s;
}

bool isGpu(const DeviceSlot& d)
{
    return d.device != "cpu";
}

// What a job planned with its weights can count on: the free memory and whatever the device
// holds now (the same model's weights are reused, another's are released first).
std::int64_t available(const DeviceSlot& d)
{
    return d.freeBytes + d.residentBytes;
}

std::optional<std::int64_t> peakOn(const PlacementNeed& need, const std::string& device)
{
    const auto it = need.peakBytes.find(device);
    if (it == need.peakBytes.end())
        return std::nullopt;
    return it->second;
}

std::int64_t encoderOn(const PlacementNeed& need, const std::string& device)
{
    const auto it = need.textEncoderBytes.find(device);
    return it == need.textEncoderBytes.end() ? 0 : it->second;
}

std::string slotLabel(const DeviceSlot& d)
{
    return d.device + (d.name.empty() ? "" : " (" + d.name + ")");
}

std::string shortfall(const DeviceSlot& d, const PlacementNeed& need)
{
    const auto peak = peakOn(need, d.device);
    if (!peak)
        return slotLabel(d) + ": not planned";
    return slotLabel(d) + ": needs " + gib(*peak) + ", " + gib(available(d)) + " available";
}

std::string queueNote(const DeviceSlot& d)
{
    return std::to_string(d.queued) + (d.queued == 1 ? " job" : " jobs") + " queued";
}

}  // namespace

Result<PlacementChoice> placeJob(const std::vector<DeviceSlot>& devices, const PlacementNeed& need)
{
    const auto fits = [&](const DeviceSlot& d) {
        const auto peak = peakOn(need, d.device);
        return peak && *peak <= available(d);
    };
    if (!need.pinned.empty()) {
        const auto it = std::find_if(devices.begin(), devices.end(), [&](const DeviceSlot& d) { return d.device == need.pinned; });
        if (it == devices.end()) {
            std::string known;
            for (const auto& d : devices)
                known += (known.empty() ? "" : ", ") + d.device;
            return makeError(ErrorCode::NotFound, "the job is pinned to " + need.pinned + ", which this box does not have (" + known + ")");
        }
        if (!fits(*it))
            return makeError(ErrorCode::OutOfMemory,
                "the job is pinned to " + shortfall(*it, need) + "; unpin it, or free memory there (unload its model)");
        return PlacementChoice{it->device, {}, it->device + ": pinned"};
    }

    std::vector<const DeviceSlot*> gpus;
    for (const auto& d : devices)
        if (isGpu(d))
            gpus.push_back(&d);
    if (gpus.empty()) {
        const auto cpu = std::find_if(devices.begin(), devices.end(), [](const DeviceSlot& d) { return d.device == "cpu"; });
        if (cpu == devices.end())
            return makeError(ErrorCode::NotFound, "no device to run the job on");
        if (!fits(*cpu))
            return makeError(ErrorCode::OutOfMemory, "no GPU, and " + shortfall(*cpu, need));
        return PlacementChoice{"cpu", {}, "cpu: the box has no GPU"};
    }

    // The GPU that can hold the job: the model already there, the shortest queue, the most room.
    const DeviceSlot* best = nullptr;
    const auto rank = [&](const DeviceSlot& d) {
        return std::make_tuple(d.residentModel == need.modelKey && !need.modelKey.empty() ? 0 : 1, d.queued, -available(d));
    };
    for (const auto* d : gpus)
        if (fits(*d) && (!best || rank(*d) < rank(*best)))
            best = d;
    if (best) {
        std::string why = best->residentModel == need.modelKey && !need.modelKey.empty() ? "holds the model already" : "";
        why += (why.empty() ? "" : ", ") + queueNote(*best) + ", " + gib(available(*best)) + " available";
        return PlacementChoice{best->device, {}, best->device + ": " + why};
    }

    // Two cards that cannot hold the job alone: the transformer and the rest on one, the text
    // encoder on another that can hold it.
    const DeviceSlot *main = nullptr, *encoder = nullptr;
    for (const auto* a : gpus) {
        const auto peak = peakOn(need, a->device);
        const auto text = encoderOn(need, a->device);
        if (!peak || text <= 0 || *peak - text > available(*a))
            continue;
        for (const auto* b : gpus)
            if (b != a && text <= available(*b)
                && (!main
                    || std::make_tuple(a->queued + b->queued, -available(*a))
                        < std::make_tuple(main->queued + encoder->queued, -available(*main)))) {
                main = a;
                encoder = b;
            }
    }
    if (main)
        return PlacementChoice{main->device, encoder->device,
            main->device + ": the text encoder on " + encoder->device + " (" + gib(encoderOn(need, main->device))
                + "), the transformer and the rest here; neither card holds the job alone"};

    std::string why;
    for (const auto* d : gpus)
        why += (why.empty() ? "" : "; ") + shortfall(*d, need);
    return makeError(
        ErrorCode::OutOfMemory, "no GPU can hold this job (" + why + "); pin it to the CPU, or choose a smaller size or variant");
}

}  // namespace vireo::runtime
