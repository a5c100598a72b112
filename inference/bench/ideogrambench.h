#pragma once

#include "inference/util/result.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vireo::bench {

struct IdeogramStepBenchOptions {
    std::filesystem::path modelPath;  // anything ideogram4::Transformer::load takes
    // transformer: the conditional DiT on text + image tokens; unconditional_transformer: the
    // CFG prior, which the pipeline runs on the image tokens alone.
    std::string component = "transformer";
    std::int64_t width = 1024, height = 1024;  // multiples of 16 (2x2 patches of 8x latents)
    // Text tokens of the conditional step (default 512); the unconditional one has none.
    std::optional<std::int64_t> textTokens;
    std::string device = "cpu";  // "cpu", "cuda", "cuda:1"
    std::string dtype = "bf16";  // bf16 | f32
    int repeats = 3;  // timed runs after one warm-up; the median is the figure
    std::uint64_t seed = 1234;  // inputs are drawn on the CPU in float32 (see benchIdeogramStep)
    std::filesystem::path outputPath;  // optional: the velocity as float32 safetensors
};

struct IdeogramStepBenchResult {
    std::string device, dtype, component, memoryMethod;
    std::int64_t width = 0, height = 0, gridH = 0, gridW = 0, imageTokens = 0, textTokens = 0;
    std::int64_t layers = 0, hidden = 0, heads = 0, intermediate = 0, llmFeaturesDim = 0;
    bool fusedQkv = false;
    double timestep = 0;  // model time in [0, 1], before rounding to the compute dtype
    int repeats = 0;
    double loadSeconds = 0;
    std::int64_t residentBytes = 0;
    std::map<std::string, std::int64_t> bytesByRepresentation;
    double medianSeconds = 0;
    std::vector<double> seconds;  // every timed run
    // CUDA: the caching allocator's peak during the runs above what was allocated before
    // (weights and inputs), and the absolute peak. CPU: growth of the peak resident set over
    // the warm-up run (a lower bound: freed heap stays resident and is reused); -1 = unknown.
    std::int64_t peakBytes = -1, peakTotalBytes = -1;
    std::vector<std::int64_t> outputShape;
    bool finite = false;
    double sum = 0, absMean = 0;  // of the float32 output
};

// One Ideogram-4 denoising step of one DiT as Ideogram4Pipeline runs it, on seeded random
// inputs: latents [gridH * gridW, inChannels] ~ N(0, 1) from a CPU float32 generator seeded
// `seed`, text features [textTokens, llmFeaturesDim] ~ N(0, 1) seeded seed + 1, the model time
// ~ U(0, 1) seeded seed + 2 (torch.Generator().manual_seed(...) with torch.randn / torch.rand
// draws the same), all rounded to the compute dtype. The forward is timed to completion
// (device synchronized on both ends) after a warm-up.
Result<IdeogramStepBenchResult> benchIdeogramStep(const IdeogramStepBenchOptions& options);

std::string formatIdeogramStepBench(const IdeogramStepBenchResult& result);
std::string ideogramStepBenchJson(const IdeogramStepBenchResult& result);

}  // namespace vireo::bench
