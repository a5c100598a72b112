#include "inference/models/ltx2/ltx2family.h"
#include "base/envswitch.h"

#include "inference/families/common.h"
#include "inference/lora/lora.h"
#include "inference/models/ltx2/ltx2audioprep.h"
#include "inference/models/ltx2/ltx2diffusiondecoder.h"
#include "inference/models/ltx2/ltx2durationhead.h"
#include "inference/models/ltx2/ltx2promptenhancer.h"
#include "inference/models/ltx2/ltx2pipeline.h"
#include "inference/models/ltx2/ltx2transformer.h"
#include "inference/models/ltx2/ltx2videovae.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/util/device.h"
#include "inference/util/format.h"
#include "inference/util/pathstats.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <regex>
#include <sstream>
#include <tuple>

namespace vireo::ltx2 {

using namespace facade;
using families::describeDevice;
using families::dtypeName;
using families::lower;
using families::makePreview;
using families::planPathsInto;
using families::previewDue;
using families::previewProjectionFor;

namespace {

// A decoded sound as the pipeline takes it ([channels, samples] float), or why it is not one.
Result<pipelines::Ltx2AudioCondition> soundOf(const AudioInput& a, const std::string& name)
{
    if (a.channels.empty() || a.channels.size() > 2)
        return makeError(ErrorCode::InvalidArgument, name + " must have one or two channels");
    if (a.frames() == 0)
        return makeError(ErrorCode::InvalidArgument, name + " holds no samples");
    auto wave = at::empty({static_cast<std::int64_t>(a.channels.size()), a.frames()}, at::kFloat);
    for (std::size_t i = 0; i < a.channels.size(); ++i) {
        if (static_cast<std::int64_t>(a.channels[i].size()) != a.frames())
            return makeError(ErrorCode::InvalidArgument, name + ": its channels differ in length");
        std::copy(a.channels[i].begin(), a.channels[i].end(), wave[static_cast<std::int64_t>(i)].data_ptr<float>());
    }
    return pipelines::Ltx2AudioCondition{wave, a.sampleRate};
}

// The sample rates an AAC stream can carry (ISO 14496-3's table; FFmpeg's encoder takes these).
bool aacTakes(int rate)
{
    for (const int r : {96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350})
        if (rate == r)
            return true;
    return false;
}

std::vector<LoraOutcome> outcomesOf(const std::vector<pipelines::Ltx2LoraOutcome>& in)
{
    std::vector<LoraOutcome> out;
    for (const auto& o : in)
        out.push_back({o.path, o.strength, o.status, o.matched, o.unmatched, o.refusedKeys, o.deviceBytes, o.report});
    return out;
}

// The upsampler the plan names, else the `folder` of a diffusers model folder (where
// Lightricks' diffusers repos keep it).
std::optional<std::filesystem::path> companionOf(
    const LoadPlan& plan, const std::optional<std::filesystem::path>& given, const char* folder)
{
    if (given)
        return given;
    std::error_code ec;
    for (const auto& p : plan.modelPaths)
        if (std::filesystem::is_regular_file(p / folder / "config.json", ec))
            return p / folder;
    return std::nullopt;
}

std::optional<std::filesystem::path> upsamplerOf(const LoadPlan& plan)
{
    return companionOf(plan, plan.spatialUpsamplerPath, "latent_upsampler");
}

// The prompt enhancer: the one the plan gives, else a model folder's prompt_enhancer/.
std::optional<std::filesystem::path> promptEnhancerOf(const LoadPlan& plan)
{
    if (plan.promptEnhancerPath)
        return plan.promptEnhancerPath;
    for (const auto& p : plan.modelPaths)
        if (ltx2::PromptEnhancer::present(p))
            return p;
    return std::nullopt;
}

// The LTX version a LoRA's name gives: its file's ("ltx-2.3-22b-lora-cinemagraph", LTX-2's
// "ltx-2-19b-..."), else the Hub repository's it was downloaded from (the cache's
// "models--Lightricks--LTX-2.3-..." folder); empty where neither says. The files themselves carry
// no version (Lightricks' trainer writes none, and 2.3's shapes are 2.5's).
std::string loraNamedVersion(const std::filesystem::path& path)
{
    static const std::regex v23(R"(ltx[-_ .]?2[._-]3)", std::regex::icase), v20(R"(ltx[-_ .]?2[-_]19b)", std::regex::icase);
    const auto versionOf = [&](const std::string& name) {
        return std::regex_search(name, v23) ? std::string("2.3") : std::regex_search(name, v20) ? std::string("2.0") : std::string();
    };
    if (auto v = versionOf(path.filename().string()); !v.empty())
        return v;
    for (const auto& part : path)
        if (part.string().rfind("models--", 0) == 0)
            return versionOf(part.string());
    return {};
}

// The temporal x2 upsampler of LTX-2.5's temporal refine rounds.
std::optional<std::filesystem::path> temporalUpsamplerOf(const LoadPlan& plan)
{
    return companionOf(plan, plan.temporalUpsamplerPath, "temporal_latent_upsampler");
}

// A whole-number control from 0 to maximum, default 0.
facade::Knob choiceKnob(const char* id, const char* label, const char* help, double maximum)
{
    facade::Knob k;
    k.id = id;
    k.label = label;
    k.help = help;
    k.minimum = 0;
    k.maximum = maximum;
    k.defaultValue = 0;
    k.step = 1;
    k.decimals = 0;
    return k;
}

// The family's own control of LTX-2.5's temporal refine rounds.
facade::Knob temporalRoundsKnob()
{
    return choiceKnob("temporal_rounds", "Temporal rounds",
        "LTX-2.5 with a temporal upsampler: each round doubles the frame rate and the frames (0: none)", 2);
}

// LTX-2.5's third spatial stage (Lightricks' 4K path), after the second pass and the rounds.
facade::Knob thirdStageKnob()
{
    return choiceKnob("third_stage", "Third spatial stage",
        "LTX-2.5 with a spatial upsampler, two passes: 1 adds a third, tiled detailing pass at the size asked (stage 1 at a "
        "quarter of it, the second pass at half; width and height multiples of 128, 4K is 3840x2176)",
        1);
}

// Which decoder makes the pixels, where LTX-2.5's files carry a diffusion video decoder.
facade::Knob videoDecoderKnob()
{
    return choiceKnob("video_decoder", "Video decoder",
        "0: the checkpoint's (LTX-2.5's diffusion decoder where it ships one), 1: the VAE's decoder, 2: the diffusion decoder", 2);
}

facade::Knob scaleKnob(const char* id, const char* label, const char* help, double neutral)
{
    facade::Knob k;
    k.id = id;
    k.label = label;
    k.help = help;
    k.minimum = 0;
    k.maximum = 10;
    k.defaultValue = neutral;
    k.step = 0.1;
    k.decimals = 2;
    return k;
}

// STG and modality guidance (diffusers' LTX2Pipeline): neutral by default, so a distilled run
// keeps one forward per step; the dev variants' catalog defaults turn them on.
facade::Knob stgScaleKnob()
{
    return scaleKnob("stg_scale", "STG", "Spatio-temporal guidance for the video (0: off): one more forward per step", 0.0);
}
facade::Knob audioStgScaleKnob()
{
    return scaleKnob("audio_stg_scale", "Audio STG", "Spatio-temporal guidance for the audio (0: off)", 0.0);
}
facade::Knob modalityScaleKnob()
{
    return scaleKnob("modality_scale", "Modality guidance",
        "Guidance away from the video made without the audio (1: off): one more forward per step", 1.0);
}
facade::Knob audioModalityScaleKnob()
{
    return scaleKnob(
        "audio_modality_scale", "Audio modality guidance", "Guidance away from the audio made without the video (1: off)", 1.0);
}
facade::Knob stgBlockKnob()
{
    facade::Knob k;
    k.id = "stg_block";
    k.label = "STG block";
    k.help = "The transformer block STG perturbs (-1: the version's, 29 for LTX-2.0 and 28 for LTX-2.3)";
    k.minimum = -1;
    k.maximum = 63;
    k.defaultValue = -1;
    k.step = 1;
    k.decimals = 0;
    return k;
}

// A strength from 0 to 2, or -1 for the recipe's own.
facade::Knob recipeStrengthKnob(const char* id, const char* label, const char* help)
{
    auto k = scaleKnob(id, label, help, -1.0);
    k.minimum = -1;
    k.maximum = 2;
    return k;
}

// Lightricks' dev two-stage recipes: the distilled LoRA in the refining stage (1 in the dev
// recipe, 0.5 in HQ), and in stage 1 too in HQ (0.25).
facade::Knob distilledLoraStrengthKnob()
{
    return recipeStrengthKnob("distilled_lora_strength", "Distilled LoRA",
        "The distilled LoRA's strength in the dev two-stage recipe's refining stage (-1: the recipe's, 1, or 0.5 in HQ)");
}
facade::Knob distilledLoraStage1StrengthKnob()
{
    return recipeStrengthKnob("distilled_lora_stage1_strength", "Distilled LoRA, stage 1",
        "The distilled LoRA's strength in the dev two-stage recipe's first stage (-1: the recipe's, none, or 0.25 in HQ)");
}
// ltx-pipelines' distilled pipeline, LTX Desktop's "Fast" (on LTX-2.5 instead of the DFR recipe).
facade::Knob fastKnob()
{
    return choiceKnob("fast", "Fast recipe",
        "1: LTX Desktop's Fast, ltx-pipelines' distilled two-stage pipeline: stage 1 at half size (on LTX-2.5 with the ancestral "
        "sampler and no keyframe slots), latent upsample x2, 3 refining steps; the distilled schedule without guidance",
        1);
}
// ltx-pipelines' HQ recipe (ti2vid_two_stages_hq) instead of its dev two-stage one.
facade::Knob hqKnob()
{
    return choiceKnob("hq", "HQ recipe",
        "1: the dev model's HQ recipe: the res2s sampler in both stages, the distilled LoRA in both (Lightricks' preset for what "
        "is left unset: 15 steps, no STG, rescale 0.45 / audio 1)",
        1);
}
// The audio's own rescale (ltx-core rescales each stream with its own amount).
facade::Knob audioRescaleKnob()
{
    auto k = scaleKnob("audio_guidance_rescale", "Audio rescale", "The audio guidance's rescale (-1: the video's)", -1.0);
    k.minimum = -1;
    k.maximum = 1;
    return k;
}

// The guidance branches beyond CFG that a request's knobs turn on (STG, modality; diffusers'
// gating): a forward each, or a batch row each where batched.
int guidanceBranches(const std::map<std::string, double>& knobs)
{
    const auto value = [&](const facade::Knob& k) {
        const auto it = knobs.find(k.id);
        return it == knobs.end() ? k.defaultValue : it->second;
    };
    return (value(stgScaleKnob()) > 0.0 || value(audioStgScaleKnob()) > 0.0 ? 1 : 0)
        + (value(modalityScaleKnob()) > 1.0 || value(audioModalityScaleKnob()) > 1.0 ? 1 : 0);
}

// Any guidance branch: CFG, STG or modality (each adds forwards; none runs on the distilled paths).
bool anyGuidance(const GenerateRequest& r)
{
    return r.guidance > 1.0 || r.audioGuidance > 1.0 || guidanceBranches(r.knobs) > 0;
}

// The distilled LoRA's strengths in the dev two-stage recipes (stage 1: none outside HQ unless
// asked), from the knobs or the recipe's own.
std::pair<std::optional<double>, double> distilledStrengths(const GenerateRequest& r)
{
    const bool hq = r.knob(hqKnob()) == 1;
    const auto s1 = r.knob(distilledLoraStage1StrengthKnob()), s2 = r.knob(distilledLoraStrengthKnob());
    std::optional<double> stage1;
    if (s1 >= 0)
        stage1 = s1;
    else if (hq)
        stage1 = 0.25;
    return {stage1, s2 >= 0 ? s2 : hq ? 0.5 : 1.0};
}

// The guidance of a pipeline request, from the generic one's fields and knobs.
void setGuidance(pipelines::Ltx2Request& req, const GenerateRequest& r)
{
    req.guidanceScale = r.guidance;
    req.audioGuidanceScale = r.audioGuidance;
    req.guidanceRescale = r.guidanceRescale;
    req.stgScale = r.knob(stgScaleKnob());
    req.audioStgScale = r.knob(audioStgScaleKnob());
    req.modalityScale = r.knob(modalityScaleKnob());
    req.audioModalityScale = r.knob(audioModalityScaleKnob());
    if (const auto block = r.knob(stgBlockKnob()); block >= 0)
        req.stgBlocks = {static_cast<int>(block)};
    if (const auto rescale = r.knob(audioRescaleKnob()); rescale >= 0)
        req.audioGuidanceRescale = rescale;
}

// "; guidance: CFG 3 / 7, STG 1 / 1 on block 28, ..." for the stage reason (nothing without any).
std::string guidanceNote(const std::string& described)
{
    return described.empty() || described == "none" ? std::string() : "; guidance: " + described;
}

pipelines::Ltx2VideoDecode videoDecodeOf(const GenerateRequest& request)
{
    const auto v = request.knob(videoDecoderKnob());
    return v == 1 ? pipelines::Ltx2VideoDecode::Vae : v == 2 ? pipelines::Ltx2VideoDecode::Diffusion : pipelines::Ltx2VideoDecode::Auto;
}

pipelines::Ltx2PipelineOptions pipelineOptions(const LoadPlan& plan, c10::Device device, c10::ScalarType dtype, Placement placement)
{
    pipelines::Ltx2PipelineOptions o;
    o.modelPaths = plan.modelPaths;
    o.textEncoderPath = plan.textEncoderPath;
    o.device = device;
    o.dtype = dtype;
    // The text encoder is the largest component after the transformer and runs once per
    // request: it is released after encoding, unless everything stays resident.
    o.releaseTextEncoder = placement != Placement::AllResident;
    if (placement == Placement::TextEncoderOnCpu || placement == Placement::OffloadTransformerBlocks)
        o.textEncoderDevice = c10::Device(c10::kCPU);
    o.offloadTransformerBlocks = placement == Placement::OffloadTransformerBlocks;
    o.spatialUpsamplerPath = upsamplerOf(plan);
    o.temporalUpsamplerPath = temporalUpsamplerOf(plan);
    o.promptEnhancerPath = plan.promptEnhancerPath;
    return o;
}

Phase phaseOf(pipelines::Ltx2Phase p)
{
    using P = pipelines::Ltx2Phase;
    switch (p) {
    case P::EnhancePrompt: return Phase::EnhancePrompt;
    case P::LoadText: return Phase::LoadTextEncoder;
    case P::Encode: return Phase::EncodePrompt;
    case P::LoadTransformer: return Phase::LoadTransformer;
    case P::Denoise: return Phase::Denoise;
    case P::LoadDecoders: return Phase::LoadDecoders;
    case P::DecodeVideo: return Phase::DecodeVideo;
    case P::DecodeAudio: return Phase::DecodeAudio;
    case P::Vocoder: return Phase::Vocoder;
    case P::EncodeConditions: return Phase::EncodeConditions;
    case P::UpsampleLatents: return Phase::UpsampleLatents;
    case P::Refine: return Phase::Refine;
    case P::TemporalRefine: return Phase::TemporalRefine;
    case P::ThirdStage: return Phase::ThirdStage;
    }
    return Phase::Denoise;
}

// The LTX-2 weights held once loaded, by where they can go.
struct Ltx2Held {
    std::int64_t text = 0, transformer = 0, rest = 0;
};

// The fastest placement that fits the budget (or the one asked for), with its peaks and, when
// none fits, the shortfall.
void placeLtx2(MemoryPlan& m, const LoadPlan& plan, c10::Device device, const pipelines::Ltx2StoredSizes& sizes, const Ltx2Held& held)
{
    // Plain copies, not a structured binding: the lambdas below capture them (C++20 allows it,
    // clang-tidy 14 does not).
    const std::int64_t text = held.text, transformer = held.transformer, rest = held.rest;
    const std::int64_t margin = 512ll << 20;  // CUDA context, cuBLAS workspaces, fragmentation
    struct Candidate {
        Placement placement;
        std::int64_t deviceWeights, hostWeights, devicePeak, hostPeak;
    };
    auto candidate = [&](Placement p) {
        Candidate c{p, 0, 0, 0, 0};
        const auto work = std::max({m.activationBytes, m.decodeBytes});
        if (device.is_cpu()) {
            c.hostWeights = text + transformer + rest;
            c.hostPeak = c.hostWeights + std::max(work, m.encodeBytes + m.enhancerHostBytes);
            return c;
        }
        switch (p) {
        case Placement::AllResident:
            c.deviceWeights = text + transformer + rest;
            c.devicePeak = c.deviceWeights + std::max(work, m.encodeBytes) + margin;
            break;
        case Placement::TextEncoderOnCpu:
            c.deviceWeights = transformer + rest;
            c.hostWeights = text;
            c.devicePeak = c.deviceWeights + work + margin;
            c.hostPeak = text + m.encodeBytes;
            break;
        default: {
            const auto streamed = transformer - sizes.transformerBlockBytes * sizes.layers;
            c.deviceWeights = std::max<std::int64_t>(0, streamed) + 2 * sizes.transformerBlockBytes + rest;
            c.hostWeights = text + sizes.transformerBlockBytes * sizes.layers;
            c.devicePeak = c.deviceWeights + work + margin;
            c.hostPeak = c.hostWeights + m.encodeBytes;
            break;
        }
        }
        // The enhancer's per-layer table is in RAM only while it writes, before the encoding.
        c.hostPeak = std::max(c.hostPeak, c.hostWeights + m.enhancerHostBytes);
        return c;
    };
    auto fits = [&](const Candidate& c) {
        const bool deviceOk = device.is_cpu() || c.devicePeak <= m.budget.deviceFreeBytes;
        return deviceOk && c.hostPeak <= m.budget.hostAvailableBytes;
    };
    std::vector<Placement> order;
    if (plan.placement != Placement::Auto)
        order = {plan.placement};
    else if (device.is_cpu())
        order = {Placement::AllResident};
    else
        order = {Placement::AllResident, Placement::TextEncoderOnCpu, Placement::OffloadTransformerBlocks};
    Candidate chosen = candidate(order.back());
    m.fits = false;
    for (auto p : order) {
        const auto c = candidate(p);
        if (fits(c)) {
            chosen = c;
            m.fits = true;
            break;
        }
    }
    m.placement = chosen.placement;
    m.forced = plan.placement != Placement::Auto;
    m.deviceWeightBytes = chosen.deviceWeights;
    m.hostWeightBytes = chosen.hostWeights;
    m.devicePeakBytes = chosen.devicePeak;
    m.hostPeakBytes = chosen.hostPeak;
    if (!m.fits) {
        const auto deviceShort = device.is_cpu() ? 0 : chosen.devicePeak - m.budget.deviceFreeBytes;
        const auto hostShort = chosen.hostPeak - m.budget.hostAvailableBytes;
        m.shortfallBytes = std::max<std::int64_t>({0, deviceShort, hostShort});
    }
}

// The plan in words: what is held, what the size needs, where it goes, and what to do when it
// does not fit.
std::string ltx2Explanation(const MemoryPlan& m, const SizeRequest& size, const capability::DeviceCaps& caps, bool onCpu,
    const Ltx2Held& held, std::int64_t stored, std::int64_t cpuPeak)
{
    const auto [text, transformer, rest] = held;
    const auto& dev = m.device;
    std::ostringstream e;
    e << "LTX-" << m.version << " in " << m.dtype << " on " << (onCpu ? dev : describeDevice(caps)) << ": weights "
      << humanBytes(text + transformer + rest) << " in memory";
    if (stored != text + transformer + rest)
        e << " (" << humanBytes(stored) << " on disk)";
    e << " (transformer " << humanBytes(transformer) << ", text encoder " << humanBytes(text) << "); at " << size.width << "x"
      << size.height << "x" << size.frames << " the transformer needs about " << humanBytes(m.activationBytes)
      << " of working memory and the decoder " << humanBytes(m.decodeBytes) << ". ";
    if (onCpu)
        e << "Everything runs in RAM: peak " << humanBytes(m.hostPeakBytes) << " of " << humanBytes(m.budget.hostAvailableBytes)
          << " available.";
    else
        e << "Placement " << placementName(m.placement) << ": " << humanBytes(m.devicePeakBytes) << " peak on the GPU ("
          << humanBytes(m.budget.deviceFreeBytes) << " free of " << humanBytes(m.budget.deviceTotalBytes) << "), "
          << humanBytes(m.hostPeakBytes) << " in RAM (" << humanBytes(m.budget.hostAvailableBytes) << " available).";
    if (!m.fits) {
        e << " It does not fit: " << humanBytes(m.shortfallBytes) << " short"
          << (m.forced ? " with the chosen placement." : " even with the transformer streamed from RAM.")
          << " Choose a smaller size, fewer frames, a quantized variant (FP8 or GGUF), or free memory.";
        if (!onCpu)
            e << " On the CPU it would need about " << humanBytes(cpuPeak) << " of RAM (" << humanBytes(m.budget.hostAvailableBytes)
              << " available).";
    }
    return e.str();
}

class Loaded final : public families::LoadedModel {
public:
    Loaded(pipelines::Ltx2Pipeline p, LoadPlan loadPlan) : pipeline(std::move(p)), plan(std::move(loadPlan)) {}
    Result<VideoResult> generate(const GenerateRequest& r, const ProgressFn& progress, std::stop_token stop) override;
    Result<std::vector<LoraOutcome>> applyLoras(const std::vector<LoraRequest>& loras) override;
    std::string version() const override { return pipeline.version(); }
    std::vector<std::filesystem::path> files() const override
    {
        // The dev recipes' distilled LoRA changes the output: it is named by its file too.
        auto out = pipeline.files();
        if (plan.distilledLoraPath)
            out.push_back(*plan.distilledLoraPath);
        return out;
    }
    std::map<std::string, std::int64_t> residentBytes() const override { return pipeline.componentBytes(); }
    std::map<std::string, int> matmulPaths() const override { return pipeline.matmulPaths(); }

