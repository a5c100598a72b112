#include "inference/models/ltx2/ltx2upsampler.h"

#include "inference/models/nn/strictweights.h"
#include "inference/quant/quantizedweight.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/util/device.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace vireo::ltx2 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kModel = "LTX-2 latent upsampler";
constexpr const char* kDiffusersClass = "LTX2LatentUpsamplerModel";
constexpr const char* kLtxCoreClass = "LatentUpsampler";
// Real files: 128 latent channels, mid 1024 (512 for the temporal one), 4 blocks per stage.
constexpr std::int64_t kMaxInChannels = 4096;
constexpr std::int64_t kMaxMidChannels = 8192;
constexpr std::int64_t kMaxBlocks = 64;
constexpr std::int64_t kGroups = 32;  // every GroupNorm of the reference
constexpr double kGroupNormEps = 1e-5;
constexpr const char* kBlurKernel = "upsampler.blur_down.kernel";
constexpr const char* kSupportedScales = "0.75, 1.5, 2.0, 4.0";

struct Rational {
    std::int64_t num = 1, den = 1;
};

// RATIONAL_RESAMPLER_SCALE_MAPPING (diffusers) / _rational_for_scale (ltx-core).
std::optional<Rational> rationalFor(double scale)
{
    if (scale == 0.75)
        return Rational{3, 4};
    if (scale == 1.5)
        return Rational{3, 2};
    if (scale == 2.0)
        return Rational{2, 1};
    if (scale == 4.0)
        return Rational{4, 1};
    return std::nullopt;
}

enum class Kind { Rational, ConvShuffle, Temporal, SpatioTemporal };

Kind kindOf(const LatentUpsamplerConfig& c)
{
    if (c.spatialUpsample && c.temporalUpsample)
        return Kind::SpatioTemporal;
    if (c.temporalUpsample)
        return Kind::Temporal;
    return c.useRationalResampler ? Kind::Rational : Kind::ConvShuffle;
}

std::string formatScale(double s)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", s);
    return buf;
}

Result<void> validate(const LatentUpsamplerConfig& c, const std::string& where)
{
    auto bad = [&](ErrorCode code, const std::string& what) { return makeError(code, where + ": " + what); };
    if (c.inChannels < 1 || c.inChannels > kMaxInChannels)
        return bad(
            ErrorCode::InvalidFormat, "in_channels " + std::to_string(c.inChannels) + " is outside 1.." + std::to_string(kMaxInChannels));
    if (c.midChannels < kGroups || c.midChannels > kMaxMidChannels || c.midChannels % kGroups != 0)
        return bad(ErrorCode::InvalidFormat,
            "mid_channels " + std::to_string(c.midChannels) + " must be a multiple of 32 (GroupNorm(32)) between 32 and "
                + std::to_string(kMaxMidChannels));
    if (c.numBlocksPerStage < 0 || c.numBlocksPerStage > kMaxBlocks)
        return bad(ErrorCode::InvalidFormat,
            "num_blocks_per_stage " + std::to_string(c.numBlocksPerStage) + " is outside 0.." + std::to_string(kMaxBlocks));
    if (c.dims != 2 && c.dims != 3)
        return bad(ErrorCode::InvalidFormat, "dims " + std::to_string(c.dims) + " is neither 2 nor 3");
    if (!c.spatialUpsample && !c.temporalUpsample)
        return bad(ErrorCode::InvalidFormat, "neither spatial_upsample nor temporal_upsample is set");
    // The reference would hand a per-frame [B*F, C, H, W] tensor to a Conv3d, which reads it
    // as one unbatched volume: no meaningful model has this combination.
    if (c.temporalUpsample && c.dims == 2)
        return bad(ErrorCode::Unsupported, "temporal upsampling with dims 2 is not supported (the reference cannot run it)");
    if (kindOf(c) == Kind::Rational && !rationalFor(c.rationalSpatialScale))
        return bad(ErrorCode::Unsupported,
            "spatial scale " + formatScale(c.rationalSpatialScale) + " is not supported; supported scales are " + kSupportedScales);
    return {};
}

