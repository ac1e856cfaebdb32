#include "sched/placement.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

namespace gpool::sched {

uint32_t TaskRequest::computePerGpu() const {
  if (isSlice()) return gpu_compute != 0 ? gpu_compute : gpus;
  return gpus >= 1000 ? 1000 : 0;
}

PlacementPolicy::PlacementPolicy() = default;
PlacementPolicy::~PlacementPolicy() = default;

PlacementMemo& PlacementPolicy::memo() {
  if (!memo_) memo_ = std::make_unique<PlacementMemo>();
  return *memo_;
}

const std::vector<uint32_t>* PlacementPolicy::tieOrder(size_t nodes, Random& random) {
  if (!fixed_ties_) return nullptr;
  if (tie_rank_.size() != nodes) {
    tie_rank_.resize(nodes);
    for (size_t i = 0; i < nodes; ++i)
      tie_rank_[i] = static_cast<uint32_t>(i);
    random.shuffle(tie_rank_);
  }
  return &tie_rank_;
}

namespace {

bool sameShape(const TaskRequest& a, const TaskRequest& b) {
  return a.gpus == b.gpus && a.gpu_memory_mib == b.gpu_memory_mib &&
         a.gpu_compute == b.gpu_compute && a.cpu_millis == b.cpu_millis && a.ram_mib == b.ram_mib &&
         a.constraints.min_compute_capability == b.constraints.min_compute_capability &&
         a.constraints.min_cuda == b.constraints.min_cuda &&
         a.constraints.min_gpu_memory_mib == b.constraints.min_gpu_memory_mib &&
         a.constraints.gpu_models == b.constraints.gpu_models &&
         a.constraints.node_labels == b.constraints.node_labels &&
         a.constraints.datasets == b.constraints.datasets;
}

}  // namespace

std::vector<PlacementMemo::Entry>& PlacementMemo::entries(const TaskRequest& task, size_t nodes) {
  size_t slot = shapes_.size();
  for (size_t i = 0; i < shapes_.size(); ++i) {
    if (sameShape(shapes_[i], task)) {
      slot = i;
      break;
    }
  }
  if (slot == shapes_.size()) {
    ++seen_;
    if (shapes_.size() < kShapes) {
      shapes_.push_back(task);
      tables_.emplace_back();
    } else {
      // Reuse the oldest slot: its entries are for another shape, so forget them.
      slot = next_;
      next_ = (next_ + 1) % kShapes;
      shapes_[slot] = task;
      tables_[slot].assign(tables_[slot].size(), Entry{});
    }
  }
  std::vector<Entry>& table = tables_[slot];
  if (table.size() < nodes) table.resize(nodes);
  return table;
}

std::string_view pendingReasonName(PendingReason reason) {
  switch (reason) {
    case PendingReason::kNone: return "None";
    case PendingReason::kInvalid: return "Invalid";
    case PendingReason::kConstraint: return "Constraint";
    case PendingReason::kResources: return "Resources";
  }
  return "Unknown";
}

namespace {

// Static eligibility of one GPU for the task (model, capability, memory size, health).
bool gpuEligible(const Gpu& g, const TaskRequest& task) {
  if (!g.healthy) return false;
  const Constraints& c = task.constraints;
  if (!c.gpu_models.empty() &&
      std::find(c.gpu_models.begin(), c.gpu_models.end(), g.model) == c.gpu_models.end()) {
    return false;
  }
  if (g.compute_capability < c.min_compute_capability) return false;
  if (g.cuda_version < c.min_cuda) return false;
  if (g.memory_total_mib < c.min_gpu_memory_mib) return false;
  if (g.memory_total_mib < task.gpu_memory_mib) return false;
  return true;
}

// Whether `g` can take one more GPU share of the task right now.
bool gpuFreeFor(const Gpu& g, const TaskRequest& task) {
  if (task.isSlice()) {
    return g.compute_free >= task.computePerGpu() && g.memory_free_mib >= task.gpu_memory_mib;
  }
  return g.idle();
}

// Every violated static constraint of the task on the node (names as in PlacementResult).
std::vector<std::string> staticMismatches(const Node& node, const TaskRequest& task) {
  std::vector<std::string> out;
  if (!node.schedulable) out.push_back("schedulable");
  for (const auto& [key, value] : task.constraints.node_labels) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) {
      out.push_back("node_label:" + key + "=" + value);
    }
  }
  if (node.cpu_total_millis < task.cpu_millis) out.push_back("cpu");
  if (node.ram_total_mib < task.ram_mib) out.push_back("ram");
  if (task.gpus == 0) return out;
  if (task.isSlice() && !node.enforces_slices) out.push_back("slice_enforcement");
  const Constraints& c = task.constraints;
  bool model = false, capability = false, cuda = false, memory = false;
  uint32_t eligible = 0;
  for (const Gpu& g : node.gpus) {
    if (!g.healthy) continue;
    model |= c.gpu_models.empty() ||
             std::find(c.gpu_models.begin(), c.gpu_models.end(), g.model) != c.gpu_models.end();
    capability |= g.compute_capability >= c.min_compute_capability;
    cuda |= g.cuda_version >= c.min_cuda;
    memory |=
        g.memory_total_mib >= c.min_gpu_memory_mib && g.memory_total_mib >= task.gpu_memory_mib;
    if (gpuEligible(g, task)) ++eligible;
  }
  if (!model) out.push_back("gpu_model");
  if (!capability) out.push_back("min_compute_capability");
  if (!cuda) out.push_back("min_cuda");
  if (!memory) out.push_back("min_gpu_memory");
  uint32_t needed = task.isSlice() ? 1 : task.wholeGpus();
  if (model && capability && cuda && memory && eligible < needed) out.push_back("gpu_count");
  return out;
}

