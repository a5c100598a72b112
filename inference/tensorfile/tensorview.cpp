#include "inference/tensorfile/tensorview.h"

#include "inference/util/device.h"

#include <ATen/ATen.h>

#include <sys/mman.h>

namespace vireo::tensorfile {

namespace {

std::vector<std::int64_t> contiguousStrides(const std::vector<std::int64_t>& shape)
{
    std::vector<std::int64_t> strides(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;)
        strides[i - 1] = strides[i] * std::max<std::int64_t>(shape[i], 1);
    return strides;
}

Error tensorError(const Checkpoint& cp, const TensorInfo& info, ErrorCode code, const std::string& what)
{
    return makeError(code, fileError(cp.fileOf(info)->path(), "tensor '" + info.name + "': " + what));
}

at::Tensor wrap(
    const std::shared_ptr<const MappedFile>& file, std::uint64_t offset, const std::vector<std::int64_t>& shape, c10::ScalarType type)
{
    auto keepAlive = file;
    // The mapping is read-only; from_blob needs a non-const pointer but nothing writes.
    void* ptr = const_cast<std::byte*>(file->data() + offset);
    return at::from_blob(
        ptr, shape, contiguousStrides(shape), [keepAlive](void*) {}, at::TensorOptions().dtype(type).device(c10::kCPU));
}

constexpr std::uint64_t kHugeAllocationBytes = 8ull << 20;

}  // namespace

// Weights are large and long-lived: give big ones their own mapping with transparent huge
// pages, which cuts first-touch page faults 512-fold (they dominate a warm-cache read).
at::Tensor emptyHost(const std::vector<std::int64_t>& shape, c10::ScalarType type)
{
    std::uint64_t bytes = c10::elementSize(type);
    for (auto d : shape)
        bytes *= static_cast<std::uint64_t>(d);
    if (bytes < kHugeAllocationBytes)
        return at::empty(shape, at::TensorOptions().dtype(type));
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    ::madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return at::from_blob(
        p, shape, contiguousStrides(shape), [bytes](void* ptr) { ::munmap(ptr, bytes); }, at::TensorOptions().dtype(type));
}

std::optional<c10::ScalarType> scalarTypeFor(DType type)
{
    switch (type) {
    case DType::Bool: return c10::kBool;
    case DType::U8: return c10::kByte;
    case DType::I8: return c10::kChar;
    case DType::U16: return c10::kUInt16;
    case DType::I16: return c10::kShort;
    case DType::F16: return c10::kHalf;
    case DType::BF16: return c10::kBFloat16;
    case DType::U32: return c10::kUInt32;
    case DType::I32: return c10::kInt;
    case DType::F32: return c10::kFloat;
    case DType::U64: return c10::kUInt64;
    case DType::I64: return c10::kLong;
    case DType::F64: return c10::kDouble;
    case DType::C64: return c10::kComplexFloat;
    case DType::F8_E4M3: return c10::kFloat8_e4m3fn;
    case DType::F8_E5M2: return c10::kFloat8_e5m2;
    case DType::F8_E8M0: return c10::kFloat8_e8m0fnu;
    case DType::F8_E4M3FNUZ: return c10::kFloat8_e4m3fnuz;
    case DType::F8_E5M2FNUZ: return c10::kFloat8_e5m2fnuz;
    case DType::F4:
    case DType::F6_E2M3:
    case DType::F6_E3M2: return std::nullopt;
    }
    return std::nullopt;
}

Result<at::Tensor> rawBytes(const Checkpoint& checkpoint, const TensorInfo& info)
{
    try {
        return wrap(checkpoint.fileOf(info), info.offset, {static_cast<std::int64_t>(info.bytes)}, c10::kByte);
    } catch (const c10::Error& e) {
        return tensorError(checkpoint, info, errorFromException(e, "reading", ErrorCode::Internal).code, e.what_without_backtrace());
    }
}

Result<at::Tensor> viewTensor(const Checkpoint& checkpoint, const TensorInfo& info)
{
    if (info.isQuantizedBlocks())
        return rawBytes(checkpoint, info);
    const auto type = info.dtype ? scalarTypeFor(*info.dtype) : std::nullopt;
    if (!type)
        return tensorError(
            checkpoint, info, ErrorCode::Unsupported, "type " + info.typeName() + " has no PyTorch element type; read it as raw bytes");
    const auto elementBytes = c10::elementSize(*type);
    if (info.offset % elementBytes != 0)
        return tensorError(
            checkpoint, info, ErrorCode::Unsupported, "data is not aligned to its element size; use readTensor (copies) instead of a view");
    try {
        return wrap(checkpoint.fileOf(info), info.offset, info.shape, *type);
    } catch (const c10::Error& e) {
        return tensorError(checkpoint, info, errorFromException(e, "reading", ErrorCode::Internal).code, e.what_without_backtrace());
    }
}

Result<at::Tensor> readTensor(const Checkpoint& checkpoint, const TensorInfo& info, const ReadOptions& options)
{
    if (info.isQuantizedBlocks()) {
        if (options.dtype && *options.dtype != c10::kByte)
            return tensorError(checkpoint, info, ErrorCode::Unsupported,
                info.typeName() + " blocks need dequantization to become " + std::string(c10::toString(*options.dtype)));
    }
    const auto stored = info.isQuantizedBlocks() ? std::optional<c10::ScalarType>(c10::kByte)
        : info.dtype                             ? scalarTypeFor(*info.dtype)
                                                 : std::nullopt;
    if (!stored)
        return tensorError(checkpoint, info, ErrorCode::Unsupported, "type " + info.typeName() + " has no PyTorch element type");
    const auto shape = info.isQuantizedBlocks() ? std::vector<std::int64_t>{static_cast<std::int64_t>(info.bytes)} : info.shape;
    const auto target = options.dtype.value_or(*stored);
    const auto& file = checkpoint.fileOf(info);
    try {
        const auto elementBytes = static_cast<std::uint64_t>(c10::elementSize(*stored));
        auto out =
            options.device.is_cpu() ? emptyHost(shape, target) : at::empty(shape, at::TensorOptions().dtype(target).device(options.device));
        if (info.bytes == 0)
            return out;
        const auto elementsPerChunk = std::max<std::uint64_t>(1, options.chunkBytes / elementBytes);
        const auto total = info.bytes / elementBytes;
        if (target == *stored && options.device.is_cpu()) {
            // Same bytes on the host: read straight into the destination.
            auto* dst = static_cast<std::byte*>(out.data_ptr());
            for (std::uint64_t done = 0; done < total; done += elementsPerChunk) {
                const auto n = std::min(elementsPerChunk, total - done);
                auto r = file->readAt(info.offset + done * elementBytes, dst + done * elementBytes, n * elementBytes);
                if (!r)
                    return r.error();
            }
            return out;
        }
        auto flat = out.view({-1});
        const bool aligned = info.offset % elementBytes == 0;
        at::Tensor staging;
        for (std::uint64_t done = 0; done < total; done += elementsPerChunk) {
            const auto n = std::min(elementsPerChunk, total - done);
            at::Tensor src;
            if (aligned) {
                src = wrap(file, info.offset + done * elementBytes, {static_cast<std::int64_t>(n)}, *stored);
            } else {
                if (!staging.defined())
                    staging = at::empty({static_cast<std::int64_t>(std::min(elementsPerChunk, total))}, at::TensorOptions().dtype(*stored));
                src = staging.narrow(0, 0, static_cast<std::int64_t>(n));
                auto r = file->readAt(info.offset + done * elementBytes, src.data_ptr(), n * elementBytes);
                if (!r)
                    return r.error();
            }
            flat.narrow(0, static_cast<std::int64_t>(done), static_cast<std::int64_t>(n)).copy_(src);
        }
        return out;
    } catch (const c10::Error& e) {
        return tensorError(checkpoint, info, errorFromException(e, "reading", ErrorCode::Internal).code, e.what_without_backtrace());
    } catch (const std::bad_alloc&) {
        return tensorError(checkpoint, info, ErrorCode::OutOfMemory, "not enough memory to read it");
    }
}

}  // namespace vireo::tensorfile
