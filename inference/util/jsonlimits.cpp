#include "inference/util/jsonlimits.h"

#include <unordered_set>

namespace vireo::jsonutil {

namespace {

using json = nlohmann::json;

// nlohmann's DOM builder with the checks in front: it stops the parse (returns false) at the
// first limit crossed, so a hostile document costs at most the limits, not its full size.
class LimitedBuilder {
public:
    LimitedBuilder(json& result, const JsonLimits& limits) : m_dom(result, false), m_limits(limits) {}

    bool null() { return value() && m_dom.null(); }
    bool boolean(bool v) { return value() && m_dom.boolean(v); }
    bool number_integer(json::number_integer_t v) { return value() && m_dom.number_integer(v); }
    bool number_unsigned(json::number_unsigned_t v) { return value() && m_dom.number_unsigned(v); }
    bool number_float(json::number_float_t v, const json::string_t& s) { return value() && m_dom.number_float(v, s); }
    bool string(json::string_t& v) { return value() && m_dom.string(v); }
    bool binary(json::binary_t& v) { return value() && m_dom.binary(v); }

    bool start_object(std::size_t n)
    {
        if (!value() || !open())
            return false;
        return m_dom.start_object(n);
    }
    bool key(json::string_t& k)
    {
        if (m_depth == 1 && m_limits.rejectDuplicateTopLevelKeys && !m_topKeys.insert(k).second) {
            m_problem = Problem::Duplicate;
            m_detail = k;
            return false;
        }
        return m_dom.key(k);
    }
    bool end_object()
    {
        --m_depth;
        return m_dom.end_object();
    }
    bool start_array(std::size_t n)
    {
        if (!value() || !open())
            return false;
        return m_dom.start_array(n);
    }
    bool end_array()
    {
        --m_depth;
        return m_dom.end_array();
    }
    bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e)
    {
        m_problem = Problem::Syntax;
        m_detail = e.what();
        return m_dom.parse_error(position, token, e);
    }

    enum class Problem { None, Syntax, Depth, Values, Duplicate };
    Problem problem() const { return m_problem; }
    const std::string& detail() const { return m_detail; }

private:
    bool value()
    {
        if (++m_values > m_limits.maxValues) {
            m_problem = Problem::Values;
            return false;
        }
        return true;
    }
    bool open()
    {
        if (++m_depth > m_limits.maxDepth) {
            m_problem = Problem::Depth;
            return false;
        }
        return true;
    }

    nlohmann::detail::json_sax_dom_parser<json> m_dom;
    const JsonLimits& m_limits;
    int m_depth = 0;
    std::uint64_t m_values = 0;
    std::unordered_set<std::string> m_topKeys;
    Problem m_problem = Problem::None;
    std::string m_detail;
};

std::string clipped(const std::string& s, std::size_t limit)
{
    return s.size() <= limit ? s : s.substr(0, limit) + "...";
}

}  // namespace

Result<json> parseUntrusted(std::string_view text, const std::string& what, const JsonLimits& limits)
{
    if (text.size() > limits.maxBytes)
        return makeError(ErrorCode::InvalidFormat,
            what + " is " + std::to_string(text.size()) + " bytes, more than the " + std::to_string(limits.maxBytes)
                + " a JSON document of this kind may have");
    json result;
    LimitedBuilder builder(result, limits);
    bool ok = false;
    try {
        ok = json::sax_parse(text.begin(), text.end(), &builder, json::input_format_t::json, /*strict=*/true);
    } catch (const json::exception& e) {
        return makeError(ErrorCode::InvalidFormat, what + " is not valid JSON (" + e.what() + ")");
    } catch (const std::bad_alloc&) {
        return makeError(ErrorCode::OutOfMemory, what + ": out of memory while reading it");
    }
    switch (builder.problem()) {
    case LimitedBuilder::Problem::None: break;
    case LimitedBuilder::Problem::Syntax:
        return makeError(ErrorCode::InvalidFormat, what + " is not valid JSON (" + builder.detail() + ")");
    case LimitedBuilder::Problem::Depth:
        return makeError(ErrorCode::InvalidFormat,
            what + " nests objects or lists deeper than " + std::to_string(limits.maxDepth)
                + " levels; no real file does, so it is damaged or hostile");
    case LimitedBuilder::Problem::Values:
        return makeError(ErrorCode::InvalidFormat,
            what + " holds more than " + std::to_string(limits.maxValues) + " values; no real file does, so it is damaged or hostile");
    case LimitedBuilder::Problem::Duplicate:
        return makeError(ErrorCode::InvalidFormat, what + " names '" + clipped(builder.detail(), 200) + "' twice");
    }
    if (!ok)
        return makeError(ErrorCode::InvalidFormat, what + " is not valid JSON");
    return result;
}

std::string safeDump(const json& value, int indent)
{
    return value.dump(indent, ' ', false, json::error_handler_t::replace);
}

std::string shortDump(const json& value)
{
    // Containers are summarized without walking them all: a message needs a hint, not a copy.
    std::string s;
    if (value.is_object() && value.size() > 8)
        s = "{... " + std::to_string(value.size()) + " keys}";
    else if (value.is_array() && value.size() > 8)
        s = "[... " + std::to_string(value.size()) + " items]";
    else
        s = safeDump(value);
    return clipped(s, 60);
}

const json* objectField(const json& j, std::string_view key)
{
    if (!j.is_object())
        return nullptr;
    const auto it = j.find(std::string(key));
    return it != j.end() && it->is_object() ? &*it : nullptr;
}

std::string stringOr(const json& j, std::string_view key, const std::string& fallback)
{
    if (!j.is_object())
        return fallback;
    const auto it = j.find(std::string(key));
    return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

namespace detail {

void throwField(std::string_view key, const json& value, const char* expected)
{
    throw FieldError("'" + std::string(key) + "' is " + shortDump(value) + ", expected " + expected);
}

}  // namespace detail

void configFail(std::string message)
{
    throw ConfigError{std::move(message)};
}

std::int64_t intField(const json& j, const char* key, std::int64_t fallback, const std::string& where)
{
    if (!j.contains(key) || j[key].is_null())
        return fallback;
    try {
        return fieldAs<std::int64_t>(j[key], key);  // 3.0 counts, 1e30 does not
    } catch (const FieldError& e) {
        configFail(where + ": " + e.what());
    }
}

double numberField(const json& j, const char* key, double fallback, const std::string& where)
{
    if (!j.contains(key) || j[key].is_null())
        return fallback;
    if (!j[key].is_number())
        configFail(where + ": '" + key + "' must be a number, got " + shortDump(j[key]));
    return j[key].get<double>();
}

bool boolField(const json& j, const char* key, bool fallback, const std::string& where)
{
    if (!j.contains(key) || j[key].is_null())
        return fallback;
    if (!j[key].is_boolean())
        configFail(where + ": '" + key + "' must be true or false, got " + shortDump(j[key]));
    return j[key].get<bool>();
}

}  // namespace vireo::jsonutil
