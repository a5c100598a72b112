// Stills and clips read for conditioning a video: PNG, JPEG, BMP and WebP written by the
// system's ffmpeg decode back; damaged, truncated, foreign and oversized files are
// refused with their name; fitToSize keeps the aspect and the centre; the H.264 round trip
// changes the pixels a little (PSNR printed) and CRF 0 changes nothing.
#include "tests/harness/vireotest.h"

#include "media/imageheader.h"
#include "media/imageops.h"
#include "media/mediareader.h"
#include "media/mp4writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include <sys/resource.h>
#include <zlib.h>

using namespace vireo;
namespace fs = std::filesystem;

namespace {

// Every file of this run in one folder, removed at exit.
struct TempDir {
    fs::path path = fs::temp_directory_path() / ("vireo_imageio_" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
} g_temp;

fs::path tempDir()
{
    return g_temp.path;
}

// Smooth content (what photos mostly are): gradients and a gentle wave.
media::RgbImage smooth(int w, int h)
{
    media::RgbImage im{w, h, std::vector<std::uint8_t>(static_cast<std::size_t>(w) * h * 3)};
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            auto* p = &im.rgb[(static_cast<std::size_t>(y) * w + x) * 3];
            p[0] = static_cast<std::uint8_t>(40 + 170 * x / std::max(1, w - 1));
            p[1] = static_cast<std::uint8_t>(30 + 180 * y / std::max(1, h - 1));
            p[2] = static_cast<std::uint8_t>(128 + 60 * std::sin(x * 0.15) * std::cos(y * 0.11));
        }
    return im;
}

media::RgbImage flat(int w, int h, std::uint8_t r, std::uint8_t g, std::uint8_t b)
{
    media::RgbImage im{w, h, {}};
    for (int i = 0; i < w * h; ++i)
        im.rgb.insert(im.rgb.end(), {r, g, b});
    return im;
}

double psnr(const media::RgbImage& a, const media::RgbImage& b)
{
    if (a.rgb.size() != b.rgb.size() || a.rgb.empty())
        return -1;
    double se = 0;
    for (std::size_t i = 0; i < a.rgb.size(); ++i) {
        const double d = static_cast<double>(a.rgb[i]) - b.rgb[i];
        se += d * d;
    }
    const double mse = se / static_cast<double>(a.rgb.size());
    return mse == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 / mse);
}

