#include "core/runtime/conditioning.h"

#include "core/output/outputfile.h"
#include "media/imageops.h"
#include "media/mediareader.h"
#include "media/mp4writer.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QSaveFile>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace vireo::runtime {

namespace {

std::string number(double v)
{
    std::string s = std::to_string(v);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.')
        s.pop_back();
    return s;
}

Result<std::string> hashOf(const std::filesystem::path& path)
{
    auto sha = output::fileSha256(path);
    if (sha.empty())
        return makeError(ErrorCode::Io, path.string() + ": cannot be read to hash it");
    return sha;
}

// A picture as a QImage of its own, scaled down to fit maxSide (0: as it is).
QImage previewOf(const media::RgbImage& image, int maxSide)
{
    const QImage view(image.rgb.data(), image.width, image.height, image.width * 3, QImage::Format_RGB888);
    if (maxSide > 0 && (image.width > maxSide || image.height > maxSide))
        return view.scaled(maxSide, maxSide, Qt::KeepAspectRatio, Qt::SmoothTransformation);
    return view.copy();
}

}  // namespace

std::string conditionProblem(std::int64_t frame, int conditionFrames, double strength, int crf, std::int64_t frames)
{
    if (!(strength >= 0.0 && strength <= 1.0))
        return "the strength " + number(strength) + " is outside 0 .. 1";
    if (crf != kFamilyConditionCrf && (crf < 0 || crf > 51))
        return "the CRF " + std::to_string(crf) + " is outside 0 .. 51 (0: no re-compression)";
    if (frame < 0 || (frame != 0 && (frame - 1) % 8 != 0))
        return "frame " + std::to_string(frame) + " is not 0 or 8k + 1 (1, 9, 17, ...): conditions start on a latent frame";
    if (conditionFrames < 1 || (conditionFrames - 1) % 8 != 0)
        return "a clip of " + std::to_string(conditionFrames) + " frames is not 8k + 1 (1, 9, 17, ...)";
    if (frames == 0) {  // the length left on auto: known only once the prompt is read
        if (frame != 0)
            return "frame " + std::to_string(frame) + ": a keyframe after frame 0 needs a set length (auto picks it from the prompt)";
        if (conditionFrames > 1)
            return "a clip needs a set length (auto picks it from the prompt); give the frames";
        return {};
    }
    if (frame >= frames)
        return "frame " + std::to_string(frame) + " is past the last frame of a " + std::to_string(frames) + "-frame video";
    if (frame + conditionFrames > frames)
        return "a clip of " + std::to_string(conditionFrames) + " frames from frame " + std::to_string(frame)
            + " runs past the last frame of a " + std::to_string(frames) + "-frame video";
    return {};
}

Result<facade::ConditionInput> prepareConditionImage(
    const std::filesystem::path& path, int width, int height, std::int64_t frame, double strength, int crf)
{
    if (width < 1 || height < 1)
        return makeError(
            ErrorCode::InvalidArgument, "the output size " + std::to_string(width) + "x" + std::to_string(height) + " is empty");
    auto image = media::readImage(path);
    if (!image)
        return image.error();
    // The reference (ltx-pipelines' load_image_and_preprocess, diffusers' image-to-video
    // pipelines) re-compresses the picture as loaded and resizes it afterwards.
    auto compressed = media::recompressH264(*image, crf);
    if (!compressed)
        return makeError(compressed.error().code, path.string() + ": " + compressed.error().message);
    auto fitted = media::fitToSize(*compressed, width, height);
    if (fitted.rgb.empty())
        return makeError(ErrorCode::Internal,
            path.string() + ": the picture could not be scaled to " + std::to_string(width) + "x" + std::to_string(height));
    auto sha = hashOf(path);
    if (!sha)
        return sha.error();
    facade::ConditionInput c;
    c.frame = frame;
    c.strength = strength;
    c.width = width;
    c.height = height;
    c.frames = 1;
    c.rgb = std::move(fitted.rgb);
    c.source = path.string();
    c.sha256 = *sha;
    return c;
}

