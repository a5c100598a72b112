#pragma once

#include <string>
#include <vector>

// vireo-cli hosts list|add|remove: other machines' Vireo servers (the window's Settings → Hosts).
int runHosts(const std::vector<std::string>& args);
std::string hostsHelp();

// vireo-cli generate --host NAME|any ...: the job runs on a host's server; its output and recipe
// come back into the outputs folder and the gallery.
int runRemoteGenerate(const std::vector<std::string>& args);
std::string remoteGenerateHelp();
