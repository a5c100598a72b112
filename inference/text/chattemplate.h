#pragma once

// Hugging Face chat templates, rendered as transformers 5.24's apply_chat_template renders them
// (utils/chat_template_utils.py: Jinja2's ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, loop controls, the `generation` block, and its raise_exception, tojson and
// namespace). A template is code that comes with a model file, so this is an interpreter of
// the subset chat templates use, of our own, over the data given and nothing else: no file,
// no clock, no import; every size, depth and step bounded. What it does not implement is an
// error naming it, never a silent difference: the caller decides what to fall back to.
//
// The subset: text with {{ }}, {% %} and {# #} (whitespace control with - and +); if / elif /
// else, for (tuple targets, a filter condition, else, loop.index / index0 / revindex /
// revindex0 / first / last / length / previtem / nextitem, break, continue), set (names and
// namespace attributes), macro (positional, keyword and default arguments), generation; literals
// (strings, numbers, true / false / none, lists, dicts, tuples), x if c else y, or / and / not,
// comparisons, in / not in, is [not] tests (defined, undefined, none, boolean, true, false,
// integer, float, number, string, mapping, sequence, iterable, eq / equalto, ne, divisibleby,
// odd, even, lower, upper), + - * / // % ** ~, subscripts and slices, attributes; filters
// trim, upper, lower, title, capitalize, default / d, length / count, list, first, last,
// reverse, join, dictsort, items, map, select, reject, selectattr, rejectattr, tojson, string,
// int, float, replace, safe; string methods strip / lstrip / rstrip / split / startswith /
// endswith / upper / lower / replace / title / capitalize / find / join, dict methods items /
// keys / values / get; globals raise_exception, namespace, range, dict.

#include "inference/util/result.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::text {

// One message; content is a string, or with parts a list of {"type": ..., "text": ...}.
struct ChatMessage {
    std::string role;
    std::string content;
    struct Part {
        std::string type;  // "text", "image"
        std::string text;
    };
    std::vector<Part> parts;
};

// A tokenizer folder's chat template and the special tokens a template reads (bos_token, ...).
struct ChatTemplate {
    std::string source;
    std::string origin;  // the file it came from, for errors
    std::map<std::string, std::string> specialTokens;
};

// The template of a tokenizer folder: chat_template.jinja, else tokenizer_config.json's
// chat_template (a string, or the one named "default" of a list); empty when it has none.
Result<std::optional<ChatTemplate>> chatTemplateIn(const std::filesystem::path& folder);

// The template rendered for messages (tools and documents none), as apply_chat_template(...,
// tokenize=False, add_generation_prompt=...) gives it.
Result<std::string> renderChatTemplate(
    const ChatTemplate& chatTemplate, const std::vector<ChatMessage>& messages, bool addGenerationPrompt);

// The same over any context (its top-level keys are the template's variables); for tests and
// templates that read more than messages. Keys keep their order, as Python dicts do.
Result<std::string> renderJinja(std::string_view source, const nlohmann::ordered_json& context, const std::string& origin);

}  // namespace vireo::text
