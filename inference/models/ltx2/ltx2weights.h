#pragma once

// Every LTX-2 checkpoint layout users have, indexed under one naming scheme (diffusers'
// module names, the scheme of the reference we test against): Lightricks single files
// (`model.diffusion_model.*`, `text_embedding_projection.*`), diffusers folders
// (`transformer/`, `connectors/`), ComfyUI GGUF (`ltxv`, names without the prefix) and
// scaled-FP8 files (F8 weights with `weight_scale` / `input_scale` siblings).

#include "inference/models/nn/layers.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/util/result.h"

#include <c10/core/ScalarType.h>

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace vireo::ltx2 {

enum class Part { Transformer, Connectors };

struct SourceTensor {
    const tensorfile::Checkpoint* checkpoint = nullptr;
    std::string name;          // as stored
    const tensorfile::TensorInfo* info = nullptr;
};

// Canonical (diffusers) name of an ltx-core DiT key with `model.diffusion_model.` removed.
std::string ltxCoreToDiffusersTransformer(const std::string& name);
// Canonical name of an ltx-core connector or text-projection key (prefix removed).
std::string ltxCoreToDiffusersConnector(const std::string& name);

class Ltx2Weights {
public:
    // Each path may be a file, a folder, a diffusers pipeline or a Hub cache folder; a GGUF
    // transformer is typically given together with its text-projection file.
    static Result<Ltx2Weights> open(const std::vector<std::filesystem::path>& paths);

    const SourceTensor* find(Part part, const std::string& name) const;
    std::optional<std::vector<std::int64_t>> shape(Part part, const std::string& name) const;
    const std::map<std::string, SourceTensor>& tensors(Part part) const;
    // Keys that belong to no LTX-2 component: they fail every load.
    const std::vector<std::string>& unknown() const { return m_unknown; }

    std::optional<std::string> diffusersConfig(Part part) const;
    std::optional<std::string> ltxCoreConfig() const;
    std::string describeFiles() const;

private:
    std::shared_ptr<std::vector<tensorfile::ModelSource>> m_sources;
    std::map<std::string, SourceTensor> m_parts[2];
    std::vector<std::string> m_unknown;
};

// Hands out the weights of one part and keeps the books: a name asked for that is absent,
// or a stored tensor never asked for, fails finish() with the list, so a partly random
// model can never run.
class WeightTaker {
public:
    WeightTaker(const Ltx2Weights& weights, Part part, c10::Device device, c10::ScalarType dtype);

    bool has(const std::string& name) const;
    nn::Linear linear(const std::string& name, bool bias);
    // A dense tensor in the compute dtype on the target device.
    at::Tensor tensor(const std::string& name);
    std::optional<at::Tensor> optionalTensor(const std::string& name);

    Result<void> finish() const;

private:
    Result<quant::QuantizedWeight> load(const std::string& name);

    const Ltx2Weights& m_weights;
    Part m_part;
    quant::LoadOptions m_options;
    c10::ScalarType m_dtype;
    std::set<std::string> m_taken;
    std::vector<std::string> m_missing;
    std::vector<std::string> m_failed;
};

} // namespace vireo::ltx2
