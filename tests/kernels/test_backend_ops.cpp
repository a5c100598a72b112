// Every vireo:: op over one table of cases, on every backend this machine has (as ggml's
// test-backend-ops does): each case's CPU result against a torch composition written here
// (the definition the op documents), the .out overloads against their functional twins, and
// on a CUDA device the CUDA result against the CPU one with the case's tolerance. An op the
// dispatcher knows with no case in the table fails the test, so a new kernel cannot land
// untested on either backend.
#include "tests/harness/vireotest.h"

#include "kernels/fusedops.h"
#include "kernels/ggufblocks.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace vireo;

namespace {

enum class Compare {
    Exact,  // the same bits (NaN equal to NaN)
    Close,  // max relative error within the dtype's rounding (see tolerance())
    Fp8Steps,  // FP8 codes at most one step apart, in at most 1 in 200 places
};

struct Case {
    std::string op;  // "vireo::name" or "vireo::name.overload"
    std::string what;
    std::function<std::vector<c10::IValue>()> inputs;
    // The op's definition as plain torch ops, on the CPU inputs.
    std::function<std::vector<at::Tensor>(const std::vector<c10::IValue>&)> reference;
    Compare cpu = Compare::Close, gpu = Compare::Close;
};

double tolerance(c10::ScalarType dtype)
{
    return dtype == at::kFloat ? 2e-5 : dtype == at::kBFloat16 ? 1.6e-2 : 2e-3;
}

at::Tensor f32(const at::Tensor& t)
{
    return t.to(at::kFloat);
}

std::string compare(Compare how, const at::Tensor& got, const at::Tensor& want)
{
    if (got.sizes() != want.sizes())
        return "shape " + c10::str(got.sizes()) + ", expected " + c10::str(want.sizes());
    if (got.scalar_type() != want.scalar_type())
        return std::string("dtype ") + c10::toString(got.scalar_type()) + ", expected " + c10::toString(want.scalar_type());
    const auto a = got.cpu().contiguous(), b = want.cpu().contiguous();
    if (a.scalar_type() == at::kFloat8_e4m3fn || a.scalar_type() == at::kFloat8_e5m2) {
        const auto x = a.view(at::kByte).to(at::kInt), y = b.view(at::kByte).to(at::kInt);
        // Sign-magnitude codes are monotonic in value: neighbours are one step apart.
        auto ordinal = [](const at::Tensor& bits) { return at::where(bits >= 128, -(bits - 128), bits); };
        const auto differ = (x != y).sum().item<std::int64_t>();
        const auto worst = differ ? (ordinal(x) - ordinal(y)).abs().max().item<int>() : 0;
        if (how == Compare::Fp8Steps ? (worst > 1 || differ > std::max<std::int64_t>(1, a.numel() / 200)) : differ > 0)
            return std::to_string(differ) + " FP8 codes differ, by up to " + std::to_string(worst) + " step(s)";
        return {};
    }
    const auto x = a.to(at::kDouble), y = b.to(at::kDouble);
    const auto bothNan = x.isnan() & y.isnan();
    if (how == Compare::Exact) {
        const auto differ = (~(bothNan | (x == y))).sum().item<std::int64_t>();
        return differ ? std::to_string(differ) + " of " + std::to_string(a.numel()) + " values differ" : std::string();
    }
    if ((x.isnan() != y.isnan()).any().item<bool>())
        return "NaN where the other has a number";
    const auto finite = ~bothNan;
    const double scale = std::max(1e-12, y.masked_select(finite).abs().max().item<double>());
    const double err = (x - y).masked_select(finite).abs().max().item<double>() / scale;
    if (err > tolerance(a.scalar_type()))
        return "max relative error " + std::to_string(err) + " above " + std::to_string(tolerance(a.scalar_type()));
    return {};
}

std::vector<at::Tensor> outputs(const std::vector<c10::IValue>& stack)
{
    std::vector<at::Tensor> out;
    for (const auto& v : stack) {
        if (v.isTensor())
            out.push_back(v.toTensor());
        else if (v.isTuple())
            for (const auto& e : v.toTupleRef().elements())
                out.push_back(e.toTensor());
    }
    return out;
}

std::vector<at::Tensor> call(const std::string& op, std::vector<c10::IValue> stack)
{
    const auto dot = op.find('.');
    const auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(
        op.substr(0, dot).c_str(), dot == std::string::npos ? "" : op.substr(dot + 1).c_str());
    handle.callBoxed(stack);
    return outputs(stack);
}

std::vector<c10::IValue> onDevice(const std::vector<c10::IValue>& inputs, const at::Device& device)
{
    std::vector<c10::IValue> out;
    for (const auto& v : inputs)
        out.emplace_back(v.isTensor() ? c10::IValue(v.toTensor().to(device)) : v);
    return out;
}

// Shift + rms_norm(x) * (1 + scale), computed in float32 and rounded once to x's dtype.
at::Tensor rmsNormModulate(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& shift, double eps)
{
    const auto xf = f32(x);
    const auto normed = xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps);
    return (f32(shift) + normed * (1 + f32(scale))).to(x.scalar_type());
}

