#include "inference/models/ltx2/ltx2diffusiondecoder.h"

#include "inference/models/ltx2/ltx2config.h"
#include "inference/models/ltx2/ltx2layers.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/models/nn/layers.h"
#include "inference/util/device.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace vireo::ltx2 {

namespace {

using Shape = std::vector<std::int64_t>;

// Thrown between blocks when the stop token fires; decode() turns it into Cancelled.
struct Stopped {};

constexpr double kNormEps = 1e-6;
constexpr std::int64_t kModulationChunks = 7;  // the shared AdaLN-Zero's chunks, as stored
constexpr std::int64_t kTimestepFeatures = 256;
// Tokens per SwiGLU tile, the reference's: three hidden-width products of a whole video would
// dominate decode memory; a fixed token count keeps the bound independent of the size.
constexpr std::int64_t kSwiGluTile = 16384;
constexpr std::int64_t kMaxKernel = 255;
constexpr std::int64_t kMaxStages = 8;

std::string shapeText(const Shape& s)
{
    std::string out = "[";
    for (std::size_t i = 0; i < s.size(); ++i)
        out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
}

std::int64_t product(const Extent3& e)
{
    return e[0] * e[1] * e[2];
}

Result<DiffusionDecoderConfig> fromDiffusers(const std::string& text)
{
    auto j = jsonutil::parseUntrusted(text, "diffusion_decoder/config.json");
    if (!j)
        return j.error();
    if (!j->is_object())
        return makeError(ErrorCode::InvalidFormat, "diffusion_decoder/config.json is not a JSON object");
    try {
        DiffusionDecoderConfig c;
        jsonutil::readField(*j, "out_channels", c.outChannels);
        jsonutil::readField(*j, "latent_channels", c.latentChannels);
        jsonutil::readField(*j, "patch_size", c.patchSize);
        jsonutil::readField(*j, "scaling_factor", c.scalingFactor);
        jsonutil::readField(*j, "decoder_head_dim", c.headDim);
        jsonutil::readField(*j, "decoder_stage_channels", c.stageChannels);
        jsonutil::readField(*j, "decoder_stage_depths", c.stageDepths);
        auto extents = [&](const char* key, std::vector<Extent3>& out) {
            std::vector<std::vector<std::int64_t>> lists;
            if (!jsonutil::readField(*j, key, lists))
                return;
            out.clear();
            for (const auto& l : lists) {
                if (l.size() != 3)
                    throw jsonutil::FieldError(std::string("'") + key + "' must list (T, H, W) triples");
                out.push_back({l[0], l[1], l[2]});
            }
        };
        extents("decoder_stage_kernels", c.stageKernels);
        extents("decoder_upsample_strides", c.upsampleStrides);
        jsonutil::readField(*j, "decoder_upsample_channel_reductions", c.channelReductions);
        std::vector<std::int64_t> k5;
        if (jsonutil::readField(*j, "decoder_stage5_kernel", k5)) {
            if (k5.size() != 3)
                throw jsonutil::FieldError("'decoder_stage5_kernel' must be a (T, H, W) triple");
            c.stage5Kernel = {k5[0], k5[1], k5[2]};
        }
        jsonutil::readField(*j, "decoder_t_emb_dim", c.timeEmbedDim);
        jsonutil::readField(*j, "decoder_timestep_scale_multiplier", c.timestepScale);
        std::string type = "x0";
        jsonutil::readField(*j, "decoder_model_output_type", type);
        if (type != "x0" && type != "v")
            throw jsonutil::FieldError("'decoder_model_output_type' is \"" + type + "\", expected \"x0\" or \"v\"");
        c.predictsX0 = type == "x0";
        jsonutil::readField(*j, "decoder_num_inference_steps", c.steps);
        jsonutil::readField(*j, "spatial_compression_ratio", c.spatialRatio);
        jsonutil::readField(*j, "temporal_compression_ratio", c.temporalRatio);
        return c;
    } catch (const std::exception& e) {
        return makeError(ErrorCode::InvalidFormat, std::string("diffusion_decoder/config.json: ") + e.what());
    }
}

// Lightricks' embedded config: `vae.decoder` (or `vae` itself) in ltx-core's names, with
// ltx-core's defaults where a field is absent (they differ from diffusers': v-prediction in 2
// steps, timestep scale 1, a (3, 7, 7) stage-5 kernel, half the widths). NotFound without a
// `vae` section.
Result<DiffusionDecoderConfig> fromLtxCore(const std::string& text)
{
    auto j = jsonutil::parseUntrusted(text, "the VAE file's embedded config");
    if (!j)
        return j.error();
    const auto* vae = jsonutil::objectField(*j, "vae");
    if (!vae)
        return makeError(ErrorCode::NotFound, "no vae section");
    const auto* found = jsonutil::objectField(*vae, "decoder");
    const auto& d = found ? *found : *vae;
    try {
        DiffusionDecoderConfig c;
        c.stageChannels = {1024, 512, 256, 256, 128};
        c.stage5Kernel = {3, 7, 7};
        c.timestepScale = 1.0;
        c.steps = 2;
        c.predictsX0 = false;
        jsonutil::readField(*vae, "latent_channels", c.latentChannels);
        jsonutil::readField(d, "in_channels", c.latentChannels);
        jsonutil::readField(d, "out_channels", c.outChannels);
        jsonutil::readField(d, "patch_size", c.patchSize);
        jsonutil::readField(d, "na_head_dim", c.headDim);
        jsonutil::readField(d, "head_dim", c.headDim);
        jsonutil::readField(d, "stage_channels", c.stageChannels);
        jsonutil::readField(d, "stage_depths", c.stageDepths);
        auto triple = [](const std::vector<std::int64_t>& l, const char* key) {
            if (l.size() != 3)
                throw jsonutil::FieldError(std::string("'") + key + "' must hold (T, H, W) triples");
            return Extent3{l[0], l[1], l[2]};
        };
        std::vector<std::vector<std::int64_t>> kernels;
        if (jsonutil::readField(d, "stage_kernels", kernels)) {
            c.stageKernels.clear();
            for (const auto& k : kernels)
                c.stageKernels.push_back(triple(k, "stage_kernels"));
        }
        if (const auto it = d.find("upsamples"); it != d.end() && !it->is_null()) {
            if (!it->is_array())
                throw jsonutil::FieldError("'upsamples' must list [[t, h, w], reduction] pairs");
            c.upsampleStrides.clear();
            c.channelReductions.clear();
            for (const auto& pair : *it) {
                if (!pair.is_array() || pair.size() != 2)
                    throw jsonutil::FieldError("'upsamples' must list [[t, h, w], reduction] pairs");
                c.upsampleStrides.push_back(triple(jsonutil::fieldAs<std::vector<std::int64_t>>(pair[0], "upsamples"), "upsamples"));
                c.channelReductions.push_back(jsonutil::fieldAs<std::int64_t>(pair[1], "upsamples"));
            }
        }
        // ltx-core lists a kernel for stage 5 among the stage kernels too; its stage5_kernel rules.
        if (c.stageKernels.size() > c.upsampleStrides.size())
            c.stageKernels.resize(c.upsampleStrides.size());
        std::vector<std::int64_t> k5;
        if (jsonutil::readField(d, "stage5_kernel", k5))
            c.stage5Kernel = triple(k5, "stage5_kernel");
        std::int64_t stage5Channels = 0;
        if (jsonutil::readField(d, "stage5_channels", stage5Channels)
            && (c.stageChannels.empty() || stage5Channels != c.stageChannels.back()))
            throw jsonutil::FieldError("'stage5_channels' differs from the last stage's width; no such decoder is published");
        jsonutil::readField(d, "t_emb_dim", c.timeEmbedDim);
        jsonutil::readField(d, "timestep_scale_multiplier", c.timestepScale);
        jsonutil::readField(d, "default_num_inference_steps", c.steps);
        std::string type = "v";
        jsonutil::readField(*vae, "model_output_type", type);
        if (type != "x0" && type != "v")
            throw jsonutil::FieldError("'model_output_type' is \"" + type + "\", expected \"x0\" or \"v\"");
        c.predictsX0 = type == "x0";
        // Not stored: what the strides and the patch make (8 and 32 for the published decoder).
        std::int64_t t = 1, h = c.patchSize, w = c.patchSize;
        for (const auto& st : c.upsampleStrides) {
            t *= st[0];
            h *= st[1];
            w *= st[2];
        }
        c.temporalRatio = t;
        c.spatialRatio = h == w ? h : 0;
        return c;
    } catch (const std::exception& e) {
        return makeError(ErrorCode::InvalidFormat, std::string("the VAE file's embedded config: ") + e.what());
    }
}

// Every size in range and the stages consistent with each other and with the compression
// ratios the rest of the pipeline plans frames and pixels by.
Result<void> validate(const DiffusionDecoderConfig& c, const std::string& where)
{
    ConfigBounds bounds(where);
    bounds.range("out_channels", c.outChannels, 1, 16)
        .range("latent_channels", c.latentChannels, 1, kMaxChannels)
        .range("patch_size", c.patchSize, 1, 64)
        .positive("scaling_factor", c.scalingFactor)
        .range("decoder_head_dim", c.headDim, 8, kMaxHeadDim)
        .range("decoder_t_emb_dim", c.timeEmbedDim, 1, kMaxChannels)
        .positive("decoder_timestep_scale_multiplier", c.timestepScale, 1e6)
        .range("decoder_num_inference_steps", c.steps, 1, 1000)
        .range("spatial_compression_ratio", c.spatialRatio, 1, 1024)
        .range("temporal_compression_ratio", c.temporalRatio, 1, 1024)
        .range("decoder_upsample_strides (stages)", static_cast<std::int64_t>(c.upsampleStrides.size()), 1, kMaxStages);
    for (const auto ch : c.stageChannels)
        bounds.range("decoder_stage_channels", ch, 1, kMaxChannels);
    for (const auto d : c.stageDepths)
        bounds.range("decoder_stage_depths", d, 1, kMaxBlocks);
    for (const auto r : c.channelReductions)
        bounds.range("decoder_upsample_channel_reductions", r, 1, kMaxChannels);
    for (const auto& k : c.stageKernels)
        for (const auto v : k)
            bounds.range("decoder_stage_kernels", v, 1, kMaxKernel);
    for (const auto v : c.stage5Kernel)
        bounds.range("decoder_stage5_kernel", v, 1, kMaxKernel);
    for (const auto& s : c.upsampleStrides)
        for (const auto v : s)
            bounds.range("decoder_upsample_strides", v, 1, 4);
    if (auto r = bounds.result(); !r)
        return r;
    const auto fail = [&](const std::string& what) {
        return makeError(ErrorCode::InvalidFormat, where + ": " + what + "; the config is damaged");
    };
    const auto n = c.upsampleStrides.size();
    if (c.stageChannels.size() != n + 1 || c.stageDepths.size() != n + 1 || c.stageKernels.size() != n || c.channelReductions.size() != n)
        return fail("the stage lists disagree in length (" + std::to_string(n) + " upsamples need " + std::to_string(n + 1)
            + " stage widths and depths and " + std::to_string(n) + " kernels and reductions)");
    if (c.headDim % 8)
        return fail("decoder_head_dim " + std::to_string(c.headDim) + " is not a multiple of 8 (the 3-D rotary split needs it)");
    for (std::size_t i = 0; i < n; ++i) {
        const auto expanded = product(c.upsampleStrides[i]) * c.stageChannels[i];
        if (expanded % c.channelReductions[i] || c.stageChannels[i + 1] != c.stageChannels[i] / c.channelReductions[i])
            return fail("stage " + std::to_string(i + 1) + "'s width " + std::to_string(c.stageChannels[i + 1]) + " is not stage "
                + std::to_string(i) + "'s " + std::to_string(c.stageChannels[i]) + " / " + std::to_string(c.channelReductions[i]));
    }
    for (const auto ch : c.stageChannels)
        if (ch % c.headDim)
            return fail("a stage width of " + std::to_string(ch) + " does not split into heads of " + std::to_string(c.headDim));
    std::int64_t t = 1, h = c.patchSize, w = c.patchSize;
    for (const auto& s : c.upsampleStrides) {
        t *= s[0];
        h *= s[1];
        w *= s[2];
    }
    if (t != c.temporalRatio || h != c.spatialRatio || w != c.spatialRatio)
        return fail("the upsamples make " + std::to_string(t) + " frames and " + std::to_string(h) + "x" + std::to_string(w)
            + " pixels per latent, the compression ratios say " + std::to_string(c.temporalRatio) + " and "
            + std::to_string(c.spatialRatio));
    return {};
}

// The window start of every query along one axis: centred, shifted inward at the borders.
at::Tensor windowStarts(std::int64_t q0, std::int64_t q1, std::int64_t n, std::int64_t k, const at::TensorOptions& opts)
{
    return (at::arange(q0, q1, opts) - k / 2).clamp(0, n - k);
}

// Which keys [k0, k1) each query [q0, q1) sees along one axis: [nq, nk] bool.
at::Tensor axisMask(
    std::int64_t q0, std::int64_t q1, std::int64_t k0, std::int64_t k1, std::int64_t n, std::int64_t k, const at::TensorOptions& opts)
{
    const auto starts = windowStarts(q0, q1, n, k, opts).unsqueeze(1);
    const auto keys = at::arange(k0, k1, opts).unsqueeze(0);
    return keys.ge(starts).logical_and(keys.lt(starts + k));
}

Shape shapeWith(const at::Tensor& x, std::int64_t dim, std::int64_t size)
{
    auto s = x.sizes().vec();
    s[static_cast<std::size_t>(dim)] = size;
    return s;
}

std::int64_t windowStart(std::int64_t q, std::int64_t n, std::int64_t k)
{
    return std::clamp<std::int64_t>(q - k / 2, 0, n - k);
}

}  // namespace

