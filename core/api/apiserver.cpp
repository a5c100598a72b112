// Boost 1.74's awaitable.hpp uses std::exchange without including <utility>.
#include <utility>
// Boost 1.74's Asio finds C++20 coroutines on GCC only; on Clang (clang-tidy) it looks for the
// Coroutines TS headers, which libstdc++ does not have, while <coroutine> works.
#if defined(__clang__) && defined(__cpp_impl_coroutine) && !defined(BOOST_ASIO_HAS_CO_AWAIT)
#define BOOST_ASIO_HAS_CO_AWAIT 1
#define BOOST_ASIO_HAS_STD_COROUTINE 1
#endif

#include "core/api/apiserver.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <spdlog/spdlog.h>

#include <atomic>
#include <cerrno>
#include <fcntl.h>
#include <mutex>
#include <set>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace vireo::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct ReplyState;

struct ApiServer::Shared {
    Options options;
    Handler handler;
    // Owned through pointers so the destructor can end them in order: the coroutines parked in
    // a route's reply are destroyed while the io_context still exists.
    std::unique_ptr<asio::io_context> io = std::make_unique<asio::io_context>(1);
    std::unique_ptr<tcp::acceptor> acceptor = std::make_unique<tcp::acceptor>(*io);
    std::thread thread;
    // Replies may come from the studio's thread after the server stopped: they post only while
    // the gate is open, and the server takes back the ones never answered when it closes.
    std::mutex gate;
    bool open = true;
    std::set<ReplyState*> pending;
    std::atomic<int> connections{0};
    std::atomic<std::uint64_t> accepted{0}, refused{0}, requests{0};
    std::string bound;  // the address as bound, for Host checks and URLs ("[::1]" for IPv6)
    bool loopback = true;
    std::uint16_t port = 0;
};

namespace {

using Shared = ApiServer::Shared;

std::string lower(std::string s)
{
    for (auto& c : s)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// What a reply carries back into the connection's coroutine; a reply that is dropped without
// being called still resumes it, with a 500, so no connection hangs on a defect of ours.
}  // namespace

struct ReplyState {
    std::shared_ptr<Shared> shared;
    std::function<void(Response)> resume;
    std::atomic<bool> done{false};
    ReplyState(std::shared_ptr<Shared> s, std::function<void(Response)> r) : shared(std::move(s)), resume(std::move(r))
    {
        std::lock_guard lock(shared->gate);
        shared->pending.insert(this);
    }
    void deliver(Response r)
    {
        if (done.exchange(true))
            return;
        std::lock_guard lock(shared->gate);
        shared->pending.erase(this);
        if (!shared->open || !resume)
            return;
        asio::post(*shared->io, [resume = std::move(resume), r = std::move(r)]() mutable { resume(std::move(r)); });
    }
    ~ReplyState()
    {
        if (!done.load()) {
            spdlog::error("api: a request was dropped without an answer");
            deliver(errorResponse(500, "the request was dropped without an answer (a defect of Vireo; please report it)"));
        }
    }
};

namespace {

// Not a coroutine: the initiation owns the request. GCC 12 destroys non-trivial temporaries in
// a co_await's full expression twice (a double free seen here), so every co_await below takes
// named objects only.
auto askHandler(const std::shared_ptr<Shared>& shared, Request& request)
{
    return asio::async_initiate<const asio::use_awaitable_t<>&, void(Response)>(
        [shared, request = std::move(request)](auto handler) mutable {
            auto h = std::make_shared<decltype(handler)>(std::move(handler));
            auto state = std::make_shared<ReplyState>(shared, [h](Response r) { (*h)(std::move(r)); });
            try {
                shared->handler(std::move(request), [state](Response r) { state->deliver(std::move(r)); });
            } catch (const std::exception& e) {
                spdlog::error("api: a route failed: {}", e.what());
                state->deliver(errorResponse(500, "the request failed inside Vireo (a defect; please report it)"));
            }
        },
        asio::use_awaitable);
}

bool hostAllowed(const Shared& s, const std::string& hostHeader)
{
    if (!s.loopback)
        return true;  // beyond loopback the token guards every request; proxies rename hosts
    std::string host = lower(hostHeader);
    const std::string port = std::to_string(s.port);
    // "name[:port]", where a bare IPv6 address comes bracketed.
    std::string name = host;
    if (!host.empty() && host.front() == '[') {
        const auto close = host.find(']');
        if (close == std::string::npos)
            return false;
        name = host.substr(0, close + 1);
        const std::string rest = host.substr(close + 1);
        if (!rest.empty() && rest != ":" + port)
            return false;
    } else if (const auto colon = host.rfind(':'); colon != std::string::npos) {
        if (host.substr(colon + 1) != port)
            return false;
        name = host.substr(0, colon);
    }
    if (name == "localhost" || name == "127.0.0.1" || name == "[::1]" || name == lower(s.bound))
        return true;
    for (const auto& h : s.options.hostNames)
        if (name == lower(h))
            return true;
    return false;
}

// The body is moved, not copied: an upload may be tens of megabytes.
Request toRequest(http::request<http::string_body>&& req, std::map<std::string, std::string> query, std::string path)
{
    Request r;
    r.method = std::string(req.method_string());
    r.path = std::move(path);
    r.query = std::move(query);
    for (const auto& f : req) {
        auto name = lower(std::string(f.name_string()));
        auto& slot = r.headers[name];
        slot = slot.empty() ? std::string(f.value()) : slot + ", " + std::string(f.value());
    }
    r.body = std::move(req.body());
    return r;
}

// A value that came from a route (a file name, a header) never carries a line break into ours.
bool headerSafe(const std::string& v)
{
    return v.find_first_of("\r\n") == std::string::npos && v.find('\0') == std::string::npos;
}

template <class Message>
void applyHeaders(Message& m, const Response& r, const std::string& cors)
{
    for (const auto& [name, value] : r.headers)
        if (headerSafe(name) && headerSafe(value))
            m.set(name, value);
    m.set(http::field::server, "vireo-studio");
    m.set("X-Content-Type-Options", "nosniff");
    if (!cors.empty()) {
        m.set(http::field::access_control_allow_origin, cors);
        m.set(http::field::vary, "Origin");
    }
}

class Connection {
public:
    Connection(std::shared_ptr<Shared> shared, tcp::socket socket) : m_shared(std::move(shared)), m_stream(std::move(socket)) {}

