#pragma once

// The inference layer as the studio's runtime sees it: plan, load, generate, unload, with
// plain value types only (no torch header), so core/ and ui/ can include it. Exceptions from
// libtorch stop here and come out as one Error each: out of memory on any device is always
// ErrorCode::OutOfMemory, a GPU fault ErrorCode::DeviceFault, a cancel ErrorCode::Cancelled.

#include "base/capability.h"
#include "inference/util/result.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::facade {

// Where the components live while a model is loaded, fastest first.
enum class Placement {
    Auto,  // the first of the others that fits this machine
    AllResident,  // everything on the device
    TextEncoderOnCpu,  // the text encoder runs on the CPU; the rest on the device
    OffloadTransformerBlocks,  // also the transformer's blocks in host memory, streamed one by one
};
std::string_view placementName(Placement placement);

// What a generation may trade for speed. Quality computes every step in full (the reference's
// result). Balanced and Fast skip the transformer's blocks after the first on steps where the
// first block's residual barely changed (a first-block step cache, reset for every clip and
// judged per guidance branch): Balanced at a small change and never two steps in a row, Fast
// at a larger one and up to two in a row. The first and last steps always compute.
enum class SpeedMode { Quality, Balanced, Fast };
std::string_view speedModeName(SpeedMode mode);
std::optional<SpeedMode> parseSpeedMode(std::string_view name);  // case-insensitive
struct StepCacheSettings {
    double threshold = 0.0;  // relative L1 change of the first block's residual
    int maxConsecutive = 1;
};
StepCacheSettings stepCacheSettings(SpeedMode mode);
std::optional<Placement> parsePlacement(std::string_view name);  // case-insensitive

// What a model makes, from its folder layout alone (no weight byte is read): a diffusers
// Ideogram-4 folder (model_index.json naming Ideogram4Pipeline, or transformer/ with
// unconditional_transformer/ beside it) makes images;
// everything else is an LTX-2 video model, which its loader then checks.
enum class ModelKind { Video, Image };
std::string_view modelKindName(ModelKind kind);  // "video" | "image"
ModelKind detectModelKind(const std::vector<std::filesystem::path>& modelPaths);

// A numeric control a family declares beyond the ones every family shares (prompt, size, steps,
// guidance, seed): the window shows one spin box per knob, vireo-cli takes --set ID=VALUE, the
// catalog's defaults may set it by its id, and the recipe keeps its value. Declaring one in the
// family's rules() and reading it in its generate is all a new knob takes.
struct Knob {
    std::string id;  // "schedule_mu": the CLI's, the catalog's and the recipe's name
    std::string label;  // "Schedule shift", as the window shows it
    std::string help;  // one sentence: what it changes
    double minimum = 0.0, maximum = 1.0, defaultValue = 0.0, step = 0.1;
    int decimals = 2;
};

// The rules a model family's requests follow, for the front ends' checks and controls.
struct FamilyRules {
    std::string family;  // "ltx2", "ideogram4"
    std::string title;  // "LTX-2", "Ideogram-4"
    ModelKind kind = ModelKind::Video;
    int sizeMultiple = 32;  // width and height are multiples of this
    int frameStep = 8;  // frames are frameStep * k + 1; 0: one still
    std::string sizeUnit;  // what the size multiple is: "16-pixel patches", "32-pixel latent cells"
    bool negativePrompt = true, audio = true, loras = true, conditions = true, stages = true;
    // The user's sound as a condition (audio-to-video); a length on auto then holds the sound.
    bool audioInput = false;
    // Retake: part of a clip made again, the rest kept.
    bool retake = false;
    // IC-LoRA: reference clips (depth, pose, edges) an in-context LoRA follows.
    bool references = false;
    // Frames 0 ("auto") asks the model for the prompt's length, where its files can say it
    // (LTX-2.5's duration head; planStages refuses it for the others).
    bool autoLength = false;
    // The prompt rewritten by the model's prompt enhancer before encoding, where the files have
    // one (planStages refuses it for the others).
    bool promptEnhancer = false;
    std::vector<Knob> knobs;  // the family's own controls, in the order the window shows them
    const Knob* knob(std::string_view id) const;
    // A knob value that brings a recipe's own settings for what the user leaves unset (LTX's
    // hq = 1: Lightricks' HQ preset); the window shows them when the knob is turned to it.
    struct Preset {
        std::string knob;
        double value = 1;
        std::optional<int> steps;
        std::optional<double> rescale;
        std::map<std::string, double> knobs;
    };
    std::vector<Preset> presets;
};
// The family these files belong to (its folder layout alone) and its rules.
FamilyRules familyRules(const std::vector<std::filesystem::path>& modelPaths);
// A registered family's rules by its id or a catalog pipeline of it ("ltx2", "ltx2-dev");
// nullopt for an unknown id.
std::optional<FamilyRules> familyRulesById(std::string_view id);
// Every registered family's rules, in the registry's order (help texts list their knobs).
std::vector<FamilyRules> registeredFamilyRules();

