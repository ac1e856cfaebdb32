// Integration tests: the interposer preloaded into vgpu_client processes that run against the
// fake libcuda/libnvidia-ml (one simulated GPU shared through a state file). Labelled
// no_sanitizer: LD_PRELOAD of our library into another program cannot run under ASan.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "vgpu/shim_test_util.h"

namespace gpool::vgpu {
namespace {

using testing::Client;
using testing::kContext;
using testing::kMethods;
using testing::kMiB;
using testing::VgpuShimTest;

TEST_F(VgpuShimTest, QueriesShowTheQuotaInEveryAccessPath) {
  const std::string r = region("q", 1024 * kMiB);
  for (const char* how : kMethods) {
    SCOPED_TRACE(how);
    Client c(env(r), {how, "info"});
    ASSERT_EQ(c.wait(), 0);
    EXPECT_EQ(c.num("total"), static_cast<long long>(1024 * kMiB));
    EXPECT_EQ(c.num("devtotal"), static_cast<long long>(1024 * kMiB));
    EXPECT_EQ(c.num("free"), static_cast<long long>(1024 * kMiB - kContext));
    EXPECT_EQ(c.num("nvml_total"), static_cast<long long>(1024 * kMiB));
    EXPECT_EQ(c.num("nvml_used"), static_cast<long long>(kContext));
    EXPECT_EQ(c.num("nvml2_total"), static_cast<long long>(1024 * kMiB));
  }
}

TEST_F(VgpuShimTest, QuotaBelowTheContextSizeIsReportedAsNoFreeMemoryNotAnError) {
  const std::string r = region("small", 32 * kMiB);
  Client c(env(r), {"procaddr", "info"});
  ASSERT_EQ(c.wait(), 0);
  EXPECT_EQ(c.num("total"), static_cast<long long>(32 * kMiB));
  EXPECT_EQ(c.num("free"), 0);
  EXPECT_EQ(c.num("nvml_used"), static_cast<long long>(32 * kMiB));
  EXPECT_EQ(c.num("nvml_free"), 0);
}

TEST_F(VgpuShimTest, WithoutARegionTheDriverIsUntouched) {
  Client c(env(""), {"direct", "info"});
  ASSERT_EQ(c.wait(), 0);
  EXPECT_EQ(c.num("total"), static_cast<long long>(16384 * kMiB));
}

TEST_F(VgpuShimTest, DlsymRtldNextSearchesAfterTheCallerNotAfterTheInterposer) {
  Client c(env(""), {"direct", "rtldnext"});
  ASSERT_EQ(c.wait(), 0);
  EXPECT_EQ(c.num("next_malloc_is_libc"), 1);
  EXPECT_EQ(c.num("next_cumemalloc_is_default"), 1);
  EXPECT_EQ(c.num("next_missing_is_null"), 1);
}

TEST_F(VgpuShimTest, EveryAllocationPathIsCountedAndReturned) {
  const std::string r = region("paths", 4096 * kMiB);
  for (const char* how : kMethods) {
    SCOPED_TRACE(how);
    Client c(env(r), {how, "paths"});
    ASSERT_EQ(c.wait(), 0);
    EXPECT_EQ(c.num("context"), static_cast<long long>(kContext));
    EXPECT_EQ(c.num("alloc"), static_cast<long long>(3 * kMiB));
    EXPECT_EQ(c.num("alloc_freed"), 0);
    EXPECT_EQ(c.num("pitch"), c.num("pitch_expected"));
    EXPECT_EQ(c.num("managed"), static_cast<long long>(5 * kMiB));
    EXPECT_EQ(c.num("vmm_device"), static_cast<long long>(4 * kMiB));
    EXPECT_EQ(c.num("vmm_device_released"), 0);
    EXPECT_EQ(c.num("vmm_host"), 0);  // host-located VMM passes through, uncounted
    EXPECT_EQ(c.num("async"), static_cast<long long>(6 * kMiB));
    EXPECT_EQ(c.num("async_freed"), 0);
    EXPECT_EQ(c.num("frompool"), static_cast<long long>(7 * kMiB));
    EXPECT_EQ(c.num("frompool_trimmed"), 0);
    EXPECT_EQ(c.num("array"), static_cast<long long>(16 * kMiB));   // 1024^2 x float4
    EXPECT_EQ(c.num("array3d"), static_cast<long long>(2 * kMiB));  // 256^2 x 16 x 2 bytes
    EXPECT_EQ(c.num("mipmapped"), 393216);  // the driver's requirement, not the estimate
    EXPECT_EQ(c.num("graph_node"), static_cast<long long>(8 * kMiB));
    EXPECT_EQ(c.num("graph_destroyed"), 0);
    EXPECT_EQ(c.num("export_table_rc"), 500);  // cuGetExportTable passed through untouched
    EXPECT_EQ(c.num("end"), 0);
  }
}

TEST_F(VgpuShimTest, QuotaHoldsExactlyUnderConcurrentProcessesAndThreads) {
  const std::string path = region("fill", 512 * kMiB);
  constexpr int kProcs = 3;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kProcs; ++i) {
    clients.push_back(std::make_unique<Client>(
        env(path), std::vector<std::string>{kMethods[i], "fill", "1", "4", "hold"}));
  }
  for (auto& c : clients)
    c->readUntil("ready");
  for (auto& c : clients)
    c->send("g");
  long long allocated = 0;
  for (auto& c : clients) {
    c->readUntil("used");
    EXPECT_EQ(c->num("errors"), 0);
    allocated += c->num("allocated");
  }
  // Every process paid for its context; the rest went to 1 MiB chunks, not one byte more.
  EXPECT_EQ(allocated, static_cast<long long>((512 * kMiB - kProcs * kContext) / kMiB));
  auto r = ShmRegion::open(path);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->usedBytes(), 512 * kMiB);
  for (auto& c : clients) {
    c->closeStdin();
    EXPECT_EQ(c->wait(), 0);
  }
  EXPECT_EQ(r->usedBytes(), 0u);  // each process detached at exit
}

