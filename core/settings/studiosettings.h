#pragma once

#include "core/hub/hubclient.h"

#include <QObject>
#include <QString>
#include <QStringList>

namespace vireo::core {

// The studio's persistent settings (QSettings), with the Hugging Face environment as the
// default for every Hub value so Vireo and Python tools agree until the user says otherwise.
// The token is kept in its own file readable only by the user, never in QSettings, never
// logged, and shown only masked.
class StudioSettings : public QObject {
    Q_OBJECT
public:
    explicit StudioSettings(QObject* parent = nullptr);

    QString cacheFolder() const;
    bool cacheFolderIsDefault() const;
    void setCacheFolder(const QString& folder);  // empty: back to the default

    QString endpoint() const;
    void setEndpoint(const QString& endpoint);  // empty: back to the default

    int parallelDownloads() const;
    void setParallelDownloads(int files);

    bool offline() const;
    void setOffline(bool offline);

    // Space left free on the cache volume after a download (the preflight's margin).
    quint64 headroomBytes() const;  // kept free on the cache volume by every download
    void setHeadroomBytes(quint64 bytes);

    enum class TokenSource { None, Settings, Environment, TokenFile };
    TokenSource tokenSource() const;
    bool hasToken() const { return tokenSource() != TokenSource::None; }
    QString maskedToken() const;  // "hf_…wxyz"
    // Stores the token (mode 0600, atomically); empty removes it. False with a reason on failure.
    bool setToken(const QString& token, QString* error = nullptr);
    QString tokenFilePath() const;

    // Repos the user approved by name (beyond the catalog's publishers).
    QStringList trustedRepos() const;
    bool isRepoTrusted(const QString& repo) const;
    void trustRepo(const QString& repo);
    void revokeRepo(const QString& repo);

    hub::HubClientOptions hubClientOptions() const;

    // Where generated videos and images go (default: the user's Videos folder, "Vireo Studio").
    QString outputsFolder() const;
    // Batch folders whose outputs the window's gallery adopts as they land (vireo-cli batch adds
    // its folder; the gallery drops one that is finished or gone). Read fresh each time: another
    // process (vireo-cli) adds them. At most 32, the newest kept.
    QStringList watchedFolders() const;
    void addWatchedFolder(const QString& folder);
    void removeWatchedFolder(const QString& folder);
    void setOutputsFolder(const QString& folder);  // empty: back to the default
    // Other machines' Vireo servers (Settings → Hosts, vireo-cli hosts): name and address in the
    // settings, each token in its own file readable by the user only (never in QSettings, never
    // logged). Read fresh: vireo-cli and the window both change them.
    struct RemoteHostEntry {
        QString name, url, token;
    };
    QList<RemoteHostEntry> remoteHosts() const;
    // Adds or replaces the host of that name; the url is checked by the caller
    // (remote::normalizeBaseUrl). False with a reason on failure.
    bool addRemoteHost(const QString& name, const QString& url, const QString& token, QString* error = nullptr);
    bool removeRemoteHost(const QString& name);
    static bool validHostName(const QString& name);
    // The compute device: "auto" (the first CUDA device when there is one), "cpu", "cuda:0".
    QString computeDevice() const;
    void setComputeDevice(const QString& device);
    QString resolvedComputeDevice() const;
    // Where model components live: auto, all-resident, text-encoder-on-cpu, offload-transformer-blocks.
    QString placement() const;
    void setPlacement(const QString& placement);
    // Local models the user added (each: model paths joined by '|' and an optional "|te=" folder).
    QStringList localModels() const;
    void addLocalModel(const QString& entry);
    void removeLocalModel(const QString& entry);
    // The local HTTP API served by the running studio (Settings' switch): on or off, its port, and
    // whether it answers other machines (then only with the bearer token).
    bool apiEnabled() const;
    int apiPort() const;
    bool apiPublic() const;
    void setApi(bool enabled, int port, bool answerOthers);

signals:
    void changed();

private:
    QString storedToken() const;
};

}  // namespace vireo::core
