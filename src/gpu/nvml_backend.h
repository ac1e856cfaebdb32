#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gpu/gpu_backend.h"
#include "gpu/nvml_library.h"

namespace gpool::gpu {

// NvmlBackend reads the node's real GPUs through NVML (see `NvmlLibrary`).
//
// Topology: NVLink links come from nvmlDeviceGetNvLinkState and the remote end's PCI bus id.
// Links that end at an NVSwitch (remote type switch, or a remote that is no GPU of this node)
// connect every pair of switch-attached GPUs; such a pair reports NV<min of their switch link
// counts>, as `nvidia-smi topo -m` does. Without NVLink the PCIe common ancestor gives PIX,
// PXB, PHB, NODE or SYS.
//
// XID errors arrive through an NVML event set registered for critical XID events at creation;
// each sample drains it without waiting. Devices that do not support events report none.
//
// Values a device does not support (NVML_ERROR_NOT_SUPPORTED or NO_PERMISSION) read 0, ECC
// nullopt. A GPU answering NVML_ERROR_GPU_IS_LOST is left out. Any other NVML error fails the
// call with the GPU and the NVML function named.
//
// killProcess sends SIGKILL after checking NVML still lists the pid on that GPU.
//
// Limitations: processes in other PID namespaces show with their host pid; MIG instances are
// listed with their first compute instance only.
//
// Thread-safety: all methods may be called concurrently; they are serialised by a mutex.
class NvmlBackend final : public GpuBackend {
 public:
  // Loads `library` if needed. Unavailable (with the reason) where NVML cannot be used.
  // `library` and `clock` must outlive the backend.
  static Result<std::unique_ptr<NvmlBackend>> create(NvmlLibrary& library = defaultNvmlLibrary(),
                                                     const Clock& clock = realClock());
  // The same, owning `library` (e.g. one loaded from a non-default path).
  static Result<std::unique_ptr<NvmlBackend>> create(std::unique_ptr<NvmlLibrary> library,
                                                     const Clock& clock = realClock());
  ~NvmlBackend() override;

  // gpu::GpuBackend
  std::string_view name() const override { return "nvml"; }
  bool simulated() const override { return false; }
  Result<Inventory> inventory() override;
  Result<TelemetrySample> sample() override;
  Result<std::vector<GpuProcess>> processes(std::string_view uuid) override;
  Status killProcess(std::string_view uuid, int pid) override;

  const NvmlLibrary& library() const { return lib_; }

  // Whether XID events could be registered for at least one GPU.
  bool xidEventsAvailable() const;

  NvmlBackend(NvmlLibrary& library, const Clock& clock);  // use create()

 private:
  struct Device {
    nvmlDevice_t handle = nullptr;
    uint32_t index = 0;
    std::string uuid;
  };

  // The GPUs NVML lists now, without lost ones.
  // REQUIRES: mu_ is held
  Result<std::vector<Device>> devicesLocked();
  // REQUIRES: mu_ is held
  Result<std::vector<GpuProcess>> processesLocked(const Device& device);
  // Moves XIDs waiting in the event set into pending_xids_.
  // REQUIRES: mu_ is held
  void drainEventsLocked();
  // REQUIRES: mu_ is held
  Status registerEventsLocked();

  std::unique_ptr<NvmlLibrary> owned_library_;  // first member: destroyed last
  NvmlLibrary& lib_;
  const NvmlFunctions& fn_;
  const Clock& clock_;

  mutable std::mutex mu_;
  nvmlEventSet_t event_set_ = nullptr;                          // GUARDED_BY(mu_)
  std::vector<nvmlDevice_t> registered_;                        // GUARDED_BY(mu_)
  std::map<nvmlDevice_t, std::vector<uint32_t>> pending_xids_;  // GUARDED_BY(mu_)
};

}  // namespace gpool::gpu
