#include "inference/models/gemma3/gemma3vision.h"

#include "inference/models/gemma3/gemma3.h"
#include "inference/models/gemma3/processorfiles.h"

#include "inference/models/nn/layers.h"
#include "inference/models/nn/strictweights.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/util/device.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numbers>
#include <sstream>
#include <system_error>

namespace vireo::gemma3 {

namespace fs = std::filesystem;
using json = nlohmann::json;
using jsonutil::ConfigError;
using jsonutil::configFail;
using jsonutil::intField;
using jsonutil::numberField;

// ------------------------------------------------------------------ config

VisionConfig VisionConfig::gemma3_12b()
{
    VisionConfig c;
    c.hiddenSize = 1152;
    c.intermediateSize = 4304;
    c.layers = 27;
    c.heads = 16;
    c.imageSize = 896;
    c.patchSize = 14;
    c.textHidden = 3840;
    return c;
}

Result<VisionConfig> parseVisionConfig(const std::string& configJson, const std::string& origin)
{
    try {
        auto parsed = jsonutil::parseUntrusted(configJson, origin);
        if (!parsed)
            return parsed.error();
        const auto& top = *parsed;
        if (!top.is_object() || !top.contains("vision_config") || !top["vision_config"].is_object())
            return makeError(ErrorCode::NotFound, origin + ": has no vision_config (a text-only Gemma 3)");
        const auto& v = top["vision_config"];
        VisionConfig c;
        c.hiddenSize = intField(v, "hidden_size", c.hiddenSize, origin);
        c.intermediateSize = intField(v, "intermediate_size", c.intermediateSize, origin);
        c.layers = intField(v, "num_hidden_layers", c.layers, origin);
        c.heads = intField(v, "num_attention_heads", c.heads, origin);
        c.channels = intField(v, "num_channels", c.channels, origin);
        c.imageSize = intField(v, "image_size", c.imageSize, origin);
        c.patchSize = intField(v, "patch_size", c.patchSize, origin);
        c.layerNormEps = numberField(v, "layer_norm_eps", c.layerNormEps, origin);
        const auto act = jsonutil::stringOr(v, "hidden_act", "gelu_pytorch_tanh");
        if (act != "gelu_pytorch_tanh" && act != "gelu" && act != "gelu_new")
            configFail(origin + ": vision_config.hidden_act '" + act + "' is not supported (gelu_pytorch_tanh or gelu)");
        c.geluTanh = act != "gelu";
        c.tokensPerImage = intField(top, "mm_tokens_per_image", c.tokensPerImage, origin);
        c.imageTokenId = top.contains("image_token_index") ? intField(top, "image_token_index", c.imageTokenId, origin)
                                                           : intField(top, "image_token_id", c.imageTokenId, origin);
        c.boiTokenId = intField(top, "boi_token_index", c.boiTokenId, origin);
        c.eoiTokenId = intField(top, "eoi_token_index", c.eoiTokenId, origin);
        if (const auto* text = jsonutil::objectField(top, "text_config"))
            c.textHidden = intField(*text, "hidden_size", 2304, origin);
        else
            c.textHidden = 2304;  // Gemma3TextConfig's default
        const auto bounded = [&](std::int64_t value, std::int64_t hi, const char* what) {
            if (value < 1 || value > hi)
                configFail(origin + ": " + what + " " + std::to_string(value) + " is outside 1.." + std::to_string(hi));
        };
        bounded(c.hiddenSize, 1 << 16, "vision hidden_size");
        bounded(c.intermediateSize, 1 << 18, "vision intermediate_size");
        bounded(c.layers, 256, "vision num_hidden_layers");
        bounded(c.heads, 1024, "vision num_attention_heads");
        bounded(c.channels, 4, "vision num_channels");
        bounded(c.imageSize, 8192, "vision image_size");
        bounded(c.patchSize, 1024, "vision patch_size");
        bounded(c.tokensPerImage, 1 << 16, "mm_tokens_per_image");
        bounded(c.textHidden, 1 << 17, "text hidden_size");
        if (c.hiddenSize % c.heads != 0)
            configFail(origin + ": the vision hidden_size " + std::to_string(c.hiddenSize) + " does not split into "
                + std::to_string(c.heads) + " heads");
        const auto side = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(c.tokensPerImage))));
        if (c.imageSize % c.patchSize != 0 || side * side != c.tokensPerImage || c.patchesPerSide() % side != 0)
            configFail(origin + ": an image of " + std::to_string(c.imageSize) + " pixels in patches of " + std::to_string(c.patchSize)
                + " does not pool into " + std::to_string(c.tokensPerImage) + " tokens");
        return c;
    } catch (const json::exception& e) {
        return makeError(ErrorCode::InvalidFormat, origin + ": not a usable Gemma 3 vision config (" + e.what() + ")");
    } catch (const ConfigError& e) {
        return makeError(ErrorCode::InvalidFormat, e.message);
    }
}

