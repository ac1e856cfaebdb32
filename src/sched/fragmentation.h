#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sched/cluster.h"

// FGD's fragmentation measure (Weng et al., "Beware of Fragmentation", USENIX ATC'23).
//
// A workload is summarised by its "typical tasks": the distinct task shapes (CPU, GPU count,
// per-GPU share, allowed GPU models) with their frequencies. For one node and one shape, the
// node's free GPU compute counts as fragmented when the shape cannot run there (wrong model,
// too little CPU, too few GPUs with enough free share); when it can, only the GPUs whose free
// share is below the shape's per-GPU share count; for a CPU-only shape all free GPU compute
// counts. The node's fragmentation is the frequency-weighted sum over shapes (in thousandths
// of a GPU), the cluster's the sum over nodes. FGD places each task where that measure grows
// least.
namespace gpool::sched {

struct TaskShape {
  uint64_t cpu_millis = 0;
  uint32_t gpu_count = 0;               // 0 = CPU only
  uint32_t gpu_milli = 0;               // per GPU, 1..1000 (1000 when gpu_count > 1)
  std::vector<std::string> gpu_models;  // allowed; empty = any
  double weight = 0;                    // frequency; normalised to sum 1 by the model

  bool operator==(const TaskShape& o) const {
    return cpu_millis == o.cpu_millis && gpu_count == o.gpu_count && gpu_milli == o.gpu_milli &&
           gpu_models == o.gpu_models;
  }
};

// Keeps the most frequent shapes until they cover `coverage_pct` percent of all tasks, as FGD's
// "typical pods" do (95 in the paper's experiments, added one shape at a time). Order: count
// descending, then CPU, per-GPU share, GPU count and allowed models ('|'-joined) descending, as
// the published code sorts. `shapes` carry raw counts in `weight`; the result is renormalised
// to sum 1.
std::vector<TaskShape> typicalShapes(std::vector<TaskShape> shapes, double coverage_pct = 95);

// Evaluates the measure fast: shapes are grouped per GPU model by (gpu_count, gpu_milli) with
// CPU thresholds sorted, so one node costs O(groups + GPUs) instead of O(shapes x GPUs).
//
// Thread-safety: immutable after construction; safe to share between threads.
class FragmentationModel {
 public:
  FragmentationModel() = default;
  explicit FragmentationModel(std::vector<TaskShape> shapes);

  const std::vector<TaskShape>& shapes() const { return shapes_; }
  bool empty() const { return shapes_.empty(); }

  // Expected fragmented GPU compute of a node (thousandths) whose GPUs all have `model` and
  // have `gpu_free[i]` thousandths free, with `cpu_free` millicores free.
  double nodeFragmentation(std::string_view model, uint64_t cpu_free, const uint32_t* gpu_free,
                           size_t gpus) const;
  // The same for a snapshot node (healthy GPUs only; mixed models handled shape by shape).
  double nodeFragmentation(const Node& node) const;
  // Sum over nodes.
  double clusterFragmentation(const ClusterState& cluster) const;

 private:
  struct Group {
    uint32_t gpu_count = 0;
    uint32_t gpu_milli = 0;
    std::vector<uint64_t> cpu;  // ascending CPU demands of the shapes in the group
    std::vector<double> cum_w;  // cum_w[i] = weight of shapes with cpu <= cpu[i]
  };
  struct ModelGroups {
    std::string model;
    std::vector<Group> groups;  // by gpu_milli descending
  };
  const ModelGroups& groupsFor(std::string_view model) const;
  ModelGroups buildGroups(std::string_view model) const;

  std::vector<TaskShape> shapes_;
  double total_weight_ = 0;
  // Built on construction for every model any shape names, plus one entry ("") used for
  // models no shape names (only unconstrained shapes apply there).
  std::vector<ModelGroups> by_model_;
};

}  // namespace gpool::sched
