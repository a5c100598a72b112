// Ideogram-4's transformer (both DiTs), FLUX.2 VAE decoder and pipeline against diffusers 0.42.1
// at tiny sizes (tests/fixtures/make_ideogram4_fixtures.py).
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/models/flux2/flux2vae.h"
#include "inference/models/ideogram4/ideogram4transformer.h"
#include "inference/models/ideogram4/ideogram4pipeline.h"
#include "inference/families/previewprojection.h"
#include "inference/tensorfile/tensorset.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <stop_token>

#include <unistd.h>

using namespace vireo;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr double kTolerance = 1e-4;
constexpr std::int64_t kGridH = 3, kGridW = 4;

fs::path ditDir()
{
    return test::fixturesDir() / "transformer";
}

bool mentions(const std::string& message, std::initializer_list<const char*> words)
{
    for (const char* w : words)
        if (message.find(w) == std::string::npos)
            return false;
    return true;
}

// VIREO_TEST_DEVICE=cuda runs the same checks on the GPU (the `gpu` label, test_ideogram4_cuda);
// float32 with TF32 off, so the tolerances stay those of the CPU.
c10::Device testDevice()
{
    static const c10::Device device = [] {
        const char* name = std::getenv("VIREO_TEST_DEVICE");
        if (!name || !*name)
            return c10::Device(c10::kCPU);
        const c10::Device d(name);
        if (d.is_cuda()) {
            if (!at::hasCUDA())
                throw std::runtime_error("VIREO_TEST_DEVICE=" + std::string(name) + " but this libtorch sees no CUDA device");
            at::globalContext().setAllowTF32CuDNN(false);
            at::globalContext().setAllowTF32CuBLAS(false);
        }
        return d;
    }();
    return device;
}

const ideogram4::Transformer& dit(const std::string& layout, const std::string& component, c10::ScalarType dtype = c10::kFloat)
{
    static std::map<std::string, ideogram4::Transformer> cache;
    const auto key = layout + "/" + component + "/" + c10::toString(dtype);
    if (auto it = cache.find(key); it != cache.end())
        return it->second;
    ideogram4::TransformerLoadOptions o;
    o.component = component;
    o.device = testDevice();
    o.dtype = dtype;
    auto m = ideogram4::Transformer::load(ditDir() / layout, o);
    if (!m)
        throw std::runtime_error(key + ": " + m.error().message);
    return cache.emplace(key, std::move(*m)).first->second;
}

double maxAbs(const at::Tensor& a, const at::Tensor& b)
{
    return (a.cpu().to(at::kDouble) - b.cpu().to(at::kDouble)).abs().max().item<double>();
}

// Both DiTs of a layout against its case file: {cond error, uncond error}.
std::pair<double, double> runCase(const std::string& layout)
{
    auto set = tensorfile::readTensorSet(ditDir() / ("case_" + layout + ".safetensors"));
    if (!set)
        throw std::runtime_error(set.error().message);
    const auto& latents = *set->find("latents");
    const auto& text = *set->find("text_features");
    const double t = set->find("timestep")->item<double>();
    const auto& cond = dit(layout, "transformer");
    const auto& uncond = dit(layout, "unconditional_transformer");
    auto vc = cond.forward(latents, text, t, kGridH, kGridW);
    VT_CHECK_MSG(vc.ok(), (vc.ok() ? "" : vc.error().message));
    // The unconditional branch: image tokens only.
    auto vu = uncond.forward(latents, at::zeros({0, uncond.config().llmFeaturesDim}), t, kGridH, kGridW);
    VT_CHECK_MSG(vu.ok(), (vu.ok() ? "" : vu.error().message));
    const double ec = maxAbs(*vc, *set->find("expected.cond")), eu = maxAbs(*vu, *set->find("expected.uncond"));
    const auto bytes = cond.bytesByRepresentation();
    std::string reps;
    for (const auto& [r, n] : bytes)
        reps += " " + r + "=" + std::to_string(n);
    std::printf("   %-9s cond max abs error %.2e (|v| max %.2f), uncond %.2e (|v| max %.2f);%s%s\n", layout.c_str(), ec,
        set->find("expected.cond")->abs().max().item<double>(), eu, set->find("expected.uncond")->abs().max().item<double>(),
        cond.fusedQkv() ? " fused qkv;" : "", reps.c_str());
    return {ec, eu};
}

}  // namespace

