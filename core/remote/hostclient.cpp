#include "core/remote/hostclient.h"

#include "inference/util/jsonlimits.h"
#include "inference/util/text.h"

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include <QUrl>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace vireo::remote {

namespace {

// One transfer's state, reached from libcurl's callbacks.
struct Transfer {
    HostClient::Reply* reply = nullptr;
    const std::atomic<bool>* cancel = nullptr;
    std::size_t maxBody = 0;
    bool tooLarge = false;
    // A body that is not kept whole: the event reader or the file writer takes it.
    std::function<bool(const char*, std::size_t, long status)> sink;
    bool sinkStopped = false;
};

std::size_t onHeader(char* data, std::size_t size, std::size_t count, void* user)
{
    auto* t = static_cast<Transfer*>(user);
    const std::string line(data, size * count);
    if (line.rfind("HTTP/", 0) == 0) {
        t->reply->headers.clear();  // a 100 Continue's headers are not the answer's
        // Known here, before the first body byte: a download's sink needs it to place the bytes.
        const auto space = line.find(' ');
        t->reply->status = space == std::string::npos ? 0 : std::strtol(line.c_str() + space + 1, nullptr, 10);
        return size * count;
    }
    const auto colon = line.find(':');
    if (colon != std::string::npos && t->reply->headers.size() < 100) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
        auto value = line.substr(colon + 1);
        const auto first = value.find_first_not_of(" \t");
        const auto last = value.find_last_not_of(" \t\r\n");
        t->reply->headers[name] = first == std::string::npos ? std::string() : value.substr(first, last - first + 1);
    }
    return size * count;
}

std::size_t onBody(char* data, std::size_t size, std::size_t count, void* user)
{
    auto* t = static_cast<Transfer*>(user);
    const auto n = size * count;
    if (t->sink) {
        if (!t->sink(data, n, t->reply->status)) {
            t->sinkStopped = true;
            return 0;
        }
        return n;
    }
    if (t->reply->body.size() + n > t->maxBody) {
        t->tooLarge = true;
        return 0;
    }
    t->reply->body.append(data, n);
    return n;
}

int onProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t)
{
    const auto* t = static_cast<Transfer*>(user);
    return t->cancel && t->cancel->load() ? 1 : 0;
}

}  // namespace

Result<std::string> normalizeBaseUrl(const std::string& text)
{
    auto trimmed = QString::fromStdString(text).trimmed();
    if (trimmed.isEmpty())
        return makeError(ErrorCode::InvalidArgument, "a host's address is empty");
    if (!trimmed.contains(QStringLiteral("://")))
        trimmed.prepend(QStringLiteral("http://"));
    const QUrl url(trimmed, QUrl::StrictMode);
    const auto scheme = url.scheme().toLower();
    const auto shown = terminalSafe(text.substr(0, 200));
    if (!url.isValid() || url.host().isEmpty())
        return makeError(ErrorCode::InvalidArgument, "'" + shown + "' is not a host address (for example 192.168.1.20:8188)");
    if (scheme != QStringLiteral("http") && scheme != QStringLiteral("https"))
        return makeError(ErrorCode::InvalidArgument, "'" + shown + "': a Vireo host speaks http or https only");
    if (!url.userInfo().isEmpty())
        return makeError(ErrorCode::InvalidArgument, "'" + shown + "': put the token in the token field, not in the address");
    if ((!url.path().isEmpty() && url.path() != QStringLiteral("/")) || url.hasQuery() || url.hasFragment())
        return makeError(ErrorCode::InvalidArgument, "'" + shown + "': give the server's address only, without a path");
    QString base = scheme + QStringLiteral("://")
        + (url.host().contains(QLatin1Char(':')) ? QLatin1Char('[') + url.host() + QLatin1Char(']') : url.host());
    if (url.port() > 0)
        base += QLatin1Char(':') + QString::number(url.port());
    return base.toLower().toStdString();
}

nlohmann::json parseAnswer(std::string_view text)
{
    jsonutil::JsonLimits limits;
    limits.maxBytes = 32u << 20;
    limits.maxDepth = 32;
    limits.maxValues = 1u << 20;
    auto parsed = jsonutil::parseUntrusted(text, "the host's answer", limits);
    return parsed ? std::move(*parsed) : nlohmann::json(nlohmann::json::value_t::discarded);
}

HostClient::HostClient(Host host) : HostClient(std::move(host), Options{}) {}

HostClient::HostClient(Host host, Options options) : m_host(std::move(host)), m_options(options) {}

std::string HostClient::Reply::message() const
{
    if (!transportError.empty())
        return transportError;
    const auto j = parseAnswer(body);
    if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].value("message", nlohmann::json()).is_string())
        return terminalSafe(j["error"]["message"].get<std::string>().substr(0, 2000));
    return "HTTP " + std::to_string(status);
}

