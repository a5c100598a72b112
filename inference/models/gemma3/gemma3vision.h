#pragma once

// Gemma 3's eyes: the SigLIP vision tower and the multimodal projector of a
// Gemma3ForConditionalGeneration (transformers 5.24 models/siglip/modeling_siglip.py,
// SiglipVisionModel without its pooling head; models/gemma3/modeling_gemma3.py,
// Gemma3MultiModalProjector), and the image processing before them (Gemma3Processor with the
// PIL image processor: one square resize, rescale, normalize, no pan-and-scan). An image becomes
// mm_tokens_per_image embeddings in the language model's width, which replace the image
// placeholder tokens of the prompt. LTX-2.0/2.3's text encoder carries it: their
// image-to-video self-enhancement shows the model the first frame.

#include "inference/text/tokenizer.h"
#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace vireo::gemma3 {

struct VisionConfig {
    // SiglipVisionConfig's defaults (a config.json lists what differs).
    std::int64_t hiddenSize = 768;
    std::int64_t intermediateSize = 3072;
    std::int64_t layers = 12;
    std::int64_t heads = 12;
    std::int64_t channels = 3;
    std::int64_t imageSize = 224;
    std::int64_t patchSize = 16;
    double layerNormEps = 1e-6;
    bool geluTanh = true;  // gelu_pytorch_tanh; false = exact gelu
    // Gemma3Config's.
    std::int64_t tokensPerImage = 256;  // mm_tokens_per_image
    std::int64_t textHidden = 2304;
    std::int64_t imageTokenId = 262144, boiTokenId = 255999, eoiTokenId = 256000;

    std::int64_t patchesPerSide() const { return imageSize / patchSize; }
    // google/gemma-3-12b-it's, for a weights file without config.json.
    static VisionConfig gemma3_12b();
};
// The vision part of a Gemma3ForConditionalGeneration config.json (vision_config,
// mm_tokens_per_image, the image token ids; text_config's hidden_size). NotFound when it has no
// vision_config; InvalidArgument for sizes that do not tile (patches per side not a multiple of
// the pooled tokens per side).
Result<VisionConfig> parseVisionConfig(const std::string& configJson, const std::string& origin);

// Gemma3ImageProcessor's settings (preprocessor_config.json) and Gemma3Processor's
// (processor_config.json image_seq_length, the tokenizer's boi / image / eoi tokens).
struct ImageProcessing {
    std::int64_t width = 896, height = 896;
    int resample = 2;  // PIL's filter: 2 bilinear, 3 bicubic
    bool doResize = true, doRescale = true, doNormalize = true;
    double rescaleFactor = 1.0 / 255.0;
    std::vector<double> mean{0.5, 0.5, 0.5}, stdDev{0.5, 0.5, 0.5};
    std::int64_t imageSeqLength = 256;
    std::string boiToken = "<start_of_image>", imageToken = "<image_soft_token>", eoiToken = "<end_of_image>";

    // "\n\n<boi>" + imageSeqLength x "<image>" + "<eoi>\n\n": what each <boi> of the chat text becomes.
    std::string fullImageSequence() const;
    // The chat text with every <boi> expanded.
    std::string expand(const std::string& chat) const;
};
// The processing a model's files describe: `config` sets the defaults (the tower's image size,
// its tokens per image), then preprocessor_config.json, processor_config.json and
// tokenizer_config.json in the first of `folders` that holds each. Pan-and-scan, a resample
// other than bilinear or bicubic, or a size that is not the tower's are refused, naming the file.
Result<ImageProcessing> readImageProcessing(const VisionConfig& config, const std::vector<std::filesystem::path>& folders);

// PIL's Image.resize for 8-bit RGB (Pillow's separable convolution, fixed-point coefficients,
// horizontal pass first, each pass rounded to 8 bits): rgb uint8 [H, W, 3] -> [height, width, 3].
// filter: 1 Lanczos (a = 3), 2 bilinear, 3 bicubic (a = -0.5). Bit for bit what Pillow returns, except where Pillow 13
// resamples vertically first (a height shrunk much more than the width): a few values by one
// level there. The enhancer's resizes keep the aspect or change one side only: not such a case.
at::Tensor pilResize(const at::Tensor& rgb, std::int64_t width, std::int64_t height, int filter);

// diffusers' _prepare_enhance_image: the long side to 896 with PIL's bicubic (the short side
// truncated), untouched when it already is.
at::Tensor prepareEnhanceImage(const at::Tensor& rgb, std::int64_t longSide = 896);

// Gemma3ImageProcessorPil: resize, rescale (in double, stored as float32), normalize (float32):
// uint8 [H, W, 3] -> float32 [1, 3, height, width].
at::Tensor preprocessImage(const at::Tensor& rgb, const ImageProcessing& processing);

struct VisionLoadOptions {
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
};

class VisionTower {
public:
    ~VisionTower();
    VisionTower(VisionTower&&) noexcept;
    VisionTower& operator=(VisionTower&&) noexcept;

    // The tower and projector of the Gemma 3 at `path` (what TextEncoder::load reads: a folder,
    // a diffusers pipeline's text_encoder, or one file), under `vision_tower.vision_model.*` (Hub
    // checkpoints) or `vision_tower.*` (transformers 5) and `multi_modal_projector.*`, with or
    // without the `model.` prefix. NotFound when the weights
    // carry no vision tower (text-only exports); missing or misshapen weights name themselves.
    static Result<VisionTower> load(const std::filesystem::path& path, const VisionLoadOptions& options = {});
    // Whether the weights at `path` carry a tower, from the headers; and its bytes in `dtype`.
    static std::int64_t bytes(const std::filesystem::path& path, c10::ScalarType dtype);

    // pixels float32 [N, 3, S, S] (preprocessImage) -> [N, tokensPerImage, textHidden] in the
    // compute dtype on the tower's device: Gemma3Model.get_image_features.
    Result<at::Tensor> embed(const at::Tensor& pixels) const;

    const VisionConfig& config() const;
    // The folder its config came from (where the processor files may be), empty for a file.
    const std::filesystem::path& folder() const;
    std::int64_t residentBytes() const;

private:
    struct Impl;
    explicit VisionTower(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::gemma3
