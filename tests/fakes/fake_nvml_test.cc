// The merged fake NVML over the shared fake-GPU state: its device table is the state's (what the
// fake libcuda serves), and memory and processes follow the state, alone or on top of a gpool
// fixture. Each TEST runs in its own process (gtest_discover_tests), so the environment and the
// state file are private to it.

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "common/clock.h"
#include "fakes/common/fake_gpu_state.h"
#include "gpu/fake_backend.h"
#include "gpu/nvml_api.h"

namespace gpool::fakes {
namespace {

constexpr unsigned long long kMiB = 1024ull * 1024;

// The fake's entry points, resolved from its file.
struct Nvml {
  void* handle = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handleByIndex)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*processes)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_t*) = nullptr;
  void (*useFixture)(const char*) = nullptr;

  Nvml() {
    handle = ::dlopen(GPOOL_FAKE_NVML_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return;
    resolve(init, "nvmlInit_v2");
    resolve(shutdown, "nvmlShutdown");
    resolve(count, "nvmlDeviceGetCount_v2");
    resolve(handleByIndex, "nvmlDeviceGetHandleByIndex_v2");
    resolve(uuid, "nvmlDeviceGetUUID");
    resolve(memory, "nvmlDeviceGetMemoryInfo");
    resolve(processes, "nvmlDeviceGetComputeRunningProcesses_v3");
    resolve(useFixture, "gpoolFakeNvmlUseFixture");
  }
  ~Nvml() {
    if (handle) ::dlclose(handle);
  }
  template <typename F>
  void resolve(F& f, const char* name) {
    f = reinterpret_cast<F>(::dlsym(handle, name));
  }
  bool ok() const {
    return handle && init && shutdown && count && handleByIndex && uuid && memory && processes &&
           useFixture;
  }
  nvmlDevice_t device(unsigned int index) const {
    nvmlDevice_t d = nullptr;
    EXPECT_EQ(handleByIndex(index, &d), NVML_SUCCESS);
    return d;
  }
};

// Gives this process's pid `bytes` of device memory on `device` in the shared state, as the
// fake libcuda does for an allocation.
void allocate(int device, unsigned long long bytes) {
  FakeLock lock;
  FakeProc* proc = fakeProc(device, static_cast<std::int32_t>(::getpid()));
  ASSERT_NE(proc, nullptr);
  proc->used_bytes += bytes;
  fakeState()->rt[device].used_bytes += bytes;
}

class FakeNvmlSharedStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gpool-fake-nvml-XXXXXX";
    ASSERT_NE(::mkdtemp(dir), nullptr);
    dir_ = dir;
    ::setenv("GPOOL_FAKE_GPU_STATE", (dir_ + "/state").c_str(), 1);
    ::setenv("GPOOL_FAKE_GPU_COUNT", "2", 1);
    ::setenv("GPOOL_FAKE_GPU_MEMORY_MIB", "4096", 1);
    ::unsetenv("GPOOL_FAKE_GPU_FIXTURE");
    ::unsetenv("GPOOL_FAKE_NVML_FIXTURE");
    ASSERT_TRUE(nvml_.ok()) << ::dlerror();
  }
  void TearDown() override {
    ::unlink((dir_ + "/state").c_str());
    ::rmdir(dir_.c_str());
  }

  std::string dir_;
  Nvml nvml_;
};

TEST_F(FakeNvmlSharedStateTest, DeviceTableIsTheSharedState) {
  ASSERT_EQ(nvml_.init(), NVML_SUCCESS);
  unsigned int count = 0;
  ASSERT_EQ(nvml_.count(&count), NVML_SUCCESS);
  ASSERT_EQ(count, 2u);
  for (unsigned int i = 0; i < count; ++i) {
    char uuid[96] = {};
    ASSERT_EQ(nvml_.uuid(nvml_.device(i), uuid, sizeof(uuid)), NVML_SUCCESS);
    EXPECT_STREQ(uuid, fakeState()->devices[i].uuid);
    nvmlMemory_t memory{};
    ASSERT_EQ(nvml_.memory(nvml_.device(i), &memory), NVML_SUCCESS);
    EXPECT_EQ(memory.total, 4096 * kMiB);
    EXPECT_EQ(memory.used, 0u);
  }
  EXPECT_EQ(nvml_.shutdown(), NVML_SUCCESS);
}

TEST_F(FakeNvmlSharedStateTest, MemoryAndProcessesFollowTheSharedState) {
  ASSERT_EQ(nvml_.init(), NVML_SUCCESS);
  allocate(1, 300 * kMiB);
  nvmlMemory_t memory{};
  ASSERT_EQ(nvml_.memory(nvml_.device(1), &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.used, 300 * kMiB);
  EXPECT_EQ(memory.free, (4096 - 300) * kMiB);
  ASSERT_EQ(nvml_.memory(nvml_.device(0), &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.used, 0u) << "the allocation is on GPU 1";

  nvmlProcessInfo_t infos[4] = {};
  unsigned int n = 4;
  ASSERT_EQ(nvml_.processes(nvml_.device(1), &n, infos), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(infos[0].pid, static_cast<unsigned int>(::getpid()));
  EXPECT_EQ(infos[0].usedGpuMemory, 300 * kMiB);
  n = 0;
  EXPECT_EQ(nvml_.processes(nvml_.device(1), &n, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(nvml_.shutdown(), NVML_SUCCESS);
}

TEST_F(FakeNvmlSharedStateTest, FixtureKeepsItsInventoryAndAddsTheSharedMemory) {
  const std::string fixture = GPOOL_SOURCE_DIR "/src/gpu/fixtures/2x-h100-mig.json";
  nvml_.useFixture(fixture.c_str());
  ASSERT_EQ(nvml_.init(), NVML_SUCCESS);
  SimClock clock;
  auto backend = gpu::FakeBackend::fromFile(fixture, clock);
  ASSERT_TRUE(backend.ok());
  const auto& spec = (*backend)->fixture().gpus[0];
  const auto sample = (*backend)->sample();
  ASSERT_TRUE(sample.ok());
  const unsigned long long fixture_used = sample->gpus[0].memory_used_mib * kMiB;

  char uuid[96] = {};
  ASSERT_EQ(nvml_.uuid(nvml_.device(0), uuid, sizeof(uuid)), NVML_SUCCESS);
  EXPECT_EQ(uuid, spec.uuid) << "the fixture, not the state, names the GPUs";
  allocate(0, 512 * kMiB);
  nvmlMemory_t memory{};
  ASSERT_EQ(nvml_.memory(nvml_.device(0), &memory), NVML_SUCCESS);
  EXPECT_EQ(memory.total, spec.memory_total_mib * kMiB);
  EXPECT_EQ(memory.used, fixture_used + 512 * kMiB);
  EXPECT_EQ(nvml_.shutdown(), NVML_SUCCESS);
  nvml_.useFixture("");
}

}  // namespace
}  // namespace gpool::fakes
