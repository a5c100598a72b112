// vireo-cli: the headless front end. Parses arguments and wires the layers; the work lives
// in inference/ (and core/ for Hub commands).
#include "app/cli/args.h"
#include "app/cli/ditcommands.h"
#include "app/cli/loracommands.h"
#include "base/envswitch.h"
#ifdef VIREO_HAS_CORE
#include <QCoreApplication>

#include "app/cli/generatecommand.h"
#endif
#include "inference/bench/dequantbench.h"
#include "inference/bench/gpubench.h"
#include "inference/bench/ideogrambench.h"
#include "inference/bench/readbench.h"
#include "inference/bench/stagebench.h"
#include "inference/inspect/modelinspector.h"
#include "inference/util/format.h"
#include "inference/util/heap.h"
#include "inference/util/text.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"

#include <cstdint>
#include <fstream>

#ifdef VIREO_HAS_CORE
#include "app/cli/hubcommands.h"
#endif

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

namespace {

constexpr const char* kUsage = R"(usage: vireo-cli <command> [options]

commands:
  inspect PATH [--json]        describe a model file or folder from its headers
  tensor PATH NAME [--dequant --out OUT.f32]
                               describe one tensor; write it dequantized as float32
  bench read FILE [--repeat N] time reading every tensor against a raw sequential read
  bench download [--python PY] [--mb N] [--json]
                               download speed against curl and huggingface_hub on the
                               local test Hub; bytes fetched again after an interruption
  bench dequant [--python PY] [--repeat N] [--json]
                               CPU dequantization throughput against memcpy and the
                               Python references; quantized linear against bf16
  bench gpu-dequant [--rows R] [--cols C] [--repeat N] [--json]
                               every representation dequantized on the CUDA device
                               next to a device copy of the same output
  bench stages --vae PATH --upsampler PATH [--size WxHxF] [--device cpu|cuda]
               [--dtype bf16|f32] [--repeat N] [--seed N] [--out FILE.safetensors] [--json]
                               the LTX-2 video VAE encoder (a still, a tiled clip), the x2
                               latent upsampler and the tiled VAE decode: time and peak
                               memory (default 768x512x121)
  bench ideogram-step --model PATH [--component transformer|unconditional_transformer]
               [--size WxH] [--text-tokens N] [--device cpu|cuda] [--dtype bf16|f32]
               [--repeat N] [--seed N] [--out FILE.safetensors] [--json]
                               one Ideogram-4 DiT forward on seeded random inputs: time,
                               peak memory, weight bytes (default 1024x1024, 512 text
                               tokens; the unconditional DiT gets none)
  bench runtime --model PATH [--size WxHxF] [--repeat N] [--json]
                               the studio's engine against calling the pipeline directly
  bench speed --model PATH [--size WxHxF] [--schedule distilled|dev] [--device D] [--json]
                               quality, balanced and fast speed modes: denoise time, steps
                               reused, PSNR of the decoded frames against quality
  bench startup [--vireo PATH] [--repeat N]
                               the window's cold start to a usable window
  bench gpu [--python PY] [...]
                               the GPU benchmark: real-width LTX-2.3 transformer against
                               diffusers, dequantization (bench_gpu.py --help); the VAE
                               encoder, decoder and upsampler: tests/bench/bench_gpu_stages.py;
                               Ideogram-4's step: tests/bench/bench_gpu_ideogram.py
  dit-forward --model PATH --inputs IN.safetensors --out OUT.safetensors
                               run the LTX-2 transformer once on named input tensors
                               (see --help of the command for options)
  generate --model PATH --prompt TEXT --out FILE.mp4|FILE.png [--frames N --width W --height H
           --steps S --seed N --schedule distilled|dev --speed quality|balanced|fast
           --lora FILE[:STRENGTH] ...]
                               text to video with sound (LTX-2 / LTX-2.3, FILE.mp4) or to an
                               image (Ideogram-4, FILE.png); Ctrl-C stops it
  lora inspect FILE --model PATH [--json]
                               a LoRA matched against a model before it is applied: modules
                               matched and unmatched, refusals, rank and alpha
  bench lora --model PATH [--rank R] [--swap-mb MB] [--device cpu|cuda] [--json]
                               an unfused LoRA's cost per transformer forward, and the time
                               to swap one for another
  bench dit [--python PY] [--layers N] [--tokens N] [--repeat N] [--json]
                               one LTX-2.3 transformer forward on CPU against diffusers on
                               the same weights; resident bytes as bf16, FP8 and Q4_K
  bench generate [--python PY] [--small] [--ideogram] [--two-stage] [--json]
                               each LTX-2 phase (Ideogram-4 with --ideogram) timed next to
                               diffusers' pipeline on the same weights (tiny and medium
                               configurations), as ratios; --two-stage: the two-stage
                               distilled path against diffusers' three pipeline calls
  plan REPO [rules] [--json]   the files a download would fetch, sizes, cache and disk
  download REPO [rules]        download them into the Hugging Face cache (Ctrl-C
                               cancels; running it again resumes); a repo outside the
                               catalog's publishers needs an approval first
  trust [list|add REPO|remove REPO]
                               the approvals of the trust gate, shared with the studio
  cache [list|delete-variant ID|delete-repo REPO|clean] [--yes]
                               what models take on disk; delete one (shared files stay) or
                               clean up stale partial files (shows the plan without --yes)
  version                      print the version

