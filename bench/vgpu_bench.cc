// vgpu-bench: the cost the interposer adds per intercepted call, against calling the fake driver
// directly, in the same process and run. Both libraries are dlopen'ed locally (no LD_PRELOAD): the
// direct pointers come from the fake libcuda.so.1, the hooked ones from libgpool-vgpu.so, which
// forwards to that same fake. The task has a region with a large quota and a full compute share,
// so the measured path is the hot path (quota ledger and limiter checks, no throttling).
// Prints "<call> direct <ns> interposed <ns> added <ns> target <ns>" lines.

#include <cuda.h>
#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "vgpu/shm_region.h"

namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
double timeRun(int n, F& body) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i)
    body();
  const auto t1 = Clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / n;
}

// Best of 31 short runs each, direct and interposed alternating, so that drift and other load on
// the machine hit both alike and the minimum of each is a clean run.
template <typename D, typename H>
std::pair<double, double> nsPerCall(int n, D&& direct, H&& hooked) {
  double best_d = 1e18;
  double best_h = 1e18;
  for (int r = 0; r < 31; ++r) {
    best_d = std::min(best_d, timeRun(n, direct));
    best_h = std::min(best_h, timeRun(n, hooked));
  }
  return {best_d, best_h};
}

void report(const char* name, double direct, double hooked, double target) {
  std::printf("%-24s direct %8.1f ns  interposed %8.1f ns  added %7.1f ns  target < %.0f ns%s\n",
              name, direct, hooked, hooked - direct, target,
              hooked - direct < target ? "" : "  (MISSED)");
}

template <typename T>
T sym(void* lib, const char* name) {
  void* p = ::dlsym(lib, name);
  if (p == nullptr) {
    std::fprintf(stderr, "vgpu_bench: %s missing: %s\n", name, ::dlerror());
    std::exit(1);
  }
  return reinterpret_cast<T>(p);
}

}  // namespace

int main() {
  // The fake backs device memory with malloc; keep glibc from trimming or mmapping those blocks
  // so that heap-layout luck does not add system calls to one side of the comparison.
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  ::mallopt(M_MMAP_THRESHOLD, 1 << 30);
  char dir_tmpl[] = "/tmp/gpool-vgpu-bench-XXXXXX";
  if (::mkdtemp(dir_tmpl) == nullptr) return 1;
  const std::string dir = dir_tmpl;
  const std::string region_path = dir + "/region";
  gpool::vgpu::RegionConfig cfg;
  cfg.quota_bytes = 1ULL << 40;
  cfg.share_permille = 1000;
  auto region = gpool::vgpu::ShmRegion::create(region_path, cfg);
  if (!region.ok()) {
    std::fprintf(stderr, "vgpu_bench: %s\n", region.status().message().c_str());
    return 1;
  }
  ::setenv("GPOOL_FAKE_GPU_MEMORY_MIB", "1048576", 1);
  ::setenv("GPOOL_VGPU_REGIONS", region_path.c_str(), 1);
  ::setenv("GPOOL_VGPU_LIBCUDA", GPOOL_FAKE_LIBCUDA, 1);
  ::setenv("GPOOL_VGPU_LIBNVML", GPOOL_FAKE_LIBNVML, 1);

  void* fake = ::dlopen(GPOOL_FAKE_LIBCUDA, RTLD_NOW | RTLD_LOCAL);
  void* shim = ::dlopen(GPOOL_VGPU_LIB, RTLD_NOW | RTLD_LOCAL);
  if (fake == nullptr || shim == nullptr) {
    std::fprintf(stderr, "vgpu_bench: dlopen failed: %s\n", ::dlerror());
    return 1;
  }
  using Init = CUresult (*)(unsigned);
  using Retain = CUresult (*)(CUcontext*, CUdevice);
  using SetCurrent = CUresult (*)(CUcontext);
  using LoadData = CUresult (*)(CUmodule*, const void*);
  using GetFunction = CUresult (*)(CUfunction*, CUmodule, const char*);
  using Launch = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
  using Alloc = CUresult (*)(CUdeviceptr*, size_t);
  using Free = CUresult (*)(CUdeviceptr);
  using GetInfo = CUresult (*)(size_t*, size_t*);

  sym<Init>(fake, "cuInit")(0);
  CUcontext ctx = nullptr;
  sym<Retain>(shim, "cuDevicePrimaryCtxRetain")(&ctx, 0);
  sym<SetCurrent>(fake, "cuCtxSetCurrent")(ctx);
  CUmodule mod = nullptr;
  sym<LoadData>(fake, "cuModuleLoadData")(&mod, "simulated");
  CUfunction fn = nullptr;
  sym<GetFunction>(fake, "cuModuleGetFunction")(&fn, mod, "busy");

  auto launch_direct = sym<Launch>(fake, "cuLaunchKernel");
  auto launch_hooked = sym<Launch>(shim, "cuLaunchKernel");
  auto alloc_direct = sym<Alloc>(fake, "cuMemAlloc_v2");
  auto alloc_hooked = sym<Alloc>(shim, "cuMemAlloc_v2");
  auto free_direct = sym<Free>(fake, "cuMemFree_v2");
  auto free_hooked = sym<Free>(shim, "cuMemFree_v2");
  auto info_direct = sym<GetInfo>(fake, "cuMemGetInfo_v2");
  auto info_hooked = sym<GetInfo>(shim, "cuMemGetInfo_v2");

  std::uint32_t zero_us = 0;  // zero-length kernels: the fake's launch cost is just bookkeeping
  void* params[] = {&zero_us};
  constexpr int kLaunches = 50000;
  constexpr int kAllocs = 20000;
  constexpr int kQueries = 50000;

  std::printf("vgpu-bench: per-call cost, fake driver direct vs through libgpool-vgpu.so\n");
  const auto [ld, lh] = nsPerCall(
      kLaunches, [&] { launch_direct(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr); },
      [&] { launch_hooked(fn, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr); });
  report("cuLaunchKernel", ld, lh, 50);

  CUdeviceptr p = 0;
  const auto [ad, ah] = nsPerCall(
      kAllocs,
      [&] {
        alloc_direct(&p, 64 << 10);
        free_direct(p);
      },
      [&] {
        alloc_hooked(&p, 64 << 10);
        free_hooked(p);
      });
  report("cuMemAlloc+cuMemFree", ad, ah, 1000);

  size_t free_b = 0;
  size_t total_b = 0;
  const auto [qd, qh] = nsPerCall(
      kQueries, [&] { info_direct(&free_b, &total_b); }, [&] { info_hooked(&free_b, &total_b); });
  report("cuMemGetInfo", qd, qh, 1000);

  // Where the allocation overhead goes: the shared ledger alone (robust-mutex reserve+release).
  auto ledger = gpool::vgpu::ShmRegion::open(region_path);
  if (ledger.ok()) {
    const int slot = ledger->attach(static_cast<std::int32_t>(::getpid()));
    auto noop = [] {};
    const auto [base, lr] = nsPerCall(kAllocs, noop, [&] {
      (void)ledger->reserve(slot, 64 << 10);
      ledger->release(slot, 64 << 10);
    });
    std::printf("%-24s %8.1f ns (part of the interposed allocation above)\n",
                "ledger reserve+release", lr - base);
    ledger->detach(slot);
  }
  std::printf("ratios: launch %.2fx, alloc+free %.2fx, query %.2fx of direct\n", lh / ld, ah / ad,
              qh / qd);
  ::unlink(region_path.c_str());
  ::rmdir(dir.c_str());
  return 0;
}
