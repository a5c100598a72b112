#pragma once

// File operations inside the model cache that never follow a symbolic link the cache did not
// put there. Every path below the cache root is walked component by component with
// openat(O_NOFOLLOW | O_DIRECTORY), files are opened with O_NOFOLLOW, and replacements are
// written beside their target and renamed over it (rename replaces a link, it does not write
// through it). A link planted in models--org--name/.vireo-partial/ or blobs/ therefore cannot
// make a download overwrite a file outside the cache, nor pass for downloaded content.
//
// POSIX calls, not Qt or std::filesystem: QFile follows links, and the torch wheel exports its
// own std::filesystem symbols (see hfcache.cpp).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::hub::safefs {

// An owned file descriptor.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : m_fd(fd) {}
    ~Fd();
    Fd(Fd&& other) noexcept : m_fd(other.release()) {}
    Fd& operator=(Fd&& other) noexcept;
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;

    int get() const { return m_fd; }
    bool valid() const { return m_fd >= 0; }
    int release()
    {
        const int fd = m_fd;
        m_fd = -1;
        return fd;
    }

private:
    int m_fd = -1;
};

// "a/b/c" -> {"a", "b", "c"}; empty components are dropped.
std::vector<std::string> splitPath(std::string_view relative);

// Opens root (trusted: it may itself be a link, as a cache moved to another disk often is),
// then each component of `relative` below it without following a link. With create, missing
// folders are made. On failure the descriptor is invalid and *error says which component and
// why ("models--org--name/blobs is a symbolic link; ...").
Fd openDir(const std::string& root, std::string_view relative, bool create, std::string* error);

struct Entry {
    bool exists = false;
    bool link = false;
    bool file = false;  // a regular file (not a link to one)
    bool dir = false;
    std::uint64_t size = 0;
    std::int64_t mtimeNs = 0;
    std::uint64_t inode = 0, device = 0;
};
// lstat of name in dir.
Entry statAt(int dir, const std::string& name);
Entry statFd(int fd);

// The text of the link name in dir; false when it is no link.
bool readLinkAt(int dir, const std::string& name, std::string& target);

// openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC, mode).
Fd openAt(int dir, const std::string& name, int flags, int mode = 0644);

// Writes data to a fresh file beside name and renames it over name (fsynced first).
bool writeFileAt(int dir, const std::string& name, std::string_view data, std::string* error);
// Creates (or replaces) the link name -> target, through a temporary link and a rename.
bool replaceLinkAt(int dir, const std::string& name, const std::string& target, std::string* error);

// pread / pwrite of the whole range, retrying short transfers and EINTR.
bool readAll(int fd, void* data, std::size_t bytes, std::uint64_t offset);
bool writeAll(int fd, const void* data, std::size_t bytes, std::uint64_t offset);

}  // namespace vireo::hub::safefs
