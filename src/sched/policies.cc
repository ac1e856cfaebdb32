#include "sched/policies.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace gpool::sched {

namespace {

uint64_t nodeGpuFree(const Node& node) {
  uint64_t total = 0;
  for (const Gpu& g : node.gpus)
    total += g.healthy ? g.compute_free : 0;
  return total;
}

uint64_t requestGpuMilli(const TaskRequest& task) {
  if (task.isSlice()) return task.computePerGpu();
  return uint64_t{task.wholeGpus()} * 1000;
}

// Go's int64(float64) conversion truncates toward zero.
double truncated(double v) {
  return std::trunc(v);
}

}  // namespace

double DotProdPolicy::score(const ClusterState& cluster, const TaskRequest& task,
                            const TaskAllocation& candidate) {
  const Node& node = cluster.node(candidate.node);
  double dot = static_cast<double>(node.cpu_free_millis) / kMaxSpecCpuMillis *
                   (static_cast<double>(task.cpu_millis) / kMaxSpecCpuMillis) +
               static_cast<double>(nodeGpuFree(node)) / kMaxSpecGpuMilli *
                   (static_cast<double>(requestGpuMilli(task)) / kMaxSpecGpuMilli);
  return truncated(100.0 * (1.0 - dot / 2.0));
}

double GpuClusteringPolicy::score(const ClusterState& cluster, const TaskRequest& task,
                                  const TaskAllocation& candidate) {
  if (task.gpus == 0) return 0;
  const Node& node = cluster.node(candidate.node);
  uint32_t kind = task.isSlice() ? 0 : task.wholeGpus();
  int64_t left = static_cast<int64_t>(nodeGpuFree(node));
  int64_t base =
      25 * (static_cast<int64_t>(kMaxSpecGpuMilli) - left) / static_cast<int64_t>(kMaxSpecGpuMilli);
  const std::vector<std::pair<uint32_t, uint32_t>> empty;
  const auto& kinds = candidate.node < kinds_.size() ? kinds_[candidate.node] : empty;
  bool same = false;
  for (const auto& [k, count] : kinds)
    same |= (k == kind && count > 0);
  if (same) return static_cast<double>(base + (kinds.size() == 1 ? 75 : 50));
  return static_cast<double>(base + (kinds.empty() ? 25 : 0));
}

void GpuClusteringPolicy::notePlaced(const ClusterState& cluster, const TaskRequest& task,
                                     const TaskAllocation& alloc) {
  if (task.gpus == 0) return;
  if (kinds_.size() < cluster.size()) kinds_.resize(cluster.size());
  uint32_t kind = task.isSlice() ? 0 : task.wholeGpus();
  auto& kinds = kinds_[alloc.node];
  for (auto& [k, count] : kinds) {
    if (k == kind) {
      ++count;
      return;
    }
  }
  kinds.emplace_back(kind, 1);
}

double GpuPackingPolicy::score(const ClusterState& cluster, const TaskRequest& task,
                               const TaskAllocation& candidate) {
  if (task.gpus == 0) return 0;
  const Node& node = cluster.node(candidate.node);
  int64_t fully_free = 0;
  for (const Gpu& g : node.gpus)
    fully_free += g.compute_free == 1000 ? 1 : 0;
  if (fully_free == static_cast<int64_t>(node.gpus.size())) {
    return static_cast<double>(std::max<int64_t>(100 / 3 - fully_free, fully_free));
  }
  int64_t fully_free_used = 0;
  int64_t free_ratio = 0;
  for (const GpuSlice& s : candidate.gpus) {
    uint32_t left = node.gpus[s.gpu_index].compute_free;
    if (left == 1000) ++fully_free_used;
    free_ratio += static_cast<int64_t>(left) * 100 / 1000;
  }
  if (fully_free_used > 0) {
    return static_cast<double>(std::max<int64_t>(100 / 2 - fully_free_used, 100 / 3));
  }
  return static_cast<double>(std::max<int64_t>(100 - free_ratio / 10, 100 / 2));
}

double BestFitPolicy::score(const ClusterState& cluster, const TaskRequest& task,
                            const TaskAllocation& candidate) {
  const Node& node = cluster.node(candidate.node);
  double cpu_left =
      static_cast<double>(node.cpu_free_millis) - static_cast<double>(task.cpu_millis);
  double gpu_left =
      static_cast<double>(nodeGpuFree(node)) - static_cast<double>(requestGpuMilli(task));
  double s = 0.5 * cpu_left / kMaxSpecCpuMillis + 0.5 * gpu_left / kMaxSpecGpuMilli;
  return truncated((1.0 - s) * 100.0);
}

FgdPolicy::FgdPolicy(std::shared_ptr<const FragmentationModel> model, bool quantised)
    : model_(std::move(model)), quantised_(quantised) {
  if (!model_) model_ = std::make_shared<FragmentationModel>();
}

