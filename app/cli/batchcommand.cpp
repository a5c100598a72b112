#include "app/cli/batchcommand.h"

#include "app/cli/args.h"
#include "app/cli/headless.h"

#include "core/batch/batch.h"
#include "core/hub/downloadmanager.h"
#include "core/output/outputfile.h"
#include "core/runtime/devicepool.h"
#include "core/runtime/engine.h"
#include "core/runtime/modelresolver.h"
#include "core/settings/studiosettings.h"
#include "core/studio/studio.h"
#include "core/util/logging.h"
#include "inference/util/text.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QProcess>
#include <QRandomGenerator>
#include <QSaveFile>
#include <QSysInfo>
#include <QTimer>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>

namespace {

constexpr const char* kUsage =
    R"(usage: vireo-cli batch JOBS.jsonl --local --outputs DIR [--device auto|cpu|cuda:N] [--name NAME] [--no-gallery]
       vireo-cli batch JOBS.jsonl --slurm --outputs DIR [--cache HF_CACHE] [--partition P] [--account A]
                 [--gpus-per-task N] [--cpus-per-task N] [--mem M] [--time T] [--max-parallel N]
                 [--requeue-limit N] [--sbatch-arg ARG ...] [--name NAME]
       vireo-cli batch JOBS.jsonl --prepare --outputs DIR [--name NAME]   (the folder alone: another scheduler runs the tasks)
       vireo-cli batch check JOBS.jsonl
       vireo-cli batch resume DIR/BATCH [--device ...] [--no-gallery]
       vireo-cli batch status DIR/BATCH [--json]
       vireo-cli batch cancel DIR/BATCH
       vireo-cli batch run-task DIR/BATCH --index I      (what each Slurm task runs)

  One generation per non-empty line of JOBS.jsonl, a JSON object with the HTTP API's fields:
  id, model (a catalog variant such as ltx-2.3/distilled-fp8, or a model file or folder),
  text_encoder, upsampler, prompt, negative_prompt, seed, width, height, frames, fps, steps,
  guidance, audio_guidance, rescale, schedule, speed, stages, knobs, loras [{path, strength}],
  conditions [{image, frame, strength, crf}], device. Relative paths are taken from the file's
  folder. Every line is checked (headers only) before anything runs.
  --local runs the batch here: DIR/NAME (default: batch-<date>-<time>) gets each output as
  <id>.mp4 or <id>.png and a marker <id>.json (bytes, SHA-256, seconds, device) once it is
  whole, and .vireo/jobs.jsonl keeps the lines with their seeds, so `resume` makes what is
  missing, the same, and nothing twice. Jobs go to the GPU their memory plan fits with the
  fewest jobs queued (--device auto, the default) or where --device or a line's "device" pins
  them. Ctrl-C cancels and leaves no partial file.
  --slurm submits the batch as one Slurm array job (sbatch; task i makes line i) for DIR on a
  file system the nodes share; the tasks read the models from --cache offline (submit what is
  downloaded), never record in the gallery, and a task that fails is requeued up to
  --requeue-limit times (default 3; a line that cannot run is not). `status` asks squeue about
  the tasks not done; `cancel` runs scancel, and finished outputs stay.
)";

std::atomic<bool> g_interrupted{false};

void onInterrupt(int)
{
    g_interrupted = true;
}

int usage(const std::string& message)
{
    std::fprintf(stderr, "vireo-cli: batch: %s\n\n%s", vireo::terminalSafe(message).c_str(), kUsage);
    return 2;
}

int fail(const std::string& message, int status = 1)
{
    std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(message).c_str());
    return status;
}

struct Options {
    std::string command;  // "run", "check", "resume", "status", "cancel", "run-task"
    std::string target;  // the JSONL file, or the batch folder
    std::string outputs, name, device;
    bool local = false, slurm = false, prepare = false, gallery = true, json = false;
    int index = -1;  // run-task
    vireo::batch::SlurmOptions slurmOptions;
};

