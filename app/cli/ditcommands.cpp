#include "app/cli/ditcommands.h"

#include "inference/models/ltx2/ltx2graphs.h"
#include "inference/models/ltx2/ltx2transformer.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/tensorfile/tensorset.h"
#include "inference/models/nn/layers.h"
#include "inference/quant/quantizedweight.h"
#include "inference/util/device.h"
#include "inference/util/format.h"
#include "inference/util/profile.h"
#include "kernels/fusedops.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace {

int usage(const std::string& message)
{
    std::fprintf(stderr,
        "vireo-cli dit-forward: %s\n"
        "usage: vireo-cli dit-forward --model PATH [--model PATH ...] --inputs IN.safetensors --out OUT.safetensors\n"
        "         [--config CONFIG.json] [--dtype f32|bf16|f16] [--device cpu|cuda] [--isolate] [--cross-timestep]\n"
        "         [--stg I,J] [--blocks] [--repeat N] [--attention default|flash3|flash|cudnn|efficient]\n"
        "         [--fp8-fast-accum] [--profile] [--graphs] [--json]\n"
        "  --graphs also times the forward replayed from a CUDA graph (after a warm-up and a capture) and prints\n"
        "  its median against eager forwards timed right after, with the largest difference of their outputs\n"
        "       vireo-cli dit-forward --model PATH --load-only [--dtype ...] [--json]\n",
        message.c_str());
    return 2;
}