Result<facade::ConditionInput> prepareConditionClip(
    const std::filesystem::path& path, int width, int height, std::int64_t frame, double strength, int frames, bool fromEnd)
{
    if (width < 1 || height < 1)
        return makeError(
            ErrorCode::InvalidArgument, "the output size " + std::to_string(width) + "x" + std::to_string(height) + " is empty");
    auto clip = media::readClipFrames(path, frames, width, height, media::kMaxImagePixels, fromEnd);
    if (!clip)
        return clip.error();
    auto sha = hashOf(path);
    if (!sha)
        return sha.error();
    facade::ConditionInput c;
    c.frame = frame;
    c.strength = strength;
    c.width = width;
    c.height = height;
    c.frames = frames;
    c.rgb.reserve(static_cast<std::size_t>(width) * height * 3 * static_cast<std::size_t>(frames));
    for (const auto& f : *clip)
        c.rgb.insert(c.rgb.end(), f.rgb.begin(), f.rgb.end());
    c.source = path.string();
    c.sha256 = *sha;
    // A soundtrack longer than the studio decodes (a feature film) is not continued: its end
    // would need the whole of it decoded. Said in the log; the extension still runs.
    const auto info = fromEnd ? media::probeMedia(path) : Result<media::MediaInfo>(makeError(ErrorCode::NotFound, ""));
    if (info && info->hasAudio && info->durationSeconds > media::kMaxAudioSeconds) {
        spdlog::warn("{}: its sound is {:.0f} s long, more than the {:.0f} s decoded; the extension does not continue it", path.string(),
            info->durationSeconds, media::kMaxAudioSeconds);
    } else if (info && info->hasAudio && info->fps > 0) {
        auto read = media::readAudio(path);
        if (!read)
            return read.error();
        const double end = info->frames > 0 ? static_cast<double>(info->frames) / info->fps : info->durationSeconds;
        const double start = std::max(0.0, end - static_cast<double>(frames) / info->fps);
        const auto total = read->frames();
        const auto from = std::clamp<std::int64_t>(std::llround(start * read->sampleRate), 0, total);
        const auto to = std::clamp<std::int64_t>(std::llround(end * read->sampleRate), from, total);
        if (to > from) {
            facade::AudioInput sound;
            sound.sampleRate = read->sampleRate;
            for (auto& channel : read->channels)
                sound.channels.emplace_back(channel.begin() + from, channel.begin() + to);
            sound.source = path.string();
            sound.sha256 = *sha;
            sound.note = read->note;
            c.sound = std::move(sound);
        }
    }
    return c;
}

Result<facade::ConditionInput> prepareReference(const ReferenceFile& file, int width, int height, std::int64_t outputFrames)
{
    const std::filesystem::path path = file.path.toStdString();
    if (!(file.strength >= 0.0 && file.strength <= 1.0))
        return makeError(ErrorCode::InvalidArgument, path.string() + ": a reference clip's strength must be between 0 and 1");
    if (outputFrames < 1)
        return makeError(ErrorCode::InvalidArgument, path.string() + ": the output's length must be set before its reference is read");
    // The IC-LoRA reads reference frame k over output frame k: a clip shorter than the output
    // would leave its end unconditioned, so it is refused (from the header, before decoding).
    if (const auto info = media::probeMedia(path); info && info->hasVideo && info->frames > 0 && info->frames < outputFrames)
        return makeError(ErrorCode::InvalidArgument,
            path.string() + " has " + std::to_string(info->frames) + " frames; the video it guides has " + std::to_string(outputFrames)
                + ": give a reference clip at least as long, or make the video shorter (" + std::to_string((info->frames - 1) / 8 * 8 + 1)
                + " frames)");
    auto prepared = prepareConditionClip(path, width, height, 0, file.strength, static_cast<int>(outputFrames));
    if (!prepared)
        return prepared.error();
    prepared->sound.reset();
    if (!file.expectedSha256.empty() && prepared->sha256 != file.expectedSha256)
        return makeError(ErrorCode::InvalidArgument,
            path.string()
                + " changed since the recipe was made (its SHA-256 differs): choose it again to make a new video, or find the file the "
                  "recipe names");
    return prepared;
}