at::Tensor quantize(const at::Tensor& x, const at::Tensor& scale)
{
    return (f32(x) * (1.0f / scale.item<float>())).clamp(-448, 448).to(at::kFloat8_e4m3fn);
}

at::Tensor gateHeads(const at::Tensor& x, const at::Tensor& logits)
{
    const auto heads = logits.size(-1);
    const auto gated = x.unflatten(-1, {heads, x.size(-1) / heads}) * (2 * at::sigmoid(logits)).unsqueeze(-1);
    return gated.flatten(-2);
}

// Random GGUF Q8_0 blocks with finite fp16 scales (34 bytes: an fp16 d, then 32 int8).
at::Tensor q8Blocks(std::int64_t blocks)
{
    auto b = at::randint(0, 256, {blocks, 34}, at::kByte);
    b.select(1, 1).bitwise_and_(0x3B);  // exponent below 0x1F: a finite scale
    return b.reshape({-1});
}

at::Tensor q8Reference(const at::Tensor& blocks, c10::IntArrayRef shape, c10::ScalarType dtype)
{
    const auto b = blocks.reshape({-1, 34});
    const auto d = f32(b.narrow(1, 0, 2).contiguous().view(at::kHalf));
    const auto q = f32(b.narrow(1, 2, 32).contiguous().view(at::kChar));
    return (d * q).reshape(shape).to(dtype);
}

at::Tensor nf4Reference(const at::Tensor& packed, const at::Tensor& absmax, const at::Tensor& code, std::int64_t block,
    c10::IntArrayRef shape, c10::ScalarType dtype)
{
    const auto p = packed.to(at::kLong);
    const auto idx = at::stack({p.bitwise_right_shift(4), p.bitwise_and(15)}, -1).flatten();
    std::int64_t n = 1;
    for (auto s : shape)
        n *= s;
    const auto values = code.index_select(0, idx.narrow(0, 0, n)) * absmax.repeat_interleave(block).narrow(0, 0, n);
    return values.reshape(shape).to(dtype);
}

