#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "agent/cgroup.h"
#include "agent/sys_util.h"
#include "agent/unix_user.h"

// Helpers shared by the agent tests: temp dirs the test users can use, idempotent test users,
// unique cgroup parents, and waiting on a FIFO for "the task is running".
namespace gpool::agent::testing {

inline const char* kAlice = "gpool-test-alice";
inline const char* kBob = "gpool-test-bob";

// A world-accessible temporary directory (the tasks run as test users), removed on destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/gpool-agent-test-XXXXXX";
    char* p = ::mkdtemp(tmpl);
    path_ = p ? p : "";
    if (p) ::chmod(p, 0777);
  }
  ~TempDir() {
    if (!path_.empty()) (void)removeTree(path_);
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Creates user `name` (useradd, once) and returns "" or why it cannot.
inline std::string ensureUser(const std::string& name) {
  if (::geteuid() != 0) return "tests with real users need root";
  if (lookupUnixUser(name).ok()) return "";
  // Test binaries may run in parallel (ctest -j); one useradd at a time.
  int lock = ::open("/tmp/gpool-test-users.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) ::close(fd);
    }
  } unlock{lock};
  if (lookupUnixUser(name).ok()) return "";
  std::string cmd = "useradd --no-create-home --home-dir /nonexistent --shell /bin/sh " + name +
                    " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0 && !lookupUnixUser(name).ok()) {
    return "cannot create test user " + name + " with useradd";
  }
  return "";
}

// A cgroup parent unique to this process and test, e.g. "gpool-test-1234-3".
inline std::string uniqueCgroupParent() {
  static int counter = 0;
  return "gpool-test-" + std::to_string(::getpid()) + "-" + std::to_string(++counter);
}

// Returns "" when this machine lets us create cgroups with limits, or the reason it does not.
inline std::string cgroupSkipReason(const CgroupLayout& layout) {
  if (::geteuid() != 0) return "cgroup tests need root";
  if (layout.mode == CgroupMode::kNone) return "no cgroup hierarchy mounted";
  std::string parent = uniqueCgroupParent();
  CgroupLimits limits;
  auto cg = TaskCgroup::create(layout, parent, "probe", limits);
  if (!cg.ok()) return "cannot create cgroups here: " + cg.status().toString();
  (void)cg->destroy();
  for (const std::string& dir : cg->dirs())
    ::rmdir(dir.substr(0, dir.rfind('/')).c_str());
  return "";
}

// Removes the parent directories of a test's cgroups (the tasks' own are gone by then).
inline void removeCgroupParent(const CgroupLayout& layout, const std::string& parent) {
  for (const auto& [controller, mount] : layout.v1_mounts)
    ::rmdir((mount + "/" + parent).c_str());
  if (!layout.unified.empty()) ::rmdir((layout.unified + "/" + parent).c_str());
}

// A FIFO the task writes one byte to when it runs. Open before the launch.
class ReadyFifo {
 public:
  explicit ReadyFifo(const std::string& path) : path_(path) {
    ::mkfifo(path.c_str(), 0666);
    ::chmod(path.c_str(), 0666);
    fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  }
  ~ReadyFifo() {
    if (fd_ >= 0) ::close(fd_);
  }
  const std::string& path() const { return path_; }
  // True when a byte arrived within `timeout_ms`.
  bool wait(int timeout_ms = 10'000) {
    pollfd pfd{fd_, POLLIN, 0};
    for (;;) {
      int rc = ::poll(&pfd, 1, timeout_ms);
      if (rc <= 0) return false;
      char c;
      if (::read(fd_, &c, 1) == 1) return true;
      // POLLHUP without data: no writer yet (cannot happen after a writer opened); retry.
      if (pfd.revents & POLLHUP) return false;
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

inline std::string helperPath() {
  return std::string(GPOOL_BINARY_DIR) + "/tests/agent/agent_task_helper";
}
inline std::string supervisorPath() {
  return std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-supervisor";
}

inline std::string readOr(const std::string& path, const std::string& missing = "") {
  auto text = readFile(path);
  return text.ok() ? *text : missing;
}

}  // namespace gpool::agent::testing
