#pragma once

// The recipe of one output: everything needed to make it again (the exact weight files by
// hash, the prompt, the seed, the schedule, the sizes), shared by the runtime, the CLI, the
// gallery and any later API. It travels inside the output file (MP4 tags, PNG text chunks)
// and in the gallery's database as JSON. Reading is lenient and versioned: a recipe written
// by any earlier version loads (unknown keys are kept, missing ones take their defaults), and
// a field of the wrong type is an error that names the field.

#include "inference/facade/generator.h"
#include "inference/util/result.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vireo::output {

struct WeightFile {
    std::string path;
    std::int64_t bytes = 0;
    std::string sha256;  // empty when it could not be read
};

struct LoraUse {
    std::string path;
    std::string sha256;
    double strength = 1.0;
    std::string status;  // "applied", "partial: 3 keys unmatched", "refused: ..."
};

// A still or clip the video was conditioned on (image-to-video, keyframes).
struct ConditionUse {
    std::string source;  // the file as given
    std::string copy;  // its copy beside the output ("<stem>.cond0.png"), by name; empty if none was kept
    std::string sha256;  // of the file's bytes
    std::int64_t frame = 0;  // the output frame it shows at
    double strength = 1.0;
    int crf = 0;  // the H.264 round trip's CRF (stills); 0: none
    int frames = 1;  // 1: a still; a clip: its frame count
    bool fromEnd = false;  // a clip: its last `frames` frames (extending it), not its first
    std::string copySha256;  // of the copy's bytes
    // The copy holds the frames used (a clip's, at the output's size), not the source file: it
    // is read from its start whatever `fromEnd` says.
    bool copyIsFrames = false;
    // A clip from its end with sound: its samples over those frames, kept beside the output
    // ("<stem>.cond<i>.wav"), which the output's sound continued; empty: none.
    std::string soundCopy = {}, soundCopySha256 = {};
};

// The sound a video was made to follow (audio-to-video).
struct AudioUse {
    std::string source;  // the file as given (a sound file, or a video whose soundtrack it was)
    std::string sha256;  // of its bytes
    std::string copy;  // the samples the clip used, kept beside the output ("<stem>.audio.wav"), by name
    std::string copySha256;
    double seconds = 0;  // the source's length
    int sampleRate = 0, channels = 0;
};

// A retake: the clip made again over [start, end) s, and what of it was kept beside the output.
struct RetakeUse {
    std::string source, sha256;  // the clip as given
    std::string copy, copySha256;  // its frames used, lossless ("<stem>.cond0.mp4"), by name
    std::string soundCopy, soundCopySha256;  // its sound's samples used ("<stem>.audio.wav"); empty: none
    double start = 0, end = 0;
    bool video = true, audio = true;
};

// An IC-LoRA's reference clip: the file as given, its strength, and its frames used kept
// beside the output, lossless ("<stem>.ref<i>.mp4").
struct ReferenceUse {
    std::string source, sha256;
    std::string copy, copySha256;
    double strength = 1.0;
    int frames = 0;
};

struct Recipe {
    static constexpr int kVersion = 1;
    int version = kVersion;
    std::string app;  // "vireo-studio 0.1.0"
    std::string kind = "video";  // "video" (with audio) | "image"
    std::string pipeline = "ltx2";
    std::string family, variant;  // catalog ids when the model came from the catalog
    std::string modelVersion;  // "2.3"
    std::string repo, commit;  // Hub origin when known
    std::string modelTitle;  // what the user picked, for display
    std::string modelKey;  // the studio's key for it ("catalog:ltx-2.3/distilled-fp8", "local:...")
    std::vector<WeightFile> files;
    // The request as it ran: what the user asked with every default filled in (the steps the
    // schedule ran, the stage path asked for, every family knob). Its LoRAs and conditions are
    // not kept in it but below, each with its hash and what became of it; the preview settings
    // and the prompt's token limit (no front end sets it) are not written.
    facade::GenerateRequest request;
    std::vector<double> sigmas;
    int audioSampleRate = 0, audioChannels = 0;  // the video's sound track; 0 for images and older recipes
    std::string device, dtype, placement;
    int stepsSkipped = 0;  // denoise steps the step cache served (balanced, fast)
    std::string cudaGraphs;  // what became of the denoise passes' CUDA graphs; empty on the CPU
    std::string paths;  // what ran where, counted as it ran: GEMM paths and the attention; empty in older recipes
    std::string plannedPaths;  // what the capability gate planned before loading (dtype and each component's path)
    std::vector<std::string> pathWarnings;  // slower paths taken than planned, each with its count
    std::vector<LoraUse> loras;
    std::vector<ConditionUse> conditions;  // empty: text only
    std::optional<AudioUse> audio;  // none: the model made its own sound
    std::optional<RetakeUse> retake;  // none: a new clip
    std::vector<ReferenceUse> references;  // an IC-LoRA's reference clips; empty: none
    std::string stages;  // the path that ran: "single" | "two"; empty for images and older recipes
    std::string stagesReason;  // why that path, as the UI said it
    // A length left on auto: the seconds the model read from the prompt (request.frames holds
    // the frames made of them, so the recipe makes the same video again).
    std::optional<double> predictedSeconds;
    // request.enhancePrompt: the prompt LTX-2.5's prompt enhancer wrote from request.prompt,
    // the one the video followed.
    std::string enhancedPrompt;
    std::map<std::string, double> secondsPerPhase;
    std::string created;  // ISO 8601 UTC
    std::string extraJson = "{}";  // keys this version does not know, kept as they were

    // Compact JSON; text that is not valid UTF-8 is written with replacement characters.
    std::string toJson() const;
    static Result<Recipe> fromJson(const std::string& text);
};

// Text from files, servers and users made safe to show and store: invalid UTF-8 sequences
// become U+FFFD and control characters (but tab and newline) are dropped.
std::string sanitizedText(const std::string& text);
// At most maxBytes of text, cut at a character boundary (never inside a UTF-8 sequence).
std::string truncatedUtf8(const std::string& text, std::size_t maxBytes);

}  // namespace vireo::output
