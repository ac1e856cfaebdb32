#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "api/node.h"
#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "store/store.h"

// The controller's view of the pool's servers: registered by an agent's `hello`
// (docs/agent-protocol.md), kept alive by heartbeats, declared DOWN when silent for longer than
// `down_after`. Every change is written through to the store (api_codec's saveApiNode), so a
// restarted controller knows every node; the in-memory copy is what the scheduling loop reads.
namespace gpool::controller {

struct NodeRegistryOptions {
  // A node without contact for this long goes DOWN (the protocol's `node_down_after`).
  Micros down_after{std::chrono::seconds(90)};
  // ...but never before the last lease its agent was granted has certainly ended on the node:
  // lease_duration + fence_grace + lease_margin after the last contact. Going DOWN is what lets
  // the loop run the node's jobs elsewhere (docs/agent-protocol.md, "Leases and fencing").
  Micros lease_ends_after{0};
};

// What the registered nodes offer at most, whatever their state: what submissions are checked
// against (JobService). Depends only on the nodes' hardware and labels, so it changes only when
// a node registers (or the registry loads).
struct PoolSummary {
  size_t nodes = 0;
  size_t max_gpus = 0;                // GPUs of the largest server
  std::vector<size_t> gpus_per_node;  // every server's GPU count, largest first
  uint64_t max_gpu_memory_mib = 0;
  uint64_t max_cpus_milli = 0;
  uint64_t max_ram_mib = 0;
  api::ComputeCapability max_compute_capability;
  std::set<std::string> gpu_models;
  std::set<std::pair<std::string, std::string>> labels;  // every (key, value) some node has
};

// One change of a node, for live updates: `change` is "registered", "down", "drain", "resume",
// "health" or "removed"; `state` is the node's registry state after it (api::nodeStateName) and
// `reason` its state reason, or for "health" the GPUs that are not healthy and why ("every GPU
// healthy" when none).
struct NodeChange {
  std::string node;
  std::string change;
  std::string state;
  std::string reason;
};

// Thread-safety: all methods may be called from any thread (one mutex).
class NodeRegistry {
 public:
  // `store` and `clock` must outlive the registry.
  NodeRegistry(store::Store& store, Clock& clock, NodeRegistryOptions options = {});

  // Loads the nodes the store knows (after a restart). Nodes that were not DOWN count as seen
  // now, so their agents get `down_after` to reconnect before their jobs are touched.
  Status load();

  // An agent's hello: stores the node with exactly these GPUs, marks it IDLE (the loop derives
  // MIXED/ALLOCATED), and returns the new node epoch (strictly increasing per node, also across
  // controller restarts since it starts from the clock). InvalidArgument for a bad name or an
  // inventory that lists a GPU (UUID or index) twice (api::validateNodeGpus, path "gpus");
  // FailedPrecondition for a GPU UUID that belongs to another node: a GPU stays bound to its
  // node until an admin removes that node (removeNode). Nothing changes on an error. The
  // node's agent counts as connected through `connection` (the AgentLink's connection id; 0
  // when the caller tracks none) until agentDisconnected names that connection.
  Result<int64_t> registerNode(api::Node node, uint64_t connection = 0);
  // registerNode's checks of an inventory alone, without registering: for the agent link to
  // refuse a hello before it spends a join token on it.
  Status checkInventory(const api::Node& node) const;

  // An admin's removal: the node, its GPUs and its agent's credentials go from the store in one
  // transaction (Store::removeNode), then from the registry; its GPU UUIDs are free for another
  // node. NotFound for an unknown node. The caller checks that nothing runs there and
  // disconnects its agent.
  Status removeNode(const std::string& name, const std::string& actor);

  // The agent connection `connection` of `name` closed: the node gets no new work (the loop
  // reads agentConnected) until its agent says hello again; its running work stays. A
  // connection that has been replaced by a newer hello changes nothing.
  void agentDisconnected(const std::string& name, uint64_t connection);
  // Whether the node's agent said hello and its connection has not closed since (issue 19: a
  // node whose agent is gone must not be given work it cannot start). After load(), false for
  // every node until its agent says hello.
  bool agentConnected(const std::string& name) const;

