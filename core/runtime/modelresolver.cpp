#include "core/runtime/modelresolver.h"

#include "core/hub/downloadmanager.h"
#include "core/hub/hfcache.h"
#include "core/settings/studiosettings.h"

#include <QDir>
#include <QFileInfo>

#include <algorithm>

namespace vireo::runtime {

namespace {

// "diffusers" or "transformer" alone says little: the folder above is named too.
QString localTitle(const QString& path)
{
    const QFileInfo info(path);
    QString name = info.fileName();
    if (name == QStringLiteral("diffusers") || name == QStringLiteral("transformer") || name.startsWith(QStringLiteral("model")))
        name = info.dir().dirName() + QLatin1Char('/') + name;
    return name;
}

bool isWeightFile(const std::string& path)
{
    return path.ends_with(".safetensors") || path.ends_with(".gguf");
}

}  // namespace

ModelResolver::ModelResolver(hub::DownloadManager* downloads, core::StudioSettings* settings, QObject* parent)
    : QObject(parent), m_downloads(downloads), m_settings(settings)
{
    connect(m_downloads, &hub::DownloadManager::availabilityChanged, this, &ModelResolver::choicesChanged);
    connect(m_settings, &core::StudioSettings::changed, this, &ModelResolver::choicesChanged);
}

QString ModelResolver::localKey(const QStringList& modelPaths, const QString& textEncoder, const QString& spatialUpsampler,
    const QString& temporalUpsampler, const QString& distilledLora, const QString& promptEnhancer)
{
    return QStringLiteral("local:") + modelPaths.join(QLatin1Char('|'))
        + (textEncoder.isEmpty() ? QString() : QStringLiteral("|te=") + textEncoder)
        + (spatialUpsampler.isEmpty() ? QString() : QStringLiteral("|up=") + spatialUpsampler)
        + (temporalUpsampler.isEmpty() ? QString() : QStringLiteral("|tu=") + temporalUpsampler)
        + (distilledLora.isEmpty() ? QString() : QStringLiteral("|dl=") + distilledLora)
        + (promptEnhancer.isEmpty() ? QString() : QStringLiteral("|pe=") + promptEnhancer);
}

namespace {

// A companion's tag in a local key ("te=" ...), or nothing for a model path.
bool companionTag(const QString& part)
{
    static const QStringList tags{
        QStringLiteral("te="), QStringLiteral("up="), QStringLiteral("tu="), QStringLiteral("dl="), QStringLiteral("pe=")};
    return std::any_of(tags.begin(), tags.end(), [&](const QString& t) { return part.startsWith(t); });
}

}  // namespace

QStringList ModelResolver::localKeyPaths(const QString& entry)
{
    QStringList out;
    for (const auto& part : entry.split(QLatin1Char('|'), Qt::SkipEmptyParts))
        out << (companionTag(part) ? part.mid(3) : part);
    return out;
}

bool ModelResolver::trusted(const QString& repo) const
{
    return m_downloads->isTrusted(repo.toStdString());
}

QList<ModelChoice> ModelResolver::choices() const
{
    QList<ModelChoice> ready, later;
    const auto& catalog = m_downloads->catalog();
    for (const auto& family : catalog.families) {
        for (const auto& v : family.variants) {
            if (v.pipeline != "ltx2-distilled" && v.pipeline != "ltx2-dev" && v.pipeline != "ideogram4")
                continue;  // a pipeline this version cannot run (a newer catalog's) is not offered
            ModelChoice c;
            c.variantId = QString::fromStdString(family.id + "/" + v.id);
            c.key = QStringLiteral("catalog:") + c.variantId;
            c.kind = QStringLiteral("catalog");
            c.title = QString::fromStdString(family.name + " · " + v.name);
            c.ready = m_downloads->readyFiles(c.key).has_value();
            if (!c.ready)
                c.missing = tr("Not downloaded yet: plan its download on the Downloads page.");
            (c.ready ? ready : later).append(c);
        }
    }
    for (const auto* t : m_downloads->tasks()) {
        if (!t->spec().catalogId.isEmpty() || !m_downloads->readyFiles(t->spec().key))
            continue;
        ModelChoice c;
        c.key = t->spec().key;
        c.kind = QStringLiteral("repo");
        c.title = t->spec().title;
        c.ready = true;
        ready.append(c);
    }
    for (const auto& entry : m_settings->localModels()) {
        ModelChoice c;
        c.key = QStringLiteral("local:") + entry;
        c.kind = QStringLiteral("local");
        const auto first = entry.section(QLatin1Char('|'), 0, 0);
        c.title = localTitle(first) + tr(" (local)");
        c.ready = QFileInfo::exists(first);
        if (!c.ready)
            c.missing = tr("%1 is gone (moved or deleted).").arg(first);
        (c.ready ? ready : later).append(c);
    }
    return ready + later;
}

Result<ModelRef> ModelResolver::resolve(const QString& key) const
{
    ModelRef m;
    m.key = key;
    m.plan.device = m_settings->resolvedComputeDevice().toStdString();
    if (auto p = facade::parsePlacement(m_settings->placement().toStdString()))
        m.plan.placement = *p;
    if (key.startsWith(QStringLiteral("local:"))) {
        const auto parts = key.mid(6).split(QLatin1Char('|'), Qt::SkipEmptyParts);
        for (const auto& p : parts) {
            if (p.startsWith(QStringLiteral("te=")))
                m.plan.textEncoderPath = p.mid(3).toStdString();
            else if (p.startsWith(QStringLiteral("up=")))
                m.plan.spatialUpsamplerPath = p.mid(3).toStdString();
            else if (p.startsWith(QStringLiteral("tu=")))
                m.plan.temporalUpsamplerPath = p.mid(3).toStdString();
            else if (p.startsWith(QStringLiteral("dl=")))
                m.plan.distilledLoraPath = p.mid(3).toStdString();
            else if (p.startsWith(QStringLiteral("pe=")))
                m.plan.promptEnhancerPath = p.mid(3).toStdString();
            else
                m.plan.modelPaths.emplace_back(p.toStdString());
        }
        if (m.plan.modelPaths.empty())
            return makeError(ErrorCode::InvalidArgument, "no model file given");
        for (const auto& p : m.plan.modelPaths)
            if (!QFileInfo::exists(QString::fromStdString(p.string())))
                return makeError(ErrorCode::NotFound, p.string() + " does not exist (moved or deleted?)");
        if (m.plan.spatialUpsamplerPath && !QFileInfo::exists(QString::fromStdString(m.plan.spatialUpsamplerPath->string())))
            return makeError(ErrorCode::NotFound,
                "the spatial upsampler " + m.plan.spatialUpsamplerPath->string() + " does not exist (moved or deleted?)");
        if (m.plan.temporalUpsamplerPath && !QFileInfo::exists(QString::fromStdString(m.plan.temporalUpsamplerPath->string())))
            return makeError(ErrorCode::NotFound,
                "the temporal upsampler " + m.plan.temporalUpsamplerPath->string() + " does not exist (moved or deleted?)");
        if (m.plan.distilledLoraPath && !QFileInfo::exists(QString::fromStdString(m.plan.distilledLoraPath->string())))
            return makeError(
                ErrorCode::NotFound, "the distilled LoRA " + m.plan.distilledLoraPath->string() + " does not exist (moved or deleted?)");
        if (m.plan.promptEnhancerPath && !QFileInfo::exists(QString::fromStdString(m.plan.promptEnhancerPath->string())))
            return makeError(
                ErrorCode::NotFound, "the prompt enhancer " + m.plan.promptEnhancerPath->string() + " does not exist (moved or deleted?)");
        m.title = localTitle(QString::fromStdString(m.plan.modelPaths.front().string()));
        return m;
    }
    const auto ready = m_downloads->readyFiles(key);
    if (!ready)
        return makeError(
            ErrorCode::NotFound, key.toStdString() + " is not complete in the cache: plan and start its download on the Downloads page");
    const auto cache = m_downloads->hfCache();
    const catalog::Variant* variant = nullptr;
    if (key.startsWith(QStringLiteral("catalog:"))) {
        const auto id = key.mid(8).toStdString();
        variant = m_downloads->catalog().find(id);
        if (!variant)
            return makeError(ErrorCode::NotFound, id + " is not in the catalog");
        m.family = QString::fromStdString(id.substr(0, id.find('/')));
        m.variant = QString::fromStdString(id.substr(id.find('/') + 1));
        if (const auto* f = m_downloads->catalog().family(m.family.toStdString()))
            m.title = QString::fromStdString(f->name + " · " + variant->name);
        if (variant->sources.size() != ready->size())
            return makeError(ErrorCode::InvalidFormat, id + ": the finished download does not match the catalog entry; plan it again");
    } else if (const auto* t = m_downloads->task(key)) {
        m.title = t->spec().title;
    }
    QStringList commits;
    for (std::size_t i = 0; i < ready->size(); ++i) {
        const auto& src = (*ready)[i];
        const std::string role = variant ? variant->sources[i].role : "pipeline";
        m.repos << QString::fromStdString(src.repo);
        commits << QString::fromStdString(src.commit.substr(0, 12));
        auto dir = cache->repoDir(src.repo);
        if (!dir)
            return makeError(ErrorCode::InvalidArgument, dir.error().message);
        const auto snapshot = *dir / "snapshots" / src.commit;
        if (role == "spatial_upscaler" || role == "temporal_upscaler" || role == "distilled_lora") {
            auto& path = role == "spatial_upscaler" ? m.plan.spatialUpsamplerPath
                : role == "temporal_upscaler"       ? m.plan.temporalUpsamplerPath
                                                    : m.plan.distilledLoraPath;
            for (const auto& f : src.files)
                if (isWeightFile(f.path))
                    path = snapshot / f.path;
            continue;
        }
        if (role == "text_encoder") {
            m.plan.textEncoderPath = snapshot / "text_encoder";
            continue;
        }
        if (role == "pipeline") {
            m.plan.modelPaths.push_back(snapshot);
            continue;
        }
        for (const auto& f : src.files)
            if (isWeightFile(f.path))
                m.plan.modelPaths.push_back(snapshot / f.path);
    }
    m.repos.removeDuplicates();
    commits.removeDuplicates();
    m.commit = commits.join(QLatin1Char(','));
    if (m.plan.modelPaths.empty())
        return makeError(ErrorCode::NotFound, key.toStdString() + ": the download holds no weight file");
    return m;
}

}  // namespace vireo::runtime
