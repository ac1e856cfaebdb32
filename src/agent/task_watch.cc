#include "agent/task_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

namespace gpool::agent {

Result<std::unique_ptr<TaskDirWatcher>> TaskDirWatcher::create() {
  int inotify_fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_fd < 0) {
    return Status::unavailable(std::string("inotify_init1: ") + std::strerror(errno));
  }
  int wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0) {
    int err = errno;
    ::close(inotify_fd);
    return Status::unavailable(std::string("eventfd: ") + std::strerror(err));
  }
  return std::unique_ptr<TaskDirWatcher>(new TaskDirWatcher(inotify_fd, wake_fd));
}

TaskDirWatcher::~TaskDirWatcher() {
  ::close(inotify_fd_);
  ::close(wake_fd_);
}

bool TaskDirWatcher::watchOnly(const std::vector<std::string>& dirs) {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> wanted(dirs.begin(), dirs.end());
  for (auto it = watches_.begin(); it != watches_.end();) {
    if (wanted.count(it->first)) {
      ++it;
      continue;
    }
    // EINVAL when the kernel dropped it already (the directory was removed): nothing to do.
    (void)::inotify_rm_watch(inotify_fd_, it->second);
    it = watches_.erase(it);
  }
  bool added = false;
  for (const std::string& dir : wanted) {
    if (watches_.count(dir)) continue;
    // A rename into the directory (status.json) and a file closed after writing (the end
    // record, the logs at the task's exit).
    int wd =
        ::inotify_add_watch(inotify_fd_, dir.c_str(), IN_MOVED_TO | IN_CLOSE_WRITE | IN_ONLYDIR);
    if (wd < 0) continue;  // read on the tick, as without a watcher
    watches_.emplace(dir, wd);
    added = true;
  }
  return added;
}

void TaskDirWatcher::wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

bool TaskDirWatcher::wait(std::chrono::milliseconds timeout) {
  pollfd fds[2] = {{inotify_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  int n = ::poll(fds, 2, static_cast<int>(timeout.count()));
  if (n <= 0) return false;
  // Drain both: one wait per burst of events (a task's end writes several files).
  alignas(inotify_event) char buf[4096];
  while (::read(inotify_fd_, buf, sizeof buf) > 0) {
  }
  uint64_t count;
  (void)!::read(wake_fd_, &count, sizeof count);
  return true;
}

size_t TaskDirWatcher::watched() const {
  std::lock_guard<std::mutex> lock(mu_);
  return watches_.size();
}

}  // namespace gpool::agent
