#include "inference/text/tokenizer.h"

// Reference: tokenizers 0.23 (tokenizer/added_vocabulary.rs, models/bpe/{model,word}.rs,
// tokenizer/normalizer.rs split behaviours, processors/template.rs) and transformers 5.24
// (tokenization_utils_tokenizers.py TokenizersBackend, models/gemma/tokenization_gemma.py,
// models/qwen2/tokenization_qwen2.py).

#include "inference/text/unicode.h"
#include "inference/util/jsonlimits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>

namespace vireo::text {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// ------------------------------------------------------------------ UTF-8 and whitespace

// Decodes one scalar value at s[i], advancing i; false on malformed or overlong input.
bool nextCodePoint(std::string_view s, std::size_t& i, char32_t& cp)
{
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
        cp = b0;
        ++i;
        return true;
    }
    int extra = 0;
    char32_t min = 0;
    if ((b0 & 0xE0) == 0xC0) {
        extra = 1, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        extra = 2, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        extra = 3, cp = b0 & 0x07, min = 0x10000;
    } else {
        return false;
    }
    if (i + extra >= s.size())
        return false;
    for (int k = 1; k <= extra; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80)
            return false;
        cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return false;
    i += extra + 1;
    return true;
}

std::optional<std::size_t> firstInvalidUtf8(std::string_view s)
{
    std::size_t i = 0;
    char32_t cp = 0;
    while (i < s.size()) {
        const auto at = i;
        if (!nextCodePoint(s, i, cp))
            return at;
    }
    return std::nullopt;
}

