#include "vgpu/shm_region.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

namespace gpool::vgpu {
namespace {

constexpr std::size_t kRegionSize = sizeof(ShmHeader);
constexpr std::size_t kLimitsSize = sizeof(ShmLimits);

Status errnoStatus(const std::string& what, const std::string& path) {
  return Status::ioError(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

std::uint64_t processStartTime(std::int32_t pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  // The command name may contain spaces and parentheses: fields resume after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr || p[1] == '\0') return 0;
  p += 2;
  const char state = *p;
  if (state == 'Z' || state == 'X') return 0;
  // Field 3 is the state; field 22 is starttime: skip 19 more fields.
  int field = 3;
  while (*p != '\0' && field < 22) {
    if (*p == ' ') ++field;
    ++p;
  }
  unsigned long long start = 0;
  if (std::sscanf(p, "%llu", &start) != 1) return 0;
  return start == 0 ? 1 : start;
}

bool processAlive(std::int32_t pid, std::uint64_t start_time) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  const std::uint64_t now_start = processStartTime(pid);
  if (now_start == 0) return false;
  return start_time == 0 || now_start == start_time;
}

namespace {

// Creates `size` zeroed bytes under a temporary name next to `path`, owned by `uid`:`gid` (-1:
// the caller's) with `mode`, and maps them read-write. *tmp receives the temporary name; the
// caller renames it into place once initialised, so no reader ever maps a half-written part.
Result<void*> createPart(const std::string& path, std::size_t size, mode_t mode, std::int64_t uid,
                         std::int64_t gid, std::string* tmp) {
  *tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp->c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return errnoStatus("cannot create region", *tmp);
  auto fail = [&](const std::string& what) {
    Status s = errnoStatus(what, *tmp);
    ::close(fd);
    ::unlink(tmp->c_str());
    return s;
  };
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return fail("cannot size region");
  if ((uid >= 0 || gid >= 0) &&
      ::fchown(fd, static_cast<uid_t>(uid), static_cast<gid_t>(gid)) != 0) {
    return fail("cannot give the region to uid " + std::to_string(uid) + ":");
  }
  if (::fchmod(fd, mode) != 0) return fail("cannot set the mode of region");
  void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (mem == MAP_FAILED) return fail("cannot map region");
  ::close(fd);
  std::memset(mem, 0, size);
  return mem;
}

// Opens and maps one part of an existing region: read-only or read-write.
Result<void*> openPart(const std::string& path, std::size_t size, bool writable) {
  int fd = ::open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return errnoStatus("cannot open region", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) < size) {
    ::close(fd);
    return Status::failedPrecondition("region " + path + " is too small for layout version " +
                                      std::to_string(kShmVersion));
  }
  void* mem =
      ::mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (mem == MAP_FAILED) return errnoStatus("cannot map region", path);
  return mem;
}

}  // namespace

Result<ShmRegion> ShmRegion::create(const std::string& path, const RegionConfig& config) {
  if (config.share_permille == 0 || config.share_permille > 1000) {
    return Status::invalidArgument("share_permille must be in 1..1000 for region " + path);
  }
  if (config.device_uuid.size() >= kShmUuidLen) {
    return Status::invalidArgument("device uuid too long for region " + path);
  }
  const std::string usage_path = usagePath(path);
  const std::string limits_path = limitsPath(path);

  // The usage part: the task's user maps it read-write, nobody else may open it.
  std::string usage_tmp;
  Result<void*> usage_mem =
      createPart(usage_path, kRegionSize, 0600, config.usage_uid, config.usage_gid, &usage_tmp);
  if (!usage_mem.ok()) return usage_mem.status();
  auto* h = new (*usage_mem) ShmHeader;
  h->version = kShmVersion;
  h->header_size = static_cast<std::uint32_t>(sizeof(ShmHeader));
  h->slot_count = kShmMaxSlots;
  h->allowed_permille.store(config.share_permille);
  h->cost_ns.store(100000);  // 100 us per launch until measured
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&h->lock, &attr);
  pthread_mutexattr_destroy(&attr);
  // The magic goes last: open() rejects a part whose magic is missing.
  std::atomic_thread_fence(std::memory_order_release);
  h->magic = kShmMagic;

