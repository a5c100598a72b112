// Reads every fixture written by tests/fixtures/make_tensor_fixtures.py with the real
// safetensors, torch and gguf packages, and checks names, types, shapes, metadata and every
// byte against the reference.
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/tensorfile/modelsource.h"
#include "inference/tensorfile/tensorview.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <set>

using namespace vireo;
using namespace vireo::tensorfile;
using nlohmann::json;

namespace {

json ggufJson(const GgufValue& v)
{
    return std::visit(
        [](const auto& x) -> json {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::vector<GgufValue>>) {
                json arr = json::array();
                for (const auto& item : x)
                    arr.push_back(ggufJson(item));
                return arr;
            } else {
                return x;
            }
        },
        v.value);
}

std::string shapeString(const std::vector<std::int64_t>& shape)
{
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i)
        s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
}

bool sameBytes(const at::Tensor& t, const std::byte* expected, std::uint64_t n)
{
    const auto c = t.contiguous();
    return static_cast<std::uint64_t>(c.nbytes()) == n && (n == 0 || std::memcmp(c.data_ptr(), expected, n) == 0);
}

void checkFile(const json& entry, const std::vector<std::byte>& expected)
{
    const auto path = test::fixturesDir() / entry["path"].get<std::string>();
    auto source = ModelSource::open(path);
    VT_CHECK_MSG(source.ok(), (source.ok() ? "" : source.error().message));
    VT_COMPARE(source->checkpoints.size(), std::size_t{1});
    const auto& cp = source->checkpoints.front();
    const auto& tensors = entry["tensors"];
    VT_COMPARE(cp.tensors.size(), tensors.size());

    for (const auto& t : tensors) {
        const auto name = t["name"].get<std::string>();
        const auto* info = cp.find(name);
        VT_CHECK_MSG(info, path << ": tensor " << name << " not found");
        VT_COMPARE(info->typeName(), t["type"].get<std::string>());
        VT_COMPARE(shapeString(info->shape), shapeString(t["shape"].get<std::vector<std::int64_t>>()));
        const auto nbytes = t["nbytes"].get<std::uint64_t>();
        VT_COMPARE(info->bytes, nbytes);
        const auto* want = expected.data() + t["expected_offset"].get<std::uint64_t>();

        auto raw = rawBytes(cp, *info);
        VT_CHECK(raw.ok());
        VT_CHECK_MSG(sameBytes(*raw, want, nbytes), name << ": raw bytes differ");

        const bool torchType = info->isQuantizedBlocks() || (info->dtype && scalarTypeFor(*info->dtype));
        if (!torchType) {
            VT_CHECK_MSG(!viewTensor(cp, *info).ok(), name << ": a sub-byte type must not become a typed view");
            continue;
        }
        auto view = viewTensor(cp, *info);
        VT_CHECK_MSG(view.ok(), (view.ok() ? "" : view.error().message));
        VT_CHECK_MSG(sameBytes(*view, want, nbytes), name << ": view bytes differ");
        if (!info->isQuantizedBlocks())
            VT_COMPARE(shapeString(view->sizes().vec()), shapeString(info->shape));

        auto copy = readTensor(cp, *info);
        VT_CHECK_MSG(copy.ok(), (copy.ok() ? "" : copy.error().message));
        VT_CHECK_MSG(sameBytes(*copy, want, nbytes), name << ": readTensor bytes differ");
        VT_CHECK(nbytes == 0 || copy->data_ptr() != view->data_ptr());

        // Tiny chunks exercise the chunk loop boundaries.
        ReadOptions small;
        small.chunkBytes = 24;
        auto chunked = readTensor(cp, *info, small);
        VT_CHECK(chunked.ok());
        VT_CHECK_MSG(sameBytes(*chunked, want, nbytes), name << ": chunked readTensor bytes differ");

        if (info->dtype && (*info->dtype == DType::F16 || *info->dtype == DType::BF16 || *info->dtype == DType::F8_E4M3)) {
            ReadOptions widen;
            widen.dtype = at::kFloat;
            widen.chunkBytes = 16;
            auto wide = readTensor(cp, *info, widen);
            VT_CHECK(wide.ok());
            VT_CHECK_MSG(at::equal(*wide, view->to(at::kFloat)), name << ": converted read differs from the view");
        }
    }

    if (entry["format"] == "safetensors") {
        for (const auto& [k, v] : entry["metadata"].items()) {
            const auto it = cp.metadata.find(k);
            VT_CHECK_MSG(it != cp.metadata.end(), path << ": metadata key " << k << " missing");
            VT_COMPARE(it->second, v.get<std::string>());
        }
    } else {
        VT_COMPARE(cp.ggufVersion, entry["version"].get<std::uint32_t>());
        VT_COMPARE(cp.ggufAlignment, entry["alignment"].get<std::uint32_t>());
        for (const auto& [k, v] : entry["metadata"].items()) {
            const GgufValue* found = nullptr;
            for (const auto& kv : cp.ggufMetadata)
                if (kv.key == k)
                    found = &kv.value;
            VT_CHECK_MSG(found, path << ": GGUF key " << k << " missing");
            VT_COMPARE(std::string(ggufValueTypeName(found->type)), v["type"].get<std::string>());
            VT_COMPARE(ggufJson(*found).dump(), v["value"].dump());
        }
    }
}

