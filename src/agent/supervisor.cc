#include "agent/supervisor.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "agent/container.h"
#include "agent/lease_file.h"
#include "agent/sys_util.h"
#include "agent/task_environment.h"
#include "agent/task_launch.h"
#include "agent/unix_user.h"
#include "common/clock.h"

namespace gpool::agent {
namespace {

using nlohmann::json;

std::string_view filterName(DeviceFilterKind kind) {
  switch (kind) {
    case DeviceFilterKind::kAuto: return "auto";
    case DeviceFilterKind::kV1Controller: return "v1";
    case DeviceFilterKind::kBpf: return "bpf";
    case DeviceFilterKind::kNone: return "none";
  }
  return "auto";
}

// clone3 with CLONE_INTO_CGROUP: like fork(), but the child starts as a member of the cgroup
// `cgroup_fd` (cgroup v2, Linux >= 5.7). -1 with errno when refused. The raw syscall skips
// glibc's fork handlers, which is safe only because the supervisor is single-threaded.
pid_t forkIntoCgroup(int cgroup_fd) {
  clone_args args{};
  args.flags = CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<uint64_t>(cgroup_fd);
  return static_cast<pid_t>(::syscall(SYS_clone3, &args, sizeof(args)));
}

// Everything the supervisor tracks while the task runs. The supervisor is single-threaded.
class Supervisor {
 public:
  Supervisor(std::string task_dir, int ready_fd)
      : dir_(std::move(task_dir)), ready_fd_(ready_fd), clock_(realClock()) {}

  int run();

 private:
  Status setUp();
  Status startTask();
  void loop();
  void finish();
  void stop(StopReason reason, int64_t grace_ms, std::string detail);
  void readControl();
  void readOomEvents() {
    uint64_t n = 0;
    if (oom_fd_ >= 0 && ::read(oom_fd_, &n, sizeof n) == sizeof n) oom_events_ += n;
  }
  // Fences the task once the node's lease (as the agent last renewed it) has ended; returns
  // how long until it ends (nullopt: no lease to watch, or already fenced).
  std::optional<Micros> checkLease();
  Status writeStatus(bool durable);
  // Reserves the space of the end record (kEndRecordFile) before the task starts.
  void reserveEndRecord();
  // Writes the end into the reserved record: needs no new space on the disk.
  Status writeEndRecord();
  void reportReady(const std::string& line);
  void failStart(const Status& st);
  void log(const std::string& line) {
    std::fprintf(stderr, "gpool-supervisor: %s\n", line.c_str());
  }

