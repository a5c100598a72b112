#pragma once

// tests/hub/hubserver.py as a child process of a Qt test: writes the repo spec, starts the
// server on loopback, waits for its ready file, and talks to its control API.

#include <QCoreApplication>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QProcess>
#include <QStringList>
#include <QTest>

namespace vireo::test {

class TestHub {
public:
    ~TestHub() { stop(); }

    static QString python() { return qEnvironmentVariable("VIREO_PYTHON"); }
    static QString source(const char* relative)
    {
        return qEnvironmentVariable("VIREO_SOURCE_DIR") + QLatin1Char('/') + QLatin1String(relative);
    }

    // Writes the spec into workDir and starts the server; false (with the reason in
    // `error`) when it cannot.
    bool start(const QString& workDir, const QStringList& extraArgs = {}, QString* error = nullptr)
    {
        const QString spec = workDir + QStringLiteral("/spec.json");
        if (QProcess::execute(python(), {source("tests/hub/specs.py"), spec}) != 0)
            return fail(error, QStringLiteral("specs.py failed"));
        return launch(workDir, spec, extraArgs, error);
    }

    // The same with a spec of the test's own (repos of real files: {"path": ...} entries).
    bool startWithSpec(const QString& workDir, const QJsonObject& specObject, const QStringList& extraArgs = {}, QString* error = nullptr)
    {
        const QString spec = workDir + QStringLiteral("/spec.json");
        QFile out(spec);
        if (!out.open(QIODevice::WriteOnly) || out.write(QJsonDocument(specObject).toJson()) <= 0)
            return fail(error, QStringLiteral("cannot write the spec"));
        out.close();
        return launch(workDir, spec, extraArgs, error);
    }

private:
    bool launch(const QString& workDir, const QString& spec, const QStringList& extraArgs, QString* error)
    {
        QFile specFile(spec);
        if (!specFile.open(QIODevice::ReadOnly))
            return fail(error, QStringLiteral("no spec written"));
        m_spec = QJsonDocument::fromJson(specFile.readAll()).object();
        const QString ready = workDir + QStringLiteral("/ready.json");
        m_server.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        m_server.start(python(),
            QStringList{source("tests/hub/hubserver.py"), QStringLiteral("--repos"), spec, QStringLiteral("--ready-file"), ready}
                + extraArgs);
        if (!m_server.waitForStarted())
            return fail(error, QStringLiteral("hubserver.py did not start"));
        if (!QTest::qWaitFor([&] { return QFileInfo::exists(ready); }, 30000))
            return fail(error, QStringLiteral("hubserver.py wrote no ready file in 30 s"));
        QFile readyFile(ready);
        if (!readyFile.open(QIODevice::ReadOnly))
            return fail(error, QStringLiteral("cannot read the ready file"));
        const auto urls = QJsonDocument::fromJson(readyFile.readAll()).object();
        m_hub = urls.value(QStringLiteral("hub")).toString();
        m_cdn = urls.value(QStringLiteral("cdn")).toString();
        m_cdnAlias = urls.value(QStringLiteral("cdn_alias")).toString();
        return !m_hub.isEmpty() && !m_cdn.isEmpty() ? true : fail(error, QStringLiteral("the ready file names no URLs"));
    }

public:
    void stop()
    {
        if (m_server.state() == QProcess::NotRunning)
            return;
        m_server.terminate();
        if (!m_server.waitForFinished(5000))
            m_server.kill();
    }

    const QString& hubUrl() const { return m_hub; }
    const QString& cdnUrl() const { return m_cdn; }
    // The CDN again on another loopback address (--cdn-alias), empty unless asked for.
    const QString& cdnAliasUrl() const { return m_cdnAlias; }
    const QJsonObject& spec() const { return m_spec; }

    QJsonDocument control(const QByteArray& verb, const QString& path, const QByteArray& body = {})
    {
        QNetworkRequest request(QUrl(m_hub + path));
        request.setHeader(QNetworkRequest::ContentTypeHeader, QStringLiteral("application/json"));
        QNetworkReply* reply = m_net.sendCustomRequest(request, verb, body);
        QEventLoop loop;
        QObject::connect(reply, &QNetworkReply::finished, &loop, &QEventLoop::quit);
        loop.exec();
        const auto doc = QJsonDocument::fromJson(reply->readAll());
        reply->deleteLater();
        return doc;
    }

    void addFaults(const QJsonArray& rules) { control("POST", QStringLiteral("/_control/faults"), QJsonDocument(rules).toJson()); }
    void clearFaults() { control("DELETE", QStringLiteral("/_control/faults")); }
    void clearLog() { control("DELETE", QStringLiteral("/_control/log")); }
    QJsonArray requestLog() { return control("GET", QStringLiteral("/_control/log")).array(); }

private:
    static bool fail(QString* error, const QString& why)
    {
        if (error)
            *error = why;
        return false;
    }

    QProcess m_server;
    QString m_hub, m_cdn, m_cdnAlias;
    QJsonObject m_spec;
    QNetworkAccessManager m_net;
};

}  // namespace vireo::test
