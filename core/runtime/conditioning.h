#pragma once

// Conditioning files (image-to-video, keyframes, clips) turned into the facade's decoded
// inputs: the studio's runtime and the CLI read the file, re-compress a still the way LTX-2
// saw its conditioning frames in training, fit it to the output's size and hash the file, so
// the inference layer never parses an image. Here rather than in media/, which knows nothing
// of the facade's types.

#include "inference/facade/generator.h"
#include "inference/util/result.h"

#include <QImage>
#include <QString>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace vireo::runtime {

// The x264 CRF of conditioning stills for LTX-2 and LTX-2.3 (diffusers' DEFAULT_IMAGE_CRF).
inline constexpr int kDefaultConditionCrf = 33;
// A still's CRF left to the model family (generation::prepare puts in the family's default:
// 33, LTX-2.5's 18); a job that did not go through it gets kDefaultConditionCrf.
inline constexpr int kFamilyConditionCrf = -1;

// The user's sound for audio-to-video as a job carries it: a sound file or a video's soundtrack,
// read on the engine's thread.
struct AudioFile {
    QString path;
    std::string expectedSha256;  // a recipe's, for Generate again; empty: any
    bool operator==(const AudioFile&) const = default;
};

// The sound decoded (WAV, FLAC, MP3, AAC/M4A, Ogg, a video's first audio track), its file hashed
// and checked against expectedSha256. Refused, naming the file and why: no sound in it, silence
// of no length, longer than media::kMaxAudioSeconds (said from its header before it is decoded).
Result<facade::AudioInput> prepareConditionAudio(const AudioFile& file);
// What a sound offered to follow holds, decoded whole as the engine will read it (a page's
// worker thread: nothing hashed, the samples dropped): its length, rate and channels, and what
// reading it changed (channels dropped).
struct SoundSource {
    double seconds = 0;
    int sampleRate = 0, channels = 0;
    std::string note;
};
Result<SoundSource> inspectSound(const QString& path);
// A sound's length as its container's header says (nothing decoded); none when it says none.
std::optional<double> soundSeconds(const QString& path);

// Retake: the clip a job makes part of again, as it carries it; decoded on the engine's thread.
struct RetakeFile {
    QString path;
    QString soundPath;  // where its sound is read from; empty: the clip's own soundtrack (if any)
    double start = 0, end = 0;
    bool video = true, audio = true;
    std::string expectedSha256, soundSha256;  // a recipe's, for Generate again; empty: any
    bool operator==(const RetakeFile&) const = default;
};
// The clip's first `frames` frames fitted to width x height and its sound (its soundtrack, or
// soundPath's), for a request whose window and flags are `file`'s. A clip with fewer frames, a
// file that is not a video, a sound that does not decode: refused, naming the file.
Result<facade::RetakeInput> prepareRetake(const RetakeFile& file, int width, int height, std::int64_t frames);

// A conditioning file as a job carries it; decoded on the engine's thread.
struct ConditionFile {
    QString path;
    std::int64_t frame = 0;  // the output frame it shows at: 0 or 8k + 1
    double strength = 1.0;  // 0 .. 1
    int crf = kFamilyConditionCrf;  // stills: the H.264 round trip's CRF; 0: none
    int clipFrames = 0;  // 0: a still; else the first clipFrames (8k + 1) frames of a video
    bool clipFromEnd = false;  // a clip's last clipFrames frames instead: the video extends it
    // The SHA-256 the file must have (a recipe's, for Generate again): checked where the file is
    // read, on the engine's thread, so a page never hashes a large clip itself. Empty: any.
    std::string expectedSha256;
    // A clip from its end: where its sound over those frames is read from (a recipe's kept
    // samples; the clip's frames are then a copy without sound); empty: its own soundtrack.
    QString soundPath = {};
    std::string soundSha256 = {};
    bool operator==(const ConditionFile&) const = default;
};

// An IC-LoRA's reference clip (a depth, pose or edge video) as a job carries it; decoded on
// the engine's thread.
struct ReferenceFile {
    QString path;
    double strength = 1.0;  // 1: followed exactly; lower: more loosely (0..1)
    std::string expectedSha256;  // a recipe's, for Generate again; empty: any
    bool operator==(const ReferenceFile&) const = default;
};
// The clip's first `outputFrames` frames fitted to width x height (frame k guides output frame
// k), its file hashed and checked against expectedSha256. A clip with fewer frames than the
// output (said from its header), a file that is not a video: refused, naming the file.
Result<facade::ConditionInput> prepareReference(const ReferenceFile& file, int width, int height, std::int64_t outputFrames);

