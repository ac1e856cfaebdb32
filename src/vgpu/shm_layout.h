#pragma once

// The shared-memory region one task has on one GPU: the binary layout, version 2. A region is two
// files the agent creates (ShmRegion::create): the limits part (ShmLimits), which only the agent
// writes and the task maps read-only, and the usage part (ShmHeader), which every process of the
// task maps read-write. docs/vgpu-shm.md documents every field and who may write it; changing
// either part's layout means bumping kShmVersion. Plain data only: no pointers, no CUDA types,
// identical in every process that maps it.

#include <pthread.h>

#include <atomic>
#include <cstdint>

namespace gpool::vgpu {

inline constexpr std::uint64_t kShmMagic = 0x3230555047565047ULL;        // "GPVGPU02" in memory
inline constexpr std::uint64_t kShmLimitsMagic = 0x32304d4c47565047ULL;  // "GPVGLM02" in memory
inline constexpr std::uint32_t kShmVersion = 2;
inline constexpr int kShmMaxSlots = 128;
inline constexpr int kShmUuidLen = 96;

enum class SharePolicy : std::uint32_t {
  kWorkConserving = 0,  // may use compute other tasks leave idle
  kStrict = 1,          // held to its share even when the GPU is idle
};

// One process of the task. A slot is owned by `pid` from attach until it exits (or is reaped
// after dying). Byte counters change only under ShmHeader::lock, so that a reaper holding the
// lock sees a consistent picture even when the owner died mid-update.
struct alignas(64) ShmSlot {
  std::atomic<std::int32_t> pid;               // 0 = free
  std::atomic<std::int32_t> host_pid;          // pid as NVML sees it; the agent may overwrite
  std::atomic<std::uint64_t> start_time;       // /proc/<pid>/stat start time: detects pid reuse
  std::atomic<std::uint64_t> used_bytes;       // ledger: bytes this process reserved
  std::atomic<std::uint64_t> driver_bytes;     // last per-process usage reported by NVML
  std::atomic<std::uint64_t> untracked_bytes;  // max(0, driver - used): memory that bypassed us
  std::atomic<std::uint64_t> launches;         // kernel and graph launches by this process
};

// The limits part: what the agent decided for the task. Its file belongs to the agent's user and
// is read-only for everyone else, so no process of the task can change its own quota (the
// interposer maps it PROT_READ from a read-only descriptor).
struct ShmLimits {
  // Identity, written once by create.
  std::uint64_t magic;  // kShmLimitsMagic
  std::uint32_t version;
  std::uint32_t header_size;   // sizeof(ShmLimits) of the writer
  std::uint32_t device_index;  // CUDA ordinal this region governs (informational)
  std::uint32_t reserved0;
  char device_uuid[kShmUuidLen];  // "GPU-..." as NVML prints it; empty = match by index

  // Policy: the agent may change these at any time; readers load them relaxed.
  std::atomic<std::uint64_t> quota_bytes;
  std::atomic<std::uint64_t> context_bytes;   // charged once per process for its context
  std::atomic<std::uint32_t> share_permille;  // compute share, 1..1000
  std::atomic<std::uint32_t> policy;          // SharePolicy
  std::atomic<std::uint32_t> control_period_us;
  std::atomic<std::uint32_t> reserved1;
};

// The usage part: what the task's processes share among themselves (ledger, limiter state, one
// slot per process). Its file belongs to the task's user; every process of the task writes it,
// so readers assume nothing of its contents beyond the identity open() checks.
struct ShmHeader {
  // Identity, written once by create.
  std::uint64_t magic;  // kShmMagic
  std::uint32_t version;
  std::uint32_t header_size;  // sizeof(ShmHeader) of the writer
  std::uint32_t slot_count;
  std::uint32_t reserved0;

  // Memory ledger. `lock` is a process-shared robust mutex: a holder that dies leaves it in
  // EOWNERDEAD state and the next locker recomputes total_bytes from the slots.
  pthread_mutex_t lock;
  std::atomic<std::uint64_t> total_bytes;  // == sum(slot.used + slot.untracked); lock-free reads
  std::atomic<std::uint64_t> peak_bytes;
  std::atomic<std::uint64_t> oom_count;
  std::atomic<std::uint64_t> reaped_count;

  // Compute limiter (see docs/vgpu.md, "control loop").
  alignas(64) std::atomic<std::int64_t> tokens_ns;      // budget of GPU busy time; < 0 = throttle
  alignas(64) std::atomic<std::int64_t> cost_ns;        // estimated busy time per launch
  std::atomic<std::uint32_t> allowed_permille;          // current cap set by the controller
  std::atomic<std::uint32_t> measured_permille;         // task busy share, last period
  std::atomic<std::uint32_t> device_permille;           // whole-GPU busy share, last period
  std::atomic<std::int32_t> controller_pid;             // process running the control loop
  std::atomic<std::int64_t> controller_lease_until_us;  // CLOCK_MONOTONIC microseconds
  std::atomic<std::uint64_t> launches_total;
  std::atomic<std::uint64_t> throttled_us_total;

  ShmSlot slots[kShmMaxSlots];
};

static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::int64_t>::is_always_lock_free);

}  // namespace gpool::vgpu