  // The limits part: the creator's file, readable by whoever reaches the directory (the agent
  // puts it in a directory only the task's user can enter) and writable by nobody else.
  std::string limits_tmp;
  Result<void*> limits_mem = createPart(limits_path, kLimitsSize, 0444, -1, -1, &limits_tmp);
  if (!limits_mem.ok()) {
    ::munmap(h, kRegionSize);
    ::unlink(usage_tmp.c_str());
    return limits_mem.status();
  }
  auto* l = new (*limits_mem) ShmLimits;
  l->version = kShmVersion;
  l->header_size = static_cast<std::uint32_t>(sizeof(ShmLimits));
  l->device_index = config.device_index;
  std::memcpy(l->device_uuid, config.device_uuid.data(), config.device_uuid.size());
  l->quota_bytes.store(config.quota_bytes);
  l->context_bytes.store(config.context_bytes);
  l->share_permille.store(config.share_permille);
  l->policy.store(static_cast<std::uint32_t>(config.policy));
  l->control_period_us.store(config.control_period_us == 0 ? 100000 : config.control_period_us);
  std::atomic_thread_fence(std::memory_order_release);
  l->magic = kShmLimitsMagic;

  ShmRegion region(l, h);
  if (::rename(usage_tmp.c_str(), usage_path.c_str()) != 0) {
    Status s = errnoStatus("cannot move region into place at", usage_path);
    ::unlink(usage_tmp.c_str());
    ::unlink(limits_tmp.c_str());
    return s;
  }
  if (::rename(limits_tmp.c_str(), limits_path.c_str()) != 0) {
    Status s = errnoStatus("cannot move region into place at", limits_path);
    ::unlink(limits_tmp.c_str());
    ::unlink(usage_path.c_str());
    return s;
  }
  return region;
}

Result<ShmRegion> ShmRegion::open(const std::string& path) {
  const std::string limits_path = limitsPath(path);
  Result<void*> limits_mem = openPart(limits_path, kLimitsSize, /*writable=*/false);
  if (!limits_mem.ok()) return limits_mem.status();
  auto* l = static_cast<ShmLimits*>(*limits_mem);
  // From here on the region owns the mappings (and unmaps them on any error return).
  ShmRegion region(l, nullptr);
  if (l->magic != kShmLimitsMagic || l->version != kShmVersion ||
      l->header_size != sizeof(ShmLimits)) {
    return Status::failedPrecondition("region " + limits_path + " has an unknown magic or version");
  }
  const std::string usage_path = usagePath(path);
  Result<void*> usage_mem = openPart(usage_path, kRegionSize, /*writable=*/true);
  if (!usage_mem.ok()) return usage_mem.status();
  region.header_ = static_cast<ShmHeader*>(*usage_mem);
  const ShmHeader* h = region.header_;
  if (h->magic != kShmMagic || h->version != kShmVersion || h->header_size != sizeof(ShmHeader)) {
    return Status::failedPrecondition("region " + usage_path + " has an unknown magic or version");
  }
  return region;
}

void ShmRegion::remove(const std::string& path) {
  ::unlink(limitsPath(path).c_str());
  ::unlink(usagePath(path).c_str());
}

ShmRegion::ShmRegion(ShmRegion&& other) noexcept : limits_(other.limits_), header_(other.header_) {
  other.limits_ = nullptr;
  other.header_ = nullptr;
}

ShmRegion& ShmRegion::operator=(ShmRegion&& other) noexcept {
  if (this != &other) {
    unmap();
    limits_ = other.limits_;
    header_ = other.header_;
    other.limits_ = nullptr;
    other.header_ = nullptr;
  }
  return *this;
}

ShmRegion::~ShmRegion() {
  unmap();
}

void ShmRegion::unmap() {
  if (limits_ != nullptr) ::munmap(limits_, kLimitsSize);
  if (header_ != nullptr) ::munmap(header_, kRegionSize);
  limits_ = nullptr;
  header_ = nullptr;
}

void ShmRegion::lockLedger() {
  int rc = pthread_mutex_lock(&header_->lock);
  if (rc == EOWNERDEAD) {
    // The previous holder died inside a ledger update. Its slot may be half-updated but every
    // counter is a single store, so the slots are each consistent: reclaim dead slots and
    // recompute the cached total from them.
    reapLocked();
    recomputeTotalLocked();
    pthread_mutex_consistent(&header_->lock);
  }
}

void ShmRegion::unlockLedger() {
  pthread_mutex_unlock(&header_->lock);
}

void ShmRegion::lockLedgerForTest() {
  lockLedger();
}

void ShmRegion::recomputeTotalLocked() {
  std::uint64_t total = 0;
  for (const ShmSlot& s : header_->slots) {
    if (s.pid.load(std::memory_order_relaxed) == 0) continue;
    total += s.used_bytes.load(std::memory_order_relaxed) +
             s.untracked_bytes.load(std::memory_order_relaxed);
  }
  header_->total_bytes.store(total, std::memory_order_release);
}

int ShmRegion::reapLocked() {
  int reaped = 0;
  for (ShmSlot& s : header_->slots) {
    const std::int32_t pid = s.pid.load(std::memory_order_relaxed);
    if (pid == 0 || processAlive(pid, s.start_time.load(std::memory_order_relaxed))) continue;
    const std::uint64_t held = s.used_bytes.load(std::memory_order_relaxed) +
                               s.untracked_bytes.load(std::memory_order_relaxed);
    const std::uint64_t total = header_->total_bytes.load(std::memory_order_relaxed);
    header_->total_bytes.store(total >= held ? total - held : 0, std::memory_order_release);
    s.used_bytes.store(0, std::memory_order_relaxed);
    s.untracked_bytes.store(0, std::memory_order_relaxed);
    s.driver_bytes.store(0, std::memory_order_relaxed);
    s.launches.store(0, std::memory_order_relaxed);
    s.pid.store(0, std::memory_order_release);
    ++reaped;
  }
  if (reaped > 0) header_->reaped_count.fetch_add(reaped, std::memory_order_relaxed);
  return reaped;
}

int ShmRegion::reapDead() {
  lockLedger();
  int n = reapLocked();
  unlockLedger();
  return n;
}

int ShmRegion::attach(std::int32_t pid) {
  const std::uint64_t start = processStartTime(pid);
  lockLedger();
  int found = -1;
  for (int pass = 0; pass < 2 && found < 0; ++pass) {
    if (pass == 1) reapLocked();
    for (int i = 0; i < kShmMaxSlots; ++i) {
      ShmSlot& s = header_->slots[i];
      if (s.pid.load(std::memory_order_relaxed) != 0) continue;
      s.used_bytes.store(0, std::memory_order_relaxed);
      s.untracked_bytes.store(0, std::memory_order_relaxed);
      s.driver_bytes.store(0, std::memory_order_relaxed);
      s.launches.store(0, std::memory_order_relaxed);
      s.start_time.store(start, std::memory_order_relaxed);
      s.host_pid.store(pid, std::memory_order_relaxed);
      s.pid.store(pid, std::memory_order_release);
      found = i;
      break;
    }
  }
  unlockLedger();
  return found;
}

void ShmRegion::detach(int slot) {
  if (slot < 0 || slot >= kShmMaxSlots) return;
  lockLedger();
  ShmSlot& s = header_->slots[slot];
  const std::uint64_t held = s.used_bytes.load(std::memory_order_relaxed) +
                             s.untracked_bytes.load(std::memory_order_relaxed);
  const std::uint64_t total = header_->total_bytes.load(std::memory_order_relaxed);
  header_->total_bytes.store(total >= held ? total - held : 0, std::memory_order_release);
  s.used_bytes.store(0, std::memory_order_relaxed);
  s.untracked_bytes.store(0, std::memory_order_relaxed);
  s.pid.store(0, std::memory_order_release);
  unlockLedger();
}

bool ShmRegion::reserve(int slot, std::uint64_t bytes) {
  if (slot < 0 || slot >= kShmMaxSlots) return false;
  if (bytes == 0) return true;
  ShmSlot& s = header_->slots[slot];
  lockLedger();
  bool ok = false;
  for (int pass = 0; pass < 2 && !ok; ++pass) {
    if (pass == 1 && reapLocked() == 0) break;
    const std::uint64_t quota = limits_->quota_bytes.load(std::memory_order_relaxed);
    const std::uint64_t total = header_->total_bytes.load(std::memory_order_relaxed);
    if (total <= quota && bytes <= quota - total) {
      s.used_bytes.store(s.used_bytes.load(std::memory_order_relaxed) + bytes,
                         std::memory_order_relaxed);
      header_->total_bytes.store(total + bytes, std::memory_order_release);
      if (total + bytes > header_->peak_bytes.load(std::memory_order_relaxed)) {
        header_->peak_bytes.store(total + bytes, std::memory_order_relaxed);
      }
      ok = true;
    }
  }
  if (!ok) header_->oom_count.fetch_add(1, std::memory_order_relaxed);
  unlockLedger();
  return ok;
}

void ShmRegion::forceReserve(int slot, std::uint64_t bytes) {
  if (slot < 0 || slot >= kShmMaxSlots || bytes == 0) return;
  ShmSlot& s = header_->slots[slot];
  lockLedger();
  s.used_bytes.store(s.used_bytes.load(std::memory_order_relaxed) + bytes,
                     std::memory_order_relaxed);
  const std::uint64_t total = header_->total_bytes.load(std::memory_order_relaxed) + bytes;
  header_->total_bytes.store(total, std::memory_order_release);
  if (total > header_->peak_bytes.load(std::memory_order_relaxed)) {
    header_->peak_bytes.store(total, std::memory_order_relaxed);
  }
  unlockLedger();
}

void ShmRegion::release(int slot, std::uint64_t bytes) {
  if (slot < 0 || slot >= kShmMaxSlots || bytes == 0) return;
  ShmSlot& s = header_->slots[slot];
  lockLedger();
  const std::uint64_t held = s.used_bytes.load(std::memory_order_relaxed);
  const std::uint64_t give = bytes <= held ? bytes : held;
  s.used_bytes.store(held - give, std::memory_order_relaxed);
  const std::uint64_t total = header_->total_bytes.load(std::memory_order_relaxed);
  header_->total_bytes.store(total >= give ? total - give : 0, std::memory_order_release);
  unlockLedger();
}

void ShmRegion::reconcile(int slot, std::uint64_t driver_bytes) {
  if (slot < 0 || slot >= kShmMaxSlots) return;
  ShmSlot& s = header_->slots[slot];
  lockLedger();
  // Charge only an excess seen in two consecutive observations: NVML's snapshot and the ledger
  // are not taken at the same instant, and a free between them must not read as untracked
  // memory (a phantom OOM).
  const std::uint64_t previous = s.driver_bytes.load(std::memory_order_relaxed);
  s.driver_bytes.store(driver_bytes, std::memory_order_relaxed);
  const std::uint64_t used = s.used_bytes.load(std::memory_order_relaxed);
  const std::uint64_t excess_now = driver_bytes > used ? driver_bytes - used : 0;
  const std::uint64_t excess_before = previous > used ? previous - used : 0;
  const std::uint64_t untracked = std::min(excess_now, excess_before);
  const std::uint64_t old = s.untracked_bytes.load(std::memory_order_relaxed);
  s.untracked_bytes.store(untracked, std::memory_order_relaxed);
  const std::uint64_t total = header_->total_bytes.load(std::memory_order_relaxed);
  const std::uint64_t next = total - (old <= total ? old : total) + untracked;
  header_->total_bytes.store(next, std::memory_order_release);
  unlockLedger();
}

}  // namespace gpool::vgpu
