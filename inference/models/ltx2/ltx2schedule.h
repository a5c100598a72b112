#pragma once

#include "inference/util/result.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace vireo::sched {

// A flow-matching schedule: sigmas from 1 down to 0 (N steps, N + 1 values, the last 0).
// The DiT is fed sigma x 1000 as its timestep.
struct FlowSchedule {
    std::vector<double> sigmas;
    int steps() const { return static_cast<int>(sigmas.size()) - 1; }
    std::vector<double> timesteps() const;  // sigma x 1000 for each step (the trailing 0 excluded)
};

// The distilled LTX-2 / LTX-2.3 schedules, passed verbatim: the distilled model was trained
// on exactly these values (ltx-pipelines utils/constants.py), so they are never re-derived
// or re-shifted.
FlowSchedule ltx2DistilledSchedule();  // 8 steps
FlowSchedule ltx2Stage2DistilledSchedule();  // 3 steps, after the spatial upsampler

struct Ltx2DevScheduleOptions {
    int steps = 30;
    // Latent tokens that set the shift; Lightricks' pipelines use 4096 (mu = 2.05) whatever
    // the resolution, so that is the default.
    std::int64_t tokens = 4096;
    double baseShift = 0.95;
    double maxShift = 2.05;
    std::int64_t baseSeqLen = 1024;
    std::int64_t maxSeqLen = 4096;
    double terminal = 0.1;  // the last non-zero sigma after the stretch
};

// The dev-model schedule (ltx-core LTX2Scheduler; diffusers FlowMatchEulerDiscreteScheduler
// with exponential dynamic shifting and shift_terminal): linspace(1, 1/N, N), exponential
// time shift by mu, stretch so the last sigma is `terminal`, then 0.
Result<FlowSchedule> ltx2DevSchedule(const Ltx2DevScheduleOptions& options);

// mu for a token count (linear between (baseSeqLen, baseShift) and (maxSeqLen, maxShift)).
double ltx2Shift(const Ltx2DevScheduleOptions& options);

}  // namespace vireo::sched
