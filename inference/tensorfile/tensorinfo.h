#pragma once

#include "inference/tensorfile/dtype.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vireo::tensorfile {

enum class FileFormat { Safetensors, Gguf };

std::string_view fileFormatName(FileFormat format);

// One tensor as a header describes it. Shapes are in PyTorch order (GGUF dims reversed).
struct TensorInfo {
    std::string name;
    std::vector<std::int64_t> shape;
    std::optional<DType> dtype;  // element type when the bytes are plain elements
    std::optional<GgmlType> ggmlType;  // GGUF storage type (quantized blocks or plain)
    std::uint64_t offset = 0;  // absolute offset of the first byte in its file
    std::uint64_t bytes = 0;
    std::uint32_t fileIndex = 0;  // which file of a checkpoint holds it

    std::int64_t numel() const;
    // "BF16", "F8_E4M3", "Q4_K", ...
    std::string typeName() const;
    bool isQuantizedBlocks() const;
};

}  // namespace vireo::tensorfile
