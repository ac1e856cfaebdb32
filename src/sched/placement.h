#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/random.h"
#include "sched/cluster.h"

// Placement: which node and which GPUs (or slices of one GPU) a job's tasks get. Feasibility
// is checked on every constraint; among feasible candidates a pluggable PlacementPolicy scores
// and the best wins (ties broken with the caller's Random, so a run is reproducible from its
// seed). Pure computation: no I/O, no clock.
namespace gpool::sched {

// Hard constraints on where a task may run, plus soft preferences.
struct Constraints {
  std::vector<std::string> gpu_models;  // allowed GPU models; empty = any
  uint32_t min_compute_capability = 0;  // major*10 + minor; 0 = any
  uint32_t min_cuda = 0;            // CUDA version the driver supports, major*100 + minor; 0 = any
  uint64_t min_gpu_memory_mib = 0;  // minimum total memory of each GPU used; 0 = any
  std::map<std::string, std::string> node_labels;  // every label must match exactly
  // Soft: nodes holding more of these datasets are preferred among equally good candidates.
  std::vector<std::string> datasets;
};

// What one task needs. `gpus` is in thousandths: 0 = CPU only; 1..999 = one slice of one GPU
// (its compute share is `gpus` unless `gpu_compute` says otherwise); N*1000 = N whole GPUs
// (each taken entirely: all its memory and compute). Any other value is invalid.
struct TaskRequest {
  uint32_t gpus = 0;
  uint64_t gpu_memory_mib = 0;  // a slice: the memory quota; whole GPUs: a minimum per GPU
  uint32_t gpu_compute = 0;     // a slice: compute thousandths; 0 = same as `gpus`
  uint64_t cpu_millis = 0;
  uint64_t ram_mib = 0;
  Constraints constraints;

  bool isSlice() const { return gpus > 0 && gpus < 1000; }
  uint32_t wholeGpus() const { return gpus >= 1000 ? gpus / 1000 : 0; }
  // The compute thousandths taken from each GPU used.
  uint32_t computePerGpu() const;
};

enum class GangScope : uint8_t {
  kSingleServer,  // every task on the same node
  kMultiServer,   // tasks may spread over nodes
};

// A job to place: `tasks` identical tasks, all or nothing (a gang).
struct PlacementRequest {
  std::string job;  // for explanations only
  TaskRequest task;
  uint32_t tasks = 1;
  GangScope scope = GangScope::kMultiServer;
  // kMultiServer only: spread the tasks over exactly this many nodes (Slurm's --nodes), at most
  // `tasks`; 0: over as many as the policy's choices give.
  uint32_t nodes = 0;
};

// Why a job could not be placed (Slurm-style pending reasons).
enum class PendingReason : uint8_t {
  kNone,        // placed
  kInvalid,     // the request itself is malformed (e.g. gpus = 1500)
  kConstraint,  // some constraint is satisfied by no node of the pool at all
  kResources,   // nodes satisfy every constraint, but not enough is free right now
};

std::string_view pendingReasonName(PendingReason reason);

struct PlacementResult {
  bool placed = false;
  std::vector<TaskAllocation> tasks;  // one per task when placed
  // Human-readable: where each task went and why (score, link level, locality), or why not.
  std::string explanation;
  PendingReason reason = PendingReason::kNone;
  // With kConstraint: the names of the constraints that no node satisfies, e.g. "gpu_model",
  // "min_compute_capability", "min_cuda", "min_gpu_memory", "node_label:zone=a", "gpu_count",
  // "cpu", "ram".
  std::vector<std::string> unsatisfiable;
};

enum class GpuChoices : uint8_t { kCanonical, kDistinct, kEvery };

class PlacementMemo;

// A scoring policy: given a feasible candidate (one task on one node with a concrete choice of
// GPUs), returns how good it is; the highest score wins. A policy may keep caches keyed on
// ClusterState::nodeVersion, hence score() is non-const.
//
// Thread-safety: none; one instance per thread.
class PlacementPolicy {
 public:
  PlacementPolicy();
  virtual ~PlacementPolicy();
  PlacementPolicy(const PlacementPolicy&) = delete;
  PlacementPolicy& operator=(const PlacementPolicy&) = delete;
  // Stable display name, e.g. "FGD", "BestFit".
  virtual std::string_view name() const = 0;
  virtual double score(const ClusterState& cluster, const TaskRequest& task,
                       const TaskAllocation& candidate) = 0;
  // Which GPU choices within a node place() offers to score(): only the canonical one (the
  // best-fitting GPU for a slice, the best-connected set for whole GPUs), one per distinct free
  // state of the eligible GPUs, or every eligible GPU.
  virtual GpuChoices gpuChoices() const { return GpuChoices::kCanonical; }
  // Equal-scored choices within one node: false takes the first (lowest GPU index), true one
  // at random.
  virtual bool randomWithinNode() const { return false; }
  // Candidates whose scores differ by less than this count as ties (broken at random).
  virtual double tieEpsilon() const { return 1e-9; }
  // How ties between equally scored nodes are broken (after data locality and gang reuse):
  // nullptr means uniformly at random; otherwise a rank per node, and the node of lowest rank
  // wins. The default returns nullptr unless setFixedTieOrder(true), in which case the order
  // is drawn from `random` on the first call and kept while the pool has `nodes` nodes. Not
  // thread-safe, like score().
  virtual const std::vector<uint32_t>* tieOrder(size_t nodes, Random& random);
  // The tie rule of the FGD paper's simulator (a Kubernetes 1.20.5 fork whose selectHost takes
  // the tied node of smallest name, after prefixing every node name with its index in one random
  // permutation per run): ties go to the earliest node of one random order drawn per run, so
  // equally scored tasks pile onto the same nodes instead of spreading.
  void setFixedTieOrder(bool fixed) { fixed_ties_ = fixed; }
  bool fixedTieOrder() const { return fixed_ties_; }
  // Told after the caller applied a placement this policy chose, for policies that remember
  // what runs where (e.g. GpuClustering). The default does nothing.
  virtual void notePlaced(const ClusterState& cluster, const TaskRequest& task,
                          const TaskAllocation& alloc) {
    (void)cluster;
    (void)task;
    (void)alloc;
  }
  // True when score() depends only on the task and the candidate's node (its state, fixed by
  // ClusterState::nodeVersion) and gpuChoices() is not kEvery with random choices: place()
  // then remembers each node's best choice per request shape and version (PlacementMemo) and
  // rescores a node only after it changed. A policy whose scores also depend on other nodes,
  // on what it was told (notePlaced) or on randomness must return false (the default).
  virtual bool nodeLocalScores() const { return false; }

