// gpool-gpu-probe: prints what a GPU backend sees on this machine: the inventory (GPUs,
// topology, MIG), one telemetry sample with processes, and the health findings. From NVML
// when it can be loaded, or from a fake GPU fixture with --fake FILE, labelled simulated.
//
// Exit codes: 0 success, 2 bad usage or fixture, 7 NVML unavailable (no driver or no GPU),
// other Status codes as in docs/cli-exit-codes.md.

#include <CLI/CLI.hpp>

#include <time.h>

#include <cstdio>
#include <memory>
#include <string>

#include "common/clock.h"
#include "common/units.h"
#include "gpu/backend_factory.h"
#include "gpu/fake_backend.h"
#include "gpu/gpu_json.h"
#include "gpu/health.h"
#include "gpu/nvml_backend.h"
#include "gpu/nvml_library.h"

namespace gpool::gpu {
namespace {

struct Options {
  std::string fake;
  std::string node;
  std::string nvml_library = NvmlLibrary::kDefaultPath;
  bool json = false;
  bool verbose = false;
  int samples = 1;
  int64_t at_step = 0;
};

double cpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int fail(const Status& status) {
  std::fprintf(stderr, "gpool-gpu-probe: %s\n", status.toString().c_str());
  return exitCodeFor(status.code());
}

void printTable(const Inventory& inv, const TelemetrySample& sample,
                const std::vector<Finding>& findings, const std::string& source) {
  if (inv.simulated) {
    std::printf("SIMULATED GPUs (fake backend, fixture %s): no real GPU stands behind these\n",
                source.c_str());
  }
  std::printf("backend %s%s, driver %s, CUDA %s, %zu GPUs\n\n", inv.backend.c_str(),
              inv.simulated ? " (simulated)" : "", inv.driver_version.c_str(),
              inv.cuda_driver_version.c_str(), inv.gpus.size());
  std::printf("%-4s %-40s %-17s %-36s %7s %4s %s\n", "IDX", "UUID", "PCI BUS", "MODEL", "MEMORY",
              "CC", "MIG");
  for (const GpuInfo& gpu : inv.gpus) {
    std::string cc = std::to_string(gpu.compute_capability_major) + "." +
                     std::to_string(gpu.compute_capability_minor);
    std::printf("%-4u %-40s %-17s %-36s %7s %4s %s\n", gpu.index, gpu.uuid.c_str(),
                gpu.pci_bus_id.c_str(), gpu.model.c_str(),
                formatMemoryMiB(gpu.memory_total_mib).c_str(), cc.c_str(),
                gpu.mig_enabled ? "on" : "off");
    for (const MigInstance& m : gpu.mig_instances) {
      std::printf("     `- MIG %-36s %-10s GI %-3u CI %-3u %7s\n", m.uuid.c_str(),
                  m.profile.c_str(), m.gpu_instance_id, m.compute_instance_id,
                  formatMemoryMiB(m.memory_mib).c_str());
    }
  }
  if (inv.gpus.size() > 1) {
    std::printf("\nTopology\n%-6s", "");
    for (const GpuInfo& gpu : inv.gpus)
      std::printf(" %-5s", ("GPU" + std::to_string(gpu.index)).c_str());
    std::printf("\n");
    for (const GpuInfo& a : inv.gpus) {
      std::printf("%-6s", ("GPU" + std::to_string(a.index)).c_str());
      for (const GpuInfo& b : inv.gpus) {
        const GpuLink* link = inv.linkBetween(a.index, b.index);
        std::string cell = a.index == b.index ? "X"
                           : link             ? topologyLevelName(link->level, link->nvlink_count)
                                              : "?";
        std::printf(" %-5s", cell.c_str());
      }
      std::printf("\n");
    }
  }
  std::printf("\nTelemetry%s\n", sample.simulated ? " (simulated)" : "");
  std::printf("%-4s %5s %5s %15s %5s %8s %7s %7s %13s %s\n", "IDX", "UTIL", "MUTIL", "MEMORY",
              "TEMP", "POWER", "SM MHZ", "MEM MHZ", "ECC CORR/UNC", "XID");
  for (const GpuTelemetry& t : sample.gpus) {
    std::string memory =
        formatMemoryMiB(t.memory_used_mib) + "/" + formatMemoryMiB(t.memory_total_mib);
    std::string ecc = t.ecc_corrected ? std::to_string(*t.ecc_corrected) + "/" +
                                            std::to_string(t.ecc_uncorrected.value_or(0))
                                      : "n/a";
    std::string xids;
    for (uint32_t x : t.xid_errors)
      xids += (xids.empty() ? "" : ",") + std::to_string(x);
    std::printf("%-4u %4u%% %4u%% %15s %4dC %7.1fW %7u %7u %13s %s\n", t.index, t.utilization_pct,
                t.memory_utilization_pct, memory.c_str(), t.temperature_c, t.power_w,
                t.sm_clock_mhz, t.memory_clock_mhz, ecc.c_str(), xids.empty() ? "-" : xids.c_str());
  }
  std::printf("\nProcesses\n%-4s %-8s %s\n", "IDX", "PID", "GPU MEMORY");
  size_t processes = 0;
  for (const GpuTelemetry& t : sample.gpus) {
    for (const GpuProcess& p : t.processes) {
      std::printf("%-4u %-8d %s\n", t.index, p.pid, formatMemoryMiB(p.used_mib).c_str());
      ++processes;
    }
  }
  if (processes == 0) std::printf("(none)\n");
  std::printf("\nHealth\n");
  for (const Finding& f : findings) {
    std::printf("%-8s %-18s %s\n", std::string(severityName(f.severity)).c_str(), f.check.c_str(),
                f.message.c_str());
  }
  if (findings.empty()) std::printf("(no findings)\n");
}

int run(const Options& options) {
  SimClock sim_clock(realClock().now());
  GpuBackendPtr backend;
  if (!options.fake.empty()) {
    auto fake = FakeBackend::fromFile(options.fake, sim_clock, options.node);
    if (!fake.ok()) return fail(fake.status());
    // Plays the fixture's script up to the requested step.
    sim_clock.advance((*fake)->fixture().step_length * options.at_step);
    backend = std::move(fake).value();
  } else {
    GpuBackendOptions backend_options;
    backend_options.nvml_library = options.nvml_library;
    auto nvml = makeGpuBackend(backend_options, realClock());
    if (!nvml.ok()) {
      return fail(nvml.status().withContext("no NVML (use --fake FILE for a simulated node)"));
    }
    backend = std::move(nvml).value();
  }
  const auto* nvml_backend = dynamic_cast<const NvmlBackend*>(backend.get());
  const NvmlLibrary* library = nvml_backend ? &nvml_backend->library() : nullptr;
  auto inv = backend->inventory();
  if (!inv.ok()) return fail(inv.status());
  auto sample = backend->sample();
  if (!sample.ok()) return fail(sample.status());
  // With --samples N, the CPU cost of sampling every GPU (what the agent pays per tick).
  double cpu_us_per_sample = 0;
  if (options.samples > 1) {
    double start = cpuSeconds();
    for (int i = 1; i < options.samples; ++i) {
      sample = backend->sample();
      if (!sample.ok()) return fail(sample.status());
    }
    cpu_us_per_sample = (cpuSeconds() - start) * 1e6 / (options.samples - 1);
  }
  std::vector<Finding> findings = checkHealth(*inv, *sample, HealthConfig{});
  // The probe knows no tasks: every process is reported as belonging to none of them.
  for (Finding& f : findStrayProcesses(*sample, GpuOwnership{}))
    findings.push_back(std::move(f));

  if (options.json) {
    nlohmann::json out = {{"inventory", toJson(*inv)},
                          {"telemetry", toJson(*sample)},
                          {"findings", nlohmann::json::array()}};
    for (const Finding& f : findings)
      out["findings"].push_back(toJson(f));
    if (options.verbose && library) {
      for (const auto& [wanted, found] : library->resolvedSymbols()) {
        out["nvml_symbols"][wanted] = found;
      }
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    printTable(*inv, *sample, findings, options.fake);
    if (options.samples > 1) {
      std::printf("\nSampling cost: %.1f us of CPU per sample of %zu GPUs (%d samples)\n",
                  cpu_us_per_sample, sample->gpus.size(), options.samples - 1);
    }
    if (options.verbose && library) {
      std::printf("\nNVML symbols (%s)\n", library->path().c_str());
      for (const auto& [wanted, found] : library->resolvedSymbols()) {
        std::printf("  %-42s %s\n", wanted.c_str(), found.empty() ? "(absent)" : found.c_str());
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace gpool::gpu

int main(int argc, char** argv) {
  gpool::gpu::Options options;
  CLI::App app{"gpool-gpu-probe: show the GPUs, topology, telemetry and health that gpool sees"};
  app.add_option("--fake", options.fake, "Play this fake GPU fixture (JSON) instead of NVML");
  app.add_option("--node", options.node, "With --fake: node name that salts generated UUIDs");
  app.add_option("--at-step", options.at_step,
                 "With --fake: play the fixture's script to this step")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app.add_option("--nvml-library", options.nvml_library, "Load NVML from this path")
      ->capture_default_str();
  app.add_flag("--json", options.json, "Print JSON instead of tables");
  app.add_option("--samples", options.samples, "Take this many samples and report their CPU cost")
      ->check(CLI::Range(1, 1000000));
  app.add_flag("-v,--verbose", options.verbose, "Also list the NVML symbols resolved");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : gpool::exitCodeFor(gpool::StatusCode::kInvalidArgument);
  }
  return gpool::gpu::run(options);
}
