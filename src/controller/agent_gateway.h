#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/allocation.h"
#include "api/job_spec.h"
#include "common/result.h"
#include "store/store.h"

// How the scheduling loop talks to agents. The real gateway speaks docs/agent-protocol.md over
// the agent's WebSocket (`assign` / `cancel` frames); tests use a fake that records the calls.
namespace gpool::controller {

// One task of one job placed on one node, with the fencing token the agent must run it under.
struct TaskAssignment {
  int64_t job_id = 0;
  uint32_t task = 0;
  int32_t attempt = 0;      // the job's requeue count: increments on every requeue
  int64_t lease_epoch = 0;  // the job's epoch from Store::recordPlacement; strictly increasing
  // The store incarnation the placement was made under (Store::currentIncarnation): job ids
  // and epochs of different incarnations may repeat after a restore; the three together never.
  int64_t incarnation = 0;
  std::string node;
  int64_t node_epoch = 0;  // NodeRegistry::nodeEpoch at the time of the assignment
  std::string user;
  uint32_t uid = 0;
  // For an array element: the array's job id and the element's index, which the task finds in
  // GPOOL_ARRAY_JOB_ID and GPOOL_ARRAY_TASK_ID (Slurm's SLURM_ARRAY_JOB_ID/_TASK_ID).
  std::optional<int64_t> array_job_id;
  std::optional<int32_t> array_index;
  api::JobSpec spec;
  api::Allocation allocation;
  // Seconds between SIGTERM and SIGKILL at the time limit (the job's QoS grace_time); unset:
  // the agent's default.
  std::optional<int64_t> grace_s;
  // The server of every task of the job, by task index. A job of several tasks gets the
  // torchrun/NCCL rendezvous from it (rendezvousFor in agent_link.h); empty: none.
  std::vector<std::string> task_nodes;
  // The job's group's shared project directory on the servers (docs/containers.md, "Group
  // project directories") and the group's gid; empty: none.
  std::string project_dir;
  uint32_t project_gid = 0;
};

// The rendezvous ports: from PyTorch's default MASTER_PORT, kRendezvousPorts of them. The
// scheduling loop gives each job of several tasks the first free one (among the running jobs
// whose task 0 is on the same server) from its preferred port (rendezvousPreferredPort) on, and
// stores it in the allocations.
inline constexpr uint32_t kRendezvousBasePort = 29500;
inline constexpr uint32_t kRendezvousPorts = 4096;

// Where a job's search for a free port starts, and its port when none was stored (placements
// from before ports were chosen): the base plus the id modulo kRendezvousPorts.
inline uint32_t rendezvousPreferredPort(int64_t job_id) {
  return kRendezvousBasePort +
         static_cast<uint32_t>(static_cast<uint64_t>(job_id) % kRendezvousPorts);
}

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

// A read of one task's output log on the task's node (docs/agent-protocol.md, `read_log`).
struct RemoteLogRequest {
  std::string node;
  int64_t job_id = 0;
  uint32_t task = 0;
  int64_t lease_epoch = 0;  // the attempt whose log is wanted (the job's epoch)
  bool stderr_stream = false;
  uint64_t offset = 0;
  uint64_t max_bytes = 0;
  int64_t incarnation = 0;  // the placement's store incarnation (the job's); 0: any
};

// What the node's agent answered.
struct RemoteLogPiece {
  bool found = false;  // false: the task's directory holds no such log (it wrote none)
  uint64_t size = 0;   // the file's size when read
  std::string data;    // at most max_bytes from the offset
};

// Reads task logs where they are written: on the task's node, through its agent. Thread-safe;
// never blocks on the network, because the answer arrives on a connection that the same I/O
// threads serve: the first ask sends the request and answers nullopt, an ask after the agent's
// answer arrived takes it (each answer is handed out once). Callers poll.
class LogRelay {
 public:
  virtual ~LogRelay() = default;
  // The piece, or nullopt while the agent has not answered (ask again shortly). Unavailable
  // when the node has no agent connected or too many reads are waiting; the agent's own
  // refusal (a later attempt of the task replaced this log there) as FailedPrecondition.
  virtual Result<std::optional<RemoteLogPiece>> readRemoteLog(const RemoteLogRequest& request) = 0;
};

// Fills `t`'s project directory from `group`'s record (none when the job has no group, the
// group has no project directory, or the group is gone).
void addGroupProject(store::Store& store, const std::string& group, TaskAssignment* t);

}  // namespace gpool::controller
