// The catalog's GGUF variants end to end, as a user gets them: the local test Hub serves tiny
// LTX-2.3 weights under the publishers' real file names (unsloth/LTX-2.3-GGUF: a transformer
// GGUF, the connectors file, the video VAE and the audio VAE with its vocoder; Lightricks'
// upscaler and the diffusers text encoder), the studio plans and downloads each variant into a
// huggingface_hub cache, resolves the finished download to the loader's files, plans its
// memory and paths, and generates a video from it through the engine the window uses.
#include "core/gallery/gallery.h"
#include "core/generation/generation.h"
#include "core/hub/downloadmanager.h"
#include "core/hub/downloadtask.h"
#include "core/output/recipe.h"
#include "core/runtime/defaults.h"
#include "core/runtime/engine.h"
#include "core/runtime/modelresolver.h"
#include "core/settings/studiosettings.h"
#include "core/studio/studio.h"
#include "inference/facade/generator.h"
#include "media/mediareader.h"
#include "tests/hub/testhub.h"

#include <algorithm>

#include <QCoreApplication>
#include <QDir>
#include <QDirIterator>
#include <QFileInfo>
#include <QJsonObject>
#include <QSettings>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

#include <set>
#include <sstream>

using vireo::hub::DownloadTask;

namespace {

QString fixtures()
{
    return qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2pipeline/v23");
}

// Every file under `folder` as hub spec entries at their relative paths (JSON and text as
// plain git files, weights through LFS, as the Hub stores them).
QJsonObject filesUnder(const QString& folder, const QString& prefix = {})
{
    QJsonObject files;
    QDirIterator it(folder, QDir::Files, QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QString path = it.next();
        const QString rel = prefix + QDir(folder).relativeFilePath(path);
        const bool text = rel.endsWith(QStringLiteral(".json")) || rel.endsWith(QStringLiteral(".txt"));
        files.insert(rel, QJsonObject{{QStringLiteral("path"), path}, {QStringLiteral("lfs"), !text}});
    }
    return files;
}

bool waitIdle(DownloadTask* task, int ms)
{
    return QTest::qWaitFor([task] { return !task->busy(); }, ms);
}

// A job through the engine to its end (five minutes at most), and how it ended.
std::optional<vireo::runtime::JobStatus> runToEnd(vireo::runtime::Engine* engine, const vireo::runtime::GenerateJob& job)
{
    const auto id = engine->enqueueGenerate(job);
    // Past the wait, the status says how far it got: the caller checks it is Done.
    (void)QTest::qWaitFor(
        [&] {
            const auto s = engine->job(id);
            return s && s->state != vireo::runtime::JobState::Queued && s->state != vireo::runtime::JobState::Running;
        },
        300000);
    return engine->job(id);
}

struct Expected {
    const char* id;
    const char* gguf;
    bool distilledLora;  // the dev two-stage recipe's
};

const Expected kVariants[] = {
    {"ltx-2.3/distilled-gguf-q4_k_m", "distilled/ltx-2.3-22b-distilled-Q4_K_M.gguf", false},
    {"ltx-2.3/distilled-gguf-q8_0", "distilled/ltx-2.3-22b-distilled-Q8_0.gguf", false},
    {"ltx-2.3/dev-gguf-q4_k_m", "ltx-2.3-22b-dev-Q4_K_M.gguf", true},
    {"ltx-2.3/dev-gguf-q8_0", "ltx-2.3-22b-dev-Q8_0.gguf", true},
};

}  // namespace

