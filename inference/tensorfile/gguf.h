#pragma once

#include "inference/tensorfile/mappedfile.h"
#include "inference/tensorfile/tensorinfo.h"
#include "inference/util/result.h"

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <variant>
#include <vector>

namespace vireo::tensorfile {

enum class GgufValueType : std::uint32_t {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
};

std::string_view ggufValueTypeName(GgufValueType type);

struct GgufValue {
    GgufValueType type = GgufValueType::U8;
    GgufValueType elementType = GgufValueType::U8;  // for arrays
    std::variant<std::uint64_t, std::int64_t, double, bool, std::string, std::vector<GgufValue>> value;

    bool isString() const { return type == GgufValueType::String; }
    const std::string* string() const { return std::get_if<std::string>(&value); }
};

struct GgufKeyValue {
    std::string key;
    GgufValue value;
};

inline constexpr std::uint32_t kGgufDefaultAlignment = 32;
inline constexpr std::uint32_t kGgufMaxDims = 5;

// A validated GGUF v2/v3 file. Tensor byte ranges are checked against the file and each
// other, so any TensorInfo here is safe to map.
struct GgufFile {
    std::shared_ptr<const MappedFile> file;
    std::uint32_t version = 0;
    std::uint32_t alignment = kGgufDefaultAlignment;
    std::uint64_t dataOffset = 0;
    std::vector<GgufKeyValue> metadata;  // in file order
    std::vector<TensorInfo> tensors;  // in file order

    const GgufValue* find(std::string_view key) const;
    std::string architecture() const;  // general.architecture, or empty

    static Result<GgufFile> open(const std::filesystem::path& path);
    static Result<GgufFile> parse(const std::filesystem::path& path, const std::byte* data, std::uint64_t fileBytes);
};

}  // namespace vireo::tensorfile