// Both config spellings share this reader; ltxCore picks ltx-core's keys and defaults.
Result<LatentUpsamplerConfig> parseConfig(const std::string& text, const std::string& where, bool ltxCore)
{
    using jsonutil::boolField;
    using jsonutil::intField;
    using jsonutil::numberField;
    try {
        auto parsed = jsonutil::parseUntrusted(text, where);
        if (!parsed)
            return parsed.error();
        const auto& j = *parsed;
        if (!j.is_object())
            return makeError(ltxCore ? ErrorCode::NotFound : ErrorCode::InvalidFormat, where + ": is not a JSON object");
        const std::string cls = jsonutil::stringOr(j, "_class_name");
        const char* expected = ltxCore ? kLtxCoreClass : kDiffusersClass;
        if (!cls.empty() && cls != expected)
            return makeError(
                ltxCore ? ErrorCode::NotFound : ErrorCode::InvalidFormat, where + ": is a " + cls + " config, not " + expected);
        LatentUpsamplerConfig c;
        if (ltxCore) {
            if (cls.empty()) {
                bool any = false;
                for (const char* key : {"in_channels", "mid_channels", "num_blocks_per_stage", "dims", "spatial_upsample",
                         "temporal_upsample", "spatial_scale", "rational_resampler"})
                    any = any || j.contains(key);
                if (!any)
                    return makeError(ErrorCode::NotFound, where + ": holds no LatentUpsampler config");
            }
            // ltx-core's LatentUpsamplerConfigurator.from_metadata defaults.
            c.midChannels = 512;
            c.useRationalResampler = false;
        }
        c.inChannels = intField(j, "in_channels", c.inChannels, where);
        c.midChannels = intField(j, "mid_channels", c.midChannels, where);
        c.numBlocksPerStage = intField(j, "num_blocks_per_stage", c.numBlocksPerStage, where);
        c.dims = intField(j, "dims", c.dims, where);
        c.spatialUpsample = boolField(j, "spatial_upsample", c.spatialUpsample, where);
        c.temporalUpsample = boolField(j, "temporal_upsample", c.temporalUpsample, where);
        c.rationalSpatialScale = numberField(j, ltxCore ? "spatial_scale" : "rational_spatial_scale", c.rationalSpatialScale, where);
        c.useRationalResampler = boolField(j, ltxCore ? "rational_resampler" : "use_rational_resampler", c.useRationalResampler, where);
        if (auto ok = validate(c, where); !ok)
            return ok.error();
        return c;
    } catch (const jsonutil::ConfigError& e) {
        return makeError(ErrorCode::InvalidFormat, e.message);
    } catch (const json::exception& e) {
        return makeError(ErrorCode::InvalidFormat, where + ": not a usable latent upsampler config (" + e.what() + ")");
    }
}

using Shape = std::vector<std::int64_t>;

// Every tensor the config implies, by name (diffusers' = ltx-core's module paths). The blur
// kernel is left out: a fixed buffer, optional (see inspect()).
std::map<std::string, Shape> expectedShapes(const LatentUpsamplerConfig& c)
{
    std::map<std::string, Shape> out;
    const auto mid = c.midChannels;
    auto conv = [&](const std::string& name, std::int64_t o, std::int64_t i, std::int64_t dims) {
        out[name + ".weight"] = dims == 3 ? Shape{o, i, 3, 3, 3} : Shape{o, i, 3, 3};
        out[name + ".bias"] = {o};
    };
    auto norm = [&](const std::string& name, std::int64_t ch) {
        out[name + ".weight"] = {ch};
        out[name + ".bias"] = {ch};
    };
    auto stage = [&](const std::string& prefix) {
        for (std::int64_t i = 0; i < c.numBlocksPerStage; ++i) {
            const auto p = prefix + std::to_string(i) + ".";
            conv(p + "conv1", mid, mid, c.dims);
            norm(p + "norm1", mid);
            conv(p + "conv2", mid, mid, c.dims);
            norm(p + "norm2", mid);
        }
    };
    conv("initial_conv", mid, c.inChannels, c.dims);
    norm("initial_norm", mid);
    stage("res_blocks.");
    switch (kindOf(c)) {
    case Kind::Rational: {
        const auto r = *rationalFor(c.rationalSpatialScale);
        conv("upsampler.conv", r.num * r.num * mid, mid, 2);
        break;
    }
    case Kind::ConvShuffle: conv("upsampler.0", 4 * mid, mid, 2); break;
    case Kind::Temporal: conv("upsampler.0", 2 * mid, mid, 3); break;
    case Kind::SpatioTemporal: conv("upsampler.0", 8 * mid, mid, 3); break;
    }
    stage("post_upsample_res_blocks.");
    conv("final_conv", c.inChannels, mid, c.dims);
    return out;
}

