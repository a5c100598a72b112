// LTX-2 / 2.3 / 2.5 transformer and the text connectors against diffusers 0.42.1 at tiny sizes
// (tests/fixtures/make_ltx2_dit_fixtures.py), in every checkpoint layout.
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/inspect/modelinspector.h"
#include "inference/models/ltx2/ltx2connectors.h"
#include "inference/models/ltx2/ltx2durationhead.h"
#include "inference/models/ltx2/ltx2pipeline.h"
#include "inference/models/nn/layers.h"
#include "inference/models/ltx2/ltx2transformer.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/tensorfile/tensorset.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <map>

#include <unistd.h>

using namespace vireo;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-4;

fs::path versionDir(const std::string& v)
{
    return test::fixturesDir() / ("v" + v);
}

std::vector<fs::path> layoutPaths(const std::string& v, const std::string& layout)
{
    const auto dir = versionDir(v);
    if (layout == "diffusers")
        return {dir / "diffusers"};
    if (layout == "single")
        return {dir / "single.safetensors"};
    if (layout == "gguf")
        return {dir / "transformer.gguf", dir / "text_projection.safetensors"};
    if (layout == "fp8")
        return {dir / "fp8.safetensors"};
    throw std::runtime_error("unknown layout " + layout);
}

ltx2::Ltx2Weights openWeights(const std::string& v, const std::string& layout)
{
    auto w = ltx2::Ltx2Weights::open(layoutPaths(v, layout));
    if (!w)
        throw std::runtime_error(w.error().message);
    return std::move(*w);
}

const ltx2::Transformer& transformer(const std::string& v, const std::string& layout)
{
    static std::map<std::string, ltx2::Transformer> cache;
    const auto key = v + "/" + layout;
    if (auto it = cache.find(key); it != cache.end())
        return it->second;
    auto model = ltx2::Transformer::load(openWeights(v, layout));
    if (!model)
        throw std::runtime_error(key + ": " + model.error().message);
    return cache.emplace(key, std::move(*model)).first->second;
}

double maxAbsDiff(const at::Tensor& a, const at::Tensor& b)
{
    if (a.sizes() != b.sizes())
        throw std::runtime_error("shape mismatch");
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

std::vector<fs::path> caseFiles(const std::string& v, const std::string& prefix)
{
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(versionDir(v)))
        if (e.path().filename().string().rfind(prefix, 0) == 0)
            files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

void checkTransformerCases(const std::string& v, int expectedCases)
{
    int cases = 0;
    for (const auto& file : caseFiles(v, "case_")) {
        auto set = tensorfile::readTensorSet(file);
        VT_CHECK_MSG(set.ok(), file << ": " << (set.ok() ? "" : set.error().message));
        auto inputs = ltx2::transformerInputsFrom(*set);
        VT_CHECK_MSG(inputs.ok(), file << ": " << (inputs.ok() ? "" : inputs.error().message));
        std::vector<std::pair<at::Tensor, at::Tensor>> blocks;
        inputs->onBlock = [&](int, const at::Tensor& x, const at::Tensor& a) { blocks.emplace_back(x.clone(), a.clone()); };
        const auto layout = set->metadata.at("layout");
        const auto& model = transformer(v, layout);
        VT_COMPARE(model.config().version(), set->metadata.at("version"));
        auto out = model.forward(*inputs);
        VT_CHECK_MSG(out.ok(), file << ": " << (out.ok() ? "" : out.error().message));
        const double video = maxAbsDiff(out->video, *set->find("expected.video"));
        const double audio = maxAbsDiff(out->audio, *set->find("expected.audio"));
        double block = 0;
        VT_COMPARE(blocks.size(), static_cast<std::size_t>(model.config().layers));
        for (std::size_t i = 0; i < blocks.size(); ++i) {
            const auto p = "expected.block." + std::to_string(i);
            block = std::max(
                {block, maxAbsDiff(blocks[i].first, *set->find(p + ".video")), maxAbsDiff(blocks[i].second, *set->find(p + ".audio"))});
        }
        const double scale = set->find("expected.video")->abs().max().item<double>();
        std::printf("   %s %-22s layout %-9s video %.2e audio %.2e blocks %.2e (|y| max %.2f)\n", v.c_str(), file.filename().c_str(),
            layout.c_str(), video, audio, block, scale);
        VT_CHECK_MSG(video <= kTolerance && audio <= kTolerance && block <= kTolerance, file << ": max abs error above 1e-4");
        ++cases;
    }
    VT_COMPARE(cases, expectedCases);
}

}  // namespace

