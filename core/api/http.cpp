#include "core/api/http.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <limits>

namespace vireo::api {

std::string Request::header(const std::string& lowerName) const
{
    const auto it = headers.find(lowerName);
    return it == headers.end() ? std::string() : it->second;
}

void EventStream::push(std::string event)
{
    std::function<void()> wake;
    {
        std::lock_guard lock(m_mutex);
        if (m_closed)
            return;
        // A client that reads slower than events come keeps a bounded backlog: the oldest
        // progress lines are dropped, never the connection's memory.
        if (m_events.size() >= 256)
            m_events.erase(m_events.begin());
        m_events.push_back(std::move(event));
        wake = m_wake;
    }
    if (wake)
        wake();
}

void EventStream::close()
{
    std::function<void()> wake;
    {
        std::lock_guard lock(m_mutex);
        m_closed = true;
        wake = m_wake;
    }
    if (wake)
        wake();
}

std::vector<std::string> EventStream::take(bool* closed)
{
    std::lock_guard lock(m_mutex);
    std::vector<std::string> out;
    out.swap(m_events);
    *closed = m_closed;
    return out;
}

void EventStream::setWaker(std::function<void()> wake)
{
    std::lock_guard lock(m_mutex);
    m_wake = std::move(wake);
}

void EventStream::abandon()
{
    std::lock_guard lock(m_mutex);
    m_abandoned = true;
    m_wake = nullptr;
}

bool EventStream::abandoned() const
{
    std::lock_guard lock(m_mutex);
    return m_abandoned;
}

Response jsonResponse(int status, const nlohmann::json& body)
{
    Response r;
    r.status = status;
    r.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return r;
}

std::string errorType(int status)
{
    switch (status) {
    case 400:
    case 404:
    case 405:
    case 409:
    case 413:
    case 415:
    case 416:
    case 431: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable";
    default: return "server_error";
    }
}

Response errorResponse(int status, const std::string& message, const std::string& param, const std::string& code)
{
    nlohmann::json e{{"message", message}, {"type", errorType(status)}, {"param", nullptr}, {"code", nullptr}};
    if (!param.empty())
        e["param"] = param;
    if (!code.empty())
        e["code"] = code;
    return jsonResponse(status, nlohmann::json{{"error", e}});
}

namespace {

std::string trim(const std::string& s)
{
    const auto b = s.find_first_not_of(" \t");
    if (b == std::string::npos)
        return {};
    const auto e = s.find_last_not_of(" \t");
    return s.substr(b, e - b + 1);
}

// A run of decimal digits that fits an int64; nullopt for anything else (signs included).
std::optional<std::int64_t> digits(const std::string& s)
{
    if (s.empty() || !std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
        return std::nullopt;
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size())
        return std::nullopt;
    return v;
}

bool isStrong(const std::string& tag)
{
    return tag.size() >= 2 && tag.front() == '"' && tag.back() == '"';
}

}  // namespace

RangeDecision decideRange(
    const std::string& method, const std::string& range, const std::string& ifRange, const std::string& etag, std::int64_t size)
{
    RangeDecision full{RangeDecision::Kind::Full, 0, size};
    if (method != "GET" || range.empty())
        return full;
    // §13.1.5: a Range is honoured only when the validator is the current one, compared strongly
    // (a date is not a strong validator here: our files carry none).
    if (!ifRange.empty() && !(isStrong(trim(ifRange)) && trim(ifRange) == etag))
        return full;
    const auto eq = range.find('=');
    if (eq == std::string::npos)
        return full;
    std::string unit = trim(range.substr(0, eq));
    std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (unit != "bytes")
        return full;  // §14.2: an unknown unit is ignored
    const std::string set = trim(range.substr(eq + 1));
    if (set.empty() || set.find(',') != std::string::npos)
        return full;  // several ranges: the whole file instead of multipart/byteranges
    const auto dash = set.find('-');
    if (dash == std::string::npos)
        return full;
    const std::string a = trim(set.substr(0, dash)), b = trim(set.substr(dash + 1));
    RangeDecision d{RangeDecision::Kind::Partial, 0, 0};
    if (a.empty()) {
        // suffix-range: the last N bytes; "-0" cannot be satisfied.
        const auto n = digits(b);
        if (!n)
            return full;
        if (*n == 0 || size == 0)
            return {RangeDecision::Kind::Unsatisfiable, 0, 0};
        d.length = std::min(*n, size);
        d.first = size - d.length;
        return d;
    }
    const auto first = digits(a);
    if (!first)
        return full;
    std::optional<std::int64_t> last;
    if (!b.empty()) {
        last = digits(b);
        if (!last || *last < *first)
            return full;  // §14.1.1: an invalid range-spec makes the field invalid: ignored
    }
    if (*first >= size)
        return {RangeDecision::Kind::Unsatisfiable, 0, 0};
    const std::int64_t end = last ? std::min(*last, size - 1) : size - 1;
    d.first = *first;
    d.length = end - *first + 1;
    return d;
}

bool noneMatch(const std::string& ifNoneMatch, const std::string& etag)
{
    auto opaque = [](std::string t) {
        t = trim(t);
        if (t.rfind("W/", 0) == 0)
            t = t.substr(2);
        return t;
    };
    std::size_t start = 0;
    while (start <= ifNoneMatch.size()) {
        const auto comma = ifNoneMatch.find(',', start);
        const auto item = trim(ifNoneMatch.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
        if (item == "*" || (!item.empty() && opaque(item) == opaque(etag)))
            return true;
        if (comma == std::string::npos)
            break;
        start = comma + 1;
    }
    return false;
}

std::optional<std::string> percentDecode(const std::string& text, bool plusIsSpace)
{
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '%') {
            if (i + 2 >= text.size())
                return std::nullopt;
            auto hex = [](char h) -> int {
                if (h >= '0' && h <= '9')
                    return h - '0';
                if (h >= 'a' && h <= 'f')
                    return h - 'a' + 10;
                if (h >= 'A' && h <= 'F')
                    return h - 'A' + 10;
                return -1;
            };
            const int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return std::nullopt;
            out.push_back(static_cast<char>(hi * 16 + lo));
            i += 2;
        } else if (c == '+' && plusIsSpace) {
            out.push_back(' ');
        } else if (c == '\0') {
            return std::nullopt;
        } else {
            out.push_back(c);
        }
    }
    return out;
}