Result<facade::ConditionInput> prepareCondition(const ConditionFile& file, int width, int height, std::int64_t outputFrames)
{
    const std::filesystem::path path = file.path.toStdString();
    const int frames = file.clipFrames > 0 ? file.clipFrames : 1;
    if (const auto problem = conditionProblem(file.frame, frames, file.strength, file.crf, outputFrames); !problem.empty())
        return makeError(ErrorCode::InvalidArgument, path.string() + ": " + problem);
    auto prepared = file.clipFrames > 0
        ? prepareConditionClip(path, width, height, file.frame, file.strength, file.clipFrames, file.clipFromEnd)
        : prepareConditionImage(
            path, width, height, file.frame, file.strength, file.crf == kFamilyConditionCrf ? kDefaultConditionCrf : file.crf);
    if (prepared && prepared->frames > 1 && !file.soundPath.isEmpty()) {
        auto sound = prepareConditionAudio({file.soundPath, file.soundSha256});
        if (!sound)
            return sound.error();
        prepared->sound = std::move(*sound);
    }
    if (prepared && !file.expectedSha256.empty() && prepared->sha256 != file.expectedSha256)
        return makeError(ErrorCode::InvalidArgument,
            path.string()
                + " changed since the recipe was made (its SHA-256 differs): "
                  "choose it again to make a new video, or find the file the recipe names");
    return prepared;
}

Result<facade::AudioInput> prepareConditionAudio(const AudioFile& file)
{
    const std::filesystem::path path = file.path.toStdString();
    auto read = media::readAudio(path);
    if (!read)
        return read.error();
    facade::AudioInput out;
    out.sampleRate = read->sampleRate;
    out.channels = std::move(read->channels);
    out.source = path.string();
    out.note = read->note;
    out.sha256 = output::fileSha256(path);
    if (!file.expectedSha256.empty() && out.sha256 != file.expectedSha256)
        return makeError(ErrorCode::InvalidArgument,
            path.string()
                + " changed since the recipe was made (its SHA-256 differs): "
                  "choose it again to make a new video, or find the file the recipe names");
    return out;
}

std::optional<double> soundSeconds(const QString& path)
{
    const auto info = media::probeMedia(path.toStdString());
    if (!info || !info->hasAudio || !(info->durationSeconds > 0) || !std::isfinite(info->durationSeconds))
        return std::nullopt;
    return info->durationSeconds;
}

Result<SoundSource> inspectSound(const QString& path)
{
    auto read = media::readAudio(path.toStdString());
    if (!read)
        return read.error();
    return SoundSource{read->seconds(), read->sampleRate, static_cast<int>(read->channels.size()), read->note};
}

Result<facade::RetakeInput> prepareRetake(const RetakeFile& file, int width, int height, std::int64_t frames)
{
    const std::filesystem::path path = file.path.toStdString();
    if (frames < 1 || frames > 100000)
        return makeError(ErrorCode::InvalidArgument, path.string() + ": a retake needs the clip's frame count (8k + 1)");
    auto clip = prepareConditionClip(path, width, height, 0, 1.0, static_cast<int>(frames));
    if (!clip)
        return clip.error();
    if (!file.expectedSha256.empty() && clip->sha256 != file.expectedSha256)
        return makeError(ErrorCode::InvalidArgument,
            path.string() + " changed since the recipe was made (its SHA-256 differs): choose it again to retake it");
    facade::RetakeInput out;
    out.start = file.start;
    out.end = file.end;
    out.video = file.video;
    out.audio = file.audio;
    out.clip = std::move(*clip);
    // Its sound: a file of its own (a recipe's kept samples), else its soundtrack where it has one.
    if (!file.soundPath.isEmpty()) {
        auto sound = prepareConditionAudio({file.soundPath, file.soundSha256});
        if (!sound)
            return sound.error();
        out.sound = std::move(*sound);
    } else if (const auto info = media::probeMedia(path); info && info->hasAudio) {
        auto read = media::readAudio(path);
        if (!read)
            return read.error();
        facade::AudioInput sound;
        sound.sampleRate = read->sampleRate;
        sound.channels = std::move(read->channels);
        sound.source = path.string();
        sound.sha256 = out.clip.sha256;
        sound.note = read->note;
        out.sound = std::move(sound);
    }
    return out;
}

