#include "core/api/apiservice.h"

#include "core/api/jobjournal.h"
#include "core/gallery/gallery.h"
#include "core/gallery/gallerystore.h"
#include "core/generation/generation.h"
#include "core/hub/downloadmanager.h"
#include "core/output/outputfile.h"
#include "core/runtime/devicepool.h"
#include "core/runtime/engine.h"
#include "core/runtime/modelresolver.h"
#include "core/settings/studiosettings.h"
#include "core/studio/studio.h"
#include "inference/util/jsonlimits.h"
#include "media/mediareader.h"

#include <QBuffer>
#include <QCoreApplication>
#include <QCache>
#include <QCryptographicHash>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QImageReader>
#include <QPointer>
#include <QRandomGenerator>
#include <QSaveFile>
#include <QStandardPaths>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>

namespace vireo::api {

namespace {

using nlohmann::json;

// A request a route refuses: the status and OpenAI's error fields.
struct ApiError {
    int status = 400;
    std::string message, param, code;
};

[[noreturn]] void refuse(int status, std::string message, std::string param = {}, std::string code = {})
{
    throw ApiError{status, std::move(message), std::move(param), std::move(code)};
}

std::int64_t nowSeconds()
{
    return QDateTime::currentSecsSinceEpoch();
}

std::string randomId(const char* prefix)
{
    const auto a = QRandomGenerator::system()->generate64();
    const auto b = QRandomGenerator::system()->generate();
    return std::string(prefix) + QString::number(a, 16).rightJustified(16, QLatin1Char('0')).toStdString()
        + QString::number(b, 16).rightJustified(8, QLatin1Char('0')).toStdString();
}

// Job ids come from us: anything else (a path, "../x", 10 KB of text) is simply not found.
bool plausibleId(const std::string& id)
{
    if (id.empty() || id.size() > 64)
        return false;
    for (const char c : id)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'))
            return false;
    return true;
}

// The fields of a request body, from JSON or from a multipart form (where every value is text):
// readers take numbers given as text too, as the openai client sends "seconds": "4".
class Fields {
public:
    json values = json::object();
    std::map<std::string, FormPart> files;
    std::set<std::string> used;

    bool has(const std::string& k) const { return values.contains(k) && !values[k].is_null(); }
    std::optional<std::string> text(const std::string& k)
    {
        used.insert(k);
        if (!has(k))
            return std::nullopt;
        if (!values[k].is_string())
            refuse(400, "'" + k + "' must be a string", k);
        return values[k].get<std::string>();
    }
    // JSON true / false, or the words a multipart form sends ("true", "false", "1", "0").
    std::optional<bool> flag(const std::string& k)
    {
        used.insert(k);
        if (!has(k))
            return std::nullopt;
        const auto& v = values[k];
        if (v.is_boolean())
            return v.get<bool>();
        if (v.is_string()) {
            const auto s = QString::fromStdString(v.get<std::string>()).trimmed().toLower();
            if (s == QLatin1String("true") || s == QLatin1String("1"))
                return true;
            if (s == QLatin1String("false") || s == QLatin1String("0"))
                return false;
        }
        refuse(400, "'" + k + "' must be true or false", k);
    }
    std::optional<double> number(const std::string& k, double lo, double hi)
    {
        used.insert(k);
        if (!has(k))
            return std::nullopt;
        const auto& v = values[k];
        double d = 0;
        if (v.is_number()) {
            d = v.get<double>();
        } else if (v.is_string()) {
            const auto s = v.get<std::string>();
            bool ok = false;
            d = QString::fromStdString(s).trimmed().toDouble(&ok);
            if (!ok)
                refuse(400, "'" + k + "' must be a number, not \"" + jsonutil::shortDump(v) + "\"", k);
        } else {
            refuse(400, "'" + k + "' must be a number", k);
        }
        if (!std::isfinite(d) || d < lo || d > hi)
            refuse(
                400, "'" + k + "' must be between " + QString::number(lo).toStdString() + " and " + QString::number(hi).toStdString(), k);
        return d;
    }
    std::optional<std::int64_t> integer(const std::string& k, std::int64_t lo, std::int64_t hi)
    {
        const auto d = number(k, static_cast<double>(lo), static_cast<double>(hi));
        if (!d)
            return std::nullopt;
        if (*d != std::floor(*d))
            refuse(400, "'" + k + "' must be a whole number", k);
        return static_cast<std::int64_t>(*d);
    }
    // A field the route does not take is named, never silently dropped.
    void refuseUnknown(const std::set<std::string>& ignorable)
    {
        for (const auto& [k, v] : values.items())
            if (!used.count(k) && !ignorable.count(k))
                refuse(400, "'" + k + "' is not a parameter this server supports", k, "unsupported_parameter");
        for (const auto& [k, f] : files)
            if (!used.count(k))
                refuse(400, "'" + k + "' is not a file this route takes", k, "unsupported_parameter");
    }
};

Fields readFields(const Request& req)
{
    Fields f;
    const auto type = QString::fromStdString(req.header("content-type")).section(QLatin1Char(';'), 0, 0).trimmed().toLower();
    if (type == QStringLiteral("multipart/form-data")) {
        std::string why;
        auto parts = parseMultipart(req.header("content-type"), req.body, &why);
        if (!parts)
            refuse(400, "the form body could not be read: " + why);
        for (auto& part : *parts) {
            const auto name = part.name;
            if (!part.filename.empty() || name == "input_reference") {
                f.files[name] = std::move(part);
                continue;
            }
            auto value = output::sanitizedText(part.data);
            // The openai client flattens nested extra_body values as qs does: knobs[ID]=V, and a
            // list of LoRAs as loras[][path]=P, loras[][strength]=S, in order.
            if (name.size() > 7 && name.rfind("knobs[", 0) == 0 && name.back() == ']') {
                f.values["knobs"][name.substr(6, name.size() - 7)] = value;
            } else if (name == "loras[][path]") {
                f.values["loras"].push_back(json{{"path", value}});
            } else if (name == "loras[][strength]") {
                auto& loras = f.values["loras"];
                if (!loras.is_array() || loras.empty() || loras.back().contains("strength"))
                    refuse(400, "'loras[][strength]' must follow its 'loras[][path]'", "loras");
                loras.back()["strength"] = value;
            } else if (f.values.contains(name)) {
                refuse(400, "'" + output::truncatedUtf8(name, 60) + "' is given twice", name);
            } else {
                f.values[name] = value;
            }
        }
        return f;
    }
    if (type != QStringLiteral("application/json") && !(type.isEmpty() && req.body.empty()))
        refuse(415,
            "send the body as application/json or multipart/form-data, not "
                + (type.isEmpty() ? std::string("nothing") : type.toStdString()));
    if (req.body.empty())
        refuse(400, "the request has no body; send a JSON object");
    jsonutil::JsonLimits limits;
    limits.maxBytes = 1 << 20;
    limits.maxDepth = 16;
    limits.maxValues = 10000;
    auto parsed = jsonutil::parseUntrusted(req.body, "the request body", limits);
    if (!parsed)
        refuse(400, parsed.error().message);
    if (!parsed->is_object())
        refuse(400, "the request body must be a JSON object");
    f.values = std::move(*parsed);
    return f;
}

struct ServedModel {
    std::string id;
    QString key, title;
    std::string kind;  // "image" | "video"; empty when not known (not ready)
    std::string family;
    bool ready = false;
    std::string missing;
};

}  // namespace

struct ApiService::Impl {
    ApiService* q = nullptr;
    core::Studio* studio = nullptr;
    Options options;
    std::unique_ptr<ApiServer> server;
    std::unique_ptr<JobJournal> journal;
    runtime::Engine* engine = nullptr;  // the default device's: warm-up loads, what is resident
    runtime::DevicePool* pool = nullptr;  // every device's engine: jobs placed by plan or pinned

    // A job's status wherever it runs (ids are unique across engines).
    std::optional<runtime::JobStatus> engineStatus(quint64 id) const
    {
        if (auto s = pool->job(id))
            return s;
        return engine->job(id);
    }

    struct Job {
        std::string id, kind;  // "video" | "image"
        json params;  // what the client asked, normalized (model id, prompt, size, frames, seed, ...)
        std::int64_t createdAt = 0, completedAt = 0;
        std::string status = "queued";
        quint64 engineJob = 0;
        std::string error, errorCode;
        QString outputPath;
        std::string outputSha256;  // hashed once the engine is done, before "completed" is said
        std::int64_t outputBytes = -1;
        std::string recipeJson;
        std::string phase;
        double etaSeconds = -1;
        int progress = 0;
        double loadSeconds = 0, generateSeconds = 0, writeSeconds = 0;  // as the engine measured them
        struct Listener {
            std::shared_ptr<EventStream> stream;
            double previewFps = 0;  // 0: no previews
            std::chrono::steady_clock::time_point lastPreview;
        };
        std::vector<Listener> listeners;
    };
    std::map<std::string, Job> jobs;
    std::vector<std::string> order;  // acceptance order
    std::map<quint64, std::string> byEngineJob;
    // A client that retries a submit after a lost connection (a remote studio) sends the same
    // Idempotency-Key and gets the job it made, not a second one; kept in the journal's params.
    std::map<std::string, std::string> byIdempotencyKey;

    // A synchronous image request waits for its n jobs.
    struct ImageWait {
        std::vector<std::string> jobIds;
        std::string format;  // "b64_json" | "url"
        ApiServer::Reply reply;
        std::int64_t created = 0;
    };
    std::vector<std::shared_ptr<ImageWait>> imageWaits;

    std::vector<ServedModel> modelCache;
    std::chrono::steady_clock::time_point modelCacheTime;
    QCache<QString, QByteArray> thumbnails{16 * 1024 * 1024};
    std::map<std::string, std::jthread> hashers;  // by job id; joined before the service goes

    // --- models -------------------------------------------------------------------------------
    const std::vector<ServedModel>& models()
    {
        const auto now = std::chrono::steady_clock::now();
        if (!modelCache.empty() && now - modelCacheTime < std::chrono::seconds(3))
            return modelCache;
        modelCache.clear();
        modelCacheTime = now;
        const auto& catalog = studio->downloads()->catalog();
        std::set<std::string> taken;
        auto add = [&](const QString& key, const QString& title, bool ready, const QString& missing, std::string id) {
            if (taken.count(id)) {
                int n = 2;
                while (taken.count(id + "-" + std::to_string(n)))
                    ++n;
                id += "-" + std::to_string(n);
            }
            taken.insert(id);
            ServedModel m;
            m.id = id;
            m.key = key;
            m.title = title;
            m.ready = ready;
            m.missing = missing.toStdString();
            if (ready) {
                if (auto ref = studio->models()->resolve(key)) {
                    m.kind = generation::makesImages(catalog, *ref) ? "image" : "video";
                    m.family = generation::rulesFor(catalog, *ref).family;
                } else {
                    m.ready = false;
                    m.missing = ref.error().message;
                }
            }
            modelCache.push_back(std::move(m));
        };
        auto localId = [](const QString& key) {
            const auto first = key.mid(6).section(QLatin1Char('|'), 0, 0);
            return "local/" + QFileInfo(first).fileName().toStdString();
        };
        for (const auto& c : studio->models()->choices()) {
            std::string id = c.kind == QStringLiteral("catalog") ? c.variantId.toStdString()
                : c.kind == QStringLiteral("repo")               ? c.key.mid(5).toStdString()
                                                                 : localId(c.key);
            add(c.key, c.title, c.ready, c.missing, id);
        }
        for (const auto& key : options.extraModels) {
            const auto first = key.mid(6).section(QLatin1Char('|'), 0, 0);
            add(key, QFileInfo(first).fileName(), QFileInfo::exists(first), QStringLiteral("%1 is gone").arg(first), localId(key));
        }
        return modelCache;
    }

