#include "gpu/nvml_backend.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace gpool::gpu {

namespace {

constexpr uint64_t kMiB = 1024 * 1024;
constexpr int kNvLinkRemoteGpu = 0;
constexpr int kNvLinkRemoteSwitch = 2;

// Features a device may lack; they read as absent instead of failing the call.
bool unsupported(nvmlReturn_t rc) {
  return rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_NO_PERMISSION ||
         rc == NVML_ERROR_FUNCTION_NOT_FOUND;
}

std::string gpuName(uint32_t index, const std::string& uuid) {
  return "GPU " + std::to_string(index) + " (" + uuid + ")";
}

// "12.4" from NVML's 12040.
std::string cudaVersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

TopologyLevel levelFromAncestor(nvmlGpuTopologyLevel_t level) {
  switch (level) {
    case NVML_TOPOLOGY_INTERNAL:  // two GPUs on one board: closer than any switch
    case NVML_TOPOLOGY_SINGLE: return TopologyLevel::kPix;
    case NVML_TOPOLOGY_MULTIPLE: return TopologyLevel::kPxb;
    case NVML_TOPOLOGY_HOSTBRIDGE: return TopologyLevel::kPhb;
    case NVML_TOPOLOGY_NODE: return TopologyLevel::kNode;
    case NVML_TOPOLOGY_SYSTEM: return TopologyLevel::kSys;
  }
  return TopologyLevel::kSys;
}

// NVML bus ids are upper case with an 8-digit domain; compare case-insensitively anyway.
bool sameBusId(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

}  // namespace

NvmlBackend::NvmlBackend(NvmlLibrary& library, const Clock& clock)
    : lib_(library), fn_(library.functions()), clock_(clock) {}

Result<std::unique_ptr<NvmlBackend>> NvmlBackend::create(NvmlLibrary& library, const Clock& clock) {
  GPOOL_RETURN_IF_ERROR(library.load());
  auto backend = std::make_unique<NvmlBackend>(library, clock);
  std::lock_guard<std::mutex> lock(backend->mu_);
  // Without events the backend still works; XIDs just go unreported.
  (void)backend->registerEventsLocked();
  return backend;
}

Result<std::unique_ptr<NvmlBackend>> NvmlBackend::create(std::unique_ptr<NvmlLibrary> library,
                                                         const Clock& clock) {
  GPOOL_ASSIGN_OR_RETURN(std::unique_ptr<NvmlBackend> backend, create(*library, clock));
  backend->owned_library_ = std::move(library);
  return backend;
}

NvmlBackend::~NvmlBackend() {
  if (event_set_ && fn_.eventSetFree) fn_.eventSetFree(event_set_);
}

bool NvmlBackend::xidEventsAvailable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !registered_.empty();
}

Status NvmlBackend::registerEventsLocked() {
  if (!fn_.eventSetCreate || !fn_.deviceRegisterEvents || !fn_.eventSetWait) {
    return Status::unimplemented("this NVML has no event API");
  }
  GPOOL_RETURN_IF_ERROR(lib_.toStatus(fn_.eventSetCreate(&event_set_), "nvmlEventSetCreate"));
  GPOOL_ASSIGN_OR_RETURN(std::vector<Device> devices, devicesLocked());
  for (const Device& d : devices) {
    nvmlReturn_t rc = fn_.deviceRegisterEvents(d.handle, nvmlEventTypeXidCriticalError, event_set_);
    if (rc == NVML_SUCCESS) registered_.push_back(d.handle);
  }
  return Status::ok();
}

void NvmlBackend::drainEventsLocked() {
  if (!event_set_ || registered_.empty()) return;
  // Bounded, so a storm of events cannot hold the sampler forever.
  for (int i = 0; i < 1024; ++i) {
    nvmlEventData_t data{};
    if (fn_.eventSetWait(event_set_, &data, 0) != NVML_SUCCESS) return;  // TIMEOUT: drained
    if (data.eventType & nvmlEventTypeXidCriticalError) {
      pending_xids_[data.device].push_back(static_cast<uint32_t>(data.eventData));
    }
  }
}

