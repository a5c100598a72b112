#include "inference/bench/gpubench.h"

#include "inference/quant/quantizedweight.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <sstream>

namespace vireo::bench {

namespace {

using quant::QuantizedWeight;

double medianSeconds(int repeats, const std::function<void()>& body)
{
    body();  // warm-up: allocator, module load
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
        at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
        start.record();
        body();
        stop.record();
        stop.synchronize();
        times.push_back(start.elapsed_time(stop) / 1000.0);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

// GGUF blocks of random bytes with small finite fp16 scales, as real data has.
at::Tensor ggufBlocks(int type, std::int64_t nBlocks, int bytes, const std::vector<int>& scaleOffsets)
{
    auto blocks = at::randint(0, 256, {nBlocks, bytes}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA));
    const auto scales = at::empty({nBlocks, static_cast<std::int64_t>(scaleOffsets.size())}, at::TensorOptions().device(at::kCUDA))
                            .uniform_(1e-3, 1e-2)
                            .to(at::kHalf)
                            .view(at::kByte)
                            .view({nBlocks, -1, 2});
    for (std::size_t i = 0; i < scaleOffsets.size(); ++i)
        blocks.narrow(1, scaleOffsets[i], 2).copy_(scales.select(1, static_cast<std::int64_t>(i)));
    (void)type;
    return blocks.reshape({-1});
}

}  // namespace

Result<GpuDequantResult> benchDequantCuda(std::int64_t rows, std::int64_t cols, int repeats)
{
    if (!at::hasCUDA())
        return makeError(ErrorCode::Unsupported, "bench gpu-dequant needs a CUDA device");
    try {
        GpuDequantResult r;
        r.device = at::cuda::getCurrentDeviceProperties()->name;
        r.rows = rows;
        r.cols = cols;
        const std::vector<std::int64_t> shape{rows, cols};
        const auto n = rows * cols;
        auto out = at::empty(shape, at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA));
        const auto source = at::randn(shape, out.options());
        r.copySeconds = medianSeconds(repeats, [&] { out.copy_(source); });
        r.copyBytes = 2 * n * 2;

        std::vector<std::pair<std::string, QuantizedWeight>> weights;
        struct G {
            const char* name;
            int id, elements, bytes;
            std::vector<int> scales;
        };
        for (const G& g : std::vector<G>{{"Q4_0", 2, 32, 18, {0}}, {"Q8_0", 8, 32, 34, {0}}, {"Q4_K", 12, 256, 144, {0, 2}},
                 {"Q5_K", 13, 256, 176, {0, 2}}, {"Q6_K", 14, 256, 210, {208}}, {"Q3_K", 11, 256, 110, {108}},
                 {"Q2_K", 10, 256, 84, {80, 82}}}) {
            auto w = QuantizedWeight::gguf(ggufBlocks(g.id, n / g.elements, g.bytes, g.scales), g.id, shape);
            if (!w)
                return w.error();
            weights.emplace_back(std::string("gguf ") + g.name, std::move(*w));
        }
        const auto dense = at::randn(shape, at::TensorOptions().device(at::kCUDA)) * 0.02;
        auto perTensor = QuantizedWeight::fp8((dense / (dense.abs().amax() / 448)).to(at::kFloat8_e4m3fn), dense.abs().amax() / 448);
        auto perRow = QuantizedWeight::fp8((dense / (dense.abs().amax(1, true) / 448)).to(at::kFloat8_e4m3fn), dense.abs().amax(1) / 448);
        if (!perTensor || !perRow)
            return makeError(ErrorCode::Internal, "bench gpu-dequant: could not build the fp8 weights");
        weights.emplace_back("fp8 e4m3 per-tensor", std::move(*perTensor));
        weights.emplace_back("fp8 e4m3 per-row", std::move(*perRow));
        auto nf4 = QuantizedWeight::nf4(at::randint(0, 256, {n / 2}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA)),
            at::rand({n / 64}, at::TensorOptions().device(at::kCUDA)), at::linspace(-1, 1, 16, at::TensorOptions().device(at::kCUDA)), 64,
            shape, at::kBFloat16);
        if (!nf4)
            return nf4.error();
        weights.emplace_back("nf4 block 64", std::move(*nf4));

        for (auto& [name, w] : weights) {
            std::string failure;
            const double s = medianSeconds(repeats, [&] {
                if (auto done = w.dequantizeInto(out); !done)
                    failure = done.error().message;
            });
            if (!failure.empty())
                return makeError(ErrorCode::Internal, name + ": " + failure);
            r.rows_.push_back({name, n, w.residentBytes(), s});
        }
        return r;
    } catch (const c10::Error& e) {
        return makeError(ErrorCode::Internal, std::string("bench gpu-dequant: ") + e.what_without_backtrace());
    }
}

std::string formatGpuDequant(const GpuDequantResult& r)
{
    std::ostringstream s;
    char line[256];
    const double copyBandwidth = static_cast<double>(r.copyBytes) / r.copySeconds / 1e9;
    std::snprintf(line, sizeof line, "bench gpu-dequant: %s, %lld x %lld into bf16; device copy %.3f ms = %.0f GB/s (read + write)\n",
        r.device.c_str(), static_cast<long long>(r.rows), static_cast<long long>(r.cols), r.copySeconds * 1e3, copyBandwidth);
    s << line;
    for (const auto& row : r.rows_) {
        const double bytes = static_cast<double>(row.storedBytes) + static_cast<double>(row.elements) * 2.0;
        const double bandwidth = bytes / row.seconds / 1e9;
        std::snprintf(line, sizeof line, "  %-22s %8.3f ms  %7.0f GB/s  %5.1f%% of copy bandwidth\n", row.type.c_str(), row.seconds * 1e3,
            bandwidth, 100.0 * bandwidth / copyBandwidth);
        s << line;
    }
    return s.str();
}

std::string gpuDequantJson(const GpuDequantResult& r)
{
    nlohmann::json j;
    j["bench"] = "gpu-dequant";
    j["device"] = r.device;
    j["shape"] = {r.rows, r.cols};
    j["copy_seconds"] = r.copySeconds;
    j["copy_bytes"] = r.copyBytes;
    for (const auto& row : r.rows_)
        j["rows"].push_back({{"type", row.type}, {"elements", row.elements}, {"stored_bytes", row.storedBytes}, {"seconds", row.seconds}});
    return j.dump();
}

}  // namespace vireo::bench
