#include "core/hub/hubclient.h"

#include "core/hub/hubjson.h"
#include "core/hub/hubpaths.h"
#include "inference/util/text.h"

#include <curl/curl.h>

#include <QFile>

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>

namespace vireo::hub {

namespace {

void initCurlOnce()
{
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower(std::string s)
{
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

std::string trim(std::string s)
{
    while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' '))
        s.pop_back();
    std::size_t i = 0;
    while (i < s.size() && s[i] == ' ')
        ++i;
    return s.substr(i);
}

// ETag values come quoted and sometimes weak: W/"abc" -> abc.
std::string normalizeEtag(std::string etag)
{
    if (etag.rfind("W/", 0) == 0)
        etag = etag.substr(2);
    if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"')
        etag = etag.substr(1, etag.size() - 2);
    return etag;
}

// scheme://host:port, with the default port made explicit, to compare origins.
std::string origin(const std::string& url)
{
    const auto schemeEnd = url.find("://");
    if (schemeEnd == std::string::npos)
        return {};
    const auto scheme = lower(url.substr(0, schemeEnd));
    const auto hostStart = schemeEnd + 3;
    const auto hostEnd = url.find_first_of("/?#", hostStart);
    auto authority = lower(url.substr(hostStart, hostEnd == std::string::npos ? std::string::npos : hostEnd - hostStart));
    if (const auto at = authority.rfind('@'); at != std::string::npos)
        authority = authority.substr(at + 1);
    if (authority.find(':') == std::string::npos || authority.back() == ']')
        authority += scheme == "https" ? ":443" : ":80";
    return scheme + "://" + authority;
}

constexpr std::size_t kMaxHeaderLine = 64 * 1024;
constexpr std::size_t kMaxHeaderBytes = 256 * 1024;

struct Transfer {
    CURL* curl;
    HubClient::Response* response;
    const HubClient::Sink* sink;
    const std::atomic<bool>* cancel;
    std::uint64_t maxBody;
    const HubClient::RangeRequest* range = nullptr;
    std::function<bool(const std::string& ip)> addressAllowed;
    bool sinkFailed = false;
    bool tooLarge = false;
    std::size_t headerBytes = 0, headerTooLong = 0;
    bool checkedRange = false;
};

size_t onHeader(char* data, size_t size, size_t count, void* user)
{
    auto* t = static_cast<Transfer*>(user);
    // No Hub header is longer than a few KB: a line of hundreds is a broken or hostile server,
    // and is refused before it is kept.
    t->headerBytes += size * count;
    if (size * count > kMaxHeaderLine || t->headerBytes > kMaxHeaderBytes) {
        t->headerTooLong = size * count;
        return 0;
    }
    const std::string line(data, size * count);
    if (line.rfind("HTTP/", 0) == 0) {
        t->response->headers.clear();  // a new response (after a 100 Continue, say)
    } else if (const auto colon = line.find(':'); colon != std::string::npos) {
        t->response->headers[lower(line.substr(0, colon))] = trim(line.substr(colon + 1));
    }
    return size * count;
}

// The answer to a ranged GET must be the range asked for before a byte of it reaches the
// sink: a 200 (the server ignored the range) or another Content-Range would be written at
// the wrong offset.
std::string rangeProblem(const HubClient::Response& r, long status, const HubClient::RangeRequest& want)
{
    const std::string asked = "bytes " + std::to_string(want.first) + "-" + std::to_string(want.last);
    if (status == 200) {
        if (want.first == 0 && want.last + 1 == want.total)
            return {};
        return "the server ignores byte ranges (HTTP 200 for " + asked + ")";
    }
    const auto it = r.headers.find("content-range");
    const auto got = it == r.headers.end() ? std::nullopt : parseContentRange(it->second);
    if (!got)
        return "the server answered " + asked + " without a usable Content-Range"
            + (it == r.headers.end() ? std::string() : " ('" + terminalSafe(it->second.substr(0, 80)) + "')");
    if (got->first != want.first || got->last != want.last || got->total != want.total)
        return "the server sent bytes " + std::to_string(got->first) + "-" + std::to_string(got->last) + " of " + std::to_string(got->total)
            + " for " + asked + " of " + std::to_string(want.total);
    return {};
}

size_t onBody(char* data, size_t size, size_t count, void* user)
{
    auto* t = static_cast<Transfer*>(user);
    const size_t n = size * count;
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    // Only a successful answer's body goes to the sink; an error page is kept as text.
    if (t->sink && (status == 200 || status == 206)) {
        if (t->range && !t->checkedRange) {
            t->checkedRange = true;
            auto problem = rangeProblem(*t->response, status, *t->range);
            if (!problem.empty()) {
                t->response->refused = std::move(problem);
                t->response->rangeRefused = true;
                return 0;
            }
        }
        if (!(*t->sink)(data, n)) {
            t->sinkFailed = true;
            return 0;
        }
        return n;
    }
    if (t->response->body.size() + n > t->maxBody) {
        t->tooLarge = true;
        return 0;
    }
    t->response->body.append(data, n);
    return n;
}

int onProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t)
{
    auto* t = static_cast<Transfer*>(user);
    return t->cancel && t->cancel->load() ? 1 : 0;
}

// Runs once a connection is up (new or reused), before the request is sent: the address
// actually connected is what matters, whatever the name resolved to a moment earlier.
int onConnected(void* user, char* primaryIp, char*, int, int)
{
    auto* t = static_cast<Transfer*>(user);
    if (!t->addressAllowed || t->addressAllowed(primaryIp ? primaryIp : ""))
        return CURL_PREREQFUNC_OK;
    return CURL_PREREQFUNC_ABORT;
}

std::string errorCode(const HubClient::Response& r)
{
    const auto it = r.headers.find("x-error-code");
    return it == r.headers.end() ? std::string() : it->second;
}

bool retryableStatus(long status)
{
    return status == 429 || status == 500 || status == 502 || status == 503 || status == 504;
}

std::chrono::milliseconds backoff(const HubClientOptions& o, int attempt, const HubClient::Response& r)
{
    if (const auto it = r.headers.find("retry-after"); it != r.headers.end()) {
        try {
            return std::chrono::seconds(std::clamp(std::stoi(it->second), 0, 300));
        } catch (const std::exception&) {
        }
    }
    auto delay = o.retryBase * (1 << std::min(attempt, 6));
    return std::min<std::chrono::milliseconds>(delay, std::chrono::seconds(30));
}

}  // namespace

