#include "core/hub/hfcache.h"

#include "core/hub/digest.h"
#include "inference/util/text.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

// File operations here are POSIX calls through safefs: Qt's follow links, and the torch
// wheel's libtorch.so exports its own copies of several std::filesystem functions that the
// process resolves to (remove_all crashes). Paths stay std::filesystem::path values at the API.

namespace vireo::hub {

namespace {

constexpr const char* kPartialFolder = ".vireo-partial";
constexpr const char* kVerifiedFolder = ".vireo-verified";

bool isHex(const std::string& s, std::size_t length)
{
    return s.size() == length && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool isEtag(const std::string& s)
{
    return isHex(s, 64) || isHex(s, 40);
}

bool isSafeName(const std::string& s)
{
    // 255 bytes is the longest name Linux filesystems take: a longer one would pass every check
    // and fail only when the finished download is linked into the snapshot.
    if (s.empty() || s == "." || s == ".." || s.size() > HfCache::kMaxNameBytes)
        return false;
    for (unsigned char c : s)
        if (c < 0x20 || c == 0x7F || c == '/' || c == '\\')
            return false;
    return true;
}

HubError unsafe(const std::string& what)
{
    return {HubErrorKind::Unsafe, 0, what + " would leave the model cache; refusing it"};
}

HubError fsError(const std::string& message)
{
    // A planted link is a safety matter, not a disk problem.
    return {message.find("symbolic link") != std::string::npos ? HubErrorKind::Unsafe : HubErrorKind::Io, 0, message};
}

// "a/b/c" -> ("a/b", "c").
std::pair<std::string, std::string> splitLast(const std::string& path)
{
    const auto slash = path.rfind('/');
    if (slash == std::string::npos)
        return {std::string(), path};
    return {path.substr(0, slash), path.substr(slash + 1)};
}

// Lexically resolves `link` as seen from the folder `from` (components); empty when it climbs
// above the start.
std::optional<std::vector<std::string>> resolveLexically(std::vector<std::string> from, const std::string& link)
{
    for (const auto& part : safefs::splitPath(link)) {
        if (part == ".")
            continue;
        if (part == "..") {
            if (from.empty())
                return std::nullopt;
            from.pop_back();
        } else {
            from.push_back(part);
        }
    }
    return from;
}

// A file of at most 256 bytes, never through a link, and never blocking (a FIFO planted as
// refs/main must not hang the planner).
std::optional<std::string> readSmall(int dir, const std::string& name)
{
    auto fd = safefs::openAt(dir, name, O_RDONLY | O_NONBLOCK);
    if (!fd.valid() || !safefs::statFd(fd.get()).file)
        return std::nullopt;
    char buffer[256];
    const auto n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0)
        return std::nullopt;
    return std::string(buffer, static_cast<std::size_t>(n));
}

std::string recordText(const safefs::Entry& e)
{
    return "v1 " + std::to_string(e.size) + " " + std::to_string(e.mtimeNs) + " " + std::to_string(e.inode) + " " + std::to_string(e.device)
        + "\n";
}

}  // namespace

HfCache::HfCache(std::filesystem::path root) : m_root(std::move(root)) {}

HubResult<std::string> HfCache::repoFolderName(const std::string& repo)
{
    const auto slash = repo.find('/');
    if (slash == std::string::npos || repo.find('/', slash + 1) != std::string::npos || !isSafeName(repo.substr(0, slash))
        || !isSafeName(repo.substr(slash + 1)))
        return HubError{HubErrorKind::Unsafe, 0, "'" + repo + "' is not a repository id of the form org/name"};
    return "models--" + repo.substr(0, slash) + "--" + repo.substr(slash + 1);
}

bool HfCache::isSafeRepoPath(const std::string& path)
{
    if (path.empty() || path.front() == '/' || path.size() > HfCache::kMaxRepoPathBytes)
        return false;
    std::size_t start = 0;
    while (start <= path.size()) {
        const auto end = path.find('/', start);
        const auto part = path.substr(start, end == std::string::npos ? std::string::npos : end - start);
        if (!isSafeName(part))
            return false;
        if (end == std::string::npos)
            break;
        start = end + 1;
    }
    return true;
}

HubResult<std::filesystem::path> HfCache::repoDir(const std::string& repo) const
{
    auto name = repoFolderName(repo);
    if (!name)
        return name.error();
    return m_root / *name;
}

HubResult<std::filesystem::path> HfCache::blobPath(const std::string& repo, const std::string& etag) const
{
    if (!isEtag(etag))
        return unsafe("blob name '" + shownName(etag) + "'");
    auto dir = repoDir(repo);
    if (!dir)
        return dir.error();
    return *dir / "blobs" / etag;
}

HubResult<std::filesystem::path> HfCache::snapshotPath(const std::string& repo, const std::string& commit, const std::string& path) const
{
    if (!isHex(commit, 40))
        return unsafe("commit '" + shownName(commit) + "'");
    if (!isSafeRepoPath(path))
        return unsafe(shownName(repo) + ": file path '" + shownName(path) + "'");
    auto dir = repoDir(repo);
    if (!dir)
        return dir.error();
    return *dir / "snapshots" / commit / path;
}

HubResult<std::filesystem::path> HfCache::partialPath(const std::string& repo, const std::string& etag) const
{
    auto blob = blobPath(repo, etag);
    if (!blob)
        return blob.error();
    return blob->parent_path().parent_path() / kPartialFolder / (etag + ".part");
}

bool HfCache::blobVerified(
    const std::string& repo, const std::string& folder, const RepoFile& file, Verify verify, const std::atomic<bool>* cancel) const
{
    const auto root = m_root.string();
    const auto& etag = file.etag();
    auto blobs = safefs::openDir(root, folder + "/blobs", false, nullptr);
    if (!blobs.valid())
        return false;
    const auto entry = safefs::statAt(blobs.get(), etag);
    if (!entry.file || entry.size != file.size)
        return false;  // absent, a link, a folder, a FIFO, or the wrong size
    std::optional<std::string> record;
    if (auto verified = safefs::openDir(root, folder + "/" + kVerifiedFolder, false, nullptr); verified.valid())
        record = readSmall(verified.get(), etag);
    if (record && *record == recordText(entry))
        return true;
    if (verify == Verify::Cheap)
        return !record;  // never verified by Vireo (another tool wrote it): counted by its size

    auto fd = safefs::openAt(blobs.get(), etag, O_RDONLY | O_NONBLOCK);
    if (!fd.valid())
        return false;
    const auto opened = safefs::statFd(fd.get());
    if (!opened.file || opened.inode != entry.inode || opened.size != file.size)
        return false;  // replaced between the look and the open
    Digest digest(file.lfs(), file.size);
    std::vector<char> buffer(8 << 20);
    for (std::uint64_t offset = 0; offset < file.size;) {
        if (cancel && cancel->load())
            return false;
        const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(buffer.size(), file.size - offset));
        if (!safefs::readAll(fd.get(), buffer.data(), n, offset))
            return false;
        digest.add(buffer.data(), n);
        offset += n;
    }
    if (digest.hex() == etag) {
        if (auto verified = safefs::openDir(root, folder + "/" + kVerifiedFolder, true, nullptr); verified.valid())
            safefs::writeFileAt(verified.get(), etag, recordText(safefs::statFd(fd.get())), nullptr);
        return true;
    }
    // Damaged content is never present: set aside where cleanup finds it, so the next
    // download fetches the blob again.
    if (auto partial = safefs::openDir(root, folder + "/" + kPartialFolder, true, nullptr); partial.valid())
        ::renameat(blobs.get(), etag.c_str(), partial.get(), (etag + ".part.rejected").c_str());
    std::fprintf(stderr, "vireo: %s: blob %s failed its hash check and was moved aside\n", repo.c_str(), etag.c_str());
    return false;
}

