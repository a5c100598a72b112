#pragma once

#include <string>
#include <vector>

// vireo-cli serve: the local HTTP API on a headless studio (the same services as the window).
int runServe(const std::vector<std::string>& args);
