#pragma once

// Shared between the CPU reference and the CUDA kernel: how a scale tensor maps onto the
// weight, decided once on the host.

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdint>

namespace vireo::kernels::detail {

enum class ScaleLayout : int { PerTensor = 0, PerRow = 1, Block = 2 };

struct Fp8Geometry {
    std::int64_t rows = 0;  // out
    std::int64_t cols = 0;  // product of the remaining dims
    ScaleLayout layout = ScaleLayout::PerTensor;
    std::int64_t blockRows = 1;
    std::int64_t blockCols = 1;
    std::int64_t scaleCols = 1;  // columns of the block grid
};

inline std::int64_t ceilDiv(std::int64_t a, std::int64_t b)
{
    return (a + b - 1) / b;
}

// blockSize is {rows, cols} of one scale block, or empty to infer it from the grid; a grid
// only determines the block when it divides the weight exactly (37 rows in 3 blocks could be
// blocks of 13 to 18), so an inexact grid needs the size from the checkpoint's convention.
inline Fp8Geometry fp8Geometry(const at::Tensor& weight, const at::Tensor& scale, c10::IntArrayRef blockSize)
{
    TORCH_CHECK(weight.scalar_type() == at::kFloat8_e4m3fn || weight.scalar_type() == at::kFloat8_e5m2,
        "dequantize_fp8: weight must be float8_e4m3fn or float8_e5m2, got ", weight.scalar_type());
    TORCH_CHECK(scale.scalar_type() == at::kFloat, "dequantize_fp8: scale must be float32, got ", scale.scalar_type());
    TORCH_CHECK(weight.dim() >= 1, "dequantize_fp8: weight must have at least 1 dim, got a scalar");
    Fp8Geometry g;
    g.rows = weight.size(0);
    g.cols = weight.dim() == 1 ? 1 : weight.numel() / std::max<std::int64_t>(g.rows, 1);
    const auto s = scale.sizes();
    if (scale.numel() == 1) {
        g.layout = ScaleLayout::PerTensor;
    } else if ((s.size() == 1 && s[0] == g.rows) || (s.size() == 2 && s[0] == g.rows && s[1] == 1)) {
        g.layout = ScaleLayout::PerRow;
    } else if (s.size() == 2 && s[0] > 0 && s[1] > 0) {
        g.layout = ScaleLayout::Block;
        g.scaleCols = s[1];
        if (blockSize.empty()) {
            TORCH_CHECK(g.rows % s[0] == 0 && g.cols % s[1] == 0, "dequantize_fp8: block scale ", scale.sizes(),
                " does not divide a weight of ", g.rows, "x", g.cols, " evenly; pass the block size");
            g.blockRows = g.rows / s[0];
            g.blockCols = g.cols / s[1];
        } else {
            TORCH_CHECK(blockSize.size() == 2 && blockSize[0] > 0 && blockSize[1] > 0,
                "dequantize_fp8: block size must be two positive numbers, got ", blockSize);
            g.blockRows = blockSize[0];
            g.blockCols = blockSize[1];
        }
        TORCH_CHECK(ceilDiv(g.rows, g.blockRows) == s[0] && ceilDiv(g.cols, g.blockCols) == s[1], "dequantize_fp8: block scale ",
            scale.sizes(), " does not tile a weight of ", g.rows, "x", g.cols);
    } else {
        TORCH_CHECK(false, "dequantize_fp8: scale of shape ", scale.sizes(), " fits no layout for weight ", weight.sizes(),
            " (expected numel 1, [", g.rows, "], [", g.rows, ",1] or a 2-D block grid)");
    }
    return g;
}

}  // namespace vireo::kernels::detail