    const ServedModel* findModel(const std::string& id)
    {
        for (const auto& m : models())
            if (m.id == id)
                return &m;
        return nullptr;
    }

    // The model a request names, ready and of the kind the route makes.
    const ServedModel& modelFor(Fields& f, const std::string& kind)
    {
        auto id = f.text("model");
        if (!id || id->empty()) {
            std::vector<const ServedModel*> ready;
            for (const auto& m : models())
                if (m.ready && m.kind == kind)
                    ready.push_back(&m);
            if (ready.size() == 1)
                return *ready.front();
            refuse(400,
                ready.empty() ? "no " + kind + " model is ready on this server; download one in Vireo first"
                              : "'model' is required: several " + kind + " models are ready (GET /v1/models lists them)",
                "model");
        }
        const auto* m = findModel(*id);
        if (!m)
            refuse(400, "the model '" + output::truncatedUtf8(*id, 200) + "' is not one this server knows (GET /v1/models lists them)",
                "model", "model_not_found");
        if (!m->ready)
            refuse(409, "the model '" + m->id + "' is not ready: " + m->missing, "model", "model_not_ready");
        if (m->kind != kind)
            refuse(400,
                "the model '" + m->id + "' makes " + (m->kind == "image" ? "images; use /v1/images/generations" : "videos; use /v1/videos"),
                "model");
        return *m;
    }

    // --- jobs ----------------------------------------------------------------------------------
    int activeJobs() const
    {
        int n = 0;
        for (const auto& [_, j] : jobs)
            n += (j.status == "queued" || j.status == "in_progress") ? 1 : 0;
        return n;
    }

    json journalForm(const Job& j) const
    {
        json r{{"id", j.id}, {"kind", j.kind}, {"params", j.params}, {"created_at", j.createdAt}, {"status", j.status}};
        if (j.completedAt)
            r["completed_at"] = j.completedAt;
        if (!j.error.empty())
            r["error"] = {{"message", j.error}, {"code", j.errorCode}};
        if (!j.outputPath.isEmpty())
            r["output"] = j.outputPath.toStdString();
        if (!j.outputSha256.empty())
            r["output_digest"] = {{"sha256", j.outputSha256}, {"bytes", j.outputBytes}};
        return r;
    }

    void persist(const Job& j)
    {
        if (!journal)
            return;
        if (auto w = journal->record(journalForm(j)); !w)
            spdlog::error("api: {}", w.error().message);
    }

    json videoObject(const Job& j) const
    {
        const auto& p = j.params;
        json v{{"id", j.id}, {"object", j.kind == "video" ? "video" : "image"}, {"created_at", j.createdAt},
            {"completed_at", j.completedAt ? json(j.completedAt) : json(nullptr)}, {"expires_at", nullptr}, {"model", p.value("model", "")},
            {"progress", j.progress}, {"prompt", p.value("prompt", "")}, {"seconds", p.value("seconds", "")},
            {"size", std::to_string(p.value("width", 0)) + "x" + std::to_string(p.value("height", 0))}, {"status", j.status},
            {"remixed_from_video_id", nullptr}, {"error", nullptr}, {"seed", p.value("seed", 0)}, {"frames", p.value("frames", 0)},
            {"phase", j.phase}, {"eta_seconds", j.etaSeconds >= 0 ? json(std::round(j.etaSeconds * 10) / 10) : json(nullptr)}};
        if (p.contains("enhanced_prompt"))
            v["enhanced_prompt"] = p["enhanced_prompt"];
        if (!j.error.empty())
            v["error"] = {{"code", j.errorCode}, {"message", j.error}};
        return v;
    }

    // The ask a job's params make (the same fields vireo-cli generate takes).
    generation::Ask askFor(const Job& j) const
    {
        const auto& p = j.params;
        generation::Ask ask;
        ask.prompt = p.value("prompt", "");
        if (p.contains("negative_prompt"))
            ask.negativePrompt = p["negative_prompt"].get<std::string>();
        ask.enhancePrompt = p.value("enhance_prompt", false);
        if (p.contains("width"))
            ask.width = p["width"].get<std::int64_t>();
        if (p.contains("height"))
            ask.height = p["height"].get<std::int64_t>();
        if (p.contains("frames") && j.kind == "video")
            ask.frames = p["frames"].get<std::int64_t>();
        if (p.contains("seed"))
            ask.seed = p["seed"].get<std::int64_t>();
        if (p.contains("fps"))
            ask.fps = p["fps"].get<double>();
        if (p.contains("steps"))
            ask.steps = p["steps"].get<int>();
        if (p.contains("guidance"))
            ask.guidance = p["guidance"].get<double>();
        if (p.contains("speed"))
            ask.speed = p["speed"].get<std::string>();
        if (p.contains("audio"))
            ask.audio = runtime::AudioFile{QString::fromStdString(p["audio"].get<std::string>()), {}};
        if (p.contains("retake_video")) {
            runtime::RetakeFile k;
            k.path = QString::fromStdString(p["retake_video"].get<std::string>());
            k.start = p.value("retake_from", 0.0);
            k.end = p.value("retake_to", 0.0);
            const auto keep = p.value("retake_keep", std::string());
            k.audio = keep != "sound";
            k.video = keep != "video";
            ask.retake = k;
        }
        if (p.contains("reference_video"))
            ask.references.push_back(
                {QString::fromStdString(p["reference_video"].get<std::string>()), p.value("reference_strength", 1.0), {}});
        if (p.contains("reference")) {
            runtime::ConditionFile c;
            c.path = QString::fromStdString(p["reference"].get<std::string>());
            ask.conditions.push_back(c);
        }
        for (const auto& c : p.value("conditions", json::array())) {
            runtime::ConditionFile file;
            file.path = QString::fromStdString(c.value("path", ""));
            file.frame = c.value("frame", std::int64_t(0));
            file.strength = c.value("strength", 1.0);
            ask.conditions.push_back(file);
        }
        for (const auto& l : p.value("loras", json::array()))
            ask.loras.push_back({l.value("path", ""), l.value("strength", 1.0)});
        if (p.contains("schedule"))
            ask.schedule = p["schedule"].get<std::string>();
        if (p.contains("stages"))
            ask.stages = p["stages"].get<std::string>();
        if (p.contains("audio_guidance"))
            ask.audioGuidance = p["audio_guidance"].get<double>();
        if (const auto it = p.find("knobs"); it != p.end() && it->is_object())
            for (const auto& [id, value] : it->items())
                ask.knobs[id] = value.get<double>();
        return ask;
    }

    // Checks the job's ask as the window would and queues it on the engine; an ApiError says why not.
    void enqueue(Job& j)
    {
        const auto* m = findModel(j.params.value("model", ""));
        if (!m || !m->ready)
            refuse(409, "the model '" + j.params.value("model", std::string()) + "' is not ready" + (m ? ": " + m->missing : std::string()),
                "model", "model_not_ready");
        auto ref = studio->models()->resolve(m->key);
        if (!ref)
            refuse(409, ref.error().message, "model", "model_not_ready");
        const auto& catalog = studio->downloads()->catalog();
        const auto ask = askFor(j);
        if (generation::makesImages(catalog, *ref))
            if (const auto extra = generation::notForImages(ask, ref->plan); !extra.empty()) {
                std::string list;
                for (const auto& e : extra)
                    list += (list.empty() ? "" : ", ") + e;
                refuse(400, list + (extra.size() == 1 ? " does" : " do") + " not apply to an image model", extra.front());
            }
        auto defaults = generation::defaultsFor(catalog, *ref, ask);
        if (!defaults)
            refuse(409, defaults.error().message, "model");
        auto prepared = generation::prepare(catalog, *defaults, *ref, ask);
        if (!prepared)
            refuseNamingUploads(prepared.error().message, j.params);
        auto job = prepared->job;
        job.outputFolder = options.outputsFolder.isEmpty() ? studio->settings()->outputsFolder() : options.outputsFolder;
        QDir().mkpath(job.outputFolder);
        // The seed that ran is the job's from now on: a replay after a restart makes the same output.
        j.params["seed"] = job.request.seed;
        j.params["frames"] = job.request.frames;
        // A length the sound or the clip to retake set: known now, from its header.
        const auto lengthFrom = j.params.value("seconds", std::string());
        if ((lengthFrom == "audio" || lengthFrom == "retake") && job.request.frames > 0 && job.request.fps > 0)
            j.params["seconds"] = QString::number(static_cast<double>(job.request.frames) / job.request.fps, 'g', 4).toStdString();
        j.params["width"] = job.request.width;
        j.params["height"] = job.request.height;
        // The job's own device, else the server's: "auto" places it by plan and queue, a device
        // pins it; without either it runs on the default device's engine as before.
        std::string device = j.params.value("device", std::string());
        if (device.empty() && options.device == QStringLiteral("auto"))
            device = "auto";
        if (device.empty()) {
            j.engineJob = engine->enqueueGenerate(job);
        } else {
            auto placed = pool->submit(job, device == "auto" ? QString() : QString::fromStdString(device));
            if (!placed)
                refuse(placed.error().code == ErrorCode::NotFound ? 400 : 409, placed.error().message, "device", "device_unavailable");
            j.engineJob = placed->id;
            j.params["placed_on"] = placed->device.toStdString();
        }
        byEngineJob[j.engineJob] = j.id;
    }

    // Uploaded stills are needed until the job has run: the engine keeps its own copy beside the
    // output for the recipe.
    static void dropUploads(const json& params)
    {
        if (params.contains("reference"))
            QFile::remove(QString::fromStdString(params["reference"].get<std::string>()));
        if (params.contains("audio"))
            QFile::remove(QString::fromStdString(params["audio"].get<std::string>()));
        for (const char* clip : {"reference_video", "retake_video"})
            if (params.contains(clip))
                QFile::remove(QString::fromStdString(params[clip].get<std::string>()));
        for (const auto& c : params.value("conditions", json::array()))
            QFile::remove(QString::fromStdString(c.value("path", "")));
    }

    // A sentence about an uploaded still names the request's field, not the server's file.
    [[noreturn]] static void refuseNamingUploads(std::string message, const json& params)
    {
        std::string param;
        auto name = [&](const std::string& path, const std::string& field) {
            for (auto at = message.find(path); !path.empty() && at != std::string::npos; at = message.find(path)) {
                message.replace(at, path.size(), "'" + field + "'");
                param = param.empty() ? field.substr(0, field.find('[')) : param;
            }
        };
        if (params.contains("reference"))
            name(params["reference"].get<std::string>(), "input_reference");
        if (params.contains("audio"))
            name(params["audio"].get<std::string>(), "audio");
        for (const char* clip : {"reference_video", "retake_video"})
            if (params.contains(clip))
                name(params[clip].get<std::string>(), clip);
        const auto conditions = params.value("conditions", json::array());
        for (std::size_t i = 0; i < conditions.size(); ++i)
            name(conditions[i].value("path", ""), "conditions[" + std::to_string(i) + "]");
        refuse(400, message, param);
    }

