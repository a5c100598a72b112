#include "core/hub/hfcache.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include <algorithm>
#include <cstdio>

// File operations here go through Qt: the torch wheel's libtorch.so exports its own copies
// of several std::filesystem functions, and the process resolves to them (remove_all
// crashes). Paths stay std::filesystem::path values at the API.

namespace vireo::hub {

namespace {

QString q(const std::filesystem::path& p)
{
    return QString::fromStdString(p.string());
}

bool isHex(const std::string& s, std::size_t length)
{
    return s.size() == length && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    });
}

bool isSafeName(const std::string& s)
{
    if (s.empty() || s == "." || s == "..")
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

HubError ioError(const std::string& what)
{
    return {HubErrorKind::Io, 0, what};
}

} // namespace

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
    if (path.empty() || path.front() == '/' || path.size() > 4096)
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
    if (!isHex(etag, 64) && !isHex(etag, 40))
        return unsafe("blob name '" + etag + "'");
    auto dir = repoDir(repo);
    if (!dir)
        return dir.error();
    return *dir / "blobs" / etag;
}

HubResult<std::filesystem::path> HfCache::snapshotPath(const std::string& repo, const std::string& commit,
                                                       const std::string& path) const
{
    if (!isHex(commit, 40))
        return unsafe("commit '" + commit + "'");
    if (!isSafeRepoPath(path))
        return unsafe(repo + ": file path '" + path + "'");
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
    return blob->parent_path().parent_path() / ".vireo-partial" / (etag + ".part");
}

bool HfCache::hasFile(const std::string& repo, const std::string& commit, const RepoFile& file) const
{
    auto path = snapshotPath(repo, commit, file.path);
    if (!path)
        return false;
    const QFileInfo info(q(*path)); // follows the symlink
    return info.exists() && info.isFile() && static_cast<std::uint64_t>(info.size()) == file.size;
}

bool HfCache::hasBlob(const std::string& repo, const RepoFile& file) const
{
    auto blob = blobPath(repo, file.etag());
    if (!blob)
        return false;
    const QFileInfo info(q(*blob));
    return info.isFile() && static_cast<std::uint64_t>(info.size()) == file.size;
}

std::optional<std::string> HfCache::readRef(const std::string& repo, const std::string& revision) const
{
    auto dir = repoDir(repo);
    if (!dir || !isHfRefName(revision))
        return std::nullopt;
    QFile file(q(*dir / "refs" / revision));
    if (!file.open(QIODevice::ReadOnly))
        return std::nullopt;
    const auto commit = file.read(128).trimmed().toStdString();
    return isHex(commit, 40) ? std::optional<std::string>(commit) : std::nullopt;
}

bool HfCache::isHfRefName(const std::string& revision)
{
    return isSafeRepoPath(revision) && revision.find("..") == std::string::npos;
}

HubResult<void> HfCache::writeRef(const std::string& repo, const std::string& revision, const std::string& commit) const
{
    if (isHex(revision, 40))
        return {}; // a commit needs no ref
    if (!isHfRefName(revision) || !isHex(commit, 40))
        return unsafe("ref '" + revision + "'");
    auto dir = repoDir(repo);
    if (!dir)
        return dir.error();
    const auto path = *dir / "refs" / revision;
    QDir().mkpath(q(path.parent_path()));
    QSaveFile file(q(path));
    if (!file.open(QIODevice::WriteOnly) || file.write(QByteArray::fromStdString(commit)) != static_cast<qint64>(commit.size())
        || !file.commit())
        return ioError(path.string() + ": cannot write the ref (" + file.errorString().toStdString() + ")");
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
    QDir().mkpath(q(entry->parent_path()));
    // Relative, as huggingface_hub writes it: ../../blobs/<etag> plus one ../ per sub-folder.
    std::string target = "../../";
    for (char c : file.path)
        if (c == '/')
            target += "../";
    target += "blobs/" + file.etag();
    const QString link = q(*entry);
    const QString temp = link + QStringLiteral(".vireo-link");
    QFile::remove(temp);
    if (!QFile::link(QString::fromStdString(target), temp))
        return ioError(entry->string() + ": cannot create the snapshot link");
    if (::rename(temp.toLocal8Bit().constData(), link.toLocal8Bit().constData()) != 0) {
        QFile::remove(temp);
        return ioError(entry->string() + ": cannot place the snapshot link");
    }
    return {};
}

HubResult<void> HfCache::commitPartial(const std::string& repo, const std::string& commit, const RepoFile& file,
                                       const std::filesystem::path& partial) const
{
    auto blob = blobPath(repo, file.etag());
    if (!blob)
        return blob.error();
    QDir().mkpath(q(blob->parent_path()));
    if (hasBlob(repo, file)) {
        QFile::remove(q(partial)); // another download (or Python) finished it first
    } else if (::rename(partial.c_str(), blob->c_str()) != 0) {
        return ioError(blob->string() + ": cannot move the verified download into the cache");
    }
    return linkSnapshot(repo, commit, file);
}

} // namespace vireo::hub
