#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "common/clock.h"
#include "gpu/backend_factory.h"
#include "gpu/fake_backend.h"
#include "gpu/nvml_backend.h"
#include "gpu/nvml_library.h"
#include "gpu_test_util.h"

namespace gpool::gpu {
namespace {

using std::chrono::seconds;
using testing::fixturePath;

// The fake library's control functions (see fake_nvml_inventory.cc).
struct FakeNvml {
  void* handle = nullptr;
  void (*useFixture)(const char*) = nullptr;
  int (*advance)(long long) = nullptr;
  void (*failNext)(const char*, int) = nullptr;
  int (*startProcess)(unsigned int, int, unsigned long long) = nullptr;
  int (*initCount)() = nullptr;

  explicit FakeNvml(const char* path) {
    handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) return;
    useFixture = reinterpret_cast<decltype(useFixture)>(::dlsym(handle, "gpoolFakeNvmlUseFixture"));
    advance = reinterpret_cast<decltype(advance)>(::dlsym(handle, "gpoolFakeNvmlAdvance"));
    failNext = reinterpret_cast<decltype(failNext)>(::dlsym(handle, "gpoolFakeNvmlFailNext"));
    startProcess =
        reinterpret_cast<decltype(startProcess)>(::dlsym(handle, "gpoolFakeNvmlStartProcess"));
    initCount = reinterpret_cast<decltype(initCount)>(::dlsym(handle, "gpoolFakeNvmlInitCount"));
  }
  ~FakeNvml() {
    if (handle) ::dlclose(handle);
  }
  bool ok() const {
    return handle && useFixture && advance && failNext && startProcess && initCount;
  }
};

// Runs with both builds of the fake: current symbol names and legacy ones.
class NvmlBackendTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ::unsetenv("GPOOL_FAKE_NVML_FIXTURE");
    fake_ = std::make_unique<FakeNvml>(GetParam());
    ASSERT_TRUE(fake_->ok()) << "cannot load the fake NVML at " << GetParam() << ": "
                             << ::dlerror();
  }
  void TearDown() override {
    backend_.reset();
    library_.reset();
    if (fake_ && fake_->ok()) {
      EXPECT_EQ(fake_->initCount(), 0) << "nvmlInit without nvmlShutdown";
      fake_->useFixture("");
    }
  }

  // Loads NVML (the fake) playing `fixture`.
  void start(const std::string& fixture) {
    fake_->useFixture(fixturePath(fixture).c_str());
    library_ = std::make_unique<NvmlLibrary>(GetParam());
    auto backend = NvmlBackend::create(*library_, clock_);
    ASSERT_TRUE(backend.ok()) << backend.status().toString();
    backend_ = std::move(backend).value();
  }

  SimClock clock_;
  std::unique_ptr<FakeNvml> fake_;
  std::unique_ptr<NvmlLibrary> library_;
  std::unique_ptr<NvmlBackend> backend_;
};

bool isLegacy(const char* path) {
  return std::string(path) == GPOOL_FAKE_NVML_LEGACY_LIB;
}

TEST_P(NvmlBackendTest, InventoryMatchesTheFixtureForEveryShippedFixture) {
  for (const char* name : {"8x-a100-sxm4-80gb-nvlink.json", "8x-rtx-a6000-pcie-pairs.json",
                           "2x-h100-mig.json", "4x-a100-faults.json"}) {
    SCOPED_TRACE(name);
    start(name);
    ASSERT_NE(backend_, nullptr);
    auto nvml = backend_->inventory();
    ASSERT_TRUE(nvml.ok()) << nvml.status().toString();
    SimClock clock;
    auto fake = FakeBackend::fromFile(fixturePath(name), clock);
    ASSERT_TRUE(fake.ok());
    Inventory expected = *(*fake)->inventory();
    EXPECT_EQ(nvml->backend, "nvml");
    EXPECT_FALSE(nvml->simulated) << "NvmlBackend reports what the driver says";
    expected.backend = "nvml";
    expected.simulated = false;
    for (GpuInfo& gpu : expected.gpus)
      gpu.simulated = false;
    EXPECT_EQ(nvml->driver_version, expected.driver_version);
    EXPECT_EQ(nvml->cuda_driver_version, expected.cuda_driver_version);
    ASSERT_EQ(nvml->gpus.size(), expected.gpus.size());
    for (size_t i = 0; i < expected.gpus.size(); ++i) {
      EXPECT_EQ(nvml->gpus[i], expected.gpus[i]) << "GPU " << i;
    }
    ASSERT_EQ(nvml->links.size(), expected.links.size());
    for (size_t i = 0; i < expected.links.size(); ++i) {
      EXPECT_EQ(nvml->links[i], expected.links[i])
          << nvml->links[i].gpu_a << "-" << nvml->links[i].gpu_b << ": "
          << topologyLevelName(nvml->links[i].level, nvml->links[i].nvlink_count) << " vs "
          << topologyLevelName(expected.links[i].level, expected.links[i].nvlink_count);
    }
    backend_.reset();
    library_.reset();
  }
}

