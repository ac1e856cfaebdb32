// Unit tests of SchedulerPass rules that the scenario files do not show well: decision fields
// (grace period, borrowed, backfilled), determinism, queue orders, gangs and pass-level caching.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/random.h"
#include "sched/queue_scenario.h"
#include "sched/scheduler.h"
#include "sched/test_policy.h"

namespace gpool::sched::testing {
namespace {

Decisions runScenario(const std::string& text, uint64_t seed = 1) {
  auto s = parseScenario(text);
  EXPECT_TRUE(s.ok()) << s.status().toString();
  if (!s.ok()) return {};
  FirstFitPolicy policy;
  SchedulerPass pass(policy);
  SeededRandom random(seed);
  return pass.run(s->cluster, s->jobs, s->usage, s->config, s->now, random);
}

// The start of job `id`, or one with job 0 when it did not start.
StartDecision findStart(const Decisions& d, JobId id) {
  for (const auto& s : d.starts) {
    if (s.job == id) return s;
  }
  return {};
}
bool started(const Decisions& d, JobId id) {
  return findStart(d, id).job == id;
}

// The pending entry of job `id`, or one with job 0.
PendingDecision findPending(const Decisions& d, JobId id) {
  for (const auto& p : d.pending) {
    if (p.job == id) return p;
  }
  return {};
}

TEST(SchedulerPass, PreemptionCarriesTheGracePeriod) {
  Decisions d = runScenario(R"(
config min_run 0s
config delay 0s
config grace 15m
qos low priority=0 preemptible
qos high priority=10
node n1 1
now 100
run 1 a g 1 on=n1 start=0 qos=low preemptible
job 2 b h 1 qos=high
)");
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, 1u);
  EXPECT_EQ(d.preemptions[0].for_job, 2u);
  EXPECT_EQ(d.preemptions[0].grace_s, 900);
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].start, kOrigin + std::chrono::seconds(100 + 900));
}

// A QoS level's grace (Slurm's QoS GraceTime) replaces the configured one for its jobs; the
// preemptor's reservation waits for the longest grace of its victims.
TEST(SchedulerPass, QosGraceIsTheVictimsGracePeriod) {
  Decisions d = runScenario(R"(
config min_run 0s
config delay 0s
config grace 15m
qos low priority=0 preemptible grace=1m
qos mid priority=1 preemptible
qos high priority=10
node n1 2
now 100
run 1 a g 1 on=n1 start=0 qos=low preemptible
run 2 a g 1 on=n1 start=0 qos=mid preemptible
job 3 b h 2 qos=high
)");
  ASSERT_EQ(d.preemptions.size(), 2u);
  for (const PreemptDecision& p : d.preemptions)
    EXPECT_EQ(p.grace_s, p.job == 1 ? 60 : 900) << p.job;
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].start, kOrigin + std::chrono::seconds(100 + 900));
}

// Compute caps count a slice by its compute share: beyond a user's or a group's cap the job
// waits with AssocMaxComputePerUser or GroupComputeQuota.
TEST(SchedulerPass, ComputeCapsHoldJobsBack) {
  Decisions d = runScenario(R"(
user a max_compute=1.5
group h max_compute=0.5
node n1 8
now 100
run 1 a g 1 on=n1 start=0
job 2 a g 0.25 submit=10
job 3 a g 0.5 submit=20
job 4 b h 0.25 submit=30
job 5 b h 0.5 submit=40
)");
  EXPECT_TRUE(started(d, 2));
  EXPECT_EQ(findPending(d, 3).reason, QueueReason::kAssocMaxComputePerUser);
  EXPECT_NE(findPending(d, 3).detail.find("user a holds 1.25 GPUs of compute, cap 1.5"),
            std::string::npos)
      << findPending(d, 3).detail;
  EXPECT_TRUE(started(d, 4));
  EXPECT_EQ(findPending(d, 5).reason, QueueReason::kGroupComputeQuota);
  EXPECT_EQ(queueReasonName(QueueReason::kAssocMaxComputePerUser), "AssocMaxComputePerUser");
  EXPECT_EQ(queueReasonName(QueueReason::kGroupComputeQuota), "GroupComputeQuota");
}

TEST(SchedulerPass, EqualPriorityNeverPreempts) {
  Decisions d = runScenario(R"(
config order fifo
config min_run 0s
config delay 0s
node n1 1
now 100
run 1 a g 1 on=n1 start=0 preemptible
job 2 b g 1 submit=0
)");
  // FIFO: the running job was submitted at its start (0), the pending one at 0 too: equal keys.
  EXPECT_TRUE(d.preemptions.empty());
}

