#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

// The values a GPU backend reports: what a node has (inventory) and how it is doing right now
// (telemetry). Plain values with no behaviour, shared by every backend, the health checks, the
// agent's reports and `gpool-gpu-probe`.
namespace gpool::gpu {

// How two GPUs of one node are connected, best first. The names follow `nvidia-smi topo -m`:
// NV# (NVLink, # = number of links), PIX (one PCIe switch), PXB (several PCIe switches), PHB
// (the same PCIe host bridge), NODE (host bridges within one NUMA node), SYS (across sockets).
enum class TopologyLevel { kSelf, kNvLink, kPix, kPxb, kPhb, kNode, kSys };

// "NV12", "PIX", ... as nvidia-smi prints them; `nvlink_count` only matters for kNvLink.
std::string topologyLevelName(TopologyLevel level, uint32_t nvlink_count = 0);
// Parses the form above ("NV4", "PIX", "SYS", ...), writing the link count of "NV#" forms.
Result<TopologyLevel> parseTopologyLevel(std::string_view text, uint32_t* nvlink_count);

// The connection between two GPUs of the node, by their indices (`gpu_a` < `gpu_b`).
struct GpuLink {
  uint32_t gpu_a = 0;
  uint32_t gpu_b = 0;
  TopologyLevel level = TopologyLevel::kSys;
  uint32_t nvlink_count = 0;  // active NVLink links between the two, 0 unless kNvLink

  bool operator==(const GpuLink&) const = default;
};

// One MIG instance (a GPU instance with one compute instance) of a GPU in MIG mode.
struct MigInstance {
  std::string uuid;     // "MIG-..."; what CUDA_VISIBLE_DEVICES takes
  std::string profile;  // "1g.10gb", "3g.40gb", ...
  uint32_t gpu_instance_id = 0;
  uint32_t compute_instance_id = 0;
  uint64_t memory_mib = 0;

  bool operator==(const MigInstance&) const = default;
};

struct GpuInfo {
  std::string uuid;  // "GPU-8c4e...": the stable identity; indices may change across reboots
  uint32_t index = 0;
  std::string pci_bus_id;  // "00000000:07:00.0"
  std::string model;       // "NVIDIA A100-SXM4-80GB"; ends in " (simulated)" for the fake
  uint64_t memory_total_mib = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  bool mig_enabled = false;
  std::vector<MigInstance> mig_instances;
  bool simulated = false;

  bool operator==(const GpuInfo&) const = default;
};

// Everything a node's GPUs are, as reported once at start and again after a change.
struct Inventory {
  std::string backend;              // "nvml" or "fake"
  bool simulated = false;           // true when no real GPU stands behind these values
  std::string driver_version;       // "535.129.03"
  std::string cuda_driver_version;  // the CUDA version the driver supports: "12.2"
  std::vector<GpuInfo> gpus;        // ordered by index; lost GPUs are left out
  std::vector<GpuLink> links;       // one entry per pair of GPUs, ordered by (gpu_a, gpu_b)

  // The link between GPUs `a` and `b` (either order), or nullptr when not reported.
  const GpuLink* linkBetween(uint32_t a, uint32_t b) const;
  // The GPU with this UUID, or nullptr.
  const GpuInfo* findGpu(std::string_view uuid) const;

  bool operator==(const Inventory&) const = default;
};

// A process that holds a context on a GPU.
struct GpuProcess {
  int pid = 0;
  uint64_t used_mib = 0;

  bool operator==(const GpuProcess&) const = default;
};

// One GPU's state at a sample. Values a device does not support read 0 (ECC: nullopt).
struct GpuTelemetry {
  std::string uuid;
  uint32_t index = 0;
  uint32_t utilization_pct = 0;         // SM busy time over the driver's last sample period
  uint32_t memory_utilization_pct = 0;  // memory controller busy time
  uint64_t memory_used_mib = 0;
  uint64_t memory_total_mib = 0;
  int32_t temperature_c = 0;
  double power_w = 0;
  uint32_t sm_clock_mhz = 0;
  uint32_t memory_clock_mhz = 0;
  std::optional<uint64_t> ecc_corrected;    // volatile counts since the driver loaded
  std::optional<uint64_t> ecc_uncorrected;  // nullopt where ECC is off or unsupported
  std::vector<uint32_t> xid_errors;         // XIDs reported since the previous sample
  std::vector<GpuProcess> processes;

  bool operator==(const GpuTelemetry&) const = default;
};

struct TelemetrySample {
  TimePoint taken_at;
  bool simulated = false;
  std::vector<GpuTelemetry> gpus;  // ordered by index; lost GPUs are left out

  const GpuTelemetry* findGpu(std::string_view uuid) const;

  bool operator==(const TelemetrySample&) const = default;
};

}  // namespace gpool::gpu
