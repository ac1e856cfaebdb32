#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"

// The pool snapshot the scheduler works on: servers ("nodes"), their GPUs with what is still
// free on each, and the interconnect between the GPUs of one server. It is a plain value with
// no I/O: the controller builds it from the node registry, the simulator from a trace, and
// both apply and release allocations on it while they decide.
//
// Units (as everywhere in gpool): GPU memory and RAM in MiB, GPU compute share in thousandths
// of a GPU (1000 = whole GPU), CPU in millicores.
namespace gpool::sched {

// How two GPUs of one server talk to each other, best first. The numeric order is the
// preference order: a gang of GPUs is placed on the set whose worst pair is smallest.
enum class LinkLevel : uint8_t {
  kSelf = 0,         // the same GPU
  kNvLink = 1,       // NVLink / NVSwitch
  kPcieSwitch = 2,   // behind the same PCIe switch
  kPcieHost = 3,     // through the same CPU's host bridge
  kCrossSocket = 4,  // across CPU sockets (SMP interconnect); also the default when unknown
};

std::string_view linkLevelName(LinkLevel level);

struct Gpu {
  uint32_t index = 0;  // position on its node (NVML index / minor); equals its slot in gpus
  std::string uuid;
  std::string model;                // e.g. "A100-SXM4-80GB", "T4", "G2"
  uint32_t compute_capability = 0;  // major*10 + minor, e.g. 80 for 8.0; 0 = unknown
  uint32_t cuda_version = 0;        // its driver's CUDA, major*100 + minor (1202); 0 = unknown
  uint64_t memory_total_mib = 0;
  uint64_t memory_free_mib = 0;
  uint32_t compute_free = 1000;  // thousandths still unallocated
  bool healthy = true;
  std::string health_reason;  // why it is unhealthy, for pending reasons; empty when healthy

  // No slice of this GPU is handed out.
  bool idle() const { return compute_free == 1000 && memory_free_mib == memory_total_mib; }
};

struct Node {
  std::string name;
  std::map<std::string, std::string> labels;
  uint64_t cpu_total_millis = 0;
  uint64_t cpu_free_millis = 0;
  uint64_t ram_total_mib = 0;
  uint64_t ram_free_mib = 0;
  // False for drained/down servers: nothing new is placed there, running work stays.
  bool schedulable = true;
  // False for servers that cannot hold a GPU slice to its limits (no loadable interposer, or
  // no backstop): no slice is placed there; whole GPUs are.
  bool enforces_slices = true;
  std::vector<std::string> datasets;  // datasets already cached on this server
  std::vector<Gpu> gpus;
  // Row-major gpus.size() x gpus.size() matrix; empty means unknown (every pair kCrossSocket,
  // i.e. no preference among GPUs of this node).
  std::vector<LinkLevel> links;

  LinkLevel link(size_t a, size_t b) const;
  bool holdsDataset(std::string_view dataset) const;
  // Sum of compute_free over healthy GPUs, in thousandths.
  uint64_t gpuComputeFree() const;
};

// One piece of one GPU given to a task.
struct GpuSlice {
  uint32_t gpu_index = 0;
  uint64_t memory_mib = 0;
  uint32_t compute = 0;  // thousandths

  bool operator==(const GpuSlice&) const = default;
};

// What one task holds on one node. Produced by place(), applied with ClusterState::apply and
// given back with ClusterState::release.
struct TaskAllocation {
  size_t node = 0;  // index into ClusterState::nodes()
  uint64_t cpu_millis = 0;
  uint64_t ram_mib = 0;
  std::vector<GpuSlice> gpus;

  bool operator==(const TaskAllocation&) const = default;
};

// The snapshot. Node indices are stable for the life of the object (nodes are only added).
//
// Besides the nodes it keeps a feasibility index (which nodes may take a slice of a given
// compute share, or a given number of whole idle GPUs) and a version per node, both kept
// current by addNode/apply/release/mutableNode, so that placement visits only the nodes that
// may fit and caches keyed on a node's version stay exact.
//
// Thread-safety: none; a value owned by one scheduling pass (the index is refreshed lazily,
// also from const methods). Copying is the way to "try" a decision (simulate-before-evict).
class ClusterState {
 public:
  ClusterState() = default;

  // Adds a node and returns its index. GPU indices are renumbered to their position, the
  // links matrix is dropped if it has the wrong size, and free amounts are clamped to totals.
  size_t addNode(Node node);