    pipelines::Ltx2Pipeline pipeline;
    LoadPlan plan;
};

class Family final : public families::ModelFamily {
public:
    FamilyRules rules() const override
    {
        FamilyRules r;
        r.family = "ltx2";
        r.title = "LTX-2";
        r.kind = ModelKind::Video;
        r.sizeMultiple = 32;  // 32-pixel latent cells
        r.frameStep = 8;  // 8 frames per latent frame after the first
        r.sizeUnit = "32-pixel latent cells";
        r.knobs = {temporalRoundsKnob(), thirdStageKnob(), videoDecoderKnob(), stgScaleKnob(), audioStgScaleKnob(), modalityScaleKnob(),
            audioModalityScaleKnob(), stgBlockKnob(), audioRescaleKnob(), hqKnob(), fastKnob(), distilledLoraStrengthKnob(),
            distilledLoraStage1StrengthKnob()};
        // Lightricks' HQ preset (ltx-pipelines LTX_2_3_HQ_PARAMS): 15 steps, no STG, rescale
        // 0.45 for the video and 1 for the audio.
        FamilyRules::Preset hq;
        hq.knob = hqKnob().id;
        hq.steps = 15;
        hq.rescale = 0.45;
        hq.knobs = {{stgScaleKnob().id, 0.0}, {audioStgScaleKnob().id, 0.0}, {audioRescaleKnob().id, 1.0}};
        r.presets = {hq};
        r.autoLength = true;
        r.promptEnhancer = true;
        r.audioInput = true;
        r.retake = true;
        r.references = true;
        return r;
    }
    // The fallback: whatever another family does not claim is tried as LTX-2, whose loader
    // names what is missing.
    bool recognizes(const std::vector<std::filesystem::path>&) const override { return true; }

