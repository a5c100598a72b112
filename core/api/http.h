#pragma once

// What the local API's routes see of HTTP: a parsed request and the answer, as plain values.
// Boost.Beast stays inside the server (apiserver.cpp); the routes (ApiService) and their tests
// never include it. The RFC 9110 rules the server applies to files (Range, If-Range, ETag) are
// pure functions here so a unit test can hold them to the RFC's examples.

#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace vireo::api {

struct Request {
    std::string method;  // "GET", "POST", ... as sent
    std::string path;  // percent-decoded, without the query
    std::map<std::string, std::string> query;  // percent-decoded; the last of a repeated name wins
    std::map<std::string, std::string> headers;  // names in lower case; repeated fields joined by ", "
    std::string body;
    std::string header(const std::string& lowerName) const;
};

// A stream of Server-Sent Events that outlives the route that made it: the studio's thread
// pushes, the connection's thread drains. Closing ends the response.
class EventStream {
public:
    void push(std::string event);
    void close();
    // The connection's side: the events pushed since the last call, and whether it has ended.
    std::vector<std::string> take(bool* closed);
    // Called (on the pushing thread) after each push or close; the connection sets it to wake.
    void setWaker(std::function<void()> wake);
    // The client went away: the pushing side may stop producing.
    void abandon();
    bool abandoned() const;

private:
    mutable std::mutex m_mutex;
    std::vector<std::string> m_events;
    bool m_closed = false, m_abandoned = false;
    std::function<void()> m_wake;
};

struct FileBody {
    std::string path;  // opened without following a symbolic link; must be a regular file
    std::string contentType;
    std::string cacheControl = "private, max-age=3600";
    std::string downloadName;  // Content-Disposition filename; empty: none
};

struct Response {
    int status = 200;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string contentType = "application/json";
    std::string body;
    std::optional<FileBody> file;  // the body is this file (Range applies), not `body`
    std::shared_ptr<EventStream> events;  // the body is this stream (text/event-stream)
    bool close = false;  // close the connection after this answer
};

Response jsonResponse(int status, const nlohmann::json& body);
// OpenAI's error shape: {"error": {"message", "type", "param", "code"}}.
Response errorResponse(int status, const std::string& message, const std::string& param = {}, const std::string& code = {});
// The reason phrase's type name OpenAI uses for a status ("invalid_request_error", ...).
std::string errorType(int status);

// RFC 9110 §14: what a GET of a file of `size` bytes with this Range / If-Range answers.
struct RangeDecision {
    enum class Kind { Full, Partial, Unsatisfiable } kind = Kind::Full;
    std::int64_t first = 0, length = 0;  // the bytes sent (Full: 0 and size)
};
// `etag` is the file's current strong validator (quoted). A Range on another method, in a unit
// other than bytes, malformed, or naming several ranges is ignored (a full 200, which the RFC
// allows); an If-Range that is not the current strong ETag also gets the full file.
RangeDecision decideRange(
    const std::string& method, const std::string& range, const std::string& ifRange, const std::string& etag, std::int64_t size);
// Whether an If-None-Match list holds this ETag (weak comparison, RFC 9110 §13.1.2), or is "*".
bool noneMatch(const std::string& ifNoneMatch, const std::string& etag);

// "%2F" and "+" as a form would send them are not decoded alike: paths keep '+', queries make it
// a space. A malformed escape, or one that makes a NUL, leaves the text undecodable (nullopt).
std::optional<std::string> percentDecode(const std::string& text, bool plusIsSpace);
// Splits a request target into the decoded path and query; nullopt for a target that is not
// origin-form ("/..."), or that decodes badly.
std::optional<std::pair<std::string, std::map<std::string, std::string>>> splitTarget(const std::string& target);

// Compares in time that depends on the lengths only (a bearer token).
bool constantTimeEquals(const std::string& a, const std::string& b);

// A multipart/form-data body as the openai client sends it: its parts in order (nested values
// come flattened, "knobs[id]", "loras[][path]", and order pairs them), each with the filename and
// type of an uploaded part. Bounded: at most `maxParts` parts. nullopt with the reason in
// `error` for a body that is not well formed.
struct FormPart {
    std::string name, filename, contentType, data;
};
std::optional<std::vector<FormPart>> parseMultipart(
    const std::string& contentType, const std::string& body, std::string* error, std::size_t maxParts = 32);

}  // namespace vireo::api