rules: --revision R, --include GLOB, --exclude GLOB, --diffusers [--component NAME]
       [--weight-variant V], --parallel N. Hub settings come from HF_ENDPOINT, HF_TOKEN,
       HF_HUB_CACHE, HF_HUB_OFFLINE as for huggingface_hub.

PATH may be a .safetensors or .gguf file, a *.safetensors.index.json, a diffusers
folder (model_index.json), a Hugging Face cache folder (models--org--name) or a snapshot.

environment switches (1/0, true/false, on/off, yes/no; anything else is refused):
)";

std::string usage()
{
    return kUsage + vireo::env::helpText();
}

int usageError(const std::string& message)
{
    std::fprintf(stderr, "vireo-cli: %s\n\n%s", vireo::terminalSafe(message).c_str(), usage().c_str());
    return 2;
}

int fail(const vireo::Error& error)
{
    // Messages carry file, tensor and key names from the files: no escape sequence may reach
    // the terminal, and the error stays one line.
    std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(error.message).c_str());
    return 1;
}

int runInspect(const std::vector<std::string>& args)
{
    std::string path;
    bool asJson = false;
    for (const auto& a : args) {
        if (a == "--json")
            asJson = true;
        else if (!a.empty() && a[0] == '-')
            return usageError("inspect: unknown option " + a);
        else if (path.empty())
            path = a;
        else
            return usageError("inspect takes one PATH");
    }
    if (path.empty())
        return usageError("inspect needs a PATH");
    auto report = vireo::inspect::inspectPath(path);
    if (!report)
        return fail(report.error());
    std::cout << (asJson ? vireo::inspect::toJson(*report) + "\n" : vireo::inspect::toText(*report));
    return 0;
}

int runTensor(const std::vector<std::string>& args)
{
    std::string path, name, out;
    bool dequant = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--dequant")
            dequant = true;
        else if (args[i] == "--out" && i + 1 < args.size())
            out = args[++i];
        else if (!args[i].empty() && args[i][0] == '-')
            return usageError("tensor: unknown option " + args[i]);
        else if (path.empty())
            path = args[i];
        else if (name.empty())
            name = args[i];
        else
            return usageError("tensor takes PATH and NAME");
    }
    if (path.empty() || name.empty())
        return usageError("tensor needs PATH and NAME");
    if (dequant != !out.empty())
        return usageError("tensor: --dequant and --out go together");
    auto source = vireo::tensorfile::ModelSource::open(path);
    if (!source)
        return fail(source.error());
    for (const auto& cp : source->checkpoints) {
        const auto* info = cp.find(name);
        if (!info)
            continue;
        auto weight = vireo::quant::loadWeight(cp, name);
        if (!weight)
            return fail(weight.error());
        std::string shape;
        for (auto d : weight->shape())
            shape += (shape.empty() ? "" : ",") + std::to_string(d);
        std::printf("%s: %s [%s] stored as %s, %lld bytes resident\n", name.c_str(), weight->describe().c_str(), shape.c_str(),
            info->typeName().c_str(), static_cast<long long>(weight->residentBytes()));
        if (!dequant)
            return 0;
        auto values = weight->dequantize(c10::kFloat);
        if (!values)
            return fail(values.error());
        std::ofstream file(out, std::ios::binary);
        const auto& t = *values;
        file.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
        if (!file)
            return fail({vireo::ErrorCode::Io, out + ": cannot write the output file"});
        std::printf("wrote %lld float32 values (little-endian, shape [%s]) to %s\n", static_cast<long long>(t.numel()),
            shape.c_str(), out.c_str());
        return 0;
    }
    return fail({vireo::ErrorCode::NotFound, path + ": no tensor named '" + name + "'"});
}

