// LoRAs on the LTX-2.0 / 2.3 / 2.5 transformer against diffusers + PEFT at tiny sizes
// (tests/fixtures/make_ltx2_lora_fixtures.py): every LoRA layout (PEFT with alpha metadata,
// Lightricks/ComfyUI native, kohya) on every base layout (float32 diffusers, single file,
// GGUF, scaled FP8 against the weights those files hold), two LoRAs at once, a swap from one
// to another without reloading the base, a partial match, and the refusals the manifest lists.
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/lora/lora.h"
#include "inference/models/ltx2/ltx2transformer.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/models/nn/layers.h"
#include "inference/tensorfile/tensorset.h"

#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <nlohmann/json.hpp>

#include <map>

using namespace vireo;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-4;

fs::path loraDir()
{
    return test::fixturesDir();
}
fs::path ditDir(const std::string& v)
{
    return test::envPath("VIREO_FIXTURES_ROOT") / "ltx2dit" / ("v" + v);
}

std::vector<fs::path> layoutPaths(const std::string& v, const std::string& layout)
{
    const auto dir = ditDir(v);
    if (layout == "diffusers")
        return {dir / "diffusers"};
    if (layout == "single")
        return {dir / "single.safetensors"};
    if (layout == "gguf")
        return {dir / "transformer.gguf", dir / "text_projection.safetensors"};
    return {dir / "fp8.safetensors"};
}

ltx2::Transformer load(const std::string& v, const std::string& layout)
{
    auto w = ltx2::Ltx2Weights::open(layoutPaths(v, layout));
    if (!w)
        throw std::runtime_error(w.error().message);
    auto t = ltx2::Transformer::load(*w);
    if (!t)
        throw std::runtime_error(v + "/" + layout + ": " + t.error().message);
    return std::move(*t);
}

tensorfile::TensorSet readSet(const fs::path& file)
{
    auto set = tensorfile::readTensorSet(file);
    if (!set)
        throw std::runtime_error(set.error().message);
    return std::move(*set);
}

fs::path loraFile(const std::string& v, const std::string& name)
{
    return loraDir() / ("v" + v) / name;
}

// Applies the LoRAs as a generation does, runs the reference's inputs and returns the error
// against its expected outputs.
double runAgainst(ltx2::Transformer& model, const std::vector<lora::Request>& requests, const fs::path& reference,
    std::vector<lora::Outcome>* outcomes = nullptr)
{
    std::vector<nn::LoraDelta> deltas;
    auto o = lora::prepare(requests, model.loraTargets(), model.dtype(), model.device(), &deltas);
    if (outcomes)
        *outcomes = o;
    (void)model.setLoraDeltas({});
    auto set = model.setLoraDeltas(deltas);
    if (!set)
        throw std::runtime_error(set.error().message);
    const auto ref = readSet(reference);
    auto inputs = ltx2::transformerInputsFrom(ref);
    if (!inputs)
        throw std::runtime_error(inputs.error().message);
    auto out = model.forward(*inputs);
    if (!out)
        throw std::runtime_error(out.error().message);
    const double video = (out->video - *ref.find("expected.video")).abs().max().item<double>();
    const double audio = (out->audio - *ref.find("expected.audio")).abs().max().item<double>();
    return std::max(video, audio);
}

