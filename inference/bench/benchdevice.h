#pragma once

// What every device benchmark checks first: the device it was asked for exists here and the
// dtype is one it runs (bf16 | f32), said in one line that names the bench.

#include "inference/util/result.h"

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>
#include <utility>

namespace vireo::bench {

Result<std::pair<c10::Device, c10::ScalarType>> benchDeviceAndDtype(const std::string& bench, const std::string& device,
                                                                    const std::string& dtype);

} // namespace vireo::bench
