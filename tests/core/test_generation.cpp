// The generation service (core/generation): one place turns what a user asked for into a job.
// Checked here on the tiny fixtures: the defaults every catalog variant and local model gets,
// what an unset field takes, the family rules, what an image model refuses, and that a
// refused ask names what is wrong.
#include "core/catalog/catalog.h"
#include "core/generation/generation.h"
#include "tests/core/mediafixtures.h"

#include <QFile>
#include <filesystem>
#include <QTemporaryDir>
#include <QTest>

using vireo::generation::Ask;

namespace {

QString fixtures()
{
    return qEnvironmentVariable("VIREO_FIXTURES_ROOT");
}

vireo::runtime::ModelRef localModel(const QString& path)
{
    vireo::runtime::ModelRef m;
    m.key = QStringLiteral("local:") + path;
    m.plan.modelPaths = {path.toStdString()};
    m.plan.device = "cpu";
    return m;
}

vireo::runtime::ModelRef catalogModel(const std::string& id)
{
    vireo::runtime::ModelRef m;
    m.key = QStringLiteral("catalog:") + QString::fromStdString(id);
    return m;
}

Ask prompt(const char* text = "a quiet pier")
{
    Ask a;
    a.prompt = text;
    return a;
}

// A safetensors file of the given header and a zero payload of `dataBytes`.
bool writeSafetensors(const std::filesystem::path& path, const QByteArray& header, int dataBytes = 0)
{
    return vireo::test::writeRawSafetensors(QString::fromStdString(path.string()), header, QByteArray(dataBytes, 0));
}

}  // namespace

class TestGeneration : public QObject {
    Q_OBJECT

    vireo::catalog::Catalog m_catalog;
    QTemporaryDir m_work;

private slots:
    void initTestCase()
    {
        auto c = vireo::catalog::Catalog::loadBuiltin();
        QVERIFY2(c, c ? "" : c.error().message.c_str());
        m_catalog = *c;
        QVERIFY(m_work.isValid());
    }

    // Every catalog variant gets its own defaults; the request of a bare prompt is those
    // defaults (the distilled schedule at 8 steps, an image model's reference guidance
    // schedule at its steps, one frame), and each passes the family's rules.
    void everyCatalogVariantGetsItsOwnDefaults()
    {
        int variants = 0;
        for (const auto& f : m_catalog.families)
            for (const auto& v : f.variants) {
                const auto id = f.id + "/" + v.id;
                const auto model = catalogModel(id);
                const auto d = vireo::generation::defaultsFor(m_catalog, model);
                const auto own = vireo::runtime::defaultsForVariant(m_catalog, id);
                QVERIFY2(d && own, id.c_str());
                QCOMPARE(d->schedule, own->schedule);
                QCOMPARE(d->steps, own->steps);
                QCOMPARE(d->guidance, own->guidance);
                const bool image = vireo::generation::makesImages(m_catalog, model);
                QCOMPARE(image, v.pipeline == "ideogram4");
                const auto r = vireo::generation::requestFor(*d, image, prompt());
                QCOMPARE(r.steps, own->steps);
                QCOMPARE(r.width, own->width);
                QVERIFY2(
                    vireo::generation::sizeProblems(vireo::generation::rulesFor(m_catalog, model), r.width, r.height, r.frames).empty(),
                    id.c_str());
                if (image) {
                    QCOMPARE(r.frames, std::int64_t(1));
                    QCOMPARE(r.guidanceSchedule.size(), std::size_t(r.steps));
                } else {
                    QVERIFY(r.guidanceSchedule.empty());
                    QCOMPARE(r.stages, std::string("auto"));
                    if (r.schedule == "distilled")
                        QCOMPARE(r.steps, 8);
                }
                ++variants;
            }
        QVERIFY(variants >= 10);
    }

    // A guidance of one's own or a step count other than 8 means the dev schedule; the other
    // schedule of a catalog variant takes its family's variant of it; a chosen schedule wins.
    // Each registered family's rules by its catalog id; an id no family has is none, and a
    // model without files is tried as LTX-2 (the fallback family).
    void familyRulesComeFromTheRegistry()
    {
        const auto image = vireo::facade::familyRulesById("ideogram4");
        QVERIFY(image);
        QCOMPARE(image->kind, vireo::facade::ModelKind::Image);
        QCOMPARE(image->sizeMultiple, 16);
        QCOMPARE(image->frameStep, 0);
        const auto video = vireo::facade::familyRulesById("ltx2");
        QVERIFY(video);
        QCOMPARE(video->sizeMultiple, 32);
        QCOMPARE(video->frameStep, 8);
        QVERIFY(!vireo::facade::familyRulesById("ltx25"));
        QVERIFY(!vireo::facade::familyRulesById(""));
        QCOMPARE(vireo::facade::familyRules({}).family, std::string("ltx2"));
        QCOMPARE(vireo::generation::sizeProblems(*video, 100, 64, 10).size(), std::size_t(2));
        QVERIFY(vireo::generation::sizeProblems(*image, 112, 64, 10).empty());
    }