const char* hubErrorKindName(HubErrorKind kind)
{
    switch (kind) {
    case HubErrorKind::Network: return "network";
    case HubErrorKind::Offline: return "offline";
    case HubErrorKind::GatedNoToken: return "gated-no-token";
    case HubErrorKind::GatedNoAccess: return "gated-no-access";
    case HubErrorKind::RepoNotFound: return "repo-not-found";
    case HubErrorKind::RevisionNotFound: return "revision-not-found";
    case HubErrorKind::EntryNotFound: return "entry-not-found";
    case HubErrorKind::Unauthorized: return "unauthorized";
    case HubErrorKind::Http: return "http";
    case HubErrorKind::Protocol: return "protocol";
    case HubErrorKind::Integrity: return "integrity";
    case HubErrorKind::DiskFull: return "disk-full";
    case HubErrorKind::Io: return "io";
    case HubErrorKind::Unsafe: return "unsafe";
    case HubErrorKind::Cancelled: return "cancelled";
    }
    return "?";
}

AddressKind classifyAddress(const std::string& ip)
{
    unsigned char v6[16];
    in_addr v4{};
    std::uint32_t a = 0;
    if (inet_pton(AF_INET, ip.c_str(), &v4) == 1) {
        a = ntohl(v4.s_addr);
    } else if (inet_pton(AF_INET6, ip.c_str(), v6) == 1) {
        static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
        if (std::memcmp(v6, mapped, 12) == 0) {
            a = (std::uint32_t{v6[12]} << 24) | (std::uint32_t{v6[13]} << 16) | (std::uint32_t{v6[14]} << 8) | v6[15];
        } else {
            static const unsigned char zero[16] = {};
            if (std::memcmp(v6, zero, 15) == 0)
                return v6[15] == 1 ? AddressKind::Loopback : AddressKind::Special;  // ::1, ::
            if ((v6[0] & 0xFE) == 0xFC)
                return AddressKind::Private;  // fc00::/7
            if (v6[0] == 0xFE && (v6[1] & 0xC0) == 0x80)
                return AddressKind::LinkLocal;  // fe80::/10
            if (v6[0] == 0xFF)
                return AddressKind::Special;  // multicast
            return AddressKind::Public;
        }
    } else {
        return AddressKind::Special;  // not an address at all
    }
    const auto in = [&](std::uint32_t net, int bits) { return (a >> (32 - bits)) == (net >> (32 - bits)); };
    if (in(0x7F000000, 8))
        return AddressKind::Loopback;
    if (in(0x0A000000, 8) || in(0xAC100000, 12) || in(0xC0A80000, 16) || in(0x64400000, 10))
        return AddressKind::Private;  // RFC 1918, and carrier-grade NAT
    if (in(0xA9FE0000, 16))
        return AddressKind::LinkLocal;  // 169.254/16, where cloud metadata services answer
    if (in(0x00000000, 8) || a >= 0xE0000000u)
        return AddressKind::Special;  // "this network", multicast, reserved, broadcast
    return AddressKind::Public;
}