TEST_P(NvmlBackendTest, TelemetryFollowsTheScriptLikeTheFakeBackend) {
  start("4x-a100-faults.json");
  ASSERT_NE(backend_, nullptr);
  EXPECT_TRUE(backend_->xidEventsAvailable());
  SimClock clock;
  auto fake = FakeBackend::fromFile(fixturePath("4x-a100-faults.json"), clock);
  ASSERT_TRUE(fake.ok());
  bool saw_xid = false;
  for (int step = 0; step <= 10; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    auto nvml = backend_->sample();
    ASSERT_TRUE(nvml.ok()) << nvml.status().toString();
    TelemetrySample expected = *(*fake)->sample();
    EXPECT_EQ(nvml->taken_at, clock_.now());
    EXPECT_FALSE(nvml->simulated);
    ASSERT_EQ(nvml->gpus.size(), expected.gpus.size());
    for (size_t i = 0; i < expected.gpus.size(); ++i) {
      EXPECT_EQ(nvml->gpus[i], expected.gpus[i]) << "GPU " << expected.gpus[i].index;
      saw_xid = saw_xid || !nvml->gpus[i].xid_errors.empty();
    }
    clock.advance(seconds(1));
    ASSERT_EQ(fake_->advance(1'000'000), 0);
  }
  EXPECT_TRUE(saw_xid) << "XID 79 at step 4 must arrive through the event set";
}

TEST_P(NvmlBackendTest, ErrorsNameTheGpuAndTheNvmlCall) {
  start("8x-rtx-a6000-pcie-pairs.json");
  ASSERT_NE(backend_, nullptr);
  auto first = backend_->sample();
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->gpus[0].ecc_corrected.has_value()) << "ECC is off: not supported";

  fake_->failNext("nvmlDeviceGetTemperature", NVML_ERROR_UNKNOWN);
  auto failed = backend_->sample();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), StatusCode::kInternal);
  EXPECT_EQ(failed.status().message(),
            "GPU 0 (" + first->gpus[0].uuid +
                "): nvmlDeviceGetTemperature failed: Unknown Error (NVML error 999)");
  EXPECT_TRUE(backend_->sample().ok()) << "one failure does not break the backend";

  fake_->failNext("nvmlDeviceGetPowerUsage", NVML_ERROR_NOT_SUPPORTED);
  auto partial = backend_->sample();
  ASSERT_TRUE(partial.ok()) << partial.status().toString();
  EXPECT_EQ(partial->gpus[0].power_w, 0);
  EXPECT_DOUBLE_EQ(partial->gpus[1].power_w, 22);

  fake_->failNext("nvmlSystemGetDriverVersion", NVML_ERROR_NO_PERMISSION);
  auto inv = backend_->inventory();
  EXPECT_EQ(inv.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(inv.status().message(),
            "nvmlSystemGetDriverVersion failed: Insufficient Permissions (NVML error 4)");
}