int runBenchDequant(const std::vector<std::string>& args)
{
    vireo::bench::DequantBenchOptions options;
    std::string missing;
    options.referenceScript = vireo::cli::benchScript("dequant_reference.py", &missing);
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

// The download bench needs the local test Hub and the Python references, so a script in
// tests/bench orchestrates it and calls this program back.
int runBenchDownload(const std::vector<std::string>& args, const char* self)
{
    std::string python = "python3";
    std::string extra;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--python" && i + 1 < args.size())
            python = args[++i];
        else if (args[i] == "--mb" && i + 1 < args.size())
            extra += " --mb " + std::to_string(std::max(1, std::atoi(args[++i].c_str())));
        else if (args[i] == "--json")
            extra += " --json";
        else
            return usageError("bench download: unexpected argument " + args[i]);
    }
    std::string missing;
    const auto script = vireo::cli::benchScript("bench_download.py", &missing);
    if (script.empty())
        return usageError("bench download: " + missing);
    const std::string command = "\"" + python + "\" \"" + script + "\" \"" + self + "\"" + extra;
    return std::system(command.c_str()) == 0 ? 0 : 1;
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

// The options the device benches share: --device, --dtype, --repeat, --seed, --json. 1: args[i]
// (and its value) was one and is consumed; 0: not one of them; -1: a bad value, said in error.
struct BenchRunArgs {
    std::string* device;
    std::string* dtype;
    int* repeats;
    std::uint64_t* seed;
    bool* json;
};

int takeBenchRunArg(const std::string& bench, const std::vector<std::string>& args, std::size_t& i, const BenchRunArgs& o,
                    std::string& error)
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
    if (options.vaePath.empty() || options.upsamplerPath.empty())
        return usageError("bench stages: --vae PATH and --upsampler PATH are required");
    auto r = vireo::bench::benchStages(options);
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

int runBench(const std::vector<std::string>& args, const char* self)
{
    if (!args.empty() && args[0] == "gpu-dequant")
        return runBenchGpuDequant(args);
    if (!args.empty() && args[0] == "stages")
        return runBenchStages(args);
    if (!args.empty() && args[0] == "ideogram-step")
        return runBenchIdeogramStep(args);
#ifdef VIREO_HAS_CORE
    if (!args.empty() && args[0] == "runtime")
        return runBenchRuntime(args);
    if (!args.empty() && args[0] == "speed")
        return runBenchSpeed(args);
    if (!args.empty() && args[0] == "startup")
        return runBenchStartup(args, self);
#endif
    if (!args.empty() && args[0] == "gpu") {
        // The GPU benchmark drives diffusers and this program from a script (one device call).
        std::string python = "python3", extra;
        for (std::size_t i = 1; i < args.size(); ++i) {
            if (args[i] == "--python" && i + 1 < args.size())
                python = args[++i];
            else
                extra += " \"" + args[i] + "\"";
        }
        std::string missing;
        const auto script = vireo::cli::benchScript("bench_gpu.py", &missing);
        if (script.empty())
            return usageError("bench gpu: " + missing);
        const std::string command = "\"" + python + "\" \"" + script + "\" \"" + std::string(self) + "\"" + extra;
        return std::system(command.c_str()) == 0 ? 0 : 1;
    }
    if (!args.empty() && args[0] == "dequant")
        return runBenchDequant(args);
    if (!args.empty() && args[0] == "lora")
        return runBenchLora(args);
    if (!args.empty() && args[0] == "download")
        return runBenchDownload(args, self);
    if (!args.empty() && args[0] == "dit")
        return runBenchDit(args, self);
    if (!args.empty() && args[0] == "generate") {
        std::string python = "python3", extra, script = "bench_generate.py";
        for (std::size_t i = 1; i < args.size(); ++i) {
            if (args[i] == "--python" && i + 1 < args.size())
                python = args[++i];
            else if (args[i] == "--json" || args[i] == "--small" || args[i] == "--two-stage")
                extra += " " + args[i];
            else if (args[i] == "--ideogram")
                script = "bench_generate_ideogram.py";
            else
                return usageError("bench generate: unexpected argument " + args[i]);
        }
        std::string missing;
        const auto path = vireo::cli::benchScript(script, &missing);
        if (path.empty())
            return usageError("bench generate: " + missing);
        const std::string command = "\"" + python + "\" \"" + path + "\" \"" + std::string(self) + "\"" + extra;
        return std::system(command.c_str()) == 0 ? 0 : 1;
    }
    if (args.empty() || args[0] != "read")
        return usageError("bench: 'bench read FILE', 'bench dequant', 'bench download', 'bench dit', 'bench stages' or 'bench ideogram-step'");
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
            static_cast<unsigned long long>(r->bytes), static_cast<long long>(r->tensors), r->repeats, r->rawSeconds,
            r->tensorSeconds, r->copySeconds, r->ratio());
    } else {
        std::printf("bench read %s\n", path.c_str());
        std::printf("  %lld tensors, %s, best of %d (warm page cache)\n", static_cast<long long>(r->tensors),
            vireo::humanBytes(r->bytes).c_str(), r->repeats);
        std::printf("  raw sequential read  %8.3f s  %7.2f GB/s  (baseline: one fresh buffer)\n", r->rawSeconds,
            gb / r->rawSeconds);
        std::printf("  tensors into memory  %8.3f s  %7.2f GB/s\n", r->tensorSeconds, gb / r->tensorSeconds);
        std::printf("  ratio                %8.3fx (goal <= 1.15x)\n", r->ratio());
        std::printf("  page-cache copy      %8.3f s  %7.2f GB/s  (into a reused buffer; %.2fx of it)\n", r->copySeconds,
            gb / r->copySeconds, r->copySeconds > 0 ? r->tensorSeconds / r->copySeconds : 0.0);
    }
    return 0;
}

