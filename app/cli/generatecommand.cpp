#include "app/cli/generatecommand.h"

#include "inference/pipelines/ltx2pipeline.h"
#include "inference/util/format.h"
#include "media/mp4writer.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <stop_token>
#include <sys/stat.h>
#include <unistd.h>

namespace {

std::stop_source* g_stop = nullptr;

extern "C" void onInterrupt(int)
{
    // Only an async-signal-safe flag here; the pipeline stops at its next check.
    if (g_stop)
        g_stop->request_stop();
}

int usage(const std::string& message)
{
    std::fprintf(stderr, "vireo-cli generate: %s\n"
        "usage: vireo-cli generate --model PATH [--model PATH ...] [--text-encoder GEMMA_FOLDER] --prompt TEXT --out FILE.mp4\n"
        "         [--negative TEXT] [--frames N] [--width W] [--height H] [--fps F] [--steps S] [--seed N]\n"
        "         [--schedule distilled|dev] [--guidance G] [--audio-guidance G] [--rescale R]\n"
        "         [--device cpu|cuda] [--dtype f32|bf16] [--json] [--repeat N]\n"
        "  --repeat N runs the request N times in one process (timings of warm runs); the video of the last is written\n", message.c_str());
    return 2;
}

std::string hex(const unsigned char* data, unsigned n)
{
    static const char* digits = "0123456789abcdef";
    std::string out;
    for (unsigned i = 0; i < n; ++i) {
        out += digits[data[i] >> 4];
        out += digits[data[i] & 15];
    }
    return out;
}

// The file's SHA-256. A Hugging Face cache entry already carries it as its blob name, so a
// 40 GB checkpoint is not read again for every video.
std::string fileHash(const std::filesystem::path& path)
{
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved)) {
        const std::filesystem::path real(resolved);
        const auto name = real.filename().string();
        if (real.parent_path().filename() == "blobs" && name.size() == 64
            && name.find_first_not_of("0123456789abcdef") == std::string::npos)
            return name;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return {};
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    std::vector<char> buffer(8 << 20);
    while (in) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        EVP_DigestUpdate(ctx, buffer.data(), static_cast<std::size_t>(in.gcount()));
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned n = 0;
    EVP_DigestFinal_ex(ctx, digest, &n);
    EVP_MD_CTX_free(ctx);
    return hex(digest, n);
}

// Every weight file under the given paths (a folder is walked), with size and hash.
nlohmann::json describeFiles(const std::vector<std::filesystem::path>& paths)
{
    nlohmann::json files = nlohmann::json::array();
    auto add = [&](const std::filesystem::path& p) {
        struct stat st {};
        if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
            return;
        const auto ext = p.extension().string();
        if (ext != ".safetensors" && ext != ".gguf" && ext != ".json" && ext != ".model")
            return;
        files.push_back({{"path", p.string()}, {"bytes", static_cast<std::int64_t>(st.st_size)}, {"sha256", fileHash(p)}});
    };
    for (const auto& p : paths) {
        struct stat st {};
        if (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
            std::error_code ec;
            for (auto it = std::filesystem::recursive_directory_iterator(p, ec); !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
                add(it->path());
        } else {
            add(p);
        }
    }
    return files;
}

} // namespace