VT_TEST(transformerMatchesDiffusersInEveryLayout)
{
    for (const char* layout : {"diffusers", "fp8", "nf4"}) {
        const auto [ec, eu] = runCase(layout);
        VT_CHECK_MSG(ec <= kTolerance && eu <= kTolerance, layout << ": max abs error " << ec << " / " << eu << " above 1e-4");
    }
    VT_CHECK(dit("fp8", "transformer").fusedQkv() && !dit("diffusers", "transformer").fusedQkv());
    VT_CHECK(dit("fp8", "transformer").bytesByRepresentation().count("fp8-scaled"));
    VT_CHECK(dit("nf4", "transformer").bytesByRepresentation().count("nf4"));
}

VT_TEST(bfloat16ComputeFollowsTheReference)
{
    // diffusers loaded with torch_dtype=bfloat16 differs from its own float32 result by 0.19 here
    // (|v| ~3, random weights) and from itself by 0.008 when the pads are dropped; the port must
    // stay within two bf16 steps of it, which takes the reference's cast points (timestep
    // rounded to bf16, RoPE angles from a float32 inv_freq, norms cast before the weight).
    auto set = tensorfile::readTensorSet(ditDir() / "case_bf16.safetensors");
    VT_CHECK(set.ok());
    const auto& latents = *set->find("latents");
    const double t = set->find("timestep")->item<double>();
    const auto& cond = dit("diffusers", "transformer", at::kBFloat16);
    const auto& uncond = dit("diffusers", "unconditional_transformer", at::kBFloat16);
    auto vc = cond.forward(latents, *set->find("text_features"), t, kGridH, kGridW);
    auto vu = uncond.forward(latents, at::zeros({0, uncond.config().llmFeaturesDim}), t, kGridH, kGridW);
    VT_CHECK(vc.ok() && vu.ok());
    VT_CHECK(vc->scalar_type() == at::kBFloat16);
    const double ec = maxAbs(*vc, *set->find("expected.cond")), eu = maxAbs(*vu, *set->find("expected.uncond"));
    std::printf(
        "   bf16 cond max abs error %.2e, uncond %.2e (|v| max %.2f)\n", ec, eu, set->find("expected.cond")->abs().max().item<double>());
    VT_CHECK_MSG(ec <= 0.03 && eu <= 0.03, "bf16: max abs error " << ec << " / " << eu << " above 0.03");
}

