// vireo-cli generate: a thin client of the studio's runtime (core/runtime/engine.h), the same
// code path the window uses: memory plan, load, generation, recipe, hashing and MP4 writing.
#include "app/cli/generatecommand.h"

#include "app/cli/again.h"
#include "app/cli/args.h"
#include "app/cli/headless.h"
#include "app/cli/remotecommand.h"
#include "core/catalog/catalog.h"
#include "core/generation/generation.h"
#include "core/hub/downloadmanager.h"
#include "core/output/recipe.h"
#include "core/runtime/conditioning.h"
#include "core/runtime/defaults.h"
#include "core/runtime/devicepool.h"
#include "core/runtime/engine.h"
#include "core/runtime/modelresolver.h"
#include "core/studio/studio.h"
#include "core/util/logging.h"
#include "inference/util/format.h"
#include "inference/util/text.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QTimer>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void onInterrupt(int)
{
    // Only an async-signal-safe flag here; the event loop passes it on as a cancel.
    g_interrupted = true;
}

std::string knownDevices()
{
    std::string out;
    for (const auto& id : vireo::capability::knownDeviceIds())
        out += (out.empty() ? "" : ", ") + id;
    return out;
}

}  // namespace

std::string generateHelp()
{
    const std::string text =
        "usage: vireo-cli generate --model PATH [--model PATH ...] [--text-encoder GEMMA_FOLDER] --prompt TEXT --out FILE.mp4|FILE.png\n"
        "         [--negative TEXT] [--frames N|auto] [--width W] [--height H] [--fps F] [--steps S] [--seed N]\n"
        "         [--schedule distilled|dev] [--guidance G] [--audio-guidance G] [--rescale R]\n"
        "         [--device cpu|cuda|cuda:N|auto] [--dtype auto|f32|bf16] [--placement "
        "auto|all-resident|text-encoder-on-cpu|offload-transformer-blocks]\n"
        "         [--speed quality|balanced|fast] [--lora FILE[:STRENGTH] ...] [--force] [--json] [--repeat N] [--no-gallery]\n"
        "         [--image FILE [--image-frame N] [--image-strength S] [--image-crf N] ...] [--clip FILE [--clip-frames N] "
        "[--clip-from-end] ...]\n"
        "         [--audio FILE] [--retake FILE --from S --to S [--keep-sound|--keep-video]] [--reference FILE [--reference-strength S] "
        "...]\n"
        "         [--stages auto|single|two] [--two-stage] [--enhance-prompt [--prompt-enhancer FOLDER]]\n"
        "         [--upsampler FILE] [--temporal-upsampler FILE] [--distilled-lora FILE] [--dry-run [--plan-for DEVICE]] [--again FILE]\n"
        "         [--set KNOB=VALUE ...]\n"
        "  Unset sizes, steps and guidance come from the catalog's defaults for the model's family.\n"
        "  --frames auto lets a model that can (LTX-2.5, its duration head) read the length from the prompt (1 to 20 s)\n"
        "  --again FILE makes FILE again from the recipe inside it (model files, prompt, seed, sizes, schedule,\n"
        "  guidance, LoRAs, start images and clips, stages); options after it change what they name (--seed N).\n"
        "  Video models (LTX-2) write FILE.mp4; image models (an Ideogram-4 folder) write FILE.png and take\n"
        "  --width, --height (multiples of 16), --steps, --guidance and --seed (48 steps at 45 x 7.0 then 3 x 3.0 unless given)\n"
        "  --repeat N runs the request N times in one process (timings of warm runs); the video of the last is written\n"
        "  --force runs although the memory plan says the model does not fit\n"
        "  --image conditions the video on a still (image-to-video; with --image-frame 8k + 1, a keyframe); the options\n"
        "  after it (frame 0, strength 1, CRF: the H.264 round trip the model was trained with, 33, LTX-2.5 18; 0 skips it) are its own.\n"
        "  The picture is scaled to cover the output and cropped in the centre; a copy is kept beside the video.\n"
        "  --clip conditions on the first --clip-frames (8k + 1, default 9) frames of a video (its last ones with\n"
        "  --clip-from-end: at frame 0 the video extends the clip); --image-frame and --image-strength after it are its own.\n"
        "  --audio FILE makes the video follow a sound (a WAV, FLAC, MP3, AAC/M4A or Ogg file, or a video's soundtrack;\n"
        "  audio-to-video, lips included): the sound is the video's own, and the clip is as long as it (up to 20 s)\n"
        "  unless --frames cuts it; its samples are kept beside the video (<name>.audio.wav) for --again.\n"
        "  --retake FILE --from S --to S makes the seconds [S, S) of a clip again (video and sound; --keep-sound or\n"
        "  --keep-video keeps one whole) from the prompt, and keeps the rest frame for frame and sample for sample; the\n"
        "  clip's size, frames and rate unless given; one pass; the frames and samples it started from are kept beside\n"
        "  the video for --again.\n"
        "  --reference FILE gives an IC-LoRA (a --lora with reference_downscale_factor in its metadata or \"ic-lora\" in its\n"
        "  name) the clip it follows: a depth, pose or edge video whose frame k guides frame k (at least as long as the\n"
        "  video; --frames auto takes its length); --reference-strength S (0 to 1, default 1) after it is its own. On two\n"
        "  stages the first follows it and the second refines without it; its frames are kept beside the video for --again.\n"
        "  --stages two (or --two-stage) runs half size, upsamples the latents x2 with --upsampler FILE and refines;\n"
        "  auto does so where the distilled schedule, an upsampler and a size in multiples of 64 allow, or the dev\n"
        "  schedule with --distilled-lora FILE (Lightricks' dev recipe: guided stage 1, the distilled LoRA refines)\n"
        "  --enhance-prompt has the model's prompt enhancer (LTX-2.5's prompt_enhancer/, Gemma 4 E2B) rewrite the prompt\n"
        "  into the detailed paragraph LTX is trained on before it is encoded; the recipe keeps both and the run prints\n"
        "  what it wrote. --prompt-enhancer FOLDER gives one (a Gemma 4 instruct model folder) to a model without its own.\n"
        "  LTX-2.0/2.3's Gemma 3 text encoder writes it itself; either is shown the --image's first frame where there is one\n"
        "  --temporal-upsampler FILE: LTX-2.5's temporal x2 latent upsampler, for --set temporal_rounds=1 or 2 (each\n"
        "  round doubles the frame rate and the frames: 121 at 24 fps -> 241 at 48 -> 481 at 96)\n"
        "  --set third_stage=1 on LTX-2.5's two passes adds Lightricks' 4K path: stage 1 at a quarter of --width x --height,\n"
        "  the second pass (and the rounds) at half, a tiled detailing pass at the size itself (multiples of 128: 3840x2176)\n"
        "  --set fast=1 runs LTX Desktop's Fast instead of DFR: ltx-pipelines' distilled two-stage pipeline (on LTX-2.5 stage 1\n"
        "  with the ancestral sampler and no keyframe slots)\n"
        "  --set KNOB=VALUE sets a control of the model's family's own (its recipe keeps it); the knobs:\n"
        "%k"
        "  The video is listed in the studio's gallery (with its recipe) unless --no-gallery is given\n"
        "  --device auto runs on the GPU the memory plan fits with the fewest jobs queued (the CPU on a box\n"
        "  without one) and says which and why\n"
        "  --host NAME|any runs the job on another machine's Vireo server (vireo-cli hosts): see the lines below\n"
        "  --dry-run prints the memory plan and the path each component takes on the device (the dtype, FP8 or\n"
        "  dequantized GEMMs, the attention) and loads nothing; --out is then optional. --plan-for DEVICE plans for\n"
        "  another GPU instead of this machine's (%s)\n";
    std::string knobs;
    for (const auto& rules : vireo::facade::registeredFamilyRules())
        knobs += "    " + rules.title + ": " + vireo::generation::describeKnobs(rules) + "\n";
    auto out = text;
    const auto k = out.find("%k");
    out.replace(k, 2, knobs);
    const auto at = out.find("%s");
    return out.substr(0, at) + knownDevices() + out.substr(at + 2) + remoteGenerateHelp();
}

