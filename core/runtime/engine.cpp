#include "core/runtime/engine.h"

#include "core/output/outputfile.h"
#include "core/runtime/etamodel.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QPointer>
#include <QThreadPool>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace vireo::runtime {

namespace {

using Clock = std::chrono::steady_clock;

QString q(const std::string& s)
{
    return QString::fromStdString(s);
}

// Raised inside a job to end it with an error; caught in the engine loop.
struct JobError {
    ErrorCode code;
    QString message;
};

QImage stripImage(const facade::Preview& p)
{
    QImage strip(p.width * p.frames, p.height, QImage::Format_RGB888);
    if (strip.isNull())
        return {};
    const std::size_t frameBytes = static_cast<std::size_t>(p.width) * p.height * 3;
    for (int f = 0; f < p.frames; ++f)
        for (int y = 0; y < p.height; ++y)
            std::memcpy(strip.scanLine(y) + static_cast<std::size_t>(f) * p.width * 3,
                p.rgb.data() + f * frameBytes + static_cast<std::size_t>(y) * p.width * 3, static_cast<std::size_t>(p.width) * 3);
    return strip;
}

}  // namespace

QString jobStateName(JobState state)
{
    switch (state) {
    case JobState::Queued: return QStringLiteral("queued");
    case JobState::Running: return QStringLiteral("running");
    case JobState::Done: return QStringLiteral("done");
    case JobState::Failed: return QStringLiteral("failed");
    case JobState::Cancelled: return QStringLiteral("cancelled");
    }
    return {};
}

bool ModelRef::sameLoadAs(const ModelRef& o) const
{
    const auto& a = plan;
    const auto& b = o.plan;
    return key == o.key && a.modelPaths == b.modelPaths && a.textEncoderPath == b.textEncoderPath && a.device == b.device
        && a.dtype == b.dtype && a.placement == b.placement && a.attentionKernel == b.attentionKernel
        && a.fp8FastAccumulation == b.fp8FastAccumulation && a.cpuThreads == b.cpuThreads
        && a.spatialUpsamplerPath == b.spatialUpsamplerPath && a.temporalUpsamplerPath == b.temporalUpsamplerPath
        && a.distilledLoraPath == b.distilledLoraPath;
}

// Two stages or conditions change every phase's time, so they are part of what is remembered.
QString etaKey(const ModelRef& model, const facade::GenerateRequest& r, bool twoStage)
{
    return model.key
        + QStringLiteral("|%1x%2x%3|%4|%5|%6|%7|cfg%8|%9")
              .arg(r.width)
              .arg(r.height)
              .arg(r.frames)
              .arg(q(model.plan.device), q(model.plan.dtype), q(r.schedule))
              .arg(r.steps)
              .arg(r.guidance > 1.0 || r.audioGuidance > 1.0 ? 1 : 0)
              .arg(QStringLiteral("%1c%2").arg(twoStage ? QStringLiteral("two") : QStringLiteral("one")).arg(r.conditions.size()));
}

struct Engine::Impl {
    Engine* self = nullptr;
    Options options;
    EtaModel eta;

    struct Job {
        JobStatus status;
        std::stop_source stop;
        ModelRef model;
        facade::SizeRequest size;
        GenerateJob generate;
        bool force = false;
        Clock::time_point lastEmit{};
        QString lastPhase;
    };

    mutable std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::shared_ptr<Job>> queue;
    std::map<quint64, std::shared_ptr<Job>> jobs;
    bool stopping = false;

    // Owned by the engine thread; `residentInfo` is its snapshot for other threads.
    std::unique_ptr<facade::Generator> generator;
    std::optional<Resident> residentInfo;
    QString lost;

    QThreadPool planPool;
    std::map<quint64, Result<facade::MemoryPlan>> plans;
    quint64 nextTicket = 1;

    std::thread worker;

    explicit Impl(Options o) : options(std::move(o)), eta(options.etaFile) { planPool.setMaxThreadCount(1); }

    facade::ProcessSettings pristine;  // the engine thread's settings before any model
    void loop();
    void run(const std::shared_ptr<Job>& job);
    void ensureLoaded(const std::shared_ptr<Job>& job, const ModelRef& model, const facade::SizeRequest& size, bool force);
    void generate(const std::shared_ptr<Job>& job);
    // generate()'s parts.
    facade::GenerateRequest decodedRequest(const std::shared_ptr<Job>& job, bool* twoStage);
    static std::vector<std::pair<QString, qint64>> videoPhases(const GenerateJob& g, const facade::GenerateRequest& request, bool twoStage);
    output::Recipe videoRecipe(const GenerateJob& g, const facade::VideoResult& result) const;
    static std::vector<std::filesystem::path> keepConditions(
        const GenerateJob& g, const facade::GenerateRequest& request, const std::filesystem::path& path, output::Recipe& recipe);
    void generateImage(const std::shared_ptr<Job>& job);
    output::Recipe recipeBase(const GenerateJob& g) const;
    std::filesystem::path outputPathFor(const GenerateJob& g, const std::string& extension) const;
    void finishJob(
        const std::shared_ptr<Job>& job, const std::filesystem::path& path, const output::Recipe& recipe, Clock::time_point generated);
    void unload();
    void progress(const std::shared_ptr<Job>& job, const QString& phase, qint64 done, qint64 total, double eta, bool force);
    // A denoising preview (a strip of frames for video, one picture for an image) to the page.
    void preview(const std::shared_ptr<Job>& job, const facade::Preview& preview);
    void emitChanged(quint64 id)
    {
        QMetaObject::invokeMethod(
            self, [s = self, id]() { emit s->jobChanged(id); }, Qt::QueuedConnection);
    }
    void afterFailure(ErrorCode code);
};