VT_TEST(badLayoutsAreNamedLoadErrors)
{
    ideogram4::TransformerLoadOptions o;
    auto bad = ideogram4::Transformer::load(ditDir() / "bad_qkv", o);
    VT_CHECK_MSG(!bad.ok() && mentions(bad.error().message, {"attention.qkv.weight", "3 x"}), (bad.ok() ? "loaded" : bad.error().message));
    std::printf("   refused: %s\n", bad.error().message.c_str());
    // A compute dtype no module computes in is named before a byte is read.
    ideogram4::TransformerLoadOptions integer;
    integer.dtype = at::kInt;
    bad = ideogram4::Transformer::load(ditDir() / "diffusers" / "transformer", integer);
    VT_CHECK_MSG(!bad.ok() && bad.error().code == ErrorCode::InvalidArgument
            && bad.error().message == "Ideogram-4: compute dtype Int is not float32, bfloat16 or float16",
        (bad.ok() ? "loaded" : bad.error().message));

    const auto dir = fs::temp_directory_path() / ("vireo_ideogram4_strict_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    {
        std::ofstream(dir / "config.json") << test::readText(ditDir() / "diffusers" / "transformer" / "config.json");
    }
    auto full = tensorfile::readTensorSet(ditDir() / "diffusers" / "transformer" / "diffusion_pytorch_model.safetensors");
    VT_CHECK(full.ok());
    auto tryLoad = [&](const std::map<std::string, at::Tensor>& tensors) {
        VT_CHECK(tensorfile::writeSafetensors(dir / "diffusion_pytorch_model.safetensors", tensors, full->metadata).ok());
        return ideogram4::Transformer::load(dir / "diffusion_pytorch_model.safetensors", o);
    };
    auto missing = full->tensors;
    missing.erase("layers.1.feed_forward.w3.weight");
    auto r = tryLoad(missing);
    VT_CHECK_MSG(
        !r.ok() && mentions(r.error().message, {"layers.1.feed_forward.w3.weight", "missing"}), (r.ok() ? "loaded" : r.error().message));
    auto extra = full->tensors;
    extra.emplace("layers.1.attention.to_added.weight", at::zeros({4, 4}));
    r = tryLoad(extra);
    VT_CHECK_MSG(!r.ok() && mentions(r.error().message, {"layers.1.attention.to_added.weight"}), (r.ok() ? "loaded" : r.error().message));
    auto wrong = full->tensors;
    wrong["final_layer.linear.weight"] = at::zeros({64, 64});
    r = tryLoad(wrong);
    VT_CHECK_MSG(
        !r.ok() && mentions(r.error().message, {"final_layer.linear.weight", "[64, 64]"}), (r.ok() ? "loaded" : r.error().message));
    ::unlink((dir / "diffusion_pytorch_model.safetensors").c_str());
    ::unlink((dir / "config.json").c_str());
    ::rmdir(dir.c_str());

    const auto& m = dit("diffusers", "transformer");
    const auto lat = at::zeros({kGridH * kGridW, m.config().inChannels});
    VT_CHECK(!m.forward(lat, at::zeros({2, 7}), 0.5, kGridH, kGridW).ok());
    VT_CHECK(!m.forward(lat, at::zeros({0, m.config().llmFeaturesDim}), 0.5, kGridH + 1, kGridW).ok());
    std::stop_source stop;
    stop.request_stop();
    auto cancelled = m.forward(lat, at::zeros({0, m.config().llmFeaturesDim}), 0.5, kGridH, kGridW, stop.get_token());
    VT_CHECK(!cancelled.ok() && cancelled.error().code == ErrorCode::Cancelled);

    auto cfg = ideogram4::parseTransformerConfig(R"({"_class_name":"Ideogram4Transformer2DModel","num_layers":1e30})", "x/config.json");
    VT_CHECK(!cfg.ok() && mentions(cfg.error().message, {"x/config.json"}));
    cfg = ideogram4::parseTransformerConfig(R"({"_class_name":"Ideogram4Transformer2DModel","mrope_section":[24,80,20]})", "x/config.json");
    VT_CHECK(!cfg.ok() && mentions(cfg.error().message, {"mrope_section"}));
    cfg = ideogram4::parseTransformerConfig(R"({"_class_name":"Ideogram4Transformer2DModel"})", "x/config.json");
    VT_CHECK(cfg.ok() && cfg->hidden() == 4608 && cfg->llmFeaturesDim == 53248);
}

// ================================================================ VAE