// What is wrong with a condition for an output of `frames` frames, as a sentence; empty when
// it can run. Frames are 0 or 8k + 1 (a latent frame boundary) and the condition must end by
// the last frame; an output length left on auto (frames 0) takes a still at frame 0 only.
std::string conditionProblem(std::int64_t frame, int conditionFrames, double strength, int crf, std::int64_t frames);

// A still, decoded, through the H.264 round trip at its own size (the reference re-compresses
// before it resizes), then fitted to width x height (media::fitToSize: cover and centre-crop),
// with the SHA-256 of the file's bytes.
Result<facade::ConditionInput> prepareConditionImage(
    const std::filesystem::path& path, int width, int height, std::int64_t frame, double strength, int crf);
// The first `frames` frames of a video (its last ones with fromEnd), each fitted (no
// re-compression: the reference applies it to single frames only). From its end, the clip's
// sound over those frames comes too (its soundtrack's last frames / fps seconds, as the
// container's frame count and rate place them), for an extension to continue.
Result<facade::ConditionInput> prepareConditionClip(
    const std::filesystem::path& path, int width, int height, std::int64_t frame, double strength, int frames, bool fromEnd = false);
// Either of the above, checked against the output's frame count first.
Result<facade::ConditionInput> prepareCondition(const ConditionFile& file, int width, int height, std::int64_t outputFrames);

// A still decoded by the same reader the generation uses, scaled to fit maxSide, for a
// thumbnail (and to refuse what the generation would refuse before it is queued).
Result<QImage> conditionPreview(const QString& path, int maxSide);

// What a file offered as a condition holds: a still (any picture conditionPreview takes), or a
// video in a real container (MP4/MOV, Matroska/WebM, AVI, MPEG-TS) whose first frames a clip
// condition uses. A file that is neither gets the still's error, which names it.
struct ConditionSource {
    QImage preview;  // the still, or the video's first frame as displayed, within maxSide
    bool clip = false;
    std::int64_t frames = 1;  // a video's frame count as its header says; 0: not said
    // A clip's last frame as displayed, within maxSide: what it continues from when extended
    // from its end. Read with the first, so a page never decodes on its own thread. When it
    // cannot be read, why (the clip still serves from its start).
    QImage last;
    QString lastProblem;
};
Result<ConditionSource> inspectCondition(const QString& path, int maxSide);
// A video's last frame as displayed, within maxSide: what a clip condition from its end shows.
Result<QImage> clipLastFrame(const QString& path, int maxSide);

// The first frame of a video saved as "<folder>/<video stem>.first-frame.png" (replacing an
// earlier one of that name), to start another video from; the PNG's path.
Result<QString> saveFirstFrame(const QString& video, const QString& folder);

// What is kept beside an output so its recipe can make it again after the original moves.
struct KeptCondition {
    std::filesystem::path path;
    std::string sha256;
    bool frames = false;  // the frames used (a clip's), not a copy of the source file
};

// A still: "<output stem>.cond<index><source extension>", a copy of the source (at most the
// 256 MiB a still may be), whose SHA-256 (`sha256`, already known) it is checked against. Never
// replaces another file; a file of that name with the same bytes is kept as it is.
Result<KeptCondition> copyConditionBeside(
    const std::filesystem::path& source, const std::string& sha256, const std::filesystem::path& output, int index);
// A clip: "<output stem>.cond<index>.mp4", the frames the output was conditioned on (at its
// size, as fitted), lossless, so reading them back gives the same pixels: bounded by what was
// used, however long the source. Both check the free space of the output's disk first.
// `kind`: the name's part before the index ("ref" for an IC-LoRA's reference clip).
Result<KeptCondition> keepConditionFrames(
    const facade::ConditionInput& condition, double fps, const std::filesystem::path& output, int index, const std::string& kind = "cond");
// The sound an output was made from, kept beside it as "<output stem>.audio.wav": the samples
// the clip used (its first `seconds`), as 32-bit float, so reading it back gives the same
// samples whatever the source was (a long video's soundtrack is never copied whole).
// `name`: the part after the output's stem ("audio": "<stem>.audio.wav"; "cond0" for a clip's).
Result<KeptCondition> keepConditionAudio(
    const facade::AudioInput& audio, double seconds, const std::filesystem::path& output, const std::string& name = "audio");

}  // namespace vireo::runtime
