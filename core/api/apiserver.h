#pragma once

// The local API's HTTP/1.1 server: Boost.Beast on one thread of its own (docs/design/http-api.md
// says why Beast). It owns the sockets and every limit a hostile client could push against:
// header and body sizes, per-phase deadlines (slowloris), the number of connections; and the
// gate checks that need no studio state: Host and Origin against DNS rebinding, the bearer
// token. Everything past those goes to the handler as a plain Request; the handler answers once,
// from any thread. Files and event streams in the answer are sent from here, with Range.

#include "core/api/http.h"
#include "inference/util/result.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vireo::api {

class ApiServer {
public:
    struct Options {
        std::string host = "127.0.0.1";  // an IP address; loopback unless the user says otherwise
        std::uint16_t port = 0;  // 0: any free port (tests)
        // The bearer token every request must carry; empty: none asked. A server bound beyond
        // loopback refuses to start without one.
        std::string token;
        // Origins allowed to call from a browser (CORS); empty: a request with an Origin is refused.
        std::vector<std::string> allowedOrigins;
        // Host header names accepted besides the loopback names and the bound address (a reverse
        // proxy's public name).
        std::vector<std::string> hostNames;
        int maxConnections = 256;
        std::chrono::milliseconds headerTimeout{15000};  // the request line and headers, idle included
        std::chrono::milliseconds bodyTimeout{120000};  // a whole request body (an upload)
        std::chrono::milliseconds writeTimeout{60000};  // each piece of an answer a client must take
        std::size_t headerLimitBytes = 16 * 1024;
        std::size_t maxBodyBytes = 64 * 1024 * 1024;  // the largest body any route takes
        // The body a route takes (at most maxBodyBytes); default: 1 MiB for every route.
        std::function<std::size_t(const std::string& method, const std::string& path)> bodyLimit;
    };
    using Reply = std::function<void(Response)>;
    // Called on the server's thread for each request that passed the gate. `reply` must be called
    // once, from any thread; a reply dropped unanswered answers 500 (a defect of ours, logged).
    using Handler = std::function<void(Request, Reply)>;

    static Result<std::unique_ptr<ApiServer>> start(Options options, Handler handler);
    ~ApiServer();  // closes every connection and joins the thread

    std::uint16_t port() const;
    std::string host() const;
    // "http://127.0.0.1:8188", the base the routes' own URLs start with.
    std::string baseUrl() const;

    struct Stats {
        std::uint64_t accepted = 0, refused = 0, requests = 0;
        int open = 0;
    };
    Stats stats() const;

    static bool isLoopback(const std::string& host);

    struct Shared;  // the io_context, sockets and counters (apiserver.cpp)

private:
    ApiServer() = default;
    std::shared_ptr<Shared> m_shared;
};

}  // namespace vireo::api
