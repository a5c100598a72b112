#include "inference/quant/weightloader.h"

#include "inference/tensorfile/modelsource.h"
#include "inference/tensorfile/tensorview.h"

#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

namespace vireo::quant {

namespace {

using tensorfile::Checkpoint;
using tensorfile::DType;
using tensorfile::TensorInfo;

bool endsWith(const std::string& s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<at::Tensor> view(const Checkpoint& cp, const std::string& name)
{
    const auto* info = cp.find(name);
    if (!info)
        return makeError(ErrorCode::NotFound, cp.path.string() + ": tensor '" + name + "' not found");
    auto v = tensorfile::viewTensor(cp, *info);
    if (v)
        return v;
    // A misaligned tensor cannot be viewed; read a copy instead.
    return tensorfile::readTensor(cp, *info);
}

Error loadError(const Checkpoint& cp, const std::string& name, const std::string& what)
{
    return makeError(ErrorCode::InvalidFormat, cp.path.string() + ": tensor '" + name + "': " + what);
}

Result<QuantizedWeight> loadNf4(const Checkpoint& cp, const std::string& name, const std::string& stateName)
{
    auto state = view(cp, stateName);
    if (!state)
        return state.error();
    const auto bytes = state->contiguous();
    const std::string text(static_cast<const char*>(bytes.data_ptr()), static_cast<std::size_t>(bytes.numel()));
    auto parsed = jsonutil::parseUntrusted(text, "bitsandbytes quant state", {1u << 20, 8, 4096, false});
    if (!parsed)
        return loadError(cp, stateName, parsed.error().message);
    const nlohmann::json& json = *parsed;
    if (!json.is_object() || !json.contains("blocksize") || !json.contains("shape"))
        return loadError(cp, stateName, "bitsandbytes quant state is not the expected JSON object");
    std::int64_t blockSize = 0, nestedBlock = 256;
    std::vector<std::int64_t> shape;
    std::string dtypeName = "bfloat16";
    float nestedOffset = 0;
    try {
        jsonutil::readField(json, "blocksize", blockSize);
        jsonutil::readField(json, "shape", shape);
        jsonutil::readField(json, "dtype", dtypeName);
        jsonutil::readField(json, "nested_blocksize", nestedBlock);
        jsonutil::readField(json, "nested_offset", nestedOffset);
    } catch (const jsonutil::FieldError& e) {
        return loadError(cp, stateName, std::string("bitsandbytes quant state: ") + e.what());
    }
    // bitsandbytes uses blocks of 32 .. 4096; the shape must describe a real weight.
    if (blockSize < 1 || blockSize > (1 << 16) || nestedBlock < 1 || nestedBlock > (1 << 16) || shape.empty() || shape.size() > 8
        || std::any_of(shape.begin(), shape.end(), [](std::int64_t d) { return d < 0 || d > (std::int64_t{1} << 40); }))
        return loadError(cp, stateName,
            "bitsandbytes quant state has block size " + std::to_string(blockSize) + " / " + std::to_string(nestedBlock) + " or a shape of "
                + std::to_string(shape.size()) + " dims that no weight has");
    const auto dtype = dtypeName == "float16" ? at::kHalf : dtypeName == "float32" ? at::kFloat : at::kBFloat16;

    auto packed = view(cp, name);
    auto code = view(cp, name + ".quant_map");
    auto absmax = view(cp, name + ".absmax");
    if (!packed || !code || !absmax)
        return loadError(cp, name, "NF4 weight lacks its data, .absmax or .quant_map");
    at::Tensor absmaxF32;
    if (cp.find(name + ".nested_absmax")) {
        // Double quantization: absmax = nested_map[u8] * nested_absmax[i / nested_block] + offset,
        // in float32 as bitsandbytes computes it.
        auto nestedAbsmax = view(cp, name + ".nested_absmax");
        auto nestedMap = view(cp, name + ".nested_quant_map");
        if (!nestedAbsmax || !nestedMap || !json.contains("nested_offset"))
            return loadError(cp, name, "double-quantized NF4 lacks .nested_quant_map or nested_offset");
        const auto idx = absmax->to(at::kLong).reshape({-1});
        const auto n = idx.numel();
        const auto perBlock = nestedAbsmax->to(at::kFloat).reshape({-1}).repeat_interleave(nestedBlock).narrow(0, 0, n);
        absmaxF32 = nestedMap->to(at::kFloat).reshape({-1}).index_select(0, idx) * perBlock + nestedOffset;
    } else {
        absmaxF32 = absmax->to(at::kFloat).reshape({-1});
    }
    return QuantizedWeight::nf4(packed->reshape({-1}), absmaxF32, code->reshape({-1}), blockSize, shape, dtype);
}

}  // namespace

bool isQuantizationSibling(const std::string& name)
{
    for (const char* suffix : {".weight_scale", ".scale_weight", ".input_scale", ".scale_input", ".absmax", ".quant_map", ".nested_absmax",
             ".nested_quant_map", ".comfy_quant", "scaled_fp8"})
        if (endsWith(name, suffix))
            return true;
    return name.find(".quant_state.bitsandbytes__") != std::string::npos;
}

capability::WeightFormat storedFormat(const Checkpoint& cp, const TensorInfo& t)
{
    if (t.isQuantizedBlocks())
        return capability::WeightFormat::Gguf;
    if (cp.find(t.name + ".quant_state.bitsandbytes__nf4") || cp.find(t.name + ".quant_state.bitsandbytes__fp4"))
        return capability::WeightFormat::Nf4;
    if (t.dtype && (*t.dtype == DType::F8_E4M3 || *t.dtype == DType::F8_E5M2))
        return capability::WeightFormat::Fp8Scaled;
    return capability::WeightFormat::Dense;
}

std::int64_t heldBytes(const Checkpoint& cp, const TensorInfo& t, int computeBytes)
{
    const auto stored = static_cast<std::int64_t>(t.bytes);
    if (isQuantizationSibling(t.name) || storedFormat(cp, t) != capability::WeightFormat::Dense)
        return stored;
    // Integer tensors (token ids, indices) keep their type.
    if (t.dtype && *t.dtype != DType::F32 && *t.dtype != DType::F16 && *t.dtype != DType::BF16 && *t.dtype != DType::F64)
        return stored;
    if (t.ggmlType && *t.ggmlType != tensorfile::GgmlType::F32 && *t.ggmlType != tensorfile::GgmlType::F16
        && *t.ggmlType != tensorfile::GgmlType::BF16)
        return stored;
    return t.numel() * computeBytes;
}

namespace {
thread_local const std::stop_token* t_loadStop = nullptr;
}

ScopedLoadStop::ScopedLoadStop(std::stop_token stop) : m_stop(std::move(stop)), m_previous(t_loadStop)
{
    t_loadStop = &m_stop;
}

ScopedLoadStop::~ScopedLoadStop()
{
    t_loadStop = m_previous;
}

Result<QuantizedWeight> loadWeight(const Checkpoint& cp, const std::string& name, const LoadOptions& options)
{
    if (t_loadStop && t_loadStop->stop_requested())
        return makeError(ErrorCode::Cancelled, "loading was cancelled");
    const auto* info = cp.find(name);
    if (!info)
        return makeError(ErrorCode::NotFound, cp.path.string() + ": tensor '" + name + "' not found");
    Result<QuantizedWeight> weight = QuantizedWeight();
    try {
        const std::string base = endsWith(name, ".weight") ? name.substr(0, name.size() - 7) : name;
        if (info->isQuantizedBlocks()) {
            auto raw = tensorfile::rawBytes(cp, *info);
            if (!raw)
                return raw.error();
            weight = QuantizedWeight::gguf(*raw, static_cast<std::int64_t>(*info->ggmlType), info->shape);
        } else if (cp.find(name + ".quant_state.bitsandbytes__nf4") || cp.find(name + ".quant_state.bitsandbytes__fp4")) {
            const auto state = cp.find(name + ".quant_state.bitsandbytes__nf4") ? name + ".quant_state.bitsandbytes__nf4"
                                                                                : name + ".quant_state.bitsandbytes__fp4";
            weight = loadNf4(cp, name, state);
        } else if (cp.find(base + ".comfy_quant")) {
            auto q = view(cp, base + ".comfy_quant");
            std::string format = "?";
            if (q) {
                const auto c = q->contiguous();
                auto json =
                    jsonutil::parseUntrusted(std::string(static_cast<const char*>(c.data_ptr()), static_cast<std::size_t>(c.numel())),
                        "comfy_quant", {1u << 20, 8, 4096, false});
                if (json)
                    format = jsonutil::stringOr(*json, "format", "?");
            }
            if (format != "float8_e4m3fn" && format != "float8_e5m2")
                return makeError(ErrorCode::Unsupported,
                    cp.path.string() + ": tensor '" + name + "' uses ComfyUI quant format '" + format
                        + "', which this version cannot load");
        }
        if (weight.ok() && !weight->defined() && info->dtype && (*info->dtype == DType::F8_E4M3 || *info->dtype == DType::F8_E5M2)) {
            const char* scaleName = cp.find(base + ".weight_scale") ? ".weight_scale" : ".scale_weight";
            const char* inputName = cp.find(base + ".input_scale") ? ".input_scale" : ".scale_input";
            auto data = view(cp, name);
            if (!data)
                return data.error();
            at::Tensor scale;
            if (cp.find(base + scaleName)) {
                auto s = view(cp, base + scaleName);
                if (!s)
                    return s.error();
                scale = *s;
            } else {
                // An fp8 cast without a scale (ltx-core's fp8-cast policy) is exact at scale 1.
                scale = at::ones({}, at::kFloat);
            }
            std::optional<at::Tensor> input;
            if (cp.find(base + inputName)) {
                auto s = view(cp, base + inputName);
                if (!s)
                    return s.error();
                input = *s;
            }
            weight = QuantizedWeight::fp8(*data, scale, input, options.fp8BlockSize);
        }
        if (weight.ok() && !weight->defined()) {
            auto data = view(cp, name);
            if (!data)
                return data.error();
            weight = QuantizedWeight::dense(*data);
        }
    } catch (const c10::Error& e) {
        return loadError(cp, name, e.what_without_backtrace());
    } catch (const nlohmann::json::exception& e) {
        return loadError(cp, name, std::string("quantization metadata: ") + e.what());
    }
    if (!weight)
        return makeError(weight.error().code, cp.path.string() + ": tensor '" + name + "': " + weight.error().message);
    if (options.device != weight->device())
        return weight->to(options.device);
    return weight;
}

}  // namespace vireo::quant
