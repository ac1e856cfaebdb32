#include "controller/node_registry.h"

#include <algorithm>
#include <functional>
#include <utility>

#include "store/api_codec.h"

namespace gpool::controller {

NodeRegistry::NodeRegistry(store::Store& store, Clock& clock, NodeRegistryOptions options)
    : store_(store), clock_(clock), options_(options) {}

Status NodeRegistry::load() {
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::NodeRecord> records, store_.listNodes());
  std::lock_guard lock(mu_);
  TimePoint now = clock_.now();
  for (const store::NodeRecord& record : records) {
    GPOOL_ASSIGN_OR_RETURN(api::Node node, store::loadApiNode(store_, record.name));
    if (node.state != api::NodeState::kDown) node.last_seen = now;
    contact_[node.name] = clock_.monotonic();
    nodes_[node.name] = std::move(node);
  }
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::GpuHold> holds, store_.listGpuHolds());
  for (store::GpuHold& h : holds)
    holds_[h.uuid] = std::move(h);
  for (auto& [name, node] : nodes_)
    applyHoldsLocked(node);
  summariseLocked();
  return Status::ok();
}

void NodeRegistry::applyHoldsLocked(api::Node& node) const {
  for (api::Gpu& gpu : node.gpus) {
    auto h = holds_.find(gpu.uuid);
    if (h == holds_.end()) continue;
    gpu.health = api::GpuHealth::kUnhealthy;
    gpu.health_reason = "held since " + std::to_string(toUnixMicros(h->second.since) / 1'000'000) +
                        " (Unix time) after: " + h->second.reason + "; `gpool gpu clear " +
                        node.name + "/" + std::to_string(gpu.index) + "` returns it";
  }
}

void NodeRegistry::summariseLocked() {
  auto summary = std::make_shared<PoolSummary>();
  summary->nodes = nodes_.size();
  for (const auto& [name, node] : nodes_) {
    summary->max_gpus = std::max(summary->max_gpus, node.gpus.size());
    summary->gpus_per_node.push_back(node.gpus.size());
    summary->max_cpus_milli = std::max(summary->max_cpus_milli, node.cpus_milli);
    summary->max_ram_mib = std::max(summary->max_ram_mib, node.ram_mib);
    for (const api::Gpu& gpu : node.gpus) {
      summary->max_gpu_memory_mib = std::max(summary->max_gpu_memory_mib, gpu.memory_mib);
      summary->gpu_models.insert(gpu.model);
      summary->max_compute_capability =
          std::max(summary->max_compute_capability, gpu.compute_capability);
    }
    for (const auto& label : node.labels)
      summary->labels.insert(label);
  }
  std::sort(summary->gpus_per_node.begin(), summary->gpus_per_node.end(), std::greater<>());
  summary_ = std::move(summary);
}

std::shared_ptr<const PoolSummary> NodeRegistry::poolSummary() const {
  std::lock_guard lock(mu_);
  return summary_;
}

Status NodeRegistry::saveLocked(const api::Node& node) {
  return store::saveApiNode(store_, node);
}

namespace {
NodeChange changeOf(const api::Node& node, std::string change) {
  return NodeChange{node.name, std::move(change), std::string(api::nodeStateName(node.state)),
                    node.state_reason};
}
}  // namespace

void NodeRegistry::setChangeListener(std::function<void(const NodeChange&)> listener) {
  std::lock_guard lock(mu_);
  listener_ = std::move(listener);
}

void NodeRegistry::notify(const std::vector<NodeChange>& changes) {
  std::function<void(const NodeChange&)> listener;
  {
    std::lock_guard lock(mu_);
    listener = listener_;
  }
  if (!listener) return;
  for (const NodeChange& c : changes)
    listener(c);
}

Status NodeRegistry::checkInventory(const api::Node& node) const {
  std::lock_guard lock(mu_);
  return checkInventoryLocked(node);
}

Status NodeRegistry::checkInventoryLocked(const api::Node& node) const {
  GPOOL_RETURN_IF_ERROR(api::validateNodeName(node.name));
  // A report that lists a GPU twice would be stored and then break every listing of the nodes.
  GPOOL_RETURN_IF_ERROR(api::validateNodeGpus(node, "gpus"));
  // A GPU belongs to the node that reported it first, until an admin removes that node: an
  // agent cannot move another server's GPU (and its jobs' view of it) to itself.
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    for (const auto& [other_name, other] : nodes_) {
      if (other_name == node.name || other.findGpu(node.gpus[i].uuid) == nullptr) continue;
      return Status::failedPrecondition("gpus.gpus[" + std::to_string(i) + "].uuid: GPU '" +
                                        node.gpus[i].uuid + "' belongs to node '" + other_name +
                                        "'; it is released when an admin removes that "
                                        "node (gpool node remove " +
                                        other_name + ")");
    }
  }
  return Status::ok();
}

