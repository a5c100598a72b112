#include "inference/facade/generator.h"

#include "inference/families/common.h"
#include "inference/families/family.h"
#include "inference/models/nn/layers.h"
#include "inference/util/device.h"
#include "inference/util/heap.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>

namespace vireo::facade {

using families::parseDevice;

// What the facade adds to the families: the device and dtype resolved once, the family found
// by the registry, process settings kept and put back, and every exception turned into an
// error at this boundary.

ModelKind detectModelKind(const std::vector<std::filesystem::path>& paths)
{
    return families::familyFor(paths).rules().kind;
}

FamilyRules familyRules(const std::vector<std::filesystem::path>& modelPaths)
{
    return families::familyFor(modelPaths).rules();
}

std::vector<FamilyRules> registeredFamilyRules()
{
    std::vector<FamilyRules> out;
    for (const auto* f : families::registered())
        out.push_back(f->rules());
    return out;
}

std::optional<FamilyRules> familyRulesById(std::string_view id)
{
    // A catalog pipeline names its schedule after the family: "ltx2-dev".
    const auto family = id.substr(0, id.find('-'));
    for (auto& rules : registeredFamilyRules())
        if (rules.family == family)
            return std::move(rules);
    return std::nullopt;
}

std::int64_t planningFrames(const GenerateRequest& request)
{
    if (request.frames != 0)
        return request.frames;
    const auto longest = static_cast<std::int64_t>(std::nearbyint(20.0 * std::clamp(request.fps, 0.5, 240.0)));
    return std::max<std::int64_t>(1, (longest - 1) / 8 * 8 + 1);
}

std::int64_t framesForSound(double seconds, double fps, bool* cut)
{
    fps = std::clamp(fps, 0.5, 240.0);
    const auto most = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor((20.0 * fps - 1) / 8)));
    // The grid point at or after the sound's end (a hair of tolerance for a length that is one).
    const double wanted = std::isfinite(seconds) ? std::max(0.0, seconds) : 0.0;
    const auto k = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(std::min(1e9, (wanted * fps - 1) / 8 - 1e-9))));
    if (cut)
        *cut = k > most;
    return std::min(k, most) * 8 + 1;
}

SizeRequest sizeRequestOf(const GenerateRequest& request, bool image)
{
    return {request.width, request.height, image ? 1 : planningFrames(request), !image && request.guidance > 1.0, request.knobs,
        image ? 0 : static_cast<int>(request.references.size()), !image && request.enhancePrompt};
}

Result<StagePlan> planStages(const LoadPlan& plan, const GenerateRequest& request)
{
    try {
        return families::familyFor(plan.modelPaths).planStages(plan, request);
    } catch (const std::exception& e) {
        return errorFromException(e, "planning the stages");
    }
}

// ---------------------------------------------------------------------------------------------

Result<ModelFacts> Generator::readModelFacts(const LoadPlan& plan)
{
    try {
        return families::familyFor(plan.modelPaths).readFacts(plan);
    } catch (const std::exception& e) {
        return errorFromException(e, "reading the model's headers");
    }
}

Result<MemoryPlan> Generator::planMemory(const LoadPlan& plan, const SizeRequest& size, const std::optional<MemoryBudget>& budgetIn)
{
    // The device planned for: this machine's, or the budget's what-if device (which need not be
    // here, so nothing below touches it).
    families::Target target;
    if (budgetIn && budgetIn->deviceCaps) {
        target.caps = *budgetIn->deviceCaps;
        if (target.caps.cuda)
            target.device = c10::Device(c10::kCUDA, 0);
    } else {
        auto parsed = parseDevice(plan.device);
        if (!parsed)
            return parsed.error();
        target.device = *parsed;
        target.caps = deviceCaps(target.device);
    }
    if (const auto refusal = capability::deviceRefusal(target.caps))
        return makeError(ErrorCode::Unsupported, *refusal);
    auto dtype = families::resolveDtype(plan.dtype, target.caps);
    if (!dtype)
        return dtype.error();
    target.dtype = *dtype;
    if (size.width <= 0 || size.height <= 0 || size.frames <= 0)
        return makeError(ErrorCode::InvalidArgument, "the size to plan for must be positive");
    try {
        const auto& family = families::familyFor(plan.modelPaths);
        auto m = family.planMemory(plan, target, size, budgetIn);
        if (m)
            m->kind = family.rules().kind;
        return m;
    } catch (const std::exception& e) {
        return errorFromException(e, "planning memory");
    }
}

