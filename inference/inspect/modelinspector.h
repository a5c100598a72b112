#pragma once

#include "inference/util/result.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vireo::tensorfile {
struct ModelSource;
}

namespace vireo::inspect {

struct QuantizationReport {
    std::string scheme = "none";  // none | fp8 | fp8-scaled | gguf | nf4 | int8
    std::string fp8Granularity;  // per-tensor | per-channel | block | mixed
    std::vector<std::int64_t> fp8BlockSize;
    std::optional<bool> inputScale;
    std::string fp8Convention;  // lightricks | comfyui-legacy | comfyui | weight_scale | ideogram
    std::int64_t quantizedTensors = 0;
    std::int64_t denseTensors = 0;
    std::string ggufArchitecture;
    std::map<std::string, std::int64_t> ggufTypes;
    bool nf4DoubleQuant = false;
};

struct FileReport {
    std::string path;
    std::string format;
    std::string component;
    std::int64_t tensors = 0;
    std::uint64_t bytes = 0;
};

// What a file or folder is, read from headers alone (no weight bytes).
struct ModelReport {
    std::string path;
    std::string format;
    std::int64_t tensors = 0;
    std::uint64_t bytes = 0;
    std::map<std::string, std::int64_t> dtypes;
    std::string family = "unknown";  // ltx-2 | ltx-video | ideogram-4 | unknown
    std::string version;  // 2.0 | 2.3 | 4 | ""
    std::string layout;  // lightricks | diffusers | gguf | ideogram-vendor | ""
    std::string attention;  // fused-qkv | split-qkv | ""
    QuantizationReport quantization;
    std::vector<std::string> components;
    std::vector<std::string> missingComponents;
    std::map<std::string, std::string> facts;  // blocks, modulation rows, ... for people
    std::vector<std::string> warnings;
    std::vector<FileReport> files;
    std::string metadataJson = "{}";  // per file: __metadata__ (embedded JSON parsed) or GGUF KVs
};

ModelReport describe(const tensorfile::ModelSource& source);
Result<ModelReport> inspectPath(const std::filesystem::path& path);

std::string toJson(const ModelReport& report, int indent = 2);
std::string toText(const ModelReport& report);

}  // namespace vireo::inspect