// Unicode White_Space: Rust's char::is_whitespace and the regex class \s that tokenizers uses
// for lstrip / rstrip and the Strip normalizer.
bool isWhiteSpace(char32_t c)
{
    return c == 0x20 || (c >= 0x09 && c <= 0x0D) || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028
        || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.isspace(): White_Space plus the information separators U+001C..U+001F.
bool isPythonSpace(char32_t c)
{
    return isWhiteSpace(c) || (c >= 0x1C && c <= 0x1F);
}

// Byte length of the run of whitespace at the start of s (regex ^\s*).
std::size_t leadingSpaceBytes(std::string_view s, bool (*isSpace)(char32_t))
{
    std::size_t i = 0;
    while (i < s.size()) {
        std::size_t j = i;
        char32_t cp = 0;
        if (!nextCodePoint(s, j, cp) || !isSpace(cp))
            break;
        i = j;
    }
    return i;
}

// Start of the run of whitespace at the end of s (regex \s*$, leftmost match).
std::size_t trailingSpaceStart(std::string_view s, bool (*isSpace)(char32_t))
{
    std::size_t runStart = s.size();
    std::size_t i = 0;
    char32_t cp = 0;
    bool inRun = false;
    while (i < s.size()) {
        const auto at = i;
        if (!nextCodePoint(s, i, cp))
            return s.size();
        if (isSpace(cp)) {
            if (!inRun)
                runStart = at;
            inRun = true;
        } else {
            inRun = false;
        }
    }
    return inRun ? runStart : s.size();
}

// ------------------------------------------------------------------ errors while loading

struct LoadFailure {
    ErrorCode code;
    std::string message;
};

[[noreturn]] void fail(ErrorCode code, std::string message)
{
    throw LoadFailure{code, std::move(message)};
}

std::string shortJson(const json& j)
{
    return jsonutil::shortDump(j);  // never walks a whole vocabulary, never throws
}

// Gemma 3's tokenizer.json is 33 MB with about two million values; these bounds leave room
// for any real tokenizer and refuse what would exhaust memory.
jsonutil::JsonLimits tokenizerLimits()
{
    jsonutil::JsonLimits limits;
    limits.maxBytes = 256ull << 20;
    limits.maxValues = 32ull << 20;
    return limits;
}

// ------------------------------------------------------------------ pipeline pieces

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct NormalizerStep {
    enum class Kind { Replace, Prepend, Strip, Nfc } kind = Kind::Replace;
    std::string pattern;  // Replace: literal to find; Prepend: the prefix
    std::string content;  // Replace: replacement
    bool left = false, right = false;
};

struct SplitStep {
    std::string pattern;
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    // The Qwen2 regex instead of the literal pattern (the only regex this version runs).
    bool qwen2Regex = false;
    // Not a split: tokenizers' ByteLevel pre-tokenizer without its own regex (each byte becomes
    // its GPT-2 printable character).
    bool byteLevel = false;
};

struct AddedToken {
    std::string content;
    std::int64_t id = -1;
    bool singleWord = false, lstrip = false, rstrip = false, normalized = true, special = false;
    bool sameFlags(const AddedToken& o) const
    {
        return content == o.content && singleWord == o.singleWord && lstrip == o.lstrip && rstrip == o.rstrip && normalized == o.normalized
            && special == o.special;
    }
};

// Byte trie for left-most-longest matching of added tokens (daachorse LeftmostLongest).
class Trie {
public:
    void insert(std::string_view key, int value)
    {
        std::size_t node = 0;
        for (unsigned char c : key) {
            const int child = find(node, c);
            if (child >= 0) {
                node = static_cast<std::size_t>(child);
                continue;
            }
            m_nodes.push_back({});
            const auto created = m_nodes.size() - 1;
            m_nodes[node].next.emplace_back(c, static_cast<int>(created));
            node = created;
        }
        m_nodes[node].value = value;
        m_empty = false;
    }
    bool empty() const { return m_empty; }
    // Longest key starting at s[pos]: {length, value}, value -1 when none.
    std::pair<std::size_t, int> longest(std::string_view s, std::size_t pos) const
    {
        std::size_t node = 0;
        std::pair<std::size_t, int> best{0, -1};
        for (std::size_t i = pos; i < s.size(); ++i) {
            const int child = find(node, static_cast<unsigned char>(s[i]));
            if (child < 0)
                break;
            node = static_cast<std::size_t>(child);
            if (m_nodes[node].value >= 0)
                best = {i + 1 - pos, m_nodes[node].value};
        }
        return best;
    }

private:
    int find(std::size_t node, unsigned char c) const
    {
        for (const auto& [byte, child] : m_nodes[node].next)
            if (byte == c)
                return child;
        return -1;
    }

    struct Node {
        std::vector<std::pair<unsigned char, int>> next;
        int value = -1;
    };
    std::vector<Node> m_nodes{Node{}};
    bool m_empty = true;
};

struct Piece {
    std::string text;
    std::int64_t id = -1;  // an added token, or -1 for text still to tokenize
};

std::uint64_t pairKey(std::int64_t a, std::int64_t b)
{
    return (static_cast<std::uint64_t>(a) << 32) | static_cast<std::uint64_t>(b);
}

// A special-token setting in tokenizer_config.json / special_tokens_map.json: absent, null,
// a string, or an AddedToken dict.
struct SpecialSetting {
    bool present = false;
    std::optional<std::string> content;
    std::optional<AddedToken> token;  // when given as a dict
};

bool flag(const json& j, const char* key, bool fallback)
{
    if (!j.contains(key) || j[key].is_null())
        return fallback;
    if (!j[key].is_boolean())
        fail(ErrorCode::InvalidFormat, std::string("'") + key + "' must be true or false, got " + shortJson(j[key]));
    return j[key].get<bool>();
}

AddedToken addedTokenFrom(const json& j, const std::string& where)
{
    if (!j.is_object() || !j.contains("content") || !j["content"].is_string())
        fail(ErrorCode::InvalidFormat, where + ": an added token must be an object with a string 'content', got " + shortJson(j));
    AddedToken t;
    t.content = j["content"].get<std::string>();
    t.special = flag(j, "special", false);
    t.singleWord = flag(j, "single_word", false);
    t.lstrip = flag(j, "lstrip", false);
    t.rstrip = flag(j, "rstrip", false);
    t.normalized = flag(j, "normalized", !t.special);
    if (j.contains("id")) {
        if (!j["id"].is_number_integer())
            fail(ErrorCode::InvalidFormat, where + ": added token '" + t.content + "' has a non-integer id");
        t.id = j["id"].get<std::int64_t>();
    }
    return t;
}

SpecialSetting specialSetting(const json& config, const char* key, const std::string& where)
{
    SpecialSetting s;
    if (!config.is_object() || !config.contains(key))
        return s;
    s.present = true;
    const auto& v = config[key];
    if (v.is_null())
        return s;
    if (v.is_string()) {
        s.content = v.get<std::string>();
    } else if (v.is_object()) {
        auto t = addedTokenFrom(v, where + " " + key);
        if (!v.contains("special"))
            t.special = true;  // transformers builds AddedToken(**value, special=True)
        s.content = t.content;
        s.token = t;
    } else {
        fail(ErrorCode::InvalidFormat, where + ": '" + key + "' must be a string, an object or null, got " + shortJson(v));
    }
    return s;
}

SplitBehavior splitBehavior(const json& j, const std::string& where)
{
    const auto name = j.is_string() ? j.get<std::string>() : std::string();
    if (name == "Removed")
        return SplitBehavior::Removed;
    if (name == "Isolated")
        return SplitBehavior::Isolated;
    if (name == "MergedWithPrevious")
        return SplitBehavior::MergedWithPrevious;
    if (name == "MergedWithNext")
        return SplitBehavior::MergedWithNext;
    if (name == "Contiguous")
        return SplitBehavior::Contiguous;
    fail(ErrorCode::InvalidFormat, where + ": unknown split behavior " + shortJson(j));
}

// A string pattern {"String": "..."}; a regex pattern is refused (no Oniguruma here).
std::string stringPattern(const json& j, const std::string& where, const char* what)
{
    if (j.is_object() && j.contains("String") && j["String"].is_string()) {
        auto s = j["String"].get<std::string>();
        if (s.empty())
            fail(ErrorCode::Unsupported, where + ": " + what + " with an empty pattern is not supported");
        return s;
    }
    if (j.is_object() && j.contains("Regex"))
        fail(ErrorCode::Unsupported,
            where + ": " + what + " with a Regex pattern (" + shortJson(j["Regex"])
                + ") is not supported by this version; only literal String patterns are");
    fail(ErrorCode::InvalidFormat, where + ": " + what + " has no usable pattern: " + shortJson(j));
}

std::string typeOf(const json& j)
{
    return j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : std::string("?");
}

void parseNormalizer(const json& j, const std::string& where, std::vector<NormalizerStep>& out)
{
    if (j.is_null())
        return;
    const auto type = typeOf(j);
    if (type == "Sequence") {
        if (!j.contains("normalizers") || !j["normalizers"].is_array())
            fail(ErrorCode::InvalidFormat, where + ": Sequence normalizer without a 'normalizers' list");
        for (const auto& n : j["normalizers"])
            parseNormalizer(n, where, out);
    } else if (type == "Replace") {
        NormalizerStep s;
        s.kind = NormalizerStep::Kind::Replace;
        s.pattern = stringPattern(j.value("pattern", json()), where, "the Replace normalizer");
        if (!j.contains("content") || !j["content"].is_string())
            fail(ErrorCode::InvalidFormat, where + ": Replace normalizer without a string 'content'");
        s.content = j["content"].get<std::string>();
        out.push_back(std::move(s));
    } else if (type == "Prepend") {
        NormalizerStep s;
        s.kind = NormalizerStep::Kind::Prepend;
        if (!j.contains("prepend") || !j["prepend"].is_string())
            fail(ErrorCode::InvalidFormat, where + ": Prepend normalizer without a string 'prepend'");
        s.pattern = j["prepend"].get<std::string>();
        out.push_back(std::move(s));
    } else if (type == "NFC") {
        NormalizerStep s;
        s.kind = NormalizerStep::Kind::Nfc;
        out.push_back(std::move(s));
    } else if (type == "Strip") {
        NormalizerStep s;
        s.kind = NormalizerStep::Kind::Strip;
        s.left = flag(j, "strip_left", false);
        s.right = flag(j, "strip_right", false);
        out.push_back(std::move(s));
    } else {
        // NFD/NFKC/NFKD, Lowercase, StripAccents, BertNormalizer, Precompiled, ByteLevel...
        // need tables or charmaps this version does not carry.
        fail(ErrorCode::Unsupported,
            where + ": the '" + type
                + "' normalizer is not supported by this version "
                  "(supported: Replace with a String pattern, Prepend, Strip, NFC, Sequence)");
    }
}

void parsePreTokenizer(const json& j, const std::string& where, std::vector<SplitStep>& out)
{
    if (j.is_null())
        return;
    const auto type = typeOf(j);
    if (type == "Sequence") {
        if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
            fail(ErrorCode::InvalidFormat, where + ": Sequence pre-tokenizer without a 'pretokenizers' list");
        for (const auto& p : j["pretokenizers"])
            parsePreTokenizer(p, where, out);
    } else if (type == "Split") {
        SplitStep s;
        const auto pattern = j.value("pattern", json());
        if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()
            && pattern["Regex"].get<std::string>() == unicode::kQwen2Pattern)
            s.qwen2Regex = true;
        else
            s.pattern = stringPattern(pattern, where, "the Split pre-tokenizer");
        s.behavior = splitBehavior(j.value("behavior", json()), where);
        s.invert = flag(j, "invert", false);
        out.push_back(std::move(s));
    } else if (type == "ByteLevel") {
        // With use_regex the step would split by GPT-2's own pattern first; with add_prefix_space
        // it would prepend a space to each piece. Neither is what Qwen's files use.
        if (flag(j, "use_regex", true) || flag(j, "add_prefix_space", true))
            fail(ErrorCode::Unsupported,
                where + ": the ByteLevel pre-tokenizer with use_regex or add_prefix_space (" + shortJson(j)
                    + ") is not supported by this version");
        SplitStep s;
        s.byteLevel = true;
        out.push_back(std::move(s));
    } else {
        fail(ErrorCode::Unsupported,
            where + ": the '" + type
                + "' pre-tokenizer is not supported by this version "
                  "(supported: Split with a String pattern or the Qwen2 regex, ByteLevel without its regex, Sequence)");
    }
}

