// vireo-cli generate: a thin client of the studio's runtime (core/runtime/engine.h), the same
// code path the window uses: memory plan, load, generation, recipe, hashing and MP4 writing.
#include "app/cli/generatecommand.h"

#include "app/cli/args.h"
#include "core/catalog/catalog.h"
#include "core/output/recipe.h"
#include "core/runtime/defaults.h"
#include "core/runtime/engine.h"
#include "core/util/logging.h"
#include "inference/util/format.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QTimer>

#include <nlohmann/json.hpp>

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

int usage(const std::string& message)
{
    std::fprintf(stderr, "vireo-cli generate: %s\n"
        "usage: vireo-cli generate --model PATH [--model PATH ...] [--text-encoder GEMMA_FOLDER] --prompt TEXT --out FILE.mp4\n"
        "         [--negative TEXT] [--frames N] [--width W] [--height H] [--fps F] [--steps S] [--seed N]\n"
        "         [--schedule distilled|dev] [--guidance G] [--audio-guidance G] [--rescale R]\n"
        "         [--device cpu|cuda] [--dtype auto|f32|bf16] [--placement auto|all-resident|text-encoder-on-cpu|offload-transformer-blocks]\n"
        "         [--force] [--json] [--repeat N]\n"
        "  Unset sizes, steps and guidance come from the catalog's defaults for the model's family.\n"
        "  --repeat N runs the request N times in one process (timings of warm runs); the video of the last is written\n"
        "  --force runs although the memory plan says the model does not fit\n", message.c_str());
    return 2;
}

std::string versionOf(const std::vector<std::filesystem::path>& paths)
{
    // Cheap: the memory plan reads headers only and says the version.
    vireo::facade::LoadPlan p;
    p.modelPaths = paths;
    auto plan = vireo::facade::Generator::planMemory(p, {64, 64, 9, false}, vireo::facade::MemoryBudget{0, 0, 1ll << 50});
    return plan ? plan->version : std::string();
}

} // namespace

