#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
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
};

// One change of a node, for live updates: `change` is "registered", "down", "drain" or
// "resume"; `state` and `reason` are the node's registry state after it (api::nodeStateName).
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
  // controller restarts since it starts from the clock). InvalidArgument for a bad name.
  Result<int64_t> registerNode(api::Node node);

  // A heartbeat from `name`'s agent. NotFound for an unregistered node; FailedPrecondition for a
  // DOWN node (its agent must say hello again).
  Status heartbeat(const std::string& name);

  // Declares DOWN every node silent for longer than `down_after` and returns their names (each
  // node once, when it goes DOWN).
  Result<std::vector<std::string>> expireSilent();

  // Admin drain / resume. Drain: no new work on the node (DRAINING); resume: back to IDLE.
  Status drain(const std::string& name, const std::string& reason);
  Status resume(const std::string& name);

  // The current node epoch of `name` (0 when unknown).
  int64_t nodeEpoch(const std::string& name) const;

  std::vector<api::Node> nodes() const;  // ordered by name

  // Called after each change is stored (registerNode, a node going DOWN, drain, resume), on the
  // changing thread and outside the registry's lock; must return quickly. Set it before
  // concurrent use; an empty function removes it.
  void setChangeListener(std::function<void(const NodeChange&)> listener);
  Result<api::Node> node(const std::string& name) const;

 private:
  Status saveLocked(const api::Node& node);
  void notify(const std::vector<NodeChange>& changes);

  store::Store& store_;
  Clock& clock_;
  NodeRegistryOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, api::Node> nodes_;
  std::map<std::string, int64_t> epochs_;
  std::function<void(const NodeChange&)> listener_;  // GUARDED_BY(mu_)
};

}  // namespace gpool::controller
