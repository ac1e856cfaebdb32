#include "gpu/fake_backend.h"

#include <algorithm>

namespace gpool::gpu {

namespace {
constexpr std::string_view kSimulatedSuffix = " (simulated)";
}  // namespace

FakeBackend::FakeBackend(FakeFixture fixture, const Clock& clock)
    : fixture_(std::move(fixture)), clock_(clock), start_(clock.monotonic()) {
  gpus_.resize(fixture_.gpus.size());
  for (GpuState& gpu : gpus_)
    gpu.values = fixture_.initial;
}

Result<std::unique_ptr<FakeBackend>> FakeBackend::fromFile(const std::string& path,
                                                           const Clock& clock,
                                                           std::string_view node_name) {
  GPOOL_ASSIGN_OR_RETURN(FakeFixture fixture, loadFakeFixture(path, node_name));
  return std::make_unique<FakeBackend>(std::move(fixture), clock);
}

int64_t FakeBackend::currentStep() const {
  return (clock_.monotonic() - start_) / fixture_.step_length;
}

void FakeBackend::applyLocked(const FakeEvent& event, GpuState& gpu) {
  switch (event.kind) {
    case FakeEventKind::kSet: {
      const TelemetryChange& c = event.change;
      if (c.utilization_pct) gpu.values.utilization_pct = c.utilization_pct;
      if (c.memory_utilization_pct) gpu.values.memory_utilization_pct = c.memory_utilization_pct;
      if (c.memory_used_mib) gpu.values.memory_used_mib = c.memory_used_mib;
      if (c.temperature_c) gpu.values.temperature_c = c.temperature_c;
      if (c.power_w) gpu.values.power_w = c.power_w;
      if (c.sm_clock_mhz) gpu.values.sm_clock_mhz = c.sm_clock_mhz;
      if (c.memory_clock_mhz) gpu.values.memory_clock_mhz = c.memory_clock_mhz;
      break;
    }
    case FakeEventKind::kXid: gpu.pending_xids.push_back(event.xid); break;
    case FakeEventKind::kEcc:
      gpu.ecc_corrected += event.ecc_corrected;
      gpu.ecc_uncorrected += event.ecc_uncorrected;
      break;
    case FakeEventKind::kDisappear: gpu.present = false; break;
    case FakeEventKind::kReappear: gpu.present = true; break;
    case FakeEventKind::kProcessStart:
      std::erase_if(gpu.processes, [&](const GpuProcess& p) { return p.pid == event.pid; });
      gpu.processes.push_back({event.pid, event.used_mib});
      break;
    case FakeEventKind::kProcessExit:
      std::erase_if(gpu.processes, [&](const GpuProcess& p) { return p.pid == event.pid; });
      break;
  }
}

void FakeBackend::advanceLocked() {
  const int64_t step = currentStep();
  while (next_event_ < fixture_.events.size() && fixture_.events[next_event_].step <= step) {
    const FakeEvent& event = fixture_.events[next_event_++];
    if (event.gpu < 0) {
      for (GpuState& gpu : gpus_)
        applyLocked(event, gpu);
    } else {
      applyLocked(event, gpus_[static_cast<size_t>(event.gpu)]);
    }
  }
}

FakeBackend::GpuState* FakeBackend::findLocked(std::string_view uuid) {
  for (size_t i = 0; i < gpus_.size(); ++i) {
    if (fixture_.gpus[i].uuid == uuid) return gpus_[i].present ? &gpus_[i] : nullptr;
  }
  return nullptr;
}

Result<Inventory> FakeBackend::inventory() {
  std::lock_guard<std::mutex> lock(mu_);
  advanceLocked();
  Inventory inv;
  inv.backend = "fake";
  inv.simulated = true;
  inv.driver_version = fixture_.driver_version;
  inv.cuda_driver_version = fixture_.cuda_driver_version;
  for (size_t i = 0; i < fixture_.gpus.size(); ++i) {
    if (!gpus_[i].present) continue;
    const FakeGpuSpec& spec = fixture_.gpus[i];
    GpuInfo info;
    info.uuid = spec.uuid;
    info.index = static_cast<uint32_t>(i);
    info.pci_bus_id = spec.pci_bus_id;
    info.model = spec.model + std::string(kSimulatedSuffix);
    info.memory_total_mib = spec.memory_total_mib;
    info.compute_capability_major = spec.compute_capability_major;
    info.compute_capability_minor = spec.compute_capability_minor;
    info.mig_enabled = spec.mig_enabled;
    info.mig_instances = spec.mig_instances;
    info.simulated = true;
    inv.gpus.push_back(std::move(info));
  }
  for (const GpuLink& link : fixture_.links) {
    if (gpus_[link.gpu_a].present && gpus_[link.gpu_b].present) inv.links.push_back(link);
  }
  return inv;
}

Result<TelemetrySample> FakeBackend::sample() {
  std::lock_guard<std::mutex> lock(mu_);
  advanceLocked();
  TelemetrySample sample;
  sample.taken_at = clock_.now();
  sample.simulated = true;
  for (size_t i = 0; i < fixture_.gpus.size(); ++i) {
    GpuState& state = gpus_[i];
    if (!state.present) continue;
    const FakeGpuSpec& spec = fixture_.gpus[i];
    GpuTelemetry t;
    t.uuid = spec.uuid;
    t.index = static_cast<uint32_t>(i);
    t.utilization_pct = *state.values.utilization_pct;
    t.memory_utilization_pct = *state.values.memory_utilization_pct;
    uint64_t used = *state.values.memory_used_mib;
    for (const GpuProcess& p : state.processes)
      used += p.used_mib;
    t.memory_total_mib = spec.memory_total_mib;
    t.memory_used_mib = std::min(used, spec.memory_total_mib);
    t.temperature_c = *state.values.temperature_c;
    t.power_w = *state.values.power_w;
    t.sm_clock_mhz = *state.values.sm_clock_mhz;
    t.memory_clock_mhz = *state.values.memory_clock_mhz;
    if (spec.ecc_enabled) {
      t.ecc_corrected = state.ecc_corrected;
      t.ecc_uncorrected = state.ecc_uncorrected;
    }
    t.xid_errors = std::move(state.pending_xids);
    state.pending_xids.clear();
    t.processes = state.processes;
    sample.gpus.push_back(std::move(t));
  }
  return sample;
}

Result<std::vector<GpuProcess>> FakeBackend::processes(std::string_view uuid) {
  std::lock_guard<std::mutex> lock(mu_);
  advanceLocked();
  GpuState* gpu = findLocked(uuid);
  if (!gpu) return Status::notFound("no GPU '" + std::string(uuid) + "' on this node");
  return gpu->processes;
}

Status FakeBackend::killProcess(std::string_view uuid, int pid) {
  std::lock_guard<std::mutex> lock(mu_);
  advanceLocked();
  GpuState* gpu = findLocked(uuid);
  if (!gpu) return Status::notFound("no GPU '" + std::string(uuid) + "' on this node");
  if (std::erase_if(gpu->processes, [&](const GpuProcess& p) { return p.pid == pid; }) == 0) {
    return Status::notFound("process " + std::to_string(pid) + " is not on GPU '" +
                            std::string(uuid) + "'");
  }
  kills_.push_back({std::string(uuid), pid, clock_.now()});
  return Status::ok();
}

Status FakeBackend::startProcess(std::string_view uuid, int pid, uint64_t used_mib) {
  std::lock_guard<std::mutex> lock(mu_);
  advanceLocked();
  GpuState* gpu = findLocked(uuid);
  if (!gpu) return Status::notFound("no GPU '" + std::string(uuid) + "' on this node");
  std::erase_if(gpu->processes, [&](const GpuProcess& p) { return p.pid == pid; });
  gpu->processes.push_back({pid, used_mib});
  return Status::ok();
}

Status FakeBackend::exitProcess(std::string_view uuid, int pid) {
  std::lock_guard<std::mutex> lock(mu_);
  advanceLocked();
  GpuState* gpu = findLocked(uuid);
  if (!gpu) return Status::notFound("no GPU '" + std::string(uuid) + "' on this node");
  if (std::erase_if(gpu->processes, [&](const GpuProcess& p) { return p.pid == pid; }) == 0) {
    return Status::notFound("process " + std::to_string(pid) + " is not on GPU '" +
                            std::string(uuid) + "'");
  }
  return Status::ok();
}

std::vector<FakeBackend::Kill> FakeBackend::kills() const {
  std::lock_guard<std::mutex> lock(mu_);
  return kills_;
}

}  // namespace gpool::gpu