VT_TEST(ltx20TransformerMatchesDiffusersInEveryLayout)
{
    checkTransformerCases("20", 7);
}
VT_TEST(ltx23TransformerMatchesDiffusersInEveryLayout)
{
    checkTransformerCases("23", 9);
}
// 2.5: the keyframe embedding, the masked video self-attention, no video FFN bias and the
// timestep-free prompt modulation, in every layout.
VT_TEST(ltx25TransformerMatchesDiffusersInEveryLayout)
{
    checkTransformerCases("25", 11);
    const auto& c = transformer("25", "diffusers").config();
    VT_CHECK(c.keyframesAbsPosEmbedding && !c.ffBias && c.audioFfBias && !c.usePromptAdalnSingle);
}

// The keyframe mask changes only the tokens it marks at the input, and a model without the
// embedding (2.3) ignores it, as the reference does.
VT_TEST(keyframeMaskIsIgnoredWithoutTheEmbedding)
{
    auto set = tensorfile::readTensorSet(versionDir("23") / "case_base.safetensors");
    VT_CHECK(set.ok());
    auto in = ltx2::transformerInputsFrom(*set);
    VT_CHECK(in.ok());
    const auto plain = transformer("23", "diffusers").forward(*in);
    in->videoKeyframesMask = at::ones({in->hiddenStates.size(0), in->hiddenStates.size(1)});
    const auto marked = transformer("23", "diffusers").forward(*in);
    VT_CHECK(plain.ok() && marked.ok() && at::equal(plain->video, marked->video));
    in->videoKeyframesMask = at::ones({1, 3});
    const auto bad = transformer("25", "diffusers").forward(*in);
    VT_CHECK(!bad.ok() && bad.error().message.find("keyframe mask") != std::string::npos);
    in->videoKeyframesMask.reset();
    in->videoSelfAttentionMask = at::ones({1, 3, 3});
    const auto badMask = transformer("25", "diffusers").forward(*in);
    VT_CHECK(!badMask.ok() && badMask.error().message.find("self-attention mask") != std::string::npos);
}

VT_TEST(connectorsMatchDiffusersInEveryLayout)
{
    for (const std::string v : {"20", "23"}) {
        // The GGUF holds no hyper-parameters and tiny widths defeat inference from shapes, so
        // it gets the config of the same model's diffusers folder (as `--config` does).
        const auto reference = ltx2::Connectors::load(openWeights(v, "diffusers"));
        VT_CHECK_MSG(reference.ok(), (reference.ok() ? "" : reference.error().message));
        for (const auto& file : caseFiles(v, "connectors_")) {
            auto set = tensorfile::readTensorSet(file);
            VT_CHECK(set.ok());
            const auto layout = set->metadata.at("layout");
            ltx2::ConnectorLoadOptions options;
            if (layout == "gguf")
                options.config = reference->config();
            auto model = ltx2::Connectors::load(openWeights(v, layout), options);
            VT_CHECK_MSG(model.ok(), file << ": " << (model.ok() ? "" : model.error().message));
            auto out = model->forward(*set->find("text_hidden_states"), *set->find("attention_mask"));
            VT_CHECK_MSG(out.ok(), file << ": " << (out.ok() ? "" : out.error().message));
            const double video = maxAbsDiff(out->video, *set->find("expected.video"));
            const double audio = maxAbsDiff(out->audio, *set->find("expected.audio"));
            VT_CHECK(at::equal(out->mask.to(at::kFloat), *set->find("expected.mask")));
            std::printf("   %s %-28s video %.2e audio %.2e\n", v.c_str(), file.filename().c_str(), video, audio);
            VT_CHECK_MSG(video <= kTolerance && audio <= kTolerance, file << ": max abs error above 1e-4");
        }
    }
}

