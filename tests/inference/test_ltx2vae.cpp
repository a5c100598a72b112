// LTX-2 / LTX-2.3 video VAE decoder and encoder against diffusers 0.42.1 at tiny sizes
// (tests/fixtures/make_ltx2_vae_fixtures.py): the diffusers folder, the Lightricks single file
// (ltx-core names and config) and the same file without a config.
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/models/ltx2/ltx2diffusiondecoder.h"
#include "inference/models/ltx2/ltx2videovae.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/tensorfile/tensorset.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <stop_token>

#include <unistd.h>

using namespace vireo;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-4;
// Tiled / chunked against untiled, mean absolute error. The tiny random decoders see far
// beyond a 3-cell tile, so their seams are large (max errors are of the order of |y|);
// measured: 2.0 tiles 0.021, chunks 0.0085, both 0.024; 2.3 0.014, 0.0067, 0.017.
// The tight checks are the ones against diffusers' own tiling.
constexpr double kTiledMeanTolerance = 0.03;
const char* const kLayouts[] = {"diffusers", "single", "noconfig"};

fs::path versionDir(const std::string& v)
{
    return test::fixturesDir() / ("v" + v);
}

std::vector<fs::path> layoutPaths(const std::string& v, const std::string& layout)
{
    const auto dir = versionDir(v);
    if (layout == "diffusers")
        return {dir / "diffusers"};
    return {dir / (layout + ".safetensors")};
}

ltx2::Ltx2Weights openWeights(const std::vector<fs::path>& paths)
{
    auto w = ltx2::Ltx2Weights::open(paths);
    if (!w)
        throw std::runtime_error(w.error().message);
    return std::move(*w);
}

const ltx2::VideoDecoder& decoder(const std::string& v, const std::string& layout)
{
    static std::map<std::string, ltx2::VideoDecoder> cache;
    const auto key = v + "/" + layout;
    if (auto it = cache.find(key); it != cache.end())
        return it->second;
    auto model = ltx2::VideoDecoder::load(openWeights(layoutPaths(v, layout)));
    if (!model)
        throw std::runtime_error(key + ": " + model.error().message);
    return cache.emplace(key, std::move(*model)).first->second;
}

const ltx2::VideoEncoder& encoder(const std::string& v, const std::string& layout)
{
    static std::map<std::string, ltx2::VideoEncoder> cache;
    const auto key = v + "/" + layout;
    if (auto it = cache.find(key); it != cache.end())
        return it->second;
    auto model = ltx2::VideoEncoder::load(openWeights(layoutPaths(v, layout)));
    if (!model)
        throw std::runtime_error(key + ": " + model.error().message);
    return cache.emplace(key, std::move(*model)).first->second;
}

tensorfile::TensorSet readCase(const fs::path& file)
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

double maxAbsDiff(const at::Tensor& a, const at::Tensor& b)
{
    if (a.sizes() != b.sizes())
        throw std::runtime_error("shape mismatch");
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

double meanAbsDiff(const at::Tensor& a, const at::Tensor& b)
{
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().mean().item<double>();
}

at::Tensor decodeOrThrow(const ltx2::VideoDecoder& d, const at::Tensor& latents, const ltx2::VideoDecodeOptions& options = {})
{
    auto out = d.decode(latents, options);
    if (!out)
        throw std::runtime_error(out.error().message);
    return *out;
}

at::Tensor encodeOrThrow(const ltx2::VideoEncoder& e, const at::Tensor& video, const ltx2::VideoEncodeOptions& options = {})
{
    auto out = e.encode(video, options);
    if (!out)
        throw std::runtime_error(out.error().message);
    return *out;
}

void checkEncodeCases(const std::string& v)
{
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(versionDir(v)))
        if (e.path().filename().string().rfind("encode_", 0) == 0)
            files.push_back(e.path());
    std::sort(files.begin(), files.end());
    VT_COMPARE(files.size(), std::size_t{5});
    for (const auto& file : files) {
        const auto set = readCase(file);
        const auto& video = tensorOf(set, "video");
        const auto& expected = tensorOf(set, "expected.latents");
        ltx2::VideoEncodeOptions options;
        options.causal = set.metadata.at("causal") == "1";
        for (const char* layout : kLayouts) {
            const auto out = encodeOrThrow(encoder(v, layout), video, options);
            VT_COMPARE(out.sizes().vec(), expected.sizes().vec());
            VT_CHECK(out.scalar_type() == at::kFloat);
            const double err = maxAbsDiff(out, expected);
            std::printf("   %s %-28s %-9s max abs %.2e (|z| max %.3f)\n", v.c_str(), file.filename().c_str(), layout, err,
                expected.abs().max().item<double>());
            VT_CHECK_MSG(err <= kTolerance, file << " (" << layout << "): max abs error " << err << " above 1e-4");
        }
    }
}

void checkCases(const std::string& v)
{
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(versionDir(v)))
        if (e.path().filename().string().rfind("case_", 0) == 0)
            files.push_back(e.path());
    std::sort(files.begin(), files.end());
    VT_COMPARE(files.size(), std::size_t{5});
    for (const auto& file : files) {
        const auto set = readCase(file);
        const auto& latents = tensorOf(set, "latents");
        const auto& expected = tensorOf(set, "expected.video");
        ltx2::VideoDecodeOptions options;
        options.causal = set.metadata.at("causal") == "1";
        for (const char* layout : kLayouts) {
            const auto out = decodeOrThrow(decoder(v, layout), latents, options);
            VT_COMPARE(out.sizes().vec(), expected.sizes().vec());
            const double err = maxAbsDiff(out, expected);
            std::printf("   %s %-24s %-9s max abs %.2e (|y| max %.3f)\n", v.c_str(), file.filename().c_str(), layout, err,
                expected.abs().max().item<double>());
            VT_CHECK_MSG(err <= kTolerance, file << " (" << layout << "): max abs error " << err << " above 1e-4");
        }
    }
}

}  // namespace

VT_TEST(ltx20DecoderMatchesDiffusersInEveryLayout)
{
    checkCases("20");
}
VT_TEST(ltx23DecoderMatchesDiffusersInEveryLayout)
{
    checkCases("23");
}

