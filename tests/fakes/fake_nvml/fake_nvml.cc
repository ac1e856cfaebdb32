// The tests' fake libnvidia-ml.so.1: one device table served through NVML's C ABI, with NVML's
// return codes. Every device name says "simulated". Two users:
//  - NvmlBackend's tests (tests/gpu, bench/gpu_telemetry_bench) play a gpool GPU fixture
//    (src/gpu/fixtures/*.json, the format of `FakeBackend`): inventory, PCIe/NVLink topology
//    (NVSwitch systems included), MIG instances, scripted telemetry, ECC counters, XID events and
//    processes. The same fixture read by `FakeBackend` directly and by `NvmlBackend` through this
//    library must give the same inventory and telemetry.
//  - The vgpu interposer's tests (tests/vgpu, bench/vgpu_bench) run it next to the fake libcuda
//    (tests/fakes/fake_libcuda) over the simulated GPUs of tests/fakes/common/fake_gpu_state.h,
//    so NVML and CUDA agree on the devices, the memory in use and the busy time.
//
// Where the device table comes from, decided at the first nvmlInit (and again after the last
// nvmlShutdown):
//  1. a GPU fixture: gpoolFakeNvmlUseFixture(path), else GPOOL_FAKE_NVML_FIXTURE;
//  2. otherwise the shared fake-GPU state (its devices become the table, so UUIDs and memory
//     match the fake libcuda's), when GPOOL_FAKE_GPU_STATE names a state file or the fake
//     libcuda is loaded in this process;
//  3. otherwise nvmlInit fails with NVML_ERROR_DRIVER_NOT_LOADED, like a machine without driver.
// Either way the table is one `FakeBackend` fixture, and every inventory call reads it.
//
// Runtime values: with a state table, or with a fixture while GPOOL_FAKE_GPU_STATE is set,
// device i's used memory, utilisation, per-process memory and per-process utilisation come from
// the shared state's device i (the fake libcuda's allocations and kernels), added to what the
// fixture's script says (memory, processes) or replacing it (utilisation). Otherwise they follow
// the fixture's script alone.
//
// Built twice: normally, and with FAKE_NVML_LEGACY, which exports only the pre-_v2 names (and no
// nvmlDeviceGetNvLinkRemoteDeviceType, nvmlDeviceGetMemoryInfo_v2 or nvmlInitWithFlags) to
// exercise the backend's explicit fallbacks.
//
// Control (for tests and benchmarks, resolved with dlsym):
//   GPOOL_FAKE_NVML_FIXTURE   environment: the fixture file read at nvmlInit
//   gpoolFakeNvmlUseFixture(path)            the same, set before nvmlInit
//   gpoolFakeNvmlAdvance(micros)             moves the fixture's clock (its script plays on)
//   gpoolFakeNvmlFailNext(function, rc)      the next call of `function` returns `rc`
//   gpoolFakeNvmlStartProcess(index, pid, mib)  a process appears on GPU `index`
//   gpoolFakeNvmlInitCount()                 nvmlInit calls not yet matched by nvmlShutdown
//
// Thread-safety: every entry point takes one global mutex; calls reading the shared state also
// take its process-shared FakeLock (always after the mutex).
//
// Extending: add an entry point with FAKE_DEVICE(...) below; read inventory from the fixture
// (g_state->backend->fixture()), telemetry through telemetryOf(), shared runtime through
// sharedIndex(); keep NVML's return codes (UNINITIALIZED before nvmlInit, INVALID_ARGUMENT on
// nulls, INSUFFICIENT_SIZE with the needed count for arrays).

#include <dlfcn.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "fakes/common/fake_gpu_state.h"
#include "gpu/fake_backend.h"
#include "gpu/nvml_api.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using gpool::fakes::fakeBusyInWindow;
using gpool::fakes::FakeDeviceInfo;
using gpool::fakes::FakeLock;
using gpool::fakes::fakeNowUs;
using gpool::fakes::FakeState;
using gpool::fakes::fakeState;
using gpool::gpu::FakeBackend;
using gpool::gpu::FakeFixture;
using gpool::gpu::FakeGpuSpec;
using gpool::gpu::GpuLink;
using gpool::gpu::Inventory;
using gpool::gpu::TelemetrySample;
using gpool::gpu::TopologyLevel;

constexpr unsigned long long kMiB = 1024ull * 1024;
constexpr int kRemoteGpu = 0;
constexpr int kRemoteSwitch = 2;
constexpr char kSwitchBusId[] = "00000000:FE:00.0";
constexpr unsigned int kNoInstance = 0xFFFFFFFFu;  // gpuInstanceId of a process outside MIG

