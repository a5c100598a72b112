#pragma once

// Turns what the user picked into files on disk: a catalog variant (its finished download in
// the Hugging Face cache, each source by its role), a Hub repo downloaded earlier, or a local
// file or folder. Says what is missing for a model that is not ready.

#include "core/runtime/engine.h"

#include <QObject>
#include <QString>

namespace vireo::core {
class StudioSettings;
}
namespace vireo::hub {
class DownloadManager;
}

namespace vireo::runtime {

struct ModelChoice {
    QString key;  // "catalog:ltx-2.3/distilled-fp8", "repo:org/name@main", "local:<entry>"
    QString title;
    QString kind;  // "catalog", "repo", "local"
    QString variantId;  // catalog variants
    bool ready = false;
    QString missing;  // why not ready, and what to do
};

class ModelResolver : public QObject {
    Q_OBJECT
public:
    ModelResolver(hub::DownloadManager* downloads, core::StudioSettings* settings, QObject* parent = nullptr);

    // Ready models first (catalog variants, downloaded repos, local models), then the catalog
    // variants that still need a download.
    QList<ModelChoice> choices() const;
    // The files and load settings for a choice; an error says what is missing.
    Result<ModelRef> resolve(const QString& key) const;
    // Whether every Hub repo of a model is trusted (catalog publisher or approved).
    bool trusted(const QString& repo) const;

    // "local:" entries: model paths joined by '|', optionally "|te=<text encoder folder>",
    // "|up=<spatial upsampler>" (the two-stage path's latent upsampler), "|tu=<temporal
    // upsampler>", "|dl=<distilled LoRA>" (the dev two-stage recipe's) and "|pe=<prompt
    // enhancer>" (one given to a model without its own).
    static QString localKey(const QStringList& modelPaths, const QString& textEncoder = {}, const QString& spatialUpsampler = {},
        const QString& temporalUpsampler = {}, const QString& distilledLora = {}, const QString& promptEnhancer = {});
    // Every file or folder a local key's entry (without "local:") names, companions included.
    static QStringList localKeyPaths(const QString& entry);

signals:
    void choicesChanged();

private:
    hub::DownloadManager* m_downloads;
    core::StudioSettings* m_settings;
};

}  // namespace vireo::runtime
