#pragma once

// Device kernel times through PyTorch's Kineto profiler, for the benchmarks: what ran on the
// GPU during a region, summed per kernel name.

#include <string>
#include <vector>

namespace vireo::profile {

struct KernelTime {
    std::string name;
    double milliseconds = 0;
    int calls = 0;
};

// False (with nothing started) when this libtorch has no Kineto.
bool startKernelProfile();
// Sorted by total time, longest first.
std::vector<KernelTime> stopKernelProfile();

} // namespace vireo::profile
