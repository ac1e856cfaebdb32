#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"

// The inventory of the pool: servers (nodes) and their GPUs. Plain value types with strict JSON
// (de)serialisation; no behaviour beyond validation. The JSON scheme is in docs/model.md.
//
// Every `fromJson` below fails with InvalidArgument naming the field path (the `path`
// argument is the root, e.g. "node" or "register.gpus[3]") and accepts only what `toJson`
// could have written, plus the shorthand forms of quantities. `toJson` output is canonical:
// `fromJson(toJson(x)) == x` for every valid x.
//
// Thread-safety: plain values without shared state; every function here is re-entrant and may
// be called from any thread on objects no other thread is writing.
namespace gpool::api {

// A CUDA compute capability such as 8.0 or 9.0. Ordered, so constraints can compare.
struct ComputeCapability {
  uint32_t major = 0;
  uint32_t minor = 0;
  auto operator<=>(const ComputeCapability&) const = default;
};
// "8.0", "9.0", "12.1": major in [1, 99], minor in [0, 9].
Result<ComputeCapability> parseComputeCapability(std::string_view text);
std::string formatComputeCapability(ComputeCapability cc);

// A CUDA version as a driver reports the highest it supports ("12.2"), for a job's minimum.
struct CudaVersion {
  uint32_t major = 0;
  uint32_t minor = 0;
  auto operator<=>(const CudaVersion&) const = default;
};
// "11.4", "12.2", "12.10": major in [1, 99], minor in [0, 99].
Result<CudaVersion> parseCudaVersion(std::string_view text);
std::string formatCudaVersion(CudaVersion v);
// major * 100 + minor (12.2 -> 1202), what placement compares; 0 for text that is no version
// (a GPU whose driver did not say).
uint32_t cudaVersionNumber(std::string_view text);

// How two GPUs of a node are connected over PCIe, in nvidia-smi topo's vocabulary, from the
// closest to the farthest.
enum class PcieLevel {
  kPix,   // "PIX": at most one PCIe bridge between them
  kPxb,   // "PXB": several PCIe bridges, no host bridge
  kPhb,   // "PHB": through a PCIe host bridge (the CPU)
  kNode,  // "NODE": across host bridges within one NUMA node
  kSys,   // "SYS": across NUMA nodes (SMP interconnect)
};
std::string_view pcieLevelName(PcieLevel level);
// Accepts the names above, case-insensitively.
Result<PcieLevel> parsePcieLevel(std::string_view text);

// The link from one GPU to another GPU of the same node. NVLink wins over PCIe when
// `nvlinks > 0`.
struct GpuLink {
  std::string peer_uuid;  // the other GPU
  uint32_t nvlinks = 0;   // number of NVLink lanes between the two, 0 if none
  PcieLevel pcie = PcieLevel::kSys;
  bool operator==(const GpuLink&) const = default;
};

enum class MigMode {
  kUnsupported,  // "unsupported": the GPU has no MIG
  kDisabled,     // "disabled"
  kEnabled,      // "enabled"
};
std::string_view migModeName(MigMode mode);
Result<MigMode> parseMigMode(std::string_view text);

enum class GpuHealth {
  kHealthy,    // "healthy"
  kDegraded,   // "degraded": usable, but an alert is open (e.g. hot, correctable ECC errors)
  kUnhealthy,  // "unhealthy": not schedulable (XID error, lost, uncorrectable ECC)
};
std::string_view gpuHealthName(GpuHealth health);
Result<GpuHealth> parseGpuHealth(std::string_view text);

// One physical GPU. `simulated` is true for GPUs of the fake backend; every view that shows
// GPUs shows it.
struct Gpu {
  std::string uuid;  // "GPU-5c3d...": required, unique in the pool
  uint32_t index = 0;
  std::string pci_bus_id;  // "00000000:3B:00.0"; may be empty for simulated GPUs
  std::string model;       // "NVIDIA A100-SXM4-80GB"
  uint64_t memory_mib = 0;
  ComputeCapability compute_capability;
  std::string driver_version;  // "535.104.05"
  std::string cuda_version;    // "12.2", the highest the driver supports
  std::vector<GpuLink> links;
  MigMode mig_mode = MigMode::kUnsupported;
  GpuHealth health = GpuHealth::kHealthy;
  std::string health_reason;  // empty when healthy
  bool simulated = false;
  bool operator==(const Gpu&) const = default;
};

// Slurm's node states. The controller derives IDLE/MIXED/ALLOCATED from the allocations on
// the node; DRAINING/DRAINED come from an admin's drain; DOWN from a lost agent.
enum class NodeState {
  kIdle,       // "IDLE": nothing allocated
  kMixed,      // "MIXED": some resources allocated
  kAllocated,  // "ALLOCATED": everything allocated
  kDraining,   // "DRAINING": drained by an admin, jobs still running
  kDrained,    // "DRAINED": drained and empty
  kDown,       // "DOWN": the agent is lost or the node failed
};
std::string_view nodeStateName(NodeState state);
// Accepts the names above case-insensitively.
Result<NodeState> parseNodeState(std::string_view text);
// True for states in which new work may be placed on the node.
bool isSchedulable(NodeState state);

// One GPU server. Labels are free-form key=value pairs that job constraints match.
// How a node holds GPU slices to their limits, as its agent reported it (docs/agent.md, "Slice
// enforcement"): the interposer (memory quota, compute share) and the agent's backstop (ends a
// task whose processes hold more GPU memory than its quota). gpoold places slices only on
// nodes that enforce them.
struct SliceEnforcement {
  bool interposer = false;
  bool backstop = false;
  std::string detail;  // the interposer's path, or why it is not usable
  bool enforced() const { return interposer && backstop; }
  bool operator==(const SliceEnforcement&) const = default;
};

struct Node {
  std::string name;  // host name: [A-Za-z0-9._-], 1 to 253 characters
  std::map<std::string, std::string> labels;
  uint64_t cpus_milli = 0;  // CPU capacity, millicores
  uint64_t ram_mib = 0;
  NodeState state = NodeState::kIdle;
  std::string state_reason;  // why DRAINING/DRAINED/DOWN (the drain reason); else empty
  // The agent's findings about the server itself rather than one GPU (the driver, a GPU that
  // went missing from the inventory), "; "-separated; empty when it has none.
  std::string health_reason;
  std::vector<Gpu> gpus;
  std::optional<TimePoint> last_seen;  // when the agent last reported
  // Set from the agent's hello; nullopt for a node no agent has described (registered by hand,
  // `gpoold --once`), which the scheduler does not hold to it.
  std::optional<SliceEnforcement> slices;
  bool operator==(const Node&) const = default;

  // The GPU with `uuid`, or nullptr.
  const Gpu* findGpu(std::string_view uuid) const;
};

// Validates a node or label name; `what` names it in the message.
Status validateNodeName(std::string_view name);
Status validateLabelKey(std::string_view key);
// The checks across a node's GPUs, which a GPU alone cannot make: every UUID and index once, and
// every link to a GPU of this node. InvalidArgument "<path>.gpus[1].uuid: GPU 'X' is listed
// twice". Run by fromJson(Node) and on every inventory an agent reports.
Status validateNodeGpus(const Node& node, std::string_view path = "node");

nlohmann::json toJson(const GpuLink& link);
nlohmann::json toJson(const Gpu& gpu);
nlohmann::json toJson(const SliceEnforcement& slices);
nlohmann::json toJson(const Node& node);
Status fromJson(const nlohmann::json& j, GpuLink* out, std::string_view path = "link");
Status fromJson(const nlohmann::json& j, Gpu* out, std::string_view path = "gpu");
Status fromJson(const nlohmann::json& j, SliceEnforcement* out, std::string_view path = "slices");
Status fromJson(const nlohmann::json& j, Node* out, std::string_view path = "node");

}  // namespace gpool::api