const FgdPolicy::CacheEntry& FgdPolicy::before(const ClusterState& cluster, size_t node_index) {
  const Node& node = cluster.node(node_index);
  if (cache_.size() < cluster.size()) cache_.resize(cluster.size());
  CacheEntry& e = cache_[node_index];
  // The entry is valid only for the exact free state it was computed from, so copies of the
  // snapshot (gang trials, simulate-before-evict) never read a stale value.
  bool hit = e.valid && e.cpu_free == node.cpu_free_millis && e.gpu_free.size() == node.gpus.size();
  for (size_t i = 0; hit && i < node.gpus.size(); ++i) {
    hit = e.gpu_free[i] == (node.gpus[i].healthy ? node.gpus[i].compute_free : 0);
  }
  if (hit) return e;
  e.cpu_free = node.cpu_free_millis;
  e.one_model = node.gpus.size() <= 64;
  for (const Gpu& g : node.gpus) {
    e.one_model = e.one_model && g.healthy && g.model == node.gpus.front().model;
  }
  e.gpu_free.resize(node.gpus.size());
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    e.gpu_free[i] = node.gpus[i].healthy ? node.gpus[i].compute_free : 0;
  }
  e.frag = model_->nodeFragmentation(node);
  e.valid = true;
  return e;
}

double FgdPolicy::fragmentationDelta(const ClusterState& cluster, const TaskAllocation& candidate) {
  const CacheEntry& entry = before(cluster, candidate.node);
  const double frag_before = entry.frag;
  const Node& node = cluster.node(candidate.node);
  uint64_t cpu_after = node.cpu_free_millis >= candidate.cpu_millis
                           ? node.cpu_free_millis - candidate.cpu_millis
                           : 0;
  double after = 0;
  if (entry.one_model) {
    uint32_t free[64];
    for (size_t i = 0; i < node.gpus.size(); ++i)
      free[i] = node.gpus[i].compute_free;
    for (const GpuSlice& s : candidate.gpus)
      free[s.gpu_index] -= std::min(free[s.gpu_index], s.compute);
    after = model_->nodeFragmentation(node.gpus.empty() ? std::string_view() : node.gpus[0].model,
                                      cpu_after, free, node.gpus.size());
  } else {
    Node copy = node;
    copy.cpu_free_millis = cpu_after;
    for (const GpuSlice& s : candidate.gpus) {
      copy.gpus[s.gpu_index].compute_free -=
          std::min(copy.gpus[s.gpu_index].compute_free, s.compute);
    }
    after = model_->nodeFragmentation(copy);
  }
  return frag_before - after;
}

double FgdPolicy::score(const ClusterState& cluster, const TaskRequest& task,
                        const TaskAllocation& candidate) {
  (void)task;
  double delta = fragmentationDelta(cluster, candidate);
  if (!quantised_) return delta;
  double sigmoid = 1.0 / (1.0 + std::exp(-delta / 1000.0));
  return truncated(sigmoid * 100.0);
}

GpoolPolicy::GpoolPolicy(std::shared_ptr<const FragmentationModel> model)
    : fgd_(std::move(model), /*quantised=*/false) {}

double GpoolPolicy::score(const ClusterState& cluster, const TaskRequest& task,
                          const TaskAllocation& candidate) {
  // FGD's measure in steps of kStepMilli (differences below that are noise: exact deltas
  // measured worse than FGD's own quantisation), then BestFit among the equal, then random.
  double steps = std::round(fgd_.fragmentationDelta(cluster, candidate) / kStepMilli);
  return steps + 1e-4 * best_fit_.score(cluster, task, candidate);
}

const std::vector<std::string>& policyNames() {
  static const std::vector<std::string> kNames = {
      "Random", "DotProd", "GpuClustering", "GpuPacking", "BestFit", "FGD", "gpool"};
  return kNames;
}

Result<std::unique_ptr<PlacementPolicy>> makePolicy(
    std::string_view name, std::shared_ptr<const FragmentationModel> model) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  std::string n = lower(name);
  if (n == "random") return std::unique_ptr<PlacementPolicy>(new RandomPolicy());
  if (n == "dotprod") return std::unique_ptr<PlacementPolicy>(new DotProdPolicy());
  if (n == "gpuclustering") return std::unique_ptr<PlacementPolicy>(new GpuClusteringPolicy());
  if (n == "gpupacking") return std::unique_ptr<PlacementPolicy>(new GpuPackingPolicy());
  if (n == "bestfit") return std::unique_ptr<PlacementPolicy>(new BestFitPolicy());
  if (n == "fgd") return std::unique_ptr<PlacementPolicy>(new FgdPolicy(std::move(model)));
  if (n == "gpool") return std::unique_ptr<PlacementPolicy>(new GpoolPolicy(std::move(model)));
  std::string known;
  for (const auto& k : policyNames())
    known += (known.empty() ? "" : ", ") + k;
  return Status::invalidArgument("unknown placement policy '" + std::string(name) +
                                 "' (known: " + known + ")");
}

}  // namespace gpool::sched
