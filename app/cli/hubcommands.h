#pragma once

#include <string>
#include <vector>

// Hub commands need core/ (libcurl, Qt); they exist only in builds with it.
int runPlan(const std::vector<std::string>& args);
int runDownload(const std::vector<std::string>& args);
// vireo-cli trust [list | add REPO | remove REPO]: the approvals the studio's trust gate records.
int runTrust(const std::vector<std::string>& args);
// vireo-cli cache [list | delete-variant ID | delete-repo REPO | clean] [--yes]: disk use and deletion.
int runCache(const std::vector<std::string>& args);
