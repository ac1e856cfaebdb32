#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/random.h"
#include "sched/fragmentation.h"
#include "sched/policies.h"

namespace gpool::sched {
namespace {

Node makeNode(const std::string& name, uint32_t gpus, uint64_t cpu_cores,
              const std::string& model = "A100") {
  Node n;
  n.name = name;
  n.cpu_total_millis = n.cpu_free_millis = cpu_cores * 1000;
  n.ram_total_mib = n.ram_free_mib = 256 * 1024;
  for (uint32_t i = 0; i < gpus; ++i) {
    Gpu g;
    g.model = model;
    g.compute_capability = 80;
    g.memory_total_mib = g.memory_free_mib = 80 * 1024;
    n.gpus.push_back(g);
  }
  return n;
}

TaskRequest slice(uint32_t milli, uint64_t cpu_cores = 1) {
  TaskRequest t;
  t.gpus = milli;
  t.cpu_millis = cpu_cores * 1000;
  return t;
}

TaskRequest whole(uint32_t gpus, uint64_t cpu_cores = 1) {
  TaskRequest t;
  t.gpus = gpus * 1000;
  t.cpu_millis = cpu_cores * 1000;
  return t;
}

// Takes `compute` thousandths of GPU `gpu` of node `node`.
void take(ClusterState& c, size_t node, uint32_t gpu, uint32_t compute, uint64_t cpu = 0) {
  TaskAllocation a;
  a.node = node;
  a.cpu_millis = cpu;
  a.gpus.push_back({gpu, 0, compute});
  ASSERT_TRUE(c.apply(a).isOk());
}

PlacementResult placeOne(const ClusterState& c, const TaskRequest& t, PlacementPolicy& p,
                         uint64_t seed = 1) {
  SeededRandom r(seed);
  PlacementRequest req;
  req.job = "j";
  req.task = t;
  return place(c, req, p, r);
}

std::shared_ptr<const FragmentationModel> twoShapeModel() {
  // Half the tasks take half a GPU with 1 core, half a whole GPU with 1 core.
  TaskShape half{1000, 1, 500, {}, 1};
  TaskShape one{1000, 1, 1000, {}, 1};
  return std::make_shared<FragmentationModel>(std::vector<TaskShape>{half, one});
}

TEST(ClusterState, ApplyAndReleaseAreExactAndAtomic) {
  ClusterState c;
  size_t n = c.addNode(makeNode("n", 2, 8));
  EXPECT_EQ(c.gpuCount(), 2u);
  TaskAllocation a{n, 2000, 1024, {{0, 1024, 300}}};
  ASSERT_TRUE(c.apply(a).isOk());
  EXPECT_EQ(c.node(n).gpus[0].compute_free, 700u);
  EXPECT_EQ(c.node(n).cpu_free_millis, 6000u);
  EXPECT_EQ(c.gpuComputeFree(), 1700u);
  // Too much compute on GPU 0: refused, nothing changes (CPU included).
  TaskAllocation b{n, 1000, 0, {{0, 0, 800}}};
  Status s = c.apply(b);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("node n"), std::string::npos);
  EXPECT_EQ(c.node(n).cpu_free_millis, 6000u);
  // Unknown GPU index and node index.
  EXPECT_EQ(c.apply(TaskAllocation{n, 0, 0, {{5, 0, 1}}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.apply(TaskAllocation{9, 0, 0, {}}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(c.release(a).isOk());
  EXPECT_EQ(c.node(n).gpus[0].compute_free, 1000u);
  EXPECT_EQ(c.node(n).gpus[0].memory_free_mib, 80u * 1024);
  // Releasing again would exceed the totals.
  EXPECT_EQ(c.release(a).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.findNode("n"), std::optional<size_t>(n));
  EXPECT_FALSE(c.findNode("x").has_value());
}

TEST(ClusterState, LinksDefaultToCrossSocketAndBadMatricesAreDropped) {
  ClusterState c;
  Node n = makeNode("n", 2, 8);
  n.links = {LinkLevel::kSelf};  // wrong size
  size_t i = c.addNode(n);
  EXPECT_TRUE(c.node(i).links.empty());
  EXPECT_EQ(c.node(i).link(0, 1), LinkLevel::kCrossSocket);
  EXPECT_EQ(c.node(i).link(1, 1), LinkLevel::kSelf);
}

TEST(Placement, RejectsMalformedRequests) {
  ClusterState c;
  c.addNode(makeNode("n", 2, 8));
  BestFitPolicy p;
  auto r = placeOne(c, whole(0) /*placeholder*/, p);
  EXPECT_TRUE(r.placed);  // a CPU-only task is fine
  TaskRequest bad;
  bad.gpus = 1500;  // 1.5 GPUs: neither whole GPUs nor one slice
  r = placeOne(c, bad, p);
  EXPECT_FALSE(r.placed);
  EXPECT_EQ(r.reason, PendingReason::kInvalid);
  EXPECT_NE(r.explanation.find("whole GPUs or one slice"), std::string::npos);
  PlacementRequest zero;
  zero.tasks = 0;
  SeededRandom rnd(1);
  EXPECT_EQ(place(c, zero, p, rnd).reason, PendingReason::kInvalid);
}

TEST(Placement, UnschedulableAndUnhealthyAreSkipped) {
  ClusterState c;
  Node drained = makeNode("drained", 4, 8);
  drained.schedulable = false;
  c.addNode(drained);
  Node sick = makeNode("sick", 1, 8);
  sick.gpus[0].healthy = false;
  c.addNode(sick);
  BestFitPolicy p;
  auto r = placeOne(c, whole(1), p);
  EXPECT_FALSE(r.placed);
  EXPECT_EQ(r.reason, PendingReason::kConstraint);
  // A CPU-only task may still use the node with the broken GPU.
  r = placeOne(c, whole(0), p);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(c.node(r.tasks[0].node).name, "sick");
}

// Issue 20, item 3: a slice goes only to a node that enforces slices (interposer and backstop);
// whole GPUs go anywhere. With no such node the job cannot run, and the explanation says why.
TEST(Placement, SlicesGoOnlyToNodesThatEnforceThem) {
  ClusterState c;
  Node lax = makeNode("lax", 4, 8);
  lax.enforces_slices = false;
  c.addNode(lax);
  BestFitPolicy p;
  auto r = placeOne(c, slice(250), p);
  EXPECT_FALSE(r.placed);
  EXPECT_EQ(r.reason, PendingReason::kConstraint);
  EXPECT_EQ(r.unsatisfiable, std::vector<std::string>{"slice_enforcement"});
  EXPECT_NE(r.explanation.find("only on nodes that enforce them"), std::string::npos)
      << r.explanation;
  EXPECT_TRUE(placeOne(c, whole(2), p).placed);
  // Another node that enforces them takes the slice, however full the lax one is not.
  size_t strict = c.addNode(makeNode("strict", 1, 8));
  take(c, strict, 0, 500);
  r = placeOne(c, slice(250), p);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(c.node(r.tasks[0].node).name, "strict");
  // Once it is full, the slice waits for resources there.
  take(c, strict, 0, 500);
  r = placeOne(c, slice(250), p);
  EXPECT_FALSE(r.placed);
  EXPECT_EQ(r.reason, PendingReason::kResources);
}

TEST(Placement, ExplanationNamesNodeGpusAndLinks) {
  ClusterState c;
  Node n = makeNode("gpu7", 2, 8);
  n.links = {LinkLevel::kSelf, LinkLevel::kNvLink, LinkLevel::kNvLink, LinkLevel::kSelf};
  c.addNode(n);
  BestFitPolicy p;
  auto r = placeOne(c, whole(2), p);
  ASSERT_TRUE(r.placed);
  EXPECT_NE(r.explanation.find("node gpu7 GPUs 0,1"), std::string::npos) << r.explanation;
  EXPECT_NE(r.explanation.find("NVLink"), std::string::npos) << r.explanation;
  EXPECT_NE(r.explanation.find("BestFit"), std::string::npos) << r.explanation;
}

TEST(Placement, SameSeedSameChoice) {
  ClusterState c;
  for (int i = 0; i < 20; ++i)
    c.addNode(makeNode("n" + std::to_string(i), 8, 64));
  RandomPolicy p;
  std::set<size_t> seen;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    auto a = placeOne(c, slice(300), p, seed);
    auto b = placeOne(c, slice(300), p, seed);
    ASSERT_TRUE(a.placed);
    EXPECT_EQ(a.tasks, b.tasks);
    seen.insert(a.tasks[0].node);
  }
  // Random spreads over the 20 identical nodes.
  EXPECT_GE(seen.size(), 10u);
}

TEST(Policies, RandomOnlyPicksFeasibleNodes) {
  ClusterState c;
  c.addNode(makeNode("small", 1, 2));
  c.addNode(makeNode("big", 8, 64));
  RandomPolicy p;
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    auto r = placeOne(c, whole(2, 4), p, seed);
    ASSERT_TRUE(r.placed);
    EXPECT_EQ(c.node(r.tasks[0].node).name, "big");
  }
}

TEST(Policies, BestFitPrefersLeastLeftover) {
  ClusterState c;
  size_t a = c.addNode(makeNode("a", 8, 64));
  c.addNode(makeNode("b", 8, 64));
  take(c, a, 0, 1000, 16000);
  BestFitPolicy p;
  auto r = placeOne(c, whole(1), p);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.tasks[0].node, a);
  // Formula check: (1 - (0.5*(48-1)/128 + 0.5*(7-1)/8)) * 100 = 44.14 -> 44.
  EXPECT_DOUBLE_EQ(p.score(c, whole(1), r.tasks[0]), 44.0);
}

TEST(Policies, DotProdPrefersSmallerAlignment) {
  ClusterState c;
  size_t a = c.addNode(makeNode("a", 8, 96));
  size_t b = c.addNode(makeNode("b", 2, 16));
  DotProdPolicy p;
  TaskRequest t = whole(1, 8);
  TaskAllocation ca{a, 8000, 0, {{0, 0, 1000}}};
  TaskAllocation cb{b, 8000, 0, {{0, 0, 1000}}};
  // a: dot = (96/128)(8/128) + (8/8)(1/8) = 0.171875 -> 100 * (1 - 0.0859375) = 91.4 -> 91.
  EXPECT_DOUBLE_EQ(p.score(c, t, ca), 91.0);
  // b: dot = (16/128)(8/128) + (2/8)(1/8) = 0.0390625 -> 98.0 -> 98.
  EXPECT_DOUBLE_EQ(p.score(c, t, cb), 98.0);
  auto r = placeOne(c, t, p);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.tasks[0].node, b);
}

TEST(Policies, GpuPackingPrefersSharedGpusThenUsedNodesThenIdleNodes) {
  ClusterState c;
  size_t idle = c.addNode(makeNode("idle", 8, 64));
  size_t used = c.addNode(makeNode("used", 8, 64));
  size_t shared = c.addNode(makeNode("shared", 8, 64));
  take(c, used, 0, 1000);
  take(c, shared, 0, 400);
  GpuPackingPolicy p;
  // A slice: the partly used GPU of "shared" wins (case 1: 100 - 60/10 = 94).
  auto r = placeOne(c, slice(500), p);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.tasks[0].node, shared);
  EXPECT_EQ(r.tasks[0].gpus[0].gpu_index, 0u);
  EXPECT_DOUBLE_EQ(p.score(c, slice(500), r.tasks[0]), 94.0);
  // A whole GPU: "used" and "shared" have fully free GPUs on a used node (49) and beat the
  // idle node (100/3 - 8 = 25).
  r = placeOne(c, whole(1), p);
  ASSERT_TRUE(r.placed);
  EXPECT_NE(r.tasks[0].node, idle);
  EXPECT_DOUBLE_EQ(p.score(c, whole(1), r.tasks[0]), 49.0);
  TaskAllocation on_idle{idle, 1000, 0, {{0, 0, 1000}}};
  EXPECT_DOUBLE_EQ(p.score(c, whole(1), on_idle), 25.0);
}