Engine::Engine(Options options, QObject* parent) : QObject(parent), m_impl(std::make_unique<Impl>(std::move(options)))
{
    m_impl->self = this;
    m_impl->worker = std::thread([impl = m_impl.get()] { impl->loop(); });
}

Engine::~Engine()
{
    {
        std::lock_guard lock(m_impl->mutex);
        m_impl->stopping = true;
        for (auto& [_, j] : m_impl->jobs) {
            j->stop.request_stop();
            if (j->status.state == JobState::Queued)
                j->status.state = JobState::Cancelled;
        }
        m_impl->queue.clear();
    }
    m_impl->wake.notify_all();
    if (m_impl->worker.joinable())
        m_impl->worker.join();
    m_impl->planPool.waitForDone();
    m_impl->generator.reset();
}

QString Engine::device() const
{
    return m_impl->options.device;
}

quint64 Engine::enqueueLoad(const ModelRef& model, facade::SizeRequest size, bool forcePlacement)
{
    auto job = std::make_shared<Impl::Job>();
    job->status.kind = JobKind::Load;
    job->status.title = tr("Load %1").arg(model.title);
    job->model = model;
    job->size = size;
    job->force = forcePlacement;
    quint64 id;
    {
        std::lock_guard lock(m_impl->mutex);
        id = job->status.id = Engine::newJobId();
        m_impl->jobs[id] = job;
        m_impl->queue.push_back(job);
    }
    m_impl->wake.notify_one();
    emit jobAdded(id);
    return id;
}

quint64 Engine::enqueueGenerate(const GenerateJob& g)
{
    auto job = std::make_shared<Impl::Job>();
    job->status.kind = JobKind::Generate;
    QString prompt = QString::fromStdString(output::sanitizedText(g.request.prompt)).simplified();
    if (prompt.size() > 60)
        prompt = prompt.left(57) + QStringLiteral("…");
    job->status.title = QStringLiteral("“%1” · %2").arg(prompt, g.model.title);
    job->model = g.model;
    job->generate = g;
    job->force = g.forcePlacement;
    job->size = {g.request.width, g.request.height, facade::planningFrames(g.request),
        g.request.guidance > 1.0 || g.request.audioGuidance > 1.0, g.request.knobs, static_cast<int>(g.references.size())};
    quint64 id;
    {
        std::lock_guard lock(m_impl->mutex);
        id = job->status.id = Engine::newJobId();
        m_impl->jobs[id] = job;
        m_impl->queue.push_back(job);
    }
    m_impl->wake.notify_one();
    emit jobAdded(id);
    return id;
}

quint64 Engine::enqueueUnload()
{
    auto job = std::make_shared<Impl::Job>();
    job->status.kind = JobKind::Unload;
    job->status.title = tr("Unload the model");
    quint64 id;
    {
        std::lock_guard lock(m_impl->mutex);
        id = job->status.id = Engine::newJobId();
        m_impl->jobs[id] = job;
        m_impl->queue.push_back(job);
    }
    m_impl->wake.notify_one();
    emit jobAdded(id);
    return id;
}

bool Engine::cancel(quint64 id)
{
    bool finishedNow = false;
    {
        std::lock_guard lock(m_impl->mutex);
        const auto it = m_impl->jobs.find(id);
        if (it == m_impl->jobs.end())
            return false;
        auto& j = *it->second;
        if (j.status.state == JobState::Queued) {
            j.status.state = JobState::Cancelled;
            std::erase_if(m_impl->queue, [id](const auto& q) { return q->status.id == id; });
            finishedNow = true;
        } else if (j.status.state == JobState::Running) {
            j.stop.request_stop();
        } else {
            return false;
        }
    }
    emit jobChanged(id);
    if (finishedNow)
        emit jobFinished(id);
    return true;
}

void Engine::cancelAll()
{
    std::vector<quint64> ids;
    {
        std::lock_guard lock(m_impl->mutex);
        for (const auto& [id, j] : m_impl->jobs)
            if (j->status.state == JobState::Queued || j->status.state == JobState::Running)
                ids.push_back(id);
    }
    for (auto id : ids)
        cancel(id);
}

QList<JobStatus> Engine::jobs() const
{
    std::lock_guard lock(m_impl->mutex);
    QList<JobStatus> out;
    for (const auto& [_, j] : m_impl->jobs)
        out.append(j->status);
    return out;
}

int Engine::pending() const
{
    std::lock_guard lock(m_impl->mutex);
    return static_cast<int>(std::count_if(m_impl->jobs.begin(), m_impl->jobs.end(), [](const auto& kv) {
        const auto s = kv.second->status.state;
        return s == JobState::Queued || s == JobState::Running;
    }));
}

std::optional<JobStatus> Engine::job(quint64 id) const
{
    std::lock_guard lock(m_impl->mutex);
    const auto it = m_impl->jobs.find(id);
    if (it == m_impl->jobs.end())
        return std::nullopt;
    return it->second->status;
}

void Engine::clearFinished()
{
    std::lock_guard lock(m_impl->mutex);
    std::erase_if(m_impl->jobs, [](const auto& kv) {
        const auto s = kv.second->status.state;
        return s == JobState::Done || s == JobState::Failed || s == JobState::Cancelled;
    });
}