// A program's standard output and exit status (sbatch, squeue, scancel); never through a shell.
struct Ran {
    int status = -1;
    std::string out, err;
};
Ran runProgram(const QString& program, const std::vector<std::string>& arguments)
{
    QProcess p;
    QStringList args;
    for (const auto& a : arguments)
        args << QString::fromStdString(a);
    p.start(program, args);
    Ran r;
    if (!p.waitForStarted(10000)) {
        r.err = program.toStdString() + " cannot be started (is Slurm installed here?)";
        return r;
    }
    p.waitForFinished(60000);
    r.status = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput().toStdString();
    r.err = p.readAllStandardError().toStdString();
    return r;
}

// The array jobs a submitted batch runs as (.vireo/submit.json); empty for a local batch.
std::vector<std::int64_t> submittedJobs(const std::filesystem::path& folder)
{
    std::ifstream file(folder / ".vireo" / "submit.json");
    std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    const auto j = text.size() < (1 << 16) ? nlohmann::json::parse(text, nullptr, false) : nlohmann::json();
    std::vector<std::int64_t> out;
    if (j.is_object() && j.contains("job_ids") && j["job_ids"].is_array())
        for (const auto& id : j["job_ids"])
            if (id.is_number_integer())
                out.push_back(id.get<std::int64_t>());
    return out;
}

// Each line made into its engine job with the studio's generation service: the first problem,
// naming the line, stops the batch before anything runs.
struct Planned {
    vireo::batch::Line line;
    vireo::generation::Prepared prepared;
};

vireo::Result<std::vector<Planned>> planAll(
    vireo::core::Studio& studio, const std::vector<vireo::batch::Line>& lines, const std::string& name)
{
    const auto& catalog = studio.downloads()->catalog();
    std::vector<Planned> out;
    for (const auto& line : lines) {
        const std::string where = name + ":" + std::to_string(line.fileLine);
        auto model = studio.models()->resolve(line.modelKey);
        if (!model)
            return vireo::makeError(model.error().code, where + ": " + model.error().message);
        auto defaults = vireo::generation::defaultsFor(catalog, *model, line.ask);
        if (!defaults)
            return vireo::makeError(defaults.error().code, where + ": " + defaults.error().message);
        auto prepared = vireo::generation::prepare(catalog, *defaults, *model, line.ask);
        if (!prepared)
            return vireo::makeError(prepared.error().code, where + ": " + prepared.error().message);
        out.push_back({line, std::move(*prepared)});
    }
    return out;
}

int runStatus(const Options& o)
{
    const auto tasks = vireo::batch::status(o.target);
    if (!tasks)
        return fail(tasks.error().message);
    int done = 0;
    for (const auto& t : *tasks)
        done += t.done ? 1 : 0;
    // A Slurm batch: what squeue says of the tasks not done (not listed: finished or gone).
    std::map<int, std::string> queued;
    const auto jobs = submittedJobs(o.target);
    for (const auto job : jobs) {
        const auto r = runProgram(QStringLiteral("squeue"), {"-h", "-r", "-j", std::to_string(job), "-o", "%i %T %r"});
        if (r.status == 0)
            queued.merge(vireo::batch::parseSqueue(r.out, job));
    }
    const auto stateOf = [&](std::size_t i, const vireo::batch::TaskState& t) -> std::string {
        if (t.done)
            return "done";
        if (const auto it = queued.find(static_cast<int>(i)); it != queued.end())
            return vireo::cli::lower(it->second);
        return jobs.empty() ? "not yet" : "not done, no longer queued (see .vireo/task-" + std::to_string(i) + ".log)";
    };
    if (o.json) {
        nlohmann::json list = nlohmann::json::array();
        for (std::size_t i = 0; i < tasks->size(); ++i) {
            const auto& t = (*tasks)[i];
            list.push_back({{"id", t.id}, {"done", t.done}, {"state", stateOf(i, t)}, {"output", t.output}, {"sha256", t.sha256}});
        }
        std::printf(
            "%s\n", nlohmann::json{{"done", done}, {"total", tasks->size()}, {"slurm_jobs", jobs}, {"tasks", list}}.dump(2).c_str());
        return 0;
    }
    for (std::size_t i = 0; i < tasks->size(); ++i) {
        const auto& t = (*tasks)[i];
        std::printf("%-24s %s\n", t.id.c_str(), t.done ? ("done: " + t.output).c_str() : stateOf(i, t).c_str());
    }
    std::printf("%d of %zu done\n", done, tasks->size());
    return 0;
}

