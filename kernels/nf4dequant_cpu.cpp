// CPU reference of vireo::dequantize_nf4, block by block so each block's absmax is loaded once.
#include "kernels/nf4dequant.h"
#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

namespace vireo::kernels {

namespace {

template <typename Out>
void decode(const std::uint8_t* q, const float* absmax, const float* table, Out* out, std::int64_t numel, std::int64_t blockSize)
{
    const std::int64_t blocks = (numel + blockSize - 1) / blockSize;
    at::parallel_for(0, blocks, std::max<std::int64_t>(1, 32768 / blockSize), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t b = begin; b < end; ++b) {
            const float a = absmax[b];
            const std::int64_t first = b * blockSize;
            const std::int64_t last = std::min(numel, first + blockSize);
            // Block sizes are even, so a block starts on a byte; a trailing odd element is
            // the high nibble of the last byte.
            std::int64_t i = first;
            for (; i + 1 < last; i += 2) {
                const std::uint8_t byte = q[i / 2];
                out[i] = static_cast<Out>(table[byte >> 4] * a);
                out[i + 1] = static_cast<Out>(table[byte & 0xF] * a);
            }
            if (i < last)
                out[i] = static_cast<Out>(table[q[i / 2] >> 4] * a);
        }
    });
}

void dequantizeInto(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize, at::Tensor& out)
{
    TORCH_CHECK(packed.device().is_cpu() && out.device().is_cpu(), "dequantize_nf4 (CPU): tensors must be on the CPU");
    TORCH_CHECK(out.is_contiguous(), "dequantize_nf4: out must be contiguous");
    const auto numel = detail::checkNf4Args(packed, absmax, code, blockSize, out.sizes(), out.scalar_type());
    const auto p = packed.contiguous();
    const auto a = absmax.contiguous();
    const auto c = code.contiguous();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "dequantize_nf4_cpu",
        [&] { decode(p.data_ptr<std::uint8_t>(), a.data_ptr<float>(), c.data_ptr<float>(), out.data_ptr<scalar_t>(), numel, blockSize); });
}

at::Tensor dequantizeNf4Cpu(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize,
    c10::IntArrayRef shape, c10::ScalarType dtype)
{
    detail::checkNf4Args(packed, absmax, code, blockSize, shape, dtype);
    auto out = at::empty(shape, packed.options().dtype(dtype));
    dequantizeInto(packed, absmax, code, blockSize, out);
    return out;
}

at::Tensor& dequantizeNf4CpuOut(
    const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize, at::Tensor& out)
{
    dequantizeInto(packed, absmax, code, blockSize, out);
    return out;
}

}  // namespace

at::Tensor dequantizeNf4(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize,
    c10::IntArrayRef shape, c10::ScalarType dtype)
{
    static const auto op =
        c10::Dispatcher::singleton()
            .findSchemaOrThrow("vireo::dequantize_nf4", "")
            .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, std::int64_t, c10::IntArrayRef, c10::ScalarType)>();
    return op.call(packed, absmax, code, blockSize, shape, dtype);
}

at::Tensor& dequantizeNf4Into(
    const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize, at::Tensor& out)
{
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::dequantize_nf4", "out")
                               .typed<at::Tensor&(const at::Tensor&, const at::Tensor&, const at::Tensor&, std::int64_t, at::Tensor&)>();
    return op.call(packed, absmax, code, blockSize, out);
}

TORCH_LIBRARY_IMPL(vireo, CPU, m)
{
    m.impl("dequantize_nf4", &dequantizeNf4Cpu);
    m.impl("dequantize_nf4.out", &dequantizeNf4CpuOut);
}

}  // namespace vireo::kernels
