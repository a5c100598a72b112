// The benchmarks whose other side is Python (diffusers, huggingface_hub, the local test Hub): a
// script in tests/bench runs both and calls vireo-cli, built beside this program, for Vireo's.
#include "app/bench/benchcommands.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace {

// The running executable: argv[0] need not name it (a lookup on PATH, a relative name after a
// change of folder).
std::filesystem::path ownPath(const char* self)
{
    std::error_code ec;
    auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
    return ec ? std::filesystem::path(self) : path;
}

// PYTHON tests/bench/SCRIPT VIREO_CLI EXTRA, EXTRA already quoted for the shell; 0 when the
// script succeeded.
int runScript(const std::string& bench, const std::string& python, const std::string& script, const char* self, const std::string& extra)
{
    std::string missing;
    const auto path = benchScript(script, &missing);
    if (path.empty())
        return usageError(bench + ": " + missing);
    const auto cli = siblingProgram(self, "vireo-cli");
    if (::access(cli.c_str(), X_OK) != 0)
        return fail({vireo::ErrorCode::NotFound,
            bench + ": " + cli + " is not there; the benchmark runs vireo-cli from vireo-bench's folder: build the vireo-cli target too"});
    const std::string command = "\"" + python + "\" \"" + path + "\" \"" + cli + "\"" + extra;
    return std::system(command.c_str()) == 0 ? 0 : 1;
}

}  // namespace

std::string benchScript(const std::string& name, std::string* why)
{
    struct stat st {};
    std::string tried;
    for (const char* root : std::initializer_list<const char*>{std::getenv("VIREO_SOURCE_DIR"), "."}) {
        if (!root || !*root)
            continue;
        const std::string path = std::string(root) + "/tests/bench/" + name;
        if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))
            return path;
        tried += (tried.empty() ? "" : ", ") + path;
    }
    *why = "this benchmark runs tests/bench/" + name + " from a Vireo source tree, which was not found (" + tried
        + "): run it from the source folder, or set VIREO_SOURCE_DIR to it";
    return {};
}

std::string siblingProgram(const char* self, const std::string& name)
{
    return (ownPath(self).parent_path() / name).string();
}

// The download bench needs the local test Hub and the Python references.
int runBenchDownload(const std::vector<std::string>& args, const char* self)
{
    std::string python = "python3";
    std::string extra;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--python" && i + 1 < args.size())
            python = args[++i];
        else if (args[i] == "--mb" && i + 1 < args.size())
            extra += " --mb " + std::to_string(std::max(1, std::atoi(args[++i].c_str())));
        else if (args[i] == "--json")
            extra += " --json";
        else
            return usageError("bench download: unexpected argument " + args[i]);
    }
    return runScript("bench download", python, "bench_download.py", self, extra);
}

// tests/bench/bench_dit.py calls `vireo-cli dit-forward` back on the weights it wrote.
int runBenchDit(const std::vector<std::string>& args, const char* self)
{
    std::string python = "python3";
    std::string extra;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--python" && i + 1 < args.size())
            python = args[++i];
        else if ((args[i] == "--layers" || args[i] == "--repeat" || args[i] == "--tokens") && i + 1 < args.size())
            extra += " " + args[i] + " " + std::to_string(std::max(1, std::atoi(args[i + 1].c_str()))), ++i;
        else if (args[i] == "--json")
            extra += " --json";
        else
            return usageError("bench dit: unexpected argument " + args[i]);
    }
    return runScript("bench dit", python, "bench_dit.py", self, extra);
}

int runBenchGenerate(const std::vector<std::string>& args, const char* self)
{
    std::string python = "python3", extra, script = "bench_generate.py";
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--python" && i + 1 < args.size())
            python = args[++i];
        else if (args[i] == "--json" || args[i] == "--small" || args[i] == "--two-stage" || args[i] == "--guided" || args[i] == "--audio"
            || args[i] == "--reference" || args[i] == "--enhance" || args[i] == "--enhance-image" || args[i] == "--third-stage")
            extra += " " + args[i];
        else if (args[i] == "--version" && i + 1 < args.size() && (args[i + 1] == "2.3" || args[i + 1] == "2.5"))
            extra += " --version " + args[++i];
        else if (args[i] == "--temporal-rounds" && i + 1 < args.size() && args[i + 1] == "1")
            extra += " --temporal-rounds " + args[++i];
        else if (args[i] == "--ideogram")
            script = "bench_generate_ideogram.py";
        else
            return usageError("bench generate: unexpected argument " + args[i]);
    }
    return runScript("bench generate", python, script, self, extra);
}

int runBenchApi(const std::vector<std::string>& args, const char* self)
{
    std::string python = "python3", extra;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--python" && i + 1 < args.size())
            python = args[++i];
        else if (args[i] == "--json")
            extra += " --json";
        else if ((args[i] == "--model" || args[i] == "--size" || args[i] == "--frames" || args[i] == "--runs") && i + 1 < args.size()
            && args[i + 1].find_first_of("\"$`\\") == std::string::npos)  // nothing the shell would expand
            extra += " " + args[i] + " \"" + args[i + 1] + "\"", ++i;
        else
            return usageError("bench api: unexpected argument " + args[i]);
    }
    return runScript("bench api", python, "bench_api.py", self, extra);
}

// The GPU benchmark drives diffusers, vireo-cli and this program from one script (one device
// call); the options after --python are the script's own.
int runBenchGpu(const std::vector<std::string>& args, const char* self)
{
    std::string python = "python3";
    std::string extra = " --bench \"" + ownPath(self).string() + "\"";
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--python" && i + 1 < args.size())
            python = args[++i];
        else
            extra += " \"" + args[i] + "\"";
    }
    return runScript("bench gpu", python, "bench_gpu.py", self, extra);
}
