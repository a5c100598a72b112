#pragma once

#include "base/capability.h"
#include "inference/quant/quantizedweight.h"
#include "inference/util/result.h"

#include <c10/core/Device.h>

#include <stop_token>
#include <string>

namespace vireo::tensorfile {
struct Checkpoint;
struct TensorInfo;
}  // namespace vireo::tensorfile

namespace vireo::quant {

struct LoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    // Block size of 2-D fp8 scale grids that do not divide the weight (LTX-2 uses 128).
    std::vector<std::int64_t> fp8BlockSize;
};

// Loads one weight in its stored representation, found from the tensor and its siblings:
// GGUF blocks; F8 with `.weight_scale` / `.scale_weight` (and `.input_scale` /
// `.scale_input`); bitsandbytes NF4 (`.quant_state.bitsandbytes__nf4`, `.absmax`,
// `.quant_map`, nested statistics); anything else dense. On the CPU the data stays a view
// of the file mapping (no copy).
Result<QuantizedWeight> loadWeight(const tensorfile::Checkpoint& checkpoint, const std::string& name, const LoadOptions& options = {});

// Cancels the weight loads of this thread while it lives: every loadWeight call made after
// the token is triggered fails at once with ErrorCode::Cancelled, so a model load stops within
// one tensor.
class ScopedLoadStop {
public:
    explicit ScopedLoadStop(std::stop_token stop);
    ~ScopedLoadStop();
    ScopedLoadStop(const ScopedLoadStop&) = delete;
    ScopedLoadStop& operator=(const ScopedLoadStop&) = delete;

private:
    std::stop_token m_stop;
    const std::stop_token* m_previous;
};

// Tensors that belong to another tensor's quantization (scales, absmax, quant_map, ...):
// a loader walking all names skips these.
bool isQuantizationSibling(const std::string& name);

// The form loadWeight finds a tensor in, from its header and its siblings' names alone.
capability::WeightFormat storedFormat(const tensorfile::Checkpoint& checkpoint, const tensorfile::TensorInfo& tensor);
// The bytes a tensor holds once loaded for a compute dtype of computeBytes per value: quantized
// weights (GGUF blocks, FP8, NF4) and their scales stay as stored, every dense tensor is
// converted to the compute dtype (so bf16 weights take twice their size under f32 compute).
std::int64_t heldBytes(const tensorfile::Checkpoint& checkpoint, const tensorfile::TensorInfo& tensor, int computeBytes);

}  // namespace vireo::quant