// tokenizers' NormalizedString::split on a literal pattern, then the split behaviour.
void splitInto(const std::string& s, const SplitStep& step, std::vector<std::string>& out)
{
    struct Span {
        std::size_t begin, end;
        bool flag;
    };
    if (step.byteLevel) {
        std::string mapped;
        mapped.reserve(s.size() * 2);
        for (unsigned char b : s)
            unicode::appendUtf8(mapped, unicode::byteLevelChar(b));
        out.push_back(std::move(mapped));
        return;
    }
    std::vector<Span> matches;
    if (s.empty()) {
        matches.push_back({0, 0, false});
    } else if (step.qwen2Regex) {
        // Code point spans to byte offsets; the gaps between matches are pieces of their own.
        const auto cps = unicode::decodeUtf8(s);
        std::vector<std::size_t> offset(cps.size() + 1, 0);
        for (std::size_t k = 0; k < cps.size(); ++k) {
            const auto c = cps[k];
            offset[k + 1] = offset[k] + (c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4);
        }
        std::size_t prev = 0;
        for (const auto& [b, e] : unicode::qwen2Matches(cps)) {
            if (prev != offset[b])
                matches.push_back({prev, offset[b], false});
            matches.push_back({offset[b], offset[e], true});
            prev = offset[e];
        }
        if (prev != s.size())
            matches.push_back({prev, s.size(), false});
    } else {
        std::size_t prev = 0;
        for (auto pos = s.find(step.pattern); pos != std::string::npos; pos = s.find(step.pattern, prev)) {
            if (prev != pos)
                matches.push_back({prev, pos, false});
            matches.push_back({pos, pos + step.pattern.size(), true});
            prev = pos + step.pattern.size();
        }
        if (prev != s.size())
            matches.push_back({prev, s.size(), false});
    }
    if (step.invert)
        for (auto& m : matches)
            m.flag = !m.flag;
    // Span::flag from here on means "remove".
    std::vector<Span> splits;
    bool previousMatch = false;
    switch (step.behavior) {
    case SplitBehavior::Isolated:
        for (const auto& m : matches)
            splits.push_back({m.begin, m.end, false});
        break;
    case SplitBehavior::Removed: splits = matches; break;
    case SplitBehavior::Contiguous:
        for (const auto& m : matches) {
            if (m.flag == previousMatch && !splits.empty())
                splits.back().end = m.end;
            else
                splits.push_back({m.begin, m.end, false});
            previousMatch = m.flag;
        }
        break;
    case SplitBehavior::MergedWithPrevious:
        for (const auto& m : matches) {
            if (m.flag && !previousMatch && !splits.empty())
                splits.back().end = m.end;
            else
                splits.push_back({m.begin, m.end, false});
            previousMatch = m.flag;
        }
        break;
    case SplitBehavior::MergedWithNext:
        for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
            if (it->flag && !previousMatch && !splits.empty())
                splits.back().begin = it->begin;
            else
                splits.push_back({it->begin, it->end, false});
            previousMatch = it->flag;
        }
        std::reverse(splits.begin(), splits.end());
        break;
    }
    for (const auto& sp : splits)
        if (!sp.flag && sp.end > sp.begin)
            out.push_back(s.substr(sp.begin, sp.end - sp.begin));
}

std::string readFile(const fs::path& path)
{
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (!ec && size > tokenizerLimits().maxBytes)
        fail(ErrorCode::InvalidFormat,
            path.string() + ": is " + std::to_string(size)
                + " bytes, more than any tokenizer file; "
                  "it is damaged or not a tokenizer");
    std::ifstream in(path, std::ios::binary);
    if (!in)
        fail(ErrorCode::Io, path.string() + ": cannot be read");
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

json parseJson(const std::string& text, const std::string& where)
{
    auto parsed = jsonutil::parseUntrusted(text, where + ":", tokenizerLimits());
    if (!parsed)
        fail(parsed.error().code, parsed.error().message);
    return std::move(*parsed);
}

}  // namespace

// ====================================================================== the tokenizer

// transformers classes whose __init__ rebuilds the pipeline, taking only the vocabulary, the
// merges and the post-processor from tokenizer.json.
enum class Rebuild { None, Gemma, Qwen2 };

struct Tokenizer::Impl {
    std::string origin;  // file names for errors
    std::string description;

    std::vector<NormalizerStep> normalizers;
    std::vector<SplitStep> preTokenizers;

    // BPE model
    std::unordered_map<std::string, std::int64_t> vocab;
    std::unordered_map<std::uint64_t, std::pair<std::uint32_t, std::int64_t>> merges;  // (a, b) -> (rank, merged id)
    std::optional<std::string> unkToken;
    bool byteFallback = false, fuseUnk = false, ignoreMerges = false;
    std::array<std::int64_t, 256> byteIds{};

    std::vector<AddedToken> added;
    std::unordered_map<std::string, std::size_t> addedIndex;  // content -> index in added
    std::int64_t maxAddedId = -1;
    Trie rawTrie, normalizedTrie;

    std::vector<std::int64_t> prefixIds, suffixIds;  // post-processor specials around the sequence
    bool truncateLeft = false;
    std::optional<std::int64_t> bos, eos;
    std::int64_t pad = 0;
    std::int64_t vocabSize = 0;
    // Decoding: each id's token (added tokens included) and whether it is special; the
    // decoder is SentencePiece's (Replace("▁", " "), ByteFallback, Fuse) or none is known.
    std::vector<std::string> pieces;
    std::vector<char> specialIds;
    std::optional<std::string> decoderProblem;  // why decode() refuses, if it does

    std::optional<std::int64_t> idOf(const std::string& token) const
    {
        if (auto it = addedIndex.find(token); it != addedIndex.end())
            return added[it->second].id;
        if (auto it = vocab.find(token); it != vocab.end())
            return it->second;
        return std::nullopt;
    }
    // The id belongs to the model vocabulary or an added token (a linear scan: it runs for
    // the few ids of a post-processor template).
    bool knowsId(std::int64_t id) const
    {
        if (id < 0)
            return false;
        for (const auto& a : added)
            if (a.id == id)
                return true;
        for (const auto& [token, i] : vocab)
            if (i == id)
                return true;
        return false;
    }

    void normalize(std::string& s) const;
    std::vector<Piece> splitAdded(const std::string& s, const Trie& trie) const;
    void bpe(const std::string& word, std::vector<std::int64_t>& out) const;
    std::vector<std::int64_t> run(std::string_view text) const;

    // Loading
    void loadBpe(const json& model, const std::string& where, Rebuild rebuild, const std::optional<std::string>& gemmaUnk);
    // The id the token resolves to; none for an empty token, which tokenizers' AddedVocabulary
    // skips as well.
    std::optional<std::int64_t> addToken(AddedToken token);
    void buildTries();
    // fromJson's stages, in order.
    void loadPipeline(
        const json& tj, const std::string& cls, bool gemma, bool qwen2, const std::string& where, const std::optional<std::string>& unk);
    void loadAddedTokens(const json& tj, const json& config, const std::string& cls, bool rebuilt, const std::string& where);
    void addSpecialTokens(const std::map<std::string, SpecialSetting>& specials, const json& config, const std::string& where);
    void resolveSpecials(const std::map<std::string, SpecialSetting>& specials, const std::string& where);
    void loadPostProcessor(const json& tj, const std::string& where);
};