const char* addressKindName(AddressKind kind)
{
    switch (kind) {
    case AddressKind::Public: return "a public address";
    case AddressKind::Loopback: return "a loopback address (this machine)";
    case AddressKind::Private: return "a private network address";
    case AddressKind::LinkLocal: return "a link-local address";
    case AddressKind::Special: return "a reserved address";
    }
    return "?";
}

struct HubClient::AddressBook {
    std::mutex mutex;
    std::set<std::string> endpointIps;
    bool endpointPrivate = false;
};

namespace {

bool isHttpUrl(const std::string& url)
{
    const auto l = lower(url.substr(0, 8));
    return l.rfind("http://", 0) == 0 || l.rfind("https://", 0) == 0;
}

// RFC 3986 unreserved characters pass; keepSlash leaves path separators readable.
std::string percentEncode(const std::string& text, bool keepSlash)
{
    std::string out;
    for (unsigned char c : text) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keepSlash && c == '/')) {
            out += static_cast<char>(c);
        } else {
            char buf[4];
            std::snprintf(buf, sizeof buf, "%%%02X", c);
            out += buf;
        }
    }
    return out;
}

}  // namespace

std::string encodeRevision(const std::string& revision)
{
    return percentEncode(revision, false);
}

std::string encodePath(const std::string& path)
{
    return percentEncode(path, true);
}

HubClientOptions HubClientOptions::fromEnvironment()
{
    HubClientOptions o;
    const auto paths = vireo::core::HubPaths::fromEnvironment();
    o.endpoint = paths.endpoint.toStdString();
    o.offline = paths.offline;
    QByteArray token = qgetenv("HF_TOKEN");
    if (token.isEmpty())
        token = qgetenv("HUGGING_FACE_HUB_TOKEN");
    if (token.isEmpty()) {
        QFile file(paths.tokenPath);
        if (file.open(QIODevice::ReadOnly))
            token = file.read(4096);
    }
    token = token.trimmed();
    if (!token.isEmpty())
        o.token = token.toStdString();
    return o;
}

HubClient::HubClient(HubClientOptions options) : m_options(std::move(options)), m_addresses(std::make_shared<AddressBook>())
{
    initCurlOnce();
    while (!m_options.endpoint.empty() && m_options.endpoint.back() == '/')
        m_options.endpoint.pop_back();
    // A token goes into a header line: a CR or LF in it would end the header and let whatever
    // follows become another one. Tokens are printable ASCII without spaces.
    if (m_options.token && (m_options.token->empty() || std::any_of(m_options.token->begin(), m_options.token->end(), [](unsigned char c) {
            return c <= 0x20 || c >= 0x7F;
        })))
        m_tokenProblem = "the access token contains a line break, a space or another character a Hugging Face token never has; "
                         "paste it again in Settings (or fix HF_TOKEN / the token file)";
}