bool HfCache::hasFile(
    const std::string& repo, const std::string& commit, const RepoFile& file, Verify verify, const std::atomic<bool>* cancel) const
{
    const auto folder = repoFolderName(repo);
    if (!folder || !isHex(commit, 40) || !isSafeRepoPath(file.path) || !isEtag(file.etag()))
        return false;
    const auto [dirs, name] = splitLast(file.path);
    auto dir = safefs::openDir(m_root.string(), *folder + "/snapshots/" + commit + "/" + dirs, false, nullptr);
    if (!dir.valid())
        return false;
    std::string target;
    if (!safefs::readLinkAt(dir.get(), name, target))
        return false;  // absent, or a plain file no cache tool writes
    // The link must lead to this repo's blob of this file, whatever text spells it.
    bool intoBlob = false;
    if (!target.empty() && target.front() == '/') {
        const auto resolved = resolveLexically({}, target);
        const auto expected = resolveLexically({}, m_root.string() + "/" + *folder + "/blobs/" + file.etag());
        intoBlob = resolved && expected && *resolved == *expected;
    } else {
        std::vector<std::string> from{"snapshots", commit};
        for (const auto& d : safefs::splitPath(dirs))
            from.push_back(d);
        const auto resolved = resolveLexically(from, target);
        intoBlob = resolved && *resolved == std::vector<std::string>{"blobs", file.etag()};
    }
    return intoBlob && blobVerified(repo, *folder, file, verify, cancel);
}

