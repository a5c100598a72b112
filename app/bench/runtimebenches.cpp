// The benchmarks of the studio's runtime and window (core/): the engine's overhead over the
// pipeline, the speed modes, the window's cold start.
#include "app/bench/benchcommands.h"

#include "app/cli/args.h"
#include "core/runtime/engine.h"
#include "core/util/logging.h"
#include "inference/facade/generator.h"

#include <QCoreApplication>
#include <QEventLoop>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace {

// WxHxF, WxH or W (a square of the current frame count); false when any part is no number in
// range, leaving the values as they were.
bool parseClipSize(const std::string& v, std::int64_t& width, std::int64_t& height, std::int64_t& frames)
{
    using vireo::cli::parseNumber;
    const auto x1 = v.find('x'), x2 = x1 == std::string::npos ? std::string::npos : v.find('x', x1 + 1);
    auto w = parseNumber<std::int64_t>(v.substr(0, x1), 32, 4096);
    auto h = x1 == std::string::npos ? w : parseNumber<std::int64_t>(v.substr(x1 + 1, x2 - x1 - 1), 32, 4096);
    auto f = x2 == std::string::npos ? vireo::Result<std::int64_t>(frames) : parseNumber<std::int64_t>(v.substr(x2 + 1), 1, 1025);
    if (!w || !h || !f)
        return false;
    width = *w, height = *h, frames = *f;
    return true;
}

}  // namespace