struct LoadPlan {
    // A diffusers folder, a Lightricks single file, or a GGUF transformer with its companions.
    std::vector<std::filesystem::path> modelPaths;
    std::optional<std::filesystem::path> textEncoderPath;
    std::string device = "cpu";  // "cpu", "cuda", "cuda:1"
    std::string dtype = "auto";  // "f32", "bf16", "auto" (bf16 on a GPU, f32 on the CPU)
    Placement placement = Placement::Auto;
    // Process-wide settings the load applies; unloading puts back what was there before.
    std::string attentionKernel = "default";
    bool fp8FastAccumulation = false;
    int cpuThreads = 0;  // 0: leave as is
    // The latent spatial upsampler of the two-stage path (a Lightricks single file such as
    // ltx-2-spatial-upscaler-x2-1.0.safetensors, or a diffusers latent_upsampler/ folder).
    // None: only single-stage generation.
    std::optional<std::filesystem::path> spatialUpsamplerPath;
    // The latent temporal x2 upsampler of LTX-2.5's temporal refine rounds (the same layouts; a
    // diffusers temporal_latent_upsampler/ folder is found without it). None: no rounds.
    std::optional<std::filesystem::path> temporalUpsamplerPath;
    // The distilled LoRA of a dev model's two-stage recipe (Lightricks' ltx-2.3-22b-distilled-
    // lora-384-1.1.safetensors): stage 2 refines with it. None: the dev model runs one stage.
    std::optional<std::filesystem::path> distilledLoraPath;
    // LTX-2.5's prompt enhancer (a Gemma 4 instruct model folder, or a diffusers folder with
    // prompt_enhancer/). None: the model folder's own, where it has one.
    std::optional<std::filesystem::path> promptEnhancerPath;
};

// The request shape the memory plan sizes activations and decoding for.
struct SizeRequest {
    std::int64_t width = 768, height = 512, frames = 121;
    bool guidance = false;  // classifier-free guidance doubles the transformer's batch
    // The family's own controls (some add guidance branches, a batch row each where batched).
    std::map<std::string, double> knobs{};
    // IC-LoRA reference clips: each adds up to the first pass's tokens to its sequence.
    int references = 0;
    // The prompt enhancer runs first, on the text encoder's device, and is freed after.
    bool enhancePrompt = false;
};

// Free memory to plan against; measured on this machine unless given (tests, what-ifs).
struct MemoryBudget {
    std::int64_t deviceFreeBytes = 0, deviceTotalBytes = 0;
    std::int64_t hostAvailableBytes = 0;
    // The device to plan for instead of this machine's (a what-if: "would an RTX 3090 run it?");
    // its paths and dtype are planned as they would be there.
    std::optional<capability::DeviceCaps> deviceCaps;
};
MemoryBudget measureBudget(const std::string& device);

struct ComponentPlacement {
    // text_encoder, connectors, transformer, video_vae, audio_vae, vocoder (LTX-2);
    // text_encoder, transformer, unconditional_transformer, vae (Ideogram-4)
    std::string name;
    std::int64_t bytes = 0;  // held once loaded: dense weights in the compute dtype, quantized ones as stored
    std::int64_t storedBytes = 0;  // on disk
    std::string where;  // "cuda:0", "cpu", "cpu, streamed to cuda:0 block by block"
};

