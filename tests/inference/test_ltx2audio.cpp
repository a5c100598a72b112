// LTX-2 / LTX-2.3 audio VAE decoder and vocoders against diffusers 0.42.1 at tiny sizes
// (tests/fixtures/make_ltx2_audio_fixtures.py), from a diffusers folder and a Lightricks single file.
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/models/ltx2/ltx2audioprep.h"
#include "inference/models/ltx2/ltx2audiovae.h"
#include "inference/models/ltx2/ltx2vocoder.h"
#include "inference/models/ltx2/ltx2weights.h"
#include "inference/tensorfile/tensorset.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <unistd.h>

using namespace vireo;
namespace fs = std::filesystem;

namespace {

constexpr double kTolerance = 1e-4;

fs::path versionDir(const std::string& v)
{
    return test::fixturesDir() / ("v" + v);
}

fs::path layoutPath(const std::string& v, const std::string& layout)
{
    if (layout == "diffusers")
        return versionDir(v) / "diffusers";
    if (layout == "single")
        return versionDir(v) / "single.safetensors";
    throw std::runtime_error("unknown layout " + layout);
}

ltx2::Ltx2Weights openWeights(const fs::path& path)
{
    auto w = ltx2::Ltx2Weights::open({path});
    if (!w)
        throw std::runtime_error(w.error().message);
    return std::move(*w);
}

struct Audio {
    ltx2::AudioDecoder decoder;
    ltx2::Vocoder vocoder;
};

const Audio& audio(const std::string& v, const std::string& layout)
{
    static std::map<std::string, Audio> cache;
    const auto key = v + "/" + layout;
    if (auto it = cache.find(key); it != cache.end())
        return it->second;
    const auto weights = openWeights(layoutPath(v, layout));
    auto decoder = ltx2::AudioDecoder::load(weights);
    if (!decoder)
        throw std::runtime_error(key + ": " + decoder.error().message);
    auto vocoder = ltx2::Vocoder::load(weights);
    if (!vocoder)
        throw std::runtime_error(key + ": " + vocoder.error().message);
    return cache.emplace(key, Audio{std::move(*decoder), std::move(*vocoder)}).first->second;
}

double maxAbsDiff(const at::Tensor& a, const at::Tensor& b)
{
    if (a.sizes() != b.sizes())
        throw std::runtime_error("shape mismatch: " + test::show(a.sizes().vec()) + " vs " + test::show(b.sizes().vec()));
    return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

std::vector<fs::path> caseFiles(const std::string& v)
{
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(versionDir(v)))
        if (e.path().filename().string().rfind("case_", 0) == 0)
            files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

at::Tensor packedLatents(const tensorfile::TensorSet& set)
{
    const auto& latents = *set.find("latents");
    if (set.metadata.at("latents") == "packed")
        return latents;
    auto packed = ltx2::AudioDecoder::packLatents(latents);
    if (!packed)
        throw std::runtime_error(packed.error().message);
    return *packed;
}

void checkCases(const std::string& v, const std::string& version, int expectedSampleRate)
{
    int cases = 0;
    std::set<std::string> layouts;
    for (const auto& file : caseFiles(v)) {
        auto set = tensorfile::readTensorSet(file);
        VT_CHECK_MSG(set.ok(), file << ": " << (set.ok() ? "" : set.error().message));
        VT_COMPARE(set->metadata.at("version"), version);
        const auto layout = set->metadata.at("layout");
        layouts.insert(layout + "/" + set->metadata.at("latents"));
        const auto& model = audio(v, layout);
        VT_COMPARE(model.vocoder.config().version(), version);
        VT_COMPARE(model.vocoder.sampleRate(), expectedSampleRate);
        VT_COMPARE(std::to_string(model.vocoder.sampleRate()), set->metadata.at("sample_rate"));

        auto mel = model.decoder.decode(packedLatents(*set));
        VT_CHECK_MSG(mel.ok(), file << ": " << (mel.ok() ? "" : mel.error().message));
        const auto& expectedMel = *set->find("expected.mel");
        const auto& expectedWave = *set->find("expected.waveform");
        VT_COMPARE(mel->sizes().vec(), expectedMel.sizes().vec());
        // The chain as the app runs it (our mel into our vocoder), and the vocoder alone on
        // diffusers' mel, so a vocoder error cannot hide behind a decoder error or vice versa.
        auto wave = model.vocoder.run(*mel);
        VT_CHECK_MSG(wave.ok(), file << ": " << (wave.ok() ? "" : wave.error().message));
        auto waveAlone = model.vocoder.run(expectedMel);
        VT_CHECK(waveAlone.ok());
        VT_COMPARE(wave->sizes().vec(), expectedWave.sizes().vec());
        const double melErr = maxAbsDiff(*mel, expectedMel);
        const double waveErr = maxAbsDiff(*wave, expectedWave);
        const double aloneErr = maxAbsDiff(*waveAlone, expectedWave);
        std::printf("   %s %-26s %-9s %-8s mel %s -> %.2e | waveform %s -> %.2e (vocoder alone %.2e) | |mel| %.2f |w| %.2f\n",
            version.c_str(), file.filename().c_str(), layout.c_str(), set->metadata.at("latents").c_str(),
            test::show(mel->sizes().vec()).c_str(), melErr, test::show(wave->sizes().vec()).c_str(), waveErr, aloneErr,
            expectedMel.abs().max().item<double>(), expectedWave.abs().max().item<double>());
        VT_CHECK_MSG(melErr <= kTolerance && waveErr <= kTolerance && aloneErr <= kTolerance, file << ": max abs error above 1e-4");
        ++cases;
    }
    VT_COMPARE(cases, 4);
    // Both checkpoint layouts and both latent layouts were exercised.
    VT_CHECK(layouts.count("diffusers/packed") && layouts.count("diffusers/unpacked") && layouts.count("single/packed"));
}

std::string errorOf(const Result<ltx2::Vocoder>& r)
{
    return r.ok() ? std::string("(loaded)") : r.error().message;
}
std::string errorOf(const Result<ltx2::AudioDecoder>& r)
{
    return r.ok() ? std::string("(loaded)") : r.error().message;
}

}  // namespace

VT_TEST(ltx20AudioMatchesDiffusers)
{
    checkCases("20", "2.0", 24000);
}
VT_TEST(ltx23AudioMatchesDiffusers)
{
    checkCases("23", "2.3", 48000);
}

// The encoder (audio conditioning's first step): the raw moments and the packed, normalized
// latents of the posterior's mode, on 4L - 3 frames, an odd count and one frame, in both layouts.
VT_TEST(audioEncoderMatchesDiffusers)
{
    for (const std::string v : {"20", "23"}) {
        std::map<std::string, std::optional<ltx2::AudioEncoder>> encoders;
        int cases = 0;
        for (const auto& e : fs::directory_iterator(versionDir(v))) {
            if (e.path().filename().string().rfind("encode_", 0) != 0)
                continue;
            auto set = tensorfile::readTensorSet(e.path());
            VT_CHECK_MSG(set.ok(), e.path() << ": " << (set.ok() ? "" : set.error().message));
            const auto layout = set->metadata.at("layout");
            auto& encoder = encoders[layout];
            if (!encoder) {
                auto loaded = ltx2::AudioEncoder::load(openWeights(layoutPath(v, layout)));
                VT_CHECK_MSG(loaded.ok(), layout << ": " << (loaded.ok() ? "" : loaded.error().message));
                encoder.emplace(std::move(*loaded));
            }
            const auto& mel = *set->find("mel");
            auto moments = encoder->moments(mel);
            auto latents = encoder->encode(mel);
            VT_CHECK(moments.ok() && latents.ok());
            const auto& expected = *set->find("expected.latents");
            VT_COMPARE(latents->sizes().vec(), expected.sizes().vec());
            VT_COMPARE(ltx2::AudioEncoder::latentFrames(encoder->config(), mel.size(2)), expected.size(1));
            const double momentErr = maxAbsDiff(*moments, *set->find("expected.moments"));
            const double latentErr = maxAbsDiff(*latents, expected);
            std::printf("   v%s %-24s %-9s mel %s -> latents %s: moments %.2e, latents %.2e\n", v.c_str(), e.path().filename().c_str(),
                layout.c_str(), test::show(mel.sizes().vec()).c_str(), test::show(latents->sizes().vec()).c_str(), momentErr, latentErr);
            VT_CHECK_MSG(momentErr <= kTolerance && latentErr <= kTolerance, e.path() << ": max abs error above 1e-4");
            ++cases;
        }
        VT_COMPARE(cases, 4);
        VT_CHECK(encoders.count("single") && encoders.count("diffusers"));
        // What the encoder is not given is refused with the reason, not a crash.
        auto wrongBins = encoders["diffusers"]->encode(at::zeros({1, 2, 9, 7}));
        VT_CHECK(!wrongBins.ok() && wrongBins.error().message.find("bins") != std::string::npos);
        auto mono = encoders["diffusers"]->encode(at::zeros({1, 1, 9, encoders["diffusers"]->config().melBins}));
        VT_CHECK(!mono.ok());
        VT_CHECK(encoders["diffusers"]->residentBytes() > 0);
    }
}

// The audio VAE's front end against ltx-core 1.0.0's AudioProcessor: waveforms at 16, 44.1,
// 48, 22.05 and 8 kHz (resampled to 16 kHz as torchaudio does) to log-mel spectrograms.
VT_TEST(melFrontEndMatchesLtxCore)
{
    int cases = 0;
    for (const auto& e : fs::directory_iterator(test::fixturesDir())) {
        if (e.path().filename().string().rfind("mel_", 0) != 0)
            continue;
        auto set = tensorfile::readTensorSet(e.path());
        VT_CHECK_MSG(set.ok(), e.path() << ": " << (set.ok() ? "" : set.error().message));
        const auto rate = std::stoll(set->metadata.at("sample_rate"));
        const auto& expected = *set->find("expected.mel");
        auto mel = ltx2::logMelSpectrogram(*set->find("waveform"), rate);
        VT_CHECK_MSG(mel.ok(), e.path() << ": " << (mel.ok() ? "" : mel.error().message));
        VT_COMPARE(mel->sizes().vec(), expected.sizes().vec());
        const double err = maxAbsDiff(*mel, expected);
        std::printf("   %-24s %6lld Hz -> mel %s: max abs %.2e (log-mel range %.2f .. %.2f)\n", e.path().filename().c_str(),
            static_cast<long long>(rate), test::show(mel->sizes().vec()).c_str(), err, expected.min().item<double>(),
            expected.max().item<double>());
        VT_CHECK_MSG(err <= 1e-4, e.path() << ": max abs error above 1e-4");
        ++cases;
    }
    VT_COMPARE(cases, 6);
    auto tooShort = ltx2::logMelSpectrogram(at::zeros({1, 2, 100}), 16000);
    VT_CHECK(!tooShort.ok() && tooShort.error().message.find("at least 513") != std::string::npos);
    VT_CHECK(!ltx2::logMelSpectrogram(at::zeros({2, 100}), 16000).ok());
    VT_CHECK(!ltx2::logMelSpectrogram(at::zeros({1, 2, 4000}), 0).ok());
    // Resampling keeps torchaudio's length rule: ceil(N * to / from).
    VT_COMPARE(ltx2::resampleSinc(at::zeros({1, 2, 44100}), 44100, 16000).size(2), std::int64_t{16000});
    VT_COMPARE(ltx2::resampleSinc(at::zeros({1, 1, 1001}), 48000, 16000).size(2), std::int64_t{334});
}

VT_TEST(layoutsLoadTheSameModel)
{
    for (const std::string v : {"20", "23"}) {
        const auto& folder = audio(v, "diffusers");
        const auto& single = audio(v, "single");
        // The embedded ltx-core config spells out no attention resolutions, so ltx-core's
        // default {8, 16, 32} applies; at resolution 256 it places no block, like diffusers' None.
        auto a = folder.decoder.config(), b = single.decoder.config();
        VT_CHECK(a.attnResolutions.empty());
        VT_COMPARE(b.attnResolutions, (std::vector<std::int64_t>{8, 16, 32}));
        b.attnResolutions.clear();
        VT_COMPARE(ltx2::toJson(b), ltx2::toJson(a));

        auto vf = folder.vocoder.config(), vs = single.vocoder.config();
        if (v == "23") {
            // diffusers' converted config drops the 16 kHz stage's final activation; ltx-core
            // applies it (use_tanh_at_final false => clamp). Everything else agrees.
            VT_CHECK(vf.vocoder.finalAct == ltx2::VocoderFinalActivation::None);
            VT_CHECK(vs.vocoder.finalAct == ltx2::VocoderFinalActivation::Clamp);
            VT_CHECK(vs.bweGenerator.finalAct == ltx2::VocoderFinalActivation::None);
            vs.vocoder.finalAct = vf.vocoder.finalAct;
        }
        VT_COMPARE(ltx2::toJson(vs), ltx2::toJson(vf));

        auto set = tensorfile::readTensorSet(versionDir(v) / "case_base.safetensors");
        VT_CHECK(set.ok());
        const auto melA = folder.decoder.decode(*set->find("latents"));
        const auto melB = single.decoder.decode(*set->find("latents"));
        VT_CHECK(melA.ok() && melB.ok());
        VT_CHECK(at::equal(*melA, *melB));  // same float32 weights under two naming schemes
        if (v == "20") {
            const auto wa = folder.vocoder.run(*melA), wb = single.vocoder.run(*melB);
            VT_CHECK(wa.ok() && wb.ok() && at::equal(*wa, *wb));
        }
    }
}

VT_TEST(sampleRatesAndLengthsAsConfigured)
{
    for (const auto& [v, rate, perFrame] : {std::tuple{"20", 24000, 4}, {"23", 48000, 24}}) {
        for (const std::string layout : {"diffusers", "single"}) {
            const auto& m = audio(v, layout);
            VT_COMPARE(m.vocoder.sampleRate(), rate);
            VT_COMPARE(m.decoder.config().sampleRate, 16000);
            VT_COMPARE(m.decoder.config().melFrames(5), 17);
            VT_COMPARE(m.decoder.config().melFrames(1), 1);
            // Samples per mel frame: the upsampling product (x3 bandwidth extension for 2.3).
            const auto mel = at::zeros({1, 2, 3, m.decoder.config().melBins});
            const auto wave = m.vocoder.run(mel);
            VT_CHECK(wave.ok());
            VT_COMPARE(wave->sizes().vec(), (std::vector<std::int64_t>{1, 2, 3 * perFrame}));
        }
    }
    VT_COMPARE(ltx2::VocoderConfig{}.sampleRate(), 24000);  // the published 2.0 defaults
}

VT_TEST(residentBytesCountTheDecoderAndVocoderWeights)
{
    for (const std::string v : {"20", "23"}) {
        std::int64_t decoderBytes = 0, vocoderBytes = 0;
        auto avae = tensorfile::readTensorSet(versionDir(v) / "diffusers/audio_vae/diffusion_pytorch_model.safetensors");
        auto voc = tensorfile::readTensorSet(versionDir(v) / "diffusers/vocoder/diffusion_pytorch_model.safetensors");
        VT_CHECK(avae.ok() && voc.ok());
        for (const auto& [name, t] : avae->tensors)
            if (name.rfind("encoder.", 0) != 0)
                decoderBytes += t.numel() * t.element_size();
        for (const auto& [name, t] : voc->tensors)
            if (name != "mel_stft.stft_fn.inverse_basis")
                vocoderBytes += t.numel() * t.element_size();
        const auto& m = audio(v, "diffusers");
        std::printf("   v%s resident: audio VAE decoder %lld B (stored %lld), vocoder %lld B (stored %lld)\n", v.c_str(),
            static_cast<long long>(m.decoder.residentBytes()), static_cast<long long>(decoderBytes),
            static_cast<long long>(m.vocoder.residentBytes()), static_cast<long long>(vocoderBytes));
        VT_COMPARE(m.decoder.residentBytes(), decoderBytes);
        if (v == "20")
            VT_COMPARE(m.vocoder.residentBytes(), vocoderBytes);
        else  // filters are held expanded per channel, plus the computed resampler filter
            VT_CHECK(m.vocoder.residentBytes() > vocoderBytes && m.vocoder.residentBytes() < 2 * vocoderBytes);
    }
}

VT_TEST(everyKeyMapsToExactlyOneParameter)
{
    const auto dir = fs::temp_directory_path() / ("vireo_ltx2_audio_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    auto full = tensorfile::readTensorSet(versionDir("23") / "single.safetensors");
    VT_CHECK(full.ok());
    auto write = [&](const char* name, const std::map<std::string, at::Tensor>& tensors) {
        VT_CHECK(tensorfile::writeSafetensors(dir / name, tensors, full->metadata).ok());
        return openWeights(dir / name);
    };

    // A missing parameter fails the load and is named (in diffusers' name).
    for (const auto& [stored, canonical] :
        {std::pair{"vocoder.bwe_generator.resblocks.2.convs1.1.weight", "bwe_generator.resnets.2.convs1.1.weight"},
            {"vocoder.vocoder.resblocks.1.acts2.0.downsample.lowpass.filter", "vocoder.resnets.1.acts2.0.downsample.filter"},
            {"vocoder.vocoder.act_post.act.beta", "vocoder.act_out.act.beta"}, {"vocoder.mel_stft.mel_basis", "mel_stft.mel_basis"}}) {
        auto tensors = full->tensors;
        VT_CHECK_MSG(tensors.erase(stored) == 1, stored);
        const auto r = ltx2::Vocoder::load(write("missing.safetensors", tensors));
        VT_CHECK_MSG(!r.ok() && errorOf(r).find(canonical) != std::string::npos, errorOf(r));
        VT_CHECK(errorOf(r).find("missing.safetensors") != std::string::npos);  // errors name the file
    }
    {
        auto tensors = full->tensors;
        VT_CHECK(tensors.erase("audio_vae.decoder.up.1.block.2.conv2.conv.bias") == 1);
        const auto r = ltx2::AudioDecoder::load(write("missing.safetensors", tensors));
        VT_CHECK_MSG(!r.ok() && errorOf(r).find("decoder.up.1.block.2.conv2.conv.bias") != std::string::npos, errorOf(r));
        tensors = full->tensors;
        VT_CHECK(tensors.erase("audio_vae.per_channel_statistics.std-of-means") == 1);
        const auto s = ltx2::AudioDecoder::load(write("missing.safetensors", tensors));
        VT_CHECK_MSG(!s.ok() && errorOf(s).find("latents_std") != std::string::npos, errorOf(s));
    }

    // A stored tensor nothing uses fails too, so nothing is silently ignored.
    auto extra = full->tensors;
    extra.emplace("vocoder.vocoder.resblocks.0.convs1.7.weight", at::zeros({4, 4, 3}));
    auto r = ltx2::Vocoder::load(write("extra.safetensors", extra));
    VT_CHECK_MSG(!r.ok() && errorOf(r).find("resblocks.0.convs1.7.weight") != std::string::npos, errorOf(r));

    // The parts a decode-only load skips on purpose: the audio encoder, the spare ltx-core
    // statistics and the inverse STFT basis. Without the latter the vocoder still loads.
    auto noInverse = full->tensors;
    VT_CHECK(noInverse.erase("vocoder.mel_stft.stft_fn.inverse_basis") == 1);
    VT_CHECK(ltx2::Vocoder::load(write("noinverse.safetensors", noInverse)).ok());

    // A shape that disagrees with the config is refused with both shapes.
    auto wrong = full->tensors;
    wrong["vocoder.bwe_generator.resblocks.0.acts1.0.act.alpha"] = at::zeros({3});
    r = ltx2::Vocoder::load(write("wrong.safetensors", wrong));
    VT_CHECK_MSG(!r.ok() && errorOf(r).find("bwe_generator.resnets.0.acts1.0.act.alpha is [3]") != std::string::npos, errorOf(r));

    for (const char* f : {"missing.safetensors", "extra.safetensors", "noinverse.safetensors", "wrong.safetensors"})
        ::unlink((dir / f).c_str());
    ::rmdir(dir.c_str());
}

VT_TEST(aConfigThatDisagreesWithTheTensorsIsRefused)
{
    const auto weights = openWeights(layoutPath("23", "single"));
    auto vc = audio("23", "single").vocoder.config();
    vc.vocoder.hiddenChannels *= 2;
    ltx2::VocoderLoadOptions vo;
    vo.config = vc;
    auto r = ltx2::Vocoder::load(weights, vo);
    VT_CHECK_MSG(!r.ok() && errorOf(r).find("conv_in.weight") != std::string::npos, errorOf(r));
    vc = audio("23", "single").vocoder.config();
    vc.bwe = false;
    vo.config = vc;
    r = ltx2::Vocoder::load(weights, vo);
    VT_CHECK_MSG(!r.ok() && errorOf(r).find("bwe_generator") != std::string::npos, errorOf(r));
    vc = audio("23", "single").vocoder.config();
    vc.hopLength *= 2;  // the residual would no longer line up with the x3 skip
    vo.config = vc;
    r = ltx2::Vocoder::load(weights, vo);
    VT_CHECK_MSG(!r.ok() && r.error().code == ErrorCode::Unsupported, errorOf(r));

    auto ac = audio("23", "single").decoder.config();
    ac.numResBlocks = 1;
    ltx2::AudioDecoderLoadOptions ao;
    ao.config = ac;
    auto d = ltx2::AudioDecoder::load(weights, ao);
    VT_CHECK_MSG(!d.ok() && errorOf(d).find("blocks per decoder level") != std::string::npos, errorOf(d));
    ac = audio("23", "single").decoder.config();
    ac.melBins = 32;  // packed tokens would be 2 x 8 wide, latents_mean is 8
    ao.config = ac;
    d = ltx2::AudioDecoder::load(weights, ao);
    VT_CHECK_MSG(!d.ok() && errorOf(d).find("latents_mean") != std::string::npos, errorOf(d));
    ac = audio("23", "single").decoder.config();
    ac.midBlockAddAttention = true;
    ao.config = ac;
    d = ltx2::AudioDecoder::load(weights, ao);
    VT_CHECK(!d.ok() && d.error().code == ErrorCode::Unsupported);
}

VT_TEST(publishedEmbeddedConfigsParse)
{
    // The "audio_vae" and "vocoder" sections as the LTX-2.3 single file carries them.
    const std::string config = R"({
      "audio_vae": {"model": {"params": {"ddconfig": {"double_z": true, "mel_bins": 64, "z_channels": 8, "resolution": 256,
          "in_channels": 2, "out_ch": 2, "ch": 128, "ch_mult": [1, 2, 4], "num_res_blocks": 2, "dropout": 0.0,
          "mid_block_add_attention": false, "norm_type": "pixel", "causality_axis": "height"}, "sampling_rate": 16000}}},
      "vocoder": {
        "vocoder": {"upsample_initial_channel": 1536, "resblock": "AMP1", "upsample_rates": [5, 2, 2, 2, 2, 2],
          "resblock_kernel_sizes": [3, 7, 11], "upsample_kernel_sizes": [11, 4, 4, 4, 4, 4],
          "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "stereo": true, "use_tanh_at_final": false,
          "activation": "snakebeta", "use_bias_at_final": false},
        "bwe": {"upsample_initial_channel": 512, "resblock": "AMP1", "upsample_rates": [6, 5, 2, 2, 2],
          "resblock_kernel_sizes": [3, 7, 11], "upsample_kernel_sizes": [12, 11, 4, 4, 4],
          "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]], "stereo": true, "use_tanh_at_final": false,
          "activation": "snakebeta", "use_bias_at_final": false, "apply_final_activation": false, "input_sampling_rate": 16000,
          "output_sampling_rate": 48000, "hop_length": 80, "n_fft": 512, "win_size": 512, "num_mels": 64}}})";
    const auto a = ltx2::audioVaeConfigFromLtxCore(config);
    VT_CHECK_MSG(a.ok(), (a.ok() ? "" : a.error().message));
    auto expectedVae = ltx2::AudioVaeConfig{};
    expectedVae.attnResolutions = {8, 16, 32};  // ltx-core's default; no block at 64/128/256
    VT_COMPARE(ltx2::toJson(*a), ltx2::toJson(expectedVae));
    VT_COMPARE(a->packedWidth(), 128);

