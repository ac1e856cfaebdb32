#pragma once

// State shared by the fake libcuda.so.1 and the fake libnvidia-ml.so.1: the simulated devices
// (inventory from a fixture file), their memory use and kernel busy time. Several processes share
// one state through a small mmap'd file named by GPOOL_FAKE_GPU_STATE; without it each process
// has a private state. The first process to map an empty file initialises it from the fixture
// (GPOOL_FAKE_GPU_FIXTURE, JSON; see fixture.example.json) or from defaults.
//
// Extending: add fields at the end of FakeDeviceInfo (inventory) and parse them in
// fake_gpu_state.cc (loadFixture); bump kFakeStateVersion. Both fakes pick them up.
//
// Thread/process safety: mutable fields change only under FakeLock (a robust process-shared
// mutex), so a test process killed mid-call does not wedge the others.

#include <pthread.h>

#include <cstdint>

namespace gpool::fakes {

inline constexpr int kFakeMaxDevices = 8;
inline constexpr int kFakeMaxProcs = 256;
inline constexpr int kFakeKernelRing = 8192;
inline constexpr std::uint32_t kFakeStateVersion = 1;

struct FakeDeviceInfo {
  char name[96];        // always contains "simulated"
  char uuid[96];        // "GPU-xxxxxxxx-xxxx-..."
  char pci_bus_id[32];  // "00000000:01:00.0"
  char serial[32];
  std::uint64_t memory_bytes;
  std::uint64_t context_bytes;  // device memory a context costs
  std::int32_t sm_count;
  std::int32_t cc_major;
  std::int32_t cc_minor;
  std::int32_t temperature_c;
  std::uint32_t power_mw;
  std::uint32_t power_limit_mw;
  std::uint32_t sm_clock_mhz;
  std::uint32_t mem_clock_mhz;
  std::int32_t mig_mode;  // 0 disabled, 1 enabled
  std::int32_t ecc_enabled;
  std::uint32_t reserved[32];
};

struct FakeKernel {
  std::int32_t pid;
  std::int32_t pad;
  std::int64_t start_us;
  std::int64_t end_us;
};

struct FakeDeviceRuntime {
  std::uint64_t used_bytes;
  std::int64_t free_at_us;  // when the GPU finishes all queued work
  std::uint64_t busy_us_total;
  std::uint64_t kernel_seq;  // kernels ever scheduled; ring index = seq % kFakeKernelRing
  FakeKernel ring[kFakeKernelRing];
};

struct FakeProc {
  std::int32_t pid;
  std::int32_t device;
  std::uint64_t used_bytes;
  std::uint64_t busy_us;
  std::uint64_t launches;
};

struct FakeState {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t device_count;
  char driver_version[32];           // NVML's "580.00.00"-style string
  std::int32_t cuda_driver_version;  // cuDriverGetVersion, e.g. 13000
  std::int32_t reserved0;
  pthread_mutex_t lock;
  FakeDeviceInfo devices[kFakeMaxDevices];
  FakeDeviceRuntime rt[kFakeMaxDevices];
  FakeProc procs[kFakeMaxProcs];
};

// Maps the state on first use (thread-safe). Never null; aborts with a message on a bad file.
FakeState* fakeState();

// CLOCK_MONOTONIC in microseconds (shared by all processes on the machine).
std::int64_t fakeNowUs();

class FakeLock {
 public:
  FakeLock();
  ~FakeLock();
  FakeLock(const FakeLock&) = delete;
  FakeLock& operator=(const FakeLock&) = delete;
};

// The following REQUIRE a FakeLock to be held.
// Per-(pid, device) record, created on demand; null when the table is full.
FakeProc* fakeProc(int device, std::int32_t pid);
// Schedules a kernel of `duration_us` on `device` after all queued work (the GPU runs one
// kernel at a time, from any process: busy time is shared) and returns its end time.
std::int64_t fakeScheduleKernel(int device, std::int32_t pid, std::int64_t duration_us,
                                std::int64_t not_before_us);
// Returns the memory of exited processes to their devices (the real driver frees it at exit).
void fakeReapDead();
// Busy microseconds of `pid` (0 = every process) on `device` within [t0, t1).
std::int64_t fakeBusyInWindow(int device, std::int32_t pid, std::int64_t t0, std::int64_t t1);

}  // namespace gpool::fakes