namespace {

int usage(const std::string& message)
{
    std::fprintf(stderr, "vireo-cli generate: %s\n%s", vireo::terminalSafe(message).c_str(), generateHelp().c_str());
    return 2;
}

// The memory plan and the capability gate's paths, as --dry-run prints them (and, shorter,
// every run before it loads).
void printPlan(const vireo::facade::MemoryPlan& plan, bool full)
{
    if (full) {
        std::printf("device: %s\n", plan.deviceName.c_str());
        std::printf("plan: %s\n", plan.explanation.c_str());
        for (const auto& c : plan.components)
            std::printf("  %-22s %10s in memory (%s on disk), %s\n", c.name.c_str(), vireo::humanBytes(c.bytes).c_str(),
                vireo::humanBytes(c.storedBytes).c_str(), c.where.c_str());
        std::printf("compute: %s%s%s\n", plan.dtype.c_str(), plan.dtypeReason.empty() ? "" : ": ", plan.dtypeReason.c_str());
        for (const auto& p : plan.paths)
            std::printf("  %-22s %s%s%s\n", p.component.c_str(), p.path.c_str(), p.reason.empty() ? "" : " (",
                p.reason.empty() ? "" : (p.reason + ")").c_str());
        if (!plan.attentionPath.empty())
            std::printf("  %-22s %s (%s)\n", "self-attention", plan.attentionPath.c_str(), plan.attentionReason.c_str());
        std::printf("fits: %s\n", plan.fits ? "yes" : "no");
    } else {
        std::printf("paths: %s\n", plan.pathsText.c_str());
    }
    for (const auto& w : plan.pathWarnings)
        std::printf("warning: %s\n", w.c_str());
}

nlohmann::json planJson(const vireo::facade::MemoryPlan& plan)
{
    nlohmann::json components = nlohmann::json::array(), paths = nlohmann::json::array();
    for (const auto& c : plan.components)
        components.push_back({{"name", c.name}, {"bytes", c.bytes}, {"stored_bytes", c.storedBytes}, {"where", c.where}});
    for (const auto& p : plan.paths)
        paths.push_back({{"component", p.component}, {"path", p.path}, {"reason", p.reason}});
    return {{"device", plan.device}, {"device_name", plan.deviceName}, {"dtype", plan.dtype}, {"dtype_reason", plan.dtypeReason},
        {"placement", std::string(vireo::facade::placementName(plan.placement))}, {"fits", plan.fits},
        {"device_peak_bytes", plan.devicePeakBytes}, {"host_peak_bytes", plan.hostPeakBytes}, {"shortfall_bytes", plan.shortfallBytes},
        {"explanation", plan.explanation}, {"components", components}, {"paths", paths}, {"attention", plan.attentionPath},
        {"attention_reason", plan.attentionReason}, {"path_warnings", plan.pathWarnings}, {"paths_text", plan.pathsText}};
}

// What the command line said, before any default is applied.
struct GenerateOptions {
    vireo::facade::LoadPlan load;
    // Only what was given: the studio's generation service fills the rest the window's way.
    vireo::generation::Ask ask;
    std::string out;
    bool asJson = false, force = false, recordInGallery = true, dryRun = false;
    bool autoDevice = false;  // --device auto: the device pool places the job
    std::optional<vireo::capability::DeviceCaps> planFor;
    int repeat = 1;
    bool audioGiven = false;  // --audio on this command line (an --again recipe's sound is replaced by it)
    bool retakeGiven = false;  // --retake on this command line
    bool referencesGiven = false;  // --reference on this command line (an --again recipe's are replaced)
};

// One option with its value `v`; the exit status of a usage error, or nothing.
std::optional<int> applyValue(const std::string& a, const std::string& v, GenerateOptions& o)
{
    using vireo::cli::parseNumber;
    auto& ask = o.ask;
    auto& load = o.load;
    auto& conditions = ask.conditions;
    std::string error;
    auto integer = [&](std::int64_t min, std::int64_t max) -> std::optional<std::int64_t> {
        auto n = parseNumber<std::int64_t>(v, min, max);
        if (!n)
            error = a + ": " + n.error().message;
        return n ? std::optional<std::int64_t>(*n) : std::nullopt;
    };
    auto real = [&](double min, double max) -> std::optional<double> {
        auto n = parseNumber<double>(v, min, max);
        if (!n)
            error = a + ": " + n.error().message;
        return n ? std::optional<double>(*n) : std::nullopt;
    };
    // --image-frame, --image-strength and --image-crf belong to the --image before them.
    auto lastImage = [&]() -> vireo::runtime::ConditionFile* {
        if (conditions.empty())
            error = a + " belongs to an --image or --clip given before it";
        return conditions.empty() ? nullptr : &conditions.back();
    };
    if (a == "--model")
        load.modelPaths.emplace_back(v);
    else if (a == "--image") {
        vireo::runtime::ConditionFile c;
        c.path = QString::fromStdString(v);
        conditions.push_back(c);
    } else if (a == "--clip") {
        vireo::runtime::ConditionFile c;
        c.path = QString::fromStdString(v);
        c.clipFrames = 9;
        c.crf = 0;  // the reference re-compresses single frames only
        conditions.push_back(c);
    } else if (a == "--clip-frames") {
        auto* c = lastImage();
        if (c && c->clipFrames == 0)
            error = "--clip-frames belongs to a --clip, not an --image";
        else if (auto n = c ? integer(1, 1025) : std::nullopt)
            c->clipFrames = static_cast<int>(*n);
    } else if (a == "--image-frame") {
        auto* c = lastImage();
        if (auto n = c ? integer(0, 1024) : std::nullopt)
            c->frame = *n;
    } else if (a == "--image-strength") {
        auto* c = lastImage();
        if (auto n = c ? real(0, 1) : std::nullopt)
            c->strength = *n;
    } else if (a == "--image-crf") {
        auto* c = lastImage();
        if (c && c->clipFrames > 0)
            error = "--image-crf belongs to an --image: clips are not re-compressed";
        else if (auto n = c ? integer(0, 51) : std::nullopt)
            c->crf = static_cast<int>(*n);
    } else if (a == "--audio") {
        if (o.audioGiven)
            return usage("--audio is given once: the video follows one sound");
        o.audioGiven = true;
        ask.audio = vireo::runtime::AudioFile{QString::fromStdString(v), {}};
    } else if (a == "--retake") {
        // A new clip to retake replaces an --again recipe's, window and all.
        ask.retake = vireo::runtime::RetakeFile{};
        ask.retake->path = QString::fromStdString(v);
        o.retakeGiven = true;
    } else if (a == "--reference") {
        if (!o.referencesGiven)
            ask.references.clear();
        o.referencesGiven = true;
        ask.references.push_back({QString::fromStdString(v), 1.0, {}});
    } else if (a == "--reference-strength") {
        if (ask.references.empty() || !o.referencesGiven)
            return usage("--reference-strength belongs to a --reference given before it");
        if (auto n = real(0, 1))
            ask.references.back().strength = *n;
    } else if (a == "--from" || a == "--to") {
        if (!ask.retake)
            return usage(a + " belongs to a --retake given before it");
        if (auto n = real(0, 3600))
            (a == "--from" ? ask.retake->start : ask.retake->end) = *n;
    } else if (a == "--stages") {
        const auto st = vireo::cli::lower(v);
        if (st != "auto" && st != "single" && st != "two")
            return usage("--stages is auto, single or two");
        ask.stages = st;
    } else if (a == "--plan-for") {
        o.planFor = vireo::capability::knownDevice(vireo::cli::lower(v));
        if (!o.planFor)
            return usage("--plan-for: '" + v + "' is not a known device (" + knownDevices() + ")");
    } else if (a == "--upsampler")
        load.spatialUpsamplerPath = v;
    else if (a == "--temporal-upsampler")
        load.temporalUpsamplerPath = v;
    else if (a == "--prompt-enhancer")
        load.promptEnhancerPath = v;
    else if (a == "--distilled-lora")
        load.distilledLoraPath = v;
    else if (a == "--text-encoder")
        load.textEncoderPath = v;
    else if (a == "--prompt")
        ask.prompt = v;
    else if (a == "--negative")
        ask.negativePrompt = v;
    else if (a == "--out")
        o.out = v;
    else if (a == "--lora") {
        auto spec = vireo::cli::parseLoraSpec(v);
        if (!spec)
            return usage(spec.error().message);
        ask.loras.push_back({spec->path, spec->strength});
    } else if (a == "--frames")
        ask.frames = vireo::cli::lower(v) == "auto" ? 0 : integer(1, 1025);  // auto: the model reads the length from the prompt
    else if (a == "--width")
        ask.width = integer(32, 8192);
    else if (a == "--height")
        ask.height = integer(32, 8192);
    else if (a == "--fps")
        ask.fps = real(0.5, 240);
    else if (a == "--steps") {
        if (auto n = integer(1, 1000))
            ask.steps = static_cast<int>(*n);
    } else if (a == "--seed")
        ask.seed = integer(0, 2147483647);  // what the studio's Generate page holds, so every recipe can be made again there
    else if (a == "--guidance")
        ask.guidance = real(0, 100);
    else if (a == "--audio-guidance")
        ask.audioGuidance = real(0, 100);
    else if (a == "--rescale")
        ask.rescale = real(0, 1);
    else if (a == "--repeat") {
        if (auto n = integer(1, 1000))
            o.repeat = static_cast<int>(*n);
    } else if (a == "--schedule") {
        const auto s = vireo::cli::lower(v);
        if (s != "distilled" && s != "dev")
            return usage("--schedule is distilled or dev");
        ask.schedule = s;
    } else if (a == "--device") {
        // auto: planned and shown for the first GPU (the CPU without one); the pool then places it.
        o.autoDevice = vireo::cli::lower(v) == "auto";
        load.device = o.autoDevice ? (vireo::facade::availableDevices().size() > 1 ? "cuda:0" : "cpu") : v;
    } else if (a == "--dtype")
        load.dtype = v;
    else if (a == "--set") {
        // The range is the family's, checked with the rest of the ask (generation::prepare).
        const auto eq = v.find('=');
        const auto value = parseNumber<double>(std::string_view(v).substr(eq == std::string::npos ? v.size() : eq + 1), -1e9, 1e9);
        if (eq == std::string::npos || eq == 0 || !value)
            return usage("--set takes KNOB=VALUE with a number for VALUE, not " + v);
        ask.knobs[v.substr(0, eq)] = *value;
    } else if (a == "--speed") {
        auto m = vireo::facade::parseSpeedMode(v);
        if (!m)
            return usage("--speed is quality, balanced or fast");
        ask.speed = std::string(vireo::facade::speedModeName(*m));
    } else if (a == "--placement") {
        auto p = vireo::facade::parsePlacement(v);
        if (!p)
            return usage("--placement is auto, all-resident, text-encoder-on-cpu or offload-transformer-blocks");
        load.placement = *p;
    } else
        return usage("unexpected argument " + a);
    if (!error.empty())
        return usage(error);
    return std::nullopt;
}

// The arguments, --again FILE first: what made FILE, from the recipe inside it, then the
// user's own options, which win where they repeat one (--seed for a variation; --out names
// the new file). The exit status of a usage error, or nothing.
std::optional<int> parseOptions(const std::vector<std::string>& given, GenerateOptions& o)
{
    std::vector<std::string> args;
    for (std::size_t i = 0; i < given.size(); ++i) {
        if (given[i] != "--again") {
            args.push_back(given[i]);
            continue;
        }
        if (i + 1 >= given.size())
            return usage("--again needs the output file to make again");
        auto again = vireo::cli::madeAgain(given[++i]);
        if (!again) {
            std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(again.error().message).c_str());
            return 1;
        }
        o.ask = std::move(again->ask);
        o.load = std::move(again->load);
    }
    auto& conditions = o.ask.conditions;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& a = args[i];
        if (a == "--json" || a == "--force" || a == "--dry-run") {
            (a == "--json" ? o.asJson : a == "--force" ? o.force : o.dryRun) = true;
            continue;
        }
        if (a == "--no-gallery") {
            o.recordInGallery = false;
            continue;
        }
        if (a == "--two-stage") {
            o.ask.stages = "two";
            continue;
        }
        if (a == "--enhance-prompt") {
            o.ask.enhancePrompt = true;
            continue;
        }
        if (a == "--keep-sound" || a == "--keep-video") {
            if (!o.ask.retake)
                return usage(a + " belongs to a --retake given before it");
            (a == "--keep-sound" ? o.ask.retake->audio : o.ask.retake->video) = false;
            continue;
        }
        if (a == "--clip-from-end") {
            // The last --clip-frames frames of the --clip before it: the video extends that clip.
            if (conditions.empty() || conditions.back().clipFrames == 0)
                return usage("--clip-from-end belongs to a --clip given before it");
            conditions.back().clipFromEnd = true;
            continue;
        }
        if (i + 1 >= args.size())
            return usage("option " + a + " needs a value");
        if (auto failed = applyValue(a, args[++i], o))
            return failed;
    }
    if (o.retakeGiven && !(o.ask.retake->end > o.ask.retake->start))
        return usage("--retake needs --from S and --to S, the seconds to make again (S before S)");
    if (o.planFor && !o.dryRun)
        return usage("--plan-for plans for another device: it goes with --dry-run");
    // A dry run writes nothing: its name only has to suit what the model makes.
    if (o.dryRun && o.out.empty())
        o.out = vireo::facade::detectModelKind(o.load.modelPaths) == vireo::facade::ModelKind::Image ? "dry-run.png" : "dry-run.mp4";
    if (o.load.modelPaths.empty() || o.ask.prompt.empty() || o.out.empty())
        return usage("--model, --prompt and --out are required");
    return std::nullopt;
}

