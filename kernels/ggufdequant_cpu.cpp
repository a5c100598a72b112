// CPU reference of vireo::dequantize_gguf: blocks decoded in parallel chunks, with the ggml
// type fixed at compile time so the per-block switch folds away and the inner loops
// vectorize.
#include "kernels/ggufdequant.h"
#include "kernels/ggufblocks.h"
#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

namespace vireo::kernels {

namespace {

template <int Type, typename Out>
void decodeRange(const std::uint8_t* in, Out* out, std::int64_t begin, std::int64_t end)
{
    constexpr auto traits = gguf::blockTraits(Type);
    alignas(64) float tmp[traits.elements];
    for (std::int64_t b = begin; b < end; ++b) {
        Out* dst = out + b * traits.elements;
        if constexpr (std::is_same_v<Out, float>) {
            gguf::decodeBlock(Type, in + b * traits.bytes, dst);
        } else {
            gguf::decodeBlock(Type, in + b * traits.bytes, tmp);
            for (int i = 0; i < traits.elements; ++i)
                dst[i] = static_cast<Out>(tmp[i]);
        }
    }
}

template <typename Out>
void decodeAll(int type, const std::uint8_t* in, Out* out, std::int64_t nBlocks)
{
    const auto traits = gguf::blockTraits(type);
    const std::int64_t grain = std::max<std::int64_t>(1, 32768 / traits.elements);
    at::parallel_for(0, nBlocks, grain, [&](std::int64_t begin, std::int64_t end) {
        switch (type) {
        case gguf::kQ4_0: return decodeRange<gguf::kQ4_0>(in, out, begin, end);
        case gguf::kQ4_1: return decodeRange<gguf::kQ4_1>(in, out, begin, end);
        case gguf::kQ5_0: return decodeRange<gguf::kQ5_0>(in, out, begin, end);
        case gguf::kQ5_1: return decodeRange<gguf::kQ5_1>(in, out, begin, end);
        case gguf::kQ8_0: return decodeRange<gguf::kQ8_0>(in, out, begin, end);
        case gguf::kQ2_K: return decodeRange<gguf::kQ2_K>(in, out, begin, end);
        case gguf::kQ3_K: return decodeRange<gguf::kQ3_K>(in, out, begin, end);
        case gguf::kQ4_K: return decodeRange<gguf::kQ4_K>(in, out, begin, end);
        case gguf::kQ5_K: return decodeRange<gguf::kQ5_K>(in, out, begin, end);
        case gguf::kQ6_K: return decodeRange<gguf::kQ6_K>(in, out, begin, end);
        case gguf::kF32: return decodeRange<gguf::kF32>(in, out, begin, end);
        case gguf::kF16: return decodeRange<gguf::kF16>(in, out, begin, end);
        case gguf::kBF16: return decodeRange<gguf::kBF16>(in, out, begin, end);
        default: TORCH_CHECK(false, "dequantize_gguf: ggml type ", type, " has no decoder");
        }
    });
}

void dequantizeInto(const at::Tensor& blocks, std::int64_t ggmlType, at::Tensor& out)
{
    TORCH_CHECK(blocks.device().is_cpu() && out.device().is_cpu(), "dequantize_gguf (CPU): tensors must be on the CPU");
    TORCH_CHECK(out.is_contiguous(), "dequantize_gguf: out must be contiguous");
    const auto traits = detail::checkGgufArgs(blocks, ggmlType, out.sizes(), out.scalar_type());
    const auto in = blocks.contiguous();
    const std::int64_t nBlocks = in.numel() / traits.bytes;
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "dequantize_gguf_cpu",
        [&] { decodeAll<scalar_t>(static_cast<int>(ggmlType), in.data_ptr<std::uint8_t>(), out.data_ptr<scalar_t>(), nBlocks); });
}

at::Tensor dequantizeGgufCpu(const at::Tensor& blocks, std::int64_t ggmlType, c10::IntArrayRef shape, c10::ScalarType dtype)
{
    detail::checkGgufArgs(blocks, ggmlType, shape, dtype);
    auto out = at::empty(shape, blocks.options().dtype(dtype));
    dequantizeInto(blocks, ggmlType, out);
    return out;
}

at::Tensor& dequantizeGgufCpuOut(const at::Tensor& blocks, std::int64_t ggmlType, at::Tensor& out)
{
    dequantizeInto(blocks, ggmlType, out);
    return out;
}

}  // namespace

bool ggufTypeSupported(std::int64_t ggmlType)
{
    return gguf::blockTraits(static_cast<int>(ggmlType)).elements > 0;
}

at::Tensor dequantizeGguf(const at::Tensor& blocks, std::int64_t ggmlType, c10::IntArrayRef shape, c10::ScalarType dtype)
{
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::dequantize_gguf", "")
                               .typed<at::Tensor(const at::Tensor&, std::int64_t, c10::IntArrayRef, c10::ScalarType)>();
    return op.call(blocks, ggmlType, shape, dtype);
}

at::Tensor& dequantizeGgufInto(const at::Tensor& blocks, std::int64_t ggmlType, at::Tensor& out)
{
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::dequantize_gguf", "out")
                               .typed<at::Tensor&(const at::Tensor&, std::int64_t, at::Tensor&)>();
    return op.call(blocks, ggmlType, out);
}

TORCH_LIBRARY_IMPL(vireo, CPU, m)
{
    m.impl("dequantize_gguf", &dequantizeGgufCpu);
    m.impl("dequantize_gguf.out", &dequantizeGgufCpuOut);
}

}  // namespace vireo::kernels
