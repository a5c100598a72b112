#include "inference/models/ltx2/ltx2vocoder.h"

#include "inference/quant/quantizedweight.h"
#include "inference/util/device.h"

#include "inference/models/ltx2/ltx2config.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <numbers>
#include <numeric>

namespace vireo::ltx2 {

namespace {

using Json = nlohmann::json;

constexpr const char* kDiffusersName = "vocoder/config.json";
constexpr const char* kLtxCoreName = "the checkpoint's embedded config (vocoder)";
// diffusers hard-codes conv_in/conv_out as kernel 7, padding 3.
constexpr std::int64_t kOuterKernel = 7;
// The 2.0 output stage's LeakyReLU is nn.LeakyReLU() with torch's default slope, not the
// configured 0.1 ("following the original code").
constexpr double kActOutSlope = 0.01;
constexpr double kSnakeEps = 1e-9;

struct Cancelled {};

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// Single-element IntArrayRefs spelled out: a bare 0 would also convert to the string-padding overload.
at::Tensor conv1d(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias, std::int64_t stride,
    std::int64_t padding, std::int64_t groups = 1)
{
    const std::array<std::int64_t, 1> s{stride}, p{padding}, d{1};
    return at::conv1d(x, w, bias, s, p, d, groups);
}

at::Tensor convTranspose1d(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias, std::int64_t stride,
    std::int64_t padding, std::int64_t groups = 1)
{
    const std::array<std::int64_t, 1> s{stride}, p{padding}, out{0}, d{1};
    return at::conv_transpose1d(x, w, bias, s, p, out, groups, d);
}

template <typename T>
void read(const Json& j, const std::string& key, T& out)
{
    jsonutil::readField(j, key, out);
}

template <typename T>
T valueOr(const Json& j, const char* key, T fallback)
{
    jsonutil::readField(j, key, fallback);
    return fallback;
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

// Factors are checked to be 1 .. 64 and at most 16 of them before this is trusted; the
// saturation keeps a config that was not from overflowing on the way to that check.
std::int64_t product(const std::vector<std::int64_t>& v)
{
    std::int64_t out = 1;
    for (const auto x : v)
        if (__builtin_mul_overflow(out, x, &out))
            return INT64_MAX;
    return out;
}

const char* activationName(VocoderActivation a)
{
    switch (a) {
    case VocoderActivation::LeakyRelu: return "leaky_relu";
    case VocoderActivation::Snake: return "snake";
    case VocoderActivation::SnakeBeta: return "snakebeta";
    }
    return "?";
}

// The published 2.3 LTX2VocoderWithBWE (diffusers' class defaults).
VocoderConfig bweDefaults()
{
    VocoderConfig c;
    c.bwe = true;
    auto& s = c.vocoder;
    s.hiddenChannels = 1536;
    s.upsampleKernelSizes = {11, 4, 4, 4, 4, 4};
    s.upsampleFactors = {5, 2, 2, 2, 2, 2};
    s.act = VocoderActivation::SnakeBeta;
    s.antialias = true;
    s.finalAct = VocoderFinalActivation::None;
    s.finalBias = false;
    s.outputSamplingRate = c.inputSamplingRate;
    auto& b = c.bweGenerator;
    b.hiddenChannels = 512;
    b.upsampleKernelSizes = {12, 11, 4, 4, 4};
    b.upsampleFactors = {6, 5, 2, 2, 2};
    b.act = VocoderActivation::SnakeBeta;
    b.antialias = true;
    b.finalAct = VocoderFinalActivation::None;
    b.finalBias = false;
    b.outputSamplingRate = c.outputSamplingRate;
    return c;
}

Result<void> readStageDiffusers(const Json& j, const std::string& p, VocoderStageConfig& s)
{
    read(j, p + "in_channels", s.inChannels);
    read(j, p + "hidden_channels", s.hiddenChannels);
    read(j, p + "out_channels", s.outChannels);
    read(j, p + "upsample_kernel_sizes", s.upsampleKernelSizes);
    read(j, p + "upsample_factors", s.upsampleFactors);
    read(j, p + "resnet_kernel_sizes", s.resnetKernelSizes);
    read(j, p + "resnet_dilations", s.resnetDilations);
    read(j, p + "leaky_relu_negative_slope", s.leakyReluNegativeSlope);
    read(j, p + "antialias", s.antialias);
    read(j, p + "antialias_ratio", s.antialiasRatio);
    read(j, p + "antialias_kernel_size", s.antialiasKernelSize);
    read(j, p + "final_bias", s.finalBias);
    if (std::string act; jsonutil::readField(j, p + "act_fn", act)) {
        if (act == "leaky_relu")
            s.act = VocoderActivation::LeakyRelu;
        else if (act == "snake")
            s.act = VocoderActivation::Snake;
        else if (act == "snakebeta")
            s.act = VocoderActivation::SnakeBeta;
        else
            return makeError(ErrorCode::Unsupported,
                std::string(kDiffusersName) + ": " + p + "act_fn '" + act + "' is not supported (diffusers rejects it too)");
    }
    if (const auto it = j.find(p + "final_act_fn"); it != j.end()) {
        const auto act = it->is_null() ? std::string() : jsonutil::fieldAs<std::string>(*it, p + "final_act_fn");
        if (act.empty())
            s.finalAct = VocoderFinalActivation::None;
        else if (act == "tanh")
            s.finalAct = VocoderFinalActivation::Tanh;
        else if (act == "clamp")
            s.finalAct = VocoderFinalActivation::Clamp;
        else  // diffusers would silently apply nothing
            return makeError(
                ErrorCode::Unsupported, std::string(kDiffusersName) + ": " + p + "final_act_fn '" + act + "' is none of tanh, clamp, null");
    }
    return {};
}

// ltx-core's _vocoder_from_config: resblock "1" = HiFi-GAN with LeakyReLU(0.1), "AMP1" =
// BigVGAN with anti-aliased Snake/SnakeBeta (ratio 2, kernel 12); conv_pre takes 128 channels
// (stereo x 64) and conv_post gives 2, neither configurable.
Result<VocoderStageConfig> readStageLtxCore(const Json& j, bool applyFinalActivation, const std::string& where)
{
    VocoderStageConfig s;
    s.inChannels = 0;
    s.hiddenChannels = 1024;
    read(j, "upsample_initial_channel", s.hiddenChannels);
    read(j, "upsample_rates", s.upsampleFactors);
    read(j, "upsample_kernel_sizes", s.upsampleKernelSizes);
    read(j, "resblock_kernel_sizes", s.resnetKernelSizes);
    read(j, "resblock_dilation_sizes", s.resnetDilations);
    if (!valueOr(j, "stereo", true))
        return makeError(ErrorCode::Unsupported, where + ": a mono vocoder (stereo false) is not supported");
    const auto resblock = valueOr<std::string>(j, "resblock", "1");
    if (resblock == "1") {
        s.act = VocoderActivation::LeakyRelu;
        s.antialias = false;
    } else if (resblock == "AMP1") {
        const auto act = valueOr<std::string>(j, "activation", "snake");
        if (act != "snake" && act != "snakebeta")
            return makeError(ErrorCode::Unsupported, where + ": activation '" + act + "' is not supported");
        s.act = act == "snake" ? VocoderActivation::Snake : VocoderActivation::SnakeBeta;
        s.antialias = true;
    } else {
        return makeError(ErrorCode::Unsupported, where + ": resblock '" + resblock + "' is not supported (only \"1\" and \"AMP1\")");
    }
    bool tanh = true;
    read(j, "use_tanh_at_final", tanh);
    s.finalAct = !applyFinalActivation ? VocoderFinalActivation::None : tanh ? VocoderFinalActivation::Tanh : VocoderFinalActivation::Clamp;
    s.finalBias = true;
    read(j, "use_bias_at_final", s.finalBias);
    return s;
}

}  // namespace

std::int64_t VocoderStageConfig::samplesPerFrame() const
{
    return product(upsampleFactors);
}

Result<VocoderConfig> vocoderConfigFromDiffusers(const std::string& text)
{
    const auto parsed = parseObject(text, kDiffusersName);
    if (!parsed)
        return parsed.error();
    const Json& j = *parsed;
    try {
        const auto cls = valueOr<std::string>(j, "_class_name", "");
        const bool bwe = cls == "LTX2VocoderWithBWE" || j.contains("bwe_hidden_channels") || j.contains("hop_length");
        if (!bwe && !cls.empty() && cls != "LTX2Vocoder")
            return makeError(ErrorCode::Unsupported, std::string(kDiffusersName) + ": class '" + cls + "' is not an LTX-2 vocoder");
        VocoderConfig c = bwe ? bweDefaults() : VocoderConfig{};
        if (auto r = readStageDiffusers(j, "", c.vocoder); !r)
            return r.error();
        if (bwe) {
            if (auto r = readStageDiffusers(j, "bwe_", c.bweGenerator); !r)
                return r.error();
            read(j, "filter_length", c.filterLength);
            read(j, "hop_length", c.hopLength);
            read(j, "window_length", c.windowLength);
            read(j, "num_mel_channels", c.numMelChannels);
            read(j, "input_sampling_rate", c.inputSamplingRate);
            read(j, "output_sampling_rate", c.outputSamplingRate);
            c.vocoder.outputSamplingRate = c.inputSamplingRate;
            c.bweGenerator.outputSamplingRate = c.outputSamplingRate;
        } else {
            read(j, "output_sampling_rate", c.vocoder.outputSamplingRate);
        }
        return c;
    } catch (const std::exception& e) {  // jsonutil's FieldError names the key
        return makeError(ErrorCode::InvalidFormat, std::string(kDiffusersName) + ": " + e.what());
    }
}

Result<VocoderConfig> vocoderConfigFromLtxCore(const std::string& text)
{
    const auto parsed = parseObject(text, "the checkpoint's embedded config");
    if (!parsed)
        return parsed.error();
    const Json& root = *parsed;
    const auto it = root.find("vocoder");
    if (it == root.end() || !it->is_object())
        return makeError(ErrorCode::NotFound, "the checkpoint's embedded config has no \"vocoder\" section");
    const Json& section = *it;
    try {
        VocoderConfig c;
        if (!section.contains("bwe")) {
            auto stage = readStageLtxCore(section, true, kLtxCoreName);
            if (!stage)
                return stage.error();
            c.vocoder = *stage;
            c.vocoder.outputSamplingRate = 24000;
            read(section, "output_sampling_rate", c.vocoder.outputSamplingRate);
            return c;
        }
        const auto& bwe = section["bwe"];
        const Json empty = Json::object();
        const Json& base = section.contains("vocoder") ? section["vocoder"] : empty;
        if (!bwe.is_object() || !base.is_object())
            return makeError(ErrorCode::InvalidFormat, std::string(kLtxCoreName) + ": \"vocoder\" / \"bwe\" are not objects");
        for (const char* key : {"input_sampling_rate", "output_sampling_rate", "hop_length", "n_fft", "num_mels"})
            if (!bwe.contains(key))
                return makeError(ErrorCode::InvalidFormat, std::string(kLtxCoreName) + ": the bwe section has no \"" + key + "\"");
        // The 16 kHz stage keeps its final activation (ltx-core's default apply_final_activation);
        // the BWE generator's output is a residual and has none.
        auto stage = readStageLtxCore(base, true, std::string(kLtxCoreName) + " vocoder.vocoder");
        if (!stage)
            return stage.error();
        auto generator = readStageLtxCore(bwe, false, std::string(kLtxCoreName) + " vocoder.bwe");
        if (!generator)
            return generator.error();
        c.bwe = true;
        c.vocoder = *stage;
        c.bweGenerator = *generator;
        read(bwe, "input_sampling_rate", c.inputSamplingRate);
        read(bwe, "output_sampling_rate", c.outputSamplingRate);
        read(bwe, "hop_length", c.hopLength);
        read(bwe, "n_fft", c.filterLength);
        c.windowLength = c.filterLength;  // ltx-core builds MelSTFT with win_length = n_fft
        read(bwe, "num_mels", c.numMelChannels);
        c.vocoder.outputSamplingRate = c.inputSamplingRate;
        c.bweGenerator.outputSamplingRate = c.outputSamplingRate;
        return c;
    } catch (const std::exception& e) {  // jsonutil's FieldError names the key
        return makeError(ErrorCode::InvalidFormat, std::string(kLtxCoreName) + ": " + e.what());
    }
}

std::string toJson(const VocoderConfig& c)
{
    auto finalName = [](VocoderFinalActivation a) -> Json {
        return a == VocoderFinalActivation::Tanh ? Json("tanh") : a == VocoderFinalActivation::Clamp ? Json("clamp") : Json(nullptr);
    };
    auto stage = [&](Json& j, const std::string& p, const VocoderStageConfig& s) {
        j[p + "in_channels"] = s.inChannels;
        j[p + "hidden_channels"] = s.hiddenChannels;
        j[p + "out_channels"] = s.outChannels;
        j[p + "upsample_kernel_sizes"] = s.upsampleKernelSizes;
        j[p + "upsample_factors"] = s.upsampleFactors;
        j[p + "resnet_kernel_sizes"] = s.resnetKernelSizes;
        j[p + "resnet_dilations"] = s.resnetDilations;
        j[p + "act_fn"] = activationName(s.act);
        j[p + "leaky_relu_negative_slope"] = s.leakyReluNegativeSlope;
        j[p + "antialias"] = s.antialias;
        j[p + "antialias_ratio"] = s.antialiasRatio;
        j[p + "antialias_kernel_size"] = s.antialiasKernelSize;
        j[p + "final_act_fn"] = finalName(s.finalAct);
        j[p + "final_bias"] = s.finalBias;
    };
    Json j = Json::object();
    j["_class_name"] = c.bwe ? "LTX2VocoderWithBWE" : "LTX2Vocoder";
    stage(j, "", c.vocoder);
    if (c.bwe) {
        stage(j, "bwe_", c.bweGenerator);
        j["filter_length"] = c.filterLength;
        j["hop_length"] = c.hopLength;
        j["window_length"] = c.windowLength;
        j["num_mel_channels"] = c.numMelChannels;
        j["input_sampling_rate"] = c.inputSamplingRate;
        j["output_sampling_rate"] = c.outputSamplingRate;
    } else {
        j["output_sampling_rate"] = c.vocoder.outputSamplingRate;
    }
    return j.dump();
}

Result<VocoderConfig> resolveVocoderConfig(const Ltx2Weights& w, const std::optional<VocoderConfig>& override)
{
    const auto part = Part::Vocoder;
    const auto files = w.describeFiles();
    const bool hasBwe = w.find(part, "bwe_generator.conv_in.weight") != nullptr;
    const std::string stagePrefix = hasBwe ? "vocoder." : "";
    const auto convIn = w.shape(part, stagePrefix + "conv_in.weight");
    if (!convIn)
        return makeError(ErrorCode::NotFound,
            files
                + ": no LTX-2 vocoder (conv_in / vocoder.conv_in) found; give the vocoder folder "
                  "or a Lightricks single file that holds vocoder.* tensors");

    VocoderConfig c = hasBwe ? bweDefaults() : VocoderConfig{};
    auto given = checkpointConfig(w, part, override, vocoderConfigFromDiffusers, vocoderConfigFromLtxCore);
    if (!given)
        return given.error();
    // Without hyper-parameters diffusers' class defaults apply (the published models); the
    // checks below and the per-tensor shape checks at load refuse anything else.
    if (*given)
        c = **given;

    auto invalid = [&](const std::string& what) { return makeError(ErrorCode::InvalidFormat, files + ": " + what); };
    if (c.bwe != hasBwe)
        return invalid(std::string("the vocoder config describes ")
            + (c.bwe ? "the 2.3 vocoder with bandwidth extension" : "the 2.0 vocoder") + " but bwe_generator.* tensors are "
            + (hasBwe ? "present" : "absent"));

    auto checkStage = [&](VocoderStageConfig& s, const std::string& p) -> Result<void> {
        const auto shape = w.shape(part, p + "conv_in.weight");
        if (!shape || shape->size() != 3)
            return invalid(p + "conv_in.weight is missing or not 3-D");
        if (s.inChannels == 0)
            s.inChannels = (*shape)[1];
        // Bounds before the shifts, products and per-stage allocations below (the published
        // vocoders: 5 or 6 stages of x2 .. x6, 3 resnets of 3 dilations).
        ConfigBounds bounds(files + ": the vocoder config (" + (p.empty() ? std::string("vocoder") : p) + ")");
        bounds.range("in_channels", s.inChannels, 1, kMaxChannels)
            .range("hidden_channels", s.hiddenChannels, 1, kMaxChannels)
            .range("out_channels", s.outChannels, 1, kMaxChannels)
            .range("upsample stages", static_cast<std::int64_t>(s.upsampleFactors.size()), 1, 16)
            .range("resnet kernels", static_cast<std::int64_t>(s.resnetKernelSizes.size()), 1, 16)
            .range("antialias_ratio", s.antialiasRatio, 1, 64)
            .range("antialias_kernel_size", s.antialiasKernelSize, 1, 1024)
            .range("output_sampling_rate", s.outputSamplingRate, 1, 1 << 20);
        for (const auto f : s.upsampleFactors)
            bounds.range("upsample_factors", f, 1, 64);
        for (const auto k : s.upsampleKernelSizes)
            bounds.range("upsample_kernel_sizes", k, 1, 1024);
        for (const auto k : s.resnetKernelSizes)
            bounds.range("resnet_kernel_sizes", k, 1, 1024);
        for (const auto& d : s.resnetDilations) {
            bounds.range("resnet_dilations entries", static_cast<std::int64_t>(d.size()), 0, 16);
            for (const auto x : d)
                bounds.range("resnet_dilations", x, 1, 1024);
        }
        if (auto ok = bounds.result(); !ok)
            return ok.error();
        const auto stages = s.upsampleFactors.size();
        if (stages == 0 || stages != s.upsampleKernelSizes.size())
            return invalid(p + "upsample_factors and upsample_kernel_sizes differ in length (or are empty)");
        if (s.resnetKernelSizes.empty() || s.resnetKernelSizes.size() != s.resnetDilations.size())
            return invalid(p + "resnet_kernel_sizes and resnet_dilations differ in length (or are empty)");
        for (const auto& d : s.resnetDilations)
            if (d.empty())
                return invalid(p + "resnet_dilations holds an empty list");
        if (s.act == VocoderActivation::LeakyRelu && s.antialias)
            return makeError(
                ErrorCode::Unsupported, files + ": " + p + "anti-aliased LeakyReLU is not supported (diffusers nests its filters)");
        if ((s.act != VocoderActivation::LeakyRelu) && (s.antialiasRatio < 1 || s.antialiasKernelSize <= s.antialiasRatio))
            return invalid(p + "antialias_kernel_size must exceed antialias_ratio");
        if (s.outChannels < 1 || s.hiddenChannels >> stages < 1)
            return invalid(
                p + "hidden_channels " + std::to_string(s.hiddenChannels) + " cannot be halved " + std::to_string(stages) + " times");
        if (*shape != std::vector<std::int64_t>{s.hiddenChannels, s.inChannels, kOuterKernel})
            return invalid("the vocoder config says " + std::to_string(s.inChannels) + " -> " + std::to_string(s.hiddenChannels)
                + " channels but " + p + "conv_in.weight is " + shapeText(*shape) + "; the config does not belong to these weights");
        return {};
    };
    if (auto r = checkStage(c.vocoder, stagePrefix); !r)
        return r.error();
    if (c.bwe) {
        if (auto r = checkStage(c.bweGenerator, "bwe_generator."); !r)
            return r.error();
        ConfigBounds rates(files + ": the vocoder config");
        rates.range("input_sampling_rate", c.inputSamplingRate, 1, 1 << 20)
            .range("output_sampling_rate", c.outputSamplingRate, 1, 1 << 20)
            .range("filter_length", c.filterLength, 1, 1 << 16)
            .range("window_length", c.windowLength, 1, 1 << 16)
            .range("hop_length", c.hopLength, 1, 1 << 16)
            .range("num_mel_channels", c.numMelChannels, 1, 1 << 12);
        if (auto ok = rates.result(); !ok)
            return ok.error();
        if (c.inputSamplingRate <= 0 || c.outputSamplingRate % c.inputSamplingRate)
            return makeError(ErrorCode::Unsupported,
                files + ": the bandwidth extension from " + std::to_string(c.inputSamplingRate) + " Hz to "
                    + std::to_string(c.outputSamplingRate) + " Hz is not an integer ratio");
        const auto ratio = c.outputSamplingRate / c.inputSamplingRate;
        // The residual (STFT frames x BWE upsampling) and the resampled skip must line up.
        if (c.windowLength != c.filterLength || c.hopLength < 1 || product(c.bweGenerator.upsampleFactors) != c.hopLength * ratio)
            return makeError(ErrorCode::Unsupported,
                files + ": STFT filter " + std::to_string(c.filterLength) + ", window " + std::to_string(c.windowLength) + ", hop "
                    + std::to_string(c.hopLength) + " and BWE upsampling x" + std::to_string(product(c.bweGenerator.upsampleFactors))
                    + " do not give a residual as long as the x" + std::to_string(ratio) + " skip");
        if (c.bweGenerator.inChannels != c.vocoder.outChannels * c.numMelChannels)
            return invalid("the BWE generator takes " + std::to_string(c.bweGenerator.inChannels) + " channels, not "
                + std::to_string(c.vocoder.outChannels) + " x " + std::to_string(c.numMelChannels) + " mel bins");
    }
    return c;
}

namespace {

struct Conv1d {
    at::Tensor weight, bias;  // bias undefined when absent
    std::int64_t stride = 1, padding = 0, dilation = 1;
};

// LeakyReLU, or SnakeBeta / Snake (x + 1/(e^b + eps) * sin^2(e^a * x), log-scale a, b),
// optionally anti-aliased: x2 Kaiser-sinc upsample -> activation -> x2 lowpass downsample.
struct Activation {
    VocoderActivation kind = VocoderActivation::LeakyRelu;
    double slope = 0.1;
    at::Tensor alpha, beta;  // as stored, then replaced by e^alpha [1, C, 1] and 1 / (amplitude + eps)
    at::Tensor invAmplitude;
    bool antialias = false;
    std::int64_t ratio = 2;
    at::Tensor upFilter, downFilter;  // [1, 1, K] as stored, then expanded to [C, 1, K]
    std::int64_t upPad = 0, upCropLeft = 0, upCropRight = 0, downPadLeft = 0, downPadRight = 0;
};

struct ResBlock {
    std::vector<Conv1d> convs1, convs2;
    std::vector<Activation> acts1, acts2;
};

struct Stage {
    VocoderStageConfig config;
    Conv1d convIn, convOut;
    std::vector<Conv1d> ups;
    std::vector<ResBlock> resnets;  // resnetKernelSizes.size() per upsampling stage
    Activation actOut;
};

using quant::bytesOf;
std::int64_t bytesOf(const Conv1d& c)
{
    return bytesOf(c.weight) + bytesOf(c.bias);
}
std::int64_t bytesOf(const Activation& a)
{
    return bytesOf(a.alpha) + bytesOf(a.beta) + bytesOf(a.invAmplitude) + bytesOf(a.upFilter) + bytesOf(a.downFilter);
}

std::int64_t bytesOf(const Stage& s)
{
    std::int64_t n = bytesOf(s.convIn) + bytesOf(s.convOut) + bytesOf(s.actOut);
    for (const auto& u : s.ups)
        n += bytesOf(u);
    for (const auto& r : s.resnets) {
        for (const auto* convs : {&r.convs1, &r.convs2})
            for (const auto& k : *convs)
                n += bytesOf(k);
        for (const auto* acts : {&r.acts1, &r.acts2})
            for (const auto& a : *acts)
                n += bytesOf(a);
    }
    return n;
}

// Collects the weights of one LTX2Vocoder under `prefix`, and afterwards checks their shapes
// against the config and precomputes what the forward pass needs.
class StageLoader {
public:
    StageLoader(WeightTaker& w, std::string prefix) : m_w(w), m_prefix(std::move(prefix)) {}

