// vireo-bench: the developer benchmarks. Built beside vireo-cli and never installed, so the
// program users get carries no benchmark code and runs no script from a source tree.
#include "app/bench/benchcommands.h"

#include "app/cli/args.h"
#include "base/envswitch.h"
#include "inference/util/heap.h"
#include "inference/util/text.h"

#ifdef VIREO_HAS_CORE
#include <QCoreApplication>
#endif

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace {

constexpr const char* kUsage = R"(usage: vireo-bench <benchmark> [options]

benchmarks:
  read FILE [--repeat N] [--json]
                               time reading every tensor against a raw sequential read
  download [--python PY] [--mb N] [--json]
                               download speed against curl and huggingface_hub on the
                               local test Hub; bytes fetched again after an interruption
  dequant [--python PY] [--repeat N] [--json]
                               CPU dequantization throughput against memcpy and the
                               Python references; quantized linear against bf16
  gpu-dequant [--rows R] [--cols C] [--repeat N] [--json]
                               every representation dequantized on the CUDA device
                               next to a device copy of the same output
  stages --vae PATH --upsampler PATH [--size WxHxF] [--device cpu|cuda]
         [--dtype bf16|f32] [--repeat N] [--seed N] [--out FILE.safetensors] [--json]
                               the LTX-2 video VAE encoder (a still, a tiled clip), the x2
                               latent upsampler and the tiled VAE decode: time and peak
                               memory (default 768x512x121)
  stages --diffusion-decoder PATH [--size WxHxF] [...the same options]
                               LTX-2.5's diffusion video decoder alone, as the pipeline
                               decodes (its noise from a generator seeded seed + 4)
  ideogram-step --model PATH [--component transformer|unconditional_transformer]
         [--size WxH] [--text-tokens N] [--device cpu|cuda] [--dtype bf16|f32]
         [--repeat N] [--seed N] [--out FILE.safetensors] [--json]
                               one Ideogram-4 DiT forward on seeded random inputs: time,
                               peak memory, weight bytes (default 1024x1024, 512 text
                               tokens; the unconditional DiT gets none)
  runtime --model PATH [--size WxHxF] [--repeat N] [--json]
                               the studio's engine against calling the pipeline directly
  speed --model PATH [--size WxHxF] [--schedule distilled|dev] [--device D] [--json]
                               quality, balanced and fast speed modes: denoise time, steps
                               reused, PSNR of the decoded frames against quality
  startup [--vireo PATH] [--repeat N]
                               the window's cold start to a usable window
  gpu [--python PY] [...]
                               the GPU benchmark: real-width LTX-2.3 transformer against
                               diffusers, dequantization (bench_gpu.py --help); the VAE
                               encoder, decoder and upsampler: tests/bench/bench_gpu_stages.py;
                               Ideogram-4's step: tests/bench/bench_gpu_ideogram.py
  lora --model PATH [--rank R] [--swap-mb MB] [--device cpu|cuda] [--json]
                               an unfused LoRA's cost per transformer forward, and the time
                               to swap one for another
  dit [--python PY] [--layers N] [--tokens N] [--repeat N] [--json]
                               one LTX-2.3 transformer forward on CPU against diffusers on
                               the same weights; resident bytes as bf16, FP8 and Q4_K
  api [--python PY] [--model PATH] [--size WxH] [--frames N] [--runs N] [--json]
                               the local HTTP API (vireo-cli serve) against its engine: a
                               warm job's overhead, status polls per second, and a denoise
                               step's latency to its Server-Sent Event (default model: the
                               tiny LTX-2.3 fixture under VIREO_FIXTURES_ROOT)
  generate [--python PY] [--small] [--ideogram] [--two-stage] [--version 2.3|2.5] [--temporal-rounds 1] [--third-stage] [--guided] [--audio] [--reference] [--enhance] [--enhance-image] [--json]
                               each LTX-2 phase (Ideogram-4 with --ideogram) timed next to
                               diffusers' pipeline on the same weights (tiny and medium
                               configurations), as ratios; --two-stage: the two-stage
                               distilled path against diffusers' three pipeline calls
                               (2.5: the Fast recipe, its ancestral stage 1 on both sides);
                               --version 2.5: LTX-2.5's DFR pass against LTX2DFRPipeline;
                               --temporal-rounds 1: and a temporal refine round after it
                               against LTX2DFRTemporalRefinePipeline; --third-stage (2.5):
                               and the 4K path against diffusers' recipe; --audio: and
                               audio-to-video (the sound encoded and held frozen);
                               --reference: an IC-LoRA's reference clip; --enhance (2.5):
                               the prompt enhancer against diffusers' enhance_prompt;
                               --enhance-image (2.5): the same shown a start image
  version                      print the version

