#include "inference/quant/quantizer.h"

#include <ATen/ATen.h>

namespace vireo::quant {

std::string QuantizeReport::summary() const
{
    return std::to_string(quantized.size()) + " quantized, " + std::to_string(skipped.size()) + " skipped, " + std::to_string(failed.size())
        + " failed; " + std::to_string(bytesBefore) + " -> " + std::to_string(bytesAfter) + " bytes";
}

Result<QuantizeReport> quantizeWeights(
    std::vector<std::pair<std::string, QuantizedWeight>>& weights, const QuantizeRecipe& recipe, bool allowFailures)
{
    if (recipe.target != Representation::Int8)
        return makeError(ErrorCode::Unsupported,
            "quantize-on-load to " + std::string(representationName(recipe.target)) + " is not supported (int8 is)");
    for (const auto& [name, w] : weights)
        if (w.representation() != Representation::Dense && w.representation() != recipe.target)
            return makeError(ErrorCode::InvalidArgument,
                "'" + name + "' is already " + w.describe() + "; re-quantizing it to " + std::string(representationName(recipe.target))
                    + " would lose precision twice. Nothing was changed.");

    QuantizeReport report;
    std::vector<std::pair<std::size_t, QuantizedWeight>> replacements;
    for (std::size_t i = 0; i < weights.size(); ++i) {
        const auto& [name, w] = weights[i];
        report.bytesBefore += w.residentBytes();
        if (w.representation() == recipe.target) {
            report.skipped.emplace_back(name, "already " + w.describe());
            continue;
        }
        const auto& data = w.data();
        std::int64_t numel = 1;
        for (auto d : w.shape())
            numel *= d;
        if (w.shape().size() < 2) {
            report.skipped.emplace_back(name, std::to_string(w.shape().size()) + "-D (biases and norms stay dense)");
            continue;
        }
        if (!at::isFloatingType(data.scalar_type())) {
            report.skipped.emplace_back(name, std::string("not floating point (") + c10::toString(data.scalar_type()) + ")");
            continue;
        }
        if (numel < recipe.minElements) {
            report.skipped.emplace_back(
                name, std::to_string(numel) + " elements, under the " + std::to_string(recipe.minElements) + "-element threshold");
            continue;
        }
        auto q = QuantizedWeight::quantizeInt8(data);
        if (!q) {
            report.failed.emplace_back(name, q.error().message);
            continue;
        }
        replacements.emplace_back(i, std::move(*q));
    }
    if (!report.failed.empty() && !allowFailures)
        return makeError(ErrorCode::InvalidArgument,
            std::to_string(report.failed.size()) + " weights could not be quantized, first '" + report.failed.front().first
                + "': " + report.failed.front().second + ". Nothing was changed.");
    for (auto& [i, q] : replacements) {
        report.quantized.push_back(weights[i].first);
        weights[i].second = std::move(q);
    }
    for (const auto& [name, w] : weights)
        report.bytesAfter += w.residentBytes();
    return report;
}

}  // namespace vireo::quant