json manifest()
{
    return json::parse(test::readText(test::fixturesDir() / "manifest.json"));
}

}  // namespace

VT_TEST(everyFixtureReadsBitExactly)
{
    const auto m = manifest();
    const auto expected = test::readAll(test::fixturesDir() / "expected.bin");
    std::size_t files = 0;
    for (const auto& list : {m["files"], m.value("extra_files", json::array())})
        for (const auto& entry : list) {
            checkFile(entry, expected);
            ++files;
        }
    VT_CHECK(files >= 6);
    std::printf("   checked %zu fixture files\n", files);
}

VT_TEST(allGgmlTypesArePresent)
{
    std::set<std::string> types;
    const auto m = manifest();
    for (const auto& entry : m["files"])
        if (entry["format"] == "gguf")
            for (const auto& t : entry["tensors"])
                types.insert(t["type"].get<std::string>());
    for (const char* want : {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"})
        VT_CHECK_MSG(types.count(want), "fixtures lack a " << want << " tensor");
}

VT_TEST(viewsOutliveTheirSource)
{
    at::Tensor kept, copy;
    {
        auto source = ModelSource::open(test::fixturesDir() / "st_all_dtypes.safetensors");
        VT_CHECK(source.ok());
        const auto& cp = source->checkpoints.front();
        const TensorInfo* f32 = nullptr;
        for (const auto& t : cp.tensors)
            if (t.dtype == DType::F32 && t.numel() > 4)
                f32 = &t;
        VT_CHECK(f32);
        auto view = viewTensor(cp, *f32);
        VT_CHECK(view.ok());
        kept = *view;
        copy = view->clone();
    }
    // The ModelSource is gone; the mapping must live on through the tensor's own reference.
    VT_CHECK(at::equal(kept, copy));
}

VT_TEST(shardedSetUsesTheIndex)
{
    auto source = ModelSource::open(test::fixturesDir() / "sharded");
    VT_CHECK_MSG(source.ok(), (source.ok() ? "" : source.error().message));
    VT_COMPARE(std::string(sourceKindName(source->kind)), std::string("safetensors-sharded"));
    const auto& cp = source->checkpoints.front();
    VT_CHECK(cp.files.size() >= 3);
    std::set<std::uint32_t> used;
    for (const auto& t : cp.tensors)
        used.insert(t.fileIndex);
    VT_COMPARE(used.size(), cp.files.size());
}

VT_MAIN("TestTensorFiles")
