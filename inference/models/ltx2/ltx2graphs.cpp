#include "inference/models/ltx2/ltx2graphs.h"
#include "base/envswitch.h"

#include "inference/models/nn/layers.h"
#include "inference/quant/quantizedweight.h"
#include "inference/util/device.h"
#include "inference/util/log.h"
#include "inference/util/pathstats.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/InferenceMode.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace vireo::ltx2 {

namespace {

// Every tensor slot of the inputs, in a fixed order; absent optionals are null.
template <typename Inputs, typename Tensor = std::conditional_t<std::is_const_v<Inputs>, const at::Tensor, at::Tensor>>
std::vector<Tensor*> slots(Inputs& in)
{
    std::vector<Tensor*> out{&in.hiddenStates, &in.audioHiddenStates, &in.encoderHiddenStates, &in.audioEncoderHiddenStates, &in.timestep};
    for (auto* o : {&in.audioTimestep, &in.sigma, &in.audioSigma, &in.encoderAttentionMask, &in.audioEncoderAttentionMask, &in.videoCoords,
             &in.extraVideoCoords, &in.audioCoords, &in.perturbationMask, &in.isolationMask, &in.videoKeyframesMask,
             &in.videoSelfAttentionMask})
        out.push_back(*o ? &**o : nullptr);
    return out;
}

// What a replay cannot vary: the shapes and dtypes it was captured with, the host numbers and
// flags that pick kernels or become kernel arguments, and the addresses of the weights and
// adapters (the model's generation).
std::string keyOf(const Transformer& model, const TransformerInputs& in, bool allPerturbed)
{
    std::string key = std::to_string(model.generation()) + "|" + model.device().str() + "|" + c10::toString(model.dtype());
    for (const auto* t : slots(in)) {
        key += "|";
        if (t && t->defined())
            key += std::string(c10::toString(t->scalar_type())) + c10::str(t->sizes());
    }
    char fps[64];
    std::snprintf(fps, sizeof fps, "%a", in.fps);
    key += "|" + std::to_string(in.numFrames) + "x" + std::to_string(in.height) + "x" + std::to_string(in.width) + "|"
        + std::to_string(in.audioNumFrames) + "|" + fps + "|" + (in.isolateModalities ? "I" : "-") + (in.useCrossTimestep ? "C" : "-")
        + (allPerturbed ? "P" : "-") + (in.stgVideo ? "V" : "-") + (in.stgAudio ? "A" : "-") + "|stg";
    for (const int b : in.stgBlocks)
        key += "," + std::to_string(b);
    key += "|" + std::string(nn::attentionKernelName(nn::attentionKernel())) + (quant::fp8FastAccumulation() ? "|fast" : "");
    return key;
}

at::Tensor copiesOf(const at::Tensor& t)
{
    return t.defined() ? t.clone() : t;
}

}  // namespace

struct GraphedForward::Impl {
    const Transformer* model = nullptr;
    bool enabled = true;
    GraphStats stats;
    std::set<std::string> said;  // reasons already in the log

    struct Entry {
        std::string key;
        TransformerInputs statics;  // the buffers the graph reads
        TransformerOutputs outputs;  // the buffers it writes
        std::unique_ptr<at::cuda::CUDAGraph> graph;
        bool warmed = false;  // a forward of this key ran on the side stream
        paths::Counts paths;  // what the captured forward runs, added at every replay
    };
    std::vector<Entry> entries;  // newest last
    // One memory pool for every graph of this loop. The graphs never run concurrently and their
    // outputs are copied out right after each replay, so a later capture may reuse what an
    // earlier graph only needs while it runs: guidance branches with their own keys then cost one
    // working set, not one each. Reset whenever no graph is left, so a fresh pool starts clean.
    std::optional<at::cuda::MempoolId_t> pool;
    std::uint64_t generation = 0;
    std::optional<c10::cuda::CUDAStream> side;

    void say(const std::string& reason)
    {
        if (said.insert(reason).second)
            log::info("LTX-2 transformer: CUDA graphs off: " + reason);
    }
    Entry& entryFor(const std::string& key, const TransformerInputs& in, bool allPerturbed);
    void clear()
    {
        entries.clear();
        pool.reset();
    }
    Result<TransformerOutputs> graphed(const TransformerInputs& in);
    // Out of memory beside graphs already captured (a second guidance branch, say): their pool
    // holds a working set this forward could have used. Gives all of it back, so that the loop
    // goes on eagerly as it would have run without graphs; false when that cannot help.
    bool yieldMemory(const Error& error)
    {
        const auto graphs = std::count_if(entries.begin(), entries.end(), [](const Entry& e) { return e.graph != nullptr; });
        if (error.code != ErrorCode::OutOfMemory || graphs == 0)
            return false;
        fail("out of device memory for another graph beside " + std::to_string(graphs) + " captured (" + error.message + ")");
        releaseCachedDeviceMemory();
        return true;
    }
    void fail(const std::string& reason)
    {
        stats.failure = reason;
        log::warn("LTX-2 transformer: CUDA graph capture failed, the denoise loop runs eagerly from here: " + reason);
        clear();
        (void)cudaGetLastError();
    }
};

