#include "inference/families/family.h"

#include "inference/models/ideogram4/ideogram4family.h"
#include "inference/models/ltx2/ltx2family.h"

namespace vireo::families {

const std::vector<const ModelFamily*>& registered()
{
    // Asked in this order. LTX-2 recognizes whatever no other family claims (its loader then
    // checks the files and names what is missing), so it stays last.
    static const std::vector<const ModelFamily*> all = {
        &ideogram4::family(),
        &ltx2::family(),
    };
    return all;
}

const ModelFamily& familyFor(const std::vector<std::filesystem::path>& modelPaths)
{
    for (const auto* f : registered())
        if (f->recognizes(modelPaths))
            return *f;
    return *registered().back();
}

}  // namespace vireo::families
