#include "gpu/gpu_json.h"

namespace gpool::gpu {

using nlohmann::json;

json toJson(const Inventory& inventory) {
  json gpus = json::array();
  for (const GpuInfo& gpu : inventory.gpus) {
    json mig = json::array();
    for (const MigInstance& m : gpu.mig_instances) {
      mig.push_back({{"uuid", m.uuid},
                     {"profile", m.profile},
                     {"gpu_instance_id", m.gpu_instance_id},
                     {"compute_instance_id", m.compute_instance_id},
                     {"memory_mib", m.memory_mib}});
    }
    gpus.push_back({{"uuid", gpu.uuid},
                    {"index", gpu.index},
                    {"pci_bus_id", gpu.pci_bus_id},
                    {"model", gpu.model},
                    {"memory_total_mib", gpu.memory_total_mib},
                    {"compute_capability", std::to_string(gpu.compute_capability_major) + "." +
                                               std::to_string(gpu.compute_capability_minor)},
                    {"mig_enabled", gpu.mig_enabled},
                    {"mig_instances", mig},
                    {"simulated", gpu.simulated}});
  }
  json links = json::array();
  for (const GpuLink& link : inventory.links) {
    links.push_back({{"gpu_a", link.gpu_a},
                     {"gpu_b", link.gpu_b},
                     {"level", topologyLevelName(link.level, link.nvlink_count)},
                     {"nvlink_count", link.nvlink_count}});
  }
  return {{"backend", inventory.backend},
          {"simulated", inventory.simulated},
          {"driver_version", inventory.driver_version},
          {"cuda_driver_version", inventory.cuda_driver_version},
          {"gpus", gpus},
          {"links", links}};
}

json toJson(const TelemetrySample& sample) {
  json gpus = json::array();
  for (const GpuTelemetry& t : sample.gpus) {
    json processes = json::array();
    for (const GpuProcess& p : t.processes) {
      processes.push_back({{"pid", p.pid}, {"used_mib", p.used_mib}});
    }
    gpus.push_back(
        {{"uuid", t.uuid},
         {"index", t.index},
         {"utilization_pct", t.utilization_pct},
         {"memory_utilization_pct", t.memory_utilization_pct},
         {"memory_used_mib", t.memory_used_mib},
         {"memory_total_mib", t.memory_total_mib},
         {"temperature_c", t.temperature_c},
         {"power_w", t.power_w},
         {"sm_clock_mhz", t.sm_clock_mhz},
         {"memory_clock_mhz", t.memory_clock_mhz},
         {"ecc_corrected", t.ecc_corrected ? json(*t.ecc_corrected) : json(nullptr)},
         {"ecc_uncorrected", t.ecc_uncorrected ? json(*t.ecc_uncorrected) : json(nullptr)},
         {"xid_errors", t.xid_errors},
         {"processes", processes}});
  }
  return {{"taken_at_us", toUnixMicros(sample.taken_at)},
          {"simulated", sample.simulated},
          {"gpus", gpus}};
}

json toJson(const Finding& finding) {
  return {{"check", finding.check},       {"severity", std::string(severityName(finding.severity))},
          {"gpu_uuid", finding.gpu_uuid}, {"pid", finding.pid},
          {"used_mib", finding.used_mib}, {"unhealthy", finding.unhealthy},
          {"message", finding.message}};
}

}  // namespace gpool::gpu
