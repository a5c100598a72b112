#include "inference/models/ltx2/ltx2pipeline.h"
#include "base/envswitch.h"
#include "inference/families/previewprojection.h"

#include "inference/lora/lora.h"
#include "inference/models/nn/layers.h"

#include "inference/models/gemma3/gemma3.h"
#include "inference/models/gemma3/gemma3vision.h"
#include "inference/models/ltx2/ltx2audioprep.h"
#include "inference/models/ltx2/ltx2audiovae.h"
#include "inference/models/ltx2/ltx2connectors.h"
#include "inference/models/ltx2/ltx2diffusiondecoder.h"
#include "inference/models/ltx2/ltx2durationhead.h"
#include "inference/models/ltx2/ltx2promptenhancer.h"
#include "inference/models/ltx2/ltx2graphs.h"
#include "inference/models/ltx2/ltx2transformer.h"
#include "inference/models/ltx2/ltx2upsampler.h"
#include "inference/models/ltx2/ltx2videovae.h"
#include "inference/models/ltx2/ltx2vocoder.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/models/ltx2/ltx2schedule.h"
#include "inference/text/tokenizer.h"
#include "inference/util/device.h"
#include "inference/util/format.h"
#include "inference/util/heap.h"
#include "inference/util/log.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/tensorfile/tensorview.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <chrono>
#include <fstream>
#include <sstream>
#include <cmath>
#include <limits>
#include <unistd.h>

namespace vireo::pipelines {

namespace {

using Clock = std::chrono::steady_clock;
// The longest clip a length left on auto makes (the duration head's bound, and the sound's).
constexpr double kAutoLengthMaxSeconds = 20.0;

struct Cancelled {};

template <typename T>
T take(Result<T> r)
{
    if (!r)
        throw r.error();
    return std::move(*r);
}

// Load options of any component: the pipeline's device and compute dtype.
template <typename Options>
Options onDevice(c10::Device device, c10::ScalarType dtype)
{
    Options o;
    o.device = device;
    o.dtype = dtype;
    return o;
}

// diffusers' rescale_noise_cfg: the guided prediction rescaled towards the conditional
// one's standard deviation, mixed by `amount`.
at::Tensor rescaleGuided(const at::Tensor& guided, const at::Tensor& conditional, double amount)
{
    std::vector<std::int64_t> dims;
    for (std::int64_t d = 1; d < guided.dim(); ++d)
        dims.push_back(d);
    const auto stdConditional = conditional.std(dims, /*unbiased=*/true, /*keepdim=*/true);
    const auto stdGuided = guided.std(dims, true, true);
    return amount * (guided * (stdConditional / stdGuided)) + (1 - amount) * guided;
}

bool isDir(const std::filesystem::path& p)
{
    return ::access((p / ".").c_str(), F_OK) == 0;
}

// Lightricks' LTX-2.5 text encoder is one file: a Gemma with its config (metadata gemma_config),
// its tokenizer (byte tensors) and the LTX text projection. The config when `p` is such a file.
std::optional<std::string> gemmaFileConfig(const std::filesystem::path& p)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(p, ec) || p.extension() != ".safetensors")
        return std::nullopt;
    auto source = tensorfile::ModelSource::open(p);
    if (!source)
        return std::nullopt;
    for (const auto& cp : source->checkpoints)
        if (const auto it = cp.metadata.find("gemma_config"); it != cp.metadata.end())
            return it->second;
    return std::nullopt;
}

// The tokenizer such a file carries: tokenizer.json in a byte tensor, its config in an
// `hf_asset__tokenizer_config.json` tensor or metadata entry (ltx-core gemma_assets.py).
Result<text::Tokenizer> tokenizerFromGemmaFile(const std::filesystem::path& file)
{
    auto source = tensorfile::ModelSource::open(file);
    if (!source)
        return source.error();
    std::string json, config;
    for (const auto& cp : source->checkpoints) {
        auto bytesOf = [&](const char* name) -> Result<std::string> {
            const auto* info = cp.find(name);
            if (!info)
                return std::string();
            auto raw = tensorfile::rawBytes(cp, *info);
            if (!raw)
                return raw.error();
            const auto t = raw->contiguous();
            return std::string(reinterpret_cast<const char*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes()));
        };
        auto j = bytesOf("tokenizer_json");
        if (!j)
            return j.error();
        auto c = bytesOf("hf_asset__tokenizer_config.json");
        if (!c)
            return c.error();
        if (!j->empty())
            json = std::move(*j);
        if (!c->empty())
            config = std::move(*c);
        if (config.empty())
            if (const auto it = cp.metadata.find("hf_asset__tokenizer_config.json"); it != cp.metadata.end())
                config = it->second;
    }
    if (json.empty())
        return makeError(ErrorCode::InvalidFormat,
            file.filename().string() + " carries no tokenizer (a tokenizer_json tensor); download the text encoder file again");
    return text::Tokenizer::fromJson(json, config, file.filename().string() + " (tokenizer_json)");
}

}  // namespace

const char* phaseName(Ltx2Phase phase)
{
    switch (phase) {
    case Ltx2Phase::EnhancePrompt: return "enhance prompt";
    case Ltx2Phase::LoadText: return "load text encoder";
    case Ltx2Phase::Encode: return "encode prompt";
    case Ltx2Phase::LoadTransformer: return "load transformer";
    case Ltx2Phase::Denoise: return "denoise";
    case Ltx2Phase::DecodeVideo: return "decode video";
    case Ltx2Phase::DecodeAudio: return "decode audio";
    case Ltx2Phase::Vocoder: return "vocoder";
    case Ltx2Phase::LoadDecoders: return "load decoders";
    case Ltx2Phase::EncodeConditions: return "encode conditions";
    case Ltx2Phase::UpsampleLatents: return "upsample latents";
    case Ltx2Phase::Refine: return "refine";
    case Ltx2Phase::TemporalRefine: return "temporal refine";
    case Ltx2Phase::ThirdStage: return "third stage";
    }
    return "?";
}

struct Ltx2Pipeline::Impl {
    Ltx2PipelineOptions options;
    ltx2::Ltx2Weights weights;
    std::filesystem::path textEncoderPath;
    bool textEncoderFile = false;  // Lightricks' single text encoder file (its tokenizer inside)
    std::optional<ltx2::TextFeatures> textFeatures;
    ltx2::TransformerConfig transformerConfig;
    ltx2::AudioVaeConfig audioConfig;
    std::optional<gemma3::TextEncoder> textEncoder;
    std::shared_ptr<const text::Tokenizer> tokenizer;  // shared with LTX-2.0/2.3's self-enhancement
    std::filesystem::path tokenizerFolder;  // where it was read (empty: from the single file)
    std::optional<ltx2::Connectors> connectors;
    std::optional<ltx2::Transformer> transformer;
    std::optional<ltx2::VideoDecoder> videoDecoder;  // where the files carry the VAE's decoder
    std::optional<ltx2::DiffusionDecoder> diffusionDecoder;  // where they carry LTX-2.5's
    bool vaeDecoder = true;
    double vaeScaling = 1.0;  // the VAE's scaling_factor, known without loading its decoder
    // Why the diffusion decoder cannot run (none, or a broken one); empty when it can.
    std::string noDiffusionDecoder;
    std::optional<ltx2::AudioDecoder> audioDecoder;
    std::optional<ltx2::Vocoder> vocoder;
    std::optional<ltx2::VideoEncoder> videoEncoder;  // loaded with the rest when the VAE has an encoder
    std::optional<ltx2::AudioEncoder> audioEncoder;  // likewise, for audio-to-video
    std::optional<ltx2::LatentUpsampler> upsampler;  // loaded with the rest when a path is set
    std::optional<ltx2::LatentUpsampler> temporalUpsampler;  // likewise
    std::optional<ltx2::DurationHead> durationHead;  // loaded with the rest where the files have one
    std::optional<std::filesystem::path> enhancerPath;  // the prompt enhancer, where there is one (loaded per request)
    bool selfEnhancer = false;  // LTX-2.0/2.3 without one: the Gemma 3 text encoder writes the prompt
    std::string enhancerCpuNote;  // why the last enhancement ran on the CPU; empty when it did not
    std::string enhancerImageNote;  // whether the last image-conditioned enhancement saw the image, and why not
    // Why a length cannot be left on auto (no head, or a broken one); empty when it can.
    std::string noDurationHead;
    // What open() found questionable but not wrong (also logged).
    std::vector<std::string> openWarnings;
    at::Tensor previewProjection;
    // The LoRAs on the transformer now, and what became of them.
    std::vector<Ltx2Lora> appliedLoras;
    std::vector<Ltx2LoraOutcome> loraOutcomes;

    std::vector<lora::Target> loraTargets() const;
    std::vector<Ltx2LoraOutcome> applyLoras(const std::vector<Ltx2Lora>& loras);
    Ltx2Output run(const Ltx2Request& request, const std::function<void(const Ltx2Progress&)>& progress, std::stop_token stop);
    // The request's prompt through the prompt enhancer (loaded for it, freed after).
    ltx2::EnhancedPrompt enhancePrompt(
        const Ltx2Request& req, const std::function<void(const Ltx2Progress&)>& progress, std::stop_token stop);
    void loadText(const std::function<void(const Ltx2Progress&)>& progress);
    void loadTransformer(const std::function<void(const Ltx2Progress&)>& progress);
    void loadDecoders(const std::function<void(const Ltx2Progress&)>& progress);
    // The latent statistics diffusion runs on: the VAE's, else the diffusion decoder's (the
    // same numbers in a published checkpoint).
    std::pair<at::Tensor, at::Tensor> latentStats();
    bool decodesByDiffusion(const Ltx2Request& req) const
    {
        return req.videoDecode == Ltx2VideoDecode::Diffusion || (req.videoDecode == Ltx2VideoDecode::Auto && noDiffusionDecoder.empty());
    }
    // The spatial or the temporal upsampler into its slot, where a path names one.
    void loadLatentUpsampler(std::optional<ltx2::LatentUpsampler>& slot, const std::optional<std::filesystem::path>& path);
    void loadUpsampler() { loadLatentUpsampler(upsampler, options.spatialUpsamplerPath); }
    void loadTemporalUpsampler() { loadLatentUpsampler(temporalUpsampler, options.temporalUpsamplerPath); }
    // The video VAE's encoder, for image and video conditions, where the checkpoint has one.
    void loadVideoEncoder();

    // A condition through the video VAE encoder, at the size of the pass it conditions.
    struct EncodedCondition {
        at::Tensor packed;  // [1, tokens, C], normalized
        at::Tensor unpacked;  // [1, C, f, h, w]
        std::int64_t latentIndex = 0, pixelFrames = 1;
        double strength = 1.0;
    };
    // One denoising pass: its grid, start state and what keeps the conditioned tokens.
    struct Pass {
        std::int64_t latentFrames = 0, latentH = 0, latentW = 0, baseTokens = 0;
        at::Tensor latents, audioLatents;  // packed start states ([1, T + K, C], [1, La, C_a])
        at::Tensor mask;  // [1, T + K] conditioning strength; undefined: none
        at::Tensor clean;  // [1, T + K, C] the conditioned tokens' clean values
        at::Tensor extraCoords;  // [1, 3, K, 2] keyframe tokens' RoPE bounds; undefined: none
        at::Tensor selfMask;  // [1, T + K, T + K] video self-attention weights; undefined: full attention
        sched::FlowSchedule schedule;
        Ltx2Phase phase = Ltx2Phase::Denoise;
        // A DFR pass: the slot tokens after the canvas's, the tokens the keyframe embedding
        // marks ([1, T + K]), and after the loop every token of it and the slots unpacked.
        bool dfr = false;
        std::int64_t slotTokens = 0, slotCount = 0, referenceTokens = 0;
        at::Tensor keyframes, allTokens, slots;
        // The ancestral sampler at `ancestralEta` drawing from its own generator (a temporal refine
        // tile's, the Fast recipe's stage 1), the audio too where `ancestralAudio` (after the
        // video's draw); a refine tile freezes the audio at the stage's (the video still attends to
        // it). Steps are reported after `reportOffset` of `reportTotal` (0: the pass's own count).
        std::optional<at::Generator> ancestral;
        double ancestralEta = 0.0;
        bool ancestralAudio = false;
        bool freezeAudio = false;
        // Retake: the audio tokens held at their clean values ([1, La] strength, 1: kept), and
        // every kept token's clean estimate taken at its own sigma (0), as ltx-core's X0Model does.
        at::Tensor audioMask, audioClean;
        bool tokenSigma = false;
        std::int64_t reportOffset = 0, reportTotal = 0;
        // No guidance in this pass whatever the request asks (the dev recipe's second stage):
        // one forward per step on the positive prompt.
        bool unguided = false;
        Ltx2Sampler sampler = Ltx2Sampler::Euler;
        // The third spatial stage: the transformer runs once per tile and their velocities are
        // blended (empty: one forward over every token).
        std::vector<DfrTokenPlan> tiles;
    };
    // The RoPE bounds of keyframe tokens (a condition, a DFR slot) appended after the grid's:
    // pixel space without the causal first-frame shift, starting at pixel frame `start`, one
    // pixel frame long for a still (_prepare_keyframe_coords), time in seconds at `fps`.
    at::Tensor keyframeCoords(std::int64_t frames, std::int64_t height, std::int64_t width, double start, bool still, double fps,
        const at::TensorOptions& f32) const;

    std::vector<EncodedCondition> encodeConditions(const Ltx2Request& req, std::int64_t width, std::int64_t height,
        const std::function<void(const Ltx2Progress&)>& progress, std::stop_token stop);
    // Puts the conditions into a pass whose base latents ([1, T, C]) are set: first-frame ones
    // replace tokens, keyframes are appended; then noise to noiseScale where not conditioned.
    // A still keyframe spans one pixel frame in time as diffusers places it, or its latent
    // frame's eight as ltx-core does (ltxCoreKeyframes).
    void applyConditions(Pass& pass, const std::vector<EncodedCondition>& conditions, double fps, const at::Tensor& noise,
        double noiseScale, bool ltxCoreKeyframes = false) const;
    c10::Device textDevice() const { return options.textEncoderDevice.value_or(options.device); }

    // One run's request, reports, timings and stop, shared by its stages.
    struct Run {
        const Ltx2Request& req;
        const std::function<void(const Ltx2Progress&)>& progress;
        std::stop_token stop;
        Ltx2Output out;
        // What is decoded: the request's frames and rate, or the temporal rounds' (doubled each).
        std::int64_t frames = 0;
        double fps = 0.0;
        // The run's generator: the diffusion decoder's noise continues its stream after every
        // stage's draws, as ltx-pipelines hands the one generator to the decoder.
        at::Generator* generator = nullptr;
        // Audio-to-video: the user's sound encoded for the passes' audio frames (packed, normalized).
        at::Tensor heldAudio = {};
        // Retake: the seconds the audio tokens made again span ([from, to); empty: none).
        std::pair<double, double> redoneAudio = {0.0, 0.0};
        // Extend with sound: the prefix's latents, and the seconds its kept tokens span.
        at::Tensor prefixLatents = {};
        double prefixSeconds = 0.0;
        // The size the second DFR pass and the temporal rounds run at: the request's, or half of
        // it when a third spatial stage follows.
        std::int64_t detailWidth = 0, detailHeight = 0;
        void report(Ltx2Phase phase, std::int64_t done, std::int64_t total) const
        {
            if (progress)
                progress({phase, done, total, {}});
        }
        void checkStop() const
        {
            if (stop.stop_requested())
                throw Cancelled{};
        }
        void timed(const char* name, Clock::time_point start)
        {
            out.secondsPerPhase[name] += std::chrono::duration<double>(Clock::now() - start).count();
        }
    };
    static bool guided(const Ltx2Request& req) { return cfgOn(req); }
    static bool anyGuidance(const Ltx2Request& req) { return guided(req) || stgOn(req) || modalityOn(req); }
    std::vector<int> stgBlocksFor(const Ltx2Request& req) const { return pipelines::stgBlocksFor(req, transformerConfig); }
    bool stgRuns(const Ltx2Request& req) const { return pipelines::stgRuns(req, transformerConfig); }
    // The audio latent frames of the request's duration (the audio VAE's mel hop and 4x).
    std::int64_t audioLatentFrames(const Ltx2Request& req) const
    {
        const double duration = static_cast<double>(req.frames) / req.fps;
        const double perSecond = static_cast<double>(audioConfig.sampleRate) / static_cast<double>(audioConfig.melHopLength) / 4.0;
        return static_cast<std::int64_t>(std::nearbyint(duration * perSecond));
    }
    // The stages of run(), in order.
    void checkRequest(const Ltx2Request& req) const;
    ltx2::ConnectorOutputs encodePrompt(Run& run);
    std::int64_t predictFrames(Run& run, const ltx2::ConnectorOutputs& ctx);
    // A length left on auto with the user's sound: the shortest clip on the VAE's grid that
    // holds all of it, from 9 frames up to 20 s (a longer sound is cut there, and said).
    std::int64_t framesForAudio(Run& run) const;
    Pass startPass(Run& run, at::Generator& generator);
    // IC-LoRA references appended after a pass's tokens (its conditions in place): noised to
    // (1 - strength) x noiseScale, held by the blend, positioned on the clip's grid with the
    // spatial axes x the downscale, and the block mask of diffusers' LTX2InContextPipeline where
    // the attention strength is below 1.
    void appendReferences(
        Run& run, Pass& pass, const std::vector<EncodedCondition>& references, const at::Tensor& noise, double noiseScale) const;
    // One DFR pass's size, start and draws: stage 1 from noise, or the second-stage form.
    struct DfrPassSpec {
        std::int64_t width = 0, height = 0;
        const Ltx2DfrStart* start = nullptr;
        const std::optional<at::Tensor>* videoNoise = nullptr;
        const std::optional<at::Tensor>* audioNoise = nullptr;
        // The third spatial stage's: keyframes held at `pinnedStrength` ([1, C, K, H, W],
        // normalized) at these pixel frames, unmarked, after the conditions' tokens; the start's
        // audio frozen (any length); the playback rate (0: the request's).
        const at::Tensor* pinned = nullptr;
        const std::vector<std::int64_t>* pinnedPositions = nullptr;
        double pinnedStrength = 1.0;
        bool freezeAudio = false;
        double fps = 0.0;
        // Where a condition after frame 0 lands: its pixel frame times this (2^rounds after the
        // temporal rounds, whose canvas is that much longer).
        std::int64_t conditionScale = 1;
    };
    Pass startDfrPass(Run& run, at::Generator& generator, const DfrCanvas& canvas, const DfrPassSpec& spec);
    void refineDfrAtFullSize(Run& run, Pass& pass, ltx2::TransformerInputs& in, at::Generator& generator, const DfrCanvas& canvas);
    // A detailing pass's reference (the canvas before its upsampling) and, with the detailing
    // LoRA, the LoRA applied on top of the request's; nothing without either.
    void detailWith(Run& run, Ltx2DfrStart& next, const at::Tensor& reference);
    void denoisePass(Run& run, Pass& p, ltx2::TransformerInputs& in);
    // The res2s loop over a pass's schedule, with the pass's guided, condition-blended clean
    // estimate at (video, audio, sigma).
    using Evaluate = std::function<std::pair<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, float)>;
    void res2sLoop(Run& run, Pass& p, const Evaluate& evaluate) const;
    void refineAtFullSize(Run& run, Pass& pass, ltx2::TransformerInputs& in, at::Generator& generator);
    void temporalRefine(Run& run, Pass& pass, ltx2::TransformerInputs& in, at::Generator& generator, const DfrCanvas& canvas);
    // The third spatial stage after the rounds (`seams`: the last round's, or the slots').
    void dfrEpilogue(Run& run, Pass& pass, ltx2::TransformerInputs& in, at::Generator& generator, const std::vector<std::int64_t>& seams);
    // The carried keyframes ([1, C, K, h, w], normalized) each decoded alone, stretched x2 with
    // Lanczos in 8-bit RGB and encoded again: [1, C, K, 2h, 2w].
    at::Tensor rebuildKeyframes(Run& run, const at::Tensor& keyframes);
    void decodeVideo(Run& run, const Pass& pass);
    void decodeAudio(Run& run, const Pass& pass);
    // Audio-to-video: the user's sound over `frames` frames at the request's rate, as a2vid reads
    // it (cut there; silence after its end), encoded and cut to `latentFrames`; once per run.
    const at::Tensor& userAudioLatents(Run& run, std::int64_t frames, std::int64_t latentFrames);
    // A sound's first `seconds` (silence after its end) encoded for `latentFrames` audio latents
    // (packed, normalized).
    at::Tensor encodeSound(Run& run, const Ltx2AudioCondition& sound, double seconds, std::int64_t latentFrames);
    // Extend with sound: the sound the clip starts from held at the start of a pass's audio
    // (its latent frames kept exactly, the rest made to continue it).
    void holdAudioPrefix(Run& run, Pass& pass);
    // Retake: the masks on a pass whose conditions hold the clip (kept), the tokens in the
    // window started from `noise` / its audio draw; the clip's sound encoded and held likewise.
    void applyRetake(Run& run, Pass& pass, const at::Tensor& noise, double noiseScale);
    // Retake: the clip's own frames and samples outside what was made again.
    void spliceRetake(Run& run) const;
    // Extend with sound: the prefix's own samples over its kept tokens, then a 10 ms crossfade
    // into the decoded continuation (no step at the seam).
    void splicePrefix(Run& run) const;
    // Puts the user's sound, frozen, in place of a pass's audio start (its draw already made, so
    // the video's noise is the same with or without it). Nothing without one.
    void holdUserAudio(Run& run, Pass& pass, std::int64_t frames);
    void loadAudioEncoder();
};

void Ltx2Pipeline::Impl::loadText(const std::function<void(const Ltx2Progress&)>& progress)
{
    auto report = [&](std::int64_t done) {
        if (progress)
            progress({Ltx2Phase::LoadText, done, 1, {}});
    };
    if (!tokenizer && textEncoderFile) {
        report(0);
        tokenizer = std::make_shared<const text::Tokenizer>(take(tokenizerFromGemmaFile(textEncoderPath)));
    }
    if (!tokenizer) {
        report(0);
        auto tokFolder = textEncoderPath;
        // A diffusers folder keeps the tokenizer beside text_encoder/, a Gemma download inside it.
        if (::access((tokFolder / "tokenizer.json").c_str(), F_OK) != 0
            && ::access((tokFolder.parent_path() / "tokenizer" / "tokenizer.json").c_str(), F_OK) == 0)
            tokFolder = tokFolder.parent_path() / "tokenizer";
        tokenizer = std::make_shared<const text::Tokenizer>(take(text::Tokenizer::load(tokFolder)));
        tokenizerFolder = tokFolder;
    }
    if (!textEncoder) {
        report(0);
        textEncoder =
            take(gemma3::TextEncoder::load(textEncoderPath, onDevice<gemma3::TextEncoderLoadOptions>(textDevice(), options.dtype)));
        report(1);
    }
    if (!connectors) {
        auto o = onDevice<ltx2::ConnectorLoadOptions>(options.device, options.dtype);
        o.textFeatures = textFeatures;
        connectors = take(ltx2::Connectors::load(weights, o));
    }
}

void Ltx2Pipeline::Impl::loadTransformer(const std::function<void(const Ltx2Progress&)>& progress)
{
    if (transformer)
        return;
    if (progress)
        progress({Ltx2Phase::LoadTransformer, 0, 1, {}});
    auto o = onDevice<ltx2::TransformerLoadOptions>(options.device, options.dtype);
    o.offloadBlocks = options.offloadTransformerBlocks;
    transformer = take(ltx2::Transformer::load(weights, o));
    // A fresh transformer carries no adapters.
    appliedLoras.clear();
    loraOutcomes.clear();
    if (progress)
        progress({Ltx2Phase::LoadTransformer, 1, 1, {}});
}

std::vector<lora::Target> Ltx2Pipeline::Impl::loraTargets() const
{
    return transformer ? transformer->loraTargets() : ltx2::loraTargetsFromHeaders(weights);
}

std::vector<Ltx2LoraOutcome> Ltx2Pipeline::Impl::applyLoras(const std::vector<Ltx2Lora>& loras)
{
    std::vector<lora::Request> requests;
    for (const auto& l : loras)
        requests.push_back({l.path, l.strength});
    std::vector<nn::LoraDelta> all;
    const auto prepared = lora::prepare(requests, loraTargets(), options.dtype, options.device, &all);
    std::vector<Ltx2LoraOutcome> outcomes;
    for (const auto& o : prepared)
        outcomes.push_back({o.path, o.strength, o.status, o.matched, o.unmatched, o.refusedKeys, o.deviceBytes, o.report});
    // The old adapters go first, so a swap never holds both sets.
    (void)transformer->setLoraDeltas({});
    auto set = transformer->setLoraDeltas(all);
    if (!set) {
        // Checked per LoRA above; a failure here is a model/LoRA disagreement the report missed.
        for (auto& o : outcomes)
            if (o.matched > 0) {
                o.status = "refused: " + set.error().message;
                o.matched = 0;
            }
    }
    appliedLoras = loras;
    loraOutcomes = outcomes;
    return outcomes;
}

void Ltx2Pipeline::Impl::loadDecoders(const std::function<void(const Ltx2Progress&)>& progress)
{
    // Where the files carry LTX-2.5's diffusion decoder it decodes by default: the VAE's decoder
    // (about 1 GB at 22B) loads only when a request asks for it.
    const bool diffusion = noDiffusionDecoder.empty();
    const bool vae = vaeDecoder && !diffusion;
    if ((videoDecoder || !vae) && (diffusionDecoder || !diffusion) && audioDecoder && vocoder)
        return;
    if (progress)
        progress({Ltx2Phase::LoadDecoders, 0, 3, {}});
    if (!videoDecoder && vae)
        videoDecoder = take(ltx2::VideoDecoder::load(weights, onDevice<ltx2::VideoDecoderLoadOptions>(options.device, options.dtype)));
    if (!diffusionDecoder && diffusion)
        diffusionDecoder = take(ltx2::DiffusionDecoder::load(weights, options.device, options.dtype));
    if (progress)
        progress({Ltx2Phase::LoadDecoders, 1, 3, {}});
    if (!audioDecoder)
        audioDecoder = take(ltx2::AudioDecoder::load(weights, onDevice<ltx2::AudioDecoderLoadOptions>(options.device, options.dtype)));
    if (progress)
        progress({Ltx2Phase::LoadDecoders, 2, 3, {}});
    if (!vocoder)
        vocoder = take(ltx2::Vocoder::load(weights, onDevice<ltx2::VocoderLoadOptions>(options.device, options.dtype)));
    if (progress)
        progress({Ltx2Phase::LoadDecoders, 3, 3, {}});
}