    void finishJob(Job& j, const std::string& status, const std::string& error, const std::string& code)
    {
        dropUploads(j.params);
        j.status = status;
        j.error = error;
        j.errorCode = code;
        j.completedAt = nowSeconds();
        if (status == "completed")
            j.progress = 100;
        persist(j);
        std::string event = "event: " + std::string(status == "completed" ? "completed" : "failed")
            + "\ndata: " + videoObject(j).dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
        for (auto& l : j.listeners) {
            l.stream->push(event);
            l.stream->close();
        }
        j.listeners.clear();
        answerImageWaits();
        forgetOldJobs();
        emit q->jobsChanged();
    }

    // A server that runs for months keeps the newest finished jobs (as its journal does at each
    // start); older ones stay in the Gallery, with their files.
    void forgetOldJobs(std::size_t keep = 1000)
    {
        std::size_t finished = 0;
        for (const auto& id : order)
            finished += (jobs.count(id) && (jobs[id].status == "completed" || jobs[id].status == "failed")) ? 1 : 0;
        for (auto it = order.begin(); finished > keep && it != order.end();) {
            const auto j = jobs.find(*it);
            const bool done = j != jobs.end() && (j->second.status == "completed" || j->second.status == "failed");
            const bool waited = std::any_of(imageWaits.begin(), imageWaits.end(),
                [&](const auto& w) { return std::find(w->jobIds.begin(), w->jobIds.end(), *it) != w->jobIds.end(); });
            if (done && !waited) {
                jobs.erase(j);
                it = order.erase(it);
                --finished;
            } else {
                ++it;
            }
        }
    }

    void onEngineJobChanged(quint64 engineId)
    {
        const auto it = byEngineJob.find(engineId);
        if (it == byEngineJob.end())
            return;
        auto& j = jobs[it->second];
        const auto s = engineStatus(engineId);
        if (!s)
            return;
        if (s->state == runtime::JobState::Running && j.status == "queued") {
            j.status = "in_progress";
            persist(j);
            broadcast(j, "status", videoObject(j));
            emit q->jobsChanged();
        }
    }

    void onEngineProgress(quint64 engineId, const QString& phase, qint64 done, qint64 total, double eta)
    {
        const auto it = byEngineJob.find(engineId);
        if (it == byEngineJob.end())
            return;
        auto& j = jobs[it->second];
        j.phase = phase.toStdString();
        j.etaSeconds = eta;
        // Denoising is most of a run: it spans 5..90 %, loading before it, decoding after.
        const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0;
        int p = j.progress;
        if (j.phase == "denoise" || j.phase.rfind("denoise", 0) == 0)
            p = 5 + static_cast<int>(85 * frac);
        else if (j.phase.find("load") != std::string::npos || j.phase.find("encode") != std::string::npos)
            p = std::max(p, static_cast<int>(5 * frac));
        else
            p = std::max(p, 90 + static_cast<int>(9 * frac));
        j.progress = std::clamp(std::max(p, j.progress), 0, 99);
        // `monotonic`: when the studio heard of the step, on the clock Python's time.monotonic()
        // reads on Linux (the benchmark measures the event's latency with it).
        const double monotonic = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
        broadcast(j, "progress",
            json{{"phase", j.phase}, {"step", done}, {"steps", total}, {"progress", j.progress},
                {"eta_seconds", eta >= 0 ? json(eta) : json(nullptr)}, {"monotonic", monotonic}});
    }

    void onEnginePreview(quint64 engineId, const QImage& strip, int step)
    {
        const auto it = byEngineJob.find(engineId);
        if (it == byEngineJob.end())
            return;
        auto& j = jobs[it->second];
        if (j.listeners.empty())
            return;
        QByteArray jpeg;
        const auto now = std::chrono::steady_clock::now();
        for (auto& l : j.listeners) {
            if (l.previewFps <= 0 || now - l.lastPreview < std::chrono::duration<double>(1.0 / l.previewFps))
                continue;
            if (jpeg.isEmpty()) {
                QBuffer buffer(&jpeg);
                buffer.open(QIODevice::WriteOnly);
                strip.save(&buffer, "JPEG", 70);
            }
            l.lastPreview = now;
            l.stream->push("event: preview\ndata: "
                + json{{"step", step}, {"width", strip.width()}, {"height", strip.height()}, {"jpeg_base64", jpeg.toBase64().toStdString()}}
                      .dump()
                + "\n\n");
        }
    }

    void onEngineFinished(quint64 engineId)
    {
        const auto it = byEngineJob.find(engineId);
        if (it == byEngineJob.end())
            return;
        const auto id = it->second;
        byEngineJob.erase(it);
        auto jt = jobs.find(id);
        if (jt == jobs.end())
            return;  // deleted by its client while it ran
        auto& j = jt->second;
        const auto s = engineStatus(engineId);
        if (!s) {
            finishJob(j, "failed", "the engine lost track of the job", "internal");
            return;
        }
        j.loadSeconds = s->loadSeconds;
        j.generateSeconds = s->generateSeconds;
        j.writeSeconds = s->writeSeconds;
        if (s->state == runtime::JobState::Done) {
            j.outputPath = s->outputPath;
            j.recipeJson = s->recipe.toJson();
            if (!s->recipe.enhancedPrompt.empty())
                j.params["enhanced_prompt"] = s->recipe.enhancedPrompt;
            if (j.kind == "video" && j.params.value("frames", std::int64_t(-1)) == 0 && s->recipe.request.fps > 0) {
                // A length left on auto is known now: the video object says what was made.
                const auto& ran = s->recipe.request;
                j.params["frames"] = ran.frames;
                j.params["seconds"] = QString::number(static_cast<double>(ran.frames) / ran.fps, 'g', 4).toStdString();
            }
            digestThenComplete(j);
        } else if (s->state == runtime::JobState::Cancelled) {
            finishJob(j, "failed", "cancelled", "cancelled");
        } else {
            const std::string code = s->errorCode == ErrorCode::OutOfMemory ? "out_of_memory"
                : s->errorCode == ErrorCode::DeviceFault                    ? "device_fault"
                                                                            : "generation_failed";
            finishJob(j, "failed", s->error.toStdString(), code);
        }
    }

    // A client on another machine checks what it downloaded against the output's SHA-256, so a
    // job is "completed" only once that is known. Hashing a large MP4 takes a while: it runs on a
    // thread of its own, never on the studio's (the window's) thread.
    void digestThenComplete(Job& j)
    {
        j.phase = "digest";
        const auto id = j.id;
        const auto path = j.outputPath.toStdString();
        hashers[id] = std::jthread([this, id, path] {
            std::error_code ec;
            const auto bytes = std::filesystem::file_size(path, ec);
            auto sha = output::fileSha256(path);
            QMetaObject::invokeMethod(
                q,
                [this, id, sha = std::move(sha), bytes = ec ? std::int64_t(-1) : static_cast<std::int64_t>(bytes)] {
                    if (auto t = hashers.find(id); t != hashers.end()) {
                        t->second.join();  // its last act was this post
                        hashers.erase(t);
                    }
                    const auto it = jobs.find(id);
                    if (it == jobs.end())
                        return;  // deleted while it was hashed
                    if (sha.empty() || bytes < 0) {
                        finishJob(it->second, "failed", "the output " + it->second.outputPath.toStdString() + " could not be read back",
                            "output_unreadable");
                        return;
                    }
                    it->second.outputSha256 = sha;
                    it->second.outputBytes = bytes;
                    finishJob(it->second, "completed", {}, {});
                },
                Qt::QueuedConnection);
        });
    }

    void broadcast(Job& j, const std::string& event, const json& data)
    {
        if (j.listeners.empty())
            return;
        const auto text = "event: " + event + "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
        std::erase_if(j.listeners, [](const auto& l) { return l.stream->abandoned(); });
        for (auto& l : j.listeners)
            l.stream->push(text);
    }

    void answerImageWaits()
    {
        for (std::size_t w = 0; w < imageWaits.size();) {
            auto& wait = *imageWaits[w];
            bool allDone = true;
            const Job* failed = nullptr;
            for (const auto& id : wait.jobIds) {
                const auto it = jobs.find(id);
                if (it == jobs.end()) {
                    allDone = true;
                    failed = nullptr;
                    break;
                }
                if (it->second.status == "failed")
                    failed = &it->second;
                else if (it->second.status != "completed")
                    allDone = false;
            }
            if (!allDone && !failed) {
                ++w;
                continue;
            }
            if (failed) {
                // One image failing fails the request (its siblings still finish and are listed).
                const int status = failed->errorCode == "out_of_memory" ? 503 : failed->errorCode == "cancelled" ? 409 : 500;
                wait.reply(errorResponse(status, "the image could not be made: " + failed->error, {}, failed->errorCode));
            } else {
                json data = json::array();
                std::string problem;
                for (const auto& id : wait.jobIds) {
                    const auto it = jobs.find(id);
                    if (it == jobs.end()) {
                        problem = "an image of this request was deleted before it was sent";
                        break;
                    }
                    json item{{"revised_prompt", nullptr}};
                    if (wait.format == "url") {
                        item["url"] = server->baseUrl() + "/v1/vireo/jobs/" + id + "/content";
                    } else {
                        QFile file(it->second.outputPath);
                        if (!file.open(QIODevice::ReadOnly)) {
                            problem = "the image " + it->second.outputPath.toStdString()
                                + " could not be read back: " + file.errorString().toStdString();
                            break;
                        }
                        item["b64_json"] = file.readAll().toBase64().toStdString();
                    }
                    item["vireo_id"] = id;
                    item["seed"] = it->second.params.value("seed", 0);
                    data.push_back(item);
                }
                if (!problem.empty())
                    wait.reply(errorResponse(500, problem));
                else
                    wait.reply(jsonResponse(200, json{{"created", wait.created}, {"data", data}, {"output_format", "png"}}));
            }
            imageWaits.erase(imageWaits.begin() + static_cast<std::ptrdiff_t>(w));
        }
    }

    Job& jobOr404(const std::string& id, const std::string& kind = {})
    {
        const auto it = plausibleId(id) ? jobs.find(id) : jobs.end();
        if (it == jobs.end() || (!kind.empty() && it->second.kind != kind))
            refuse(404, "no " + (kind.empty() ? std::string("job") : kind) + " has the id '" + output::truncatedUtf8(id, 80) + "'", {},
                "not_found");
        return it->second;
    }

    // --- routes --------------------------------------------------------------------------------
    Response listModels()
    {
        json data = json::array(), unavailable = json::array();
        for (const auto& m : models()) {
            if (m.ready)
                data.push_back({{"id", m.id}, {"object", "model"}, {"created", 0}, {"owned_by", "vireo"}, {"title", m.title.toStdString()},
                    {"family", m.family}, {"kind", m.kind}, {"ready", true}});
            else
                unavailable.push_back({{"id", m.id}, {"title", m.title.toStdString()}, {"ready", false}, {"missing", m.missing}});
        }
        return jsonResponse(200, json{{"object", "list"}, {"data", data}, {"unavailable", unavailable}});
    }

