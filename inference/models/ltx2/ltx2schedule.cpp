#include "inference/models/ltx2/ltx2schedule.h"

#include <cmath>

namespace vireo::sched {

std::vector<double> FlowSchedule::timesteps() const
{
    std::vector<double> t;
    for (std::size_t i = 0; i + 1 < sigmas.size(); ++i)
        t.push_back(sigmas[i] * 1000.0);
    return t;
}

FlowSchedule ltx2DistilledSchedule()
{
    return {{1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0}};
}

FlowSchedule ltx2Stage2DistilledSchedule()
{
    return {{0.909375, 0.725, 0.421875, 0.0}};
}

double ltx2Shift(const Ltx2DevScheduleOptions& o)
{
    const double m = (o.maxShift - o.baseShift) / static_cast<double>(o.maxSeqLen - o.baseSeqLen);
    const double b = o.baseShift - m * static_cast<double>(o.baseSeqLen);
    return static_cast<double>(o.tokens) * m + b;
}

Result<FlowSchedule> ltx2DevSchedule(const Ltx2DevScheduleOptions& o)
{
    if (o.steps < 1 || o.steps > 10000)
        return makeError(ErrorCode::InvalidArgument, "a schedule needs 1 to 10000 steps, got " + std::to_string(o.steps));
    if (!(o.terminal > 0.0 && o.terminal < 1.0))
        return makeError(ErrorCode::InvalidArgument, "the terminal sigma must lie in (0, 1)");
    // One step has nothing to stretch (the references divide by zero there): 1 -> 0.
    if (o.steps == 1)
        return FlowSchedule{{1.0, 0.0}};
    const double mu = ltx2Shift(o);
    // float32 arithmetic in the references' order (diffusers casts the sigmas to float32
    // before shifting), so the schedule is bit-identical to what the model was run with.
    const float expMu = static_cast<float>(std::exp(mu));
    std::vector<float> shifted(o.steps);
    for (int i = 0; i < o.steps; ++i) {
        const float t = static_cast<float>(1.0 + (1.0 / o.steps - 1.0) * i / (o.steps - 1));
        shifted[i] = expMu / (expMu + (1.0f / t - 1.0f));
    }
    const float scale = (1.0f - shifted.back()) / static_cast<float>(1.0 - o.terminal);
    std::vector<double> sigmas;
    for (float s : shifted)
        sigmas.push_back(static_cast<double>(1.0f - (1.0f - s) / scale));
    sigmas.push_back(0.0);
    return FlowSchedule{std::move(sigmas)};
}

}  // namespace vireo::sched
