#include "inference/families/previewprojection.h"

#include <ATen/ATen.h>

namespace vireo::pipelines {

at::Tensor fitPreviewProjection(const at::Tensor& latents, const at::Tensor& decoded)
{
    const auto h = latents.size(1), w = latents.size(2);
    const auto pooled = at::adaptive_avg_pool2d(decoded.to(at::kDouble).cpu(), {h, w});  // [3, h, w]
    const auto y = pooled.flatten(1).t();  // [cells, 3]
    const auto x = at::cat({latents.to(at::kDouble).cpu().flatten(1).t(), at::ones({h * w, 1}, at::kDouble)}, 1);
    // Ridge regression: the fit stays sane with nearly as many unknowns as samples.
    const auto xtx = x.t().matmul(x);
    const double lambda = 1e-2 * xtx.diagonal().mean().item<double>();
    const auto a = at::linalg_solve(xtx + lambda * at::eye(xtx.size(0), at::kDouble), x.t().matmul(y));
    return a.to(at::kFloat);
}

at::Tensor projectPreview(const at::Tensor& projection, const at::Tensor& latents)
{
    const auto channels = projection.size(0) - 1;
    const auto x = latents.to(at::kFloat).cpu();
    TORCH_CHECK(x.size(-1) == channels, "preview projection: the latents have ", x.size(-1), " channels, the map ", channels);
    auto shape = x.sizes().vec();
    shape.back() = 3;
    return at::addmm(projection[channels], x.reshape({-1, channels}), projection.narrow(0, 0, channels)).view(shape);
}

}  // namespace vireo::pipelines