    Stage load(const VocoderStageConfig& c)
    {
        Stage s;
        s.config = c;
        s.convIn = conv("conv_in", 1, kOuterKernel / 2, 1, true);
        const auto perStage = c.resnetKernelSizes.size();
        for (std::size_t i = 0; i < c.upsampleFactors.size(); ++i) {
            const auto k = c.upsampleKernelSizes[i], f = c.upsampleFactors[i];
            s.ups.push_back(conv("upsamplers." + std::to_string(i), f, (k - f) / 2, 1, true));
            for (std::size_t j = 0; j < perStage; ++j) {
                const auto name = "resnets." + std::to_string(i * perStage + j);
                ResBlock r;
                const auto& dilations = c.resnetDilations[j];
                for (std::size_t d = 0; d < dilations.size(); ++d) {
                    r.convs1.push_back(conv(name + ".convs1." + std::to_string(d), 1, 0, dilations[d], true));
                    r.convs2.push_back(conv(name + ".convs2." + std::to_string(d), 1, 0, 1, true));
                    r.acts1.push_back(
                        activation(name + ".acts1." + std::to_string(d), c.act, c.antialias, c.leakyReluNegativeSlope, c.antialiasRatio));
                    r.acts2.push_back(
                        activation(name + ".acts2." + std::to_string(d), c.act, c.antialias, c.leakyReluNegativeSlope, c.antialiasRatio));
                }
                s.resnets.push_back(std::move(r));
            }
        }
        // After the last stage: snake models always use an anti-aliased SnakeBeta (even for
        // act_fn "snake"), HiFi-GAN a plain LeakyReLU(0.01).
        if (c.act == VocoderActivation::LeakyRelu)
            s.actOut = activation("act_out", VocoderActivation::LeakyRelu, false, kActOutSlope, c.antialiasRatio);
        else
            s.actOut = activation("act_out", VocoderActivation::SnakeBeta, true, 0.0, c.antialiasRatio);
        s.convOut = conv("conv_out", 1, kOuterKernel / 2, 1, c.finalBias);
        return s;
    }

