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
    std::fprintf(stderr, "vireo-cli dit-forward: %s\n"
        "usage: vireo-cli dit-forward --model PATH [--model PATH ...] --inputs IN.safetensors --out OUT.safetensors\n"
        "         [--config CONFIG.json] [--dtype f32|bf16|f16] [--device cpu|cuda] [--isolate] [--cross-timestep]\n"
        "         [--stg I,J] [--blocks] [--repeat N] [--attention default|flash3|flash|cudnn|efficient]\n"
        "         [--fp8-fast-accum] [--profile] [--graphs] [--json]\n"
        "  --graphs also times the forward replayed from a CUDA graph (after a warm-up and a capture) and prints\n"
        "  its median against eager forwards timed right after, with the largest difference of their outputs\n"
        "       vireo-cli dit-forward --model PATH --load-only [--dtype ...] [--json]\n", message.c_str());
    return 2;
}

std::string readFile(const std::string& path)
{
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

} // namespace

int runDitForward(const std::vector<std::string>& args)
{
    std::vector<std::filesystem::path> models;
    std::string inputsPath, outPath, configPath, stg;
    c10::ScalarType dtype = c10::kFloat;
    c10::Device device(c10::kCPU);
    bool isolate = false, crossTimestep = false, blocks = false, loadOnly = false, asJson = false, profileKernels = false;
    bool compareGraphs = false;
    int repeats = 1;
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
            isolate = true;
        else if (a == "--cross-timestep")
            crossTimestep = true;
        else if (a == "--blocks")
            blocks = true;
        else if (a == "--attention" && hasValue) {
            const auto kernel = vireo::nn::parseAttentionKernel(args[++i]);
            if (!kernel)
                return usage("unknown attention kernel " + args[i]);
            vireo::nn::setAttentionKernel(*kernel);
        } else if (a == "--profile")
            profileKernels = true;
        else if (a == "--graphs")
            compareGraphs = true;
        else if (a == "--fp8-fast-accum")
            vireo::quant::setFp8FastAccumulation(true);
        else if (a == "--load-only")
            loadOnly = true;
        else if (a == "--json")
            asJson = true;
        else
            return usage("unexpected argument " + a);
    }
    if (models.empty())
        return usage("--model is required");
    if (!loadOnly && (inputsPath.empty() || outPath.empty()))
        return usage("--inputs and --out are required");

    using Clock = std::chrono::steady_clock;
    auto weights = vireo::ltx2::Ltx2Weights::open(models);
    if (!weights) {
        std::fprintf(stderr, "vireo-cli: %s\n", weights.error().message.c_str());
        return 1;
    }
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
    if (!model) {
        std::fprintf(stderr, "vireo-cli: %s\n", model.error().message.c_str());
        return 1;
    }
    const double loadSeconds = std::chrono::duration<double>(Clock::now() - loadStart).count();
    const auto byRepresentation = model->bytesByRepresentation();
    if (loadOnly) {
        if (asJson) {
            std::printf("{\"version\": \"%s\", \"layers\": %lld, \"resident_bytes\": %lld, \"load_seconds\": %.4f, \"by_representation\": {",
                model->config().version().c_str(), static_cast<long long>(model->config().layers),
                static_cast<long long>(model->residentBytes()), loadSeconds);
            bool first = true;
            for (const auto& [k, v] : byRepresentation) {
                std::printf("%s\"%s\": %lld", first ? "" : ", ", k.c_str(), static_cast<long long>(v));
                first = false;
            }
            std::printf("}}\n");
        } else {
            std::printf("LTX-%s transformer, %lld layers, %s resident (", model->config().version().c_str(),
                static_cast<long long>(model->config().layers), vireo::humanBytes(model->residentBytes()).c_str());
            bool first = true;
            for (const auto& [k, v] : byRepresentation) {
                std::printf("%s%s %s", first ? "" : ", ", k.c_str(), vireo::humanBytes(v).c_str());
                first = false;
            }
            std::printf("), loaded in %.2f s\n", loadSeconds);
        }
        return 0;
    }

    auto set = vireo::tensorfile::readTensorSet(inputsPath);
    if (!set) {
        std::fprintf(stderr, "vireo-cli: %s\n", set.error().message.c_str());
        return 1;
    }
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
    for (auto* t : {&inputs->hiddenStates, &inputs->audioHiddenStates, &inputs->encoderHiddenStates, &inputs->audioEncoderHiddenStates,
             &inputs->timestep})
        *t = t->to(device);
    for (auto* t : {&inputs->audioTimestep, &inputs->sigma, &inputs->audioSigma, &inputs->encoderAttentionMask,
             &inputs->audioEncoderAttentionMask, &inputs->videoCoords, &inputs->audioCoords, &inputs->perturbationMask})
        if (*t)
            **t = (*t)->to(device);
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
    // The same forward replayed from a CUDA graph, timed the same way; the first two calls are
    // the warm-up and the capture. Where graphs cannot run, the summary says why.
    std::vector<double> graphedTimes, eagerAgain;
    std::string graphSummary;
    double graphedDiff = -1.0;
    if (compareGraphs) {
        vireo::ltx2::GraphedForward graphed(*model);
        vireo::Result<vireo::ltx2::TransformerOutputs> g = vireo::makeError(vireo::ErrorCode::Internal, "not run");
        for (int r = 0; r < repeats + 2; ++r) {
            vireo::deviceSynchronize(device);
            const auto start = Clock::now();
            g = graphed.forward(*inputs);
            vireo::deviceSynchronize(device);
            if (!g) {
                std::fprintf(stderr, "vireo-cli: graphed: %s\n", g.error().message.c_str());
                return 1;
            }
            if (r >= 2)
                graphedTimes.push_back(std::chrono::duration<double>(Clock::now() - start).count());
        }
        graphSummary = graphed.summary();
        // Eager once more, right after: both medians from the same warm state.
        for (int r = 0; r < repeats; ++r) {
            vireo::deviceSynchronize(device);
            const auto start = Clock::now();
            auto e = model->forward(*inputs);
            vireo::deviceSynchronize(device);
            if (!e) {
                std::fprintf(stderr, "vireo-cli: %s\n", e.error().message.c_str());
                return 1;
            }
            eagerAgain.push_back(std::chrono::duration<double>(Clock::now() - start).count());
        }
        std::sort(eagerAgain.begin(), eagerAgain.end());
        graphedDiff = std::max((g->video.to(at::kDouble) - out->video.to(at::kDouble)).abs().max().item<double>(),
            (g->audio.to(at::kDouble) - out->audio.to(at::kDouble)).abs().max().item<double>());
        std::sort(graphedTimes.begin(), graphedTimes.end());
    }
    // One more forward under the kernel profiler: where the device time goes.
    vireo::profile::Profile kernels;
    if (profileKernels && vireo::profile::startKernelProfile()) {
        auto profiled = model->forward(*inputs);
        vireo::deviceSynchronize(device);
        kernels = vireo::profile::stopKernelProfile();
        if (!profiled) {
            std::fprintf(stderr, "vireo-cli: %s\n", profiled.error().message.c_str());
            return 1;
        }
    }
    std::vector<double> timed(times.begin() + (times.size() > 1 ? 1 : 0), times.end());
    std::sort(timed.begin(), timed.end());
    const double best = timed.front();
    const double median = timed[timed.size() / 2];
    outputs["sample"] = out->video;
    outputs["audio_sample"] = out->audio;
    if (auto w = vireo::tensorfile::writeSafetensors(outPath, outputs, {{"version", model->config().version()}}); !w) {
        std::fprintf(stderr, "vireo-cli: %s\n", w.error().message.c_str());
        return 1;
    }
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
    }
    else
        std::printf("LTX-%s forward: video %s, audio %s in %.3f s (best of %d, %d threads); wrote %s\n",
            model->config().version().c_str(), c10::str(out->video.sizes()).c_str(), c10::str(out->audio.sizes()).c_str(), best,
            repeats, at::get_num_threads(), outPath.c_str());
    if (compareGraphs && !asJson) {
        const double graphedMedian = graphedTimes[graphedTimes.size() / 2], eagerMedian = eagerAgain[eagerAgain.size() / 2];
        std::printf("CUDA graphs %s: median %.3f ms graphed, %.3f ms eager (eager / graphed %.3f); outputs differ by at most %.3g\n",
            graphSummary.c_str(), graphedMedian * 1e3, eagerMedian * 1e3, eagerMedian / graphedMedian, graphedDiff);
    }
    return 0;
}
