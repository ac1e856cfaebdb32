// A fake libnvidia-ml.so.1 that plays a gpool GPU fixture (src/gpu/fixtures/*.json, the format
// of `FakeBackend`) through NVML's C ABI: inventory, PCIe/NVLink topology (NVSwitch systems
// included), MIG instances, telemetry, ECC counters, XID events and processes, with NVML's
// return codes. It exists to test `NvmlBackend` without a GPU: the same fixture read by
// `FakeBackend` directly and by `NvmlBackend` through this library must give the same inventory
// and telemetry. Device names keep the fixture's " (simulated)" suffix.
//
// Built twice: normally, and with FAKE_NVML_LEGACY, which exports only the pre-_v2 names (and
// no nvmlDeviceGetNvLinkRemoteDeviceType) to exercise the backend's explicit fallbacks.
//
// Control (for tests and benchmarks, resolved with dlsym):
//   GPOOL_FAKE_NVML_FIXTURE   environment: the fixture file read at nvmlInit
//   gpoolFakeNvmlUseFixture(path)            the same, set before nvmlInit
//   gpoolFakeNvmlAdvance(micros)             moves the fixture's clock (its script plays on)
//   gpoolFakeNvmlFailNext(function, rc)      the next call of `function` returns `rc`
//   gpoolFakeNvmlStartProcess(index, pid, mib)  a process appears on GPU `index`
//   gpoolFakeNvmlInitCount()                 nvmlInit calls not yet matched by nvmlShutdown
//
// Thread-safety: every entry point takes one global mutex.
//
// This is the "inventory" fake of the gpu helper; tests/fakes/fake_nvml/fake_nvml.cc (vgpu) is
// the one sharing state with the fake libcuda. They are to be merged.

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gpu/fake_backend.h"
#include "gpu/nvml_api.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using gpool::gpu::FakeBackend;
using gpool::gpu::GpuLink;
using gpool::gpu::Inventory;
using gpool::gpu::TelemetrySample;
using gpool::gpu::TopologyLevel;

constexpr unsigned long long kMiB = 1024ull * 1024;
constexpr int kRemoteGpu = 0;
constexpr int kRemoteSwitch = 2;
constexpr char kSwitchBusId[] = "00000000:FE:00.0";

// Handle targets: one per fixture GPU and per MIG instance, stable for the library's life.
struct nvmlDeviceFake {
  int gpu = -1;  // fixture index
  int mig = -1;  // MIG instance index within the GPU, -1 for the GPU itself
};

struct EventSetFake {
  std::vector<int> registered;  // fixture indices
};

struct NvLinkEnd {
  std::string bus_id;
  int type = kRemoteGpu;
};

struct State {
  gpool::SimClock clock;
  std::unique_ptr<FakeBackend> backend;
  Inventory inventory;
  TelemetrySample sample;
  std::vector<nvmlDeviceFake> gpu_handles;
  std::vector<std::vector<nvmlDeviceFake>> mig_handles;
  std::vector<std::vector<NvLinkEnd>> nvlinks;    // per GPU, per link
  std::deque<std::pair<int, unsigned int>> xids;  // (gpu, xid) not yet delivered
  std::vector<std::unique_ptr<EventSetFake>> event_sets;
};

std::mutex g_mu;
int g_init_count = 0;
std::string g_fixture_path;  // from gpoolFakeNvmlUseFixture
std::map<std::string, nvmlReturn_t> g_fail_next;
State* g_state = nullptr;

// REQUIRES: g_mu held
void refresh() {
  g_state->inventory = *g_state->backend->inventory();
  g_state->sample = *g_state->backend->sample();
  for (const auto& gpu : g_state->sample.gpus) {
    for (unsigned int xid : gpu.xid_errors) {
      g_state->xids.emplace_back(static_cast<int>(gpu.index), xid);
    }
  }
}