Result<std::vector<NvmlBackend::Device>> NvmlBackend::devicesLocked() {
  unsigned int count = 0;
  GPOOL_RETURN_IF_ERROR(lib_.toStatus(fn_.deviceGetCount(&count), "nvmlDeviceGetCount_v2"));
  std::vector<Device> devices;
  for (unsigned int i = 0; i < count; ++i) {
    Device d;
    d.index = i;
    nvmlReturn_t rc = fn_.deviceGetHandleByIndex(i, &d.handle);
    if (rc == NVML_ERROR_GPU_IS_LOST || rc == NVML_ERROR_NO_PERMISSION) continue;
    GPOOL_RETURN_IF_ERROR(
        lib_.toStatus(rc, "nvmlDeviceGetHandleByIndex_v2(" + std::to_string(i) + ")"));
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    rc = fn_.deviceGetUUID(d.handle, uuid, sizeof(uuid));
    if (rc == NVML_ERROR_GPU_IS_LOST) continue;
    GPOOL_RETURN_IF_ERROR(lib_.toStatus(rc, "nvmlDeviceGetUUID(" + std::to_string(i) + ")"));
    d.uuid = uuid;
    devices.push_back(std::move(d));
  }
  return devices;
}

Result<Inventory> NvmlBackend::inventory() {
  std::lock_guard<std::mutex> lock(mu_);
  Inventory inv;
  inv.backend = "nvml";
  inv.simulated = false;
  char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  GPOOL_RETURN_IF_ERROR(lib_.toStatus(fn_.systemGetDriverVersion(driver, sizeof(driver)),
                                      "nvmlSystemGetDriverVersion"));
  inv.driver_version = driver;
  if (fn_.systemGetCudaDriverVersion) {
    int cuda = 0;
    GPOOL_RETURN_IF_ERROR(
        lib_.toStatus(fn_.systemGetCudaDriverVersion(&cuda), "nvmlSystemGetCudaDriverVersion_v2"));
    inv.cuda_driver_version = cudaVersionText(cuda);
  }
  GPOOL_ASSIGN_OR_RETURN(std::vector<Device> devices, devicesLocked());

  // Per GPU: NVLink links to each peer bus id, and links that end at a switch.
  std::vector<std::map<std::string, uint32_t>> links_to(devices.size());
  std::vector<std::map<std::string, uint32_t>> untyped_to(devices.size());
  std::vector<uint32_t> switch_links(devices.size(), 0);
  std::vector<bool> lost(devices.size(), false);
  for (size_t k = 0; k < devices.size(); ++k) {
    const Device& d = devices[k];
    auto where = [&](const char* call) { return gpuName(d.index, d.uuid) + ": " + call; };
    GpuInfo info;
    info.uuid = d.uuid;
    info.index = d.index;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    nvmlReturn_t name_rc = fn_.deviceGetName(d.handle, name, sizeof(name));
    if (name_rc == NVML_ERROR_GPU_IS_LOST) {
      lost[k] = true;  // fell off the bus since it was listed: left out, like in devicesLocked
      continue;
    }
    GPOOL_RETURN_IF_ERROR(lib_.toStatus(name_rc, where("nvmlDeviceGetName")));
    info.model = name;
    if (fn_.deviceGetPciInfo) {
      nvmlPciInfo_t pci{};
      GPOOL_RETURN_IF_ERROR(
          lib_.toStatus(fn_.deviceGetPciInfo(d.handle, &pci), where("nvmlDeviceGetPciInfo_v3")));
      info.pci_bus_id = pci.busId;
    }
    nvmlMemory_t memory{};
    GPOOL_RETURN_IF_ERROR(lib_.toStatus(fn_.deviceGetMemoryInfo(d.handle, &memory),
                                        where("nvmlDeviceGetMemoryInfo")));
    info.memory_total_mib = memory.total / kMiB;
    if (fn_.deviceGetCudaComputeCapability) {
      nvmlReturn_t rc = fn_.deviceGetCudaComputeCapability(d.handle, &info.compute_capability_major,
                                                           &info.compute_capability_minor);
      if (!unsupported(rc)) {
        GPOOL_RETURN_IF_ERROR(lib_.toStatus(rc, where("nvmlDeviceGetCudaComputeCapability")));
      }
    }
    if (fn_.deviceGetMigMode) {
      unsigned int current = 0;
      unsigned int pending = 0;
      nvmlReturn_t rc = fn_.deviceGetMigMode(d.handle, &current, &pending);
      if (!unsupported(rc)) GPOOL_RETURN_IF_ERROR(lib_.toStatus(rc, where("nvmlDeviceGetMigMode")));
      info.mig_enabled = rc == NVML_SUCCESS && current == NVML_DEVICE_MIG_ENABLE;
    }
    if (info.mig_enabled && fn_.deviceGetMaxMigDeviceCount && fn_.deviceGetMigDeviceHandleByIndex) {
      unsigned int max_count = 0;
      GPOOL_RETURN_IF_ERROR(lib_.toStatus(fn_.deviceGetMaxMigDeviceCount(d.handle, &max_count),
                                          where("nvmlDeviceGetMaxMigDeviceCount")));
      for (unsigned int m = 0; m < max_count; ++m) {
        nvmlDevice_t mig = nullptr;
        nvmlReturn_t rc = fn_.deviceGetMigDeviceHandleByIndex(d.handle, m, &mig);
        if (rc == NVML_ERROR_NOT_FOUND || rc == NVML_ERROR_INVALID_ARGUMENT) continue;  // a hole
        GPOOL_RETURN_IF_ERROR(lib_.toStatus(rc, where("nvmlDeviceGetMigDeviceHandleByIndex")));
        MigInstance instance;
        char mig_uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
        GPOOL_RETURN_IF_ERROR(lib_.toStatus(fn_.deviceGetUUID(mig, mig_uuid, sizeof(mig_uuid)),
                                            where("nvmlDeviceGetUUID(MIG)")));
        instance.uuid = mig_uuid;
        char mig_name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
        if (fn_.deviceGetName(mig, mig_name, sizeof(mig_name)) == NVML_SUCCESS) {
          // "NVIDIA A100-SXM4-40GB MIG 1g.5gb": the profile is what follows "MIG ".
          std::string_view text(mig_name);
          size_t at = text.rfind("MIG ");
          instance.profile = std::string(at == std::string_view::npos ? text : text.substr(at + 4));
        }
        if (fn_.deviceGetGpuInstanceId) fn_.deviceGetGpuInstanceId(mig, &instance.gpu_instance_id);
        if (fn_.deviceGetComputeInstanceId) {
          fn_.deviceGetComputeInstanceId(mig, &instance.compute_instance_id);
        }
        nvmlMemory_t mig_memory{};
        if (fn_.deviceGetMemoryInfo(mig, &mig_memory) == NVML_SUCCESS) {
          instance.memory_mib = mig_memory.total / kMiB;
        }
        info.mig_instances.push_back(std::move(instance));
      }
    }
    if (fn_.deviceGetNvLinkState && fn_.deviceGetNvLinkRemotePciInfo) {
      for (unsigned int link = 0; link < NVML_NVLINK_MAX_LINKS; ++link) {
        nvmlEnableState_t active = NVML_FEATURE_DISABLED;
        // NOT_SUPPORTED / INVALID_ARGUMENT past the device's last link: no more links.
        if (fn_.deviceGetNvLinkState(d.handle, link, &active) != NVML_SUCCESS) break;
        if (active != NVML_FEATURE_ENABLED) continue;
        nvmlPciInfo_t remote{};
        if (fn_.deviceGetNvLinkRemotePciInfo(d.handle, link, &remote) != NVML_SUCCESS) continue;
        int type = -1;
        if (fn_.deviceGetNvLinkRemoteDeviceType) {
          fn_.deviceGetNvLinkRemoteDeviceType(d.handle, link, &type);
        }
        if (type == kNvLinkRemoteSwitch) {
          ++switch_links[k];
        } else if (type == kNvLinkRemoteGpu) {
          ++links_to[k][remote.busId];
        } else if (type < 0) {
          ++untyped_to[k][remote.busId];
        }
      }
    }
    inv.gpus.push_back(std::move(info));
  }
  // Keep the per-GPU tables aligned with inv.gpus.
  for (size_t k = devices.size(); k-- > 0;) {
    if (!lost[k]) continue;
    devices.erase(devices.begin() + static_cast<std::ptrdiff_t>(k));
    links_to.erase(links_to.begin() + static_cast<std::ptrdiff_t>(k));
    untyped_to.erase(untyped_to.begin() + static_cast<std::ptrdiff_t>(k));
    switch_links.erase(switch_links.begin() + static_cast<std::ptrdiff_t>(k));
  }

  // Where NVML cannot say what a link ends at: a GPU of this node is a peer, anything else is
  // taken as a switch (NVSwitch systems are the common case of links to non-GPUs).
  for (size_t k = 0; k < devices.size(); ++k) {
    for (const auto& [bus, count] : untyped_to[k]) {
      bool is_peer =
          std::any_of(inv.gpus.begin(), inv.gpus.end(),
                      [&, &bus = bus](const GpuInfo& g) { return sameBusId(g.pci_bus_id, bus); });
      if (is_peer) {
        links_to[k][bus] += count;
      } else {
        switch_links[k] += count;
      }
    }
  }
  for (size_t a = 0; a < devices.size(); ++a) {
    for (size_t b = a + 1; b < devices.size(); ++b) {
      GpuLink link;
      link.gpu_a = devices[a].index;
      link.gpu_b = devices[b].index;
      uint32_t direct = 0;
      for (const auto& [bus, count] : links_to[a]) {
        if (sameBusId(bus, inv.gpus[b].pci_bus_id)) direct += count;
      }
      uint32_t via_switch = std::min(switch_links[a], switch_links[b]);
      if (direct + via_switch > 0) {
        link.level = TopologyLevel::kNvLink;
        link.nvlink_count = direct + via_switch;
      } else if (fn_.deviceGetTopologyCommonAncestor) {
        nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
        nvmlReturn_t rc =
            fn_.deviceGetTopologyCommonAncestor(devices[a].handle, devices[b].handle, &level);
        link.level = rc == NVML_SUCCESS ? levelFromAncestor(level) : TopologyLevel::kSys;
      }
      inv.links.push_back(link);
    }
  }
  return inv;
}

