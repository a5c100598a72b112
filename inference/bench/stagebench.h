#pragma once

#include "inference/util/result.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace vireo::bench {

struct StageBenchOptions {
    std::filesystem::path vaePath;  // anything Ltx2Weights::open takes that holds the full video VAE
    std::filesystem::path upsamplerPath;  // anything LatentUpsampler::load takes
    // The video: W and H multiples of twice the VAE's spatial scale (stage 1 runs at half
    // size), F = 8k + 1. Default: the anchor workload of the GPU benchmark.
    std::int64_t width = 768, height = 512, frames = 121;
    std::string device = "cpu";  // "cpu", "cuda", "cuda:1"
    std::string dtype = "bf16";  // bf16 | f32
    int repeats = 3;  // timed runs after one warm-up; the median is the figure
    std::uint64_t seed = 1234;  // inputs are drawn on the CPU in float32 (see stageBenchInputs)
    std::filesystem::path outputsPath;  // optional: the four outputs as float32 safetensors
    // LTX-2.5's diffusion video decoder (anything Ltx2Weights::open reads it from): timed alone by
    // benchDiffusionDecode, on the final latent as the pipeline hands it over.
    std::filesystem::path diffusionDecoderPath;
};

struct StageRow {
    std::string name;  // encode_still | encode_clip | upsample | decode
    std::vector<std::int64_t> inputShape, outputShape;
    std::string layout;  // "whole" or the tiles and chunks the pipeline's rule picked
    double medianSeconds = 0;
    std::vector<double> seconds;  // every timed run
    // CUDA: the caching allocator's peak during the runs above what was allocated before
    // (inputs and weights), and the absolute peak. CPU: growth of the peak resident set over
    // the warm-up run (a lower bound: freed heap stays resident and is reused); -1 = unknown.
    std::int64_t peakBytes = -1, peakTotalBytes = -1;
    bool finite = false;
    double sum = 0, absMean = 0;  // of the float32 output
};

struct StageBenchResult {
    std::string device, dtype, memoryMethod;
    std::int64_t width = 0, height = 0, frames = 0;
    int repeats = 0;
    double encoderLoadSeconds = 0, upsamplerLoadSeconds = 0, decoderLoadSeconds = 0;
    std::int64_t encoderResidentBytes = 0, upsamplerResidentBytes = 0, decoderResidentBytes = 0;
    std::string upsampler;  // describeLatentUpsampler
    std::vector<StageRow> rows;
};

// The LTX-2 stages the denoiser does not cover, timed on random inputs as the pipeline runs
// them: the video VAE encoder on one full-size still (image-to-video's condition) and on a clip
// (tiled and chunked by the pipeline's rule), the x2 latent upsampler on the stage-1 latent,
// and the video VAE decoder on the full-size latent (tiled by the pipeline's rule). Each op is
// timed to completion (device synchronized) after a warm-up.
Result<StageBenchResult> benchStages(const StageBenchOptions& options);
// One row, "diffusion_decode": the normalized latent [1, C, F', H', W'] (randn, CPU generator
// seed + 3) denormalized with the decoder's statistics in float32 and decoded as the pipeline
// decodes (the reference's tiles past 768 px or 80 frames), its noise from a CPU generator
// seeded seed + 4 on every run, so a Python driver reproduces the output.
Result<StageBenchResult> benchDiffusionDecode(const StageBenchOptions& options);

std::string formatStageBench(const StageBenchResult& result);
std::string stageBenchJson(const StageBenchResult& result);

}  // namespace vireo::bench
