#include "core/hub/fileplan.h"

#include "core/hub/hubjson.h"
#include "inference/util/format.h"
#include "inference/util/text.h"

#include <QDir>
#include <QFileInfo>
#include <QStorageInfo>

#include <algorithm>
#include <fnmatch.h>
#include <map>
#include <set>

namespace vireo::hub {

namespace {

std::uint64_t addSaturating(std::uint64_t a, std::uint64_t b)
{
    std::uint64_t out = 0;
    return __builtin_add_overflow(a, b, &out) ? UINT64_MAX : out;
}

bool endsWith(const std::string& s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool matchesAny(const std::vector<std::string>& patterns, const std::string& path)
{
    return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return globMatch(p, path); });
}

// Weight formats the studio reads. Pickle-based checkpoints (.bin, .pt, .ckpt) are never
// planned: loading them would execute code from the file.
bool isWeightFile(const std::string& path)
{
    return endsWith(path, ".safetensors") || endsWith(path, ".gguf");
}

bool isPickle(const std::string& path)
{
    for (const char* ext : {".bin", ".pt", ".pth", ".ckpt", ".pkl", ".msgpack", ".h5", ".onnx", ".onnx_data"})
        if (endsWith(path, ext))
            return true;
    return false;
}

// "diffusion_pytorch_model.fp16.safetensors" has variant "fp16"; the index's suffix counts
// too ("model.fp16.safetensors.index.json").
std::string variantOf(const std::string& path)
{
    auto name = path.substr(path.rfind('/') + 1);
    for (const char* suffix : {".safetensors.index.json", ".safetensors", ".gguf"})
        if (endsWith(name, suffix)) {
            name = name.substr(0, name.size() - std::string_view(suffix).size());
            break;
        }
    // Shards: name-00001-of-00002
    if (const auto of = name.find("-of-"); of != std::string::npos) {
        const auto dash = name.rfind('-', of - 1);
        if (dash != std::string::npos)
            name = name.substr(0, dash);
    }
    const auto dot = name.rfind('.');
    return dot == std::string::npos ? std::string() : name.substr(dot + 1);
}

HubResult<std::vector<std::string>> diffusersFiles(
    const HubClient& client, const std::string& repo, const std::string& commit, const std::vector<RepoFile>& all, const PlanRule& rule)
{
    auto text = client.fetchText(repo, commit, "model_index.json", 16ull << 20);
    if (!text)
        return text.error();
    auto components = parseModelIndexComponents(*text, repo);
    if (!components)
        return components.error();
    std::vector<std::string> selected{"model_index.json"};
    // A component the plan names that the repository ships as a folder beside the pipeline's
    // own ones (LTX-2.5's diffusion decoder, which its DFR pipeline does not list; a processor
    // folder, which holds tokenizer files and no config.json) is taken too.
    auto wanted = *components;
    for (const auto& extra : rule.components)
        if (std::find(wanted.begin(), wanted.end(), extra) == wanted.end()
            && std::any_of(all.begin(), all.end(), [&](const RepoFile& f) { return f.path.rfind(extra + "/", 0) == 0; }))
            wanted.push_back(extra);
    for (const auto& component : wanted) {
        if (!rule.components.empty() && std::find(rule.components.begin(), rule.components.end(), component) == rule.components.end())
            continue;
        const std::string prefix = component + "/";
        std::vector<const RepoFile*> files;
        for (const auto& f : all)
            if (f.path.rfind(prefix, 0) == 0)
                files.push_back(&f);
        // Among this component's weights, keep the chosen precision; an index, when there is
        // one for it, names exactly the shards to take.
        std::set<std::string> weights;
        const RepoFile* chosenIndex = nullptr;
        for (const auto* f : files)
            if (endsWith(f->path, ".safetensors.index.json") && variantOf(f->path) == rule.weightVariant
                && f->path.find('/', prefix.size()) == std::string::npos)
                chosenIndex = f;
        if (chosenIndex) {
            auto indexText = client.fetchText(repo, commit, chosenIndex->path);
            if (!indexText)
                return indexText.error();
            auto shards = parseShardIndex(*indexText, repo, chosenIndex->path);
            if (!shards)
                return shards.error();
            weights.insert(chosenIndex->path);
            for (const auto& shard : *shards)
                weights.insert(prefix + shard);
        } else {
            for (const auto* f : files)
                if (isWeightFile(f->path) && variantOf(f->path) == rule.weightVariant
                    && f->path.find('/', prefix.size()) == std::string::npos)
                    weights.insert(f->path);
        }
        for (const auto* f : files) {
            const bool weight = isWeightFile(f->path) || endsWith(f->path, ".safetensors.index.json");
            if (weight ? weights.count(f->path) > 0 : !isPickle(f->path))
                selected.push_back(f->path);
        }
        for (const auto& w : weights)
            if (std::none_of(files.begin(), files.end(), [&](const RepoFile* f) { return f->path == w; }))
                return HubError{
                    HubErrorKind::Protocol, 0, repo + ": " + terminalSafe(w) + " is named by an index but not in the repository"};
    }
    return selected;
}

}  // namespace

bool globMatch(const std::string& pattern, const std::string& path)
{
    return ::fnmatch(pattern.c_str(), path.c_str(), 0) == 0;
}

std::string humanSize(std::uint64_t bytes)
{
    return vireo::humanBytes(bytes);
}

std::uint64_t FilePlan::totalBytes() const
{
    std::uint64_t n = 0;
    for (const auto& f : files)
        n = addSaturating(n, f.file.size);
    return n;
}

std::uint64_t FilePlan::presentBytes() const
{
    std::uint64_t n = 0;
    for (const auto& f : files)
        n = addSaturating(n, (f.present || f.blobPresent) ? f.file.size : std::min(f.partialBytes, f.file.size));
    return n;
}

