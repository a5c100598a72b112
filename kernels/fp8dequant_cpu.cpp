// CPU reference of vireo::dequantize_fp8. Each fp8 byte goes through a 256-entry table of
// its exact float value (the same value c10's conversion gives), then one multiply.
#include "kernels/fp8dequant.h"
#include "kernels/fp8dequant_common.h"
#include "kernels/opcheck.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <array>

namespace vireo::kernels {

namespace {

using detail::ScaleLayout;

template <typename In>
const std::array<float, 256>& valueTable()
{
    static const std::array<float, 256> table = [] {
        std::array<float, 256> t{};
        for (int i = 0; i < 256; ++i)
            t[i] = static_cast<float>(In(static_cast<std::uint8_t>(i), In::from_bits()));
        return t;
    }();
    return table;
}

template <typename Out>
void scaleRun(const std::uint8_t* q, const float* table, float s, Out* out, std::int64_t n)
{
    for (std::int64_t c = 0; c < n; ++c)
        out[c] = static_cast<Out>(table[q[c]] * s);
}

template <typename In, typename Out>
void dequantizeRows(const std::uint8_t* q, const float* scale, Out* out, const detail::Fp8Geometry& g)
{
    const float* table = valueTable<In>().data();
    const std::int64_t grain = std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(g.cols, 1));
    at::parallel_for(0, g.rows, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
            const std::uint8_t* row = q + r * g.cols;
            Out* dst = out + r * g.cols;
            if (g.layout != ScaleLayout::Block) {
                scaleRun(row, table, g.layout == ScaleLayout::PerRow ? scale[r] : scale[0], dst, g.cols);
                continue;
            }
            const float* rowScales = scale + (r / g.blockRows) * g.scaleCols;
            for (std::int64_t c = 0; c < g.cols; c += g.blockCols)
                scaleRun(row + c, table, rowScales[c / g.blockCols], dst + c, std::min(g.blockCols, g.cols - c));
        }
    });
}

void dequantizeInto(const at::Tensor& weight, const at::Tensor& scale, c10::IntArrayRef blockSize, at::Tensor& out)
{
    TORCH_CHECK(
        weight.device().is_cpu() && scale.device().is_cpu() && out.device().is_cpu(), "dequantize_fp8 (CPU): tensors must be on the CPU");
    detail::checkFloatOutput("dequantize_fp8", out.scalar_type());
    TORCH_CHECK(out.is_contiguous() && out.sizes() == weight.sizes(), "dequantize_fp8: out must be contiguous and shaped ", weight.sizes(),
        ", got ", out.sizes());
    const auto g = detail::fp8Geometry(weight, scale, blockSize);
    const auto q = weight.contiguous();
    const auto s = scale.contiguous();
    const auto* bytes = static_cast<const std::uint8_t*>(q.data_ptr());
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, out.scalar_type(), "dequantize_fp8_cpu", [&] {
        if (q.scalar_type() == at::kFloat8_e4m3fn)
            dequantizeRows<c10::Float8_e4m3fn>(bytes, s.data_ptr<float>(), out.data_ptr<scalar_t>(), g);
        else
            dequantizeRows<c10::Float8_e5m2>(bytes, s.data_ptr<float>(), out.data_ptr<scalar_t>(), g);
    });
}

at::Tensor dequantizeFp8Cpu(const at::Tensor& weight, const at::Tensor& scale, c10::ScalarType dtype, c10::IntArrayRef blockSize)
{
    detail::checkFloatOutput("dequantize_fp8", dtype);
    auto out = at::empty(weight.sizes(), weight.options().dtype(dtype));
    dequantizeInto(weight, scale, blockSize, out);
    return out;
}

at::Tensor& dequantizeFp8CpuOut(const at::Tensor& weight, const at::Tensor& scale, c10::IntArrayRef blockSize, at::Tensor& out)
{
    dequantizeInto(weight, scale, blockSize, out);
    return out;
}

}  // namespace

at::Tensor dequantizeFp8(const at::Tensor& weight, const at::Tensor& scale, c10::ScalarType dtype, c10::IntArrayRef blockSize)
{
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::dequantize_fp8", "")
                               .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::ScalarType, c10::IntArrayRef)>();
    return op.call(weight, scale, dtype, blockSize);
}

at::Tensor& dequantizeFp8Into(const at::Tensor& weight, const at::Tensor& scale, c10::IntArrayRef blockSize, at::Tensor& out)
{
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow("vireo::dequantize_fp8", "out")
                               .typed<at::Tensor&(const at::Tensor&, const at::Tensor&, c10::IntArrayRef, at::Tensor&)>();
    return op.call(weight, scale, blockSize, out);
}

TORCH_LIBRARY_IMPL(vireo, CPU, m)
{
    m.impl("dequantize_fp8", &dequantizeFp8Cpu);
    m.impl("dequantize_fp8.out", &dequantizeFp8CpuOut);
}

}  // namespace vireo::kernels