    // After WeightTaker::finish(): every tensor is present. Returns the first shape mismatch.
    std::string prepare(Stage& s) const
    {
        const auto& c = s.config;
        std::string bad;
        auto expect = [&](const std::string& name, const at::Tensor& t, const std::vector<std::int64_t>& shape) {
            if (bad.empty() && t.defined() && t.sizes() != at::IntArrayRef(shape))
                bad = m_prefix + name + " is " + shapeText(t.sizes().vec()) + " but the vocoder config needs " + shapeText(shape);
        };
        auto expectConv = [&](const std::string& name, const Conv1d& k, std::vector<std::int64_t> shape) {
            const auto bias = shape[0];
            expect(name + ".weight", k.weight, shape);
            expect(name + ".bias", k.bias, {bias});
        };
        auto expectAct = [&](const std::string& name, Activation& a, std::int64_t ch) {
            if (a.kind == VocoderActivation::LeakyRelu)
                return;
            const auto base = a.antialias ? name + ".act" : name;
            expect(base + ".alpha", a.alpha, {ch});
            if (a.kind == VocoderActivation::SnakeBeta)
                expect(base + ".beta", a.beta, {ch});
            if (a.antialias) {
                expect(name + ".upsample.filter", a.upFilter, {1, 1, c.antialiasKernelSize});
                expect(name + ".downsample.filter", a.downFilter, {1, 1, c.antialiasKernelSize});
            }
            if (bad.empty())
                finishActivation(a, ch);
        };
        std::int64_t ch = c.hiddenChannels;
        expectConv("conv_in", s.convIn, {ch, c.inChannels, kOuterKernel});
        const auto perStage = c.resnetKernelSizes.size();
        for (std::size_t i = 0; i < s.ups.size(); ++i) {
            // ConvTranspose1d weights are [in, out, k]; the bias has `out` entries.
            expect("upsamplers." + std::to_string(i) + ".weight", s.ups[i].weight, {ch, ch / 2, c.upsampleKernelSizes[i]});
            expect("upsamplers." + std::to_string(i) + ".bias", s.ups[i].bias, {ch / 2});
            ch /= 2;
            for (std::size_t j = 0; j < perStage; ++j) {
                const auto index = i * perStage + j;
                const auto name = "resnets." + std::to_string(index);
                auto& r = s.resnets[index];
                const auto k = c.resnetKernelSizes[j];
                for (std::size_t d = 0; d < r.convs1.size(); ++d) {
                    expectConv(name + ".convs1." + std::to_string(d), r.convs1[d], {ch, ch, k});
                    expectConv(name + ".convs2." + std::to_string(d), r.convs2[d], {ch, ch, k});
                    expectAct(name + ".acts1." + std::to_string(d), r.acts1[d], ch);
                    expectAct(name + ".acts2." + std::to_string(d), r.acts2[d], ch);
                }
            }
        }
        expectAct("act_out", s.actOut, ch);
        expectConv("conv_out", s.convOut, {c.outChannels, ch, kOuterKernel});
        return bad;
    }

private:
    Conv1d conv(const std::string& name, std::int64_t stride, std::int64_t padding, std::int64_t dilation, bool bias)
    {
        Conv1d k;
        k.weight = m_w.tensor(m_prefix + name + ".weight");
        if (bias)
            k.bias = m_w.tensor(m_prefix + name + ".bias");
        k.stride = stride;
        k.padding = padding;
        k.dilation = dilation;
        return k;
    }

