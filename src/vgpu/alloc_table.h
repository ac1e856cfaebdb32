#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace gpool::vgpu {

// What the interposer charged for one live allocation, so a free returns exactly that.
// `kind` is the caller's tag (AllocKind in the shim); the table does not interpret it.
struct AllocRecord {
  std::uint64_t bytes = 0;
  std::uint32_t kind = 0;
  std::uint32_t device = 0;
};

// Per-process map from a driver handle or device address to its charge. Sharded by key so that
// allocations on different threads rarely contend; each shard is an open-addressing table (no
// memory allocation per insert or erase, only when a shard grows), and its lock is held for one
// probe sequence.
// Thread-safety: all methods are thread-safe. resetAfterFork() must run in a fork child before
// any other use (the parent's threads may have held shard locks at fork time).
class AllocationTable {
 public:
  AllocationTable() = default;
  AllocationTable(const AllocationTable&) = delete;
  AllocationTable& operator=(const AllocationTable&) = delete;
  ~AllocationTable();

  void insert(std::uint64_t key, AllocRecord record);
  // Removes `key` and returns its record; false when the key is unknown (not ours, or freed).
  bool erase(std::uint64_t key, AllocRecord* record);
  bool find(std::uint64_t key, AllocRecord* record) const;
  std::size_t size() const;
  std::uint64_t totalBytes() const;
  void resetAfterFork();

 private:
  static constexpr std::size_t kShards = 64;
  struct Entry {
    std::uint64_t key;  // kEmpty, kTombstone, or a key (keys equal to those are stored apart)
    AllocRecord rec;
  };
  struct alignas(64) Shard {
    mutable std::mutex mu;
    Entry* entries = nullptr;
    std::size_t capacity = 0;               // power of two
    std::size_t used = 0;                   // live entries
    std::size_t filled = 0;                 // live entries + tombstones
    bool special_live[2] = {false, false};  // keys 0 and 1
    AllocRecord special[2];
  };
  static Shard& shardFor(const Shard* shards, std::uint64_t key);
  static void grow(Shard& s);
  mutable Shard shards_[kShards];
};

}  // namespace gpool::vgpu
