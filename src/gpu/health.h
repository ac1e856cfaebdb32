#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/gpu_backend.h"
#include "gpu/gpu_types.h"

// Health and hygiene checks over what a backend reported. Pure functions: the agent feeds them
// an inventory, a sample and its configuration, and reports the findings; GPUs with an
// `unhealthy` finding are taken out of scheduling by the controller.
namespace gpool::gpu {

enum class Severity { kInfo, kWarning, kCritical };
std::string_view severityName(Severity severity);  // "info", "warning", "critical"

struct Finding {
  // What was found, a stable lower_snake name: gpu_missing, gpu_count, xid, ecc_uncorrected,
  // ecc_corrected, too_hot, driver_mismatch, cuda_mismatch, cuda_too_old, driver_too_old,
  // compute_capability, stray_process, dead_task_process, leaked_memory.
  std::string check;
  Severity severity = Severity::kWarning;
  std::string gpu_uuid;    // empty when the finding is about the node as a whole
  int pid = 0;             // for process findings
  uint64_t used_mib = 0;   // GPU memory concerned, for process and memory findings
  bool unhealthy = false;  // the GPU must not receive new work
  std::string message;     // for people: says what is wrong, where, and the values involved
};

struct HealthConfig {
  // GPUs the node should have; 0 skips the count check.
  uint32_t expected_gpu_count = 0;
  // UUIDs the node had before (e.g. at registration); each one absent now is a finding.
  std::vector<std::string> expected_uuids;
  int32_t warn_temperature_c = 83;
  int32_t max_temperature_c = 90;  // at or above: unhealthy
  // Volatile corrected ECC errors above this are worth a warning; uncorrected ones always count.
  uint64_t max_ecc_corrected = 1000;
  // XIDs that applications cause (illegal address, page faults, ...): reported as warnings,
  // the GPU stays schedulable. The list follows NVIDIA's k8s device plugin.
  std::set<uint32_t> application_xids = {13, 31, 43, 45, 68, 109};
  // What the rest of the pool runs; empty skips the comparison.
  std::string pool_driver_version;
  std::string pool_cuda_driver_version;
};

// The driver and CUDA versions most nodes of the pool run (ties go to the newer version), to
// fill HealthConfig's pool_* fields. Empty inventories are ignored.
struct PoolVersions {
  std::string driver_version;
  std::string cuda_driver_version;
};
PoolVersions commonVersions(const std::vector<Inventory>& nodes);

// Checks one node: missing GPUs, XID and ECC errors, temperature, versions against the pool.
std::vector<Finding> checkHealth(const Inventory& inventory, const TelemetrySample& sample,
                                 const HealthConfig& config);

// What a job asks of the node's driver and GPUs; empty/zero fields ask nothing.
struct JobGpuNeeds {
  std::string min_cuda_driver_version;  // "12.2": the driver must support at least this CUDA
  std::string min_driver_version;       // "535.104"
  int min_compute_capability_major = 0;
  int min_compute_capability_minor = 0;
};

// The reasons this node (or one of its GPUs) cannot serve a job with `needs`; empty if it can.
std::vector<Finding> checkJobNeeds(const Inventory& inventory, const JobGpuNeeds& needs);

// Compares dotted numeric versions ("535.129.03" vs "535.54"), component by component, missing
// components counting as 0. Returns <0, 0 or >0. Non-numeric parts compare as text.
int compareVersions(std::string_view a, std::string_view b);

// Which processes on each GPU belong to gpool's tasks, by GPU UUID.
struct GpuOwnership {
  std::map<std::string, std::set<int>> task_pids;       // processes of running tasks
  std::map<std::string, std::set<int>> dead_task_pids;  // processes of tasks that have ended
};

struct HygieneConfig {
  // GPU memory in use beyond what the listed processes hold; above this it is reported as left
  // behind (the driver keeps a few hundred MiB for itself, more with MIG or persistence mode).
  uint64_t leaked_memory_threshold_mib = 1024;
};

// Finds processes on GPUs that belong to no running task (stray_process), processes of tasks
// that have ended (dead_task_process), and memory held by no listed process (leaked_memory).
// Process findings are warnings and keep the GPU schedulable; the kill policy decides.
std::vector<Finding> findStrayProcesses(const TelemetrySample& sample,
                                        const GpuOwnership& ownership,
                                        const HygieneConfig& config = {});

// Remembers since when each stray or dead-task process has been seen, so that a kill policy acts
// only on processes that stayed unowned for a grace period: a task's new process can show on
// the GPU before the agent has recorded its pid, and must not be killed for that.
//
// Thread-safety: none; one owner (the agent's hygiene loop).
class StrayTracker {
 public:
  explicit StrayTracker(Micros grace) : grace_(grace) {}
  // A new grace applies to processes already being followed too.
  void setGrace(Micros grace) { grace_ = grace; }

  // Takes the findings of one `findStrayProcesses` at `now` and returns the process findings
  // whose (GPU, pid) has been reported in every call since at least `now - grace`. A process
  // missing from one call starts over.
  std::vector<Finding> update(const std::vector<Finding>& findings, TimePoint now);

 private:
  Micros grace_;
  std::map<std::pair<std::string, int>, TimePoint> first_seen_;
};

struct KillOutcome {
  std::string gpu_uuid;
  int pid = 0;
  Status status;
};

// Kills the process of every stray_process and dead_task_process finding through `backend`.
// A process that is already gone counts as done (its status is NotFound).
std::vector<KillOutcome> killStrayProcesses(GpuBackend& backend,
                                            const std::vector<Finding>& findings);

}  // namespace gpool::gpu
