#include "media/imageheader.h"

#include <cstdlib>
#include <cstring>

namespace vireo::media {

namespace {

constexpr std::uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

std::uint32_t be32(const std::uint8_t* p)
{
    return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

std::uint32_t be16(const std::uint8_t* p)
{
    return (std::uint32_t(p[0]) << 8) | p[1];
}

std::uint32_t le16(const std::uint8_t* p)
{
    return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8);
}

std::uint32_t le24(const std::uint8_t* p)
{
    return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8) | (std::uint32_t(p[2]) << 16);
}

std::uint32_t le32(const std::uint8_t* p)
{
    return le24(p) | (std::uint32_t(p[3]) << 24);
}

bool isPng(std::span<const std::uint8_t> b)
{
    return b.size() >= 8 && std::memcmp(b.data(), kPngSignature, 8) == 0;
}

std::optional<DeclaredSize> pngSize(std::span<const std::uint8_t> b)
{
    // Signature, then IHDR first: length 13, "IHDR", width, height.
    if (b.size() < 8 + 8 + 8 || std::memcmp(b.data() + 12, "IHDR", 4) != 0 || be32(b.data() + 8) < 8)
        return std::nullopt;
    return DeclaredSize{be32(b.data() + 16), be32(b.data() + 20), "PNG"};
}

std::optional<DeclaredSize> jpegSize(std::span<const std::uint8_t> b)
{
    if (b.size() < 4 || b[0] != 0xFF || b[1] != 0xD8)
        return std::nullopt;
    std::size_t i = 2;
    // Segments up to the first frame header; fill bytes (0xFF runs) between them are legal.
    for (int segments = 0; segments < 4096 && i + 4 <= b.size(); ++segments) {
        if (b[i] != 0xFF)
            return std::nullopt;
        while (i < b.size() && b[i] == 0xFF)
            ++i;
        if (i >= b.size())
            return std::nullopt;
        const std::uint8_t marker = b[i++];
        if (marker == 0xD8 || (marker >= 0xD0 && marker <= 0xD7) || marker == 0x01)
            continue;  // no length
        if (marker == 0xD9 || marker == 0xDA || i + 2 > b.size())
            return std::nullopt;  // the end or the scan before any frame header
        const std::uint32_t length = be16(b.data() + i);
        if (length < 2 || i + length > b.size())
            return std::nullopt;
        const bool frame = marker >= 0xC0 && marker <= 0xCF && marker != 0xC4 && marker != 0xC8 && marker != 0xCC;
        if (frame) {
            if (length < 7)
                return std::nullopt;
            return DeclaredSize{be16(b.data() + i + 5), be16(b.data() + i + 3), "JPEG"};
        }
        i += length;
    }
    return std::nullopt;
}

std::optional<DeclaredSize> webpSize(std::span<const std::uint8_t> b)
{
    if (b.size() < 30 || std::memcmp(b.data(), "RIFF", 4) != 0 || std::memcmp(b.data() + 8, "WEBP", 4) != 0)
        return std::nullopt;
    const std::uint8_t* c = b.data() + 12;
    const std::uint32_t chunk = le32(c + 4);
    if (std::memcmp(c, "VP8X", 4) == 0 && chunk >= 10)
        return DeclaredSize{std::int64_t(le24(c + 12)) + 1, std::int64_t(le24(c + 15)) + 1, "WebP"};
    if (std::memcmp(c, "VP8L", 4) == 0 && chunk >= 5 && c[8] == 0x2F) {
        const std::uint32_t bits = le32(c + 9);
        return DeclaredSize{std::int64_t(bits & 0x3FFF) + 1, std::int64_t((bits >> 14) & 0x3FFF) + 1, "WebP"};
    }
    // Lossy: a 3-byte frame tag, the start code 9D 01 2A, then 14-bit width and height.
    if (std::memcmp(c, "VP8 ", 4) == 0 && chunk >= 10 && c[11] == 0x9D && c[12] == 0x01 && c[13] == 0x2A)
        return DeclaredSize{le16(c + 14) & 0x3FFF, le16(c + 16) & 0x3FFF, "WebP"};
    return std::nullopt;
}

std::optional<DeclaredSize> gifSize(std::span<const std::uint8_t> b)
{
    if (b.size() < 10 || (std::memcmp(b.data(), "GIF87a", 6) != 0 && std::memcmp(b.data(), "GIF89a", 6) != 0))
        return std::nullopt;
    return DeclaredSize{le16(b.data() + 6), le16(b.data() + 8), "GIF"};
}

std::optional<DeclaredSize> bmpSize(std::span<const std::uint8_t> b)
{
    if (b.size() < 26 || b[0] != 'B' || b[1] != 'M' || le32(b.data() + 14) < 40)
        return std::nullopt;
    const auto width = static_cast<std::int32_t>(le32(b.data() + 18));
    const auto height = static_cast<std::int32_t>(le32(b.data() + 22));
    // Negative heights are top-down images; INT32_MIN has no magnitude to report.
    if (width == INT32_MIN || height == INT32_MIN)
        return std::nullopt;
    return DeclaredSize{std::abs(std::int64_t(width)), std::abs(std::int64_t(height)), "BMP"};
}

}  // namespace

std::optional<DeclaredSize> declaredImageSize(std::span<const std::uint8_t> bytes)
{
    for (auto* reader : {&pngSize, &jpegSize, &webpSize, &gifSize, &bmpSize})
        if (auto size = reader(bytes))
            return size;
    return std::nullopt;
}

int stripInflatablePngChunks(std::vector<std::uint8_t>& bytes)
{
    if (!isPng(bytes))
        return 0;
    std::vector<std::uint8_t> out(bytes.begin(), bytes.begin() + 8);
    out.reserve(bytes.size());
    std::size_t i = 8;
    int removed = 0;
    bool ended = false;
    while (!ended) {
        // Length, type, data, CRC: 12 bytes beyond the data; a chunk that overruns the file
        // leaves the file as it was, for the decoder to refuse.
        if (i + 12 > bytes.size())
            return 0;
        const std::uint32_t length = be32(bytes.data() + i);
        if (length > bytes.size() - i - 12)
            return 0;
        const std::uint8_t* type = bytes.data() + i + 4;
        const std::size_t total = std::size_t(length) + 12;
        const bool drop = std::memcmp(type, "tEXt", 4) == 0 || std::memcmp(type, "zTXt", 4) == 0 || std::memcmp(type, "iTXt", 4) == 0
            || std::memcmp(type, "iCCP", 4) == 0;
        if (drop)
            ++removed;
        else
            out.insert(out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(i), bytes.begin() + static_cast<std::ptrdiff_t>(i + total));
        ended = std::memcmp(type, "IEND", 4) == 0;
        i += total;
    }
    if (removed == 0)
        return 0;
    // Whatever follows IEND is kept (some writers append data); the decoder ignores it.
    out.insert(out.end(), bytes.begin() + static_cast<std::ptrdiff_t>(i), bytes.end());
    bytes.swap(out);
    return removed;
}

}  // namespace vireo::media
