// A small CUDA driver-API program for the interposer's integration tests. It reaches the driver in
// one of three ways, chosen by argv[1]:
//   direct    calls linked against libcuda.so.1 (resolved at load time, as most programs do)
//   dlsym     dlopen("libcuda.so.1") + dlsym of each exported symbol
//   procaddr  dlsym of cuGetProcAddress_v2 only, then cuGetProcAddress_v2 for every entry point,
//             as the CUDA runtime does (per-thread-stream variants for launches)
// and runs the scenario in argv[2]. Output is "key value" lines on stdout.
// `vgpu_client - tamper REGION` loads no driver: it tries, as whoever runs it, every way to read
// or change the region at REGION (docs/vgpu-shm.md) and prints each outcome (ok or the errno).

#include <cuda.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "vgpu/nvml_abi.h"
#include "vgpu/shm_layout.h"

#undef cuGetProcAddress

namespace {

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemAllocPitch)(CUdeviceptr*, size_t*, size_t, size_t, unsigned);
  CUresult (*cuMemAllocManaged)(CUdeviceptr*, size_t, unsigned);
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                          unsigned long long);
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle);
  CUresult (*cuMemAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*cuMemPoolCreate)(CUmemoryPool*, const CUmemPoolProps*);
  CUresult (*cuMemPoolDestroy)(CUmemoryPool);
  CUresult (*cuMemPoolTrimTo)(CUmemoryPool, size_t);
  CUresult (*cuArrayCreate)(CUarray*, const CUDA_ARRAY_DESCRIPTOR*);
  CUresult (*cuArray3DCreate)(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*);
  CUresult (*cuArrayDestroy)(CUarray);
  CUresult (*cuMipmappedArrayCreate)(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned);
  CUresult (*cuMipmappedArrayDestroy)(CUmipmappedArray);
  CUresult (*cuGraphCreate)(CUgraph*, unsigned);
  CUresult (*cuGraphAddMemAllocNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                     CUDA_MEM_ALLOC_NODE_PARAMS*);
  CUresult (*cuGraphAddKernelNode)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                                   const CUDA_KERNEL_NODE_PARAMS*);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**);
  CUresult (*cuLaunchCooperativeKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, unsigned, CUstream, void**);
  CUresult (*cuGetExportTable)(const void**, const CUuuid*);
};

// {API name for cuGetProcAddress, exported symbol for dlsym, slot}.
struct Entry {
  const char* api;
  const char* symbol;
  std::size_t offset;
  bool per_thread;  // procaddr mode asks for the per-thread-stream variant
};