TEST_F(VgpuShimTest, KilledProcessMemoryIsReclaimedForOthers) {
  const std::string path = region("kill", 256 * kMiB);
  {
    Client hog(env(path), {"direct", "fill", "1", "2", "hold"});
    hog.readUntil("ready");
    hog.send("g");
    hog.readUntil("used");
    EXPECT_EQ(hog.num("allocated"), 192);
    hog.kill();
  }
  // The dead process's 256 MiB come back when the next process runs into the quota.
  Client next(env(path), {"dlsym", "fill", "1", "2"});
  ASSERT_EQ(next.wait(), 0);
  EXPECT_EQ(next.num("allocated"), 192);
}

TEST_F(VgpuShimTest, MemoryThatBypassesTheHooksIsReconciledFromNvml) {
  const std::string path = region("bypass", 1024 * kMiB);
  Client c(env(path), {"direct", "bypass", "100"});
  ASSERT_EQ(c.wait(), 0);
  EXPECT_EQ(c.num("before"), static_cast<long long>(kContext));
  EXPECT_EQ(c.num("after"), static_cast<long long>(kContext + 100 * kMiB));
}

TEST_F(VgpuShimTest, EachDeviceHasItsOwnRegion) {
  const std::string r0 = region("gpu0", 512 * kMiB);
  const std::string r1 = region("gpu1", 1024 * kMiB);
  std::vector<std::string> e = env(r0 + ":" + r1);
  e.push_back("GPOOL_FAKE_GPU_COUNT=2");
  for (const char* how : kMethods) {
    SCOPED_TRACE(how);
    Client c(e, {how, "multi"});
    ASSERT_EQ(c.wait(), 0);
    EXPECT_EQ(c.num("total0"), static_cast<long long>(512 * kMiB));
    EXPECT_EQ(c.num("devtotal0"), static_cast<long long>(512 * kMiB));
    EXPECT_EQ(c.num("used0"), static_cast<long long>(kContext + 10 * kMiB));
    EXPECT_EQ(c.num("total1"), static_cast<long long>(1024 * kMiB));
    EXPECT_EQ(c.num("devtotal1"), static_cast<long long>(1024 * kMiB));
    EXPECT_EQ(c.num("used1"), static_cast<long long>(kContext + 20 * kMiB));
  }
}

TEST_F(VgpuShimTest, NothingLeaksAfterManyAllocFreeCycles) {
  const std::string path = region("cycles", 256 * kMiB);
  for (const char* how : kMethods) {
    SCOPED_TRACE(how);
    Client c(env(path), {how, "cycles", "3000"});
    ASSERT_EQ(c.wait(), 0);
    EXPECT_EQ(c.num("start"), static_cast<long long>(kContext));
    EXPECT_EQ(c.num("end"), static_cast<long long>(kContext));
  }
  auto r = ShmRegion::open(path);
  EXPECT_EQ(r->usedBytes(), 0u);
}

}  // namespace
}  // namespace gpool::vgpu
