#pragma once

// Text (and silence) to video with audio for LTX-2 / LTX-2.3, following diffusers 0.42.1's
// LTX2Pipeline: Gemma 3 prompt encoding, text connectors, the DiT's flow-matching loop on
// video and audio latents, then the video VAE, the audio VAE and the vocoder. Components
// are loaded when needed and released when a request says so, and every phase reports
// progress and stops within one step or decode tile when the stop token is triggered.

#include "base/capability.h"
#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace vireo::ltx2 {
struct TransformerConfig;
}

namespace vireo::pipelines {

struct Ltx2PipelineOptions {
    // The LTX-2 weights: a diffusers folder, a Lightricks single file, or a GGUF transformer
    // with its companion files (text projection, video VAE, audio VAE, vocoder).
    std::vector<std::filesystem::path> modelPaths;
    // A Gemma 3 folder (weights, config.json, tokenizer.json); default: the diffusers
    // folder's text_encoder/ and tokenizer/.
    std::optional<std::filesystem::path> textEncoderPath;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    // Free the text encoder before the transformer runs (small GPUs); it is loaded again
    // for the next request.
    bool releaseTextEncoder = true;
    // Where the Gemma text encoder runs when not on `device` (the CPU keeps its ~24 GB off a
    // GPU that cannot hold it beside the transformer).
    std::optional<c10::Device> textEncoderDevice;
    // Transformer blocks in host memory, copied to the device one at a time.
    bool offloadTransformerBlocks = false;
    // The transformer forward of each denoise step captured in a CUDA graph and replayed (see
    // ltx2::GraphedForward): on a CUDA device without block offloading or the step cache;
    // elsewhere the loop runs eagerly and Ltx2Output::cudaGraphs says why.
    bool cudaGraphs = true;
    // The latent spatial upsampler of the two-stage path (a Lightricks single file or a
    // diffusers latent_upsampler/ folder); checked by open(), loaded by load().
    std::optional<std::filesystem::path> spatialUpsamplerPath;
    // The latent temporal x2 upsampler of LTX-2.5's temporal refine rounds (same layouts);
    // checked by open(), loaded by load() and needed only by a request with rounds.
    std::optional<std::filesystem::path> temporalUpsamplerPath;
    // LTX-2.5's prompt enhancer (ltx2::PromptEnhancer: a diffusers folder with
    // prompt_enhancer/, or a Gemma 4 instruct model folder); default: the diffusers folder's,
    // where it has one. Loaded only for a request that asks, on the text encoder's device, and
    // freed after it answers.
    std::optional<std::filesystem::path> promptEnhancerPath;
};

// What each component holds as stored, read from headers before anything loads.
struct Ltx2StoredSizes {
    std::map<std::string, std::int64_t> componentBytes;  // text_encoder, connectors, transformer, video_vae, audio_vae, vocoder
    // What each holds once loaded in the pipeline's compute dtype (dense weights converted to it,
    // quantized ones as stored), and the form most of its matrix weights are stored in.
    std::map<std::string, std::int64_t> componentHeldBytes;
    std::map<std::string, capability::WeightFormat> componentFormats;
    std::int64_t heldBytesF32 = 0;  // all components together under f32 compute (the CPU's default)
    std::int64_t transformerBlockBytes = 0;  // held bytes of the largest single block (offloading keeps one or two on the device)
    std::int64_t videoDim = 0, audioDim = 0, ffnDim = 0, layers = 0, latentChannels = 0;
};

enum class Ltx2Schedule { Distilled, Dev };

// A LoRA to apply to the transformer, and how strongly (negative strengths are allowed).
struct Ltx2Lora {
    std::filesystem::path path;
    double strength = 1.0;
    bool operator==(const Ltx2Lora&) const = default;
};

// What became of a requested LoRA: applied, partly applied, or refused, and why.
struct Ltx2LoraOutcome {
    std::filesystem::path path;
    double strength = 1.0;
    std::string status;  // "applied", "partial: ...", "refused: ..."
    int matched = 0, unmatched = 0;
    std::int64_t refusedKeys = 0;
    std::int64_t deviceBytes = 0;  // what its adapters hold on the device
    std::string report;  // the match report, as text
};

// A still or a clip the video must show, following diffusers' LTX2ConditionPipeline (a still at
// latent index 0 is LTX2ImageToVideoPipeline's image): encoded by the video VAE, it replaces the
// first latent frames (index 0) or is appended as keyframe tokens placed at pixel frame
// 8 (index - 1) + 1 (index > 0); its tokens are kept at `strength` (1: exactly) through the loop.
struct Ltx2Condition {
    at::Tensor pixels;  // uint8 [F, H, W, 3] at the request's size; F = 1 or 8k + 1
    std::int64_t latentIndex = 0;  // < the clip's latent frames
    double strength = 1.0;  // in [0, 1]
};

// LTX-2.5's DFR canvas (diffusers dfr_layout.resolve_canvas): frames - 1 padded up to a whole
// number of keyframe segments of 24 or 32 frames, whichever pads less (32 on a tie), and the
// generated keyframe slots at each segment's end: [S, 2S, ..., padded - 1].
struct DfrCanvas {
    std::int64_t paddedFrames = 0, segment = 0;
    std::vector<std::int64_t> slots;
};
// InvalidArgument unless frames is 8k + 1 and at least 9.
Result<DfrCanvas> dfrCanvas(std::int64_t frames);

// One tile of an LTX-2.5 temporal refine round (diffusers dfr_layout.temporal_tile_plan): the
// latent frames [start, end) of the round's canvas, whose first leftRamp frames are run-up
// dropped at the stitch; its pixel frames [pixelStart, pixelEnd]; the carried keyframes it holds
// (anchors) and the new slots it generates, halfway between its marks, in the canvas's pixels.
struct DfrTemporalTile {
    std::int64_t start = 0, end = 0, leftRamp = 0;
    std::int64_t pixelStart = 0, pixelEnd = 0;
    std::vector<std::int64_t> anchors, slots;
};
// The canvas of `frames` split on its keyframe seams (pixel positions on x8 latent borders,
// strictly increasing, the last one the canvas's last frame) into `tiles` tiles, at most one per
// segment; each tile after the first starts one segment and a cell before the seam it resumes
// from. InvalidArgument for seams that break those rules.
Result<std::vector<DfrTemporalTile>> dfrTemporalTiles(const std::vector<std::int64_t>& seams, std::int64_t frames, int tiles);

// One axis of an LTX-2.5 DFR tile (dfr_layout.DimensionInterval): cells [start, end), the first
// leftRamp and the last rightRamp shared with the neighbours.
struct DfrSpan {
    std::int64_t start = 0, end = 0, leftRamp = 0, rightRamp = 0;
};
// One tile of the spatial epilogue (dfr_layout.epilogue_tiles): its extent on the latent grid
// and the weight its prediction is blended with, float32 [F, H, W] over that extent. Height and
// width split in two with 12-cell trapezoid ramps; frames cut on the last round's seams (the
// later tile's run-up weighs 0) or, without interior seams, blended like the other axes. The
// weights of all tiles sum to 1 on every cell.
struct DfrEpilogueTile {
    DfrSpan frames, heights, widths;
    at::Tensor weight;
};
struct DfrEpilogueLayout {
    std::vector<DfrEpilogueTile> tiles;
    // The reference's warnings: an axis too short for its tiles (untiled), an overlap clamped,
    // seams not inside the canvas (blended instead of cut).
    std::vector<std::string> notes;
};
// The epilogue's tiles over a latent grid of frames x height x width; frameTiles 2^rounds,
// frameSeams the last round's seams in latent frames. InvalidArgument for sizes below 1, more
// than 64 frame tiles or seams out of order.
Result<DfrEpilogueLayout> dfrEpilogueTiles(
    std::int64_t frames, std::int64_t height, std::int64_t width, int frameTiles, const std::vector<std::int64_t>& frameSeams);
// One tile's share of a packed DFR sequence (dfr_layout.video_tile_plan): the grid tokens in its
// window then every appended token (condition, keyframe, reference) whose RoPE bounds overlap the
// window's on all three axes; the grid tokens weighted by the tile's window, an appended token by
// 1 / the number of tiles that keep it; the kept tokens' coords [1, 3, n, 2] less the window's
// first bounds.
struct DfrTokenPlan {
    at::Tensor keep, weights, coords;
};
// coords: [1, 3, T, 2], the grid's frames x height x width tokens first. InvalidArgument when an
// appended token falls in no tile.
Result<std::vector<DfrTokenPlan>> dfrTokenPlan(
    const std::vector<DfrEpilogueTile>& tiles, const at::Tensor& coords, std::int64_t frames, std::int64_t height, std::int64_t width);

// One step of the Euler ancestral sampler for rectified flow (diffusers
// LTXEulerAncestralRFScheduler, s_noise 1) from `x` at `sigma` with the clean estimate `x0`:
// a deterministic step down to sigma_down = sigmaNext * (1 + (sigmaNext / sigma - 1) * eta),
// then fresh noise back up to sigmaNext; the last step (sigmaNext 0) returns x0. `noise` is
// drawn only when needed, shaped as x.
at::Tensor ancestralRfStep(
    const at::Tensor& x, const at::Tensor& x0, double sigma, double sigmaNext, double eta, const std::function<at::Tensor()>& noise);

// ltx-pipelines' res2s sampler (utils/res2s.py, samplers.py res2s_audio_video_denoising_loop):
// a second-order exponential Runge-Kutta step with the midpoint c2 = 0.5, for a step of size
// h = ln(sigma / sigmaNext): x_mid = x + h a21 (d1 - x), x_next = x + h (b1 (d1 - x) + b2 (d2 - x)).
struct Res2sCoefficients {
    double a21 = 0, b1 = 0, b2 = 0;
};
Res2sCoefficients res2sCoefficients(double h);
// Its SDE re-noising (ltx-core Res2sDiffusionStep.step): the point at sigmaNext on the line
// through `sample` (at sigma) and `target`, a quarter of its noise variance replaced by `noise`;
// `target` itself when sigmaNext is 0. The coefficients in float32 where the reference takes
// them from its float32 sigmas (the full steps), else in float64 (the substeps).
at::Tensor res2sSdeStep(
    const at::Tensor& sample, const at::Tensor& target, double sigma, double sigmaNext, const at::Tensor& noise, bool float32Sigmas);

// The second-stage form of a DFR pass (diffusers LTX2DFRPipeline with `latents`,
// `keyframes_latents` and `audio_latents`): normalized [1, C, F, H, W] on the padded canvas,
// the slots [1, C, K, H, W], the audio packed [1, La, C_a]; noised to noiseScale.
// An IC-LoRA's reference_downscale_factor from its safetensors metadata: nullopt when the file
// says nothing (not an IC-LoRA, or one at the reference's own size); an error for a file that
// cannot be read or a factor outside 1 to 16.
Result<std::optional<std::int64_t>> icLoraReferenceDownscale(const std::filesystem::path& lora);

struct Ltx2DfrStart {
    at::Tensor latents, slots, audio;
    double noiseScale = 0.909375;
    // An IC-LoRA reference (the detailing LoRA's: stage 1's half-size canvas), normalized
    // [1, C, F, h, w]: appended as clean tokens after the slots, its spatial positions scaled by
    // referenceDownscale into this pass's grid (LTX2DFRPipeline's reference_latents).
    at::Tensor reference;
    std::int64_t referenceDownscale = 1;
};

enum class Ltx2VideoDecode { Auto, Vae, Diffusion };

// The user's sound for audio-to-video (ltx-pipelines' a2vid): float32 [channels, samples] at
// sampleRate, one or two channels (mono is heard on both sides, as the encoder takes two).
struct Ltx2AudioCondition {
    at::Tensor waveform;
    int sampleRate = 0;
};

// Retake (ltx-pipelines' RetakePipeline): a clip made again over [start, end) seconds and kept
// elsewhere. Its video (and sound) are encoded; a latent token is made again from noise when its
// span (video latent frame i: pixel frames [max(8i - 7, 0), 8i + 1); audio latent j: mel frames
// [max(4j - 3, 0), 4j + 1)) overlaps the window, and held exactly otherwise (timestep 0, its
// clean estimate itself, its velocity 0). The output's frames and samples outside the tokens
// made again are the clip's own, bit for bit (the reference re-decodes them; we splice them).
struct Ltx2Retake {
    at::Tensor pixels;  // uint8 [F, H, W, 3] at the request's frames and size
    std::optional<Ltx2AudioCondition> sound;  // the clip's; none: a sound is made for the whole clip
    double start = 0, end = 0;
    bool video = true, audio = true;  // which streams the window makes again (the other is kept whole)
};

// An IC-LoRA's reference clip (diffusers' LTX2ReferenceCondition, ltx-core's
// VideoConditionByReferenceLatent): a depth, pose or edge video the generation follows.
struct Ltx2Reference {
    // uint8 [F, H, W, 3], any size: its first frames (at most the clip's, cut to 8k + 1) are
    // resized to cover and center-cropped to the pass's size / referenceDownscale.
    at::Tensor pixels;
    // 1: clean throughout (timestep 0); below: noised to (1 - strength) x sigma like a keyframe.
    double strength = 1.0;
};

// Euler on the clean estimate, or ltx-pipelines' res2s (two evaluations per step, SDE noise from
// its two fixed-seed generators; the HQ recipe's).
enum class Ltx2Sampler { Euler, Res2s };

struct Ltx2Request {
    std::string prompt;
    std::string negativePrompt;
    // The prompt rewritten by the model's prompt enhancer before it is encoded (see
    // ltx2::PromptEnhancer; the output says what it wrote); an error where the files have none.
    bool enhancePrompt = false;
    std::string enhancerSystemPrompt;  // empty: Vireo's own
    int enhancerMaxTokens = 0;  // 0: the enhancer's own (600 for LTX-2.5's, 512 for 2.0/2.3's)
    // frames 0: "auto", the length LTX-2.5's duration head reads from the prompt (1 to 20 s at
    // fps, on the 8k + 1 grid); only a model with a duration head, and only first-frame conditions.
    std::int64_t width = 768, height = 512, frames = 121;
    double fps = 24.0;
    Ltx2Schedule schedule = Ltx2Schedule::Distilled;
    int steps = 0;  // 0: 8 (distilled, verbatim sigmas) or 40 (dev)
    std::optional<std::vector<double>> sigmas;  // explicit schedule (N + 1 values ending in 0)
    double guidanceScale = 1.0;  // video CFG; > 1 runs the negative prompt too
    double audioGuidanceScale = 1.0;
    double guidanceRescale = 0.0;  // applied as the reference does, against the conditional estimate
    std::optional<double> audioGuidanceRescale;  // none: guidanceRescale
    // Spatio-temporal guidance (diffusers' stg_scale): above 0, one more forward per step on the
    // positive prompt whose self-attention in `stgBlocks` returns its values, and the estimate is
    // pushed away from it. Modality guidance (modality_scale): above 1, one more forward without
    // the audio-video cross-attention, pushed away from likewise. Both as LTX2Pipeline does.
    double stgScale = 0.0, audioStgScale = 0.0;
    double modalityScale = 1.0, audioModalityScale = 1.0;
    std::vector<int> stgBlocks;  // empty: the version's block (LTX-2.0: 29, LTX-2.3: 28)
    // The STG and modality branches batched with the conditional one (one forward of up to 4
    // rows per step) or run as forwards of their own; none: batched unless VIREO_BATCH_GUIDANCE=0.
    std::optional<bool> batchGuidance;
    std::int64_t seed = 0;
    std::int64_t maxSequenceLength = 1024;
    // Start states instead of seeded noise (packed, normalized: [1, tokens, channels]).
    std::optional<at::Tensor> videoNoise, audioNoise;
    // Keep the video decoder's float output in Ltx2Output::video (for checks against a
    // reference). Off by default: at 121 x 704 x 1280 it is 1.3 GB.
    bool keepDecodedVideo = false;
    // Which decoder makes the pixels: Auto takes LTX-2.5's diffusion video decoder where the
    // files carry one (the reference's default from 2.5 on) and the VAE's decoder otherwise.
    Ltx2VideoDecode videoDecode = Ltx2VideoDecode::Auto;
    // Applied unfused to the transformer for this request; the same list as the previous
    // request costs nothing, another one a swap of the adapters (no reload of the base).
    std::vector<Ltx2Lora> loras;
    // First-block step cache (see ltx2::StepCache): 0 computes every block of every step.
    // The first and last steps always compute.
    double stepCacheThreshold = 0.0;
    int stepCacheMaxConsecutive = 1;
    std::vector<Ltx2Condition> conditions;
    // Audio-to-video: the clip's first frames / fps seconds of this sound (silence after its end)
    // are resampled and encoded by the audio VAE's encoder and held clean in every pass: never
    // noised or stepped, their timestep and sigma 0 (so the video's cross-attention to the audio
    // and the audio's prompt modulation see a finished track), as ltx-pipelines' a2vid freezes
    // them. The output's sound is this waveform over the clip's duration, not a decode.
    std::optional<Ltx2AudioCondition> audio;
    // Retake instead of a new clip: the request's frames, size and fps are the clip's; one pass,
    // no conditions, no sound to follow.
    std::optional<Ltx2Retake> retake;
    // Extend with sound: the sound of the frames the clip starts from (a clip condition at frame
    // 0, the end of the clip it extends). Encoded and held at the start of the new sound in every
    // pass (its round(seconds x 25) latent frames kept exactly, per-token timestep 0, as the
    // trainer's audio prefix), the rest made to continue it; the output's first samples over the
    // kept span are its own, crossfaded into the new ones over 10 ms.
    std::optional<Ltx2AudioCondition> audioPrefix;
    // IC-LoRA: reference clips encoded and appended after the clip's tokens (and any keyframe's)
    // in the first pass, on the clip's own grid (reference frame k over frame k, spatial positions
    // x referenceDownscale), held by the blend at their strength. referenceAttention below 1
    // weakens the attention between the clip's tokens and each reference (the reference's block
    // mask: keyframes never see a reference, references never each other). icLora is applied in
    // that pass only: the two-stage path's second stage runs without it and without the
    // references, as ltx-pipelines' IC-LoRA pipeline runs it.
    std::vector<Ltx2Reference> references;
    std::int64_t referenceDownscale = 1;
    double referenceAttention = 1.0;
    std::optional<Ltx2Lora> icLora;
    // The two-stage distilled path: the distilled schedule at half size, the spatial upsampler
    // x2 on the latents, then the three stage-2 sigmas at full size from the upsampled latents
    // (and stage 1's audio) noised to 0.909375, without guidance. Needs the upsampler and a
    // size whose halves are multiples of 32.
    bool twoStage = false;
    // ltx-pipelines' DistilledPipeline, what LTX Desktop runs as "Fast": the two-stage distilled
    // path under ltx-core's rules (conditions, the first latent frame marked for the keyframe
    // embedding) and, on LTX-2.5, stage 1 sampled with the ancestral sampler (eta 1) from its own
    // generator, seed + 10000, the video's draw before the audio's each step (drawn on the CPU, so
    // every device makes the same). Needs twoStage on the distilled schedule, no guidance, no DFR.
    bool fast = false;
    // Lightricks' dev two-stage recipe (ltx-pipelines 1.0.0 TI2VidTwoStagesPipeline) is twoStage
    // on the dev schedule with this LoRA: stage 1 runs the dev model guided at half size on the
    // dev schedule of 4096 tokens; stage 2 adds the LoRA to `loras` and runs the three stage-2
    // sigmas on the positive prompt alone. Guidance there follows ltx-core (lightricksRules).
    std::optional<Ltx2Lora> distilledLora;
    // The HQ recipe (TI2VidTwoStagesHQPipeline): the distilled LoRA also in stage 1 at this
    // strength (0.25 there), and res2s in both stages.
    std::optional<double> distilledLoraStage1Strength;
    Ltx2Sampler sampler = Ltx2Sampler::Euler;
    // Injected stage-2 draws (checks against a reference): packed [1, tokens (+ keyframe
    // tokens), C] and [1, audio tokens, C_a].
    std::optional<at::Tensor> stage2VideoNoise, stage2AudioNoise;
    // LTX-2.5's DFR pass (diffusers LTX2DFRPipeline, one pass): the clip is made on the padded
    // DFR canvas with one generated keyframe slot per segment end, the first latent frame and the
    // slots marked for the 2.5 transformer's keyframe embedding, every token's clean estimate
    // taken at its own sigma, positions at 60 fps above 30; the canvas is trimmed to `frames`
    // for decoding; conditions as LTX2DFRPipeline places them (a first-frame one held by the
    // blend, later ones appended as keyframe tokens). Distilled sigmas, no guidance; needs a 2.5
    // transformer. With twoStage: a pass at half size, canvas and slots upsampled, a detailing pass.
    // videoNoise then covers the whole packed sequence (canvas, keyframe, then slot tokens).
    bool dfr = false;
    std::optional<Ltx2DfrStart> dfrStart;  // the second-stage form; none: from noise (stage 1)
    // LTX-2.5's temporal refine rounds after the DFR pass(es) (LTX2DFRTemporalRefinePipeline,
    // as ltx-pipelines' DFRPipeline chains them): each doubles the frame rate and the frames
    // ((F - 1) x 2 + 1) with the temporal x2 upsampler, then details the canvas in 2^round
    // tiles cut on the keyframe seams, the carried keyframes held at 0.95, new slots between
    // them, the stage's audio frozen and followed, 4 distilled sigmas with the ancestral sampler
    // (eta 0.5, per tile seeded seed + 1000 round + tile). 0 to 2; needs the temporal upsampler.
    int temporalRounds = 0;
    // LTX-2.5's detailing IC-LoRA on the two-pass DFR recipe: applied in the second pass (and
    // the third stage) only, with the canvas before that pass's upsampling (stage 1's, the last
    // round's) appended as its clean reference, the positions scaled by
    // the LoRA's reference_downscale_factor (metadata; 2 when absent, as ltx-pipelines reads
    // it). detailingReference appends the reference without a LoRA (the reference pipelines
    // allow it). Needs dfr and twoStage.
    std::optional<Ltx2Lora> detailingLora;
    bool detailingReference = false;
    // Injected draws of the rounds' tiles, in order (checks against a reference): each tile's
    // start noise over its packed tokens [canvas | conditions | anchors | slots].
    std::vector<at::Tensor> temporalTileNoise;
    // LTX-2.5's third spatial stage (diffusers' "A third spatial stage", Lightricks' 4K path):
    // after the second pass and the rounds, the canvas upsampled x2 again and detailed once more
    // at the request's size, in 2 x 2 spatial tiles (x 2^rounds in time, cut on the last round's
    // seams) whose predictions are blended each step; the carried keyframes are each decoded,
    // stretched x2 with Lanczos and encoded again, then held clean at their frames; the audio is
    // stage 1's, frozen; the detailing LoRA (or reference) as in the second pass. Stage 1 runs at
    // a quarter and the second pass and the rounds at half the size, so width and height must be
    // multiples of 128. Needs dfr, twoStage and the VAE's encoder; the keyframes are decoded by
    // the decoder the run decodes with (the diffusion decoder's draws seeded seed + 4000 + i).
    bool dfrEpilogue = false;
    // Injected draws of the epilogue (checks against a reference): its packed tokens
    // [canvas | conditions | keyframes | reference], and its audio's (scaled by 0: frozen).
    std::optional<at::Tensor> epilogueVideoNoise, epilogueAudioNoise;
};

// Whether a request follows ltx-core's guidance rather than diffusers': Lightricks' dev
// two-stage recipe has no diffusers counterpart. ltx-core turns a pass on for any scale off its
// neutral value (CFG and modality 1, STG 0), perturbs a stream's self-attention only where that
// stream's STG scale is set, runs STG on LTX-2.0 too, and takes a conditioned token's clean
// estimate at its own noise level.
bool lightricksRules(const Ltx2Request& req);
// The gating of the extra guidance branches (diffusers' LTX2Pipeline.do_spatio_temporal_guidance /
// do_modality_isolation_guidance, or ltx-core's under lightricksRules): either modality's scale
// turns the pass on, and then both get their deltas.
bool cfgOn(const Ltx2Request& req);  // the negative prompt runs too
bool stgOn(const Ltx2Request& req);
bool modalityOn(const Ltx2Request& req);
// The blocks STG perturbs: the request's, else the version's (diffusers' recommendation and
// Lightricks' defaults: block 29 of LTX-2.0, 28 of LTX-2.3 and later).
std::vector<int> stgBlocksFor(const Ltx2Request& req, const ltx2::TransformerConfig& config);
// STG needs the perturbed attention path under diffusers' rules: diffusers builds LTX-2.0 without
// it, and its STG pass then changes nothing, so it is not run (ltx-core runs it on every version).
bool stgRuns(const Ltx2Request& req, const ltx2::TransformerConfig& config);
// "CFG 3 / 7, STG 1 / 1 on block 28, modality 3 / 3, rescale 0.7 / 0.7" (video / audio), "none",
// and what was asked for that does not run on this model.
std::string describeGuidance(const Ltx2Request& req, const ltx2::TransformerConfig& config);

enum class Ltx2Phase {
    EnhancePrompt,  // the prompt enhancer loads, then writes (done/total: tokens)
    LoadText,
    Encode,
    LoadTransformer,
    Denoise,
    DecodeVideo,
    DecodeAudio,
    Vocoder,
    LoadDecoders,
    EncodeConditions,
    UpsampleLatents,
    Refine,
    TemporalRefine,
    ThirdStage  // LTX-2.5's third spatial stage, done/total counting tiles x steps
};
const char* phaseName(Ltx2Phase phase);

struct Ltx2Progress {
    Ltx2Phase phase;
    std::int64_t done = 0, total = 0;  // steps, decode tiles, ...
    // Denoise steps: the current clean estimate of the video latents, unpacked
    // [1, C, F, H, W] (for previews; empty in other phases).
    at::Tensor videoEstimate;
};

struct Ltx2Output {
    at::Tensor frames;  // uint8 [F, H, W, 3]
    at::Tensor waveform;  // float32 [channels, samples], trimmed to the video's duration
    int sampleRate = 0;
    double fps = 24.0;
    std::vector<double> sigmas;
    // The guidance the denoise ran ("CFG 3 / 7, STG 1 / 1 on block 28, modality 3 / 3,
    // rescale 0.7 / 0.7"; video / audio), and what a request asked for that did nothing here.
    std::string guidance;
    // For checking against a reference: the final packed latents, the decoded video (when the
    // request keeps it), the mel spectrogram and the vocoder's untrimmed waveform.
    at::Tensor finalVideoLatents, finalAudioLatents, video, mel, rawWaveform;
    std::map<std::string, double> secondsPerPhase;
    std::vector<Ltx2LoraOutcome> loras;
    // The step cache: steps whose blocks after the first were skipped, and the first block's
    // relative change at every step (-1 where there was nothing to compare with).
    int stepsSkipped = 0;
    std::vector<double> stepChanges;
    // What became of the CUDA graphs, per denoise pass: "denoise: on: 1 captured, 6 of 8 forwards
    // replayed", "denoise: off: <reason>", "refine: failed: <reason>" (also a warning in the log).
    // Empty on the CPU.
    std::string cudaGraphs;
    // Conditioned and two-stage runs, for checks: the first condition's normalized encoding
    // [1, C, f, h, w] (at the final size), stage 1's final packed latents and the upsampler's
    // output (normalized, [1, C, F, 2h, 2w]).
    bool twoStage = false;
    at::Tensor conditionLatents, stage1VideoLatents, stage1AudioLatents, upsampledLatents;
    // DFR runs: the canvas and its slots' latents (normalized [1, C, K, H, W]); finalVideoLatents
    // then holds every packed token of the pass (canvas, then slots).
    std::optional<DfrCanvas> dfrCanvas;
    at::Tensor slotLatents;
    // A length left on auto: the duration head's seconds, the frames made of them, and whether
    // the prediction was outside the 1-20 s the length is held to.
    std::optional<double> predictedSeconds;
    // The prompt the enhancer wrote (empty: not asked), its tokens, whether it was cut at the
    // token limit, what it could not read (an image condition: it reads the prompt alone), and
    // for LTX-2.0/2.3, whose text encoder writes it sampled, who wrote it and from which seed.
    std::string enhancedPrompt;
    int enhancerTokens = 0;
    bool enhancerCut = false;
    std::string enhancerNote;
    std::int64_t predictedFrames = 0;
    bool predictionClamped = false;
    // Temporal refine rounds: each round's canvas (normalized [1, C, F, H, W]), its carried
    // keyframes ([1, C, K, H, W]) and their pixel positions, the tile plans.
    std::vector<at::Tensor> roundLatents, roundKeyframes;
    std::vector<std::vector<std::int64_t>> roundPositions;
    std::vector<std::vector<DfrTemporalTile>> roundTiles;
    // The third spatial stage: its keyframes as rebuilt (normalized [1, C, K, H, W], at
    // roundPositions' last or the slots' frames), its tiles, and with keepDecodedVideo the
    // canvas it started from (the upsampled one).
    at::Tensor epilogueKeyframes, epilogueStart;
    // With keepDecodedVideo: each keyframe's picture as re-encoded (uint8 [2H, 2W, 3]).
    std::vector<at::Tensor> epilogueKeyframePixels;
    std::vector<DfrEpilogueTile> epilogueTiles;
    // Which decoder made the pixels: "vae" or "diffusion".
    std::string videoDecoder;
    // Audio-to-video, for checks: the log-mel spectrogram of the user's sound over the clip and
    // its encoding (packed, normalized: what the loop held).
    at::Tensor audioConditionMel, audioConditionLatents;
    // Retake: the tokens made again (1) and kept (0), [1, T] and [1, La]; the pixel frames and
    // samples made again ([first, last) each; empty when none).
    at::Tensor retakeVideoMask, retakeAudioMask;
    std::pair<std::int64_t, std::int64_t> retakeFrames{0, 0}, retakeSamples{0, 0};
    // IC-LoRA: the references' packed tokens ([1, R, C], normalized, in order) and the video
    // self-attention mask the pass ran with ([1, T, T]; undefined: none).
    at::Tensor referenceTokens, referenceAttentionMask;
    // Extend with sound: the samples at the start that are the prefix's own (the last 10 ms of
    // them crossfaded into the continuation).
    std::int64_t prefixSamples = 0;
};

class Ltx2Pipeline {
public:
    ~Ltx2Pipeline();
    Ltx2Pipeline(Ltx2Pipeline&&) noexcept;
    Ltx2Pipeline& operator=(Ltx2Pipeline&&) noexcept;

