#pragma once

// What Gemma 3's and Gemma 4's vision towers and image processing read from a model's files: small
// JSON files (preprocessor_config.json, processor_config.json, tokenizer_config.json), the special
// tokens tokenizer_config.json names, and where a component's config is. Internal to models/gemma3.

#include "inference/models/nn/strictweights.h"

#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vireo::gemma3::detail {

// The JSON object in `file`; nullopt when there is none, or (with `problem` set) when it is too
// large, not JSON or not an object.
std::optional<nlohmann::json> readJsonIn(const std::filesystem::path& file, std::string& problem);

// The first of `folders` holding `name`, parsed, with its path for errors; a file that is there
// but unusable throws jsonutil::ConfigError.
std::optional<std::pair<nlohmann::json, std::string>> firstJsonIn(const std::vector<std::filesystem::path>& folders, const char* name);

// A special token as tokenizer_config.json writes it: a string or {"content": ...}.
std::optional<std::string> tokenText(const nlohmann::json& j);

// tokenizer_config.json's `key` token, top level or in extra_special_tokens (which wins), into out.
void readSpecialToken(const nlohmann::json& tokenizerConfig, const char* key, std::string& out);

// image_mean / image_std: a number or three numbers, into out; ConfigError otherwise.
void readTriple(const nlohmann::json& j, const char* key, std::vector<double>& out, const std::string& where);

// The component a model's weights are in, as nn::findLanguageModel picks it: a pipeline's
// pipelineComponent (text_encoder, prompt_enhancer), else the source's own weights ("").
std::string weightsComponent(const tensorfile::ModelSource& source, const std::string& pipelineComponent);

// The folder a component's files are in: the source's own folder for "" (none for a single file),
// else that component's subfolder.
std::filesystem::path componentFolder(const tensorfile::ModelSource& source, const std::string& component);

// The component's config.json text, else Lightricks' gemma_config metadata in its weights, with
// where it came from for errors.
std::optional<std::pair<std::string, std::string>> componentConfig(
    const tensorfile::ModelSource& source, const std::string& component, const std::filesystem::path& folder);

// The bytes the indexed tensors take in dtype, from their headers.
std::int64_t indexBytes(const std::map<std::string, nn::StoredTensor>& index, c10::ScalarType dtype);

}  // namespace vireo::gemma3::detail