// The window's key for these files, text encoder and upsampler included: the recipe then
// names everything --again (or Generate again) needs.
vireo::runtime::ModelRef modelFor(const vireo::facade::LoadPlan& load)
{
    vireo::runtime::ModelRef model;
    QStringList paths;
    for (const auto& p : load.modelPaths)
        paths << QString::fromStdString(p.string());
    model.key = vireo::runtime::ModelResolver::localKey(paths,
        load.textEncoderPath ? QString::fromStdString(load.textEncoderPath->string()) : QString(),
        load.spatialUpsamplerPath ? QString::fromStdString(load.spatialUpsamplerPath->string()) : QString(),
        load.temporalUpsamplerPath ? QString::fromStdString(load.temporalUpsamplerPath->string()) : QString(),
        load.distilledLoraPath ? QString::fromStdString(load.distilledLoraPath->string()) : QString(),
        load.promptEnhancerPath ? QString::fromStdString(load.promptEnhancerPath->string()) : QString());
    model.title = QFileInfo(paths.first()).fileName();
    model.plan = load;
    return model;
}

// Every file the run reads or writes, checked before a byte of weights is read; the exit
// status of the first problem, or nothing.
std::optional<int> checkFiles(const GenerateOptions& o)
{
    const auto& out = o.out;
    const auto& load = o.load;
    const auto& ask = o.ask;
    const auto& conditions = ask.conditions;
    const bool dryRun = o.dryRun;
    struct stat st {};
    if (!dryRun && ::lstat(out.c_str(), &st) == 0) {
        std::fprintf(
            stderr, "vireo-cli: %s exists; choose another name (outputs are never overwritten)\n", vireo::terminalSafe(out).c_str());
        return 1;
    }
    const auto folder =
        std::filesystem::path(out).parent_path().empty() ? std::filesystem::path(".") : std::filesystem::path(out).parent_path();
    if (!dryRun && (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
        std::fprintf(stderr, "vireo-cli: %s: the output folder does not exist\n", folder.c_str());
        return 1;
    }
    if (!dryRun && ::access(folder.c_str(), W_OK) != 0) {
        std::fprintf(stderr, "vireo-cli: %s: the output folder is not writable\n", folder.c_str());
        return 1;
    }
    // The output is created (and removed) now: a name too long, a folder that takes no files
    // (/proc, read-only media) fail here, not after the whole generation.
    if (!dryRun)
        if (auto probed = vireo::cli::probeOutputFile(out); !probed) {
            std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(probed.error().message).c_str());
            return 1;
        }
    for (const auto& p : load.modelPaths)
        if (::stat(p.c_str(), &st) != 0) {
            std::fprintf(stderr, "vireo-cli: %s: no such file or folder\n", vireo::terminalSafe(p.string()).c_str());
            return 1;
        }
    for (const auto& l : ask.loras)
        if (const auto why = vireo::cli::notARegularFile(l.path.string(), "LoRA"); !why.empty()) {
            std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(why).c_str());
            return 1;
        }
    if (load.spatialUpsamplerPath && ::stat(load.spatialUpsamplerPath->c_str(), &st) != 0) {
        std::fprintf(stderr, "vireo-cli: %s: no such spatial upsampler\n", load.spatialUpsamplerPath->c_str());
        return 1;
    }
    if (load.temporalUpsamplerPath && ::stat(load.temporalUpsamplerPath->c_str(), &st) != 0) {
        std::fprintf(stderr, "vireo-cli: %s: no such temporal upsampler\n", load.temporalUpsamplerPath->c_str());
        return 1;
    }
    if (load.promptEnhancerPath && ::stat(load.promptEnhancerPath->c_str(), &st) != 0) {
        std::fprintf(stderr, "vireo-cli: %s: no such prompt enhancer\n", vireo::terminalSafe(load.promptEnhancerPath->string()).c_str());
        return 1;
    }
    if (load.distilledLoraPath)
        if (const auto why = vireo::cli::notARegularFile(load.distilledLoraPath->string(), "distilled LoRA"); !why.empty()) {
            std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(why).c_str());
            return 1;
        }
    for (const auto& c : conditions)
        if (const auto why = vireo::cli::notARegularFile(c.path.toStdString(), c.clipFrames > 0 ? "video" : "image"); !why.empty()) {
            std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(why).c_str());
            return 1;
        }
    if (ask.retake)
        if (const auto why = vireo::cli::notARegularFile(ask.retake->path.toStdString(), "video"); !why.empty()) {
            std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(why).c_str());
            return 1;
        }
    for (const auto& f : ask.references)
        if (const auto why = vireo::cli::notARegularFile(f.path.toStdString(), "reference clip"); !why.empty()) {
            std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(why).c_str());
            return 1;
        }
    if (ask.audio)
        if (const auto why = vireo::cli::notARegularFile(ask.audio->path.toStdString(), "sound"); !why.empty()) {
            std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(why).c_str());
            return 1;
        }
    return std::nullopt;
}

