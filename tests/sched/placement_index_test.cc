// The feasibility index and the per-node memo that make placement cheap must never change a
// decision: the index may skip only nodes where the task cannot fit, and the memo may answer
// only for a node in the very state (version) it was computed for, across copies of the
// snapshot too.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/random.h"
#include "sched/fragmentation.h"
#include "sched/policies.h"

namespace gpool::sched {
namespace {

// Nodes of 0..9 GPUs (one of 20), two models, random CPU.
ClusterState randomCluster(Random& r, size_t nodes) {
  ClusterState c;
  for (size_t i = 0; i < nodes; ++i) {
    Node n;
    n.name = "r" + std::to_string(i);
    n.cpu_total_millis = n.cpu_free_millis = 8000 * (1 + r.uniform(12));
    n.ram_total_mib = n.ram_free_mib = 512 * 1024;
    uint32_t gpus = i == 3 ? 20 : static_cast<uint32_t>(r.uniform(10));
    for (uint32_t g = 0; g < gpus; ++g) {
      Gpu gpu;
      gpu.model = i % 3 == 0 ? "T4" : "A100";
      gpu.memory_total_mib = gpu.memory_free_mib = 32 * 1024;
      n.gpus.push_back(gpu);
    }
    c.addNode(std::move(n));
  }
  return c;
}

TaskRequest randomTask(Random& r) {
  TaskRequest t;
  uint64_t x = r.uniform(10);
  if (x < 5) {
    t.gpus = static_cast<uint32_t>(1 + r.uniform(999));
    if (r.uniform(4) == 0) t.gpu_compute = static_cast<uint32_t>(1 + r.uniform(1000));
    if (r.uniform(4) == 0) t.gpu_memory_mib = 1024 * r.uniform(40);
  } else if (x < 8) {
    t.gpus = 1000 * static_cast<uint32_t>(1 + r.uniform(x == 7 ? 20 : 8));
  }
  t.cpu_millis = 1000 * r.uniform(16);
  if (r.uniform(5) == 0) t.constraints.gpu_models = {"T4"};
  return t;
}

// Random changes: slices taken and given back, whole nodes drained, GPUs marked unhealthy or
// changed in place through mutableNode().
void perturb(ClusterState& c, Random& r, std::vector<TaskAllocation>& held) {
  for (int k = 0; k < 6; ++k) {
    size_t n = static_cast<size_t>(r.uniform(c.size()));
    const Node& node = c.node(n);
    uint64_t x = r.uniform(10);
    if (x < 5 && !node.gpus.empty()) {
      uint32_t g = static_cast<uint32_t>(r.uniform(node.gpus.size()));
      uint32_t take = static_cast<uint32_t>(r.uniform(node.gpus[g].compute_free + 1));
      TaskAllocation a{n, r.uniform(node.cpu_free_millis + 1), 0, {{g, 0, take}}};
      if (c.apply(a).isOk()) held.push_back(a);
    } else if (x < 8 && !held.empty()) {
      size_t k2 = static_cast<size_t>(r.uniform(held.size()));
      ASSERT_TRUE(c.release(held[k2]).isOk());
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k2));
    } else if (x == 8) {
      c.mutableNode(n).schedulable = r.uniform(3) != 0;
    } else if (!node.gpus.empty()) {
      // Only GPUs no allocation holds, so the held allocations stay releasable.
      uint32_t g = static_cast<uint32_t>(r.uniform(node.gpus.size()));
      bool used = false;
      for (const auto& a : held) {
        for (const GpuSlice& sl : a.gpus)
          used |= a.node == n && sl.gpu_index == g;
      }
      if (!used) c.mutableNode(n).gpus[g].healthy = r.uniform(2) == 0;
    }
  }
}

TEST(FeasibilityIndex, NeverSkipsANodeWhereTheTaskFits) {
  SeededRandom r(3);
  ClusterState c = randomCluster(r, 150);
  std::vector<TaskAllocation> held;
  size_t skipped = 0, fitting = 0;
  for (int round = 0; round < 300; ++round) {
    perturb(c, r, held);
    ClusterState copy = c;  // the index travels with copies
    for (int q = 0; q < 20; ++q) {
      TaskRequest t = randomTask(r);
      const ClusterState& s = q % 2 ? copy : c;
      std::vector<bool> visited(s.size(), false);
      size_t last = 0;
      bool first = true;
      uint32_t slice = t.isSlice() ? t.computePerGpu() : 0;
      s.forEachMayFit(slice, t.wholeGpus(), [&](size_t n) {
        ASSERT_LT(n, s.size());
        ASSERT_TRUE(first || n > last) << "not ascending";
        first = false;
        last = n;
        visited[n] = true;
      });
      for (size_t n = 0; n < s.size(); ++n) {
        bool fits = fitsNow(s.node(n), t);
        fitting += fits ? 1 : 0;
        skipped += visited[n] ? 0 : 1;
        ASSERT_TRUE(!fits || visited[n])
            << "index skipped node " << n << " where a task of " << t.gpus << "/1000 GPUs fits";
      }
    }
  }
  // Not vacuous: many fits checked, and the index does skip nodes.
  EXPECT_GT(fitting, 10000u);
  EXPECT_GT(skipped, 10000u);
}

