#pragma once

// Command-line values parsed strictly: the whole text must be the number ("12abc", " 7",
// "nan", "1e400" are refused), and it must lie in the option's range.

#include "inference/util/result.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <functional>
#include <vector>
#include <type_traits>

namespace vireo::cli {

template <typename T>
Result<T> parseNumber(std::string_view text, T min, T max)
{
    T value{};
    const char* first = text.data();
    const char* last = text.data() + text.size();
    std::from_chars_result r{};
    if constexpr (std::is_floating_point_v<T>)
        r = std::from_chars(first, last, value, std::chars_format::general);
    else
        r = std::from_chars(first, last, value, 10);
    const std::string shown(text.substr(0, 40));
    if (text.empty() || r.ec == std::errc::invalid_argument || r.ptr != last)
        return makeError(ErrorCode::InvalidArgument, "'" + shown + "' is not a number");
    if (r.ec == std::errc::result_out_of_range)
        return makeError(ErrorCode::InvalidArgument, "'" + shown + "' is out of range");
    if constexpr (std::is_floating_point_v<T>) {
        if (!std::isfinite(value))
            return makeError(ErrorCode::InvalidArgument, "'" + shown + "' is not a finite number");
    }
    if (value < min || value > max)
        return makeError(ErrorCode::InvalidArgument, "'" + shown + "' is outside " + std::to_string(min) + " .. " + std::to_string(max));
    return value;
}

// Why PATH cannot be read as a `what` ("image", "video", "LoRA"): missing, a folder, a pipe or a
// device (which a reader would block on or read forever), or unreadable; empty when it is a
// regular file.
std::string notARegularFile(const std::string& path, const std::string& what);

// A --lora value: FILE or FILE:STRENGTH. A file that exists under the whole name is taken as it
// is (names may hold ':'); otherwise a number after the last ':' is the strength, which must be
// finite and between -100 and 100. "x.safetensors:abc" is a strength that is not a number.
struct LoraSpec {
    std::string path;
    double strength = 1.0;
};
Result<LoraSpec> parseLoraSpec(const std::string& text);

// Checks before any work that an output can be created under this name: the name's length,
// the folder (writable, a real filesystem: not /proc), by creating and removing the file itself.
// The name must not exist (outputs are never overwritten).
Result<void> probeOutputFile(const std::string& path);

// The entries of COMMAND in a usage text, for `COMMAND --help`: each line that starts with two
// spaces and the command's name, with the deeper-indented lines that continue it. Empty when the
// text lists no such entry.
std::string usageEntries(std::string_view usage, std::string_view command);

inline std::string lower(std::string_view text)
{
    std::string out(text);
    for (auto& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// The main of vireo-cli and vireo-bench: the usage on no arguments (status 2) or --help, the
// environment switches checked before anything runs, and no exception past a command (a
// hostile file, a full disk or a bug ends it with one line and status 1, never an abort).
// `run` gets the arguments, the command first.
int runProgram(
    const char* program, int argc, char** argv, const std::string& usage, const std::function<int(const std::vector<std::string>&)>& run);

// One command of vireo-cli or a benchmark of vireo-bench: its name and what runs it (given every
// argument, the name first).
struct Command {
    std::string name;
    std::function<int(const std::vector<std::string>&)> run;
};

// Runs the command `args[0]` names. `--help` anywhere after it prints its help (`help(name)`,
// empty for an unknown name) and exits 0; "version" and "--version" print `program version`; an
// unknown name is `usageError("unknown <noun> '<name>'")`.
int dispatch(const char* program, const char* version, const std::vector<std::string>& args, const std::vector<Command>& commands,
    const std::function<std::string(const std::string&)>& help, const std::function<int(const std::string&)>& usageError,
    const std::string& noun);

}  // namespace vireo::cli
