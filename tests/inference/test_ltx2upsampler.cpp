// LTX-2 / LTX-2.3 latent upsampler against diffusers 0.42.1 at tiny sizes
// (tests/fixtures/make_ltx2_upsampler_fixtures.py): every variant (rational x2 / x1.5 / x0.75 /
// x4, Conv2d + PixelShuffle x2, temporal, spatial + temporal, dims 2) in the diffusers folder,
// the diffusers repo above it, the Lightricks single file and the same file without a config.
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/models/ltx2/ltx2upsampler.h"
#include "inference/tensorfile/tensorset.h"

#include <ATen/ATen.h>

#include <fstream>
#include <map>
#include <stop_token>

#include <unistd.h>

using namespace vireo;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-4;

struct Variant {
    const char* name;
    bool noconfig;  // noconfig.safetensors exists (the shapes determine the structure)
    double spatial;  // expected spatialScale()
    int temporal;  // expected temporalScale()
};

const Variant kVariants[] = {
    {"v20", true, 2.0, 1},
    {"v23", true, 2.0, 1},
    {"x15", true, 1.5, 1},
    {"x075", false, 0.75, 1},
    {"x4", true, 4.0, 1},
    {"temporal", true, 1.0, 2},
    {"st", true, 2.0, 2},
    {"d2", true, 1.5, 1},
};

std::vector<std::string> layoutsOf(const Variant& v)
{
    std::vector<std::string> out{"diffusers", "repo", "single"};
    if (v.noconfig)
        out.push_back("noconfig");
    return out;
}

fs::path layoutPath(const std::string& variant, const std::string& layout)
{
    const auto dir = test::fixturesDir() / variant;
    if (layout == "diffusers")
        return dir / "diffusers" / "latent_upsampler";
    if (layout == "repo")
        return dir / "diffusers";  // model_index.json + latent_upsampler/
    return dir / (layout + ".safetensors");
}

// A scratch folder per test, removed on every exit path.
struct ScratchDir : test::ScratchDir {
    explicit ScratchDir(const std::string& tag) : test::ScratchDir("vireo_ltx2upsampler_" + tag + "_") {}
};

