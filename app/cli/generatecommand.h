#pragma once

#include <string>
#include <vector>

// vireo-cli generate: text to an MP4 with sound through the LTX-2 pipeline.
int runGenerate(const std::vector<std::string>& args);
// Its usage and options, as --help prints them.
std::string generateHelp();
