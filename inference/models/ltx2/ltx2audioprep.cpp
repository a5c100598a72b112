#include "inference/models/ltx2/ltx2audioprep.h"

#include <ATen/ATen.h>

#include <cmath>
#include <string>
#include <numeric>

namespace vireo::ltx2 {

namespace {

constexpr double kPi = 3.141592653589793;

// torchaudio's slaney mel scale: linear below 1 kHz, logarithmic above.
constexpr double kSlaneySpacing = 200.0 / 3;
constexpr double kMinLogHz = 1000.0;
const double kMinLogMel = kMinLogHz / kSlaneySpacing;
const double kLogStep = std::log(6.4) / 27.0;

double hzToMel(double hz)
{
    return hz >= kMinLogHz ? kMinLogMel + std::log(hz / kMinLogHz) / kLogStep : hz / kSlaneySpacing;
}

at::Tensor melToHz(const at::Tensor& mels)
{
    auto freqs = mels * kSlaneySpacing;
    const auto log = mels >= kMinLogMel;
    // The same order as torchaudio: exp(logstep * (mel - min_log_mel)) * min_log_hz, written
    // into the log part only.
    freqs.index_put_({log}, at::exp((mels.index({log}) - kMinLogMel) * kLogStep) * kMinLogHz);
    return freqs;
}

}  // namespace

at::Tensor resampleSinc(const at::Tensor& waveform, std::int64_t fromRate, std::int64_t toRate)
{
    TORCH_CHECK(fromRate > 0 && toRate > 0, "sample rates must be positive, got ", fromRate, " and ", toRate);
    TORCH_CHECK(waveform.is_floating_point(), "a waveform to resample must be floating point");
    if (fromRate == toRate)
        return waveform;
    constexpr std::int64_t kZeroCrossings = 6;
    constexpr double kRolloff = 0.99;
    const auto gcd = std::gcd(fromRate, toRate);
    const auto orig = fromRate / gcd, next = toRate / gcd;
    const double base = static_cast<double>(std::min(orig, next)) * kRolloff;
    const auto width = static_cast<std::int64_t>(std::ceil(static_cast<double>(kZeroCrossings) * static_cast<double>(orig) / base));
    const auto options = waveform.options();
    // The kernel as torchaudio builds it in the waveform's dtype: one filter per output phase.
    const auto idx = at::arange(-width, width + orig, options).unsqueeze(0).unsqueeze(0) / static_cast<double>(orig);
    auto t = at::arange(0, -next, -1, options).unsqueeze(1).unsqueeze(2) / static_cast<double>(next) + idx;
    t = t * base;
    t = t.clamp(-static_cast<double>(kZeroCrossings), static_cast<double>(kZeroCrossings));
    const auto window = at::cos(t * kPi / static_cast<double>(kZeroCrossings) / 2.0).pow(2);
    t = t * kPi;
    const double scale = base / static_cast<double>(orig);
    auto kernels = at::where(t == 0, at::ones({}, options), t.sin() / t);
    kernels = kernels * (window * scale);

    const auto shape = waveform.sizes().vec();
    const auto length = shape.back();
    auto flat = waveform.reshape({-1, length});
    flat = at::constant_pad_nd(flat, {width, width + orig}, 0);
    auto out = at::conv1d(flat.unsqueeze(1), kernels, {}, {orig});
    out = out.transpose(1, 2).reshape({flat.size(0), -1});
    const auto target =
        static_cast<std::int64_t>(std::ceil(static_cast<double>(next) * static_cast<double>(length) / static_cast<double>(orig)));
    out = out.narrow(1, 0, std::min(target, out.size(1)));
    auto outShape = shape;
    outShape.back() = out.size(1);
    return out.reshape(outShape);
}

at::Tensor slaneyMelFilterbank(std::int64_t nFreqs, double fMin, double fMax, std::int64_t nMels, std::int64_t sampleRate)
{
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    const auto allFreqs = at::linspace(0, static_cast<double>(sampleRate / 2), nFreqs, f32);
    const auto mels = at::linspace(hzToMel(fMin), hzToMel(fMax), nMels + 2, f32);
    const auto fPts = melToHz(mels);
    // torchaudio's _create_triangular_filterbank, then the slaney area normalization.
    const auto fDiff = fPts.slice(0, 1) - fPts.slice(0, 0, -1);
    const auto slopes = fPts.unsqueeze(0) - allFreqs.unsqueeze(1);
    const auto down = (slopes.slice(1, 0, -2) * -1.0) / fDiff.slice(0, 0, -1);
    const auto up = slopes.slice(1, 2) / fDiff.slice(0, 1);
    auto fb = at::max(at::zeros({1}, f32), at::min(down, up));
    // Python's 2.0 / tensor is reciprocal() * 2.0, which is what is matched here.
    const auto enorm = (fPts.slice(0, 2, nMels + 2) - fPts.slice(0, 0, nMels)).reciprocal() * 2.0;
    return fb * enorm.unsqueeze(0);
}

namespace {
at::Tensor melOf(const at::Tensor& waveform, std::int64_t sampleRate, const MelFrontEnd& f);
}

Result<at::Tensor> logMelSpectrogram(const at::Tensor& waveform, std::int64_t sampleRate, const MelFrontEnd& f)
{
    if (!waveform.defined() || waveform.dim() != 3 || waveform.size(2) == 0)
        return makeError(ErrorCode::InvalidArgument, "a waveform for the mel spectrogram is [B, C, N] with N > 0");
    if (sampleRate <= 0 || sampleRate > 1'000'000)
        return makeError(ErrorCode::InvalidArgument, "a sample rate of " + std::to_string(sampleRate) + " Hz is not one audio has");
    const auto minimum = f.nFft / 2 + 1;
    const auto resampled = static_cast<std::int64_t>(
        std::ceil(static_cast<double>(waveform.size(2)) * static_cast<double>(f.sampleRate) / static_cast<double>(sampleRate)));
    if (resampled < minimum)
        return makeError(ErrorCode::InvalidArgument,
            "the audio is " + std::to_string(waveform.size(2)) + " samples at " + std::to_string(sampleRate)
                + " Hz; the mel spectrogram needs at least " + std::to_string(minimum) + " at " + std::to_string(f.sampleRate) + " Hz ("
                + std::to_string(1000 * minimum / f.sampleRate) + " ms)");
    try {
        return melOf(waveform, sampleRate, f);
    } catch (const c10::Error& e) {
        return makeError(ErrorCode::Internal, std::string("the mel spectrogram failed: ") + e.what_without_backtrace());
    }
}

namespace {

// center=True pads n_fft / 2 on each side by reflection, which logMelSpectrogram checked.
at::Tensor melOf(const at::Tensor& waveform, std::int64_t sampleRate, const MelFrontEnd& f)
{
    const auto audio = resampleSinc(waveform.to(at::kFloat), sampleRate, f.sampleRate);
    const auto window = at::hann_window(f.nFft, at::TensorOptions().dtype(at::kFloat).device(audio.device()));
    const auto flat = audio.reshape({-1, audio.size(2)});
    const auto spec = at::stft(flat, f.nFft, f.hopLength, f.nFft, window, true, "reflect", false, true, true).abs();
    const auto fb =
        slaneyMelFilterbank(f.nFft / 2 + 1, 0.0, static_cast<double>(f.sampleRate) / 2.0, f.melBins, f.sampleRate).to(audio.device());
    auto mel = at::matmul(spec.transpose(-1, -2), fb).transpose(-1, -2);
    mel = at::log(at::clamp_min(mel, 1e-5));
    mel = mel.reshape({audio.size(0), audio.size(1), f.melBins, -1});
    return mel.permute({0, 1, 3, 2}).contiguous();
}

}  // namespace

}  // namespace vireo::ltx2