std::pair<at::Tensor, at::Tensor> Ltx2Pipeline::Impl::latentStats()
{
    if (videoDecoder)
        return {videoDecoder->latentsMean(), videoDecoder->latentsStd()};
    if (vaeDecoder) {
        // The VAE's two vectors, read without its decoder (which may never load).
        ltx2::WeightTaker statistics(weights, ltx2::Part::VideoVae, options.device, at::kFloat);
        statistics.ignorePrefix("");
        auto mean = statistics.tensor("latents_mean");
        auto std = statistics.tensor("latents_std");
        return {std::move(mean), std::move(std)};
    }
    if (!diffusionDecoder)
        diffusionDecoder = take(ltx2::DiffusionDecoder::load(weights, options.device, options.dtype));
    return {diffusionDecoder->latentsMean(), diffusionDecoder->latentsStd()};
}

void Ltx2Pipeline::Impl::loadLatentUpsampler(std::optional<ltx2::LatentUpsampler>& slot, const std::optional<std::filesystem::path>& path)
{
    if (slot || !path)
        return;
    ltx2::LatentUpsamplerLoadOptions o;
    o.device = options.device;
    o.dtype = options.dtype;
    slot = take(ltx2::LatentUpsampler::load(*path, o));
}

void Ltx2Pipeline::Impl::loadAudioEncoder()
{
    if (audioEncoder)
        return;
    for (const auto& [name, t] : weights.tensors(ltx2::Part::AudioVae))
        if (name.rfind("encoder.", 0) == 0) {
            audioEncoder = take(ltx2::AudioEncoder::load(weights, onDevice<ltx2::AudioDecoderLoadOptions>(options.device, options.dtype)));
            return;
        }
}

void Ltx2Pipeline::Impl::loadVideoEncoder()
{
    if (videoEncoder)
        return;
    for (const auto& [name, t] : weights.tensors(ltx2::Part::VideoVae))
        if (name.rfind("encoder.", 0) == 0) {
            videoEncoder = take(ltx2::VideoEncoder::load(weights, onDevice<ltx2::VideoEncoderLoadOptions>(options.device, options.dtype)));
            return;
        }
}

std::vector<Ltx2Pipeline::Impl::EncodedCondition> Ltx2Pipeline::Impl::encodeConditions(const Ltx2Request& req, std::int64_t width,
    std::int64_t height, const std::function<void(const Ltx2Progress&)>& progress, std::stop_token stop)
{
    std::vector<EncodedCondition> out;
    if (req.conditions.empty())
        return out;
    if (progress)
        progress({Ltx2Phase::EncodeConditions, 0, static_cast<std::int64_t>(req.conditions.size()), {}});
    if (!videoEncoder)
        videoEncoder = take(ltx2::VideoEncoder::load(
            weights, onDevice<ltx2::VideoEncoderLoadOptions>(options.device, options.dtype)));  // after a release()
    const auto& tc = transformerConfig;
    const auto temporal = tc.vaeScaleFactors[0];
    for (std::size_t i = 0; i < req.conditions.size(); ++i) {
        const auto& c = req.conditions[i];
        EncodedCondition e;
        e.latentIndex = c.latentIndex;
        e.strength = c.strength;
        // [F, H, W, 3] uint8 -> [F, 3, H, W] float in 0..255, resized for a half-size pass as
        // diffusers resizes conditions (bilinear, no antialiasing: the original code's
        // F.interpolate), then to the VAE's [-1, 1].
        auto pixels = c.pixels.to(at::kFloat).permute({0, 3, 1, 2});
        // The clip cannot run past the video's end; trimmed to 8k + 1 frames as the reference does.
        const auto start = std::max<std::int64_t>((c.latentIndex - 1) * temporal + 1, 0);
        auto n = std::min<std::int64_t>(pixels.size(0), req.frames - start);
        n = (n - 1) / temporal * temporal + 1;
        pixels = pixels.narrow(0, 0, n);
        e.pixelFrames = n;
        if (pixels.size(2) != height || pixels.size(3) != width) {
            const double scale = std::max(double(height) / double(pixels.size(2)), double(width) / double(pixels.size(3)));
            const auto newH = static_cast<std::int64_t>(std::ceil(double(pixels.size(2)) * scale));
            const auto newW = static_cast<std::int64_t>(std::ceil(double(pixels.size(3)) * scale));
            pixels = at::upsample_bilinear2d(pixels, {newH, newW}, false);
            pixels = pixels.narrow(2, (newH - height) / 2, height).narrow(3, (newW - width) / 2, width);
        }
        auto video = (pixels / 127.5 - 1.0).permute({1, 0, 2, 3}).unsqueeze(0).contiguous();  // [1, 3, n, H, W]
        ltx2::VideoEncodeOptions eo;
        eo.stop = stop;
        // A still encodes whole (as the reference does); a clip at more than 512 px in tiles
        // and chunks, as decoding does, so a 1080p clip fits in bounded memory.
        if (n > 1 && (height / 32 > 16 || width / 32 > 16)) {
            eo.tileSize = 16;
            eo.tileOverlap = 2;
        }
        if (n > 1 && (n - 1) / temporal + 1 > 8) {
            eo.chunkFrames = 8;
            eo.chunkOverlap = 2;
        }
        e.unpacked = take(videoEncoder->encode(video.to(options.device, options.dtype), eo)).to(at::kFloat);
        e.packed = e.unpacked.permute({0, 2, 3, 4, 1}).reshape({1, -1, e.unpacked.size(1)});
        out.push_back(std::move(e));
        if (progress)
            progress({Ltx2Phase::EncodeConditions, static_cast<std::int64_t>(i) + 1, static_cast<std::int64_t>(req.conditions.size()), {}});
    }
    return out;
}

void Ltx2Pipeline::Impl::applyConditions(Pass& pass, const std::vector<EncodedCondition>& conditions, double fps, const at::Tensor& noise,
    double noiseScale, bool ltxCoreKeyframes) const
{
    const auto& tc = transformerConfig;
    // A copy: the base latents may be a view of the caller's (the upsampler's output).
    auto latents = pass.latents.clone();
    const auto f32 = latents.options();
    const auto channels = latents.size(2);
    auto mask = at::zeros({1, latents.size(1)}, f32);
    auto clean = at::zeros_like(latents);
    std::vector<at::Tensor> extraTokens, extraMask, extraCoords;
    for (const auto& c : conditions) {
        const auto tokens = c.packed.to(f32);
        if (c.latentIndex == 0) {
            // LTX2ConditionPipeline.apply_first_frame_conditioning: overwrite the first tokens.
            const auto n = tokens.size(1);
            latents.narrow(1, 0, n).copy_(tokens);
            mask.narrow(1, 0, n).fill_(c.strength);
            clean.narrow(1, 0, n).copy_(tokens);
            continue;
        }
        // A keyframe: extra tokens with their own RoPE bounds, in pixel space without the
        // causal first-frame shift, at pixel frame 8 (k - 1) + 1 (_prepare_keyframe_coords;
        // ltx-core's VideoConditionByKeyframeIndex does not shorten a still's span).
        const auto coords = keyframeCoords(c.unpacked.size(2), c.unpacked.size(3), c.unpacked.size(4),
            double((c.latentIndex - 1) * tc.vaeScaleFactors[0] + 1), c.pixelFrames == 1 && !ltxCoreKeyframes, fps, f32);
        extraTokens.push_back(tokens);
        extraMask.push_back(at::full({1, tokens.size(1)}, c.strength, f32));
        extraCoords.push_back(coords);
    }
    if (!extraTokens.empty()) {
        const auto kf = at::cat(extraTokens, 1);
        latents = at::cat({latents, kf}, 1);
        clean = at::cat({clean, kf}, 1);
        mask = at::cat({mask, at::cat(extraMask, 1)}, 1);
        pass.extraCoords = at::cat(extraCoords, 2);
    }
    if (noise.sizes() != latents.sizes())
        throw makeError(ErrorCode::InvalidArgument,
            "video noise must be [1, " + std::to_string(latents.size(1)) + ", " + std::to_string(channels)
                + "] (keyframe tokens included)");
    // Noise to noiseScale where nothing is conditioned, less where a condition holds the token
    // (the reference's expression, so the unconditioned tokens get the noise bit for bit).
    const auto scaled = ((1 - mask) * noiseScale).unsqueeze(-1);
    pass.latents = noise.to(f32) * scaled + latents * (1 - scaled);
    if (!conditions.empty()) {
        pass.mask = mask;
        pass.clean = clean;
    }
}

void Ltx2Pipeline::Impl::appendReferences(
    Run& run, Pass& pass, const std::vector<EncodedCondition>& references, const at::Tensor& noise, double noiseScale) const
{
    const auto& req = run.req;
    const auto& tc = transformerConfig;
    const auto f32 = pass.latents.options();
    const auto prefix = pass.latents.size(1);
    std::vector<at::Tensor> tokens, strengths, coords;
    std::vector<std::int64_t> groups;
    for (const auto& r : references) {
        const auto t = r.packed.to(f32);
        tokens.push_back(t);
        strengths.push_back(at::full({1, t.size(1)}, r.strength, f32));
        groups.push_back(t.size(1));
        // The clip's own grid at the reference's latent size (the causal first frame included),
        // stretched over the clip's area: frame k of the reference sits over frame k of the clip.
        auto c = ltx2::videoCoordsFor(tc, r.unpacked.size(2), r.unpacked.size(3), r.unpacked.size(4), req.fps, options.device).to(f32);
        c.narrow(1, 1, 2).mul_(static_cast<double>(req.referenceDownscale));
        coords.push_back(c);
    }
    const auto all = at::cat(tokens, 1);
    const auto strength = at::cat(strengths, 1);
    if (noise.sizes() != all.sizes())
        throw makeError(ErrorCode::InvalidArgument,
            "reference noise must be [1, " + std::to_string(all.size(1)) + ", " + std::to_string(all.size(2)) + "]");
    // The reference's expression: a reference at strength 1 is its encoding bit for bit.
    const auto scaled = ((1 - strength) * noiseScale).unsqueeze(-1);
    pass.latents = at::cat({pass.latents, noise.to(f32) * scaled + all * (1 - scaled)}, 1);
    pass.mask = at::cat({pass.mask.defined() ? pass.mask : at::zeros({1, prefix}, f32), strength}, 1);
    pass.clean = at::cat({pass.clean.defined() ? pass.clean : at::zeros({1, prefix, all.size(2)}, f32), all}, 1);
    const auto referenceCoords = at::cat(coords, 2);
    pass.extraCoords = pass.extraCoords.defined() ? at::cat({pass.extraCoords, referenceCoords}, 2) : referenceCoords;
    run.out.referenceTokens = all;
    if (req.referenceAttention >= 1.0)
        return;
    // Full attention among the clip's and keyframe tokens and within a reference; the clip's
    // tokens and a reference's at the attention strength both ways; nothing between a reference
    // and a keyframe or another reference.
    const auto total = pass.latents.size(1);
    auto m = at::zeros({1, total, total}, f32);
    m.narrow(1, 0, prefix).narrow(2, 0, prefix).fill_(1.0);
    auto offset = prefix;
    for (const auto n : groups) {
        m.narrow(1, 0, pass.baseTokens).narrow(2, offset, n).fill_(req.referenceAttention);
        m.narrow(1, offset, n).narrow(2, 0, pass.baseTokens).fill_(req.referenceAttention);
        m.narrow(1, offset, n).narrow(2, offset, n).fill_(1.0);
        offset += n;
    }
    pass.selfMask = m;
    run.out.referenceAttentionMask = m;
}

at::Tensor Ltx2Pipeline::Impl::keyframeCoords(
    std::int64_t frames, std::int64_t height, std::int64_t width, double start, bool still, double fps, const at::TensorOptions& f32) const
{
    const auto& tc = transformerConfig;
    const auto grid = at::stack(at::meshgrid({at::arange(frames, f32), at::arange(height, f32), at::arange(width, f32)}, "ij"), 0);
    auto coords = at::stack({grid, grid + 1}, -1).flatten(1, 3).unsqueeze(0);  // [1, 3, n, 2]
    const auto scale =
        at::tensor(std::vector<float>{float(tc.vaeScaleFactors[0]), float(tc.vaeScaleFactors[1]), float(tc.vaeScaleFactors[2])}, f32);
    coords = coords * scale.view({1, 3, 1, 1});
    auto t = coords.select(1, 0);
    t.add_(start);
    if (still)
        t.select(2, 1).copy_(t.select(2, 0) + 1);
    t.div_(fps);
    return coords;
}

Result<DfrCanvas> dfrCanvas(std::int64_t frames)
{
    if (frames < 9 || (frames - 1) % 8 || frames > (1 << 20))
        return makeError(ErrorCode::InvalidArgument, "the DFR canvas needs 8k + 1 frames, at least 9, got " + std::to_string(frames));
    const auto content = frames - 1;
    // The segment (3 or 4 latent frames) that pads least; the longer one on a tie.
    std::int64_t segment = 0, leastPad = 0;
    for (const std::int64_t candidate : {24, 32}) {
        const auto pad = (candidate - content % candidate) % candidate;
        if (segment == 0 || pad <= leastPad) {
            segment = candidate;
            leastPad = pad;
        }
    }
    DfrCanvas c;
    c.segment = segment;
    c.paddedFrames = content + leastPad + 1;
    for (std::int64_t p = segment; p <= content + leastPad; p += segment)
        c.slots.push_back(p);
    return c;
}

namespace {

// dfr_layout.split_canvas_at_seams: the segments between `cells` (0 first, the axis's last cell
// last) dealt out to `tiles` tiles, the leftovers on the leading ones, never a tile without one;
// each tile after the first reaches `overlap` cells back from the cell after the seam it resumes
// from, and that run-up is its left ramp.
std::vector<DfrSpan> splitAtSeams(const std::vector<std::int64_t>& cells, std::int64_t tiles, std::int64_t overlap)
{
    const auto segments = static_cast<std::int64_t>(cells.size()) - 1;
    const auto count = std::min<std::int64_t>(tiles, segments);
    std::vector<DfrSpan> spans;
    std::int64_t cursor = 0;
    for (std::int64_t i = 0; i < count; ++i) {
        DfrSpan span;
        const auto resume = cells[static_cast<std::size_t>(cursor)] + 1;
        span.start = i == 0 ? 0 : std::max<std::int64_t>(0, resume - overlap);
        span.leftRamp = i == 0 ? 0 : resume - span.start;
        cursor += segments / count + (i < segments % count ? 1 : 0);
        span.end = cells[static_cast<std::size_t>(cursor)] + 1;
        spans.push_back(span);
    }
    return spans;
}

// dfr_layout.split_by_count: `tiles` even tiles over `size` cells, each pair sharing `overlap`,
// the remainder spread over the leading tiles. The caller keeps overlap below the tile size.
std::vector<DfrSpan> splitByCount(std::int64_t size, std::int64_t tiles, std::int64_t overlap)
{
    if (tiles == 1)
        return {DfrSpan{0, size, 0, 0}};
    const auto total = size + overlap * (tiles - 1);
    const auto tile = total / tiles, remainder = total % tiles, stride = tile - overlap;
    std::vector<DfrSpan> spans;
    for (std::int64_t i = 0; i < tiles; ++i) {
        const auto shift = std::min(i, remainder);
        spans.push_back(
            {i * stride + shift, i * stride + tile + shift + (i < remainder ? 1 : 0), i == 0 ? 0 : overlap, i == tiles - 1 ? 0 : overlap});
    }
    return spans;
}

// dfr_layout.trapezoidal_mask_1d (its linspace interiors, so two ramps over a shared run sum to
// 1) or, for a seam cut, rectangular_mask_1d (the run-up weighs 0).
at::Tensor spanMask(const DfrSpan& span, bool cut)
{
    const auto length = span.end - span.start;
    auto mask = at::ones({length}, at::kFloat);
    if (cut) {
        mask.narrow(0, 0, span.leftRamp).zero_();
        return mask;
    }
    if (span.leftRamp > 0)
        mask.narrow(0, 0, span.leftRamp).mul_(at::linspace(0.0, 1.0, span.leftRamp + 2, at::kFloat).narrow(0, 1, span.leftRamp));
    if (span.rightRamp > 0)
        mask.narrow(0, length - span.rightRamp, span.rightRamp)
            .mul_(at::linspace(1.0, 0.0, span.rightRamp + 2, at::kFloat).narrow(0, 1, span.rightRamp));
    return mask;
}

}  // namespace

Result<std::vector<DfrTemporalTile>> dfrTemporalTiles(const std::vector<std::int64_t>& seams, std::int64_t frames, int tiles)
{
    constexpr std::int64_t kRatio = 8;
    const auto refuse = [](const std::string& why) { return makeError(ErrorCode::InvalidArgument, "temporal tile plan: " + why); };
    if (frames < 9 || (frames - 1) % kRatio || frames > (1 << 22))
        return refuse("the canvas needs 8k + 1 frames, at least 9, got " + std::to_string(frames));
    if (tiles < 1)
        return refuse("at least one tile, got " + std::to_string(tiles));
    // Cells: 0, then each seam's latent frame; the last must be the canvas's last.
    std::vector<std::int64_t> cells{0};
    for (const auto p : seams) {
        if (p < 0 || p % kRatio)
            return refuse("seam " + std::to_string(p) + " is not on an x8 latent border");
        if (p / kRatio <= cells.back())
            return refuse("seams must be strictly increasing and after frame 0");
        cells.push_back(p / kRatio);
    }
    const auto latentFrames = (frames - 1) / kRatio + 1;
    if (cells.size() < 2 || cells.back() != latentFrames - 1)
        return refuse("the last seam must be the canvas's last frame (" + std::to_string(frames - 1) + ")");
    std::vector<DfrTemporalTile> plan;
    for (const auto& span : splitAtSeams(cells, tiles, cells[1] + 1)) {
        DfrTemporalTile t;
        t.start = span.start;
        t.end = span.end;
        t.leftRamp = span.leftRamp;
        t.pixelStart = t.start * kRatio;
        t.pixelEnd = (t.end - 1) * kRatio;
        std::vector<std::int64_t> marks{t.pixelStart};
        for (const auto p : seams) {
            if (p >= t.pixelStart && p <= t.pixelEnd)
                t.anchors.push_back(p);
            if (p > t.pixelStart && p <= t.pixelEnd)
                marks.push_back(p);
        }
        for (std::size_t m = 1; m < marks.size(); ++m)
            t.slots.push_back((marks[m - 1] + marks[m]) / 2);
        plan.push_back(std::move(t));
    }
    return plan;
}

Result<DfrEpilogueLayout> dfrEpilogueTiles(
    std::int64_t frames, std::int64_t height, std::int64_t width, int frameTiles, const std::vector<std::int64_t>& frameSeams)
{
    constexpr std::int64_t kSpatialOverlap = 12;  // dfr_layout.EPILOGUE_SPATIAL_OVERLAP
    constexpr std::int64_t kMaxCells = 1 << 16;
    const auto refuse = [](const std::string& why) { return makeError(ErrorCode::InvalidArgument, "epilogue tiles: " + why); };
    if (frames < 1 || height < 1 || width < 1 || frames > kMaxCells || height > kMaxCells || width > kMaxCells)
        return refuse("a latent grid of 1 to 65536 cells a side, got " + std::to_string(frames) + "x" + std::to_string(height) + "x"
            + std::to_string(width));
    if (frameTiles < 1 || frameTiles > 64)
        return refuse("1 to 64 frame tiles, got " + std::to_string(frameTiles));
    for (std::size_t i = 0; i < frameSeams.size(); ++i)
        if (frameSeams[i] < 0 || frameSeams[i] > kMaxCells || (i > 0 && frameSeams[i] <= frameSeams[i - 1]))
            return refuse("seams must be increasing latent frames");
    DfrEpilogueLayout layout;
    struct Axis {
        std::int64_t size, tiles, overlap;
        const char* name;
    };
    std::array<Axis, 3> axes{Axis{frames, frameTiles, frameTiles > 1 && !frameSeams.empty() ? frameSeams.front() + 1 : 0, "frames"},
        Axis{height, 2, kSpatialOverlap, "height"}, Axis{width, 2, kSpatialOverlap, "width"}};
    for (auto& a : axes) {
        if (a.tiles > 1 && a.size < a.tiles) {
            layout.notes.push_back("latent " + std::string(a.name) + " is " + std::to_string(a.size) + " cells, too short for "
                + std::to_string(a.tiles) + " tiles: untiled");
            a.tiles = 1;
            a.overlap = 0;
        } else if (a.tiles > 1 && a.overlap > a.size - a.tiles) {
            layout.notes.push_back("latent " + std::string(a.name) + " is " + std::to_string(a.size) + " cells: overlap "
                + std::to_string(a.overlap) + " clamped to " + std::to_string(a.size - a.tiles));
            a.overlap = a.size - a.tiles;
        }
    }
    std::vector<std::int64_t> cells{0};
    for (const auto seam : frameSeams)
        if (seam > 0 && seam < frames - 1)
            cells.push_back(seam);
    const bool cut = axes[0].tiles > 1 && cells.size() > 1;
    std::vector<DfrSpan> frameSpans;
    if (cut) {
        cells.push_back(frames - 1);
        frameSpans = splitAtSeams(cells, axes[0].tiles, axes[0].overlap);
    } else {
        if (!frameSeams.empty() && axes[0].tiles > 1)
            layout.notes.push_back("no seam inside the " + std::to_string(frames) + " latent frames: frame tiles blended, not cut");
        frameSpans = splitByCount(frames, axes[0].tiles, axes[0].overlap);
    }
    const auto heightSpans = splitByCount(height, axes[1].tiles, axes[1].overlap);
    const auto widthSpans = splitByCount(width, axes[2].tiles, axes[2].overlap);
    for (const auto& f : frameSpans)
        for (const auto& h : heightSpans)
            for (const auto& w : widthSpans)
                layout.tiles.push_back({f, h, w,
                    spanMask(f, cut).view({-1, 1, 1}) * spanMask(h, false).view({1, -1, 1}) * spanMask(w, false).view({1, 1, -1})});
    return layout;
}

Result<std::vector<DfrTokenPlan>> dfrTokenPlan(
    const std::vector<DfrEpilogueTile>& tiles, const at::Tensor& coords, std::int64_t frames, std::int64_t height, std::int64_t width)
{
    const auto perFrame = height * width, base = frames * perFrame;
    if (!coords.defined() || coords.dim() != 4 || coords.size(0) != 1 || coords.size(1) != 3 || coords.size(3) != 2
        || coords.size(2) < base)
        return makeError(ErrorCode::InvalidArgument, "a DFR token plan needs [1, 3, tokens, 2] coordinates, the grid's first");
    if (tiles.empty())
        return makeError(ErrorCode::InvalidArgument, "a DFR token plan needs at least one tile");
    const auto device = coords.device();
    const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
    const auto appended = coords.narrow(2, base, coords.size(2) - base);
    std::vector<at::Tensor> grids, starts, kept;
    for (const auto& t : tiles) {
        if (t.frames.start < 0 || t.frames.end > frames || t.heights.start < 0 || t.heights.end > height || t.widths.start < 0
            || t.widths.end > width || t.frames.end <= t.frames.start || t.heights.end <= t.heights.start || t.widths.end <= t.widths.start)
            return makeError(ErrorCode::InvalidArgument, "an epilogue tile lies outside the latent grid");
        const auto grid = (at::arange(t.frames.start, t.frames.end, longs).view({-1, 1, 1}) * perFrame
            + at::arange(t.heights.start, t.heights.end, longs).view({1, -1, 1}) * width
            + at::arange(t.widths.start, t.widths.end, longs).view({1, 1, -1}))
                              .reshape({-1});
        // The window's bounds read off the tokens it owns, so they follow the grid's coordinates.
        const auto own = coords.index_select(2, grid);
        const auto first = own.select(3, 0).amin(2), last = own.select(3, 1).amax(2);  // [1, 3]
        const auto overlaps = appended.select(3, 0).lt(last.unsqueeze(-1)).logical_and(appended.select(3, 1).gt(first.unsqueeze(-1)));
        kept.push_back(overlaps.all(1).any(0));
        grids.push_back(grid);
        starts.push_back(first);
    }
    const auto keepers = at::stack(kept).sum(0);
    if (keepers.numel() > 0 && !keepers.gt(0).all().item<bool>()) {
        const auto lost = keepers.eq(0).nonzero().squeeze(1);
        return makeError(ErrorCode::InvalidArgument,
            std::to_string(lost.numel()) + " appended tokens (the first at " + std::to_string(base + lost[0].item<std::int64_t>())
                + ") fall outside every epilogue tile: their positions lie off the canvas");
    }
    std::vector<DfrTokenPlan> plan;
    for (std::size_t i = 0; i < tiles.size(); ++i) {
        const auto extra = kept[i].nonzero().squeeze(1) + base;
        DfrTokenPlan p;
        p.keep = at::cat({grids[i], extra});
        p.weights = at::cat({tiles[i].weight.reshape({-1}).to(device), 1.0 / keepers.masked_select(kept[i]).to(at::kFloat)});
        p.coords = coords.index_select(2, p.keep) - starts[i].view({1, 3, 1, 1});
        plan.push_back(std::move(p));
    }
    return plan;
}

