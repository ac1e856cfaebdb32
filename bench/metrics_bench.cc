// metrics_bench: what one scrape of GET /metrics costs gpoold for a pool of 1,000 servers x 8
// GPUs (docs/metrics.md).
//
// The exporter renders the page from memory: a copy of the latest telemetry of 8,000 GPUs (half
// of them held by a task, a quarter shared by two slices), the registry's nodes, and counters.
// Baseline, measured in the same run: the same readings written as JSON by nlohmann-json, as a
// REST answer listing every GPU's telemetry would be. Reports the render time (median of the
// runs), the page's size, the ratio to the baseline, and the render time while another thread
// ingests telemetry frames as fast as it can (agents reporting during the scrape).
//
// Usage: metrics_bench [runs]   (default 20)

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/metrics.h"
#include "controller/node_registry.h"
#include "controller/telemetry_history.h"
#include "store/sqlite_store.h"

namespace gpool::controller {
namespace {

constexpr int kNodes = 1000;
constexpr int kGpus = 8;

double millisSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string nodeName(int n) {
  char name[32];
  std::snprintf(name, sizeof name, "gpu-%04d", n);
  return name;
}

// One node's telemetry frame and tenants.
void frameOf(int n, uint32_t tick, std::vector<GpuReading>* gpus,
             std::map<std::string, std::vector<GpuTenant>>* tenants) {
  gpus->clear();
  tenants->clear();
  for (int g = 0; g < kGpus; ++g) {
    GpuReading r;
    r.uuid = "GPU-" + nodeName(n) + "-" + std::to_string(g);
    r.index = static_cast<uint32_t>(g);
    r.utilization_pct = (tick + static_cast<uint32_t>(n * 7 + g)) % 101;
    r.memory_used_mib = 1000u * static_cast<uint64_t>(g);
    r.memory_total_mib = 81920;
    r.temperature_c = 40 + g;
    r.power_w = 100.5 + g;
    r.sm_clock_mhz = 1410;
    r.memory_clock_mhz = 1593;
    r.ecc_corrected = 0;
    r.ecc_uncorrected = 0;
    int64_t job = int64_t{n} * kGpus + g + 1;
    if (g % 2 == 0) {
      (*tenants)[r.uuid].push_back({job, 0, 1000, true, 0, "user" + std::to_string(n % 50),
                                    "group" + std::to_string(n % 10), 0});
    } else if (g % 4 == 1) {
      for (int s = 0; s < 2; ++s) {
        (*tenants)[r.uuid].push_back({job * 10 + s, 0, 500, false, 0,
                                      "user" + std::to_string((n + s) % 50),
                                      "group" + std::to_string(n % 10), 40960});
        r.processes.push_back({1000 + s, 20000, job * 10 + s, 0});
      }
    }
    gpus->push_back(std::move(r));
  }
}

int run(int runs) {
  std::string dir = "/tmp/gpool-metrics-bench-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  store::SqliteOptions options;
  options.synchronous = "NORMAL";
  auto store = store::SqliteStore::open(dir + "/gpool.db", options);
  if (!store.ok()) {
    std::fprintf(stderr, "cannot open the store: %s\n", store.status().toString().c_str());
    return 1;
  }
  SimClock clock;
  NodeRegistry registry(**store, clock);
  TelemetryHistory telemetry;
  std::vector<GpuReading> gpus;
  std::map<std::string, std::vector<GpuTenant>> tenants;
  for (int n = 0; n < kNodes; ++n) {
    api::Node node;
    node.name = nodeName(n);
    node.cpus_milli = 64000;
    node.ram_mib = 512 * 1024;
    for (int g = 0; g < kGpus; ++g) {
      api::Gpu gpu;
      gpu.uuid = "GPU-" + node.name + "-" + std::to_string(g);
      gpu.index = static_cast<uint32_t>(g);
      gpu.model = "NVIDIA A100-SXM4-80GB (simulated)";
      gpu.memory_mib = 81920;
      gpu.compute_capability = {8, 0};
      gpu.driver_version = "550.54.15";
      gpu.cuda_version = "12.4";
      gpu.simulated = true;
      node.gpus.push_back(gpu);
    }
    if (!registry.registerNode(node).ok()) {
      std::fprintf(stderr, "cannot register %s\n", node.name.c_str());
      return 1;
    }
    frameOf(n, 0, &gpus, &tenants);
    telemetry.ingest(node.name, clock.now(), gpus, tenants);
  }
  MetricsExporter metrics(**store, registry, clock);
  metrics.setTelemetry(&telemetry);
  if (Status s = metrics.refreshJobStats(); !s.isOk()) {
    std::fprintf(stderr, "%s\n", s.toString().c_str());
    return 1;
  }

  std::vector<double> render_ms, json_ms, busy_ms;
  size_t page_bytes = 0, json_bytes = 0;
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::string page = metrics.render();
    render_ms.push_back(millisSince(start));
    page_bytes = page.size();

    start = std::chrono::steady_clock::now();
    nlohmann::json all = nlohmann::json::array();
    for (const GpuSnapshot& g : telemetry.snapshot()) {
      const GpuReading& r = g.reading;
      nlohmann::json procs = nlohmann::json::array();
      for (const GpuProcessUse& p : r.processes)
        procs.push_back({{"pid", p.pid}, {"used_mib", p.used_mib}});
      nlohmann::json ts = nlohmann::json::array();
      for (const GpuTenant& t : g.tenants)
        ts.push_back({{"job_id", t.job_id}, {"task", t.task}, {"user", t.user}});
      all.push_back({{"node", r.node},
                     {"uuid", r.uuid},
                     {"index", r.index},
                     {"utilization_pct", r.utilization_pct},
                     {"memory_used_mib", r.memory_used_mib},
                     {"memory_total_mib", r.memory_total_mib},
                     {"temperature_c", r.temperature_c},
                     {"power_w", r.power_w},
                     {"sm_clock_mhz", r.sm_clock_mhz},
                     {"memory_clock_mhz", r.memory_clock_mhz},
                     {"processes", procs},
                     {"tenants", ts}});
    }
    std::string text = all.dump();
    json_ms.push_back(millisSince(start));
    json_bytes = text.size();
  }

