#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/allocation.h"
#include "api/job_spec.h"

// How the scheduling loop talks to agents. The real gateway speaks docs/agent-protocol.md over
// the agent's WebSocket (`assign` / `cancel` frames); tests use a fake that records the calls.
namespace gpool::controller {

// One task of one job placed on one node, with the fencing token the agent must run it under.
struct TaskAssignment {
  int64_t job_id = 0;
  uint32_t task = 0;
  int32_t attempt = 0;      // the job's requeue count: increments on every requeue
  int64_t lease_epoch = 0;  // the job's epoch from Store::recordPlacement; strictly increasing
  std::string node;
  int64_t node_epoch = 0;  // NodeRegistry::nodeEpoch at the time of the assignment
  std::string user;
  uint32_t uid = 0;
  api::JobSpec spec;
  api::Allocation allocation;
  // Seconds between SIGTERM and SIGKILL at the time limit (the job's QoS grace_time); unset:
  // the agent's default.
  std::optional<int64_t> grace_s;
  // The server of every task of the job, by task index. A job of several tasks gets the
  // torchrun/NCCL rendezvous from it (rendezvousFor in agent_link.h); empty: none.
  std::vector<std::string> task_nodes;
};

// The server of each task of a job, by task index, from its allocations (one per task): what
// TaskAssignment::task_nodes holds.
inline std::vector<std::string> taskNodesOf(const std::vector<api::Allocation>& allocations) {
  std::vector<std::string> nodes;
  for (const api::Allocation& a : allocations) {
    if (a.task >= nodes.size()) nodes.resize(a.task + 1);
    nodes[a.task] = a.node;
  }
  return nodes;
}

// Thread-safety: called from the scheduling loop's thread and from API threads (cancel);
// implementations must not block on the network (queue and return).
class AgentGateway {
 public:
  virtual ~AgentGateway() = default;
  virtual void assign(const TaskAssignment& assignment) = 0;
  // Stop a task: SIGTERM, then SIGKILL after `grace_s`. `reason` is "cancelled", "preempted",
  // "timeout" or "node_fail".
  virtual void cancel(const std::string& node, int64_t job_id, uint32_t task, int64_t lease_epoch,
                      int64_t grace_s, const std::string& reason) = 0;
};

}  // namespace gpool::controller
