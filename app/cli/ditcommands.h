#pragma once

#include <string>
#include <vector>

// vireo-cli dit-forward: one transformer forward on named input tensors, for checking any
// checkpoint against any reference by hand. `bench dit` is orchestrated by
// tests/bench/bench_dit.py, which calls dit-forward back.
int runDitForward(const std::vector<std::string>& args);
int runBenchDit(const std::vector<std::string>& args, const char* self);
