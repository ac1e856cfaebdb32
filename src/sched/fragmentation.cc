#include "sched/fragmentation.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace gpool::sched {

namespace {

bool modelAllowed(const std::vector<std::string>& models, std::string_view model) {
  return models.empty() || std::find(models.begin(), models.end(), model) != models.end();
}

}  // namespace

std::vector<TaskShape> typicalShapes(std::vector<TaskShape> shapes, double coverage_pct) {
  double total = 0;
  for (const TaskShape& s : shapes)
    total += s.weight;
  if (total <= 0) return {};
  // The published GetTypicalPods sorts by sort.Reverse of (count, CPU, per-GPU share, GPU count,
  // GPU type string), all ascending: the most frequent first, and among equally frequent shapes
  // the larger ones first. Which equally frequent shapes fall at the coverage cut-off depends on
  // it.
  auto joined = [](const TaskShape& s) {
    std::string out;
    for (const std::string& m : s.gpu_models)
      out += (out.empty() ? "" : "|") + m;
    return out;
  };
  std::stable_sort(shapes.begin(), shapes.end(), [&](const TaskShape& a, const TaskShape& b) {
    if (a.weight != b.weight) return a.weight > b.weight;
    if (a.cpu_millis != b.cpu_millis) return a.cpu_millis > b.cpu_millis;
    if (a.gpu_milli != b.gpu_milli) return a.gpu_milli > b.gpu_milli;
    if (a.gpu_count != b.gpu_count) return a.gpu_count > b.gpu_count;
    return joined(a) > joined(b);
  });
  double want = coverage_pct / 100.0 * total;
  double cum = 0;
  size_t keep = 0;
  while (keep < shapes.size() && cum < want)
    cum += shapes[keep++].weight;
  shapes.resize(keep);
  for (TaskShape& s : shapes)
    s.weight /= cum;
  return shapes;
}

FragmentationModel::FragmentationModel(std::vector<TaskShape> shapes) : shapes_(std::move(shapes)) {
  for (const TaskShape& s : shapes_)
    total_weight_ += s.weight;
  if (total_weight_ > 0) {
    for (TaskShape& s : shapes_)
      s.weight /= total_weight_;
    total_weight_ = 1;
  }
  std::vector<std::string> models{""};
  for (const TaskShape& s : shapes_) {
    for (const std::string& m : s.gpu_models) {
      if (std::find(models.begin(), models.end(), m) == models.end()) models.push_back(m);
    }
  }
  for (const std::string& m : models)
    by_model_.push_back(buildGroups(m));
}

FragmentationModel::ModelGroups FragmentationModel::buildGroups(std::string_view model) const {
  ModelGroups mg;
  mg.model = std::string(model);
  // (count, milli) -> (cpu -> weight)
  std::map<std::pair<uint32_t, uint32_t>, std::map<uint64_t, double>> acc;
  for (const TaskShape& s : shapes_) {
    if (s.gpu_count == 0) continue;  // CPU-only shapes always count all free GPU
    bool allowed = model.empty() ? s.gpu_models.empty() : modelAllowed(s.gpu_models, model);
    if (!allowed) continue;
    acc[{s.gpu_count, s.gpu_milli}][s.cpu_millis] += s.weight;
  }
  for (const auto& [key, by_cpu] : acc) {
    Group g;
    g.gpu_count = key.first;
    g.gpu_milli = key.second;
    double cum = 0;
    for (const auto& [cpu, w] : by_cpu) {
      cum += w;
      g.cpu.push_back(cpu);
      g.cum_w.push_back(cum);
    }
    mg.groups.push_back(std::move(g));
  }
  std::sort(mg.groups.begin(), mg.groups.end(),
            [](const Group& a, const Group& b) { return a.gpu_milli > b.gpu_milli; });
  return mg;
}

const FragmentationModel::ModelGroups& FragmentationModel::groupsFor(std::string_view model) const {
  for (size_t i = 1; i < by_model_.size(); ++i) {
    if (by_model_[i].model == model) return by_model_[i];
  }
  return by_model_[0];
}

double FragmentationModel::nodeFragmentation(std::string_view model, uint64_t cpu_free,
                                             const uint32_t* gpu_free, size_t gpus) const {
  if (by_model_.empty() || gpus == 0) return 0;
  // Free shares sorted descending (nodes have few GPUs: insertion sort).
  uint32_t small[16];
  std::vector<uint32_t> big;
  uint32_t* f = small;
  if (gpus > 16) {
    big.resize(gpus);
    f = big.data();
  }
  uint64_t total = 0;
  for (size_t i = 0; i < gpus; ++i) {
    uint32_t v = gpu_free[i];
    total += v;
    size_t j = i;
    while (j > 0 && f[j - 1] < v) {
      f[j] = f[j - 1];
      --j;
    }
    f[j] = v;
  }
  if (total == 0) return 0;
  // Every shape starts by counting all free GPU as fragmented; each shape that fits gives
  // back the free share of the GPUs it could use.
  double usable = 0;
  size_t p = 0;
  uint64_t acc = 0;
  for (const Group& g : groupsFor(model).groups) {
    while (p < gpus && f[p] >= g.gpu_milli)
      acc += f[p++];
    if (p < g.gpu_count) continue;
    // Weight of the group's shapes whose CPU demand fits.
    auto it = std::upper_bound(g.cpu.begin(), g.cpu.end(), cpu_free);
    if (it == g.cpu.begin()) continue;
    usable += g.cum_w[static_cast<size_t>(it - g.cpu.begin()) - 1] * static_cast<double>(acc);
  }
  return total_weight_ * static_cast<double>(total) - usable;
}

double FragmentationModel::nodeFragmentation(const Node& node) const {
  std::vector<uint32_t> free;
  bool one_model = true;
  for (const Gpu& g : node.gpus) {
    if (!g.healthy) continue;
    if (!free.empty() && g.model != node.gpus.front().model) one_model = false;
    free.push_back(g.compute_free);
  }
  if (free.empty()) return 0;
  if (one_model) {
    const std::string* model = nullptr;
    for (const Gpu& g : node.gpus) {
      if (g.healthy) {
        model = &g.model;
        break;
      }
    }
    return nodeFragmentation(*model, node.cpu_free_millis, free.data(), free.size());
  }
  // Mixed models: per shape, only GPUs of an allowed model can serve it.
  double total = static_cast<double>(std::accumulate(free.begin(), free.end(), uint64_t{0}));
  double frag = 0;
  for (const TaskShape& s : shapes_) {
    double usable = 0;
    if (s.gpu_count > 0 && node.cpu_free_millis >= s.cpu_millis) {
      uint32_t fit = 0;
      uint64_t acc = 0;
      for (const Gpu& g : node.gpus) {
        if (g.healthy && modelAllowed(s.gpu_models, g.model) && g.compute_free >= s.gpu_milli) {
          ++fit;
          acc += g.compute_free;
        }
      }
      if (fit >= s.gpu_count) usable = static_cast<double>(acc);
    }
    frag += s.weight * (total - usable);
  }
  return frag;
}

double FragmentationModel::clusterFragmentation(const ClusterState& cluster) const {
  double sum = 0;
  for (const Node& n : cluster.nodes())
    sum += nodeFragmentation(n);
  return sum;
}

}  // namespace gpool::sched
