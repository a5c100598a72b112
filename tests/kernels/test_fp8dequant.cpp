// The CPU reference of vireo::dequantize_fp8 against the definition computed with torch ops.
#include "tests/harness/vireotest.h"
#include "tests/kernels/fp8cases.h"

#include "kernels/fp8dequant.h"

using namespace vireo;

VT_TEST(cpuReferenceMatchesTheDefinition)
{
    for (const auto& c : test::fp8Cases())
        for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
            const auto got = kernels::dequantizeFp8(c.weight, c.scale, dtype, c.blockSize);
            VT_COMPARE(got.scalar_type(), dtype);
            VT_CHECK_MSG(got.sizes() == c.weight.sizes(), c.name);
            VT_CHECK_MSG(at::equal(got, c.expected.to(dtype)), c.name << " as " << dtype << " differs");
        }
}

VT_TEST(scalesThatFitNoLayoutAreErrors)
{
    const auto w = at::randn({8, 32}).to(at::kFloat8_e4m3fn);
    // [3]: not a row count; [8,2,2]: 3-D; [3,5]: does not divide 8x32 (no block size given).
    for (const auto& bad : {at::ones({3}), at::ones({8, 2, 2}), at::ones({3, 5})}) {
        bool threw = false;
        try {
            (void)kernels::dequantizeFp8(w, bad, at::kFloat);
        } catch (const c10::Error& e) {
            threw = std::string(e.what()).find("dequantize_fp8") != std::string::npos;
        }
        VT_CHECK_MSG(threw, "scale " << bad.sizes() << " was accepted");
    }
    bool threw = false;
    try {
        (void)kernels::dequantizeFp8(at::randn({4, 4}), at::ones({}), at::kFloat);
    } catch (const c10::Error& e) {
        threw = std::string(e.what()).find("float8_e4m3fn or float8_e5m2") != std::string::npos;
    }
    VT_CHECK(threw);
}

VT_MAIN("TestFp8Dequant")
