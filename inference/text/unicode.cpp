#include "inference/text/unicode.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace vireo::text::unicode {

namespace {

struct CodeRange {
    char32_t first, last;
};
struct CombiningClass {
    char32_t cp;
    int ccc;
};
struct Decomposition {
    char32_t cp, first, second;  // second 0: a singleton
};
struct Composition {
    char32_t first, second, composite;
};

#include "inference/text/unicodedata.inc"

template <std::size_t N>
bool inRanges(const CodeRange (&table)[N], char32_t c)
{
    const auto it = std::upper_bound(std::begin(table), std::end(table), c, [](char32_t v, const CodeRange& r) { return v < r.first; });
    return it != std::begin(table) && c <= std::prev(it)->last;
}

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

void decompose(char32_t c, std::u32string& out)
{
    if (c >= kSBase && c < kSBase + kSCount) {
        const char32_t s = c - kSBase;
        out.push_back(kLBase + s / kNCount);
        out.push_back(kVBase + (s % kNCount) / kTCount);
        if (s % kTCount)
            out.push_back(kTBase + s % kTCount);
        return;
    }
    const auto it = std::lower_bound(
        std::begin(kDecompositions), std::end(kDecompositions), c, [](const Decomposition& d, char32_t v) { return d.cp < v; });
    if (it == std::end(kDecompositions) || it->cp != c) {
        out.push_back(c);
        return;
    }
    decompose(it->first, out);
    if (it->second)
        decompose(it->second, out);
}

char32_t compose(char32_t a, char32_t b)
{
    if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
        return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
        return a + (b - kTBase);
    const auto it = std::lower_bound(std::begin(kCompositions), std::end(kCompositions), std::make_pair(a, b),
        [](const Composition& c, const std::pair<char32_t, char32_t>& v) { return std::make_pair(c.first, c.second) < v; });
    if (it != std::end(kCompositions) && it->first == a && it->second == b)
        return it->composite;
    return 0;
}

bool isCrLf(char32_t c)
{
    return c == U'\r' || c == U'\n';
}
bool isOther(char32_t c)
{
    return !isWhiteSpace(c) && !isLetter(c) && !isNumber(c);
}  // [^\s\p{L}\p{N}]

}  // namespace

const std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool isLetter(char32_t c)
{
    return inRanges(kLetters, c);
}
bool isNumber(char32_t c)
{
    return inRanges(kNumbers, c);
}

bool isWhiteSpace(char32_t c)
{
    return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028
        || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

int combiningClass(char32_t c)
{
    const auto it = std::lower_bound(
        std::begin(kCombiningClasses), std::end(kCombiningClasses), c, [](const CombiningClass& e, char32_t v) { return e.cp < v; });
    return it != std::end(kCombiningClasses) && it->cp == c ? it->ccc : 0;
}

std::u32string decodeUtf8(std::string_view s)
{
    std::u32string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const int len = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
        for (int k = 1; k < len && i + static_cast<std::size_t>(k) < s.size(); ++k)
            c = (c << 6) | (static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]) & 0x3F);
        out.push_back(c);
        i += static_cast<std::size_t>(len);
    }
    return out;
}

void appendUtf8(std::string& out, char32_t c)
{
    if (c < 0x80) {
        out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (c >> 6)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (c >> 12)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (c >> 18)));
        out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
}

std::string encodeUtf8(std::u32string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (char32_t c : text)
        appendUtf8(out, c);
    return out;
}

