// CPU reference of vireo::dequantize_nf4.
#include "kernels/nf4dequant.h"
#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

namespace vireo::kernels {

namespace {

at::Tensor dequantizeNf4Cpu(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code,
    std::int64_t blockSize, c10::IntArrayRef shape, c10::ScalarType dtype)
{
    TORCH_CHECK(packed.device().is_cpu(), "dequantize_nf4 (CPU): tensors must be on the CPU");
    const auto numel = detail::checkNf4Args(packed, absmax, code, blockSize, shape, dtype);
    const auto p = packed.contiguous();
    const auto a = absmax.contiguous();
    const auto c = code.contiguous();
    auto out = at::empty(shape, p.options().dtype(dtype));
    const auto* q = p.data_ptr<std::uint8_t>();
    const auto* am = a.data_ptr<float>();
    const auto* table = c.data_ptr<float>();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "dequantize_nf4_cpu", [&] {
        auto* o = out.data_ptr<scalar_t>();
        at::parallel_for(0, numel, 32768, [&](std::int64_t begin, std::int64_t end) {
            for (std::int64_t i = begin; i < end; ++i) {
                const std::uint8_t byte = q[i / 2];
                const int nibble = (i % 2 == 0) ? (byte >> 4) : (byte & 0xF);
                o[i] = static_cast<scalar_t>(table[nibble] * am[i / blockSize]);
            }
        });
    });
    return out;
}

} // namespace

at::Tensor dequantizeNf4(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t blockSize,
    c10::IntArrayRef shape, c10::ScalarType dtype)
{
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("vireo::dequantize_nf4", "").typed<at::Tensor(
        const at::Tensor&, const at::Tensor&, const at::Tensor&, std::int64_t, c10::IntArrayRef, c10::ScalarType)>();
    return op.call(packed, absmax, code, blockSize, shape, dtype);
}

TORCH_LIBRARY_IMPL(vireo, CPU, m)
{
    m.impl("dequantize_nf4", &dequantizeNf4Cpu);
}

} // namespace vireo::kernels
