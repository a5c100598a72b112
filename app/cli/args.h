#pragma once

// Command-line values parsed strictly: the whole text must be the number ("12abc", " 7",
// "nan", "1e400" are refused), and it must lie in the option's range.

#include "inference/util/result.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
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

inline std::string lower(std::string_view text)
{
    std::string out(text);
    for (auto& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

} // namespace vireo::cli