    Result<ModelFacts> readFacts(const LoadPlan& plan) const override
    {
        ModelFacts facts;
        auto pipeline = pipelines::Ltx2Pipeline::open(pipelineOptions(plan, c10::Device(c10::kCPU), c10::kFloat, Placement::AllResident));
        if (!pipeline)
            return pipeline.error();
        facts.version = pipeline->version();
        std::tie(facts.trainedFor, facts.trainedForEvidence) = pipeline->trainedFor();
        return facts;
    }

    Result<MemoryPlan> planMemory(const LoadPlan& plan, const families::Target& target, const SizeRequest& size,
        const std::optional<MemoryBudget>& budgetIn) const override
    {
        const auto device = target.device;
        const auto& caps = target.caps;
        // Headers only: opened for the CPU whatever the device, so a what-if never touches one.
        auto pipeline = pipelines::Ltx2Pipeline::open(pipelineOptions(plan, c10::Device(c10::kCPU), target.dtype, Placement::AllResident));
        if (!pipeline)
            return pipeline.error();
        const auto sizes = pipeline->storedSizes();
        MemoryPlan m;
        m.pipeline = "ltx2";
        m.version = pipeline->version();
        m.device = device.str();
        m.dtype = dtypeName(target.dtype);
        m.budget = budgetIn ? *budgetIn : measureBudget(plan.device);
        const std::int64_t bytesPerValue = target.dtype == c10::kFloat ? 4 : 2;
        // The working memory, from the shapes (see docs/gpu-notes.md for the measured peaks
        // these were checked against: 0.61 GB of transformer activations at 6144 tokens).
        auto tokens = ((size.frames - 1) / 8 + 1) * (size.height / 32) * (size.width / 32);
        // IC-LoRA reference clips join the first pass's sequence, at most as many tokens each as
        // the clip (a factor of 1): at full size where one pass runs, at half size (a quarter of
        // the tokens) where an upsampler makes it the two-stage path's first stage.
        if (size.references > 0) {
            const auto firstPass = plan.spatialUpsamplerPath ? tokens / 4 : tokens;
            tokens = std::max(tokens, firstPass * (1 + size.references));
        }
        // The third spatial stage's largest forward is one of its tiles, not the whole canvas:
        // half the grid a side and its 12-cell overlap, every latent frame (a frame tile's run-up
        // can reach back over most of them) and a keyframe per 3-frame segment held with them.
        if (const auto it = size.knobs.find("third_stage"); it != size.knobs.end() && it->second == 1.0) {
            const auto frames = (size.frames - 1) / 8 + 1, h = size.height / 32, w = size.width / 32;
            const auto tileH = std::min(h, h / 2 + 13), tileW = std::min(w, w / 2 + 13);
            tokens = (frames + frames / 3 + 1) * tileH * tileW;
        }
        // The guidance branches batched with the conditional forward add a row each.
        const auto batch = (size.guidance ? 2 : 1) + (env::flag("VIREO_BATCH_GUIDANCE") ? guidanceBranches(size.knobs) : 0);
        m.activationBytes = tokens * batch * (sizes.ffnDim * 2 + sizes.videoDim * 8) * bytesPerValue;
        const std::int64_t textTokens = 1024;
        m.encodeBytes = batch * textTokens * 3840 * 49 * bytesPerValue + (64ll << 20);
        // The prompt enhancer runs before the encoding on the same device, and is freed before
        // it: that phase's memory is its weights and its cache, whichever of the two is more.
        if (size.enhancePrompt) {
            if (const auto enhancer = promptEnhancerOf(plan)) {
                // Its vision tower too: the plan does not know whether a first frame is given.
                const auto held = ltx2::PromptEnhancer::bytes(*enhancer, target.dtype);
                m.encodeBytes = std::max<std::int64_t>(m.encodeBytes, held.device + held.vision + (1ll << 30));
                m.enhancerHostBytes = held.host;
            } else
                // LTX-2.0/2.3: the text encoder writes first, with Gemma 3 12B's key/value cache
                // (48 layers x keys and values x 8 heads x 256) for a 1,024-token chat and 512 new
                // tokens, and, shown a first frame, its SigLIP tower and projector (~420M values,
                // loaded for the enhancement only; the plan does not know whether one is given).
                m.encodeBytes += (48ll * 2 * 8 * 256 * (textTokens + 512) + 420'000'000ll) * bytesPerValue;
        }
        const auto tileH = std::min<std::int64_t>(size.height, 576), tileW = std::min<std::int64_t>(size.width, 576);
        m.decodeBytes = 5 * 256 * size.frames * (tileH / 4) * (tileW / 4) * bytesPerValue + size.frames * size.height * size.width * 3 * 4;
        if (sizes.componentBytes.count("diffusion_decoder")) {
            // LTX-2.5's diffusion decoder: stage 5's 256-wide tokens on 4x4 pixel patches, a few
            // live at once, per tile of at most 768 px and 80 frames.
            const auto dh = std::min<std::int64_t>(size.height, 768), dw = std::min<std::int64_t>(size.width, 768);
            const auto df = std::min<std::int64_t>(size.frames, 80);
            m.decodeBytes = std::max(
                m.decodeBytes, 8 * 256 * df * (dh / 4) * (dw / 4) * bytesPerValue + size.frames * size.height * size.width * 3 * 4);
        }

        // What each component holds once loaded (dense weights in the compute dtype), not what
        // it stores: bf16 weights under f32 compute take twice their file size.
        const auto& b = sizes.componentHeldBytes;
        auto bytesOf = [&](const char* name) { return b.count(name) ? b.at(name) : 0; };
        auto storedOf = [&](const char* name) { return sizes.componentBytes.count(name) ? sizes.componentBytes.at(name) : 0; };
        const std::int64_t text = bytesOf("text_encoder"), transformer = bytesOf("transformer");
        // Where the diffusion decoder decodes (the default wherever the files carry one), the
        // VAE's decoder loads only for a request that asks for it.
        const bool vaeOnRequest = pipeline->hasDiffusionDecoder() && pipeline->hasVaeDecoder();
        // The video encoder (conditions) and the upsampler (two stages) load with the rest, so
        // nothing can tip a running studio over mid-run.
        const std::int64_t rest = bytesOf("connectors") + (vaeOnRequest ? 0 : bytesOf("video_vae")) + bytesOf("audio_vae")
            + bytesOf("vocoder") + bytesOf("video_encoder") + bytesOf("spatial_upsampler") + bytesOf("temporal_upsampler")
            + bytesOf("diffusion_decoder");
        // The dev recipe's distilled LoRA rides on the transformer unfused in stage 2: its bf16
        // adapters held in the compute dtype (7.6 GB at LTX-2.3's rank 384).
        std::int64_t distilledStored = 0;
        if (plan.distilledLoraPath) {
            std::error_code ec;
            const auto size = std::filesystem::file_size(*plan.distilledLoraPath, ec);
            distilledStored = ec ? 0 : static_cast<std::int64_t>(size);
        }
        const std::int64_t distilledHeld = distilledStored / 2 * bytesPerValue;

        placeLtx2(m, plan, device, sizes, {text, transformer, rest + distilledHeld});
        // On the CPU the weights are held in f32 unless asked otherwise: what the same model
        // would need there, for the advice when the GPU cannot hold it.
        const auto cpuPeak = sizes.heldBytesF32 + std::max({m.activationBytes, m.decodeBytes, m.encodeBytes}) * (4 / bytesPerValue);
        // A GPU whose whole memory is below the streamed plan cannot run this, whatever else is
        // closed: refused, with what would work instead.
        if (!device.is_cpu() && plan.placement == Placement::Auto && !m.fits && m.budget.deviceTotalBytes > 0
            && m.devicePeakBytes > m.budget.deviceTotalBytes) {
            std::ostringstream e;
            e << describeDevice(caps) << " has " << humanBytes(m.budget.deviceTotalBytes) << " of memory, and LTX-" << m.version << " at "
              << size.width << "x" << size.height << "x" << size.frames << " needs at least " << humanBytes(m.devicePeakBytes)
              << " on the GPU even with the transformer's blocks streamed from RAM. What would work: a smaller size or fewer frames, "
                 "a GGUF variant (Q4_K_M holds the transformer in about a third of bf16), or the CPU (about "
              << humanBytes(cpuPeak) << " of RAM; " << humanBytes(m.budget.hostAvailableBytes) << " available).";
            return makeError(ErrorCode::Unsupported, e.str());
        }

        const auto dev = m.device;
        const bool onCpu = device.is_cpu();
        const bool textResident = m.placement == Placement::AllResident;
        m.components = {
            {"text_encoder", text, storedOf("text_encoder"),
                (textResident ? dev : std::string("cpu")) + (textResident ? "" : ", loaded for each prompt")},
            {"connectors", bytesOf("connectors"), storedOf("connectors"), dev},
            {"transformer", transformer, storedOf("transformer"),
                m.placement == Placement::OffloadTransformerBlocks ? "cpu, streamed to " + dev + " block by block" : dev},
            {"video_vae", bytesOf("video_vae"), storedOf("video_vae"),
                dev + (size.height > 512 || size.width > 512 ? ", tiled decode" : "")
                    + (vaeOnRequest ? ", loaded only for video_decoder=1 (not counted)" : "")},
            {"audio_vae", bytesOf("audio_vae"), storedOf("audio_vae"), dev},
            {"vocoder", bytesOf("vocoder"), storedOf("vocoder"), dev},
        };
        if (bytesOf("video_encoder"))
            m.components.push_back(
                {"video_encoder", bytesOf("video_encoder"), storedOf("video_encoder"), dev + ", for image and video conditions"});
        if (upsamplerOf(plan))
            m.components.push_back(
                {"spatial_upsampler", bytesOf("spatial_upsampler"), storedOf("spatial_upsampler"), dev + ", the two-stage path"});
        if (temporalUpsamplerOf(plan))
            m.components.push_back({"temporal_upsampler", bytesOf("temporal_upsampler"), storedOf("temporal_upsampler"),
                dev + ", the temporal refine rounds"});
        if (plan.distilledLoraPath)
            m.components.push_back({"distilled_lora", distilledHeld, distilledStored, dev + ", adapters on the transformer in stage 2"});
        if (sizes.componentBytes.count("diffusion_decoder"))
            m.components.push_back({"diffusion_decoder", bytesOf("diffusion_decoder"), storedOf("diffusion_decoder"),
                dev + ", LTX-2.5's video decoder" + (size.height > 768 || size.width > 768 || size.frames > 80 ? ", tiled" : "")});
        std::vector<capability::ComponentInput> inputs;
        for (const auto& c : m.components) {
            capability::ComponentInput in;
            in.name = c.name;
            const auto f = sizes.componentFormats.find(c.name);
            in.format = f != sizes.componentFormats.end() ? f->second : capability::WeightFormat::Dense;
            in.onCpu = !onCpu && c.where.rfind("cpu", 0) == 0 && c.name == "text_encoder";
            in.attention = c.name == "transformer";
            inputs.push_back(in);
        }
        planPathsInto(m, caps, plan.dtype, inputs);

        const std::int64_t stored = storedOf("text_encoder") + storedOf("transformer") + storedOf("connectors") + storedOf("video_vae")
            + storedOf("audio_vae") + storedOf("vocoder") + storedOf("video_encoder") + storedOf("spatial_upsampler")
            + storedOf("temporal_upsampler") + storedOf("diffusion_decoder") + distilledStored;
        m.explanation = ltx2Explanation(m, size, caps, onCpu, {text, transformer, rest + distilledHeld}, stored, cpuPeak);
        return m;
    }

