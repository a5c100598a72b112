// The CUDA kernel against the CPU reference, bit for bit. Needs a CUDA device (label gpu).
#include "tests/harness/vireotest.h"
#include "tests/kernels/fp8cases.h"

#include "kernels/fp8dequant.h"

#include <ATen/cuda/CUDAContext.h>

using namespace vireo;

VT_TEST(cudaMatchesTheCpuReference)
{
    VT_CHECK_MSG(at::cuda::is_available(), "no CUDA device: run this test on the GPU machine");
    for (const auto& c : test::fp8Cases())
        for (auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
            const auto cpu = kernels::dequantizeFp8(c.weight, c.scale, dtype, c.blockSize);
            const auto gpu = kernels::dequantizeFp8(c.weight.cuda(), c.scale.cuda(), dtype, c.blockSize);
            VT_CHECK(gpu.is_cuda());
            VT_CHECK_MSG(at::equal(gpu.cpu(), cpu), c.name << " as " << dtype << " differs from the CPU reference");
        }
}

VT_TEST(scaleOnAnotherDeviceIsAnError)
{
    VT_CHECK(at::cuda::is_available());
    bool threw = false;
    try {
        (void)kernels::dequantizeFp8(at::randn({4, 16}).to(at::kFloat8_e4m3fn).cuda(), at::ones({}), at::kFloat);
    } catch (const c10::Error& e) {
        threw = std::string(e.what()).find("scale is on") != std::string::npos;
    }
    VT_CHECK(threw);
}

VT_MAIN("TestFp8DequantGpu")