Result<QImage> conditionPreview(const QString& path, int maxSide)
{
    auto image = media::readImage(path.toStdString());
    if (!image)
        return image.error();
    return previewOf(*image, maxSide);
}

Result<ConditionSource> inspectCondition(const QString& path, int maxSide)
{
    // The container first, from its headers: a video is never read whole into memory as a
    // still would be. Only containers that hold recorded video count: FFmpeg also "reads" text
    // as ANSI art, and a GIF is a still here.
    static const char* const kVideoContainers[] = {"mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm", "avi", "mpegts"};
    const std::filesystem::path file = path.toStdString();
    auto info = media::probeMedia(file);
    const bool video = info && info->hasVideo
        && std::any_of(std::begin(kVideoContainers), std::end(kVideoContainers), [&](const char* c) { return info->container == c; });
    if (!video) {
        auto still = conditionPreview(path, maxSide);
        if (!still)
            return still.error();
        return ConditionSource{*still, false, 1, {}, {}};
    }
    auto first = media::frameAt(file, 0, 0);
    if (!first)
        return first.error();
    ConditionSource source{previewOf(*first, maxSide), true, std::max<std::int64_t>(0, info->frames), {}, {}};
    if (auto last = clipLastFrame(path, maxSide))
        source.last = *last;
    else
        source.lastProblem = QString::fromStdString(last.error().message);
    return source;
}

Result<QImage> clipLastFrame(const QString& path, int maxSide)
{
    // Read as the engine reads a clip from its end, so a file cut short is refused here, when it
    // is chosen, rather than shown with an earlier frame as its last.
    auto last = media::readClipFrames(path.toStdString(), 1, 0, 0, media::kMaxImagePixels, true);
    if (!last)
        return last.error();
    return previewOf(last->back(), maxSide);
}

Result<QString> saveFirstFrame(const QString& video, const QString& folder)
{
    auto frame = media::frameAt(video.toStdString(), 0, 0);
    if (!frame)
        return frame.error();
    if (!QDir().mkpath(folder))
        return makeError(ErrorCode::Io, folder.toStdString() + ": the folder cannot be created");
    const QString path = QDir(folder).filePath(QFileInfo(video).completeBaseName() + QStringLiteral(".first-frame.png"));
    const QImage image(frame->rgb.data(), frame->width, frame->height, frame->width * 3, QImage::Format_RGB888);
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly) || !image.save(&file, "PNG") || !file.commit())
        return makeError(ErrorCode::Io, path.toStdString() + ": cannot be written (" + file.errorString().toStdString() + ")");
    return path;
}

namespace {

// The file names beside an output, in order: "<stem>.cond<i><ext>", then "-2" .. "-20".
std::filesystem::path keptName(const std::filesystem::path& folder, const std::string& stem, int attempt, const std::string& extension)
{
    return folder / (stem + (attempt == 1 ? std::string() : "-" + std::to_string(attempt)) + extension);
}

// Free space for `bytes` more on the output's disk, beyond the margin a full disk needs to
// stay usable.
Result<void> roomFor(const std::filesystem::path& folder, std::int64_t bytes)
{
    constexpr std::int64_t kMargin = 256ll << 20;
    std::error_code ec;
    const auto space = std::filesystem::space(folder, ec);
    if (ec)
        return {};  // unknown: the write itself will say
    if (static_cast<std::int64_t>(space.available) < bytes + kMargin)
        return makeError(ErrorCode::Io,
            folder.string() + ": " + std::to_string(space.available >> 20) + " MiB free, " + std::to_string((bytes + kMargin) >> 20)
                + " MiB needed to keep the condition beside the output");
    return {};
}

// Moves a finished temporary file to the first free kept name (or to one that already holds
// the same bytes).
Result<std::filesystem::path> placeKept(const std::filesystem::path& temporary, const std::filesystem::path& folder,
    const std::string& stem, const std::string& extension, const std::string& sha)
{
    std::error_code ec;
    for (int attempt = 1; attempt <= 20; ++attempt) {
        const auto target = keptName(folder, stem, attempt, extension);
        const int e = media::moveWithoutReplacing(temporary, target);
        if (e == 0)
            return target;
        if (e != EEXIST) {
            std::filesystem::remove(temporary, ec);
            return makeError(ErrorCode::Io, target.string() + ": " + std::strerror(e));
        }
        if (output::fileSha256(target) == sha) {
            std::filesystem::remove(temporary, ec);
            return target;
        }
    }
    std::filesystem::remove(temporary, ec);
    return makeError(ErrorCode::Io, keptName(folder, stem, 1, extension).string() + " and 19 other names are taken");
}

}  // namespace

