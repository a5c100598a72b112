#include "inference/tensorfile/safetensors.h"

#include "inference/util/jsonlimits.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>

namespace vireo::tensorfile {

namespace {

std::uint64_t readU64LE(const std::byte* p)
{
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
        v = (v << 8) | static_cast<std::uint64_t>(p[i]);
    return v;
}

Error formatError(const std::filesystem::path& path, const std::string& message, ErrorCode code = ErrorCode::InvalidFormat)
{
    return makeError(code, fileError(path, message));
}

std::string tensorLabel(const std::string& name)
{
    return "tensor '" + name + "'";
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path)
{
    return mapAndParse<SafetensorsFile>(path);
}

Result<SafetensorsFile> SafetensorsFile::parse(const std::filesystem::path& path, const std::byte* data, std::uint64_t fileBytes)
{
    constexpr const char* kRedownload = "; the file is damaged or not a safetensors file, download it again";
    // Appended rather than added: GCC 12 sees a false out-of-bounds copy in string + literal.
    auto notAnObject = [&] {
        std::string message = "header is not a JSON object";
        message += kRedownload;
        return formatError(path, message);
    };
    if (fileBytes < 8)
        return formatError(path,
            "file is " + std::to_string(fileBytes) + " bytes, too short for a safetensors header (truncated download?)",
            ErrorCode::Truncated);
    const std::uint64_t headerBytes = readU64LE(data);
    if (headerBytes > kSafetensorsMaxHeaderBytes)
        return formatError(path, "header length " + std::to_string(headerBytes) + " bytes exceeds the 100 MB limit" + kRedownload);
    if (headerBytes > fileBytes - 8)
        return formatError(path,
            "header claims " + std::to_string(headerBytes) + " bytes but the file has only " + std::to_string(fileBytes - 8)
                + " after the length prefix (truncated download?)",
            ErrorCode::Truncated);
    if (headerBytes < 2 || static_cast<char>(data[8]) != '{')
        return notAnObject();

    const std::string_view text(reinterpret_cast<const char*>(data + 8), headerBytes);
    // Duplicate keys are refused as the reference does (serde), in linear time: real headers
    // hold up to a few hundred thousand tensors.
    jsonutil::JsonLimits limits;
    limits.maxBytes = kSafetensorsMaxHeaderBytes;
    limits.rejectDuplicateTopLevelKeys = true;
    auto parsed = jsonutil::parseUntrusted(text, "header", limits);
    if (!parsed) {
        std::string message = parsed.error().message;
        if (message.find("not valid JSON") != std::string::npos)
            message += kRedownload;
        return formatError(path, message);
    }
    const nlohmann::json& header = *parsed;
    if (!header.is_object())
        return notAnObject();

    SafetensorsFile result;
    result.headerBytes = headerBytes;
    result.dataOffset = 8 + headerBytes;
    const std::uint64_t bufferBytes = fileBytes - result.dataOffset;

    struct Span {
        std::uint64_t begin, end;
        std::size_t index;
    };
    std::vector<Span> spans;
    spans.reserve(header.size());
    for (auto& [name, entry] : header.items()) {
        if (name == "__metadata__") {
            if (!entry.is_object())
                return formatError(path, "__metadata__ is not a JSON object of strings");
            for (auto& [key, value] : entry.items()) {
                if (!value.is_string())
                    return formatError(path, "__metadata__ value '" + key + "' is not a string");
                result.metadata.emplace(key, value.get<std::string>());
            }
            continue;
        }
        if (!entry.is_object())
            return formatError(path, tensorLabel(name) + " is not described by a JSON object");
        const auto dtypeIt = entry.find("dtype");
        const auto shapeIt = entry.find("shape");
        const auto offsetsIt = entry.find("data_offsets");
        if (dtypeIt == entry.end() || shapeIt == entry.end() || offsetsIt == entry.end())
            return formatError(path, tensorLabel(name) + " lacks dtype, shape or data_offsets");
        if (!dtypeIt->is_string())
            return formatError(path, tensorLabel(name) + " has a dtype that is not a string");
        const auto dtypeString = dtypeIt->get<std::string>();
        const auto dtype = dtypeFromSafetensorsName(dtypeString);
        if (!dtype)
            return formatError(path,
                tensorLabel(name) + " has unknown dtype '" + dtypeString + "'; this build does not know it (newer safetensors format?)",
                ErrorCode::Unsupported);
        if (!shapeIt->is_array())
            return formatError(path, tensorLabel(name) + " has a shape that is not an array");
        TensorInfo info;
        info.name = name;
        info.dtype = dtype;
        std::uint64_t numel = 1;
        for (const auto& dim : *shapeIt) {
            if (!dim.is_number_unsigned())
                return formatError(path, tensorLabel(name) + " has a shape entry that is not a non-negative integer");
            const auto d = dim.get<std::uint64_t>();
            if (d > static_cast<std::uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, d, &numel))
                return formatError(path, tensorLabel(name) + " has a shape whose element count overflows");
            info.shape.push_back(static_cast<std::int64_t>(d));
        }
        std::uint64_t bits = 0;
        if (__builtin_mul_overflow(numel, static_cast<std::uint64_t>(dtypeBits(*dtype)), &bits))
            return formatError(path, tensorLabel(name) + " has a shape whose byte count overflows");
        if (bits % 8 != 0)
            return formatError(path, tensorLabel(name) + " of " + dtypeString + " does not fill whole bytes");
        if (!offsetsIt->is_array() || offsetsIt->size() != 2 || !(*offsetsIt)[0].is_number_unsigned()
            || !(*offsetsIt)[1].is_number_unsigned())
            return formatError(path, tensorLabel(name) + " has data_offsets that are not two non-negative integers");
        const auto b = (*offsetsIt)[0].get<std::uint64_t>();
        const auto e = (*offsetsIt)[1].get<std::uint64_t>();
        if (e < b)
            return formatError(path, tensorLabel(name) + " has data_offsets that end before they begin");
        if (e - b != bits / 8)
            return formatError(path,
                tensorLabel(name) + " spans " + std::to_string(e - b) + " bytes but shape x " + dtypeString + " needs "
                    + std::to_string(bits / 8));
        if (e > bufferBytes)
            return formatError(path,
                tensorLabel(name) + " ends at byte " + std::to_string(e) + " of a " + std::to_string(bufferBytes)
                    + "-byte data buffer (truncated download?)",
                ErrorCode::Truncated);
        info.offset = result.dataOffset + b;
        info.bytes = e - b;
        spans.push_back({b, e, result.tensors.size()});
        result.tensors.push_back(std::move(info));
    }

    std::sort(
        spans.begin(), spans.end(), [](const Span& x, const Span& y) { return x.begin != y.begin ? x.begin < y.begin : x.end < y.end; });
    std::uint64_t expected = 0;
    for (const auto& span : spans) {
        if (span.begin != expected) {
            const auto& name = result.tensors[span.index].name;
            return formatError(path,
                tensorLabel(name) + (span.begin < expected ? " overlaps" : " leaves a gap before") + " the previous tensor's data (offset "
                    + std::to_string(span.begin) + ", expected " + std::to_string(expected) + ")");
        }
        expected = span.end;
    }
    if (expected != bufferBytes)
        return formatError(path,
            "tensors cover " + std::to_string(expected) + " bytes but the data buffer holds " + std::to_string(bufferBytes)
                + " (trailing bytes after the last tensor)");

    std::vector<TensorInfo> ordered;
    ordered.reserve(result.tensors.size());
    for (const auto& span : spans)
        ordered.push_back(std::move(result.tensors[span.index]));
    result.tensors = std::move(ordered);
    return result;
}

}  // namespace vireo::tensorfile
