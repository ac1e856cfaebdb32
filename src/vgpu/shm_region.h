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
};

// A mapping of one task's region on one GPU (layout in shm_layout.h, docs/vgpu-shm.md).
//
// Ownership: owns the mapping, unmapped on destruction; the file outlives it (the agent deletes
// it when the task ends). Move-only.
// Thread-safety: every method may be called from any thread of any process mapping the region.
// Ledger changes take the header's robust mutex; a process dying while holding it does not
// block others: the next locker repairs the ledger (see lockLedger). Reads are lock-free.
// Errors: create/open return a Status naming the path; the hot-path methods cannot fail.
class ShmRegion {
 public:
  // Creates (or atomically replaces) the region file at `path` and maps it. Used by the agent.
  static Result<ShmRegion> create(const std::string& path, const RegionConfig& config);
  // Maps an existing region; fails on a bad magic, version or size.
  static Result<ShmRegion> open(const std::string& path);

  ShmRegion(ShmRegion&& other) noexcept;
  ShmRegion& operator=(ShmRegion&& other) noexcept;
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;
  ~ShmRegion();

  ShmHeader* header() const { return header_; }

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
  std::uint64_t quotaBytes() const { return header_->quota_bytes.load(std::memory_order_relaxed); }

  // Test hook: takes the ledger lock and never releases it (the caller then dies).
  void lockLedgerForTest();

 private:
  explicit ShmRegion(ShmHeader* header) : header_(header) {}
  void lockLedger();
  void unlockLedger();
  int reapLocked();
  void recomputeTotalLocked();

  ShmHeader* header_ = nullptr;
};

// Reads the start time of `pid` from /proc (0 when it does not exist or is a zombie).
std::uint64_t processStartTime(std::int32_t pid);
// True when `pid` with start time `start_time` is still running (a reused pid is not).
bool processAlive(std::int32_t pid, std::uint64_t start_time);

}  // namespace gpool::vgpu
