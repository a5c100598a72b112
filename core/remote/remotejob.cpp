#include "core/remote/remotejob.h"

#include "core/generation/generation.h"
#include "core/output/outputfile.h"
#include "core/runtime/modelresolver.h"
#include "inference/util/text.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace vireo::remote {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

Result<json> apiBodyFor(const generation::Ask& ask, const std::string& modelId)
{
    if (!ask.references.empty())
        return makeError(ErrorCode::Unsupported,
            "reference clips follow an IC-LoRA, a file of this machine, and a host takes only its own LoRAs: run it here, or on the "
            "host itself");
    if (!ask.loras.empty())
        return makeError(ErrorCode::Unsupported,
            "LoRAs are files of this machine, and a host takes only its own: run a job with LoRAs here, or on the host itself");
    json body{{"model", modelId}, {"prompt", ask.prompt}};
    if (!ask.negativePrompt.empty())
        body["negative_prompt"] = ask.negativePrompt;
    if (ask.enhancePrompt)
        body["enhance_prompt"] = true;
    if (ask.width && ask.height)
        body["size"] = std::to_string(*ask.width) + "x" + std::to_string(*ask.height);
    if (ask.frames)
        body["frames"] = *ask.frames == 0 ? json("auto") : json(*ask.frames);
    if (ask.seed)
        body["seed"] = *ask.seed;
    if (ask.fps)
        body["fps"] = *ask.fps;
    if (ask.steps)
        body["steps"] = *ask.steps;
    if (ask.guidance)
        body["guidance"] = *ask.guidance;
    if (ask.audioGuidance)
        body["audio_guidance"] = *ask.audioGuidance;
    if (!ask.schedule.empty())
        body["schedule"] = ask.schedule;
    if (!ask.speed.empty())
        body["speed"] = ask.speed;
    if (!ask.stages.empty())
        body["stages"] = ask.stages;
    for (const auto& [id, value] : ask.knobs)
        body["knobs"][id] = value;
    for (const auto& c : ask.conditions) {
        if (c.clipFrames > 0)
            return makeError(ErrorCode::Unsupported,
                "a clip condition (" + c.path.toStdString() + ") is not sent to hosts (the API takes stills); run it here");
        QFile f(c.path);
        if (!f.open(QIODevice::ReadOnly) || f.size() > (32 << 20))
            return makeError(ErrorCode::Io, c.path.toStdString() + ": cannot be read, or is larger than 32 MiB");
        const auto bytes = f.readAll();
        const bool png = bytes.startsWith("\x89PNG\r\n\x1a\n"), jpeg = bytes.startsWith("\xff\xd8\xff");
        if (!png && !jpeg)
            return makeError(ErrorCode::Unsupported, c.path.toStdString() + ": a host takes PNG or JPEG stills");
        body["conditions"].push_back(
            {{"image", std::string("data:image/") + (png ? "png" : "jpeg") + ";base64," + bytes.toBase64().toStdString()},
                {"frame", c.frame}, {"strength", c.strength}});
    }
    if (ask.audio) {
        // The sound itself, as the API takes it (a data: URL); the host decodes and checks it.
        QFile f(ask.audio->path);
        if (!f.open(QIODevice::ReadOnly) || f.size() > (32 << 20))
            return makeError(ErrorCode::Io, ask.audio->path.toStdString() + ": cannot be read, or is larger than the 32 MiB a host takes");
        body["audio"] = "data:application/octet-stream;base64," + f.readAll().toBase64().toStdString();
    }
    return body;
}

std::string hostModelId(const runtime::ModelChoice& choice)
{
    if (choice.kind == QStringLiteral("catalog"))
        return choice.variantId.toStdString();
    if (choice.kind == QStringLiteral("repo"))
        return choice.key.mid(5).toStdString();
    const auto first = choice.key.mid(6).section(QLatin1Char('|'), 0, 0);
    return "local/" + QFileInfo(first).fileName().toStdString();
}