void Tokenizer::Impl::normalize(std::string& s) const
{
    for (const auto& n : normalizers) {
        switch (n.kind) {
        case NormalizerStep::Kind::Replace: {
            std::string out;
            out.reserve(s.size());
            std::size_t prev = 0;
            for (auto pos = s.find(n.pattern); pos != std::string::npos; pos = s.find(n.pattern, prev)) {
                out.append(s, prev, pos - prev);
                out += n.content;
                prev = pos + n.pattern.size();
            }
            out.append(s, prev, std::string::npos);
            s = std::move(out);
            break;
        }
        case NormalizerStep::Kind::Nfc: s = unicode::nfc(s); break;
        case NormalizerStep::Kind::Prepend:
            if (!s.empty())
                s = n.pattern + s;
            break;
        case NormalizerStep::Kind::Strip: {
            std::size_t begin = n.left ? leadingSpaceBytes(s, isWhiteSpace) : 0;
            std::size_t end = n.right ? trailingSpaceStart(s, isWhiteSpace) : s.size();
            s = end > begin ? s.substr(begin, end - begin) : std::string();
            break;
        }
        }
    }
}

// AddedVocabulary::find_matches + split_with_indices.
std::vector<Piece> Tokenizer::Impl::splitAdded(const std::string& s, const Trie& trie) const
{
    std::vector<Piece> pieces;
    if (s.empty())
        return pieces;
    if (trie.empty()) {
        pieces.push_back({s, -1});
        return pieces;
    }
    std::size_t startOffset = 0;
    std::size_t pos = 0;
    while (pos < s.size()) {
        const auto [length, index] = trie.longest(s, pos);
        if (index < 0) {
            ++pos;
            continue;
        }
        const auto& token = added[static_cast<std::size_t>(index)];
        std::size_t start = pos, stop = pos + length;
        pos = stop;  // the match iterator resumes after the match itself, whatever rstrip takes
        if (token.lstrip)
            start = std::max(trailingSpaceStart(std::string_view(s).substr(0, start), isWhiteSpace), startOffset);
        if (token.rstrip)
            stop += leadingSpaceBytes(std::string_view(s).substr(stop), isWhiteSpace);
        if (startOffset < start)
            pieces.push_back({s.substr(startOffset, start - startOffset), -1});
        pieces.push_back({s.substr(start, stop - start), token.id});
        startOffset = stop;
    }
    if (startOffset < s.size())
        pieces.push_back({s.substr(startOffset), -1});
    return pieces;
}

// BPE::merge_word + Word::merge_all (no dropout).
void Tokenizer::Impl::bpe(const std::string& word, std::vector<std::int64_t>& out) const
{
    if (word.empty())
        return;
    if (ignoreMerges) {
        if (auto it = vocab.find(word); it != vocab.end()) {
            out.push_back(it->second);
            return;
        }
    }
    struct Symbol {
        std::int64_t c;
        std::int64_t prev, next;
        std::size_t len;
    };
    std::vector<Symbol> symbols;
    auto addSymbol = [&](std::int64_t id, std::size_t len) {
        const auto n = static_cast<std::int64_t>(symbols.size());
        if (n > 0)
            symbols.back().next = n;
        symbols.push_back({id, n - 1, -1, len});
    };
    // A pending unknown run: the reference fuses consecutive unknown characters into one.
    bool unk = false;
    std::int64_t unkId = 0;
    std::size_t unkLen = 0;
    std::size_t i = 0;
    while (i < word.size()) {
        const auto begin = i;
        char32_t cp = 0;
        if (!nextCodePoint(word, i, cp))
            throw std::runtime_error("invalid UTF-8 inside the tokenizer");  // validated on entry
        const std::string ch = word.substr(begin, i - begin);
        if (auto it = vocab.find(ch); it != vocab.end()) {
            if (unk) {
                addSymbol(unkId, unkLen);
                unk = false;
            }
            addSymbol(it->second, ch.size());
            continue;
        }
        if (byteFallback) {
            bool all = true;
            for (unsigned char b : ch)
                all = all && byteIds[b] >= 0;
            if (all) {
                // Like the reference, a pending unknown is not flushed before byte pieces.
                for (unsigned char b : ch)
                    addSymbol(byteIds[b], 1);
                continue;
            }
        }
        if (unkToken) {
            const auto it = vocab.find(*unkToken);
            if (it == vocab.end())
                throw std::runtime_error("the unknown token '" + *unkToken + "' is not in the vocabulary");
            if (unk && fuseUnk) {
                unkLen += ch.size();
            } else {
                if (unk)
                    addSymbol(unkId, unkLen);
                unk = true;
                unkId = it->second;
                unkLen = ch.size();
            }
        }
        // No unk token: the character is dropped, as tokenizers does.
    }
    if (unk)
        addSymbol(unkId, unkLen);

    struct Merge {
        std::size_t pos;
        std::uint32_t rank;
        std::int64_t newId;
    };
    // Min-heap on (rank, pos), the reference's Ord for Merge.
    auto later = [](const Merge& a, const Merge& b) { return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos; };
    std::priority_queue<Merge, std::vector<Merge>, decltype(later)> queue(later);
    for (std::size_t k = 0; k + 1 < symbols.size(); ++k)
        if (auto it = merges.find(pairKey(symbols[k].c, symbols[k + 1].c)); it != merges.end())
            queue.push({k, it->second.first, it->second.second});
    while (!queue.empty()) {
        const auto top = queue.top();
        queue.pop();
        auto& cur = symbols[top.pos];
        if (cur.len == 0 || cur.next == -1)
            continue;
        const auto nextPos = static_cast<std::size_t>(cur.next);
        const auto right = symbols[nextPos];
        const auto target = merges.find(pairKey(cur.c, right.c));
        if (target == merges.end() || target->second.second != top.newId)
            continue;
        cur.c = top.newId;
        cur.len += right.len;
        cur.next = right.next;
        symbols[nextPos].len = 0;
        if (right.next > -1 && static_cast<std::size_t>(right.next) < symbols.size())
            symbols[static_cast<std::size_t>(right.next)].prev = static_cast<std::int64_t>(top.pos);
        const auto& current = symbols[top.pos];
        if (current.prev >= 0) {
            const auto prev = static_cast<std::size_t>(current.prev);
            if (auto it = merges.find(pairKey(symbols[prev].c, current.c)); it != merges.end())
                queue.push({prev, it->second.first, it->second.second});
        }
        if (current.next >= 0 && static_cast<std::size_t>(current.next) < symbols.size()) {
            const auto next = static_cast<std::size_t>(current.next);
            if (auto it = merges.find(pairKey(current.c, symbols[next].c)); it != merges.end())
                queue.push({top.pos, it->second.first, it->second.second});
        }
    }
    for (const auto& s : symbols)
        if (s.len != 0)
            out.push_back(s.c);
}

// AddedVocabulary::extract_and_normalize, the pre-tokenizer, then the model on each piece.
std::vector<std::int64_t> Tokenizer::Impl::run(std::string_view text) const
{
    std::vector<std::int64_t> ids;
    for (auto& raw : splitAdded(std::string(text), rawTrie)) {
        if (raw.id >= 0) {
            ids.push_back(raw.id);
            continue;
        }
        normalize(raw.text);
        for (auto& piece : splitAdded(raw.text, normalizedTrie)) {
            if (piece.id >= 0) {
                ids.push_back(piece.id);
                continue;
            }
            std::vector<std::string> words{std::move(piece.text)};
            for (const auto& step : preTokenizers) {
                std::vector<std::string> next;
                for (const auto& w : words)
                    splitInto(w, step, next);
                words = std::move(next);
            }
            for (const auto& w : words)
                bpe(w, ids);
        }
    }
    return ids;
}