#define E(api, sym, pt) \
  { #api, sym, offsetof(Driver, api), pt }
const Entry kEntries[] = {
    E(cuInit, "cuInit", false),
    E(cuDeviceGet, "cuDeviceGet", false),
    E(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", false),
    E(cuCtxSetCurrent, "cuCtxSetCurrent", false),
    E(cuCtxSynchronize, "cuCtxSynchronize", false),
    E(cuMemGetInfo, "cuMemGetInfo_v2", false),
    E(cuDeviceTotalMem, "cuDeviceTotalMem_v2", false),
    E(cuMemAlloc, "cuMemAlloc_v2", false),
    E(cuMemFree, "cuMemFree_v2", false),
    E(cuMemAllocPitch, "cuMemAllocPitch_v2", false),
    E(cuMemAllocManaged, "cuMemAllocManaged", false),
    E(cuMemCreate, "cuMemCreate", false),
    E(cuMemRelease, "cuMemRelease", false),
    E(cuMemAllocAsync, "cuMemAllocAsync", true),
    E(cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", true),
    E(cuMemFreeAsync, "cuMemFreeAsync", true),
    E(cuMemPoolCreate, "cuMemPoolCreate", false),
    E(cuMemPoolDestroy, "cuMemPoolDestroy", false),
    E(cuMemPoolTrimTo, "cuMemPoolTrimTo", false),
    E(cuArrayCreate, "cuArrayCreate_v2", false),
    E(cuArray3DCreate, "cuArray3DCreate_v2", false),
    E(cuArrayDestroy, "cuArrayDestroy", false),
    E(cuMipmappedArrayCreate, "cuMipmappedArrayCreate", false),
    E(cuMipmappedArrayDestroy, "cuMipmappedArrayDestroy", false),
    E(cuGraphCreate, "cuGraphCreate", false),
    E(cuGraphAddMemAllocNode, "cuGraphAddMemAllocNode", false),
    E(cuGraphAddKernelNode, "cuGraphAddKernelNode_v2", false),
    E(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", false),
    E(cuGraphLaunch, "cuGraphLaunch", true),
    E(cuGraphDestroy, "cuGraphDestroy", false),
    E(cuModuleLoadData, "cuModuleLoadData", false),
    E(cuModuleGetFunction, "cuModuleGetFunction", false),
    E(cuStreamCreate, "cuStreamCreate", false),
    E(cuStreamSynchronize, "cuStreamSynchronize", true),
    E(cuLaunchKernel, "cuLaunchKernel", true),
    E(cuLaunchKernelEx, "cuLaunchKernelEx", true),
    E(cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", true),
    E(cuGetExportTable, "cuGetExportTable", false),
};
#undef E

[[noreturn]] void die(const char* what, int rc = 0) {
  std::fprintf(stderr, "vgpu_client: %s failed (%d)\n", what, rc);
  std::exit(2);
}

#define CHECK(call)                           \
  do {                                        \
    CUresult rc_ = (call);                    \
    if (rc_ != CUDA_SUCCESS) die(#call, rc_); \
  } while (0)

void setSlot(Driver* d, std::size_t offset, void* fn) {
  std::memcpy(reinterpret_cast<char*>(d) + offset, &fn, sizeof(fn));
}

Driver loadDirect() {
  Driver d{};
  d.cuInit = &::cuInit;
  d.cuDeviceGet = &::cuDeviceGet;
  d.cuDevicePrimaryCtxRetain = &::cuDevicePrimaryCtxRetain;
  d.cuCtxSetCurrent = &::cuCtxSetCurrent;
  d.cuCtxSynchronize = &::cuCtxSynchronize;
  d.cuMemGetInfo = &::cuMemGetInfo;
  d.cuDeviceTotalMem = &::cuDeviceTotalMem;
  d.cuMemAlloc = &::cuMemAlloc;
  d.cuMemFree = &::cuMemFree;
  d.cuMemAllocPitch = &::cuMemAllocPitch;
  d.cuMemAllocManaged = &::cuMemAllocManaged;
  d.cuMemCreate = &::cuMemCreate;
  d.cuMemRelease = &::cuMemRelease;
  d.cuMemAllocAsync = &::cuMemAllocAsync;
  d.cuMemAllocFromPoolAsync = &::cuMemAllocFromPoolAsync;
  d.cuMemFreeAsync = &::cuMemFreeAsync;
  d.cuMemPoolCreate = &::cuMemPoolCreate;
  d.cuMemPoolDestroy = &::cuMemPoolDestroy;
  d.cuMemPoolTrimTo = &::cuMemPoolTrimTo;
  d.cuArrayCreate = &::cuArrayCreate;
  d.cuArray3DCreate = &::cuArray3DCreate;
  d.cuArrayDestroy = &::cuArrayDestroy;
  d.cuMipmappedArrayCreate = &::cuMipmappedArrayCreate;
  d.cuMipmappedArrayDestroy = &::cuMipmappedArrayDestroy;
  d.cuGraphCreate = &::cuGraphCreate;
  d.cuGraphAddMemAllocNode = &::cuGraphAddMemAllocNode;
  d.cuGraphAddKernelNode = &::cuGraphAddKernelNode;
  d.cuGraphInstantiateWithFlags = &::cuGraphInstantiateWithFlags;
  d.cuGraphLaunch = &::cuGraphLaunch;
  d.cuGraphDestroy = &::cuGraphDestroy;
  d.cuModuleLoadData = &::cuModuleLoadData;
  d.cuModuleGetFunction = &::cuModuleGetFunction;
  d.cuStreamCreate = &::cuStreamCreate;
  d.cuStreamSynchronize = &::cuStreamSynchronize;
  d.cuLaunchKernel = &::cuLaunchKernel;
  d.cuLaunchKernelEx = &::cuLaunchKernelEx;
  d.cuLaunchCooperativeKernel = &::cuLaunchCooperativeKernel;
  d.cuGetExportTable = &::cuGetExportTable;
  return d;
}

Driver loadDlsym() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) die("dlopen libcuda.so.1");
  Driver d{};
  for (const Entry& e : kEntries) {
    void* fn = ::dlsym(lib, e.symbol);
    if (fn == nullptr) die(e.symbol);
    setSlot(&d, e.offset, fn);
  }
  return d;
}

Driver loadProcAddress() {
  void* lib = ::dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) die("dlopen libcuda.so.1");
  using GetProc =
      CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
  auto get = reinterpret_cast<GetProc>(::dlsym(lib, "cuGetProcAddress_v2"));
  if (get == nullptr) die("dlsym cuGetProcAddress_v2");
  // The runtime first asks for cuGetProcAddress itself and uses what it gets from then on.
  void* self = nullptr;
  CUdriverProcAddressQueryResult status{};
  CHECK(get("cuGetProcAddress", &self, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status));
  get = reinterpret_cast<GetProc>(self);
  Driver d{};
  for (const Entry& e : kEntries) {
    void* fn = nullptr;
    const cuuint64_t flags =
        e.per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT;
    CUresult rc = get(e.api, &fn, 12080, flags, &status);
    if (rc != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS) die(e.api, rc);
    setSlot(&d, e.offset, fn);
  }
  return d;
}

std::int64_t nowUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

Driver g;

std::uint64_t used() {
  size_t free_b = 0;
  size_t total_b = 0;
  CHECK(g.cuMemGetInfo(&free_b, &total_b));
  return total_b - free_b;
}

void setup() {
  CHECK(g.cuInit(0));
  CUdevice dev = 0;
  CHECK(g.cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CHECK(g.cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(g.cuCtxSetCurrent(ctx));
}

void printNvml() {
  void* lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (lib == nullptr) return;
  auto init = reinterpret_cast<nvmlReturn_t (*)()>(::dlsym(lib, "nvmlInit_v2"));
  auto handle = reinterpret_cast<nvmlReturn_t (*)(unsigned, nvmlDevice_t*)>(
      ::dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto info = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>(
      ::dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto info2 = reinterpret_cast<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_v2_t*)>(
      ::dlsym(lib, "nvmlDeviceGetMemoryInfo_v2"));
  nvmlDevice_t dev = nullptr;
  if (init() != NVML_SUCCESS || handle(0, &dev) != NVML_SUCCESS) return;
  nvmlMemory_t m{};
  if (info(dev, &m) == NVML_SUCCESS) {
    std::printf("nvml_total %llu\nnvml_used %llu\nnvml_free %llu\n", m.total, m.used, m.free);
  }
  nvmlMemory_v2_t m2{};
  m2.version = GPOOL_NVML_MEMORY_V2;
  if (info2(dev, &m2) == NVML_SUCCESS) {
    std::printf("nvml2_total %llu\nnvml2_used %llu\n", m2.total, m2.used);
  }
}

int info() {
  setup();
  size_t free_b = 0;
  size_t total_b = 0;
  CHECK(g.cuMemGetInfo(&free_b, &total_b));
  size_t dev_total = 0;
  CHECK(g.cuDeviceTotalMem(&dev_total, 0));
  std::printf("total %zu\nfree %zu\ndevtotal %zu\n", total_b, free_b, dev_total);
  printNvml();
  return 0;
}

// Threads allocate `chunk` bytes until OUT_OF_MEMORY; prints how many succeeded, then waits for
// stdin to close before freeing (so a test can look at the ledger while this process lives).
int fill(std::uint64_t chunk, int threads, bool hold) {
  setup();
  CUcontext ctx = nullptr;
  CHECK(g.cuDevicePrimaryCtxRetain(&ctx, 0));
  if (hold) {
    // Wait for the go byte, so that every process of a test has its context before any fills.
    std::printf("ready 1\n");
    std::fflush(stdout);
    char go;
    if (::read(0, &go, 1) != 1) return 2;
  }
  std::atomic<int> ok{0};
  std::atomic<int> bad{0};
  std::vector<std::vector<CUdeviceptr>> ptrs(threads);
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      g.cuCtxSetCurrent(ctx);
      for (;;) {
        CUdeviceptr p = 0;
        CUresult rc = g.cuMemAlloc(&p, chunk);
        if (rc == CUDA_ERROR_OUT_OF_MEMORY) break;
        if (rc != CUDA_SUCCESS) {
          bad.fetch_add(1);
          break;
        }
        ptrs[t].push_back(p);
        ok.fetch_add(1);
      }
    });
  }
  for (auto& t : ts)
    t.join();
  std::printf("allocated %d\nerrors %d\nused %llu\n", ok.load(), bad.load(),
              static_cast<unsigned long long>(used()));
  std::fflush(stdout);
  if (hold) {
    char c;
    while (::read(0, &c, 1) > 0) {
    }
  }
  for (auto& v : ptrs) {
    for (CUdeviceptr p : v)
      CHECK(g.cuMemFree(p));
  }
  std::printf("after_free %llu\n", static_cast<unsigned long long>(used()));
  return 0;
}

void report(const char* path, std::uint64_t before) {
  std::printf("%s %lld\n", path, static_cast<long long>(used()) - static_cast<long long>(before));
}

int paths() {
  const std::uint64_t base = 0;
  setup();
  report("context", base);
  constexpr std::uint64_t kMiB = 1 << 20;
  std::uint64_t b = used();
  CUdeviceptr p = 0;
  CHECK(g.cuMemAlloc(&p, 3 * kMiB));
  report("alloc", b);
  CHECK(g.cuMemFree(p));
  report("alloc_freed", b);

  size_t pitch = 0;
  CHECK(g.cuMemAllocPitch(&p, &pitch, 1000, 1024, 4));
  std::printf("pitch_expected %llu\n", static_cast<unsigned long long>(pitch * 1024));
  report("pitch", b);
  CHECK(g.cuMemFree(p));

  CHECK(g.cuMemAllocManaged(&p, 5 * kMiB, CU_MEM_ATTACH_GLOBAL));
  report("managed", b);
  CHECK(g.cuMemFree(p));

  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  CUmemGenericAllocationHandle h = 0;
  CHECK(g.cuMemCreate(&h, 4 * kMiB, &prop, 0));
  report("vmm_device", b);
  CHECK(g.cuMemRelease(h));
  report("vmm_device_released", b);
  // Host-located physical memory, with an id that is no device index (NCCL does this).
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
  prop.location.id = 7;
  CHECK(g.cuMemCreate(&h, 4 * kMiB, &prop, 0));
  report("vmm_host", b);
  CHECK(g.cuMemRelease(h));

  CUstream stream = nullptr;
  CHECK(g.cuStreamCreate(&stream, 0));
  CHECK(g.cuMemAllocAsync(&p, 6 * kMiB, stream));
  report("async", b);
  CHECK(g.cuMemFreeAsync(p, stream));
  report("async_freed", b);

  CUmemPoolProps pool_props{};
  pool_props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pool_props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  pool_props.location.id = 0;
  CUmemoryPool pool = nullptr;
  CHECK(g.cuMemPoolCreate(&pool, &pool_props));
  CHECK(g.cuMemAllocFromPoolAsync(&p, 7 * kMiB, pool, stream));
  report("frompool", b);
  CHECK(g.cuMemFreeAsync(p, stream));
  CHECK(g.cuMemPoolTrimTo(pool, 0));
  report("frompool_trimmed", b);
  CHECK(g.cuMemPoolDestroy(pool));

  CUDA_ARRAY_DESCRIPTOR ad{};
  ad.Width = 1024;
  ad.Height = 1024;
  ad.Format = CU_AD_FORMAT_FLOAT;
  ad.NumChannels = 4;
  CUarray arr = nullptr;
  CHECK(g.cuArrayCreate(&arr, &ad));
  report("array", b);
  CHECK(g.cuArrayDestroy(arr));

  CUDA_ARRAY3D_DESCRIPTOR a3{};
  a3.Width = 256;
  a3.Height = 256;
  a3.Depth = 16;
  a3.Format = CU_AD_FORMAT_UNSIGNED_INT8;
  a3.NumChannels = 2;
  CHECK(g.cuArray3DCreate(&arr, &a3));
  report("array3d", b);
  CHECK(g.cuArrayDestroy(arr));

  CUmipmappedArray mip = nullptr;
  a3.Depth = 0;
  CHECK(g.cuMipmappedArrayCreate(&mip, &a3, 5));
  report("mipmapped", b);
  CHECK(g.cuMipmappedArrayDestroy(mip));

  CUgraph graph = nullptr;
  CHECK(g.cuGraphCreate(&graph, 0));
  CUDA_MEM_ALLOC_NODE_PARAMS np{};
  np.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  np.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  np.poolProps.location.id = 0;
  np.bytesize = 8 * kMiB;
  CUgraphNode node = nullptr;
  CHECK(g.cuGraphAddMemAllocNode(&node, graph, nullptr, 0, &np));
  report("graph_node", b);
  CHECK(g.cuGraphDestroy(graph));
  report("graph_destroyed", b);

  // Opaque pass-through: the fake has no export tables and says so.
  CUuuid id{};
  const void* table = nullptr;
  std::printf("export_table_rc %d\n", static_cast<int>(g.cuGetExportTable(&table, &id)));
  report("end", b);
  return 0;
}

// Launches `count` kernels of `us` microseconds through `api`, keeping up to kDepth in flight on
// kDepth streams, so that scheduling delays of the client (a loaded CI machine) do not leave the
// simulated GPU idle.
constexpr int kDepth = 3;
int spin(std::uint32_t us, int count, const std::string& api) {
  setup();
  CUmodule mod = nullptr;
  CHECK(g.cuModuleLoadData(&mod, "simulated"));
  CUfunction f = nullptr;
  CHECK(g.cuModuleGetFunction(&f, mod, "busy"));
  CUstream streams[kDepth];
  for (CUstream& s : streams)
    CHECK(g.cuStreamCreate(&s, 0));
  void* params[] = {&us};
  CUgraphExec exec = nullptr;
  if (api == "graph") {
    CUgraph graph = nullptr;
    CHECK(g.cuGraphCreate(&graph, 0));
    CUDA_KERNEL_NODE_PARAMS kp{};
    kp.func = f;
    kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = params;
    CUgraphNode node = nullptr;
    CHECK(g.cuGraphAddKernelNode(&node, graph, nullptr, 0, &kp));
    CHECK(g.cuGraphInstantiateWithFlags(&exec, graph, 0));
  }
  std::printf("pid %d\nstart_us %lld\n", static_cast<int>(::getpid()),
              static_cast<long long>(nowUs()));
  std::fflush(stdout);
  for (int i = 0; i < count; ++i) {
    CUstream s = streams[i % kDepth];
    if (api == "kernel") {
      CHECK(g.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
    } else if (api == "ex") {
      CUlaunchConfig cfg{};
      cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
      cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
      cfg.hStream = s;
      CHECK(g.cuLaunchKernelEx(&cfg, f, params, nullptr));
    } else if (api == "coop") {
      CHECK(g.cuLaunchCooperativeKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params));
    } else {
      CHECK(g.cuGraphLaunch(exec, s));
    }
    CHECK(g.cuStreamSynchronize(streams[(i + 1) % kDepth]));
  }
  CHECK(g.cuCtxSynchronize());
  std::printf("end_us %lld\n", static_cast<long long>(nowUs()));
  return 0;
}

int cycles(int n) {
  setup();
  const std::uint64_t start = used();
  for (int i = 0; i < n; ++i) {
    CUdeviceptr p = 0;
    CHECK(g.cuMemAlloc(&p, static_cast<size_t>(i % 13 + 1) << 16));
    CUdeviceptr q = 0;
    CHECK(g.cuMemAllocAsync(&q, static_cast<size_t>(i % 5 + 1) << 16, nullptr));
    CHECK(g.cuMemFree(p));
    CHECK(g.cuMemFreeAsync(q, nullptr));
  }
  std::printf("start %llu\nend %llu\n", static_cast<unsigned long long>(start),
              static_cast<unsigned long long>(used()));
  return 0;
}

// Memory that bypasses every cuMem* entry point (as library-internal driver allocations do) must
// still count once the interposer has reconciled with NVML's per-process usage. Polls the
// virtualised usage for up to 5 s (reconciliation runs every 10 control periods).
int bypass(std::uint64_t bytes) {
  setup();
  using Bypass = CUresult (*)(int, unsigned long long);
  auto fn = reinterpret_cast<Bypass>(::dlsym(RTLD_DEFAULT, "gpoolFakeAllocBypass"));
  if (fn == nullptr) die("dlsym gpoolFakeAllocBypass");
  // A first allocation attaches this process to the region (and starts its watcher).
  CUdeviceptr p = 0;
  CHECK(g.cuMemAlloc(&p, 1 << 20));
  CHECK(g.cuMemFree(p));
  const std::uint64_t before = used();
  CHECK(fn(0, bytes));
  const std::int64_t deadline = nowUs() + 5000000;
  std::uint64_t now_used = used();
  while (now_used < before + bytes && nowUs() < deadline) {
    timespec ts{0, 10 * 1000 * 1000};
    ::nanosleep(&ts, nullptr);
    now_used = used();
  }
  std::printf("before %llu\nafter %llu\n", static_cast<unsigned long long>(before),
              static_cast<unsigned long long>(now_used));
  return 0;
}

// Allocates `mib` MiB in 64 MiB pieces (stopping at the first refusal), says how much it holds,
// then holds it until killed: a task the agent's backstop must see through NVML.
int hold(std::uint64_t mib) {
  setup();
  std::uint64_t held = 0;
  while (held < mib) {
    CUdeviceptr p = 0;
    const std::uint64_t piece = std::min<std::uint64_t>(64, mib - held);
    if (g.cuMemAlloc(&p, piece << 20) != CUDA_SUCCESS) break;
    held += piece;
  }
  std::printf("held_mib %llu\n", static_cast<unsigned long long>(held));
  std::fflush(stdout);
  for (;;)
    ::pause();
}

// Two devices, one region each: allocations are charged to the region of the current context's
// device and each device reports its own quota.
int multi() {
  CHECK(g.cuInit(0));
  for (int d = 0; d < 2; ++d) {
    CUdevice dev = 0;
    CHECK(g.cuDeviceGet(&dev, d));
    CUcontext ctx = nullptr;
    CHECK(g.cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(g.cuCtxSetCurrent(ctx));
    CUdeviceptr p = 0;
    CHECK(g.cuMemAlloc(&p, static_cast<size_t>(d + 1) * 10 << 20));
    size_t free_b = 0;
    size_t total_b = 0;
    CHECK(g.cuMemGetInfo(&free_b, &total_b));
    size_t dev_total = 0;
    CHECK(g.cuDeviceTotalMem(&dev_total, dev));
    std::printf("total%d %zu\nused%d %zu\ndevtotal%d %zu\n", d, total_b, d, total_b - free_b, d,
                dev_total);
  }
  return 0;
}

// dlsym(RTLD_NEXT) from the program must search after the program, not after the interposer:
// malloc comes from libc, and cuMemAlloc_v2 from the first object after the program that defines
// it (the preloaded interposer), as glibc itself would answer.
int rtldNext() {
  void* libc = ::dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  std::printf("next_malloc_is_libc %d\n", ::dlsym(RTLD_NEXT, "malloc") == ::dlsym(libc, "malloc"));
  std::printf("next_cumemalloc_is_default %d\n",
              ::dlsym(RTLD_NEXT, "cuMemAlloc_v2") == ::dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  std::printf("next_missing_is_null %d\n", ::dlsym(RTLD_NEXT, "gpool_no_such_symbol") == nullptr);
  return 0;
}

// Every way a local user (or the task itself) might read or change a task's region. Each line
// is "<attempt> ok" or "<attempt> <errno name>"; `quota_bytes` is what the limits say after all
// the attempts (or the errno of reading them). An attempt that succeeds is undone where it can
// be, but a write of the quota (raising it to 1 TiB) is real: it is what the test must see
// refused.
int tamper(const std::string& region) {
  const std::string limits = region + ".limits";
  const std::string usage = region + ".usage";
  const std::string dir = region.substr(0, region.rfind('/'));
  auto report = [](const char* what, bool ok) {
    std::printf("%s %s\n", what, ok ? "ok" : strerrorname_np(errno));
  };
  constexpr off_t kQuota = offsetof(gpool::vgpu::ShmLimits, quota_bytes);
  const std::uint64_t raised = 1ull << 40;
  int fd = ::open(limits.c_str(), O_RDONLY | O_CLOEXEC);
  report("read_limits", fd >= 0);
  if (fd >= 0) {
    // A read-only descriptor: neither a writable shared mapping nor mprotect may give write.
    void* w =
        ::mmap(nullptr, sizeof(gpool::vgpu::ShmLimits), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    report("map_limits_writable", w != MAP_FAILED);
    if (w != MAP_FAILED) ::munmap(w, sizeof(gpool::vgpu::ShmLimits));
    void* r = ::mmap(nullptr, sizeof(gpool::vgpu::ShmLimits), PROT_READ, MAP_SHARED, fd, 0);
    if (r != MAP_FAILED) {
      report("mprotect_limits_writable",
             ::mprotect(r, sizeof(gpool::vgpu::ShmLimits), PROT_READ | PROT_WRITE) == 0);
      ::munmap(r, sizeof(gpool::vgpu::ShmLimits));
    }
    ::close(fd);
  }
  fd = ::open(limits.c_str(), O_RDWR | O_CLOEXEC);
  report("write_limits",
         fd >= 0 && ::pwrite(fd, &raised, sizeof(raised), kQuota) == sizeof(raised));
  if (fd >= 0) ::close(fd);
  report("chmod_limits", ::chmod(limits.c_str(), 0666) == 0);
  fd = ::open(usage.c_str(), O_RDONLY | O_CLOEXEC);
  report("read_usage", fd >= 0);
  if (fd >= 0) ::close(fd);
  fd = ::open(usage.c_str(), O_RDWR | O_CLOEXEC);
  report("write_usage", fd >= 0);
  if (fd >= 0) ::close(fd);
  const std::string moved = limits + ".moved";
  const bool renamed = ::rename(limits.c_str(), moved.c_str()) == 0;
  report("replace_limits", renamed);
  if (renamed) (void)::rename(moved.c_str(), limits.c_str());
  const std::string planted = dir + "/planted";
  fd = ::open(planted.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  report("create_in_dir", fd >= 0);
  if (fd >= 0) {
    ::close(fd);
    ::unlink(planted.c_str());
  }
  fd = ::open(limits.c_str(), O_RDONLY | O_CLOEXEC);
  std::uint64_t quota = 0;
  if (fd >= 0 && ::pread(fd, &quota, sizeof(quota), kQuota) == sizeof(quota)) {
    std::printf("quota_bytes %llu\n", static_cast<unsigned long long>(quota));
  } else {
    std::printf("quota_bytes %s\n", strerrorname_np(errno));
  }
  if (fd >= 0) ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: vgpu_client direct|dlsym|procaddr SCENARIO [ARGS]\n");
    return 2;
  }
  if (std::string(argv[2]) == "rtldnext") return rtldNext();
  if (std::string(argv[2]) == "tamper" && argc >= 4) return tamper(argv[3]);
  const std::string how = argv[1];
  g = how == "direct" ? loadDirect() : how == "dlsym" ? loadDlsym() : loadProcAddress();
  const std::string what = argv[2];
  if (what == "info") return info();
  if (what == "fill" && argc >= 5) {
    return fill(std::strtoull(argv[3], nullptr, 10) << 20, std::atoi(argv[4]),
                argc >= 6 && std::string(argv[5]) == "hold");
  }
  if (what == "paths") return paths();
  if (what == "multi") return multi();
  if (what == "spin" && argc >= 6) {
    return spin(static_cast<std::uint32_t>(std::atoi(argv[3])), std::atoi(argv[4]), argv[5]);
  }
  if (what == "cycles" && argc >= 4) return cycles(std::atoi(argv[3]));
  if (what == "bypass" && argc >= 4) return bypass(std::strtoull(argv[3], nullptr, 10) << 20);
  if (what == "hold" && argc >= 4) return hold(std::strtoull(argv[3], nullptr, 10));
  std::fprintf(stderr, "vgpu_client: bad scenario\n");
  return 2;
}