// Runs every task of the batch folder that has no marker yet, through the device pool.
int runTasks(const Options& o, vireo::core::Studio& studio, const std::filesystem::path& folder, std::vector<Planned> planned)
{
    auto* pool = studio.devicePool();
    struct Running {
        std::size_t task;
        std::filesystem::path output;
        QString device;
    };
    std::map<quint64, Running> running;
    const auto started = std::chrono::steady_clock::now();
    const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
    if (o.command == "run-task") {
        // The task's log says each run (a requeued task runs again, appending).
        std::printf("task %d (%s) on %s, restart %s\n", planned.front().line.index, planned.front().line.id.c_str(),
            qPrintable(QSysInfo::machineHostName()), qEnvironmentVariable("SLURM_RESTART_COUNT", QStringLiteral("0")).toUtf8().constData());
        // One task of an array: another node's killed run may have left its temporary here, and
        // that node's pid says nothing on this one. Only this task writes these names.
        const auto& id = planned.front().line.id;
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(folder, ec)) {
            const auto name = e.path().filename().string();
            if ((name.rfind("." + id + ".mp4.part", 0) == 0 || name.rfind("." + id + ".png.part", 0) == 0) && e.is_regular_file())
                std::filesystem::remove(e.path(), ec);
        }
    } else {
        // Partial files of a run that was killed (this machine's pids, so the check is sound here).
        vireo::output::removeStalePartials(folder);
    }
    int skipped = 0, failed = 0, done = 0;
    for (std::size_t i = 0; i < planned.size(); ++i) {
        auto& p = planned[i];
        const auto output = vireo::batch::outputPath(folder, p.line, p.prepared.image);
        if (std::filesystem::exists(vireo::batch::markerPath(folder, p.line.id))) {
            ++skipped;
            continue;
        }
        if (std::filesystem::exists(output)) {
            // Killed between the output's rename and its marker: the output is whole (it is only
            // ever moved into place whole), so the marker is all that is missing.
            if (auto marked = vireo::batch::writeMarker(folder, p.line, output, 0, "unknown"); !marked)
                return fail(marked.error().message);
            ++skipped;
            continue;
        }
        auto job = p.prepared.job;
        job.outputPath = QString::fromStdString(output.string());
        const auto device = !p.line.device.empty() ? p.line.device : o.device.empty() ? std::string("auto") : o.device;
        auto placed = pool->submit(job, device == "auto" ? QString() : QString::fromStdString(device));
        if (!placed) {
            std::fprintf(stderr, "vireo-cli: %s: %s\n", p.line.id.c_str(), vireo::terminalSafe(placed.error().message).c_str());
            ++failed;
            continue;
        }
        running[placed->id] = {i, output, placed->device};
    }
    const auto total = planned.size();
    std::printf("%s: %zu jobs, %d done before, %zu queued\n", folder.string().c_str(), total, skipped, running.size());
    std::fflush(stdout);
    if (running.empty())
        return failed ? 1 : 0;

    QTimer poll;
    QObject::connect(&poll, &QTimer::timeout, [&] {
        if (g_interrupted.exchange(false))
            for (const auto& [id, _] : running)
                pool->cancel(id);
    });
    poll.start(20);
    QObject::connect(pool, &vireo::runtime::DevicePool::jobFinished, [&](quint64 id) {
        const auto it = running.find(id);
        if (it == running.end())
            return;
        const auto& r = it->second;
        const auto& p = planned[r.task];
        const auto s = pool->job(id);
        if (s && s->state == vireo::runtime::JobState::Done) {
            if (auto marked = vireo::batch::writeMarker(folder, p.line, r.output, s->elapsedSeconds, r.device.toStdString()); !marked) {
                std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(marked.error().message).c_str());
                ++failed;
            } else {
                ++done;
                std::printf("[%7.2f s] %s: done in %.1f s on %s (%s)\n", elapsed(), p.line.id.c_str(), s->elapsedSeconds,
                    qPrintable(r.device), r.output.filename().string().c_str());
            }
        } else {
            ++failed;
            std::printf("[%7.2f s] %s: %s\n", elapsed(), p.line.id.c_str(),
                s ? vireo::terminalSafe(s->state == vireo::runtime::JobState::Cancelled ? "cancelled" : s->error.toStdString()).c_str()
                  : "lost");
        }
        std::fflush(stdout);
        running.erase(it);
        if (running.empty())
            QCoreApplication::quit();
    });
    struct sigaction action {};
    action.sa_handler = onInterrupt;
    sigemptyset(&action.sa_mask);
    struct sigaction previousInt {
    }, previousTerm{};
    ::sigaction(SIGINT, &action, &previousInt);
    ::sigaction(SIGTERM, &action, &previousTerm);
    QCoreApplication::exec();
    ::sigaction(SIGINT, &previousInt, nullptr);
    ::sigaction(SIGTERM, &previousTerm, nullptr);
    std::printf("%d of %zu done (%d before this run), %d failed or cancelled\n", done + skipped, total, skipped, failed);
    return failed ? 1 : 0;
}