VT_TEST(layoutsResolveTheSameConfig)
{
    for (const std::string v : {"20", "23"}) {
        const auto& reference = decoder(v, "diffusers");
        for (const char* layout : kLayouts)
            VT_COMPARE(ltx2::toJson(decoder(v, layout).config()), ltx2::toJson(reference.config()));
        const auto& c = reference.config();
        VT_COMPARE(reference.spatialScale(), std::int64_t{32});
        VT_COMPARE(reference.temporalScale(), std::int64_t{8});
        VT_CHECK(!c.decoderCausal);
        if (v == "20") {
            VT_COMPARE(c.decoderSpatialPaddingMode, std::string("reflect"));
            VT_CHECK(c.upsampleResidual == std::vector<bool>(3, true));
        } else {
            VT_COMPARE(c.decoderSpatialPaddingMode, std::string("zeros"));
            VT_CHECK(c.upsampleResidual == std::vector<bool>(4, false));
            VT_CHECK((c.upsampleType == std::vector<std::string>{"spatiotemporal", "spatiotemporal", "temporal", "spatial"}));
            VT_CHECK((c.upsampleFactor == std::vector<std::int64_t>{2, 2, 1, 2}));
        }
        // Same float32 weights under two naming schemes: bit-identical outputs.
        const auto set = readCase(versionDir(v) / "case_base.safetensors");
        VT_CHECK(at::equal(decodeOrThrow(decoder(v, "diffusers"), tensorOf(set, "latents")),
            decodeOrThrow(decoder(v, "single"), tensorOf(set, "latents"))));
        std::printf("   v%s resident %lld bytes\n", v.c_str(), static_cast<long long>(reference.residentBytes()));
        VT_CHECK(reference.residentBytes() > 0);
    }
}

VT_TEST(tiledAndChunkedDecodingMatchDiffusersAndStayCloseToUntiled)
{
    for (const std::string v : {"20", "23"}) {
        const auto set = readCase(versionDir(v) / "case_tiling.safetensors");
        const auto& latents = tensorOf(set, "latents");
        const auto& untiled = tensorOf(set, "expected.video");
        const auto& d = decoder(v, "single");
        auto meta = [&](const char* key) { return std::stoll(set.metadata.at(key)); };
        std::vector<std::pair<std::int64_t, std::int64_t>> progress;

        ltx2::VideoDecodeOptions tiles;
        tiles.tileSize = meta("tile_latent");
        tiles.tileOverlap = meta("tile_overlap");
        tiles.onProgress = [&](std::int64_t done, std::int64_t total) { progress.emplace_back(done, total); };
        const auto tiled = decodeOrThrow(d, latents, tiles);
        // 4 x 6 latent cells in tiles of 3 overlapping by 1: 2 x 3 tiles, reported one by one.
        VT_COMPARE(progress.size(), std::size_t{6});
        for (std::size_t i = 0; i < progress.size(); ++i)
            VT_CHECK(progress[i].first == static_cast<std::int64_t>(i + 1) && progress[i].second == 6);

        ltx2::VideoDecodeOptions chunks;
        chunks.chunkFrames = meta("chunk_frames");
        chunks.chunkOverlap = meta("chunk_overlap");
        const auto chunked = decodeOrThrow(d, latents, chunks);

        auto both = tiles;
        both.chunkFrames = chunks.chunkFrames;
        both.chunkOverlap = chunks.chunkOverlap;
        progress.clear();
        const auto tiledChunked = decodeOrThrow(d, latents, both);
        VT_COMPARE(progress.size(), std::size_t{12});
        VT_CHECK(progress.back() == (std::pair<std::int64_t, std::int64_t>{12, 12}));

        const double tiledErr = maxAbsDiff(tiled, tensorOf(set, "expected.tiled"));
        const double chunkedErr = maxAbsDiff(chunked, tensorOf(set, "expected.chunked"));
        const double bothErr = maxAbsDiff(tiledChunked, tensorOf(set, "expected.tiled_chunked"));
        std::printf(
            "   %s vs reference: tiles %.2e (diffusers tiled_decode), chunks %.2e, both %.2e\n", v.c_str(), tiledErr, chunkedErr, bothErr);
        VT_CHECK(tiledErr <= kTolerance && chunkedErr <= kTolerance && bothErr <= kTolerance);

        const double framewise = std::stod(set.metadata.at("framewise_mean"));
        const double tiledMean = meanAbsDiff(tiled, untiled), chunkedMean = meanAbsDiff(chunked, untiled);
        const double bothMean = meanAbsDiff(tiledChunked, untiled);
        std::printf("   %s vs untiled (mean / max): tiles %.4f / %.3f, chunks %.4f / %.3f, both %.4f / %.3f; "
                    "diffusers' frame-shifted chunks %.4f / %s (|y| max %.3f)\n",
            v.c_str(), tiledMean, maxAbsDiff(tiled, untiled), chunkedMean, maxAbsDiff(chunked, untiled), bothMean,
            maxAbsDiff(tiledChunked, untiled), framewise, set.metadata.at("framewise_max").c_str(), untiled.abs().max().item<double>());
        VT_CHECK(tiledMean <= kTiledMeanTolerance && chunkedMean <= kTiledMeanTolerance && bothMean <= kTiledMeanTolerance);
        // Frame-aligned chunks land far closer to untiled than diffusers' chunking, which
        // blends each frame with its neighbour from the other chunk.
        VT_CHECK_MSG(chunkedMean * 3 < framewise, chunkedMean << " vs " << framewise);

        // Tiles and chunks as large as the latent are one plain decode.
        ltx2::VideoDecodeOptions whole;
        whole.tileSize = 64;
        whole.tileOverlap = 8;
        whole.chunkFrames = 64;
        whole.chunkOverlap = 8;
        VT_CHECK(at::equal(decodeOrThrow(d, latents, whole), decodeOrThrow(d, latents)));
    }
}

VT_TEST(scalingFactorDividesTheNormalizedLatents)
{
    // LTX2Pipeline._denormalize_latents: z * std / scaling_factor + mean.
    const auto set = readCase(versionDir("23") / "case_base.safetensors");
    const auto& latents = tensorOf(set, "latents");
    auto config = decoder("23", "diffusers").config();
    config.scalingFactor = 2.0;
    ltx2::VideoDecoderLoadOptions options;
    options.config = config;
    auto scaled = ltx2::VideoDecoder::load(openWeights(layoutPaths("23", "diffusers")), options);
    VT_CHECK_MSG(scaled.ok(), (scaled.ok() ? "" : scaled.error().message));
    const double err = maxAbsDiff(decodeOrThrow(*scaled, latents), decodeOrThrow(decoder("23", "diffusers"), latents / 2));
    VT_CHECK_MSG(err <= 1e-5, err);
}

