#include "inference/models/ltx2/ltx2audiovae.h"

#include "inference/quant/quantizedweight.h"
#include "inference/util/device.h"

#include "inference/models/ltx2/ltx2config.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <set>

namespace vireo::ltx2 {

namespace {

using Json = nlohmann::json;

constexpr const char* kDiffusersName = "audio_vae/config.json";
constexpr const char* kLtxCoreName = "the checkpoint's embedded config (audio_vae)";
// diffusers' LATENT_DOWNSAMPLE_FACTOR: 4x in time (causally: 4L - 3 frames) and in mel bins.
constexpr std::int64_t kLatentDownsample = 4;

struct Cancelled {};

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

template <typename T>
void read(const Json& j, const char* key, T& out)
{
    jsonutil::readField(j, key, out);
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

const Json* object(const Json& j, const char* key)
{
    const auto it = j.find(key);
    return it != j.end() && it->is_object() ? &*it : nullptr;
}

// F.pad order: (left, right, top, bottom) = (mel before, mel after, time before, time after).
using Padding = std::array<std::int64_t, 4>;

Padding causalPadding(const std::string& axis, std::int64_t kernel)
{
    // LTX2AudioCausalConv2d: the causal axis is padded on its leading side only.
    const std::int64_t p = kernel - 1;
    if (axis == "height")
        return {p / 2, p - p / 2, p, 0};
    if (axis == "width" || axis == "width-compatibility")
        return {p, 0, p / 2, p - p / 2};
    return {p / 2, p - p / 2, p / 2, p - p / 2};
}

struct Conv2d {
    at::Tensor weight, bias;
    Padding padding{};
    std::int64_t stride = 1;
};

// LTX2AudioDownsample's explicit zero padding before its stride-2 3x3 conv, by causal axis.
Padding downsamplePadding(const std::string& axis)
{
    if (axis == "height")
        return {0, 1, 2, 0};
    if (axis == "width")
        return {2, 0, 0, 1};
    if (axis == "width-compatibility")
        return {1, 0, 0, 1};
    return {0, 1, 0, 1};
}

struct ResBlock {
    Conv2d conv1, conv2;
    std::optional<Conv2d> nin;  // 1x1 shortcut when the block changes the width
};

struct Level {
    std::vector<ResBlock> blocks;
    std::optional<Conv2d> resample;  // the decoder's upsample, the encoder's downsample
};

using quant::bytesOf;
std::int64_t bytesOf(const Conv2d& c)
{
    return bytesOf(c.weight) + bytesOf(c.bias);
}
std::int64_t bytesOf(const ResBlock& b)
{
    return bytesOf(b.conv1) + bytesOf(b.conv2) + (b.nin ? bytesOf(*b.nin) : 0);
}

// What the encoder or the decoder holds: statistics, end convolutions, mid blocks and levels.
std::int64_t trunkBytes(const at::Tensor& mean, const at::Tensor& std, std::initializer_list<const Conv2d*> ends,
    std::initializer_list<const ResBlock*> mids, const std::vector<Level>& levels)
{
    std::int64_t n = bytesOf(mean) + bytesOf(std);
    for (const auto* c : ends)
        n += bytesOf(*c);
    for (const auto* b : mids)
        n += bytesOf(*b);
    for (const auto& level : levels) {
        for (const auto& b : level.blocks)
            n += bytesOf(b);
        if (level.resample)
            n += bytesOf(*level.resample);
    }
    return n;
}

}  // namespace

std::int64_t AudioVaeConfig::melFrames(std::int64_t latentFrames) const
{
    // diffusers subtracts the causal overhang for every causality_axis string, "none" included.
    return std::max<std::int64_t>(latentFrames * kLatentDownsample - (kLatentDownsample - 1), 1);
}

Result<AudioVaeConfig> audioVaeConfigFromDiffusers(const std::string& text)
{
    const auto parsed = parseObject(text, kDiffusersName);
    if (!parsed)
        return parsed.error();
    const Json& j = *parsed;
    try {
        AudioVaeConfig c;
        read(j, "base_channels", c.baseChannels);
        read(j, "output_channels", c.outputChannels);
        read(j, "ch_mult", c.chMult);
        read(j, "num_res_blocks", c.numResBlocks);
        read(j, "attn_resolutions", c.attnResolutions);
        read(j, "resolution", c.resolution);
        read(j, "latent_channels", c.latentChannels);
        read(j, "norm_type", c.normType);
        read(j, "mid_block_add_attention", c.midBlockAddAttention);
        read(j, "sample_rate", c.sampleRate);
        read(j, "mel_hop_length", c.melHopLength);
        if (j.contains("causality_axis") && j["causality_axis"].is_null())
            return makeError(ErrorCode::Unsupported, std::string(kDiffusersName) + ": causality_axis null is rejected by diffusers too");
        read(j, "causality_axis", c.causalityAxis);
        if (j.contains("mel_bins") && j["mel_bins"].is_null())
            return makeError(ErrorCode::Unsupported,
                std::string(kDiffusersName) + ": mel_bins null is not supported (the pipeline needs it to unpack the latents)");
        read(j, "mel_bins", c.melBins);
        read(j, "double_z", c.doubleZ);
        return c;
    } catch (const std::exception& e) {  // jsonutil's FieldError names the key
        return makeError(ErrorCode::InvalidFormat, std::string(kDiffusersName) + ": " + e.what());
    }
}

Result<AudioVaeConfig> audioVaeConfigFromLtxCore(const std::string& text)
{
    const auto parsed = parseObject(text, "the checkpoint's embedded config");
    if (!parsed)
        return parsed.error();
    const Json& root = *parsed;
    const auto* section = object(root, "audio_vae");
    if (!section)
        return makeError(ErrorCode::NotFound, "the checkpoint's embedded config has no \"audio_vae\" section");
    const Json empty = Json::object();
    const auto* model = object(*section, "model");
    const auto* params = model ? object(*model, "params") : nullptr;
    const auto* dd = params ? object(*params, "ddconfig") : nullptr;
    if (!dd)
        return makeError(ErrorCode::InvalidFormat, std::string(kLtxCoreName) + " has no model.params.ddconfig");
    const auto* pre = object(*section, "preprocessing");
    const auto* stft = pre ? object(*pre, "stft") : nullptr;
    const auto* mel = pre ? object(*pre, "mel") : nullptr;
    const auto* variables = object(*section, "variables");
    try {
        // ltx-core's defaults (AudioDecoderConfigurator): note attention *on* when absent.
        AudioVaeConfig c;
        c.attnResolutions = {8, 16, 32};
        c.midBlockAddAttention = true;
        read(*dd, "ch", c.baseChannels);
        read(*dd, "out_ch", c.outputChannels);
        read(*dd, "ch_mult", c.chMult);
        read(*dd, "num_res_blocks", c.numResBlocks);
        if (dd->contains("attn_resolutions")) {
            c.attnResolutions.clear();
            read(*dd, "attn_resolutions", c.attnResolutions);
        }
        read(*dd, "resolution", c.resolution);
        read(*dd, "z_channels", c.latentChannels);
        read(*dd, "norm_type", c.normType);
        read(*dd, "causality_axis", c.causalityAxis);
        read(*dd, "mid_block_add_attention", c.midBlockAddAttention);
        read(*dd, "double_z", c.doubleZ);
        read(*params, "sampling_rate", c.sampleRate);
        read(stft ? *stft : empty, "hop_length", c.melHopLength);
        read(stft ? *stft : empty, "filter_length", c.nFft);
        // ltx-core: ddconfig.mel_bins or preprocessing.mel.n_mel_channels or variables.mel_bins.
        std::int64_t melBins = 0;
        read(*dd, "mel_bins", melBins);
        if (melBins == 0)
            read(mel ? *mel : empty, "n_mel_channels", melBins);
        if (melBins == 0)
            read(variables ? *variables : empty, "mel_bins", melBins);
        if (melBins == 0)
            return makeError(ErrorCode::InvalidFormat, std::string(kLtxCoreName) + " names no mel_bins");
        c.melBins = melBins;
        return c;
    } catch (const std::exception& e) {  // jsonutil's FieldError names the key
        return makeError(ErrorCode::InvalidFormat, std::string(kLtxCoreName) + ": " + e.what());
    }
}

std::string toJson(const AudioVaeConfig& c)
{
    Json j{{"base_channels", c.baseChannels}, {"output_channels", c.outputChannels}, {"ch_mult", c.chMult},
        {"num_res_blocks", c.numResBlocks}, {"attn_resolutions", c.attnResolutions}, {"resolution", c.resolution},
        {"latent_channels", c.latentChannels}, {"norm_type", c.normType}, {"causality_axis", c.causalityAxis},
        {"mid_block_add_attention", c.midBlockAddAttention}, {"sample_rate", c.sampleRate}, {"mel_hop_length", c.melHopLength},
        {"mel_bins", c.melBins}, {"n_fft", c.nFft}};
    return j.dump();
}

Result<AudioVaeConfig> resolveAudioVaeConfig(const Ltx2Weights& w, const std::optional<AudioVaeConfig>& override)
{
    const auto part = Part::AudioVae;
    const auto files = w.describeFiles();
    const auto convIn = w.shape(part, "decoder.conv_in.conv.weight");
    const auto convOut = w.shape(part, "decoder.conv_out.conv.weight");
    const auto mean = w.shape(part, "latents_mean");
    if (!convIn || !convOut)
        return makeError(ErrorCode::NotFound,
            files
                + ": no LTX-2 audio VAE decoder (decoder.conv_in / decoder.conv_out) found; "
                  "give the audio_vae folder or a Lightricks single file that holds audio_vae.* tensors");

    auto given = checkpointConfig(w, part, override, audioVaeConfigFromDiffusers, audioVaeConfigFromLtxCore);
    if (!given)
        return given.error();
    // Without hyper-parameters diffusers' defaults apply: they are the published model's, and
    // the shape checks below refuse anything else.
    AudioVaeConfig c = given->value_or(AudioVaeConfig{});

    auto unsupported = [&](const std::string& what) {
        return makeError(
            ErrorCode::Unsupported, files + ": the audio VAE config asks for " + what + ", which this port does not implement");
    };
    auto mismatch = [&](const std::string& what, const std::string& tensor, const std::vector<std::int64_t>& found) {
        return makeError(ErrorCode::InvalidFormat,
            files + ": the audio VAE config says " + what + " but " + tensor + " is " + shapeText(found)
                + "; the config does not belong to these weights");
    };
    if (c.normType != "pixel")
        return unsupported("norm_type '" + c.normType + "' (LTX-2 uses \"pixel\")");
    static const std::set<std::string> kAxes{"height", "width", "width-compatibility", "none"};
    if (!kAxes.count(c.causalityAxis))
        return makeError(ErrorCode::InvalidFormat, files + ": causality_axis '" + c.causalityAxis + "' is not one diffusers accepts");
    if (c.midBlockAddAttention)
        return unsupported("a mid-block attention layer (mid_block_add_attention)");
    if (c.chMult.empty() || c.numResBlocks < 1 || c.baseChannels < 1 || c.latentChannels < 1 || c.outputChannels < 1)
        return makeError(ErrorCode::InvalidFormat, files + ": the audio VAE config has empty ch_mult or non-positive widths");
    // Bounds before the shifts and products below (the published model: 3 levels, 2 blocks).
    ConfigBounds bounds(files + ": the audio VAE config");
    bounds.range("ch_mult entries", static_cast<std::int64_t>(c.chMult.size()), 1, 16)
        .range("num_res_blocks", c.numResBlocks, 1, kMaxBlocks)
        .range("base_channels", c.baseChannels, 1, kMaxChannels)
        .range("latent_channels", c.latentChannels, 1, kMaxChannels)
        .range("output_channels", c.outputChannels, 1, kMaxChannels)
        .range("resolution", c.resolution, 1, 1 << 20)
        .range("mel_bins", c.melBins, 1, 1 << 16)
        .range("sample_rate", c.sampleRate, 1, 1 << 20)
        .range("mel_hop_length", c.melHopLength, 1, 1 << 20)
        .range("n_fft", c.nFft, 2, 1 << 16);
    for (const auto m : c.chMult)
        bounds.range("ch_mult", m, 1, 64);
    if (auto ok = bounds.result(); !ok)
        return ok.error();
    const auto levels = static_cast<std::int64_t>(c.chMult.size());
    for (std::int64_t level = 0; level < levels; ++level) {
        // The decoder's curr_res at each level, as diffusers computes it.
        const auto res = (c.resolution / (std::int64_t{1} << (levels - 1))) << (levels - 1 - level);
        if (std::find(c.attnResolutions.begin(), c.attnResolutions.end(), res) != c.attnResolutions.end())
            return unsupported("attention blocks at resolution " + std::to_string(res) + " (attn_resolutions)");
    }
    if (c.melBins <= 0 || c.melBins % kLatentDownsample)
        return makeError(ErrorCode::InvalidFormat, files + ": mel_bins " + std::to_string(c.melBins) + " is not a positive multiple of 4");

    const auto top = c.baseChannels * c.chMult.back();
    if (*convIn != std::vector<std::int64_t>{top, c.latentChannels, 3, 3})
        return mismatch(
            std::to_string(c.latentChannels) + " latent channels into " + std::to_string(top), "decoder.conv_in.conv.weight", *convIn);
    if (*convOut != std::vector<std::int64_t>{c.outputChannels, c.baseChannels * c.chMult.front(), 3, 3})
        return mismatch(std::to_string(c.outputChannels) + " output channels", "decoder.conv_out.conv.weight", *convOut);
    const auto levelCount = w.indexCount(Part::AudioVae, "decoder.up.");
    if (!levelCount)
        return levelCount.error();
    if (*levelCount != levels)
        return makeError(ErrorCode::InvalidFormat,
            files + ": the audio VAE config says " + std::to_string(levels) + " decoder levels but decoder.up has "
                + std::to_string(*levelCount));
    for (std::int64_t level = 0; level < levels; ++level) {
        const auto blockCount = w.indexCount(Part::AudioVae, "decoder.up." + std::to_string(level) + ".block.");
        if (!blockCount)
            return blockCount.error();
        const auto blocks = *blockCount;
        if (blocks != c.numResBlocks + 1)
            return makeError(ErrorCode::InvalidFormat,
                files + ": the audio VAE config says " + std::to_string(c.numResBlocks + 1) + " blocks per decoder level but decoder.up."
                    + std::to_string(level) + " has " + std::to_string(blocks));
    }
    // latents_mean/std are applied to the packed token vector, so they must be C * M wide
    // (the real model: 8 x 16 = 128, which is also base_channels).
    if (mean && *mean != std::vector<std::int64_t>{c.packedWidth()})
        return mismatch("packed latent tokens of " + std::to_string(c.latentChannels) + " x " + std::to_string(c.latentMelBins()),
            "latents_mean", *mean);
    return c;
}

namespace {

// The encoder's or the decoder's state with what both start from: the checked config, where
// and in which dtype it runs, and the files it came from.
template <typename Impl>
Result<std::unique_ptr<Impl>> newHalf(const Ltx2Weights& weights, const AudioDecoderLoadOptions& options)
{
    auto config = resolveAudioVaeConfig(weights, options.config);
    if (!config)
        return config.error();
    auto impl = std::make_unique<Impl>();
    impl->config = *config;
    impl->device = options.device;
    impl->dtype = options.dtype;
    impl->files = weights.describeFiles();
    return impl;
}

}  // namespace

struct AudioDecoder::Impl {
    AudioVaeConfig config;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::string files;
    at::Tensor latentsMean, latentsStd;
    Conv2d convIn, convOut;
    ResBlock mid1, mid2;
    std::vector<Level> up;  // indexed by level; run from the last (lowest resolution) to 0

