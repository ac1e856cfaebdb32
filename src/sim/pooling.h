#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/result.h"
#include "sched/scheduler.h"
#include "sim/dynamic_replay.h"
#include "sim/dynamic_trace.h"

// The claim pooling exists for, measured: the same jobs run (a) the way a team shares GPUs by
// hand, each job holding whole GPUs exclusively, first come first served, and (b) on gpool,
// with slices of GPUs and gpool's scheduling; each on pools of 1..N servers of one kind. For
// each it reports the GPU share allocated and the share the jobs use, and the smallest pool
// that keeps the queueing delay (p50 and p95) the exclusive way has on the reference pool.
//
// Model (stated in docs/scheduler-placement.md): a job uses exactly the GPU compute it asks
// for while it runs (a 0.3-GPU job uses 0.3 of a GPU, also when it holds a whole one); run
// times come from the trace and do not depend on the mode; GPUs, CPU and RAM are checked as
// the scheduler checks them. Idle time inside an allocation (a person not running anything) is
// not modelled, so exclusive use looks better here than it is in practice.
namespace gpool::sim {

struct PoolingOptions {
  // One server: "G[:MODEL[:MEM_GIB[:CORES]]]" (as one group of buildDynamicCluster's spec).
  std::string server = "8:V100:32:96";
  uint32_t min_servers = 1;
  uint32_t max_servers = 8;
  // The pool the team has today; its exclusive delays are the target. 0: max_servers.
  uint32_t reference_servers = 0;
  sched::QueueOrder exclusive_order = sched::QueueOrder::kFifo;
  sched::QueueOrder pooled_order = sched::QueueOrder::kMultifactor;
  int64_t interval_s = 60;
  std::string placement = "gpool";
  uint64_t seed = 42;
  // Called after each replay with (done, total).
  std::function<void(size_t, size_t)> progress;
};

struct PoolingPoint {
  bool exclusive = false;
  uint32_t servers = 0;
  uint64_t gpus = 0;
  DynamicResult result;  // queue_p50_s / queue_p95_s, alloc_pct, used_pct, timeline
};

struct PoolingResult {
  std::string workload;
  std::string server;
  uint32_t gpus_per_server = 0;
  uint32_t reference_servers = 0;
  // Exclusive use on the reference pool: the delays to keep.
  double target_p50_s = 0;
  double target_p95_s = 0;
  // Every replay, exclusive ones first, each in ascending pool size.
  std::vector<PoolingPoint> points;
  // The smallest pool (servers) of the range from which on every larger one keeps both
  // delays within the target plus one scheduling interval and finishes every job; 0 when no
  // pool of the range does.
  uint32_t smallest_exclusive = 0;
  uint32_t smallest_pooled = 0;

  const PoolingPoint* find(bool exclusive, uint32_t servers) const;
};

// Runs 2 x (max - min + 1) replays. Fails on a bad server spec or range, or an unknown
// placement policy.
Result<PoolingResult> runPooling(const std::vector<DynJob>& jobs, const PoolingOptions& options,
                                 const std::string& workload_name);

// The table (one row per replay, then the two smallest pools and what they save) and one JSON
// object per line (one per replay, then a summary line).
std::string formatPoolingTable(const PoolingResult& result);
std::string poolingJsonLines(const PoolingResult& result);

// GPU share over simulated time (days) on a pool of `servers` (the reference pool when 0):
// allocated and used share, exclusive and sliced (four lines). Empty when that pool was not run.
std::string poolingShareSvg(const PoolingResult& result, uint32_t servers);
// p50 and p95 queueing delay (hours) against pool size, exclusive and sliced, and the target.
std::string poolingDelaySvg(const PoolingResult& result);

}  // namespace gpool::sim