at::Tensor neighborhoodAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Extent3& kernel, Extent3 block)
{
    TORCH_CHECK(q.dim() == 6 && k.sizes() == q.sizes() && v.sizes() == q.sizes(),
        "neighbourhood attention takes q, k, v as equal "
        "[B, T, H, W, heads, D], got ",
        q.sizes(), ", ", k.sizes(), ", ", v.sizes());
    const auto batch = q.size(0), heads = q.size(4), dim = q.size(5);
    const Extent3 grid{q.size(1), q.size(2), q.size(3)};
    Extent3 kern{}, blk{};
    for (int a = 0; a < 3; ++a) {
        TORCH_CHECK(kernel[a] > 0 && grid[a] > 0, "neighbourhood attention: kernel ", kernel[a], " on a grid of ", grid[a]);
        kern[a] = std::min(kernel[a], grid[a]);
        // A block as wide as the window: the union of its windows is at most twice the window
        // per axis, which keeps the masked-out share of the scores bounded.
        blk[a] = std::min(block[a] > 0 ? block[a] : kern[a], grid[a]);
    }
    const auto toHeads = [](const at::Tensor& x) { return x.permute({0, 4, 1, 2, 3, 5}); };  // [B, heads, T, H, W, D]
    const auto qh = toHeads(q), kh = toHeads(k), vh = toHeads(v);
    auto out = at::empty({batch, heads, grid[0], grid[1], grid[2], dim}, q.options());
    const auto indexOpts = at::TensorOptions().dtype(at::kLong).device(q.device());
    for (std::int64_t t0 = 0; t0 < grid[0]; t0 += blk[0]) {
        const auto t1 = std::min(t0 + blk[0], grid[0]);
        const auto kt0 = windowStart(t0, grid[0], kern[0]), kt1 = windowStart(t1 - 1, grid[0], kern[0]) + kern[0];
        const auto maskT = axisMask(t0, t1, kt0, kt1, grid[0], kern[0], indexOpts);
        for (std::int64_t h0 = 0; h0 < grid[1]; h0 += blk[1]) {
            const auto h1 = std::min(h0 + blk[1], grid[1]);
            const auto kh0 = windowStart(h0, grid[1], kern[1]), kh1 = windowStart(h1 - 1, grid[1], kern[1]) + kern[1];
            const auto maskTH = maskT.view({t1 - t0, 1, kt1 - kt0, 1})
                                    .logical_and(axisMask(h0, h1, kh0, kh1, grid[1], kern[1], indexOpts).view({1, h1 - h0, 1, kh1 - kh0}));
            for (std::int64_t w0 = 0; w0 < grid[2]; w0 += blk[2]) {
                const auto w1 = std::min(w0 + blk[2], grid[2]);
                const auto kw0 = windowStart(w0, grid[2], kern[2]), kw1 = windowStart(w1 - 1, grid[2], kern[2]) + kern[2];
                const auto nq = (t1 - t0) * (h1 - h0) * (w1 - w0);
                const auto nk = (kt1 - kt0) * (kh1 - kh0) * (kw1 - kw0);
                const auto mask =
                    maskTH.view({t1 - t0, h1 - h0, 1, kt1 - kt0, kh1 - kh0, 1})
                        .logical_and(axisMask(w0, w1, kw0, kw1, grid[2], kern[2], indexOpts).view({1, 1, w1 - w0, 1, 1, kw1 - kw0}))
                        .reshape({nq, nk});
                const auto box = [&](const at::Tensor& x, std::int64_t a0, std::int64_t a1, std::int64_t b0, std::int64_t b1,
                                     std::int64_t c0, std::int64_t c1) {
                    return x.slice(2, a0, a1).slice(3, b0, b1).slice(4, c0, c1).reshape({batch, heads, -1, dim});
                };
                const auto o = at::scaled_dot_product_attention(box(qh, t0, t1, h0, h1, w0, w1), box(kh, kt0, kt1, kh0, kh1, kw0, kw1),
                    box(vh, kt0, kt1, kh0, kh1, kw0, kw1), mask, 0.0, false, 1.0);
                out.slice(2, t0, t1).slice(3, h0, h1).slice(4, w0, w1).copy_(o.view({batch, heads, t1 - t0, h1 - h0, w1 - w0, dim}));
            }
        }
    }
    return out.permute({0, 2, 3, 4, 1, 5}).reshape({batch, grid[0], grid[1], grid[2], heads * dim});
}

