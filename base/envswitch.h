#pragma once

// On/off switches read from the environment. Every switch the product reads is listed here,
// parsed one way (0/1, true/false, on/off, yes/no in any case, blanks around them ignored; unset
// or empty means the default), and checked at startup, so a typo such as VIREO_CUDA_GRAPHS=of
// is an error naming the variable instead of a switch silently left as it was.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::env {

struct Switch {
    const char* name;
    bool defaultValue;
    const char* effect;  // what turning it away from its default does, for --help and errors
};

// Every switch the product reads, in the order --help lists them.
const std::vector<Switch>& switches();

// The text of a flag as users write it; nullopt for anything else.
std::optional<bool> parseFlag(std::string_view text);

// The value of a listed switch (its default when unset or empty). A value parseFlag refuses
// throws std::invalid_argument with invalidMessage's text; a name that is not listed throws
// std::logic_error (a programming error).
bool flag(std::string_view name);

// One sentence per listed switch whose value parseFlag refuses: empty when all are valid.
std::vector<std::string> problems();
std::string invalidMessage(std::string_view name, std::string_view value);

// The switches and their effects as lines for --help.
std::string helpText();

}  // namespace vireo::env
