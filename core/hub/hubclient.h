#pragma once

#include "core/hub/hubjson.h"
#include "core/hub/hubtypes.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace vireo::hub {

struct HubClientOptions {
    std::string endpoint = "https://huggingface.co";
    std::optional<std::string> token;  // never logged, never put in an error message
    bool offline = false;
    int maxAttempts = 6;  // per request, counting the first
    std::chrono::milliseconds retryBase{500};  // doubled per attempt, capped at 30 s
    std::chrono::seconds stallTimeout{30};  // under minBytesPerSecond this long: reconnect
    std::uint64_t minBytesPerSecond = 4096;  // a 1 B/s trickle must not count as alive
    std::chrono::seconds connectTimeout{20};
    std::chrono::seconds apiTimeout{120};  // a whole API answer (listing page, HEAD)
    std::uint64_t chunkBytes = 256ull << 20;  // one ranged GET covers at most this
    std::string userAgent = "vireo-studio/0.1";

    // From HF_ENDPOINT, HF_TOKEN (or the token file), HF_HUB_OFFLINE.
    static HubClientOptions fromEnvironment();
};

// The Hub's HTTP API over libcurl. Every call is synchronous and uses its own connection
// handle, so calls may run on several threads at once. TLS verification is always on; the
// token goes only to the Hub's own host, never to a redirect target.
//
// The server is not trusted: only http and https are spoken (a redirect to file:// or
// gopher:// is refused), a connection to a loopback, private, link-local or unspecified
// address is refused unless the endpoint itself lives there (checked on the connected address,
// so DNS rebinding is covered), ranged answers must be the range asked for, and every field of
// a JSON answer is checked (hubjson.h).
class HubClient {
public:
    explicit HubClient(HubClientOptions options);

    const HubClientOptions& options() const { return m_options; }

    HubResult<RepoInfo> repoInfo(const std::string& repo, const std::string& revision) const;
    // Every file of the repo at a commit (recursive tree, all pages).
    HubResult<std::vector<RepoFile>> listFiles(const std::string& repo, const std::string& commit) const;
    // HEAD on /resolve without following the redirect: commit, etag, size and where the
    // bytes are. A cancel ends a Retry-After wait at once.
    HubResult<FileMetadata> fileMetadata(
        const std::string& repo, const std::string& commit, const std::string& path, const std::atomic<bool>* cancel = nullptr) const;
    // A small file's content (configs, indexes), at most maxBytes.
    HubResult<std::string> fetchText(
        const std::string& repo, const std::string& commit, const std::string& path, std::uint64_t maxBytes = 64ull << 20) const;

    // Streams bytes [offset, size) of a file to sink in ranged chunks. Retries 5xx, 429,
    // dropped connections and stalls at the current offset; refreshes an expired signed
    // URL. sink returns false to stop (a local write failure, reported by the caller). A
    // server that answers another range than asked, or 416 for a resume, fails with
    // Integrity: the bytes kept do not belong to the file any more (the caller restarts it).
    using Sink = std::function<bool(const char* data, std::size_t bytes)>;
    using RetryNotice = std::function<void(int attempt, int maxAttempts, const std::string& why)>;
    HubResult<void> download(const std::string& repo, const std::string& commit, const std::string& path, std::uint64_t offset,
        std::uint64_t size, const Sink& sink, const std::atomic<bool>* cancel = nullptr, const RetryNotice& onRetry = {}) const;

    std::string resolveUrl(const std::string& repo, const std::string& revision, const std::string& path) const;

    struct Response {
        long status = 0;
        std::map<std::string, std::string> headers;  // lower-case names
        std::string body;
        int curlCode = 0;
        std::string curlError;
        std::string refused;  // why the transfer was refused before a byte was used (address, range)
        bool rangeRefused = false;
    };

    // Bytes [first, last] of a file of `total` bytes; a 200 with the whole file is accepted
    // only when that is what was asked (first 0, last total - 1).
    using RangeRequest = ByteRange;

private:
    enum class Method { Get, Head };
    Response request(Method method, const std::string& url, const std::vector<std::string>& extraHeaders, const Sink* sink,
        const std::atomic<bool>* cancel, std::uint64_t maxBody, const RangeRequest* range = nullptr) const;
    HubResult<Response> requestWithRetry(
        Method method, const std::string& url, const std::string& what, const std::atomic<bool>* cancel = nullptr) const;
    HubError errorFor(const Response& r, const std::string& what) const;
    bool sendsTokenTo(const std::string& url) const;

    HubClientOptions m_options;
    std::string m_tokenProblem;  // why the token cannot be sent (a line break in it), or empty
    // Addresses the endpoint was reached at: redirect targets may share them (a local mirror
    // and its CDN on one machine). Shared by copies of this client.
    struct AddressBook;
    std::shared_ptr<AddressBook> m_addresses;
};

// What kind of address a connection reached: a download target must be Public unless the
// endpoint itself is not (see HubClient).
enum class AddressKind { Public, Loopback, Private, LinkLocal, Special };
AddressKind classifyAddress(const std::string& ip);
const char* addressKindName(AddressKind kind);

// Percent-encodes a revision (no safe characters) or a path (keeps '/').
std::string encodeRevision(const std::string& revision);
std::string encodePath(const std::string& path);

}  // namespace vireo::hub
