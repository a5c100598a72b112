#pragma once

#include <string>
#include <vector>

// vireo-cli devices [--json]: every device this process can run on (the CPU and each CUDA device
// CUDA_VISIBLE_DEVICES leaves), with its memory and the paths its capability gives.
int runDevices(const std::vector<std::string>& args);