TEST(Policies, GpuPackingAndClusteringBreakTiesByOneRandomNodeOrderPerRun) {
  // As the published simulator: CPU-only tasks score the same on every node, and the tie goes
  // to the earliest node of an order drawn once, so they pile onto one node instead of
  // spreading like Random's fresh draws.
  ClusterState base;
  for (int i = 0; i < 16; ++i)
    base.addNode(makeNode("n" + std::to_string(i), 8, 64));
  TaskRequest cpu_only;
  cpu_only.cpu_millis = 1000;
  auto nodesUsed = [&](PlacementPolicy& p, uint64_t seed) {
    ClusterState c = base;
    SeededRandom random(seed);
    std::set<size_t> used;
    PlacementRequest req;
    req.job = "j";
    req.task = cpu_only;
    for (int k = 0; k < 10; ++k) {
      auto r = place(c, req, p, random);
      EXPECT_TRUE(r.placed);
      if (!r.placed) break;
      EXPECT_TRUE(c.apply(r.tasks[0]).isOk());
      used.insert(r.tasks[0].node);
    }
    return used;
  };
  std::set<size_t> first_nodes;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    GpuPackingPolicy packing;
    auto used = nodesUsed(packing, seed);
    EXPECT_EQ(used.size(), 1u) << "seed " << seed;
    if (!used.empty()) first_nodes.insert(*used.begin());
    GpuClusteringPolicy clustering;
    EXPECT_EQ(nodesUsed(clustering, seed), used) << "seed " << seed;
  }
  // The order differs between runs (seeds).
  EXPECT_GT(first_nodes.size(), 1u);
  RandomPolicy random_policy;
  EXPECT_GT(nodesUsed(random_policy, 1).size(), 1u);
}