TEST(SchedulerPass, PreemptionDelayIsExplained) {
  Decisions d = runScenario(R"(
config delay 10m
qos low priority=0 preemptible
qos high priority=10
node n1 1
now 100
run 1 a g 1 on=n1 start=0 qos=low preemptible
job 2 b h 1 submit=40 qos=high
)");
  EXPECT_TRUE(d.preemptions.empty());
  PendingDecision p = findPending(d, 2);
  ASSERT_EQ(p.job, 2u);
  EXPECT_NE(p.detail.find("may preempt in 00:09:00"), std::string::npos) << p.detail;
}

TEST(SchedulerPass, NoSecondEvictionWhileVictimsLeave) {
  // Job 1 is already being preempted (deadline set by an earlier pass) and frees enough.
  Decisions d = runScenario(R"(
config min_run 0s
config delay 0s
qos low priority=0 preemptible
qos high priority=10
node n1 2
now 100
run 1 a g 1 on=n1 start=0 qos=low preemptible preempting=150
run 2 a g 1 on=n1 start=0 qos=low preemptible
job 3 b h 1 qos=high
)");
  EXPECT_TRUE(d.preemptions.empty());
  PendingDecision p = findPending(d, 3);
  ASSERT_EQ(p.job, 3u);
  EXPECT_NE(p.detail.find("waiting for 1 preempted job"), std::string::npos) << p.detail;
}

TEST(SchedulerPass, BorrowedFlagBeyondQuotaOnly) {
  Decisions d = runScenario(R"(
config order fifo
group a quota=2
node n1 8
now 10
job 1 alice a 2 submit=1
job 2 alice a 4 submit=2
)");
  ASSERT_TRUE(started(d, 1));
  ASSERT_TRUE(started(d, 2));
  EXPECT_FALSE(findStart(d, 1).borrowed);
  EXPECT_TRUE(findStart(d, 2).borrowed);
  EXPECT_NE(findStart(d, 2).explanation.find("reclaimable"), std::string::npos);
}

TEST(SchedulerPass, BackfilledFlagAndExplanation) {
  Decisions d = runScenario(R"(
config order fifo
config preemption off
node n1 4
now 0
run 1 a g 2 on=n1 start=0 limit=1000s
job 2 b g 4 submit=1 limit=1h
job 3 c g 1 submit=2 limit=100s
)");
  StartDecision s = findStart(d, 3);
  ASSERT_EQ(s.job, 3u);
  EXPECT_TRUE(s.backfilled);
  EXPECT_NE(s.explanation.find("backfilled"), std::string::npos);
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].job, 2u);
}

TEST(SchedulerPass, ReservationCountsJobsStartedInThePass) {
  // Job 1 starts now (limit 500 s) and takes the last free GPUs; job 2 then waits for it.
  Decisions d = runScenario(R"(
config order fifo
config preemption off
node n1 2
now 0
job 1 a g 2 submit=1 limit=500s
job 2 b g 2 submit=2 limit=1h
)");
  ASSERT_TRUE(started(d, 1));
  ASSERT_EQ(d.reservations.size(), 1u);
  EXPECT_EQ(d.reservations[0].start, kOrigin + std::chrono::seconds(500));
}

TEST(SchedulerPass, ShortestJobFirstUsesExpectedDuration) {
  Decisions d = runScenario(R"(
config order sjf
node n1 1
now 0
job 1 a g 1 submit=1 duration=2h
job 2 b g 1 submit=2 duration=10m
)");
  EXPECT_TRUE(started(d, 2));
  EXPECT_FALSE(started(d, 1));
}

TEST(SchedulerPass, LeastAttainedServiceIsFifoWithinAQueue) {
  Decisions d = runScenario(R"(
config order las
config las_threshold 1000
node n1 1
now 0
job 1 a g 1 submit=1 attained=5000
job 2 b g 1 submit=2 attained=10
job 3 c g 1 submit=3 attained=0
)");
  // Jobs 2 and 3 are both in queue 0; job 2 came first.
  EXPECT_TRUE(started(d, 2));
  EXPECT_EQ(d.starts.size(), 1u);
}