GraphedForward::GraphedForward(const Transformer& model, bool enabled) : m_impl(std::make_unique<Impl>())
{
    m_impl->model = &model;
    m_impl->enabled = enabled;
}
GraphedForward::~GraphedForward() = default;
GraphedForward::GraphedForward(GraphedForward&&) noexcept = default;
GraphedForward& GraphedForward::operator=(GraphedForward&&) noexcept = default;

const GraphStats& GraphedForward::stats() const
{
    return m_impl->stats;
}

void GraphedForward::reset()
{
    m_impl->clear();
}

std::string GraphedForward::blockedReason(const TransformerInputs& in) const
{
    const auto& m = *m_impl;
    if (!m.enabled)
        return "turned off";
    // A switch for a GPU session that must tell a graph fault from a kernel fault without a rebuild.
    if (!env::flag("VIREO_CUDA_GRAPHS"))
        return "turned off by VIREO_CUDA_GRAPHS=0";
    if (!m.model->device().is_cuda())
        return "the transformer runs on " + m.model->device().str() + ", not a CUDA device";
    if (m.model->offloadsBlocks())
        return "the transformer's blocks are offloaded (host-to-device copies inside every forward)";
    if (in.stepCache)
        return "the step cache decides on the host at every step (a device sync inside the forward)";
    if (in.onBlock)
        return "a per-block callback runs host code between blocks";
    if (!m.stats.failure.empty())
        return "an earlier capture failed: " + m.stats.failure;
    return {};
}

std::string GraphedForward::summary() const
{
    const auto& s = m_impl->stats;
    if (!s.failure.empty())
        return "failed: " + s.failure;
    if (s.captures == 0)
        return s.blocked.empty() ? std::string("unused") : "off: " + s.blocked;
    std::string text = "on: " + std::to_string(s.captures) + " captured, " + std::to_string(s.replays) + " of "
        + std::to_string(s.replays + s.eager) + " forwards replayed";
    if (s.poolBytes > 0)
        text += ", " + std::to_string((s.poolBytes + (1 << 19)) >> 20) + " MiB of graph memory";
    if (!s.blocked.empty())
        text += " (some eager: " + s.blocked + ")";
    return text;
}

Result<TransformerOutputs> GraphedForward::forward(const TransformerInputs& in)
{
    auto& m = *m_impl;
    if (in.stop.stop_requested())
        return makeError(ErrorCode::Cancelled, "cancelled");
    if (const auto reason = blockedReason(in); !reason.empty()) {
        m.stats.blocked = reason;
        m.say(reason);
        ++m.stats.eager;
        return m.model->forward(in);
    }
    try {
        return m.graphed(in);
    } catch (const c10::Error& e) {
        // The static buffers, copies into them, a replay: nothing here is expected to fail but
        // the device, or its memory.
        auto error = errorFromException(e, "LTX-2 transformer (CUDA graph)");
        if (!m.yieldMemory(error))
            return error;
        ++m.stats.eager;
        return m.model->forward(in);
    }
}

GraphedForward::Impl::Entry& GraphedForward::Impl::entryFor(const std::string& key, const TransformerInputs& in, bool allPerturbed)
{
    for (auto& e : entries)
        if (e.key == key)
            return e;
    // A denoise pass needs one graph (two with per-branch calls); older ones only hold memory.
    constexpr std::size_t kKept = 4;
    if (entries.size() >= kKept)
        entries.erase(entries.begin());
    Entry e;
    e.key = key;
    e.statics = in;
    e.statics.stop = {};
    e.statics.allPerturbed = allPerturbed;
    const auto device = model->device();
    for (auto* t : slots(e.statics))
        if (t && t->defined())
            *t = at::empty(t->sizes(), t->options().device(device));
    entries.push_back(std::move(e));
    return entries.back();
}

