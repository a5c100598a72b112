#include "inference/families/common.h"

#include "base/envswitch.h"
#include "inference/families/previewprojection.h"
#include "inference/util/device.h"
#include "inference/util/jsonlimits.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cctype>
#include <fstream>
#include <sstream>

namespace vireo::families {

namespace {

Result<capability::DtypeRequest> parseDtypeRequest(const std::string& name)
{
    const auto d = lower(name);
    if (d == "auto" || d.empty())
        return capability::DtypeRequest::Auto;
    if (d == "bf16" || d == "bfloat16")
        return capability::DtypeRequest::BF16;
    if (d == "f32" || d == "float32" || d == "fp32")
        return capability::DtypeRequest::F32;
    if (d == "f16" || d == "float16" || d == "fp16")
        return capability::DtypeRequest::F16;
    return makeError(ErrorCode::InvalidArgument, "'" + name + "' is not a compute dtype (auto, bf16, f16, f32)");
}

c10::ScalarType scalarType(capability::Dtype dtype)
{
    return dtype == capability::Dtype::BF16 ? c10::kBFloat16 : dtype == capability::Dtype::F16 ? c10::kHalf : c10::kFloat;
}

}  // namespace

std::string lower(std::string_view text)
{
    std::string out(text);
    for (auto& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

Result<c10::Device> parseDevice(const std::string& name)
{
    try {
        c10::Device device(lower(name));
        if (device.is_cuda() && !cudaAvailable())
            return makeError(ErrorCode::Unsupported,
                "device " + name + " was asked for, but this machine has no usable CUDA device: " + cudaUnavailableReason()
                    + "; or choose the CPU");
        if (!device.is_cuda() && !device.is_cpu())
            return makeError(ErrorCode::Unsupported, "device " + name + " is not supported; use cpu or cuda");
        if (device.is_cuda() && !device.has_index())
            device = c10::Device(c10::kCUDA, 0);
        if (device.is_cuda() && device.index() >= cudaDeviceCount())
            return makeError(ErrorCode::InvalidArgument,
                "device " + name + " was asked for, but this machine has " + std::to_string(cudaDeviceCount()) + " CUDA device(s) (cuda:0"
                    + (cudaDeviceCount() > 1 ? " to cuda:" + std::to_string(cudaDeviceCount() - 1) : std::string()) + ")");
        return device;
    } catch (const std::exception&) {
        return makeError(ErrorCode::InvalidArgument, "'" + name + "' is not a device (cpu, cuda, cuda:1)");
    }
}

Result<c10::ScalarType> resolveDtype(const std::string& name, const capability::DeviceCaps& caps)
{
    auto request = parseDtypeRequest(name);
    if (!request)
        return request.error();
    const auto choice = capability::chooseDtype(caps, *request);
    if (choice.refusal)
        return makeError(ErrorCode::Unsupported, *choice.refusal);
    return scalarType(choice.dtype);
}

std::string describeDevice(const capability::DeviceCaps& caps)
{
    if (!caps.cuda)
        return "cpu";
    return caps.name + " (compute capability " + caps.capabilityText() + ")";
}

void planPathsInto(facade::MemoryPlan& m, const capability::DeviceCaps& caps, const std::string& dtypeRequest,
    const std::vector<capability::ComponentInput>& components)
{
    const auto request = parseDtypeRequest(dtypeRequest);
    const auto plan = capability::planPaths(caps, request ? *request : capability::DtypeRequest::Auto, components, pathSwitches());
    m.deviceName = describeDevice(caps);
    m.dtypeReason = plan.dtypeReason;
    m.paths.clear();
    for (const auto& c : plan.components)
        m.paths.push_back({c.name, c.text, c.reason});
    m.attentionPath = plan.attention;
    m.attentionReason = plan.attentionReason;
    m.pathWarnings = plan.warnings;
    m.pathsText = plan.text();
}

std::string dtypeName(c10::ScalarType t)
{
    return t == c10::kBFloat16 ? "bf16" : t == c10::kHalf ? "f16" : "f32";
}

std::int64_t hostAvailableBytes()
{
    std::ifstream in("/proc/meminfo");
    std::string key;
    std::int64_t value = 0;
    std::string unit;
    while (in >> key >> value >> unit)
        if (key == "MemAvailable:")
            return value * 1024;
    return 0;
}

std::optional<nlohmann::json> smallJson(const std::filesystem::path& file)
{
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec) || std::filesystem::file_size(file, ec) > (1u << 20))
        return std::nullopt;
    std::ifstream in(file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = jsonutil::parseUntrusted(text.str(), file.string());
    if (!parsed || !parsed->is_object())
        return std::nullopt;
    return *parsed;
}

std::string className(const std::filesystem::path& file)
{
    const auto j = smallJson(file);
    return j && j->contains("_class_name") && (*j)["_class_name"].is_string() ? (*j)["_class_name"].get<std::string>() : std::string();
}

bool previewDue(const facade::GenerateRequest& r, std::int64_t done, std::int64_t total)
{
    return r.previewEvery > 0 && (done % r.previewEvery == 0 || done == total);
}

std::shared_ptr<const facade::Preview> makePreview(const at::Tensor& projection, const at::Tensor& frames, std::int64_t step, int maxWidth)
{
    auto rgb = pipelines::projectPreview(projection, frames).clamp(-1, 1);  // [F, h, w, 3]
    if (maxWidth > 0 && rgb.size(2) > maxWidth) {
        const auto height = std::max<std::int64_t>(1, rgb.size(1) * maxWidth / rgb.size(2));
        rgb = at::adaptive_avg_pool2d(rgb.permute({0, 3, 1, 2}), {height, maxWidth}).permute({0, 2, 3, 1});
    }
    rgb = rgb.add(1).mul(127.5).round().to(at::kByte).contiguous();
    auto preview = std::make_shared<facade::Preview>();
    preview->frames = static_cast<int>(rgb.size(0));
    preview->height = static_cast<int>(rgb.size(1));
    preview->width = static_cast<int>(rgb.size(2));
    preview->step = static_cast<int>(step);
    preview->rgb.assign(rgb.data_ptr<std::uint8_t>(), rgb.data_ptr<std::uint8_t>() + rgb.numel());
    return preview;
}

}  // namespace vireo::families
