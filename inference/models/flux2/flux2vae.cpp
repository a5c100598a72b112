#include "inference/models/flux2/flux2vae.h"

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

namespace vireo::flux2 {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using jsonutil::boolField;
using jsonutil::ConfigError;
using jsonutil::configFail;
using jsonutil::intField;
using jsonutil::numberField;
std::vector<std::int64_t> intList(const json& j, const char* key, std::vector<std::int64_t> fallback, const std::string& where)
{
    if (!j.contains(key) || j[key].is_null())
        return fallback;
    if (!j[key].is_array() || j[key].empty() || j[key].size() > 8)
        configFail(where + ": '" + key + "' must list 1 to 8 sizes, got " + jsonutil::shortDump(j[key]));
    std::vector<std::int64_t> out;
    for (const auto& v : j[key]) {
        if (!v.is_number_integer() || v.get<std::int64_t>() <= 0 || v.get<std::int64_t>() > 8192)
            configFail(where + ": '" + key + "' holds " + jsonutil::shortDump(v));
        out.push_back(v.get<std::int64_t>());
    }
    return out;
}

struct Conv {
    at::Tensor weight, bias;
    at::Tensor operator()(const at::Tensor& x) const
    {
        const auto pad = weight.size(-1) / 2;
        return at::conv2d(x, weight, bias, {1, 1}, {pad, pad});
    }
};

struct GroupNorm {
    at::Tensor weight, bias;
    std::int64_t groups = 32;
    at::Tensor operator()(const at::Tensor& x) const { return at::group_norm(x, groups, weight, bias, 1e-6); }
};

struct Resnet {
    GroupNorm norm1, norm2;
    Conv conv1, conv2;
    std::optional<Conv> shortcut;
    at::Tensor operator()(const at::Tensor& x) const
    {
        auto h = conv1(at::silu(norm1(x)));
        h = conv2(at::silu(norm2(h)));
        return (shortcut ? (*shortcut)(x) : x) + h;
    }
};

struct Attention {
    GroupNorm norm;
    at::Tensor q, qb, k, kb, v, vb, o, ob;
    at::Tensor operator()(const at::Tensor& x) const
    {
        const auto b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
        const auto t = norm(x).view({b, c, h * w}).transpose(1, 2);
        const auto qq = at::linear(t, q, qb).unsqueeze(1), kk = at::linear(t, k, kb).unsqueeze(1), vv = at::linear(t, v, vb).unsqueeze(1);
        // One head over every latent pixel (65536 at 2048 x 2048, head dim 512, which the flash
        // kernels do not take): nn::attention bounds the score matrix by chunking the queries.
        const auto a = nn::attention(qq, kk, vv, std::nullopt).squeeze(1);
        return at::linear(a, o, ob).transpose(1, 2).reshape({b, c, h, w}) + x;
    }
};

struct UpBlock {
    std::vector<Resnet> resnets;
    std::optional<Conv> upsample;
};

using quant::bytesOf;

}  // namespace

Result<VaeConfig> parseVaeConfig(const std::string& configJson, const std::string& origin)
{
    try {
        auto parsed = jsonutil::parseUntrusted(configJson, origin);
        if (!parsed)
            return parsed.error();
        const auto& j = *parsed;
        if (!j.is_object())
            configFail(origin + ": is not a JSON object");
        const std::string cls = j.contains("_class_name") && j["_class_name"].is_string() ? j["_class_name"].get<std::string>() : "";
        if (!cls.empty() && cls != "AutoencoderKLFlux2")
            configFail(origin + ": is a " + cls + " config, not AutoencoderKLFlux2");
        VaeConfig c;
        c.latentChannels = intField(j, "latent_channels", c.latentChannels, origin);
        c.outChannels = intField(j, "out_channels", c.outChannels, origin);
        c.blockOut = intList(j, "block_out_channels", c.blockOut, origin);
        c.blockOut = intList(j, "decoder_block_out_channels", c.blockOut, origin);
        c.layersPerBlock = intField(j, "layers_per_block", c.layersPerBlock, origin);
        c.groups = intField(j, "norm_num_groups", c.groups, origin);
        c.patch = intList(j, "patch_size", c.patch, origin);
        if (j.contains("batch_norm_eps") && j["batch_norm_eps"].is_number())
            c.batchNormEps = j["batch_norm_eps"].get<double>();
        for (const char* key : {"mid_block_add_attention", "use_post_quant_conv"})
            if (j.contains(key) && !j[key].is_null() && !j[key].is_boolean())
                configFail(origin + ": '" + key + "' must be true or false");
        c.midAttention = j.value("mid_block_add_attention", true);
        c.postQuantConv = j.value("use_post_quant_conv", true);
        const std::string act = j.contains("act_fn") && j["act_fn"].is_string() ? j["act_fn"].get<std::string>() : "silu";
        if (act != "silu")
            configFail(origin + ": act_fn '" + act + "' is not supported (FLUX.2 uses silu)");
        bool ok = c.latentChannels > 0 && c.latentChannels <= 4096 && c.outChannels > 0 && c.outChannels <= 64 && c.layersPerBlock > 0
            && c.layersPerBlock <= 16 && c.groups > 0 && c.patch.size() == 2 && c.patch[0] == c.patch[1] && c.batchNormEps > 0;
        for (auto ch : c.blockOut)
            ok = ok && c.groups > 0 && ch % c.groups == 0;
        if (!ok)
            configFail(origin + ": inconsistent AutoencoderKLFlux2 sizes (latent " + std::to_string(c.latentChannels) + ", groups "
                + std::to_string(c.groups) + ")");
        return c;
    } catch (const json::exception& e) {
        return makeError(ErrorCode::InvalidFormat, origin + ": not a usable AutoencoderKLFlux2 config (" + e.what() + ")");
    } catch (const ConfigError& e) {
        return makeError(ErrorCode::InvalidFormat, e.message);
    }
}

