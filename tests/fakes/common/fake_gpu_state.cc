#include "fakes/common/fake_gpu_state.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

namespace gpool::fakes {
namespace {

constexpr std::uint64_t kFakeMagic = 0x4554415453454b46ULL;  // "FKSTATE" + version byte

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "gpool fake GPU: %s\n", msg.c_str());
  std::abort();
}

void copyString(char* dst, std::size_t cap, const std::string& src) {
  std::snprintf(dst, cap, "%s", src.c_str());
}

void setDefaults(FakeDeviceInfo* d, int index) {
  copyString(d->name, sizeof(d->name), "gpool simulated GPU");
  char uuid[96];
  std::snprintf(uuid, sizeof(uuid), "GPU-5ad0c0de-0000-4000-8000-%012d", index);
  copyString(d->uuid, sizeof(d->uuid), uuid);
  char bus[32];
  std::snprintf(bus, sizeof(bus), "00000000:%02x:00.0", index + 1);
  copyString(d->pci_bus_id, sizeof(d->pci_bus_id), bus);
  copyString(d->serial, sizeof(d->serial), "SIM" + std::to_string(1000 + index));
  const char* mib = std::getenv("GPOOL_FAKE_GPU_MEMORY_MIB");
  d->memory_bytes = (mib != nullptr ? std::strtoull(mib, nullptr, 10) : 16384ULL) << 20;
  const char* ctx = std::getenv("GPOOL_FAKE_GPU_CONTEXT_MIB");
  d->context_bytes = (ctx != nullptr ? std::strtoull(ctx, nullptr, 10) : 64ULL) << 20;
  d->sm_count = 108;
  d->cc_major = 8;
  d->cc_minor = 0;
  d->temperature_c = 40;
  d->power_mw = 60000;
  d->power_limit_mw = 300000;
  d->sm_clock_mhz = 1410;
  d->mem_clock_mhz = 1215;
}

void loadFixture(FakeState* s) {
  s->version = kFakeStateVersion;
  s->device_count = 1;
  copyString(s->driver_version, sizeof(s->driver_version), "580.65.06");
  s->cuda_driver_version = 13000;
  if (const char* n = std::getenv("GPOOL_FAKE_GPU_COUNT")) {
    s->device_count = static_cast<std::uint32_t>(std::clamp(std::atoi(n), 0, kFakeMaxDevices));
  }
  for (int i = 0; i < kFakeMaxDevices; ++i)
    setDefaults(&s->devices[i], i);
  const char* path = std::getenv("GPOOL_FAKE_GPU_FIXTURE");
  if (path == nullptr || *path == '\0') return;
  std::ifstream in(path);
  if (!in) die(std::string("cannot read fixture ") + path);
  try {
    nlohmann::json j = nlohmann::json::parse(in);
    copyString(s->driver_version, sizeof(s->driver_version),
               j.value("driver_version", std::string(s->driver_version)));
    s->cuda_driver_version = j.value("cuda_driver_version", s->cuda_driver_version);
    if (j.contains("devices")) {
      const auto& devs = j.at("devices");
      s->device_count = static_cast<std::uint32_t>(
          std::min<std::size_t>(devs.size(), static_cast<std::size_t>(kFakeMaxDevices)));
      for (std::uint32_t i = 0; i < s->device_count; ++i) {
        const auto& jd = devs.at(i);
        FakeDeviceInfo* d = &s->devices[i];
        std::string name = jd.value("name", std::string(d->name));
        if (name.find("simulated") == std::string::npos) name += " (simulated)";
        copyString(d->name, sizeof(d->name), name);
        copyString(d->uuid, sizeof(d->uuid), jd.value("uuid", std::string(d->uuid)));
        copyString(d->pci_bus_id, sizeof(d->pci_bus_id),
                   jd.value("pci_bus_id", std::string(d->pci_bus_id)));
        copyString(d->serial, sizeof(d->serial), jd.value("serial", std::string(d->serial)));
        d->memory_bytes = jd.value("memory_mib", d->memory_bytes >> 20) << 20;
        d->context_bytes = jd.value("context_mib", d->context_bytes >> 20) << 20;
        d->sm_count = jd.value("sm_count", d->sm_count);
        d->cc_major = jd.value("cc_major", d->cc_major);
        d->cc_minor = jd.value("cc_minor", d->cc_minor);
        d->temperature_c = jd.value("temperature_c", d->temperature_c);
        d->power_mw = jd.value("power_mw", d->power_mw);
        d->power_limit_mw = jd.value("power_limit_mw", d->power_limit_mw);
        d->sm_clock_mhz = jd.value("sm_clock_mhz", d->sm_clock_mhz);
        d->mem_clock_mhz = jd.value("mem_clock_mhz", d->mem_clock_mhz);
        d->mig_mode = jd.value("mig_mode", d->mig_mode);
        d->ecc_enabled = jd.value("ecc_enabled", d->ecc_enabled);
      }
    }
  } catch (const std::exception& e) {
    die(std::string("bad fixture ") + path + ": " + e.what());
  }
}

void initLock(FakeState* s) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&s->lock, &attr);
  pthread_mutexattr_destroy(&attr);
}

