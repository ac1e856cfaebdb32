// Decisions must not change when placement gets faster. These tests replay a few thousand mixed
// placements (slices, whole GPUs, CPU-only, gangs on one or many servers, constraints, data
// locality, releases in between) per policy on a heterogeneous pool, and a few scheduling passes
// (backfill, reservations, preemption, reclaim), and compare a digest of every decision with the
// value the reference implementation produced (before the feasibility index, the per-node memo
// and the packed snapshot arrays existed). A mismatch means some decision changed: find out why
// before touching the expected values.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/random.h"
#include "sched/digest.h"
#include "sched/fragmentation.h"
#include "sched/policies.h"
#include "sched/scheduler.h"

namespace gpool::sched {
namespace {

using testing::Digest;

// 180 servers: three GPU models, 0/1/2/4/8 GPUs, NVLink islands, a mixed-model server, drained
// servers, an unhealthy GPU, labels and datasets.
ClusterState mixedCluster() {
  ClusterState c;
  const char* models[] = {"A100", "V100", "T4"};
  const uint32_t caps[] = {80, 70, 75};
  const uint64_t mems[] = {80 * 1024, 32 * 1024, 16 * 1024};
  for (size_t i = 0; i < 180; ++i) {
    Node n;
    n.name = "m" + std::to_string(i);
    n.cpu_total_millis = n.cpu_free_millis = i % 3 == 0 ? 32000 : 96000;
    n.ram_total_mib = n.ram_free_mib = 256 * 1024 * (1 + i % 2);
    n.labels["zone"] = i % 5 == 0 ? "a" : "b";
    if (i % 7 == 0) n.datasets = {"imagenet"};
    if (i % 9 == 0) n.datasets.push_back("c4");
    n.schedulable = i % 23 != 22;
    const uint32_t counts[] = {8, 4, 2, 1, 8, 0};
    uint32_t gpus = counts[i % 6];
    size_t m = (i / 6) % 3;
    for (uint32_t g = 0; g < gpus; ++g) {
      Gpu gpu;
      size_t gm = (i % 17 == 0 && g >= gpus / 2) ? (m + 1) % 3 : m;
      gpu.model = models[gm];
      gpu.compute_capability = caps[gm];
      gpu.memory_total_mib = gpu.memory_free_mib = mems[gm];
      gpu.healthy = !(i % 19 == 0 && g == 1);
      n.gpus.push_back(gpu);
    }
    if (gpus >= 4 && i % 4 != 3) {
      n.links.assign(size_t{gpus} * gpus, LinkLevel::kCrossSocket);
      for (uint32_t a = 0; a < gpus; ++a) {
        for (uint32_t b = 0; b < gpus; ++b) {
          LinkLevel l = a == b             ? LinkLevel::kSelf
                        : (a / 4 == b / 4) ? LinkLevel::kNvLink
                        : (a % 2 == b % 2) ? LinkLevel::kPcieHost
                                           : LinkLevel::kCrossSocket;
          n.links[size_t{a} * gpus + b] = l;
        }
      }
    }
    c.addNode(std::move(n));
  }
  return c;
}

std::shared_ptr<const FragmentationModel> mixedModel() {
  std::vector<TaskShape> shapes;
  auto add = [&](uint64_t cpu, uint32_t count, uint32_t milli, double w,
                 std::vector<std::string> models = {}) {
    TaskShape s;
    s.cpu_millis = cpu;
    s.gpu_count = count;
    s.gpu_milli = milli;
    s.weight = w;
    s.gpu_models = std::move(models);
    shapes.push_back(s);
  };
  add(4000, 0, 0, 10);
  add(4000, 1, 250, 15);
  add(8000, 1, 470, 10);
  add(6000, 1, 500, 15);
  add(8000, 1, 1000, 30);
  add(16000, 2, 1000, 8);
  add(32000, 4, 1000, 5);
  add(64000, 8, 1000, 2);
  add(4000, 1, 1000, 5, {"T4"});
  return std::make_shared<const FragmentationModel>(std::move(shapes));
}

PlacementRequest drawRequest(Random& r, uint64_t id) {
  PlacementRequest req;
  req.job = "j" + std::to_string(id);
  TaskRequest& t = req.task;
  uint64_t x = r.uniform(100);
  const uint32_t slices[] = {100, 250, 300, 470, 500, 750};
  t.cpu_millis = 1000 * (1 + r.uniform(12));
  t.ram_mib = 1024 * (1 + r.uniform(64));
  if (x < 38) {
    t.gpus = slices[r.uniform(6)];
    if (r.uniform(3) == 0) t.gpu_memory_mib = 1024 * r.uniform(24);
    if (r.uniform(8) == 0) t.gpu_compute = slices[r.uniform(6)];
  } else if (x < 62) {
    const uint32_t wholes[] = {1000, 1000, 2000, 4000, 8000};
    t.gpus = wholes[r.uniform(5)];
  } else if (x < 70) {
    t.gpus = 0;
  } else if (x < 80) {
    req.scope = GangScope::kMultiServer;
    req.tasks = static_cast<uint32_t>(2 + r.uniform(3));
    t.gpus = r.uniform(2) == 0 ? 1000 : 500;
  } else if (x < 88) {
    req.scope = GangScope::kSingleServer;
    req.tasks = 2;
    t.gpus = r.uniform(2) == 0 ? 1000 : 250;
  } else if (x < 99) {
    t.gpus = r.uniform(2) == 0 ? 1000 : 470;
    uint64_t c = r.uniform(5);
    if (c == 0) t.constraints.gpu_models = {"T4"};
    if (c == 1) t.constraints.gpu_models = {"A100", "V100"};
    if (c == 2) t.constraints.min_compute_capability = 75;
    if (c == 3) t.constraints.node_labels["zone"] = "a";
    if (c == 4) t.constraints.min_gpu_memory_mib = 40 * 1024;
    if (r.uniform(2) == 0) t.constraints.datasets = {"imagenet", "c4"};
  } else {
    t.gpus = r.uniform(2) == 0 ? 1500 : 4000;
    if (t.gpus == 4000) t.constraints.gpu_models = {"H100"};
  }
  return req;
}

uint64_t mixedDigest(const std::string& policy_name, size_t steps) {
  auto policy = makePolicy(policy_name, mixedModel());
  EXPECT_TRUE(policy.ok());
  ClusterState c = mixedCluster();
  SeededRandom random(11);
  SeededRandom draws(12);
  Digest d;
  std::vector<std::vector<TaskAllocation>> live;
  for (size_t i = 0; i < steps; ++i) {
    PlacementRequest req = drawRequest(draws, i);
    PlacementResult r = place(c, req, **policy, random);
    d.add(r);
    if (r.placed) {
      for (const TaskAllocation& a : r.tasks) {
        EXPECT_TRUE(c.apply(a).isOk()) << policy_name << " step " << i;
        (*policy)->notePlaced(c, req.task, a);
      }
      live.push_back(r.tasks);
    }
    // Departures keep the pool from filling up and exercise release().
    while (!live.empty() && draws.uniform(100) < (i % 500 < 250 ? 30 : 55)) {
      size_t k = static_cast<size_t>(draws.uniform(live.size()));
      for (const TaskAllocation& a : live[k])
        EXPECT_TRUE(c.release(a).isOk());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  d.add(c.gpuComputeFree());
  return d.value();
}

struct Expected {
  const char* policy;
  uint64_t digest;
};

// Recorded with the reference implementation (before the feasibility index and the memo).
constexpr Expected kMixed[] = {
    {"Random", 0xa132424cc2355819ULL},        {"DotProd", 0xb125d8a29ffd63afULL},
    {"GpuClustering", 0xd41c0ed8fa071519ULL}, {"GpuPacking", 0x3aa8563f7ae65ae7ULL},
    {"BestFit", 0x42a9d56e963c19cULL},        {"FGD", 0x8a605242d8d76d37ULL},
    {"gpool", 0x3a69b140f63030c4ULL},
};

// One test per policy, so that ctest spreads them over the cores.
class MixedDigest : public ::testing::TestWithParam<Expected> {};

TEST_P(MixedDigest, PlacementsDecideAsTheReference) {
  const Expected& e = GetParam();
  uint64_t got = mixedDigest(e.policy, 3000);
  EXPECT_EQ(got, e.digest) << e.policy << " digest 0x" << std::hex << got;
}

INSTANTIATE_TEST_SUITE_P(Policies, MixedDigest, ::testing::ValuesIn(kMixed),
                         [](const ::testing::TestParamInfo<Expected>& param) {
                           return std::string(param.param.policy);
                         });

// --- scheduling passes ---------------------------------------------------------------------

const TimePoint kNow = fromUnixSeconds(1'700'000'000);

struct World {
  ClusterState cluster;
  std::vector<Job> jobs;
  UsageLedger usage{7 * 24 * 3600};
  SchedulerConfig config;
};

// A nearly full pool (like bench/sched_queue_bench): running whole GPUs and slices, some
// preemptible, in groups with and without quotas, and a queue of mixed jobs, a few with
// dependencies or caps.
World makeWorld(size_t servers, size_t pending, uint64_t seed) {
  World w;
  SeededRandom r(seed);
  for (size_t i = 0; i < servers; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.cpu_total_millis = n.cpu_free_millis = 128000;
    n.ram_total_mib = n.ram_free_mib = 1024 * 1024;
    for (uint32_t g = 0; g < 8; ++g) {
      Gpu gpu;
      gpu.model = i % 4 == 0 ? "V100" : "A100";
      gpu.memory_total_mib = gpu.memory_free_mib = 80 * 1024;
      n.gpus.push_back(gpu);
    }
    w.cluster.addNode(std::move(n));
  }
  JobId next = 1;
  for (size_t n = 0; n < servers; ++n) {
    for (uint32_t g = 0; g < 8; ++g) {
      if (r.uniform(100) < 3) continue;  // a few GPUs stay free
      Job j;
      j.id = next++;
      j.user = "u" + std::to_string(r.uniform(20));
      j.group = "g" + std::to_string(r.uniform(4));
      j.state = JobState::kRunning;
      j.submit_time = kNow - std::chrono::hours(3);
      j.start_time = kNow - std::chrono::seconds(60 + r.uniform(7200));
      j.time_limit_s = 600 + static_cast<int64_t>(r.uniform(8 * 3600));
      j.preemptible = r.uniform(5) == 0;
      (void)r.uniform(4);  // was the borrowed flag; the pass now decides it from start times
      j.request.task.cpu_millis = 1000;
      j.request.task.ram_mib = 4096;
      if (r.uniform(4) == 0) {
        j.request.task.gpus = 500;
        j.request.task.gpu_memory_mib = 40 * 1024;
        TaskAllocation a{n, 1000, 4096, {{g, 40 * 1024, 500}}};
        EXPECT_TRUE(w.cluster.apply(a).isOk());
        j.allocation = {a};
      } else {
        j.request.task.gpus = 1000;
        TaskAllocation a{n, 1000, 4096, {{g, 80 * 1024, 1000}}};
        EXPECT_TRUE(w.cluster.apply(a).isOk());
        j.allocation = {a};
      }
      w.jobs.push_back(std::move(j));
    }
  }
  for (size_t i = 0; i < pending; ++i) {
    Job j;
    j.id = next++;
    j.user = "u" + std::to_string(r.uniform(20));
    j.group = "g" + std::to_string(r.uniform(4));
    j.submit_time = kNow - std::chrono::seconds(r.uniform(86400));
    j.time_limit_s = 600 + static_cast<int64_t>(r.uniform(24 * 3600));
    uint64_t x = r.uniform(100);
    TaskRequest& t = j.request.task;
    t.cpu_millis = 4000;
    t.ram_mib = 16 * 1024;
    if (x < 30) {
      t.gpus = x < 15 ? 250 : 500;
      t.gpu_memory_mib = t.gpus * 80;
    } else if (x < 75) {
      t.gpus = 1000;
    } else if (x < 85) {
      t.gpus = 2000;
    } else if (x < 92) {
      t.gpus = 4000;
      if (x == 91) t.constraints.gpu_models = {"V100"};
    } else if (x < 95) {
      t.gpus = 8000;
    } else {
      t.gpus = 1000;
      j.request.tasks = 3;
      j.request.scope = x < 98 ? GangScope::kMultiServer : GangScope::kSingleServer;
    }
    if (r.uniform(50) == 0 && next > 2) {
      j.dependencies = {Dependency{next - 2, DependencyKind::kAfterOk, DependencyState::kOpen}};
    }
    j.request.job = "job " + std::to_string(j.id);
    w.jobs.push_back(std::move(j));
  }
  for (int u = 0; u < 20; ++u) {
    w.usage.chargeBilled("u" + std::to_string(u), "g" + std::to_string(u % 4),
                         static_cast<double>(r.uniform(1'000'000)), kNow);
  }
  w.config.groups["g0"].quota = 100'000;
  w.config.groups["g1"].quota = 20'000;
  w.config.groups["g2"].max_gpus_per_user = 30'000;
  w.config.preemption.delay_s = 600;
  w.config.backfill.max_reservations = 2;
  return w;
}

void addDecisions(Digest& d, const Decisions& out) {
  for (const auto& s : out.starts) {
    d.add(s.job);
    d.add(s.allocation);
    d.add(uint64_t{s.borrowed} * 2 + uint64_t{s.backfilled});
    d.add(s.explanation);
  }
  for (const auto& p : out.preemptions) {
    d.add(p.job);
    d.add(p.for_job);
    d.add(p.reason);
  }
  for (const auto& r : out.reservations) {
    d.add(r.job);
    d.add(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::seconds>(r.start.time_since_epoch()).count()));
    d.add(r.allocation);
  }
  for (const auto& p : out.pending) {
    d.add(p.job);
    d.add(uint64_t{static_cast<uint8_t>(p.reason)});
    d.add(p.detail);
  }
}

// Three passes; between them the started jobs become running and the preempted ones leave.
uint64_t queueDigest(const std::string& policy_name) {
  World w = makeWorld(120, 1500, 42);
  auto policy = makePolicy(policy_name, mixedModel());
  EXPECT_TRUE(policy.ok());
  SchedulerPass pass(**policy);
  Digest d;
  TimePoint now = kNow;
  size_t starts = 0, preemptions = 0, reservations = 0, backfilled = 0;
  for (int round = 0; round < 3; ++round) {
    SeededRandom random(100 + static_cast<uint64_t>(round));
    Decisions out = pass.run(w.cluster, w.jobs, w.usage, w.config, now, random);
    addDecisions(d, out);
    starts += out.starts.size();
    preemptions += out.preemptions.size();
    reservations += out.reservations.size();
    for (const auto& st : out.starts)
      backfilled += st.backfilled ? 1 : 0;
    for (const auto& p : out.preemptions) {
      for (Job& j : w.jobs) {
        if (j.id != p.job) continue;
        for (const auto& a : j.allocation)
          EXPECT_TRUE(w.cluster.release(a).isOk());
        j.state = JobState::kPending;
        j.allocation.clear();
        j.submit_time = now;
      }
    }
    for (const auto& s : out.starts) {
      for (Job& j : w.jobs) {
        if (j.id != s.job) continue;
        for (const auto& a : s.allocation)
          EXPECT_TRUE(w.cluster.apply(a).isOk());
        j.state = JobState::kRunning;
        j.allocation = s.allocation;
        j.start_time = now;
      }
    }
    now += std::chrono::seconds(900);
  }
  // The passes exercise every path whose speed changed: starts, backfill, reservations and
  // preemption (with jobs already leaving in the later rounds).
  EXPECT_GT(starts, 0u) << policy_name;
  EXPECT_GT(backfilled, 0u) << policy_name;
  EXPECT_GT(reservations, 0u) << policy_name;
  EXPECT_GT(preemptions, 0u) << policy_name;
  return d.value();
}

// Recorded again with issue 21's policy changes (the pass decides which running work is
// borrowed, reclaim has its own delay and minimum run time, a job waiting for leaving work
// reserves what it frees, preemption reasons name the preemptor, gangs that never fit are
// BadConstraints); the placement digests above are unchanged.
constexpr Expected kQueue[] = {{"gpool", 0x6a39844a9480187bULL},
                               {"BestFit", 0x84191f432dde55b6ULL},
                               {"GpuClustering", 0x9da30be73f115ab0ULL}};

TEST(PlacementDigest, SchedulingPassesDecideAsTheReference) {
  for (const Expected& e : kQueue) {
    uint64_t got = queueDigest(e.policy);
    EXPECT_EQ(got, e.digest) << e.policy << " digest 0x" << std::hex << got;
  }
}

}  // namespace
}  // namespace gpool::sched
