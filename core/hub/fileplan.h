#pragma once

#include "core/hub/hfcache.h"
#include "core/hub/hubclient.h"

#include <cstdint>
#include <string>
#include <vector>

namespace vireo::hub {

// Which files of a repo a pipeline reads. Rules are data (resources/catalog.json).
struct PlanRule {
    enum class Mode { Files, Diffusers };
    Mode mode = Mode::Files;
    std::vector<std::string> include{"*"};  // fnmatch globs on the repo path ('*' crosses '/')
    std::vector<std::string> exclude;
    std::vector<std::string> components;  // diffusers: empty = every component model_index.json names
    std::string weightVariant;  // diffusers file infix ("fp16"), empty = none
};

struct PlannedFile {
    RepoFile file;
    bool present = false;  // usable from the snapshot already
    bool blobPresent = false;  // bytes in the cache (maybe under another commit): only a link is missing
    std::uint64_t partialBytes = 0;  // a resumable partial download
};

struct FilePlan {
    std::string repo;
    std::string revision;
    std::string commit;
    std::vector<PlannedFile> files;

    // Sums never overflow: makePlan refuses a plan above kMaxPlanBytes, and these saturate.
    std::uint64_t totalBytes() const;
    // Bytes already in the cache (complete blobs) plus resumable partial bytes, clamped to
    // each file's size: the same number the progress starts from.
    std::uint64_t presentBytes() const;
    std::uint64_t remainingBytes() const { return totalBytes() - presentBytes(); }
};

struct Preflight {
    std::uint64_t neededBytes = 0;  // remaining plan + headroom (saturating: an absurd need never "fits")
    std::uint64_t freeBytes = 0;
    std::string volume;  // the folder whose volume was measured
    bool fits = false;
    std::string message;  // "needs 93.1 GB, 12.4 GB free on /home; free space or ..."
};

// A plan of more than 1 PiB is a hostile or broken listing, not a model.
inline constexpr std::uint64_t kMaxPlanBytes = 1ull << 50;

// Lists the repo at the revision's commit and applies the rule. Diffusers mode reads
// model_index.json and each component's shard index, so duplicate shard sets, other
// precisions and root single-file checkpoints are left out. Presence is checked with
// HfCache::Verify::Hash (blobs another tool wrote are hashed once); cancel stops that.
HubResult<FilePlan> makePlan(const HubClient& client, const HfCache& cache, const std::string& repo, const std::string& revision,
    const PlanRule& rule, const std::atomic<bool>* cancel = nullptr);
// Recomputes presence (after a download, or when another tool filled the cache). Cheap by
// default: it may run on the GUI thread.
void refreshPresence(
    FilePlan& plan, const HfCache& cache, HfCache::Verify verify = HfCache::Verify::Cheap, const std::atomic<bool>* cancel = nullptr);
// The cache's volume must hold the plan's remaining bytes plus headroom.
Preflight preflight(const FilePlan& plan, const HfCache& cache, std::uint64_t headroomBytes = 2ull << 30);

bool globMatch(const std::string& pattern, const std::string& path);
std::string humanSize(std::uint64_t bytes);

}  // namespace vireo::hub