std::string nfc(std::string_view text)
{
    // Fast path: ASCII is already NFC.
    if (std::all_of(text.begin(), text.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x80; }))
        return std::string(text);
    std::u32string d;
    for (char32_t c : decodeUtf8(text))
        decompose(c, d);
    // Canonical ordering: a stable sort of every run of non-starters by combining class.
    for (std::size_t i = 0; i < d.size();) {
        if (combiningClass(d[i]) == 0) {
            ++i;
            continue;
        }
        std::size_t j = i;
        while (j < d.size() && combiningClass(d[j]) != 0)
            ++j;
        std::stable_sort(d.begin() + static_cast<std::ptrdiff_t>(i), d.begin() + static_cast<std::ptrdiff_t>(j),
            [](char32_t a, char32_t b) { return combiningClass(a) < combiningClass(b); });
        i = j;
    }
    // Canonical composition (UAX #15's reference algorithm).
    if (!d.empty()) {
        std::size_t starterPos = 0, out = 1;
        char32_t starter = d[0];
        int lastClass = combiningClass(starter) == 0 ? 0 : 256;
        for (std::size_t i = 1; i < d.size(); ++i) {
            const char32_t ch = d[i];
            const int chClass = combiningClass(ch);
            const char32_t composite = lastClass == 256 ? 0 : compose(starter, ch);
            if (composite && (lastClass < chClass || lastClass == 0)) {
                d[starterPos] = composite;
                starter = composite;
                continue;
            }
            if (chClass == 0) {
                starterPos = out;
                starter = ch;
            }
            lastClass = chClass;
            d[out++] = ch;
        }
        d.resize(out);
    }
    return encodeUtf8(d);
}

std::vector<std::pair<std::size_t, std::size_t>> qwen2Matches(std::u32string_view s)
{
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    const std::size_t n = s.size();
    auto lower = [](char32_t c) { return c >= U'A' && c <= U'Z' ? c + 32 : c; };
    // s[i] matches the case-folded ASCII letter l (Oniguruma folds U+017F to 's', U+212A to 'k').
    auto is = [&](std::size_t i, char32_t l) { return i < n && (lower(s[i]) == l || (l == U's' && s[i] == 0x17F)); };
    std::size_t i = 0;
    while (i < n) {
        std::size_t end = 0;
        const char32_t c = s[i];
        // 1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
        if (c == U'\'') {
            if (is(i + 1, U's') || is(i + 1, U't') || is(i + 1, U'm') || is(i + 1, U'd'))
                end = i + 2;
            else if ((is(i + 1, U'r') || is(i + 1, U'v')) && is(i + 2, U'e'))
                end = i + 3;
            else if (is(i + 1, U'l') && is(i + 2, U'l'))
                end = i + 3;
        }
        // 2. [^\r\n\p{L}\p{N}]?\p{L}+
        if (!end) {
            std::size_t j = i;
            if (!isLetter(c) && !isCrLf(c) && !isNumber(c) && i + 1 < n && isLetter(s[i + 1]))
                j = i + 1;
            if (j < n && isLetter(s[j])) {
                while (j < n && isLetter(s[j]))
                    ++j;
                end = j;
            }
        }
        // 3. \p{N}
        if (!end && isNumber(c))
            end = i + 1;
        // 4. ` ?[^\s\p{L}\p{N}]+[\r\n]*`
        if (!end) {
            std::size_t j = i;
            if (c == U' ' && i + 1 < n && isOther(s[i + 1]))
                j = i + 1;
            if (j < n && isOther(s[j])) {
                while (j < n && isOther(s[j]))
                    ++j;
                while (j < n && isCrLf(s[j]))
                    ++j;
                end = j;
            }
        }
        if (!end && isWhiteSpace(c)) {
            std::size_t j = i;
            while (j < n && isWhiteSpace(s[j]))
                ++j;
            // 5. \s*[\r\n]+: up to the last CR/LF of the whitespace run.
            for (std::size_t k = j; k > i; --k)
                if (isCrLf(s[k - 1])) {
                    end = k;
                    break;
                }
            // 6. \s+(?!\S): the whole run at the end of the text, else all but its last character.
            if (!end) {
                if (j == n)
                    end = j;
                else if (j - 1 > i)
                    end = j - 1;
            }
            // 7. \s+
            if (!end)
                end = j;
        }
        if (!end) {
            ++i;  // no alternative matches here (unreachable: every character is L, N, \s or other)
            continue;
        }
        spans.emplace_back(i, end);
        i = end;
    }
    return spans;
}

char32_t byteLevelChar(unsigned char byte)
{
    static const std::array<char32_t, 256> table = [] {
        std::array<char32_t, 256> t{};
        char32_t next = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            t[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
        }
        return t;
    }();
    return table[byte];
}

}  // namespace vireo::text::unicode