TEST(Policies, GpuClusteringGroupsSameKindOfTasks) {
  ClusterState c;
  size_t a = c.addNode(makeNode("a", 8, 64));
  size_t b = c.addNode(makeNode("b", 8, 64));
  GpuClusteringPolicy p;
  // b already runs a slice task, a runs a 2-GPU task.
  TaskAllocation on_b{b, 1000, 0, {{0, 0, 300}}};
  ASSERT_TRUE(c.apply(on_b).isOk());
  p.notePlaced(c, slice(300), on_b);
  TaskAllocation on_a{a, 1000, 0, {{0, 0, 1000}, {1, 0, 1000}}};
  ASSERT_TRUE(c.apply(on_a).isOk());
  p.notePlaced(c, whole(2), on_a);
  auto r = placeOne(c, slice(200), p);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.tasks[0].node, b);
  r = placeOne(c, whole(2), p);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.tasks[0].node, a);
  // Only-same-kind node: 25 * (8000 - 6000) / 8000 + 75 = 81.
  EXPECT_DOUBLE_EQ(p.score(c, whole(2), r.tasks[0]), 81.0);
}

TEST(Fragmentation, HandComputedNodeValues) {
  auto m = twoShapeModel();
  // GPUs free {1000, 300}, CPU plenty. Half-GPU shape fits (GPU 0); GPU 1 (300 < 500) is
  // fragmented: 0.5 * 300. Whole-GPU shape fits on GPU 0; GPU 1 fragmented: 0.5 * 300.
  uint32_t free1[] = {1000, 300};
  EXPECT_DOUBLE_EQ(m->nodeFragmentation("A100", 8000, free1, 2), 300.0);
  // No CPU left: neither shape fits, all 1300 free count.
  EXPECT_DOUBLE_EQ(m->nodeFragmentation("A100", 0, free1, 2), 1300.0);
  // {600, 600}: half fits, nothing fragmented (0); whole does not fit, 1200 (* 0.5).
  uint32_t free2[] = {600, 600};
  EXPECT_DOUBLE_EQ(m->nodeFragmentation("A100", 8000, free2, 2), 600.0);
  // Cluster = sum over nodes.
  ClusterState c;
  c.addNode(makeNode("x", 2, 8));
  size_t y = c.addNode(makeNode("y", 2, 8));
  take(c, y, 1, 700);
  EXPECT_DOUBLE_EQ(m->clusterFragmentation(c), 300.0);
}

