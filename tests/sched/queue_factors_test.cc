// Unit tests for the queue-order building blocks: decayed usage, billing weights, the Fair Tree,
// multifactor priority and the deserved-share split of guaranteed quotas.
#include <gtest/gtest.h>

#include <cmath>

#include "sched/fairshare.h"
#include "sched/limits.h"
#include "sched/priority.h"
#include "sched/usage.h"

namespace gpool::sched {
namespace {

const TimePoint kT0 = fromUnixSeconds(1'700'000'000);

TEST(UsageLedger, HalvesAfterOneHalfLife) {
  UsageLedger ledger(3600);
  ledger.chargeBilled("alice", "team", 1000.0, kT0);
  EXPECT_DOUBLE_EQ(ledger.userUsage("alice", kT0), 1000.0);
  EXPECT_NEAR(ledger.userUsage("alice", kT0 + std::chrono::hours(1)), 500.0, 1e-9);
  EXPECT_NEAR(ledger.groupUsage("team", kT0 + std::chrono::hours(2)), 250.0, 1e-9);
  EXPECT_EQ(ledger.userUsage("nobody", kT0), 0.0);
}

TEST(UsageLedger, NoDecayWhenHalfLifeIsZero) {
  UsageLedger ledger(0);
  ledger.chargeBilled("alice", "team", 10.0, kT0);
  ledger.chargeBilled("alice", "team", 5.0, kT0 + std::chrono::hours(100));
  EXPECT_DOUBLE_EQ(ledger.userUsage("alice", kT0 + std::chrono::hours(1000)), 15.0);
}

TEST(UsageLedger, ChargeInOneStepEqualsChargeInSteps) {
  BillingWeights w;
  UsageLedger once(600);
  UsageLedger steps(600);
  once.charge("u", "g", 1000, "A100", 1200, kT0 + std::chrono::seconds(1200), w);
  for (int i = 1; i <= 1200; ++i) {
    steps.charge("u", "g", 1000, "A100", 1, kT0 + std::chrono::seconds(i), w);
  }
  TimePoint end = kT0 + std::chrono::seconds(1200);
  // Integral of 0.5^(t/600) over 1200 s = 600/ln2 * (1 - 1/4).
  double expected = 600.0 / std::log(2.0) * 0.75;
  EXPECT_NEAR(once.userUsage("u", end), expected, 1e-6);
  EXPECT_NEAR(steps.userUsage("u", end), expected, 0.5);
}

TEST(UsageLedger, BillingWeightsPerModelAndSlices) {
  BillingWeights w;
  w.default_weight = 1.0;
  w.per_model["H100"] = 3.0;
  UsageLedger ledger(0);
  ledger.charge("u", "g", 500, "H100", 100, kT0, w);  // half an H100 for 100 s
  ledger.charge("v", "g", 2000, "T4", 100, kT0, w);   // two T4s for 100 s
  EXPECT_DOUBLE_EQ(ledger.userUsage("u", kT0), 150.0);
  EXPECT_DOUBLE_EQ(ledger.userUsage("v", kT0), 200.0);
  EXPECT_DOUBLE_EQ(ledger.groupUsage("g", kT0), 350.0);
}

TEST(FairTree, LeastServedUserRanksFirst) {
  UsageLedger ledger(0);
  ledger.chargeBilled("heavy", "a", 900, kT0);
  ledger.chargeBilled("light", "a", 100, kT0);
  std::vector<Association> assocs = {{"a", "heavy"}, {"a", "light"}, {"a", "idle"}};
  auto fs = computeFairTree(assocs, {}, ledger, kT0);
  // Ranks: idle (no usage, LF inf) 1st, light 2nd, heavy 3rd -> 3/3, 2/3, 1/3.
  EXPECT_DOUBLE_EQ(fs[associationKey("a", "idle")], 1.0);
  EXPECT_DOUBLE_EQ(fs[associationKey("a", "light")], 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(fs[associationKey("a", "heavy")], 1.0 / 3.0);
}

TEST(FairTree, GroupLevelComesBeforeUserLevel) {
  // Group b is under-served relative to its shares, so even its heaviest user ranks above every
  // user of group a (Fair Tree walks the tree depth-first).
  UsageLedger ledger(0);
  ledger.chargeBilled("a1", "a", 100, kT0);
  ledger.chargeBilled("a2", "a", 10, kT0);
  ledger.chargeBilled("b1", "b", 50, kT0);
  ledger.chargeBilled("b2", "b", 1, kT0);
  FairShareConfig cfg;
  cfg.group_shares["b"] = 3;  // b: S=0.75, U=51/161 -> LF 2.37; a: S=0.25, U=110/161 -> 0.37
  std::vector<Association> assocs = {{"a", "a1"}, {"a", "a2"}, {"b", "b1"}, {"b", "b2"}};
  auto fs = computeFairTree(assocs, cfg, ledger, kT0);
  EXPECT_DOUBLE_EQ(fs[associationKey("b", "b2")], 1.0);
  EXPECT_DOUBLE_EQ(fs[associationKey("b", "b1")], 0.75);
  EXPECT_DOUBLE_EQ(fs[associationKey("a", "a2")], 0.5);
  EXPECT_DOUBLE_EQ(fs[associationKey("a", "a1")], 0.25);
}

TEST(FairTree, TiesShareARank) {
  UsageLedger ledger(0);
  std::vector<Association> assocs = {{"g", "x"}, {"g", "y"}};
  auto fs = computeFairTree(assocs, {}, ledger, kT0);
  EXPECT_DOUBLE_EQ(fs[associationKey("g", "x")], 1.0);
  EXPECT_DOUBLE_EQ(fs[associationKey("g", "y")], 1.0);
}

TEST(FairTree, DecayLetsOldUsageFade) {
  UsageLedger ledger(3600);
  ledger.chargeBilled("old", "g", 1000, kT0);
  ledger.chargeBilled("new", "g", 100, kT0 + std::chrono::hours(5));
  std::vector<Association> assocs = {{"g", "old"}, {"g", "new"}};
  // At kT0 + 5h, old has 1000/32 = 31.25 < 100, so old is now the less served one.
  auto fs = computeFairTree(assocs, {}, ledger, kT0 + std::chrono::hours(5));
  EXPECT_GT(fs[associationKey("g", "old")], fs[associationKey("g", "new")]);
}

TEST(Priority, WeightedSumOfFactorsMinusNice) {
  PriorityWeights w;
  w.fairshare = 1000;
  w.qos = 100;
  w.age = 10;
  w.job_size = 1;
  w.max_age_s = 1000;
  w.favor_small = true;
  auto f = computePriority(w, 0.5, 1.0, 500, 2000, 8000, 3);
  EXPECT_DOUBLE_EQ(f.fairshare, 0.5);
  EXPECT_DOUBLE_EQ(f.age, 0.5);
  EXPECT_DOUBLE_EQ(f.job_size, 0.75);
  EXPECT_DOUBLE_EQ(f.total, 500 + 100 + 5 + 0.75 - 3);
}

TEST(Priority, AgeFactorSaturatesAtMaxAge) {
  PriorityWeights w;
  w.max_age_s = 100;
  EXPECT_DOUBLE_EQ(computePriority(w, 0, 0, 1'000'000, 0, 1, 0).age, 1.0);
  EXPECT_DOUBLE_EQ(computePriority(w, 0, 0, -5, 0, 1, 0).age, 0.0);
}

TEST(Priority, SizeFactorCanFavourLargeJobs) {
  PriorityWeights w;
  w.favor_small = false;
  EXPECT_DOUBLE_EQ(computePriority(w, 0, 0, 0, 4000, 8000, 0).job_size, 0.5);
}

TEST(Priority, QosFactorIsRelativeToTopLevel) {
  std::vector<QosLevel> levels = {{"low", 0}, {"normal", 50}, {"high", 200}};
  EXPECT_DOUBLE_EQ(qosFactor(levels[1], levels), 0.25);
  EXPECT_DOUBLE_EQ(qosFactor(levels[2], levels), 1.0);
  EXPECT_DOUBLE_EQ(qosFactor(levels[0], levels), 0.0);
}

TEST(DeservedShares, QuotaFirstThenIdleCapacityByWeight) {
  std::unordered_map<std::string, GroupPolicy> policies;
  policies["a"].quota = 2000;
  policies["a"].over_quota_weight = 1;
  policies["b"].quota = 2000;
  policies["b"].over_quota_weight = 3;
  // 8 GPUs; both want everything. Quotas 2+2, the 4 left split 1:3.
  auto d = computeDeservedShares({{"a", 0, 8000}, {"b", 0, 8000}}, policies, 8000);
  EXPECT_EQ(d["a"], 3000u);
  EXPECT_EQ(d["b"], 5000u);
}

TEST(DeservedShares, UnusedQuotaIsLentToOthers) {
  std::unordered_map<std::string, GroupPolicy> policies;
  policies["a"].quota = 6000;
  policies["b"].quota = 2000;
  // a only wants 1 GPU: b may have the rest of the pool.
  auto d = computeDeservedShares({{"a", 1000, 0}, {"b", 2000, 8000}}, policies, 8000);
  EXPECT_EQ(d["a"], 1000u);
  EXPECT_EQ(d["b"], 7000u);
}

TEST(DeservedShares, ZeroWeightGetsNoShareOfIdleCapacity) {
  std::unordered_map<std::string, GroupPolicy> policies;
  policies["a"].quota = 1000;
  policies["a"].over_quota_weight = 0;
  auto d = computeDeservedShares({{"a", 0, 8000}, {"b", 0, 8000}}, policies, 8000);
  EXPECT_EQ(d["a"], 1000u);
  EXPECT_EQ(d["b"], 7000u);
}

}  // namespace
}  // namespace gpool::sched
