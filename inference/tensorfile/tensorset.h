#pragma once

// Named tensor sets as files: inputs and outputs of `vireo-cli dit-forward` and the parity
// tests. Reading goes through the validating safetensors reader.

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <map>
#include <string>

namespace vireo::tensorfile {

struct TensorSet {
    std::map<std::string, at::Tensor> tensors;  // owned CPU copies
    std::map<std::string, std::string> metadata;

    const at::Tensor* find(const std::string& name) const;
};

Result<TensorSet> readTensorSet(const std::filesystem::path& path);

// Writes to a temporary name in the same folder and renames it into place, so a crash never
// leaves a truncated file under the final name. Tensors are written from their CPU copies.
Result<void> writeSafetensors(const std::filesystem::path& path, const std::map<std::string, at::Tensor>& tensors,
    const std::map<std::string, std::string>& metadata = {});

}  // namespace vireo::tensorfile