namespace {

enum class Kind { Json, Stream };

HostClient::Reply perform(const Host& host, const HostClient::Options& o, const std::string& method, const std::string& path,
    const std::string& body, const std::vector<std::string>& extraHeaders, const std::atomic<bool>* cancel, Kind kind,
    std::function<bool(const char*, std::size_t, long)> sink)
{
    HostClient::Reply reply;
    if (path.empty() || path.front() != '/') {
        reply.transportError = "internal: a path without its leading slash";
        return reply;
    }
    CURL* curl = curl_easy_init();
    if (!curl) {
        reply.transportError = "cannot start a connection";
        return reply;
    }
    Transfer t{&reply, cancel, o.maxJsonBytes, false, std::move(sink), false};
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Accept-Encoding: identity");
    headers = curl_slist_append(headers, "Expect:");
    if (!body.empty())
        headers = curl_slist_append(headers, "Content-Type: application/json");
    for (const auto& h : extraHeaders)
        headers = curl_slist_append(headers, h.c_str());
    std::string auth;
    // A token with a line break would let it add headers of its own choosing: not sent.
    if (!host.token.empty() && host.token.find_first_of("\r\n") == std::string::npos) {
        auth = "Authorization: Bearer " + host.token;
        headers = curl_slist_append(headers, auth.c_str());
    }
    const auto url = host.baseUrl + path;
    char errorBuffer[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "vireo-studio");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");  // a host on the LAN is not reached through a proxy
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(o.connectTimeout.count()));
    if (kind == Kind::Json) {
        curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(o.requestTimeout.count()));
    } else {
        curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(o.stallTimeout.count()));
    }
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errorBuffer);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, onHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, onBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, onProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &t);
    if (method == "POST") {
        curl_easy_setopt(curl, CURLOPT_POST, 1L);
        curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
        curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    } else if (method != "GET") {
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
    }
    const CURLcode code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &reply.status);
    if (code != CURLE_OK && !t.sinkStopped) {
        reply.transportError = cancel && cancel->load() ? "cancelled"
            : t.tooLarge     ? "the host's answer is larger than " + std::to_string(o.maxJsonBytes >> 20) + " MiB"
            : errorBuffer[0] ? errorBuffer
                             : curl_easy_strerror(code);
    }
    if (t.tooLarge)
        reply.refused = reply.transportError;
    if (reply.transportError.empty() && reply.status >= 300 && reply.status < 400) {
        reply.transportError =
            "the host answered with a redirect (HTTP " + std::to_string(reply.status) + "), which is not followed: give its final address";
        reply.refused = reply.transportError;
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return reply;
}

}  // namespace

HostClient::Reply HostClient::call(const std::string& method, const std::string& path, const std::string& jsonBody,
    const std::vector<std::string>& headers, const std::atomic<bool>* cancel) const
{
    return perform(m_host, m_options, method, path, jsonBody, headers, cancel, Kind::Json, {});
}

Result<nlohmann::json> HostClient::getJson(const std::string& path, const std::atomic<bool>* cancel) const
{
    const auto r = call("GET", path, {}, {}, cancel);
    if (!r.answered())
        return makeError(ErrorCode::Io, "host " + m_host.name + " (" + m_host.baseUrl + "): " + r.message());
    if (r.status == 401)
        return makeError(
            ErrorCode::PermissionDenied, "host " + m_host.name + " refused the token (HTTP 401): check it in Settings → Hosts");
    if (r.status != 200)
        return makeError(r.status == 404 ? ErrorCode::NotFound : ErrorCode::Io,
            "host " + m_host.name + " answered " + path + " with HTTP " + std::to_string(r.status) + ": " + r.message());
    auto j = parseAnswer(r.body);
    if (!j.is_object())
        return makeError(
            ErrorCode::InvalidFormat, "host " + m_host.name + " answered " + path + " with something that is not a JSON object");
    return j;
}

