#include "inference/tensorfile/tensorset.h"

#include "inference/tensorfile/modelsource.h"
#include "inference/tensorfile/tensorview.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <unistd.h>

namespace vireo::tensorfile {

namespace {

const char* safetensorsDtype(c10::ScalarType t)
{
    switch (t) {
    case c10::kFloat: return "F32";
    case c10::kDouble: return "F64";
    case c10::kHalf: return "F16";
    case c10::kBFloat16: return "BF16";
    case c10::kLong: return "I64";
    case c10::kInt: return "I32";
    case c10::kShort: return "I16";
    case c10::kChar: return "I8";
    case c10::kByte: return "U8";
    case c10::kBool: return "BOOL";
    case c10::kFloat8_e4m3fn: return "F8_E4M3";
    case c10::kFloat8_e5m2: return "F8_E5M2";
    default: return nullptr;
    }
}

}  // namespace

const at::Tensor* TensorSet::find(const std::string& name) const
{
    const auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
}

Result<TensorSet> readTensorSet(const std::filesystem::path& path)
{
    auto source = ModelSource::open(path);
    if (!source)
        return source.error();
    if (source->checkpoints.size() != 1 || source->checkpoints[0].format != FileFormat::Safetensors)
        return makeError(ErrorCode::InvalidFormat, path.string() + ": expected one safetensors file");
    const auto& cp = source->checkpoints[0];
    TensorSet set;
    set.metadata = cp.metadata;
    for (const auto& info : cp.tensors) {
        auto t = readTensor(cp, info);
        if (!t)
            return t.error();
        set.tensors.emplace(info.name, std::move(*t));
    }
    return set;
}

Result<void> writeSafetensors(
    const std::filesystem::path& path, const std::map<std::string, at::Tensor>& tensors, const std::map<std::string, std::string>& metadata)
{
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty())
        header["__metadata__"] = metadata;
    std::vector<at::Tensor> data;
    std::uint64_t offset = 0;
    for (const auto& [name, tensor] : tensors) {
        const char* dtype = safetensorsDtype(tensor.scalar_type());
        if (!dtype)
            return makeError(ErrorCode::Unsupported,
                path.string() + ": tensor '" + name + "' has dtype " + std::string(c10::toString(tensor.scalar_type()))
                    + ", which safetensors cannot hold");
        auto cpu = tensor.detach().to(c10::kCPU).contiguous();
        const auto bytes = static_cast<std::uint64_t>(cpu.numel() * cpu.element_size());
        header[name] = {{"dtype", dtype}, {"shape", cpu.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
        data.push_back(std::move(cpu));
    }
    auto text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    const auto tmp = path.parent_path() / ("." + path.filename().string() + ".tmp" + std::to_string(::getpid()));
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out)
            return makeError(ErrorCode::Io, tmp.string() + ": cannot create the file (is the folder writable?)");
        const std::uint64_t size = text.size();
        out.write(reinterpret_cast<const char*>(&size), 8);
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        for (const auto& t : data)
            out.write(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
        out.flush();
        if (!out) {
            std::remove(tmp.c_str());
            return makeError(ErrorCode::Io, path.string() + ": writing failed (disk full?)");
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        return makeError(ErrorCode::Io, path.string() + ": cannot move the finished file into place");
    }
    return {};
}

}  // namespace vireo::tensorfile
