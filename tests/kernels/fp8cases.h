#pragma once

// Scaled-FP8 cases shared by the CPU reference test and the GPU test: every scale layout,
// both fp8 formats, sizes that do not divide the block.

#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace vireo::test {

struct Fp8Case {
    std::string name;
    at::Tensor weight;  // fp8, CPU
    at::Tensor scale;  // float32, CPU
    at::Tensor expected;  // float32: the definition w = float(q) * scale, computed with torch ops
    std::vector<std::int64_t> blockSize;
};

inline std::vector<Fp8Case> fp8Cases()
{
    at::manual_seed(7);
    std::vector<Fp8Case> cases;
    for (auto type : {at::kFloat8_e4m3fn, at::kFloat8_e5m2}) {
        const std::string t = type == at::kFloat8_e4m3fn ? "e4m3" : "e5m2";
        auto make = [&](std::vector<std::int64_t> shape) { return (at::randn(shape) * 8).to(type); };

        auto w = make({37, 70});
        auto s = at::rand({}) + 0.5;
        cases.push_back({t + "/per-tensor []", w, s, w.to(at::kFloat) * s, {}});
        auto s1 = at::rand({1}) + 0.5;
        cases.push_back({t + "/per-tensor [1]", w, s1, w.to(at::kFloat) * s1, {}});
        auto rows = at::rand({37}) + 0.1;
        cases.push_back({t + "/per-row [out]", w, rows, w.to(at::kFloat) * rows.unsqueeze(1), {}});
        cases.push_back({t + "/per-row [out,1]", w, rows.unsqueeze(1), w.to(at::kFloat) * rows.unsqueeze(1), {}});
        // 16x16 blocks over 37x70: a 3x5 grid whose last row and column are partial.
        auto grid = at::rand({3, 5}) + 0.1;
        auto full = grid.repeat_interleave(16, 0).repeat_interleave(16, 1).narrow(0, 0, 37).narrow(1, 0, 70);
        cases.push_back({t + "/block 16x16", w, grid, w.to(at::kFloat) * full, {16, 16}});
        // An exact grid infers its block size: 32x64 in 4x2 blocks of 8x32.
        auto exact = make({32, 64});
        auto exactGrid = at::rand({4, 2}) + 0.1;
        auto exactFull = exactGrid.repeat_interleave(8, 0).repeat_interleave(32, 1);
        cases.push_back({t + "/block inferred 8x32", exact, exactGrid, exact.to(at::kFloat) * exactFull, {}});
        // A conv weight [out, in, k]: per-row scales broadcast over every trailing dim.
        auto conv = make({12, 5, 3});
        auto convRows = at::rand({12}) + 0.1;
        cases.push_back({t + "/per-row conv3", conv, convRows, conv.to(at::kFloat) * convRows.view({12, 1, 1}), {}});
        auto empty = make({0, 8});
        cases.push_back({t + "/empty", empty, at::ones({}), empty.to(at::kFloat), {}});
    }
    return cases;
}

}  // namespace vireo::test
