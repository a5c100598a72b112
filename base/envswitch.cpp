#include "base/envswitch.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace vireo::env {

namespace {

std::string_view trimmed(std::string_view text)
{
    const auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (!text.empty() && blank(text.front()))
        text.remove_prefix(1);
    while (!text.empty() && blank(text.back()))
        text.remove_suffix(1);
    return text;
}

const Switch& find(std::string_view name)
{
    const auto& all = switches();
    const auto it = std::find_if(all.begin(), all.end(), [&](const Switch& s) { return name == s.name; });
    if (it == all.end())
        throw std::logic_error("environment switch " + std::string(name) + " is not listed in base/envswitch.cpp");
    return *it;
}

// The value as set; nullopt when unset or blank (both mean the default).
std::optional<std::string_view> valueOf(const Switch& s)
{
    const char* raw = std::getenv(s.name);
    if (!raw)
        return std::nullopt;
    const auto text = trimmed(raw);
    return text.empty() ? std::nullopt : std::optional<std::string_view>(text);
}

}  // namespace

const std::vector<Switch>& switches()
{
    static const std::vector<Switch> all = {
        {"VIREO_FUSED_KERNELS", true, "0 replaces Vireo's fused CUDA kernels by the torch ops they fuse"},
        {"VIREO_CUDA_GRAPHS", true, "0 runs every denoise step eagerly instead of replaying CUDA graphs"},
        {"VIREO_FP8_ATTENTION", true, "0 keeps attention in bf16 for FP8 checkpoints"},
        {"VIREO_FP8_TENSOR_CORES", true,
            "0 dequantizes FP8 weights before each GEMM, as on GPUs without FP8 tensor cores (Ampere and older)"},
        {"VIREO_BATCH_GUIDANCE", true,
            "0 runs LTX's STG and modality guidance branches as forwards of their own instead of one batch with the conditional one"},
        {"HF_HUB_OFFLINE", false, "1 fetches nothing from the Hub (huggingface_hub's switch)"},
        {"TRANSFORMERS_OFFLINE", false, "1 fetches nothing from the Hub (the transformers library's switch)"},
    };
    return all;
}

std::optional<bool> parseFlag(std::string_view text)
{
    std::string l(trimmed(text));
    for (auto& c : l)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == "1" || l == "true" || l == "on" || l == "yes")
        return true;
    if (l == "0" || l == "false" || l == "off" || l == "no")
        return false;
    return std::nullopt;
}

std::string invalidMessage(std::string_view name, std::string_view value)
{
    // The value is shown bounded and printable: it comes from whoever set the environment.
    std::string shown;
    for (const char c : value.substr(0, 40))
        shown += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
    if (value.size() > 40)
        shown += "...";
    return "the environment variable " + std::string(name) + " is set to '" + shown
        + "', which is not a switch value: use 1/0, true/false, on/off or yes/no (any case), or unset it";
}

bool flag(std::string_view name)
{
    const auto& s = find(name);
    const auto value = valueOf(s);
    if (!value)
        return s.defaultValue;
    if (const auto parsed = parseFlag(*value))
        return *parsed;
    throw std::invalid_argument(invalidMessage(name, *value));
}

std::vector<std::string> problems()
{
    std::vector<std::string> out;
    for (const auto& s : switches())
        if (const auto value = valueOf(s); value && !parseFlag(*value))
            out.push_back(invalidMessage(s.name, *value));
    return out;
}

std::string helpText()
{
    std::string out;
    for (const auto& s : switches())
        out += "  " + std::string(s.name) + " (default " + (s.defaultValue ? "1" : "0") + "): " + s.effect + "\n";
    return out;
}

}  // namespace vireo::env