// The inspector names 2.5 from its own markers; 2.3's markers, which 2.5 keeps, are no
// disagreement.
VT_TEST(theInspectorRecognizesLtx25)
{
    for (const auto& path : {versionDir("25") / "single.safetensors", versionDir("25") / "transformer.gguf",
             versionDir("25") / "diffusers" / "transformer" / "diffusion_pytorch_model.safetensors"}) {
        const auto r = inspect::inspectPath(path);
        VT_CHECK_MSG(r.ok(), path << ": " << (r.ok() ? "" : r.error().message));
        VT_COMPARE(r->version, std::string("2.5"));
        VT_COMPARE(r->facts.at("Keyframe embedding"), std::string("yes"));
        VT_COMPARE(r->facts.at("Video FFN bias"), std::string("no"));
        for (const auto& w : r->warnings)
            VT_CHECK_MSG(w.find("disagree") == std::string::npos, path << ": " << w);
    }
    const auto r23 = inspect::inspectPath(versionDir("23") / "single.safetensors");
    VT_CHECK(r23.ok() && r23->version == "2.3" && !r23->facts.count("Keyframe embedding"));
}

// The 2.5 duration head in both layouts (diffusers' folder, ltx-core's MultiheadAttention
// pooler inside the single file) predicts diffusers' seconds from either stream or both.
VT_TEST(durationHeadMatchesDiffusersInBothLayouts)
{
    auto set = tensorfile::readTensorSet(versionDir("25") / "duration.safetensors");
    VT_CHECK(set.ok());
    const auto& video = *set->find("video");
    const auto& audio = *set->find("audio");
    for (const std::string layout : {"diffusers", "single"}) {
        auto head = ltx2::DurationHead::load(openWeights("25", layout));
        VT_CHECK_MSG(head.ok(), layout << ": " << (head.ok() ? "" : head.error().message));
        VT_COMPARE(head->config().queries, 2);
        VT_COMPARE(head->config().heads, 2);
        VT_COMPARE(head->config().mlpHidden, 12);
        const std::pair<const char*, std::pair<std::optional<at::Tensor>, std::optional<at::Tensor>>> cases[] = {
            {"expected.both", {video, audio}}, {"expected.video", {video, std::nullopt}}, {"expected.audio", {std::nullopt, audio}}};
        for (const auto& [key, inputs] : cases) {
            const auto seconds = head->seconds(inputs.first, inputs.second);
            VT_CHECK_MSG(seconds.ok(), key << ": " << (seconds.ok() ? "" : seconds.error().message));
            const auto& expected = *set->find(key);
            const double error = ((*seconds - expected).abs() / expected).max().item<double>();
            std::printf("   duration %-9s %-15s %s s (relative error %.1e)\n", layout.c_str(), key,
                std::to_string(seconds->select(0, 0).item<double>()).c_str(), error);
            VT_CHECK_MSG(error < 1e-5, layout << " " << key << ": relative error " << error);
        }
        VT_CHECK(!head->seconds(std::nullopt, std::nullopt).ok());
        const auto wrong = head->seconds(audio, std::nullopt);  // audio-wide tokens given as video
        VT_CHECK(!wrong.ok() && wrong.error().message.find("video connector output") != std::string::npos);
    }
    // A transformer without a head says so by name; the transformer itself does not need one.
    const auto none = ltx2::resolveDurationHeadConfig(openWeights("25", "gguf"));
    VT_CHECK(!none.ok() && none.error().code == ErrorCode::NotFound && none.error().message.find("duration head") != std::string::npos);
}

// predict_num_frames' clamp, floor to the grid and step-up, with Python's rounding, row by row.
VT_TEST(durationFramesFollowTheReference)
{
    std::ifstream in(versionDir("25") / "duration_frames.json");
    const auto table = nlohmann::json::parse(in);
    const auto ratio = table.at("ratio").get<std::int64_t>();
    int rows = 0;
    for (const auto& row : table.at("rows")) {
        const auto got = ltx2::framesForSeconds(
            row.at("seconds").get<double>(), row.at("fps").get<double>(), ratio, row.at("min").get<double>(), row.at("max").get<double>());
        VT_CHECK_MSG(got.frames == row.at("frames").get<std::int64_t>(), row.dump() << " -> " << got.frames);
        VT_COMPARE((got.frames - 1) % ratio, std::int64_t{0});
        ++rows;
    }
    VT_COMPARE(rows, 220);
    VT_COMPARE(ltx2::framesForSeconds(5.2, 24.0, 8).frames, std::int64_t{121});
    VT_CHECK(ltx2::framesForSeconds(31.0, 24.0, 8).clamped);
    VT_CHECK(ltx2::framesForSeconds(1.01, 24.0, 8, 1.0, 1.02).outsideBounds);
    VT_COMPARE(ltx2::framesForSeconds(std::nan(""), 24.0, 8).frames, std::int64_t{1});
}