// The plan before anything loads: what fits where, and the path each component takes on this
// device (or, with --plan-for, on another); with --dry-run the whole plan, and the request as
// it would run (defaults applied: what the window would show). 0 after a dry run, 1 when no
// plan can be made, nothing to go on.
std::optional<int> showPlan(
    const GenerateOptions& o, const vireo::facade::GenerateRequest& base, const vireo::runtime::GenerationDefaults& defaults, bool image)
{
    std::optional<vireo::facade::MemoryBudget> budget;
    if (o.planFor) {
        budget = vireo::facade::measureBudget("cpu");
        budget->deviceCaps = o.planFor;
        budget->deviceFreeBytes = budget->deviceTotalBytes = o.planFor->totalBytes;
    }
    auto size = vireo::facade::sizeRequestOf(base, image);
    size.references = image ? 0 : static_cast<int>(o.ask.references.size());
    auto plan = vireo::facade::Generator::planMemory(o.load, size, budget);
    if (!plan) {
        std::fprintf(stderr, "vireo-cli: %s\n", plan.error().message.c_str());
        return 1;
    }
    if (o.dryRun) {
        if (o.asJson) {
            auto j = planJson(*plan);
            j["request"] = {{"width", base.width}, {"height", base.height}, {"frames", base.frames}, {"fps", base.fps},
                {"schedule", base.schedule}, {"steps", base.steps}, {"guidance", base.guidance}, {"audio_guidance", base.audioGuidance},
                {"guidance_rescale", base.guidanceRescale}, {"guidance_schedule", base.guidanceSchedule}, {"knobs", base.knobs},
                {"defaults_basis", defaults.basis}};
            std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        } else {
            printPlan(*plan, true);
        }
        return 0;
    }
    if (!o.asJson) {
        printPlan(*plan, false);
        std::fflush(stdout);
    }
    return std::nullopt;
}

