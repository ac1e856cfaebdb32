#include "sim/fgd_replay.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <thread>

#include "common/random.h"
#include "sched/placement.h"
#include "sched/policies.h"

namespace gpool::sim {

double PolicyResult::meanAlloc(int level) const {
  if (runs.empty()) return 0;
  double s = 0;
  for (const auto& r : runs)
    s += r.alloc_pct[static_cast<size_t>(level)];
  return s / static_cast<double>(runs.size());
}

double PolicyResult::stdAlloc(int level) const {
  if (runs.size() < 2) return 0;
  double m = meanAlloc(level), s = 0;
  for (const auto& r : runs) {
    double d = r.alloc_pct[static_cast<size_t>(level)] - m;
    s += d * d;
  }
  return std::sqrt(s / static_cast<double>(runs.size() - 1));
}

double PolicyResult::meanFrag(size_t report_index) const {
  if (runs.empty()) return 0;
  double s = 0;
  for (const auto& r : runs)
    s += r.frag_pct[report_index];
  return s / static_cast<double>(runs.size());
}

double PolicyResult::meanFailed() const {
  if (runs.empty()) return 0;
  double s = 0;
  for (const auto& r : runs)
    s += static_cast<double>(r.failed);
  return s / static_cast<double>(runs.size());
}

Result<FgdWorkload> loadWorkload(const std::string& pods_path) {
  FgdWorkload w;
  GPOOL_ASSIGN_OR_RETURN(w.pods, readOpenbPods(pods_path));
  if (w.pods.empty()) return Status::invalidArgument(pods_path + ": no pods");
  w.name = std::filesystem::path(pods_path).stem().string();
  w.frag_model = std::make_shared<sched::FragmentationModel>(
      sched::typicalShapes(shapeCounts(w.pods), kTypicalCoverage));
  return w;
}

Result<SeedRun> runSeed(const std::vector<OpenbNode>& nodes, const FgdWorkload& workload,
                        const std::string& policy_name, uint64_t seed, double tune) {
  auto start = std::chrono::steady_clock::now();
  GPOOL_ASSIGN_OR_RETURN(auto policy, sched::makePolicy(policy_name, workload.frag_model));
  // Every policy breaks ties as the published scheduler does (Random ignores it: it draws).
  policy->setFixedTieOrder(true);
  sched::ClusterState cluster = buildCluster(nodes);
  const double capacity = static_cast<double>(cluster.gpuComputeTotal());

  SeededRandom random(seed);
  std::vector<size_t> order(workload.pods.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  random.shuffle(order);
  double total = 0;
  for (const OpenbPod& p : workload.pods)
    total += static_cast<double>(p.gpuRequestMilli());
  // Top up with draws with replacement as the published tuneUpPods does: a drawn pod is
  // appended unless the total plus its per-GPU share would pass the target; the first that
  // would ends the top-up (so the total stays at or just under tune x capacity, a multi-GPU
  // pod can pass it by its other GPUs). A list without GPU pods is not topped up.
  const double target = tune * capacity;
  while (total > 0 && total < target) {
    size_t i = static_cast<size_t>(random.uniform(workload.pods.size()));
    const OpenbPod& p = workload.pods[i];
    if (total + static_cast<double>(p.gpuRequestMilli() > 0 ? p.gpu_milli : 0) > target) break;
    order.push_back(i);
    total += static_cast<double>(p.gpuRequestMilli());
  }

  SeedRun run;
  run.seed = seed;
  run.frag_pct.assign(kReportLevels.size(), 0);
  // One row per arrival, as the published log's [Alloc] lines: arrived and allocated GPU share.
  std::vector<std::pair<double, double>> rows;
  rows.reserve(order.size());
  double arrived = 0, allocated = 0;
  int next_level = 0;
  size_t next_report = 0;
  sched::PlacementRequest request;
  for (size_t i : order) {
    const OpenbPod& pod = workload.pods[i];
    request.task = pod.toTask();
    sched::PlacementResult r = sched::place(cluster, request, *policy, random);
    double req = static_cast<double>(pod.gpuRequestMilli());
    arrived += req;
    ++run.pods;
    if (r.placed && cluster.apply(r.tasks[0]).isOk()) {
      policy->notePlaced(cluster, request.task, r.tasks[0]);
      allocated += req;
    } else {
      ++run.failed;
    }
    rows.emplace_back(100.0 * arrived / capacity, 100.0 * allocated / capacity);
    // Fragmentation when the arrived request first reaches each report level.
    while (next_level <= kMaxLevel && arrived >= capacity * next_level / 100.0) {
      if (next_report < kReportLevels.size() && kReportLevels[next_report] == next_level) {
        run.frag_pct[next_report++] =
            100.0 * workload.frag_model->clusterFragmentation(cluster) / capacity;
      }
      ++next_level;
    }
  }
  for (; next_report < kReportLevels.size(); ++next_report)
    run.frag_pct[next_report] =
        100.0 * workload.frag_model->clusterFragmentation(cluster) / capacity;
  run.alloc_pct = allocationByLevel(rows);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

std::vector<double> allocationByLevel(const std::vector<std::pair<double, double>>& rows) {
  // Rows grouped by arrived % rounded to an integer (Python's round: half to even, which
  // nearbyint does in the default rounding mode).
  std::vector<double> sum(kMaxLevel + 2, 0);
  std::vector<size_t> count(kMaxLevel + 2, 0);
  for (const auto& [arrived, alloc] : rows) {
    double k = std::nearbyint(arrived);
    if (k < 0 || k > kMaxLevel + 1) continue;
    sum[static_cast<size_t>(k)] += alloc;
    ++count[static_cast<size_t>(k)];
  }
  std::vector<double> out(kMaxLevel + 1, 0);
  double last = 0;
  for (int k = 0; k <= kMaxLevel; ++k) {
    double s = 0;
    size_t n = 0;
    if (count[static_cast<size_t>(k)] > 0) {
      s = sum[static_cast<size_t>(k)];
      n = count[static_cast<size_t>(k)];
    } else {
      // No arrival rounds to k (a large pod jumped over it): the published merge script
      // takes the rows that round to k - 1 .. k + 1; with none either, the level keeps the
      // previous value.
      for (int j = std::max(0, k - 1); j <= k + 1; ++j) {
        s += sum[static_cast<size_t>(j)];
        n += count[static_cast<size_t>(j)];
      }
    }
    last = n > 0 ? s / static_cast<double>(n) : last;
    out[static_cast<size_t>(k)] = last;
  }
  return out;
}

Result<std::vector<PolicyResult>> runPolicies(const std::vector<OpenbNode>& nodes,
                                              const FgdWorkload& workload,
                                              const std::vector<std::string>& policies,
                                              const std::vector<uint64_t>& seeds,
                                              const FgdOptions& options) {
  for (const auto& p : policies) {
    auto probe = sched::makePolicy(p, workload.frag_model);
    if (!probe.ok()) return probe.status();
  }
  std::vector<PolicyResult> out(policies.size());
  for (size_t i = 0; i < policies.size(); ++i) {
    out[i].workload = workload.name;
    out[i].policy = std::string((*sched::makePolicy(policies[i], workload.frag_model))->name());
    out[i].runs.resize(seeds.size());
  }
  const size_t total = policies.size() * seeds.size();
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;
  Status failure;
  auto worker = [&] {
    for (size_t job = next++; job < total; job = next++) {
      size_t p = job / seeds.size(), s = job % seeds.size();
      auto run = runSeed(nodes, workload, policies[p], seeds[s], options.tune);
      std::lock_guard<std::mutex> lock(mu);
      if (!run.ok()) {
        failure = run.status();
      } else {
        out[p].runs[s] = std::move(run).value();
      }
      size_t d = ++done;
      if (options.progress) options.progress(d, total);
    }
  };
  unsigned n = std::max(1u, std::min<unsigned>(options.threads, static_cast<unsigned>(total)));
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < n; ++i)
    threads.emplace_back(worker);
  worker();
  for (auto& t : threads)
    t.join();
  if (!failure.isOk()) return failure;
  return out;
}

Result<std::vector<uint64_t>> parseSeeds(const std::string& text) {
  std::vector<uint64_t> out;
  std::stringstream ss(text);
  std::string part;
  auto bad = [&] {
    return Status::invalidArgument("bad seed list '" + text + "' (expected e.g. 42-51 or 42,43)");
  };
  while (std::getline(ss, part, ',')) {
    if (part.empty()) return bad();
    size_t dash = part.find('-');
    try {
      size_t used = 0;
      if (dash == std::string::npos) {
        uint64_t v = std::stoull(part, &used);
        if (used != part.size()) return bad();
        out.push_back(v);
      } else {
        std::string a = part.substr(0, dash), b = part.substr(dash + 1);
        uint64_t lo = std::stoull(a, &used);
        if (used != a.size()) return bad();
        uint64_t hi = std::stoull(b, &used);
        if (used != b.size() || hi < lo || hi - lo > 10000) return bad();
        for (uint64_t v = lo; v <= hi; ++v)
          out.push_back(v);
      }
    } catch (const std::exception&) {
      return bad();
    }
  }
  if (out.empty()) return bad();
  return out;
}

}  // namespace gpool::sim
