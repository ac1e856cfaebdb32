#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "agent/task_launch.h"
#include "common/result.h"

// The agent's side of docs/agent-protocol.md: decoding the envelope and the task entries of
// `desired_state` / `assign` strictly (unknown fields are errors naming their path), and
// building the envelope of outgoing messages. Pure functions; no I/O.
namespace gpool::agent::protocol {

inline constexpr int kVersion = 1;

// {"v": 1, "type": "...", "seq": N, "ack": N, "body": {...}}
struct Envelope {
  int v = kVersion;
  std::string type;
  int64_t seq = 0;
  int64_t ack = 0;
  nlohmann::json body;
};

// InvalidArgument naming the field ("seq: expected an integer", "body: required field is
// missing"); FailedPrecondition for a version above kVersion.
Result<Envelope> decodeEnvelope(const nlohmann::json& msg);

nlohmann::json encodeEnvelope(std::string_view type, int64_t seq, int64_t ack, nlohmann::json body);

// The fencing identity of one attempt of one task.
struct Assignment {
  int64_t job_id = 0;
  uint32_t task = 0;
  int32_t attempt = 0;
  int64_t lease_epoch = 0;

  bool operator==(const Assignment&) const = default;
};

Status fromJson(const nlohmann::json& j, Assignment* out, std::string_view path);
nlohmann::json toJson(const Assignment& a);
// "<job_id>.<task>", the launcher's task name.
std::string taskName(const Assignment& a);

// One entry of `desired_state.tasks` (and the body of `assign`):
//   {"assignment": {...}, "requeueable": bool,
//    "launch": {"argv": [...], "env": {...}, "working_dir": "...", "user": "...", "uid": N,
//               "gid": N, "cpus_milli": N, "memory_mib": N, "pids_max": N,
//               "gpus": ["GPU-..."], "slice": {"memory_mib": N, "compute_milli": N},
//               "rendezvous": {"master_addr": "...", "master_port": N, "world_size": N,
//                              "rank": N, "local_rank": N, "node_rank": N},
//               "time_limit_seconds": N, "grace_seconds": N}}
// GPUs are named by UUID only; the agent resolves them against its inventory.
struct TaskEntry {
  Assignment assignment;
  bool requeueable = false;
  TaskLaunch launch;                   // job_id / task_index filled from the assignment
  std::vector<std::string> gpu_uuids;  // launch.gpus is filled by the agent
};

Status fromJson(const nlohmann::json& j, TaskEntry* out, std::string_view path);

}  // namespace gpool::agent::protocol