    at::Tensor conv(const Conv2d& c, const at::Tensor& x) const;
    at::Tensor resBlock(const ResBlock& b, const at::Tensor& x) const;
    at::Tensor upsample(const Conv2d& c, const at::Tensor& x) const;
    at::Tensor run(const at::Tensor& latents, const std::stop_token& stop) const;
};

AudioDecoder::AudioDecoder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
AudioDecoder::~AudioDecoder() = default;
AudioDecoder::AudioDecoder(AudioDecoder&&) noexcept = default;
AudioDecoder& AudioDecoder::operator=(AudioDecoder&&) noexcept = default;
const AudioVaeConfig& AudioDecoder::config() const
{
    return m_impl->config;
}

Result<AudioDecoder> AudioDecoder::load(const Ltx2Weights& weights, const AudioDecoderLoadOptions& options)
{
    auto made = newHalf<Impl>(weights, options);
    if (!made)
        return made.error();
    auto impl = std::move(*made);
    const auto& c = impl->config;

    try {
        WeightTaker w(weights, Part::AudioVae, options.device, options.dtype);
        w.ignorePrefix("encoder.");  // generation only decodes
        w.ignorePrefix("per_channel_statistics.");  // ltx-core's spare statistics (mean-of-stds, channel, ...)
        auto conv = [&](const std::string& name, std::int64_t kernel) {
            Conv2d k;
            k.weight = w.tensor(name + ".conv.weight");
            k.bias = w.tensor(name + ".conv.bias");
            k.padding = causalPadding(c.causalityAxis, kernel);
            return k;
        };
        auto block = [&](const std::string& name, std::int64_t in, std::int64_t out) {
            ResBlock b;
            b.conv1 = conv(name + ".conv1", 3);
            b.conv2 = conv(name + ".conv2", 3);
            if (in != out)
                b.nin = conv(name + ".nin_shortcut", 1);
            return b;
        };
        impl->latentsMean = w.tensor("latents_mean");
        impl->latentsStd = w.tensor("latents_std");
        const auto levels = static_cast<std::int64_t>(c.chMult.size());
        const auto top = c.baseChannels * c.chMult.back();
        impl->convIn = conv("decoder.conv_in", 3);
        impl->mid1 = block("decoder.mid.block_1", top, top);
        impl->mid2 = block("decoder.mid.block_2", top, top);
        impl->up.resize(static_cast<std::size_t>(levels));
        std::int64_t in = top;
        for (std::int64_t level = levels - 1; level >= 0; --level) {
            auto& stage = impl->up[static_cast<std::size_t>(level)];
            const auto out = c.baseChannels * c.chMult[static_cast<std::size_t>(level)];
            const auto prefix = "decoder.up." + std::to_string(level);
            for (std::int64_t i = 0; i <= c.numResBlocks; ++i) {
                stage.blocks.push_back(block(prefix + ".block." + std::to_string(i), in, out));
                in = out;
            }
            if (level != 0)
                stage.resample = conv(prefix + ".upsample.conv", 3);
        }
        impl->convOut = conv("decoder.conv_out", 3);
        if (auto done = w.finish(); !done)
            return done.error();

        // Every weight against the config, now that all are present.
        std::string bad;
        auto expect = [&](const std::string& name, const at::Tensor& t, const std::vector<std::int64_t>& shape) {
            if (bad.empty() && t.sizes() != at::IntArrayRef(shape))
                bad = name + " is " + shapeText(t.sizes().vec()) + " but the audio VAE config needs " + shapeText(shape);
        };
        auto expectConv = [&](const std::string& name, const Conv2d& k, std::int64_t out, std::int64_t inCh, std::int64_t kernel) {
            expect(name + ".conv.weight", k.weight, {out, inCh, kernel, kernel});
            expect(name + ".conv.bias", k.bias, {out});
        };
        auto expectBlock = [&](const std::string& name, const ResBlock& b, std::int64_t inCh, std::int64_t out) {
            expectConv(name + ".conv1", b.conv1, out, inCh, 3);
            expectConv(name + ".conv2", b.conv2, out, out, 3);
            if (b.nin)
                expectConv(name + ".nin_shortcut", *b.nin, out, inCh, 1);
        };
        expect("latents_mean", impl->latentsMean, {c.packedWidth()});
        expect("latents_std", impl->latentsStd, {c.packedWidth()});
        expectConv("decoder.conv_in", impl->convIn, top, c.latentChannels, 3);
        expectBlock("decoder.mid.block_1", impl->mid1, top, top);
        expectBlock("decoder.mid.block_2", impl->mid2, top, top);
        in = top;
        for (std::int64_t level = levels - 1; level >= 0; --level) {
            const auto& stage = impl->up[static_cast<std::size_t>(level)];
            const auto out = c.baseChannels * c.chMult[static_cast<std::size_t>(level)];
            const auto prefix = "decoder.up." + std::to_string(level);
            for (std::size_t i = 0; i < stage.blocks.size(); ++i) {
                expectBlock(prefix + ".block." + std::to_string(i), stage.blocks[i], in, out);
                in = out;
            }
            if (stage.resample)
                expectConv(prefix + ".upsample.conv", *stage.resample, out, out, 3);
        }
        expectConv("decoder.conv_out", impl->convOut, c.outputChannels, in, 3);
        if (!bad.empty())
            return makeError(ErrorCode::InvalidFormat, impl->files + ": " + bad + "; the config does not belong to these weights");
    } catch (const c10::Error& e) {
        return errorFromException(e, weights.describeFiles() + ": loading the LTX-2 audio VAE failed", ErrorCode::Internal);
    }
    return AudioDecoder(std::move(impl));
}

namespace {

at::Tensor convolve(const Conv2d& c, const at::Tensor& x)
{
    const auto& p = c.padding;
    const bool padded = std::any_of(p.begin(), p.end(), [](std::int64_t v) { return v != 0; });
    return at::conv2d(padded ? at::constant_pad_nd(x, {p[0], p[1], p[2], p[3]}, 0) : x, c.weight, c.bias, {c.stride, c.stride});
}

}  // namespace

at::Tensor AudioDecoder::Impl::conv(const Conv2d& c, const at::Tensor& x) const
{
    return convolve(c, x);
}

namespace {

// LTX2AudioPixelNorm(dim=1, eps=1e-6): RMS over channels at every (time, mel) position.
at::Tensor pixelNorm(const at::Tensor& x)
{
    return x / at::sqrt(at::mean(x.pow(2), {1}, true) + 1e-6);
}

}  // namespace

at::Tensor AudioDecoder::Impl::resBlock(const ResBlock& b, const at::Tensor& x) const
{
    auto h = conv(b.conv1, at::silu(pixelNorm(x)));
    h = conv(b.conv2, at::silu(pixelNorm(h)));
    return (b.nin ? conv(*b.nin, x) : x) + h;
}

at::Tensor AudioDecoder::Impl::upsample(const Conv2d& c, const at::Tensor& x) const
{
    // Nearest x2 in time and mel, causal conv, then the row/column the causal padding added
    // in front is dropped: L time steps become 2L - 1.
    auto h = conv(c, at::upsample_nearest2d(x, {x.size(2) * 2, x.size(3) * 2}, 2.0, 2.0));
    if (config.causalityAxis == "height")
        h = h.narrow(2, 1, h.size(2) - 1);
    else if (config.causalityAxis == "width")
        h = h.narrow(3, 1, h.size(3) - 1);
    return h;
}

at::Tensor AudioDecoder::Impl::run(const at::Tensor& latents, const std::stop_token& stop) const
{
    const auto& c = config;
    TORCH_CHECK(latents.dim() == 3, "audio latents must be packed [B, L, C*M], got ", latents.dim(),
        "-D (use AudioDecoder::packLatents for [B, C, L, M])");
    TORCH_CHECK(latents.size(2) == c.packedWidth(), "audio latent tokens have ", latents.size(2), " features, expected ", c.latentChannels,
        " channels x ", c.latentMelBins(), " mel bins = ", c.packedWidth());
    TORCH_CHECK(latents.size(0) > 0 && latents.size(1) > 0, "audio latents ", latents.sizes(), " are empty");
    const auto frames = latents.size(1);
    // pipeline_ltx2.py: the loop's float32 latents * std + mean, unflattened to [B, C, L, M],
    // then cast to the VAE's dtype.
    auto x = latents.to(device, at::kFloat) * latentsStd.to(at::kFloat) + latentsMean.to(at::kFloat);
    x = x.unflatten(2, {-1, c.latentMelBins()}).transpose(1, 2).to(dtype);

    x = conv(convIn, x);
    x = resBlock(mid1, x);
    x = resBlock(mid2, x);
    for (auto level = static_cast<std::int64_t>(up.size()) - 1; level >= 0; --level) {
        if (stop.stop_requested())
            throw Cancelled{};
        const auto& stage = up[static_cast<std::size_t>(level)];
        for (const auto& b : stage.blocks)
            x = resBlock(b, x);
        if (stage.resample)
            x = upsample(*stage.resample, x);
    }
    x = conv(convOut, at::silu(pixelNorm(x)));

    // Crop (or zero-pad) to the frames and mel bins the causal layout implies.
    const auto targetTime = c.melFrames(frames), targetMel = c.melBins;
    x = x.narrow(2, 0, std::min(x.size(2), targetTime)).narrow(3, 0, std::min(x.size(3), targetMel));
    if (x.size(2) < targetTime || x.size(3) < targetMel)
        x = at::constant_pad_nd(x, {0, targetMel - x.size(3), 0, targetTime - x.size(2)}, 0);
    return x.contiguous();
}

Result<at::Tensor> AudioDecoder::decode(const at::Tensor& latents, std::stop_token stop) const
{
    if (stop.stop_requested())
        return makeError(ErrorCode::Cancelled, "cancelled");
    try {
        return m_impl->run(latents, stop);
    } catch (const Cancelled&) {
        return makeError(ErrorCode::Cancelled, "cancelled");
    } catch (const c10::Error& e) {
        return errorFromException(e, m_impl->files + ": LTX-2 audio VAE decode");
    }
}

Result<at::Tensor> AudioDecoder::packLatents(const at::Tensor& unpacked)
{
    if (!unpacked.defined() || unpacked.dim() != 4)
        return makeError(ErrorCode::InvalidArgument,
            "packLatents expects audio latents [B, C, L, M], got "
                + (unpacked.defined() ? std::to_string(unpacked.dim()) + "-D" : std::string("an undefined tensor")));
    return unpacked.transpose(1, 2).flatten(2, 3);
}

std::int64_t AudioDecoder::residentBytes() const
{
    const auto& m = *m_impl;
    return trunkBytes(m.latentsMean, m.latentsStd, {&m.convIn, &m.convOut}, {&m.mid1, &m.mid2}, m.up);
}

// ---------------------------------------------------------------------------------------- encoder

struct AudioEncoder::Impl {
    AudioVaeConfig config;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::string files;
    at::Tensor latentsMean, latentsStd;
    Conv2d convIn, convOut;
    ResBlock mid1, mid2;
    std::vector<Level> down;  // run from level 0 (full resolution) down