VT_TEST(theLoadTakesExactlyTheDecoderTensors)
{
    const test::ScratchDir scratch("vireo_ltx2vae_");
    const auto& dir = scratch.path;
    auto full = readCase(versionDir("20") / "single.safetensors");
    auto write = [&](const char* name, const std::map<std::string, at::Tensor>& tensors) {
        VT_CHECK(tensorfile::writeSafetensors(dir / name, tensors, full.metadata).ok());
        return openWeights({dir / name});
    };

    // A missing decoder tensor fails the load and is named (in diffusers' name, which the
    // ltx-core key maps to).
    auto missing = full.tensors;
    VT_CHECK(missing.erase("vae.decoder.up_blocks.4.res_blocks.1.conv2.conv.weight") == 1);
    auto r = ltx2::VideoDecoder::load(write("missing.safetensors", missing));
    VT_CHECK(!r.ok());
    VT_CHECK_MSG(r.error().message.find("decoder.up_blocks.1.resnets.1.conv2.conv.weight") != std::string::npos, r.error().message);

    // An unknown decoder key fails it too.
    auto extra = full.tensors;
    extra.emplace("vae.decoder.up_blocks.2.res_blocks.0.conv3.conv.weight", at::zeros({4, 4, 3, 3, 3}));
    r = ltx2::VideoDecoder::load(write("extra.safetensors", extra));
    VT_CHECK(!r.ok());
    VT_CHECK_MSG(r.error().message.find("conv3.conv.weight") != std::string::npos, r.error().message);

    // The encoder is not needed; the decoder alone decodes the same video.
    std::map<std::string, at::Tensor> decoderOnly;
    for (const auto& [name, t] : full.tensors)
        if (name.rfind("vae.encoder.", 0) != 0)
            decoderOnly.emplace(name, t);
    r = ltx2::VideoDecoder::load(write("decoder.safetensors", decoderOnly));
    VT_CHECK_MSG(r.ok(), (r.ok() ? "" : r.error().message));
    const auto set = readCase(versionDir("20") / "case_base.safetensors");
    VT_CHECK(at::equal(decodeOrThrow(*r, tensorOf(set, "latents")), decodeOrThrow(decoder("20", "single"), tensorOf(set, "latents"))));

    // An encoder alone is no decoder.
    std::map<std::string, at::Tensor> encoderOnly;
    for (const auto& [name, t] : full.tensors)
        if (name.rfind("vae.encoder.", 0) == 0)
            encoderOnly.emplace(name, t);
    r = ltx2::VideoDecoder::load(write("encoder.safetensors", encoderOnly));
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::NotFound);
}

VT_TEST(configsThatDoNotFitAreRefused)
{
    const auto weights = openWeights(layoutPaths("23", "single"));
    const auto reference = decoder("23", "diffusers").config();
    ltx2::VideoDecoderLoadOptions options;

    auto c = reference;
    c.decoderLayersPerBlock[1] += 1;  // one more resnet in up block 2 than stored
    options.config = c;
    auto r = ltx2::VideoDecoder::load(weights, options);
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::InvalidFormat);
    VT_CHECK_MSG(r.error().message.find("decoder.up_blocks.2.resnets") != std::string::npos, r.error().message);

    c = reference;
    c.decoderBlockOutChannels[0] *= 2;  // widths diffusers itself could not chain
    options.config = c;
    r = ltx2::VideoDecoder::load(weights, options);
    VT_CHECK(!r.ok() && r.error().message.find("inconsistent") != std::string::npos);

    c = reference;
    c.decoderSpatialPaddingMode = "circular";
    options.config = c;
    r = ltx2::VideoDecoder::load(weights, options);
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::Unsupported);

    c = reference;
    c.timestepConditioning = true;
    options.config = c;
    r = ltx2::VideoDecoder::load(weights, options);
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::Unsupported);
    VT_CHECK_MSG(r.error().message.find("timestep conditioning") != std::string::npos, r.error().message);

    c = reference;
    c.decoderInjectNoise.back() = true;
    options.config = c;
    r = ltx2::VideoDecoder::load(weights, options);
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::Unsupported);
}

VT_TEST(cancellationAndBadInputsAreErrors)
{
    const auto set = readCase(versionDir("23") / "case_tiling.safetensors");
    const auto& latents = tensorOf(set, "latents");
    const auto& d = decoder("23", "diffusers");

    std::stop_source before;
    before.request_stop();
    ltx2::VideoDecodeOptions options;
    options.stop = before.get_token();
    auto out = d.decode(latents, options);
    VT_CHECK(!out.ok() && out.error().code == ErrorCode::Cancelled);

    std::stop_source during;
    int calls = 0;
    options.stop = during.get_token();
    options.tileSize = 3;
    options.tileOverlap = 1;
    options.onProgress = [&](std::int64_t, std::int64_t) {
        ++calls;
        during.request_stop();
    };
    out = d.decode(latents, options);
    VT_CHECK(!out.ok() && out.error().code == ErrorCode::Cancelled);
    VT_COMPARE(calls, 1);

    out = d.decode(latents.squeeze(0), {});
    VT_CHECK(!out.ok() && out.error().code == ErrorCode::InvalidArgument);
    VT_CHECK_MSG(out.error().message.find("[B, C, F, H, W]") != std::string::npos, out.error().message);
    out = d.decode(latents.narrow(1, 0, 4), {});
    VT_CHECK(!out.ok() && out.error().message.find("channels") != std::string::npos);
    ltx2::VideoDecodeOptions noOverlap;
    noOverlap.chunkFrames = 2;
    noOverlap.chunkOverlap = 0;
    out = d.decode(latents, noOverlap);
    VT_CHECK(!out.ok() && out.error().code == ErrorCode::InvalidArgument);
    // LTX-2.0 pads by reflection, which a 1-cell tile cannot do (torch refuses it too).
    ltx2::VideoDecodeOptions sliver;
    sliver.tileSize = 1;
    out = decoder("20", "diffusers").decode(latents, sliver);
    VT_CHECK(!out.ok() && out.error().message.find("reflection") != std::string::npos);
}

VT_TEST(ltx20EncoderMatchesDiffusersInEveryLayout)
{
    checkEncodeCases("20");
}
VT_TEST(ltx23EncoderMatchesDiffusersInEveryLayout)
{
    checkEncodeCases("23");
}

