// GGUF and NF4 CUDA kernels against their CPU references, bit for bit. Needs a CUDA device
// (label gpu).
#include "tests/harness/vireotest.h"

#include "kernels/ggufblocks.h"
#include "kernels/ggufdequant.h"
#include "kernels/nf4dequant.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <cstring>

using namespace vireo;

namespace {

namespace g = kernels::gguf;

const std::vector<int> kTypes{
    g::kQ4_0, g::kQ4_1, g::kQ5_0, g::kQ5_1, g::kQ8_0, g::kQ2_K, g::kQ3_K, g::kQ4_K, g::kQ5_K, g::kQ6_K, g::kF16, g::kBF16, g::kF32};

// Random blocks; with finiteScales every fp16 scale is replaced by a finite value so the
// comparison is about real numbers, not NaN payloads (a GPU writes one canonical NaN where
// the CPU keeps the payload of the NaN scale it multiplied).
at::Tensor randomBlocks(int type, std::int64_t nBlocks, bool finiteScales)
{
    const auto traits = g::blockTraits(type);
    auto blocks = at::randint(0, 256, {nBlocks, traits.bytes}, at::kByte);
    if (finiteScales) {
        std::vector<int> scaleOffsets;
        switch (type) {
        case g::kQ4_0:
        case g::kQ5_0:
        case g::kQ8_0: scaleOffsets = {0}; break;
        case g::kQ4_1:
        case g::kQ5_1:
        case g::kQ4_K:
        case g::kQ5_K: scaleOffsets = {0, 2}; break;
        case g::kQ2_K: scaleOffsets = {80, 82}; break;
        case g::kQ3_K: scaleOffsets = {108}; break;
        case g::kQ6_K: scaleOffsets = {208}; break;
        case g::kF16: scaleOffsets = {0}; break;
        default: break;
        }
        for (int offset : scaleOffsets)
            blocks.select(1, offset + 1).bitwise_and_(0x3B);  // exponent below 0x1F: finite fp16
        if (type == g::kBF16)
            blocks.select(1, 1).bitwise_and_(0x3F);
        if (type == g::kF32)
            blocks.select(1, 3).bitwise_and_(0x3F);
    }
    return blocks.reshape({-1});
}

// Elements that differ, counting NaN as equal to NaN.
std::int64_t mismatches(const at::Tensor& cpu, const at::Tensor& gpu)
{
    const auto a = cpu.to(at::kFloat), b = gpu.cpu().to(at::kFloat);
    const auto bothNan = a.isnan() & b.isnan();
    const auto sameBits = a.view(at::kInt) == b.view(at::kInt);
    return (~(bothNan | sameBits)).sum().item<std::int64_t>();
}

}  // namespace

VT_TEST(everyGgufTypeMatchesTheCpuBitForBit)
{
    VT_CHECK_MSG(at::cuda::is_available(), "no CUDA device: run this test on the GPU machine");
    at::manual_seed(11);
    std::ostringstream failures;
    for (const bool finite : {true, false}) {
        for (const int type : kTypes) {
            const auto traits = g::blockTraits(type);
            // 3 rows of an odd number of blocks: runs of 8 values cross rows and, for 1-value
            // types, the tail is not a whole run.
            const std::int64_t perRow = traits.elements == 1 ? 777 : traits.elements * 5;
            const std::vector<std::int64_t> shape{3, perRow};
            const auto blocks = randomBlocks(type, shape[0] * shape[1] / traits.elements, finite);
            for (const auto dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
                const auto cpu = kernels::dequantizeGguf(blocks, type, shape, dtype);
                const auto gpu = kernels::dequantizeGguf(blocks.cuda(), type, shape, dtype);
                if (const auto bad = mismatches(cpu, gpu); bad != 0)
                    failures << " type " << type << " " << dtype << (finite ? " finite" : " random") << ": " << bad << " of " << cpu.numel()
                             << ";";
                // Into an output that starts 2 bytes off a 16-byte boundary: the scalar store path.
                auto backing = at::empty({cpu.numel() + 1}, at::TensorOptions().dtype(dtype).device(at::kCUDA));
                auto shifted = backing.narrow(0, 1, cpu.numel()).view(shape);
                kernels::dequantizeGgufInto(blocks.cuda(), type, shifted);
                if (const auto bad = mismatches(cpu, shifted); bad != 0)
                    failures << " type " << type << " " << dtype << " unaligned out: " << bad << ";";
            }
        }
    }
    VT_CHECK_MSG(failures.str().empty(), failures.str());
}

VT_TEST(ggufAtModelSizeMatchesTheCpu)
{
    VT_CHECK(at::cuda::is_available());
    at::manual_seed(12);
    for (const int type : {g::kQ4_K, g::kQ6_K, g::kQ8_0, g::kQ4_0}) {
        const auto traits = g::blockTraits(type);
        const std::vector<std::int64_t> shape{1024, 4096};
        const auto blocks = randomBlocks(type, shape[0] * shape[1] / traits.elements, true);
        const auto cpu = kernels::dequantizeGguf(blocks, type, shape, at::kBFloat16);
        const auto gpu = kernels::dequantizeGguf(blocks.cuda(), type, shape, at::kBFloat16);
        VT_CHECK_MSG(mismatches(cpu, gpu) == 0, "type " << type);
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