// The DFR canvas, padding and slot positions, for every frame count the reference was asked.
VT_TEST(dfrCanvasFollowsTheReference)
{
    std::ifstream in(versionDir("25") / "dfr_canvas.json");
    const auto table = nlohmann::json::parse(in);
    int rows = 0;
    for (const auto& row : table.at("rows")) {
        const auto c = pipelines::dfrCanvas(row.at("frames").get<std::int64_t>());
        VT_CHECK_MSG(c.ok(), row.dump());
        VT_CHECK_MSG(c->paddedFrames == row.at("padded").get<std::int64_t>() && c->segment == row.at("segment").get<std::int64_t>()
                && c->slots == row.at("slots").get<std::vector<std::int64_t>>(),
            row.dump() << " -> " << c->paddedFrames << " / " << c->segment);
        ++rows;
    }
    VT_COMPARE(rows, 126);
    VT_CHECK(!pipelines::dfrCanvas(1).ok() && !pipelines::dfrCanvas(10).ok() && !pipelines::dfrCanvas(-7).ok());
}

VT_TEST(layoutsLoadToTheSameModule)
{
    for (const std::string v : {"20", "23", "25"}) {
        auto set = tensorfile::readTensorSet(versionDir(v) / "case_base.safetensors");
        VT_CHECK(set.ok());
        auto in = ltx2::transformerInputsFrom(*set);
        VT_CHECK(in.ok());
        const auto a = transformer(v, "diffusers").forward(*in);
        const auto b = transformer(v, "single").forward(*in);
        VT_CHECK(a.ok() && b.ok());
        // Same float32 weights under two naming schemes: bit-identical outputs.
        VT_CHECK(at::equal(a->video, b->video) && at::equal(a->audio, b->audio));
        VT_COMPARE(ltx2::toJson(transformer(v, "single").config()), ltx2::toJson(transformer(v, "diffusers").config()));
    }
}

VT_TEST(quantizedLayoutsKeepTheirRepresentation)
{
    for (const std::string v : {"20", "23", "25"}) {
        const auto fp8 = transformer(v, "fp8").bytesByRepresentation();
        const auto gguf = transformer(v, "gguf").bytesByRepresentation();
        const auto dense = transformer(v, "diffusers").bytesByRepresentation();
        VT_CHECK(fp8.count("fp8-scaled") && fp8.at("fp8-scaled") > 0);
        VT_CHECK(gguf.count("gguf") && gguf.at("gguf") > 0);
        VT_CHECK(!dense.count("fp8-scaled") && !dense.count("gguf"));
        std::printf("   v%s resident: diffusers %lld B, fp8 %lld B (%lld in fp8), gguf %lld B (%lld in gguf)\n", v.c_str(),
            static_cast<long long>(transformer(v, "diffusers").residentBytes()),
            static_cast<long long>(transformer(v, "fp8").residentBytes()), static_cast<long long>(fp8.at("fp8-scaled")),
            static_cast<long long>(transformer(v, "gguf").residentBytes()), static_cast<long long>(gguf.at("gguf")));
        VT_CHECK(transformer(v, "gguf").residentBytes() < transformer(v, "diffusers").residentBytes());
    }
}

VT_TEST(versionAndConfigComeFromHeaders)
{
    // The GGUF has no config at all: everything comes from tensor shapes.
    for (const auto& [v, version] : {std::pair{"20", "2.0"}, {"23", "2.3"}, {"25", "2.5"}}) {
        const auto probed = ltx2::resolveTransformerConfig(openWeights(v, "gguf"), std::nullopt);
        VT_CHECK_MSG(probed.ok(), (probed.ok() ? "" : probed.error().message));
        VT_COMPARE(probed->version(), std::string(version));
        VT_COMPARE(probed->layers, 3);
        VT_COMPARE(probed->heads, 2);
        VT_CHECK(probed->ropeSplit);
        const auto embedded = ltx2::resolveTransformerConfig(openWeights(v, "single"), std::nullopt);
        VT_CHECK(embedded.ok());
        VT_COMPARE(embedded->version(), std::string(version));
    }
}