VT_TEST(encoderLayoutsResolveTheSameConfig)
{
    for (const std::string v : {"20", "23"}) {
        const auto& reference = encoder(v, "diffusers");
        for (const char* layout : kLayouts) {
            VT_COMPARE(ltx2::toJson(encoder(v, layout).config()), ltx2::toJson(reference.config()));
            // The decoder reads the same config, encoder half included.
            VT_COMPARE(ltx2::toJson(decoder(v, layout).config()), ltx2::toJson(reference.config()));
        }
        const auto& c = reference.config();
        VT_COMPARE(reference.spatialScale(), std::int64_t{32});
        VT_COMPARE(reference.temporalScale(), std::int64_t{8});
        VT_CHECK(c.encoderCausal);
        VT_COMPARE(c.encoderSpatialPaddingMode, std::string("zeros"));
        VT_CHECK((c.encoderBlockOutChannels == std::vector<std::int64_t>{8, 8, 16, 16}));
        VT_CHECK((c.downsampleType == std::vector<std::string>{"spatial", "temporal", "spatiotemporal", "spatiotemporal"}));
        // ltx-core's flat encoder list lands on diffusers' nested names.
        const auto single = openWeights(layoutPaths(v, "single"));
        const auto* mid = single.find(ltx2::Part::VideoVae, "encoder.mid_block.resnets.0.conv1.conv.weight");
        VT_CHECK(mid && mid->name == "vae.encoder.down_blocks.8.res_blocks.0.conv1.conv.weight");
        const auto* down = single.find(ltx2::Part::VideoVae, "encoder.down_blocks.3.downsamplers.0.conv.conv.weight");
        VT_CHECK(down && down->name == "vae.encoder.down_blocks.7.conv.conv.weight");
        // Same float32 weights under two naming schemes: bit-identical outputs.
        const auto set = readCase(versionDir(v) / "encode_video.safetensors");
        VT_CHECK(at::equal(
            encodeOrThrow(encoder(v, "diffusers"), tensorOf(set, "video")), encodeOrThrow(encoder(v, "single"), tensorOf(set, "video"))));
        std::printf("   v%s encoder resident %lld bytes\n", v.c_str(), static_cast<long long>(reference.residentBytes()));
        VT_CHECK(reference.residentBytes() > 0);
    }
}

VT_TEST(tiledAndChunkedEncodingMatchDiffusers)
{
    for (const std::string v : {"20", "23"}) {
        const auto set = readCase(versionDir(v) / "encode_tiling.safetensors");
        const auto& video = tensorOf(set, "video");
        const auto& untiled = tensorOf(set, "expected.latents");
        const auto& e = encoder(v, "single");
        auto meta = [&](const char* key) { return std::stoll(set.metadata.at(key)); };
        std::vector<std::pair<std::int64_t, std::int64_t>> progress;
        auto record = [&](std::int64_t done, std::int64_t total) { progress.emplace_back(done, total); };

        const auto plain = encodeOrThrow(e, video);
        const double plainErr = maxAbsDiff(plain, untiled);

        ltx2::VideoEncodeOptions tiles;
        tiles.tileSize = meta("tile_latent");
        tiles.tileOverlap = meta("tile_overlap");
        tiles.onProgress = record;
        const auto tiled = encodeOrThrow(e, video, tiles);
        // 6 x 6 latent cells in tiles of 5 overlapping by 2: 2 x 2 tiles, reported one by one.
        VT_COMPARE(progress.size(), std::size_t{4});
        for (std::size_t i = 0; i < progress.size(); ++i)
            VT_CHECK(progress[i].first == static_cast<std::int64_t>(i + 1) && progress[i].second == 4);

        ltx2::VideoEncodeOptions chunks;
        chunks.chunkFrames = meta("chunk_frames");
        chunks.chunkOverlap = meta("chunk_overlap");
        const auto chunked = encodeOrThrow(e, video, chunks);

        auto both = tiles;
        both.chunkFrames = chunks.chunkFrames;
        both.chunkOverlap = chunks.chunkOverlap;
        progress.clear();
        const auto tiledChunked = encodeOrThrow(e, video, both);
        // 6 latent frames in chunks of 5 overlapping by 3: 2 chunks of 4 tiles.
        VT_COMPARE(progress.size(), std::size_t{8});
        VT_CHECK(progress.back() == (std::pair<std::int64_t, std::int64_t>{8, 8}));

        const double tiledErr = maxAbsDiff(tiled, tensorOf(set, "expected.tiled"));
        const double chunkedErr = maxAbsDiff(chunked, tensorOf(set, "expected.chunked"));
        const double bothErr = maxAbsDiff(tiledChunked, tensorOf(set, "expected.tiled_chunked"));
        std::printf("   %s encode vs diffusers: untiled %.2e, tiles %.2e (tiled_encode), chunks %.2e (_temporal_tiled_encode), both %.2e\n",
            v.c_str(), plainErr, tiledErr, chunkedErr, bothErr);
        VT_CHECK(plainErr <= kTolerance && tiledErr <= kTolerance && chunkedErr <= kTolerance && bothErr <= kTolerance);
        std::printf("   %s encode vs untiled (mean / max): tiles %.4f / %.3f, chunks %.4f / %.3f, both %.4f / %.3f (|z| max %.3f)\n",
            v.c_str(), meanAbsDiff(tiled, untiled), maxAbsDiff(tiled, untiled), meanAbsDiff(chunked, untiled), maxAbsDiff(chunked, untiled),
            meanAbsDiff(tiledChunked, untiled), maxAbsDiff(tiledChunked, untiled), untiled.abs().max().item<double>());
        // The case must exercise the blending: each variant differs from untiled.
        VT_CHECK(maxAbsDiff(tiled, untiled) > 1e-3 && maxAbsDiff(chunked, untiled) > 1e-3);

        // Tiles and chunks as large as the latent are one plain encode.
        ltx2::VideoEncodeOptions whole;
        whole.tileSize = 64;
        whole.tileOverlap = 8;
        whole.chunkFrames = 64;
        whole.chunkOverlap = 8;
        VT_CHECK(at::equal(encodeOrThrow(e, video, whole), plain));
    }
}

VT_TEST(encoderCancellationAndBadInputsAreErrors)
{
    const auto set = readCase(versionDir("23") / "encode_tiling.safetensors");
    const auto& video = tensorOf(set, "video");
    const auto& e = encoder("23", "diffusers");

    std::stop_source before;
    before.request_stop();
    ltx2::VideoEncodeOptions options;
    options.stop = before.get_token();
    auto out = e.encode(video, options);
    VT_CHECK(!out.ok() && out.error().code == ErrorCode::Cancelled);

    std::stop_source during;
    int calls = 0;
    options.stop = during.get_token();
    options.tileSize = 5;
    options.tileOverlap = 2;
    options.onProgress = [&](std::int64_t, std::int64_t) {
        ++calls;
        during.request_stop();
    };
    out = e.encode(video, options);
    VT_CHECK(!out.ok() && out.error().code == ErrorCode::Cancelled);
    VT_COMPARE(calls, 1);

    auto expectInvalid = [&](const at::Tensor& input, const std::string& words, const ltx2::VideoEncodeOptions& o = {}) {
        const auto r = e.encode(input, o);
        VT_CHECK(!r.ok() && r.error().code == ErrorCode::InvalidArgument);
        if (!r.ok()) {
            std::printf("   %s\n", r.error().message.c_str());
            VT_CHECK_MSG(r.error().message.find(words) != std::string::npos, r.error().message);
        }
    };
    const auto clip = video.narrow(2, 0, 9).narrow(3, 0, 64).narrow(4, 0, 64);
    expectInvalid(clip.narrow(2, 0, 8), "8 frames");  // F not 8k + 1
    expectInvalid(clip.narrow(3, 0, 48), "48 x 64 pixels");  // H not a multiple of 32
    expectInvalid(clip.narrow(4, 0, 40), "64 x 40 pixels");
    expectInvalid(at::cat({clip, clip.narrow(1, 0, 1)}, 1), "4 channels");
    expectInvalid(clip.squeeze(0).narrow(1, 0, 1).squeeze(1), "[B, C, F, H, W]");
    expectInvalid(clip.to(at::kInt), "floating point");
    ltx2::VideoEncodeOptions badChunks;
    badChunks.chunkFrames = 3;
    badChunks.chunkOverlap = 0;
    expectInvalid(clip, "chunk overlap", badChunks);
    ltx2::VideoEncodeOptions badTiles;
    badTiles.tileSize = 2;
    badTiles.tileOverlap = 2;
    expectInvalid(clip, "tile overlap", badTiles);
}