// The usage lines of one command (every entry of kUsage that starts with its name, with the
// lines that continue it); empty for a command kUsage does not list.
std::string commandHelp(const std::string& command)
{
#ifdef VIREO_HAS_CORE
    if (command == "generate")
        return generateHelp();
#endif
    std::string out;
    bool inEntry = false;
    const std::string text = kUsage;
    for (std::size_t at = 0; at < text.size();) {
        const auto end = text.find('\n', at);
        const std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
        at = end == std::string::npos ? text.size() : end + 1;
        const bool entryStart = line.size() > 2 && line[0] == ' ' && line[1] == ' ' && line[2] != ' ';
        if (entryStart)
            inEntry = line.compare(2, command.size(), command) == 0 && (line.size() == 2 + command.size() || line[2 + command.size()] == ' ');
        else if (line.empty() || line[0] != ' ')
            inEntry = false;
        if (inEntry)
            out += line + "\n";
    }
    return out.empty() ? out : "usage: vireo-cli " + command + " ...\n" + out;
}

int runCommand(const std::string& command, std::vector<std::string>& args, const char* self)
{
    // --help anywhere after a command is that command's help, never an error.
    if (std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; })) {
        const auto help = commandHelp(command);
        if (help.empty())
            return usageError("unknown command '" + command + "'");
        std::fputs(help.c_str(), stdout);
        return 0;
    }
    if (command == "inspect")
        return runInspect(args);
    if (command == "bench")
        return runBench(args, self);
    if (command == "tensor")
        return runTensor(args);
    if (command == "dit-forward")
        return runDitForward(args);
    if (command == "lora")
        return runLora(args);
#ifdef VIREO_HAS_CORE
    if (command == "generate")
        return runGenerate(args);
#else
    if (command == "generate")
        return usageError("generate needs a build with the studio's runtime (VIREO_GUI=ON)");
#endif
#ifdef VIREO_HAS_CORE
    if (command == "plan")
        return runPlan(args);
    if (command == "download")
        return runDownload(args);
    if (command == "trust")
        return runTrust(args);
    if (command == "cache")
        return runCache(args);
#else
    if (command == "plan" || command == "download" || command == "trust" || command == "cache")
        return usageError(command + " needs a build with the Qt layers (VIREO_GUI=ON)");
#endif
    if (command == "version" || command == "--version") {
        std::printf("vireo-cli %s\n", VIREO_VERSION);
        return 0;
    }
    return usageError("unknown command '" + command + "'");
}

} // namespace

int main(int argc, char** argv)
{
    vireo::heap::keepLargeAllocationsInTheHeap();
#ifdef VIREO_HAS_CORE
    // The studio's settings (trust approvals, local models) are shared with the window.
    QCoreApplication::setOrganizationName(QStringLiteral("Vireo"));
    QCoreApplication::setApplicationName(QStringLiteral("vireo"));
    QCoreApplication::setApplicationVersion(QStringLiteral(VIREO_VERSION));
#endif
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
        std::fputs(usage().c_str(), args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    // A switch set to something it cannot mean stops every command before it starts.
    if (const auto bad = vireo::env::problems(); !bad.empty()) {
        for (const auto& problem : bad)
            std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(problem).c_str());
        return 2;
    }
    const std::string command = args[0];
    args.erase(args.begin());
    // Nothing a command meets (a hostile file, a full disk, a bug) may abort the process: any
    // exception that escapes one ends that command with one line and exit status 1.
    try {
        return runCommand(command, args, argv[0]);
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "vireo-cli: %s: out of memory; close other programs or use a smaller model or variant\n",
            vireo::terminalSafe(command).c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "vireo-cli: %s: internal error: %s; please report it with the command you ran\n",
            vireo::terminalSafe(command).c_str(), vireo::terminalSafe(e.what()).c_str());
    } catch (...) {
        std::fprintf(stderr, "vireo-cli: %s: internal error; please report it with the command you ran\n",
            vireo::terminalSafe(command).c_str());
    }
    return 1;
}
