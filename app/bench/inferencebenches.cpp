// The benchmarks that measure the inference layer in this process: tensor reads, CPU and CUDA
// dequantization, the LTX-2 stages around the denoiser and one Ideogram-4 step
// (inference/bench, linked by vireo-bench alone).
#include "app/bench/benchcommands.h"

#include "app/cli/args.h"
#include "inference/bench/dequantbench.h"
#include "inference/bench/gpubench.h"
#include "inference/bench/ideogrambench.h"
#include "inference/bench/readbench.h"
#include "inference/bench/stagebench.h"
#include "inference/util/format.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

namespace {

// The options the device benches share: --device, --dtype, --repeat, --seed, --json. 1: args[i]
// (and its value) was one and is consumed; 0: not one of them; -1: a bad value, said in error.
struct BenchRunArgs {
    std::string* device;
    std::string* dtype;
    int* repeats;
    std::uint64_t* seed;
    bool* json;
};

int takeBenchRunArg(
    const std::string& bench, const std::vector<std::string>& args, std::size_t& i, const BenchRunArgs& o, std::string& error)
{
    const auto& a = args[i];
    const bool hasValue = i + 1 < args.size();
    if (a == "--json") {
        *o.json = true;
        return 1;
    }
    if (!hasValue)
        return 0;
    if (a == "--device" || a == "--dtype") {
        *(a == "--device" ? o.device : o.dtype) = args[++i];
        return 1;
    }
    if (a == "--repeat") {
        auto n = vireo::cli::parseNumber<int>(args[++i], 1, 1000);
        if (!n)
            error = bench + ": --repeat " + n.error().message;
        else
            *o.repeats = *n;
        return n ? 1 : -1;
    }
    if (a == "--seed") {
        auto n = vireo::cli::parseNumber<std::uint64_t>(args[++i], 0, 1ULL << 62);
        if (!n)
            error = bench + ": --seed " + n.error().message;
        else
            *o.seed = *n;
        return n ? 1 : -1;
    }
    return 0;
}

}  // namespace

int runBenchDequant(const std::vector<std::string>& args)
{
    vireo::bench::DequantBenchOptions options;
    std::string missing;
    options.referenceScript = benchScript("dequant_reference.py", &missing);
    bool asJson = false;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--python" && i + 1 < args.size())
            options.python = args[++i];
        else if (args[i] == "--reference" && i + 1 < args.size())
            options.referenceScript = args[++i];
        else if (args[i] == "--repeat" && i + 1 < args.size())
            options.repeats = std::max(1, std::atoi(args[++i].c_str()));
        else if (args[i] == "--small")
            options.sizes = {1 << 16}, options.linearOut = options.linearIn = 256;
        else if (args[i] == "--json")
            asJson = true;
        else
            return usageError("bench dequant: unexpected argument " + args[i]);
    }
    if (options.referenceScript.empty())
        return usageError("bench dequant: " + missing + " (or give --reference SCRIPT)");
    auto r = vireo::bench::benchDequant(options);
    if (!r)
        return fail(r.error());
    std::fputs((asJson ? vireo::bench::dequantBenchJson(*r) + "\n" : vireo::bench::formatDequantBench(*r)).c_str(), stdout);
    return 0;
}

int runBenchGpuDequant(const std::vector<std::string>& args)
{
    std::int64_t rows = 4096, cols = 16384;
    int repeats = 20;
    bool asJson = false;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--rows" && i + 1 < args.size())
            rows = std::max(256LL, std::atoll(args[++i].c_str()));
        else if (args[i] == "--cols" && i + 1 < args.size())
            cols = std::max(256LL, std::atoll(args[++i].c_str())) / 256 * 256;
        else if (args[i] == "--repeat" && i + 1 < args.size())
            repeats = std::max(1, std::atoi(args[++i].c_str()));
        else if (args[i] == "--json")
            asJson = true;
        else
            return usageError("bench gpu-dequant: unexpected argument " + args[i]);
    }
    auto r = vireo::bench::benchDequantCuda(rows, cols, repeats);
    if (!r)
        return fail(r.error());
    std::fputs((asJson ? vireo::bench::gpuDequantJson(*r) + "\n" : vireo::bench::formatGpuDequant(*r)).c_str(), stdout);
    return 0;
}

int runBenchStages(const std::vector<std::string>& args)
{
    vireo::bench::StageBenchOptions options;
    bool asJson = false;
    std::string error;
    const BenchRunArgs run{&options.device, &options.dtype, &options.repeats, &options.seed, &asJson};
    for (std::size_t i = 1; i < args.size(); ++i) {
        const auto& a = args[i];
        const bool hasValue = i + 1 < args.size();
        if (a == "--vae" && hasValue)
            options.vaePath = args[++i];
        else if (a == "--upsampler" && hasValue)
            options.upsamplerPath = args[++i];
        else if (a == "--diffusion-decoder" && hasValue)
            options.diffusionDecoderPath = args[++i];
        else if (a == "--size" && hasValue) {
            const auto& v = args[++i];
            const auto x1 = v.find('x'), x2 = v.find('x', x1 == std::string::npos ? x1 : x1 + 1);
            if (x1 == std::string::npos || x2 == std::string::npos)
                return usageError("bench stages: --size is WxHxF, e.g. 768x512x121");
            auto w = vireo::cli::parseNumber<std::int64_t>(std::string_view(v).substr(0, x1), 1, 8192);
            auto h = vireo::cli::parseNumber<std::int64_t>(std::string_view(v).substr(x1 + 1, x2 - x1 - 1), 1, 8192);
            auto f = vireo::cli::parseNumber<std::int64_t>(std::string_view(v).substr(x2 + 1), 1, 2049);
            if (!w || !h || !f)
                return usageError("bench stages: --size is WxHxF, e.g. 768x512x121 (W, H up to 8192, F up to 2049)");
            options.width = *w;
            options.height = *h;
            options.frames = *f;
        } else if (a == "--out" && hasValue)
            options.outputsPath = args[++i];
        else if (const int taken = takeBenchRunArg("bench stages", args, i, run, error); taken < 0)
            return usageError(error);
        else if (taken == 0)
            return usageError("bench stages: unexpected argument " + a);
    }
    const bool diffusion = !options.diffusionDecoderPath.empty();
    if (diffusion && (!options.vaePath.empty() || !options.upsamplerPath.empty()))
        return usageError("bench stages: --diffusion-decoder PATH times that decoder alone; give it without --vae and --upsampler");
    if (!diffusion && (options.vaePath.empty() || options.upsamplerPath.empty()))
        return usageError("bench stages: --vae PATH and --upsampler PATH are required (or --diffusion-decoder PATH alone)");
    auto r = diffusion ? vireo::bench::benchDiffusionDecode(options) : vireo::bench::benchStages(options);
    if (!r)
        return fail(r.error());
    std::fputs((asJson ? vireo::bench::stageBenchJson(*r) + "\n" : vireo::bench::formatStageBench(*r)).c_str(), stdout);
    return 0;
}

