#pragma once

// Where a generation job runs when the box has more than one GPU: a pure function of what each
// device has free, what it holds, how much work waits for it and what the job's memory plan
// needs there, so the rules are tested on tables of devices without any GPU.

#include "base/capability.h"
#include "inference/util/result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vireo::runtime {

// One device as the scheduler sees it now.
struct DeviceSlot {
    std::string device;  // "cuda:0", "cuda:1", "cpu"
    std::string name;  // "NVIDIA GeForce RTX 4090"
    std::int64_t totalBytes = 0, freeBytes = 0;
    // The model it holds (its key; empty: none) and what that holds: freed for another model,
    // reused by the same one, so either way available to a job planned with its weights.
    std::string residentModel;
    std::int64_t residentBytes = 0;
    int queued = 0;  // jobs waiting or running on it
    // What the device can do, for planning there; empty: measured on this machine when planned
    // (tables of devices in tests name real GPUs instead).
    std::optional<capability::DeviceCaps> caps;
};

// What a job needs: its model, the device it is pinned to ("" for any GPU), and its memory
// plan's peak on each device it was planned for (a device without an entry cannot run it).
struct PlacementNeed {
    std::string modelKey;
    std::string pinned;
    std::map<std::string, std::int64_t> peakBytes;
    // The text encoder's share of each peak: on two cards that cannot hold the job alone, the
    // encoder may run on the other one (it runs once per prompt, before the transformer).
    std::map<std::string, std::int64_t> textEncoderBytes;
};

struct PlacementChoice {
    std::string device;
    std::string textEncoderDevice;  // empty: the same device
    std::string reason;  // why this device, for the plan and the log
};

// The device for a job: the pinned one when it can hold the job (refused with the shortfall
// when it cannot); else, among the GPUs that can, the one already holding the model, then the
// shortest queue, then the most memory available, then the lowest index; else a pair of GPUs
// with the text encoder on the second; else refused, naming each GPU's shortfall. The CPU is
// chosen only when pinned or when the box has no GPU.
Result<PlacementChoice> placeJob(const std::vector<DeviceSlot>& devices, const PlacementNeed& need);

}  // namespace vireo::runtime
