#include "inference/bench/stagebench.h"

#include "inference/models/ltx2/ltx2diffusiondecoder.h"
#include "inference/models/ltx2/ltx2upsampler.h"
#include "inference/models/ltx2/ltx2videovae.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/tensorfile/tensorset.h"
#include "inference/bench/benchdevice.h"
#include "inference/util/device.h"
#include "inference/util/heap.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace vireo::bench {

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::int64_t> shapeOf(const at::Tensor& t)
{
    return std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end());
}

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string s;
    for (auto d : shape)
        s += (s.empty() ? "" : "x") + std::to_string(d);
    return s;
}

// The bench's random inputs, drawn in float32 on the CPU from their own generators so a Python
// driver gets the same values from torch.Generator().manual_seed(seed + k) and torch.rand/randn.
at::Tensor uniformVideo(std::vector<std::int64_t> shape, std::uint64_t seed)
{
    auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
    return at::rand(shape, g, at::TensorOptions().dtype(at::kFloat)) * 2 - 1;
}

at::Tensor normalLatent(std::vector<std::int64_t> shape, std::uint64_t seed)
{
    auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
    return at::randn(shape, g, at::TensorOptions().dtype(at::kFloat));
}

struct Measured {
    at::Tensor output;  // of the last run
    std::string failure;
};

// The op timed (timeRuns) into its row, with the checks of its last output.
Measured measure(StageRow& row, c10::Device device, int repeats, const std::function<Result<at::Tensor>()>& op)
{
    Measured m;
    auto t = timeRuns(device, repeats, op);
    if (!t) {
        m.failure = t.error().message;
        return m;
    }
    row.seconds = t->seconds;
    row.medianSeconds = t->medianSeconds;
    row.peakBytes = t->peakBytes;
    row.peakTotalBytes = t->peakTotalBytes;
    m.output = std::move(t->output);
    const auto f = m.output.to(at::kFloat);
    row.outputShape = shapeOf(f);
    row.finite = at::isfinite(f).all().item<bool>();
    row.sum = f.sum(at::kDouble).item<double>();
    row.absMean = f.abs().mean(at::kDouble).item<double>();
    return m;
}

// The models the stages run, all loaded (and each load timed into the result) before any stage is timed.
struct StageModels {
    c10::Device device;
    c10::ScalarType dtype;
    ltx2::VideoEncoder encoder;
    at::Tensor latentMean, latentStd;
    ltx2::LatentUpsampler upsampler;
    ltx2::VideoDecoder decoder;
};

// Each load is timed to completion (the device synchronized), as the stages are; `weights` must outlive the models.
Result<StageModels> loadStageModels(
    const ltx2::Ltx2Weights& weights, const StageBenchOptions& options, c10::Device device, c10::ScalarType dtype, StageBenchResult& r)
{
    auto start = Clock::now();
    ltx2::VideoEncoderLoadOptions encoderOptions;
    encoderOptions.device = device;
    encoderOptions.dtype = dtype;
    auto encoder = ltx2::VideoEncoder::load(weights, encoderOptions);
    if (!encoder)
        return encoder.error();
    deviceSynchronize(device);
    r.encoderLoadSeconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.encoderResidentBytes = encoder->residentBytes();
    // The per-channel statistics upsampleNormalized works with, as the decoder reads them.
    ltx2::WeightTaker statistics(weights, ltx2::Part::VideoVae, device, at::kFloat);
    statistics.ignorePrefix("");
    const auto latentMean = statistics.tensor("latents_mean");
    const auto latentStd = statistics.tensor("latents_std");
    if (auto done = statistics.finish(); !done)
        return done.error();

    start = Clock::now();
    ltx2::LatentUpsamplerLoadOptions upOptions;
    upOptions.device = device;
    upOptions.dtype = dtype;
    auto upsampler = ltx2::LatentUpsampler::load(options.upsamplerPath, upOptions);
    if (!upsampler)
        return upsampler.error();
    deviceSynchronize(device);
    r.upsamplerLoadSeconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.upsamplerResidentBytes = upsampler->residentBytes();
    r.upsampler = ltx2::describeLatentUpsampler(upsampler->config());

    start = Clock::now();
    ltx2::VideoDecoderLoadOptions decoderOptions;
    decoderOptions.device = device;
    decoderOptions.dtype = dtype;
    auto decoder = ltx2::VideoDecoder::load(weights, decoderOptions);
    if (!decoder)
        return decoder.error();
    deviceSynchronize(device);
    r.decoderLoadSeconds = std::chrono::duration<double>(Clock::now() - start).count();
    r.decoderResidentBytes = decoder->residentBytes();
    return StageModels{device, dtype, std::move(*encoder), latentMean, latentStd, std::move(*upsampler), std::move(*decoder)};
}