    Result<std::unique_ptr<families::LoadedModel>> load(const LoadPlan& plan, const MemoryPlan& memory, const families::Target& target,
        const ProgressFn& progress, std::stop_token stop) const override
    {
        auto opened = pipelines::Ltx2Pipeline::open(pipelineOptions(plan, target.device, target.dtype, memory.placement));
        if (!opened)
            return opened.error();
        auto model = std::make_unique<Loaded>(std::move(*opened), plan);
        auto loaded = model->pipeline.load(
            [&](const pipelines::Ltx2Progress& p) {
                if (progress)
                    progress({phaseOf(p.phase), p.done, p.total, {}});
            },
            stop);
        if (!loaded)
            return loaded.error();
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return std::unique_ptr<families::LoadedModel>(std::move(model));
    }

    Result<StagePlan> planStages(const LoadPlan& plan, const GenerateRequest& request) const override
    {
        // Headers only, read once: the version, and for a length left on auto the duration head
        // (refused before anything loads).
        auto weights = ltx2::Ltx2Weights::open(plan.modelPaths);
        const auto transformer =
            weights ? ltx2::resolveTransformerConfig(*weights, std::nullopt) : Result<ltx2::TransformerConfig>(weights.error());
        const bool v25 = transformer && transformer->keyframesAbsPosEmbedding;
        // LTX-2.0/2.3's Gemma 3 writes the prompt itself; LTX-2.5 needs its separate enhancer.
        const bool selfEnhancer = transformer && !v25 && !promptEnhancerOf(plan);
        // (Files that cannot be read are refused by the load, with their own reason.)
        if (request.enhancePrompt && transformer && !promptEnhancerOf(plan) && !selfEnhancer)
            return makeError(ErrorCode::InvalidArgument,
                "this model has no prompt enhancer (LTX-2.5's diffusers folder ships one in prompt_enhancer/; or give a Gemma 4 "
                "instruct model such as gemma-4-E2B-it as the enhancer); generate with the prompt as written");
        if (weights && request.frames == 0)
            if (const auto problem = ltx2::durationHeadProblem(*weights); !problem.empty())
                return makeError(ErrorCode::InvalidArgument, "the length cannot be left on auto: " + problem + "; give the frames");
        if (!weights && request.frames == 0)
            return weights.error();
        auto out = stagesFor(plan, request, v25);
        if (out && request.enhancePrompt)
            out->reason += selfEnhancer ? "; the text encoder (Gemma 3) rewrites the prompt first, sampled from the seed"
                                        : "; the prompt enhancer rewrites the prompt first";
        if (out && weights) {
            auto decoder = decoderNote(*weights, request);
            if (!decoder)
                return decoder.error();
            out->reason += *decoder;
            if (!out->dfr && transformer) {
                pipelines::Ltx2Request guidance;
                setGuidance(guidance, request);
                guidance.twoStage = out->twoStage;  // the dev recipe's stage 1 follows ltx-core's rules
                guidance.schedule = lower(request.schedule) == "dev" ? pipelines::Ltx2Schedule::Dev : pipelines::Ltx2Schedule::Distilled;
                // A block the model does not have is refused here, before anything loads.
                if (pipelines::stgRuns(guidance, *transformer))
                    for (const int b : pipelines::stgBlocksFor(guidance, *transformer))
                        if (b < 0 || b >= transformer->layers)
                            return makeError(ErrorCode::InvalidArgument,
                                "STG block " + std::to_string(b) + " is not a block of this model (0 to "
                                    + std::to_string(transformer->layers - 1) + "); give stg_block");
                out->reason += guidanceNote(pipelines::describeGuidance(guidance, *transformer));
            }
        }
        return out;
    }

