#include "agent/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "agent/cgroup.h"
#include "agent/sys_util.h"
#include "agent/unix_user.h"
#include "common/clock.h"

namespace gpool::agent {
namespace {

bool validTaskName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

Launcher::Launcher(Options options) : options_(std::move(options)) {}

Result<TaskInfo> Launcher::launch(const TaskLaunch& launch) {
  GPOOL_RETURN_IF_ERROR(launch.validate());
  GPOOL_RETURN_IF_ERROR(makeDirs(options_.state_root, 0755));
  const std::string name = launch.taskName();
  const std::string dir = taskDir(name);
  if (::mkdir(dir.c_str(), 0755) != 0) {
    if (errno == EEXIST) {
      return Status::alreadyExists("task " + name + " already has a state directory " + dir);
    }
    return errnoStatus("cannot create the task's state directory", dir, errno);
  }
  // launch.json carries the user's environment, which may hold secrets: root only.
  GPOOL_RETURN_IF_ERROR(writeFileAtomically(dir + "/launch.json", toJson(launch), 0600));
  GPOOL_RETURN_IF_ERROR(
      writeFileAtomically(dir + "/options.json", toJson(options_.supervisor), 0600));
  auto user = resolveUser(launch);
  if (!user.ok()) {
    // Every launch leaves a record, so that the agent reports the failure like any other end.
    TaskStatus failed;
    failed.state = TaskState::kFailed;
    failed.reason = user.status().message();
    failed.ended_at_us = toUnixMicros(realClock().now());
    GPOOL_RETURN_IF_ERROR(writeFileDurably(dir + "/status.json", toJson(failed)));
    return user.status().withContext("task " + name + " did not start");
  }
  GPOOL_RETURN_IF_ERROR(writeFileAtomically(dir + "/user.json", toJson(*user), 0600));

  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return errnoStatus("pipe failed", dir, errno);
  // posix_spawn (vfork-like: no copy of the agent's address space) starts the supervisor in a
  // new session; the supervisor's --detach forks once more and the first process exits at once,
  // so the supervisor is re-parented to init (or the nearest subreaper) and outlives the agent:
  // the classic double fork, with the expensive half done by a small static binary.
  std::string supervisor = options_.supervisor_path;
  std::string log_path = dir + "/supervisor.log";
  std::string arg_dir = dir;
  char arg0[] = "gpool-supervisor";
  char arg_task_dir[] = "--task-dir";
  char arg_ready[] = "--ready-fd=3";
  char arg_detach[] = "--detach";
  char* argv[] = {arg0, arg_task_dir, arg_dir.data(), arg_ready, arg_detach, nullptr};
  char* envp[] = {nullptr};

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // dup2 onto itself would keep O_CLOEXEC; go through a spare descriptor in that case.
  int ready_src = ready[1];
  if (ready_src == 3) {
    ready_src = ::fcntl(ready[1], F_DUPFD_CLOEXEC, 10);
  }
  posix_spawn_file_actions_adddup2(&actions, ready_src, 3);
  posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t first = -1;
  int spawn_err = ::posix_spawn(&first, supervisor.c_str(), &actions, &attr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (ready_src != ready[1]) ::close(ready_src);
  ::close(ready[1]);
  if (spawn_err != 0) {
    ::close(ready[0]);
    return errnoStatus("cannot start the supervisor", supervisor, spawn_err);
  }
  int ws = 0;
  while (::waitpid(first, &ws, 0) < 0 && errno == EINTR) {
  }

  std::string reply;
  Micros deadline = realClock().monotonic() + options_.start_timeout;
  for (;;) {
    int64_t left_ms = (deadline - realClock().monotonic()).count() / 1000;
    if (left_ms <= 0) break;
    pollfd pfd{ready[0], POLLIN, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(left_ms));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) break;
    char buf[512];
    ssize_t n = ::read(ready[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
    if (reply.find('\n') != std::string::npos) break;  // the supervisor writes one line
  }
  ::close(ready[0]);
  if (reply.rfind("ok ", 0) == 0) return refresh(name);
  if (reply.rfind("error ", 0) == 0) {
    std::string msg = reply.substr(6);
    while (!msg.empty() && msg.back() == '\n')
      msg.pop_back();
    return Status::failedPrecondition("task " + name + " did not start: " + msg);
  }
  if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0) {
    return Status::ioError("task " + name + ": the supervisor exited with " +
                           std::to_string(WEXITSTATUS(ws)) + "; see " + log_path);
  }
  return Status::unavailable("task " + name + ": the supervisor " + supervisor +
                             " did not report; see " + log_path);
}

Result<UnixUser> Launcher::resolveUser(const TaskLaunch& launch) const {
  GPOOL_ASSIGN_OR_RETURN(UnixUser user, lookupUnixUser(launch.user));
  if (launch.uid && *launch.uid != user.uid) {
    return Status::permissionDenied("user '" + user.name + "' has uid " + std::to_string(user.uid) +
                                    ", not " + std::to_string(*launch.uid));
  }
  if (launch.gid) {
    if (std::find(user.groups.begin(), user.groups.end(), *launch.gid) == user.groups.end()) {
      return Status::permissionDenied("user '" + user.name + "' is not in group " +
                                      std::to_string(*launch.gid));
    }
    user.gid = *launch.gid;
  }
  if (user.uid == 0 && !options_.supervisor.allow_root) {
    return Status::permissionDenied("tasks may not run as root (user '" + user.name +
                                    "'); the pool's config does not allow it");
  }
  return user;
}

Result<TaskStatus> Launcher::readStatus(const std::string& name) {
  auto text = readFile(taskDir(name) + "/status.json");
  Result<TaskStatus> status = TaskStatus{};  // the supervisor has not written anything yet
  if (!text.ok()) {
    if (text.status().code() != StatusCode::kNotFound) return text.status();
    struct stat st;
    if (::stat(taskDir(name).c_str(), &st) != 0) {
      return Status::notFound("no task " + name + " in " + options_.state_root);
    }
  } else {
    status = taskStatusFromJson(*text);
  }
  if (status.ok() && isTerminal(status->state)) return status;
  // The end may be only in the record reserved before the task started (the disk was full when
  // the supervisor tried status.json, which still says RUNNING or holds half a write).
  auto record = readFile(taskDir(name) + "/" + kEndRecordFile);
  if (record.ok()) {
    Result<TaskStatus> ended = taskStatusFromEndRecord(*record);
    if (ended.ok()) return ended;
  }
  return status;
}

Result<TaskInfo> Launcher::refresh(const std::string& name) {
  if (!validTaskName(name)) return Status::invalidArgument("invalid task name '" + name + "'");
  TaskInfo info;
  info.name = name;
  info.dir = taskDir(name);
  GPOOL_ASSIGN_OR_RETURN(info.status, readStatus(name));
  info.supervisor_alive =
      processMatches(info.status.supervisor_pid, info.status.supervisor_start_ticks);
  if (!isTerminal(info.status.state) && !info.supervisor_alive) {
    // Re-read: the supervisor may have recorded the end between the two reads.
    GPOOL_ASSIGN_OR_RETURN(info.status, readStatus(name));
    if (!isTerminal(info.status.state) && info.status.supervisor_pid != 0) {
      info.status.state = TaskState::kNodeFail;
      info.status.reason = "supervisor " + std::to_string(info.status.supervisor_pid) +
                           " ended without recording the task's end";
      info.status.ended_at_us = toUnixMicros(realClock().now());
      GPOOL_RETURN_IF_ERROR(writeFileDurably(info.dir + "/status.json", toJson(info.status)));
    }
  }
  return info;
}

Result<TaskInfo> Launcher::info(const std::string& name) {
  return refresh(name);
}

Result<std::vector<std::string>> Launcher::taskNames() const {
  std::vector<std::string> names;
  std::error_code ec;
  if (!std::filesystem::exists(options_.state_root, ec)) return names;
  for (const auto& entry : std::filesystem::directory_iterator(options_.state_root, ec)) {
    std::string name = entry.path().filename().string();
    // ".attempts" keeps earlier attempts (keepAttempt); no task's name starts with a dot.
    if (entry.is_directory(ec) && !name.starts_with('.')) names.push_back(std::move(name));
  }
  if (ec) return Status::ioError("cannot list " + options_.state_root + ": " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::vector<TaskInfo>> Launcher::adoptAll() {
  std::vector<TaskInfo> tasks;
  GPOOL_ASSIGN_OR_RETURN(std::vector<std::string> names, taskNames());
  for (const std::string& name : names) {
    GPOOL_ASSIGN_OR_RETURN(TaskInfo info, refresh(name));
    if (info.status.state == TaskState::kStarting && info.status.supervisor_pid == 0) {
      // A directory without a supervisor record: the agent died between creating it and
      // starting the supervisor (adoptAll runs at start-up, before any launch of its own).
      info.status.state = TaskState::kFailed;
      info.status.reason = "the agent stopped before the task's supervisor started";
      info.status.ended_at_us = toUnixMicros(realClock().now());
      GPOOL_RETURN_IF_ERROR(writeFileDurably(info.dir + "/status.json", toJson(info.status)));
    }
    tasks.push_back(std::move(info));
  }
  return tasks;
}

Result<TaskStatus> Launcher::wait(const std::string& name, std::chrono::milliseconds timeout) {
  GPOOL_ASSIGN_OR_RETURN(TaskInfo info, refresh(name));
  // The end can be read from the end record while the supervisor is still writing status.json:
  // wait for the supervisor to exit too, so that what the caller does next (remove the task's
  // folder) does not race its last write.
  const bool ended = isTerminal(info.status.state);
  if (ended && !info.supervisor_alive) return info.status;
  if (info.status.supervisor_pid == 0) {
    if (ended) return info.status;
    return Status::failedPrecondition("task " + name + " has no supervisor yet");
  }
  int pidfd = openPidFd(info.status.supervisor_pid);
  if (pidfd >= 0) {
    if (processMatches(info.status.supervisor_pid, info.status.supervisor_start_ticks)) {
      pollfd pfd{pidfd, POLLIN, 0};
      int rc;
      do {
        rc = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
      } while (rc < 0 && errno == EINTR);
      if (rc == 0) {
        ::close(pidfd);
        if (ended) return info.status;
        return Status::deadlineExceeded("task " + name + " still running after " +
                                        std::to_string(timeout.count()) + " ms");
      }
    }
    ::close(pidfd);
  }
  GPOOL_ASSIGN_OR_RETURN(info, refresh(name));
  return info.status;
}

Status Launcher::stop(const std::string& name, StopReason reason, std::optional<int64_t> grace_ms,
                      const std::string& detail) {
  GPOOL_ASSIGN_OR_RETURN(TaskInfo info, refresh(name));
  if (isTerminal(info.status.state)) {
    return Status::failedPrecondition("task " + name + " has already ended " +
                                      std::string(taskStateName(info.status.state)));
  }
  nlohmann::json control = {{"action", reason == StopReason::kCancel    ? "cancel"
                                       : reason == StopReason::kPreempt ? "preempt"
                                       : reason == StopReason::kFence   ? "fence"
                                                                        : "out_of_memory"}};
  if (grace_ms) control["grace_ms"] = *grace_ms;
  if (!detail.empty()) control["reason"] = detail;
  GPOOL_RETURN_IF_ERROR(writeFileAtomically(info.dir + "/control.json", control.dump(), 0600));
  if (::kill(info.status.supervisor_pid, SIGUSR1) != 0) {
    if (errno == ESRCH) {
      return Status::failedPrecondition("task " + name + " ended while being stopped");
    }
    return errnoStatus("cannot signal the supervisor of", name, errno);
  }
  return Status::ok();
}

Status Launcher::remove(const std::string& name) {
  GPOOL_ASSIGN_OR_RETURN(TaskInfo info, refresh(name));
  if (!isTerminal(info.status.state)) {
    return Status::failedPrecondition("task " + name + " is still running");
  }
  return removeTree(info.dir);
}

Status Launcher::keepAttempt(const std::string& name, int64_t epoch) {
  GPOOL_ASSIGN_OR_RETURN(TaskInfo info, refresh(name));
  if (!isTerminal(info.status.state)) {
    return Status::failedPrecondition("task " + name + " is still running");
  }
  const std::string kept = attemptDir(name, epoch);
  GPOOL_RETURN_IF_ERROR(makeDirs(options_.state_root + "/.attempts", 0755));
  GPOOL_RETURN_IF_ERROR(removeTree(kept));
  if (::rename(info.dir.c_str(), kept.c_str()) != 0) {
    return errnoStatus("cannot keep the earlier attempt of task " + name + " in", kept, errno);
  }
  return Status::ok();
}

Status Launcher::removeAttempts(const std::string& name) {
  const std::string root = options_.state_root + "/.attempts";
  const std::string prefix = name + ".";
  std::error_code ec;
  if (!std::filesystem::exists(root, ec)) return Status::ok();
  std::vector<std::string> doomed;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    std::string base = entry.path().filename().string();
    // "<name>.<epoch>": the rest after the prefix is the epoch's digits only (task "1.1" must
    // not take "1.10"'s attempts).
    if (base.size() > prefix.size() && base.compare(0, prefix.size(), prefix) == 0 &&
        base.find_first_not_of("0123456789", prefix.size()) == std::string::npos) {
      doomed.push_back(entry.path().string());
    }
  }
  if (ec) return Status::ioError("cannot list " + root + ": " + ec.message());
  for (const std::string& dir : doomed)
    GPOOL_RETURN_IF_ERROR(removeTree(dir));
  return Status::ok();
}

Status Launcher::adoptProcess(const std::string& name, pid_t pid) {
  GPOOL_ASSIGN_OR_RETURN(TaskInfo info, refresh(name));
  if (info.status.state != TaskState::kRunning) {
    return Status::failedPrecondition("task " + name + " is not running");
  }
  if (!options_.supervisor.use_cgroups) {
    return Status::failedPrecondition("tasks run without cgroups on this agent");
  }
  GPOOL_ASSIGN_OR_RETURN(CgroupLayout layout, CgroupLayout::detect());
  TaskCgroup cg = TaskCgroup::open(layout, options_.supervisor.cgroup_parent, name);
  return cg.addProcess(pid).withContext("adopting process " + std::to_string(pid) + " into task " +
                                        name);
}

Result<std::string> Launcher::adoptIntoUsersTask(const std::string& user, pid_t pid) {
  GPOOL_ASSIGN_OR_RETURN(std::vector<std::string> names, taskNames());
  std::vector<TaskInfo> tasks;
  for (const std::string& name : names) {
    auto info = refresh(name);
    if (info.ok()) tasks.push_back(std::move(*info));
  }
  const TaskInfo* best = nullptr;
  for (const TaskInfo& t : tasks) {
    if (t.status.state != TaskState::kRunning || !t.supervisor_alive) continue;
    auto text = readFile(t.dir + "/user.json");
    if (!text.ok()) continue;
    auto owner = unixUserFromJson(*text);
    if (!owner.ok() || owner->name != user) continue;
    if (best == nullptr || t.status.started_at_us > best->status.started_at_us) best = &t;
  }
  if (best == nullptr) {
    return Status::notFound("user '" + user + "' has no running task on this server");
  }
  GPOOL_RETURN_IF_ERROR(adoptProcess(best->name, pid));
  return best->name;
}

Result<std::map<std::string, std::string>> Launcher::taskEnvironment(const std::string& name) {
  GPOOL_ASSIGN_OR_RETURN(std::string text, readFile(taskDir(name) + "/environ"));
  std::map<std::string, std::string> env;
  for (const std::string& line : splitString(text, '\n')) {
    size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

Result<pid_t> Launcher::spawnInTask(const std::string& name, const std::vector<std::string>& argv,
                                    int stdin_fd, int stdout_fd, int stderr_fd) {
  if (argv.empty()) return Status::invalidArgument("nothing to run in task " + name);
  GPOOL_ASSIGN_OR_RETURN(TaskInfo info, refresh(name));
  if (info.status.state != TaskState::kRunning) {
    return Status::failedPrecondition("task " + name + " is not running");
  }
  GPOOL_ASSIGN_OR_RETURN(std::string launch_text, readFile(info.dir + "/launch.json"));
  GPOOL_ASSIGN_OR_RETURN(TaskLaunch launch, taskLaunchFromJson(launch_text));
  GPOOL_ASSIGN_OR_RETURN(std::string user_text, readFile(info.dir + "/user.json"));
  GPOOL_ASSIGN_OR_RETURN(UnixUser user, unixUserFromJson(user_text));
  if (user.uid == 0 && !options_.supervisor.allow_root) {
    return Status::permissionDenied("task " + name + " belongs to root");
  }
  GPOOL_ASSIGN_OR_RETURN(auto env, taskEnvironment(name));
  std::optional<TaskCgroup> cg;
  if (options_.supervisor.use_cgroups) {
    GPOOL_ASSIGN_OR_RETURN(CgroupLayout layout, CgroupLayout::detect());
    cg = TaskCgroup::open(layout, options_.supervisor.cgroup_parent, name);
  }
  std::string program = argv[0];
  if (program.find('/') == std::string::npos) {
    for (const std::string& d : splitString(env["PATH"], ':')) {
      if (::access((d + "/" + program).c_str(), X_OK) == 0) {
        program = d + "/" + program;
        break;
      }
    }
  }
  std::string work_dir = launch.working_dir.empty() ? user.home : launch.working_dir;
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env)
    env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (std::string& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> procs_files;
  if (cg) {
    for (const std::string& d : cg->dirs())
      procs_files.push_back(d + "/cgroup.procs");
  }

  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) return errnoStatus("pipe failed", name, errno);
  pid_t pid = ::fork();
  if (pid < 0) return errnoStatus("fork failed", name, errno);
  if (pid == 0) {
    // Async-signal-safe calls only: the agent may be multi-threaded.
    auto fail = [&](int err) {
      (void)!::write(exec_pipe[1], &err, sizeof(err));
      ::_exit(127);
    };
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    char self[] = "0";  // writing "0" to cgroup.procs moves the writing process
    for (const std::string& f : procs_files) {
      int fd = ::open(f.c_str(), O_WRONLY);
      if (fd < 0 || ::write(fd, self, 1) != 1) fail(errno);
      ::close(fd);
    }
    int null_fd = ::open("/dev/null", O_RDWR);
    ::dup2(stdin_fd >= 0 ? stdin_fd : null_fd, 0);
    ::dup2(stdout_fd >= 0 ? stdout_fd : null_fd, 1);
    ::dup2(stderr_fd >= 0 ? stderr_fd : null_fd, 2);
    if (::setgroups(user.groups.size(), user.groups.data()) != 0) fail(errno);
    if (::setgid(user.gid) != 0 || ::setuid(user.uid) != 0) fail(errno);
    if (::chdir(work_dir.c_str()) != 0) fail(errno);
    ::execve(program.c_str(), cargv.data(), envp.data());
    fail(errno);
  }
  ::close(exec_pipe[1]);
  int err = 0;
  ssize_t n;
  do {
    n = ::read(exec_pipe[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (n > 0) {
    ::waitpid(pid, nullptr, 0);
    return Status::failedPrecondition("cannot start '" + program + "' in task " + name + ": " +
                                      std::strerror(err));
  }
  return pid;
}

}  // namespace gpool::agent