Result<int64_t> NodeRegistry::registerNode(api::Node node, uint64_t connection) {
  std::unique_lock lock(mu_);
  GPOOL_RETURN_IF_ERROR(checkInventoryLocked(node));
  TimePoint now = clock_.now();
  auto it = nodes_.find(node.name);
  // An admin's drain survives the agent reconnecting; a lost node comes back IDLE.
  if (it != nodes_.end() && (it->second.state == api::NodeState::kDraining ||
                             it->second.state == api::NodeState::kDrained)) {
    node.state = it->second.state;
    node.state_reason = it->second.state_reason;
  } else {
    node.state = api::NodeState::kIdle;
    node.state_reason.clear();
  }
  node.last_seen = now;
  applyHoldsLocked(node);
  GPOOL_RETURN_IF_ERROR(saveLocked(node));
  contact_[node.name] = clock_.monotonic();
  connections_[node.name] = connection;
  int64_t& epoch = epochs_[node.name];
  epoch = std::max(epoch + 1, toUnixMicros(now));
  int64_t result = epoch;
  std::vector<NodeChange> changes{changeOf(node, "registered")};
  nodes_[node.name] = std::move(node);
  summariseLocked();
  lock.unlock();
  notify(changes);
  return result;
}

void NodeRegistry::agentDisconnected(const std::string& name, uint64_t connection) {
  std::lock_guard lock(mu_);
  auto it = connections_.find(name);
  if (it != connections_.end() && it->second == connection) connections_.erase(it);
}

bool NodeRegistry::agentConnected(const std::string& name) const {
  std::lock_guard lock(mu_);
  return connections_.count(name) > 0;
}

Status NodeRegistry::removeNode(const std::string& name, const std::string& actor) {
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return Status::notFound("node '" + name + "' does not exist");
  GPOOL_RETURN_IF_ERROR(store_.removeNode(name, clock_.now(), actor));
  NodeChange change{name, "removed", "", "removed by " + actor};
  // The epoch stays: a node that joins again under this name must get a greater one.
  nodes_.erase(it);
  connections_.erase(name);
  contact_.erase(name);
  summariseLocked();
  lock.unlock();
  notify({change});
  return Status::ok();
}

Status NodeRegistry::heartbeat(const std::string& name) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return Status::notFound("heartbeat from unknown node '" + name + "'");
  if (it->second.state == api::NodeState::kDown) {
    return Status::failedPrecondition("node '" + name + "' is DOWN; its agent must say hello");
  }
  // Heartbeats stay in memory: writing each one would cost a transaction per node per interval,
  // and after a restart every node gets a fresh `down_after` anyway (see load()).
  it->second.last_seen = clock_.now();
  contact_[name] = clock_.monotonic();
  return Status::ok();
}

Result<std::vector<std::string>> NodeRegistry::expireSilent() {
  std::unique_lock lock(mu_);
  std::vector<NodeChange> changes;
  const Micros mono = clock_.monotonic();
  const Micros silent_for = std::max(options_.down_after, options_.lease_ends_after);
  std::vector<std::string> lost;
  for (auto& [name, node] : nodes_) {
    if (node.state == api::NodeState::kDown) continue;
    auto contact = contact_.find(name);
    if (contact == contact_.end()) contact = contact_.emplace(name, mono).first;
    if (mono - contact->second <= silent_for) continue;
    api::Node down = node;
    down.state = api::NodeState::kDown;
    down.state_reason = "Not responding";
    GPOOL_RETURN_IF_ERROR(saveLocked(down));
    changes.push_back(changeOf(down, "down"));
    node = std::move(down);
    lost.push_back(name);
  }
  lock.unlock();
  notify(changes);
  return lost;
}

Result<bool> NodeRegistry::setGpuHealth(
    const std::string& name,
    const std::map<std::string, std::pair<api::GpuHealth, std::string>>& health,
    const std::string& node_reason) {
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return Status::notFound("health of unknown node '" + name + "'");
  api::Node changed = it->second;
  for (api::Gpu& gpu : changed.gpus) {
    auto h = health.find(gpu.uuid);
    gpu.health = h == health.end() ? api::GpuHealth::kHealthy : h->second.first;
    gpu.health_reason = h == health.end() ? std::string() : h->second.second;
  }
  changed.health_reason = node_reason;
  applyHoldsLocked(changed);
  if (changed == it->second) return false;
  GPOOL_RETURN_IF_ERROR(saveLocked(changed));
  // One "health" change for the node, naming every GPU that is not healthy, so that a watcher
  // (the dashboard, gpool watch) sees a GPU leave and rejoin scheduling as it happens.
  NodeChange change = changeOf(changed, "health");
  change.reason = changed.health_reason;
  for (const api::Gpu& gpu : changed.gpus) {
    if (gpu.health == api::GpuHealth::kHealthy) continue;
    if (!change.reason.empty()) change.reason += "; ";
    change.reason += "GPU " + std::to_string(gpu.index) + " (" + gpu.uuid + ") " +
                     std::string(api::gpuHealthName(gpu.health)) + ": " + gpu.health_reason;
  }
  if (change.reason.empty()) change.reason = "every GPU healthy";
  it->second = std::move(changed);
  lock.unlock();
  notify({change});
  return true;
}

