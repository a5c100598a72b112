#include "inference/util/pathstats.h"

#include <algorithm>
#include <utility>

namespace vireo::paths {

namespace {

thread_local Recording* t_current = nullptr;

std::string withThousands(std::int64_t n)
{
    auto digits = std::to_string(n);
    for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
        digits.insert(static_cast<std::size_t>(i), ",");
    return digits;
}

}  // namespace

void Counts::merge(const Counts& other)
{
    for (const auto& [site, paths] : other.bySite)
        for (const auto& [path, calls] : paths)
            bySite[site][path] += calls;
    for (const auto& [what, calls] : other.fallbacks)
        fallbacks[what] += calls;
}

std::string Counts::text() const
{
    std::string out;
    for (const auto& [site, paths] : bySite) {
        std::vector<std::pair<std::int64_t, std::string>> ordered;
        for (const auto& [path, calls] : paths)
            ordered.emplace_back(-calls, path);
        std::sort(ordered.begin(), ordered.end());
        out += (out.empty() ? "" : "; ") + site + ": ";
        for (std::size_t i = 0; i < ordered.size(); ++i)
            out += (i ? ", " : "") + withThousands(-ordered[i].first) + " " + ordered[i].second;
    }
    return out;
}

std::vector<std::string> Counts::warnings() const
{
    std::vector<std::string> out;
    for (const auto& [what, calls] : fallbacks)
        out.push_back(what + ": " + withThousands(calls) + (calls == 1 ? " call" : " calls"));
    return out;
}

bool active()
{
    return t_current != nullptr;
}

void record(std::string_view site, std::string_view path, std::int64_t calls)
{
    if (!t_current)
        return;
    t_current->m_counts.bySite[std::string(site)][std::string(path)] += calls;
}

void recordFallback(std::string_view site, std::string_view path, std::string_view reason)
{
    if (!t_current)
        return;
    t_current->m_counts.fallbacks[std::string(site) + " ran " + std::string(path) + " instead (" + std::string(reason) + ")"] += 1;
}

void replay(const Counts& counts)
{
    if (t_current)
        t_current->m_counts.merge(counts);
}

Recording::Recording() : m_previous(t_current)
{
    t_current = this;
}

Recording::~Recording()
{
    t_current = m_previous;
}

Counts Recording::take()
{
    return std::exchange(m_counts, {});
}

}  // namespace vireo::paths
