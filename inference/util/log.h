#pragma once

#include <functional>
#include <string>

namespace vireo::log {

// The inference layer has no logging library of its own; the application installs a sink
// (core routes it to spdlog). Without one, warnings and errors go to stderr.
enum class Level { Debug, Info, Warn, Error };
using Sink = std::function<void(Level, const std::string&)>;

void setSink(Sink sink);
void write(Level level, const std::string& message);

inline void debug(const std::string& m)
{
    write(Level::Debug, m);
}
inline void info(const std::string& m)
{
    write(Level::Info, m);
}
inline void warn(const std::string& m)
{
    write(Level::Warn, m);
}
inline void error(const std::string& m)
{
    write(Level::Error, m);
}

}  // namespace vireo::log
