#include "vgpu/shm_region.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include "vgpu/alloc_table.h"

namespace gpool::vgpu {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

class ShmRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpool-vgpu-shm-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/region";
  }
  void TearDown() override {
    ShmRegion::remove(path_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  ShmRegion make(std::uint64_t quota) {
    RegionConfig cfg;
    cfg.quota_bytes = quota;
    cfg.share_permille = 500;
    auto r = ShmRegion::create(path_, cfg);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return std::move(r).value();
  }
  std::string dir_;
  std::string path_;
};

TEST_F(ShmRegionTest, CreateThenOpenSeesTheSameConfig) {
  ShmRegion a = make(100 * kMiB);
  auto b = ShmRegion::open(path_);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->quotaBytes(), 100 * kMiB);
  EXPECT_EQ(b->limits()->share_permille.load(), 500u);
  EXPECT_EQ(b->limits()->version, kShmVersion);
  EXPECT_EQ(b->header()->version, kShmVersion);
}

// The limits are the creator's and read-only for everyone else; the usage part is private to
// its owner. (Other users and the task's own attempts, through the real daemons: agent_e2e_test's
// SliceEnforcementTest.)
TEST_F(ShmRegionTest, LimitsAreReadOnlyAndUsageIsPrivate) {
  ShmRegion a = make(100 * kMiB);
  struct stat limits {};
  struct stat usage {};
  ASSERT_EQ(::stat(ShmRegion::limitsPath(path_).c_str(), &limits), 0);
  ASSERT_EQ(::stat(ShmRegion::usagePath(path_).c_str(), &usage), 0);
  EXPECT_EQ(limits.st_mode & 07777, 0444u);
  EXPECT_EQ(usage.st_mode & 07777, 0600u);
  auto b = ShmRegion::open(path_);
  ASSERT_TRUE(b.ok()) << b.status().message();
  // The opener maps the limits from a read-only descriptor: the mapping cannot be made
  // writable (a write through it would fault).
  void* limits_page = const_cast<ShmLimits*>(b->limits());
  errno = 0;
  EXPECT_EQ(::mprotect(limits_page, sizeof(ShmLimits), PROT_READ | PROT_WRITE), -1);
  EXPECT_EQ(errno, EACCES);
  EXPECT_EQ(a.quotaBytes(), 100 * kMiB);
}

TEST_F(ShmRegionTest, OpenRejectsMissingOrForeignFiles) {
  EXPECT_FALSE(ShmRegion::open(dir_ + "/missing").ok());
  for (const std::string& part : {ShmRegion::limitsPath(path_), ShmRegion::usagePath(path_)}) {
    ShmRegion::remove(path_);
    { ShmRegion made = make(kMiB); }
    ::unlink(part.c_str());
    FILE* f = std::fopen(part.c_str(), "w");
    std::fputs("not a region", f);
    std::fclose(f);
    auto r = ShmRegion::open(path_);
    EXPECT_FALSE(r.ok()) << part;
    EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
  }
}

TEST_F(ShmRegionTest, ReservesUpToTheQuotaExactlyAndReleases) {
  ShmRegion r = make(10 * kMiB);
  int slot = r.attach(::getpid());
  ASSERT_GE(slot, 0);
  EXPECT_TRUE(r.reserve(slot, 6 * kMiB));
  EXPECT_TRUE(r.reserve(slot, 4 * kMiB));
  EXPECT_FALSE(r.reserve(slot, 1));
  EXPECT_EQ(r.usedBytes(), 10 * kMiB);
  r.release(slot, 4 * kMiB);
  EXPECT_EQ(r.usedBytes(), 6 * kMiB);
  r.release(slot, 100 * kMiB);  // more than held: clamps, never underflows
  EXPECT_EQ(r.usedBytes(), 0u);
  EXPECT_EQ(r.header()->oom_count.load(), 1u);
}

TEST_F(ShmRegionTest, ConcurrentThreadsNeverOvershoot) {
  ShmRegion r = make(1000 * kMiB);
  int slot = r.attach(::getpid());
  std::atomic<int> granted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        if (r.reserve(slot, 3 * kMiB)) granted.fetch_add(1);
      }
    });
  }
  for (auto& t : threads)
    t.join();
  EXPECT_EQ(granted.load(), 333);  // floor(1000 / 3)
  EXPECT_EQ(r.usedBytes(), 999 * kMiB);
}