Result<std::vector<GpuProcess>> NvmlBackend::processesLocked(const Device& d) {
  std::vector<GpuProcess> out;
  // Ask with room for a few; on INSUFFICIENT_SIZE NVML says how many there are, which may
  // grow before the next call, hence the retries.
  unsigned int capacity = 16;
  for (int attempt = 0; attempt < 4; ++attempt) {
    unsigned int count = capacity;
    nvmlReturn_t rc;
    if (fn_.deviceGetComputeRunningProcesses) {
      std::vector<nvmlProcessInfo_t> infos(capacity);
      rc = fn_.deviceGetComputeRunningProcesses(d.handle, &count, infos.data());
      if (rc == NVML_SUCCESS) {
        for (unsigned int i = 0; i < count && i < capacity; ++i) {
          uint64_t bytes =
              infos[i].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE ? 0 : infos[i].usedGpuMemory;
          out.push_back({static_cast<int>(infos[i].pid), bytes / kMiB});
        }
        return out;
      }
    } else if (fn_.deviceGetComputeRunningProcessesV1) {
      std::vector<nvmlProcessInfo_v1_t> infos(capacity);
      rc = fn_.deviceGetComputeRunningProcessesV1(d.handle, &count, infos.data());
      if (rc == NVML_SUCCESS) {
        for (unsigned int i = 0; i < count && i < capacity; ++i) {
          uint64_t bytes =
              infos[i].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE ? 0 : infos[i].usedGpuMemory;
          out.push_back({static_cast<int>(infos[i].pid), bytes / kMiB});
        }
        return out;
      }
    } else {
      return out;  // this NVML cannot list processes
    }
    if (rc != NVML_ERROR_INSUFFICIENT_SIZE) {
      if (unsupported(rc)) return out;
      return lib_.toStatus(rc, gpuName(d.index, d.uuid) + ": nvmlDeviceGetComputeRunningProcesses");
    }
    capacity = std::max(count + 8, capacity * 2);
  }
  return Status::aborted(gpuName(d.index, d.uuid) +
                         ": the process list kept growing while it was read");
}