void checkVersion(const std::string& v)
{
    c10::InferenceMode guard;
    // Each base layout takes a different LoRA layout for A and B, so every pairing is covered
    // across the four bases; the diffusers base takes all three.
    const std::map<std::string, std::pair<std::string, std::string>> pairing{
        {"diffusers", {"peft", "comfy"}}, {"single", {"comfy", "kohya"}}, {"gguf", {"kohya", "peft"}}, {"fp8", {"peft", "kohya"}}};
    for (const auto& [layout, names] : pairing) {
        auto model = load(v, layout);
        const auto& [aLayout, bLayout] = names;
        const auto a = loraFile(v, "lora_A_" + aLayout + ".safetensors");
        const auto b = loraFile(v, "lora_B_" + bLayout + ".safetensors");
        std::vector<lora::Outcome> outcomes;
        const double errA = runAgainst(model, {{a, 0.7}}, loraFile(v, "ref_" + layout + "_A.safetensors"), &outcomes);
        VT_COMPARE(outcomes.at(0).status, std::string("applied"));
        const double errAB = runAgainst(model, {{a, 0.7}, {b, -0.5}}, loraFile(v, "ref_" + layout + "_AB.safetensors"));
        // The swap: B alone after A, on the same loaded base.
        const double errB = runAgainst(model, {{b, 1.0}}, loraFile(v, "ref_" + layout + "_B.safetensors"));
        std::printf("   %s %-9s A (%s) %.2e, A+B (%s) %.2e, swapped to B %.2e\n", v.c_str(), layout.c_str(), aLayout.c_str(), errA,
            bLayout.c_str(), errAB, errB);
        VT_CHECK_MSG(errA <= kTolerance && errAB <= kTolerance && errB <= kTolerance, v << " " << layout << ": above 1e-4");
        if (layout == "diffusers") {
            for (const char* other : {"peft", "comfy", "kohya"}) {
                const double err = runAgainst(model, {{loraFile(v, std::string("lora_A_") + other + ".safetensors"), 0.7}},
                    loraFile(v, "ref_diffusers_A.safetensors"));
                std::printf("   %s diffusers A as %-5s %.2e\n", v.c_str(), other, err);
                VT_CHECK_MSG(err <= kTolerance, other);
            }
            // Partial: what fits is applied, the rest listed.
            const double err = runAgainst(model, {{loraFile(v, "lora_partial_v" + v + ".safetensors"), 1.0}},
                loraFile(v, "ref_diffusers_partial.safetensors"), &outcomes);
            std::printf("   %s partial: %s (%.2e)\n", v.c_str(), outcomes[0].status.c_str(), err);
            VT_CHECK(err <= kTolerance);
            VT_CHECK_MSG(outcomes[0].status.rfind("partial: 4 of", 0) == 0, outcomes[0].status);
            for (const char* listed : {"transformer_blocks.99.attn1.to_q", "to_nowhere", "caption_projection.linear_9", "proj_out"})
                VT_CHECK_MSG(outcomes[0].report.find(listed) != std::string::npos, listed << " not listed");
        }
        // No LoRA: the plain model again (the dit fixture's case for this layout).
        VT_CHECK(runAgainst(model, {}, ditDir(v) / (layout == "diffusers" ? "case_base.safetensors" : "case_" + layout + ".safetensors"))
            <= kTolerance);
    }
}

}  // namespace

VT_TEST(ltx20LorasMatchPeftOnEveryBase)
{
    checkVersion("20");
}
VT_TEST(ltx23LorasMatchPeftOnEveryBase)
{
    checkVersion("23");
}
// 2.5's LoRAs (its video feed-forward has no bias to adapt beside) on its bf16, FP8 and GGUF bases.
VT_TEST(ltx25LorasMatchPeftOnEveryBase)
{
    checkVersion("25");
}

VT_TEST(reportsMatchTheManifest)
{
    c10::InferenceMode guard;
    const auto manifest = nlohmann::json::parse(test::readText(loraDir() / "manifest.json"));
    std::map<std::string, std::vector<lora::Target>> targets;
    for (const auto& [v, version] : {std::pair{"20", "2.0"}, {"23", "2.3"}, {"25", "2.5"}})
        targets[version] = load(v, "diffusers").loraTargets();
    int checked = 0;
    for (const auto& e : manifest.at("loras")) {
        const auto version = e.at("version").is_null() ? std::string("2.3") : e.at("version").get<std::string>();
        const auto file = loraDir() / e.at("file").get<std::string>();
        auto report = lora::inspect(file, targets.at(version));
        VT_CHECK_MSG(report.ok(), file << ": " << (report.ok() ? "" : report.error().message));
        const auto expect = e.at("expect").get<std::string>();
        VT_COMPARE(report->matched(), e.at("matched").get<int>());
        if (expect == "refuse") {
            VT_CHECK_MSG(report->status().rfind("refused: ", 0) == 0, file << ": " << report->status());
            VT_CHECK_MSG(report->refusedKeys() > 0, file);
        } else if (expect == "load") {
            VT_COMPARE(report->status(), std::string("applied"));
        }
        ++checked;
    }
    VT_COMPARE(checked, 27);  // 8 per version (2.0, 2.3, 2.5), and 3 hostile files
    // A 2.0 LoRA on the 2.3 model and the other way: the difference is named, not papered over.
    auto cross = lora::inspect(loraFile("20", "lora_A_peft.safetensors"), targets.at("2.3"));
    std::printf("   2.0 LoRA on 2.3: %s\n", cross->status().c_str());
    auto back = lora::inspect(loraFile("23", "lora_A_peft.safetensors"), targets.at("2.0"));
    std::printf("   2.3 LoRA on 2.0: %s\n", back->status().c_str());
    VT_CHECK(back->unmatched() > 0);
}

VT_MAIN("TestLtx2Lora")
