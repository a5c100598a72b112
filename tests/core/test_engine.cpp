// The studio's runtime against the tiny LTX-2 checkpoints: queue order, the arbiter's waits,
// cancel latency in every phase, memory after failed loads, out-of-memory recovery, the trust
// gate at load time, and process settings restored by an unload. And the tiny Ideogram-4
// folder: its memory plan, an image job written as a PNG with its recipe, in the gallery.
#include "core/runtime/engine.h"

#include "core/gallery/gallery.h"
#include "core/gallery/gallerystore.h"
#include "core/studio/studio.h"
#include "tests/core/tinyjobs.h"

#include "inference/facade/generator.h"

#include <QCoreApplication>
#include <QCryptographicHash>
#include <QDir>
#include <QImage>
#include <QSettings>
#include <QStandardPaths>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>
#include <fstream>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

using namespace vireo;
using runtime::Engine;
using runtime::JobState;

namespace {

using test::smallRequest;
using test::tinyModel;
using test::waitFinished;

QString fixtures()
{
    return test::ltxFixtures();
}

runtime::ModelRef tinyIdeogram()
{
    runtime::ModelRef m;
    m.key = QStringLiteral("local:tiny-ideogram4");
    m.title = QStringLiteral("tiny Ideogram-4");
    m.plan.modelPaths = {QString(qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ideogram4/pipeline/model")).toStdString()};
    m.plan.device = "cpu";
    return m;
}

facade::GenerateRequest imageRequest()
{
    facade::GenerateRequest r;
    r.prompt = "A photo of a cat holding a sign that says hello world";
    r.width = 64;
    r.height = 48;
    r.steps = 5;
    r.guidance = 3.5;
    r.seed = 1234;
    return r;
}

std::int64_t virtualBytes()
{
    std::ifstream statm("/proc/self/statm");
    std::int64_t size = 0;
    statm >> size;
    return size * ::sysconf(_SC_PAGESIZE);
}

std::int64_t residentBytes()
{
    std::ifstream statm("/proc/self/statm");
    std::int64_t size = 0, resident = 0;
    statm >> size >> resident;
    return resident * ::sysconf(_SC_PAGESIZE);
}

}  // namespace

class TestEngine : public QObject {
    Q_OBJECT
private slots:
    void initTestCase()
    {
        QVERIFY(m_out.isValid());
        // A transformer with one tensor no parameter takes: the headers plan fine, the load fails.
        const QString broken = m_out.filePath(QStringLiteral("broken"));
        QVERIFY(QDir().mkpath(broken));
        QProcess cp;
        cp.start(QStringLiteral("cp"), {QStringLiteral("-r"), fixtures() + QStringLiteral("/v23/diffusers/."), broken});
        QVERIFY(cp.waitForFinished() && cp.exitCode() == 0);
        const QString script =
            QStringLiteral("import sys, torch\nfrom safetensors.torch import load_file, save_file\n"
                           "p = sys.argv[1] + '/transformer/diffusion_pytorch_model.safetensors'\n"
                           "t = load_file(p)\nt['transformer_blocks.0.bogus.weight'] = torch.zeros(4, 4)\nsave_file(t, p)\n");
        QProcess py;
        py.start(qEnvironmentVariable("VIREO_PYTHON"), {QStringLiteral("-c"), script, broken});
        QVERIFY2(py.waitForFinished(120000) && py.exitCode() == 0, py.readAllStandardError().constData());
        m_broken = broken;
    }

    void generatesAndWritesAnMp4()
    {
        Engine e({});
        runtime::GenerateJob job;
        job.model = tinyModel();
        job.request = smallRequest();
        job.outputFolder = m_out.filePath(QStringLiteral("outputs"));
        QSignalSpy previews(&e, &Engine::previewReady);
        const auto id = e.enqueueGenerate(job);
        QVERIFY(waitFinished(e, id));
        const auto s = e.job(id);
        QVERIFY2(s->state == JobState::Done, qPrintable(s->error));
        QVERIFY(QFile::exists(s->outputPath));
        QVERIFY(s->outputPath.startsWith(job.outputFolder));
        QCOMPARE(s->recipe.request.seed, 3);
        QCOMPARE(s->recipe.request.frames, 9);
        QVERIFY(!s->recipe.files.empty());
        QTRY_VERIFY(previews.count() >= 1);
        const auto strip = previews.last().at(1).value<QImage>();
        QVERIFY(!strip.isNull());
        QCOMPARE(strip.height(), 2);  // 64 px / 32
        QCOMPARE(strip.width(), 2 * 2);  // 2 latent frames of 2 cells
        QVERIFY(e.resident().has_value());
    }

    void jobsRunInOrderAndALoadWaitsForTheGeneration()
    {
        Engine e({});
        std::vector<std::pair<quint64, JobState>> transitions;
        connect(&e, &Engine::jobChanged, this, [&](quint64 id) {
            if (auto s = e.job(id); s && (transitions.empty() || transitions.back() != std::pair{id, s->state}))
                transitions.emplace_back(id, s->state);
        });
        runtime::GenerateJob job;
        job.model = tinyModel();
        job.request = smallRequest(256, 33);
        job.writeOutput = false;
        const auto a = e.enqueueGenerate(job);
        const auto load = e.enqueueLoad(tinyModel(QStringLiteral("v20")));
        job.model = tinyModel(QStringLiteral("v20"));
        const auto b = e.enqueueGenerate(job);
        QCOMPARE(e.job(load)->state, JobState::Queued);
        QVERIFY(waitFinished(e, b));
        for (auto id : {a, load, b})
            QVERIFY2(e.job(id)->state == JobState::Done, qPrintable(e.job(id)->error));
        // Each job starts after the one before has finished.
        auto firstRunning = [&](quint64 id) {
            for (std::size_t i = 0; i < transitions.size(); ++i)
                if (transitions[i].first == id && transitions[i].second == JobState::Running)
                    return static_cast<int>(i);
            return -1;
        };
        auto done = [&](quint64 id) {
            for (std::size_t i = 0; i < transitions.size(); ++i)
                if (transitions[i].first == id && transitions[i].second == JobState::Done)
                    return static_cast<int>(i);
            return -1;
        };
        QVERIFY(firstRunning(a) >= 0 && done(a) < firstRunning(load));
        QVERIFY(done(load) < firstRunning(b));
        QCOMPARE(QString::fromStdString(e.resident()->model.key.toStdString()), QStringLiteral("local:tiny-v20"));
    }

    void cancelReturnsWithinASecondFromEveryPhase()
    {
        // 768x768x97 on the tiny model: each phase lasts long enough to be caught. The tiny
        // folder brings its latent upsampler, so this size takes the two-stage path.
        const QStringList phases{QStringLiteral("encode prompt"), QStringLiteral("denoise"), QStringLiteral("upsample latents"),
            QStringLiteral("refine"), QStringLiteral("decode video"), QStringLiteral("decode audio"), QStringLiteral("vocoder"),
            QStringLiteral("mux")};
        Engine e({});
        std::printf("   cancel latency per phase (requested in the phase -> job finished):\n");
        for (const auto& phase : phases) {
            runtime::GenerateJob job;
            job.model = tinyModel();
            job.request = smallRequest(768, 97);
            job.outputFolder = m_out.filePath(QStringLiteral("cancelled"));
            QElapsedTimer sinceCancel;
            QString landed;
            quint64 id = 0;
            auto c = connect(&e, &Engine::jobProgress, this, [&](quint64 reported, const QString& p, qint64, qint64, double) {
                if (reported == id && landed.isEmpty() && p == phase) {
                    landed = p;
                    sinceCancel.start();
                    e.cancel(reported);
                }
            });
            id = e.enqueueGenerate(job);
            QVERIFY(waitFinished(e, id));
            disconnect(c);
            const auto s = e.job(id);
            QVERIFY2(!landed.isEmpty(), qPrintable(QStringLiteral("the run never reported phase ") + phase));
            const double ms = static_cast<double>(sinceCancel.nsecsElapsed()) / 1e6;
            if (s->state == JobState::Done) {
                // The phase ended before the cancel reached the engine: it was shorter than a
                // signal's round trip, and the stop is checked where it ends.
                const auto it = s->recipe.secondsPerPhase.find(phase.toStdString());
                const double took = it == s->recipe.secondsPerPhase.end() ? -1 : it->second;
                std::printf("     %-14s finished first (the phase took %.0f ms)\n", qPrintable(phase), took * 1000);
                QVERIFY(took >= 0 && took < 1.0);
                continue;
            }
            std::printf("     %-14s %8.1f ms\n", qPrintable(phase), ms);
            QCOMPARE(s->state, JobState::Cancelled);
            QVERIFY2(ms < 1000.0, qPrintable(phase));
        }
        // Nothing was left behind, not even a temporary.
        QVERIFY(QDir(m_out.filePath(QStringLiteral("cancelled"))).entryList(QDir::Files | QDir::Hidden).isEmpty());
    }

    void failedLoadsLeaveMemoryAsItWas()
    {
        Engine e({});
        auto broken = tinyModel();
        broken.key = QStringLiteral("local:broken");
        broken.plan.modelPaths = {m_broken.toStdString()};
        // One failed load first: libraries, allocator pools and thread pools are set up once.
        auto id = e.enqueueLoad(broken);
        QVERIFY(waitFinished(e, id));
        QCOMPARE(e.job(id)->state, JobState::Failed);
        QVERIFY2(e.job(id)->error.contains(QStringLiteral("bogus")), qPrintable(e.job(id)->error));
        const auto baseline = residentBytes();
        for (int i = 0; i < 20; ++i) {
            id = e.enqueueLoad(broken);
            QVERIFY(waitFinished(e, id));
            QCOMPARE(e.job(id)->state, JobState::Failed);
        }
        const auto after = residentBytes();
        std::printf("   resident memory: %.1f MB after 1 failed load, %.1f MB after 21 (%+.2f MB)\n", baseline / 1e6, after / 1e6,
            (after - baseline) / 1e6);
        QVERIFY(!e.resident().has_value());
        QVERIFY2(after - baseline < (8ll << 20), "failed loads leaked memory");
    }

    // A load that fails while a model is resident leaves that model resident and usable: the
    // old one goes only once the new one is in place (issue #26, an untested path).
    void aBadLoadKeepsTheResidentModel()
    {
        Engine e({});
        auto id = e.enqueueLoad(tinyModel());
        QVERIFY(waitFinished(e, id));
        QCOMPARE(e.job(id)->state, JobState::Done);
        QVERIFY(e.resident().has_value());
        auto broken = tinyModel();
        broken.key = QStringLiteral("local:broken");
        broken.plan.modelPaths = {m_broken.toStdString()};
        id = e.enqueueLoad(broken);
        QVERIFY(waitFinished(e, id));
        QCOMPARE(e.job(id)->state, JobState::Failed);
        QVERIFY(e.resident().has_value());
        QCOMPARE(e.resident()->model.key, tinyModel().key);
        // It generates at once, without loading again.
        runtime::GenerateJob job;
        job.model = tinyModel();
        job.request = smallRequest(64, 9);
        job.writeOutput = false;
        // Progress is delivered queued, so the failed load's own "load ..." reports can still
        // be on their way: only this job's count.
        QStringList phases;
        quint64 generateId = 0;
        connect(&e, &Engine::jobProgress, this, [&](quint64 job, const QString& p, qint64, qint64, double) {
            if (job == generateId)
                phases << p;
        });
        id = generateId = e.enqueueGenerate(job);
        QVERIFY(waitFinished(e, id));
        QVERIFY2(e.job(id)->state == JobState::Done, qPrintable(e.job(id)->error));
        QVERIFY2(phases.contains(QStringLiteral("denoise")), qPrintable(phases.join(QStringLiteral(", "))));
        QVERIFY2(!phases.contains(QStringLiteral("load transformer")), qPrintable(phases.join(QStringLiteral(", "))));
    }

    // Cancelling a load stops it between tensors, frees what it took and leaves the engine
    // ready for the next (issue #26, an untested path). The tiny model loads in a fraction of
    // a second, so the cancel is sent the moment the load starts and tried a few times.
    void cancellingALoadFreesWhatItTook()
    {
        Engine e({});
        int cancelled = 0, attempts = 0;
        std::int64_t baseline = -1, after = -1;
        for (; attempts < 10 && cancelled < 4; ++attempts) {
            quint64 id = 0;
            bool asked = false;  // cancel() itself reports a change
            auto c = connect(&e, &Engine::jobChanged, this, [&](quint64 changed) {
                if (const auto s = changed == id && !asked ? e.job(id) : std::nullopt; s && s->state == JobState::Running) {
                    asked = true;
                    e.cancel(id);
                }
            });
            id = e.enqueueLoad(tinyModel());
            QVERIFY(waitFinished(e, id));
            disconnect(c);
            const auto s = e.job(id);
            if (s->state == JobState::Done) {  // it ended before the cancel reached it
                QVERIFY(waitFinished(e, e.enqueueUnload()));
                continue;
            }
            QVERIFY2(s->state == JobState::Cancelled, qPrintable(s->error));
            QVERIFY(!e.resident().has_value());
            QVERIFY(e.filesInUse().isEmpty());
            ++cancelled;
            (baseline < 0 ? baseline : after) = residentBytes();
        }
        std::printf("   %d of %d loads cancelled while running\n", cancelled, attempts);
        QVERIFY2(cancelled > 0, "no load was still running when its cancel arrived");
        if (after >= 0) {
            std::printf("   resident memory: %.1f MB after the first cancelled load, %.1f MB after the last (%+.2f MB)\n", baseline / 1e6,
                after / 1e6, (after - baseline) / 1e6);
            QVERIFY2(after - baseline < (16ll << 20), "cancelled loads kept memory");
        }
        const auto id = e.enqueueLoad(tinyModel());
        QVERIFY(waitFinished(e, id));
        QVERIFY2(e.job(id)->state == JobState::Done, qPrintable(e.job(id)->error));
        QVERIFY(e.resident().has_value());
    }

    // What the cache manager must not delete: the files of a model while it loads, of every
    // queued job (its LoRAs too) and of the resident model; nothing once it is unloaded
    // (issue #26: "companion files protected while loading" had no test).
    void filesInUseCoverLoadingQueuedAndResident()
    {
        Engine e({});
        const auto model = tinyModel();
        const auto folder = QString::fromStdString(model.plan.modelPaths.front().string());
        const QString lora = fixtures() + QStringLiteral("/v23/loras/style.safetensors");
        QVERIFY(QFileInfo::exists(lora));
        // While it loads (seen when the engine reports the load running; the tiny model may
        // finish first on a busy machine, so a few tries).
        QStringList whileLoading;
        for (int attempt = 0; attempt < 5 && whileLoading.isEmpty(); ++attempt) {
            quint64 load = 0;
            auto c = connect(&e, &Engine::jobChanged, this, [&](quint64 changed) {
                if (const auto s = changed == load && whileLoading.isEmpty() ? e.job(load) : std::nullopt;
                    s && s->state == JobState::Running)
                    whileLoading = e.filesInUse();
            });
            load = e.enqueueLoad(model);
            QVERIFY(waitFinished(e, load));
            disconnect(c);
            QVERIFY(waitFinished(e, e.enqueueUnload()));
        }
        QVERIFY2(whileLoading.contains(folder), qPrintable(whileLoading.join(QStringLiteral(", "))));
        const auto load = e.enqueueLoad(model);
        runtime::GenerateJob job;
        job.model = model;
        job.request = smallRequest(64, 9);
        job.request.loras = {{lora.toStdString(), 0.5}};
        job.writeOutput = false;
        const auto queuedWithLora = e.enqueueGenerate(job);
        const auto queued = e.filesInUse();
        QVERIFY2(queued.contains(folder) && queued.contains(lora), qPrintable(queued.join(QStringLiteral(", "))));
        QVERIFY(waitFinished(e, load));
        QVERIFY(waitFinished(e, queuedWithLora));
        QVERIFY2(e.job(queuedWithLora)->state == JobState::Done, qPrintable(e.job(queuedWithLora)->error));
        // Resident, nothing queued: the model's files, not the finished job's LoRA.
        const auto resident = e.filesInUse();
        QVERIFY(resident.contains(folder));
        QVERIFY(!resident.contains(lora));
        QVERIFY(waitFinished(e, e.enqueueUnload()));
        QVERIFY(e.filesInUse().isEmpty());
    }

    // The trust check comes before anything is evicted: a repo nobody approved, asked for while
    // a model is resident, is refused and the resident model stays (issue #26).
    void anUntrustedLoadLeavesTheResidentModel()
    {
        Engine::Options o;
        o.repoTrusted = [](const QString& repo) { return repo.startsWith(QStringLiteral("Lightricks/")); };
        Engine e(o);
        auto id = e.enqueueLoad(tinyModel());
        QVERIFY(waitFinished(e, id));
        QCOMPARE(e.job(id)->state, JobState::Done);
        auto other = tinyModel(QStringLiteral("v20"));
        other.key = QStringLiteral("repo:someone/lookalike-ltx@main");
        other.repos = {QStringLiteral("someone/lookalike-ltx")};
        id = e.enqueueLoad(other);
        QVERIFY(waitFinished(e, id));
        QCOMPARE(e.job(id)->state, JobState::Failed);
        QCOMPARE(e.job(id)->errorCode, ErrorCode::PermissionDenied);
        QVERIFY(e.resident().has_value());
        QCOMPARE(e.resident()->model.key, tinyModel().key);
    }

    void aJobAfterOutOfMemorySucceeds()
    {
        Engine e({});
        runtime::GenerateJob job;
        job.model = tinyModel();
        // Far beyond any machine: refused by the memory plan before anything loads...
        job.request = smallRequest(1 << 15, 1025);
        job.writeOutput = false;
        auto id = e.enqueueGenerate(job);
        QVERIFY(waitFinished(e, id));
        QCOMPARE(e.job(id)->state, JobState::Failed);
        QCOMPARE(e.job(id)->errorCode, ErrorCode::OutOfMemory);
        QVERIFY2(e.job(id)->error.contains(QStringLiteral("does not fit")), qPrintable(e.job(id)->error));
        // ...and, forced, failing on the allocation itself with the same code. The address
        // space is capped for the duration, so the allocation fails at once instead of being
        // overcommitted and touched until the kernel's OOM killer ends the whole test.
        job.forcePlacement = true;
        struct rlimit before {};
        QCOMPARE(::getrlimit(RLIMIT_AS, &before), 0);
        struct rlimit capped = before;
        capped.rlim_cur = static_cast<rlim_t>(virtualBytes() + (6ll << 30));
        QCOMPARE(::setrlimit(RLIMIT_AS, &capped), 0);
        id = e.enqueueGenerate(job);
        const bool finished = waitFinished(e, id);
        ::setrlimit(RLIMIT_AS, &before);
        QVERIFY(finished);
        QCOMPARE(e.job(id)->state, JobState::Failed);
        QCOMPARE(e.job(id)->errorCode, ErrorCode::OutOfMemory);
        std::printf("   forced: %s\n", qPrintable(e.job(id)->error.left(200)));
        job = {};
        job.model = tinyModel();
        job.request = smallRequest();
        job.writeOutput = false;
        id = e.enqueueGenerate(job);
        QVERIFY(waitFinished(e, id));
        QVERIFY2(e.job(id)->state == JobState::Done, qPrintable(e.job(id)->error));
    }

    void untrustedReposAreRefusedAtLoad()
    {
        Engine::Options o;
        o.repoTrusted = [](const QString& repo) { return repo.startsWith(QStringLiteral("Lightricks/")); };
        Engine e(o);
        auto m = tinyModel();
        m.repos = {QStringLiteral("someone/lookalike-ltx")};
        auto id = e.enqueueLoad(m);
        QVERIFY(waitFinished(e, id));
        QCOMPARE(e.job(id)->state, JobState::Failed);
        QCOMPARE(e.job(id)->errorCode, ErrorCode::PermissionDenied);
        QVERIFY(e.job(id)->error.contains(QStringLiteral("someone/lookalike-ltx")));
        m.repos = {QStringLiteral("Lightricks/LTX-2.3")};
        id = e.enqueueLoad(m);
        QVERIFY(waitFinished(e, id));
        QCOMPARE(e.job(id)->state, JobState::Done);
    }

    void unloadRestoresProcessSettings()
    {
        const auto before = facade::ProcessSettings::capture();
        {
            Engine e({});
            auto m = tinyModel();
            m.plan.attentionKernel = "efficient";
            m.plan.fp8FastAccumulation = true;
            m.plan.cpuThreads = 1;
            auto id = e.enqueueLoad(m);
            QVERIFY(waitFinished(e, id));
            QCOMPARE(e.job(id)->state, JobState::Done);
            const auto during = facade::ProcessSettings::capture();
            // (Intra-op threads are the engine thread's own: OpenMP keeps them per thread.)
            QCOMPARE(during.attentionKernel, std::string("efficient"));
            QCOMPARE(during.fp8FastAccumulation, true);
            id = e.enqueueUnload();
            QVERIFY(waitFinished(e, id));
            QVERIFY(!e.resident().has_value());
            QVERIFY(facade::ProcessSettings::capture() == before);
        }
        QVERIFY(facade::ProcessSettings::capture() == before);
    }

    void queuedJobsCanBeCancelledAndTheQueueCleared()
    {
        Engine e({});
        runtime::GenerateJob job;
        job.model = tinyModel();
        job.request = smallRequest(256, 33);
        job.writeOutput = false;
        const auto a = e.enqueueGenerate(job);
        const auto b = e.enqueueGenerate(job);
        QVERIFY(e.cancel(b));
        QCOMPARE(e.job(b)->state, JobState::Cancelled);
        QVERIFY(waitFinished(e, a));
        QCOMPARE(e.job(a)->state, JobState::Done);
        e.clearFinished();
        QVERIFY(e.jobs().isEmpty());
    }

    void ideogramIsPlannedAsAnImageModel()
    {
        const auto model = tinyIdeogram();
        QCOMPARE(facade::detectModelKind(model.plan.modelPaths), facade::ModelKind::Image);
        QCOMPARE(facade::detectModelKind(tinyModel().plan.modelPaths), facade::ModelKind::Video);
        auto plan = facade::Generator::planMemory(model.plan, {64, 48, 1, true}, facade::MemoryBudget{0, 0, 1ll << 40, std::nullopt});
        QVERIFY2(plan, plan ? "" : plan.error().message.c_str());
        QCOMPARE(plan->pipeline, std::string("ideogram4"));
        QCOMPARE(plan->kind, facade::ModelKind::Image);
        QVERIFY(plan->fits);
        // Both DiTs, the text tower and the VAE, at their stored bytes (the tiny DiTs are twins).
        std::map<std::string, std::int64_t> bytes;
        for (const auto& c : plan->components)
            bytes[c.name] = c.bytes;
        QCOMPARE(bytes.size(), std::size_t(4));
        for (const char* name : {"text_encoder", "transformer", "unconditional_transformer", "vae"})
            QVERIFY2(bytes[name] > 0, name);
        QCOMPARE(bytes["transformer"], bytes["unconditional_transformer"]);
        QCOMPARE(plan->hostWeightBytes, bytes["text_encoder"] + bytes["transformer"] + bytes["unconditional_transformer"] + bytes["vae"]);
        // Too little memory: it says so, with the shortfall.
        auto tight = facade::Generator::planMemory(model.plan, {64, 48, 1, true}, facade::MemoryBudget{0, 0, 1024, std::nullopt});
        QVERIFY(tight);
        QVERIFY(!tight->fits);
        QVERIFY(tight->shortfallBytes > 0);
        QVERIFY(tight->explanation.find("does not fit") != std::string::npos);
        // Placements it cannot run are refused, not silently replaced; streaming both DiTs'
        // blocks is one it runs (on a GPU; on the CPU everything is in RAM anyway).
        auto textOnCpu = model.plan;
        textOnCpu.placement = facade::Placement::TextEncoderOnCpu;
        auto refused = facade::Generator::planMemory(textOnCpu, {64, 48, 1, true}, facade::MemoryBudget{0, 0, 1ll << 40, std::nullopt});
        QVERIFY(!refused);
        QCOMPARE(refused.error().code, ErrorCode::Unsupported);
        auto offload = model.plan;
        offload.placement = facade::Placement::OffloadTransformerBlocks;
        auto streamed = facade::Generator::planMemory(offload, {64, 48, 1, true}, facade::MemoryBudget{0, 0, 1ll << 40, std::nullopt});
        QVERIFY2(streamed, streamed ? "" : streamed.error().message.c_str());
        QVERIFY(streamed->fits && streamed->forced);
    }

    void imageJobWritesAPngThatLandsInTheGallery()
    {
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("VireoTest"));
        QCoreApplication::setApplicationName(QStringLiteral("vireo-engine-test"));
        QSettings().clear();
        for (const auto* suffix : {"", "-wal", "-shm"})
            QFile::remove(core::Studio::galleryDatabaseFile() + QString::fromLatin1(suffix));
        QSettings().setValue(QStringLiteral("hub/cacheDir"), m_out.filePath(QStringLiteral("cache")));
        QSettings().setValue(QStringLiteral("hub/offline"), true);
        QSettings().setValue(QStringLiteral("studio/device"), QStringLiteral("cpu"));
        const QString outputs = m_out.filePath(QStringLiteral("images"));
        QSettings().setValue(QStringLiteral("studio/outputsFolder"), outputs);
        auto studio = core::Studio::create();
        QVERIFY2(studio, studio ? "" : studio.error().message.c_str());
        auto* e = (*studio)->engine(QStringLiteral("cpu"));
        QVERIFY((*studio)->gallery()->isOpen());

        runtime::GenerateJob job;
        job.model = tinyIdeogram();
        job.request = imageRequest();
        job.outputFolder = outputs;
        QStringList phases;
        connect(e, &Engine::jobProgress, this, [&](quint64, const QString& p, qint64, qint64, double) {
            if (phases.isEmpty() || phases.last() != p)
                phases << p;
        });
        // Previews of the estimate every second step and after the last: one picture each.
        std::vector<int> previewSteps;
        QSize previewSize;
        connect(e, &Engine::previewReady, this, [&](quint64, const QImage& picture, int step) {
            previewSteps.push_back(step);
            previewSize = picture.size();
        });
        const auto id = e->enqueueGenerate(job);
        QVERIFY(waitFinished(*e, id));
        const auto s = e->job(id);
        QVERIFY2(s->state == JobState::Done, qPrintable(s->error));
        QTRY_COMPARE(previewSteps, (std::vector<int>{2, 4, 5}));
        QVERIFY(!previewSize.isEmpty());
        QCOMPARE(previewSize.width() * 48, previewSize.height() * 64);  // the image's shape, not a strip
        QVERIFY(s->outputPath.startsWith(outputs));
        QVERIFY(s->outputPath.endsWith(QStringLiteral(".png")));
        for (const auto& p :
            {QStringLiteral("encode prompt"), QStringLiteral("denoise"), QStringLiteral("decode image"), QStringLiteral("write")})
            QVERIFY2(phases.contains(p), qPrintable(phases.join(QStringLiteral(", "))));
        const QImage image(s->outputPath);
        QCOMPARE(image.size(), QSize(64, 48));
        QCOMPARE(s->recipe.kind, std::string("image"));
        QCOMPARE(s->recipe.pipeline, std::string("ideogram4"));
        QCOMPARE(s->recipe.request.steps, 5);
        QCOMPARE(s->recipe.sigmas.size(), std::size_t(6));
        // The recipe travels inside the PNG.
        const auto embedded = gallery::readEmbeddedRecipe(s->outputPath);
        QVERIFY(embedded);
        QCOMPARE(embedded->kind, std::string("image"));
        QCOMPARE(embedded->pipeline, std::string("ideogram4"));
        QCOMPARE(embedded->request.seed, std::int64_t(1234));
        QCOMPARE(embedded->request.guidance, 3.5);
        QCOMPARE(embedded->request.width, std::int64_t(64));
        QCOMPARE(embedded->request.height, std::int64_t(48));
        QVERIFY(!embedded->files.empty());
        // The studio's gallery lists it as an image, with its recipe and a thumbnail it can make.
        auto* gallery = (*studio)->gallery();
        QTRY_VERIFY_WITH_TIMEOUT(std::any_of(gallery->items().begin(), gallery->items().end(),
                                     [&](const auto& i) {
                                         return i.path == s->outputPath && i.hasRecipe && i.kind == QStringLiteral("image") && i.width == 64
                                             && i.height == 48;
                                     }),
            5000);
        QVERIFY(gallery::makeThumbnail(s->outputPath));

        // The family's schedule knobs reach the sampler: the sigmas are sigmoid(mean + std z)
        // with mean = mu + log(h w / 512^2) / 2, so a shift moves every logit by mu and a spread
        // scales each logit's distance from the mean (the clamped ends aside).
        runtime::GenerateJob shaped = job;
        shaped.request.knobs = {{"schedule_mu", 0.5}, {"schedule_std", 1.75}};
        const auto shapedId = e->enqueueGenerate(shaped);
        QVERIFY(waitFinished(*e, shapedId));
        const auto t = e->job(shapedId);
        QVERIFY2(t->state == JobState::Done, qPrintable(t->error));
        QCOMPARE(t->recipe.request.knobs, shaped.request.knobs);
        QCOMPARE(gallery::readEmbeddedRecipe(t->outputPath)->request.knobs, shaped.request.knobs);
        const auto logit = [](double s) { return std::log(s / (1 - s)); };
        const double base = 0.5 * std::log(64.0 * 48.0 / (512.0 * 512.0));
        QCOMPARE(t->recipe.sigmas.size(), s->recipe.sigmas.size());
        for (std::size_t i = 1; i + 1 < s->recipe.sigmas.size(); ++i) {
            const double before = logit(s->recipe.sigmas[i]) - base, after = logit(t->recipe.sigmas[i]) - (base + 0.5);
            QVERIFY2(std::abs(after - before * 1.75 / 1.5) < 1e-3, qPrintable(QStringLiteral("sigma %1").arg(i)));
        }

        // An image model asked for an MP4 fails before anything is written, naming the fix.
        runtime::GenerateJob wrong = job;
        wrong.outputPath = m_out.filePath(QStringLiteral("image.mp4"));
        const auto bad = e->enqueueGenerate(wrong);
        QVERIFY(waitFinished(*e, bad));
        QCOMPARE(e->job(bad)->state, JobState::Failed);
        QVERIFY2(e->job(bad)->error.contains(QStringLiteral(".png")), qPrintable(e->job(bad)->error));
        QVERIFY(!QFile::exists(wrong.outputPath));
    }

    void conditionsAreReadCheckedAndKeptBesideTheVideo()
    {
        Engine e({});
        const QString folder = m_out.filePath(QStringLiteral("conditioned"));
        // A portrait picture for a square video (scaled to cover it and cropped), written by Qt.
        QImage picture(48, 80, QImage::Format_RGB888);
        for (int y = 0; y < picture.height(); ++y)
            for (int x = 0; x < picture.width(); ++x)
                picture.setPixelColor(x, y, QColor(40 + 4 * x, 30 + 2 * y, 128));
        const QString png = m_out.filePath(QStringLiteral("start image.png"));
        QVERIFY(picture.save(png));
        QFile f(png);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const auto bytes = f.readAll();
        const auto sha = QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex().toStdString();

        runtime::GenerateJob job;
        job.model = tinyModel();
        job.request = smallRequest(64, 17);
        job.outputFolder = folder;
        job.conditions = {{png, 0, 1.0, 33, 0, false, {}}, {png, 9, 0.5, 0, 0, false, {}}};
        QStringList phases;
        connect(&e, &Engine::jobProgress, this, [&](quint64, const QString& p, qint64, qint64, double) {
            if (phases.isEmpty() || phases.last() != p)
                phases << p;
        });
        const auto id = e.enqueueGenerate(job);
        QVERIFY(waitFinished(e, id));
        const auto s = e.job(id);
        QVERIFY2(s->state == JobState::Done, qPrintable(s->error));
        QVERIFY2(phases.contains(QStringLiteral("read conditions")), qPrintable(phases.join(QStringLiteral(", "))));
        QCOMPARE(s->recipe.conditions.size(), std::size_t(2));
        const auto& first = s->recipe.conditions[0];
        QCOMPARE(first.source, png.toStdString());
        QCOMPARE(first.sha256, sha);
        QCOMPARE(first.frame, std::int64_t(0));
        QCOMPARE(first.strength, 1.0);
        QCOMPARE(first.crf, 33);
        QCOMPARE(s->recipe.conditions[1].frame, std::int64_t(9));
        QCOMPARE(s->recipe.conditions[1].strength, 0.5);
        QCOMPARE(s->recipe.conditions[1].crf, 0);
        QCOMPARE(s->recipe.request.stages, std::string("auto"));
        QVERIFY(s->recipe.stages == "single" || s->recipe.stages == "two");
        // The picture is kept beside the video, byte for byte, under the output's name.
        const QFileInfo out(s->outputPath);
        QCOMPARE(QString::fromStdString(first.copy), out.completeBaseName() + QStringLiteral(".cond0.png"));
        QFile copy(out.dir().filePath(QString::fromStdString(first.copy)));
        QVERIFY(copy.open(QIODevice::ReadOnly));
        QVERIFY(copy.readAll() == bytes);
        QCOMPARE(QString::fromStdString(s->recipe.conditions[1].copy), out.completeBaseName() + QStringLiteral(".cond1.png"));
        // ... and the recipe inside the MP4 says so.
        const auto embedded = gallery::readEmbeddedRecipe(s->outputPath);
        QVERIFY(embedded);
        QCOMPARE(embedded->conditions.size(), std::size_t(2));
        QCOMPARE(embedded->conditions[0].sha256, sha);
        QCOMPARE(embedded->conditions[0].copy, first.copy);

        // Refused before the model is used, each naming the file or the value, nothing written.
        QFile text(m_out.filePath(QStringLiteral("notes.png")));
        QVERIFY(text.open(QIODevice::WriteOnly));
        text.write("these are notes, not a picture\n");
        text.close();
        const auto before = QDir(folder).entryList(QDir::Files).size();
        struct Case {
            runtime::ConditionFile condition;
            std::string stages;
            QStringList words;
        };
        const QList<Case> cases{
            {{m_out.filePath(QStringLiteral("absent.png")), 0, 1.0, 33, 0, false, {}}, "auto",
                {QStringLiteral("absent.png"), QStringLiteral("no such file")}},
            {{text.fileName(), 0, 1.0, 33, 0, false, {}}, "auto",
                {QStringLiteral("notes.png"), QStringLiteral("not an image FFmpeg can decode")}},
            {{png, 8, 1.0, 33, 0, false, {}}, "auto", {QStringLiteral("start image.png"), QStringLiteral("8k + 1")}},
            {{png, 17, 1.0, 33, 0, false, {}}, "auto", {QStringLiteral("past the last frame")}},
            {{png, 0, 1.5, 33, 0, false, {}}, "auto", {QStringLiteral("strength")}},
            // The tiny folder has an upsampler; the dev schedule is what keeps two stages out.
            {{png, 0, 1.0, 33, 0, false, {}}, "two", {QStringLiteral("two-stage path cannot run"), QStringLiteral("distilled")}},
        };
        for (const auto& c : cases) {
            auto bad = job;
            bad.conditions = {c.condition};
            bad.request.stages = c.stages;
            if (c.stages == "two")
                bad.request.schedule = "dev";
            const auto badId = e.enqueueGenerate(bad);
            QVERIFY(waitFinished(e, badId));
            const auto b = e.job(badId);
            QCOMPARE(b->state, JobState::Failed);
            for (const auto& word : c.words)
                QVERIFY2(b->error.contains(word), qPrintable(b->error));
            QVERIFY2(b->generateSeconds == 0, qPrintable(b->error));
        }
        QCOMPARE(QDir(folder).entryList(QDir::Files).size(), before);
        // An image model takes no start image.
        runtime::GenerateJob image;
        image.model = tinyIdeogram();
        image.request = imageRequest();
        image.outputFolder = folder;
        image.conditions = {{png, 0, 1.0, 33, 0, false, {}}};
        const auto imageId = e.enqueueGenerate(image);
        QVERIFY(waitFinished(e, imageId));
        QCOMPARE(e.job(imageId)->state, JobState::Failed);
        QVERIFY2(e.job(imageId)->error.contains(QStringLiteral("video model")), qPrintable(e.job(imageId)->error));
    }

    // Needs the conditioning pipeline of issue #18 (inference/): until Generator::generate
    // reads conditions and reports the path it ran, the video cannot depend on the picture.
    void aStartImageChangesTheVideo()
    {
        Engine e({});
        QImage picture(64, 64, QImage::Format_RGB888);
        picture.fill(QColor(230, 40, 20));
        const QString png = m_out.filePath(QStringLiteral("red.png"));
        QVERIFY(picture.save(png));
        runtime::GenerateJob plain;
        plain.model = tinyModel();
        plain.request = smallRequest(64, 9);
        plain.outputFolder = m_out.filePath(QStringLiteral("compare"));
        auto conditioned = plain;
        conditioned.conditions = {{png, 0, 1.0, 33, 0, false, {}}};
        const auto a = e.enqueueGenerate(plain);
        const auto b = e.enqueueGenerate(conditioned);
        QVERIFY(waitFinished(e, a) && waitFinished(e, b));
        QVERIFY2(e.job(a)->state == JobState::Done, qPrintable(e.job(a)->error));
        QVERIFY2(e.job(b)->state == JobState::Done, qPrintable(e.job(b)->error));
        QVERIFY(!e.job(b)->recipe.stagesReason.empty());
        auto frames = [](const QString& path) {
            QProcess ffmpeg;
            ffmpeg.start(QStringLiteral("ffmpeg"),
                {QStringLiteral("-v"), QStringLiteral("error"), QStringLiteral("-i"), path, QStringLiteral("-f"),
                    QStringLiteral("rawvideo"), QStringLiteral("-pix_fmt"), QStringLiteral("rgb24"), QStringLiteral("-")});
            ffmpeg.waitForFinished(60000);
            return ffmpeg.readAllStandardOutput();
        };
        const auto pa = frames(e.job(a)->outputPath), pb = frames(e.job(b)->outputPath);
        QVERIFY(!pa.isEmpty() && pa.size() == pb.size());
        QVERIFY2(pa != pb, "the start image did not change the video");
    }

private:
    QTemporaryDir m_out;
    QString m_broken;
};

QTEST_GUILESS_MAIN(TestEngine)
#include "test_engine.moc"