  // The memo place() keeps for this policy (created on first use).
  PlacementMemo& memo();

 private:
  std::unique_ptr<PlacementMemo> memo_;
  bool fixed_ties_ = false;
  std::vector<uint32_t> tie_rank_;  // per node, while fixed_ties_
};

// Each node's best choice for a task shape, valid while the node keeps the version it was
// computed at. Up to kShapes shapes are kept (the oldest slot is reused after that); a shape
// is the whole TaskRequest (sizes and constraints).
class PlacementMemo {
 public:
  static constexpr size_t kShapes = 64;
  struct Entry {
    uint64_t version = 0;  // ClusterState::nodeVersion when computed; 0 = never
    double score = 0;
    uint64_t gpus = 0;  // the GPUs chosen, as a bitmask (GPU i = bit i)
    bool found = false;
  };
  // The entries (one per node, at least `nodes`) for `task`'s shape.
  std::vector<Entry>& entries(const TaskRequest& task, size_t nodes);
  // Entries handed out for a new shape (for tests).
  size_t shapesSeen() const { return seen_; }

 private:
  std::vector<TaskRequest> shapes_;
  std::vector<std::vector<Entry>> tables_;
  size_t next_ = 0;
  size_t seen_ = 0;
};

// Places all tasks of `request` or none. `cluster` is not modified (the caller applies the
// returned allocations). Soft data locality breaks ties among the best-scored candidates
// (after the policy, before randomness).
PlacementResult place(const ClusterState& cluster, const PlacementRequest& request,
                      PlacementPolicy& policy, Random& random);

// Feasibility of one task on one node, ignoring what is allocated (static constraints only).
// Returns the name of the first violated constraint, or an empty string.
std::string staticMismatch(const Node& node, const TaskRequest& task);
// Whether the task fits on the node right now (static constraints and free resources).
bool fitsNow(const Node& node, const TaskRequest& task);

// Enumerates the GPU choices for one task on one node (empty when it does not fit), as
// described at PlacementPolicy::gpuChoices.
std::vector<TaskAllocation> candidateAllocations(const ClusterState& cluster, size_t node,
                                                 const TaskRequest& task, GpuChoices choices);

}  // namespace gpool::sched