std::vector<Case> cases()
{
    std::vector<Case> out;
    const std::vector<c10::ScalarType> dtypes{at::kFloat, at::kBFloat16, at::kHalf};
    for (const auto dtype : dtypes) {
        const std::string name = c10::toString(dtype);
        for (const std::int64_t c : {64, 77}) {
            const auto what = name + " C=" + std::to_string(c);
            auto modulation = [dtype, c](bool perToken) { return ((at::randn({2, perToken ? 5 : 1, 3, c}) * 0.3).to(dtype)).unbind(2); };
            out.push_back({"vireo::rms_norm_modulate", what,
                [=] {
                    const auto m = modulation(true);
                    return std::vector<c10::IValue>{at::randn({2, 5, c}).to(dtype), m[1], m[0], 1e-6};
                },
                [](const std::vector<c10::IValue>& in) {
                    return std::vector<at::Tensor>{rmsNormModulate(in[0].toTensor(), in[1].toTensor(), in[2].toTensor(), in[3].toDouble())};
                }});
            out.push_back({"vireo::rms_norm_modulate_fp8", what,
                [=] {
                    const auto m = modulation(false);
                    return std::vector<c10::IValue>{at::randn({2, 5, c}).to(dtype), m[1], m[0], 1e-6, at::full({}, 0.02f)};
                },
                // An _fp8 op is quantize_fp8 of its twin, bit for bit.
                [](const std::vector<c10::IValue>& in) {
                    const auto twin = call("vireo::rms_norm_modulate", {in[0], in[1], in[2], in[3]});
                    return std::vector<at::Tensor>{quantize(twin.at(0), in[4].toTensor())};
                },
                Compare::Exact, Compare::Fp8Steps});
            auto gated = [=](bool fp8) {
                const auto m = modulation(true);
                const auto gate = (at::randn({2, 5, c}) * 0.5).to(dtype);
                std::vector<c10::IValue> in{at::randn({2, 5, c}).to(dtype), at::randn({2, 5, c}).to(dtype), gate, m[1], m[0], 1e-6};
                if (fp8)
                    in.emplace_back(at::full({}, 0.05f));
                return in;
            };
            auto gatedReference = [](const std::vector<c10::IValue>& in) {
                const auto& x = in[0].toTensor();
                const auto y = x + in[1].toTensor() * in[2].toTensor();
                return std::vector<at::Tensor>{y, rmsNormModulate(y, in[3].toTensor(), in[4].toTensor(), in[5].toDouble())};
            };
            out.push_back({"vireo::gated_residual_rms_norm_modulate", what, [=] { return gated(false); }, gatedReference});
            out.push_back({"vireo::gated_residual_rms_norm_modulate_fp8", what, [=] { return gated(true); },
                [](const std::vector<c10::IValue>& in) {
                    auto twin = call("vireo::gated_residual_rms_norm_modulate", {in.begin(), in.begin() + 6});
                    return std::vector<at::Tensor>{twin.at(0), quantize(twin.at(1), in[6].toTensor())};
                },
                Compare::Exact, Compare::Fp8Steps});
        }
        out.push_back({"vireo::gate_heads", name,
            [=] {
                return std::vector<c10::IValue>{at::randn({2, 5, 4 * 16}).to(dtype), at::randn({2, 5, 4}).to(dtype)};
            },
            [](const std::vector<c10::IValue>& in) { return std::vector<at::Tensor>{gateHeads(in[0].toTensor(), in[1].toTensor())}; }});
        out.push_back({"vireo::gate_heads_fp8", name,
            [=] {
                return std::vector<c10::IValue>{at::randn({2, 5, 4 * 16}).to(dtype), at::randn({2, 5, 4}).to(dtype), at::full({}, 0.01f)};
            },
            [](const std::vector<c10::IValue>& in) {
                return std::vector<at::Tensor>{quantize(call("vireo::gate_heads", {in[0], in[1]}).at(0), in[2].toTensor())};
            },
            Compare::Exact, Compare::Fp8Steps});
        out.push_back({"vireo::quantize_fp8", name,
            [=] {
                return std::vector<c10::IValue>{(at::randn({1001}) * 300).to(dtype), at::full({}, 0.37f)};
            },
            [](const std::vector<c10::IValue>& in) { return std::vector<at::Tensor>{quantize(in[0].toTensor(), in[1].toTensor())}; },
            Compare::Exact, Compare::Exact});
        out.push_back({"vireo::gelu_quantize_fp8", name,
            [=] {
                return std::vector<c10::IValue>{(at::randn({1001}) * 3).to(dtype), at::full({}, 0.02f)};
            },
            [](const std::vector<c10::IValue>& in) {
                return std::vector<at::Tensor>{quantize(at::gelu(in[0].toTensor(), "tanh"), in[1].toTensor())};
            },
            Compare::Fp8Steps, Compare::Fp8Steps});
        out.push_back({"vireo::rms_norm_rope", name,
            [=] {
                // 2 heads of 2 x 8: split-layout halves per head.
                const auto angles = at::randn({1, 5, 2, 1, 8});
                return std::vector<c10::IValue>{
                    at::randn({2, 5, 32}).to(dtype), (1 + 0.1 * at::randn({32})).to(dtype), at::cos(angles), at::sin(angles), 1e-6};
            },
            [](const std::vector<c10::IValue>& in) {
                const auto& x = in[0].toTensor();
                const auto xf = f32(x);
                const auto normed = (xf * at::rsqrt(xf.pow(2).mean(-1, true) + in[4].toDouble())).to(x.scalar_type()) * in[1].toTensor();
                const auto halves = f32(normed).unflatten(-1, {2, 2, 8});  // [B, T, H, 2, r]
                const auto a = halves.select(3, 0).unsqueeze(3), b = halves.select(3, 1).unsqueeze(3);
                const auto& cos = in[2].toTensor();
                const auto& sin = in[3].toTensor();
                const auto rotated = at::cat({a * cos - b * sin, b * cos + a * sin}, 3);
                return std::vector<at::Tensor>{rotated.flatten(2).to(x.scalar_type())};
            }});
        // Dequantization: every backend must give the same bits.
        out.push_back({"vireo::dequantize_fp8", name + " per tensor",
            [=] {
                return std::vector<c10::IValue>{
                    (at::randn({48, 40}) * 50).to(at::kFloat8_e4m3fn), at::full({1}, 0.03f), dtype, std::vector<std::int64_t>{}};
            },
            [](const std::vector<c10::IValue>& in) {
                return std::vector<at::Tensor>{(f32(in[0].toTensor()) * in[1].toTensor()).to(in[2].toScalarType())};
            },
            Compare::Exact, Compare::Exact});
        out.push_back({"vireo::dequantize_fp8", name + " blocks 16x16",
            [=] {
                return std::vector<c10::IValue>{
                    (at::randn({48, 40}) * 50).to(at::kFloat8_e4m3fn), at::rand({3, 3}) + 0.01, dtype, std::vector<std::int64_t>{16, 16}};
            },
            [](const std::vector<c10::IValue>& in) {
                const auto& w = in[0].toTensor();
                const auto s =
                    in[1].toTensor().repeat_interleave(16, 0).repeat_interleave(16, 1).narrow(0, 0, w.size(0)).narrow(1, 0, w.size(1));
                return std::vector<at::Tensor>{(f32(w) * s).to(in[2].toScalarType())};
            },
            Compare::Exact, Compare::Exact});
        out.push_back({"vireo::dequantize_fp8.out", name,
            [=] {
                return std::vector<c10::IValue>{(at::randn({48, 40}) * 50).to(at::kFloat8_e4m3fn), at::full({1}, 0.03f),
                    std::vector<std::int64_t>{}, at::empty({48, 40}, dtype)};
            },
            [](const std::vector<c10::IValue>& in) {
                return std::vector<at::Tensor>{(f32(in[0].toTensor()) * in[1].toTensor()).to(in[3].toTensor().scalar_type())};
            },
            Compare::Exact, Compare::Exact});
        out.push_back({"vireo::dequantize_gguf", name + " Q8_0",
            [=] {
                return std::vector<c10::IValue>{q8Blocks(6), std::int64_t(kernels::gguf::kQ8_0), std::vector<std::int64_t>{3, 64}, dtype};
            },
            [](const std::vector<c10::IValue>& in) {
                return std::vector<at::Tensor>{q8Reference(in[0].toTensor(), in[2].toIntVector(), in[3].toScalarType())};
            },
            Compare::Exact, Compare::Exact});
        out.push_back({"vireo::dequantize_gguf.out", name + " Q8_0",
            [=] {
                return std::vector<c10::IValue>{q8Blocks(6), std::int64_t(kernels::gguf::kQ8_0), at::empty({3, 64}, dtype)};
            },
            [](const std::vector<c10::IValue>& in) {
                const auto& o = in[2].toTensor();
                return std::vector<at::Tensor>{q8Reference(in[0].toTensor(), o.sizes(), o.scalar_type())};
            },
            Compare::Exact, Compare::Exact});
        auto nf4 = [=](bool into) {
            // 200 values in blocks of 64: the last block is partial.
            std::vector<c10::IValue> in{at::randint(0, 256, {100}, at::kByte), at::rand({4}) + 0.1, at::randn({16}), std::int64_t(64)};
            if (into)
                in.emplace_back(at::empty({10, 20}, dtype));
            else
                in.insert(in.end(), {std::vector<std::int64_t>{10, 20}, dtype});
            return in;
        };
        out.push_back({"vireo::dequantize_nf4", name, [=] { return nf4(false); },
            [](const std::vector<c10::IValue>& in) {
                return std::vector<at::Tensor>{nf4Reference(
                    in[0].toTensor(), in[1].toTensor(), in[2].toTensor(), in[3].toInt(), in[4].toIntVector(), in[5].toScalarType())};
            },
            Compare::Exact, Compare::Exact});
        out.push_back({"vireo::dequantize_nf4.out", name, [=] { return nf4(true); },
            [](const std::vector<c10::IValue>& in) {
                const auto& o = in[4].toTensor();
                return std::vector<at::Tensor>{
                    nf4Reference(in[0].toTensor(), in[1].toTensor(), in[2].toTensor(), in[3].toInt(), o.sizes(), o.scalar_type())};
            },
            Compare::Exact, Compare::Exact});
    }
    return out;
}