QString Engine::Resident::pathsText() const
{
    QStringList gemms, others;
    for (const auto& [path, count] : matmulPaths) {
        // Attention names its path whole; GEMMs are counted.
        if (path.rfind("self-attention", 0) == 0)
            others << q(path);
        else
            gemms << QStringLiteral("%1 %2").arg(count).arg(q(path));
    }
    return (gemms + others).join(QStringLiteral("; "));
}

std::optional<Engine::Resident> Engine::resident() const
{
    std::lock_guard lock(m_impl->mutex);
    return m_impl->residentInfo;
}

QStringList Engine::filesInUse() const
{
    QStringList out;
    auto add = [&](const ModelRef& m) {
        for (const auto& p : m.plan.modelPaths)
            out << QString::fromStdString(p.string());
        if (m.plan.textEncoderPath)
            out << QString::fromStdString(m.plan.textEncoderPath->string());
        for (const auto& up : {m.plan.spatialUpsamplerPath, m.plan.temporalUpsamplerPath, m.plan.distilledLoraPath})
            if (up)
                out << QString::fromStdString(up->string());
    };
    std::lock_guard lock(m_impl->mutex);
    if (m_impl->residentInfo)
        add(m_impl->residentInfo->model);
    for (const auto& [_, j] : m_impl->jobs)
        if ((j->status.state == JobState::Queued || j->status.state == JobState::Running) && j->status.kind != JobKind::Unload) {
            add(j->model);
            for (const auto& l : j->generate.request.loras)
                out << QString::fromStdString(l.path.string());
        }
    out.removeDuplicates();
    return out;
}

QString Engine::deviceLost() const
{
    std::lock_guard lock(m_impl->mutex);
    return m_impl->lost;
}

quint64 Engine::requestMemoryPlan(const ModelRef& model, facade::SizeRequest size, facade::Placement placement)
{
    quint64 ticket;
    {
        std::lock_guard lock(m_impl->mutex);
        ticket = m_impl->nextTicket++;
    }
    auto plan = model.plan;
    plan.placement = placement;
    QPointer<Engine> self(this);
    auto* impl = m_impl.get();
    m_impl->planPool.start([impl, self, ticket, plan, size] {
        Result<facade::MemoryPlan> r = makeError(ErrorCode::Internal, "not planned");
        try {
            r = facade::Generator::planMemory(plan, size);
        } catch (const std::exception& e) {
            r = makeError(ErrorCode::Internal, std::string("planning memory failed: ") + e.what());
        }
        {
            std::lock_guard lock(impl->mutex);
            impl->plans.insert_or_assign(ticket, std::move(r));
            while (impl->plans.size() > 32)
                impl->plans.erase(impl->plans.begin());
        }
        QMetaObject::invokeMethod(
            self,
            [self, ticket] {
                if (self)
                    emit self->memoryPlanReady(ticket);
            },
            Qt::QueuedConnection);
    });
    return ticket;
}

std::optional<Result<facade::MemoryPlan>> Engine::memoryPlan(quint64 ticket) const
{
    std::lock_guard lock(m_impl->mutex);
    const auto it = m_impl->plans.find(ticket);
    if (it == m_impl->plans.end())
        return std::nullopt;
    return it->second;
}

// ---------------------------------------------------------------------------------------------

void Engine::Impl::loop()
{
    pristine = facade::ProcessSettings::capture();
    for (;;) {
        std::shared_ptr<Job> job;
        {
            std::unique_lock lock(mutex);
            wake.wait(lock, [&] { return stopping || !queue.empty(); });
            if (stopping)
                return;
            job = queue.front();
            queue.pop_front();
            job->status.state = JobState::Running;
        }
        emitChanged(job->status.id);
        const auto started = Clock::now();
        JobState end = JobState::Done;
        QString error;
        ErrorCode code = ErrorCode::Internal;
        // Nothing a job does may end the process: a bad file, a lying header or a full disk
        // fails this job only.
        try {
            run(job);
        } catch (const JobError& e) {
            end = e.code == ErrorCode::Cancelled ? JobState::Cancelled : JobState::Failed;
            error = e.message;
            code = e.code;
        } catch (const std::exception& e) {
            end = JobState::Failed;
            error = Engine::tr("Unexpected error: %1").arg(QString::fromUtf8(e.what()));
        } catch (...) {
            end = JobState::Failed;
            error = Engine::tr("Unexpected error");
        }
        if (end != JobState::Done)
            afterFailure(code);
        {
            std::lock_guard lock(mutex);
            job->status.state = job->stop.stop_requested() && end == JobState::Failed ? JobState::Cancelled : end;
            job->status.error = job->status.state == JobState::Cancelled ? QString() : error;
            job->status.errorCode = code;
            job->status.elapsedSeconds = std::chrono::duration<double>(Clock::now() - started).count();
            if (end == JobState::Done)
                job->status.etaSeconds = 0;
        }
        if (end == JobState::Failed)
            spdlog::warn("engine: job {} failed: {}", job->status.id, error.toStdString());
        const auto id = job->status.id;
        QMetaObject::invokeMethod(
            self,
            [s = self, id]() {
                emit s->jobChanged(id);
                emit s->jobFinished(id);
            },
            Qt::QueuedConnection);
    }
}

