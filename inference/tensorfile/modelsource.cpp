#include "inference/tensorfile/modelsource.h"

#include "inference/tensorfile/safetensors.h"
#include "inference/util/jsonlimits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace vireo::tensorfile {

namespace {

constexpr int kMaxFolderDepth = 4;
constexpr std::uintmax_t kMaxJsonBytes = 64ull << 20;

bool endsWith(const std::string& s, std::string_view suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The non-throwing forms only: a symlink loop or an overlong name inside a model folder is a
// damaged folder to report, not a filesystem_error to unwind through the caller.
bool existsNoThrow(const fs::path& p)
{
    std::error_code ec;
    return fs::exists(p, ec);
}

// Directory listings without the throwing operator++ that a range-for uses (an entry that
// vanishes or an I/O error mid-listing ends the listing with ec set instead).
template <typename Fn>
void forEachEntry(const fs::path& folder, std::error_code& ec, Fn fn)
{
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec))
        fn(*it);
}

bool isIndexFile(const fs::path& p)
{
    return endsWith(p.filename().string(), ".safetensors.index.json");
}

Result<std::string> readSmallText(const fs::path& path)
{
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec)
        return makeError(ErrorCode::Io, fileError(path, "cannot read: " + ec.message()));
    if (size > kMaxJsonBytes)
        return makeError(ErrorCode::InvalidFormat, fileError(path, "is larger than 64 MB; not a config or index file"));
    std::ifstream in(path, std::ios::binary);
    if (!in)
        return makeError(ErrorCode::Io, fileError(path, "cannot open"));
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

Result<Checkpoint> openSafetensors(const fs::path& path, std::string component)
{
    auto file = SafetensorsFile::open(path);
    if (!file)
        return file.error();
    Checkpoint cp;
    cp.component = std::move(component);
    cp.format = FileFormat::Safetensors;
    cp.path = path;
    cp.files.push_back(file->file);
    cp.tensors = std::move(file->tensors);
    cp.metadata = std::move(file->metadata);
    cp.buildIndex();
    return cp;
}

Result<Checkpoint> openGguf(const fs::path& path, std::string component)
{
    auto file = GgufFile::open(path);
    if (!file)
        return file.error();
    Checkpoint cp;
    cp.component = std::move(component);
    cp.format = FileFormat::Gguf;
    cp.path = path;
    cp.files.push_back(file->file);
    cp.tensors = std::move(file->tensors);
    cp.ggufMetadata = std::move(file->metadata);
    cp.ggufVersion = file->version;
    cp.ggufAlignment = file->alignment;
    cp.buildIndex();
    return cp;
}

// A shard name must stay inside the index's folder: an index is data from the internet.
bool isSafeRelativeName(const std::string& name)
{
    if (name.empty() || name.find('\0') != std::string::npos)
        return false;
    const fs::path p(name);
    if (p.is_absolute() || p.has_root_name() || p.has_root_directory())
        return false;
    for (const auto& part : p)
        if (part == "..")
            return false;
    return true;
}

