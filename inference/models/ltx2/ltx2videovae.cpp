#include "inference/models/ltx2/ltx2videovae.h"

#include "inference/quant/quantizedweight.h"
#include "inference/util/device.h"

#include "inference/models/ltx2/ltx2config.h"
#include "inference/models/ltx2/ltx2layers.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

namespace vireo::ltx2 {

namespace {

using Json = nlohmann::json;
using Shape = std::vector<std::int64_t>;

// Thrown inside a decode or encode when the stop token fires; decode() / encode() turn it into Cancelled.
struct Stopped {};

enum class Padding { Zeros, Reflect, Replicate };

std::string shapeText(const Shape& s)
{
    std::ostringstream out;
    out << "[";
    for (std::size_t i = 0; i < s.size(); ++i)
        out << (i ? ", " : "") << s[i];
    out << "]";
    return out.str();
}

bool startsWith(std::string_view s, std::string_view p)
{
    return s.substr(0, p.size()) == p;
}

template <typename T>
void read(const Json& j, const char* key, T& out)
{
    jsonutil::readField(j, key, out);
}

// The key's value when present, else fallback; a value of the wrong type throws FieldError.
template <typename T>
T valueOr(const Json& j, const char* key, T fallback)
{
    jsonutil::readField(j, key, fallback);
    return fallback;
}

// diffusers accepts a bool for these and widens it to one entry per block.
void readFlags(const Json& j, const char* key, std::vector<bool>& out, std::size_t count)
{
    const auto it = j.find(key);
    if (it == j.end() || it->is_null())
        return;
    if (it->is_boolean())
        out.assign(count, it->get<bool>());
    else
        out = jsonutil::fieldAs<std::vector<bool>>(*it, key);
}

template <typename T>
std::vector<T> reversed(std::vector<T> v)
{
    std::reverse(v.begin(), v.end());
    return v;
}

// ----------------------------------------------------------------------------- structure

struct BlockPlan {
    std::int64_t in = 0, out = 0;  // diffusers' input_channel / output_channel of LTX2VideoUpBlock3d
    bool convIn = false;  // a width-changing resnet before the upsampler
    bool upsample = false;
    std::array<std::int64_t, 3> stride{1, 1, 1};
    std::int64_t factor = 1;  // upscale_factor: channel reduction of the depth-to-space
    bool residual = false;
    std::int64_t upIn = 0, upOut = 0;  // upsampler conv widths
    std::int64_t layers = 0;
};

// The decoder as LTX2VideoDecoder3d builds it from a config, in execution order.
struct Plan {
    std::int64_t width = 0;  // conv_in output, the mid block's width
    std::int64_t midLayers = 0;
    std::vector<BlockPlan> blocks;
    std::int64_t last = 0;  // conv_out input
    std::int64_t spatialScale = 1, temporalScale = 1;
    Padding padding = Padding::Zeros;
};

std::array<std::int64_t, 3> upsampleStride(const std::string& type)
{
    if (type == "spatial")
        return {1, 2, 2};
    if (type == "temporal")
        return {2, 1, 1};
    if (type == "spatiotemporal")
        return {2, 2, 2};
    return {0, 0, 0};
}

Result<Plan> planDecoder(const VideoVaeConfig& c)
{
    auto bad = [](const std::string& what) {
        return makeError(ErrorCode::InvalidFormat, "the video VAE decoder config is inconsistent: " + what);
    };
    const auto n = c.decoderBlockOutChannels.size();
    const auto count = [&](const char* key, std::size_t have, std::size_t want) -> std::optional<Error> {
        if (have == want)
            return std::nullopt;
        return bad(std::string(key) + " has " + std::to_string(have) + " entries but " + std::to_string(n) + " up blocks need "
            + std::to_string(want));
    };
    if (n == 0)
        return bad("decoder_block_out_channels is empty");
    // Real decoders have 3 or 4 up blocks; the bounds keep the products below from overflowing
    // and the tensor list from growing without end.
    if (n > 16)
        return bad("decoder_block_out_channels has " + std::to_string(n) + " entries; at most 16 up blocks are supported");
    for (const auto v : c.decoderBlockOutChannels)
        if (v < 1 || v > kMaxChannels)
            return bad("decoder_block_out_channels holds " + std::to_string(v) + ", expected 1 .. " + std::to_string(kMaxChannels));
    for (const auto v : c.decoderLayersPerBlock)
        if (v < 0 || v > kMaxBlocks)
            return bad("decoder_layers_per_block holds " + std::to_string(v) + ", expected 0 .. " + std::to_string(kMaxBlocks));
    for (const auto v : c.upsampleFactor)
        if (v < 1 || v > 64)
            return bad("upsample_factor holds " + std::to_string(v) + ", expected 1 .. 64");
    for (const auto& e : {count("decoder_layers_per_block", c.decoderLayersPerBlock.size(), n + 1),
             count("decoder_spatio_temporal_scaling", c.decoderSpatioTemporalScaling.size(), n),
             count("decoder_inject_noise", c.decoderInjectNoise.size(), n + 1), count("upsample_type", c.upsampleType.size(), n),
             count("upsample_residual", c.upsampleResidual.size(), n), count("upsample_factor", c.upsampleFactor.size(), n)})
        if (e)
            return *e;
    if (c.latentChannels <= 0 || c.outChannels <= 0 || c.patchSize <= 0 || c.latentChannels > kMaxChannels || c.outChannels > kMaxChannels
        || c.patchSize > 64)
        return bad("latent_channels, out_channels and patch_size must be positive (and at most " + std::to_string(kMaxChannels) + ", "
            + std::to_string(kMaxChannels) + " and 64)");
    if (c.patchSizeT != 1)
        return makeError(ErrorCode::Unsupported,
            "video VAE patch_size_t " + std::to_string(c.patchSizeT) + " is not supported (every LTX-2 VAE uses 1)");
    Plan p;
    if (c.decoderSpatialPaddingMode == "zeros")
        p.padding = Padding::Zeros;
    else if (c.decoderSpatialPaddingMode == "reflect")
        p.padding = Padding::Reflect;
    else if (c.decoderSpatialPaddingMode == "replicate")
        p.padding = Padding::Replicate;
    else
        return makeError(ErrorCode::Unsupported,
            "video VAE decoder_spatial_padding_mode '" + c.decoderSpatialPaddingMode + "' is not supported (zeros, reflect, replicate)");

    const auto boc = reversed(c.decoderBlockOutChannels);
    const auto layers = reversed(c.decoderLayersPerBlock);
    const auto scaling = reversed(c.decoderSpatioTemporalScaling);
    const auto residual = reversed(c.upsampleResidual);
    const auto factor = reversed(c.upsampleFactor);
    for (const auto l : layers)
        if (l < 0)
            return bad("decoder_layers_per_block has a negative entry");
    p.width = boc[0];
    p.midLayers = layers[0];
    p.spatialScale = c.patchSize;
    p.temporalScale = c.patchSizeT;
    std::int64_t output = boc[0];  // diffusers' running output_channel
    std::int64_t channels = boc[0];
    for (std::size_t i = 0; i < n; ++i) {
        const auto where = "up block " + std::to_string(i);
        BlockPlan b;
        b.factor = factor[i];
        if (b.factor <= 0 || boc[i] <= 0)
            return bad(where + ": decoder_block_out_channels and upsample_factor must be positive");
        b.in = output / b.factor;
        b.out = boc[i] / b.factor;
        b.convIn = b.in != b.out;
        b.upsample = scaling[i];
        b.residual = residual[i];
        b.layers = layers[i + 1];
        if (b.convIn) {
            if (channels != b.in)
                return bad(where + "'s conv_in takes " + std::to_string(b.in) + " channels but receives " + std::to_string(channels)
                    + " (diffusers cannot run this config either)");
            channels = b.out;
        }
        if (b.upsample) {
            b.stride = upsampleStride(c.upsampleType[i]);
            if (b.stride[0] == 0)
                return makeError(ErrorCode::Unsupported,
                    "video VAE upsample_type '" + c.upsampleType[i] + "' is not supported (spatial, temporal, spatiotemporal)");
            const auto prod = b.stride[0] * b.stride[1] * b.stride[2];
            b.upIn = b.out * b.factor;
            b.upOut = b.upIn * prod / b.factor;
            if (channels != b.upIn)
                return bad(where + "'s upsampler takes " + std::to_string(b.upIn) + " channels but receives " + std::to_string(channels)
                    + " (diffusers cannot run this config either)");
            if (b.residual && (b.upIn % prod != 0 || prod % b.factor != 0))
                return bad(where + ": a residual upsampler needs its width and stride product divisible as diffusers reshapes them");
            p.spatialScale *= b.stride[1];
            p.temporalScale *= b.stride[0];
        } else if (channels != b.out) {
            return bad(where + " has no upsampler, so its resnets take " + std::to_string(b.out) + " channels, but it receives "
                + std::to_string(channels) + " (diffusers cannot run this config either)");
        }
        channels = b.out;
        output = b.out;
        p.blocks.push_back(b);
    }
    p.last = channels;
    if (c.spatialCompressionRatio && *c.spatialCompressionRatio != p.spatialScale)
        return bad("spatial_compression_ratio " + std::to_string(*c.spatialCompressionRatio) + " but the up blocks scale by "
            + std::to_string(p.spatialScale));
    if (c.temporalCompressionRatio && *c.temporalCompressionRatio != p.temporalScale)
        return bad("temporal_compression_ratio " + std::to_string(*c.temporalCompressionRatio) + " but the up blocks scale by "
            + std::to_string(p.temporalScale));
    return p;
}

// Every tensor the decoder reads, with the shape the config implies (diffusers names).
std::vector<std::pair<std::string, Shape>> decoderTensors(const VideoVaeConfig& c, const Plan& p)
{
    std::vector<std::pair<std::string, Shape>> out;
    auto conv = [&](const std::string& name, std::int64_t o, std::int64_t i, std::int64_t k) {
        out.push_back({name + ".weight", {o, i, k, k, k}});
        out.push_back({name + ".bias", {o}});
    };
    auto resnet = [&](const std::string& prefix, std::int64_t in, std::int64_t o) {
        conv(prefix + ".conv1.conv", o, in, 3);
        conv(prefix + ".conv2.conv", o, o, 3);
        if (in != o) {
            out.push_back({prefix + ".norm3.weight", {in}});
            out.push_back({prefix + ".norm3.bias", {in}});
            conv(prefix + ".conv_shortcut", o, in, 1);  // a plain nn.Conv3d in diffusers
        }
    };
    conv("decoder.conv_in.conv", p.width, c.latentChannels, 3);
    for (std::int64_t l = 0; l < p.midLayers; ++l)
        resnet("decoder.mid_block.resnets." + std::to_string(l), p.width, p.width);
    for (std::size_t i = 0; i < p.blocks.size(); ++i) {
        const auto& b = p.blocks[i];
        const auto prefix = "decoder.up_blocks." + std::to_string(i);
        if (b.convIn)
            resnet(prefix + ".conv_in", b.in, b.out);
        if (b.upsample)
            conv(prefix + ".upsamplers.0.conv.conv", b.upOut, b.upIn, 3);
        for (std::int64_t l = 0; l < b.layers; ++l)
            resnet(prefix + ".resnets." + std::to_string(l), b.out, b.out);
    }
    conv("decoder.conv_out.conv", c.outChannels * c.patchSize * c.patchSize, p.last, 3);
    out.push_back({"latents_mean", {c.latentChannels}});
    out.push_back({"latents_std", {c.latentChannels}});
    return out;
}

Result<void> checkAgainstTensors(const Ltx2Weights& w, const VideoVaeConfig& c, const Plan& p)
{
    const auto files = w.describeFiles();
    for (const auto& [name, t] : w.tensors(Part::VideoVae)) {
        if (!startsWith(name, "decoder."))
            continue;
        if (name.find("time_embedder") != std::string::npos || name.find("scale_shift_table") != std::string::npos
            || name.find("timestep_scale_multiplier") != std::string::npos)
            return makeError(ErrorCode::Unsupported,
                files + ": the video VAE decoder is timestep-conditioned (" + t.name
                    + "); only unconditioned decoders, as in every published LTX-2 / 2.3 VAE, are supported");
        if (name.find("per_channel_scale") != std::string::npos)
            return makeError(ErrorCode::Unsupported,
                files + ": the video VAE decoder injects noise (" + t.name
                    + "); only decoders without noise injection, as in every published LTX-2 / 2.3 VAE, are supported");
    }
    auto mismatch = [&](const std::string& what) {
        return makeError(ErrorCode::InvalidFormat,
            files + ": the video VAE config " + what
                + "; the config does not describe this checkpoint (give the vae/config.json that came with it)");
    };
    const auto upBlocks = w.indexCount(Part::VideoVae, "decoder.up_blocks.");
    if (!upBlocks)
        return upBlocks.error();
    if (*upBlocks != c.upBlocks())
        return mismatch("has " + std::to_string(c.upBlocks()) + " up blocks but the checkpoint has " + std::to_string(*upBlocks)
            + " (decoder.up_blocks.*)");
    const auto mid = w.indexCount(Part::VideoVae, "decoder.mid_block.resnets.");
    if (!mid)
        return mid.error();
    if (*mid != p.midLayers)
        return mismatch("has " + std::to_string(p.midLayers) + " mid-block resnets but the checkpoint has " + std::to_string(*mid)
            + " (decoder.mid_block.resnets.*)");
    for (std::size_t i = 0; i < p.blocks.size(); ++i) {
        const auto prefix = "decoder.up_blocks." + std::to_string(i) + ".resnets.";
        const auto counted = w.indexCount(Part::VideoVae, prefix);
        if (!counted)
            return counted.error();
        if (const auto n = *counted; n != p.blocks[i].layers)
            return mismatch("has " + std::to_string(p.blocks[i].layers) + " resnets in up block " + std::to_string(i)
                + " but the checkpoint has " + std::to_string(n) + " (" + prefix + "*)");
    }
    for (const auto& [name, shape] : decoderTensors(c, p)) {
        const auto stored = w.shape(Part::VideoVae, name);
        if (stored && *stored != shape) {
            const auto* t = w.find(Part::VideoVae, name);
            return mismatch("gives " + name + " the shape " + shapeText(shape) + " but the checkpoint stores " + shapeText(*stored)
                + (t->name != name ? " (as " + t->name + ")" : std::string()));
        }
    }
    return {};
}

// The decoder structure from the tensor shapes alone. Residual upsamplers and the padding
// mode leave no trace in the weights; they are taken from the published config whose
// upsampler layout matches (LTX-2.0: three spatiotemporal x2 with halving widths, residual,
// reflect; LTX-2.3: spatiotemporal, spatiotemporal, temporal, spatial, widths /2 /1 /2 /2,
// no residual, zeros), and anything else needs a config.
Result<VideoVaeConfig> inferFromShapes(const Ltx2Weights& w)
{
    const auto files = w.describeFiles();
    auto shape = [&](const std::string& name) { return w.shape(Part::VideoVae, name); };
    auto cannot = [&](const std::string& why) {
        return makeError(ErrorCode::InvalidFormat,
            files + ": no video VAE config (vae/config.json or the embedded \"vae\" section) and " + why
                + "; give the vae/config.json that came with this checkpoint");
    };
    const auto convIn = shape("decoder.conv_in.conv.weight");
    const auto convOut = shape("decoder.conv_out.conv.weight");
    if (!convIn || convIn->size() != 5 || !convOut || convOut->size() != 5)
        return cannot("the decoder's conv_in / conv_out are missing or not 3-D convolutions");
    VideoVaeConfig c;
    c.latentChannels = (*convIn)[1];
    c.outChannels = 3;
    const auto patchArea = (*convOut)[0] / 3;
    c.patchSize = static_cast<std::int64_t>(std::lround(std::sqrt(static_cast<double>(patchArea))));
    if (patchArea * 3 != (*convOut)[0] || c.patchSize * c.patchSize != patchArea)
        return cannot("conv_out's " + std::to_string((*convOut)[0]) + " outputs are not 3 x a square patch");
    const auto upCount = w.indexCount(Part::VideoVae, "decoder.up_blocks.");
    if (!upCount)
        return upCount.error();
    const auto midCount = w.indexCount(Part::VideoVae, "decoder.mid_block.resnets.");
    if (!midCount)
        return midCount.error();
    const auto n = *upCount;
    std::vector<std::int64_t> boc, layers{*midCount}, factors;
    std::vector<bool> scaling;
    std::vector<std::string> types;
    std::int64_t channels = (*convIn)[0];
    for (std::int64_t i = 0; i < n; ++i) {
        const auto prefix = "decoder.up_blocks." + std::to_string(i) + ".";
        const auto resnetCount = w.indexCount(Part::VideoVae, prefix + "resnets.");
        if (!resnetCount)
            return resnetCount.error();
        const auto resnets = *resnetCount;
        const auto res0 = shape(prefix + "resnets.0.conv1.conv.weight");
        const auto up = shape(prefix + "upsamplers.0.conv.conv.weight");
        if (resnets == 0 || !res0 || res0->size() != 5)
            return cannot("up block " + std::to_string(i) + " has no resnets to read its width from");
        const auto out = (*res0)[0];
        std::int64_t factor = 1;
        if (up) {
            // Zero or absurd widths would divide by zero or overflow below.
            if (up->size() != 5 || out <= 0 || out > kMaxChannels || (*up)[0] <= 0 || (*up)[0] > 64 * kMaxChannels || (*up)[1] <= 0
                || (*up)[1] > 64 * kMaxChannels || (*up)[1] % out != 0)
                return cannot("up block " + std::to_string(i) + "'s upsampler shape " + shapeText(*up) + " is not understood");
            factor = (*up)[1] / out;
            const auto prod = (*up)[0] * factor / (*up)[1];
            types.push_back(prod == 8 ? "spatiotemporal" : prod == 2 ? "temporal" : prod == 4 ? "spatial" : "?");
            if (types.back() == "?")
                return cannot("up block " + std::to_string(i) + "'s upsampler expands by " + std::to_string(prod));
        } else {
            types.push_back("spatiotemporal");  // unused without an upsampler
        }
        boc.push_back(up ? out * factor : channels);
        factors.push_back(factor);
        scaling.push_back(up.has_value());
        layers.push_back(resnets);
        channels = out;
    }
    const bool ltx20 = types == std::vector<std::string>(3, "spatiotemporal") && factors == std::vector<std::int64_t>{2, 2, 2}
        && std::all_of(scaling.begin(), scaling.end(), [](bool b) { return b; });
    const bool ltx23 = types == std::vector<std::string>{"spatiotemporal", "spatiotemporal", "temporal", "spatial"}
        && factors == std::vector<std::int64_t>{2, 1, 2, 2} && std::all_of(scaling.begin(), scaling.end(), [](bool b) { return b; });
    if (!ltx20 && !ltx23)
        return cannot("its upsamplers match neither LTX-2.0's nor LTX-2.3's, so the padding mode and residuals are unknown");
    c.decoderBlockOutChannels = reversed(boc);
    c.decoderLayersPerBlock = reversed(layers);
    c.decoderSpatioTemporalScaling = reversed(scaling);
    c.decoderInjectNoise.assign(n + 1, false);
    c.upsampleType = types;
    c.upsampleFactor = reversed(factors);
    c.upsampleResidual.assign(n, ltx20);
    c.decoderSpatialPaddingMode = ltx20 ? "reflect" : "zeros";
    c.decoderCausal = false;
    c.timestepConditioning = false;
    return c;
}

// ----------------------------------------------------------------------------- encoder structure

struct DownPlan {
    std::int64_t in = 0, out = 0;  // LTX2VideoDownBlock3D's in_channels / out_channels
    std::int64_t layers = 0;  // resnets, all of width `in`
    bool downsample = false;
    std::array<std::int64_t, 3> stride{1, 1, 1};
    std::int64_t convOut = 0;  // the downsampler conv's width: out / (s_t s_h s_w)
    std::int64_t group = 1;  // channels its residual averages: in s_t s_h s_w / out
};

// The encoder as LTX2VideoEncoder3d builds it from a config, in execution order.
struct EncoderPlan {
    std::int64_t patchIn = 0;  // conv_in input: in_channels * patch_size^2
    std::vector<DownPlan> blocks;
    std::int64_t width = 0;  // the mid block's, and conv_out's input
    std::int64_t midLayers = 0;
    std::int64_t spatialScale = 1, temporalScale = 1;
    Padding padding = Padding::Zeros;
};

std::optional<Padding> paddingMode(const std::string& mode)
{
    if (mode == "zeros")
        return Padding::Zeros;
    if (mode == "reflect")
        return Padding::Reflect;
    if (mode == "replicate")
        return Padding::Replicate;
    return std::nullopt;
}

Result<EncoderPlan> planEncoder(const VideoVaeConfig& c)
{
    auto bad = [](const std::string& what) {
        return makeError(ErrorCode::InvalidFormat, "the video VAE encoder config is inconsistent: " + what);
    };
    const auto n = c.encoderBlockOutChannels.size();
    if (n == 0)
        return bad("block_out_channels is empty");
    if (n > 16)
        return bad("block_out_channels has " + std::to_string(n) + " entries; at most 16 down blocks are supported");
    const auto count = [&](const char* key, std::size_t have, std::size_t want) -> std::optional<Error> {
        if (have == want)
            return std::nullopt;
        return bad(std::string(key) + " has " + std::to_string(have) + " entries but " + std::to_string(n) + " down blocks need "
            + std::to_string(want));
    };
    for (const auto& e :
        {count("layers_per_block", c.encoderLayersPerBlock.size(), n + 1), count("down_block_types", c.downBlockTypes.size(), n),
            count("spatio_temporal_scaling", c.spatioTemporalScaling.size(), n), count("downsample_type", c.downsampleType.size(), n)})
        if (e)
            return *e;
    for (const auto v : c.encoderBlockOutChannels)
        if (v < 1 || v > kMaxChannels)
            return bad("block_out_channels holds " + std::to_string(v) + ", expected 1 .. " + std::to_string(kMaxChannels));
    for (const auto v : c.encoderLayersPerBlock)
        if (v < 0 || v > kMaxBlocks)
            return bad("layers_per_block holds " + std::to_string(v) + ", expected 0 .. " + std::to_string(kMaxBlocks));
    if (c.latentChannels <= 0 || c.latentChannels >= kMaxChannels || c.inChannels <= 0 || c.inChannels > 64 || c.patchSize <= 0
        || c.patchSize > 64)
        return bad("latent_channels, in_channels and patch_size must be positive (and below " + std::to_string(kMaxChannels)
            + ", at most 64 and 64)");
    if (c.patchSizeT != 1)
        return makeError(ErrorCode::Unsupported,
            "video VAE patch_size_t " + std::to_string(c.patchSizeT) + " is not supported (every LTX-2 VAE uses 1)");
    EncoderPlan p;
    const auto padding = paddingMode(c.encoderSpatialPaddingMode);
    if (!padding)
        return makeError(ErrorCode::Unsupported,
            "video VAE encoder_spatial_padding_mode '" + c.encoderSpatialPaddingMode + "' is not supported (zeros, reflect, replicate)");
    p.padding = *padding;
    p.patchIn = c.inChannels * c.patchSize * c.patchSize;
    p.spatialScale = c.patchSize;
    p.temporalScale = c.patchSizeT;
    std::int64_t width = c.latentChannels;  // diffusers' conv_in writes latent_channels
    for (std::size_t i = 0; i < n; ++i) {
        const auto where = "down block " + std::to_string(i);
        if (c.downBlockTypes[i] != "LTX2VideoDownBlock3D")
            return makeError(
                ErrorCode::Unsupported, "video VAE down block type '" + c.downBlockTypes[i] + "' is not supported (LTX2VideoDownBlock3D)");
        DownPlan b;
        b.in = width;
        b.out = c.encoderBlockOutChannels[i];
        b.layers = c.encoderLayersPerBlock[i];
        b.downsample = c.spatioTemporalScaling[i];
        if (b.downsample) {
            const auto& type = c.downsampleType[i];
            if (type == "conv")
                return makeError(ErrorCode::Unsupported,
                    "video VAE downsample_type 'conv' (a strided convolution) is not supported; "
                    "every published LTX-2 VAE uses space-to-depth downsamplers (spatial, temporal, spatiotemporal)");
            b.stride = upsampleStride(type);  // the same three strides, run backwards
            if (b.stride[0] == 0)
                return makeError(ErrorCode::Unsupported,
                    "video VAE downsample_type '" + type + "' is not supported (spatial, temporal, spatiotemporal)");
            const auto prod = b.stride[0] * b.stride[1] * b.stride[2];
            // diffusers' LTX2VideoDownsampler3d averages groups of in * prod / out channels of
            // its space-to-depth input and adds them to the conv's out / prod channels, rearranged.
            if (b.out % prod != 0 || (b.in * prod) % b.out != 0)
                return bad(where + " goes from " + std::to_string(b.in) + " to " + std::to_string(b.out) + " channels, which its " + type
                    + " downsampler cannot group (diffusers cannot run this config either)");
            b.convOut = b.out / prod;
            b.group = b.in * prod / b.out;
            p.spatialScale *= b.stride[1];
            p.temporalScale *= b.stride[0];
            width = b.out;
        } else if (b.out != b.in) {
            return bad(where + " has no downsampler, so it keeps its " + std::to_string(b.in) + " channels, but block_out_channels says "
                + std::to_string(b.out) + " (diffusers cannot run this config either)");
        }
        p.blocks.push_back(b);
    }
    p.width = width;
    p.midLayers = c.encoderLayersPerBlock[n];
    if (c.spatialCompressionRatio && *c.spatialCompressionRatio != p.spatialScale)
        return bad("spatial_compression_ratio " + std::to_string(*c.spatialCompressionRatio) + " but the down blocks scale by "
            + std::to_string(p.spatialScale));
    if (c.temporalCompressionRatio && *c.temporalCompressionRatio != p.temporalScale)
        return bad("temporal_compression_ratio " + std::to_string(*c.temporalCompressionRatio) + " but the down blocks scale by "
            + std::to_string(p.temporalScale));
    return p;
}

// Every tensor the encoder reads, with the shape the config implies (diffusers names).
std::vector<std::pair<std::string, Shape>> encoderTensors(const VideoVaeConfig& c, const EncoderPlan& p)
{
    std::vector<std::pair<std::string, Shape>> out;
    auto conv = [&](const std::string& name, std::int64_t o, std::int64_t i) {
        out.push_back({name + ".weight", {o, i, 3, 3, 3}});
        out.push_back({name + ".bias", {o}});
    };
    auto resnet = [&](const std::string& prefix, std::int64_t width) {
        conv(prefix + ".conv1.conv", width, width);
        conv(prefix + ".conv2.conv", width, width);
    };
    conv("encoder.conv_in.conv", c.latentChannels, p.patchIn);
    for (std::size_t i = 0; i < p.blocks.size(); ++i) {
        const auto& b = p.blocks[i];
        const auto prefix = "encoder.down_blocks." + std::to_string(i);
        for (std::int64_t l = 0; l < b.layers; ++l)
            resnet(prefix + ".resnets." + std::to_string(l), b.in);
        if (b.downsample)
            conv(prefix + ".downsamplers.0.conv.conv", b.convOut, b.in);
    }
    for (std::int64_t l = 0; l < p.midLayers; ++l)
        resnet("encoder.mid_block.resnets." + std::to_string(l), p.width);
    conv("encoder.conv_out.conv", c.latentChannels + 1, p.width);
    out.push_back({"latents_mean", {c.latentChannels}});
    out.push_back({"latents_std", {c.latentChannels}});
    return out;
}

Result<void> checkEncoderAgainstTensors(const Ltx2Weights& w, const VideoVaeConfig& c, const EncoderPlan& p)
{
    const auto files = w.describeFiles();
    auto mismatch = [&](const std::string& what) {
        return makeError(ErrorCode::InvalidFormat,
            files + ": the video VAE config " + what
                + "; the config does not describe this checkpoint's encoder (give the vae/config.json that came with it)");
    };
    const auto downBlocks = w.indexCount(Part::VideoVae, "encoder.down_blocks.");
    if (!downBlocks)
        return downBlocks.error();
    if (*downBlocks != c.downBlocks())
        return mismatch("has " + std::to_string(c.downBlocks()) + " down blocks but the checkpoint has " + std::to_string(*downBlocks)
            + " (encoder.down_blocks.*)");
    const auto mid = w.indexCount(Part::VideoVae, "encoder.mid_block.resnets.");
    if (!mid)
        return mid.error();
    if (*mid != p.midLayers)
        return mismatch("has " + std::to_string(p.midLayers) + " mid-block resnets but the checkpoint has " + std::to_string(*mid)
            + " (encoder.mid_block.resnets.*)");
    for (std::size_t i = 0; i < p.blocks.size(); ++i) {
        const auto prefix = "encoder.down_blocks." + std::to_string(i) + ".resnets.";
        const auto counted = w.indexCount(Part::VideoVae, prefix);
        if (!counted)
            return counted.error();
        if (*counted != p.blocks[i].layers)
            return mismatch("has " + std::to_string(p.blocks[i].layers) + " resnets in down block " + std::to_string(i)
                + " but the checkpoint has " + std::to_string(*counted) + " (" + prefix + "*)");
    }
    for (const auto& [name, shape] : encoderTensors(c, p)) {
        const auto stored = w.shape(Part::VideoVae, name);
        if (stored && *stored != shape) {
            const auto* t = w.find(Part::VideoVae, name);
            return mismatch("gives " + name + " the shape " + shapeText(shape) + " but the checkpoint stores " + shapeText(*stored)
                + (t->name != name ? " (as " + t->name + ")" : std::string()));
        }
    }
    return {};
}

// The encoder half from the tensor shapes alone (the rest of `base` kept). The padding mode
// leaves no trace in the weights; it is zeros for every published encoder, whose downsamplers
// run spatial, temporal, spatiotemporal, spatiotemporal (LTX-2.0, 2.3 and 2.5 alike), and
// anything else needs a config.
Result<VideoVaeConfig> inferEncoderFromShapes(const Ltx2Weights& w, VideoVaeConfig c)
{
    const auto files = w.describeFiles();
    auto shape = [&](const std::string& name) { return w.shape(Part::VideoVae, name, 5); };
    auto cannot = [&](const std::string& why) {
        return makeError(ErrorCode::InvalidFormat,
            files
                + ": no video VAE config (vae/config.json or the embedded \"vae\" section "
                  "with encoder_blocks) and "
                + why + "; give the vae/config.json that came with this checkpoint");
    };
    const auto convIn = shape("encoder.conv_in.conv.weight");
    const auto convOut = shape("encoder.conv_out.conv.weight");
    if (!convIn || !convOut)
        return cannot("the encoder's conv_in / conv_out are missing or not 3-D convolutions");
    const auto latent = (*convIn)[0];
    if (latent < 1 || latent >= kMaxChannels || (*convOut)[0] != latent + 1)
        return cannot("the encoder's conv_out writes " + std::to_string((*convOut)[0]) + " channels, not conv_in's "
            + std::to_string(latent) + " + 1 (the means and one shared log-variance)");
    const auto patchArea = (*convIn)[1] / 3;
    const auto patch = static_cast<std::int64_t>(std::lround(std::sqrt(static_cast<double>(std::max<std::int64_t>(patchArea, 0)))));
    if (patchArea * 3 != (*convIn)[1] || patch < 1 || patch * patch != patchArea)
        return cannot("the encoder's conv_in takes " + std::to_string((*convIn)[1]) + " channels, not 3 x a square patch");
    const auto blockCount = w.indexCount(Part::VideoVae, "encoder.down_blocks.");
    if (!blockCount)
        return blockCount.error();
    const auto midCount = w.indexCount(Part::VideoVae, "encoder.mid_block.resnets.");
    if (!midCount)
        return midCount.error();
    const auto n = *blockCount;
    // The width each stage (down blocks, then the mid block) takes, from its first resnet or,
    // without one, from what reads its input next.
    std::vector<std::int64_t> widths, layers;
    for (std::int64_t i = 0; i <= n; ++i) {
        const auto prefix = i < n ? "encoder.down_blocks." + std::to_string(i) + "." : std::string("encoder.mid_block.");
        const auto counted = w.indexCount(Part::VideoVae, prefix + "resnets.");
        if (!counted)
            return counted.error();
        layers.push_back(*counted);
        const auto res0 = shape(prefix + "resnets.0.conv1.conv.weight");
        const auto down = i < n ? shape(prefix + "downsamplers.0.conv.conv.weight") : std::nullopt;
        const auto width = res0 ? (*res0)[1] : down ? (*down)[1] : i == n ? (*convOut)[1] : 0;
        if (width < 1 || width > kMaxChannels)
            return cannot((i < n ? "down block " + std::to_string(i) : std::string("the mid block"))
                + " has no resnets or downsampler "
                  "of a sensible width to read its width from");
        widths.push_back(width);
    }
    std::vector<std::int64_t> boc;
    std::vector<bool> scaling;
    std::vector<std::string> types;
    for (std::int64_t i = 0; i < n; ++i) {
        const auto down = shape("encoder.down_blocks." + std::to_string(i) + ".downsamplers.0.conv.conv.weight");
        const auto out = widths[static_cast<std::size_t>(i) + 1];
        if (down) {
            const auto convWidth = (*down)[0];
            const auto prod = convWidth > 0 && out % convWidth == 0 ? out / convWidth : 0;
            types.push_back(prod == 4 ? "spatial" : prod == 2 ? "temporal" : prod == 8 ? "spatiotemporal" : "?");
            if (types.back() == "?")
                return cannot("down block " + std::to_string(i) + "'s downsampler writes " + std::to_string(convWidth) + " channels for a "
                    + std::to_string(out) + "-channel output, which no space-to-depth stride gives");
        } else {
            types.push_back("spatiotemporal");  // unused without a downsampler
        }
        boc.push_back(out);
        scaling.push_back(down.has_value());
    }
    if (types != std::vector<std::string>{"spatial", "temporal", "spatiotemporal", "spatiotemporal"}
        || !std::all_of(scaling.begin(), scaling.end(), [](bool b) { return b; }))
        return cannot("its downsamplers match no published LTX-2 encoder's, so its padding mode is unknown");
    c.inChannels = 3;
    c.latentChannels = latent;
    c.patchSize = patch;
    c.patchSizeT = 1;
    c.encoderBlockOutChannels = boc;
    c.encoderLayersPerBlock = layers;
    c.downBlockTypes.assign(static_cast<std::size_t>(n), "LTX2VideoDownBlock3D");
    c.spatioTemporalScaling = scaling;
    c.downsampleType = types;
    c.encoderCausal = true;
    c.encoderSpatialPaddingMode = "zeros";
    return c;
}

Result<Json> parseObject(const std::string& text, const std::string& what)
{
    auto j = jsonutil::parseUntrusted(text, what);
    if (!j)
        return j.error();
    if (!j->is_object())
        return makeError(ErrorCode::InvalidFormat, what + " is not a JSON object");
    return j;
}

Result<VideoVaeConfig> parseDiffusers(const Json& j, const std::string& what)
{
    try {
        VideoVaeConfig c;
        read(j, "latent_channels", c.latentChannels);
        read(j, "out_channels", c.outChannels);
        read(j, "patch_size", c.patchSize);
        read(j, "patch_size_t", c.patchSizeT);
        read(j, "decoder_block_out_channels", c.decoderBlockOutChannels);
        read(j, "decoder_layers_per_block", c.decoderLayersPerBlock);
        const auto blocks = c.decoderLayersPerBlock.size();
        readFlags(j, "decoder_spatio_temporal_scaling", c.decoderSpatioTemporalScaling, blocks ? blocks - 1 : 0);
        readFlags(j, "decoder_inject_noise", c.decoderInjectNoise, blocks);
        readFlags(j, "upsample_residual", c.upsampleResidual, blocks ? blocks - 1 : 0);
        read(j, "upsample_type", c.upsampleType);
        read(j, "upsample_factor", c.upsampleFactor);
        read(j, "decoder_causal", c.decoderCausal);
        read(j, "decoder_spatial_padding_mode", c.decoderSpatialPaddingMode);
        read(j, "timestep_conditioning", c.timestepConditioning);
        read(j, "in_channels", c.inChannels);
        read(j, "block_out_channels", c.encoderBlockOutChannels);
        read(j, "layers_per_block", c.encoderLayersPerBlock);
        read(j, "down_block_types", c.downBlockTypes);
        const auto encoderBlocks = c.encoderLayersPerBlock.size();
        readFlags(j, "spatio_temporal_scaling", c.spatioTemporalScaling, encoderBlocks ? encoderBlocks - 1 : 0);
        read(j, "downsample_type", c.downsampleType);
        read(j, "encoder_causal", c.encoderCausal);
        read(j, "encoder_spatial_padding_mode", c.encoderSpatialPaddingMode);
        read(j, "resnet_norm_eps", c.resnetNormEps);
        read(j, "scaling_factor", c.scalingFactor);
        if (std::int64_t ratio = 0; jsonutil::readField(j, "spatial_compression_ratio", ratio))
            c.spatialCompressionRatio = ratio;
        if (std::int64_t ratio = 0; jsonutil::readField(j, "temporal_compression_ratio", ratio))
            c.temporalCompressionRatio = ratio;
        return c;
    } catch (const std::exception& e) {  // jsonutil's FieldError names the key
        return makeError(ErrorCode::InvalidFormat, what + ": " + e.what());
    }
}

// ltx-core's encoder_blocks (ltx_core/model/video_vae/video_vae.py: VideoEncoder,
// _make_encoder_block) in diffusers' terms: a res_x and a space-to-depth compressor per down
// block (what convert_ltx2_to_diffusers.py maps to down_blocks.m and its downsampler), the mid
// block's res_x last. The conv_in width is latent_channels; each compressor multiplies it.
// NotFound when the section has no encoder_blocks.
Result<void> readLtxCoreEncoder(const Json& v, VideoVaeConfig& c, const std::string& what)
{
    const auto it = v.find("encoder_blocks");
    if (it == v.end() || it->is_null())
        return makeError(ErrorCode::NotFound, what + " does not describe the encoder (no encoder_blocks)");
    try {
        const auto& blocks = *it;
        if (!blocks.is_array() || blocks.size() > 65)
            return makeError(ErrorCode::InvalidFormat, what + ": encoder_blocks must be a list of at most 65 [name, parameters] entries");
        const auto unsupported = [&](const std::string& why) {
            return makeError(ErrorCode::Unsupported,
                what + ": encoder_blocks " + why
                    + "; only res_x blocks alternating with "
                      "compress_space_res / compress_time_res / compress_all_res, starting and ending with res_x (every LTX-2 / 2.3 "
                      "VAE), are supported");
        };
        if (blocks.size() % 2 == 0)
            return unsupported("has " + std::to_string(blocks.size()) + " entries");
        std::vector<std::int64_t> widths, layers;
        std::vector<std::string> types;
        std::int64_t width = c.latentChannels;
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            const auto& entry = blocks[i];
            if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !(entry[1].is_number_integer() || entry[1].is_object()))
                return makeError(ErrorCode::InvalidFormat, what + ": encoder_blocks entries must be [name, parameters]");
            const auto name = entry[0].get<std::string>();
            const Json params = entry[1].is_number_integer() ? Json{{"num_layers", entry[1]}} : entry[1];
            if (i % 2 == 0) {
                if (name != "res_x")
                    return unsupported("has '" + name + "' at position " + std::to_string(i));
                layers.push_back(valueOr<std::int64_t>(params, "num_layers", 0));
                continue;
            }
            const std::string type = name == "compress_space_res" ? "spatial"
                : name == "compress_time_res"                     ? "temporal"
                : name == "compress_all_res"                      ? "spatiotemporal"
                                                                  : "";
            if (type.empty())
                return unsupported("has '" + name + "' at position " + std::to_string(i));
            const auto multiplier = valueOr<std::int64_t>(params, "multiplier", 2);  // ltx-core's default
            if (multiplier < 1 || multiplier > 64 || __builtin_mul_overflow(width, multiplier, &width) || width > kMaxChannels)
                return makeError(ErrorCode::InvalidFormat,
                    what + ": latent_channels and the encoder multipliers give a width beyond " + std::to_string(kMaxChannels)
                        + " (multiplier " + std::to_string(multiplier) + ")");
            widths.push_back(width);
            types.push_back(type);
        }
        if (const auto logVar = valueOr<std::string>(v, "latent_log_var", "uniform"); logVar != "uniform")
            return makeError(ErrorCode::Unsupported,
                what + ": latent_log_var '" + logVar
                    + "' is not supported (uniform: "
                      "128 means and one shared log-variance, as in every LTX-2 VAE)");
        c.inChannels = valueOr<std::int64_t>(v, "in_channels", 3);
        c.encoderBlockOutChannels = widths;
        c.encoderLayersPerBlock = layers;
        c.downBlockTypes.assign(widths.size(), "LTX2VideoDownBlock3D");
        c.spatioTemporalScaling.assign(widths.size(), true);
        c.downsampleType = types;
        c.encoderCausal = true;  // ltx-core's encoder convolutions are always causal
        // ltx-core's own order (_prepare_video_encoder_kwargs).
        c.encoderSpatialPaddingMode = valueOr(v, "spatial_padding_mode", valueOr<std::string>(v, "encoder_spatial_padding_mode", "zeros"));
        return {};
    } catch (const std::exception& e) {  // jsonutil's FieldError names the key
        return makeError(ErrorCode::InvalidFormat, what + ": " + e.what());
    }
}

}  // namespace

