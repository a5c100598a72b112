#pragma once

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <string>
#include <vector>

namespace vireo::quant {

enum class Representation { Dense, Fp8Scaled, Gguf, Nf4, Int8 };

std::string_view representationName(Representation representation);

// How a linear layer multiplies, decided from the weight, the device and the compute dtype
// alone, so a load can report it before anything runs.
enum class MatmulPath { DenseGemm, Fp8TensorCores, DequantizeThenGemm };
std::string_view matmulPathName(MatmulPath path);
struct MatmulPlan {
    MatmulPath path = MatmulPath::DenseGemm;
    std::string reason;  // why this path (for a fallback: what blocks the faster one)
};

// FP8 tensor-core GEMMs accumulate in the faster, less exact mode (cuBLASLt fast accumulation):
// a speed-mode choice, process-wide, off unless set.
void setFp8FastAccumulation(bool enabled);
bool fp8FastAccumulation();

// A weight in the form it was stored in: dense, scaled FP8 (per-tensor, per-output-channel
// or block scales), GGUF blocks, bitsandbytes NF4, or int8 with per-channel scales. It
// dequantizes on the device it lives on, moves data and scales together, and runs a linear
// layer on the input's device. Only functional tensor ops are used, so weights made under
// c10::InferenceMode can be moved and copied anywhere.
class QuantizedWeight {
public:
    QuantizedWeight() = default;

    static QuantizedWeight dense(at::Tensor weight);
    // scale: numel 1, [out], [out, 1, ...] or a 2-D block grid over the weight flattened to
    // [out, in]; blockSize {rows, cols} when the grid does not divide the weight evenly.
    static Result<QuantizedWeight> fp8(
        at::Tensor data, at::Tensor scale, std::optional<at::Tensor> inputScale = {}, std::vector<std::int64_t> blockSize = {});
    static Result<QuantizedWeight> gguf(at::Tensor blocks, std::int64_t ggmlType, std::vector<std::int64_t> shape);
    // absmax: float32 per block, already de-nested; code: the 16-entry table.
    static Result<QuantizedWeight> nf4(at::Tensor packed, at::Tensor absmax, at::Tensor code, std::int64_t blockSize,
        std::vector<std::int64_t> shape, c10::ScalarType dtype);
    static Result<QuantizedWeight> int8(at::Tensor data, at::Tensor scale);
    // Rows of several weights with one input width stacked into one, so projections that read
    // the same input run as one GEMM: dense weights of one dtype, or fp8 weights with
    // per-tensor or per-row scales (the result has per-row scales).
    static Result<QuantizedWeight> fuseRows(const std::vector<const QuantizedWeight*>& parts);
    // Weight-only int8 with one scale per output channel (amax / 127).
    static Result<QuantizedWeight> quantizeInt8(const at::Tensor& weight);

    bool defined() const { return m_data.defined(); }
    Representation representation() const { return m_representation; }
    std::string describe() const;
    // The stored form in a few words for path reports: "bfloat16", "FP8 e4m3", "GGUF Q4_K".
    std::string storedForm() const;
    const std::vector<std::int64_t>& shape() const { return m_shape; }
    c10::Device device() const;
    // Bytes held by data, scales and tables: what the weight costs in memory.
    std::int64_t residentBytes() const;

    Result<at::Tensor> dequantize(c10::ScalarType dtype = c10::kFloat) const;
    // Into a caller-owned buffer (contiguous, shape(), a float dtype, the weight's device), so
    // a forward pass can reuse one scratch buffer instead of faulting in fresh memory.
    Result<void> dequantizeInto(at::Tensor& out) const;
    Result<QuantizedWeight> to(c10::Device device, bool nonBlocking = false) const;
    // The same weight in page-locked host memory, so copies to a GPU can run asynchronously
    // (block offloading); unchanged when no CUDA runtime is present.
    QuantizedWeight pinned() const;
    MatmulPlan matmulPlan(c10::Device device, c10::ScalarType dtype) const;
    // y = x W^T (+ bias), computed on x's device in x's dtype.
    Result<at::Tensor> linear(const at::Tensor& input, const std::optional<at::Tensor>& bias = {}) const;
    // The same for an fp8 weight with an input scale and an input already quantized with that
    // scale (float8_e4m3fn, by a fused producer such as kernels::geluQuantizeFp8); the result is
    // in dtype. Fails unless the FP8 tensor-core path runs for that device and dtype.
    Result<at::Tensor> linearQuantizedInput(const at::Tensor& xq, const std::optional<at::Tensor>& bias, c10::ScalarType dtype) const;

    const at::Tensor& data() const { return m_data; }
    const at::Tensor& scale() const { return m_scale; }
    const std::optional<at::Tensor>& inputScale() const { return m_inputScale; }
    std::int64_t ggmlType() const { return m_ggmlType; }

private:
    Error opError(const char* op, const std::string& what) const;
    void recordDequantize(c10::Device device, c10::ScalarType dtype) const;
    std::optional<std::string> fp8MatmulBlocker(c10::Device device, c10::ScalarType dtype) const;
    at::Tensor fp8Matmul(const at::Tensor& input, const std::optional<at::Tensor>& bias, c10::ScalarType dtype) const;
    at::Tensor fp8MatmulQuantized(
        const at::Tensor& xq, const at::Tensor& scaleA, const std::optional<at::Tensor>& bias, c10::ScalarType dtype) const;

    Representation m_representation = Representation::Dense;
    at::Tensor m_data;
    at::Tensor m_scale;  // fp8 / int8 scales, nf4 absmax
    std::optional<at::Tensor> m_inputScale;
    at::Tensor m_code;  // nf4 table
    std::vector<std::int64_t> m_shape;
    std::vector<std::int64_t> m_blockSize;  // fp8 block scales
    std::int64_t m_ggmlType = -1;
    std::int64_t m_nf4BlockSize = 0;
    c10::ScalarType m_nf4Dtype = c10::kBFloat16;
};

// The bytes a tensor holds (0 when undefined): what the models' residentBytes() add up.
std::int64_t bytesOf(const at::Tensor& t);

}  // namespace vireo::quant
