#include "common/random.h"

namespace gpool {

namespace {
uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}
uint64_t splitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
}  // namespace

uint64_t Random::uniform(uint64_t n) {
  if (n == 0) return 0;
  // Reject the top partial bucket so every residue is equally likely.
  const uint64_t limit = UINT64_MAX - (UINT64_MAX % n);
  uint64_t v;
  do {
    v = next();
  } while (v >= limit);
  return v % n;
}

double Random::uniformReal() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

SeededRandom::SeededRandom(uint64_t seed) {
  for (auto& word : s_)
    word = splitMix64(seed);
}

uint64_t SeededRandom::next() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

}  // namespace gpool