// ----------------------------------------------------------------------------- config I/O

Result<VideoVaeConfig> videoVaeConfigFromDiffusers(const std::string& text)
{
    auto j = parseObject(text, "vae/config.json");
    if (!j)
        return j.error();
    return parseDiffusers(*j, "vae/config.json");
}

Result<VideoVaeConfig> videoVaeConfigFromLtxCore(const std::string& text)
{
    const std::string what = "the embedded config's \"vae\" section";
    auto parsed = parseObject(text, "the embedded config");
    if (!parsed)
        return parsed.error();
    const auto it = parsed->find("vae");
    if (it == parsed->end() || !it->is_object())
        return makeError(ErrorCode::NotFound, "the embedded config has no \"vae\" section");
    const Json& v = *it;
    if (v.contains("decoder_block_out_channels") || v.contains("decoder_layers_per_block") || v.contains("upsample_type"))
        return parseDiffusers(v, what);
    if (!v.contains("decoder_blocks"))
        return makeError(ErrorCode::NotFound, what + " does not describe the decoder");
    // ltx-core's format (ltx_core/model/video_vae: VideoDecoderConfigurator and VideoDecoder):
    // decoder_blocks is reversed to build the decoder; the width after conv_in is
    // latent_channels times every upsampler's multiplier, and each upsampler divides it.
    try {
        VideoVaeConfig c;
        c.latentChannels = valueOr<std::int64_t>(v, "latent_channels", 128);
        c.outChannels = valueOr<std::int64_t>(v, "out_channels", 3);
        c.patchSize = valueOr<std::int64_t>(v, "patch_size", 4);
        c.patchSizeT = 1;
        c.decoderCausal = valueOr(v, "causal_decoder", false);
        c.timestepConditioning = valueOr(v, "timestep_conditioning", true);  // ltx-core's default
        c.scalingFactor = valueOr(v, "scaling_factor", 1.0);
        // ltx-core reads decoder_spatial_padding_mode (default reflect). The 2.3 file names only
        // spatial_padding_mode ("zeros"), which is what diffusers' 2.3 config gives the decoder.
        c.decoderSpatialPaddingMode =
            valueOr(v, "decoder_spatial_padding_mode", valueOr<std::string>(v, "spatial_padding_mode", "reflect"));
        if (valueOr<std::int64_t>(v, "dims", 3) != 3)
            return makeError(ErrorCode::Unsupported, what + ": only 3-D video VAEs are supported");
        if (const auto norm = valueOr<std::string>(v, "norm_layer", "pixel_norm"); norm != "pixel_norm")
            return makeError(ErrorCode::Unsupported, what + ": norm_layer '" + norm + "' is not supported (pixel_norm)");
        struct Block {
            std::string name;
            Json params;
        };
        std::vector<Block> run;
        const auto& blocks = v.at("decoder_blocks");
        if (!blocks.is_array() || blocks.size() > 64)
            return makeError(ErrorCode::InvalidFormat, what + ": decoder_blocks must be a list of at most 64 [name, parameters] entries");
        for (const auto& entry : blocks) {
            if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !(entry[1].is_number_integer() || entry[1].is_object()))
                return makeError(ErrorCode::InvalidFormat, what + ": decoder_blocks entries must be [name, parameters]");
            Json params = entry[1].is_number_integer() ? Json{{"num_layers", entry[1]}} : entry[1];
            run.push_back({entry[0].get<std::string>(), params});
        }
        std::reverse(run.begin(), run.end());
        if (run.empty() || run[0].name != "res_x")
            return makeError(ErrorCode::Unsupported, what + ": the decoder must start with a res_x block (the mid block)");
        std::vector<std::int64_t> layers{valueOr<std::int64_t>(run[0].params, "num_layers", 0)}, factors;
        std::vector<bool> inject{valueOr(run[0].params, "inject_noise", false)}, residual;
        std::vector<std::string> types;
        for (std::size_t i = 1; i < run.size(); ++i) {
            const auto& b = run[i];
            std::string type = b.name == "compress_all" ? "spatiotemporal"
                : b.name == "compress_time"             ? "temporal"
                : b.name == "compress_space"            ? "spatial"
                                                        : "";
            if (type.empty())
                return makeError(ErrorCode::Unsupported,
                    what + ": decoder block '" + b.name + "' at position " + std::to_string(i)
                        + " is not supported (res_x after compress_all / compress_time / compress_space)");
            types.push_back(type);
            factors.push_back(valueOr<std::int64_t>(b.params, "multiplier", 1));
            residual.push_back(b.name == "compress_all" && valueOr(b.params, "residual", false));  // ltx-core reads it there only
            if (i + 1 < run.size() && run[i + 1].name == "res_x") {
                layers.push_back(valueOr<std::int64_t>(run[i + 1].params, "num_layers", 0));
                inject.push_back(valueOr(run[i + 1].params, "inject_noise", false));
                ++i;
            } else {
                layers.push_back(0);
                inject.push_back(false);
            }
        }
        std::int64_t width = c.latentChannels;
        for (const auto f : factors)
            if (f < 1 || f > 64 || __builtin_mul_overflow(width, f, &width) || width > kMaxChannels)
                return makeError(ErrorCode::InvalidFormat,
                    what + ": latent_channels and the upsampler multipliers give a width beyond " + std::to_string(kMaxChannels)
                        + " (multiplier " + std::to_string(f) + ")");
        std::vector<std::int64_t> boc;
        for (const auto f : factors) {
            if (f <= 0 || width % f != 0)
                return makeError(ErrorCode::InvalidFormat,
                    what + ": upsampler multiplier " + std::to_string(f) + " does not divide the width " + std::to_string(width));
            boc.push_back(width);
            width /= f;
        }
        c.decoderBlockOutChannels = reversed(boc);
        c.decoderLayersPerBlock = reversed(layers);
        c.decoderSpatioTemporalScaling.assign(types.size(), true);
        c.decoderInjectNoise = reversed(inject);
        c.upsampleType = types;
        c.upsampleResidual = reversed(residual);
        c.upsampleFactor = reversed(factors);
        // The decoder does not use the encoder half, so encoder_blocks that do not map leave
        // it at the defaults here; resolveVideoEncoderConfig reads them strictly.
        if (auto withEncoder = c; readLtxCoreEncoder(v, withEncoder, what).ok())
            c = withEncoder;
        return c;
    } catch (const std::exception& e) {  // jsonutil's FieldError names the key
        return makeError(ErrorCode::InvalidFormat, what + ": " + e.what());
    }
}

