#include "inference/models/ltx2/ltx2transformer.h"

#include "inference/lora/lora.h"

#include "inference/util/device.h"

#include "inference/models/ltx2/ltx2layers.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "kernels/fp8attention.h"
#include "inference/tensorfile/tensorset.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <set>

namespace vireo::ltx2 {

namespace {

std::string shapeText(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

struct Block {
    Attention attn1, audioAttn1, attn2, audioAttn2, audioToVideo, videoToAudio;
    FeedForward ff, audioFf;
    at::Tensor scaleShiftTable, audioScaleShiftTable;
    at::Tensor promptScaleShiftTable, audioPromptScaleShiftTable;
    at::Tensor videoA2vTable, audioA2vTable;
};

template <typename LinearFn, typename TensorFn>
Block mapBlock(const Block& b, LinearFn&& linear, TensorFn&& tensor)
{
    Block out = b;
    for (auto* a : {&out.attn1, &out.audioAttn1, &out.attn2, &out.audioAttn2, &out.audioToVideo, &out.videoToAudio}) {
        for (auto* l : a->linears())
            *l = linear(*l);
        a->normQ = tensor(a->normQ);
        a->normK = tensor(a->normK);
    }
    for (auto* ff : {&out.ff, &out.audioFf}) {
        ff->proj = linear(ff->proj);
        ff->out = linear(ff->out);
    }
    for (auto* t : {&out.scaleShiftTable, &out.audioScaleShiftTable, &out.promptScaleShiftTable, &out.audioPromptScaleShiftTable,
             &out.videoA2vTable, &out.audioA2vTable})
        *t = tensor(*t);
    return out;
}

// table [k, dim] + temb [B, T, k*dim] -> k tensors [B, T, dim] (get_mod_params).
std::vector<at::Tensor> modParams(const at::Tensor& table, const at::Tensor& temb)
{
    const auto k = table.size(0);
    const auto values = table.unsqueeze(0).unsqueeze(0) + temb.reshape({temb.size(0), temb.size(1), k, -1});
    return values.unbind(2);
}

// A residual stream whose latest gated update is held until the next norm reads the stream,
// so that on CUDA the add and the norm are one pass over the activations. Every other read
// settles the update first; on the CPU each stream sees the same ops as unfused, so its results
// are bit-identical.
class ResidualStream {
public:
    explicit ResidualStream(at::Tensor x) : m_x(std::move(x)) {}

    // x + delta * gate, applied where the stream is next read.
    void addGated(at::Tensor delta, at::Tensor gate)
    {
        settle();
        m_delta = std::move(delta);
        m_gate = std::move(gate);
    }
    at::Tensor normModulate(const at::Tensor& scale, const at::Tensor& shift, double eps)
    {
        if (!m_delta.defined())
            return nn::rmsNormModulate(m_x, scale, shift, eps);
        auto [x, h] = nn::gatedResidualRmsNormModulate(m_x, m_delta, m_gate, scale, shift, eps);
        m_x = std::move(x);
        m_delta = m_gate = at::Tensor();
        return h;
    }
    // normModulate quantized for an FP8 GEMM that takes its input with scale qscale.
    at::Tensor normModulateFp8(const at::Tensor& scale, const at::Tensor& shift, double eps, const at::Tensor& qscale)
    {
        if (!m_delta.defined())
            return nn::rmsNormModulateFp8(m_x, scale, shift, eps, qscale);
        auto [x, h] = nn::gatedResidualRmsNormModulateFp8(m_x, m_delta, m_gate, scale, shift, eps, qscale);
        m_x = std::move(x);
        m_delta = m_gate = at::Tensor();
        return h;
    }
    // The stream's tensor as last settled: its device and dtype, never its values.
    const at::Tensor& peek() const { return m_x; }
    void add(const at::Tensor& delta)
    {
        auto& x = settle();
        x = x + delta;
    }
    at::Tensor& value() { return settle(); }

private:
    at::Tensor& settle()
    {
        if (m_delta.defined()) {
            m_x = at::addcmul(m_x, m_delta, m_gate);
            m_delta = m_gate = at::Tensor();
        }
        return m_x;
    }

    at::Tensor m_x, m_delta, m_gate;
};

// Per batch row: mean |now - before| / mean |before|, in float32.
at::Tensor relativeChange(const at::Tensor& now, const at::Tensor& before)
{
    const auto n = now.to(at::kFloat).flatten(1), b = before.to(at::kFloat).flatten(1);
    return (n - b).abs().mean(1) / b.abs().mean(1).clamp_min(1e-12);
}

// Decides a step of the first-block cache from the first block's residuals; on a skip adds
// the other blocks' residual of the last full step to x and a.
bool reuseRest(StepCache& cache, const at::Tensor& firstVideo, const at::Tensor& firstAudio, at::Tensor& x, at::Tensor& a)
{
    const bool comparable = cache.firstVideo.defined() && cache.restVideo.defined() && cache.firstVideo.sizes() == firstVideo.sizes()
        && cache.firstAudio.sizes() == firstAudio.sizes() && cache.firstVideo.device() == firstVideo.device();
    cache.change = -1.0;
    if (comparable) {
        auto change = relativeChange(firstVideo, cache.firstVideo);
        if (firstAudio.numel() > 0)
            change = at::maximum(change, relativeChange(firstAudio, cache.firstAudio));
        cache.change = change.max().item<double>();
    }
    if (comparable && cache.allowSkip && cache.consecutive < cache.maxConsecutive && cache.change >= 0 && cache.change < cache.threshold) {
        x = x + cache.restVideo;
        a = a + cache.restAudio;
        cache.skipped = true;
        ++cache.consecutive;
        ++cache.skips;
        return true;
    }
    cache.firstVideo = firstVideo;
    cache.firstAudio = firstAudio;
    cache.consecutive = 0;
    ++cache.computed;
    return false;
}

std::uint64_t nextGeneration()
{
    static std::atomic<std::uint64_t> counter{0};
    return ++counter;
}

}  // namespace

void StepCache::reset()
{
    StepCache fresh;
    fresh.threshold = threshold;
    fresh.maxConsecutive = maxConsecutive;
    fresh.allowSkip = allowSkip;
    *this = std::move(fresh);
}

struct Transformer::Impl {
    TransformerConfig config;
    c10::Device device = c10::Device(c10::kCPU);
    c10::ScalarType dtype = c10::kFloat;
    bool offload = false;
    std::uint64_t generation = nextGeneration();

    nn::Linear projIn, audioProjIn, projOut, audioProjOut;
    nn::Linear captionLinear1, captionLinear2, audioCaptionLinear1, audioCaptionLinear2;
    AdaLayerNormSingle timeEmbed, audioTimeEmbed, promptAdaln, audioPromptAdaln;
    AdaLayerNormSingle caVideoScaleShift, caAudioScaleShift, caVideoGate, caAudioGate;
    at::Tensor scaleShiftTable, audioScaleShiftTable;
    at::Tensor keyframesEmbedding;  // [1, dim], 2.5
    std::vector<Block> blocks;
    // How the self-attentions run, for the load report: FP8, or the compute dtype and why.
    std::string attentionPath;

    void chooseAttention();
    TransformerOutputs run(const TransformerInputs& in) const;
    at::Tensor videoCoords(std::int64_t batch, std::int64_t frames, std::int64_t height, std::int64_t width, double fps) const;
    at::Tensor audioCoords(std::int64_t batch, std::int64_t frames) const;

