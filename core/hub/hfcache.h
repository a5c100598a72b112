#pragma once

#include "core/hub/hubtypes.h"

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
class HfCache {
public:
    explicit HfCache(std::filesystem::path root);

    const std::filesystem::path& root() const { return m_root; }

    // "models--org--name"; an error for a repo id that is not org/name.
    static HubResult<std::string> repoFolderName(const std::string& repo);
    // A repo path from the Hub must stay inside its snapshot: no absolute paths, "..",
    // backslashes, empty segments or control characters.
    static bool isSafeRepoPath(const std::string& path);
    static bool isHfRefName(const std::string& revision);

    HubResult<std::filesystem::path> repoDir(const std::string& repo) const;
    HubResult<std::filesystem::path> blobPath(const std::string& repo, const std::string& etag) const;
    HubResult<std::filesystem::path> snapshotPath(const std::string& repo, const std::string& commit, const std::string& path) const;
    HubResult<std::filesystem::path> partialPath(const std::string& repo, const std::string& etag) const;

    // The file is usable from this snapshot: its snapshot entry resolves to a file of the
    // expected size.
    bool hasFile(const std::string& repo, const std::string& commit, const RepoFile& file) const;
    // The blob is already in the cache (perhaps for another commit or path).
    bool hasBlob(const std::string& repo, const RepoFile& file) const;

    std::optional<std::string> readRef(const std::string& repo, const std::string& revision) const;
    HubResult<void> writeRef(const std::string& repo, const std::string& revision, const std::string& commit) const;

    // Moves a verified partial into blobs/ (atomically) and links the snapshot entry.
    HubResult<void> commitPartial(const std::string& repo, const std::string& commit, const RepoFile& file,
                                  const std::filesystem::path& partial) const;
    // Links snapshots/<commit>/<path> to an existing blob.
    HubResult<void> linkSnapshot(const std::string& repo, const std::string& commit, const RepoFile& file) const;

private:
    std::filesystem::path m_root;
};

} // namespace vireo::hub