    Activation activation(const std::string& name, VocoderActivation kind, bool antialias, double slope, std::int64_t ratio)
    {
        Activation a;
        a.kind = kind;
        a.slope = slope;
        a.ratio = ratio;
        if (kind == VocoderActivation::LeakyRelu)
            return a;
        a.antialias = antialias;
        const auto base = m_prefix + name + (antialias ? ".act" : "");
        a.alpha = m_w.tensor(base + ".alpha");
        if (kind == VocoderActivation::SnakeBeta)  // Snake (use_beta=False) has no beta parameter
            a.beta = m_w.tensor(base + ".beta");
        if (antialias) {
            a.upFilter = m_w.tensor(m_prefix + name + ".upsample.filter");
            a.downFilter = m_w.tensor(m_prefix + name + ".downsample.filter");
        }
        return a;
    }

    static void finishActivation(Activation& a, std::int64_t channels)
    {
        // SnakeBeta(logscale=True): alpha = e^alpha, amplitude = e^beta (Snake: e^alpha).
        const auto alpha = at::exp(a.alpha.view({1, -1, 1}));
        const auto amplitude = a.kind == VocoderActivation::SnakeBeta ? at::exp(a.beta.view({1, -1, 1})) : alpha;
        a.invAmplitude = at::reciprocal(amplitude + kSnakeEps);
        a.alpha = alpha;
        a.beta = at::Tensor();
        if (!a.antialias)
            return;
        // UpSample1d / DownSample1d (Kaiser window) paddings, from the stored kernel length.
        const auto k = a.upFilter.size(-1), kd = a.downFilter.size(-1), r = a.ratio;
        a.upPad = k / r - 1;
        a.upCropLeft = a.upPad * r + (k - r) / 2;
        a.upCropRight = a.upPad * r + (k - r + 1) / 2;
        a.downPadLeft = kd / 2 + kd % 2 - 1;
        a.downPadRight = kd / 2;
        // One depthwise filter per channel, expanded once instead of per call.
        a.upFilter = a.upFilter.expand({channels, 1, k}).contiguous();
        a.downFilter = a.downFilter.expand({channels, 1, kd}).contiguous();
    }

