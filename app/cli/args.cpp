#include "app/cli/args.h"

#include "base/envswitch.h"
#include "inference/util/text.h"

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace vireo::cli {

std::string notARegularFile(const std::string& path, const std::string& what)
{
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return path + ": no such " + what + " file";
        return path + ": cannot be read (" + std::strerror(errno) + ")";
    }
    if (S_ISREG(st.st_mode)) {
        if (::access(path.c_str(), R_OK) != 0)
            return path + ": cannot be read (" + std::strerror(errno) + ")";
        return {};
    }
    if (S_ISDIR(st.st_mode))
        return path + ": is a folder; give the " + what + " file itself";
    const char* kind = S_ISFIFO(st.st_mode) ? "a pipe" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
    return path + ": is " + kind + ", not a file; give the " + what + " as a regular file";
}

Result<LoraSpec> parseLoraSpec(const std::string& text)
{
    if (text.empty())
        return makeError(ErrorCode::InvalidArgument, "--lora needs a file");
    struct stat st {};
    if (::stat(text.c_str(), &st) == 0)
        return LoraSpec{text, 1.0};
    const auto colon = text.rfind(':');
    if (colon == std::string::npos)
        return LoraSpec{text, 1.0};
    const std::string file = text.substr(0, colon), strength = text.substr(colon + 1);
    // A suffix a number parser would take any part of (1e308, nan, inf, -3x) is a strength that
    // was meant; anything else ("abc" when the file before it exists, or no file at all) is
    // judged by whether the part before it is a file.
    const bool numberLike = !strength.empty()
        && (std::strchr("+-.0123456789", strength[0]) != nullptr || lower(strength).rfind("nan", 0) == 0
            || lower(strength).rfind("inf", 0) == 0);
    if (!numberLike && ::stat(file.c_str(), &st) != 0)
        return LoraSpec{text, 1.0};  // no such file either way: the caller names the whole text
    auto n = parseNumber<double>(strength, -100.0, 100.0);
    if (!n)
        return makeError(ErrorCode::InvalidArgument,
            "--lora " + text.substr(0, 200) + ": the strength after ':' must be a number from -100 to 100 (" + n.error().message + ")");
    return LoraSpec{file, *n};
}

std::string usageEntries(std::string_view usage, std::string_view command)
{
    std::string out;
    bool inEntry = false;
    for (std::size_t at = 0; at < usage.size();) {
        const auto end = usage.find('\n', at);
        const auto line = usage.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
        at = end == std::string_view::npos ? usage.size() : end + 1;
        const bool entryStart = line.size() > 2 && line[0] == ' ' && line[1] == ' ' && line[2] != ' ';
        if (entryStart)
            inEntry =
                line.compare(2, command.size(), command) == 0 && (line.size() == 2 + command.size() || line[2 + command.size()] == ' ');
        else if (line.empty() || line[0] != ' ')
            inEntry = false;
        if (inEntry)
            out.append(line).append("\n");
    }
    return out;
}

Result<void> probeOutputFile(const std::string& path)
{
    const auto slash = path.rfind('/');
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    if (name.empty())
        return makeError(ErrorCode::InvalidArgument, path + ": names a folder; give the output file's name");
    // Creating the file itself checks what a check of its parts cannot: the name's length on
    // this filesystem, a folder that takes no new files (/proc, read-only media), quotas.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        const int e = errno;
        const std::string shown = path.size() > 300 ? path.substr(0, 300) + "..." : path;
        if (e == EEXIST)
            return makeError(ErrorCode::InvalidArgument, shown + " exists; choose another name (outputs are never overwritten)");
        if (e == ENAMETOOLONG)
            return makeError(ErrorCode::InvalidArgument,
                shown + ": the name is too long for this filesystem (" + std::to_string(name.size())
                    + " bytes; most take at most 255); choose a shorter one");
        return makeError(ErrorCode::InvalidArgument, shown + ": an output cannot be written there (" + std::strerror(e) + ")");
    }
    ::close(fd);
    ::unlink(path.c_str());
    return {};
}

int runProgram(
    const char* program, int argc, char** argv, const std::string& usage, const std::function<int(const std::vector<std::string>&)>& run)
{
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
        std::fputs(usage.c_str(), args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    // A switch set to something it cannot mean stops every command before it starts.
    if (const auto bad = vireo::env::problems(); !bad.empty()) {
        for (const auto& problem : bad)
            std::fprintf(stderr, "%s: %s\n", program, vireo::terminalSafe(problem).c_str());
        return 2;
    }
    const std::string command = vireo::terminalSafe(args[0]);
    try {
        return run(args);
    } catch (const std::bad_alloc&) {
        std::fprintf(
            stderr, "%s: %s: out of memory; close other programs or use a smaller model, variant or size\n", program, command.c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: %s: internal error: %s; please report it with the command you ran\n", program, command.c_str(),
            vireo::terminalSafe(e.what()).c_str());
    } catch (...) {
        std::fprintf(stderr, "%s: %s: internal error; please report it with the command you ran\n", program, command.c_str());
    }
    return 1;
}

int dispatch(const char* program, const char* version, const std::vector<std::string>& args, const std::vector<Command>& commands,
    const std::function<std::string(const std::string&)>& help, const std::function<int(const std::string&)>& usageError,
    const std::string& noun)
{
    const std::string& name = args.at(0);
    // --help anywhere after a command is its help, never an error.
    if (std::any_of(args.begin() + 1, args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; })) {
        const auto text = help(name);
        if (text.empty())
            return usageError("unknown " + noun + " '" + name + "'");
        std::fputs(text.c_str(), stdout);
        return 0;
    }
    for (const auto& c : commands)
        if (c.name == name)
            return c.run(args);
    if (name == "version" || name == "--version") {
        std::printf("%s %s\n", program, version);
        return 0;
    }
    return usageError("unknown " + noun + " '" + name + "'");
}

}  // namespace vireo::cli
