// Wakes the agent's loop when a supervisor records something about a task, instead of at the
// loop's next one-second tick.
//
// A supervisor records its task's state by renaming status.json into the task's directory and
// its end by writing the end record (docs/launcher.md). The agent reads both on its tick
// (Agent::tick); with a fixed one-second tick a short job's end waited up to a second to be
// read, which capped a server's short-job turnover at about one per GPU per second (issue 24:
// 200 one-GPU `true` jobs on 8 GPUs took 11-15 s). The watcher puts an inotify watch on the
// directory of each unfinished task, so a change there ends the loop's wait at once; the tick
// stays the fallback (a missed event, or an fs without inotify, costs at most the old second).
//
// Thread-safety: watchOnly and wake may be called from any thread; wait from one thread at a
// time (the agent's loop). Errors: create's (inotify or eventfd unavailable); the rest ignore
// failures (a directory that cannot be watched is read on the tick, as before).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"

namespace gpool::agent {

class TaskDirWatcher {
 public:
  static Result<std::unique_ptr<TaskDirWatcher>> create();
  ~TaskDirWatcher();
  TaskDirWatcher(const TaskDirWatcher&) = delete;
  TaskDirWatcher& operator=(const TaskDirWatcher&) = delete;

  // Watches exactly `dirs` from now on: adds the ones not watched yet and drops the others.
  // Returns true when it added a watch, so that the caller can wake the loop: what a
  // supervisor wrote before its directory was watched raised no event.
  bool watchOnly(const std::vector<std::string>& dirs);

  // Makes the current or next wait() return at once.
  void wake();

  // Waits until a watched directory changes, wake() is called or `timeout` passes, and drains
  // what woke it. Returns true unless the timeout passed (or a signal interrupted the wait).
  bool wait(std::chrono::milliseconds timeout);

  // Directories watched now (tests).
  size_t watched() const;

 private:
  TaskDirWatcher(int inotify_fd, int wake_fd) : inotify_fd_(inotify_fd), wake_fd_(wake_fd) {}

  const int inotify_fd_;
  const int wake_fd_;  // an eventfd
  mutable std::mutex mu_;
  std::map<std::string, int> watches_;  // GUARDED_BY(mu_): directory -> watch descriptor
};

}  // namespace gpool::agent