// The path a component takes on the planned device, decided before anything loads.
struct PlannedPath {
    std::string component;
    std::string path;  // "FP8 tensor-core GEMM", "dequantize to bf16 + GEMM", "dense GEMM in f32 on the CPU"
    std::string reason;  // why; for a slower path, what blocks the faster one
};

// What a model's own headers say about it, read without touching a device, for the defaults of a
// model outside the catalog: what it makes, its version, and what it was trained for ("dev",
// "distilled", or "" when its files do not say) with where that is said.
struct ModelFacts {
    ModelKind kind = ModelKind::Video;
    std::string version;  // "2.0", "2.3"; "4" for Ideogram-4
    std::string trainedFor, trainedForEvidence;
};

struct MemoryPlan {
    std::string pipeline;  // "ltx2", "ideogram4"
    std::string version;  // "2.0", "2.3"; "4" for Ideogram-4
    ModelKind kind = ModelKind::Video;
    std::string device, dtype;  // resolved
    Placement placement = Placement::AllResident;  // the one chosen (never Auto)
    bool forced = false;  // the user's placement, kept though it does not fit
    std::vector<ComponentPlacement> components;
    std::int64_t deviceWeightBytes = 0, hostWeightBytes = 0;
    std::int64_t activationBytes = 0;  // the transformer's peak working memory at this size
    std::int64_t encodeBytes = 0;  // the text encoder's working memory
    // The prompt enhancer's per-layer embedding table (dense Gemma 4), in RAM while it writes.
    std::int64_t enhancerHostBytes = 0;
    std::int64_t decodeBytes = 0;  // the video decoder's peak (tiled), estimated
    std::int64_t devicePeakBytes = 0, hostPeakBytes = 0;
    MemoryBudget budget;
    bool fits = false;
    std::int64_t shortfallBytes = 0;  // what is missing where it does not fit
    std::string explanation;  // words and numbers, for the UI
    // The capability gate's answer for this device: what it is, the compute dtype and why,
    // each component's path, the attention's, and what runs slower than the device could.
    std::string deviceName;  // "NVIDIA GeForce RTX 3090 (compute capability 8.6)", "cpu"
    std::string dtypeReason;
    std::vector<PlannedPath> paths;
    std::string attentionPath, attentionReason;
    std::vector<std::string> pathWarnings;
    std::string pathsText;  // all of it in one line
};

// A LoRA for a generation, by file, with its strength (negative allowed).
struct LoraRequest {
    std::filesystem::path path;
    double strength = 1.0;
    bool operator==(const LoraRequest&) const = default;
};

// What became of a requested LoRA. Never silently dropped: refused ones say why here.
struct LoraOutcome {
    std::filesystem::path path;
    double strength = 1.0;
    std::string status;  // "applied", "partial: 3 of 120 modules unmatched", "refused: ..."
    int matched = 0, unmatched = 0;
    std::int64_t refusedKeys = 0;
    std::int64_t deviceBytes = 0;
    std::string report;  // the match report as text (unmatched modules listed)
};

// The user's sound for audio-to-video, decoded by the caller (runtime::prepareConditionAudio),
// so the inference layer never parses an audio file: planar float samples at the file's rate.
// The video follows it (an LTX clip's length on auto holds all of it, up to 20 s) and the
// output carries its samples.
struct AudioInput {
    int sampleRate = 0;
    std::vector<std::vector<float>> channels;  // one or two, all the same length
    std::string source;  // the file it came from, for errors and the recipe
    std::string sha256;  // of the file's bytes
    std::string note;  // what was changed on the way (channels dropped), said to the user
    std::int64_t frames() const { return channels.empty() ? 0 : static_cast<std::int64_t>(channels.front().size()); }
    double seconds() const { return sampleRate > 0 ? static_cast<double>(frames()) / sampleRate : 0.0; }
};

