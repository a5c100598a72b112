// vireo-cli hosts and generate --host: the client side of other machines' Vireo servers
// (core/remote), speaking only their public HTTP API.
#include "app/cli/remotecommand.h"

#include "app/cli/args.h"
#include "app/cli/headless.h"
#include "core/gallery/gallery.h"
#include "core/generation/generation.h"
#include "core/output/recipe.h"
#include "core/remote/remotejob.h"
#include "core/settings/studiosettings.h"
#include "core/studio/studio.h"
#include "core/util/logging.h"
#include "inference/util/format.h"
#include "inference/util/text.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRandomGenerator>

#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

namespace {

using nlohmann::json;

std::atomic<bool> g_cancel{false};

extern "C" void onRemoteInterrupt(int)
{
    g_cancel = true;
}

int usageError(const std::string& command, const std::string& message, const std::string& help)
{
    std::fprintf(stderr, "vireo-cli %s: %s\n%s", command.c_str(), vireo::terminalSafe(message).c_str(), help.c_str());
    return 2;
}

std::vector<vireo::remote::Host> configuredHosts(const vireo::core::StudioSettings& settings)
{
    std::vector<vireo::remote::Host> hosts;
    for (const auto& h : settings.remoteHosts())
        hosts.push_back({h.name.toStdString(), h.url.toStdString(), h.token.toStdString()});
    return hosts;
}

json stateJson(const vireo::remote::HostState& s)
{
    return {{"name", s.host.name}, {"url", s.host.baseUrl}, {"reachable", s.reachable}, {"error", s.error}, {"version", s.version},
        {"gpus", s.gpus}, {"devices", s.devices}, {"free_bytes", s.freeBytes}, {"models_ready", s.modelsReady},
        {"jobs_active", s.jobsActive}, {"max_queued_jobs", s.maxQueued}, {"token", !s.host.token.empty()}};
}

}  // namespace

std::string hostsHelp()
{
    return "usage: vireo-cli hosts list [--json]\n"
           "       vireo-cli hosts add NAME ADDRESS [--token-file FILE]\n"
           "       vireo-cli hosts remove NAME\n"
           "  Other machines running `vireo-cli serve` (or the studio with its API on), used by\n"
           "  `vireo-cli generate --host NAME|any` and the window's \"Run on\" box. ADDRESS is\n"
           "  http(s)://HOST:PORT; the token (the server's api-token file) is kept in a file only you can read.\n"
           "  list asks each host for its GPUs, the models ready there and its queue.\n";
}