std::string opName(const c10::OperatorName& n)
{
    return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

}  // namespace

// The table covers every op the dispatcher knows under vireo::, overloads included.
VT_TEST(everyOpHasACase)
{
    (void)kernels::fusedKernelsEnabled();  // the library, and with it its ops, is loaded
    std::set<std::string> covered;
    for (const auto& c : cases())
        covered.insert(c.op);
    std::vector<std::string> missing, known;
    for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
        if (name.name.rfind("vireo::", 0) != 0)
            continue;
        known.push_back(opName(name));
        if (!covered.count(opName(name)))
            missing.push_back(opName(name));
    }
    std::printf("   %zu vireo ops registered, %zu cases\n", known.size(), cases().size());
    VT_CHECK_MSG(known.size() >= 15, "only " << known.size() << " vireo ops registered: is the kernels library loaded?");
    std::string list;
    for (const auto& m : missing)
        list += " " + m;
    VT_CHECK_MSG(missing.empty(), "ops without a case in test_backend_ops:" << list);
    for (const auto& c : covered)
        VT_CHECK_MSG(std::find(known.begin(), known.end(), c) != known.end(), "a case for " << c << ", which is not registered");
}

VT_TEST(everyCaseMatchesItsDefinitionOnTheCpu)
{
    at::manual_seed(20);
    int checked = 0;
    for (const auto& c : cases()) {
        const auto in = c.inputs();
        const auto got = call(c.op, in);
        const auto want = c.reference(in);
        VT_CHECK_MSG(got.size() == want.size(), c.op << " " << c.what << ": " << got.size() << " outputs, expected " << want.size());
        for (std::size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
            const auto problem = compare(c.cpu, got[i], want[i]);
            VT_CHECK_MSG(problem.empty(), c.op << " " << c.what << " output " << i << " on the CPU: " << problem);
        }
        ++checked;
    }
    std::printf("   %d cases on the CPU\n", checked);
}

