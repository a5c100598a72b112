#pragma once

#include "core/hub/fileplan.h"

#include <QString>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vireo::catalog {

// One repo a variant reads from, with the rule that picks the files its pipeline needs.
struct Source {
    std::string repo;
    std::string revision = "main";
    std::string role;
    hub::PlanRule rule;
    bool required = true;
};

struct Variant {
    std::string id;
    std::string name;
    std::string precision;
    std::string pipeline;
    std::optional<std::uint64_t> approxDownloadBytes;
    std::vector<Source> sources;
    std::string defaultsJson = "{}";  // the family's generation defaults with the variant's overrides
};

struct Family {
    std::string id;
    std::string name;
    std::string kind;
    std::string description;
    std::vector<Variant> variants;
};

// resources/catalog.json (schema documented in resources/CATALOG.md), built into the
// binary as a Qt resource.
struct Catalog {
    std::vector<std::string> trustedPublishers;
    std::vector<Family> families;

    static vireo::Result<Catalog> loadBuiltin();
    static vireo::Result<Catalog> load(const QString& path);
    static vireo::Result<Catalog> parse(const std::string& json, const std::string& origin);

    // "ltx-2.3/distilled-bf16"
    const Variant* find(const std::string& familySlashVariant) const;
    const Family* family(const std::string& id) const;
    // A repo whose owner is on the built-in publisher list.
    bool isTrusted(const std::string& repo) const;
};

}  // namespace vireo::catalog
