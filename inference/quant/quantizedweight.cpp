#include "inference/quant/quantizedweight.h"

#include "inference/util/device.h"

#include "inference/util/log.h"
#include "inference/util/pathstats.h"
#include "kernels/fp8dequant.h"
#include "kernels/fusedops.h"
#include "kernels/ggufdequant.h"
#include "kernels/nf4dequant.h"
#include "inference/tensorfile/dtype.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAFunctions.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <set>
#include <sstream>

namespace vireo::quant {

namespace {

std::atomic<bool> g_fp8FastAccumulation{false};

std::string shapeText(c10::IntArrayRef shape)
{
    std::ostringstream s;
    s << shape;
    return s.str();
}

// Each distinct reason is logged once, not once per forward.
void logFallbackOnce(const std::string& reason)
{
    static std::mutex mutex;
    static std::set<std::string> seen;
    std::lock_guard lock(mutex);
    if (seen.insert(reason).second)
        log::info("linear: " + reason);
}

template <typename F>
Result<at::Tensor> guarded(const QuantizedWeight& w, const char* op, F&& body)
{
    try {
        return body();
    } catch (const c10::Error& e) {
        return errorFromException(e, std::string(op) + " on a " + w.describe() + " weight " + shapeText(w.shape()));
    }
}

}  // namespace

void setFp8FastAccumulation(bool enabled)
{
    g_fp8FastAccumulation = enabled;
}

bool fp8FastAccumulation()
{
    return g_fp8FastAccumulation;
}

std::string_view representationName(Representation representation)
{
    switch (representation) {
    case Representation::Dense: return "dense";
    case Representation::Fp8Scaled: return "fp8-scaled";
    case Representation::Gguf: return "gguf";
    case Representation::Nf4: return "nf4";
    case Representation::Int8: return "int8";
    }
    return "?";
}

QuantizedWeight QuantizedWeight::dense(at::Tensor weight)
{
    QuantizedWeight w;
    w.m_representation = Representation::Dense;
    w.m_shape = weight.sizes().vec();
    w.m_data = std::move(weight);
    return w;
}

Result<QuantizedWeight> QuantizedWeight::fp8(
    at::Tensor data, at::Tensor scale, std::optional<at::Tensor> inputScale, std::vector<std::int64_t> blockSize)
{
    if (data.scalar_type() != at::kFloat8_e4m3fn && data.scalar_type() != at::kFloat8_e5m2)
        return makeError(ErrorCode::InvalidArgument,
            "fp8 weight must be float8_e4m3fn or float8_e5m2, got " + std::string(c10::toString(data.scalar_type())));
    if (data.dim() < 1)
        return makeError(ErrorCode::InvalidArgument, "fp8 weight must have at least one dim");
    const auto out = data.size(0);
    // [out, 1, 1, ...] scales a conv weight per output channel: fold it to [out] so the
    // kernel broadcasts it over every trailing dim. Anything else that is not a known layout
    // fails here, never mis-broadcasts later.
    if (scale.dim() >= 2 && scale.size(0) == out && scale.numel() == out && scale.size(1) == 1)
        scale = scale.reshape({out});
    const bool perTensor = scale.numel() == 1;
    const bool perRow = scale.dim() == 1 && scale.size(0) == out;
    const bool block = scale.dim() == 2 && !perRow && !perTensor;
    if (!perTensor && !perRow && !block)
        return makeError(ErrorCode::InvalidArgument,
            "fp8 scale " + shapeText(scale.sizes()) + " does not fit weight " + shapeText(data.sizes())
                + " as per-tensor, per-output-channel or 2-D block scales");
    QuantizedWeight w;
    w.m_representation = Representation::Fp8Scaled;
    w.m_shape = data.sizes().vec();
    w.m_data = std::move(data);
    w.m_scale = scale.to(at::kFloat);
    if (inputScale)
        w.m_inputScale = inputScale->to(at::kFloat);
    w.m_blockSize = std::move(blockSize);
    if (block) {
        // Validate the block geometry now (as the kernel will), not at the first forward.
        const auto rows = w.m_shape[0];
        const auto cols = rows == 0 ? 0 : w.m_data.numel() / rows;
        const auto s0 = w.m_scale.size(0), s1 = w.m_scale.size(1);
        const bool fits = w.m_blockSize.empty()
            ? (rows % s0 == 0 && cols % s1 == 0)
            : (w.m_blockSize.size() == 2 && w.m_blockSize[0] > 0 && w.m_blockSize[1] > 0
                && (rows + w.m_blockSize[0] - 1) / w.m_blockSize[0] == s0 && (cols + w.m_blockSize[1] - 1) / w.m_blockSize[1] == s1);
        if (!fits)
            return makeError(ErrorCode::InvalidArgument,
                "fp8 block scale " + shapeText(w.m_scale.sizes()) + " does not tile weight " + shapeText(w.m_shape)
                    + (w.m_blockSize.empty() ? " evenly; the block size must be given" : " with the given block size"));
    }
    return w;
}

Result<QuantizedWeight> QuantizedWeight::gguf(at::Tensor blocks, std::int64_t ggmlType, std::vector<std::int64_t> shape)
{
    if (!kernels::ggufTypeSupported(ggmlType)) {
        const auto* info = tensorfile::ggmlTypeInfo(static_cast<std::uint32_t>(ggmlType));
        return makeError(ErrorCode::Unsupported,
            "GGUF type " + (info ? std::string(info->name) : std::to_string(ggmlType)) + " cannot be dequantized by this version");
    }
    QuantizedWeight w;
    w.m_representation = Representation::Gguf;
    w.m_data = std::move(blocks);
    w.m_ggmlType = ggmlType;
    w.m_shape = std::move(shape);
    return w;
}

Result<QuantizedWeight> QuantizedWeight::nf4(
    at::Tensor packed, at::Tensor absmax, at::Tensor code, std::int64_t blockSize, std::vector<std::int64_t> shape, c10::ScalarType dtype)
{
    QuantizedWeight w;
    w.m_representation = Representation::Nf4;
    w.m_data = std::move(packed);
    w.m_scale = absmax.to(at::kFloat);
    w.m_code = code.to(at::kFloat);
    w.m_nf4BlockSize = blockSize;
    w.m_nf4Dtype = dtype;
    w.m_shape = std::move(shape);
    if (w.m_code.numel() != 16)
        return makeError(ErrorCode::InvalidArgument, "nf4 code table has " + std::to_string(w.m_code.numel()) + " entries, not 16");
    std::int64_t numel = 1;
    for (auto d : w.m_shape)
        numel *= d;
    if (blockSize <= 0 || w.m_scale.numel() != (numel + blockSize - 1) / blockSize || w.m_data.numel() * 2 < numel)
        return makeError(ErrorCode::InvalidArgument,
            "nf4 weight of shape " + shapeText(w.m_shape) + " with " + std::to_string(w.m_data.numel()) + " packed bytes and "
                + std::to_string(w.m_scale.numel()) + " absmax values does not fit blocks of " + std::to_string(blockSize));
    return w;
}

Result<QuantizedWeight> QuantizedWeight::int8(at::Tensor data, at::Tensor scale)
{
    if (data.scalar_type() != at::kChar || data.dim() < 1 || scale.numel() != data.size(0))
        return makeError(ErrorCode::InvalidArgument, "int8 weight needs int8 data [out, ...] and one scale per output channel");
    QuantizedWeight w;
    w.m_representation = Representation::Int8;
    w.m_shape = data.sizes().vec();
    w.m_data = std::move(data);
    w.m_scale = scale.to(at::kFloat).reshape({-1});
    return w;
}

Result<QuantizedWeight> QuantizedWeight::quantizeInt8(const at::Tensor& weight)
{
    if (!at::isFloatingType(weight.scalar_type()) || weight.dim() < 2)
        return makeError(ErrorCode::InvalidArgument,
            "int8 quantization needs a floating-point weight with at least 2 dims, got " + shapeText(weight.sizes()));
    try {
        const auto w = weight.to(at::kFloat).reshape({weight.size(0), -1});
        if (!at::isfinite(w).all().item<bool>())
            return makeError(ErrorCode::InvalidArgument, "weight holds NaN or infinite values; it cannot be quantized");
        auto scale = w.abs().amax(1) / 127.0;
        scale = at::where(scale > 0, scale, at::ones_like(scale));
        const auto q = at::round(w / scale.unsqueeze(1)).clamp(-127, 127).to(at::kChar).reshape(weight.sizes());
        return int8(q, scale);
    } catch (const c10::Error& e) {
        return makeError(ErrorCode::Internal, std::string("int8 quantization failed: ") + e.what_without_backtrace());
    }
}

std::string QuantizedWeight::storedForm() const
{
    switch (m_representation) {
    case Representation::Dense: return std::string(c10::toString(m_data.scalar_type()));
    case Representation::Fp8Scaled: return m_data.scalar_type() == at::kFloat8_e4m3fn ? "FP8 e4m3" : "FP8 e5m2";
    case Representation::Gguf: {
        const auto* info = tensorfile::ggmlTypeInfo(static_cast<std::uint32_t>(m_ggmlType));
        return "GGUF " + (info ? std::string(info->name) : std::to_string(m_ggmlType));
    }
    case Representation::Nf4: return "NF4";
    case Representation::Int8: return "int8";
    }
    return "?";
}

void QuantizedWeight::recordDequantize(c10::Device device, c10::ScalarType dtype) const
{
    if (m_representation != Representation::Dense && paths::active())
        paths::record("dequantize",
            storedForm() + " to "
                + (dtype == at::kFloat           ? "f32"
                        : dtype == at::kBFloat16 ? "bf16"
                        : dtype == at::kHalf     ? "f16"
                                                 : c10::toString(dtype))
                + (device.is_cuda() ? " on CUDA" : " on the CPU"));
}

std::string QuantizedWeight::describe() const
{
    std::string s(representationName(m_representation));
    switch (m_representation) {
    case Representation::Dense: return s + " " + c10::toString(m_data.scalar_type());
    case Representation::Fp8Scaled:
        s += m_data.scalar_type() == at::kFloat8_e4m3fn ? " e4m3" : " e5m2";
        s += m_scale.numel() == 1 ? " per-tensor" : m_scale.dim() == 1 ? " per-channel" : " block";
        return m_inputScale ? s + " +input-scale" : s;
    case Representation::Gguf: {
        const auto* info = tensorfile::ggmlTypeInfo(static_cast<std::uint32_t>(m_ggmlType));
        return s + " " + (info ? std::string(info->name) : std::to_string(m_ggmlType));
    }
    case Representation::Nf4: return s + " block " + std::to_string(m_nf4BlockSize);
    case Representation::Int8: return s + " per-channel";
    }
    return s;
}

c10::Device QuantizedWeight::device() const
{
    return m_data.defined() ? m_data.device() : c10::Device(c10::kCPU);
}

std::int64_t QuantizedWeight::residentBytes() const
{
    return bytesOf(m_data) + bytesOf(m_scale) + bytesOf(m_code) + (m_inputScale ? bytesOf(*m_inputScale) : 0);
}

Error QuantizedWeight::opError(const char* op, const std::string& what) const
{
    return makeError(ErrorCode::Unsupported, std::string(op) + " on a " + describe() + " weight " + shapeText(m_shape) + ": " + what);
}

Result<at::Tensor> QuantizedWeight::dequantize(c10::ScalarType dtype) const
{
    if (!defined())
        return opError("dequantize", "the weight is empty");
    if (dtype != at::kFloat && dtype != at::kBFloat16 && dtype != at::kHalf)
        return opError("dequantize", std::string("output dtype ") + c10::toString(dtype) + " is not float32, bfloat16 or float16");
    recordDequantize(device(), dtype);
    return guarded(*this, "dequantize", [&]() -> Result<at::Tensor> {
        switch (m_representation) {
        case Representation::Dense: return m_data.to(dtype);
        case Representation::Fp8Scaled: return kernels::dequantizeFp8(m_data, m_scale, dtype, m_blockSize);
        case Representation::Gguf: return kernels::dequantizeGguf(m_data, m_ggmlType, m_shape, dtype);
        case Representation::Nf4: return kernels::dequantizeNf4(m_data, m_scale, m_code, m_nf4BlockSize, m_shape, dtype);
        case Representation::Int8: {
            std::vector<std::int64_t> view(m_shape.size(), 1);
            view[0] = m_shape[0];
            return (m_data.to(at::kFloat) * m_scale.view(view)).to(dtype);
        }
        }
        return at::Tensor();
    });
}

Result<void> QuantizedWeight::dequantizeInto(at::Tensor& out) const
{
    if (!defined())
        return opError("dequantize", "the weight is empty");
    recordDequantize(out.device(), out.scalar_type());
    auto r = guarded(*this, "dequantize", [&]() -> Result<at::Tensor> {
        TORCH_CHECK(out.sizes() == c10::IntArrayRef(m_shape), "out is shaped ", out.sizes());
        switch (m_representation) {
        case Representation::Fp8Scaled: return kernels::dequantizeFp8Into(m_data, m_scale, m_blockSize, out);
        case Representation::Gguf: return kernels::dequantizeGgufInto(m_data, m_ggmlType, out);
        case Representation::Nf4: return kernels::dequantizeNf4Into(m_data, m_scale, m_code, m_nf4BlockSize, out);
        case Representation::Int8: {
            std::vector<std::int64_t> view(m_shape.size(), 1);
            view[0] = m_shape[0];
            return at::mul_out(out, m_data, m_scale.view(view));
        }
        case Representation::Dense: {
            auto values = dequantize(out.scalar_type());
            if (!values)
                throw c10::Error({__func__, __FILE__, static_cast<std::uint32_t>(__LINE__)}, values.error().message);
            return out.copy_(*values);
        }
        }
        return out;
    });
    if (!r)
        return r.error();
    return {};
}

Result<QuantizedWeight> QuantizedWeight::to(c10::Device device, bool nonBlocking) const
{
    try {
        QuantizedWeight moved = *this;
        auto move = [&](at::Tensor& t) {
            if (t.defined())
                t = t.to(device, nonBlocking);
        };
        move(moved.m_data);
        move(moved.m_scale);
        move(moved.m_code);
        if (moved.m_inputScale)
            move(*moved.m_inputScale);
        return moved;
    } catch (const c10::Error& e) {
        return opError("to", std::string("moving to ") + device.str() + " failed: " + e.what_without_backtrace());
    }
}

QuantizedWeight QuantizedWeight::pinned() const
{
    if (!at::hasCUDA() || device() != c10::Device(c10::kCPU))
        return *this;
    QuantizedWeight out = *this;
    for (auto* t : {&out.m_data, &out.m_scale, &out.m_code})
        if (t->defined())
            *t = t->pin_memory();
    if (out.m_inputScale)
        out.m_inputScale = out.m_inputScale->pin_memory();
    return out;
}

std::optional<std::string> QuantizedWeight::fp8MatmulBlocker(c10::Device device, c10::ScalarType dtype) const
{
    if (m_representation != Representation::Fp8Scaled)
        return "not an fp8 weight";
    if (!device.is_cuda())
        return "the input is on " + device.str() + " (FP8 tensor cores need CUDA)";
    if (dtype != at::kBFloat16 && dtype != at::kHalf)
        return std::string("the compute dtype is ") + c10::toString(dtype)
            + " (activations keep full precision; FP8 GEMMs run for bfloat16 and float16)";
    static const auto switches = pathSwitches();
    if (auto blocker =
            capability::fp8GemmBlocker(deviceCaps(device), dtype == at::kHalf ? capability::Dtype::F16 : capability::Dtype::BF16, switches))
        return blocker;
    if (m_data.scalar_type() != at::kFloat8_e4m3fn)
        return "the weight is e5m2 (the matmul path takes e4m3 weights)";
    if (m_data.dim() != 2)
        return "the weight is not 2-D";
    if (m_scale.dim() == 2)
        return "block scales (the matmul path takes per-tensor or per-row scales)";
    if (m_data.size(0) % 16 != 0 || m_data.size(1) % 16 != 0)
        return "weight dims " + shapeText(m_data.sizes()) + " are not multiples of 16";
    return std::nullopt;
}

MatmulPlan QuantizedWeight::matmulPlan(c10::Device device, c10::ScalarType dtype) const
{
    switch (m_representation) {
    case Representation::Dense: return {MatmulPath::DenseGemm, {}};
    case Representation::Fp8Scaled:
        if (auto blocker = fp8MatmulBlocker(device, dtype))
            return {MatmulPath::DequantizeThenGemm, *blocker};
        return {MatmulPath::Fp8TensorCores, m_inputScale ? "static input scale" : "input scaled by its own amax at run time"};
    default: return {MatmulPath::DequantizeThenGemm, describe() + " has no direct GEMM; it is dequantized for each matmul"};
    }
}

std::string_view matmulPathName(MatmulPath path)
{
    switch (path) {
    case MatmulPath::DenseGemm: return "dense GEMM";
    case MatmulPath::Fp8TensorCores: return "FP8 tensor-core GEMM";
    case MatmulPath::DequantizeThenGemm: return "dequantize + GEMM";
    }
    return "?";
}

at::Tensor QuantizedWeight::fp8Matmul(const at::Tensor& input, const std::optional<at::Tensor>& bias, c10::ScalarType dtype) const
{
    // x is quantized per tensor with the checkpoint's calibrated input scale (one fused pass),
    // else with its own amax; both scales are applied inside the matmul.
    const auto x = input.reshape({-1, m_shape[1]});
    const at::Tensor scaleA = m_inputScale
        ? m_inputScale->reshape({})
        : (at::linalg_vector_norm(x, INFINITY, std::nullopt, false, at::kFloat) / 448.0).clamp_min(1e-12);
    auto y = fp8MatmulQuantized(kernels::quantizeFp8(x, scaleA), scaleA, bias, dtype);
    auto outShape = input.sizes().vec();
    outShape.back() = m_shape[0];
    return y.reshape(outShape);
}

at::Tensor QuantizedWeight::fp8MatmulQuantized(
    const at::Tensor& xq, const at::Tensor& scaleA, const std::optional<at::Tensor>& bias, c10::ScalarType dtype) const
{
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(xq.device());
    const auto wt = m_data.t();
    const bool fastAccumulation = fp8FastAccumulation();
    std::optional<at::Tensor> b;
    if (bias)
        b = bias->to(xq.device(), dtype);
    at::Tensor y;
    if (m_scale.numel() == 1) {
        // cuBLASLt adds a bias in the epilogue only for 16-bit outputs ("Bias is not supported
        // when out_dtype is set to Float32"): a float32 result adds it after.
        const bool epilogueBias = b && dtype != at::kFloat;
        y = at::_scaled_mm(xq, wt, scaleA, m_scale.reshape({}), epilogueBias ? b : std::nullopt, std::nullopt, dtype, fastAccumulation);
        if (b && !epilogueBias)
            y.add_(*b);
    } else if (dtype == at::kBFloat16) {
        // Row-wise scaling (one scale per output channel) runs with bf16 outputs only.
        y = at::_scaled_mm(xq, wt, scaleA.reshape({1, 1}).expand({xq.size(0), 1}).contiguous(), m_scale.reshape({1, -1}).contiguous(), b,
            std::nullopt, dtype, fastAccumulation);
    } else {
        y = at::_scaled_mm(xq, wt, scaleA, at::ones({}, f32), std::nullopt, std::nullopt, at::kFloat, fastAccumulation);
        y.mul_(m_scale.reshape({1, -1}));
        if (b)
            y.add_(*b);
        y = y.to(dtype);
    }
    return y;
}

Result<at::Tensor> QuantizedWeight::linearQuantizedInput(
    const at::Tensor& xq, const std::optional<at::Tensor>& bias, c10::ScalarType dtype) const
{
    if (m_representation != Representation::Fp8Scaled || !m_inputScale)
        return opError("linear", "a pre-quantized input needs an fp8 weight with an input scale");
    if (xq.scalar_type() != at::kFloat8_e4m3fn || xq.dim() < 1 || xq.size(-1) != m_shape[1])
        return opError("linear", "the pre-quantized input must be float8_e4m3fn ending in " + std::to_string(m_shape[1]) + " features");
    if (auto blocker = fp8MatmulBlocker(xq.device(), dtype))
        return opError("linear", *blocker);
    paths::record("GEMM", "FP8 tensor-core GEMM");
    return guarded(*this, "linear", [&]() -> Result<at::Tensor> {
        auto y = fp8MatmulQuantized(xq.reshape({-1, m_shape[1]}), m_inputScale->reshape({}), bias, dtype);
        auto outShape = xq.sizes().vec();
        outShape.back() = m_shape[0];
        return y.reshape(outShape);
    });
}

Result<QuantizedWeight> QuantizedWeight::fuseRows(const std::vector<const QuantizedWeight*>& parts)
{
    if (parts.empty())
        return makeError(ErrorCode::InvalidArgument, "no weights to fuse");
    const auto& first = *parts.front();
    std::vector<at::Tensor> data, scales, inputScales;
    for (const auto* p : parts) {
        if (!p->defined() || p->m_shape.size() != 2 || p->m_shape[1] != first.m_shape[1] || p->m_representation != first.m_representation)
            return makeError(ErrorCode::InvalidArgument, "weights to fuse must be 2-D, of one representation and one input width");
        if (p->m_representation == Representation::Dense) {
            if (p->m_data.scalar_type() != first.m_data.scalar_type())
                return makeError(ErrorCode::InvalidArgument, "dense weights to fuse must share a dtype");
            data.push_back(p->m_data);
            continue;
        }
        if (p->m_representation != Representation::Fp8Scaled || p->m_scale.dim() > 1 || !p->m_blockSize.empty()
            || p->m_data.scalar_type() != first.m_data.scalar_type() || p->m_data.device() != first.m_data.device())
            return makeError(ErrorCode::Unsupported, "only dense weights and fp8 weights with per-tensor or per-row scales can be fused");
        data.push_back(p->m_data);
        scales.push_back(p->m_scale.reshape({-1}).expand({p->m_shape[0]}));
        if (p->m_inputScale)
            inputScales.push_back(p->m_inputScale->reshape({}));
    }
    if (first.m_representation == Representation::Dense)
        return dense(at::cat(data, 0));
    // One input is quantized once for all parts: with the largest of their calibrated scales,
    // so no part sees its inputs clipped harder than its own scale would; without a scale on
    // every part the input is quantized by its own amax at run time.
    std::optional<at::Tensor> inputScale;
    if (inputScales.size() == parts.size())
        inputScale = at::stack(inputScales).amax();
    return fp8(at::cat(data, 0), at::cat(scales, 0).contiguous(), inputScale);
}

Result<at::Tensor> QuantizedWeight::linear(const at::Tensor& input, const std::optional<at::Tensor>& bias) const
{
    if (!defined())
        return opError("linear", "the weight is empty");
    if (m_shape.size() != 2)
        return opError("linear", "linear needs a 2-D weight");
    if (!input.defined() || input.dim() < 1 || input.size(-1) != m_shape[1])
        return opError("linear",
            "input " + (input.defined() ? shapeText(input.sizes()) : std::string("(undefined)")) + " does not end in "
                + std::to_string(m_shape[1]) + " features");
    if (!at::isFloatingType(input.scalar_type()))
        return opError("linear", std::string("input dtype ") + c10::toString(input.scalar_type()) + " is not floating point");
    const QuantizedWeight* weight = this;
    QuantizedWeight moved;
    if (device() != input.device()) {
        logFallbackOnce("a weight on " + device().str() + " is used with an input on " + input.device().str()
            + ": it is copied to the input's device at every call");
        auto r = to(input.device());
        if (!r)
            return r.error();
        moved = std::move(*r);
        weight = &moved;
    }
    const auto dtype = input.scalar_type() == at::kDouble ? at::kFloat : input.scalar_type();
    if (m_representation == Representation::Fp8Scaled) {
        if (auto blocker = weight->fp8MatmulBlocker(input.device(), input.scalar_type())) {
            logFallbackOnce("fp8 weights use dequantize + matmul: " + *blocker);
            // Where the device would take FP8 GEMMs but this weight cannot (e5m2, block scales,
            // odd dims), the slower path is a fallback to report, not the plan.
            if (paths::active() && input.is_cuda() && (dtype == at::kBFloat16 || dtype == at::kHalf)
                && !capability::fp8GemmBlocker(
                    deviceCaps(input.device()), dtype == at::kHalf ? capability::Dtype::F16 : capability::Dtype::BF16, pathSwitches()))
                paths::recordFallback("GEMM", "dequantize + GEMM (" + storedForm() + ")", *blocker);
            paths::record("GEMM", "dequantize + GEMM (" + storedForm() + ")");
        } else {
            paths::record("GEMM", "FP8 tensor-core GEMM");
            return guarded(*this, "linear", [&]() -> Result<at::Tensor> { return weight->fp8Matmul(input, bias, dtype); });
        }
    } else if (paths::active()) {
        paths::record("GEMM", m_representation == Representation::Dense ? "dense GEMM" : "dequantize + GEMM (" + storedForm() + ")");
    }
    const auto computeDtype = dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf ? dtype : at::kFloat;
    Result<at::Tensor> w = at::Tensor();
    if (m_representation != Representation::Dense && input.device().is_cpu()) {
        // One scratch buffer per thread, grown to the largest weight it has served: repeated
        // forwards reuse warm memory instead of faulting in a fresh copy of every weight.
        thread_local at::Tensor scratch;
        std::int64_t numel = 1;
        for (auto d : m_shape)
            numel *= d;
        if (!scratch.defined() || scratch.scalar_type() != computeDtype || scratch.numel() < numel)
            scratch = at::empty({numel}, at::TensorOptions().dtype(computeDtype));
        auto view = scratch.narrow(0, 0, numel).view(m_shape);
        auto r = weight->dequantizeInto(view);
        if (!r)
            return r.error();
        w = view;
    } else {
        w = weight->dequantize(computeDtype);
    }
    if (!w)
        return w.error();
    return guarded(*this, "linear", [&]() -> Result<at::Tensor> {
        std::optional<at::Tensor> b;
        if (bias)
            b = bias->to(input.device(), dtype);
        return at::linear(input.to(dtype), *w, b);
    });
}

std::int64_t bytesOf(const at::Tensor& t)
{
    return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0;
}

}  // namespace vireo::quant