// What the shapes determine: dims, in / mid channels, block count and the upsampler's kind.
// Not stored anywhere: the rational resampler's stride, so 9 * mid output channels read as
// x1.5 (the published file) although x0.75 stores the same shapes.
Result<LatentUpsamplerConfig> configFromShapes(const std::map<std::string, Shape>& shapes, const std::string& where)
{
    auto bad = [&](const std::string& what) {
        return makeError(ErrorCode::InvalidFormat,
            where + ": " + what
                + "; the structure cannot be derived from the tensor shapes "
                  "and the file carries no config");
    };
    auto shapeOf = [&](const std::string& name) -> const Shape* {
        const auto it = shapes.find(name);
        return it == shapes.end() ? nullptr : &it->second;
    };
    LatentUpsamplerConfig c;
    const auto* initial = shapeOf("initial_conv.weight");
    if (!initial || (initial->size() != 4 && initial->size() != 5))
        return bad(initial ? "initial_conv.weight is " + nn::shapeText(*initial) + ", not a 2-D or 3-D convolution"
                           : std::string("initial_conv.weight is missing"));
    c.dims = static_cast<std::int64_t>(initial->size()) - 2;
    c.midChannels = (*initial)[0];
    c.inChannels = (*initial)[1];
    std::int64_t blocks = 0;
    const std::string prefix = "res_blocks.";
    for (const auto& [name, shape] : shapes) {
        if (name.rfind(prefix, 0) != 0)
            continue;
        const auto end = name.find('.', prefix.size());
        const auto digits = name.substr(prefix.size(), end == std::string::npos ? std::string::npos : end - prefix.size());
        if (digits.empty() || digits.size() > 2 || digits.find_first_not_of("0123456789") != std::string::npos)
            return bad("'" + name + "' names no block index below " + std::to_string(kMaxBlocks));
        blocks = std::max<std::int64_t>(blocks, std::stoll(digits) + 1);
    }
    c.numBlocksPerStage = blocks;
    if (const auto* conv = shapeOf("upsampler.conv.weight")) {
        if (conv->size() != 4 || c.midChannels <= 0 || (*conv)[0] % c.midChannels != 0)
            return bad("upsampler.conv.weight is " + nn::shapeText(*conv) + ", no rational resampler of " + std::to_string(c.midChannels)
                + " channels");
        const auto ratio = (*conv)[0] / c.midChannels;
        c.useRationalResampler = true;
        if (ratio == 4)
            c.rationalSpatialScale = 2.0;
        else if (ratio == 9)
            c.rationalSpatialScale = 1.5;
        else if (ratio == 16)
            c.rationalSpatialScale = 4.0;
        else
            return bad("upsampler.conv.weight has " + std::to_string(ratio) + " x mid_channels outputs, not 4, 9 or 16 (x2, x1.5, x4)");
    } else if (const auto* up = shapeOf("upsampler.0.weight")) {
        const auto ratio = !up->empty() && c.midChannels > 0 ? (*up)[0] / c.midChannels : 0;
        c.useRationalResampler = false;
        if (up->size() == 4 && ratio == 4) {
            c.spatialUpsample = true;
        } else if (up->size() == 5 && ratio == 2) {
            c.spatialUpsample = false;
            c.temporalUpsample = true;
        } else if (up->size() == 5 && ratio == 8) {
            c.temporalUpsample = true;
        } else {
            return bad("upsampler.0.weight is " + nn::shapeText(*up) + ", none of Conv2d x4, Conv3d x2 or Conv3d x8 mid_channels");
        }
    } else {
        return bad("neither upsampler.conv.weight nor upsampler.0.weight is stored");
    }
    if (auto ok = validate(c, where); !ok)
        return ok.error();
    return c;
}

