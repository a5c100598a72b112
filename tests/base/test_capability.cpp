// The capability gate over a table of real devices, and the one parser of environment
// switches. Pure functions: everything here runs on the CPU, for GPUs this machine lacks.
#include "tests/harness/vireotest.h"

#include "base/capability.h"
#include "base/envswitch.h"

#include <cstdlib>
#include <stdexcept>

using namespace vireo;
using namespace vireo::capability;

namespace {

DeviceCaps device(const char* id)
{
    const auto d = knownDevice(id);
    if (!d)
        throw std::runtime_error(std::string("no such device in the table: ") + id);
    return *d;
}

// An LTX-2 model as the plan describes it: the transformer in `transformer`, the rest dense.
std::vector<ComponentInput> ltx(WeightFormat transformer, bool textOnCpu = false)
{
    return {
        {"text_encoder", WeightFormat::Dense, textOnCpu, false},
        {"connectors", WeightFormat::Dense, false, false},
        {"transformer", transformer, false, true},
        {"video_vae", WeightFormat::Dense, false, false},
    };
}

const ComponentPath& component(const PathPlan& p, const std::string& name)
{
    for (const auto& c : p.components)
        if (c.name == name)
            return c;
    throw std::runtime_error("no component " + name + " in the plan");
}

bool contains(const std::string& text, const std::string& part)
{
    return text.find(part) != std::string::npos;
}

struct Row {
    const char* device;
    Dtype dtype;  // what auto chooses
    GemmPath fp8;  // the transformer's path for scaled FP8 weights
    bool fp8Attention;  // FP8 flash attention for an FP8 transformer
};

}  // namespace

VT_TEST(everyListedDeviceGetsItsPaths)
{
    // What a user of each card should get: bf16 from Ampere on, f16 on Turing; FP8 tensor cores
    // from Ada (8.9) on; cuDNN's FP8 attention from Hopper (9.0) on.
    const Row rows[] = {
        {"t4", Dtype::F16, GemmPath::DequantizeThenGemm, false},
        {"rtx-2080", Dtype::F16, GemmPath::DequantizeThenGemm, false},
        {"rtx-3090", Dtype::BF16, GemmPath::DequantizeThenGemm, false},
        {"a100", Dtype::BF16, GemmPath::DequantizeThenGemm, false},
        {"rtx-4090", Dtype::BF16, GemmPath::Fp8TensorCores, false},
        {"l40s", Dtype::BF16, GemmPath::Fp8TensorCores, false},
        {"h100", Dtype::BF16, GemmPath::Fp8TensorCores, true},
        {"h200", Dtype::BF16, GemmPath::Fp8TensorCores, true},
        {"b200", Dtype::BF16, GemmPath::Fp8TensorCores, true},
        {"rtx-5090", Dtype::BF16, GemmPath::Fp8TensorCores, true},
    };
    for (const auto& row : rows) {
        const auto d = device(row.device);
        VT_CHECK_MSG(!deviceRefusal(d), row.device << " was refused: " << deviceRefusal(d).value_or(""));
        const auto fp8 = planPaths(d, DtypeRequest::Auto, ltx(WeightFormat::Fp8Scaled), {});
        VT_CHECK_MSG(!fp8.refusal, row.device);
        VT_COMPARE(dtypeName(fp8.dtype), dtypeName(row.dtype));
        const auto& t = component(fp8, "transformer");
        VT_CHECK_MSG(t.gemm == row.fp8, row.device << ": " << t.text << " (" << t.reason << ")");
        VT_CHECK_MSG(!t.reason.empty(), row.device);
        VT_CHECK_MSG((fp8.attention == "FP8 flash attention (cuDNN)") == row.fp8Attention,
            row.device << ": attention " << fp8.attention << " (" << fp8.attentionReason << ")");
        // Where FP8 weights cannot use tensor cores they are dequantized into the compute dtype,
        // and the user is told it saves memory, not time.
        if (row.fp8 == GemmPath::DequantizeThenGemm) {
            VT_CHECK_MSG(contains(t.text, "dequantize to " + dtypeName(row.dtype)), row.device << ": " << t.text);
            VT_CHECK_MSG(contains(t.reason, "has no FP8 tensor cores"), row.device << ": " << t.reason);
            VT_CHECK_MSG(!fp8.warnings.empty() && contains(fp8.warnings.back(), "save memory, not time"), row.device);
        }
        // GGUF dequantizes everywhere, by kernels built for this very architecture.
        const auto gguf = planPaths(d, DtypeRequest::Auto, ltx(WeightFormat::Gguf), {});
        const auto& g = component(gguf, "transformer");
        VT_CHECK(g.gemm == GemmPath::DequantizeThenGemm);
        VT_CHECK_MSG(contains(g.reason, "compute capability " + d.capabilityText()), g.reason);
        VT_CHECK_MSG(contains(gguf.attention, "SDPA"), gguf.attention);
        // Dense models: dense GEMMs in the chosen dtype.
        const auto dense = planPaths(d, DtypeRequest::Auto, ltx(WeightFormat::Dense), {});
        VT_COMPARE(component(dense, "transformer").text, "dense GEMM in " + dtypeName(row.dtype));
    }
}