std::string readFile(const std::string& path)
{
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

namespace {

// What dit-forward was asked for.
struct DitOptions {
    std::vector<std::filesystem::path> models;
    std::string inputsPath, outPath, configPath, stg;
    c10::ScalarType dtype = c10::kFloat;
    c10::Device device{c10::kCPU};
    bool isolate = false, crossTimestep = false, blocks = false, loadOnly = false, asJson = false, profileKernels = false;
    bool compareGraphs = false;
    int repeats = 1;
};

// The arguments into `o`; the exit status of a usage error, or nothing.
std::optional<int> parseDitOptions(const std::vector<std::string>& args, DitOptions& o)
{
    auto& models = o.models;
    auto& inputsPath = o.inputsPath;
    auto& outPath = o.outPath;
    auto& configPath = o.configPath;
    auto& stg = o.stg;
    auto& dtype = o.dtype;
    auto& device = o.device;
    auto& repeats = o.repeats;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& a = args[i];
        const bool hasValue = i + 1 < args.size();
        if (a == "--model" && hasValue)
            models.emplace_back(args[++i]);
        else if (a == "--inputs" && hasValue)
            inputsPath = args[++i];
        else if (a == "--out" && hasValue)
            outPath = args[++i];
        else if (a == "--config" && hasValue)
            configPath = args[++i];
        else if (a == "--stg" && hasValue)
            stg = args[++i];
        else if (a == "--repeat" && hasValue)
            repeats = std::max(1, std::atoi(args[++i].c_str()));
        else if (a == "--dtype" && hasValue) {
            const auto d = args[++i];
            if (d == "f32" || d == "float32")
                dtype = c10::kFloat;
            else if (d == "bf16" || d == "bfloat16")
                dtype = c10::kBFloat16;
            else if (d == "f16" || d == "float16")
                dtype = c10::kHalf;
            else
                return usage("unknown dtype " + d);
        } else if (a == "--device" && hasValue) {
            try {
                device = c10::Device(args[++i]);
            } catch (const std::exception&) {
                return usage("unknown device " + args[i]);
            }
        } else if (a == "--isolate")
            o.isolate = true;
        else if (a == "--cross-timestep")
            o.crossTimestep = true;
        else if (a == "--blocks")
            o.blocks = true;
        else if (a == "--attention" && hasValue) {
            const auto kernel = vireo::nn::parseAttentionKernel(args[++i]);
            if (!kernel)
                return usage("unknown attention kernel " + args[i]);
            vireo::nn::setAttentionKernel(*kernel);
        } else if (a == "--profile")
            o.profileKernels = true;
        else if (a == "--graphs")
            o.compareGraphs = true;
        else if (a == "--fp8-fast-accum")
            vireo::quant::setFp8FastAccumulation(true);
        else if (a == "--load-only")
            o.loadOnly = true;
        else if (a == "--json")
            o.asJson = true;
        else
            return usage("unexpected argument " + a);
    }
    if (models.empty())
        return usage("--model is required");
    if (!o.loadOnly && (inputsPath.empty() || outPath.empty()))
        return usage("--inputs and --out are required");
    return std::nullopt;
}

// --load-only: what the transformer holds, as a line or as JSON.
void printLoaded(
    const vireo::ltx2::Transformer& model, const std::map<std::string, std::int64_t>& byRepresentation, double loadSeconds, bool asJson)
{
    if (asJson) {
        std::printf("{\"version\": \"%s\", \"layers\": %lld, \"resident_bytes\": %lld, \"load_seconds\": %.4f, \"by_representation\": {",
            model.config().version().c_str(), static_cast<long long>(model.config().layers), static_cast<long long>(model.residentBytes()),
            loadSeconds);
        bool first = true;
        for (const auto& [k, v] : byRepresentation) {
            std::printf("%s\"%s\": %lld", first ? "" : ", ", k.c_str(), static_cast<long long>(v));
            first = false;
        }
        std::printf("}}\n");
    } else {
        std::printf("LTX-%s transformer, %lld layers, %s resident (", model.config().version().c_str(),
            static_cast<long long>(model.config().layers), vireo::humanBytes(model.residentBytes()).c_str());
        bool first = true;
        for (const auto& [k, v] : byRepresentation) {
            std::printf("%s%s %s", first ? "" : ", ", k.c_str(), vireo::humanBytes(v).c_str());
            first = false;
        }
        std::printf("), loaded in %.2f s\n", loadSeconds);
    }
}

void moveTo(vireo::ltx2::TransformerInputs& inputs, c10::Device device)
{
    for (auto* t :
        {&inputs.hiddenStates, &inputs.audioHiddenStates, &inputs.encoderHiddenStates, &inputs.audioEncoderHiddenStates, &inputs.timestep})
        *t = t->to(device);
    for (auto* t : {&inputs.audioTimestep, &inputs.sigma, &inputs.audioSigma, &inputs.encoderAttentionMask,
             &inputs.audioEncoderAttentionMask, &inputs.videoCoords, &inputs.audioCoords, &inputs.perturbationMask})
        if (*t)
            **t = (*t)->to(device);
}

int failed(const std::string& message)
{
    std::fprintf(stderr, "vireo-cli: %s\n", message.c_str());
    return 1;
}

// --graphs: the forward replayed from a CUDA graph against eager, from the same warm state.
struct GraphComparison {
    std::vector<double> graphedTimes, eagerAgain;  // sorted
    std::string summary;
    double maxDifference = -1.0;
};

// The first two graphed calls are the warm-up and the capture; where graphs cannot run, the
// summary says why.
vireo::Result<GraphComparison> compareWithGraphs(vireo::ltx2::Transformer& model, const vireo::ltx2::TransformerInputs& inputs,
    c10::Device device, int repeats, const vireo::ltx2::TransformerOutputs& eager)
{
    using Clock = std::chrono::steady_clock;
    GraphComparison c;
    vireo::ltx2::GraphedForward graphed(model);
    vireo::Result<vireo::ltx2::TransformerOutputs> g = vireo::makeError(vireo::ErrorCode::Internal, "not run");
    for (int r = 0; r < repeats + 2; ++r) {
        vireo::deviceSynchronize(device);
        const auto start = Clock::now();
        g = graphed.forward(inputs);
        vireo::deviceSynchronize(device);
        if (!g)
            return vireo::makeError(g.error().code, "graphed: " + g.error().message);
        if (r >= 2)
            c.graphedTimes.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    c.summary = graphed.summary();
    for (int r = 0; r < repeats; ++r) {
        vireo::deviceSynchronize(device);
        const auto start = Clock::now();
        auto e = model.forward(inputs);
        vireo::deviceSynchronize(device);
        if (!e)
            return e.error();
        c.eagerAgain.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    }
    std::sort(c.eagerAgain.begin(), c.eagerAgain.end());
    std::sort(c.graphedTimes.begin(), c.graphedTimes.end());
    c.maxDifference = std::max((g->video.to(at::kDouble) - eager.video.to(at::kDouble)).abs().max().item<double>(),
        (g->audio.to(at::kDouble) - eager.audio.to(at::kDouble)).abs().max().item<double>());
    return c;
}

}  // namespace

int runDitForward(const std::vector<std::string>& args)
{
    DitOptions o;
    if (auto failed = parseDitOptions(args, o))
        return *failed;
    const auto& models = o.models;
    const auto& inputsPath = o.inputsPath;
    const auto& outPath = o.outPath;
    const auto& configPath = o.configPath;
    const auto& stg = o.stg;
    const auto dtype = o.dtype;
    const auto device = o.device;
    const bool isolate = o.isolate, crossTimestep = o.crossTimestep, blocks = o.blocks, asJson = o.asJson,
               profileKernels = o.profileKernels;
    const bool compareGraphs = o.compareGraphs;
    const int repeats = o.repeats;
    using Clock = std::chrono::steady_clock;
    auto weights = vireo::ltx2::Ltx2Weights::open(models);
    if (!weights)
        return failed(weights.error().message);
    vireo::ltx2::TransformerLoadOptions options;
    options.device = device;
    options.dtype = dtype;
    if (!configPath.empty()) {
        auto config = vireo::ltx2::transformerConfigFromDiffusers(readFile(configPath));
        if (!config) {
            std::fprintf(stderr, "vireo-cli: %s: %s\n", configPath.c_str(), config.error().message.c_str());
            return 1;
        }
        options.config = *config;
    }
    const auto loadStart = Clock::now();
    auto model = vireo::ltx2::Transformer::load(*weights, options);
    if (!model)
        return failed(model.error().message);
    const double loadSeconds = std::chrono::duration<double>(Clock::now() - loadStart).count();
    const auto byRepresentation = model->bytesByRepresentation();
    if (o.loadOnly) {
        printLoaded(*model, byRepresentation, loadSeconds, asJson);
        return 0;
    }

    auto set = vireo::tensorfile::readTensorSet(inputsPath);
    if (!set)
        return failed(set.error().message);
    if (isolate)
        set->metadata["isolate_modalities"] = "1";
    if (crossTimestep)
        set->metadata["use_cross_timestep"] = "1";
    if (!stg.empty())
        set->metadata["stg_blocks"] = stg;
    auto inputs = vireo::ltx2::transformerInputsFrom(*set);
    if (!inputs) {
        std::fprintf(stderr, "vireo-cli: %s: %s\n", inputsPath.c_str(), inputs.error().message.c_str());
        return 1;
    }
    // The inputs live on the device before the clock starts, as they do inside a pipeline.
    moveTo(*inputs, device);
    std::map<std::string, at::Tensor> outputs;
    if (blocks)
        inputs->onBlock = [&](int i, const at::Tensor& x, const at::Tensor& a) {
            outputs["block." + std::to_string(i) + ".video"] = x.to(c10::kCPU);
            outputs["block." + std::to_string(i) + ".audio"] = a.to(c10::kCPU);
        };
    // Each forward is timed to completion (a CUDA device is synchronized before and after);
    // the median of the repeats is the figure, the first repeat counts as a warm-up.
    std::vector<double> times;
    vireo::Result<vireo::ltx2::TransformerOutputs> out = vireo::makeError(vireo::ErrorCode::Internal, "not run");
    if (device.is_cuda())
        vireo::cudaResetPeakMemory(device);
    for (int r = 0; r < repeats; ++r) {
        vireo::deviceSynchronize(device);
        const auto start = Clock::now();
        out = model->forward(*inputs);
        vireo::deviceSynchronize(device);
        times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
        if (!out) {
            std::fprintf(stderr, "vireo-cli: %s\n", out.error().message.c_str());
            return 1;
        }
    }
    const std::int64_t peakBytes = device.is_cuda() ? vireo::cudaPeakMemory(device) : 0;
    // The same forward replayed from a CUDA graph, timed the same way.
    GraphComparison graphs;
    if (compareGraphs) {
        auto compared = compareWithGraphs(*model, *inputs, device, repeats, *out);
        if (!compared) {
            std::fprintf(stderr, "vireo-cli: %s\n", compared.error().message.c_str());
            return 1;
        }
        graphs = std::move(*compared);
    }
    const auto& graphedTimes = graphs.graphedTimes;
    const auto& eagerAgain = graphs.eagerAgain;
    const auto& graphSummary = graphs.summary;
    const double graphedDiff = graphs.maxDifference;
    // One more forward under the kernel profiler: where the device time goes.
    vireo::profile::Profile kernels;
    if (profileKernels && vireo::profile::startKernelProfile()) {
        auto profiled = model->forward(*inputs);
        vireo::deviceSynchronize(device);
        kernels = vireo::profile::stopKernelProfile();
        if (!profiled)
            return failed(profiled.error().message);
    }
    std::vector<double> timed(times.begin() + (times.size() > 1 ? 1 : 0), times.end());
    std::sort(timed.begin(), timed.end());
    const double best = timed.front();
    const double median = timed[timed.size() / 2];
    outputs["sample"] = out->video;
    outputs["audio_sample"] = out->audio;
    if (auto w = vireo::tensorfile::writeSafetensors(outPath, outputs, {{"version", model->config().version()}}); !w)
        return failed(w.error().message);
    if (asJson) {
        nlohmann::json j{{"version", model->config().version()}, {"forward_seconds", best}, {"median_seconds", median},
            {"all_seconds", times}, {"repeats", repeats}, {"threads", at::get_num_threads()}, {"load_seconds", loadSeconds},
            {"resident_bytes", model->residentBytes()}, {"peak_bytes", peakBytes},
            {"attention", std::string(vireo::nn::attentionKernelName(vireo::nn::attentionKernel()))},
            {"fp8_fast_accumulation", vireo::quant::fp8FastAccumulation()}, {"fused_kernels", vireo::kernels::fusedKernelsEnabled()}};
        if (compareGraphs) {
            const double graphedMedian = graphedTimes[graphedTimes.size() / 2], eagerMedian = eagerAgain[eagerAgain.size() / 2];
            j["cuda_graphs"] = {{"summary", graphSummary}, {"median_seconds", graphedMedian}, {"all_seconds", graphedTimes},
                {"eager_median_seconds", eagerMedian}, {"eager_over_graphed", eagerMedian / graphedMedian},
                {"max_abs_difference", graphedDiff}};
        }
        for (const auto& [path, count] : model->matmulPaths())
            j["matmul_paths"][path] = count;
        for (std::size_t k = 0; k < kernels.kernels.size() && k < 60; ++k)
            j["kernels"].push_back({{"name", kernels.kernels[k].name.substr(0, 160)}, {"ms", kernels.kernels[k].milliseconds},
                {"calls", kernels.kernels[k].calls}});
        for (std::size_t k = 0; k < kernels.ops.size() && k < 40; ++k)
            j["ops"].push_back({{"name", kernels.ops[k].name}, {"host_ms", kernels.ops[k].milliseconds}, {"calls", kernels.ops[k].calls}});
        std::printf("%s\n", j.dump().c_str());
    } else
        std::printf("LTX-%s forward: video %s, audio %s in %.3f s (best of %d, %d threads); wrote %s\n", model->config().version().c_str(),
            c10::str(out->video.sizes()).c_str(), c10::str(out->audio.sizes()).c_str(), best, repeats, at::get_num_threads(),
            outPath.c_str());
    if (compareGraphs && !asJson) {
        const double graphedMedian = graphedTimes[graphedTimes.size() / 2], eagerMedian = eagerAgain[eagerAgain.size() / 2];
        std::printf("CUDA graphs %s: median %.3f ms graphed, %.3f ms eager (eager / graphed %.3f); outputs differ by at most %.3g\n",
            graphSummary.c_str(), graphedMedian * 1e3, eagerMedian * 1e3, eagerMedian / graphedMedian, graphedDiff);
    }
    return 0;
}