at::Tensor rotateNeighborhood3d(const at::Tensor& x, double base)
{
    TORCH_CHECK(x.dim() == 6 && x.size(5) % 8 == 0, "the 3-D rotary embedding takes [B, T, H, W, heads, D] with D a multiple of 8, got ",
        x.sizes());
    const auto d = x.size(5);
    auto dimT = (d / 4) / 2 * 2;
    auto dimHw = (d - dimT) / 2;
    if (dimHw % 2) {
        dimT -= 2;
        dimHw = (d - dimT) / 2;
    }
    const std::int64_t dims[3] = {dimT, dimHw, dimHw};
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(x.device());
    // The frequencies in float64 cast once, as the reference builds them (MPS-less devices all
    // have float64).
    const auto f64 = at::TensorOptions().dtype(at::kDouble).device(x.device());
    std::vector<at::Tensor> parts;
    std::int64_t offset = 0;
    for (int axis = 0; axis < 3; ++axis) {
        const auto dim = dims[axis];
        const auto chunk = x.narrow(5, offset, dim);
        offset += dim;
        const auto inv = (1.0 / at::pow(base, at::arange(0, dim, 2, f64) / static_cast<double>(dim))).to(at::kFloat);
        const auto positions = at::arange(x.size(1 + axis), f32);
        Shape shape{1, 1, 1, 1, 1, inv.size(0)};
        shape[static_cast<std::size_t>(axis) + 1] = positions.size(0);
        const auto angles = (positions.unsqueeze(1) * inv.unsqueeze(0)).reshape(shape);
        const auto cos = angles.cos(), sin = angles.sin();
        const auto pairs = chunk.reshape({chunk.size(0), chunk.size(1), chunk.size(2), chunk.size(3), chunk.size(4), dim / 2, 2});
        const auto even = pairs.select(6, 0).to(at::kFloat), odd = pairs.select(6, 1).to(at::kFloat);
        parts.push_back(at::stack({even * cos - odd * sin, even * sin + odd * cos}, -1).reshape(chunk.sizes()).to(x.scalar_type()));
    }
    return at::cat(parts, -1);
}

std::string diffusionDecoderProblem(const Ltx2Weights& weights)
{
    auto c = resolveDiffusionDecoderConfig(weights);
    if (c)
        return {};
    return c.error().code == ErrorCode::NotFound ? "this model has no diffusion video decoder (LTX-2.5's files carry one)"
                                                 : c.error().message;
}

