#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "api/node.h"
#include "common/result.h"
#include "common/status.h"

// What a user submits: the command, its environment, the resources of each task, where it may
// run, and how it relates to other jobs. The JSON form is the body of a submit request (root
// path "job"); docs/model.md has the scheme and examples.
//
// Thread-safety: plain values without shared state; every function here is re-entrant and may
// be called from any thread on objects no other thread is writing.
namespace gpool::api {

inline constexpr uint32_t kMaxTasksPerJob = 4096;
inline constexpr size_t kMaxCommandArgs = 4096;
inline constexpr size_t kMaxEnvVars = 4096;
// Array indices are in [0, kMaxArrayIndex]; one array has at most kMaxArrayTasks elements.
inline constexpr uint32_t kMaxArrayIndex = 999'999;
inline constexpr uint32_t kMaxArrayTasks = 10'000;

// The resources of one task. GPU memory and compute are per GPU.
//
// `gpus_milli` is 0 (no GPU), a slice of one GPU (1..999), or whole GPUs (multiples of 1000).
// For a slice, memory and compute default to that fraction of the GPU; `gpu_memory_mib` and
// `gpu_compute_milli` override the defaults. For whole GPUs without either, each GPU is
// exclusive (passthrough); with either, each of the N GPUs carries a slice of that size.
struct TaskResources {
  uint32_t gpus_milli = 0;
  uint64_t gpu_memory_mib = 0;     // 0: the default described above
  uint32_t gpu_compute_milli = 0;  // 0: the default described above
  uint64_t cpus_milli = 1000;
  uint64_t ram_mib = 0;  // 0: the site's default
  bool operator==(const TaskResources&) const = default;
};

// What one task needs on each of its GPUs, on a GPU with `gpu_memory_mib` of memory, following
// the rules of TaskResources. `gpu_count` is 0 for CPU-only tasks and 1 for a slice.
struct PerGpuNeed {
  uint32_t gpu_count = 0;
  uint64_t memory_mib = 0;
  uint32_t compute_milli = 0;
  bool exclusive = false;  // a whole GPU, not shared (passthrough)
  bool operator==(const PerGpuNeed&) const = default;
};
PerGpuNeed perGpuNeed(const TaskResources& resources, uint64_t gpu_memory_mib);

// Where a job may run. Hard constraints except `datasets`, which is a locality preference.
struct Constraints {
  std::vector<std::string> gpu_models;  // any of these (exact model names); empty: any
  std::optional<ComputeCapability> min_compute_capability;
  std::optional<CudaVersion> min_cuda;  // the driver must support at least this CUDA version
  uint64_t min_gpu_memory_mib = 0;      // the GPU's total memory; 0: any
  std::map<std::string, std::string> node_labels;  // every label must match
  std::vector<std::string> datasets;               // prefer nodes that hold these
  bool operator==(const Constraints&) const = default;
};

// A range of array indices: first, first+step, ... up to last.
struct ArrayRange {
  uint32_t first = 0;
  uint32_t last = 0;
  uint32_t step = 1;
  bool operator==(const ArrayRange&) const = default;
};

// A Slurm-style job array: "0-31%4" (32 elements, at most 4 running at once), "1,3,5-7",
// "0-15:4" (0, 4, 8, 12).
struct ArraySpec {
  std::vector<ArrayRange> ranges;
  uint32_t max_parallel = 0;  // 0: no limit
  bool operator==(const ArraySpec&) const = default;

  // The indices in the order the ranges list them.
  std::vector<uint32_t> indices() const;
  size_t count() const;
};
// Fails on empty pieces, reversed ranges, a zero step or "%0", overlapping indices, indices
// above kMaxArrayIndex and more than kMaxArrayTasks elements.
Result<ArraySpec> parseArraySpec(std::string_view text);
// The canonical text; parseArraySpec(formatArraySpec(a)) == a.
std::string formatArraySpec(const ArraySpec& spec);

// Slurm's dependency kinds.
enum class DependencyKind {
  kAfterOk,     // "afterok": start after the job COMPLETED successfully
  kAfterAny,    // "afterany": start after the job ended in any state
  kAfterNotOk,  // "afternotok": start after the job ended in a failure state
};
std::string_view dependencyKindName(DependencyKind kind);
Result<DependencyKind> parseDependencyKind(std::string_view text);

struct Dependency {
  DependencyKind kind = DependencyKind::kAfterOk;
  uint64_t job_id = 0;
  bool operator==(const Dependency&) const = default;
};
// Slurm's --dependency syntax: "afterok:12:13,afterany:14".
Result<std::vector<Dependency>> parseDependencyList(std::string_view text);
std::string formatDependencyList(const std::vector<Dependency>& deps);

struct JobSpec {
  std::string name;
  std::vector<std::string> command;  // argv; may be empty only for interactive jobs
  std::map<std::string, std::string> env;
  std::string working_dir;  // absolute; empty: the user's home directory
  TaskResources resources;
  uint32_t tasks = 1;  // [1, kMaxTasksPerJob]
  uint32_t nodes = 0;  // 0: as the scheduler sees fit; else exactly this many, <= tasks
  Constraints constraints;
  int64_t time_limit_seconds = 0;  // 0: the QoS's maximum wall time
  std::string qos;                 // empty: the default QoS
  bool preemptible = false;
  bool interactive = false;
  std::optional<ArraySpec> array;
  std::vector<Dependency> dependencies;
  // Runs each task in an OCI container of this image (docs/containers.md); empty: bare tasks.
  std::string image;
  std::vector<std::string> mounts;  // bind mounts "SRC:DST[:ro]" into the container
  bool operator==(const JobSpec&) const = default;
};

// Checks the rules across fields (empty command, too many tasks, nodes > tasks, GPU memory
// without GPUs, interactive arrays, env names, ...). Messages start with `path` and the field,
// e.g. "job.resources.gpu_memory: needs GPUs (gpus > 0)". fromJson applies it.
Status validateJobSpec(const JobSpec& spec, std::string_view path = "job");

nlohmann::json toJson(const TaskResources& resources);
nlohmann::json toJson(const Constraints& constraints);
nlohmann::json toJson(const Dependency& dependency);
nlohmann::json toJson(const JobSpec& spec);
Status fromJson(const nlohmann::json& j, TaskResources* out, std::string_view path = "resources");
Status fromJson(const nlohmann::json& j, Constraints* out, std::string_view path = "constraints");
Status fromJson(const nlohmann::json& j, Dependency* out, std::string_view path = "dependency");
Status fromJson(const nlohmann::json& j, JobSpec* out, std::string_view path = "job");

}  // namespace gpool::api
