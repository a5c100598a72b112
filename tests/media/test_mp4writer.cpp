// The MP4 writer through the FFmpeg libraries, checked by ffprobe: both streams, their codecs,
// the frame count, the duration and the recipe in the container metadata.
#include "tests/harness/vireotest.h"

#include "media/mp4writer.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <sys/mount.h>
#include <dirent.h>
#include <unistd.h>
#include <vector>

using namespace vireo;

namespace {

std::string tempPath(const char* name)
{
    return "/tmp/vireo_mp4_" + std::to_string(::getpid()) + "_" + name;
}

nlohmann::json probe(const std::string& path)
{
    const std::string command = "ffprobe -v error -count_frames -show_streams -show_format -of json '" + path + "'";
    FILE* pipe = ::popen(command.c_str(), "r");
    std::string out;
    char buffer[4096];
    while (pipe && std::fgets(buffer, sizeof buffer, pipe))
        out += buffer;
    if (pipe)
        ::pclose(pipe);
    return nlohmann::json::parse(out, nullptr, false);
}

// A moving gradient and a 440 Hz tone: content a viewer can check by eye and ear.
Result<void> writeClip(media::Mp4Writer& w, int frames, int width, int height, double fps, int rate)
{
    std::vector<std::uint8_t> rgb(static_cast<std::size_t>(width * height * 3));
    for (int f = 0; f < frames; ++f) {
        for (int y = 0; y < height; ++y)
            for (int x = 0; x < width; ++x) {
                auto* p = &rgb[(static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x)) * 3];
                p[0] = static_cast<std::uint8_t>((x * 255) / width);
                p[1] = static_cast<std::uint8_t>((y * 255) / height);
                p[2] = static_cast<std::uint8_t>((f * 255) / frames);
            }
        if (auto r = w.writeFrame(rgb.data(), width * 3); !r)
            return r;
    }
    const auto samples = static_cast<std::int64_t>(std::llround(frames / fps * rate));
    std::vector<float> left(static_cast<std::size_t>(samples)), right(static_cast<std::size_t>(samples));
    for (std::int64_t i = 0; i < samples; ++i) {
        left[static_cast<std::size_t>(i)] = 0.3f * static_cast<float>(std::sin(2 * M_PI * 440.0 * static_cast<double>(i) / rate));
        right[static_cast<std::size_t>(i)] = -left[static_cast<std::size_t>(i)];
    }
    const float* planes[2] = {left.data(), right.data()};
    // In uneven pieces, as a vocoder would deliver them.
    for (std::int64_t done = 0; done < samples;) {
        const auto n = std::min<std::int64_t>(777, samples - done);
        const float* piece[2] = {planes[0] + done, planes[1] + done};
        if (auto r = w.writeAudio(piece, n); !r)
            return r;
        done += n;
    }
    return w.finish();
}

}  // namespace

VT_TEST(videoAndAudioStreamsWithTheRecipe)
{
    const auto path = tempPath("clip.mp4");
    const std::string recipe = R"({"model":"ltx-2.3","prompt":"a vireo sings, ünïcödé ✓","seed":42})";
    auto w =
        media::Mp4Writer::open(path, {96, 64, 25.0}, media::AudioStreamSpec{48000, 2}, {{"comment", recipe}, {"vireo_recipe", recipe}});
    VT_CHECK_MSG(w.ok(), (w.ok() ? "" : w.error().message));
    auto r = writeClip(**w, 33, 96, 64, 25.0, 48000);
    VT_CHECK_MSG(r.ok(), (r.ok() ? "" : r.error().message));
    const auto info = probe(path);
    VT_CHECK(info.is_object() && info["streams"].size() == 2);
    const auto& video = info["streams"][0]["codec_type"] == "video" ? info["streams"][0] : info["streams"][1];
    const auto& audio = info["streams"][0]["codec_type"] == "audio" ? info["streams"][0] : info["streams"][1];
    VT_COMPARE(video["codec_name"].get<std::string>(), std::string("h264"));
    VT_COMPARE(audio["codec_name"].get<std::string>(), std::string("aac"));
    VT_COMPARE(video["width"].get<int>(), 96);
    VT_COMPARE(video["nb_read_frames"].get<std::string>(), std::string("33"));
    VT_COMPARE(audio["sample_rate"].get<std::string>(), std::string("48000"));
    VT_COMPARE(audio["channels"].get<int>(), 2);
    const double videoSeconds = std::stod(video["duration"].get<std::string>());
    const double audioSeconds = std::stod(audio["duration"].get<std::string>());
    std::printf("   33 frames @ 25 fps: video %.3f s, audio %.3f s (expected 1.320 s)\n", videoSeconds, audioSeconds);
    VT_CHECK(std::abs(videoSeconds - 33 / 25.0) < 1e-3);
    // AAC works in 1024-sample frames with a priming delay; the audio lasts as long as the
    // samples given, to within a frame.
    VT_CHECK(std::abs(audioSeconds - 33 / 25.0) < 1024.0 / 48000 + 1e-3);
    const auto tags = info["format"]["tags"];
    VT_COMPARE(tags["comment"].get<std::string>(), recipe);
    VT_COMPARE(tags["vireo_recipe"].get<std::string>(), recipe);
    ::unlink(path.c_str());
}