// Each run's fate and the last one's recipe: LoRAs, conditions, paths and the file, as lines
// or as one JSON object; the exit status.
int report(const GenerateOptions& o, vireo::runtime::Engine& engine, const std::vector<quint64>& ids,
    const vireo::facade::GenerateRequest& base, bool image, std::chrono::steady_clock::time_point started)
{
    using Clock = std::chrono::steady_clock;
    const auto& out = o.out;
    const bool asJson = o.asJson;
    nlohmann::json runs = nlohmann::json::array();
    std::vector<double> runSeconds;
    for (const auto id : ids) {
        const auto s = engine.job(id);
        if (!s)
            continue;
        if (s->state == vireo::runtime::JobState::Cancelled) {
            std::fprintf(stderr, "vireo-cli: cancelled; nothing was written\n");
            return 130;
        }
        if (s->state != vireo::runtime::JobState::Done) {
            std::fprintf(stderr, "vireo-cli: %s\n", s->error.toUtf8().constData());
            return 1;
        }
        runSeconds.push_back(s->generateSeconds);
        nlohmann::json phases = s->recipe.secondsPerPhase;
        runs.push_back(phases);
    }
    const auto last = engine.job(ids.back());
    // Every LoRA's fate, applied or not: a refused one is never a silent no-op.
    nlohmann::json loras = nlohmann::json::array();
    for (const auto& l : last->recipe.loras) {
        loras.push_back({{"path", l.path}, {"strength", l.strength}, {"status", l.status}, {"sha256", l.sha256}});
        if (!asJson)
            std::printf("LoRA %s x %g: %s\n", l.path.c_str(), l.strength, l.status.c_str());
        else if (l.status != "applied")
            std::fprintf(stderr, "vireo-cli: LoRA %s: %s\n", l.path.c_str(), l.status.c_str());
    }
    nlohmann::json conditionsJson = nlohmann::json::array();
    for (const auto& c : last->recipe.conditions) {
        conditionsJson.push_back({{"source", c.source}, {"copy", c.copy}, {"sha256", c.sha256}, {"frame", c.frame},
            {"strength", c.strength}, {"crf", c.crf}, {"frames", c.frames}, {"from_end", c.fromEnd}});
        if (!asJson)
            std::printf("%s %s at frame %lld, strength %g%s%s\n", c.frames > 1 ? "clip" : "image", c.source.c_str(),
                static_cast<long long>(c.frame), c.strength,
                c.frames > 1 ? (", " + std::string(c.fromEnd ? "last " : "first ") + std::to_string(c.frames) + " frames").c_str()
                             : (", CRF " + std::to_string(c.crf)).c_str(),
                c.copy.empty() ? " (no copy could be kept beside the video)" : (", kept as " + c.copy).c_str());
    }
    const double total = std::chrono::duration<double>(Clock::now() - started).count();
    if (asJson) {
        nlohmann::json phases = last->recipe.secondsPerPhase;
        phases[image ? "write" : "mux"] = last->writeSeconds;
        runs.back() = phases;
        const auto resident = engine.resident();
        // What the file holds: temporal rounds double the frames (less one) and the rate the
        // recipe keeps.
        const auto& knobs = last->recipe.request.knobs;
        const int scale = 1 << (knobs.count("temporal_rounds") ? std::clamp(static_cast<int>(knobs.at("temporal_rounds")), 0, 2) : 0);
        nlohmann::json predicted = nullptr;
        if (last->recipe.predictedSeconds)
            predicted = *last->recipe.predictedSeconds;
        std::printf("%s\n",
            nlohmann::json{{"out", out}, {"seconds", total}, {"run_seconds", runSeconds}, {"phases", phases}, {"runs", runs},
                {"component_bytes", resident ? resident->bytes : std::map<std::string, std::int64_t>{}},
                {"frames", (last->recipe.request.frames - 1) * scale + 1}, {"fps", last->recipe.request.fps * scale},
                {"predicted_seconds", predicted}, {"enhanced_prompt", last->recipe.enhancedPrompt}, {"seed", base.seed},
                {"load_seconds", engine.job(ids.front())->loadSeconds}, {"loras", loras}, {"speed", last->recipe.request.speed},
                {"knobs", last->recipe.request.knobs}, {"steps_skipped", last->recipe.stepsSkipped},
                {"cuda_graphs", last->recipe.cudaGraphs}, {"paths", last->recipe.paths}, {"planned_paths", last->recipe.plannedPaths},
                {"path_warnings", last->recipe.pathWarnings}, {"kind", last->recipe.kind}, {"width", last->recipe.request.width},
                {"height", last->recipe.request.height}, {"stages", last->recipe.stages}, {"stages_reason", last->recipe.stagesReason},
                {"conditions", conditionsJson}, {"audio_sample_rate", last->recipe.audioSampleRate},
                {"audio_channels", last->recipe.audioChannels}}
                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                .c_str());
        return 0;
    }
    if (!last->recipe.enhancedPrompt.empty())
        std::printf("prompt enhancer: %s\n", vireo::terminalSafe(last->recipe.enhancedPrompt).c_str());
    if (last->recipe.stepsSkipped > 0)
        std::printf("speed %s: %d of %d denoise steps reused the transformer's previous work\n", last->recipe.request.speed.c_str(),
            last->recipe.stepsSkipped, last->recipe.request.steps);
    if (!last->recipe.paths.empty())
        std::printf("compute: %s\n", last->recipe.paths.c_str());
    for (const auto& w : last->recipe.pathWarnings)
        std::printf("warning: %s\n", w.c_str());
    if (!last->recipe.cudaGraphs.empty())
        std::printf("CUDA graphs: %s\n", last->recipe.cudaGraphs.c_str());
    if (image)
        std::printf("[%7.2f s] wrote %s (%lldx%lld image)\n", total, out.c_str(), static_cast<long long>(last->recipe.request.width),
            static_cast<long long>(last->recipe.request.height));
    else
        std::printf("[%7.2f s] wrote %s (%lld frames)\n", total, out.c_str(), static_cast<long long>(last->recipe.request.frames));
    return 0;
}

}  // namespace

