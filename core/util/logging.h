#pragma once

#include <QString>

namespace vireo::core {

// Sends spdlog and Qt messages to stderr and to a rotating file in the user's data folder
// (mode 0600: paths and repo names can be private). Returns that folder.
QString initLogging(const QString& appName);
QString logDirectory();
// Command-line use: only warnings and errors (`info`: and what a server reports as it runs), on
// stderr (stdout is the command's output).
void initCommandLineLogging(bool info = false);

}  // namespace vireo::core