void refreshPresence(FilePlan& plan, const HfCache& cache, HfCache::Verify verify, const std::atomic<bool>* cancel)
{
    for (auto& f : plan.files) {
        f.present = cache.hasFile(plan.repo, plan.commit, f.file, verify, cancel);
        f.blobPresent = f.present || cache.hasBlob(plan.repo, f.file, verify, cancel);
        f.partialBytes = f.blobPresent ? 0 : cache.partialBytes(plan.repo, f.file.etag());
    }
}

HubResult<FilePlan> makePlan(const HubClient& client, const HfCache& cache, const std::string& repo, const std::string& revision,
    const PlanRule& rule, const std::atomic<bool>* cancel)
{
    FilePlan plan;
    plan.repo = repo;
    plan.revision = revision;
    if (client.options().offline) {
        auto commit = cache.readRef(repo, revision);
        if (!commit)
            return HubError{HubErrorKind::Offline, 0, repo + ": offline, and the cache has no '" + revision + "' of it"};
        return HubError{
            HubErrorKind::Offline, 0, repo + ": offline; planning needs the Hub's file list (the cache has commit " + *commit + ")"};
    }
    auto info = client.repoInfo(repo, revision);
    if (!info)
        return info.error();
    plan.commit = info->commit;
    auto all = client.listFiles(repo, plan.commit);
    if (!all)
        return all.error();
    for (const auto& f : *all)
        if (!HfCache::isSafeRepoPath(f.path)) {
            // Said before a byte moves: a name no filesystem takes would fail only when the
            // finished download is linked into its snapshot.
            bool tooLong = f.path.size() > HfCache::kMaxRepoPathBytes;
            for (std::size_t start = 0, end = 0; !tooLong && start <= f.path.size(); start = end + 1) {
                end = f.path.find('/', start);
                if (end == std::string::npos)
                    end = f.path.size();
                tooLong = end - start > HfCache::kMaxNameBytes;
            }
            return HubError{HubErrorKind::Unsafe, 0,
                shownName(repo) + ": the Hub lists a file named '" + shownName(f.path) + "', "
                    + (tooLong ? "a name longer than a filesystem takes (255 bytes a part, " + std::to_string(HfCache::kMaxRepoPathBytes)
                                + " in all); refusing the plan"
                               : std::string("which would leave the cache; refusing the plan"))};
        }

    std::set<std::string> chosen;
    if (rule.mode == PlanRule::Mode::Diffusers) {
        auto files = diffusersFiles(client, repo, plan.commit, *all, rule);
        if (!files)
            return files.error();
        chosen.insert(files->begin(), files->end());
    }
    for (const auto& f : *all) {
        const bool byRule = rule.mode == PlanRule::Mode::Diffusers ? chosen.count(f.path) > 0 : matchesAny(rule.include, f.path);
        if (!byRule || matchesAny(rule.exclude, f.path) || isPickle(f.path))
            continue;
        plan.files.push_back({f});
    }
    if (plan.files.empty())
        return HubError{HubErrorKind::EntryNotFound, 0, repo + ": no file of the repository matches the variant's rules"};
    if (plan.totalBytes() > kMaxPlanBytes)
        return HubError{HubErrorKind::Protocol, 0,
            repo + ": the planned files add up to " + humanSize(plan.totalBytes())
                + ", more than any model; the Hub's listing is broken or hostile"};
    // A gated repo lists its files to anyone; only the download is refused. Probe one file
    // so a missing token or licence shows now, not after the user pressed Start.
    if (!info->gated.empty() && info->gated != "false") {
        auto probe = client.fileMetadata(repo, plan.commit, plan.files.front().file.path);
        if (!probe)
            return probe.error();
    }
    refreshPresence(plan, cache, HfCache::Verify::Hash, cancel);
    if (cancel && cancel->load())
        return HubError{HubErrorKind::Cancelled, 0, repo + ": cancelled while checking the files already in the cache"};
    return plan;
}

Preflight preflight(const FilePlan& plan, const HfCache& cache, std::uint64_t headroomBytes)
{
    Preflight p;
    // Files sharing one blob are fetched once.
    std::set<std::string> counted;
    std::uint64_t remaining = 0;
    for (const auto& f : plan.files)
        if (!f.blobPresent && counted.insert(f.file.etag()).second)
            remaining = addSaturating(remaining, f.file.size - std::min(f.partialBytes, f.file.size));
    // Saturating: sizes near 2^64 (from a plan not made by makePlan) make a need no disk
    // meets, never a small wrapped-around one that "fits".
    p.neededBytes = remaining == 0 ? 0 : addSaturating(remaining, headroomBytes);
    // The cache folder may not exist yet: measure the nearest existing parent.
    QString dir = QString::fromStdString(cache.root().string());
    while (!QFileInfo::exists(dir) && dir != QDir::rootPath() && !dir.isEmpty())
        dir = QFileInfo(dir).path();
    p.volume = dir.toStdString();
    QStorageInfo storage(dir);
    p.freeBytes = storage.isValid() ? static_cast<std::uint64_t>(storage.bytesAvailable()) : 0;
    p.fits = p.neededBytes <= p.freeBytes;
    p.message = p.fits
        ? humanSize(remaining) + " to download, " + humanSize(p.freeBytes) + " free on " + p.volume
        : "needs " + humanSize(p.neededBytes) + " (" + humanSize(remaining) + " plus " + humanSize(headroomBytes) + " headroom) but only "
            + humanSize(p.freeBytes) + " is free on " + p.volume + "; free some space or choose another cache folder in Settings";
    return p;
}

}  // namespace vireo::hub
