#include "inference/bench/dequantbench.h"

#include "inference/quant/quantizedweight.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <unistd.h>
#include <sstream>

namespace vireo::bench {

namespace {

using Clock = std::chrono::steady_clock;
using quant::QuantizedWeight;

// The scratch folder holds only flat files. (std::filesystem::remove_all is avoided: the
// torch wheel's libtorch.so exports its own copy of it, which crashes when interposed.)
void removeScratch(const std::filesystem::path& folder)
{
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(folder, ec))
        std::filesystem::remove(entry.path(), ec);
    std::filesystem::remove(folder, ec);
}

double bestOf(int repeats, const std::function<void()>& body)
{
    double best = 1e300;
    for (int i = 0; i < repeats; ++i) {
        const auto start = Clock::now();
        body();
        best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
    }
    return best;
}

struct GgufType {
    const char* name;
    int id;
    int elements;
    int bytes;
    std::vector<int> f16Fields;  // offsets of fp16 scales to keep finite
};

const std::vector<GgufType> kGgufTypes = {
    {"Q4_0", 2, 32, 18, {0}},
    {"Q4_1", 3, 32, 20, {0, 2}},
    {"Q5_0", 6, 32, 22, {0}},
    {"Q5_1", 7, 32, 24, {0, 2}},
    {"Q8_0", 8, 32, 34, {0}},
    {"Q2_K", 10, 256, 84, {80, 82}},
    {"Q3_K", 11, 256, 110, {108}},
    {"Q4_K", 12, 256, 144, {0, 2}},
    {"Q5_K", 13, 256, 176, {0, 2}},
    {"Q6_K", 14, 256, 210, {208}},
};

// Random block bytes whose fp16 scales are small finite numbers, like real quantized data.
at::Tensor randomBlocks(const GgufType& t, std::int64_t blocks, std::mt19937& rng)
{
    auto out = at::empty({blocks * t.bytes}, at::kByte);
    auto* p = out.data_ptr<std::uint8_t>();
    for (std::int64_t i = 0; i < out.numel(); ++i)
        p[i] = static_cast<std::uint8_t>(rng());
    const auto scale = at::empty({blocks, static_cast<std::int64_t>(t.f16Fields.size())}).uniform_(1e-3, 1e-2).to(at::kHalf);
    const auto* s = static_cast<const std::uint16_t*>(scale.data_ptr());
    for (std::int64_t b = 0; b < blocks; ++b)
        for (std::size_t f = 0; f < t.f16Fields.size(); ++f)
            std::memcpy(p + b * t.bytes + t.f16Fields[f], s + b * t.f16Fields.size() + f, 2);
    return out;
}

void writeFile(const std::filesystem::path& path, const at::Tensor& t)
{
    const auto c = t.contiguous();
    std::ofstream out(path, std::ios::binary);
    out.write(static_cast<const char*>(c.data_ptr()), static_cast<std::streamsize>(c.nbytes()));
}

std::string gbps(double bytes, double seconds)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%6.2f", seconds > 0 ? bytes / seconds / 1e9 : 0.0);
    return buf;
}

}  // namespace

