// FGD as the published simulator (hkust-adsl/kubernetes-scheduler-simulator) computes it, on
// cases small enough to work out by hand: its typical pods, its integer score and GPU choice,
// its tie rule, how the workload is topped up, and how the allocation at "arrived k%" is read
// from the log.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include "common/random.h"
#include "sched/fragmentation.h"
#include "sched/placement.h"
#include "sched/policies.h"
#include "sim/fgd_replay.h"

namespace gpool::sim {
namespace {

using sched::ClusterState;
using sched::FgdPolicy;
using sched::FragmentationModel;
using sched::Node;
using sched::PlacementRequest;
using sched::TaskAllocation;
using sched::TaskRequest;
using sched::TaskShape;

Node gpuNode(const std::string& name, uint32_t gpus, uint64_t cores) {
  Node n;
  n.name = name;
  n.cpu_total_millis = n.cpu_free_millis = cores * 1000;
  n.ram_total_mib = n.ram_free_mib = 64 * 1024;
  for (uint32_t i = 0; i < gpus; ++i) {
    sched::Gpu g;
    g.index = i;
    g.model = "A";
    n.gpus.push_back(g);
  }
  return n;
}

TaskRequest task(uint32_t gpus, uint64_t cpu_millis) {
  TaskRequest t;
  t.gpus = gpus;
  t.cpu_millis = cpu_millis;
  return t;
}

sched::PlacementResult placeWith(const ClusterState& c, const TaskRequest& t,
                                 sched::PlacementPolicy& p, Random& random) {
  PlacementRequest req;
  req.job = "j";
  req.task = t;
  return sched::place(c, req, p, random);
}

TEST(FgdFidelity, TypicalShapesTieOrderAndCutOffAsPublished) {
  // GetTypicalPods: most frequent first; among equal counts the larger (CPU, then per-GPU
  // share, then GPU count, then the type string) first; shapes are added one at a time until
  // they cover 95% of the pods, then renormalised.
  std::vector<TaskShape> s = {
      {2000, 1, 500, {}, 40}, {8000, 1, 1000, {}, 40},   {8000, 1, 300, {}, 10},
      {8000, 2, 1000, {}, 5}, {8000, 1, 300, {"T4"}, 3}, {1000, 0, 0, {}, 2},
  };
  auto typical = sched::typicalShapes(s, 95);
  // 40 + 40 + 10 = 90 < 95; the next of the remaining (5, 3, 2) is the 2-GPU shape: 95 >= 95.
  ASSERT_EQ(typical.size(), 4u);
  EXPECT_EQ(typical[0].cpu_millis, 8000u);  // 40 each: larger CPU first
  EXPECT_EQ(typical[1].cpu_millis, 2000u);
  EXPECT_EQ(typical[2].gpu_milli, 300u);
  EXPECT_EQ(typical[3].gpu_count, 2u);
  EXPECT_NEAR(typical[0].weight, 40.0 / 95.0, 1e-12);
  // Equal counts, equal CPU and share: the constrained shape ("T4" > "") sorts first.
  std::vector<TaskShape> t = {{4000, 1, 500, {}, 7}, {4000, 1, 500, {"T4"}, 7}};
  auto two = sched::typicalShapes(t, 50);
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].gpu_models, std::vector<std::string>{"T4"});
}

// Two shapes of equal frequency: half a GPU and one whole GPU, 4 cores each.
std::shared_ptr<const FragmentationModel> halfAndWhole() {
  return std::make_shared<FragmentationModel>(
      std::vector<TaskShape>{{4000, 1, 500, {}, 1}, {4000, 1, 1000, {}, 1}});
}

TEST(FgdFidelity, HandCheckedScoresAndChoice) {
  ClusterState c;
  size_t a = c.addNode(gpuNode("a", 2, 16));
  size_t b = c.addNode(gpuNode("b", 2, 16));
  TaskAllocation first{a, 4000, 0, {{0, 0, 500}}};
  ASSERT_TRUE(c.apply(first).isOk());
  FgdPolicy fgd(halfAndWhole());
  // Node a: GPUs free {500, 1000}, 12 cores. The half shape fits and no GPU is below 500:
  // 0; the whole shape fits on GPU 1, GPU 0 (500 < 1000) is fragment: 0.5 * 500 = 250.
  EXPECT_DOUBLE_EQ(fgd.model().nodeFragmentation(c.node(a)), 250.0);
  EXPECT_DOUBLE_EQ(fgd.model().nodeFragmentation(c.node(b)), 0.0);
  // A half-GPU task on a's GPU 0 leaves {0, 1000}: fragmentation 0, delta +250,
  // int(100 * sigmoid(0.25)) = 56. On a's GPU 1 it leaves {500, 500}: the whole shape no
  // longer fits, 0.5 * 1000 = 500, delta -250: 43. On b: {500, 1000}, 250, delta -250: 43.
  TaskRequest half = task(500, 4000);
  TaskAllocation a0{a, 4000, 0, {{0, 0, 500}}}, a1{a, 4000, 0, {{1, 0, 500}}};
  TaskAllocation b0{b, 4000, 0, {{0, 0, 500}}};
  EXPECT_DOUBLE_EQ(fgd.score(c, half, a0), 56.0);
  EXPECT_DOUBLE_EQ(fgd.score(c, half, a1), 43.0);
  EXPECT_DOUBLE_EQ(fgd.score(c, half, b0), 43.0);
  SeededRandom random(7);
  auto r = placeWith(c, half, fgd, random);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.tasks[0].node, a);
  EXPECT_EQ(r.tasks[0].gpus[0].gpu_index, 0u);
  // A CPU-only task of 10 cores: on a (12 cores free) only 2 would be left, below both
  // shapes' 4: all 1500 free milli-GPU count (delta -1250, int(100 * sigmoid(-1.25)) = 22);
  // on b nothing changes (50).
  TaskRequest cpu = task(0, 10000);
  EXPECT_DOUBLE_EQ(fgd.score(c, cpu, TaskAllocation{a, 10000, 0, {}}), 22.0);
  EXPECT_DOUBLE_EQ(fgd.score(c, cpu, TaskAllocation{b, 10000, 0, {}}), 50.0);
  r = placeWith(c, cpu, fgd, random);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.tasks[0].node, b);
}

