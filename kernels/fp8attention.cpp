#include "kernels/fp8attention.h"
#include "base/capability.h"
#include "base/envswitch.h"

#include "kernels/fp8dequant.h"
#include "kernels/fusedops.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#if VIREO_HAVE_CUDNN_FRONTEND
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cudnn/Handle.h>
#include <c10/cuda/CUDAGuard.h>
#include <cudnn.h>
#include <cudnn_frontend.h>

#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <utility>
#endif

namespace vireo::kernels {

bool fp8AttentionEnabled()
{
    static const bool enabled = env::flag("VIREO_FP8_ATTENTION");
    return enabled;
}

#if VIREO_HAVE_CUDNN_FRONTEND

namespace {

namespace fe = cudnn_frontend;

enum Uid : std::int64_t { kQ = 1, kK, kV, kO, kDescaleQ, kDescaleK, kDescaleV, kDescaleS, kScaleS, kScaleO, kAmaxS, kAmaxO };

// A cuDNN graph is built for one shape and executed with the handle it was built with.
struct Key {
    cudnnHandle_t handle;
    int device;
    std::int64_t b, h, tq, tk, d;
    bool operator<(const Key& o) const
    {
        return std::tie(handle, device, b, h, tq, tk, d) < std::tie(o.handle, o.device, o.b, o.h, o.tq, o.tk, o.d);
    }
};

struct Plan {
    std::shared_ptr<fe::graph::Graph> graph;
    std::int64_t workspace = 0;
    std::string refusal;  // cuDNN's reason when it has no engine for the shape
};

std::mutex g_plansMutex;
// Never evicted: a model has a handful of attention shapes, and a resolution change adds one.
// Never destroyed either: at exit the CUDA context may be gone before static destructors run,
// and destroying cuDNN descriptors then can crash a process that was done.
auto& g_plans = *new std::map<Key, std::shared_ptr<const Plan>>();

std::shared_ptr<const Plan> buildPlan(const Key& key)
{
    auto plan = std::make_shared<Plan>();
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::FP8_E4M3)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    // [B, H, T, D] over memory laid out [B, T, H, D]: the projections' own layout, no transpose.
    auto layout = [&](std::int64_t t) {
        return std::pair{
            std::vector<std::int64_t>{key.b, key.h, t, key.d}, std::vector<std::int64_t>{t * key.h * key.d, key.d, key.h * key.d, 1}};
    };
    auto operand = [&](const char* name, std::int64_t uid, std::int64_t t) {
        const auto [dim, stride] = layout(t);
        return g->tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride));
    };
    auto scalar = [&](const char* name, std::int64_t uid) {
        return g->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim({1, 1, 1, 1})
                             .set_stride({1, 1, 1, 1})
                             .set_data_type(fe::DataType_t::FLOAT));
    };
    auto q = operand("Q", kQ, key.tq);
    auto k = operand("K", kK, key.tk);
    auto v = operand("V", kV, key.tk);
    auto attributes = fe::graph::SDPA_fp8_attributes()
                          .set_name("vireo_sdpa_fp8")
                          .set_generate_stats(false)
                          .set_attn_scale(static_cast<float>(1.0 / std::sqrt(static_cast<double>(key.d))));
    auto outputs = g->sdpa_fp8(q, k, v, scalar("Descale_Q", kDescaleQ), scalar("Descale_K", kDescaleK), scalar("Descale_V", kDescaleV),
        scalar("Descale_S", kDescaleS), scalar("Scale_S", kScaleS), scalar("Scale_O", kScaleO), attributes);
    const auto [oDim, oStride] = layout(key.tq);
    outputs[0]->set_output(true).set_uid(kO).set_dim(oDim).set_stride(oStride);
    for (const auto& [tensor, uid] : {std::pair{outputs[2], kAmaxS}, std::pair{outputs[3], kAmaxO}})
        if (tensor)
            tensor->set_output(true).set_uid(uid).set_dim({1, 1, 1, 1}).set_stride({1, 1, 1, 1}).set_data_type(fe::DataType_t::FLOAT);
    if (auto built = g->build(key.handle, {fe::HeurMode_t::A}, fe::BuildPlanPolicy_t::HEURISTICS_CHOICE, false); built.is_bad()) {
        plan->refusal = built.get_message();
        return plan;
    }
    if (auto sized = g->get_workspace_size(plan->workspace); sized.is_bad()) {
        plan->refusal = sized.get_message();
        return plan;
    }
    plan->graph = std::move(g);
    return plan;
}

std::string shapeText(std::int64_t b, std::int64_t h, std::int64_t tq, std::int64_t tk, std::int64_t d)
{
    return std::to_string(b) + "x" + std::to_string(h) + " heads, " + std::to_string(tq) + " queries, " + std::to_string(tk)
        + " keys, head size " + std::to_string(d);
}

}  // namespace

bool fp8AttentionBuilt()
{
    return true;
}

int cudnnVersion()
{
    // cudnnGetVersion: major * 10000 + minor * 100 + patch for cuDNN 9.
    return static_cast<int>(cudnnGetVersion());
}

std::string fp8AttentionUnavailable(c10::Device device)
{
    if (!device.is_cuda())
        return "attention runs on " + device.str() + " (FP8 attention needs CUDA)";
    const auto* props = at::cuda::getDeviceProperties(device.index() < 0 ? c10::cuda::current_device() : device.index());
    capability::DeviceCaps caps;
    caps.cuda = true;
    caps.major = props->major;
    caps.minor = props->minor;
    caps.cudnnVersion = cudnnVersion();
    // The switch is the caller's to honour (the runtime reports it as its own reason).
    return capability::fp8AttentionBlocker(caps, capability::Dtype::BF16, capability::Switches{}).value_or(std::string());
}