class TestCatalogModels : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_work;
    vireo::test::TestHub m_hub;

    QString cacheDir() const { return m_work.filePath(QStringLiteral("hf-cache")); }

    // Plans and downloads a catalog variant; the resolved model, or a failure message.
    std::optional<vireo::runtime::ModelRef> download(vireo::core::Studio& studio, const QString& id, QStringList* planned)
    {
        QString error;
        auto* task = studio.downloads()->openVariant(id, &error);
        if (!task) {
            qWarning("%s: %s", qPrintable(id), qPrintable(error));
            return std::nullopt;
        }
        if (!waitIdle(task, 60000) || task->state() == DownloadTask::State::PlanFailed) {
            qWarning("%s: plan: %s", qPrintable(id), qPrintable(task->message()));
            return std::nullopt;
        }
        for (const auto& row : task->rows())
            planned->append(QString::fromStdString(task->spec().sources[static_cast<std::size_t>(row.source)].repo + "/" + row.file.path));
        if (task->state() != DownloadTask::State::Done) {
            task->start();
            if (!waitIdle(task, 120000) || task->state() != DownloadTask::State::Done) {
                qWarning("%s: download: %s", qPrintable(id), qPrintable(task->message()));
                return std::nullopt;
            }
        }
        auto model = studio.models()->resolve(QStringLiteral("catalog:") + id);
        if (!model) {
            qWarning("%s: resolve: %s", qPrintable(id), model.error().message.c_str());
            return std::nullopt;
        }
        return *model;
    }

    // A tiny clip's ask: every LTX run of this file makes the same fox at 64x64x9.
    static vireo::generation::Ask foxAsk()
    {
        vireo::generation::Ask ask;
        ask.prompt = "a red fox in the snow";
        ask.width = 64;
        ask.height = 64;
        ask.frames = 9;
        ask.seed = 7;
        return ask;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(m_work.isValid());
        QStandardPaths::setTestModeEnabled(true);
        QCoreApplication::setOrganizationName(QStringLiteral("VireoTest"));
        QCoreApplication::setApplicationName(QStringLiteral("vireo-catalog-models-test"));
        qunsetenv("HF_TOKEN");
        qunsetenv("HUGGING_FACE_HUB_TOKEN");
        qunsetenv("HF_HUB_OFFLINE");
        qputenv("HF_HOME", m_work.filePath(QStringLiteral("hf-home")).toUtf8());
        QSettings().clear();
        QSettings().setValue(QStringLiteral("hub/cacheDir"), cacheDir());
        QSettings().setValue(QStringLiteral("hub/parallelDownloads"), 2);
        QSettings().setValue(QStringLiteral("hub/headroomBytes"), quint64(16) << 20);

        const QString root = fixtures();
        QVERIFY2(QFileInfo::exists(root + QStringLiteral("/publisher/unsloth")), "the ltx2pipeline fixture has no publisher layout");
        QJsonObject repos;
        repos.insert(QStringLiteral("unsloth/LTX-2.3-GGUF"),
            QJsonObject{{QStringLiteral("files"), filesUnder(root + QStringLiteral("/publisher/unsloth"))}});
        // The dev variants' distilled LoRA: the recipe fixture's, under the Hub's name.
        auto lightricks23 = filesUnder(root + QStringLiteral("/publisher/lightricks"));
        const QString lora = qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2recipes/v23/distilled_lora.safetensors");
        QVERIFY2(QFileInfo::exists(lora), "the ltx2recipes fixture has no distilled LoRA");
        lightricks23.insert(QStringLiteral("ltx-2.3-22b-distilled-lora-384-1.1.safetensors"),
            QJsonObject{{QStringLiteral("path"), lora}, {QStringLiteral("lfs"), true}});
        repos.insert(QStringLiteral("Lightricks/LTX-2.3"), QJsonObject{{QStringLiteral("files"), lightricks23}});
        // The 2.3 variants read the text encoder of Lightricks' diffusers repo.
        repos.insert(
            QStringLiteral("Lightricks/LTX-2"), QJsonObject{{QStringLiteral("files"), filesUnder(root + QStringLiteral("/diffusers"))}});
        // LTX-2.5's diffusers repo: the tiny 2.5 pipeline with its Gemma 4 encoder.
        // Its diffusion video decoder ships beside the pipeline's components, not listed in
        // model_index.json (LTX2DFRPipeline does not take one).
        auto ltx25 = filesUnder(root + QStringLiteral("/../v25/diffusers"));
        const auto decoder = filesUnder(root + QStringLiteral("/../v25/diffusion_decoder"), QStringLiteral("diffusion_decoder/"));
        for (auto it = decoder.begin(); it != decoder.end(); ++it)
            ltx25.insert(it.key(), it.value());
        // Its prompt enhancer (the enhancer fixture: a tiny Gemma 4 E2B and its processor).
        const QString enhancer = qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/gemma4enhancer");
        for (const auto* part : {"prompt_enhancer", "processor"}) {
            const auto files = filesUnder(enhancer + QLatin1Char('/') + QLatin1String(part), QLatin1String(part) + QLatin1Char('/'));
            QVERIFY2(!files.isEmpty(), "the gemma4enhancer fixture is missing");
            for (auto it = files.begin(); it != files.end(); ++it)
                ltx25.insert(it.key(), it.value());
        }
        repos.insert(QStringLiteral("Lightricks/LTX-2.5-Diffusers"), QJsonObject{{QStringLiteral("files"), ltx25}});
        // Lightricks' own LTX-2.5 repository: one file per component under the Hub's names (the
        // tiny 2.5 model split as published; the spatial upscaler is the 2.3 fixture's, whose
        // latents are the same 8 channels).
        auto lightricks25 = filesUnder(root + QStringLiteral("/../v25/lightricks"));
        QJsonObject upscaler;
        upscaler.insert(
            QStringLiteral("path"), QString(root + QStringLiteral("/publisher/lightricks/ltx-2.3-spatial-upscaler-x2-1.1.safetensors")));
        upscaler.insert(QStringLiteral("lfs"), true);
        lightricks25.insert(QStringLiteral("latent_upscale_models/ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors"), upscaler);
        // The dev variant: the tiny transformer under the dev file's name, and the recipe
        // fixture's distilled LoRA (its modules and widths are the tiny 2.5 transformer's too).
        lightricks25.insert(QStringLiteral("diffusion_models/ltx-2.5-22b-dev-transformer-bf16.safetensors"),
            QJsonObject{
                {QStringLiteral("path"),
                    QString(
                        root + QStringLiteral("/../v25/lightricks/diffusion_models/ltx-2.5-22b-distilled-transformer-bf16.safetensors"))},
                {QStringLiteral("lfs"), true}});
        lightricks25.insert(QStringLiteral("loras/ltx-2.5-22b-distilled-lora-450-bf16.safetensors"),
            QJsonObject{{QStringLiteral("path"), lora}, {QStringLiteral("lfs"), true}});
        repos.insert(QStringLiteral("Lightricks/LTX-2.5"), QJsonObject{{QStringLiteral("files"), lightricks25}});
        QString error;
        QVERIFY2(m_hub.startWithSpec(m_work.path(), QJsonObject{{QStringLiteral("repos"), repos}}, {}, &error), qPrintable(error));
        QSettings().setValue(QStringLiteral("hub/endpoint"), m_hub.hubUrl());
        vireo::core::StudioSettings().setToken(QString());
    }

    void cleanupTestCase() { m_hub.stop(); }

    void everyGgufVariantDownloadsExactlyItsFilesAndLoads()
    {
        auto studio = vireo::core::Studio::create();
        QVERIFY(studio);
        for (const auto& v : kVariants) {
            const QString id = QString::fromLatin1(v.id);
            const QString kind = id.contains(QStringLiteral("distilled")) ? QStringLiteral("distilled") : QStringLiteral("dev");
            QStringList planned;
            const auto model = download(**studio, id, &planned);
            QVERIFY2(model, v.id);
            // Exactly what the pipeline reads: the transformer of this quant, the connectors, both VAE
            // files (the vocoder is inside the audio VAE file), the upscaler for the two-stage
            // path (and the dev recipe's distilled LoRA), and Gemma's diffusers folders; nothing
            // of the other variants.
            std::set<QString> want{QStringLiteral("unsloth/LTX-2.3-GGUF/") + QString::fromLatin1(v.gguf),
                QStringLiteral("unsloth/LTX-2.3-GGUF/text_encoders/ltx-2.3-22b-%1_embeddings_connectors.safetensors").arg(kind),
                QStringLiteral("unsloth/LTX-2.3-GGUF/vae/ltx-2.3-22b-%1_video_vae.safetensors").arg(kind),
                QStringLiteral("unsloth/LTX-2.3-GGUF/vae/ltx-2.3-22b-%1_audio_vae.safetensors").arg(kind)};
            want.insert(QStringLiteral("Lightricks/LTX-2.3/ltx-2.3-spatial-upscaler-x2-1.1.safetensors"));
            if (v.distilledLora)
                want.insert(QStringLiteral("Lightricks/LTX-2.3/ltx-2.3-22b-distilled-lora-384-1.1.safetensors"));
            std::set<QString> weights;
            for (const auto& p : planned)
                if (!p.startsWith(QStringLiteral("Lightricks/LTX-2/")))
                    weights.insert(p);
                else
                    QVERIFY2(p.contains(QStringLiteral("/text_encoder/")) || p.contains(QStringLiteral("/tokenizer/"))
                            || p.endsWith(QStringLiteral("model_index.json")),
                        qPrintable(p));
            QCOMPARE(weights, want);
            QVERIFY2(planned.join(QLatin1Char(' ')).contains(QStringLiteral("Lightricks/LTX-2/text_encoder/")), v.id);

            // The finished download as the loader takes it, and its plan from the headers alone.
            QCOMPARE(model->plan.modelPaths.size(), std::size_t(4));
            QVERIFY(model->plan.textEncoderPath.has_value());
            QVERIFY(model->plan.spatialUpsamplerPath.has_value());
            QCOMPARE(model->plan.distilledLoraPath.has_value(), v.distilledLora);
            vireo::facade::MemoryBudget budget;
            budget.hostAvailableBytes = 1ll << 40;
            auto plan = vireo::facade::Generator::planMemory(model->plan, {64, 64, 9, false}, budget);
            QVERIFY2(plan, plan ? "" : plan.error().message.c_str());
            QCOMPARE(QString::fromStdString(plan->version), QStringLiteral("2.3"));
            for (const auto& c : plan->components)
                QVERIFY2(c.bytes > 0 || c.name == "video_encoder",
                    qPrintable(QString::fromStdString(c.name) + QStringLiteral(" is empty in ") + id));
            bool gguf = false;
            for (const auto& p : plan->paths)
                gguf = gguf || (p.component == "transformer" && p.path == "dequantize to f32 + GEMM on the CPU");
            QVERIFY2(gguf, plan->pathsText.c_str());
        }
    }

    // The defaults a model gets outside the catalog (the CLI on its files, the window's local
    // models) are the ones its catalog entry gives: the files say dev or distilled. Local folders
    // get their version's family, and dev when their name says so.
    // A local key names every companion a run was given, so --again and Generate again find
    // them: each tag read back into the plan, a missing one named, the paths listed untagged.
    void localKeysKeepEveryCompanion()
    {
        auto studio = vireo::core::Studio::create();
        QVERIFY(studio);
        const QString root = QString::fromLocal8Bit(qgetenv("VIREO_FIXTURES_ROOT"));
        const QString model = root + QStringLiteral("/ltx2pipeline/v25/diffusers"), pe = root + QStringLiteral("/gemma4enhancer"),
                      te = model + QStringLiteral("/text_encoder"), file = model + QStringLiteral("/model_index.json");
        using vireo::runtime::ModelResolver;
        const auto key = ModelResolver::localKey({model}, te, file, file, file, pe);
        const auto resolved = (*studio)->models()->resolve(key);
        QVERIFY2(resolved, resolved ? "" : resolved.error().message.c_str());
        const auto& plan = resolved->plan;
        QVERIFY(plan.modelPaths.size() == 1 && plan.textEncoderPath && plan.spatialUpsamplerPath && plan.temporalUpsamplerPath
            && plan.distilledLoraPath && plan.promptEnhancerPath);
        QCOMPARE(QString::fromStdString(plan.promptEnhancerPath->string()), pe);
        QCOMPARE(ModelResolver::localKeyPaths(key.mid(6)), QStringList({model, te, file, file, file, pe}));
        const auto gone = (*studio)->models()->resolve(ModelResolver::localKey({model}, {}, {}, {}, {}, pe + QStringLiteral("-gone")));
        QVERIFY(!gone && gone.error().message.find("the prompt enhancer") != std::string::npos);
    }

    void modelsOutsideTheCatalogGetTheDefaultsTheirFilesCallFor()
    {
        auto studio = vireo::core::Studio::create();
        QVERIFY(studio);
        const auto& catalog = (*studio)->downloads()->catalog();
        for (const auto& v : kVariants) {
            QStringList planned;
            const auto model = download(**studio, QString::fromLatin1(v.id), &planned);
            QVERIFY2(model, v.id);
            const auto facts = vireo::facade::Generator::readModelFacts(model->plan);
            QVERIFY2(facts, facts ? "" : facts.error().message.c_str());
            const auto fromFiles = vireo::runtime::defaultsForModel(catalog, *facts);
            const auto fromCatalog = vireo::runtime::defaultsForVariant(catalog, v.id);
            QVERIFY(fromFiles && fromCatalog);
            QVERIFY2(fromFiles->schedule == fromCatalog->schedule && fromFiles->steps == fromCatalog->steps
                    && fromFiles->guidance == fromCatalog->guidance && fromFiles->audioGuidance == fromCatalog->audioGuidance
                    && fromFiles->width == fromCatalog->width && fromFiles->frames == fromCatalog->frames,
                qPrintable(QStringLiteral("%1: %2 (%3 steps) from its files, %4 (%5 steps) from the catalog; %6")
                               .arg(QString::fromLatin1(v.id), QString::fromStdString(fromFiles->schedule))
                               .arg(fromFiles->steps)
                               .arg(QString::fromStdString(fromCatalog->schedule))
                               .arg(fromCatalog->steps)
                               .arg(QString::fromStdString(fromFiles->basis))));
            QVERIFY2(fromFiles->basis.find(QFileInfo(QString::fromLatin1(v.gguf)).fileName().toStdString()) != std::string::npos,
                fromFiles->basis.c_str());
        }

        // A local 2.0 folder that says nothing: 2.0's distilled defaults, and the page says why.
        const QString v20 = qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2pipeline/v20/diffusers");
        vireo::facade::LoadPlan plain;
        plain.modelPaths = {v20.toStdString()};
        auto facts = vireo::facade::Generator::readModelFacts(plain);
        QVERIFY2(facts, facts ? "" : facts.error().message.c_str());
        QCOMPARE(QString::fromStdString(facts->version), QStringLiteral("2.0"));
        QVERIFY(facts->trainedFor.empty());
        auto d = vireo::runtime::defaultsForModel(catalog, *facts);
        QVERIFY(d);
        QCOMPARE(QString::fromStdString(d->schedule), QStringLiteral("distilled"));
        QCOMPARE(d->steps, 8);
        QVERIFY2(d->basis.find("nothing in its files says dev or distilled") != std::string::npos, d->basis.c_str());
        // The same folder under a dev name: 2.0's dev defaults (40 steps), not 2.3's (30).
        const QString named = m_work.filePath(QStringLiteral("LTX-2-19b-dev"));
        QVERIFY(QFile::link(v20, named));
        vireo::facade::LoadPlan dev;
        dev.modelPaths = {named.toStdString()};
        facts = vireo::facade::Generator::readModelFacts(dev);
        QVERIFY2(facts, facts ? "" : facts.error().message.c_str());
        QCOMPARE(QString::fromStdString(facts->trainedFor), QStringLiteral("dev"));
        d = vireo::runtime::defaultsForModel(catalog, *facts);
        QVERIFY(d);
        const auto ltx2Dev = vireo::runtime::defaultsForVariant(catalog, "ltx-2/dev-bf16");
        QVERIFY(ltx2Dev);
        QCOMPARE(QString::fromStdString(d->schedule), QStringLiteral("dev"));
        QCOMPARE(d->steps, ltx2Dev->steps);
        QCOMPARE(d->guidance, ltx2Dev->guidance);
        QVERIFY2(d->basis.find("LTX-2-19b-dev says dev") != std::string::npos, d->basis.c_str());
        // A schedule chosen by the user wins over the name.
        d = vireo::runtime::defaultsForModel(catalog, *facts, "distilled");
        QVERIFY(d && d->schedule == "distilled" && d->steps == 8);
    }

    void aDownloadedGgufVariantGeneratesAVideo()
    {
        auto studio = vireo::core::Studio::create();
        QVERIFY(studio);
        QStringList planned;
        const auto model = download(**studio, QString::fromLatin1(kVariants[0].id), &planned);
        QVERIFY(model);
        auto* engine = (*studio)->engine(QStringLiteral("cpu"));
        // From "download finished" to "generated" the way the window goes: the generation
        // service fills what was not asked from the variant's defaults and checks the rules.
        auto ask = foxAsk();
        ask.stages = "single";
        const auto& catalog = (*studio)->downloads()->catalog();
        const auto defaults = vireo::generation::defaultsFor(catalog, *model, ask);
        QVERIFY2(defaults, defaults ? "" : defaults.error().message.c_str());
        auto prepared = vireo::generation::prepare(catalog, *defaults, *model, ask);
        QVERIFY2(prepared, prepared ? "" : prepared.error().message.c_str());
        QCOMPARE(prepared->job.request.schedule, std::string("distilled"));
        QCOMPARE(prepared->job.request.steps, 8);
        auto job = prepared->job;
        job.outputPath = m_work.filePath(QStringLiteral("fox.mp4"));
        const auto s = runToEnd(engine, job);
        QVERIFY(s);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QVERIFY(QFileInfo(job.outputPath).size() > 1000);
        // The recipe names the downloaded GGUF by its hash and says what ran: dequantized GEMMs.
        bool hashed = false;
        for (const auto& f : s->recipe.files)
            hashed = hashed || (QString::fromStdString(f.path).endsWith(QStringLiteral("Q4_K_M.gguf")) && f.sha256.size() == 64);
        QVERIFY2(hashed, s->recipe.toJson().c_str());
        QVERIFY2(s->recipe.paths.find("dequantize + GEMM (GGUF") != std::string::npos, s->recipe.paths.c_str());
        QVERIFY2(s->recipe.plannedPaths.find("transformer: dequantize to f32 + GEMM") != std::string::npos, s->recipe.plannedPaths.c_str());
        QVERIFY(s->recipe.pathWarnings.empty());
        QCOMPARE(QString::fromStdString(s->recipe.modelKey), model->key);
        // The studio lists it in the gallery with its recipe, as it does for the window (when
        // the engine's finished signal reaches it, which may be after the job reads Done).
        const auto listed = [&] {
            const auto items = (*studio)->gallery()->items();
            return std::any_of(
                items.begin(), items.end(), [&](const auto& item) { return QFileInfo(item.path) == QFileInfo(job.outputPath); });
        };
        QTRY_VERIFY2_WITH_TIMEOUT(listed(), qPrintable((*studio)->galleryError()), 10000);
    }

    // LTX-2.5 as Lightricks publishes it, one file per component: exactly the six files the
    // distilled two-pass recipe reads (the text encoder one file with its tokenizer inside, the
    // video VAE the one with the diffusion decoder, the duration head for a length on auto),
    // recognized as 2.5, run to a video in its two DFR passes and decoded by diffusion.
    void theLtx25LightricksFilesDownloadAndGenerate()
    {
        auto studio = vireo::core::Studio::create();
        QVERIFY(studio);
        const QString id = QStringLiteral("ltx-2.5/lightricks-bf16");
        QStringList planned;
        const auto model = download(**studio, id, &planned);
        QVERIFY(model);
        std::set<QString> files(planned.begin(), planned.end());
        const QString repo = QStringLiteral("Lightricks/LTX-2.5/");
        QCOMPARE(files,
            (std::set<QString>{repo + QStringLiteral("diffusion_models/ltx-2.5-22b-distilled-transformer-bf16.safetensors"),
                repo + QStringLiteral("text_encoders/gemma4-12b-with-proj-ltx-2.5-bf16.safetensors"),
                repo + QStringLiteral("vae/ltx-2.5-video-vae-bf16.safetensors"),
                repo + QStringLiteral("vae/ltx-2.5-audio-vae-bf16.safetensors"),
                repo + QStringLiteral("model_patches/ltx-2.5-duration-head-bf16.safetensors"),
                repo + QStringLiteral("latent_upscale_models/ltx-2.5-latent-spatial-upscaler-x2-bf16-1.0.safetensors")}));
        QVERIFY(!model->plan.textEncoderPath.has_value());
        QVERIFY(model->plan.spatialUpsamplerPath.has_value());
        const auto facts = vireo::facade::Generator::readModelFacts(model->plan);
        QVERIFY2(facts, facts ? "" : facts.error().message.c_str());
        QCOMPARE(QString::fromStdString(facts->version), QStringLiteral("2.5"));
        const auto& catalog = (*studio)->downloads()->catalog();
        auto ask = foxAsk();
        const auto defaults = vireo::generation::defaultsFor(catalog, *model, ask);
        QVERIFY2(defaults, defaults ? "" : defaults.error().message.c_str());
        auto prepared = vireo::generation::prepare(catalog, *defaults, *model, ask);
        QVERIFY2(prepared, prepared ? "" : prepared.error().message.c_str());
        QVERIFY2(prepared->stagesReason.find("LTX-2.5 DFR, two passes") != std::string::npos, prepared->stagesReason.c_str());
        auto job = prepared->job;
        job.outputPath = m_work.filePath(QStringLiteral("fox25-lightricks.mp4"));
        const auto s = runToEnd((*studio)->engine(QStringLiteral("cpu")), job);
        QVERIFY(s);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QVERIFY(QFileInfo(job.outputPath).size() > 1000);
        QCOMPARE(QString::fromStdString(s->recipe.modelVersion), QStringLiteral("2.5"));
        QCOMPARE(QString::fromStdString(s->recipe.stages), QStringLiteral("two"));
        QVERIFY2(
            s->recipe.stagesReason.find("decoded by the diffusion video decoder") != std::string::npos, s->recipe.stagesReason.c_str());

        // The third spatial stage (Lightricks' 4K path): stage 1 at a quarter of the size asked,
        // the second pass at half, the third in tiles at the size itself; the recipe keeps it.
        auto third = ask;
        third.width = 128;
        third.height = 128;
        third.knobs["third_stage"] = 1;
        const auto thirdPlan = vireo::generation::prepare(catalog, *defaults, *model, third);
        QVERIFY2(thirdPlan, thirdPlan ? "" : thirdPlan.error().message.c_str());
        QVERIFY2(thirdPlan->stagesReason.find("third spatial stage: stage 1 at 32x32, the second pass at 64x64, the third at 128x128")
                != std::string::npos,
            thirdPlan->stagesReason.c_str());
        auto thirdJob = thirdPlan->job;
        thirdJob.outputPath = m_work.filePath(QStringLiteral("fox25-third.mp4"));
        const auto ts = runToEnd((*studio)->engine(QStringLiteral("cpu")), thirdJob);
        QVERIFY(ts);
        QVERIFY2(ts->state == vireo::runtime::JobState::Done, qPrintable(ts->error));
        QCOMPARE(ts->recipe.request.knobs.at("third_stage"), 1.0);
        const auto thirdProbe = vireo::media::probeMedia(thirdJob.outputPath.toStdString());
        QVERIFY2(thirdProbe, thirdProbe ? "" : thirdProbe.error().message.c_str());
        QVERIFY(thirdProbe->width == 128 && thirdProbe->height == 128 && thirdProbe->frames == 9);
        // Its largest forward is a tile, not the 4K canvas: the memory plan sizes the activations
        // for one (a quarter of the grid and the overlaps, the keyframes with it).
        {
            vireo::facade::MemoryBudget budget;
            budget.hostAvailableBytes = 1ll << 40;
            vireo::facade::SizeRequest whole{3840, 2176, 121, false};
            auto tiled = whole;
            tiled.knobs = {{"third_stage", 1.0}};
            const auto full = vireo::facade::Generator::planMemory(model->plan, whole, budget);
            const auto tiles = vireo::facade::Generator::planMemory(model->plan, tiled, budget);
            QVERIFY(full && tiles);
            // 16 x 68 x 120 cells against 22 x 47 x 73.
            QCOMPARE(tiles->activationBytes * (16 * 68 * 120), full->activationBytes * (22 * 47 * 73));
        }
        // A size whose quarter is not whole latent cells is refused by name, before anything runs.
        third.width = 192;
        const auto odd = vireo::generation::prepare(catalog, *defaults, *model, third);
        QVERIFY2(!odd && odd.error().message.find("multiples of 128") != std::string::npos, odd ? "accepted" : odd.error().message.c_str());

        // LTX Desktop's Fast: ltx-pipelines' distilled two-stage pipeline instead of DFR, from the
        // same six files; the reason says so and the recipe keeps the knob.
        auto fast = ask;
        fast.knobs["fast"] = 1;
        const auto fastPlan = vireo::generation::prepare(catalog, *defaults, *model, fast);
        QVERIFY2(fastPlan, fastPlan ? "" : fastPlan.error().message.c_str());
        QVERIFY2(fastPlan->stagesReason.find("the Fast recipe (ltx-pipelines' distilled pipeline") != std::string::npos
                && fastPlan->stagesReason.find("stage 1 with the ancestral sampler, no keyframe slots") != std::string::npos
                && fastPlan->stagesReason.find("DFR") == std::string::npos,
            fastPlan->stagesReason.c_str());
        auto fastJob = fastPlan->job;
        fastJob.outputPath = m_work.filePath(QStringLiteral("fox25-fast.mp4"));
        const auto fs = runToEnd((*studio)->engine(QStringLiteral("cpu")), fastJob);
        QVERIFY(fs);
        QVERIFY2(fs->state == vireo::runtime::JobState::Done, qPrintable(fs->error));
        QCOMPARE(fs->recipe.request.knobs.at("fast"), 1.0);
        QCOMPARE(QString::fromStdString(fs->recipe.stages), QStringLiteral("two"));
        // The temporal rounds follow a DFR pass, which Fast does not run: refused by name.
        fast.knobs["temporal_rounds"] = 1;
        const auto rounds = vireo::generation::prepare(catalog, *defaults, *model, fast);
        QVERIFY2(!rounds && rounds.error().message.find("the Fast recipe runs none") != std::string::npos,
            rounds ? "accepted" : rounds.error().message.c_str());
    }

    // LTX-2.5's dev transformer as Lightricks publishes it: the dev two-stage recipe with the
    // distilled LoRA and the upscaler from the same repo, run through the engine to a video.
    void theLtx25DevVariantRunsTheDevRecipe()
    {
        auto studio = vireo::core::Studio::create();
        QVERIFY(studio);
        const QString id = QStringLiteral("ltx-2.5/lightricks-dev-bf16");
        QStringList planned;
        const auto model = download(**studio, id, &planned);
        QVERIFY(model);
        QCOMPARE(planned.size(), 7);
        QVERIFY(planned.contains(QStringLiteral("Lightricks/LTX-2.5/loras/ltx-2.5-22b-distilled-lora-450-bf16.safetensors")));
        QVERIFY(model->plan.spatialUpsamplerPath && model->plan.distilledLoraPath);
        const auto facts = vireo::facade::Generator::readModelFacts(model->plan);
        QVERIFY2(facts, facts ? "" : facts.error().message.c_str());
        QCOMPARE(QString::fromStdString(facts->version), QStringLiteral("2.5"));
        QCOMPARE(QString::fromStdString(facts->trainedFor), QStringLiteral("dev"));
        const auto& catalog = (*studio)->downloads()->catalog();
        auto ask = foxAsk();
        ask.steps = 3;
        const auto defaults = vireo::generation::defaultsFor(catalog, *model, ask);
        QVERIFY2(defaults, defaults ? "" : defaults.error().message.c_str());
        QCOMPARE(QString::fromStdString(defaults->schedule), QStringLiteral("dev"));
        // The catalog's STG block (28) is not one of the tiny model's three: refused by the plan.
        auto refused = vireo::generation::prepare(catalog, *defaults, *model, ask);
        QVERIFY(!refused);
        QVERIFY2(refused.error().message.find("STG block 28 is not a block of this model (0 to 2)") != std::string::npos,
            refused.error().message.c_str());
        ask.knobs["stg_block"] = 1;
        auto prepared = vireo::generation::prepare(catalog, *defaults, *model, ask);
        QVERIFY2(prepared, prepared ? "" : prepared.error().message.c_str());
        QVERIFY2(prepared->stagesReason.find("two stages: Lightricks' dev recipe") == 0
                && prepared->stagesReason.find("ltx-2.5-22b-distilled-lora-450-bf16.safetensors at 1") != std::string::npos
                && prepared->stagesReason.find("LTX-2.3's path, not DFR") != std::string::npos,
            prepared->stagesReason.c_str());
        auto job = prepared->job;
        job.outputPath = m_work.filePath(QStringLiteral("fox25-dev.mp4"));
        const auto s = runToEnd((*studio)->engine(QStringLiteral("cpu")), job);
        QVERIFY(s);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QVERIFY(QFileInfo(job.outputPath).size() > 1000);
        QCOMPARE(QString::fromStdString(s->recipe.stages), QStringLiteral("two"));
    }

    // The variant with the prompt enhancer: the same components plus prompt_enhancer/ and
    // processor/ (the plain variant's plan leaves them out, above), and "Enhance prompt"
    // rewrites the prompt the video follows, the recipe keeping both (test_generation has a
    // model without an enhancer refuse the ask).
    void theLtx25EnhancerVariantRewritesThePrompt()
    {
        auto studio = vireo::core::Studio::create();
        QVERIFY(studio);
        QStringList planned;
        const auto model = download(**studio, QStringLiteral("ltx-2.5/diffusers-bf16-enhancer"), &planned);
        QVERIFY(model);
        QVERIFY(planned.contains(QStringLiteral("Lightricks/LTX-2.5-Diffusers/prompt_enhancer/model.safetensors")));
        QVERIFY(planned.contains(QStringLiteral("Lightricks/LTX-2.5-Diffusers/processor/tokenizer.json")));
        const auto& catalog = (*studio)->downloads()->catalog();
        QVERIFY(vireo::generation::rulesFor(catalog, *model).promptEnhancer);
        auto ask = foxAsk();
        ask.enhancePrompt = true;
        const auto defaults = vireo::generation::defaultsFor(catalog, *model, ask);
        QVERIFY2(defaults, defaults ? "" : defaults.error().message.c_str());
        auto prepared = vireo::generation::prepare(catalog, *defaults, *model, ask);
        QVERIFY2(prepared, prepared ? "" : prepared.error().message.c_str());
        QVERIFY2(prepared->stagesReason.find("the prompt enhancer rewrites the prompt first") != std::string::npos,
            prepared->stagesReason.c_str());
        auto job = prepared->job;
        job.outputPath = m_work.filePath(QStringLiteral("fox25-enhanced.mp4"));
        const auto s = runToEnd((*studio)->engine(QStringLiteral("cpu")), job);
        QVERIFY(s);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QVERIFY(s->recipe.request.enhancePrompt && !s->recipe.enhancedPrompt.empty());
        QCOMPARE(QString::fromStdString(s->recipe.request.prompt), QStringLiteral("a red fox in the snow"));
        QVERIFY2(
            s->recipe.stagesReason.find("the prompt enhancer rewrote the prompt") != std::string::npos, s->recipe.stagesReason.c_str());
        const auto back = vireo::output::Recipe::fromJson(s->recipe.toJson());
        QVERIFY(back && back->request.enhancePrompt && back->enhancedPrompt == s->recipe.enhancedPrompt);
    }

    // LTX-2.5 as a user gets it from the catalog: exactly the components the distilled
    // recipe reads, recognized as 2.5 from its files, given its family's defaults, and run to a
    // video with its recipe (one stage: the repo's plan carries no upsampler).
    void theLtx25VariantDownloadsAndGenerates()
    {
        auto studio = vireo::core::Studio::create();
        QVERIFY(studio);
        const QString id = QStringLiteral("ltx-2.5/diffusers-bf16");
        QStringList planned;
        const auto model = download(**studio, id, &planned);
        QVERIFY(model);
        std::set<QString> folders;
        for (const auto& p : planned) {
            QVERIFY2(p.startsWith(QStringLiteral("Lightricks/LTX-2.5-Diffusers/")), qPrintable(p));
            const auto rel = p.mid(QStringLiteral("Lightricks/LTX-2.5-Diffusers/").size());
            folders.insert(rel.contains(QLatin1Char('/')) ? rel.section(QLatin1Char('/'), 0, 0) : rel);
        }
        QCOMPARE(folders,
            (std::set<QString>{QStringLiteral("model_index.json"), QStringLiteral("transformer"), QStringLiteral("connectors"),
                QStringLiteral("vae"), QStringLiteral("audio_vae"), QStringLiteral("vocoder"), QStringLiteral("text_encoder"),
                QStringLiteral("tokenizer"), QStringLiteral("scheduler"), QStringLiteral("duration_head"),
                QStringLiteral("diffusion_decoder")}));
        const auto facts = vireo::facade::Generator::readModelFacts(model->plan);
        QVERIFY2(facts, facts ? "" : facts.error().message.c_str());
        QCOMPARE(QString::fromStdString(facts->version), QStringLiteral("2.5"));
        const auto& catalog = (*studio)->downloads()->catalog();
        const auto fromFiles = vireo::runtime::defaultsForModel(catalog, *facts);
        const auto fromCatalog = vireo::runtime::defaultsForVariant(catalog, id.toStdString());
        QVERIFY2(fromFiles && fromCatalog, fromFiles ? "no catalog defaults" : fromFiles.error().message.c_str());
        QVERIFY(fromFiles->schedule == "distilled" && fromCatalog->schedule == "distilled" && fromFiles->steps == fromCatalog->steps);
        QVERIFY2(fromFiles->basis.find("LTX-2.5") != std::string::npos, fromFiles->basis.c_str());

        auto ask = foxAsk();
        const auto defaults = vireo::generation::defaultsFor(catalog, *model, ask);
        QVERIFY2(defaults, defaults ? "" : defaults.error().message.c_str());
        auto prepared = vireo::generation::prepare(catalog, *defaults, *model, ask);
        QVERIFY2(prepared, prepared ? "" : prepared.error().message.c_str());
        auto job = prepared->job;
        job.outputPath = m_work.filePath(QStringLiteral("fox25.mp4"));
        auto* engine = (*studio)->engine(QStringLiteral("cpu"));
        const auto s = runToEnd(engine, job);
        QVERIFY(s);
        QVERIFY2(s->state == vireo::runtime::JobState::Done, qPrintable(s->error));
        QVERIFY(QFileInfo(job.outputPath).size() > 1000);
        QCOMPARE(QString::fromStdString(s->recipe.modelVersion), QStringLiteral("2.5"));
        QCOMPARE(QString::fromStdString(s->recipe.stages), QStringLiteral("single"));
        // One stage of 2.5 is its own DFR pass, and the recipe and the page say so before it runs.
        QVERIFY2(s->recipe.stagesReason.find("LTX-2.5 DFR pass: 1 keyframe slot(s) on a 25-frame canvas") != std::string::npos,
            s->recipe.stagesReason.c_str());
        QVERIFY2(prepared->stagesReason == s->recipe.stagesReason, prepared->stagesReason.c_str());
        // The repository's diffusion decoder made the pixels, and the plan said so before the run.
        QVERIFY2(
            s->recipe.stagesReason.find("decoded by the diffusion video decoder") != std::string::npos, s->recipe.stagesReason.c_str());
        // The memory plan counts the decoder that runs: the VAE's loads only when asked for.
        {
            vireo::facade::MemoryBudget budget;
            budget.hostAvailableBytes = 1ll << 40;
            auto plan = vireo::facade::Generator::planMemory(model->plan, {64, 64, 9, false}, budget);
            QVERIFY2(plan, plan ? "" : plan.error().message.c_str());
            bool vaeOnRequest = false, diffusionDecoder = false;
            for (const auto& c : plan->components) {
                vaeOnRequest =
                    vaeOnRequest || (c.name == "video_vae" && c.where.find("loaded only for video_decoder=1") != std::string::npos);
                diffusionDecoder = diffusionDecoder || (c.name == "diffusion_decoder" && c.bytes > 0);
            }
            QVERIFY(vaeOnRequest && diffusionDecoder);
            // STG and modality guidance batched with CFG: four rows of activations, not two.
            auto cfgOnly = vireo::facade::Generator::planMemory(model->plan, {64, 64, 9, true}, budget);
            vireo::facade::SizeRequest guidedSize{64, 64, 9, true};
            guidedSize.knobs = {{"stg_scale", 1.0}, {"audio_modality_scale", 3.0}};
            auto guided = vireo::facade::Generator::planMemory(model->plan, guidedSize, budget);
            QVERIFY(cfgOnly && guided);
            QCOMPARE(guided->activationBytes, cfgOnly->activationBytes * 2);
        }
        // The VAE's decoder on request: the knob is kept in the recipe, and the plan no longer says it.
        {
            auto vaeAsk = ask;
            vaeAsk.knobs["video_decoder"] = 1;
            const auto vaePlan = vireo::generation::prepare(catalog, *defaults, *model, vaeAsk);
            QVERIFY2(vaePlan, vaePlan ? "" : vaePlan.error().message.c_str());
            QVERIFY2(vaePlan->stagesReason.find("diffusion video decoder") == std::string::npos, vaePlan->stagesReason.c_str());
            auto vaeJob = vaePlan->job;
            vaeJob.outputPath = m_work.filePath(QStringLiteral("fox25-vae.mp4"));
            const auto vs = runToEnd(engine, vaeJob);
            QVERIFY(vs);
            QVERIFY2(vs->state == vireo::runtime::JobState::Done, qPrintable(vs->error));
            QCOMPARE(vs->recipe.request.knobs.at("video_decoder"), 1.0);
            QVERIFY(vs->recipe.stagesReason.find("diffusion video decoder") == std::string::npos);
        }

        // Temporal rounds need the temporal upsampler, which this variant does not download:
        // refused with the reason before anything runs.
        ask.knobs["temporal_rounds"] = 1;
        const auto noUpsampler = vireo::generation::prepare(catalog, *defaults, *model, ask);
        QVERIFY(!noUpsampler);
        QVERIFY2(noUpsampler.error().message.find("no temporal upsampler") != std::string::npos, noUpsampler.error().message.c_str());
        // With one given, the plan says what the round makes, and the job makes it: twice the
        // frames (less one) at twice the rate, the audio as long as the video.
        auto withUpsampler = *model;
        withUpsampler.plan.temporalUpsamplerPath =
            QString(qEnvironmentVariable("VIREO_FIXTURES_ROOT") + QStringLiteral("/ltx2pipeline/v25/diffusers/temporal_latent_upsampler"))
                .toStdString();
        const auto rounds = vireo::generation::prepare(catalog, *defaults, withUpsampler, ask);
        QVERIFY2(rounds, rounds ? "" : rounds.error().message.c_str());
        const auto fps = defaults->fps;
        std::ostringstream want;
        want << "then 1 temporal round(s): 17 frames at " << fps * 2 << " fps";
        QVERIFY2(rounds->stagesReason.find(want.str()) != std::string::npos, rounds->stagesReason.c_str());
        auto roundJob = rounds->job;
        roundJob.outputPath = m_work.filePath(QStringLiteral("fox25-48.mp4"));
        const auto rs = runToEnd(engine, roundJob);
        QVERIFY(rs);
        QVERIFY2(rs->state == vireo::runtime::JobState::Done, qPrintable(rs->error));
        QCOMPARE(rs->recipe.request.knobs.at("temporal_rounds"), 1.0);
        const auto probe = vireo::media::probeMedia(roundJob.outputPath.toStdString());
        QVERIFY2(probe, probe ? "" : probe.error().message.c_str());
        QCOMPARE(probe->frames, std::int64_t(17));
        QCOMPARE(probe->fps, fps * 2);

        // The length left on auto: the duration head downloaded with the variant reads it from
        // the prompt; the plan says so, and the recipe keeps the seconds and the frames made.
        ask.knobs.erase("temporal_rounds");
        ask.frames = 0;
        const auto autoPlan = vireo::generation::prepare(catalog, *defaults, *model, ask);
        QVERIFY2(autoPlan, autoPlan ? "" : autoPlan.error().message.c_str());
        QVERIFY2(autoPlan->stagesReason.find("the length from the prompt") != std::string::npos, autoPlan->stagesReason.c_str());
        auto autoJob = autoPlan->job;
        autoJob.outputPath = m_work.filePath(QStringLiteral("fox25-auto.mp4"));
        const auto as = runToEnd(engine, autoJob);
        QVERIFY(as);
        QVERIFY2(as->state == vireo::runtime::JobState::Done, qPrintable(as->error));
        QVERIFY(as->recipe.predictedSeconds && *as->recipe.predictedSeconds > 0);
        QVERIFY2(as->recipe.stagesReason.find("the prompt's length") != std::string::npos, as->recipe.stagesReason.c_str());
        const auto autoProbe = vireo::media::probeMedia(autoJob.outputPath.toStdString());
        QVERIFY2(autoProbe, autoProbe ? "" : autoProbe.error().message.c_str());
        const auto made = as->recipe.request.frames;
        QCOMPARE(autoProbe->frames, made);
        QVERIFY2(made >= 25 && (made - 1) % 8 == 0, std::to_string(made).c_str());
        const auto again = vireo::output::Recipe::fromJson(as->recipe.toJson());
        QVERIFY(again && again->predictedSeconds == as->recipe.predictedSeconds && again->request.frames == made);
    }
};

QTEST_GUILESS_MAIN(TestCatalogModels)
#include "test_catalogmodels.moc"
