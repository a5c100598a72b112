#pragma once

// Gemma 4's eyes: the vision tower and multimodal embedder of a Gemma4ForConditionalGeneration
// (transformers 5.24 models/gemma4/modeling_gemma4.py: Gemma4VisionModel, Gemma4MultimodalEmbedder)
// and the image processing before them (Gemma4ImageProcessorPil: an aspect-kept resize to a patch
// budget, rescale, patches). Unlike Gemma 3's square SigLIP input, an image keeps its shape: it
// becomes as many soft tokens as its pooled patch grid holds (at most max_soft_tokens), which
// replace the image placeholder of the prompt. LTX-2.5's dedicated prompt enhancer
// (google/gemma-4-E2B-it) carries it: its image-to-video enhancement shows the model the first frame.

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace vireo::tensorfile {
struct ModelSource;
}  // namespace vireo::tensorfile

namespace vireo::gemma3 {

struct Gemma4VisionConfig {
    // Gemma4VisionConfig's defaults (gemma-4-E2B-it's tower; config.json lists what differs).
    std::int64_t hiddenSize = 768;
    std::int64_t intermediateSize = 3072;
    std::int64_t layers = 16;
    std::int64_t heads = 12;
    std::int64_t kvHeads = 12;
    std::int64_t headDim = 64;
    double rmsNormEps = 1e-6;
    double ropeTheta = 100.0;  // axial 2-D RoPE
    bool geluTanh = true;  // gelu_pytorch_tanh; false = exact gelu
    std::int64_t poolingKernel = 3;
    std::int64_t patchSize = 16;
    std::int64_t positionEmbeddingSize = 10240;
    bool clippedLinears = false;  // use_clipped_linears: every linear clamps its input and output
    bool standardize = false;  // the pooled features shifted and scaled by std_bias / std_scale
    // Gemma4Config's.
    std::int64_t textHidden = 1536;
    std::int64_t imageTokenId = 258880, boiTokenId = 255999, eoiTokenId = 258882;
};
// The vision part of a Gemma4ForConditionalGeneration config.json (vision_config, the image token
// ids, text_config's hidden_size). NotFound without a vision_config (a text-only export);
// InvalidFormat for a rope other than axial, a head width that does not split in four, or sizes out
// of range.
Result<Gemma4VisionConfig> parseGemma4VisionConfig(const std::string& configJson, const std::string& origin);

// Gemma4ImageProcessor's settings (processor_config.json's image_processor, or
// preprocessor_config.json) and the tokenizer's boi / image / eoi tokens.
struct Gemma4ImageProcessing {
    std::int64_t patchSize = 16, maxSoftTokens = 280, poolingKernel = 3;
    int resample = 3;  // PIL's filter: 2 bilinear, 3 bicubic
    bool doResize = true, doRescale = true, doNormalize = false;
    double rescaleFactor = 1.0 / 255.0;
    std::vector<double> mean{0.0, 0.0, 0.0}, stdDev{1.0, 1.0, 1.0};
    std::string boiToken = "<|image>", imageToken = "<|image|>", eoiToken = "<image|>";

    std::int64_t maxPatches() const { return maxSoftTokens * poolingKernel * poolingKernel; }
    // Gemma4Processor.replace_image_token: every image token of the chat text becomes
    // boi + softTokens x image + eoi.
    std::string expand(const std::string& chat, std::int64_t softTokens) const;
};
// The processing a model's files describe: `config` sets the defaults (its patch and pooling
// sizes), then preprocessor_config.json, processor_config.json (image_processor nested, as
// transformers 5 saves it) and tokenizer_config.json in the first of `folders` that holds each. A
// max_soft_tokens Gemma 4 does not offer, patch or pooling sizes that are not the tower's, or a
// resample other than bilinear or bicubic are refused, naming the file.
Result<Gemma4ImageProcessing> readGemma4ImageProcessing(
    const Gemma4VisionConfig& config, const std::vector<std::filesystem::path>& folders);

// get_aspect_ratio_preserving_size: the largest (height, width) with the image's aspect, sides in
// multiples of pooling x patch and at most maxPatches patches; a very thin image gets one pooled
// row or column. InvalidArgument where the reference refuses (both sides round to zero).
Result<std::pair<std::int64_t, std::int64_t>> gemma4ResizeTarget(
    std::int64_t height, std::int64_t width, std::int64_t patchSize, std::int64_t maxPatches, std::int64_t pooling);

// An image as the tower reads it: the valid patches only (the reference's padding to maxPatches
// is masked out of every computation, so it is not made).
struct Gemma4Patches {
    at::Tensor pixels;  // float32 [n, 3 * patch^2]: patches row by row, each (py, px, channel)
    at::Tensor positions;  // int64 [n, 2]: each patch's (x, y)
    std::int64_t softTokens = 0;  // n / pooling^2
    std::int64_t height = 0, width = 0;  // the resized image
};
// Gemma4ImageProcessorPil: the aspect-kept resize (PIL's filter), rescale, normalize when asked,
// patches. rgb uint8 [H, W, 3].
Result<Gemma4Patches> gemma4Patches(const at::Tensor& rgb, const Gemma4ImageProcessing& processing);

struct Gemma4VisionLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
};

class Gemma4VisionTower {
public:
    ~Gemma4VisionTower();
    Gemma4VisionTower(Gemma4VisionTower&&) noexcept;
    Gemma4VisionTower& operator=(Gemma4VisionTower&&) noexcept;

    // The tower and embedder of the Gemma 4 at `path` (a model folder, a diffusers pipeline's
    // prompt_enhancer/, or one file with config.json beside it or Lightricks' gemma_config), under
    // `model.vision_tower.*` / `vision_tower.*` and `model.embed_vision.*` / `embed_vision.*`.
    // NotFound when the weights carry no vision tower or no config describes one.
    static Result<Gemma4VisionTower> load(const std::filesystem::path& path, const Gemma4VisionLoadOptions& options = {});
    // The bytes its weights take in `dtype`, from the headers (0 when there is no tower).
    static std::int64_t bytes(const std::filesystem::path& path, c10::ScalarType dtype);
    static std::int64_t bytes(const tensorfile::ModelSource& source, c10::ScalarType dtype);

    // Gemma4VisionModel: patches -> [softTokens, hidden] (pooled, scaled, standardized) in the
    // compute dtype on the tower's device.
    Result<at::Tensor> encode(const Gemma4Patches& patches) const;
    // Gemma4Model.get_image_features: encode, then embed_vision's weightless norm and projection
    // -> [softTokens, textHidden].
    Result<at::Tensor> embed(const Gemma4Patches& patches) const;

    const Gemma4VisionConfig& config() const;
    // The folder its config came from (where the processor files may be), empty for a file.
    const std::filesystem::path& folder() const;
    std::int64_t residentBytes() const;

private:
    struct Impl;
    explicit Gemma4VisionTower(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::gemma3
