#include "vgpu/limiter.h"

#include <gtest/gtest.h>

namespace gpool::vgpu {
namespace {

constexpr std::int64_t kPeriodNs = 20'000'000;

ControlInput input(std::uint32_t share, SharePolicy policy, double task, double device,
                   std::uint64_t launches) {
  ControlInput in;
  in.share_permille = share;
  in.policy = policy;
  in.period_ns = kPeriodNs;
  in.task_util = task;
  in.device_util = device;
  in.launches = launches;
  return in;
}

TEST(LimiterTest, BudgetIsShareTimesPeriodIndependentOfGpuSize) {
  // The refill depends only on the share and the period, never on SM counts: the same step on a
  // small and a large GPU (HAMi-core's step grows with SMs squared and overshoots).
  ControlState st;
  ControlOutput out = controlStep(input(300, SharePolicy::kStrict, 0.5, 1.0, 100), &st);
  EXPECT_EQ(out.allowed_permille, 300u);
  EXPECT_EQ(out.refill_ns, kPeriodNs * 3 / 10);
  EXPECT_EQ(out.burst_ns, out.refill_ns);
}

TEST(LimiterTest, CostPerLaunchConvergesToMeasuredBusyTimePerLaunch) {
  ControlState st;
  // 100 launches used 50% of a 20 ms period: 100 us each.
  for (int i = 0; i < 20; ++i)
    controlStep(input(300, SharePolicy::kStrict, 0.5, 1.0, 100), &st);
  EXPECT_NEAR(st.cost_ns, 100'000.0, 100.0);
}

TEST(LimiterTest, WorkConservingLoneTaskGetsTheWholeGpu) {
  ControlState st;
  ControlOutput out = controlStep(input(300, SharePolicy::kWorkConserving, 0.3, 0.3, 10), &st);
  EXPECT_EQ(out.allowed_permille, 1000u);
}

TEST(LimiterTest, StrictLoneTaskStaysAtItsShare) {
  ControlState st;
  ControlOutput out = controlStep(input(300, SharePolicy::kStrict, 0.3, 0.3, 10), &st);
  EXPECT_EQ(out.allowed_permille, 300u);
}

TEST(LimiterTest, WorkConservingFallsBackToShareWhenContendedAndGrowsIntoIdle) {
  ControlState st;
  controlStep(input(300, SharePolicy::kWorkConserving, 0.3, 0.3, 10), &st);  // alone: 100%
  ControlOutput busy = controlStep(input(300, SharePolicy::kWorkConserving, 0.5, 1.0, 10), &st);
  EXPECT_EQ(busy.allowed_permille, 300u);
  ControlOutput idle = controlStep(input(300, SharePolicy::kWorkConserving, 0.3, 0.6, 10), &st);
  EXPECT_GT(idle.allowed_permille, 300u);
  EXPECT_LE(idle.allowed_permille, 1000u);
}

TEST(LimiterTest, TokensAreClampedToOneBurstAndLaunchesStopWhenSpent) {
  ShmHeader h{};
  h.allowed_permille.store(300);
  ControlOutput out;
  out.allowed_permille = 300;
  out.refill_ns = 1000;
  out.burst_ns = 1000;
  out.cost_ns = 600;
  applyControl(&h, out);
  applyControl(&h, out);
  EXPECT_EQ(h.tokens_ns.load(), 1000);
  EXPECT_TRUE(tryAcquireLaunch(&h));   // 1000 -> 400
  EXPECT_TRUE(tryAcquireLaunch(&h));   // 400 -> -200
  EXPECT_FALSE(tryAcquireLaunch(&h));  // over budget
  applyControl(&h, out);               // -200 + 1000
  EXPECT_TRUE(tryAcquireLaunch(&h));
}

// Any process of the task can write the budget (the region is mapped read-write): a refill of a
// budget near the top of its range is clamped to the burst, not wrapped into a negative budget
// that throttles the task forever (found by tests/fuzz vgpu_region, under UBSan an overflow).
TEST(LimiterTest, RefillOfAScribbledBudgetSaturates) {
  ShmHeader h{};
  ControlOutput out;
  out.allowed_permille = 500;
  out.refill_ns = 55'000'000;
  out.burst_ns = 55'000'000;
  out.cost_ns = 1000;
  h.tokens_ns.store(INT64_MAX - 100'000);
  applyControl(&h, out);
  EXPECT_EQ(h.tokens_ns.load(), 55'000'000);
  h.tokens_ns.store(INT64_MIN + 1);
  applyControl(&h, out);
  EXPECT_EQ(h.tokens_ns.load(), INT64_MIN + 1 + 55'000'000);
}

TEST(LimiterTest, UnlimitedTasksNeverWait) {
  ShmHeader h{};
  h.allowed_permille.store(1000);
  h.tokens_ns.store(-1'000'000);
  EXPECT_TRUE(tryAcquireLaunch(&h));
}

}  // namespace
}  // namespace gpool::vgpu
