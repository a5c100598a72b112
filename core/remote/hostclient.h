#pragma once

// Another machine's Vireo server, as this studio speaks to it: the public HTTP API of
// `vireo-cli serve` (docs/design/http-api.md), nothing private. Synchronous libcurl calls, each
// on its own handle, so a worker thread per remote job may call at once.
//
// The host is trusted with the job, not with this machine: http and https only, no redirects
// (a host that answers 3xx is refused, the token never follows one), TLS verification always
// on, every answer bounded in size and time, the token never logged nor put in an error.

#include "inference/util/result.h"

#include <nlohmann/json_fwd.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace vireo::remote {

struct Host {
    std::string name;  // the user's label for it; the address when none was given
    std::string baseUrl;  // "http://10.0.0.5:8188": scheme, host and port, no path
    std::string token;  // the host's bearer token; never logged
};

// "10.0.0.5:8188" or "https://gpu.example.org/" as the base a client uses ("http://10.0.0.5:8188",
// "https://gpu.example.org"), or why it is not one: http(s) only, a host name, no user, path,
// query or fragment.
Result<std::string> normalizeBaseUrl(const std::string& text);

// A host's JSON answer, parsed with bounds on size, nesting and node count
// (jsonutil::parseUntrusted); anything else is a discarded value (is_discarded()).
nlohmann::json parseAnswer(std::string_view text);

class HostClient {
public:
    struct Options {
        std::chrono::seconds connectTimeout{5};
        std::chrono::seconds requestTimeout{30};  // a whole JSON answer
        std::size_t maxJsonBytes = 16u << 20;
        // A download or event stream under 1 byte/s for this long is taken as a dead host (an
        // event stream carries a status or progress line at least at every step).
        std::chrono::seconds stallTimeout{60};
    };
    explicit HostClient(Host host);
    HostClient(Host host, Options options);

    const Host& host() const { return m_host; }

    struct Reply {
        long status = 0;  // 0: no answer (transportError says why)
        std::map<std::string, std::string> headers;  // lower-case names
        std::string body;
        std::string transportError;
        // Set when this client refused the answer (a redirect, a body or event past its bound):
        // asking again will not help.
        std::string refused;
        bool answered() const { return status > 0 && transportError.empty(); }
        // The API's {"error": {"message"}} when it sent one, else the status line's words.
        std::string message() const;
    };

    // One request with an optional JSON body.
    Reply call(const std::string& method, const std::string& path, const std::string& jsonBody = {},
        const std::vector<std::string>& headers = {}, const std::atomic<bool>* cancel = nullptr) const;
    // GET as a JSON object, or an error naming the host and what it said.
    Result<nlohmann::json> getJson(const std::string& path, const std::atomic<bool>* cancel = nullptr) const;

    // A Server-Sent Events stream: onEvent(name, data) per event until the host closes it, a
    // cancel, or onEvent returns false. The reply carries the status and any transport error
    // (none when the stream ended as the host meant it to).
    using EventSink = std::function<bool(const std::string& event, const std::string& data)>;
    Reply events(const std::string& path, const EventSink& onEvent, const std::atomic<bool>* cancel = nullptr) const;

    // Bytes of a file from `offset` on, written to `fd` at `offset` onward. With `ifRange` (the
    // ETag of the bytes already held) a host whose file changed answers 200 with all of it:
    // `fromStart` says so, and the bytes are written from 0. More than `maxBytes` in all is
    // refused. onBytes(written so far in this call) is called as bytes land.
    struct Fetched {
        long status = 0;
        std::string etag;
        std::int64_t total = -1;  // the file's size as the host says it
        bool fromStart = false;
        std::int64_t written = 0;
        std::string error;  // empty: the answer was taken whole
    };
    Fetched fetch(const std::string& path, int fd, std::int64_t offset, const std::string& ifRange, std::int64_t maxBytes,
        const std::atomic<bool>* cancel = nullptr, const std::function<void(std::int64_t)>& onBytes = {}) const;

private:
    Host m_host;
    Options m_options;
};

}  // namespace vireo::remote