struct VaeDecoder::Impl {
    VaeConfig config;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    std::string origin;
    std::optional<Conv> postQuantConv;
    Conv convIn, convOut;
    Resnet mid0, mid1;
    std::optional<Attention> midAttention;
    std::vector<UpBlock> up;
    GroupNorm normOut;
    at::Tensor latentMean, latentStd;
};

VaeDecoder::VaeDecoder(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
VaeDecoder::~VaeDecoder() = default;
VaeDecoder::VaeDecoder(VaeDecoder&&) noexcept = default;
VaeDecoder& VaeDecoder::operator=(VaeDecoder&&) noexcept = default;

const at::Tensor& VaeDecoder::latentMean() const
{
    return m_impl->latentMean;
}
const at::Tensor& VaeDecoder::latentStd() const
{
    return m_impl->latentStd;
}
const VaeConfig& VaeDecoder::config() const
{
    return m_impl->config;
}

Result<VaeDecoder> VaeDecoder::load(const fs::path& path, const VaeLoadOptions& options)
{
    if (auto bad = checkComputeDtype("FLUX.2 VAE", options.dtype); !bad)
        return bad.error();
    auto opened = tensorfile::ModelSource::open(path);
    if (!opened)
        return opened.error();
    const auto& source = *opened;
    const bool top = std::any_of(source.checkpoints.begin(), source.checkpoints.end(), [](const auto& c) { return c.component.empty(); });
    const std::string component = source.kind != tensorfile::SourceKind::DiffusersPipeline && top ? "" : options.component;
    const std::string origin = component.empty() ? path.string() : (path / component).string();
    std::map<std::string, nn::StoredTensor> index;
    for (const auto& cp : source.checkpoints)
        if (cp.component == component)
            for (const auto& t : cp.tensors)
                // The encoder side is not needed to generate; num_batches_tracked is bookkeeping.
                if (!quant::isQuantizationSibling(t.name) && t.name.rfind("encoder.", 0) != 0 && t.name.rfind("quant_conv.", 0) != 0
                    && t.name != "bn.num_batches_tracked")
                    index.emplace(t.name, nn::StoredTensor{&cp, t.name});
    if (index.empty())
        return makeError(ErrorCode::NotFound, origin + ": holds no FLUX.2 VAE weights");
    VaeConfig config;
    if (options.config) {
        config = *options.config;
    } else if (auto it = source.configs.find(component); it != source.configs.end()) {
        auto parsed = parseVaeConfig(it->second, origin + "/config.json");
        if (!parsed)
            return parsed.error();
        config = *parsed;
    }

    auto impl = std::make_unique<Impl>();
    impl->config = config;
    impl->device = options.device;
    impl->dtype = options.dtype;
    impl->origin = origin;
    const auto& c = impl->config;
    try {
        quant::LoadOptions lo;
        lo.device = options.device;
        nn::StrictWeights w(std::move(index), lo, options.dtype, origin, "FLUX.2 VAE", "decoder");
        const auto dt = options.dtype;
        auto conv = [&](const std::string& name, std::int64_t out, std::int64_t in, std::int64_t k) {
            return Conv{w.dense(name + ".weight", {out, in, k, k}, dt), w.dense(name + ".bias", {out}, dt)};
        };
        auto norm = [&](const std::string& name, std::int64_t ch) {
            return GroupNorm{w.dense(name + ".weight", {ch}, dt), w.dense(name + ".bias", {ch}, dt), c.groups};
        };
        auto resnet = [&](const std::string& p, std::int64_t in, std::int64_t out) {
            Resnet r{norm(p + "norm1", in), norm(p + "norm2", out), conv(p + "conv1", out, in, 3), conv(p + "conv2", out, out, 3), {}};
            if (in != out)
                r.shortcut = conv(p + "conv_shortcut", out, in, 1);
            return r;
        };
        const auto lc = c.latentChannels;
        if (c.postQuantConv)
            impl->postQuantConv = conv("post_quant_conv", lc, lc, 1);
        const auto top = c.blockOut.back();
        impl->convIn = conv("decoder.conv_in", top, lc, 3);
        impl->mid0 = resnet("decoder.mid_block.resnets.0.", top, top);
        impl->mid1 = resnet("decoder.mid_block.resnets.1.", top, top);
        if (c.midAttention) {
            const std::string p = "decoder.mid_block.attentions.0.";
            Attention a;
            a.norm = norm(p + "group_norm", top);
            a.q = w.dense(p + "to_q.weight", {top, top}, dt);
            a.qb = w.dense(p + "to_q.bias", {top}, dt);
            a.k = w.dense(p + "to_k.weight", {top, top}, dt);
            a.kb = w.dense(p + "to_k.bias", {top}, dt);
            a.v = w.dense(p + "to_v.weight", {top, top}, dt);
            a.vb = w.dense(p + "to_v.bias", {top}, dt);
            a.o = w.dense(p + "to_out.0.weight", {top, top}, dt);
            a.ob = w.dense(p + "to_out.0.bias", {top}, dt);
            impl->midAttention = std::move(a);
        }
        const auto levels = static_cast<std::int64_t>(c.blockOut.size());
        std::int64_t prev = top;
        for (std::int64_t i = 0; i < levels; ++i) {
            const auto out = c.blockOut[static_cast<std::size_t>(levels - 1 - i)];
            const auto p = "decoder.up_blocks." + std::to_string(i) + ".";
            UpBlock b;
            for (std::int64_t j = 0; j <= c.layersPerBlock; ++j)
                b.resnets.push_back(resnet(p + "resnets." + std::to_string(j) + ".", j == 0 ? prev : out, out));
            if (i + 1 < levels)
                b.upsample = conv(p + "upsamplers.0.conv", out, out, 3);
            impl->up.push_back(std::move(b));
            prev = out;
        }
        impl->normOut = norm("decoder.conv_norm_out", c.blockOut.front());
        impl->convOut = conv("decoder.conv_out", c.outChannels, c.blockOut.front(), 3);
        const auto packed = lc * c.patch[0] * c.patch[1];
        const auto mean = w.dense("bn.running_mean", {packed}, at::kFloat);
        const auto var = w.dense("bn.running_var", {packed}, at::kFloat);
        if (auto done = w.finish(); !done)
            return done.error();
        if (!at::isfinite(var).all().item<bool>() || (var < 0).any().item<bool>() || !at::isfinite(mean).all().item<bool>())
            return makeError(ErrorCode::InvalidFormat, origin + ": bn.running_var / running_mean hold negative or non-finite values");
        impl->latentMean = mean;
        impl->latentStd = at::sqrt(var + c.batchNormEps);
    } catch (const c10::Error& e) {
        return errorFromException(e, origin + ": loading the FLUX.2 VAE failed", ErrorCode::Internal);
    }
    return VaeDecoder(std::move(impl));
}

Result<at::Tensor> VaeDecoder::decode(const at::Tensor& zIn, std::stop_token stop) const
{
    const auto& m = *m_impl;
    try {
        TORCH_CHECK(zIn.dim() == 4 && zIn.size(1) == m.config.latentChannels, "latents must be [B, ", m.config.latentChannels,
            ", h, w], got ", zIn.sizes());
        auto x = zIn.to(m.device, m.dtype);
        if (m.postQuantConv)
            x = (*m.postQuantConv)(x);
        x = m.convIn(x);
        x = m.mid0(x);
        if (m.midAttention)
            x = (*m.midAttention)(x);
        x = m.mid1(x);
        for (const auto& b : m.up) {
            if (stop.stop_requested())
                return makeError(ErrorCode::Cancelled, "the FLUX.2 VAE decode was cancelled");
            for (const auto& r : b.resnets)
                x = r(x);
            if (b.upsample)
                x = (*b.upsample)(at::upsample_nearest2d(x, {x.size(2) * 2, x.size(3) * 2}));
        }
        return m.convOut(at::silu(m.normOut(x)));
    } catch (const c10::Error& e) {
        return errorFromException(e, m.origin + ": FLUX.2 VAE decode");
    }
}

std::int64_t VaeDecoder::residentBytes() const
{
    const auto& m = *m_impl;
    std::int64_t n = 0;
    auto conv = [&](const Conv& c) { n += bytesOf(c.weight) + bytesOf(c.bias); };
    auto resnet = [&](const Resnet& r) {
        conv(r.conv1);
        conv(r.conv2);
        if (r.shortcut)
            conv(*r.shortcut);
        n += bytesOf(r.norm1.weight) + bytesOf(r.norm1.bias) + bytesOf(r.norm2.weight) + bytesOf(r.norm2.bias);
    };
    if (m.postQuantConv)
        conv(*m.postQuantConv);
    conv(m.convIn);
    conv(m.convOut);
    resnet(m.mid0);
    resnet(m.mid1);
    if (m.midAttention)
        for (const auto* t : {&m.midAttention->q, &m.midAttention->k, &m.midAttention->v, &m.midAttention->o})
            n += bytesOf(*t);
    for (const auto& b : m.up) {
        for (const auto& r : b.resnets)
            resnet(r);
        if (b.upsample)
            conv(*b.upsample);
    }
    return n;
}

}  // namespace vireo::flux2
