#pragma once

#include <string>
#include <vector>

// vireo-cli batch: a JSONL file of generations run here (--local), checked, resumed or reported
// from its batch folder (core/batch).
int runBatch(const std::vector<std::string>& args);
std::string batchHelp();