Extent3 minimumLatentExtent(const DiffusionDecoderConfig& c)
{
    // The grids each stage sees, followed through the upsamples: frames with the trailing ghost
    // frames, the leading duplicate dropped after a temporal x2 and the ghosts cropped before
    // stage 5, so the floor is exactly where diffusers starts to refuse.
    const auto fits = [&](std::size_t axis, std::int64_t length) {
        auto n = axis == 0 ? length + c.trailingPadFrames() : length;
        for (std::size_t s = 0; s < c.upsampleStrides.size(); ++s) {
            if (n < c.stageKernels[s][axis])
                return false;
            const auto stride = c.upsampleStrides[s][axis];
            n = n * stride - (axis == 0 && stride == 2 ? 1 : 0);
        }
        if (axis == 0)
            n -= c.trailingPadFrames() * c.temporalRatio;
        return n >= c.stage5Kernel[axis];
    };
    Extent3 floor{1, 1, 1};
    for (std::size_t a = 0; a < 3; ++a)
        while (!fits(a, floor[a]) && floor[a] < kMaxKernel)
            ++floor[a];
    return floor;
}

Result<DiffusionDecoderConfig> resolveDiffusionDecoderConfig(const Ltx2Weights& w)
{
    const auto part = Part::DiffusionDecoder;
    const auto files = w.describeFiles();
    if (w.tensors(part).empty())
        return makeError(ErrorCode::NotFound, files + ": no LTX-2.5 diffusion video decoder (a diffusion_decoder/ folder)");
    auto given = checkpointConfig(w, part, std::optional<DiffusionDecoderConfig>(), fromDiffusers, fromLtxCore);
    if (!given)
        return given.error();
    if (!*given)
        return makeError(ErrorCode::InvalidFormat,
            files
                + ": the diffusion decoder carries no config (a diffusers config.json, or the VAE file's embedded one); download it again");
    const auto& c = **given;
    if (auto ok = validate(c, files + ": the diffusion decoder's config"); !ok)
        return ok.error();
    // The shapes the config implies, against the headers: a mismatch is the wrong file or config.
    const auto n = c.upsampleStrides.size();
    std::vector<std::pair<std::string, Shape>> expected{
        {"decoder.conv_in.weight", {c.stageChannels[0], c.latentChannels}},
        {"decoder.conv_in_x_t.weight", {c.stageChannels[n], c.outChannels * c.patchSize * c.patchSize}},
        {"decoder.conv_out.weight", {c.outChannels * c.patchSize * c.patchSize, c.stageChannels[n]}},
        {"decoder.shared_adaln.proj.weight", {kModulationChunks * c.stageChannels[n], c.timeEmbedDim}},
        {"decoder.t_embedder.timestep_embedder.linear_1.weight", {c.timeEmbedDim, kTimestepFeatures}},
        {"latents_mean", {c.latentChannels}},
        {"latents_std", {c.latentChannels}},
    };
    for (std::size_t i = 0; i < n; ++i)
        expected.push_back({"decoder.upsamples." + std::to_string(i) + ".proj.weight",
            {product(c.upsampleStrides[i]) * c.stageChannels[i] / c.channelReductions[i], c.stageChannels[i]}});
    for (const auto& [name, shape] : expected) {
        const auto found = w.shape(part, name);
        if (!found)
            return makeError(ErrorCode::InvalidFormat, files + ": the diffusion decoder has no " + name);
        if (*found != shape)
            return makeError(ErrorCode::InvalidFormat,
                files + ": the diffusion decoder's " + name + " is " + shapeText(*found) + ", its config says " + shapeText(shape)
                    + "; the file and the config are not of one model");
    }
    const auto count = [&](const std::string& prefix, std::int64_t want, const std::string& what) -> Result<void> {
        auto have = w.indexCount(part, prefix);
        if (!have)
            return have.error();
        if (*have != want)
            return makeError(ErrorCode::InvalidFormat,
                files + ": the diffusion decoder stores " + std::to_string(*have) + " " + what + ", its config says "
                    + std::to_string(want));
        return {};
    };
    for (std::size_t i = 0; i < n; ++i)
        if (auto ok = count("decoder.det_stages." + std::to_string(i) + ".", c.stageDepths[i], "blocks in stage " + std::to_string(i + 1));
            !ok)
            return ok.error();
    if (auto ok = count("decoder.diff_blocks.", c.stageDepths[n], "diffusion blocks"); !ok)
        return ok.error();
    return c;
}

struct DiffusionDecoder::Impl {
    struct NaAttention {
        nn::Linear toQ, toK, toV, toOut;
        at::Tensor normQ, normK;
        Extent3 kernel{};
        std::int64_t heads = 0, headDim = 0;

        // Channels-last [B, T, H, W, C] in and out.
        at::Tensor operator()(const at::Tensor& x) const
        {
            const auto g = x.sizes();
            TORCH_CHECK(g[1] >= kernel[0] && g[2] >= kernel[1] && g[3] >= kernel[2],
                "the diffusion decoder's neighbourhood attention needs "
                "a grid of at least its kernel (",
                kernel[0], ", ", kernel[1], ", ", kernel[2], "), got (", g[1], ", ", g[2], ", ", g[3],
                "); the video is too small for this decoder");
            const std::vector<std::int64_t> shape{g[0], g[1], g[2], g[3], heads, headDim};
            const auto scale = 1.0 / std::sqrt(static_cast<double>(headDim));
            // Norm, scale, then rotate: the reference's order (the scale inside the rotation's
            // float32 would round differently).
            const auto q = nn::rmsNormWeighted(toQ(x).view(shape), normQ, kNormEps) * scale;
            const auto k = nn::rmsNormWeighted(toK(x).view(shape), normK, kNormEps);
            const auto v = toV(x).view(shape);
            return toOut(neighborhoodAttention(rotateNeighborhood3d(q), rotateNeighborhood3d(k), v, kernel));
        }
        std::int64_t bytes() const { return toQ.residentBytes() + toK.residentBytes() + toV.residentBytes() + toOut.residentBytes(); }
    };
    struct SwiGlu {
        nn::Linear up, gate, down;
        at::Tensor operator()(const at::Tensor& x) const
        {
            const auto tokens = x.numel() / std::max<std::int64_t>(1, x.size(-1));
            if (tokens <= kSwiGluTile)
                return down(at::silu(gate(x)) * up(x));
            const auto flat = x.reshape({-1, x.size(-1)});
            auto out = at::empty_like(flat);
            for (std::int64_t s = 0; s < tokens; s += kSwiGluTile) {
                const auto tile = flat.narrow(0, s, std::min(kSwiGluTile, tokens - s));
                out.narrow(0, s, tile.size(0)).copy_(down(at::silu(gate(tile)) * up(tile)));
            }
            return out.view(x.sizes());
        }
    };
    struct Block {
        at::Tensor norm1, norm2;
        NaAttention attn;
        SwiGlu mlp;
        // Stage 5 only.
        nn::Linear contextProj;
        at::Tensor scaleShift;  // [7, C]
    };
    struct Upsample {
        nn::Linear proj;
        Extent3 stride{};
        std::int64_t outChannels = 0;
        at::Tensor operator()(const at::Tensor& x, bool dropLeadingFrame) const
        {
            const auto b = x.size(0), t = x.size(1), h = x.size(2), w = x.size(3);
            auto y = proj(x)
                         .reshape({b, t, h, w, outChannels, stride[0], stride[1], stride[2]})
                         .permute({0, 1, 5, 2, 6, 3, 7, 4})
                         .reshape({b, t * stride[0], h * stride[1], w * stride[2], outChannels});
            if (stride[0] == 2 && dropLeadingFrame)
                y = y.slice(1, 1);
            return y;
        }
    };