download, dequant, gpu, dit and generate run their Python side from tests/bench of a source
tree (VIREO_SOURCE_DIR, else the working folder); download, gpu, dit and generate run the
vireo-cli built beside this program. runtime, speed and startup need a build with the Qt
layers (VIREO_GUI=ON).

environment switches (1/0, true/false, on/off, yes/no; anything else is refused):
)";

std::string usage()
{
    return kUsage + vireo::env::helpText();
}

// The usage lines of one benchmark; empty for a name kUsage does not list.
std::string commandHelp(const std::string& command)
{
    const auto out = vireo::cli::usageEntries(kUsage, command);
    return out.empty() ? out : "usage: vireo-bench " + command + " ...\n" + out;
}

int runCommand(const std::vector<std::string>& args, const char* self)
{
    using Args = const std::vector<std::string>&;
    const std::vector<vireo::cli::Command> benchmarks = {
        {"read", runBenchRead},
        {"dequant", runBenchDequant},
        {"gpu-dequant", runBenchGpuDequant},
        {"stages", runBenchStages},
        {"ideogram-step", runBenchIdeogramStep},
        {"lora", runBenchLora},
        {"download", [self](Args a) { return runBenchDownload(a, self); }},
        {"dit", [self](Args a) { return runBenchDit(a, self); }},
        {"generate", [self](Args a) { return runBenchGenerate(a, self); }},
        {"api", [self](Args a) { return runBenchApi(a, self); }},
        {"gpu", [self](Args a) { return runBenchGpu(a, self); }},
#ifdef VIREO_HAS_CORE
        {"runtime", runBenchRuntime},
        {"speed", runBenchSpeed},
        {"startup", [self](Args a) { return runBenchStartup(a, self); }},
#else
        {"runtime", [](Args a) { return usageError(a[0] + " needs a build with the Qt layers (VIREO_GUI=ON)"); }},
        {"speed", [](Args a) { return usageError(a[0] + " needs a build with the Qt layers (VIREO_GUI=ON)"); }},
        {"startup", [](Args a) { return usageError(a[0] + " needs a build with the Qt layers (VIREO_GUI=ON)"); }},
#endif
    };
    return vireo::cli::dispatch("vireo-bench", VIREO_VERSION, args, benchmarks, commandHelp, usageError, "benchmark");
}

}  // namespace

int usageError(const std::string& message)
{
    std::fprintf(stderr, "vireo-bench: %s\n\n%s", vireo::terminalSafe(message).c_str(), usage().c_str());
    return 2;
}

int fail(const vireo::Error& error)
{
    // Messages carry file and tensor names from the files: no escape sequence may reach the
    // terminal, and the error stays one line.
    std::fprintf(stderr, "vireo-bench: %s\n", vireo::terminalSafe(error.message).c_str());
    return 1;
}

int main(int argc, char** argv)
{
    vireo::heap::keepLargeAllocationsInTheHeap();
#ifdef VIREO_HAS_CORE
    // The studio's settings (local models, trust approvals) are the window's.
    QCoreApplication::setOrganizationName(QStringLiteral("Vireo"));
    QCoreApplication::setApplicationName(QStringLiteral("vireo"));
    QCoreApplication::setApplicationVersion(QStringLiteral(VIREO_VERSION));
#endif
    return vireo::cli::runProgram(
        "vireo-bench", argc, argv, usage(), [&](const std::vector<std::string>& all) { return runCommand(all, argv[0]); });
}
