// Compute-share tests of the interposer: clients launch fixed work (2 ms simulated kernels) and the
// busy time each got on the one simulated GPU is read back from the fake driver's state. Each
// case runs for a few seconds of real time (labelled slow) and asserts on busy-time shares only.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "vgpu/shim_test_util.h"

namespace gpool::vgpu {
namespace {

using testing::Client;

using testing::kMiB;
using testing::VgpuShimTest;

class VgpuShareTest : public VgpuShimTest {};

// --- compute shares ---------------------------------------------------------------------------

TEST_F(VgpuShareTest, TwoTasksAt30And70PercentGetTheirShareOfBusyTime) {
  const std::string a = region("a", 1024 * kMiB, 300);
  const std::string b = region("b", 1024 * kMiB, 700);
  // Fixed work: 2 ms kernels, sized so that both finish together when the split is right.
  Client ca(env(a), {"direct", "spin", "2000", "450", "kernel"});
  Client cb(env(b), {"procaddr", "spin", "2000", "1050", "kernel"});
  ASSERT_EQ(ca.wait(), 0);
  ASSERT_EQ(cb.wait(), 0);
  const std::int64_t t0 = std::max(ca.num("start_us"), cb.num("start_us")) + 300000;
  const std::int64_t t1 = std::min(ca.num("end_us"), cb.num("end_us"));
  ASSERT_GT(t1 - t0, 1000000);
  const double busy_a = static_cast<double>(busy(static_cast<std::int32_t>(ca.num("pid")), t0, t1));
  const double busy_b = static_cast<double>(busy(static_cast<std::int32_t>(cb.num("pid")), t0, t1));
  const double share_a = busy_a / (busy_a + busy_b);
  std::printf("share_a %.3f share_b %.3f device_busy %.3f window_s %.2f\n", share_a, 1 - share_a,
              (busy_a + busy_b) / static_cast<double>(t1 - t0), (t1 - t0) / 1e6);
  EXPECT_NEAR(share_a, 0.30, 0.05);
  EXPECT_NEAR(1 - share_a, 0.70, 0.05);
  EXPECT_GT((busy_a + busy_b) / static_cast<double>(t1 - t0), 0.9);  // and the GPU stays busy
}

TEST_F(VgpuShareTest, LoneWorkConservingTaskGetsTheWholeGpuAndStrictOneItsShare) {
  const std::string wc = region("wc", 1024 * kMiB, 300, SharePolicy::kWorkConserving);
  {
    Client c(env(wc), {"direct", "spin", "2000", "400", "kernel"});
    ASSERT_EQ(c.wait(), 0);
    const std::int64_t t0 = c.num("start_us") + 100000;
    const std::int64_t t1 = c.num("end_us");
    const double frac = static_cast<double>(busy(0, t0, t1)) / static_cast<double>(t1 - t0);
    std::printf("work_conserving_lone_busy %.3f\n", frac);
    EXPECT_GT(frac, 0.9);
  }
  const std::string strict = region("strict", 1024 * kMiB, 300, SharePolicy::kStrict);
  {
    Client c(env(strict), {"procaddr", "spin", "2000", "300", "kernel"});
    ASSERT_EQ(c.wait(), 0);
    const std::int64_t t0 = c.num("start_us") + 300000;
    const std::int64_t t1 = c.num("end_us");
    const double frac = static_cast<double>(busy(static_cast<std::int32_t>(c.num("pid")), t0, t1)) /
                        static_cast<double>(t1 - t0);
    std::printf("strict_lone_busy %.3f\n", frac);
    EXPECT_NEAR(frac, 0.30, 0.05);
  }
}

TEST_F(VgpuShareTest, EveryLaunchApiIsLimited) {
  for (const char* api : {"ex", "coop", "graph"}) {
    SCOPED_TRACE(api);
    const std::string path =
        region(std::string("launch-") + api, 1024 * kMiB, 300, SharePolicy::kStrict);
    Client c(env(path), {"procaddr", "spin", "2000", "200", api});
    ASSERT_EQ(c.wait(), 0);
    const std::int64_t t0 = c.num("start_us") + 300000;
    const std::int64_t t1 = c.num("end_us");
    const double frac = static_cast<double>(busy(static_cast<std::int32_t>(c.num("pid")), t0, t1)) /
                        static_cast<double>(t1 - t0);
    std::printf("%s_strict_busy %.3f\n", api, frac);
    EXPECT_NEAR(frac, 0.30, 0.07);
    auto r = ShmRegion::open(path);
    EXPECT_EQ(r->header()->launches_total.load(), 200u);
  }
}

TEST_F(VgpuShareTest, ControllerKilledMidRunIsReplacedAndTheTaskStaysAtItsShare) {
  const std::string path = region("lease", 1024 * kMiB, 300, SharePolicy::kStrict);
  // The first process takes the controller lease; it is killed once the second one runs.
  Client first(env(path), {"direct", "spin", "2000", "100000", "kernel"});
  first.readUntil("start_us");
  Client second(env(path), {"procaddr", "spin", "2000", "250", "kernel"});
  second.readUntil("start_us");
  first.kill();
  ASSERT_EQ(second.wait(), 0);
  const std::int64_t t0 = second.num("start_us") + 400000;
  const std::int64_t t1 = second.num("end_us");
  ASSERT_GT(t1 - t0, 500000);
  const double frac =
      static_cast<double>(busy(static_cast<std::int32_t>(second.num("pid")), t0, t1)) /
      static_cast<double>(t1 - t0);
  std::printf("after_controller_killed_busy %.3f\n", frac);
  EXPECT_NEAR(frac, 0.30, 0.05);
  auto r = ShmRegion::open(path);
  EXPECT_EQ(r->header()->controller_pid.load(), static_cast<std::int32_t>(second.num("pid")));
}

}  // namespace
}  // namespace gpool::vgpu
