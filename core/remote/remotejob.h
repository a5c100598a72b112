#pragma once

// A generation run on another machine's Vireo server and brought home: submitted with an
// Idempotency-Key (a retried submit is the same job), followed through its event stream
// (progress, previews), downloaded with Range resumes into a hidden partial file, checked
// against the SHA-256 the host states, and moved to a fresh name in the outputs folder. The
// host's recipe is inside the file (the MP4's tags, the PNG's chunk), so the Gallery lists it
// as it lists a local output.
//
// A host that cannot be reached for the grace period fails a job pinned to it, naming it and
// since when; a job for "any host" moves on to the next host that has the model (a new key),
// and every attempt that lost is deleted from its host once the winner is verified, where the
// host answers. Nothing half-downloaded is ever taken as the output.

#include "core/remote/hostclient.h"

#include <QByteArray>
#include <QString>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace vireo::generation {
struct Ask;
}
namespace vireo::runtime {
struct ModelChoice;
}

namespace vireo::remote {

// The fields of POST /v1/videos for an ask of this studio's (the Generate page's), or why it
// cannot go to a host: LoRAs and clips are files of this machine the API does not take; stills
// and the sound to follow (at most 32 MiB) travel as data URLs.
Result<nlohmann::json> apiBodyFor(const generation::Ask& ask, const std::string& hostModelId);
// The id a host lists a model under (GET /v1/models): a catalog variant's id, a repo's name,
// "local/<file or folder name>" for a local model.
std::string hostModelId(const runtime::ModelChoice& choice);

// What a host says of itself (GET /v1/vireo/host), or why it could not be asked.
struct HostState {
    Host host;
    bool reachable = false;
    std::string error;  // when not reachable (or the token was refused)
    std::string version;
    int gpus = 0;
    std::int64_t freeBytes = 0;  // on its roomiest device
    std::vector<std::string> modelsReady;
    int jobsActive = 0;
    int maxQueued = 0;
    std::vector<std::string> devices;  // "cuda:0: NVIDIA RTX 4090" ...
};
HostState probeHost(const HostClient& client, const std::atomic<bool>* cancel = nullptr);

// The host a job for `model` goes to: reachable, the model ready there, room in its queue;
// the fewest jobs active, then the most free device memory, then the order of the list.
// Hosts named in `skip` (attempts that failed) are passed over. Nothing when none can take it;
// `why` then says so for each host.
std::optional<std::size_t> pickHost(
    const std::vector<HostState>& hosts, const std::string& model, const std::set<std::string>& skip = {}, std::string* why = nullptr);

struct RemoteRequest {
    nlohmann::json body;  // the POST /v1/videos fields: model (the host's id), prompt, size, ...
    std::string localId;  // stable for the job: names the keys and the partial file
    QString outputsFolder;
    QString outputPath;  // the output's exact name (never replaced); empty: a fresh name in outputsFolder
    std::string target;  // a host's name, or "any"
    std::string kind;  // "video" | "image"; empty: what the host lists the model as
};

struct RemoteEvents {
    std::function<void(const std::string& host, const std::string& remoteId, int attempt)> submitted;
    std::function<void(const std::string& phase, std::int64_t step, std::int64_t steps, double etaSeconds, int percent)> progress;
    std::function<void(const QByteArray& jpeg, int step)> preview;
    std::function<void(std::int64_t bytes, std::int64_t total)> downloading;
    std::function<void(const std::string& line)> note;  // a host lost, a move to another, a resume
};

struct RemoteOutcome {
    QString path;  // the output in the outputs folder
    std::string host, remoteId, sha256, recipeJson;
    std::string kind;  // "video" | "image"
    std::int64_t bytes = 0;
    int attempts = 0;
    std::int64_t resumedFrom = 0;  // bytes of an earlier partial file kept
    std::vector<std::string> leftOnHosts;  // losing attempts their hosts did not let us delete
};

struct RemoteOptions {
    std::chrono::milliseconds grace{30000};  // unreachable this long: the host is given up
    double previewFps = 0;  // 0: no previews asked for
    std::chrono::milliseconds pollInterval{1000};
    HostClient::Options client;
};

// Runs the job to its end: the output verified and in place, or an error saying which host
// failed how. `cancel` deletes the remote job (where the host answers) and removes the partial.
Result<RemoteOutcome> runRemoteJob(const std::vector<Host>& hosts, const RemoteRequest& request, const RemoteEvents& events,
    const std::atomic<bool>& cancel, const RemoteOptions& options = {});

// The hidden file a job's download goes to until it is verified: ".<localId>.part-remote".
QString remotePartialPath(const QString& outputsFolder, const std::string& localId);

}  // namespace vireo::remote
