// Driver-API program for tests/gpu/check_vgpu.sh (real NVIDIA GPU only). Links libcuda.so.1; runs
// a PTX spin kernel JIT-compiled by the driver, so it needs no nvcc.
//   vgpu_check_driver oom CHUNK_MIB        allocate until OUT_OF_MEMORY, print the figures
//   vgpu_check_driver spin KERNEL_MS SECS  launch spin kernels for SECS, print kernels/s
//   vgpu_check_driver overhead N           ns per launch, per alloc+free, per cuMemGetInfo

#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

const char* kPtx = R"(
.version 7.0
.target sm_75
.address_size 64
.visible .entry spin(.param .u64 cycles)
{
  .reg .u64 %rd<5>;
  .reg .pred %p;
  ld.param.u64 %rd1, [cycles];
  mov.u64 %rd2, %clock64;
LOOP:
  mov.u64 %rd3, %clock64;
  sub.u64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p, %rd4, %rd1;
  @%p bra LOOP;
  ret;
}
)";

#define CHECK(call)                                                        \
  do {                                                                     \
    CUresult rc_ = (call);                                                 \
    if (rc_ != CUDA_SUCCESS) {                                             \
      const char* name_ = nullptr;                                         \
      cuGetErrorName(rc_, &name_);                                         \
      std::fprintf(stderr, "%s failed: %s\n", #call, name_ ? name_ : "?"); \
      std::exit(2);                                                        \
    }                                                                      \
  } while (0)

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

CUfunction g_spin = nullptr;

void setup() {
  CHECK(cuInit(0));
  CUdevice dev = 0;
  CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx = nullptr;
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  CUmodule mod = nullptr;
  CHECK(cuModuleLoadData(&mod, kPtx));
  CHECK(cuModuleGetFunction(&g_spin, mod, "spin"));
}

void launch(unsigned long long cycles, CUstream s) {
  void* params[] = {&cycles};
  CHECK(cuLaunchKernel(g_spin, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
}

int oom(std::size_t chunk_mib) {
  setup();
  size_t free_b = 0;
  size_t total_b = 0;
  CHECK(cuMemGetInfo(&free_b, &total_b));
  std::printf("mem_get_info_total_mib %zu\nmem_get_info_free_mib %zu\n", total_b >> 20,
              free_b >> 20);
  size_t dev_total = 0;
  CHECK(cuDeviceTotalMem(&dev_total, 0));
  std::printf("device_total_mem_mib %zu\n", dev_total >> 20);
  std::vector<CUdeviceptr> ptrs;
  CUresult rc = CUDA_SUCCESS;
  for (;;) {
    CUdeviceptr p = 0;
    rc = cuMemAlloc(&p, chunk_mib << 20);
    if (rc != CUDA_SUCCESS) break;
    ptrs.push_back(p);
  }
  const char* name = nullptr;
  cuGetErrorName(rc, &name);
  std::printf("allocated_mib %zu\nstop_error %s\n", ptrs.size() * chunk_mib, name ? name : "?");
  for (CUdeviceptr p : ptrs)
    CHECK(cuMemFree(p));
  return rc == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
}

unsigned long long cyclesPerMs() {
  // Calibrate: one kernel of 20M cycles, timed on the host.
  const unsigned long long n = 20000000ULL;
  launch(n, nullptr);
  CHECK(cuCtxSynchronize());
  const double t0 = seconds();
  launch(n, nullptr);
  CHECK(cuCtxSynchronize());
  const double ms = (seconds() - t0) * 1000.0;
  return static_cast<unsigned long long>(static_cast<double>(n) / ms);
}

int spin(double kernel_ms, double secs) {
  setup();
  const unsigned long long cycles =
      static_cast<unsigned long long>(static_cast<double>(cyclesPerMs()) * kernel_ms);
  CUstream s[2];
  CHECK(cuStreamCreate(&s[0], 0));
  CHECK(cuStreamCreate(&s[1], 0));
  const double t0 = seconds();
  long n = 0;
  while (seconds() - t0 < secs) {
    launch(cycles, s[n % 2]);
    CHECK(cuStreamSynchronize(s[(n + 1) % 2]));
    ++n;
  }
  CHECK(cuCtxSynchronize());
  const double elapsed = seconds() - t0;
  std::printf("kernels %ld\nseconds %.2f\nkernels_per_s %.1f\nbusy_fraction_if_alone %.3f\n", n,
              elapsed, n / elapsed, n * kernel_ms / 1000.0 / elapsed);
  return 0;
}

int overhead(int n) {
  setup();
  CUstream s = nullptr;
  CHECK(cuStreamCreate(&s, 0));
  launch(0, s);
  CHECK(cuStreamSynchronize(s));
  double t0 = seconds();
  for (int i = 0; i < n; ++i)
    launch(0, s);
  const double launch_ns = (seconds() - t0) * 1e9 / n;
  CHECK(cuStreamSynchronize(s));
  t0 = seconds();
  for (int i = 0; i < n / 10; ++i) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc(&p, 1 << 20));
    CHECK(cuMemFree(p));
  }
  const double alloc_ns = (seconds() - t0) * 1e9 / (n / 10);
  size_t f = 0;
  size_t t = 0;
  t0 = seconds();
  for (int i = 0; i < n; ++i)
    CHECK(cuMemGetInfo(&f, &t));
  const double query_ns = (seconds() - t0) * 1e9 / n;
  std::printf("launch_ns %.1f\nalloc_free_ns %.1f\nmem_get_info_ns %.1f\n", launch_ns, alloc_ns,
              query_ns);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "oom" && argc > 2) return oom(std::strtoull(argv[2], nullptr, 10));
  if (mode == "spin" && argc > 3) return spin(std::atof(argv[2]), std::atof(argv[3]));
  if (mode == "overhead" && argc > 2) return overhead(std::atoi(argv[2]));
  std::fprintf(stderr, "usage: vgpu_check_driver oom MIB | spin MS SECS | overhead N\n");
  return 2;
}
