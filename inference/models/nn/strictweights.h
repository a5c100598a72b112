#pragma once

// A model component's weights under its reference's parameter names, handed out with the books
// kept: a weight asked for and absent, one of the wrong shape, or a stored tensor never asked
// for fails finish() with the names, so a partly random model can never run. Weights load in
// their stored representation (quant::loadWeight); dense ones are converted to the compute
// dtype once. Shared by the text encoders and the image models.

#include "inference/models/nn/layers.h"
#include "inference/quant/weightloader.h"
#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace vireo::tensorfile {
struct Checkpoint;
struct ModelSource;
}  // namespace vireo::tensorfile

namespace vireo::nn {

struct StoredTensor {
    const tensorfile::Checkpoint* checkpoint = nullptr;
    std::string name;  // as stored
};

std::string shapeText(const std::vector<std::int64_t>& shape);
std::string listNames(const std::vector<std::string>& names, std::size_t shown = 6);

class StrictWeights {
public:
    // index: canonical name -> stored tensor (quantization siblings left out). model names the
    // model in errors ("Gemma 3"), part what the index covers ("language model").
    StrictWeights(std::map<std::string, StoredTensor> index, quant::LoadOptions options, c10::ScalarType dtype, std::string origin,
        std::string model, std::string part);

    bool has(const std::string& name) const { return m_index.count(name) != 0; }
    std::optional<std::vector<std::int64_t>> storedShape(const std::string& name) const;
    // As stored; shape checked when given (empty: any 2-D or other shape accepted).
    std::optional<quant::QuantizedWeight> raw(const std::string& name, const std::vector<std::int64_t>& shape);
    // The same loaded under other options (a table kept in host memory).
    std::optional<quant::QuantizedWeight> raw(
        const std::string& name, const std::vector<std::int64_t>& shape, const quant::LoadOptions& options);
    // Dense weights in the compute dtype on the device; quantized ones as stored.
    quant::QuantizedWeight weight(const std::string& name, const std::vector<std::int64_t>& shape);
    Linear linear(const std::string& name, std::int64_t out, std::int64_t in, bool bias);
    at::Tensor dense(const std::string& name, const std::vector<std::int64_t>& shape, c10::ScalarType dtype);
    // A problem found by the caller (a fused weight that does not split): reported by finish().
    void fail(std::string message) { m_failed.push_back(std::move(message)); }
    const quant::LoadOptions& options() const { return m_options; }
    c10::ScalarType dtype() const { return m_dtype; }

    Result<void> finish() const;

private:
    std::map<std::string, StoredTensor> m_index;
    quant::LoadOptions m_options;
    c10::ScalarType m_dtype;
    std::string m_origin, m_model, m_part;
    std::set<std::string> m_taken;
    std::vector<std::string> m_missing, m_failed;
};

// A text encoder's language model in a model source: the component that holds it
// ("text_encoder" in a diffusers pipeline, or where the files have no top-level weights), its
// tensors by canonical name (the stored prefix removed; other parts' tensors and quantization
// siblings left out), and the config.json beside it, if there is one.
struct LanguageModelWeights {
    std::string component;
    std::map<std::string, StoredTensor> index;
    std::optional<std::string> configText;
    std::string configPath;  // where that config.json is, for errors
};
struct LanguageModelLayout {
    std::string model;  // "Gemma 3", in errors
    std::vector<std::string> prefixes;  // tried in order: the first with embed_tokens.weight is the language model's
    std::vector<std::string> ignored;  // parts a text encoder does not run (vision tower, projector, LM head)
    // Checks every stored name before the search (a naming scheme this version does not read).
    std::function<std::optional<Error>(const std::map<std::string, StoredTensor>& all)> reject;
    std::string component = "text_encoder";  // the diffusers component that holds it
};
Result<LanguageModelWeights> findLanguageModel(
    const tensorfile::ModelSource& source, const std::string& origin, const LanguageModelLayout& layout);

// The rows of an embedding table, dequantized, without expanding the whole table when the
// representation allows it (dense, FP8 per-tensor / per-row, int8, GGUF).
struct Embedding {
    quant::QuantizedWeight weight;  // dense in the compute dtype, or as stored
    at::Tensor table;  // a full dequantized copy when rows cannot be taken directly

    static bool rowsGatherable(const quant::QuantizedWeight& w);
    // Keeps w, or expands it into table when its rows cannot be gathered (NF4, block-scaled FP8).
    Result<void> set(quant::QuantizedWeight w, c10::ScalarType dtype, c10::Device device);
    at::Tensor lookup(const at::Tensor& ids, c10::ScalarType dtype) const;
    std::int64_t residentBytes() const;
};

}  // namespace vireo::nn