    const auto v = ltx2::vocoderConfigFromLtxCore(config);
    VT_CHECK_MSG(v.ok(), (v.ok() ? "" : v.error().message));
    VT_CHECK(v->bwe);
    VT_COMPARE(v->sampleRate(), 48000);
    VT_COMPARE(v->vocoder.samplesPerFrame(), 160);
    VT_COMPARE(v->bweGenerator.samplesPerFrame(), 240);
    VT_CHECK(v->vocoder.finalAct == ltx2::VocoderFinalActivation::Clamp);
    VT_CHECK(v->bweGenerator.finalAct == ltx2::VocoderFinalActivation::None);
    VT_CHECK(v->vocoder.act == ltx2::VocoderActivation::SnakeBeta && v->vocoder.antialias);
    VT_COMPARE(v->filterLength, 512);
    VT_COMPARE(v->windowLength, 512);
    VT_COMPARE(v->numMelChannels, 64);
    // Apart from the 16 kHz stage's final clamp and the input width ltx-core hard-codes (read
    // from conv_pre at load), this is diffusers' LTX2VocoderWithBWE default.
    auto fromDiffusers = ltx2::vocoderConfigFromDiffusers(R"({"_class_name": "LTX2VocoderWithBWE"})");
    VT_CHECK(fromDiffusers.ok());
    auto probed = *v;
    probed.vocoder.finalAct = ltx2::VocoderFinalActivation::None;
    probed.vocoder.inChannels = probed.bweGenerator.inChannels = 128;
    VT_COMPARE(ltx2::toJson(probed), ltx2::toJson(*fromDiffusers));

