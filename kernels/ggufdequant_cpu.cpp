// CPU reference of vireo::dequantize_gguf: blocks are decoded in parallel chunks.
#include "kernels/ggufdequant.h"
#include "kernels/ggufblocks.h"
#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

namespace vireo::kernels {

namespace {

template <typename Out>
void decodeAll(const std::uint8_t* in, Out* out, std::int64_t nBlocks, int type, gguf::BlockTraits traits)
{
    const std::int64_t grain = std::max<std::int64_t>(1, 16384 / traits.elements);
    at::parallel_for(0, nBlocks, grain, [&](std::int64_t begin, std::int64_t end) {
        float tmp[256];
        for (std::int64_t b = begin; b < end; ++b) {
            Out* dst = out + b * traits.elements;
            if constexpr (std::is_same_v<Out, float>) {
                gguf::decodeBlock(type, in + b * traits.bytes, dst);
            } else {
                gguf::decodeBlock(type, in + b * traits.bytes, tmp);
                for (int i = 0; i < traits.elements; ++i)
                    dst[i] = static_cast<Out>(tmp[i]);
            }
        }
    });
}

at::Tensor dequantizeGgufCpu(const at::Tensor& blocks, std::int64_t ggmlType, c10::IntArrayRef shape, c10::ScalarType dtype)
{
    TORCH_CHECK(blocks.device().is_cpu(), "dequantize_gguf (CPU): blocks must be on the CPU");
    const auto traits = detail::checkGgufArgs(blocks, ggmlType, shape, dtype);
    const auto in = blocks.contiguous();
    auto out = at::empty(shape, in.options().dtype(dtype));
    const std::int64_t nBlocks = in.numel() / traits.bytes;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "dequantize_gguf_cpu", [&] {
        decodeAll<scalar_t>(in.data_ptr<std::uint8_t>(), out.data_ptr<scalar_t>(), nBlocks, static_cast<int>(ggmlType), traits);
    });
    return out;
}

} // namespace

bool ggufTypeSupported(std::int64_t ggmlType)
{
    return gguf::blockTraits(static_cast<int>(ggmlType)).elements > 0;
}

at::Tensor dequantizeGguf(const at::Tensor& blocks, std::int64_t ggmlType, c10::IntArrayRef shape, c10::ScalarType dtype)
{
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("vireo::dequantize_gguf", "").typed<at::Tensor(
        const at::Tensor&, std::int64_t, c10::IntArrayRef, c10::ScalarType)>();
    return op.call(blocks, ggmlType, shape, dtype);
}

TORCH_LIBRARY_IMPL(vireo, CPU, m)
{
    m.impl("dequantize_gguf", &dequantizeGgufCpu);
}

} // namespace vireo::kernels