std::string HubClient::resolveUrl(const std::string& repo, const std::string& revision, const std::string& path) const
{
    return m_options.endpoint + "/" + repo + "/resolve/" + encodeRevision(revision) + "/" + encodePath(path);
}

bool HubClient::sendsTokenTo(const std::string& url) const
{
    return m_options.token && origin(url) == origin(m_options.endpoint);
}

HubClient::Response HubClient::request(Method method, const std::string& url, const std::vector<std::string>& extraHeaders,
    const Sink* sink, const std::atomic<bool>* cancel, std::uint64_t maxBody, const RangeRequest* range) const
{
    Response response;
    if (!isHttpUrl(url)) {
        response.curlCode = CURLE_UNSUPPORTED_PROTOCOL;
        response.refused = "'" + terminalSafe(url.substr(0, 120)) + "' is neither an http nor an https address";
        return response;
    }
    CURL* curl = curl_easy_init();
    if (!curl) {
        response.curlCode = CURLE_FAILED_INIT;
        response.curlError = "cannot start a connection";
        return response;
    }
    Transfer transfer{curl, &response, sink, cancel, maxBody, range, {}};
    const bool toEndpoint = origin(url) == origin(m_options.endpoint);
    const auto book = m_addresses;
    transfer.addressAllowed = [&response, book, toEndpoint](const std::string& ip) {
        const auto kind = classifyAddress(ip);
        std::lock_guard lock(book->mutex);
        if (toEndpoint) {
            // The endpoint is the user's choice, wherever it is; what it points to is not.
            book->endpointIps.insert(ip);
            book->endpointPrivate = book->endpointPrivate || kind != AddressKind::Public;
            return true;
        }
        if (kind == AddressKind::Public || book->endpointIps.count(ip) || (kind == AddressKind::Private && book->endpointPrivate))
            return true;
        response.refused = "the Hub sent the transfer to " + ip + ", " + addressKindName(kind)
            + "; a Hub must not point downloads at this machine or its local network, so it is refused";
        return false;
    };
    curl_slist* headers = nullptr;
    headers = curl_slist_append(headers, "Accept-Encoding: identity");
    for (const auto& h : extraHeaders)
        headers = curl_slist_append(headers, h.c_str());
    std::string auth;
    if (sendsTokenTo(url)) {
        auth = "Authorization: Bearer " + *m_options.token;
        headers = curl_slist_append(headers, auth.c_str());
    }
    char errorBuffer[CURL_ERROR_SIZE] = {};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, m_options.userAgent.c_str());
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);  // redirects are followed by hand, without the token
    // Defence in depth: even a URL that slipped past isHttpUrl speaks nothing else.
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_PREREQFUNCTION, onConnected);
    curl_easy_setopt(curl, CURLOPT_PREREQDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024);  // fewer, larger writes into the sink
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(m_options.connectTimeout.count()));
    // The stall watchdog: under minBytesPerSecond for stallTimeout aborts the transfer, which
    // the caller retries at the current offset.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, static_cast<long>(std::max<std::uint64_t>(1, m_options.minBytesPerSecond)));
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(m_options.stallTimeout.count()));
    if (!sink)  // an API answer is small: a server that dribbles it out forever is cut off
        curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(m_options.apiTimeout.count()));
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errorBuffer);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, onHeader);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, onBody);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, onProgress);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, &transfer);
    if (method == Method::Head)
        curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    const CURLcode code = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
    response.curlCode = static_cast<int>(code);
    if (code != CURLE_OK) {
        // libcurl refuses a status or header line over 100 KB with CURLE_OUT_OF_MEMORY (and no
        // other word): it is the server's doing, and said so.
        const bool giantHeader = code == CURLE_OUT_OF_MEMORY
            || (std::string_view(errorBuffer).find("header") != std::string_view::npos
                && (code == CURLE_RECV_ERROR || code == CURLE_WEIRD_SERVER_REPLY));
        response.curlError = !response.refused.empty() ? response.refused
            : transfer.sinkFailed                      ? "local write failed"
            : transfer.tooLarge                        ? "answer larger than expected"
            : cancel && cancel->load()                 ? "cancelled"
            : transfer.headerTooLong > 0 ? "the server sent a header line of " + std::to_string(transfer.headerTooLong) + " bytes (over "
                + std::to_string(kMaxHeaderLine / 1024) + " KB; a broken or hostile server)"
            : giantHeader    ? std::string("the server sent a status or header line over 100 KB, which libcurl "
                                              "refuses (a broken or hostile server)")
            : errorBuffer[0] ? errorBuffer
                             : curl_easy_strerror(code);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return response;
}