Result<DequantBenchResult> benchDequant(const DequantBenchOptions& options)
{
    DequantBenchResult result;
    result.threads = at::get_num_threads();
    std::mt19937 rng(1234);
    namespace fs = std::filesystem;
    const fs::path scratch = fs::temp_directory_path() / ("vireo-bench-dequant-" + std::to_string(::getpid()));
    fs::create_directories(scratch);
    nlohmann::json jobs = nlohmann::json::array();
    std::vector<std::size_t> jobRows;

    try {
        for (const auto elements : options.sizes) {
            const std::int64_t cols = 4096;
            const std::int64_t rows = std::max<std::int64_t>(1, elements / cols);
            const std::vector<std::int64_t> shape{rows, cols};
            std::vector<std::pair<std::string, QuantizedWeight>> weights;
            for (const auto& t : kGgufTypes) {
                auto blocks = randomBlocks(t, rows * cols / t.elements, rng);
                auto w = QuantizedWeight::gguf(blocks, t.id, shape);
                if (!w)
                    return w.error();
                weights.emplace_back(t.name, std::move(*w));
            }
            const auto dense = at::randn({rows, cols});
            const auto e4 = (dense * 8).to(at::kFloat8_e4m3fn);
            const auto e5 = (dense * 8).to(at::kFloat8_e5m2);
            for (auto [name, w] : std::vector<std::pair<std::string, Result<QuantizedWeight>>>{
                     {"fp8 e4m3 per-tensor", QuantizedWeight::fp8(e4, at::full({}, 0.01))},
                     {"fp8 e4m3 per-row", QuantizedWeight::fp8(e4, at::rand({rows}) * 0.01)},
                     {"fp8 e5m2 block 128", QuantizedWeight::fp8(e5, at::rand({(rows + 127) / 128, cols / 128}) * 0.01, {}, {128, 128})},
                 }) {
                if (!w)
                    return w.error();
                weights.emplace_back(name, std::move(*w));
            }
            {
                const auto packed = at::randint(0, 256, {rows * cols / 2}, at::kByte);
                auto w = QuantizedWeight::nf4(packed, at::rand({rows * cols / 64}), at::linspace(-1, 1, 16), 64, shape, at::kBFloat16);
                if (!w)
                    return w.error();
                weights.emplace_back("nf4", std::move(*w));
            }

            auto src = at::empty({rows * cols}, at::kFloat).fill_(1);
            auto dst = at::empty({rows * cols}, at::kFloat).fill_(0);
            const double memcpySeconds = bestOf(options.repeats, [&] {
                at::parallel_for(0, src.numel(), 1 << 16, [&](std::int64_t b, std::int64_t e) {
                    std::memcpy(dst.data_ptr<float>() + b, src.data_ptr<float>() + b, static_cast<std::size_t>(e - b) * 4);
                });
            });

            for (auto& [name, w] : weights) {
                DequantRow row;
                row.type = name;
                row.elements = rows * cols;
                row.storedBytes = w.residentBytes();
                row.memcpySeconds = memcpySeconds;
                // Into a reused, touched buffer, as memcpy writes into one: both measure the work,
                // not first-touch page faults.
                auto out = at::empty(w.shape(), at::kFloat).fill_(0);
                if (auto r = w.dequantizeInto(out); !r)
                    return r.error();
                row.seconds = bestOf(options.repeats, [&] { (void)w.dequantizeInto(out); });
                result.dequant.push_back(row);

                if (!options.python.empty()) {
                    const auto tag = std::to_string(result.dequant.size());
                    nlohmann::json job{{"shape", shape}, {"repeats", options.repeats}};
                    if (w.representation() == quant::Representation::Gguf) {
                        writeFile(scratch / (tag + ".blocks"), w.data());
                        job.update({{"kind", "gguf"}, {"type", w.ggmlType()}, {"blocks", (scratch / (tag + ".blocks")).string()}});
                    } else if (w.representation() == quant::Representation::Fp8Scaled) {
                        writeFile(scratch / (tag + ".data"), w.data().view(at::kByte));
                        writeFile(scratch / (tag + ".scale"), w.scale());
                        job.update({{"kind", "fp8"}, {"format", w.data().scalar_type() == at::kFloat8_e4m3fn ? "e4m3" : "e5m2"},
                            {"data", (scratch / (tag + ".data")).string()}, {"scale", (scratch / (tag + ".scale")).string()},
                            {"scale_shape", w.scale().sizes().vec()}});
                    } else {
                        writeFile(scratch / (tag + ".data"), w.data());
                        writeFile(scratch / (tag + ".absmax"), w.scale());
                        job.update({{"kind", "nf4"}, {"data", (scratch / (tag + ".data")).string()},
                            {"absmax", (scratch / (tag + ".absmax")).string()}, {"block", 64}});
                    }
                    jobs.push_back(job);
                    jobRows.push_back(result.dequant.size() - 1);
                }
            }
        }

        // Linear layers: quantized weight against the bf16 linear of the same shape.
        const auto x = at::randn({options.linearTokens, options.linearIn}).to(at::kBFloat16);
        const auto w = at::randn({options.linearOut, options.linearIn}) * 0.02;
        const auto wBf16 = w.to(at::kBFloat16);
        const double bf16Seconds = bestOf(options.repeats, [&] { (void)at::linear(x, wBf16); });
        std::vector<std::pair<std::string, QuantizedWeight>> layers;
        auto add = [&](const char* name, Result<QuantizedWeight> q) {
            if (q)
                layers.emplace_back(name, std::move(*q));
        };
        add("bf16", QuantizedWeight::dense(wBf16));
        add("fp8 e4m3 per-row", QuantizedWeight::fp8((w / (w.abs().amax(1, true) / 448)).to(at::kFloat8_e4m3fn), w.abs().amax(1) / 448));
        add("int8 per-channel", QuantizedWeight::quantizeInt8(w));
        {
            const auto& q4k = kGgufTypes[7];
            add("gguf Q4_K",
                QuantizedWeight::gguf(
                    randomBlocks(q4k, options.linearOut * options.linearIn / 256, rng), q4k.id, {options.linearOut, options.linearIn}));
            const auto& q8 = kGgufTypes[4];
            add("gguf Q8_0",
                QuantizedWeight::gguf(
                    randomBlocks(q8, options.linearOut * options.linearIn / 32, rng), q8.id, {options.linearOut, options.linearIn}));
        }
        for (auto& [name, q] : layers) {
            (void)q.linear(x);
            result.linear.push_back({name, bestOf(options.repeats, [&] { (void)q.linear(x); }), bf16Seconds});
        }
    } catch (const c10::Error& e) {
        removeScratch(scratch);
        return makeError(ErrorCode::Internal, std::string("bench dequant: ") + e.what_without_backtrace());
    }

    if (!options.python.empty()) {
        const auto jobFile = scratch / "jobs.json";
        const auto outFile = scratch / "times.json";
        std::ofstream(jobFile) << jobs.dump();
        const std::string command =
            "\"" + options.python + "\" \"" + options.referenceScript + "\" \"" + jobFile.string() + "\" \"" + outFile.string() + "\"";
        const int rc = std::system(command.c_str());
        auto times = nlohmann::json::parse(std::ifstream(outFile), nullptr, false);
        if (rc != 0 || !times.is_array() || times.size() != jobRows.size()) {
            result.pythonNote = "the Python reference did not run (" + command + " exited " + std::to_string(rc) + ")";
        } else {
            for (std::size_t i = 0; i < jobRows.size(); ++i)
                result.dequant[jobRows[i]].pythonSeconds = times[i].get<double>();
        }
    } else {
        result.pythonNote = "Python reference not measured: pass --python PATH (the project's .venv/bin/python)";
    }
    removeScratch(scratch);
    return result;
}

