#pragma once

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace vireo::test {

// Folders CTest passes in: generated fixtures (build tree) and committed data (source tree).
inline std::filesystem::path envPath(const char* name)
{
    const char* v = std::getenv(name);
    if (!v || !*v)
        throw std::runtime_error(std::string(name) + " is not set; run the test through ctest");
    return v;
}

inline std::filesystem::path fixturesDir() { return envPath("VIREO_FIXTURES_DIR"); }
inline std::filesystem::path sourceDir() { return envPath("VIREO_SOURCE_DIR"); }

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

} // namespace vireo::test
