#pragma once

// The seam between the facade and the model families (LTX-2, Ideogram-4, the next one). A
// family recognizes its checkpoints from their layout, reads what they say about themselves,
// plans their memory, loads every component up front and generates. The facade
// (facade/generator.cpp) only dispatches: it resolves the device and dtype once, asks the
// registry which family a model belongs to, and turns exceptions into errors. Adding a family
// means its own folder under models/, one line in families/registry.cpp, and the catalog.
//
// Internal to inference/: core/ and ui/ see only the facade's plain types.

#include "base/capability.h"
#include "inference/facade/generator.h"
#include "inference/util/result.h"

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <memory>
#include <stop_token>
#include <string_view>
#include <vector>

namespace vireo::families {

// Where a plan or a load is for: the device (which a what-if plan never touches), what the
// capability gate knows of it, and the compute dtype it chose.
struct Target {
    c10::Device device = c10::Device(c10::kCPU);
    capability::DeviceCaps caps;
    c10::ScalarType dtype = c10::kFloat;
};

// A loaded model: every component the memory plan keeps resident is in memory.
class LoadedModel {
public:
    virtual ~LoadedModel() = default;
    // A family makes one kind: the other call refuses with an error that names the right one.
    virtual Result<facade::VideoResult> generate(
        const facade::GenerateRequest& request, const facade::ProgressFn& progress, std::stop_token stop);
    virtual Result<facade::ImageResult> generateImage(
        const facade::GenerateRequest& request, const facade::ProgressFn& progress, std::stop_token stop);
    virtual std::string version() const = 0;
    virtual std::vector<std::filesystem::path> files() const = 0;
    virtual std::map<std::string, std::int64_t> residentBytes() const = 0;
    virtual std::map<std::string, int> matmulPaths() const { return {}; }
    virtual Result<std::vector<facade::LoraOutcome>> applyLoras(const std::vector<facade::LoraRequest>& loras);
};

class ModelFamily {
public:
    virtual ~ModelFamily() = default;
    virtual facade::FamilyRules rules() const = 0;
    // From the folder layout alone (no weight byte is read).
    virtual bool recognizes(const std::vector<std::filesystem::path>& modelPaths) const = 0;
    // Headers and metadata only, no device.
    virtual Result<facade::ModelFacts> readFacts(const facade::LoadPlan& plan) const = 0;
    virtual Result<facade::MemoryPlan> planMemory(const facade::LoadPlan& plan, const Target& target, const facade::SizeRequest& size,
        const std::optional<facade::MemoryBudget>& budget) const = 0;
    // Loads every component the plan keeps resident; a failed or cancelled load frees what it took.
    virtual Result<std::unique_ptr<LoadedModel>> load(const facade::LoadPlan& plan, const facade::MemoryPlan& memory, const Target& target,
        const facade::ProgressFn& progress, std::stop_token stop) const = 0;
    // The stage path a request would take (one stage unless the family has more).
    virtual Result<facade::StagePlan> planStages(const facade::LoadPlan& plan, const facade::GenerateRequest& request) const;
    // A LoRA matched against the model from headers; refused where the family takes none.
    virtual Result<std::string> inspectLora(const facade::LoadPlan& plan, const std::filesystem::path& lora, bool asJson) const;
};

// The registered families, asked in order: the first that recognizes a model takes it.
const std::vector<const ModelFamily*>& registered();
const ModelFamily& familyFor(const std::vector<std::filesystem::path>& modelPaths);

}  // namespace vireo::families
