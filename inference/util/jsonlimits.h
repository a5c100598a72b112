#pragma once

// JSON from files and the network, read defensively. nlohmann's parser is iterative, but a
// document nested 100,000 deep still overflows the stack when it is copied, dumped or
// compared, and a few megabytes of "[[],[],..." become gigabytes of nodes. parseUntrusted
// checks size, nesting and node count while it builds the document (one pass, linear time),
// and can refuse duplicate keys of the top-level object (safetensors headers).
// The field readers turn a value of the wrong type into an error that names the key,
// instead of nlohmann's type_error that names neither key nor file.

#include "inference/util/result.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace vireo::jsonutil {

struct JsonLimits {
    std::uint64_t maxBytes = 64ull << 20;
    int maxDepth = 64;  // objects and arrays inside each other
    std::uint64_t maxValues = 16ull << 20;  // nodes of every kind
    bool rejectDuplicateTopLevelKeys = false;
};

// Parses text that came from a file or a server. `what` names it in errors ("model.safetensors
// header", "org/name: model_index.json"): "<what> is not valid JSON (...)", "<what> nests
// deeper than 64 levels", "<what> names 'x' twice". Never throws.
Result<nlohmann::json> parseUntrusted(std::string_view text, const std::string& what, const JsonLimits& limits = {});

// dump() that never throws: invalid UTF-8 (GGUF strings, file names) becomes U+FFFD.
std::string safeDump(const nlohmann::json& value, int indent = -1);
// A value as a short one-line text for messages (at most 60 bytes of JSON).
std::string shortDump(const nlohmann::json& value);

// A field of the wrong type or out of range. The message names the key:
// "'num_layers' is "48", expected a whole number".
class FieldError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

namespace detail {
[[noreturn]] void throwField(std::string_view key, const nlohmann::json& value, const char* expected);

template <typename T>
struct IsVector : std::false_type {
};
template <typename U>
struct IsVector<std::vector<U>> : std::true_type {
};
}  // namespace detail

// value as T: bool, std::string, an integer type (range-checked; 3.0 counts as 3), float or
// double (finite), or a std::vector of those. Throws FieldError naming key.
template <typename T>
T fieldAs(const nlohmann::json& value, std::string_view key)
{
    if constexpr (std::is_same_v<T, bool>) {
        if (!value.is_boolean())
            detail::throwField(key, value, "true or false");
        return value.get<bool>();
    } else if constexpr (std::is_same_v<T, std::string>) {
        if (!value.is_string())
            detail::throwField(key, value, "a string");
        return value.get<std::string>();
    } else if constexpr (std::is_integral_v<T>) {
        if (value.is_number_unsigned()) {
            const auto v = value.get<std::uint64_t>();
            if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
                detail::throwField(key, value, "a whole number in range");
            return static_cast<T>(v);
        }
        if (value.is_number_integer()) {
            const auto v = value.get<std::int64_t>();
            if constexpr (std::is_unsigned_v<T>) {
                if (v < 0 || static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
                    detail::throwField(key, value, "a non-negative whole number in range");
            } else {
                if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min())
                    || v > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
                    detail::throwField(key, value, "a whole number in range");
            }
            return static_cast<T>(v);
        }
        if (value.is_number_float()) {
            const double d = value.get<double>();
            // Python writes 3.0 for some integer settings; anything else is not a count. The
            // upper bound is exclusive: max + 1 is a power of two, exact as a double.
            const double upper = static_cast<double>(std::numeric_limits<T>::max()) + 1.0;
            if (!(d >= static_cast<double>(std::numeric_limits<T>::min()) && d < upper) || d != static_cast<double>(static_cast<T>(d)))
                detail::throwField(key, value, "a whole number in range");
            return static_cast<T>(d);
        }
        detail::throwField(key, value, "a whole number");
    } else if constexpr (std::is_floating_point_v<T>) {
        if (!value.is_number())
            detail::throwField(key, value, "a number");
        const double d = value.get<double>();
        if (!(d >= -static_cast<double>(std::numeric_limits<T>::max()) && d <= static_cast<double>(std::numeric_limits<T>::max())))
            detail::throwField(key, value, "a finite number in range");
        return static_cast<T>(d);
    } else if constexpr (detail::IsVector<T>::value) {
        if (!value.is_array())
            detail::throwField(key, value, "a list");
        T out;
        out.reserve(value.size());
        for (const auto& item : value)
            out.push_back(fieldAs<typename T::value_type>(item, key));
        return out;
    } else {
        static_assert(sizeof(T) == 0, "fieldAs: unsupported type");
    }
}

// When j is an object with key present and not null: out = fieldAs<T>(j[key]) and true.
template <typename T>
bool readField(const nlohmann::json& j, std::string_view key, T& out)
{
    if (!j.is_object())
        return false;
    const auto it = j.find(std::string(key));
    if (it == j.end() || it->is_null())
        return false;
    out = fieldAs<T>(*it, key);
    return true;
}

// The object at j[key], or nullptr when absent or not an object.
const nlohmann::json* objectField(const nlohmann::json& j, std::string_view key);
// A string field, or fallback when absent, null or not a string (for class names and tags a
// reader only compares against known values).
std::string stringOr(const nlohmann::json& j, std::string_view key, const std::string& fallback = {});

// Model configs: a value of the wrong type or range fails the load with the file (where) and
// the key; absent or null keys take the default. Model readers catch ConfigError once.
struct ConfigError {
    std::string message;
};
[[noreturn]] void configFail(std::string message);
std::int64_t intField(const nlohmann::json& j, const char* key, std::int64_t fallback, const std::string& where);
double numberField(const nlohmann::json& j, const char* key, double fallback, const std::string& where);
bool boolField(const nlohmann::json& j, const char* key, bool fallback, const std::string& where);

}  // namespace vireo::jsonutil