// NVML structs that gpu/nvml_api.h leaves out (the agent does not call them); layouts as NVML's.
struct FakeMemoryV2 {  // nvmlMemory_v2_t
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
constexpr unsigned int kMemoryV2Version =
    static_cast<unsigned int>(sizeof(FakeMemoryV2)) | 2u << 24;

struct FakeProcessUtilizationSample {  // nvmlProcessUtilizationSample_t
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};

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
  std::unique_ptr<FakeBackend> backend;  // the device table: a fixture, or the shared state's
  bool shared_runtime = false;           // runtime values from the shared fake-GPU state
  // From the shared state's table only (a gpool fixture has neither); empty otherwise.
  std::vector<std::string> serials;
  std::vector<unsigned int> power_limits_mw;
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

bool envSet(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0';
}

// Whether this process runs the tests' fake libcuda (found by its soname and a symbol only the
// fake exports): then NVML must describe the same simulated GPUs.
bool fakeLibcudaLoaded() {
  void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (cuda == nullptr) return false;
  const bool fake = ::dlsym(cuda, "gpoolFakeAllocBypass") != nullptr;
  ::dlclose(cuda);
  return fake;
}

// The shared state's devices as a gpool fixture, so that one code path serves both tables.
FakeFixture fixtureFromSharedState(State* state) {
  const FakeState* s = fakeState();
  FakeFixture fixture;
  fixture.description = "the fake libcuda's shared state";
  fixture.driver_version = s->driver_version;
  fixture.cuda_driver_version = std::to_string(s->cuda_driver_version / 1000) + "." +
                                std::to_string(s->cuda_driver_version % 1000 / 10);
  fixture.initial.utilization_pct = 0;
  fixture.initial.memory_utilization_pct = 0;
  fixture.initial.memory_used_mib = 0;
  fixture.initial.temperature_c = 0;
  fixture.initial.power_w = 0.0;
  fixture.initial.sm_clock_mhz = 0;
  fixture.initial.memory_clock_mhz = 0;
  for (unsigned int i = 0; i < s->device_count; ++i) {
    const FakeDeviceInfo& d = s->devices[i];
    FakeGpuSpec spec;
    spec.uuid = d.uuid;
    spec.pci_bus_id = d.pci_bus_id;
    spec.model = d.name;
    spec.memory_total_mib = d.memory_bytes / kMiB;
    spec.compute_capability_major = d.cc_major;
    spec.compute_capability_minor = d.cc_minor;
    spec.ecc_enabled = d.ecc_enabled != 0;
    spec.mig_enabled = d.mig_mode != 0;
    fixture.gpus.push_back(std::move(spec));
    // Per-GPU sensors as a step-0 event, applied when the backend first reads its script.
    gpool::gpu::FakeEvent sensors;
    sensors.step = 0;
    sensors.gpu = static_cast<int>(i);
    sensors.change.temperature_c = d.temperature_c;
    sensors.change.power_w = d.power_mw / 1000.0;
    sensors.change.sm_clock_mhz = d.sm_clock_mhz;
    sensors.change.memory_clock_mhz = d.mem_clock_mhz;
    fixture.events.push_back(std::move(sensors));
    state->serials.emplace_back(d.serial);
    state->power_limits_mw.push_back(d.power_limit_mw);
  }
  return fixture;
}

nvmlReturn_t loadState() {
  std::string path = g_fixture_path;
  if (path.empty() && envSet("GPOOL_FAKE_NVML_FIXTURE"))
    path = std::getenv("GPOOL_FAKE_NVML_FIXTURE");
  auto state = std::make_unique<State>();
  if (!path.empty()) {
    auto backend = FakeBackend::fromFile(path, state->clock);
    if (!backend.ok()) return NVML_ERROR_DRIVER_NOT_LOADED;
    state->backend = std::move(backend).value();
    state->shared_runtime = envSet("GPOOL_FAKE_GPU_STATE");
  } else if (envSet("GPOOL_FAKE_GPU_STATE") || fakeLibcudaLoaded()) {
    state->backend =
        std::make_unique<FakeBackend>(fixtureFromSharedState(state.get()), state->clock);
    state->shared_runtime = true;
  } else {
    return NVML_ERROR_DRIVER_NOT_LOADED;
  }
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
  if (auto it = g_fail_next.find(function); it != g_fail_next.end()) {
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

// The shared state's device behind fixture GPU `gpu`, or -1 when runtime values come from the
// fixture alone. REQUIRES: g_mu held
int sharedIndex(int gpu) {
  if (!g_state->shared_runtime) return -1;
  return static_cast<unsigned int>(gpu) < fakeState()->device_count ? gpu : -1;
}

bool alive(int pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

// Wall-clock microseconds, NVML's timestamps.
std::int64_t wallNowUs() {
  timespec wall{};
  ::clock_gettime(CLOCK_REALTIME, &wall);
  return static_cast<std::int64_t>(wall.tv_sec) * 1000000 + wall.tv_nsec / 1000;
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

struct ProcessUse {
  unsigned int pid;
  unsigned long long bytes;
  bool from_shared;  // a fake libcuda context (reported outside any MIG instance)
};

// The fixture's processes on `gpu`, then the live ones holding memory in the shared state.
// REQUIRES: g_mu held
std::vector<ProcessUse> processesOf(int gpu) {
  std::vector<ProcessUse> out;
  if (const auto* t = telemetryOf(gpu)) {
    for (const auto& p : t->processes)
      out.push_back({static_cast<unsigned int>(p.pid), p.used_mib * kMiB, false});
  }
  if (const int i = sharedIndex(gpu); i >= 0) {
    FakeLock shared_lock;
    for (const auto& p : fakeState()->procs) {
      if (p.pid == 0 || p.device != i || p.used_bytes == 0 || !alive(p.pid)) continue;
      out.push_back({static_cast<unsigned int>(p.pid), p.used_bytes, true});
    }
  }
  return out;
}

[[maybe_unused]] void setInstance(nvmlProcessInfo_t& info, bool outside_mig) {
  if (!outside_mig) return;
  info.gpuInstanceId = kNoInstance;
  info.computeInstanceId = kNoInstance;
}
void setInstance(nvmlProcessInfo_v1_t& /*info*/, bool /*outside_mig*/) {}

template <typename Info>
nvmlReturn_t processesImpl(const char* name, nvmlDevice_t device, unsigned int* count,
                           Info* infos) {
  FAKE_DEVICE(name, device, fake);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  const std::vector<ProcessUse> procs = processesOf(fake->gpu);
  const size_t n = procs.size();
  if (*count < n) {
    *count = static_cast<unsigned int>(n);
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (n > 0 && !infos) return NVML_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < n; ++i) {
    infos[i] = {};
    infos[i].pid = procs[i].pid;
    infos[i].usedGpuMemory = procs[i].bytes;
    setInstance(infos[i], procs[i].from_shared);
  }
  *count = static_cast<unsigned int>(n);
  return NVML_SUCCESS;
}

// Memory of fixture GPU `gpu` (not a MIG instance): the fixture's use plus the shared state's.
// REQUIRES: g_mu held
nvmlMemory_t memoryOf(int gpu) {
  nvmlMemory_t memory{};
  memory.total = g_state->backend->fixture().gpus[static_cast<size_t>(gpu)].memory_total_mib * kMiB;
  const auto* t = telemetryOf(gpu);
  unsigned long long used = t ? t->memory_used_mib * kMiB : 0;
  if (const int i = sharedIndex(gpu); i >= 0) {
    FakeLock shared_lock;
    gpool::fakes::fakeReapDead();
    used += fakeState()->rt[i].used_bytes;
  }
  memory.used = std::min(used, memory.total);
  memory.free = memory.total - memory.used;
  return memory;
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

FAKE_EXPORT nvmlReturn_t nvmlInit() {
  return initImpl("nvmlInit");
}
#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlInit_v2() {
  return initImpl("nvmlInit_v2");
}
FAKE_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) {
  return initImpl("nvmlInitWithFlags");
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

FAKE_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* v) {
  return cudaVersionImpl("nvmlSystemGetCudaDriverVersion", v);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* c) {
  return countImpl("nvmlDeviceGetCount", c);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t* d) {
  return handleImpl("nvmlDeviceGetHandleByIndex", i, d);
}
#ifndef FAKE_NVML_LEGACY
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

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  FAKE_DEVICE("nvmlDeviceGetIndex", device, fake);
  if (!index) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned int>(fake->gpu);
  return NVML_SUCCESS;
}

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial,
                                             unsigned int length) {
  FAKE_DEVICE("nvmlDeviceGetSerial", device, fake);
  // Like boards without a serial number, a gpool fixture GPU has none.
  if (static_cast<size_t>(fake->gpu) >= g_state->serials.size()) return NVML_ERROR_NOT_SUPPORTED;
  return copyOut(g_state->serials[static_cast<size_t>(fake->gpu)], serial, length);
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
  std::string text = spec.model;
  if (text.find("simulated") == std::string::npos) text += " (simulated)";
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
    memory->free = memory->total;
  } else {
    *memory = memoryOf(fake->gpu);
  }
  return NVML_SUCCESS;
}

#ifndef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, FakeMemoryV2* memory) {
  FAKE_DEVICE("nvmlDeviceGetMemoryInfo_v2", device, fake);
  if (!memory || memory->version != kMemoryV2Version) return NVML_ERROR_INVALID_ARGUMENT;
  const auto& spec = g_state->backend->fixture().gpus[static_cast<size_t>(fake->gpu)];
  nvmlMemory_t v1{};
  if (fake->mig >= 0) {
    v1.total = spec.mig_instances[static_cast<size_t>(fake->mig)].memory_mib * kMiB;
    v1.free = v1.total;
  } else {
    v1 = memoryOf(fake->gpu);
  }
  memory->total = v1.total;
  memory->reserved = 0;
  memory->used = v1.used;
  memory->free = v1.free;
  return NVML_SUCCESS;
}
#endif

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
  if (const int i = sharedIndex(fake->gpu); i >= 0) {
    // Like the real driver: the busy fraction over the last sample period (here 1 s).
    const std::int64_t now = fakeNowUs();
    FakeLock shared_lock;
    const std::int64_t busy = fakeBusyInWindow(i, 0, now - 1000000, now);
    util->gpu = static_cast<unsigned int>(std::min<std::int64_t>(100, busy / 10000));
    util->memory = util->gpu / 2;
    return NVML_SUCCESS;
  }
  const auto* t = telemetryOf(fake->gpu);
  util->gpu = t ? t->utilization_pct : 0;
  util->memory = t ? t->memory_utilization_pct : 0;
  return NVML_SUCCESS;
}

