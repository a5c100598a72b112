#pragma once

// LoRA files as users meet them for LTX-2 / LTX-2.3, read from headers, matched against a
// model's layers before anything is applied, and turned into deltas the transformer applies
// at run time (nn::LoraAdapter). Layouts: diffusers / PEFT (`transformer.<module>.lora_A/B`,
// alpha from `lora_adapter_metadata`), Lightricks / ComfyUI native
// (`diffusion_model.<ltx-core module>.lora_A/B`, no alpha), kohya (`lora_unet_<module with _>`,
// `lora_down/up`, `.alpha`), and the other spellings ComfyUI accepts. What is not a plain
// LoRA (LoHa, LoKr, DoRA, full-weight patches, convolutions, text-encoder modules) is refused
// with the number of keys, never dropped in silence.

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace vireo::nn {
struct LoraDelta;
}

namespace vireo::lora {

// A layer a LoRA can aim at: its canonical (diffusers) name, the other names checkpoints of
// the family give it (ltx-core's), and its shape.
struct Target {
    std::string name;
    std::vector<std::string> aliases;
    std::int64_t in = 0, out = 0;
};

enum class ModuleState { Matched, NoSuchLayer, ShapeMismatch };

struct ModuleReport {
    std::string key;  // the module as the file names it
    std::string target;  // the canonical layer it was matched to (or would be)
    std::int64_t rank = 0, in = 0, out = 0;
    std::optional<double> alpha;
    double scale = 1.0;  // alpha / rank, or the layout's default
    ModuleState state = ModuleState::Matched;
    std::string reason;  // for an unmatched module
};

// Keys that are not a plain LoRA this version applies, grouped by reason.
struct Refusal {
    std::string reason;
    std::int64_t keys = 0;
    std::vector<std::string> examples;  // at most 5
};

struct MatchReport {
    std::filesystem::path file;
    std::string layout;  // "peft", "comfy", "kohya", "mixed", "none"
    std::int64_t tensorBytes = 0;
    std::int64_t tensors = 0;
    std::vector<ModuleReport> modules;
    std::vector<Refusal> refused;
    std::string trainedFor;  // what the shapes say about the model it was trained on

    int matched() const;
    int unmatched() const;
    std::int64_t refusedKeys() const;
    // "applied", "partial: 3 of 120 modules unmatched, 8 keys refused", "refused: ..."
    std::string status() const;
    bool usable() const { return matched() > 0; }
    std::string toJson() const;
    std::string toText() const;
};

// The LoRA modules of a file (headers only) matched against the layers given.
Result<MatchReport> inspect(const std::filesystem::path& file, const std::vector<Target>& targets);

// The matched modules of a report as deltas in dtype on device, strength and scale folded into
// up; a module whose tensors cannot be read fails the whole LoRA.
Result<std::vector<nn::LoraDelta>> loadDeltas(const MatchReport& report, double strength, c10::ScalarType dtype, c10::Device device);

// A LoRA a generation asks for, and what became of it.
struct Request {
    std::filesystem::path path;
    double strength = 1.0;
    bool operator==(const Request&) const = default;
};
struct Outcome {
    std::filesystem::path path;
    double strength = 1.0;
    std::string status;  // "applied", "partial: ...", "refused: ..."
    int matched = 0, unmatched = 0;
    std::int64_t refusedKeys = 0;
    std::int64_t deviceBytes = 0;
    std::string report;  // MatchReport::toText
};

// Every requested LoRA inspected against the targets and loaded: the deltas of those that can
// be applied appended to *deltas, one outcome each (a file that cannot be read is refused in
// its outcome, never fails the others).
std::vector<Outcome> prepare(const std::vector<Request>& requests, const std::vector<Target>& targets, c10::ScalarType dtype,
    c10::Device device, std::vector<nn::LoraDelta>* deltas);

// "lora_unet_transformer_blocks_0_attn1_to_q" style names as they collapse ('.' -> '_').
std::string underscored(const std::string& name);

}  // namespace vireo::lora
