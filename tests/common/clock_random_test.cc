#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "common/clock.h"
#include "common/random.h"

namespace gpool {
namespace {

TEST(SimClockTest, MovesOnlyWhenTold) {
  SimClock clock(fromUnixSeconds(1000));
  EXPECT_EQ(clock.now(), fromUnixSeconds(1000));
  EXPECT_EQ(clock.monotonic(), Micros(0));
  clock.advance(std::chrono::seconds(5));
  EXPECT_EQ(clock.now(), fromUnixSeconds(1005));
  EXPECT_EQ(clock.monotonic(), std::chrono::seconds(5));
}

TEST(SimClockTest, NeverGoesBackwards) {
  SimClock clock(fromUnixSeconds(1000));
  clock.advance(Micros(-5));
  clock.setNow(fromUnixSeconds(10));
  EXPECT_EQ(clock.now(), fromUnixSeconds(1000));
  clock.setNow(fromUnixSeconds(1010));
  EXPECT_EQ(clock.now(), fromUnixSeconds(1010));
  EXPECT_EQ(clock.monotonic(), std::chrono::seconds(10));
}

TEST(RealClockTest, MonotonicDoesNotDecrease) {
  Clock& clock = realClock();
  Micros a = clock.monotonic();
  Micros b = clock.monotonic();
  EXPECT_LE(a, b);
  EXPECT_GT(toUnixMicros(clock.now()), int64_t{1'600'000'000} * 1'000'000);
}

TEST(UnixTimeTest, RoundTrips) {
  EXPECT_EQ(toUnixMicros(fromUnixMicros(123456789)), 123456789);
  EXPECT_EQ(toUnixMicros(fromUnixSeconds(2)), 2'000'000);
}

TEST(SeededRandomTest, SameSeedSameSequence) {
  SeededRandom a(42), b(42), c(43);
  std::vector<uint64_t> va, vb, vc;
  for (int i = 0; i < 16; ++i) {
    va.push_back(a.next());
    vb.push_back(b.next());
    vc.push_back(c.next());
  }
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
}

TEST(SeededRandomTest, UniformStaysInRangeAndCoversIt) {
  SeededRandom rng(7);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    uint64_t v = rng.uniform(10);
    ASSERT_LT(v, 10u);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 10u);
  EXPECT_EQ(rng.uniform(0), 0u);
  for (int i = 0; i < 1000; ++i) {
    double d = rng.uniformReal();
    ASSERT_GE(d, 0.0);
    ASSERT_LT(d, 1.0);
  }
}

TEST(SeededRandomTest, ShuffleIsAPermutationAndDeterministic) {
  std::vector<int> a{1, 2, 3, 4, 5, 6, 7, 8}, b = a;
  SeededRandom r1(5), r2(5);
  r1.shuffle(a);
  r2.shuffle(b);
  EXPECT_EQ(a, b);
  std::vector<int> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_NE(a, sorted);  // with this seed the order changes
}

}  // namespace
}  // namespace gpool