// The latent grid every stage works on, which the video size gives once the models agree and the size fits them.
struct LatentGrid {
    std::int64_t channels = 0, latentFrames = 0, cellsH = 0, cellsW = 0;
};

// The models are checked against each other and the size against them before any stage runs, so a mismatch is said plainly.
Result<LatentGrid> latentGrid(const StageModels& m, const StageBenchOptions& options, const std::string& upsamplerName)
{
    const auto channels = m.encoder.config().latentChannels;
    const auto spatial = m.encoder.spatialScale();
    const auto temporal = m.encoder.temporalScale();
    if (m.upsampler.config().inChannels != channels)
        return makeError(ErrorCode::InvalidArgument,
            "bench stages: the upsampler works on " + std::to_string(m.upsampler.config().inChannels) + " latent channels, the VAE has "
                + std::to_string(channels));
    if (m.upsampler.spatialScale() != 2.0 || m.upsampler.temporalScale() != 1)
        return makeError(
            ErrorCode::InvalidArgument, "bench stages: the two-stage path needs an x2 spatial upsampler, not " + upsamplerName);
    if (m.decoder.config().latentChannels != channels || m.decoder.spatialScale() != spatial || m.decoder.temporalScale() != temporal)
        return makeError(ErrorCode::InvalidArgument,
            "bench stages: the VAE's decoder takes " + std::to_string(m.decoder.config().latentChannels) + " channels at 1/"
                + std::to_string(m.decoder.spatialScale()) + " and 1/" + std::to_string(m.decoder.temporalScale()) + ", its encoder gives "
                + std::to_string(channels) + " at 1/" + std::to_string(spatial) + " and 1/" + std::to_string(temporal));
    if (options.width % (2 * spatial) || options.height % (2 * spatial) || (options.frames - 1) % temporal)
        return makeError(ErrorCode::InvalidArgument,
            "bench stages: --size needs W and H multiples of " + std::to_string(2 * spatial)
                + " (stage 1 runs at half size) and F = " + std::to_string(temporal) + "k + 1");
    LatentGrid g;
    g.channels = channels;
    g.latentFrames = (options.frames - 1) / temporal + 1;
    g.cellsH = options.height / spatial;
    g.cellsW = options.width / spatial;
    return g;
}