HostState probeHost(const HostClient& client, const std::atomic<bool>* cancel)
{
    HostState s;
    s.host = client.host();
    auto j = client.getJson("/v1/vireo/host", cancel);
    if (!j) {
        s.error = j.error().message;
        return s;
    }
    try {
        s.version = j->value("version", std::string());
        for (const auto& d : j->value("devices", json::array())) {
            if (!d.is_object())
                continue;
            const auto id = d.value("device", std::string());
            if (id.rfind("cuda", 0) == 0)
                ++s.gpus;
            s.freeBytes = std::max<std::int64_t>(s.freeBytes, d.value("free_bytes", std::int64_t(0)));
            if (s.devices.size() < 64)
                s.devices.push_back(terminalSafe((id + ": " + d.value("name", std::string())).substr(0, 200)));
        }
        for (const auto& m : j->value("models_ready", json::array()))
            if (m.is_string() && s.modelsReady.size() < 1000)
                s.modelsReady.push_back(m.get<std::string>().substr(0, 300));
        s.jobsActive = j->value("jobs_active", 0);
        s.maxQueued = j->value("max_queued_jobs", 0);
        s.reachable = true;
    } catch (const json::exception&) {
        s.error = "host " + s.host.name + " described itself in fields of the wrong type";
    }
    return s;
}

std::optional<std::size_t> pickHost(
    const std::vector<HostState>& hosts, const std::string& model, const std::set<std::string>& skip, std::string* why)
{
    std::optional<std::size_t> best;
    std::string reasons;
    auto reason = [&](const HostState& h, const std::string& text) {
        reasons += (reasons.empty() ? "" : "; ") + h.host.name + ": " + text;
    };
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        const auto& h = hosts[i];
        if (skip.count(h.host.name)) {
            reason(h, "already tried");
            continue;
        }
        if (!h.reachable) {
            reason(h, h.error.empty() ? "unreachable" : h.error);
            continue;
        }
        if (std::find(h.modelsReady.begin(), h.modelsReady.end(), model) == h.modelsReady.end()) {
            reason(h, "the model '" + model + "' is not ready there");
            continue;
        }
        if (h.maxQueued > 0 && h.jobsActive >= h.maxQueued) {
            reason(h, "its queue is full (" + std::to_string(h.jobsActive) + " jobs)");
            continue;
        }
        if (!best || h.jobsActive < hosts[*best].jobsActive
            || (h.jobsActive == hosts[*best].jobsActive && h.freeBytes > hosts[*best].freeBytes))
            best = i;
    }
    if (!best && why)
        *why = hosts.empty() ? "no host is set up (vireo-cli hosts add, or Settings → Hosts)" : reasons;
    return best;
}

QString remotePartialPath(const QString& outputsFolder, const std::string& localId)
{
    return QDir(outputsFolder).filePath(QStringLiteral(".%1.part-remote").arg(QString::fromStdString(localId)));
}

namespace {

// What a job's download is, kept in the outputs folder's hidden ".vireo-remote" so a run after a
// crash resumes only bytes of the same file (the same host, job and digest), and a job already
// brought home is not brought home twice.
QString recordPath(const QString& folder, const std::string& localId)
{
    return QDir(folder).filePath(QStringLiteral(".vireo-remote/%1.json").arg(QString::fromStdString(localId)));
}

json readRecord(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly) || f.size() > (1 << 16))
        return json::object();
    auto j = parseAnswer(f.readAll().toStdString());
    return j.is_object() ? j : json::object();
}

bool writeRecord(const QString& path, const json& record)
{
    QDir().mkpath(QFileInfo(path).absolutePath());
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly))
        return false;
    const auto text = record.dump(1);
    f.write(text.data(), static_cast<qint64>(text.size()));
    return f.commit();
}

