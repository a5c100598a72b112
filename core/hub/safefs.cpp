#include "core/hub/safefs.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

namespace vireo::hub::safefs {

Fd::~Fd()
{
    if (m_fd >= 0)
        ::close(m_fd);
}

Fd& Fd::operator=(Fd&& other) noexcept
{
    if (this != &other) {
        if (m_fd >= 0)
            ::close(m_fd);
        m_fd = other.release();
    }
    return *this;
}

std::vector<std::string> splitPath(std::string_view relative)
{
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (start <= relative.size()) {
        const auto end = relative.find('/', start);
        const auto part = relative.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
        if (!part.empty())
            parts.emplace_back(part);
        if (end == std::string_view::npos)
            break;
        start = end + 1;
    }
    return parts;
}

Fd openDir(const std::string& root, std::string_view relative, bool create, std::string* error)
{
    auto fail = [&](const std::string& what) {
        if (error)
            *error = what;
        return Fd();
    };
    if (create) {
        // The root may be new, and its parents with it (it is trusted: links there are the
        // user's own layout).
        for (std::size_t slash = root.find('/', 1); slash != std::string::npos; slash = root.find('/', slash + 1))
            ::mkdir(root.substr(0, slash).c_str(), 0755);
        ::mkdir(root.c_str(), 0755);
    }
    Fd dir(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!dir.valid())
        return fail(root + ": cannot open the cache folder (" + std::strerror(errno) + ")");
    std::string walked;
    for (const auto& part : splitPath(relative)) {
        if (part == "." || part == "..")
            return fail(walked + part + ": a path inside the cache may not contain '.' or '..'");
        walked += part;
        Fd next(::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        if (!next.valid() && errno == ENOENT && create) {
            if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
                return fail(root + "/" + walked + ": cannot create the folder (" + std::strerror(errno) + ")");
            next = Fd(::openat(dir.get(), part.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
        }
        if (!next.valid()) {
            const int err = errno;
            const auto entry = statAt(dir.get(), part);
            if (entry.link)
                return fail(root + "/" + walked
                    + " is a symbolic link; the cache never follows a link it did not create "
                      "(remove it, or move the whole cache folder in Settings instead)");
            if (entry.exists && !entry.dir)
                return fail(root + "/" + walked + " is not a folder; remove it");
            return fail(root + "/" + walked + ": " + std::strerror(err));
        }
        dir = std::move(next);
        walked += "/";
    }
    return dir;
}

Entry statAt(int dir, const std::string& name)
{
    struct stat st {};
    Entry e;
    if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
        return e;
    e.exists = true;
    e.link = S_ISLNK(st.st_mode);
    e.file = S_ISREG(st.st_mode);
    e.dir = S_ISDIR(st.st_mode);
    e.size = static_cast<std::uint64_t>(st.st_size);
    e.mtimeNs = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    e.inode = static_cast<std::uint64_t>(st.st_ino);
    e.device = static_cast<std::uint64_t>(st.st_dev);
    return e;
}

Entry statFd(int fd)
{
    struct stat st {};
    Entry e;
    if (::fstat(fd, &st) != 0)
        return e;
    e.exists = true;
    e.file = S_ISREG(st.st_mode);
    e.dir = S_ISDIR(st.st_mode);
    e.size = static_cast<std::uint64_t>(st.st_size);
    e.mtimeNs = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    e.inode = static_cast<std::uint64_t>(st.st_ino);
    e.device = static_cast<std::uint64_t>(st.st_dev);
    return e;
}

bool readLinkAt(int dir, const std::string& name, std::string& target)
{
    char buffer[4096];
    const auto n = ::readlinkat(dir, name.c_str(), buffer, sizeof buffer);
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof buffer)
        return false;
    target.assign(buffer, static_cast<std::size_t>(n));
    return true;
}

Fd openAt(int dir, const std::string& name, int flags, int mode)
{
    return Fd(::openat(dir, name.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode));
}

namespace {

std::string temporaryName(const std::string& name)
{
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    return "." + name + ".vireo-tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rng() % 1000000007);
}

}  // namespace

bool writeFileAt(int dir, const std::string& name, std::string_view data, std::string* error)
{
    const auto temp = temporaryName(name);
    Fd fd(::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (!fd.valid() || !writeAll(fd.get(), data.data(), data.size(), 0) || ::fsync(fd.get()) != 0) {
        if (error)
            *error = name + ": cannot write (" + std::strerror(errno) + ")";
        ::unlinkat(dir, temp.c_str(), 0);
        return false;
    }
    if (::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
        if (error)
            *error = name + ": cannot put in place (" + std::strerror(errno) + ")";
        ::unlinkat(dir, temp.c_str(), 0);
        return false;
    }
    return true;
}

bool replaceLinkAt(int dir, const std::string& name, const std::string& target, std::string* error)
{
    const auto temp = temporaryName(name);
    if (::symlinkat(target.c_str(), dir, temp.c_str()) != 0) {
        if (error)
            *error = name + ": cannot create the link (" + std::strerror(errno) + ")";
        return false;
    }
    if (::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
        if (error)
            *error = name + ": cannot place the link (" + std::strerror(errno) + ")";
        ::unlinkat(dir, temp.c_str(), 0);
        return false;
    }
    return true;
}

bool readAll(int fd, void* data, std::size_t bytes, std::uint64_t offset)
{
    auto* p = static_cast<char*>(data);
    while (bytes > 0) {
        const auto n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        bytes -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
    return true;
}

bool writeAll(int fd, const void* data, std::size_t bytes, std::uint64_t offset)
{
    const auto* p = static_cast<const char*>(data);
    while (bytes > 0) {
        const auto n = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        p += n;
        bytes -= static_cast<std::size_t>(n);
        offset += static_cast<std::uint64_t>(n);
    }
    return true;
}

}  // namespace vireo::hub::safefs
