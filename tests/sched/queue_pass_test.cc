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

// A preemptor owns what it preempted (issue 21, the livelock seen through the real daemons):
// job 5 evicted jobs 1 and 2; job 1 has left and is pending again (requeued), job 2 still
// leaves. The GPUs job 1 freed are job 5's: job 1 is not placed back on them although they
// are free and it fits there; job 5 holds a claim until job 2 is gone.
TEST(SchedulerPass, RequeuedVictimIsNotPlacedOnItsPreemptorsClaim) {
  const std::string pool = R"(
config order fifo
config min_run 0s
config delay 0s
qos low priority=0 preemptible
qos high priority=10
node n1 4
now 100
run 2 a g 2 on=n1 start=0 qos=low preemptible preempting=130
job 1 a g 2 submit=0 qos=low preemptible
)";
  Decisions d = runScenario(pool + "job 5 b h 4 submit=50 qos=high victims=1,2\n");
  EXPECT_TRUE(d.starts.empty());
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_EQ(findPending(d, 1).reason, QueueReason::kResources) << findPending(d, 1).detail;
  PendingDecision p = findPending(d, 5);
  EXPECT_EQ(p.reason, QueueReason::kResources);
  EXPECT_NE(p.detail.find("waiting for job(s) 2, preempted for it"), std::string::npos) << p.detail;
  ASSERT_FALSE(d.reservations.empty());
  EXPECT_EQ(d.reservations[0].job, 5u);
  EXPECT_TRUE(d.reservations[0].claim);
  EXPECT_EQ(d.reservations[0].start, kOrigin + std::chrono::seconds(130));

  // Without the claim (what the pass saw before: no victims recorded), job 1 took them back.
  Decisions before = runScenario(pool + "job 5 b h 4 submit=50 qos=high\n");
  EXPECT_TRUE(started(before, 1));
}

// Once every victim has left, the preemptor starts at once, ahead of jobs the queue order puts
// first (job 1 is older and FIFO would start it).
TEST(SchedulerPass, PreemptorStartsAsSoonAsItsVictimsAreGone) {
  Decisions d = runScenario(R"(
config order fifo
config min_run 0s
config delay 0s
qos low priority=0 preemptible
qos high priority=10
node n1 4
now 200
job 1 a g 2 submit=0 qos=low preemptible
job 2 a g 2 submit=1 qos=low preemptible
job 5 b h 4 submit=50 qos=high victims=1,2
)");
  ASSERT_TRUE(started(d, 5));
  EXPECT_EQ(d.starts.size(), 1u);
  EXPECT_NE(findStart(d, 5).explanation.find("preempted for it freed"), std::string::npos);
}

// A job already preempted for a preemptor and running again is never its victim a second time:
// job 5 evicted job 1, which restarted; job 5 now needs room again and takes job 3 instead,
// although job 1 ran shorter (the least work lost would otherwise pick it).
TEST(SchedulerPass, NoJobIsPreemptedTwiceForTheSamePreemptor) {
  const std::string pool = R"(
config order fairshare
config min_run 0s
config delay 0s
config reclaim off
qos low priority=0 preemptible
qos high priority=10
node n1 2
now 1000
run 1 a g 1 on=n1 start=900 qos=low preemptible
run 3 a g 1 on=n1 start=0 qos=low preemptible
)";
  Decisions d = runScenario(pool + "job 5 b h 1 submit=0 qos=high victims=1\n");
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, 3u);
  Decisions fresh = runScenario(pool + "job 5 b h 1 submit=0 qos=high\n");
  ASSERT_EQ(fresh.preemptions.size(), 1u);
  EXPECT_EQ(fresh.preemptions[0].job, 1u);
}

// Reclaim has its own protections: borrowed work runs reclaim_min_run, and the job of the group
// below its share reclaims once it waited reclaim_delay (here 30 s, set in seconds as a small
// lab would), independently of the preemption delay (1 hour).
TEST(SchedulerPass, ReclaimWaitsItsOwnDelay) {
  const std::string pool = R"(
config order fairshare
config delay 1h
config min_run 1h
config reclaim_delay 30s
config reclaim_min_run 10s
group a quota=2
group b quota=2
node n1 4
run 1 bob b 2 on=n1 start=0
run 2 bob b 2 on=n1 start=5
)";
  Decisions early = runScenario(pool + "now 20\njob 3 alice a 2 submit=0\n");
  EXPECT_TRUE(early.preemptions.empty());
  EXPECT_NE(findPending(early, 3).detail.find("may preempt in 00:00:10"), std::string::npos)
      << findPending(early, 3).detail;
  Decisions later = runScenario(pool + "now 30\njob 3 alice a 2 submit=0\n");
  ASSERT_EQ(later.preemptions.size(), 1u);
  EXPECT_EQ(later.preemptions[0].job, 2u);  // the work beyond b's quota: the later start
  EXPECT_NE(later.preemptions[0].reason.find("reclaimed for job 3 of group a"), std::string::npos);
}