bool HfCache::hasBlob(const std::string& repo, const RepoFile& file, Verify verify, const std::atomic<bool>* cancel) const
{
    const auto folder = repoFolderName(repo);
    return folder && isEtag(file.etag()) && blobVerified(repo, *folder, file, verify, cancel);
}

std::optional<std::string> HfCache::readRef(const std::string& repo, const std::string& revision) const
{
    const auto folder = repoFolderName(repo);
    if (!folder || !isHfRefName(revision))
        return std::nullopt;
    const auto [dirs, name] = splitLast(revision);
    auto dir = safefs::openDir(m_root.string(), *folder + "/refs/" + dirs, false, nullptr);
    if (!dir.valid())
        return std::nullopt;
    auto text = readSmall(dir.get(), name);
    if (!text)
        return std::nullopt;
    while (!text->empty() && (text->back() == '\n' || text->back() == '\r' || text->back() == ' '))
        text->pop_back();
    return isHex(*text, 40) ? text : std::nullopt;
}

bool HfCache::isHfRefName(const std::string& revision)
{
    return isSafeRepoPath(revision) && revision.find("..") == std::string::npos;
}

HubResult<void> HfCache::writeRef(const std::string& repo, const std::string& revision, const std::string& commit) const
{
    if (isHex(revision, 40))
        return {};  // a commit needs no ref
    if (!isHfRefName(revision) || !isHex(commit, 40))
        return unsafe("ref '" + shownName(revision) + "'");
    const auto folder = repoFolderName(repo);
    if (!folder)
        return folder.error();
    const auto [dirs, name] = splitLast(revision);
    std::string error;
    auto dir = safefs::openDir(m_root.string(), *folder + "/refs/" + dirs, true, &error);
    if (!dir.valid())
        return fsError(error + "; cannot write the ref '" + revision + "'");
    if (!safefs::writeFileAt(dir.get(), name, commit, &error))
        return fsError((m_root / *folder / "refs" / revision).string() + ": cannot write the ref (" + error + ")");
    return {};
}

HubResult<safefs::Fd> HfCache::openPartial(const std::string& repo, const std::string& etag) const
{
    auto path = partialPath(repo, etag);
    if (!path)
        return path.error();
    std::string error;
    auto dir = safefs::openDir(m_root.string(), *repoFolderName(repo) + "/" + kPartialFolder, true, &error);
    if (!dir.valid())
        return fsError(error);
    const auto name = etag + ".part";
    // The folder is Vireo's own: anything but a regular file there is not a partial download
    // (a planted link, a FIFO) and is replaced, never written through.
    if (const auto e = safefs::statAt(dir.get(), name); e.exists && !e.file) {
        if (::unlinkat(dir.get(), name.c_str(), e.dir ? AT_REMOVEDIR : 0) != 0)
            return fsError(path->string() + " is not a regular file and cannot be removed; remove it");
    }
    auto fd = safefs::openAt(dir.get(), name, O_RDWR | O_CREAT | O_NONBLOCK);
    if (!fd.valid() || !safefs::statFd(fd.get()).file)
        return fsError(path->string() + ": cannot open the partial file (" + std::strerror(errno) + ")");
    return fd;
}

