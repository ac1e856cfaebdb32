#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace gpool::sched {

// A quality-of-service level (Slurm's QOS): a priority factor, a per-user GPU cap, and whether
// its jobs may be preempted or may preempt others.
struct QosLevel {
  std::string name = "normal";
  // Relative priority; the QoS factor of a job is priority / (the largest priority of any level).
  uint32_t priority = 0;
  // Most GPUs (thousandths) one user may hold at once in this QoS; 0 = no cap.
  uint64_t max_gpus_per_user = 0;
  // Jobs of this QoS may be evicted for higher-priority work regardless of their own flag.
  bool preemptible = false;
  // Jobs of this QoS may evict preemptible work of lower priority.
  bool can_preempt = true;
  // Seconds a job of this QoS gets between SIGTERM and SIGKILL when preempted (Slurm's QoS
  // GraceTime); unset: PreemptionConfig::grace_s.
  std::optional<int64_t> grace_s = std::nullopt;
};

// Weights of Slurm's multifactor priority: priority = sum(weight_i * factor_i) - nice, with each
// factor in [0, 1]. Weights are doubles here but keep Slurm's advice: use >= 1000 for a factor
// that must dominate.
struct PriorityWeights {
  double fairshare = 10000;
  double qos = 2000;
  double age = 1000;
  double job_size = 500;
  // The age factor reaches 1 after this long in the queue (Slurm's PriorityMaxAge).
  int64_t max_age_s = 7 * 24 * 3600;
  // When true the size factor favours small jobs (1 - gpus/capacity), which helps throughput on
  // shared GPUs; when false it favours large jobs as Slurm does by default.
  bool favor_small = true;
};

// The factors of one job, kept for explanations (`gpool` shows them as `sprio` does).
struct PriorityFactors {
  double fairshare = 0;
  double qos = 0;
  double age = 0;
  double job_size = 0;
  double nice = 0;
  double total = 0;
};

// Computes the multifactor priority of a job. `fairshare` is the job's association factor from
// computeFairTree, `qos_factor` its QoS factor, `waited_s` how long it has been eligible,
// `gpus` its GPU demand and `capacity` the pool's GPUs (both in thousandths).
PriorityFactors computePriority(const PriorityWeights& w, double fairshare, double qos_factor,
                                int64_t waited_s, uint64_t gpus, uint64_t capacity, int64_t nice);

// QoS factor of `level` among `levels`: its priority over the largest one (0 when all are 0).
double qosFactor(const QosLevel& level, const std::vector<QosLevel>& levels);

}  // namespace gpool::sched
