#pragma once

#include <string>
#include <vector>

// Hub commands need core/ (libcurl, Qt); they exist only in builds with it.
int runPlan(const std::vector<std::string>& args);
int runDownload(const std::vector<std::string>& args);
// vireo-cli trust [list | add REPO | remove REPO]: the approvals the studio's trust gate records.
int runTrust(const std::vector<std::string>& args);
