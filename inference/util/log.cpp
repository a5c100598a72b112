#include "inference/util/log.h"

#include <cstdio>
#include <mutex>

namespace vireo::log {

namespace {

std::mutex& sinkMutex()
{
    static std::mutex m;
    return m;
}

Sink& currentSink()
{
    static Sink sink;
    return sink;
}

}  // namespace

void setSink(Sink sink)
{
    std::lock_guard lock(sinkMutex());
    currentSink() = std::move(sink);
}

void write(Level level, const std::string& message)
{
    std::lock_guard lock(sinkMutex());
    if (currentSink()) {
        currentSink()(level, message);
    } else if (level >= Level::Warn) {
        std::fprintf(stderr, "vireo: %s\n", message.c_str());
    }
}

}  // namespace vireo::log