void copyFile(const fs::path& from, const fs::path& to)
{
    const auto bytes = test::readAll(from);
    std::ofstream(to, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

tensorfile::TensorSet readSet(const fs::path& file)
{
    auto set = tensorfile::readTensorSet(file);
    if (!set)
        throw std::runtime_error(file.string() + ": " + set.error().message);
    return std::move(*set);
}

const at::Tensor& tensorOf(const tensorfile::TensorSet& set, const std::string& name)
{
    const auto* t = set.find(name);
    if (!t)
        throw std::runtime_error("fixture lacks " + name);
    return *t;
}

ltx2::LatentUpsampler loadOrThrow(const fs::path& path, const ltx2::LatentUpsamplerLoadOptions& options = {})
{
    auto m = ltx2::LatentUpsampler::load(path, options);
    if (!m)
        throw std::runtime_error(path.string() + ": " + m.error().message);
    return std::move(*m);
}

at::Tensor valueOrThrow(Result<at::Tensor> r)
{
    if (!r)
        throw std::runtime_error(r.error().message);
    return std::move(*r);
}

double maxAbsDiff(const at::Tensor& a, const at::Tensor& b)
{
    if (a.sizes() != b.sizes())
        throw std::runtime_error("shape mismatch");
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

bool sameConfig(const ltx2::LatentUpsamplerConfig& a, const ltx2::LatentUpsamplerConfig& b)
{
    const bool rational = a.spatialUpsample && !a.temporalUpsample && a.useRationalResampler;
    return a.inChannels == b.inChannels && a.midChannels == b.midChannels && a.numBlocksPerStage == b.numBlocksPerStage && a.dims == b.dims
        && a.spatialUpsample == b.spatialUpsample && a.temporalUpsample == b.temporalUpsample
        && (a.temporalUpsample || a.useRationalResampler == b.useRationalResampler)
        && (!rational || a.rationalSpatialScale == b.rationalSpatialScale);
}

std::string shapeOf(const at::Tensor& t)
{
    std::string s;
    for (auto d : t.sizes())
        s += (s.empty() ? "[" : ", ") + std::to_string(d);
    return s + "]";
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

void writeText(const fs::path& path, const std::string& text)
{
    std::ofstream(path, std::ios::binary) << text;
}

// The single file of a variant rewritten with other tensors or metadata, into dir/name.
fs::path rewrite(const fs::path& dir, const std::string& name, const std::map<std::string, at::Tensor>& tensors,
    const std::map<std::string, std::string>& metadata)
{
    const auto path = dir / name;
    auto ok = tensorfile::writeSafetensors(path, tensors, metadata);
    if (!ok)
        throw std::runtime_error(ok.error().message);
    return path;
}

}  // namespace

VT_TEST(everyVariantMatchesDiffusersInEveryLayout)
{
    for (const auto& v : kVariants) {
        const auto set = readSet(test::fixturesDir() / v.name / "case.safetensors");
        const auto& latents = tensorOf(set, "latents");
        const auto& expected = tensorOf(set, "expected.upsampled");
        const auto& expectedNormalized = tensorOf(set, "expected.normalized");
        for (const auto& layout : layoutsOf(v)) {
            const auto m = loadOrThrow(layoutPath(v.name, layout));
            VT_COMPARE(m.spatialScale(), v.spatial);
            VT_COMPARE(m.temporalScale(), v.temporal);
            const auto out = valueOrThrow(m.upsample(latents));
            VT_COMPARE(out.sizes().vec(), expected.sizes().vec());
            VT_CHECK(out.scalar_type() == at::kFloat);
            const double err = maxAbsDiff(out, expected);
            const auto normalized = valueOrThrow(
                m.upsampleNormalized(tensorOf(set, "normalized"), tensorOf(set, "latents_mean"), tensorOf(set, "latents_std")));
            VT_CHECK(normalized.scalar_type() == at::kFloat);
            const double errNormalized = maxAbsDiff(normalized, expectedNormalized);
            std::printf("   %-8s %-9s %s -> %s: forward max abs %.2e (|y| max %.3f), normalized step %.2e (|y| max %.3f)\n", v.name,
                layout.c_str(), shapeOf(latents).c_str(), shapeOf(out).c_str(), err, expected.abs().max().item<double>(), errNormalized,
                expectedNormalized.abs().max().item<double>());
            VT_CHECK_MSG(err <= kTolerance, v.name << " (" << layout << "): forward max abs error " << err << " above 1e-4");
            VT_CHECK_MSG(errNormalized <= kTolerance, v.name << " (" << layout << "): normalized max abs error " << errNormalized);
        }
    }
}

VT_TEST(probeReadsTheSameConfigFromEveryLayout)
{
    for (const auto& v : kVariants) {
        const auto reference = ltx2::latentUpsamplerConfigFromDiffusers(test::readText(layoutPath(v.name, "diffusers") / "config.json"));
        VT_CHECK_MSG(reference.ok(), (reference.ok() ? "" : reference.error().message));
        for (const auto& layout : layoutsOf(v)) {
            const auto probed = ltx2::probeLatentUpsampler(layoutPath(v.name, layout));
            VT_CHECK_MSG(probed.ok(), v.name << "/" << layout << ": " << (probed.ok() ? "" : probed.error().message));
            VT_CHECK_MSG(sameConfig(*probed, *reference),
                v.name << "/" << layout << ": " << ltx2::describeLatentUpsampler(*probed) << " vs "
                       << ltx2::describeLatentUpsampler(*reference));
        }
        std::printf("   %-8s %s\n", v.name, ltx2::describeLatentUpsampler(*reference).c_str());
    }
    // What each published layout says, spelled out.
    auto probe = [](const char* variant, const char* layout) {
        auto r = ltx2::probeLatentUpsampler(layoutPath(variant, layout));
        if (!r)
            throw std::runtime_error(r.error().message);
        return *r;
    };
    const auto v20 = probe("v20", "single");
    VT_CHECK(v20.spatialUpsample && !v20.temporalUpsample && v20.useRationalResampler && v20.rationalSpatialScale == 2.0);
    const auto v23 = probe("v23", "noconfig");
    VT_CHECK(v23.spatialUpsample && !v23.temporalUpsample && !v23.useRationalResampler && v23.dims == 3);
    VT_COMPARE(v23.midChannels, std::int64_t{32});
    VT_COMPARE(v23.inChannels, std::int64_t{8});
    VT_COMPARE(v23.numBlocksPerStage, std::int64_t{2});
    const auto x15 = probe("x15", "noconfig");
    VT_CHECK(x15.useRationalResampler && x15.rationalSpatialScale == 1.5);
    const auto temporal = probe("temporal", "single");
    VT_CHECK(!temporal.spatialUpsample && temporal.temporalUpsample);
    VT_COMPARE(probe("d2", "noconfig").dims, std::int64_t{2});
    VT_CHECK(ltx2::describeLatentUpsampler(x15).find("x1.5 (rational 3/2)") != std::string::npos);

    // The rational resampler's stride is not stored: without its config an x0.75 file reads
    // as x1.5 (same shapes), which is why the shapes are only the last resort.
    ScratchDir dir("x075");
    const auto single = readSet(layoutPath("x075", "single"));
    const auto bare = rewrite(dir.path, "x075-noconfig.safetensors", single.tensors, {});
    const auto guessed = ltx2::probeLatentUpsampler(bare);
    VT_CHECK(guessed.ok() && guessed->rationalSpatialScale == 1.5);
    // The diffusers weights file alone still reads its folder's config.json.
    const auto file = ltx2::probeLatentUpsampler(layoutPath("x075", "diffusers") / "diffusion_pytorch_model.safetensors");
    VT_CHECK(file.ok() && file->rationalSpatialScale == 0.75);
    const auto m = loadOrThrow(layoutPath("x075", "diffusers") / "diffusion_pytorch_model.safetensors");
    VT_COMPARE(m.spatialScale(), 0.75);
}

VT_TEST(probeRefusesOtherModels)
{
    const auto dir = test::fixturesDir() / "notupsampler";
    for (const auto& path : {dir / "dit.safetensors", dir / "vae"}) {
        const auto r = ltx2::probeLatentUpsampler(path);
        VT_CHECK(!r.ok());
        std::printf("   %s: %s\n", path.filename().c_str(), r.error().message.c_str());
        VT_CHECK(r.error().code == ErrorCode::NotFound);
        VT_CHECK_MSG(contains(r.error().message, path.filename().string()), r.error().message);
        VT_CHECK_MSG(contains(r.error().message, "not an LTX-2 latent upsampler"), r.error().message);
        VT_CHECK(!ltx2::LatentUpsampler::load(path).ok());
    }
    const auto missing = ltx2::probeLatentUpsampler(dir / "nothing.safetensors");
    VT_CHECK(!missing.ok() && missing.error().code == ErrorCode::NotFound);
}

VT_TEST(hostileFilesAreRefusedNamingTheFile)
{
    ScratchDir dir("hostile");
    const auto single = readSet(layoutPath("v20", "single"));
    auto expectRefused = [&](const fs::path& path, ErrorCode code, const std::vector<std::string>& words) {
        const auto probed = ltx2::probeLatentUpsampler(path);
        const auto loaded = ltx2::LatentUpsampler::load(path);
        VT_CHECK_MSG(!probed.ok() && !loaded.ok(), path.filename() << " was accepted");
        const auto& message = loaded.error().message;
        std::printf("   %-26s %s\n", path.filename().c_str(), message.c_str());
        VT_CHECK_MSG(loaded.error().code == code, message);
        VT_CHECK_MSG(probed.error().message == message, probed.error().message);
        VT_CHECK_MSG(contains(message, path.filename().string()), message);
        for (const auto& w : words)
            VT_CHECK_MSG(contains(message, w), "'" << w << "' not in: " << message);
    };

    // Truncated: the header promises more bytes than the file has.
    {
        const auto bytes = test::readAll(layoutPath("v20", "single"));
        const auto path = dir.path / "truncated.safetensors";
        std::ofstream(path, std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size() - 100));
        const auto r = ltx2::LatentUpsampler::load(path);
        VT_CHECK(!r.ok());
        std::printf("   %-26s %s\n", "truncated.safetensors", r.error().message.c_str());
        VT_CHECK_MSG(contains(r.error().message, "truncated.safetensors"), r.error().message);
        VT_CHECK(!ltx2::probeLatentUpsampler(path).ok());
    }

    // A tensor shape that disagrees with the embedded config (and one without config, where the
    // derived structure fixes it): the tensor is named.
    auto wrongShape = single.tensors;
    wrongShape["res_blocks.1.conv2.weight"] = at::zeros({32, 32, 3, 3, 1});
    expectRefused(rewrite(dir.path, "wrongshape.safetensors", wrongShape, single.metadata), ErrorCode::InvalidFormat,
        {"res_blocks.1.conv2.weight", "[32, 32, 3, 3, 1]", "[32, 32, 3, 3, 3]", "__metadata__ config"});
    expectRefused(rewrite(dir.path, "wrongshape-noconfig.safetensors", wrongShape, {}), ErrorCode::InvalidFormat,
        {"res_blocks.1.conv2.weight", "tensor shapes"});
    // A config whose width is not the stored one.
    auto meta = single.metadata;
    meta["config"] = R"({"_class_name": "LatentUpsampler", "in_channels": 8, "mid_channels": 64, "num_blocks_per_stage": 2,
        "dims": 3, "spatial_upsample": true, "temporal_upsample": false, "spatial_scale": 2.0, "rational_resampler": true})";
    expectRefused(rewrite(dir.path, "widerconfig.safetensors", single.tensors, meta), ErrorCode::InvalidFormat,
        {"initial_conv.weight", "[32, 8, 3, 3, 3]", "[64, 8, 3, 3, 3]"});
    // Published configs lean on ltx-core's defaults: rational_resampler absent means false,
    // which does not fit a file holding the rational resampler.
    meta["config"] = R"({"in_channels": 8, "mid_channels": 32, "num_blocks_per_stage": 2})";
    expectRefused(rewrite(dir.path, "defaults.safetensors", single.tensors, meta), ErrorCode::InvalidFormat,
        {"upsampler.0.weight", "upsampler.conv.weight"});

    // Unknown and missing keys, by name.
    auto unknown = single.tensors;
    unknown.emplace("res_blocks.0.conv3.weight", at::zeros({4}));
    expectRefused(rewrite(dir.path, "unknown.safetensors", unknown, single.metadata), ErrorCode::InvalidFormat,
        {"res_blocks.0.conv3.weight", "match no parameter"});
    auto missing = single.tensors;
    VT_CHECK(missing.erase("post_upsample_res_blocks.1.norm2.bias") == 1);
    expectRefused(rewrite(dir.path, "missing.safetensors", missing, single.metadata), ErrorCode::InvalidFormat,
        {"post_upsample_res_blocks.1.norm2.bias", "missing"});
    // A block index far out of range must not plan a huge model.
    auto farBlock = single.tensors;
    farBlock.emplace("res_blocks.999999999.conv1.weight", at::zeros({1}));
    expectRefused(rewrite(dir.path, "farblock.safetensors", farBlock, {}), ErrorCode::InvalidFormat, {"res_blocks.999999999"});

    // Absurd numbers and unsupported structures in the config.
    meta["config"] = R"({"_class_name": "LatentUpsampler", "in_channels": 8, "mid_channels": 1048576, "rational_resampler": true})";
    expectRefused(rewrite(dir.path, "hugemid.safetensors", single.tensors, meta), ErrorCode::InvalidFormat, {"mid_channels 1048576"});
    meta["config"] = R"({"_class_name": "LatentUpsampler", "in_channels": 8, "mid_channels": 32, "num_blocks_per_stage": 100000,
        "rational_resampler": true})";
    expectRefused(
        rewrite(dir.path, "manyblocks.safetensors", single.tensors, meta), ErrorCode::InvalidFormat, {"num_blocks_per_stage 100000"});
    meta["config"] = R"({"_class_name": "LatentUpsampler", "in_channels": 8, "mid_channels": 32, "num_blocks_per_stage": 2,
        "spatial_scale": 3.0, "rational_resampler": true})";
    expectRefused(
        rewrite(dir.path, "scale3.safetensors", single.tensors, meta), ErrorCode::Unsupported, {"spatial scale 3", "0.75, 1.5, 2.0, 4.0"});
    meta["config"] = R"({"_class_name": "LatentUpsampler", "in_channels": 8, "mid_channels": 32, "dims": 2,
        "spatial_upsample": false, "temporal_upsample": true})";
    expectRefused(rewrite(dir.path, "temporal2d.safetensors", single.tensors, meta), ErrorCode::Unsupported, {"dims 2"});
    meta["config"] = R"({"_class_name": "LatentUpsampler", "in_channels": "eight"})";
    expectRefused(rewrite(dir.path, "badtype.safetensors", single.tensors, meta), ErrorCode::InvalidFormat, {"in_channels"});

    // The same in a diffusers folder's config.json: the error names that file.
    const auto folder = dir.path / "latent_upsampler";
    fs::create_directories(folder);
    copyFile(layoutPath("v20", "diffusers") / "diffusion_pytorch_model.safetensors", folder / "diffusion_pytorch_model.safetensors");
    writeText(folder / "config.json", R"({"_class_name": "LTX2LatentUpsamplerModel", "in_channels": 8, "mid_channels": 99999999})");
    auto r = ltx2::LatentUpsampler::load(dir.path);  // through the parent, as for a diffusers repo
    VT_CHECK(!r.ok());
    std::printf("   %-26s %s\n", "config.json", r.error().message.c_str());
    VT_CHECK_MSG(contains(r.error().message, "config.json") && contains(r.error().message, "mid_channels 99999999"), r.error().message);
    writeText(folder / "config.json", R"({"_class_name": "AutoencoderKLLTX2Video"})");
    r = ltx2::LatentUpsampler::load(folder);
    VT_CHECK(!r.ok() && contains(r.error().message, "AutoencoderKLLTX2Video") && contains(r.error().message, "config.json"));
    writeText(folder / "config.json", test::readText(layoutPath("v20", "diffusers") / "config.json"));
    VT_CHECK(ltx2::LatentUpsampler::load(folder).ok());

    // Two upsamplers in one folder: which one is meant is not guessed.
    copyFile(layoutPath("v20", "single"), folder / "second.safetensors");
    r = ltx2::LatentUpsampler::load(folder);
    VT_CHECK(!r.ok());
    VT_CHECK_MSG(contains(r.error().message, "stored in both"), r.error().message);
}