Result<Checkpoint> openSharded(const fs::path& indexPath, std::string component)
{
    auto text = readSmallText(indexPath);
    if (!text)
        return text.error();
    auto parsed = jsonutil::parseUntrusted(*text, "the shard index");
    if (!parsed)
        return makeError(parsed.error().code, fileError(indexPath, parsed.error().message));
    const nlohmann::json& index = *parsed;
    const auto weightMap = index.find("weight_map");
    if (!index.is_object() || weightMap == index.end() || !weightMap->is_object())
        return makeError(ErrorCode::InvalidFormat, fileError(indexPath, "has no weight_map object"));

    Checkpoint cp;
    cp.component = std::move(component);
    cp.format = FileFormat::Safetensors;
    cp.path = indexPath;
    std::map<std::string, std::uint32_t> shardIndex;
    std::map<std::string, std::string> expectedShard;
    for (const auto& [tensor, shard] : weightMap->items()) {
        if (!shard.is_string())
            return makeError(ErrorCode::InvalidFormat, fileError(indexPath, "weight_map entry '" + tensor + "' is not a file name"));
        const auto name = shard.get<std::string>();
        if (!isSafeRelativeName(name))
            return makeError(ErrorCode::InvalidFormat,
                fileError(indexPath, "weight_map names '" + name + "', which points outside the checkpoint's folder; refusing it"));
        expectedShard.emplace(tensor, name);
        shardIndex.emplace(name, 0);
    }
    std::uint32_t next = 0;
    std::vector<std::string> missingShards;
    for (auto& [name, idx] : shardIndex) {
        const auto shardPath = indexPath.parent_path() / name;
        if (!existsNoThrow(shardPath)) {
            missingShards.push_back(name);
            continue;
        }
        auto shard = SafetensorsFile::open(shardPath);
        if (!shard)
            return shard.error();
        idx = next++;
        cp.files.push_back(shard->file);
        for (auto& info : shard->tensors) {
            info.fileIndex = idx;
            const auto it = expectedShard.find(info.name);
            // Tensors a shard holds but the index does not name are not part of the
            // checkpoint as its loader sees it; skip them like transformers does.
            if (it == expectedShard.end() || it->second != name)
                continue;
            cp.tensors.push_back(std::move(info));
        }
        for (auto& [k, v] : shard->metadata)
            cp.metadata.emplace(k, v);
    }
    if (!missingShards.empty()) {
        std::string list;
        for (std::size_t i = 0; i < missingShards.size() && i < 8; ++i)
            list += (list.empty() ? "" : ", ") + missingShards[i];
        if (missingShards.size() > 8)
            list += " and " + std::to_string(missingShards.size() - 8) + " more";
        return makeError(
            ErrorCode::NotFound, fileError(indexPath, "shard files missing: " + list + "; download the missing shards (or use Repair)"));
    }
    cp.buildIndex();
    std::vector<std::string> absent;
    for (const auto& [tensor, shard] : expectedShard)
        if (!cp.find(tensor))
            absent.push_back(tensor + " (" + shard + ")");
    if (!absent.empty())
        return makeError(ErrorCode::InvalidFormat,
            fileError(indexPath,
                std::to_string(absent.size()) + " tensors named by the index are not in their shard, first: " + absent.front()
                    + "; the shards do not belong to this index, download them again"));
    return cp;
}