std::string toJson(const VideoVaeConfig& c)
{
    Json j{{"latent_channels", c.latentChannels}, {"out_channels", c.outChannels}, {"patch_size", c.patchSize},
        {"patch_size_t", c.patchSizeT}, {"decoder_block_out_channels", c.decoderBlockOutChannels},
        {"decoder_layers_per_block", c.decoderLayersPerBlock}, {"decoder_spatio_temporal_scaling", c.decoderSpatioTemporalScaling},
        {"decoder_inject_noise", c.decoderInjectNoise}, {"upsample_type", c.upsampleType}, {"upsample_residual", c.upsampleResidual},
        {"upsample_factor", c.upsampleFactor}, {"decoder_causal", c.decoderCausal},
        {"decoder_spatial_padding_mode", c.decoderSpatialPaddingMode}, {"timestep_conditioning", c.timestepConditioning},
        {"resnet_norm_eps", c.resnetNormEps}, {"scaling_factor", c.scalingFactor}, {"in_channels", c.inChannels},
        {"block_out_channels", c.encoderBlockOutChannels}, {"layers_per_block", c.encoderLayersPerBlock},
        {"down_block_types", c.downBlockTypes}, {"spatio_temporal_scaling", c.spatioTemporalScaling}, {"downsample_type", c.downsampleType},
        {"encoder_causal", c.encoderCausal}, {"encoder_spatial_padding_mode", c.encoderSpatialPaddingMode}};
    j["spatial_compression_ratio"] = c.spatialCompressionRatio ? Json(*c.spatialCompressionRatio) : Json();
    j["temporal_compression_ratio"] = c.temporalCompressionRatio ? Json(*c.temporalCompressionRatio) : Json();
    return j.dump();
}

