#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/status.h"
#include "vgpu/shm_layout.h"

namespace gpool::vgpu {

struct RegionConfig {
  std::uint64_t quota_bytes = 0;
  std::uint32_t share_permille = 1000;  // 1..1000
  SharePolicy policy = SharePolicy::kWorkConserving;
  std::uint64_t context_bytes = 0;           // charged once per process that creates a context
  std::uint32_t control_period_us = 100000;  // limiter control period
  std::uint32_t device_index = 0;
  std::string device_uuid;  // may be empty
  // Owner of the usage part: the task's user, whose processes map it read-write. -1: the
  // creator's own (an agent that is not root runs tasks as itself).
  std::int64_t usage_uid = -1;
  std::int64_t usage_gid = -1;
};

// A mapping of one task's region on one GPU (layout in shm_layout.h, docs/vgpu-shm.md): two files
// named after the region's path, `<path>.limits` (the agent's: mode 0444, written only by its
// creator) and `<path>.usage` (the task user's: mode 0600).
//
// Ownership: owns both mappings, unmapped on destruction; the files outlive it (the agent deletes
// them with remove() when the task ends). Move-only.
// Thread-safety: every method may be called from any thread of any process mapping the region.
// Ledger changes take the header's robust mutex; a process dying while holding it does not
// block others: the next locker repairs the ledger (see lockLedger). Reads are lock-free.
// Errors: create/open return a Status naming the path; the hot-path methods cannot fail.
class ShmRegion {
 public:
  // Creates (or atomically replaces) both files of the region at `path` and maps them; the
  // limits stay writable through this mapping only. Used by the agent (which must be root to
  // give the usage part to another user: config.usage_uid).
  static Result<ShmRegion> create(const std::string& path, const RegionConfig& config);
  // Maps an existing region: the limits read-only (from a read-only descriptor, so not even
  // mprotect can make them writable), the usage read-write. Fails on a missing file or a bad
  // magic, version or size, naming the file.
  static Result<ShmRegion> open(const std::string& path);
  // The two files of the region at `path`.
  static std::string limitsPath(const std::string& path) { return path + ".limits"; }
  static std::string usagePath(const std::string& path) { return path + ".usage"; }
  // Deletes both files of the region at `path`; missing files are not an error.
  static void remove(const std::string& path);

  ShmRegion(ShmRegion&& other) noexcept;
  ShmRegion& operator=(ShmRegion&& other) noexcept;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;
  ~ShmRegion();

  // The usage part (ledger, limiter, slots).
  ShmHeader* header() const { return header_; }
  // The limits part: read-only for everyone but the agent that created it.
  const ShmLimits* limits() const { return limits_; }

  // Claims a slot for process `pid` (reaping dead processes when full). Returns the slot index,
  // or -1 when every slot belongs to a live process.
  int attach(std::int32_t pid);
  // Frees the slot and returns all bytes it held to the task.
  void detach(int slot);

  // Reserves `bytes` for `slot` atomically against the quota: true when reserved, false when the
  // task would exceed its quota (dead processes are reaped once before refusing).
  bool reserve(int slot, std::uint64_t bytes);
  // Charges `bytes` even beyond the quota: for memory that exists already and cannot be refused
  // (a context created before its charge). Later reserves then fail until usage drops.
  void forceReserve(int slot, std::uint64_t bytes);
  // Returns bytes reserved earlier by `slot` (clamped at what the slot holds: never underflows).
  void release(int slot, std::uint64_t bytes);
  // Records the driver's view of a process's usage; bytes beyond the ledger in this and the
  // previous observation count as untracked and are charged to the task, so memory that bypassed
  // the interposer still counts (a single observation may race with a free and is not enough).
  void reconcile(int slot, std::uint64_t driver_bytes);
  // Reclaims the slots of processes that have exited. Returns how many were reclaimed.
  int reapDead();

  std::uint64_t usedBytes() const { return header_->total_bytes.load(std::memory_order_acquire); }
  std::uint64_t quotaBytes() const { return limits_->quota_bytes.load(std::memory_order_relaxed); }

  // Test hook: takes the ledger lock and never releases it (the caller then dies).
  void lockLedgerForTest();

 private:
  ShmRegion(ShmLimits* limits, ShmHeader* header) : limits_(limits), header_(header) {}
  void lockLedger();
  void unlockLedger();
  int reapLocked();
  void recomputeTotalLocked();

  void unmap();

  ShmLimits* limits_ = nullptr;
  ShmHeader* header_ = nullptr;
};

// Reads the start time of `pid` from /proc (0 when it does not exist or is a zombie).
std::uint64_t processStartTime(std::int32_t pid);
// True when `pid` with start time `start_time` is still running (a reused pid is not).
bool processAlive(std::int32_t pid, std::uint64_t start_time);

}  // namespace gpool::vgpu