// One picture through one of the system ffmpeg's encoders, as the bytes of a file. The stills
// come from a producer independent of the FFmpeg linked into Vireo (which has no image
// encoders at all: it only reads them).
std::vector<std::uint8_t> encodeStill(const std::string& encoder, const std::string& pixelFormat, const media::RgbImage& im)
{
    static int serial = 0;
    const auto raw = tempDir() / ("still" + std::to_string(serial) + ".rgb");
    const auto out = tempDir() / ("still" + std::to_string(serial++) + ".out");
    std::ofstream(raw, std::ios::binary).write(reinterpret_cast<const char*>(im.rgb.data()), static_cast<std::streamsize>(im.rgb.size()));
    // mjpeg at qscale 2, the quality a camera writes.
    const std::string quality = encoder == "mjpeg" ? " -q:v 2" : "";
    const std::string command = "ffmpeg -nostdin -v error -y -f rawvideo -pix_fmt rgb24 -s " + std::to_string(im.width) + "x"
        + std::to_string(im.height) + " -i '" + raw.string() + "' -frames:v 1 -c:v " + encoder + " -pix_fmt " + pixelFormat + quality
        + " -f image2 -update 1 '" + out.string() + "'";
    if (std::system(command.c_str()) != 0)
        return {};
    std::ifstream in(out, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::uint32_t crc32(const std::uint8_t* data, std::size_t n)
{
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < n; ++i) {
        c ^= data[i];
        for (int k = 0; k < 8; ++k)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

fs::path writeFile(const std::string& name, const std::vector<std::uint8_t>& bytes)
{
    const auto path = tempDir() / name;
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
}

// The refusal names the file and says what is wrong.
void expectRefused(const fs::path& path, const std::string& words, std::int64_t maxPixels = media::kMaxImagePixels)
{
    auto r = media::readImage(path, maxPixels);
    VT_CHECK_MSG(!r.ok(), path.string() + " was decoded");
    const auto& m = r.error().message;
    std::printf("    %s -> %s\n", path.filename().c_str(), m.c_str());
    VT_CHECK_MSG(m.find(path.string()) != std::string::npos && m.find(words) != std::string::npos, m);
}

}  // namespace

VT_TEST(pngDecodesExactly)
{
    const auto im = smooth(67, 45);  // odd sides
    const auto bytes = encodeStill("png", "rgb24", im);
    VT_CHECK(!bytes.empty());
    auto r = media::readImage(writeFile("smooth.png", bytes));
    VT_CHECK_MSG(r.ok(), r.error().message);
    VT_COMPARE(r->width, 67);
    VT_COMPARE(r->height, 45);
    VT_CHECK(r->rgb == im.rgb);
    // With an alpha channel (dropped, as PIL's convert("RGB") does) and as 16-bit RGB.
    auto rgba = encodeStill("png", "rgba", im);
    auto a = media::readImage(writeFile("alpha.png", rgba));
    VT_CHECK_MSG(a.ok() && a->rgb == im.rgb, (a.ok() ? "pixels differ" : a.error().message));
    auto deep = media::readImage(writeFile("deep.png", encodeStill("png", "rgb48be", im)));
    VT_CHECK_MSG(deep.ok() && psnr(*deep, im) > 45, (deep.ok() ? std::to_string(psnr(*deep, im)) : deep.error().message));
}

VT_TEST(jpegBmpAndWebpDecode)
{
    const auto im = smooth(80, 60);
    struct Case {
        const char* encoder;
        const char* format;
        const char* file;
        double minPsnr;
    };
    for (const auto& c :
        {Case{"mjpeg", "yuvj444p", "photo.jpg", 30}, Case{"bmp", "bgr24", "plain.bmp", 99}, Case{"libwebp", "yuv420p", "web.webp", 26}}) {
        const auto bytes = encodeStill(c.encoder, c.format, im);
        if (bytes.empty() && std::string(c.encoder) == "libwebp") {
            std::printf("    (the system ffmpeg has no WebP encoder: WebP decoding not checked)\n");
            continue;
        }
        VT_CHECK_MSG(!bytes.empty(), c.encoder);
        // A misleading extension changes nothing: the bytes say what the file is.
        for (const auto& name : {std::string(c.file), std::string(c.file) + ".png"}) {
            auto r = media::readImage(writeFile(name, bytes));
            VT_CHECK_MSG(r.ok(), r.error().message);
            VT_COMPARE(r->width, 80);
            VT_COMPARE(r->height, 60);
            const double p = psnr(*r, im);
            std::printf("    %s: PSNR %.1f dB against the original\n", name.c_str(), p);
            VT_CHECK_MSG(p >= c.minPsnr, name + ": PSNR " + std::to_string(p));
        }
    }
}

namespace {

const std::uint8_t kQuadrantColours[4][3] = {{230, 20, 20}, {20, 200, 20}, {20, 20, 230}, {240, 240, 240}};

// 64 x 32, stored as red top-left, green top-right, blue bottom-left, white bottom-right.
media::RgbImage quadrants()
{
    media::RgbImage im{64, 32, std::vector<std::uint8_t>(64 * 32 * 3)};
    for (int y = 0; y < im.height; ++y)
        for (int x = 0; x < im.width; ++x)
            std::memcpy(
                &im.rgb[(static_cast<std::size_t>(y) * im.width + x) * 3], kQuadrantColours[(y >= 16 ? 2 : 0) + (x >= 32 ? 1 : 0)], 3);
    return im;
}

// The colours (R, G, B, W) seen at the top-left, top-right, bottom-left and bottom-right corners.
std::string corners(const media::RgbImage& r)
{
    std::string out;
    if (r.width < 14 || r.height < 14 || r.rgb.size() != static_cast<std::size_t>(r.width) * r.height * 3)
        return "(no picture)";
    for (const auto& [x, y] : {std::pair{6, 6}, {r.width - 7, 6}, {6, r.height - 7}, {r.width - 7, r.height - 7}}) {
        const auto* p = &r.rgb[(static_cast<std::size_t>(y) * r.width + x) * 3];
        int best = 0, bestDistance = 1 << 30;
        for (int c = 0; c < 4; ++c) {
            int d = 0;
            for (int k = 0; k < 3; ++k)
                d += (p[k] - kQuadrantColours[c][k]) * (p[k] - kQuadrantColours[c][k]);
            if (d < bestDistance) {
                best = c;
                bestDistance = d;
            }
        }
        out += "RGBW"[best];
    }
    return out;
}

// A TIFF structure holding one IFD entry, Orientation (0x0112, SHORT, count `count`), little-endian.
std::vector<std::uint8_t> exifTiff(int orientation, int count = 1)
{
    const auto lo = static_cast<std::uint8_t>(orientation & 0xFF), hi = static_cast<std::uint8_t>(orientation >> 8);
    return {'I', 'I', 0x2A, 0x00, 0x08, 0x00, 0x00, 0x00,  // header, IFD at 8
        0x01, 0x00,  // one entry
        0x12, 0x01, 0x03, 0x00, static_cast<std::uint8_t>(count), 0x00, 0x00, 0x00, lo, hi, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00};  // no next IFD
}

// The JPEG with an APP1 Exif segment right after its SOI marker.
std::vector<std::uint8_t> jpegWithExif(const std::vector<std::uint8_t>& jpeg, const std::vector<std::uint8_t>& tiff)
{
    std::vector<std::uint8_t> app1{'E', 'x', 'i', 'f', 0, 0};
    app1.insert(app1.end(), tiff.begin(), tiff.end());
    const auto length = app1.size() + 2;
    std::vector<std::uint8_t> out(jpeg.begin(), jpeg.begin() + 2);
    out.insert(out.end(), {0xFF, 0xE1, static_cast<std::uint8_t>(length >> 8), static_cast<std::uint8_t>(length & 0xFF)});
    out.insert(out.end(), app1.begin(), app1.end());
    out.insert(out.end(), jpeg.begin() + 2, jpeg.end());
    return out;
}

void putLe(std::vector<std::uint8_t>& v, std::uint32_t value, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        v.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

// The PNG with an eXIf chunk (its CRC right) after IHDR.
std::vector<std::uint8_t> pngWithExif(const std::vector<std::uint8_t>& png, const std::vector<std::uint8_t>& tiff)
{
    constexpr std::size_t kAfterIhdr = 8 + 12 + 13;
    if (png.size() < kAfterIhdr)
        return {};
    std::vector<std::uint8_t> chunk;
    for (int i = 3; i >= 0; --i)
        chunk.push_back(static_cast<std::uint8_t>(tiff.size() >> (8 * i)));
    chunk.insert(chunk.end(), {'e', 'X', 'I', 'f'});
    chunk.insert(chunk.end(), tiff.begin(), tiff.end());
    const std::uint32_t crc = crc32(chunk.data() + 4, chunk.size() - 4);
    for (int i = 3; i >= 0; --i)
        chunk.push_back(static_cast<std::uint8_t>(crc >> (8 * i)));
    std::vector<std::uint8_t> out(png.begin(), png.begin() + kAfterIhdr);
    out.insert(out.end(), chunk.begin(), chunk.end());
    out.insert(out.end(), png.begin() + kAfterIhdr, png.end());
    return out;
}

// A simple (VP8 / VP8L) WebP rewritten as an extended one (VP8X) with an EXIF chunk after the image.
std::vector<std::uint8_t> webpWithExif(const std::vector<std::uint8_t>& webp, int width, int height, const std::vector<std::uint8_t>& tiff)
{
    if (webp.size() < 20 || std::memcmp(webp.data() + 12, "VP8", 3) != 0 || webp[15] == 'X')
        return {};
    std::vector<std::uint8_t> body{'W', 'E', 'B', 'P', 'V', 'P', '8', 'X'};
    putLe(body, 10, 4);
    body.insert(body.end(), {0x08, 0, 0, 0});  // the EXIF flag
    putLe(body, static_cast<std::uint32_t>(width - 1), 3);
    putLe(body, static_cast<std::uint32_t>(height - 1), 3);
    body.insert(body.end(), webp.begin() + 12, webp.end());
    body.insert(body.end(), {'E', 'X', 'I', 'F'});
    putLe(body, static_cast<std::uint32_t>(tiff.size()), 4);
    body.insert(body.end(), tiff.begin(), tiff.end());
    if (tiff.size() % 2)
        body.push_back(0);
    std::vector<std::uint8_t> out{'R', 'I', 'F', 'F'};
    putLe(out, static_cast<std::uint32_t>(body.size()), 4);
    out.insert(out.end(), body.begin(), body.end());
    return out;
}

// An uncompressed RGB TIFF of the picture whose first IFD says `orientation` (0x0112), as a
// camera or a scanner writes it.
std::vector<std::uint8_t> tiffWithOrientation(const media::RgbImage& im, int orientation)
{
    std::vector<std::uint8_t> out{'I', 'I', 0x2A, 0x00};
    putLe(out, 8, 4);
    constexpr std::uint32_t kEntries = 10, kBits = 8 + 2 + kEntries * 12 + 4, kData = kBits + 6;
    putLe(out, kEntries, 2);
    auto entry = [&](std::uint32_t tag, std::uint32_t type, std::uint32_t value) {
        putLe(out, tag, 2);
        putLe(out, type, 2);
        putLe(out, tag == 258 ? 3 : 1, 4);
        putLe(out, value, type == 3 && tag != 258 ? 2 : 4);
        if (type == 3 && tag != 258)
            putLe(out, 0, 2);
    };
    const auto w = static_cast<std::uint32_t>(im.width), h = static_cast<std::uint32_t>(im.height);
    entry(256, 4, w);  // ImageWidth
    entry(257, 4, h);  // ImageLength
    entry(258, 3, kBits);  // BitsPerSample 8, 8, 8 (stored after the IFD)
    entry(259, 3, 1);  // no compression
    entry(262, 3, 2);  // RGB
    entry(273, 4, kData);  // StripOffsets
    entry(274, 3, static_cast<std::uint32_t>(orientation));
    entry(277, 3, 3);  // SamplesPerPixel
    entry(278, 4, h);  // RowsPerStrip
    entry(279, 4, w * h * 3);  // StripByteCounts
    putLe(out, 0, 4);  // no next IFD
    for (int i = 0; i < 3; ++i)
        putLe(out, 8, 2);
    out.insert(out.end(), im.rgb.begin(), im.rgb.end());
    return out;
}

}  // namespace

// A phone stores a portrait photo sideways and says so in an EXIF orientation tag: the picture
// comes out as it is meant to be seen, each corner where the EXIF specification puts it (which
// is also what PIL's exif_transpose, called by diffusers' load_image, does). A tag that is not
// one number from 1 to 8 changes nothing.
VT_TEST(exifOrientationTurnsThePictureUpright)
{
    const auto im = quadrants();
    // Corners as seen (top-left, top-right, bottom-left, bottom-right), per orientation 1..8:
    // where the stored 0th row / 0th column belong (top/left, top/right, bottom/right, bottom/left,
    // left/top, right/top, right/bottom, left/bottom).
    const char* const seen[9] = {"", "RGBW", "GRWB", "WBGR", "BWRG", "RBGW", "BRWG", "WGBR", "GWRB"};
    const auto jpeg = encodeStill("mjpeg", "yuvj444p", im);
    VT_CHECK(!jpeg.empty());
    const auto webp = encodeStill("libwebp", "yuv420p", im);
    const auto png = encodeStill("png", "rgb24", im);
    VT_CHECK(!png.empty());
    auto plain = media::readImage(writeFile("plain.jpg", jpeg));
    VT_CHECK_MSG(plain.ok(), plain.error().message);
    VT_COMPARE(corners(*plain), std::string("RGBW"));
    for (int orientation = 1; orientation <= 8; ++orientation) {
        std::vector<std::pair<std::string, std::vector<std::uint8_t>>> files{
            {"exif" + std::to_string(orientation) + ".jpg", jpegWithExif(jpeg, exifTiff(orientation))}};
        if (!webp.empty())
            files.emplace_back(
                "exif" + std::to_string(orientation) + ".webp", webpWithExif(webp, im.width, im.height, exifTiff(orientation)));
        files.emplace_back("exif" + std::to_string(orientation) + ".png", pngWithExif(png, exifTiff(orientation)));
        files.emplace_back("orientation" + std::to_string(orientation) + ".tif", tiffWithOrientation(im, orientation));
        for (const auto& [name, bytes] : files) {
            VT_CHECK_MSG(!bytes.empty(), name);
            auto r = media::readImage(writeFile(name, bytes));
            VT_CHECK_MSG(r.ok(), name + ": " + (r.ok() ? "" : r.error().message));
            if (!r.ok())
                continue;
            const bool turned = orientation >= 5;
            std::printf(
                "    %s: %dx%d, corners %s (expected %s)\n", name.c_str(), r->width, r->height, corners(*r).c_str(), seen[orientation]);
            VT_COMPARE(r->width, turned ? 32 : 64);
            VT_COMPARE(r->height, turned ? 64 : 32);
            VT_COMPARE(corners(*r), std::string(seen[orientation]));
            if (orientation == 1 && name.ends_with(".jpg"))
                VT_CHECK(r->rgb == plain->rgb);
        }
    }
    if (webp.empty())
        std::printf("    (the system ffmpeg has no WebP encoder: WebP orientation not checked)\n");
    // Tags that are no orientation (out of range, two values), and EXIF data cut short or
    // pointing past its end.
    auto cut = exifTiff(6);
    cut.resize(20);
    auto astray = exifTiff(6);
    astray[4] = 0xF0;  // the IFD offset past the end
    for (const auto& [name, tiff] : {std::pair{std::string("exif9.jpg"), exifTiff(9)}, {std::string("exif0.jpg"), exifTiff(0)},
             {std::string("exif-two.jpg"), exifTiff(6, 2)}, {std::string("exif-cut.png"), cut}, {std::string("exif-astray.png"), astray},
             {std::string("exif9.png"), exifTiff(9)}}) {
        const bool isPng = name.ends_with(".png");
        auto r = media::readImage(writeFile(name, isPng ? pngWithExif(png, tiff) : jpegWithExif(jpeg, tiff)));
        VT_CHECK_MSG(r.ok(), name + ": " + (r.ok() ? "" : r.error().message));
        if (r.ok()) {
            std::printf("    %s: %dx%d, corners %s\n", name.c_str(), r->width, r->height, corners(*r).c_str());
            VT_COMPARE(corners(*r), std::string("RGBW"));
        }
    }
}

VT_TEST(damagedAndForeignFilesAreRefusedWithTheirName)
{
    const auto im = smooth(64, 48);
    const auto png = encodeStill("png", "rgb24", im);
    const auto jpg = encodeStill("mjpeg", "yuvj420p", im);
    std::mt19937 random(3);
    std::vector<std::uint8_t> noise(5000);
    for (auto& b : noise)
        b = static_cast<std::uint8_t>(random());
    expectRefused(writeFile("noise.png", noise), "not an image FFmpeg can decode");
    expectRefused(
        writeFile("half.png", {png.begin(), png.begin() + static_cast<std::ptrdiff_t>(png.size() / 2)}), "not an image FFmpeg can decode");
    expectRefused(writeFile("header-only.png", {png.begin(), png.begin() + 40}), "not an image FFmpeg can decode");
    expectRefused(
        writeFile("half.jpg", {jpg.begin(), jpg.begin() + static_cast<std::ptrdiff_t>(jpg.size() / 2)}), "not an image FFmpeg can decode");
    // A TIFF is read without the decoder's strictness about tags it does not know, and a strip
    // cut short is refused all the same.
    const auto tiff = tiffWithOrientation(im, 1);
    expectRefused(writeFile("half.tif", {tiff.begin(), tiff.begin() + static_cast<std::ptrdiff_t>(tiff.size() / 2)}),
        "not an image FFmpeg can decode");
    // A flipped bit inside the pixel data: the PNG's CRC says so.
    auto flipped = png;
    flipped[flipped.size() - 30] ^= 0x10;
    expectRefused(writeFile("flipped.png", flipped), "not an image FFmpeg can decode");
    // HEIF (an iPhone's HEIC, or AVIF): said what it is and what to do.
    for (const auto& [name, brands] : {std::pair{std::string("photo.heic"), std::string("heic\0\0\0\0mif1heic", 16)},
             std::pair{std::string("photo.avif"), std::string("avif\0\0\0\0mif1miaf", 16)},
             std::pair{std::string("renamed.jpg"), std::string("mif1\0\0\0\0heicmiaf", 16)}}) {
        std::vector<std::uint8_t> heif{0, 0, 0, 24, 'f', 't', 'y', 'p'};
        heif.insert(heif.end(), brands.begin(), brands.end());
        heif.resize(600, 0x11);
        expectRefused(writeFile(name, heif), "is a HEIF picture");
    }
    const std::string text = "# not a picture\nhello\n";
    expectRefused(writeFile("notes.png", {text.begin(), text.end()}), "not an image FFmpeg can decode");
    expectRefused(writeFile("empty.png", {}), "empty");
    expectRefused(tempDir() / "absent.png", "no such file");
    expectRefused(tempDir(), "not a file");
    // A video is not a still.
    {
        const auto clip = (tempDir() / "clip.mp4").string();
        auto w = media::Mp4Writer::open(clip, {64, 48, 24.0}, std::nullopt, {});
        VT_CHECK(w.ok());
        for (int f = 0; f < 3; ++f)
            VT_CHECK((*w)->writeFrame(im.rgb.data(), 64 * 3).ok());
        VT_CHECK((*w)->finish().ok());
        expectRefused(clip, "not a picture");
    }
    // Over the pixel limit: refused, also when the header lies about a huge size.
    expectRefused(writeFile("big.png", png), "pixels", 1000);
    // IHDR claims 16000 x 16000 (with a correct CRC): refused before 1 GB is allocated.
    auto huge = png;
    const std::uint8_t side[4] = {0x00, 0x00, 0x3E, 0x80};
    std::copy(side, side + 4, huge.begin() + 16);
    std::copy(side, side + 4, huge.begin() + 20);
    const auto crc = crc32(huge.data() + 12, 17);  // "IHDR" and its 13 bytes
    for (int i = 0; i < 4; ++i)
        huge[29 + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(crc >> (24 - 8 * i));
    expectRefused(writeFile("huge.png", huge), "more than " + std::to_string(media::kMaxImagePixels) + " pixels");
}

VT_TEST(fitToSizeCoversAndCropsTheCentre)
{
    // Three vertical bands, red | green | blue, 3:1: a square keeps the green middle.
    media::RgbImage bands{300, 100, {}};
    for (int y = 0; y < 100; ++y)
        for (int x = 0; x < 300; ++x)
            bands.rgb.insert(bands.rgb.end(),
                {static_cast<std::uint8_t>(x < 100 ? 255 : 0), static_cast<std::uint8_t>(x >= 100 && x < 200 ? 255 : 0),
                    static_cast<std::uint8_t>(x >= 200 ? 255 : 0)});
    for (const int side : {50, 100, 160}) {  // shrinking, the crop's own size, enlarging
        const auto out = media::fitToSize(bands, side, side);
        VT_COMPARE(out.width, side);
        VT_COMPARE(out.height, side);
        VT_COMPARE(out.rgb.size(), static_cast<std::size_t>(side) * side * 3);
        // The inner columns are pure green; only the border columns may blend with neighbours.
        int off = 0;
        for (int y = 0; y < side; ++y)
            for (int x = 2; x < side - 2; ++x) {
                const auto* p = &out.rgb[(static_cast<std::size_t>(y) * side + x) * 3];
                off += p[0] > 3 || p[1] < 252 || p[2] > 3;
            }
        VT_CHECK_MSG(off == 0, std::to_string(off) + " pixels are not the green centre at " + std::to_string(side));
    }
    // Portrait into landscape: the middle rows, never a squashed picture.
    media::RgbImage rows{90, 270, {}};
    for (int y = 0; y < 270; ++y)
        for (int x = 0; x < 90; ++x)
            rows.rgb.insert(rows.rgb.end(),
                {static_cast<std::uint8_t>(y < 112 ? 200 : 10), static_cast<std::uint8_t>(y >= 112 && y < 158 ? 200 : 10),
                    static_cast<std::uint8_t>(y >= 158 ? 200 : 10)});
    const auto wide = media::fitToSize(rows, 192, 96);  // 2:1, the crop is rows 112..157
    VT_COMPARE(wide.width, 192);
    VT_COMPARE(wide.height, 96);
    const auto* centre = &wide.rgb[(48 * 192 + 96) * 3];
    VT_CHECK_MSG(centre[1] > 190 && centre[0] < 20 && centre[2] < 20, "the centre is not the middle band");
    // Flat colour stays the same colour through both filters.
    for (const auto& [w, h] : {std::pair{33, 17}, std::pair{640, 480}}) {
        const auto out = media::fitToSize(flat(160, 120, 12, 200, 99), w, h);
        int worst = 0;
        for (std::size_t i = 0; i < out.rgb.size(); i += 3)
            worst = std::max({worst, std::abs(out.rgb[i] - 12), std::abs(out.rgb[i + 1] - 200), std::abs(out.rgb[i + 2] - 99)});
        VT_CHECK_MSG(worst <= 1, "flat colour changed by " + std::to_string(worst) + " at " + std::to_string(w) + "x" + std::to_string(h));
    }
    // Scaled down and back, smooth content survives (the filter is not nearest-neighbour).
    const auto im = smooth(256, 192);
    const auto back = media::fitToSize(media::fitToSize(im, 128, 96), 256, 192);
    std::printf("    smooth 256x192 -> 128x96 -> 256x192: PSNR %.1f dB\n", psnr(back, im));
    VT_CHECK(psnr(back, im) > 33);
    VT_CHECK(media::fitToSize(im, 0, 10).rgb.empty());
    VT_CHECK(media::fitToSize(media::RgbImage{}, 10, 10).rgb.empty());
}

VT_TEST(h264RecompressionIsSlightAndCrfZeroIsIdentity)
{
    const auto im = smooth(96, 64);
    auto same = media::recompressH264(im, 0);
    VT_CHECK(same.ok() && same->rgb == im.rgb && same->width == 96);
    auto r = media::recompressH264(im, media::kLtxConditionCrf);
    VT_CHECK_MSG(r.ok(), r.error().message);
    VT_COMPARE(r->width, 96);
    VT_COMPARE(r->height, 64);
    const double p = psnr(*r, im);
    std::printf("    CRF %d: PSNR %.2f dB against the original\n", media::kLtxConditionCrf, p);
    VT_CHECK_MSG(r->rgb != im.rgb, "CRF 33 left every pixel as it was");
    VT_CHECK_MSG(p > 28, "PSNR " + std::to_string(p));
    // A higher CRF loses more; the same input gives the same output.
    auto worse = media::recompressH264(im, 51);
    VT_CHECK(worse.ok() && psnr(*worse, im) < p);
    auto again = media::recompressH264(im, media::kLtxConditionCrf);
    VT_CHECK(again.ok() && again->rgb == r->rgb);
    // Odd sides lose their last row and column, as the reference's crop does.
    auto odd = media::recompressH264(smooth(97, 65), media::kLtxConditionCrf);
    VT_CHECK(odd.ok() && odd->width == 96 && odd->height == 64);
    VT_CHECK(!media::recompressH264(im, 52).ok());
    VT_CHECK(!media::recompressH264(im, -1).ok());
    VT_CHECK(!media::recompressH264(media::RgbImage{1, 1, {1, 2, 3}}, 33).ok());
}

VT_TEST(clipFramesAreTheFirstOnes)
{
    const auto clip = (tempDir() / "moving.mp4").string();
    {
        auto w = media::Mp4Writer::open(clip, {64, 48, 24.0, 10}, std::nullopt, {});
        VT_CHECK(w.ok());
        for (int f = 0; f < 9; ++f) {
            const auto im = flat(64, 48, static_cast<std::uint8_t>(20 * f + 20), 100, 100);
            VT_CHECK((*w)->writeFrame(im.rgb.data(), 64 * 3).ok());
        }
        VT_CHECK((*w)->finish().ok());
    }
    auto frames = media::readClipFrames(clip, 5);
    VT_CHECK_MSG(frames.ok(), frames.error().message);
    VT_COMPARE(frames->size(), std::size_t(5));
    for (int f = 0; f < 5; ++f) {
        const auto& fr = (*frames)[static_cast<std::size_t>(f)];
        VT_CHECK(fr.width == 64 && fr.height == 48);
        const int red = fr.rgb[(24 * 64 + 32) * 3];
        VT_CHECK_MSG(std::abs(red - (20 * f + 20)) <= 6, "frame " + std::to_string(f) + " red " + std::to_string(red));
    }
    auto fitted = media::readClipFrames(clip, 9, 32, 32);
    VT_CHECK(fitted.ok() && fitted->size() == 9 && fitted->back().width == 32 && fitted->back().height == 32);
    auto tooMany = media::readClipFrames(clip, 17);
    VT_CHECK(!tooMany.ok() && tooMany.error().message.find(clip) != std::string::npos
        && tooMany.error().message.find("has 9 decodable frames") != std::string::npos);
    auto notAClip = media::readClipFrames(tempDir() / "absent.mp4", 1);
    VT_CHECK(!notAClip.ok() && notAClip.error().message.find("absent.mp4") != std::string::npos);
    // From the end: the last ones (a clip shorter than the seek margin is read from its start).
    auto last = media::readClipFrames(clip, 5, 0, 0, media::kMaxImagePixels, true);
    VT_CHECK_MSG(last.ok(), last.error().message);
    VT_COMPARE(last->size(), std::size_t(5));
    for (int f = 0; f < 5; ++f) {
        const int red = (*last)[static_cast<std::size_t>(f)].rgb[(24 * 64 + 32) * 3];
        VT_CHECK_MSG(std::abs(red - (20 * (f + 4) + 20)) <= 6, "last frame " + std::to_string(f) + " red " + std::to_string(red));
    }
    auto lastTooMany = media::readClipFrames(clip, 17, 0, 0, media::kMaxImagePixels, true);
    VT_CHECK(!lastTooMany.ok() && lastTooMany.error().message.find("has 9 decodable frames") != std::string::npos);
}

// The last frames of a five-second clip with a key frame every half second: read from a key
// frame near the end, they are exactly the last ones, in order.
VT_TEST(clipFramesFromTheEndOfALongerClip)
{
    const int frames = 120;
    const auto raw = tempDir() / "ramp.rgb";
    {
        std::ofstream out(raw, std::ios::binary);
        for (int f = 0; f < frames; ++f) {
            const auto im = flat(64, 48, static_cast<std::uint8_t>(2 * f), 100, 100);
            out.write(reinterpret_cast<const char*>(im.rgb.data()), static_cast<std::streamsize>(im.rgb.size()));
        }
    }
    const auto clip = tempDir() / "ramp.mp4";
    const std::string command = "ffmpeg -nostdin -v error -y -f rawvideo -pix_fmt rgb24 -s 64x48 -r 24 -i '" + raw.string()
        + "' -c:v libx264 -g 12 -crf 8 -pix_fmt yuv444p '" + clip.string() + "'";
    VT_CHECK_MSG(std::system(command.c_str()) == 0, command);
    auto last = media::readClipFrames(clip, 9, 0, 0, media::kMaxImagePixels, true);
    VT_CHECK_MSG(last.ok(), last.error().message);
    VT_COMPARE(last->size(), std::size_t(9));
    std::string reds;
    bool ok = true;
    for (int i = 0; i < 9; ++i) {
        const int red = (*last)[static_cast<std::size_t>(i)].rgb[(24 * 64 + 32) * 3];
        reds += std::to_string(red) + " ";
        ok = ok && std::abs(red - 2 * (frames - 9 + i)) <= 5;
    }
    std::printf("    the last 9 of %d frames: red %s(expected %d to %d)\n", frames, reds.c_str(), 2 * (frames - 9), 2 * (frames - 1));
    VT_CHECK_MSG(ok, reds);
    // Fitted as the engine asks for them, and the first ones unchanged by any of this.
    auto fitted = media::readClipFrames(clip, 9, 32, 32, media::kMaxImagePixels, true);
    VT_CHECK(fitted.ok() && fitted->size() == 9 && fitted->front().width == 32);
    auto first = media::readClipFrames(clip, 9);
    VT_CHECK(first.ok() && std::abs(static_cast<int>(first->front().rgb[(24 * 64 + 32) * 3]) - 0) <= 5);

    // Cut short (an unfinished download of a file whose index comes first): its first frames
    // still serve, but its last decodable ones are not its end, and are refused as such.
    const auto indexed = tempDir() / "ramp-faststart.mp4";
    const std::string remux =
        "ffmpeg -nostdin -v error -y -i '" + clip.string() + "' -c copy -movflags +faststart '" + indexed.string() + "'";
    VT_CHECK_MSG(std::system(remux.c_str()) == 0, remux);
    std::ifstream in(indexed, std::ios::binary);
    const std::vector<char> whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto cut = tempDir() / "ramp-cut.mp4";
    std::ofstream(cut, std::ios::binary).write(whole.data(), static_cast<std::streamsize>(whole.size() * 6 / 10));
    auto cutFirst = media::readClipFrames(cut, 9);
    VT_CHECK_MSG(cutFirst.ok(), cutFirst.error().message);
    for (const int count : {9, 1}) {
        auto cutLast = media::readClipFrames(cut, count, 0, 0, media::kMaxImagePixels, true);
        VT_CHECK_MSG(!cutLast.ok(), "the last frames of a cut file were taken");
        if (!cutLast.ok()) {
            std::printf("    %s\n", cutLast.error().message.c_str());
            VT_CHECK(cutLast.error().code == ErrorCode::Truncated && cutLast.error().message.find(cut.string()) != std::string::npos
                && cutLast.error().message.find("cut short") != std::string::npos);
        }
    }
}

// A phone records a portrait clip sideways and puts the turn in the container's display matrix:
// its frames come out as the ffmpeg program shows them (autorotation, as imageio-ffmpeg behind
// diffusers' load_video gets them), for clip conditions, thumbnails and the probed size.
VT_TEST(turnedClipsComeOutAsTheFfmpegProgramShowsThem)
{
    const auto base = tempDir() / "upright.mp4";
    {
        auto w = media::Mp4Writer::open(base.string(), {64, 32, 24.0, 0}, std::nullopt, {});
        VT_CHECK(w.ok());
        const auto im = quadrants();
        for (int f = 0; f < 9; ++f)
            VT_CHECK((*w)->writeFrame(im.rgb.data(), 64 * 3).ok());
        VT_CHECK((*w)->finish().ok());
    }
    for (const int rotate : {0, 90, 180, 270}) {
        const auto turned = tempDir() / ("turned" + std::to_string(rotate) + ".mp4");
        const auto ppm = tempDir() / ("turned" + std::to_string(rotate) + ".ppm");
        const std::string remux = "ffmpeg -nostdin -v error -y -i '" + base.string()
            + "' -c copy -metadata:s:v:0 rotate=" + std::to_string(rotate) + " '" + turned.string() + "'";
        const std::string shown =
            "ffmpeg -nostdin -v error -y -i '" + turned.string() + "' -frames:v 1 -c:v ppm -f image2 -update 1 '" + ppm.string() + "'";
        VT_CHECK_MSG(std::system(remux.c_str()) == 0 && std::system(shown.c_str()) == 0, remux);
        // The program's picture: a binary PPM (P6, width, height, 255, then RGB).
        std::ifstream in(ppm, std::ios::binary);
        std::string magic;
        int width = 0, height = 0, maxValue = 0;
        in >> magic >> width >> height >> maxValue;
        in.get();
        media::RgbImage expected{width, height, std::vector<std::uint8_t>(static_cast<std::size_t>(std::max(0, width * height * 3)))};
        in.read(reinterpret_cast<char*>(expected.rgb.data()), static_cast<std::streamsize>(expected.rgb.size()));
        VT_CHECK_MSG(magic == "P6" && maxValue == 255 && in, ppm.string());
        auto frames = media::readClipFrames(turned, 1);
        auto thumb = media::frameAt(turned, 0, 16);
        auto info = media::probeMedia(turned);
        VT_CHECK_MSG(frames.ok() && thumb.ok() && info.ok(),
            (frames.ok() ? (thumb.ok() ? info.error().message : thumb.error().message) : frames.error().message));
        if (!frames.ok() || !thumb.ok() || !info.ok())
            continue;
        const auto& got = frames->front();
        std::printf("    rotate=%d: the program shows %dx%d %s; Vireo reads %dx%d %s, probes %dx%d, thumbnail %dx%d\n", rotate, width,
            height, corners(expected).c_str(), got.width, got.height, corners(got).c_str(), info->width, info->height, thumb->width,
            thumb->height);
        VT_COMPARE(got.width, width);
        VT_COMPARE(got.height, height);
        VT_COMPARE(corners(got), corners(expected));
        VT_CHECK_MSG(psnr(got, expected) > 24, "PSNR " << psnr(got, expected));
        VT_CHECK(info->width == width && info->height == height);
        // The thumbnail's width is bounded as displayed; it is turned the same way.
        VT_COMPARE(thumb->width, 16);
        VT_COMPARE(thumb->height, 16 * height / width);
        if (rotate == 90 || rotate == 270)
            VT_CHECK_MSG(width == 32 && height == 64, "the program did not turn the clip: the test says nothing");
    }
}

namespace {

// A PNG chunk (length, type, data, CRC) as a PNG file carries it.
std::vector<std::uint8_t> pngChunk(const char* type, const std::vector<std::uint8_t>& data)
{
    std::vector<std::uint8_t> c;
    const auto n = static_cast<std::uint32_t>(data.size());
    for (int i = 3; i >= 0; --i)
        c.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
    c.insert(c.end(), type, type + 4);
    c.insert(c.end(), data.begin(), data.end());
    const auto crc = crc32(c.data() + 4, c.size() - 4);
    for (int i = 3; i >= 0; --i)
        c.push_back(static_cast<std::uint8_t>(crc >> (8 * i)));
    return c;
}

// zlib data that inflates to `bytes` zeros, made a megabyte at a time (the test itself never
// holds the inflated size).
std::vector<std::uint8_t> zlibBomb(std::int64_t bytes)
{
    z_stream z{};
    VT_CHECK(deflateInit(&z, Z_BEST_COMPRESSION) == Z_OK);
    std::vector<std::uint8_t> zeros(1 << 20, 0), out, chunk(1 << 16);
    for (std::int64_t done = 0; done < bytes; done += static_cast<std::int64_t>(zeros.size())) {
        z.next_in = zeros.data();
        z.avail_in = static_cast<uInt>(zeros.size());
        const int flush = done + static_cast<std::int64_t>(zeros.size()) >= bytes ? Z_FINISH : Z_NO_FLUSH;
        do {
            z.next_out = chunk.data();
            z.avail_out = static_cast<uInt>(chunk.size());
            deflate(&z, flush);
            out.insert(out.end(), chunk.data(), chunk.data() + (chunk.size() - z.avail_out));
        } while (z.avail_out == 0);
    }
    deflateEnd(&z);
    return out;
}

long peakRssMiB()
{
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_maxrss / 1024;
}

}  // namespace

// A PNG whose compressed text (zTXt, iTXt) or ICC profile (iCCP) inflates to a gigabyte: FFmpeg
// inflates those into metadata without a limit, so they never reach it. The picture decodes as
// it does without them, and the process never holds the inflated gigabyte.
VT_TEST(pngTextAndProfileBombsAreNotInflated)
{
    const auto im = smooth(64, 48);
    const auto png = encodeStill("png", "rgb24", im);
    VT_CHECK(png.size() > 33);
    auto plain = media::readImage(writeFile("plain.png", png));
    VT_CHECK(plain.ok());
    // The encoder's own PNG, as the reader passes it on (ffmpeg may write a text chunk of its own).
    auto base = png;
    const int own = media::stripInflatablePngChunks(base);
    const auto bomb = zlibBomb(1ll << 30);
    std::printf("    1 GiB of zeros deflates to %zu bytes\n", bomb.size());
    for (const char* type : {"zTXt", "iTXt", "iCCP"}) {
        std::vector<std::uint8_t> data;
        const std::string keyword = std::string(type) == "iCCP" ? "ICC profile" : "Comment";
        data.insert(data.end(), keyword.begin(), keyword.end());
        data.push_back(0);
        if (std::string(type) == "iTXt")
            data.insert(data.end(), {1, 0, 0, 0});  // compressed, method 0, no language, no translated keyword
        else
            data.push_back(0);  // compression method 0
        data.insert(data.end(), bomb.begin(), bomb.end());
        auto file = std::vector<std::uint8_t>(png.begin(), png.begin() + 33);  // signature and IHDR
        const auto chunk = pngChunk(type, data);
        file.insert(file.end(), chunk.begin(), chunk.end());
        file.insert(file.end(), png.begin() + 33, png.end());
        auto stripped = file;
        VT_COMPARE(media::stripInflatablePngChunks(stripped), 1 + own);
        VT_CHECK(stripped == (own ? base : png));
        const auto before = peakRssMiB();
        auto r = media::readImage(writeFile(std::string("bomb-") + type + ".png", file));
        const auto after = peakRssMiB();
        std::printf("    %s bomb: %s, peak RSS %ld -> %ld MiB\n", type, r.ok() ? "decoded" : r.error().message.c_str(), before, after);
        VT_CHECK_MSG(r.ok() && r->rgb == plain->rgb, type);
        VT_CHECK_MSG(after < 768, type << " took the process to " << after << " MiB");
    }
    // Not a PNG, or a chunk list that runs past the end: left as it is, for the decoder to judge.
    std::vector<std::uint8_t> other(png.begin(), png.begin() + 40);
    VT_COMPARE(media::stripInflatablePngChunks(other), 0);
    VT_CHECK(other == std::vector<std::uint8_t>(png.begin(), png.begin() + 40));
}

// Pictures whose headers declare more than the pixel limit are refused as too large, from the
// header, in every format, not as "damaged".
VT_TEST(overlargeHeadersAreRefusedAsTooLarge)
{
    const auto im = smooth(64, 48);
    const std::string limit = "more than " + std::to_string(media::kMaxImagePixels) + " pixels";
    // JPEG: the frame header's height and width.
    auto jpg = encodeStill("mjpeg", "yuvj420p", im);
    for (std::size_t i = 2; i + 9 < jpg.size(); ++i)
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
            for (std::size_t k : {i + 5, i + 7}) {
                jpg[k] = 0x7B;  // 31623 = 0x7B87
                jpg[k + 1] = 0x87;
            }
            break;
        }
    const auto declared = media::declaredImageSize(jpg);
    VT_CHECK(declared && declared->width == 31623 && declared->height == 31623 && declared->format == "JPEG");
    expectRefused(writeFile("huge.jpg", jpg), limit);
    // WebP, lossless (VP8L: 14-bit sizes minus one) and lossy (VP8: 14-bit sizes).
    auto riff = [](const char* chunk, const std::vector<std::uint8_t>& payload) {
        std::vector<std::uint8_t> b{'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P'};
        b.insert(b.end(), chunk, chunk + 4);
        const auto n = static_cast<std::uint32_t>(payload.size());
        b.insert(b.end(), {static_cast<std::uint8_t>(n), static_cast<std::uint8_t>(n >> 8), static_cast<std::uint8_t>(n >> 16), 0});
        b.insert(b.end(), payload.begin(), payload.end());
        const auto total = static_cast<std::uint32_t>(b.size() - 8);
        for (int i = 0; i < 4; ++i)
            b[4 + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(total >> (8 * i));
        return b;
    };
    const std::uint32_t bits = 16383u | (16383u << 14);  // 16384 x 16384
    std::vector<std::uint8_t> lossless{0x2F, static_cast<std::uint8_t>(bits), static_cast<std::uint8_t>(bits >> 8),
        static_cast<std::uint8_t>(bits >> 16), static_cast<std::uint8_t>(bits >> 24)};
    lossless.resize(64, 0);
    expectRefused(writeFile("huge-lossless.webp", riff("VP8L", lossless)), limit);
    std::vector<std::uint8_t> lossy{0x10, 0x02, 0x00, 0x9D, 0x01, 0x2A, 0xFF, 0x3F, 0xFF, 0x3F};  // 16383 x 16383
    lossy.resize(64, 0);
    expectRefused(writeFile("huge-lossy.webp", riff("VP8 ", lossy)), limit);
    auto webp = media::declaredImageSize(riff("VP8 ", lossy));
    VT_CHECK(webp && webp->width == 16383 && webp->height == 16383);
    // Truncated headers say nothing, and nothing is read past their end.
    for (std::size_t n = 0; n < 30; ++n) {
        const std::vector<std::uint8_t> part(jpg.begin(), jpg.begin() + static_cast<std::ptrdiff_t>(std::min(n, jpg.size())));
        (void)media::declaredImageSize(part);
    }
}

// Extending a clip that declares no length: its end is found by decoding, which is bounded, and
// only the frames kept are converted.
VT_TEST(clipsWithoutADurationAreReadFromTheEndWithinBounds)
{
    auto make = [](const char* name, int frames) {
        const auto path = tempDir() / name;
        // Written to a pipe, the Matroska muxer cannot go back to write the duration.
        const std::string command = "ffmpeg -nostdin -v error -y -f lavfi -i 'testsrc=size=32x32:rate=1000' -frames:v "
            + std::to_string(frames) + " -c:v mpeg4 -q:v 8 -g 250 -f matroska pipe:1 > '" + path.string() + "'";
        VT_CHECK_MSG(std::system(command.c_str()) == 0, command);
        return path;
    };
    const auto shortClip = make("nodur-short.mkv", 2000);
    auto info = media::probeMedia(shortClip);
    VT_CHECK(info.ok());
    std::printf("    %s: duration %.3f s\n", shortClip.filename().c_str(), info->durationSeconds);
    auto last = media::readClipFrames(shortClip, 9, 32, 32, media::kMaxImagePixels, true);
    VT_CHECK_MSG(last.ok(), last.error().message);
    VT_COMPARE(last->size(), std::size_t(9));
    const auto longClip = make("nodur-long.mkv", 40000);
    auto refused = media::readClipFrames(longClip, 9, 32, 32, media::kMaxImagePixels, true);
    VT_CHECK(!refused.ok());
    if (!refused.ok()) {
        std::printf("    %s\n", refused.error().message.c_str());
        VT_CHECK(refused.error().message.find("declares no duration") != std::string::npos
            && refused.error().message.find(longClip.string()) != std::string::npos);
    }
    // Its first frames still serve.
    VT_CHECK(media::readClipFrames(longClip, 9, 32, 32).ok());
}

VT_MAIN("TestImageIo")
