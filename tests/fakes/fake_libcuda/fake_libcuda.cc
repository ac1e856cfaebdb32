// A fake libcuda.so.1 for tests on machines without a GPU. Device pointers are host memory; a
// device has a configurable size (fixture or GPOOL_FAKE_GPU_MEMORY_MIB); a kernel "runs" for the
// number of microseconds in its first parameter (a uint32) and shows up as busy time of the one
// simulated GPU, which executes kernels from all processes one at a time (fakes/common). Launches
// are asynchronous; stream and context synchronisation wait for the simulated end time.
//
// Like the real driver where callers can tell: CUresult codes, cuInit required first
// (CUDA_ERROR_NOT_INITIALIZED), a current context required for allocations and launches
// (CUDA_ERROR_INVALID_CONTEXT), device memory exhaustion (CUDA_ERROR_OUT_OF_MEMORY),
// cuGetProcAddress/_v2 resolving (name, version, flags) through the table generated from the
// CUDA headers, thread-safety. Names a user could see say "simulated".

#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "fakes/common/fake_gpu_state.h"
#include "vgpu/proc_table.h"

using gpool::fakes::FakeLock;
using gpool::fakes::fakeNowUs;
using gpool::fakes::fakeProc;
using gpool::fakes::fakeScheduleKernel;
using gpool::fakes::FakeState;
using gpool::fakes::fakeState;

namespace {

constexpr std::uint32_t kCtxMagic = 0xc0c0c7c7;

struct FakeContext {
  std::uint32_t magic = kCtxMagic;
  int device = 0;
  bool primary = false;
  std::atomic<std::int64_t> last_end_us{0};
};

struct FakeStream {
  FakeContext* ctx = nullptr;
  std::atomic<std::int64_t> last_end_us{0};
};

struct FakeFunction {
  std::string name;
};

struct FakeModule {
  int unused = 0;
};

enum class MemKind { kLinear, kManaged, kVmm, kArray, kMipmapped, kGraph, kPool };

struct Allocation {
  std::uint64_t bytes;
  int device;
  MemKind kind;
  void* host;
};

struct FakeGraph {
  std::vector<std::uint32_t> kernel_us;
  std::vector<std::uint64_t> alloc_ptrs;
};

struct FakeGraphExec {
  std::uint64_t total_us = 0;
};

std::atomic<bool> g_initialised{false};
std::mutex g_mu;  // guards the maps below and primary contexts
std::unordered_map<std::uint64_t, Allocation>& allocations() {
  static auto* m = new std::unordered_map<std::uint64_t, Allocation>;
  return *m;
}
FakeContext* g_primary[gpool::fakes::kFakeMaxDevices];
int g_primary_refs[gpool::fakes::kFakeMaxDevices];
thread_local std::vector<FakeContext*> t_ctx_stack;

// getpid() is a system call; the driver knows its process. Reset in a fork child.
std::atomic<std::int32_t> g_pid{0};
std::int32_t selfPid() {
  std::int32_t pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = static_cast<std::int32_t>(::getpid());
    g_pid.store(pid, std::memory_order_relaxed);
    static const int registered = ::pthread_atfork(nullptr, nullptr, [] { g_pid.store(0); });
    (void)registered;
  }
  return pid;
}

FakeContext* current() {
  return t_ctx_stack.empty() ? nullptr : t_ctx_stack.back();
}

CUresult ready() {
  if (!g_initialised.load(std::memory_order_acquire)) return CUDA_ERROR_NOT_INITIALIZED;
  return CUDA_SUCCESS;
}