int runHosts(const std::vector<std::string>& args)
{
    const auto help = hostsHelp();
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::fputs(help.c_str(), args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    vireo::core::StudioSettings settings;
    const auto& verb = args[0];
    if (verb == "add") {
        if (args.size() != 3 && !(args.size() == 5 && args[3] == "--token-file"))
            return usageError("hosts", "add takes NAME ADDRESS [--token-file FILE]", help);
        const auto url = vireo::remote::normalizeBaseUrl(args[2]);
        if (!url)
            return usageError("hosts", url.error().message, help);
        QString token;
        if (args.size() == 5) {
            if (const auto bad = vireo::cli::notARegularFile(args[4], "token file"); !bad.empty())
                return usageError("hosts", bad, help);
            QFile f(QString::fromStdString(args[4]));
            if (!f.open(QIODevice::ReadOnly) || f.size() > 4096)
                return usageError("hosts", args[4] + ": not a token file (at most 4 KB)", help);
            token = QString::fromUtf8(f.readAll()).trimmed();
        }
        QString error;
        if (!settings.addRemoteHost(QString::fromStdString(args[1]), QString::fromStdString(*url), token, &error))
            return usageError("hosts", error.toStdString(), help);
        std::printf("host %s: %s%s\n", args[1].c_str(), url->c_str(), token.isEmpty() ? "" : " (with a token)");
        return 0;
    }
    if (verb == "remove") {
        if (args.size() != 2)
            return usageError("hosts", "remove takes NAME", help);
        if (!settings.removeRemoteHost(QString::fromStdString(args[1]))) {
            std::fprintf(stderr, "vireo-cli hosts: no host is named '%s'\n", vireo::terminalSafe(args[1].substr(0, 60)).c_str());
            return 1;
        }
        std::printf("removed host %s\n", args[1].c_str());
        return 0;
    }
    if (verb == "list") {
        const bool asJson = args.size() == 2 && args[1] == "--json";
        if (args.size() > 2 || (args.size() == 2 && !asJson))
            return usageError("hosts", "list takes only --json", help);
        const auto hosts = configuredHosts(settings);
        std::vector<vireo::remote::HostState> states(hosts.size());
        std::vector<std::thread> askers;
        for (std::size_t i = 0; i < hosts.size(); ++i)
            askers.emplace_back([&, i] { states[i] = vireo::remote::probeHost(vireo::remote::HostClient(hosts[i])); });
        for (auto& t : askers)
            t.join();
        if (asJson) {
            json out = json::array();
            for (const auto& s : states)
                out.push_back(stateJson(s));
            std::printf("%s\n", json{{"hosts", out}}.dump(2).c_str());
            return 0;
        }
        if (states.empty())
            std::printf("no hosts (vireo-cli hosts add NAME ADDRESS)\n");
        for (const auto& s : states) {
            if (!s.reachable) {
                std::printf("%s  %s  unreachable: %s\n", s.host.name.c_str(), s.host.baseUrl.c_str(), vireo::terminalSafe(s.error).c_str());
                continue;
            }
            std::string models;
            for (const auto& m : s.modelsReady)
                models += (models.empty() ? "" : ", ") + m;
            std::printf("%s  %s  Vireo %s, %d GPU(s), %s free, %d job(s) active; models ready: %s\n", s.host.name.c_str(),
                s.host.baseUrl.c_str(), vireo::terminalSafe(s.version).c_str(), s.gpus, vireo::humanBytes(s.freeBytes).c_str(),
                s.jobsActive, models.empty() ? "none" : vireo::terminalSafe(models).c_str());
        }
        return 0;
    }
    return usageError("hosts", "unknown action '" + verb + "' (list, add, remove)", help);
}

std::string remoteGenerateHelp()
{
    return "usage: vireo-cli generate --host NAME|any --model ID --prompt TEXT [--out FILE.mp4] [--job-id ID]\n"
           "         [--negative TEXT] [--frames N|auto] [--width W] [--height H] [--fps F] [--steps S] [--seed N]\n"
           "         [--schedule distilled|dev] [--guidance G] [--audio-guidance G] [--speed quality|balanced|fast]\n"
           "         [--stages auto|single|two] [--enhance-prompt] [--set KNOB=VALUE ...] [--image FILE [--image-frame N] "
           "[--image-strength S] ...]\n"
           "         [--device auto|cpu|cuda:N] [--grace SECONDS] [--json] [--no-gallery]\n"
           "  Runs a video job on a host (vireo-cli hosts) and brings its MP4 home, checked against the SHA-256\n"
           "  the host states, into the outputs folder (or --out) and the gallery, with the host's recipe.\n"
           "  --model is the host's model id (vireo-cli hosts list); --device is a device of the host.\n"
           "  --host any picks the reachable host with the model ready and the fewest jobs, and moves the job\n"
           "  to another host if that one stops answering for --grace seconds (default 30); a pinned host\n"
           "  that stops answering fails the job, naming it.\n"
           "  --job-id names the job: the same command again after a crash resumes it (the same job on the\n"
           "  host, the download from where it stopped) and a job already brought home is not fetched twice.\n";
}

int runRemoteGenerate(const std::vector<std::string>& args)
{
    const auto help = remoteGenerateHelp();
    // The same ask the window sends a host (remote::apiBodyFor), from the same option names.
    vireo::generation::Ask ask;
    std::string target, model, out, jobId, device;
    bool asJson = false, record = true;
    double grace = 30;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& a = args[i];
        if (a == "--json") {
            asJson = true;
            continue;
        }
        if (a == "--no-gallery") {
            record = false;
            continue;
        }
        if (a == "--enhance-prompt") {
            ask.enhancePrompt = true;
            continue;
        }
        if (i + 1 >= args.size())
            return usageError("generate", a + " needs a value", help);
        const auto& v = args[++i];
        std::string error;
        auto integer = [&](std::int64_t lo, std::int64_t hi) {
            auto n = vireo::cli::parseNumber<std::int64_t>(v, lo, hi);
            if (!n)
                error = a + ": " + n.error().message;
            return n ? *n : 0;
        };
        auto real = [&](double lo, double hi) {
            auto n = vireo::cli::parseNumber<double>(v, lo, hi);
            if (!n)
                error = a + ": " + n.error().message;
            return n ? *n : 0.0;
        };
        if (a == "--host")
            target = v;
        else if (a == "--model")
            model = v;
        else if (a == "--prompt")
            ask.prompt = v;
        else if (a == "--negative")
            ask.negativePrompt = v;
        else if (a == "--frames")
            ask.frames = v == "auto" ? 0 : integer(1, 100000);
        else if (a == "--width")
            ask.width = integer(16, 8192);
        else if (a == "--height")
            ask.height = integer(16, 8192);
        else if (a == "--fps")
            ask.fps = real(1, 120);
        else if (a == "--steps")
            ask.steps = static_cast<int>(integer(1, 200));
        else if (a == "--seed")
            ask.seed = integer(0, std::int64_t(1) << 53);
        else if (a == "--schedule")
            ask.schedule = v;
        else if (a == "--guidance")
            ask.guidance = real(0, 50);
        else if (a == "--audio-guidance")
            ask.audioGuidance = real(0, 50);
        else if (a == "--speed")
            ask.speed = v;
        else if (a == "--stages")
            ask.stages = v;
        else if (a == "--device")
            device = v;
        else if (a == "--set") {
            const auto eq = v.find('=');
            if (eq == std::string::npos || eq == 0)
                return usageError("generate", "--set takes KNOB=VALUE, not '" + v + "'", help);
            auto n = vireo::cli::parseNumber<double>(v.substr(eq + 1), -1e9, 1e9);
            if (!n)
                return usageError("generate", "--set " + v.substr(0, eq) + ": " + n.error().message, help);
            ask.knobs[v.substr(0, eq)] = *n;
        } else if (a == "--image") {
            if (const auto bad = vireo::cli::notARegularFile(v, "image"); !bad.empty())
                return usageError("generate", bad, help);
            vireo::runtime::ConditionFile c;
            c.path = QString::fromStdString(v);
            ask.conditions.push_back(c);
        } else if (a == "--image-frame" || a == "--image-strength") {
            if (ask.conditions.empty())
                return usageError("generate", a + " belongs to an --image given before it", help);
            if (a == "--image-frame")
                ask.conditions.back().frame = integer(0, 100000);
            else
                ask.conditions.back().strength = real(0, 1);
        } else if (a == "--out")
            out = v;
        else if (a == "--job-id")
            jobId = v;
        else if (a == "--grace")
            grace = real(1, 3600);
        else if (a == "--lora" || a == "--clip" || a == "--upsampler" || a == "--distilled-lora" || a == "--temporal-upsampler"
            || a == "--text-encoder" || a == "--prompt-enhancer")
            return usageError("generate",
                a
                    + " is a local file; a host uses its own files (its model's companions; LoRAs are not sent to hosts yet). "
                      "Run it locally, or on the host itself",
                help);
        else
            return usageError("generate", a + " is not an option of generate --host", help);
        if (!error.empty())
            return usageError("generate", error, help);
    }
    if (target.empty() || model.empty() || ask.prompt.empty())
        return usageError("generate", "--host, --model and --prompt are required", help);
    if (ask.width.has_value() != ask.height.has_value())
        return usageError("generate", "--width and --height go together for a host (its size field is WIDTHxHEIGHT)", help);
    auto body = vireo::remote::apiBodyFor(ask, model);
    if (!body)
        return usageError("generate", body.error().message, help);
    if (!device.empty())
        (*body)["device"] = device;
    if (jobId.empty()) {
        // Unique without coordination: the time and 32 random bits.
        jobId = QDateTime::currentDateTimeUtc().toString(QStringLiteral("yyyyMMdd-HHmmss")).toStdString() + "-"
            + QString::number(QRandomGenerator::system()->generate(), 16).toStdString();
    }

    auto headless = vireo::cli::openHeadlessStudio(record);
    if (!headless) {
        std::fprintf(stderr, "vireo-cli: %s\n", headless.error().message.c_str());
        return 1;
    }
    auto* studio = &headless->studio;
    const auto hosts = configuredHosts(*(*studio)->settings());
    vireo::remote::RemoteRequest request;
    request.body = std::move(*body);
    request.localId = jobId;
    request.target = target;
    request.outputsFolder = out.empty() ? (*studio)->settings()->outputsFolder() : QFileInfo(QString::fromStdString(out)).absolutePath();
    if (!out.empty())
        request.outputPath = QFileInfo(QString::fromStdString(out)).absoluteFilePath();
    vireo::remote::RemoteOptions options;
    options.grace = std::chrono::milliseconds(static_cast<std::int64_t>(grace * 1000));
    vireo::remote::RemoteEvents events;
    int lastPercent = -1;
    events.submitted = [&](const std::string& host, const std::string& id, int attempt) {
        if (asJson)
            return;
        std::printf(
            "host: %s, job %s%s\n", host.c_str(), id.c_str(), attempt > 1 ? (" (attempt " + std::to_string(attempt) + ")").c_str() : "");
        std::fflush(stdout);
    };
    events.progress = [&](const std::string& phase, std::int64_t step, std::int64_t steps, double eta, int percent) {
        if (asJson || percent == lastPercent)
            return;
        lastPercent = percent;
        std::printf("progress: %d%% %s %lld/%lld%s\n", percent, phase.c_str(), static_cast<long long>(step), static_cast<long long>(steps),
            eta >= 0 ? (", " + std::to_string(static_cast<int>(eta)) + " s left").c_str() : "");
        std::fflush(stdout);
    };
    events.note = [&](const std::string& line) {
        std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(line).c_str());
        std::fflush(stderr);
    };
    std::signal(SIGINT, onRemoteInterrupt);
    std::signal(SIGTERM, onRemoteInterrupt);
    const auto result = vireo::remote::runRemoteJob(hosts, request, events, g_cancel, options);
    if (!result) {
        std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(result.error().message).c_str());
        return result.error().code == vireo::ErrorCode::Cancelled ? 130 : 1;
    }
    const auto& r = *result;
    std::string galleryNote;
    if (record && (*studio)->gallery()->isOpen()) {
        std::optional<vireo::output::Recipe> recipe;
        if (!r.recipeJson.empty())
            if (auto parsed = vireo::output::Recipe::fromJson(r.recipeJson))
                recipe = std::move(*parsed);
        if (auto added = (*studio)->gallery()->add(r.path, recipe); !added)
            galleryNote = added.error().message;
    } else if (record) {
        galleryNote = (*studio)->galleryError().toStdString();
    }
    if (!galleryNote.empty())
        std::fprintf(stderr, "vireo-cli: warning: %s was brought home but not listed in the gallery: %s\n", qPrintable(r.path),
            vireo::terminalSafe(galleryNote).c_str());
    if (asJson) {
        std::printf("%s\n",
            json{{"path", r.path.toStdString()}, {"host", r.host}, {"remote_id", r.remoteId}, {"sha256", r.sha256}, {"bytes", r.bytes},
                {"attempts", r.attempts}, {"resumed_from", r.resumedFrom}, {"job_id", jobId}, {"left_on_hosts", r.leftOnHosts}}
                .dump(2)
                .c_str());
    } else {
        std::printf("wrote %s (%s, SHA-256 %s) from host %s, job %s\n", qPrintable(r.path), vireo::humanBytes(r.bytes).c_str(),
            r.sha256.substr(0, 16).c_str(), r.host.c_str(), r.remoteId.c_str());
        for (const auto& left : r.leftOnHosts)
            std::printf("note: an earlier attempt is still on host %s (it did not answer its delete)\n", left.c_str());
    }
    return 0;
}
