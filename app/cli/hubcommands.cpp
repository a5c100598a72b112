// vireo-cli plan / download: argument parsing and terminal output over core/hub.
#include "app/cli/hubcommands.h"

#include "core/catalog/catalog.h"
#include "core/hub/hubpaths.h"
#include "core/hub/cachemanager.h"
#include "core/hub/downloadmanager.h"
#include "core/hub/plandownload.h"
#include "core/settings/studiosettings.h"
#include "inference/util/jsonlimits.h"
#include "inference/util/text.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <thread>

using namespace vireo::hub;

namespace {

std::atomic<bool> g_interrupted{false};

void onSigint(int)
{
    g_interrupted = true;
}

struct HubArgs {
    std::string repo;
    std::string revision = "main";
    PlanRule rule;
    bool json = false;
    int parallel = 4;
    bool explicitInclude = false;
    std::string variant;  // family/variant from the catalog
};

// Repo ids, file names and server messages go to a terminal: made safe first.
std::string safe(const std::string& text)
{
    return vireo::terminalSafe(text);
}

std::string safe(const QString& text)
{
    return vireo::terminalSafe(text.toStdString());
}

int usage(const std::string& message)
{
    std::fprintf(stderr, "vireo-cli: %s\n", safe(message).c_str());
    std::fprintf(stderr,
        "usage: vireo-cli plan|download REPO [--revision R] [--include GLOB]... [--exclude GLOB]...\n"
        "                 [--diffusers [--component NAME]... [--weight-variant V]] [--parallel N] [--json]\n");
    return 2;
}

int fail(const HubError& e)
{
    std::fprintf(stderr, "vireo-cli: %s\n", safe(e.message).c_str());
    return e.kind == HubErrorKind::Cancelled ? 130 : 1;
}

bool parse(const std::vector<std::string>& args, HubArgs& out, std::string& error)
{
    for (std::size_t i = 0; i < args.size(); ++i) {
        const auto& a = args[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= args.size()) {
                error = a + " needs a value";
                return {};
            }
            return args[++i];
        };
        if (a == "--revision")
            out.revision = value();
        else if (a == "--include") {
            if (!out.explicitInclude)
                out.rule.include.clear();
            out.explicitInclude = true;
            out.rule.include.push_back(value());
        } else if (a == "--exclude")
            out.rule.exclude.push_back(value());
        else if (a == "--diffusers")
            out.rule.mode = PlanRule::Mode::Diffusers;
        else if (a == "--component")
            out.rule.components.push_back(value());
        else if (a == "--weight-variant")
            out.rule.weightVariant = value();
        else if (a == "--parallel")
            out.parallel = std::max(1, std::atoi(value().c_str()));
        else if (a == "--json")
            out.json = true;
        else if (a == "--variant")
            out.variant = value();
        else if (!a.empty() && a[0] == '-')
            error = "unknown option " + a;
        else if (out.repo.empty())
            out.repo = a;
        else
            error = "unexpected argument " + a;
        if (!error.empty())
            return false;
    }
    if (out.repo.empty() && out.variant.empty())
        error = "a REPO (org/name) or --variant FAMILY/VARIANT is needed";
    return error.empty();
}

HfCache cacheFromEnvironment()
{
    return HfCache(vireo::core::HubPaths::fromEnvironment().cacheDir.toStdString());
}

// The plan as JSON, built by the JSON library: a file named `x", "path": "/etc/passwd` is one
// string value, never a forged key (and invalid UTF-8 becomes U+FFFD instead of a throw).
nlohmann::json planJson(const FilePlan& plan, const Preflight& check)
{
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : plan.files)
        files.push_back({{"path", f.file.path}, {"size", f.file.size}, {"sha256", f.file.sha256}, {"git_oid", f.file.gitOid},
            {"present", f.present || f.blobPresent}, {"partial_bytes", f.partialBytes}});
    return {{"repo", plan.repo}, {"revision", plan.revision}, {"commit", plan.commit}, {"total_bytes", plan.totalBytes()},
        {"present_bytes", plan.presentBytes()}, {"free_bytes", check.freeBytes}, {"needed_bytes", check.neededBytes}, {"fits", check.fits},
        {"volume", check.volume}, {"files", files}};
}

void printPlan(const FilePlan& plan, const Preflight& check, bool json)
{
    if (json) {
        std::printf("%s\n", vireo::jsonutil::safeDump(planJson(plan, check)).c_str());
        return;
    }
    std::printf("%s @ %s (commit %s)\n", safe(plan.repo).c_str(), safe(plan.revision).c_str(), plan.commit.c_str());
    for (const auto& f : plan.files)
        std::printf("  %-10s %10s  %s\n",
            (f.present || f.blobPresent) ? "cached"
                : f.partialBytes         ? "partial"
                                         : "",
            humanSize(f.file.size).c_str(), safe(f.file.path).c_str());
    std::printf("  %zu files, %s in all, %s already here\n", plan.files.size(), humanSize(plan.totalBytes()).c_str(),
        humanSize(plan.presentBytes()).c_str());
    std::printf("  disk: %s\n", safe(check.message).c_str());
}

}  // namespace

