#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "gpu/gpu_types.h"

// The description `FakeBackend` plays: a node's GPUs, their topology and MIG layout, starting
// telemetry, and a script of changes over time (telemetry, XID and ECC errors, GPUs that
// disappear, processes that start and exit). Fixtures are JSON files (format in
// docs/gpu-backends.md; examples in src/gpu/fixtures/) or structs built by tests.
namespace gpool::gpu {

struct FakeGpuSpec {
  std::string uuid;
  std::string pci_bus_id;
  std::string model;  // as the driver would name it, without " (simulated)"
  uint64_t memory_total_mib = 0;
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  bool ecc_enabled = true;
  bool mig_enabled = false;
  std::vector<MigInstance> mig_instances;
};

// A partial update of a GPU's telemetry; fields left empty keep their value.
struct TelemetryChange {
  std::optional<uint32_t> utilization_pct;
  std::optional<uint32_t> memory_utilization_pct;
  std::optional<uint64_t> memory_used_mib;  // memory in use beyond that of listed processes
  std::optional<int32_t> temperature_c;
  std::optional<double> power_w;
  std::optional<uint32_t> sm_clock_mhz;
  std::optional<uint32_t> memory_clock_mhz;
};

enum class FakeEventKind {
  kSet,           // apply `change`
  kXid,           // report XID `xid`
  kEcc,           // add `ecc_corrected` / `ecc_uncorrected` to the counters
  kDisappear,     // the GPU falls off the bus: left out of inventory and samples
  kReappear,      // it is back
  kProcessStart,  // process `pid` opens a context using `used_mib`
  kProcessExit,   // process `pid` exits
};

// One scripted change, applied once the backend's clock reaches step `step`.
struct FakeEvent {
  int64_t step = 0;
  int gpu = -1;  // GPU index; -1 means every GPU
  FakeEventKind kind = FakeEventKind::kSet;
  TelemetryChange change;
  uint32_t xid = 0;
  uint64_t ecc_corrected = 0;
  uint64_t ecc_uncorrected = 0;
  int pid = 0;
  uint64_t used_mib = 0;
};

struct FakeFixture {
  std::string description;
  std::string driver_version = "550.54.15";
  std::string cuda_driver_version = "12.4";
  std::vector<FakeGpuSpec> gpus;
  // One entry per pair of GPUs (gpu_a < gpu_b); pairs not listed are SYS.
  std::vector<GpuLink> links;
  // The telemetry every GPU starts with; every field is set.
  TelemetryChange initial;
  // How much clock time one script step is.
  Micros step_length{1'000'000};
  // Ordered by step; events of one step apply in their listed order.
  std::vector<FakeEvent> events;
};

// Parses a JSON fixture. `node_name` salts the UUIDs generated for GPUs and MIG instances that
// the fixture does not name, so that several fake nodes of one pool get distinct UUIDs.
// InvalidArgument names the offending field (e.g. "gpus[1].compute_capability").
Result<FakeFixture> parseFakeFixture(std::string_view json_text, std::string_view node_name = "");
// Reads and parses the file at `path`; errors carry the path.
Result<FakeFixture> loadFakeFixture(const std::string& path, std::string_view node_name = "");

}  // namespace gpool::gpu
