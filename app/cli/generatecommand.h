#pragma once

#include <string>
#include <vector>

// vireo-cli generate: text to an MP4 with sound through the LTX-2 pipeline.
int runGenerate(const std::vector<std::string>& args);
// Its usage and options, as --help prints them.
std::string generateHelp();
// vireo-cli bench runtime: the engine's overhead over calling the pipeline directly.
int runBenchRuntime(const std::vector<std::string>& args);
// Quality, balanced and fast speed modes on one loaded model: denoise time, steps reused and
// the PSNR of the decoded frames against quality.
int runBenchSpeed(const std::vector<std::string>& args);
// vireo-cli bench startup: the window's cold start, from process start to a usable window.
int runBenchStartup(const std::vector<std::string>& args, const char* self);