// REQUIRES: g_mu held
void buildNvLinks() {
  const auto& fixture = g_state->backend->fixture();
  const size_t n = fixture.gpus.size();
  g_state->nvlinks.assign(n, {});
  for (size_t g = 0; g < n; ++g) {
    uint32_t total = 0;
    uint32_t widest = 0;
    for (const GpuLink& link : fixture.links) {
      if (link.level != TopologyLevel::kNvLink || (link.gpu_a != g && link.gpu_b != g)) continue;
      total += link.nvlink_count;
      widest = std::max(widest, link.nvlink_count);
    }
    if (total == 0) continue;
    if (total <= NVML_NVLINK_MAX_LINKS) {
      for (const GpuLink& link : fixture.links) {
        if (link.level != TopologyLevel::kNvLink || (link.gpu_a != g && link.gpu_b != g)) continue;
        uint32_t peer = link.gpu_a == g ? link.gpu_b : link.gpu_a;
        for (uint32_t k = 0; k < link.nvlink_count; ++k) {
          g_state->nvlinks[g].push_back({fixture.gpus[peer].pci_bus_id, kRemoteGpu});
        }
      }
    } else {
      // More links than a GPU has: the fixture describes an NVSwitch fabric.
      for (uint32_t k = 0; k < widest; ++k)
        g_state->nvlinks[g].push_back({kSwitchBusId, kRemoteSwitch});
    }
  }
}

nvmlReturn_t loadState() {
  std::string path = g_fixture_path;
  if (path.empty()) {
    const char* env = std::getenv("GPOOL_FAKE_NVML_FIXTURE");
    if (!env || !*env) return NVML_ERROR_DRIVER_NOT_LOADED;
    path = env;
  }
  auto state = std::make_unique<State>();
  auto backend = FakeBackend::fromFile(path, state->clock);
  if (!backend.ok()) return NVML_ERROR_DRIVER_NOT_LOADED;
  state->backend = std::move(backend).value();
  const auto& fixture = state->backend->fixture();
  for (size_t g = 0; g < fixture.gpus.size(); ++g) {
    state->gpu_handles.push_back({static_cast<int>(g), -1});
    std::vector<nvmlDeviceFake> migs;
    for (size_t m = 0; m < fixture.gpus[g].mig_instances.size(); ++m) {
      migs.push_back({static_cast<int>(g), static_cast<int>(m)});
    }
    state->mig_handles.push_back(std::move(migs));
  }
  g_state = state.release();
  buildNvLinks();
  refresh();
  return NVML_SUCCESS;
}

