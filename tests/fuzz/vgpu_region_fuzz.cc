// Fuzz target: the interposer's shared region (src/vgpu, docs/vgpu-shm.md, layout version 2) as
// its readers meet it. A task's processes map the region's usage part read-write, so any of them
// can leave any bytes in it; the interposer of every other process of the task, and the agent,
// must still read it without crashing, overflowing or corrupting the ledger. The limits part is
// the agent's and read-only for the task, so it is not patched.
//
// The input is: a region configuration (what the agent creates), then byte patches written over
// the usage file (what a process of the task may scribble), then a sequence of operations that
// the interposer performs on the opened region: attach, reserve, release, force-reserve,
// reconcile, detach, reap, launch admission and the compute controller's step. The robust mutex
// of the ledger is left out of the patches: a process that can write the region can always hold
// or break that lock, which blocks its own task only (docs/vgpu-shm.md).
//
// Beyond "no crash, no undefined behaviour": open() refuses a region whose identity is wrong
// with FailedPrecondition; a successful reserve of some bytes never leaves the ledger's total
// above the quota; release never raises a slot's or the task's usage.

#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "fuzz/fuzz_util.h"
#include "vgpu/limiter.h"
#include "vgpu/shm_region.h"

namespace gpool::fuzz {
namespace {

using vgpu::ShmHeader;
using vgpu::ShmRegion;

constexpr std::size_t kLockBegin = offsetof(ShmHeader, lock);
constexpr std::size_t kLockEnd = kLockBegin + sizeof(pthread_mutex_t);

// A pid that no process has: pid_max is at most 2^22 on Linux.
constexpr std::int32_t kDeadPid = 0x7ffffff0;

void patch(const std::string& path, FuzzedDataProvider& in) {
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  if (f == nullptr) fail("cannot reopen the region file to patch it");
  const int patches = in.ConsumeIntegralInRange(0, 8);
  for (int i = 0; i < patches && in.remaining_bytes() > 0; ++i) {
    std::size_t offset = in.ConsumeIntegralInRange<std::size_t>(0, sizeof(ShmHeader) - 1);
    std::string bytes = in.ConsumeRandomLengthString(64);
    if (offset + bytes.size() > sizeof(ShmHeader)) bytes.resize(sizeof(ShmHeader) - offset);
    // Leave the mutex alone (see the top of the file).
    if (offset < kLockEnd && offset + bytes.size() > kLockBegin) continue;
    std::fseek(f, static_cast<long>(offset), SEEK_SET);
    std::fwrite(bytes.data(), 1, bytes.size(), f);
  }
  std::fclose(f);
}

void operate(ShmRegion& region, FuzzedDataProvider& in) {
  ShmHeader* h = region.header();
  vgpu::ControlState control;
  for (int step = 0; step < 64 && in.remaining_bytes() > 0; ++step) {
    const int slot = in.ConsumeIntegralInRange(-1, vgpu::kShmMaxSlots);
    const bool valid = slot >= 0 && slot < vgpu::kShmMaxSlots;
    switch (in.ConsumeIntegralInRange(0, 9)) {
      case 0:
        (void)region.attach(in.ConsumeBool() ? static_cast<std::int32_t>(::getpid()) : kDeadPid);
        break;
      case 1: {
        const std::uint64_t bytes = in.ConsumeIntegral<std::uint64_t>();
        // A reservation of 0 bytes is granted without looking at the ledger.
        if (region.reserve(slot, bytes) && bytes > 0 &&
            h->total_bytes.load() > region.quotaBytes()) {
          fail("reserve succeeded past the quota");
        }
        break;
      }
      case 2: {
        const std::uint64_t slot_before = valid ? h->slots[slot].used_bytes.load() : 0;
        const std::uint64_t total_before = h->total_bytes.load();
        region.release(slot, in.ConsumeIntegral<std::uint64_t>());
        if (valid && h->slots[slot].used_bytes.load() > slot_before) fail("release raised a slot");
        if (h->total_bytes.load() > total_before) fail("release raised the total");
        break;
      }
      case 3: region.forceReserve(slot, in.ConsumeIntegral<std::uint64_t>()); break;
      case 4: region.reconcile(slot, in.ConsumeIntegral<std::uint64_t>()); break;
      case 5: region.detach(slot); break;
      case 6: (void)region.reapDead(); break;
      case 7: (void)vgpu::tryAcquireLaunch(h); break;
      case 8: {
        // One period of the compute controller, with the region's policy as the interposer
        // reads it and a measurement from the input.
        vgpu::ControlInput c;
        const vgpu::ShmLimits* limits = region.limits();
        c.share_permille = limits->share_permille.load();
        c.policy = static_cast<vgpu::SharePolicy>(limits->policy.load());
        c.period_ns = static_cast<std::int64_t>(limits->control_period_us.load()) * 1000;
        c.task_util = in.ConsumeProbability<double>();
        c.device_util = in.ConsumeProbability<double>();
        c.launches = in.ConsumeIntegral<std::uint32_t>();
        vgpu::applyControl(h, vgpu::controlStep(c, &control));
        break;
      }
      case 9: (void)region.usedBytes(); break;
    }
  }
}

}  // namespace
}  // namespace gpool::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpool;
  using namespace gpool::fuzz;
  static const std::string path = scratchDir() + "/region";
  static const std::string usage_path = ShmRegion::usagePath(path);
  FuzzedDataProvider in(data, size);

  vgpu::RegionConfig config;
  config.quota_bytes = in.ConsumeIntegral<std::uint64_t>();
  config.share_permille = in.ConsumeIntegralInRange<std::uint32_t>(0, 1001);
  config.policy = static_cast<vgpu::SharePolicy>(in.ConsumeIntegralInRange(0, 1));
  config.context_bytes = in.ConsumeIntegral<std::uint64_t>();
  config.control_period_us = in.ConsumeIntegral<std::uint32_t>();
  config.device_index = in.ConsumeIntegralInRange<std::uint32_t>(0, 16);
  config.device_uuid = in.ConsumeRandomLengthString(vgpu::kShmUuidLen + 4);
  {
    Result<ShmRegion> created = ShmRegion::create(path, config);
    if (!created.ok()) {
      if (created.status().code() != StatusCode::kInvalidArgument) {
        fail("create failed with " + created.status().toString());
      }
      return 0;
    }
  }
  patch(usage_path, in);
  Result<ShmRegion> opened = ShmRegion::open(path);
  if (!opened.ok()) {
    if (opened.status().code() != StatusCode::kFailedPrecondition) {
      fail("open refused a region with " + opened.status().toString());
    }
    return 0;
  }
  operate(*opened, in);
  return 0;
}
