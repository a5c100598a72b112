#include "app/cli/devicecommand.h"

#include "base/capability.h"
#include "inference/facade/generator.h"
#include "inference/util/device.h"
#include "inference/util/text.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <optional>

namespace {

struct DeviceReport {
    vireo::facade::DeviceInfo info;
    std::int64_t freeBytes = 0;  // the driver's view; the CPU's available memory
    std::optional<vireo::capability::DeviceCaps> caps;  // CUDA devices only
    std::optional<std::string> refusal;
    std::string dtype, dtypeReason, fp8Gemm, fp8Attention;
};

std::string pathOrBlocker(const std::optional<std::string>& blocker, const char* path)
{
    return blocker ? "no: " + *blocker : path;
}

DeviceReport describe(const vireo::facade::DeviceInfo& info)
{
    DeviceReport r;
    r.info = info;
    r.freeBytes = info.totalBytes;
    if (info.name == "cpu")
        return r;
    const c10::Device device(info.name);
    r.freeBytes = vireo::cudaMemoryInfo(device).first;
    const auto caps = vireo::deviceCaps(device);
    r.caps = caps;
    r.refusal = vireo::capability::deviceRefusal(caps);
    const auto choice = vireo::capability::chooseDtype(caps, vireo::capability::DtypeRequest::Auto);
    r.dtype = vireo::capability::dtypeName(choice.dtype);
    r.dtypeReason = choice.reason;
    const auto switches = vireo::pathSwitches();
    r.fp8Gemm = pathOrBlocker(vireo::capability::fp8GemmBlocker(caps, choice.dtype, switches), "FP8 tensor-core GEMM");
    r.fp8Attention = pathOrBlocker(vireo::capability::fp8AttentionBlocker(caps, choice.dtype, switches), "FP8 flash attention (cuDNN)");
    return r;
}

std::string gib(std::int64_t bytes)
{
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
    return text;
}

}  // namespace

int runDevices(const std::vector<std::string>& args)
{
    bool asJson = false;
    for (const auto& a : args) {
        if (a == "--json") {
            asJson = true;
        } else {
            std::fprintf(
                stderr, "vireo-cli: devices: unknown argument %s (devices [--json])\n", vireo::terminalSafe(a.substr(0, 200)).c_str());
            return 2;
        }
    }
    std::vector<DeviceReport> reports;
    for (const auto& info : vireo::facade::availableDevices())
        reports.push_back(describe(info));
    const auto noCuda = vireo::cudaUnavailableReason();
    if (asJson) {
        auto list = nlohmann::json::array();
        for (const auto& r : reports) {
            nlohmann::json d = {{"device", r.info.name}, {"description", r.info.description}, {"total_bytes", r.info.totalBytes},
                {"free_bytes", r.freeBytes}};
            if (r.caps) {
                d["compute_capability"] = r.caps->capabilityText();
                d["usable"] = !r.refusal.has_value();
                d["refusal"] = r.refusal ? nlohmann::json(*r.refusal) : nlohmann::json(nullptr);
                d["dtype"] = r.dtype;
                d["dtype_reason"] = r.dtypeReason;
                d["fp8_gemm"] = r.fp8Gemm;
                d["fp8_attention"] = r.fp8Attention;
            }
            list.push_back(std::move(d));
        }
        nlohmann::json out = {{"devices", list}};
        out["cuda_unavailable"] = noCuda.empty() ? nlohmann::json(nullptr) : nlohmann::json(noCuda);
        // Device names come from the driver: replace rather than throw on bytes that are not UTF-8.
        std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        return 0;
    }
    for (const auto& r : reports) {
        std::cout << r.info.name << ": " << vireo::terminalSafe(r.info.description) << "\n";
        if (r.caps)
            std::cout << "  memory: " << gib(r.freeBytes) << " free of " << gib(r.info.totalBytes) << "\n";
        else
            std::cout << "  memory: " << gib(r.freeBytes) << " available\n";
        if (!r.caps)
            continue;
        if (r.refusal) {
            std::cout << "  cannot run this build: " << vireo::terminalSafe(*r.refusal) << "\n";
            continue;
        }
        std::cout << "  compute dtype: " << r.dtype << (r.dtypeReason.empty() ? "" : " (" + r.dtypeReason + ")") << "\n";
        std::cout << "  FP8 weights: " << vireo::terminalSafe(r.fp8Gemm) << "\n";
        std::cout << "  FP8 attention: " << vireo::terminalSafe(r.fp8Attention) << "\n";
    }
    if (!noCuda.empty())
        std::cout << "no CUDA device: " << vireo::terminalSafe(noCuda) << "\n";
    return 0;
}
