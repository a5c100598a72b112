#pragma once

#include "inference/util/result.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace vireo::media {

struct VideoStreamSpec {
    int width = 0, height = 0;  // even numbers (4:2:0)
    double fps = 24.0;
    int crf = 18;  // x264 quality: lower is better
    std::string preset = "medium";
    // Bit-exact RGB instead (x264's RGB 4:4:4 at QP 0): what decodes is what was written, for
    // frames kept to make an output again. Larger files; any frame size.
    bool lossless = false;
};

struct AudioStreamSpec {
    int sampleRate = 48000;
    int channels = 2;
    std::int64_t bitRate = 192000;
};

// Writes an MP4 with H.264 video and AAC audio through libavformat/libavcodec (never the
// ffmpeg program). The file is written under a temporary name next to the target and moved
// into place by finish(), so an interrupted or failed write never leaves a truncated file
// where the user expects a video, and never replaces an existing one.
// Moves a finished file into place, never over an existing one: 0 or an errno (EEXIST when
// the name is taken). Atomic where the filesystem allows (RENAME_NOREPLACE, else a hard
// link); FAT-like volumes have neither and get a check right before the rename.
int moveWithoutReplacing(const std::filesystem::path& from, const std::filesystem::path& to);
// The hidden name an output is written under before it is moved into place:
// "<folder>/.<name>.part<pid>-<n>", unique within the process (two engines may write the same
// name at once) and naming the writer's process, so a later run can tell a partial file whose
// writer is gone (output::removeStalePartials) from one still being written.
std::filesystem::path partialPath(const std::filesystem::path& path);

class Mp4Writer {
public:
    ~Mp4Writer();
    // metadata: container tags (written as MP4 tags ffprobe reads, e.g. "comment", "title",
    // and custom keys such as "vireo_recipe").
    static Result<std::unique_ptr<Mp4Writer>> open(const std::filesystem::path& path, const VideoStreamSpec& video,
        const std::optional<AudioStreamSpec>& audio, const std::map<std::string, std::string>& metadata);

    // One frame, packed RGB24 rows of `strideBytes`.
    Result<void> writeFrame(const std::uint8_t* rgb, std::int64_t strideBytes);
    // Planar float samples in [-1, 1]: channel c at planes[c], `samples` per channel.
    Result<void> writeAudio(const float* const* planes, std::int64_t samples);
    // Flushes the encoders, writes the trailer and moves the file into place.
    Result<void> finish();

    std::int64_t framesWritten() const;

private:
    struct Impl;
    explicit Mp4Writer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::media