    // Which decoder will make the pixels, for the stage reason; refused where the files lack it.
    static Result<std::string> decoderNote(const ltx2::Ltx2Weights& weights, const GenerateRequest& request)
    {
        const auto asked = videoDecodeOf(request);
        const auto problem = ltx2::diffusionDecoderProblem(weights);
        if (asked == pipelines::Ltx2VideoDecode::Diffusion && !problem.empty())
            return makeError(ErrorCode::InvalidArgument, "video_decoder: " + problem + "; decode with the VAE");
        if (asked == pipelines::Ltx2VideoDecode::Vae && !ltx2::resolveVideoVaeConfig(weights, std::nullopt))
            return makeError(ErrorCode::InvalidArgument,
                "video_decoder: these files carry only LTX-2.5's diffusion video decoder, not the VAE's; decode with the diffusion "
                "decoder or give the VAE file (ltx-2.5-video-vae-conv-bf16.safetensors)");
        if (asked != pipelines::Ltx2VideoDecode::Vae && problem.empty())
            return std::string("; decoded by the diffusion video decoder");
        return std::string();
    }

    // planStages for a model whose version is known (a loaded one: no headers read again).
    static Result<StagePlan> stagesFor(const LoadPlan& plan, const GenerateRequest& request, bool ltx25)
    {
        if (request.retake) {
            // ltx-pipelines' RetakePipeline: one pass at the clip's size, whatever the model.
            if (request.stages == "two")
                return makeError(ErrorCode::InvalidArgument, "a retake is one pass over the clip: stages two cannot run");
            if (request.knob(temporalRoundsKnob()) != 0 || request.knob(thirdStageKnob()) != 0 || request.knob(fastKnob()) != 0)
                return makeError(ErrorCode::InvalidArgument,
                    "a retake is one pass over the clip at its own rate and size: no temporal rounds, third stage or Fast recipe");
            StagePlan one;
            one.firstWidth = request.width;
            one.firstHeight = request.height;
            std::ostringstream s;
            s.precision(3);
            s << "retake: one pass over the clip, " << request.retake->start << " to " << request.retake->end << " s made again ("
              << (request.retake->video && request.retake->audio ? "video and sound"
                         : request.retake->video                 ? "video; the sound kept"
                                                                 : "sound; the video kept")
              << "), the rest kept";
            one.reason = s.str();
            return one;
        }
        auto out = dfrStagesFor(plan, request, ltx25);
        if (!out)
            return out;
        auto detailing = detailingLoraOf(request, *out);
        if (!detailing)
            return detailing.error();
        if (*detailing)
            out->reason += "; the detailing IC-LoRA " + (*detailing)->path.filename().string()
                + (out->epilogue ? " on the second and third passes, the canvas before each upsampling their reference"
                                 : " on the second pass, stage 1's canvas its reference");
        // LTX Desktop runs LTX-2.3's LoRAs on 2.5 ("supported_models" both, to be trimmed after
        // Lightricks validates them): so does Vireo, and says so.
        if (ltx25)
            for (const auto& l : request.loras)
                if (const auto v = loraNamedVersion(l.path); !v.empty())
                    out->reason += "; the LoRA " + l.path.filename().string() + " was made for LTX-" + v
                        + " (its name says so): it runs on LTX-2.5 as LTX Desktop runs it, which Lightricks has not validated";
        auto inContext = inContextOf(request, *out);
        if (!inContext)
            return inContext.error();
        if (*inContext) {
            const auto& ic = **inContext;
            const auto n = request.references.size();
            out->reason += "; the IC-LoRA " + ic.lora.path.filename().string() + " follows " + std::to_string(n) + " reference clip"
                + (n == 1 ? "" : "s") + (ic.downscale > 1 ? " at 1/" + std::to_string(ic.downscale) + " size" : "")
                + (out->twoStage ? " in stage 1; stage 2 refines without them" : "");
        }
        return out;
    }

    // Whether a LoRA is an IC-LoRA, and its reference_downscale_factor: its metadata's, else 1 for
    // one Lightricks' way of naming says is one ("ltx-2-19b-ic-lora-canny-control": one trained
    // at the reference's own size may carry no metadata at all); nullopt for any other LoRA.
    static Result<std::optional<std::int64_t>> inContextDownscale(const std::filesystem::path& path)
    {
        auto factor = pipelines::icLoraReferenceDownscale(path);
        if (!factor || *factor)
            return factor;
        auto name = path.filename().string();
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        const bool named = name.find("ic-lora") != std::string::npos || name.find("ic_lora") != std::string::npos
            || name.find("iclora") != std::string::npos;
        return named ? std::optional<std::int64_t>(1) : std::nullopt;
    }

    // The IC-LoRA of a request with reference clips, and its reference_downscale_factor (1 when
    // its metadata says none). The references are its alone: without one among the LoRAs they
    // would condition nothing, and two would each see the other's references.
    struct InContext {
        LoraRequest lora;
        std::int64_t downscale = 1;
    };
    static Result<std::optional<InContext>> inContextOf(const GenerateRequest& request, const StagePlan& stages)
    {
        if (request.references.empty())
            return std::optional<InContext>{};
        if (stages.dfr)
            return makeError(ErrorCode::InvalidArgument,
                "reference clips (an IC-LoRA) condition LTX-2 and LTX-2.3's passes, not LTX-2.5's DFR recipe; use an LTX-2.3 model "
                "with its IC-LoRA");
        std::optional<InContext> found;
        for (const auto& l : request.loras) {
            auto factor = inContextDownscale(l.path);
            if (!factor)
                return factor.error();
            if (!*factor)
                continue;
            if (found)
                return makeError(ErrorCode::InvalidArgument,
                    "two IC-LoRAs (" + found->lora.path.filename().string() + ", " + l.path.filename().string()
                        + "): the reference clips condition one; keep one");
            found = InContext{l, **factor};
        }
        if (!found)
            return makeError(ErrorCode::InvalidArgument,
                "reference clips are for an IC-LoRA, and none of the LoRAs is one (none has reference_downscale_factor in its "
                "metadata or \"ic-lora\" in its name): add the IC-LoRA the clips were made for");
        const auto unit = 32 * found->downscale;
        if (stages.firstWidth % unit || stages.firstHeight % unit)
            return makeError(ErrorCode::InvalidArgument,
                found->lora.path.filename().string() + " reads its reference clip at 1/" + std::to_string(found->downscale) + " of the "
                    + (stages.twoStage ? "first stage's " : "") + "size " + std::to_string(stages.firstWidth) + "x"
                    + std::to_string(stages.firstHeight) + ": that size must be a multiple of " + std::to_string(unit)
                    + (stages.twoStage ? " (the output's, of " + std::to_string(2 * unit) + ")" : ""));
        return found;
    }

