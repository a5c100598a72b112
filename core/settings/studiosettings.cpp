#include "core/settings/studiosettings.h"

#include "core/hub/hubpaths.h"
#include "inference/facade/generator.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QRegularExpression>
#include <QSaveFile>
#include <QSettings>
#include <QStandardPaths>

#include <algorithm>

namespace vireo::core {

namespace {

const QString kCacheDir = QStringLiteral("hub/cacheDir");
const QString kEndpoint = QStringLiteral("hub/endpoint");
const QString kParallel = QStringLiteral("hub/parallelDownloads");
const QString kOffline = QStringLiteral("hub/offline");
const QString kHeadroom = QStringLiteral("hub/headroomBytes");
const QString kTrusted = QStringLiteral("trust/repos");
const QString kOutputs = QStringLiteral("studio/outputsFolder");
const QString kWatched = QStringLiteral("gallery/watchedFolders");
const QString kDevice = QStringLiteral("studio/device");
const QString kPlacement = QStringLiteral("studio/placement");
const QString kLocalModels = QStringLiteral("studio/localModels");

const QString kHosts = QStringLiteral("remote/hosts");

// A secret (a token) in a file only its owner can read, written atomically.
bool writePrivateFile(const QString& path, const QByteArray& bytes, QString* error)
{
    QDir().mkpath(QFileInfo(path).absolutePath());
    QSaveFile file(path);
    // The temporary file gets the final permissions before any byte of the secret is written.
    if (!file.open(QIODevice::WriteOnly) || !file.setPermissions(QFile::ReadOwner | QFile::WriteOwner)) {
        if (error)
            *error = QStringLiteral("Could not write %1: %2").arg(path, file.errorString());
        return false;
    }
    file.write(bytes);
    if (!file.commit()) {
        if (error)
            *error = QStringLiteral("Could not write %1: %2").arg(path, file.errorString());
        return false;
    }
    QFile::setPermissions(path, QFile::ReadOwner | QFile::WriteOwner);
    return true;
}

QString hostTokenPath(const QString& name)
{
    return QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation) + QStringLiteral("/hosts/") + name
        + QStringLiteral(".token");
}

QString readTokenFile(const QString& path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return {};
    return QString::fromUtf8(file.read(4096)).trimmed();
}

}  // namespace

StudioSettings::StudioSettings(QObject* parent) : QObject(parent) {}

QString StudioSettings::cacheFolder() const
{
    const auto stored = QSettings().value(kCacheDir).toString();
    return stored.isEmpty() ? HubPaths::fromEnvironment().cacheDir : stored;
}

bool StudioSettings::cacheFolderIsDefault() const
{
    return QSettings().value(kCacheDir).toString().isEmpty();
}

void StudioSettings::setCacheFolder(const QString& folder)
{
    const auto clean = folder.trimmed().isEmpty() ? QString() : QDir::cleanPath(folder.trimmed());
    if (clean == QSettings().value(kCacheDir).toString())
        return;
    if (clean.isEmpty())
        QSettings().remove(kCacheDir);
    else
        QSettings().setValue(kCacheDir, clean);
    emit changed();
}

QString StudioSettings::endpoint() const
{
    const auto stored = QSettings().value(kEndpoint).toString();
    return stored.isEmpty() ? HubPaths::fromEnvironment().endpoint : stored;
}

void StudioSettings::setEndpoint(const QString& endpoint)
{
    auto clean = endpoint.trimmed();
    while (clean.endsWith(QLatin1Char('/')))
        clean.chop(1);
    if (clean == QSettings().value(kEndpoint).toString())
        return;
    if (clean.isEmpty())
        QSettings().remove(kEndpoint);
    else
        QSettings().setValue(kEndpoint, clean);
    emit changed();
}

int StudioSettings::parallelDownloads() const
{
    return std::clamp(QSettings().value(kParallel, 4).toInt(), 1, 16);
}

void StudioSettings::setParallelDownloads(int files)
{
    files = std::clamp(files, 1, 16);
    if (files == parallelDownloads())
        return;
    QSettings().setValue(kParallel, files);
    emit changed();
}

bool StudioSettings::offline() const
{
    return QSettings().value(kOffline, HubPaths::fromEnvironment().offline).toBool();
}

void StudioSettings::setOffline(bool offline)
{
    if (offline == this->offline())
        return;
    QSettings().setValue(kOffline, offline);
    emit changed();
}

quint64 StudioSettings::headroomBytes() const
{
    return QSettings().value(kHeadroom, quint64(2) << 30).toULongLong();
}

void StudioSettings::setHeadroomBytes(quint64 bytes)
{
    if (bytes == headroomBytes())
        return;
    QSettings().setValue(kHeadroom, bytes);
    emit changed();
}

QString StudioSettings::tokenFilePath() const
{
    return QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation) + QStringLiteral("/hub-token");
}

QString StudioSettings::storedToken() const
{
    return readTokenFile(tokenFilePath());
}