void Engine::Impl::afterFailure(ErrorCode code)
{
    facade::releaseDeviceCaches();
    if (code != ErrorCode::DeviceFault)
        return;
    // A fault may leave the CUDA context unusable for the rest of the process.
    if (!facade::deviceHealthy(options.device.toStdString())) {
        {
            std::lock_guard lock(mutex);
            lost = Engine::tr("The GPU (%1) reported a fault and cannot run more work in this process. Restart Vireo Studio to use it "
                              "again; the CPU still works.")
                       .arg(options.device);
            residentInfo.reset();
        }
        try {
            generator.reset();
        } catch (...) {
        }
        QMetaObject::invokeMethod(
            self, [s = self] { emit s->residentChanged(); }, Qt::QueuedConnection);
    }
}

void Engine::Impl::run(const std::shared_ptr<Job>& job)
{
    switch (job->status.kind) {
    case JobKind::Load: ensureLoaded(job, job->model, job->size, job->force); return;
    case JobKind::Generate: generate(job); return;
    case JobKind::Unload: unload(); return;
    }
}

void Engine::Impl::progress(const std::shared_ptr<Job>& job, const QString& phase, qint64 done, qint64 total, double etaSeconds, bool force)
{
    const auto now = Clock::now();
    {
        std::lock_guard lock(mutex);
        auto& s = job->status;
        s.phase = phase;
        s.done = done;
        s.total = total;
        s.etaSeconds = etaSeconds;
        if (!force && phase == job->lastPhase && now - job->lastEmit < std::chrono::milliseconds(100) && done < total)
            return;
        job->lastEmit = now;
        job->lastPhase = phase;
    }
    const auto id = job->status.id;
    QMetaObject::invokeMethod(
        self,
        [s = self, id, phase, done, total, etaSeconds] {
            emit s->jobChanged(id);
            emit s->jobProgress(id, phase, done, total, etaSeconds);
        },
        Qt::QueuedConnection);
}

void Engine::Impl::unload()
{
    generator.reset();
    facade::releaseDeviceCaches();
    {
        std::lock_guard lock(mutex);
        residentInfo.reset();
    }
    QMetaObject::invokeMethod(
        self, [s = self] { emit s->residentChanged(); }, Qt::QueuedConnection);
}

void Engine::Impl::ensureLoaded(const std::shared_ptr<Job>& job, const ModelRef& model, const facade::SizeRequest& size, bool force)
{
    {
        std::lock_guard lock(mutex);
        if (!lost.isEmpty() && model.plan.device != "cpu")
            throw JobError{ErrorCode::DeviceFault, lost};
    }
    // The trust decision is checked here, right before weights are placed, whatever asked for
    // the load (the window, the CLI, an API).
    for (const auto& repo : model.repos)
        if (options.repoTrusted && !options.repoTrusted(repo))
            throw JobError{ErrorCode::PermissionDenied,
                Engine::tr("%1 is not from a catalog publisher and was not approved: review and approve it on the Downloads page first")
                    .arg(repo)};
    if (generator) {
        std::optional<Resident> current;
        {
            std::lock_guard lock(mutex);
            current = residentInfo;
        }
        if (current && current->model.sameLoadAs(model))
            return;
    }
    auto plan = facade::Generator::planMemory(model.plan, size);
    if (!plan)
        throw JobError{plan.error().code, q(plan.error().message)};
    // A swap: unless the new model fits beside the old one, the old one goes first.
    if (generator && !plan->fits) {
        unload();
        plan = facade::Generator::planMemory(model.plan, size);
        if (!plan)
            throw JobError{plan.error().code, q(plan.error().message)};
    }
    if (!plan->fits && !force)
        throw JobError{ErrorCode::OutOfMemory, q(plan->explanation)};
    spdlog::info("engine: loading {} ({})", model.title.toStdString(), plan->explanation);
    const auto started = Clock::now();
    auto loaded = facade::Generator::load(
        model.plan, *plan,
        [&](const facade::Progress& p) { progress(job, q(std::string(facade::phaseName(p.phase))), p.done, p.total, -1, false); },
        job->stop.get_token());
    if (!loaded)
        throw JobError{loaded.error().code, q(loaded.error().message)};
    // The old model (if both fit) goes now that the new one is in place; its destruction puts
    // back the settings it found, so the new one's are applied again, to be undone to the
    // engine thread's own when it goes in turn.
    generator = std::move(*loaded);
    generator->reapplyProcessSettings(pristine);
    Resident r;
    r.model = model;
    r.plan = generator->memoryPlan();
    r.bytes = generator->residentBytes();
    r.matmulPaths = generator->matmulPaths();
    const auto paths = r.pathsText().toStdString();
    {
        std::lock_guard lock(mutex);
        residentInfo = std::move(r);
    }
    spdlog::info("engine: loaded {} in {:.1f} s; {}", model.title.toStdString(),
        std::chrono::duration<double>(Clock::now() - started).count(), paths);
    QMetaObject::invokeMethod(
        self, [s = self] { emit s->residentChanged(); }, Qt::QueuedConnection);
}

// What did run where goes into the recipe in place of what the load expected, and every slower
// path taken than planned is a warning in the log and the recipe, with its count.
static void ranPaths(output::Recipe& recipe, const std::string& paths, const std::vector<std::string>& warnings)
{
    if (!paths.empty())
        recipe.paths = paths;
    recipe.pathWarnings = warnings;
    for (const auto& w : warnings)
        spdlog::warn("engine: {}", w);
}