  std::string dir_;
  int ready_fd_;
  Clock& clock_;
  TaskLaunch launch_;
  SupervisorOptions options_;
  UnixUser user_;
  std::optional<TaskCgroup> cgroup_;
  std::optional<LeaseFile> lease_;  // the node's lease, for a task that must not outlive it
  bool fenced_ = false;
  TaskStatus status_;
  int signal_fd_ = -1;
  int end_fd_ = -1;          // the reserved end record, open for the supervisor's life
  int oom_fd_ = -1;          // v1: counts the memory group's OOM events (openOomEventFd)
  uint64_t oom_events_ = 0;  // what oom_fd_ counted so far
  Micros started_mono_{0};
  std::optional<Micros> time_limit_at_;
  std::optional<Micros> kill_at_;
  std::optional<StopReason> stop_reason_;
  bool timed_out_ = false;
  bool killed_ = false;
  std::string stop_detail_;
  int wait_status_ = 0;
  bool exited_ = false;
};

Status Supervisor::writeStatus(bool durable) {
  std::string text = toJson(status_);
  return durable ? writeFileDurably(dir_ + "/status.json", text)
                 : writeFileAtomically(dir_ + "/status.json", text);
}

void Supervisor::reserveEndRecord() {
  const std::string path = dir_ + "/" + kEndRecordFile;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    log("cannot reserve the end record " + path + ": " + std::strerror(errno));
    return;
  }
  // Zeros written and synced, not fallocate: on ext4 an unwritten extent may still need a
  // metadata block when it is first written, a written block is overwritten in place.
  std::string zeros(kEndRecordBytes, '\0');
  if (::pwrite(fd, zeros.data(), zeros.size(), 0) != static_cast<ssize_t>(zeros.size()) ||
      ::fsync(fd) != 0) {
    log("cannot reserve the end record " + path + ": " + std::strerror(errno));
    ::close(fd);
    ::unlink(path.c_str());
    return;
  }
  end_fd_ = fd;
}

Status Supervisor::writeEndRecord() {
  if (end_fd_ < 0) return Status::failedPrecondition("no end record was reserved");
  std::string text = toJson(status_);
  if (text.size() >= kEndRecordBytes) {
    // The reason is the only long field: shorten it rather than lose the exit status.
    TaskStatus shorter = status_;
    shorter.reason.resize(std::min<size_t>(shorter.reason.size(), kEndRecordBytes / 4));
    text = toJson(shorter);
  }
  text.resize(kEndRecordBytes, '\0');
  if (::pwrite(end_fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return errnoStatus("cannot write the end record", dir_, errno);
  }
  if (::fdatasync(end_fd_) != 0) return errnoStatus("cannot sync the end record", dir_, errno);
  return Status::ok();
}

void Supervisor::reportReady(const std::string& line) {
  if (ready_fd_ < 0) return;
  std::string msg = line + "\n";
  (void)!::write(ready_fd_, msg.data(), msg.size());
  ::close(ready_fd_);
  ready_fd_ = -1;
}

void Supervisor::failStart(const Status& st) {
  log("task " + launch_.taskName() + " could not start: " + st.toString());
  status_.state = TaskState::kFailed;
  status_.reason = st.message();
  status_.ended_at_us = toUnixMicros(clock_.now());
  (void)writeStatus(true);
  if (cgroup_) (void)cgroup_->destroy();
  reportReady("error " + st.toString());
}

Status Supervisor::setUp() {
  GPOOL_ASSIGN_OR_RETURN(std::string launch_text, readFile(dir_ + "/launch.json"));
  GPOOL_ASSIGN_OR_RETURN(launch_, taskLaunchFromJson(launch_text));
  GPOOL_RETURN_IF_ERROR(launch_.validate());
  auto opts_text = readFile(dir_ + "/options.json");
  if (opts_text.ok()) {
    GPOOL_ASSIGN_OR_RETURN(options_, supervisorOptionsFromJson(*opts_text));
  }
  if (!launch_.lease_file.empty()) {
    // A task fenced by the lease must never run without it.
    Result<LeaseFile> lease = LeaseFile::open(launch_.lease_file);
    if (!lease.ok()) {
      return Status::failedPrecondition("cannot watch the node's lease (" +
                                        lease.status().message() +
                                        "): the task would not be fenced, so it does not start");
    }
    lease_ = std::move(*lease);
  }
  GPOOL_ASSIGN_OR_RETURN(std::string user_text, readFile(dir_ + "/user.json"));
  GPOOL_ASSIGN_OR_RETURN(user_, unixUserFromJson(user_text));
  if (user_.uid == 0 && !options_.allow_root) {
    return Status::permissionDenied("tasks may not run as root (user '" + user_.name +
                                    "'); the pool's config does not allow it");
  }
  if (!launch_.project_dir.empty()) {
    // The group's shared directory, made on the first of its jobs here. The controller charged
    // the job to the group (its members only), so the task gets the group's gid too.
    GPOOL_RETURN_IF_ERROR(
        ensureGroupDirectory(launch_.project_dir, launch_.project_gid, options_.project_dir_mode));
    if (std::find(user_.groups.begin(), user_.groups.end(), launch_.project_gid) ==
        user_.groups.end()) {
      user_.groups.push_back(launch_.project_gid);
    }
  }
  if (options_.use_cgroups) {
    GPOOL_ASSIGN_OR_RETURN(CgroupLayout layout, CgroupLayout::detect());
    CgroupLimits limits;
    limits.cpu_millicores = launch_.cpu_millicores;
    limits.memory_mib = launch_.memory_mib;
    limits.pids_max = launch_.pids_max;
    limits.filter_devices =
        options_.filter_devices && options_.device_filter != DeviceFilterKind::kNone;
    limits.device_filter = options_.device_filter;
    std::vector<int32_t> minors;
    for (const TaskGpu& gpu : launch_.gpus)
      minors.push_back(gpu.minor);
    limits.device_rules = taskDeviceRules(minors, options_.extra_device_rules);
    if (launch_.container) {
      for (const DeviceRule& r : containerRuntimeDeviceRules())
        limits.device_rules.push_back(r);
    }
    GPOOL_ASSIGN_OR_RETURN(TaskCgroup cg, TaskCgroup::create(layout, options_.cgroup_parent,
                                                             launch_.taskName(), limits));
    cgroup_ = std::move(cg);
    oom_fd_ = cgroup_->openOomEventFd();
  }
  if (launch_.container) {
    if (!cgroup_) {
      // Podman would put the container in a cgroup of its own, outside every task limit.
      return Status::failedPrecondition(
          "containerised tasks need cgroups (the agent runs "
          "tasks without them)");
    }
    if (options_.container_runtime.empty()) {
      return Status::failedPrecondition(
          "this node cannot run containers: the agent found no OCI runtime (runc or crun) at "
          "start");
    }
    GPOOL_ASSIGN_OR_RETURN(std::string loaded, ensureImage(options_, launch_.container->image));
    if (!loaded.empty()) log("task " + launch_.taskName() + ": " + loaded);
  }
  return Status::ok();
}

Status Supervisor::startTask() {
  // Log files belong to the user so that they can follow them; the task dir stays root's.
  std::string out_path = launch_.stdout_path.empty() ? dir_ + "/stdout.log" : launch_.stdout_path;
  std::string err_path = launch_.stderr_path.empty() ? dir_ + "/stderr.log" : launch_.stderr_path;
  int out_fd = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (out_fd < 0) return errnoStatus("cannot open the task's stdout log", out_path, errno);
  int err_fd = err_path == out_path
                   ? ::dup(out_fd)
                   : ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (err_fd < 0) {
    int err = errno;
    ::close(out_fd);
    return errnoStatus("cannot open the task's stderr log", err_path, err);
  }
  (void)!::fchown(out_fd, user_.uid, user_.gid);
  (void)!::fchown(err_fd, user_.uid, user_.gid);

  std::map<std::string, std::string> env = buildTaskEnvironment(launch_, user_, dir_);
  std::vector<std::string> env_strings = toEnvStrings(env);
  std::string environ_text;
  for (const std::string& e : env_strings)
    environ_text += e + "\n";
  (void)writeFileAtomically(dir_ + "/environ", environ_text, 0600);

  // Resolve the program on the task's PATH now: execvpe would use the supervisor's PATH.
  std::string program = launch_.argv[0];
  if (program.find('/') == std::string::npos) {
    for (const std::string& d : splitString(env["PATH"], ':')) {
      std::string candidate = d + "/" + program;
      if (::access(candidate.c_str(), X_OK) == 0) {
        program = candidate;
        break;
      }
    }
  }
  std::string work_dir = launch_.working_dir.empty() ? user_.home : launch_.working_dir;
  std::vector<std::string> args = launch_.argv;
  const bool container = launch_.container.has_value();
  if (container) {
    // The task's process is podman (as root, outside the task's groups: Podman's memory is
    // not the task's); the container goes below the task's groups and runs as the user.
    std::vector<std::string> reach = {work_dir};
    for (const BindMount& m : launch_.container->mounts)
      reach.push_back(m.source);
    GPOOL_RETURN_IF_ERROR(checkUserReaches(user_, reach));
    ContainerContext context;
    context.task_dir = dir_;
    context.work_dir = work_dir;
    context.cgroup_path = "/" + options_.cgroup_parent + "/" + launch_.taskName();
    context.gpu_device_dir = options_.gpu_device_dir;
    GPOOL_ASSIGN_OR_RETURN(args, podmanRunCommand(launch_, user_, env, options_, context));
    program = args[0];
    std::string line;  // the environment is in a file: the command line holds no secret
    for (const std::string& a : args)
      line += (line.empty() ? "" : " ") + a;
    log("task " + launch_.taskName() + ": " + line);
    env_strings = podmanEnvironment();
    work_dir = "/";
  }
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);

  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) return errnoStatus("pipe failed", dir_, errno);
  // Start the child inside the task's v2 group where the kernel allows it: a migration through
  // cgroup.procs waits for an RCU grace period after an idle spell, clone3(CLONE_INTO_CGROUP)
  // does not. Older kernels and seccomp profiles that refuse clone3 get fork + migration.
  bool in_unified = false;
  pid_t pid = -1;
  if (cgroup_ && !container && !cgroup_->unifiedDir().empty()) {
    int cg_fd = ::open(cgroup_->unifiedDir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cg_fd >= 0) {
      pid = forkIntoCgroup(cg_fd);
      in_unified = pid >= 0;
      ::close(cg_fd);  // in the child too: the fd is no use there
    }
  }
  if (pid < 0) pid = ::fork();
  if (pid < 0) return errnoStatus("fork failed", dir_, errno);
  if (pid == 0) {
    // The child. The supervisor is single-threaded, so allocating here is safe.
    auto fail = [&](int stage, int err) {
      int msg[2] = {stage, err};
      (void)!::write(exec_pipe[1], msg, sizeof(msg));
      ::_exit(127);
    };
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGPIPE, SIGCHLD})
      ::signal(sig, SIG_DFL);
    ::setsid();  // own session and process group: signals to -pid reach the whole task
    if (cgroup_ && !container && !cgroup_->addProcess(::getpid(), in_unified).isOk()) {
      fail(1, errno);
    }
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0 || ::dup2(null_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) {
      fail(2, errno);
    }
    if (!container) {
      if (int err = switchToUser(user_); err != 0) fail(3, err);
    }
    if (::chdir(work_dir.c_str()) != 0) fail(4, errno);
    ::execve(program.c_str(), argv.data(), envp.data());
    fail(5, errno);
  }
  ::close(exec_pipe[1]);
  ::close(out_fd);
  ::close(err_fd);
  int msg[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(exec_pipe[0], msg, sizeof(msg));
  } while (n < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (n > 0) {
    int ws;
    ::waitpid(pid, &ws, 0);
    static const char* kStages[] = {"",
                                    "join its cgroup",
                                    "redirect its output",
                                    "switch to its user",
                                    "enter its working directory",
                                    "exec"};
    int stage = std::clamp(msg[0], 1, 5);
    std::string what = std::string("task could not ") + kStages[stage];
    if (stage == 5) what += " '" + program + "'";
    if (stage == 4) what += " '" + work_dir + "'";
    return Status::failedPrecondition(what + ": " + std::strerror(msg[1]));
  }
  status_.task_pid = pid;
  status_.state = TaskState::kRunning;
  status_.started_at_us = toUnixMicros(clock_.now());
  started_mono_ = clock_.monotonic();
  if (launch_.time_limit_ms > 0) {
    time_limit_at_ = started_mono_ + Micros(launch_.time_limit_ms * 1000);
  }
  return Status::ok();
}

