#include "inference/models/ideogram4/ideogram4pipeline.h"

#include "inference/models/flux2/flux2vae.h"
#include "inference/models/ideogram4/ideogram4transformer.h"
#include "inference/models/qwen3vl/qwen3vltext.h"
#include "inference/families/previewprojection.h"
#include "inference/text/tokenizer.h"
#include "inference/util/device.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

namespace vireo::pipelines {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// diffusers' QWEN3_VL_ACTIVATION_LAYERS.
const std::vector<std::int64_t> kTaps{0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 35};
constexpr std::int64_t kPatch = 2;

// FlowMatchEulerDiscreteScheduler re-shapes explicit sigmas unless it is the identity; the
// pipeline relies on that, so anything else is refused rather than silently ignored.
Result<void> checkScheduler(const fs::path& folder)
{
    const auto file = folder / "scheduler" / "scheduler_config.json";
    std::error_code ec;
    if (!fs::is_regular_file(file, ec))
        return {};
    if (fs::file_size(file, ec) > (1u << 20))
        return makeError(ErrorCode::InvalidFormat, file.string() + ": larger than 1 MiB");
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = jsonutil::parseUntrusted(text.str(), file.string());
    if (!parsed)
        return parsed.error();
    const auto& j = *parsed;
    if (!j.is_object())
        return makeError(ErrorCode::InvalidFormat, file.string() + ": is not a JSON object");
    auto flag = [&](const char* key) { return j.contains(key) && j[key].is_boolean() && j[key].get<bool>(); };
    const double shift = j.contains("shift") && j["shift"].is_number() ? j["shift"].get<double>() : 1.0;
    const bool terminal = j.contains("shift_terminal") && !j["shift_terminal"].is_null();
    if (shift != 1.0 || terminal || flag("use_dynamic_shifting") || flag("invert_sigmas") || flag("use_karras_sigmas")
        || flag("use_exponential_sigmas") || flag("use_beta_sigmas") || flag("stochastic_sampling"))
        return makeError(ErrorCode::Unsupported,
            file.string()
                + ": the scheduler re-shapes the sigmas (shift, dynamic shifting, "
                  "a terminal or another sigma family); Ideogram-4 uses its own schedule unchanged, which this scheduler would not");
    return {};
}

}  // namespace

std::vector<float> ideogram4Sigmas(int steps, std::int64_t height, std::int64_t width, double mu, double std)
{
    // _resolution_aware_mu and _logit_normal_sigmas, in float64 as the reference.
    const double mean = mu + 0.5 * std::log(static_cast<double>(height) * static_cast<double>(width) / (512.0 * 512.0));
    const auto u = at::linspace(0.0, 1.0, steps + 1, at::TensorOptions().dtype(at::kDouble));
    auto t = 1.0 - at::sigmoid(mean + std * at::special_ndtri(u));
    const double tMin = 1.0 / (1.0 + std::exp(0.5 * 18.0)), tMax = 1.0 / (1.0 + std::exp(0.5 * -15.0));
    t = t.clamp(tMin, tMax);
    const auto sigmas = (1.0 - t).flip(0).narrow(0, 0, steps).to(at::kFloat).contiguous();
    std::vector<float> out(sigmas.data_ptr<float>(), sigmas.data_ptr<float>() + steps);
    out.push_back(0.0f);
    return out;
}

at::Tensor ideogram4Noise(std::int64_t seed, std::int64_t tokens, std::int64_t channels)
{
    auto gen = at::detail::createCPUGenerator(static_cast<std::uint64_t>(seed));
    return at::randn({1, tokens, channels}, gen, at::TensorOptions().dtype(at::kFloat))[0];
}

Result<std::vector<double>> ideogram4Guidance(const Ideogram4Request& r)
{
    if (r.steps <= 0 || r.steps > 1000)
        return makeError(ErrorCode::InvalidArgument, "Ideogram-4: " + std::to_string(r.steps) + " steps is outside 1..1000");
    if (!r.guidanceSchedule.empty() && r.guidanceScale)
        return makeError(ErrorCode::InvalidArgument, "Ideogram-4: give a guidance scale or a guidance schedule, not both");
    if (!r.guidanceSchedule.empty()) {
        if (static_cast<int>(r.guidanceSchedule.size()) != r.steps)
            return makeError(ErrorCode::InvalidArgument,
                "Ideogram-4: the guidance schedule has " + std::to_string(r.guidanceSchedule.size()) + " values for "
                    + std::to_string(r.steps) + " steps");
        return r.guidanceSchedule;
    }
    if (r.guidanceScale)
        return std::vector<double>(static_cast<std::size_t>(r.steps), *r.guidanceScale);
    if (r.steps != 48)
        return makeError(ErrorCode::InvalidArgument,
            "Ideogram-4: the default guidance schedule (45 x 7, 3 x 3) is for 48 steps; give a "
            "guidance scale or a schedule for "
                + std::to_string(r.steps));
    std::vector<double> g(45, 7.0);
    g.insert(g.end(), 3, 3.0);
    return g;
}