bool validRequest(const PlacementRequest& request, std::string* why) {
  const TaskRequest& t = request.task;
  if (request.tasks == 0) {
    *why = "job " + request.job + " asks for 0 tasks";
    return false;
  }
  if (t.gpus >= 1000 && t.gpus % 1000 != 0) {
    *why = "job " + request.job + " asks for " + std::to_string(t.gpus) +
           "/1000 GPUs per task: a task gets whole GPUs or one slice of one GPU";
    return false;
  }
  if (t.isSlice() && t.computePerGpu() > 1000) {
    *why = "job " + request.job + " asks for a compute share above 1000/1000";
    return false;
  }
  if (request.nodes > request.tasks) {
    *why = "job " + request.job + " asks for " + std::to_string(request.nodes) + " nodes for " +
           std::to_string(request.tasks) + " task(s): at most one node per task";
    return false;
  }
  if (request.nodes > 1 && request.scope == GangScope::kSingleServer) {
    *why = "job " + request.job + " asks for " + std::to_string(request.nodes) +
           " nodes but for a single server";
    return false;
  }
  return true;
}

// Ranks GPU sets by interconnect: worst pair first, then the sum over pairs.
std::pair<int, int> setCost(const Node& node, const std::vector<uint32_t>& set) {
  int worst = 0, sum = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    for (size_t j = i + 1; j < set.size(); ++j) {
      int l = static_cast<int>(node.link(set[i], set[j]));
      worst = std::max(worst, l);
      sum += l;
    }
  }
  return {worst, sum};
}