void Supervisor::stop(StopReason reason, int64_t grace_ms, std::string detail) {
  Micros now = clock_.monotonic();
  Micros kill_at = now + Micros(std::max<int64_t>(grace_ms, 0) * 1000);
  if (!stop_reason_ && !timed_out_) {
    stop_reason_ = reason;
    stop_detail_ = std::move(detail);
    log("stopping task " + launch_.taskName() + ": " + stop_detail_);
  }
  if (!kill_at_ || kill_at < *kill_at_) kill_at_ = kill_at;
  // SIGTERM to the process group and to every process of the cgroup (which also catches
  // processes that left the group with setsid).
  ::kill(-status_.task_pid, SIGTERM);
  if (cgroup_) cgroup_->signalAll(SIGTERM);
}

void Supervisor::readControl() {
  auto text = readFile(dir_ + "/control.json");
  if (!text.ok()) return;
  try {
    json j = json::parse(*text);
    std::string action = j.value("action", "cancel");
    int64_t grace = j.value("grace_ms", launch_.grace_ms);
    StopReason reason = action == "preempt"         ? StopReason::kPreempt
                        : action == "fence"         ? StopReason::kFence
                        : action == "out_of_memory" ? StopReason::kOutOfMemory
                                                    : StopReason::kCancel;
    stop(reason, grace, j.value("reason", action + " requested"));
  } catch (const json::exception& e) {
    log(std::string("ignoring malformed control.json: ") + e.what());
  }
}