    asio::awaitable<void> run()
    {
        beast::flat_buffer buffer;
        const auto& o = m_shared->options;
        for (;;) {
            http::request_parser<http::string_body> parser;
            parser.header_limit(static_cast<std::uint32_t>(o.headerLimitBytes));
            parser.body_limit(o.maxBodyBytes);
            beast::error_code ec;
            m_stream.expires_after(o.headerTimeout);
            co_await http::async_read_header(m_stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
            if (ec) {
                co_await refuseBadRequest(ec);
                co_return;
            }
            ++m_shared->requests;
            auto& header = parser.get();
            m_cors.clear();
            const bool keepAlive = header.keep_alive();
            // The gate: what can be refused before a byte of body is read.
            auto target = splitTarget(std::string(header.target()));
            std::optional<Response> refusal;
            if (!target)
                refusal = errorResponse(400, "the request target is not a path this server understands (malformed percent-encoding?)");
            else if (const auto host = header[http::field::host]; host.empty() || !hostAllowed(*m_shared, std::string(host)))
                refusal = errorResponse(403, "the Host header names no address this server answers to (DNS rebinding is refused)");
            else if (const auto origin = std::string(header[http::field::origin]); !origin.empty()) {
                const auto& allowed = o.allowedOrigins;
                if (std::find(allowed.begin(), allowed.end(), origin) == allowed.end())
                    refusal = errorResponse(403,
                        "requests from web pages (Origin " + origin
                            + ") are refused; allow the origin in the API's settings to call it from a browser");
                else
                    m_cors = origin;
            }
            if (!refusal && header.method() == http::verb::options && !m_cors.empty()) {
                Response pre;
                pre.status = 204;
                pre.headers = {{"Access-Control-Allow-Methods", "GET, HEAD, POST, DELETE"},
                    {"Access-Control-Allow-Headers", "Authorization, Content-Type, Range, If-Range"}, {"Access-Control-Max-Age", "600"}};
                refusal = pre;
            }
            if (!refusal && !o.token.empty()) {
                const std::string auth(header[http::field::authorization]);
                const std::string scheme = "bearer ";
                if (auth.size() < scheme.size() || lower(auth.substr(0, scheme.size())) != scheme
                    || !constantTimeEquals(auth.substr(scheme.size()), o.token)) {
                    refusal = errorResponse(401,
                        auth.empty() ? "this server asks for a bearer token (Authorization: Bearer ...)"
                                     : "the bearer token is not this server's",
                        {}, "invalid_api_key");
                    refusal->headers.emplace_back("WWW-Authenticate", "Bearer");
                }
            }
            const std::size_t limit = o.bodyLimit
                ? std::min(o.bodyLimit(std::string(header.method_string()), target ? target->first : ""), o.maxBodyBytes)
                : std::min<std::size_t>(1 << 20, o.maxBodyBytes);
            if (!refusal && parser.content_length() && *parser.content_length() > limit)
                refusal = errorResponse(413,
                    "the request body is " + std::to_string(*parser.content_length()) + " bytes; this route takes at most "
                        + std::to_string(limit));
            if (refusal) {
                // The body was not read: the connection cannot carry another request.
                refusal->close = refusal->close || !parser.is_done();
                const std::string method(header.method_string());
                const Request none;
                co_await send(*refusal, method, none);
                if (refusal->close || !keepAlive)
                    co_return;
                continue;
            }
            if (!parser.is_done()) {
                parser.body_limit(limit);
                if (lower(std::string(header[http::field::expect])) == "100-continue") {
                    http::response<http::empty_body> cont{http::status::continue_, 11};
                    m_stream.expires_after(o.writeTimeout);
                    co_await http::async_write(m_stream, cont, asio::redirect_error(asio::use_awaitable, ec));
                    if (ec)
                        co_return;
                }
                m_stream.expires_after(o.bodyTimeout);
                co_await http::async_read(m_stream, buffer, parser, asio::redirect_error(asio::use_awaitable, ec));
                if (ec) {
                    co_await refuseBadRequest(ec);
                    co_return;
                }
            }
            m_stream.expires_never();
            Request request = toRequest(parser.release(), std::move(target->second), std::move(target->first));
            const std::string method = request.method;
            const Request echo{method, request.path, {}, request.headers, {}};
            auto asked = askHandler(m_shared, request);
            Response response = co_await std::move(asked);
            response.close = response.close || !keepAlive;
            co_await send(response, method, echo);
            if (!m_stream.socket().is_open() || response.close)
                co_return;
        }
    }

private:
    // A request Beast could not parse, or that broke a limit: an answer when one can still be
    // given, then the connection closes.
    asio::awaitable<void> refuseBadRequest(const beast::error_code& ec)
    {
        if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == beast::error::timeout
            || ec == asio::error::operation_aborted || ec == asio::error::connection_reset)
            co_return;
        Response r;
        if (ec == http::error::header_limit)
            r = errorResponse(
                431, "the request's headers are larger than " + std::to_string(m_shared->options.headerLimitBytes) + " bytes");
        else if (ec == http::error::body_limit || ec == http::error::buffer_overflow)
            r = errorResponse(413, "the request body is larger than this route takes");
        else
            r = errorResponse(400, "the request is not well-formed HTTP/1.1 (" + ec.message() + ")");
        r.close = true;
        const std::string method = "GET";
        const Request none;
        co_await send(r, method, none);
    }