// The recipe's fields every output shares: the exact files by hash, the model and the request.
output::Recipe Engine::Impl::recipeBase(const GenerateJob& g) const
{
    output::Recipe recipe;
    recipe.app = options.appName.toStdString();
    // What was planned to run where, as loaded (this runs on the engine thread, which owns
    // residentInfo); what did run comes with the result.
    if (residentInfo)
        recipe.paths = residentInfo->pathsText().toStdString();
    recipe.plannedPaths = generator->memoryPlan().pathsText;
    recipe.family = g.model.family.toStdString();
    recipe.variant = g.model.variant.toStdString();
    recipe.modelVersion = generator->version();
    recipe.repo = g.model.repos.isEmpty() ? std::string() : g.model.repos.join(QLatin1Char(',')).toStdString();
    recipe.commit = g.model.commit.toStdString();
    recipe.modelTitle = g.model.title.toStdString();
    recipe.modelKey = g.model.key.toStdString();
    recipe.files = output::describeWeightFiles(generator->files());
    recipe.request = g.request;
    // Kept below with their hashes and outcomes; a condition's decoded frames stay out of it.
    recipe.request.loras.clear();
    recipe.request.conditions.clear();
    recipe.request.audio.reset();
    recipe.request.retake.reset();
    recipe.request.references.clear();
    recipe.device = generator->memoryPlan().device;
    recipe.dtype = generator->memoryPlan().dtype;
    recipe.placement = std::string(facade::placementName(generator->memoryPlan().placement));
    recipe.created = QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString();
    return recipe;
}

std::filesystem::path Engine::Impl::outputPathFor(const GenerateJob& g, const std::string& extension) const
{
    if (g.outputPath.isEmpty()) {
        auto path = output::freshOutputPath(g.outputFolder.toStdString(), g.request.prompt, extension);
        if (!path)
            throw JobError{path.error().code, q(path.error().message)};
        return *path;
    }
    if (QFileInfo::exists(g.outputPath) || QFileInfo(g.outputPath).isSymLink())
        throw JobError{
            ErrorCode::InvalidArgument, Engine::tr("%1 exists; choose another name (outputs are never overwritten)").arg(g.outputPath)};
    if (!g.outputPath.endsWith(QLatin1Char('.') + q(extension), Qt::CaseInsensitive))
        throw JobError{ErrorCode::InvalidArgument,
            Engine::tr("%1: this model makes %2 files; name the output .%3")
                .arg(g.outputPath, extension == "png" ? Engine::tr("image (PNG)") : Engine::tr("video (MP4)"), q(extension))};
    return std::filesystem::path(g.outputPath.toStdString());
}

void Engine::Impl::finishJob(
    const std::shared_ptr<Job>& job, const std::filesystem::path& path, const output::Recipe& recipe, Clock::time_point generated)
{
    {
        std::lock_guard lock(mutex);
        job->status.outputPath = QString::fromStdString(path.string());
        job->status.writeSeconds = std::chrono::duration<double>(Clock::now() - generated).count();
        job->status.recipe = recipe;
        job->status.phase = QStringLiteral("done");
        job->status.done = job->status.total;
    }
    spdlog::info("engine: wrote {}", path.string());
}

// What can be refused without the model is refused before it loads: a two-stage request that
// cannot run, a conditioning file that is gone or does not decode. The request with the
// conditions decoded, and whether it takes the two-stage path.
facade::GenerateRequest Engine::Impl::decodedRequest(const std::shared_ptr<Job>& job, bool* twoStageOut)
{
    const auto& g = job->generate;
    auto request = g.request;
    const bool imageModel = facade::detectModelKind(g.model.plan.modelPaths) == facade::ModelKind::Image;
    bool twoStage = false;
    if (g.audio) {
        if (imageModel)
            throw JobError{ErrorCode::InvalidArgument,
                Engine::tr("%1 makes images: a sound to follow needs a video model (LTX-2)").arg(g.model.title)};
        progress(job, QStringLiteral("read conditions"), 0, 1, -1, true);
        auto audio = prepareConditionAudio(*g.audio);
        if (!audio)
            throw JobError{audio.error().code, q(audio.error().message)};
        if (job->stop.stop_requested())
            throw JobError{ErrorCode::Cancelled, Engine::tr("cancelled")};
        // A length left to the sound: the clip that holds it, decided here so the stage plan,
        // the conditions' checks and the recipe all see the frames that run.
        if (request.frames == 0)
            request.frames = facade::framesForSound(audio->seconds(), request.fps);
        request.audio = std::move(*audio);
    }
    if (g.retake) {
        if (imageModel)
            throw JobError{
                ErrorCode::InvalidArgument, Engine::tr("%1 makes images: a retake needs a video model (LTX-2)").arg(g.model.title)};
        progress(job, QStringLiteral("read conditions"), 0, 1, -1, true);
        auto clip = prepareRetake(*g.retake, static_cast<int>(request.width), static_cast<int>(request.height), request.frames);
        if (!clip)
            throw JobError{clip.error().code, q(clip.error().message)};
        if (job->stop.stop_requested())
            throw JobError{ErrorCode::Cancelled, Engine::tr("cancelled")};
        request.retake = std::move(*clip);
    }
    if (!g.references.empty()) {
        if (imageModel)
            throw JobError{ErrorCode::InvalidArgument,
                Engine::tr("%1 makes images: a reference clip needs a video model (LTX-2) and its IC-LoRA").arg(g.model.title)};
        const auto total = static_cast<qint64>(g.references.size());
        for (std::size_t i = 0; i < g.references.size(); ++i) {
            progress(job, QStringLiteral("read conditions"), static_cast<qint64>(i), total, -1, i == 0);
            if (job->stop.stop_requested())
                throw JobError{ErrorCode::Cancelled, Engine::tr("cancelled")};
            auto c = prepareReference(g.references[i], static_cast<int>(request.width), static_cast<int>(request.height), request.frames);
            if (!c)
                throw JobError{c.error().code, q(c.error().message)};
            request.references.push_back(std::move(*c));
        }
    }
    if (!imageModel) {
        auto stages = facade::planStages(g.model.plan, request);
        if (!stages)
            throw JobError{stages.error().code, q(stages.error().message)};
        twoStage = stages->twoStage;
    }
    if (!g.conditions.empty()) {
        if (imageModel)
            throw JobError{ErrorCode::InvalidArgument,
                Engine::tr("%1 makes images: a start image or keyframe needs a video model (LTX-2)").arg(g.model.title)};
        const auto total = static_cast<qint64>(g.conditions.size());
        for (std::size_t i = 0; i < g.conditions.size(); ++i) {
            progress(job, QStringLiteral("read conditions"), static_cast<qint64>(i), total, -1, i == 0);
            if (job->stop.stop_requested())
                throw JobError{ErrorCode::Cancelled, Engine::tr("cancelled")};
            auto c = prepareCondition(g.conditions[i], static_cast<int>(request.width), static_cast<int>(request.height), request.frames);
            if (!c)
                throw JobError{c.error().code, q(c.error().message)};
            request.conditions.push_back(std::move(*c));
        }
        progress(job, QStringLiteral("read conditions"), total, total, -1, true);
    }
    *twoStageOut = twoStage;
    return request;
}