std::optional<Micros> Supervisor::checkLease() {
  if (!lease_ || fenced_) return std::nullopt;
  LeaseFile::Terms terms = lease_->read();
  int64_t left_us = terms.expires_boot_us - bootTimeMicros();
  if (left_us > 0) return Micros(left_us);
  // The controller may already run this job elsewhere: stop now, whatever the agent does.
  fenced_ = true;
  stop(StopReason::kFence, terms.fence_grace_ms,
       "fenced: the node's lease ended " + std::to_string(-left_us / 1000) +
           " ms ago without renewal (agent gone or cut off from the controller)");
  return std::nullopt;
}

void Supervisor::loop() {
  while (!exited_) {
    std::optional<Micros> lease_left = checkLease();
    Micros now = clock_.monotonic();
    if (time_limit_at_ && now >= *time_limit_at_ && !timed_out_ && !stop_reason_) {
      timed_out_ = true;
      time_limit_at_.reset();
      log("task " + launch_.taskName() + " reached its time limit");
      Micros kill_at = now + Micros(launch_.grace_ms * 1000);
      kill_at_ = kill_at;
      ::kill(-status_.task_pid, SIGTERM);
      if (cgroup_) cgroup_->signalAll(SIGTERM);
    }
    if (kill_at_ && now >= *kill_at_ && !killed_) {
      killed_ = true;
      ::kill(-status_.task_pid, SIGKILL);
      if (cgroup_) cgroup_->signalAll(SIGKILL);
    }
    int timeout_ms = -1;
    // The lease is read again at its end and at least every second (a restarted agent may
    // have written a shorter one).
    std::optional<Micros> lease_at;
    if (lease_left) lease_at = now + std::min<Micros>(*lease_left, std::chrono::seconds(1));
    for (const auto& at :
         {time_limit_at_, killed_ ? std::optional<Micros>() : kill_at_, lease_at}) {
      if (!at) continue;
      int64_t ms = std::min<int64_t>((*at - now).count() / 1000 + 1, 3'600'000);
      timeout_ms = timeout_ms < 0 ? static_cast<int>(ms) : std::min<int>(timeout_ms, ms);
    }
    pollfd pfds[2] = {{signal_fd_, POLLIN, 0}, {oom_fd_, POLLIN, 0}};
    int rc = ::poll(pfds, oom_fd_ >= 0 ? 2 : 1, timeout_ms);
    if (rc < 0 && errno != EINTR) {
      log(std::string("poll failed: ") + std::strerror(errno));
      return;
    }
    if (rc <= 0) continue;
    readOomEvents();
    signalfd_siginfo info;
    while (::read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
      switch (info.ssi_signo) {
        case SIGCHLD: break;
        case SIGTERM:
        case SIGINT: stop(StopReason::kCancel, launch_.grace_ms, "supervisor signalled"); break;
        case SIGUSR1: readControl(); break;
        default: break;
      }
    }
    // Reap every child: the task and, as child subreaper, any orphans of the task.
    for (;;) {
      int ws;
      pid_t pid = ::waitpid(-1, &ws, WNOHANG);
      if (pid <= 0) break;
      if (pid == status_.task_pid) {
        wait_status_ = ws;
        exited_ = true;
      }
    }
  }
}