Result<VideoVaeConfig> resolveVideoVaeConfig(const Ltx2Weights& w, const std::optional<VideoVaeConfig>& override)
{
    const auto files = w.describeFiles();
    if (!w.find(Part::VideoVae, "decoder.conv_in.conv.weight"))
        return makeError(ErrorCode::NotFound,
            files
                + ": no LTX-2 video VAE decoder in it (decoder.conv_in, or vae.decoder.* in a "
                  "Lightricks file); add the diffusers vae/ folder or the single file that holds the VAE");
    auto given = checkpointConfig(w, Part::VideoVae, override, videoVaeConfigFromDiffusers, videoVaeConfigFromLtxCore);
    if (!given)
        return given.error();
    VideoVaeConfig c;
    if (*given) {
        c = **given;
    } else {
        auto inferred = inferFromShapes(w);
        if (!inferred)
            return inferred.error();
        c = *inferred;
        // For config() only: an encoder whose shapes are not understood is the encoder
        // loader's error to report, not the decoder's.
        if (w.find(Part::VideoVae, "encoder.conv_in.conv.weight"))
            if (auto withEncoder = inferEncoderFromShapes(w, c))
                c = *withEncoder;
    }
    if (c.timestepConditioning)
        return makeError(ErrorCode::Unsupported,
            files
                + ": the video VAE config asks for timestep conditioning, which this decoder "
                  "does not implement (no published LTX-2 / 2.3 VAE uses it)");
    if (std::any_of(c.decoderInjectNoise.begin(), c.decoderInjectNoise.end(), [](bool b) { return b; }))
        return makeError(ErrorCode::Unsupported,
            files
                + ": the video VAE config asks for decoder_inject_noise, which this decoder "
                  "does not implement (no published LTX-2 / 2.3 VAE uses it)");
    auto plan = planDecoder(c);
    if (!plan)
        return makeError(plan.error().code,
            files + ": " + plan.error().message
                + (override ? "; fix the config passed in" : "; give the vae/config.json that came with this checkpoint"));
    if (auto ok = checkAgainstTensors(w, c, *plan); !ok)
        return ok.error();
    c.spatialCompressionRatio = plan->spatialScale;
    c.temporalCompressionRatio = plan->temporalScale;
    return c;
}

