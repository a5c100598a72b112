#include "inference/bench/ideogrambench.h"

#include "inference/models/ideogram4/ideogram4transformer.h"
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
#include <sstream>

namespace vireo::bench {

namespace {

using Clock = std::chrono::steady_clock;

// The conditional step's text length when none is given: a long descriptive prompt in
// Qwen3-VL's chat template (the pipeline allows up to 2048).
constexpr std::int64_t kDefaultTextTokens = 512;

at::Tensor seeded(bool normal, std::vector<std::int64_t> shape, std::uint64_t seed)
{
    auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto o = at::TensorOptions().dtype(at::kFloat);
    return normal ? at::randn(shape, g, o) : at::rand(shape, g, o);
}

}  // namespace

Result<IdeogramStepBenchResult> benchIdeogramStep(const IdeogramStepBenchOptions& options)
{
    IdeogramStepBenchResult r;
    auto resolved = benchDeviceAndDtype("bench ideogram-step", options.device, options.dtype);
    if (!resolved)
        return resolved.error();
    const auto [device, dtype] = *resolved;
    const bool conditional = options.component == "transformer";
    if (!conditional && options.component != "unconditional_transformer")
        return makeError(ErrorCode::InvalidArgument,
            "bench ideogram-step: --component is transformer or unconditional_transformer, not " + options.component);
    if (!conditional && options.textTokens.value_or(0) != 0)
        return makeError(ErrorCode::InvalidArgument,
            "bench ideogram-step: the unconditional transformer runs without text tokens "
            "(as the pipeline runs it); drop --text-tokens");
    const auto textTokens = conditional ? options.textTokens.value_or(kDefaultTextTokens) : 0;
    if (options.repeats < 1 || options.width < 16 || options.height < 16 || textTokens < 0)
        return makeError(ErrorCode::InvalidArgument, "bench ideogram-step: size and repeats must be positive");
    if (options.width % 16 || options.height % 16)
        return makeError(ErrorCode::InvalidArgument,
            "bench ideogram-step: --size needs W and H multiples of 16 (2x2 patches of the "
            "8x VAE latent), not "
                + std::to_string(options.width) + "x" + std::to_string(options.height));
    r.device = device.is_cuda() ? cudaDeviceSummary() : "cpu (" + std::to_string(at::get_num_threads()) + " threads)";
    r.dtype = options.dtype;
    r.component = options.component;
    r.memoryMethod = device.is_cuda() ? "CUDA caching allocator, peak above the weights and inputs"
                                      : "peak RSS growth over the warm-up run (lower bound)";
    r.width = options.width;
    r.height = options.height;
    r.gridH = options.height / 16;
    r.gridW = options.width / 16;
    r.imageTokens = r.gridH * r.gridW;
    r.textTokens = textTokens;
    r.repeats = options.repeats;

    try {
        ideogram4::TransformerLoadOptions lo;
        lo.device = device;
        lo.dtype = dtype;
        lo.component = options.component;
        deviceSynchronize(device);
        auto start = Clock::now();
        auto model = ideogram4::Transformer::load(options.modelPath, lo);
        if (!model)
            return model.error();
        deviceSynchronize(device);
        r.loadSeconds = std::chrono::duration<double>(Clock::now() - start).count();
        const auto& c = model->config();
        r.layers = c.layers;
        r.hidden = c.hidden();
        r.heads = c.heads;
        r.intermediate = c.intermediateSize;
        r.llmFeaturesDim = c.llmFeaturesDim;
        r.fusedQkv = model->fusedQkv();
        r.residentBytes = model->residentBytes();
        r.bytesByRepresentation = model->bytesByRepresentation();

        const auto latents = seeded(true, {r.imageTokens, c.inChannels}, options.seed).to(device, dtype);
        const auto text = seeded(true, {textTokens, c.llmFeaturesDim}, options.seed + 1).to(device, dtype);
        r.timestep = seeded(false, {1}, options.seed + 2).item<float>();

        auto timed = timeRuns(device, options.repeats, [&] { return model->forward(latents, text, r.timestep, r.gridH, r.gridW); });
        if (!timed)
            return timed.error();
        r.seconds = timed->seconds;
        r.medianSeconds = timed->medianSeconds;
        r.peakBytes = timed->peakBytes;
        r.peakTotalBytes = timed->peakTotalBytes;
        const auto& output = timed->output;
        const auto f = output.to(at::kCPU, at::kFloat).contiguous();
        r.outputShape.assign(f.sizes().begin(), f.sizes().end());
        if (r.outputShape != std::vector<std::int64_t>{r.imageTokens, c.inChannels})
            return makeError(ErrorCode::Internal,
                "bench ideogram-step: the forward gave a [" + std::to_string(f.size(0))
                    + ", ...] output, "
                      "expected ["
                    + std::to_string(r.imageTokens) + ", " + std::to_string(c.inChannels) + "]");
        r.finite = at::isfinite(f).all().item<bool>();
        r.sum = f.sum(at::kDouble).item<double>();
        r.absMean = f.abs().mean(at::kDouble).item<double>();
        if (!options.outputPath.empty())
            if (auto w = tensorfile::writeSafetensors(options.outputPath, {{"velocity", f}}); !w)
                return w.error();
    } catch (const std::exception& e) {
        return errorFromException(e, "bench ideogram-step", ErrorCode::Internal);
    }
    return r;
}

std::string formatIdeogramStepBench(const IdeogramStepBenchResult& r)
{
    std::ostringstream s;
    char line[400];
    std::snprintf(line, sizeof line,
        "bench ideogram-step: %s, %lldx%lld (%lld image + %lld text tokens), t %.4f, %s on %s, median of %d after a warm-up\n",
        r.component.c_str(), static_cast<long long>(r.width), static_cast<long long>(r.height), static_cast<long long>(r.imageTokens),
        static_cast<long long>(r.textTokens), r.timestep, r.dtype.c_str(), r.device.c_str(), r.repeats);
    s << line;
    std::snprintf(line, sizeof line,
        "  model: %lld layers, hidden %lld (%lld heads), MLP %lld, text features %lld, %s qkv; loaded in %.2f s, %.1f MiB:",
        static_cast<long long>(r.layers), static_cast<long long>(r.hidden), static_cast<long long>(r.heads),
        static_cast<long long>(r.intermediate), static_cast<long long>(r.llmFeaturesDim), r.fusedQkv ? "fused" : "split", r.loadSeconds,
        static_cast<double>(r.residentBytes) / 1048576.0);
    s << line;
    for (const auto& [name, bytes] : r.bytesByRepresentation) {
        std::snprintf(line, sizeof line, " %s %.1f MiB", name.c_str(), static_cast<double>(bytes) / 1048576.0);
        s << line;
    }
    s << "\n";
    char peak[48];
    if (r.peakBytes >= 0)
        std::snprintf(peak, sizeof peak, "%.1f MiB", static_cast<double>(r.peakBytes) / 1048576.0);
    else
        std::snprintf(peak, sizeof peak, "n/a");
    std::snprintf(line, sizeof line, "  forward: median %.4f s, peak %s (%s); output %lldx%lld %s, sum %.6g, mean |x| %.6g\n",
        r.medianSeconds, peak, r.memoryMethod.c_str(), static_cast<long long>(r.outputShape.empty() ? 0 : r.outputShape[0]),
        static_cast<long long>(r.outputShape.size() < 2 ? 0 : r.outputShape[1]), r.finite ? "finite" : "NOT FINITE", r.sum, r.absMean);
    s << line;
    return s.str();
}

std::string ideogramStepBenchJson(const IdeogramStepBenchResult& r)
{
    nlohmann::json j;
    j["bench"] = "ideogram-step";
    j["component"] = r.component;
    j["device"] = r.device;
    j["dtype"] = r.dtype;
    j["size"] = {r.width, r.height};
    j["grid"] = {r.gridH, r.gridW};
    j["image_tokens"] = r.imageTokens;
    j["text_tokens"] = r.textTokens;
    j["timestep"] = r.timestep;
    j["repeats"] = r.repeats;
    j["config"] = {{"layers", r.layers}, {"hidden", r.hidden}, {"heads", r.heads}, {"intermediate", r.intermediate},
        {"llm_features_dim", r.llmFeaturesDim}};
    j["fused_qkv"] = r.fusedQkv;
    j["load_seconds"] = r.loadSeconds;
    j["resident_bytes"] = r.residentBytes;
    j["bytes_by_representation"] = r.bytesByRepresentation;
    j["memory_method"] = r.memoryMethod;
    j["median_seconds"] = r.medianSeconds;
    j["seconds"] = r.seconds;
    j["peak_bytes"] = r.peakBytes;
    j["peak_total_bytes"] = r.peakTotalBytes;
    j["output_shape"] = r.outputShape;
    j["finite"] = r.finite;
    j["sum"] = r.sum;
    j["abs_mean"] = r.absMean;
    return j.dump();
}

}  // namespace vireo::bench