TEST(Fragmentation, ModelConstraintsAndCpuOnlyShapes) {
  TaskShape t4_only{1000, 1, 1000, {"T4"}, 1};
  TaskShape cpu_only{1000, 0, 0, {}, 1};
  FragmentationModel m({t4_only, cpu_only});
  uint32_t free[] = {1000, 1000};
  // On an A100 node the T4 shape has no access (all 2000 count, weight 0.5); a CPU-only
  // shape always counts all free GPU (0.5 * 2000).
  EXPECT_DOUBLE_EQ(m.nodeFragmentation("A100", 8000, free, 2), 2000.0);
  // On a T4 node the T4 shape fits: only the CPU-only half counts.
  EXPECT_DOUBLE_EQ(m.nodeFragmentation("T4", 8000, free, 2), 1000.0);
  // A node mixing models is evaluated shape by shape: the T4 shape can use only the T4 GPU,
  // so the A100's 1000 count for it (0.5 * 1000), plus the CPU-only half (0.5 * 2000).
  Node mixed = makeNode("m", 2, 8, "A100");
  mixed.gpus[1].model = "T4";
  EXPECT_DOUBLE_EQ(m.nodeFragmentation(mixed), 1500.0);
}

TEST(Fragmentation, TypicalShapesKeepTheMostFrequentUpToCoverage) {
  std::vector<TaskShape> s = {
      {1000, 1, 500, {}, 10}, {2000, 1, 1000, {}, 60}, {4000, 2, 1000, {}, 30}};
  auto top = typicalShapes(s, 60);
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].cpu_millis, 2000u);
  EXPECT_DOUBLE_EQ(top[0].weight, 1.0);
  auto most = typicalShapes(s, 95);
  ASSERT_EQ(most.size(), 3u);
  EXPECT_NEAR(most[0].weight + most[1].weight + most[2].weight, 1.0, 1e-12);
  EXPECT_TRUE(typicalShapes({}, 95).empty());
}

