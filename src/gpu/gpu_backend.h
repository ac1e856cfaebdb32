#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/status.h"
#include "gpu/gpu_types.h"

namespace gpool::gpu {

// GpuBackend is how the agent sees the GPUs of its node (the role LevelDB's `Env` plays for
// files): `NvmlBackend` reads the real driver, `FakeBackend` plays a fixture, and
// `FaultyBackend` wraps either to inject errors. Everything above this interface (telemetry
// loop, health checks, stray-process cleanup) is written once and tested on the fake.
//
// Errors: every call returns a Status or Result; a failed call leaves the backend usable, so
// callers may retry on the next tick. Lost GPUs are not errors: they are left out of the
// inventory and of samples, and the health checks report them missing.
//
// Thread-safety: implementations are safe to call from any thread; calls are serialised
// internally where the underlying library needs it.
class GpuBackend {
 public:
  virtual ~GpuBackend() = default;

  // "nvml" or "fake"; stable, used in logs and reports.
  virtual std::string_view name() const = 0;
  // True when no real GPU stands behind this backend. Everything shown to a user from such a
  // backend must say "simulated".
  virtual bool simulated() const = 0;

  // The node's GPUs, their topology and MIG layout.
  virtual Result<Inventory> inventory() = 0;

  // One telemetry sample of every GPU, including its processes and the XID errors seen since
  // the previous call to sample().
  virtual Result<TelemetrySample> sample() = 0;

  // The processes holding a context on the GPU `uuid`. NotFound if no such GPU.
  virtual Result<std::vector<GpuProcess>> processes(std::string_view uuid) = 0;

  // Kills `pid` (SIGKILL) if it is a process on the GPU `uuid`. NotFound when the process is
  // not (or no longer) on that GPU, so that a stale finding never kills an unrelated process
  // that reused the pid; PermissionDenied when the OS refuses.
  virtual Status killProcess(std::string_view uuid, int pid) = 0;
};

using GpuBackendPtr = std::unique_ptr<GpuBackend>;

}  // namespace gpool::gpu