VT_TEST(turingComputesInHalfPrecisionAndSaysWhy)
{
    const auto t4 = device("t4");
    const auto p = planPaths(t4, DtypeRequest::Auto, ltx(WeightFormat::Dense), {});
    VT_CHECK(p.dtype == Dtype::F16);
    VT_CHECK_MSG(contains(p.dtypeReason, "no bf16 tensor cores"), p.dtypeReason);
    VT_CHECK_MSG(!p.warnings.empty() && contains(p.warnings.front(), "f16"), "the f16 choice is a visible warning");
    // Asked for bf16 explicitly, Turing refuses with what to choose instead.
    const auto bf16 = chooseDtype(t4, DtypeRequest::BF16);
    VT_CHECK(bf16.refusal.has_value());
    VT_CHECK_MSG(contains(*bf16.refusal, "8.0") && contains(*bf16.refusal, "choose auto or f16"), *bf16.refusal);
    VT_CHECK(planPaths(t4, DtypeRequest::BF16, ltx(WeightFormat::Dense), {}).refusal.has_value());
    VT_CHECK(!chooseDtype(t4, DtypeRequest::F16).refusal);
}

VT_TEST(tooOldOrUnsupportedDevicesAreRefusedWithWhatWouldWork)
{
    for (const char* id : {"gtx-1080", "v100"}) {
        const auto d = device(id);
        const auto refusal = deviceRefusal(d);
        VT_CHECK_MSG(refusal.has_value(), id);
        VT_CHECK_MSG(contains(*refusal, d.capabilityText()) && contains(*refusal, "7.5") && contains(*refusal, "CPU"), *refusal);
        const auto p = planPaths(d, DtypeRequest::Auto, ltx(WeightFormat::Dense), {});
        VT_CHECK(p.refusal.has_value());
        VT_CHECK_MSG(contains(p.text(), "cannot run"), p.text());
    }
    // A driver older than the CUDA this build needs: update the driver.
    auto old = device("rtx-4090");
    old.driverCudaVersion = 12080;
    const auto refusal = deviceRefusal(old);
    VT_CHECK(refusal.has_value());
    VT_CHECK_MSG(contains(*refusal, "12.8") && contains(*refusal, "13.0") && contains(*refusal, "update the NVIDIA driver"), *refusal);
    // Minor-version compatibility: a 13.2 driver runs a 13.0 build, and an unknown one is not refused.
    old.driverCudaVersion = 13020;
    VT_CHECK(!deviceRefusal(old));
    old.driverCudaVersion = 0;
    VT_CHECK(!deviceRefusal(old));
}

VT_TEST(switchesAndLibrariesMoveThePaths)
{
    const auto h100 = device("h100");
    Switches noTensorCores;
    noTensorCores.fp8TensorCores = false;
    const auto forced = planPaths(h100, DtypeRequest::Auto, ltx(WeightFormat::Fp8Scaled), noTensorCores);
    const auto& t = component(forced, "transformer");
    VT_CHECK(t.gemm == GemmPath::DequantizeThenGemm);
    VT_CHECK_MSG(contains(t.reason, "VIREO_FP8_TENSOR_CORES=0"), t.reason);
    // No FP8 GEMMs: no FP8 attention either.
    VT_CHECK_MSG(contains(forced.attention, "bf16 SDPA"), forced.attention);

    Switches noAttention;
    noAttention.fp8Attention = false;
    const auto bf16Attention = planPaths(h100, DtypeRequest::Auto, ltx(WeightFormat::Fp8Scaled), noAttention);
    VT_CHECK(component(bf16Attention, "transformer").gemm == GemmPath::Fp8TensorCores);
    VT_CHECK_MSG(contains(bf16Attention.attentionReason, "VIREO_FP8_ATTENTION=0"), bf16Attention.attentionReason);

    Switches unbuilt;
    unbuilt.fp8AttentionBuilt = false;
    VT_CHECK_MSG(contains(*fp8AttentionBlocker(h100, Dtype::BF16, unbuilt), "cuDNN's frontend"), "a build without the frontend says so");

    auto oldCudnn = h100;
    oldCudnn.cudnnVersion = 90000;
    VT_CHECK(contains(*fp8AttentionBlocker(oldCudnn, Dtype::BF16, {}), "9.0.0"));
    oldCudnn.cudnnVersion = 91000;
    VT_CHECK(contains(*fp8AttentionBlocker(oldCudnn, Dtype::BF16, {}), "not 9.10.0"));
    oldCudnn.cudnnVersion = 91002;
    VT_CHECK(!fp8AttentionBlocker(oldCudnn, Dtype::BF16, {}));
    // f32 compute never takes FP8 paths.
    VT_CHECK(fp8GemmBlocker(h100, Dtype::F32, {}).has_value());
    VT_CHECK(planPaths(h100, DtypeRequest::F32, ltx(WeightFormat::Fp8Scaled), {}).components[2].gemm == GemmPath::DequantizeThenGemm);
}