// ---------------------------------------------------------------------------------------------

struct Generator::Impl {
    LoadPlan plan;
    MemoryPlan memory;
    std::unique_ptr<families::LoadedModel> model;
    ModelKind kind = ModelKind::Video;
    ProcessSettings before, wanted;

    ~Impl()
    {
        model.reset();
        heap::releaseFreeMemory();
        releaseCachedDeviceMemory();
        before.apply();
    }
};

Generator::Generator(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Generator::~Generator() = default;

Result<std::unique_ptr<Generator>> Generator::load(
    const LoadPlan& plan, const MemoryPlan& memory, const ProgressFn& progress, std::stop_token stop)
{
    families::Target target;
    auto device = parseDevice(plan.device);
    if (!device)
        return device.error();
    target.device = *device;
    target.caps = deviceCaps(target.device);
    auto dtype = families::resolveDtype(plan.dtype, target.caps);
    if (!dtype)
        return dtype.error();
    target.dtype = *dtype;
    if (!nn::parseAttentionKernel(plan.attentionKernel))
        return makeError(ErrorCode::InvalidArgument,
            "'" + plan.attentionKernel + "' is not an attention kernel (default, flash3, flash, cudnn, efficient)");
    auto impl = std::make_unique<Impl>();
    impl->plan = plan;
    impl->memory = memory;
    impl->before = ProcessSettings::capture();
    ProcessSettings wanted = impl->before;
    wanted.attentionKernel = plan.attentionKernel;
    wanted.fp8FastAccumulation = plan.fp8FastAccumulation;
    if (plan.cpuThreads > 0)
        wanted.threads = plan.cpuThreads;
    wanted.apply();
    impl->wanted = wanted;
    try {
        c10::InferenceMode inference;
        const auto& family = families::familyFor(plan.modelPaths);
        impl->kind = family.rules().kind;
        auto loaded = family.load(plan, memory, target, progress, stop);
        if (!loaded)
            return loaded.error();  // impl's destructor restores the settings
        impl->model = std::move(*loaded);
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
    } catch (const std::exception& e) {
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return errorFromException(e, "loading the model");
    }
    return std::unique_ptr<Generator>(new Generator(std::move(impl)));
}

ModelKind Generator::kind() const
{
    return m_impl->kind;
}

Result<ImageResult> Generator::generateImage(const GenerateRequest& r, const ProgressFn& progress, std::stop_token stop)
{
    try {
        return m_impl->model->generateImage(r, progress, stop);
    } catch (const std::exception& e) {
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return errorFromException(e, "generating");
    }
}

Result<VideoResult> Generator::generate(const GenerateRequest& r, const ProgressFn& progress, std::stop_token stop)
{
    try {
        return m_impl->model->generate(r, progress, stop);
    } catch (const std::exception& e) {
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return errorFromException(e, "generating");
    }
}

Result<std::string> Generator::inspectLora(const LoadPlan& plan, const std::filesystem::path& lora, bool asJson)
{
    try {
        return families::familyFor(plan.modelPaths).inspectLora(plan, lora, asJson);
    } catch (const std::exception& e) {
        return errorFromException(e, lora.string());
    }
}

Result<std::vector<LoraOutcome>> Generator::applyLoras(const std::vector<LoraRequest>& loras)
{
    try {
        c10::InferenceMode inference;
        return m_impl->model->applyLoras(loras);
    } catch (const std::exception& e) {
        return errorFromException(e, "applying LoRAs");
    }
}

void Generator::reapplyProcessSettings(const ProcessSettings& restoreOnDestruction)
{
    m_impl->before = restoreOnDestruction;
    m_impl->wanted.apply();
}

const MemoryPlan& Generator::memoryPlan() const
{
    return m_impl->memory;
}
std::string Generator::version() const
{
    return m_impl->model->version();
}
std::vector<std::filesystem::path> Generator::files() const
{
    return m_impl->model->files();
}
std::map<std::string, std::int64_t> Generator::residentBytes() const
{
    return m_impl->model->residentBytes();
}
std::map<std::string, int> Generator::matmulPaths() const
{
    return m_impl->model->matmulPaths();
}

}  // namespace vireo::facade
