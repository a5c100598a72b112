#include "inference/models/ideogram4/ideogram4family.h"

#include "inference/families/common.h"
#include "inference/models/ideogram4/ideogram4pipeline.h"
#include "inference/quant/quantizedweight.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/util/device.h"
#include "inference/util/format.h"
#include "inference/util/pathstats.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <sstream>

namespace vireo::ideogram4 {

using namespace facade;
using families::describeDevice;
using families::dtypeName;
using families::makePreview;
using families::planPathsInto;
using families::previewDue;
using families::previewProjectionFor;
using families::smallJson;

namespace {

// Ideogram-4's components and what their tensors hold as stored, from the safetensors headers
// (validated, nothing read beyond them).
struct IdeogramSizes {
    std::map<std::string, std::int64_t> componentBytes;  // as stored
    std::map<std::string, std::int64_t> componentHeldBytes;  // once loaded in the compute dtype
    std::map<std::string, capability::WeightFormat> componentFormats;
    std::int64_t hidden = 0, layers = 0, textHidden = 0;
};

Result<IdeogramSizes> ideogramSizes(const std::filesystem::path& root, int computeBytes)
{
    IdeogramSizes out;
    for (const char* component : {"text_encoder", "transformer", "unconditional_transformer", "vae"}) {
        const auto folder = root / component;
        std::error_code ec;
        if (!std::filesystem::is_directory(folder, ec))
            return makeError(ErrorCode::NotFound,
                folder.string()
                    + ": missing; an Ideogram-4 folder holds text_encoder/, transformer/, "
                      "unconditional_transformer/, vae/ and tokenizer/ (download the model again or use Repair)");
        std::int64_t bytes = 0, held = 0;
        std::map<capability::WeightFormat, std::int64_t> forms;
        auto source = tensorfile::ModelSource::open(folder);
        if (!source)
            return source.error().code == ErrorCode::NotFound
                ? makeError(ErrorCode::NotFound, folder.string() + ": no .safetensors weights")
                : source.error();
        for (const auto& cp : source->checkpoints)
            for (const auto& t : cp.tensors) {
                bytes += static_cast<std::int64_t>(t.bytes);
                held += quant::heldBytes(cp, t, computeBytes);
                if (t.shape.size() == 2 && t.name.size() > 7 && t.name.compare(t.name.size() - 7, 7, ".weight") == 0)
                    forms[quant::storedFormat(cp, t)] += static_cast<std::int64_t>(t.bytes);
            }
        out.componentBytes[component] = bytes;
        out.componentHeldBytes[component] = held;
        out.componentFormats[component] = capability::dominantFormat(forms);
    }
    if (const auto c = smallJson(root / "transformer" / "config.json")) {
        // Sizes for an estimate, from a file anyone could have written: out of any real model's
        // range counts as unknown, and the product below cannot overflow.
        auto num = [&](const char* key) -> std::int64_t {
            if (!c->contains(key) || !(*c)[key].is_number_integer())
                return 0;
            const auto v = (*c)[key].get<std::int64_t>();
            return v > 0 && v <= (1 << 20) ? v : 0;
        };
        out.hidden = num("attention_head_dim") * num("num_attention_heads");
        out.layers = num("num_layers");
    }
    if (const auto c = smallJson(root / "text_encoder" / "config.json")) {
        const auto& t = c->contains("text_config") && (*c)["text_config"].is_object() ? (*c)["text_config"] : *c;
        if (t.contains("hidden_size") && t["hidden_size"].is_number_integer() && t["hidden_size"].get<std::int64_t>() > 0
            && t["hidden_size"].get<std::int64_t>() <= (1 << 20))
            out.textHidden = t["hidden_size"].get<std::int64_t>();
    }
    return out;
}

Result<MemoryPlan> planIdeogram(
    const LoadPlan& plan, const families::Target& target, const SizeRequest& size, const std::optional<MemoryBudget>& budgetIn)
{
    const auto device = target.device;
    const auto& caps = target.caps;
    const auto dtype = target.dtype;
    if (plan.modelPaths.size() != 1)
        return makeError(ErrorCode::InvalidArgument,
            "an Ideogram-4 model is one folder; " + std::to_string(plan.modelPaths.size()) + " paths were given");
    if (plan.textEncoderPath)
        return makeError(ErrorCode::InvalidArgument, "an Ideogram-4 folder brings its own text encoder; --text-encoder does not apply");
    if (plan.placement == Placement::TextEncoderOnCpu)
        return makeError(ErrorCode::Unsupported,
            "Ideogram-4 keeps its text tower on the device; placement text-encoder-on-cpu is not "
            "available for it (choose auto, all-resident or offload-transformer-blocks)");
    const auto& root = plan.modelPaths.front();
    auto sizes = ideogramSizes(root, static_cast<int>(c10::elementSize(dtype)));
    if (!sizes)
        return sizes.error();
    MemoryPlan m;
    m.pipeline = "ideogram4";
    m.version = "4";
    m.kind = ModelKind::Image;
    m.device = device.str();
    m.dtype = dtypeName(dtype);
    m.budget = budgetIn ? *budgetIn : measureBudget(plan.device);
    m.placement = Placement::AllResident;
    m.forced = plan.placement != Placement::Auto;
    const std::int64_t bytesPerValue = dtype == c10::kFloat ? 4 : 2;
    // Working memory from the shapes: image tokens (16 x 16 pixels each) through a block of
    // the conditional DiT with up to 2048 text tokens beside them (activations, the MLP's
    // 4x hidden, attention outputs); the text tower over the prompt keeping its 13 taps; the
    // VAE decoder's widest full-resolution stage (128 channels, a few live at once).
    const auto tokens = (size.height / 16) * (size.width / 16) + 2048;
    const auto hidden = std::max<std::int64_t>(sizes->hidden, 1);
    m.activationBytes = tokens * hidden * 16 * bytesPerValue + tokens * 128 * 4 * 4;
    m.encodeBytes = 2048 * std::max<std::int64_t>(sizes->textHidden, 1) * (13 + 8) * bytesPerValue + (64ll << 20);
    m.decodeBytes = size.height * size.width * 128 * 6 * bytesPerValue + size.height * size.width * 3 * 4;
    // Held, not stored: dense weights take the compute dtype's size once loaded.
    const auto& b = sizes->componentHeldBytes;
    const std::int64_t text = b.at("text_encoder"), cond = b.at("transformer"), uncond = b.at("unconditional_transformer"),
                       vae = b.at("vae");
    const std::int64_t weights = text + cond + uncond + vae;
    const std::int64_t margin = 512ll << 20;
    const auto work = std::max({m.activationBytes, m.encodeBytes, m.decodeBytes});
    // Streamed: each DiT keeps what runs once per forward on the device and its blocks in host
    // memory, two blocks of each in flight (the one running and the one being copied in).
    const auto layers = std::max<std::int64_t>(sizes->layers, 1);
    const auto condBlocks = cond * 95 / 100, uncondBlocks = uncond * 95 / 100;  // the blocks hold nearly every weight
    const std::int64_t streamedDevice =
        text + vae + (cond - condBlocks) + (uncond - uncondBlocks) + 2 * (condBlocks + uncondBlocks) / layers;
    if (device.is_cpu()) {
        m.hostWeightBytes = weights;
        m.hostPeakBytes = weights + work;
        m.fits = m.hostPeakBytes <= m.budget.hostAvailableBytes;
        m.shortfallBytes = m.fits ? 0 : m.hostPeakBytes - m.budget.hostAvailableBytes;
    } else {
        auto place = [&](Placement p) {
            m.placement = p;
            const bool streamed = p == Placement::OffloadTransformerBlocks;
            m.deviceWeightBytes = streamed ? streamedDevice : weights;
            m.hostWeightBytes = streamed ? condBlocks + uncondBlocks : 0;
            m.devicePeakBytes = m.deviceWeightBytes + work + margin;
            m.hostPeakBytes = m.hostWeightBytes;
            m.fits = m.devicePeakBytes <= m.budget.deviceFreeBytes && m.hostPeakBytes <= m.budget.hostAvailableBytes;
            const auto deviceShort = m.devicePeakBytes - m.budget.deviceFreeBytes,
                       hostShort = m.hostPeakBytes - m.budget.hostAvailableBytes;
            m.shortfallBytes = m.fits ? 0 : std::max<std::int64_t>({0, deviceShort, hostShort});
        };
        if (plan.placement == Placement::Auto) {
            place(Placement::AllResident);
            if (!m.fits)
                place(Placement::OffloadTransformerBlocks);
        } else {
            place(plan.placement);
        }
    }
    const auto dev = m.device;
    const bool streamed = m.placement == Placement::OffloadTransformerBlocks;
    const std::string dit = streamed ? "cpu, streamed to " + dev + " block by block" : dev;
    const auto& stored = sizes->componentBytes;
    m.components = {
        {"text_encoder", text, stored.at("text_encoder"), dev},
        {"transformer", cond, stored.at("transformer"), dit},
        {"unconditional_transformer", uncond, stored.at("unconditional_transformer"), dit},
        {"vae", vae, stored.at("vae"), dev},
    };
    std::vector<capability::ComponentInput> inputs;
    for (const auto& c : m.components)
        inputs.push_back({c.name, sizes->componentFormats.at(c.name), false, false});
    planPathsInto(m, caps, plan.dtype, inputs);
    std::ostringstream e;
    e << "Ideogram-4 in " << m.dtype << " on " << (device.is_cpu() ? dev : describeDevice(caps)) << ": weights " << humanBytes(weights)
      << " in memory (transformer " << humanBytes(cond) << ", unconditional transformer " << humanBytes(uncond) << ", text encoder "
      << humanBytes(text) << ", VAE " << humanBytes(vae) << "); at " << size.width << "x" << size.height << " the transformers need about "
      << humanBytes(m.activationBytes) << " of working memory and the decoder " << humanBytes(m.decodeBytes) << ". ";
    if (device.is_cpu())
        e << "Everything runs in RAM: peak " << humanBytes(m.hostPeakBytes) << " of " << humanBytes(m.budget.hostAvailableBytes)
          << " available.";
    else
        e << "Placement " << placementName(m.placement) << ": " << humanBytes(m.devicePeakBytes) << " peak on the GPU ("
          << humanBytes(m.budget.deviceFreeBytes) << " free of " << humanBytes(m.budget.deviceTotalBytes) << ")"
          << (streamed ? ", both transformers' blocks in RAM (" + humanBytes(m.hostWeightBytes) + "), copied in one by one: slower" : "")
          << ".";
    if (!m.fits) {
        e << " It does not fit: " << humanBytes(m.shortfallBytes) << " short"
          << (!device.is_cpu() && !m.forced ? " even with the transformers streamed from RAM" : "") << ".";
        e << " Choose a smaller size, a quantized variant (FP8 or NF4), the CPU, or free memory.";
    }
    m.explanation = e.str();
    return m;
}

Phase ideogramPhase(const std::string& phase)
{
    return phase == "encode" ? Phase::EncodePrompt : phase == "denoise" ? Phase::Denoise : Phase::DecodeImage;
}

class Loaded final : public families::LoadedModel {
public:
    Loaded(pipelines::Ideogram4Pipeline p, MemoryPlan m, std::filesystem::path root)
        : pipeline(std::move(p)), memory(std::move(m)), folder(std::move(root))
    {
    }
    Result<ImageResult> generateImage(const GenerateRequest& r, const ProgressFn& progress, std::stop_token stop) override;
    Result<std::vector<LoraOutcome>> applyLoras(const std::vector<LoraRequest>&) override
    {
        return makeError(ErrorCode::Unsupported, "LoRAs are not supported for Ideogram-4 yet");
    }
    std::string version() const override { return "4"; }
    std::vector<std::filesystem::path> files() const override { return {folder}; }
    std::map<std::string, std::int64_t> residentBytes() const override
    {
        std::map<std::string, std::int64_t> out;
        for (const auto& c : memory.components)
            out[c.name] = c.bytes;
        return out;
    }

private:
    pipelines::Ideogram4Pipeline pipeline;
    MemoryPlan memory;
    std::filesystem::path folder;
};

// The logit-normal sigma schedule's shape, as the vendor's sampler presets set it (48 steps:
// mu 0, std 1.5; 20 steps: 0, 1.75; 12-step Turbo: 0.5, 1.75). Fewer steps want the wider one.
const Knob& muKnob()
{
    static const Knob k{"schedule_mu", "Schedule shift (mu)",
        "Shifts the sigma schedule: above 0 spends more steps at high noise (the vendor's 12-step Turbo preset uses 0.5).", -3.0, 3.0, 0.0,
        0.05, 2};
    return k;
}

const Knob& stdKnob()
{
    static const Knob k{"schedule_std", "Schedule spread (std)",
        "Widens the sigma schedule: the vendor's 48-step preset uses 1.5, its 20- and 12-step presets 1.75.", 0.1, 5.0, 1.5, 0.05, 2};
    return k;
}

Result<ImageResult> Loaded::generateImage(const GenerateRequest& r, const ProgressFn& progress, std::stop_token stop)
{
    if (!r.loras.empty())
        return makeError(ErrorCode::Unsupported, "LoRAs are not supported for Ideogram-4 yet; remove them from the request");
    pipelines::Ideogram4Request req;
    req.prompt = r.prompt;
    req.width = r.width;
    req.height = r.height;
    req.steps = r.steps > 0 ? r.steps : 48;
    if (!r.guidanceSchedule.empty())
        req.guidanceSchedule = r.guidanceSchedule;
    else
        req.guidanceScale = r.guidance;
    req.mu = r.knob(muKnob());
    req.std = r.knob(stdKnob());
    req.seed = r.seed;
    using Clock = std::chrono::steady_clock;
    std::map<std::string, double> seconds;
    std::string phase;
    auto phaseStart = Clock::now();
    try {
        c10::InferenceMode inference;
        const paths::Recording recording;
        const auto projection = previewProjectionFor(pipeline, r, progress);
        auto out = pipeline.generate(
            req,
            [&](const pipelines::Ideogram4Progress& p) {
                if (p.phase != phase) {
                    const auto now = Clock::now();
                    if (!phase.empty())
                        seconds[phase] += std::chrono::duration<double>(now - phaseStart).count();
                    phase = p.phase;
                    phaseStart = now;
                }
                if (!progress)
                    return;
                Progress report{ideogramPhase(p.phase), p.done, p.total, {}};
                // [1, C, h, w] -> one frame [1, h, w, C].
                if (p.estimate.defined() && projection.defined() && previewDue(r, p.done, p.total))
                    report.preview = makePreview(projection, p.estimate[0].permute({1, 2, 0}).unsqueeze(0), p.done, r.previewWidth);
                progress(report);
            },
            stop);
        if (!out)
            return out.error();
        if (!phase.empty())
            seconds[phase] += std::chrono::duration<double>(Clock::now() - phaseStart).count();
        ImageResult image;
        const auto rgb = out->image.contiguous().cpu();  // uint8 [H, W, 3]
        image.height = static_cast<int>(rgb.size(0));
        image.width = static_cast<int>(rgb.size(1));
        image.rgb.assign(rgb.data_ptr<std::uint8_t>(), rgb.data_ptr<std::uint8_t>() + rgb.numel());
        image.sigmas = out->sigmas;
        image.guidance = out->guidance;
        image.secondsPerPhase = seconds;
        image.paths = recording.counts().text();
        image.pathWarnings = recording.counts().warnings();
        return image;
    } catch (const std::exception& e) {
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return errorFromException(e, "generating");
    }
}

class Family final : public families::ModelFamily {
public:
    FamilyRules rules() const override
    {
        FamilyRules r;
        r.family = "ideogram4";
        r.title = "Ideogram-4";
        r.kind = ModelKind::Image;
        r.sizeMultiple = 16;  // 16-pixel patches
        r.frameStep = 0;
        r.sizeUnit = "16-pixel patches";
        r.negativePrompt = r.audio = r.loras = r.conditions = r.stages = false;
        r.knobs = {muKnob(), stdKnob()};
        return r;
    }