VT_TEST(theCpuAndComponentsPlacedOnItDequantizeThere)
{
    DeviceCaps cpu;
    cpu.name = "cpu";
    const auto p = planPaths(cpu, DtypeRequest::Auto, ltx(WeightFormat::Gguf), {});
    VT_CHECK(!p.refusal);
    VT_CHECK(p.dtype == Dtype::F32);
    VT_COMPARE(component(p, "transformer").text, std::string("dequantize to f32 + GEMM on the CPU"));
    VT_COMPARE(component(p, "text_encoder").text, std::string("dense GEMM in f32 on the CPU"));
    VT_COMPARE(p.attention, std::string("f32 SDPA"));
    // A text encoder placed on the CPU beside a GPU says where it runs.
    const auto split = planPaths(device("rtx-4090"), DtypeRequest::Auto, ltx(WeightFormat::Fp8Scaled, true), {});
    VT_COMPARE(component(split, "text_encoder").device, std::string("cpu"));
    VT_CHECK(contains(component(split, "text_encoder").text, "on the CPU"));
    VT_COMPARE(component(split, "transformer").device, std::string("cuda"));
    VT_CHECK_MSG(contains(split.text(), "transformer: FP8 tensor-core GEMM"), split.text());
}

VT_TEST(everyKnownDeviceIsInTheTable)
{
    for (const auto& id : knownDeviceIds()) {
        const auto d = knownDevice(id);
        VT_CHECK_MSG(d && d->cuda && d->totalBytes > 0 && !d->name.empty(), id);
    }
    VT_CHECK(!knownDevice("rtx-9999"));
}

VT_TEST(switchValuesParseOneWay)
{
    for (const char* on : {"1", "true", "TRUE", "True", "on", "ON", "yes", "Yes", " 1 ", "\ttrue\n"})
        VT_CHECK_MSG(env::parseFlag(on) == std::optional<bool>(true), on);
    for (const char* off : {"0", "false", "False", "off", "OFF", "no", "NO", " no"})
        VT_CHECK_MSG(env::parseFlag(off) == std::optional<bool>(false), off);
    for (const char* bad : {"", "2", "of", "y", "n", "enable", "0x0", "-1", "truee", "1.0"})
        VT_CHECK_MSG(!env::parseFlag(bad), "'" << bad << "' parsed");
}

VT_TEST(everySwitchIsReadThroughTheParserAndBadValuesNameTheVariable)
{
    // Every listed switch: each spelling sets it, a bad value is an error naming the variable,
    // unset or blank is its default.
    for (const auto& s : env::switches()) {
        ::setenv(s.name, "off", 1);
        VT_CHECK_MSG(!env::flag(s.name), s.name);
        ::setenv(s.name, "Yes", 1);
        VT_CHECK_MSG(env::flag(s.name), s.name);
        ::setenv(s.name, "of", 1);
        bool threw = false;
        try {
            (void)env::flag(s.name);
        } catch (const std::invalid_argument& e) {
            threw = true;
            VT_CHECK_MSG(contains(e.what(), s.name) && contains(e.what(), "'of'"), e.what());
        }
        VT_CHECK_MSG(threw, s.name << "=of was accepted");
        const auto problems = env::problems();
        VT_COMPARE(problems.size(), std::size_t(1));
        VT_CHECK_MSG(contains(problems.front(), s.name), problems.front());
        ::setenv(s.name, "  ", 1);
        VT_COMPARE(env::flag(s.name), s.defaultValue);
        ::unsetenv(s.name);
        VT_COMPARE(env::flag(s.name), s.defaultValue);
        VT_CHECK(env::problems().empty());
        VT_CHECK_MSG(contains(env::helpText(), s.name), s.name << " is missing from --help");
    }
    // A hostile value is shown bounded and without control characters.
    ::setenv("VIREO_CUDA_GRAPHS", (std::string(200, 'x') + "\x1b[2J").c_str(), 1);
    const auto problems = env::problems();
    VT_COMPARE(problems.size(), std::size_t(1));
    VT_CHECK(problems.front().size() < 300 && problems.front().find('\x1b') == std::string::npos);
    ::unsetenv("VIREO_CUDA_GRAPHS");
    // Asking for a switch nobody listed is a programming error, not a silent default.
    bool threw = false;
    try {
        (void)env::flag("VIREO_NOT_A_SWITCH");
    } catch (const std::logic_error&) {
        threw = true;
    }
    VT_CHECK(threw);
}

VT_MAIN("test_capability")