    void theScheduleFollowsWhatWasAsked()
    {
        const auto distilled = catalogModel("ltx-2.3/distilled-bf16");
        Ask guided = prompt();
        guided.guidance = 4.0;
        auto d = vireo::generation::defaultsFor(m_catalog, distilled, guided);
        QVERIFY(d);
        QCOMPARE(d->schedule, std::string("dev"));
        auto r = vireo::generation::requestFor(*d, false, guided);
        QCOMPARE(r.guidance, 4.0);
        QCOMPARE(r.audioGuidance, 4.0);  // the audio follows a guidance of one's own
        QCOMPARE(r.guidanceRescale, 0.0);
        QCOMPARE(r.steps, d->steps);
        Ask stepped = prompt();
        stepped.steps = 20;
        d = vireo::generation::defaultsFor(m_catalog, distilled, stepped);
        QVERIFY(d && d->schedule == "dev");
        Ask chosen = prompt();
        chosen.schedule = "distilled";
        chosen.guidance = 4.0;
        d = vireo::generation::defaultsFor(m_catalog, distilled, chosen);
        QVERIFY(d && d->schedule == "distilled");
        r = vireo::generation::requestFor(*d, false, chosen);
        QCOMPARE(r.steps, 8);
        QCOMPARE(r.schedule, std::string("distilled"));
        // An image model has no schedule to choose: guidance does not make it "dev".
        const auto ideogram = catalogModel("ideogram-4/fp8");
        d = vireo::generation::defaultsFor(m_catalog, ideogram, guided);
        QVERIFY(d);
        r = vireo::generation::requestFor(*d, true, guided);
        QVERIFY(r.guidanceSchedule.empty());  // a guidance of one's own at every step
        QCOMPARE(r.guidance, 4.0);
        r = vireo::generation::requestFor(*d, true, prompt());
        QCOMPARE(r.guidanceSchedule.size(), std::size_t(r.steps));
        Ask fewer = prompt();
        fewer.steps = 20;
        r = vireo::generation::requestFor(*d, true, fewer);
        QVERIFY(r.guidanceSchedule.empty());
    }

    // Local folders: the version and what their files say (a 2.0 folder that says nothing is
    // distilled; the same folder named dev gets 2.0's dev numbers, not 2.3's).
    void localModelsGetTheDefaultsTheirFilesCallFor()
    {
        const QString v20 = fixtures() + QStringLiteral("/ltx2pipeline/v20/diffusers");
        auto d = vireo::generation::defaultsFor(m_catalog, localModel(v20));
        QVERIFY(d);
        QCOMPARE(d->schedule, std::string("distilled"));
        QVERIFY2(d->basis.find("LTX-2.0") == 0, d->basis.c_str());
        const QString dev = m_work.filePath(QStringLiteral("LTX-2-19b-dev"));
        QVERIFY(QFile::link(v20, dev));
        d = vireo::generation::defaultsFor(m_catalog, localModel(dev));
        const auto ltx2Dev = vireo::runtime::defaultsForVariant(m_catalog, "ltx-2/dev-bf16");
        QVERIFY(d && ltx2Dev);
        QCOMPARE(d->schedule, std::string("dev"));
        QCOMPARE(d->steps, ltx2Dev->steps);
        // A file that cannot be read still gets its family's defaults; the plan says what is wrong.
        d = vireo::generation::defaultsFor(m_catalog, localModel(m_work.filePath(QStringLiteral("missing.safetensors"))));
        QVERIFY(d && d->schedule == "distilled");
    }

