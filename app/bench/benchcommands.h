#pragma once

// vireo-bench: the developer benchmarks, kept out of the installed vireo-cli. Each command takes
// its arguments with its own name first (args[0] is "stages" for `vireo-bench stages ...`) and
// returns the exit status: 0, 1 when the benchmark failed, 2 for a usage error.

#include "inference/util/result.h"

#include <string>
#include <vector>

// "vireo-bench: MESSAGE" and the usage on stderr; returns 2.
int usageError(const std::string& message);
// "vireo-bench: MESSAGE" as one line on stderr; returns 1.
int fail(const vireo::Error& error);

// A benchmark's Python side, tests/bench/NAME in a Vireo source tree: the one VIREO_SOURCE_DIR
// names, else the working folder when it is one. Empty (and `why` set) when neither has it.
std::string benchScript(const std::string& name, std::string* why);
// A program built beside this one (vireo-cli, vireo), by the folder of the running executable.
std::string siblingProgram(const char* self, const std::string& name);

int runBenchRead(const std::vector<std::string>& args);
int runBenchDequant(const std::vector<std::string>& args);
int runBenchGpuDequant(const std::vector<std::string>& args);
int runBenchStages(const std::vector<std::string>& args);
int runBenchIdeogramStep(const std::vector<std::string>& args);
int runBenchLora(const std::vector<std::string>& args);

// Orchestrated by scripts in tests/bench, which call vireo-cli (found beside this program) for
// the user's commands and, for `gpu`, this program back.
int runBenchDownload(const std::vector<std::string>& args, const char* self);
int runBenchDit(const std::vector<std::string>& args, const char* self);
int runBenchGenerate(const std::vector<std::string>& args, const char* self);
// tests/bench/bench_api.py drives `vireo-cli serve`.
int runBenchApi(const std::vector<std::string>& args, const char* self);
int runBenchGpu(const std::vector<std::string>& args, const char* self);

#ifdef VIREO_HAS_CORE
// The studio's engine against calling the pipeline directly.
int runBenchRuntime(const std::vector<std::string>& args);
// Quality, balanced and fast speed modes on one loaded model: denoise time, steps reused and
// the PSNR of the decoded frames against quality.
int runBenchSpeed(const std::vector<std::string>& args);
// The window's cold start, from process start to a usable window.
int runBenchStartup(const std::vector<std::string>& args, const char* self);
#endif
