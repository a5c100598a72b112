#pragma once

#include <QString>

namespace vireo::core {

// Where huggingface_hub keeps things, resolved from the environment exactly as the Python
// library does (constants.py), so Vireo and Python tools share one cache.
struct HubPaths {
    QString endpoint;  // HF_ENDPOINT without a trailing '/'
    QString home;  // HF_HOME
    QString cacheDir;  // HF_HUB_CACHE
    QString tokenPath;  // HF_TOKEN_PATH
    bool offline = false;  // HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE
    QString cacheDirSource;  // which variable decided cacheDir ("default" when none)

    static HubPaths fromEnvironment();
};

// huggingface_hub's truthy values: 1, ON, YES, TRUE (any case).
bool isTruthy(const QString& value);

}  // namespace vireo::core