    // An IC-LoRA among the request's LoRAs (reference_downscale_factor in its metadata) is the DFR
    // recipe's detailing LoRA: the second pass's alone, with stage 1 as its reference. Anywhere
    // else it would run without the reference it was trained on: refused, never applied blind.
    static Result<std::optional<LoraRequest>> detailingLoraOf(const GenerateRequest& request, const StagePlan& stages)
    {
        std::optional<LoraRequest> found;
        if (!request.references.empty())
            return found;  // the reference clips' IC-LoRA (inContextOf)
        for (const auto& l : request.loras) {
            auto factor = pipelines::icLoraReferenceDownscale(l.path);
            if (!factor)
                return factor.error();
            if (!*factor)
                continue;
            if (!(stages.dfr && stages.twoStage))
                return makeError(ErrorCode::InvalidArgument,
                    l.path.filename().string()
                        + " is an IC-LoRA (reference_downscale_factor in its metadata): it follows a reference clip (depth, pose, "
                          "edges: give it one), or details the second pass of LTX-2.5's two-pass DFR recipe, which this run does not "
                          "take (an LTX-2.5 model with a spatial upsampler, at a size whose halves are multiples of 32)");
            if (found)
                return makeError(ErrorCode::InvalidArgument,
                    "two IC-LoRAs (" + found->path.filename().string() + ", " + l.path.filename().string()
                        + "): the second pass takes one reference; keep one");
            found = l;
        }
        return found;
    }

    static Result<StagePlan> dfrStagesFor(const LoadPlan& plan, const GenerateRequest& request, bool ltx25)
    {
        auto out = stagePath(plan, request);
        const auto rounds = request.knob(temporalRoundsKnob());
        const auto third = request.knob(thirdStageKnob());
        if (out && rounds != 0 && !ltx25)
            return makeError(ErrorCode::InvalidArgument, "temporal_rounds: the temporal refine rounds are LTX-2.5's; this model is not");
        if (out && third != 0 && (third != 1 || !ltx25))
            return makeError(ErrorCode::InvalidArgument,
                third != 1 ? std::string("third_stage is 0 or 1") : "third_stage: the third spatial stage is LTX-2.5's; this model is not");
        if (!out || !ltx25)
            return out;
        if (request.knob(fastKnob()) == 1) {
            if (rounds != 0 || third != 0)
                return makeError(ErrorCode::InvalidArgument,
                    std::string(rounds != 0 ? "temporal_rounds: the temporal refine rounds" : "third_stage: the third spatial stage")
                        + " follow the DFR pass, and the Fast recipe runs none");
            out->reason += "; LTX-2.5's stage 1 with the ancestral sampler, no keyframe slots";
            return out;
        }
        // LTX-2.5 runs its own DFR passes where it can (one at full size, or half size, upsample
        // and a detailing pass), else LTX-2.3's; the reason says which and why.
        std::string blocker;
        if (lower(request.schedule) != "distilled" || anyGuidance(request))
            blocker = "the DFR pass runs the distilled schedule without guidance";
        else if (request.frames != 0 && request.frames < 9)
            blocker = "the DFR pass needs at least 9 frames";
        if (!blocker.empty()) {
            if (rounds != 0 || third != 0)
                return makeError(ErrorCode::InvalidArgument,
                    std::string(rounds != 0 ? "temporal_rounds: the temporal refine rounds" : "third_stage: the third spatial stage")
                        + " follow the DFR pass, and " + blocker);
            out->reason += "; LTX-2.3's path, not DFR: " + blocker;
            return out;
        }
        out->dfr = true;
        if (request.frames == 0) {
            out->reason = std::string(out->twoStage ? "LTX-2.5 DFR, two passes" : "LTX-2.5 DFR pass")
                + ": the length from the prompt (the duration head: 1 to 20 s), keyframe slots on its canvas (" + out->reason + ")";
        } else {
            const auto canvas = pipelines::dfrCanvas(request.frames);
            if (!canvas)
                return canvas.error();
            out->reason = std::string(out->twoStage ? "LTX-2.5 DFR, two passes" : "LTX-2.5 DFR pass") + ": "
                + std::to_string(canvas->slots.size()) + " keyframe slot(s) on a " + std::to_string(canvas->paddedFrames)
                + "-frame canvas (" + out->reason + ")";
        }
        if (rounds != 0) {
            if (rounds != 1 && rounds != 2)
                return makeError(ErrorCode::InvalidArgument, "temporal_rounds is 0, 1 or 2");
            if (!temporalUpsamplerOf(plan))
                return makeError(ErrorCode::InvalidArgument,
                    "temporal_rounds: no temporal upsampler is loaded with this model (give one, such as "
                    "ltx-2.3-temporal-upscaler-x2-1.0.safetensors)");
            const auto n = static_cast<int>(rounds);
            const auto scale = std::int64_t{1} << n;
            out->temporalRounds = n;
            std::ostringstream s;
            s << ", then " << n << " temporal round(s): ";
            if (request.frames == 0)
                s << scale << "x the frames";
            else
                s << (request.frames - 1) * scale + 1 << " frames";
            s << " at " << request.fps * double(scale) << " fps";
            out->reason += s.str();
        }
        if (third != 0) {
            if (!out->twoStage)
                return makeError(ErrorCode::InvalidArgument,
                    "third_stage: the third spatial stage follows the two-pass DFR recipe, which this request does not take (" + out->reason
                        + ")");
            if (request.width % 128 || request.height % 128)
                return makeError(ErrorCode::InvalidArgument,
                    "third_stage: stage 1 runs at a quarter of the size, so width and height must be multiples of 128 (4K is "
                    "3840x2176), got "
                        + std::to_string(request.width) + "x" + std::to_string(request.height));
            out->epilogue = true;
            out->firstWidth = request.width / 4;
            out->firstHeight = request.height / 4;
            out->reason += ", then a third spatial stage: stage 1 at " + std::to_string(out->firstWidth) + "x"
                + std::to_string(out->firstHeight) + ", the second pass at " + std::to_string(request.width / 2) + "x"
                + std::to_string(request.height / 2) + ", the third at " + std::to_string(request.width) + "x"
                + std::to_string(request.height) + " in 2 x 2 blended tiles with the keyframes rebuilt";
        }
        return out;
    }