Result<TelemetrySample> NvmlBackend::sample() {
  std::lock_guard<std::mutex> lock(mu_);
  drainEventsLocked();
  TelemetrySample sample;
  sample.taken_at = clock_.now();
  GPOOL_ASSIGN_OR_RETURN(std::vector<Device> devices, devicesLocked());
  for (const Device& d : devices) {
    GpuTelemetry t;
    t.uuid = d.uuid;
    t.index = d.index;
    bool lost = false;
    // Reads one optional value: unsupported leaves the default, a lost GPU drops the GPU.
    auto read = [&](nvmlReturn_t rc, const char* call) -> Status {
      if (rc == NVML_SUCCESS || unsupported(rc)) return Status::ok();
      if (rc == NVML_ERROR_GPU_IS_LOST) {
        lost = true;
        return Status::ok();
      }
      return lib_.toStatus(rc, gpuName(d.index, d.uuid) + ": " + call);
    };
    nvmlMemory_t memory{};
    GPOOL_RETURN_IF_ERROR(
        read(fn_.deviceGetMemoryInfo(d.handle, &memory), "nvmlDeviceGetMemoryInfo"));
    t.memory_total_mib = memory.total / kMiB;
    t.memory_used_mib = memory.used / kMiB;
    if (fn_.deviceGetUtilizationRates) {
      nvmlUtilization_t util{};
      GPOOL_RETURN_IF_ERROR(
          read(fn_.deviceGetUtilizationRates(d.handle, &util), "nvmlDeviceGetUtilizationRates"));
      t.utilization_pct = util.gpu;
      t.memory_utilization_pct = util.memory;
    }
    if (fn_.deviceGetTemperature) {
      unsigned int celsius = 0;
      GPOOL_RETURN_IF_ERROR(read(fn_.deviceGetTemperature(d.handle, NVML_TEMPERATURE_GPU, &celsius),
                                 "nvmlDeviceGetTemperature"));
      t.temperature_c = static_cast<int32_t>(celsius);
    }
    if (fn_.deviceGetPowerUsage) {
      unsigned int milliwatts = 0;
      GPOOL_RETURN_IF_ERROR(
          read(fn_.deviceGetPowerUsage(d.handle, &milliwatts), "nvmlDeviceGetPowerUsage"));
      t.power_w = milliwatts / 1000.0;
    }
    if (fn_.deviceGetClockInfo) {
      GPOOL_RETURN_IF_ERROR(read(fn_.deviceGetClockInfo(d.handle, NVML_CLOCK_SM, &t.sm_clock_mhz),
                                 "nvmlDeviceGetClockInfo(SM)"));
      GPOOL_RETURN_IF_ERROR(
          read(fn_.deviceGetClockInfo(d.handle, NVML_CLOCK_MEM, &t.memory_clock_mhz),
               "nvmlDeviceGetClockInfo(MEM)"));
    }
    if (fn_.deviceGetTotalEccErrors) {
      unsigned long long corrected = 0;
      unsigned long long uncorrected = 0;
      nvmlReturn_t rc = fn_.deviceGetTotalEccErrors(d.handle, NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                    NVML_VOLATILE_ECC, &corrected);
      GPOOL_RETURN_IF_ERROR(read(rc, "nvmlDeviceGetTotalEccErrors(corrected)"));
      if (rc == NVML_SUCCESS) {
        t.ecc_corrected = corrected;
        rc = fn_.deviceGetTotalEccErrors(d.handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                         NVML_VOLATILE_ECC, &uncorrected);
        GPOOL_RETURN_IF_ERROR(read(rc, "nvmlDeviceGetTotalEccErrors(uncorrected)"));
        if (rc == NVML_SUCCESS) t.ecc_uncorrected = uncorrected;
      }
    }
    if (lost) {
      pending_xids_.erase(d.handle);  // reported by the health checks as missing instead
      continue;
    }
    auto processes = processesLocked(d);
    if (!processes.ok()) return processes.status();
    t.processes = std::move(processes).value();
    auto xids = pending_xids_.find(d.handle);
    if (xids != pending_xids_.end()) {
      t.xid_errors = std::move(xids->second);
      pending_xids_.erase(xids);
    }
    sample.gpus.push_back(std::move(t));
  }
  return sample;
}

