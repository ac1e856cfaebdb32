#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/random.h"
#include "common/result.h"
#include "sched/cluster.h"
#include "sched/fairshare.h"
#include "sched/job.h"
#include "sched/limits.h"
#include "sched/placement.h"
#include "sched/priority.h"
#include "sched/usage.h"

// One scheduling pass: the queue policy on top of placement. Given a pool snapshot, the jobs,
// decayed usage, the policy and the time, it decides which pending jobs start where, which
// running jobs are evicted (preemption, quota reclaim, idle reclaim), which blocked job gets a
// reservation, and why every other job waits. Pure: no I/O, no clock, no global randomness; the
// same inputs, time and seed give the same decisions. The controller and `gpool sim` both call
// it.
namespace gpool::sched {

// The order in which pending jobs are considered.
enum class QueueOrder : uint8_t {
  kMultifactor,           // gpool's default: fair-share, QoS, age, size (Slurm multifactor)
  kFifo,                  // submit time
  kShortestJobFirst,      // expected run time (an oracle in the simulator), then submit time
  kLeastAttainedService,  // Tiresias' discretised LAS: GPU-seconds received, queues by threshold
};

// "fairshare", "fifo", "sjf", "las".
std::string_view queueOrderName(QueueOrder order);
// Accepts the names above and "multifactor", "tiresias".
Result<QueueOrder> parseQueueOrder(std::string_view text);

// Why a job is still pending, with Slurm's names where Slurm has one.
enum class QueueReason : uint8_t {
  kNone,                // started in this pass
  kResources,           // does not fit on the free resources now
  kPriority,            // would fit, but a higher-priority job holds a reservation it would delay
  kDependency,          // a job it depends on has not finished
  kQosMaxGpuPerUser,    // the user's GPUs in this QoS would exceed the QoS cap
  kAssocMaxGpuPerUser,  // the user's GPUs would exceed the user's cap
  kGroupQuota,          // the group's GPUs would exceed the group's hard cap
  kBadConstraints,      // no server of the pool can ever satisfy the request
  kInvalidQos,          // the job names a QoS the policy does not define
  kJobArrayTaskLimit,   // its array already runs as many elements as its "%N" allows
  kAssocMaxComputePerUser,  // the user's GPU compute would exceed the user's cap
  kGroupComputeQuota,       // the group's GPU compute would exceed the group's cap
  kJobHeldUser,             // held by its owner
  kJobHeldAdmin,            // held by an administrator
  kAssocGrpGpuHours,        // the user or group used up the GPU-hours of its period
  kGpusUnhealthy,           // it would fit now if unhealthy GPUs were usable
};

// "None", "Resources", "Priority", "Dependency", "QOSMaxGpuPerUser", "AssocMaxGpuPerUser",
// "GroupQuota", "BadConstraints", "InvalidQOS", "JobArrayTaskLimit", "AssocMaxComputePerUser",
// "GroupComputeQuota", "JobHeldUser", "JobHeldAdmin", "AssocGrpGpuHours", "GpusUnhealthy".
std::string_view queueReasonName(QueueReason reason);

struct BackfillConfig {
  // Lower-priority jobs may start ahead of a blocked job when they do not delay its
  // reservation. When false, the first blocked job blocks every job behind it.
  bool enabled = true;
  // Time limit assumed for jobs that give none (Slurm's DefaultTime).
  int64_t default_time_limit_s = 24 * 3600;
  // How many blocked jobs get a reservation per pass (Slurm reserves for the top ones).
  uint32_t max_reservations = 1;
};

struct PreemptionConfig {
  bool enabled = true;
  // A running job cannot be evicted for priority before it ran this long (Slurm's
  // PreemptExemptTime).
  int64_t min_run_time_s = 600;
  // A pending job may evict for priority only after it waited this long (KAI's
  // preemption-delay).
  int64_t delay_s = 300;
  // Time a victim gets between SIGTERM and SIGKILL to checkpoint (Slurm's GraceTime).
  int64_t grace_s = 120;
  // Groups below their deserved share take back borrowed capacity from groups above theirs.
  bool reclaim = true;
  // The same two protections for reclaim: borrowed work runs at least reclaim_min_run_time_s,
  // and a job of a group below its share reclaims once it waited reclaim_delay_s. A group
  // below its guarantee gets its capacity back within reclaim_delay_s + the victims' grace
  // (or the rest of their minimum run time, if longer).
  int64_t reclaim_min_run_time_s = 600;
  int64_t reclaim_delay_s = 300;
  // Bounds the work of one pass: at most this many pending jobs try to preempt.
  uint32_t max_attempts_per_pass = 16;
};

struct IdleReclaimConfig {
  bool enabled = false;
  // Allocations idle (utilisation below the threshold the controller applies) this long are
  // flagged, then the user is warned, then (if `preempt`) the job is evicted.
  int64_t flag_after_s = 30 * 60;
  int64_t warn_after_s = 60 * 60;
  int64_t preempt_after_s = 2 * 60 * 60;
  bool preempt = false;
};

struct SchedulerConfig {
  QueueOrder order = QueueOrder::kMultifactor;
  PriorityWeights weights;
  // The QoS levels; a job naming none of them pends with InvalidQOS. Must not be empty.
  std::vector<QosLevel> qos_levels = {QosLevel{}};
  FairShareConfig fairshare;
  std::unordered_map<std::string, GroupPolicy> groups;
  std::unordered_map<std::string, UserPolicy> users;
  BackfillConfig backfill;
  PreemptionConfig preemption;
  IdleReclaimConfig idle;
  // Least-attained-service queue boundaries in GPU-seconds (ascending). A job with attained
  // service below the first is in queue 0 (highest), and so on.
  std::vector<double> las_thresholds_gpu_s = {3200.0};
};

struct StartDecision {
  JobId job = 0;
  std::vector<TaskAllocation> allocation;
  // Started beyond the group's guaranteed quota: reclaimable.
  bool borrowed = false;
  // Started ahead of a reserved higher-priority job without delaying it.
  bool backfilled = false;
  double priority = 0;
  // For the user: priority factors, where each task went and why.
  std::string explanation;
};

struct PreemptDecision {
  JobId job = 0;
  // The job the eviction makes room for; 0 for idle reclaim.
  JobId for_job = 0;
  int64_t grace_s = 0;
  std::string reason;
};

struct ReservationDecision {
  JobId job = 0;
  // When the job is expected to start (from the time limits of running jobs, or the grace of
  // the jobs preempted for it).
  TimePoint start{};
  std::vector<TaskAllocation> allocation;
  // A preemptor's claim on what its victims free: no other job may use it, however short.
  bool claim = false;
};

struct PendingDecision {
  JobId job = 0;
  QueueReason reason = QueueReason::kResources;
  double priority = 0;
  std::string detail;
};

enum class IdleAction : uint8_t { kFlag, kWarn, kPreempt };
std::string_view idleActionName(IdleAction action);

// A job the pass ends without running it: one of its dependencies can never be met (Slurm's
// DependencyNeverSatisfied with kill_invalid_depend). The caller cancels it.
struct CancelDecision {
  JobId job = 0;
  std::string reason;  // "DependencyNeverSatisfied"
  std::string detail;  // e.g. "job 12 failed (afterok)"
};

struct IdleDecision {
  JobId job = 0;
  IdleAction action = IdleAction::kFlag;
  int64_t idle_s = 0;
};

// Counters for benchmarks and logs.
struct PassStats {
  size_t pending = 0;
  size_t running = 0;
  size_t place_calls = 0;
  size_t cache_hits = 0;
  size_t preempt_attempts = 0;
};

struct Decisions {
  std::vector<StartDecision> starts;
  std::vector<PreemptDecision> preemptions;
  std::vector<ReservationDecision> reservations;
  // One entry per pending job that did not start, in queue order.
  std::vector<PendingDecision> pending;
  std::vector<CancelDecision> cancels;
  std::vector<IdleDecision> idle;
  PassStats stats;
};

// Runs passes with one placement policy.
//
// Thread-safety: none (the policy may keep caches); one instance per scheduling loop.
class SchedulerPass {
 public:
  // `policy` must outlive this object.
  explicit SchedulerPass(PlacementPolicy& policy) : policy_(policy) {}

  // One pass. `snapshot` holds the allocations of every running job in `jobs` already applied;
  // `jobs` lists pending and running jobs (ids unique). Starts never overlap one another or
  // running work; preempted jobs keep their resources until they leave (the caller releases
  // them after the grace period), so their preemptors start in a later pass.
  //
  // The policy is told (PlacementPolicy::notePlaced) of every start decided, as the pass
  // applies it to its working copy; the caller need not tell it again.
  //
  // Deterministic for equal arguments and equal `random` state.
  Decisions run(const ClusterState& snapshot, const std::vector<Job>& jobs,
                const UsageLedger& usage, const SchedulerConfig& config, TimePoint now,
                Random& random);

 private:
  PlacementPolicy& policy_;
};

// The least-attained-service queue of a job (0 = highest).
size_t lasQueue(const SchedulerConfig& config, double attained_gpu_seconds);

}  // namespace gpool::sched