    asio::awaitable<void> send(Response& r, const std::string& method, const Request& request)
    {
        try {
            if (r.file)
                co_await sendFile(r, method, request);
            else if (r.events)
                co_await sendEvents(r);
            else
                co_await sendBody(r, method);
        } catch (const boost::system::system_error&) {
            r.close = true;  // the client went away or stalled past the deadline
        }
        if (r.close) {
            beast::error_code ignored;
            m_stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
            m_stream.close();
        }
    }

    asio::awaitable<void> sendBody(Response& r, const std::string& method)
    {
        http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
        applyHeaders(res, r, m_cors);
        const bool noBody = r.status == 204 || r.status == 304 || (r.status >= 100 && r.status < 200);
        if (!noBody)
            res.set(http::field::content_type, r.contentType);
        res.keep_alive(!r.close);
        if (!noBody) {
            res.body() = std::move(r.body);
            res.prepare_payload();
            if (method == "HEAD")
                res.body().clear();  // the length stays the GET's (RFC 9110 §9.3.2)
        }
        m_stream.expires_after(m_shared->options.writeTimeout);
        if (method == "HEAD") {
            http::response<http::empty_body> head{res.result(), 11};
            for (const auto& f : res)
                head.set(f.name_string(), f.value());
            co_await http::async_write(m_stream, head, asio::use_awaitable);
        } else {
            co_await http::async_write(m_stream, res, asio::use_awaitable);
        }
    }

