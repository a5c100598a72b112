// vireo-cli serve: the studio's services without a window, behind the local HTTP API (core/api).
#include "app/cli/servecommand.h"

#include "app/cli/args.h"
#include "core/api/apiservice.h"
#include "core/runtime/modelresolver.h"
#include "core/studio/studio.h"
#include "core/util/logging.h"
#include "inference/util/text.h"

#include <QCoreApplication>
#include <QFileInfo>
#include <QSaveFile>
#include <QTimer>

#include <atomic>
#include <csignal>
#include <cstdio>

namespace {

std::atomic<bool> g_stop{false};

extern "C" void onStopSignal(int)
{
    g_stop = true;
}

constexpr const char* kHelp = R"(usage: vireo-cli serve [options]

Serves the studio's models over an OpenAI-compatible HTTP API (images, videos) and Vireo's own
routes (/v1/vireo/...; GET /v1/vireo/openapi.json lists every route). Ctrl-C stops it; jobs
accepted and not finished run after the next start.

options:
  --listen HOST:PORT     the address (default 127.0.0.1:8765; port 0 picks a free one). Beyond
                         loopback the server needs a token and refuses to start without one
  --token-file FILE      the bearer token file (made, readable only by you, when missing);
                         default when listening beyond loopback: the studio's api-token
  --require-token        ask for the token on loopback too
  --allow-origin URL     let web pages from URL call the API (CORS); repeatable
  --host-name NAME       a Host name to answer besides the address (a reverse proxy's); repeatable
  --model PATH           also serve a local model file or folder; repeatable
  --text-encoder DIR     the text encoder of the --model before it
  --upsampler FILE       the latent upsampler of the --model before it
  --outputs DIR          write outputs here instead of the studio's outputs folder
  --device DEV           cpu, cuda, cuda:N, or auto: each job on the GPU its memory plan fits
                         with the fewest jobs queued (default: the studio's setting); a job's
                         own "device" field (auto, cpu, cuda:N) overrides it
  --max-queue N          jobs queued or running through the API before 429 (default 16)
  --max-connections N    open connections before new ones are closed (default 256)
  --header-timeout S    seconds a client has to send a request's headers, idle time between
                         requests included (default 15)
  --journal FILE         the job journal (default: api-jobs.jsonl in the studio's data folder)
  --port-file FILE       write the port it listens on to FILE once it listens
)";

struct ServeOptions {
    vireo::api::ApiService::Options service;
    QString tokenFile, portFile;
    bool requireToken = false;
    struct LocalModel {
        QString path, textEncoder, upsampler;
    };
    std::vector<LocalModel> models;
};

int usage(const std::string& message)
{
    std::fprintf(stderr, "vireo-cli serve: %s\n\n%s", vireo::terminalSafe(message).c_str(), kHelp);
    return 2;
}

std::optional<int> parse(const std::vector<std::string>& args, ServeOptions& o)
{
    auto& server = o.service.server;
    server.port = 8765;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& a = args[i];
        if (a == "--help" || a == "-h") {
            std::printf("%s", kHelp);
            return 0;
        }
        if (a == "--require-token") {
            o.requireToken = true;
            continue;
        }
        if (i + 1 >= args.size())
            return usage(a + (a.rfind("--", 0) == 0 ? " needs a value" : ": not an option"));
        const std::string& v = args[++i];
        const auto q = QString::fromStdString(v);
        if (a == "--listen") {
            const auto colon = v.rfind(':');
            if (colon == std::string::npos)
                return usage("--listen takes HOST:PORT, not " + v);
            auto port = vireo::cli::parseNumber<int>(std::string_view(v).substr(colon + 1), 0, 65535);
            if (!port)
                return usage("--listen: the port " + port.error().message);
            server.port = static_cast<std::uint16_t>(*port);
            server.host = v.substr(0, colon);
            if (server.host.size() > 2 && server.host.front() == '[' && server.host.back() == ']')
                server.host = server.host.substr(1, server.host.size() - 2);
        } else if (a == "--token-file") {
            o.tokenFile = q;
        } else if (a == "--allow-origin") {
            server.allowedOrigins.push_back(v);
        } else if (a == "--host-name") {
            server.hostNames.push_back(v);
        } else if (a == "--model") {
            o.models.push_back({QFileInfo(q).absoluteFilePath(), {}, {}});
        } else if (a == "--text-encoder" || a == "--upsampler") {
            if (o.models.empty())
                return usage(a + " belongs to a --model given before it");
            (a == "--text-encoder" ? o.models.back().textEncoder : o.models.back().upsampler) = QFileInfo(q).absoluteFilePath();
        } else if (a == "--outputs") {
            o.service.outputsFolder = QFileInfo(q).absoluteFilePath();
        } else if (a == "--device") {
            o.service.device = q;
        } else if (a == "--max-queue") {
            auto n = vireo::cli::parseNumber<int>(v, 1, 10000);
            if (!n)
                return usage("--max-queue: " + n.error().message);
            o.service.maxQueuedJobs = *n;
        } else if (a == "--max-connections") {
            auto n = vireo::cli::parseNumber<int>(v, 1, 100000);
            if (!n)
                return usage("--max-connections: " + n.error().message);
            server.maxConnections = *n;
        } else if (a == "--header-timeout") {
            auto n = vireo::cli::parseNumber<double>(v, 0.1, 3600);
            if (!n)
                return usage("--header-timeout: " + n.error().message);
            server.headerTimeout = std::chrono::milliseconds(static_cast<long long>(*n * 1000));
        } else if (a == "--journal") {
            o.service.journalFile = QFileInfo(q).absoluteFilePath();
        } else if (a == "--port-file") {
            o.portFile = QFileInfo(q).absoluteFilePath();
        } else {
            return usage("unknown option " + a);
        }
    }
    return std::nullopt;
}

}  // namespace

int runServe(const std::vector<std::string>& args)
{
    ServeOptions o;
    if (auto done = parse(args, o))
        return *done;
    for (const auto& m : o.models)
        if (!QFileInfo::exists(m.path)) {
            std::fprintf(stderr, "vireo-cli serve: %s: no such file or folder\n", qPrintable(m.path));
            return 1;
        }
    int argc = 1;
    char name[] = "vireo-cli";
    char* argv[] = {name, nullptr};
    QCoreApplication app(argc, argv);
    vireo::core::initCommandLineLogging(true);

    const bool loopback = vireo::api::ApiServer::isLoopback(o.service.server.host);
    if (!loopback || o.requireToken || !o.tokenFile.isEmpty()) {
        const auto file = o.tokenFile.isEmpty() ? vireo::api::ApiService::defaultTokenFile() : o.tokenFile;
        auto token = vireo::api::ApiService::ensureToken(file);
        if (!token) {
            std::fprintf(stderr, "vireo-cli serve: %s\n", token.error().message.c_str());
            return 1;
        }
        o.service.server.token = *token;
        // Where the token is, never the token: logs and terminals are read by others.
        std::printf("the API asks for the bearer token in %s\n", qPrintable(file));
    }
    for (const auto& m : o.models)
        o.service.extraModels << vireo::runtime::ModelResolver::localKey({m.path}, m.textEncoder, m.upsampler);

    vireo::core::Studio::Options studioOptions;
    studioOptions.headless = true;
    studioOptions.listGallery = true;
    auto studio = vireo::core::Studio::create(studioOptions);
    if (!studio) {
        std::fprintf(stderr, "vireo-cli serve: the built-in catalog is damaged: %s\n", studio.error().message.c_str());
        return 1;
    }
    if (!(*studio)->galleryError().isEmpty())
        std::fprintf(stderr, "vireo-cli serve: warning: the gallery is not open (%s); outputs are still written\n",
            qPrintable((*studio)->galleryError()));
    vireo::api::ApiService service(studio->get(), o.service);
    if (auto started = service.start(); !started) {
        std::fprintf(stderr, "vireo-cli serve: %s\n", started.error().message.c_str());
        return 1;
    }
    const auto url = service.baseUrl();
    if (!o.portFile.isEmpty()) {
        QSaveFile f(o.portFile);
        if (!f.open(QIODevice::WriteOnly) || f.write(url.section(QLatin1Char(':'), -1).toUtf8() + "\n") < 0 || !f.commit()) {
            std::fprintf(stderr, "vireo-cli serve: cannot write %s: %s\n", qPrintable(o.portFile), qPrintable(f.errorString()));
            return 1;
        }
    }
    std::printf("serving the Vireo API on %s (Ctrl-C stops)\n", qPrintable(url));
    std::fflush(stdout);

    struct sigaction action {};
    action.sa_handler = onStopSignal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, nullptr);
    ::sigaction(SIGTERM, &action, nullptr);
    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, &app, [&] {
        if (g_stop.load())
            app.quit();
    });
    poll.start(100);
    app.exec();
    std::printf("stopping: jobs not finished run after the next start\n");
    return 0;
}