at::Tensor ideogram4DecoderLatents(
    const at::Tensor& packed, std::int64_t gridH, std::int64_t gridW, const at::Tensor& mean, const at::Tensor& std)
{
    const auto c = packed.size(1) / (kPatch * kPatch);
    TORCH_CHECK(packed.dim() == 2 && packed.size(0) == gridH * gridW && packed.size(1) == c * kPatch * kPatch
            && mean.numel() == packed.size(1) && std.numel() == packed.size(1),
        "Ideogram-4 latents: [", packed.sizes(), "] is not [", gridH * gridW, ", 4 C] with ", mean.numel(), " statistics");
    const auto z = packed * std.to(packed.device()).view({1, -1}) + mean.to(packed.device()).view({1, -1});
    return z.view({1, gridH, gridW, kPatch, kPatch, c}).permute({0, 5, 1, 3, 2, 4}).reshape({1, c, gridH * kPatch, gridW * kPatch});
}

at::Tensor ideogram4Patchify(const at::Tensor& spatial)
{
    TORCH_CHECK(spatial.dim() == 4 && spatial.size(0) == 1 && spatial.size(2) % kPatch == 0 && spatial.size(3) % kPatch == 0,
        "Ideogram-4 latents: [", spatial.sizes(), "] is not [1, C, 2 gridH, 2 gridW]");
    const auto c = spatial.size(1), gridH = spatial.size(2) / kPatch, gridW = spatial.size(3) / kPatch;
    return spatial.view({1, c, gridH, kPatch, gridW, kPatch}).permute({0, 2, 4, 3, 5, 1}).reshape({gridH * gridW, kPatch * kPatch * c});
}

struct Ideogram4Pipeline::Impl {
    Ideogram4PipelineOptions options;
    std::optional<text::Tokenizer> tokenizer;
    std::optional<qwen3vl::TextEncoder> textEncoder;
    std::optional<ideogram4::Transformer> cond, uncond;
    std::optional<flux2::VaeDecoder> vae;
    at::Tensor previewProjection;
};