    DiffusionDecoderConfig config;
    c10::Device device = c10::kCPU;
    c10::ScalarType dtype = c10::kFloat;
    nn::Linear convIn, convInXt, convOut, timeLinear1, timeLinear2, adaln;
    std::vector<std::vector<Block>> stages;
    std::vector<Upsample> upsamples;
    std::vector<Block> diffBlocks;
    at::Tensor normOut, mean, std;

    void checkStop(const std::stop_token& stop) const
    {
        if (stop.stop_requested())
            throw Stopped{};
    }

    at::Tensor runStage(std::size_t s, at::Tensor x, const std::stop_token& stop) const
    {
        for (const auto& b : stages[s]) {
            checkStop(stop);
            x = x + b.attn(nn::rmsNormWeighted(x, b.norm1, kNormEps));
            x = x + b.mlp(nn::rmsNormWeighted(x, b.norm2, kNormEps));
        }
        return x;
    }

    at::Tensor stagesOneToThree(const at::Tensor& latents, const std::stop_token& stop) const
    {
        TORCH_CHECK(latents.dim() == 5 && latents.size(1) == config.latentChannels && latents.size(2) > 0,
            "the diffusion decoder takes "
            "latents [B, ",
            config.latentChannels, ", F, H, W], got ", latents.sizes());
        auto x = latents.to(device, dtype);
        if (const auto pad = config.trailingPadFrames(); pad > 0)
            x = at::cat({x, x.slice(2, -1).expand({-1, -1, pad, -1, -1})}, 2);
        x = convIn(x.permute({0, 2, 3, 4, 1}));
        for (std::size_t s = 0; s + 1 < stages.size(); ++s)
            x = upsamples[s](runStage(s, x, stop), true);
        return x;
    }

    at::Tensor stageFour(const at::Tensor& features, bool dropLeadingFrame, bool cropTrailingGhost, const std::stop_token& stop) const
    {
        const auto last = stages.size() - 1;
        auto x = upsamples[last](runStage(last, features, stop), dropLeadingFrame);
        if (const auto pad = config.trailingPadFrames(); cropTrailingGhost && pad > 0) {
            const auto ghost = pad * config.temporalRatio;
            TORCH_CHECK(x.size(1) > ghost, "the diffusion decoder's context has ", x.size(1), " frames, fewer than its ", ghost,
                " trailing ghost frames");
            x = x.slice(1, 0, x.size(1) - ghost);
        }
        return x;
    }

    at::Tensor patchify(const at::Tensor& x) const
    {
        const auto p = config.patchSize;
        const auto b = x.size(0), c = x.size(1), f = x.size(2), h = x.size(3), w = x.size(4);
        return x.reshape({b, c, f, h / p, p, w / p, p}).permute({0, 1, 6, 4, 2, 3, 5}).reshape({b, c * p * p, f, h / p, w / p});
    }
    at::Tensor unpatchify(const at::Tensor& x) const
    {
        const auto p = config.patchSize;
        const auto b = x.size(0), c = x.size(1) / (p * p), f = x.size(2), h = x.size(3), w = x.size(4);
        return x.reshape({b, c, p, p, f, h, w}).permute({0, 1, 4, 5, 3, 6, 2}).reshape({b, c, f, h * p, w * p});
    }

    at::Tensor step(const at::Tensor& context, const at::Tensor& xT, const at::Tensor& timestep, const std::stop_token& stop) const
    {
        const auto features = nn::timestepFeatures(timestep * config.timestepScale, kTimestepFeatures).to(device, context.scalar_type());
        const auto embedded = timeLinear2(at::silu(timeLinear1(features)));
        const auto chunks = adaln(at::silu(embedded)).chunk(kModulationChunks, -1);
        auto x = convInXt(patchify(xT).permute({0, 2, 3, 4, 1}));
        for (const auto& b : diffBlocks) {
            checkStop(stop);
            auto mod = [&](std::int64_t i) {
                return (chunks[static_cast<std::size_t>(i)] + b.scaleShift[i]).view({x.size(0), 1, 1, 1, -1});
            };
            x = x + b.contextProj(context);
            x = x + b.attn(nn::modulate(nn::rmsNormWeighted(x, b.norm1, kNormEps), mod(0), mod(1)));
            x = x + b.mlp(nn::modulate(nn::rmsNormWeighted(x, b.norm2, kNormEps), mod(3), mod(4)));
        }
        x = convOut(nn::rmsNormWeighted(x, normOut, kNormEps));
        return unpatchify(x.permute({0, 4, 1, 2, 3}).contiguous());
    }

    at::Tensor denoise(const at::Tensor& context, at::Tensor xT, std::int64_t steps, const std::stop_token& stop) const
    {
        TORCH_CHECK(context.dim() == 5 && context.size(4) == config.stageChannels.back(),
            "the diffusion decoder's context must be [B, T, H, W, ", config.stageChannels.back(), "], got ", context.sizes());
        const auto p = config.patchSize;
        TORCH_CHECK(xT.dim() == 5 && xT.size(0) == context.size(0) && xT.size(1) == config.outChannels && xT.size(2) == context.size(1)
                && xT.size(3) == context.size(2) * p && xT.size(4) == context.size(3) * p,
            "the diffusion decoder's starting pixels must be [", context.size(0), ", ", config.outChannels, ", ", context.size(1), ", ",
            context.size(2) * p, ", ", context.size(3) * p, "], got ", xT.sizes());
        if (steps <= 0)
            steps = config.steps;
        xT = xT.to(device, context.scalar_type());
        const auto batch = context.size(0);
        const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
        const auto times = at::linspace(1.0, 1.0 / static_cast<double>(steps), steps, f32);
        if (steps == 1 && config.predictsX0)
            return step(context, xT, times.slice(0, 0, 1).expand({batch}), stop);
        for (std::int64_t i = 0; i < steps; ++i) {
            const auto now = times.slice(0, i, i + 1).expand({batch});
            const auto next = i + 1 < steps ? times.slice(0, i + 1, i + 2).expand({batch}) : at::zeros_like(now);
            auto out = step(context, xT, now, stop).to(at::kFloat);
            const auto x = xT.to(at::kFloat);
            if (config.predictsX0)
                out = (x - out) / now.view({-1, 1, 1, 1, 1});
            xT = (x - (now - next).view({-1, 1, 1, 1, 1}) * out).to(xT.scalar_type());
        }
        return xT;
    }

    at::Tensor decode(const at::Tensor& latents, const DiffusionDecodeOptions& o) const;
    at::Tensor decodeWhole(const at::Tensor& latents, const DiffusionDecodeOptions& o) const;
    at::Tensor tiledDecode(const at::Tensor& latents, const DiffusionDecodeOptions& o) const;

