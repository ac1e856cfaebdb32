#include "vgpu/alloc_table.h"

#include <gtest/gtest.h>

#include <thread>
#include <unordered_map>
#include <vector>

#include "common/random.h"

namespace gpool::vgpu {
namespace {

TEST(AllocationTableTest, InsertFindEraseIncludingReservedKeyValues) {
  AllocationTable t;
  for (std::uint64_t key : {0ULL, 1ULL, 2ULL, 0x7f0000001000ULL}) {
    t.insert(key, AllocRecord{key + 10, 3, 1});
  }
  EXPECT_EQ(t.size(), 4u);
  AllocRecord r;
  ASSERT_TRUE(t.find(0, &r));
  EXPECT_EQ(r.bytes, 10u);
  ASSERT_TRUE(t.erase(1, &r));
  EXPECT_EQ(r.bytes, 11u);
  EXPECT_FALSE(t.erase(1, &r));
  ASSERT_TRUE(t.erase(0x7f0000001000ULL, &r));
  EXPECT_EQ(r.kind, 3u);
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.totalBytes(), 10u + 12u);
}

TEST(AllocationTableTest, MatchesAReferenceMapUnderRandomChurn) {
  AllocationTable t;
  std::unordered_map<std::uint64_t, std::uint64_t> ref;
  SeededRandom rng(42);
  for (int i = 0; i < 200000; ++i) {
    // Page-aligned addresses in a small window: many collisions, inserts over tombstones.
    const std::uint64_t key = 0x7f0000000000ULL + (rng.uniform(4096) << 12);
    AllocRecord r;
    if (ref.count(key) != 0) {
      ASSERT_TRUE(t.erase(key, &r));
      ASSERT_EQ(r.bytes, ref[key]);
      ref.erase(key);
    } else {
      const std::uint64_t bytes = 1 + rng.uniform(1 << 20);
      t.insert(key, AllocRecord{bytes, 1, 0});
      ref[key] = bytes;
    }
  }
  EXPECT_EQ(t.size(), ref.size());
  std::uint64_t total = 0;
  for (const auto& [k, v] : ref)
    total += v;
  EXPECT_EQ(t.totalBytes(), total);
}

TEST(AllocationTableTest, ThreadsOnDisjointKeysDoNotInterfere) {
  AllocationTable t;
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th) {
    threads.emplace_back([&t, th] {
      for (std::uint64_t i = 0; i < 20000; ++i) {
        const std::uint64_t key = (static_cast<std::uint64_t>(th + 1) << 40) + (i << 8);
        t.insert(key, AllocRecord{1, 0, 0});
        if (i % 2 == 0) {
          AllocRecord r;
          ASSERT_TRUE(t.erase(key, &r));
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(t.size(), 4u * 10000u);
  t.resetAfterFork();
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace gpool::vgpu
