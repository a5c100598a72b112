#pragma once

#include "inference/quant/quantizedweight.h"
#include "inference/util/result.h"

#include <string>
#include <utility>
#include <vector>

namespace vireo::quant {

struct QuantizeRecipe {
    Representation target = Representation::Int8;
    std::int64_t minElements = 4096;  // smaller weights stay dense (norms, biases, tiny linears)
};

struct QuantizeReport {
    std::vector<std::string> quantized;
    std::vector<std::pair<std::string, std::string>> skipped;  // name, why
    std::vector<std::pair<std::string, std::string>> failed;  // name, why
    std::int64_t bytesBefore = 0;
    std::int64_t bytesAfter = 0;
    std::string summary() const;
};

// Quantizes a model's weights on load. Nothing is left unquantized silently: every weight
// is either quantized, or skipped or failed with the reason in the report. A failure fails
// the whole call (leaving every weight unchanged) unless allowFailures. Weights already in
// the target representation are skipped as no-ops; weights in another quantized
// representation are an error before anything is modified.
Result<QuantizeReport> quantizeWeights(
    std::vector<std::pair<std::string, QuantizedWeight>>& weights, const QuantizeRecipe& recipe, bool allowFailures = false);

}  // namespace vireo::quant
