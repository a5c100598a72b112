#include "inference/tensorfile/tensorinfo.h"

namespace vireo::tensorfile {

std::string_view fileFormatName(FileFormat format)
{
    return format == FileFormat::Safetensors ? "safetensors" : "gguf";
}

std::int64_t TensorInfo::numel() const
{
    std::int64_t n = 1;
    for (auto d : shape)
        n *= d;
    return n;
}

std::string TensorInfo::typeName() const
{
    if (ggmlType)
        return std::string(ggmlTypeInfo(*ggmlType).name);
    if (dtype)
        return std::string(dtypeName(*dtype));
    return "unknown";
}

bool TensorInfo::isQuantizedBlocks() const
{
    return ggmlType && ggmlTypeInfo(*ggmlType).quantized;
}

}  // namespace vireo::tensorfile
