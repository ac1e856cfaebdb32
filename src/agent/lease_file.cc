#include "agent/lease_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>

#include "agent/sys_util.h"

namespace gpool::agent {

// The file's layout: one page, of which this is the start. The values are lock-free atomics,
// which are address-free, so processes sharing the page see each other's stores.
struct LeaseFile::Record {
  uint64_t magic;
  std::atomic<int64_t> expires_boot_us;
  std::atomic<int64_t> fence_grace_ms;
};

namespace {

constexpr uint64_t kMagic = 0x3145534145'4c5047ULL;  // "GPLEASE1", little-endian
constexpr size_t kFileSize = 4096;
static_assert(std::atomic<int64_t>::is_always_lock_free);
static_assert(sizeof(LeaseFile::Terms) <= kFileSize);

}  // namespace

int64_t bootTimeMicros() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

Result<LeaseFile> LeaseFile::create(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return errnoStatus("cannot create the lease file", path, errno);
  struct stat st {};
  bool fresh = ::fstat(fd, &st) != 0 || st.st_size != static_cast<off_t>(kFileSize);
  // Real blocks, not a sparse file: later stores through the mapping need no disk space.
  if (int err = ::posix_fallocate(fd, 0, kFileSize); err != 0) {
    ::close(fd);
    return errnoStatus("cannot allocate the lease file", path, err);
  }
  void* map = ::mmap(nullptr, kFileSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return errnoStatus("cannot map the lease file", path, err);
  auto* record = static_cast<Record*>(map);
  if (fresh || record->magic != kMagic) {
    record->expires_boot_us.store(0);
    record->fence_grace_ms.store(0);
    record->magic = kMagic;
    ::msync(map, kFileSize, MS_SYNC);
  }
  return LeaseFile(path, record);
}

Result<LeaseFile> LeaseFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return Status::notFound("no lease file " + path);
    return errnoStatus("cannot open the lease file", path, err);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size != static_cast<off_t>(kFileSize)) {
    ::close(fd);
    return Status::ioError(path + " is not a lease file (size " + std::to_string(st.st_size) +
                           ", expected " + std::to_string(kFileSize) + ")");
  }
  void* map = ::mmap(nullptr, kFileSize, PROT_READ, MAP_SHARED, fd, 0);
  int err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return errnoStatus("cannot map the lease file", path, err);
  auto* record = static_cast<Record*>(map);
  if (record->magic != kMagic) {
    ::munmap(map, kFileSize);
    return Status::ioError(path + " is not a lease file (bad magic)");
  }
  return LeaseFile(path, record);
}

LeaseFile::LeaseFile(LeaseFile&& other) noexcept
    : path_(std::move(other.path_)), record_(std::exchange(other.record_, nullptr)) {}

LeaseFile& LeaseFile::operator=(LeaseFile&& other) noexcept {
  if (this != &other) {
    if (record_ != nullptr) ::munmap(record_, kFileSize);
    path_ = std::move(other.path_);
    record_ = std::exchange(other.record_, nullptr);
  }
  return *this;
}

LeaseFile::~LeaseFile() {
  if (record_ != nullptr) ::munmap(record_, kFileSize);
}

void LeaseFile::renew(const Terms& terms) {
  // The grace first: a reader that sees the new end sees a grace at least as new.
  record_->fence_grace_ms.store(terms.fence_grace_ms);
  record_->expires_boot_us.store(terms.expires_boot_us);
}

LeaseFile::Terms LeaseFile::read() const {
  Terms t;
  t.expires_boot_us = record_->expires_boot_us.load();
  t.fence_grace_ms = record_->fence_grace_ms.load();
  return t;
}

}  // namespace gpool::agent