  // The same scrape while agents report: one thread ingests frames of every node in turn.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> frames{0};
  std::thread ingest([&] {
    std::vector<GpuReading> g;
    std::map<std::string, std::vector<GpuTenant>> t;
    for (uint32_t tick = 1; !stop.load(); ++tick) {
      for (int n = 0; n < kNodes && !stop.load(); ++n) {
        frameOf(n, tick, &g, &t);
        telemetry.ingest(nodeName(n), clock.now(), g, t);
        frames.fetch_add(1);
      }
    }
  });
  for (int i = 0; i < runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::string page = metrics.render();
    busy_ms.push_back(millisSince(start));
  }
  stop = true;
  ingest.join();
  std::filesystem::remove_all(dir);

  double render = median(render_ms), json = median(json_ms), busy = median(busy_ms);
  std::printf("metrics_bench: %d servers x %d GPUs, %d runs (medians)\n", kNodes, kGpus, runs);
  std::printf("  scrape (GET /metrics render)        %8.1f ms  %6.1f MB page\n", render,
              page_bytes / 1e6);
  std::printf("  baseline: same readings as JSON     %8.1f ms  %6.1f MB\n", json, json_bytes / 1e6);
  std::printf("  ratio scrape / baseline             %8.2fx\n", render / json);
  std::printf(
      "  scrape while agents report          %8.1f ms  (%.2fx idle; %llu frames ingested)\n", busy,
      busy / render, static_cast<unsigned long long>(frames.load()));
  return 0;
}

}  // namespace
}  // namespace gpool::controller

int main(int argc, char** argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 20;
  return gpool::controller::run(std::max(1, runs));
}
