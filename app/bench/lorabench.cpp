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
#include <tuple>
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

// What the command line asks for, parsed apart from the bench so a usage error comes before any model is opened.
struct LoraBenchArgs {
    std::vector<std::filesystem::path> models;
    std::int64_t rank = 32, swapMb = 300, tokens = 4096;
    int repeats = 5;
    bool asJson = false;
    c10::Device device{c10::kCPU};
    c10::ScalarType dtype = c10::kFloat;
};

// The arguments into `o`; the exit status of the usage message when they are refused, nothing when they are good.
std::optional<int> parseLoraBenchArgs(const std::vector<std::string>& args, LoraBenchArgs& o)
{
    using vireo::cli::parseNumber;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const auto& a = args[i];
        const bool hasValue = i + 1 < args.size();
        auto number = [&](std::int64_t lo, std::int64_t hi) -> std::optional<std::int64_t> {
            auto n = parseNumber<std::int64_t>(args[++i], lo, hi);
            return n ? std::optional<std::int64_t>(*n) : std::nullopt;
        };
        if (a == "--json") {
            o.asJson = true;
        } else if (a == "--model" && hasValue) {
            o.models.emplace_back(args[++i]);
        } else if (a == "--rank" && hasValue) {
            auto n = number(1, 4096);
            if (!n)
                return benchUsage("--rank is 1 to 4096");
            o.rank = *n;
        } else if (a == "--swap-mb" && hasValue) {
            auto n = number(1, 100000);
            if (!n)
                return benchUsage("--swap-mb is 1 to 100000");
            o.swapMb = *n;
        } else if (a == "--tokens" && hasValue) {
            auto n = number(16, 1 << 20);
            if (!n)
                return benchUsage("--tokens is 16 to 1048576");
            o.tokens = *n;
        } else if (a == "--repeat" && hasValue) {
            auto n = number(1, 1000);
            if (!n)
                return benchUsage("--repeat is 1 to 1000");
            o.repeats = static_cast<int>(*n);
        } else if (a == "--device" && hasValue) {
            const auto& d = args[++i];
            if (d != "cpu" && d.rfind("cuda", 0) != 0)
                return benchUsage("--device is cpu or cuda[:N]");
            o.device = c10::Device(d);
        } else if (a == "--dtype" && hasValue) {
            const auto& d = args[++i];
            if (d != "f32" && d != "bf16")
                return benchUsage("--dtype is f32 or bf16");
            o.dtype = d == "bf16" ? c10::kBFloat16 : c10::kFloat;
        } else {
            return benchUsage("unexpected argument " + a);
        }
    }
    if (o.models.empty())
        return benchUsage("--model is required");
    return std::nullopt;
}

// Inputs of the model's own widths: the video tokens laid out as 2 frames of 32 rows.
vireo::ltx2::TransformerInputs loraBenchInputs(const vireo::ltx2::TransformerConfig& c, const LoraBenchArgs& o)
{
    vireo::ltx2::TransformerInputs in;
    const std::int64_t frames = 2, rows = 32, cols = std::max<std::int64_t>(1, o.tokens / (frames * rows)), audio = 50, text = 128;
    const auto opts = at::TensorOptions().dtype(o.dtype).device(o.device);
    in.hiddenStates = at::randn({1, frames * rows * cols, c.inChannels}, opts);
    in.audioHiddenStates = at::randn({1, audio, c.audioInChannels}, opts);
    in.encoderHiddenStates = at::randn({1, text, c.usePromptEmbeddings ? c.captionChannels : c.crossAttentionDim}, opts);
    in.audioEncoderHiddenStates = at::randn({1, text, c.usePromptEmbeddings ? c.captionChannels : c.audioCrossAttentionDim}, opts);
    in.timestep = at::full({1}, 700.0, at::TensorOptions().device(o.device));
    in.sigma = in.timestep;
    in.numFrames = frames;
    in.height = rows;
    in.width = cols;
    in.audioNumFrames = audio;
    return in;
}

// What the bench measured, handed from the timing to the report.
struct LoraBenchTimes {
    double base = 0, withLora = 0, applySeconds = 0, swapSmall = 0, swapSeconds = 0;
    std::int64_t bytesA = 0, adapterBytes = 0, swapRank = 0, swapBytes = 0, swapAdapterBytes = 0;
};