FakeState* mapState() {
  const char* path = std::getenv("GPOOL_FAKE_GPU_STATE");
  if (path == nullptr || *path == '\0') {
    void* mem = ::mmap(nullptr, sizeof(FakeState), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) die("cannot map private state");
    auto* s = new (mem) FakeState;
    loadFixture(s);
    initLock(s);
    s->magic = kFakeMagic;
    return s;
  }
  int fd = ::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) die(std::string("cannot open state file ") + path + ": " + std::strerror(errno));
  ::flock(fd, LOCK_EX);  // serialises initialisation between processes
  struct stat st {};
  ::fstat(fd, &st);
  if (static_cast<std::size_t>(st.st_size) < sizeof(FakeState) &&
      ::ftruncate(fd, sizeof(FakeState)) != 0) {
    die(std::string("cannot size state file ") + path);
  }
  void* mem = ::mmap(nullptr, sizeof(FakeState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) die(std::string("cannot map state file ") + path);
  auto* s = static_cast<FakeState*>(mem);
  if (s->magic != kFakeMagic) {
    std::memset(mem, 0, sizeof(FakeState));
    loadFixture(s);
    initLock(s);
    s->magic = kFakeMagic;
  } else if (s->version != kFakeStateVersion) {
    die(std::string("state file ") + path + " has another version");
  }
  ::flock(fd, LOCK_UN);
  ::close(fd);
  return s;
}

}  // namespace

FakeState* fakeState() {
  static FakeState* state = mapState();
  return state;
}

std::int64_t fakeNowUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

FakeLock::FakeLock() {
  FakeState* s = fakeState();
  if (pthread_mutex_lock(&s->lock) == EOWNERDEAD) pthread_mutex_consistent(&s->lock);
}

FakeLock::~FakeLock() {
  pthread_mutex_unlock(&fakeState()->lock);
}

FakeProc* fakeProc(int device, std::int32_t pid) {
  FakeState* s = fakeState();
  // The last record found per device, checked before scanning (launches look it up every time).
  static thread_local FakeProc* last[kFakeMaxDevices] = {};
  if (FakeProc* p = last[device]; p != nullptr && p->pid == pid && p->device == device) return p;
  FakeProc* found = nullptr;
  for (FakeProc& p : s->procs) {
    if (p.pid == pid && p.device == device) {
      found = &p;
      break;
    }
  }
  if (found != nullptr) {
    last[device] = found;
    return found;
  }
  FakeProc* free_slot = nullptr;
  for (FakeProc& p : s->procs) {
    if (p.pid == pid && p.device == device) return &p;
    if (free_slot == nullptr && p.pid == 0) free_slot = &p;
  }
  if (free_slot == nullptr) {
    // Recycle the record of an exited process holding no memory.
    for (FakeProc& p : s->procs) {
      if (p.used_bytes == 0 && ::kill(p.pid, 0) != 0 && errno == ESRCH) {
        free_slot = &p;
        break;
      }
    }
  }
  if (free_slot == nullptr) return nullptr;
  *free_slot = FakeProc{};
  free_slot->pid = pid;
  free_slot->device = device;
  return free_slot;
}

void fakeReapDead() {
  FakeState* s = fakeState();
  for (FakeProc& p : s->procs) {
    if (p.pid == 0 || p.used_bytes == 0) continue;
    if (::kill(p.pid, 0) != 0 && errno == ESRCH) {
      FakeDeviceRuntime& rt = s->rt[p.device];
      rt.used_bytes -= std::min(rt.used_bytes, p.used_bytes);
      p.used_bytes = 0;
    }
  }
}

std::int64_t fakeScheduleKernel(int device, std::int32_t pid, std::int64_t duration_us,
                                std::int64_t not_before_us) {
  FakeDeviceRuntime& rt = fakeState()->rt[device];
  const std::int64_t start = std::max({fakeNowUs(), rt.free_at_us, not_before_us});
  const std::int64_t end = start + std::max<std::int64_t>(duration_us, 0);
  rt.free_at_us = end;
  rt.busy_us_total += static_cast<std::uint64_t>(end - start);
  FakeKernel& k = rt.ring[rt.kernel_seq % kFakeKernelRing];
  k.pid = pid;
  k.start_us = start;
  k.end_us = end;
  ++rt.kernel_seq;
  if (FakeProc* p = fakeProc(device, pid)) {
    p->busy_us += static_cast<std::uint64_t>(end - start);
    ++p->launches;
  }
  return end;
}

std::int64_t fakeBusyInWindow(int device, std::int32_t pid, std::int64_t t0, std::int64_t t1) {
  const FakeDeviceRuntime& rt = fakeState()->rt[device];
  const std::uint64_t n = std::min<std::uint64_t>(rt.kernel_seq, kFakeKernelRing);
  std::int64_t busy = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const FakeKernel& k = rt.ring[(rt.kernel_seq - 1 - i) % kFakeKernelRing];
    if (k.end_us <= t0 && k.start_us < t0) {
      // Kernels are in start order, so earlier entries ended even earlier: stop scanning.
      break;
    }
    if (pid != 0 && k.pid != pid) continue;
    const std::int64_t a = std::max(k.start_us, t0);
    const std::int64_t b = std::min(k.end_us, t1);
    if (b > a) busy += b - a;
  }
  return busy;
}

}  // namespace gpool::fakes