CUresult readyCtx(FakeContext** ctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  *ctx = current();
  return *ctx == nullptr ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

bool validDevice(CUdevice dev) {
  return dev >= 0 && static_cast<std::uint32_t>(dev) < fakeState()->device_count;
}

// Charges `bytes` of device memory to this process, or fails with OOM.
CUresult chargeDevice(int device, std::uint64_t bytes) {
  FakeLock lock;
  FakeState* s = fakeState();
  if (s->rt[device].used_bytes + bytes > s->devices[device].memory_bytes) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s->rt[device].used_bytes += bytes;
  if (auto* p = fakeProc(device, selfPid())) p->used_bytes += bytes;
  return CUDA_SUCCESS;
}

void unchargeDevice(int device, std::uint64_t bytes) {
  FakeLock lock;
  FakeState* s = fakeState();
  s->rt[device].used_bytes -= std::min(bytes, s->rt[device].used_bytes);
  if (auto* p = fakeProc(device, selfPid())) p->used_bytes -= std::min(bytes, p->used_bytes);
}

CUresult allocate(int device, std::uint64_t bytes, MemKind kind, std::uint64_t* key) {
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult rc = chargeDevice(device, bytes); rc != CUDA_SUCCESS) return rc;
  // Host memory stands in for device memory; touched lazily, so large sizes cost nothing.
  void* host = std::malloc(static_cast<std::size_t>(std::max<std::uint64_t>(bytes, 1)));
  if (host == nullptr) {
    unchargeDevice(device, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *key = reinterpret_cast<std::uint64_t>(host);
  std::lock_guard<std::mutex> lock(g_mu);
  allocations()[*key] = Allocation{bytes, device, kind, host};
  return CUDA_SUCCESS;
}

CUresult freeAllocation(std::uint64_t key, MemKind kind) {
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = allocations().find(key);
    if (it == allocations().end() || it->second.kind != kind) return CUDA_ERROR_INVALID_VALUE;
    a = it->second;
    allocations().erase(it);
  }
  unchargeDevice(a.device, a.bytes);
  std::free(a.host);
  return CUDA_SUCCESS;
}

void waitUntil(std::int64_t end_us) {
  const std::int64_t now = fakeNowUs();
  if (end_us <= now) return;
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::int64_t target_ns =
      static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec + (end_us - now) * 1000;
  timespec abs{};
  abs.tv_sec = target_ns / 1000000000;
  abs.tv_nsec = target_ns % 1000000000;
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &abs, nullptr) != 0) {
  }
}

std::uint64_t formatBytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    default: return 4;
  }
}

constexpr std::uint64_t kArrayAlign = 64 * 1024;
std::uint64_t alignUp(std::uint64_t v, std::uint64_t a) {
  return (v + a - 1) / a * a;
}

std::uint64_t array3dBytes(const CUDA_ARRAY3D_DESCRIPTOR* d) {
  return alignUp(std::max<std::uint64_t>(d->Width, 1) * std::max<std::uint64_t>(d->Height, 1) *
                     std::max<std::uint64_t>(d->Depth, 1) * d->NumChannels * formatBytes(d->Format),
                 kArrayAlign);
}

std::uint64_t mipmappedBytes(const CUDA_ARRAY3D_DESCRIPTOR* d, unsigned int levels) {
  CUDA_ARRAY3D_DESCRIPTOR l = *d;
  std::uint64_t total = 0;
  for (unsigned int i = 0; i < std::max(levels, 1u); ++i) {
    total += array3dBytes(&l);
    l.Width = std::max<std::size_t>(l.Width / 2, 1);
    if (l.Height > 0) l.Height = std::max<std::size_t>(l.Height / 2, 1);
    if (l.Depth > 0) l.Depth = std::max<std::size_t>(l.Depth / 2, 1);
  }
  return total;
}

std::int64_t kernelDuration(void** params) {
  if (params == nullptr || params[0] == nullptr) return 0;
  std::uint32_t us = 0;
  std::memcpy(&us, params[0], sizeof(us));
  return us;
}

CUresult launch(CUfunction f, CUstream stream, void** params) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto* s = reinterpret_cast<FakeStream*>(stream);
  std::int64_t end = 0;
  {
    FakeLock lock;
    end = fakeScheduleKernel(ctx->device, selfPid(), kernelDuration(params),
                             s != nullptr ? s->last_end_us.load() : 0);
  }
  if (s != nullptr) s->last_end_us.store(end);
  std::int64_t prev = ctx->last_end_us.load();
  while (prev < end && !ctx->last_end_us.compare_exchange_weak(prev, end)) {
  }
  return CUDA_SUCCESS;
}

// The handle of this library itself, for cuGetProcAddress. libc's dlsym is used directly (via
// its versioned name) so an interposer's dlsym hook cannot redirect the driver's own lookups.
using DlsymFn = void* (*)(void*, const char*);
void* selfSymbol(const char* name) {
  static void* self = [] {
    Dl_info info{};
    ::dladdr(reinterpret_cast<void*>(&cuInit), &info);
    return ::dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  }();
  static auto real_dlsym = reinterpret_cast<DlsymFn>(::dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  static auto fallback = reinterpret_cast<DlsymFn>(::dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  DlsymFn fn = real_dlsym != nullptr ? real_dlsym : fallback;
  return fn != nullptr && self != nullptr ? fn(self, name) : nullptr;
}

}  // namespace

extern "C" {

// Per-thread-default-stream variants are not declared by cuda.h unless the caller compiles for
// them; the driver exports them all the same.
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, unsigned, CUstream, void**);
CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr*, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuStreamSynchronize_ptsz(CUstream);

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  {
    FakeLock lock;
    gpool::fakes::fakeReapDead();
  }
  g_initialised.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = fakeState()->cuda_driver_version;
  return CUDA_SUCCESS;
}

