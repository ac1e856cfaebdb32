#pragma once

#include <string>

#include "common/clock.h"
#include "common/result.h"
#include "gpu/gpu_backend.h"
#include "gpu/nvml_library.h"

namespace gpool::gpu {

struct GpuBackendOptions {
  // When set, the node plays this fixture (FakeBackend) and is simulated; NVML is not touched.
  std::string fake_fixture;
  // Salts the UUIDs the fake generates, so fake nodes of one pool differ.
  std::string node_name;
  // Where NVML is loaded from when no fixture is given.
  std::string nvml_library = NvmlLibrary::kDefaultPath;
};

// The backend the agent (or a tool) should use: the fake when a fixture is configured, NVML
// otherwise. Unavailable, with the reason, when NVML cannot be loaded; InvalidArgument or
// NotFound for a bad fixture. `clock` drives the fake's script and the samples' timestamps and
// must outlive the backend.
Result<GpuBackendPtr> makeGpuBackend(const GpuBackendOptions& options, const Clock& clock);

}  // namespace gpool::gpu
