// Recognition from headers alone, on tiny checkpoints in every layout users meet (written
// by tests/fixtures/make_model_fixtures.py from the diffusers modules' real key names).
#include "tests/harness/vireotest.h"
#include "tests/inference/fixtures.h"

#include "inference/inspect/modelinspector.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <tuple>

using namespace vireo;
using nlohmann::json;

namespace {

json nullable(const std::string& s)
{
    return s.empty() ? json(nullptr) : json(s);
}

std::string joined(std::vector<std::string> v)
{
    std::sort(v.begin(), v.end());
    std::string s;
    for (const auto& x : v)
        s += (s.empty() ? "" : ",") + x;
    return s;
}

}  // namespace

VT_TEST(everyFixtureIsRecognized)
{
    const auto expected = json::parse(test::readText(test::fixturesDir() / "expected.json"));
    VT_CHECK(expected.size() >= 10);
    for (const auto& e : expected) {
        const auto path = test::fixturesDir() / e["path"].get<std::string>();
        auto report = inspect::inspectPath(path);
        VT_CHECK_MSG(report.ok(), (report.ok() ? "" : report.error().message));
        const auto& r = *report;
        const auto where = e["path"].get<std::string>() + ": ";
        VT_CHECK_MSG(r.family == e["family"], where << "family " << r.family << " != " << e["family"]);
        VT_CHECK_MSG(nullable(r.version) == e["version"], where << "version " << r.version << " != " << e["version"]);
        VT_CHECK_MSG(
            r.quantization.scheme == e["quantization"], where << "quantization " << r.quantization.scheme << " != " << e["quantization"]);
        VT_CHECK_MSG(nullable(r.quantization.fp8Granularity) == e["fp8_granularity"],
            where << "fp8 granularity " << r.quantization.fp8Granularity << " != " << e["fp8_granularity"]);
        const json inputScale = r.quantization.inputScale ? json(*r.quantization.inputScale) : json(nullptr);
        VT_CHECK_MSG(inputScale == e["input_scale"], where << "input_scale " << inputScale << " != " << e["input_scale"]);
        VT_CHECK_MSG(nullable(r.quantization.fp8Convention) == e["fp8_convention"],
            where << "fp8 convention " << r.quantization.fp8Convention << " != " << e["fp8_convention"]);
        VT_CHECK_MSG(joined(r.components) == joined(e["components"].get<std::vector<std::string>>()),
            where << "components " << joined(r.components) << " != " << e["components"]);
        VT_CHECK_MSG(nullable(r.attention) == e["attention"], where << "attention " << r.attention << " != " << e["attention"]);
        VT_CHECK_MSG(nullable(r.quantization.ggufArchitecture) == e["gguf_architecture"],
            where << "gguf architecture " << r.quantization.ggufArchitecture << " != " << e["gguf_architecture"]);
        VT_CHECK_MSG(r.warnings.empty(), where << "unexpected warning: " << (r.warnings.empty() ? "" : r.warnings.front()));

        // The JSON form carries the keys the CLI promises.
        const auto j = json::parse(inspect::toJson(r));
        for (const char* key : {"format", "tensors", "bytes", "dtypes", "family", "version", "quantization", "components", "files"})
            VT_CHECK_MSG(j.contains(key), where << "JSON lacks " << key);
        std::int64_t histogram = 0;
        for (const auto& [name, count] : j["dtypes"].items())
            histogram += count.get<std::int64_t>();
        VT_COMPARE(histogram, r.tensors);
    }
}

// Lightricks' latent upsampler files (tests/fixtures/make_ltx2_upsampler_fixtures.py): named for
// what they scale, from the shapes alone (also without the embedded config); the ones the
// two-stage path cannot use carry a warning.
VT_TEST(latentUpsamplersAreRecognizedWithTheirScale)
{
    const auto root = test::fixturesRoot() / "ltx2upsampler";
    for (const auto& [variant, kind, usable] : std::vector<std::tuple<std::string, std::string, bool>>{
             {"v20", "spatial x2 (rational resampler)", true}, {"v23", "spatial x2,", true}, {"x15", "spatial x1.5", false},
             {"x4", "spatial x4", false}, {"temporal", "temporal x2", false}, {"st", "spatial x2 + temporal x2", false}}) {
        for (const char* file : {"single.safetensors", "noconfig.safetensors"}) {
            const auto path = root / variant / file;
            auto report = inspect::inspectPath(path);
            VT_CHECK_MSG(report.ok(), (report.ok() ? "" : report.error().message));
            const auto where = variant + "/" + file + ": ";
            VT_CHECK_MSG(report->family == "ltx-2-upsampler", where << "family " << report->family);
            const auto fact = report->facts.count("Upsampler") ? report->facts.at("Upsampler") : std::string();
            VT_CHECK_MSG(fact.rfind(kind, 0) == 0, where << fact);
            VT_CHECK_MSG(report->warnings.empty() == usable, where << (report->warnings.empty() ? "no warning" : report->warnings.front()));
            VT_CHECK_MSG(inspect::toText(*report).find("LTX-2 latent upsampler") != std::string::npos, where << inspect::toText(*report));
        }
    }
}

VT_MAIN("TestInspect")