    bool recognizes(const std::vector<std::filesystem::path>& paths) const override
    {
        if (paths.size() != 1)
            return false;
        const auto& root = paths.front();
        std::error_code ec;
        if (!std::filesystem::is_directory(root, ec))
            return false;
        if (families::className(root / "model_index.json") == "Ideogram4Pipeline")
            return true;
        // The unconditional transformer beside the transformer is Ideogram-4's signature (a
        // download of only the components the pipeline reads may lack model_index.json).
        return std::filesystem::is_directory(root / "unconditional_transformer", ec)
            && std::filesystem::is_directory(root / "transformer", ec);
    }

    Result<ModelFacts> readFacts(const LoadPlan&) const override
    {
        ModelFacts facts;
        facts.kind = ModelKind::Image;
        facts.version = "4";
        return facts;
    }

    Result<MemoryPlan> planMemory(const LoadPlan& plan, const families::Target& target, const SizeRequest& size,
        const std::optional<MemoryBudget>& budget) const override
    {
        return planIdeogram(plan, target, size, budget);
    }

    Result<std::unique_ptr<families::LoadedModel>> load(const LoadPlan& plan, const MemoryPlan& memory, const families::Target& target,
        const ProgressFn& progress, std::stop_token stop) const override
    {
        if (plan.modelPaths.size() != 1)
            return makeError(ErrorCode::InvalidArgument, "an Ideogram-4 model is one folder");
        pipelines::Ideogram4PipelineOptions o;
        o.modelPath = plan.modelPaths.front();
        o.device = target.device;
        o.dtype = target.dtype;
        o.offloadTransformerBlocks = memory.placement == Placement::OffloadTransformerBlocks;
        if (progress)
            progress({Phase::LoadTransformer, 0, 1, {}});
        auto loaded = pipelines::Ideogram4Pipeline::load(o, stop);
        if (!loaded)
            return loaded.error();
        if (progress)
            progress({Phase::LoadTransformer, 1, 1, {}});
        return std::unique_ptr<families::LoadedModel>(new Loaded(std::move(*loaded), memory, plan.modelPaths.front()));
    }
};

}  // namespace

const families::ModelFamily& family()
{
    static const Family instance;
    return instance;
}

}  // namespace vireo::ideogram4
