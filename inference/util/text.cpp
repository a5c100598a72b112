#include "inference/util/text.h"

namespace vireo {

std::size_t utf8SequenceLength(std::string_view text, std::size_t i)
{
    const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
    const unsigned char c = byte(i);
    if (c < 0x80)
        return 1;
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
        n = 2;
        cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3;
        cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (i + n > text.size())
        return 0;
    for (std::size_t k = 1; k < n; ++k) {
        if ((byte(i + k) & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (byte(i + k) & 0x3F);
    }
    static constexpr std::uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

std::string shownName(std::string_view text, std::size_t maxBytes)
{
    if (text.size() <= maxBytes)
        return terminalSafe(text);
    std::size_t cut = 0;
    while (cut < text.size()) {
        const auto n = std::max<std::size_t>(1, utf8SequenceLength(text, cut));
        if (cut + n > maxBytes)
            break;
        cut += n;
    }
    return terminalSafe(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

std::string terminalSafe(std::string_view text)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto n = utf8SequenceLength(text, i);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            ++i;
            continue;
        }
        const auto seq = text.substr(i, n);
        const unsigned char c = static_cast<unsigned char>(seq[0]);
        bool unsafe = false;
        if (n == 1) {
            unsafe = c < 0x20 || c == 0x7F;
        } else if (n == 2) {
            unsafe = c == 0xC2 && static_cast<unsigned char>(seq[1]) < 0xA0;  // U+0080..U+009F
        } else if (n == 3 && c == 0xE2) {
            const unsigned char b1 = static_cast<unsigned char>(seq[1]), b2 = static_cast<unsigned char>(seq[2]);
            // U+2028/2029 separators, U+202A..202E embeddings/overrides, U+2066..2069 isolates.
            unsafe = (b1 == 0x80 && b2 >= 0xA8 && b2 <= 0xAE) || (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9);
        }
        if (unsafe)
            out += '?';
        else
            out.append(seq);
        i += n;
    }
    return out;
}

}  // namespace vireo
