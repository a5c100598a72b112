#include "core/hub/hubclient.h"

#include "core/hub/hubpaths.h"

#include <curl/curl.h>
#include <nlohmann/json.hpp>

#include <QFile>

#include <algorithm>
#include <cctype>
#include <mutex>
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

struct Transfer {
    CURL* curl;
    HubClient::Response* response;
    const HubClient::Sink* sink;
    const std::atomic<bool>* cancel;
    std::uint64_t maxBody;
    bool sinkFailed = false;
    bool tooLarge = false;
};

size_t onHeader(char* data, size_t size, size_t count, void* user)
{
    auto* t = static_cast<Transfer*>(user);
    const std::string line(data, size * count);
    if (line.rfind("HTTP/", 0) == 0) {
        t->response->headers.clear(); // a new response (after a 100 Continue, say)
    } else if (const auto colon = line.find(':'); colon != std::string::npos) {
        t->response->headers[lower(line.substr(0, colon))] = trim(line.substr(colon + 1));
    }
    return size * count;
}

size_t onBody(char* data, size_t size, size_t count, void* user)
{
    auto* t = static_cast<Transfer*>(user);
    const size_t n = size * count;
    long status = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
    // Only a successful answer's body goes to the sink; an error page is kept as text.
    if (t->sink && (status == 200 || status == 206)) {
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

} // namespace

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

namespace {

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

} // namespace

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

HubClient::HubClient(HubClientOptions options) : m_options(std::move(options))
{
    initCurlOnce();
    while (!m_options.endpoint.empty() && m_options.endpoint.back() == '/')
        m_options.endpoint.pop_back();
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
                                       const Sink* sink, const std::atomic<bool>* cancel, std::uint64_t maxBody) const
{
    Response response;
    CURL* curl = curl_easy_init();
    if (!curl) {
        response.curlCode = CURLE_FAILED_INIT;
        response.curlError = "cannot start a connection";
        return response;
    }
    Transfer transfer{curl, &response, sink, cancel, maxBody};
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
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L); // redirects are followed by hand, without the token
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, 512L * 1024); // fewer, larger writes into the sink
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, static_cast<long>(m_options.connectTimeout.count()));
    // The stall watchdog: under 1 byte/s for stallTimeout aborts the transfer, which the
    // caller retries at the current offset.
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(m_options.stallTimeout.count()));
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
        response.curlError = transfer.sinkFailed ? "local write failed"
            : transfer.tooLarge                  ? "answer larger than expected"
            : cancel && cancel->load()           ? "cancelled"
            : errorBuffer[0]                      ? errorBuffer
                                                  : curl_easy_strerror(code);
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return response;
}