    // What a client choosing among hosts needs in one request: this server's version, every
    // device with its free memory, the model it holds and its queue, the models ready here, and
    // how many API jobs wait or run (against the server's limit).
    Response hostStatus()
    {
        json devices = json::array();
        for (const auto& d : pool->devices())
            devices.push_back({{"device", d.device}, {"name", d.name}, {"total_bytes", d.totalBytes}, {"free_bytes", d.freeBytes},
                {"resident_model", d.residentModel.empty() ? json(nullptr) : json(d.residentModel)}, {"resident_bytes", d.residentBytes},
                {"queued", d.queued}});
        json ready = json::array();
        for (const auto& m : models())
            if (m.ready)
                ready.push_back(m.id);
        return jsonResponse(200,
            json{{"object", "vireo.host"}, {"version", QCoreApplication::applicationVersion().toStdString()}, {"devices", devices},
                {"models_ready", ready}, {"jobs_active", activeJobs()}, {"max_queued_jobs", options.maxQueuedJobs},
                {"default_device", engine->device().toStdString()},
                {"placement", options.device == QStringLiteral("auto") ? "auto" : "default"}});
    }

    Response getModel(const std::string& id)
    {
        const auto* m = findModel(id);
        if (!m)
            refuse(404, "no model has the id '" + output::truncatedUtf8(id, 200) + "'", {}, "model_not_found");
        return jsonResponse(200,
            json{{"id", m->id}, {"object", "model"}, {"created", 0}, {"owned_by", "vireo"}, {"title", m->title.toStdString()},
                {"family", m->family}, {"kind", m->kind}, {"ready", m->ready}, {"missing", m->missing}});
    }

    // The fields both kinds take: prompt, size, seed and Vireo's own settings.
    json commonParams(Fields& f, const ServedModel& m)
    {
        json p{{"model", m.id}};
        auto prompt = f.text("prompt");
        if (!prompt || output::sanitizedText(*prompt).find_first_not_of(" \t\n") == std::string::npos)
            refuse(400, "'prompt' is required and must not be empty", "prompt");
        if (prompt->size() > 20000)
            refuse(400, "'prompt' is longer than 20,000 bytes", "prompt");
        p["prompt"] = output::sanitizedText(*prompt);
        if (auto size = f.text("size"); size && *size != "auto") {
            const auto parts = QString::fromStdString(*size).toLower().split(QLatin1Char('x'));
            bool okW = false, okH = false;
            const int w = parts.size() == 2 ? parts[0].toInt(&okW) : 0;
            const int h = parts.size() == 2 ? parts[1].toInt(&okH) : 0;
            if (!okW || !okH || w <= 0 || h <= 0 || w > 8192 || h > 8192)
                refuse(400, "'size' must be WIDTHxHEIGHT in pixels (for example 768x512), not '" + output::truncatedUtf8(*size, 40) + "'",
                    "size");
            p["width"] = w;
            p["height"] = h;
        }
        if (auto seed = f.integer("seed", 0, (std::int64_t(1) << 53)))
            p["seed"] = *seed;
        if (auto neg = f.text("negative_prompt"))
            p["negative_prompt"] = output::sanitizedText(*neg);
        if (auto enhance = f.flag("enhance_prompt"))
            p["enhance_prompt"] = *enhance;
        if (auto steps = f.integer("steps", 1, 200))
            p["steps"] = *steps;
        if (auto g = f.number("guidance", 0, 50))
            p["guidance"] = *g;
        if (auto speed = f.text("speed")) {
            if (*speed != "quality" && *speed != "balanced" && *speed != "fast")
                refuse(400, "'speed' must be quality, balanced or fast", "speed");
            p["speed"] = *speed;
        }
        if (auto schedule = f.text("schedule")) {
            if (*schedule != "distilled" && *schedule != "dev")
                refuse(400, "'schedule' must be distilled or dev", "schedule");
            p["schedule"] = *schedule;
        }
        if (auto stages = f.text("stages")) {
            if (*stages != "auto" && *stages != "single" && *stages != "two")
                refuse(400, "'stages' must be auto, single or two", "stages");
            p["stages"] = *stages;
        }
        if (auto g = f.number("audio_guidance", 0, 50))
            p["audio_guidance"] = *g;
        if (auto device = f.text("device")) {
            // "auto" or a device of this box ("cpu", "cuda:1"); the pool says which exist.
            const bool named = *device == "cpu"
                || (device->rfind("cuda:", 0) == 0 && device->size() > 5 && device->size() <= 8
                    && device->find_first_not_of("0123456789", 5) == std::string::npos);
            if (*device != "auto" && !named)
                refuse(400, "'device' must be auto, cpu or cuda:N, not '" + output::truncatedUtf8(*device, 40) + "'", "device");
            p["device"] = *device;
        }
        readKnobs(f, p);
        readLoras(f, p);
        readConditions(f, p);
        return p;
    }

    // The family's own controls by id; prepare() checks each against the family's rules.
    void readKnobs(Fields& f, json& p)
    {
        f.used.insert("knobs");
        if (!f.has("knobs"))
            return;
        const auto& knobs = f.values["knobs"];
        if (!knobs.is_object() || knobs.size() > 32)
            refuse(400, "'knobs' must be an object of at most 32 numbers by the family's knob ids", "knobs");
        Fields inner;
        inner.values = knobs;
        for (const auto& [id, _] : knobs.items())
            p["knobs"][id] = *inner.number(id, -1e9, 1e9);
    }

    // A field that is a list of at most `most` objects, each with the string `key`.
    static const json& objectList(Fields& f, const std::string& name, std::size_t most, const std::string& key, const std::string& shape)
    {
        const auto& list = f.values[name];
        if (!list.is_array() || list.size() > most)
            refuse(400, "'" + name + "' must be a list of at most " + std::to_string(most) + " " + shape + " objects", name);
        for (std::size_t i = 0; i < list.size(); ++i)
            if (!list[i].is_object() || !list[i].contains(key) || !list[i][key].is_string())
                refuse(400, "'" + name + "[" + std::to_string(i) + "]' must be an object with a string \"" + key + "\"", name);
        return list;
    }

    // LoRA files on this machine, by path: a local API's caller is the machine's user (or holds
    // its token), and the file is only read as a LoRA, with every refusal in the recipe.
    void readLoras(Fields& f, json& p)
    {
        f.used.insert("loras");
        if (!f.has("loras"))
            return;
        const auto& loras = objectList(f, "loras", 16, "path", "{\"path\", \"strength\"}");
        for (std::size_t i = 0; i < loras.size(); ++i) {
            const auto field = "loras[" + std::to_string(i) + "]";
            const auto path = loras[i]["path"].get<std::string>();
            const QFileInfo info(QString::fromStdString(path));
            if (path.empty() || !info.isAbsolute() || !info.isFile() || !info.isReadable())
                refuse(400, "'" + field + ".path' is not a readable LoRA file on this machine (give an absolute path)", "loras");
            Fields one;
            one.values = loras[i];
            const double strength = one.number("strength", -100, 100).value_or(1.0);
            p["loras"].push_back({{"path", path}, {"strength", strength}});
        }
    }

    // Stills at output frames (keyframes), each a data: URL in a JSON body; input_reference is
    // the first frame's shorthand.
    void readConditions(Fields& f, json& p)
    {
        f.used.insert("conditions");
        if (!f.has("conditions"))
            return;
        const auto& conditions = objectList(f, "conditions", 8, "image", "{\"image\", \"frame\", \"strength\"}");
        for (std::size_t i = 0; i < conditions.size(); ++i) {
            const auto field = "conditions[" + std::to_string(i) + "]";
            Fields one;
            one.values = conditions[i];
            const auto frame = one.integer("frame", 0, 100000).value_or(0);
            const auto strength = one.number("strength", 0, 1).value_or(1.0);
            const auto path = storeImage(dataUrlBytes(conditions[i]["image"].get<std::string>(), field + ".image"), field + ".image");
            p["conditions"].push_back({{"path", path}, {"frame", frame}, {"strength", strength}});
        }
    }

    // The files, rules and defaults of a served model, read once per request.
    struct Resolved {
        runtime::ModelRef ref;
        facade::FamilyRules rules;
        runtime::GenerationDefaults defaults;
    };
    Resolved resolve(const ServedModel& m)
    {
        auto ref = studio->models()->resolve(m.key);
        if (!ref)
            refuse(409, ref.error().message, "model", "model_not_ready");
        const auto& catalog = studio->downloads()->catalog();
        auto defaults = generation::defaultsFor(catalog, *ref);
        if (!defaults)
            refuse(409, defaults.error().message, "model");
        return {*ref, generation::rulesFor(catalog, *ref), *defaults};
    }

    // The family's size rules, as the window says them, before anything is queued.
    static void checkSize(const Resolved& r, const json& p, const std::string& frameParam, bool lengthFromSound = false)
    {
        const auto w = p.value("width", r.defaults.width), h = p.value("height", r.defaults.height);
        const auto frames = r.rules.frameStep > 0 ? p.value("frames", r.defaults.frames) : std::int64_t(1);
        for (const auto& problem : generation::sizeProblems(r.rules, w, h, frames, lengthFromSound))
            refuse(400, problem, problem.find("frame") != std::string::npos ? frameParam : "size");
    }

    void checkQueue(int adding)
    {
        if (activeJobs() + adding > options.maxQueuedJobs) {
            ApiError e{429, "the queue is full (" + std::to_string(options.maxQueuedJobs) + " jobs); try again later", {}, "queue_full"};
            throw e;
        }
    }

    // RFC 7240 "Prefer: wait=0": the client would rather hear 503 than wait for a model to load.
    bool mustLoadFirst(const Request& req, const runtime::ModelRef& ref)
    {
        const auto prefer = QString::fromStdString(req.header("prefer")).toLower();
        if (!prefer.contains(QStringLiteral("wait=0")))
            return false;
        const auto resident = engine->resident();
        if (resident && resident->model.sameLoadAs(ref))
            return false;
        bool loading = false;
        for (const auto& s : engine->jobs())
            loading = loading
                || (s.kind == runtime::JobKind::Load && (s.state == runtime::JobState::Queued || s.state == runtime::JobState::Running));
        if (!loading)
            engine->enqueueLoad(ref);
        return true;
    }

    Job& accept(const std::string& kind, json params)
    {
        Job j;
        j.id = randomId(kind == "video" ? "video_" : "img_");
        j.kind = kind;
        j.params = std::move(params);
        j.createdAt = nowSeconds();
        const auto id = j.id;
        jobs[id] = std::move(j);
        order.push_back(id);
        auto& job = jobs[id];
        try {
            enqueue(job);
        } catch (...) {
            jobs.erase(id);
            order.pop_back();
            throw;
        }
        persist(job);
        emit q->jobsChanged();
        return job;
    }