TEST_F(ShmRegionTest, ConcurrentProcessesNeverOvershoot) {
  ShmRegion r = make(512 * kMiB);
  constexpr int kProcs = 4;
  int pipes[kProcs][2];  // child -> parent: how many reservations succeeded
  int gate[2];           // parent -> children: closed when they may exit
  ASSERT_EQ(::pipe(gate), 0);
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    ASSERT_EQ(::pipe(pipes[p]), 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      auto child = ShmRegion::open(path_);
      int slot = child->attach(::getpid());
      int n = 0;
      for (int i = 0; i < 400; ++i)
        n += child->reserve(slot, kMiB) ? 1 : 0;
      ssize_t w = ::write(pipes[p][1], &n, sizeof(n));
      // Stay alive until the parent has read the ledger, so nothing gets reaped meanwhile.
      ::close(gate[1]);
      char c;
      ssize_t rd = ::read(gate[0], &c, 1);
      ::_exit(w == sizeof(n) && rd >= 0 ? 0 : 1);
    }
    kids.push_back(pid);
  }
  int total = 0;
  for (int p = 0; p < kProcs; ++p) {
    int n = 0;
    ASSERT_EQ(::read(pipes[p][0], &n, sizeof(n)), static_cast<ssize_t>(sizeof(n)));
    total += n;
  }
  EXPECT_EQ(total, 512);
  EXPECT_EQ(r.usedBytes(), 512 * kMiB);
  ::close(gate[1]);
  for (pid_t k : kids)
    ::waitpid(k, nullptr, 0);
  // The children exited without freeing: their memory comes back when they are reaped.
  EXPECT_EQ(r.reapDead(), kProcs);
  EXPECT_EQ(r.usedBytes(), 0u);
}

TEST_F(ShmRegionTest, ProcessKilledWhileHoldingTheLockDoesNotBlockOthers) {
  ShmRegion r = make(100 * kMiB);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    auto child = ShmRegion::open(path_);
    int slot = child->attach(::getpid());
    (void)child->reserve(slot, 40 * kMiB);
    child->lockLedgerForTest();
    ssize_t w = ::write(ready[1], "x", 1);
    (void)w;
    for (;;)
      ::pause();
  }
  char c;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  int slot = r.attach(::getpid());  // takes the lock: EOWNERDEAD is repaired, dead slot reaped
  ASSERT_GE(slot, 0);
  EXPECT_EQ(r.usedBytes(), 0u);
  EXPECT_TRUE(r.reserve(slot, 100 * kMiB));
}

TEST_F(ShmRegionTest, ReconcileChargesMemoryThatBypassedTheLedger) {
  ShmRegion r = make(100 * kMiB);
  int slot = r.attach(::getpid());
  ASSERT_TRUE(r.reserve(slot, 10 * kMiB));
  r.reconcile(slot, 30 * kMiB);         // the driver sees 20 MiB more than we counted...
  EXPECT_EQ(r.usedBytes(), 10 * kMiB);  // ...once: could be a free racing with the snapshot
  r.reconcile(slot, 30 * kMiB);         // twice: charged
  EXPECT_EQ(r.usedBytes(), 30 * kMiB);
  EXPECT_FALSE(r.reserve(slot, 80 * kMiB));
  r.reconcile(slot, 10 * kMiB);
  EXPECT_EQ(r.usedBytes(), 10 * kMiB);
  r.detach(slot);
  EXPECT_EQ(r.usedBytes(), 0u);
}

TEST_F(ShmRegionTest, ManyAllocFreeCyclesLeakNothing) {
  ShmRegion r = make(64 * kMiB);
  int slot = r.attach(::getpid());
  AllocationTable table;
  for (int i = 0; i < 20000; ++i) {
    const std::uint64_t key = 0x10000 + static_cast<std::uint64_t>(i % 50) * 4096;
    AllocRecord rec;
    if (table.erase(key, &rec)) {
      r.release(slot, rec.bytes);
    } else if (r.reserve(slot, (i % 7 + 1) * kMiB)) {
      table.insert(key, AllocRecord{static_cast<std::uint64_t>(i % 7 + 1) * kMiB, 0, 0});
    }
    ASSERT_EQ(r.usedBytes(), table.totalBytes());
  }
  for (int i = 0; i < 50; ++i) {
    AllocRecord rec;
    if (table.erase(0x10000 + static_cast<std::uint64_t>(i) * 4096, &rec)) {
      r.release(slot, rec.bytes);
    }
  }
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(r.usedBytes(), 0u);
}

TEST(ProcessAliveTest, DetectsExitAndPidReuse) {
  const std::uint64_t me = processStartTime(::getpid());
  EXPECT_NE(me, 0u);
  EXPECT_TRUE(processAlive(::getpid(), me));
  EXPECT_FALSE(processAlive(::getpid(), me + 1));  // same pid, other start time: reused
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  EXPECT_FALSE(processAlive(pid, 0));
}

}  // namespace
}  // namespace gpool::vgpu