// On a CUDA device every case runs there too and is held to the CPU's result; without one the
// test says so and checks nothing more (the GPU machine runs it: scripts/gpu-check.sh).
VT_TEST(everyCaseMatchesTheCpuOnEveryDevice)
{
    if (!at::hasCUDA()) {
        std::printf("   no CUDA device here: the CPU is the only backend\n");
        return;
    }
    at::manual_seed(21);
    int checked = 0;
    for (const auto& c : cases()) {
        const auto in = c.inputs();
        const auto cpu = call(c.op, in);
        const auto gpu = call(c.op, onDevice(in, at::Device(at::kCUDA)));
        VT_CHECK_MSG(
            gpu.size() == cpu.size(), c.op << " " << c.what << ": " << gpu.size() << " outputs on CUDA, " << cpu.size() << " on the CPU");
        for (std::size_t i = 0; i < std::min(gpu.size(), cpu.size()); ++i) {
            VT_CHECK_MSG(gpu[i].is_cuda(), c.op << " " << c.what << " output " << i << " is not on the device");
            const auto problem = compare(c.gpu, gpu[i], cpu[i]);
            VT_CHECK_MSG(problem.empty(), c.op << " " << c.what << " output " << i << " on CUDA against the CPU: " << problem);
        }
        ++checked;
    }
    std::printf("   %d cases on CUDA against the CPU\n", checked);
}

VT_MAIN("TestBackendOps")