// The file or folder read, its tensors by name and the config everything was checked against.
struct Inspected {
    std::shared_ptr<tensorfile::ModelSource> source;  // owns what the index points into
    std::string origin;
    std::string configFrom;
    LatentUpsamplerConfig config;
    std::map<std::string, nn::StoredTensor> index;
    bool blurKernel = false;
};

Result<Inspected> inspect(const fs::path& path)
{
    fs::path target = path;
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
        auto resolved = tensorfile::resolveHubCacheFolder(path);
        if (!resolved)
            return resolved.error();
        target = *resolved;
        // A diffusers repo (Lightricks/LTX-2) keeps the upsampler in its own component folder.
        if (fs::is_directory(target / "latent_upsampler", ec))
            target /= "latent_upsampler";
    }
    auto opened = tensorfile::ModelSource::open(target);
    if (!opened)
        return opened.error();
    Inspected r;
    r.source = std::make_shared<tensorfile::ModelSource>(std::move(*opened));
    r.origin = target.string();
    const auto& source = *r.source;
    std::map<std::string, Shape> shapes;
    std::map<std::string, std::string> fileOf;
    const tensorfile::Checkpoint* withMetadata = nullptr;
    for (const auto& cp : source.checkpoints) {
        if (!cp.component.empty())
            continue;
        if (!withMetadata && cp.metadata.count("config"))
            withMetadata = &cp;
        for (const auto& t : cp.tensors) {
            if (quant::isQuantizationSibling(t.name))
                continue;
            if (auto [it, fresh] = fileOf.emplace(t.name, cp.path.filename().string()); !fresh)
                return makeError(ErrorCode::InvalidFormat,
                    r.origin + ": " + t.name + " is stored in both " + it->second + " and " + cp.path.filename().string()
                        + "; point at the upsampler's own file");
            r.index.emplace(t.name, nn::StoredTensor{&cp, t.name});
            shapes.emplace(t.name, t.shape);
        }
    }
    bool upsamplerNames = shapes.count("initial_conv.weight") != 0;
    for (const auto& [name, shape] : shapes)
        upsamplerNames = upsamplerNames || name.rfind("upsampler.", 0) == 0;
    if (!upsamplerNames) {
        std::vector<std::string> some;
        for (const auto& [name, shape] : shapes)
            if (some.size() < 3)
                some.push_back(name);
        return makeError(ErrorCode::NotFound,
            r.origin + ": is not an " + kModel + " (no initial_conv or upsampler tensors"
                + (some.empty() ? std::string(", no tensors at its top level") : "; it holds " + nn::listNames(some, 3)) + ")");
    }

    std::optional<LatentUpsamplerConfig> config;
    if (auto it = source.configs.find(""); it != source.configs.end()) {
        // Next to a single file, a config.json may belong to anything; in a folder it is the
        // component's own.
        const bool file = source.kind == tensorfile::SourceKind::SafetensorsFile || source.kind == tensorfile::SourceKind::GgufFile;
        auto parsedJson = jsonutil::parseUntrusted(it->second, "config.json");
        const bool ours = parsedJson && jsonutil::stringOr(*parsedJson, "_class_name") == kDiffusersClass;
        if (!file || ours) {
            const auto where = (fs::is_directory(target, ec) ? target : target.parent_path()) / "config.json";
            auto parsed = parseConfig(it->second, where.string(), false);
            if (!parsed)
                return parsed.error();
            config = *parsed;
            r.configFrom = "config.json";
        }
    }
    if (!config && withMetadata) {
        auto parsed = parseConfig(withMetadata->metadata.at("config"), withMetadata->path.string() + ": __metadata__ config", true);
        if (parsed) {
            config = *parsed;
            r.configFrom = "__metadata__ config";
        } else if (parsed.error().code != ErrorCode::NotFound) {
            return parsed.error();
        }
    }
    if (!config) {
        auto derived = configFromShapes(shapes, r.origin);
        if (!derived)
            return derived.error();
        config = *derived;
        r.configFrom = "tensor shapes";
    }
    r.config = *config;

    const auto expected = expectedShapes(r.config);
    std::vector<std::string> missing, unknown, wrong;
    for (const auto& [name, shape] : expected) {
        const auto it = shapes.find(name);
        if (it == shapes.end())
            missing.push_back(name);
        else if (it->second != shape)
            wrong.push_back(name + " is " + nn::shapeText(it->second) + ", the config implies " + nn::shapeText(shape));
    }
    for (const auto& [name, shape] : shapes) {
        if (expected.count(name))
            continue;
        // The blur kernel is a persistent buffer of the rational resampler: diffusers' converter
        // loads it strictly, so published files carry it, but it is a constant (binomial 5x5)
        // and repackaged files drop it. Taken from the file when present, as the reference does.
        if (name == kBlurKernel && kindOf(r.config) == Kind::Rational) {
            if (shape != Shape{1, 1, 5, 5})
                wrong.push_back(name + " is " + nn::shapeText(shape) + ", the blur kernel is [1, 1, 5, 5]");
            r.blurKernel = true;
            continue;
        }
        unknown.push_back(name);
    }
    const auto by = " (config from " + r.configFrom + ": " + describeLatentUpsampler(r.config) + ")";
    if (!wrong.empty())
        return makeError(ErrorCode::InvalidFormat,
            r.origin + ": " + std::to_string(wrong.size()) + " tensor(s) disagree with the config" + by + ": " + nn::listNames(wrong, 4));
    if (!missing.empty() || !unknown.empty()) {
        std::string what;
        if (!missing.empty())
            what = std::to_string(missing.size()) + " tensor(s) missing: " + nn::listNames(missing);
        if (!unknown.empty())
            what +=
                (what.empty() ? "" : "; ") + std::to_string(unknown.size()) + " tensor(s) match no parameter: " + nn::listNames(unknown);
        return makeError(ErrorCode::InvalidFormat,
            r.origin + ": the tensors do not fit the " + kModel + by + ": " + what
                + (unknown.empty() ? "; the download may be partial" : ""));
    }
    return r;
}