    asio::awaitable<void> sendFile(Response& r, const std::string& method, const Request& request)
    {
        const auto& f = *r.file;
        const int fd = ::open(f.path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st {};
        if (fd < 0 || ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (fd >= 0)
                ::close(fd);
            Response gone = errorResponse(404, "the file of this item is gone from disk (moved or deleted)");
            gone.close = r.close;
            co_await sendBody(gone, method);
            co_return;
        }
        struct Closer {
            int fd;
            ~Closer() { ::close(fd); }
        } closer{fd};
        const std::int64_t size = st.st_size;
        // Outputs are never rewritten in place (a new one gets a new name), so the inode, size and
        // change time identify the bytes: a strong validator without hashing a large file.
        char tag[96];
        std::snprintf(tag, sizeof tag, "\"%llx-%llx-%llx\"", static_cast<unsigned long long>(st.st_ino),
            static_cast<unsigned long long>(size),
            static_cast<unsigned long long>(st.st_mtim.tv_sec) * 1000000000ull + static_cast<unsigned long long>(st.st_mtim.tv_nsec));
        const std::string etag = tag;
        const auto header = [&](const std::string& name) { return request.header(name); };
        Response base = r;
        base.headers.emplace_back("ETag", etag);
        base.headers.emplace_back("Accept-Ranges", "bytes");
        base.headers.emplace_back("Cache-Control", f.cacheControl);
        if (!f.downloadName.empty() && headerSafe(f.downloadName) && f.downloadName.find('"') == std::string::npos)
            base.headers.emplace_back("Content-Disposition", "inline; filename=\"" + f.downloadName + "\"");
        if (const auto inm = header("if-none-match"); !inm.empty() && noneMatch(inm, etag) && (method == "GET" || method == "HEAD")) {
            Response nm;
            nm.status = 304;
            nm.headers = base.headers;
            nm.close = r.close;
            co_await sendBody(nm, method);
            co_return;
        }
        const auto d = decideRange(method, header("range"), header("if-range"), etag, size);
        if (d.kind == RangeDecision::Kind::Unsatisfiable) {
            Response bad = errorResponse(416, "the range asks for bytes past the end of the file (" + std::to_string(size) + " bytes)");
            bad.headers = base.headers;
            bad.headers.emplace_back("Content-Range", "bytes */" + std::to_string(size));
            bad.close = r.close;
            co_await sendBody(bad, method);
            co_return;
        }
        const bool partial = d.kind == RangeDecision::Kind::Partial;
        http::response<http::buffer_body> res{partial ? http::status::partial_content : http::status::ok, 11};
        applyHeaders(res, base, m_cors);
        res.set(http::field::content_type, f.contentType);
        if (partial)
            res.set(http::field::content_range,
                "bytes " + std::to_string(d.first) + "-" + std::to_string(d.first + d.length - 1) + "/" + std::to_string(size));
        res.content_length(static_cast<std::uint64_t>(d.length));
        res.keep_alive(!r.close);
        res.body().data = nullptr;
        res.body().more = method != "HEAD" && d.length > 0;
        http::response_serializer<http::buffer_body> sr{res};
        const auto& o = m_shared->options;
        m_stream.expires_after(o.writeTimeout);
        co_await http::async_write_header(m_stream, sr, asio::use_awaitable);
        if (method == "HEAD" || d.length == 0)
            co_return;
        std::vector<char> chunk(256 * 1024);
        std::int64_t at = d.first, left = d.length;
        while (left > 0) {
            const auto want = static_cast<std::size_t>(std::min<std::int64_t>(left, static_cast<std::int64_t>(chunk.size())));
            const auto got = ::pread(fd, chunk.data(), want, at);
            if (got <= 0) {
                // The file shrank under us: the length already promised cannot be kept.
                spdlog::warn("api: {} could not be read to its end ({})", f.path, got < 0 ? std::strerror(errno) : "it shrank");
                r.close = true;
                co_return;
            }
            at += got;
            left -= got;
            res.body().data = chunk.data();
            res.body().size = static_cast<std::size_t>(got);
            res.body().more = left > 0;
            m_stream.expires_after(o.writeTimeout);
            beast::error_code ec;
            co_await http::async_write(m_stream, sr, asio::redirect_error(asio::use_awaitable, ec));
            if (ec == http::error::need_buffer)
                continue;
            if (ec)
                throw boost::system::system_error(ec);
        }
        if (!sr.is_done()) {
            res.body().data = nullptr;
            res.body().size = 0;
            res.body().more = false;
            co_await http::async_write(m_stream, sr, asio::use_awaitable);
        }
    }

    asio::awaitable<void> sendEvents(Response& r)
    {
        auto events = r.events;
        http::response<http::buffer_body> res{static_cast<http::status>(r.status), 11};
        applyHeaders(res, r, m_cors);
        res.set(http::field::content_type, "text/event-stream");
        res.set(http::field::cache_control, "no-store");
        res.chunked(true);
        res.body().data = nullptr;
        res.body().more = true;
        http::response_serializer<http::buffer_body> sr{res};
        const auto& o = m_shared->options;
        m_stream.expires_after(o.writeTimeout);
        co_await http::async_write_header(m_stream, sr, asio::use_awaitable);
        auto timer = std::make_shared<asio::steady_timer>(m_stream.get_executor());
        std::weak_ptr<asio::steady_timer> weak = timer;
        auto& io = *m_shared->io;
        events->setWaker([weak, &io] {
            asio::post(io, [weak] {
                if (auto t = weak.lock())
                    t->cancel();
            });
        });
        struct Abandon {
            std::shared_ptr<EventStream> s;
            ~Abandon() { s->abandon(); }
        } abandon{events};
        for (;;) {
            bool closed = false;
            auto batch = events->take(&closed);
            std::string text;
            for (auto& e : batch)
                text += e;
            if (text.empty() && !closed) {
                // Nothing new: wait for a push, or send a comment line now and then so proxies
                // and the client know the stream is alive.
                timer->expires_after(std::chrono::seconds(15));
                beast::error_code ec;
                co_await timer->async_wait(asio::redirect_error(asio::use_awaitable, ec));
                if (ec != asio::error::operation_aborted)
                    text = ": keep-alive\n\n";
                else
                    continue;
            }
            if (!text.empty()) {
                res.body().data = text.data();
                res.body().size = text.size();
                res.body().more = true;
                m_stream.expires_after(o.writeTimeout);
                beast::error_code ec;
                co_await http::async_write(m_stream, sr, asio::redirect_error(asio::use_awaitable, ec));
                if (ec && ec != http::error::need_buffer)
                    throw boost::system::system_error(ec);
            }
            if (closed)
                break;
        }
        res.body().data = nullptr;
        res.body().size = 0;
        res.body().more = false;
        m_stream.expires_after(o.writeTimeout);
        co_await http::async_write(m_stream, sr, asio::use_awaitable);
    }

    std::shared_ptr<Shared> m_shared;
    beast::tcp_stream m_stream;
    std::string m_cors;  // the allowed Origin of the current request, echoed back
};

asio::awaitable<void> serve(std::shared_ptr<Shared> shared, tcp::socket socket)
{
    struct Count {
        std::atomic<int>& n;
        ~Count() { --n; }
    } count{shared->connections};
    try {
        Connection c(shared, std::move(socket));
        co_await c.run();
    } catch (const std::exception& e) {
        spdlog::debug("api: a connection ended: {}", e.what());
    }
}

asio::awaitable<void> acceptLoop(std::shared_ptr<Shared> shared)
{
    for (;;) {
        beast::error_code ec;
        tcp::socket socket = co_await shared->acceptor->async_accept(asio::redirect_error(asio::use_awaitable, ec));
        if (ec == asio::error::operation_aborted || !shared->acceptor->is_open())
            co_return;
        if (ec) {
            // Out of descriptors: wait a little rather than spin on the error.
            asio::steady_timer pause(*shared->io, std::chrono::milliseconds(50));
            co_await pause.async_wait(asio::redirect_error(asio::use_awaitable, ec));
            continue;
        }
        ++shared->accepted;
        if (shared->connections.load() >= shared->options.maxConnections) {
            ++shared->refused;
            socket.close(ec);  // at the cap: closed at once, costing no memory
            continue;
        }
        ++shared->connections;
        asio::co_spawn(*shared->io, serve(shared, std::move(socket)), asio::detached);
    }
}

}  // namespace

bool ApiServer::isLoopback(const std::string& host)
{
    beast::error_code ec;
    const auto a = asio::ip::make_address(host, ec);
    return !ec && a.is_loopback();
}

Result<std::unique_ptr<ApiServer>> ApiServer::start(Options options, Handler handler)
{
    beast::error_code ec;
    const auto address = asio::ip::make_address(options.host, ec);
    if (ec)
        return makeError(ErrorCode::InvalidArgument,
            options.host + " is not an IP address to listen on (give 127.0.0.1, ::1 or an interface's address)");
    if (!address.is_loopback() && options.token.empty())
        return makeError(ErrorCode::PermissionDenied,
            "listening on " + options.host + " (beyond this machine) needs an API token; the server refuses to start without one");
    auto shared = std::make_shared<Shared>();
    shared->options = std::move(options);
    shared->handler = std::move(handler);
    const tcp::endpoint endpoint(address, shared->options.port);
    auto& acceptor = *shared->acceptor;
    acceptor.open(endpoint.protocol(), ec);
    if (!ec)
        acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec)
        acceptor.bind(endpoint, ec);
    if (!ec)
        acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
        return makeError(ErrorCode::Io,
            "cannot listen on " + shared->options.host + ":" + std::to_string(shared->options.port) + ": " + ec.message()
                + (ec == asio::error::address_in_use ? " (another program, or another Vireo, uses that port; choose another)" : ""));
    shared->port = acceptor.local_endpoint().port();
    shared->bound = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
    shared->loopback = address.is_loopback();
    asio::co_spawn(*shared->io, acceptLoop(shared), asio::detached);
    shared->thread = std::thread([s = shared.get()] {
        for (;;) {
            try {
                s->io->run();
                return;
            } catch (const std::exception& e) {
                // A throw out of a handler is a defect of ours; the server keeps serving.
                spdlog::error("api: {}", e.what());
            }
        }
    });
    std::unique_ptr<ApiServer> server(new ApiServer);
    server->m_shared = std::move(shared);
    return server;
}

ApiServer::~ApiServer()
{
    if (!m_shared)
        return;
    // Requests still with the studio never get their answer: their coroutines are taken back
    // and destroyed while the io_context lives (their sockets belong to it), then everything
    // the io_context holds (each connection keeps Shared alive) goes with it.
    std::vector<std::function<void(Response)>> parked;
    {
        std::lock_guard lock(m_shared->gate);
        m_shared->open = false;
        for (auto* p : m_shared->pending)
            parked.push_back(std::move(p->resume));
        m_shared->pending.clear();
    }
    m_shared->io->stop();
    if (m_shared->thread.joinable())
        m_shared->thread.join();
    parked.clear();
    beast::error_code ec;
    m_shared->acceptor->close(ec);
    m_shared->acceptor.reset();
    m_shared->io.reset();
}

std::uint16_t ApiServer::port() const
{
    return m_shared->port;
}

std::string ApiServer::host() const
{
    return m_shared->bound;
}

std::string ApiServer::baseUrl() const
{
    return "http://" + m_shared->bound + ":" + std::to_string(m_shared->port);
}

ApiServer::Stats ApiServer::stats() const
{
    return {m_shared->accepted.load(), m_shared->refused.load(), m_shared->requests.load(), m_shared->connections.load()};
}

}  // namespace vireo::api