// The four rows in the order the pipeline runs them, each timed by `measure` into r.rows (and its output kept for outputsPath).
Result<void> runStages(const StageBenchOptions& options, const StageModels& m, const LatentGrid& g, StageBenchResult& r,
    std::map<std::string, at::Tensor>& outputs)
{
    const auto device = m.device;
    const auto dtype = m.dtype;
    const auto channels = g.channels, latentFrames = g.latentFrames, cellsH = g.cellsH, cellsW = g.cellsW;
    auto run = [&](StageRow row, const at::Tensor& input, const std::function<Result<at::Tensor>(const at::Tensor&)>& op) -> Result<void> {
        row.inputShape = shapeOf(input);
        auto measured = measure(row, device, options.repeats, [&] { return op(input); });
        if (!measured.failure.empty())
            return makeError(ErrorCode::Internal, "bench stages: " + row.name + ": " + measured.failure);
        if (!options.outputsPath.empty())
            outputs[row.name] = measured.output.to(at::kCPU, at::kFloat).contiguous();
        r.rows.push_back(std::move(row));
        return {};
    };

    // 1. Image-to-video's condition: one still at full size, encoded whole.
    {
        StageRow row;
        row.name = "encode_still";
        row.layout = "whole";
        const auto still = uniformVideo({1, 3, 1, options.height, options.width}, options.seed).to(device, dtype);
        if (auto done = run(row, still, [&](const at::Tensor& x) { return m.encoder.encode(x); }); !done)
            return done.error();
    }
    // 2. A clip, in the tiles and chunks Ltx2Pipeline's encodeConditions picks.
    {
        StageRow row;
        row.name = "encode_clip";
        ltx2::VideoEncodeOptions eo;
        if (options.frames > 1 && (cellsH > 16 || cellsW > 16)) {
            eo.tileSize = 16;
            eo.tileOverlap = 2;
        }
        if (options.frames > 1 && latentFrames > 8) {
            eo.chunkFrames = 8;
            eo.chunkOverlap = 2;
        }
        row.layout = eo.tileSize ? "tiles 16/2 cells" : "whole frames";
        row.layout += eo.chunkFrames ? ", chunks 8/2 latents" : ", all frames";
        const auto clip = uniformVideo({1, 3, options.frames, options.height, options.width}, options.seed + 1).to(device, dtype);
        if (auto done = run(row, clip, [&](const at::Tensor& x) { return m.encoder.encode(x, eo); }); !done)
            return done.error();
    }
    // 3. The two-stage path's x2 upsampling of the half-size stage-1 latent.
    {
        StageRow row;
        row.name = "upsample";
        row.layout = "whole";
        const auto low = normalLatent({1, channels, latentFrames, cellsH / 2, cellsW / 2}, options.seed + 2).to(device);
        if (auto done = run(row, low, [&](const at::Tensor& x) { return m.upsampler.upsampleNormalized(x, m.latentMean, m.latentStd); });
            !done)
            return done.error();
    }
    // 4. The final latent decoded to the video, tiled as Ltx2Pipeline's decode step tiles it
    //    (no temporal chunks there).
    {
        StageRow row;
        row.name = "decode";
        ltx2::VideoDecodeOptions dec;
        if (cellsH > 16 || cellsW > 16) {
            dec.tileSize = 16;
            dec.tileOverlap = 2;
        }
        row.layout = dec.tileSize ? "tiles 16/2 cells, all frames" : "whole";
        const auto latent = normalLatent({1, channels, latentFrames, cellsH, cellsW}, options.seed + 3).to(device, dtype);
        if (auto done = run(row, latent, [&](const at::Tensor& x) { return m.decoder.decode(x, dec); }); !done)
            return done.error();
    }
    return {};
}

// The result's header: the device, dtype, memory method, size and repeats the rows ran with.
Result<StageBenchResult> startResult(const StageBenchOptions& options, c10::Device device)
{
    if (options.repeats < 1 || options.width < 1 || options.height < 1 || options.frames < 1)
        return makeError(ErrorCode::InvalidArgument, "bench stages: size and repeats must be positive");
    StageBenchResult r;
    r.device = device.is_cuda() ? cudaDeviceSummary() : "cpu (" + std::to_string(at::get_num_threads()) + " threads)";
    r.dtype = options.dtype;
    r.memoryMethod = device.is_cuda() ? "CUDA caching allocator, peak above the allocation before the op"
                                      : "peak RSS growth over the warm-up run (lower bound)";
    r.width = options.width;
    r.height = options.height;
    r.frames = options.frames;
    r.repeats = options.repeats;
    return r;
}

}  // namespace