// ------------------------------------------------------------------ processing

std::string ImageProcessing::fullImageSequence() const
{
    std::string out = "\n\n" + boiToken;
    out.reserve(out.size() + imageToken.size() * static_cast<std::size_t>(imageSeqLength) + eoiToken.size() + 2);
    for (std::int64_t i = 0; i < imageSeqLength; ++i)
        out += imageToken;
    return out + eoiToken + "\n\n";
}

std::string ImageProcessing::expand(const std::string& chat) const
{
    if (boiToken.empty())
        return chat;
    const auto full = fullImageSequence();
    std::string out;
    std::size_t from = 0;
    for (auto at = chat.find(boiToken); at != std::string::npos; at = chat.find(boiToken, from)) {
        out.append(chat, from, at - from);
        out += full;
        from = at + boiToken.size();
    }
    out.append(chat, from);
    return out;
}

namespace detail {

std::optional<json> readJsonIn(const fs::path& file, std::string& problem)
{
    std::error_code ec;
    if (!fs::is_regular_file(file, ec))
        return std::nullopt;
    if (fs::file_size(file, ec) > (4u << 20)) {
        problem = file.string() + ": is larger than 4 MiB; not a processor config";
        return std::nullopt;
    }
    std::ifstream in(file, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    auto parsed = jsonutil::parseUntrusted(s.str(), file.string());
    if (!parsed || !parsed->is_object()) {
        problem = parsed ? file.string() + ": is not a JSON object" : parsed.error().message;
        return std::nullopt;
    }
    return std::move(*parsed);
}

std::optional<std::pair<json, std::string>> firstJsonIn(const std::vector<fs::path>& folders, const char* name)
{
    for (const auto& folder : folders) {
        if (folder.empty())
            continue;
        std::string problem;
        if (auto j = readJsonIn(folder / name, problem))
            return std::pair{std::move(*j), (folder / name).string()};
        if (!problem.empty())
            throw ConfigError{problem};
    }
    return std::nullopt;
}

std::optional<std::string> tokenText(const json& j)
{
    if (j.is_string())
        return j.get<std::string>();
    if (j.is_object() && j.contains("content") && j["content"].is_string())
        return j["content"].get<std::string>();
    return std::nullopt;
}

void readSpecialToken(const json& tokenizerConfig, const char* key, std::string& out)
{
    if (tokenizerConfig.contains(key))
        if (auto t = tokenText(tokenizerConfig[key]))
            out = *t;
    if (const json* extra = jsonutil::objectField(tokenizerConfig, "extra_special_tokens"); extra && extra->contains(key))
        if (auto t = tokenText((*extra)[key]))
            out = *t;
}

void readTriple(const json& j, const char* key, std::vector<double>& out, const std::string& where)
{
    if (!j.contains(key) || j[key].is_null())
        return;
    const auto& v = j[key];
    if (v.is_number())
        out = std::vector<double>(3, v.get<double>());
    else if (v.is_array() && v.size() == 3 && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); }))
        out = {v[0].get<double>(), v[1].get<double>(), v[2].get<double>()};
    else
        configFail(where + ": " + key + " must be a number or three numbers");
}