    at::Tensor run(const at::Tensor& mel, const std::stop_token& stop) const;
};

AudioEncoder::AudioEncoder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
AudioEncoder::~AudioEncoder() = default;
AudioEncoder::AudioEncoder(AudioEncoder&&) noexcept = default;
AudioEncoder& AudioEncoder::operator=(AudioEncoder&&) noexcept = default;
const AudioVaeConfig& AudioEncoder::config() const
{
    return m_impl->config;
}

std::int64_t AudioEncoder::latentFrames(const AudioVaeConfig& config, std::int64_t melFrames)
{
    auto t = melFrames;
    for (std::size_t level = 0; level + 1 < config.chMult.size(); ++level)
        t = (t - 1) / 2 + 1;
    return t;
}

Result<AudioEncoder> AudioEncoder::load(const Ltx2Weights& weights, const AudioDecoderLoadOptions& options)
{
    auto made = newHalf<Impl>(weights, options);
    if (!made)
        return made.error();
    auto impl = std::move(*made);
    const auto& c = impl->config;
    const auto levels = static_cast<std::int64_t>(c.chMult.size());
    std::string bad;
    try {
        WeightTaker w(weights, Part::AudioVae, options.device, options.dtype);
        w.ignorePrefix("decoder.");  // conditioning only encodes
        w.ignorePrefix("per_channel_statistics.");
        auto expect = [&](const std::string& name, const at::Tensor& t, const std::vector<std::int64_t>& shape) {
            if (bad.empty() && t.sizes() != at::IntArrayRef(shape))
                bad = name + " is " + shapeText(t.sizes().vec()) + " but the audio VAE config needs " + shapeText(shape);
        };
        auto conv = [&](const std::string& name, std::int64_t out, std::int64_t in, std::int64_t kernel) {
            Conv2d k;
            k.weight = w.tensor(name + ".weight");
            k.bias = w.tensor(name + ".bias");
            expect(name + ".weight", k.weight, {out, in, kernel, kernel});
            expect(name + ".bias", k.bias, {out});
            return k;
        };
        auto causal = [&](const std::string& name, std::int64_t out, std::int64_t in, std::int64_t kernel) {
            auto k = conv(name + ".conv", out, in, kernel);
            k.padding = causalPadding(c.causalityAxis, kernel);
            return k;
        };
        auto block = [&](const std::string& name, std::int64_t in, std::int64_t out) {
            ResBlock b;
            b.conv1 = causal(name + ".conv1", out, in, 3);
            b.conv2 = causal(name + ".conv2", out, out, 3);
            if (in != out)
                b.nin = causal(name + ".nin_shortcut", out, in, 1);
            return b;
        };
        impl->latentsMean = w.tensor("latents_mean");
        impl->latentsStd = w.tensor("latents_std");
        expect("latents_mean", impl->latentsMean, {c.packedWidth()});
        expect("latents_std", impl->latentsStd, {c.packedWidth()});
        impl->convIn = causal("encoder.conv_in", c.baseChannels, 2, 3);
        std::int64_t in = c.baseChannels;
        for (std::int64_t level = 0; level < levels; ++level) {
            Level stage;
            const auto out = c.baseChannels * c.chMult[static_cast<std::size_t>(level)];
            const auto prefix = "encoder.down." + std::to_string(level);
            for (std::int64_t i = 0; i < c.numResBlocks; ++i) {
                stage.blocks.push_back(block(prefix + ".block." + std::to_string(i), in, out));
                in = out;
            }
            if (level != levels - 1) {
                // A plain nn.Conv2d (no causal wrapper): its own key, its own padding.
                auto d = conv(prefix + ".downsample.conv", out, out, 3);
                d.padding = downsamplePadding(c.causalityAxis);
                d.stride = 2;
                stage.resample = d;
            }
            impl->down.push_back(std::move(stage));
        }
        impl->mid1 = block("encoder.mid.block_1", in, in);
        impl->mid2 = block("encoder.mid.block_2", in, in);
        impl->convOut = causal("encoder.conv_out", (c.doubleZ ? 2 : 1) * c.latentChannels, in, 3);
        if (auto done = w.finish(); !done)
            return done.error();
    } catch (const c10::Error& e) {
        return errorFromException(e, weights.describeFiles() + ": loading the LTX-2 audio VAE encoder failed", ErrorCode::Internal);
    }
    if (!bad.empty())
        return makeError(ErrorCode::InvalidFormat, impl->files + ": " + bad + "; the config does not belong to these weights");
    return AudioEncoder(std::move(impl));
}

at::Tensor AudioEncoder::Impl::run(const at::Tensor& mel, const std::stop_token& stop) const
{
    const auto& c = config;
    TORCH_CHECK(mel.dim() == 4 && mel.size(1) == 2, "a mel spectrogram for the audio VAE is [B, 2, T, mel bins], got ", mel.sizes());
    TORCH_CHECK(mel.size(3) == c.melBins, "the mel spectrogram has ", mel.size(3), " bins; this audio VAE takes ", c.melBins);
    TORCH_CHECK(mel.size(0) > 0 && mel.size(2) > 0, "the mel spectrogram ", mel.sizes(), " is empty");
    auto block = [](const ResBlock& b, const at::Tensor& x) {
        auto h = convolve(b.conv1, at::silu(pixelNorm(x)));
        h = convolve(b.conv2, at::silu(pixelNorm(h)));
        return (b.nin ? convolve(*b.nin, x) : x) + h;
    };
    auto x = convolve(convIn, mel.to(device, dtype));
    for (const auto& stage : down) {
        if (stop.stop_requested())
            throw Cancelled{};
        for (const auto& b : stage.blocks)
            x = block(b, x);
        if (stage.resample)
            x = convolve(*stage.resample, x);
    }
    x = block(mid1, x);
    x = block(mid2, x);
    return convolve(convOut, at::silu(pixelNorm(x))).contiguous();
}

Result<at::Tensor> AudioEncoder::moments(const at::Tensor& mel, std::stop_token stop) const
{
    if (stop.stop_requested())
        return makeError(ErrorCode::Cancelled, "cancelled");
    try {
        return m_impl->run(mel, stop);
    } catch (const Cancelled&) {
        return makeError(ErrorCode::Cancelled, "cancelled");
    } catch (const c10::Error& e) {
        return errorFromException(e, m_impl->files + ": LTX-2 audio VAE encode");
    }
}

Result<at::Tensor> AudioEncoder::encode(const at::Tensor& mel, std::stop_token stop) const
{
    auto h = moments(mel, stop);
    if (!h)
        return h.error();
    const auto& c = m_impl->config;
    // DiagonalGaussianDistribution.mode(): the mean, the first C channels; then packed and
    // normalized in float32 as the pipeline holds latents.
    auto mean = h->narrow(1, 0, c.latentChannels).to(at::kFloat);
    if (mean.size(3) != c.latentMelBins())
        return makeError(ErrorCode::InvalidArgument,
            m_impl->files + ": the encoder made " + std::to_string(mean.size(3)) + " latent mel bins, the pipeline unpacks "
                + std::to_string(c.latentMelBins()));
    auto packed = mean.transpose(1, 2).flatten(2, 3);
    return ((packed - m_impl->latentsMean.to(packed.device(), at::kFloat)) / m_impl->latentsStd.to(packed.device(), at::kFloat))
        .contiguous();
}

std::int64_t AudioEncoder::residentBytes() const
{
    const auto& m = *m_impl;
    return trunkBytes(m.latentsMean, m.latentsStd, {&m.convIn, &m.convOut}, {&m.mid1, &m.mid2}, m.down);
}

}  // namespace vireo::ltx2