// The memoising policy keeps its memo across placements; a fresh policy has none. Both must
// decide the same on every state, including copies that diverge from a common original.
TEST(PlacementMemoTest, FollowsNodeVersionsAcrossChangesAndCopies) {
  std::vector<TaskShape> shapes(2);
  shapes[0].cpu_millis = 2000;
  shapes[0].gpu_count = 1;
  shapes[0].gpu_milli = 500;
  shapes[0].weight = 1;
  shapes[1].cpu_millis = 4000;
  shapes[1].gpu_count = 2;
  shapes[1].gpu_milli = 1000;
  shapes[1].weight = 1;
  auto model = std::make_shared<const FragmentationModel>(shapes);
  for (const char* name : {"DotProd", "GpuPacking", "BestFit", "FGD", "gpool"}) {
    auto kept = std::move(makePolicy(name, model).value());
    ASSERT_TRUE(kept->nodeLocalScores()) << name;
    SeededRandom r(5);
    ClusterState original = randomCluster(r, 40);
    std::vector<TaskAllocation> held_a, held_b, held_o;
    ClusterState a = original, b = original;
    size_t compared = 0, placed = 0;
    for (int round = 0; round < 120; ++round) {
      // Diverge: the copies and the original change independently, so the same node often
      // has had the same number of changes in two snapshots while its states differ.
      perturb(a, r, held_a);
      perturb(b, r, held_b);
      if (round % 3 == 0) perturb(original, r, held_o);
      for (ClusterState* s : {&a, &b, &original}) {
        for (int q = 0; q < 4; ++q) {
          PlacementRequest req;
          req.job = "m";
          req.task = randomTask(r);
          SeededRandom r1(7), r2(7);
          PlacementResult got = place(*s, req, *kept, r1);
          auto fresh = std::move(makePolicy(name, model).value());
          PlacementResult want = place(*s, req, *fresh, r2);
          ASSERT_EQ(got.placed, want.placed) << name << " round " << round;
          ASSERT_EQ(got.tasks, want.tasks) << name << " round " << round;
          ASSERT_EQ(got.explanation, want.explanation) << name;
          ++compared;
          placed += got.placed ? 1 : 0;
          if (got.placed && r.uniform(3) == 0) {
            // Taking the decision changes the node: the memo entry must not survive it.
            ASSERT_TRUE(s->apply(got.tasks[0]).isOk());
            (s == &a ? held_a : s == &b ? held_b : held_o).push_back(got.tasks[0]);
          }
        }
      }
    }
    EXPECT_GT(placed, compared / 4) << name;
    EXPECT_GT(kept->memo().shapesSeen(), PlacementMemo::kShapes) << name;  // slots reused
  }
}

// A memo keyed on anything but the node's exact state would go wrong here: the same node, at
// the same index, in two snapshots that took the same number of changes.
TEST(PlacementMemoTest, CopiesWithEqualChangeCountsDoNotShareEntries) {
  ClusterState base;
  for (int i = 0; i < 2; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.cpu_total_millis = n.cpu_free_millis = 64000;
    n.ram_total_mib = n.ram_free_mib = 1024;
    Gpu g;
    g.memory_total_mib = g.memory_free_mib = 1024;
    n.gpus = {g, g};
    base.addNode(std::move(n));
  }
  BestFitPolicy policy;
  PlacementRequest req;
  req.task.gpus = 500;
  SeededRandom r(1);
  ClusterState a = base, b = base;
  // a: node 0 fuller (BestFit picks it); b: node 1 fuller. One change each.
  ASSERT_TRUE(a.apply({0, 0, 0, {{0, 0, 800}}}).isOk());
  ASSERT_TRUE(b.apply({1, 0, 0, {{0, 0, 800}}}).isOk());
  EXPECT_NE(a.nodeVersion(0), b.nodeVersion(0));
  PlacementResult pa = place(a, req, policy, r);
  PlacementResult pb = place(b, req, policy, r);
  ASSERT_TRUE(pa.placed && pb.placed);
  EXPECT_EQ(pa.tasks[0].node, 0u);
  EXPECT_EQ(pb.tasks[0].node, 1u);
  // Through mutableNode: node 1 of a loses its free GPUs' health; the memo must notice.
  a.mutableNode(0).gpus[1].healthy = false;
  a.mutableNode(0).gpus[0].healthy = false;
  PlacementResult pc = place(a, req, policy, r);
  ASSERT_TRUE(pc.placed);
  EXPECT_EQ(pc.tasks[0].node, 1u);
}

}  // namespace
}  // namespace gpool::sched
