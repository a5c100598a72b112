#pragma once

#include "inference/util/result.h"

#include <cstdint>
#include <string>
#include <vector>

namespace vireo::bench {

struct DequantRow {
    std::string type;  // "Q4_K", "fp8 e4m3 per-row", "nf4", ...
    std::int64_t elements = 0;
    std::int64_t storedBytes = 0;
    double seconds = 0;  // vireo CPU dequantize to float32, best of repeats
    double memcpySeconds = 0;  // memcpy of the float32 output size, same run
    double pythonSeconds = 0;  // the Python reference, same data; 0 when not measured
};

struct LinearRow {
    std::string type;
    double seconds = 0;  // quantized linear
    double bf16Seconds = 0;  // bf16 linear of the same shape
};

struct DequantBenchResult {
    std::vector<DequantRow> dequant;
    std::vector<LinearRow> linear;
    int threads = 0;
    std::string pythonNote;
};

struct DequantBenchOptions {
    std::vector<std::int64_t> sizes{1 << 20, 1 << 24};  // elements per weight
    int repeats = 3;
    std::string python;  // interpreter with gguf and torch; empty = no reference
    std::string referenceScript;  // tests/bench/dequant_reference.py
    std::int64_t linearOut = 4096, linearIn = 4096, linearTokens = 64;
};

// CPU dequantization throughput for every representation next to memcpy bandwidth and
// the Python references (gguf-py, torch ops) on the same data in the same run; and the
// quantized linear's time next to a bf16 linear of the same shape.
Result<DequantBenchResult> benchDequant(const DequantBenchOptions& options);

std::string formatDequantBench(const DequantBenchResult& result);
std::string dequantBenchJson(const DequantBenchResult& result);

}  // namespace vireo::bench