    // Reads headers only: finds every component, detects the version and fails with the list
    // of what is missing before anything is loaded.
    static Result<Ltx2Pipeline> open(const Ltx2PipelineOptions& options);

    // Loads every component a run can need (the video encoder for conditions and the upsampler
    // too, where the files have them), so a load is timed, cancelled and failed on its own and
    // a run loads nothing; only a text encoder the placement releases after each encoding is
    // loaded again per prompt. generate() loads whatever is still missing (after release()).
    Result<void> load(const std::function<void(const Ltx2Progress&)>& progress = {}, std::stop_token stop = {});
    // Frees every component; load() or generate() loads them again.
    void release();
    Ltx2StoredSizes storedSizes() const;
    // A linear map from latent channels to RGB in [-1, 1] ([channels + 1, 3], the last row the
    // offset), fitted by least squares to what this model's video decoder makes of a random
    // latent: previews of denoising at the cost of a matrix product. Computed once (loads the
    // decoder if needed).
    Result<at::Tensor> previewProjection();

    Result<Ltx2Output> generate(
        const Ltx2Request& request, const std::function<void(const Ltx2Progress&)>& progress = {}, std::stop_token stop = {});

    std::string version() const;  // "2.0", "2.3" or "2.5"
    // Whether the files hold a duration head (frames 0 picks the length from the prompt), and
    // why not when they hold a broken one.
    bool hasDurationHead() const;
    // Whether a prompt enhancer is at hand: the options' path, the diffusers folder's, or for
    // LTX-2.0/2.3 their Gemma 3 text encoder, which writes prompts itself.
    bool hasPromptEnhancer() const;
    // Which video decoders the files carry: the VAE's (convolutional) one, LTX-2.5's diffusion one.
    bool hasVaeDecoder() const;
    bool hasDiffusionDecoder() const;
    // "dev" or "distilled" as the transformer's files say, and where (Ltx2Weights::trainedFor).
    std::pair<std::string, std::string> trainedFor() const;
    // Bytes each loaded component holds now ("text_encoder", "transformer", ...).
    std::map<std::string, std::int64_t> componentBytes() const;
    // What opening found questionable but not wrong, such as a pairing with a text encoder
    // that nothing could check; each is also logged.
    const std::vector<std::string>& openWarnings() const;
    // How the transformer's linear layers multiply (empty until it is loaded).
    std::map<std::string, int> matmulPaths() const;
    // The weight files, for the recipe.
    std::vector<std::filesystem::path> files() const;

    // A LoRA file matched against this model's transformer, from headers (the model need not
    // be loaded): JSON with every module's state (lora::MatchReport::toJson).
    Result<std::string> inspectLora(const std::filesystem::path& file, bool asJson = true) const;
    // Puts these LoRAs on the loaded transformer now (generate() does it when the request's
    // list differs): one outcome per LoRA; a LoRA that cannot be applied is refused in its
    // outcome, never dropped, and never fails the others.
    Result<std::vector<Ltx2LoraOutcome>> applyLoras(const std::vector<Ltx2Lora>& loras);

private:
    struct Impl;
    explicit Ltx2Pipeline(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::pipelines