Result<KeptCondition> copyConditionBeside(
    const std::filesystem::path& source, const std::string& sha256, const std::filesystem::path& output, int index)
{
    const auto folder = output.parent_path().empty() ? std::filesystem::path(".") : output.parent_path();
    std::error_code ec;
    const auto size = std::filesystem::file_size(source, ec);
    if (ec)
        return makeError(ErrorCode::Io, source.string() + ": cannot be read (" + ec.message() + ")");
    if (size > static_cast<std::uintmax_t>(media::kMaxImageFileBytes))
        return makeError(ErrorCode::InvalidArgument, source.string() + ": larger than a still may be; not copied");
    if (auto room = roomFor(folder, static_cast<std::int64_t>(size)); !room)
        return room.error();
    std::string extension = source.extension().string();
    std::transform(
        extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (extension.size() > 8 || extension.find_first_not_of(".abcdefghijklmnopqrstuvwxyz0123456789") != std::string::npos)
        extension = ".img";
    const auto stem = output.stem().string() + ".cond" + std::to_string(index);
    // Written under a hidden temporary name (the gallery ignores those) and moved into place.
    const auto temporary = folder / ("." + stem + ".part-" + std::to_string(::getpid()));
    std::filesystem::remove(temporary, ec);
    if (!std::filesystem::copy_file(source, temporary, ec))
        return makeError(ErrorCode::Io, temporary.string() + ": cannot copy " + source.string() + " here (" + ec.message() + ")");
    // The copy is checked against the hash the condition was read with: a source that changed
    // since is not kept as if it were the one used.
    if (output::fileSha256(temporary) != sha256) {
        std::filesystem::remove(temporary, ec);
        return makeError(ErrorCode::Io, source.string() + " changed after it was read");
    }
    auto placed = placeKept(temporary, folder, stem, extension, sha256);
    if (!placed)
        return placed.error();
    return KeptCondition{*placed, sha256, false};
}

namespace {

// A RIFF/WAVE file of 32-bit float samples (format 3, IEEE float), interleaved.
std::string floatWav(const std::vector<std::vector<float>>& channels, std::int64_t frames, int sampleRate)
{
    const auto count = static_cast<std::uint32_t>(channels.size());
    const auto dataBytes = static_cast<std::uint32_t>(static_cast<std::uint64_t>(frames) * count * 4);
    std::string out;
    out.reserve(44 + dataBytes);
    const auto u32 = [&](std::uint32_t v) {
        for (int i = 0; i < 4; ++i)
            out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    };
    const auto u16 = [&](std::uint16_t v) {
        out.push_back(static_cast<char>(v & 0xff));
        out.push_back(static_cast<char>(v >> 8));
    };
    out += "RIFF";
    u32(36 + dataBytes);
    out += "WAVEfmt ";
    u32(16);
    u16(3);
    u16(static_cast<std::uint16_t>(count));
    u32(static_cast<std::uint32_t>(sampleRate));
    u32(static_cast<std::uint32_t>(sampleRate) * count * 4);
    u16(static_cast<std::uint16_t>(count * 4));
    u16(32);
    out += "data";
    u32(dataBytes);
    for (std::int64_t i = 0; i < frames; ++i)
        for (const auto& c : channels) {
            std::uint32_t bits = 0;
            std::memcpy(&bits, &c[static_cast<std::size_t>(i)], 4);
            u32(bits);
        }
    return out;
}

}  // namespace

Result<KeptCondition> keepConditionAudio(
    const facade::AudioInput& audio, double seconds, const std::filesystem::path& output, const std::string& name)
{
    if (audio.channels.empty() || audio.channels.size() > 2 || audio.sampleRate <= 0)
        return makeError(ErrorCode::InvalidArgument, "the sound holds no samples to keep");
    for (const auto& c : audio.channels)
        if (c.size() != audio.channels.front().size())
            return makeError(ErrorCode::InvalidArgument, "the sound's channels differ in length");
    const auto wanted = static_cast<std::int64_t>(std::llround(std::max(0.0, seconds) * audio.sampleRate));
    const auto frames = std::min(audio.frames(), wanted);
    const auto folder = output.parent_path().empty() ? std::filesystem::path(".") : output.parent_path();
    const auto bytes = floatWav(audio.channels, frames, audio.sampleRate);
    if (auto room = roomFor(folder, static_cast<std::int64_t>(bytes.size())); !room)
        return room.error();
    const auto stem = output.stem().string() + "." + name;
    const auto temporary = folder / ("." + stem + ".part-" + std::to_string(::getpid()));
    {
        std::ofstream f(temporary, std::ios::binary | std::ios::trunc);
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!f.flush())
            return makeError(ErrorCode::Io, temporary.string() + ": cannot be written");
    }
    const auto sha = output::fileSha256(temporary);
    auto placed = placeKept(temporary, folder, stem, ".wav", sha);
    if (!placed)
        return placed.error();
    return KeptCondition{*placed, sha, true};
}

