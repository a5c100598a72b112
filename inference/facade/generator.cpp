#include "inference/facade/generator.h"
#include "base/envswitch.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/models/ltx2/ltx2transformer.h"
#include "inference/lora/lora.h"

#include "inference/models/nn/layers.h"
#include "inference/pipelines/ideogram4pipeline.h"
#include "inference/pipelines/ltx2pipeline.h"
#include "inference/pipelines/previewprojection.h"
#include "inference/tensorfile/safetensors.h"
#include "inference/quant/quantizedweight.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/util/device.h"
#include "inference/util/format.h"
#include "inference/util/heap.h"
#include "inference/util/jsonlimits.h"
#include "inference/util/pathstats.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <sstream>
#include <tuple>
#include <unistd.h>

namespace vireo::facade {

namespace {

std::string lower(std::string_view text)
{
    std::string out(text);
    for (auto& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

Result<c10::Device> parseDevice(const std::string& name)
{
    try {
        c10::Device device(lower(name));
        if (device.is_cuda() && !cudaAvailable())
            return makeError(ErrorCode::Unsupported, "device " + name + " was asked for, but this machine has no usable CUDA device: "
                    + cudaUnavailableReason() + "; or choose the CPU");
        if (!device.is_cuda() && !device.is_cpu())
            return makeError(ErrorCode::Unsupported, "device " + name + " is not supported; use cpu or cuda");
        if (device.is_cuda() && !device.has_index())
            device = c10::Device(c10::kCUDA, 0);
        return device;
    } catch (const std::exception&) {
        return makeError(ErrorCode::InvalidArgument, "'" + name + "' is not a device (cpu, cuda, cuda:1)");
    }
}

Result<capability::DtypeRequest> parseDtypeRequest(const std::string& name)
{
    const auto d = lower(name);
    if (d == "auto" || d.empty())
        return capability::DtypeRequest::Auto;
    if (d == "bf16" || d == "bfloat16")
        return capability::DtypeRequest::BF16;
    if (d == "f32" || d == "float32" || d == "fp32")
        return capability::DtypeRequest::F32;
    if (d == "f16" || d == "float16" || d == "fp16")
        return capability::DtypeRequest::F16;
    return makeError(ErrorCode::InvalidArgument, "'" + name + "' is not a compute dtype (auto, bf16, f16, f32)");
}

c10::ScalarType scalarType(capability::Dtype dtype)
{
    return dtype == capability::Dtype::BF16 ? c10::kBFloat16 : dtype == capability::Dtype::F16 ? c10::kHalf : c10::kFloat;
}

// The compute dtype for a device as the capability gate chooses it (bf16 on Ampere and newer,
// f16 on Turing, f32 on the CPU unless asked otherwise), or why it cannot run there.
Result<c10::ScalarType> resolveDtype(const std::string& name, const capability::DeviceCaps& caps)
{
    auto request = parseDtypeRequest(name);
    if (!request)
        return request.error();
    const auto choice = capability::chooseDtype(caps, *request);
    if (choice.refusal)
        return makeError(ErrorCode::Unsupported, *choice.refusal);
    return scalarType(choice.dtype);
}

Result<c10::ScalarType> parseDtype(const std::string& name, c10::Device device)
{
    return resolveDtype(name, deviceCaps(device));
}

std::string describeDevice(const capability::DeviceCaps& caps)
{
    if (!caps.cuda)
        return "cpu";
    return caps.name + " (compute capability " + caps.capabilityText() + ")";
}

// The capability gate's plan for these components on this device, into the memory plan.
void planPathsInto(MemoryPlan& m, const capability::DeviceCaps& caps, const std::string& dtypeRequest,
                   const std::vector<capability::ComponentInput>& components)
{
    const auto request = parseDtypeRequest(dtypeRequest);
    const auto plan = capability::planPaths(caps, request ? *request : capability::DtypeRequest::Auto, components, pathSwitches());
    m.deviceName = describeDevice(caps);
    m.dtypeReason = plan.dtypeReason;
    m.paths.clear();
    for (const auto& c : plan.components)
        m.paths.push_back({c.name, c.text, c.reason});
    m.attentionPath = plan.attention;
    m.attentionReason = plan.attentionReason;
    m.pathWarnings = plan.warnings;
    m.pathsText = plan.text();
}

std::string dtypeName(c10::ScalarType t)
{
    return t == c10::kBFloat16 ? "bf16" : t == c10::kHalf ? "f16" : "f32";
}

std::int64_t hostAvailableBytes()
{
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::int64_t value = 0;
    std::string unit;
    while (in >> key >> value >> unit)
        if (key == "MemAvailable:")
            return value * 1024;
    return 0;
}

std::vector<LoraOutcome> outcomesOf(const std::vector<pipelines::Ltx2LoraOutcome>& in)
{
    std::vector<LoraOutcome> out;
    for (const auto& o : in)
        out.push_back({o.path, o.strength, o.status, o.matched, o.unmatched, o.refusedKeys, o.deviceBytes, o.report});
    return out;
}

// The plan's upsampler, else the latent_upsampler/ folder of a diffusers model folder (where
// Lightricks' diffusers repos keep it).
std::optional<std::filesystem::path> upsamplerOf(const LoadPlan& plan)
{
    if (plan.spatialUpsamplerPath)
        return plan.spatialUpsamplerPath;
    std::error_code ec;
    for (const auto& p : plan.modelPaths)
        if (std::filesystem::is_regular_file(p / "latent_upsampler" / "config.json", ec))
            return p / "latent_upsampler";
    return std::nullopt;
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
    return o;
}

Phase phaseOf(pipelines::Ltx2Phase p)
{
    using P = pipelines::Ltx2Phase;
    switch (p) {
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
    }
    return Phase::Denoise;
}

// A small JSON file of a model folder, bounded; nullopt when absent or unreadable.
std::optional<nlohmann::json> smallJson(const std::filesystem::path& file)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec) || std::filesystem::file_size(file, ec) > (1u << 20))
        return std::nullopt;
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = jsonutil::parseUntrusted(text.str(), file.string());
    if (!parsed || !parsed->is_object())
        return std::nullopt;
    return *parsed;
}

std::string className(const std::filesystem::path& file)
{
    const auto j = smallJson(file);
    return j && j->contains("_class_name") && (*j)["_class_name"].is_string() ? (*j)["_class_name"].get<std::string>() : std::string();
}

// Ideogram-4's components and what their tensors hold as stored, from the safetensors headers
// (validated, nothing read beyond them).
struct IdeogramSizes {
    std::map<std::string, std::int64_t> componentBytes;      // as stored
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
            return makeError(ErrorCode::NotFound, folder.string() + ": missing; an Ideogram-4 folder holds text_encoder/, transformer/, "
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

Result<MemoryPlan> planIdeogram(const LoadPlan& plan, c10::Device device, const capability::DeviceCaps& caps, c10::ScalarType dtype,
                                const SizeRequest& size, const std::optional<MemoryBudget>& budgetIn)
{
    if (plan.modelPaths.size() != 1)
        return makeError(ErrorCode::InvalidArgument, "an Ideogram-4 model is one folder; " + std::to_string(plan.modelPaths.size()) + " paths were given");
    if (plan.textEncoderPath)
        return makeError(ErrorCode::InvalidArgument, "an Ideogram-4 folder brings its own text encoder; --text-encoder does not apply");
    if (plan.placement == Placement::TextEncoderOnCpu)
        return makeError(ErrorCode::Unsupported, "Ideogram-4 keeps its text tower on the device; placement text-encoder-on-cpu is not "
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
    const std::int64_t text = b.at("text_encoder"), cond = b.at("transformer"), uncond = b.at("unconditional_transformer"), vae = b.at("vae");
    const std::int64_t weights = text + cond + uncond + vae;
    const std::int64_t margin = 512ll << 20;
    const auto work = std::max({m.activationBytes, m.encodeBytes, m.decodeBytes});
    // Streamed: each DiT keeps what runs once per forward on the device and its blocks in host
    // memory, two blocks of each in flight (the one running and the one being copied in).
    const auto layers = std::max<std::int64_t>(sizes->layers, 1);
    const auto condBlocks = cond * 95 / 100, uncondBlocks = uncond * 95 / 100;  // the blocks hold nearly every weight
    const std::int64_t streamedDevice = text + vae + (cond - condBlocks) + (uncond - uncondBlocks) + 2 * (condBlocks + uncondBlocks) / layers;
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
            const auto deviceShort = m.devicePeakBytes - m.budget.deviceFreeBytes, hostShort = m.hostPeakBytes - m.budget.hostAvailableBytes;
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
      << " in memory (transformer " << humanBytes(cond)
      << ", unconditional transformer " << humanBytes(uncond) << ", text encoder " << humanBytes(text) << ", VAE " << humanBytes(vae)
      << "); at " << size.width << "x" << size.height << " the transformers need about " << humanBytes(m.activationBytes)
      << " of working memory and the decoder " << humanBytes(m.decodeBytes) << ". ";
    if (device.is_cpu())
        e << "Everything runs in RAM: peak " << humanBytes(m.hostPeakBytes) << " of " << humanBytes(m.budget.hostAvailableBytes) << " available.";
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


// The pipeline's preview map when this request wants previews (undefined otherwise, or when it
// cannot be fitted: previews are a convenience, never a reason to fail).
template <class Pipeline>
at::Tensor previewProjectionFor(Pipeline& pipeline, const GenerateRequest& r, const ProgressFn& progress)
{
    if (r.previewEvery <= 0 || !progress)
        return {};
    auto p = pipeline.previewProjection();
    return p ? *p : at::Tensor();
}

bool previewDue(const GenerateRequest& r, std::int64_t done, std::int64_t total)
{
    return r.previewEvery > 0 && (done % r.previewEvery == 0 || done == total);
}

// Latent frames [F, h, w, C] -> small RGB frames through the fitted map, area-averaged down to
// at most maxWidth wide (0: as they are).
std::shared_ptr<const Preview> makePreview(const at::Tensor& projection, const at::Tensor& frames, std::int64_t step, int maxWidth)
{
    auto rgb = pipelines::projectPreview(projection, frames).clamp(-1, 1);  // [F, h, w, 3]
    if (maxWidth > 0 && rgb.size(2) > maxWidth) {
        const auto height = std::max<std::int64_t>(1, rgb.size(1) * maxWidth / rgb.size(2));
        rgb = at::adaptive_avg_pool2d(rgb.permute({0, 3, 1, 2}), {height, maxWidth}).permute({0, 2, 3, 1});
    }
    rgb = rgb.add(1).mul(127.5).round().to(at::kByte).contiguous();
    auto preview = std::make_shared<Preview>();
    preview->frames = static_cast<int>(rgb.size(0));
    preview->height = static_cast<int>(rgb.size(1));
    preview->width = static_cast<int>(rgb.size(2));
    preview->step = static_cast<int>(step);
    preview->rgb.assign(rgb.data_ptr<std::uint8_t>(), rgb.data_ptr<std::uint8_t>() + rgb.numel());
    return preview;
}

} // namespace

std::string_view modelKindName(ModelKind kind)
{
    return kind == ModelKind::Image ? "image" : "video";
}

ModelKind detectModelKind(const std::vector<std::filesystem::path>& paths)
{
    if (paths.size() != 1)
        return ModelKind::Video;
    const auto& root = paths.front();
    std::error_code ec;
    if (!std::filesystem::is_directory(root, ec))
        return ModelKind::Video;
    if (className(root / "model_index.json") == "Ideogram4Pipeline")
        return ModelKind::Image;
    // The unconditional transformer beside the transformer is Ideogram-4's signature (a
    // download of only the components the pipeline reads may lack model_index.json).
    if (std::filesystem::is_directory(root / "unconditional_transformer", ec) && std::filesystem::is_directory(root / "transformer", ec))
        return ModelKind::Image;
    return ModelKind::Video;
}

std::string_view placementName(Placement placement)
{
    switch (placement) {
    case Placement::Auto: return "auto";
    case Placement::AllResident: return "all-resident";
    case Placement::TextEncoderOnCpu: return "text-encoder-on-cpu";
    case Placement::OffloadTransformerBlocks: return "offload-transformer-blocks";
    }
    return "auto";
}

std::optional<Placement> parsePlacement(std::string_view name)
{
    const auto l = lower(name);
    for (auto p : {Placement::Auto, Placement::AllResident, Placement::TextEncoderOnCpu, Placement::OffloadTransformerBlocks})
        if (l == placementName(p))
            return p;
    return std::nullopt;
}

std::string_view speedModeName(SpeedMode mode)
{
    switch (mode) {
    case SpeedMode::Quality: return "quality";
    case SpeedMode::Balanced: return "balanced";
    case SpeedMode::Fast: return "fast";
    }
    return "quality";
}

std::optional<SpeedMode> parseSpeedMode(std::string_view name)
{
    const auto l = lower(name);
    for (auto m : {SpeedMode::Quality, SpeedMode::Balanced, SpeedMode::Fast})
        if (l == speedModeName(m))
            return m;
    return std::nullopt;
}

StepCacheSettings stepCacheSettings(SpeedMode mode)
{
    // The thresholds peers ship for first-block caches on DiTs (0.05-0.12 relative L1);
    // `vireo-bench speed` measures what they cost on a given model.
    switch (mode) {
    case SpeedMode::Quality: return {0.0, 1};
    case SpeedMode::Balanced: return {0.05, 1};
    case SpeedMode::Fast: return {0.12, 2};
    }
    return {};
}

std::string_view phaseName(Phase phase)
{
    switch (phase) {
    case Phase::LoadTextEncoder: return "load text encoder";
    case Phase::EncodePrompt: return "encode prompt";
    case Phase::LoadTransformer: return "load transformer";
    case Phase::Denoise: return "denoise";
    case Phase::LoadDecoders: return "load decoders";
    case Phase::DecodeVideo: return "decode video";
    case Phase::DecodeAudio: return "decode audio";
    case Phase::Vocoder: return "vocoder";
    case Phase::DecodeImage: return "decode image";
    case Phase::EncodeConditions: return "encode conditions";
    case Phase::UpsampleLatents: return "upsample latents";
    case Phase::Refine: return "refine";
    }
    return "?";
}

Result<StagePlan> planStages(const LoadPlan& plan, const GenerateRequest& request)
{
    StagePlan out;
    out.firstWidth = request.width;
    out.firstHeight = request.height;
    if (request.stages != "auto" && request.stages != "single" && request.stages != "two")
        return makeError(ErrorCode::InvalidArgument, "stages \"" + request.stages + "\": use auto, single or two");
    // Why the two-stage path cannot run, or empty when it can. Stage 1 runs at half size, so
    // each half must still be a whole number of 32-pixel latent cells.
    std::string blocker;
    if (detectModelKind(plan.modelPaths) != ModelKind::Video)
        blocker = "image models have one stage";
    else if (!upsamplerOf(plan))
        blocker = "no spatial upsampler is loaded with this model";
    else if (request.schedule != "distilled")
        blocker = "the two-stage path refines with the distilled schedule; this request uses \"" + request.schedule + "\"";
    else if (request.width % 64 != 0 || request.height % 64 != 0)
        blocker = std::to_string(request.width) + "x" + std::to_string(request.height) +
                  " does not halve into 32-pixel latent cells (both sides must be multiples of 64)";
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
    out.reason = request.stages == "two" ? "two stages, as asked"
                                         : "two stages: the distilled model's default (half size, latent upsample x2, 3 refining steps)";
    return out;
}

std::vector<DeviceInfo> availableDevices()
{
    std::vector<DeviceInfo> out;
    out.push_back({"cpu", "CPU (" + std::to_string(at::get_num_threads()) + " threads)", hostAvailableBytes()});
    if (cudaAvailable()) {
        out.push_back({"cuda:0", cudaDeviceSummary(), cudaTotalMemory()});
    }
    return out;
}

void releaseDeviceCaches()
{
    heap::releaseFreeMemory();
    releaseCachedDeviceMemory();
}

bool deviceHealthy(const std::string& device)
{
    const auto d = parseDevice(device);
    return !d || !d->is_cuda() || cudaContextHealthy();
}

std::optional<bool> parseFlag(std::string_view text)
{
    return env::parseFlag(text);
}

MemoryBudget measureBudget(const std::string& device)
{
    MemoryBudget b;
    b.hostAvailableBytes = hostAvailableBytes();
    if (auto d = parseDevice(device); d && d->is_cuda()) {
        const auto [freeBytes, totalBytes] = cudaMemoryInfo(*d);
        // Memory the caching allocator holds but does not use is free for our purposes.
        b.deviceFreeBytes = freeBytes;
        b.deviceTotalBytes = totalBytes;
    }
    return b;
}

ProcessSettings ProcessSettings::capture()
{
    ProcessSettings s;
    s.threads = at::get_num_threads();
    s.attentionKernel = std::string(nn::attentionKernelName(nn::attentionKernel()));
    s.fp8FastAccumulation = quant::fp8FastAccumulation();
    s.tf32Matmul = at::globalContext().allowTF32CuBLAS();
    s.tf32Cudnn = at::globalContext().allowTF32CuDNN();
    return s;
}

void ProcessSettings::apply() const
{
    if (threads > 0 && at::get_num_threads() != threads)
        at::set_num_threads(threads);
    if (auto k = nn::parseAttentionKernel(attentionKernel))
        nn::setAttentionKernel(*k);
    quant::setFp8FastAccumulation(fp8FastAccumulation);
    at::globalContext().setAllowTF32CuBLAS(tf32Matmul);
    at::globalContext().setAllowTF32CuDNN(tf32Cudnn);
}

// ---------------------------------------------------------------------------------------------

Result<ModelFacts> Generator::readModelFacts(const LoadPlan& plan)
{
    try {
        ModelFacts facts;
        if (detectModelKind(plan.modelPaths) == ModelKind::Image) {
            facts.kind = ModelKind::Image;
            facts.version = "4";
            return facts;
        }
        auto pipeline = pipelines::Ltx2Pipeline::open(pipelineOptions(plan, c10::Device(c10::kCPU), c10::kFloat, Placement::AllResident));
        if (!pipeline)
            return pipeline.error();
        facts.version = pipeline->version();
        std::tie(facts.trainedFor, facts.trainedForEvidence) = pipeline->trainedFor();
        return facts;
    } catch (const std::exception& e) {
        return errorFromException(e, "reading the model's headers");
    }
}

namespace {

// The LTX-2 weights held once loaded, by where they can go.
struct Ltx2Held {
    std::int64_t text = 0, transformer = 0, rest = 0;
};

// The fastest placement that fits the budget (or the one asked for), with its peaks and, when
// none fits, the shortfall.
void placeLtx2(MemoryPlan& m, const LoadPlan& plan, c10::Device device, const pipelines::Ltx2StoredSizes& sizes, const Ltx2Held& held)
{
    const auto [text, transformer, rest] = held;
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
            c.hostPeak = c.hostWeights + std::max(work, m.encodeBytes);
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
std::string ltx2Explanation(const MemoryPlan& m, const SizeRequest& size, const capability::DeviceCaps& caps, bool onCpu, const Ltx2Held& held,
    std::int64_t stored, std::int64_t cpuPeak)
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

} // namespace

Result<MemoryPlan> Generator::planMemory(const LoadPlan& plan, const SizeRequest& size, const std::optional<MemoryBudget>& budgetIn)
{
    // The device planned for: this machine's, or the budget's what-if device (which need not be
    // here, so nothing below touches it).
    capability::DeviceCaps caps;
    c10::Device device(c10::kCPU);
    if (budgetIn && budgetIn->deviceCaps) {
        caps = *budgetIn->deviceCaps;
        if (caps.cuda)
            device = c10::Device(c10::kCUDA, 0);
    } else {
        auto parsed = parseDevice(plan.device);
        if (!parsed)
            return parsed.error();
        device = *parsed;
        caps = deviceCaps(device);
    }
    if (const auto refusal = capability::deviceRefusal(caps))
        return makeError(ErrorCode::Unsupported, *refusal);
    auto dtype = resolveDtype(plan.dtype, caps);
    if (!dtype)
        return dtype.error();
    if (size.width <= 0 || size.height <= 0 || size.frames <= 0)
        return makeError(ErrorCode::InvalidArgument, "the size to plan for must be positive");
    try {
        if (detectModelKind(plan.modelPaths) == ModelKind::Image) {
            return planIdeogram(plan, device, caps, *dtype, size, budgetIn);
        }
        // Headers only: opened for the CPU whatever the device, so a what-if never touches one.
        auto pipeline = pipelines::Ltx2Pipeline::open(pipelineOptions(plan, c10::Device(c10::kCPU), *dtype, Placement::AllResident));
        if (!pipeline)
            return pipeline.error();
        const auto sizes = pipeline->storedSizes();
        MemoryPlan m;
        m.pipeline = "ltx2";
        m.version = pipeline->version();
        m.device = device.str();
        m.dtype = dtypeName(*dtype);
        m.budget = budgetIn ? *budgetIn : measureBudget(plan.device);
        const std::int64_t bytesPerValue = *dtype == c10::kFloat ? 4 : 2;
        // The working memory, from the shapes (see docs/gpu-notes.md for the measured peaks
        // these were checked against: 0.61 GB of transformer activations at 6144 tokens).
        const auto tokens = ((size.frames - 1) / 8 + 1) * (size.height / 32) * (size.width / 32);
        const auto batch = size.guidance ? 2 : 1;
        m.activationBytes = tokens * batch * (sizes.ffnDim * 2 + sizes.videoDim * 8) * bytesPerValue;
        const std::int64_t textTokens = 1024;
        m.encodeBytes = batch * textTokens * 3840 * 49 * bytesPerValue + (64ll << 20);
        const auto tileH = std::min<std::int64_t>(size.height, 576), tileW = std::min<std::int64_t>(size.width, 576);
        m.decodeBytes = 5 * 256 * size.frames * (tileH / 4) * (tileW / 4) * bytesPerValue + size.frames * size.height * size.width * 3 * 4;

        // What each component holds once loaded (dense weights in the compute dtype), not what
        // it stores: bf16 weights under f32 compute take twice their file size.
        const auto& b = sizes.componentHeldBytes;
        auto bytesOf = [&](const char* name) { return b.count(name) ? b.at(name) : 0; };
        auto storedOf = [&](const char* name) { return sizes.componentBytes.count(name) ? sizes.componentBytes.at(name) : 0; };
        const std::int64_t text = bytesOf("text_encoder"), transformer = bytesOf("transformer");
        // The encoder joins the resident set with the first conditioned request, the upsampler
        // with the load: both are planned for, so neither can tip a running studio over.
        const std::int64_t rest = bytesOf("connectors") + bytesOf("video_vae") + bytesOf("audio_vae") + bytesOf("vocoder")
                                  + bytesOf("video_encoder") + bytesOf("spatial_upsampler");

        placeLtx2(m, plan, device, sizes, {text, transformer, rest});
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
            {"text_encoder", text, storedOf("text_encoder"), (textResident ? dev : std::string("cpu")) + (textResident ? "" : ", loaded for each prompt")},
            {"connectors", bytesOf("connectors"), storedOf("connectors"), dev},
            {"transformer", transformer, storedOf("transformer"),
                m.placement == Placement::OffloadTransformerBlocks ? "cpu, streamed to " + dev + " block by block" : dev},
            {"video_vae", bytesOf("video_vae"), storedOf("video_vae"), dev + (size.height > 512 || size.width > 512 ? ", tiled decode" : "")},
            {"audio_vae", bytesOf("audio_vae"), storedOf("audio_vae"), dev},
            {"vocoder", bytesOf("vocoder"), storedOf("vocoder"), dev},
        };
        if (bytesOf("video_encoder"))
            m.components.push_back({"video_encoder", bytesOf("video_encoder"), storedOf("video_encoder"), dev + ", loaded by the first image or video condition"});
        if (upsamplerOf(plan))
            m.components.push_back({"spatial_upsampler", bytesOf("spatial_upsampler"), storedOf("spatial_upsampler"), dev + ", the two-stage path"});
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
            + storedOf("audio_vae") + storedOf("vocoder") + storedOf("video_encoder") + storedOf("spatial_upsampler");
        m.explanation = ltx2Explanation(m, size, caps, onCpu, {text, transformer, rest}, stored, cpuPeak);
        return m;
    } catch (const std::exception& e) {
        return errorFromException(e, "planning memory");
    }
}

// ---------------------------------------------------------------------------------------------

struct Generator::Impl {
    LoadPlan plan;
    MemoryPlan memory;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::optional<pipelines::Ltx2Pipeline> pipeline;
    std::optional<pipelines::Ideogram4Pipeline> image;  // instead of `pipeline` for Ideogram-4
    ProcessSettings before, wanted;

    ~Impl()
    {
        pipeline.reset();
        image.reset();
        heap::releaseFreeMemory();
        releaseCachedDeviceMemory();
        before.apply();
    }
};

Generator::Generator(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Generator::~Generator() = default;

Result<std::unique_ptr<Generator>> Generator::load(const LoadPlan& plan, const MemoryPlan& memory, const ProgressFn& progress,
                                                   std::stop_token stop)
{
    auto device = parseDevice(plan.device);
    if (!device)
        return device.error();
    auto dtype = parseDtype(plan.dtype, *device);
    if (!dtype)
        return dtype.error();
    if (!nn::parseAttentionKernel(plan.attentionKernel))
        return makeError(ErrorCode::InvalidArgument, "'" + plan.attentionKernel + "' is not an attention kernel (default, flash3, flash, cudnn, efficient)");
    auto impl = std::make_unique<Impl>();
    impl->plan = plan;
    impl->memory = memory;
    impl->device = *device;
    impl->dtype = *dtype;
    impl->before = ProcessSettings::capture();
    ProcessSettings wanted = impl->before;
    wanted.attentionKernel = plan.attentionKernel;
    wanted.fp8FastAccumulation = plan.fp8FastAccumulation;
    if (plan.cpuThreads > 0)
        wanted.threads = plan.cpuThreads;
    wanted.apply();
    impl->wanted = wanted;
    try {
        c10::InferenceMode inference;
        if (memory.kind == ModelKind::Image || detectModelKind(plan.modelPaths) == ModelKind::Image) {
            if (plan.modelPaths.size() != 1)
                return makeError(ErrorCode::InvalidArgument, "an Ideogram-4 model is one folder");
            pipelines::Ideogram4PipelineOptions o;
            o.modelPath = plan.modelPaths.front();
            o.device = *device;
            o.dtype = *dtype;
            o.offloadTransformerBlocks = memory.placement == Placement::OffloadTransformerBlocks;
            if (progress)
                progress({Phase::LoadTransformer, 0, 1, {}});
            auto loaded = pipelines::Ideogram4Pipeline::load(o, stop);
            if (!loaded)
                return loaded.error();
            impl->image.emplace(std::move(*loaded));
            if (progress)
                progress({Phase::LoadTransformer, 1, 1, {}});
            if (stop.stop_requested())
                return makeError(ErrorCode::Cancelled, "cancelled");
            return std::unique_ptr<Generator>(new Generator(std::move(impl)));
        }
        auto opened = pipelines::Ltx2Pipeline::open(pipelineOptions(plan, *device, *dtype, memory.placement));
        if (!opened)
            return opened.error();  // impl's destructor restores the settings
        impl->pipeline.emplace(std::move(*opened));
        auto loaded = impl->pipeline->load(
            [&](const pipelines::Ltx2Progress& p) {
                if (progress)
                    progress({phaseOf(p.phase), p.done, p.total, {}});
            },
            stop);
        if (!loaded)
            return loaded.error();
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
    } catch (const std::exception& e) {
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return errorFromException(e, "loading the model");
    }
    return std::unique_ptr<Generator>(new Generator(std::move(impl)));
}

ModelKind Generator::kind() const
{
    return m_impl->image ? ModelKind::Image : ModelKind::Video;
}

Result<ImageResult> Generator::generateImage(const GenerateRequest& r, const ProgressFn& progress, std::stop_token stop)
{
    auto& m = *m_impl;
    if (!m.image)
        return makeError(ErrorCode::InvalidArgument, "the loaded model makes videos; generate() makes them");
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
    req.seed = r.seed;
    using Clock = std::chrono::steady_clock;
    std::map<std::string, double> seconds;
    std::string phase;
    auto phaseStart = Clock::now();
    try {
        c10::InferenceMode inference;
        const paths::Recording recording;
        const auto projection = previewProjectionFor(*m.image, r, progress);
        auto out = m.image->generate(
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

Result<VideoResult> Generator::generate(const GenerateRequest& r, const ProgressFn& progress, std::stop_token stop)
{
    auto& m = *m_impl;
    if (!m.pipeline)
        return makeError(ErrorCode::InvalidArgument, "the loaded model makes images; generateImage() makes them");
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
    req.width = r.width;
    req.height = r.height;
    req.frames = r.frames;
    req.fps = r.fps;
    req.schedule = schedule == "dev" ? pipelines::Ltx2Schedule::Dev : pipelines::Ltx2Schedule::Distilled;
    req.steps = r.steps;
    req.guidanceScale = r.guidance;
    req.audioGuidanceScale = r.audioGuidance;
    req.guidanceRescale = r.guidanceRescale;
    req.seed = r.seed;
    req.maxSequenceLength = r.maxSequenceLength;
    for (const auto& l : r.loras) {
        if (!std::isfinite(l.strength) || std::abs(l.strength) > 100)
            return makeError(ErrorCode::InvalidArgument, l.path.string() + ": a LoRA strength must be between -100 and 100");
        req.loras.push_back({l.path, l.strength});
    }
    auto stages = planStages(m.plan, r);
    if (!stages)
        return stages.error();
    req.twoStage = stages->twoStage;
    const std::int64_t latentFrames = (r.frames - 1) / 8 + 1;
    for (const auto& c : r.conditions) {
        const auto name = c.source.empty() ? std::string("a condition") : c.source;
        if (c.width != r.width || c.height != r.height)
            return makeError(ErrorCode::InvalidArgument, name + " is " + std::to_string(c.width) + "x" + std::to_string(c.height)
                    + ", the video " + std::to_string(r.width) + "x" + std::to_string(r.height) + "; fit it to the video's size first");
        if (c.frames < 1 || (c.frames - 1) % 8)
            return makeError(ErrorCode::InvalidArgument, name + ": a conditioning clip must have 8k + 1 frames (1 for a still), got "
                    + std::to_string(c.frames));
        if (c.rgb.size() != static_cast<std::size_t>(c.frames) * static_cast<std::size_t>(c.width) * static_cast<std::size_t>(c.height) * 3)
            return makeError(ErrorCode::InvalidArgument, name + ": the pixel buffer does not hold frames x height x width x 3 bytes");
        if (c.frame < 0 || c.frame >= r.frames || (c.frame != 0 && (c.frame - 1) % 8 != 0))
            return makeError(ErrorCode::InvalidArgument, name + ": frame " + std::to_string(c.frame)
                    + " is not 0 or 8k + 1 inside the clip's " + std::to_string(r.frames) + " frames (1, 9, 17, ...)");
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
    }
    try {
        c10::InferenceMode inference;
        const paths::Recording recording;
        const auto projection = previewProjectionFor(*m.pipeline, r, progress);
        auto out = m.pipeline->generate(
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
        const auto wave = out->waveform.to(at::kFloat).contiguous().cpu();  // [channels, samples]
        v.channels = static_cast<int>(wave.size(0));
        v.samples = wave.size(1);
        v.sampleRate = out->sampleRate;
        v.audio.assign(wave.data_ptr<float>(), wave.data_ptr<float>() + wave.numel());
        v.schedule = schedule;
        v.sigmas = out->sigmas;
        v.secondsPerPhase = out->secondsPerPhase;
        v.loras = outcomesOf(out->loras);
        v.speed = std::string(speedModeName(*speed));
        v.stepsSkipped = out->stepsSkipped;
        v.cudaGraphs = out->cudaGraphs;
        v.stages = *stages;
        v.paths = recording.counts().text();
        v.pathWarnings = recording.counts().warnings();
        return v;
    } catch (const std::exception& e) {
        if (stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return errorFromException(e, "generating");
    }
}

Result<std::string> Generator::inspectLora(const LoadPlan& plan, const std::filesystem::path& lora, bool asJson)
{
    if (detectModelKind(plan.modelPaths) == ModelKind::Image)
        return makeError(ErrorCode::Unsupported, "LoRAs are not supported for Ideogram-4 yet");
    try {
        // The transformer's headers are all a match needs: no pipeline, no weights read.
        auto weights = ltx2::Ltx2Weights::open(plan.modelPaths);
        if (!weights)
            return weights.error();
        auto report = lora::inspect(lora, ltx2::loraTargetsFromHeaders(*weights));
        if (!report)
            return report.error();
        return asJson ? report->toJson() : report->toText();
    } catch (const std::exception& e) {
        return errorFromException(e, lora.string());
    }
}

Result<std::vector<LoraOutcome>> Generator::applyLoras(const std::vector<LoraRequest>& loras)
{
    if (!m_impl->pipeline)
        return makeError(ErrorCode::Unsupported, "LoRAs are not supported for Ideogram-4 yet");
    std::vector<pipelines::Ltx2Lora> list;
    for (const auto& l : loras)
        list.push_back({l.path, l.strength});
    try {
        c10::InferenceMode inference;
        auto out = m_impl->pipeline->applyLoras(list);
        if (!out)
            return out.error();
        return outcomesOf(*out);
    } catch (const std::exception& e) {
        return errorFromException(e, "applying LoRAs");
    }
}

void Generator::reapplyProcessSettings(const ProcessSettings& restoreOnDestruction)
{
    m_impl->before = restoreOnDestruction;
    m_impl->wanted.apply();
}

const MemoryPlan& Generator::memoryPlan() const { return m_impl->memory; }
std::string Generator::version() const { return m_impl->pipeline ? m_impl->pipeline->version() : m_impl->memory.version; }
std::vector<std::filesystem::path> Generator::files() const { return m_impl->pipeline ? m_impl->pipeline->files() : m_impl->plan.modelPaths; }

std::map<std::string, std::int64_t> Generator::residentBytes() const
{
    if (m_impl->pipeline)
        return m_impl->pipeline->componentBytes();
    std::map<std::string, std::int64_t> out;
    for (const auto& c : m_impl->memory.components)
        out[c.name] = c.bytes;
    return out;
}

std::map<std::string, int> Generator::matmulPaths() const
{
    return m_impl->pipeline ? m_impl->pipeline->matmulPaths() : std::map<std::string, int>{};
}

} // namespace vireo::facade