// A job given up on goes from its host: one short try (a cancel, a window closing, must not
// wait on a host that is slow or gone).
HostClient::Reply forget(const Host& host, const std::string& jobPath)
{
    HostClient::Options quick;
    quick.connectTimeout = std::chrono::seconds(3);
    quick.requestTimeout = std::chrono::seconds(5);
    return HostClient(host, quick).call("DELETE", jobPath);
}

bool plausibleRemoteId(const std::string& id)
{
    return !id.empty() && id.size() <= 100
        && std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-'; });
}

bool plausibleLocalId(const std::string& id)
{
    return !id.empty() && id.size() <= 80 && id.front() != '.'
        && std::all_of(id.begin(), id.end(), [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-' || c == '.'; });
}

std::string clockTime(std::chrono::system_clock::time_point t)
{
    return QDateTime::fromSecsSinceEpoch(std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count())
        .toString(QStringLiteral("HH:mm:ss"))
        .toStdString();
}

// When a host first stopped answering, so that a pause shorter than the grace is ridden out.
struct Reachability {
    std::optional<Clock::time_point> since;
    std::chrono::system_clock::time_point wallSince;
    std::string lastError;
    void answered() { since.reset(); }
    // True once the host has been silent longer than the grace.
    bool lost(const std::string& error, std::chrono::milliseconds grace)
    {
        lastError = error;
        if (!since) {
            since = Clock::now();
            wallSince = std::chrono::system_clock::now();
        }
        return Clock::now() - *since > grace;
    }
    std::string sentence(const Host& h) const { return "host " + h.name + " unreachable since " + clockTime(wallSince) + ": " + lastError; }
};

enum class AttemptEnd { Done, HostLost, Failed, Cancelled };

struct Attempt {
    AttemptEnd end = AttemptEnd::Failed;
    std::string message;
    std::string remoteId;
    RemoteOutcome outcome;
};

void pause(std::chrono::milliseconds ms, const std::atomic<bool>& cancel)
{
    const auto until = Clock::now() + ms;
    while (!cancel.load() && Clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

class Runner {
public:
    Runner(const RemoteRequest& r, const RemoteEvents& e, const std::atomic<bool>& c, const RemoteOptions& o)
        : req(r), ev(e), cancel(c), opt(o)
    {
    }

    Attempt run(const Host& host, int attempt)
    {
        HostClient client(host, opt.client);
        Attempt a;
        Reachability reach;
        const auto key = req.localId + "#" + std::to_string(attempt);
        // An image goes to the asynchronous jobs route (the OpenAI images route answers only when
        // done); a video to OpenAI's own. The host says which its model makes.
        auto kind = req.kind;
        if (kind.empty())
            kind = modelKind(client, req.body.value("model", std::string()));
        auto payload = req.body;
        if (kind == "image")
            payload["kind"] = "image";
        const auto body = payload.dump();
        const std::string submitPath = kind == "image" ? "/v1/vireo/jobs" : "/v1/videos";
        a.outcome.kind = kind == "image" ? "image" : "video";
        // 1. Submit. The key makes a retry after a lost answer the same job.
        for (;;) {
            if (cancel.load())
                return ended(a, AttemptEnd::Cancelled, "cancelled");
            const auto r = client.call("POST", submitPath, body, {"Idempotency-Key: " + key}, &cancel);
            if (r.answered() && r.status == 200) {
                const auto j = parseAnswer(r.body);
                a.remoteId = j.is_object() && j.value("id", json()).is_string() ? j["id"].get<std::string>() : std::string();
                if (!plausibleRemoteId(a.remoteId))
                    return ended(a, AttemptEnd::Failed, "host " + host.name + " accepted the job but sent no usable job id");
                break;
            }
            if (!r.refused.empty())
                return ended(a, AttemptEnd::Failed, "host " + host.name + ": " + r.refused);
            if (r.answered() && (r.status == 429 || r.status == 503)) {
                note("host " + host.name + " is busy (" + r.message() + "); waiting");
                reach.answered();
                pause(std::chrono::milliseconds(2000), cancel);
                continue;
            }
            if (r.answered() && r.status < 500) {
                // The host understood and said no: a pinned job fails with its words; "any host"
                // tries another only where this host lacks what the job needs.
                const auto code = errorCode(r.body);
                const bool elsewhere = code == "model_not_ready" || code == "model_not_found" || code == "device_unavailable";
                return ended(a, elsewhere ? AttemptEnd::HostLost : AttemptEnd::Failed,
                    "host " + host.name + " refused the job (HTTP " + std::to_string(r.status) + "): " + r.message());
            }
            if (reach.lost(r.answered() ? "HTTP " + std::to_string(r.status) + ": " + r.message() : r.transportError, opt.grace))
                return ended(a, AttemptEnd::HostLost, reach.sentence(host));
            pause(opt.pollInterval, cancel);
        }
        if (ev.submitted)
            ev.submitted(host.name, a.remoteId, attempt);

        // 2. Follow its events until it completes or fails; a dropped stream is re-opened.
        const auto jobPath = "/v1/vireo/jobs/" + a.remoteId;
        std::string finalStatus, finalMessage, finalCode;
        reach.answered();
        while (finalStatus.empty()) {
            if (cancel.load()) {
                forget(host, jobPath);
                return ended(a, AttemptEnd::Cancelled, "cancelled");
            }
            std::string eventsPath = jobPath + "/events";
            if (opt.previewFps > 0)
                eventsPath += "?preview_fps=" + std::to_string(std::clamp(opt.previewFps, 0.1, 30.0));
            const auto r = client.events(
                eventsPath,
                [&](const std::string& name, const std::string& data) {
                    reach.answered();
                    return onEvent(name, data, finalStatus, finalMessage, finalCode);
                },
                &cancel);
            if (!finalStatus.empty() || cancel.load())
                continue;
            if (!r.refused.empty()) {
                forget(host, jobPath);
                return ended(a, AttemptEnd::Failed, "host " + host.name + ": " + r.refused);
            }
            if (r.status == 404)
                return ended(a, AttemptEnd::HostLost, "host " + host.name + " no longer knows the job " + a.remoteId);
            // The stream ended without a verdict: ask for the job, riding out a short outage.
            const auto s = client.call("GET", jobPath, {}, {}, &cancel);
            if (s.answered() && s.status == 200) {
                reach.answered();
                const auto j = parseAnswer(s.body);
                if (j.is_object())
                    readVerdict(j, finalStatus, finalMessage, finalCode);
                continue;
            }
            if (s.answered() && s.status == 404)
                return ended(a, AttemptEnd::HostLost, "host " + host.name + " no longer knows the job " + a.remoteId);
            if (reach.lost(s.answered() ? "HTTP " + std::to_string(s.status) : s.transportError, opt.grace))
                return ended(a, AttemptEnd::HostLost, reach.sentence(host));
            pause(opt.pollInterval, cancel);
        }
        if (finalStatus != "completed") {
            // A host that restarted after a crash reports the job it ran as interrupted.
            const bool hostStopped = finalCode == "interrupted" || finalCode == "requeue_failed";
            return ended(a,
                hostStopped                    ? AttemptEnd::HostLost
                    : finalCode == "cancelled" ? AttemptEnd::Cancelled
                                               : AttemptEnd::Failed,
                "host " + host.name + ": the job " + a.remoteId + " failed: " + finalMessage);
        }

        // 3. What the host made: its size, digest and recipe.
        json details;
        for (;;) {
            const auto d = client.call("GET", jobPath, {}, {}, &cancel);
            if (d.answered() && d.status == 200) {
                details = parseAnswer(d.body);
                break;
            }
            if (cancel.load())
                return ended(a, AttemptEnd::Cancelled, "cancelled");
            if (reach.lost(d.answered() ? "HTTP " + std::to_string(d.status) : d.transportError, opt.grace))
                return ended(a, AttemptEnd::HostLost, reach.sentence(host));
            pause(opt.pollInterval, cancel);
        }
        const auto output = details.is_object() ? details.value("output", json::object()) : json::object();
        const auto sha = output.is_object() && output.value("sha256", json()).is_string() ? output["sha256"].get<std::string>() : "";
        const auto bytes = output.is_object() && output.value("bytes", json()).is_number_integer() ? output["bytes"].get<std::int64_t>()
                                                                                                   : std::int64_t(-1);
        if (sha.size() != 64 || sha.find_first_not_of("0123456789abcdef") != std::string::npos || bytes <= 0
            || bytes > (std::int64_t(1) << 40))
            return ended(a, AttemptEnd::Failed,
                "host " + host.name + " states no SHA-256 for its output (a Vireo server older than this studio?); nothing was downloaded");
        if (details.contains("recipe") && details["recipe"].is_object())
            a.outcome.recipeJson = details["recipe"].dump();

        // 4. Download, resuming the partial file of this very output, and verify.
        return download(client, host, a, jobPath, sha, bytes, reach);
    }

private:
    // "image" or "video" as the host lists the model; empty when it does not say (the submit
    // then names what is wrong).
    std::string modelKind(const HostClient& client, const std::string& model)
    {
        const auto r = client.getJson("/v1/models", &cancel);
        if (!r)
            return {};
        for (const auto& m : r->value("data", json::array()))
            if (m.is_object() && m.value("id", json()) == model && m.value("kind", json()).is_string())
                return m["kind"].get<std::string>();
        return {};
    }

    static std::string errorCode(const std::string& body)
    {
        const auto j = parseAnswer(body);
        if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].value("code", json()).is_string())
            return j["error"]["code"].get<std::string>();
        return {};
    }

    static void readVerdict(const json& j, std::string& status, std::string& message, std::string& code)
    {
        const auto s = j.value("status", json());
        if (!s.is_string() || (s != "completed" && s != "failed"))
            return;
        status = s.get<std::string>();
        if (const auto e = j.find("error"); e != j.end() && e->is_object()) {
            message = e->value("message", json()).is_string() ? terminalSafe((*e)["message"].get<std::string>().substr(0, 2000)) : "";
            code = e->value("code", json()).is_string() ? (*e)["code"].get<std::string>().substr(0, 60) : "";
        }
    }

    bool onEvent(const std::string& name, const std::string& data, std::string& status, std::string& message, std::string& code)
    {
        const auto j = parseAnswer(data);
        if (!j.is_object())
            return true;  // an event we cannot read is skipped, not fatal
        if (name == "progress" && ev.progress) {
            const auto num = [&](const char* k, double fallback) {
                const auto v = j.value(k, json());
                return v.is_number() ? v.get<double>() : fallback;
            };
            ev.progress(terminalSafe(j.value("phase", json()).is_string() ? j["phase"].get<std::string>().substr(0, 40) : ""),
                static_cast<std::int64_t>(num("step", 0)), static_cast<std::int64_t>(num("steps", 0)), num("eta_seconds", -1),
                std::clamp(static_cast<int>(num("progress", 0)), 0, 100));
        } else if (name == "preview" && ev.preview) {
            const auto b64 = j.value("jpeg_base64", json());
            if (b64.is_string()) {
                const auto jpeg = QByteArray::fromBase64(QByteArray::fromStdString(b64.get<std::string>()));
                if (jpeg.startsWith("\xff\xd8\xff"))
                    ev.preview(jpeg, j.value("step", json()).is_number_integer() ? j["step"].get<int>() : 0);
            }
        } else if (name == "completed" || name == "failed" || name == "status") {
            readVerdict(j, status, message, code);
            return status.empty();
        }
        return true;
    }

    Attempt download(const HostClient& client, const Host& host, Attempt& a, const std::string& jobPath, const std::string& sha,
        std::int64_t bytes, Reachability& reach)
    {
        const auto part = remotePartialPath(req.outputsFolder, req.localId);
        const auto record = recordPath(req.outputsFolder, req.localId);
        QDir().mkpath(req.outputsFolder);
        auto rec = readRecord(record);
        // Bytes already held count only if they are of this output (the same digest on the same host).
        const bool same = rec.value("sha256", json()) == sha && rec.value("base_url", json()) == host.baseUrl;
        std::string etag = same && rec.value("etag", json()).is_string() ? rec["etag"].get<std::string>() : std::string();
        rec = json{{"host", host.name}, {"base_url", host.baseUrl}, {"remote_id", a.remoteId}, {"sha256", sha}, {"bytes", bytes},
            {"etag", etag}, {"state", "downloading"}};
        writeRecord(record, rec);
        const int fd = ::open(part.toStdString().c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
            return ended(a, AttemptEnd::Failed, "cannot write " + part.toStdString() + ": " + std::strerror(errno));
        struct Closer {
            int fd;
            ~Closer() { ::close(fd); }
        } closer{fd};
        struct stat st {};
        ::fstat(fd, &st);
        std::int64_t have = same ? static_cast<std::int64_t>(st.st_size) : 0;
        if (have > bytes || !same)
            have = ::ftruncate(fd, 0) == 0 ? 0 : have;
        if (have > 0) {
            a.outcome.resumedFrom = have;
            note("resuming the download of " + host.name + "'s output at byte " + std::to_string(have) + " of " + std::to_string(bytes));
        }
        bool retriedDigest = false;
        for (;;) {
            if (cancel.load()) {
                ::ftruncate(fd, 0);
                return ended(a, AttemptEnd::Cancelled, "cancelled");
            }
            if (have < bytes) {
                const auto f = client.fetch(jobPath + "/content", fd, have, etag, bytes, &cancel, [&](std::int64_t written) {
                    if (ev.downloading)
                        ev.downloading(have + written, bytes);
                });
                // A file of another length than the host stated is not the output it hashed.
                if (f.total >= 0 && f.total != bytes) {
                    ::unlink(part.toStdString().c_str());
                    QFile::remove(record);
                    return ended(a, AttemptEnd::Failed,
                        "host " + host.name + " serves " + std::to_string(f.total) + " bytes for an output it states as "
                            + std::to_string(bytes) + "; nothing was kept");
                }
                if (f.fromStart)
                    have = 0;
                have += f.written;
                if (!f.etag.empty() && f.etag != etag) {
                    etag = f.etag;
                    rec["etag"] = etag;
                    writeRecord(record, rec);
                }
                if (!f.error.empty()) {
                    if (cancel.load())
                        continue;
                    if (f.status == 404 || f.status == 409 || f.status == 416)
                        return ended(a, AttemptEnd::Failed, "host " + host.name + " no longer serves the output: " + f.error);
                    if (f.status > 0 && f.written > 0)
                        reach.answered();
                    if (reach.lost(f.error, opt.grace))
                        return ended(a, AttemptEnd::HostLost,
                            reach.sentence(host) + " (" + std::to_string(have) + " of " + std::to_string(bytes) + " bytes kept in "
                                + part.toStdString() + ")");
                    pause(opt.pollInterval, cancel);
                    continue;
                }
                reach.answered();
                if (have < bytes && f.written == 0)
                    return ended(a, AttemptEnd::Failed,
                        "host " + host.name + " sent none of the " + std::to_string(bytes - have) + " bytes it still owes");
                if (have < bytes)
                    continue;  // the host closed early: ask for the rest
            }
            ::fsync(fd);
            const auto got = output::fileSha256(part.toStdString());
            if (got == sha)
                break;
            if (retriedDigest) {
                // Bytes that twice failed their digest are nobody's output: nothing is kept.
                ::unlink(part.toStdString().c_str());
                QFile::remove(record);
                return ended(a, AttemptEnd::Failed,
                    "the output downloaded from host " + host.name + " twice does not match the SHA-256 the host stated (stated " + sha
                        + ", got " + got + "); nothing was kept");
            }
            note("the download from " + host.name + " does not match its SHA-256; downloading it again from the start");
            retriedDigest = true;
            etag.clear();
            have = ::ftruncate(fd, 0) == 0 ? 0 : have;
        }
        // 5. Into the outputs folder under a fresh name; an existing file is never replaced.
        const auto extension = a.outcome.kind == "image" ? "png" : "mp4";
        for (int tries = 0; tries < 20; ++tries) {
            auto name = req.outputPath.isEmpty()
                ? output::freshOutputPath(req.outputsFolder.toStdString(), req.body.value("prompt", std::string()), extension)
                : Result<std::filesystem::path>(std::filesystem::path(req.outputPath.toStdString()));
            if (!name)
                return ended(a, AttemptEnd::Failed, name.error().message);
            // A hard link cannot replace a file, so a name another writer took meanwhile is safe.
            // A filesystem without hard links (exFAT, some network shares) gets a rename of a name
            // checked free a moment before: the window for a race is that moment.
            const int linked = ::link(part.toStdString().c_str(), name->c_str());
            const bool noLinks = linked != 0 && (errno == EPERM || errno == EOPNOTSUPP || errno == EMLINK);
            if (noLinks && !QFileInfo::exists(QString::fromStdString(name->string()))
                && ::rename(part.toStdString().c_str(), name->c_str()) == 0) {
                a.outcome.path = QString::fromStdString(name->string());
                break;
            }
            if (linked == 0) {
                ::unlink(part.toStdString().c_str());
                a.outcome.path = QString::fromStdString(name->string());
                break;
            }
            if (!req.outputPath.isEmpty())
                return ended(a, AttemptEnd::Failed,
                    "cannot move the verified download to " + name->string() + ": " + std::strerror(errno) + " (it stays in "
                        + part.toStdString() + ")");
            if (errno != EEXIST)
                return ended(a, AttemptEnd::Failed, "cannot move the download into " + name->string() + ": " + std::strerror(errno));
        }
        if (a.outcome.path.isEmpty())
            return ended(a, AttemptEnd::Failed, "no free name for the output in " + req.outputsFolder.toStdString());
        rec["state"] = "done";
        rec["path"] = a.outcome.path.toStdString();
        writeRecord(record, rec);
        a.outcome.host = host.name;
        a.outcome.remoteId = a.remoteId;
        a.outcome.sha256 = sha;
        a.outcome.bytes = bytes;
        return ended(a, AttemptEnd::Done, {});
    }

    static Attempt ended(Attempt& a, AttemptEnd end, std::string message)
    {
        a.end = end;
        a.message = std::move(message);
        return a;
    }

    void note(const std::string& line) const
    {
        if (ev.note)
            ev.note(line);
    }

    const RemoteRequest& req;
    const RemoteEvents& ev;
    const std::atomic<bool>& cancel;
    const RemoteOptions& opt;
};

}  // namespace

Result<RemoteOutcome> runRemoteJob(const std::vector<Host>& hosts, const RemoteRequest& request, const RemoteEvents& events,
    const std::atomic<bool>& cancel, const RemoteOptions& options)
{
    if (!plausibleLocalId(request.localId))
        return makeError(ErrorCode::InvalidArgument, "a job id is 1 to 80 letters, digits, '.', '_' or '-', not starting with '.'");
    const auto model = request.body.value("model", std::string());
    if (model.empty())
        return makeError(ErrorCode::InvalidArgument, "a remote job names the host's model ('model')");
    // A job brought home before (a rerun after a crash, the same job id) is not brought home twice.
    const auto done = readRecord(recordPath(request.outputsFolder, request.localId));
    if (done.value("state", json()) == "done" && done.value("path", json()).is_string()) {
        const auto path = QString::fromStdString(done["path"].get<std::string>());
        // Only an output of this folder (or the --out asked for now) counts, whatever the record says.
        const bool ours = QFileInfo(path).absolutePath() == QFileInfo(request.outputsFolder + QStringLiteral("/x")).absolutePath()
            || (!request.outputPath.isEmpty() && QFileInfo(path).absoluteFilePath() == QFileInfo(request.outputPath).absoluteFilePath());
        if (ours && QFileInfo(path).isFile() && !QFileInfo(path).isSymLink()
            && output::fileSha256(path.toStdString()) == done.value("sha256", std::string())) {
            RemoteOutcome o;
            o.path = path;
            o.host = done.value("host", std::string());
            o.remoteId = done.value("remote_id", std::string());
            o.sha256 = done.value("sha256", std::string());
            o.bytes = QFileInfo(path).size();
            if (events.note)
                events.note("the job " + request.localId + " was brought home before: " + path.toStdString());
            return o;
        }
    }
    if (!request.outputPath.isEmpty() && QFileInfo::exists(request.outputPath))
        return makeError(ErrorCode::InvalidArgument, request.outputPath.toStdString() + " exists; an output never replaces a file");
    const bool any = request.target == "any";
    std::vector<Host> pinned;
    if (!any) {
        for (const auto& h : hosts)
            if (h.name == request.target)
                pinned.push_back(h);
        if (pinned.empty()) {
            std::string names;
            for (const auto& h : hosts)
                names += (names.empty() ? "" : ", ") + h.name;
            return makeError(ErrorCode::NotFound,
                "no host is named '" + terminalSafe(request.target.substr(0, 100)) + "' ("
                    + (names.empty() ? "none is set up" : "the hosts: " + names) + ")");
        }
    }
    Runner runner(request, events, cancel, options);
    std::set<std::string> tried;
    std::vector<std::pair<Host, std::string>> losers;
    std::string failures;
    for (int attempt = 1;; ++attempt) {
        if (cancel.load())
            return makeError(ErrorCode::Cancelled, "cancelled");
        Host host;
        if (any) {
            std::vector<HostState> states;
            for (const auto& h : hosts) {
                if (tried.count(h.name)) {
                    HostState skipped;
                    skipped.host = h;
                    states.push_back(std::move(skipped));
                } else {
                    states.push_back(probeHost(HostClient(h, options.client), &cancel));
                }
            }
            std::string why;
            const auto pick = pickHost(states, model, tried, &why);
            if (!pick)
                return makeError(ErrorCode::NotFound, "no host can run the job: " + why + (failures.empty() ? "" : " (" + failures + ")"));
            host = states[*pick].host;
        } else {
            host = pinned.front();
        }
        auto a = runner.run(host, attempt);
        if (a.end == AttemptEnd::Done) {
            auto out = std::move(a.outcome);
            out.attempts = attempt;
            // Every attempt that lost goes from its host (a restarted host lists it failed);
            // the one that won stays: deleting it would trash the host's file.
            for (const auto& [h, id] : losers) {
                const auto r = forget(h, "/v1/vireo/jobs/" + id);
                if (!r.answered() || (r.status != 200 && r.status != 404))
                    out.leftOnHosts.push_back(h.name + " " + id);
            }
            return out;
        }
        if (!a.remoteId.empty())
            losers.emplace_back(host, a.remoteId);
        if (a.end == AttemptEnd::Cancelled) {
            QFile::remove(remotePartialPath(request.outputsFolder, request.localId));
            QFile::remove(recordPath(request.outputsFolder, request.localId));
            return makeError(ErrorCode::Cancelled, a.message);
        }
        if (a.end == AttemptEnd::Failed || !any)
            return makeError(ErrorCode::Io, a.message);
        failures += (failures.empty() ? "" : "; ") + a.message;
        tried.insert(host.name);
        if (events.note)
            events.note(a.message + "; trying another host");
    }
}

}  // namespace vireo::remote
