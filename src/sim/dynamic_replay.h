#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "sched/cluster.h"
#include "sched/scheduler.h"
#include "sim/dynamic_trace.h"

// The dynamic replay: jobs arrive at their trace times, wait in the queue, run for their trace
// duration on the GPUs the scheduling pass gives them and leave. Time is simulated (no clock);
// every scheduling decision comes from sched::SchedulerPass, the code the controller runs.
namespace gpool::sim {

struct DynamicOptions {
  sched::QueueOrder order = sched::QueueOrder::kMultifactor;
  // Round every request up to whole GPUs (teams sharing by hand) instead of slicing.
  bool exclusive = false;
  // Seconds between scheduling passes (the controller's loop period); passes run only when
  // something changed, or periodically while preemption may act.
  int64_t interval_s = 60;
  // Time limit handed to backfill: duration x factor (1 = exact oracle estimates).
  double limit_factor = 1.0;
  // Half-life of the decayed usage behind the fair-share factor.
  int64_t half_life_s = 24 * 3600;
  // Placement policy name (sched::makePolicy).
  std::string placement = "gpool";
  uint64_t seed = 42;
  // Called now and then with the fraction of jobs that arrived so far.
  std::function<void(double)> progress;
  // Points kept per time series for plots.
  size_t timeline_points = 400;
};

struct TimelinePoint {
  int64_t t = 0;
  double alloc_pct = 0;  // GPU compute allocated / capacity
  double used_pct = 0;   // GPU compute the jobs asked for / capacity (< alloc when exclusive)
  size_t queue = 0;      // pending jobs
  size_t running = 0;
};

struct DynamicResult {
  std::string workload;
  std::string policy;  // queue order name
  std::string mode;    // "sliced" or "exclusive"
  std::string placement;
  size_t jobs = 0;  // loaded
  size_t finished = 0;
  size_t skipped = 0;     // could never run on this cluster (too large)
  size_t unfinished = 0;  // still queued when nothing could run any more
  double jct_avg_s = 0, jct_p50_s = 0, jct_p99_s = 0;
  double queue_avg_s = 0, queue_p50_s = 0, queue_p95_s = 0, queue_p99_s = 0;
  // Time-averaged over the arrival window [first submit, last submit].
  double alloc_pct = 0;
  double used_pct = 0;
  // Jain's index over groups of x_g = mean(duration / JCT) of the group's finished jobs.
  double jain = 0;
  size_t groups = 0;
  uint64_t preemptions = 0;
  size_t passes = 0;
  double pass_ms_avg = 0;
  int64_t makespan_s = 0;
  double wall_s = 0;
  std::vector<double> jcts;  // sorted, for the CDF
  std::vector<TimelinePoint> timeline;
};

// Replays `jobs` (sorted by submit time) on `cluster` (nothing allocated) under `options`.
// Deterministic for a given seed. Fails only on bad options (unknown placement policy).
Result<DynamicResult> runDynamic(const std::vector<DynJob>& jobs,
                                 const sched::ClusterState& cluster, const DynamicOptions& options,
                                 const std::string& workload_name);

// The scheduler configuration a queue order runs with in the replay (documented in
// docs/scheduler-policy.md): FIFO and SJF never preempt; LAS preempts any job of a lower
// queue (Tiresias); fair-share reclaims capacity between groups.
sched::SchedulerConfig replayConfig(sched::QueueOrder order);

// Percentile (0..100) of sorted values, by nearest rank; 0 for none.
double percentile(const std::vector<double>& sorted, double p);
// Jain's fairness index of `x`: (sum x)^2 / (n sum x^2); 1 when all equal, 0 for none.
double jainIndex(const std::vector<double>& x);

}  // namespace gpool::sim