std::uint64_t HfCache::partialBytes(const std::string& repo, const std::string& etag) const
{
    const auto folder = repoFolderName(repo);
    if (!folder || !isEtag(etag))
        return 0;
    auto dir = safefs::openDir(m_root.string(), *folder + "/" + kPartialFolder, false, nullptr);
    if (!dir.valid())
        return 0;
    const auto e = safefs::statAt(dir.get(), etag + ".part");
    return e.file ? e.size : 0;
}

HubResult<void> HfCache::writeJournal(const std::string& repo, const std::string& etag, const std::string& json) const
{
    auto path = partialPath(repo, etag);
    if (!path)
        return path.error();
    std::string error;
    auto dir = safefs::openDir(m_root.string(), *repoFolderName(repo) + "/" + kPartialFolder, true, &error);
    if (!dir.valid() || !safefs::writeFileAt(dir.get(), etag + ".part.json", json, &error))
        return fsError(path->string() + ".json: " + error);
    return {};
}

void HfCache::removeJournal(const std::string& repo, const std::string& etag) const
{
    const auto folder = repoFolderName(repo);
    if (!folder || !isEtag(etag))
        return;
    if (auto dir = safefs::openDir(m_root.string(), *folder + "/" + kPartialFolder, false, nullptr); dir.valid())
        ::unlinkat(dir.get(), (etag + ".part.json").c_str(), 0);
}

HubResult<void> HfCache::rejectPartial(const std::string& repo, const std::string& etag) const
{
    auto path = partialPath(repo, etag);
    if (!path)
        return path.error();
    std::string error;
    auto dir = safefs::openDir(m_root.string(), *repoFolderName(repo) + "/" + kPartialFolder, false, &error);
    if (!dir.valid())
        return fsError(error);
    if (::renameat(dir.get(), (etag + ".part").c_str(), dir.get(), (etag + ".part.rejected").c_str()) != 0 && errno != ENOENT)
        return fsError(path->string() + ": cannot set the damaged download aside (" + std::strerror(errno) + ")");
    return {};
}

HubResult<void> HfCache::linkSnapshot(const std::string& repo, const std::string& commit, const RepoFile& file) const
{
    auto blob = blobPath(repo, file.etag());
    auto entry = snapshotPath(repo, commit, file.path);
    if (!blob)
        return blob.error();
    if (!entry)
        return entry.error();
    const auto [dirs, name] = splitLast(file.path);
    std::string error;
    auto dir = safefs::openDir(m_root.string(), *repoFolderName(repo) + "/snapshots/" + commit + "/" + dirs, true, &error);
    if (!dir.valid())
        return fsError(error);
    // Relative, as huggingface_hub writes it: ../../blobs/<etag> plus one ../ per sub-folder.
    std::string target = "../../";
    for (char c : file.path)
        if (c == '/')
            target += "../";
    target += "blobs/" + file.etag();
    if (!safefs::replaceLinkAt(dir.get(), name, target, &error))
        return fsError(entry->string() + ": " + error);
    return {};
}

HubResult<void> HfCache::commitPartial(const std::string& repo, const std::string& commit, const RepoFile& file) const
{
    auto blob = blobPath(repo, file.etag());
    if (!blob)
        return blob.error();
    const auto folder = *repoFolderName(repo);
    std::string error;
    auto partial = safefs::openDir(m_root.string(), folder + "/" + kPartialFolder, false, &error);
    if (!partial.valid())
        return fsError(error);
    auto blobs = safefs::openDir(m_root.string(), folder + "/blobs", true, &error);
    if (!blobs.valid())
        return fsError(error);
    // Over whatever is there: the bytes just verified win over a blob that another tool wrote
    // (or a link someone planted), and a reader of the old file keeps its open descriptor.
    if (::renameat(partial.get(), (file.etag() + ".part").c_str(), blobs.get(), file.etag().c_str()) != 0)
        return fsError(blob->string() + ": cannot move the verified download into the cache (" + std::strerror(errno) + ")");
    if (auto verified = safefs::openDir(m_root.string(), folder + "/" + kVerifiedFolder, true, nullptr); verified.valid()) {
        const auto e = safefs::statAt(blobs.get(), file.etag());
        if (e.file)
            safefs::writeFileAt(verified.get(), file.etag(), recordText(e), nullptr);
    }
    return linkSnapshot(repo, commit, file);
}

}  // namespace vireo::hub