VT_TEST(theEncoderLoadNeedsExactlyTheEncoderTensors)
{
    auto full = readCase(versionDir("23") / "single.safetensors");
    const test::ScratchDir scratch("vireo_ltx2vae_enc_");
    const auto& dir = scratch.path;
    auto write = [&](const char* name, const std::map<std::string, at::Tensor>& tensors, bool metadata = true) {
        VT_CHECK(tensorfile::writeSafetensors(dir / name, tensors, metadata ? full.metadata : std::map<std::string, std::string>{}).ok());
        return openWeights({dir / name});
    };
    const auto set = readCase(versionDir("23") / "encode_video.safetensors");
    const auto reference = encodeOrThrow(encoder("23", "single"), tensorOf(set, "video"));

    // A decoder-only file decodes but cannot encode, and says why.
    std::map<std::string, at::Tensor> decoderOnly, encoderOnly;
    for (const auto& [name, t] : full.tensors)
        (name.rfind("vae.encoder.", 0) == 0 ? encoderOnly : decoderOnly).emplace(name, t);
    auto r = ltx2::VideoEncoder::load(write("decoder.safetensors", decoderOnly));
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::NotFound);
    VT_CHECK_MSG(!r.ok() && r.error().message.find("holds no video VAE encoder") != std::string::npos
            && r.error().message.find("image-to-video needs the full VAE") != std::string::npos,
        (r.ok() ? "" : r.error().message));
    VT_CHECK(ltx2::VideoDecoder::load(openWeights({dir / "decoder.safetensors"})).ok());

    // The encoder (with the statistics) needs no decoder, with or without the config.
    for (const auto& [name, t] : full.tensors)
        if (name.rfind("vae.per_channel_statistics.", 0) == 0)
            encoderOnly.emplace(name, t);
    for (const bool metadata : {true, false}) {
        r = ltx2::VideoEncoder::load(write(metadata ? "encoder.safetensors" : "encoder_noconfig.safetensors", encoderOnly, metadata));
        VT_CHECK_MSG(r.ok(), (r.ok() ? "" : r.error().message));
        if (r.ok())
            VT_CHECK(at::equal(encodeOrThrow(*r, tensorOf(set, "video")), reference));
    }

    // A missing encoder tensor fails the load and is named in diffusers' name.
    auto missing = full.tensors;
    VT_CHECK(missing.erase("vae.encoder.down_blocks.8.res_blocks.0.conv2.conv.bias") == 1);
    r = ltx2::VideoEncoder::load(write("missing.safetensors", missing));
    VT_CHECK(!r.ok());
    VT_CHECK_MSG(!r.ok() && r.error().message.find("encoder.mid_block.resnets.0.conv2.conv.bias") != std::string::npos,
        (r.ok() ? "" : r.error().message));
    // An unknown encoder key fails it too, and the decoder does not care.
    auto extra = full.tensors;
    extra.emplace("vae.encoder.down_blocks.2.res_blocks.0.conv3.conv.weight", at::zeros({8, 8, 3, 3, 3}));
    r = ltx2::VideoEncoder::load(write("extra.safetensors", extra));
    VT_CHECK(!r.ok());
    VT_CHECK_MSG(!r.ok() && r.error().message.find("encoder.down_blocks.1.resnets.0.conv3.conv.weight") != std::string::npos,
        (r.ok() ? "" : r.error().message));
    VT_CHECK(ltx2::VideoDecoder::load(openWeights({dir / "extra.safetensors"})).ok());
    // A mis-shaped downsampler is caught before any weight is read.
    auto misshaped = full.tensors;
    misshaped["vae.encoder.down_blocks.5.conv.conv.weight"] = at::zeros({4, 8, 3, 3, 3});
    r = ltx2::VideoEncoder::load(write("misshaped.safetensors", misshaped));
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::InvalidFormat);
    VT_CHECK_MSG(!r.ok() && r.error().message.find("encoder.down_blocks.2.downsamplers.0.conv.conv.weight") != std::string::npos,
        (r.ok() ? "" : r.error().message));

    // encoder_blocks this port cannot map fail the encoder, naming the block, but not the decoder.
    auto metadata = full.metadata;
    auto& config = metadata.at("config");
    const auto at = config.find("compress_time_res");
    VT_CHECK(at != std::string::npos);
    config.replace(at, std::string("compress_time_res").size(), "compress_all_x_y");
    VT_CHECK(tensorfile::writeSafetensors(dir / "oddencoder.safetensors", full.tensors, metadata).ok());
    const auto odd = openWeights({dir / "oddencoder.safetensors"});
    r = ltx2::VideoEncoder::load(odd);
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::Unsupported);
    VT_CHECK_MSG(!r.ok() && r.error().message.find("compress_all_x_y") != std::string::npos, (r.ok() ? "" : r.error().message));
    VT_CHECK(ltx2::VideoDecoder::load(odd).ok());
}

