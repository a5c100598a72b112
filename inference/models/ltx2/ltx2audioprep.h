#pragma once

// The LTX-2 audio VAE's front end: a waveform at any sample rate to the log-mel spectrogram its
// encoder takes, as ltx-core 1.0.0 makes it (model/audio_vae/ops.py AudioProcessor): resampled
// to the VAE's rate with torchaudio's windowed-sinc resampler (functional.resample: Hann window,
// 6 zero crossings, roll-off 0.99, the kernel in float32), then torchaudio's MelSpectrogram
// (periodic Hann window of n_fft, centred with reflect padding, magnitude, slaney mel scale and
// slaney area normalization from 0 Hz to half the rate) and the natural log of the mel energies
// clamped at 1e-5. The same ATen operations in the same order as torchaudio 2.11, so the result
// matches it on the same libtorch.

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace vireo::ltx2 {

struct MelFrontEnd {
    std::int64_t sampleRate = 16000;  // the audio VAE's (config sample_rate)
    std::int64_t nFft = 1024;  // ltx-core's default filter length; window length too
    std::int64_t hopLength = 160;  // config mel_hop_length
    std::int64_t melBins = 64;  // config mel_bins
};

// torchaudio.functional.resample(waveform, from, to) with its defaults; waveform [..., N] float32.
// The output has ceil(N * to / from) samples. Rates must be positive.
at::Tensor resampleSinc(const at::Tensor& waveform, std::int64_t fromRate, std::int64_t toRate);

// torchaudio.functional.melscale_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate, "slaney",
// "slaney"): [n_freqs, n_mels].
at::Tensor slaneyMelFilterbank(std::int64_t nFreqs, double fMin, double fMax, std::int64_t nMels, std::int64_t sampleRate);

// AudioProcessor.waveform_to_mel: waveform [B, C, N] at `sampleRate` Hz, float32 ->
// [B, C, 1 + floor(N' / hop), mel_bins] with N' the samples after resampling. Audio too short
// for one window's reflection padding, or of another shape, is an error saying so.
Result<at::Tensor> logMelSpectrogram(const at::Tensor& waveform, std::int64_t sampleRate, const MelFrontEnd& frontEnd = {});

}  // namespace vireo::ltx2