at::Tensor ancestralRfStep(
    const at::Tensor& x, const at::Tensor& x0, double sigma, double sigmaNext, double eta, const std::function<at::Tensor()>& noise)
{
    // float32 scalars, as the scheduler keeps its sigmas.
    const auto s = static_cast<float>(sigma), sn = static_cast<float>(sigmaNext);
    if (std::abs(sn) < 1e-8f)
        return x0.to(at::kFloat);
    const float down = sn * (1.0f + (sn / s - 1.0f) * static_cast<float>(eta));
    const float alphaNext = 1.0f - sn, alphaDown = 1.0f - down;
    const float ratio = down / s;
    auto out = x.to(at::kFloat) * ratio + x0.to(at::kFloat) * (1.0f - ratio);
    if (eta > 0.0) {
        const float renoise = std::sqrt(std::max(0.0f, sn * sn - down * down * (alphaNext * alphaNext) / (alphaDown * alphaDown + 1e-12f)));
        out = out * (alphaNext / (alphaDown + 1e-12f)) + noise().to(out.options()) * renoise;
    }
    return out;
}

Res2sCoefficients res2sCoefficients(double h)
{
    // phi_j(z) = (e^z - sum_{k<j} z^k / k!) / z^j, 1 / j! near 0 (res2s.py phi).
    const auto phi = [](int j, double z) {
        if (std::abs(z) < 1e-10)
            return j == 1 ? 1.0 : 0.5;
        double remainder = 0, term = 1;
        for (int k = 0; k < j; ++k) {
            remainder += term;
            term *= z / (k + 1);
        }
        return (std::exp(z) - remainder) / std::pow(z, j);
    };
    constexpr double c2 = 0.5;
    Res2sCoefficients c;
    c.a21 = c2 * phi(1, -h * c2);
    c.b2 = phi(2, -h) / c2;
    c.b1 = phi(1, -h) - c.b2;
    return c;
}

at::Tensor res2sSdeStep(
    const at::Tensor& sample, const at::Tensor& target, double sigma, double sigmaNext, const at::Tensor& noise, bool float32Sigmas)
{
    // get_sde_coeff with sigma_up = sigmaNext / 2 (never clamped: below 0.9999 sigmaNext).
    double up = 0, alpha = 0, down = 0, s = sigma, sn = sigmaNext;
    if (float32Sigmas) {
        const float fs = static_cast<float>(sigma), fsn = static_cast<float>(sigmaNext), fup = fsn * 0.5f;
        const float residual = std::sqrt(std::max(fsn * fsn - fup * fup, 0.0f));
        const float falpha = (1.0f - fsn) + residual;
        up = fup;
        alpha = falpha;
        down = residual / falpha;
        s = fs;
        sn = fsn;
    } else {
        up = sn * 0.5;
        const double residual = std::sqrt(std::max(sn * sn - up * up, 0.0));
        alpha = (1.0 - sn) + residual;
        down = residual / alpha;
    }
    if (up == 0 || sn == 0)
        return target;
    const double span = float32Sigmas ? static_cast<double>(static_cast<float>(s) - static_cast<float>(sn)) : s - sn;
    const auto eps = (sample - target) / span;
    const auto x0 = sample - s * eps;
    return alpha * (x0 + down * eps) + up * noise;
}

Ltx2Pipeline::Ltx2Pipeline(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Ltx2Pipeline::~Ltx2Pipeline() = default;
Ltx2Pipeline::Ltx2Pipeline(Ltx2Pipeline&&) noexcept = default;
Ltx2Pipeline& Ltx2Pipeline::operator=(Ltx2Pipeline&&) noexcept = default;

bool Ltx2Pipeline::hasVaeDecoder() const
{
    return m_impl->vaeDecoder;
}

bool Ltx2Pipeline::hasDiffusionDecoder() const
{
    return m_impl->noDiffusionDecoder.empty();
}

bool Ltx2Pipeline::hasDurationHead() const
{
    return m_impl->noDurationHead.empty();
}

bool Ltx2Pipeline::hasPromptEnhancer() const
{
    return m_impl->enhancerPath.has_value() || m_impl->selfEnhancer;
}

std::string Ltx2Pipeline::version() const
{
    return m_impl->transformerConfig.version();
}

std::pair<std::string, std::string> Ltx2Pipeline::trainedFor() const
{
    auto t = m_impl->weights.trainedFor();
    return {t.schedule, t.evidence};
}

std::vector<std::filesystem::path> Ltx2Pipeline::files() const
{
    auto out = m_impl->options.modelPaths;
    out.push_back(m_impl->textEncoderPath);
    // The latent upsamplers change the output: each is named by its own files, unless it is
    // inside a model folder already listed (a diffusers folder's latent_upsampler/).
    for (const auto& up : {m_impl->options.spatialUpsamplerPath, m_impl->options.temporalUpsamplerPath}) {
        if (!up)
            continue;
        const auto given = up->lexically_normal().string();
        const bool inside = std::any_of(out.begin(), out.end(), [&](const std::filesystem::path& p) {
            const auto folder = p.lexically_normal().string();
            return given.size() > folder.size() && given.compare(0, folder.size(), folder) == 0 && given[folder.size()] == '/';
        });
        if (!inside)
            out.push_back(*up);
    }
    return out;
}

Result<std::string> Ltx2Pipeline::inspectLora(const std::filesystem::path& file, bool asJson) const
{
    try {
        auto report = lora::inspect(file, m_impl->loraTargets());
        if (!report)
            return report.error();
        return asJson ? report->toJson() : report->toText();
    } catch (const std::exception& e) {
        return errorFromException(e, file.string());
    }
}

Result<std::vector<Ltx2LoraOutcome>> Ltx2Pipeline::applyLoras(const std::vector<Ltx2Lora>& loras)
{
    try {
        m_impl->loadTransformer({});
        return m_impl->applyLoras(loras);
    } catch (const std::exception& e) {
        return errorFromException(e, "applying LoRAs");
    }
}

std::map<std::string, int> Ltx2Pipeline::matmulPaths() const
{
    return m_impl->transformer ? m_impl->transformer->matmulPaths() : std::map<std::string, int>{};
}

const std::vector<std::string>& Ltx2Pipeline::openWarnings() const
{
    return m_impl->openWarnings;
}

std::map<std::string, std::int64_t> Ltx2Pipeline::componentBytes() const
{
    std::map<std::string, std::int64_t> out;
    const auto& m = *m_impl;
    if (m.textEncoder)
        out["text_encoder"] = m.textEncoder->residentBytes();
    if (m.connectors)
        out["connectors"] = m.connectors->residentBytes();
    if (m.transformer)
        out["transformer"] = m.transformer->residentBytes();
    if (m.videoDecoder)
        out["video_vae"] = m.videoDecoder->residentBytes();
    if (m.diffusionDecoder)
        out["diffusion_decoder"] = m.diffusionDecoder->residentBytes();
    if (m.audioDecoder)
        out["audio_vae"] = m.audioDecoder->residentBytes();
    if (m.vocoder)
        out["vocoder"] = m.vocoder->residentBytes();
    if (m.videoEncoder)
        out["video_encoder"] = m.videoEncoder->residentBytes();
    if (m.audioEncoder)
        out["audio_encoder"] = m.audioEncoder->residentBytes();
    if (m.upsampler)
        out["spatial_upsampler"] = m.upsampler->residentBytes();
    if (m.temporalUpsampler)
        out["temporal_upsampler"] = m.temporalUpsampler->residentBytes();
    return out;
}

Result<Ltx2Pipeline> Ltx2Pipeline::open(const Ltx2PipelineOptions& options)
{
    // Lightricks' single text encoder file, given as the text encoder or among the model's files:
    // its text projection is read with the model's weights.
    std::optional<std::filesystem::path> textFile;
    std::optional<std::string> textFileConfig;
    if (options.textEncoderPath)
        if ((textFileConfig = gemmaFileConfig(*options.textEncoderPath)))
            textFile = *options.textEncoderPath;
    for (const auto& p : options.modelPaths)
        if (!textFile)
            if ((textFileConfig = gemmaFileConfig(p)))
                textFile = p;
    auto paths = options.modelPaths;
    if (textFile && std::find(paths.begin(), paths.end(), *textFile) == paths.end())
        paths.push_back(*textFile);
    auto weights = ltx2::Ltx2Weights::open(paths);
    if (!weights)
        return weights.error();
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->weights = std::move(*weights);
    impl->textEncoderFile = textFile.has_value();
    const auto& w = impl->weights;
    // Every component must be there before anything loads: a partial pipeline never runs.
    std::vector<std::string> missing;
    auto transformer = ltx2::resolveTransformerConfig(w, std::nullopt);
    if (!transformer)
        missing.push_back("transformer (" + transformer.error().message + ")");
    // The text encoder decides what the connectors read (its width and hidden-state count).
    if (textFile) {
        impl->textEncoderPath = *textFile;
    } else if (options.textEncoderPath) {
        impl->textEncoderPath = *options.textEncoderPath;
    } else {
        for (const auto& p : options.modelPaths)
            if (isDir(p / "text_encoder"))
                impl->textEncoderPath = p / "text_encoder";
    }
    std::optional<ltx2::TextFeatures> textFeatures;
    std::optional<gemma3::Family> textFamily;
    std::optional<std::string> textConfig;
    std::string textConfigName;
    if (textFileConfig) {
        textConfigName = textFile->filename().string() + " (gemma_config)";
        if (auto tc = gemma3::parseTextConfig(*textFileConfig, textConfigName)) {
            textFeatures = ltx2::TextFeatures{tc->hiddenSize, tc->layers + 1};
            textFamily = tc->family;
            textConfig = *textFileConfig;
        } else {
            return tc.error();
        }
    } else if (!impl->textEncoderPath.empty()) {
        std::ifstream in(impl->textEncoderPath / "config.json");
        std::ostringstream text;
        text << in.rdbuf();
        textConfigName = (impl->textEncoderPath / "config.json").string();
        if (in)
            if (auto tc = gemma3::parseTextConfig(text.str(), textConfigName)) {
                textFeatures = ltx2::TextFeatures{tc->hiddenSize, tc->layers + 1};
                textFamily = tc->family;
                textConfig = text.str();
            }
    }
    // Where Lightricks stamped the transformer file, its Gemma version decides the pairing.
    if (textConfig) {
        const auto source = w.metadata(ltx2::Part::Transformer, "gemma_source_checkpoint");
        const auto version = w.metadata(ltx2::Part::Transformer, "model_version");
        if (source || version) {
            const ltx2::GemmaStamp stamp{source ? std::optional(source->value) : std::nullopt,
                version ? std::optional(version->value) : std::nullopt, source ? source->file : version->file};
            auto checked = ltx2::checkGemmaVersion(stamp, *textConfig, textConfigName);
            if (!checked)
                return checked.error();
            if (!checked->empty()) {
                log::warn("LTX-2: " + *checked);
                impl->openWarnings.push_back(*checked);
            }
        }
    }
    // LTX-2.5 was trained on Gemma 4's states and 2.0 / 2.3 on Gemma 3's; both are 3840 x 49
    // wide at 12B, so a swapped encoder would load and run, and make nonsense.
    if (transformer && textFamily) {
        const bool wantsGemma4 = transformer->keyframesAbsPosEmbedding;
        if (wantsGemma4 != (*textFamily == gemma3::Family::Gemma4))
            return makeError(ErrorCode::InvalidArgument,
                impl->textEncoderPath.string() + " is a " + (wantsGemma4 ? "Gemma 3" : "Gemma 4") + " text encoder, and LTX-"
                    + transformer->version() + " reads its prompt with " + (wantsGemma4 ? "Gemma 4" : "Gemma 3")
                    + "; give the text encoder published with this model");
    }
    impl->textFeatures = textFeatures;
    // Lightricks publishes LTX-2.5 one file per component (their transformer file stamped with
    // model_version): a missing part is named with the file that holds it.
    const bool lightricks25 = transformer && transformer->keyframesAbsPosEmbedding && w.metadata(ltx2::Part::Transformer, "model_version");
    const auto inFile = [&](const std::string& what, const char* file) {
        return lightricks25 ? what + "; Lightricks/LTX-2.5 has it in " + file : what;
    };
    if (auto c = ltx2::resolveConnectorConfig(w, std::nullopt, textFeatures); !c)
        missing.push_back(
            inFile("text connectors (" + c.error().message + ")", "text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors"));
    // A video decoder: the VAE's, or LTX-2.5's diffusion decoder (a damaged one is named, never
    // passed over for the other).
    impl->noDiffusionDecoder = ltx2::diffusionDecoderProblem(w);
    const bool diffusionDecoder = impl->noDiffusionDecoder.empty();
    if (!diffusionDecoder && !w.tensors(ltx2::Part::DiffusionDecoder).empty())
        missing.push_back("diffusion video decoder (" + impl->noDiffusionDecoder + ")");
    if (diffusionDecoder && transformer) {
        // Another model's decoder would load and decode nonsense: its latent space must be this one's.
        const auto c = ltx2::resolveDiffusionDecoderConfig(w);
        if (c->latentChannels != transformer->inChannels || c->temporalRatio != transformer->vaeScaleFactors[0]
            || c->spatialRatio != transformer->vaeScaleFactors[1])
            return makeError(ErrorCode::InvalidArgument,
                w.describeFiles() + ": the diffusion video decoder reads " + std::to_string(c->latentChannels) + "-channel latents at "
                    + std::to_string(c->temporalRatio) + " frames and " + std::to_string(c->spatialRatio)
                    + " px per cell, and this model makes " + std::to_string(transformer->inChannels) + "-channel ones at "
                    + std::to_string(transformer->vaeScaleFactors[0]) + " and " + std::to_string(transformer->vaeScaleFactors[1])
                    + "; give the decoder published with this model");
    }
    if (auto v = ltx2::resolveVideoVaeConfig(w, std::nullopt); v) {
        impl->vaeScaling = v->scalingFactor;
    } else {
        impl->vaeDecoder = false;
        if (!diffusionDecoder)
            missing.push_back(inFile("video VAE (" + v.error().message + ")",
                "vae/ltx-2.5-video-vae-bf16.safetensors (or vae/ltx-2.5-video-vae-conv-bf16.safetensors)"));
    }
    auto audio = ltx2::resolveAudioVaeConfig(w, std::nullopt);
    if (!audio)
        missing.push_back(inFile("audio VAE (" + audio.error().message + ")", "vae/ltx-2.5-audio-vae-bf16.safetensors"));
    if (auto v = ltx2::resolveVocoderConfig(w, std::nullopt); !v)
        missing.push_back(inFile("vocoder (" + v.error().message + ")", "vae/ltx-2.5-audio-vae-bf16.safetensors"));
    if (impl->textEncoderPath.empty() || (!isDir(impl->textEncoderPath) && !textFile))
        missing.push_back(std::string(transformer && transformer->keyframesAbsPosEmbedding ? "Gemma 4" : "Gemma 3")
            + " text encoder (give its folder, or Lightricks' single file such as gemma4-12b-with-proj-ltx-2.5-bf16.safetensors; a "
              "diffusers folder has it in text_encoder/)");
    // An upsampler of the wrong kind is not a missing part: it is there, and named for what it is.
    std::optional<std::string> wrongUpsampler;
    if (options.spatialUpsamplerPath) {
        const auto file = options.spatialUpsamplerPath->filename().string();
        auto up = ltx2::probeLatentUpsampler(*options.spatialUpsamplerPath);
        if (!up)
            missing.push_back("spatial upsampler (" + up.error().message + ")");
        else if (transformer && up->inChannels != transformer->inChannels)
            wrongUpsampler = file + " is a latent upsampler for " + std::to_string(up->inChannels) + " latent channels, and this model has "
                + std::to_string(transformer->inChannels) + ": it belongs to another model; give the upsampler published with this one";
        else if (!up->spatialUpsample || up->temporalUpsample || (up->useRationalResampler && up->rationalSpatialScale != 2.0))
            // The two-stage path halves the size for stage 1: only an x2 spatial upsampler brings it back.
            wrongUpsampler = file + " is a " + ltx2::describeLatentUpsampler(*up)
                + " latent upsampler; the two-stage path needs an x2 "
                  "spatial upsampler (such as ltx-2.3-spatial-upscaler-x2-1.1.safetensors), or run in a single stage";
    }
    if (options.temporalUpsamplerPath) {
        const auto file = options.temporalUpsamplerPath->filename().string();
        auto up = ltx2::probeLatentUpsampler(*options.temporalUpsamplerPath);
        if (!up)
            missing.push_back("temporal upsampler (" + up.error().message + ")");
        else if (transformer && up->inChannels != transformer->inChannels)
            wrongUpsampler = file + " is a latent upsampler for " + std::to_string(up->inChannels) + " latent channels, and this model has "
                + std::to_string(transformer->inChannels) + ": it belongs to another model; give the upsampler published with this one";
        else if (up->spatialUpsample || !up->temporalUpsample)
            // A round doubles the frames at the same size.
            wrongUpsampler = file + " is a " + ltx2::describeLatentUpsampler(*up)
                + " latent upsampler; the temporal refine rounds need a temporal x2 upsampler (such as "
                  "ltx-2.3-temporal-upscaler-x2-1.0.safetensors)";
    }
    if (!missing.empty()) {
        std::string text;
        for (const auto& m : missing)
            text += "\n  - " + m;
        return makeError(ErrorCode::NotFound, w.describeFiles() + ": the LTX-2 pipeline is incomplete; missing:" + text);
    }
    if (wrongUpsampler)
        return makeError(ErrorCode::Unsupported, *wrongUpsampler);
    impl->transformerConfig = *transformer;
    impl->audioConfig = *audio;
    // The duration head is optional: without it (or with a broken one) only a given length runs.
    impl->noDurationHead = ltx2::durationHeadProblem(w);
    // So is the prompt enhancer: the one given, else a diffusers folder's prompt_enhancer/.
    if (options.promptEnhancerPath) {
        std::error_code ec;
        if (!ltx2::PromptEnhancer::present(*options.promptEnhancerPath)
            && !std::filesystem::is_regular_file(*options.promptEnhancerPath / "config.json", ec))
            return makeError(ErrorCode::NotFound,
                options.promptEnhancerPath->string()
                    + ": is not a prompt enhancer (a diffusers folder with prompt_enhancer/, or a Gemma 4 instruct model folder with "
                      "config.json and tokenizer.json)");
        impl->enhancerPath = *options.promptEnhancerPath;
    } else {
        for (const auto& p : options.modelPaths)
            if (ltx2::PromptEnhancer::present(p)) {
                impl->enhancerPath = p;
                break;
            }
    }
    // LTX-2.0/2.3 ship none: their Gemma 3, an instruct model, writes the prompt (ltx-core's
    // enhance_t2v; diffusers' enhance_prompt without a prompt_enhancer). LTX-2.5's encoder is not
    // trained to write.
    impl->selfEnhancer = !impl->enhancerPath && transformer && !transformer->keyframesAbsPosEmbedding
        && textFamily.value_or(gemma3::Family::Gemma3) == gemma3::Family::Gemma3;
    return Ltx2Pipeline(std::move(impl));
}

// The request's sizes, conditions and path, before any heavy work.
void Ltx2Pipeline::Impl::checkRequest(const Ltx2Request& req) const
{
    if (req.width % 32 || req.height % 32 || req.width <= 0 || req.height <= 0)
        throw makeError(ErrorCode::InvalidArgument,
            "width and height must be positive multiples of 32, got " + std::to_string(req.width) + "x" + std::to_string(req.height));
    const bool autoLength = req.frames == 0;
    if (autoLength && !req.audio && !noDurationHead.empty())
        throw makeError(ErrorCode::InvalidArgument, "the length cannot be left on auto: " + noDurationHead + "; give the frames");
    if (!autoLength && (req.frames < 1 || (req.frames - 1) % 8))
        throw makeError(ErrorCode::InvalidArgument, "frames must be 8k + 1 (1, 9, 17, ..., 121), got " + std::to_string(req.frames));
    if (!(req.fps > 0))
        throw makeError(ErrorCode::InvalidArgument, "fps must be positive");

    // A length left on auto holds at least one latent frame: first-frame conditions only.
    const std::int64_t latentFrames = autoLength ? 1 : (req.frames - 1) / 8 + 1;
    for (std::size_t i = 0; i < req.conditions.size(); ++i) {
        const auto& c = req.conditions[i];
        const auto name = "condition " + std::to_string(i + 1);
        if (!c.pixels.defined() || c.pixels.dim() != 4 || c.pixels.size(3) != 3 || c.pixels.scalar_type() != at::kByte)
            throw makeError(ErrorCode::InvalidArgument, name + ": pixels must be uint8 [frames, height, width, 3]");
        if (c.pixels.size(1) != req.height || c.pixels.size(2) != req.width)
            throw makeError(ErrorCode::InvalidArgument,
                name + " is " + std::to_string(c.pixels.size(2)) + "x" + std::to_string(c.pixels.size(1)) + ", the video "
                    + std::to_string(req.width) + "x" + std::to_string(req.height) + "; fit it to the video's size first");
        if (c.pixels.size(0) < 1 || (c.pixels.size(0) - 1) % 8)
            throw makeError(ErrorCode::InvalidArgument, name + ": a clip must have 8k + 1 frames, got " + std::to_string(c.pixels.size(0)));
        if (c.latentIndex < 0 || c.latentIndex >= latentFrames)
            throw makeError(ErrorCode::InvalidArgument,
                autoLength ? name + ": a keyframe after frame 0 needs a set length (auto picks it from the prompt)"
                           : name + ": latent index " + std::to_string(c.latentIndex) + " is outside the clip's "
                        + std::to_string(latentFrames) + " latent frames");
        if (!(c.strength >= 0.0 && c.strength <= 1.0))
            throw makeError(ErrorCode::InvalidArgument, name + ": strength must be in [0, 1]");
    }
    if (req.audio) {
        const auto& a = *req.audio;
        if (!a.waveform.defined() || a.waveform.dim() != 2 || a.waveform.size(0) < 1 || a.waveform.size(0) > 2
            || !at::isFloatingType(a.waveform.scalar_type()))
            throw makeError(ErrorCode::InvalidArgument, "the audio must be float samples [channels, samples], one or two channels");
        if (a.sampleRate < 1000 || a.sampleRate > 768000)
            throw makeError(
                ErrorCode::InvalidArgument, "the audio's sample rate must be 1 to 768 kHz, got " + std::to_string(a.sampleRate));
        if (a.waveform.size(1) < 1)
            throw makeError(ErrorCode::InvalidArgument, "the audio holds no samples");
        if (!autoLength && req.frames < 9)
            throw makeError(ErrorCode::InvalidArgument,
                "audio-to-video makes a clip of at least 9 frames (the sound needs the time), got " + std::to_string(req.frames));
        if (!at::isfinite(a.waveform).all().item<bool>())
            throw makeError(ErrorCode::InvalidArgument, "the audio holds samples that are not finite numbers");
    }
    if (req.audioPrefix) {
        const auto& a = req.audioPrefix->waveform;
        if (req.audio || req.retake)
            throw makeError(ErrorCode::InvalidArgument,
                "a sound to continue goes with an extension, not with a sound to follow or a retake (they hold the whole sound)");
        if (!a.defined() || a.dim() != 2 || a.size(0) < 1 || a.size(0) > 2 || a.size(1) < 1 || !at::isFloatingType(a.scalar_type())
            || req.audioPrefix->sampleRate < 1000 || req.audioPrefix->sampleRate > 768000 || !at::isfinite(a).all().item<bool>())
            throw makeError(
                ErrorCode::InvalidArgument, "the sound to continue must be finite float samples [channels, samples] at 1 to 768 kHz");
    }
    if (req.retake) {
        const auto& r = *req.retake;
        if (autoLength)
            throw makeError(ErrorCode::InvalidArgument, "a retake keeps the clip's length: give its frames");
        if (!r.pixels.defined() || r.pixels.dim() != 4 || r.pixels.scalar_type() != at::kByte || r.pixels.size(0) != req.frames
            || r.pixels.size(1) != req.height || r.pixels.size(2) != req.width || r.pixels.size(3) != 3)
            throw makeError(ErrorCode::InvalidArgument,
                "the clip to retake must be uint8 [" + std::to_string(req.frames) + ", " + std::to_string(req.height) + ", "
                    + std::to_string(req.width) + ", 3]: the request's frames and size");
        const double seconds = static_cast<double>(req.frames) / req.fps;
        if (!(r.start >= 0.0 && r.end > r.start && r.start < seconds))
            throw makeError(ErrorCode::InvalidArgument,
                "the retake window must start before it ends, inside the clip's " + std::to_string(seconds).substr(0, 5) + " s");
        if (!r.video && !r.audio)
            throw makeError(ErrorCode::InvalidArgument, "a retake makes the video, the sound or both again");
        if (!req.conditions.empty() || req.audio || req.twoStage || req.dfr || req.temporalRounds > 0)
            throw makeError(ErrorCode::InvalidArgument,
                "a retake is one pass over the clip: no conditions, sound to follow, second stage or DFR recipe");
        if (r.sound) {
            const auto& a = r.sound->waveform;
            if (!a.defined() || a.dim() != 2 || a.size(0) < 1 || a.size(0) > 2 || a.size(1) < 1 || !at::isFloatingType(a.scalar_type())
                || r.sound->sampleRate < 1000 || r.sound->sampleRate > 768000 || !at::isfinite(a).all().item<bool>())
                throw makeError(
                    ErrorCode::InvalidArgument, "the clip's sound must be finite float samples [channels, samples] at 1 to 768 kHz");
        }
    }
    if (req.videoDecode == Ltx2VideoDecode::Diffusion && !noDiffusionDecoder.empty())
        throw makeError(ErrorCode::InvalidArgument, "video_decoder: " + noDiffusionDecoder + "; decode with the VAE");
    if (!req.references.empty() || req.icLora) {
        if (req.dfr || req.retake)
            throw makeError(ErrorCode::InvalidArgument,
                "IC-LoRA references condition LTX-2's own passes, not a retake or LTX-2.5's DFR recipe (whose detailing LoRA takes "
                "stage 1 as its reference)");
        if (req.references.size() > 8)
            throw makeError(ErrorCode::InvalidArgument, "at most 8 reference clips, got " + std::to_string(req.references.size()));
        if (req.referenceDownscale < 1 || req.referenceDownscale > 16)
            throw makeError(ErrorCode::InvalidArgument,
                "the reference downscale factor must be 1 to 16, got " + std::to_string(req.referenceDownscale));
        if (!(req.referenceAttention >= 0.0 && req.referenceAttention <= 1.0))
            throw makeError(ErrorCode::InvalidArgument, "the reference attention strength must be in [0, 1]");
        // The reference is encoded at the first pass's size / s: a whole number of latent cells.
        const auto unit = 32 * req.referenceDownscale;
        const auto passW = req.twoStage ? req.width / 2 : req.width, passH = req.twoStage ? req.height / 2 : req.height;
        if (!req.references.empty() && (passW % unit || passH % unit))
            throw makeError(ErrorCode::InvalidArgument,
                "the reference clip is made at 1/" + std::to_string(req.referenceDownscale) + " of the "
                    + (req.twoStage ? "first stage's " : "") + "size " + std::to_string(passW) + "x" + std::to_string(passH)
                    + ": that size must be a multiple of " + std::to_string(unit) + " (32 x the LoRA's reference_downscale_factor)");
        for (std::size_t i = 0; i < req.references.size(); ++i) {
            const auto& r = req.references[i];
            const auto name = "reference clip " + std::to_string(i + 1);
            if (!r.pixels.defined() || r.pixels.dim() != 4 || r.pixels.size(3) != 3 || r.pixels.scalar_type() != at::kByte
                || r.pixels.size(0) < 1 || r.pixels.size(1) < 1 || r.pixels.size(2) < 1)
                throw makeError(ErrorCode::InvalidArgument, name + ": pixels must be uint8 [frames, height, width, 3]");
            if (!(r.strength >= 0.0 && r.strength <= 1.0))
                throw makeError(ErrorCode::InvalidArgument, name + ": strength must be in [0, 1]");
        }
    }
    if (req.videoDecode == Ltx2VideoDecode::Vae && !vaeDecoder)
        throw makeError(ErrorCode::InvalidArgument,
            "video_decoder: these files carry only LTX-2.5's diffusion video decoder, not the VAE's; decode with the diffusion decoder "
            "or give the VAE file (ltx-2.5-video-vae-conv-bf16.safetensors)");
    if (!req.dfr && (req.detailingLora || req.detailingReference))
        throw makeError(ErrorCode::InvalidArgument, "the detailing IC-LoRA is LTX-2.5's DFR recipe's (its second pass)");
    if (req.dfr) {
        if (!transformerConfig.keyframesAbsPosEmbedding)
            throw makeError(ErrorCode::InvalidArgument,
                "the DFR pass is LTX-2.5's (its transformer marks the keyframe slots); this is LTX-" + transformerConfig.version());
        if (req.frames < 9 && !autoLength)
            throw makeError(ErrorCode::InvalidArgument, "the DFR pass needs at least 9 frames, got " + std::to_string(req.frames));
        if (anyGuidance(req) || (req.schedule != Ltx2Schedule::Distilled && !req.sigmas))
            throw makeError(
                ErrorCode::InvalidArgument, "the DFR pass runs the distilled schedule, without guidance (CFG, STG or modality)");
        if (req.twoStage && req.dfrStart)
            throw makeError(ErrorCode::InvalidArgument, "a DFR start state is the second stage's; it takes no stage of its own");
        if ((req.detailingLora || req.detailingReference) && !req.twoStage)
            throw makeError(ErrorCode::InvalidArgument,
                "the detailing IC-LoRA details the two-pass DFR recipe's second pass; this run has one pass (give a spatial upsampler)");
    } else if (req.dfrStart) {
        throw makeError(ErrorCode::InvalidArgument, "a DFR start state was given to a request that is not a DFR pass");
    }
    if (req.temporalRounds < 0 || req.temporalRounds > 2)
        throw makeError(ErrorCode::InvalidArgument, "temporal refine rounds are 0, 1 or 2, got " + std::to_string(req.temporalRounds));
    if (req.temporalRounds > 0) {
        if (!req.dfr)
            throw makeError(ErrorCode::InvalidArgument, "temporal refine rounds follow LTX-2.5's DFR pass; this request is not one");
        if (!options.temporalUpsamplerPath)
            throw makeError(
                ErrorCode::InvalidArgument, "temporal refine rounds need the temporal x2 latent upsampler; none was given with the model");
    }
    if (req.dfrEpilogue) {
        if (!req.dfr || !req.twoStage)
            throw makeError(ErrorCode::InvalidArgument,
                "the third spatial stage follows LTX-2.5's two-pass DFR recipe; this request is not one (give the spatial upsampler)");
        if (req.width % 128 || req.height % 128)
            throw makeError(ErrorCode::InvalidArgument,
                "with a third spatial stage the first runs at a quarter of the size: width and height must be multiples of 128 (4K is "
                "3840x2176), got "
                    + std::to_string(req.width) + "x" + std::to_string(req.height));
    }
    if (req.fast && (!req.twoStage || req.dfr || req.schedule != Ltx2Schedule::Distilled || req.sigmas || anyGuidance(req)))
        throw makeError(ErrorCode::InvalidArgument,
            "the Fast recipe is ltx-pipelines' distilled two-stage pipeline: two stages on the distilled schedule, without guidance or "
            "DFR; this request is not one");
    if (req.twoStage) {
        if (!options.spatialUpsamplerPath)
            throw makeError(ErrorCode::InvalidArgument, "the two-stage path needs the spatial upsampler; none was given with the model");
        if (req.width % 64 || req.height % 64)
            throw makeError(ErrorCode::InvalidArgument,
                "the two-stage path runs stage 1 at half size: width and height must be multiples of 64, got " + std::to_string(req.width)
                    + "x" + std::to_string(req.height));
        const bool devRecipe = req.schedule == Ltx2Schedule::Dev && req.distilledLora;
        if (req.sigmas || (req.schedule != Ltx2Schedule::Distilled && !devRecipe) || (!devRecipe && anyGuidance(req)))
            throw makeError(ErrorCode::InvalidArgument,
                req.schedule == Ltx2Schedule::Dev && !req.sigmas
                    ? "the dev model's two-stage recipe needs the distilled LoRA for its second stage; give it, or run one stage"
                    : "the two-stage path runs the distilled schedule without guidance, or the dev schedule with the distilled LoRA "
                      "(Lightricks' dev recipe); explicit sigmas are not taken");
    }
    if (req.sampler == Ltx2Sampler::Res2s && !req.distilledLora)
        throw makeError(
            ErrorCode::InvalidArgument, "res2s is the HQ recipe's sampler: two stages on the dev schedule with the distilled LoRA");
    if (req.distilledLoraStage1Strength
        && (!req.distilledLora || !std::isfinite(*req.distilledLoraStage1Strength) || std::abs(*req.distilledLoraStage1Strength) > 100))
        throw makeError(ErrorCode::InvalidArgument,
            "the distilled LoRA's stage-1 strength needs the distilled LoRA, and a strength between -100 and 100");
    if (req.distilledLora && !(req.twoStage && req.schedule == Ltx2Schedule::Dev && !req.dfr))
        throw makeError(ErrorCode::InvalidArgument,
            "the distilled LoRA is the second stage's of the dev two-stage recipe; this request is not one (two stages, dev schedule)");
    for (const auto& [name, value] : {std::pair{"stg_scale", req.stgScale}, std::pair{"audio_stg_scale", req.audioStgScale},
             std::pair{"modality_scale", req.modalityScale}, std::pair{"audio_modality_scale", req.audioModalityScale},
             std::pair{"guidance_rescale", req.guidanceRescale},
             std::pair{"audio_guidance_rescale", req.audioGuidanceRescale.value_or(0.0)}})
        if (!std::isfinite(value) || value < 0.0 || value > 100.0)
            throw makeError(ErrorCode::InvalidArgument, std::string(name) + " must be between 0 and 100, got " + std::to_string(value));
    if (stgRuns(req))
        for (const int b : stgBlocksFor(req))
            if (b < 0 || b >= transformerConfig.layers)
                throw makeError(ErrorCode::InvalidArgument,
                    "STG block " + std::to_string(b) + " is not a block of this model (0 to " + std::to_string(transformerConfig.layers - 1)
                        + "); give stg_block");
}

bool lightricksRules(const Ltx2Request& req)
{
    return req.twoStage && !req.dfr && (req.schedule == Ltx2Schedule::Dev || req.fast);
}

namespace {

// ltx-core's test for a neutral scale (math.isclose's default tolerance).
bool offNeutral(double scale, double neutral)
{
    return std::abs(scale - neutral) > 1e-9 * std::max(std::abs(scale), std::abs(neutral));
}

bool passOn(const Ltx2Request& req, double video, double audio, double neutral)
{
    if (lightricksRules(req))
        return offNeutral(video, neutral) || offNeutral(audio, neutral);
    return video > neutral || audio > neutral;
}

}  // namespace

bool cfgOn(const Ltx2Request& req)
{
    return passOn(req, req.guidanceScale, req.audioGuidanceScale, 1.0);
}

bool stgOn(const Ltx2Request& req)
{
    return passOn(req, req.stgScale, req.audioStgScale, 0.0);
}

bool modalityOn(const Ltx2Request& req)
{
    return passOn(req, req.modalityScale, req.audioModalityScale, 1.0);
}

std::vector<int> stgBlocksFor(const Ltx2Request& req, const ltx2::TransformerConfig& config)
{
    if (!req.stgBlocks.empty())
        return req.stgBlocks;
    return {config.version() == "2.0" ? 29 : 28};
}

bool stgRuns(const Ltx2Request& req, const ltx2::TransformerConfig& config)
{
    return stgOn(req) && (config.perturbedAttn || lightricksRules(req));
}

std::string describeGuidance(const Ltx2Request& req, const ltx2::TransformerConfig& config)
{
    const auto num = [](double v) {
        std::ostringstream s;
        s.precision(3);
        s << v;
        return s.str();
    };
    const auto pair = [&](double video, double audio) { return num(video) + " / " + num(audio); };
    std::vector<std::string> parts;
    if (cfgOn(req))
        parts.push_back("CFG " + pair(req.guidanceScale, req.audioGuidanceScale));
    if (stgRuns(req, config)) {
        std::string blocks;
        for (const int b : stgBlocksFor(req, config))
            blocks += (blocks.empty() ? "" : ", ") + std::to_string(b);
        std::string streams;
        if (lightricksRules(req) && (req.stgScale == 0.0) != (req.audioStgScale == 0.0))
            streams = req.stgScale == 0.0 ? " (audio only)" : " (video only)";
        parts.push_back("STG " + pair(req.stgScale, req.audioStgScale) + " on block " + blocks + streams);
    }
    if (modalityOn(req))
        parts.push_back("modality " + pair(req.modalityScale, req.audioModalityScale));
    const double audioRescale = req.audioGuidanceRescale.value_or(req.guidanceRescale);
    if (!parts.empty() && (req.guidanceRescale > 0 || audioRescale > 0))
        parts.push_back("rescale " + pair(req.guidanceRescale, audioRescale));
    std::string out = parts.empty() ? "none" : "";
    for (const auto& p : parts)
        out += (out.empty() ? "" : ", ") + p;
    if (stgOn(req) && !stgRuns(req, config))
        out += "; STG not run: this model has no perturbed attention path (diffusers builds LTX-2.0 without one, and its STG pass "
               "changes nothing)";
    return out;
}

// 1'. A length left on auto, from the duration head (LTX2DFRPipeline with num_frames None): its
// seconds for the positive prompt's connector outputs, made a frame count at the request's rate
// (1 to 20 s, on the 8k + 1 grid).
std::int64_t Ltx2Pipeline::Impl::predictFrames(Run& run, const ltx2::ConnectorOutputs& ctx)
{
    const auto start = Clock::now();
    if (!durationHead)
        durationHead = take(ltx2::DurationHead::load(weights, options.device, options.dtype));
    const auto last = ctx.video.size(0) - 1;
    const auto seconds =
        take(durationHead->seconds(ctx.video.narrow(0, last, 1), ctx.audio.narrow(0, last, 1))).to(at::kDouble).cpu().item<double>();
    if (!std::isfinite(seconds))
        throw makeError(ErrorCode::InvalidFormat, "the duration head predicted no length (" + std::to_string(seconds) + " s)");
    const auto predicted = ltx2::framesForSeconds(seconds, run.req.fps, transformerConfig.vaeScaleFactors[0]);
    run.out.predictedSeconds = seconds;
    run.out.predictedFrames = predicted.frames;
    run.out.predictionClamped = predicted.clamped || predicted.outsideBounds;
    run.timed("duration head", start);
    return predicted.frames;
}

std::int64_t Ltx2Pipeline::Impl::framesForAudio(Run& run) const
{
    const auto& audio = *run.req.audio;
    const double seconds = static_cast<double>(audio.waveform.size(1)) / audio.sampleRate;
    const double fps = run.req.fps;
    const auto ratio = static_cast<double>(transformerConfig.vaeScaleFactors[0]);
    const auto most = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::floor((kAutoLengthMaxSeconds * fps - 1) / ratio)));
    // The grid point at or after the sound's end (a hair of tolerance for a length that is one).
    auto k = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil((seconds * fps - 1) / ratio - 1e-9)));
    run.out.predictionClamped = k > most;
    k = std::min(k, most);
    const auto frames = k * static_cast<std::int64_t>(ratio) + 1;
    run.out.predictedSeconds = seconds;
    run.out.predictedFrames = frames;
    return frames;
}