namespace {

// The encoder half the checkpoint's own config gives: diffusers' config.json, else the
// embedded "vae" section (diffusers' keys, or ltx-core's encoder_blocks). nullopt when
// neither describes the encoder.
// LTX-2.5's CausalDiffusionVAE nests its encoder under vae.encoder (ltx-core
// _prepare_video_encoder_kwargs): `blocks` for encoder_blocks, out_channels the latent width;
// the flat fields the conv VAE's section uses, gathered as ltx-core falls back to them.
Json flatEncoderSection(const Json& vae)
{
    const auto nested = vae.find("encoder");
    if (nested == vae.end() || !nested->is_object())
        return vae;
    const Json& e = *nested;
    Json flat = Json::object();
    const auto take = [&](const char* to, std::initializer_list<std::pair<const Json*, const char*>> from) {
        for (const auto& [j, key] : from)
            if (const auto f = j->find(key); f != j->end() && !f->is_null()) {
                flat[to] = *f;
                return;
            }
    };
    take("latent_channels", {{&e, "out_channels"}, {&vae, "latent_channels"}});
    take("encoder_blocks", {{&e, "blocks"}, {&e, "encoder_blocks"}});
    take("dims", {{&e, "dims"}, {&vae, "dims"}});
    take("in_channels", {{&e, "in_channels"}});
    take("patch_size", {{&e, "patch_size"}});
    take("norm_layer", {{&e, "norm_layer"}});
    take("latent_log_var", {{&e, "latent_log_var"}});
    take("spatial_padding_mode", {{&e, "spatial_padding_mode"}, {&vae, "encoder_spatial_padding_mode"}});
    take("scaling_factor", {{&vae, "scaling_factor"}});
    return flat;
}

Result<std::optional<VideoVaeConfig>> describedEncoder(const Ltx2Weights& w)
{
    const auto named = [&](const Error& e) { return makeError(e.code, w.describeFiles() + ": " + e.message); };
    if (auto json = w.diffusersConfig(Part::VideoVae)) {
        auto parsed = videoVaeConfigFromDiffusers(*json);
        if (!parsed)
            return named(parsed.error());
        return std::optional<VideoVaeConfig>(*parsed);
    }
    const auto json = w.ltxCoreConfig(Part::VideoVae);
    if (!json)
        return std::optional<VideoVaeConfig>();
    const std::string what = "the embedded config's \"vae\" section";
    auto parsed = parseObject(*json, "the embedded config");
    if (!parsed)
        return named(parsed.error());
    const auto it = parsed->find("vae");
    if (it == parsed->end() || !it->is_object())
        return std::optional<VideoVaeConfig>();
    const Json v = flatEncoderSection(*it);
    if (v.contains("block_out_channels") || v.contains("layers_per_block") || v.contains("downsample_type")) {
        auto c = parseDiffusers(v, what);
        if (!c)
            return named(c.error());
        return std::optional<VideoVaeConfig>(*c);
    }
    try {
        VideoVaeConfig c;
        c.latentChannels = valueOr<std::int64_t>(v, "latent_channels", 128);
        c.patchSize = valueOr<std::int64_t>(v, "patch_size", 4);
        c.scalingFactor = valueOr(v, "scaling_factor", 1.0);
        if (valueOr<std::int64_t>(v, "dims", 3) != 3)
            return named(makeError(ErrorCode::Unsupported, what + ": only 3-D video VAEs are supported"));
        if (const auto norm = valueOr<std::string>(v, "norm_layer", "pixel_norm"); norm != "pixel_norm")
            return named(makeError(ErrorCode::Unsupported, what + ": norm_layer '" + norm + "' is not supported (pixel_norm)"));
        if (auto read = readLtxCoreEncoder(v, c, what); !read) {
            if (read.error().code == ErrorCode::NotFound)
                return std::optional<VideoVaeConfig>();
            return named(read.error());
        }
        return std::optional<VideoVaeConfig>(c);
    } catch (const std::exception& e) {  // jsonutil's FieldError names the key
        return named(makeError(ErrorCode::InvalidFormat, what + ": " + e.what()));
    }
}

// What the encoder reads of a config: its half and the fields both halves share.
void takeEncoderHalf(VideoVaeConfig& to, const VideoVaeConfig& from)
{
    to.inChannels = from.inChannels;
    to.latentChannels = from.latentChannels;
    to.patchSize = from.patchSize;
    to.patchSizeT = from.patchSizeT;
    to.scalingFactor = from.scalingFactor;
    to.encoderBlockOutChannels = from.encoderBlockOutChannels;
    to.encoderLayersPerBlock = from.encoderLayersPerBlock;
    to.downBlockTypes = from.downBlockTypes;
    to.spatioTemporalScaling = from.spatioTemporalScaling;
    to.downsampleType = from.downsampleType;
    to.encoderCausal = from.encoderCausal;
    to.encoderSpatialPaddingMode = from.encoderSpatialPaddingMode;
    if (from.spatialCompressionRatio)
        to.spatialCompressionRatio = from.spatialCompressionRatio;
    if (from.temporalCompressionRatio)
        to.temporalCompressionRatio = from.temporalCompressionRatio;
}

}  // namespace

Result<VideoVaeConfig> resolveVideoEncoderConfig(const Ltx2Weights& w, const std::optional<VideoVaeConfig>& override)
{
    const auto files = w.describeFiles();
    if (!w.find(Part::VideoVae, "encoder.conv_in.conv.weight"))
        return makeError(ErrorCode::NotFound,
            files
                + " holds no video VAE encoder (encoder.conv_in, or vae.encoder.* in a Lightricks "
                  "file); image-to-video needs the full VAE: add the diffusers vae/ folder or a single file that holds the encoder too");
    VideoVaeConfig c;
    std::optional<VideoVaeConfig> described = override;
    if (!override) {
        // The decoder half, for config() only; the encoder's compression must match it.
        if (w.find(Part::VideoVae, "decoder.conv_in.conv.weight"))
            if (auto full = resolveVideoVaeConfig(w, std::nullopt))
                c = *full;
        auto given = describedEncoder(w);
        if (!given)
            return given.error();
        described = *given;
    }
    if (described) {
        takeEncoderHalf(c, *described);
    } else {
        auto inferred = inferEncoderFromShapes(w, c);
        if (!inferred)
            return inferred.error();
        c = *inferred;
    }
    auto plan = planEncoder(c);
    if (!plan)
        return makeError(plan.error().code,
            files + ": " + plan.error().message
                + (override ? "; fix the config passed in" : "; give the vae/config.json that came with this checkpoint"));
    if (auto ok = checkEncoderAgainstTensors(w, c, *plan); !ok)
        return ok.error();
    c.spatialCompressionRatio = plan->spatialScale;
    c.temporalCompressionRatio = plan->temporalScale;
    return c;
}