    // Every rule a front end used to check on its own, refused by the service with the reason.
    void refusedAsksSayWhy()
    {
        const auto video = localModel(fixtures() + QStringLiteral("/ltx2pipeline/v23/diffusers"));
        const auto d = vireo::generation::defaultsFor(m_catalog, video);
        QVERIFY(d);
        auto expectRefused = [&](const Ask& a, const char* says) {
            const auto p = vireo::generation::prepare(m_catalog, *d, video, a);
            QVERIFY2(!p, says);
            QCOMPARE(p.error().code, vireo::ErrorCode::InvalidArgument);
            QVERIFY2(p.error().message.find(says) != std::string::npos, p.error().message.c_str());
        };
        expectRefused(prompt(" \n\t"), "the prompt is empty");
        Ask a = prompt();
        a.frames = 10;
        expectRefused(a, "9 or 17 would do");
        a = prompt();
        a.width = 100;
        expectRefused(a, "multiples of 32");
        a = prompt();
        a.speed = "warp";
        expectRefused(a, "quality, balanced or fast");
        a = prompt();
        a.stages = "two";
        a.width = 96;  // 32-pixel cells, but no half size on them
        expectRefused(a, "the two-stage path cannot run");
        a = prompt();
        a.frames = 17;
        a.conditions.push_back({QStringLiteral("/nowhere/start.png"), 4, 1.0, 33, 0, false, {}});
        expectRefused(a, "8k + 1");
        // LTX-2.3's Gemma 3 writes the prompt itself; LTX-2.5 without prompt_enhancer/ has nothing to.
        a = prompt();
        a.frames = 17;
        a.enhancePrompt = true;
        const auto self = vireo::generation::prepare(m_catalog, *d, video, a);
        QVERIFY2(self, self ? "" : self.error().message.c_str());
        QVERIFY2(self->stagesReason.find("the text encoder (Gemma 3) rewrites the prompt first") != std::string::npos,
            self->stagesReason.c_str());
        {
            const auto v25 = localModel(fixtures() + QStringLiteral("/ltx2pipeline/v25/diffusers"));
            const auto d25 = vireo::generation::defaultsFor(m_catalog, v25);
            QVERIFY(d25);
            auto b = prompt();
            b.enhancePrompt = true;
            const auto refused = vireo::generation::prepare(m_catalog, *d25, v25, b);
            QVERIFY(!refused && refused.error().message.find("this model has no prompt enhancer") != std::string::npos);
            // A LoRA named for LTX-2.3 runs on 2.5, as LTX Desktop runs it, and the plan says so;
            // one named for 2.5 (or for nothing) gets no such word.
            QTemporaryDir loras;
            const std::filesystem::path dir = loras.path().toStdString();
            const QByteArray header = R"({"__metadata__":{"format":"pt"}}      )";
            const auto old = dir / "models--Lightricks--LTX-2.3-22b-LoRA-Cinemagraph" / "snapshots" / "abc" / "cinemagraph.safetensors";
            std::filesystem::create_directories(old.parent_path());
            QVERIFY(writeSafetensors(old, header) && writeSafetensors(dir / "ltx-2.5-22b-lora-x.safetensors", header)
                && writeSafetensors(dir / "LTX_2.3_Clay_Mation.safetensors", header));
            auto c = prompt();
            c.loras = {{old, 1.0}, {dir / "ltx-2.5-22b-lora-x.safetensors", 1.0}, {dir / "LTX_2.3_Clay_Mation.safetensors", 0.5}};
            const auto named = vireo::generation::prepare(m_catalog, *d25, v25, c);
            QVERIFY2(named, named ? "" : named.error().message.c_str());
            const auto& why = named->stagesReason;
            QVERIFY2(why.find("the LoRA cinemagraph.safetensors was made for LTX-2.3 (its name says so): it runs on LTX-2.5 as LTX "
                              "Desktop runs it, which Lightricks has not validated")
                        != std::string::npos
                    && why.find("LTX_2.3_Clay_Mation.safetensors was made for LTX-2.3") != std::string::npos
                    && why.find("ltx-2.5-22b-lora-x") == std::string::npos,
                why.c_str());
        }
        // A good ask: the defaults fill what it left, the prompt is cleaned, the job names the model.
        a = prompt("a quiet\x01 pier");
        a.frames = 17;
        a.seed = 7;
        const auto p = vireo::generation::prepare(m_catalog, *d, video, a);
        QVERIFY2(p, p ? "" : p.error().message.c_str());
        QVERIFY(!p->image);
        QCOMPARE(p->job.request.prompt.find('\x01'), std::string::npos);
        QCOMPARE(p->job.request.frames, std::int64_t(17));
        QCOMPARE(p->job.request.seed, std::int64_t(7));
        QCOMPARE(p->job.request.width, d->width);
        QCOMPARE(p->job.model.key, video.key);
        QVERIFY(!p->stagesReason.empty());
    }

    // A start image's H.264 round trip is the one its model was trained with, unless asked:
    // LTX-2.3 at CRF 33, LTX-2.5 at 18 (its family's default); a clip is never re-compressed.
    void stillsTakeTheirFamilysCrf()
    {
        for (const auto& [version, want] : {std::pair{"v23", 33}, std::pair{"v25", 18}}) {
            const auto video =
                localModel(fixtures() + QStringLiteral("/ltx2pipeline/") + QString::fromLatin1(version) + QStringLiteral("/diffusers"));
            const auto d = vireo::generation::defaultsFor(m_catalog, video);
            QVERIFY2(d, d ? "" : d.error().message.c_str());
            QCOMPARE(d->conditionCrf, want);
            Ask a = prompt();
            a.frames = 17;
            vireo::runtime::ConditionFile still;
            still.path = QStringLiteral("/nowhere/start.png");
            a.conditions.push_back(still);
            auto p = vireo::generation::prepare(m_catalog, *d, video, a);
            QVERIFY2(p, p ? "" : p.error().message.c_str());
            QCOMPARE(p->job.conditions.front().crf, want);
            a.conditions.front().crf = 0;  // asked: kept
            p = vireo::generation::prepare(m_catalog, *d, video, a);
            QVERIFY(p && p->job.conditions.front().crf == 0);
        }
    }