// A still or a clip the video must show at a given frame (image-to-video, keyframes), as
// decoded pixels: the caller (engine, CLI) decodes the file, fits it to the output's size and
// applies the training-time H.264 re-compression (runtime::prepareConditionImage), so the
// inference layer never parses an image file.
struct ConditionInput {
    std::int64_t frame = 0;  // the output frame it starts at: 0, or 8k + 1 up to the last
    double strength = 1.0;  // 1: kept exactly; lower: followed more loosely (0..1)
    int width = 0, height = 0;  // equal to the request's size
    int frames = 1;  // a still: 1; a clip: 8k + 1
    std::vector<std::uint8_t> rgb;  // frames x height x width x 3
    std::string source;  // the file it came from, for errors and the recipe
    std::string sha256;  // of the file's bytes, for the recipe
    // A clip from its end (extending it): its sound over those frames, which the new sound
    // continues (LTX-2's audio prefix); none: the clip has no sound, or it is not continued.
    std::optional<AudioInput> sound;
};

// Retake (LTX-2): a clip made again over [start, end) seconds and kept elsewhere. The window and
// what to make again are set with the request (the stage plan sees them); the clip's frames and
// sound are decoded by the engine (runtime::prepareRetake) before the run.
struct RetakeInput {
    double start = 0, end = 0;
    bool video = true, audio = true;  // which streams the window makes again
    ConditionInput clip;  // the request's frames at its size; empty until decoded
    std::optional<AudioInput> sound;  // the clip's; none: a sound is made for the whole clip
};

// Which path an LTX request takes: one pass at full size, or the two-stage distilled path
// (half size, latent upsample x2, three refining steps at full size).
struct StagePlan {
    bool twoStage = false;
    bool dfr = false;  // LTX-2.5's DFR pass (keyframe slots on a padded canvas)
    int temporalRounds = 0;  // LTX-2.5's temporal refine rounds after it (each doubles the rate)
    bool epilogue = false;  // LTX-2.5's third spatial stage (the 4K path: stage 1 at a quarter of the size)
    std::string reason;  // one sentence for the UI
    std::int64_t firstWidth = 0, firstHeight = 0;  // stage 1's size (the full size when single)
};

struct GenerateRequest {
    std::string prompt, negativePrompt;
    // FamilyRules::promptEnhancer: the prompt rewritten first (VideoResult::enhancedPrompt says how).
    bool enhancePrompt = false;
    // frames 0: auto, the length the model reads from the prompt (FamilyRules::autoLength).
    std::int64_t width = 768, height = 512, frames = 121;
    double fps = 24.0;
    std::string schedule = "distilled";  // "distilled" | "dev"
    int steps = 0;  // 0: the schedule's default
    double guidance = 1.0, audioGuidance = 1.0, guidanceRescale = 0.0;
    std::int64_t seed = 0;
    std::int64_t maxSequenceLength = 1024;
    int previewEvery = 2;  // denoise steps between previews; 0: none
    int previewWidth = 256;  // previews wider than this are scaled down to it
    // Applied unfused at run time: changing them between generations reloads nothing.
    std::vector<LoraRequest> loras;
    std::string speed = "quality";  // quality | balanced | fast (see SpeedMode)
    // Images (Ideogram-4): the guidance weight per denoise step, noisiest first (as many as
    // steps); empty: `guidance` at every step. The catalog's defaults fill in the reference's
    // 45 x 7.0 then 3 x 3.0 for 48 steps. Frames, fps, the negative prompt, the audio
    // guidance, the schedule, the speed mode and LoRAs do not apply to images.
    std::vector<double> guidanceSchedule;
    // Video models: conditioning stills and clips (empty: text-to-video), and the path:
    // "auto" (two-stage where the schedule is distilled, an upsampler was loaded and the size
    // halves cleanly), "single" or "two" (an error when it cannot run).
    std::vector<ConditionInput> conditions;
    // Video models with FamilyRules::audioInput: the sound the video follows and keeps.
    std::optional<AudioInput> audio;
    // Video models with FamilyRules::retake: this request makes part of a clip again.
    std::optional<RetakeInput> retake;
    // Video models with FamilyRules::references: reference clips (the output's frames at its
    // size, decoded by the caller: runtime::prepareReference; `frame` unused) for the IC-LoRA
    // among `loras` (reference_downscale_factor in its metadata, or "ic-lora" in its name).
    std::vector<ConditionInput> references;
    std::string stages = "auto";
    // The family's own controls (FamilyRules::knobs) by id; one missing takes the knob's default.
    std::map<std::string, double> knobs{};
    // This knob's value here, else the declared default.
    double knob(const Knob& k) const;
};

