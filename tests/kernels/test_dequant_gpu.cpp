// GGUF and NF4 CUDA kernels against their CPU references, bit for bit, on the quantization
// fixtures. Needs a CUDA device (label gpu).
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "kernels/ggufdequant.h"
#include "kernels/nf4dequant.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

using namespace vireo;

VT_TEST(ggufCudaMatchesCpu)
{
    VT_CHECK_MSG(at::cuda::is_available(), "no CUDA device: run this test on the GPU machine");
    at::manual_seed(11);
    for (std::int64_t type : {2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 1, 30}) {
        const std::int64_t blockElements = type >= 10 && type <= 14 ? 256 : (type == 1 || type == 30 ? 1 : 32);
        const std::int64_t blockBytes = type == 2 ? 18 : type == 3 ? 20 : type == 6 ? 22 : type == 7 ? 24 : type == 8 ? 34
            : type == 10 ? 84 : type == 11 ? 110 : type == 12 ? 144 : type == 13 ? 176 : type == 14 ? 210 : 2;
        const std::vector<std::int64_t> shape{64, 4 * blockElements * (blockElements == 1 ? 64 : 1)};
        const auto blocks = at::randint(0, 256, {shape[0] * shape[1] / blockElements * blockBytes}, at::kByte);
        const auto cpu = kernels::dequantizeGguf(blocks, type, shape, at::kFloat);
        const auto gpu = kernels::dequantizeGguf(blocks.cuda(), type, shape, at::kFloat).cpu();
        // Random bytes hold NaN fp16 scales; compare bit patterns so NaN == NaN.
        VT_CHECK_MSG(at::equal(cpu.view(at::kInt), gpu.view(at::kInt)), "type " << type << " differs");
        VT_CHECK(at::equal(kernels::dequantizeGguf(blocks, type, shape, at::kBFloat16).view(at::kShort),
            kernels::dequantizeGguf(blocks.cuda(), type, shape, at::kBFloat16).cpu().view(at::kShort)));
    }
}

VT_TEST(nf4CudaMatchesCpu)
{
    VT_CHECK(at::cuda::is_available());
    const auto packed = at::randint(0, 256, {4096}, at::kByte);
    const auto absmax = at::rand({128});
    const auto code = at::linspace(-1, 1, 16);
    const auto cpu = kernels::dequantizeNf4(packed, absmax, code, 64, {64, 128}, at::kFloat);
    const auto gpu = kernels::dequantizeNf4(packed.cuda(), absmax.cuda(), code.cuda(), 64, {64, 128}, at::kFloat).cpu();
    VT_CHECK(at::equal(cpu, gpu));
}

VT_MAIN("TestDequantGpu")
