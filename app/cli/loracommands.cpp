// vireo-cli lora inspect: the match report of a LoRA against a model before anything is
// applied.
#include "app/cli/loracommands.h"

#include "inference/facade/generator.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <unistd.h>

namespace {

int loraUsage(const std::string& message)
{
    std::fprintf(stderr,
        "vireo-cli lora: %s\n"
        "usage: vireo-cli lora inspect FILE --model PATH [--model PATH ...] [--json]\n"
        "  Matches a LoRA against the model's transformer from headers (nothing is loaded): every module\n"
        "  matched or unmatched (and why), what is refused, rank and alpha, the status it would have.\n",
        message.c_str());
    return 2;
}

}  // namespace

int runLora(const std::vector<std::string>& args)
{
    if (args.empty() || args[0] != "inspect")
        return loraUsage("the command is 'lora inspect'");
    std::filesystem::path file;
    vireo::facade::LoadPlan plan;
    bool asJson = false;
    for (std::size_t i = 1; i < args.size(); ++i) {
        const auto& a = args[i];
        if (a == "--json")
            asJson = true;
        else if (a == "--model" && i + 1 < args.size())
            plan.modelPaths.emplace_back(args[++i]);
        else if (!a.empty() && a[0] != '-' && file.empty())
            file = a;
        else
            return loraUsage("unexpected argument " + a);
    }
    if (file.empty() || plan.modelPaths.empty())
        return loraUsage("a LoRA FILE and --model are required");
    for (const auto& p : plan.modelPaths)
        if (::access(p.c_str(), F_OK) != 0) {
            std::fprintf(stderr, "vireo-cli: %s: no such file or folder\n", p.c_str());
            return 1;
        }
    auto report = vireo::facade::Generator::inspectLora(plan, file, asJson);
    if (!report) {
        std::fprintf(stderr, "vireo-cli: %s\n", report.error().message.c_str());
        return 1;
    }
    std::fputs((*report + (asJson ? "\n" : "")).c_str(), stdout);
    // A LoRA that cannot be applied at all is a failure a script can see.
    if (asJson)
        return nlohmann::json::parse(*report, nullptr, false).value("matched", 0) > 0 ? 0 : 1;
    return report->find("\n  refused: ") == std::string::npos ? 0 : 1;
}
