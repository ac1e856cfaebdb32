#include "gpu/health.h"

#include <algorithm>
#include <charconv>

namespace gpool::gpu {

namespace {

std::string xidMeaning(uint32_t xid) {
  switch (xid) {
    case 13: return "graphics engine exception";
    case 31: return "GPU memory page fault";
    case 43: return "GPU stopped processing";
    case 45: return "preemptive cleanup";
    case 48: return "double-bit ECC error";
    case 61: return "internal micro-controller breakpoint";
    case 62: return "internal micro-controller halt";
    case 63: return "ECC page retirement or row remapping";
    case 64: return "ECC page retirement or row remapper failure";
    case 74: return "NVLink error";
    case 79: return "GPU has fallen off the bus";
    case 92: return "high single-bit ECC error rate";
    case 94: return "contained ECC error";
    case 95: return "uncontained ECC error";
    case 119: return "GSP RPC timeout";
    case 120: return "GSP error";
    default: return "see NVIDIA's XID catalogue";
  }
}

std::string gpuName(const GpuTelemetry& gpu) {
  return "GPU " + std::to_string(gpu.index) + " (" + gpu.uuid + ")";
}

}  // namespace

std::string_view severityName(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kCritical: return "critical";
  }
  return "warning";
}

int compareVersions(std::string_view a, std::string_view b) {
  while (!a.empty() || !b.empty()) {
    auto next = [](std::string_view& text) {
      size_t dot = text.find('.');
      std::string_view part = text.substr(0, dot);
      text = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
      return part;
    };
    std::string_view pa = next(a);
    std::string_view pb = next(b);
    uint64_t na = 0;
    uint64_t nb = 0;
    auto ra = std::from_chars(pa.data(), pa.data() + pa.size(), na);
    auto rb = std::from_chars(pb.data(), pb.data() + pb.size(), nb);
    bool numeric_a = pa.empty() || (ra.ec == std::errc() && ra.ptr == pa.data() + pa.size());
    bool numeric_b = pb.empty() || (rb.ec == std::errc() && rb.ptr == pb.data() + pb.size());
    if (numeric_a && numeric_b) {
      if (na != nb) return na < nb ? -1 : 1;
    } else if (int c = pa.compare(pb); c != 0) {
      return c < 0 ? -1 : 1;
    }
  }
  return 0;
}

