// vireo-cli: the headless front end. Parses arguments and wires the layers; the work lives
// in inference/ (and core/ for Hub commands).
#include "app/cli/args.h"
#include "app/cli/devicecommand.h"
#include "app/cli/ditcommands.h"
#include "app/cli/loracommands.h"
#include "base/envswitch.h"
#ifdef VIREO_HAS_CORE
#include <QCoreApplication>

#include "app/cli/batchcommand.h"
#include "app/cli/generatecommand.h"
#include "app/cli/remotecommand.h"
#include "app/cli/servecommand.h"
#endif
#include "inference/inspect/modelinspector.h"
#include "inference/util/heap.h"
#include "inference/util/text.h"
#include "inference/quant/weightloader.h"
#include "inference/tensorfile/modelsource.h"

#include <cstdint>
#include <fstream>

#ifdef VIREO_HAS_CORE
#include "app/cli/hubcommands.h"
#endif

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

namespace {

constexpr const char* kUsage = R"(usage: vireo-cli <command> [options]

commands:
  inspect PATH [--json]        describe a model file or folder from its headers
  tensor PATH NAME [--dequant --out OUT.f32]
                               describe one tensor; write it dequantized as float32
  dit-forward --model PATH --inputs IN.safetensors --out OUT.safetensors
                               run the LTX-2 transformer once on named input tensors
                               (see --help of the command for options)
  generate --model PATH --prompt TEXT --out FILE.mp4|FILE.png [--frames N --width W --height H
           --steps S --seed N --schedule distilled|dev --speed quality|balanced|fast
           --lora FILE[:STRENGTH] ...]
                               text to video with sound (LTX-2 / LTX-2.3, FILE.mp4) or to an
                               image (Ideogram-4, FILE.png); Ctrl-C stops it
  lora inspect FILE --model PATH [--json]
                               a LoRA matched against a model before it is applied: modules
                               matched and unmatched, refusals, rank and alpha
  serve [--listen HOST:PORT --model PATH ...]
                               the local HTTP API (OpenAI-compatible images and videos, and
                               Vireo's own routes) on the studio's models; see serve --help
  batch JOBS.jsonl --local --outputs DIR
                               one generation per line of a JSONL file (the API's fields),
                               each output once, resumable; see batch --help
  hosts [list|add NAME ADDRESS|remove NAME]
                               other machines' Vireo servers; generate --host NAME|any runs a
                               job there and brings the output home (see generate --help)
  plan REPO [rules] [--json]   the files a download would fetch, sizes, cache and disk
  download REPO [rules]        download them into the Hugging Face cache (Ctrl-C
                               cancels; running it again resumes); a repo outside the
                               catalog's publishers needs an approval first
  trust [list|add REPO|remove REPO]
                               the approvals of the trust gate, shared with the studio
  cache [list|delete-variant ID|delete-repo REPO|clean] [--yes]
                               what models take on disk; delete one (shared files stay) or
                               clean up stale partial files (shows the plan without --yes)
  devices [--json]             the CPU and every CUDA device this process sees: memory, compute
                               dtype, and whether FP8 weights and attention run natively
  version                      print the version

rules: --revision R, --include GLOB, --exclude GLOB, --diffusers [--component NAME]
       [--weight-variant V], --parallel N. Hub settings come from HF_ENDPOINT, HF_TOKEN,
       HF_HUB_CACHE, HF_HUB_OFFLINE as for huggingface_hub.

PATH may be a .safetensors or .gguf file, a *.safetensors.index.json, a diffusers
folder (model_index.json), a Hugging Face cache folder (models--org--name) or a snapshot.

environment switches (1/0, true/false, on/off, yes/no; anything else is refused):
)";

std::string usage()
{
    return kUsage + vireo::env::helpText();
}

int usageError(const std::string& message)
{
    std::fprintf(stderr, "vireo-cli: %s\n\n%s", vireo::terminalSafe(message).c_str(), usage().c_str());
    return 2;
}

int fail(const vireo::Error& error)
{
    // Messages carry file, tensor and key names from the files: no escape sequence may reach
    // the terminal, and the error stays one line.
    std::fprintf(stderr, "vireo-cli: %s\n", vireo::terminalSafe(error.message).c_str());
    return 1;
}

int runInspect(const std::vector<std::string>& args)
{
    std::string path;
    bool asJson = false;
    for (const auto& a : args) {
        if (a == "--json")
            asJson = true;
        else if (!a.empty() && a[0] == '-')
            return usageError("inspect: unknown option " + a);
        else if (path.empty())
            path = a;
        else
            return usageError("inspect takes one PATH");
    }
    if (path.empty())
        return usageError("inspect needs a PATH");
    auto report = vireo::inspect::inspectPath(path);
    if (!report)
        return fail(report.error());
    std::cout << (asJson ? vireo::inspect::toJson(*report) + "\n" : vireo::inspect::toText(*report));
    return 0;
}

int runTensor(const std::vector<std::string>& args)
{
    std::string path, name, out;
    bool dequant = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--dequant")
            dequant = true;
        else if (args[i] == "--out" && i + 1 < args.size())
            out = args[++i];
        else if (!args[i].empty() && args[i][0] == '-')
            return usageError("tensor: unknown option " + args[i]);
        else if (path.empty())
            path = args[i];
        else if (name.empty())
            name = args[i];
        else
            return usageError("tensor takes PATH and NAME");
    }
    if (path.empty() || name.empty())
        return usageError("tensor needs PATH and NAME");
    if (dequant != !out.empty())
        return usageError("tensor: --dequant and --out go together");
    auto source = vireo::tensorfile::ModelSource::open(path);
    if (!source)
        return fail(source.error());
    for (const auto& cp : source->checkpoints) {
        const auto* info = cp.find(name);
        if (!info)
            continue;
        auto weight = vireo::quant::loadWeight(cp, name);
        if (!weight)
            return fail(weight.error());
        std::string shape;
        for (auto d : weight->shape())
            shape += (shape.empty() ? "" : ",") + std::to_string(d);
        std::printf("%s: %s [%s] stored as %s, %lld bytes resident\n", name.c_str(), weight->describe().c_str(), shape.c_str(),
            info->typeName().c_str(), static_cast<long long>(weight->residentBytes()));
        if (!dequant)
            return 0;
        auto values = weight->dequantize(c10::kFloat);
        if (!values)
            return fail(values.error());
        std::ofstream file(out, std::ios::binary);
        const auto& t = *values;
        file.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.nbytes()));
        if (!file)
            return fail({vireo::ErrorCode::Io, out + ": cannot write the output file"});
        std::printf(
            "wrote %lld float32 values (little-endian, shape [%s]) to %s\n", static_cast<long long>(t.numel()), shape.c_str(), out.c_str());
        return 0;
    }
    return fail({vireo::ErrorCode::NotFound, path + ": no tensor named '" + name + "'"});
}