std::string weightsComponent(const tensorfile::ModelSource& source, const std::string& pipelineComponent)
{
    if (source.kind == tensorfile::SourceKind::DiffusersPipeline)
        return pipelineComponent;
    const bool top = std::any_of(source.checkpoints.begin(), source.checkpoints.end(), [](const auto& c) { return c.component.empty(); });
    return top ? "" : pipelineComponent;
}

fs::path componentFolder(const tensorfile::ModelSource& source, const std::string& component)
{
    std::error_code ec;
    return component.empty() ? (fs::is_directory(source.root, ec) ? source.root : fs::path()) : source.root / component;
}

std::optional<std::pair<std::string, std::string>> componentConfig(
    const tensorfile::ModelSource& source, const std::string& component, const fs::path& folder)
{
    if (const auto it = source.configs.find(component); it != source.configs.end())
        return std::pair{it->second, (folder / "config.json").string()};
    for (const auto& cp : source.checkpoints)
        if (cp.component == component)
            if (const auto it = cp.metadata.find("gemma_config"); it != cp.metadata.end())
                return std::pair{it->second, cp.path.filename().string() + " (gemma_config metadata)"};
    return std::nullopt;
}

std::int64_t indexBytes(const std::map<std::string, nn::StoredTensor>& index, c10::ScalarType dtype)
{
    std::int64_t n = 0;
    for (const auto& [name, stored] : index)
        if (const auto* info = stored.checkpoint->find(stored.name))
            n += info->numel() * static_cast<std::int64_t>(c10::elementSize(dtype));
    return n;
}

}  // namespace detail

Result<ImageProcessing> readImageProcessing(const VisionConfig& config, const std::vector<fs::path>& folders)
{
    ImageProcessing p;
    p.width = p.height = config.imageSize;
    p.imageSeqLength = config.tokensPerImage;
    const auto first = [&](const char* name) { return detail::firstJsonIn(folders, name); };
    try {
        // Hub repos keep preprocessor_config.json; transformers 5 saves it inside
        // processor_config.json as "image_processor".
        auto pre = first("preprocessor_config.json");
        auto proc = first("processor_config.json");
        if (!pre && proc)
            if (const auto* nested = jsonutil::objectField(proc->first, "image_processor"))
                pre = std::pair{*nested, proc->second + " (image_processor)"};
        if (pre) {
            const auto& [j, where] = *pre;
            if (jsonutil::boolField(j, "do_pan_and_scan", false, where))
                configFail(where + ": asks for pan-and-scan crops, which this version does not make");
            p.doResize = jsonutil::boolField(j, "do_resize", true, where);
            p.doRescale = jsonutil::boolField(j, "do_rescale", true, where);
            p.doNormalize = jsonutil::boolField(j, "do_normalize", true, where);
            p.rescaleFactor = numberField(j, "rescale_factor", p.rescaleFactor, where);
            p.resample = static_cast<int>(intField(j, "resample", 2, where));
            if (p.resample != 2 && p.resample != 3)
                configFail(where + ": resample " + std::to_string(p.resample) + " is not supported (2 bilinear or 3 bicubic)");
            if (const auto* size = jsonutil::objectField(j, "size")) {
                p.height = intField(*size, "height", p.height, where);
                p.width = intField(*size, "width", p.width, where);
            }
            detail::readTriple(j, "image_mean", p.mean, where);
            detail::readTriple(j, "image_std", p.stdDev, where);
            if (std::any_of(p.stdDev.begin(), p.stdDev.end(), [](double s) { return !(std::abs(s) > 0) || !std::isfinite(s); }))
                configFail(where + ": image_std holds a zero");
            if (p.doResize && (p.width != config.imageSize || p.height != config.imageSize))
                configFail(where + ": resizes to " + std::to_string(p.width) + "x" + std::to_string(p.height) + ", the vision tower reads "
                    + std::to_string(config.imageSize) + "x" + std::to_string(config.imageSize));
            p.imageSeqLength = intField(j, "image_seq_length", p.imageSeqLength, where);
        }
        if (proc)
            p.imageSeqLength = intField(proc->first, "image_seq_length", p.imageSeqLength, proc->second);
        if (p.imageSeqLength != config.tokensPerImage)
            configFail("the processor's image_seq_length " + std::to_string(p.imageSeqLength) + " is not the model's mm_tokens_per_image "
                + std::to_string(config.tokensPerImage));
        if (auto tok = first("tokenizer_config.json")) {
            const auto& j = tok->first;
            detail::readSpecialToken(j, "boi_token", p.boiToken);
            detail::readSpecialToken(j, "image_token", p.imageToken);
            detail::readSpecialToken(j, "eoi_token", p.eoiToken);
        }
        return p;
    } catch (const json::exception& e) {
        return makeError(ErrorCode::InvalidFormat, std::string("the image processor's config is not usable (") + e.what() + ")");
    } catch (const ConfigError& e) {
        return makeError(ErrorCode::InvalidFormat, e.message);
    }
}

