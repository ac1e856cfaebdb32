// sched_queue_bench: the cost of one full scheduling pass (sched::SchedulerPass::run) as the
// queue grows from 1k to 100k pending jobs and the pool from 100 to 10,000 servers of 8 GPUs.
//
// The pool is kept nearly full by running jobs (the steady state in which jobs queue at all):
// 99.5% of GPUs are held, a mix of whole GPUs and slices, so each pass starts a handful of jobs,
// reserves for the blocked top job, tries preemption and gives every other job its reason.
// Placement uses gpool's default fragmentation-aware policy.
//
// Baseline, measured in the same run: computing the multifactor priority of every pending job
// and sorting them (what any priority queue must do); the pass is reported as a multiple of it.
// Single-threaded. Prints a table; `--quick` runs the small sizes only.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "common/random.h"
#include "sched/fragmentation.h"
#include "sched/policies.h"
#include "sched/scheduler.h"

namespace gpool::sched {
namespace {

const TimePoint kNow = fromUnixSeconds(1'700'000'000);

struct World {
  ClusterState cluster;
  std::vector<Job> jobs;
  UsageLedger usage{7 * 24 * 3600};
  SchedulerConfig config;
};

Node makeNode(size_t i) {
  Node n;
  n.name = "n" + std::to_string(i);
  n.cpu_total_millis = n.cpu_free_millis = 128000;
  n.ram_total_mib = n.ram_free_mib = 1024 * 1024;
  for (uint32_t g = 0; g < 8; ++g) {
    Gpu gpu;
    gpu.index = g;
    gpu.model = "A100";
    gpu.memory_total_mib = gpu.memory_free_mib = 80 * 1024;
    n.gpus.push_back(gpu);
  }
  return n;
}

// A job shape drawn like the traces: mostly single GPUs and slices, some 2/4/8-GPU jobs.
TaskRequest drawTask(Random& r) {
  TaskRequest t;
  uint64_t x = r.uniform(100);
  if (x < 30) {
    t.gpus = x < 15 ? 250 : 500;
    t.gpu_memory_mib = t.gpus * 80;
  } else if (x < 80) {
    t.gpus = 1000;
  } else if (x < 90) {
    t.gpus = 2000;
  } else if (x < 97) {
    t.gpus = 4000;
  } else {
    t.gpus = 8000;
  }
  t.cpu_millis = 4000;
  t.ram_mib = 16 * 1024;
  return t;
}

World makeWorld(size_t servers, size_t pending, uint64_t seed) {
  World w;
  SeededRandom r(seed);
  for (size_t i = 0; i < servers; ++i)
    w.cluster.addNode(makeNode(i));
  const uint64_t capacity = w.cluster.gpuCount() * 1000;
  const uint64_t target = capacity - capacity / 200;  // keep 0.5% free
  JobId next = 1;
  uint64_t held = 0;
  // Fill node by node with whole-GPU and slice jobs until the target is reached.
  for (size_t n = 0; n < servers && held < target; ++n) {
    for (uint32_t g = 0; g < 8 && held < target; ++g) {
      Job j;
      j.id = next++;
      j.user = "u" + std::to_string(r.uniform(200));
      j.group = "g" + std::to_string(r.uniform(20));
      j.state = JobState::kRunning;
      j.submit_time = kNow - std::chrono::hours(2);
      j.start_time = kNow - std::chrono::seconds(60 + r.uniform(3600));
      j.time_limit_s = 600 + static_cast<int64_t>(r.uniform(8 * 3600));
      j.request.task.cpu_millis = 1000;
      j.request.task.ram_mib = 4096;
      bool slices = r.uniform(4) == 0;
      std::vector<TaskAllocation> allocs;
      if (slices) {
        for (int k = 0; k < 2; ++k) {
          Job s = j;
          s.id = next++;
          s.request.task.gpus = 500;
          s.request.task.gpu_memory_mib = 40 * 1024;
          TaskAllocation a{n, 1000, 4096, {{g, 40 * 1024, 500}}};
          (void)w.cluster.apply(a);
          s.allocation = {a};
          w.jobs.push_back(std::move(s));
        }
      } else {
        j.request.task.gpus = 1000;
        TaskAllocation a{n, 1000, 4096, {{g, 80 * 1024, 1000}}};
        (void)w.cluster.apply(a);
        j.allocation = {a};
        w.jobs.push_back(std::move(j));
      }
      held += 1000;
    }
  }
  for (size_t i = 0; i < pending; ++i) {
    Job j;
    j.id = next++;
    j.user = "u" + std::to_string(r.uniform(200));
    j.group = "g" + std::to_string(r.uniform(20));
    j.submit_time = kNow - std::chrono::seconds(r.uniform(86400));
    j.time_limit_s = 600 + static_cast<int64_t>(r.uniform(24 * 3600));
    j.request.task = drawTask(r);
    j.request.job = "job " + std::to_string(j.id);
    w.jobs.push_back(std::move(j));
  }
  for (int u = 0; u < 200; ++u) {
    w.usage.chargeBilled("u" + std::to_string(u), "g" + std::to_string(u % 20),
                         static_cast<double>(r.uniform(1'000'000)), kNow);
  }
  w.config.order = QueueOrder::kMultifactor;
  return w;
}

std::shared_ptr<const FragmentationModel> model() {
  std::vector<TaskShape> shapes;
  for (auto [count, milli, w] : std::vector<std::tuple<uint32_t, uint32_t, double>>{
           {1, 250, 15}, {1, 500, 15}, {1, 1000, 50}, {2, 1000, 10}, {4, 1000, 7}, {8, 1000, 3}}) {
    TaskShape s;
    s.cpu_millis = 4000;
    s.gpu_count = count;
    s.gpu_milli = milli;
    s.weight = w;
    shapes.push_back(s);
  }
  return std::make_shared<const FragmentationModel>(std::move(shapes));
}

struct Measure {
  double pass_ms = 0;
  double baseline_ms = 0;
  Decisions decisions;
};

// CPU time of this thread in ms: the machine may be shared, and CPU time is what "on one core"
// means.
double threadCpuMs() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double bestOf(int reps, const std::function<void()>& f) {
  double best = 1e18;
  for (int i = 0; i < reps; ++i) {
    double t0 = threadCpuMs();
    f();
    best = std::min(best, threadCpuMs() - t0);
  }
  return best;
}

Measure measure(size_t servers, size_t pending, int reps) {
  World w = makeWorld(servers, pending, 42);
  auto policy = makePolicy("gpool", model());
  Measure m;
  SchedulerPass pass(**policy);
  m.pass_ms = bestOf(reps, [&] {
    SeededRandom random(1);
    m.decisions = pass.run(w.cluster, w.jobs, w.usage, w.config, kNow, random);
  });
  // Baseline: priorities of the pending jobs (fair-share lookup included) and the sort.
  std::vector<Association> assocs;
  for (const Job& j : w.jobs)
    assocs.push_back({j.group, j.user});
  const uint64_t capacity = w.cluster.gpuCount() * 1000;
  m.baseline_ms = bestOf(reps, [&] {
    auto fs = computeFairTree(assocs, w.config.fairshare, w.usage, kNow);
    std::vector<std::pair<double, JobId>> keys;
    keys.reserve(pending);
    for (const Job& j : w.jobs) {
      if (j.state != JobState::kPending) continue;
      auto f =
          computePriority(w.config.weights, fs[associationKey(j.group, j.user)], 0,
                          (kNow - j.submit_time).count() / 1000000, gpuDemand(j), capacity, j.nice);
      keys.emplace_back(-f.total, j.id);
    }
    std::sort(keys.begin(), keys.end());
  });
  return m;
}

void printRow(size_t servers, size_t pending, const Measure& m, double base_per_server) {
  const PassStats& s = m.decisions.stats;
  std::printf("%8zu %8zu %8zu %10.1f %10.1f %8.1fx %7zu %7zu %7zu %6zu", servers, servers * 8,
              pending, m.pass_ms, m.baseline_ms, m.pass_ms / m.baseline_ms,
              m.decisions.starts.size(), s.place_calls, s.cache_hits,
              m.decisions.reservations.size());
  if (base_per_server > 0) {
    std::printf(" %8.2f", m.pass_ms / base_per_server / static_cast<double>(servers));
  }
  std::printf("\n");
}

}  // namespace
}  // namespace gpool::sched

int main(int argc, char** argv) {
  using namespace gpool::sched;
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  int reps = quick ? 1 : 3;
  std::printf("sched_queue_bench: one SchedulerPass::run, best of %d, thread CPU time\n", reps);
  std::printf(
      "pool 99.5%% allocated; multifactor order, backfill (1 reservation), preemption on;"
      " placement gpool (FGD measure)\n");
  std::printf("baseline = priorities + sort of the same pending jobs, same run\n\n");
  std::printf("-- pending jobs, 1,000 servers --\n");
  std::printf("%8s %8s %8s %10s %10s %9s %7s %7s %7s %6s\n", "servers", "GPUs", "pending",
              "pass ms", "base ms", "vs base", "starts", "places", "cached", "resv");
  std::vector<size_t> pendings =
      quick ? std::vector<size_t>{1000, 10000} : std::vector<size_t>{1000, 10000, 100000};
  for (size_t p : pendings)
    printRow(1000, p, measure(1000, p, reps), 0);
  std::printf(
      "\n-- servers, 10,000 pending jobs (last column: pass ms per server relative to "
      "100 servers; 1.00 = linear) --\n");
  std::printf("%8s %8s %8s %10s %10s %9s %7s %7s %7s %6s %8s\n", "servers", "GPUs", "pending",
              "pass ms", "base ms", "vs base", "starts", "places", "cached", "resv", "growth");
  std::vector<size_t> servers =
      quick ? std::vector<size_t>{100, 1000} : std::vector<size_t>{100, 1000, 10000};
  double per_server = 0;
  for (size_t s : servers) {
    Measure m = measure(s, 10000, reps);
    if (per_server == 0) per_server = m.pass_ms / static_cast<double>(s);
    printRow(s, 10000, m, per_server);
  }
  if (!quick) {
    std::printf("\n-- the target case: 100,000 pending on 10,000 servers --\n");
    printRow(10000, 100000, measure(10000, 100000, reps), 0);
  }
  return 0;
}