// ----------------------------------------------------------------------------- the decoder

namespace {

struct Conv {
    at::Tensor weight, bias;
};

struct ResBlock {
    Conv conv1, conv2;
    at::Tensor norm3Weight, norm3Bias;  // defined only when the width changes
    Conv shortcut;
};

struct UpBlock {
    BlockPlan plan;
    std::optional<ResBlock> convIn;
    Conv upsampler;
    std::vector<ResBlock> resnets;
};

using quant::bytesOf;
std::int64_t bytesOf(const Conv& c)
{
    return bytesOf(c.weight) + bytesOf(c.bias);
}
std::int64_t bytesOf(const ResBlock& r)
{
    return bytesOf(r.conv1) + bytesOf(r.conv2) + bytesOf(r.norm3Weight) + bytesOf(r.norm3Bias) + bytesOf(r.shortcut);
}

// PerChannelRMSNorm: x / sqrt(mean_c(x^2) + 1e-8), no parameters. The mean is taken in float32
// for reduced dtypes; in float32 it is diffusers' expression.
at::Tensor pixelNorm(const at::Tensor& x)
{
    constexpr double kEps = 1e-8;
    if (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble)
        return x / at::sqrt(at::mean(x * x, {1}, true) + kEps);
    return x * at::rsqrt(at::mean(x.square(), {1}, true, at::kFloat) + kEps).to(x.scalar_type());
}

// SiLU(PerChannelRMSNorm(x)), the pre-activation of every conv after conv_in.
at::Tensor normAct(const at::Tensor& x)
{
    auto y = pixelNorm(x);
    at::silu_(y);
    return y;
}

// [B, C * s_t * s_h * s_w, F, H, W] -> [B, C, F * s_t, H * s_h, W * s_w] (LTX2VideoUpsampler3d's reshape).
at::Tensor depthToSpace(const at::Tensor& x, const std::array<std::int64_t, 3>& s)
{
    const auto b = x.size(0), f = x.size(2), h = x.size(3), w = x.size(4);
    return x.reshape({b, -1, s[0], s[1], s[2], f, h, w}).permute({0, 1, 5, 2, 6, 3, 7, 4}).reshape({b, -1, f * s[0], h * s[1], w * s[2]});
}

// Latent cells [start, start + size) of one tile along an axis.
struct Span {
    std::int64_t start = 0, size = 0;
};

// Tiles of `size` cells every `size - overlap` cells. diffusers starts a tile at every stride
// below the length, which can leave a last sliver entirely inside the previous tile (15 latent
// rows at its 16 / 14 defaults give a 1-row tile, which reflect padding refuses); here the
// last tile ends at the edge instead, so the two layouts agree whenever diffusers' has no sliver.
std::vector<Span> tileSpans(std::int64_t length, std::int64_t size, std::int64_t overlap)
{
    if (size <= 0 || length <= size)
        return {{0, length}};
    const auto stride = size - overlap;
    const auto count = (length - size + stride - 1) / stride + 1;
    std::vector<Span> spans;
    for (std::int64_t k = 0; k < count; ++k) {
        const auto start = k * stride;
        spans.push_back({start, std::min(size, length - start)});
    }
    return spans;
}

Conv takeConv(WeightTaker& w, const std::string& name)
{
    return {w.tensor(name + ".weight"), w.tensor(name + ".bias")};
}

ResBlock takeResBlock(WeightTaker& w, const std::string& prefix, bool widthChanges)
{
    ResBlock r;
    r.conv1 = takeConv(w, prefix + ".conv1.conv");
    r.conv2 = takeConv(w, prefix + ".conv2.conv");
    if (widthChanges) {
        r.norm3Weight = w.tensor(prefix + ".norm3.weight");
        r.norm3Bias = w.tensor(prefix + ".norm3.bias");
        r.shortcut = takeConv(w, prefix + ".conv_shortcut");
    }
    return r;
}

// LTX2VideoCausalConv3d (3x3x3, stride 1): time is padded by repeating edge frames (causal: the
// first frame twice in front; else once at each end), height and width by the padding mode.
at::Tensor causalConv(const at::Tensor& x, const Conv& c, bool causal, Padding padding)
{
    const auto first = x.narrow(2, 0, 1);
    auto h = causal ? at::cat({first, first, x}, 2) : at::cat({first, x, x.narrow(2, x.size(2) - 1, 1)}, 2);
    switch (padding) {
    case Padding::Zeros: return at::conv3d(h, c.weight, c.bias, {1, 1, 1}, {0, 1, 1});
    case Padding::Reflect: h = at::reflection_pad3d(h, {1, 1, 1, 1, 0, 0}); break;
    case Padding::Replicate: h = at::replication_pad3d(h, {1, 1, 1, 1, 0, 0}); break;
    }
    return at::conv3d(h, c.weight, c.bias);
}

// LTX2VideoResnetBlock3d without timestep conditioning or noise.
at::Tensor resnetBlock(const ResBlock& r, const at::Tensor& x, bool causal, Padding padding, double eps)
{
    auto h = causalConv(normAct(x), r.conv1, causal, padding);
    h = causalConv(normAct(h), r.conv2, causal, padding);
    if (!r.norm3Weight.defined())
        return h.add_(x);
    auto skip = at::layer_norm(x.movedim(1, -1), {x.size(1)}, r.norm3Weight, r.norm3Bias, eps).movedim(-1, 1);
    return h.add_(at::conv3d(skip, r.shortcut.weight, r.shortcut.bias));
}

}  // namespace

struct VideoDecoder::Impl {
    VideoVaeConfig config;
    Plan plan;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    Conv convIn, convOut;
    std::vector<ResBlock> mid;
    std::vector<UpBlock> ups;
    at::Tensor mean, std;  // float32 [latent_channels]

    at::Tensor conv(const at::Tensor& x, const Conv& c, bool causal) const;
    at::Tensor resnet(const ResBlock& r, const at::Tensor& x, bool causal) const;
    at::Tensor upsample(const UpBlock& u, const at::Tensor& x, bool causal) const;
    at::Tensor run(const at::Tensor& z, bool causal, const std::stop_token& stop) const;
    Result<at::Tensor> decode(const at::Tensor& latents, const VideoDecodeOptions& options) const;
};

at::Tensor VideoDecoder::Impl::conv(const at::Tensor& x, const Conv& c, bool causal) const
{
    return causalConv(x, c, causal, plan.padding);
}

at::Tensor VideoDecoder::Impl::resnet(const ResBlock& r, const at::Tensor& x, bool causal) const
{
    return resnetBlock(r, x, causal, plan.padding, config.resnetNormEps);
}

// LTX2VideoUpsampler3d: conv to C * s_t * s_h * s_w / factor channels, depth-to-space, and the
// first s_t - 1 frames dropped (F -> 2F - 1 for a temporal x2); the residual is the input
// rearranged the same way with its channels tiled.
at::Tensor VideoDecoder::Impl::upsample(const UpBlock& u, const at::Tensor& x, bool causal) const
{
    const auto& s = u.plan.stride;
    const auto drop = s[0] - 1;
    auto h = depthToSpace(conv(x, u.upsampler, causal), s);
    h = h.narrow(2, drop, h.size(2) - drop);
    if (!u.plan.residual)
        return h;
    const auto repeats = s[0] * s[1] * s[2] / u.plan.factor;
    auto r = depthToSpace(x, s).repeat({1, repeats, 1, 1, 1});
    return h + r.narrow(2, drop, r.size(2) - drop);
}

at::Tensor VideoDecoder::Impl::run(const at::Tensor& z, bool causal, const std::stop_token& stop) const
{
    auto check = [&] {
        if (stop.stop_requested())
            throw Stopped{};
    };
    auto x = conv(z, convIn, causal);
    for (const auto& r : mid) {
        check();
        x = resnet(r, x, causal);
    }
    for (const auto& u : ups) {
        if (u.convIn) {
            check();
            x = resnet(*u.convIn, x, causal);
        }
        if (u.plan.upsample)
            x = upsample(u, x, causal);
        for (const auto& r : u.resnets) {
            check();
            x = resnet(r, x, causal);
        }
    }
    x = conv(normAct(x), convOut, causal);
    // Unpatchify: channels (c, p_t, p_w, p_h), diffusers' permute(0, 1, 5, 2, 6, 4, 7, 3).
    const auto p = config.patchSize, pt = config.patchSizeT;
    const auto b = x.size(0), f = x.size(2), hh = x.size(3), ww = x.size(4);
    return x.reshape({b, -1, pt, p, p, f, hh, ww}).permute({0, 1, 5, 2, 6, 4, 7, 3}).reshape({b, -1, f * pt, hh * p, ww * p});
}