    void generateImages(const Request& req, ApiServer::Reply reply)
    {
        auto f = readFields(req);
        const auto& m = modelFor(f, "image");
        auto p = commonParams(f, m);
        const auto n = f.integer("n", 1, 8).value_or(1);
        std::string format = f.text("response_format").value_or("b64_json");
        if (format != "b64_json" && format != "url")
            refuse(400, "'response_format' must be b64_json or url", "response_format");
        if (auto of = f.text("output_format"); of && *of != "png")
            refuse(400, "'output_format' " + output::truncatedUtf8(*of, 20) + " is not made here; images are PNG", "output_format");
        for (const char* k : {"quality", "background", "moderation"})
            if (auto v = f.text(k); v && *v != "auto" && !(std::string(k) == "background" && *v == "opaque"))
                refuse(400, "'" + std::string(k) + "' " + output::truncatedUtf8(*v, 20) + " is not supported; leave it out or use auto", k,
                    "unsupported_parameter");
        if (f.has("stream")) {
            f.used.insert("stream");
            if (f.values["stream"] != false)
                refuse(400, "'stream' is not supported for images; follow a job's progress with /v1/vireo/jobs/{id}/events", "stream",
                    "unsupported_parameter");
        }
        f.text("user");
        f.refuseUnknown({});
        const auto resolved = resolve(m);
        checkSize(resolved, p, "size");
        checkQueue(static_cast<int>(n));
        if (mustLoadFirst(req, resolved.ref)) {
            auto r = errorResponse(503, "the model '" + m.id + "' is loading; try again shortly", {}, "model_loading");
            r.headers.emplace_back("Retry-After", "10");
            reply(r);
            return;
        }
        auto wait = std::make_shared<ImageWait>();
        wait->format = format;
        wait->reply = std::move(reply);
        wait->created = nowSeconds();
        const auto seed = p.contains("seed") ? p["seed"].get<std::int64_t>() : -1;
        for (std::int64_t i = 0; i < n; ++i) {
            auto params = p;
            if (seed >= 0)
                params["seed"] = seed + i;  // n images of one seed would be one image n times
            wait->jobIds.push_back(accept("image", params).id);
        }
        imageWaits.push_back(wait);
        answerImageWaits();
    }

    static QByteArray dataUrlBytes(const std::string& url, const std::string& field)
    {
        const auto text = QString::fromStdString(url);
        if (!text.startsWith(QStringLiteral("data:image/")) || !text.contains(QStringLiteral(";base64,")))
            refuse(400, "'" + field + "' must be a data: URL (data:image/png;base64,...); this server fetches nothing from the network",
                field);
        return QByteArray::fromBase64(text.section(QStringLiteral(";base64,"), 1).toLatin1());
    }

    std::string saveReference(Fields& f)
    {
        f.used.insert("input_reference");
        if (auto it = f.files.find("input_reference"); it != f.files.end())
            return storeImage(QByteArray::fromStdString(it->second.data), "input_reference");
        if (!f.has("input_reference"))
            return {};
        const auto& v = f.values["input_reference"];
        if (v.is_object() && v.contains("file_id"))
            refuse(400, "'input_reference.file_id' needs a files API this server does not have; send the image itself", "input_reference");
        const json* url = v.is_object() && v.contains("image_url") ? &v["image_url"] : (v.is_string() ? &v : nullptr);
        if (!url || !url->is_string())
            refuse(400, "'input_reference' must be an image file or {\"image_url\": \"data:image/png;base64,...\"}", "input_reference");
        return storeImage(dataUrlBytes(url->get<std::string>(), "input_reference"), "input_reference");
    }

    // An upload's bytes in the uploads folder under a fresh name (removed when the request or its
    // job is done); an empty one is a 400 naming its field, a disk that refuses it a 507.
    QString storeUpload(const QByteArray& bytes, const std::string& field, const QString& suffix)
    {
        if (bytes.isEmpty())
            refuse(400, "'" + field + "' is empty", field);
        const auto folder =
            options.uploadsFolder.isEmpty() ? QDir(studio->dataFolder()).filePath(QStringLiteral("api-uploads")) : options.uploadsFolder;
        QDir().mkpath(folder);
        const auto path = QDir(folder).filePath(QString::fromStdString(randomId("upload_")) + suffix);
        QSaveFile file(path);
        requestUploads.push_back(path);
        if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size() || !file.commit())
            refuse(507, "'" + field + "' could not be stored: " + file.errorString().toStdString());
        return path;
    }

    // The sound a video follows: a multipart file "audio", or a data: URL (data:audio/wav;base64,...)
    // in a JSON body; decoded once here, so a file that is not a sound, holds nothing or lasts
    // longer than the studio takes is refused with 400 before it is queued.
    std::string saveAudio(Fields& f)
    {
        f.used.insert("audio");
        QByteArray bytes;
        if (auto it = f.files.find("audio"); it != f.files.end()) {
            bytes = QByteArray::fromStdString(it->second.data);
        } else if (f.has("audio")) {
            const auto& v = f.values["audio"];
            const auto text = v.is_string() ? QString::fromStdString(v.get<std::string>()) : QString();
            if (!text.startsWith(QStringLiteral("data:audio/")) && !text.startsWith(QStringLiteral("data:video/"))
                && !text.startsWith(QStringLiteral("data:application/octet-stream")))
                refuse(400,
                    "'audio' must be a sound file or a data: URL (data:audio/wav;base64,...); this server fetches nothing from the network",
                    "audio");
            if (!text.contains(QStringLiteral(";base64,")))
                refuse(400, "'audio' must be a base64 data: URL", "audio");
            bytes = QByteArray::fromBase64(text.section(QStringLiteral(";base64,"), 1).toLatin1());
        } else {
            return {};
        }
        const auto path = storeUpload(bytes, "audio", QStringLiteral(".audio"));
        if (auto read = media::readAudio(path.toStdString()); !read) {
            auto message = read.error().message;
            for (auto at = message.find(path.toStdString()); at != std::string::npos; at = message.find(path.toStdString()))
                message.replace(at, path.size(), "'audio'");
            refuse(400, message, "audio");
        }
        return path.toStdString();
    }

    // A clip sent with the request (an IC-LoRA's reference, a clip to retake): a multipart file
    // `field`, or a data: URL (data:video/mp4;base64,...) in a JSON body; a file that is not a
    // video is refused with 400 from its header before it is queued (its length, in prepare).
    std::string saveVideoUpload(Fields& f, const std::string& field)
    {
        f.used.insert(field);
        QByteArray bytes;
        if (auto it = f.files.find(field); it != f.files.end()) {
            bytes = QByteArray::fromStdString(it->second.data);
        } else if (f.has(field)) {
            const auto& v = f.values[field];
            const auto text = v.is_string() ? QString::fromStdString(v.get<std::string>()) : QString();
            if (!(text.startsWith(QStringLiteral("data:video/")) || text.startsWith(QStringLiteral("data:application/octet-stream")))
                || !text.contains(QStringLiteral(";base64,")))
                refuse(400,
                    "'" + field
                        + "' must be a video file or a base64 data: URL (data:video/mp4;base64,...); this server fetches nothing from "
                          "the network",
                    field);
            bytes = QByteArray::fromBase64(text.section(QStringLiteral(";base64,"), 1).toLatin1());
        } else {
            return {};
        }
        const auto path = storeUpload(bytes, field, QStringLiteral(".video"));
        const auto info = media::probeMedia(path.toStdString());
        if (!info || !info->hasVideo || info->frames < 1) {
            auto message = info ? "'" + field + "' holds no video frames" : info.error().message;
            for (auto at = message.find(path.toStdString()); at != std::string::npos; at = message.find(path.toStdString()))
                message.replace(at, path.size(), "'" + field + "'");
            refuse(400, message, field);
        }
        return path.toStdString();
    }

    // An uploaded still, checked from its header before it is decoded, kept in the uploads folder.
    std::string storeImage(QByteArray bytes, const std::string& field)
    {
        QBuffer buffer(&bytes);
        buffer.open(QIODevice::ReadOnly);
        QImageReader reader(&buffer);
        const auto format = reader.format();
        const auto size = reader.size();
        if (format != "png" && format != "jpeg")
            refuse(400, "'" + field + "' is not a PNG or JPEG image", field);
        if (!size.isValid() || size.width() > 8192 || size.height() > 8192)
            refuse(400, "'" + field + "' is larger than 8192 pixels on a side", field);
        if (reader.read().isNull())
            refuse(400, "'" + field + "' does not decode: " + reader.errorString().toStdString(), field);
        const auto folder =
            options.uploadsFolder.isEmpty() ? QDir(studio->dataFolder()).filePath(QStringLiteral("api-uploads")) : options.uploadsFolder;
        QDir().mkpath(folder);
        const auto path = QDir(folder).filePath(
            QString::fromStdString(randomId("upload_")) + (format == "png" ? QStringLiteral(".png") : QStringLiteral(".jpg")));
        QSaveFile file(path);
        requestUploads.push_back(path);
        if (!file.open(QIODevice::WriteOnly) || file.write(bytes) != bytes.size() || !file.commit())
            refuse(507, "'" + field + "' could not be stored: " + file.errorString().toStdString());
        return path.toStdString();
    }

    // A submit retried with the Idempotency-Key of an earlier one gets that job back; the key
    // of a new one is kept in its params (and so in the journal).
    std::optional<Response> replayed(const std::string& key, json& p)
    {
        if (key.empty())
            return std::nullopt;
        if (key.size() > 255 || std::any_of(key.begin(), key.end(), [](char c) { return c < 0x21 || c > 0x7e; }))
            refuse(400, "'Idempotency-Key' must be 1 to 255 visible ASCII characters", "Idempotency-Key");
        if (const auto it = byIdempotencyKey.find(key); it != byIdempotencyKey.end() && jobs.count(it->second)) {
            const auto& earlier = jobs.at(it->second);
            if (earlier.params.value("model", "") != p.value("model", "") || earlier.params.value("prompt", "") != p.value("prompt", ""))
                refuse(422, "this Idempotency-Key was used for another request (" + earlier.id + ")", "Idempotency-Key",
                    "idempotency_key_reused");
            auto r = jsonResponse(200, videoObject(earlier));
            r.headers.emplace_back("Idempotent-Replayed", "true");
            return r;
        }
        p["idempotency_key"] = key;
        return std::nullopt;
    }

    // POST /v1/vireo/jobs: either kind, answered at once (a remote studio follows an image as it
    // follows a video: events, digest, content).
    Response createJob(const Request& req)
    {
        auto probe = readFields(req);
        const auto kind = probe.text("kind").value_or("video");
        if (kind == "video")
            return createVideo(req, true);
        if (kind != "image")
            refuse(400, "'kind' must be image or video", "kind");
        auto f = readFields(req);
        f.text("kind");
        const auto& m = modelFor(f, "image");
        auto p = commonParams(f, m);
        const auto key = req.header("idempotency-key");
        if (auto r = replayed(key, p))
            return *r;
        f.refuseUnknown({"user"});
        const auto resolved = resolve(m);
        checkSize(resolved, p, "size");
        checkQueue(1);
        auto& job = accept("image", p);
        if (!key.empty())
            byIdempotencyKey[key] = job.id;
        return jsonResponse(200, videoObject(job));
    }