    // One stage or two, from the upsampler, the schedule and the size.
    static Result<StagePlan> stagePath(const LoadPlan& plan, const GenerateRequest& request)
    {
        StagePlan out;
        out.firstWidth = request.width;
        out.firstHeight = request.height;
        if (request.stages != "auto" && request.stages != "single" && request.stages != "two")
            return makeError(ErrorCode::InvalidArgument, "stages \"" + request.stages + "\": use auto, single or two");
        // Why the two-stage path cannot run, or empty when it can. Stage 1 runs at half size, so
        // each half must still be a whole number of 32-pixel latent cells.
        // The dev schedule takes Lightricks' dev recipe: guided stage 1, the distilled LoRA refines.
        const bool devRecipe = lower(request.schedule) == "dev";
        std::string blocker;
        if (!upsamplerOf(plan))
            blocker = "no spatial upsampler is loaded with this model";
        else if (devRecipe && !plan.distilledLoraPath)
            blocker = "the dev model's two-stage recipe refines with the distilled LoRA, and none is loaded with this model";
        else if (!devRecipe && lower(request.schedule) != "distilled")
            blocker = "the two-stage path refines with the distilled schedule; this request uses \"" + request.schedule + "\"";
        else if (!devRecipe && anyGuidance(request))
            blocker = "the two-stage path runs without guidance (CFG, STG or modality); this request asks for some";
        else if (request.width % 64 != 0 || request.height % 64 != 0)
            blocker = std::to_string(request.width) + "x" + std::to_string(request.height)
                + " does not halve into 32-pixel latent cells (both sides must be multiples of 64)";
        const bool fast = request.knob(fastKnob()) == 1;
        if (fast && (request.stages == "single" || !blocker.empty() || devRecipe))
            return makeError(ErrorCode::InvalidArgument,
                "fast: the Fast recipe runs the distilled model in two stages without guidance; "
                    + std::string(request.stages == "single" ? "this request asks for one stage"
                            : devRecipe                      ? "this request uses the dev schedule"
                                                             : blocker));
        const bool hq = request.knob(hqKnob()) == 1;
        if (hq && (request.stages == "single" || !blocker.empty() || !devRecipe))
            return makeError(ErrorCode::InvalidArgument,
                "hq: the HQ recipe runs the dev model in two stages with the distilled LoRA; "
                    + std::string(request.stages == "single" ? "this request asks for one stage"
                            : !devRecipe                     ? "this request uses the " + request.schedule + " schedule"
                                                             : blocker));
        if (request.stages == "single") {
            out.reason = "single stage, as asked";
            return out;
        }
        if (!blocker.empty()) {
            if (request.stages == "two")
                return makeError(ErrorCode::InvalidArgument, "the two-stage path cannot run: " + blocker);
            out.reason = "single stage: " + blocker;
            return out;
        }
        out.twoStage = true;
        out.firstWidth = request.width / 2;
        out.firstHeight = request.height / 2;
        if (devRecipe) {
            const auto [stage1, stage2] = distilledStrengths(request);
            const auto num = [](double v) {
                std::ostringstream s;
                s.precision(3);
                s << v;
                return s.str();
            };
            out.reason = std::string(request.stages == "two" ? "two stages, as asked" : "two stages") + ": Lightricks' "
                + (hq ? "HQ recipe (res2s sampler, " : "dev recipe (") + "guided stage 1 at half size"
                + (stage1 ? " with the distilled LoRA at " + num(*stage1) : "")
                + ", latent upsample x2, 3 refining steps with the distilled LoRA " + plan.distilledLoraPath->filename().string() + " at "
                + num(stage2) + ", unguided)";
            return out;
        }
        if (fast)
            out.reason = "two stages: the Fast recipe (ltx-pipelines' distilled pipeline, LTX Desktop's; half size, latent upsample x2, "
                         "3 refining steps)";
        else if (request.stages == "two")
            out.reason = "two stages, as asked";
        else
            out.reason = "two stages: the distilled model's default (half size, latent upsample x2, 3 refining steps)";
        return out;
    }

