// LTX-2 sampling schedules against diffusers 0.42.1 (tests/fixtures/make_schedule_fixtures.py).
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/models/ltx2/ltx2schedule.h"

#include <nlohmann/json.hpp>

#include <cmath>

using namespace vireo;

namespace {

nlohmann::json reference()
{
    return nlohmann::json::parse(test::readText(test::fixturesDir() / "schedules.json"));
}

// The reference keeps sigmas and timesteps as float32 tensors.
void compare(const sched::FlowSchedule& ours, const nlohmann::json& ref, const std::string& what, double& worst)
{
    const auto sigmas = ref["sigmas"].get<std::vector<double>>();
    const auto timesteps = ref["timesteps"].get<std::vector<double>>();
    VT_COMPARE(ours.sigmas.size(), sigmas.size());
    for (std::size_t i = 0; i < sigmas.size(); ++i) {
        worst = std::max(worst, std::abs(ours.sigmas[i] - sigmas[i]));
        VT_CHECK_MSG(static_cast<float>(ours.sigmas[i]) == static_cast<float>(sigmas[i]),
            what << " sigma " << i << ": " << ours.sigmas[i] << " vs " << sigmas[i]);
    }
    const auto t = ours.timesteps();
    VT_COMPARE(t.size(), timesteps.size());
    for (std::size_t i = 0; i < t.size(); ++i)
        VT_CHECK_MSG(static_cast<float>(static_cast<float>(ours.sigmas[i]) * 1000.0f) == static_cast<float>(timesteps[i]),
            what << " timestep " << i);
}

}  // namespace

VT_TEST(devScheduleMatchesDiffusers)
{
    double worst = 0;
    int cases = 0;
    for (const auto& ref : reference()) {
        if (ref["kind"] != "dev")
            continue;
        sched::Ltx2DevScheduleOptions o;
        o.steps = ref["steps"].get<int>();
        o.tokens = ref["tokens"].get<std::int64_t>();
        VT_CHECK(std::abs(sched::ltx2Shift(o) - ref["mu"].get<double>()) < 1e-12);
        auto ours = sched::ltx2DevSchedule(o);
        VT_CHECK(ours.ok());
        compare(*ours, ref, "dev N=" + std::to_string(o.steps) + " tokens=" + std::to_string(o.tokens), worst);
        ++cases;
    }
    VT_COMPARE(cases, 15);
    std::printf("   dev schedules: %d cases, max abs sigma error %.3g (float32-exact)\n", cases, worst);
}

VT_TEST(distilledSigmasArePassedVerbatim)
{
    double worst = 0;
    for (const auto& ref : reference()) {
        if (ref["kind"] == "distilled")
            compare(sched::ltx2DistilledSchedule(), ref, "distilled", worst);
        else if (ref["kind"] == "stage2")
            compare(sched::ltx2Stage2DistilledSchedule(), ref, "stage 2", worst);
    }
    // The distilled list is never shifted: the default 8-step dev schedule differs from it.
    const auto dev = sched::ltx2DevSchedule({8});
    VT_CHECK(dev.ok() && dev->sigmas != sched::ltx2DistilledSchedule().sigmas);
    VT_COMPARE(sched::ltx2DistilledSchedule().timesteps().back(), 421.875);
}

VT_TEST(degenerateAndBadRequests)
{
    const auto one = sched::ltx2DevSchedule({1});
    VT_CHECK(one.ok() && one->sigmas == (std::vector<double>{1.0, 0.0}));
    VT_CHECK(!sched::ltx2DevSchedule({0}).ok());
    sched::Ltx2DevScheduleOptions bad;
    bad.terminal = 1.0;
    VT_CHECK(!sched::ltx2DevSchedule(bad).ok());
}

VT_MAIN("TestSchedule")