TEST(Policies, FgdKeepsWholeGpusWhole) {
  // Node a: GPU 0 has 500 free, GPU 1 is idle. A 0.5 slice on GPU 0 leaves the idle GPU for
  // whole-GPU tasks; on GPU 1 it would leave two half GPUs (whole-GPU shape no longer fits).
  ClusterState c;
  size_t a = c.addNode(makeNode("a", 2, 8));
  take(c, a, 0, 500);
  FgdPolicy p(twoShapeModel());
  auto r = placeOne(c, slice(500), p);
  ASSERT_TRUE(r.placed);
  EXPECT_EQ(r.tasks[0].gpus[0].gpu_index, 0u);
  // Fragmentation before: half shape fits everywhere (0), whole shape: GPU 0 (500) counts
  // -> 250. After (GPU 0 full): 0. Reduction 250.
  EXPECT_DOUBLE_EQ(p.fragmentationDelta(c, r.tasks[0]), 250.0);
  EXPECT_DOUBLE_EQ(p.score(c, slice(500), r.tasks[0]), std::trunc(100.0 / (1.0 + std::exp(-0.25))));
}

TEST(Policies, FgdAndGpoolPreferTheNodeThatFragmentsLeast) {
  // Node a has a GPU with 500 free (the slice fills it exactly); node b is idle.
  ClusterState c;
  size_t a = c.addNode(makeNode("a", 2, 8));
  c.addNode(makeNode("b", 2, 8));
  take(c, a, 0, 500);
  for (const char* name : {"FGD", "gpool"}) {
    auto p = makePolicy(name, twoShapeModel());
    ASSERT_TRUE(p.ok());
    auto r = placeOne(c, slice(500), **p);
    ASSERT_TRUE(r.placed) << name;
    EXPECT_EQ(r.tasks[0].node, a) << name;
    EXPECT_EQ(r.tasks[0].gpus[0].gpu_index, 0u) << name;
  }
}

TEST(Policies, MakePolicyKnowsAllNamesCaseInsensitively) {
  for (const auto& n : policyNames()) {
    auto p = makePolicy(n, twoShapeModel());
    ASSERT_TRUE(p.ok()) << n;
    EXPECT_EQ((*p)->name(), n);
  }
  EXPECT_TRUE(makePolicy("bestfit", nullptr).ok());
  auto bad = makePolicy("tetris", nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("known: Random"), std::string::npos);
}

TEST(Placement, FgdCacheIsNotFooledBySnapshotCopies) {
  // The policy caches fragmentation per node; a copy of the snapshot with a different state
  // at the same node index must not reuse the cached value.
  ClusterState c;
  size_t a = c.addNode(makeNode("a", 2, 8));
  FgdPolicy p(twoShapeModel());
  TaskAllocation cand{a, 1000, 0, {{0, 0, 500}}};
  double fresh = p.fragmentationDelta(c, cand);
  // On the copy GPU 0 has 700 free: before = 0.5 * 700 (whole shape), after (200 free on GPU
  // 0) = 0.5 * 200 + 0.5 * 200, so the reduction is +150 instead of the idle node's -250.
  ClusterState copy = c;
  take(copy, a, 0, 300);
  double on_copy = p.fragmentationDelta(copy, cand);
  FgdPolicy clean(twoShapeModel());
  EXPECT_DOUBLE_EQ(on_copy, clean.fragmentationDelta(copy, cand));
  EXPECT_DOUBLE_EQ(fresh, -250.0);
  EXPECT_DOUBLE_EQ(on_copy, 150.0);
}

}  // namespace
}  // namespace gpool::sched