// The bench proper: forwards without and with the LoRA, then its apply and swaps, with the LoRA files written to `dir`.
LoraBenchTimes timeLoraBench(vireo::ltx2::Transformer& model, const vireo::ltx2::TransformerInputs& in,
    const std::vector<vireo::lora::Target>& targets, const LoraBenchArgs& o, const std::filesystem::path& dir)
{
    using Clock = std::chrono::steady_clock;
    auto timeForwards = [&]() {
        std::vector<double> t;
        for (int r = 0; r < o.repeats + 1; ++r) {
            vireo::deviceSynchronize(o.device);
            const auto start = Clock::now();
            auto out = model.forward(in);
            vireo::deviceSynchronize(o.device);
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
        const auto outcome = vireo::lora::prepare({{file, 1.0}}, targets, o.dtype, o.device, &deltas);
        (void)model.setLoraDeltas({});
        auto set = model.setLoraDeltas(deltas);
        vireo::deviceSynchronize(o.device);
        if (!set || outcome.at(0).status != "applied")
            throw std::runtime_error(file.string() + ": " + (set ? outcome.at(0).status : set.error().message));
        return std::pair{std::chrono::duration<double>(Clock::now() - start).count(), *set};
    };

    LoraBenchTimes t;
    t.base = timeForwards();
    t.bytesA = writeRandomLora(dir / "a.safetensors", targets, o.rank, 1);
    writeRandomLora(dir / "b.safetensors", targets, o.rank, 2);
    readThrough(dir / "a.safetensors");
    readThrough(dir / "b.safetensors");
    std::tie(t.applySeconds, t.adapterBytes) = apply(dir / "a.safetensors");
    t.withLora = timeForwards();
    t.swapSmall = apply(dir / "b.safetensors").first;

    // The swap at the size of a real release: rank raised until the file is about swap-mb.
    std::int64_t perRank = 0;
    for (const auto& target : targets)
        perRank += (target.in + target.out) * 2;
    t.swapRank = std::clamp<std::int64_t>(o.swapMb * 1000000 / std::max<std::int64_t>(1, perRank), 1, 4096);
    t.swapBytes = writeRandomLora(dir / "swap-a.safetensors", targets, t.swapRank, 3);
    writeRandomLora(dir / "swap-b.safetensors", targets, t.swapRank, 4);
    readThrough(dir / "swap-a.safetensors");
    readThrough(dir / "swap-b.safetensors");
    (void)apply(dir / "swap-a.safetensors");
    std::tie(t.swapSeconds, t.swapAdapterBytes) = apply(dir / "swap-b.safetensors");
    (void)model.setLoraDeltas({});
    return t;
}

// The report, one JSON line for scripts or a few lines for a person, with each goal met or not.
void printLoraBench(
    const LoraBenchArgs& o, const vireo::ltx2::TransformerConfig& c, std::size_t targets, std::int64_t videoTokens, const LoraBenchTimes& t)
{
    const double ratio = t.withLora / t.base;
    if (o.asJson) {
        nlohmann::json j{{"version", c.version()}, {"layers", c.layers}, {"dim", c.dim()}, {"device", o.device.str()},
            {"dtype", o.dtype == c10::kBFloat16 ? "bf16" : "f32"}, {"threads", at::get_num_threads()}, {"tokens", videoTokens},
            {"targets", targets}, {"rank", o.rank}, {"lora_bytes", t.bytesA}, {"adapter_bytes", t.adapterBytes},
            {"forward_seconds", t.base}, {"forward_lora_seconds", t.withLora}, {"ratio", ratio}, {"ratio_goal", 1.10},
            {"apply_seconds", t.applySeconds}, {"swap_seconds_rank", t.swapSmall}, {"swap_rank", t.swapRank},
            {"swap_file_bytes", t.swapBytes}, {"swap_adapter_bytes", t.swapAdapterBytes}, {"swap_seconds", t.swapSeconds},
            {"swap_goal_seconds", 1.0}};
        std::printf("%s\n", j.dump().c_str());
    } else {
        std::printf("bench lora: LTX-%s transformer, %lld layers, dim %lld, %s %s, %lld video tokens, %d threads\n", c.version().c_str(),
            static_cast<long long>(c.layers), static_cast<long long>(c.dim()), o.device.str().c_str(),
            o.dtype == c10::kBFloat16 ? "bf16" : "f32", static_cast<long long>(videoTokens), at::get_num_threads());
        std::printf("  forward              %8.4f s (median of %d)\n", t.base, o.repeats);
        std::printf("  forward + rank-%-4lld %8.4f s  ratio %.3f (goal under 1.10: %s); %zu layers, LoRA %s\n",
            static_cast<long long>(o.rank), t.withLora, ratio, ratio < 1.10 ? "met" : "NOT met", targets,
            vireo::humanBytes(static_cast<std::uint64_t>(t.bytesA)).c_str());
        std::printf("  apply                %8.4f s; swap to another rank-%lld LoRA %.4f s\n", t.applySeconds,
            static_cast<long long>(o.rank), t.swapSmall);
        std::printf("  swap (rank %lld, %s file) %.3f s (goal under 1 s for 300 MB: %s)\n", static_cast<long long>(t.swapRank),
            vireo::humanBytes(static_cast<std::uint64_t>(t.swapBytes)).c_str(), t.swapSeconds,
            t.swapSeconds < 1.0 * std::max<double>(1.0, static_cast<double>(t.swapBytes) / 300e6) ? "met" : "NOT met");
    }
}

}  // namespace

int runBenchLora(const std::vector<std::string>& args)
{
    LoraBenchArgs o;
    if (const auto refused = parseLoraBenchArgs(args, o))
        return *refused;
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
        auto weights = vireo::ltx2::Ltx2Weights::open(o.models);
        if (!weights) {
            std::fprintf(stderr, "vireo-bench: %s\n", weights.error().message.c_str());
            return 1;
        }
        vireo::ltx2::TransformerLoadOptions options;
        options.device = o.device;
        options.dtype = o.dtype;
        auto model = vireo::ltx2::Transformer::load(*weights, options);
        if (!model) {
            std::fprintf(stderr, "vireo-bench: %s\n", model.error().message.c_str());
            return 1;
        }
        const auto& c = model->config();
        const auto targets = model->loraTargets();
        const auto in = loraBenchInputs(c, o);
        const auto times = timeLoraBench(*model, in, targets, o, dir);
        printLoraBench(o, c, targets.size(), in.numFrames * in.height * in.width, times);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "vireo-bench: bench lora: %s\n", e.what());
        return 1;
    }
}