    // A family's own controls: declared in its rules, defaulted from the catalog by id, set by
    // the ask within their ranges, every one held by the job's request (so the recipe names
    // them all) and back from a recipe; an unknown knob or a value out of range is named.
    void familyKnobsTravelFromCatalogToRequest()
    {
        const auto rules = vireo::facade::familyRulesById("ideogram4");
        QVERIFY(rules && rules->knob("schedule_mu") && rules->knob("schedule_std"));
        // LTX's own: the temporal rounds of 2.5 (0 by default; the catalog sets none).
        const auto ltx = vireo::facade::familyRulesById("ltx2");
        // LTX's own: the temporal rounds of 2.5 (0 by default; the catalog sets none), which
        // video decoder makes the pixels (0: the checkpoint's), and STG and modality guidance
        // (neutral by default; the dev variants turn them on).
        QVERIFY(ltx->knobs.size() == 13 && ltx->knob("temporal_rounds") && ltx->knob("temporal_rounds")->defaultValue == 0);
        // Lightricks' dev recipes: HQ off, the distilled LoRA at the recipe's strengths, the
        // audio rescale following the video's.
        QVERIFY(ltx->knob("fast") && ltx->knob("fast")->defaultValue == 0 && ltx->knob("fast")->maximum == 1);
        QVERIFY(ltx->knob("hq")->defaultValue == 0 && ltx->knob("distilled_lora_strength")->defaultValue == -1
            && ltx->knob("distilled_lora_stage1_strength")->defaultValue == -1 && ltx->knob("audio_guidance_rescale")->defaultValue == -1);
        QVERIFY(ltx->knob("video_decoder") && ltx->knob("video_decoder")->defaultValue == 0 && ltx->knob("video_decoder")->maximum == 2);
        QVERIFY(ltx->knob("stg_scale")->defaultValue == 0 && ltx->knob("modality_scale")->defaultValue == 1
            && ltx->knob("stg_block")->defaultValue == -1 && ltx->knob("audio_stg_scale") && ltx->knob("audio_modality_scale"));
        {
            // A dev variant's catalog defaults: Lightricks' guidance, the audio following the video.
            const auto dev = vireo::generation::defaultsFor(m_catalog, catalogModel("ltx-2.3/dev-bf16"));
            QVERIFY2(dev, dev ? "" : dev.error().message.c_str());
            QCOMPARE(dev->knobs.at("stg_scale"), 1.0);
            QCOMPARE(dev->knobs.at("audio_stg_scale"), 1.0);
            QCOMPARE(dev->knobs.at("modality_scale"), 3.0);
            QCOMPARE(dev->knobs.at("audio_modality_scale"), 3.0);
            QCOMPARE(dev->knobs.at("stg_block"), 28.0);
            // The memory plan gets the knobs (a batch row per guidance branch they turn on).
            vireo::facade::GenerateRequest r;
            r.guidance = 3.0;
            r.knobs = dev->knobs;
            QVERIFY(vireo::facade::sizeRequestOf(r, false).guidance && vireo::facade::sizeRequestOf(r, false).knobs == dev->knobs);
            // The plan says what guidance the run takes, before it runs; LTX-2.0's STG is not run.
            // The tiny models have three blocks: the catalog's block 28 is refused by the plan.
            for (const auto& [version, want] :
                {std::pair{"v23", "; guidance: CFG 3 / 7, STG 1 / 1 on block 1, modality 3 / 3, rescale 0.7 / 0.7"},
                    std::pair{"v20", "; guidance: CFG 3 / 7, modality 3 / 3, rescale 0.7 / 0.7; STG not run"}}) {
                const auto video =
                    localModel(fixtures() + QStringLiteral("/ltx2pipeline/") + QString::fromLatin1(version) + QStringLiteral("/diffusers"));
                Ask g = prompt();
                g.frames = 9;
                if (std::string(version) == "v23") {
                    const auto refused = vireo::generation::prepare(m_catalog, *dev, video, g);
                    QVERIFY(!refused && refused.error().message.find("STG block 28 is not a block of this model") != std::string::npos);
                }
                g.knobs["stg_block"] = 1;
                const auto planned = vireo::generation::prepare(m_catalog, *dev, video, g);
                QVERIFY2(planned, planned ? "" : planned.error().message.c_str());
                QVERIFY2(planned->stagesReason.find(want) != std::string::npos, planned->stagesReason.c_str());
            }
            // With the upsampler and the distilled LoRA the dev model runs Lightricks' two-stage
            // recipe; hq=1 takes the HQ one, with its preset for what the ask leaves open.
            auto single = localModel(fixtures() + QStringLiteral("/ltx2pipeline/v23/single/ltx-2.3-tiny.safetensors"));
            single.plan.textEncoderPath = QString(fixtures() + QStringLiteral("/ltx2pipeline/v23/single/gemma")).toStdString();
            single.plan.spatialUpsamplerPath =
                QString(fixtures() + QStringLiteral("/ltx2pipeline/v23/diffusers/latent_upsampler")).toStdString();
            single.plan.distilledLoraPath =
                QString(fixtures() + QStringLiteral("/ltx2recipes/v23/distilled_lora.safetensors")).toStdString();
            Ask g = prompt();
            g.frames = 9;
            g.width = 192;
            g.height = 128;
            g.knobs["stg_block"] = 1;
            auto devRecipe = vireo::generation::prepare(m_catalog, *dev, single, g);
            QVERIFY2(devRecipe, devRecipe ? "" : devRecipe.error().message.c_str());
            QVERIFY2(devRecipe->stagesReason.find("two stages: Lightricks' dev recipe") == 0
                    && devRecipe->stagesReason.find("distilled_lora.safetensors at 1, unguided") != std::string::npos
                    && devRecipe->stagesReason.find("STG 1 / 1 on block 1") != std::string::npos,
                devRecipe->stagesReason.c_str());
            g.knobs["hq"] = 1;
            g.knobs["modality_scale"] = 2;
            auto hq = vireo::generation::prepare(m_catalog, *dev, single, g);
            QVERIFY2(hq, hq ? "" : hq.error().message.c_str());
            const auto& q = hq->job.request;
            QCOMPARE(q.steps, 15);
            QCOMPARE(q.guidanceRescale, 0.45);
            QCOMPARE(q.knobs.at("stg_scale"), 0.0);
            QCOMPARE(q.knobs.at("audio_stg_scale"), 0.0);
            QCOMPARE(q.knobs.at("audio_guidance_rescale"), 1.0);
            QCOMPARE(q.knobs.at("modality_scale"), 2.0);  // what the ask sets stays
            QVERIFY2(hq->stagesReason.find("HQ recipe (res2s sampler") != std::string::npos
                    && hq->stagesReason.find("modality 2 / 3, rescale 0.45 / 1") != std::string::npos,
                hq->stagesReason.c_str());
        }
        QCOMPARE(vireo::facade::familyRulesById("ltx2-dev")->family, std::string("ltx2"));
        const auto model = catalogModel("ideogram-4/fp8");
        const auto d = vireo::generation::defaultsFor(m_catalog, model);
        QVERIFY(d);
        QCOMPARE(d->knobs.at("schedule_std"), 1.5);
        Ask a = prompt();
        a.knobs["schedule_mu"] = 0.5;
        auto p = vireo::generation::prepare(m_catalog, *d, model, a);
        QVERIFY2(p, p ? "" : p.error().message.c_str());
        QCOMPARE(p->job.request.knobs, (std::map<std::string, double>{{"schedule_mu", 0.5}, {"schedule_std", 1.5}}));
        a.knobs["schedule_std"] = 9.0;
        p = vireo::generation::prepare(m_catalog, *d, model, a);
        QVERIFY(!p && p.error().message == "schedule_std must be from 0.1 to 5, not 9");
        a.knobs.erase("schedule_std");
        a.knobs["stg_scale"] = 1.0;
        p = vireo::generation::prepare(m_catalog, *d, model, a);
        QVERIFY(!p);
        QCOMPARE(p.error().message, std::string("Ideogram-4 has no control named 'stg_scale' (its controls: schedule_mu, schedule_std)"));
        const auto video = localModel(fixtures() + QStringLiteral("/ltx2pipeline/v23/diffusers"));
        const auto vd = vireo::generation::defaultsFor(m_catalog, video);
        QVERIFY(vd);
        p = vireo::generation::prepare(m_catalog, *vd, video, a);
        QVERIFY(!p
            && p.error().message.find(
                   "LTX-2 has no control named 'schedule_mu' (its controls: temporal_rounds, third_stage, video_decoder, stg_scale, "
                   "audio_stg_scale, modality_scale, audio_modality_scale, stg_block, audio_guidance_rescale, hq, fast, "
                   "distilled_lora_strength, distilled_lora_stage1_strength)")
                == 0);
        // A length left on auto needs a duration head, which LTX-2.3's files do not carry.
        Ask autoLength = prompt();
        autoLength.frames = 0;
        p = vireo::generation::prepare(m_catalog, *vd, video, autoLength);
        QVERIFY2(!p && p.error().message.find("no duration head") != std::string::npos, p ? "accepted" : p.error().message.c_str());
        // LTX-2.3's files carry no diffusion video decoder: asking for it is refused by name.
        Ask diffusion = prompt();
        diffusion.knobs["video_decoder"] = 2;
        p = vireo::generation::prepare(m_catalog, *vd, video, diffusion);
        QVERIFY2(
            !p && p.error().message.find("no diffusion video decoder") != std::string::npos, p ? "accepted" : p.error().message.c_str());
        // An IC-LoRA (reference_downscale_factor in its metadata) runs only as the detailing LoRA
        // of 2.5's two-pass DFR recipe: on LTX-2.3 it is refused by name, never applied blind.
        {
            QTemporaryDir dir;
            const auto path = dir.filePath(QStringLiteral("ic-lora.safetensors"));
            QVERIFY(writeSafetensors(path.toStdString(),
                R"({"__metadata__":{"reference_downscale_factor":"2"},"x.lora_A.weight":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                4));
            Ask ic = prompt();
            ic.loras.push_back({path.toStdString(), 1.0});
            p = vireo::generation::prepare(m_catalog, *vd, video, ic);
            QVERIFY2(!p && p.error().message.find("is an IC-LoRA") != std::string::npos, p ? "accepted" : p.error().message.c_str());
        }
        // LTX's control is 2.5's: an LTX-2.3 model refuses it by name, before loading anything.
        Ask rounds = prompt();
        rounds.knobs["temporal_rounds"] = 1;
        p = vireo::generation::prepare(m_catalog, *vd, video, rounds);
        QVERIFY2(!p && p.error().message.find("temporal refine rounds are LTX-2.5's") != std::string::npos,
            p ? "accepted" : p.error().message.c_str());
        Ask third = prompt();
        third.knobs["third_stage"] = 1;
        p = vireo::generation::prepare(m_catalog, *vd, video, third);
        QVERIFY2(!p && p.error().message.find("third spatial stage is LTX-2.5's") != std::string::npos,
            p ? "accepted" : p.error().message.c_str());
        // The Fast recipe is two distilled stages: one stage, or the dev schedule, is refused by name.
        Ask fast = prompt();
        fast.knobs["fast"] = 1;
        fast.stages = "single";
        p = vireo::generation::prepare(m_catalog, *vd, video, fast);
        QVERIFY2(!p && p.error().message.find("fast: the Fast recipe runs the distilled model in two stages") != std::string::npos
                && p.error().message.find("asks for one stage") != std::string::npos,
            p ? "accepted" : p.error().message.c_str());
        fast.stages.clear();
        fast.schedule = "dev";
        p = vireo::generation::prepare(m_catalog, *vd, video, fast);
        QVERIFY2(!p && p.error().message.find("fast: the Fast recipe runs the distilled model in two stages") != std::string::npos
                && p.error().message.find("uses the dev schedule") != std::string::npos,
            p ? "accepted" : p.error().message.c_str());
        QVERIFY(vireo::generation::describeKnobs(*rules).find("schedule_mu (-3 to 3, default 0)") == 0);
        std::vector<std::string> families;
        for (const auto& r : vireo::facade::registeredFamilyRules())
            families.push_back(r.family);
        QCOMPARE(families, (std::vector<std::string>{"ideogram4", "ltx2"}));
        // A recipe's knobs come back as the ask's.
        vireo::output::Recipe recipe;
        recipe.modelKey = "catalog:ideogram-4/fp8";
        recipe.kind = "image";
        recipe.request.knobs = {{"schedule_mu", 0.5}, {"schedule_std", 1.75}};
        const auto read = vireo::output::Recipe::fromJson(recipe.toJson());
        QVERIFY(read);
        QCOMPARE(read->request.knobs, recipe.request.knobs);
        const auto again = vireo::generation::askFromRecipe(*read, m_work.path());
        QVERIFY(again);
        QCOMPARE(again->ask.knobs, recipe.request.knobs);
        // The recipe embeds the request: an image's schedule of guidance weights is part of it
        // (older versions kept it among the unknown keys, at the same place in the JSON), so
        // "Generate again" leaves the guidance to it.
        const auto scheduled = vireo::output::Recipe::fromJson(
            R"({"recipe_version": 1, "kind": "image", "model_key": "catalog:ideogram-4/fp8", "prompt": "a sign", "steps": 2,)"
            R"( "guidance_scale": 7.0, "guidance_schedule": [7.0, 3.0]})");
        QVERIFY(scheduled);
        QCOMPARE(scheduled->request.guidanceSchedule, (std::vector<double>{7.0, 3.0}));
        QCOMPARE(scheduled->extraJson, std::string("{}"));
        const auto scheduledAgain = vireo::generation::askFromRecipe(*scheduled, m_work.path());
        QVERIFY(scheduledAgain && !scheduledAgain->ask.guidance && scheduledAgain->ask.steps == 2);
        QVERIFY(!vireo::output::Recipe::fromJson(R"({"guidance_schedule": [1, "x"]})"));
        QVERIFY(!vireo::output::Recipe::fromJson(R"({"knobs": {"schedule_mu": "high"}})"));
        QVERIFY(!vireo::output::Recipe::fromJson(R"({"knobs": [1]})"));
    }

    // An image model takes a prompt, a size on its 16-pixel grid, steps, guidance and a seed;
    // everything else is named, in the CLI's option words, instead of being dropped.
    // A sound to follow: the clip is as long as it unless the ask cuts it (so LTX-2.3, which
    // cannot read a length from the prompt, takes frames 0 with a sound); the job carries the
    // file; an image model names it; a recipe brings the kept samples back, else the source,
    // else says the sound is missing.
    void anAskWithASoundFollowsIt()
    {
        const auto video = localModel(fixtures() + QStringLiteral("/ltx2pipeline/v23/diffusers"));
        const auto d = vireo::generation::defaultsFor(m_catalog, video);
        QVERIFY(d);
        Ask a = prompt();
        a.audio = vireo::runtime::AudioFile{QStringLiteral("/music/song.flac"), {}};
        auto p = vireo::generation::prepare(m_catalog, *d, video, a);
        QVERIFY2(p, p ? "" : p.error().message.c_str());
        QCOMPARE(p->job.request.frames, std::int64_t(0));
        QVERIFY(p->job.audio && p->job.audio->path == QStringLiteral("/music/song.flac"));
        a.frames = 17;
        p = vireo::generation::prepare(m_catalog, *d, video, a);
        QVERIFY(p && p->job.request.frames == 17);
        // Without a sound, frames 0 is still the prompt's length, which 2.3 has no head to read.
        Ask plain = prompt();
        plain.frames = 0;
        p = vireo::generation::prepare(m_catalog, *d, video, plain);
        QVERIFY2(
            !p && p.error().message.find("the length cannot be left on auto") != std::string::npos, p ? "ran" : p.error().message.c_str());
        a.audio->path.clear();
        p = vireo::generation::prepare(m_catalog, *d, video, a);
        QVERIFY(!p && p.error().message.find("names no file") != std::string::npos);
        // An image model names the sound among what it does not take.
        const auto image = localModel(fixtures() + QStringLiteral("/ideogram4/pipeline/model"));
        Ask forImage = prompt();
        forImage.audio = vireo::runtime::AudioFile{QStringLiteral("song.wav"), {}};
        QCOMPARE(vireo::generation::notForImages(forImage, image.plan), (std::vector<std::string>{"audio"}));
        // Back from a recipe: the kept samples (by their hash) while they are beside the output.
        vireo::output::Recipe r;
        r.modelKey = "local:/models/ltx";
        r.request.prompt = "sung";
        r.request.frames = 25;
        r.audio = vireo::output::AudioUse{"/gone/song.flac", "aa", "out.audio.wav", "bb", 0.8, 44100, 2};
        const auto folder = m_work.path();
        QFile kept(folder + QStringLiteral("/out.audio.wav"));
        QVERIFY(kept.open(QIODevice::WriteOnly));
        kept.write("RIFF");
        kept.close();
        auto again = vireo::generation::askFromRecipe(r, folder);
        QVERIFY(again && again->missing.empty() && again->ask.audio);
        QCOMPARE(again->ask.audio->path, folder + QStringLiteral("/out.audio.wav"));
        QCOMPARE(again->ask.audio->expectedSha256, std::string("bb"));
        QCOMPARE(again->ask.frames, std::optional<std::int64_t>(25));
        QVERIFY(kept.remove());
        again = vireo::generation::askFromRecipe(r, folder);
        QVERIFY(again && !again->ask.audio && again->missing.size() == 1);
        QVERIFY2(again->missing.front().find("the sound /gone/song.flac is gone") == 0, again->missing.front().c_str());
        // The recipe keeps it through JSON; numbers out of range are refused.
        const auto back = vireo::output::Recipe::fromJson(r.toJson());
        QVERIFY(back && back->audio && back->audio->copy == "out.audio.wav" && back->audio->sampleRate == 44100);
        auto json = r.toJson();
        json.replace(json.find("\"sample_rate\":44100"), 18, "\"sample_rate\":-5");
        QVERIFY(!vireo::output::Recipe::fromJson(json));
    }

    // IC-LoRA reference clips: carried to the job, the length on auto the reference's (on the 8k + 1
    // grid), one shorter than the video refused from its header, an image model names them, and a
    // recipe brings the kept frames back (the source when they are gone), through JSON.
    void anAskWithAReferenceClipFollowsIt()
    {
        const auto video = localModel(fixtures() + QStringLiteral("/ltx2pipeline/v23/diffusers"));
        const auto d = vireo::generation::defaultsFor(m_catalog, video);
        QVERIFY(d);
        const QString clip = m_work.filePath(QStringLiteral("pose.mp4"));
        vireo::test::writeClip(clip, std::nullopt, 20);
        QTemporaryDir loras;
        const auto ic = std::filesystem::path(loras.path().toStdString()) / "ltx-2.3-ic-lora-pose.safetensors";
        // A safetensors file of no tensors: its name alone makes it an IC-LoRA.
        QVERIFY(writeSafetensors(ic, R"({"__metadata__":{"format":"pt"}}      )"));
        Ask a = prompt();
        a.loras = {{ic, 1.0}};
        a.references = {{clip, 0.8, {}}};
        a.frames = 0;
        auto p = vireo::generation::prepare(m_catalog, *d, video, a);
        QVERIFY2(p, p ? "" : p.error().message.c_str());
        QCOMPARE(p->job.request.frames, std::int64_t(17));  // 20 frames: the longest 8k + 1 inside them
        QCOMPARE(p->job.references.size(), std::size_t(1));
        QCOMPARE(p->job.references[0].strength, 0.8);
        QVERIFY2(p->stagesReason.find("IC-LoRA ltx-2.3-ic-lora-pose.safetensors follows 1 reference clip") != std::string::npos,
            p->stagesReason.c_str());
        a.frames = 25;
        p = vireo::generation::prepare(m_catalog, *d, video, a);
        QVERIFY2(!p && p.error().message.find("has 20 frames; the video it guides has 25") != std::string::npos,
            p ? "ran" : p.error().message.c_str());
        a.frames = 17;
        // Two IC-LoRAs: the clips condition one.
        const auto second = std::filesystem::path(loras.path().toStdString()) / "depth-iclora.safetensors";
        QVERIFY(QFile::copy(QString::fromStdString(ic.string()), QString::fromStdString(second.string())));
        a.loras = {{ic, 1.0}, {second, 1.0}};
        p = vireo::generation::prepare(m_catalog, *d, video, a);
        QVERIFY2(!p && p.error().message.find("two IC-LoRAs") != std::string::npos, p ? "ran" : p.error().message.c_str());
        a.loras.clear();
        p = vireo::generation::prepare(m_catalog, *d, video, a);
        QVERIFY2(!p && p.error().message.find("none of the LoRAs is one") != std::string::npos, p ? "ran" : p.error().message.c_str());
        const auto image = localModel(fixtures() + QStringLiteral("/ideogram4/pipeline/model"));
        Ask forImage = prompt();
        forImage.references = {{clip, 1.0, {}}};
        QCOMPARE(vireo::generation::notForImages(forImage, image.plan), (std::vector<std::string>{"reference"}));
        vireo::output::Recipe r;
        r.modelKey = "local:/models/ltx";
        r.request.prompt = "danced";
        r.references = {vireo::output::ReferenceUse{"/gone/pose.mp4", "aa", "out.ref0.mp4", "bb", 0.8, 17}};
        const auto folder = m_work.path();
        QFile kept(folder + QStringLiteral("/out.ref0.mp4"));
        QVERIFY(kept.open(QIODevice::WriteOnly));
        kept.close();
        auto again = vireo::generation::askFromRecipe(r, folder);
        QVERIFY(again && again->missing.empty() && again->ask.references.size() == 1);
        QCOMPARE(again->ask.references[0].path, folder + QStringLiteral("/out.ref0.mp4"));
        QCOMPARE(again->ask.references[0].expectedSha256, std::string("bb"));
        QCOMPARE(again->ask.references[0].strength, 0.8);
        QVERIFY(kept.remove());
        again = vireo::generation::askFromRecipe(r, folder);
        QVERIFY(again && again->ask.references.empty() && again->missing.size() == 1);
        QVERIFY2(again->missing.front().find("the reference clip /gone/pose.mp4 is gone") == 0, again->missing.front().c_str());
        const auto back = vireo::output::Recipe::fromJson(r.toJson());
        QVERIFY(back && back->references.size() == 1 && back->references[0].copy == "out.ref0.mp4" && back->references[0].frames == 17);
        auto json = r.toJson();
        json.replace(json.find("\"strength\":0.8"), 14, "\"strength\":1.5");
        QVERIFY(!vireo::output::Recipe::fromJson(json));
    }

    void anImageModelNamesWhatItDoesNotTake()
    {
        const auto image = localModel(fixtures() + QStringLiteral("/ideogram4/pipeline/model"));
        QVERIFY(vireo::generation::makesImages(m_catalog, image));
        const auto d = vireo::generation::defaultsFor(m_catalog, image);
        QVERIFY(d);
        Ask a = prompt();
        a.frames = 9;
        a.negativePrompt = "blur";
        a.loras.push_back({"style.safetensors", 1.0});
        a.conditions.push_back({QStringLiteral("clip.mp4"), 0, 1.0, 0, 9, false, {}});
        QCOMPARE(vireo::generation::notForImages(a, image.plan), (std::vector<std::string>{"frames", "negative", "lora", "clip"}));
        auto enhanced = prompt();
        enhanced.enhancePrompt = true;
        QCOMPARE(vireo::generation::notForImages(enhanced, image.plan), (std::vector<std::string>{"enhance-prompt"}));
        auto p = vireo::generation::prepare(m_catalog, *d, image, a);
        QVERIFY(!p);
        QVERIFY2(p.error().message.find("frames, negative, lora, clip do not apply to an image model") == 0, p.error().message.c_str());
        a = prompt();
        a.width = 1000;
        p = vireo::generation::prepare(m_catalog, *d, image, a);
        QVERIFY(!p && p.error().message.find("multiples of 16") != std::string::npos);
        a.width = 256;
        a.height = 256;
        p = vireo::generation::prepare(m_catalog, *d, image, a);
        QVERIFY2(p, p ? "" : p.error().message.c_str());
        QVERIFY(p->image);
        QCOMPARE(p->job.request.frames, std::int64_t(1));
        QVERIFY(p->job.conditions.empty());
        QCOMPARE(p->job.request.guidanceSchedule.size(), std::size_t(p->job.request.steps));
        // A video model's ask is never held to the image rules.
        const auto video = localModel(fixtures() + QStringLiteral("/ltx2pipeline/v23/diffusers"));
        Ask withFrames = prompt();
        withFrames.frames = 9;
        QVERIFY(!vireo::generation::makesImages(m_catalog, video));
        const auto d2 = vireo::generation::defaultsFor(m_catalog, video);
        QVERIFY(d2 && vireo::generation::prepare(m_catalog, *d2, video, withFrames));
    }
};

QTEST_GUILESS_MAIN(TestGeneration)
#include "test_generation.moc"
