#include "inference/util/profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <map>

namespace vireo::profile {

namespace {
namespace ap = torch::autograd::profiler;
namespace pi = torch::profiler::impl;
}  // namespace

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

Profile stopKernelProfile()
{
    std::map<std::string, KernelTime> kernels, ops;
    try {
        const auto result = ap::disableProfiler();
        for (const auto& e : result->events()) {
            auto& table = e.deviceType() == c10::DeviceType::CUDA ? kernels : ops;
            if (&table == &ops && e.name().rfind("aten::", 0) != 0)
                continue;
            auto& k = table[e.name()];
            k.name = e.name();
            k.milliseconds += static_cast<double>(e.durationNs()) / 1e6;
            ++k.calls;
        }
    } catch (const std::exception&) {
        return {};
    }
    Profile p;
    for (auto& [_, k] : kernels)
        p.kernels.push_back(std::move(k));
    for (auto& [_, k] : ops)
        p.ops.push_back(std::move(k));
    std::sort(p.kernels.begin(), p.kernels.end(), [](const KernelTime& a, const KernelTime& b) { return a.milliseconds > b.milliseconds; });
    std::sort(p.ops.begin(), p.ops.end(), [](const KernelTime& a, const KernelTime& b) { return a.calls > b.calls; });
    return p;
}

}  // namespace vireo::profile