TEST_P(NvmlBackendTest, AGpuLostMidInventoryIsLeftOut) {
  start("8x-rtx-a6000-pcie-pairs.json");
  ASSERT_NE(backend_, nullptr);
  fake_->failNext("nvmlDeviceGetName", NVML_ERROR_GPU_IS_LOST);  // GPU 0 is gone
  auto inv = backend_->inventory();
  ASSERT_TRUE(inv.ok()) << inv.status().toString();
  ASSERT_EQ(inv->gpus.size(), 7u);
  EXPECT_EQ(inv->gpus[0].index, 1u);
  ASSERT_EQ(inv->links.size(), 21u);
  EXPECT_EQ(inv->linkBetween(2, 3)->level, TopologyLevel::kNvLink);
  EXPECT_EQ(inv->linkBetween(1, 2)->level, TopologyLevel::kNode);
  EXPECT_EQ(inv->linkBetween(0, 1), nullptr);
  fake_->failNext("nvmlDeviceGetTemperature", NVML_ERROR_GPU_IS_LOST);
  auto sample = backend_->sample();
  ASSERT_TRUE(sample.ok()) << sample.status().toString();
  EXPECT_EQ(sample->gpus.size(), 7u);
  EXPECT_EQ(sample->gpus[0].index, 1u);
}

TEST_P(NvmlBackendTest, LongProcessListsAreReadWhole) {
  start("8x-a100-sxm4-80gb-nvlink.json");
  ASSERT_NE(backend_, nullptr);
  for (int pid = 1000; pid < 1040; ++pid)
    ASSERT_EQ(fake_->startProcess(2, pid, 10), 0);
  auto sample = backend_->sample();
  ASSERT_TRUE(sample.ok()) << sample.status().toString();
  ASSERT_EQ(sample->gpus[2].processes.size(), 40u);
  EXPECT_EQ(sample->gpus[2].processes[39], (GpuProcess{1039, 10}));
  EXPECT_EQ(sample->gpus[2].memory_used_mib, 400u);
  auto listed = backend_->processes(sample->gpus[2].uuid);
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 40u);
  EXPECT_EQ(backend_->processes("GPU-none").status().code(), StatusCode::kNotFound);
}

TEST_P(NvmlBackendTest, KillProcessSignalsOnlyAProcessListedOnThatGpu) {
  start("8x-a100-sxm4-80gb-nvlink.json");
  ASSERT_NE(backend_, nullptr);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_EQ(fake_->startProcess(1, child, 512), 0);
  auto inv = backend_->inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(backend_->killProcess(inv->gpus[0].uuid, child).code(), StatusCode::kNotFound)
      << "the process is on GPU 1, not GPU 0";
  ASSERT_TRUE(backend_->killProcess(inv->gpus[1].uuid, child).isOk());
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

TEST_P(NvmlBackendTest, SymbolTableUsesVersionedNamesAndFallsBackExplicitly) {
  start("2x-h100-mig.json");
  ASSERT_NE(backend_, nullptr);
  std::map<std::string, std::string> resolved(library_->resolvedSymbols().begin(),
                                              library_->resolvedSymbols().end());
  if (isLegacy(GetParam())) {
    EXPECT_EQ(resolved["nvmlInit_v2"], "nvmlInit");
    EXPECT_EQ(resolved["nvmlDeviceGetCount_v2"], "nvmlDeviceGetCount");
    EXPECT_EQ(resolved["nvmlDeviceGetPciInfo_v3"], "nvmlDeviceGetPciInfo_v2");
    EXPECT_EQ(resolved["nvmlDeviceGetComputeRunningProcesses_v3"], "");
    EXPECT_EQ(resolved["nvmlDeviceGetComputeRunningProcesses"],
              "nvmlDeviceGetComputeRunningProcesses");
    EXPECT_EQ(resolved["nvmlEventSetWait_v2"], "nvmlEventSetWait");
    EXPECT_EQ(resolved["nvmlDeviceGetNvLinkRemoteDeviceType"], "");
  } else {
    EXPECT_EQ(resolved["nvmlInit_v2"], "nvmlInit_v2");
    EXPECT_EQ(resolved["nvmlDeviceGetCount_v2"], "nvmlDeviceGetCount_v2");
    EXPECT_EQ(resolved["nvmlDeviceGetPciInfo_v3"], "nvmlDeviceGetPciInfo_v3");
    EXPECT_EQ(resolved["nvmlDeviceGetComputeRunningProcesses_v3"],
              "nvmlDeviceGetComputeRunningProcesses_v3");
    EXPECT_EQ(resolved["nvmlEventSetWait_v2"], "nvmlEventSetWait_v2");
  }
}

TEST_P(NvmlBackendTest, InitFailureIsCachedAndExplained) {
  // No fixture: the fake answers nvmlInit like a machine whose driver is not loaded.
  NvmlLibrary library(GetParam());
  Status first = library.load();
  EXPECT_EQ(first.code(), StatusCode::kUnavailable);
  EXPECT_NE(first.message().find("failed: Driver Not Loaded (NVML error 9)"), std::string::npos)
      << first.message();
  fake_->useFixture(fixturePath("2x-h100-mig.json").c_str());
  EXPECT_EQ(library.load(), first) << "the first error is cached, NVML is not re-initialised";
  EXPECT_FALSE(library.isAvailable());
  auto backend = NvmlBackend::create(library, clock_);
  EXPECT_EQ(backend.status(), first);
}

INSTANTIATE_TEST_SUITE_P(FakeNvml, NvmlBackendTest,
                         ::testing::Values(GPOOL_FAKE_NVML_LIB, GPOOL_FAKE_NVML_LEGACY_LIB),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                           return std::string(isLegacy(param_info.param) ? "Legacy" : "Current");
                         });

