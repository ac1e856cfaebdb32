// The interposer loaded into the test process itself (dlopen, RTLD_LOCAL) in front of the fake
// driver, so its code runs under the sanitizers too (LD_PRELOAD tests cannot). Hooks are called
// through pointers taken from the interposer, exactly as a preloaded program would reach them.

#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "vgpu/shm_region.h"

namespace gpool::vgpu {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;
constexpr std::uint64_t kQuota = 256 * kMiB;

using GetProc = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using Alloc = CUresult (*)(CUdeviceptr*, size_t);
using Free = CUresult (*)(CUdeviceptr);
using GetInfo = CUresult (*)(size_t*, size_t*);

// One interposer per process: it reads its environment once.
struct Loaded {
  std::string dir;
  std::string region;
  void* fake = nullptr;
  void* shim = nullptr;
  CUcontext ctx = nullptr;
};

Loaded& loaded() {
  static Loaded* l = [] {
    auto* x = new Loaded;
    char tmpl[] = "/tmp/gpool-vgpu-inproc-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) std::abort();
    x->dir = tmpl;
    x->region = x->dir + "/region";
    RegionConfig cfg;
    cfg.quota_bytes = kQuota;
    cfg.context_bytes = 16 * kMiB;
    if (!ShmRegion::create(x->region, cfg).ok()) std::abort();
    ::setenv("GPOOL_VGPU_REGIONS", x->region.c_str(), 1);
    ::setenv("GPOOL_VGPU_LIBCUDA", GPOOL_FAKE_LIBCUDA, 1);
    ::setenv("GPOOL_VGPU_LIBNVML", GPOOL_FAKE_LIBNVML, 1);
    x->fake = ::dlopen(GPOOL_FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
    x->shim = ::dlopen(GPOOL_VGPU_LIB, RTLD_NOW | RTLD_LOCAL);
    if (x->fake == nullptr || x->shim == nullptr) std::abort();
    // The region stays mapped by the interposer; only the files go at exit.
    std::atexit([] {
      ::unlink(l->region.c_str());
      ::rmdir(l->dir.c_str());
    });
    reinterpret_cast<CUresult (*)(unsigned)>(::dlsym(x->fake, "cuInit"))(0);
    reinterpret_cast<CUresult (*)(CUcontext*, CUdevice)>(
        ::dlsym(x->shim, "cuDevicePrimaryCtxRetain"))(&x->ctx, 0);
    return x;
  }();
  // The fake's current context is per thread.
  reinterpret_cast<CUresult (*)(CUcontext)>(::dlsym(l->fake, "cuCtxSetCurrent"))(l->ctx);
  return *l;
}

template <typename T>
T hook(const char* name) {
  return reinterpret_cast<T>(::dlsym(loaded().shim, name));
}

std::uint64_t used() {
  auto r = ShmRegion::open(loaded().region);
  return r.ok() ? r->usedBytes() : ~0ULL;
}

TEST(VgpuInprocTest, ExportsOnlyTheHooks) {
  Loaded& l = loaded();
  EXPECT_NE(::dlsym(l.shim, "cuMemAlloc_v2"), nullptr);
  EXPECT_NE(::dlsym(l.shim, "dlsym"), nullptr);
  EXPECT_EQ(::dlsym(l.shim, "cuInit"), nullptr);                    // not hooked: not exported
  EXPECT_EQ(::dlsym(l.shim, "_ZN5gpool4vgpu4shim2rtEv"), nullptr);  // internals are hidden
}

TEST(VgpuInprocTest, GetProcAddressReturnsHooksForHookedAbisOnly) {
  Loaded& l = loaded();
  auto get = hook<GetProc>("cuGetProcAddress_v2");
  CUdriverProcAddressQueryResult status{};
  void* fn = nullptr;
  ASSERT_EQ(get("cuMemAlloc", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status), CUDA_SUCCESS);
  EXPECT_EQ(fn, ::dlsym(l.shim, "cuMemAlloc_v2"));
  ASSERT_EQ(
      get("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &status),
      CUDA_SUCCESS);
  EXPECT_EQ(fn, ::dlsym(l.shim, "cuLaunchKernel_ptsz"));
  ASSERT_EQ(get("cuGetProcAddress", &fn, 12000, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(fn, ::dlsym(l.shim, "cuGetProcAddress_v2"));
  // Not hooked: the driver's own pointer, untouched.
  ASSERT_EQ(get("cuMemcpyHtoD", &fn, 12000, 0, &status), CUDA_SUCCESS);
  EXPECT_EQ(fn, ::dlsym(l.fake, "cuMemcpyHtoD_v2"));
  // The legacy 32-bit ABI is not hooked either: it is returned as the driver gives it (nullptr
  // here, since the fake does not export it) and never mapped onto the 64-bit hook.
  fn = nullptr;
  CUresult rc = get("cuMemAlloc", &fn, 3000, 0, &status);
  EXPECT_NE(fn, ::dlsym(l.shim, "cuMemAlloc_v2"));
  (void)rc;
  // Errors and query results of the driver pass through.
  EXPECT_EQ(get("cuMemAllocAsync", &fn, 11000, 0, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(get("cuNoSuchThing", &fn, 12000, 0, &status), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

TEST(VgpuInprocTest, ConcurrentThreadsAllocateExactlyTheQuota) {
  auto alloc = hook<Alloc>("cuMemAlloc_v2");
  auto free_fn = hook<Free>("cuMemFree_v2");
  const std::uint64_t base = used();
  ASSERT_EQ(base, 16 * kMiB);  // the context
  std::atomic<int> ok{0};
  std::vector<std::vector<CUdeviceptr>> ptrs(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      loaded();
      for (;;) {
        CUdeviceptr p = 0;
        if (alloc(&p, kMiB) != CUDA_SUCCESS) break;
        ptrs[t].push_back(p);
        ok.fetch_add(1);
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(ok.load(), static_cast<int>((kQuota - base) / kMiB));
  EXPECT_EQ(used(), kQuota);
  CUdeviceptr extra = 0;
  EXPECT_EQ(alloc(&extra, 1), CUDA_ERROR_OUT_OF_MEMORY);
  auto info = hook<GetInfo>("cuMemGetInfo_v2");
  size_t free_b = 1;
  size_t total_b = 0;
  ASSERT_EQ(info(&free_b, &total_b), CUDA_SUCCESS);
  EXPECT_EQ(total_b, kQuota);
  EXPECT_EQ(free_b, 0u);
  for (auto& v : ptrs) {
    for (CUdeviceptr p : v)
      ASSERT_EQ(free_fn(p), CUDA_SUCCESS);
  }
  EXPECT_EQ(used(), base);
}

TEST(VgpuInprocTest, FailedDriverCallsRollTheReservationBack) {
  auto free_fn = hook<Free>("cuMemFree_v2");
  const std::uint64_t base = used();
  // A free of an unknown pointer fails in the driver and changes nothing.
  EXPECT_NE(free_fn(0xdead0000), CUDA_SUCCESS);
  EXPECT_EQ(used(), base);
  // A pitch allocation the driver rejects (bad element size) is rolled back.
  auto pitch =
      hook<CUresult (*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned)>("cuMemAllocPitch_v2");
  CUdeviceptr p = 0;
  size_t pitch_bytes = 0;
  EXPECT_EQ(pitch(&p, &pitch_bytes, 100, 100, 3), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(used(), base);
}

TEST(VgpuInprocTest, ForkedChildGetsItsOwnSlotAndReturnsItsMemory) {
  auto alloc = hook<Alloc>("cuMemAlloc_v2");
  const std::uint64_t base = used();
  pid_t pid = ::fork();
  if (pid == 0) {
    loaded();
    CUdeviceptr p = 0;
    const bool ok = alloc(&p, 8 * kMiB) == CUDA_SUCCESS && used() == base + 8 * kMiB;
    ::_exit(ok ? 0 : 1);  // exits without freeing: the slot is reaped
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  auto r = ShmRegion::open(loaded().region);
  ASSERT_TRUE(r.ok());
  r->reapDead();
  EXPECT_EQ(r->usedBytes(), base);
}

}  // namespace
}  // namespace gpool::vgpu
