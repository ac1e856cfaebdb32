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
  // Jobs that must finish first (afterok). A dependency counts as met when its id is no longer
  // among the jobs handed to the pass: the caller drops a job once it completed successfully,
  // and cancels dependents of a failed one.
  std::vector<JobId> dependencies;
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
  // Running jobs: what they hold (already applied to the snapshot) and since when.
  std::vector<TaskAllocation> allocation;
  TimePoint start_time{};
  // Started beyond its group's guaranteed quota: reclaimable by groups below their share.
  bool borrowed = false;
  // Set once a preemption was decided: the job leaves by then and is not chosen again.
  std::optional<TimePoint> preempt_deadline;
  // Idle reclaim input: since when the job's GPU utilisation has stayed below the configured
  // threshold (the controller keeps this from telemetry); unset when busy.
  std::optional<TimePoint> idle_since;
  // Whether the user was already warned about this idle period.
  bool idle_warned = false;
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
