#pragma once

// Building blocks shared by the native model ports. Weights stay in their stored
// representation (QuantizedWeight), which is why these are plain structs rather than
// torch::nn modules: a torch::nn::Linear owns a dense parameter, and pulling the C++
// frontend in would also cost every translation unit <torch/torch.h>.

#include "inference/quant/quantizedweight.h"

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vireo::nn {

// A failure inside a forward pass (a weight that could not be applied); the model facade
// turns it into an Error naming the layer.
struct ForwardError : std::runtime_error {
    explicit ForwardError(const std::string& what, ErrorCode code = ErrorCode::Unsupported) : std::runtime_error(what), code(code) {}
    ErrorCode code;
};

// A canonical layer computed by a Linear: itself, or one of the projections fused into its
// rows (q/k/v and gates run as one GEMM).
struct LinearPart {
    std::string name;
    std::int64_t rowOffset = 0, rows = 0;
};

// Low-rank updates applied at run time (LoRA, unfused): y[rows of a part] += up (down x).
// down stacks every contributing LoRA's A for every part ([R, in]); each slice reads its own
// rank range of (down x) and writes its own rows of y. Strength and alpha / rank are folded
// into up, so a quantized base is never touched and changing a LoRA costs no reload.
struct LoraSlice {
    std::int64_t rowOffset = 0, rows = 0;
    std::int64_t rankOffset = 0, rank = 0;
    at::Tensor up;  // [rows, rank], compute dtype
};
struct LoraAdapter {
    at::Tensor down;  // [R, in], compute dtype
    std::vector<LoraSlice> slices;
    std::int64_t bytes() const;
};
// One LoRA module's contribution to a canonical layer, ready to apply: up already scaled.
struct LoraDelta {
    std::string target;  // canonical (diffusers) layer name
    at::Tensor down;  // [r, in]
    at::Tensor up;  // [out, r]
};

struct Linear {
    std::string name;  // canonical name, for errors
    quant::QuantizedWeight weight;
    std::optional<at::Tensor> bias;
    std::vector<LinearPart> parts;  // empty: the layer is `name` itself
    std::shared_ptr<const LoraAdapter> lora;

    bool defined() const { return weight.defined(); }
    std::int64_t inFeatures() const { return weight.shape().at(1); }
    std::int64_t outFeatures() const { return weight.shape().at(0); }
    at::Tensor operator()(const at::Tensor& x) const;
    // geluTanh((*this)(x)); on CUDA a dense layer applies bias and GELU in the GEMM epilogue.
    at::Tensor withGeluTanh(const at::Tensor& x) const;
    // The scale with which this layer's GEMM takes an input already quantized by a fused
    // producer: an FP8 layer with a calibrated input scale on FP8 tensor cores, no LoRA (which
    // needs the input unquantized), x on CUDA. Empty otherwise.
    std::optional<at::Tensor> fp8InputScale(const at::Tensor& x) const;
    // (*this)(x) for xq = quantizeFp8(x, *fp8InputScale(x)), in dtype (x's).
    at::Tensor onQuantized(const at::Tensor& xq, c10::ScalarType dtype) const;
    std::int64_t residentBytes() const;
    // The canonical layers this one computes, with their rows.
    std::vector<LinearPart> computedParts() const;
    // The same layer with new weights (moved to a device, pinned), its parts and LoRA kept.
    Linear withWeights(quant::QuantizedWeight w, std::optional<at::Tensor> b) const;
    // A copy on `device` (throws ForwardError when the weight cannot move). Block streaming
    // copies host-resident layers in before they run; from page-locked memory the copies are
    // asynchronous on the current stream when nonBlocking.
    Linear on(c10::Device device, bool nonBlocking) const;
    // A copy in page-locked host memory (where CUDA is available; as is otherwise).
    Linear pinned() const;
};

// A dense tensor in page-locked host memory where CUDA is available (undefined stays so).
at::Tensor pinnedIfCuda(const at::Tensor& t);

// The adapter for a layer from the deltas aimed at its parts (several LoRAs may hit one part),
// on the deltas' device and dtype; nullptr when none is aimed at it. Shapes are checked.
std::shared_ptr<const LoraAdapter> buildLoraAdapter(const Linear& layer, const std::vector<const LoraDelta*>& deltas);

// diffusers' RMSNorm without affine: the variance in float32, the result back in x's dtype.
at::Tensor rmsNorm(const at::Tensor& x, double eps);
// x * (1 + scale) + shift in one pass (AdaLN modulation).
at::Tensor modulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift);
// modulate(rmsNorm(x, eps), scale, shift) as one pass on CUDA (kernels/fusedops.h); the
// same ops on the CPU.
at::Tensor rmsNormModulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps);
// (x + delta * gate, rmsNormModulate(x + delta * gate, scale, shift, eps)): a gated residual
// add and the next norm of the stream as one pass on CUDA (kernels/fusedops.h); the same ops on
// the CPU.
std::pair<at::Tensor, at::Tensor> gatedResidualRmsNormModulate(
    const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate, const at::Tensor& scale, const at::Tensor& shift, double eps);
// The same two with the normed output as the FP8 input of a GEMM quantized with qscale
// (Linear::fp8InputScale): one pass on CUDA.
at::Tensor rmsNormModulateFp8(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale);
std::pair<at::Tensor, at::Tensor> gatedResidualRmsNormModulateFp8(const at::Tensor& x, const at::Tensor& delta, const at::Tensor& gate,
    const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale);
// torch.nn.RMSNorm with an optional weight (q/k norms across heads).
at::Tensor rmsNormWeighted(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps);
at::Tensor layerNormNoAffine(const at::Tensor& x, double eps);
at::Tensor geluTanh(const at::Tensor& x);

// Sinusoidal timestep features as diffusers' get_timestep_embedding(flip_sin_to_cos=True,
// downscale_freq_shift=0): [N] -> [N, dim] float32, cos first.
at::Tensor timestepFeatures(const at::Tensor& timesteps, std::int64_t dim, double maxPeriod = 10000.0);

// Scaled dot-product attention on [B, H, T, D] tensors through at::scaled_dot_product_attention.
// Queries are processed in chunks when the full score matrix would exceed scoreBudgetElements,
// so the math fallback (no fused kernel for this device, dtype or mask) stays bounded.
// CUDA operands whose base or strides are not 16-byte aligned are copied first (see layers.cpp).
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& additiveMask,
    std::int64_t scoreBudgetElements = 1ll << 28);

// Which fused kernel PyTorch's scaled_dot_product_attention prefers on CUDA. Process-wide (it
// sets ATen's global choice); Default is PyTorch's own order. Unknown names are an error.
enum class AttentionKernel { Default, FlashV3, Flash, Cudnn, Efficient };
std::string_view attentionKernelName(AttentionKernel kernel);
std::optional<AttentionKernel> parseAttentionKernel(std::string_view name);  // case-insensitive
void setAttentionKernel(AttentionKernel kernel);
AttentionKernel attentionKernel();

// Whether a tensor can go to the fused CUDA attention kernels as it is (16-byte aligned base
// and strides, unit stride on the last dim). Exposed for the GPU tests.
bool attentionOperandAligned(const at::Tensor& t);

}  // namespace vireo::nn
