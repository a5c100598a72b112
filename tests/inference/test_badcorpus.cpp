// Malformed files (tests/corpus/bad, written by tests/fixtures/make_bad_corpus.py) must give
// one clear error naming the file, never a crash; and no prefix of a valid file is taken as
// complete. Run under ASan/UBSan by the sanitizer build.
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/tensorfile/gguf.h"
#include "inference/tensorfile/modelsource.h"
#include "inference/tensorfile/safetensors.h"

#include <nlohmann/json.hpp>

#include <random>

using namespace vireo;
using namespace vireo::tensorfile;

namespace {

std::filesystem::path corpusDir()
{
    return test::sourceDir() / "tests" / "corpus" / "bad";
}

bool isGguf(const std::filesystem::path& p)
{
    return p.extension() == ".gguf";
}

// Parses from an exact-size heap copy so any read past the end is a sanitizer error.
Result<std::uint64_t> parseCopy(const std::filesystem::path& path, const std::vector<std::byte>& bytes, std::size_t length)
{
    std::vector<std::byte> copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(length));
    if (isGguf(path)) {
        auto r = GgufFile::parse(path, copy.data(), copy.size());
        if (!r)
            return r.error();
        std::uint64_t end = 0;
        for (const auto& t : r->tensors)
            end = std::max(end, t.offset + t.bytes);
        return end;
    }
    auto r = SafetensorsFile::parse(path, copy.data(), copy.size());
    if (!r)
        return r.error();
    return r->dataOffset;
}

}  // namespace

VT_TEST(everyBadFileIsRejectedWithItsReason)
{
    const auto manifest = nlohmann::json::parse(test::readText(corpusDir() / "manifest.json"));
    VT_CHECK(manifest.size() >= 30);
    for (const auto& entry : manifest) {
        const auto path = corpusDir() / entry["file"].get<std::string>();
        const auto expect = entry["expect"].get<std::string>();
        std::string message;
        if (isGguf(path)) {
            auto r = GgufFile::open(path);
            VT_CHECK_MSG(!r.ok(), path << " was accepted (" << entry["why"] << ")");
            message = r.error().message;
        } else {
            auto r = SafetensorsFile::open(path);
            VT_CHECK_MSG(!r.ok(), path << " was accepted (" << entry["why"] << ")");
            message = r.error().message;
        }
        VT_CHECK_MSG(message.rfind(path.string() + ": ", 0) == 0, "error does not start with the file name: " << message);
        VT_CHECK_MSG(message.find(expect) != std::string::npos, path.filename() << ": expected '" << expect << "' in: " << message);
        VT_CHECK_MSG(message.find('\n') == std::string::npos, "error is not one line: " << message);
        auto viaFacade = ModelSource::open(path);
        VT_CHECK(!viaFacade.ok());
        VT_COMPARE(viaFacade.error().message, message);
    }
}

VT_TEST(noPrefixOfAValidFileIsAccepted)
{
    for (const char* name : {"st_all_dtypes.safetensors", "gguf_v3_align64.gguf", "gguf_v2.gguf", "gguf_v3_all_types.gguf"}) {
        const auto path = test::fixturesDir() / name;
        const auto bytes = test::readAll(path);
        auto full = parseCopy(path, bytes, bytes.size());
        VT_CHECK_MSG(full.ok(), (full.ok() ? "" : full.error().message));
        // Safetensors data must end exactly at the end of the file; a GGUF may carry padding
        // after its last tensor, so only cuts into tensor data must fail.
        const std::size_t mustFailBelow = isGguf(path) ? static_cast<std::size_t>(*full) : bytes.size();
        std::size_t tried = 0;
        for (std::size_t length = 0; length < mustFailBelow; length += (length < 8192 ? 1 : 997)) {
            auto r = parseCopy(path, bytes, length);
            VT_CHECK_MSG(!r.ok(), name << " cut to " << length << " bytes was accepted");
            ++tried;
        }
        std::printf("   %s: %zu truncations rejected\n", name, tried);
    }
}

VT_TEST(corruptedHeadersNeverCrash)
{
    std::mt19937_64 rng(1234);
    std::size_t rejected = 0, accepted = 0;
    for (const char* name : {"st_all_dtypes.safetensors", "gguf_v3_all_types.gguf"}) {
        const auto path = test::fixturesDir() / name;
        auto bytes = test::readAll(path);
        const std::size_t headerEnd = std::min<std::size_t>(bytes.size(), 4096);
        for (int i = 0; i < 3000; ++i) {
            auto mutated = bytes;
            const int flips = 1 + static_cast<int>(rng() % 4);
            for (int f = 0; f < flips; ++f)
                mutated[rng() % headerEnd] = static_cast<std::byte>(rng() & 0xFF);
            auto r = parseCopy(path, mutated, mutated.size());
            (r.ok() ? accepted : rejected)++;
            if (!r.ok())
                VT_CHECK(r.error().message.rfind(path.string(), 0) == 0);
        }
    }
    std::printf("   mutated headers: %zu rejected, %zu still valid\n", rejected, accepted);
    VT_CHECK(rejected > 0);
}

VT_MAIN("TestBadCorpus")