int runGenerate(const std::vector<std::string>& given)
{
    // A job for another machine's server takes the host's model id, not local files.
    if (std::find(given.begin(), given.end(), "--host") != given.end())
        return runRemoteGenerate(given);
    GenerateOptions o;
    if (auto failed = parseOptions(given, o))
        return *failed;
    const auto& ask = o.ask;
    const auto& load = o.load;
    const auto& out = o.out;
    const bool asJson = o.asJson;
    // Everything that can be checked is checked before a byte of weights is read.
    if (vireo::output::sanitizedText(ask.prompt).find_first_not_of(" \t\n") == std::string::npos)
        return usage("--prompt is empty");
    // What the model makes decides the file: checked from the folder layout before anything loads.
    const bool image = vireo::facade::detectModelKind(load.modelPaths) == vireo::facade::ModelKind::Image;
    const auto extension = vireo::cli::lower(std::filesystem::path(out).extension().string());
    if (image && extension != ".png")
        return usage(load.modelPaths.front().string() + " is an image model (Ideogram-4): --out must name a .png file, not " + out);
    if (!image && extension != ".mp4")
        return usage("this is a video model: --out must name a .mp4 file, not " + out);
    const auto model = modelFor(load);
    if (image) {
        // Said with the options' own names before anything else is read.
        const auto extra = vireo::generation::notForImages(ask, load);
        if (!extra.empty()) {
            std::string list;
            for (const auto& g : extra)
                list += (list.empty() ? "--" : ", --") + g;
            return usage(list + (extra.size() == 1 ? " does" : " do") + " not apply to an image model (Ideogram-4)");
        }
    }
    if (auto failed = checkFiles(o))
        return *failed;

    auto headless = vireo::cli::openHeadlessStudio(o.recordInGallery);
    if (!headless) {
        std::fprintf(stderr, "vireo-cli: %s\n", headless.error().message.c_str());
        return 1;
    }
    auto* studio = &headless->studio;
    auto& app = *headless->app;
    const auto& catalog = (*studio)->downloads()->catalog();
    auto defaults = vireo::generation::defaultsFor(catalog, model, ask);
    if (!defaults) {
        std::fprintf(stderr, "vireo-cli: %s\n", defaults.error().message.c_str());
        return 1;
    }
    if (!asJson && !defaults->basis.empty())
        std::printf("defaults: %s\n", defaults->basis.c_str());
    auto prepared = vireo::generation::prepare(catalog, *defaults, model, ask);
    if (!prepared)
        return usage(prepared.error().message
            + (prepared.error().message.find("no spatial upsampler") != std::string::npos ? " (give the upsampler with --upsampler FILE)"
                                                                                          : ""));
    auto& base = prepared->job.request;
    base.previewEvery = 0;
    if (!image && !asJson) {
        std::printf("stages: %s\n", prepared->stagesReason.c_str());
        std::fflush(stdout);
    }
    // Every still and clip decodes the way the engine will read it.
    if (auto decoded = vireo::generation::decodeConditions(*prepared); !decoded) {
        std::fprintf(stderr, "vireo-cli: %s\n", decoded.error().message.c_str());
        return 1;
    }
    if (auto done = showPlan(o, base, *defaults, image))
        return *done;

    // --device auto: the pool picks the device for the first run; the repeats (timing runs) follow it.
    vireo::runtime::Engine* chosen = nullptr;
    std::optional<quint64> autoFirst;
    if (o.autoDevice) {
        vireo::runtime::GenerateJob probe = prepared->job;
        probe.forcePlacement = o.force;
        probe.writeOutput = o.repeat == 1;
        if (probe.writeOutput)
            probe.outputPath = QString::fromStdString(out);
        auto placed = (*studio)->devicePool()->submit(probe);
        if (!placed) {
            std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(placed.error().message).c_str());
            return 1;
        }
        if (!asJson)
            std::printf("device: %s (%s)\n", qPrintable(placed->device), vireo::terminalSafe(placed->reason.toStdString()).c_str());
        chosen = placed->engine;
        autoFirst = placed->id;
    }
    auto& engine = chosen ? *chosen : *(*studio)->engine(QString::fromStdString(load.device));
    QObject::connect(studio->get(), &vireo::core::Studio::outputNotRecorded, &app, [](const QString& path, const QString& reason) {
        std::fprintf(
            stderr, "vireo-cli: warning: %s was written but not listed in the gallery: %s\n", qPrintable(path), qPrintable(reason));
    });
    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    std::vector<quint64> ids;
    if (autoFirst)
        ids.push_back(*autoFirst);
    for (int r = autoFirst ? 1 : 0; r < o.repeat; ++r) {
        vireo::runtime::GenerateJob job = prepared->job;
        job.forcePlacement = o.force;
        job.writeOutput = r + 1 == o.repeat;
        if (job.writeOutput)
            job.outputPath = QString::fromStdString(out);
        job.model.plan.device = engine.device().toStdString();
        ids.push_back(engine.enqueueGenerate(job));
    }
    if (!asJson && image)
        std::printf("%s, %lldx%lld image, %d steps, guidance %s, seed %lld\n", model.title.toUtf8().constData(),
            static_cast<long long>(base.width), static_cast<long long>(base.height), base.steps,
            base.guidanceSchedule.empty() ? QString::number(base.guidance).toUtf8().constData() : "45 x 7.0 then 3 x 3.0 (the reference's)",
            static_cast<long long>(base.seed));
    else if (!asJson)
        std::printf("%s, %lldx%lld, %lld frames at %g fps, seed %lld\n", model.title.toUtf8().constData(),
            static_cast<long long>(base.width), static_cast<long long>(base.height), static_cast<long long>(base.frames), base.fps,
            static_cast<long long>(base.seed));
    std::fflush(stdout);

    struct sigaction action {};
    action.sa_handler = onInterrupt;
    sigemptyset(&action.sa_mask);
    struct sigaction previous {};
    ::sigaction(SIGINT, &action, &previous);
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, &app, [&] {
        if (g_interrupted.exchange(false))
            engine.cancelAll();
    });
    poll.start(20);

    QString lastLine;
    QObject::connect(
        &engine, &vireo::runtime::Engine::jobProgress, &app, [&](quint64, const QString& phase, qint64 done, qint64 total, double) {
            if (asJson)
                return;
            // One line per change of phase or count (a phase's last report may repeat).
            const QString key = phase + QString::number(done) + QLatin1Char('/') + QString::number(total);
            if (key == lastLine)
                return;
            lastLine = key;
            const double t = std::chrono::duration<double>(Clock::now() - started).count();
            std::printf(
                "[%7.2f s] %-18s %lld/%lld\n", t, phase.toUtf8().constData(), static_cast<long long>(done), static_cast<long long>(total));
            std::fflush(stdout);
        });
    int finished = 0;
    QObject::connect(&engine, &vireo::runtime::Engine::jobFinished, &app, [&](quint64) {
        if (++finished == static_cast<int>(ids.size()))
            app.quit();
    });
    app.exec();
    ::sigaction(SIGINT, &previous, nullptr);

    const int status = report(o, engine, ids, base, image, started);
    if (status == 0 && o.recordInGallery && !(*studio)->galleryError().isEmpty())
        std::fprintf(stderr, "vireo-cli: warning: %s was written but not listed in the gallery: %s\n", out.c_str(),
            qPrintable((*studio)->galleryError()));
    return status;
}
