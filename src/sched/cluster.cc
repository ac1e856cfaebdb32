#include "sched/cluster.h"

#include <algorithm>
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
  versions_.push_back(1);
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
  // Sum per GPU first: one allocation may name a GPU once only, but be strict anyway.
  std::vector<uint64_t> mem(node.gpus.size(), 0);
  std::vector<uint64_t> compute(node.gpus.size(), 0);
  for (const GpuSlice& s : alloc.gpus) {
    mem[s.gpu_index] += s.memory_mib;
    compute[s.gpu_index] += s.compute;
  }
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    const Gpu& g = node.gpus[i];
    if (g.memory_free_mib < mem[i] || g.compute_free < compute[i]) {
      return Status::resourceExhausted(
          "GPU " + std::to_string(i) + " of node " + node.name + " has " +
          std::to_string(g.memory_free_mib) + " MiB and " + std::to_string(g.compute_free) +
          "/1000 compute free, allocation needs " + std::to_string(mem[i]) + " MiB and " +
          std::to_string(compute[i]) + "/1000");
    }
  }
  node.cpu_free_millis -= alloc.cpu_millis;
  node.ram_free_mib -= alloc.ram_mib;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    node.gpus[i].memory_free_mib -= mem[i];
    node.gpus[i].compute_free -= static_cast<uint32_t>(compute[i]);
  }
  ++versions_[alloc.node];
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
  std::vector<uint64_t> mem(node.gpus.size(), 0);
  std::vector<uint64_t> compute(node.gpus.size(), 0);
  for (const GpuSlice& s : alloc.gpus) {
    mem[s.gpu_index] += s.memory_mib;
    compute[s.gpu_index] += s.compute;
  }
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    const Gpu& g = node.gpus[i];
    if (g.memory_free_mib + mem[i] > g.memory_total_mib || g.compute_free + compute[i] > 1000) {
      return Status::invalidArgument("release on GPU " + std::to_string(i) + " of node " +
                                     node.name + " gives back more than was allocated");
    }
  }
  node.cpu_free_millis += alloc.cpu_millis;
  node.ram_free_mib += alloc.ram_mib;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    node.gpus[i].memory_free_mib += mem[i];
    node.gpus[i].compute_free += static_cast<uint32_t>(compute[i]);
  }
  ++versions_[alloc.node];
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