// The phases of a video run with their units, for the ETA.
std::vector<std::pair<QString, qint64>> Engine::Impl::videoPhases(
    const GenerateJob& g, const facade::GenerateRequest& request, bool twoStage)
{
    const int steps = g.request.steps > 0 ? g.request.steps : (g.request.schedule == "dev" ? 40 : 8);
    std::vector<std::pair<QString, qint64>> phases{{QStringLiteral("encode prompt"), 1}};
    if (!request.conditions.empty() || request.audio || request.retake || !request.references.empty())
        phases.push_back({QStringLiteral("encode conditions"),
            static_cast<qint64>(request.conditions.size() + request.references.size()) + (request.audio ? 1 : 0)
                + (request.retake ? 2 : 0)});
    phases.push_back({QStringLiteral("denoise"), steps});
    if (twoStage) {
        phases.push_back({QStringLiteral("upsample latents"), 1});
        phases.push_back({QStringLiteral("refine"), 3});
    }
    for (const auto& [name, units] :
        std::initializer_list<std::pair<QString, qint64>>{{QStringLiteral("decode video"), 1}, {QStringLiteral("decode audio"), 1},
            {QStringLiteral("vocoder"), 1}, {QStringLiteral("mux"), facade::planningFrames(g.request) + 1}})
        phases.push_back({name, units});
    return phases;
}

// The recipe of a finished video: the exact files by hash, and everything the request said.
output::Recipe Engine::Impl::videoRecipe(const GenerateJob& g, const facade::VideoResult& result) const
{
    output::Recipe recipe = recipeBase(g);
    recipe.kind = "video";
    recipe.pipeline = "ltx2";
    // What ran, where the request left it to the model (the schedule's steps).
    auto& ran = recipe.request;
    ran.schedule = result.schedule;
    recipe.sigmas = result.sigmas;
    ran.steps = static_cast<int>(result.sigmas.size()) - 1;
    ran.width = result.width;
    ran.height = result.height;
    // Temporal rounds double the frames (less one) and the rate of what the passes made: the
    // request keeps the passes' own, so making it again makes the same video.
    const int scale = 1 << std::clamp(result.stages.temporalRounds, 0, 2);
    ran.frames = (result.frameCount - 1) / scale + 1;
    ran.fps = result.fps / scale;
    recipe.predictedSeconds = result.predictedSeconds;
    recipe.enhancedPrompt = result.enhancedPrompt;
    ran.speed = result.speed;
    recipe.audioSampleRate = result.sampleRate;
    recipe.audioChannels = result.channels;
    recipe.stepsSkipped = result.stepsSkipped;
    recipe.cudaGraphs = result.cudaGraphs;
    recipe.secondsPerPhase = result.secondsPerPhase;
    ranPaths(recipe, result.paths, result.pathWarnings);
    // Every LoRA asked for, applied or not, with the reason when not: never dropped in silence.
    for (const auto& l : result.loras)
        recipe.loras.push_back({l.path.string(),
            QFileInfo::exists(QString::fromStdString(l.path.string())) ? output::fileSha256(l.path) : std::string(), l.strength, l.status});

    recipe.stages = result.stages.twoStage ? "two" : "single";
    recipe.stagesReason = result.stages.reason;

    return recipe;
}