    Response createVideo(const Request& req, bool kindField = false)
    {
        auto f = readFields(req);
        if (kindField)
            f.text("kind");
        const auto& m = modelFor(f, "video");
        auto p = commonParams(f, m);
        const auto key = req.header("idempotency-key");
        if (auto r = replayed(key, p))
            return *r;
        const auto fps = f.number("fps", 1, 120);
        if (fps)
            p["fps"] = *fps;
        const auto resolved = resolve(m);
        const auto& rules = resolved.rules;
        const auto* defaults = &resolved.defaults;
        const double rate = fps.value_or(defaults->fps);
        // "auto" (seconds or frames): the length the model reads from the prompt, where it can.
        const auto isAuto = [&](const char* k) {
            return f.has(k) && f.values[k].is_string() && QString::fromStdString(f.values[k].get<std::string>()).trimmed() == u"auto";
        };
        const bool autoLength = isAuto("seconds") || isAuto("frames");
        // A sound to follow (audio-to-video): the clip is as long as it unless the length is given.
        const auto audio = saveAudio(f);
        if (!audio.empty()) {
            if (!rules.audioInput)
                refuse(400, rules.title + " does not follow a sound", "audio");
            p["audio"] = audio;
        }
        // A retake: a clip made again over [retake_from, retake_to) seconds, the rest kept; its
        // size, length and rate unless given.
        const auto retake = saveVideoUpload(f, "retake_video");
        if (!retake.empty()) {
            if (!rules.retake)
                refuse(400, rules.title + " cannot retake a clip", "retake_video");
            const auto from = f.number("retake_from", 0, 3600), to = f.number("retake_to", 0, 3600);
            if (!from || !to || !(*to > *from))
                refuse(
                    400, "'retake_from' and 'retake_to' are the seconds to make again, from before to", from ? "retake_to" : "retake_from");
            p["retake_video"] = retake;
            p["retake_from"] = *from;
            p["retake_to"] = *to;
            if (const auto keep = f.text("retake_keep")) {
                if (*keep != "sound" && *keep != "video")
                    refuse(400, "'retake_keep' is sound or video (what is kept whole)", "retake_keep");
                p["retake_keep"] = *keep;
            }
        } else if (f.has("retake_from") || f.has("retake_to") || f.has("retake_keep")) {
            refuse(400, "'retake_from', 'retake_to' and 'retake_keep' belong to a 'retake_video'",
                f.has("retake_from")     ? "retake_from"
                    : f.has("retake_to") ? "retake_to"
                                         : "retake_keep");
        }
        const bool soundLength = !audio.empty() && !autoLength && !f.has("seconds") && !f.has("frames");
        const bool clipLength = !retake.empty() && !autoLength && !f.has("seconds") && !f.has("frames");
        if (soundLength) {
            p["frames"] = 0;  // the engine reads the sound's length
            p["seconds"] = "audio";
        } else if (clipLength) {
            p["seconds"] = "retake";  // prepare reads the clip's length from its header
        } else if (autoLength) {
            f.used.insert("seconds");
            f.used.insert("frames");
            if (!rules.autoLength)
                refuse(400, rules.title + " cannot read a length from the prompt: give 'seconds' or 'frames'",
                    isAuto("frames") ? "frames" : "seconds");
            p["frames"] = 0;  // the model picks (the plan and the stage reason say how)
            p["seconds"] = "auto";
        } else {
            const auto seconds = f.number("seconds", 0.05, 60);
            if (auto frames = f.integer("frames", 1, 100000)) {
                p["frames"] = *frames;  // Vireo's own field: exact, and it wins over seconds
            } else if (seconds) {
                // The family's frame grid (8k + 1 for LTX-2): the nearest count to what was asked.
                const int step = std::max(1, rules.frameStep);
                const auto k = std::max<std::int64_t>(1, std::llround(*seconds * rate / step));
                p["frames"] = k * step + 1;
            }
            const auto frames = p.contains("frames") ? p["frames"].get<std::int64_t>() : defaults->frames;
            p["seconds"] = QString::number(static_cast<double>(frames) / rate, 'g', 4).toStdString();
        }
        checkSize(resolved, p, p.contains("frames") && !f.values.contains("frames") ? "seconds" : "frames", soundLength);
        checkQueue(1);
        if (auto reference = saveReference(f); !reference.empty())
            p["reference"] = reference;
        if (auto clip = saveVideoUpload(f, "reference_video"); !clip.empty()) {
            if (!rules.references)
                refuse(400, rules.title + " takes no reference clips (they are an IC-LoRA's)", "reference_video");
            p["reference_video"] = clip;
            if (const auto strength = f.number("reference_strength", 0, 1))
                p["reference_strength"] = *strength;
        } else if (f.has("reference_strength")) {
            refuse(400, "'reference_strength' belongs to a 'reference_video'", "reference_strength");
        }
        f.refuseUnknown({"user"});
        if (mustLoadFirst(req, resolved.ref)) {
            auto r = errorResponse(503, "the model '" + m.id + "' is loading; try again shortly", {}, "model_loading");
            r.headers.emplace_back("Retry-After", "10");
            return r;
        }
        auto& job = accept("video", p);
        if (!key.empty())
            byIdempotencyKey[key] = job.id;
        auto r = jsonResponse(200, videoObject(job));
        r.headers.emplace_back("openai-poll-after-ms", "500");
        return r;
    }

    Response listJobs(const Request& req, const std::string& kind)
    {
        Fields q;
        for (const auto& [k, v] : req.query)
            q.values[k] = v;
        const auto limit = q.integer("limit", 1, 100).value_or(20);
        const auto orderName = q.text("order").value_or("desc");
        if (orderName != "asc" && orderName != "desc")
            refuse(400, "'order' must be asc or desc", "order");
        const auto after = q.text("after");
        std::vector<std::string> ids;
        for (const auto& id : order)
            if (jobs.count(id) && (kind.empty() || jobs[id].kind == kind))
                ids.push_back(id);
        if (orderName == "desc")
            std::reverse(ids.begin(), ids.end());
        std::size_t start = 0;
        if (after) {
            const auto it = std::find(ids.begin(), ids.end(), *after);
            if (it == ids.end())
                refuse(400, "'after' names no item of this list", "after");
            start = static_cast<std::size_t>(it - ids.begin()) + 1;
        }
        json data = json::array();
        for (std::size_t i = start; i < ids.size() && data.size() < static_cast<std::size_t>(limit); ++i)
            data.push_back(videoObject(jobs[ids[i]]));
        const bool more = start + data.size() < ids.size();
        return jsonResponse(200,
            json{{"object", "list"}, {"data", data}, {"first_id", data.empty() ? json(nullptr) : data.front()["id"]},
                {"last_id", data.empty() ? json(nullptr) : data.back()["id"]}, {"has_more", more}});
    }

    Response deleteJob(const std::string& id, const std::string& kind)
    {
        auto& j = jobOr404(id, kind);
        if (j.status == "queued" || j.status == "in_progress") {
            dropUploads(j.params);
            if (!pool->cancel(j.engineJob))
                engine->cancel(j.engineJob);
            byEngineJob.erase(j.engineJob);
            for (auto& l : j.listeners)
                l.stream->close();
        } else if (!j.outputPath.isEmpty()) {
            // The output goes to the trash, where the user can still get it back.
            auto* gallery = studio->gallery();
            bool trashed = false;
            if (gallery->isOpen())
                for (const auto& item : gallery->items())
                    if (item.path == j.outputPath) {
                        trashed = gallery->trash(item.id).ok();
                        break;
                    }
            if (!trashed && QFile::exists(j.outputPath))
                QFile::moveToTrash(j.outputPath);
        }
        if (journal)
            if (auto w = journal->forget(j.id); !w)
                spdlog::error("api: {}", w.error().message);
        const auto kept = j.id;
        jobs.erase(kept);
        order.erase(std::remove(order.begin(), order.end(), kept), order.end());
        emit q->jobsChanged();
        return jsonResponse(200, json{{"id", kept}, {"object", kind == "image" ? "image.deleted" : "video.deleted"}, {"deleted", true}});
    }

    Response content(const Request& req, const std::string& id, const std::string& kind)
    {
        auto& j = jobOr404(id, kind);
        if (j.status != "completed")
            refuse(409, "the " + j.kind + " '" + id + "' is " + j.status + "; its content is not there yet", {}, "not_ready");
        const auto variant = req.query.count("variant") ? req.query.at("variant") : std::string("video");
        if (variant == "thumbnail") {
            QByteArray* cached = thumbnails.object(j.outputPath);
            QByteArray bytes;
            if (cached) {
                bytes = *cached;
            } else {
                auto made = gallery::makeThumbnail(j.outputPath);
                if (!made)
                    refuse(404, "no thumbnail could be made: " + made.error().message, {}, "not_found");
                bytes = *made;
                thumbnails.insert(j.outputPath, new QByteArray(bytes), static_cast<int>(bytes.size()));
            }
            Response r;
            r.contentType = "image/jpeg";
            r.body = bytes.toStdString();
            return r;
        }
        if (variant != "video" && !(j.kind == "image" && variant == "image"))
            refuse(400, "'variant' must be video or thumbnail", "variant");
        Response r;
        r.file = FileBody{j.outputPath.toStdString(), j.kind == "image" ? "image/png" : "video/mp4", "private, max-age=3600",
            QFileInfo(j.outputPath).fileName().toStdString()};
        return r;
    }

    Response jobDetails(const std::string& id)
    {
        auto& j = jobOr404(id);
        auto v = videoObject(j);
        v["kind"] = j.kind;
        v["params"] = j.params;
        v["params"].erase("reference");
        if (!j.recipeJson.empty())
            v["recipe"] = json::parse(j.recipeJson, nullptr, false);
        if (j.status == "completed" && !j.outputSha256.empty())
            v["output"] = {
                {"bytes", j.outputBytes}, {"sha256", j.outputSha256}, {"file_name", QFileInfo(j.outputPath).fileName().toStdString()}};
        if (j.status == "completed" || j.status == "failed")
            v["timings"] = {{"load_seconds", j.loadSeconds}, {"generate_seconds", j.generateSeconds}, {"write_seconds", j.writeSeconds}};
        return jsonResponse(200, v);
    }

