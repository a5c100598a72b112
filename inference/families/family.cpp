#include "inference/families/family.h"

namespace vireo::families {

Result<facade::VideoResult> LoadedModel::generate(const facade::GenerateRequest&, const facade::ProgressFn&, std::stop_token)
{
    return makeError(ErrorCode::InvalidArgument, "the loaded model makes images; generateImage() makes them");
}

Result<facade::ImageResult> LoadedModel::generateImage(const facade::GenerateRequest&, const facade::ProgressFn&, std::stop_token)
{
    return makeError(ErrorCode::InvalidArgument, "the loaded model makes videos; generate() makes them");
}

Result<std::vector<facade::LoraOutcome>> LoadedModel::applyLoras(const std::vector<facade::LoraRequest>&)
{
    return makeError(ErrorCode::Unsupported, "this model takes no LoRAs yet");
}

Result<facade::StagePlan> ModelFamily::planStages(const facade::LoadPlan&, const facade::GenerateRequest& request) const
{
    if (request.stages != "auto" && request.stages != "single" && request.stages != "two")
        return makeError(ErrorCode::InvalidArgument, "stages \"" + request.stages + "\": use auto, single or two");
    facade::StagePlan out;
    out.firstWidth = request.width;
    out.firstHeight = request.height;
    const auto why = (rules().kind == facade::ModelKind::Image ? std::string("image models") : rules().title) + " have one stage";
    if (request.stages == "two")
        return makeError(ErrorCode::InvalidArgument, "the two-stage path cannot run: " + why);
    out.reason = request.stages == "single" ? "single stage, as asked" : "single stage: " + why;
    return out;
}

Result<std::string> ModelFamily::inspectLora(const facade::LoadPlan&, const std::filesystem::path&, bool) const
{
    return makeError(ErrorCode::Unsupported, "LoRAs are not supported for " + rules().title + " yet");
}

}  // namespace vireo::families
