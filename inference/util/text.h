#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vireo {

// Text from a file or a server made safe to print on one terminal line: invalid UTF-8 becomes
// U+FFFD, and control characters (C0, DEL, C1), line and paragraph separators and the
// bidirectional overrides that reorder what a reader sees ("Trojan Source") become '?'. A
// file named "a\x1b[2Jb" must not clear the user's screen, nor "x\nOK" fake a second line.
std::string terminalSafe(std::string_view text);

// A name from a file or a server, for a message: terminalSafe, and cut to about maxBytes at a
// character boundary with its full length said ("abc... (52428800 bytes)"), so a 50 MB name
// makes a readable error, not a 50 MB one.
std::string shownName(std::string_view text, std::size_t maxBytes = 160);

// Length in bytes of the valid UTF-8 sequence starting at text[i], 0 if it is not one
// (overlong, surrogate, above U+10FFFF, truncated).
std::size_t utf8SequenceLength(std::string_view text, std::size_t i);

}  // namespace vireo