at::Tensor fp8Attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, std::int64_t heads, std::string* refusal)
{
    TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3, "fp8_attention: operands must be [B, T, H * D], got ", q.sizes(), ", ",
        k.sizes(), ", ", v.sizes());
    TORCH_CHECK(q.is_cuda() && k.device() == q.device() && v.device() == q.device(), "fp8_attention: operands on ", q.device(), ", ",
        k.device(), " and ", v.device(), " (one CUDA device)");
    TORCH_CHECK((q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf) && k.scalar_type() == q.scalar_type()
            && v.scalar_type() == q.scalar_type(),
        "fp8_attention: operands must all be bfloat16 or all float16, got ", q.scalar_type(), ", ", k.scalar_type(), ", ", v.scalar_type());
    const auto b = q.size(0), tq = q.size(1), tk = k.size(1), width = q.size(2);
    TORCH_CHECK(
        heads > 0 && width % heads == 0 && k.size(2) == width && v.size(2) == width && k.size(0) == b && v.size(0) == b && v.size(1) == tk,
        "fp8_attention: shapes ", q.sizes(), ", ", k.sizes(), ", ", v.sizes(), " do not make ", heads, " heads of one size");
    const auto d = width / heads;
    TORCH_CHECK(d % 16 == 0 && d <= 256, "fp8_attention: head size ", d, " (cuDNN's FP8 attention takes multiples of 16 up to 256)");
    if (const auto why = fp8AttentionUnavailable(q.device()); !why.empty())
        TORCH_CHECK(false, "fp8_attention: ", why);
    const c10::cuda::CUDAGuard guard(q.device());

    cudnnHandle_t handle = at::native::getCudnnHandle();
    TORCH_CHECK(cudnnSetStream(handle, at::cuda::getCurrentCUDAStream()) == CUDNN_STATUS_SUCCESS, "fp8_attention: cudnnSetStream failed");
    const Key key{handle, q.device().index(), b, heads, tq, tk, d};
    std::shared_ptr<const Plan> plan;
    {
        std::lock_guard lock(g_plansMutex);
        auto& slot = g_plans[key];
        if (!slot) {
            try {
                slot = buildPlan(key);
            } catch (const std::exception& e) {
                // The frontend throws for some refusals instead of returning them.
                auto refused = std::make_shared<Plan>();
                refused->refusal = e.what();
                slot = refused;
            }
        }
        plan = slot;
    }
    if (!plan->graph) {
        const auto why = "cuDNN has no FP8 attention engine for " + shapeText(b, heads, tq, tk, d) + " (" + plan->refusal + ")";
        TORCH_CHECK(refusal, "fp8_attention: ", why);
        *refusal = why;
        return {};
    }
    // Per-tensor scales from each operand's amax, all on the device.
    auto quantized = [](const at::Tensor& x) {
        auto descale = (at::linalg_vector_norm(x, INFINITY, std::nullopt, false, at::kFloat) / 448.0).clamp_min(1e-12).reshape({1});
        return std::pair{quantizeFp8(x, descale), descale};
    };
    const auto [q8, descaleQ] = quantized(q);
    const auto [k8, descaleK] = quantized(k);
    const auto [v8, descaleV] = quantized(v);
    const auto f32 = descaleQ.options();
    const auto descaleS = at::full({1}, 1.0 / 448.0, f32);
    const auto scaleS = at::full({1}, 448.0, f32);
    const auto scaleO = descaleV.reciprocal();
    auto out = at::empty({b, tq, width}, q8.options());
    // cuDNN checks each pointer's alignment: one allocation per scalar.
    auto amaxS = at::empty({1}, f32), amaxO = at::empty({1}, f32);

    auto workspace = at::empty({std::max<std::int64_t>(plan->workspace, 1)}, q8.options().dtype(at::kByte));
    std::unordered_map<std::int64_t, void*> pointers{{kQ, q8.data_ptr()}, {kK, k8.data_ptr()}, {kV, v8.data_ptr()}, {kO, out.data_ptr()},
        {kDescaleQ, descaleQ.data_ptr()}, {kDescaleK, descaleK.data_ptr()}, {kDescaleV, descaleV.data_ptr()},
        {kDescaleS, descaleS.data_ptr()}, {kScaleS, scaleS.data_ptr()}, {kScaleO, scaleO.data_ptr()}, {kAmaxS, amaxS.data_ptr()},
        {kAmaxO, amaxO.data_ptr()}};
    if (auto ran = plan->graph->execute(handle, pointers, workspace.data_ptr()); ran.is_bad())
        TORCH_CHECK(false, "fp8_attention: cuDNN failed on ", shapeText(b, heads, tq, tk, d), ": ", ran.get_message());
    // The output carries v's scale (it is a convex combination of v's rows).
    return dequantizeFp8(out, descaleV, q.scalar_type());
}

#else

bool fp8AttentionBuilt()
{
    return false;
}

int cudnnVersion()
{
    return 0;
}

std::string fp8AttentionUnavailable(c10::Device device)
{
    if (!device.is_cuda())
        return "attention runs on " + device.str() + " (FP8 attention needs CUDA)";
    return "this build has no cuDNN frontend (scripts/cudnn-frontend.sh installs its headers)";
}

at::Tensor fp8Attention(const at::Tensor&, const at::Tensor&, const at::Tensor&, std::int64_t, std::string*)
{
    TORCH_CHECK(false, "fp8_attention: ", fp8AttentionUnavailable(c10::Device(c10::kCPU)));
}

#endif

}  // namespace vireo::kernels