void Supervisor::finish() {
  if (launch_.container) {
    // podman ended; after a SIGKILL its container may still be recorded (or even running).
    Status st = removeContainer(options_, containerName(launch_, dir_));
    if (!st.isOk()) log(st.toString());
  }
  // The task's main process is gone: whatever it left in its cgroup goes too (as Slurm does).
  if (cgroup_) {
    for (int i = 0; i < 2000 && !cgroup_->empty(); ++i) {
      cgroup_->signalAll(SIGKILL);
      while (::waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      ::usleep(1000);
    }
  }
  ::kill(-status_.task_pid, SIGKILL);
  while (::waitpid(-1, nullptr, WNOHANG) > 0) {
  }
  status_.ended_at_us = toUnixMicros(clock_.now());
  if (WIFEXITED(wait_status_)) {
    status_.exit_code = WEXITSTATUS(wait_status_);
    status_.signal = 0;
  } else if (WIFSIGNALED(wait_status_)) {
    status_.exit_code = -1;
    status_.signal = WTERMSIG(wait_status_);
  }
  readOomEvents();
  uint64_t ooms = cgroup_ ? std::max(cgroup_->oomKills(), oom_events_) : 0;
  if (ooms > 0) {
    status_.state = TaskState::kOutOfMemory;
    status_.reason = "the kernel's OOM killer killed " + std::to_string(ooms) +
                     " process(es) of the task (memory limit " +
                     std::to_string(launch_.memory_mib) + " MiB)";
  } else if (timed_out_) {
    status_.state = TaskState::kTimeout;
    status_.reason = "time limit of " + std::to_string(launch_.time_limit_ms) + " ms reached";
  } else if (stop_reason_) {
    status_.state = *stop_reason_ == StopReason::kCancel        ? TaskState::kCancelled
                    : *stop_reason_ == StopReason::kOutOfMemory ? TaskState::kOutOfMemory
                                                                : TaskState::kPreempted;
    status_.reason = stop_detail_;
  } else if (status_.signal == 0 && status_.exit_code == 0) {
    status_.state = TaskState::kCompleted;
  } else {
    status_.state = TaskState::kFailed;
    status_.reason = status_.signal != 0 ? "killed by signal " + std::to_string(status_.signal)
                                         : "exited with " + std::to_string(status_.exit_code);
    if (launch_.container && status_.exit_code == 125) {
      // Podman's own failure (its message is the last line it wrote to the task's stderr).
      std::string err_path =
          launch_.stderr_path.empty() ? dir_ + "/stderr.log" : launch_.stderr_path;
      std::string text = readFile(err_path).valueOr("");
      while (!text.empty() && text.back() == '\n')
        text.pop_back();
      size_t nl = text.rfind('\n');
      status_.reason = "podman could not run the container of image '" + launch_.container->image +
                       "': " + (nl == std::string::npos ? text : text.substr(nl + 1));
    }
  }
  if (killed_) {
    status_.reason += " (SIGKILL after the grace period)";
  }
  if (cgroup_) {
    Status st = cgroup_->destroy();
    if (!st.isOk()) log(st.toString());
    if (launch_.container) {
      // Podman's --cgroup-parent made the task's group in every hierarchy, not only the ones
      // the task uses.
      Result<CgroupLayout> layout = CgroupLayout::detect();
      st = layout.ok()
               ? TaskCgroup::removeEverywhere(*layout, options_.cgroup_parent, launch_.taskName())
               : layout.status();
      if (!st.isOk()) log(st.toString());
    }
  }
  // The end goes first into the record reserved at the start, which needs no new space: a
  // full disk must not turn the task's exit status into "ended without recording its end".
  Status reserved = writeEndRecord();
  if (!reserved.isOk()) log(reserved.toString());
  Status st = writeStatus(true);
  if (!st.isOk()) {
    log("cannot record the task's end in status.json: " + st.toString() +
        (reserved.isOk() ? " (kept in the reserved end record)" : ""));
  }
  log("task " + launch_.taskName() + " ended: " + std::string(taskStateName(status_.state)));
}

int Supervisor::run() {
  // Signals arrive through a signalfd so that the loop handles them synchronously.
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGUSR1, SIGHUP})
    sigaddset(&mask, sig);
  ::sigprocmask(SIG_BLOCK, &mask, nullptr);
  signal_fd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  ::signal(SIGPIPE, SIG_IGN);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  // The task must not inherit the launcher's reply pipe, or the launcher would never see EOF.
  if (ready_fd_ >= 0) ::fcntl(ready_fd_, F_SETFD, FD_CLOEXEC);

  status_.supervisor_pid = ::getpid();
  status_.supervisor_start_ticks = processStartTicks(::getpid()).valueOr(0);
  status_.state = TaskState::kStarting;
  (void)writeStatus(false);
  reserveEndRecord();

  Status st = signal_fd_ < 0 ? errnoStatus("signalfd failed", dir_, errno) : setUp();
  if (st.isOk()) st = startTask();
  if (!st.isOk()) {
    failStart(st);
    return 1;
  }
  // RUNNING is written atomically but not fsynced: it only matters while the server is up (a
  // crash of the server ends the task anyway, and then NODE_FAIL is the truth). The end of the
  // task is what must survive, and that record is fsynced.
  st = writeStatus(false);
  if (!st.isOk()) log("cannot record RUNNING: " + st.toString());
  reportReady("ok " + std::to_string(status_.task_pid));
  loop();
  finish();
  return 0;
}

}  // namespace