    WeightTaker& m_w;
    std::string m_prefix;
};

at::Tensor applyActivation(const Activation& a, at::Tensor x)
{
    if (a.kind == VocoderActivation::LeakyRelu)
        return at::leaky_relu(x, a.slope);
    const auto channels = x.size(1);
    if (a.antialias) {
        x = at::replication_pad1d(x, {a.upPad, a.upPad});
        x = convTranspose1d(x, a.upFilter, std::nullopt, a.ratio, 0, channels) * static_cast<double>(a.ratio);
        x = x.narrow(2, a.upCropLeft, x.size(2) - a.upCropLeft - a.upCropRight);
    }
    x = x + a.invAmplitude * at::sin(x * a.alpha).pow(2);
    if (a.antialias) {
        x = at::replication_pad1d(x, {a.downPadLeft, a.downPadRight});
        x = conv1d(x, a.downFilter, std::nullopt, a.ratio, 0, channels);
    }
    return x;
}

at::Tensor sameConv(const Conv1d& k, const at::Tensor& x)
{
    // padding="same" as diffusers' ResBlock convs (asymmetric for even receptive fields).
    const std::array<std::int64_t, 1> stride{1}, dilation{k.dilation};
    return at::conv1d(x, k.weight, k.bias, stride, "same", dilation, 1);
}

at::Tensor resBlock(const ResBlock& r, at::Tensor x)
{
    for (std::size_t d = 0; d < r.convs1.size(); ++d) {
        auto h = sameConv(r.convs1[d], applyActivation(r.acts1[d], x));
        h = sameConv(r.convs2[d], applyActivation(r.acts2[d], h));
        x = x + h;
    }
    return x;
}

// One LTX2Vocoder on [B, C_in, frames] (channels already flattened).
at::Tensor runStage(const Stage& s, at::Tensor x, const std::stop_token& stop)
{
    const auto& c = s.config;
    const auto optionalBias = [](const Conv1d& k) { return k.bias.defined() ? std::optional<at::Tensor>(k.bias) : std::nullopt; };
    x = conv1d(x, s.convIn.weight, optionalBias(s.convIn), 1, s.convIn.padding);
    const auto perStage = c.resnetKernelSizes.size();
    for (std::size_t i = 0; i < s.ups.size(); ++i) {
        if (stop.stop_requested())
            throw Cancelled{};
        if (c.act == VocoderActivation::LeakyRelu)  // snake models activate inside the blocks
            x = at::leaky_relu(x, c.leakyReluNegativeSlope);
        const auto& u = s.ups[i];
        x = convTranspose1d(x, u.weight, optionalBias(u), u.stride, u.padding);
        std::vector<at::Tensor> outs;
        outs.reserve(perStage);
        for (std::size_t j = 0; j < perStage; ++j)
            outs.push_back(resBlock(s.resnets[i * perStage + j], x));
        x = at::stack(outs, 0).mean(0);
    }
    x = applyActivation(s.actOut, x);
    x = conv1d(x, s.convOut.weight, optionalBias(s.convOut), 1, s.convOut.padding);
    switch (c.finalAct) {
    case VocoderFinalActivation::Tanh: return at::tanh(x);
    case VocoderFinalActivation::Clamp: return at::clamp(x, -1, 1);
    case VocoderFinalActivation::None: break;
    }
    return x;
}

}  // namespace

struct Vocoder::Impl {
    VocoderConfig config;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::string files;
    Stage stage, bweStage;
    // BWE: causal STFT basis [2 * (n_fft/2 + 1), 1, n_fft], mel filterbank [mels, n_fft/2 + 1],
    // and the Hann-windowed sinc x(out/in) resampler of the skip path (computed, not stored).
    at::Tensor forwardBasis, melBasis, resampleFilter;
    std::int64_t resampleRatio = 1, resamplePad = 0, resampleCropLeft = 0, resampleCropRight = 0;