VT_TEST(encoderConfigsThatDoNotFitAreRefused)
{
    const auto weights = openWeights(layoutPaths("20", "single"));
    const auto reference = encoder("20", "diffusers").config();
    ltx2::VideoEncoderLoadOptions options;
    auto refused = [&](const ltx2::VideoVaeConfig& c, ErrorCode code, const std::string& words) {
        options.config = c;
        const auto r = ltx2::VideoEncoder::load(weights, options);
        VT_CHECK(!r.ok() && r.error().code == code);
        VT_CHECK_MSG(!r.ok() && r.error().message.find(words) != std::string::npos, (r.ok() ? "" : r.error().message));
    };
    auto c = reference;
    c.encoderLayersPerBlock[1] += 1;  // one more resnet in down block 1 than stored
    refused(c, ErrorCode::InvalidFormat, "encoder.down_blocks.1.resnets");
    c = reference;
    c.encoderBlockOutChannels[2] = 12;  // a width the spatiotemporal downsampler cannot group
    refused(c, ErrorCode::InvalidFormat, "inconsistent");
    c = reference;
    c.downsampleType[0] = "temporal";  // the stored downsampler writes 2 channels, a temporal one 4
    c.spatialCompressionRatio.reset();  // (else the changed compression is refused first)
    c.temporalCompressionRatio.reset();
    refused(c, ErrorCode::InvalidFormat, "encoder.down_blocks.0.downsamplers.0.conv.conv.weight");
    c = reference;
    c.downsampleType[0] = "conv";
    refused(c, ErrorCode::Unsupported, "conv");
    c = reference;
    c.encoderSpatialPaddingMode = "circular";
    refused(c, ErrorCode::Unsupported, "circular");

    // Non-causal and reflection-padded encodes follow the config (no diffusers reference for
    // the padding: the published encoders all pad with zeros).
    const auto set = readCase(versionDir("20") / "encode_video.safetensors");
    const auto& video = tensorOf(set, "video");
    const auto causal = encodeOrThrow(encoder("20", "diffusers"), video);
    c = reference;
    c.encoderCausal = false;
    options.config = c;
    auto r = ltx2::VideoEncoder::load(weights, options);
    VT_CHECK(r.ok());
    ltx2::VideoEncodeOptions explicitCausal;
    explicitCausal.causal = true;
    VT_CHECK(r.ok() && at::equal(encodeOrThrow(*r, video, explicitCausal), causal));
    VT_CHECK(r.ok() && maxAbsDiff(encodeOrThrow(*r, video), causal) > 1e-3);
}

VT_TEST(bfloat16EncodeStaysClose)
{
    const auto set = readCase(versionDir("23") / "encode_video.safetensors");
    ltx2::VideoEncoderLoadOptions options;
    options.dtype = at::kBFloat16;
    auto e = ltx2::VideoEncoder::load(openWeights(layoutPaths("23", "diffusers")), options);
    VT_CHECK_MSG(e.ok(), (e.ok() ? "" : e.error().message));
    if (!e.ok())
        return;
    const auto out = encodeOrThrow(*e, tensorOf(set, "video"));
    VT_CHECK(out.scalar_type() == at::kFloat);
    const double err = maxAbsDiff(out, tensorOf(set, "expected.latents"));
    std::printf("   bf16 encode max abs %.2e (|z| max %.3f)\n", err, tensorOf(set, "expected.latents").abs().max().item<double>());
    VT_CHECK(err <= 0.05);
}

// --- LTX-2.5's diffusion video decoder (tests/fixtures/make_ltx2_diffdec_fixtures.py) ---

namespace {

fs::path diffDir()
{
    return test::fixturesRoot() / "ltx2diffdec";
}

const ltx2::DiffusionDecoder& diffusionDecoder(const std::string& which)
{
    static std::map<std::string, ltx2::DiffusionDecoder> cache;
    if (auto it = cache.find(which); it != cache.end())
        return it->second;
    // "a": the diffusers pipeline folder (model_index.json + diffusion_decoder/); "v": the
    // component folder given on its own.
    const auto path = which == "a" ? diffDir() / "diffusers" : diffDir() / "v" / "diffusion_decoder";
    auto model = ltx2::DiffusionDecoder::load(openWeights({path}));
    if (!model)
        throw std::runtime_error(which + ": " + model.error().message);
    return cache.emplace(which, std::move(*model)).first->second;
}

template <typename T>
T orThrow(Result<T> r)
{
    if (!r)
        throw std::runtime_error(r.error().message);
    return std::move(*r);
}

// Noise handed out in the order the reference drew it, each checked against the shape asked.
struct RecordedNoise {
    std::deque<at::Tensor> draws;
    at::Tensor operator()(const std::vector<std::int64_t>& shape)
    {
        if (draws.empty())
            throw std::runtime_error("the decode drew more noise than the reference");
        auto t = draws.front();
        draws.pop_front();
        if (t.sizes() != at::IntArrayRef(shape))
            throw std::runtime_error("the decode drew noise of another shape than the reference");
        return t;
    }
};

}  // namespace

VT_TEST(neighborhoodAttentionMatchesTheReference)
{
    const auto set = readCase(diffDir() / "case.safetensors");
    const auto cases = nlohmann::json::parse(test::readText(diffDir() / "na_cases.json"));
    int checked = 0;
    for (const auto& c : cases.at("cases")) {
        const auto name = c.at("name").get<std::string>();
        const auto kernel = c.at("kernel").get<std::vector<std::int64_t>>();
        const ltx2::Extent3 k{kernel[0], kernel[1], kernel[2]};
        const auto& q = tensorOf(set, name + ".q");
        const auto& expected = tensorOf(set, name + ".out");
        // The default blocks, one-cell blocks, uneven blocks and one block over the whole grid
        // must all give the reference's windows.
        for (const ltx2::Extent3 block : {ltx2::Extent3{}, ltx2::Extent3{1, 1, 1}, ltx2::Extent3{2, 3, 4}, ltx2::Extent3{64, 64, 64}}) {
            const auto out = ltx2::neighborhoodAttention(q, tensorOf(set, name + ".k"), tensorOf(set, name + ".v"), k, block);
            const double err = maxAbsDiff(out, expected);
            VT_CHECK_MSG(err <= 1e-5,
                name + " block " + std::to_string(block[0]) + "x" + std::to_string(block[1]) + "x" + std::to_string(block[2]) + ": "
                    + std::to_string(err));
        }
        ++checked;
    }
    VT_CHECK(checked == 4);
}

VT_TEST(rotaryEmbeddingMatchesTheReference)
{
    const auto set = readCase(diffDir() / "case.safetensors");
    for (const char* name : {"rope8", "rope16"}) {
        const double err =
            maxAbsDiff(ltx2::rotateNeighborhood3d(tensorOf(set, std::string(name) + ".in")), tensorOf(set, std::string(name) + ".out"));
        VT_CHECK_MSG(err <= 1e-6, std::string(name) + ": " + std::to_string(err));
    }
}

