#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace vireo::tensorfile {

// Element types a safetensors header can name (safetensors/src/tensor.rs: Dtype).
enum class DType : std::uint8_t {
    Bool,
    U8,
    I8,
    U16,
    I16,
    F16,
    BF16,
    U32,
    I32,
    F32,
    U64,
    I64,
    F64,
    C64,
    F8_E4M3,
    F8_E5M2,
    F8_E8M0,
    F8_E4M3FNUZ,
    F8_E5M2FNUZ,
    F4,
    F6_E2M3,
    F6_E3M2,
};

std::optional<DType> dtypeFromSafetensorsName(std::string_view name);
std::string_view dtypeName(DType type);
int dtypeBits(DType type);

// ggml tensor types by their on-disk id (ggml.h). Ids 4, 5 and 31-33, 36-38 were removed
// from ggml and are not listed, so a file using them is rejected.
enum class GgmlType : std::uint32_t {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q8_1 = 9,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    Q8_K = 15,
    IQ2_XXS = 16,
    IQ2_XS = 17,
    IQ3_XXS = 18,
    IQ1_S = 19,
    IQ4_NL = 20,
    IQ3_S = 21,
    IQ2_S = 22,
    IQ4_XS = 23,
    I8 = 24,
    I16 = 25,
    I32 = 26,
    I64 = 27,
    F64 = 28,
    IQ1_M = 29,
    BF16 = 30,
    TQ1_0 = 34,
    TQ2_0 = 35,
    MXFP4 = 39,
};

struct GgmlTypeInfo {
    GgmlType type;
    std::string_view name;
    std::uint32_t blockElements;  // elements per block along ne[0]
    std::uint32_t blockBytes;  // bytes per block
    bool quantized;
};

// nullptr for an id that is not a ggml type (or one ggml removed).
const GgmlTypeInfo* ggmlTypeInfo(std::uint32_t id);
const GgmlTypeInfo& ggmlTypeInfo(GgmlType type);

}  // namespace vireo::tensorfile
