#pragma once

// The LTX-2.5 duration head: a prompt's natural length in seconds, from the text connectors'
// outputs, for a length left on "auto". Ported from diffusers 0.42.1
// (pipelines/ltx2/duration_head.py: LTX2DurationHead, predict_num_frames) and read in both
// layouts: a diffusers `duration_head/` folder, and Lightricks' `duration_head.*` tensors (in
// the model's single file or a file of its own) with the pooler stored as
// nn.MultiheadAttention (ltx-core duration_head/).

#include "inference/util/result.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace vireo::ltx2 {

class Ltx2Weights;

// LTX2DurationHead's config, diffusers' names (ltx-core: the widths from its transformer
// section, the rest from a `duration_head` section; `mlp_hidden` there).
struct DurationHeadConfig {
    std::int64_t videoDim = 4096, audioDim = 2048;  // the connectors' output widths
    std::int64_t poolerDim = 256, queries = 1, heads = 4, mlpHidden = 256;
};

// From the headers: widths from the tensor shapes, the head count from the checkpoint's config
// (diffusers' config.json, else the embedded ltx-core one, else 4), checked against each other.
// NotFound when the weights hold no duration head.
Result<DurationHeadConfig> resolveDurationHeadConfig(const Ltx2Weights& weights);
// Why these weights cannot pick a length left on "auto" (no duration head, or a broken one);
// empty when they can.
std::string durationHeadProblem(const Ltx2Weights& weights);

class DurationHead {
public:
    ~DurationHead();
    DurationHead(DurationHead&&) noexcept;
    DurationHead& operator=(DurationHead&&) noexcept;

    // Every tensor of the part is used or the load fails naming it.
    static Result<DurationHead> load(const Ltx2Weights& weights, c10::Device device = c10::kCPU, c10::ScalarType dtype = c10::kFloat);

    // Seconds per batch item [B], from either connector output or both ([B, T, width]); the
    // inputs are cast to the head's dtype, as the reference does.
    Result<at::Tensor> seconds(const std::optional<at::Tensor>& video, const std::optional<at::Tensor>& audio) const;

    const DurationHeadConfig& config() const;

private:
    struct Impl;
    explicit DurationHead(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> m_impl;
};

// A predicted length as a frame count on the VAE's grid (k * ratio + 1), the reference's
// rounding: clamp round(seconds * fps) to [round(min * fps), round(max * fps)] (Python's
// half-to-even rounding), floor to the grid, and step up one grid point when that fell below
// the minimum; when no grid point lies within the bounds, the nearer neighbour.
struct PredictedFrames {
    std::int64_t frames = 0;
    bool clamped = false;  // the prediction was outside [min, max] seconds
    bool outsideBounds = false;  // no grid point fits the bounds; the nearest was taken
};
PredictedFrames framesForSeconds(double seconds, double fps, std::int64_t temporalRatio, double minSeconds = 1.0, double maxSeconds = 20.0);

}  // namespace vireo::ltx2
