#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace gpool {

// The one source of randomness components take by reference, so that a run is reproducible
// from its seed. Never use rand(), std::random_device or an unseeded engine elsewhere.
//
// Thread-safety: none; give each thread its own Random.
class Random {
 public:
  virtual ~Random() = default;
  // A uniformly distributed 64-bit value.
  virtual uint64_t next() = 0;

  // Uniform in [0, n); n must be > 0 (returns 0 for n == 0). Unbiased (rejection sampling).
  uint64_t uniform(uint64_t n);
  // Uniform in [0, 1).
  double uniformReal();

  // Fisher-Yates shuffle, deterministic for a given seed.
  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) {
      size_t j = static_cast<size_t>(uniform(i));
      using std::swap;
      swap(items[i - 1], items[j]);
    }
  }
};

// xoshiro256** seeded through SplitMix64: fast, small state, and the same sequence on every
// platform for a given seed.
class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed);
  uint64_t next() override;

 private:
  uint64_t s_[4];
};

}  // namespace gpool
