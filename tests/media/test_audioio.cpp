// The user's audio read for audio-to-video: WAV (16-bit, 24-bit, float, mono, 5.1), FLAC, MP3,
// AAC in M4A, Ogg Vorbis and Opus, and a video's soundtrack, written by the system's ffmpeg
// (an encoder independent of the FFmpeg linked into Vireo, which decodes only) and read back
// at their own rate and length; lossless ones sample for sample. Files without audio, empty,
// too long (by the header, before decoding) or damaged are refused with their name.
#include "tests/harness/vireotest.h"

#include "media/mediareader.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace vireo;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path = fs::temp_directory_path() / ("vireo_audioio_" + std::to_string(::getpid()));
    TempDir() { fs::create_directories(path); }
    ~TempDir() { fs::remove_all(path); }
} g_temp;

constexpr double kPi = 3.141592653589793;

// A 16-bit PCM WAV written by hand: left a 440 Hz tone, right 660 Hz, exactly representable.
fs::path writeWav16(const std::string& name, int rate, int channels, int frames)
{
    const auto path = g_temp.path / name;
    std::ofstream out(path, std::ios::binary);
    auto u32 = [&](std::uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
    auto u16 = [&](std::uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
    const std::uint32_t bytes = static_cast<std::uint32_t>(frames * channels * 2);
    out.write("RIFF", 4);
    u32(36 + bytes);
    out.write("WAVEfmt ", 8);
    u32(16);
    u16(1);
    u16(static_cast<std::uint16_t>(channels));
    u32(static_cast<std::uint32_t>(rate));
    u32(static_cast<std::uint32_t>(rate * channels * 2));
    u16(static_cast<std::uint16_t>(channels * 2));
    u16(16);
    out.write("data", 4);
    u32(bytes);
    for (int i = 0; i < frames; ++i)
        for (int c = 0; c < channels; ++c) {
            const double f = c == 0 ? 440.0 : 660.0;
            u16(static_cast<std::uint16_t>(static_cast<std::int16_t>(std::lround(12000 * std::sin(2 * kPi * f * i / rate)))));
        }
    return path;
}

std::int16_t expected16(int channel, int i, int rate)
{
    const double f = channel == 0 ? 440.0 : 660.0;
    return static_cast<std::int16_t>(std::lround(12000 * std::sin(2 * kPi * f * i / rate)));
}

// The system ffmpeg turns `from` into `name` with the given output options.
fs::path encode(const fs::path& from, const std::string& name, const std::string& options)
{
    const auto out = g_temp.path / name;
    const std::string command = "ffmpeg -nostdin -v error -y -i '" + from.string() + "' " + options + " '" + out.string() + "'";
    VT_CHECK_MSG(std::system(command.c_str()) == 0, command);
    return out;
}

double maxError(const media::AudioSamples& a, int rate)
{
    double worst = 0;
    for (std::size_t c = 0; c < a.channels.size(); ++c)
        for (std::size_t i = 0; i < a.channels[c].size(); ++i)
            worst = std::max(worst, std::abs(a.channels[c][i] - expected16(static_cast<int>(c), static_cast<int>(i), rate) / 32768.0));
    return worst;
}

}  // namespace

VT_TEST(losslessFilesComeBackSampleForSample)
{
    const auto wav = writeWav16("tone.wav", 44100, 2, 44100 / 2);
    for (const auto& [name, options] :
        std::vector<std::pair<std::string, std::string>>{{"tone16.wav", "-c:a pcm_s16le"}, {"tone24.wav", "-c:a pcm_s24le"},
            {"tonef32.wav", "-c:a pcm_f32le"}, {"tone.flac", "-c:a flac"}, {"tone.aiff", "-c:a pcm_s16be"}}) {
        auto audio = media::readAudio(encode(wav, name, options));
        VT_CHECK_MSG(audio.ok(), name << ": " << (audio.ok() ? "" : audio.error().message));
        VT_COMPARE(audio->sampleRate, 44100);
        VT_COMPARE(audio->channels.size(), std::size_t{2});
        VT_COMPARE(audio->frames(), std::int64_t{22050});
        const double err = maxError(*audio, 44100);
        std::printf("   %-12s %s %d Hz, %lld frames: max error %.2e\n", name.c_str(), audio->codec.c_str(), audio->sampleRate,
            static_cast<long long>(audio->frames()), err);
        VT_CHECK_MSG(err == 0.0, name << ": not sample for sample");
        VT_CHECK(audio->note.empty());
    }
}

VT_TEST(lossyFilesAndSoundtracksDecodeAtTheirRate)
{
    const auto wav = writeWav16("tone48.wav", 48000, 2, 48000);
    for (const auto& [name, options] : std::vector<std::pair<std::string, std::string>>{{"tone.mp3", "-c:a libmp3lame -b:a 192k"},
             {"tone.m4a", "-c:a aac -b:a 192k"}, {"tone.ogg", "-c:a libvorbis -q:a 6"}, {"tone.opus", "-c:a libopus -b:a 128k"},
             {"clip.mp4", "-f lavfi -i color=c=gray:s=64x64:r=24 -shortest -c:v libx264 -c:a aac -b:a 192k -map 1:v -map 0:a"}}) {
        auto audio = media::readAudio(encode(wav, name, options));
        VT_CHECK_MSG(audio.ok(), name << ": " << (audio.ok() ? "" : audio.error().message));
        VT_COMPARE(audio->channels.size(), std::size_t{2});
        // Encoders add priming and padding: the length is the second within 60 ms.
        std::printf("   %-10s %-7s %d Hz, %.3f s\n", name.c_str(), audio->codec.c_str(), audio->sampleRate, audio->seconds());
        VT_CHECK_MSG(std::abs(audio->seconds() - 1.0) < 0.06, name << ": " << audio->seconds() << " s");
        VT_CHECK(audio->sampleRate == 48000);
        // The tone is there: energy near 12000 / 32768 RMS / sqrt(2).
        double energy = 0;
        for (const float v : audio->channels[0])
            energy += static_cast<double>(v) * v;
        const double rms = std::sqrt(energy / static_cast<double>(audio->frames()));
        VT_CHECK_MSG(std::abs(rms - 12000.0 / 32768 / std::sqrt(2.0)) < 0.03, name << ": rms " << rms);
    }
}

VT_TEST(monoStaysMonoAndMoreChannelsKeepTheFrontPairWithANote)
{
    auto mono = media::readAudio(writeWav16("mono.wav", 16000, 1, 8000));
    VT_CHECK(mono.ok());
    VT_COMPARE(mono->channels.size(), std::size_t{1});
    VT_CHECK(mono->note.empty());
    const auto six = writeWav16("six.wav", 48000, 6, 4800);
    auto surround = media::readAudio(six);
    VT_CHECK_MSG(surround.ok(), (surround.ok() ? "" : surround.error().message));
    VT_COMPARE(surround->channels.size(), std::size_t{2});
    VT_CHECK(surround->note.find("6 audio channels") != std::string::npos);
    VT_COMPARE(maxError(*surround, 48000), 0.0);
}

VT_TEST(whatIsNotAudioOrTooLongIsRefusedWithItsName)
{
    // A codec this build does not decode (Speex in Ogg) is named, with what would work.
    auto speex = media::readAudio(encode(writeWav16("tone-s.wav", 16000, 1, 1600), "tone.spx", "-c:a libspeex -f ogg"));
    VT_CHECK(!speex.ok() && speex.error().message.find("which this build does not decode") != std::string::npos);
    // No audio stream: a silent video.
    const auto silent = g_temp.path / "silent.mp4";
    const std::string make = "ffmpeg -nostdin -v error -y -f lavfi -i color=c=gray:s=64x64:r=24:d=1 -c:v libx264 '" + silent.string() + "'";
    VT_CHECK(std::system(make.c_str()) == 0);
    auto none = media::readAudio(silent);
    VT_CHECK(!none.ok() && none.error().message.find("silent.mp4: has no audio stream") != std::string::npos);
    // Zero samples.
    auto empty = media::readAudio(writeWav16("empty.wav", 16000, 2, 0));
    VT_CHECK_MSG(!empty.ok(), "an empty WAV was taken");
    // Longer than allowed: refused from the header, before decoding.
    const auto wav = writeWav16("long.wav", 8000, 1, 8000 * 30);
    auto longer = media::readAudio(wav, 10);
    VT_CHECK(!longer.ok() && longer.error().message.find("at most 10 s") != std::string::npos);
    VT_CHECK(media::readAudio(wav, 60).ok());
    // Not media at all, a missing file, a folder.
    const auto text = g_temp.path / "notes.wav";
    std::ofstream(text) << "this is not audio";
    auto bad = media::readAudio(text);
    VT_CHECK(!bad.ok() && bad.error().message.find("notes.wav") != std::string::npos);
    VT_CHECK(!media::readAudio(g_temp.path / "missing.flac").ok());
    VT_CHECK(!media::readAudio(g_temp.path).ok());
    // A FLAC cut in half decodes what it holds, or says it stops early; never a crash.
    const auto flac = encode(writeWav16("cut.wav", 44100, 2, 44100), "cut.flac", "-c:a flac");
    fs::resize_file(flac, fs::file_size(flac) / 2);
    auto cut = media::readAudio(flac);
    VT_CHECK(!cut.ok() || cut->seconds() < 0.9);
}

VT_MAIN("TestAudioIo")
