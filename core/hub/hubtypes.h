#pragma once

#include "inference/util/result.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vireo::hub {

// What went wrong, in the categories a user can act on.
enum class HubErrorKind {
    Network,  // connection failed, reset, timed out (after retries)
    Offline,  // HF_HUB_OFFLINE / offline mode: nothing may be fetched
    GatedNoToken,  // gated repo and no token
    GatedNoAccess,  // token without access: accept the licence on the repo page
    RepoNotFound,  // missing or private
    RevisionNotFound,
    EntryNotFound,  // file missing at that commit
    Unauthorized,  // token rejected
    Http,  // any other HTTP status
    Protocol,  // the server's answer did not make sense (missing headers, bad JSON)
    Integrity,  // size or SHA-256 mismatch
    DiskFull,
    Io,
    Unsafe,  // a path that would escape the cache
    Cancelled,
};

const char* hubErrorKindName(HubErrorKind kind);

struct HubError {
    HubErrorKind kind = HubErrorKind::Network;
    int httpStatus = 0;
    std::string message;  // a sentence for the user: what, which repo/file, what to do
};

template <typename T>
using HubResult = vireo::Result<T, HubError>;

struct RepoFile {
    std::string path;
    std::uint64_t size = 0;
    std::string gitOid;  // git blob sha1
    std::string sha256;  // LFS oid; empty for files stored in git
    bool lfs() const { return !sha256.empty(); }
    // The blob name in the cache (huggingface_hub's etag): sha256 for LFS, git oid otherwise.
    const std::string& etag() const { return lfs() ? sha256 : gitOid; }
};

struct RepoInfo {
    std::string repo;
    std::string commit;
    std::string gated;  // "", "auto", "manual"
    bool isPrivate = false;
};

struct FileMetadata {
    std::string commit;
    std::string etag;
    std::uint64_t size = 0;
    std::string location;  // where the bytes are (the redirect target for LFS files)
};

}  // namespace vireo::hub