// The best-connected k-subset of `free` (indices ascending). Exhaustive for small nodes,
// greedy (grow from each seed GPU by the cheapest link) for large ones.
std::vector<uint32_t> bestConnectedSet(const Node& node, const std::vector<uint32_t>& free,
                                       uint32_t k) {
  if (free.size() <= k) return free;
  if (node.links.empty()) return {free.begin(), free.begin() + k};
  std::vector<uint32_t> best;
  std::pair<int, int> best_cost{std::numeric_limits<int>::max(), 0};
  if (free.size() <= 16) {
    std::vector<bool> pick(free.size(), false);
    std::fill(pick.begin(), pick.begin() + k, true);
    std::vector<uint32_t> set;
    do {
      set.clear();
      for (size_t i = 0; i < free.size(); ++i) {
        if (pick[i]) set.push_back(free[i]);
      }
      auto cost = setCost(node, set);
      if (cost < best_cost) {
        best_cost = cost;
        best = set;
      }
    } while (std::prev_permutation(pick.begin(), pick.end()));
    return best;
  }
  for (uint32_t seed : free) {
    std::vector<uint32_t> set{seed};
    while (set.size() < k) {
      uint32_t pick = 0;
      int pick_cost = std::numeric_limits<int>::max();
      for (uint32_t c : free) {
        if (std::find(set.begin(), set.end(), c) != set.end()) continue;
        int cost = 0;
        for (uint32_t s : set)
          cost = std::max(cost, static_cast<int>(node.link(s, c)));
        if (cost < pick_cost) {
          pick_cost = cost;
          pick = c;
        }
      }
      set.push_back(pick);
    }
    std::sort(set.begin(), set.end());
    auto cost = setCost(node, set);
    if (cost < best_cost) {
      best_cost = cost;
      best = set;
    }
  }
  return best;
}

}  // namespace

std::string staticMismatch(const Node& node, const TaskRequest& task) {
  auto all = staticMismatches(node, task);
  return all.empty() ? std::string() : all.front();
}

bool fitsNow(const Node& node, const TaskRequest& task) {
  if (!node.schedulable) return false;
  if (node.cpu_free_millis < task.cpu_millis || node.ram_free_mib < task.ram_mib) return false;
  for (const auto& [key, value] : task.constraints.node_labels) {
    auto it = node.labels.find(key);
    if (it == node.labels.end() || it->second != value) return false;
  }
  if (task.gpus == 0) return true;
  if (task.isSlice() && !node.enforces_slices) return false;
  uint32_t needed = task.isSlice() ? 1 : task.wholeGpus();
  uint32_t have = 0;
  for (const Gpu& g : node.gpus) {
    if (gpuEligible(g, task) && gpuFreeFor(g, task) && ++have >= needed) return true;
  }
  return false;
}

std::vector<TaskAllocation> candidateAllocations(const ClusterState& cluster, size_t node_index,
                                                 const TaskRequest& task, GpuChoices choices) {
  const bool all_choices = choices != GpuChoices::kCanonical;
  const bool dedup = choices == GpuChoices::kDistinct;
  std::vector<TaskAllocation> out;
  const Node& node = cluster.node(node_index);
  if (!fitsNow(node, task)) return out;
  TaskAllocation base;
  base.node = node_index;
  base.cpu_millis = task.cpu_millis;
  base.ram_mib = task.ram_mib;
  if (task.gpus == 0) {
    out.push_back(base);
    return out;
  }
  if (task.isSlice()) {
    uint32_t compute = task.computePerGpu();
    // One candidate per distinct free state: GPUs in the same state are interchangeable.
    std::vector<std::pair<uint32_t, uint64_t>> seen;
    int best = -1;
    for (const Gpu& g : node.gpus) {
      if (!gpuEligible(g, task) || !gpuFreeFor(g, task)) continue;
      if (!all_choices) {
        // Best fit: the least free GPU that still fits (then least free memory).
        if (best < 0 || g.compute_free < node.gpus[best].compute_free ||
            (g.compute_free == node.gpus[best].compute_free &&
             g.memory_free_mib < node.gpus[best].memory_free_mib)) {
          best = static_cast<int>(g.index);
        }
        continue;
      }
      std::pair<uint32_t, uint64_t> state{g.compute_free, g.memory_free_mib};
      if (dedup) {
        if (std::find(seen.begin(), seen.end(), state) != seen.end()) continue;
        seen.push_back(state);
      }
      TaskAllocation a = base;
      a.gpus.push_back({g.index, task.gpu_memory_mib, compute});
      out.push_back(std::move(a));
    }
    if (best >= 0) {
      TaskAllocation a = base;
      a.gpus.push_back({static_cast<uint32_t>(best), task.gpu_memory_mib, compute});
      out.push_back(std::move(a));
    }
    return out;
  }
  std::vector<uint32_t> free;
  for (const Gpu& g : node.gpus) {
    if (gpuEligible(g, task) && gpuFreeFor(g, task)) free.push_back(g.index);
  }
  std::vector<uint32_t> set = bestConnectedSet(node, free, task.wholeGpus());
  TaskAllocation a = base;
  for (uint32_t i : set)
    a.gpus.push_back({i, node.gpus[i].memory_total_mib, 1000});
  out.push_back(std::move(a));
  return out;
}

