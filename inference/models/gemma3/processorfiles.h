#pragma once

// What Gemma 3's and Gemma 4's image processing read from a model's Hub files: small JSON files
// (preprocessor_config.json, processor_config.json, tokenizer_config.json) and the special tokens
// tokenizer_config.json names. Internal to models/gemma3.

#include <nlohmann/json.hpp>

#include <filesystem>
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

}  // namespace vireo::gemma3::detail