VT_TEST(vaeDecoderMatchesDiffusers)
{
    const auto dir = test::fixturesDir() / "vae";
    flux2::VaeLoadOptions vo;
    vo.device = testDevice();
    auto vae = flux2::VaeDecoder::load(dir / "vae", vo);
    VT_CHECK_MSG(vae.ok(), (vae.ok() ? "" : vae.error().message));
    auto set = tensorfile::readTensorSet(dir / "case.safetensors");
    VT_CHECK(set.ok());
    auto out = vae->decode(*set->find("z"));
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    const auto& expected = *set->find("expected.decoded");
    VT_COMPARE(out->sizes().vec(), expected.sizes().vec());
    const double e = maxAbs(*out, expected);
    std::printf("   decoded %lld x %lld: max abs error %.2e (|x| max %.2f)\n", static_cast<long long>(expected.size(2)),
        static_cast<long long>(expected.size(3)), e, expected.abs().max().item<double>());
    VT_CHECK_MSG(e <= kTolerance, "max abs error " << e << " above 1e-4");
    // The latent statistics: bn's running mean and sqrt(running_var + eps), 128 packed channels.
    auto stored = tensorfile::readTensorSet(dir / "vae" / "diffusion_pytorch_model.safetensors");
    VT_CHECK(stored.ok());
    VT_CHECK(maxAbs(vae->latentMean(), *stored->find("bn.running_mean")) == 0.0);
    VT_CHECK(maxAbs(vae->latentStd(), at::sqrt(*stored->find("bn.running_var") + 1e-4)) < 1e-7);
    VT_COMPARE(vae->latentMean().size(0), std::int64_t{128});
}

// ================================================================ pipeline

VT_TEST(scheduleAndGuidanceAsTheReference)
{
    // 1024 x 1024, mu 0, std 1.5, 48 steps (worked values of the reference notes).
    const auto s = pipelines::ideogram4Sigmas(48, 1024, 1024, 0.0, 1.5);
    VT_COMPARE(s.size(), std::size_t{49});
    std::printf("   sigmas[0..2] %.6f %.6f %.6f, [45..47] %.6f %.6f %.6f, last %.1f\n", s[0], s[1], s[2], s[45], s[46], s[47], s[48]);
    VT_CHECK(std::abs(s[0] - 0.999877) < 1e-6 && std::abs(s[47] - 0.086108) < 1e-6 && s[48] == 0.0f);
    pipelines::Ideogram4Request r;
    auto g = pipelines::ideogram4Guidance(r);
    VT_CHECK(g.ok() && g->size() == 48 && (*g)[44] == 7.0 && (*g)[45] == 3.0);
    r.steps = 20;
    VT_CHECK(!pipelines::ideogram4Guidance(r).ok());
    r.guidanceScale = 4.0;
    g = pipelines::ideogram4Guidance(r);
    VT_CHECK(g.ok() && g->size() == 20 && (*g)[19] == 4.0);
    r.guidanceSchedule = std::vector<double>(20, 7.0);
    VT_CHECK(!pipelines::ideogram4Guidance(r).ok());
    // A seed draws what diffusers' randn_tensor draws with a CPU generator of that seed.
    auto set = tensorfile::readTensorSet(test::fixturesDir() / "pipeline" / "case.safetensors");
    VT_CHECK(set.ok());
    const auto& seeded = *set->find("seeded_noise_1234");
    VT_CHECK(at::equal(pipelines::ideogram4Noise(1234, seeded.size(0), seeded.size(1)), seeded));
}

struct PipelineRun {
    std::optional<pipelines::Ideogram4Pipeline> pipe;
    pipelines::Ideogram4Request request;
    double relative = 0, imageMean = 0;
};