HubError HubClient::errorFor(const Response& r, const std::string& what) const
{
    const auto code = errorCode(r);
    if (r.status == 0)
        return {HubErrorKind::Network, 0, what + ": cannot reach " + m_options.endpoint + " (" + r.curlError
                + (m_options.endpoint == HubClientOptions{}.endpoint
                          ? "); check the connection or the proxy settings"
                          // A mirror or a typo is the likelier cause than the network.
                          : "); check the Hub endpoint in Settings (or HF_ENDPOINT), the connection and the proxy")};
    if (code == "GatedRepo")
        return m_options.token
            ? HubError{HubErrorKind::GatedNoAccess, static_cast<int>(r.status),
                  what + ": this model is gated and your token has no access yet; accept its licence at "
                      + m_options.endpoint + "/" + what.substr(0, what.find(':')) + " and try again"}
            : HubError{HubErrorKind::GatedNoToken, static_cast<int>(r.status),
                  what + ": this model is gated; add a Hugging Face access token in Settings (after accepting the licence on the model page)"};
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

HubResult<HubClient::Response> HubClient::requestWithRetry(Method method, const std::string& url, const std::string& what) const
{
    if (m_options.offline)
        return HubError{HubErrorKind::Offline, 0, what + ": offline mode is on, nothing is fetched"};
    Response r;
    for (int attempt = 0; attempt < m_options.maxAttempts; ++attempt) {
        r = request(method, url, {}, nullptr, nullptr, 64ull << 20);
        // A name that does not resolve will not resolve in a second either: fail fast.
        const bool unreachable = r.curlCode == CURLE_COULDNT_RESOLVE_HOST || r.curlCode == CURLE_COULDNT_RESOLVE_PROXY;
        const bool transient = !unreachable && ((r.status == 0 && r.curlCode != CURLE_OK) || retryableStatus(r.status));
        if (!transient)
            break;
        if (attempt + 1 < m_options.maxAttempts)
            std::this_thread::sleep_for(backoff(m_options, attempt, r));
    }
    if (r.status >= 200 && r.status < 400)
        return r;
    return errorFor(r, what);
}

HubResult<RepoInfo> HubClient::repoInfo(const std::string& repo, const std::string& revision) const
{
    const auto url = m_options.endpoint + "/api/models/" + repo + "/revision/" + encodeRevision(revision);
    auto r = requestWithRetry(Method::Get, url, repo);
    if (!r)
        return r.error();
    auto json = nlohmann::json::parse(r->body, nullptr, false);
    if (!json.is_object() || !json.contains("sha") || !json["sha"].is_string())
        return HubError{HubErrorKind::Protocol, static_cast<int>(r->status), repo + ": the Hub's repository info has no commit"};
    RepoInfo info;
    info.repo = repo;
    info.commit = json["sha"].get<std::string>();
    if (json.contains("gated") && json["gated"].is_string())
        info.gated = json["gated"].get<std::string>();
    info.isPrivate = json.value("private", false);
    return info;
}

HubResult<std::vector<RepoFile>> HubClient::listFiles(const std::string& repo, const std::string& commit) const
{
    std::vector<RepoFile> files;
    std::string url = m_options.endpoint + "/api/models/" + repo + "/tree/" + encodeRevision(commit) + "?recursive=true&expand=false";
    for (int page = 0; !url.empty(); ++page) {
        if (page > 100000)
            return HubError{HubErrorKind::Protocol, 0, repo + ": the file listing does not end"};
        auto r = requestWithRetry(Method::Get, url, repo);
        if (!r)
            return r.error();
        auto json = nlohmann::json::parse(r->body, nullptr, false);
        if (!json.is_array())
            return HubError{HubErrorKind::Protocol, static_cast<int>(r->status), repo + ": the file listing is not a JSON array"};
        for (const auto& e : json) {
            if (!e.is_object() || e.value("type", "") != "file")
                continue;
            RepoFile f;
            f.path = e.value("path", "");
            f.size = e.value("size", std::uint64_t{0});
            f.gitOid = e.value("oid", "");
            if (e.contains("lfs") && e["lfs"].is_object())
                f.sha256 = e["lfs"].value("oid", "");
            files.push_back(std::move(f));
        }
        url.clear();
        // RFC 5988: Link: <url>; rel="next"
        if (const auto it = r->headers.find("link"); it != r->headers.end()) {
            const auto& link = it->second;
            const auto rel = link.find("rel=\"next\"");
            if (rel != std::string::npos) {
                const auto open = link.rfind('<', rel);
                const auto close = link.find('>', open);
                if (open != std::string::npos && close != std::string::npos)
                    url = link.substr(open + 1, close - open - 1);
            }
        }
    }
    return files;
}

HubResult<FileMetadata> HubClient::fileMetadata(const std::string& repo, const std::string& commit, const std::string& path) const
{
    std::string url = resolveUrl(repo, commit, path);
    const std::string what = repo + ": " + path;
    for (int hop = 0; hop < 5; ++hop) {
        auto r = requestWithRetry(Method::Head, url, what);
        if (!r)
            return r.error();
        const auto& h = r->headers;
        const auto location = h.count("location") ? h.at("location") : std::string();
        // A relative redirect (a renamed repo) stays on the Hub: follow it here.
        if (r->status >= 300 && r->status < 400 && !location.empty() && location[0] == '/'
            && !h.count("x-linked-etag")) {
            url = m_options.endpoint + location;
            continue;
        }
        FileMetadata m;
        m.commit = h.count("x-repo-commit") ? h.at("x-repo-commit") : std::string();
        m.etag = normalizeEtag(h.count("x-linked-etag") ? h.at("x-linked-etag") : h.count("etag") ? h.at("etag") : std::string());
        std::string size = h.count("x-linked-size") ? h.at("x-linked-size")
            : (r->status < 300 && h.count("content-length")) ? h.at("content-length")
                                                              : std::string();
        if (m.commit.empty() || m.etag.empty() || size.empty())
            return HubError{HubErrorKind::Protocol, static_cast<int>(r->status),
                what + ": the server's answer lacks X-Repo-Commit, ETag or size; is HF_ENDPOINT a Hugging Face Hub (or is a proxy rewriting it)?"};
        m.size = std::stoull(size);
        m.location = location.empty() ? url : (location[0] == '/' ? m_options.endpoint + location : location);
        return m;
    }
    return HubError{HubErrorKind::Protocol, 0, what + ": too many redirects"};
}

HubResult<std::string> HubClient::fetchText(const std::string& repo, const std::string& commit, const std::string& path,
                                            std::uint64_t maxBytes) const
{
    auto meta = fileMetadata(repo, commit, path);
    if (!meta)
        return meta.error();
    if (meta->size > maxBytes)
        return HubError{HubErrorKind::Protocol, 0, repo + ": " + path + " is " + std::to_string(meta->size)
                + " bytes, more than a metadata file should be"};
    std::string text;
    auto r = download(repo, commit, path, 0, meta->size, [&](const char* d, std::size_t n) {
        text.append(d, n);
        return true;
    });
    if (!r)
        return r.error();
    return text;
}

HubResult<void> HubClient::download(const std::string& repo, const std::string& commit, const std::string& path,
                                    std::uint64_t offset, std::uint64_t size, const Sink& sink,
                                    const std::atomic<bool>* cancel, const RetryNotice& onRetry) const
{
    const std::string what = repo + ": " + path;
    if (m_options.offline)
        return HubError{HubErrorKind::Offline, 0, what + ": offline mode is on, nothing is fetched"};
    if (offset >= size)
        return {};
    auto meta = fileMetadata(repo, commit, path);
    if (!meta)
        return meta.error();
    if (meta->size != size)
        return HubError{HubErrorKind::Integrity, 0, what + ": the Hub now reports " + std::to_string(meta->size)
                + " bytes, the plan expected " + std::to_string(size) + "; plan the download again"};
    std::string location = meta->location;
    int attempt = 0;
    std::string lastProblem;
    while (offset < size) {
        if (cancel && cancel->load())
            return HubError{HubErrorKind::Cancelled, 0, what + ": cancelled"};
        const std::uint64_t end = std::min(size, offset + m_options.chunkBytes); // exclusive
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
        Response r = request(Method::Get, location,
            {"Range: bytes=" + std::to_string(offset) + "-" + std::to_string(end - 1)}, &counting, cancel, 1 << 20);
        offset += received;
        if (cancel && cancel->load())
            return HubError{HubErrorKind::Cancelled, 0, what + ": cancelled"};
        if (overflow)
            return HubError{HubErrorKind::Protocol, static_cast<int>(r.status), what + ": the server sent more bytes than the range asked for"};
        if (r.curlCode == CURLE_WRITE_ERROR && r.curlError == "local write failed")
            return HubError{HubErrorKind::Io, 0, what + ": writing the downloaded bytes failed"};
        const bool complete = r.curlCode == CURLE_OK && (r.status == 206 || r.status == 200) && offset == end;
        if (complete) {
            if (received > 0)
                attempt = 0; // progress resets the retry budget
            continue;
        }
        if (r.status == 416 && offset == size)
            break;
        if (r.status == 403 && origin(location) != origin(m_options.endpoint)) {
            lastProblem = "the signed download link expired";
        } else if (r.status >= 400 && !retryableStatus(r.status) && r.status != 416) {
            return errorFor(r, what);
        } else if (r.curlCode != CURLE_OK) {
            lastProblem = r.curlCode == CURLE_OPERATION_TIMEDOUT ? "no data for " + std::to_string(m_options.stallTimeout.count()) + " s"
                                                                : r.curlError;
        } else if (r.status == 200 && offset > 0 && received == 0) {
            return HubError{HubErrorKind::Protocol, 200, what + ": the server ignores byte ranges; cannot resume"};
        } else {
            lastProblem = "HTTP " + std::to_string(r.status);
        }
        if (received > 0)
            attempt = 0;
        if (++attempt >= m_options.maxAttempts)
            return HubError{HubErrorKind::Network, static_cast<int>(r.status),
                what + ": gave up after " + std::to_string(attempt) + " attempts (" + lastProblem + "); the partial file is kept, retry to resume"};
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
        auto fresh = fileMetadata(repo, commit, path);
        if (!fresh)
            return fresh.error();
        location = fresh->location;
    }
    return {};
}

} // namespace vireo::hub