// The longest a length left on auto can be (20 s at the request's rate, on the 8k + 1 grid), for
// planning memory and time before the prompt is read; the request's frames otherwise.
std::int64_t planningFrames(const GenerateRequest& request);
// The clip that holds a sound of `seconds` at `fps`: the shortest 8k + 1 frames (at least 9)
// that last as long, at most 20 s; *cut says the sound is longer and is cut there.
std::int64_t framesForSound(double seconds, double fps, bool* cut = nullptr);
// What a request plans memory for: its size, its planning frames, CFG and its knobs (which the
// family reads for what they add).
SizeRequest sizeRequestOf(const GenerateRequest& request, bool image);

// The path a request would take with this load plan, and why; an error for "two" when the
// two-stage path cannot run (no upsampler, dev schedule, size that does not halve).
Result<StagePlan> planStages(const LoadPlan& plan, const GenerateRequest& request);

enum class Phase {
    EnhancePrompt,  // the prompt enhancer rewrites the prompt (done/total: tokens)
    LoadTextEncoder,
    EncodePrompt,
    LoadTransformer,
    Denoise,
    LoadDecoders,
    DecodeVideo,
    DecodeAudio,
    Vocoder,
    DecodeImage,
    EncodeConditions,  // the conditioning stills and clips through the video VAE encoder
    UpsampleLatents,  // two-stage: stage 1's latents x2 in space
    Refine,  // two-stage: the refining steps at full size
    TemporalRefine,  // LTX-2.5: the temporal refine rounds' tiles at twice the frame rate
    ThirdStage,  // LTX-2.5: the 4K path's tiled detailing pass at the size asked
};
std::string_view phaseName(Phase phase);

// The current clean estimate of the video or image, every few denoise steps: a strip of small
// RGB frames, one for an image (latents projected to RGB by a linear map derived from the
// model's own decoder).
struct Preview {
    int width = 0, height = 0, frames = 0;
    std::vector<std::uint8_t> rgb;  // frames x height x width x 3
    int step = 0;
};

struct Progress {
    Phase phase = Phase::LoadTextEncoder;
    std::int64_t done = 0, total = 0;
    std::shared_ptr<const Preview> preview;
};
using ProgressFn = std::function<void(const Progress&)>;

struct VideoResult {
    int width = 0, height = 0, frameCount = 0;
    double fps = 24.0;
    std::vector<std::uint8_t> rgb;  // frameCount x height x width x 3
    int sampleRate = 0, channels = 0;
    std::int64_t samples = 0;
    std::vector<float> audio;  // planar: channel c at [c * samples, (c + 1) * samples)
    std::string schedule;
    std::vector<double> sigmas;
    std::map<std::string, double> secondsPerPhase;
    std::vector<LoraOutcome> loras;
    std::string speed;  // the speed mode's name
    int stepsSkipped = 0;  // denoise steps the step cache served
    std::string cudaGraphs;  // what became of the denoise passes' CUDA graphs; empty on the CPU
    StagePlan stages;  // the path that ran
    // A length left on auto: what the model read from the prompt, in seconds.
    std::optional<double> predictedSeconds;
    // The prompt the enhancer wrote, the one the video followed (empty: not asked).
    std::string enhancedPrompt;
    // What ran where, counted as it ran ("GEMM: 9,240 FP8 tensor-core GEMM, ...; attention: ..."),
    // and one warning per slower path taken instead of the planned one, with its count.
    std::string paths;
    std::vector<std::string> pathWarnings;
};