// The pipeline folder `layout` against its case file, with the fixture's settings and noise.
PipelineRun runPipeline(const std::string& layout, const std::string& caseName)
{
    const auto dir = test::fixturesDir() / "pipeline";
    PipelineRun run;
    pipelines::Ideogram4PipelineOptions o;
    o.modelPath = dir / layout;
    o.device = testDevice();
    auto pipe = pipelines::Ideogram4Pipeline::load(o);
    VT_CHECK_MSG(pipe.ok(), layout << ": " << (pipe.ok() ? "" : pipe.error().message));
    run.pipe.emplace(std::move(*pipe));
    auto set = tensorfile::readTensorSet(dir / (caseName + ".safetensors"));
    VT_CHECK(set.ok());
    const auto settings = json::parse(set->metadata.at("settings"));
    auto& r = run.request;
    r.prompt = set->metadata.at("prompt");
    r.height = settings["height"].get<std::int64_t>();
    r.width = settings["width"].get<std::int64_t>();
    r.steps = settings["num_inference_steps"].get<int>();
    r.guidanceSchedule = settings["guidance_schedule"].get<std::vector<double>>();
    r.mu = settings["mu"].get<double>();
    r.std = settings["std"].get<double>();
    r.maxSequenceLength = settings["max_sequence_length"].get<std::int64_t>();
    r.noise = *set->find("noise");
    int steps = 0;
    auto out = run.pipe->generate(r, [&](const pipelines::Ideogram4Progress& p) { steps += p.phase == "denoise" ? 1 : 0; });
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    VT_CHECK(steps == r.steps + 1);
    if (const auto* sigmas = set->find("sigmas"))
        for (std::int64_t i = 0; i < sigmas->size(0); ++i)
            VT_CHECK_MSG(static_cast<float>(out->sigmas[static_cast<std::size_t>(i)]) == (*sigmas)[i].item<float>(), "sigma " << i);
    const auto& expected = *set->find("expected.latents");
    const double abs = maxAbs(out->finalLatents, expected);
    run.relative = abs / expected.abs().max().item<double>();
    const auto& image = *set->find("expected.image");
    const double imageAbs = maxAbs(out->decoded, image);
    run.imageMean = (out->decoded.to(at::kDouble) - image.to(at::kDouble)).abs().mean().item<double>();
    std::printf("   %-5s final latents: max abs error %.2e, relative %.2e (|z| max %.2f); image max abs %.2e, mean %.2e (1/255 = %.2e)\n",
        layout.c_str(), abs, run.relative, expected.abs().max().item<double>(), imageAbs, run.imageMean, 1.0 / 255);
    VT_COMPARE(out->image.sizes().vec(), (std::vector<std::int64_t>{r.height, r.width, 3}));
    return run;
}

VT_TEST(pipelineMatchesDiffusersWithInjectedNoise)
{
    for (const auto& [layout, caseName] : {std::pair{"model", "case"}, {"fp8", "case_fp8"}, {"nf4", "case_nf4"}}) {
        const auto run = runPipeline(layout, caseName);
        VT_CHECK_MSG(run.relative <= 1e-3, layout << ": final latents relative error " << run.relative << " above 1e-3");
        VT_CHECK_MSG(run.imageMean <= 1.0 / 255, layout << ": decoded image mean abs error " << run.imageMean << " above 1/255");
    }
}