namespace {

size_t datasetsHeld(const Node& node, const Constraints& c) {
  size_t n = 0;
  for (const auto& d : c.datasets)
    n += node.holdsDataset(d) ? 1 : 0;
  return n;
}

// The node's own best choice: highest score; equal scores keep the first or, when
// `random_within`, one uniformly at random.
size_t bestWithinNode(const ClusterState& cluster, const TaskRequest& task, PlacementPolicy& policy,
                      Random& random, const std::vector<TaskAllocation>& cands, bool random_within,
                      double* score) {
  const double eps = policy.tieEpsilon();
  size_t pick = 0;
  uint64_t ties = 1;
  double pick_score = policy.score(cluster, task, cands[0]);
  for (size_t c = 1; c < cands.size(); ++c) {
    double s = policy.score(cluster, task, cands[c]);
    if (s > pick_score + eps) {
      pick_score = s;
      pick = c;
      ties = 1;
    } else if (random_within && s >= pick_score - eps && random.uniform(++ties) == 0) {
      pick = c;
    }
  }
  *score = pick_score;
  return pick;
}

struct Choice {
  bool found = false;
  TaskAllocation alloc;
  double score = 0;
  size_t locality = 0;
};

// The node's best choice for `task` into *pick / *score; false when the task does not fit.
// Slices and CPU-only tasks (the hot path of every replay) are scored through one reused
// scratch allocation instead of a vector of candidates.
bool bestOnNode(const ClusterState& cluster, size_t n, const TaskRequest& task,
                PlacementPolicy& policy, Random& random, GpuChoices choices, bool random_within,
                TaskAllocation* scratch, TaskAllocation* pick, double* score) {
  if (task.gpus != 0 && !task.isSlice()) {
    std::vector<TaskAllocation> cands = candidateAllocations(cluster, n, task, choices);
    if (cands.empty()) return false;
    size_t i = bestWithinNode(cluster, task, policy, random, cands, random_within, score);
    *pick = std::move(cands[i]);
    return true;
  }
  const Node& node = cluster.node(n);
  if (!fitsNow(node, task)) return false;
  scratch->node = n;
  scratch->cpu_millis = task.cpu_millis;
  scratch->ram_mib = task.ram_mib;
  if (task.gpus == 0) {
    scratch->gpus.clear();
    *score = policy.score(cluster, task, *scratch);
    *pick = *scratch;
    return true;
  }
  const uint32_t compute = task.computePerGpu();
  const double eps = policy.tieEpsilon();
  if (choices == GpuChoices::kCanonical) {
    // Best fit: the least free GPU that still fits (then least free memory).
    int best = -1;
    for (const Gpu& g : node.gpus) {
      if (!gpuEligible(g, task) || !gpuFreeFor(g, task)) continue;
      if (best < 0 || g.compute_free < node.gpus[best].compute_free ||
          (g.compute_free == node.gpus[best].compute_free &&
           g.memory_free_mib < node.gpus[best].memory_free_mib)) {
        best = static_cast<int>(g.index);
      }
    }
    if (best < 0) return false;
    scratch->gpus.assign(1, GpuSlice{static_cast<uint32_t>(best), task.gpu_memory_mib, compute});
    *score = policy.score(cluster, task, *scratch);
    *pick = *scratch;
    return true;
  }
  // One candidate per distinct free state (kDistinct) or per GPU (kEvery).
  std::pair<uint32_t, uint64_t> seen[64];
  size_t n_seen = 0;
  bool found = false;
  uint64_t ties = 0;
  uint32_t best_gpu = 0;
  double best = 0;
  for (const Gpu& g : node.gpus) {
    if (!gpuEligible(g, task) || !gpuFreeFor(g, task)) continue;
    if (choices == GpuChoices::kDistinct) {
      std::pair<uint32_t, uint64_t> state{g.compute_free, g.memory_free_mib};
      if (std::find(seen, seen + n_seen, state) != seen + n_seen) continue;
      if (n_seen < 64) seen[n_seen++] = state;
    }
    scratch->gpus.assign(1, GpuSlice{g.index, task.gpu_memory_mib, compute});
    double s = policy.score(cluster, task, *scratch);
    if (!found || s > best + eps) {
      found = true;
      best = s;
      best_gpu = g.index;
      ties = 1;
    } else if (random_within && s >= best - eps && random.uniform(++ties) == 0) {
      best_gpu = g.index;
    }
  }
  if (!found) return false;
  pick->node = n;
  pick->cpu_millis = task.cpu_millis;
  pick->ram_mib = task.ram_mib;
  pick->gpus.assign(1, GpuSlice{best_gpu, task.gpu_memory_mib, compute});
  *score = best;
  return true;
}

// Calls f(node) for every node (ascending) where `task` may fit now, from the pool's
// feasibility index: the nodes it skips are exactly ones where fitsNow() is false, which
// every caller rejects before scoring or drawing a random number, so decisions are the same
// as visiting every node.
template <typename F>
void forEachCandidateNode(const ClusterState& cluster, const TaskRequest& task, F&& f) {
  const uint32_t slice = task.isSlice() ? std::max<uint32_t>(task.computePerGpu(), 1) : 0;
  cluster.forEachMayFit(slice, task.wholeGpus(), std::forward<F>(f));
}

// Rebuilds the choice a memo entry stands for (as bestOnNode() would have returned it).
void fromMemo(const ClusterState& cluster, size_t n, const TaskRequest& task,
              const PlacementMemo::Entry& e, TaskAllocation* out) {
  out->node = n;
  out->cpu_millis = task.cpu_millis;
  out->ram_mib = task.ram_mib;
  out->gpus.clear();
  if (task.gpus == 0) return;
  if (task.isSlice()) {
    out->gpus.push_back({static_cast<uint32_t>(__builtin_ctzll(e.gpus)), task.gpu_memory_mib,
                         task.computePerGpu()});
    return;
  }
  const Node& node = cluster.node(n);
  for (uint64_t bits = e.gpus; bits != 0; bits &= bits - 1) {
    uint32_t i = static_cast<uint32_t>(__builtin_ctzll(bits));
    out->gpus.push_back({i, node.gpus[i].memory_total_mib, 1000});
  }
}

// Whether bestOnNode()'s choice on this node can be kept as a memo entry: at most 64 GPUs,
// listed in ascending order (always true of what candidateAllocations() builds; checked so the
// rebuilt choice is identical).
bool memoizable(const TaskAllocation& pick) {
  for (size_t i = 0; i < pick.gpus.size(); ++i) {
    if (pick.gpus[i].gpu_index >= 64) return false;
    if (i > 0 && pick.gpus[i].gpu_index <= pick.gpus[i - 1].gpu_index) return false;
  }
  return true;
}

// The best candidate over all nodes (over those `allowed` accepts, when given); ties: locality,
// then a node this job already uses, then uniformly at random (reservoir sampling over tied
// nodes).
Choice chooseBest(const ClusterState& cluster, const TaskRequest& task, PlacementPolicy& policy,
                  Random& random, const std::vector<size_t>& used_nodes,
                  const std::function<bool(size_t)>& allowed = nullptr) {
  Choice best;
  uint64_t ties = 0;
  const double eps = policy.tieEpsilon();
  const GpuChoices choices = policy.gpuChoices();
  const bool random_within = policy.randomWithinNode();
  const std::vector<uint32_t>* order = policy.tieOrder(cluster.size(), random);
  const bool soft = !task.constraints.datasets.empty() || !used_nodes.empty();
  std::vector<PlacementMemo::Entry>* memo = policy.nodeLocalScores() && !random_within
                                                ? &policy.memo().entries(task, cluster.size())
                                                : nullptr;
  TaskAllocation scratch, pick;
  forEachCandidateNode(cluster, task, [&](size_t n) {
    if (allowed && !allowed(n)) return;
    double pick_score = 0;
    const PlacementMemo::Entry* entry = nullptr;
    if (memo != nullptr) {
      PlacementMemo::Entry& e = (*memo)[n];
      const uint64_t version = cluster.nodeVersion(n);
      if (e.version != version) {
        e = PlacementMemo::Entry{};
        e.found = bestOnNode(cluster, n, task, policy, random, choices, random_within, &scratch,
                             &pick, &e.score);
        if (e.found && !memoizable(pick)) {
          // Not representable: score it every time (nodes of more than 64 GPUs).
          pick_score = e.score;
        } else {
          e.version = version;
          for (const GpuSlice& g : pick.gpus)
            e.gpus |= e.found ? uint64_t{1} << g.gpu_index : 0;
          entry = &e;
        }
        if (!e.found) return;
      } else {
        if (!e.found) return;
        entry = &e;
      }
      if (entry != nullptr) pick_score = entry->score;
    } else if (!bestOnNode(cluster, n, task, policy, random, choices, random_within, &scratch,
                           &pick, &pick_score)) {
      return;
    }
    size_t locality = 0;
    if (soft) {
      bool reused = std::find(used_nodes.begin(), used_nodes.end(), n) != used_nodes.end();
      locality = datasetsHeld(cluster.node(n), task.constraints) * 2 + (reused ? 1 : 0);
    }
    bool better = false, tie = false;
    if (!best.found || pick_score > best.score + eps) {
      better = true;
    } else if (pick_score >= best.score - eps) {
      if (locality > best.locality) {
        better = true;
      } else if (locality == best.locality) {
        tie = true;
      }
    }
    auto take = [&] {
      if (entry != nullptr) {
        fromMemo(cluster, n, task, *entry, &best.alloc);
      } else {
        best.alloc = pick;
      }
    };
    if (better) {
      best.found = true;
      take();
      best.score = pick_score;
      best.locality = locality;
      ties = 1;
    } else if (tie) {
      ++ties;
      bool taken =
          order != nullptr ? (*order)[n] < (*order)[best.alloc.node] : random.uniform(ties) == 0;
      if (taken) {
        take();
        best.score = std::max(best.score, pick_score);
      }
    }
  });
  return best;
}

std::string describe(const ClusterState& cluster, const TaskAllocation& a, double score,
                     std::string_view policy, const Constraints& c) {
  const Node& node = cluster.node(a.node);
  std::string s = "node " + node.name;
  if (a.gpus.empty()) {
    s += " (CPU only)";
  } else {
    s += " GPU";
    s += a.gpus.size() > 1 ? "s " : " ";
    for (size_t i = 0; i < a.gpus.size(); ++i) {
      if (i) s += ",";
      s += std::to_string(a.gpus[i].gpu_index);
    }
    if (a.gpus.size() == 1 && a.gpus[0].compute < 1000) {
      s += " (slice " + std::to_string(a.gpus[0].compute) + "/1000";
      if (a.gpus[0].memory_mib) s += ", " + std::to_string(a.gpus[0].memory_mib) + " MiB";
      s += ")";
    }
    if (a.gpus.size() > 1) {
      int worst = 0;
      for (size_t i = 0; i < a.gpus.size(); ++i) {
        for (size_t j = i + 1; j < a.gpus.size(); ++j) {
          worst = std::max(worst,
                           static_cast<int>(node.link(a.gpus[i].gpu_index, a.gpus[j].gpu_index)));
        }
      }
      s += " linked by ";
      s += linkLevelName(static_cast<LinkLevel>(worst));
      s += " or better";
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.4g", score);
  s += ": best " + std::string(policy) + " score " + buf;
  size_t held = datasetsHeld(node, c);
  if (!c.datasets.empty()) {
    s += ", holds " + std::to_string(held) + "/" + std::to_string(c.datasets.size()) + " datasets";
  }
  return s;
}

// Fills reason/unsatisfiable/explanation for a request that found no place.
void explainFailure(const ClusterState& cluster, const PlacementRequest& request,
                    PlacementResult* out) {
  std::set<std::string> always;  // constraints violated on every node
  bool first = true;
  bool some_static_ok = false;
  for (const Node& node : cluster.nodes()) {
    auto m = staticMismatches(node, request.task);
    if (m.empty()) some_static_ok = true;
    std::set<std::string> ms(m.begin(), m.end());
    if (first) {
      always = ms;
      first = false;
    } else {
      std::set<std::string> keep;
      for (const auto& x : always) {
        if (ms.count(x)) keep.insert(x);
      }
      always.swap(keep);
    }
  }
  if (cluster.size() == 0) always.insert("nodes");
  if (!some_static_ok) {
    out->reason = PendingReason::kConstraint;
    out->unsatisfiable.assign(always.begin(), always.end());
    out->explanation = "job " + request.job + " cannot run on any node of this pool: ";
    if (always.empty()) {
      out->explanation += "no node satisfies all constraints at once";
    } else {
      std::string names;
      for (const auto& x : always)
        names += (names.empty() ? "" : ", ") + x;
      out->explanation += "no node satisfies " + names;
    }
    if (always.count("slice_enforcement")) {
      out->explanation +=
          " (GPU slices run only on nodes that enforce them: a loadable interposer and the "
          "agent's backstop; `gpool nodes` shows each node's SLICES)";
    }
    return;
  }
  out->reason = PendingReason::kResources;
  out->explanation = "job " + request.job +
                     " waits for resources: " + std::to_string(request.tasks) +
                     " task(s) do not fit in what is free now";
  if (request.scope == GangScope::kSingleServer && request.tasks > 1) {
    out->explanation += " on a single server";
  }
  if (request.nodes > 0) {
    out->explanation += " over exactly " + std::to_string(request.nodes) + " server(s)";
  }
}

}  // namespace

PlacementResult place(const ClusterState& cluster, const PlacementRequest& request,
                      PlacementPolicy& policy, Random& random) {
  PlacementResult out;
  std::string why;
  if (!validRequest(request, &why)) {
    out.reason = PendingReason::kInvalid;
    out.explanation = why;
    return out;
  }
  const TaskRequest& task = request.task;
  if (request.tasks == 1) {
    Choice c = chooseBest(cluster, task, policy, random, {});
    if (!c.found) {
      explainFailure(cluster, request, &out);
      return out;
    }
    out.placed = true;
    out.explanation =
        "task 0 -> " + describe(cluster, c.alloc, c.score, policy.name(), task.constraints);
    out.tasks.push_back(std::move(c.alloc));
    return out;
  }
  // A gang: work on a scratch copy so each task sees what the previous ones took.
  ClusterState scratch = cluster;
  if (request.scope == GangScope::kMultiServer) {
    std::vector<size_t> used;
    // With a node count (Slurm's -N with -n), the tasks spread as evenly as Slurm's: every node
    // gets floor(tasks / nodes) tasks and `extra` = tasks mod nodes of them one more, so that
    // torchrun's equal processes per node hold. The policy still picks which nodes, and a
    // node's place in the order of its first task does not decide its share.
    std::map<size_t, uint32_t> per_node;  // tasks of this gang on each node so far
    const uint32_t floor_share = request.nodes > 0 ? request.tasks / request.nodes : 0;
    const uint32_t extra = request.nodes > 0 ? request.tasks % request.nodes : 0;
    uint32_t nodes_with_extra = 0;
    std::function<bool(size_t)> allowed;
    if (request.nodes > 0) {
      allowed = [&](size_t n) {
        auto it = per_node.find(n);
        if (it == per_node.end()) return used.size() < request.nodes;
        return it->second < floor_share || (it->second == floor_share && nodes_with_extra < extra);
      };
    }
    for (uint32_t t = 0; t < request.tasks; ++t) {
      Choice c = chooseBest(scratch, task, policy, random, used, allowed);
      if (!c.found || !scratch.apply(c.alloc).isOk()) {
        explainFailure(cluster, request, &out);
        out.tasks.clear();
        return out;
      }
      if (std::find(used.begin(), used.end(), c.alloc.node) == used.end()) {
        used.push_back(c.alloc.node);
      }
      if (request.nodes > 0 && ++per_node[c.alloc.node] == floor_share + 1) ++nodes_with_extra;
      if (!out.explanation.empty()) out.explanation += "; ";
      out.explanation += "task " + std::to_string(t) + " -> " +
                         describe(scratch, c.alloc, c.score, policy.name(), task.constraints);
      out.tasks.push_back(std::move(c.alloc));
    }
    out.placed = true;
    out.explanation = "gang of " + std::to_string(request.tasks) + " tasks on " +
                      std::to_string(used.size()) + " server(s): " + out.explanation;
    return out;
  }
  // Single server: try the whole gang on each node; the node's score is the mean of its tasks'.
  bool found = false;
  double best_score = 0;
  size_t best_locality = 0;
  uint64_t ties = 0;
  std::vector<TaskAllocation> best_tasks;
  size_t best_node = 0;
  const double eps = policy.tieEpsilon();
  const std::vector<uint32_t>* order = policy.tieOrder(cluster.size(), random);
  forEachCandidateNode(cluster, task, [&](size_t n) {
    if (!fitsNow(cluster.node(n), task)) return;
    std::vector<TaskAllocation> tasks;
    double sum = 0;
    bool ok = true;
    for (uint32_t t = 0; t < request.tasks && ok; ++t) {
      auto cands = candidateAllocations(scratch, n, task, policy.gpuChoices());
      if (cands.empty()) {
        ok = false;
        break;
      }
      double pick_score = 0;
      size_t pick = bestWithinNode(scratch, task, policy, random, cands, policy.randomWithinNode(),
                                   &pick_score);
      sum += pick_score;
      ok = scratch.apply(cands[pick]).isOk();
      if (ok) tasks.push_back(std::move(cands[pick]));
    }
    for (const auto& a : tasks)
      (void)scratch.release(a);
    if (!ok) return;
    double score = sum / request.tasks;
    size_t locality = datasetsHeld(cluster.node(n), task.constraints);
    bool better = !found || score > best_score + eps ||
                  (score >= best_score - eps && locality > best_locality);
    bool tie = !better && score >= best_score - eps && locality == best_locality;
    if (better) {
      found = true;
      best_score = score;
      best_locality = locality;
      best_tasks = std::move(tasks);
      best_node = n;
      ties = 1;
    } else if (tie && (order != nullptr ? (*order)[n] < (*order)[best_node]
                                        : random.uniform(++ties) == 0)) {
      best_tasks = std::move(tasks);
      best_node = n;
    }
  });
  if (!found) {
    explainFailure(cluster, request, &out);
    return out;
  }
  out.placed = true;
  out.explanation = "gang of " + std::to_string(request.tasks) + " tasks on one server: ";
  for (size_t t = 0; t < best_tasks.size(); ++t) {
    if (t) out.explanation += "; ";
    out.explanation +=
        "task " + std::to_string(t) + " -> " +
        describe(cluster, best_tasks[t], best_score, policy.name(), task.constraints);
  }
  out.tasks = std::move(best_tasks);
  return out;
}

}  // namespace gpool::sched
