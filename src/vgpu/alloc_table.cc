#include "vgpu/alloc_table.h"

#include <new>

namespace gpool::vgpu {
namespace {

constexpr std::uint64_t kEmpty = 0;
constexpr std::uint64_t kTombstone = 1;

std::size_t slotFor(std::uint64_t key, std::size_t capacity) {
  // Fibonacci hashing: addresses share low bits (alignment), the multiply spreads them.
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> 20) & (capacity - 1);
}

}  // namespace

AllocationTable::~AllocationTable() {
  for (Shard& s : shards_)
    delete[] s.entries;
}

AllocationTable::Shard& AllocationTable::shardFor(const Shard* shards, std::uint64_t key) {
  return const_cast<Shard&>(shards[(key >> 12 ^ key >> 24 ^ key) % kShards]);
}

void AllocationTable::grow(Shard& s) {
  // Doubles when live entries fill a quarter, else rebuilds in place size to drop tombstones.
  const std::size_t capacity =
      s.capacity == 0 ? 64 : (s.used * 4 >= s.capacity ? s.capacity * 2 : s.capacity);
  Entry* fresh = new Entry[capacity];
  for (std::size_t i = 0; i < capacity; ++i)
    fresh[i].key = kEmpty;
  for (std::size_t i = 0; i < s.capacity; ++i) {
    const Entry& e = s.entries[i];
    if (e.key == kEmpty || e.key == kTombstone) continue;
    std::size_t j = slotFor(e.key, capacity);
    while (fresh[j].key != kEmpty)
      j = (j + 1) & (capacity - 1);
    fresh[j] = e;
  }
  delete[] s.entries;
  s.entries = fresh;
  s.capacity = capacity;
  s.filled = s.used;
}

void AllocationTable::insert(std::uint64_t key, AllocRecord record) {
  Shard& s = shardFor(shards_, key);
  std::lock_guard<std::mutex> lock(s.mu);
  if (key <= kTombstone) {
    if (!s.special_live[key]) ++s.used;
    s.special_live[key] = true;
    s.special[key] = record;
    return;
  }
  if ((s.filled + 1) * 2 > s.capacity) grow(s);
  const std::size_t mask = s.capacity - 1;
  std::size_t i = slotFor(key, s.capacity);
  std::size_t reuse = s.capacity;  // first tombstone on the probe path
  for (;; i = (i + 1) & mask) {
    Entry& e = s.entries[i];
    if (e.key == key) {
      e.rec = record;
      return;
    }
    if (e.key == kTombstone && reuse == s.capacity) reuse = i;
    if (e.key == kEmpty) break;
  }
  if (reuse != s.capacity) {
    i = reuse;
  } else {
    ++s.filled;
  }
  s.entries[i].key = key;
  s.entries[i].rec = record;
  ++s.used;
}

bool AllocationTable::erase(std::uint64_t key, AllocRecord* record) {
  Shard& s = shardFor(shards_, key);
  std::lock_guard<std::mutex> lock(s.mu);
  if (key <= kTombstone) {
    if (!s.special_live[key]) return false;
    s.special_live[key] = false;
    *record = s.special[key];
    --s.used;
    return true;
  }
  if (s.capacity == 0) return false;
  const std::size_t mask = s.capacity - 1;
  for (std::size_t i = slotFor(key, s.capacity);; i = (i + 1) & mask) {
    Entry& e = s.entries[i];
    if (e.key == kEmpty) return false;
    if (e.key == key) {
      *record = e.rec;
      e.key = kTombstone;
      --s.used;
      return true;
    }
  }
}

bool AllocationTable::find(std::uint64_t key, AllocRecord* record) const {
  Shard& s = shardFor(shards_, key);
  std::lock_guard<std::mutex> lock(s.mu);
  if (key <= kTombstone) {
    if (!s.special_live[key]) return false;
    *record = s.special[key];
    return true;
  }
  if (s.capacity == 0) return false;
  const std::size_t mask = s.capacity - 1;
  for (std::size_t i = slotFor(key, s.capacity);; i = (i + 1) & mask) {
    const Entry& e = s.entries[i];
    if (e.key == kEmpty) return false;
    if (e.key == key) {
      *record = e.rec;
      return true;
    }
  }
}

std::size_t AllocationTable::size() const {
  std::size_t n = 0;
  for (Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    n += s.used;
  }
  return n;
}

std::uint64_t AllocationTable::totalBytes() const {
  std::uint64_t n = 0;
  for (Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    for (int k = 0; k < 2; ++k) {
      if (s.special_live[k]) n += s.special[k].bytes;
    }
    for (std::size_t i = 0; i < s.capacity; ++i) {
      if (s.entries[i].key > kTombstone) n += s.entries[i].rec.bytes;
    }
  }
  return n;
}

void AllocationTable::resetAfterFork() {
  // Device memory is not inherited across fork, so the child starts with an empty table; the
  // mutexes are rebuilt because a parent thread may have held one at fork time.
  for (Shard& s : shards_) {
    new (&s.mu) std::mutex;
    for (std::size_t i = 0; i < s.capacity; ++i)
      s.entries[i].key = kEmpty;
    s.used = 0;
    s.filled = 0;
    s.special_live[0] = s.special_live[1] = false;
  }
}

}  // namespace gpool::vgpu