StudioSettings::TokenSource StudioSettings::tokenSource() const
{
    if (!storedToken().isEmpty())
        return TokenSource::Settings;
    if (!qEnvironmentVariable("HF_TOKEN").trimmed().isEmpty() || !qEnvironmentVariable("HUGGING_FACE_HUB_TOKEN").trimmed().isEmpty())
        return TokenSource::Environment;
    if (!readTokenFile(HubPaths::fromEnvironment().tokenPath).isEmpty())
        return TokenSource::TokenFile;
    return TokenSource::None;
}

QString StudioSettings::maskedToken() const
{
    const auto options = hubClientOptions();
    if (!options.token)
        return {};
    const auto token = QString::fromStdString(*options.token);
    if (token.size() <= 8)
        return QStringLiteral("••••");
    return token.left(3) + QStringLiteral("…") + token.right(4);
}

bool StudioSettings::setToken(const QString& token, QString* error)
{
    const auto path = tokenFilePath();
    const auto clean = token.trimmed();
    if (clean.isEmpty()) {
        if (QFile::exists(path) && !QFile::remove(path)) {
            if (error)
                *error = tr("Could not remove %1").arg(path);
            return false;
        }
        emit changed();
        return true;
    }
    if (clean.contains(QLatin1Char('\n')) || clean.contains(QLatin1Char(' '))) {
        if (error)
            *error = tr("A Hugging Face token is one word without spaces");
        return false;
    }
    if (!writePrivateFile(path, clean.toUtf8(), error))
        return false;
    emit changed();
    return true;
}

QStringList StudioSettings::trustedRepos() const
{
    return QSettings().value(kTrusted).toStringList();
}

bool StudioSettings::isRepoTrusted(const QString& repo) const
{
    return trustedRepos().contains(repo, Qt::CaseInsensitive);
}

void StudioSettings::trustRepo(const QString& repo)
{
    auto repos = trustedRepos();
    if (repos.contains(repo, Qt::CaseInsensitive))
        return;
    repos.append(repo);
    repos.sort(Qt::CaseInsensitive);
    QSettings().setValue(kTrusted, repos);
    emit changed();
}

void StudioSettings::revokeRepo(const QString& repo)
{
    auto repos = trustedRepos();
    if (repos.removeIf([&](const QString& r) { return r.compare(repo, Qt::CaseInsensitive) == 0; }) == 0)
        return;
    QSettings().setValue(kTrusted, repos);
    emit changed();
}

hub::HubClientOptions StudioSettings::hubClientOptions() const
{
    auto o = hub::HubClientOptions::fromEnvironment();
    o.endpoint = endpoint().toStdString();
    o.offline = offline();
    const auto token = storedToken();
    if (!token.isEmpty())
        o.token = token.toStdString();
    return o;
}

QString StudioSettings::outputsFolder() const
{
    const auto stored = QSettings().value(kOutputs).toString();
    if (!stored.isEmpty())
        return stored;
    auto videos = QStandardPaths::writableLocation(QStandardPaths::MoviesLocation);
    if (videos.isEmpty())
        videos = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    return QDir(videos).filePath(QStringLiteral("Vireo Studio"));
}

QStringList StudioSettings::watchedFolders() const
{
    QSettings s;
    s.sync();
    return s.value(kWatched).toStringList();
}

void StudioSettings::addWatchedFolder(const QString& folder)
{
    QSettings s;
    s.sync();
    auto list = s.value(kWatched).toStringList();
    const auto clean = QDir::cleanPath(QDir(folder).absolutePath());
    list.removeAll(clean);
    list.append(clean);
    while (list.size() > 32)
        list.removeFirst();
    s.setValue(kWatched, list);
    s.sync();
}

void StudioSettings::removeWatchedFolder(const QString& folder)
{
    QSettings s;
    s.sync();
    auto list = s.value(kWatched).toStringList();
    if (list.removeAll(folder) == 0)
        return;
    s.setValue(kWatched, list);
    s.sync();
}

QList<StudioSettings::RemoteHostEntry> StudioSettings::remoteHosts() const
{
    QSettings s;
    s.sync();
    QList<RemoteHostEntry> hosts;
    for (const auto& line : s.value(kHosts).toStringList()) {
        const auto name = line.section(QLatin1Char(' '), 0, 0);
        const auto url = line.section(QLatin1Char(' '), 1);
        if (validHostName(name) && !url.isEmpty())
            hosts.append({name, url, readTokenFile(hostTokenPath(name))});
    }
    return hosts;
}

bool StudioSettings::validHostName(const QString& name)
{
    static const QRegularExpression re(QStringLiteral("^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$"));
    return re.match(name).hasMatch() && name != QStringLiteral("any");
}

