#pragma once

// The Unicode pieces a byte-level BPE tokenizer (Qwen2 / Qwen3) needs, torch-free and without
// ICU: general-category letters and numbers, Oniguruma's \s, NFC, and the Qwen2 pre-tokenizer
// regex as a hand-written matcher with the regex engine's leftmost-first semantics. Tables are
// generated (scripts/gen_unicode_tables.py); see unicodedata.inc for their Unicode version.

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vireo::text::unicode {

bool isLetter(char32_t c);  // \p{L}
bool isNumber(char32_t c);  // \p{N}
bool isWhiteSpace(char32_t c);  // \s: U+0009..000D, 0085 and the Zs, Zl, Zp categories
int combiningClass(char32_t c);

// Valid UTF-8 in, code points out (the caller validated the text).
std::u32string decodeUtf8(std::string_view text);
void appendUtf8(std::string& out, char32_t c);
std::string encodeUtf8(std::u32string_view text);

// Canonical composition (Unicode normalization form C) of valid UTF-8.
std::string nfc(std::string_view text);

// The spans (code point indices, [begin, end)) where the Qwen2 pre-tokenizer pattern
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// matches, scanning left to right as the regex engine does.
std::vector<std::pair<std::size_t, std::size_t>> qwen2Matches(std::u32string_view text);

// The pattern itself, as tokenizer.json and transformers' Qwen2Tokenizer spell it.
extern const std::string_view kQwen2Pattern;

// GPT-2's reversible byte -> printable code point map (tokenizers' ByteLevel).
char32_t byteLevelChar(unsigned char byte);

}  // namespace vireo::text::unicode