std::string formatDequantBench(const DequantBenchResult& r)
{
    std::ostringstream out;
    out << "bench dequant: CPU, " << r.threads << " threads, float32 output, best of repeats\n";
    char line[256];
    std::snprintf(line, sizeof line, "  %-20s %10s %9s %9s %9s %12s\n", "type", "elements", "GB/s", "memcpy", "of memcpy", "vs Python");
    out << line;
    for (const auto& d : r.dequant) {
        const double outBytes = static_cast<double>(d.elements) * 4;
        char python[32] = "-";
        if (d.pythonSeconds > 0)
            std::snprintf(python, sizeof python, "%.1fx faster", d.pythonSeconds / d.seconds);
        std::snprintf(line, sizeof line, "  %-20s %10lld %9s %9s %8.2fx %12s\n", d.type.c_str(), static_cast<long long>(d.elements),
            gbps(outBytes, d.seconds).c_str(), gbps(outBytes, d.memcpySeconds).c_str(), d.memcpySeconds / d.seconds, python);
        out << line;
    }
    out << "  (GB/s counts float32 output bytes; 'of memcpy' = memcpy time / dequant time, goal >= 0.5)\n";
    if (!r.pythonNote.empty())
        out << "  " << r.pythonNote << "\n";
    out << "linear (bf16 activations), time relative to a bf16 linear of the same shape:\n";
    for (const auto& l : r.linear) {
        std::snprintf(line, sizeof line, "  %-20s %9.3f ms  %6.2fx\n", l.type.c_str(), l.seconds * 1e3, l.seconds / l.bf16Seconds);
        out << line;
    }
    return out.str();
}

std::string dequantBenchJson(const DequantBenchResult& r)
{
    nlohmann::json j;
    j["threads"] = r.threads;
    for (const auto& d : r.dequant)
        j["dequant"].push_back({{"type", d.type}, {"elements", d.elements}, {"stored_bytes", d.storedBytes}, {"seconds", d.seconds},
            {"memcpy_seconds", d.memcpySeconds}, {"python_seconds", d.pythonSeconds}, {"fraction_of_memcpy", d.memcpySeconds / d.seconds}});
    for (const auto& l : r.linear)
        j["linear"].push_back(
            {{"type", l.type}, {"seconds", l.seconds}, {"bf16_seconds", l.bf16Seconds}, {"ratio", l.seconds / l.bf16Seconds}});
    if (!r.pythonNote.empty())
        j["python_note"] = r.pythonNote;
    return j.dump(2);
}

}  // namespace vireo::bench
