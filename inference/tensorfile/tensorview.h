#pragma once

#include "inference/tensorfile/modelsource.h"
#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <optional>
#include <vector>

namespace vireo::tensorfile {

// The torch element type for a stored dtype; nullopt for sub-byte types torch lacks.
std::optional<c10::ScalarType> scalarTypeFor(DType type);

// Zero-copy, read-only view over the mapping (the tensor keeps the mapping alive). Plain
// element types come typed and shaped; quantized GGUF blocks come as uint8 [bytes]. Never
// write into a view: the mapping is read-only.
Result<at::Tensor> viewTensor(const Checkpoint& checkpoint, const TensorInfo& info);

// The stored bytes as a uint8 [bytes] view, for any type (GGUF blocks included).
Result<at::Tensor> rawBytes(const Checkpoint& checkpoint, const TensorInfo& info);

// An uninitialized host tensor; large ones get their own huge-page mapping.
at::Tensor emptyHost(const std::vector<std::int64_t>& shape, c10::ScalarType type);

struct ReadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    std::optional<c10::ScalarType> dtype;  // keep the stored type when empty
    std::uint64_t chunkBytes = 64ull << 20;
};

// A fresh, owned tensor on the given device and dtype, filled in chunks of at most
// chunkBytes of source data so peak extra memory stays bounded.
Result<at::Tensor> readTensor(const Checkpoint& checkpoint, const TensorInfo& info, const ReadOptions& options = {});

}  // namespace vireo::tensorfile
