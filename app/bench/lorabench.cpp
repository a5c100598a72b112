// vireo-bench lora: what an unfused LoRA costs per transformer forward and to swap between
// generations.
#include "app/bench/benchcommands.h"

#include "app/cli/args.h"
#include "inference/lora/lora.h"
#include "inference/models/ltx2/ltx2transformer.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/models/nn/layers.h"
#include "inference/tensorfile/tensorset.h"
#include "inference/util/device.h"
#include "inference/util/format.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <unistd.h>

namespace {

int benchUsage(const std::string& message)
{
    std::fprintf(stderr,
        "vireo-bench lora: %s\n"
        "usage: vireo-bench lora --model PATH [--model PATH ...] [--rank R] [--swap-mb MB] [--tokens N] [--repeat N]\n"
        "         [--device cpu|cuda] [--dtype f32|bf16] [--json]\n"
        "  One transformer forward with and without an unfused rank-R LoRA on every linear layer (the ratio; goal\n"
        "  under 1.10), and the time to swap it for another of about MB megabytes once the file is in the page cache\n"
        "  (goal under 1 s for 300 MB). The LoRAs are written to a temporary folder and removed.\n",
        message.c_str());
    return 2;
}

// A random LoRA in diffusers' layout aiming at every layer, rank chosen per layer (at most its
// smaller side), in bf16 as releases ship.
std::int64_t writeRandomLora(
    const std::filesystem::path& path, const std::vector<vireo::lora::Target>& targets, std::int64_t rank, std::uint64_t seed)
{
    at::manual_seed(seed);
    std::map<std::string, at::Tensor> tensors;
    std::int64_t bytes = 0;
    for (const auto& t : targets) {
        const auto r = std::min({rank, t.in, t.out});
        auto down = (at::randn({r, t.in}) * 0.02).to(at::kBFloat16);
        auto up = (at::randn({t.out, r}) * 0.02).to(at::kBFloat16);
        bytes += (down.numel() + up.numel()) * 2;
        tensors["transformer." + t.name + ".lora_A.weight"] = down;
        tensors["transformer." + t.name + ".lora_B.weight"] = up;
    }
    if (auto w = vireo::tensorfile::writeSafetensors(path, tensors); !w)
        throw std::runtime_error(w.error().message);
    return bytes;
}

void readThrough(const std::filesystem::path& path)
{
    // Into the page cache, as a LoRA the user picked a moment ago would be.
    std::ifstream in(path, std::ios::binary);
    std::vector<char> buffer(8 << 20);
    while (in.read(buffer.data(), static_cast<std::streamsize>(buffer.size())) || in.gcount() > 0) {}
}

}  // namespace