void Tokenizer::Impl::loadBpe(const json& model, const std::string& where, Rebuild rebuild, const std::optional<std::string>& gemmaUnk)
{
    const auto type = typeOf(model);
    if (type != "BPE")
        fail(ErrorCode::Unsupported, where + ": the '" + type + "' model is not supported by this version (only BPE is)");
    if (!model.contains("vocab") || !model["vocab"].is_object())
        fail(ErrorCode::InvalidFormat, where + ": the BPE model has no 'vocab' object");
    for (const auto& [token, id] : model["vocab"].items()) {
        if (!id.is_number_integer() || id.get<std::int64_t>() < 0 || id.get<std::int64_t>() > 0xFFFFFFFFll)
            fail(ErrorCode::InvalidFormat, where + ": vocab entry '" + token + "' has an invalid id " + shortJson(id));
        vocab.emplace(token, id.get<std::int64_t>());
    }
    if (rebuild == Rebuild::Qwen2) {
        // transformers' Qwen2Tokenizer: BPE(vocab, merges, unk_token=None, fuse_unk=False,
        // byte_fallback=False, dropout=None).
        unkToken.reset();
        byteFallback = false;
        fuseUnk = false;
        ignoreMerges = false;
    } else if (rebuild == Rebuild::Gemma) {
        // transformers' GemmaTokenizer: BPE(vocab, merges, fuse_unk=True, unk_token, dropout=None,
        // byte_fallback=True); the file's flags are not used.
        unkToken = gemmaUnk;
        byteFallback = true;
        fuseUnk = true;
        ignoreMerges = false;
    } else {
        if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
            fail(ErrorCode::Unsupported,
                where + ": BPE dropout " + shortJson(model["dropout"]) + " makes tokenization random; it is not supported");
        for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
            if (model.contains(key) && !model[key].is_null() && !(model[key].is_string() && model[key].get<std::string>().empty()))
                fail(
                    ErrorCode::Unsupported, where + ": BPE '" + key + "' (" + shortJson(model[key]) + ") is not supported by this version");
        if (model.contains("unk_token") && model["unk_token"].is_string())
            unkToken = model["unk_token"].get<std::string>();
        byteFallback = flag(model, "byte_fallback", false);
        fuseUnk = flag(model, "fuse_unk", false);
        ignoreMerges = flag(model, "ignore_merges", false);
    }
    if (model.contains("merges") && !model["merges"].is_null()) {
        if (!model["merges"].is_array())
            fail(ErrorCode::InvalidFormat, where + ": BPE 'merges' is not a list");
        std::uint32_t rank = 0;
        for (const auto& m : model["merges"]) {
            std::string a, b;
            if (m.is_string()) {
                const auto s = m.get<std::string>();
                const auto space = s.find(' ');
                if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
                    fail(ErrorCode::InvalidFormat,
                        where + ": merge " + std::to_string(rank + 1) + " ('" + s + "') is not two tokens separated by one space");
                a = s.substr(0, space);
                b = s.substr(space + 1);
            } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
                a = m[0].get<std::string>();
                b = m[1].get<std::string>();
            } else {
                fail(ErrorCode::InvalidFormat,
                    where + ": merge " + std::to_string(rank + 1) + " is neither \"a b\" nor [a, b]: " + shortJson(m));
            }
            const auto ia = vocab.find(a), ib = vocab.find(b), ic = vocab.find(a + b);
            if (ia == vocab.end() || ib == vocab.end() || ic == vocab.end())
                fail(ErrorCode::InvalidFormat,
                    where + ": merge " + std::to_string(rank + 1) + " ('" + a + "' + '" + b
                        + "') uses a token that is not in the vocabulary");
            // A repeated pair keeps its last rank, as the reference's HashMap collect does.
            merges[pairKey(ia->second, ib->second)] = {rank, ic->second};
            ++rank;
        }
    }
    byteIds.fill(-1);
    if (byteFallback) {
        for (int b = 0; b < 256; ++b) {
            char name[8];
            std::snprintf(name, sizeof name, "<0x%02X>", b);
            if (auto it = vocab.find(name); it != vocab.end())
                byteIds[static_cast<std::size_t>(b)] = it->second;
        }
    }
}

// AddedVocabulary::add_tokens for one token: the model's id when the content is in the
// vocabulary, else the next free id; an existing entry with other flags is replaced.
std::optional<std::int64_t> Tokenizer::Impl::addToken(AddedToken token)
{
    if (token.content.empty())
        return std::nullopt;
    if (token.singleWord)
        fail(ErrorCode::Unsupported,
            origin + ": added token '" + token.content
                + "' is single_word, which needs Unicode word "
                  "classes this version does not carry");
    if (auto it = addedIndex.find(token.content); it != addedIndex.end()) {
        token.id = added[it->second].id;
        added[it->second] = std::move(token);
        return added[it->second].id;
    }
    if (auto it = vocab.find(token.content); it != vocab.end()) {
        token.id = it->second;
    } else {
        const auto modelSize = static_cast<std::int64_t>(vocab.size());
        token.id = maxAddedId < 0 ? modelSize : (maxAddedId >= modelSize || modelSize == 0 ? maxAddedId + 1 : modelSize);
    }
    maxAddedId = std::max(maxAddedId, token.id);
    const auto id = token.id;
    addedIndex.emplace(token.content, added.size());
    added.push_back(std::move(token));
    return id;
}

void Tokenizer::Impl::buildTries()
{
    rawTrie = Trie();
    normalizedTrie = Trie();
    for (std::size_t i = 0; i < added.size(); ++i) {
        const auto& t = added[i];
        if (t.normalized) {
            std::string pattern = t.content;
            normalize(pattern);
            normalizedTrie.insert(pattern, static_cast<int>(i));
        } else {
            rawTrie.insert(t.content, static_cast<int>(i));
        }
    }
}

// ====================================================================== public API

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Result<Tokenizer> Tokenizer::load(const fs::path& path)
{
    std::error_code ec;
    fs::path file = path;
    if (fs::is_directory(path, ec)) {
        if (fs::is_regular_file(path / "tokenizer.json", ec))
            file = path / "tokenizer.json";
        else if (fs::is_regular_file(path / "tokenizer" / "tokenizer.json", ec))
            file = path / "tokenizer" / "tokenizer.json";
        else if (fs::exists(path / "tokenizer.model", ec) || fs::exists(path / "tokenizer" / "tokenizer.model", ec))
            return makeError(ErrorCode::Unsupported,
                path.string()
                    + ": has a SentencePiece tokenizer.model but no tokenizer.json; "
                      "this version reads tokenizer.json only (diffusers and the Gemma 3 repositories ship it)");
        else
            return makeError(ErrorCode::NotFound, path.string() + ": no tokenizer.json here or in tokenizer/");
    } else if (!fs::is_regular_file(path, ec)) {
        return makeError(ErrorCode::NotFound, path.string() + ": no such file or folder");
    }
    const auto folder = file.parent_path();
    try {
        const auto text = readFile(file);
        std::string config;
        std::string origin = file.string();
        if (fs::is_regular_file(folder / "tokenizer_config.json", ec)) {
            config = readFile(folder / "tokenizer_config.json");
            origin += " (with tokenizer_config.json)";
            // transformers' legacy path: without added_tokens_decoder, special_tokens_map.json
            // supplies (and overrides) the named special tokens.
            const auto cfg = parseJson(config, (folder / "tokenizer_config.json").string());
            if (cfg.is_object() && !cfg.contains("added_tokens_decoder") && fs::is_regular_file(folder / "special_tokens_map.json", ec)) {
                auto merged = cfg;
                const auto map = parseJson(readFile(folder / "special_tokens_map.json"), (folder / "special_tokens_map.json").string());
                if (map.is_object())
                    for (const auto& [k, v] : map.items())
                        merged[k] = v;
                config = merged.dump();
                origin += " (with special_tokens_map.json)";
            }
        }
        return fromJson(text, config, origin);
    } catch (const LoadFailure& e) {
        return makeError(e.code, e.message);
    }
}

