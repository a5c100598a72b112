#include "inference/tensorfile/gguf.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_set>

namespace vireo::tensorfile {

namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr std::uint64_t kMaxStringBytes = 1ull << 30;
constexpr int kMaxArrayDepth = 8;
// Every metadata value becomes a ~48-byte node: a 1 GB array of u8 would need 48 GB. Real
// files hold about a million (a 262k-token vocabulary with scores, types and merges).
constexpr std::uint64_t kMaxMetadataValues = 16ull << 20;

struct ParseError {
    ErrorCode code;
    std::string message;
};

// Every read is bounds-checked against the mapped file; a short file becomes a ParseError
// that names the offset, never a read past the end.
class Cursor {
public:
    Cursor(const std::byte* data, std::uint64_t size) : m_data(data), m_size(size) {}

    std::uint64_t pos() const { return m_pos; }
    std::uint64_t remaining() const { return m_size - m_pos; }

    template <typename T>
    T read(const char* what)
    {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, m_data + m_pos, sizeof(T));
        m_pos += sizeof(T);
        return v;
    }

    std::string readString(const char* what)
    {
        const auto len = read<std::uint64_t>(what);
        if (len > kMaxStringBytes)
            throw ParseError{ErrorCode::InvalidFormat,
                std::string(what) + " claims a string of " + std::to_string(len) + " bytes at offset " + std::to_string(m_pos - 8)};
        need(len, what);
        std::string s(reinterpret_cast<const char*>(m_data + m_pos), len);
        m_pos += len;
        return s;
    }

    void need(std::uint64_t bytes, const char* what) const
    {
        if (bytes > remaining())
            throw ParseError{ErrorCode::Truncated,
                std::string(what) + " at offset " + std::to_string(m_pos) + " needs " + std::to_string(bytes)
                    + " bytes but the file ends after " + std::to_string(remaining()) + " (truncated download?)"};
    }

private:
    const std::byte* m_data;
    std::uint64_t m_size;
    std::uint64_t m_pos = 0;
};

std::uint64_t scalarBytes(GgufValueType type)
{
    switch (type) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::Bool: return 1;
    case GgufValueType::U16:
    case GgufValueType::I16: return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32: return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64: return 8;
    case GgufValueType::String: return 8;  // at least its length prefix
    case GgufValueType::Array: return 12;  // at least its type and count
    }
    return 0;
}

GgufValueType checkType(std::uint32_t raw, const std::string& key)
{
    if (raw > static_cast<std::uint32_t>(GgufValueType::F64))
        throw ParseError{ErrorCode::InvalidFormat, "key '" + key + "' has unknown value type " + std::to_string(raw)};
    return static_cast<GgufValueType>(raw);
}

GgufValue readValue(Cursor& in, GgufValueType type, const std::string& key, int depth, std::uint64_t& values)
{
    if (++values > kMaxMetadataValues)
        throw ParseError{ErrorCode::InvalidFormat,
            "metadata holds more than " + std::to_string(kMaxMetadataValues) + " values (at key '" + key
                + "'); no real GGUF file does, so it is damaged or hostile"};
    GgufValue v;
    v.type = type;
    switch (type) {
    case GgufValueType::U8: v.value = std::uint64_t{in.read<std::uint8_t>("value")}; break;
    case GgufValueType::I8: v.value = std::int64_t{in.read<std::int8_t>("value")}; break;
    case GgufValueType::U16: v.value = std::uint64_t{in.read<std::uint16_t>("value")}; break;
    case GgufValueType::I16: v.value = std::int64_t{in.read<std::int16_t>("value")}; break;
    case GgufValueType::U32: v.value = std::uint64_t{in.read<std::uint32_t>("value")}; break;
    case GgufValueType::I32: v.value = std::int64_t{in.read<std::int32_t>("value")}; break;
    case GgufValueType::U64: v.value = std::uint64_t{in.read<std::uint64_t>("value")}; break;
    case GgufValueType::I64: v.value = std::int64_t{in.read<std::int64_t>("value")}; break;
    case GgufValueType::F32: v.value = double{in.read<float>("value")}; break;
    case GgufValueType::F64: v.value = in.read<double>("value"); break;
    case GgufValueType::Bool: {
        const auto b = in.read<std::uint8_t>("value");
        if (b > 1)
            throw ParseError{ErrorCode::InvalidFormat, "key '" + key + "' holds bool value " + std::to_string(b)};
        v.value = b == 1;
        break;
    }
    case GgufValueType::String: v.value = in.readString("string value"); break;
    case GgufValueType::Array: {
        if (depth >= kMaxArrayDepth)
            throw ParseError{ErrorCode::InvalidFormat, "key '" + key + "' nests arrays too deeply"};
        v.elementType = checkType(in.read<std::uint32_t>("array type"), key);
        const auto count = in.read<std::uint64_t>("array count");
        // Each element takes at least scalarBytes(): an impossible count fails here instead
        // of reserving memory for it.
        if (count > in.remaining() / scalarBytes(v.elementType))
            throw ParseError{ErrorCode::InvalidFormat,
                "key '" + key + "' claims an array of " + std::to_string(count) + " elements, more than the "
                    + std::to_string(in.remaining()) + " bytes left in the file can hold"};
        if (count > kMaxMetadataValues - values)
            throw ParseError{ErrorCode::InvalidFormat,
                "key '" + key + "' claims an array of " + std::to_string(count)
                    + " elements; with the values before it that is more than the " + std::to_string(kMaxMetadataValues)
                    + " a GGUF file may hold, so it is damaged or hostile"};
        std::vector<GgufValue> items;
        items.reserve(count);
        for (std::uint64_t i = 0; i < count; ++i)
            items.push_back(readValue(in, v.elementType, key, depth + 1, values));
        v.value = std::move(items);
        break;
    }
    }
    return v;
}

}  // namespace

