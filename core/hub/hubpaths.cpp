#include "core/hub/hubpaths.h"
#include "base/envswitch.h"

#include <QDir>
#include <QProcessEnvironment>

namespace vireo::core {

namespace {

QString expandUser(QString path)
{
    if (path == QStringLiteral("~") || path.startsWith(QStringLiteral("~/")))
        path.replace(0, 1, QDir::homePath());
    return QDir::cleanPath(path);
}

}  // namespace

bool isTruthy(const QString& value)
{
    return env::parseFlag(value.toStdString()).value_or(false);
}

HubPaths HubPaths::fromEnvironment()
{
    const auto env = QProcessEnvironment::systemEnvironment();
    HubPaths paths;
    paths.endpoint = env.value(QStringLiteral("HF_ENDPOINT"), QStringLiteral("https://huggingface.co"));
    while (paths.endpoint.endsWith(QLatin1Char('/')))
        paths.endpoint.chop(1);

    const QString xdg = env.value(QStringLiteral("XDG_CACHE_HOME"));
    const QString defaultHome =
        (xdg.isEmpty() ? QDir::homePath() + QStringLiteral("/.cache") : expandUser(xdg)) + QStringLiteral("/huggingface");
    paths.home = env.contains(QStringLiteral("HF_HOME")) ? expandUser(env.value(QStringLiteral("HF_HOME"))) : defaultHome;

    if (env.contains(QStringLiteral("HF_HUB_CACHE"))) {
        paths.cacheDir = expandUser(env.value(QStringLiteral("HF_HUB_CACHE")));
        paths.cacheDirSource = QStringLiteral("HF_HUB_CACHE");
    } else if (env.contains(QStringLiteral("HUGGINGFACE_HUB_CACHE"))) {
        paths.cacheDir = expandUser(env.value(QStringLiteral("HUGGINGFACE_HUB_CACHE")));
        paths.cacheDirSource = QStringLiteral("HUGGINGFACE_HUB_CACHE");
    } else {
        paths.cacheDir = paths.home + QStringLiteral("/hub");
        paths.cacheDirSource = env.contains(QStringLiteral("HF_HOME")) ? QStringLiteral("HF_HOME") : QStringLiteral("default");
    }
    paths.tokenPath = env.contains(QStringLiteral("HF_TOKEN_PATH")) ? expandUser(env.value(QStringLiteral("HF_TOKEN_PATH")))
                                                                    : paths.home + QStringLiteral("/token");
    paths.offline = isTruthy(env.value(QStringLiteral("HF_HUB_OFFLINE"))) || isTruthy(env.value(QStringLiteral("TRANSFORMERS_OFFLINE")));
    return paths;
}

}  // namespace vireo::core