// The (repo, revision, rule) triples to plan: one from the command line, or each source of
// a catalog variant.
std::vector<vireo::catalog::Source> sourcesFor(const HubArgs& a, std::string& error)
{
    if (a.variant.empty())
        return {{a.repo, a.revision, "", a.rule, true}};
    auto catalog = vireo::catalog::Catalog::loadBuiltin();
    if (!catalog) {
        error = catalog.error().message;
        return {};
    }
    const auto* variant = catalog->find(a.variant);
    if (!variant) {
        error = "no catalog variant '" + a.variant + "' (use FAMILY/VARIANT, e.g. ltx-2.3/distilled-bf16)";
        return {};
    }
    return variant->sources;
}

int downloadPlan(const HubClient& client, const HfCache& cache, FilePlan plan, int parallel);

int runPlan(const std::vector<std::string>& args)
{
    HubArgs a;
    std::string error;
    if (!parse(args, a, error))
        return usage("plan: " + error);
    const auto sources = sourcesFor(a, error);
    if (!error.empty())
        return usage("plan: " + error);
    HubClient client(HubClientOptions::fromEnvironment());
    const auto cache = cacheFromEnvironment();
    for (const auto& source : sources) {
        auto plan = makePlan(client, cache, source.repo, source.revision, source.rule);
        if (!plan)
            return fail(plan.error());
        if (!source.role.empty() && !a.json)
            std::printf("[%s]\n", safe(source.role).c_str());
        printPlan(*plan, preflight(*plan, cache), a.json);
    }
    return 0;
}

int runDownload(const std::vector<std::string>& args)
{
    HubArgs a;
    std::string error;
    if (!parse(args, a, error))
        return usage("download: " + error);
    const auto sources = sourcesFor(a, error);
    if (!error.empty())
        return usage("download: " + error);
    // The same trust gate as the window's: a repo outside the catalog's publishers needs the
    // user's recorded approval (shared with the studio's settings).
    auto catalog = vireo::catalog::Catalog::loadBuiltin();
    if (!catalog)
        return usage("download: the built-in catalog is damaged: " + catalog.error().message);
    vireo::core::StudioSettings settings;
    for (const auto& source : sources) {
        if (catalog->isTrusted(source.repo) || settings.isRepoTrusted(QString::fromStdString(source.repo)))
            continue;
        std::fprintf(stderr,
            "vireo-cli: %s is not from a catalog publisher and was not approved. Review what it holds (vireo-cli plan %s), "
            "then approve it with `vireo-cli trust add %s` or on the studio's Downloads page.\n",
            safe(source.repo).c_str(), safe(source.repo).c_str(), safe(source.repo).c_str());
        return 1;
    }
    HubClient client(HubClientOptions::fromEnvironment());
    const auto cache = cacheFromEnvironment();
    std::signal(SIGINT, onSigint);
    for (const auto& source : sources) {
        auto plan = makePlan(client, cache, source.repo, source.revision, source.rule);
        if (!plan)
            return fail(plan.error());
        if (const int rc = downloadPlan(client, cache, std::move(*plan), a.parallel); rc != 0)
            return rc;
    }
    return 0;
}

int runTrust(const std::vector<std::string>& args)
{
    vireo::core::StudioSettings settings;
    if (args.empty() || args[0] == "list") {
        const auto repos = settings.trustedRepos();
        if (repos.isEmpty())
            std::printf("no repos approved beyond the catalog's publishers\n");
        for (const auto& r : repos)
            std::printf("%s\n", safe(r).c_str());
        return 0;
    }
    if (args.size() != 2 || (args[0] != "add" && args[0] != "remove"))
        return usage("trust [list | add REPO | remove REPO]");
    const auto repo = QString::fromStdString(args[1]);
    if (!HfCache::repoFolderName(args[1]))
        return usage("trust: '" + args[1] + "' is not a repo id (org/name)");
    if (args[0] == "add") {
        settings.trustRepo(repo);
        std::printf("approved %s for download and loading\n", safe(args[1]).c_str());
    } else {
        settings.revokeRepo(repo);
        std::printf("revoked %s\n", safe(args[1]).c_str());
    }
    return 0;
}