// Common entry checks. REQUIRES: g_mu held
nvmlReturn_t enter(const char* function) {
  auto it = g_fail_next.find(function);
  if (it != g_fail_next.end()) {
    nvmlReturn_t rc = it->second;
    g_fail_next.erase(it);
    return rc;
  }
  return g_init_count > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

// The fixture GPU behind `device`, or an NVML error. REQUIRES: g_mu held
nvmlReturn_t deviceOf(nvmlDevice_t device, const nvmlDeviceFake** out) {
  auto* fake = reinterpret_cast<const nvmlDeviceFake*>(device);
  if (!fake || fake->gpu < 0 || static_cast<size_t>(fake->gpu) >= g_state->gpu_handles.size()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const auto& spec = g_state->backend->fixture().gpus[static_cast<size_t>(fake->gpu)];
  if (!g_state->inventory.findGpu(spec.uuid)) return NVML_ERROR_GPU_IS_LOST;
  *out = fake;
  return NVML_SUCCESS;
}

const gpool::gpu::GpuTelemetry* telemetryOf(int gpu) {
  const auto& spec = g_state->backend->fixture().gpus[static_cast<size_t>(gpu)];
  return g_state->sample.findGpu(spec.uuid);
}

nvmlReturn_t copyOut(const std::string& text, char* out, unsigned int length) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

#define FAKE_BEGIN(name)                  \
  std::lock_guard<std::mutex> lock(g_mu); \
  if (nvmlReturn_t rc_ = enter(name); rc_ != NVML_SUCCESS) return rc_

#define FAKE_DEVICE(name, device, fake)                                  \
  FAKE_BEGIN(name);                                                      \
  const nvmlDeviceFake* fake = nullptr;                                  \
  if (nvmlReturn_t rc_ = deviceOf(device, &fake); rc_ != NVML_SUCCESS) { \
    return rc_;                                                          \
  }

nvmlReturn_t initImpl(const char* name) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (auto it = g_fail_next.find(name); it != g_fail_next.end()) {
    nvmlReturn_t rc = it->second;
    g_fail_next.erase(it);
    return rc;
  }
  if (!g_state) {
    nvmlReturn_t rc = loadState();
    if (rc != NVML_SUCCESS) return rc;
  }
  ++g_init_count;
  return NVML_SUCCESS;
}

nvmlReturn_t countImpl(const char* name, unsigned int* count) {
  FAKE_BEGIN(name);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned int>(g_state->gpu_handles.size());
  return NVML_SUCCESS;
}

nvmlReturn_t handleImpl(const char* name, unsigned int index, nvmlDevice_t* device) {
  FAKE_BEGIN(name);
  if (!device || index >= g_state->gpu_handles.size()) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& spec = g_state->backend->fixture().gpus[index];
  if (!g_state->inventory.findGpu(spec.uuid)) return NVML_ERROR_GPU_IS_LOST;
  *device = reinterpret_cast<nvmlDevice_t>(&g_state->gpu_handles[index]);
  return NVML_SUCCESS;
}

nvmlReturn_t cudaVersionImpl(const char* name, int* version) {
  FAKE_BEGIN(name);
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  const std::string& text = g_state->backend->fixture().cuda_driver_version;
  int major = 0;
  int minor = 0;
  std::sscanf(text.c_str(), "%d.%d", &major, &minor);
  *version = major * 1000 + minor * 10;
  return NVML_SUCCESS;
}

nvmlReturn_t pciImpl(const char* name, nvmlDevice_t device, nvmlPciInfo_t* pci) {
  FAKE_DEVICE(name, device, fake);
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = {};
  const std::string& bus =
      g_state->backend->fixture().gpus[static_cast<size_t>(fake->gpu)].pci_bus_id;
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", bus.c_str());
  std::snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%s", bus.c_str() + 4);
  unsigned int domain = 0;
  unsigned int b = 0;
  unsigned int dev = 0;
  std::sscanf(bus.c_str(), "%x:%x:%x", &domain, &b, &dev);
  pci->domain = domain;
  pci->bus = b;
  pci->device = dev;
  pci->pciDeviceId = 0x20b210de;
  return NVML_SUCCESS;
}

template <typename Info>
nvmlReturn_t processesImpl(const char* name, nvmlDevice_t device, unsigned int* count,
                           Info* infos) {
  FAKE_DEVICE(name, device, fake);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* t = telemetryOf(fake->gpu);
  const size_t n = t ? t->processes.size() : 0;
  if (*count < n) {
    *count = static_cast<unsigned int>(n);
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (n > 0 && !infos) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < n; ++i) {
    infos[i] = {};
    infos[i].pid = static_cast<unsigned int>(t->processes[i].pid);
    infos[i].usedGpuMemory = t->processes[i].used_mib * kMiB;
  }
  *count = static_cast<unsigned int>(n);
  return NVML_SUCCESS;
}

nvmlReturn_t waitImpl(const char* name, nvmlEventSet_t set, nvmlEventData_t* data,
                      unsigned int /*timeout_ms*/) {
  FAKE_BEGIN(name);
  auto* events = reinterpret_cast<EventSetFake*>(set);
  if (!events || !data) return NVML_ERROR_INVALID_ARGUMENT;
  // Never blocks: a test advances the clock instead of waiting.
  for (auto it = g_state->xids.begin(); it != g_state->xids.end(); ++it) {
    if (std::find(events->registered.begin(), events->registered.end(), it->first) ==
        events->registered.end()) {
      continue;
    }
    *data = {};
    data->device =
        reinterpret_cast<nvmlDevice_t>(&g_state->gpu_handles[static_cast<size_t>(it->first)]);
    data->eventType = nvmlEventTypeXidCriticalError;
    data->eventData = it->second;
    g_state->xids.erase(it);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_TIMEOUT;
}

}  // namespace

// ---- control ----

FAKE_EXPORT void gpoolFakeNvmlUseFixture(const char* path) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_fixture_path = path ? path : "";
}

FAKE_EXPORT int gpoolFakeNvmlAdvance(long long micros) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_state) return -1;
  g_state->clock.advance(gpool::Micros(micros));
  refresh();
  return 0;
}

FAKE_EXPORT void gpoolFakeNvmlFailNext(const char* function, int rc) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_fail_next[function] = static_cast<nvmlReturn_t>(rc);
}