CUresult cuGetErrorName(CUresult error, const char** str) {
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *str = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *str = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *str = "CUDA_ERROR_OUT_OF_MEMORY"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *str = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *str = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_NOT_FOUND: *str = "CUDA_ERROR_NOT_FOUND"; break;
    default: *str = "CUDA_ERROR_UNKNOWN"; break;
  }
  return CUDA_SUCCESS;
}

CUresult cuGetErrorString(CUresult error, const char** str) {
  return cuGetErrorName(error, str);
}

CUresult cuDeviceGetCount(int* count) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = static_cast<int>(fakeState()->device_count);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!validDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<std::size_t>(len), "%s", fakeState()->devices[dev].name);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  // The 16 bytes behind "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
  const char* s = fakeState()->devices[dev].uuid;
  std::memset(uuid->bytes, 0, sizeof(uuid->bytes));
  int n = 0;
  for (const char* p = s + 4; *p != '\0' && n < 32; ++p) {
    int v = (*p >= '0' && *p <= '9') ? *p - '0' : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10 : -1;
    if (v < 0) continue;
    uuid->bytes[n / 2] = static_cast<char>(uuid->bytes[n / 2] | (n % 2 == 0 ? v << 4 : v));
    ++n;
  }
  return CUDA_SUCCESS;
}

#undef cuDeviceGetUuid
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

CUresult cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *bytes = fakeState()->devices[dev].memory_bytes;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const auto& d = fakeState()->devices[dev];
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = d.sm_count; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = d.cc_major; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = d.cc_minor; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *value = 2048; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: *value = 1; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *value = static_cast<int>(d.sm_clock_mhz) * 1000; break;
    default: *value = 0; break;
  }
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (bus_id == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(bus_id, static_cast<std::size_t>(len), "%s", fakeState()->devices[dev].pci_bus_id);
  return CUDA_SUCCESS;
}

// --- contexts -------------------------------------------------------------------------------

static CUresult newContext(int device, bool primary, FakeContext** out) {
  const std::uint64_t ctx_bytes = fakeState()->devices[device].context_bytes;
  if (CUresult rc = chargeDevice(device, ctx_bytes); rc != CUDA_SUCCESS) return rc;
  auto* ctx = new FakeContext;
  ctx->device = device;
  ctx->primary = primary;
  *out = ctx;
  return CUDA_SUCCESS;
}

static void deleteContext(FakeContext* ctx) {
  unchargeDevice(ctx->device, fakeState()->devices[ctx->device].context_bytes);
  ctx->magic = 0;
  delete ctx;
}

static bool validContext(CUcontext c) {
  return c != nullptr && reinterpret_cast<FakeContext*>(c)->magic == kCtxMagic;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_primary[dev] == nullptr) {
    if (CUresult rc = newContext(dev, true, &g_primary[dev]); rc != CUDA_SUCCESS) return rc;
  }
  ++g_primary_refs[dev];
  *pctx = reinterpret_cast<CUcontext>(g_primary[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_primary_refs[dev] == 0) return CUDA_ERROR_INVALID_CONTEXT;
  if (--g_primary_refs[dev] == 0) {
    deleteContext(g_primary[dev]);
    g_primary[dev] = nullptr;
  }
  return CUDA_SUCCESS;
}

static CUresult createContext(CUcontext* pctx, CUdevice dev) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (!validDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FakeContext* ctx = nullptr;
  if (CUresult rc = newContext(dev, false, &ctx); rc != CUDA_SUCCESS) return rc;
  t_ctx_stack.push_back(ctx);
  *pctx = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}

#undef cuCtxCreate
CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int /*flags*/, CUdevice dev) {
  return createContext(pctx, dev);
}
CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* /*params*/, unsigned int /*flags*/,
                        CUdevice dev) {
  return createContext(pctx, dev);
}