// The usage lines of one command (its entries in kUsage); empty for a command kUsage does not list.
std::string commandHelp(const std::string& command)
{
#ifdef VIREO_HAS_CORE
    if (command == "generate")
        return generateHelp();
    if (command == "batch")
        return batchHelp();
    if (command == "hosts")
        return hostsHelp();
#endif
    const auto out = vireo::cli::usageEntries(kUsage, command);
    return out.empty() ? out : "usage: vireo-cli " + command + " ...\n" + out;
}

int runCommand(const std::vector<std::string>& all)
{
    using Args = const std::vector<std::string>&;
    // The commands take the arguments after their name.
    const auto rest = [](int (*run)(Args)) { return [run](Args a) { return run(std::vector<std::string>(a.begin() + 1, a.end())); }; };
#ifndef VIREO_HAS_CORE
    const auto needsQt = [](Args a) { return usageError(a[0] + " needs a build with the Qt layers (VIREO_GUI=ON)"); };
#endif
    const std::vector<vireo::cli::Command> commands = {
        {"bench",
            [](Args a) {
                // The benchmarks are developer tools, left out of the installed program.
                std::string given;
                for (std::size_t i = 1; i < a.size(); ++i)
                    given += " " + a[i];
                std::fprintf(stderr,
                    "vireo-cli: the benchmarks moved to vireo-bench (built in the build tree, not installed): vireo-bench%s\n",
                    vireo::terminalSafe(given.substr(0, 200)).c_str());
                return 2;
            }},
        {"inspect", rest(runInspect)},
        {"tensor", rest(runTensor)},
        {"dit-forward", rest(runDitForward)},
        {"lora", rest(runLora)},
        {"devices", rest(runDevices)},
#ifdef VIREO_HAS_CORE
        {"generate", rest(runGenerate)},
        {"serve", rest(runServe)},
        {"batch", rest(runBatch)},
        {"hosts", rest(runHosts)},
        {"plan", rest(runPlan)},
        {"download", rest(runDownload)},
        {"trust", rest(runTrust)},
        {"cache", rest(runCache)},
#else
        {"generate", [](Args) { return usageError("generate needs a build with the studio's runtime (VIREO_GUI=ON)"); }},
        {"plan", needsQt},
        {"serve", needsQt},
        {"batch", needsQt},
        {"hosts", needsQt},
        {"download", needsQt},
        {"trust", needsQt},
        {"cache", needsQt},
#endif
    };
    return vireo::cli::dispatch("vireo-cli", VIREO_VERSION, all, commands, commandHelp, usageError, "command");
}

}  // namespace

int main(int argc, char** argv)
{
    vireo::heap::keepLargeAllocationsInTheHeap();
#ifdef VIREO_HAS_CORE
    // The studio's settings (trust approvals, local models) are shared with the window.
    QCoreApplication::setOrganizationName(QStringLiteral("Vireo"));
    QCoreApplication::setApplicationName(QStringLiteral("vireo"));
    QCoreApplication::setApplicationVersion(QStringLiteral(VIREO_VERSION));
#endif
    return vireo::cli::runProgram("vireo-cli", argc, argv, usage(), runCommand);
}