int runCache(const std::vector<std::string>& args)
{
    const std::string verb = args.empty() ? "list" : args[0];
    bool yes = false;
    std::vector<std::string> rest;
    for (std::size_t i = 1; i < args.size(); ++i) {
        if (args[i] == "--yes")
            yes = true;
        else
            rest.push_back(args[i]);
    }
    auto catalog = vireo::catalog::Catalog::loadBuiltin();
    if (!catalog)
        return usage("cache: the built-in catalog is damaged: " + catalog.error().message);
    vireo::core::StudioSettings settings;
    DownloadManager downloads(&settings, std::move(*catalog), nullptr, false);
    // A command has no engine: nothing is loaded by this process (the window keeps its own check).
    CacheManager cache(&downloads, [] { return QStringList{}; });
    auto size = [](qint64 b) { return humanSize(static_cast<std::uint64_t>(std::max<qint64>(0, b))); };
    if (verb == "list") {
        std::printf("%s\n", safe(settings.cacheFolder()).c_str());
        for (const auto& r : cache.repos())
            std::printf("  %-44s %10s  %d files%s%s\n", safe(r.repo).c_str(), size(r.bytes).c_str(), r.files,
                r.variants.isEmpty() ? "" : "  used by ", safe(r.variants.join(QStringLiteral(", "))).c_str());
        for (const auto& v : cache.variants())
            std::printf("  variant %-36s %10s  (%s its own)\n", safe(v.id).c_str(), size(v.bytes).c_str(), size(v.ownBytes).c_str());
        return 0;
    }
    CachePlan plan;
    if (verb == "delete-variant" && rest.size() == 1)
        plan = cache.planDeleteVariant(QString::fromStdString(rest[0]));
    else if (verb == "delete-repo" && rest.size() == 1)
        plan = cache.planDeleteRepo(QString::fromStdString(rest[0]));
    else if (verb == "clean" && rest.empty())
        plan = cache.planCleanup();
    else
        return usage("cache [list | delete-variant FAMILY/VARIANT | delete-repo REPO | clean] [--yes]");
    for (const auto& b : plan.blockers)
        std::fprintf(stderr, "vireo-cli: %s\n", safe(b).c_str());
    if (!plan.blockers.isEmpty())
        return 1;
    std::printf(
        "%s: %lld entries, frees %s\n", safe(plan.what).c_str(), static_cast<long long>(plan.remove.size()), size(plan.freedBytes).c_str());
    for (const auto& k : plan.kept)
        std::printf("  note: %s\n", safe(k).c_str());
    if (!yes) {
        for (const auto& p : plan.remove)
            std::printf("  would remove %s\n", safe(p).c_str());
        std::printf("nothing was removed; run again with --yes to do it\n");
        return 0;
    }
    QString error;
    const auto freed = cache.execute(plan, &error);
    if (freed < 0) {
        std::fprintf(stderr, "vireo-cli: %s\n", safe(error).c_str());
        return 1;
    }
    std::printf("freed %s\n", size(freed).c_str());
    return 0;
}

int downloadPlan(const HubClient& client, const HfCache& cache, FilePlan plan, int parallel)
{
    printPlan(plan, preflight(plan, cache), false);
    std::mutex printMutex;
    auto lastLine = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    DownloadOptions options;
    options.parallelFiles = parallel;
    PlanDownload download(client, cache, std::move(plan), options, [&](const FileStatus& f, const PlanStatus& p) {
        std::lock_guard lock(printMutex);
        const auto now = std::chrono::steady_clock::now();
        const bool stateChange = f.state != FileState::Downloading;
        if (!stateChange && now - lastLine < std::chrono::milliseconds(500))
            return;
        lastLine = now;
        const double percent = p.totalBytes ? 100.0 * static_cast<double>(p.bytesDone) / static_cast<double>(p.totalBytes) : 100.0;
        if (stateChange)
            std::printf(
                "  %-16s %s%s%s\n", fileStateName(f.state), safe(f.path).c_str(), f.message.empty() ? "" : ": ", safe(f.message).c_str());
        std::printf("[%5.1f%%] %s / %s  %s/s  ETA %s\n", percent, humanSize(p.bytesDone).c_str(), humanSize(p.totalBytes).c_str(),
            humanSize(static_cast<std::uint64_t>(p.bytesPerSecond)).c_str(),
            p.etaSeconds < 0 ? "-" : (std::to_string(static_cast<long long>(p.etaSeconds)) + " s").c_str());
        std::fflush(stdout);
    });
    std::atomic<bool> finished{false};
    std::thread watcher([&] {
        while (!finished) {
            if (g_interrupted) {
                download.cancelAll();
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    });
    auto r = download.run();
    finished = true;
    watcher.join();
    if (!r) {
        if (r.error().kind == HubErrorKind::Cancelled)
            std::fprintf(stderr, "vireo-cli: cancelled; partial files are kept, run the same command to resume\n");
        return fail(r.error());
    }
    const auto p = download.planStatus();
    std::printf("done: %d files, %s\n", p.filesDone, humanSize(p.totalBytes).c_str());
    return 0;
}