    at::Tensor draw(const DiffusionDecodeOptions& o, const Shape& shape) const
    {
        auto x = o.noise(shape);
        TORCH_CHECK(x.defined() && x.sizes() == at::IntArrayRef(shape), "the diffusion decoder asked for noise ", shapeText(shape),
            " and got ", x.defined() ? x.sizes() : at::IntArrayRef{});
        return x.to(device, dtype);
    }
};

namespace {

// Overlapping [start, end) tiles covering [0, length), starts `stride` apart; a trailing
// remnant shorter than minSize joins the previous tile (a grid smaller than a kernel cannot
// stand alone), as the reference's _tile_intervals.
std::vector<std::pair<std::int64_t, std::int64_t>> tileIntervals(
    std::int64_t length, std::int64_t tile, std::int64_t stride, std::int64_t minSize)
{
    if (length <= tile)
        return {{0, length}};
    std::vector<std::int64_t> starts;
    for (std::int64_t s = 0; s < length; s += stride)
        starts.push_back(s);
    while (starts.size() > 1 && length - starts.back() < minSize)
        starts.pop_back();
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (std::size_t i = 0; i + 1 < starts.size(); ++i)
        out.push_back({starts[i], std::min(starts[i] + tile, length)});
    out.push_back({starts.back(), length});
    return out;
}

}  // namespace

at::Tensor DiffusionDecoder::Impl::decode(const at::Tensor& input, const DiffusionDecodeOptions& o) const
{
    TORCH_CHECK(static_cast<bool>(o.noise), "the diffusion decoder needs a noise source");
    TORCH_CHECK(input.dim() == 5 && input.size(1) == config.latentChannels && input.size(2) > 0 && input.size(3) > 0 && input.size(4) > 0,
        "the diffusion decoder takes latents [B, ", config.latentChannels, ", F, H, W], got ", input.sizes());
    const auto floor = minimumLatentExtent(config);
    at::Tensor latents = input;
    std::int64_t before[3] = {0, 0, 0};
    for (int a = 0; a < 3; ++a) {
        const auto dim = 2 + a;
        const auto length = latents.size(dim);
        if (length >= floor[static_cast<std::size_t>(a)])
            continue;
        const auto need = floor[static_cast<std::size_t>(a)] - length;
        // Frames: the last one repeated (the causal grid keeps frame 0 first); rows and columns:
        // both edges replicated, half before.
        before[a] = a == 0 ? 0 : need / 2;
        const auto after = need - before[a];
        std::vector<at::Tensor> parts;
        if (before[a])
            parts.push_back(latents.narrow(dim, 0, 1).expand(shapeWith(latents, dim, before[a])));
        parts.push_back(latents);
        parts.push_back(latents.narrow(dim, length - 1, 1).expand(shapeWith(latents, dim, after)));
        latents = at::cat(parts, dim);
    }
    auto video = decodeWhole(latents, o);
    if (latents.sizes() == input.sizes())
        return video;
    const auto frames = (input.size(2) - 1) * config.temporalRatio + 1;
    const auto r = config.spatialRatio;
    return video.narrow(2, 0, frames).narrow(3, before[1] * r, input.size(3) * r).narrow(4, before[2] * r, input.size(4) * r).contiguous();
}

at::Tensor DiffusionDecoder::Impl::decodeWhole(const at::Tensor& latents, const DiffusionDecodeOptions& o) const
{
    if (o.tiling) {
        const auto& t = *o.tiling;
        TORCH_CHECK(latents.dim() == 5, "the diffusion decoder takes latents [B, C, F, H, W], got ", latents.sizes());
        if (latents.size(2) > t.tileFrames / config.temporalRatio || latents.size(3) > t.tileHeight / config.spatialRatio
            || latents.size(4) > t.tileWidth / config.spatialRatio)
            return tiledDecode(latents, o);
    }
    const auto context = stageFour(stagesOneToThree(latents, o.stop), true, true, o.stop);
    const auto p = config.patchSize;
    const auto xT = draw(o, {context.size(0), config.outChannels, context.size(1), context.size(2) * p, context.size(3) * p});
    auto video = denoise(context, xT, o.steps, o.stop);
    if (o.onProgress)
        o.onProgress(1, 1);
    return video;
}