std::string toJson(const SupervisorOptions& o) {
  json rules = json::array();
  for (const DeviceRule& r : o.extra_device_rules)
    rules.push_back(r.toV1());
  json j = {{"use_cgroups", o.use_cgroups},
            {"cgroup_parent", o.cgroup_parent},
            {"filter_devices", o.filter_devices},
            {"device_filter", std::string(filterName(o.device_filter))},
            {"extra_device_rules", rules},
            {"allow_root", o.allow_root},
            {"podman", o.podman},
            {"container_runtime", o.container_runtime},
            {"gpu_device_dir", o.gpu_device_dir},
            {"image_dir", o.image_dir},
            {"project_dir_mode", o.project_dir_mode}};
  return j.dump(2);
}

Result<SupervisorOptions> supervisorOptionsFromJson(std::string_view text) {
  try {
    json j = json::parse(text);
    SupervisorOptions o;
    o.use_cgroups = j.value("use_cgroups", true);
    o.cgroup_parent = j.value("cgroup_parent", "gpool");
    o.filter_devices = j.value("filter_devices", true);
    std::string filter = j.value("device_filter", "auto");
    o.device_filter = filter == "v1"     ? DeviceFilterKind::kV1Controller
                      : filter == "bpf"  ? DeviceFilterKind::kBpf
                      : filter == "none" ? DeviceFilterKind::kNone
                                         : DeviceFilterKind::kAuto;
    for (const json& r : j.value("extra_device_rules", json::array())) {
      GPOOL_ASSIGN_OR_RETURN(DeviceRule rule, parseDeviceRule(r.get<std::string>()));
      o.extra_device_rules.push_back(rule);
    }
    o.allow_root = j.value("allow_root", false);
    o.podman = j.value("podman", o.podman);
    o.container_runtime = j.value("container_runtime", o.container_runtime);
    o.gpu_device_dir = j.value("gpu_device_dir", o.gpu_device_dir);
    o.image_dir = j.value("image_dir", o.image_dir);
    o.project_dir_mode = j.value("project_dir_mode", o.project_dir_mode);
    return o;
  } catch (const json::exception& e) {
    return Status::invalidArgument(std::string("supervisor options JSON is malformed: ") +
                                   e.what());
  }
}