CUresult cuCtxDestroy_v2(CUcontext c) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (!validContext(c)) return CUDA_ERROR_INVALID_CONTEXT;
  auto* ctx = reinterpret_cast<FakeContext*>(c);
  if (ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  std::erase(t_ctx_stack, ctx);
  deleteContext(ctx);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext c) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (c != nullptr && !validContext(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!t_ctx_stack.empty()) t_ctx_stack.pop_back();
  if (c != nullptr) t_ctx_stack.push_back(reinterpret_cast<FakeContext*>(c));
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(current());
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext c) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (!validContext(c)) return CUDA_ERROR_INVALID_CONTEXT;
  t_ctx_stack.push_back(reinterpret_cast<FakeContext*>(c));
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (t_ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx != nullptr) *pctx = reinterpret_cast<CUcontext>(t_ctx_stack.back());
  t_ctx_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* dev) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *dev = ctx->device;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize() {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  waitUntil(ctx->last_end_us.load());
  return CUDA_SUCCESS;
}

// --- memory ---------------------------------------------------------------------------------

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  FakeLock lock;
  FakeState* s = fakeState();
  *total_bytes = s->devices[ctx->device].memory_bytes;
  *free_bytes = *total_bytes - std::min<std::uint64_t>(s->rt[ctx->device].used_bytes, *total_bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t key = 0;
  if (CUresult rc = allocate(ctx->device, bytes, MemKind::kLinear, &key); rc != CUDA_SUCCESS) {
    return rc;
  }
  *dptr = key;
  return CUDA_SUCCESS;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int element_size) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr || pitch == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (element_size != 4 && element_size != 8 && element_size != 16) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const std::uint64_t p = alignUp(std::max<std::uint64_t>(width, 1), 512);
  std::uint64_t key = 0;
  if (CUresult rc = allocate(ctx->device, p * height, MemKind::kLinear, &key); rc != CUDA_SUCCESS) {
    return rc;
  }
  *dptr = key;
  *pitch = p;
  return CUDA_SUCCESS;
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytes, unsigned int /*flags*/) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t key = 0;
  if (CUresult rc = allocate(ctx->device, bytes, MemKind::kManaged, &key); rc != CUDA_SUCCESS) {
    return rc;
  }
  *dptr = key;
  return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (dptr == 0) return CUDA_SUCCESS;
  CUresult rc = freeAllocation(dptr, MemKind::kLinear);
  if (rc != CUDA_SUCCESS) rc = freeAllocation(dptr, MemKind::kManaged);
  if (rc != CUDA_SUCCESS) rc = freeAllocation(dptr, MemKind::kPool);  // cuMemFree may free these
  return rc;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
  return CUDA_SUCCESS;
}

// Virtual memory management: physical handles are charged only for device locations.
struct VmmHandle {
  std::uint64_t bytes;
  int device;  // -1 for host locations
  void* host;
};

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long /*flags*/) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (handle == nullptr || prop == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  auto* h = new VmmHandle{size, -1, nullptr};
  if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    if (!validDevice(prop->location.id)) {
      delete h;
      return CUDA_ERROR_INVALID_DEVICE;
    }
    if (CUresult rc = chargeDevice(prop->location.id, size); rc != CUDA_SUCCESS) {
      delete h;
      return rc;
    }
    h->device = prop->location.id;
  } else if (prop->location.type != CU_MEM_LOCATION_TYPE_HOST &&
             prop->location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA &&
             prop->location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
    delete h;
    return CUDA_ERROR_INVALID_VALUE;
  }
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(h);
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  auto* h = reinterpret_cast<VmmHandle*>(handle);
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (h->device >= 0) unchargeDevice(h->device, h->bytes);
  delete h;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags /*option*/) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = 2 << 20;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t /*alignment*/,
                             CUdeviceptr /*addr*/, unsigned long long /*flags*/) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ptr == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  *ptr = reinterpret_cast<CUdeviceptr>(std::malloc(size));
  return *ptr == 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t /*size*/) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  std::free(reinterpret_cast<void*>(ptr));
  return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t /*offset*/,
                  CUmemGenericAllocationHandle handle, unsigned long long /*flags*/) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (ptr == 0 || size == 0 || handle == 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return ptr == 0 || size == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return ptr == 0 || size == 0 || (desc == nullptr && count > 0) ? CUDA_ERROR_INVALID_VALUE
                                                                 : CUDA_SUCCESS;
}