VT_TEST(theBlurKernelIsOptionalAndTakenFromTheFile)
{
    ScratchDir dir("blur");
    const auto single = readSet(layoutPath("x15", "single"));
    const auto set = readSet(test::fixturesDir() / "x15" / "case.safetensors");
    const auto& latents = tensorOf(set, "latents");
    const auto reference = valueOrThrow(loadOrThrow(layoutPath("x15", "single")).upsample(latents));

    // Without the buffer the binomial kernel is computed: the same output.
    auto without = single.tensors;
    VT_CHECK(without.erase("upsampler.blur_down.kernel") == 1);
    const auto same = valueOrThrow(loadOrThrow(rewrite(dir.path, "nokernel.safetensors", without, single.metadata)).upsample(latents));
    VT_CHECK(at::equal(same, reference));

    // A stored kernel is used (the reference loads the buffer): another kernel, another output.
    auto other = single.tensors;
    other["upsampler.blur_down.kernel"] = at::full({1, 1, 5, 5}, 1.0 / 25.0);
    const auto flat = valueOrThrow(loadOrThrow(rewrite(dir.path, "boxkernel.safetensors", other, single.metadata)).upsample(latents));
    VT_CHECK(maxAbsDiff(flat, reference) > 1e-3);

    other["upsampler.blur_down.kernel"] = at::zeros({1, 1, 3, 3});
    const auto bad = ltx2::LatentUpsampler::load(rewrite(dir.path, "smallkernel.safetensors", other, single.metadata));
    VT_CHECK(!bad.ok() && contains(bad.error().message, "upsampler.blur_down.kernel"));
    // Only the rational resampler has one.
    auto stray = readSet(layoutPath("v23", "single"));
    stray.tensors.emplace("upsampler.blur_down.kernel", at::zeros({1, 1, 5, 5}));
    const auto strayLoad = ltx2::LatentUpsampler::load(rewrite(dir.path, "straykernel.safetensors", stray.tensors, stray.metadata));
    VT_CHECK(!strayLoad.ok() && contains(strayLoad.error().message, "match no parameter"));
}