// What each condition was is kept beside the video, so "Generate again" finds it after the
// original moved: a still's file, a clip's frames that were used (never a copy of a long clip).
// One that cannot be kept costs the reproduction, not the video. Returns the copies made.
std::vector<std::filesystem::path> Engine::Impl::keepConditions(
    const GenerateJob& g, const facade::GenerateRequest& request, const std::filesystem::path& path, output::Recipe& recipe)
{
    std::vector<std::filesystem::path> copies;
    const std::size_t given = g.request.conditions.size();  // decoded by the caller: no file, CRF unknown
    for (std::size_t i = 0; i < request.conditions.size(); ++i) {
        const auto& c = request.conditions[i];
        const int crf = i >= given && c.frames == 1 ? g.conditions[i - given].crf : 0;
        const bool fromEnd = i >= given && c.frames > 1 && g.conditions[i - given].clipFromEnd;
        output::ConditionUse use{c.source, {}, c.sha256, c.frame, c.strength, crf, c.frames, fromEnd, {}, false, {}, {}};
        if (i >= given) {
            auto kept = c.frames > 1 ? keepConditionFrames(c, g.request.fps, path, static_cast<int>(i))
                                     : copyConditionBeside(c.source, c.sha256, path, static_cast<int>(i));
            if (kept) {
                use.copy = kept->path.filename().string();
                use.copySha256 = kept->sha256;
                use.copyIsFrames = kept->frames;
                copies.push_back(kept->path);
            } else {
                spdlog::warn("engine: {}", kept.error().message);
            }
            // The sound an extension continued: the frames' copy has none.
            if (c.sound && c.frames > 1) {
                if (auto sound = keepConditionAudio(*c.sound, c.sound->seconds(), path, "cond" + std::to_string(i))) {
                    use.soundCopy = sound->path.filename().string();
                    use.soundCopySha256 = sound->sha256;
                    copies.push_back(sound->path);
                } else {
                    spdlog::warn("engine: {}", sound.error().message);
                }
            }
        }
        recipe.conditions.push_back(std::move(use));
    }
    if (request.audio) {
        const auto& a = *request.audio;
        output::AudioUse use{a.source, a.sha256, {}, {}, a.seconds(), a.sampleRate, static_cast<int>(a.channels.size())};
        // The samples the clip used: its duration at the rate the passes ran.
        const double seconds = static_cast<double>(recipe.request.frames) / std::max(0.5, recipe.request.fps);
        if (auto kept = keepConditionAudio(a, seconds, path)) {
            use.copy = kept->path.filename().string();
            use.copySha256 = kept->sha256;
            copies.push_back(kept->path);
        } else {
            spdlog::warn("engine: {}", kept.error().message);
        }
        recipe.audio = std::move(use);
    }
    if (request.retake && !request.retake->clip.rgb.empty()) {
        // The frames the retake started from, lossless, and its sound's samples: Generate again
        // (or a retake of the retake) needs them, not the source, which may move or change.
        const auto& k = *request.retake;
        output::RetakeUse use{k.clip.source, k.clip.sha256, {}, {}, {}, {}, k.start, k.end, k.video, k.audio};
        if (auto kept = keepConditionFrames(k.clip, g.request.fps, path, 0)) {
            use.copy = kept->path.filename().string();
            use.copySha256 = kept->sha256;
            copies.push_back(kept->path);
        } else {
            spdlog::warn("engine: {}", kept.error().message);
        }
        if (k.sound) {
            const double seconds = static_cast<double>(recipe.request.frames) / std::max(0.5, recipe.request.fps);
            if (auto kept = keepConditionAudio(*k.sound, seconds, path)) {
                use.soundCopy = kept->path.filename().string();
                use.soundCopySha256 = kept->sha256;
                copies.push_back(kept->path);
            } else {
                spdlog::warn("engine: {}", kept.error().message);
            }
        }
        recipe.retake = std::move(use);
    }
    for (std::size_t i = 0; i < request.references.size(); ++i) {
        // The reference frames the IC-LoRA followed, lossless: a depth or pose clip is often
        // made for the one video and moved or remade after.
        const auto& c = request.references[i];
        output::ReferenceUse use{c.source, c.sha256, {}, {}, c.strength, c.frames};
        if (auto kept = keepConditionFrames(c, g.request.fps, path, static_cast<int>(i), "ref")) {
            use.copy = kept->path.filename().string();
            use.copySha256 = kept->sha256;
            copies.push_back(kept->path);
        } else {
            spdlog::warn("engine: {}", kept.error().message);
        }
        recipe.references.push_back(std::move(use));
    }
    return copies;
}

