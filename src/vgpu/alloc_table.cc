#include "vgpu/alloc_table.h"

#include <new>

namespace gpool::vgpu {

void AllocationTable::insert(std::uint64_t key, AllocRecord record) {
  Shard& s = shardFor(key);
  std::lock_guard<std::mutex> lock(s.mu);
  s.map[key] = record;
}

bool AllocationTable::erase(std::uint64_t key, AllocRecord* record) {
  Shard& s = shardFor(key);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(key);
  if (it == s.map.end()) return false;
  *record = it->second;
  s.map.erase(it);
  return true;
}

bool AllocationTable::find(std::uint64_t key, AllocRecord* record) const {
  Shard& s = shardFor(key);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(key);
  if (it == s.map.end()) return false;
  *record = it->second;
  return true;
}

std::size_t AllocationTable::size() const {
  std::size_t n = 0;
  for (Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    n += s.map.size();
  }
  return n;
}

std::uint64_t AllocationTable::totalBytes() const {
  std::uint64_t n = 0;
  for (Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    for (const auto& [key, rec] : s.map)
      n += rec.bytes;
  }
  return n;
}

void AllocationTable::resetAfterFork() {
  // Device memory is not inherited across fork, so the child starts with an empty table; the
  // mutexes are rebuilt because a parent thread may have held one at fork time.
  for (Shard& s : shards_) {
    new (&s.mu) std::mutex;
    s.map.clear();
  }
}

}  // namespace gpool::vgpu