Result<std::vector<GpuProcess>> NvmlBackend::processes(std::string_view uuid) {
  std::lock_guard<std::mutex> lock(mu_);
  GPOOL_ASSIGN_OR_RETURN(std::vector<Device> devices, devicesLocked());
  for (const Device& d : devices) {
    if (d.uuid == uuid) return processesLocked(d);
  }
  return Status::notFound("no GPU '" + std::string(uuid) + "' on this node");
}

Status NvmlBackend::killProcess(std::string_view uuid, int pid) {
  GPOOL_ASSIGN_OR_RETURN(std::vector<GpuProcess> listed, processes(uuid));
  bool on_gpu =
      std::any_of(listed.begin(), listed.end(), [&](const GpuProcess& p) { return p.pid == pid; });
  if (!on_gpu || pid <= 0) {
    return Status::notFound("process " + std::to_string(pid) + " is not on GPU '" +
                            std::string(uuid) + "'");
  }
  if (::kill(pid, SIGKILL) != 0) {
    int error = errno;
    if (error == ESRCH) return Status::notFound("process " + std::to_string(pid) + " is gone");
    std::string message = "cannot kill process " + std::to_string(pid) + " on GPU '" +
                          std::string(uuid) + "': " + std::strerror(error);
    return error == EPERM ? Status::permissionDenied(message) : Status::ioError(message);
  }
  return Status::ok();
}

}  // namespace gpool::gpu