at::Tensor DiffusionDecoder::Impl::tiledDecode(const at::Tensor& latents, const DiffusionDecodeOptions& o) const
{
    const auto& t = *o.tiling;
    const auto steps = o.steps > 0 ? o.steps : config.steps;
    const auto p = config.patchSize;
    const auto& lastStride = config.upsampleStrides.back();
    // One cell of the grid entering the last deterministic stage is this many pixels and frames.
    const Extent3 scale{lastStride[0], lastStride[1] * p, lastStride[2] * p};
    TORCH_CHECK(t.tileFrames > 0 && t.tileHeight > 0 && t.tileWidth > 0 && t.strideFrames > 0 && t.strideHeight > 0 && t.strideWidth > 0,
        "diffusion decode tiles must have positive sizes and strides");
    const Extent3 tile{t.tileFrames / scale[0], t.tileHeight / scale[1], t.tileWidth / scale[2]};
    const Extent3 stride{t.strideFrames / scale[0], t.strideHeight / scale[1], t.strideWidth / scale[2]};
    for (int a = 0; a < 3; ++a)
        TORCH_CHECK(stride[a] > 0 && stride[a] <= tile[a], "diffusion decode tiles must hold at least one ", scale[a],
            "-wide cell and overlap no more than their size");
    // Every tile satisfies both remaining kernels: stage 4 sees it as it is, stage 5 scaled by
    // the upsample.
    Extent3 minSize{};
    for (int a = 0; a < 3; ++a) {
        const auto k5 = config.stage5Kernel[static_cast<std::size_t>(a)];
        minSize[a] = std::max(config.stageKernels.back()[static_cast<std::size_t>(a)], (k5 + lastStride[a] - 1) / lastStride[a]);
    }
    const auto features = stagesOneToThree(latents, o.stop);
    std::int64_t ghostScale = 1;
    for (std::size_t s = 0; s + 1 < config.upsampleStrides.size(); ++s)
        ghostScale *= config.upsampleStrides[s][0];
    const auto ghost = config.trailingPadFrames() * ghostScale;
    const auto frames = features.size(1) - ghost, height = features.size(2), width = features.size(3);
    const auto tilesT = tileIntervals(frames, tile[0], stride[0], minSize[0]);
    const auto tilesH = tileIntervals(height, tile[1], stride[1], minSize[1]);
    const auto tilesW = tileIntervals(width, tile[2], stride[2], minSize[2]);
    const auto blendT = (tile[0] - stride[0]) * scale[0], blendH = (tile[1] - stride[1]) * scale[1],
               blendW = (tile[2] - stride[2]) * scale[2];
    const auto batch = latents.size(0);
    const bool oneStep = steps == 1 && config.predictsX0;
    const bool causalT = scale[0] == 2;
    // A one-step x0 decode predicts pixels from noise, so each tile draws its own; a multi-step
    // one integrates its noise, so overlapping tiles start from one canvas.
    at::Tensor canvas;
    if (!oneStep)
        canvas = draw(o, {batch, config.outChannels, frames * scale[0] - (causalT ? 1 : 0), height * scale[1], width * scale[2]});
    const auto total = static_cast<std::int64_t>(tilesT.size() * tilesH.size() * tilesW.size());
    std::int64_t done = 0;
    std::vector<at::Tensor> groups;
    for (const auto& [t0, t1] : tilesT) {
        const bool origin = t0 == 0, trailing = t1 == frames;
        const auto featureEnd = trailing ? features.size(1) : t1;
        std::vector<std::vector<at::Tensor>> rows;
        for (const auto& [h0, h1] : tilesH) {
            std::vector<at::Tensor> row;
            for (const auto& [w0, w1] : tilesW) {
                const auto context =
                    stageFour(features.slice(1, t0, featureEnd).slice(2, h0, h1).slice(3, w0, w1), origin, trailing, o.stop);
                const Shape shape{batch, config.outChannels, context.size(1), context.size(2) * p, context.size(3) * p};
                at::Tensor xT;
                if (oneStep) {
                    xT = draw(o, shape);
                } else {
                    // A later tile keeps the duplicate leading frame: its first cell is one pixel
                    // frame earlier under the causal 1-then-2 mapping.
                    const auto pt0 = t0 * scale[0] - (!origin && causalT ? 1 : 0);
                    xT = canvas.slice(2, pt0, pt0 + shape[2])
                             .slice(3, h0 * scale[1], h0 * scale[1] + shape[3])
                             .slice(4, w0 * scale[2], w0 * scale[2] + shape[4]);
                }
                row.push_back(denoise(context, xT, steps, o.stop));
                if (o.onProgress)
                    o.onProgress(++done, total);
            }
            rows.push_back(std::move(row));
        }
        // Blended in place, as the reference's blend_v / blend_h leave them: a tile blends with its
        // neighbours' blended values, then keeps what lies before the next tile's start.
        std::vector<at::Tensor> resultRows;
        for (std::size_t i = 0; i < rows.size(); ++i) {
            std::vector<at::Tensor> kept;
            for (std::size_t j = 0; j < rows[i].size(); ++j) {
                auto& cur = rows[i][j];
                if (i > 0)
                    blendOverlap(rows[i - 1][j], cur, blendH, 3);
                if (j > 0)
                    blendOverlap(rows[i][j - 1], cur, blendW, 4);
                const auto keepH = i + 1 < rows.size() ? stride[1] * scale[1] : cur.size(3);
                const auto keepW = j + 1 < rows[i].size() ? stride[2] * scale[2] : cur.size(4);
                kept.push_back(cur.slice(3, 0, keepH).slice(4, 0, keepW));
            }
            resultRows.push_back(at::cat(kept, 4));
        }
        groups.push_back(at::cat(resultRows, 3));
    }
    std::vector<at::Tensor> result;
    for (std::size_t k = 0; k < groups.size(); ++k) {
        auto g = groups[k];
        if (k > 0)
            blendOverlap(groups[k - 1], g, blendT, 2);
        if (k + 1 < groups.size())
            g = g.slice(2, 0, stride[0] * scale[0] - (k == 0 && causalT ? 1 : 0));
        result.push_back(g);
    }
    return at::cat(result, 2);
}

DiffusionDecoder::DiffusionDecoder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
DiffusionDecoder::~DiffusionDecoder() = default;
DiffusionDecoder::DiffusionDecoder(DiffusionDecoder&&) noexcept = default;
DiffusionDecoder& DiffusionDecoder::operator=(DiffusionDecoder&&) noexcept = default;

const DiffusionDecoderConfig& DiffusionDecoder::config() const
{
    return m_impl->config;
}
const at::Tensor& DiffusionDecoder::latentsMean() const
{
    return m_impl->mean;
}
const at::Tensor& DiffusionDecoder::latentsStd() const
{
    return m_impl->std;
}

std::int64_t DiffusionDecoder::residentBytes() const
{
    const auto& m = *m_impl;
    std::int64_t bytes = 0;
    auto tensor = [](const at::Tensor& t) { return t.defined() ? static_cast<std::int64_t>(t.nbytes()) : 0; };
    auto block = [&](const Impl::Block& b) {
        bytes += b.attn.bytes() + b.mlp.up.residentBytes() + b.mlp.gate.residentBytes() + b.mlp.down.residentBytes() + tensor(b.norm1)
            + tensor(b.norm2) + tensor(b.attn.normQ) + tensor(b.attn.normK) + tensor(b.scaleShift)
            + (b.contextProj.defined() ? b.contextProj.residentBytes() : 0);
    };
    for (const auto& s : m.stages)
        for (const auto& b : s)
            block(b);
    for (const auto& b : m.diffBlocks)
        block(b);
    for (const auto& u : m.upsamples)
        bytes += u.proj.residentBytes();
    for (const auto* l : {&m.convIn, &m.convInXt, &m.convOut, &m.timeLinear1, &m.timeLinear2, &m.adaln})
        bytes += l->residentBytes();
    return bytes + tensor(m.normOut) + tensor(m.mean) + tensor(m.std);
}