VT_TEST(computeDtypesAndResidentBytes)
{
    const auto set = readSet(test::fixturesDir() / "x15" / "case.safetensors");
    const auto& latents = tensorOf(set, "latents");
    const auto& expected = tensorOf(set, "expected.upsampled");
    ltx2::LatentUpsamplerLoadOptions options;
    options.dtype = at::kBFloat16;
    const auto m = loadOrThrow(layoutPath("x15", "single"), options);
    VT_CHECK(m.dtype() == at::kBFloat16 && m.device() == c10::Device(c10::kCPU));
    const auto out = valueOrThrow(m.upsample(latents));
    VT_CHECK(out.scalar_type() == at::kBFloat16);
    const double rel = (out.to(at::kFloat) - expected).abs().max().item<double>() / expected.abs().max().item<double>();
    std::printf("   x15 bfloat16 compute: max abs error / |y| max = %.3f\n", rel);
    VT_CHECK_MSG(rel < 0.05, rel);
    const auto normalized =
        valueOrThrow(m.upsampleNormalized(tensorOf(set, "normalized"), tensorOf(set, "latents_mean"), tensorOf(set, "latents_std")));
    VT_CHECK(normalized.scalar_type() == at::kFloat);

    ltx2::LatentUpsamplerLoadOptions int8;
    int8.dtype = at::kChar;
    const auto refused = ltx2::LatentUpsampler::load(layoutPath("x15", "single"), int8);
    VT_CHECK(!refused.ok() && refused.error().code == ErrorCode::InvalidArgument);

    // Without a strided blur the resident weights are exactly the stored float32 tensors.
    auto v23 = loadOrThrow(layoutPath("v23", "single"));
    std::int64_t stored = 0;
    for (const auto& [name, t] : readSet(layoutPath("v23", "single")).tensors)
        stored += t.numel() * 4;
    VT_COMPARE(v23.residentBytes(), stored);
    auto moved = std::move(v23);
    VT_COMPARE(moved.residentBytes(), stored);
    VT_COMPARE(moved.config().numBlocksPerStage, std::int64_t{2});
}