std::string toJson(const UnixUser& u) {
  json j = {{"name", u.name}, {"uid", u.uid},     {"gid", u.gid},
            {"home", u.home}, {"shell", u.shell}, {"groups", u.groups}};
  return j.dump(2);
}

Result<UnixUser> unixUserFromJson(std::string_view text) {
  try {
    json j = json::parse(text);
    UnixUser u;
    u.name = j.at("name").get<std::string>();
    u.uid = j.at("uid").get<uid_t>();
    u.gid = j.at("gid").get<gid_t>();
    u.home = j.value("home", "/");
    u.shell = j.value("shell", "/bin/sh");
    u.groups = j.value("groups", std::vector<gid_t>{});
    return u;
  } catch (const json::exception& e) {
    return Status::invalidArgument(std::string("user JSON is malformed: ") + e.what());
  }
}

std::vector<DeviceRule> taskDeviceRules(const std::vector<int32_t>& gpu_minors,
                                        const std::vector<DeviceRule>& extra) {
  std::vector<DeviceRule> rules = baseDeviceRules();
  std::vector<int64_t> uvm;
  if (!gpu_minors.empty()) {
    auto devices = readFile("/proc/devices");
    if (devices.ok()) uvm = charMajorsNamed(*devices, "nvidia-uvm");
  }
  for (const DeviceRule& r : gpuDeviceRules(gpu_minors, uvm))
    rules.push_back(r);
  rules.insert(rules.end(), extra.begin(), extra.end());
  return rules;
}

int runSupervisor(const std::string& task_dir, int ready_fd) {
  Supervisor supervisor(task_dir, ready_fd);
  return supervisor.run();
}

}  // namespace gpool::agent