VT_TEST(diffusionDecoderMatchesDiffusers)
{
    const auto set = readCase(diffDir() / "case.safetensors");
    const auto& d = diffusionDecoder("a");
    const auto& latents = tensorOf(set, "latents");
    const auto features = orThrow(d.stagesOneToThree(latents));
    VT_CHECK_MSG(
        maxAbsDiff(features, tensorOf(set, "expected.stages13")) <= kTolerance, maxAbsDiff(features, tensorOf(set, "expected.stages13")));
    const auto context = orThrow(d.stageFour(features));
    VT_CHECK_MSG(
        maxAbsDiff(context, tensorOf(set, "expected.context")) <= kTolerance, maxAbsDiff(context, tensorOf(set, "expected.context")));
    const auto& xT = tensorOf(set, "x_t");
    const auto video = orThrow(d.denoise(context, xT));
    const auto& expected = tensorOf(set, "expected.video");
    const double err = maxAbsDiff(video, expected);
    std::printf(
        "   diffusion decode %s, max abs %.2e (|y| max %.3f)\n", c10::str(video.sizes()).c_str(), err, expected.abs().max().item<double>());
    VT_CHECK_MSG(err <= kTolerance, err);
    // The frames and pixels the rest of the pipeline plans by: 8 (F - 1) + 1 at 16x here.
    VT_CHECK(
        video.size(2) == 8 * (latents.size(2) - 1) + 1 && video.size(3) == 16 * latents.size(3) && video.size(4) == 16 * latents.size(4));

    const double steps3 = maxAbsDiff(orThrow(d.denoise(context, xT, 3)), tensorOf(set, "expected.video_x0_steps3"));
    VT_CHECK_MSG(steps3 <= kTolerance, steps3);

    // decode() drawing its own noise: a CPU generator seeded as torch.Generator().manual_seed.
    auto generator = at::make_generator<at::CPUGeneratorImpl>(1234);
    ltx2::DiffusionDecodeOptions options;
    options.noise = [&](const std::vector<std::int64_t>& shape) {
        return at::randn(shape, generator, at::TensorOptions().dtype(at::kFloat));
    };
    std::int64_t progress = 0;
    options.onProgress = [&](std::int64_t done, std::int64_t total) { progress = done * 100 + total; };
    const double seeded = maxAbsDiff(orThrow(d.decode(latents, options)), tensorOf(set, "expected.decode_seed1234"));
    VT_CHECK_MSG(seeded <= kTolerance, seeded);
    VT_CHECK(progress == 101);

    // The v-prediction decoder with its configured 3 steps.
    const auto& b = diffusionDecoder("v");
    VT_CHECK(!b.config().predictsX0 && b.config().steps == 3);
    const auto bContext = orThrow(b.stageFour(orThrow(b.stagesOneToThree(tensorOf(set, "b.latents")))));
    const double v = maxAbsDiff(orThrow(b.denoise(bContext, tensorOf(set, "b.x_t"))), tensorOf(set, "b.expected.video"));
    VT_CHECK_MSG(v <= kTolerance, v);

    // The statistics it carries, for a decode without the conv VAE.
    const auto& normalized = tensorOf(set, "normalized");
    const auto denormalized =
        normalized * d.latentsStd().view({1, -1, 1, 1, 1}) / d.config().scalingFactor + d.latentsMean().view({1, -1, 1, 1, 1});
    VT_CHECK(maxAbsDiff(denormalized, tensorOf(set, "expected.denormalized")) <= 1e-6);
}

VT_TEST(tiledDiffusionDecodeMatchesDiffusers)
{
    const auto set = readCase(diffDir() / "case.safetensors");
    const auto tiles = nlohmann::json::parse(test::readText(diffDir() / "tiled.json"));
    ltx2::DiffusionDecodeTiling tiling;
    tiling.tileHeight = tiles["tile_sample_min_height"].get<std::int64_t>();
    tiling.tileWidth = tiles["tile_sample_min_width"].get<std::int64_t>();
    tiling.tileFrames = tiles["tile_sample_min_num_frames"].get<std::int64_t>();
    tiling.strideHeight = tiles["tile_sample_stride_height"].get<std::int64_t>();
    tiling.strideWidth = tiles["tile_sample_stride_width"].get<std::int64_t>();
    tiling.strideFrames = tiles["tile_sample_stride_num_frames"].get<std::int64_t>();
    for (const std::string prefix : {"", "b."}) {
        RecordedNoise noise;
        for (int i = 0; set.find(prefix + "tiled.noise." + std::to_string(i)); ++i)
            noise.draws.push_back(tensorOf(set, prefix + "tiled.noise." + std::to_string(i)));
        const auto drawn = noise.draws.size();
        VT_CHECK(drawn >= 1);
        ltx2::DiffusionDecodeOptions options;
        options.noise = std::ref(noise);
        options.tiling = tiling;
        std::int64_t tilesDone = 0, tilesTotal = 0;
        options.onProgress = [&](std::int64_t done, std::int64_t total) {
            tilesDone = done;
            tilesTotal = total;
        };
        const auto& d = diffusionDecoder(prefix.empty() ? "a" : "v");
        const auto video = orThrow(d.decode(tensorOf(set, "tiled.latents"), options));
        const auto& expected = tensorOf(set, prefix + "expected.tiled");
        const double err = maxAbsDiff(video, expected);
        std::printf(
            "   %stiled decode: %lld tiles, %zu draws, max abs %.2e\n", prefix.c_str(), static_cast<long long>(tilesTotal), drawn, err);
        VT_CHECK_MSG(err <= kTolerance, err);
        VT_CHECK(noise.draws.empty());
        VT_CHECK(tilesTotal > 1 && tilesDone == tilesTotal);
    }
}

VT_TEST(diffusionDecoderRefusesWhatItCannotRun)
{
    const test::ScratchDir scratch("vireo_ltx2diffdec_");
    const auto source = diffDir() / "v" / "diffusion_decoder";
    const auto config = nlohmann::json::parse(test::readText(source / "config.json"));
    const auto weights = readCase(source / "diffusion_pytorch_model.safetensors");
    auto folder = [&](const std::string& name, const nlohmann::json& c, const std::map<std::string, at::Tensor>& tensors) {
        const auto dir = scratch.path / name;
        fs::create_directories(dir);
        std::ofstream(dir / "config.json") << c.dump();
        VT_CHECK(tensorfile::writeSafetensors(dir / "diffusion_pytorch_model.safetensors", tensors, {}).ok());
        return dir;
    };
    auto refused = [&](const fs::path& dir, const std::string& needle) {
        auto w = ltx2::Ltx2Weights::open({dir});
        VT_CHECK(w.ok());
        if (!w.ok())
            return;
        auto r = ltx2::DiffusionDecoder::load(*w);
        VT_CHECK(!r.ok());
        if (!r.ok())
            VT_CHECK_MSG(r.error().message.find(needle) != std::string::npos, r.error().message);
    };
    auto damaged = config;
    damaged["decoder_stage_channels"][1] = 24;
    refused(folder("channels", damaged, weights.tensors), "is not stage 0's");
    damaged = config;
    damaged["decoder_stage_kernels"] = nlohmann::json::array({{3, 3, 3}});
    refused(folder("kernels", damaged, weights.tensors), "disagree in length");
    damaged = config;
    damaged["decoder_head_dim"] = 12;
    refused(folder("headdim", damaged, weights.tensors), "decoder_head_dim");
    damaged = config;
    damaged["decoder_stage_depths"][0] = 1000000000;
    refused(folder("depth", damaged, weights.tensors), "decoder_stage_depths");
    damaged = config;
    damaged["temporal_compression_ratio"] = 4;
    refused(folder("ratio", damaged, weights.tensors), "compression ratios");
    damaged = config;
    damaged["decoder_model_output_type"] = "epsilon";
    refused(folder("type", damaged, weights.tensors), "decoder_model_output_type");
    auto missing = weights.tensors;
    VT_CHECK(missing.erase("decoder.diff_blocks.1.mlp.w_gate.weight") == 1);
    refused(folder("missing", config, missing), "decoder.diff_blocks.1.mlp.w_gate.weight");
    auto extra = weights.tensors;
    extra.emplace("decoder.diff_blocks.0.attn.to_qkv.weight", at::zeros({24, 8}));
    refused(folder("extra", config, extra), "to_qkv");

    // The stages' own check stays (a grid below a kernel is named, not crashed on).
    const auto& d = diffusionDecoder("a");
    auto tooSmall = d.stagesOneToThree(at::zeros({1, 8, 1, 1, 1}));
    VT_CHECK(!tooSmall.ok());
    if (!tooSmall.ok())
        VT_CHECK_MSG(tooSmall.error().message.find("too small") != std::string::npos, tooSmall.error().message);
    // A cancel stops a decode.
    ltx2::DiffusionDecodeOptions options;
    options.noise = [](const std::vector<std::int64_t>& shape) { return at::zeros(shape); };
    std::stop_source stop;
    stop.request_stop();
    options.stop = stop.get_token();
    auto cancelled = d.decode(tensorOf(readCase(diffDir() / "case.safetensors"), "latents"), options);
    VT_CHECK(!cancelled.ok() && cancelled.error().code == ErrorCode::Cancelled);
}