HubError HubClient::errorFor(const Response& r, const std::string& what) const
{
    const auto code = errorCode(r);
    if (!r.refused.empty())
        return {HubErrorKind::Unsafe, static_cast<int>(r.status), what + ": " + r.refused};
    if (r.curlCode == CURLE_OUT_OF_MEMORY)
        return {HubErrorKind::Protocol, static_cast<int>(r.status), what + ": " + r.curlError};
    if (r.status == 0)
        return {HubErrorKind::Network, 0,
            what + ": cannot reach " + m_options.endpoint + " (" + r.curlError
                + (m_options.endpoint == HubClientOptions{}.endpoint
                        ? "); check the connection or the proxy settings"
                        // A mirror or a typo is the likelier cause than the network.
                        : "); check the Hub endpoint in Settings (or HF_ENDPOINT), the connection and the proxy")};
    if (code == "GatedRepo")
        return m_options.token
            ? HubError{HubErrorKind::GatedNoAccess, static_cast<int>(r.status),
                what + ": this model is gated and your token has no access yet; accept its licence at " + m_options.endpoint + "/"
                    + what.substr(0, what.find(':')) + " and try again"}
            : HubError{HubErrorKind::GatedNoToken, static_cast<int>(r.status),
                what
                    + ": this model is gated; add a Hugging Face access token in Settings (after accepting the licence on the model page)"};
    if (code == "RepoNotFound" || (r.status == 401 && code.empty() && !m_options.token))
        return {HubErrorKind::RepoNotFound, static_cast<int>(r.status),
            what + ": repository not found; check the name, or add a token if it is private"};
    if (code == "RevisionNotFound")
        return {HubErrorKind::RevisionNotFound, static_cast<int>(r.status), what + ": that revision does not exist"};
    if (code == "EntryNotFound")
        return {HubErrorKind::EntryNotFound, static_cast<int>(r.status), what + ": the file is not in the repository at that commit"};
    if (r.status == 401)
        return {HubErrorKind::Unauthorized, 401, what + ": the Hub rejected the access token; check it in Settings"};
    return {HubErrorKind::Http, static_cast<int>(r.status), what + ": the Hub answered HTTP " + std::to_string(r.status)};
}