struct Stopped {};

struct Conv {
    at::Tensor weight, bias;
    at::Tensor operator()(const at::Tensor& x) const
    {
        return weight.dim() == 5 ? at::conv3d(x, weight, bias, {1, 1, 1}, {1, 1, 1}) : at::conv2d(x, weight, bias, {1, 1}, {1, 1});
    }
};

struct GroupNorm {
    at::Tensor weight, bias;
    at::Tensor operator()(const at::Tensor& x) const { return at::group_norm(x, kGroups, weight, bias, kGroupNormEps); }
};

struct ResBlock {
    Conv conv1, conv2;
    GroupNorm norm1, norm2;
    at::Tensor operator()(const at::Tensor& x) const
    {
        auto h = at::silu(norm1(conv1(x)));
        h = norm2(conv2(h));
        return at::silu(h + x);
    }
};

// PixelShuffleND: b (c p) d h w -> b c (d p) h w over the last n dims, p per dim.
at::Tensor pixelShuffle2d(const at::Tensor& x, std::int64_t p)
{
    const auto n = x.size(0), h = x.size(2), w = x.size(3);
    return x.reshape({n, -1, p, p, h, w}).permute({0, 1, 4, 2, 5, 3}).reshape({n, -1, h * p, w * p});
}

at::Tensor pixelShuffle3d(const at::Tensor& x)
{
    const auto b = x.size(0), d = x.size(2), h = x.size(3), w = x.size(4);
    return x.reshape({b, -1, 2, 2, 2, d, h, w}).permute({0, 1, 5, 2, 6, 3, 7, 4}).reshape({b, -1, d * 2, h * 2, w * 2});
}

at::Tensor pixelShuffleTime(const at::Tensor& x)
{
    const auto b = x.size(0), f = x.size(2), h = x.size(3), w = x.size(4);
    return x.reshape({b, -1, 2, f, h, w}).permute({0, 1, 3, 2, 4, 5}).reshape({b, -1, f * 2, h, w});
}

using quant::bytesOf;

at::Tensor binomialKernel()
{
    const double k[5] = {1, 4, 6, 4, 1};
    auto t = at::empty({1, 1, 5, 5}, at::kFloat);
    auto a = t.accessor<float, 4>();
    for (int y = 0; y < 5; ++y)
        for (int x = 0; x < 5; ++x)
            a[0][0][y][x] = static_cast<float>(k[y] * k[x] / 256.0);
    return t;
}

}  // namespace