    const auto flat = ltx2::vocoderConfigFromLtxCore(R"({"vocoder": {"resblock": "1", "stereo": true}})");
    VT_CHECK(flat.ok() && !flat->bwe && flat->sampleRate() == 24000 && flat->vocoder.finalAct == ltx2::VocoderFinalActivation::Tanh);
    VT_CHECK(!ltx2::vocoderConfigFromLtxCore(R"({"vocoder": {"resblock": "2"}})").ok());
    VT_CHECK(!ltx2::vocoderConfigFromDiffusers(R"({"final_act_fn": "relu"})").ok());
}

VT_TEST(badInputsAreErrorsAndCancelStops)
{
    const auto& m = audio("23", "diffusers");
    auto r = m.decoder.decode(at::zeros({1, 4, 5}));
    VT_CHECK_MSG(!r.ok() && r.error().message.find("8") != std::string::npos, (r.ok() ? "" : r.error().message));
    VT_CHECK(r.error().message.find("diffusers") != std::string::npos);  // names the files
    r = m.decoder.decode(at::zeros({1, 2, 5, 4}));
    VT_CHECK(!r.ok() && r.error().message.find("packLatents") != std::string::npos);
    VT_CHECK(!ltx2::AudioDecoder::packLatents(at::zeros({2, 3})).ok());
    auto w = m.vocoder.run(at::zeros({1, 2, 3, 8}));
    VT_CHECK(!w.ok() && w.error().code == ErrorCode::InvalidArgument);

    std::stop_source stop;
    stop.request_stop();
    r = m.decoder.decode(at::zeros({1, 5, 8}), stop.get_token());
    VT_CHECK(!r.ok() && r.error().code == ErrorCode::Cancelled);
    w = m.vocoder.run(at::zeros({1, 2, 3, 16}), stop.get_token());
    VT_CHECK(!w.ok() && w.error().code == ErrorCode::Cancelled);
}

VT_MAIN("TestLtx2Audio")