Result<StageBenchResult> benchStages(const StageBenchOptions& options)
{
    auto resolved = benchDeviceAndDtype("bench stages", options.device, options.dtype);
    if (!resolved)
        return resolved.error();
    const auto [device, dtype] = *resolved;
    auto started = startResult(options, device);
    if (!started)
        return started.error();
    auto& r = *started;

    try {
        auto weights = ltx2::Ltx2Weights::open({options.vaePath});
        if (!weights)
            return weights.error();
        auto models = loadStageModels(*weights, options, device, dtype, r);
        if (!models)
            return models.error();
        auto grid = latentGrid(*models, options, r.upsampler);
        if (!grid)
            return grid.error();
        const auto channels = grid->channels, latentFrames = grid->latentFrames, cellsH = grid->cellsH, cellsW = grid->cellsW;

        std::map<std::string, at::Tensor> outputs;
        if (auto done = runStages(options, *models, *grid, r, outputs); !done)
            return done.error();
        const std::vector<std::vector<std::int64_t>> expected{{1, channels, 1, cellsH, cellsW}, {1, channels, latentFrames, cellsH, cellsW},
            {1, channels, latentFrames, cellsH, cellsW},
            {1, models->decoder.config().outChannels, options.frames, options.height, options.width}};
        for (std::size_t i = 0; i < r.rows.size(); ++i)
            if (r.rows[i].outputShape != expected[i])
                return makeError(ErrorCode::Internal,
                    "bench stages: " + r.rows[i].name + " gave " + shapeText(r.rows[i].outputShape) + ", expected "
                        + shapeText(expected[i]));
        if (!options.outputsPath.empty())
            if (auto w = tensorfile::writeSafetensors(options.outputsPath, outputs); !w)
                return w.error();
    } catch (const std::exception& e) {
        return errorFromException(e, "bench stages", ErrorCode::Internal);
    }
    return r;
}

Result<StageBenchResult> benchDiffusionDecode(const StageBenchOptions& options)
{
    auto resolved = benchDeviceAndDtype("bench stages", options.device, options.dtype);
    if (!resolved)
        return resolved.error();
    const auto device = resolved->first;
    const auto dtype = resolved->second;
    auto started = startResult(options, device);
    if (!started)
        return started.error();
    auto& r = *started;
    try {
        auto weights = ltx2::Ltx2Weights::open({options.diffusionDecoderPath});
        if (!weights)
            return weights.error();
        const auto start = Clock::now();
        auto decoder = ltx2::DiffusionDecoder::load(*weights, device, dtype);
        if (!decoder)
            return decoder.error();
        r.decoderLoadSeconds = std::chrono::duration<double>(Clock::now() - start).count();
        r.decoderResidentBytes = decoder->residentBytes();
        const auto& c = decoder->config();
        if (options.width % c.spatialRatio || options.height % c.spatialRatio || (options.frames - 1) % c.temporalRatio)
            return makeError(ErrorCode::InvalidArgument,
                "bench stages: --size needs W and H multiples of " + std::to_string(c.spatialRatio)
                    + " and F = " + std::to_string(c.temporalRatio) + "k + 1");
        const auto latent = normalLatent({1, c.latentChannels, (options.frames - 1) / c.temporalRatio + 1, options.height / c.spatialRatio,
                                             options.width / c.spatialRatio},
            options.seed + 3);
        ltx2::DiffusionDecodeOptions o;
        o.tiling = ltx2::DiffusionDecodeTiling{};
        StageRow row;
        row.name = "diffusion_decode";
        row.inputShape = shapeOf(latent);
        const bool tiled =
            options.frames > o.tiling->tileFrames || options.height > o.tiling->tileHeight || options.width > o.tiling->tileWidth;
        row.layout = tiled ? "tiles 768/704 px, 80/56 frames" : "whole";
        const auto mean = decoder->latentsMean().to(device).view({1, -1, 1, 1, 1});
        const auto std = decoder->latentsStd().to(device).view({1, -1, 1, 1, 1});
        const auto input = latent.to(device);
        auto measured = measure(row, device, options.repeats, [&]() -> Result<at::Tensor> {
            auto generator = at::make_generator<at::CPUGeneratorImpl>(options.seed + 4);
            auto run = o;
            run.noise = [&](const std::vector<std::int64_t>& shape) {
                return at::randn(shape, generator, at::TensorOptions().dtype(at::kFloat));
            };
            return decoder->decode((input * std / c.scalingFactor + mean).to(dtype), run);
        });
        if (!measured.failure.empty())
            return makeError(ErrorCode::Internal, "bench stages: diffusion_decode: " + measured.failure);
        const std::vector<std::int64_t> expected{1, c.outChannels, options.frames, options.height, options.width};
        if (row.outputShape != expected)
            return makeError(ErrorCode::Internal,
                "bench stages: diffusion_decode gave " + shapeText(row.outputShape) + ", expected " + shapeText(expected));
        if (!options.outputsPath.empty())
            if (auto w =
                    tensorfile::writeSafetensors(options.outputsPath, {{row.name, measured.output.to(at::kCPU, at::kFloat).contiguous()}});
                !w)
                return w.error();
        r.rows.push_back(std::move(row));
    } catch (const std::exception& e) {
        return errorFromException(e, "bench stages", ErrorCode::Internal);
    }
    return r;
}