Result<LatentUpsamplerConfig> latentUpsamplerConfigFromDiffusers(const std::string& json)
{
    return parseConfig(json, "latent_upsampler/config.json", false);
}

Result<LatentUpsamplerConfig> latentUpsamplerConfigFromLtxCore(const std::string& json)
{
    return parseConfig(json, "__metadata__ config", true);
}

std::string describeLatentUpsampler(const LatentUpsamplerConfig& c)
{
    std::string kind;
    switch (kindOf(c)) {
    case Kind::Rational: {
        const auto r = rationalFor(c.rationalSpatialScale);
        kind = "spatial x" + formatScale(c.rationalSpatialScale)
            + (r ? " (rational " + std::to_string(r->num) + "/" + std::to_string(r->den) + ")" : std::string(" (rational)"));
        break;
    }
    case Kind::ConvShuffle: kind = "spatial x2 (Conv2d + PixelShuffle)"; break;
    case Kind::Temporal: kind = "temporal x2"; break;
    case Kind::SpatioTemporal: kind = "spatial x2 + temporal x2"; break;
    }
    return kind + ", " + (c.dims == 2 ? "Conv2d" : "Conv3d") + ", " + std::to_string(c.inChannels) + " -> " + std::to_string(c.midChannels)
        + " channels, " + std::to_string(c.numBlocksPerStage) + " + " + std::to_string(c.numBlocksPerStage) + " ResBlocks";
}

Result<LatentUpsamplerConfig> probeLatentUpsampler(const fs::path& fileOrFolder)
{
    auto r = inspect(fileOrFolder);
    if (!r)
        return r.error();
    return r->config;
}

struct LatentUpsampler::Impl {
    LatentUpsamplerConfig config;
    Kind kind = Kind::Rational;
    Rational rational;
    c10::Device device = c10::kCPU;
    c10::ScalarType dtype = c10::kFloat;
    std::string origin;
    Conv initialConv, upsampler, finalConv;
    GroupNorm initialNorm;
    std::vector<ResBlock> pre, post;
    at::Tensor blur;  // depthwise [mid, 1, 5, 5], only when the resampler strides

    at::Tensor forward(const at::Tensor& latents, const std::stop_token& stop) const;
    at::Tensor spatial(const at::Tensor& x) const;
};

