#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "sched/cluster.h"
#include "sched/fragmentation.h"
#include "sched/placement.h"

// Readers for the Alibaba "openb" traces (cluster-trace-gpu-v2023, the FGD paper's input):
// a node list and a pod (task) list, both CSV with a header row. See
// data/traces/alibaba-gpu-v2023/README.md for the columns.
namespace gpool::sim {

struct OpenbNode {
  std::string name;
  uint64_t cpu_millis = 0;
  uint64_t memory_mib = 0;
  uint32_t gpus = 0;
  std::string model;
};

struct OpenbPod {
  std::string name;
  uint64_t cpu_millis = 0;
  uint64_t memory_mib = 0;
  uint32_t num_gpu = 0;
  uint32_t gpu_milli = 0;               // per GPU
  std::vector<std::string> gpu_models;  // from gpu_spec, '|'-separated; empty = any

  // Total GPU request in thousandths (num_gpu * gpu_milli).
  uint64_t gpuRequestMilli() const { return uint64_t{num_gpu} * gpu_milli; }
  sched::TaskRequest toTask() const;
};

// The largest pools the simulator builds, from node lists and cluster specs alike: a mistyped
// spec or a corrupt list is refused instead of allocating without bound (the traces of
// data/traces have at most 6,212 GPUs).
inline constexpr uint32_t kMaxGpusPerServer = 1024;
inline constexpr uint64_t kMaxClusterGpus = 100'000;

// Errors: IoError when the file cannot be read, InvalidArgument (with file:line) for a bad row
// or a header without the needed columns. Nodes: more than kMaxGpusPerServer GPUs on a server
// or kMaxClusterGpus in all is InvalidArgument.
Result<std::vector<OpenbNode>> readOpenbNodes(const std::string& path);
Result<std::vector<OpenbPod>> readOpenbPods(const std::string& path);

// A pool snapshot with every node free. GPU memory is not in the trace and is left at 0.
sched::ClusterState buildCluster(const std::vector<OpenbNode>& nodes);

// The workload's task shapes with their counts (in first-seen order), for typicalShapes().
std::vector<sched::TaskShape> shapeCounts(const std::vector<OpenbPod>& pods);

}  // namespace gpool::sim