FAKE_EXPORT int gpoolFakeNvmlStartProcess(unsigned int index, int pid, unsigned long long mib) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_state || index >= g_state->gpu_handles.size()) return -1;
  const auto& spec = g_state->backend->fixture().gpus[index];
  if (!g_state->backend->startProcess(spec.uuid, pid, mib).isOk()) return -1;
  refresh();
  return 0;
}

FAKE_EXPORT int gpoolFakeNvmlInitCount() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_init_count;
}

// ---- NVML ----

#ifdef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlInit() {
  return initImpl("nvmlInit");
}
#else
FAKE_EXPORT nvmlReturn_t nvmlInit_v2() {
  return initImpl("nvmlInit_v2");
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlShutdown() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
  if (--g_init_count == 0) {
    delete g_state;  // the next nvmlInit reads the fixture afresh
    g_state = nullptr;
    g_fail_next.clear();
  }
  return NVML_SUCCESS;
}

FAKE_EXPORT const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
    default: return "Unknown Error";
  }
}

FAKE_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  FAKE_BEGIN("nvmlSystemGetDriverVersion");
  return copyOut(g_state->backend->fixture().driver_version, version, length);
}

#ifdef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) {
  return cudaVersionImpl("nvmlSystemGetCudaDriverVersion", v);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* c) {
  return countImpl("nvmlDeviceGetCount", c);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t* d) {
  return handleImpl("nvmlDeviceGetHandleByIndex", i, d);
}
#else
FAKE_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* v) {
  return cudaVersionImpl("nvmlSystemGetCudaDriverVersion_v2", v);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* c) {
  return countImpl("nvmlDeviceGetCount_v2", c);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t* d) {
  return handleImpl("nvmlDeviceGetHandleByIndex_v2", i, d);
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  FAKE_BEGIN("nvmlDeviceGetHandleByUUID");
  if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& gpus = g_state->backend->fixture().gpus;
  for (size_t g = 0; g < gpus.size(); ++g) {
    if (gpus[g].uuid != uuid) continue;
    if (!g_state->inventory.findGpu(uuid)) return NVML_ERROR_GPU_IS_LOST;
    *device = reinterpret_cast<nvmlDevice_t>(&g_state->gpu_handles[g]);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_NOT_FOUND;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  FAKE_DEVICE("nvmlDeviceGetUUID", device, fake);
  const auto& spec = g_state->backend->fixture().gpus[static_cast<size_t>(fake->gpu)];
  if (fake->mig >= 0) {
    return copyOut(spec.mig_instances[static_cast<size_t>(fake->mig)].uuid, uuid, length);
  }
  return copyOut(spec.uuid, uuid, length);
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  FAKE_DEVICE("nvmlDeviceGetName", device, fake);
  const auto& spec = g_state->backend->fixture().gpus[static_cast<size_t>(fake->gpu)];
  std::string text = spec.model + " (simulated)";
  if (fake->mig >= 0) {
    text = spec.model + " MIG " + spec.mig_instances[static_cast<size_t>(fake->mig)].profile;
  }
  return copyOut(text, name, length);
}

#ifdef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t* p) {
  return pciImpl("nvmlDeviceGetPciInfo_v2", d, p);
}
#else
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* p) {
  return pciImpl("nvmlDeviceGetPciInfo_v3", d, p);
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  FAKE_DEVICE("nvmlDeviceGetMemoryInfo", device, fake);
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& spec = g_state->backend->fixture().gpus[static_cast<size_t>(fake->gpu)];
  if (fake->mig >= 0) {
    memory->total = spec.mig_instances[static_cast<size_t>(fake->mig)].memory_mib * kMiB;
    memory->used = 0;
  } else {
    memory->total = spec.memory_total_mib * kMiB;
    const auto* t = telemetryOf(fake->gpu);
    memory->used = t ? t->memory_used_mib * kMiB : 0;
  }
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                            int* minor) {
  FAKE_DEVICE("nvmlDeviceGetCudaComputeCapability", device, fake);
  if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& spec = g_state->backend->fixture().gpus[static_cast<size_t>(fake->gpu)];
  *major = spec.compute_capability_major;
  *minor = spec.compute_capability_minor;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                       nvmlUtilization_t* util) {
  FAKE_DEVICE("nvmlDeviceGetUtilizationRates", device, fake);
  if (!util) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* t = telemetryOf(fake->gpu);
  util->gpu = t ? t->utilization_pct : 0;
  util->memory = t ? t->memory_utilization_pct : 0;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                  nvmlTemperatureSensors_t sensor,
                                                  unsigned int* temp) {
  FAKE_DEVICE("nvmlDeviceGetTemperature", device, fake);
  if (!temp || sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* t = telemetryOf(fake->gpu);
  *temp = t ? static_cast<unsigned int>(std::max(0, t->temperature_c)) : 0;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* milliwatts) {
  FAKE_DEVICE("nvmlDeviceGetPowerUsage", device, fake);
  if (!milliwatts) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* t = telemetryOf(fake->gpu);
  *milliwatts = t ? static_cast<unsigned int>(t->power_w * 1000.0 + 0.5) : 0;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                unsigned int* clock) {
  FAKE_DEVICE("nvmlDeviceGetClockInfo", device, fake);
  if (!clock) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* t = telemetryOf(fake->gpu);
  switch (type) {
    case NVML_CLOCK_GRAPHICS:
    case NVML_CLOCK_SM: *clock = t ? t->sm_clock_mhz : 0; return NVML_SUCCESS;
    case NVML_CLOCK_MEM: *clock = t ? t->memory_clock_mhz : 0; return NVML_SUCCESS;
    default: return NVML_ERROR_NOT_SUPPORTED;
  }
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device,
                                                     nvmlMemoryErrorType_t error_type,
                                                     nvmlEccCounterType_t counter_type,
                                                     unsigned long long* count) {
  FAKE_DEVICE("nvmlDeviceGetTotalEccErrors", device, fake);
  if (!count || counter_type != NVML_VOLATILE_ECC) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* t = telemetryOf(fake->gpu);
  if (!t || !t->ecc_corrected) return NVML_ERROR_NOT_SUPPORTED;
  *count = error_type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? *t->ecc_corrected
                                                          : t->ecc_uncorrected.value_or(0);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t a, nvmlDevice_t b,
                                                             nvmlGpuTopologyLevel_t* level) {
  FAKE_BEGIN("nvmlDeviceGetTopologyCommonAncestor");
  const nvmlDeviceFake* fa = nullptr;
  const nvmlDeviceFake* fb = nullptr;
  if (nvmlReturn_t rc = deviceOf(a, &fa); rc != NVML_SUCCESS) return rc;
  if (nvmlReturn_t rc = deviceOf(b, &fb); rc != NVML_SUCCESS) return rc;
  if (!level) return NVML_ERROR_INVALID_ARGUMENT;
  if (fa->gpu == fb->gpu) {
    *level = NVML_TOPOLOGY_INTERNAL;
    return NVML_SUCCESS;
  }
  // NVLink pairs sit on the PCIe tree too; the fixture does not say where, so SYS.
  *level = NVML_TOPOLOGY_SYSTEM;
  for (const GpuLink& link : g_state->backend->fixture().links) {
    bool match =
        (static_cast<int>(link.gpu_a) == fa->gpu && static_cast<int>(link.gpu_b) == fb->gpu) ||
        (static_cast<int>(link.gpu_a) == fb->gpu && static_cast<int>(link.gpu_b) == fa->gpu);
    if (!match) continue;
    switch (link.level) {
      case TopologyLevel::kPix: *level = NVML_TOPOLOGY_SINGLE; break;
      case TopologyLevel::kPxb: *level = NVML_TOPOLOGY_MULTIPLE; break;
      case TopologyLevel::kPhb: *level = NVML_TOPOLOGY_HOSTBRIDGE; break;
      case TopologyLevel::kNode: *level = NVML_TOPOLOGY_NODE; break;
      default: *level = NVML_TOPOLOGY_SYSTEM; break;
    }
  }
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                  nvmlEnableState_t* active) {
  FAKE_DEVICE("nvmlDeviceGetNvLinkState", device, fake);
  if (!active) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& links = g_state->nvlinks[static_cast<size_t>(fake->gpu)];
  if (links.empty()) return NVML_ERROR_NOT_SUPPORTED;
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  *active = link < links.size() ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                             nvmlPciInfo_t* pci) {
  FAKE_DEVICE("nvmlDeviceGetNvLinkRemotePciInfo_v2", device, fake);
  const auto& links = g_state->nvlinks[static_cast<size_t>(fake->gpu)];
  if (!pci || link >= links.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *pci = {};
  std::snprintf(pci->busId, sizeof(pci->busId), "%s", links[link].bus_id.c_str());
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                             int* type) {
  FAKE_DEVICE("nvmlDeviceGetNvLinkRemoteDeviceType", device, fake);
  const auto& links = g_state->nvlinks[static_cast<size_t>(fake->gpu)];
  if (!type || link >= links.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *type = links[link].type;
  return NVML_SUCCESS;
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                              unsigned int* pending) {
  FAKE_DEVICE("nvmlDeviceGetMigMode", device, fake);
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& spec = g_state->backend->fixture().gpus[static_cast<size_t>(fake->gpu)];
  // Like GPUs before Ampere, a fixture GPU without a "mig" entry does not support MIG.
  if (!spec.mig_enabled && spec.mig_instances.empty() && spec.compute_capability_major < 8) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *current = *pending = spec.mig_enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  FAKE_DEVICE("nvmlDeviceGetMaxMigDeviceCount", device, fake);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = 7;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device,
                                                             unsigned int index,
                                                             nvmlDevice_t* mig) {
  FAKE_DEVICE("nvmlDeviceGetMigDeviceHandleByIndex", device, fake);
  if (!mig || fake->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
  auto& migs = g_state->mig_handles[static_cast<size_t>(fake->gpu)];
  if (index >= migs.size()) return NVML_ERROR_NOT_FOUND;
  *mig = reinterpret_cast<nvmlDevice_t>(&migs[index]);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  FAKE_DEVICE("nvmlDeviceGetGpuInstanceId", device, fake);
  if (!id || fake->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& spec = g_state->backend->fixture().gpus[static_cast<size_t>(fake->gpu)];
  *id = spec.mig_instances[static_cast<size_t>(fake->mig)].gpu_instance_id;
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  FAKE_DEVICE("nvmlDeviceGetComputeInstanceId", device, fake);
  if (!id || fake->mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& spec = g_state->backend->fixture().gpus[static_cast<size_t>(fake->gpu)];
  *id = spec.mig_instances[static_cast<size_t>(fake->mig)].compute_instance_id;
  return NVML_SUCCESS;
}

#ifdef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int* c,
                                                              nvmlProcessInfo_v1_t* i) {
  return processesImpl("nvmlDeviceGetComputeRunningProcesses", d, c, i);
}
FAKE_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t s, nvmlEventData_t* d, unsigned int t) {
  return waitImpl("nvmlEventSetWait", s, d, t);
}
#else
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* c,
                                                                 nvmlProcessInfo_t* i) {
  return processesImpl("nvmlDeviceGetComputeRunningProcesses_v3", d, c, i);
}
FAKE_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t s, nvmlEventData_t* d, unsigned int t) {
  return waitImpl("nvmlEventSetWait_v2", s, d, t);
}
#endif

FAKE_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  FAKE_BEGIN("nvmlEventSetCreate");
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  g_state->event_sets.push_back(std::make_unique<EventSetFake>());
  *set = reinterpret_cast<nvmlEventSet_t>(g_state->event_sets.back().get());
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                                  nvmlEventSet_t set) {
  FAKE_DEVICE("nvmlDeviceRegisterEvents", device, fake);
  auto* events = reinterpret_cast<EventSetFake*>(set);
  if (!events) return NVML_ERROR_INVALID_ARGUMENT;
  if (types & ~static_cast<unsigned long long>(nvmlEventTypeXidCriticalError)) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  events->registered.push_back(fake->gpu);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  // Sets die with the state at the last nvmlShutdown; freeing one early just forgets it.
  if (g_state) {
    std::erase_if(g_state->event_sets, [&](const std::unique_ptr<EventSetFake>& s) {
      return reinterpret_cast<nvmlEventSet_t>(s.get()) == set;
    });
  }
  return NVML_SUCCESS;
}
