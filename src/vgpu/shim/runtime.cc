#include "vgpu/shim/runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "vgpu/limiter.h"

namespace gpool::vgpu::shim {
namespace {

// Serialises slot attachment within the process; re-initialised in a fork child, where a thread
// of the parent may have held it at fork time.
pthread_mutex_t g_attach_mu = PTHREAD_MUTEX_INITIALIZER;

std::int64_t monotonicUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

void sleepUs(std::int64_t us) {
  timespec ts{};
  ts.tv_sec = us / 1000000;
  ts.tv_nsec = (us % 1000000) * 1000;
  ::nanosleep(&ts, nullptr);
}

template <typename T>
void resolve(void* lib, const char* name, T* out) {
  *out = lib != nullptr ? reinterpret_cast<T>(realDlsym()(lib, name)) : nullptr;
}

void loadCuda(Runtime* r) {
  const char* path = std::getenv("GPOOL_VGPU_LIBCUDA");
  r->libcuda = ::dlopen(path != nullptr && *path != '\0' ? path : "libcuda.so.1",
                        RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
  void* l = r->libcuda;
  RealCuda& c = r->cuda;
  resolve(l, "cuGetProcAddress", &c.cuGetProcAddress);
  resolve(l, "cuGetProcAddress_v2", &c.cuGetProcAddress_v2);
  resolve(l, "cuCtxGetDevice", &c.cuCtxGetDevice);
  resolve(l, "cuDevicePrimaryCtxRetain", &c.cuDevicePrimaryCtxRetain);
  resolve(l, "cuCtxCreate_v2", &c.cuCtxCreate_v2);
  resolve(l, "cuCtxCreate_v3", &c.cuCtxCreate_v3);
  resolve(l, "cuCtxCreate_v4", &c.cuCtxCreate_v4);
  resolve(l, "cuMemGetInfo_v2", &c.cuMemGetInfo_v2);
  resolve(l, "cuDeviceTotalMem_v2", &c.cuDeviceTotalMem_v2);
  resolve(l, "cuMemAlloc_v2", &c.cuMemAlloc_v2);
  resolve(l, "cuMemAllocPitch_v2", &c.cuMemAllocPitch_v2);
  resolve(l, "cuMemAllocManaged", &c.cuMemAllocManaged);
  resolve(l, "cuMemFree_v2", &c.cuMemFree_v2);
  resolve(l, "cuMemCreate", &c.cuMemCreate);
  resolve(l, "cuMemRelease", &c.cuMemRelease);
  resolve(l, "cuMemAllocAsync", &c.cuMemAllocAsync);
  resolve(l, "cuMemAllocAsync_ptsz", &c.cuMemAllocAsync_ptsz);
  resolve(l, "cuMemAllocFromPoolAsync", &c.cuMemAllocFromPoolAsync);
  resolve(l, "cuMemAllocFromPoolAsync_ptsz", &c.cuMemAllocFromPoolAsync_ptsz);
  resolve(l, "cuMemFreeAsync", &c.cuMemFreeAsync);
  resolve(l, "cuMemFreeAsync_ptsz", &c.cuMemFreeAsync_ptsz);
  resolve(l, "cuArrayCreate_v2", &c.cuArrayCreate_v2);
  resolve(l, "cuArray3DCreate_v2", &c.cuArray3DCreate_v2);
  resolve(l, "cuArrayDestroy", &c.cuArrayDestroy);
  resolve(l, "cuArrayGetMemoryRequirements", &c.cuArrayGetMemoryRequirements);
  resolve(l, "cuMipmappedArrayCreate", &c.cuMipmappedArrayCreate);
  resolve(l, "cuMipmappedArrayDestroy", &c.cuMipmappedArrayDestroy);
  resolve(l, "cuMipmappedArrayGetMemoryRequirements", &c.cuMipmappedArrayGetMemoryRequirements);
  resolve(l, "cuGraphAddMemAllocNode", &c.cuGraphAddMemAllocNode);
  resolve(l, "cuGraphDestroy", &c.cuGraphDestroy);
  resolve(l, "cuLaunchKernel", &c.cuLaunchKernel);
  resolve(l, "cuLaunchKernel_ptsz", &c.cuLaunchKernel_ptsz);
  resolve(l, "cuLaunchKernelEx", &c.cuLaunchKernelEx);
  resolve(l, "cuLaunchKernelEx_ptsz", &c.cuLaunchKernelEx_ptsz);
  resolve(l, "cuLaunchCooperativeKernel", &c.cuLaunchCooperativeKernel);
  resolve(l, "cuLaunchCooperativeKernel_ptsz", &c.cuLaunchCooperativeKernel_ptsz);
  resolve(l, "cuGraphLaunch", &c.cuGraphLaunch);
  resolve(l, "cuGraphLaunch_ptsz", &c.cuGraphLaunch_ptsz);
}

void loadNvml(Runtime* r) {
  const char* path = std::getenv("GPOOL_VGPU_LIBNVML");
  r->libnvml = ::dlopen(path != nullptr && *path != '\0' ? path : "libnvidia-ml.so.1",
                        RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
  void* l = r->libnvml;
  RealNvml& n = r->nvml;
  resolve(l, "nvmlInit_v2", &n.nvmlInit_v2);
  resolve(l, "nvmlDeviceGetMemoryInfo", &n.nvmlDeviceGetMemoryInfo);
  resolve(l, "nvmlDeviceGetMemoryInfo_v2", &n.nvmlDeviceGetMemoryInfo_v2);
  resolve(l, "nvmlDeviceGetIndex", &n.nvmlDeviceGetIndex);
  resolve(l, "nvmlDeviceGetUUID", &n.nvmlDeviceGetUUID);
  resolve(l, "nvmlDeviceGetHandleByIndex_v2", &n.nvmlDeviceGetHandleByIndex_v2);
  resolve(l, "nvmlDeviceGetHandleByUUID", &n.nvmlDeviceGetHandleByUUID);
  resolve(l, "nvmlDeviceGetProcessUtilization", &n.nvmlDeviceGetProcessUtilization);
  resolve(l, "nvmlDeviceGetComputeRunningProcesses_v3", &n.nvmlDeviceGetComputeRunningProcesses_v3);
}

// GPOOL_VGPU_REGIONS: region files separated by ':', the i-th governing CUDA device i (an empty
// entry leaves that device unlimited). Unset: the interposer only passes calls through.
void loadRegions(Runtime* r) {
  const char* env = std::getenv("GPOOL_VGPU_REGIONS");
  if (env == nullptr || *env == '\0') return;
  std::string all(env);
  std::size_t pos = 0;
  int index = 0;
  while (pos <= all.size() && index < kMaxRegions) {
    std::size_t end = all.find(':', pos);
    if (end == std::string::npos) end = all.size();
    std::string path = all.substr(pos, end - pos);
    if (!path.empty()) {
      Result<ShmRegion> opened = ShmRegion::open(path);
      if (opened.ok()) {
        r->regions[index].shm = new ShmRegion(std::move(opened).value());
        r->regions[index].header = r->regions[index].shm->header();
        r->regions[index].limits = r->regions[index].shm->limits();
      } else {
        // Fail closed would break every CUDA program on a bad path; fail loudly instead.
        const std::string msg = "gpool-vgpu: " + opened.status().message() + "; device " +
                                std::to_string(index) + " is not limited\n";
        ssize_t w = ::write(2, msg.data(), msg.size());
        (void)w;
      }
    }
    ++index;
    pos = end + 1;
  }
  r->region_count = index;
}

void detachAll() {
  Runtime& r = rt();
  for (int i = 0; i < r.region_count; ++i) {
    Region& reg = r.regions[i];
    const int slot = reg.slot.exchange(-1);
    if (reg.shm == nullptr || slot < 0) continue;
    reg.header->launches_total.fetch_add(reg.header->slots[slot].launches.load(),
                                         std::memory_order_relaxed);
    reg.shm->detach(slot);
  }
}

void afterForkChild() {
  // The child is a new process: no device memory, no slot, no watcher thread, no context.
  pthread_mutex_init(&g_attach_mu, nullptr);
  Runtime& r = rt();
  r.allocations.resetAfterFork();
  for (int i = 0; i < r.region_count; ++i) {
    r.regions[i].slot.store(-1);
    r.regions[i].context_charged.store(false);
  }
  r.watcher_started.store(false);
}

std::atomic<int> g_init_state{0};  // 0 = not started, 1 = in progress, 2 = done
alignas(Runtime) unsigned char g_runtime_storage[sizeof(Runtime)];

void initRuntime() {
  // Never destroyed: hooks may run during other libraries' exit handlers.
  auto* r = new (g_runtime_storage) Runtime;
  loadRegions(r);
  loadCuda(r);
  if (r->region_count > 0) loadNvml(r);
  ::pthread_atfork(nullptr, nullptr, afterForkChild);
  std::atexit(detachAll);
}

}  // namespace

DlsymFn realDlsym() {
  // libc's dlsym by version (GLIBC_2.34 where libdl merged into libc, GLIBC_2.2.5 before), so the
  // lookup never lands on our own exported dlsym. dlvsym is not hooked.
  static DlsymFn fn = [] {
    auto f = reinterpret_cast<DlsymFn>(::dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
    if (f == nullptr) f = reinterpret_cast<DlsymFn>(::dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
    return f;
  }();
  return fn;
}

Runtime& rt() {
  if (g_init_state.load(std::memory_order_acquire) != 2) {
    int expected = 0;
    if (g_init_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
      initRuntime();
      g_init_state.store(2, std::memory_order_release);
    } else {
      while (g_init_state.load(std::memory_order_acquire) != 2)
        sleepUs(50);
    }
  }
  return *std::launder(reinterpret_cast<Runtime*>(g_runtime_storage));
}

Region* regionFor(int device) {
  Runtime& r = rt();
  if (device < 0 || device >= r.region_count) return nullptr;
  Region* reg = &r.regions[device];
  return reg->shm != nullptr ? reg : nullptr;
}

Region* regionForCurrent() {
  Runtime& r = rt();
  if (r.region_count == 0) return nullptr;
  if (r.region_count == 1) return r.regions[0].shm != nullptr ? &r.regions[0] : nullptr;
  CUdevice dev = 0;
  if (r.cuda.cuCtxGetDevice == nullptr || r.cuda.cuCtxGetDevice(&dev) != CUDA_SUCCESS) {
    return nullptr;
  }
  return regionFor(dev);
}

int slotOf(Region* r) {
  int slot = r->slot.load(std::memory_order_acquire);
  if (slot >= 0) return slot;
  pthread_mutex_lock(&g_attach_mu);
  slot = r->slot.load(std::memory_order_acquire);
  if (slot < 0) {
    slot = r->shm->attach(static_cast<std::int32_t>(::getpid()));
    r->slot.store(slot, std::memory_order_release);
  }
  pthread_mutex_unlock(&g_attach_mu);
  // A process that only allocates still needs the watcher: it reconciles memory with NVML.
  ensureWatcher();
  return slot;
}

void waitForBudget(Region* r) {
  ShmHeader* h = r->header;
  const std::int64_t start = monotonicUs();
  for (;;) {
    ensureWatcher();
    const std::int64_t period = r->limits->control_period_us.load(std::memory_order_relaxed);
    sleepUs(std::max<std::int64_t>(100, std::min<std::int64_t>(1000, period / 8)));
    if (tryAcquireLaunch(h)) break;
    // Without a live controller nobody refills the budget: never wait forever for it.
    const std::int64_t now = monotonicUs();
    // The lease is whatever a process of the task last wrote: compare without overflowing.
    const std::int64_t lease_until = h->controller_lease_until_us.load(std::memory_order_relaxed);
    if (lease_until < now - 10 * period && now - start > 10 * period) {
      break;
    }
  }
  h->throttled_us_total.fetch_add(static_cast<std::uint64_t>(monotonicUs() - start),
                                  std::memory_order_relaxed);
}

// --- the watcher thread: compute control loop and memory reconciliation --------------------

namespace {

struct ControllerLocal {
  ControlState state;
  std::uint64_t last_launches = 0;
  unsigned long long last_sample_us = 0;
  nvmlDevice_t device = nullptr;
  int ticks = 0;
};

nvmlDevice_t nvmlDeviceFor(Runtime& r, int index) {
  const ShmLimits* h = r.regions[index].limits;
  nvmlDevice_t dev = nullptr;
  // A copy that surely ends within the field: any process of the task can write the region.
  char uuid[kShmUuidLen + 1] = {};
  std::memcpy(uuid, h->device_uuid, kShmUuidLen);
  if (uuid[0] != '\0' && r.nvml.nvmlDeviceGetHandleByUUID != nullptr &&
      r.nvml.nvmlDeviceGetHandleByUUID(uuid, &dev) == NVML_SUCCESS) {
    return dev;
  }
  if (r.nvml.nvmlDeviceGetHandleByIndex_v2 != nullptr &&
      r.nvml.nvmlDeviceGetHandleByIndex_v2(h->device_index, &dev) == NVML_SUCCESS) {
    return dev;
  }
  return nullptr;
}

bool isTaskPid(ShmHeader* h, unsigned int pid) {
  for (const ShmSlot& s : h->slots) {
    if (s.pid.load(std::memory_order_relaxed) != 0 &&
        static_cast<unsigned int>(s.host_pid.load(std::memory_order_relaxed)) == pid) {
      return true;
    }
  }
  return false;
}

void controlTick(Runtime& r, int index, ControllerLocal* local, std::int64_t period_us) {
  Region& reg = r.regions[index];
  ShmHeader* h = reg.header;
  std::uint64_t launches = 0;
  for (const ShmSlot& s : h->slots) {
    if (s.pid.load(std::memory_order_relaxed) != 0) {
      launches += s.launches.load(std::memory_order_relaxed);
    }
  }
  const std::uint64_t delta =
      launches >= local->last_launches ? launches - local->last_launches : launches;
  local->last_launches = launches;

  ControlInput in;
  in.share_permille = reg.limits->share_permille.load(std::memory_order_relaxed);
  in.policy = static_cast<SharePolicy>(reg.limits->policy.load(std::memory_order_relaxed));
  in.period_ns = period_us * 1000;
  in.launches = delta;
  // NVML timestamps are wall-clock microseconds.
  timespec wall{};
  ::clock_gettime(CLOCK_REALTIME, &wall);
  const unsigned long long now = static_cast<unsigned long long>(wall.tv_sec) * 1000000ULL +
                                 static_cast<unsigned long long>(wall.tv_nsec / 1000);
  if (local->device == nullptr) local->device = nvmlDeviceFor(r, index);
  bool measured = false;
  if (local->device != nullptr && r.nvml.nvmlDeviceGetProcessUtilization != nullptr &&
      local->last_sample_us != 0) {
    nvmlProcessUtilizationSample_t samples[256];
    unsigned int n = 256;
    nvmlReturn_t rc =
        r.nvml.nvmlDeviceGetProcessUtilization(local->device, samples, &n, local->last_sample_us);
    if (rc == NVML_SUCCESS || rc == NVML_ERROR_NOT_FOUND) {
      measured = true;
      unsigned int task = 0;
      unsigned int all = 0;
      for (unsigned int i = 0; rc == NVML_SUCCESS && i < n; ++i) {
        all += samples[i].smUtil;
        if (isTaskPid(h, samples[i].pid)) task += samples[i].smUtil;
      }
      in.task_util = std::min(1.0, task / 100.0);
      in.device_util = std::min(1.0, all / 100.0);
      in.period_ns = static_cast<std::int64_t>(now - local->last_sample_us) * 1000;
    }
  }
  local->last_sample_us = now;
  if (!measured) {
    // No utilisation source: open loop at the share, so launches are still paced.
    in.policy = SharePolicy::kStrict;
  }
  ControlOutput out = controlStep(in, &local->state);
  h->measured_permille.store(static_cast<std::uint32_t>(in.task_util * 1000),
                             std::memory_order_relaxed);
  h->device_permille.store(static_cast<std::uint32_t>(in.device_util * 1000),
                           std::memory_order_relaxed);
  applyControl(h, out);

  // Reconcile memory with the driver's per-process view every 10 periods.
  if (++local->ticks % 10 == 0 && local->device != nullptr &&
      r.nvml.nvmlDeviceGetComputeRunningProcesses_v3 != nullptr) {
    nvmlProcessInfo_t procs[256];
    unsigned int n = 256;
    if (r.nvml.nvmlDeviceGetComputeRunningProcesses_v3(local->device, &n, procs) == NVML_SUCCESS) {
      for (int s = 0; s < kShmMaxSlots; ++s) {
        const std::int32_t pid = h->slots[s].host_pid.load(std::memory_order_relaxed);
        if (h->slots[s].pid.load(std::memory_order_relaxed) == 0) continue;
        std::uint64_t used = 0;
        for (unsigned int i = 0; i < n; ++i) {
          if (static_cast<std::int32_t>(procs[i].pid) == pid) used = procs[i].usedGpuMemory;
        }
        reg.shm->reconcile(s, used);
      }
    }
  }
}

void* watcherMain(void*) {
  Runtime& r = rt();
  if (r.nvml.nvmlInit_v2 != nullptr) r.nvml.nvmlInit_v2();
  ControllerLocal locals[kMaxRegions];
  const std::int32_t me = static_cast<std::int32_t>(::getpid());
  for (;;) {
    std::int64_t period_us = 100000;
    for (int i = 0; i < r.region_count; ++i) {
      ShmHeader* h = r.regions[i].header;
      if (h == nullptr) continue;
      const ShmLimits* limits = r.regions[i].limits;
      period_us = std::min<std::int64_t>(period_us, limits->control_period_us.load());
      // Lease: the controller renews every period; others take over 3 periods after it stops.
      const std::int64_t now = monotonicUs();
      const std::int64_t p = limits->control_period_us.load();
      std::int32_t owner = h->controller_pid.load();
      std::int64_t until = h->controller_lease_until_us.load();
      bool mine = owner == me;
      if (!mine && until < now) {
        if (h->controller_lease_until_us.compare_exchange_strong(until, now + 3 * p)) {
          h->controller_pid.store(me);
          locals[i] = ControllerLocal{};
          mine = true;
        }
      }
      if (mine) {
        h->controller_lease_until_us.store(now + 3 * p);
        controlTick(r, i, &locals[i], p);
      }
    }
    sleepUs(period_us);
  }
  return nullptr;
}

}  // namespace

void ensureWatcher() {
  Runtime& r = rt();
  if (r.watcher_started.load(std::memory_order_relaxed) || r.region_count == 0) return;
  bool expected = false;
  if (!r.watcher_started.compare_exchange_strong(expected, true)) return;
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&thread, &attr, watcherMain, nullptr) != 0) r.watcher_started.store(false);
  pthread_attr_destroy(&attr);
}

}  // namespace gpool::vgpu::shim