// Lightricks' video VAE files (make_ltx2_diffdec_fixtures.py single/): the same decoders in
// ltx-core's names, fused q/k/v, stored gates, the config embedded with ltx-core's names and
// defaults; the stand-alone file's bare prefixes and the single file's `vae.` ones.
VT_TEST(diffusionDecoderReadsLightricksFiles)
{
    const auto set = readCase(diffDir() / "case.safetensors");
    const auto& latents = tensorOf(set, "latents");
    const auto& xT = tensorOf(set, "x_t");
    for (const char* file : {"vae", "gated", "monolith"}) {
        const auto weights = openWeights({diffDir() / "single" / (std::string(file) + ".safetensors")});
        VT_CHECK_MSG(weights.unknown().empty(), file);
        auto d = ltx2::DiffusionDecoder::load(weights);
        VT_CHECK_MSG(d.ok(), std::string(file) + ": " + (d.ok() ? "" : d.error().message));
        if (!d.ok())
            continue;
        VT_CHECK(d->config().predictsX0 && d->config().steps == 1 && d->config().spatialRatio == 16 && d->config().temporalRatio == 8);
        const auto context = orThrow(d->stageFour(orThrow(d->stagesOneToThree(latents))));
        const double err = maxAbsDiff(orThrow(d->denoise(context, xT)), tensorOf(set, "expected.video"));
        std::printf("   %s: max abs %.2e\n", file, err);
        VT_CHECK_MSG(err <= kTolerance, std::string(file) + ": " + std::to_string(err));
        VT_CHECK(at::equal(d->latentsMean(), diffusionDecoder("a").latentsMean()));
        // The statistics serve the conv side too (the encoder's and the upsamplers' latents).
        VT_CHECK(weights.find(ltx2::Part::VideoVae, "latents_mean") != nullptr);
        VT_CHECK(weights.tensors(ltx2::Part::VideoVae).count("decoder.conv_in.weight") == 0);
    }
    // The v-prediction decoder whose config leaves model_output_type to ltx-core's default.
    auto v = ltx2::DiffusionDecoder::load(openWeights({diffDir() / "single" / "v.safetensors"}));
    VT_CHECK_MSG(v.ok(), (v.ok() ? "" : v.error().message));
    if (v.ok()) {
        VT_CHECK(!v->config().predictsX0 && v->config().steps == 3);
        const auto context = orThrow(v->stageFour(orThrow(v->stagesOneToThree(tensorOf(set, "b.latents")))));
        const double err = maxAbsDiff(orThrow(v->denoise(context, tensorOf(set, "b.x_t"))), tensorOf(set, "b.expected.video"));
        VT_CHECK_MSG(err <= kTolerance, err);
    }
    // A fused q/k/v of the wrong size is refused by name.
    auto broken = ltx2::DiffusionDecoder::load(openWeights({diffDir() / "single" / "broken_qkv.safetensors"}));
    VT_CHECK(!broken.ok());
    if (!broken.ok())
        VT_CHECK_MSG(broken.error().message.find("diff_blocks.0.attn.qkv") != std::string::npos, broken.error().message);
}

VT_TEST(smallVideosArePaddedAsLtxCoreDoes)
{
    const auto& d = diffusionDecoder("a");
    // The tiny decoder needs (2, 3, 3) latents: below that diffusers refuses; the frames are
    // padded with the last one, rows and columns with both edges, and the pixels cropped back.
    const auto floor = ltx2::minimumLatentExtent(d.config());
    VT_CHECK(floor == (ltx2::Extent3{2, 3, 3}));
    // The shipped decoder's floor: 17 frames, 224 px.
    VT_CHECK(ltx2::minimumLatentExtent(ltx2::DiffusionDecoderConfig{}) == (ltx2::Extent3{3, 7, 7}));
    const auto latents = tensorOf(readCase(diffDir() / "case.safetensors"), "latents").narrow(2, 0, 1).narrow(3, 0, 2).narrow(4, 0, 1);
    auto noise = [](const std::vector<std::int64_t>& shape) {
        auto g = at::make_generator<at::CPUGeneratorImpl>(7);
        return at::randn(shape, g, at::TensorOptions().dtype(at::kFloat));
    };
    ltx2::DiffusionDecodeOptions options;
    options.noise = noise;
    const auto small = orThrow(d.decode(latents, options));
    VT_CHECK(small.sizes() == at::IntArrayRef({1, 3, 1, 32, 16}));
    // W 1 -> 3: one column before, one after; H 2 -> 3: one row after; F 1 -> 2: the last repeated.
    const auto padded = at::cat({latents.narrow(4, 0, 1), latents, latents.narrow(4, 0, 1)}, 4);
    const auto padded2 = at::cat({padded, padded.narrow(3, 1, 1)}, 3);
    const auto padded3 = at::cat({padded2, padded2}, 2);
    const auto whole = orThrow(d.decode(padded3, options));
    VT_CHECK(maxAbsDiff(small, whole.narrow(2, 0, 1).narrow(3, 0, 32).narrow(4, 16, 16)) == 0.0);
}

VT_MAIN("TestLtx2Vae")