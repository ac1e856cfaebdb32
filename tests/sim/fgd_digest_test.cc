// The FGD replay of seed 42 on the openb trace (1,213 servers, `gpool sim fgd --policy FGD
// --seeds 42`) must not change when placement gets faster: the allocation curve and the
// fragmentation log, bit for bit, are digested and compared with the value of the faithful
// replay (published tie rule, 95% typical pods, published top-up and allocation reading).
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "sim/fgd_replay.h"

namespace gpool::sim {
namespace {

const std::string kData = std::string(GPOOL_SOURCE_DIR) + "/data/traces/alibaba-gpu-v2023";

uint64_t digestRun(const SeedRun& run) {
  uint64_t h = 14695981039346656037ULL;
  auto add = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ULL;
    }
  };
  auto addDouble = [&](double d) {
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    add(bits);
  };
  for (double v : run.alloc_pct)
    addDouble(v);
  for (double v : run.frag_pct)
    addDouble(v);
  add(run.pods);
  add(run.failed);
  return h;
}

TEST(FgdDigest, Seed42ReplayDecidesAsTheReference) {
  auto nodes = readOpenbNodes(kData + "/openb_node_list_gpu_node.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().toString();
  auto w = loadWorkload(kData + "/openb_pod_list_default.csv");
  ASSERT_TRUE(w.ok()) << w.status().toString();
  auto run = runSeed(*nodes, *w, "FGD", 42, 1.3);
  ASSERT_TRUE(run.ok());
  uint64_t got = digestRun(*run);
  EXPECT_EQ(got, 0x309695efef9d5c9dULL)
      << "digest 0x" << std::hex << got << std::dec << ", alloc at 100%: " << run->alloc_pct[100]
      << ", failed " << run->failed;
}

}  // namespace
}  // namespace gpool::sim
