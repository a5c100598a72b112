#include "inference/tensorfile/dtype.h"

#include <array>

namespace vireo::tensorfile {

namespace {

struct DTypeEntry {
    DType type;
    std::string_view name;
    int bits;
};

constexpr std::array kDTypes{
    DTypeEntry{DType::Bool, "BOOL", 8},
    DTypeEntry{DType::U8, "U8", 8},
    DTypeEntry{DType::I8, "I8", 8},
    DTypeEntry{DType::U16, "U16", 16},
    DTypeEntry{DType::I16, "I16", 16},
    DTypeEntry{DType::F16, "F16", 16},
    DTypeEntry{DType::BF16, "BF16", 16},
    DTypeEntry{DType::U32, "U32", 32},
    DTypeEntry{DType::I32, "I32", 32},
    DTypeEntry{DType::F32, "F32", 32},
    DTypeEntry{DType::U64, "U64", 64},
    DTypeEntry{DType::I64, "I64", 64},
    DTypeEntry{DType::F64, "F64", 64},
    DTypeEntry{DType::C64, "C64", 64},
    DTypeEntry{DType::F8_E4M3, "F8_E4M3", 8},
    DTypeEntry{DType::F8_E5M2, "F8_E5M2", 8},
    DTypeEntry{DType::F8_E8M0, "F8_E8M0", 8},
    DTypeEntry{DType::F8_E4M3FNUZ, "F8_E4M3FNUZ", 8},
    DTypeEntry{DType::F8_E5M2FNUZ, "F8_E5M2FNUZ", 8},
    DTypeEntry{DType::F4, "F4", 4},
    DTypeEntry{DType::F6_E2M3, "F6_E2M3", 6},
    DTypeEntry{DType::F6_E3M2, "F6_E3M2", 6},
};

// Block sizes from ggml.c type_traits.
constexpr std::array kGgmlTypes{
    GgmlTypeInfo{GgmlType::F32, "F32", 1, 4, false},
    GgmlTypeInfo{GgmlType::F16, "F16", 1, 2, false},
    GgmlTypeInfo{GgmlType::Q4_0, "Q4_0", 32, 18, true},
    GgmlTypeInfo{GgmlType::Q4_1, "Q4_1", 32, 20, true},
    GgmlTypeInfo{GgmlType::Q5_0, "Q5_0", 32, 22, true},
    GgmlTypeInfo{GgmlType::Q5_1, "Q5_1", 32, 24, true},
    GgmlTypeInfo{GgmlType::Q8_0, "Q8_0", 32, 34, true},
    GgmlTypeInfo{GgmlType::Q8_1, "Q8_1", 32, 36, true},
    GgmlTypeInfo{GgmlType::Q2_K, "Q2_K", 256, 84, true},
    GgmlTypeInfo{GgmlType::Q3_K, "Q3_K", 256, 110, true},
    GgmlTypeInfo{GgmlType::Q4_K, "Q4_K", 256, 144, true},
    GgmlTypeInfo{GgmlType::Q5_K, "Q5_K", 256, 176, true},
    GgmlTypeInfo{GgmlType::Q6_K, "Q6_K", 256, 210, true},
    GgmlTypeInfo{GgmlType::Q8_K, "Q8_K", 256, 292, true},
    GgmlTypeInfo{GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66, true},
    GgmlTypeInfo{GgmlType::IQ2_XS, "IQ2_XS", 256, 74, true},
    GgmlTypeInfo{GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98, true},
    GgmlTypeInfo{GgmlType::IQ1_S, "IQ1_S", 256, 50, true},
    GgmlTypeInfo{GgmlType::IQ4_NL, "IQ4_NL", 32, 18, true},
    GgmlTypeInfo{GgmlType::IQ3_S, "IQ3_S", 256, 110, true},
    GgmlTypeInfo{GgmlType::IQ2_S, "IQ2_S", 256, 82, true},
    GgmlTypeInfo{GgmlType::IQ4_XS, "IQ4_XS", 256, 136, true},
    GgmlTypeInfo{GgmlType::I8, "I8", 1, 1, false},
    GgmlTypeInfo{GgmlType::I16, "I16", 1, 2, false},
    GgmlTypeInfo{GgmlType::I32, "I32", 1, 4, false},
    GgmlTypeInfo{GgmlType::I64, "I64", 1, 8, false},
    GgmlTypeInfo{GgmlType::F64, "F64", 1, 8, false},
    GgmlTypeInfo{GgmlType::IQ1_M, "IQ1_M", 256, 56, true},
    GgmlTypeInfo{GgmlType::BF16, "BF16", 1, 2, false},
    GgmlTypeInfo{GgmlType::TQ1_0, "TQ1_0", 256, 54, true},
    GgmlTypeInfo{GgmlType::TQ2_0, "TQ2_0", 256, 66, true},
    GgmlTypeInfo{GgmlType::MXFP4, "MXFP4", 32, 17, true},
};

}  // namespace

std::optional<DType> dtypeFromSafetensorsName(std::string_view name)
{
    for (const auto& entry : kDTypes)
        if (entry.name == name)
            return entry.type;
    return std::nullopt;
}

std::string_view dtypeName(DType type)
{
    return kDTypes[static_cast<std::size_t>(type)].name;
}

int dtypeBits(DType type)
{
    return kDTypes[static_cast<std::size_t>(type)].bits;
}

const GgmlTypeInfo* ggmlTypeInfo(std::uint32_t id)
{
    for (const auto& info : kGgmlTypes)
        if (static_cast<std::uint32_t>(info.type) == id)
            return &info;
    return nullptr;
}

const GgmlTypeInfo& ggmlTypeInfo(GgmlType type)
{
    return *ggmlTypeInfo(static_cast<std::uint32_t>(type));
}

}  // namespace vireo::tensorfile