VT_TEST(badInputsAndCancellationAreErrors)
{
    const auto set = readSet(test::fixturesDir() / "v23" / "case.safetensors");
    const auto& latents = tensorOf(set, "latents");
    const auto m = loadOrThrow(layoutPath("v23", "diffusers"));

    auto r = m.upsample(latents.squeeze(0).select(0, 0));
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::InvalidArgument && contains(r.error().message, "[B, C, F, H, W]"));
    r = m.upsample(latents.narrow(1, 0, 4));
    VT_CHECK(!r.ok() && contains(r.error().message, "4 channels"));
    r = m.upsample(latents.to(at::kInt));
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::InvalidArgument);
    r = m.upsample(at::Tensor());
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::InvalidArgument);

    const auto& mean = tensorOf(set, "latents_mean");
    const auto& stdev = tensorOf(set, "latents_std");
    r = m.upsampleNormalized(latents, mean.narrow(0, 0, 4), stdev);
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::InvalidArgument && contains(r.error().message, "8"));
    r = m.upsampleNormalized(latents, mean, at::zeros_like(stdev));
    VT_CHECK(!r.ok() && contains(r.error().message, "zero std"));

    std::stop_source stop;
    stop.request_stop();
    r = m.upsample(latents, stop.get_token());
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::Cancelled);
    r = m.upsampleNormalized(latents, mean, stdev, stop.get_token());
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::Cancelled);
}

