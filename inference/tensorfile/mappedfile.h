#pragma once

#include "inference/util/result.h"

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

namespace vireo::tensorfile {

// A read-only file mapped into memory. Tensors created as views keep a shared_ptr to it,
// so the mapping lives as long as the last view. Also reads with pread for copies that
// should not fault pages in through the mapping.
class MappedFile {
public:
    static Result<std::shared_ptr<const MappedFile>> open(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::filesystem::path& path() const { return m_path; }
    std::uint64_t size() const { return m_size; }
    const std::byte* data() const { return m_data; }

    // Reads [offset, offset + length) into dst; an error names the file.
    Result<void> readAt(std::uint64_t offset, void* dst, std::uint64_t length) const;

private:
    MappedFile() = default;

    std::filesystem::path m_path;
    const std::byte* m_data = nullptr;
    std::uint64_t m_size = 0;
    int m_fd = -1;
};

// "name: message" with the file name as the user knows it.
std::string fileError(const std::filesystem::path& path, const std::string& message);

// Maps a file and validates it with Parsed::parse(path, data, size); the result keeps the
// mapping in Parsed::file.
template <typename Parsed>
Result<Parsed> mapAndParse(const std::filesystem::path& path)
{
    auto file = MappedFile::open(path);
    if (!file)
        return file.error();
    auto parsed = Parsed::parse(path, (*file)->data(), (*file)->size());
    if (!parsed)
        return parsed.error();
    parsed->file = std::move(*file);
    return parsed;
}

}  // namespace vireo::tensorfile