  // A heartbeat from `name`'s agent. NotFound for an unregistered node; FailedPrecondition for a
  // DOWN node (its agent must say hello again).
  Status heartbeat(const std::string& name);

  // Declares DOWN every node silent for longer than max(down_after, lease_ends_after) on the
  // clock's monotonic reading (a wall-clock step cannot shorten it) and returns their names
  // (each node once, when it goes DOWN).
  Result<std::vector<std::string>> expireSilent();

  // The health an agent reports for the GPUs of `name` (its `health` findings): each GPU in
  // `health` takes that state and reason, every other GPU of the node is healthy. Unhealthy GPUs
  // receive no new work (the loop's snapshot reads it); running work stays. `node_reason`: the
  // findings about the server itself (api::Node::health_reason; shown, not acted on). Written
  // to the store only when something changed; returns whether it did. NotFound for an unknown
  // node.
  Result<bool> setGpuHealth(
      const std::string& name,
      const std::map<std::string, std::pair<api::GpuHealth, std::string>>& health,
      const std::string& node_reason = "");

  // Holds a GPU of `name` out of scheduling after a fatal fault (`reason`, e.g. the XID's
  // message): it stays unhealthy whatever its agent reports later, across reconnects and
  // controller restarts (the store keeps the hold), until clearGpuHold. Returns whether it was
  // newly held. NotFound for an unknown node or GPU.
  Result<bool> holdGpu(const std::string& name, const std::string& uuid, const std::string& reason);
  // An admin clears the hold of GPU `index` of `name` (audited as `actor`); the GPU takes the
  // health its agent reports next. NotFound for an unknown node or GPU, FailedPrecondition when
  // it is not held. Returns the GPU's UUID.
  Result<std::string> clearGpuHold(const std::string& name, uint32_t index,
                                   const std::string& actor);

  // The held GPUs: UUID -> why (what holdGpu was given).
  std::map<std::string, std::string> heldGpus() const;

  // Admin drain / resume. Drain: no new work on the node (DRAINING); resume: back to IDLE.
  Status drain(const std::string& name, const std::string& reason);
  Status resume(const std::string& name);

  // The current node epoch of `name` (0 when unknown).
  int64_t nodeEpoch(const std::string& name) const;

  std::vector<api::Node> nodes() const;  // ordered by name
  // The current summary, recomputed on each registration: a submission reads it without
  // copying every node. Never null; the snapshot stays valid after later changes.
  std::shared_ptr<const PoolSummary> poolSummary() const;

  // Called after each change is stored (registerNode, a node going DOWN, drain, resume, a change
  // of GPU health, "removed"), on the
  // changing thread and outside the registry's lock; must return quickly. Set it before
  // concurrent use; an empty function removes it.
  void setChangeListener(std::function<void(const NodeChange&)> listener);
  Result<api::Node> node(const std::string& name) const;

 private:
  Status saveLocked(const api::Node& node);
  Status checkInventoryLocked(const api::Node& node) const;
  void summariseLocked();
  void notify(const std::vector<NodeChange>& changes);

  store::Store& store_;
  Clock& clock_;
  NodeRegistryOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, api::Node> nodes_;
  std::map<std::string, int64_t> epochs_;
  std::map<std::string, store::GpuHold> holds_;  // by GPU UUID
  // Applies the holds to `node`'s GPUs (unhealthy, the hold's reason).
  void applyHoldsLocked(api::Node& node) const;
  // The last contact with each node's agent (monotonic): a hello, a heartbeat, or this
  // registry's load (a lease granted before a restart was granted before the load).
  std::map<std::string, Micros> contact_;
  // The nodes whose agent is connected, with the connection's id (registerNode).
  std::map<std::string, uint64_t> connections_;
  std::shared_ptr<const PoolSummary> summary_ = std::make_shared<PoolSummary>();
  std::function<void(const NodeChange&)> listener_;  // GUARDED_BY(mu_)
};

}  // namespace gpool::controller