Result<DiffusionDecoder> DiffusionDecoder::load(const Ltx2Weights& weights, c10::Device device, c10::ScalarType dtype)
{
    auto config = resolveDiffusionDecoderConfig(weights);
    if (!config)
        return config.error();
    auto impl = std::make_unique<Impl>();
    impl->config = *config;
    impl->device = device;
    impl->dtype = dtype;
    const auto& c = *config;
    try {
        WeightTaker w(weights, Part::DiffusionDecoder, device, dtype);
        const auto dense = [](const std::string& name, const at::Tensor& weight, std::optional<at::Tensor> bias) {
            nn::Linear l;
            l.name = name;
            l.weight = quant::QuantizedWeight::dense(weight.contiguous());
            l.bias = std::move(bias);
            return l;
        };
        // Lightricks' files may carry the static gates of a distilled decoder beside the Linear
        // they scale: folded into its output rows (and bias) in float32, as ltx-core folds them.
        const auto gated = [&](const std::string& name, const std::string& gateName, bool bias) {
            if (!w.has(gateName))
                return w.linear(name, bias);
            const auto gate = w.tensor(gateName).to(at::kFloat).flatten();
            auto weight = w.tensor(name + ".weight");
            TORCH_CHECK(weight.dim() == 2 && (gate.numel() == weight.size(0) || gate.numel() == 1), gateName, " is ", gate.sizes(),
                ", expected one value per output of ", name, " (", weight.size(0), ")");
            std::optional<at::Tensor> b;
            if (bias)
                b = (w.tensor(name + ".bias").to(at::kFloat) * gate).to(dtype);
            return dense(name, (weight.to(at::kFloat) * gate.unsqueeze(1)).to(dtype), b);
        };
        auto block = [&](const std::string& prefix, std::int64_t dim, const Extent3& kernel, bool diffusion) {
            Impl::Block b;
            b.norm1 = w.tensor(prefix + "norm1.weight");
            b.norm2 = w.tensor(prefix + "norm2.weight");
            if (w.has(prefix + "attn.qkv.weight")) {
                // Lightricks stores q, k and v as one [3C, C] projection, q | k | v.
                const auto qkv = w.tensor(prefix + "attn.qkv.weight");
                const auto bias = w.tensor(prefix + "attn.qkv.bias");
                TORCH_CHECK(qkv.dim() == 2 && qkv.size(0) == 3 * dim && qkv.size(1) == dim && bias.dim() == 1 && bias.size(0) == 3 * dim,
                    prefix, "attn.qkv is ", qkv.sizes(), " / ", bias.sizes(), ", expected [", 3 * dim, ", ", dim, "] / [", 3 * dim, "]");
                const auto rows = qkv.chunk(3, 0);
                const auto biases = bias.chunk(3, 0);
                b.attn.toQ = dense(prefix + "attn.to_q", rows[0], biases[0].contiguous());
                b.attn.toK = dense(prefix + "attn.to_k", rows[1], biases[1].contiguous());
                b.attn.toV = dense(prefix + "attn.to_v", rows[2], biases[2].contiguous());
            } else {
                b.attn.toQ = w.linear(prefix + "attn.to_q", true);
                b.attn.toK = w.linear(prefix + "attn.to_k", true);
                b.attn.toV = w.linear(prefix + "attn.to_v", true);
            }
            b.attn.toOut = gated(prefix + "attn.to_out.0", prefix + "gate_msa", true);
            b.attn.normQ = w.tensor(prefix + "attn.norm_q.weight");
            b.attn.normK = w.tensor(prefix + "attn.norm_k.weight");
            b.attn.kernel = kernel;
            b.attn.headDim = c.headDim;
            b.attn.heads = dim / c.headDim;
            b.mlp.up = w.linear(prefix + "mlp.w_up", false);
            b.mlp.gate = w.linear(prefix + "mlp.w_gate", false);
            b.mlp.down = gated(prefix + "mlp.w_down", prefix + "gate_mlp", false);
            if (diffusion) {
                b.contextProj = gated(prefix + "context_proj", prefix + "gate_ctx", true);
                b.scaleShift = w.tensor(prefix + "scale_shift_table");
                TORCH_CHECK(b.scaleShift.dim() == 2 && b.scaleShift.size(0) == kModulationChunks && b.scaleShift.size(1) == dim, prefix,
                    "scale_shift_table is ", b.scaleShift.sizes(), ", expected [", kModulationChunks, ", ", dim, "]");
            }
            for (const auto* l : {&b.attn.toQ, &b.attn.toK, &b.attn.toV, &b.attn.toOut})
                TORCH_CHECK(
                    !l->defined() || (l->inFeatures() == dim && l->outFeatures() == dim), l->name, " must be [", dim, ", ", dim, "]");
            return b;
        };
        const auto n = c.upsampleStrides.size();
        impl->convIn = w.linear("decoder.conv_in", true);
        for (std::size_t s = 0; s < n; ++s) {
            std::vector<Impl::Block> blocks;
            for (std::int64_t i = 0; i < c.stageDepths[s]; ++i)
                blocks.push_back(block("decoder.det_stages." + std::to_string(s) + "." + std::to_string(i) + ".", c.stageChannels[s],
                    c.stageKernels[s], false));
            impl->stages.push_back(std::move(blocks));
            Impl::Upsample u;
            u.proj = w.linear("decoder.upsamples." + std::to_string(s) + ".proj", true);
            u.stride = c.upsampleStrides[s];
            u.outChannels = c.stageChannels[s] / c.channelReductions[s];
            impl->upsamples.push_back(std::move(u));
        }
        impl->timeLinear1 = w.linear("decoder.t_embedder.timestep_embedder.linear_1", true);
        impl->timeLinear2 = w.linear("decoder.t_embedder.timestep_embedder.linear_2", true);
        impl->convInXt = w.linear("decoder.conv_in_x_t", true);
        impl->adaln = w.linear("decoder.shared_adaln.proj", true);
        for (std::int64_t i = 0; i < c.stageDepths[n]; ++i)
            impl->diffBlocks.push_back(block("decoder.diff_blocks." + std::to_string(i) + ".", c.stageChannels[n], c.stage5Kernel, true));
        impl->normOut = w.tensor("decoder.norm_out.weight");
        impl->convOut = w.linear("decoder.conv_out", true);
        // The statistics stay float32 whatever the compute dtype: they shift every latent.
        {
            WeightTaker stats(weights, Part::DiffusionDecoder, device, at::kFloat);
            impl->mean = stats.tensor("latents_mean");
            impl->std = stats.tensor("latents_std");
            w.ignorePrefix("latents_");
        }
        if (auto done = w.finish(); !done)
            return done.error();
        TORCH_CHECK(impl->timeLinear2.defined() && impl->timeLinear2.outFeatures() == c.timeEmbedDim
                && impl->timeLinear2.inFeatures() == c.timeEmbedDim,
            "decoder.t_embedder.timestep_embedder.linear_2 must be [", c.timeEmbedDim, ", ", c.timeEmbedDim, "]");
        TORCH_CHECK((impl->std > 0).all().item<bool>(), "the diffusion decoder's latents_std holds a value that is not positive");
    } catch (const c10::Error& e) {
        return errorFromException(
            e, weights.describeFiles() + ": loading the LTX-2.5 diffusion video decoder failed", ErrorCode::InvalidFormat);
    }
    return DiffusionDecoder(std::move(impl));
}

namespace {

template <typename F>
Result<at::Tensor> guarded(F&& f)
{
    try {
        return f();
    } catch (const Stopped&) {
        return makeError(ErrorCode::Cancelled, "video decode cancelled");
    } catch (const c10::OutOfMemoryError& e) {
        return makeError(ErrorCode::OutOfMemory,
            std::string("the LTX-2.5 diffusion video decoder ran out of memory: ") + e.what_without_backtrace()
                + "; decode in smaller tiles");
    } catch (const nn::ForwardError& e) {
        return makeError(e.code, std::string("LTX-2.5 diffusion video decoder: ") + e.what());
    } catch (const c10::Error& e) {
        return errorFromException(e, "LTX-2.5 diffusion video decoder");
    }
}

}  // namespace

Result<at::Tensor> DiffusionDecoder::decode(const at::Tensor& latents, const DiffusionDecodeOptions& options) const
{
    return guarded([&] { return m_impl->decode(latents, options); });
}

Result<at::Tensor> DiffusionDecoder::stagesOneToThree(const at::Tensor& latents) const
{
    return guarded([&] { return m_impl->stagesOneToThree(latents, {}); });
}

Result<at::Tensor> DiffusionDecoder::stageFour(const at::Tensor& features, bool dropLeadingFrame, bool cropTrailingGhost) const
{
    return guarded([&] { return m_impl->stageFour(features.to(m_impl->device, m_impl->dtype), dropLeadingFrame, cropTrailingGhost, {}); });
}

Result<at::Tensor> DiffusionDecoder::denoise(const at::Tensor& context, const at::Tensor& xT, std::int64_t steps) const
{
    return guarded([&] { return m_impl->denoise(context.to(m_impl->device, m_impl->dtype), xT, steps, {}); });
}

}  // namespace vireo::ltx2