Ideogram4Pipeline::Ideogram4Pipeline(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Ideogram4Pipeline::~Ideogram4Pipeline() = default;
Ideogram4Pipeline::Ideogram4Pipeline(Ideogram4Pipeline&&) noexcept = default;
Ideogram4Pipeline& Ideogram4Pipeline::operator=(Ideogram4Pipeline&&) noexcept = default;

Result<Ideogram4Pipeline> Ideogram4Pipeline::load(const Ideogram4PipelineOptions& options, std::stop_token stop)
{
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    const auto& root = options.modelPath;
    if (auto s = checkScheduler(root); !s)
        return s.error();
    auto cancelled = [&] { return makeError(ErrorCode::Cancelled, "loading Ideogram-4 was cancelled"); };
    auto tok = text::Tokenizer::load(root / "tokenizer");
    if (!tok)
        return tok.error();
    impl->tokenizer.emplace(std::move(*tok));
    if (stop.stop_requested())
        return cancelled();
    qwen3vl::TextEncoderLoadOptions to;
    to.device = options.device;
    to.dtype = options.dtype;
    auto te = qwen3vl::TextEncoder::load(root / "text_encoder", to);
    if (!te)
        return te.error();
    impl->textEncoder.emplace(std::move(*te));
    for (const char* component : {"transformer", "unconditional_transformer"}) {
        if (stop.stop_requested())
            return cancelled();
        ideogram4::TransformerLoadOptions o;
        o.device = options.device;
        o.dtype = options.dtype;
        o.component = component;
        o.offloadBlocks = options.offloadTransformerBlocks;
        auto m = ideogram4::Transformer::load(root, o);
        if (!m)
            return m.error();
        (std::string(component) == "transformer" ? impl->cond : impl->uncond).emplace(std::move(*m));
    }
    if (stop.stop_requested())
        return cancelled();
    flux2::VaeLoadOptions vo;
    vo.device = options.device;
    vo.dtype = options.dtype;
    auto vae = flux2::VaeDecoder::load(root, vo);
    if (!vae)
        return vae.error();
    impl->vae.emplace(std::move(*vae));
    const auto& tc = impl->cond->config();
    const auto features = impl->textEncoder->config().hiddenSize * static_cast<std::int64_t>(kTaps.size());
    if (tc.llmFeaturesDim != features || impl->uncond->config().llmFeaturesDim != features)
        return makeError(ErrorCode::InvalidFormat,
            root.string() + ": the transformers take " + std::to_string(tc.llmFeaturesDim)
                + " text features per token but the text encoder gives " + std::to_string(features) + " (13 taps of "
                + std::to_string(impl->textEncoder->config().hiddenSize) + ")");
    const auto& vc = impl->vae->config();
    if (tc.inChannels != vc.latentChannels * kPatch * kPatch || impl->uncond->config().inChannels != tc.inChannels)
        return makeError(ErrorCode::InvalidFormat,
            root.string() + ": the transformers' " + std::to_string(tc.inChannels) + " latent channels do not match the VAE's "
                + std::to_string(vc.latentChannels) + " x 2 x 2");
    if (impl->textEncoder->config().layers <= kTaps.back())
        return makeError(ErrorCode::InvalidFormat,
            root.string() + ": the text encoder has " + std::to_string(impl->textEncoder->config().layers)
                + " layers; Ideogram-4 taps layer " + std::to_string(kTaps.back()));
    return Ideogram4Pipeline(std::move(impl));
}

Result<Ideogram4Output> Ideogram4Pipeline::generate(
    const Ideogram4Request& request, const std::function<void(const Ideogram4Progress&)>& progress, std::stop_token stop) const
{
    const auto& m = *m_impl;
    const auto report = [&](const char* phase, std::int64_t done, std::int64_t total, at::Tensor estimate = {}) {
        if (progress)
            progress({phase, done, total, std::move(estimate)});
    };
    const auto scale = m.vae->config().scaleFactor() * kPatch;
    if (request.height <= 0 || request.width <= 0 || request.height % scale || request.width % scale || request.height > 8192
        || request.width > 8192)
        return makeError(ErrorCode::InvalidArgument,
            "Ideogram-4: " + std::to_string(request.width) + " x " + std::to_string(request.height)
                + " is not a size this model makes (multiples of " + std::to_string(scale) + ", at most 8192)");
    if (!std::isfinite(request.mu) || !std::isfinite(request.std) || !(request.std > 0))
        return makeError(ErrorCode::InvalidArgument, "Ideogram-4: the schedule's mu and std must be finite and std positive");
    auto guidance = ideogram4Guidance(request);
    if (!guidance)
        return guidance.error();
    for (double g : *guidance)
        if (!std::isfinite(g) || std::abs(g) > 1000)
            return makeError(ErrorCode::InvalidArgument, "Ideogram-4: guidance " + std::to_string(g) + " is not a usable weight");
    const auto gridH = request.height / scale, gridW = request.width / scale, tokens = gridH * gridW;
    const auto channels = m.cond->config().inChannels;
    Ideogram4Output out;
    out.guidance = *guidance;
    try {
        // 1. The prompt in Qwen3-VL's chat template for one user text message, with the
        //    assistant turn opened (apply_chat_template(add_generation_prompt=True)).
        report("encode", 0, 1);
        auto ids = m.tokenizer->tokenize("<|im_start|>user\n" + request.prompt + "<|im_end|>\n<|im_start|>assistant\n");
        if (!ids)
            return ids.error();
        if (static_cast<std::int64_t>(ids->size()) > request.maxSequenceLength)
            return makeError(ErrorCode::InvalidArgument,
                "Ideogram-4: the prompt has " + std::to_string(ids->size()) + " tokens, more than the "
                    + std::to_string(request.maxSequenceLength) + " the model reads");
        out.promptIds = *ids;
        const auto idTensor = at::tensor(*ids, at::TensorOptions().dtype(at::kLong));
        auto features = m.textEncoder->features(idTensor, kTaps, stop);
        if (!features)
            return features.error();
        // The reference stores them in float32, then casts to the transformer's dtype.
        const auto text = features->to(at::kFloat).to(m.options.dtype);
        report("encode", 1, 1);

        // 2. Schedule and start state.
        const auto sigmas = ideogram4Sigmas(request.steps, request.height, request.width, request.mu, request.std);
        out.sigmas.assign(sigmas.begin(), sigmas.end());
        at::Tensor latents;
        if (request.noise) {
            if (request.noise->dim() != 2 || request.noise->size(0) != tokens || request.noise->size(1) != channels)
                return makeError(ErrorCode::InvalidArgument,
                    "Ideogram-4: the start noise must be [" + std::to_string(tokens) + ", " + std::to_string(channels) + "]");
            latents = request.noise->to(m.options.device, at::kFloat).clone();
        } else {
            latents = ideogram4Noise(request.seed, tokens, channels).to(m.options.device);
        }
        const auto sigmaTensor = at::tensor(std::vector<float>(sigmas.begin(), sigmas.end()), at::TensorOptions().dtype(at::kFloat));
        const auto timesteps = sigmaTensor * 1000.0f;  // scheduler.timesteps = sigmas * num_train_timesteps
        const auto noText = at::zeros({0, m.uncond->config().llmFeaturesDim}, at::TensorOptions().dtype(m.options.dtype));

        // 3. Denoise: t = 1 - timestep / 1000 in float32, then the compute dtype (in forward).
        const auto& vaeMean = m.vae->latentMean();
        const auto& vaeStd = m.vae->latentStd();
        report("denoise", 0, request.steps);
        for (int i = 0; i < request.steps; ++i) {
            if (stop.stop_requested())
                return makeError(ErrorCode::Cancelled, "Ideogram-4 generation was cancelled");
            const float tModel = 1.0f - timesteps[i].item<float>() / 1000.0f;
            const auto x = latents.to(m.options.dtype);
            auto vc = m.cond->forward(x, text, tModel, gridH, gridW, stop);
            if (!vc)
                return vc.error();
            const float g = static_cast<float>((*guidance)[static_cast<std::size_t>(i)]);
            at::Tensor v;
            if (g == 1.0f) {
                v = vc->to(at::kFloat);  // (1 - g) * v_uncond vanishes
            } else {
                auto vu = m.uncond->forward(x, noText, tModel, gridH, gridW, stop);
                if (!vu)
                    return vu.error();
                const auto gt = at::scalar_tensor(g, at::TensorOptions().dtype(at::kFloat));
                v = gt * vc->to(at::kFloat) + (1.0 - gt) * vu->to(at::kFloat);
            }
            // The clean estimate is the Euler step to sigma 0, so the last one is bit for bit the
            // final latents (sigma_next = 0 below).
            at::Tensor estimate;
            if (progress)
                estimate = ideogram4DecoderLatents(latents - sigmaTensor[i].to(latents.device()) * (-v), gridH, gridW, vaeMean, vaeStd);
            // FlowMatchEulerDiscreteScheduler.step(-v): x + (sigma_next - sigma) * (-v), float32.
            latents = latents + (sigmaTensor[i + 1] - sigmaTensor[i]).to(latents.device()) * (-v);
            report("denoise", i + 1, request.steps, std::move(estimate));
        }
        out.finalLatents = latents.to(at::kCPU);

        // 4. De-normalize with the VAE's bn statistics (token channel (ph, pw, c)), unpatchify, decode.
        report("decode", 0, 1);
        const auto z = ideogram4DecoderLatents(latents, gridH, gridW, vaeMean, vaeStd);
        auto decoded = m.vae->decode(z.to(m.options.dtype), stop);
        if (!decoded)
            return decoded.error();
        // VaeImageProcessor.postprocess: (x / 2 + 0.5).clamp(0, 1).
        out.decoded = (decoded->to(at::kFloat)[0] / 2 + 0.5).clamp(0, 1).to(at::kCPU);
        out.image = (out.decoded * 255.0).round().to(at::kByte).permute({1, 2, 0}).contiguous();
        report("decode", 1, 1);
    } catch (const c10::Error& e) {
        return errorFromException(e, "Ideogram-4 generation");
    }
    return out;
}

Result<at::Tensor> Ideogram4Pipeline::previewProjection()
{
    auto& m = *m_impl;
    if (m.previewProjection.defined())
        return m.previewProjection;
    try {
        // 32 x 32 latent cells (256 x 256 pixels at FLUX.2's scale): 1024 samples for 33
        // unknowns. A fixed generator: the same model always gets the same projection.
        constexpr std::int64_t kGrid = 16;
        auto generator = at::make_generator<at::CPUGeneratorImpl>(20261201);
        const auto c = m.vae->config().latentChannels;
        // Normalized latents as the transformer makes them: unit variance per channel and
        // smooth, as real ones are (the decoder blurs white noise's cells into each other).
        auto s = at::randn({1, c, kGrid, kGrid}, generator, at::TensorOptions().dtype(at::kFloat));
        s = at::upsample_bilinear2d(s, {2 * kGrid, 2 * kGrid}, false);
        s = s / at::std(s, {2, 3}, true, true);
        const auto z = ideogram4DecoderLatents(ideogram4Patchify(s), kGrid, kGrid, m.vae->latentMean(), m.vae->latentStd());
        auto decoded = m.vae->decode(z.to(m.options.device, m.options.dtype));  // [1, 3, 256, 256]
        if (!decoded)
            return decoded.error();
        m.previewProjection = fitPreviewProjection(z[0], (*decoded)[0]);
        return m.previewProjection;
    } catch (const c10::Error& e) {
        return errorFromException(e, "Ideogram-4 preview projection");
    }
}

}  // namespace vireo::pipelines
