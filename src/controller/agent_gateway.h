#pragma once

#include <cstdint>
#include <optional>
#include <string>

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
};

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