// 1. Prompt -> Gemma hidden states -> connectors (the negative prompt first under guidance).
ltx2::ConnectorOutputs Ltx2Pipeline::Impl::encodePrompt(Run& run)
{
    const auto& req = run.req;
    const auto& progress = run.progress;
    const auto stop = run.stop;
    const bool cfg = guided(req);
    auto report = [&run](Ltx2Phase phase, std::int64_t done, std::int64_t total) { run.report(phase, done, total); };
    auto checkStop = [&run] { run.checkStop(); };
    auto timed = [&run](const char* name, Clock::time_point start) { run.timed(name, start); };
    auto start = Clock::now();
    loadText(progress);
    timed("load text encoder", start);
    start = Clock::now();
    report(Ltx2Phase::Encode, 0, 1);
    std::vector<std::string> prompts;
    if (cfg)
        prompts.push_back(text::stripPythonWhitespace(req.negativePrompt));
    prompts.push_back(text::stripPythonWhitespace(req.prompt));
    std::vector<at::Tensor> ids, masks;
    for (const auto& p : prompts) {
        const auto enc = take(tokenizer->encode(p, req.maxSequenceLength, true, true, true));
        ids.push_back(at::tensor(enc.ids, at::kLong).unsqueeze(0));
        masks.push_back(at::tensor(enc.attentionMask, at::kLong).unsqueeze(0));
    }
    const auto inputIds = at::cat(ids, 0).to(textDevice());
    const auto textMask = at::cat(masks, 0).to(textDevice());
    auto hidden = take(textEncoder->forward(inputIds, textMask, stop));  // [B, T, D, layers + 1]
    checkStop();
    const auto textStates = hidden.flatten(2, 3).to(options.device);
    const auto attentionMask = textMask.to(options.device);
    hidden = at::Tensor();
    auto ctx = take(connectors->forward(textStates, attentionMask));
    if (options.releaseTextEncoder) {
        textEncoder.reset();
        heap::releaseFreeMemory();
    }
    report(Ltx2Phase::Encode, 1, 1);
    timed("encode prompt", start);
    checkStop();
    return ctx;
}

// 2. Stage 1's start state, seeded like torch.randn with a CPU generator (video first, then
// keyframe tokens, then audio), packed as the pipeline packs them, with its schedule (3.) and
// the conditions in place.
Ltx2Pipeline::Impl::Pass Ltx2Pipeline::Impl::startPass(Run& run, at::Generator& generator)
{
    const auto& req = run.req;
    auto& out = run.out;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(options.device);
    const auto& tc = transformerConfig;
    const std::int64_t latentFrames = (req.frames - 1) / 8 + 1;
    const std::int64_t stageW = req.twoStage ? req.width / 2 : req.width, stageH = req.twoStage ? req.height / 2 : req.height;
    Pass pass;
    pass.latentFrames = latentFrames;
    pass.latentH = stageH / 32;
    pass.latentW = stageW / 32;
    pass.baseTokens = latentFrames * pass.latentH * pass.latentW;
    const auto audioFrames = audioLatentFrames(req);
    const auto melBins = audioConfig.latentMelBins();
    const auto cpuF32 = at::TensorOptions().dtype(at::kFloat);
    const auto start = Clock::now();
    // A retake's clip is a condition over the whole clip, held where the window does not reach.
    std::optional<Ltx2Request> withClip;
    if (req.retake) {
        withClip = req;
        withClip->conditions = {Ltx2Condition{req.retake->pixels, 0, 1.0}};
    }
    auto conditions = encodeConditions(withClip ? *withClip : req, stageW, stageH, run.progress, run.stop);
    if (!conditions.empty()) {
        out.conditionLatents = conditions.front().unpacked;
        run.timed("encode conditions", start);
    }
    run.checkStop();
    std::int64_t keyframeTokens = 0;
    for (const auto& c : conditions)
        if (c.latentIndex > 0)
            keyframeTokens += c.packed.size(1);
    // IC-LoRA references at the pass's size / s, encoded as clip conditions are (their first
    // frames, at most the clip's, cut to 8k + 1; resized to cover and center-cropped).
    std::vector<EncodedCondition> references;
    std::int64_t referenceTokens = 0;
    if (!req.references.empty()) {
        const auto refStart = Clock::now();
        Ltx2Request forReferences = req;
        forReferences.conditions.clear();
        for (const auto& r : req.references)
            forReferences.conditions.push_back({r.pixels, 0, r.strength});
        references =
            encodeConditions(forReferences, stageW / req.referenceDownscale, stageH / req.referenceDownscale, run.progress, run.stop);
        for (const auto& r : references)
            referenceTokens += r.packed.size(1);
        run.timed("encode references", refStart);
        run.checkStop();
    }
    const auto appended = keyframeTokens + referenceTokens;
    at::Tensor videoNoise;
    if (req.videoNoise) {
        videoNoise = req.videoNoise->to(f32);
    } else {
        const auto noise = at::randn({1, tc.inChannels, latentFrames, pass.latentH, pass.latentW}, generator, cpuF32);
        videoNoise = noise.permute({0, 2, 3, 4, 1}).reshape({1, pass.baseTokens, tc.inChannels});
        if (appended)
            videoNoise = at::cat({videoNoise, at::randn({1, appended, tc.inChannels}, generator, cpuF32)}, 1);
        videoNoise = videoNoise.to(f32);
    }
    if (req.audioNoise) {
        pass.audioLatents = req.audioNoise->to(f32);
    } else {
        const auto noise = at::randn({1, audioConfig.latentChannels, audioFrames, melBins}, generator, cpuF32);
        pass.audioLatents = noise.transpose(1, 2).flatten(2, 3).to(f32);
    }
    if (videoNoise.sizes() != at::IntArrayRef({1, pass.baseTokens + appended, tc.inChannels}))
        throw makeError(ErrorCode::InvalidArgument,
            "video noise must be [1, " + std::to_string(pass.baseTokens + appended) + ", " + std::to_string(tc.inChannels)
                + "] (keyframe and reference tokens included)");
    if (pass.audioLatents.sizes() != at::IntArrayRef({1, audioFrames, audioConfig.packedWidth()}))
        throw makeError(ErrorCode::InvalidArgument,
            "audio noise must be [1, " + std::to_string(audioFrames) + ", " + std::to_string(audioConfig.packedWidth()) + "]");
    holdUserAudio(run, pass, req.frames);
    holdAudioPrefix(run, pass);

    // 3. Schedule.
    if (req.sigmas) {
        pass.schedule.sigmas = *req.sigmas;
        if (pass.schedule.sigmas.size() < 2 || pass.schedule.sigmas.back() != 0.0)
            throw makeError(ErrorCode::InvalidArgument, "explicit sigmas must end in 0");
    } else if (req.schedule == Ltx2Schedule::Distilled) {
        if (req.steps && req.steps != 8)
            throw makeError(ErrorCode::InvalidArgument,
                "the distilled model runs its 8 trained steps (got " + std::to_string(req.steps)
                    + "); use the dev schedule or explicit sigmas for other counts");
        pass.schedule = sched::ltx2DistilledSchedule();
    } else {
        sched::Ltx2DevScheduleOptions o;
        o.steps = req.steps ? req.steps : 40;
        // diffusers derives mu from the packed sequence length; Lightricks' dev recipe keeps
        // the scheduler's default 4096 tokens (ti2vid_two_stages.py passes no latent), its HQ
        // recipe counts the stage's grid without keyframe tokens (an empty latent of its shape).
        if (!lightricksRules(req))
            o.tokens = pass.baseTokens + appended;
        else if (req.sampler == Ltx2Sampler::Res2s)
            o.tokens = pass.baseTokens;
        pass.schedule = take(sched::ltx2DevSchedule(o));
    }
    out.sigmas = pass.schedule.sigmas;
    pass.sampler = req.sampler;
    if (conditions.empty() && references.empty()) {
        pass.latents = videoNoise;  // bit for bit the draw, as the text-to-video reference starts
    } else {
        pass.latents = at::zeros({1, pass.baseTokens, tc.inChannels}, f32);
        const auto head = pass.baseTokens + keyframeTokens;
        applyConditions(pass, conditions, req.fps, videoNoise.narrow(1, 0, head), pass.schedule.sigmas.front(), lightricksRules(req));
        if (!references.empty())
            appendReferences(run, pass, references, videoNoise.narrow(1, head, referenceTokens), pass.schedule.sigmas.front());
    }
    if (req.retake)
        applyRetake(run, pass, videoNoise, pass.schedule.sigmas.front());
    return pass;
}

namespace {

// ltx-core's TemporalRegionMask: 1 where a token's half-open span [first, last) / rate overlaps
// [start, end), compared in float32 as the reference compares its float32 positions.
at::Tensor regionMask(std::int64_t tokens, const std::function<std::pair<std::int64_t, std::int64_t>(std::int64_t)>& span, float rate,
    double start, double end)
{
    auto mask = at::zeros({tokens}, at::kFloat);
    const auto s = static_cast<float>(start), e = static_cast<float>(end);
    for (std::int64_t i = 0; i < tokens; ++i) {
        const auto [a, b] = span(i);
        const float from = static_cast<float>(a) / rate, to = static_cast<float>(b) / rate;
        if (to > s && from < e)
            mask[i] = 1.0f;
    }
    return mask;
}

}  // namespace

void Ltx2Pipeline::Impl::applyRetake(Run& run, Pass& pass, const at::Tensor& noise, double noiseScale)
{
    const auto& req = run.req;
    const auto& r = *req.retake;
    auto& out = run.out;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(options.device);
    const auto t = transformerConfig.vaeScaleFactors[0];
    // Video: latent frame i spans pixel frames [max(t i - t + 1, 0), t i + 1).
    auto frames = regionMask(
        pass.latentFrames,
        [t](std::int64_t i) {
            return std::pair{std::max<std::int64_t>(t * i - t + 1, 0), t * i + 1};
        },
        static_cast<float>(req.fps), r.start, r.end);
    if (!r.video)
        frames.zero_();
    const auto redo = frames.repeat_interleave(pass.latentH * pass.latentW).unsqueeze(0).to(f32);  // [1, T]
    pass.mask = 1 - redo;
    // The reference's expression: pure noise in the window (at noise scale 1), the clip's own
    // encoding bit for bit elsewhere.
    const auto scaled = ((1 - pass.mask) * noiseScale).unsqueeze(-1);
    pass.latents = noise.to(f32) * scaled + pass.clean * (1 - scaled);
    pass.tokenSigma = true;
    out.retakeVideoMask = redo;
    const auto redone = frames.nonzero();
    if (redone.numel() > 0) {
        const auto first = redone.min().item<std::int64_t>(), last = redone.max().item<std::int64_t>();
        out.retakeFrames = {std::max<std::int64_t>(t * first - t + 1, 0), std::min<std::int64_t>(t * last + 1, req.frames)};
    }
    if (!r.sound)
        return;  // no sound: one is made for the whole clip
    const auto latentFrames = pass.audioLatents.size(1);
    const auto clean = encodeSound(run, *r.sound, static_cast<double>(req.frames) / req.fps, latentFrames).to(f32);
    const auto hop = audioConfig.melHopLength;
    // Audio latent j spans mel frames [max(4j - 3, 0), 4j + 1), hop samples each at the VAE's rate.
    auto tokens = regionMask(
        latentFrames,
        [hop](std::int64_t j) {
            return std::pair{std::max<std::int64_t>(4 * j - 3, 0) * hop, (4 * j + 1) * hop};
        },
        static_cast<float>(audioConfig.sampleRate), r.start, r.end);
    if (!r.audio)
        tokens.zero_();
    const auto redoAudio = tokens.unsqueeze(0).to(f32);
    out.retakeAudioMask = redoAudio;
    if (redoAudio.sum().item<float>() == 0.0f) {
        pass.audioLatents = clean;  // nothing of it made again: held whole
        pass.freezeAudio = true;
        return;
    }
    pass.audioMask = 1 - redoAudio;
    pass.audioClean = clean;
    const auto scaledAudio = ((1 - pass.audioMask) * noiseScale).unsqueeze(-1);
    pass.audioLatents = pass.audioLatents * scaledAudio + clean * (1 - scaledAudio);
    const auto redone2 = tokens.nonzero();
    const auto first2 = redone2.min().item<std::int64_t>(), last2 = redone2.max().item<std::int64_t>();
    const double unit = static_cast<double>(hop) / static_cast<double>(audioConfig.sampleRate);
    run.redoneAudio = {static_cast<double>(std::max<std::int64_t>(4 * first2 - 3, 0)) * unit, static_cast<double>(4 * last2 + 1) * unit};
}