int runBenchLora(const std::vector<std::string>& args)
{
    using vireo::cli::parseNumber;
    std::vector<std::filesystem::path> models;
    std::int64_t rank = 32, swapMb = 300, tokens = 4096;
    int repeats = 5;
    bool asJson = false;
    c10::Device device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const auto& a = args[i];
        const bool hasValue = i + 1 < args.size();
        auto number = [&](std::int64_t lo, std::int64_t hi) -> std::optional<std::int64_t> {
            auto n = parseNumber<std::int64_t>(args[++i], lo, hi);
            return n ? std::optional<std::int64_t>(*n) : std::nullopt;
        };
        if (a == "--json") {
            asJson = true;
        } else if (a == "--model" && hasValue) {
            models.emplace_back(args[++i]);
        } else if (a == "--rank" && hasValue) {
            auto n = number(1, 4096);
            if (!n)
                return benchUsage("--rank is 1 to 4096");
            rank = *n;
        } else if (a == "--swap-mb" && hasValue) {
            auto n = number(1, 100000);
            if (!n)
                return benchUsage("--swap-mb is 1 to 100000");
            swapMb = *n;
        } else if (a == "--tokens" && hasValue) {
            auto n = number(16, 1 << 20);
            if (!n)
                return benchUsage("--tokens is 16 to 1048576");
            tokens = *n;
        } else if (a == "--repeat" && hasValue) {
            auto n = number(1, 1000);
            if (!n)
                return benchUsage("--repeat is 1 to 1000");
            repeats = static_cast<int>(*n);
        } else if (a == "--device" && hasValue) {
            const auto d = args[++i];
            if (d != "cpu" && d.rfind("cuda", 0) != 0)
                return benchUsage("--device is cpu or cuda[:N]");
            device = c10::Device(d);
        } else if (a == "--dtype" && hasValue) {
            const auto d = args[++i];
            if (d != "f32" && d != "bf16")
                return benchUsage("--dtype is f32 or bf16");
            dtype = d == "bf16" ? c10::kBFloat16 : c10::kFloat;
        } else {
            return benchUsage("unexpected argument " + a);
        }
    }
    if (models.empty())
        return benchUsage("--model is required");
    using Clock = std::chrono::steady_clock;
    const auto dir = std::filesystem::temp_directory_path() / ("vireo-bench-lora-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    struct Cleanup {
        std::filesystem::path dir;
        ~Cleanup()
        {
            for (const char* f : {"a.safetensors", "b.safetensors", "swap-a.safetensors", "swap-b.safetensors"})
                ::unlink((dir / f).c_str());
            ::rmdir(dir.c_str());
        }
    } cleanup{dir};
    try {
        c10::InferenceMode guard;
        auto weights = vireo::ltx2::Ltx2Weights::open(models);
        if (!weights) {
            std::fprintf(stderr, "vireo-bench: %s\n", weights.error().message.c_str());
            return 1;
        }
        vireo::ltx2::TransformerLoadOptions options;
        options.device = device;
        options.dtype = dtype;
        auto model = vireo::ltx2::Transformer::load(*weights, options);
        if (!model) {
            std::fprintf(stderr, "vireo-bench: %s\n", model.error().message.c_str());
            return 1;
        }
        const auto& c = model->config();
        const auto targets = model->loraTargets();

        // Inputs of the model's own widths: the video tokens laid out as 2 frames of 32 rows.
        vireo::ltx2::TransformerInputs in;
        const std::int64_t frames = 2, rows = 32, cols = std::max<std::int64_t>(1, tokens / (frames * rows)), audio = 50, text = 128;
        const auto opts = at::TensorOptions().dtype(dtype).device(device);
        in.hiddenStates = at::randn({1, frames * rows * cols, c.inChannels}, opts);
        in.audioHiddenStates = at::randn({1, audio, c.audioInChannels}, opts);
        in.encoderHiddenStates = at::randn({1, text, c.usePromptEmbeddings ? c.captionChannels : c.crossAttentionDim}, opts);
        in.audioEncoderHiddenStates = at::randn({1, text, c.usePromptEmbeddings ? c.captionChannels : c.audioCrossAttentionDim}, opts);
        in.timestep = at::full({1}, 700.0, at::TensorOptions().device(device));
        in.sigma = in.timestep;
        in.numFrames = frames;
        in.height = rows;
        in.width = cols;
        in.audioNumFrames = audio;

        auto timeForwards = [&]() {
            std::vector<double> t;
            for (int r = 0; r < repeats + 1; ++r) {
                vireo::deviceSynchronize(device);
                const auto start = Clock::now();
                auto out = model->forward(in);
                vireo::deviceSynchronize(device);
                if (!out)
                    throw std::runtime_error(out.error().message);
                t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
            }
            t.erase(t.begin());  // warm-up
            std::sort(t.begin(), t.end());
            return t[t.size() / 2];
        };
        auto apply = [&](const std::filesystem::path& file) {
            std::vector<vireo::nn::LoraDelta> deltas;
            const auto start = Clock::now();
            const auto outcome = vireo::lora::prepare({{file, 1.0}}, targets, dtype, device, &deltas);
            (void)model->setLoraDeltas({});
            auto set = model->setLoraDeltas(deltas);
            vireo::deviceSynchronize(device);
            if (!set || outcome.at(0).status != "applied")
                throw std::runtime_error(file.string() + ": " + (set ? outcome.at(0).status : set.error().message));
            return std::pair{std::chrono::duration<double>(Clock::now() - start).count(), *set};
        };

        const double base = timeForwards();
        const auto bytesA = writeRandomLora(dir / "a.safetensors", targets, rank, 1);
        writeRandomLora(dir / "b.safetensors", targets, rank, 2);
        readThrough(dir / "a.safetensors");
        readThrough(dir / "b.safetensors");
        const auto [applySeconds, adapterBytes] = apply(dir / "a.safetensors");
        const double withLora = timeForwards();
        const auto [swapSmall, unused] = apply(dir / "b.safetensors");
        (void)unused;

        // The swap at the size of a real release: rank raised until the file is about swap-mb.
        std::int64_t perRank = 0;
        for (const auto& t : targets)
            perRank += (t.in + t.out) * 2;
        const auto swapRank = std::clamp<std::int64_t>(swapMb * 1000000 / std::max<std::int64_t>(1, perRank), 1, 4096);
        const auto swapBytes = writeRandomLora(dir / "swap-a.safetensors", targets, swapRank, 3);
        writeRandomLora(dir / "swap-b.safetensors", targets, swapRank, 4);
        readThrough(dir / "swap-a.safetensors");
        readThrough(dir / "swap-b.safetensors");
        (void)apply(dir / "swap-a.safetensors");
        const auto [swapSeconds, swapAdapterBytes] = apply(dir / "swap-b.safetensors");
        (void)model->setLoraDeltas({});

        const double ratio = withLora / base;
        if (asJson) {
            nlohmann::json j{{"version", c.version()}, {"layers", c.layers}, {"dim", c.dim()}, {"device", device.str()},
                {"dtype", dtype == c10::kBFloat16 ? "bf16" : "f32"}, {"threads", at::get_num_threads()}, {"tokens", frames * rows * cols},
                {"targets", targets.size()}, {"rank", rank}, {"lora_bytes", bytesA}, {"adapter_bytes", adapterBytes},
                {"forward_seconds", base}, {"forward_lora_seconds", withLora}, {"ratio", ratio}, {"ratio_goal", 1.10},
                {"apply_seconds", applySeconds}, {"swap_seconds_rank", swapSmall}, {"swap_rank", swapRank}, {"swap_file_bytes", swapBytes},
                {"swap_adapter_bytes", swapAdapterBytes}, {"swap_seconds", swapSeconds}, {"swap_goal_seconds", 1.0}};
            std::printf("%s\n", j.dump().c_str());
        } else {
            std::printf("bench lora: LTX-%s transformer, %lld layers, dim %lld, %s %s, %lld video tokens, %d threads\n",
                c.version().c_str(), static_cast<long long>(c.layers), static_cast<long long>(c.dim()), device.str().c_str(),
                dtype == c10::kBFloat16 ? "bf16" : "f32", static_cast<long long>(frames * rows * cols), at::get_num_threads());
            std::printf("  forward              %8.4f s (median of %d)\n", base, repeats);
            std::printf("  forward + rank-%-4lld %8.4f s  ratio %.3f (goal under 1.10: %s); %zu layers, LoRA %s\n",
                static_cast<long long>(rank), withLora, ratio, ratio < 1.10 ? "met" : "NOT met", targets.size(),
                vireo::humanBytes(static_cast<std::uint64_t>(bytesA)).c_str());
            std::printf("  apply                %8.4f s; swap to another rank-%lld LoRA %.4f s\n", applySeconds,
                static_cast<long long>(rank), swapSmall);
            std::printf("  swap (rank %lld, %s file) %.3f s (goal under 1 s for 300 MB: %s)\n", static_cast<long long>(swapRank),
                vireo::humanBytes(static_cast<std::uint64_t>(swapBytes)).c_str(), swapSeconds,
                swapSeconds < 1.0 * std::max<double>(1.0, static_cast<double>(swapBytes) / 300e6) ? "met" : "NOT met");
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "vireo-bench: bench lora: %s\n", e.what());
        return 1;
    }
}