bool StudioSettings::addRemoteHost(const QString& name, const QString& url, const QString& token, QString* error)
{
    if (!validHostName(name)) {
        if (error)
            *error =
                QStringLiteral("A host's name is 1 to 40 letters, digits, '.', '_' or '-' (and not \"any\"), not '%1'").arg(name.left(60));
        return false;
    }
    const auto cleanToken = token.trimmed();
    if (cleanToken.contains(QLatin1Char('\n')) || cleanToken.contains(QLatin1Char('\r')) || cleanToken.contains(QLatin1Char(' '))) {
        if (error)
            *error = QStringLiteral("A host's token is one word without spaces");
        return false;
    }
    const auto tokenPath = hostTokenPath(name);
    if (cleanToken.isEmpty())
        QFile::remove(tokenPath);
    else if (!writePrivateFile(tokenPath, cleanToken.toUtf8(), error))
        return false;
    QSettings s;
    s.sync();
    auto list = s.value(kHosts).toStringList();
    list.erase(
        std::remove_if(list.begin(), list.end(), [&](const QString& l) { return l.section(QLatin1Char(' '), 0, 0) == name; }), list.end());
    list.append(name + QLatin1Char(' ') + url.trimmed());
    s.setValue(kHosts, list);
    s.sync();
    emit changed();
    return true;
}

bool StudioSettings::removeRemoteHost(const QString& name)
{
    QSettings s;
    s.sync();
    auto list = s.value(kHosts).toStringList();
    const auto before = list.size();
    list.erase(
        std::remove_if(list.begin(), list.end(), [&](const QString& l) { return l.section(QLatin1Char(' '), 0, 0) == name; }), list.end());
    if (list.size() == before)
        return false;
    s.setValue(kHosts, list);
    s.sync();
    if (validHostName(name))
        QFile::remove(hostTokenPath(name));
    emit changed();
    return true;
}

void StudioSettings::setOutputsFolder(const QString& folder)
{
    const auto clean = folder.trimmed().isEmpty() ? QString() : QDir::cleanPath(folder.trimmed());
    if (clean == QSettings().value(kOutputs).toString())
        return;
    if (clean.isEmpty())
        QSettings().remove(kOutputs);
    else
        QSettings().setValue(kOutputs, clean);
    emit changed();
}

bool StudioSettings::apiEnabled() const
{
    return QSettings().value(QStringLiteral("api/enabled"), false).toBool();
}

int StudioSettings::apiPort() const
{
    const int port = QSettings().value(QStringLiteral("api/port"), 8765).toInt();
    return port >= 1 && port <= 65535 ? port : 8765;
}

bool StudioSettings::apiPublic() const
{
    return QSettings().value(QStringLiteral("api/public"), false).toBool();
}

void StudioSettings::setApi(bool enabled, int port, bool answerOthers)
{
    if (enabled == apiEnabled() && port == apiPort() && answerOthers == apiPublic())
        return;
    QSettings s;
    s.setValue(QStringLiteral("api/enabled"), enabled);
    s.setValue(QStringLiteral("api/port"), port);
    s.setValue(QStringLiteral("api/public"), answerOthers);
    emit changed();
}

QString StudioSettings::computeDevice() const
{
    const auto d = QSettings().value(kDevice, QStringLiteral("auto")).toString().trimmed().toLower();
    return d.isEmpty() ? QStringLiteral("auto") : d;
}

void StudioSettings::setComputeDevice(const QString& device)
{
    const auto d = device.trimmed().toLower();
    if (d == computeDevice())
        return;
    QSettings().setValue(kDevice, d.isEmpty() ? QStringLiteral("auto") : d);
    emit changed();
}

QString StudioSettings::resolvedComputeDevice() const
{
    const auto d = computeDevice();
    if (d != QStringLiteral("auto"))
        return d;
    const auto devices = facade::availableDevices();
    return devices.size() > 1 ? QString::fromStdString(devices[1].name) : QStringLiteral("cpu");
}

QString StudioSettings::placement() const
{
    const auto p = QSettings().value(kPlacement, QStringLiteral("auto")).toString();
    return facade::parsePlacement(p.toStdString()) ? p.toLower() : QStringLiteral("auto");
}

void StudioSettings::setPlacement(const QString& placement)
{
    if (!facade::parsePlacement(placement.toStdString()) || placement.toLower() == this->placement())
        return;
    QSettings().setValue(kPlacement, placement.toLower());
    emit changed();
}

QStringList StudioSettings::localModels() const
{
    return QSettings().value(kLocalModels).toStringList();
}

void StudioSettings::addLocalModel(const QString& entry)
{
    auto list = localModels();
    if (list.contains(entry))
        return;
    list.prepend(entry);
    while (list.size() > 50)
        list.removeLast();
    QSettings().setValue(kLocalModels, list);
    emit changed();
}

void StudioSettings::removeLocalModel(const QString& entry)
{
    auto list = localModels();
    if (list.removeAll(entry) == 0)
        return;
    QSettings().setValue(kLocalModels, list);
    emit changed();
}

}  // namespace vireo::core
