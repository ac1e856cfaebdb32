#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace gpool::vgpu {

// What the interposer charged for one live allocation, so a free returns exactly that.
// `kind` is the caller's tag (AllocKind in the shim); the table does not interpret it.
struct AllocRecord {
  std::uint64_t bytes = 0;
  std::uint32_t kind = 0;
  std::uint32_t device = 0;
};

// Per-process map from a driver handle or device address to its charge. Sharded by key so that
// allocations on different threads rarely contend; each shard's lock is held for one hash
// operation only.
// Thread-safety: all methods are thread-safe. resetAfterFork() must run in a fork child before
// any other use (the parent's threads may have held shard locks at fork time).
class AllocationTable {
 public:
  void insert(std::uint64_t key, AllocRecord record);
  // Removes `key` and returns its record; false when the key is unknown (not ours, or freed).
  bool erase(std::uint64_t key, AllocRecord* record);
  bool find(std::uint64_t key, AllocRecord* record) const;
  std::size_t size() const;
  std::uint64_t totalBytes() const;
  void resetAfterFork();

 private:
  static constexpr std::size_t kShards = 64;
  struct alignas(64) Shard {
    mutable std::mutex mu;
    std::unordered_map<std::uint64_t, AllocRecord> map;
  };
  Shard& shardFor(std::uint64_t key) const { return shards_[(key >> 8 ^ key >> 20) % kShards]; }
  mutable Shard shards_[kShards];
};

}  // namespace gpool::vgpu
