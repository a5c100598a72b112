#include "core/catalog/catalog.h"

#include <QFile>

#include <nlohmann/json.hpp>

#include <algorithm>

// Q_INIT_RESOURCE must run at global scope; a static library's resources are otherwise
// dropped by the linker.
static void initCatalogResource()
{
    Q_INIT_RESOURCE(resources);
}

namespace vireo::catalog {

namespace {

std::vector<std::string> strings(const nlohmann::json& j, const char* key)
{
    std::vector<std::string> out;
    if (j.contains(key) && j[key].is_array())
        for (const auto& s : j[key])
            if (s.is_string())
                out.push_back(s.get<std::string>());
    return out;
}

}  // namespace

vireo::Result<Catalog> Catalog::parse(const std::string& text, const std::string& origin)
{
    auto fail = [&](const std::string& what) { return makeError(ErrorCode::InvalidFormat, origin + ": " + what); };
    const auto json = nlohmann::json::parse(text, nullptr, false);
    if (!json.is_object() || json.value("schema", 0) != 1)
        return fail("not a schema-1 catalog");
    Catalog catalog;
    catalog.trustedPublishers = strings(json, "trusted_publishers");
    if (!json.contains("families") || !json["families"].is_array())
        return fail("has no families");
    for (const auto& f : json["families"]) {
        Family family;
        family.id = f.value("id", "");
        family.name = f.value("name", family.id);
        family.kind = f.value("kind", "");
        family.description = f.value("description", "");
        const auto familyDefaults = f.value("defaults", nlohmann::json::object());
        if (family.id.empty() || !f.contains("variants") || !f["variants"].is_array())
            return fail("a family lacks an id or variants");
        for (const auto& v : f["variants"]) {
            Variant variant;
            variant.id = v.value("id", "");
            variant.name = v.value("name", variant.id);
            variant.precision = v.value("precision", "");
            variant.pipeline = v.value("pipeline", "");
            if (v.contains("approx_download_bytes") && v["approx_download_bytes"].is_number_unsigned())
                variant.approxDownloadBytes = v["approx_download_bytes"].get<std::uint64_t>();
            auto defaults = familyDefaults;
            if (v.contains("defaults") && v["defaults"].is_object())
                defaults.update(v["defaults"]);
            variant.defaultsJson = defaults.dump();
            if (variant.id.empty() || !v.contains("sources") || !v["sources"].is_array() || v["sources"].empty())
                return fail(family.id + ": a variant lacks an id or sources");
            for (const auto& s : v["sources"]) {
                Source source;
                source.repo = s.value("repo", "");
                source.revision = s.value("revision", "main");
                source.role = s.value("role", "");
                source.required = s.value("required", true);
                const auto mode = s.value("mode", "files");
                if (mode == "diffusers") {
                    source.rule.mode = hub::PlanRule::Mode::Diffusers;
                    source.rule.components =
                        s.contains("components") && s["components"].is_array() ? strings(s, "components") : std::vector<std::string>{};
                    if (s.contains("weight_variant") && s["weight_variant"].is_string())
                        source.rule.weightVariant = s["weight_variant"].get<std::string>();
                } else if (mode == "files") {
                    source.rule.include = strings(s, "include");
                    source.rule.exclude = strings(s, "exclude");
                    if (source.rule.include.empty())
                        return fail(family.id + "/" + variant.id + ": a files source has no include globs");
                } else {
                    return fail(family.id + "/" + variant.id + ": unknown source mode '" + mode + "'");
                }
                if (!hub::HfCache::repoFolderName(source.repo))
                    return fail(family.id + "/" + variant.id + ": '" + source.repo + "' is not a repo id");
                variant.sources.push_back(std::move(source));
            }
            family.variants.push_back(std::move(variant));
        }
        catalog.families.push_back(std::move(family));
    }
    return catalog;
}

vireo::Result<Catalog> Catalog::load(const QString& path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return makeError(ErrorCode::NotFound, path.toStdString() + ": cannot read the catalog");
    return parse(file.readAll().toStdString(), path.toStdString());
}

vireo::Result<Catalog> Catalog::loadBuiltin()
{
    initCatalogResource();
    return load(QStringLiteral(":/vireo/catalog.json"));
}

const Family* Catalog::family(const std::string& id) const
{
    for (const auto& f : families)
        if (f.id == id)
            return &f;
    return nullptr;
}

const Variant* Catalog::find(const std::string& familySlashVariant) const
{
    const auto slash = familySlashVariant.find('/');
    if (slash == std::string::npos)
        return nullptr;
    const auto* f = family(familySlashVariant.substr(0, slash));
    if (!f)
        return nullptr;
    for (const auto& v : f->variants)
        if (v.id == familySlashVariant.substr(slash + 1))
            return &v;
    return nullptr;
}

bool Catalog::isTrusted(const std::string& repo) const
{
    const auto owner = repo.substr(0, repo.find('/'));
    return std::find(trustedPublishers.begin(), trustedPublishers.end(), owner) != trustedPublishers.end();
}

}  // namespace vireo::catalog
