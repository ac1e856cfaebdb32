#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/result.h"
#include "sched/fragmentation.h"
#include "sim/openb_trace.h"

// The FGD-mode replay (the FGD paper's experiment, method in
// data/traces/fgd-atc23-default/README.md): per seed the pod list is shuffled, topped up with
// pods drawn with replacement until the summed GPU request reaches `tune` x the cluster's GPU
// capacity, and the pods arrive one by one and never leave; a pod that fits nowhere fails and
// is not retried. After each arrival the allocated and arrived GPU shares are logged.
namespace gpool::sim {

// Arrived-load levels (percent of GPU capacity) the reports use.
inline constexpr std::array<int, 7> kReportLevels = {80, 90, 95, 100, 110, 120, 130};
inline constexpr int kMaxLevel = 130;

struct SeedRun {
  uint64_t seed = 0;
  // alloc_pct[k] (k = 0..kMaxLevel) = allocated GPU % of capacity at arrived k%, computed as
  // the published analysis does (allocationByLevel).
  std::vector<double> alloc_pct;
  // FGD fragmentation (% of GPU capacity) when the arrived request first reaches each report
  // level (the last value carries on if the arrivals end earlier).
  std::vector<double> frag_pct;
  uint64_t pods = 0;
  uint64_t failed = 0;
  double seconds = 0;  // CPU-time proxy: wall time of this run
};

struct PolicyResult {
  std::string workload;  // pod file base name without .csv
  std::string policy;
  std::vector<SeedRun> runs;

  // Mean and sample standard deviation over seeds of alloc_pct at `level`.
  double meanAlloc(int level) const;
  double stdAlloc(int level) const;
  double meanFrag(size_t report_index) const;
  double meanFailed() const;
};

struct FgdWorkload {
  std::string name;
  std::vector<OpenbPod> pods;
  std::shared_ptr<const sched::FragmentationModel> frag_model;  // from the workload's shapes
};

// Share of tasks (percent) the typical shapes must cover: the published experiments' setting
// (scripts/generate_config_and_run.py: podPopularityThreshold 95, podIncreaseStep 1, CPU-only
// pods included), computed from the workload's pod list before the top-up.
inline constexpr double kTypicalCoverage = 95;

// The published analysis (experiments/analysis/merge_alloc_discrete.py): the simulator logs
// (arrived %, allocated %) after every arrival; the value at level k is the mean allocation
// over the rows whose arrived % rounds to k, or, when none does, over those rounding to
// k - 1 .. k + 1. `rows` are (arrived %, allocated %) in arrival order; returns kMaxLevel + 1
// values (a level no row is near keeps the previous level's value).
std::vector<double> allocationByLevel(const std::vector<std::pair<double, double>>& rows);

// Loads a pod list and derives its fragmentation model (typical shapes, CPU pods included).
Result<FgdWorkload> loadWorkload(const std::string& pods_path);

struct FgdOptions {
  double tune = 1.3;
  unsigned threads = 2;
  // Called after each finished (policy, seed) run with (done, total); may be empty.
  std::function<void(size_t, size_t)> progress;
};

// One seed of one policy. Fails only on an unknown policy name.
Result<SeedRun> runSeed(const std::vector<OpenbNode>& nodes, const FgdWorkload& workload,
                        const std::string& policy, uint64_t seed, double tune);

// Every (policy, seed) pair, spread over `options.threads` threads. Results are in `policies`
// order, runs in `seeds` order, independent of the thread count.
Result<std::vector<PolicyResult>> runPolicies(const std::vector<OpenbNode>& nodes,
                                              const FgdWorkload& workload,
                                              const std::vector<std::string>& policies,
                                              const std::vector<uint64_t>& seeds,
                                              const FgdOptions& options);

// Parses "42-51", "42", "42,43,50" or combinations ("42-45,50").
Result<std::vector<uint64_t>> parseSeeds(const std::string& text);

}  // namespace gpool::sim
