#include "inference/tensorfile/mappedfile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace vireo::tensorfile {

std::string fileError(const std::filesystem::path& path, const std::string& message)
{
    return path.string() + ": " + message;
}

Result<std::shared_ptr<const MappedFile>> MappedFile::open(const std::filesystem::path& path)
{
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        const ErrorCode code = err == ENOENT  ? ErrorCode::NotFound
            : (err == EACCES || err == EPERM) ? ErrorCode::PermissionDenied
                                              : ErrorCode::Io;
        return makeError(code, fileError(path, std::string("cannot open: ") + std::strerror(err)));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return makeError(ErrorCode::InvalidArgument, fileError(path, "not a regular file"));
    }
    std::shared_ptr<MappedFile> file(new MappedFile());
    file->m_path = path;
    file->m_fd = fd;
    file->m_size = static_cast<std::uint64_t>(st.st_size);
    if (file->m_size > 0) {
        void* addr = ::mmap(nullptr, file->m_size, PROT_READ, MAP_SHARED, fd, 0);
        if (addr == MAP_FAILED)
            return makeError(ErrorCode::Io, fileError(path, std::string("cannot map into memory: ") + std::strerror(errno)));
        file->m_data = static_cast<const std::byte*>(addr);
    }
    return std::shared_ptr<const MappedFile>(std::move(file));
}

MappedFile::~MappedFile()
{
    if (m_data)
        ::munmap(const_cast<std::byte*>(m_data), m_size);
    if (m_fd >= 0)
        ::close(m_fd);
}

Result<void> MappedFile::readAt(std::uint64_t offset, void* dst, std::uint64_t length) const
{
    if (offset > m_size || length > m_size - offset)
        return makeError(ErrorCode::Truncated,
            fileError(m_path,
                "read of " + std::to_string(length) + " bytes at offset " + std::to_string(offset) + " runs past the end of the "
                    + std::to_string(m_size) + "-byte file"));
    auto* out = static_cast<char*>(dst);
    while (length > 0) {
        const ssize_t got = ::pread(m_fd, out, length, static_cast<off_t>(offset));
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return makeError(ErrorCode::Io, fileError(m_path, std::string("read failed: ") + std::strerror(errno)));
        }
        if (got == 0)
            return makeError(ErrorCode::Truncated, fileError(m_path, "file shrank while it was being read"));
        out += got;
        offset += static_cast<std::uint64_t>(got);
        length -= static_cast<std::uint64_t>(got);
    }
    return {};
}

}  // namespace vireo::tensorfile
