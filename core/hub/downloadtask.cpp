#include "core/hub/downloadtask.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QPointer>

#include <algorithm>
#include <utility>

namespace vireo::hub {

namespace {

// A model's sources share one volume: they fit together or not at all.
Preflight preflightOf(const std::vector<FilePlan>& plans, const HfCache& cache, std::uint64_t headroom)
{
    FilePlan merged;
    for (const auto& p : plans)
        merged.files.insert(merged.files.end(), p.files.begin(), p.files.end());
    return preflight(merged, cache, headroom);
}

QJsonArray toArray(const std::vector<std::string>& v)
{
    QJsonArray a;
    for (const auto& s : v)
        a.append(QString::fromStdString(s));
    return a;
}

std::vector<std::string> fromArray(const QJsonValue& v)
{
    std::vector<std::string> out;
    for (const auto& s : v.toArray())
        out.push_back(s.toString().toStdString());
    return out;
}

// A repo without model_index.json: the weights and the small files that describe them.
// Pickle formats (.bin, .pt, .ckpt) are never fetched: loading them would run code.
PlanRule weightsRule()
{
    PlanRule r;
    r.mode = PlanRule::Mode::Files;
    r.include = {"*.safetensors", "*.safetensors.index.json", "*.gguf", "*.json", "*.txt", "*.model", "*.md"};
    return r;
}

}  // namespace

TaskSpec TaskSpec::forRepo(const std::string& repo, const std::string& revision)
{
    TaskSpec s;
    s.key = QStringLiteral("repo:%1@%2").arg(QString::fromStdString(repo), QString::fromStdString(revision));
    s.title = QString::fromStdString(repo);
    Source src;
    src.repo = repo;
    src.revision = revision;
    src.role = "model";
    src.autoRule = true;
    s.sources.push_back(src);
    return s;
}

QByteArray TaskSpec::toJson() const
{
    QJsonArray sources;
    for (const auto& s : this->sources) {
        sources.append(QJsonObject{{QStringLiteral("repo"), QString::fromStdString(s.repo)},
            {QStringLiteral("revision"), QString::fromStdString(s.revision)}, {QStringLiteral("role"), QString::fromStdString(s.role)},
            {QStringLiteral("auto"), s.autoRule},
            {QStringLiteral("mode"), s.rule.mode == PlanRule::Mode::Diffusers ? QStringLiteral("diffusers") : QStringLiteral("files")},
            {QStringLiteral("include"), toArray(s.rule.include)}, {QStringLiteral("exclude"), toArray(s.rule.exclude)},
            {QStringLiteral("components"), toArray(s.rule.components)},
            {QStringLiteral("weight_variant"), QString::fromStdString(s.rule.weightVariant)}});
    }
    return QJsonDocument(QJsonObject{{QStringLiteral("key"), key}, {QStringLiteral("title"), title}, {QStringLiteral("catalog"), catalogId},
                             {QStringLiteral("sources"), sources}})
        .toJson(QJsonDocument::Compact);
}

std::optional<TaskSpec> TaskSpec::fromJson(const QByteArray& json)
{
    const auto o = QJsonDocument::fromJson(json).object();
    if (o.isEmpty() || !o.value(QStringLiteral("sources")).isArray())
        return std::nullopt;
    TaskSpec s;
    s.key = o.value(QStringLiteral("key")).toString();
    s.title = o.value(QStringLiteral("title")).toString();
    s.catalogId = o.value(QStringLiteral("catalog")).toString();
    for (const auto& v : o.value(QStringLiteral("sources")).toArray()) {
        const auto so = v.toObject();
        Source src;
        src.repo = so.value(QStringLiteral("repo")).toString().toStdString();
        src.revision = so.value(QStringLiteral("revision")).toString(QStringLiteral("main")).toStdString();
        src.role = so.value(QStringLiteral("role")).toString().toStdString();
        src.autoRule = so.value(QStringLiteral("auto")).toBool();
        src.rule.mode =
            so.value(QStringLiteral("mode")).toString() == QStringLiteral("diffusers") ? PlanRule::Mode::Diffusers : PlanRule::Mode::Files;
        src.rule.include = fromArray(so.value(QStringLiteral("include")));
        src.rule.exclude = fromArray(so.value(QStringLiteral("exclude")));
        src.rule.components = fromArray(so.value(QStringLiteral("components")));
        src.rule.weightVariant = so.value(QStringLiteral("weight_variant")).toString().toStdString();
        if (src.repo.empty())
            return std::nullopt;
        s.sources.push_back(std::move(src));
    }
    if (s.key.isEmpty() || s.sources.empty())
        return std::nullopt;
    return s;
}

DownloadTask::DownloadTask(
    TaskSpec spec, std::shared_ptr<const HubClient> client, std::shared_ptr<const HfCache> cache, DownloadOptions options, QObject* parent)
    : QObject(parent), m_spec(std::move(spec)), m_client(std::move(client)), m_cache(std::move(cache)), m_options(options)
{
}

DownloadTask::~DownloadTask()
{
    cancelAll();
    join();
}

void DownloadTask::join()
{
    if (m_worker.joinable())
        m_worker.join();
}

void DownloadTask::reconfigure(std::shared_ptr<const HubClient> client, std::shared_ptr<const HfCache> cache, DownloadOptions options)
{
    const bool cacheMoved = cache->root() != m_cache->root();
    const bool marginChanged = options.headroomBytes != m_options.headroomBytes;
    m_client = std::move(client);
    m_cache = std::move(cache);
    m_options = options;
    if (cacheMoved && m_state != State::Idle) {
        if (busy())
            m_replanAfterRun = true;
        else
            plan();
    } else if (marginChanged && !busy() && !m_plans.empty()) {
        // Whether the plan fits is a local question: no need to ask the Hub again.
        m_preflight = preflightOf(m_plans, *m_cache, m_options.headroomBytes);
        emit stateChanged(m_state);
    }
}

void DownloadTask::setState(State state, const QString& message, HubErrorKind kind)
{
    m_state = state;
    m_message = message;
    m_errorKind = kind;
    emit stateChanged(state);
}

bool DownloadTask::complete() const
{
    if (m_rows.empty())
        return false;
    return std::all_of(m_rows.begin(), m_rows.end(), [](const Row& r) { return r.status.state == FileState::Done; });
}

DownloadTask::Totals DownloadTask::totals() const
{
    Totals t;
    for (const auto& r : m_rows) {
        t.totalBytes += r.file.size;
        t.bytesDone += std::min(r.status.bytesDone, r.file.size);
        t.bytesPerSecond += r.status.state == FileState::Downloading ? r.status.bytesPerSecond : 0;
        ++t.files;
        t.filesDone += r.status.state == FileState::Done;
        t.filesFailed += r.status.state == FileState::Failed;
        t.filesCancelled += r.status.state == FileState::Cancelled;
    }
    for (const auto& p : m_plans)
        t.presentBytes += p.presentBytes();
    t.bytesDone = std::max(std::min(t.bytesDone, t.totalBytes), m_state == State::Downloading ? m_reportedDone : 0);
    if (t.bytesPerSecond > 0)
        t.etaSeconds = static_cast<double>(t.totalBytes - t.bytesDone) / t.bytesPerSecond;
    return t;
}

void DownloadTask::plan()
{
    if (busy())
        return;
    join();
    m_cancelAll = false;
    setState(State::Planning);
    m_worker = std::thread([this, spec = m_spec, client = m_client, cache = m_cache, headroom = m_options.headroomBytes]() {
        std::vector<FilePlan> plans;
        HubError error;
        bool failed = false;
        // Whatever goes wrong in here fails this plan, never the process.
        try {
            for (const auto& source : spec.sources) {
                if (m_cancelAll)
                    break;
                auto rule = source.rule;
                if (source.autoRule)
                    rule.mode = PlanRule::Mode::Diffusers;
                auto planned = makePlan(*client, *cache, source.repo, source.revision, rule, &m_cancelAll);
                if (!planned && source.autoRule && planned.error().kind == HubErrorKind::EntryNotFound)
                    planned = makePlan(*client, *cache, source.repo, source.revision, weightsRule(), &m_cancelAll);
                if (!planned) {
                    error = planned.error();
                    failed = true;
                    break;
                }
                plans.push_back(std::move(*planned));
            }
        } catch (const std::exception& e) {
            error = {HubErrorKind::Io, 0, "planning failed: internal error (" + std::string(e.what()) + ")"};
            failed = true;
        } catch (...) {
            error = {HubErrorKind::Io, 0, "planning failed: internal error"};
            failed = true;
        }
        auto verdict = preflightOf(plans, *cache, headroom);
        QMetaObject::invokeMethod(
            this,
            [this, plans = std::move(plans), verdict, error, failed]() mutable {
                join();
                if (std::exchange(m_replanAfterRun, false)) {
                    m_state = State::Idle;  // not shown: the plan against the new folder follows at once
                    plan();
                    return;
                }
                if (failed) {
                    setState(State::PlanFailed, QString::fromStdString(error.message), error.kind);
                    return;
                }
                applyPlans(std::move(plans), verdict);
            },
            Qt::QueuedConnection);
    });
}

void DownloadTask::applyPlans(std::vector<FilePlan> plans, Preflight preflight)
{
    m_plans = std::move(plans);
    m_preflight = std::move(preflight);
    m_rows.clear();
    for (std::size_t s = 0; s < m_plans.size(); ++s)
        for (const auto& f : m_plans[s].files) {
            Row row;
            row.source = static_cast<int>(s);
            row.file = f.file;
            row.status.path = f.file.path;
            row.status.size = f.file.size;
            row.status.state = f.present ? FileState::Done : FileState::Queued;
            row.status.bytesDone = (f.present || f.blobPresent) ? f.file.size : std::min(f.partialBytes, f.file.size);
            m_rows.push_back(row);
        }
    m_reportedDone = 0;
    setState(complete() ? State::Done : State::Planned);
    emit planned();
    emit totalsChanged();
}

void DownloadTask::start(std::optional<int> onlyRow)
{
    if (busy() || m_plans.empty())
        return;
    if (onlyRow && (*onlyRow < 0 || *onlyRow >= static_cast<int>(m_rows.size())))
        return;
    join();
    m_cancelAll = false;
    {
        std::lock_guard lock(m_mutex);
        m_cancelledPaths.clear();
    }
    // A new run: rows that failed or were cancelled start over from what is on disk (only the
    // one asked for, when one is).
    auto plans = m_plans;
    for (std::size_t i = 0; i < m_rows.size(); ++i) {
        if (onlyRow && static_cast<int>(i) != *onlyRow)
            continue;
        if (m_rows[i].status.state != FileState::Done) {
            m_rows[i].status.state = FileState::Queued;
            m_rows[i].status.message.clear();
            emit rowChanged(static_cast<int>(i));
        }
    }
    if (onlyRow) {
        const auto& chosen = m_rows[static_cast<std::size_t>(*onlyRow)];
        for (std::size_t s = 0; s < plans.size(); ++s)
            std::erase_if(plans[s].files,
                [&](const PlannedFile& f) { return static_cast<int>(s) != chosen.source || f.file.path != chosen.file.path; });
    }
    m_reportedDone = totals().bytesDone;
    m_runCache = m_cache;
    setState(State::Downloading);
    m_worker = std::thread([this, plans = std::move(plans), client = m_client, cache = m_cache, options = m_options]() mutable {
        // Sources download side by side (a transformer repo and a text-encoder repo need not
        // wait for each other), sharing the parallel-file budget.
        std::mutex resultMutex;
        QString failure;
        bool cancelled = false;
        options.parallelFiles = std::max(1, options.parallelFiles / std::max(1, static_cast<int>(plans.size())));
        std::vector<std::thread> workers;
        for (std::size_t s = 0; s < plans.size(); ++s) {
            if (plans[s].files.empty())
                continue;  // a run for one file of another source
            workers.emplace_back([&, s]() {
                if (m_cancelAll) {
                    std::lock_guard lock(resultMutex);
                    cancelled = true;
                    return;
                }
                const int source = static_cast<int>(s);
                try {
                    auto plan = plans[s];
                    // On this worker, blobs another tool wrote since the plan are hashed once.
                    refreshPresence(plan, *cache, HfCache::Verify::Hash, &m_cancelAll);
                    PlanDownload download(*client, *cache, plan, options, [this, source](const FileStatus& file, const PlanStatus&) {
                        QMetaObject::invokeMethod(
                            this, [this, source, file]() { applyProgress(source, file); }, Qt::QueuedConnection);
                    });
                    {
                        std::lock_guard lock(m_mutex);
                        m_running.emplace_back(source, &download);
                        for (const auto& [src, path] : m_cancelledPaths)
                            if (src == source)
                                download.cancelFile(path);
                        if (m_cancelAll)
                            download.cancelAll();
                    }
                    HubResult<void> result;
                    try {
                        result = download.run();
                    } catch (...) {
                        std::lock_guard lock(m_mutex);
                        std::erase_if(m_running, [&](const auto& r) { return r.second == &download; });
                        throw;
                    }
                    {
                        std::lock_guard lock(m_mutex);
                        std::erase_if(m_running, [&](const auto& r) { return r.second == &download; });
                    }
                    // The last statuses, so the rows end in their final state even if a throttled
                    // report was skipped.
                    for (const auto& st : download.fileStatuses())
                        QMetaObject::invokeMethod(
                            this, [this, source, st]() { applyProgress(source, st); }, Qt::QueuedConnection);
                    if (!result) {
                        std::lock_guard lock(resultMutex);
                        if (result.error().kind == HubErrorKind::Cancelled)
                            cancelled = true;
                        else if (failure.isEmpty())
                            failure = QString::fromStdString(result.error().message);
                    }
                } catch (const std::exception& e) {
                    // A bug fails this download, not the studio (std::thread would terminate).
                    std::lock_guard lock(resultMutex);
                    if (failure.isEmpty())
                        failure = tr("The download stopped on an internal error (%1); try again").arg(QString::fromUtf8(e.what()));
                } catch (...) {
                    std::lock_guard lock(resultMutex);
                    if (failure.isEmpty())
                        failure = tr("The download stopped on an internal error; try again");
                }
            });
        }
        for (auto& w : workers)
            w.join();
        QMetaObject::invokeMethod(
            this, [this, failure, cancelled]() { finishRun(failure, cancelled); }, Qt::QueuedConnection);
    });
}

void DownloadTask::applyProgress(int source, const FileStatus& status)
{
    for (std::size_t i = 0; i < m_rows.size(); ++i) {
        auto& row = m_rows[i];
        if (row.source != source || row.file.path != status.path)
            continue;
        const bool terminal = row.status.state == FileState::Done;
        if (terminal && status.state != FileState::Done)
            return;
        const auto before = row.status.bytesDone;
        row.status = status;
        row.status.size = row.file.size;
        // Within a run a file's bytes only grow; a restarted transfer is reported from the
        // bytes it kept.
        row.status.bytesDone = std::min(std::max(before, status.bytesDone), row.file.size);
        if (status.state == FileState::Failed && status.bytesDone < before)
            row.status.bytesDone = status.bytesDone;
        emit rowChanged(static_cast<int>(i));
        break;
    }
    const auto t = totals();
    m_reportedDone = std::max(m_reportedDone, t.bytesDone);
    emit totalsChanged();
}

void DownloadTask::finishRun(const QString& failure, bool cancelled)
{
    join();
    for (auto& p : m_plans)
        refreshPresence(p, *m_runCache);
    // Present files are done whatever the last report said.
    std::size_t i = 0;
    for (std::size_t s = 0; s < m_plans.size(); ++s)
        for (const auto& f : m_plans[s].files) {
            if (i < m_rows.size() && f.present && m_rows[i].status.state != FileState::Done) {
                m_rows[i].status.state = FileState::Done;
                m_rows[i].status.bytesDone = f.file.size;
                emit rowChanged(static_cast<int>(i));
            }
            ++i;
        }
    emit totalsChanged();
    if (complete())
        setState(State::Done);
    else if (!failure.isEmpty())
        setState(State::Failed, failure);
    else if (cancelled || std::any_of(m_rows.begin(), m_rows.end(), [](const Row& r) { return r.status.state == FileState::Cancelled; }))
        setState(State::Cancelled, tr("Cancelled; the bytes already downloaded are kept and the download resumes from them"));
    else
        setState(State::Failed, tr("Some files are still missing"));
    if (std::exchange(m_replanAfterRun, false))
        plan();
}

void DownloadTask::cancelAll()
{
    m_cancelAll = true;
    std::lock_guard lock(m_mutex);
    for (auto& [source, download] : m_running)
        download->cancelAll();
}

void DownloadTask::cancelFile(int row)
{
    if (row < 0 || row >= static_cast<int>(m_rows.size()))
        return;
    const auto& r = m_rows[static_cast<std::size_t>(row)];
    if (r.status.state == FileState::Done)
        return;
    {
        std::lock_guard lock(m_mutex);
        m_cancelledPaths.emplace_back(r.source, r.file.path);
        for (auto& [source, download] : m_running)
            if (source == r.source)
                download->cancelFile(r.file.path);
    }
    if (m_state != State::Downloading) {
        m_rows[static_cast<std::size_t>(row)].status.state = FileState::Cancelled;
        emit rowChanged(row);
    }
}

}  // namespace vireo::hub