// The batch as one Slurm array job: the task script, sbatch, and the job id kept in
// .vireo/submit.json for status and cancel.
int submitToSlurm(const Options& o, const std::filesystem::path& folder, int tasks)
{
    if (tasks > 1000)
        return fail("a Slurm batch of more than 1,000 jobs (Slurm's MaxArraySize by default); split the file");
    auto script = vireo::batch::slurmTaskScript(QCoreApplication::applicationFilePath().toStdString(), folder, o.slurmOptions);
    if (!script)
        return fail(script.error().message);
    const auto scriptPath = folder / ".vireo" / "task.sh";
    {
        QSaveFile file(QString::fromStdString(scriptPath.string()));
        if (!file.open(QIODevice::WriteOnly)
            || file.write(script->data(), static_cast<qint64>(script->size())) != static_cast<qint64>(script->size()) || !file.commit())
            return fail(scriptPath.string() + ": cannot write it");
        std::error_code ec;
        std::filesystem::permissions(scriptPath, std::filesystem::perms::owner_all, std::filesystem::perm_options::replace, ec);
    }
    const auto name = "vireo-" + folder.filename().string();
    const auto r =
        runProgram(QStringLiteral("sbatch"), vireo::batch::sbatchArguments(o.slurmOptions, tasks, folder, name, scriptPath.string()));
    const auto job = r.status == 0 ? vireo::batch::parseSbatchJobId(r.out) : std::nullopt;
    if (!job)
        return fail("sbatch refused the batch: " + vireo::output::truncatedUtf8(r.err.empty() ? r.out : r.err, 2000) + " ("
            + folder.string() + " is kept: `vireo-cli batch resume` runs it here)");
    const auto& so = o.slurmOptions;
    const nlohmann::json submit{{"job_ids", {*job}}, {"tasks", tasks},
        {"submitted", QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString()}, {"partition", so.partition},
        {"gpus_per_task", so.gpusPerTask}, {"max_parallel", so.maxParallel}, {"requeue_limit", so.requeueLimit}, {"cache", so.cache}};
    const auto text = submit.dump(2) + "\n";
    QSaveFile file(QString::fromStdString((folder / ".vireo" / "submit.json").string()));
    if (!file.open(QIODevice::WriteOnly) || file.write(text.data(), static_cast<qint64>(text.size())) != static_cast<qint64>(text.size())
        || !file.commit())
        return fail(
            (folder / ".vireo" / "submit.json").string() + ": cannot write it; the array job " + std::to_string(*job) + " runs anyway");
    std::printf("submitted Slurm array job %lld: %d tasks into %s\n", static_cast<long long>(*job), tasks, folder.string().c_str());
    return 0;
}

}  // namespace

