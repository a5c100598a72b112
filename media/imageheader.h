#pragma once

// What a still picture's header says before any decoder sees it: its declared size (so a
// picture too large is refused with the pixel limit, not as "damaged"), and a PNG without the
// chunks FFmpeg inflates without a limit (text, ICC profile). Plain byte parsing, every length
// checked against what is there: these bytes come from files anyone could have made.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace vireo::media {

struct DeclaredSize {
    std::int64_t width = 0, height = 0;
    std::string format;  // "PNG", "JPEG", "WebP", "GIF", "BMP"
};

// The width and height a PNG (IHDR), JPEG (the first SOFn before the scan), WebP (VP8, VP8L or
// VP8X), GIF (logical screen) or BMP header declares; nullopt for anything else or a header
// too short or malformed to say (the decoder then judges the file).
std::optional<DeclaredSize> declaredImageSize(std::span<const std::uint8_t> bytes);

// Removes a PNG's tEXt, zTXt, iTXt and iCCP chunks in place: FFmpeg 5.1 inflates compressed text
// and profiles into frame metadata without a bound (a 1 MB zTXt can hold a gigabyte), and nothing
// here reads them. Ancillary chunks each carry their own CRC, so the rest stays a valid PNG.
// Returns how many chunks went; 0 (and the bytes untouched) for anything that is not a PNG
// whose chunk list can be walked to IEND.
int stripInflatablePngChunks(std::vector<std::uint8_t>& bytes);

}  // namespace vireo::media
