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

struct Profile {
    std::vector<KernelTime> kernels;  // device kernels and copies, longest total first
    std::vector<KernelTime> ops;  // ATen operators as the host dispatched them (host time), most calls first
};

// False (with nothing started) when this libtorch has no Kineto.
bool startKernelProfile();
Profile stopKernelProfile();

}  // namespace vireo::profile