VT_TEST(aConfigThatDisagreesWithTheTensorsIsRefused)
{
    auto config = transformer("23", "diffusers").config();
    config.layers = 2;
    ltx2::TransformerLoadOptions options;
    options.config = config;
    auto r = ltx2::Transformer::load(openWeights("23", "single"), options);
    VT_CHECK(!r.ok());
    VT_CHECK_MSG(r.error().message.find("transformer_blocks") != std::string::npos, r.error().message);
    config = transformer("23", "diffusers").config();
    config.crossAttnMod = false;
    options.config = config;
    r = ltx2::Transformer::load(openWeights("23", "single"), options);
    VT_CHECK(!r.ok() && r.error().message.find("scale_shift_table") != std::string::npos);
}

// A config.json that cannot be read is an error naming the checkpoint, never a fallback to
// the shapes (the user gave hyper-parameters; they must be used or refused).
VT_TEST(anUnreadableConfigNamesTheCheckpoint)
{
    const auto dir = fs::temp_directory_path() / ("vireo_ltx2_config_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const auto source = versionDir("23") / "diffusers" / "transformer";
    std::ifstream in(source / "config.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto at = text.find("\"num_layers\": ");
    VT_CHECK(at != std::string::npos);
    text.insert(at + std::string("\"num_layers\": ").size(), "\"three\", \"was\": ");
    std::ofstream(dir / "config.json") << text;
    VT_CHECK(
        ::symlink((source / "diffusion_pytorch_model.safetensors").c_str(), (dir / "diffusion_pytorch_model.safetensors").c_str()) == 0);
    auto w = ltx2::Ltx2Weights::open({dir});
    VT_CHECK_MSG(w.ok(), (w.ok() ? "" : w.error().message));
    const auto r = ltx2::resolveTransformerConfig(*w, std::nullopt);
    VT_CHECK(!r.ok());
    VT_CHECK_MSG(
        r.error().message.find(dir.filename().string()) != std::string::npos && r.error().message.find("num_layers") != std::string::npos,
        r.error().message);
    for (const char* f : {"config.json", "diffusion_pytorch_model.safetensors"})
        ::unlink((dir / f).c_str());
    ::rmdir(dir.c_str());
}

VT_TEST(everyKeyMapsToExactlyOneParameter)
{
    const auto dir = fs::temp_directory_path() / ("vireo_ltx2_strict_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto full = tensorfile::readTensorSet(versionDir("23") / "single.safetensors");
    VT_CHECK(full.ok());

    // A missing parameter fails the load and is named.
    auto missing = full->tensors;
    missing.erase("model.diffusion_model.transformer_blocks.1.audio_attn2.to_k.weight");
    VT_CHECK(tensorfile::writeSafetensors(dir / "missing.safetensors", missing, full->metadata).ok());
    auto w = ltx2::Ltx2Weights::open({dir / "missing.safetensors"});
    VT_CHECK(w.ok());
    auto r = ltx2::Transformer::load(*w);
    VT_CHECK(!r.ok());
    VT_CHECK_MSG(r.error().message.find("transformer_blocks.1.audio_attn2.to_k.weight") != std::string::npos, r.error().message);

    // An unknown key fails it too, so nothing is silently ignored.
    auto extra = full->tensors;
    extra.emplace("model.diffusion_model.transformer_blocks.0.attn1.to_r.weight", at::zeros({4, 4}));
    VT_CHECK(tensorfile::writeSafetensors(dir / "extra.safetensors", extra, full->metadata).ok());
    w = ltx2::Ltx2Weights::open({dir / "extra.safetensors"});
    VT_CHECK(w.ok());
    r = ltx2::Transformer::load(*w);
    VT_CHECK(!r.ok());
    VT_CHECK_MSG(r.error().message.find("attn1.to_r.weight") != std::string::npos, r.error().message);

    // The same weights given twice (single file + diffusers folder) are read once, and counted;
    // the same names with other values are refused, naming both files.
    auto twice = ltx2::Ltx2Weights::open({versionDir("23") / "single.safetensors", versionDir("23") / "diffusers"});
    VT_CHECK_MSG(twice.ok(), (twice.ok() ? "" : twice.error().message));
    int repeated = 0;
    if (twice.ok())
        for (const auto& [files, count] : twice->repeated())
            repeated += count;
    VT_CHECK_MSG(repeated > 100, repeated);
    auto changed = full->tensors;
    changed["model.diffusion_model.transformer_blocks.0.attn1.to_q.weight"] =
        changed.at("model.diffusion_model.transformer_blocks.0.attn1.to_q.weight") + 1.0f;
    VT_CHECK(tensorfile::writeSafetensors(dir / "changed.safetensors", changed, full->metadata).ok());
    auto different = ltx2::Ltx2Weights::open({dir / "changed.safetensors", versionDir("23") / "diffusers"});
    VT_CHECK(!different.ok());
    VT_CHECK_MSG(!different.ok() && different.error().message.find("stored twice with different values") != std::string::npos
            && different.error().message.find("changed.safetensors") != std::string::npos,
        (different.ok() ? std::string("accepted") : different.error().message));

    // A GGUF transformer without its text projection cannot build the connectors.
    auto noProj = ltx2::Ltx2Weights::open({versionDir("23") / "transformer.gguf"});
    VT_CHECK(noProj.ok());
    auto c = ltx2::Connectors::load(*noProj);
    VT_CHECK(!c.ok() && c.error().message.find("text projection") != std::string::npos);
    // Not fs::remove_all: the torch wheel's libtorch exports its own std::filesystem symbols.
    for (const char* f : {"missing.safetensors", "extra.safetensors", "changed.safetensors"})
        ::unlink((dir / f).c_str());
    ::rmdir(dir.c_str());
}

VT_TEST(cancelStopsBetweenBlocksAndBadInputsAreErrors)
{
    auto set = tensorfile::readTensorSet(versionDir("23") / "case_base.safetensors");
    VT_CHECK(set.ok());
    auto in = ltx2::transformerInputsFrom(*set);
    VT_CHECK(in.ok());
    std::stop_source stop;
    in->stop = stop.get_token();
    int seen = 0;
    in->onBlock = [&](int, const at::Tensor&, const at::Tensor&) {
        ++seen;
        stop.request_stop();
    };
    auto out = transformer("23", "diffusers").forward(*in);
    VT_CHECK(!out.ok() && out.error().code == ErrorCode::Cancelled);
    VT_COMPARE(seen, 1);

    auto bad = ltx2::transformerInputsFrom(*set);
    bad->numFrames += 1;
    out = transformer("23", "diffusers").forward(*bad);
    VT_CHECK(!out.ok() && out.error().message.find("video tokens") != std::string::npos);
    bad = ltx2::transformerInputsFrom(*set);
    bad->stgBlocks = {7};
    out = transformer("23", "diffusers").forward(*bad);
    VT_CHECK(!out.ok() && out.error().message.find("block 7 does not exist") != std::string::npos);
}

VT_TEST(chunkedAttentionEqualsOneShot)
{
    // Real sizes chunk the queries so the math fallback never materializes a full score
    // matrix; the chunks must give the same result as one call, with and without a mask.
    at::manual_seed(3);
    const auto q = at::randn({2, 4, 300, 32}), k = at::randn({2, 4, 77, 32}), v = at::randn({2, 4, 77, 32});
    const auto full = nn::attention(q, k, v, std::nullopt);
    const auto chunked = nn::attention(q, k, v, std::nullopt, 2 * 4 * 77 * 64);  // 64 query rows at a time
    VT_CHECK(maxAbsDiff(full, chunked) <= 1e-6);
    const auto mask = at::where(at::rand({2, 1, 1, 77}) > 0.3, 0.0, -10000.0);
    VT_CHECK(maxAbsDiff(nn::attention(q, k, v, mask), nn::attention(q, k, v, mask, 2 * 4 * 77 * 50)) <= 1e-6);
    const auto perQuery = at::where(at::rand({2, 1, 300, 77}) > 0.3, 0.0, -10000.0);
    VT_CHECK(maxAbsDiff(nn::attention(q, k, v, perQuery), nn::attention(q, k, v, perQuery, 2 * 4 * 77 * 50)) <= 1e-6);
}

VT_MAIN("TestLtx2Dit")

namespace {

// Every batched input twice along the batch: two guidance branches of the same request.
ltx2::TransformerInputs doubledBatch(ltx2::TransformerInputs in)
{
    auto twice = [](at::Tensor& t) {
        if (t.defined())
            t = at::cat({t, t}, 0);
    };
    auto twiceOpt = [&](std::optional<at::Tensor>& t) {
        if (t)
            twice(*t);
    };
    twice(in.hiddenStates);
    twice(in.audioHiddenStates);
    twice(in.encoderHiddenStates);
    twice(in.audioEncoderHiddenStates);
    twice(in.timestep);
    for (auto* t : {&in.audioTimestep, &in.sigma, &in.audioSigma, &in.encoderAttentionMask, &in.audioEncoderAttentionMask, &in.videoCoords,
             &in.audioCoords, &in.perturbationMask})
        twiceOpt(*t);
    return in;
}

}  // namespace

VT_TEST(firstBlockStepCacheSkipsOnlyWhatBarelyChanged)
{
    auto set = tensorfile::readTensorSet(versionDir("23") / "case_base.safetensors");
    VT_CHECK(set.ok());
    auto in = ltx2::transformerInputsFrom(*set);
    VT_CHECK(in.ok());
    const auto& model = transformer("23", "diffusers");
    const auto plain = model.forward(*in);
    VT_CHECK(plain.ok());

    // Threshold 0: every call computes in full, bit for bit the plain forward.
    ltx2::StepCache cache;
    in->stepCache = &cache;
    for (int i = 0; i < 2; ++i) {
        auto out = model.forward(*in);
        VT_CHECK(out.ok() && !cache.skipped);
        VT_CHECK(at::equal(out->video, plain->video) && at::equal(out->audio, plain->audio));
    }
    VT_COMPARE(cache.computed, 2);
    VT_COMPARE(cache.skips, 0);
    VT_CHECK(cache.change == 0.0);  // the same inputs: the first block's residual did not move

    // Unchanged inputs under a threshold: the rest is reused, and gives the plain output up to
    // the rounding of one addition.
    cache.threshold = 0.5;
    cache.reset();
    VT_CHECK(cache.threshold == 0.5 && !cache.firstVideo.defined());
    auto first = model.forward(*in);
    VT_CHECK(first.ok() && !cache.skipped && cache.change == -1.0);
    auto second = model.forward(*in);
    VT_CHECK(second.ok() && cache.skipped);
    const double reuseErr = std::max(maxAbsDiff(second->video, plain->video), maxAbsDiff(second->audio, plain->audio));
    std::printf("   a reused step against the full forward: max abs %.2e\n", reuseErr);
    VT_CHECK(reuseErr <= 1e-5);
    // One skip in a row at most (maxConsecutive 1): the next call computes.
    auto third = model.forward(*in);
    VT_CHECK(third.ok() && !cache.skipped);
    // The caller can forbid a skip (first and last steps).
    cache.allowSkip = false;
    VT_CHECK(model.forward(*in).ok() && !cache.skipped);
    cache.allowSkip = true;
    VT_COMPARE(cache.skips, 1);

    // A real change is computed, and measured.
    auto moved = *in;
    moved.hiddenStates = in->hiddenStates + 0.5 * at::randn_like(in->hiddenStates, at::TensorOptions().dtype(in->hiddenStates.dtype()));
    cache.threshold = 1e-3;
    VT_CHECK(model.forward(moved).ok() && !cache.skipped && cache.change > 1e-3);

    // Guidance branches in one batch: every row must be under the threshold. Half the rows
    // changed gives the same change as all of them (the largest row), not half of it.
    ltx2::StepCache all, half;
    auto batch = doubledBatch(*in);
    const auto rows = in->hiddenStates.size(0);
    const auto noise = 0.5 * at::randn_like(in->hiddenStates, at::TensorOptions().dtype(in->hiddenStates.dtype()));
    auto allMoved = batch, halfMoved = batch;
    allMoved.hiddenStates = batch.hiddenStates + at::cat({noise, noise}, 0);
    halfMoved.hiddenStates = batch.hiddenStates + at::cat({at::zeros_like(noise), noise}, 0);
    for (auto [c, moved2] : {std::pair{&all, &allMoved}, std::pair{&half, &halfMoved}}) {
        c->threshold = 1e9;
        batch.stepCache = c;
        VT_CHECK(model.forward(batch).ok());
        moved2->stepCache = c;
        c->threshold = 1e-3;
        VT_CHECK(model.forward(*moved2).ok() && !c->skipped);
    }
    std::printf(
        "   relative change, all %lld rows moved %.4f; half of them %.4f\n", 2 * static_cast<long long>(rows), all.change, half.change);
    VT_CHECK(std::abs(all.change - half.change) <= 1e-6 * all.change);

    // Another batch size never reuses what was cached for this one.
    ltx2::StepCache shapes;
    shapes.threshold = 1e9;
    in->stepCache = &shapes;
    VT_CHECK(model.forward(*in).ok());
    batch.stepCache = &shapes;
    VT_CHECK(model.forward(batch).ok() && !shapes.skipped && shapes.change == -1.0);
}
