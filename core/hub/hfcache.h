#pragma once

#include "core/hub/hubtypes.h"
#include "core/hub/safefs.h"

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>

namespace vireo::hub {

// The huggingface_hub cache layout, shared with Python tools both ways:
//   <root>/models--org--name/blobs/<etag>
//   <root>/models--org--name/snapshots/<commit>/<path>  -> relative symlink to the blob
//   <root>/models--org--name/refs/<revision>            (the commit)
// Vireo's partial downloads live in models--org--name/.vireo-partial/, a folder
// huggingface_hub neither reads nor cleans, on the same volume so the final move is atomic.
// models--org--name/.vireo-verified/<etag> remembers (size, mtime, inode) of a blob whose
// hash was checked, so a 40 GB file is hashed once, not on every look.
//
// Nothing below the root is reached through a link the cache did not create (safefs.h): a
// blob must be a regular file, a snapshot entry must be a link into the repo's own blobs/,
// and a partial, journal, ref or record is opened without following links.
class HfCache {
public:
    explicit HfCache(std::filesystem::path root);

    const std::filesystem::path& root() const { return m_root; }

    // "models--org--name"; an error for a repo id that is not org/name.
    static HubResult<std::string> repoFolderName(const std::string& repo);
    // A repo path from the Hub must stay inside its snapshot: no absolute paths, "..",
    // backslashes, empty segments or control characters.
    // Longest name of one path component, and of a whole path in a repo, the cache takes: a
    // filesystem's limit, and PATH_MAX less the cache's own folders.
    static constexpr std::size_t kMaxNameBytes = 255;
    static constexpr std::size_t kMaxRepoPathBytes = 1024;
    static bool isSafeRepoPath(const std::string& path);
    static bool isHfRefName(const std::string& revision);

    HubResult<std::filesystem::path> repoDir(const std::string& repo) const;
    HubResult<std::filesystem::path> blobPath(const std::string& repo, const std::string& etag) const;
    HubResult<std::filesystem::path> snapshotPath(const std::string& repo, const std::string& commit, const std::string& path) const;
    HubResult<std::filesystem::path> partialPath(const std::string& repo, const std::string& etag) const;

    // How much a presence check may cost. Cheap: structure and size, and a blob whose recorded
    // verification no longer matches (modified since) is absent; a blob never verified (written
    // by another tool) counts by its size. Hash: a blob without a valid record is hashed now;
    // a match is recorded, a mismatch is moved aside as .vireo-partial/<etag>.part.rejected.
    // Planning uses Hash (on a worker thread); views and the GUI thread use Cheap.
    enum class Verify { Cheap, Hash };

    // The file is usable from this snapshot: its entry is a link to the repo's own blob, which
    // is a regular file of the expected size (and verified, per `verify`).
    bool hasFile(const std::string& repo, const std::string& commit, const RepoFile& file, Verify verify = Verify::Cheap,
        const std::atomic<bool>* cancel = nullptr) const;
    // The blob is already in the cache (perhaps for another commit or path).
    bool hasBlob(
        const std::string& repo, const RepoFile& file, Verify verify = Verify::Cheap, const std::atomic<bool>* cancel = nullptr) const;

    std::optional<std::string> readRef(const std::string& repo, const std::string& revision) const;
    HubResult<void> writeRef(const std::string& repo, const std::string& revision, const std::string& commit) const;

    // The partial download of a blob, opened read-write (created when absent), never through
    // a link.
    HubResult<safefs::Fd> openPartial(const std::string& repo, const std::string& etag) const;
    // Bytes of a resumable partial (0 when there is none, or it is not a regular file).
    std::uint64_t partialBytes(const std::string& repo, const std::string& etag) const;
    // The journal beside the partial (which file it belongs to), written atomically.
    HubResult<void> writeJournal(const std::string& repo, const std::string& etag, const std::string& json) const;
    void removeJournal(const std::string& repo, const std::string& etag) const;
    // Moves a partial that failed verification aside (.part.rejected, replacing an older one);
    // the next attempt starts from byte 0.
    HubResult<void> rejectPartial(const std::string& repo, const std::string& etag) const;

    // Moves the verified partial into blobs/ (atomically, over whatever was there: a blob
    // that failed its check, or a link), records it as verified, and links the snapshot entry.
    HubResult<void> commitPartial(const std::string& repo, const std::string& commit, const RepoFile& file) const;
    // Links snapshots/<commit>/<path> to an existing blob.
    HubResult<void> linkSnapshot(const std::string& repo, const std::string& commit, const RepoFile& file) const;

private:
    bool blobVerified(
        const std::string& repo, const std::string& folder, const RepoFile& file, Verify verify, const std::atomic<bool>* cancel) const;

    std::filesystem::path m_root;
};

}  // namespace vireo::hub
