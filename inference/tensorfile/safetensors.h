#pragma once

#include "inference/tensorfile/mappedfile.h"
#include "inference/tensorfile/tensorinfo.h"
#include "inference/util/result.h"

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vireo::tensorfile {

// Upper bound on the JSON header, as the reference reader enforces (MAX_HEADER_SIZE).
inline constexpr std::uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// A validated safetensors file: every rule of the reference validator holds (header bound,
// contiguous offsets without gaps or overlaps, byte counts that match shape x dtype, data
// that ends exactly at the end of the file), so any TensorInfo here is safe to map.
struct SafetensorsFile {
    std::shared_ptr<const MappedFile> file;
    std::uint64_t headerBytes = 0;
    std::uint64_t dataOffset = 0;
    std::vector<TensorInfo> tensors;  // in file order
    std::map<std::string, std::string> metadata;

    static Result<SafetensorsFile> open(const std::filesystem::path& path);
    // Validates a header held in memory against a file of fileBytes (used by open()).
    static Result<SafetensorsFile> parse(const std::filesystem::path& path, const std::byte* data, std::uint64_t fileBytes);
};

}  // namespace vireo::tensorfile