int runBatch(const std::vector<std::string>& args)
{
    Options o;
    std::size_t i = 0;
    if (!args.empty()
        && (args[0] == "check" || args[0] == "resume" || args[0] == "status" || args[0] == "cancel" || args[0] == "run-task")) {
        o.command = args[0];
        i = 1;
    } else {
        o.command = "run";
    }
    for (; i < args.size(); ++i) {
        const auto& a = args[i];
        const auto value = [&](std::string& into) {
            if (i + 1 >= args.size())
                return false;
            into = args[++i];
            return true;
        };
        auto& so = o.slurmOptions;
        const auto count = [&](int& into) {
            std::string v;
            if (!value(v))
                return false;
            auto n = vireo::cli::parseNumber<int>(v, 0, 100000);
            if (!n)
                return false;
            into = *n;
            return true;
        };
        if (a == "--local")
            o.local = true;
        else if (a == "--prepare")
            o.prepare = true;
        else if (a == "--slurm")
            o.slurm = true;
        else if (a == "--index") {
            if (!count(o.index))
                return usage("--index needs a task index");
        } else if (a == "--gpus-per-task" || a == "--cpus-per-task" || a == "--max-parallel" || a == "--requeue-limit") {
            int& into = a == "--gpus-per-task" ? so.gpusPerTask
                : a == "--cpus-per-task"       ? so.cpusPerTask
                : a == "--max-parallel"        ? so.maxParallel
                                               : so.requeueLimit;
            if (!count(into))
                return usage(a + " needs a whole number");
        } else if (a == "--partition" || a == "--account" || a == "--time" || a == "--mem" || a == "--cache" || a == "--sbatch-arg") {
            std::string v;
            if (!value(v) || v.empty())
                return usage(a + " needs a value");
            if (a == "--sbatch-arg")
                so.extra.push_back(v);
            else if (a == "--cache")
                so.cache = std::filesystem::absolute(v).lexically_normal().string();
            else
                (a == "--partition" ? so.partition : a == "--account" ? so.account : a == "--time" ? so.time : so.mem) = v;
        } else if (a == "--no-gallery")
            o.gallery = false;
        else if (a == "--json")
            o.json = true;
        else if (a == "--outputs" || a == "--name" || a == "--device") {
            if (!value(a == "--outputs" ? o.outputs : a == "--name" ? o.name : o.device))
                return usage(a + " needs a value");
        } else if (!a.empty() && a[0] == '-')
            return usage("unknown option " + a.substr(0, 100));
        else if (o.target.empty())
            o.target = a;
        else
            return usage("one JOBS.jsonl or batch folder");
    }
    if (o.target.empty())
        return usage(o.command == "run" || o.command == "check" ? "give the JOBS.jsonl file" : "give the batch folder");
    if (!o.device.empty() && o.device != "auto" && o.device != "cpu" && o.device.rfind("cuda:", 0) != 0)
        return usage("--device is auto, cpu or cuda:N");
    if (o.command == "status")
        return runStatus(o);
    if (o.command == "cancel") {
        const auto jobs = submittedJobs(o.target);
        if (jobs.empty())
            return fail(o.target + ": not a batch submitted to Slurm (no .vireo/submit.json)");
        for (const auto job : jobs) {
            const auto r = runProgram(QStringLiteral("scancel"), {std::to_string(job)});
            if (r.status != 0)
                return fail("scancel " + std::to_string(job) + ": " + (r.err.empty() ? std::string("failed") : r.err));
            std::printf("cancelled Slurm job %lld; finished outputs stay in %s\n", static_cast<long long>(job), o.target.c_str());
        }
        return 0;
    }
    if (o.command == "run-task" && o.index < 0)
        return usage("run-task needs --index I");
    if (o.command == "run" && int(o.local) + int(o.slurm) + int(o.prepare) != 1)
        return usage(
            "say where it runs: --local (here), --slurm (one Slurm array job) or --prepare (the folder alone, for another scheduler)");
    if (o.command == "run" && o.outputs.empty())
        return usage("--outputs DIR: where the batch folder goes");
    static const std::regex namePattern("[A-Za-z0-9._-]{1,64}");
    if (!o.name.empty() && (!std::regex_match(o.name, namePattern) || o.name == "." || o.name == ".."))
        return usage("--name: 1 to 64 letters, digits, '.', '_' or '-'");

    // The lines: the user's file, or the batch folder's own copy (seeds fixed) for resume.
    const bool fromFolder = o.command == "resume" || o.command == "run-task";
    const std::filesystem::path source =
        fromFolder ? std::filesystem::path(o.target) / ".vireo" / "jobs.jsonl" : std::filesystem::path(o.target);
    auto lines = vireo::batch::readFile(source);
    if (!lines)
        return fail(lines.error().message, 2);
    if (o.command == "run-task") {
        // A task plans its own line alone: the others are other tasks'.
        if (o.index >= static_cast<int>(lines->size()))
            return fail(
                source.string() + ": no line " + std::to_string(o.index) + " (the batch has " + std::to_string(lines->size()) + ")", 2);
        std::vector<vireo::batch::Line> one{(*lines)[static_cast<std::size_t>(o.index)]};
        lines->swap(one);
    }

    auto headless = vireo::cli::openHeadlessStudio(o.gallery);
    if (!headless)
        return fail(headless.error().message);
    auto* studio = &headless->studio;
    auto planned = planAll(**studio, *lines, source.filename().string());
    if (!planned)
        return fail(planned.error().message, 2);
    if (o.command == "check") {
        std::printf("%s: %zu jobs, each checked (headers only)\n", o.target.c_str(), planned->size());
        return 0;
    }

    std::filesystem::path folder = o.target;
    if (o.command == "run") {
        const auto batchName =
            o.name.empty() ? "batch-" + QDateTime::currentDateTime().toString(QStringLiteral("yyyyMMdd-HHmmss")).toStdString() : o.name;
        // Absolute: Slurm's tasks start elsewhere.
        folder = std::filesystem::absolute(std::filesystem::path(o.outputs) / batchName).lexically_normal();
        if (std::filesystem::exists(folder))
            return fail(folder.string() + " exists; `vireo-cli batch resume " + folder.string() + "` continues it, or give another --name");
        std::error_code ec;
        std::filesystem::create_directories(folder / ".vireo", ec);
        if (ec)
            return fail(folder.string() + ": cannot create it (" + ec.message() + ")");
        // The copy every run reads: seeds drawn now, so a task run again makes the same output.
        std::string copy;
        for (const auto& p : *planned)
            copy += vireo::batch::copyLine(p.line, p.prepared.job.request.seed) + "\n";
        QSaveFile file(QString::fromStdString((folder / ".vireo" / "jobs.jsonl").string()));
        if (!file.open(QIODevice::WriteOnly)
            || file.write(copy.data(), static_cast<qint64>(copy.size())) != static_cast<qint64>(copy.size()) || !file.commit())
            return fail(folder.string() + "/.vireo/jobs.jsonl: cannot write it (" + file.errorString().toStdString() + ")");
        // The window's gallery adopts the outputs as they land (tasks on other machines record nothing).
        if (o.gallery)
            (*studio)->settings()->addWatchedFolder(QString::fromStdString(folder.string()));
        if (o.slurm)
            return submitToSlurm(o, folder, static_cast<int>(planned->size()));
        if (o.prepare) {
            // For a scheduler of one's own (a Kubernetes Indexed Job): task i runs line i.
            std::printf("prepared %zu tasks in %s\neach task: vireo-cli batch run-task %s --index I (I from 0 to %zu)\n", planned->size(),
                folder.string().c_str(), folder.string().c_str(), planned->size() - 1);
            return 0;
        }
    }
    return runTasks(o, **studio, folder, std::move(*planned));
}

std::string batchHelp()
{
    return kUsage;
}