TEST(FgdFidelity, TiesGoToOneNodeOrderPerRunForEveryPolicyButRandom) {
  // With the published tie rule, FGD's equal scores (small CPU-only tasks change nothing: 50
  // everywhere) go to the same node every time; Random still spreads.
  ClusterState base;
  for (int i = 0; i < 12; ++i)
    base.addNode(gpuNode("n" + std::to_string(i), 2, 64));
  auto nodesUsed = [&](sched::PlacementPolicy& p, uint64_t seed) {
    ClusterState c = base;
    SeededRandom random(seed);
    std::set<size_t> used;
    for (int k = 0; k < 8; ++k) {
      auto r = placeWith(c, task(0, 1000), p, random);
      EXPECT_TRUE(r.placed);
      if (!r.placed) break;
      EXPECT_TRUE(c.apply(r.tasks[0]).isOk());
      used.insert(r.tasks[0].node);
    }
    return used;
  };
  std::set<size_t> firsts;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    FgdPolicy fixed(halfAndWhole());
    fixed.setFixedTieOrder(true);
    auto used = nodesUsed(fixed, seed);
    EXPECT_EQ(used.size(), 1u) << "seed " << seed;
    if (!used.empty()) firsts.insert(*used.begin());
  }
  EXPECT_GT(firsts.size(), 1u);  // the order is drawn per run
  FgdPolicy spread(halfAndWhole());
  EXPECT_GT(nodesUsed(spread, 1).size(), 1u);  // without the rule ties are drawn each time
  sched::RandomPolicy random_policy;
  random_policy.setFixedTieOrder(true);
  EXPECT_GT(nodesUsed(random_policy, 1).size(), 1u);
}

TEST(FgdFidelity, AllocationAtLevelIsTheMeanOfRowsRoundingToIt) {
  std::vector<std::pair<double, double>> rows = {
      {99.4, 90}, {99.6, 91}, {100.2, 92}, {100.5, 93}, {101.5, 94}, {102.2, 95}, {104.0, 96},
  };
  auto v = allocationByLevel(rows);
  ASSERT_EQ(v.size(), static_cast<size_t>(kMaxLevel + 1));
  EXPECT_DOUBLE_EQ(v[99], 90.0);
  // 99.6, 100.2 and 100.5 (half to even: 100) round to 100.
  EXPECT_DOUBLE_EQ(v[100], (91.0 + 92.0 + 93.0) / 3);
  // Nothing rounds to 101: the rows rounding to 100..102 stand in.
  EXPECT_DOUBLE_EQ(v[101], (91.0 + 92.0 + 93.0 + 94.0 + 95.0) / 5);
  // 101.5 rounds to 102 (even), like 102.2.
  EXPECT_DOUBLE_EQ(v[102], (94.0 + 95.0) / 2);
  // Nothing rounds to 103: the rows rounding to 102..104 stand in.
  EXPECT_DOUBLE_EQ(v[103], (94.0 + 95.0 + 96.0) / 3);
  EXPECT_DOUBLE_EQ(v[104], 96.0);
  // 98 has no row of its own: those of 97..99.
  EXPECT_DOUBLE_EQ(v[98], 90.0);
  // Far from every row: the previous level's value carries on.
  EXPECT_DOUBLE_EQ(v[50], 0.0);
  EXPECT_DOUBLE_EQ(v[130], 96.0);
}

class TempFiles {
 public:
  TempFiles() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gpool-fgdfid-XXXXXX").string();
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  ~TempFiles() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string write(const std::string& name, const std::string& text) {
    std::string p = dir_ + "/" + name;
    std::ofstream(p) << text;
    return p;
  }

 private:
  std::string dir_;
};

TEST(FgdFidelity, TopUpStopsBeforeTheTarget) {
  // 10 GPUs; one pod of one whole GPU; tune 1.25 = 12.5 GPUs. The published tuneUpPods appends
  // a drawn pod only while the total plus its per-GPU share stays within the target: 1 + 11
  // draws = 12 GPUs (a 13th would pass 12.5). 12 arrive, 10 fit.
  TempFiles files;
  auto nodes = readOpenbNodes(files.write("n.csv",
                                          "sn,cpu_milli,memory_mib,gpu,model\n"
                                          "x,64000,65536,8,A\n"
                                          "y,64000,65536,2,A\n"));
  ASSERT_TRUE(nodes.ok());
  auto w = loadWorkload(files.write("p.csv",
                                    "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                                    "p,1000,1024,1,1000\n"));
  ASSERT_TRUE(w.ok()) << w.status().toString();
  auto run = runSeed(*nodes, *w, "FGD", 42, 1.25);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->pods, 12u);
  EXPECT_EQ(run->failed, 2u);
  EXPECT_DOUBLE_EQ(run->alloc_pct[kMaxLevel], 100.0);
}

}  // namespace
}  // namespace gpool::sim