Result<at::Tensor> VideoDecoder::Impl::decode(const at::Tensor& latents, const VideoDecodeOptions& o) const
{
    auto invalid = [](const std::string& what) { return makeError(ErrorCode::InvalidArgument, "LTX-2 video VAE: " + what); };
    if (!latents.defined() || latents.dim() != 5)
        return invalid("latents must be [B, C, F, H, W], got " + (latents.defined() ? std::to_string(latents.dim()) + "-D" : "nothing"));
    if (latents.size(1) != config.latentChannels)
        return invalid(
            "latents have " + std::to_string(latents.size(1)) + " channels, the VAE takes " + std::to_string(config.latentChannels));
    const auto batch = latents.size(0), frames = latents.size(2), height = latents.size(3), width = latents.size(4);
    if (batch < 1 || frames < 1 || height < 1 || width < 1)
        return invalid("latents " + shapeText(latents.sizes().vec()) + " are empty");
    if (o.tileSize < 0 || (o.tileSize > 0 && (o.tileOverlap < 0 || o.tileOverlap >= o.tileSize)))
        return invalid(
            "tile overlap " + std::to_string(o.tileOverlap) + " must be at least 0 and below the tile size " + std::to_string(o.tileSize));
    if (o.chunkFrames < 0 || (o.chunkFrames > 0 && (o.chunkOverlap < 1 || o.chunkOverlap >= o.chunkFrames)))
        return invalid("chunk overlap " + std::to_string(o.chunkOverlap)
            + " must be at least 1 latent frame (a chunk's first latent "
              "decodes to one frame) and below the chunk length "
            + std::to_string(o.chunkFrames));
    const auto rows = tileSpans(height, o.tileSize, o.tileOverlap);
    const auto cols = tileSpans(width, o.tileSize, o.tileOverlap);
    const auto chunks = tileSpans(frames, o.chunkFrames, o.chunkOverlap);
    if (plan.padding == Padding::Reflect) {
        for (const auto& spans : {rows, cols})
            for (const auto& s : spans)
                if (s.size < 2)
                    return invalid("this decoder pads by reflection, which needs at least 2 latent cells per tile side; the latent is "
                        + std::to_string(height) + " x " + std::to_string(width)
                        + (o.tileSize > 0 ? " and a tile would be 1 cell wide; "
                                            "choose another tile size or overlap"
                                          : std::string()));
    }
    const bool causal = o.causal.value_or(config.decoderCausal);
    const auto outDevice = o.outputDevice.value_or(device);
    const auto total = static_cast<std::int64_t>(chunks.size() * rows.size() * cols.size());
    std::int64_t done = 0;
    if (o.stop.stop_requested())
        throw Stopped{};

    // LTX2Pipeline._denormalize_latents: x * std / scaling_factor + mean (in float32 here).
    const auto stats = [&](const at::Tensor& t) { return t.view({1, -1, 1, 1, 1}); };
    const auto z = (latents.to(device, at::kFloat) * stats(std) / config.scalingFactor + stats(mean)).to(dtype);

    if (total == 1) {
        auto video = run(z, causal, o.stop).to(outDevice);
        if (o.onProgress)
            o.onProgress(1, 1);
        return video;
    }
    const auto s = plan.spatialScale, t = plan.temporalScale;
    auto video = at::empty(
        {batch, config.outChannels, t * (frames - 1) + 1, s * height, s * width}, at::TensorOptions().dtype(dtype).device(outDevice));
    const auto spatialBlend = o.tileOverlap * s;
    const auto temporalBlend = t * (o.chunkOverlap - 1) + 1;
    for (std::size_t k = 0; k < chunks.size(); ++k) {
        const auto& chunk = chunks[k];
        const auto zc = z.narrow(2, chunk.start, chunk.size);
        const auto first = t * chunk.start;  // a chunk starting at latent s decodes to frames t s, t s + 1, ...
        const auto fade = k == 0 ? 0 : temporalBlend;
        // Tiles keep what their right / bottom neighbours blend with, after their own blending,
        // as diffusers' in-place blend_v / blend_h leave them.
        std::vector<at::Tensor> above(cols.size());
        for (std::size_t i = 0; i < rows.size(); ++i) {
            at::Tensor left;
            for (std::size_t j = 0; j < cols.size(); ++j) {
                if (o.stop.stop_requested())
                    throw Stopped{};
                auto tile =
                    run(zc.narrow(3, rows[i].start, rows[i].size).narrow(4, cols[j].start, cols[j].size), causal, o.stop).to(outDevice);
                if (i > 0)
                    blendOverlap(above[j], tile, spatialBlend, 3);
                if (j > 0)
                    blendOverlap(left, tile, spatialBlend, 4);
                const auto keepRows = i + 1 < rows.size() ? (rows[i + 1].start - rows[i].start) * s : tile.size(3);
                const auto keepCols = j + 1 < cols.size() ? (cols[j + 1].start - cols[j].start) * s : tile.size(4);
                const auto part = tile.narrow(3, 0, keepRows).narrow(4, 0, keepCols);
                auto dst =
                    video.narrow(2, first, tile.size(2)).narrow(3, rows[i].start * s, keepRows).narrow(4, cols[j].start * s, keepCols);
                if (fade > 0) {
                    // The earlier chunk already wrote these frames: fade from it to this one.
                    const auto e = std::min(fade, tile.size(2));
                    const auto w =
                        (at::arange(e, tile.options().dtype(at::kFloat)) / static_cast<double>(e)).view({1, 1, e, 1, 1}).to(dtype);
                    auto head = dst.narrow(2, 0, e);
                    head.copy_(head * (1 - w) + part.narrow(2, 0, e) * w);
                    dst.narrow(2, e, tile.size(2) - e).copy_(part.narrow(2, e, tile.size(2) - e));
                } else {
                    dst.copy_(part);
                }
                // Strips, not whole tiles, so one row of tiles is never held at once.
                if (j + 1 < cols.size())
                    left =
                        tile.narrow(4, tile.size(4) - std::min(spatialBlend, tile.size(4)), std::min(spatialBlend, tile.size(4))).clone();
                if (i + 1 < rows.size())
                    above[j] =
                        tile.narrow(3, tile.size(3) - std::min(spatialBlend, tile.size(3)), std::min(spatialBlend, tile.size(3))).clone();
                ++done;
                if (o.onProgress)
                    o.onProgress(done, total);
            }
        }
    }
    return video;
}

VideoDecoder::VideoDecoder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
VideoDecoder::~VideoDecoder() = default;
VideoDecoder::VideoDecoder(VideoDecoder&&) noexcept = default;
VideoDecoder& VideoDecoder::operator=(VideoDecoder&&) noexcept = default;
const VideoVaeConfig& VideoDecoder::config() const
{
    return m_impl->config;
}
c10::Device VideoDecoder::device() const
{
    return m_impl->device;
}
c10::ScalarType VideoDecoder::dtype() const
{
    return m_impl->dtype;
}
std::int64_t VideoDecoder::spatialScale() const
{
    return m_impl->plan.spatialScale;
}
std::int64_t VideoDecoder::temporalScale() const
{
    return m_impl->plan.temporalScale;
}

std::int64_t VideoDecoder::residentBytes() const
{
    const auto& m = *m_impl;
    std::int64_t total = bytesOf(m.convIn) + bytesOf(m.convOut) + bytesOf(m.mean) + bytesOf(m.std);
    for (const auto& r : m.mid)
        total += bytesOf(r);
    for (const auto& u : m.ups) {
        total += bytesOf(u.upsampler) + (u.convIn ? bytesOf(*u.convIn) : 0);
        for (const auto& r : u.resnets)
            total += bytesOf(r);
    }
    return total;
}

Result<VideoDecoder> VideoDecoder::load(const Ltx2Weights& weights, const VideoDecoderLoadOptions& options)
{
    auto config = resolveVideoVaeConfig(weights, options.config);
    if (!config)
        return config.error();
    auto plan = planDecoder(*config);
    if (!plan)
        return plan.error();
    auto impl = std::make_unique<Impl>();
    impl->config = *config;
    impl->plan = *plan;
    impl->device = options.device;
    impl->dtype = options.dtype;
    try {
        WeightTaker w(weights, Part::VideoVae, options.device, options.dtype);
        // The encoder (ltx-core names kept) and ltx-core's spare statistics belong to no
        // decoder module; the two statistics the decoder uses are taken in float32 below.
        w.ignorePrefix("encoder.");
        w.ignorePrefix("per_channel_statistics.");
        w.ignorePrefix("latents_");
        impl->convIn = takeConv(w, "decoder.conv_in.conv");
        for (std::int64_t l = 0; l < plan->midLayers; ++l)
            impl->mid.push_back(takeResBlock(w, "decoder.mid_block.resnets." + std::to_string(l), false));
        for (std::size_t i = 0; i < plan->blocks.size(); ++i) {
            const auto prefix = "decoder.up_blocks." + std::to_string(i);
            UpBlock u;
            u.plan = plan->blocks[i];
            if (u.plan.convIn)
                u.convIn = takeResBlock(w, prefix + ".conv_in", true);
            if (u.plan.upsample)
                u.upsampler = takeConv(w, prefix + ".upsamplers.0.conv.conv");
            for (std::int64_t l = 0; l < u.plan.layers; ++l)
                u.resnets.push_back(takeResBlock(w, prefix + ".resnets." + std::to_string(l), false));
            impl->ups.push_back(std::move(u));
        }
        impl->convOut = takeConv(w, "decoder.conv_out.conv");
        if (auto done = w.finish(); !done)
            return done.error();
        WeightTaker statistics(weights, Part::VideoVae, options.device, at::kFloat);
        statistics.ignorePrefix("");  // everything else was accounted for above
        impl->mean = statistics.tensor("latents_mean");
        impl->std = statistics.tensor("latents_std");
        if (auto done = statistics.finish(); !done)
            return done.error();
    } catch (const c10::Error& e) {
        return errorFromException(e, weights.describeFiles() + ": loading the LTX-2 video VAE decoder failed", ErrorCode::Internal);
    }
    return VideoDecoder(std::move(impl));
}

const at::Tensor& VideoDecoder::latentsMean() const
{
    return m_impl->mean;
}
const at::Tensor& VideoDecoder::latentsStd() const
{
    return m_impl->std;
}

Result<at::Tensor> VideoDecoder::decode(const at::Tensor& latents, const VideoDecodeOptions& options) const
{
    try {
        return m_impl->decode(latents, options);
    } catch (const Stopped&) {
        return makeError(ErrorCode::Cancelled, "video decode cancelled");
    } catch (const c10::OutOfMemoryError& e) {
        return makeError(ErrorCode::OutOfMemory,
            std::string("LTX-2 video VAE ran out of memory: ") + e.what_without_backtrace()
                + "; decode in smaller tiles (tileSize) or temporal chunks (chunkFrames)");
    } catch (const c10::Error& e) {
        return errorFromException(e, "LTX-2 video VAE");
    }
}

// ----------------------------------------------------------------------------- the encoder

namespace {

struct DownBlock {
    DownPlan plan;
    std::vector<ResBlock> resnets;
    Conv downsampler;
};

// [B, C, F s_t, H s_h, W s_w] -> [B, C s_t s_h s_w, F, H, W], channels (c, s_t, s_h, s_w): the
// rearrangement of LTX2VideoDownsampler3d (unflatten, permute(0, 1, 3, 5, 7, 2, 4, 6)).
at::Tensor spaceToDepth(const at::Tensor& x, const std::array<std::int64_t, 3>& s)
{
    const auto b = x.size(0), c = x.size(1), f = x.size(2) / s[0], h = x.size(3) / s[1], w = x.size(4) / s[2];
    return x.reshape({b, c, f, s[0], h, s[1], w, s[2]}).permute({0, 1, 3, 5, 7, 2, 4, 6}).reshape({b, c * s[0] * s[1] * s[2], f, h, w});
}

}  // namespace

struct VideoEncoder::Impl {
    VideoVaeConfig config;
    EncoderPlan plan;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    Conv convIn, convOut;
    std::vector<DownBlock> downs;
    std::vector<ResBlock> mid;
    at::Tensor mean, std;  // float32 [latent_channels]

    at::Tensor conv(const at::Tensor& x, const Conv& c, bool causal) const { return causalConv(x, c, causal, plan.padding); }
    at::Tensor resnet(const ResBlock& r, const at::Tensor& x, bool causal) const
    {
        return resnetBlock(r, x, causal, plan.padding, config.resnetNormEps);
    }
    at::Tensor downsample(const DownBlock& d, const at::Tensor& x, bool causal) const;
    at::Tensor run(const at::Tensor& video, bool causal, const std::stop_token& stop) const;
    at::Tensor tiled(const at::Tensor& video, const std::vector<Span>& rows, const std::vector<Span>& cols, std::int64_t overlap,
        bool causal, const VideoEncodeOptions& o, std::int64_t& done, std::int64_t total) const;
    Result<at::Tensor> encode(const at::Tensor& video, const VideoEncodeOptions& options) const;
};

// LTX2VideoDownsampler3d: the first s_t - 1 frames repeated in front (so 2F + 1 frames become
// F + 1), then space-to-depth of the conv's output plus, as the residual, space-to-depth of
// the input averaged over groups of channels.
at::Tensor VideoEncoder::Impl::downsample(const DownBlock& d, const at::Tensor& x, bool causal) const
{
    const auto& s = d.plan.stride;
    const auto h = s[0] > 1 ? at::cat({x.narrow(2, 0, s[0] - 1), x}, 2) : x;
    auto residual = spaceToDepth(h, s);
    residual = residual.reshape({residual.size(0), d.plan.out, d.plan.group, residual.size(2), residual.size(3), residual.size(4)}).mean(2);
    return spaceToDepth(conv(h, d.downsampler, causal), s).add_(residual);
}

// LTX2VideoEncoder3d.forward, keeping only the means (the mode vae.encode's argmax takes).
at::Tensor VideoEncoder::Impl::run(const at::Tensor& video, bool causal, const std::stop_token& stop) const
{
    auto check = [&] {
        if (stop.stop_requested())
            throw Stopped{};
    };
    // Patchify: channels (c, p_t, p_w, p_h), diffusers' permute(0, 1, 3, 7, 5, 2, 4, 6).
    const auto p = config.patchSize, pt = config.patchSizeT;
    const auto b = video.size(0), c = video.size(1), f = video.size(2) / pt, hh = video.size(3) / p, ww = video.size(4) / p;
    auto x = video.to(device, dtype)
                 .reshape({b, c, f, pt, hh, p, ww, p})
                 .permute({0, 1, 3, 7, 5, 2, 4, 6})
                 .reshape({b, c * pt * p * p, f, hh, ww});
    x = conv(x, convIn, causal);
    for (const auto& d : downs) {
        for (const auto& r : d.resnets) {
            check();
            x = resnet(r, x, causal);
        }
        if (d.plan.downsample)
            x = downsample(d, x, causal);
    }
    for (const auto& r : mid) {
        check();
        x = resnet(r, x, causal);
    }
    x = conv(normAct(x), convOut, causal);
    return x.narrow(1, 0, config.latentChannels);  // the last channel is the shared log-variance
}