int runGenerate(const std::vector<std::string>& args)
{
    using vireo::cli::parseNumber;
    vireo::facade::LoadPlan load;
    vireo::facade::GenerateRequest req;
    std::string out, schedule;
    std::optional<std::int64_t> width, height, frames, seed;
    std::optional<double> fps, guidance, audioGuidance, rescale;
    std::optional<int> steps;
    bool asJson = false, force = false;
    int repeat = 1;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& a = args[i];
        if (a == "--json") {
            asJson = true;
            continue;
        }
        if (a == "--force") {
            force = true;
            continue;
        }
        if (i + 1 >= args.size())
            return usage("option " + a + " needs a value");
        const auto& v = args[++i];
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
        if (a == "--model")
            load.modelPaths.emplace_back(v);
        else if (a == "--text-encoder")
            load.textEncoderPath = v;
        else if (a == "--prompt")
            req.prompt = v;
        else if (a == "--negative")
            req.negativePrompt = v;
        else if (a == "--out")
            out = v;
        else if (a == "--frames")
            frames = integer(1, 1025);
        else if (a == "--width")
            width = integer(32, 8192);
        else if (a == "--height")
            height = integer(32, 8192);
        else if (a == "--fps")
            fps = real(0.5, 240);
        else if (a == "--steps") {
            if (auto n = integer(1, 1000))
                steps = static_cast<int>(*n);
        } else if (a == "--seed")
            seed = integer(0, (1ll << 53));
        else if (a == "--guidance")
            guidance = real(0, 100);
        else if (a == "--audio-guidance")
            audioGuidance = real(0, 100);
        else if (a == "--rescale")
            rescale = real(0, 1);
        else if (a == "--repeat") {
            if (auto n = integer(1, 1000))
                repeat = static_cast<int>(*n);
        } else if (a == "--schedule") {
            const auto s = vireo::cli::lower(v);
            if (s != "distilled" && s != "dev")
                return usage("--schedule is distilled or dev");
            schedule = s;
        } else if (a == "--device")
            load.device = v;
        else if (a == "--dtype")
            load.dtype = v;
        else if (a == "--placement") {
            auto p = vireo::facade::parsePlacement(v);
            if (!p)
                return usage("--placement is auto, all-resident, text-encoder-on-cpu or offload-transformer-blocks");
            load.placement = *p;
        } else
            return usage("unexpected argument " + a);
        if (!error.empty())
            return usage(error);
    }
    if (load.modelPaths.empty() || req.prompt.empty() || out.empty())
        return usage("--model, --prompt and --out are required");
    // Everything that can be checked is checked before a byte of weights is read.
    req.prompt = vireo::output::sanitizedText(req.prompt);
    req.negativePrompt = vireo::output::sanitizedText(req.negativePrompt);
    if (req.prompt.find_first_not_of(" \t\n") == std::string::npos)
        return usage("--prompt is empty");
    struct stat st {};
    if (::lstat(out.c_str(), &st) == 0) {
        std::fprintf(stderr, "vireo-cli: %s exists; choose another name (outputs are never overwritten)\n", out.c_str());
        return 1;
    }
    const auto folder = std::filesystem::path(out).parent_path().empty() ? std::filesystem::path(".") : std::filesystem::path(out).parent_path();
    if (::stat(folder.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        std::fprintf(stderr, "vireo-cli: %s: the output folder does not exist\n", folder.c_str());
        return 1;
    }
    if (::access(folder.c_str(), W_OK) != 0) {
        std::fprintf(stderr, "vireo-cli: %s: the output folder is not writable\n", folder.c_str());
        return 1;
    }
    for (const auto& p : load.modelPaths)
        if (::stat(p.c_str(), &st) != 0) {
            std::fprintf(stderr, "vireo-cli: %s: no such file or folder\n", p.c_str());
            return 1;
        }

    int argc = 1;
    char name[] = "vireo-cli";
    char* argv[] = {name, nullptr};
    QCoreApplication app(argc, argv);
    vireo::core::initCommandLineLogging();

    // Unset values from the catalog's defaults for the model's family.
    auto catalog = vireo::catalog::Catalog::loadBuiltin();
    if (!catalog) {
        std::fprintf(stderr, "vireo-cli: the built-in catalog is damaged: %s\n", catalog.error().message.c_str());
        return 1;
    }
    if (schedule.empty())
        schedule = (guidance && *guidance > 1) || (steps && *steps != 8) ? "dev" : "distilled";
    auto defaults = vireo::runtime::defaultsForVersion(*catalog, versionOf(load.modelPaths), schedule);
    if (!defaults) {
        std::fprintf(stderr, "vireo-cli: %s\n", defaults.error().message.c_str());
        return 1;
    }
    auto base = vireo::runtime::requestFrom(*defaults);
    base.prompt = req.prompt;
    base.negativePrompt = req.negativePrompt;
    base.schedule = schedule;
    base.width = width.value_or(base.width);
    base.height = height.value_or(base.height);
    base.frames = frames.value_or(base.frames);
    base.fps = fps.value_or(base.fps);
    base.steps = steps.value_or(schedule == "distilled" ? 8 : base.steps);
    base.guidance = guidance.value_or(base.guidance);
    base.audioGuidance = audioGuidance.value_or(guidance.value_or(base.audioGuidance));
    base.guidanceRescale = rescale.value_or(guidance ? 0.0 : base.guidanceRescale);
    base.seed = seed.value_or(defaults->randomSeed ? static_cast<std::int64_t>(std::random_device{}() & 0x7fffffff) : defaults->seed);
    base.previewEvery = 0;
    if (base.width % 32 || base.height % 32)
        return usage("--width and --height must be multiples of 32");
    if ((base.frames - 1) % 8)
        return usage("--frames must be 8k + 1 (1, 9, 17, ..., 121)");
    if (!asJson)
        for (const auto& note : defaults->notApplied)
            std::fprintf(stderr, "vireo-cli: note: %s\n", note.c_str());

    vireo::runtime::Engine::Options options;
    options.device = QString::fromStdString(load.device);
    options.appName = QStringLiteral("vireo-studio " VIREO_VERSION);
    vireo::runtime::Engine engine(options);
    vireo::runtime::ModelRef model;
    QStringList paths;
    for (const auto& p : load.modelPaths)
        paths << QString::fromStdString(p.string());
    model.key = QStringLiteral("local:") + paths.join(QLatin1Char('|'));
    model.title = QFileInfo(paths.first()).fileName();
    model.plan = load;

    using Clock = std::chrono::steady_clock;
    const auto started = Clock::now();
    std::vector<quint64> ids;
    for (int r = 0; r < repeat; ++r) {
        vireo::runtime::GenerateJob job;
        job.model = model;
        job.request = base;
        job.forcePlacement = force;
        job.writeOutput = r + 1 == repeat;
        if (job.writeOutput)
            job.outputPath = QString::fromStdString(out);
        ids.push_back(engine.enqueueGenerate(job));
    }
    if (!asJson)
        std::printf("%s, %lldx%lld, %lld frames at %g fps, seed %lld\n", model.title.toUtf8().constData(), static_cast<long long>(base.width),
            static_cast<long long>(base.height), static_cast<long long>(base.frames), base.fps, static_cast<long long>(base.seed));
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
    QObject::connect(&engine, &vireo::runtime::Engine::jobProgress, &app,
        [&](quint64, const QString& phase, qint64 done, qint64 total, double) {
            if (asJson)
                return;
            // One line per change of phase or count (a phase's last report may repeat).
            const QString key = phase + QString::number(done) + QLatin1Char('/') + QString::number(total);
            if (key == lastLine)
                return;
            lastLine = key;
            const double t = std::chrono::duration<double>(Clock::now() - started).count();
            std::printf("[%7.2f s] %-18s %lld/%lld\n", t, phase.toUtf8().constData(), static_cast<long long>(done), static_cast<long long>(total));
            std::fflush(stdout);
        });
    int finished = 0;
    QObject::connect(&engine, &vireo::runtime::Engine::jobFinished, &app, [&](quint64) {
        if (++finished == static_cast<int>(ids.size()))
            app.quit();
    });
    app.exec();
    ::sigaction(SIGINT, &previous, nullptr);

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
    const double total = std::chrono::duration<double>(Clock::now() - started).count();
    if (asJson) {
        nlohmann::json phases = last->recipe.secondsPerPhase;
        phases["mux"] = last->writeSeconds;
        runs.back() = phases;
        const auto resident = engine.resident();
        std::printf("%s\n", nlohmann::json{{"out", out}, {"seconds", total}, {"run_seconds", runSeconds}, {"phases", phases}, {"runs", runs},
            {"component_bytes", resident ? resident->bytes : std::map<std::string, std::int64_t>{}}, {"frames", last->recipe.frames},
            {"seed", base.seed}, {"load_seconds", engine.job(ids.front())->loadSeconds}}
                                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                .c_str());
        return 0;
    }
    std::printf("[%7.2f s] wrote %s (%lld frames)\n", total, out.c_str(), static_cast<long long>(last->recipe.frames));
    return 0;
}