HubResult<HubClient::Response> HubClient::requestWithRetry(
    Method method, const std::string& url, const std::string& what, const std::atomic<bool>* cancel) const
{
    if (m_options.offline)
        return HubError{HubErrorKind::Offline, 0, what + ": offline mode is on, nothing is fetched"};
    if (!m_tokenProblem.empty())
        return HubError{HubErrorKind::Unauthorized, 0, what + ": " + m_tokenProblem};
    Response r;
    for (int attempt = 0; attempt < m_options.maxAttempts; ++attempt) {
        r = request(method, url, {}, nullptr, cancel, 64ull << 20);
        if (cancel && cancel->load())
            return HubError{HubErrorKind::Cancelled, 0, what + ": cancelled"};
        // A name that does not resolve will not resolve in a second either: fail fast. A
        // refused address or scheme will not change either.
        const bool unreachable = r.curlCode == CURLE_COULDNT_RESOLVE_HOST || r.curlCode == CURLE_COULDNT_RESOLVE_PROXY;
        // An answer cut off after its status (a dropped connection) is retried like one never
        // received; a header no client takes is not.
        const bool refusedHeader = r.curlCode == CURLE_OUT_OF_MEMORY || r.curlCode == CURLE_WRITE_ERROR;
        const bool transient = !unreachable && r.refused.empty() && !refusedHeader
            && ((r.status == 0 && r.curlCode != CURLE_OK) || retryableStatus(r.status)
                || (r.curlCode != CURLE_OK && r.status >= 200 && r.status < 400));
        if (!transient)
            break;
        if (attempt + 1 < m_options.maxAttempts) {
            // In short slices: a Retry-After of minutes must not outlive a cancel.
            const auto wakeAt = std::chrono::steady_clock::now() + backoff(m_options, attempt, r);
            while (std::chrono::steady_clock::now() < wakeAt) {
                if (cancel && cancel->load())
                    return HubError{HubErrorKind::Cancelled, 0, what + ": cancelled"};
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
        }
    }
    if (r.refused.empty() && r.curlCode == CURLE_OK && r.status >= 200 && r.status < 400)
        return r;
    if (r.refused.empty() && r.curlCode != CURLE_OK && r.status >= 200 && r.status < 400)
        return HubError{HubErrorKind::Network, static_cast<int>(r.status), what + ": the answer was cut off (" + r.curlError + ")"};
    return errorFor(r, what);
}

HubResult<RepoInfo> HubClient::repoInfo(const std::string& repo, const std::string& revision) const
{
    const auto url = m_options.endpoint + "/api/models/" + repo + "/revision/" + encodeRevision(revision);
    auto r = requestWithRetry(Method::Get, url, repo);
    if (!r)
        return r.error();
    auto info = parseRepoInfo(r->body, repo);
    if (!info)
        return HubError{info.error().kind, static_cast<int>(r->status), info.error().message};
    return info;
}

HubResult<std::vector<RepoFile>> HubClient::listFiles(const std::string& repo, const std::string& commit) const
{
    std::vector<RepoFile> files;
    std::set<std::string> paths;
    std::set<std::string> pages;
    std::string url = m_options.endpoint + "/api/models/" + repo + "/tree/" + encodeRevision(commit) + "?recursive=true&expand=false";
    while (!url.empty()) {
        // A Link that points back at a page already read would loop forever.
        if (!pages.insert(url).second)
            return HubError{HubErrorKind::Protocol, 0,
                repo + ": the file listing links back to a page it already gave (page " + std::to_string(pages.size() + 1)
                    + "); the Hub's answer is broken, try again later"};
        if (pages.size() > 10000)
            return HubError{HubErrorKind::Protocol, 0, repo + ": the file listing does not end after 10000 pages"};
        auto r = requestWithRetry(Method::Get, url, repo);
        if (!r)
            return r.error();
        if (auto page = parseTreePage(r->body, repo, files, paths); !page)
            return HubError{page.error().kind, static_cast<int>(r->status), page.error().message};
        url.clear();
        // RFC 5988: Link: <url>; rel="next"
        if (const auto it = r->headers.find("link"); it != r->headers.end()) {
            const auto& link = it->second;
            const auto rel = link.find("rel=\"next\"");
            if (rel != std::string::npos) {
                const auto open = link.rfind('<', rel);
                const auto close = open == std::string::npos ? std::string::npos : link.find('>', open);
                if (open != std::string::npos && close != std::string::npos)
                    url = link.substr(open + 1, close - open - 1);
            }
        }
        // The next page is the Hub's own: a Link elsewhere would send the token's requests
        // (and this client) wherever the answer says.
        if (!url.empty() && origin(url) != origin(m_options.endpoint))
            return HubError{HubErrorKind::Unsafe, 0,
                repo + ": the file listing's next page is on '" + terminalSafe(origin(url)) + "', not on the Hub (" + m_options.endpoint
                    + "); refusing it"};
    }
    return files;
}

HubResult<FileMetadata> HubClient::fileMetadata(
    const std::string& repo, const std::string& commit, const std::string& path, const std::atomic<bool>* cancel) const
{
    std::string url = resolveUrl(repo, commit, path);
    const std::string what = repo + ": " + shownName(path);
    for (int hop = 0; hop < 5; ++hop) {
        auto r = requestWithRetry(Method::Head, url, what, cancel);
        if (!r)
            return r.error();
        const auto& h = r->headers;
        const auto location = h.count("location") ? h.at("location") : std::string();
        // A relative redirect (a renamed repo) stays on the Hub: follow it here.
        if (r->status >= 300 && r->status < 400 && !location.empty() && location[0] == '/' && !h.count("x-linked-etag")) {
            url = m_options.endpoint + location;
            continue;
        }
        FileMetadata m;
        m.commit = h.count("x-repo-commit") ? h.at("x-repo-commit") : std::string();
        m.etag = normalizeEtag(h.count("x-linked-etag") ? h.at("x-linked-etag") : h.count("etag") ? h.at("etag") : std::string());
        std::string size = h.count("x-linked-size")          ? h.at("x-linked-size")
            : (r->status < 300 && h.count("content-length")) ? h.at("content-length")
                                                             : std::string();
        if (m.commit.empty() || m.etag.empty() || size.empty())
            return HubError{HubErrorKind::Protocol, static_cast<int>(r->status),
                what
                    + ": the server's answer lacks X-Repo-Commit, ETag or size; is HF_ENDPOINT a Hugging Face Hub (or is a proxy rewriting "
                      "it)?"};
        const auto bytes = parseByteCount(size);
        if (!bytes)
            return HubError{HubErrorKind::Protocol, static_cast<int>(r->status),
                what + ": the server gives the size as '" + terminalSafe(size.substr(0, 40))
                    + "', not a whole number of bytes up to 1 PiB; is HF_ENDPOINT a Hugging Face Hub?"};
        m.size = *bytes;
        m.location = location.empty() ? url : (location[0] == '/' ? m_options.endpoint + location : location);
        if (!isHttpUrl(m.location))
            return HubError{HubErrorKind::Unsafe, static_cast<int>(r->status),
                what + ": the Hub sends the download to '" + terminalSafe(m.location.substr(0, 120))
                    + "', which is neither http nor https; refusing it"};
        return m;
    }
    return HubError{HubErrorKind::Protocol, 0, what + ": too many redirects"};
}

HubResult<std::string> HubClient::fetchText(
    const std::string& repo, const std::string& commit, const std::string& path, std::uint64_t maxBytes) const
{
    auto meta = fileMetadata(repo, commit, path);
    if (!meta)
        return meta.error();
    if (meta->size > maxBytes)
        return HubError{HubErrorKind::Protocol, 0,
            repo + ": " + path + " is " + std::to_string(meta->size) + " bytes, more than a metadata file should be"};
    std::string text;
    auto r = download(repo, commit, path, 0, meta->size, [&](const char* d, std::size_t n) {
        text.append(d, n);
        return true;
    });
    if (!r)
        return r.error();
    return text;
}

HubResult<void> HubClient::download(const std::string& repo, const std::string& commit, const std::string& path, std::uint64_t offset,
    std::uint64_t size, const Sink& sink, const std::atomic<bool>* cancel, const RetryNotice& onRetry) const
{
    const std::string what = repo + ": " + shownName(path);
    if (m_options.offline)
        return HubError{HubErrorKind::Offline, 0, what + ": offline mode is on, nothing is fetched"};
    if (offset >= size)
        return {};
    auto meta = fileMetadata(repo, commit, path, cancel);
    if (!meta)
        return meta.error();
    if (meta->size != size)
        return HubError{HubErrorKind::Integrity, 0,
            what + ": the Hub now reports " + std::to_string(meta->size) + " bytes, the plan expected " + std::to_string(size)
                + "; plan the download again"};
    std::string location = meta->location;
    int attempt = 0;
    std::string lastProblem;
    // Progress that earns back the retry budget: a completed chunk, or at least this much in
    // one attempt. A server that sends a byte and drops the connection must run out of
    // attempts, not retry forever.
    constexpr std::uint64_t kProgressBytes = 1ull << 20;
    while (offset < size) {
        if (cancel && cancel->load())
            return HubError{HubErrorKind::Cancelled, 0, what + ": cancelled"};
        const std::uint64_t end = std::min(size, offset + m_options.chunkBytes);  // exclusive
        std::uint64_t received = 0;
        bool overflow = false;
        const Sink counting = [&](const char* d, std::size_t n) {
            if (received + n > end - offset) {
                overflow = true;
                return false;
            }
            if (!sink(d, n))
                return false;
            received += n;
            return true;
        };
        const RangeRequest range{offset, end - 1, size};
        Response r = request(Method::Get, location, {"Range: bytes=" + std::to_string(offset) + "-" + std::to_string(end - 1)}, &counting,
            cancel, 1 << 20, &range);
        offset += received;
        if (cancel && cancel->load())
            return HubError{HubErrorKind::Cancelled, 0, what + ": cancelled"};
        if (r.rangeRefused)
            return HubError{
                HubErrorKind::Integrity, static_cast<int>(r.status), what + ": " + r.refused + "; nothing of that answer was written"};
        if (!r.refused.empty())
            return HubError{HubErrorKind::Unsafe, static_cast<int>(r.status), what + ": " + r.refused};
        if (overflow)
            return HubError{
                HubErrorKind::Protocol, static_cast<int>(r.status), what + ": the server sent more bytes than the range asked for"};
        if (r.curlCode == CURLE_WRITE_ERROR && r.curlError == "local write failed")
            return HubError{HubErrorKind::Io, 0, what + ": writing the downloaded bytes failed"};
        const bool complete = r.curlCode == CURLE_OK && (r.status == 206 || r.status == 200) && offset == end;
        if (complete) {
            attempt = 0;  // a whole chunk is progress
            continue;
        }
        if (r.status == 416)
            // The bytes kept are past what the server has: the file changed, or the partial
            // is not this file. Retrying the same range cannot help.
            return HubError{HubErrorKind::Integrity, 416,
                what + ": the server says bytes " + std::to_string(offset)
                    + "- lie beyond the end of the file (HTTP 416); the partial download does not match the file on the Hub"};
        if (r.status == 403 && origin(location) != origin(m_options.endpoint)) {
            lastProblem = "the signed download link expired";
        } else if (r.status >= 400 && !retryableStatus(r.status)) {
            return errorFor(r, what);
        } else if (r.curlCode != CURLE_OK) {
            lastProblem = r.curlCode == CURLE_OPERATION_TIMEDOUT ? "no data (or under " + std::to_string(m_options.minBytesPerSecond)
                    + " bytes/s) for " + std::to_string(m_options.stallTimeout.count()) + " s"
                                                                 : r.curlError;
        } else {
            lastProblem = "HTTP " + std::to_string(r.status);
        }
        if (received >= kProgressBytes)
            attempt = 0;
        if (++attempt >= m_options.maxAttempts)
            return HubError{HubErrorKind::Network, static_cast<int>(r.status),
                what + ": gave up after " + std::to_string(attempt) + " attempts (" + lastProblem
                    + "); the partial file is kept, retry to resume"};
        if (onRetry)
            onRetry(attempt, m_options.maxAttempts, lastProblem);
        // Wait in short slices: a cancel during a long Retry-After must still be prompt.
        const auto wakeAt = std::chrono::steady_clock::now() + backoff(m_options, attempt - 1, r);
        while (std::chrono::steady_clock::now() < wakeAt) {
            if (cancel && cancel->load())
                return HubError{HubErrorKind::Cancelled, 0, what + ": cancelled"};
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        // A fresh metadata call gives a fresh signed URL (and notices a file that changed).
        auto fresh = fileMetadata(repo, commit, path, cancel);
        if (!fresh)
            return fresh.error();
        if (fresh->size != size)
            return HubError{HubErrorKind::Integrity, 0,
                what + ": the Hub now reports " + std::to_string(fresh->size) + " bytes, the plan expected " + std::to_string(size)
                    + "; plan the download again"};
        location = fresh->location;
    }
    return {};
}

}  // namespace vireo::hub