    // The stages of run, and what they hand each other.
    struct ForwardState;
    void prepareTimesteps(const TransformerInputs& in, ForwardState& st, const at::Tensor& x, const at::Tensor& a) const;
    void prepareRope(const TransformerInputs& in, ForwardState& st, const at::Tensor& x, const at::Tensor& a) const;
    void prepareTimestepEmbeddings(const TransformerInputs& in, ForwardState& st) const;
    void prepareTextContext(const TransformerInputs& in, ForwardState& st, const at::Tensor& x, const at::Tensor& a) const;
    void preparePerturbation(const TransformerInputs& in, ForwardState& st) const;
    void runBlocks(const TransformerInputs& in, const ForwardState& st, at::Tensor& x, at::Tensor& a) const;
    void runBlock(const TransformerInputs& in, const ForwardState& st, const Block& b, bool perturbed, ResidualStream& video,
        ResidualStream& audio) const;
    TransformerOutputs projectOutputs(const ForwardState& st, const at::Tensor& x, const at::Tensor& a) const;
    void markKeyframes(const TransformerInputs& in, at::Tensor& x) const;
};

Transformer::Transformer(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Transformer::~Transformer() = default;
Transformer::Transformer(Transformer&&) noexcept = default;
Transformer& Transformer::operator=(Transformer&&) noexcept = default;

const TransformerConfig& Transformer::config() const
{
    return m_impl->config;
}
bool Transformer::offloadsBlocks() const
{
    return m_impl->offload;
}
c10::ScalarType Transformer::dtype() const
{
    return m_impl->dtype;
}
c10::Device Transformer::device() const
{
    return m_impl->device;
}
std::uint64_t Transformer::generation() const
{
    return m_impl->generation;
}

Result<TransformerConfig> resolveTransformerConfig(const Ltx2Weights& w, const std::optional<TransformerConfig>& override)
{
    const auto part = Part::Transformer;
    const auto files = w.describeFiles();
    const auto projIn = w.shape(part, "proj_in.weight", 2);
    const auto audioProjIn = w.shape(part, "audio_proj_in.weight", 2);
    const auto table = w.shape(part, "transformer_blocks.0.scale_shift_table", 2);
    if (!projIn || !audioProjIn || !table)
        return makeError(ErrorCode::InvalidFormat,
            files
                + ": not an LTX-2 audio-video transformer (no 2-D proj_in / audio_proj_in / "
                  "transformer_blocks.0.scale_shift_table)");
    // What the headers say, independent of any config.
    const auto dim = (*projIn)[0], audioDim = (*audioProjIn)[0];
    const auto layerCount = w.indexCount(part, "transformer_blocks.");
    if (!layerCount)
        return layerCount.error();
    const auto layers = *layerCount;
    const bool crossAttnMod = (*table)[0] == 9;
    const bool gated = w.find(part, "transformer_blocks.0.attn1.to_gate_logits.weight") != nullptr;
    const bool audioGated = w.find(part, "transformer_blocks.0.audio_attn1.to_gate_logits.weight") != nullptr;
    const auto audioTable = w.shape(part, "transformer_blocks.0.audio_scale_shift_table", 2);
    const bool audioCrossAttnMod = audioTable && (*audioTable)[0] == 9;
    const bool captionProjection = w.find(part, "caption_projection.linear_1.weight") != nullptr;
    const bool keyframes = w.find(part, "keyframes_abs_pos_embedding") != nullptr;

    auto given =
        checkpointConfig(w, part, override, transformerConfigFromDiffusers, [](const std::string& json) -> Result<TransformerConfig> {
            auto parsed = configsFromLtxCore(json);
            if (!parsed)
                return parsed.error();
            return parsed->first;
        });
    if (!given)
        return given.error();
    TransformerConfig c;
    if (*given) {
        c = **given;
        if (!override && !w.diffusersConfig(part)) {
            // An ltx-core embedded config: which of its keys carry the 2.5 options is not
            // verified against a published file, and the tensors say it without doubt.
            c.keyframesAbsPosEmbedding = keyframes;
            c.ffBias = w.find(part, "transformer_blocks.0.ff.net.0.proj.bias") != nullptr;
            c.audioFfBias = w.find(part, "transformer_blocks.0.audio_ff.net.0.proj.bias") != nullptr;
            if (c.crossAttnMod || c.audioCrossAttnMod)
                c.usePromptAdalnSingle = w.find(part, "prompt_adaln.linear.weight") != nullptr;
        }
    } else {
        // No hyper-parameters (GGUF): every real LTX-2 checkpoint uses split RoPE, 128-wide
        // video heads and as many audio heads as video heads.
        c.ropeSplit = true;
        c.inChannels = (*projIn)[1];
        c.audioInChannels = (*audioProjIn)[1];
        const auto projOut = w.shape(part, "proj_out.weight", 2);
        const auto audioProjOut = w.shape(part, "audio_proj_out.weight", 2);
        c.outChannels = projOut ? (*projOut)[0] : c.inChannels;
        c.audioOutChannels = audioProjOut ? (*audioProjOut)[0] : c.audioInChannels;
        if (auto gate = w.shape(part, "transformer_blocks.0.attn1.to_gate_logits.weight", 2))
            c.heads = (*gate)[0];
        else if (dim % 128 == 0)
            c.heads = dim / 128;
        else
            return makeError(ErrorCode::InvalidFormat,
                files + ": cannot infer the attention heads of a " + std::to_string(dim) + "-wide transformer without a config; pass one");
        // A zero-width projection or gate would make the divisions below divide by zero.
        if (c.heads <= 0 || c.heads > kMaxHeads || dim <= 0 || audioDim <= 0)
            return makeError(ErrorCode::InvalidFormat,
                files + ": widths " + std::to_string(dim) + "/" + std::to_string(audioDim) + " and " + std::to_string(c.heads)
                    + " attention heads (from proj_in / to_gate_logits) are not a transformer's; the file is damaged");
        c.audioHeads = c.heads;
        if (dim % c.heads || audioDim % c.heads)
            return makeError(ErrorCode::InvalidFormat,
                files + ": widths " + std::to_string(dim) + "/" + std::to_string(audioDim) + " do not split into " + std::to_string(c.heads)
                    + " heads; pass a config");
        c.headDim = dim / c.heads;
        c.audioHeadDim = audioDim / c.audioHeads;
        c.layers = layers;
        c.crossAttnMod = crossAttnMod;
        c.audioCrossAttnMod = audioCrossAttnMod;
        c.gatedAttn = gated;
        c.audioGatedAttn = audioGated;
        c.perturbedAttn = crossAttnMod;
        c.usePromptEmbeddings = captionProjection;
        c.usePromptAdalnSingle = w.find(part, "prompt_adaln.linear.weight") != nullptr;
        if (auto caption = w.shape(part, "caption_projection.linear_1.weight", 2))
            c.captionChannels = (*caption)[1];
        if (auto k = w.shape(part, "transformer_blocks.0.attn2.to_k.weight", 2))
            c.crossAttentionDim = (*k)[1];
        if (auto k = w.shape(part, "transformer_blocks.0.audio_attn2.to_k.weight", 2))
            c.audioCrossAttentionDim = (*k)[1];
        c.ffBias = w.find(part, "transformer_blocks.0.ff.net.0.proj.bias") != nullptr;
        c.audioFfBias = w.find(part, "transformer_blocks.0.audio_ff.net.0.proj.bias") != nullptr;
        c.keyframesAbsPosEmbedding = keyframes;
    }
    if (auto valid = validate(c, files + ": the transformer's hyper-parameters"); !valid)
        return valid.error();
    // The config must describe these tensors; a mismatch means the wrong config or file.
    auto mismatch = [&](const std::string& what, const std::string& tensor, const std::string& found) {
        return makeError(ErrorCode::InvalidFormat, files + ": the config says " + what + " but " + tensor + " " + found);
    };
    if (c.dim() != dim || c.inChannels != (*projIn)[1])
        return mismatch(std::to_string(c.heads) + "x" + std::to_string(c.headDim) + " video features from " + std::to_string(c.inChannels)
                + " channels",
            "proj_in.weight", "is " + shapeText(*projIn));
    if (c.audioDim() != audioDim || c.audioInChannels != (*audioProjIn)[1])
        return mismatch(std::to_string(c.audioHeads) + "x" + std::to_string(c.audioHeadDim) + " audio features", "audio_proj_in.weight",
            "is " + shapeText(*audioProjIn));
    if (c.layers != layers)
        return mismatch(std::to_string(c.layers) + " layers", "transformer_blocks", "has " + std::to_string(layers));
    if (c.crossAttnMod != crossAttnMod || c.audioCrossAttnMod != audioCrossAttnMod)
        return mismatch(c.crossAttnMod ? "9 modulation rows (2.3)" : "6 modulation rows (2.0)", "transformer_blocks.0.scale_shift_table",
            "is " + shapeText(*table));
    if (c.gatedAttn != gated || c.audioGatedAttn != audioGated)
        return mismatch(c.gatedAttn ? "gated attention" : "ungated attention", "to_gate_logits", gated ? "is present" : "is absent");
    if (c.usePromptEmbeddings != captionProjection)
        return mismatch(c.usePromptEmbeddings ? "a caption projection (2.0)" : "no caption projection (2.3)", "caption_projection",
            captionProjection ? "is present" : "is absent");
    if (c.keyframesAbsPosEmbedding != keyframes)
        return mismatch(c.keyframesAbsPosEmbedding ? "a keyframe embedding (2.5)" : "no keyframe embedding", "keyframes_abs_pos_embedding",
            keyframes ? "is present" : "is absent");
    if (c.heads != c.audioHeads)
        return makeError(ErrorCode::Unsupported,
            files + ": video and audio head counts differ (" + std::to_string(c.heads) + " vs " + std::to_string(c.audioHeads)
                + "); the cross-modal RoPE assumes they match");
    return c;
}

Result<Transformer> Transformer::load(const Ltx2Weights& weights, const TransformerLoadOptions& options)
{
    auto config = resolveTransformerConfig(weights, options.config);
    if (!config)
        return config.error();
    auto impl = std::make_unique<Impl>();
    impl->config = *config;
    impl->device = options.device;
    impl->dtype = options.dtype;
    impl->offload = options.offloadBlocks && !options.device.is_cpu();
    const auto& c = impl->config;
    try {
        WeightTaker w(weights, Part::Transformer, options.device, options.dtype);
        impl->projIn = w.linear("proj_in", true);
        impl->audioProjIn = w.linear("audio_proj_in", true);
        if (c.usePromptEmbeddings) {
            impl->captionLinear1 = w.linear("caption_projection.linear_1", true);
            impl->captionLinear2 = w.linear("caption_projection.linear_2", true);
            impl->audioCaptionLinear1 = w.linear("audio_caption_projection.linear_1", true);
            impl->audioCaptionLinear2 = w.linear("audio_caption_projection.linear_2", true);
        }
        impl->timeEmbed = AdaLayerNormSingle::load(w, "time_embed");
        impl->audioTimeEmbed = AdaLayerNormSingle::load(w, "audio_time_embed");
        impl->caVideoScaleShift = AdaLayerNormSingle::load(w, "av_cross_attn_video_scale_shift");
        impl->caAudioScaleShift = AdaLayerNormSingle::load(w, "av_cross_attn_audio_scale_shift");
        impl->caVideoGate = AdaLayerNormSingle::load(w, "av_cross_attn_video_a2v_gate");
        impl->caAudioGate = AdaLayerNormSingle::load(w, "av_cross_attn_audio_v2a_gate");
        if ((c.crossAttnMod || c.audioCrossAttnMod) && c.usePromptAdalnSingle) {
            impl->promptAdaln = AdaLayerNormSingle::load(w, "prompt_adaln");
            impl->audioPromptAdaln = AdaLayerNormSingle::load(w, "audio_prompt_adaln");
        }
        impl->scaleShiftTable = w.tensor("scale_shift_table");
        impl->audioScaleShiftTable = w.tensor("audio_scale_shift_table");
        if (c.keyframesAbsPosEmbedding) {
            impl->keyframesEmbedding = w.tensor("keyframes_abs_pos_embedding");
            TORCH_CHECK(
                impl->keyframesEmbedding.dim() == 2 && impl->keyframesEmbedding.size(0) == 1 && impl->keyframesEmbedding.size(1) == c.dim(),
                "keyframes_abs_pos_embedding is ", impl->keyframesEmbedding.sizes(), ", expected [1, ", c.dim(), "]");
        }
        impl->projOut = w.linear("proj_out", true);
        impl->audioProjOut = w.linear("audio_proj_out", true);
        if (impl->offload)
            w.setDevice(c10::Device(c10::kCPU));
        for (std::int64_t i = 0; i < c.layers; ++i) {
            const auto p = "transformer_blocks." + std::to_string(i) + ".";
            Block b;
            const bool bias = c.attentionBias, outBias = c.attentionOutBias;
            b.attn1 = Attention::load(w, p + "attn1", c.heads, bias, outBias, c.gatedAttn, true);
            b.audioAttn1 = Attention::load(w, p + "audio_attn1", c.audioHeads, bias, outBias, c.audioGatedAttn, true);
            b.attn2 = Attention::load(w, p + "attn2", c.heads, bias, outBias, c.gatedAttn, false);
            b.audioAttn2 = Attention::load(w, p + "audio_attn2", c.audioHeads, bias, outBias, c.audioGatedAttn, false);
            b.audioToVideo = Attention::load(w, p + "audio_to_video_attn", c.audioHeads, bias, outBias, c.gatedAttn, false);
            b.videoToAudio = Attention::load(w, p + "video_to_audio_attn", c.audioHeads, bias, outBias, c.audioGatedAttn, false);
            b.ff = FeedForward::load(w, p + "ff", c.ffBias);
            b.audioFf = FeedForward::load(w, p + "audio_ff", c.audioFfBias);
            b.scaleShiftTable = w.tensor(p + "scale_shift_table");
            b.audioScaleShiftTable = w.tensor(p + "audio_scale_shift_table");
            if (c.crossAttnMod || c.audioCrossAttnMod) {
                b.promptScaleShiftTable = w.tensor(p + "prompt_scale_shift_table");
                b.audioPromptScaleShiftTable = w.tensor(p + "audio_prompt_scale_shift_table");
            }
            b.videoA2vTable = w.tensor(p + "video_a2v_cross_attn_scale_shift_table");
            b.audioA2vTable = w.tensor(p + "audio_a2v_cross_attn_scale_shift_table");
            if (impl->offload)
                b = mapBlock(
                    b, [](const nn::Linear& l) { return l.pinned(); }, nn::pinnedIfCuda);
            impl->blocks.push_back(std::move(b));
        }
        if (auto done = w.finish(); !done)
            return done.error();
        impl->chooseAttention();
    } catch (const c10::Error& e) {
        return errorFromException(e, weights.describeFiles() + ": loading the LTX-2 transformer failed", ErrorCode::Internal);
    }
    return Transformer(std::move(impl));
}

void Transformer::Impl::chooseAttention()
{
    // FP8 attention where the GEMMs beside it already run FP8: the stream then has that
    // precision anyway, and attention is the largest part of the forward left in bf16.
    std::string why;
    bool fp8Gemms = false;
    if (!blocks.empty())
        for (const auto* l : blocks.front().attn1.linears())
            fp8Gemms = fp8Gemms || (l->defined() && l->weight.matmulPlan(device, dtype).path == quant::MatmulPath::Fp8TensorCores);
    const auto headSize = config.headDim;
    if (!fp8Gemms)
        why = "its GEMMs do not run FP8 here";
    else if (!kernels::fp8AttentionEnabled())
        why = "VIREO_FP8_ATTENTION=0";
    else if (headSize % 16 != 0 || headSize > 256)
        why = "head size " + std::to_string(headSize) + " (FP8 attention takes multiples of 16 up to 256)";
    else
        why = kernels::fp8AttentionUnavailable(device);
    for (auto& b : blocks)
        b.attn1.fp8Attention = b.audioAttn1.fp8Attention = why.empty();
    const std::string dtypeName = dtype == at::kBFloat16 ? "bf16"
        : dtype == at::kHalf                             ? "fp16"
        : dtype == at::kFloat                            ? "float32"
                                                         : c10::toString(dtype);
    attentionPath = why.empty() ? "self-attention: FP8 flash attention (cuDNN)" : "self-attention: " + dtypeName + " SDPA (" + why + ")";
}

at::Tensor videoCoordsFor(
    const TransformerConfig& config, std::int64_t frames, std::int64_t height, std::int64_t width, double fps, c10::Device device)
{
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    const auto grid = at::stack(at::meshgrid({at::arange(frames, f32), at::arange(height, f32), at::arange(width, f32)}, "ij"), 0);
    const auto ends = grid + 1;
    auto coords = at::stack({grid, ends}, -1).flatten(1, 3).unsqueeze(0);
    // Filled on the device, not copied from the host: the forward stays capturable in a CUDA graph.
    std::vector<at::Tensor> factors;
    for (const auto f : config.vaeScaleFactors)
        factors.push_back(at::full({1}, static_cast<std::int64_t>(f), at::TensorOptions().dtype(at::kLong).device(device)));
    const auto scale = at::cat(factors);
    auto pixel = coords * scale.view({1, -1, 1, 1});
    auto t = pixel.select(1, 0);
    t.copy_((t + config.causalOffset - config.vaeScaleFactors[0]).clamp_min(0));
    t.copy_(t / fps);
    return pixel;
}

at::Tensor Transformer::Impl::videoCoords(
    std::int64_t batch, std::int64_t frames, std::int64_t height, std::int64_t width, double fps) const
{
    return videoCoordsFor(config, frames, height, width, fps, device).repeat({batch, 1, 1, 1});
}

at::Tensor Transformer::Impl::audioCoords(std::int64_t batch, std::int64_t frames) const
{
    const auto f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    const auto grid = at::arange(0, frames, f32);
    const auto s = config.audioScaleFactor;
    auto start = (grid * s + config.causalOffset - s).clamp_min(0);
    start = start * config.audioHopLength / config.audioSamplingRate;
    auto end = ((grid + 1) * s + config.causalOffset - s).clamp_min(0);
    end = end * config.audioHopLength / config.audioSamplingRate;
    return at::stack({start, end}, -1).unsqueeze(0).expand({batch, -1, -1}).unsqueeze(1);
}

namespace {

// coords [B, P, T, 2] bounds -> midpoint fractions [B, T, P] of the given maxima.
at::Tensor coordsToGrid(const at::Tensor& coords, const std::vector<double>& maxima)
{
    auto mid = coords;
    if (coords.dim() == 4) {
        const auto halves = coords.chunk(2, -1);
        mid = ((halves[0] + halves[1]) / 2.0).squeeze(-1);
    }
    std::vector<at::Tensor> axes;
    for (std::int64_t i = 0; i < mid.size(1); ++i)
        axes.push_back(mid.select(1, i) / maxima.at(static_cast<std::size_t>(i)));
    return at::stack(axes, -1);
}

std::optional<at::Tensor> additiveTextMask(const std::optional<at::Tensor>& mask, c10::ScalarType dtype)
{
    if (!mask)
        return std::nullopt;
    if (mask->dim() != 2)
        return mask->to(dtype);
    // diffusers' convention for the text mask: (1 - m) * -10000, broadcast over heads and queries.
    return ((1 - mask->to(dtype)) * -10000.0).unsqueeze(1).unsqueeze(1);
}

// Self-attention and feed-forward: where their first GEMM runs in FP8 with a
// calibrated input scale, the norm writes its output already quantized.
void selfAttention(ResidualStream& s, const Attention& attn, const std::vector<at::Tensor>& mod, const Rope& rope, double eps,
    const at::Tensor* pm, bool ap, const std::optional<at::Tensor>& mask = std::nullopt)
{
    const auto dtype = s.peek().scalar_type();
    const auto qs = mask ? std::nullopt : attn.fp8InputScale(s.peek());  // the quantized path attends unmasked
    if (qs)
        s.addGated(attn.onQuantized(s.normModulateFp8(mod[1], mod[0], eps, *qs), dtype, &rope, pm, ap), mod[2]);
    else
        s.addGated(attn(s.normModulate(mod[1], mod[0], eps), nullptr, mask, &rope, nullptr, pm, ap), mod[2]);
}

// The feed-forward half of the fused-norm path above (see selfAttention).
void feedForward(ResidualStream& s, const FeedForward& ff, const std::vector<at::Tensor>& mod, double eps)
{
    const auto dtype = s.peek().scalar_type();
    if (const auto qs = ff.proj.fp8InputScale(s.peek()))
        s.addGated(ff.onQuantized(s.normModulateFp8(mod[4], mod[3], eps, *qs), dtype), mod[5]);
    else
        s.addGated(ff(s.normModulate(mod[4], mod[3], eps)), mod[5]);
}

// Cross-attention operands: where the GEMM that reads a norm's output runs FP8 with a
// calibrated input scale, the norm writes it quantized.
Attention::Operand normFor(
    ResidualStream& s, const std::optional<at::Tensor>& qscale, const at::Tensor& scale, const at::Tensor& shift, double eps)
{
    const auto dtype = s.peek().scalar_type();
    if (qscale)
        return Attention::Operand{s.normModulateFp8(scale, shift, eps, *qscale), dtype};
    return Attention::Operand{s.normModulate(scale, shift, eps), std::nullopt};
}

// Text cross-attention of one stream: plain (2.0) or modulated and gated (2.3).
void textCrossAttention(ResidualStream& s, const Attention& attn, bool modulated, const std::vector<at::Tensor>& mod,
    const at::Tensor& context, const std::optional<at::Tensor>& mask, double eps)
{
    if (!modulated) {
        s.add(attn(nn::rmsNorm(s.value(), eps), &context, mask, nullptr, nullptr));
        return;
    }
    const auto h = normFor(s, attn.queryInputScale(s.peek()), mod[7], mod[6], eps);
    s.addGated(attn.cross(h, {context, std::nullopt}, mask, nullptr, nullptr), mod[8]);
}

}  // namespace

// What the stages of one forward hand each other: everything the blocks read besides the streams.
struct Transformer::Impl::ForwardState {
    std::int64_t batch = 0;
    at::TensorOptions f32;
    at::Tensor timestep, audioTimestep;
    std::optional<at::Tensor> sigma, audioSigma;
    Rope videoRope, audioRope, crossVideoRope, crossAudioRope;
    at::Tensor temb, embedded, tembAudio, audioEmbedded, tembPrompt, tembPromptAudio;
    at::Tensor caScaleShift, caGate, caAudioScaleShiftT, caAudioGateT;
    at::Tensor context, audioContext;
    std::optional<at::Tensor> textMask, audioTextMask;
    std::optional<at::Tensor> videoSelfMask;  // additive [B, 1, Tv, Tv]
    std::set<int> stg;
    at::Tensor perturbation;
    bool allPerturbed = false;
    at::Tensor keepCrossModal;  // [B, 1, 1], 0 where a row runs without the audio-video cross-attention
};

TransformerOutputs Transformer::Impl::run(const TransformerInputs& in) const
{
    auto x = in.hiddenStates.to(device, dtype);
    auto a = in.audioHiddenStates.to(device, dtype);
    ForwardState st;
    prepareTimesteps(in, st, x, a);

    // 1. RoPE
    prepareRope(in, st, x, a);

    // 2. Inputs
    x = projIn(x);
    a = audioProjIn(a);
    markKeyframes(in, x);

    // 3. Timestep embeddings and modulation
    prepareTimestepEmbeddings(in, st);

    // 4. Text context
    prepareTextContext(in, st, x, a);

    // 5. Blocks
    preparePerturbation(in, st);
    runBlocks(in, st, x, a);

    // 6. Output
    return projectOutputs(st, x, a);
}

// The latents' shapes checked against the config, and every timestep and sigma in float32.
void Transformer::Impl::prepareTimesteps(const TransformerInputs& in, ForwardState& st, const at::Tensor& x, const at::Tensor& a) const
{
    const auto& c = config;
    st.batch = x.size(0);
    const auto batch = st.batch;
    TORCH_CHECK(x.dim() == 3 && x.size(2) == c.inChannels, "video latents must be [B, T, ", c.inChannels, "], got ", x.sizes());
    TORCH_CHECK(a.dim() == 3 && a.size(2) == c.audioInChannels && a.size(0) == batch, "audio latents must be [", batch, ", T, ",
        c.audioInChannels, "], got ", a.sizes());
    st.f32 = at::TensorOptions().dtype(at::kFloat).device(device);
    const auto& f32 = st.f32;
    st.timestep = in.timestep.to(f32);
    TORCH_CHECK(st.timestep.size(0) == batch, "timestep batch ", st.timestep.size(0), " != ", batch);
    st.audioTimestep = in.audioTimestep ? in.audioTimestep->to(f32) : st.timestep;
    if (in.sigma)
        st.sigma = in.sigma->to(f32);
    else if (st.timestep.dim() == 1)
        st.sigma = st.timestep;
    st.audioSigma = in.audioSigma ? std::optional<at::Tensor>(in.audioSigma->to(f32)) : st.sigma;
}

// The rotary embeddings of both streams and of the cross-modal attention, from the given
// coordinates or the latent grid; x and a only for their token counts.
void Transformer::Impl::prepareRope(const TransformerInputs& in, ForwardState& st, const at::Tensor& x, const at::Tensor& a) const
{
    const auto& c = config;
    const auto batch = st.batch;
    const auto& f32 = st.f32;
    at::Tensor vCoords = in.videoCoords ? in.videoCoords->to(f32) : videoCoords(batch, in.numFrames, in.height, in.width, in.fps);
    if (in.extraVideoCoords) {
        const auto extra = in.extraVideoCoords->to(f32);
        TORCH_CHECK(extra.dim() == 4 && extra.size(0) == batch && extra.size(1) == 3 && extra.size(3) == 2,
            "extra video coordinates must be [", batch, ", 3, K, 2], got ", extra.sizes());
        vCoords = at::cat({vCoords, extra}, 2);
    }
    at::Tensor aCoords = in.audioCoords ? in.audioCoords->to(f32) : audioCoords(batch, in.audioNumFrames);
    TORCH_CHECK(vCoords.size(2) == x.size(1), "video grid ", in.numFrames, "x", in.height, "x", in.width, " has ", vCoords.size(2),
        " cells but there are ", x.size(1), " video tokens");
    TORCH_CHECK(aCoords.size(2) == a.size(1), "audio grid has ", aCoords.size(2), " frames but there are ", a.size(1), " audio tokens");
    const std::vector<double> videoMax{double(c.posEmbedMaxPos), double(c.baseHeight), double(c.baseWidth)};
    const std::vector<double> audioMax{double(c.audioPosEmbedMaxPos)};
    const std::vector<double> crossMax{double(std::max(c.posEmbedMaxPos, c.audioPosEmbedMaxPos))};
    st.videoRope = makeRope(coordsToGrid(vCoords, videoMax), c.dim(), c.ropeTheta, c.ropeDoublePrecision, c.ropeSplit, c.heads);
    st.audioRope = makeRope(coordsToGrid(aCoords, audioMax), c.audioDim(), c.ropeTheta, c.ropeDoublePrecision, c.ropeSplit, c.audioHeads);
    st.crossVideoRope = makeRope(coordsToGrid(vCoords.narrow(1, 0, 1), crossMax), c.audioCrossAttentionDim, c.ropeTheta,
        c.ropeDoublePrecision, c.ropeSplit, c.heads);
    st.crossAudioRope = makeRope(coordsToGrid(aCoords.narrow(1, 0, 1), crossMax), c.audioCrossAttentionDim, c.ropeTheta,
        c.ropeDoublePrecision, c.ropeSplit, c.audioHeads);
}

// The AdaLN-single embeddings every block modulates with: per stream, for the 2.3 prompt
// modulation, and for the audio <-> video cross-attention.
void Transformer::Impl::prepareTimestepEmbeddings(const TransformerInputs& in, ForwardState& st) const
{
    const auto& c = config;
    const auto batch = st.batch;
    const auto& timestep = st.timestep;
    const auto& audioTimestep = st.audioTimestep;
    const auto& sigma = st.sigma;
    const auto& audioSigma = st.audioSigma;
    const auto gateFactor = c.crossAttnTimestepScaleMultiplier / c.timestepScaleMultiplier;
    auto [temb, embedded] = timeEmbed(timestep.flatten(), dtype);
    st.temb = temb.view({batch, -1, temb.size(-1)});
    st.embedded = embedded.view({batch, -1, embedded.size(-1)});
    auto [tembAudio, audioEmbedded] = audioTimeEmbed(audioTimestep.flatten(), dtype);
    st.tembAudio = tembAudio.view({batch, -1, tembAudio.size(-1)});
    st.audioEmbedded = audioEmbedded.view({batch, -1, audioEmbedded.size(-1)});
    if ((c.crossAttnMod || c.audioCrossAttnMod) && c.usePromptAdalnSingle) {
        TORCH_CHECK(sigma && audioSigma, "LTX-2.3 needs sigma per batch item (per-token timesteps were given without sigma)");
        st.tembPrompt = promptAdaln(sigma->flatten(), dtype).first;
        st.tembPrompt = st.tembPrompt.view({batch, -1, st.tembPrompt.size(-1)});
        st.tembPromptAudio = audioPromptAdaln(audioSigma->flatten(), dtype).first;
        st.tembPromptAudio = st.tembPromptAudio.view({batch, -1, st.tembPromptAudio.size(-1)});
    }
    if (in.useCrossTimestep)
        TORCH_CHECK(sigma && audioSigma, "the cross-modal timestep option needs sigma and audio sigma");
    const auto videoCaTimestep = in.useCrossTimestep ? audioSigma->flatten() : timestep.flatten();
    auto caScaleShift = caVideoScaleShift(videoCaTimestep, dtype).first;
    auto caGate = caVideoGate(videoCaTimestep * gateFactor, dtype).first;
    st.caScaleShift = caScaleShift.view({batch, -1, caScaleShift.size(-1)});
    st.caGate = caGate.view({batch, -1, caGate.size(-1)});
    const auto audioCaTimestep = in.useCrossTimestep ? sigma->flatten() : audioTimestep.flatten();
    auto caAudioScaleShiftT = caAudioScaleShift(audioCaTimestep, dtype).first;
    auto caAudioGateT = caAudioGate(audioCaTimestep * gateFactor, dtype).first;
    st.caAudioScaleShiftT = caAudioScaleShiftT.view({batch, -1, caAudioScaleShiftT.size(-1)});
    st.caAudioGateT = caAudioGateT.view({batch, -1, caAudioGateT.size(-1)});
}

// The text contexts (projected for 2.0) and their additive masks; x and a, already
// projected, only for their widths.
void Transformer::Impl::prepareTextContext(const TransformerInputs& in, ForwardState& st, const at::Tensor& x, const at::Tensor& a) const
{
    const auto& c = config;
    const auto batch = st.batch;
    auto& context = st.context;
    auto& audioContext = st.audioContext;
    context = in.encoderHiddenStates.to(device, dtype);
    audioContext = in.audioEncoderHiddenStates.to(device, dtype);
    if (c.usePromptEmbeddings) {
        context = captionLinear2(nn::geluTanh(captionLinear1(context))).view({batch, -1, x.size(-1)});
        audioContext = audioCaptionLinear2(nn::geluTanh(audioCaptionLinear1(audioContext))).view({batch, -1, a.size(-1)});
    }
    TORCH_CHECK(context.size(-1) == c.crossAttentionDim, "video text context has ", context.size(-1), " features, the model expects ",
        c.usePromptEmbeddings ? c.captionChannels : c.crossAttentionDim);
    TORCH_CHECK(audioContext.size(-1) == c.audioCrossAttentionDim, "audio text context has ", audioContext.size(-1),
        " features, the model expects ", c.usePromptEmbeddings ? c.captionChannels : c.audioCrossAttentionDim);
    st.textMask =
        additiveTextMask(in.encoderAttentionMask ? std::optional<at::Tensor>(in.encoderAttentionMask->to(device)) : std::nullopt, dtype);
    st.audioTextMask = additiveTextMask(
        in.audioEncoderAttentionMask ? std::optional<at::Tensor>(in.audioEncoderAttentionMask->to(device)) : std::nullopt, dtype);
    if (in.videoSelfAttentionMask) {
        const auto& m = *in.videoSelfAttentionMask;
        const auto tokens = x.size(1);
        TORCH_CHECK(m.dim() == 3 && m.size(0) == batch && m.size(1) == tokens && m.size(2) == tokens,
            "the video self-attention mask must be [", batch, ", ", tokens, ", ", tokens, "], got ", m.sizes());
        // Multiplicative 0/1 in, additive (1 - m) * -10000 over every head, as the reference.
        st.videoSelfMask = ((1 - m.to(device, dtype)) * -10000.0).unsqueeze(1);
    }
}

// 2.5: the tokens whose latent frame encodes a single pixel frame get the learned keyframe
// embedding. A model without one ignores the mask, as the reference does.
void Transformer::Impl::markKeyframes(const TransformerInputs& in, at::Tensor& x) const
{
    if (!in.videoKeyframesMask || !keyframesEmbedding.defined())
        return;
    auto m = in.videoKeyframesMask->to(device);
    if (m.dim() == 2)
        m = m.unsqueeze(-1);
    TORCH_CHECK(m.dim() == 3 && m.size(0) == x.size(0) && m.size(1) == x.size(1) && m.size(2) == 1, "the keyframe mask must be [",
        x.size(0), ", ", x.size(1), "] or [", x.size(0), ", ", x.size(1), ", 1], got ", in.videoKeyframesMask->sizes());
    x = x + (m > 0).to(x.scalar_type()) * keyframesEmbedding.to(x.scalar_type());
}

// Which blocks take spatio-temporal guidance, and the per-row mask they perturb by.
void Transformer::Impl::preparePerturbation(const TransformerInputs& in, ForwardState& st) const
{
    const auto batch = st.batch;
    st.stg = std::set<int>(in.stgBlocks.begin(), in.stgBlocks.end());
    for (const int i : st.stg)
        TORCH_CHECK(i >= 0 && i < static_cast<int>(blocks.size()), "spatio-temporal guidance block ", i, " does not exist (the model has ",
            blocks.size(), " blocks)");
    if (!st.stg.empty()) {
        st.perturbation = in.perturbationMask ? in.perturbationMask->to(device, dtype) : at::zeros({batch}, st.f32.dtype(dtype));
        st.perturbation = st.perturbation.view({batch, 1, 1});
        st.allPerturbed = in.allPerturbed ? *in.allPerturbed : (st.perturbation == 0).all().item<bool>();
    }
    if (in.isolationMask) {
        TORCH_CHECK(in.isolationMask->numel() == batch, "the isolation mask has ", in.isolationMask->numel(), " rows, the batch ", batch);
        st.keepCrossModal = in.isolationMask->to(device, dtype).view({batch, 1, 1});
    }
}

// The block loop: cancellation, the first-block step cache and block offloading around
// runBlock; x and a go in projected and come out as the last block left them.
void Transformer::Impl::runBlocks(const TransformerInputs& in, const ForwardState& st, at::Tensor& x, at::Tensor& a) const
{
    StepCache* cache = blocks.size() > 1 ? in.stepCache : nullptr;
    at::Tensor xIn = x, aIn = a, xFirst, aFirst;
    if (cache)
        cache->skipped = false;
    // Each gated residual add waits for the norm that next reads its stream, across blocks too.
    ResidualStream video(std::move(x)), audio(std::move(a));
    for (std::size_t i = 0; i < blocks.size(); ++i) {
        if (in.stop.stop_requested())
            throw std::runtime_error("cancelled");
        if (cache && i == 1) {
            auto& xNow = video.value();
            auto& aNow = audio.value();
            if (reuseRest(*cache, xNow - xIn, aNow - aIn, xNow, aNow))
                break;
            xFirst = xNow;
            aFirst = aNow;
        }
        Block staged;
        if (offload)
            staged = mapBlock(
                blocks[i], [&](const nn::Linear& l) { return l.on(device, true); },
                [&](const at::Tensor& t) { return t.defined() ? t.to(device, true) : t; });
        const auto& b = offload ? staged : blocks[i];
        runBlock(in, st, b, st.stg.count(static_cast<int>(i)) > 0, video, audio);
        if (in.onBlock)
            in.onBlock(static_cast<int>(i), video.value(), audio.value());
    }
    x = std::move(video.value());
    a = std::move(audio.value());

    if (cache && !cache->skipped) {
        cache->restVideo = x - xFirst;
        cache->restAudio = a - aFirst;
    }
}

// One transformer block over both streams, its four stages in the reference's order.
void Transformer::Impl::runBlock(
    const TransformerInputs& in, const ForwardState& st, const Block& b, bool perturbed, ResidualStream& video, ResidualStream& audio) const
{
    const auto& c = config;
    const double eps = c.normEps;
    const bool pv = perturbed && in.stgVideo, pa = perturbed && in.stgAudio;
    const at::Tensor* pm = &st.perturbation;

    // 5.1 self-attention
    const auto vMod = modParams(b.scaleShiftTable, st.temb);
    selfAttention(video, b.attn1, vMod, st.videoRope, eps, pv ? pm : nullptr, pv && st.allPerturbed, st.videoSelfMask);
    const auto aMod = modParams(b.audioScaleShiftTable, st.tembAudio);
    selfAttention(audio, b.audioAttn1, aMod, st.audioRope, eps, pa ? pm : nullptr, pa && st.allPerturbed);

    // 5.2 text cross-attention
    at::Tensor ctx = st.context, actx = st.audioContext;
    if (c.crossAttnMod || c.audioCrossAttnMod) {
        std::vector<at::Tensor> kv, akv;
        if (st.tembPrompt.defined()) {
            kv = modParams(b.promptScaleShiftTable, st.tembPrompt);
            akv = modParams(b.audioPromptScaleShiftTable, st.tembPromptAudio);
        } else {
            kv = b.promptScaleShiftTable.unsqueeze(0).unsqueeze(0).unbind(2);
            akv = b.audioPromptScaleShiftTable.unsqueeze(0).unsqueeze(0).unbind(2);
        }
        ctx = nn::modulate(st.context, kv[1], kv[0]);
        actx = nn::modulate(st.audioContext, akv[1], akv[0]);
    }
    textCrossAttention(video, b.attn2, c.crossAttnMod, vMod, ctx, st.textMask, eps);
    textCrossAttention(audio, b.audioAttn2, c.audioCrossAttnMod, aMod, actx, st.audioTextMask, eps);

    // 5.3 audio <-> video cross-attention, both from the states before either update
    if (!in.isolateModalities) {
        const auto vCa = modParams(b.videoA2vTable.narrow(0, 0, 4), st.caScaleShift);
        const auto vGate = modParams(b.videoA2vTable.narrow(0, 4, 1), st.caGate)[0];
        const auto aCa = modParams(b.audioA2vTable.narrow(0, 0, 4), st.caAudioScaleShiftT);
        const auto aGate = modParams(b.audioA2vTable.narrow(0, 4, 1), st.caAudioGateT)[0];
        // rows: 0 scale(a2v), 1 shift(a2v), 2 scale(v2a), 3 shift(v2a)
        const auto& toVideo = b.audioToVideo;
        const auto& toAudio = b.videoToAudio;
        auto q = normFor(video, toVideo.queryInputScale(video.peek()), vCa[0], vCa[1], eps);
        auto kv = normFor(audio, toVideo.contextInputScale(audio.peek()), aCa[0], aCa[1], eps);
        const auto a2v = toVideo.cross(q, kv, std::nullopt, &st.crossVideoRope, &st.crossAudioRope);
        q = normFor(audio, toAudio.queryInputScale(audio.peek()), aCa[2], aCa[3], eps);
        kv = normFor(video, toAudio.contextInputScale(video.peek()), vCa[2], vCa[3], eps);
        const auto v2a = toAudio.cross(q, kv, std::nullopt, &st.crossAudioRope, &st.crossVideoRope);
        // Rows of a batched modality-guidance branch take nothing from the other stream (a zero
        // contribution is the skip for finite values).
        const bool rowMask = st.keepCrossModal.defined();
        video.addGated(rowMask ? a2v * st.keepCrossModal : a2v, vGate);
        audio.addGated(rowMask ? v2a * st.keepCrossModal : v2a, aGate);
    }

    // 5.4 feed-forward
    feedForward(video, b.ff, vMod, eps);
    feedForward(audio, b.audioFf, aMod, eps);
}

// The final norm, modulated by the embedded timestep, and the output projections.
TransformerOutputs Transformer::Impl::projectOutputs(const ForwardState& st, const at::Tensor& x, const at::Tensor& a) const
{
    auto values = scaleShiftTable.unsqueeze(0).unsqueeze(0) + st.embedded.unsqueeze(2);
    auto out = nn::modulate(nn::layerNormNoAffine(x, 1e-6), values.select(2, 1), values.select(2, 0));
    auto audioValues = audioScaleShiftTable.unsqueeze(0).unsqueeze(0) + st.audioEmbedded.unsqueeze(2);
    auto audioOut = nn::modulate(nn::layerNormNoAffine(a, 1e-6), audioValues.select(2, 1), audioValues.select(2, 0));
    return {projOut(out), audioProjOut(audioOut)};
}

Result<TransformerInputs> transformerInputsFrom(const tensorfile::TensorSet& set)
{
    TransformerInputs in;
    auto required = [&](const char* name, at::Tensor& out) -> Result<void> {
        const auto* t = set.find(name);
        if (!t)
            return makeError(ErrorCode::InvalidArgument, std::string("the inputs have no '") + name + "' tensor");
        out = *t;
        return {};
    };
    auto optional = [&](const char* name, std::optional<at::Tensor>& out) {
        if (const auto* t = set.find(name))
            out = *t;
    };
    for (auto [name, target] : {std::pair{"hidden_states", &in.hiddenStates}, {"audio_hidden_states", &in.audioHiddenStates},
             {"encoder_hidden_states", &in.encoderHiddenStates}, {"audio_encoder_hidden_states", &in.audioEncoderHiddenStates},
             {"timestep", &in.timestep}})
        if (auto r = required(name, *target); !r)
            return r.error();
    optional("audio_timestep", in.audioTimestep);
    optional("sigma", in.sigma);
    optional("audio_sigma", in.audioSigma);
    optional("encoder_attention_mask", in.encoderAttentionMask);
    optional("audio_encoder_attention_mask", in.audioEncoderAttentionMask);
    optional("video_coords", in.videoCoords);
    optional("audio_coords", in.audioCoords);
    optional("perturbation_mask", in.perturbationMask);
    optional("isolation_mask", in.isolationMask);
    optional("video_keyframes_mask", in.videoKeyframesMask);
    optional("video_self_attention_mask", in.videoSelfAttentionMask);
    if (const auto* sizes = set.find("sizes")) {
        if (sizes->numel() != 4)
            return makeError(ErrorCode::InvalidArgument, "'sizes' must hold 4 numbers: num_frames, height, width, audio_num_frames");
        const auto s = sizes->to(at::kLong).contiguous();
        in.numFrames = s[0].item<std::int64_t>();
        in.height = s[1].item<std::int64_t>();
        in.width = s[2].item<std::int64_t>();
        in.audioNumFrames = s[3].item<std::int64_t>();
    } else if (!in.videoCoords || !in.audioCoords) {
        return makeError(
            ErrorCode::InvalidArgument, "the inputs need 'sizes' (num_frames, height, width, audio_num_frames) or both coords");
    }
    if (const auto* fps = set.find("fps"))
        in.fps = fps->to(at::kDouble).flatten()[0].item<double>();
    auto flag = [&](const char* key) {
        const auto it = set.metadata.find(key);
        return it != set.metadata.end() && (it->second == "1" || it->second == "true");
    };
    in.isolateModalities = flag("isolate_modalities");
    in.useCrossTimestep = flag("use_cross_timestep");
    if (const auto it = set.metadata.find("stg_blocks"); it != set.metadata.end()) {
        std::size_t pos = 0;
        const auto& text = it->second;
        while (pos < text.size()) {
            const auto comma = text.find(',', pos);
            const auto item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
            if (!item.empty()) {
                try {
                    in.stgBlocks.push_back(std::stoi(item));
                } catch (const std::exception&) {
                    return makeError(ErrorCode::InvalidArgument, "stg_blocks: '" + item + "' is not a block index");
                }
            }
            if (comma == std::string::npos)
                break;
            pos = comma + 1;
        }
    }
    return in;
}

Result<TransformerOutputs> Transformer::forward(const TransformerInputs& inputs) const
{
    if (inputs.stop.stop_requested())
        return makeError(ErrorCode::Cancelled, "cancelled");
    try {
        return m_impl->run(inputs);
    } catch (const nn::ForwardError& e) {
        return makeError(e.code, std::string("LTX-2 transformer: ") + e.what());
    } catch (const c10::Error& e) {
        return errorFromException(e, "LTX-2 transformer");
    } catch (const std::runtime_error& e) {
        if (inputs.stop.stop_requested())
            return makeError(ErrorCode::Cancelled, "cancelled");
        return makeError(ErrorCode::Internal, std::string("LTX-2 transformer: ") + e.what());
    }
}

std::int64_t Transformer::residentBytes() const
{
    std::int64_t total = 0;
    for (const auto& [_, bytes] : bytesByRepresentation())
        total += bytes;
    return total;
}

std::map<std::string, int> Transformer::matmulPaths() const
{
    std::map<std::string, int> out;
    visitLinears([&](const nn::Linear& l) {
        if (!l.defined())
            return;
        const auto plan = l.weight.matmulPlan(m_impl->device, m_impl->dtype);
        auto key = std::string(quant::matmulPathName(plan.path));
        if (plan.path == quant::MatmulPath::DequantizeThenGemm)
            key += " (" + plan.reason + ")";
        ++out[key];
    });
    // Attention is no GEMM here, but where it runs belongs in the same report.
    if (!m_impl->attentionPath.empty())
        out[m_impl->attentionPath] = static_cast<int>(m_impl->blocks.size());
    return out;
}

void Transformer::visitLinears(const std::function<void(const nn::Linear&)>& f) const
{
    const_cast<Transformer*>(this)->visitLinearsMutable([&](nn::Linear& l) { f(l); });
}

namespace {

lora::Target loraTarget(const std::string& name, std::int64_t in, std::int64_t out)
{
    lora::Target t{name, {}, in, out};
    if (auto core = diffusersToLtxCoreTransformer(name); core != name)
        t.aliases.push_back(std::move(core));
    return t;
}

}  // namespace

std::vector<lora::Target> Transformer::loraTargets() const
{
    std::vector<lora::Target> out;
    visitLinears([&](const nn::Linear& l) {
        for (const auto& p : l.computedParts())
            out.push_back(loraTarget(p.name, l.inFeatures(), p.rows));
    });
    return out;
}

std::vector<lora::Target> loraTargetsFromHeaders(const Ltx2Weights& weights)
{
    // Every 2-D weight of the transformer is a linear layer.
    std::vector<lora::Target> out;
    for (const auto& [name, src] : weights.tensors(Part::Transformer)) {
        if (name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0)
            continue;
        const auto shape = weights.shape(Part::Transformer, name);
        if (shape && shape->size() == 2)
            out.push_back(loraTarget(name.substr(0, name.size() - 7), (*shape)[1], (*shape)[0]));
    }
    return out;
}

Result<std::int64_t> Transformer::setLoraDeltas(const std::vector<nn::LoraDelta>& deltas)
{
    std::map<std::string, std::vector<const nn::LoraDelta*>> byTarget;
    for (const auto& d : deltas)
        byTarget[d.target].push_back(&d);
    // Built first, assigned after: a delta that does not fit leaves the model as it was.
    std::vector<std::pair<nn::Linear*, std::shared_ptr<const nn::LoraAdapter>>> planned;
    std::size_t used = 0;
    try {
        visitLinearsMutable([&](nn::Linear& l) {
            std::vector<const nn::LoraDelta*> mine;
            for (const auto& p : l.computedParts())
                if (const auto it = byTarget.find(p.name); it != byTarget.end())
                    mine.insert(mine.end(), it->second.begin(), it->second.end());
            used += mine.size();
            planned.emplace_back(&l, nn::buildLoraAdapter(l, mine));
        });
    } catch (const c10::Error& e) {
        return makeError(ErrorCode::InvalidArgument, e.what_without_backtrace());
    }
    if (used != deltas.size())
        return makeError(ErrorCode::NotFound, std::to_string(deltas.size() - used) + " LoRA deltas name no layer of this transformer");
    std::int64_t bytes = 0;
    for (auto& [l, adapter] : planned) {
        l->lora = std::move(adapter);
        bytes += l->lora ? l->lora->bytes() : 0;
    }
    m_impl->generation = nextGeneration();
    return bytes;
}

void Transformer::visitLinearsMutable(const std::function<void(nn::Linear&)>& f)
{
    auto& m = *m_impl;
    for (auto* l : {&m.projIn, &m.audioProjIn, &m.projOut, &m.audioProjOut, &m.captionLinear1, &m.captionLinear2, &m.audioCaptionLinear1,
             &m.audioCaptionLinear2})
        f(*l);
    for (auto* ada : {&m.timeEmbed, &m.audioTimeEmbed, &m.promptAdaln, &m.audioPromptAdaln, &m.caVideoScaleShift, &m.caAudioScaleShift,
             &m.caVideoGate, &m.caAudioGate})
        for (auto* l : {&ada->linear1, &ada->linear2, &ada->linear})
            f(*l);
    for (auto& b : m.blocks) {
        for (auto* at : {&b.attn1, &b.audioAttn1, &b.attn2, &b.audioAttn2, &b.audioToVideo, &b.videoToAudio})
            for (auto* l : at->linears())
                f(*l);
        for (auto* ff : {&b.ff, &b.audioFf}) {
            f(ff->proj);
            f(ff->out);
        }
    }
}

std::map<std::string, std::int64_t> Transformer::bytesByRepresentation() const
{
    std::map<std::string, std::int64_t> out;
    visitLinears([&](const nn::Linear& l) {
        if (!l.defined())
            return;
        out[std::string(quant::representationName(l.weight.representation()))] += l.weight.residentBytes();
        if (l.bias)
            out["dense"] += l.bias->numel() * l.bias->element_size();
    });
    auto addTensor = [&](const at::Tensor& t) {
        if (t.defined())
            out["dense"] += t.numel() * t.element_size();
    };
    const auto& m = *m_impl;
    addTensor(m.scaleShiftTable);
    addTensor(m.audioScaleShiftTable);
    addTensor(m.keyframesEmbedding);
    for (const auto& b : m.blocks) {
        for (const auto* at : {&b.attn1, &b.audioAttn1, &b.attn2, &b.audioAttn2, &b.audioToVideo, &b.videoToAudio}) {
            addTensor(at->normQ);
            addTensor(at->normK);
        }
        for (const auto* t : {&b.scaleShiftTable, &b.audioScaleShiftTable, &b.promptScaleShiftTable, &b.audioPromptScaleShiftTable,
                 &b.videoA2vTable, &b.audioA2vTable})
            addTensor(*t);
    }
    return out;
}

}  // namespace vireo::ltx2