Result<TransformerOutputs> GraphedForward::Impl::graphed(const TransformerInputs& in)
{
    const auto device = model->device();
    const c10::cuda::CUDAGuard deviceGuard(device.has_index() ? device.index() : c10::cuda::current_device());
    if (model->generation() != generation) {
        // New weights or adapters: the old graphs read memory that may be gone.
        clear();
        generation = model->generation();
    }
    // The one host read of a mask value, here rather than inside a capture.
    bool allPerturbed = true;
    if (!in.stgBlocks.empty() && in.perturbationMask)
        allPerturbed = in.allPerturbed ? *in.allPerturbed : (in.perturbationMask->eq(0)).all().item<bool>();
    const auto key = keyOf(*model, in, allPerturbed);
    TransformerOutputs outputs;
    {
        const c10::InferenceMode inference;
        auto& entry = entryFor(key, in, allPerturbed);
        const auto sources = slots(in);
        const auto targets = slots(entry.statics);
        for (std::size_t i = 0; i < sources.size(); ++i)
            if (targets[i])
                targets[i]->copy_(*sources[i]);
        if (entry.graph) {
            entry.graph->replay();
            paths::replay(entry.paths);
            ++stats.replays;
            outputs = entry.outputs;
        } else {
            // Warm-up (the first forward of a key) and capture (the second) on a side stream, as
            // CUDA graphs require; the caller's stream waits for it.
            if (!side)
                side = c10::cuda::getStreamFromPool(false, deviceGuard.current_device().index());
            const auto main = c10::cuda::getCurrentCUDAStream();
            at::cuda::CUDAEvent ready;
            ready.record(main);
            ready.block(*side);
            Result<TransformerOutputs> r = makeError(ErrorCode::Internal, "not run");
            std::string failure;
            const bool warmUp = !entry.warmed;
            if (warmUp) {
                const c10::cuda::CUDAStreamGuard streamGuard(*side);
                auto eager = entry.statics;
                eager.stop = in.stop;
                r = model->forward(eager);
                ++stats.eager;
            } else {
                // The warm-up's cached blocks go back to the driver: the graph's private pool
                // cannot reuse them, and both at once could need twice the working memory.
                releaseCachedDeviceMemory();
                auto graph = std::make_unique<at::cuda::CUDAGraph>();
                // No graph left to share with (evicted or never captured): a fresh pool, since the
                // allocator may already be retiring the old one.
                if (std::none_of(entries.begin(), entries.end(), [](const Entry& e) { return e.graph != nullptr; }))
                    pool.reset();
                if (!pool)
                    pool = at::cuda::graph_pool_handle();
                bool ran = false;
                paths::Counts captured;
                {
                    const c10::cuda::CUDAStreamGuard streamGuard(*side);
                    bool capturing = false;
                    try {
                        // Thread-local: the application's other threads may use the device meanwhile.
                        graph->capture_begin(*pool, cudaStreamCaptureModeThreadLocal);
                        capturing = true;
                        {
                            const paths::Recording capture;
                            r = model->forward(entry.statics);
                            captured = capture.counts();
                        }
                        ran = true;
                        capturing = false;
                        graph->capture_end();
                    } catch (const c10::Error& e) {
                        failure = e.what_without_backtrace();
                    }
                    if (capturing) {
                        // The forward threw mid-capture: end the capture (it reports the broken
                        // capture, which is already the failure) so the side stream and the
                        // allocator's pool routing are back to normal for the eager runs.
                        try {
                            graph->capture_end();
                        } catch (const c10::Error&) {
                        }
                    }
                }
                if (ran && !r)
                    failure = r.error().message;  // the cause; capture_end only says the capture broke
                if (failure.empty()) {
                    entry.outputs = *r;
                    entry.paths = std::move(captured);
                    entry.graph = std::move(graph);
                    ++stats.captures;
                    stats.poolBytes = cudaGraphPoolMemory(device);
                }
            }
            at::cuda::CUDAEvent done;
            done.record(*side);
            done.block(main);
            if (!failure.empty()) {
                fail(failure);
            } else if (!r) {
                // A warm-up that did not finish (cancelled, bad inputs) warms nothing up.
                const auto& error = r.error();
                entries.erase(std::find_if(entries.begin(), entries.end(), [&](const Entry& e) { return e.key == key; }));
                if (!yieldMemory(error))
                    return error;
            } else if (entry.graph) {
                entry.graph->replay();
                paths::replay(entry.paths);
                ++stats.replays;
                outputs = entry.outputs;
            } else {
                entry.warmed = true;
                outputs = *r;  // copied below; the capture allocates its own buffers
            }
        }
    }
    if (!stats.failure.empty() && !outputs.video.defined()) {
        ++stats.eager;
        return model->forward(in);
    }
    // Copies, outside inference mode: the static outputs change with the next replay.
    return TransformerOutputs{copiesOf(outputs.video), copiesOf(outputs.audio)};
}

}  // namespace vireo::ltx2
