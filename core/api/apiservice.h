#pragma once

// The local API's routes, on the studio's thread: OpenAI's images and videos endpoints and
// Vireo's own under /v1/vireo, answered from the same services the window uses (core::Studio's
// model resolver, the generation service's Ask -> prepare, the device's engine queue, the
// gallery). The HTTP side (ApiServer) runs on a thread of its own and reaches this object only
// through queued calls; nothing here blocks on a tensor. Jobs accepted are kept in a journal so
// a restart runs the queued ones and reports the one that was cut off.

#include "core/api/apiserver.h"

#include <QObject>
#include <QString>
#include <QStringList>

#include <memory>

namespace vireo::core {
class Studio;
}

namespace vireo::api {

class ApiService : public QObject {
    Q_OBJECT
public:
    struct Options {
        ApiServer::Options server;
        QString journalFile;  // empty: api-jobs.jsonl in the studio's data folder
        QString uploadsFolder;  // input_reference images; empty: api-uploads/ in the data folder
        QString outputsFolder;  // empty: the studio's outputs folder
        QString device;  // the engine's device; empty: the studio's setting
        // Local models served besides the studio's own choices: ModelResolver keys ("local:...").
        QStringList extraModels;
        int maxQueuedJobs = 16;  // jobs queued or running through the API; more is a 429
    };
    ApiService(core::Studio* studio, Options options, QObject* parent = nullptr);
    ~ApiService() override;

    // Replays the journal, then listens. An error says why nothing is served (the port is taken,
    // no token for a public address, the journal cannot be written).
    Result<void> start();
    bool running() const;
    QString baseUrl() const;
    ApiServer::Stats stats() const;

    // The API token file (readable by its owner only), made with a fresh random token when
    // missing; the token, or an error naming the file.
    static Result<std::string> ensureToken(const QString& file);
    static QString defaultTokenFile();

signals:
    // A job accepted, changed state, or finished (the window may show API jobs).
    void jobsChanged();

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

}  // namespace vireo::api