std::vector<Finding> checkHealth(const Inventory& inventory, const TelemetrySample& sample,
                                 const HealthConfig& config) {
  std::vector<Finding> findings;
  auto add = [&](std::string check, Severity severity, std::string uuid, bool unhealthy,
                 std::string message) {
    Finding f;
    f.check = std::move(check);
    f.severity = severity;
    f.gpu_uuid = std::move(uuid);
    f.unhealthy = unhealthy;
    f.message = std::move(message);
    findings.push_back(std::move(f));
  };

  for (const std::string& uuid : config.expected_uuids) {
    if (!inventory.findGpu(uuid)) {
      add("gpu_missing", Severity::kCritical, uuid, true,
          "GPU " + uuid + " is missing: the driver no longer reports it");
    } else if (!sample.findGpu(uuid)) {
      add("gpu_missing", Severity::kCritical, uuid, true,
          "GPU " + uuid + " is in the inventory but gave no telemetry");
    }
  }
  if (config.expected_gpu_count > 0 && inventory.gpus.size() < config.expected_gpu_count) {
    add("gpu_count", Severity::kCritical, "", false,
        "the node reports " + std::to_string(inventory.gpus.size()) + " GPUs, " +
            std::to_string(config.expected_gpu_count) + " are configured");
  }

  for (const GpuTelemetry& gpu : sample.gpus) {
    for (uint32_t xid : gpu.xid_errors) {
      bool application = config.application_xids.count(xid) > 0;
      add("xid", application ? Severity::kWarning : Severity::kCritical, gpu.uuid, !application,
          gpuName(gpu) + " reported XID " + std::to_string(xid) + " (" + xidMeaning(xid) + ")" +
              (application ? ", usually caused by an application" : ""));
    }
    if (gpu.ecc_uncorrected && *gpu.ecc_uncorrected > 0) {
      add("ecc_uncorrected", Severity::kCritical, gpu.uuid, true,
          gpuName(gpu) + " has " + std::to_string(*gpu.ecc_uncorrected) +
              " uncorrected ECC errors since the driver loaded");
    }
    if (gpu.ecc_corrected && *gpu.ecc_corrected > config.max_ecc_corrected) {
      add("ecc_corrected", Severity::kWarning, gpu.uuid, false,
          gpuName(gpu) + " has " + std::to_string(*gpu.ecc_corrected) +
              " corrected ECC errors, more than " + std::to_string(config.max_ecc_corrected));
    }
    if (gpu.temperature_c >= config.max_temperature_c) {
      add("too_hot", Severity::kCritical, gpu.uuid, true,
          gpuName(gpu) + " is at " + std::to_string(gpu.temperature_c) + " C, the limit is " +
              std::to_string(config.max_temperature_c) + " C");
    } else if (gpu.temperature_c >= config.warn_temperature_c) {
      add("too_hot", Severity::kWarning, gpu.uuid, false,
          gpuName(gpu) + " is at " + std::to_string(gpu.temperature_c) + " C, warning from " +
              std::to_string(config.warn_temperature_c) + " C");
    }
  }

  if (!config.pool_driver_version.empty() &&
      compareVersions(inventory.driver_version, config.pool_driver_version) != 0) {
    add("driver_mismatch", Severity::kWarning, "", false,
        "driver " + inventory.driver_version + " differs from the pool's " +
            config.pool_driver_version);
  }
  if (!config.pool_cuda_driver_version.empty() &&
      compareVersions(inventory.cuda_driver_version, config.pool_cuda_driver_version) != 0) {
    add("cuda_mismatch", Severity::kWarning, "", false,
        "CUDA driver version " + inventory.cuda_driver_version + " differs from the pool's " +
            config.pool_cuda_driver_version);
  }
  return findings;
}

PoolVersions commonVersions(const std::vector<Inventory>& nodes) {
  auto mostCommon = [&](auto field) {
    std::map<std::string, int> counts;
    for (const Inventory& node : nodes) {
      if (!node.gpus.empty() && !(node.*field).empty()) ++counts[node.*field];
    }
    std::string best;
    int best_count = 0;
    for (const auto& [version, count] : counts) {
      if (count > best_count || (count == best_count && compareVersions(version, best) > 0)) {
        best = version;
        best_count = count;
      }
    }
    return best;
  };
  return {mostCommon(&Inventory::driver_version), mostCommon(&Inventory::cuda_driver_version)};
}

std::vector<Finding> checkJobNeeds(const Inventory& inventory, const JobGpuNeeds& needs) {
  std::vector<Finding> findings;
  auto add = [&](std::string check, std::string uuid, std::string message) {
    Finding f;
    f.check = std::move(check);
    f.severity = Severity::kCritical;
    f.gpu_uuid = std::move(uuid);
    f.message = std::move(message);
    findings.push_back(std::move(f));
  };
  if (!needs.min_cuda_driver_version.empty() &&
      compareVersions(inventory.cuda_driver_version, needs.min_cuda_driver_version) < 0) {
    add("cuda_too_old", "",
        "the driver supports CUDA " + inventory.cuda_driver_version + ", the job needs " +
            needs.min_cuda_driver_version);
  }
  if (!needs.min_driver_version.empty() &&
      compareVersions(inventory.driver_version, needs.min_driver_version) < 0) {
    add("driver_too_old", "",
        "driver " + inventory.driver_version + " is older than the job's " +
            needs.min_driver_version);
  }
  if (needs.min_compute_capability_major > 0) {
    for (const GpuInfo& gpu : inventory.gpus) {
      if (std::pair(gpu.compute_capability_major, gpu.compute_capability_minor) <
          std::pair(needs.min_compute_capability_major, needs.min_compute_capability_minor)) {
        add("compute_capability", gpu.uuid,
            "GPU " + std::to_string(gpu.index) + " (" + gpu.model + ") has compute capability " +
                std::to_string(gpu.compute_capability_major) + "." +
                std::to_string(gpu.compute_capability_minor) + ", the job needs " +
                std::to_string(needs.min_compute_capability_major) + "." +
                std::to_string(needs.min_compute_capability_minor));
      }
    }
  }
  return findings;
}

