#pragma once

// Writing an output: the weight files' hashes for the recipe, a fresh name in the outputs
// folder (never an existing file), and the MP4 itself with the recipe in its tags.

#include "core/output/recipe.h"
#include "inference/facade/generator.h"
#include "inference/util/result.h"

#include <filesystem>
#include <functional>
#include <stop_token>
#include <vector>

class QImage;

namespace vireo::output {

// A file's SHA-256. A file in the Hugging Face cache is named by its SHA-256 already (the
// blob a snapshot entry points to), so a 40 GB checkpoint is not read again for every video.
std::string fileSha256(const std::filesystem::path& path);

// Every weight, config and tokenizer file under the given paths (folders are walked, at most
// 10,000 files and 16 levels deep), with size and hash.
std::vector<WeightFile> describeWeightFiles(const std::vector<std::filesystem::path>& paths);

// "<folder>/<yyyy-mm-dd_hh-mm-ss>_<up to 40 characters of the prompt>.<extension>", with
// " (2)", " (3)" ... until the name is free. The folder is created when missing.
Result<std::filesystem::path> freshOutputPath(const std::filesystem::path& folder, const std::string& prompt, const std::string& extension);

// H.264 + AAC with the recipe in the `comment` and `vireo_recipe` tags and the prompt as the
// title. Written under a temporary name and moved into place: a cancel (checked every frame)
// or a failure leaves nothing behind. progress(done, total) counts frames.
Result<void> writeVideo(const std::filesystem::path& path, const facade::VideoResult& video, const Recipe& recipe,
    const std::function<void(std::int64_t, std::int64_t)>& progress = {}, std::stop_token stop = {});

// PNG with the recipe in a `vireo_recipe` text chunk (and the prompt as its Description), so
// a copied image keeps how it was made. Written under a temporary name and moved into place;
// never replaces an existing file.
Result<void> writeImage(const std::filesystem::path& path, const QImage& image, const Recipe& recipe);

// The hidden ".NAME.mp4.part<pid>" files a video writer killed mid-file left in `folder` (the
// pid names a process that is gone): removed, never adopted as outputs. Returns how many.
int removeStalePartials(const std::filesystem::path& folder);

}  // namespace vireo::output
