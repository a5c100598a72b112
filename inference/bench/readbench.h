#pragma once

#include "inference/util/result.h"

#include <cstdint>
#include <filesystem>

namespace vireo::bench {

struct ReadBenchResult {
    std::uint64_t bytes = 0;  // tensor bytes read
    std::int64_t tensors = 0;
    int repeats = 0;
    double rawSeconds = 0;  // best of repeats: sequential read of the same bytes
    double tensorSeconds = 0;  // best of repeats: every tensor read into memory
    double copySeconds = 0;  // best of repeats: the same reads into one reused, touched buffer
    double ratio() const { return rawSeconds > 0 ? tensorSeconds / rawSeconds : 0; }
};

// Reads every tensor of a file or folder into memory with readTensor and, in the same run,
// reads the same byte ranges sequentially into one fresh buffer: the baseline. Also times
// the bare page-cache copy into a reused buffer, for reference. The page cache is warmed
// first so all measure the warm case.
Result<ReadBenchResult> benchRead(const std::filesystem::path& path, int repeats);

}  // namespace vireo::bench
