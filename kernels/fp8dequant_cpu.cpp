// CPU reference of vireo::dequantize_fp8 and the op's schema.
#include "kernels/fp8dequant.h"
#include "kernels/fp8dequant_common.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/Dispatch.h>
#include <torch/library.h>

namespace vireo::kernels {

namespace {

using detail::ScaleLayout;

template <typename In, typename Out>
void dequantizeRows(const In* q, const float* scale, Out* out, const detail::Fp8Geometry& g)
{
    at::parallel_for(0, g.rows, 16, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r)
            for (std::int64_t c = 0; c < g.cols; ++c) {
                float s = scale[0];
                if (g.layout == ScaleLayout::PerRow)
                    s = scale[r];
                else if (g.layout == ScaleLayout::Block)
                    s = scale[(r / g.blockRows) * g.scaleCols + c / g.blockCols];
                out[r * g.cols + c] = static_cast<Out>(static_cast<float>(q[r * g.cols + c]) * s);
            }
    });
}

at::Tensor dequantizeFp8Cpu(const at::Tensor& weight, const at::Tensor& scale, c10::ScalarType dtype, c10::IntArrayRef blockSize)
{
    TORCH_CHECK(weight.device().is_cpu() && scale.device().is_cpu(), "dequantize_fp8 (CPU): tensors must be on the CPU");
    TORCH_CHECK(dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf,
        "dequantize_fp8: output dtype must be float32, bfloat16 or float16, got ", dtype);
    const auto g = detail::fp8Geometry(weight, scale, blockSize);
    const auto q = weight.contiguous();
    const auto s = scale.contiguous();
    auto out = at::empty(weight.sizes(), weight.options().dtype(dtype));
    AT_DISPATCH_SWITCH(q.scalar_type(), "dequantize_fp8_cpu",
        AT_DISPATCH_CASE(at::kFloat8_e4m3fn, [&] {
            using In = scalar_t;
            AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "dequantize_fp8_cpu_out", [&] {
                dequantizeRows<In, scalar_t>(q.data_ptr<In>(), s.data_ptr<float>(), out.data_ptr<scalar_t>(), g);
            });
        }) AT_DISPATCH_CASE(at::kFloat8_e5m2, [&] {
            using In = scalar_t;
            AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "dequantize_fp8_cpu_out", [&] {
                dequantizeRows<In, scalar_t>(q.data_ptr<In>(), s.data_ptr<float>(), out.data_ptr<scalar_t>(), g);
            });
        }));
    return out;
}

} // namespace

at::Tensor dequantizeFp8(const at::Tensor& weight, const at::Tensor& scale, c10::ScalarType dtype, c10::IntArrayRef blockSize)
{
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("vireo::dequantize_fp8", "").typed<at::Tensor(
        const at::Tensor&, const at::Tensor&, c10::ScalarType, c10::IntArrayRef)>();
    return op.call(weight, scale, dtype, blockSize);
}

TORCH_LIBRARY_IMPL(vireo, CPU, m)
{
    m.impl("dequantize_fp8", &dequantizeFp8Cpu);
}

} // namespace vireo::kernels