// diffusers' tiled_encode over the given latent cells: each tile encoded alone, blended into
// its upper and left neighbours (in place, as blend_v / blend_h leave them, so a tile blends
// with its neighbours' blended values), and cropped to where the next tile starts.
at::Tensor VideoEncoder::Impl::tiled(const at::Tensor& video, const std::vector<Span>& rows, const std::vector<Span>& cols,
    std::int64_t overlap, bool causal, const VideoEncodeOptions& o, std::int64_t& done, std::int64_t total) const
{
    const auto s = plan.spatialScale;
    const auto step = [&] {
        ++done;
        if (o.onProgress)
            o.onProgress(done, total);
    };
    if (rows.size() == 1 && cols.size() == 1) {
        auto out = run(video, causal, o.stop);
        step();
        return out;
    }
    const auto frames = (video.size(2) - 1) / plan.temporalScale + 1;
    auto out = at::empty(
        {video.size(0), config.latentChannels, frames, rows.back().start + rows.back().size, cols.back().start + cols.back().size},
        at::TensorOptions().dtype(dtype).device(device));
    std::vector<at::Tensor> above(cols.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
        at::Tensor left;
        for (std::size_t j = 0; j < cols.size(); ++j) {
            if (o.stop.stop_requested())
                throw Stopped{};
            auto tile =
                run(video.narrow(3, rows[i].start * s, rows[i].size * s).narrow(4, cols[j].start * s, cols[j].size * s), causal, o.stop);
            if (i > 0)
                blendOverlap(above[j], tile, overlap, 3);
            if (j > 0)
                blendOverlap(left, tile, overlap, 4);
            const auto keepRows = i + 1 < rows.size() ? rows[i + 1].start - rows[i].start : tile.size(3);
            const auto keepCols = j + 1 < cols.size() ? cols[j + 1].start - cols[j].start : tile.size(4);
            out.narrow(3, rows[i].start, keepRows)
                .narrow(4, cols[j].start, keepCols)
                .copy_(tile.narrow(3, 0, keepRows).narrow(4, 0, keepCols));
            left = tile;
            above[j] = tile;
            step();
        }
    }
    return out;
}

Result<at::Tensor> VideoEncoder::Impl::encode(const at::Tensor& video, const VideoEncodeOptions& o) const
{
    auto invalid = [](const std::string& what) { return makeError(ErrorCode::InvalidArgument, "LTX-2 video VAE encoder: " + what); };
    if (!video.defined() || video.dim() != 5)
        return invalid(
            "the video must be [B, C, F, H, W], got " + (video.defined() ? std::to_string(video.dim()) + "-D" : std::string("nothing")));
    if (!video.is_floating_point())
        return invalid("the video must be floating point in [-1, 1], got " + std::string(c10::toString(video.scalar_type())));
    const auto batch = video.size(0), frames = video.size(2), height = video.size(3), width = video.size(4);
    if (video.size(1) != config.inChannels)
        return invalid("the video has " + std::to_string(video.size(1)) + " channels, the VAE takes " + std::to_string(config.inChannels));
    const auto s = plan.spatialScale, t = plan.temporalScale;
    if (batch < 1 || frames < 1 || height < 1 || width < 1)
        return invalid("the video " + shapeText(video.sizes().vec()) + " is empty");
    if ((frames - 1) % t != 0)
        return invalid("the video has " + std::to_string(frames) + " frames; the encoder takes " + std::to_string(t) + "k + 1 (1, "
            + std::to_string(t + 1) + ", " + std::to_string(2 * t + 1) + ", ...)");
    if (height % s != 0 || width % s != 0)
        return invalid("the video is " + std::to_string(height) + " x " + std::to_string(width)
            + " pixels; height and width must be "
              "multiples of "
            + std::to_string(s));
    if (o.tileSize < 0 || (o.tileSize > 0 && (o.tileOverlap < 0 || o.tileOverlap >= o.tileSize)))
        return invalid(
            "tile overlap " + std::to_string(o.tileOverlap) + " must be at least 0 and below the tile size " + std::to_string(o.tileSize));
    if (o.chunkFrames < 0 || (o.chunkFrames > 0 && (o.chunkOverlap < 1 || o.chunkOverlap >= o.chunkFrames)))
        return invalid("chunk overlap " + std::to_string(o.chunkOverlap)
            + " must be at least 1 latent frame (a chunk's first latent, "
              "which its first frame alone encodes to, is dropped) and below the chunk length "
            + std::to_string(o.chunkFrames));
    const auto latentFrames = (frames - 1) / t + 1;
    const auto rows = tileSpans(height / s, o.tileSize, o.tileOverlap);
    const auto cols = tileSpans(width / s, o.tileSize, o.tileOverlap);
    const auto chunks = tileSpans(latentFrames, o.chunkFrames, o.chunkOverlap);
    if (plan.padding == Padding::Reflect) {
        for (const auto& spans : {rows, cols})
            for (const auto& span : spans)
                if (span.size < 2)
                    return invalid("this encoder pads by reflection, which needs at least 2 latent cells per tile side; the video is "
                        + std::to_string(height / s) + " x " + std::to_string(width / s) + " cells"
                        + (o.tileSize > 0 ? " and a tile "
                                            "would be 1 cell wide; choose another tile size or overlap"
                                          : std::string()));
    }
    const bool causal = o.causal.value_or(config.encoderCausal);
    const auto total = static_cast<std::int64_t>(chunks.size() * rows.size() * cols.size());
    std::int64_t done = 0;
    if (o.stop.stop_requested())
        throw Stopped{};
    // The video stays where it is; tiles move to the encoder's device one by one.
    const auto& x = video;
    at::Tensor means;
    if (chunks.size() == 1) {
        means = tiled(x, rows, cols, o.tileOverlap, causal, o, done, total);
    } else {
        // diffusers' _temporal_tiled_encode: a chunk from latent frame a encodes frames t a ..;
        // a later chunk drops its first latent and blends the next overlap - 1 into the
        // previous chunk's (blended) tail; each chunk keeps the latents up to the next one's.
        means =
            at::empty({batch, config.latentChannels, latentFrames, height / s, width / s}, at::TensorOptions().dtype(dtype).device(device));
        at::Tensor previous;
        for (std::size_t k = 0; k < chunks.size(); ++k) {
            const auto& chunk = chunks[k];
            auto latents = tiled(x.narrow(2, t * chunk.start, t * (chunk.size - 1) + 1), rows, cols, o.tileOverlap, causal, o, done, total);
            if (k > 0) {
                latents = latents.narrow(2, 1, latents.size(2) - 1);
                blendOverlap(previous, latents, o.chunkOverlap - 1, 2);
            }
            const auto first = k == 0 ? 0 : chunk.start + 1;
            const auto keep = k + 1 < chunks.size() ? chunks[k + 1].start + 1 - first : latents.size(2);
            means.narrow(2, first, keep).copy_(latents.narrow(2, 0, keep));
            previous = latents;
        }
    }
    // _normalize_latents: (x - mean) * scaling_factor / std, in float32.
    const auto stats = [&](const at::Tensor& v) { return v.view({1, -1, 1, 1, 1}); };
    return (means.to(at::kFloat) - stats(mean)) * config.scalingFactor / stats(std);
}

VideoEncoder::VideoEncoder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
VideoEncoder::~VideoEncoder() = default;
VideoEncoder::VideoEncoder(VideoEncoder&&) noexcept = default;
VideoEncoder& VideoEncoder::operator=(VideoEncoder&&) noexcept = default;
const VideoVaeConfig& VideoEncoder::config() const
{
    return m_impl->config;
}
c10::Device VideoEncoder::device() const
{
    return m_impl->device;
}
c10::ScalarType VideoEncoder::dtype() const
{
    return m_impl->dtype;
}
std::int64_t VideoEncoder::spatialScale() const
{
    return m_impl->plan.spatialScale;
}
std::int64_t VideoEncoder::temporalScale() const
{
    return m_impl->plan.temporalScale;
}

std::int64_t VideoEncoder::residentBytes() const
{
    const auto& m = *m_impl;
    std::int64_t total = bytesOf(m.convIn) + bytesOf(m.convOut) + bytesOf(m.mean) + bytesOf(m.std);
    for (const auto& d : m.downs) {
        total += bytesOf(d.downsampler);
        for (const auto& r : d.resnets)
            total += bytesOf(r);
    }
    for (const auto& r : m.mid)
        total += bytesOf(r);
    return total;
}

Result<VideoEncoder> VideoEncoder::load(const Ltx2Weights& weights, const VideoEncoderLoadOptions& options)
{
    auto config = resolveVideoEncoderConfig(weights, options.config);
    if (!config)
        return config.error();
    auto plan = planEncoder(*config);
    if (!plan)
        return plan.error();
    auto impl = std::make_unique<Impl>();
    impl->config = *config;
    impl->plan = *plan;
    impl->device = options.device;
    impl->dtype = options.dtype;
    try {
        WeightTaker w(weights, Part::VideoVae, options.device, options.dtype);
        // The decoder and ltx-core's spare statistics belong to no encoder module; the two
        // statistics the encoder uses are taken in float32 below.
        w.ignorePrefix("decoder.");
        w.ignorePrefix("per_channel_statistics.");
        w.ignorePrefix("latents_");
        impl->convIn = takeConv(w, "encoder.conv_in.conv");
        for (std::size_t i = 0; i < plan->blocks.size(); ++i) {
            const auto prefix = "encoder.down_blocks." + std::to_string(i);
            DownBlock d;
            d.plan = plan->blocks[i];
            for (std::int64_t l = 0; l < d.plan.layers; ++l)
                d.resnets.push_back(takeResBlock(w, prefix + ".resnets." + std::to_string(l), false));
            if (d.plan.downsample)
                d.downsampler = takeConv(w, prefix + ".downsamplers.0.conv.conv");
            impl->downs.push_back(std::move(d));
        }
        for (std::int64_t l = 0; l < plan->midLayers; ++l)
            impl->mid.push_back(takeResBlock(w, "encoder.mid_block.resnets." + std::to_string(l), false));
        impl->convOut = takeConv(w, "encoder.conv_out.conv");
        if (auto done = w.finish(); !done)
            return done.error();
        WeightTaker statistics(weights, Part::VideoVae, options.device, at::kFloat);
        statistics.ignorePrefix("");  // everything else was accounted for above
        impl->mean = statistics.tensor("latents_mean");
        impl->std = statistics.tensor("latents_std");
        if (auto done = statistics.finish(); !done)
            return done.error();
    } catch (const c10::Error& e) {
        return errorFromException(e, weights.describeFiles() + ": loading the LTX-2 video VAE encoder failed", ErrorCode::Internal);
    }
    return VideoEncoder(std::move(impl));
}

Result<at::Tensor> VideoEncoder::encode(const at::Tensor& video, const VideoEncodeOptions& options) const
{
    try {
        return m_impl->encode(video, options);
    } catch (const Stopped&) {
        return makeError(ErrorCode::Cancelled, "video encode cancelled");
    } catch (const c10::OutOfMemoryError& e) {
        return makeError(ErrorCode::OutOfMemory,
            std::string("LTX-2 video VAE encoder ran out of memory: ") + e.what_without_backtrace()
                + "; encode in smaller tiles (tileSize) or temporal chunks (chunkFrames)");
    } catch (const c10::Error& e) {
        return errorFromException(e, "LTX-2 video VAE encoder");
    }
}

}  // namespace vireo::ltx2
