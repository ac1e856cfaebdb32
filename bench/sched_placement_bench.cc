// sched-placement-bench: time of one placement decision (a single GPU slice, the common case)
// with fragmentation-aware scoring, on the 1,213-server openb cluster half full, against Random
// and BestFit placement measured in the same run; and how the time grows with the number of
// servers (100 to 10,000 servers of 8 GPUs). One thread.
//
// Usage: sched_placement_bench [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/random.h"
#include "sched/fragmentation.h"
#include "sched/policies.h"
#include "sim/fgd_replay.h"
#include "sim/openb_trace.h"

namespace {

using namespace gpool;
using Clock = std::chrono::steady_clock;

// Median over `repeats` of the mean time per call of `fn`, each repeat at least `min_seconds`.
template <typename Fn>
double secondsPerCall(Fn&& fn, double min_seconds, int repeats = 5) {
  std::vector<double> samples;
  for (int r = 0; r < repeats; ++r) {
    size_t calls = 0;
    auto start = Clock::now();
    double elapsed = 0;
    do {
      fn();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < min_seconds);
    samples.push_back(elapsed / static_cast<double>(calls));
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// Fills `cluster` by replaying shuffled pods with `policy` until `fill` of the GPU capacity is
// allocated (a realistic, fragmented state rather than an empty pool).
void fill(sched::ClusterState& cluster, const std::vector<sim::OpenbPod>& pods,
          sched::PlacementPolicy& policy, double fill_share, uint64_t seed) {
  SeededRandom random(seed);
  double cap = static_cast<double>(cluster.gpuComputeTotal());
  double allocated = 0;
  sched::PlacementRequest req;
  for (size_t guard = 0; allocated < fill_share * cap && guard < 50 * pods.size(); ++guard) {
    const sim::OpenbPod& p = pods[random.uniform(pods.size())];
    req.task = p.toTask();
    auto r = sched::place(cluster, req, policy, random);
    if (r.placed && cluster.apply(r.tasks[0]).isOk()) {
      policy.notePlaced(cluster, req.task, r.tasks[0]);
      allocated += static_cast<double>(p.gpuRequestMilli());
    }
  }
}

// A cheaper fill for the large synthetic pools: each pod goes to a random server where it fits
// (random first fit), so building a 10,000-server state does not dominate the run.
void fillRandomFit(sched::ClusterState& cluster, const std::vector<sim::OpenbPod>& pods,
                   double fill_share, uint64_t seed) {
  SeededRandom random(seed);
  double cap = static_cast<double>(cluster.gpuComputeTotal());
  double allocated = 0;
  for (size_t guard = 0; allocated < fill_share * cap && guard < 100 * cluster.size(); ++guard) {
    const sim::OpenbPod& p = pods[random.uniform(pods.size())];
    sched::TaskRequest t = p.toTask();
    for (int attempt = 0; attempt < 8; ++attempt) {
      size_t n = random.uniform(cluster.size());
      auto cands = sched::candidateAllocations(cluster, n, t, sched::GpuChoices::kCanonical);
      if (!cands.empty() && cluster.apply(cands[0]).isOk()) {
        allocated += static_cast<double>(p.gpuRequestMilli());
        break;
      }
    }
  }
}

sched::TaskRequest sliceTask() {
  sched::TaskRequest t;
  t.gpus = 470;  // a common slice shape in the trace
  t.cpu_millis = 8000;
  t.ram_mib = 16384;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const double min_s = quick ? 0.05 : 0.3;
  const std::string data = std::string(GPOOL_SOURCE_DIR) + "/data/traces/alibaba-gpu-v2023";
  auto nodes = sim::readOpenbNodes(data + "/openb_node_list_gpu_node.csv");
  auto workload = sim::loadWorkload(data + "/openb_pod_list_default.csv");
  if (!nodes.ok() || !workload.ok()) {
    std::fprintf(stderr, "cannot read the openb trace under %s\n", data.c_str());
    return 1;
  }
  auto model = workload->frag_model;

  // 1. One slice placement on the openb cluster (1,213 servers, 6,212 GPUs), half full.
  sched::ClusterState openb = sim::buildCluster(*nodes);
  {
    sched::GpoolPolicy filler(model);
    fill(openb, workload->pods, filler, 0.5, 42);
  }
  sched::PlacementRequest req;
  req.job = "bench";
  req.task = sliceTask();
  std::printf(
      "sched_placement_bench: one 0.47-GPU slice placement, %zu servers, %llu GPUs, "
      "50%% allocated, 1 thread\n",
      openb.size(), static_cast<unsigned long long>(openb.gpuCount()));
  std::printf("%-10s %14s %16s %10s %10s\n", "policy", "us/placement", "placements/s", "x Random",
              "x BestFit");
  std::vector<std::pair<std::string, double>> times;
  for (const char* name : {"Random", "BestFit", "FGD", "gpool"}) {
    auto policy = std::move(sched::makePolicy(name, model).value());
    SeededRandom random(7);
    double s = secondsPerCall(
        [&] {
          auto r = sched::place(openb, req, *policy, random);
          if (!r.placed) std::abort();
        },
        min_s);
    times.emplace_back(name, s);
  }
  for (const auto& [name, s] : times) {
    std::printf("%-10s %14.1f %16.0f %10.2f %10.2f\n", name.c_str(), s * 1e6, 1.0 / s,
                s / times[0].second, s / times[1].second);
  }
  double fgd_us = times[2].second * 1e6;
  std::printf("target: fragmentation-aware (FGD) placement < 200 us: %.1f us -> %s\n", fgd_us,
              fgd_us < 200 ? "met" : "NOT met");

  // 2. Growth with servers: synthetic servers of 8 GPUs (96 cores), half full.
  std::printf("\ngrowth with servers (8 GPUs each, 50%% allocated), FGD placement of one slice\n");
  std::printf("%-8s %14s %14s %12s %12s\n", "servers", "us/placement", "ns/server", "x time",
              "x servers");
  std::vector<size_t> sizes = {100, 1000, 10000};
  double base = 0;
  double worst_ratio = 0;
  for (size_t n : sizes) {
    std::vector<sim::OpenbNode> synth;
    for (size_t i = 0; i < n; ++i) {
      synth.push_back({"s" + std::to_string(i), 96000, 786432, 8, "G2"});
    }
    sched::ClusterState c = sim::buildCluster(synth);
    fillRandomFit(c, workload->pods, 0.5, 43);
    auto policy = std::move(sched::makePolicy("FGD", model).value());
    SeededRandom random(9);
    double s = secondsPerCall(
        [&] {
          auto r = sched::place(c, req, *policy, random);
          if (!r.placed) std::abort();
        },
        n >= 10000 ? min_s * 2 : min_s, 3);
    if (base == 0) base = s;
    double ratio = (s / base) / (static_cast<double>(n) / static_cast<double>(sizes[0]));
    worst_ratio = std::max(worst_ratio, ratio);
    std::printf("%-8zu %14.1f %14.1f %12.2f %12.2f\n", n, s * 1e6, s * 1e9 / static_cast<double>(n),
                s / base, static_cast<double>(n) / static_cast<double>(sizes[0]));
  }
  std::printf("growth: time ratio / server ratio at most %.2f (<= ~1 means linear or better)\n",
              worst_ratio);
  return 0;
}