// Stream-ordered allocation: the fake allocates at once (the ordering is not observable here).
struct FakePool {
  int device;
};

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (pool == nullptr || props == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pool = reinterpret_cast<CUmemoryPool>(new FakePool{props->location.id});
  return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  delete reinterpret_cast<FakePool*>(pool);
  return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t /*min_bytes*/) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return pool == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream /*stream*/) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t key = 0;
  if (CUresult rc = allocate(ctx->device, bytes, MemKind::kPool, &key); rc != CUDA_SUCCESS) {
    return rc;
  }
  *dptr = key;
  return CUDA_SUCCESS;
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
  return cuMemAllocAsync(dptr, bytes, stream);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                 CUstream /*stream*/) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (dptr == nullptr || pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t key = 0;
  const int device = reinterpret_cast<FakePool*>(pool)->device;
  if (CUresult rc = allocate(device, bytes, MemKind::kPool, &key); rc != CUDA_SUCCESS) return rc;
  *dptr = key;
  return CUDA_SUCCESS;
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                      CUstream stream) {
  return cuMemAllocFromPoolAsync(dptr, bytes, pool, stream);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream /*stream*/) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return freeAllocation(dptr, MemKind::kPool);
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream) {
  return cuMemFreeAsync(dptr, stream);
}

// Arrays.
CUresult cuArray3DCreate_v2(CUarray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (array == nullptr || desc == nullptr || desc->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t key = 0;
  if (CUresult rc = allocate(ctx->device, array3dBytes(desc), MemKind::kArray, &key);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  *array = reinterpret_cast<CUarray>(key);
  return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray* array, const CUDA_ARRAY_DESCRIPTOR* desc) {
  if (desc == nullptr) return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3{};
  d3.Width = desc->Width;
  d3.Height = desc->Height;
  d3.Format = desc->Format;
  d3.NumChannels = desc->NumChannels;
  return cuArray3DCreate_v2(array, &d3);
}

CUresult cuArrayDestroy(CUarray array) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return freeAllocation(reinterpret_cast<std::uint64_t>(array), MemKind::kArray);
}

static CUresult memoryRequirements(std::uint64_t key, MemKind kind,
                                   CUDA_ARRAY_MEMORY_REQUIREMENTS* req) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (req == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = allocations().find(key);
  if (it == allocations().end() || it->second.kind != kind) return CUDA_ERROR_INVALID_HANDLE;
  *req = {};
  req->size = it->second.bytes;
  req->alignment = kArrayAlign;
  return CUDA_SUCCESS;
}

CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req, CUarray array,
                                      CUdevice /*device*/) {
  return memoryRequirements(reinterpret_cast<std::uint64_t>(array), MemKind::kArray, req);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* array, const CUDA_ARRAY3D_DESCRIPTOR* desc,
                                unsigned int levels) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (array == nullptr || desc == nullptr || desc->Width == 0) return CUDA_ERROR_INVALID_VALUE;
  std::uint64_t key = 0;
  if (CUresult rc = allocate(ctx->device, mipmappedBytes(desc, levels), MemKind::kMipmapped, &key);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  *array = reinterpret_cast<CUmipmappedArray>(key);
  return CUDA_SUCCESS;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray array) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  return freeAllocation(reinterpret_cast<std::uint64_t>(array), MemKind::kMipmapped);
}

CUresult cuMipmappedArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS* req,
                                               CUmipmappedArray array, CUdevice /*device*/) {
  return memoryRequirements(reinterpret_cast<std::uint64_t>(array), MemKind::kMipmapped, req);
}

// --- modules, streams, launches -------------------------------------------------------------

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *module = reinterpret_cast<CUmodule>(new FakeModule);
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  delete reinterpret_cast<FakeModule*>(module);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction* f, CUmodule module, const char* name) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (f == nullptr || module == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *f = reinterpret_cast<CUfunction>(new FakeFunction{name});  // leaked like a module's functions
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream* stream, unsigned int /*flags*/) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  if (stream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* s = new FakeStream;
  s->ctx = ctx;
  *stream = reinterpret_cast<CUstream>(s);
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream stream) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  delete reinterpret_cast<FakeStream*>(stream);
  return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream) {
  FakeContext* ctx = nullptr;
  if (CUresult rc = readyCtx(&ctx); rc != CUDA_SUCCESS) return rc;
  auto* s = reinterpret_cast<FakeStream*>(stream);
  waitUntil(s != nullptr ? s->last_end_us.load() : ctx->last_end_us.load());
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  return cuStreamSynchronize(stream);
}