LatentUpsampler::LatentUpsampler(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
LatentUpsampler::~LatentUpsampler() = default;
LatentUpsampler::LatentUpsampler(LatentUpsampler&&) noexcept = default;
LatentUpsampler& LatentUpsampler::operator=(LatentUpsampler&&) noexcept = default;

const LatentUpsamplerConfig& LatentUpsampler::config() const
{
    return m_impl->config;
}
c10::Device LatentUpsampler::device() const
{
    return m_impl->device;
}
c10::ScalarType LatentUpsampler::dtype() const
{
    return m_impl->dtype;
}

double LatentUpsampler::spatialScale() const
{
    switch (m_impl->kind) {
    case Kind::Rational: return static_cast<double>(m_impl->rational.num) / static_cast<double>(m_impl->rational.den);
    case Kind::Temporal: return 1.0;
    case Kind::ConvShuffle:
    case Kind::SpatioTemporal: return 2.0;
    }
    return 1.0;
}

int LatentUpsampler::temporalScale() const
{
    return m_impl->config.temporalUpsample ? 2 : 1;
}

std::int64_t LatentUpsampler::residentBytes() const
{
    const auto& m = *m_impl;
    std::int64_t n = 0;
    auto conv = [&](const Conv& c) { n += bytesOf(c.weight) + bytesOf(c.bias); };
    auto norm = [&](const GroupNorm& g) { n += bytesOf(g.weight) + bytesOf(g.bias); };
    conv(m.initialConv);
    norm(m.initialNorm);
    conv(m.upsampler);
    conv(m.finalConv);
    for (const auto* stage : {&m.pre, &m.post})
        for (const auto& b : *stage) {
            conv(b.conv1);
            conv(b.conv2);
            norm(b.norm1);
            norm(b.norm2);
        }
    return n + bytesOf(m.blur);
}

Result<LatentUpsampler> LatentUpsampler::load(const fs::path& fileOrFolder, const LatentUpsamplerLoadOptions& options)
{
    if (auto bad = checkComputeDtype(std::string(kModel), options.dtype); !bad)
        return bad.error();
    auto inspected = inspect(fileOrFolder);
    if (!inspected)
        return inspected.error();
    auto& ins = *inspected;
    auto impl = std::make_unique<Impl>();
    impl->config = ins.config;
    impl->kind = kindOf(ins.config);
    impl->device = options.device;
    impl->dtype = options.dtype;
    impl->origin = ins.origin;
    const auto& c = impl->config;
    const auto dt = options.dtype;
    try {
        quant::LoadOptions lo;
        lo.device = options.device;
        // inspect() checked names and shapes already; StrictWeights checks them again as it
        // reads, and reports bytes that do not decode.
        std::map<std::string, nn::StoredTensor> index = ins.index;
        nn::StrictWeights w(std::move(index), lo, dt, ins.origin, kModel, "weights");
        const auto shapes = expectedShapes(c);
        auto conv = [&](const std::string& name) {
            const auto& shape = shapes.at(name + ".weight");
            return Conv{w.dense(name + ".weight", shape, dt), w.dense(name + ".bias", {shape[0]}, dt)};
        };
        auto norm = [&](const std::string& name) {
            return GroupNorm{w.dense(name + ".weight", {c.midChannels}, dt), w.dense(name + ".bias", {c.midChannels}, dt)};
        };
        auto stage = [&](const std::string& prefix, std::vector<ResBlock>& out) {
            for (std::int64_t i = 0; i < c.numBlocksPerStage; ++i) {
                const auto p = prefix + std::to_string(i) + ".";
                out.push_back(ResBlock{conv(p + "conv1"), conv(p + "conv2"), norm(p + "norm1"), norm(p + "norm2")});
            }
        };
        impl->initialConv = conv("initial_conv");
        impl->initialNorm = norm("initial_norm");
        stage("res_blocks.", impl->pre);
        at::Tensor kernel;
        if (impl->kind == Kind::Rational) {
            impl->rational = *rationalFor(c.rationalSpatialScale);
            impl->upsampler = conv("upsampler.conv");
            kernel = ins.blurKernel ? w.dense(kBlurKernel, {1, 1, 5, 5}, dt) : binomialKernel().to(options.device, dt);
        } else {
            impl->upsampler = conv("upsampler.0");
        }
        stage("post_upsample_res_blocks.", impl->post);
        impl->finalConv = conv("final_conv");
        if (auto done = w.finish(); !done)
            return done.error();
        // BlurDownsample returns its input at stride 1 (every x2 and x4 resampler).
        if (impl->kind == Kind::Rational && impl->rational.den > 1)
            impl->blur = kernel.expand({c.midChannels, 1, 5, 5}).contiguous();
    } catch (const c10::Error& e) {
        return errorFromException(e, ins.origin + ": loading the " + kModel + " failed", ErrorCode::Internal);
    }
    return LatentUpsampler(std::move(impl));
}

at::Tensor LatentUpsampler::Impl::spatial(const at::Tensor& x) const
{
    // x: [N, mid, H, W], frames folded into the batch.
    if (kind == Kind::ConvShuffle)
        return pixelShuffle2d(upsampler(x), 2);
    auto y = pixelShuffle2d(upsampler(x), rational.num);
    if (blur.defined())
        y = at::conv2d(y, blur, {}, {rational.den, rational.den}, {2, 2}, {1, 1}, config.midChannels);
    return y;
}

at::Tensor LatentUpsampler::Impl::forward(const at::Tensor& latents, const std::stop_token& stop) const
{
    const auto b = latents.size(0);
    auto check = [&] {
        if (stop.stop_requested())
            throw Stopped{};
    };
    // [B, C, F, H, W] <-> [B * F, C, H, W]
    auto fold = [](const at::Tensor& t) { return t.permute({0, 2, 1, 3, 4}).flatten(0, 1).contiguous(); };
    auto unfold = [b](const at::Tensor& t) { return t.unflatten(0, {b, -1}).permute({0, 2, 1, 3, 4}).contiguous(); };

    auto x = latents.to(device, dtype);
    if (config.dims == 2)
        x = fold(x);
    check();
    x = at::silu(initialNorm(initialConv(x)));
    for (const auto& block : pre) {
        check();
        x = block(x);
    }
    check();
    if (config.dims == 2) {
        x = spatial(x);
    } else if (kind == Kind::Temporal || kind == Kind::SpatioTemporal) {
        x = upsampler(x);
        x = kind == Kind::Temporal ? pixelShuffleTime(x) : pixelShuffle3d(x);
        // The first latent frame stands for one pixel frame: its doubled copy is dropped.
        x = x.slice(2, 1);
    } else {
        x = unfold(spatial(fold(x)));
    }
    for (const auto& block : post) {
        check();
        x = block(x);
    }
    x = finalConv(x);
    return config.dims == 2 ? unfold(x) : x;
}

Result<at::Tensor> LatentUpsampler::upsample(const at::Tensor& latents, std::stop_token stop) const
{
    const auto& m = *m_impl;
    auto invalid = [](const std::string& what) { return makeError(ErrorCode::InvalidArgument, std::string(kModel) + ": " + what); };
    if (!latents.defined() || latents.dim() != 5)
        return invalid("latents must be [B, C, F, H, W], got " + (latents.defined() ? std::to_string(latents.dim()) + "-D" : "nothing"));
    if (!c10::isFloatingType(latents.scalar_type()))
        return invalid(std::string("latents must be floating point, got ") + c10::toString(latents.scalar_type()));
    if (latents.size(1) != m.config.inChannels)
        return invalid(
            "latents have " + std::to_string(latents.size(1)) + " channels, the upsampler takes " + std::to_string(m.config.inChannels));
    for (std::int64_t d = 0; d < 5; ++d)
        if (latents.size(d) < 1)
            return invalid("latents " + nn::shapeText(latents.sizes().vec()) + " are empty");
    try {
        return m.forward(latents, stop);
    } catch (const Stopped&) {
        return makeError(ErrorCode::Cancelled, "latent upsampling cancelled");
    } catch (const c10::OutOfMemoryError& e) {
        return makeError(ErrorCode::OutOfMemory, std::string(kModel) + " ran out of memory: " + e.what_without_backtrace());
    } catch (const c10::Error& e) {
        return errorFromException(e, m.origin + ": " + kModel);
    }
}

Result<at::Tensor> LatentUpsampler::upsampleNormalized(
    const at::Tensor& latents, const at::Tensor& latentsMean, const at::Tensor& latentsStd, std::stop_token stop) const
{
    const auto& m = *m_impl;
    const auto channels = m.config.inChannels;
    auto invalid = [](const std::string& what) { return makeError(ErrorCode::InvalidArgument, std::string(kModel) + ": " + what); };
    for (const auto* t : {&latentsMean, &latentsStd})
        if (!t->defined() || t->numel() != channels || !c10::isFloatingType(t->scalar_type()))
            return invalid("the latent statistics must hold " + std::to_string(channels) + " floating-point values, got "
                + (t->defined() ? nn::shapeText(t->sizes().vec()) : std::string("nothing")));
    if (!latents.defined() || latents.dim() != 5)
        return upsample(latents, stop);  // its error
    try {
        const auto mean = latentsMean.to(m.device, at::kFloat).reshape({1, -1, 1, 1, 1});
        const auto stdev = latentsStd.to(m.device, at::kFloat).reshape({1, -1, 1, 1, 1});
        if (!at::isfinite(mean).all().item<bool>() || !at::isfinite(stdev).all().item<bool>() || !(stdev != 0).all().item<bool>())
            return invalid("the latent statistics hold a non-finite mean or std, or a zero std");
        // LTX2LatentUpsamplePipeline._denormalize_latents, then LTX2Pipeline._normalize_latents
        // (scaling_factor 1 in every LTX-2 VAE config).
        auto up = upsample(latents.to(m.device, at::kFloat) * stdev + mean, stop);
        if (!up)
            return up.error();
        return (up->to(at::kFloat) - mean) / stdev;
    } catch (const c10::Error& e) {
        return errorFromException(e, m.origin + ": " + kModel);
    }
}

}  // namespace vireo::ltx2