std::string_view ggufValueTypeName(GgufValueType type)
{
    switch (type) {
    case GgufValueType::U8: return "u8";
    case GgufValueType::I8: return "i8";
    case GgufValueType::U16: return "u16";
    case GgufValueType::I16: return "i16";
    case GgufValueType::U32: return "u32";
    case GgufValueType::I32: return "i32";
    case GgufValueType::F32: return "f32";
    case GgufValueType::Bool: return "bool";
    case GgufValueType::String: return "string";
    case GgufValueType::Array: return "array";
    case GgufValueType::U64: return "u64";
    case GgufValueType::I64: return "i64";
    case GgufValueType::F64: return "f64";
    }
    return "?";
}

const GgufValue* GgufFile::find(std::string_view key) const
{
    for (const auto& kv : metadata)
        if (kv.key == key)
            return &kv.value;
    return nullptr;
}

std::string GgufFile::architecture() const
{
    const auto* v = find("general.architecture");
    return v && v->string() ? *v->string() : std::string();
}

Result<GgufFile> GgufFile::open(const std::filesystem::path& path)
{
    return mapAndParse<GgufFile>(path);
}

Result<GgufFile> GgufFile::parse(const std::filesystem::path& path, const std::byte* data, std::uint64_t fileBytes)
{
    GgufFile result;
    try {
        Cursor in(data, fileBytes);
        const auto magic = in.read<std::uint32_t>("magic");
        if (magic != kMagic)
            throw ParseError{ErrorCode::InvalidFormat, "not a GGUF file (bad magic)"};
        result.version = in.read<std::uint32_t>("version");
        if ((result.version & 0xFFFF) == 0 && result.version != 0)
            throw ParseError{ErrorCode::Unsupported, "big-endian GGUF files are not supported; convert it on a little-endian machine"};
        if (result.version < 2 || result.version > 3)
            throw ParseError{
                ErrorCode::Unsupported, "GGUF version " + std::to_string(result.version) + " is not supported (only v2 and v3)"};
        const auto tensorCount = in.read<std::uint64_t>("tensor count");
        const auto kvCount = in.read<std::uint64_t>("metadata count");
        // Smallest possible records: a KV is 8 (key length) + 4 (type) + 1; a tensor info is
        // 8 (name length) + 4 (dims) + 4 (type) + 8 (offset).
        if (kvCount > in.remaining() / 13)
            throw ParseError{
                ErrorCode::InvalidFormat, "header claims " + std::to_string(kvCount) + " metadata entries, more than the file can hold"};
        if (tensorCount > in.remaining() / 24)
            throw ParseError{
                ErrorCode::InvalidFormat, "header claims " + std::to_string(tensorCount) + " tensors, more than the file can hold"};

        std::unordered_set<std::string> keys;
        std::uint64_t values = 0;
        result.metadata.reserve(kvCount);
        for (std::uint64_t i = 0; i < kvCount; ++i) {
            auto key = in.readString("metadata key");
            if (key.empty())
                throw ParseError{ErrorCode::InvalidFormat, "metadata entry " + std::to_string(i) + " has an empty key"};
            if (!keys.insert(key).second)
                throw ParseError{ErrorCode::InvalidFormat, "metadata key '" + key + "' appears twice"};
            const auto type = checkType(in.read<std::uint32_t>("value type"), key);
            auto value = readValue(in, type, key, 0, values);
            if (key == "general.alignment") {
                if (type != GgufValueType::U32)
                    throw ParseError{ErrorCode::InvalidFormat, "general.alignment is not a u32"};
                const auto a = std::get<std::uint64_t>(value.value);
                if (a == 0 || (a & (a - 1)) != 0)
                    throw ParseError{ErrorCode::InvalidFormat, "general.alignment " + std::to_string(a) + " is not a power of two"};
                result.alignment = static_cast<std::uint32_t>(a);
            }
            result.metadata.push_back({std::move(key), std::move(value)});
        }

        std::unordered_set<std::string> names;
        result.tensors.reserve(tensorCount);
        std::vector<std::uint64_t> relativeOffsets;
        relativeOffsets.reserve(tensorCount);
        for (std::uint64_t i = 0; i < tensorCount; ++i) {
            TensorInfo info;
            info.name = in.readString("tensor name");
            if (!names.insert(info.name).second)
                throw ParseError{ErrorCode::InvalidFormat, "tensor '" + info.name + "' appears twice"};
            const auto nDims = in.read<std::uint32_t>("tensor dims");
            if (nDims > kGgufMaxDims)
                throw ParseError{
                    ErrorCode::Unsupported, "tensor '" + info.name + "' has " + std::to_string(nDims) + " dims (at most 5 supported)"};
            std::vector<std::uint64_t> ne(nDims);
            std::uint64_t numel = 1;
            for (auto& d : ne) {
                d = in.read<std::uint64_t>("tensor dim");
                if (d > static_cast<std::uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, d, &numel)
                    || numel > static_cast<std::uint64_t>(INT64_MAX))
                    throw ParseError{ErrorCode::InvalidFormat, "tensor '" + info.name + "' has dims whose element count overflows"};
            }
            const auto typeId = in.read<std::uint32_t>("tensor type");
            const auto* typeInfo = ggmlTypeInfo(typeId);
            if (!typeInfo)
                throw ParseError{ErrorCode::Unsupported, "tensor '" + info.name + "' has unknown ggml type id " + std::to_string(typeId)};
            if (nDims > 0 && ne[0] % typeInfo->blockElements != 0)
                throw ParseError{ErrorCode::InvalidFormat,
                    "tensor '" + info.name + "' has a row of " + std::to_string(ne[0]) + " elements, not a multiple of the "
                        + std::string(typeInfo->name) + " block size " + std::to_string(typeInfo->blockElements)};
            std::uint64_t bytes = 0;
            if (__builtin_mul_overflow(numel / typeInfo->blockElements, std::uint64_t{typeInfo->blockBytes}, &bytes))
                throw ParseError{ErrorCode::InvalidFormat, "tensor '" + info.name + "' has a byte size that overflows"};
            const auto offset = in.read<std::uint64_t>("tensor offset");
            if (offset % result.alignment != 0)
                throw ParseError{ErrorCode::InvalidFormat,
                    "tensor '" + info.name + "' offset " + std::to_string(offset) + " is not aligned to "
                        + std::to_string(result.alignment)};
            for (auto it = ne.rbegin(); it != ne.rend(); ++it)
                info.shape.push_back(static_cast<std::int64_t>(*it));
            info.ggmlType = typeInfo->type;
            switch (typeInfo->type) {
            case GgmlType::F32: info.dtype = DType::F32; break;
            case GgmlType::F16: info.dtype = DType::F16; break;
            case GgmlType::BF16: info.dtype = DType::BF16; break;
            case GgmlType::F64: info.dtype = DType::F64; break;
            case GgmlType::I8: info.dtype = DType::I8; break;
            case GgmlType::I16: info.dtype = DType::I16; break;
            case GgmlType::I32: info.dtype = DType::I32; break;
            case GgmlType::I64: info.dtype = DType::I64; break;
            default: break;
            }
            info.bytes = bytes;
            relativeOffsets.push_back(offset);
            result.tensors.push_back(std::move(info));
        }

        const std::uint64_t a = result.alignment;
        const std::uint64_t infosEnd = in.pos();
        result.dataOffset = infosEnd + (a - infosEnd % a) % a;
        if (tensorCount > 0 && result.dataOffset > fileBytes)
            throw ParseError{ErrorCode::Truncated, "file ends before its tensor data begins (truncated download?)"};
        const std::uint64_t dataBytes = tensorCount > 0 ? fileBytes - result.dataOffset : 0;

        std::vector<std::size_t> order(result.tensors.size());
        for (std::size_t i = 0; i < order.size(); ++i)
            order[i] = i;
        std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return relativeOffsets[x] < relativeOffsets[y]; });
        std::uint64_t previousEnd = 0;
        const TensorInfo* previous = nullptr;
        for (auto i : order) {
            auto& info = result.tensors[i];
            const auto begin = relativeOffsets[i];
            if (begin > dataBytes || info.bytes > dataBytes - begin)
                throw ParseError{ErrorCode::Truncated,
                    "tensor '" + info.name + "' needs bytes up to " + std::to_string(begin + info.bytes) + " of a "
                        + std::to_string(dataBytes) + "-byte data section (truncated download?)"};
            if (previous && begin < previousEnd)
                throw ParseError{ErrorCode::InvalidFormat, "tensor '" + info.name + "' overlaps tensor '" + previous->name + "'"};
            previousEnd = begin + info.bytes;
            previous = &info;
            info.offset = result.dataOffset + begin;
        }
    } catch (const ParseError& e) {
        return makeError(e.code, fileError(path, e.message));
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, fileError(path, "out of memory while reading the GGUF header"));
    }
    return result;
}

}  // namespace vireo::tensorfile