CUresult cuLaunchKernel(CUfunction f, unsigned /*gx*/, unsigned /*gy*/, unsigned /*gz*/,
                        unsigned /*bx*/, unsigned /*by*/, unsigned /*bz*/, unsigned /*shmem*/,
                        CUstream stream, void** params, void** /*extra*/) {
  return launch(f, stream, params);
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shmem, CUstream stream,
                             void** params, void** extra) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                          void** /*extra*/) {
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return launch(f, config->hStream, params);
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  return cuLaunchKernelEx(config, f, params, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned /*gx*/, unsigned /*gy*/, unsigned /*gz*/,
                                   unsigned /*bx*/, unsigned /*by*/, unsigned /*bz*/,
                                   unsigned /*shmem*/, CUstream stream, void** params) {
  return launch(f, stream, params);
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                        CUstream stream, void** params) {
  return cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, params);
}

// --- graphs ---------------------------------------------------------------------------------

CUresult cuGraphCreate(CUgraph* graph, unsigned int /*flags*/) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *graph = reinterpret_cast<CUgraph>(new FakeGraph);
  return CUDA_SUCCESS;
}

CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode* /*deps*/,
                                 size_t /*ndeps*/, const CUDA_KERNEL_NODE_PARAMS* params) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (node == nullptr || graph == nullptr || params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* g = reinterpret_cast<FakeGraph*>(graph);
  g->kernel_us.push_back(static_cast<std::uint32_t>(kernelDuration(params->kernelParams)));
  *node = reinterpret_cast<CUgraphNode>(g->kernel_us.size());
  return CUDA_SUCCESS;
}

// Graph memory is reserved when the node is added and returned when the graph is destroyed (the
// real driver reserves it at instantiation/launch and keeps it until trimmed: an upper bound).
CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode* /*deps*/,
                                size_t /*ndeps*/, CUDA_MEM_ALLOC_NODE_PARAMS* params) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (node == nullptr || graph == nullptr || params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* g = reinterpret_cast<FakeGraph*>(graph);
  std::uint64_t key = 0;
  if (CUresult rc =
          allocate(params->poolProps.location.id, params->bytesize, MemKind::kGraph, &key);
      rc != CUDA_SUCCESS) {
    return rc;
  }
  g->alloc_ptrs.push_back(key);
  params->dptr = key;
  *node = reinterpret_cast<CUgraphNode>(key);
  return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph graph) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  auto* g = reinterpret_cast<FakeGraph*>(graph);
  if (g == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (std::uint64_t p : g->alloc_ptrs)
    freeAllocation(p, MemKind::kGraph);
  delete g;
  return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                     unsigned long long /*flags*/) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  if (exec == nullptr || graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new FakeGraphExec;
  for (std::uint32_t us : reinterpret_cast<FakeGraph*>(graph)->kernel_us)
    e->total_us += us;
  *exec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec exec) {
  if (CUresult rc = ready(); rc != CUDA_SUCCESS) return rc;
  delete reinterpret_cast<FakeGraphExec*>(exec);
  return CUDA_SUCCESS;
}

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::uint32_t us = static_cast<std::uint32_t>(reinterpret_cast<FakeGraphExec*>(exec)->total_us);
  void* arg = &us;
  return launch(reinterpret_cast<CUfunction>(exec), stream, &arg);
}
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  return cuGraphLaunch(exec, stream);
}

// --- test hooks (not part of the CUDA API) --------------------------------------------------

// Charges device memory to this process the way library-internal driver allocations do: visible
// to NVML's per-process usage but not through any cuMem* entry point an interposer could catch.
__attribute__((visibility("default"))) CUresult gpoolFakeAllocBypass(int device,
                                                                     unsigned long long bytes) {
  if (!validDevice(device)) return CUDA_ERROR_INVALID_DEVICE;
  return chargeDevice(device, bytes);
}

// --- entry-point lookup ---------------------------------------------------------------------

CUresult cuGetExportTable(const void** table, const CUuuid* id) {
  if (table == nullptr || id == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_ERROR_NOT_FOUND;  // the simulated driver has no private tables
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  gpool::vgpu::ProcResolution r = gpool::vgpu::resolveProc(symbol, cuda_version, per_thread);
  if (r.lookup == gpool::vgpu::ProcLookup::kVersionNotSufficient) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return CUDA_ERROR_NOT_FOUND;
  }
  void* fn = r.lookup == gpool::vgpu::ProcLookup::kFound ? selfSymbol(r.entry->symbol) : nullptr;
  if (fn == nullptr) {
    if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = fn;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

#undef cuGetProcAddress
CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, nullptr);
}

}  // extern "C"
