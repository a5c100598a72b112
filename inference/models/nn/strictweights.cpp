#include "inference/models/nn/strictweights.h"

#include "inference/tensorfile/modelsource.h"

#include <algorithm>
#include <filesystem>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

namespace vireo::nn {

Result<LanguageModelWeights> findLanguageModel(
    const tensorfile::ModelSource& source, const std::string& origin, const LanguageModelLayout& layout)
{
    LanguageModelWeights found;
    if (source.kind != tensorfile::SourceKind::DiffusersPipeline) {
        const bool top =
            std::any_of(source.checkpoints.begin(), source.checkpoints.end(), [](const auto& c) { return c.component.empty(); });
        found.component = top ? "" : layout.component;
    } else {
        found.component = layout.component;
    }
    std::map<std::string, StoredTensor> all;
    for (const auto& cp : source.checkpoints)
        if (cp.component == found.component)
            for (const auto& t : cp.tensors)
                all.emplace(t.name, StoredTensor{&cp, t.name});
    if (all.empty())
        return makeError(ErrorCode::NotFound,
            origin
                + (found.component.empty()
                        ? ": holds no weights"
                        : ": has no " + layout.component + " weights; point at the " + layout.model + " folder or file"));
    if (layout.reject)
        if (auto refused = layout.reject(all))
            return *refused;

    const std::string* prefix = nullptr;
    std::string tried;
    for (const auto& p : layout.prefixes) {
        if (all.count(p + "embed_tokens.weight")) {
            prefix = &p;
            break;
        }
        tried += (tried.empty() ? "" : ", ") + (p.empty() ? std::string("no prefix") : p);
    }
    if (!prefix)
        return makeError(ErrorCode::InvalidFormat,
            origin + ": no " + layout.model
                + " language model here (looked for "
                  "embed_tokens.weight under "
                + tried + ")");
    std::vector<std::string> unknown;
    for (const auto& [name, stored] : all) {
        const std::string& key = name;  // a structured binding is not captured by lambdas before C++20's clang
        if (std::any_of(layout.ignored.begin(), layout.ignored.end(), [&key](const std::string& p) { return key.starts_with(p); }))
            continue;
        if (quant::isQuantizationSibling(name))
            continue;  // read by loadWeight together with its weight
        if (name.starts_with(*prefix))
            found.index.emplace(name.substr(prefix->size()), stored);
        else
            unknown.push_back(name);
    }
    if (!unknown.empty())
        return makeError(ErrorCode::InvalidFormat,
            origin + ": " + std::to_string(unknown.size()) + " tensor(s) belong neither to the " + layout.model + " language model ("
                + (prefix->empty() ? "no prefix" : *prefix + "*") + ") nor to its vision tower: " + listNames(unknown));

    if (auto it = source.configs.find(found.component); it != source.configs.end()) {
        std::error_code ec;
        const auto folder = found.component.empty()
            ? (std::filesystem::is_directory(source.root, ec) ? source.root : source.root.parent_path())
            : source.root / found.component;
        found.configText = it->second;
        found.configPath = (folder / "config.json").string();
    }
    return found;
}

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::string listNames(const std::vector<std::string>& names, std::size_t shown)
{
    std::string s;
    for (std::size_t i = 0; i < names.size() && i < shown; ++i)
        s += (i ? ", " : "") + names[i];
    if (names.size() > shown)
        s += ", ... (" + std::to_string(names.size() - shown) + " more)";
    return s;
}

StrictWeights::StrictWeights(std::map<std::string, StoredTensor> index, quant::LoadOptions options, c10::ScalarType dtype,
    std::string origin, std::string model, std::string part)
    : m_index(std::move(index)), m_options(std::move(options)), m_dtype(dtype), m_origin(std::move(origin)), m_model(std::move(model)),
      m_part(std::move(part))
{
}

std::optional<std::vector<std::int64_t>> StrictWeights::storedShape(const std::string& name) const
{
    const auto it = m_index.find(name);
    if (it == m_index.end())
        return std::nullopt;
    const auto* info = it->second.checkpoint->find(it->second.name);
    if (!info)
        return std::nullopt;
    return info->shape;
}

std::optional<quant::QuantizedWeight> StrictWeights::raw(const std::string& name, const std::vector<std::int64_t>& shape)
{
    return raw(name, shape, m_options);
}

std::optional<quant::QuantizedWeight> StrictWeights::raw(
    const std::string& name, const std::vector<std::int64_t>& shape, const quant::LoadOptions& options)
{
    const auto it = m_index.find(name);
    if (it == m_index.end()) {
        m_missing.push_back(name);
        return std::nullopt;
    }
    m_taken.insert(name);
    auto w = quant::loadWeight(*it->second.checkpoint, it->second.name, options);
    if (!w) {
        m_failed.push_back(it->second.name + ": " + w.error().message);
        return std::nullopt;
    }
    if (!shape.empty() && w->shape() != shape) {
        m_failed.push_back(it->second.name + " is " + shapeText(w->shape()) + ", the config implies " + shapeText(shape));
        return std::nullopt;
    }
    return std::move(*w);
}

quant::QuantizedWeight StrictWeights::weight(const std::string& name, const std::vector<std::int64_t>& shape)
{
    auto w = raw(name, shape);
    if (!w)
        return {};
    if (w->representation() != quant::Representation::Dense)
        return std::move(*w);
    auto dense = w->dequantize(m_dtype);
    if (!dense) {
        m_failed.push_back(name + ": " + dense.error().message);
        return {};
    }
    return quant::QuantizedWeight::dense(dense->to(m_options.device));
}

Linear StrictWeights::linear(const std::string& name, std::int64_t out, std::int64_t in, bool bias)
{
    Linear l;
    l.name = name;
    l.weight = weight(name + ".weight", {out, in});
    if (bias)
        l.bias = dense(name + ".bias", {out}, m_dtype);
    return l;
}

at::Tensor StrictWeights::dense(const std::string& name, const std::vector<std::int64_t>& shape, c10::ScalarType dtype)
{
    auto w = raw(name, shape);
    if (!w)
        return {};
    auto d = w->dequantize(dtype);
    if (!d) {
        m_failed.push_back(name + ": " + d.error().message);
        return {};
    }
    return d->to(m_options.device).contiguous();
}

Result<void> StrictWeights::finish() const
{
    if (!m_failed.empty())
        return makeError(ErrorCode::InvalidFormat,
            m_origin + ": " + std::to_string(m_failed.size()) + " " + m_model
                + " weight(s) could not be loaded: " + listNames(m_failed, 4));
    if (!m_missing.empty())
        return makeError(ErrorCode::InvalidFormat,
            m_origin + ": the " + m_model + " " + m_part + " is incomplete, " + std::to_string(m_missing.size())
                + " weight(s) missing: " + listNames(m_missing) + "; the download may be partial or config.json describes another model");
    std::vector<std::string> unused;
    for (const auto& [name, stored] : m_index)
        if (!m_taken.count(name))
            unused.push_back(stored.name);
    if (!unused.empty())
        return makeError(ErrorCode::InvalidFormat,
            m_origin + ": " + std::to_string(unused.size()) + " " + m_part + " tensor(s) match no " + m_model
                + " parameter of this config: " + listNames(unused) + "; config.json may describe another model");
    return {};
}

bool Embedding::rowsGatherable(const quant::QuantizedWeight& w)
{
    switch (w.representation()) {
    case quant::Representation::Dense:
    case quant::Representation::Int8:
    case quant::Representation::Gguf: return true;
    case quant::Representation::Fp8Scaled: return w.scale().numel() == 1 || (w.scale().dim() == 1 && w.scale().size(0) == w.shape()[0]);
    case quant::Representation::Nf4: return false;
    }
    return false;
}

Result<void> Embedding::set(quant::QuantizedWeight w, c10::ScalarType dtype, c10::Device device)
{
    weight = std::move(w);
    table = at::Tensor();
    if (weight.defined() && !rowsGatherable(weight)) {
        auto t = weight.dequantize(dtype);
        if (!t)
            return t.error();
        table = t->to(device);
        weight = quant::QuantizedWeight();
    }
    return {};
}

at::Tensor Embedding::lookup(const at::Tensor& ids, c10::ScalarType dtype) const
{
    if (table.defined())
        return at::embedding(table, ids);
    if (weight.representation() == quant::Representation::Dense)
        return at::embedding(weight.data(), ids);
    const auto flat = ids.reshape({-1}).to(weight.device());
    const auto rows = weight.shape()[0];
    Result<quant::QuantizedWeight> picked = quant::QuantizedWeight();
    switch (weight.representation()) {
    case quant::Representation::Fp8Scaled: {
        const auto& data = weight.data();
        const auto bytes = data.view(at::kByte).index_select(0, flat).view(data.scalar_type());
        const auto scale = weight.scale().numel() == 1 ? weight.scale() : weight.scale().index_select(0, flat);
        picked = quant::QuantizedWeight::fp8(bytes, scale);
        break;
    }
    case quant::Representation::Int8:
        picked = quant::QuantizedWeight::int8(weight.data().index_select(0, flat), weight.scale().index_select(0, flat));
        break;
    case quant::Representation::Gguf: {
        const auto& blocks = weight.data();
        TORCH_CHECK(blocks.numel() % rows == 0, "GGUF embedding: ", blocks.numel(), " bytes do not split into ", rows, " rows");
        const auto pickedBlocks = blocks.reshape({rows, -1}).index_select(0, flat).reshape({-1});
        picked = quant::QuantizedWeight::gguf(pickedBlocks, weight.ggmlType(), {flat.numel(), weight.shape()[1]});
        break;
    }
    default: TORCH_CHECK(false, "embedding rows cannot be taken from a ", weight.describe(), " weight");
    }
    if (!picked)
        throw ForwardError("embed_tokens: " + picked.error().message);
    auto values = picked->dequantize(dtype);
    if (!values)
        throw ForwardError("embed_tokens: " + values.error().message);
    auto sizes = ids.sizes().vec();
    sizes.push_back(weight.shape()[1]);
    return values->view(sizes);
}

std::int64_t Embedding::residentBytes() const
{
    return table.defined() ? table.numel() * table.element_size() : weight.residentBytes();
}

}  // namespace vireo::nn