namespace {

const char* const kNamedSpecials[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};

// Named special tokens: tokenizer_config.json's, else the class defaults.
std::map<std::string, SpecialSetting> namedSpecials(const json& config, const std::string& where, bool gemma, bool rebuilt)
{
    std::map<std::string, SpecialSetting> specials;
    for (const char* n : kNamedSpecials) {
        auto s = specialSetting(config, n, where);
        if (!s.present && rebuilt) {
            // GemmaTokenizer's signature: <unk>, <bos>, <eos>, <pad>, <mask>; Qwen2Tokenizer's:
            // unk, eos and pad <|endoftext|>, no bos.
            const std::map<std::string, std::string> defaults = gemma
                ? std::map<std::string, std::string>{{"bos_token", "<bos>"}, {"eos_token", "<eos>"}, {"unk_token", "<unk>"},
                    {"pad_token", "<pad>"}, {"mask_token", "<mask>"}}
                : std::map<std::string, std::string>{
                    {"eos_token", "<|endoftext|>"}, {"unk_token", "<|endoftext|>"}, {"pad_token", "<|endoftext|>"}};
            if (auto it = defaults.find(n); it != defaults.end()) {
                s.present = true;
                s.content = it->second;
            }
        }
        specials[n] = s;
    }
    return specials;
}

}  // namespace

// The normalizers, pre-tokenizers and BPE model: as transformers rebuilds a Gemma or Qwen2
// tokenizer whatever the file declares, else as tokenizer.json says.
void Tokenizer::Impl::loadPipeline(
    const json& tj, const std::string& cls, bool gemma, bool qwen2, const std::string& where, const std::optional<std::string>& unk)
{
    const auto& model = tj.contains("model") ? tj["model"] : json();
    if (gemma) {
        description = cls + " (rebuilt as transformers does: Replace(\" \", \"\u2581\"), Split(\" \"), byte-fallback BPE)";
        // transformers' GemmaTokenizer.__init__ pipeline, whatever the file declares.
        normalizers.push_back({NormalizerStep::Kind::Replace, " ", "\u2581", false, false});
        preTokenizers.push_back({" ", SplitBehavior::MergedWithPrevious, false});
        loadBpe(model, where, Rebuild::Gemma, unk);
    } else if (qwen2) {
        description = cls + " (rebuilt as transformers does: NFC, the Qwen2 split regex, byte-level BPE)";
        // transformers' Qwen2Tokenizer.__init__ pipeline, whatever the file declares.
        normalizers.push_back({NormalizerStep::Kind::Nfc, {}, {}, false, false});
        SplitStep split;
        split.qwen2Regex = true;
        split.behavior = SplitBehavior::Isolated;
        preTokenizers.push_back(split);
        SplitStep byteLevel;
        byteLevel.byteLevel = true;
        preTokenizers.push_back(byteLevel);
        loadBpe(model, where, Rebuild::Qwen2, std::nullopt);
    } else {
        description = cls.empty() ? std::string("tokenizer.json") : cls + " (tokenizer.json as written)";
        parseNormalizer(tj.value("normalizer", json()), where, normalizers);
        parsePreTokenizer(tj.value("pre_tokenizer", json()), where, preTokenizers);
        loadBpe(model, where, Rebuild::None, std::nullopt);
    }
}

