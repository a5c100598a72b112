// libFuzzer target: a file given as a start image, a clip to continue or the audio to follow,
// from whoever made it (a download, a message attachment). The header readers must never read past the bytes or
// trust a size; the still reader and the clip reader (from the start and from the end) must
// refuse what they cannot read with an error, within the fuzzer's time and memory limits
// (FFmpeg's own inflate of PNG text chunks, frame counts and packet counts bounded first).
#include "media/imageheader.h"
#include "media/mediareader.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    const std::vector<std::uint8_t> bytes(data, data + size);
    if (const auto d = vireo::media::declaredImageSize(bytes); d && (d->width < 0 || d->height < 0))
        __builtin_trap();
    auto stripped = bytes;
    const int removed = vireo::media::stripInflatablePngChunks(stripped);
    if (removed < 0 || (removed == 0 && stripped != bytes) || stripped.size() > bytes.size())
        __builtin_trap();

    // The readers take files: one per process, under the fuzzer's TMPDIR.
    const char* tmp = std::getenv("TMPDIR");
    static const std::filesystem::path path =
        std::filesystem::path(tmp && *tmp ? tmp : "/tmp") / ("vireo-fuzz-media-" + std::to_string(::getpid()));
    if (FILE* f = std::fopen(path.c_str(), "wb")) {
        if (size)
            std::fwrite(data, 1, size, f);
        std::fclose(f);
    } else {
        return 0;
    }
    // Small limits, so a header declaring a big picture is refused rather than decoded slowly.
    constexpr std::int64_t kPixels = 512 * 512;
    if (auto image = vireo::media::readImage(path, kPixels); image && image->rgb.size() != std::size_t(image->width) * image->height * 3)
        __builtin_trap();
    for (const bool fromEnd : {false, true})
        if (auto frames = vireo::media::readClipFrames(path, 9, 32, 32, kPixels, fromEnd))
            for (const auto& f : *frames)
                if (f.width != 32 || f.height != 32 || f.rgb.size() != 32 * 32 * 3)
                    __builtin_trap();
    (void)vireo::media::probeMedia(path);
    // The user's audio for audio-to-video: every channel as long as the others, samples in
    // [-1, 1], at most the limit asked for (plus the second a decoder's last frame may add).
    if (auto audio = vireo::media::readAudio(path, 5)) {
        if (audio->channels.empty() || audio->channels.size() > 2 || audio->sampleRate <= 0 || audio->seconds() > 6.5)
            __builtin_trap();
        for (const auto& c : audio->channels) {
            if (c.size() != audio->channels.front().size())
                __builtin_trap();
            for (const float v : c)
                if (!(v >= -1.0f && v <= 1.0f))
                    __builtin_trap();
        }
    }
    std::remove(path.c_str());
    return 0;
}
