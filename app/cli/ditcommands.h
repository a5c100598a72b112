#pragma once

#include <string>
#include <vector>

// vireo-cli dit-forward: one transformer forward on named input tensors, for checking any
// checkpoint against any reference by hand. vireo-bench's `dit` and `gpu` (tests/bench/
// bench_dit.py, bench_gpu.py) call it back.
int runDitForward(const std::vector<std::string>& args);