void Tokenizer::Impl::loadAddedTokens(const json& tj, const json& config, const std::string& cls, bool rebuilt, const std::string& where)
{
    // Added tokens. GemmaTokenizer builds its backend from scratch and adds the tokens of
    // tokenizer_config.json's added_tokens_decoder (in id order); other classes load
    // tokenizer.json's added_tokens, and the config's list must agree with them.
    const bool hasDecoder = config.contains("added_tokens_decoder");
    if (hasDecoder && !config["added_tokens_decoder"].is_object())
        fail(ErrorCode::InvalidFormat, where + ": tokenizer_config.json 'added_tokens_decoder' is not an object");
    std::vector<std::pair<std::int64_t, AddedToken>> fromConfig;
    if (hasDecoder) {
        for (const auto& [key, value] : config["added_tokens_decoder"].items()) {
            std::int64_t id = 0;
            try {
                id = std::stoll(key);
            } catch (const std::exception&) {
                fail(ErrorCode::InvalidFormat, where + ": added_tokens_decoder key '" + key + "' is not an id");
            }
            auto t = addedTokenFrom(value, where + " added_tokens_decoder");
            t.id = id;
            fromConfig.emplace_back(id, t);
        }
        std::sort(fromConfig.begin(), fromConfig.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    if (rebuilt) {
        if (!hasDecoder)
            fail(ErrorCode::Unsupported,
                where
                    + ": tokenizer_config.json has no added_tokens_decoder; transformers 5.24 then "
                      "rebuilds "
                    + cls + "'s added tokens from legacy files, which this version does not replicate");
        for (const auto& [id, t] : fromConfig) {
            // Tokens outside the vocabulary take the next free ids; transformers fills gaps
            // with placeholders, which this version does not.
            if (const auto got = addToken(t); got && *got != id)
                fail(ErrorCode::Unsupported,
                    where + ": added token '" + t.content + "' has id " + std::to_string(id) + " in tokenizer_config.json but resolves to "
                        + std::to_string(*got) + " (the added ids are not contiguous after the vocabulary)");
        }
    } else {
        if (tj.contains("added_tokens") && !tj["added_tokens"].is_null()) {
            if (!tj["added_tokens"].is_array())
                fail(ErrorCode::InvalidFormat, where + ": 'added_tokens' is not a list");
            for (const auto& a : tj["added_tokens"]) {
                auto t = addedTokenFrom(a, where + " added_tokens");
                const auto declared = t.id;
                const auto got = addToken(t);
                if (got && declared >= 0 && declared != *got)
                    fail(ErrorCode::InvalidFormat,
                        where + ": added token '" + t.content + "' declares id " + std::to_string(declared) + " but resolves to "
                            + std::to_string(*got));
            }
        }
        for (const auto& [id, t] : fromConfig) {
            const auto it = addedIndex.find(t.content);
            if (it == addedIndex.end() || !added[it->second].sameFlags(t) || added[it->second].id != id)
                fail(ErrorCode::Unsupported,
                    where + ": tokenizer_config.json's added token '" + t.content + "' (id " + std::to_string(id)
                        + ") differs from tokenizer.json's added_tokens; transformers would merge them, "
                          "this version does not");
        }
    }
}

void Tokenizer::Impl::addSpecialTokens(const std::map<std::string, SpecialSetting>& specials, const json& config, const std::string& where)
{
    // Named and extra special tokens join the added vocabulary (transformers' _post_init):
    // a plain string as AddedToken(special=True, normalized=False), a dict with its own flags.
    std::vector<SpecialSetting> toAdd;
    for (const char* n : kNamedSpecials)
        toAdd.push_back(specials.at(n));
    for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
        if (!config.contains(key) || config[key].is_null())
            continue;
        const auto& v = config[key];
        if (!v.is_array() && !v.is_object())
            fail(ErrorCode::InvalidFormat, where + ": '" + key + "' must be a list or an object");
        for (const auto& item : v) {
            json holder = {{"t", item}};
            toAdd.push_back(specialSetting(holder, "t", where + " " + key));
        }
    }
    for (const auto& s : toAdd) {
        if (!s.content)
            continue;
        AddedToken t;
        if (s.token) {
            t = *s.token;
        } else {
            t.content = *s.content;
            t.special = true;
            t.normalized = false;
        }
        if (auto it = addedIndex.find(t.content); it != addedIndex.end() && added[it->second].sameFlags(t))
            continue;
        addToken(t);
    }
}

void Tokenizer::Impl::resolveSpecials(const std::map<std::string, SpecialSetting>& specials, const std::string& where)
{
    auto resolve = [&](const char* n) -> std::optional<std::int64_t> {
        const auto& s = specials.at(n);
        if (!s.content)
            return std::nullopt;
        auto id = idOf(*s.content);
        if (!id)
            fail(ErrorCode::InvalidFormat, where + ": " + n + " '" + *s.content + "' is not in the vocabulary");
        return id;
    };
    bos = resolve("bos_token");
    eos = resolve("eos_token");
    if (auto own = resolve("pad_token"))
        pad = *own;
    else if (eos)
        pad = *eos;  // diffusers: tokenizer.pad_token = tokenizer.eos_token
    else
        fail(ErrorCode::InvalidFormat, where + ": declares neither a pad nor an eos token to pad with");
}

void Tokenizer::Impl::loadPostProcessor(const json& tj, const std::string& where)
{
    // Post-processor: tokenizer.json's. transformers drops add_bos_token / add_eos_token from
    // tokenizer_config.json whenever a tokenizer.json exists, so they change nothing; a file
    // without a post-processor then gets an empty template (no BOS).
    // A ByteLevel post-processor only trims offsets: it adds no ids.
    if (tj.contains("post_processor") && !tj["post_processor"].is_null() && typeOf(tj["post_processor"]) != "ByteLevel") {
        const auto& pp = tj["post_processor"];
        if (typeOf(pp) != "TemplateProcessing")
            fail(ErrorCode::Unsupported,
                where + ": the '" + typeOf(pp)
                    + "' post-processor is not supported by this version "
                      "(only TemplateProcessing is)");
        if (!pp.contains("single") || !pp["single"].is_array())
            fail(ErrorCode::InvalidFormat, where + ": TemplateProcessing without a 'single' template");
        bool seenA = false;
        for (const auto& piece : pp["single"]) {
            if (piece.contains("Sequence")) {
                if (jsonutil::stringOr(piece["Sequence"], "id") != "A" || seenA)
                    fail(ErrorCode::InvalidFormat,
                        where + ": the single template must hold sequence A exactly once: " + shortJson(pp["single"]));
                seenA = true;
            } else if (piece.contains("SpecialToken")) {
                const auto id = jsonutil::stringOr(piece["SpecialToken"], "id");
                if (!pp.contains("special_tokens") || !pp["special_tokens"].contains(id) || !pp["special_tokens"][id].contains("ids")
                    || !pp["special_tokens"][id]["ids"].is_array())
                    fail(ErrorCode::InvalidFormat, where + ": template special token '" + id + "' has no ids");
                for (const auto& v : pp["special_tokens"][id]["ids"]) {
                    // The ids index the text encoder's embedding table: only ids the
                    // vocabulary defines may pass.
                    const auto tokenId = v.is_number_integer() ? v.get<std::int64_t>() : std::int64_t{-1};
                    if (!knowsId(tokenId))
                        fail(ErrorCode::InvalidFormat,
                            where + ": template special token '" + id + "' has id " + shortJson(v) + ", which is not in the vocabulary");
                    (seenA ? suffixIds : prefixIds).push_back(tokenId);
                }
            } else {
                fail(ErrorCode::InvalidFormat, where + ": unknown template piece " + shortJson(piece));
            }
        }
        if (!seenA)
            fail(ErrorCode::InvalidFormat, where + ": the single template has no sequence A");
    }
}

Result<Tokenizer> Tokenizer::fromJson(const std::string& tokenizerJson, const std::string& configJson, const std::string& origin)
{
    auto impl = std::make_unique<Impl>();
    impl->origin = origin;
    try {
        const auto tj = parseJson(tokenizerJson, origin);
        if (!tj.is_object())
            fail(ErrorCode::InvalidFormat, origin + ": is not a JSON object");
        const json config = configJson.empty() ? json::object() : parseJson(configJson, origin + " tokenizer_config.json");
        if (!config.is_object())
            fail(ErrorCode::InvalidFormat, origin + ": tokenizer_config.json is not a JSON object");

        for (const char* key : {"truncation", "padding"})
            if (tj.contains(key) && !tj[key].is_null())
                fail(ErrorCode::Unsupported,
                    origin + ": tokenizer.json sets default '" + key + "' (" + shortJson(tj[key])
                        + "); transformers would apply it, this version does not");

        const std::string cls = config.contains("tokenizer_class") && config["tokenizer_class"].is_string()
            ? config["tokenizer_class"].get<std::string>()
            : std::string();
        const bool gemma = cls == "GemmaTokenizer" || cls == "GemmaTokenizerFast";
        const bool qwen2 = cls == "Qwen2Tokenizer" || cls == "Qwen2TokenizerFast";
        const bool rebuilt = gemma || qwen2;
        if (!cls.empty() && !rebuilt && cls != "PreTrainedTokenizerFast" && cls != "TokenizersBackend")
            fail(ErrorCode::Unsupported,
                origin + ": tokenizer_class '" + cls
                    + "' is rebuilt by transformers from its own class "
                      "definition, which this version does not replicate (supported: GemmaTokenizer(Fast), Qwen2Tokenizer(Fast), "
                      "PreTrainedTokenizerFast)");
        const std::string& where = origin;
        const auto specials = namedSpecials(config, where, gemma, rebuilt);
        impl->loadPipeline(tj, cls, gemma, qwen2, where, specials.at("unk_token").content);
        impl->loadAddedTokens(tj, config, cls, rebuilt, where);
        impl->addSpecialTokens(specials, config, where);
        impl->buildTries();

        impl->resolveSpecials(specials, where);
        impl->loadPostProcessor(tj, where);
        const auto side = config.contains("truncation_side") && config["truncation_side"].is_string()
            ? config["truncation_side"].get<std::string>()
            : std::string("right");
        if (side != "right" && side != "left")
            fail(ErrorCode::InvalidFormat, where + ": truncation_side '" + side + "' is neither left nor right");
        impl->truncateLeft = side == "left";

        std::int64_t maxId = -1;
        for (const auto& [t, id] : impl->vocab)
            maxId = std::max(maxId, id);
        for (const auto& a : impl->added)
            maxId = std::max(maxId, a.id);
        impl->vocabSize = maxId + 1;
        impl->pieces.assign(static_cast<std::size_t>(impl->vocabSize), {});
        impl->specialIds.assign(static_cast<std::size_t>(impl->vocabSize), 0);
        for (const auto& [t, id] : impl->vocab)
            impl->pieces[static_cast<std::size_t>(id)] = t;
        for (const auto& a : impl->added) {
            impl->pieces[static_cast<std::size_t>(a.id)] = a.content;
            impl->specialIds[static_cast<std::size_t>(a.id)] = a.special ? 1 : 0;
        }
        // transformers' GemmaTokenizer sets this decoder whatever the file says; a plain
        // tokenizer.json decodes as written, which is read here only when it is the same.
        const json sentencePiece = json::parse(R"({"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},)"
                                               R"("content":" "},{"type":"ByteFallback"},{"type":"Fuse"}]})");
        const bool sameDecoder = tj.contains("decoder") && tj["decoder"] == sentencePiece;
        if (!gemma && !sameDecoder)
            impl->decoderProblem = origin + ": decoding with tokenizer.json's decoder "
                + shortJson(tj.contains("decoder") ? tj["decoder"] : json())
                + " is not supported by this version (SentencePiece's Replace + ByteFallback + Fuse is)";
    } catch (const LoadFailure& e) {
        return makeError(e.code, e.message);
    } catch (const json::exception& e) {
        return makeError(ErrorCode::InvalidFormat, origin + ": unexpected JSON content (" + e.what() + ")");
    }
    return Tokenizer(std::move(impl));
}

