// gpu_telemetry_bench: what reporting the telemetry of 8 GPUs costs the agent.
//
// One "tick" is what the agent does every second: a telemetry sample of every GPU (with
// processes and XIDs), the health and stray-process checks, and the JSON it sends. Measured
// through the NVML backend over the fake libnvidia-ml (the real code path down to the C ABI)
// and, as the baseline, through the FakeBackend directly, both playing the same 8x A100
// fixture. Reports CPU time per tick, the share of one core at one tick per second (target
// < 1%), the ratio NVML/fake, and the process's resident memory (target < 50 MB).
//
// Usage: gpu_telemetry_bench [ticks]   (default 2000)

#include <dlfcn.h>
#include <time.h>

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "common/clock.h"
#include "gpu/fake_backend.h"
#include "gpu/gpu_json.h"
#include "gpu/health.h"
#include "gpu/nvml_backend.h"

namespace gpool::gpu {
namespace {

double cpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// "VmRSS" or "VmHWM" from /proc/self/status, in KiB.
long statusKiB(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field, 0) == 0)
      return std::strtol(line.c_str() + std::strlen(field) + 1, nullptr, 10);
  }
  return -1;
}

struct Result {
  double cpu_us_per_tick = 0;
  double cpu_us_per_sample = 0;
  size_t json_bytes = 0;
};

Result measure(GpuBackend& backend, int ticks) {
  HealthConfig health;
  health.expected_gpu_count = 8;
  GpuOwnership ownership;
  Result result;
  // Warm up caches and allocations, as a long-running agent would be.
  for (int i = 0; i < 50; ++i)
    benchmark::DoNotOptimize(backend.sample());

  double start = cpuSeconds();
  for (int i = 0; i < ticks; ++i)
    benchmark::DoNotOptimize(backend.sample());
  result.cpu_us_per_sample = (cpuSeconds() - start) * 1e6 / ticks;

  start = cpuSeconds();
  for (int i = 0; i < ticks; ++i) {
    auto sample = backend.sample();
    if (!sample.ok()) {
      std::fprintf(stderr, "sample failed: %s\n", sample.status().toString().c_str());
      std::exit(1);
    }
    auto findings = checkHealth(Inventory{}, *sample, HealthConfig{});
    auto strays = findStrayProcesses(*sample, ownership);
    std::string json = toJson(*sample).dump();
    result.json_bytes = json.size();
    benchmark::DoNotOptimize(findings);
    benchmark::DoNotOptimize(strays);
  }
  result.cpu_us_per_tick = (cpuSeconds() - start) * 1e6 / ticks;
  return result;
}

void print(const char* name, const Result& r) {
  std::printf(
      "%-34s %10.2f us/sample %10.2f us/tick %8.4f %% of a core at 1 tick/s  (%zu B JSON)\n", name,
      r.cpu_us_per_sample, r.cpu_us_per_tick, r.cpu_us_per_tick / 1e6 * 100, r.json_bytes);
}

int run(int ticks) {
  const std::string fixture =
      std::string(GPOOL_SOURCE_DIR) + "/src/gpu/fixtures/8x-a100-sxm4-80gb-nvlink.json";
  std::printf("gpu_telemetry_bench: %d ticks of 8 GPUs (fixture %s)\n", ticks, fixture.c_str());
  long rss_start = statusKiB("VmRSS:");

  SimClock clock;
  auto fake = FakeBackend::fromFile(fixture, clock);
  if (!fake.ok()) {
    std::fprintf(stderr, "%s\n", fake.status().toString().c_str());
    return 1;
  }
  // A few processes per GPU, as on a busy node.
  auto inv = (*fake)->inventory();
  for (size_t g = 0; g < inv->gpus.size(); ++g) {
    for (int p = 0; p < 3; ++p) {
      (void)(*fake)->startProcess(inv->gpus[g].uuid, 10000 + static_cast<int>(g) * 10 + p, 4096);
    }
  }
  Result baseline = measure(**fake, ticks);
  print("FakeBackend (baseline)", baseline);

#ifdef GPOOL_FAKE_NVML_LIB
  ::setenv("GPOOL_FAKE_NVML_FIXTURE", fixture.c_str(), 1);
  {
    NvmlLibrary library(GPOOL_FAKE_NVML_LIB);
    auto nvml = NvmlBackend::create(library);
    if (!nvml.ok()) {
      std::fprintf(stderr, "%s\n", nvml.status().toString().c_str());
      return 1;
    }
    void* control = ::dlopen(GPOOL_FAKE_NVML_LIB, RTLD_NOW | RTLD_NOLOAD);
    auto start_process = control ? reinterpret_cast<int (*)(unsigned int, int, unsigned long long)>(
                                       ::dlsym(control, "gpoolFakeNvmlStartProcess"))
                                 : nullptr;
    for (unsigned g = 0; start_process && g < 8; ++g) {
      for (int p = 0; p < 3; ++p)
        start_process(g, 10000 + static_cast<int>(g) * 10 + p, 4096);
    }
    Result r = measure(**nvml, ticks);
    print("NvmlBackend over fake libnvidia-ml", r);
    std::printf("ratio NVML/fake per tick: %.2fx\n", r.cpu_us_per_tick / baseline.cpu_us_per_tick);
    nvml->reset();
    if (control) ::dlclose(control);
  }
#else
  std::printf("NvmlBackend: skipped (built without the tests' fake libnvidia-ml)\n");
#endif
  std::printf("resident memory: %.1f MB now, %.1f MB peak, %.1f MB at start (target < 50 MB)\n",
              statusKiB("VmRSS:") / 1024.0, statusKiB("VmHWM:") / 1024.0, rss_start / 1024.0);
  return 0;
}

}  // namespace
}  // namespace gpool::gpu

int main(int argc, char** argv) {
  int ticks = argc > 1 ? std::atoi(argv[1]) : 2000;
  if (ticks <= 0) ticks = 2000;
  return gpool::gpu::run(ticks);
}