Result<bool> NodeRegistry::holdGpu(const std::string& name, const std::string& uuid,
                                   const std::string& reason) {
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return Status::notFound("hold: unknown node '" + name + "'");
  if (it->second.findGpu(uuid) == nullptr) {
    return Status::notFound("hold: node '" + name + "' has no GPU " + uuid);
  }
  if (holds_.count(uuid)) return false;
  store::GpuHold hold{uuid, name, reason, clock_.now()};
  GPOOL_RETURN_IF_ERROR(store_.holdGpu(hold));
  holds_[uuid] = hold;
  api::Node changed = it->second;
  applyHoldsLocked(changed);
  GPOOL_RETURN_IF_ERROR(saveLocked(changed));
  NodeChange change = changeOf(changed, "health");
  const api::Gpu* gpu = changed.findGpu(uuid);
  change.reason = "GPU " + std::to_string(gpu->index) + " (" + uuid + ") held: " + reason;
  it->second = std::move(changed);
  lock.unlock();
  notify({change});
  return true;
}

Result<std::string> NodeRegistry::clearGpuHold(const std::string& name, uint32_t index,
                                               const std::string& actor) {
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return Status::notFound("node '" + name + "' is not registered");
  const api::Gpu* gpu = nullptr;
  for (const api::Gpu& g : it->second.gpus) {
    if (g.index == index) gpu = &g;
  }
  if (gpu == nullptr) {
    return Status::notFound("node '" + name + "' has no GPU " + std::to_string(index));
  }
  std::string uuid = gpu->uuid;
  if (!holds_.count(uuid)) {
    return Status::failedPrecondition("GPU " + std::to_string(index) + " of " + name +
                                      " is not held (nothing to clear)");
  }
  GPOOL_RETURN_IF_ERROR(store_.clearGpuHold(uuid, actor, clock_.now()));
  holds_.erase(uuid);
  api::Node changed = it->second;
  for (api::Gpu& g : changed.gpus) {
    if (g.uuid != uuid) continue;
    g.health = api::GpuHealth::kHealthy;
    g.health_reason.clear();
  }
  GPOOL_RETURN_IF_ERROR(saveLocked(changed));
  NodeChange change = changeOf(changed, "health");
  change.reason = "GPU " + std::to_string(index) + " (" + uuid + ") cleared by " + actor;
  it->second = std::move(changed);
  lock.unlock();
  notify({change});
  return uuid;
}

std::map<std::string, std::string> NodeRegistry::heldGpus() const {
  std::lock_guard lock(mu_);
  std::map<std::string, std::string> out;
  for (const auto& [uuid, hold] : holds_)
    out[uuid] = hold.reason;
  return out;
}

Status NodeRegistry::drain(const std::string& name, const std::string& reason) {
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return Status::notFound("drain: unknown node '" + name + "'");
  api::Node changed = it->second;
  changed.state = api::NodeState::kDraining;
  changed.state_reason = reason;
  GPOOL_RETURN_IF_ERROR(saveLocked(changed));
  std::vector<NodeChange> changes{changeOf(changed, "drain")};
  it->second = std::move(changed);
  lock.unlock();
  notify(changes);
  return Status::ok();
}

Status NodeRegistry::resume(const std::string& name) {
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return Status::notFound("resume: unknown node '" + name + "'");
  if (it->second.state == api::NodeState::kDown) {
    return Status::failedPrecondition("resume: node '" + name +
                                      "' is DOWN; its agent must "
                                      "say hello");
  }
  api::Node changed = it->second;
  changed.state = api::NodeState::kIdle;
  changed.state_reason.clear();
  GPOOL_RETURN_IF_ERROR(saveLocked(changed));
  std::vector<NodeChange> changes{changeOf(changed, "resume")};
  it->second = std::move(changed);
  lock.unlock();
  notify(changes);
  return Status::ok();
}

int64_t NodeRegistry::nodeEpoch(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = epochs_.find(name);
  return it == epochs_.end() ? 0 : it->second;
}

std::vector<api::Node> NodeRegistry::nodes() const {
  std::lock_guard lock(mu_);
  std::vector<api::Node> out;
  out.reserve(nodes_.size());
  for (const auto& [name, node] : nodes_)
    out.push_back(node);
  return out;
}

Result<api::Node> NodeRegistry::node(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return Status::notFound("unknown node '" + name + "'");
  return it->second;
}

}  // namespace gpool::controller