int runBenchRuntime(const std::vector<std::string>& args)
{
    using vireo::cli::parseNumber;
    std::vector<std::filesystem::path> models;
    std::int64_t width = 256, height = 256, frames = 33;
    int repeat = 5;
    bool asJson = false;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const auto& a = args[i];
        if (a == "--json") {
            asJson = true;
            continue;
        }
        if (i + 1 >= args.size())
            return usageError("bench runtime: " + a + " needs a value");
        const auto& v = args[++i];
        if (a == "--model")
            models.emplace_back(v);
        else if (a == "--size") {
            if (!parseClipSize(v, width, height, frames))
                return usageError("bench runtime: --size is WxHxF, e.g. 256x256x33");
        } else if (a == "--repeat") {
            auto n = parseNumber<int>(v, 2, 100);
            if (!n)
                return usageError("bench runtime: --repeat " + n.error().message);
            repeat = *n;
        } else
            return usageError("bench runtime: unexpected argument " + a);
    }
    if (models.empty())
        return usageError("bench runtime: --model PATH is required (e.g. the tiny pipeline fixture)");
    int argc = 1;
    char name[] = "vireo-bench";
    char* argv[] = {name, nullptr};
    QCoreApplication app(argc, argv);
    vireo::core::initCommandLineLogging();

    vireo::facade::GenerateRequest req;
    req.prompt = "waves crash on black rocks at dusk, gulls calling";
    req.width = width;
    req.height = height;
    req.frames = frames;
    req.seed = 11;
    vireo::facade::LoadPlan plan;
    plan.modelPaths = models;
    using Clock = std::chrono::steady_clock;
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };

    // Direct: the facade called on this thread, with the same progress and preview work.
    std::vector<double> direct;
    {
        auto memory = vireo::facade::Generator::planMemory(plan, {width, height, frames, false});
        if (!memory) {
            std::fprintf(stderr, "vireo-bench: %s\n", memory.error().message.c_str());
            return 1;
        }
        auto generator = vireo::facade::Generator::load(plan, *memory, {}, {});
        if (!generator) {
            std::fprintf(stderr, "vireo-bench: %s\n", generator.error().message.c_str());
            return 1;
        }
        int reports = 0;
        for (int r = 0; r <= repeat; ++r) {
            const auto t0 = Clock::now();
            auto out = (*generator)->generate(req, [&](const vireo::facade::Progress&) { ++reports; }, {});
            if (!out) {
                std::fprintf(stderr, "vireo-bench: %s\n", out.error().message.c_str());
                return 1;
            }
            if (r > 0)
                direct.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
    }
    // Through the engine: enqueue, run on its thread, report through queued signals, wait.
    std::vector<double> engineTimes;
    {
        vireo::runtime::Engine engine({});
        vireo::runtime::ModelRef model;
        model.key = QStringLiteral("local:bench");
        model.title = QStringLiteral("bench");
        model.plan = plan;
        int progressSignals = 0;
        QObject::connect(&engine, &vireo::runtime::Engine::jobProgress, &app,
            [&](quint64, const QString&, qint64, qint64, double) { ++progressSignals; });
        for (int r = 0; r <= repeat; ++r) {
            vireo::runtime::GenerateJob job;
            job.model = model;
            job.request = req;
            job.writeOutput = false;
            const auto t0 = Clock::now();
            const auto id = engine.enqueueGenerate(job);
            QEventLoop loop;
            QObject::connect(&engine, &vireo::runtime::Engine::jobFinished, &loop, [&](quint64 done) {
                if (done == id)
                    loop.quit();
            });
            loop.exec();
            const auto s = engine.job(id);
            if (!s || s->state != vireo::runtime::JobState::Done) {
                std::fprintf(stderr, "vireo-bench: %s\n", s ? s->error.toUtf8().constData() : "job lost");
                return 1;
            }
            if (r > 0)  // the first includes the load
                engineTimes.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
    }
    const double d = median(direct), e = median(engineTimes);
    if (asJson) {
        std::printf("%s\n",
            nlohmann::json{{"bench", "runtime"}, {"size", {width, height, frames}}, {"repeat", repeat}, {"direct_seconds", direct},
                {"engine_seconds", engineTimes}, {"direct_median", d}, {"engine_median", e}, {"ratio", e / d}, {"goal", 1.02}}
                .dump()
                .c_str());
        return 0;
    }
    std::printf("bench runtime: %lldx%lldx%lld, median of %d warm runs\n", static_cast<long long>(width), static_cast<long long>(height),
        static_cast<long long>(frames), repeat);
    std::printf("  pipeline called directly %8.3f s\n", d);
    std::printf("  through the engine       %8.3f s   (enqueue to finished signal)\n", e);
    std::printf("  ratio                    %8.4f   (goal <= 1.02: %s)\n", e / d, e / d <= 1.02 ? "met" : "NOT met");
    return 0;
}

int runBenchStartup(const std::vector<std::string>& args, const char* self)
{
    std::string window = siblingProgram(self, "vireo");
    int repeat = 5;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--vireo" && i + 1 < args.size())
            window = args[++i];
        else if (args[i] == "--repeat" && i + 1 < args.size())
            repeat = std::clamp(std::atoi(args[++i].c_str()), 1, 50);
        else
            return usageError("bench startup: unexpected argument " + args[i]);
    }
    std::vector<double> seconds;
    for (int r = 0; r < repeat; ++r) {
        const std::string command = "QT_QPA_PLATFORM=${QT_QPA_PLATFORM:-offscreen} \"" + window + "\" --measure-startup 2>/dev/null";
        FILE* p = ::popen(command.c_str(), "r");
        if (!p)
            return fail({vireo::ErrorCode::Io, "bench startup: cannot run " + window});
        char line[256];
        double value = -1;
        while (std::fgets(line, sizeof line, p))
            if (std::sscanf(line, "startup_seconds %lf", &value) == 1)
                break;
        ::pclose(p);
        if (value < 0)
            return fail({vireo::ErrorCode::Internal, "bench startup: " + window + " printed no startup time"});
        seconds.push_back(value);
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf("bench startup: %s to a usable window, median of %d: %.3f s (min %.3f, max %.3f; goal < 1.5 s: %s)\n", window.c_str(),
        repeat, seconds[seconds.size() / 2], seconds.front(), seconds.back(), seconds[seconds.size() / 2] < 1.5 ? "met" : "NOT met");
    return 0;
}

int runBenchSpeed(const std::vector<std::string>& args)
{
    using vireo::cli::parseNumber;
    vireo::facade::LoadPlan plan;
    std::int64_t width = 256, height = 256, frames = 33;
    int repeat = 3;
    bool asJson = false;
    std::string schedule = "distilled";
    for (std::size_t i = 1; i < args.size(); ++i) {
        const auto& a = args[i];
        if (a == "--json") {
            asJson = true;
            continue;
        }
        if (i + 1 >= args.size())
            return usageError("bench speed: " + a + " needs a value");
        const auto& v = args[++i];
        if (a == "--model")
            plan.modelPaths.emplace_back(v);
        else if (a == "--text-encoder")
            plan.textEncoderPath = v;
        else if (a == "--device")
            plan.device = v;
        else if (a == "--schedule") {
            schedule = vireo::cli::lower(v);
            if (schedule != "distilled" && schedule != "dev")
                return usageError("bench speed: --schedule is distilled or dev");
        } else if (a == "--size") {
            if (!parseClipSize(v, width, height, frames) || width % 32 || height % 32 || (frames - 1) % 8)
                return usageError("bench speed: --size is WxHxF with W and H multiples of 32 and F = 8k + 1, e.g. 256x256x33");
        } else if (a == "--repeat") {
            auto n = parseNumber<int>(v, 1, 100);
            if (!n)
                return usageError("bench speed: --repeat " + n.error().message);
            repeat = *n;
        } else
            return usageError("bench speed: unexpected argument " + a);
    }
    if (plan.modelPaths.empty())
        return usageError("bench speed: --model PATH is required (e.g. the tiny pipeline fixture)");
    auto memory = vireo::facade::Generator::planMemory(plan, {width, height, frames, schedule == "dev"});
    if (!memory) {
        std::fprintf(stderr, "vireo-bench: %s\n", memory.error().message.c_str());
        return 1;
    }
    auto generator = vireo::facade::Generator::load(plan, *memory, {}, {});
    if (!generator) {
        std::fprintf(stderr, "vireo-bench: %s\n", generator.error().message.c_str());
        return 1;
    }
    vireo::facade::GenerateRequest req;
    req.prompt = "waves crash on black rocks at dusk, gulls calling";
    req.width = width;
    req.height = height;
    req.frames = frames;
    req.schedule = schedule;
    req.guidance = schedule == "dev" ? 4.0 : 1.0;
    req.audioGuidance = req.guidance;
    req.seed = 11;
    req.previewEvery = 0;

    struct Row {
        std::string mode;
        double denoise = 0, total = 0, psnr = 0;
        int skipped = 0, steps = 0;
    };
    std::vector<Row> rows;
    std::vector<std::uint8_t> reference;
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    using Clock = std::chrono::steady_clock;
    // A warm-up run first: the first generation pays one-time costs none of the modes should.
    if (auto warm = (*generator)->generate(req, {}, {}); !warm) {
        std::fprintf(stderr, "vireo-bench: %s\n", warm.error().message.c_str());
        return 1;
    }
    // Round-robin over the modes, so drift in the machine's speed (another process, clocks)
    // falls on every mode alike.
    const std::vector<vireo::facade::SpeedMode> modes{
        vireo::facade::SpeedMode::Quality, vireo::facade::SpeedMode::Balanced, vireo::facade::SpeedMode::Fast};
    std::vector<std::vector<double>> denoise(modes.size()), total(modes.size());
    for (const auto mode : modes)
        rows.push_back(Row{std::string(vireo::facade::speedModeName(mode))});
    for (int r = 0; r < repeat; ++r) {
        for (std::size_t m = 0; m < modes.size(); ++m) {
            auto& row = rows[m];
            req.speed = row.mode;
            const auto t0 = Clock::now();
            auto out = (*generator)->generate(req, {}, {});
            if (!out) {
                std::fprintf(stderr, "vireo-bench: %s\n", out.error().message.c_str());
                return 1;
            }
            total[m].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
            denoise[m].push_back(out->secondsPerPhase.count("denoise") ? out->secondsPerPhase.at("denoise") : 0.0);
            row.skipped = out->stepsSkipped;
            row.steps = static_cast<int>(out->sigmas.size()) - 1;
            if (m == 0)
                reference = out->rgb;
            if (r == 0) {
                // PSNR of the decoded frames against quality mode, over every pixel of the clip.
                double se = 0;
                const auto n = std::min(reference.size(), out->rgb.size());
                for (std::size_t k = 0; k < n; ++k) {
                    const double d = static_cast<double>(reference[k]) - static_cast<double>(out->rgb[k]);
                    se += d * d;
                }
                const double mse = n ? se / static_cast<double>(n) : 0.0;
                row.psnr = mse > 0 ? 10.0 * std::log10(255.0 * 255.0 / mse) : std::numeric_limits<double>::infinity();
            }
        }
    }
    for (std::size_t m = 0; m < modes.size(); ++m) {
        rows[m].denoise = median(denoise[m]);
        rows[m].total = median(total[m]);
    }
    const double base = rows.front().denoise;
    if (asJson) {
        nlohmann::json modes = nlohmann::json::array();
        for (const auto& r : rows)
            modes.push_back({{"speed", r.mode}, {"denoise_seconds", r.denoise}, {"total_seconds", r.total}, {"steps", r.steps},
                {"steps_skipped", r.skipped}, {"denoise_speedup", r.denoise > 0 ? base / r.denoise : 0.0},
                {"psnr_db_vs_quality", std::isfinite(r.psnr) ? nlohmann::json(r.psnr) : nlohmann::json("inf")}});
        std::printf("%s\n",
            nlohmann::json{{"bench", "speed"}, {"size", {width, height, frames}}, {"schedule", schedule}, {"repeat", repeat},
                {"device", (*generator)->memoryPlan().device}, {"modes", modes}}
                .dump()
                .c_str());
        return 0;
    }
    std::printf("bench speed: %lldx%lldx%lld, %s schedule on %s, median of %d runs after a warm-up\n", static_cast<long long>(width),
        static_cast<long long>(height), static_cast<long long>(frames), schedule.c_str(), (*generator)->memoryPlan().device.c_str(),
        repeat);
    std::printf("  %-9s %11s %9s %8s %10s %18s\n", "speed", "denoise s", "speedup", "steps", "reused", "PSNR vs quality");
    for (const auto& r : rows)
        std::printf("  %-9s %11.3f %8.2fx %8d %10d %15.1f dB\n", r.mode.c_str(), r.denoise, r.denoise > 0 ? base / r.denoise : 0.0, r.steps,
            r.skipped, r.psnr);
    std::printf("  (random or tiny weights say nothing about quality; real checkpoints do)\n");
    return 0;
}