void Ltx2Pipeline::Impl::splicePrefix(Run& run) const
{
    auto& out = run.out;
    const auto& prefix = *run.req.audioPrefix;
    if (!out.waveform.defined())
        return;
    auto wave = prefix.waveform.to(at::kFloat).cpu();
    if (wave.size(0) == 1)
        wave = wave.expand({2, -1});
    if (prefix.sampleRate != out.sampleRate)
        wave = ltx2::resampleSinc(wave.contiguous(), prefix.sampleRate, out.sampleRate);
    const auto n = out.waveform.size(1);
    const auto own = std::min<std::int64_t>({static_cast<std::int64_t>(std::floor(run.prefixSeconds * out.sampleRate)), wave.size(1), n});
    if (own <= 0)
        return;
    out.waveform = out.waveform.clone();
    const auto fade = std::min<std::int64_t>(own, std::max<std::int64_t>(1, out.sampleRate / 100));
    const auto steady = own - fade;
    if (steady > 0)
        out.waveform.narrow(1, 0, steady).copy_(wave.narrow(1, 0, steady));
    // Over the last 10 ms of the kept span, from the clip's samples to the decoded ones.
    const auto ramp = (at::arange(fade, at::kFloat) + 0.5) / static_cast<float>(fade);
    auto decoded = out.waveform.narrow(1, steady, fade);
    decoded.copy_(wave.narrow(1, steady, fade) * (1 - ramp) + decoded * ramp);
    out.prefixSamples = own;
}

void Ltx2Pipeline::Impl::spliceRetake(Run& run) const
{
    const auto& r = *run.req.retake;
    auto& out = run.out;
    // Frames outside those made again: the clip's own.
    const auto source = r.pixels.to(out.frames.device());
    const auto [first, last] = out.retakeFrames;
    const auto total = out.frames.size(0);
    if (first >= last) {
        out.frames = source.clone();
    } else {
        if (first > 0)
            out.frames.narrow(0, 0, first).copy_(source.narrow(0, 0, first));
        if (last < total)
            out.frames.narrow(0, last, total - last).copy_(source.narrow(0, last, total - last));
    }
    if (!r.sound || !out.waveform.defined())
        return;
    // Samples likewise, at the output's rate (the clip's resampled when its rate differs).
    auto wave = r.sound->waveform.to(at::kFloat).cpu();
    if (wave.size(0) == 1)
        wave = wave.expand({2, -1});
    // Cut to the clip's duration first, as it was encoded: the samples after it (a longer
    // soundtrack, or none in a copy of what was used) never change what is spliced.
    const auto used = static_cast<std::int64_t>(std::nearbyint(static_cast<double>(run.req.frames) / run.req.fps * r.sound->sampleRate));
    if (wave.size(1) > used)
        wave = wave.narrow(1, 0, used);
    if (r.sound->sampleRate != out.sampleRate)
        wave = ltx2::resampleSinc(wave.contiguous(), r.sound->sampleRate, out.sampleRate);
    const auto n = out.waveform.size(1);
    wave = wave.size(1) >= n ? wave.narrow(1, 0, n) : at::constant_pad_nd(wave, {0, n - wave.size(1)});
    if (!out.retakeAudioMask.defined() || out.retakeAudioMask.sum().item<float>() == 0.0f) {
        out.waveform = wave.contiguous();
        out.retakeSamples = {0, 0};
        return;
    }
    const auto from = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::floor(run.redoneAudio.first * out.sampleRate)), 0, n);
    const auto to = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::ceil(run.redoneAudio.second * out.sampleRate)), from, n);
    out.waveform = out.waveform.clone();
    if (from > 0)
        out.waveform.narrow(1, 0, from).copy_(wave.narrow(1, 0, from));
    if (to < n)
        out.waveform.narrow(1, to, n - to).copy_(wave.narrow(1, to, n - to));
    out.retakeSamples = {from, to};
}

namespace {

// The fps a DFR pass gives the transformer's positions: playback rates above 30 only change
// muxing (utils.py MAX_CONDITIONING_FPS, SNAP_CONDITIONING_FPS_ABOVE).
double dfrConditioningFps(double fps)
{
    return fps > 30.0 ? 60.0 : fps;
}

// The temporal rounds' sampler and schedule (utils.py TEMPORAL_ANCESTRAL_ETA and
// TEMPORAL_ROUND_DISTILLED_SIGMA_VALUES: the distilled sigmas from 0.975), the strength of the
// keyframes a round carries in (ANCHOR_KEYFRAME_STRENGTH).
constexpr double kTemporalAncestralEta = 0.5;
// The Fast recipe's stage 1 on LTX-2.5 (distilled.py ANCESTRAL_ETA; its generator is seeded with
// the run's seed plus ANCESTRAL_NOISE_SEED_OFFSET, so its first draw is not the start noise again).
constexpr double kFastAncestralEta = 1.0;
constexpr std::uint64_t kFastNoiseSeedOffset = 10000;
constexpr double kAnchorStrength = 0.95;
sched::FlowSchedule temporalRoundSchedule()
{
    auto s = sched::ltx2DistilledSchedule();
    s.sigmas.erase(s.sigmas.begin(), s.sigmas.begin() + 4);
    return s;
}

// [1, C, F, H, W] -> [1, F * H * W, C], frame-major as the pipelines pack.
at::Tensor packLatents(const at::Tensor& x)
{
    return x.permute({0, 2, 3, 4, 1}).reshape({x.size(0), -1, x.size(1)});
}

}  // namespace

// 2'. A DFR pass's start (LTX2DFRPipeline.prepare_latents): the padded canvas's tokens, the
// conditions' (a first-frame one holds the canvas's first tokens at its clean value, a later one
// is appended as keyframe tokens), then one latent frame of slot tokens per slot, zero or from
// dfrStart; one draw over all of them, noised to the schedule's first sigma (or dfrStart's
// level), and the conditioned tokens pulled to their clean values.
Ltx2Pipeline::Impl::Pass Ltx2Pipeline::Impl::startDfrPass(
    Run& run, at::Generator& generator, const DfrCanvas& canvas, const DfrPassSpec& spec)
{
    const auto& req = run.req;
    const Ltx2DfrStart* given = spec.start;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(options.device);
    const auto cpuF32 = at::TensorOptions().dtype(at::kFloat);
    const auto& tc = transformerConfig;
    Pass pass;
    pass.dfr = true;
    pass.latentFrames = (canvas.paddedFrames - 1) / 8 + 1;
    pass.latentH = spec.height / 32;
    pass.latentW = spec.width / 32;
    const auto perFrame = pass.latentH * pass.latentW;
    pass.baseTokens = pass.latentFrames * perFrame;
    pass.slotCount = static_cast<std::int64_t>(canvas.slots.size());
    pass.slotTokens = perFrame * pass.slotCount;
    const auto total = pass.baseTokens + pass.slotTokens;
    const double perSecond = static_cast<double>(audioConfig.sampleRate) / static_cast<double>(audioConfig.melHopLength) / 4.0;
    const double playback = spec.fps > 0 ? spec.fps : req.fps;
    // Frozen audio keeps the length it was made at (the reference sizes the audio from it).
    const bool frozen = spec.freezeAudio && given && given->audio.defined() && given->audio.dim() == 3;
    const auto audioFrames = frozen
        ? given->audio.size(1)
        : static_cast<std::int64_t>(std::nearbyint(static_cast<double>(canvas.paddedFrames) / playback * perSecond));

    if (req.sigmas && !given) {
        pass.schedule.sigmas = *req.sigmas;
        if (pass.schedule.sigmas.size() < 2 || pass.schedule.sigmas.back() != 0.0)
            throw makeError(ErrorCode::InvalidArgument, "explicit sigmas must end in 0");
    } else {
        pass.schedule = given ? sched::ltx2Stage2DistilledSchedule() : sched::ltx2DistilledSchedule();
    }
    if (run.out.sigmas.empty())
        run.out.sigmas = pass.schedule.sigmas;
    const double noiseScale = given ? given->noiseScale : pass.schedule.sigmas.front();

    at::Tensor latents, audio;
    if (given) {
        const auto& start = *given;
        const auto want = [&](const at::Tensor& t, std::int64_t frames) {
            return t.defined() && t.dim() == 5 && t.size(0) == 1 && t.size(1) == tc.inChannels && t.size(2) == frames
                && t.size(3) == pass.latentH && t.size(4) == pass.latentW;
        };
        if (!want(start.latents, pass.latentFrames) || !want(start.slots, pass.slotCount))
            throw makeError(ErrorCode::InvalidArgument,
                "a DFR second pass starts from [1, " + std::to_string(tc.inChannels) + ", " + std::to_string(pass.latentFrames) + ", "
                    + std::to_string(pass.latentH) + ", " + std::to_string(pass.latentW) + "] latents and " + std::to_string(pass.slotCount)
                    + " slot frames of the same size");
        if (!start.audio.defined() || start.audio.sizes() != at::IntArrayRef({1, audioFrames, audioConfig.packedWidth()}))
            throw makeError(ErrorCode::InvalidArgument,
                "a DFR second pass takes its audio packed [1, " + std::to_string(audioFrames) + ", "
                    + std::to_string(audioConfig.packedWidth()) + "]");
        if (!(noiseScale >= 0.0 && noiseScale <= 1.0))
            throw makeError(ErrorCode::InvalidArgument, "the DFR noise scale must be in [0, 1]");
        latents = at::cat({packLatents(start.latents.to(f32)), packLatents(start.slots.to(f32))}, 1);
        audio = start.audio.to(f32);
    } else {
        latents = at::zeros({1, total, tc.inChannels}, f32);
    }
    // Conditions at this pass's size: [canvas | keyframe tokens | slots].
    const auto conditionStart = Clock::now();
    const auto conditions = encodeConditions(req, spec.width, spec.height, run.progress, run.stop);
    if (!conditions.empty())
        run.timed("encode conditions", conditionStart);
    run.checkStop();
    const double fps = dfrConditioningFps(playback);
    auto mask = at::zeros({1, total}, f32);
    auto clean = at::zeros_like(latents);
    std::vector<at::Tensor> keyTokens, keyMask, coords;
    for (const auto& c : conditions) {
        const auto tokens = c.packed.to(f32);
        if (c.latentIndex == 0) {
            // The canvas's own first tokens keep their start state; the blend holds them.
            const auto n = tokens.size(1);
            mask.narrow(1, 0, n).fill_(c.strength);
            clean.narrow(1, 0, n).copy_(tokens);
            continue;
        }
        keyTokens.push_back(tokens);
        keyMask.push_back(at::full({1, tokens.size(1)}, c.strength, f32));
        coords.push_back(keyframeCoords(c.unpacked.size(2), c.unpacked.size(3), c.unpacked.size(4),
            double(((c.latentIndex - 1) * tc.vaeScaleFactors[0] + 1) * spec.conditionScale), c.pixelFrames == 1, fps, f32));
    }
    // Keyframes given whole (the third stage's): held, not marked, after the conditions'.
    if (spec.pinned) {
        const auto& pinned = *spec.pinned;
        const auto& positions = *spec.pinnedPositions;
        if (pinned.dim() != 5 || pinned.size(0) != 1 || pinned.size(1) != tc.inChannels
            || pinned.size(2) != static_cast<std::int64_t>(positions.size()) || pinned.size(3) != pass.latentH
            || pinned.size(4) != pass.latentW)
            throw makeError(
                ErrorCode::InvalidArgument, "the keyframes a DFR pass holds must be [1, C, K, h, w] at its size, one per position");
        for (std::size_t k = 0; k < positions.size(); ++k) {
            const auto tokens = packLatents(pinned.narrow(2, static_cast<std::int64_t>(k), 1).to(f32));
            keyTokens.push_back(tokens);
            keyMask.push_back(at::full({1, tokens.size(1)}, spec.pinnedStrength, f32));
            coords.push_back(keyframeCoords(1, pass.latentH, pass.latentW, static_cast<double>(positions[k]), true, fps, f32));
        }
    }
    std::int64_t keyframeTokens = 0;
    if (!keyTokens.empty()) {
        const auto kf = at::cat(keyTokens, 1);
        keyframeTokens = kf.size(1);
        const auto slotsPart = latents.narrow(1, pass.baseTokens, pass.slotTokens);
        latents = at::cat({latents.narrow(1, 0, pass.baseTokens), at::zeros_like(kf), slotsPart}, 1);
        clean = at::cat({clean.narrow(1, 0, pass.baseTokens), kf, clean.narrow(1, pass.baseTokens, pass.slotTokens)}, 1);
        mask = at::cat({mask.narrow(1, 0, pass.baseTokens), at::cat(keyMask, 1), mask.narrow(1, pass.baseTokens, pass.slotTokens)}, 1);
    }
    // The IC-LoRA reference after the slots: clean, held by the blend at strength 1, unmarked.
    std::int64_t referenceTokens = 0;
    at::Tensor referenceCoords;
    if (given && given->reference.defined()) {
        const auto& ref = given->reference;
        if (ref.dim() != 5 || ref.size(0) != 1 || ref.size(1) != tc.inChannels || ref.size(2) < 1 || ref.size(3) < 1 || ref.size(4) < 1
            || given->referenceDownscale < 1 || given->referenceDownscale > 16)
            throw makeError(ErrorCode::InvalidArgument,
                "an IC-LoRA reference is [1, " + std::to_string(tc.inChannels) + ", F, h, w] latents with a downscale of 1 to 16");
        const auto tokens = packLatents(ref.to(f32));
        referenceTokens = tokens.size(1);
        latents = at::cat({latents, at::zeros_like(tokens)}, 1);
        clean = at::cat({clean, tokens}, 1);
        mask = at::cat({mask, at::ones({1, referenceTokens}, f32)}, 1);
        referenceCoords = ltx2::videoCoordsFor(tc, ref.size(2), ref.size(3), ref.size(4), fps, options.device);
        referenceCoords.narrow(1, 1, 2).mul_(static_cast<double>(given->referenceDownscale));
    }
    pass.referenceTokens = referenceTokens;
    const auto allTokens = total + keyframeTokens + referenceTokens;
    // One draw over every token, then the audio's (the reference's order).
    at::Tensor videoNoise = spec.videoNoise && *spec.videoNoise ? (*spec.videoNoise)->to(f32)
                                                                : at::randn({1, allTokens, tc.inChannels}, generator, cpuF32).to(f32);
    at::Tensor audioNoise;
    if (spec.audioNoise && *spec.audioNoise) {
        audioNoise = (*spec.audioNoise)->to(f32);
    } else {
        const auto noise = at::randn({1, audioConfig.latentChannels, audioFrames, audioConfig.latentMelBins()}, generator, cpuF32);
        audioNoise = noise.transpose(1, 2).flatten(2, 3).to(f32);
    }
    if (videoNoise.sizes() != latents.sizes())
        throw makeError(ErrorCode::InvalidArgument,
            "DFR video noise must be [1, " + std::to_string(allTokens) + ", " + std::to_string(tc.inChannels)
                + "] (canvas, keyframe, slot and reference tokens)");
    if (audioNoise.sizes() != at::IntArrayRef({1, audioFrames, audioConfig.packedWidth()}))
        throw makeError(ErrorCode::InvalidArgument,
            "audio noise must be [1, " + std::to_string(audioFrames) + ", " + std::to_string(audioConfig.packedWidth()) + "]");
    // The reference's expressions, so a draw at noise scale 1 is taken bit for bit.
    pass.latents = videoNoise * noiseScale + latents * (1 - noiseScale);
    if (!conditions.empty() || keyframeTokens > 0 || referenceTokens > 0) {
        const auto m = mask.unsqueeze(-1);
        pass.latents = clean * m + pass.latents * (1 - m);
        pass.mask = mask;
        pass.clean = clean;
    }
    if (frozen) {
        // Its draw is made and scaled by 0 in the reference: the audio is taken as it is.
        pass.audioLatents = audio;
        pass.freezeAudio = true;
    } else {
        pass.audioLatents = audio.defined() ? audioNoise * noiseScale + audio * (1 - noiseScale) : audioNoise;
        holdUserAudio(run, pass, canvas.paddedFrames);
        holdAudioPrefix(run, pass);
    }

    // The keyframe embedding marks the causal first frame (one pixel frame) and every slot; not
    // the given keyframes, whose content is not generated.
    pass.keyframes = at::zeros({1, allTokens}, f32);
    pass.keyframes.narrow(1, 0, perFrame).fill_(1.0);
    pass.keyframes.narrow(1, pass.baseTokens + keyframeTokens, pass.slotTokens).fill_(1.0);
    for (const auto position : canvas.slots)
        coords.push_back(keyframeCoords(1, pass.latentH, pass.latentW, static_cast<double>(position), true, fps, f32));
    if (referenceCoords.defined())
        coords.push_back(referenceCoords);
    if (!coords.empty())
        pass.extraCoords = at::cat(coords, 2);
    return pass;
}