    void buildResampler();
    at::Tensor resample(const at::Tensor& x) const;
    at::Tensor run(const at::Tensor& mel, const std::stop_token& stop) const;
};

Vocoder::Vocoder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Vocoder::~Vocoder() = default;
Vocoder::Vocoder(Vocoder&&) noexcept = default;
Vocoder& Vocoder::operator=(Vocoder&&) noexcept = default;
const VocoderConfig& Vocoder::config() const
{
    return m_impl->config;
}
int Vocoder::sampleRate() const
{
    return static_cast<int>(m_impl->config.sampleRate());
}

Result<Vocoder> Vocoder::load(const Ltx2Weights& weights, const VocoderLoadOptions& options)
{
    auto config = resolveVocoderConfig(weights, options.config);
    if (!config)
        return config.error();
    auto impl = std::make_unique<Impl>();
    impl->config = *config;
    impl->device = options.device;
    impl->dtype = options.dtype;
    impl->files = weights.describeFiles();
    const auto& c = impl->config;
    try {
        WeightTaker w(weights, Part::Vocoder, options.device, options.dtype);
        StageLoader main(w, c.bwe ? "vocoder." : "");
        StageLoader bwe(w, "bwe_generator.");
        impl->stage = main.load(c.vocoder);
        if (c.bwe) {
            impl->bweStage = bwe.load(c.bweGenerator);
            impl->forwardBasis = w.tensor("mel_stft.stft_fn.forward_basis");
            impl->melBasis = w.tensor("mel_stft.mel_basis");
            w.ignorePrefix("mel_stft.stft_fn.inverse_basis");  // the inverse STFT is never run
        }
        if (auto done = w.finish(); !done)
            return done.error();
        auto bad = main.prepare(impl->stage);
        if (bad.empty() && c.bwe) {
            bad = bwe.prepare(impl->bweStage);
            const auto freqs = c.filterLength / 2 + 1;
            if (bad.empty() && impl->forwardBasis.sizes() != at::IntArrayRef({2 * freqs, 1, c.filterLength}))
                bad = "mel_stft.stft_fn.forward_basis is " + shapeText(impl->forwardBasis.sizes().vec()) + " but filter_length "
                    + std::to_string(c.filterLength) + " needs [" + std::to_string(2 * freqs) + ", 1, " + std::to_string(c.filterLength)
                    + "]";
            if (bad.empty() && impl->melBasis.sizes() != at::IntArrayRef({c.numMelChannels, freqs}))
                bad = "mel_stft.mel_basis is " + shapeText(impl->melBasis.sizes().vec()) + " but the config needs ["
                    + std::to_string(c.numMelChannels) + ", " + std::to_string(freqs) + "]";
            if (bad.empty())
                impl->buildResampler();
        }
        if (!bad.empty())
            return makeError(ErrorCode::InvalidFormat, impl->files + ": " + bad + "; the config does not belong to these weights");
    } catch (const c10::Error& e) {
        return errorFromException(e, weights.describeFiles() + ": loading the LTX-2 vocoder failed", ErrorCode::Internal);
    }
    return Vocoder(std::move(impl));
}

void Vocoder::Impl::buildResampler()
{
    // UpSample1d(ratio, window_type="hann"): torchaudio-style Hann-windowed sinc, rolloff 0.99,
    // 6 zero crossings. Built with the same float32 tensor ops as diffusers so the taps match.
    constexpr double kRolloff = 0.99;
    constexpr std::int64_t kZeroCrossings = 6;
    const auto ratio = config.outputSamplingRate / config.inputSamplingRate;
    const auto width = static_cast<std::int64_t>(std::ceil(kZeroCrossings / kRolloff));
    const auto kernel = 2 * width * ratio + 1;
    const auto time = (at::arange(kernel, at::TensorOptions().dtype(at::kLong)) / ratio - width) * kRolloff;
    const auto clamped = time.clamp(-kZeroCrossings, kZeroCrossings);
    const auto window = at::cos(clamped * std::numbers::pi / kZeroCrossings / 2).pow(2);
    const auto filter = (at::sinc(time) * window * kRolloff / ratio).view({1, 1, -1});
    const auto channels = config.vocoder.outChannels;
    resampleFilter = filter.to(device, dtype).expand({channels, 1, kernel}).contiguous();
    resampleRatio = ratio;
    resamplePad = width;
    resampleCropLeft = 2 * width * ratio;
    resampleCropRight = kernel - ratio;
}

at::Tensor Vocoder::Impl::resample(const at::Tensor& x) const
{
    auto y = at::replication_pad1d(x, {resamplePad, resamplePad});
    y = convTranspose1d(y, resampleFilter, std::nullopt, resampleRatio, 0, x.size(1)) * static_cast<double>(resampleRatio);
    return y.narrow(2, resampleCropLeft, y.size(2) - resampleCropLeft - resampleCropRight);
}

at::Tensor Vocoder::Impl::run(const at::Tensor& melIn, const std::stop_token& stop) const
{
    const auto& c = config;
    TORCH_CHECK(melIn.dim() == 4, "the mel spectrogram must be [B, channels, frames, mel_bins], got ", melIn.dim(), "-D");
    TORCH_CHECK(melIn.size(1) * melIn.size(3) == c.vocoder.inChannels, "the vocoder takes ", c.vocoder.inChannels,
        " channels x mel bins, the mel spectrogram is ", melIn.sizes());
    TORCH_CHECK(melIn.size(0) > 0 && melIn.size(2) > 0, "the mel spectrogram ", melIn.sizes(), " is empty");
    // [B, C, T, M] -> [B, C * M, T], channel = c * M + m.
    auto x = melIn.to(device, dtype).transpose(2, 3).flatten(1, 2);
    x = runStage(stage, x, stop);
    if (!c.bwe)
        return x;

    if (stop.stop_requested())
        throw Cancelled{};
    const auto batch = x.size(0), channels = x.size(1), samples = x.size(2);
    // A whole number of hops, so every sample gets its STFT frame. diffusers 0.42.1 would raise
    // here (self.hop_length does not exist); ltx-core pads with zeros, as done here. Real
    // models never need it: 160 samples per mel frame, hop 80.
    if (const auto rem = samples % c.hopLength; rem != 0)
        x = at::constant_pad_nd(x, {0, c.hopLength - rem}, 0);
    // Causal log-mel of each channel: left padding only, DFT x window as one strided conv.
    auto frames = at::constant_pad_nd(x.flatten(0, 1).unsqueeze(1), {std::max<std::int64_t>(0, c.windowLength - c.hopLength), 0}, 0);
    const auto spec = conv1d(frames, forwardBasis, std::nullopt, c.hopLength, 0);
    const auto freqs = spec.size(1) / 2;
    const auto real = spec.narrow(1, 0, freqs), imag = spec.narrow(1, freqs, freqs);
    const auto magnitude = at::sqrt(real.pow(2) + imag.pow(2));
    const auto logMel = at::log(at::clamp_min(at::matmul(melBasis, magnitude), 1e-5));
    // [B * C, mels, F] -> [B, C * mels, F]: the BWE generator's channel = c * mels + m.
    const auto residual = runStage(bweStage, logMel.reshape({batch, channels * logMel.size(1), logMel.size(2)}), stop);
    const auto skip = resample(x);
    TORCH_CHECK(
        residual.sizes() == skip.sizes(), "the BWE residual ", residual.sizes(), " and the resampled skip ", skip.sizes(), " differ");
    const auto outSamples = samples * c.outputSamplingRate / c.inputSamplingRate;
    return at::clamp(residual + skip, -1, 1).narrow(2, 0, outSamples).contiguous();
}

Result<at::Tensor> Vocoder::run(const at::Tensor& mel, std::stop_token stop) const
{
    if (stop.stop_requested())
        return makeError(ErrorCode::Cancelled, "cancelled");
    try {
        return m_impl->run(mel, stop);
    } catch (const Cancelled&) {
        return makeError(ErrorCode::Cancelled, "cancelled");
    } catch (const c10::Error& e) {
        return errorFromException(e, m_impl->files + ": LTX-2 vocoder");
    }
}

std::int64_t Vocoder::residentBytes() const
{
    const auto& m = *m_impl;
    return bytesOf(m.stage) + bytesOf(m.bweStage) + bytesOf(m.forwardBasis) + bytesOf(m.melBasis) + bytesOf(m.resampleFilter);
}

}  // namespace vireo::ltx2
