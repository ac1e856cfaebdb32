// A fake libnvidia-ml.so.1 over the simulated GPUs of fakes/common/fake_gpu_state.h: inventory
// from the fixture, memory and per-process memory from the fake libcuda's allocations,
// utilisation from its kernels' busy time. Every device name says "simulated".
//
// Extending: add an `extern "C"` function below using deviceAt() and the FakeState fields; keep
// NVML's return codes (NVML_ERROR_UNINITIALIZED before nvmlInit, INVALID_ARGUMENT on nulls,
// INSUFFICIENT_SIZE with the needed count for arrays).

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "fakes/common/fake_gpu_state.h"
#include "vgpu/nvml_abi.h"

using gpool::fakes::fakeBusyInWindow;
using gpool::fakes::FakeDeviceInfo;
using gpool::fakes::FakeLock;
using gpool::fakes::fakeNowUs;
using gpool::fakes::FakeState;
using gpool::fakes::fakeState;

namespace {

std::atomic<int> g_init_count{0};

// Handles are pointers into this process's mapping of the state.
int indexOf(nvmlDevice_t device) {
  FakeState* s = fakeState();
  auto* info = reinterpret_cast<FakeDeviceInfo*>(device);
  if (info < &s->devices[0] || info >= &s->devices[s->device_count]) return -1;
  return static_cast<int>(info - &s->devices[0]);
}

nvmlReturn_t check(nvmlDevice_t device, int* index) {
  if (g_init_count.load() <= 0) return NVML_ERROR_UNINITIALIZED;
  *index = indexOf(device);
  return *index < 0 ? NVML_ERROR_INVALID_ARGUMENT : NVML_SUCCESS;
}

nvmlReturn_t copyOut(const char* src, char* dst, unsigned int len) {
  if (dst == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (std::strlen(src) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(dst, src, std::strlen(src) + 1);
  return NVML_SUCCESS;
}

bool alive(int pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  fakeState();
  g_init_count.fetch_add(1);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlInit() {
  return nvmlInit_v2();
}
nvmlReturn_t nvmlInitWithFlags(unsigned int /*flags*/) {
  return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown() {
  int n = g_init_count.load();
  while (n > 0 && !g_init_count.compare_exchange_weak(n, n - 1)) {
  }
  return n > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  if (g_init_count.load() <= 0) return NVML_ERROR_UNINITIALIZED;
  return copyOut(fakeState()->driver_version, version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  if (version == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *version = fakeState()->cuda_driver_version;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  return nvmlSystemGetCudaDriverVersion(version);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (g_init_count.load() <= 0) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = fakeState()->device_count;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  return nvmlDeviceGetCount_v2(count);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (g_init_count.load() <= 0) return NVML_ERROR_UNINITIALIZED;
  FakeState* s = fakeState();
  if (device == nullptr || index >= s->device_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = reinterpret_cast<nvmlDevice_t>(&s->devices[index]);
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (g_init_count.load() <= 0) return NVML_ERROR_UNINITIALIZED;
  if (uuid == nullptr || device == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FakeState* s = fakeState();
  for (unsigned int i = 0; i < s->device_count; ++i) {
    if (std::strcmp(s->devices[i].uuid, uuid) == 0) {
      *device = reinterpret_cast<nvmlDevice_t>(&s->devices[i]);
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (index == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *index = static_cast<unsigned int>(i);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  return copyOut(fakeState()->devices[i].name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  return copyOut(fakeState()->devices[i].uuid, uuid, length);
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial, unsigned int length) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  return copyOut(fakeState()->devices[i].serial, serial, length);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FakeLock lock;
  gpool::fakes::fakeReapDead();
  FakeState* s = fakeState();
  memory->total = s->devices[i].memory_bytes;
  memory->used = std::min<unsigned long long>(s->rt[i].used_bytes, memory->total);
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != GPOOL_NVML_MEMORY_V2) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlMemory_t v1{};
  nvmlDeviceGetMemoryInfo(device, &v1);
  memory->total = v1.total;
  memory->reserved = 0;
  memory->used = v1.used;
  memory->free = v1.free;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* util) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (util == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // Like the real driver: the busy fraction over the last sample period (here 1 s).
  const std::int64_t now = fakeNowUs();
  FakeLock lock;
  const std::int64_t busy = fakeBusyInWindow(i, 0, now - 1000000, now);
  util->gpu = static_cast<unsigned int>(std::min<std::int64_t>(100, busy / 10000));
  util->memory = util->gpu / 2;
  return NVML_SUCCESS;
}

// Per-process SM utilisation over (lastSeenTimeStamp, now]; one sample per process that was busy.
// Timestamps are wall-clock microseconds as in NVML; lastSeenTimeStamp 0 means the last second.
// smUtil is a whole percentage, as in NVML.
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount,
                                             unsigned long long lastSeenTimeStamp) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const std::int64_t now = fakeNowUs();
  timespec wall{};
  ::clock_gettime(CLOCK_REALTIME, &wall);
  const std::int64_t wall_now =
      static_cast<std::int64_t>(wall.tv_sec) * 1000000 + wall.tv_nsec / 1000;
  std::int64_t since = now - (wall_now - static_cast<std::int64_t>(lastSeenTimeStamp));
  if (lastSeenTimeStamp == 0 || since >= now || since < now - 1000000) since = now - 1000000;
  FakeLock lock;
  FakeState* s = fakeState();
  unsigned int n = 0;
  for (const auto& p : s->procs) {
    if (p.pid == 0 || p.device != i) continue;
    const std::int64_t busy = fakeBusyInWindow(i, p.pid, since, now);
    if (busy <= 0) continue;
    if (utilization != nullptr && n < *processSamplesCount) {
      nvmlProcessUtilizationSample_t& out = utilization[n];
      out = {};
      out.pid = static_cast<unsigned int>(p.pid);
      out.timeStamp = static_cast<unsigned long long>(wall_now);
      out.smUtil = static_cast<unsigned int>(busy * 100 / (now - since));
    }
    ++n;
  }
  if (utilization == nullptr || n > *processSamplesCount) {
    *processSamplesCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  *processSamplesCount = n;
  return n == 0 ? NVML_ERROR_NOT_FOUND : NVML_SUCCESS;
}

static nvmlReturn_t runningProcesses(nvmlDevice_t device, unsigned int* count,
                                     nvmlProcessInfo_t* infos, nvmlProcessInfo_v1_t* infos_v1) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  FakeLock lock;
  FakeState* s = fakeState();
  unsigned int n = 0;
  const unsigned int cap = *count;
  for (const auto& p : s->procs) {
    if (p.pid == 0 || p.device != i || p.used_bytes == 0 || !alive(p.pid)) continue;
    if (n < cap) {
      if (infos != nullptr) {
        infos[n] = {};
        infos[n].pid = static_cast<unsigned int>(p.pid);
        infos[n].usedGpuMemory = p.used_bytes;
        infos[n].gpuInstanceId = 0xFFFFFFFFu;
        infos[n].computeInstanceId = 0xFFFFFFFFu;
      } else if (infos_v1 != nullptr) {
        infos_v1[n].pid = static_cast<unsigned int>(p.pid);
        infos_v1[n].usedGpuMemory = p.used_bytes;
      }
    }
    ++n;
  }
  *count = n;
  return n > cap ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return runningProcesses(device, count, infos, nullptr);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return runningProcesses(device, count, infos, nullptr);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                  nvmlProcessInfo_v1_t* infos) {
  return runningProcesses(device, count, nullptr, infos);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (major == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *major = fakeState()->devices[i].cc_major;
  *minor = fakeState()->devices[i].cc_minor;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int /*sensor*/, unsigned int* temp) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (temp == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *temp = static_cast<unsigned int>(fakeState()->devices[i].temperature_c);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power_mw) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (power_mw == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *power_mw = fakeState()->devices[i].power_mw;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* limit_mw) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (limit_mw == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *limit_mw = fakeState()->devices[i].power_limit_mw;
  return NVML_SUCCESS;
}

// type: 0 graphics, 1 SM, 2 memory, 3 video (NVML's nvmlClockType_t).
nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int* clock_mhz) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (clock_mhz == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const FakeDeviceInfo& d = fakeState()->devices[i];
  *clock_mhz = type == 2 ? d.mem_clock_mhz : d.sm_clock_mhz;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current,
                                  unsigned int* pending) {
  int i = 0;
  if (nvmlReturn_t rc = check(device, &i); rc != NVML_SUCCESS) return rc;
  if (current == nullptr || pending == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *current = static_cast<unsigned int>(fakeState()->devices[i].mig_mode);
  *pending = *current;
  return NVML_SUCCESS;
}

}  // extern "C"
