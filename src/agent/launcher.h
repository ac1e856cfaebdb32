#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/supervisor.h"
#include "agent/task_launch.h"
#include "agent/unix_user.h"
#include "common/result.h"

namespace gpool::agent {

// What the launcher knows of one task: its name ("<job>.<index>"), state directory and last
// recorded status.
struct TaskInfo {
  std::string name;
  std::string dir;
  TaskStatus status;
  bool supervisor_alive = false;
};

// Starts tasks through detached supervisors and finds them again after a restart. The launcher
// holds no per-task state in memory: the state directory is the truth, so a Launcher may be
// destroyed (or its process killed) at any time and a new one picks up where it left off.
//
// Thread-safety: methods may be called from several threads for distinct tasks; for one task,
// calls must not race (the agent serialises commands per task).
class Launcher {
 public:
  struct Options {
    std::string state_root;       // one directory per task below it; created if missing
    std::string supervisor_path;  // the gpool-supervisor executable
    SupervisorOptions supervisor;
    // How long launch() waits for the supervisor to report the task running.
    std::chrono::milliseconds start_timeout{30'000};
  };

  explicit Launcher(Options options);

  // Starts `launch` and returns once the task's process runs (or failed to start: the error
  // says why, and the task's status.json records FAILED). AlreadyExists when the task's state
  // directory is present (remove() it first).
  Result<TaskInfo> launch(const TaskLaunch& launch);

  // Every task in the state directory with its status. A task whose supervisor is gone
  // without having recorded an end is recorded as NODE_FAIL (durably) and reported so; one
  // whose supervisor never started is recorded FAILED. Call it when the agent starts, before
  // launching anything.
  Result<std::vector<TaskInfo>> adoptAll();

  // The current status of task `name`; NotFound for an unknown task.
  Result<TaskInfo> info(const std::string& name);

  // Waits until task `name` has ended or `timeout` passed (DeadlineExceeded), by waiting on its
  // supervisor's exit (pidfd), then returns the recorded end.
  Result<TaskStatus> wait(const std::string& name, std::chrono::milliseconds timeout);

  // Asks the supervisor to stop the task: SIGTERM to the task now, SIGKILL after `grace_ms`
  // (the launch's grace period when unset). The task ends CANCELLED (kCancel), PREEMPTED
  // (kPreempt, kFence) or OUT_OF_MEMORY (kOutOfMemory), with `detail` as its reason when given.
  // FailedPrecondition when the task is not running.
  Status stop(const std::string& name, StopReason reason,
              std::optional<int64_t> grace_ms = std::nullopt, const std::string& detail = "");

  // Deletes the state directory of an ended task (after its end was reported upstream).
  Status remove(const std::string& name);

  // Earlier attempts. A task's directory is named by job and task only, so a later attempt of
  // the same task on this server would replace the earlier one's output; instead the earlier
  // directory is kept, as it was, at attemptDir(name, epoch) (under "<state_root>/.attempts",
  // which is no task's directory) until removeAttempts(name).
  std::string attemptDir(const std::string& name, int64_t epoch) const {
    return options_.state_root + "/.attempts/" + name + "." + std::to_string(epoch);
  }
  // Moves the ended task's directory to attemptDir(name, epoch), replacing one already there.
  // FailedPrecondition while the task runs.
  Status keepAttempt(const std::string& name, int64_t epoch);
  // Deletes every kept attempt of task `name` (none: OK).
  Status removeAttempts(const std::string& name);

  // Interactive allocations (as pam_slurm_adopt): moves process `pid` into the running task's
  // cgroup, so that it shares the task's CPU, RAM and device limits.
  Status adoptProcess(const std::string& name, pid_t pid);
  // The logic of pam_slurm_adopt for an SSH login of `user`: adopts `pid` into the user's
  // running task that started last and returns its name. NotFound when the user has no running
  // task on this server (the PAM module would then deny the login).
  Result<std::string> adoptIntoUsersTask(const std::string& user, pid_t pid);
  // The environment the running task was started with (for a shell entering the allocation).
  Result<std::map<std::string, std::string>> taskEnvironment(const std::string& name);
  // Starts `argv` inside the running task: in its cgroup, as its user, with its environment,
  // in its working directory, with the given stdio fds (-1: /dev/null). Returns the child's
  // pid; the caller waits for it. This is what `gpool shell` uses.
  Result<pid_t> spawnInTask(const std::string& name, const std::vector<std::string>& argv,
                            int stdin_fd = -1, int stdout_fd = -1, int stderr_fd = -1);

  const Options& options() const { return options_; }
  std::string taskDir(const std::string& name) const { return options_.state_root + "/" + name; }

 private:
  Result<TaskStatus> readStatus(const std::string& name);
  // The names of the task directories, sorted.
  Result<std::vector<std::string>> taskNames() const;
  // The task's user from the passwd database, checked against the launch and the root policy.
  Result<UnixUser> resolveUser(const TaskLaunch& launch) const;
  Result<TaskInfo> refresh(const std::string& name);

  Options options_;
};

}  // namespace gpool::agent