int runGenerate(const std::vector<std::string>& args)
{
    vireo::pipelines::Ltx2PipelineOptions options;
    vireo::pipelines::Ltx2Request req;
    std::string out;
    bool haveSchedule = false;
    bool asJson = false;
    int repeat = 1;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& a = args[i];
        if (a == "--json") {
            asJson = true;
            continue;
        }
        if (i + 1 >= args.size())
            return usage("option " + a + " needs a value");
        const auto& v = args[++i];
        try {
            if (a == "--model")
                options.modelPaths.emplace_back(v);
            else if (a == "--text-encoder")
                options.textEncoderPath = v;
            else if (a == "--prompt")
                req.prompt = v;
            else if (a == "--negative")
                req.negativePrompt = v;
            else if (a == "--out")
                out = v;
            else if (a == "--frames")
                req.frames = std::stoll(v);
            else if (a == "--width")
                req.width = std::stoll(v);
            else if (a == "--height")
                req.height = std::stoll(v);
            else if (a == "--fps")
                req.fps = std::stod(v);
            else if (a == "--steps")
                req.steps = std::stoi(v);
            else if (a == "--seed")
                req.seed = std::stoll(v);
            else if (a == "--guidance")
                req.guidanceScale = std::stod(v);
            else if (a == "--audio-guidance")
                req.audioGuidanceScale = std::stod(v);
            else if (a == "--rescale")
                req.guidanceRescale = std::stod(v);
            else if (a == "--repeat")
                repeat = std::max(1, std::stoi(v));
            else if (a == "--schedule") {
                if (v != "distilled" && v != "dev")
                    return usage("--schedule is distilled or dev");
                req.schedule = v == "dev" ? vireo::pipelines::Ltx2Schedule::Dev : vireo::pipelines::Ltx2Schedule::Distilled;
                haveSchedule = true;
            } else if (a == "--device")
                options.device = c10::Device(v);
            else if (a == "--dtype") {
                if (v == "bf16" || v == "bfloat16")
                    options.dtype = c10::kBFloat16;
                else if (v == "f32" || v == "float32")
                    options.dtype = c10::kFloat;
                else
                    return usage("--dtype is f32 or bf16");
            } else
                return usage("unexpected argument " + a);
        } catch (const std::exception&) {
            return usage(a + ": '" + v + "' is not a valid value");
        }
    }
    if (options.modelPaths.empty() || req.prompt.empty() || out.empty())
        return usage("--model, --prompt and --out are required");
    if (!haveSchedule && (req.guidanceScale > 1 || req.steps > 8))
        req.schedule = vireo::pipelines::Ltx2Schedule::Dev;
    if (::access(out.c_str(), F_OK) == 0) {
        std::fprintf(stderr, "vireo-cli: %s exists; choose another name (outputs are never overwritten)\n", out.c_str());
        return 1;
    }

    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    auto pipeline = vireo::pipelines::Ltx2Pipeline::open(options);
    if (!pipeline) {
        std::fprintf(stderr, "vireo-cli: %s\n", pipeline.error().message.c_str());
        return 1;
    }
    std::stop_source stop;
    g_stop = &stop;
    struct sigaction action {};
    action.sa_handler = onInterrupt;
    sigemptyset(&action.sa_mask);
    struct sigaction previous {};
    ::sigaction(SIGINT, &action, &previous);

    if (!asJson)
        std::printf("LTX-%s, %lldx%lld, %lld frames at %g fps, seed %lld\n", pipeline->version().c_str(), static_cast<long long>(req.width),
        static_cast<long long>(req.height), static_cast<long long>(req.frames), req.fps, static_cast<long long>(req.seed));
    std::fflush(stdout);
    auto progress = [&](const vireo::pipelines::Ltx2Progress& p) {
        if (asJson)
            return;
        const double t = std::chrono::duration<double>(Clock::now() - started).count();
        std::printf("[%7.2f s] %-18s %lld/%lld\n", t, vireo::pipelines::phaseName(p.phase), static_cast<long long>(p.done),
            static_cast<long long>(p.total));
        std::fflush(stdout);
    };
    nlohmann::json runs = nlohmann::json::array();
    std::vector<double> runSeconds;  // each generate() call, wall clock
    auto timedGenerate = [&] {
        const auto t0 = Clock::now();
        auto r = pipeline->generate(req, progress, stop.get_token());
        runSeconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        return r;
    };
    auto result = timedGenerate();
    for (int r = 1; r < repeat && result; ++r) {
        runs.push_back(result->secondsPerPhase);
        result = timedGenerate();
    }
    if (!result) {
        ::sigaction(SIGINT, &previous, nullptr);
        g_stop = nullptr;
        if (result.error().code == vireo::ErrorCode::Cancelled) {
            std::fprintf(stderr, "vireo-cli: cancelled; nothing was written\n");
            return 130;
        }
        std::fprintf(stderr, "vireo-cli: %s\n", result.error().message.c_str());
        return 1;
    }
    ::sigaction(SIGINT, &previous, nullptr);
    g_stop = nullptr;

    nlohmann::json sigmas = result->sigmas;
    nlohmann::json recipe = {{"app", "vireo-studio " VIREO_VERSION}, {"pipeline", "ltx2"}, {"model_version", pipeline->version()},
        {"files", describeFiles(pipeline->files())}, {"prompt", req.prompt}, {"negative_prompt", req.negativePrompt},
        {"seed", req.seed}, {"schedule", req.schedule == vireo::pipelines::Ltx2Schedule::Dev ? "dev" : "distilled"},
        {"steps", static_cast<int>(result->sigmas.size()) - 1}, {"sigmas", sigmas}, {"width", req.width}, {"height", req.height},
        {"frames", req.frames}, {"fps", req.fps}, {"guidance_scale", req.guidanceScale}, {"audio_guidance_scale", req.audioGuidanceScale},
        {"guidance_rescale", req.guidanceRescale}, {"dtype", std::string(c10::toString(options.dtype))}};
    const auto recipeText = recipe.dump();
    vireo::media::VideoStreamSpec video;
    video.width = static_cast<int>(result->frames.size(2));
    video.height = static_cast<int>(result->frames.size(1));
    video.fps = req.fps;
    vireo::media::AudioStreamSpec audio;
    audio.sampleRate = result->sampleRate;
    audio.channels = static_cast<int>(result->waveform.size(0));
    const double muxStart = std::chrono::duration<double>(Clock::now() - started).count();
    if (!asJson)
        std::printf("[%7.2f s] %-18s\n", muxStart, "mux");
    auto writer = vireo::media::Mp4Writer::open(out, video, audio, {{"comment", recipeText}, {"vireo_recipe", recipeText},
        {"title", req.prompt.substr(0, 200)}, {"encoder", "vireo-studio " VIREO_VERSION}});
    if (!writer) {
        std::fprintf(stderr, "vireo-cli: %s\n", writer.error().message.c_str());
        return 1;
    }
    const auto frames = result->frames.contiguous();
    for (std::int64_t f = 0; f < frames.size(0); ++f) {
        const auto frame = frames[f].contiguous();
        if (auto r = (*writer)->writeFrame(frame.data_ptr<std::uint8_t>(), video.width * 3); !r) {
            std::fprintf(stderr, "vireo-cli: %s\n", r.error().message.c_str());
            return 1;
        }
    }
    const auto wave = result->waveform.to(at::kFloat).contiguous();
    std::vector<const float*> planes;
    for (std::int64_t c = 0; c < wave.size(0); ++c)
        planes.push_back(wave[c].data_ptr<float>());
    if (auto r = (*writer)->writeAudio(planes.data(), wave.size(1)); !r) {
        std::fprintf(stderr, "vireo-cli: %s\n", r.error().message.c_str());
        return 1;
    }
    if (auto r = (*writer)->finish(); !r) {
        std::fprintf(stderr, "vireo-cli: %s\n", r.error().message.c_str());
        return 1;
    }
    const double total = std::chrono::duration<double>(Clock::now() - started).count();
    if (asJson) {
        nlohmann::json phases = result->secondsPerPhase;
        phases["mux"] = total - muxStart;
        runs.push_back(phases);
        const auto bytes = pipeline->componentBytes();
        std::printf("%s\n", nlohmann::json{{"out", out}, {"seconds", total}, {"run_seconds", runSeconds}, {"phases", phases}, {"runs", runs},
                                 {"component_bytes", bytes},
                                 {"frames", frames.size(0)}, {"sample_rate", result->sampleRate}}.dump().c_str());
        return 0;
    }
    std::printf("[%7.2f s] wrote %s (%lld frames, %.3f s of audio at %d Hz)\n", total, out.c_str(), static_cast<long long>(frames.size(0)),
        static_cast<double>(wave.size(1)) / result->sampleRate, result->sampleRate);
    return 0;
}