VT_TEST(progressCarriesTheCleanEstimateForPreviews)
{
    auto run = runPipeline("model", "case");
    auto& pipe = *run.pipe;
    const auto& r = run.request;
    flux2::VaeLoadOptions vo;
    vo.device = testDevice();
    auto vae = flux2::VaeDecoder::load(test::fixturesDir() / "pipeline" / "model", vo);
    VT_CHECK_MSG(vae.ok(), (vae.ok() ? "" : vae.error().message));
    const auto c = vae->config().latentChannels, scale = vae->config().scaleFactor();
    auto projection = pipe.previewProjection();
    VT_CHECK_MSG(projection.ok(), (projection.ok() ? "" : projection.error().message));
    VT_COMPARE(projection->sizes().vec(), (std::vector<std::int64_t>{c + 1, 3}));
    VT_CHECK(projection->isfinite().all().item<bool>());

    // One estimate per step, after it, as the decoder takes it; nothing in other reports.
    std::vector<at::Tensor> estimates;
    std::vector<std::int64_t> done;
    bool stray = false;
    auto out = pipe.generate(r, [&](const pipelines::Ideogram4Progress& p) {
        if (p.phase == "denoise" && p.estimate.defined()) {
            estimates.push_back(p.estimate.cpu());
            done.push_back(p.done);
        } else if (p.estimate.defined()) {
            stray = true;
        }
    });
    VT_CHECK_MSG(out.ok(), (out.ok() ? "" : out.error().message));
    VT_CHECK(!stray);
    VT_COMPARE(estimates.size(), static_cast<std::size_t>(r.steps));
    const auto h = r.height / scale, w = r.width / scale;
    for (std::size_t i = 0; i < estimates.size(); ++i) {
        VT_COMPARE(done[i], static_cast<std::int64_t>(i + 1));
        VT_COMPARE(estimates[i].sizes().vec(), (std::vector<std::int64_t>{1, c, h, w}));
        const auto rgb = pipelines::projectPreview(*projection, estimates[i][0].permute({1, 2, 0}));
        VT_COMPARE(rgb.sizes().vec(), (std::vector<std::int64_t>{h, w, 3}));
        VT_CHECK_MSG(rgb.isfinite().all().item<bool>(), "step " << i + 1 << ": the projected preview is not finite");
    }
    // The last estimate is the latent the image decodes from; earlier ones are not yet.
    const auto gridH = r.height / (scale * 2), gridW = r.width / (scale * 2);
    const auto decoderFinal =
        pipelines::ideogram4DecoderLatents(out->finalLatents, gridH, gridW, vae->latentMean().cpu(), vae->latentStd().cpu());
    const double lastRel = maxAbs(estimates.back(), decoderFinal) / decoderFinal.abs().max().item<double>();
    const double firstRel = maxAbs(estimates.front(), decoderFinal) / decoderFinal.abs().max().item<double>();
    std::printf("   last estimate vs final decoder latents: relative error %.2e (first step's %.2e)\n", lastRel, firstRel);
    VT_CHECK_MSG(lastRel <= 1e-6, "the last estimate is off the final latents by " << lastRel);
    VT_CHECK(firstRel > 1e-3);

    // The map against the decoder's own output of a smooth random latent it was not fitted to.
    // This tiny decoder has random weights and is far from linear (a least-squares map explains
    // little of it even on its own fitting data), so the bound is only that the map is no
    // worse than the best constant colour by much; previewMapFitRecoversALinearDecoder checks
    // the fit itself.
    auto generator = at::make_generator<at::CPUGeneratorImpl>(7);
    constexpr std::int64_t kH = 6, kW = 8;  // packed tokens
    auto smooth = at::randn({1, c, kH, kW}, generator, at::TensorOptions().dtype(at::kFloat));
    smooth = at::upsample_bilinear2d(smooth, {2 * kH, 2 * kW}, false);
    smooth = smooth / at::std(smooth, {2, 3}, true, true);
    const auto z =
        pipelines::ideogram4DecoderLatents(pipelines::ideogram4Patchify(smooth), kH, kW, vae->latentMean().cpu(), vae->latentStd().cpu());
    auto decoded = vae->decode(z.to(testDevice()));
    VT_CHECK_MSG(decoded.ok(), (decoded.ok() ? "" : decoded.error().message));
    const auto target = at::adaptive_avg_pool2d((*decoded)[0].cpu().to(at::kDouble), {2 * kH, 2 * kW});  // [3, h, w]
    const auto predicted = pipelines::projectPreview(*projection, z[0].permute({1, 2, 0})).permute({2, 0, 1}).to(at::kDouble);
    const double rmse = (predicted - target).pow(2).mean().sqrt().item<double>();
    const double constant = (target - target.mean({1, 2}, true)).pow(2).mean().sqrt().item<double>();
    std::printf("   preview map on a held-out smooth latent: rms error %.3f, best constant colour %.3f (decoded |x| max %.2f)\n", rmse,
        constant, target.abs().max().item<double>());
    VT_CHECK_MSG(std::isfinite(rmse) && rmse < 1.25 * constant,
        "the preview map's rms error " << rmse << " is far worse than a constant's " << constant);
}

