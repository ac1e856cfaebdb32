#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "sched/cluster.h"
#include "sched/placement.h"

// The scheduler's view of a job: who asked, what for, and where it stands. A plain value that the
// controller builds from its store and the simulator from a trace; the scheduling pass never
// modifies it.
namespace gpool::sched {

using JobId = uint64_t;

enum class JobState : uint8_t {
  kPending,
  kRunning,
};

// Slurm's dependency types: start after the job succeeded (afterok), failed (afternotok), or
// ended in any state (afterany).
enum class DependencyKind : uint8_t { kAfterOk, kAfterNotOk, kAfterAny };

// Where a job that another one depends on stands, as the caller knows it. The pass decides
// from it whether the dependency is met, still open, or can never be met.
enum class DependencyState : uint8_t {
  kOpen,       // not ended yet
  kSucceeded,  // completed with exit code 0
  kFailed,     // ended for good any other way (failed, cancelled, timeout, out of memory)
  // Ended in a state it may be requeued from (preempted, node failure): met for afternotok
  // and afterany; afterok waits, as the job may still run again.
  kRequeueable,
  kUnknown,  // no such job
};

struct Dependency {
  JobId job = 0;
  DependencyKind kind = DependencyKind::kAfterOk;
  DependencyState state = DependencyState::kOpen;
};

// A hold keeps a pending job out of the queue until it is released (Slurm's hold).
enum class Hold : uint8_t { kNone, kUser, kAdmin };

struct Job {
  JobId id = 0;
  std::string user;
  std::string group;
  std::string qos = "normal";
  TimePoint submit_time{};
  // Wall-clock limit in seconds; 0 = none given (the pass then uses the configured default).
  // Backfill trusts it: a job is assumed to end by start_time + time_limit_s.
  int64_t time_limit_s = 0;
  // Subtracted from the priority (Slurm's nice); may be negative only for admins.
  int64_t nice = 0;
  // The job accepts being evicted (and requeued) for more important work.
  bool preemptible = false;
  // Jobs that must end first, and how (see DependencyState). The pass decides: all met, the job
  // may start; one that can never be met cancels it (Decisions::cancels); else it waits.
  std::vector<Dependency> dependencies;
  Hold hold = Hold::kNone;
  // Elements of a job array ("--array 0-31%4"): the array's id (its first element's) and the
  // most elements that may run at once (Slurm's JobArrayTaskLimit); 0 and 0 for other jobs.
  JobId array_id = 0;
  uint32_t array_limit = 0;
  PlacementRequest request;

  // Hints for the simulator's research queue orders; the controller leaves them at 0.
  // Shortest-job-first uses the (oracle) run time; least-attained-service the GPU-seconds the
  // job has received so far (kept across preemptions).
  int64_t expected_duration_s = 0;
  double attained_gpu_seconds = 0;

  JobState state = JobState::kPending;
  // Running jobs: what they hold (already applied to the snapshot) and since when. Whether a
  // running job is borrowed (beyond its group's guaranteed quota, so reclaimable) is decided
  // by the pass from the group's running jobs, oldest first, so it follows quota changes.
  std::vector<TaskAllocation> allocation;
  TimePoint start_time{};
  // Set once a preemption was decided: the job leaves by then and is not chosen again.
  std::optional<TimePoint> preempt_deadline;
  // Pending jobs: the jobs evicted for this one by earlier passes (PreemptDecision::for_job),
  // kept by the caller until this job starts. What they free is this job's alone while it waits
  // (no other job, its victims included, is placed there), and none of them is chosen again as
  // its victim: a preemptor owns what it preempted and never preempts the same job twice.
  std::vector<JobId> victims;
  // Idle reclaim input: since when the job's GPU utilisation has stayed below the configured
  // threshold (the controller keeps this from telemetry); unset when busy.
  std::optional<TimePoint> idle_since;
  // Whether the user was already warned about this idle period.
  bool idle_warned = false;
  // Whether idle reclaim may evict the job once warned (gpoold's per-QoS action "warn": no).
  bool idle_reclaimable = true;
};

// GPUs the job asks for, in thousandths (a 0.25 slice = 250, two whole GPUs = 2000).
inline uint64_t gpuDemand(const Job& job) {
  return uint64_t{job.request.task.gpus} * job.request.tasks;
}

// Compute the job takes from the pool, in thousandths of a GPU (what utilisation counts).
inline uint64_t computeDemand(const Job& job) {
  const TaskRequest& t = job.request.task;
  if (t.gpus == 0) return 0;
  uint64_t per_task = t.isSlice() ? (t.gpu_compute ? t.gpu_compute : t.gpus) : t.gpus;
  return per_task * job.request.tasks;
}

}  // namespace gpool::sched
