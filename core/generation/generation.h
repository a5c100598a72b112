#pragma once

// The one place where what a user asked for becomes a generation job. The Generate page, the
// Gallery's "Generate again" (through the page), vireo-cli generate (and its --again) and any
// later front end hand it an Ask holding only what the user chose; the defaults (the catalog
// variant's, else those the model's own files call for), the family's rules (sizes, frame
// counts, what an image model takes), the conditions' placement, the stage path, the seed and
// the prompt's cleaning are decided here once, so two front ends cannot derive two jobs.

#include "core/output/recipe.h"
#include "core/runtime/conditioning.h"
#include "core/runtime/defaults.h"
#include "core/runtime/engine.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vireo::generation {

// What the user set; anything unset (nullopt, empty) takes the model's default.
struct Ask {
    std::string prompt, negativePrompt;
    // The prompt rewritten by the model's prompt enhancer first (FamilyRules::promptEnhancer;
    // planStages refuses it where the files have none).
    bool enhancePrompt = false;
    std::optional<std::int64_t> width, height, frames, seed;
    std::optional<double> fps, guidance, audioGuidance, rescale;
    std::optional<int> steps;
    std::string schedule;  // "distilled" | "dev"; empty: the model's
    std::string speed;  // "quality" | "balanced" | "fast"; empty: quality
    std::string stages;  // "auto" | "single" | "two"; empty: auto
    std::vector<facade::LoraRequest> loras;
    std::vector<runtime::ConditionFile> conditions;
    // Audio-to-video: the sound the video follows; unless frames are set, the clip is as long
    // as the sound (up to 20 s).
    std::optional<runtime::AudioFile> audio;
    // Retake: this clip made again over its window, kept elsewhere; its size, frames and rate
    // are the clip's unless set.
    std::optional<runtime::RetakeFile> retake;
    // IC-LoRA: reference clips (depth, pose, edges) for the in-context LoRA among `loras`; a
    // length left on auto is the shortest reference's (up to 20 s).
    std::vector<runtime::ReferenceFile> references;
    std::map<std::string, double> knobs;  // the family's own controls (FamilyRules::knobs) by id
};

// The rules of the model's family: the catalog variant's family, else the one its files belong to.
facade::FamilyRules rulesFor(const catalog::Catalog& catalog, const runtime::ModelRef& model);
// Whether the model makes still images (an Ideogram-4 catalog variant or folder) or videos.
bool makesImages(const catalog::Catalog& catalog, const runtime::ModelRef& model);

// What an image model (Ideogram-4) does not take, among what this ask and the load plan set:
// the names of vireo-cli's options without their dashes ("frames", "audio-guidance", "lora",
// "image", "audio", "retake", "reference", "upsampler"), in that order; empty for a clean ask. The caller knows the model
// makes images (makesImages).
std::vector<std::string> notForImages(const Ask& ask, const facade::LoadPlan& plan);

// The family's size rules as sentences (empty when they hold): Ideogram-4 works on 16-pixel
// patches, LTX-2 on 32-pixel latent cells and 8k + 1 frames.
// `lengthFromSound`: frames 0 is the sound's length (an ask with a sound), which every family
// that takes a sound can make.
std::vector<std::string> sizeProblems(
    const facade::FamilyRules& rules, std::int64_t width, std::int64_t height, std::int64_t frames, bool lengthFromSound = false);

// A knob the family does not declare, or a value outside its range, as a sentence naming the
// knob and what the family takes; empty when the knob and value are fine.
std::string knobProblem(const facade::FamilyRules& rules, const std::string& id, double value);
// The family's knobs as "id (min to max, default d)" lines, for help texts and errors.
std::string describeKnobs(const facade::FamilyRules& rules);

// The defaults for this model: a catalog variant's own (its schedule's sibling when the ask
// chooses the other schedule), else those its files call for (Generator::readModelFacts),
// else its family's distilled ones. An ask with a guidance above 1 or a step count other than
// 8 and no schedule means the dev schedule. `facts`: the model's facts when the caller has
// read them already (they are read here otherwise).
Result<runtime::GenerationDefaults> defaultsFor(
    const catalog::Catalog& catalog, const runtime::ModelRef& model, const Ask& ask = {}, const facade::ModelFacts* facts = nullptr);

// The request for this ask: the ask where it says, the defaults elsewhere, checked against
// nothing (what a page shows while the user is still typing); prepare() checks it.
facade::GenerateRequest requestFor(const runtime::GenerationDefaults& defaults, bool image, const Ask& ask);
// The family's presets whose knob the request turns on, for what the ask leaves unset.
void applyPresets(const facade::FamilyRules& rules, const Ask& ask, facade::GenerateRequest& r);

struct Prepared {
    runtime::GenerateJob job;  // model, request and conditions; the output's name is the front end's
    bool image = false;
    std::string stagesReason;  // video: which stage path runs and why
};

// The job for this ask with these defaults (from defaultsFor). A rule the ask breaks is an
// InvalidArgument error naming it, and nothing is read but headers. The job's request holds a
// value for every knob the family declares, so its recipe names them all.
Result<Prepared> prepare(
    const catalog::Catalog& catalog, const runtime::GenerationDefaults& defaults, const runtime::ModelRef& model, const Ask& ask);

// The reference clips as the stage plan sees them before their frames are read (the engine
// reads them): each file's name and strength, no pixels, for planStages to find their IC-LoRA
// and check the size it reads them at.
std::vector<facade::ConditionInput> referencesToPlan(const std::vector<runtime::ReferenceFile>& references);

// Every still and clip of the job (and its sound) decoded the way the engine will read them, so a file that
// does not decode fails before the model loads (vireo-cli); the window leaves this to the
// engine's thread, which reads them before loading.
Result<void> decodeConditions(const Prepared& prepared);

// A recipe read back (from an output file or the gallery): the ask that made it, so the same
// job comes out of prepare() again. Every field the recipe holds is set; the front end may
// change any (a new seed for a variation).
struct Again {
    QString modelKey;  // resolved by the front end (ModelResolver): local files, or a cache's
    std::string dtype;  // the compute dtype it ran in, when the recipe says
    bool image = false;  // an image's recipe: no upsampler, no video fields
    Ask ask;
    // Start images and clips gone from beside the output and from where they were, each as a
    // sentence; the ask holds the others. Making the output again needs them back.
    std::vector<std::string> missing;
};

// `folder` is where the output lies: a start image's or clip's copy is kept beside it (a
// recipe names it relative; the gallery gives it absolute). The copy is used first (a clip's
// kept frames are read from their start), else the source; the bytes must hash as the recipe
// says, checked where the engine reads them. A condition gone from both places is named in
// `missing`; a recipe without a model is InvalidFormat.
Result<Again> askFromRecipe(const output::Recipe& recipe, const QString& folder);

// The first weight file whose size on disk differs from the recipe's (other weights make
// another output), as a sentence; empty when none does. Sizes only: hashing 40 GB would take
// minutes, and the new recipe names every file by its hash again.
std::string weightsChanged(const output::Recipe& recipe);

}  // namespace vireo::generation