Result<std::vector<std::int64_t>> Tokenizer::tokenize(std::string_view text) const
{
    if (const auto bad = firstInvalidUtf8(text))
        return makeError(ErrorCode::InvalidArgument, "the text is not valid UTF-8 (byte " + std::to_string(*bad) + ")");
    try {
        return m_impl->run(text);
    } catch (const std::runtime_error& e) {
        return makeError(ErrorCode::InvalidFormat, m_impl->origin + ": " + e.what());
    }
}

Result<Encoding> Tokenizer::encode(
    std::string_view text, std::int64_t maxLength, bool padLeft, bool addSpecialTokens, bool truncation) const
{
    if (maxLength <= 0)
        return makeError(ErrorCode::InvalidArgument, "max length must be positive, got " + std::to_string(maxLength));
    auto tokens = tokenize(text);
    if (!tokens)
        return tokens.error();
    auto& ids = *tokens;
    const auto& m = *m_impl;
    const auto specials = addSpecialTokens ? static_cast<std::int64_t>(m.prefixIds.size() + m.suffixIds.size()) : 0;
    if (truncation && static_cast<std::int64_t>(ids.size()) + specials > maxLength) {
        if (maxLength < specials)
            return makeError(ErrorCode::InvalidArgument,
                "max length " + std::to_string(maxLength) + " leaves no room for the " + std::to_string(specials) + " special tokens");
        const auto keep = static_cast<std::size_t>(maxLength - specials);
        if (m.truncateLeft)
            ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(keep));
        else
            ids.resize(keep);
    }
    Encoding e;
    std::vector<std::int64_t> body;
    body.reserve(ids.size() + static_cast<std::size_t>(specials));
    if (addSpecialTokens)
        body.insert(body.end(), m.prefixIds.begin(), m.prefixIds.end());
    body.insert(body.end(), ids.begin(), ids.end());
    if (addSpecialTokens)
        body.insert(body.end(), m.suffixIds.begin(), m.suffixIds.end());
    const auto n = static_cast<std::int64_t>(body.size());
    const auto padding = static_cast<std::size_t>(std::max<std::int64_t>(0, maxLength - n));
    if (padLeft) {
        e.ids.assign(padding, m.pad);
        e.attentionMask.assign(padding, 0);
    }
    e.ids.insert(e.ids.end(), body.begin(), body.end());
    e.attentionMask.insert(e.attentionMask.end(), body.size(), 1);
    if (!padLeft) {
        e.ids.insert(e.ids.end(), padding, m.pad);
        e.attentionMask.insert(e.attentionMask.end(), padding, 0);
    }
    return e;
}

std::int64_t Tokenizer::padId() const
{
    return m_impl->pad;
}
std::optional<std::int64_t> Tokenizer::bosId() const
{
    return m_impl->bos;
}
std::optional<std::int64_t> Tokenizer::eosId() const
{
    return m_impl->eos;
}
std::int64_t Tokenizer::vocabSize() const
{
    return m_impl->vocabSize;
}
const std::string& Tokenizer::describe() const
{
    return m_impl->description;
}

std::optional<std::int64_t> Tokenizer::tokenToId(std::string_view token) const
{
    return m_impl->idOf(std::string(token));
}

Result<std::string> Tokenizer::decode(const std::vector<std::int64_t>& ids, bool skipSpecialTokens) const
{
    const auto& m = *m_impl;
    if (m.decoderProblem)
        return makeError(ErrorCode::Unsupported, *m.decoderProblem);
    std::string out, bytes;
    // ByteFallback: a run of <0xHH> tokens becomes its bytes when they are valid UTF-8, else
    // one U+FFFD per byte.
    auto flush = [&] {
        if (bytes.empty())
            return;
        if (firstInvalidUtf8(bytes))
            for (std::size_t i = 0; i < bytes.size(); ++i)
                out += "\xEF\xBF\xBD";
        else
            out += bytes;
        bytes.clear();
    };
    for (const auto id : ids) {
        if (id < 0 || id >= m.vocabSize || (m.pieces[static_cast<std::size_t>(id)].empty() && !m.specialIds[static_cast<std::size_t>(id)]))
            return makeError(ErrorCode::InvalidArgument, m.origin + ": token id " + std::to_string(id) + " is not in the vocabulary");
        if (skipSpecialTokens && m.specialIds[static_cast<std::size_t>(id)])
            continue;
        const auto& piece = m.pieces[static_cast<std::size_t>(id)];
        const auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
        if (piece.size() == 6 && piece.starts_with("<0x") && piece.back() == '>' && hex(piece[3]) && hex(piece[4])) {
            bytes.push_back(static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
            continue;
        }
        flush();
        for (std::size_t i = 0; i < piece.size();) {
            if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
                out += ' ';
                i += 3;
            } else {
                out += piece[i++];
            }
        }
    }
    flush();
    return out;
}

std::optional<std::string> Tokenizer::idToToken(std::int64_t id) const
{
    for (const auto& a : m_impl->added)
        if (a.id == id)
            return a.content;
    for (const auto& [t, i] : m_impl->vocab)
        if (i == id)
            return t;
    return std::nullopt;
}

std::string stripPythonWhitespace(std::string_view text)
{
    if (firstInvalidUtf8(text))
        return std::string(text);
    const auto begin = leadingSpaceBytes(text, isPythonSpace);
    const auto end = trailingSpaceStart(text, isPythonSpace);
    return end > begin ? std::string(text.substr(begin, end - begin)) : std::string();
}

}  // namespace vireo::text