// 4. The loop of LTX2Pipeline / LTX2ConditionPipeline (and of a DFR pass), in place on `p`.
void Ltx2Pipeline::Impl::denoisePass(Run& run, Pass& p, ltx2::TransformerInputs& in)
{
    const auto& req = run.req;
    auto& out = run.out;
    const auto& progress = run.progress;
    // What `in` holds ([negative, positive] contexts under CFG) and what this pass runs.
    const bool cfgContexts = guided(req);
    const bool cfg = cfgContexts && !p.unguided;
    const bool lightricks = lightricksRules(req);
    const auto dtype = options.dtype;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(options.device);
    const auto& tc = transformerConfig;
    // STG and modality guidance: one more forward each per step, on the positive prompt, after
    // the conditional one (LTX2Pipeline's order), either batched with it or on their own.
    const bool stgPass = !p.dfr && !p.unguided && stgRuns(req);
    const bool modalityPass = !p.dfr && !p.unguided && modalityOn(req);
    const auto stgBlocks = stgPass ? stgBlocksFor(req) : std::vector<int>{};
    // Batched: rows [negative (CFG), positive, STG, modality] in one forward; the STG row's
    // self-attention in its blocks returns its values (a per-row mask), the modality row takes
    // nothing from the other stream; one pass over the weights per step. On their own: a
    // batch-1 forward per branch, each with its own step cache that skips only where the
    // conditional branch skipped, so no delta mixes a stale estimate with a fresh one.
    const bool batched = (stgPass || modalityPass) && req.batchGuidance.value_or(env::flag("VIREO_BATCH_GUIDANCE"));
    const std::int64_t cfgRows = cfg ? 2 : 1;
    const std::int64_t stgRow = stgPass ? cfgRows : -1;
    const std::int64_t modalityRow = modalityPass ? cfgRows + (stgPass ? 1 : 0) : -1;
    const std::int64_t batch = batched ? cfgRows + (stgPass ? 1 : 0) + (modalityPass ? 1 : 0) : cfgRows;
    // The caller's inputs come back as they were: this pass widens the context for its rows.
    struct Restore {
        ltx2::TransformerInputs& in;
        ltx2::TransformerInputs saved;
        ~Restore() { in = std::move(saved); }
    } restore{in, in};
    in.numFrames = p.latentFrames;
    in.height = p.latentH;
    in.width = p.latentW;
    in.extraVideoCoords.reset();
    if (p.extraCoords.defined())
        in.extraVideoCoords = p.extraCoords.expand({batch, -1, -1, -1}).contiguous();
    in.videoSelfAttentionMask.reset();
    if (p.selfMask.defined())
        in.videoSelfAttentionMask = p.selfMask.expand({batch, -1, -1});
    in.videoKeyframesMask.reset();
    // ltx-core marks the first latent frame (one pixel frame, like a keyframe slot) for a model
    // with the keyframe embedding whatever the pipeline (LatentTools._first_frame_keyframes_mask,
    // after 1.0.0); diffusers' LTX2Pipeline marks nothing outside its DFR passes.
    at::Tensor firstFrame;
    if (!p.dfr && lightricks && tc.keyframesAbsPosEmbedding) {
        firstFrame = at::zeros({1, p.latents.size(1)}, f32);
        firstFrame.narrow(1, 0, p.latentH * p.latentW).fill_(1.0);
    }
    if (p.dfr)
        in.videoKeyframesMask = p.keyframes;
    else if (firstFrame.defined())
        in.videoKeyframesMask = firstFrame.expand({batch, -1}).contiguous();
    const auto mask = p.mask.defined() ? std::optional<at::Tensor>(p.mask.expand({batch, -1}).contiguous()) : std::nullopt;
    const auto audioMask = p.audioMask.defined() ? std::optional<at::Tensor>(p.audioMask.expand({batch, -1}).contiguous()) : std::nullopt;
    // A new cache per pass: nothing of another clip or stage is ever reused.
    ltx2::StepCache stepCache;
    stepCache.threshold = req.stepCacheThreshold;
    stepCache.maxConsecutive = std::max(1, req.stepCacheMaxConsecutive);
    // A tiled pass has no one previous output per token to compare with: no step cache.
    in.stepCache = req.stepCacheThreshold > 0 && p.tiles.empty() ? &stepCache : nullptr;
    ltx2::TransformerInputs one;
    ltx2::StepCache stgCache, modalityCache;
    for (auto* c : {&stgCache, &modalityCache}) {
        c->threshold = stepCache.threshold;
        c->maxConsecutive = stepCache.maxConsecutive;
    }
    const auto frozenOne = p.freezeAudio ? at::zeros({1}, f32) : at::Tensor();
    const auto positive = [&](const at::Tensor& x) { return cfgContexts ? x.narrow(0, 1, 1) : x; };
    // The text context and its masks, each mapped the same way (widened for the batched rows, or
    // the positive half for a branch of its own).
    const auto mapContext = [](ltx2::TransformerInputs& to, const ltx2::TransformerInputs& from, const auto& f) {
        to.encoderHiddenStates = f(from.encoderHiddenStates);
        to.audioEncoderHiddenStates = f(from.audioEncoderHiddenStates);
        if (from.encoderAttentionMask)
            to.encoderAttentionMask = f(*from.encoderAttentionMask);
        if (from.audioEncoderAttentionMask)
            to.audioEncoderAttentionMask = f(*from.audioEncoderAttentionMask);
    };
    // 1 in every row but `row` (0: that row is the branch's).
    const auto allBut = [&](std::int64_t row) {
        auto keep = at::ones({batch}, f32);
        keep[row] = 0.0;
        return keep;
    };
    if (cfgContexts && !cfg)
        mapContext(in, in, positive);
    // ltx-core perturbs a stream only where its own STG scale is set.
    in.stgVideo = !lightricks || req.stgScale != 0.0;
    in.stgAudio = !lightricks || req.audioStgScale != 0.0;
    if (batched) {
        mapContext(in, in, [&](const at::Tensor& x) {
            std::vector<at::Tensor> parts{x};
            for (auto r = cfgRows; r < batch; ++r)
                parts.push_back(positive(x));
            return at::cat(parts, 0);
        });
        if (stgPass) {
            in.stgBlocks = stgBlocks;
            in.perturbationMask = allBut(stgRow);
            in.allPerturbed = false;  // mixed rows: no mask value read on the host
        }
        if (modalityPass)
            in.isolationMask = allBut(modalityRow);
    } else if (stgPass || modalityPass) {
        one = in;
        mapContext(one, in, positive);
        if (firstFrame.defined())
            one.videoKeyframesMask = firstFrame;
        one.extraVideoCoords.reset();
        if (p.extraCoords.defined())
            one.extraVideoCoords = p.extraCoords;
        one.videoSelfAttentionMask.reset();
        if (p.selfMask.defined())
            one.videoSelfAttentionMask = p.selfMask;
        one.audioSigma.reset();
        if (p.freezeAudio)
            one.audioSigma = frozenOne;
    }
    if (!p.dfr && !p.unguided)
        out.guidance = describeGuidance(req, transformerConfig) + (batched ? " (branches batched)" : "");
    // Graphs per pass too: their memory is freed before the decoders run.
    ltx2::GraphedForward graphed(*transformer, options.cudaGraphs);
    auto& latents = p.latents;
    auto& audioLatents = p.audioLatents;
    const int steps = p.schedule.steps();
    // A tiled pass counts its tiles, so a step that takes minutes at 4K still moves the bar.
    const auto perStep = p.tiles.empty() ? std::int64_t{1} : static_cast<std::int64_t>(p.tiles.size());
    const auto reportTotal = (p.reportTotal > 0 ? p.reportTotal : steps) * perStep;
    std::int64_t tilesDone = p.reportOffset * perStep;
    // The third stage's step: the transformer once per tile on the tokens the tile keeps, at
    // their own positions; the velocities blended by the tiles' weights (as x0 = x - v sigma is
    // affine in v and the weights sum to 1, that blends the clean estimates), the audio's
    // averaged, every tile having heard all of it.
    const auto tiledForward = [&](const ltx2::TransformerInputs& whole, const Pass& pass) {
        auto part = whole;
        part.extraVideoCoords.reset();
        part.stepCache = nullptr;
        ltx2::TransformerOutputs blended;
        blended.video = at::zeros({whole.hiddenStates.size(0), whole.hiddenStates.size(1), tc.outChannels}, f32);
        for (const auto& tile : pass.tiles) {
            run.checkStop();
            part.hiddenStates = whole.hiddenStates.index_select(1, tile.keep);
            part.timestep = whole.timestep.dim() == 2 ? whole.timestep.index_select(1, tile.keep) : whole.timestep;
            if (whole.videoKeyframesMask)
                part.videoKeyframesMask = whole.videoKeyframesMask->index_select(1, tile.keep);
            part.videoCoords = tile.coords;
            auto pred = take(transformer->forward(part));
            blended.video.index_add_(1, tile.keep, pred.video.to(at::kFloat) * tile.weights.view({1, -1, 1}));
            const auto share = pred.audio.to(at::kFloat) / static_cast<double>(pass.tiles.size());
            blended.audio = blended.audio.defined() ? blended.audio + share : share;
            run.report(pass.phase, ++tilesDone, reportTotal);
        }
        return blended;
    };
    run.report(p.phase, p.reportOffset * perStep, reportTotal);
    // Frozen audio is clean: timestep and sigma 0 for its stream (and the video's cross-modal
    // modulation), never stepped.
    const auto frozen = p.freezeAudio ? at::zeros({batch}, f32) : at::Tensor();
    in.audioSigma.reset();
    if (p.freezeAudio)
        in.audioSigma = frozen;
    // One evaluation: every branch's forward at `sigma` from these latents, the guided clean
    // estimates, conditioned tokens pulled to their clean values.
    struct Estimate {
        at::Tensor video, audio;
    };
    const auto evaluate = [&](const at::Tensor& latents, const at::Tensor& audioLatents, float sigma) -> Estimate {
        const auto t = at::full({batch}, sigma * 1000.0f, f32);
        in.hiddenStates = (batch > 1 ? latents.expand({batch, -1, -1}) : latents).to(dtype).contiguous();
        in.audioHiddenStates = (batch > 1 ? audioLatents.expand({batch, -1, -1}) : audioLatents).to(dtype).contiguous();
        // Conditioned tokens see a lower noise level: timestep * (1 - strength), per token.
        in.timestep = mask ? t.unsqueeze(-1) * (1 - *mask) : t;
        in.audioTimestep = p.freezeAudio ? frozen : audioMask ? t.unsqueeze(-1) * (1 - *audioMask) : t;
        in.sigma = t;
        auto pred = p.tiles.empty() ? take(graphed.forward(in)) : tiledForward(in, p);
        if (in.stepCache)
            out.stepChanges.push_back(stepCache.change);
        auto v = pred.video.to(at::kFloat), a = pred.audio.to(at::kFloat);
        at::Tensor vStg, aStg, vModality, aModality;
        if (batched) {
            if (stgPass) {
                vStg = v.narrow(0, stgRow, 1);
                aStg = a.narrow(0, stgRow, 1);
            }
            if (modalityPass) {
                vModality = v.narrow(0, modalityRow, 1);
                aModality = a.narrow(0, modalityRow, 1);
            }
            v = v.narrow(0, 0, cfgRows);
            a = a.narrow(0, 0, cfgRows);
        } else if (stgPass || modalityPass) {
            const auto t1 = t.narrow(0, 0, 1);
            one.hiddenStates = latents.to(dtype);
            one.audioHiddenStates = audioLatents.to(dtype);
            one.timestep = p.mask.defined() ? t1.unsqueeze(-1) * (1 - p.mask) : t1;
            one.audioTimestep = p.freezeAudio ? frozenOne : p.audioMask.defined() ? t1.unsqueeze(-1) * (1 - p.audioMask) : t1;
            one.sigma = t1;
            const auto branch = [&](ltx2::StepCache& cache) {
                cache.allowSkip = stepCache.allowSkip && stepCache.skipped;
                one.stepCache = in.stepCache ? &cache : nullptr;
                auto r = take(graphed.forward(one));
                return std::pair{r.video.to(at::kFloat), r.audio.to(at::kFloat)};
            };
            if (stgPass) {
                one.stgBlocks = stgBlocks;
                one.perturbationMask.reset();
                one.allPerturbed = true;  // every row: no mask value read on the host
                std::tie(vStg, aStg) = branch(stgCache);
                one.stgBlocks.clear();
                one.allPerturbed.reset();
            }
            if (modalityPass) {
                one.isolateModalities = true;
                std::tie(vModality, aModality) = branch(modalityCache);
                one.isolateModalities = false;
            }
        }
        const auto sigmaT = at::scalar_tensor(sigma, f32);
        at::Tensor x0, ax0;
        if (p.dfr) {
            // Each token's clean estimate at its own sigma, the timestep it was given / 1000 (a
            // conditioned token sits lower), as LTX2DFRPipeline.denoise computes it.
            const auto tokenSigma = (mask ? in.timestep : t.unsqueeze(-1).expand({batch, latents.size(1)})) / 1000.0f;
            x0 = latents - v * tokenSigma.unsqueeze(-1);
            ax0 = audioLatents - a * sigmaT;
        } else {
            // Every branch's clean estimate from the same latents, in float32; the deltas added to
            // the conditional one in LTX2Pipeline's order (CFG, STG, modality), then each modality
            // rescaled against the conditional estimate with its own factor (even with no delta:
            // the identity up to rounding, as the reference does it). ltx-core's X0Model takes a
            // conditioned token's estimate at its own sigma, diffusers' pipeline at the step's.
            const bool ownSigma = lightricks || p.tokenSigma;
            const auto vs = ownSigma && p.mask.defined() ? (sigmaT * (1 - p.mask)).unsqueeze(-1) : sigmaT;
            // Kept audio tokens (a retake's, a prefix's) are estimated at their own sigma, 0.
            const auto as = p.audioMask.defined() ? (sigmaT * (1 - p.audioMask)).unsqueeze(-1) : sigmaT;
            x0 = latents - (cfg ? v.narrow(0, 1, 1) : v) * vs;
            ax0 = audioLatents - (cfg ? a.narrow(0, 1, 1) : a) * as;
            auto x0g = x0, ax0g = ax0;
            if (cfg) {
                x0g = x0g + (req.guidanceScale - 1) * (x0 - (latents - v.narrow(0, 0, 1) * vs));
                ax0g = ax0g + (req.audioGuidanceScale - 1) * (ax0 - (audioLatents - a.narrow(0, 0, 1) * as));
            }
            if (stgPass) {
                x0g = x0g + req.stgScale * (x0 - (latents - vStg * vs));
                ax0g = ax0g + req.audioStgScale * (ax0 - (audioLatents - aStg * as));
            }
            if (modalityPass) {
                x0g = x0g + (req.modalityScale - 1) * (x0 - (latents - vModality * vs));
                ax0g = ax0g + (req.audioModalityScale - 1) * (ax0 - (audioLatents - aModality * as));
            }
            const double audioRescale = req.audioGuidanceRescale.value_or(req.guidanceRescale);
            if (req.guidanceRescale > 0 && !p.unguided)
                x0g = rescaleGuided(x0g, x0, req.guidanceRescale);
            if (audioRescale > 0 && !p.unguided)
                ax0g = rescaleGuided(ax0g, ax0, audioRescale);
            x0 = x0g;
            ax0 = ax0g;
        }
        // Conditioned tokens are pulled to their clean values in sample space (a strength-1
        // token gets a zero velocity and never moves).
        if (p.mask.defined()) {
            const auto m = p.mask.unsqueeze(-1);
            x0 = x0 * (1 - m) + p.clean * m;
        }
        if (p.audioMask.defined()) {
            const auto m = p.audioMask.unsqueeze(-1);
            ax0 = ax0 * (1 - m) + p.audioClean * m;
        }
        return {x0, ax0};
    };

    const bool res2s = p.sampler == Ltx2Sampler::Res2s;
    if (res2s) {
        // ltx-pipelines' res2s loop compares nothing with a previous call: no step cache.
        in.stepCache = nullptr;
        res2sLoop(run, p, [&](const at::Tensor& v, const at::Tensor& a, float sigma) {
            auto e = evaluate(v, a, sigma);
            return std::pair{e.video, e.audio};
        });
    }
    for (int i = 0; i < (res2s ? 0 : steps); ++i) {
        run.checkStop();
        stepCache.allowSkip = i > 0 && i + 1 < steps;
        // The scheduler keeps sigmas in float32; the DiT gets sigma * 1000 in float32.
        const float sigma = static_cast<float>(p.schedule.sigmas[static_cast<std::size_t>(i)]);
        const float sigmaNext = static_cast<float>(p.schedule.sigmas[static_cast<std::size_t>(i) + 1]);
        const auto sigmaT = at::scalar_tensor(sigma, f32);
        auto [x0, ax0] = evaluate(latents, audioLatents, sigma);
        at::Tensor v, a;
        const auto dt = at::scalar_tensor(sigmaNext, f32) - sigmaT;
        // The ancestral step re-noises every token: the held ones are pulled back after it.
        const auto ancestralStep = [&](const at::Tensor& x, const at::Tensor& clean, const at::Tensor& mask,
                                       const at::Tensor& cleanValues) {
            auto next = ancestralRfStep(x, clean, sigma, sigmaNext, p.ancestralEta, [&] {
                return at::randn(x.sizes(), *p.ancestral, at::TensorOptions().dtype(at::kFloat));
            }).to(f32);
            if (mask.defined()) {
                const auto m = mask.unsqueeze(-1);
                next = next * (1 - m) + cleanValues * m;
            }
            return next;
        };
        if (p.ancestral) {
            latents = ancestralStep(latents, x0, p.mask, p.clean);
        } else {
            // Back to a velocity and one Euler step, as the pipeline and scheduler do.
            v = (latents - x0) / sigmaT;
            latents = latents + dt * v;
        }
        if (p.ancestral && p.ancestralAudio && !p.freezeAudio) {
            audioLatents = ancestralStep(audioLatents, ax0, p.audioMask, p.audioClean);
        } else if (!p.freezeAudio) {
            a = (audioLatents - ax0) / sigmaT;
            audioLatents = audioLatents + dt * a;
        }
        if (progress)
            progress({p.phase, (p.reportOffset + i + 1) * perStep, reportTotal,
                x0.narrow(1, 0, p.baseTokens).reshape({1, p.latentFrames, p.latentH, p.latentW, tc.inChannels}).permute({0, 4, 1, 2, 3})});
    }
    out.stepsSkipped += stepCache.skips;
    in.stepCache = nullptr;
    if (transformer->device().is_cuda())
        out.cudaGraphs +=
            (out.cudaGraphs.empty() ? "" : "; ") + std::string(phaseName(p.phase)) + ": " + graphed.summary();
    if (p.dfr) {
        p.allTokens = latents;
        p.slots = latents.narrow(1, latents.size(1) - p.referenceTokens - p.slotTokens, p.slotTokens)
                      .reshape({1, p.slotCount, p.latentH, p.latentW, tc.inChannels})
                      .permute({0, 4, 1, 2, 3})
                      .contiguous();
    }
    // Keyframe (and slot) tokens are dropped once the loop is done.
    latents = latents.narrow(1, 0, p.baseTokens).contiguous();
}

// 4'. ltx-pipelines' res2s loop (res2s_audio_video_denoising_loop with its defaults, legacy mode):
// per step the guided estimate at the anchor, a midpoint at sqrt(sigma sigmaNext) re-noised by
// the SDE, the anchor refined against it (bong iteration) while the step is small, the estimate
// at the midpoint, the second-order combination re-noised to the next sigma; a last estimate at
// 0.0011 where the schedule ends in 0. Anchors, midpoints and the combination in float64, as the
// reference keeps them; the SDE draws from its two generators, seeded -1 (steps) and 9999
// (substeps) whatever the request's seed, drawn on the CPU so every device makes the same.
void Ltx2Pipeline::Impl::res2sLoop(Run& run, Pass& p, const Evaluate& evaluate) const
{
    const auto& tc = transformerConfig;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(options.device);
    auto stepNoise = at::make_generator<at::CPUGeneratorImpl>(std::numeric_limits<std::uint64_t>::max());
    auto substepNoise = at::make_generator<at::CPUGeneratorImpl>(std::uint64_t{9999});
    const auto draw = [&](at::Generator& g, const at::Tensor& like) {
        auto n = at::randn(like.sizes(), g, at::TensorOptions().dtype(at::kDouble));
        n = (n - n.mean()) / n.std();
        n = (n - n.mean({-2, -1}, true)) / n.std({-2, -1}, true, true);
        return n.to(options.device);
    };
    // Conditioned tokens back to their clean values after each re-noising (legacy mode).
    const auto hold = [&](const at::Tensor& x) {
        if (!p.mask.defined())
            return x;
        const auto m = p.mask.unsqueeze(-1).to(at::kDouble);
        return x * (1 - m) + p.clean.to(at::kDouble) * m;
    };
    // The float32 schedule, its final 0 replaced by 0.0011, 0 (no division by zero).
    std::vector<float> sigmas;
    for (const double v : p.schedule.sigmas)
        sigmas.push_back(static_cast<float>(v));
    const int steps = static_cast<int>(sigmas.size()) - 1;
    const bool toZero = sigmas.back() == 0.0f;
    if (toZero) {
        sigmas.back() = 0.0011f;
        sigmas.push_back(0.0f);
    }
    const auto reportTotal = p.reportTotal > 0 ? p.reportTotal : steps;
    auto& video = p.latents;
    auto& audio = p.audioLatents;
    const auto preview = [&](const at::Tensor& x0) {
        return x0.narrow(1, 0, p.baseTokens).reshape({1, p.latentFrames, p.latentH, p.latentW, tc.inChannels}).permute({0, 4, 1, 2, 3});
    };
    for (int i = 0; i < steps; ++i) {
        run.checkStop();
        const double sigma = sigmas[static_cast<std::size_t>(i)], sigmaNext = sigmas[static_cast<std::size_t>(i) + 1];
        const double h = -std::log(sigmaNext / sigma);
        const auto c = res2sCoefficients(h);
        const double sub = std::sqrt(sigma * sigmaNext);
        auto anchorV = video.to(at::kDouble), anchorA = audio.to(at::kDouble);
        const auto [d1v, d1a] = evaluate(video, audio, static_cast<float>(sigma));
        const auto d1V = d1v.to(at::kDouble), d1A = d1a.to(at::kDouble);
        auto e1V = d1V - anchorV, e1A = d1A - anchorA;
        auto midV = anchorV + h * c.a21 * e1V, midA = anchorA + h * c.a21 * e1A;
        const auto subNoiseV = draw(substepNoise, video), subNoiseA = draw(substepNoise, audio);
        midV = hold(res2sSdeStep(anchorV, midV, sigma, sub, subNoiseV, false));
        midA = p.freezeAudio ? anchorA : res2sSdeStep(anchorA, midA, sigma, sub, subNoiseA, false);
        if (h < 0.5 && sigma > 0.03) {
            // The anchor that the noised midpoint lies on the line to (bong iteration).
            for (int k = 0; k < 100; ++k) {
                anchorV = midV - h * c.a21 * e1V;
                e1V = d1V - anchorV;
                anchorA = midA - h * c.a21 * e1A;
                e1A = d1A - anchorA;
            }
        }
        const auto [d2v, d2a] = evaluate(midV.to(at::kFloat), midA.to(at::kFloat), static_cast<float>(sub));
        const auto e2V = d2v.to(at::kDouble) - anchorV, e2A = d2a.to(at::kDouble) - anchorA;
        auto nextV = anchorV + h * (c.b1 * e1V + c.b2 * e2V);
        auto nextA = anchorA + h * (c.b1 * e1A + c.b2 * e2A);
        const auto stepNoiseV = draw(stepNoise, video), stepNoiseA = draw(stepNoise, audio);
        nextV = hold(res2sSdeStep(anchorV, nextV, sigma, sigmaNext, stepNoiseV, true));
        nextA = res2sSdeStep(anchorA, nextA, sigma, sigmaNext, stepNoiseA, true);
        video = nextV.to(f32);
        // Frozen audio never moves; its draws are still made, so the video's stay the same.
        if (!p.freezeAudio)
            audio = nextA.to(f32);
        if (run.progress)
            run.progress({p.phase, p.reportOffset + i + 1, reportTotal, preview(d2v)});
    }
    if (toZero) {
        run.checkStop();
        const auto [x0, ax0] = evaluate(video, audio, sigmas[static_cast<std::size_t>(steps)]);
        video = x0.to(f32);
        if (!p.freezeAudio)
            audio = ax0.to(f32);
    }
}

// 5. Upsample stage 1's latents x2 in space (on the VAE's own scale, as the upsampler was
// trained), then refine at full size from them noised to the first stage-2 sigma; `pass`
// becomes the refined one.
void Ltx2Pipeline::Impl::refineAtFullSize(Run& run, Pass& pass, ltx2::TransformerInputs& in, at::Generator& generator)
{
    const auto& req = run.req;
    auto& out = run.out;
    const auto stop = run.stop;
    const auto device = options.device;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    const auto cpuF32 = at::TensorOptions().dtype(at::kFloat);
    const auto& tc = transformerConfig;
    const auto audioFrames = audioLatentFrames(req);
    auto report = [&run](Ltx2Phase phase, std::int64_t done, std::int64_t total) { run.report(phase, done, total); };
    auto checkStop = [&run] { run.checkStop(); };
    auto timed = [&run](const char* name, Clock::time_point start) { run.timed(name, start); };
    auto start = Clock::now();
    report(Ltx2Phase::UpsampleLatents, 0, 1);
    loadUpsampler();
    const auto [mean, std] = latentStats();
    const auto low = pass.latents.reshape({1, pass.latentFrames, pass.latentH, pass.latentW, tc.inChannels}).permute({0, 4, 1, 2, 3});
    auto up = take(upsampler->upsampleNormalized(low, mean, std, stop)).to(f32);
    out.upsampledLatents = up;
    report(Ltx2Phase::UpsampleLatents, 1, 1);
    timed("upsample latents", start);
    checkStop();

    start = Clock::now();
    Pass refine;
    refine.phase = Ltx2Phase::Refine;
    refine.latentFrames = up.size(2);
    refine.latentH = up.size(3);
    refine.latentW = up.size(4);
    if (refine.latentFrames != pass.latentFrames || refine.latentH != req.height / 32 || refine.latentW != req.width / 32)
        throw makeError(ErrorCode::InvalidArgument,
            "the spatial upsampler turned a " + std::to_string(pass.latentH) + "x" + std::to_string(pass.latentW) + " latent into "
                + std::to_string(refine.latentH) + "x" + std::to_string(refine.latentW)
                + "; the two-stage path needs an x2 spatial upsampler");
    refine.baseTokens = refine.latentFrames * refine.latentH * refine.latentW;
    refine.schedule = sched::ltx2Stage2DistilledSchedule();
    const double noiseScale = refine.schedule.sigmas.front();
    // Conditions again at full size, so stage 2 holds the real image, not stage 1's estimate.
    auto fullConditions = encodeConditions(req, req.width, req.height, run.progress, stop);
    if (!fullConditions.empty())
        out.conditionLatents = fullConditions.front().unpacked;
    std::int64_t fullKeyframeTokens = 0;
    for (const auto& c : fullConditions)
        if (c.latentIndex > 0)
            fullKeyframeTokens += c.packed.size(1);
    at::Tensor noise2, audioNoise2;
    if (req.stage2VideoNoise)
        noise2 = req.stage2VideoNoise->to(f32);
    else
        noise2 = at::randn({1, refine.baseTokens + fullKeyframeTokens, tc.inChannels}, generator, cpuF32).to(f32);
    if (req.stage2AudioNoise)
        audioNoise2 = req.stage2AudioNoise->to(f32);
    else
        audioNoise2 = at::randn({1, audioFrames, audioConfig.packedWidth()}, generator, cpuF32).to(f32);
    if (audioNoise2.sizes() != pass.audioLatents.sizes())
        throw makeError(ErrorCode::InvalidArgument,
            "stage-2 audio noise must be [1, " + std::to_string(audioFrames) + ", " + std::to_string(audioConfig.packedWidth()) + "]");
    refine.latents = up.permute({0, 2, 3, 4, 1}).reshape({1, refine.baseTokens, tc.inChannels});
    applyConditions(refine, fullConditions, req.fps, noise2, noiseScale, lightricksRules(req));
    refine.audioLatents = audioNoise2 * noiseScale + pass.audioLatents * (1 - noiseScale);
    holdUserAudio(run, refine, req.frames);
    holdAudioPrefix(run, refine);
    timed("encode conditions", start);
    // The IC-LoRA and its references are stage 1's: stage 2 details without them (ltx-pipelines'
    // IC-LoRA pipeline), and the LoRA's outcome stays in the report.
    std::optional<Ltx2LoraOutcome> icOutcome;
    if (req.icLora && out.loras.size() > req.loras.size())
        icOutcome = out.loras[req.loras.size()];
    if (req.icLora && !req.distilledLora) {
        start = Clock::now();
        applyLoras(req.loras);
        timed("apply loras", start);
    }
    if (req.distilledLora) {
        // The dev recipe's second stage: the user's LoRAs and the distilled one on the dev
        // weights (ltx-pipelines' with_additional_loras), no guidance. Without the distilled
        // LoRA three steps of the dev model make noise, so a LoRA that matched nothing fails the run.
        start = Clock::now();
        auto loras = req.loras;
        loras.push_back(*req.distilledLora);
        applyLoras(loras);
        out.loras = loraOutcomes;
        if (icOutcome)
            out.loras.insert(out.loras.begin() + static_cast<std::ptrdiff_t>(req.loras.size()), *icOutcome);
        const auto& distilled = loraOutcomes.back();
        if (distilled.status.rfind("refused", 0) == 0 || distilled.matched == 0)
            throw makeError(ErrorCode::InvalidArgument,
                "the distilled LoRA " + req.distilledLora->path.filename().string() + " cannot be applied to this model ("
                    + distilled.status + "); the dev recipe's second stage needs it: give the distilled LoRA of this LTX version");
        timed("apply loras", start);
        refine.unguided = true;
        refine.sampler = req.sampler;
        const auto num = [](double v) {
            std::ostringstream s;
            s.precision(3);
            s << v;
            return s.str();
        };
        const std::string sampler = req.sampler == Ltx2Sampler::Res2s ? ", res2s" : "";
        out.guidance = "stage 1: " + out.guidance
            + (req.distilledLoraStage1Strength ? ", distilled LoRA at " + num(*req.distilledLoraStage1Strength) : "") + sampler
            + "; stage 2: none (distilled LoRA at " + num(req.distilledLora->strength) + ")" + sampler;
    }
    start = Clock::now();
    denoisePass(run, refine, in);
    timed("refine", start);
    checkStop();
    pass = std::move(refine);
}

// 5'. LTX-2.5's second DFR pass (ltx-pipelines DFRPipeline): stage 1's canvas and its slots
// upsampled x2 in space, then a DFR pass at full size from them and from stage 1's audio, noised
// to the first stage-2 sigma. Stage 1's audio is the one kept: the second pass only details
// the picture. `pass` becomes the second one.
void Ltx2Pipeline::Impl::detailWith(Run& run, Ltx2DfrStart& next, const at::Tensor& reference)
{
    const auto& req = run.req;
    if (!req.detailingLora && !req.detailingReference)
        return;
    next.reference = reference.contiguous();
    next.referenceDownscale = 2;
    if (!req.detailingLora)
        return;
    const auto factor = take(icLoraReferenceDownscale(req.detailingLora->path));
    if (factor && *factor != 1)
        next.referenceDownscale = *factor;
    auto loras = req.loras;
    loras.push_back(*req.detailingLora);
    applyLoras(loras);
    run.out.loras = loraOutcomes;
}

void Ltx2Pipeline::Impl::refineDfrAtFullSize(
    Run& run, Pass& pass, ltx2::TransformerInputs& in, at::Generator& generator, const DfrCanvas& canvas)
{
    const auto& req = run.req;
    auto& out = run.out;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(options.device);
    const auto& tc = transformerConfig;
    auto start = Clock::now();
    run.report(Ltx2Phase::UpsampleLatents, 0, 1);
    loadUpsampler();
    const auto stats = latentStats();
    const auto low = pass.latents.reshape({1, pass.latentFrames, pass.latentH, pass.latentW, tc.inChannels}).permute({0, 4, 1, 2, 3});
    auto up = [&](const at::Tensor& x) { return take(upsampler->upsampleNormalized(x, stats.first, stats.second, run.stop)).to(f32); };
    Ltx2DfrStart next;
    next.latents = up(low);
    next.slots = up(pass.slots);
    next.audio = pass.audioLatents;
    next.noiseScale = sched::ltx2Stage2DistilledSchedule().sigmas.front();
    // The detailing IC-LoRA reads stage 1's half-size canvas as its reference, in the second
    // pass only (ltx-pipelines' stage_detailing).
    detailWith(run, next, low);
    out.upsampledLatents = next.latents;
    run.report(Ltx2Phase::UpsampleLatents, 1, 1);
    run.timed("upsample latents", start);
    run.checkStop();

    start = Clock::now();
    auto refine =
        startDfrPass(run, generator, canvas, {run.detailWidth, run.detailHeight, &next, &req.stage2VideoNoise, &req.stage2AudioNoise});
    refine.phase = Ltx2Phase::Refine;
    const auto stage1Audio = pass.audioLatents;
    denoisePass(run, refine, in);
    run.timed("refine", start);
    run.checkStop();
    // The rounds after it run without the detailing LoRA.
    if (req.detailingLora)
        applyLoras(req.loras);
    refine.audioLatents = stage1Audio;
    pass = std::move(refine);
}

Result<std::optional<std::int64_t>> icLoraReferenceDownscale(const std::filesystem::path& lora)
{
    auto source = tensorfile::ModelSource::open(lora);
    if (!source)
        return source.error();
    // ltx-pipelines subsamples the reference in time for such a LoRA (frames 0, 1, 1 + S, ...);
    // run without it, the LoRA would read its reference at the wrong rate: refused, not ignored.
    for (const auto& cp : source->checkpoints)
        if (const auto it = cp.metadata.find("reference_temporal_scale_factor"); it != cp.metadata.end() && it->second != "1")
            return makeError(ErrorCode::InvalidArgument,
                lora.filename().string() + ": reference_temporal_scale_factor is \"" + it->second.substr(0, 32)
                    + "\": a reference subsampled in time is not supported by this version; use an IC-LoRA without it");
    for (const auto& cp : source->checkpoints) {
        const auto it = cp.metadata.find("reference_downscale_factor");
        if (it == cp.metadata.end())
            continue;
        std::int64_t factor = 0;
        const auto& text = it->second;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), factor);
        if (ec != std::errc() || end != text.data() + text.size() || factor < 1 || factor > 16)
            return makeError(ErrorCode::InvalidFormat,
                lora.filename().string() + ": reference_downscale_factor is \"" + text.substr(0, 32) + "\", expected 1 to 16");
        return std::optional<std::int64_t>(factor);
    }
    return std::optional<std::int64_t>();
}