std::optional<std::pair<std::string, std::map<std::string, std::string>>> splitTarget(const std::string& target)
{
    if (target.empty() || target.front() != '/')
        return std::nullopt;
    const auto q = target.find('?');
    auto path = percentDecode(target.substr(0, q), false);
    if (!path)
        return std::nullopt;
    std::map<std::string, std::string> query;
    if (q != std::string::npos) {
        const std::string rest = target.substr(q + 1);
        std::size_t start = 0;
        while (start < rest.size()) {
            auto amp = rest.find('&', start);
            if (amp == std::string::npos)
                amp = rest.size();
            const std::string pair = rest.substr(start, amp - start);
            start = amp + 1;
            if (pair.empty())
                continue;
            const auto eq = pair.find('=');
            auto name = percentDecode(pair.substr(0, eq), true);
            auto value = percentDecode(eq == std::string::npos ? std::string() : pair.substr(eq + 1), true);
            if (!name || !value)
                return std::nullopt;
            query[*name] = *value;
        }
    }
    return std::make_pair(std::move(*path), std::move(query));
}

bool constantTimeEquals(const std::string& a, const std::string& b)
{
    // The lengths are not secret (a token's is fixed); every byte is compared either way.
    const std::size_t n = std::max(a.size(), b.size());
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    for (std::size_t i = 0; i < n; ++i) {
        const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
        const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
        diff |= static_cast<unsigned char>(x ^ y);
    }
    return diff == 0;
}

namespace {

// A header parameter (`boundary=...`, `name="..."`) from a header value; empty when absent.
std::string parameter(const std::string& value, const std::string& key)
{
    std::string lower = value;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::size_t at = 0;
    while ((at = lower.find(key + "=", at)) != std::string::npos) {
        // The key must start a parameter, not end another ("filename=" inside "name=").
        if (at > 0 && lower[at - 1] != ';' && lower[at - 1] != ' ' && lower[at - 1] != '\t') {
            at += key.size();
            continue;
        }
        std::size_t v = at + key.size() + 1;
        if (v < value.size() && value[v] == '"') {
            const auto end = value.find('"', v + 1);
            if (end == std::string::npos)
                return {};
            return value.substr(v + 1, end - v - 1);
        }
        const auto end = value.find_first_of("; \t", v);
        return value.substr(v, end == std::string::npos ? std::string::npos : end - v);
    }
    return {};
}

}  // namespace

std::optional<std::vector<FormPart>> parseMultipart(
    const std::string& contentType, const std::string& body, std::string* error, std::size_t maxParts)
{
    auto fail = [&](const std::string& why) -> std::optional<std::vector<FormPart>> {
        if (error)
            *error = why;
        return std::nullopt;
    };
    const std::string boundary = parameter(contentType, "boundary");
    if (boundary.empty() || boundary.size() > 70)
        return fail("the multipart body has no valid boundary (RFC 2046: 1 to 70 characters)");
    const std::string delimiter = "--" + boundary;
    std::vector<FormPart> parts;
    std::size_t at = body.find(delimiter);
    if (at == std::string::npos)
        return fail("the multipart body never opens its boundary");
    std::size_t count = 0;
    for (;;) {
        at += delimiter.size();
        if (body.compare(at, 2, "--") == 0)
            return parts;  // the close delimiter
        if (body.compare(at, 2, "\r\n") != 0)
            return fail("a multipart boundary is not followed by a line break");
        at += 2;
        if (++count > maxParts)
            return fail("the multipart body has more than " + std::to_string(maxParts) + " parts");
        const auto headersEnd = body.find("\r\n\r\n", at);
        if (headersEnd == std::string::npos || headersEnd - at > 8192)
            return fail("a multipart part's headers do not end within 8 KiB");
        FormPart part;
        std::size_t line = at;
        while (line < headersEnd) {
            auto eol = body.find("\r\n", line);
            if (eol == std::string::npos || eol > headersEnd)
                eol = headersEnd;
            const std::string h = body.substr(line, eol - line);
            line = eol + 2;
            const auto colon = h.find(':');
            if (colon == std::string::npos)
                return fail("a multipart part has a header line without a colon");
            std::string name = h.substr(0, colon);
            std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
            const std::string value = trim(h.substr(colon + 1));
            if (name == "content-disposition") {
                part.name = parameter(value, "name");
                part.filename = parameter(value, "filename");
            } else if (name == "content-type") {
                part.contentType = value;
            }
        }
        const std::size_t dataStart = headersEnd + 4;
        const auto next = body.find("\r\n" + delimiter, dataStart);
        if (next == std::string::npos)
            return fail("a multipart part never ends (the body is cut short?)");
        part.data = body.substr(dataStart, next - dataStart);
        if (part.name.empty())
            return fail("a multipart part has no field name");
        parts.push_back(std::move(part));
        at = next + 2;
    }
}

}  // namespace vireo::api