VT_TEST(existingFilesAreNeverOverwrittenAndFailuresLeaveNothing)
{
    const auto path = tempPath("keep.mp4");
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs("user data", f);
    std::fclose(f);
    auto w = media::Mp4Writer::open(path, {64, 64, 24.0}, std::nullopt, {});
    VT_CHECK(!w.ok() && w.error().message.find("exists") != std::string::npos);
    ::unlink(path.c_str());

    // Abandoned mid-way (an error or a cancel): no file under the final name, no temporary left.
    {
        auto open = media::Mp4Writer::open(path, {64, 64, 24.0}, std::nullopt, {});
        VT_CHECK(open.ok());
        std::vector<std::uint8_t> rgb(64 * 64 * 3, 128);
        VT_CHECK((*open)->writeFrame(rgb.data(), 64 * 3).ok());
    }
    VT_CHECK(::access(path.c_str(), F_OK) != 0);
    // The temporary is ".<name>.part<pid>-<n>", n counting the process's writers.
    const std::string tmpPrefix = "." + path.substr(5) + ".part" + std::to_string(::getpid()) + "-";
    const auto temporaries = [&] {
        std::vector<std::string> found;
        if (DIR* dir = ::opendir("/tmp")) {
            while (const dirent* e = ::readdir(dir))
                if (std::string(e->d_name).rfind(tmpPrefix, 0) == 0)
                    found.push_back(std::string("/tmp/") + e->d_name);
            ::closedir(dir);
        }
        return found;
    };
    VT_CHECK(temporaries().empty());

    // A file that appears under the name while the video is written is not replaced, and the
    // finished video stays, under the temporary name the error gives.
    {
        auto open = media::Mp4Writer::open(path, {64, 64, 24.0}, std::nullopt, {});
        VT_CHECK(open.ok());
        std::vector<std::uint8_t> rgb(64 * 64 * 3, 200);
        VT_CHECK((*open)->writeFrame(rgb.data(), 64 * 3).ok());
        FILE* other = std::fopen(path.c_str(), "w");
        std::fputs("another program's file", other);
        std::fclose(other);
        auto finished = (*open)->finish();
        VT_CHECK(!finished.ok());
        const auto& m = finished.error().message;
        const auto left = temporaries();
        VT_CHECK_MSG(left.size() == 1 && m.find("kept as " + left.front()) != std::string::npos, m);
        const std::string tmp = left.empty() ? std::string() : left.front();
        open = media::Mp4Writer::open(tempPath("unused.mp4"), {64, 64, 24.0}, std::nullopt, {});  // the first writer is gone
        char text[64] = {};
        FILE* kept = std::fopen(path.c_str(), "r");
        VT_CHECK(kept && std::fgets(text, sizeof text, kept));
        std::fclose(kept);
        VT_COMPARE(std::string(text), std::string("another program's file"));
        VT_CHECK_MSG(probe(tmp).value("streams", nlohmann::json::array()).size() == 1, "the kept video is not readable");
        ::unlink(tmp.c_str());
        ::unlink(path.c_str());
    }

    auto odd = media::Mp4Writer::open(path, {65, 64, 24.0}, std::nullopt, {});
    VT_CHECK(!odd.ok() && odd.error().message.find("even") != std::string::npos);
}

// A real full disk (a 256 KiB tmpfs; the test runs as root, as CI does): the error names the
// file and the cause, and neither a truncated video nor the temporary is left behind.
VT_TEST(aFullDiskIsAnErrorAndLeavesNothing)
{
    char mountPoint[] = "/tmp/vireo_mp4_full_XXXXXX";
    VT_CHECK(::mkdtemp(mountPoint) != nullptr);
    VT_CHECK_MSG(::mount("tmpfs", mountPoint, "tmpfs", 0, "size=256k") == 0,
        "cannot mount a tmpfs for the disk-full test (needs root, as the CI machine has)");
    const std::string path = std::string(mountPoint) + "/clip.mp4";
    {
        auto open = media::Mp4Writer::open(path, {256, 256, 24.0, 0, "ultrafast"}, media::AudioStreamSpec{}, {});
        VT_CHECK(open.ok());
        // Noise does not compress: a few frames are more than the volume holds.
        std::mt19937 random(7);
        std::vector<std::uint8_t> rgb(256 * 256 * 3);
        Result<void> result;
        for (int f = 0; f < 48 && result.ok(); ++f) {
            for (auto& b : rgb)
                b = static_cast<std::uint8_t>(random());
            result = (*open)->writeFrame(rgb.data(), 256 * 3);
        }
        if (result.ok())
            result = (*open)->finish();
        VT_CHECK_MSG(!result.ok(), "a video larger than the volume was reported as written");
        const auto& m = result.error().message;
        VT_CHECK_MSG(m.find(path) != std::string::npos && m.find("No space left") != std::string::npos, m);
    }
    VT_CHECK(::access(path.c_str(), F_OK) != 0);
    VT_CHECK(::umount(mountPoint) == 0);  // fails if anything was left open
    ::rmdir(mountPoint);
}

VT_MAIN("TestMp4Writer")
