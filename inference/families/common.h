#pragma once

// What every family's planning, loading and generating repeats: device and dtype parsing, the
// capability gate's paths into a plan, small bounded JSON files of a model folder, previews.

#include "base/capability.h"
#include "inference/facade/generator.h"
#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::families {

std::string lower(std::string_view text);
Result<c10::Device> parseDevice(const std::string& name);
// The compute dtype for a device as the capability gate chooses it (bf16 on Ampere and newer,
// f16 on Turing, f32 on the CPU unless asked otherwise), or why it cannot run there.
Result<c10::ScalarType> resolveDtype(const std::string& name, const capability::DeviceCaps& caps);
std::string dtypeName(c10::ScalarType t);
std::string describeDevice(const capability::DeviceCaps& caps);
std::int64_t hostAvailableBytes();

// The capability gate's plan for these components on this device, into the memory plan.
void planPathsInto(facade::MemoryPlan& m, const capability::DeviceCaps& caps, const std::string& dtypeRequest,
    const std::vector<capability::ComponentInput>& components);

// A small JSON file of a model folder, bounded; nullopt when absent, unreadable or not an object.
std::optional<nlohmann::json> smallJson(const std::filesystem::path& file);
// Its "_class_name" (diffusers' model_index.json and component configs), or empty.
std::string className(const std::filesystem::path& file);

bool previewDue(const facade::GenerateRequest& r, std::int64_t done, std::int64_t total);
// Latent frames [F, h, w, C] -> small RGB frames through the fitted map, area-averaged down to
// at most maxWidth wide (0: as they are).
std::shared_ptr<const facade::Preview> makePreview(const at::Tensor& projection, const at::Tensor& frames, std::int64_t step, int maxWidth);
// The pipeline's preview map when this request wants previews (undefined otherwise, or when it
// cannot be fitted: previews are a convenience, never a reason to fail).
template <class Pipeline>
at::Tensor previewProjectionFor(Pipeline& pipeline, const facade::GenerateRequest& r, const facade::ProgressFn& progress)
{
    if (r.previewEvery <= 0 || !progress)
        return {};
    auto p = pipeline.previewProjection();
    return p ? *p : at::Tensor();
}

}  // namespace vireo::families
