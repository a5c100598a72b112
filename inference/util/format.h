#pragma once

#include <cstdint>
#include <string>

namespace vireo {

// "46.15 GB": decimal units, as download sizes and disks are labelled.
std::string humanBytes(std::uint64_t bytes);

}  // namespace vireo