TEST(SchedulerPass, MultiServerGangIsAllOrNothing) {
  Decisions d = runScenario(R"(
config order fifo
config preemption off
node n1 4
node n2 4
now 0
run 1 a g 2 on=n2 start=0
job 2 b g 4 tasks=3 submit=1
job 3 c g 4 tasks=1 submit=2
)");
  // Three 4-GPU tasks need three empty servers; only n1 is: nothing of job 2 starts.
  EXPECT_FALSE(started(d, 2));
  ASSERT_TRUE(started(d, 3));
}

TEST(SchedulerPass, SameSeedSameDecisions) {
  const char* text = R"(
config order fairshare
node n1 8
node n2 8
usage u1 g 500
usage u2 h 100
now 1000
job 1 u1 g 0.5 submit=1
job 2 u2 h 0.25 submit=2
job 3 u1 g 2 submit=3
job 4 u3 h 4 submit=4
job 5 u2 h 0.5 submit=5
)";
  Decisions a = runScenario(text, 7);
  Decisions b = runScenario(text, 7);
  ASSERT_EQ(a.starts.size(), b.starts.size());
  for (size_t i = 0; i < a.starts.size(); ++i) {
    EXPECT_EQ(a.starts[i].job, b.starts[i].job);
    EXPECT_EQ(a.starts[i].allocation, b.starts[i].allocation);
  }
  EXPECT_EQ(a.starts.size(), 5u);
}

TEST(SchedulerPass, FailedShapesAreNotPlacedTwice) {
  std::string text = "config order fifo\nconfig backfill off\nnode n1 1\nnow 0\n";
  text += "run 1 a g 1 on=n1 start=0\n";
  for (int i = 2; i < 200; ++i) {
    text += "job " + std::to_string(i) + " u g 1 submit=" + std::to_string(i) + "\n";
  }
  Decisions d = runScenario(text);
  EXPECT_EQ(d.pending.size(), 198u);
  EXPECT_LE(d.stats.place_calls, 2u);
}

TEST(SchedulerPass, SliceJobsShareOneGpu) {
  Decisions d = runScenario(R"(
config order fifo
node n1 1
now 0
job 1 a g 0.5 submit=1
job 2 b g 0.25 submit=2
job 3 c g 0.25 submit=3
job 4 d g 0.25 submit=4
)");
  EXPECT_EQ(d.starts.size(), 3u);
  PendingDecision p = findPending(d, 4);
  ASSERT_EQ(p.job, 4u);
  EXPECT_EQ(p.reason, QueueReason::kResources);
}

TEST(SchedulerPass, ArrayLimitCountsRunningAndJustStartedElements) {
  // Array 10 may run 2 elements at once: one runs, so one more starts and the rest wait with
  // JobArrayTaskLimit although GPUs are free; job 20 (not in the array) is not held back.
  Decisions d = runScenario(R"(
config order fifo
node n1 8
now 100
run 10 a g 1 on=n1 start=0 array=10%2
job 11 a g 1 submit=1 array=10%2
job 12 a g 1 submit=2 array=10%2
job 13 a g 1 submit=3 array=10%2
job 20 a g 1 submit=4
)");
  EXPECT_TRUE(started(d, 11));
  EXPECT_FALSE(started(d, 12));
  EXPECT_FALSE(started(d, 13));
  EXPECT_TRUE(started(d, 20));
  PendingDecision p = findPending(d, 12);
  EXPECT_EQ(p.reason, QueueReason::kJobArrayTaskLimit);
  EXPECT_NE(p.detail.find("array 10 already runs 2 elements"), std::string::npos) << p.detail;
  EXPECT_EQ(queueReasonName(QueueReason::kJobArrayTaskLimit), "JobArrayTaskLimit");
}

TEST(SchedulerPass, ArrayWithoutLimitRunsEveryElementThatFits) {
  Decisions d = runScenario(R"(
node n1 8
now 100
job 11 a g 1 submit=1 array=11%0
job 12 a g 1 submit=2 array=11%0
job 13 a g 1 submit=3 array=11%0
)");
  EXPECT_EQ(d.starts.size(), 3u);
}

TEST(QueueOrder, ParsesNamesAndAliases) {
  EXPECT_EQ(*parseQueueOrder("tiresias"), QueueOrder::kLeastAttainedService);
  EXPECT_EQ(*parseQueueOrder("multifactor"), QueueOrder::kMultifactor);
  EXPECT_EQ(queueOrderName(QueueOrder::kShortestJobFirst), "sjf");
  EXPECT_FALSE(parseQueueOrder("lottery").ok());
}

}  // namespace
}  // namespace gpool::sched::testing