    Response events(const Request& req, const std::string& id)
    {
        auto& j = jobOr404(id);
        Fields q;
        for (const auto& [k, v] : req.query)
            q.values[k] = v;
        const double fps = q.number("preview_fps", 0, 30).value_or(0);
        auto stream = std::make_shared<EventStream>();
        stream->push("event: status\ndata: " + videoObject(j).dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n");
        if (j.status == "completed" || j.status == "failed") {
            stream->close();
        } else {
            j.listeners.push_back({stream, fps, {}});
        }
        Response r;
        r.events = stream;
        return r;
    }

    Response galleryList(const Request& req)
    {
        auto* g = studio->gallery();
        if (!g->isOpen())
            refuse(503, "the gallery is not open: " + studio->galleryError().toStdString(), {}, "gallery_unavailable");
        Fields q;
        for (const auto& [k, v] : req.query)
            q.values[k] = v;
        const auto limit = q.integer("limit", 1, 500).value_or(50);
        const auto after = q.integer("after", 0, std::numeric_limits<std::int32_t>::max());
        json data = json::array();
        bool started = !after, more = false;
        for (const auto& item : g->items()) {
            if (!started) {
                started = item.id == *after;
                continue;
            }
            if (data.size() >= static_cast<std::size_t>(limit)) {
                more = true;
                break;
            }
            data.push_back({{"id", item.id}, {"kind", item.kind.toStdString()}, {"width", item.width}, {"height", item.height},
                {"frames", item.frames}, {"fps", item.fps}, {"seconds", item.durationSeconds},
                {"created", item.created.toString(Qt::ISODate).toStdString()}, {"model", item.modelTitle.toStdString()},
                {"family", item.family.toStdString()}, {"prompt", item.prompt.toStdString()}, {"seed", item.seed},
                {"bytes", item.fileBytes}, {"missing", item.missing}, {"has_recipe", item.hasRecipe},
                {"file", "/v1/vireo/gallery/" + std::to_string(item.id) + "/file"}});
        }
        return jsonResponse(200, json{{"object", "list"}, {"data", data}, {"has_more", more}});
    }

    const gallery::GalleryItem galleryItem(const std::string& idText)
    {
        auto* g = studio->gallery();
        bool ok = false;
        const auto id = QString::fromStdString(idText).toLongLong(&ok);
        const auto item = ok && g->isOpen() ? g->item(id) : std::nullopt;
        if (!item)
            refuse(404, "no gallery item has the id '" + output::truncatedUtf8(idText, 40) + "'", {}, "not_found");
        return *item;
    }

    Response galleryFile(const std::string& id)
    {
        const auto item = galleryItem(id);
        Response r;
        r.file = FileBody{item.path.toStdString(), item.kind == QStringLiteral("image") ? "image/png" : "video/mp4",
            "private, max-age=3600", QFileInfo(item.path).fileName().toStdString()};
        return r;
    }

    Response galleryRecipe(const std::string& id)
    {
        const auto item = galleryItem(id);
        const auto recipe = studio->gallery()->recipe(item.id);
        if (!recipe)
            refuse(404, "the gallery item " + id + " has no recipe", {}, "not_found");
        return jsonResponse(200, json::parse(recipe->toJson(), nullptr, false));
    }

    Response plan(const Request& req)
    {
        auto f = readFields(req);
        auto id = f.text("model");
        const auto* m = id ? findModel(*id) : nullptr;
        if (!m)
            refuse(400, "'model' must name a model of GET /v1/models", "model");
        if (!m->ready)
            refuse(409, "the model '" + m->id + "' is not ready: " + m->missing, "model", "model_not_ready");
        auto p = commonParams(f, *m);
        if (auto frames = f.integer("frames", 1, 100000))
            p["frames"] = *frames;
        f.refuseUnknown({"seconds", "user", "n", "response_format"});
        auto ref = studio->models()->resolve(m->key);
        if (!ref)
            refuse(409, ref.error().message, "model");
        Job probe;
        probe.kind = m->kind;
        probe.params = p;
        const auto ask = askFor(probe);
        const auto& catalog = studio->downloads()->catalog();
        auto defaults = generation::defaultsFor(catalog, *ref, ask);
        if (!defaults)
            refuse(409, defaults.error().message, "model");
        auto prepared = generation::prepare(catalog, *defaults, *ref, ask);
        if (!prepared)
            refuse(400, prepared.error().message);
        const auto& r = prepared->job.request;
        auto size = facade::sizeRequestOf(r, prepared->image);
        size.references = static_cast<int>(prepared->job.references.size());
        auto planned = facade::Generator::planMemory(ref->plan, size);
        if (!planned)
            refuse(409, planned.error().message, "model");
        json components = json::array();
        for (const auto& c : planned->components)
            components.push_back({{"name", c.name}, {"bytes", c.bytes}, {"where", c.where}});
        return jsonResponse(200,
            json{{"model", m->id}, {"device", planned->device}, {"dtype", planned->dtype}, {"fits", planned->fits},
                {"device_peak_bytes", planned->devicePeakBytes}, {"host_peak_bytes", planned->hostPeakBytes},
                {"shortfall_bytes", planned->shortfallBytes}, {"explanation", planned->explanation}, {"components", components},
                {"width", r.width}, {"height", r.height}, {"frames", r.frames}, {"steps", r.steps}, {"stages", prepared->stagesReason}});
    }

    Response openApi();

    struct Route {
        std::string method, pattern, summary;
        std::function<void(Impl&, const Request&, const std::vector<std::string>&, ApiServer::Reply&)> run;
    };
    std::vector<Route> routes;
    void buildRoutes();

    // Stills stored while the request being handled was read: removed if it is refused.
    std::vector<QString> requestUploads;

    void handle(const Request& req, ApiServer::Reply reply)
    {
        requestUploads.clear();
        struct DropOnRefusal {
            std::vector<QString>& files;
            bool accepted = false;
            ~DropOnRefusal()
            {
                if (!accepted)
                    for (const auto& f : files)
                        QFile::remove(f);
                files.clear();
            }
        } uploads{requestUploads};
        try {
            dispatch(req, reply);
            uploads.accepted = true;
        } catch (const ApiError& e) {
            auto r = errorResponse(e.status, e.message, e.param, e.code);
            if (e.status == 429)
                r.headers.emplace_back("Retry-After", std::to_string(retryAfterSeconds()));
            reply(r);
        } catch (const jsonutil::FieldError& e) {
            reply(errorResponse(400, e.what()));
        } catch (const std::exception& e) {
            spdlog::error("api: {} {}: {}", req.method, req.path, e.what());
            reply(errorResponse(500, std::string("the request failed inside Vireo (a defect; please report it): ") + e.what()));
        }
    }

    int retryAfterSeconds() const
    {
        // The running job's remaining time, as the engine estimates it; at least a second.
        double eta = 0;
        for (const auto& [_, j] : jobs)
            if (j.status == "in_progress" && j.etaSeconds > 0)
                eta = std::max(eta, j.etaSeconds);
        return std::max(1, static_cast<int>(std::ceil(eta > 0 ? eta : 5)));
    }

    void dispatch(const Request& req, ApiServer::Reply& reply)
    {
        const auto segments = QString::fromStdString(req.path).split(QLatin1Char('/'), Qt::SkipEmptyParts);
        std::vector<std::string> allowed;
        for (const auto& route : routes) {
            const auto pattern = QString::fromStdString(route.pattern).split(QLatin1Char('/'), Qt::SkipEmptyParts);
            if (pattern.size() != segments.size())
                continue;
            std::vector<std::string> params;
            bool match = true;
            for (int i = 0; i < pattern.size() && match; ++i) {
                if (pattern[i].startsWith(QLatin1Char('{')))
                    params.push_back(segments[i].toStdString());
                else
                    match = pattern[i] == segments[i];
            }
            if (!match)
                continue;
            const bool head = req.method == "HEAD" && route.method == "GET";
            if (route.method != req.method && !head) {
                allowed.push_back(route.method);
                continue;
            }
            route.run(*this, req, params, reply);
            return;
        }
        if (!allowed.empty()) {
            std::string list;
            for (const auto& m : allowed)
                list += (list.empty() ? "" : ", ") + m + (m == "GET" ? ", HEAD" : "");
            auto r = errorResponse(
                405, req.method.substr(0, 16) + " is not allowed on " + output::truncatedUtf8(req.path, 200) + " (allowed: " + list + ")");
            r.headers.emplace_back("Allow", list);
            reply(r);
            return;
        }
        refuse(404, "no route " + output::truncatedUtf8(req.path, 200) + " (GET /v1/vireo/openapi.json lists them)", {}, "not_found");
    }
};

void ApiService::Impl::buildRoutes()
{
    auto plain = [](auto fn) {
        return [fn](Impl& s, const Request& r, const std::vector<std::string>& p, ApiServer::Reply& reply) { reply(fn(s, r, p)); };
    };
    routes = {
        {"GET", "/v1/models", "The models that are ready, and what the others miss",
            plain([](Impl& s, const Request&, const auto&) { return s.listModels(); })},
        {"GET", "/v1/models/{id}", "One model", plain([](Impl& s, const Request&, const auto& p) { return s.getModel(p[0]); })},
        {"POST", "/v1/images/generations", "Make images (synchronous): prompt, size, n, seed, response_format",
            [](Impl& s, const Request& r, const auto&, ApiServer::Reply& reply) { s.generateImages(r, reply); }},
        {"POST", "/v1/videos", "Start a video (asynchronous): model, prompt, size, seconds, input_reference",
            plain([](Impl& s, const Request& r, const auto&) { return s.createVideo(r); })},
        {"POST", "/v1/vireo/jobs", "Start a job (asynchronous): kind image or video and that route's fields; Idempotency-Key",
            plain([](Impl& s, const Request& r, const auto&) { return s.createJob(r); })},
        {"GET", "/v1/videos", "The video jobs: after, limit, order",
            plain([](Impl& s, const Request& r, const auto&) { return s.listJobs(r, "video"); })},
        {"GET", "/v1/videos/{id}", "A video job's status, progress and ETA", plain([](Impl& s, const Request&, const auto& p) {
             const auto& j = s.jobOr404(p[0], "video");
             auto r = jsonResponse(200, s.videoObject(j));
             // The openai client's poll helper waits this long between polls.
             if (j.status == "queued" || j.status == "in_progress")
                 r.headers.emplace_back("openai-poll-after-ms", "500");
             return r;
         })},
        {"DELETE", "/v1/videos/{id}", "Cancel a video job, or delete a finished one (its file goes to the trash)",
            plain([](Impl& s, const Request&, const auto& p) { return s.deleteJob(p[0], "video"); })},
        {"GET", "/v1/videos/{id}/content", "The MP4 (variant=video) or a JPEG (variant=thumbnail); Range, If-Range, ETag",
            plain([](Impl& s, const Request& r, const auto& p) { return s.content(r, p[0], "video"); })},
        {"GET", "/v1/vireo/jobs", "Every job of the API, images and videos",
            plain([](Impl& s, const Request& r, const auto&) { return s.listJobs(r, {}); })},
        {"GET", "/v1/vireo/jobs/{id}", "A job with its parameters and, once done, its full recipe",
            plain([](Impl& s, const Request&, const auto& p) { return s.jobDetails(p[0]); })},
        {"GET", "/v1/vireo/jobs/{id}/content", "A job's output file; Range, If-Range, ETag",
            plain([](Impl& s, const Request& r, const auto& p) { return s.content(r, p[0], {}); })},
        {"GET", "/v1/vireo/jobs/{id}/events", "Server-Sent Events: status, progress (phase, step, ETA), previews (preview_fps)",
            plain([](Impl& s, const Request& r, const auto& p) { return s.events(r, p[0]); })},
        {"DELETE", "/v1/vireo/jobs/{id}", "Cancel or delete any job",
            plain([](Impl& s, const Request&, const auto& p) { return s.deleteJob(p[0], {}); })},
        {"GET", "/v1/vireo/gallery", "The gallery: limit, after",
            plain([](Impl& s, const Request& r, const auto&) { return s.galleryList(r); })},
        {"GET", "/v1/vireo/gallery/{id}/file", "A gallery item's file; Range, If-Range, ETag",
            plain([](Impl& s, const Request&, const auto& p) { return s.galleryFile(p[0]); })},
        {"GET", "/v1/vireo/gallery/{id}/recipe", "A gallery item's full recipe",
            plain([](Impl& s, const Request&, const auto& p) { return s.galleryRecipe(p[0]); })},
        {"POST", "/v1/vireo/plan", "The memory plan of a request before it runs",
            plain([](Impl& s, const Request& r, const auto&) { return s.plan(r); })},
        {"GET", "/v1/vireo/host", "This host: version, every device (memory, the model it holds, its queue), models ready, jobs active",
            plain([](Impl& s, const Request&, const auto&) { return s.hostStatus(); })},
        {"GET", "/v1/vireo/openapi.json", "This list, as an OpenAPI 3.1 document",
            plain([](Impl& s, const Request&, const auto&) { return s.openApi(); })},
    };
}

Response ApiService::Impl::openApi()
{
    json paths = json::object();
    for (const auto& r : routes) {
        json op{{"summary", r.summary},
            {"responses", {{"200", {{"description", "OK"}}}, {"default", {{"description", "an OpenAI-shaped error"}}}}}};
        json parameters = json::array();
        for (const auto& segment : QString::fromStdString(r.pattern).split(QLatin1Char('/'), Qt::SkipEmptyParts))
            if (segment.startsWith(QLatin1Char('{')))
                parameters.push_back({{"name", segment.mid(1, segment.size() - 2).toStdString()}, {"in", "path"}, {"required", true},
                    {"schema", {{"type", "string"}}}});
        if (!parameters.empty())
            op["parameters"] = parameters;
        paths[r.pattern][QString::fromStdString(r.method).toLower().toStdString()] = op;
    }
    return jsonResponse(200,
        json{{"openapi", "3.1.0"},
            {"info", {{"title", "Vireo Studio local API"}, {"version", QCoreApplication::applicationVersion().toStdString()}}},
            {"servers", json::array({{{"url", server ? server->baseUrl() : std::string()}}})},
            {"components", {{"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}}, {"paths", paths}});
}

ApiService::ApiService(core::Studio* studio, Options options, QObject* parent) : QObject(parent), m_impl(std::make_unique<Impl>())
{
    m_impl->q = this;
    m_impl->studio = studio;
    m_impl->options = std::move(options);
    m_impl->buildRoutes();
}

ApiService::~ApiService()
{
    // The server first: no request reaches the routes once this object starts going away.
    m_impl->server.reset();
    m_impl->hashers.clear();  // joined here: their posts are dropped with this object
}

Result<void> ApiService::start()
{
    auto& d = *m_impl;
    if (d.server)
        return {};
    d.engine = d.studio->engine(d.options.device == QStringLiteral("auto") ? QString() : d.options.device);
    d.pool = d.studio->devicePool();
    // Each job's signals come once: from the pool for the jobs it placed (on any engine), from
    // the default engine for the rest.
    const auto fromPool = [this](quint64 id) { return m_impl->pool->engineOf(id) != nullptr; };
    connect(d.engine, &runtime::Engine::jobChanged, this, [this, fromPool](quint64 id) {
        if (!fromPool(id))
            m_impl->onEngineJobChanged(id);
    });
    connect(d.engine, &runtime::Engine::jobProgress, this,
        [this, fromPool](quint64 id, const QString& phase, qint64 done, qint64 total, double eta) {
            if (!fromPool(id))
                m_impl->onEngineProgress(id, phase, done, total, eta);
        });
    connect(d.engine, &runtime::Engine::previewReady, this, [this, fromPool](quint64 id, const QImage& strip, int step) {
        if (!fromPool(id))
            m_impl->onEnginePreview(id, strip, step);
    });
    connect(d.engine, &runtime::Engine::jobFinished, this, [this, fromPool](quint64 id) {
        if (!fromPool(id))
            m_impl->onEngineFinished(id);
    });
    connect(d.pool, &runtime::DevicePool::jobChanged, this, [this](quint64 id) { m_impl->onEngineJobChanged(id); });
    connect(
        d.pool, &runtime::DevicePool::jobProgress, this, [this](quint64 id, const QString& phase, qint64 done, qint64 total, double eta) {
            m_impl->onEngineProgress(id, phase, done, total, eta);
        });
    connect(d.pool, &runtime::DevicePool::previewReady, this,
        [this](quint64 id, const QImage& strip, int step) { m_impl->onEnginePreview(id, strip, step); });
    connect(d.pool, &runtime::DevicePool::jobFinished, this, [this](quint64 id) { m_impl->onEngineFinished(id); });

    // Listening comes first: a port that is taken stops here, before the journal is touched.
    // Requests that arrive meanwhile wait for this thread, so they see the replayed jobs.
    auto serverOptions = d.options.server;
    if (!serverOptions.bodyLimit)
        serverOptions.bodyLimit = [](const std::string& method, const std::string& path) -> std::size_t {
            // An image or sound upload rides only on video requests; everything else is a small JSON body.
            return method == "POST" && (path == "/v1/videos" || path == "/v1/vireo/jobs") ? 48u * 1024 * 1024 : 1u << 20;
        };
    auto handler = [this](Request request, ApiServer::Reply reply) {
        QMetaObject::invokeMethod(
            this, [this, request = std::move(request), reply = std::move(reply)]() mutable { m_impl->handle(request, std::move(reply)); },
            Qt::QueuedConnection);
    };
    auto server = ApiServer::start(serverOptions, handler);
    if (!server)
        return server.error();
    d.server = std::move(*server);

    const auto journalFile =
        d.options.journalFile.isEmpty() ? QDir(d.studio->dataFolder()).filePath(QStringLiteral("api-jobs.jsonl")) : d.options.journalFile;
    JobJournal::Contents contents;
    auto journal = JobJournal::open(journalFile, &contents);
    if (!journal) {
        d.server.reset();
        return journal.error();
    }
    d.journal = std::move(*journal);
    if (contents.damagedLines > 0)
        spdlog::warn("api: {}: {} damaged line(s) skipped (cut short by a crash?)", journalFile.toStdString(), contents.damagedLines);
    int requeued = 0, cutOff = 0;
    for (const auto& record : contents.jobs) {
        Impl::Job j;
        j.id = record.value("id", "");
        j.kind = record.value("kind", "video");
        j.params = record.value("params", json::object());
        j.createdAt = record.value("created_at", std::int64_t(0));
        j.completedAt = record.value("completed_at", std::int64_t(0));
        j.status = record.value("status", "failed");
        if (const auto e = record.find("error"); e != record.end() && e->is_object()) {
            j.error = e->value("message", "");
            j.errorCode = e->value("code", "");
        }
        j.outputPath = QString::fromStdString(record.value("output", ""));
        if (const auto dg = record.find("output_digest"); dg != record.end() && dg->is_object()) {
            const auto sha = dg->value("sha256", std::string());
            const auto bytes = dg->value("bytes", std::int64_t(-1));
            if (sha.size() == 64 && sha.find_first_not_of("0123456789abcdef") == std::string::npos && bytes >= 0) {
                j.outputSha256 = sha;
                j.outputBytes = bytes;
            }
        }
        if (!plausibleId(j.id) || !j.params.is_object())
            continue;
        const auto id = j.id;
        if (const auto key = j.params.value("idempotency_key", std::string()); !key.empty())
            d.byIdempotencyKey[key] = id;
        d.jobs[id] = std::move(j);
        d.order.push_back(id);
        auto& job = d.jobs[id];
        if (job.status == "in_progress") {
            // A job that ran when the server stopped: its output was never renamed into place.
            job.status = "failed";
            job.error = "the server stopped while this job ran; nothing was kept";
            job.errorCode = "interrupted";
            job.completedAt = nowSeconds();
            d.persist(job);
            ++cutOff;
        } else if (job.status == "queued") {
            try {
                d.enqueue(job);
                ++requeued;
            } catch (const ApiError& e) {
                job.status = "failed";
                job.error = "could not be queued again after a restart: " + e.message;
                job.errorCode = "requeue_failed";
                job.completedAt = nowSeconds();
                d.persist(job);
            }
        } else if (job.status == "completed") {
            job.progress = 100;
        }
    }
    if (requeued || cutOff)
        spdlog::info("api: {} job(s) queued again, {} cut off by the last stop", requeued, cutOff);

    // A video a killed server was writing left a hidden part file; it is not an output. The
    // Studio clears its own outputs folder when it starts; a folder of the server's is cleared here.
    if (!d.options.outputsFolder.isEmpty())
        if (const int stale = output::removeStalePartials(d.options.outputsFolder.toStdString()); stale > 0)
            spdlog::info("api: removed {} part file(s) of outputs cut off by the last stop", stale);

    spdlog::info("api: serving on {}", d.server->baseUrl());
    return {};
}

bool ApiService::running() const
{
    return m_impl->server != nullptr;
}

QString ApiService::baseUrl() const
{
    return m_impl->server ? QString::fromStdString(m_impl->server->baseUrl()) : QString();
}

ApiServer::Stats ApiService::stats() const
{
    return m_impl->server ? m_impl->server->stats() : ApiServer::Stats{};
}

QString ApiService::defaultTokenFile()
{
    return QDir(core::Studio::defaultDataFolder()).filePath(QStringLiteral("api-token"));
}

Result<std::string> ApiService::ensureToken(const QString& file)
{
    QFile existing(file);
    if (existing.exists()) {
        // A token others can read is no secret: refuse it rather than serve behind it.
        if (existing.permissions() & (QFile::ReadGroup | QFile::ReadOther | QFile::WriteGroup | QFile::WriteOther))
            return makeError(ErrorCode::PermissionDenied,
                file.toStdString() + " can be read by other users; make it private (chmod 600) or delete it for a new token");
        if (!existing.open(QIODevice::ReadOnly))
            return makeError(ErrorCode::Io, file.toStdString() + ": " + existing.errorString().toStdString());
        const auto token = QString::fromUtf8(existing.read(4096)).trimmed().toStdString();
        if (token.size() < 16 || token.find_first_of(" \t\r\n") != std::string::npos)
            return makeError(ErrorCode::InvalidFormat, file.toStdString() + " does not hold a token (16 or more characters, one word)");
        return token;
    }
    QDir().mkpath(QFileInfo(file).absolutePath());
    QByteArray raw(32, Qt::Uninitialized);
    QRandomGenerator::system()->fillRange(reinterpret_cast<quint32*>(raw.data()), raw.size() / 4);
    const auto token = "vireo-" + raw.toBase64(QByteArray::Base64UrlEncoding | QByteArray::OmitTrailingEquals).toStdString();
    QSaveFile out(file);
    // The permissions are set before any byte of the token is written.
    if (!out.open(QIODevice::WriteOnly) || !out.setPermissions(QFile::ReadOwner | QFile::WriteOwner))
        return makeError(ErrorCode::Io, "cannot write " + file.toStdString() + ": " + out.errorString().toStdString());
    out.write(QByteArray::fromStdString(token + "\n"));
    if (!out.commit())
        return makeError(ErrorCode::Io, "cannot write " + file.toStdString() + ": " + out.errorString().toStdString());
    QFile::setPermissions(file, QFile::ReadOwner | QFile::WriteOwner);
    return token;
}

}  // namespace vireo::api
