#pragma once

// The LTX-2 transformer forward of a denoise loop captured in CUDA graphs and replayed on later
// steps: one forward is ~3000 ATen calls whose host dispatch leaves the device idle for about
// a tenth of the step (docs/gpu-notes.md). A replay launches the same kernels on the same
// addresses, so every input is first copied into buffers the graph owns.

#include "inference/models/ltx2/ltx2transformer.h"
#include "inference/util/result.h"

#include <cstdint>
#include <memory>
#include <string>

namespace vireo::ltx2 {

// Counts over the life of one GraphedForward, and why graphs were not used where they were not.
struct GraphStats {
    int captures = 0;  // graphs captured (a new key: shapes, flags, weights or adapters)
    int replays = 0;  // forwards served by a replay (the capturing call included)
    int eager = 0;  // forwards run eagerly (warm-ups, blocked or failed paths)
    std::string blocked;  // the last reason graphs could not be used (empty: none so far)
    std::string failure;  // a capture that failed, with its reason: eager from then on
    std::int64_t poolBytes = 0;  // device memory the graphs' shared pool held after the last capture
};

// Wraps one Transformer for one denoise loop (a pass of a pipeline; the graphs' memory pool
// is freed with it). On a CUDA device, for each key (input shapes and dtypes, the flags that
// change the kernel sequence, the model's generation) the first forward runs eagerly on a side
// stream as a warm-up, the second is captured and replayed, later ones are replayed. The
// outputs are copies: they stay valid after the next replay.
//
// Not captured, and said once in the log with the reason: a CPU device, block offloading
// (host copies inside the forward), a step cache (a host decision per step), an onBlock
// callback (host code between blocks), graphs turned off. A capture that fails is a warning
// and this wrapper runs eagerly from then on. The stop token is checked before each forward
// (a replay cannot be interrupted).
class GraphedForward {
public:
    explicit GraphedForward(const Transformer& model, bool enabled = true);
    ~GraphedForward();
    GraphedForward(GraphedForward&&) noexcept;
    GraphedForward& operator=(GraphedForward&&) noexcept;

    // Transformer::forward's contract.
    Result<TransformerOutputs> forward(const TransformerInputs& inputs);

    // Why these inputs run eagerly (empty: they are graphed), from the inputs and the model alone.
    std::string blockedReason(const TransformerInputs& inputs) const;
    const GraphStats& stats() const;
    // One line for a report: "on: 1 captured, 7 of 8 forwards replayed, 412 MiB of graph memory",
    // "off: <reason>", ...
    std::string summary() const;
    // Drops every graph and its memory (the next forward warms up again).
    void reset();

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::ltx2