Result<KeptCondition> keepConditionFrames(
    const facade::ConditionInput& c, double fps, const std::filesystem::path& output, int index, const std::string& kind)
{
    const auto frameBytes = static_cast<std::size_t>(c.width) * static_cast<std::size_t>(c.height) * 3;
    if (c.frames < 1 || c.width < 1 || c.height < 1 || c.rgb.size() != frameBytes * static_cast<std::size_t>(c.frames))
        return makeError(ErrorCode::InvalidArgument, "the condition's frames do not match its size");
    const auto folder = output.parent_path().empty() ? std::filesystem::path(".") : output.parent_path();
    // Lossless H.264 stays well under the raw size; the raw size is what is asked to be free.
    if (auto room = roomFor(folder, static_cast<std::int64_t>(c.rgb.size())); !room)
        return room.error();
    const auto stem = output.stem().string() + "." + kind + std::to_string(index);
    const auto temporary = folder / ("." + stem + ".part-" + std::to_string(::getpid()) + ".mp4");
    std::error_code ec;
    std::filesystem::remove(temporary, ec);
    media::VideoStreamSpec spec;
    spec.width = c.width;
    spec.height = c.height;
    spec.fps = fps > 0 ? fps : 24.0;
    spec.lossless = true;
    {
        auto writer = media::Mp4Writer::open(temporary, spec, std::nullopt,
            {{"comment",
                "the frames " + (c.source.empty() ? std::string("a condition") : c.source) + " gave, as a video was conditioned on them"}});
        if (!writer)
            return writer.error();
        for (int f = 0; f < c.frames; ++f)
            if (auto w =
                    (*writer)->writeFrame(c.rgb.data() + frameBytes * static_cast<std::size_t>(f), static_cast<std::int64_t>(c.width) * 3);
                !w)
                return w.error();
        if (auto done = (*writer)->finish(); !done)
            return done.error();
    }
    auto sha = hashOf(temporary);
    if (!sha) {
        std::filesystem::remove(temporary, ec);
        return sha.error();
    }
    auto placed = placeKept(temporary, folder, stem, ".mp4", *sha);
    if (!placed)
        return placed.error();
    return KeptCondition{*placed, *sha, true};
}

}  // namespace vireo::runtime
