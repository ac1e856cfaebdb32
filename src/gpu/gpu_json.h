#pragma once

#include <nlohmann/json.hpp>

#include "gpu/gpu_types.h"
#include "gpu/health.h"

// JSON forms of the GPU values, as `gpool-gpu-probe --json` prints them and the agent reports
// them. Field names are the C++ member names; memory is in MiB, power in W, times in Unix
// microseconds. Anything from a simulated backend carries "simulated": true.
namespace gpool::gpu {

nlohmann::json toJson(const Inventory& inventory);
nlohmann::json toJson(const TelemetrySample& sample);
nlohmann::json toJson(const Finding& finding);

}  // namespace gpool::gpu