int runBenchIdeogramStep(const std::vector<std::string>& args)
{
    vireo::bench::IdeogramStepBenchOptions options;
    bool asJson = false;
    std::string error;
    const BenchRunArgs run{&options.device, &options.dtype, &options.repeats, &options.seed, &asJson};
    for (std::size_t i = 1; i < args.size(); ++i) {
        const auto& a = args[i];
        const bool hasValue = i + 1 < args.size();
        if (a == "--model" && hasValue)
            options.modelPath = args[++i];
        else if (a == "--component" && hasValue)
            options.component = args[++i];
        else if (a == "--size" && hasValue) {
            const auto& v = args[++i];
            const auto x = v.find('x');
            if (x == std::string::npos)
                return usageError("bench ideogram-step: --size is WxH, e.g. 1024x1024");
            auto w = vireo::cli::parseNumber<std::int64_t>(std::string_view(v).substr(0, x), 16, 8192);
            auto h = vireo::cli::parseNumber<std::int64_t>(std::string_view(v).substr(x + 1), 16, 8192);
            if (!w || !h)
                return usageError("bench ideogram-step: --size is WxH, e.g. 1024x1024 (W and H from 16 to 8192)");
            options.width = *w;
            options.height = *h;
        } else if (a == "--text-tokens" && hasValue) {
            auto n = vireo::cli::parseNumber<std::int64_t>(args[++i], 0, 2048);
            if (!n)
                return usageError("bench ideogram-step: --text-tokens " + n.error().message);
            options.textTokens = *n;
        } else if (a == "--out" && hasValue)
            options.outputPath = args[++i];
        else if (const int taken = takeBenchRunArg("bench ideogram-step", args, i, run, error); taken < 0)
            return usageError(error);
        else if (taken == 0)
            return usageError("bench ideogram-step: unexpected argument " + a);
    }
    if (options.modelPath.empty())
        return usageError("bench ideogram-step: --model PATH is required");
    auto r = vireo::bench::benchIdeogramStep(options);
    if (!r)
        return fail(r.error());
    std::fputs((asJson ? vireo::bench::ideogramStepBenchJson(*r) + "\n" : vireo::bench::formatIdeogramStepBench(*r)).c_str(), stdout);
    return 0;
}

int runBenchRead(const std::vector<std::string>& args)
{
    std::string path;
    int repeats = 3;
    bool asJson = false;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--repeat" && i + 1 < args.size()) {
            try {
                repeats = std::stoi(args[++i]);
            } catch (const std::exception&) {
                return usageError("bench read: --repeat needs a number");
            }
        } else if (args[i] == "--json") {
            asJson = true;
        } else if (path.empty() && args[i][0] != '-') {
            path = args[i];
        } else {
            return usageError("bench read: unexpected argument " + args[i]);
        }
    }
    if (path.empty())
        return usageError("bench read needs a FILE");
    auto r = vireo::bench::benchRead(path, repeats);
    if (!r)
        return fail(r.error());
    const double gb = static_cast<double>(r->bytes) / 1e9;
    if (asJson) {
        std::printf("{\"bench\": \"read\", \"bytes\": %llu, \"tensors\": %lld, \"repeats\": %d, \"raw_seconds\": %.6f, "
                    "\"tensor_seconds\": %.6f, \"copy_seconds\": %.6f, \"ratio\": %.4f}\n",
            static_cast<unsigned long long>(r->bytes), static_cast<long long>(r->tensors), r->repeats, r->rawSeconds, r->tensorSeconds,
            r->copySeconds, r->ratio());
    } else {
        std::printf("bench read %s\n", path.c_str());
        std::printf("  %lld tensors, %s, best of %d (warm page cache)\n", static_cast<long long>(r->tensors),
            vireo::humanBytes(r->bytes).c_str(), r->repeats);
        std::printf("  raw sequential read  %8.3f s  %7.2f GB/s  (baseline: one fresh buffer)\n", r->rawSeconds, gb / r->rawSeconds);
        std::printf("  tensors into memory  %8.3f s  %7.2f GB/s\n", r->tensorSeconds, gb / r->tensorSeconds);
        std::printf("  ratio                %8.3fx (goal <= 1.15x)\n", r->ratio());
        std::printf("  page-cache copy      %8.3f s  %7.2f GB/s  (into a reused buffer; %.2fx of it)\n", r->copySeconds,
            gb / r->copySeconds, r->copySeconds > 0 ? r->tensorSeconds / r->copySeconds : 0.0);
    }
    return 0;
}