    Result<std::string> inspectLora(const LoadPlan& plan, const std::filesystem::path& lora, bool asJson) const override
    {
        try {
            // The transformer's headers are all a match needs: no pipeline, no weights read.
            auto weights = ltx2::Ltx2Weights::open(plan.modelPaths);
            if (!weights)
                return weights.error();
            auto report = lora::inspect(lora, ltx2::loraTargetsFromHeaders(*weights));
            if (!report)
                return report.error();
            // An IC-LoRA says so, for the LoRA panel to ask for the reference clip it follows.
            // Metadata generation would refuse (a malformed factor, a temporal one) is refused here
            // too, so the panel says so before the run, not after.
            const auto factor = inContextDownscale(lora);
            if (!factor)
                return factor.error();
            // On LTX-2.5 an IC-LoRA details the two-pass DFR recipe's second pass with stage 1 as its
            // reference: the user gives no clip.
            const auto transformer = ltx2::resolveTransformerConfig(*weights, std::nullopt);
            const bool detailing = factor && *factor && transformer && transformer->keyframesAbsPosEmbedding;
            const bool inContext = factor && *factor && !detailing;
            const std::int64_t downscale = inContext ? **factor : 1;
            if (!asJson)
                return report->toText()
                    + (inContext ? "\nAn IC-LoRA: it follows a reference clip (depth, pose, edges), read at 1/" + std::to_string(downscale)
                                + " of the first pass's size.\n"
                            : detailing ? std::string("\nAn IC-LoRA: on LTX-2.5 it details the two-pass recipe's second pass, stage 1 its "
                                                      "reference.\n")
                                        : std::string());
            auto json = nlohmann::json::parse(report->toJson(), nullptr, false);
            if (json.is_discarded() || !json.is_object() || !inContext)
                return report->toJson();
            json["in_context"] = true;
            json["reference_downscale_factor"] = downscale;
            return json.dump();
        } catch (const std::exception& e) {
            return errorFromException(e, lora.string());
        }
    }
};

Result<VideoResult> Loaded::generate(const GenerateRequest& r, const ProgressFn& progress, std::stop_token stop)
{
    const auto schedule = lower(r.schedule);
    if (schedule != "distilled" && schedule != "dev")
        return makeError(ErrorCode::InvalidArgument, "schedule '" + r.schedule + "' is neither distilled nor dev");
    if (!(r.fps > 0.5 && r.fps <= 240))
        return makeError(ErrorCode::InvalidArgument, "fps must be between 0.5 and 240");
    const auto speed = parseSpeedMode(r.speed);
    if (!speed)
        return makeError(ErrorCode::InvalidArgument, "speed mode '" + r.speed + "' is none of quality, balanced, fast");
    pipelines::Ltx2Request req;
    const auto cacheSettings = stepCacheSettings(*speed);
    req.stepCacheThreshold = cacheSettings.threshold;
    req.stepCacheMaxConsecutive = cacheSettings.maxConsecutive;
    req.prompt = r.prompt;
    req.negativePrompt = r.negativePrompt;
    req.enhancePrompt = r.enhancePrompt;
    req.width = r.width;
    req.height = r.height;
    req.frames = r.frames;
    req.fps = r.fps;
    req.schedule = schedule == "dev" ? pipelines::Ltx2Schedule::Dev : pipelines::Ltx2Schedule::Distilled;
    req.steps = r.steps;
    setGuidance(req, r);
    req.seed = r.seed;
    req.maxSequenceLength = r.maxSequenceLength;
    for (const auto& l : r.loras) {
        if (!std::isfinite(l.strength) || std::abs(l.strength) > 100)
            return makeError(ErrorCode::InvalidArgument, l.path.string() + ": a LoRA strength must be between -100 and 100");
        req.loras.push_back({l.path, l.strength});
    }
    auto stages = Family::stagesFor(plan, r, pipeline.version() == "2.5");
    if (!stages)
        return stages.error();
    req.twoStage = stages->twoStage;
    if (req.twoStage && req.schedule == pipelines::Ltx2Schedule::Dev && !stages->dfr && plan.distilledLoraPath) {
        const auto [stage1, stage2] = distilledStrengths(r);
        req.distilledLora = pipelines::Ltx2Lora{*plan.distilledLoraPath, stage2};
        req.distilledLoraStage1Strength = stage1;
        if (r.knob(hqKnob()) == 1)
            req.sampler = pipelines::Ltx2Sampler::Res2s;
    }
    req.dfr = stages->dfr;
    req.fast = req.twoStage && !req.dfr && r.knob(fastKnob()) == 1;
    req.temporalRounds = stages->temporalRounds;
    req.dfrEpilogue = stages->epilogue;
    req.videoDecode = videoDecodeOf(r);
    if (auto detailing = Family::detailingLoraOf(r, *stages); !detailing) {
        return detailing.error();
    } else if (*detailing) {
        // The detailing passes' alone: out of the list every pass applies.
        req.detailingLora = pipelines::Ltx2Lora{(*detailing)->path, (*detailing)->strength};
        std::erase_if(req.loras, [&](const pipelines::Ltx2Lora& l) { return l.path == (*detailing)->path; });
    }
    if (auto inContext = Family::inContextOf(r, *stages); !inContext) {
        return inContext.error();
    } else if (*inContext) {
        // Stage 1's alone, with its references: out of the list every pass applies.
        const auto& ic = **inContext;
        req.icLora = pipelines::Ltx2Lora{ic.lora.path, ic.lora.strength};
        req.referenceDownscale = ic.downscale;
        std::erase_if(req.loras, [&](const pipelines::Ltx2Lora& l) { return l.path == ic.lora.path; });
        for (const auto& c : r.references) {
            const auto name = c.source.empty() ? std::string("a reference clip") : c.source;
            if (c.frames < 1 || c.width < 1 || c.height < 1
                || c.rgb.size()
                    != static_cast<std::size_t>(c.frames) * static_cast<std::size_t>(c.width) * static_cast<std::size_t>(c.height) * 3)
                return makeError(ErrorCode::InvalidArgument, name + ": the pixel buffer does not hold frames x height x width x 3 bytes");
            if (!(c.strength >= 0.0 && c.strength <= 1.0))
                return makeError(ErrorCode::InvalidArgument, name + ": strength must be between 0 and 1");
            req.references.push_back(
                {at::from_blob(const_cast<std::uint8_t*>(c.rgb.data()), {c.frames, c.height, c.width, 3}, at::kByte).clone(), c.strength});
        }
    }
    const std::int64_t latentFrames = (r.frames - 1) / 8 + 1;
    std::string soundNotContinued;
    for (const auto& c : r.conditions) {
        const auto name = c.source.empty() ? std::string("a condition") : c.source;
        if (c.width != r.width || c.height != r.height)
            return makeError(ErrorCode::InvalidArgument,
                name + " is " + std::to_string(c.width) + "x" + std::to_string(c.height) + ", the video " + std::to_string(r.width) + "x"
                    + std::to_string(r.height) + "; fit it to the video's size first");
        if (c.frames < 1 || (c.frames - 1) % 8)
            return makeError(ErrorCode::InvalidArgument,
                name + ": a conditioning clip must have 8k + 1 frames (1 for a still), got " + std::to_string(c.frames));
        if (c.rgb.size() != static_cast<std::size_t>(c.frames) * static_cast<std::size_t>(c.width) * static_cast<std::size_t>(c.height) * 3)
            return makeError(ErrorCode::InvalidArgument, name + ": the pixel buffer does not hold frames x height x width x 3 bytes");
        if (r.frames == 0 && (c.frame != 0 || c.frames > 1))
            return makeError(ErrorCode::InvalidArgument,
                name + ": with the length on auto (read from the prompt), only a still at frame 0 conditions the video");
        if (c.frame < 0 || (r.frames != 0 && c.frame >= r.frames) || (c.frame != 0 && (c.frame - 1) % 8 != 0))
            return makeError(ErrorCode::InvalidArgument,
                name + ": frame " + std::to_string(c.frame) + " is not 0 or 8k + 1 inside the clip's " + std::to_string(r.frames)
                    + " frames (1, 9, 17, ...)");
        if (!(c.strength >= 0.0 && c.strength <= 1.0))
            return makeError(ErrorCode::InvalidArgument, name + ": strength must be between 0 and 1");
        pipelines::Ltx2Condition pc;
        // Frame 8 (k - 1) + 1 is latent frame k: the reference's keyframe placement.
        pc.latentIndex = c.frame == 0 ? 0 : (c.frame - 1) / 8 + 1;
        if (pc.latentIndex >= latentFrames)
            return makeError(ErrorCode::InvalidArgument, name + ": frame " + std::to_string(c.frame) + " is past the clip's end");
        pc.strength = c.strength;
        pc.pixels = at::from_blob(const_cast<std::uint8_t*>(c.rgb.data()), {c.frames, c.height, c.width, 3}, at::kByte).clone();
        req.conditions.push_back(std::move(pc));
        // A clip's sound at frame 0 (an extension): the new sound continues it, unless the video
        // follows a sound of the user's (which holds the whole sound; said in the path line).
        if (c.sound && c.frame == 0 && c.sound->frames() > 0 && !r.audio && !r.retake) {
            auto sound = soundOf(*c.sound, name + "'s sound");
            if (!sound)
                return sound.error();
            req.audioPrefix = std::move(*sound);
        } else if (c.sound && c.frame == 0 && r.audio) {
            soundNotContinued = name;
        }
    }
    if (r.retake) {
        const auto& k = *r.retake;
        const auto& c = k.clip;
        const auto name = c.source.empty() ? std::string("the clip") : c.source;
        if (c.frames != r.frames || c.width != r.width || c.height != r.height
            || c.rgb.size()
                != static_cast<std::size_t>(c.frames) * static_cast<std::size_t>(c.width) * static_cast<std::size_t>(c.height) * 3)
            return makeError(ErrorCode::InvalidArgument,
                name + ": the clip to retake was not read at the request's " + std::to_string(r.frames) + " frames of "
                    + std::to_string(r.width) + "x" + std::to_string(r.height));
        pipelines::Ltx2Retake retake;
        retake.pixels = at::from_blob(const_cast<std::uint8_t*>(c.rgb.data()), {c.frames, c.height, c.width, 3}, at::kByte).clone();
        retake.start = k.start;
        retake.end = k.end;
        retake.video = k.video;
        retake.audio = k.audio;
        if (k.sound) {
            auto sound = soundOf(*k.sound, name + "'s sound");
            if (!sound)
                return sound.error();
            retake.sound = std::move(*sound);
        }
        req.retake = std::move(retake);
        req.twoStage = false;
        req.dfr = false;
        req.fast = false;
        req.temporalRounds = 0;
        req.dfrEpilogue = false;
    }
    if (r.audio) {
        auto sound = soundOf(*r.audio, r.audio->source.empty() ? std::string("the sound") : r.audio->source);
        if (!sound)
            return sound.error();
        req.audio = std::move(*sound);
    }
    try {
        c10::InferenceMode inference;
        const paths::Recording recording;
        const auto projection = previewProjectionFor(pipeline, r, progress);
        auto out = pipeline.generate(
            req,
            [&](const pipelines::Ltx2Progress& p) {
                if (!progress)
                    return;
                Progress report{phaseOf(p.phase), p.done, p.total, {}};
                // [1, C, F, H, W] -> one frame per latent frame [F, H, W, C].
                if (p.videoEstimate.defined() && projection.defined() && previewDue(r, p.done, p.total))
                    report.preview = makePreview(projection, p.videoEstimate[0].permute({1, 2, 3, 0}), p.done, r.previewWidth);
                progress(report);
            },
            stop);
        if (!out)
            return out.error();
        VideoResult v;
        const auto& frames = out->frames;  // uint8 [F, H, W, 3]
        v.frameCount = static_cast<int>(frames.size(0));
        v.height = static_cast<int>(frames.size(1));
        v.width = static_cast<int>(frames.size(2));
        v.fps = out->fps;
        const auto f = frames.contiguous().cpu();
        v.rgb.assign(f.data_ptr<std::uint8_t>(), f.data_ptr<std::uint8_t>() + f.numel());
        auto wave = out->waveform.to(at::kFloat).contiguous().cpu();  // [channels, samples]
        v.sampleRate = out->sampleRate;
        // The user's sound at a rate AAC does not take goes into the MP4 at 48 kHz.
        if (r.audio && !aacTakes(v.sampleRate)) {
            wave = ltx2::resampleSinc(wave, v.sampleRate, 48000).contiguous();
            v.stages.reason += "; the sound resampled from " + std::to_string(v.sampleRate) + " Hz to 48 kHz for the MP4";
            v.sampleRate = 48000;
        }
        v.channels = static_cast<int>(wave.size(0));
        v.samples = wave.size(1);
        v.audio.assign(wave.data_ptr<float>(), wave.data_ptr<float>() + wave.numel());
        v.schedule = schedule;
        v.sigmas = out->sigmas;
        v.secondsPerPhase = out->secondsPerPhase;
        v.loras = outcomesOf(out->loras);
        v.speed = std::string(speedModeName(*speed));
        v.stepsSkipped = out->stepsSkipped;
        v.cudaGraphs = out->cudaGraphs;
        const auto resampled = v.stages.reason;
        v.stages = *stages;
        v.stages.reason += resampled;
        if (out->videoDecoder == "diffusion")
            v.stages.reason += "; decoded by the diffusion video decoder";
        v.stages.reason += guidanceNote(out->guidance);
        if (!out->enhancedPrompt.empty()) {
            v.enhancedPrompt = out->enhancedPrompt;
            v.stages.reason += "; the prompt enhancer rewrote the prompt (" + std::to_string(out->enhancerTokens) + " tokens"
                + (out->enhancerCut ? ", cut at the limit" : "") + (out->enhancerNote.empty() ? "" : "; " + out->enhancerNote) + ")";
        }
        if (out->predictedSeconds) {
            // The length the prompt asked for, said where the path is.
            v.predictedSeconds = out->predictedSeconds;
            std::ostringstream s;
            s.precision(3);
            s << (r.audio ? "; the sound's length: " : "; the prompt's length: ") << *out->predictedSeconds << " s, "
              << out->predictedFrames << " frames at " << r.fps << " fps"
              << (out->predictionClamped ? (r.audio ? " (cut at 20 s)" : " (held to 1-20 s)") : "");
            v.stages.reason += s.str();
        }
        if (req.audioPrefix)
            v.stages.reason += "; the clip's sound over its frames continued (" + std::to_string(out->prefixSamples) + " samples its own)";
        if (!soundNotContinued.empty())
            v.stages.reason += "; " + soundNotContinued + ": its sound is not continued (the video follows the sound chosen)";
        if (r.audio) {
            std::ostringstream s;
            s.precision(3);
            s << "; the video follows " << (r.audio->source.empty() ? std::string("the sound") : r.audio->source) << " ("
              << r.audio->seconds() << " s at " << r.audio->sampleRate << " Hz"
              << (r.audio->note.empty() ? std::string() : ", " + r.audio->note) << "), its samples kept as the sound";
            v.stages.reason += s.str();
        }
        v.paths = recording.counts().text();
        v.pathWarnings = recording.counts().warnings();
        return v;
    } catch (const std::exception& e) {
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return errorFromException(e, "generating");
    }
}

Result<std::vector<LoraOutcome>> Loaded::applyLoras(const std::vector<LoraRequest>& loras)
{
    std::vector<pipelines::Ltx2Lora> list;
    for (const auto& l : loras)
        list.push_back({l.path, l.strength});
    try {
        c10::InferenceMode inference;
        auto out = pipeline.applyLoras(list);
        if (!out)
            return out.error();
        return outcomesOf(*out);
    } catch (const std::exception& e) {
        return errorFromException(e, "applying LoRAs");
    }
}

}  // namespace

const families::ModelFamily& family()
{
    static const Family instance;
    return instance;
}

}  // namespace vireo::ltx2
