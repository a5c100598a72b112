#include "inference/util/profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <map>

namespace vireo::profile {

namespace {
namespace ap = torch::autograd::profiler;
namespace pi = torch::profiler::impl;
} // namespace

bool startKernelProfile()
{
    try {
        const pi::ProfilerConfig config(pi::ProfilerState::KINETO);
        const std::set<pi::ActivityType> activities{pi::ActivityType::CPU, pi::ActivityType::CUDA};
        ap::prepareProfiler(config, activities);
        ap::enableProfiler(config, activities);
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

std::vector<KernelTime> stopKernelProfile()
{
    std::map<std::string, KernelTime> byName;
    try {
        const auto result = ap::disableProfiler();
        for (const auto& e : result->events()) {
            if (e.deviceType() != c10::DeviceType::CUDA)
                continue;
            auto& k = byName[e.name()];
            k.name = e.name();
            k.milliseconds += static_cast<double>(e.durationNs()) / 1e6;
            ++k.calls;
        }
    } catch (const std::exception&) {
        return {};
    }
    std::vector<KernelTime> out;
    for (auto& [_, k] : byName)
        out.push_back(std::move(k));
    std::sort(out.begin(), out.end(), [](const KernelTime& a, const KernelTime& b) { return a.milliseconds > b.milliseconds; });
    return out;
}

} // namespace vireo::profile