  const std::vector<Node>& nodes() const { return nodes_; }
  size_t size() const { return nodes_.size(); }
  const Node& node(size_t i) const { return nodes_[i]; }
  // Mutable access for the owner (e.g. to mark a node unschedulable or a GPU unhealthy). The
  // node gets a new version and its index entry is refreshed before the next query: make the
  // changes before the next placement on this snapshot, and call again for later changes.
  Node& mutableNode(size_t i);
  std::optional<size_t> findNode(std::string_view name) const;

  // Takes the allocation's resources from its node. Fails with InvalidArgument (unknown node or
  // GPU index) or ResourceExhausted (not enough free), naming the node and resource; on failure
  // nothing changes. Allocates nothing on success.
  Status apply(const TaskAllocation& alloc);
  // Gives the resources back. Fails with InvalidArgument when it would exceed a total (a
  // release of something never applied); on failure nothing changes.
  Status release(const TaskAllocation& alloc);

  // Pool totals over all nodes (schedulable or not), healthy GPUs only.
  uint64_t gpuCount() const;
  uint64_t gpuComputeTotal() const;  // thousandths (1000 per GPU)
  uint64_t gpuComputeFree() const;   // thousandths

  // Changes with every apply/release/mutableNode of the node. Versions come from one
  // process-wide counter, so two snapshots (e.g. a copy and its original) show the same
  // version for a node only if that node is in the same state in both: a cache keyed on
  // (node index, version) is exact across copies.
  uint64_t nodeVersion(size_t i) const { return versions_[i]; }

  // The feasibility index: calls f(node index) in ascending order for every schedulable node
  // that may take, right now, one task asking for `whole_gpus` whole idle GPUs (when > 0), or
  // else one slice of `slice_compute` thousandths of one GPU (when > 0), or else CPU only. A
  // superset of the nodes where such a task fits (CPU, RAM, memory and constraints are not
  // indexed), never missing one: a node is skipped only if its largest free compute share
  // among healthy GPUs is below the slice, or it has fewer healthy idle GPUs than asked.
  template <typename F>
  void forEachMayFit(uint32_t slice_compute, uint32_t whole_gpus, F&& f) const;

  // Share buckets of the index: a node's largest free compute share (healthy GPUs) divided
  // by this; nodes without a healthy GPU are in bucket 0.
  static constexpr uint32_t kShareStep = 125;
  static constexpr uint32_t kShareBuckets = 1000 / kShareStep + 1;
  // Idle-GPU buckets: nodes with this many healthy idle GPUs or more share the last bucket.
  static constexpr uint32_t kIdleBuckets = 17;

 private:
  void refreshIndex(size_t i) const;
  void refreshDirty() const;

  std::vector<Node> nodes_;
  std::vector<uint64_t> versions_;
  std::unordered_map<std::string, size_t> by_name_;
  // Index: per node its share bucket and idle bucket (kNone = unschedulable, in no bitset),
  // and one bitset (64 nodes a word) per bucket.
  static constexpr uint8_t kNone = 0xff;
  mutable std::vector<uint8_t> share_bucket_;
  mutable std::vector<uint8_t> idle_bucket_;
  mutable std::vector<uint64_t> share_bits_[kShareBuckets];
  mutable std::vector<uint64_t> idle_bits_[kIdleBuckets];
  mutable std::vector<size_t> dirty_;  // nodes handed out by mutableNode, to refresh
};

template <typename F>
void ClusterState::forEachMayFit(uint32_t slice_compute, uint32_t whole_gpus, F&& f) const {
  refreshDirty();
  const size_t words = (nodes_.size() + 63) / 64;
  for (size_t w = 0; w < words; ++w) {
    uint64_t bits = 0;
    if (whole_gpus > 0) {
      for (uint32_t b = std::min(whole_gpus, kIdleBuckets - 1); b < kIdleBuckets; ++b)
        bits |= idle_bits_[b][w];
    } else {
      uint32_t from = std::min(slice_compute, 1000u) / kShareStep;
      for (uint32_t b = from; b < kShareBuckets; ++b)
        bits |= share_bits_[b][w];
    }
    while (bits != 0) {
      int bit = __builtin_ctzll(bits);
      bits &= bits - 1;
      f(w * 64 + static_cast<size_t>(bit));
    }
  }
}

}  // namespace gpool::sched