void Engine::Impl::generate(const std::shared_ptr<Job>& job)
{
    const auto& g = job->generate;
    bool twoStage = false;
    const auto request = decodedRequest(job, &twoStage);
    const auto loadStart = Clock::now();
    ensureLoaded(job, g.model, job->size, job->force);
    {
        std::lock_guard lock(mutex);
        job->status.loadSeconds = std::chrono::duration<double>(Clock::now() - loadStart).count();
    }
    const auto stop = job->stop.get_token();
    if (stop.stop_requested())
        throw JobError{ErrorCode::Cancelled, Engine::tr("cancelled")};
    const bool image = generator->kind() == facade::ModelKind::Image;
    // A named output of the wrong kind (or one that exists) fails now, not after the work.
    if (g.writeOutput && !g.outputPath.isEmpty())
        (void)outputPathFor(g, image ? "png" : "mp4");
    if (image) {
        generateImage(job);
        return;
    }

    const auto key = etaKey(g.model, request, twoStage);
    const auto phases = videoPhases(g, request, twoStage);
    EtaTracker tracker(&eta, key, phases);
    QElapsedTimer clock;
    clock.start();
    auto now = [&] { return static_cast<double>(clock.nsecsElapsed()) / 1e9; };

    const auto loadDone = Clock::now();
    auto result = generator->generate(
        request,
        [&](const facade::Progress& p) {
            const auto phase = q(std::string(facade::phaseName(p.phase)));
            const double eta = tracker.update(phase, p.done, p.total, now());
            progress(job, phase, p.done, p.total, eta, false);
            if (p.preview)
                preview(job, *p.preview);
        },
        stop);
    if (!result)
        throw JobError{result.error().code, q(result.error().message)};
    const auto generated = Clock::now();
    {
        std::lock_guard lock(mutex);
        job->status.generateSeconds = std::chrono::duration<double>(generated - loadDone).count();
    }
    if (!g.writeOutput) {
        // Nothing is written, but how long each phase took is still worth reporting (--repeat).
        {
            std::lock_guard lock(mutex);
            job->status.recipe.secondsPerPhase = result->secondsPerPhase;
            job->status.recipe.stages = result->stages.twoStage ? "two" : "single";
        }
        tracker.commit(eta, now());
        return;
    }

    // The recipe: the exact files by hash, and everything the request said.
    progress(job, QStringLiteral("mux"), 0, result->frameCount + 1, tracker.update(QStringLiteral("mux"), 0, result->frameCount + 1, now()),
        true);
    auto recipe = videoRecipe(g, *result);
    const auto path = outputPathFor(g, "mp4");
    const auto copies = keepConditions(g, request, path, recipe);
    auto written = output::writeVideo(
        path, *result, recipe,
        [&](std::int64_t done, std::int64_t total) {
            progress(job, QStringLiteral("mux"), done, total, tracker.update(QStringLiteral("mux"), done, total, now()), false);
        },
        stop);
    if (!written) {
        std::error_code ec;
        for (const auto& c : copies)
            std::filesystem::remove(c, ec);
        throw JobError{written.error().code, q(written.error().message)};
    }
    tracker.commit(eta, now());
    eta.save();
    finishJob(job, path, recipe, generated);
}

void Engine::Impl::preview(const std::shared_ptr<Job>& job, const facade::Preview& preview)
{
    auto strip = stripImage(preview);
    const auto id = job->status.id;
    const int step = preview.step;
    QMetaObject::invokeMethod(
        self, [s = self, id, strip, step] { emit s->previewReady(id, strip, step); }, Qt::QueuedConnection);
}

void Engine::Impl::generateImage(const std::shared_ptr<Job>& job)
{
    const auto& g = job->generate;
    const auto stop = job->stop.get_token();
    const auto key = etaKey(g.model, g.request, false);
    const int steps = g.request.steps > 0 ? g.request.steps : 48;
    EtaTracker tracker(&eta, key,
        {{QStringLiteral("encode prompt"), 1}, {QStringLiteral("denoise"), steps}, {QStringLiteral("decode image"), 1},
            {QStringLiteral("write"), 1}});
    QElapsedTimer clock;
    clock.start();
    auto now = [&] { return static_cast<double>(clock.nsecsElapsed()) / 1e9; };
    const auto started = Clock::now();
    auto result = generator->generateImage(
        g.request,
        [&](const facade::Progress& p) {
            const auto phase = q(std::string(facade::phaseName(p.phase)));
            progress(job, phase, p.done, p.total, tracker.update(phase, p.done, p.total, now()), false);
            if (p.preview)
                preview(job, *p.preview);
        },
        stop);
    if (!result)
        throw JobError{result.error().code, q(result.error().message)};
    const auto generated = Clock::now();
    {
        std::lock_guard lock(mutex);
        job->status.generateSeconds = std::chrono::duration<double>(generated - started).count();
    }
    if (!g.writeOutput) {
        tracker.commit(eta, now());
        return;
    }
    progress(job, QStringLiteral("write"), 0, 1, tracker.update(QStringLiteral("write"), 0, 1, now()), true);
    output::Recipe recipe = recipeBase(g);
    recipe.kind = "image";
    recipe.pipeline = "ideogram4";
    auto& ran = recipe.request;
    ran.schedule = "logit-normal";
    recipe.sigmas = result->sigmas;
    ran.steps = static_cast<int>(result->sigmas.size()) - 1;
    // A constant weight is `guidance`; a schedule (the reference's 45 x 7 then 3 x 3) is kept
    // whole in the request, since `guidance` alone would not make the image again.
    if (!result->guidance.empty())
        ran.guidance = result->guidance.front();
    ran.audioGuidance = 1.0;
    ran.width = result->width;
    ran.height = result->height;
    ran.frames = 1;
    ran.fps = 0;
    recipe.secondsPerPhase = result->secondsPerPhase;
    ranPaths(recipe, result->paths, result->pathWarnings);
    const auto path = outputPathFor(g, "png");
    const QImage image(result->rgb.data(), result->width, result->height, result->width * 3, QImage::Format_RGB888);
    auto written = output::writeImage(path, image.copy(), recipe);
    if (!written)
        throw JobError{written.error().code, q(written.error().message)};
    progress(job, QStringLiteral("write"), 1, 1, 0, true);
    tracker.commit(eta, now());
    eta.save();
    finishJob(job, path, recipe, generated);
}

quint64 Engine::newJobId()
{
    static std::atomic<quint64> counter{1};
    return counter++;
}

}  // namespace vireo::runtime