// ------------------------------------------------------------------ PIL's resample

namespace {

// Pillow's fixed point: 32 bits less 8 for the pixel and 2 for the sign and the sum's headroom.
constexpr int kPrecisionBits = 32 - 8 - 2;

double bilinearFilter(double x)
{
    x = std::abs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

double bicubicFilter(double x)
{
    constexpr double a = -0.5;
    x = std::abs(x);
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0)
        return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

double sincFilter(double x)
{
    if (x == 0.0)
        return 1.0;
    x *= std::numbers::pi;
    return std::sin(x) / x;
}

// Pillow's truncated sinc (its half-open window, kept as written).
double lanczosFilter(double x)
{
    return -3.0 <= x && x < 3.0 ? sincFilter(x) * sincFilter(x / 3.0) : 0.0;
}

// One axis: for each output index its first input index, the count, and the integer weights.
struct Coefficients {
    std::int64_t taps = 0;
    std::vector<std::int64_t> first, count;
    std::vector<std::int32_t> weights;  // [out, taps]
};

Coefficients coefficients(std::int64_t inSize, std::int64_t outSize, int filter)
{
    const double support0 = filter == 1 ? 3.0 : filter == 3 ? 2.0 : 1.0;
    const auto kernel = filter == 1 ? lanczosFilter : filter == 3 ? bicubicFilter : bilinearFilter;
    const double scale = static_cast<double>(inSize) / static_cast<double>(outSize);
    const double filterScale = std::max(scale, 1.0);
    const double support = support0 * filterScale;
    Coefficients c;
    c.taps = static_cast<std::int64_t>(std::ceil(support)) * 2 + 1;
    c.first.resize(static_cast<std::size_t>(outSize));
    c.count.resize(static_cast<std::size_t>(outSize));
    c.weights.assign(static_cast<std::size_t>(outSize * c.taps), 0);
    std::vector<double> k(static_cast<std::size_t>(c.taps));
    for (std::int64_t xx = 0; xx < outSize; ++xx) {
        const double center = (static_cast<double>(xx) + 0.5) * scale;
        // Pillow's (int) cast of x + 0.5: truncated toward zero, not rounded (they differ below 0).
        auto xmin = static_cast<std::int64_t>(std::trunc(center - support + 0.5));
        xmin = std::max<std::int64_t>(xmin, 0);
        auto xmax = static_cast<std::int64_t>(std::trunc(center + support + 0.5));
        xmax = std::min(xmax, inSize) - xmin;
        xmax = std::min(xmax, c.taps);
        double total = 0.0;
        const double ss = 1.0 / filterScale;  // multiplied, as Pillow does: dividing rounds differently
        for (std::int64_t x = 0; x < xmax; ++x) {
            const double w = kernel((static_cast<double>(x + xmin) - center + 0.5) * ss);
            k[static_cast<std::size_t>(x)] = w;
            total += w;
        }
        for (std::int64_t x = 0; x < xmax; ++x) {
            double w = total != 0.0 ? k[static_cast<std::size_t>(x)] / total : k[static_cast<std::size_t>(x)];
            w *= static_cast<double>(1 << kPrecisionBits);
            c.weights[static_cast<std::size_t>(xx * c.taps + x)] = static_cast<std::int32_t>(w < 0 ? w - 0.5 : w + 0.5);
        }
        c.first[static_cast<std::size_t>(xx)] = xmin;
        c.count[static_cast<std::size_t>(xx)] = std::max<std::int64_t>(xmax, 0);
    }
    return c;
}

std::uint8_t clip8(std::int64_t sum)
{
    const auto v = sum >> kPrecisionBits;
    return static_cast<std::uint8_t>(std::clamp<std::int64_t>(v, 0, 255));
}

}  // namespace

at::Tensor pilResize(const at::Tensor& rgbIn, std::int64_t width, std::int64_t height, int filter)
{
    TORCH_CHECK(rgbIn.dim() == 3 && rgbIn.size(2) == 3 && rgbIn.scalar_type() == at::kByte, "an RGB image is uint8 [H, W, 3], got ",
        rgbIn.sizes(), " ", rgbIn.scalar_type());
    TORCH_CHECK(filter == 1 || filter == 2 || filter == 3, "PIL resample ", filter, " is not supported (1 Lanczos, 2 bilinear, 3 bicubic)");
    TORCH_CHECK(width > 0 && height > 0 && width <= 1 << 15 && height <= 1 << 15, "a resize to ", width, "x", height, " is out of range");
    const auto rgb = rgbIn.to(at::kCPU).contiguous();
    const auto inH = rgb.size(0), inW = rgb.size(1);
    TORCH_CHECK(inH > 0 && inW > 0, "an empty image cannot be resized");
    if (inW == width && inH == height)
        return rgb.clone();
    const auto* src = rgb.data_ptr<std::uint8_t>();

    // Pillow resamples horizontally first (when the width changes), each pass rounded to 8 bits.
    at::Tensor horizontal = rgb;
    if (inW != width) {
        const auto c = coefficients(inW, width, filter);
        horizontal = at::empty({inH, width, 3}, at::kByte);
        auto* dst = horizontal.data_ptr<std::uint8_t>();
        at::parallel_for(0, inH, 16, [&](std::int64_t y0, std::int64_t y1) {
            for (std::int64_t y = y0; y < y1; ++y)
                for (std::int64_t x = 0; x < width; ++x) {
                    const auto* w = &c.weights[static_cast<std::size_t>(x * c.taps)];
                    const auto first = c.first[static_cast<std::size_t>(x)];
                    for (int ch = 0; ch < 3; ++ch) {
                        std::int64_t sum = std::int64_t{1} << (kPrecisionBits - 1);
                        for (std::int64_t t = 0; t < c.count[static_cast<std::size_t>(x)]; ++t)
                            sum += static_cast<std::int64_t>(src[(y * inW + first + t) * 3 + ch]) * w[t];
                        dst[(y * width + x) * 3 + ch] = clip8(sum);
                    }
                }
        });
    }
    if (inH == height)
        return horizontal;
    const auto c = coefficients(inH, height, filter);
    auto out = at::empty({height, width, 3}, at::kByte);
    const auto* hsrc = horizontal.data_ptr<std::uint8_t>();
    auto* dst = out.data_ptr<std::uint8_t>();
    at::parallel_for(0, height, 16, [&](std::int64_t y0, std::int64_t y1) {
        for (std::int64_t y = y0; y < y1; ++y) {
            const auto* w = &c.weights[static_cast<std::size_t>(y * c.taps)];
            const auto first = c.first[static_cast<std::size_t>(y)];
            for (std::int64_t x = 0; x < width * 3; ++x) {
                std::int64_t sum = std::int64_t{1} << (kPrecisionBits - 1);
                for (std::int64_t t = 0; t < c.count[static_cast<std::size_t>(y)]; ++t)
                    sum += static_cast<std::int64_t>(hsrc[(first + t) * width * 3 + x]) * w[t];
                dst[y * width * 3 + x] = clip8(sum);
            }
        }
    });
    return out;
}

at::Tensor prepareEnhanceImage(const at::Tensor& rgb, std::int64_t longSide)
{
    TORCH_CHECK(rgb.dim() == 3, "an RGB image is [H, W, 3], got ", rgb.sizes());
    const auto h = rgb.size(0), w = rgb.size(1);
    const double scale = static_cast<double>(longSide) / static_cast<double>(std::max(w, h));
    // Python's int() of the float product: truncated.
    const auto tw = static_cast<std::int64_t>(static_cast<double>(w) * scale);
    const auto th = static_cast<std::int64_t>(static_cast<double>(h) * scale);
    if (tw == w && th == h)
        return rgb;
    return pilResize(rgb, std::max<std::int64_t>(tw, 1), std::max<std::int64_t>(th, 1), 3);
}

at::Tensor preprocessImage(const at::Tensor& rgb, const ImageProcessing& p)
{
    auto image = p.doResize ? pilResize(rgb, p.width, p.height, p.resample) : rgb.to(at::kCPU).contiguous();
    // numpy's rescale: in float64, stored as float32; normalize in float32 with float32 constants.
    auto x = image.permute({2, 0, 1}).unsqueeze(0).to(at::kDouble);
    x = (p.doRescale ? x * p.rescaleFactor : x).to(at::kFloat);
    if (p.doNormalize) {
        const auto mean = at::tensor(std::vector<double>(p.mean), at::kDouble).to(at::kFloat).view({1, 3, 1, 1});
        const auto deviation = at::tensor(std::vector<double>(p.stdDev), at::kDouble).to(at::kFloat).view({1, 3, 1, 1});
        x = (x - mean) / deviation;
    }
    return x.contiguous();
}

// ------------------------------------------------------------------ the tower

namespace {

// Hub checkpoints nest SiglipVisionTransformer as vision_model; transformers 5 saves it without.
// Longest first: a name takes the first prefix it starts with.
const std::vector<std::string> kTowerPrefixes{
    "model.vision_tower.vision_model.", "vision_tower.vision_model.", "model.vision_tower.", "vision_tower."};
const std::vector<std::string> kProjectorPrefixes{"model.multi_modal_projector.", "multi_modal_projector."};

// Canonical "tower.*" / "projector.*" names -> stored tensors; the SigLIP pooling head (unused
// by Gemma 3) left out.
std::map<std::string, nn::StoredTensor> visionIndex(const tensorfile::ModelSource& source, const std::string& component)
{
    std::map<std::string, nn::StoredTensor> index;
    for (const auto& cp : source.checkpoints) {
        if (cp.component != component)
            continue;
        for (const auto& t : cp.tensors) {
            if (quant::isQuantizationSibling(t.name))
                continue;
            for (const auto& p : kTowerPrefixes)
                if (t.name.starts_with(p)) {
                    if (!t.name.substr(p.size()).starts_with("head."))
                        index.emplace("tower." + t.name.substr(p.size()), nn::StoredTensor{&cp, t.name});
                    break;
                }
            for (const auto& p : kProjectorPrefixes)
                if (t.name.starts_with(p))
                    index.emplace("projector." + t.name.substr(p.size()), nn::StoredTensor{&cp, t.name});
        }
    }
    return index;
}

struct EncoderLayer {
    at::Tensor norm1Weight, norm1Bias, norm2Weight, norm2Bias;
    nn::Linear q, k, v, out, fc1, fc2;
};

}  // namespace

struct VisionTower::Impl {
    VisionConfig config;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::string origin;
    fs::path folder;
    at::Tensor patchWeight, patchBias, positions;
    std::vector<EncoderLayer> layers;
    at::Tensor postNormWeight, postNormBias;
    at::Tensor softNorm;  // Gemma3RMSNorm's (1 + w), float32
    at::Tensor projection;  // [vision hidden, text hidden]
};

VisionTower::VisionTower(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
VisionTower::~VisionTower() = default;
VisionTower::VisionTower(VisionTower&&) noexcept = default;
VisionTower& VisionTower::operator=(VisionTower&&) noexcept = default;

const VisionConfig& VisionTower::config() const
{
    return m_impl->config;
}
const fs::path& VisionTower::folder() const
{
    return m_impl->folder;
}

std::int64_t VisionTower::bytes(const fs::path& path, c10::ScalarType dtype)
{
    const auto source = tensorfile::ModelSource::open(path);
    if (!source)
        return 0;
    return detail::indexBytes(visionIndex(*source, detail::weightsComponent(*source, "text_encoder")), dtype);
}

Result<VisionTower> VisionTower::load(const fs::path& path, const VisionLoadOptions& options)
{
    auto opened = tensorfile::ModelSource::open(path);
    if (!opened)
        return opened.error();
    const auto& source = *opened;
    const std::string origin = path.string();
    const auto component = detail::weightsComponent(source, "text_encoder");
    auto index = visionIndex(source, component);
    if (!index.count("tower.embeddings.patch_embedding.weight"))
        return makeError(ErrorCode::NotFound,
            origin
                + ": the Gemma 3 weights carry no vision tower (vision_tower.vision_model.*); a text-only export cannot see images. Use "
                  "the full google/gemma-3 checkpoint to let the enhancer read the first frame");

    auto impl = std::make_unique<Impl>();
    impl->device = options.device;
    impl->dtype = options.dtype;
    impl->origin = origin;
    impl->folder = detail::componentFolder(source, component);

    // The config: config.json beside the weights, the one Lightricks embeds, or Gemma 3 12B's
    // when the shapes are its.
    const auto configText = detail::componentConfig(source, component, impl->folder);
    if (configText) {
        auto parsed = parseVisionConfig(configText->first, configText->second);
        if (!parsed)
            return parsed.error();
        impl->config = *parsed;
    } else {
        const auto twelve = VisionConfig::gemma3_12b();
        const auto& patch = index.at("tower.embeddings.patch_embedding.weight");
        const auto* info = patch.checkpoint->find(patch.name);
        if (!info || info->shape != std::vector<std::int64_t>{twelve.hiddenSize, 3, twelve.patchSize, twelve.patchSize})
            return makeError(ErrorCode::NotFound,
                origin
                    + ": no config.json beside the weights and the vision tower is not Gemma 3 12B's; put the model's config.json next to "
                      "them");
        impl->config = twelve;
    }
    const auto& c = impl->config;
    try {
        quant::LoadOptions lo;
        lo.device = options.device;
        nn::StrictWeights w(std::move(index), lo, options.dtype, origin, "Gemma 3", "vision tower");
        const auto d = c.hiddenSize, g = c.patchesPerSide();
        impl->patchWeight = w.dense("tower.embeddings.patch_embedding.weight", {d, c.channels, c.patchSize, c.patchSize}, options.dtype);
        impl->patchBias = w.dense("tower.embeddings.patch_embedding.bias", {d}, options.dtype);
        impl->positions = w.dense("tower.embeddings.position_embedding.weight", {g * g, d}, options.dtype);
        for (std::int64_t i = 0; i < c.layers; ++i) {
            const auto p = "tower.encoder.layers." + std::to_string(i) + ".";
            EncoderLayer l;
            l.norm1Weight = w.dense(p + "layer_norm1.weight", {d}, options.dtype);
            l.norm1Bias = w.dense(p + "layer_norm1.bias", {d}, options.dtype);
            l.norm2Weight = w.dense(p + "layer_norm2.weight", {d}, options.dtype);
            l.norm2Bias = w.dense(p + "layer_norm2.bias", {d}, options.dtype);
            l.q = w.linear(p + "self_attn.q_proj", d, d, true);
            l.k = w.linear(p + "self_attn.k_proj", d, d, true);
            l.v = w.linear(p + "self_attn.v_proj", d, d, true);
            l.out = w.linear(p + "self_attn.out_proj", d, d, true);
            l.fc1 = w.linear(p + "mlp.fc1", c.intermediateSize, d, true);
            l.fc2 = w.linear(p + "mlp.fc2", d, c.intermediateSize, true);
            impl->layers.push_back(std::move(l));
        }
        impl->postNormWeight = w.dense("tower.post_layernorm.weight", {d}, options.dtype);
        impl->postNormBias = w.dense("tower.post_layernorm.bias", {d}, options.dtype);
        const auto soft = w.dense("projector.mm_soft_emb_norm.weight", {d}, at::kFloat);
        if (soft.defined())
            impl->softNorm = (soft + 1.0).contiguous();
        impl->projection = w.dense("projector.mm_input_projection_weight", {d, c.textHidden}, options.dtype);
        if (auto done = w.finish(); !done)
            return done.error();
    } catch (const c10::Error& e) {
        return errorFromException(e, origin + ": loading the Gemma 3 vision tower failed", ErrorCode::Internal);
    }
    return VisionTower(std::move(impl));
}

std::int64_t VisionTower::residentBytes() const
{
    const auto& m = *m_impl;
    std::int64_t n = quant::bytesOf(m.patchWeight) + quant::bytesOf(m.patchBias) + quant::bytesOf(m.positions)
        + quant::bytesOf(m.postNormWeight) + quant::bytesOf(m.postNormBias) + quant::bytesOf(m.softNorm) + quant::bytesOf(m.projection);
    for (const auto& l : m.layers) {
        for (const auto* t : {&l.norm1Weight, &l.norm1Bias, &l.norm2Weight, &l.norm2Bias})
            n += quant::bytesOf(*t);
        for (const auto* lin : {&l.q, &l.k, &l.v, &l.out, &l.fc1, &l.fc2})
            n += lin->residentBytes();
    }
    return n;
}

Result<at::Tensor> VisionTower::embed(const at::Tensor& pixels) const
{
    const auto& m = *m_impl;
    const auto& c = m.config;
    try {
        TORCH_CHECK(pixels.dim() == 4 && pixels.size(1) == c.channels && pixels.size(2) == c.imageSize && pixels.size(3) == c.imageSize,
            "the vision tower reads [N, ", c.channels, ", ", c.imageSize, ", ", c.imageSize, "] pixels, got ", pixels.sizes());
        const auto n = pixels.size(0), d = c.hiddenSize, g = c.patchesPerSide(), t = g * g;
        const auto hd = d / c.heads;
        // SiglipVisionEmbeddings: a strided convolution, flattened row-major, plus the positions.
        auto h = at::conv2d(pixels.to(m.device, m.dtype), m.patchWeight, m.patchBias, {c.patchSize, c.patchSize});
        h = h.flatten(2).transpose(1, 2) + m.positions.unsqueeze(0);
        const auto act = [&](const at::Tensor& x) { return c.geluTanh ? nn::geluTanh(x) : at::gelu(x); };
        for (const auto& l : m.layers) {
            auto x = at::layer_norm(h, {d}, l.norm1Weight, l.norm1Bias, c.layerNormEps);
            const auto heads = [&](const at::Tensor& y) { return y.view({n, t, c.heads, hd}).transpose(1, 2); };
            const auto attended = nn::attention(heads(l.q(x)), heads(l.k(x)), heads(l.v(x)), std::nullopt);
            h = h + l.out(attended.transpose(1, 2).reshape({n, t, d}));
            x = at::layer_norm(h, {d}, l.norm2Weight, l.norm2Bias, c.layerNormEps);
            h = h + l.fc2(act(l.fc1(x)));
        }
        h = at::layer_norm(h, {d}, m.postNormWeight, m.postNormBias, c.layerNormEps);

        // Gemma3MultiModalProjector: the patch grid average-pooled to tokens per side, the
        // soft-embedding norm (Gemma's 1 + w, float32), one matmul into the text width.
        const auto side = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(c.tokensPerImage))));
        const auto kernel = g / side;
        auto grid = h.transpose(1, 2).reshape({n, d, g, g}).contiguous();
        auto pooled = at::avg_pool2d(grid, {kernel, kernel}, {kernel, kernel}).flatten(2).transpose(1, 2);
        const auto normed = gemmaNorm(pooled, m.softNorm, c.layerNormEps);
        return at::matmul(normed, m.projection).to(h.scalar_type());
    } catch (const nn::ForwardError& e) {
        return makeError(e.code, m.origin + ": Gemma 3 vision tower: " + e.what());
    } catch (const c10::Error& e) {
        return errorFromException(e, m.origin + ": Gemma 3 vision tower");
    }
}

}  // namespace vireo::gemma3
