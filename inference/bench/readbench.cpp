#include "inference/bench/readbench.h"

#include "inference/tensorfile/modelsource.h"
#include "inference/tensorfile/tensorview.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

namespace vireo::bench {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start)
{
    return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

Result<ReadBenchResult> benchRead(const std::filesystem::path& path, int repeats)
{
    auto source = tensorfile::ModelSource::open(path);
    if (!source)
        return source.error();
    ReadBenchResult result;
    result.repeats = std::max(1, repeats);
    for (const auto& cp : source->checkpoints) {
        result.tensors += static_cast<std::int64_t>(cp.tensors.size());
        result.bytes += cp.tensorBytes();
    }

    constexpr std::uint64_t kChunk = 64ull << 20;
    // The baseline reads the same byte ranges sequentially into one fresh buffer allocated
    // like the tensors are: the cost of getting those bytes into new memory, with none of the
    // per-tensor work. With prefaulted=true it reuses one touched buffer instead: the bare
    // page-cache copy, a bound no reader into fresh memory can reach.
    at::Tensor reused;
    auto rawPass = [&](bool prefaulted) -> Result<double> {
        if (prefaulted && !reused.defined()) {
            reused = tensorfile::emptyHost({static_cast<std::int64_t>(result.bytes)}, at::kByte);
            reused.fill_(0);
        }
        const auto start = Clock::now();
        auto buffer = prefaulted ? reused : tensorfile::emptyHost({static_cast<std::int64_t>(result.bytes)}, at::kByte);
        auto* base = static_cast<std::byte*>(buffer.data_ptr());
        std::uint64_t at = 0;
        for (const auto& cp : source->checkpoints)
            for (const auto& t : cp.tensors)
                for (std::uint64_t done = 0; done < t.bytes; done += kChunk) {
                    const auto n = std::min(kChunk, t.bytes - done);
                    auto r = cp.fileOf(t)->readAt(t.offset + done, base + at, n);
                    if (!r)
                        return r.error();
                    at += n;
                }
        return secondsSince(start);
    };
    auto tensorPass = [&]() -> Result<double> {
        std::vector<at::Tensor> kept;
        kept.reserve(static_cast<std::size_t>(result.tensors));
        const auto start = Clock::now();
        for (const auto& cp : source->checkpoints)
            for (const auto& t : cp.tensors) {
                auto tensor = tensorfile::readTensor(cp, t);
                if (!tensor)
                    return tensor.error();
                kept.push_back(std::move(*tensor));
            }
        const auto seconds = secondsSince(start);
        kept.clear();
        return seconds;
    };

    auto warm = rawPass(true);
    if (!warm)
        return warm.error();
    result.rawSeconds = 1e300;
    result.tensorSeconds = 1e300;
    result.copySeconds = 1e300;
    for (int i = 0; i < result.repeats; ++i) {
        // Alternate the order so neither side always runs right after the other freed memory.
        Result<double> raw = 0.0, tensors = 0.0;
        if (i % 2 == 0) {
            raw = rawPass(false);
            tensors = raw ? tensorPass() : raw;
        } else {
            tensors = tensorPass();
            raw = tensors ? rawPass(false) : tensors;
        }
        if (!raw)
            return raw.error();
        if (!tensors)
            return tensors.error();
        auto copy = rawPass(true);
        if (!copy)
            return copy.error();
        result.copySeconds = std::min(result.copySeconds, *copy);
        result.rawSeconds = std::min(result.rawSeconds, *raw);
        result.tensorSeconds = std::min(result.tensorSeconds, *tensors);
    }
    return result;
}

}  // namespace vireo::bench
