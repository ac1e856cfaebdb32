#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

// What the scheduler gave a job: per task, a node and a set of GPU slices. The interposer
// enforces each slice's memory and compute share; an exclusive slice is a whole GPU without
// the interposer ("passthrough").
//
// Thread-safety: plain values without shared state; every function here is re-entrant and may
// be called from any thread on objects no other thread is writing.
namespace gpool::api {

// A share of one physical GPU held by one task.
struct Slice {
  std::string gpu_uuid;
  uint64_t memory_mib = 0;     // the memory quota on that GPU
  uint32_t compute_milli = 0;  // compute share in thousandths of the GPU, [1, 1000]
  bool exclusive = false;      // a whole GPU, not shared with other tasks
  bool operator==(const Slice&) const = default;
};

// The resources of one task of a job, all on one node.
struct Allocation {
  uint32_t task = 0;  // the task's rank in the job, [0, tasks)
  std::string node;
  std::vector<Slice> slices;  // one per GPU, distinct GPUs; empty for CPU-only tasks
  uint64_t cpus_milli = 0;
  uint64_t ram_mib = 0;
  // Where the task's output goes on its node, and the node agent's socket for entering the task
  // (`gpool shell`): reported by the agent once the task runs, empty before. Paths on the node,
  // not on the controller's machine (docs/cli.md, "gpool logs").
  std::string stdout_log;
  std::string stderr_log;
  std::string shell_socket;
  // The MASTER_PORT of a job of several tasks (on the server of task 0), chosen at placement so
  // that no two running jobs whose task 0 shares a server get the same one; 0: none (a job of
  // one task, or placed before ports were chosen: the id formula of rendezvousFor applies).
  uint32_t rendezvous_port = 0;
  bool operator==(const Allocation&) const = default;

  // The UUIDs of the allocated GPUs, in slice order.
  std::vector<std::string> gpuUuids() const;
};

nlohmann::json toJson(const Slice& slice);
nlohmann::json toJson(const Allocation& allocation);
// An exclusive slice must hold the whole compute share (1000).
Status fromJson(const nlohmann::json& j, Slice* out, std::string_view path = "slice");
// Rejects a GPU listed twice.
Status fromJson(const nlohmann::json& j, Allocation* out, std::string_view path = "allocation");

}  // namespace gpool::api
