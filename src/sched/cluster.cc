#include "sched/cluster.h"

#include <algorithm>
#include <atomic>
#include <string>

namespace gpool::sched {

std::string_view linkLevelName(LinkLevel level) {
  switch (level) {
    case LinkLevel::kSelf: return "self";
    case LinkLevel::kNvLink: return "NVLink";
    case LinkLevel::kPcieSwitch: return "PCIe switch";
    case LinkLevel::kPcieHost: return "PCIe host bridge";
    case LinkLevel::kCrossSocket: return "cross-socket";
  }
  return "unknown";
}

LinkLevel Node::link(size_t a, size_t b) const {
  if (a == b) return LinkLevel::kSelf;
  size_t n = gpus.size();
  if (links.size() != n * n || a >= n || b >= n) return LinkLevel::kCrossSocket;
  return links[a * n + b];
}

bool Node::holdsDataset(std::string_view dataset) const {
  return std::find(datasets.begin(), datasets.end(), dataset) != datasets.end();
}

uint64_t Node::gpuComputeFree() const {
  uint64_t total = 0;
  for (const Gpu& g : gpus) {
    if (g.healthy) total += g.compute_free;
  }
  return total;
}

namespace {

// One counter for every snapshot of the process: a version names one state of one node.
std::atomic<uint64_t> g_next_version{1};

uint64_t freshVersion() {
  return g_next_version.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

void ClusterState::refreshIndex(size_t i) const {
  const Node& node = nodes_[i];
  uint8_t share = kNone, idle = kNone;
  if (node.schedulable) {
    uint32_t max_free = 0, idle_count = 0;
    for (const Gpu& g : node.gpus) {
      if (!g.healthy) continue;
      max_free = std::max(max_free, g.compute_free);
      idle_count += g.idle() ? 1 : 0;
    }
    share = static_cast<uint8_t>(std::min(max_free, 1000u) / kShareStep);
    idle = static_cast<uint8_t>(std::min(idle_count, kIdleBuckets - 1));
  }
  const size_t w = i / 64;
  const uint64_t bit = uint64_t{1} << (i % 64);
  if (share_bucket_[i] != share) {
    if (share_bucket_[i] != kNone) share_bits_[share_bucket_[i]][w] &= ~bit;
    if (share != kNone) share_bits_[share][w] |= bit;
    share_bucket_[i] = share;
  }
  if (idle_bucket_[i] != idle) {
    if (idle_bucket_[i] != kNone) idle_bits_[idle_bucket_[i]][w] &= ~bit;
    if (idle != kNone) idle_bits_[idle][w] |= bit;
    idle_bucket_[i] = idle;
  }
}

void ClusterState::refreshDirty() const {
  for (size_t i : dirty_)
    refreshIndex(i);
  dirty_.clear();
}

Node& ClusterState::mutableNode(size_t i) {
  versions_[i] = freshVersion();
  dirty_.push_back(i);
  return nodes_[i];
}

size_t ClusterState::addNode(Node node) {
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    Gpu& g = node.gpus[i];
    g.index = static_cast<uint32_t>(i);
    g.memory_free_mib = std::min(g.memory_free_mib, g.memory_total_mib);
    g.compute_free = std::min<uint32_t>(g.compute_free, 1000);
  }
  if (node.links.size() != node.gpus.size() * node.gpus.size()) node.links.clear();
  node.cpu_free_millis = std::min(node.cpu_free_millis, node.cpu_total_millis);
  node.ram_free_mib = std::min(node.ram_free_mib, node.ram_total_mib);
  size_t index = nodes_.size();
  by_name_.emplace(node.name, index);
  nodes_.push_back(std::move(node));
  versions_.push_back(freshVersion());
  share_bucket_.push_back(kNone);
  idle_bucket_.push_back(kNone);
  const size_t words = (nodes_.size() + 63) / 64;
  for (auto& bits : share_bits_)
    bits.resize(words, 0);
  for (auto& bits : idle_bits_)
    bits.resize(words, 0);
  refreshIndex(index);
  return index;
}

std::optional<size_t> ClusterState::findNode(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

namespace {

Status checkIndices(const std::vector<Node>& nodes, const TaskAllocation& alloc) {
  if (alloc.node >= nodes.size()) {
    return Status::invalidArgument("allocation names node index " + std::to_string(alloc.node) +
                                   " but the pool has " + std::to_string(nodes.size()) + " nodes");
  }
  const Node& node = nodes[alloc.node];
  for (const GpuSlice& s : alloc.gpus) {
    if (s.gpu_index >= node.gpus.size()) {
      return Status::invalidArgument("allocation names GPU " + std::to_string(s.gpu_index) +
                                     " on node " + node.name + " which has " +
                                     std::to_string(node.gpus.size()) + " GPUs");
    }
  }
  return Status::ok();
}

}  // namespace

namespace {

// What `alloc` asks of GPU `gpu` in total (one allocation should name a GPU once, but be
// strict anyway), without allocating.
void demandOn(const TaskAllocation& alloc, uint32_t gpu, uint64_t* mem, uint64_t* compute) {
  *mem = 0;
  *compute = 0;
  for (const GpuSlice& s : alloc.gpus) {
    if (s.gpu_index != gpu) continue;
    *mem += s.memory_mib;
    *compute += s.compute;
  }
}

}  // namespace

Status ClusterState::apply(const TaskAllocation& alloc) {
  GPOOL_RETURN_IF_ERROR(checkIndices(nodes_, alloc));
  Node& node = nodes_[alloc.node];
  if (node.cpu_free_millis < alloc.cpu_millis) {
    return Status::resourceExhausted(
        "node " + node.name + " has " + std::to_string(node.cpu_free_millis) +
        " CPU millicores free, allocation needs " + std::to_string(alloc.cpu_millis));
  }
  if (node.ram_free_mib < alloc.ram_mib) {
    return Status::resourceExhausted(
        "node " + node.name + " has " + std::to_string(node.ram_free_mib) +
        " MiB RAM free, allocation needs " + std::to_string(alloc.ram_mib));
  }
  for (const GpuSlice& s : alloc.gpus) {
    uint64_t mem = 0, compute = 0;
    demandOn(alloc, s.gpu_index, &mem, &compute);
    const Gpu& g = node.gpus[s.gpu_index];
    if (g.memory_free_mib < mem || g.compute_free < compute) {
      return Status::resourceExhausted(
          "GPU " + std::to_string(s.gpu_index) + " of node " + node.name + " has " +
          std::to_string(g.memory_free_mib) + " MiB and " + std::to_string(g.compute_free) +
          "/1000 compute free, allocation needs " + std::to_string(mem) + " MiB and " +
          std::to_string(compute) + "/1000");
    }
  }
  node.cpu_free_millis -= alloc.cpu_millis;
  node.ram_free_mib -= alloc.ram_mib;
  for (const GpuSlice& s : alloc.gpus) {
    node.gpus[s.gpu_index].memory_free_mib -= s.memory_mib;
    node.gpus[s.gpu_index].compute_free -= s.compute;
  }
  versions_[alloc.node] = freshVersion();
  refreshIndex(alloc.node);
  return Status::ok();
}

Status ClusterState::release(const TaskAllocation& alloc) {
  GPOOL_RETURN_IF_ERROR(checkIndices(nodes_, alloc));
  Node& node = nodes_[alloc.node];
  if (node.cpu_free_millis + alloc.cpu_millis > node.cpu_total_millis ||
      node.ram_free_mib + alloc.ram_mib > node.ram_total_mib) {
    return Status::invalidArgument("release on node " + node.name +
                                   " gives back more CPU or RAM than was allocated");
  }
  for (const GpuSlice& s : alloc.gpus) {
    uint64_t mem = 0, compute = 0;
    demandOn(alloc, s.gpu_index, &mem, &compute);
    const Gpu& g = node.gpus[s.gpu_index];
    if (g.memory_free_mib + mem > g.memory_total_mib || g.compute_free + compute > 1000) {
      return Status::invalidArgument("release on GPU " + std::to_string(s.gpu_index) + " of node " +
                                     node.name + " gives back more than was allocated");
    }
  }
  node.cpu_free_millis += alloc.cpu_millis;
  node.ram_free_mib += alloc.ram_mib;
  for (const GpuSlice& s : alloc.gpus) {
    node.gpus[s.gpu_index].memory_free_mib += s.memory_mib;
    node.gpus[s.gpu_index].compute_free += s.compute;
  }
  versions_[alloc.node] = freshVersion();
  refreshIndex(alloc.node);
  return Status::ok();
}

uint64_t ClusterState::gpuCount() const {
  uint64_t n = 0;
  for (const Node& node : nodes_) {
    for (const Gpu& g : node.gpus)
      n += g.healthy ? 1 : 0;
  }
  return n;
}

uint64_t ClusterState::gpuComputeTotal() const {
  return gpuCount() * 1000;
}

uint64_t ClusterState::gpuComputeFree() const {
  uint64_t n = 0;
  for (const Node& node : nodes_)
    n += node.gpuComputeFree();
  return n;
}

}  // namespace gpool::sched