bool hasGgufMagic(const fs::path& path)
{
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

Result<Checkpoint> openWeightFile(const fs::path& path, std::string component)
{
    const auto name = path.filename().string();
    if (isIndexFile(path))
        return openSharded(path, std::move(component));
    if (endsWith(name, ".gguf") || hasGgufMagic(path))
        return openGguf(path, std::move(component));
    return openSafetensors(path, std::move(component));
}

// Weight files in one folder, grouped: an index takes its shards; other files stand alone.
Result<std::vector<Checkpoint>> openWeightsIn(const fs::path& folder, const std::string& component)
{
    std::vector<fs::path> indexes, singles;
    std::error_code ec;
    forEachEntry(folder, ec, [&](const fs::directory_entry& entry) {
        std::error_code typeError;
        if (!entry.is_regular_file(typeError))
            return;
        const auto name = entry.path().filename().string();
        if (isIndexFile(entry.path()))
            indexes.push_back(entry.path());
        else if (endsWith(name, ".safetensors") || endsWith(name, ".gguf"))
            singles.push_back(entry.path());
    });
    if (ec)
        return makeError(ErrorCode::Io, fileError(folder, "cannot list: " + ec.message()));
    std::sort(indexes.begin(), indexes.end());
    std::sort(singles.begin(), singles.end());

    std::vector<Checkpoint> result;
    std::set<fs::path> covered;
    for (const auto& index : indexes) {
        auto cp = openSharded(index, component);
        if (!cp)
            return cp.error();
        for (const auto& f : cp->files)
            covered.insert(f->path());
        result.push_back(std::move(*cp));
    }
    for (const auto& single : singles) {
        if (covered.count(single))
            continue;
        auto cp = openWeightFile(single, component);
        if (!cp)
            return cp.error();
        result.push_back(std::move(*cp));
    }
    return result;
}

Result<void> scanFolder(const fs::path& root, const fs::path& folder, int depth, ModelSource& source)
{
    const auto rel = folder.lexically_relative(root).generic_string();
    const std::string component = rel == "." ? std::string() : rel;
    auto checkpoints = openWeightsIn(folder, component);
    if (!checkpoints)
        return checkpoints.error();
    for (auto& cp : *checkpoints)
        source.checkpoints.push_back(std::move(cp));
    for (auto [file, into] : {std::pair{"config.json", &source.configs}, {"generation_config.json", &source.generationConfigs}})
        if (existsNoThrow(folder / file))
            if (auto text = readSmallText(folder / file))
                (*into)[component] = std::move(*text);
    if (depth >= kMaxFolderDepth)
        return {};
    std::vector<fs::path> subfolders;
    std::error_code ec;
    forEachEntry(folder, ec, [&](const fs::directory_entry& entry) {
        std::error_code typeError;
        if (entry.is_directory(typeError) && entry.path().filename().string().rfind('.', 0) != 0)
            subfolders.push_back(entry.path());
    });
    std::sort(subfolders.begin(), subfolders.end());
    for (const auto& sub : subfolders) {
        auto r = scanFolder(root, sub, depth + 1, source);
        if (!r)
            return r;
    }
    return {};
}

bool folderHasFiles(const fs::path& folder)
{
    std::error_code ec;
    if (!fs::is_directory(folder, ec))
        return false;
    for (fs::recursive_directory_iterator it(folder, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
         it.increment(ec)) {
        std::error_code typeError;
        if (it->is_regular_file(typeError))
            return true;
    }
    return false;
}

Result<void> openDiffusers(const fs::path& folder, ModelSource& source)
{
    auto text = readSmallText(folder / "model_index.json");
    if (!text)
        return text.error();
    source.modelIndexJson = *text;
    auto parsed = jsonutil::parseUntrusted(*text, "model_index.json");
    if (!parsed)
        return makeError(parsed.error().code, fileError(folder, parsed.error().message));
    const nlohmann::json& index = *parsed;
    if (!index.is_object())
        return makeError(ErrorCode::InvalidFormat, fileError(folder / "model_index.json", "is not a JSON object"));
    for (const auto& [key, value] : index.items()) {
        if (key.empty() || key[0] == '_' || !value.is_array() || value.size() != 2 || !value[0].is_string() || !value[1].is_string())
            continue;
        if (!isSafeRelativeName(key) || key.find('/') != std::string::npos)
            return makeError(ErrorCode::InvalidFormat,
                fileError(folder / "model_index.json", "names component '" + key + "', which is not a plain folder name"));
        ModelSource::Component component{key, value[0].get<std::string>(), value[1].get<std::string>(), folderHasFiles(folder / key)};
        if (component.present) {
            auto checkpoints = openWeightsIn(folder / key, key);
            if (!checkpoints)
                return checkpoints.error();
            for (auto& cp : *checkpoints)
                source.checkpoints.push_back(std::move(cp));
            if (existsNoThrow(folder / key / "config.json")) {
                auto config = readSmallText(folder / key / "config.json");
                if (config)
                    source.configs[key] = std::move(*config);
            }
        }
        source.components.push_back(std::move(component));
    }
    return {};
}

bool isHexCommit(const std::string& s)
{
    return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

const TensorInfo* Checkpoint::find(std::string_view name) const
{
    const auto it = m_byName.find(std::string(name));
    return it == m_byName.end() ? nullptr : &tensors[it->second];
}

std::uint64_t Checkpoint::tensorBytes() const
{
    std::uint64_t total = 0;
    for (const auto& t : tensors)
        total += t.bytes;
    return total;
}

std::uint64_t Checkpoint::fileBytes() const
{
    std::uint64_t total = 0;
    for (const auto& f : files)
        total += f->size();
    return total;
}

void Checkpoint::buildIndex()
{
    m_byName.clear();
    m_byName.reserve(tensors.size());
    for (std::size_t i = 0; i < tensors.size(); ++i)
        m_byName.emplace(tensors[i].name, i);
}

std::string_view sourceKindName(SourceKind kind)
{
    switch (kind) {
    case SourceKind::SafetensorsFile: return "safetensors";
    case SourceKind::ShardedSafetensors: return "safetensors-sharded";
    case SourceKind::GgufFile: return "gguf";
    case SourceKind::DiffusersPipeline: return "diffusers";
    case SourceKind::Folder: return "folder";
    }
    return "folder";
}

std::uint64_t ModelSource::tensorCount() const
{
    std::uint64_t n = 0;
    for (const auto& cp : checkpoints)
        n += cp.tensors.size();
    return n;
}

std::uint64_t ModelSource::tensorBytes() const
{
    std::uint64_t n = 0;
    for (const auto& cp : checkpoints)
        n += cp.tensorBytes();
    return n;
}

Result<fs::path> resolveHubCacheFolder(const fs::path& folder)
{
    const auto name = folder.filename().string();
    std::error_code ec;
    if (name.rfind("models--", 0) != 0 || !fs::is_directory(folder / "snapshots", ec))
        return folder;
    std::string commit;
    if (existsNoThrow(folder / "refs" / "main")) {
        auto ref = readSmallText(folder / "refs" / "main");
        if (!ref)
            return ref.error();
        commit = *ref;
        while (!commit.empty() && (commit.back() == '\n' || commit.back() == '\r' || commit.back() == ' '))
            commit.pop_back();
        if (!isHexCommit(commit))
            return makeError(
                ErrorCode::InvalidFormat, fileError(folder / "refs" / "main", "does not hold a commit hash; the cache entry is damaged"));
    } else {
        std::vector<std::string> snapshots;
        forEachEntry(folder / "snapshots", ec, [&](const fs::directory_entry& entry) {
            std::error_code typeError;
            if (entry.is_directory(typeError))
                snapshots.push_back(entry.path().filename().string());
        });
        if (snapshots.size() != 1)
            return makeError(ErrorCode::InvalidArgument,
                fileError(folder,
                    "has " + std::to_string(snapshots.size()) + " snapshots and no refs/main; open one of its snapshots/<commit> folders"));
        commit = snapshots.front();
    }
    const auto snapshot = folder / "snapshots" / commit;
    if (!fs::is_directory(snapshot, ec))
        return makeError(ErrorCode::NotFound,
            fileError(folder, "refs/main points at snapshot " + commit + ", which is not in the cache; download the model again"));
    return snapshot;
}

Result<ModelSource> ModelSource::open(const fs::path& path)
{
    ModelSource source;
    source.path = path;
    std::error_code ec;
    const auto status = fs::status(path, ec);
    if (ec || !fs::exists(status))
        return makeError(ErrorCode::NotFound, fileError(path, "no such file or folder"));

    if (fs::is_regular_file(status)) {
        source.root = path;
        auto cp = openWeightFile(path, {});
        if (!cp)
            return cp.error();
        source.kind = isIndexFile(path)      ? SourceKind::ShardedSafetensors
            : cp->format == FileFormat::Gguf ? SourceKind::GgufFile
                                             : SourceKind::SafetensorsFile;
        for (auto [file, into] : {std::pair{"config.json", &source.configs}, {"generation_config.json", &source.generationConfigs}})
            if (existsNoThrow(path.parent_path() / file))
                if (auto text = readSmallText(path.parent_path() / file))
                    (*into)[""] = std::move(*text);
        source.checkpoints.push_back(std::move(*cp));
        return source;
    }
    if (!fs::is_directory(status))
        return makeError(ErrorCode::InvalidArgument, fileError(path, "is neither a file nor a folder"));

    auto root = resolveHubCacheFolder(path);
    if (!root)
        return root.error();
    source.root = *root;
    if (existsNoThrow(source.root / "model_index.json")) {
        source.kind = SourceKind::DiffusersPipeline;
        auto r = openDiffusers(source.root, source);
        if (!r)
            return r.error();
    } else {
        source.kind = SourceKind::Folder;
        auto r = scanFolder(source.root, source.root, 0, source);
        if (!r)
            return r.error();
        // A folder holding exactly one sharded set reads as that set.
        if (source.checkpoints.size() == 1 && isIndexFile(source.checkpoints.front().path))
            source.kind = SourceKind::ShardedSafetensors;
    }
    if (source.checkpoints.empty() && source.components.empty())
        return makeError(ErrorCode::NotFound,
            fileError(path, "holds no .safetensors or .gguf files and no model_index.json; pick the model's file or folder"));
    return source;
}

}  // namespace vireo::tensorfile
