#pragma once

// Reading outputs back through the FFmpeg libraries: what a video file holds (streams, size,
// duration, container tags such as the recipe) and a frame at a given time, for gallery
// thumbnails and re-import. Files are treated as hostile: a damaged or truncated file gives
// an error naming it, never a crash.

#include "inference/util/result.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace vireo::media {

struct MediaInfo {
    bool hasVideo = false, hasAudio = false;
    int width = 0, height = 0;
    double fps = 0;
    double durationSeconds = 0;
    std::int64_t frames = 0;  // from the stream header when known, else duration x fps
    std::string videoCodec, audioCodec;
    int sampleRate = 0, channels = 0;
    std::string container;  // the demuxer's name ("mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm", "avi", ...)
    std::map<std::string, std::string> tags;  // container metadata ("comment", "vireo_recipe", ...)
    std::string damage;  // why the file is incomplete (an MP4 cut short); empty when whole
};

Result<MediaInfo> probeMedia(const std::filesystem::path& path);

struct RgbImage {
    int width = 0, height = 0;
    std::vector<std::uint8_t> rgb;  // height x width x 3
};

// The first frame at or after `seconds` (clamped to the stream), scaled so its width is at
// most maxWidth (aspect kept, even sizes). Frames of videos, here and in readClipFrames, come
// out as displayed: a turn or mirror in the stream's display matrix (a phone's portrait clip)
// is applied, as the ffmpeg program's autorotation does; MediaInfo's size is the displayed one.
Result<RgbImage> frameAt(const std::filesystem::path& path, double seconds, int maxWidth);

// The largest picture readImage and readClipFrames decode unless told otherwise (8192 x 8192).
inline constexpr std::int64_t kMaxImagePixels = 8192ll * 8192;
// The largest still file readImage reads (it is decoded from memory).
inline constexpr std::int64_t kMaxImageFileBytes = 256ll << 20;

// A still picture as RGB24: PNG, JPEG, WebP, BMP, TIFF, the first frame of a GIF, whatever
// FFmpeg's image demuxers read. The file is read into memory and decoded from there (no
// protocol, no file-name pattern), a picture over maxPixels is refused before its pixels are
// allocated, and the alpha channel, if any, is dropped (as PIL's convert("RGB") does). A
// picture whose EXIF orientation tag says it is stored turned or mirrored (JPEG, WebP, a PNG's
// eXIf chunk; a phone's portrait photo) comes out upright, as diffusers' load_image makes it
// (exifUpright).
Result<RgbImage> readImage(const std::filesystem::path& path, std::int64_t maxPixels = kMaxImagePixels);

// The first `count` frames of a video (conditioning clips) as RGB24: at the stream's size, or
// each fitted to fitWidth x fitHeight as it is decoded (fitToSize) when both are given.
// Fewer frames than asked, or frames that change size, are an error naming the file.
// fromEnd: the last `count` frames instead (to extend a clip from where it ends); the whole
// stream is decoded, keeping only those. A file cut short near its end (its container stops in
// an error, a frame does not decode, or its frames end over two frames before the duration its
// header declares) is then an error (Truncated): its last decodable frames are not its end.
Result<std::vector<RgbImage>> readClipFrames(const std::filesystem::path& path, int count, int fitWidth = 0, int fitHeight = 0,
    std::int64_t maxPixels = kMaxImagePixels, bool fromEnd = false);

// An audio track as float samples in [-1, 1], one vector per channel, at the file's own rate.
struct AudioSamples {
    int sampleRate = 0;
    std::vector<std::vector<float>> channels;  // all the same length
    std::string codec;
    // What was changed on the way (a track of more than two channels: its first two kept),
    // said to the user, never silent.
    std::string note;
    std::int64_t frames() const { return channels.empty() ? 0 : static_cast<std::int64_t>(channels.front().size()); }
    double seconds() const { return sampleRate > 0 ? static_cast<double>(frames()) / sampleRate : 0; }
};

// The longest audio readAudio decodes unless told otherwise (20 minutes).
inline constexpr double kMaxAudioSeconds = 20 * 60;

// The audio of a file: WAV, AIFF, FLAC, MP3, AAC or ALAC in M4A, Ogg Vorbis or Opus, or the
// soundtrack of a video (its first audio stream), decoded to float. Mono and stereo come out as they are; a
// track of more channels keeps its first two (front left and right) and says so in `note`.
// Refused with the file's name and the reason: no audio stream, a codec this build does not
// decode, a track the container says is longer than maxSeconds (before anything is decoded),
// more samples than that while decoding (a container that lies), a file with no samples.
Result<AudioSamples> readAudio(const std::filesystem::path& path, double maxSeconds = kMaxAudioSeconds);

}  // namespace vireo::media