// Holds, dependencies and GPU-hours are decided by the pass (so `gpool sim` decides them too).
TEST(SchedulerPass, HoldsDependenciesAndGpuHoursAreDecidedInThePass) {
  Decisions d = runScenario(R"(
config order fifo
user carol gpu_hours=12.5/12.5
group lab gpu_hours=3/4
node n1 8
now 100
ended 20 failed
ended 21 succeeded
job 1 a g 1 submit=1 held
job 2 a g 1 submit=2 admin_held
job 3 a g 1 submit=3 after=20
job 4 a g 1 submit=4 afternotok=20
job 5 a g 1 submit=5 after=21
job 6 a g 1 submit=6 after=99
job 7 a g 1 submit=7 after=1
job 8 carol g 1 submit=8
job 9 dan lab 1 submit=9
)");
  EXPECT_EQ(findPending(d, 1).reason, QueueReason::kJobHeldUser);
  EXPECT_EQ(findPending(d, 2).reason, QueueReason::kJobHeldAdmin);
  ASSERT_EQ(d.cancels.size(), 2u);
  EXPECT_EQ(d.cancels[0].job, 3u);
  EXPECT_EQ(d.cancels[0].reason, "DependencyNeverSatisfied");
  EXPECT_EQ(d.cancels[0].detail, "job 20 failed (afterok)");
  EXPECT_EQ(d.cancels[1].job, 6u);
  EXPECT_EQ(d.cancels[1].detail, "job 99 does not exist (afterok)");
  EXPECT_TRUE(started(d, 4));
  EXPECT_TRUE(started(d, 5));
  EXPECT_EQ(findPending(d, 7).reason, QueueReason::kDependency);
  EXPECT_EQ(findPending(d, 8).reason, QueueReason::kAssocGrpGpuHours);
  EXPECT_NE(findPending(d, 8).detail.find("user carol used 12.50 of 12.50 GPU-hours"),
            std::string::npos)
      << findPending(d, 8).detail;
  EXPECT_TRUE(started(d, 9));  // 3 of 4 used
  EXPECT_EQ(queueReasonName(QueueReason::kAssocGrpGpuHours), "AssocGrpGpuHours");
  EXPECT_EQ(queueReasonName(QueueReason::kJobHeldAdmin), "JobHeldAdmin");
}

// A job that would fit if an unhealthy GPU were usable says so, naming the GPU and why; so does
// one that needs only GPUs that are unhealthy (it is not BadConstraints: they may recover).
TEST(SchedulerPass, UnhealthyGpusAreTheReasonWhenTheyAreWhatIsMissing) {
  Decisions d = runScenario(R"(
config order fifo
config preemption off
node n1 2
node n2 1 model=A100
now 100
unhealthy n1 1 2 uncorrected ECC errors
unhealthy n2 0 XID 79
run 1 a g 1 on=n1 start=0
job 2 b g 1 submit=1
job 3 b g 1 submit=2 model=A100
)");
  PendingDecision p = findPending(d, 2);
  EXPECT_EQ(p.reason, QueueReason::kGpusUnhealthy);
  EXPECT_NE(p.detail.find("n1 GPU 1 (2 uncorrected ECC errors)"), std::string::npos) << p.detail;
  PendingDecision q = findPending(d, 3);
  EXPECT_EQ(q.reason, QueueReason::kGpusUnhealthy) << q.detail;
  EXPECT_NE(q.detail.find("n2 GPU 0 (XID 79)"), std::string::npos) << q.detail;
  EXPECT_EQ(queueReasonName(QueueReason::kGpusUnhealthy), "GpusUnhealthy");
}

// A gang no set of servers can hold even when empty pends with BadConstraints saying so (issue
// 21: `--tasks 4 --nodes 2 --gpus 8` on 8-GPU servers pended Resources forever).
TEST(SchedulerPass, ImpossibleGangIsBadConstraints) {
  Decisions d = runScenario(R"(
config order fifo
node n1 8
node n2 8
now 100
run 1 a g 1 on=n1 start=0
job 2 b g 8 submit=1 tasks=4 nodes=2
job 3 b g 8 submit=2 tasks=2 nodes=2
)");
  PendingDecision p = findPending(d, 2);
  EXPECT_EQ(p.reason, QueueReason::kBadConstraints);
  EXPECT_NE(p.detail.find("can ever run it"), std::string::npos) << p.detail;
  EXPECT_EQ(findPending(d, 3).reason, QueueReason::kResources) << findPending(d, 3).detail;
}

TEST(QueueOrder, ParsesNamesAndAliases) {
  EXPECT_EQ(*parseQueueOrder("tiresias"), QueueOrder::kLeastAttainedService);
  EXPECT_EQ(*parseQueueOrder("multifactor"), QueueOrder::kMultifactor);
  EXPECT_EQ(queueOrderName(QueueOrder::kShortestJobFirst), "sjf");
  EXPECT_FALSE(parseQueueOrder("lottery").ok());
}

}  // namespace
}  // namespace gpool::sched::testing