VT_TEST(configReadersCheckTheirInput)
{
    auto c = ltx2::latentUpsamplerConfigFromDiffusers("{}");
    VT_CHECK(c.ok() && c->midChannels == 1024 && c->useRationalResampler && c->inChannels == 128);  // diffusers' defaults
    c = ltx2::latentUpsamplerConfigFromLtxCore(R"({"_class_name": "LatentUpsampler"})");
    VT_CHECK(c.ok() && c->midChannels == 512 && !c->useRationalResampler);  // ltx-core's
    // The published LTX-2.3 x2 config.
    c = ltx2::latentUpsamplerConfigFromLtxCore(R"({"_class_name": "LatentUpsampler", "in_channels": 128, "mid_channels": 1024,
        "num_blocks_per_stage": 4, "dims": 3, "spatial_upsample": true, "temporal_upsample": false, "spatial_scale": 2.0,
        "rational_resampler": false})");
    VT_CHECK(c.ok() && c->midChannels == 1024 && !c->useRationalResampler && c->rationalSpatialScale == 2.0);
    c = ltx2::latentUpsamplerConfigFromLtxCore(R"({"transformer": {"num_layers": 48}})");
    VT_CHECK(!c.ok() && c.error().code == ErrorCode::NotFound);
    c = ltx2::latentUpsamplerConfigFromDiffusers(R"({"_class_name": "LTX2VideoTransformer3DModel"})");
    VT_CHECK(!c.ok() && c.error().code == ErrorCode::InvalidFormat);
    c = ltx2::latentUpsamplerConfigFromDiffusers(R"({"rational_spatial_scale": 1.25})");
    VT_CHECK(!c.ok() && c.error().code == ErrorCode::Unsupported && contains(c.error().message, "0.75, 1.5, 2.0, 4.0"));
    // Not read for Conv2d + PixelShuffle, which is always x2 (as in the reference).
    c = ltx2::latentUpsamplerConfigFromDiffusers(R"({"rational_spatial_scale": 1.25, "use_rational_resampler": false})");
    VT_CHECK(c.ok());
    for (const auto& text : std::vector<std::string>{R"({"mid_channels": 48})", R"({"mid_channels": 0})", R"({"in_channels": -1})",
             R"({"dims": 1})", R"({"spatial_upsample": false})", R"({"num_blocks_per_stage": 65})", R"({"dims": "3"})", "[1, 2]",
             "{\"mid_channels\": 32", "{\"a\":" + std::string(100, '[')}) {
        c = ltx2::latentUpsamplerConfigFromDiffusers(text);
        VT_CHECK_MSG(!c.ok(), text);
    }
}

VT_MAIN("TestLtx2Upsampler")
