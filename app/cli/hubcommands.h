#pragma once

#include <string>
#include <vector>

// Hub commands need core/ (libcurl, Qt); they exist only in builds with it.
int runPlan(const std::vector<std::string>& args);
int runDownload(const std::vector<std::string>& args);