HostClient::Reply HostClient::events(const std::string& path, const EventSink& onEvent, const std::atomic<bool>* cancel) const
{
    // The stream is parsed as it arrives: lines, "event:" and "data:" fields, a blank line ends
    // an event. One event (a preview's JPEG) is bounded; a host that sends more is cut off.
    std::string buffer, event, data;
    bool stopped = false, oversized = false;
    constexpr std::size_t kMaxEvent = 32u << 20;
    auto sink = [&](const char* bytes, std::size_t n, long) {
        buffer.append(bytes, n);
        std::size_t start = 0;
        for (auto nl = buffer.find('\n', start); nl != std::string::npos; nl = buffer.find('\n', start)) {
            std::string line = buffer.substr(start, nl - start);
            start = nl + 1;
            if (!line.empty() && line.back() == '\r')
                line.pop_back();
            if (line.empty()) {
                if (!data.empty() || !event.empty()) {
                    if (!data.empty() && data.back() == '\n')
                        data.pop_back();
                    if (!onEvent(event.empty() ? "message" : event, data)) {
                        stopped = true;
                        return false;
                    }
                }
                event.clear();
                data.clear();
            } else if (line.rfind("event:", 0) == 0) {
                event = line.substr(line.size() > 6 && line[6] == ' ' ? 7 : 6);
            } else if (line.rfind("data:", 0) == 0) {
                data += line.substr(line.size() > 5 && line[5] == ' ' ? 6 : 5);
                data += '\n';
            }
        }
        buffer.erase(0, start);
        if (buffer.size() + data.size() > kMaxEvent) {
            oversized = true;
            return false;
        }
        return true;
    };
    auto o = m_options;
    auto r = perform(m_host, o, "GET", path, {}, {"Accept: text/event-stream"}, cancel, Kind::Stream, sink);
    if (oversized)
        r.transportError = r.refused = "the host sent an event larger than " + std::to_string(kMaxEvent >> 20) + " MiB";
    else if (stopped)
        r.transportError.clear();
    return r;
}

HostClient::Fetched HostClient::fetch(const std::string& path, int fd, std::int64_t offset, const std::string& ifRange,
    std::int64_t maxBytes, const std::atomic<bool>* cancel, const std::function<void(std::int64_t)>& onBytes) const
{
    Fetched f;
    std::vector<std::string> headers;
    if (offset > 0) {
        headers.push_back("Range: bytes=" + std::to_string(offset) + "-");
        if (!ifRange.empty() && ifRange.find_first_of("\r\n") == std::string::npos)
            headers.push_back("If-Range: " + ifRange);
    }
    std::int64_t at = offset;
    bool decided = false;
    std::string writeError, errorBody;
    auto sink = [&](const char* bytes, std::size_t n, long status) {
        if (status != 200 && status != 206) {
            // An error answer's words, kept small.
            if (errorBody.size() + n > (1u << 20))
                return false;
            errorBody.append(bytes, n);
            return true;
        }
        if (!decided) {
            // The first body bytes: a 200 to a ranged ask is the whole file (it changed): from 0.
            decided = true;
            if (status == 200 && offset > 0) {
                f.fromStart = true;
                at = 0;
                if (::ftruncate(fd, 0) != 0) {
                    writeError = std::string("cannot truncate the partial file: ") + std::strerror(errno);
                    return false;
                }
            }
        }
        if (at + static_cast<std::int64_t>(n) > maxBytes) {
            writeError = "the host sent more than the " + std::to_string(maxBytes) + " bytes it said the file has";
            return false;
        }
        for (std::size_t done = 0; done < n;) {
            const auto w = ::pwrite(fd, bytes + done, n - done, at);
            if (w <= 0) {
                writeError = std::string("cannot write the partial file: ") + std::strerror(errno);
                return false;
            }
            done += static_cast<std::size_t>(w);
            at += w;
        }
        f.written = at - (f.fromStart ? 0 : offset);
        if (onBytes)
            onBytes(f.written);
        return true;
    };
    auto reply = perform(m_host, m_options, "GET", path, {}, headers, cancel, Kind::Stream, sink);
    if (reply.body.empty())
        reply.body = errorBody;
    f.status = reply.status;
    if (const auto it = reply.headers.find("etag"); it != reply.headers.end())
        f.etag = it->second;
    if (reply.status == 206) {
        // "bytes FIRST-LAST/TOTAL": the range must start where it was asked to.
        const auto cr = reply.headers.count("content-range") ? reply.headers.at("content-range") : std::string();
        long long first = -1, last = -1, total = -1;
        if (std::sscanf(cr.c_str(), "bytes %lld-%lld/%lld", &first, &last, &total) != 3 || first != offset) {
            f.error = "the host answered another range than asked (" + terminalSafe(cr.substr(0, 80)) + ")";
            return f;
        }
        f.total = total;
    } else if (reply.status == 200) {
        if (const auto it = reply.headers.find("content-length"); it != reply.headers.end())
            f.total = std::strtoll(it->second.c_str(), nullptr, 10);
    }
    if (!writeError.empty())
        f.error = writeError;
    else if (!reply.transportError.empty())
        f.error = reply.transportError;
    else if (reply.status != 200 && reply.status != 206)
        f.error = "HTTP " + std::to_string(reply.status) + ": " + reply.message();
    return f;
}

}  // namespace vireo::remote
