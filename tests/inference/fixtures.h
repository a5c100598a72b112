#pragma once

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

namespace vireo::test {

// Folders CTest passes in: generated fixtures (build tree) and committed data (source tree).
inline std::filesystem::path envPath(const char* name)
{
    const char* v = std::getenv(name);
    if (!v || !*v)
        throw std::runtime_error(std::string(name) + " is not set; run the test through ctest");
    return v;
}

inline std::filesystem::path fixturesDir()
{
    return envPath("VIREO_FIXTURES_DIR");
}
inline std::filesystem::path fixturesRoot()
{
    return envPath("VIREO_FIXTURES_ROOT");
}
inline std::filesystem::path sourceDir()
{
    return envPath("VIREO_SOURCE_DIR");
}

inline std::vector<std::byte> readAll(const std::filesystem::path& path)
{
    std::ifstream in(path, std::ios::binary);
    if (!in)
        throw std::runtime_error("cannot read " + path.string());
    std::ostringstream s;
    s << in.rdbuf();
    const auto text = s.str();
    std::vector<std::byte> bytes(text.size());
    std::memcpy(bytes.data(), text.data(), text.size());
    return bytes;
}

inline std::string readText(const std::filesystem::path& path)
{
    const auto bytes = readAll(path);
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// Removes a folder and what it holds with unlink / rmdir: in the test programs
// std::filesystem::remove_all binds to a copy inside libtorch that crashes.
inline void removeTree(const std::filesystem::path& dir)
{
    std::error_code ec;
    std::vector<std::filesystem::path> entries;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        entries.push_back(it->path());
    for (const auto& e : entries) {
        if (std::filesystem::is_directory(e, ec))
            removeTree(e);
        else
            ::unlink(e.c_str());
    }
    ::rmdir(dir.c_str());
}

// A scratch folder in TMPDIR (prefix + process id), empty at the start and removed on every
// exit path (a failed check throws).
struct ScratchDir {
    std::filesystem::path path;
    explicit ScratchDir(const std::string& prefix) : path(std::filesystem::temp_directory_path() / (prefix + std::to_string(::getpid())))
    {
        removeTree(path);
        std::filesystem::create_directories(path);
    }
    ~ScratchDir() { removeTree(path); }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace vireo::test