TEST(NvmlLibraryTest, MissingLibraryIsUnavailableWithTheReason) {
  NvmlLibrary library("/nonexistent/libnvidia-ml.so.1");
  Status status = library.load();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("cannot load NVML from '/nonexistent/libnvidia-ml.so.1'"),
            std::string::npos)
      << status.message();
  EXPECT_FALSE(library.isAvailable());
  EXPECT_EQ(library.load(), status);
  SimClock clock;
  EXPECT_FALSE(NvmlBackend::create(library, clock).ok());
}

TEST(NvmlLibraryTest, ReturnCodesMapToStatusCodes) {
  EXPECT_EQ(nvmlStatusCode(NVML_SUCCESS), StatusCode::kOk);
  EXPECT_EQ(nvmlStatusCode(NVML_ERROR_NOT_SUPPORTED), StatusCode::kUnimplemented);
  EXPECT_EQ(nvmlStatusCode(NVML_ERROR_NO_PERMISSION), StatusCode::kPermissionDenied);
  EXPECT_EQ(nvmlStatusCode(NVML_ERROR_GPU_IS_LOST), StatusCode::kUnavailable);
  EXPECT_EQ(nvmlStatusCode(NVML_ERROR_TIMEOUT), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(nvmlStatusCode(NVML_ERROR_DRIVER_NOT_LOADED), StatusCode::kUnavailable);
  EXPECT_EQ(nvmlStatusCode(NVML_ERROR_MEMORY), StatusCode::kResourceExhausted);
  EXPECT_EQ(nvmlStatusCode(NVML_ERROR_UNKNOWN), StatusCode::kInternal);
  EXPECT_EQ(nvmlStatusCode(static_cast<nvmlReturn_t>(12345)), StatusCode::kInternal);
}

}  // namespace
}  // namespace gpool::gpu

namespace gpool::gpu {
namespace {

TEST(NvmlFactoryTest, NonDefaultLibraryIsOwnedByTheBackend) {
  FakeNvml fake(GPOOL_FAKE_NVML_LIB);
  ASSERT_TRUE(fake.ok());
  fake.useFixture(testing::fixturePath("8x-a100-sxm4-80gb-nvlink.json").c_str());
  SimClock clock;
  GpuBackendOptions options;
  options.nvml_library = GPOOL_FAKE_NVML_LIB;
  {
    auto backend = makeGpuBackend(options, clock);
    ASSERT_TRUE(backend.ok()) << backend.status().toString();
    EXPECT_EQ((*backend)->name(), "nvml");
    EXPECT_FALSE((*backend)->simulated());
    EXPECT_EQ((*backend)->inventory()->gpus.size(), 8u);
    EXPECT_EQ(fake.initCount(), 1);
  }
  EXPECT_EQ(fake.initCount(), 0) << "destroying the backend shuts its own library down";
  fake.useFixture("");
}

}  // namespace
}  // namespace gpool::gpu