// An image model's output: one RGB picture and how it was made.
struct ImageResult {
    int width = 0, height = 0;
    std::vector<std::uint8_t> rgb;  // height x width x 3
    std::vector<double> sigmas;  // steps + 1, noisiest first, the last 0
    std::vector<double> guidance;  // the weight of each step
    std::map<std::string, double> secondsPerPhase;
    std::string paths;  // as VideoResult's
    std::vector<std::string> pathWarnings;
};

// Process-wide state a load may change, so unloading can put the process back as a fresh one
// would be: the attention kernel choice, FP8 accumulation, TF32, and the intra-op threads of
// the thread that loads (OpenMP keeps that count per thread).
struct ProcessSettings {
    int threads = 0;
    std::string attentionKernel;
    bool fp8FastAccumulation = false;
    bool tf32Matmul = false, tf32Cudnn = false;
    static ProcessSettings capture();
    void apply() const;
    bool operator==(const ProcessSettings&) const = default;
};

class Generator {
public:
    ~Generator();  // frees every component and hands cached device memory back
    Generator(const Generator&) = delete;
    Generator& operator=(const Generator&) = delete;

    // From headers alone (no weight byte is read): the components, what they hold as stored,
    // the working memory at this size, and the fastest placement that fits the budget. A
    // placement other than Auto in the plan is kept (and reported) even if it does not fit.
    static Result<MemoryPlan> planMemory(const LoadPlan& plan, const SizeRequest& size, const std::optional<MemoryBudget>& budget = {});
    // Headers only, no device: cheap enough for the moment a model is picked.
    static Result<ModelFacts> readModelFacts(const LoadPlan& plan);

    // Loads every component the memory plan keeps resident. A failed or cancelled load frees
    // everything it allocated (device caches included) before it returns.
    static Result<std::unique_ptr<Generator>> load(
        const LoadPlan& plan, const MemoryPlan& memory, const ProgressFn& progress, std::stop_token stop);

    // What the loaded model makes: generate() for video models, generateImage() for image
    // models; each refuses the other kind with an error that says which to call.
    ModelKind kind() const;
    Result<VideoResult> generate(const GenerateRequest& request, const ProgressFn& progress, std::stop_token stop);
    // Steps 0 means the reference's 48. Previews every previewEvery denoise steps: one frame.
    Result<ImageResult> generateImage(const GenerateRequest& request, const ProgressFn& progress, std::stop_token stop);

    // Puts this generator's process settings in force again (after another generator that
    // was destroyed restored its own), and says what to restore when this one goes.
    void reapplyProcessSettings(const ProcessSettings& restoreOnDestruction);

    const MemoryPlan& memoryPlan() const;
    std::string version() const;
    std::vector<std::filesystem::path> files() const;
    std::map<std::string, std::int64_t> residentBytes() const;
    // How the transformer's linear layers multiply on this device ("FP8 tensor-core GEMM": 240, ...).
    std::map<std::string, int> matmulPaths() const;

    // A LoRA matched against a model before anything is applied, from headers only (the model
    // is not loaded): every module matched, unmatched (with why) or refused, as JSON or text.
    static Result<std::string> inspectLora(const LoadPlan& model, const std::filesystem::path& lora, bool asJson);
    // Puts these LoRAs on the loaded transformer now (a generation does it when its list
    // differs from the last); the outcome of each.
    Result<std::vector<LoraOutcome>> applyLoras(const std::vector<LoraRequest>& loras);

private:
    struct Impl;
    explicit Generator(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

// The devices this machine can compute on: "cpu" first, then each CUDA device.
struct DeviceInfo {
    std::string name;  // "cpu", "cuda:0"
    std::string description;  // "NVIDIA H200 (compute capability 9.0, 143771 MiB)"
    std::int64_t totalBytes = 0;
};
std::vector<DeviceInfo> availableDevices();

// Hands the device's cached, unused memory back (after an out-of-memory failure, an unload).
void releaseDeviceCaches();
// Whether a device still runs work after a GPU fault (an illegal address poisons the whole
// context until the process ends); always true for the CPU.
bool deviceHealthy(const std::string& device);

// Text flags and names as users and settings write them: true/false/1/0/yes/no/on/off in any
// case; nullopt for anything else.
std::optional<bool> parseFlag(std::string_view text);

}  // namespace vireo::facade