std::string formatStageBench(const StageBenchResult& r)
{
    std::ostringstream s;
    char line[320];
    std::snprintf(line, sizeof line, "bench stages: %lldx%lldx%lld, %s on %s, median of %d after a warm-up\n",
        static_cast<long long>(r.width), static_cast<long long>(r.height), static_cast<long long>(r.frames), r.dtype.c_str(),
        r.device.c_str(), r.repeats);
    s << line;
    if (r.rows.size() == 1 && r.rows.front().name == "diffusion_decode")
        std::snprintf(line, sizeof line, "  diffusion decoder loaded in %.2f s (%.1f MiB)\n", r.decoderLoadSeconds,
            static_cast<double>(r.decoderResidentBytes) / 1048576.0);
    else
        std::snprintf(line, sizeof line,
            "  encoder loaded in %.2f s (%.1f MiB), decoder in %.2f s (%.1f MiB), upsampler in %.2f s (%.1f MiB): %s\n",
            r.encoderLoadSeconds, static_cast<double>(r.encoderResidentBytes) / 1048576.0, r.decoderLoadSeconds,
            static_cast<double>(r.decoderResidentBytes) / 1048576.0, r.upsamplerLoadSeconds,
            static_cast<double>(r.upsamplerResidentBytes) / 1048576.0, r.upsampler.c_str());
    s << line;
    s << "  memory: " << r.memoryMethod << "\n";
    std::snprintf(line, sizeof line, "  %-13s %-20s %-20s %10s %11s %-38s %s\n", "stage", "input", "output", "median s", "peak MiB",
        "layout", "output check");
    s << line;
    for (const auto& row : r.rows) {
        char peak[32];
        if (row.peakBytes >= 0)
            std::snprintf(peak, sizeof peak, "%.1f", static_cast<double>(row.peakBytes) / 1048576.0);
        else
            std::snprintf(peak, sizeof peak, "n/a");
        std::snprintf(line, sizeof line, "  %-13s %-20s %-20s %10.4f %11s %-38s %s, sum %.6g, mean |x| %.6g\n", row.name.c_str(),
            shapeText(row.inputShape).c_str(), shapeText(row.outputShape).c_str(), row.medianSeconds, peak, row.layout.c_str(),
            row.finite ? "finite" : "NOT FINITE", row.sum, row.absMean);
        s << line;
    }
    return s.str();
}

std::string stageBenchJson(const StageBenchResult& r)
{
    nlohmann::json j;
    j["bench"] = "stages";
    j["device"] = r.device;
    j["dtype"] = r.dtype;
    j["size"] = {r.width, r.height, r.frames};
    j["repeats"] = r.repeats;
    j["memory_method"] = r.memoryMethod;
    j["encoder_load_seconds"] = r.encoderLoadSeconds;
    j["upsampler_load_seconds"] = r.upsamplerLoadSeconds;
    j["encoder_resident_bytes"] = r.encoderResidentBytes;
    j["upsampler_resident_bytes"] = r.upsamplerResidentBytes;
    j["decoder_load_seconds"] = r.decoderLoadSeconds;
    j["decoder_resident_bytes"] = r.decoderResidentBytes;
    j["upsampler"] = r.upsampler;
    j["stages"] = nlohmann::json::array();
    for (const auto& row : r.rows)
        j["stages"].push_back({{"name", row.name}, {"input_shape", row.inputShape}, {"output_shape", row.outputShape},
            {"layout", row.layout}, {"median_seconds", row.medianSeconds}, {"seconds", row.seconds}, {"peak_bytes", row.peakBytes},
            {"peak_total_bytes", row.peakTotalBytes}, {"finite", row.finite}, {"sum", row.sum}, {"abs_mean", row.absMean}});
    return j.dump();
}

}  // namespace vireo::bench