std::vector<Finding> findStrayProcesses(const TelemetrySample& sample,
                                        const GpuOwnership& ownership,
                                        const HygieneConfig& config) {
  static const std::set<int> kNone;
  auto pidsOf = [](const std::map<std::string, std::set<int>>& by_gpu,
                   const std::string& uuid) -> const std::set<int>& {
    auto it = by_gpu.find(uuid);
    return it == by_gpu.end() ? kNone : it->second;
  };
  std::vector<Finding> findings;
  for (const GpuTelemetry& gpu : sample.gpus) {
    const std::set<int>& live = pidsOf(ownership.task_pids, gpu.uuid);
    const std::set<int>& dead = pidsOf(ownership.dead_task_pids, gpu.uuid);
    uint64_t process_mib = 0;
    for (const GpuProcess& process : gpu.processes) {
      process_mib += process.used_mib;
      if (live.count(process.pid)) continue;
      Finding f;
      f.severity = Severity::kWarning;
      f.gpu_uuid = gpu.uuid;
      f.pid = process.pid;
      f.used_mib = process.used_mib;
      if (dead.count(process.pid)) {
        f.check = "dead_task_process";
        f.message = "process " + std::to_string(process.pid) + " of an ended task still holds " +
                    std::to_string(process.used_mib) + " MiB on " + gpuName(gpu);
      } else {
        f.check = "stray_process";
        f.message = "process " + std::to_string(process.pid) + " on " + gpuName(gpu) +
                    " belongs to no gpool task and holds " + std::to_string(process.used_mib) +
                    " MiB";
      }
      findings.push_back(std::move(f));
    }
    uint64_t unaccounted =
        gpu.memory_used_mib > process_mib ? gpu.memory_used_mib - process_mib : 0;
    if (unaccounted > config.leaked_memory_threshold_mib) {
      Finding f;
      f.check = "leaked_memory";
      f.severity = Severity::kWarning;
      f.gpu_uuid = gpu.uuid;
      f.used_mib = unaccounted;
      f.message = gpuName(gpu) + " has " + std::to_string(unaccounted) +
                  " MiB in use that no listed process holds (left behind, or held by a process"
                  " in another PID namespace)";
      findings.push_back(std::move(f));
    }
  }
  return findings;
}

std::vector<Finding> StrayTracker::update(const std::vector<Finding>& findings, TimePoint now) {
  std::map<std::pair<std::string, int>, TimePoint> seen;
  std::vector<Finding> due;
  for (const Finding& f : findings) {
    if (f.check != "stray_process" && f.check != "dead_task_process") continue;
    auto key = std::make_pair(f.gpu_uuid, f.pid);
    auto it = first_seen_.find(key);
    TimePoint since = it == first_seen_.end() ? now : it->second;
    seen.emplace(key, since);
    if (now - since >= grace_) due.push_back(f);
  }
  first_seen_ = std::move(seen);
  return due;
}

std::vector<KillOutcome> killStrayProcesses(GpuBackend& backend,
                                            const std::vector<Finding>& findings) {
  std::vector<KillOutcome> outcomes;
  for (const Finding& f : findings) {
    if (f.check != "stray_process" && f.check != "dead_task_process") continue;
    outcomes.push_back({f.gpu_uuid, f.pid, backend.killProcess(f.gpu_uuid, f.pid)});
  }
  return outcomes;
}

}  // namespace gpool::gpu
