#pragma once

// The one source of generation defaults: a catalog family's `defaults` with its variant's
// overrides (resources/catalog.json) fill a request's unset fields for the Generate page, the
// CLI and any later API alike.

#include "core/catalog/catalog.h"
#include "inference/facade/generator.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace vireo::runtime {

struct GenerationDefaults {
    std::int64_t width = 768, height = 512, frames = 121;
    double fps = 24.0;
    std::string schedule = "distilled";
    int steps = 8;
    double guidance = 1.0, audioGuidance = 1.0, guidanceRescale = 0.0;
    // Images: the guidance weight of each step when steps and guidance are the defaults
    // (Ideogram-4's 45 x 7.0 then 3 x 3.0); empty for video families.
    std::vector<double> guidanceSchedule;
    bool randomSeed = true;
    std::int64_t seed = 0;
    // The family's own controls (FamilyRules::knobs) the catalog's defaults set, by id.
    std::map<std::string, double> knobs;
    // The H.264 round trip of conditioning stills, as the family was trained (33; LTX-2.5: 18).
    int conditionCrf = 33;
    // Why these defaults, for a model outside the catalog ("LTX-2.0 dev defaults: the name
    // ltx-2-19b-dev.safetensors says dev"); empty for catalog variants.
    std::string basis;
};

// From a variant ("ltx-2.3/distilled-fp8"); a variant's pipeline "ltx2-dev" means the dev
// schedule. Fields of the wrong type are an error naming them.
Result<GenerationDefaults> defaultsForVariant(const catalog::Catalog& catalog, const std::string& familySlashVariant);
// For a model from outside the catalog: the family of its version ("2.0" -> ltx-2, "2.3" ->
// ltx-2.3, "4" -> ideogram-4), its distilled variant unless the schedule says dev.
Result<GenerationDefaults> defaultsForVersion(const catalog::Catalog& catalog, const std::string& version, const std::string& schedule);

// For a model from outside the catalog, from its own headers (Generator::readModelFacts, so the
// window and the CLI read the same facts): the family of its version, and the variant its files
// say it was trained for (dev or distilled) unless `schedule` chooses one; distilled when
// nothing says, and `basis` says so.
Result<GenerationDefaults> defaultsForModel(
    const catalog::Catalog& catalog, const facade::ModelFacts& facts, const std::string& schedule = {});

// A request with the defaults applied.
facade::GenerateRequest requestFrom(const GenerationDefaults& d);

}  // namespace vireo::runtime