namespace {

// [1, T, C] -> [1, C, F, H, W] for a grid of F x H x W tokens.
at::Tensor unpackLatents(const at::Tensor& tokens, std::int64_t frames, std::int64_t h, std::int64_t w)
{
    return tokens.reshape({tokens.size(0), frames, h, w, tokens.size(2)}).permute({0, 4, 1, 2, 3}).contiguous();
}

// A temporal tile's share of the stage's audio (packed [1, La, C]): its wall-clock window of the
// source, linearly resampled to the tokens its duration has at the conditioning rate (the
// reference's _audio_window_for_tile; wall clock, since a round's canvas is a frame short of
// twice the last).
at::Tensor audioWindowForTile(const at::Tensor& audio, std::int64_t pixelStart, std::int64_t tileFrames, double playbackFps,
    double sourceSeconds, double conditioningFps, double perSecond)
{
    const auto source = audio.size(1);
    const auto n =
        std::max<std::int64_t>(1, static_cast<std::int64_t>(std::nearbyint(static_cast<double>(tileFrames) / conditioningFps * perSecond)));
    const double begin = static_cast<double>(pixelStart) / playbackFps / sourceSeconds * static_cast<double>(source);
    const double span = static_cast<double>(tileFrames) / playbackFps / sourceSeconds * static_cast<double>(source);
    const auto positions = (at::arange(n, audio.options().dtype(at::kFloat)) * (span / static_cast<double>(n)) + begin)
                               .clamp(0, static_cast<double>(source - 1));
    const auto low = positions.floor().to(at::kLong);
    const auto high = (low + 1).clamp_max(source - 1);
    const auto weight = (positions - low).to(audio.scalar_type()).view({1, -1, 1});
    return audio.index_select(1, low) * (1 - weight) + audio.index_select(1, high) * weight;
}

}  // namespace

// 5''. LTX-2.5's temporal refine rounds after the DFR pass(es), as ltx-pipelines' DFRPipeline
// chains LTX2DFRTemporalRefinePipeline: each round upsamples the canvas x2 in time, doubles the
// rate, and details it in tiles cut on the keyframe seams. A tile holds the keyframes carried in
// (at 0.95), generates new slots halfway between them, and follows the stage's audio, frozen;
// its run-up is dropped at the stitch, and its slots join the carried keyframes. `pass` ends
// holding the last round's canvas and keyframes.
void Ltx2Pipeline::Impl::temporalRefine(
    Run& run, Pass& pass, ltx2::TransformerInputs& in, at::Generator& generator, const DfrCanvas& canvas)
{
    const auto& req = run.req;
    auto& out = run.out;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(options.device);
    const auto cpuF32 = at::TensorOptions().dtype(at::kFloat);
    const auto& tc = transformerConfig;
    const auto ratio = tc.vaeScaleFactors[0];
    const auto h = pass.latentH, w = pass.latentW, perFrame = h * w;
    loadTemporalUpsampler();
    const auto stats = latentStats();
    const auto conditionStart = Clock::now();
    const auto conditions = encodeConditions(req, run.detailWidth, run.detailHeight, run.progress, run.stop);
    if (!conditions.empty())
        run.timed("encode conditions", conditionStart);

    auto video = unpackLatents(pass.latents, pass.latentFrames, h, w);
    auto carry = pass.slots;
    auto positions = canvas.slots;
    auto frames = canvas.paddedFrames;
    double fps = req.fps;
    const double sourceSeconds = static_cast<double>(canvas.paddedFrames) / req.fps;
    const double perSecond = static_cast<double>(audioConfig.sampleRate) / static_cast<double>(audioConfig.melHopLength) / 4.0;
    const auto stageAudio = pass.audioLatents;
    const auto schedule = temporalRoundSchedule();
    const double noiseScale = schedule.sigmas.front();
    std::size_t drawn = 0;
    for (int round = 1; round <= req.temporalRounds; ++round) {
        auto start = Clock::now();
        run.report(Ltx2Phase::UpsampleLatents, 0, 1);
        video = take(temporalUpsampler->upsampleNormalized(video, stats.first, stats.second, run.stop)).to(f32);
        frames = 2 * (frames - 1) + 1;
        if (video.size(2) != (frames - 1) / ratio + 1 || video.size(3) != h || video.size(4) != w)
            throw makeError(ErrorCode::InvalidFormat, "the temporal upsampler did not double the clip's frames at the same size");
        run.report(Ltx2Phase::UpsampleLatents, 1, 1);
        run.timed("upsample latents", start);
        run.checkStop();
        const double playback = 2 * fps;
        const double conditioningFps = dfrConditioningFps(playback);
        std::vector<std::int64_t> seams;
        for (const auto p : positions)
            seams.push_back(2 * p);
        const auto tiles = take(dfrTemporalTiles(seams, frames, 1 << round));
        const std::int64_t scale = std::int64_t{1} << round;

        start = Clock::now();
        std::vector<at::Tensor> stitched;
        std::vector<std::pair<std::int64_t, at::Tensor>> newSlots;
        for (std::size_t k = 0; k < tiles.size(); ++k) {
            const auto& tile = tiles[k];
            const auto tileLatents = video.narrow(2, tile.start, tile.end - tile.start);
            const auto latentFrames = tileLatents.size(2);
            const auto tileFrames = (latentFrames - 1) * ratio + 1;
            const auto base = latentFrames * perFrame;
            // [canvas | conditions | anchors | slots], as LTX2DFRPipeline.prepare_latents lays them out.
            std::vector<at::Tensor> latents{packLatents(tileLatents)}, clean{at::zeros_like(latents[0])}, mask{at::zeros({1, base}, f32)},
                marks{at::zeros({1, base}, f32)}, coords;
            marks[0].narrow(1, 0, perFrame).fill_(1.0);
            const auto append = [&](const at::Tensor& tokens, const at::Tensor& init, double strength, double mark,
                                    const at::Tensor& where) {
                latents.push_back(init);
                clean.push_back(tokens);
                mask.push_back(at::full({1, tokens.size(1)}, strength, f32));
                marks.push_back(at::full({1, tokens.size(1)}, mark, f32));
                coords.push_back(where);
            };
            for (const auto& c : conditions) {
                const auto pixel = (c.latentIndex == 0 ? 0 : (c.latentIndex - 1) * ratio + 1) * scale;
                if (pixel < tile.pixelStart || pixel > tile.pixelEnd)
                    continue;
                const auto tokens = c.packed.to(f32);
                if (pixel == tile.pixelStart) {
                    // The tile's own first tokens keep their start state; the blend holds them.
                    mask[0].narrow(1, 0, tokens.size(1)).fill_(c.strength);
                    clean[0].narrow(1, 0, tokens.size(1)).copy_(tokens);
                    continue;
                }
                append(tokens, at::zeros_like(tokens), c.strength, 0.0,
                    keyframeCoords(c.unpacked.size(2), c.unpacked.size(3), c.unpacked.size(4), double(pixel - tile.pixelStart),
                        c.pixelFrames == 1, conditioningFps, f32));
            }
            for (const auto anchor : tile.anchors) {
                const auto index = std::find(seams.begin(), seams.end(), anchor) - seams.begin();
                const auto tokens = packLatents(carry.narrow(2, index, 1).to(f32));
                append(tokens, at::zeros_like(tokens), kAnchorStrength, 0.0,
                    keyframeCoords(1, h, w, double(anchor - tile.pixelStart), true, conditioningFps, f32));
            }
            // Slots start from the nearest upsampled frame, generated and marked.
            for (const auto slot : tile.slots) {
                const auto local = slot - tile.pixelStart;
                const auto nearest = std::min<std::int64_t>(
                    static_cast<std::int64_t>(std::nearbyint(static_cast<double>(local) / static_cast<double>(ratio))), latentFrames - 1);
                const auto tokens = packLatents(tileLatents.narrow(2, nearest, 1));
                append(at::zeros_like(tokens), tokens, 0.0, 1.0, keyframeCoords(1, h, w, double(local), true, conditioningFps, f32));
            }
            Pass tp;
            tp.dfr = true;
            tp.phase = Ltx2Phase::TemporalRefine;
            tp.latentFrames = latentFrames;
            tp.latentH = h;
            tp.latentW = w;
            tp.baseTokens = base;
            tp.slotCount = static_cast<std::int64_t>(tile.slots.size());
            tp.slotTokens = tp.slotCount * perFrame;
            tp.schedule = schedule;
            const auto x = at::cat(latents, 1);
            tp.clean = at::cat(clean, 1);
            tp.mask = at::cat(mask, 1);
            tp.keyframes = at::cat(marks, 1);
            if (!coords.empty())
                tp.extraCoords = at::cat(coords, 2);
            // The tile's start draw comes from the run's generator, in tile order; its ancestral
            // draws from a generator of its own.
            at::Tensor noise;
            if (!req.temporalTileNoise.empty()) {
                if (drawn >= req.temporalTileNoise.size())
                    throw makeError(ErrorCode::InvalidArgument, "fewer temporal tile draws were given than the rounds have tiles");
                noise = req.temporalTileNoise[drawn++].to(f32);
            } else {
                noise = at::randn(x.sizes(), generator, cpuF32).to(f32);
            }
            if (noise.sizes() != x.sizes())
                throw makeError(ErrorCode::InvalidArgument,
                    "temporal tile noise " + std::to_string(drawn) + " must be [1, " + std::to_string(x.size(1)) + ", "
                        + std::to_string(x.size(2)) + "]");
            const auto m = tp.mask.unsqueeze(-1);
            tp.latents = tp.clean * m + (noise * noiseScale + x * (1 - noiseScale)) * (1 - m);
            tp.audioLatents =
                audioWindowForTile(stageAudio, tile.pixelStart, tileFrames, playback, sourceSeconds, conditioningFps, perSecond);
            tp.freezeAudio = true;
            tp.ancestral = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(req.seed + 1000 * round) + k);
            tp.ancestralEta = kTemporalAncestralEta;
            tp.reportOffset = static_cast<std::int64_t>(k) * schedule.steps();
            tp.reportTotal = static_cast<std::int64_t>(tiles.size()) * schedule.steps();
            in.audioNumFrames = tp.audioLatents.size(1);
            in.fps = conditioningFps;
            denoisePass(run, tp, in);
            run.checkStop();
            stitched.push_back(unpackLatents(tp.latents, latentFrames, h, w).narrow(2, tile.leftRamp, latentFrames - tile.leftRamp));
            for (std::size_t i = 0; i < tile.slots.size(); ++i)
                newSlots.emplace_back(tile.slots[i], tp.slots.narrow(2, static_cast<std::int64_t>(i), 1));
        }
        video = at::cat(stitched, 2);
        if (video.size(2) != (frames - 1) / ratio + 1)
            throw makeError(ErrorCode::Internal, "a temporal round stitched " + std::to_string(video.size(2)) + " latent frames");
        // The seams carried on, joined by this round's slots (a slot two tiles share: the first's).
        std::map<std::int64_t, at::Tensor> kept;
        for (std::size_t i = 0; i < seams.size(); ++i)
            kept[seams[i]] = carry.narrow(2, static_cast<std::int64_t>(i), 1);
        std::map<std::int64_t, at::Tensor> firstSlot;
        for (const auto& [position, latent] : newSlots)
            firstSlot.emplace(position, latent);
        for (const auto& [position, latent] : firstSlot)
            kept[position] = latent;
        positions.clear();
        std::vector<at::Tensor> carried;
        for (const auto& [position, latent] : kept) {
            positions.push_back(position);
            carried.push_back(latent);
        }
        carry = at::cat(carried, 2);
        fps = playback;
        out.roundLatents.push_back(video);
        out.roundKeyframes.push_back(carry);
        out.roundPositions.push_back(positions);
        out.roundTiles.push_back(tiles);
        run.timed("temporal refine", start);
    }
    pass.latents = packLatents(video);
    pass.latentFrames = video.size(2);
    pass.baseTokens = pass.latents.size(1);
    pass.slots = carry;
    pass.slotCount = carry.size(2);
    pass.slotTokens = pass.slotCount * perFrame;
    pass.allTokens = at::cat({pass.latents, packLatents(carry)}, 1);
    run.frames = (run.frames - 1) * (std::int64_t{1} << req.temporalRounds) + 1;
    run.fps = fps;
}

// diffusers' rebuild_epilogue_keyframes: the refine rounds settled these frames, so the third
// stage is given them, at its size, rather than asked to make them; by way of RGB, not the
// latent upsampler, so each lands on the output grid as a picture would be encoded.
at::Tensor Ltx2Pipeline::Impl::rebuildKeyframes(Run& run, const at::Tensor& keyframes)
{
    // With the decoder the run decodes with: diffusers' recipe decodes with the VAE, ltx-pipelines
    // (whose decoder from 2.5 on is the diffusion decoder) with its own; files that carry only
    // the diffusion decoder rebuild with it.
    const bool byDiffusion = decodesByDiffusion(run.req) || !vaeDecoder;
    if (byDiffusion && !diffusionDecoder)
        diffusionDecoder = take(ltx2::DiffusionDecoder::load(weights, options.device, options.dtype));
    if (!byDiffusion && !videoDecoder)
        videoDecoder = take(ltx2::VideoDecoder::load(weights, onDevice<ltx2::VideoDecoderLoadOptions>(options.device, options.dtype)));
    loadVideoEncoder();
    if (!videoEncoder)
        throw makeError(ErrorCode::InvalidArgument, "the third spatial stage encodes its keyframes again: these files hold no VAE encoder");
    // The statistics a diffusion decode denormalizes with, once for every plane.
    const auto stats = byDiffusion ? latentStats() : std::pair<at::Tensor, at::Tensor>();
    const double scaling = byDiffusion && !vaeDecoder ? diffusionDecoder->config().scalingFactor : vaeScaling;
    std::vector<at::Tensor> planes;
    for (std::int64_t k = 0; k < keyframes.size(2); ++k) {
        run.checkStop();
        // One at a time: the decoder is causal, and these are separate stills, not a sequence.
        const auto plane = keyframes.narrow(2, k, 1);
        at::Tensor frame;
        if (byDiffusion) {
            const auto z = plane.to(stats.first.device(), at::kFloat) * stats.second.view({1, -1, 1, 1, 1}) / scaling
                + stats.first.view({1, -1, 1, 1, 1});
            ltx2::DiffusionDecodeOptions decode;
            decode.stop = run.stop;
            decode.tiling = ltx2::DiffusionDecodeTiling{};
            // Each plane's own draws (diffusers' rebuild seeds plane i's noise seed + 4000 + i), so
            // a picture does not depend on how many were made before it.
            auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(run.req.seed + 4000 + k));
            decode.noise = [&generator](const std::vector<std::int64_t>& shape) {
                return at::randn(shape, generator, at::TensorOptions().dtype(at::kFloat));
            };
            frame = take(diffusionDecoder->decode(z.to(options.dtype), decode));
        } else {
            ltx2::VideoDecodeOptions decode;
            decode.stop = run.stop;
            frame = take(videoDecoder->decode(plane.to(options.device, options.dtype), decode));
        }
        const auto rgb = ((frame[0].select(1, 0).to(at::kFloat).clamp(-1, 1) + 1.0) * 127.5)
                             .round()
                             .to(at::kByte)
                             .permute({1, 2, 0})
                             .to(at::kCPU)
                             .contiguous();
        const auto stretched = gemma3::pilResize(rgb, rgb.size(1) * 2, rgb.size(0) * 2, 1);
        if (run.req.keepDecodedVideo)
            run.out.epilogueKeyframePixels.push_back(stretched);
        const auto pixels = (stretched.to(at::kFloat) / 127.5 - 1.0).permute({2, 0, 1}).unsqueeze(1).unsqueeze(0).contiguous();
        ltx2::VideoEncodeOptions encode;
        encode.stop = run.stop;
        planes.push_back(take(videoEncoder->encode(pixels.to(options.device, options.dtype), encode)).to(at::kFloat));
    }
    return at::cat(planes, 2);
}

// 5c. The third spatial stage (diffusers' recipe "A third spatial stage", Lightricks' 4K path):
// the last canvas upsampled x2, its keyframes rebuilt at the new size and held clean, one DFR
// pass of the second stage's schedule over the whole canvas in tiles (2 x 2 spatially, 2^rounds
// in time cut on the last round's seams), the audio frozen at stage 1's; the detailing LoRA or
// reference as in the second pass, with the canvas before this upsampling as the reference.
void Ltx2Pipeline::Impl::dfrEpilogue(
    Run& run, Pass& pass, ltx2::TransformerInputs& in, at::Generator& generator, const std::vector<std::int64_t>& seams)
{
    const auto& req = run.req;
    auto& out = run.out;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(options.device);
    const auto& tc = transformerConfig;
    const auto ratio = tc.vaeScaleFactors[0];
    auto start = Clock::now();
    run.report(Ltx2Phase::UpsampleLatents, 0, 1);
    loadUpsampler();
    const auto stats = latentStats();
    const auto low = unpackLatents(pass.latents.narrow(1, 0, pass.baseTokens), pass.latentFrames, pass.latentH, pass.latentW);
    Ltx2DfrStart next;
    next.latents = take(upsampler->upsampleNormalized(low, stats.first, stats.second, run.stop)).to(f32);
    const auto h = next.latents.size(3), w = next.latents.size(4);
    if (h * 32 != req.height || w * 32 != req.width || next.latents.size(2) != pass.latentFrames)
        throw makeError(ErrorCode::InvalidFormat, "the spatial upsampler did not double the canvas for the third stage");
    next.slots = at::zeros({1, tc.inChannels, 0, h, w}, f32);
    next.audio = pass.audioLatents;
    next.noiseScale = sched::ltx2Stage2DistilledSchedule().sigmas.front();
    if (req.keepDecodedVideo)
        out.epilogueStart = next.latents;
    run.report(Ltx2Phase::UpsampleLatents, 1, 1);
    run.timed("upsample latents", start);
    run.checkStop();

    start = Clock::now();
    const auto positions = out.roundPositions.empty() ? out.dfrCanvas->slots : out.roundPositions.back();
    const auto keyframes = rebuildKeyframes(run, pass.slots);
    out.epilogueKeyframes = keyframes;
    run.timed("rebuild keyframes", start);
    run.checkStop();

    std::vector<std::int64_t> cells;
    for (const auto p : seams) {
        if (p % ratio)
            throw makeError(ErrorCode::Internal, "a keyframe seam at frame " + std::to_string(p) + " is not on a latent border");
        cells.push_back(p / ratio);
    }
    auto layout = take(dfrEpilogueTiles(pass.latentFrames, h, w, 1 << req.temporalRounds, cells));
    for (const auto& note : layout.notes)
        log::warn("LTX-2.5 third stage: " + note);

    detailWith(run, next, low);
    start = Clock::now();
    DfrCanvas canvas;
    canvas.paddedFrames = (pass.latentFrames - 1) * ratio + 1;
    DfrPassSpec spec{req.width, req.height, &next, &req.epilogueVideoNoise, &req.epilogueAudioNoise};
    spec.pinned = &keyframes;
    spec.pinnedPositions = &positions;
    spec.freezeAudio = true;
    spec.fps = run.fps;
    spec.conditionScale = std::int64_t{1} << req.temporalRounds;
    auto detail = startDfrPass(run, generator, canvas, spec);
    detail.phase = Ltx2Phase::ThirdStage;
    const auto coords =
        at::cat({ltx2::videoCoordsFor(tc, detail.latentFrames, h, w, dfrConditioningFps(run.fps), options.device), detail.extraCoords}, 2);
    detail.tiles = take(dfrTokenPlan(layout.tiles, coords, detail.latentFrames, h, w));
    out.epilogueTiles = std::move(layout.tiles);
    in.audioNumFrames = detail.audioLatents.size(1);
    in.fps = dfrConditioningFps(run.fps);
    denoisePass(run, detail, in);
    run.timed("third stage", start);
    run.checkStop();
    if (req.detailingLora)
        applyLoras(req.loras);
    detail.slots = keyframes;
    detail.slotCount = keyframes.size(2);
    pass = std::move(detail);
}

// 6. The video decoded, and turned into bytes as the reference's postprocessing does.
void Ltx2Pipeline::Impl::decodeVideo(Run& run, const Pass& pass)
{
    const auto& req = run.req;
    auto& out = run.out;
    const auto stop = run.stop;
    const auto device = options.device;
    const auto dtype = options.dtype;
    const auto& tc = transformerConfig;
    const auto& latents = pass.latents;
    const auto latentH = pass.latentH, latentW = pass.latentW;
    const auto start = Clock::now();
    const auto unpacked = latents.reshape({1, pass.latentFrames, latentH, latentW, tc.inChannels}).permute({0, 4, 1, 2, 3}).contiguous();
    const auto onProgress = [&](std::int64_t done, std::int64_t total) { run.report(Ltx2Phase::DecodeVideo, done, total); };
    run.report(Ltx2Phase::DecodeVideo, 0, 1);
    at::Tensor decoded;  // [1, 3, F, H, W]
    if (decodesByDiffusion(req)) {
        if (!diffusionDecoder)
            diffusionDecoder = take(ltx2::DiffusionDecoder::load(weights, device, dtype));
        // Denormalized with the VAE's statistics where it is there, as the decode pipeline does.
        const auto [mean, std] = latentStats();
        const double scaling = vaeDecoder ? vaeScaling : diffusionDecoder->config().scalingFactor;
        const auto z = unpacked.to(mean.device(), at::kFloat) * std.view({1, -1, 1, 1, 1}) / scaling + mean.view({1, -1, 1, 1, 1});
        ltx2::DiffusionDecodeOptions decodeOptions;
        decodeOptions.stop = stop;
        decodeOptions.onProgress = onProgress;
        auto* generator = run.generator;
        decodeOptions.noise = [generator](const std::vector<std::int64_t>& shape) {
            return at::randn(shape, *generator, at::TensorOptions().dtype(at::kFloat));
        };
        // Bound memory at real sizes: the reference's tiles (768 px, 80 frames) past them.
        decodeOptions.tiling = ltx2::DiffusionDecodeTiling{};
        decoded = take(diffusionDecoder->decode(z.to(dtype), decodeOptions));
        out.videoDecoder = "diffusion";
    } else {
        if (!videoDecoder)
            videoDecoder = take(ltx2::VideoDecoder::load(weights, onDevice<ltx2::VideoDecoderLoadOptions>(device, dtype)));
        ltx2::VideoDecodeOptions decodeOptions;
        decodeOptions.stop = stop;
        // Bound memory at real sizes: tiles of 16 latent cells (512 px) as diffusers' tiling.
        if (latentH > 16 || latentW > 16) {
            decodeOptions.tileSize = 16;
            decodeOptions.tileOverlap = 2;
        }
        decodeOptions.onProgress = onProgress;
        decoded = take(videoDecoder->decode(unpacked.to(dtype), decodeOptions));
        out.videoDecoder = "vae";
    }
    // The reference's postprocessing in float32, (v / 2 + 0.5) clamped, x 255, rounded, in that
    // order so the bytes agree; a few frames at a time, so a float copy of the whole video never
    // exists next to the decoder's output.
    const auto frameCount = decoded.size(2);
    out.frames = at::empty({frameCount, decoded.size(3), decoded.size(4), 3}, at::TensorOptions().dtype(at::kByte));
    constexpr std::int64_t kFramesPerChunk = 8;
    for (std::int64_t f = 0; f < frameCount; f += kFramesPerChunk) {
        const auto n = std::min(kFramesPerChunk, frameCount - f);
        auto chunk = decoded[0].narrow(1, f, n).permute({1, 2, 3, 0}).to(at::kFloat).contiguous();
        chunk.div_(2).add_(0.5).clamp_(0, 1).mul_(255).round_();
        out.frames.narrow(0, f, n).copy_(chunk.to(at::kByte));
    }
    if (req.keepDecodedVideo)
        out.video = decoded.to(at::kFloat);
    decoded = at::Tensor();
    out.fps = run.fps;
    run.timed("decode video", start);
    run.checkStop();
}

// 7. The audio latents to a mel spectrogram, the vocoder's waveform, cut or padded to the
// video's length.
at::Tensor Ltx2Pipeline::Impl::encodeSound(Run& run, const Ltx2AudioCondition& given, double seconds, std::int64_t latentFrames)
{
    const auto start = Clock::now();
    run.report(Ltx2Phase::EncodeConditions, 0, 1);
    loadAudioEncoder();
    if (!audioEncoder)
        throw makeError(ErrorCode::InvalidArgument,
            "the sound must be encoded by the audio VAE's encoder, and " + weights.describeFiles()
                + " carry only its decoder; give the audio VAE file that holds both (audio_vae.encoder.*)");
    const auto& config = audioEncoder->config();
    // Two channels, as the encoder takes; cut to the clip's duration or lengthened with silence.
    auto wave = given.waveform.to(at::kFloat).cpu();
    if (wave.size(0) == 1)
        wave = wave.expand({2, -1});
    const auto used = static_cast<std::int64_t>(std::nearbyint(seconds * given.sampleRate));
    wave = wave.size(1) >= used ? wave.narrow(1, 0, used) : at::constant_pad_nd(wave, {0, used - wave.size(1)});
    ltx2::MelFrontEnd frontEnd;
    frontEnd.sampleRate = config.sampleRate;
    frontEnd.nFft = config.nFft;
    frontEnd.hopLength = config.melHopLength;
    frontEnd.melBins = config.melBins;
    // The mel on the CPU, in float32, as the reference makes it; the encoder in the compute dtype.
    auto mel = take(ltx2::logMelSpectrogram(wave.unsqueeze(0).contiguous(), given.sampleRate, frontEnd));
    run.checkStop();
    auto latents = take(audioEncoder->encode(mel.to(options.device, options.dtype), run.stop)).to(at::kFloat);
    if (latents.size(1) < latentFrames)
        throw makeError(ErrorCode::Internal,
            "the audio encoder made " + std::to_string(latents.size(1)) + " latent frames of " + std::to_string(mel.size(2))
                + " mel frames; the clip needs " + std::to_string(latentFrames));
    latents = latents.narrow(1, 0, latentFrames).contiguous();
    run.out.audioConditionMel = mel;
    run.out.audioConditionLatents = latents;
    run.report(Ltx2Phase::EncodeConditions, 1, 1);
    run.timed("encode audio", start);
    return latents;
}