// The fit on a decoder that is exactly linear per latent cell (each cell an 8 x 8 block of one
// colour): the map comes back but for the ridge's small shrinkage, offset row included.
VT_TEST(previewMapFitRecoversALinearDecoder)
{
    auto generator = at::make_generator<at::CPUGeneratorImpl>(11);
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    constexpr std::int64_t kC = 32, kH = 24, kW = 20;
    const auto latents = at::randn({kC, kH, kW}, generator, f32) * 1.5 + 0.3;
    const auto truth = at::randn({kC + 1, 3}, generator, f32) * 0.2;
    const auto cells = pipelines::projectPreview(truth, latents.permute({1, 2, 0})).permute({2, 0, 1});  // [3, h, w]
    const auto decoded = at::upsample_nearest2d(cells.unsqueeze(0), {kH * 8, kW * 8})[0];
    const auto fitted = pipelines::fitPreviewProjection(latents, decoded);
    VT_COMPARE(fitted.sizes().vec(), (std::vector<std::int64_t>{kC + 1, 3}));
    const double relative = maxAbs(fitted, truth) / truth.abs().max().item<double>();
    const auto back = pipelines::projectPreview(fitted, latents.permute({1, 2, 0})).permute({2, 0, 1});
    const double rms = (back - cells).pow(2).mean().sqrt().item<double>(), spread = cells.std().item<double>();
    std::printf("   linear decoder: map relative error %.2e, reconstruction rms %.2e (cells' std %.2f)\n", relative, rms, spread);
    VT_CHECK_MSG(relative < 0.05, "the fitted map is off by " << relative);
    VT_CHECK(rms < 0.05 * spread);
}

VT_TEST(badRequestsAndCancelAreErrors)
{
    auto run = runPipeline("model", "case");
    const auto& pipe = *run.pipe;
    auto bad = run.request;
    bad.width = 50;
    VT_CHECK(!pipe.generate(bad).ok());
    bad = run.request;
    bad.maxSequenceLength = 8;
    auto tooLong = pipe.generate(bad);
    VT_CHECK(!tooLong.ok() && mentions(tooLong.error().message, {"tokens"}));
    bad = run.request;
    bad.noise = at::zeros({5, 128});
    VT_CHECK(!pipe.generate(bad).ok());
    bad = run.request;
    bad.std = 0.0;
    VT_CHECK(!pipe.generate(bad).ok());
    bad = run.request;
    bad.guidanceSchedule[2] = std::nan("");
    VT_CHECK(!pipe.generate(bad).ok());
    std::stop_source stop;
    stop.request_stop();
    auto cancelled = pipe.generate(run.request, {}, stop.get_token());
    VT_CHECK(!cancelled.ok() && cancelled.error().code == ErrorCode::Cancelled);
}

VT_MAIN("test_ideogram4")

// Streaming the blocks from host memory (for a GPU that cannot hold both DiTs) computes what
// the resident model does; on the CPU there is nothing to stream and the option is ignored.
VT_TEST(streamedBlocksMatchResidentBlocks)
{
    auto set = tensorfile::readTensorSet(ditDir() / "case_diffusers.safetensors");
    VT_CHECK(set.ok());
    ideogram4::TransformerLoadOptions o;
    o.component = "unconditional_transformer";
    o.device = testDevice();
    o.offloadBlocks = true;
    auto streamed = ideogram4::Transformer::load(ditDir() / "diffusers", o);
    VT_CHECK_MSG(streamed.ok(), (streamed.ok() ? "" : streamed.error().message));
    VT_CHECK(streamed->offloadsBlocks() == !o.device.is_cpu());
    const auto& latents = *set->find("latents");
    const double t = set->find("timestep")->item<double>();
    const auto& resident = dit("diffusers", "unconditional_transformer");
    auto a = resident.forward(latents, at::zeros({0, resident.config().llmFeaturesDim}), t, kGridH, kGridW);
    auto b = streamed->forward(latents, at::zeros({0, resident.config().llmFeaturesDim}), t, kGridH, kGridW);
    VT_CHECK(a.ok() && b.ok());
    const double diff = maxAbs(*a, *b);
    std::printf("   streamed blocks on %s: max abs difference from resident %.2e\n", o.device.str().c_str(), diff);
    // The same kernels on the same numbers; on a GPU the library may pick another GEMM for
    // weights that arrive by copy, hence a hair of slack there.
    VT_CHECK(diff <= (o.device.is_cpu() ? 0.0 : 1e-5));
}
