#pragma once

#include "inference/tensorfile/gguf.h"
#include "inference/tensorfile/mappedfile.h"
#include "inference/tensorfile/tensorinfo.h"
#include "inference/util/result.h"

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace vireo::tensorfile {

// A set of tensors with unique names: one safetensors file, a sharded set behind an index,
// or one GGUF file.
struct Checkpoint {
    std::string component;  // diffusers component or sub-folder, "" at the top
    FileFormat format = FileFormat::Safetensors;
    std::filesystem::path path;  // the file, or the index of a sharded set
    std::vector<std::shared_ptr<const MappedFile>> files;
    std::vector<TensorInfo> tensors;  // TensorInfo::fileIndex points into files
    std::map<std::string, std::string> metadata;  // safetensors __metadata__ (index metadata merged)
    std::vector<GgufKeyValue> ggufMetadata;
    std::uint32_t ggufVersion = 0;
    std::uint32_t ggufAlignment = 0;

    const TensorInfo* find(std::string_view name) const;
    std::uint64_t tensorBytes() const;
    std::uint64_t fileBytes() const;
    const std::shared_ptr<const MappedFile>& fileOf(const TensorInfo& info) const { return files[info.fileIndex]; }

    void buildIndex();

private:
    std::unordered_map<std::string, std::size_t> m_byName;
};

enum class SourceKind { SafetensorsFile, ShardedSafetensors, GgufFile, DiffusersPipeline, Folder };

std::string_view sourceKindName(SourceKind kind);

// Whatever the user pointed at: a file, a sharded set, a diffusers pipeline folder, a Hub
// cache repo or snapshot folder, or any folder of weights. Only headers are read.
struct ModelSource {
    struct Component {
        std::string name;
        std::string library;
        std::string className;
        bool present = false;  // its folder exists and holds files
    };

    std::filesystem::path path;  // as given
    std::filesystem::path root;  // resolved folder or file actually read
    SourceKind kind = SourceKind::SafetensorsFile;
    std::vector<Checkpoint> checkpoints;
    std::vector<Component> components;  // from model_index.json
    std::map<std::string, std::string> configs;  // component ("" = top) -> config.json text
    std::map<std::string, std::string> generationConfigs;  // the same for generation_config.json
    std::string modelIndexJson;  // raw model_index.json, if any

    std::uint64_t tensorCount() const;
    std::uint64_t tensorBytes() const;

    static Result<ModelSource> open(const std::filesystem::path& path);
};

// Resolves "models--org--name" (refs/main) to its snapshot folder; other paths unchanged.
Result<std::filesystem::path> resolveHubCacheFolder(const std::filesystem::path& folder);

}  // namespace vireo::tensorfile