// Per-process SM utilisation over (lastSeenTimeStamp, now]; one sample per process that was busy
// on the shared state's GPU (none without it). Timestamps are wall-clock microseconds as in NVML;
// lastSeenTimeStamp 0 means the last second. smUtil is a whole percentage, as in NVML.
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                         FakeProcessUtilizationSample* utilization,
                                                         unsigned int* processSamplesCount,
                                                         unsigned long long lastSeenTimeStamp) {
  FAKE_DEVICE("nvmlDeviceGetProcessUtilization", device, fake);
  if (!processSamplesCount) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int n = 0;
  if (const int i = sharedIndex(fake->gpu); i >= 0) {
    const std::int64_t now = fakeNowUs();
    const std::int64_t wall_now = wallNowUs();
    std::int64_t since = now - (wall_now - static_cast<std::int64_t>(lastSeenTimeStamp));
    if (lastSeenTimeStamp == 0 || since >= now || since < now - 1000000) since = now - 1000000;
    FakeLock shared_lock;
    for (const auto& p : fakeState()->procs) {
      if (p.pid == 0 || p.device != i) continue;
      const std::int64_t busy = fakeBusyInWindow(i, p.pid, since, now);
      if (busy <= 0) continue;
      if (utilization != nullptr && n < *processSamplesCount) {
        FakeProcessUtilizationSample& out = utilization[n];
        out = {};
        out.pid = static_cast<unsigned int>(p.pid);
        out.timeStamp = static_cast<unsigned long long>(wall_now);
        out.smUtil = static_cast<unsigned int>(busy * 100 / (now - since));
      }
      ++n;
    }
  }
  if (utilization == nullptr || n > *processSamplesCount) {
    *processSamplesCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *processSamplesCount = n;
  return n == 0 ? NVML_ERROR_NOT_FOUND : NVML_SUCCESS;
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

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device,
                                                         unsigned int* milliwatts) {
  FAKE_DEVICE("nvmlDeviceGetEnforcedPowerLimit", device, fake);
  if (!milliwatts) return NVML_ERROR_INVALID_ARGUMENT;
  if (static_cast<size_t>(fake->gpu) >= g_state->power_limits_mw.size()) {
    return NVML_ERROR_NOT_SUPPORTED;
  }
  *milliwatts = g_state->power_limits_mw[static_cast<size_t>(fake->gpu)];
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

FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int* c,
                                                              nvmlProcessInfo_v1_t* i) {
  return processesImpl("nvmlDeviceGetComputeRunningProcesses", d, c, i);
}
#ifdef FAKE_NVML_LEGACY
FAKE_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t s, nvmlEventData_t* d, unsigned int t) {
  return waitImpl("nvmlEventSetWait", s, d, t);
}
#else
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* c,
                                                                 nvmlProcessInfo_t* i) {
  return processesImpl("nvmlDeviceGetComputeRunningProcesses_v3", d, c, i);
}
FAKE_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int* c,
                                                                 nvmlProcessInfo_t* i) {
  return processesImpl("nvmlDeviceGetComputeRunningProcesses_v2", d, c, i);
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