const at::Tensor& Ltx2Pipeline::Impl::userAudioLatents(Run& run, std::int64_t frames, std::int64_t latentFrames)
{
    if (!run.heldAudio.defined() || run.heldAudio.size(1) != latentFrames)
        run.heldAudio = encodeSound(run, *run.req.audio, static_cast<double>(frames) / run.req.fps, latentFrames);
    return run.heldAudio;
}

void Ltx2Pipeline::Impl::holdAudioPrefix(Run& run, Pass& pass)
{
    if (!run.req.audioPrefix)
        return;
    const auto& prefix = *run.req.audioPrefix;
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(options.device);
    const double seconds = static_cast<double>(prefix.waveform.size(1)) / prefix.sampleRate;
    const double perSecond = static_cast<double>(audioConfig.sampleRate) / static_cast<double>(audioConfig.melHopLength) / 4.0;
    const auto total = pass.audioLatents.size(1);
    const auto kept = std::clamp<std::int64_t>(static_cast<std::int64_t>(std::nearbyint(seconds * perSecond)), 1, total);
    if (!run.prefixLatents.defined() || run.prefixLatents.size(1) != kept)
        run.prefixLatents = encodeSound(run, prefix, seconds, kept).to(f32);
    auto mask = at::zeros({1, total}, f32);
    mask.narrow(1, 0, kept).fill_(1.0);
    auto clean = at::zeros_like(pass.audioLatents);
    clean.narrow(1, 0, kept).copy_(run.prefixLatents);
    pass.audioMask = mask;
    pass.audioClean = clean;
    // The pass's start with the prefix's tokens exactly as encoded (m is 0 or 1).
    const auto m = mask.unsqueeze(-1);
    pass.audioLatents = pass.audioLatents * (1 - m) + clean * m;
    // The seconds the kept tokens span (mel frames [0, 4 kept - 3)), for the splice.
    run.prefixSeconds = static_cast<double>(std::max<std::int64_t>(4 * kept - 3, 1)) * static_cast<double>(audioConfig.melHopLength)
        / static_cast<double>(audioConfig.sampleRate);
}

void Ltx2Pipeline::Impl::holdUserAudio(Run& run, Pass& pass, std::int64_t frames)
{
    if (!run.req.audio)
        return;
    pass.audioLatents = userAudioLatents(run, frames, pass.audioLatents.size(1)).to(options.device);
    pass.freezeAudio = true;
}

void Ltx2Pipeline::Impl::decodeAudio(Run& run, const Pass& pass)
{
    auto& out = run.out;
    if (run.req.audio) {
        // The user's own sound over the clip, as a2vid outputs it (not a decode of its latents):
        // every sample kept as given, silence after its end.
        const auto& given = *run.req.audio;
        auto wave = given.waveform.to(at::kFloat).cpu();
        if (wave.size(0) == 1)
            wave = wave.expand({2, -1});
        const auto samples = static_cast<std::int64_t>(std::llround(static_cast<double>(run.frames) / run.fps * given.sampleRate));
        wave = wave.size(1) >= samples ? wave.narrow(1, 0, samples) : at::constant_pad_nd(wave, {0, samples - wave.size(1)});
        out.waveform = wave.contiguous();
        out.sampleRate = given.sampleRate;
        return;
    }
    const auto stop = run.stop;
    const auto device = options.device;
    const auto dtype = options.dtype;
    const auto& audioLatents = pass.audioLatents;
    const double duration = static_cast<double>(run.frames) / run.fps;
    auto start = Clock::now();
    run.report(Ltx2Phase::DecodeAudio, 0, 1);
    if (!audioDecoder) {
        audioDecoder = take(ltx2::AudioDecoder::load(weights, onDevice<ltx2::AudioDecoderLoadOptions>(device, dtype)));
    }
    // The reference denormalizes the audio latents in float32 and casts afterwards.
    out.mel = take(audioDecoder->decode(audioLatents, stop)).to(at::kFloat);
    run.report(Ltx2Phase::DecodeAudio, 1, 1);
    run.timed("decode audio", start);
    start = Clock::now();
    run.report(Ltx2Phase::Vocoder, 0, 1);
    if (!vocoder) {
        vocoder = take(ltx2::Vocoder::load(weights, onDevice<ltx2::VocoderLoadOptions>(device, dtype)));
    }
    out.rawWaveform = take(vocoder->run(out.mel.to(dtype), stop)).to(at::kFloat);
    out.sampleRate = vocoder->sampleRate();
    // The soundtrack lasts exactly as long as the video.
    const auto samples = static_cast<std::int64_t>(std::llround(duration * out.sampleRate));
    auto wave = out.rawWaveform[0];
    if (wave.size(-1) >= samples)
        wave = wave.narrow(-1, 0, samples);
    else
        wave = at::constant_pad_nd(wave, {0, samples - wave.size(-1)});
    out.waveform = wave.contiguous().cpu();
    run.report(Ltx2Phase::Vocoder, 1, 1);
    run.timed("vocoder", start);
}

ltx2::EnhancedPrompt Ltx2Pipeline::Impl::enhancePrompt(
    const Ltx2Request& req, const std::function<void(const Ltx2Progress&)>& progress, std::stop_token stop)
{
    if (!enhancerPath && !selfEnhancer)
        throw makeError(ErrorCode::InvalidArgument,
            "this model has no prompt enhancer (a diffusers LTX-2.5 folder's prompt_enhancer/, or a Gemma 4 instruct model given "
            "as the enhancer); generate with the prompt as written");
    ltx2::EnhanceOptions o;
    o.systemPrompt = req.enhancerSystemPrompt;
    o.maxNewTokens = req.enhancerMaxTokens;
    // The references seed the enhancer's draws with the video's generator.
    o.seed = static_cast<std::uint64_t>(req.seed);
    o.progress = [&](int done, int total) {
        if (progress)
            progress({Ltx2Phase::EnhancePrompt, done, total, {}});
    };
    if (progress)
        progress({Ltx2Phase::EnhancePrompt, 0, req.enhancerMaxTokens > 0 ? req.enhancerMaxTokens : (selfEnhancer ? 512 : 600), {}});
    // diffusers shows the enhancer the first condition's first frame (enhance_i2v).
    const at::Tensor firstFrame = req.conditions.empty() ? at::Tensor() : req.conditions.front().pixels.select(0, 0);
    // The frame to an enhancer that can see it; the note says which (unless it already says why not).
    const auto show = [&](const ltx2::PromptEnhancer& enhancer) {
        if (!firstFrame.defined() || !enhancerImageNote.empty())
            return;
        if (const auto why = enhancer.whyBlind(); !why.empty()) {
            enhancerImageNote = "the enhancer read the prompt alone, not the first frame: " + why;
        } else {
            o.image = firstFrame;
            enhancerImageNote = "the enhancer was shown the first condition's first frame";
        }
    };
    if (!enhancerPath) {
        // The text encoder loads now rather than for the encoding, which then reuses it.
        loadText(progress);
        // Its vision tower only for the enhancement, freed with it.
        std::shared_ptr<const gemma3::VisionTower> vision;
        if (firstFrame.defined()) {
            auto loaded = gemma3::VisionTower::load(textEncoderPath, onDevice<gemma3::VisionLoadOptions>(textDevice(), options.dtype));
            if (loaded)
                vision = std::make_shared<const gemma3::VisionTower>(std::move(*loaded));
            else if (loaded.error().code == ErrorCode::NotFound)
                enhancerImageNote = "the enhancer read the prompt alone, not the first frame: " + loaded.error().message;
            else
                throw loaded.error();
        }
        auto self = take(ltx2::PromptEnhancer::sharing(*textEncoder, tokenizer, textEncoderPath.string(), tokenizerFolder, vision));
        show(self);
        auto out = take(self.enhance(text::stripPythonWhitespace(req.prompt), o, stop));
        return out;
    }
    // The enhancer runs on the text encoder's device and is freed before anything else runs;
    // where that device has not the room beside what is loaded, on the CPU, and the output says so.
    // Shown a first frame, its vision tower loads with it.
    auto device = textDevice();
    if (device.is_cuda()) {
        const auto bytes = ltx2::PromptEnhancer::bytes(*enhancerPath, options.dtype);
        const auto need = bytes.device + (firstFrame.defined() ? bytes.vision : 0);
        releaseCachedDeviceMemory();
        const auto room = cudaMemoryInfo(device).first;
        constexpr std::int64_t kWorking = std::int64_t{1} << 30;  // the cache and activations of 600 tokens, with room to spare
        if (need + kWorking > room) {
            enhancerCpuNote = "the prompt enhancer ran on the CPU: it needs " + humanBytes(static_cast<std::uint64_t>(need + kWorking))
                + " on " + device.str() + ", which has " + humanBytes(static_cast<std::uint64_t>(std::max<std::int64_t>(room, 0)))
                + " free beside the model";
            log::warn(enhancerCpuNote);
            device = c10::Device(c10::kCPU);
        }
    }
    auto enhancer = take(
        ltx2::PromptEnhancer::load(*enhancerPath, onDevice<gemma3::TextEncoderLoadOptions>(device, options.dtype), firstFrame.defined()));
    show(enhancer);
    auto out = take(enhancer.enhance(text::stripPythonWhitespace(req.prompt), o, stop));
    return out;
}

Ltx2Output Ltx2Pipeline::Impl::run(
    const Ltx2Request& original, const std::function<void(const Ltx2Progress&)>& progress, std::stop_token stop)
{
    checkRequest(original);
    std::optional<Ltx2Request> rewritten;
    std::optional<ltx2::EnhancedPrompt> enhanced;
    double enhanceSeconds = 0;
    if (original.enhancePrompt) {
        const auto start = Clock::now();
        enhancerCpuNote.clear();
        enhancerImageNote.clear();
        enhanced = enhancePrompt(original, progress, stop);
        if (stop.stop_requested())
            throw Cancelled{};
        rewritten = original;
        rewritten->prompt = enhanced->prompt;
        rewritten->enhancePrompt = false;
        enhanceSeconds = std::chrono::duration<double>(Clock::now() - start).count();
    }
    const auto& asked = rewritten ? *rewritten : original;
    Run prompted{asked, progress, stop, {}, asked.frames, asked.fps};
    if (enhanced) {
        prompted.out.enhancedPrompt = enhanced->prompt;
        prompted.out.enhancerTokens = enhanced->tokens;
        prompted.out.enhancerCut = !enhanced->stoppedAtEos;
        prompted.out.secondsPerPhase["enhance prompt"] = enhanceSeconds;
        std::vector<std::string> notes;
        if (enhanced->decoding.rfind("sampled", 0) == 0)
            notes.push_back("written by the text encoder (Gemma 3), " + enhanced->decoding);
        if (!enhanced->chatNote.empty()) {
            log::warn("LTX-2: the prompt enhancer's chat: " + enhanced->chatNote);
            notes.push_back(enhanced->chatNote);
        }
        if (!enhancerImageNote.empty())
            notes.push_back(enhancerImageNote);
        if (!enhancerCpuNote.empty())
            notes.push_back(enhancerCpuNote);
        for (const auto& n : notes)
            prompted.out.enhancerNote += (prompted.out.enhancerNote.empty() ? "" : "; ") + n;
    }
    const auto ctx = encodePrompt(prompted);
    // A length left on auto: the duration head reads it from the prompt's connector outputs (the
    // positive prompt's, the last under guidance), then the request runs as if it had been given.
    std::optional<Ltx2Request> resolved;
    if (asked.frames == 0) {
        resolved = asked;
        resolved->frames = asked.audio ? framesForAudio(prompted) : predictFrames(prompted, ctx);
        checkRequest(*resolved);
    }
    const auto& req = resolved ? *resolved : asked;
    Run run{req, progress, stop, std::move(prompted.out), req.frames, req.fps};
    run.detailWidth = req.dfrEpilogue ? req.width / 2 : req.width;
    run.detailHeight = req.dfrEpilogue ? req.height / 2 : req.height;
    auto& out = run.out;
    out.twoStage = req.twoStage;
    auto generator = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(req.seed));
    run.generator = &generator;
    std::optional<DfrCanvas> canvas;
    if (req.dfr)
        canvas = take(dfrCanvas(req.frames));
    out.dfrCanvas = canvas;
    Pass pass;
    if (canvas) {
        const bool half = req.twoStage;
        pass = startDfrPass(run, generator, *canvas,
            {half ? run.detailWidth / 2 : run.detailWidth, half ? run.detailHeight / 2 : run.detailHeight,
                req.dfrStart ? &*req.dfrStart : nullptr, &req.videoNoise, &req.audioNoise});
    } else {
        pass = startPass(run, generator);
    }

    // 4. Denoising.
    auto start = Clock::now();
    loadTransformer(progress);
    run.timed("load transformer", start);
    start = Clock::now();
    // The dev recipes' stage 2 is noise without the distilled LoRA: one that matches nothing
    // here is refused from its header before stage 1 runs.
    if (req.distilledLora) {
        auto report = lora::inspect(req.distilledLora->path, loraTargets());
        if (!report || !report->usable())
            throw makeError(ErrorCode::InvalidArgument,
                "the distilled LoRA " + req.distilledLora->path.filename().string() + " cannot be applied to this model ("
                    + (report ? std::string("none of its modules matches this transformer") : report.error().message)
                    + "); give the distilled LoRA of this LTX version");
    }
    // The HQ recipe's stage 1 runs with the distilled LoRA too, at its own strength.
    auto stage1Loras = req.loras;
    if (req.icLora)
        stage1Loras.push_back(*req.icLora);
    if (req.distilledLora && req.distilledLoraStage1Strength)
        stage1Loras.push_back({req.distilledLora->path, *req.distilledLoraStage1Strength});
    if (stage1Loras != appliedLoras) {
        applyLoras(stage1Loras);
        run.timed("apply loras", start);
        start = Clock::now();
    }
    out.loras = loraOutcomes;
    // The IC-LoRA is what the references are for: one that matches nothing fails the run.
    if (req.icLora && loraOutcomes.size() > req.loras.size()) {
        const auto& ic = loraOutcomes[req.loras.size()];
        if (ic.status.rfind("refused", 0) == 0 || ic.matched == 0)
            throw makeError(ErrorCode::InvalidArgument,
                "the IC-LoRA " + req.icLora->path.filename().string() + " cannot be applied to this model (" + ic.status
                    + "); give an IC-LoRA made for LTX-" + transformerConfig.version());
    }
    if (req.distilledLora && req.distilledLoraStage1Strength && !loraOutcomes.empty()
        && (loraOutcomes.back().status.rfind("refused", 0) == 0 || loraOutcomes.back().matched == 0))
        throw makeError(ErrorCode::InvalidArgument,
            "the distilled LoRA " + req.distilledLora->path.filename().string() + " cannot be applied to this model ("
                + loraOutcomes.back().status + "); give the distilled LoRA of this LTX version");
    ltx2::TransformerInputs in;
    in.encoderHiddenStates = ctx.video;
    in.audioEncoderHiddenStates = ctx.audio;
    in.encoderAttentionMask = ctx.mask;
    in.audioEncoderAttentionMask = ctx.mask;
    in.audioNumFrames = pass.audioLatents.size(1);
    in.fps = canvas ? dfrConditioningFps(req.fps) : req.fps;
    in.useCrossTimestep = true;  // the pipeline's default
    in.stop = stop;
    // ltx-pipelines samples stage 1 of LTX-2.5 and later ancestrally (should_use_ancestral_sampler).
    if (req.fast && transformerConfig.keyframesAbsPosEmbedding) {
        pass.ancestral = at::make_generator<at::CPUGeneratorImpl>(static_cast<std::uint64_t>(req.seed) + kFastNoiseSeedOffset);
        pass.ancestralEta = kFastAncestralEta;
        pass.ancestralAudio = true;
    }
    denoisePass(run, pass, in);
    run.timed("denoise", start);
    run.checkStop();
    if (req.twoStage) {
        out.stage1VideoLatents = pass.dfr ? pass.allTokens : pass.latents;
        out.stage1AudioLatents = pass.audioLatents;
        if (canvas)
            refineDfrAtFullSize(run, pass, in, generator, *canvas);
        else
            refineAtFullSize(run, pass, in, generator);
    }
    if (canvas && req.temporalRounds > 0) {
        // The canvas without its slots: what the rounds upsample.
        pass.latents = pass.latents.narrow(1, 0, pass.baseTokens).contiguous();
        temporalRefine(run, pass, in, generator, *canvas);
    }
    if (canvas && req.dfrEpilogue) {
        // The time tiles are cut where the last round cut its own: the keyframes it was given.
        const auto rounds = req.temporalRounds;
        std::vector<std::int64_t> seams = rounds < 2 ? canvas->slots : out.roundPositions[static_cast<std::size_t>(rounds) - 2];
        if (rounds > 0)
            for (auto& p : seams)
                p *= 2;
        dfrEpilogue(run, pass, in, generator, seams);
    }
    out.finalVideoLatents = pass.dfr ? pass.allTokens : pass.latents;
    out.finalAudioLatents = pass.audioLatents;
    if (pass.dfr) {
        // The padded canvas is trimmed to the frames asked for (utils.trim_canvas); the audio is
        // cut to their duration when decoded.
        out.slotLatents = pass.slots;
        const auto keep = (run.frames - 1) / 8 + 1;
        pass.latents = pass.latents.narrow(1, 0, keep * pass.latentH * pass.latentW).contiguous();
        pass.latentFrames = keep;
        pass.baseTokens = pass.latents.size(1);
    }
    decodeVideo(run, pass);
    decodeAudio(run, pass);
    if (req.retake)
        spliceRetake(run);
    if (req.audioPrefix)
        splicePrefix(run);
    return std::move(run.out);
}

Result<void> Ltx2Pipeline::load(const std::function<void(const Ltx2Progress&)>& progress, std::stop_token stop)
{
    quant::ScopedLoadStop loadStop(stop);
    try {
        if (!m_impl->options.releaseTextEncoder)
            m_impl->loadText(progress);
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        m_impl->loadTransformer(progress);
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        m_impl->loadDecoders(progress);
        // Everything a run can need is in place before it starts: a conditioned request loads
        // nothing mid-run (only a text encoder the placement releases after each prompt does).
        m_impl->loadVideoEncoder();
        m_impl->loadAudioEncoder();
        m_impl->loadUpsampler();
        m_impl->loadTemporalUpsampler();
        if (m_impl->noDurationHead.empty() && !m_impl->durationHead)
            m_impl->durationHead = take(ltx2::DurationHead::load(m_impl->weights, m_impl->options.device, m_impl->options.dtype));
    } catch (const Error& e) {
        release();
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return e;
    } catch (const std::exception& e) {
        release();
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return errorFromException(e, "loading LTX-2 from " + m_impl->weights.describeFiles());
    }
    if (stop.stop_requested()) {
        release();
        return makeError(ErrorCode::Cancelled, "cancelled");
    }
    return {};
}

void Ltx2Pipeline::release()
{
    auto& m = *m_impl;
    m.textEncoder.reset();
    m.tokenizer.reset();
    m.connectors.reset();
    m.transformer.reset();
    m.videoDecoder.reset();
    m.diffusionDecoder.reset();
    m.audioDecoder.reset();
    m.vocoder.reset();
    m.videoEncoder.reset();
    m.audioEncoder.reset();
    m.upsampler.reset();
    m.temporalUpsampler.reset();
    m.durationHead.reset();
    m.previewProjection = at::Tensor();
    heap::releaseFreeMemory();
    releaseCachedDeviceMemory();
}

Result<at::Tensor> Ltx2Pipeline::previewProjection()
{
    auto& m = *m_impl;
    if (m.previewProjection.defined())
        return m.previewProjection;
    try {
        m.loadDecoders({});
        const auto channels = m.transformerConfig.inChannels;
        constexpr std::int64_t kCells = 16;
        // A fixed generator: the same model always gets the same projection.
        auto generator = at::make_generator<at::CPUGeneratorImpl>(20261201);
        const auto z = at::randn({1, channels, 1, kCells, kCells}, generator, at::TensorOptions().dtype(at::kFloat));
        at::Tensor decoded;  // [1, 3, 1, 32 n, 32 n]
        if (m.videoDecoder) {
            decoded = take(m.videoDecoder->decode(z.to(m.options.device, m.options.dtype)));
        } else {
            // Only the diffusion decoder: its noise from the same fixed generator.
            const auto& d = *m.diffusionDecoder;
            const auto denormalized = z.to(d.latentsMean().device()) * d.latentsStd().view({1, -1, 1, 1, 1}) / d.config().scalingFactor
                + d.latentsMean().view({1, -1, 1, 1, 1});
            ltx2::DiffusionDecodeOptions o;
            o.noise = [&](const std::vector<std::int64_t>& shape) {
                return at::randn(shape, generator, at::TensorOptions().dtype(at::kFloat));
            };
            decoded = take(d.decode(denormalized.to(m.options.dtype), o));
        }
        m.previewProjection = fitPreviewProjection(z[0].select(1, 0), decoded[0].select(1, 0));
        return m.previewProjection;
    } catch (const Error& e) {
        return e;
    } catch (const std::exception& e) {
        return errorFromException(e, "preview projection");
    }
}

Ltx2StoredSizes Ltx2Pipeline::storedSizes() const
{
    const auto& m = *m_impl;
    Ltx2StoredSizes out;
    const int computeBytes = static_cast<int>(c10::elementSize(m.options.dtype));
    // Bytes per stored form of the matrix weights, for the dominant form of a component.
    std::map<std::string, std::map<capability::WeightFormat, std::int64_t>> formBytes;
    auto count = [&](const std::string& component, const tensorfile::Checkpoint& cp, const tensorfile::TensorInfo& t, bool loaded = true) {
        out.componentBytes[component] += static_cast<std::int64_t>(t.bytes);
        if (!loaded)
            return;  // on disk, never in memory
        out.componentHeldBytes[component] += quant::heldBytes(cp, t, computeBytes);
        out.heldBytesF32 += quant::heldBytes(cp, t, 4);
        if (t.shape.size() == 2 && t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".weight") == 0)
            formBytes[component][quant::storedFormat(cp, t)] += static_cast<std::int64_t>(t.bytes);
    };
    const std::pair<ltx2::Part, const char*> parts[] = {{ltx2::Part::Transformer, "transformer"}, {ltx2::Part::Connectors, "connectors"},
        {ltx2::Part::VideoVae, "video_vae"}, {ltx2::Part::AudioVae, "audio_vae"}, {ltx2::Part::Vocoder, "vocoder"},
        {ltx2::Part::DurationHead, "duration_head"}, {ltx2::Part::DiffusionDecoder, "diffusion_decoder"}};
    std::map<std::string, std::int64_t> blockBytes;
    for (const auto& [part, component] : parts) {
        if ((part == ltx2::Part::DurationHead || part == ltx2::Part::DiffusionDecoder) && m.weights.tensors(part).empty())
            continue;  // optional: not in the files, no component
        out.componentBytes[component] += 0;
        out.componentHeldBytes[component] += 0;
        for (const auto& [name, t] : m.weights.tensors(part)) {
            // The video VAE encoder is loaded only for conditioned requests.
            const bool encoder = part == ltx2::Part::VideoVae && name.rfind("encoder.", 0) == 0;
            // The audio VAE's encoder and spare statistics are never loaded (generation only decodes).
            const bool unused =
                part == ltx2::Part::AudioVae && (name.rfind("encoder.", 0) == 0 || name.rfind("per_channel_statistics.", 0) == 0);
            count(encoder ? "video_encoder" : component, *t.checkpoint, *t.info, !unused);
            if (part == ltx2::Part::Transformer && name.rfind("transformer_blocks.", 0) == 0)
                blockBytes[name.substr(0, name.find('.', 19))] += quant::heldBytes(*t.checkpoint, *t.info, computeBytes);
        }
    }
    for (const auto& [path, component] : {std::pair{m.options.spatialUpsamplerPath, "spatial_upsampler"},
             std::pair{m.options.temporalUpsamplerPath, "temporal_upsampler"}}) {
        if (!path)
            continue;
        out.componentBytes[component] += 0;
        if (auto source = tensorfile::ModelSource::open(*path))
            for (const auto& cp : source->checkpoints)
                for (const auto& t : cp.tensors)
                    count(component, cp, t);
    }
    for (const auto& [_, b] : blockBytes)
        out.transformerBlockBytes = std::max(out.transformerBlockBytes, b);
    out.componentBytes["text_encoder"] += 0;
    if (auto source = tensorfile::ModelSource::open(m.textEncoderPath))
        for (const auto& cp : source->checkpoints)
            for (const auto& t : cp.tensors)
                if (!gemma3::isUnusedByTextEncoder(t.name))
                    count("text_encoder", cp, t);
    for (const auto& [component, forms] : formBytes)
        out.componentFormats[component] = capability::dominantFormat(forms);
    const auto& c = m.transformerConfig;
    out.videoDim = c.dim();
    out.audioDim = c.audioDim();
    out.layers = c.layers;
    out.latentChannels = c.inChannels;
    if (auto ff = m.weights.shape(ltx2::Part::Transformer, "transformer_blocks.0.ff.net.0.proj.weight"))
        out.ffnDim = (*ff)[0];
    return out;
}

Result<Ltx2Output> Ltx2Pipeline::generate(
    const Ltx2Request& request, const std::function<void(const Ltx2Progress&)>& progress, std::stop_token stop)
{
    // Whatever the outcome, the run's temporaries go back to the system.
    struct Release {
        ~Release() { heap::releaseFreeMemory(); }
    } release;
    try {
        return m_impl->run(request, progress, stop);
    } catch (const Cancelled&) {
        return makeError(ErrorCode::Cancelled, "cancelled");
    } catch (const Error& e) {
        if (e.code == ErrorCode::Cancelled || stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return e;
    } catch (const std::exception& e) {
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        // Out of memory on any device is one error code everywhere; a CUDA fault another.
        return errorFromException(e, "LTX-2 pipeline");
    }
}

}  // namespace vireo::pipelines
