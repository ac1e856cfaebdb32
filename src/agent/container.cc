#include "agent/container.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "agent/cgroup.h"
#include "agent/sys_util.h"

namespace gpool::agent {
namespace {

// Runs `argv` with podman's environment, stdin on /dev/null, stdout on /dev/null (into `err`
// too with `with_stdout`), stderr into `err` (first 4 KiB). Returns the exit status (128+signal
// when killed), or an error when it could not be started. With a `timeout`, a command still
// running then is killed (DeadlineExceeded).
Result<int> runQuiet(const std::vector<std::string>& argv, std::string* err,
                     bool with_stdout = false,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(0)) {
  std::vector<char*> cargv;
  std::vector<std::string> args = argv;
  for (std::string& a : args)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<std::string> env = podmanEnvironment();
  std::vector<char*> envp;
  for (std::string& e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return errnoStatus("pipe failed", argv[0], errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (with_stdout) {
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  } else {
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 2);
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, cargv[0], &actions, nullptr, cargv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    return errnoStatus("cannot run", argv[0], rc);
  }
  char buf[1024];
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  for (;;) {
    if (timeout.count() > 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{pipe_fds[0], POLLIN, 0};
      int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        timed_out = true;
        ::kill(pid, SIGKILL);
        break;
      }
    }
    ssize_t n = ::read(pipe_fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (err != nullptr && err->size() < 4096) err->append(buf, static_cast<size_t>(n));
  }
  ::close(pipe_fds[0]);
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Status::deadlineExceeded(argv[0] + " " + argv[1] + " ran longer than " +
                                    std::to_string(timeout.count()) + " ms");
  }
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  return text;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// "--ulimit name=soft:hard" with this process's limits: Podman's defaults (nofile 1048576,
// nproc 4194304) exceed the hard limits of many hosts, and the start then fails with
// "setrlimit ...: Operation not permitted". The task gets what a bare task would.
std::string ulimitArg(const char* name, int resource) {
  rlimit rl{};
  ::getrlimit(resource, &rl);
  if (resource == RLIMIT_NPROC) {
    // Podman caps its own RLIMIT_NPROC (and so conmon's and the runtime's) at the kernel's
    // pid_max; asking the container for more fails with EPERM (seen with pid_max 32768 and a
    // host limit of 96367). More processes than pids exist mean nothing anyway.
    auto text = readFile("/proc/sys/kernel/pid_max");
    rlim_t pid_max = text.ok() ? std::strtoull(text->c_str(), nullptr, 10) : 0;
    if (pid_max > 0) {
      rl.rlim_cur = std::min(rl.rlim_cur, pid_max);
      rl.rlim_max = std::min(rl.rlim_max, pid_max);
    }
  }
  auto fmt = [](rlim_t v) { return v == RLIM_INFINITY ? std::string("-1") : std::to_string(v); };
  return std::string(name) + "=" + fmt(rl.rlim_cur) + ":" + fmt(rl.rlim_max);
}

}  // namespace

std::string containerName(const TaskLaunch& launch, const std::string& task_dir) {
  uint32_t h = 2166136261u;  // FNV-1a: the same name in every process that computes it
  for (unsigned char c : task_dir) {
    h ^= c;
    h *= 16777619u;
  }
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return "gpool-" + launch.taskName() + "-" + hex;
}

std::vector<DeviceRule> containerRuntimeDeviceRules() {
  return {{'c', 10, 200, "rwm"}};  // /dev/net/tun: useless without CAP_NET_ADMIN
}

std::vector<std::string> podmanEnvironment() {
  return {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root",
          "LANG=C.UTF-8"};
}

Result<std::vector<std::string>> podmanRunCommand(const TaskLaunch& launch, const UnixUser& user,
                                                  const std::map<std::string, std::string>& env,
                                                  const SupervisorOptions& options,
                                                  const ContainerContext& context) {
  const ContainerSpec& spec = *launch.container;
  std::string env_text;
  for (const auto& [key, value] : env) {
    if (value.find('\n') != std::string::npos) {
      return Status::invalidArgument("environment variable " + key +
                                     " holds a newline, which a container's environment file "
                                     "cannot carry");
    }
    env_text += key + "=" + value + "\n";
  }
  const std::string env_file = context.task_dir + "/container.env";
  GPOOL_RETURN_IF_ERROR(writeFileAtomically(env_file, env_text, 0600));

  std::vector<std::string> a = {
      options.podman, "--runtime", options.container_runtime, "--cgroup-manager", "cgroupfs", "run",
      "--rm", "--replace", "--name", containerName(launch, context.task_dir), "--label",
      "gpool.task_dir=" + context.task_dir, "--pull", "never",
      // The container writes straight into the task's log files
      // (podman's stdout and stderr), as a bare task does.
      "--log-driver", "passthrough", "--cgroupns", "host", "--cgroup-parent", context.cgroup_path,
      // Host network and PIDs, as a bare task: NCCL and torchrun
      // rendezvous on the host's addresses, and the supervisor's
      // SIGTERM reaches the program even as the container's first
      // process (which, as a PID namespace's init, ignores it).
      "--network", "host", "--pid", "host", "--ipc", "host", "--user",
      std::to_string(user.uid) + ":" + std::to_string(user.gid), "--ulimit",
      ulimitArg("nofile", RLIMIT_NOFILE), "--ulimit", ulimitArg("nproc", RLIMIT_NPROC),
      "--env-file", env_file, "--workdir", context.work_dir, "--volume",
      context.work_dir + ":" + context.work_dir};
  for (gid_t g : user.groups) {
    if (g != user.gid) {
      a.push_back("--group-add");
      a.push_back(std::to_string(g));
    }
  }
  if (user.uid != 0) {
    // Never root inside: no capabilities, and no way to regain them through setuid files.
    a.insert(a.end(), {"--cap-drop", "all", "--security-opt", "no-new-privileges"});
  }
  if (!launch.project_dir.empty()) {
    a.insert(a.end(), {"--volume", launch.project_dir + ":" + launch.project_dir});
  }
  for (const BindMount& m : spec.mounts) {
    a.push_back("--volume");
    a.push_back(formatBindMount(m));
  }
  // Only the task's GPUs; the runtime's device cgroup adds them to its defaults, below the
  // task's own whitelist (which denies every other GPU).
  const std::string& dev = context.gpu_device_dir;
  for (const TaskGpu& gpu : launch.gpus) {
    std::string node = "nvidia" + std::to_string(gpu.minor);
    a.push_back("--device");
    // "rw" as the task's own whitelist has it (a child group may not add mknod).
    a.push_back(dev + "/" + node + ":/dev/" + node + ":rw");
  }
  if (!launch.gpus.empty()) {
    for (const char* node : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
      if (!exists(dev + "/" + node)) continue;
      a.push_back("--device");
      a.push_back(dev + "/" + node + ":/dev/" + node + ":rw");
    }
  }
  if (launch.slice && !launch.slice->interposer.empty()) {
    // The interposer at the same path as on the host (LD_PRELOAD names it), read-only, and
    // named in the container's /etc/ld.so.preload, which the dynamic loader reads whatever
    // the environment says: `env -u LD_PRELOAD` does not lift the quota.
    const std::string preload = context.task_dir + "/ld.so.preload";
    GPOOL_RETURN_IF_ERROR(writeFileAtomically(preload, launch.slice->interposer + "\n", 0644));
    a.insert(a.end(),
             {"--volume", launch.slice->interposer + ":" + launch.slice->interposer + ":ro",
              "--volume", preload + ":/etc/ld.so.preload:ro"});
    if (!launch.slice->shm_path.empty()) {
      // The region is two files, <shm_path>.limits and <shm_path>.usage, in a directory of its
      // own that only the task's user may enter (docs/vgpu-shm.md): the directory is mounted at
      // its host path, keeping its owner, mode and ACL, so the same user reaches it inside and
      // nobody else does.
      const size_t slash = launch.slice->shm_path.rfind('/');
      if (slash == std::string::npos || slash == 0) {
        return Status::invalidArgument("slice region '" + launch.slice->shm_path +
                                       "' is not in a directory of its own");
      }
      const std::string region_dir = launch.slice->shm_path.substr(0, slash);
      a.insert(a.end(), {"--volume", region_dir + ":" + region_dir});
    }
  }
  if (!spec.image.empty() && spec.image.front() == '/') {
    // A root filesystem directory may be shared by every task of the node: read-only, with
    // fresh tmpfs on /tmp, /var/tmp and /run (Podman's --read-only-tmpfs).
    a.insert(a.end(), {"--read-only", "--rootfs", spec.image});
  } else {
    a.push_back(spec.image);
  }
  a.insert(a.end(), launch.argv.begin(), launch.argv.end());
  return a;
}

std::string imageArchivePath(const std::string& image_dir, const std::string& image) {
  if (image_dir.empty()) return "";
  std::string name = image.rfind("localhost/", 0) == 0 ? image.substr(10) : image;
  std::string tag = "latest";
  if (const size_t colon = name.find(':'); colon != std::string::npos) {
    tag = name.substr(colon + 1);
    name.resize(colon);
  }
  // Letters, digits, '.', '_' and '-', not starting with '.': no '/', so the name cannot leave
  // the directory, and no second ':'.
  auto plain = [](const std::string& part) {
    if (part.empty() || part.size() > 128 || part.front() == '.') return false;
    for (char c : part) {
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '.' || c == '_' || c == '-')) {
        return false;
      }
    }
    return true;
  };
  if (!plain(name) || !plain(tag)) return "";
  return image_dir + "/" + name + "/" + tag + ".tar";
}

namespace {

// podman image exists: true/false, or an error when Podman itself failed.
Result<bool> imageExists(const SupervisorOptions& options, const std::string& image) {
  std::string err;
  GPOOL_ASSIGN_OR_RETURN(int rc, runQuiet({options.podman, "image", "exists", image}, &err));
  if (rc == 0) return true;
  if (rc == 1) return false;
  return Status::failedPrecondition("image '" + image + "': podman image exists failed (" +
                                    std::to_string(rc) + "): " + trimmed(err));
}

// The first line of Podman's message, for a job's reason (a failed load lists every format it
// tried, one per line).
std::string firstLine(const std::string& text) {
  std::string line = trimmed(text.substr(0, text.find('\n')));
  if (line.rfind("Error: ", 0) == 0) line = line.substr(7);
  if (!line.empty() && line.back() == ':') line.pop_back();
  return line;
}

// The longest a task's start waits for its image (another task's load included): the agent
// waits 30 s for a supervisor's start (Launcher::Options::start_timeout), and Podman's own
// start follows.
constexpr std::chrono::milliseconds kImageLoadTimeout{20'000};

// An exclusive lock on a file, held for the object's lifetime once taken. Taken at once when
// the file cannot be opened (then two tasks may load the same archive together, which costs
// time and nothing else); not taken when another holder keeps it past `deadline`.
class LoadLock {
 public:
  LoadLock(const char* path, std::chrono::steady_clock::time_point deadline)
      : fd_(::open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    // flock has no timeout: poll it (a load takes seconds; 50 ms more is nothing).
    for (;;) {
      if (fd_ < 0 || ::flock(fd_, LOCK_EX | LOCK_NB) == 0) break;
      if (errno == EINTR) continue;
      if (errno != EWOULDBLOCK) break;  // no locking on this file system: load unlocked
      if (std::chrono::steady_clock::now() > deadline) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    held_ = true;
  }
  ~LoadLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  LoadLock(const LoadLock&) = delete;
  LoadLock& operator=(const LoadLock&) = delete;
  bool held() const { return held_; }

 private:
  int fd_;
  bool held_ = false;
};

}  // namespace

Result<std::string> ensureImage(const SupervisorOptions& options, const std::string& image) {
  if (!image.empty() && image.front() == '/') {
    struct stat st;
    if (::stat(image.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return Status::failedPrecondition("image '" + image +
                                        "': no such root filesystem directory on this node");
    }
    return std::string();
  }
  GPOOL_ASSIGN_OR_RETURN(bool present, imageExists(options, image));
  if (present) return std::string();  // cached: nothing to load
  const std::string archive = imageArchivePath(options.image_dir, image);
  if (archive.empty() || !exists(archive)) {
    return Status::failedPrecondition(
        "image '" + image + "' is not on this node" +
        (archive.empty() ? std::string() : " and the node's image directory has no " + archive) +
        (options.image_dir.empty() ? " (load it with `podman load` or pull it"
                                   : " (put its archive there, or load it with `podman load`") +
        "; see docs/containers.md)");
  }
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + kImageLoadTimeout;
  const std::string too_long = "image '" + image + "': loading " + archive +
                               " would take longer than " +
                               std::to_string(kImageLoadTimeout.count() / 1000) +
                               " s, the most a task's start may wait; load it on the node "
                               "beforehand (podman load)";
  // One load at a time per machine (Podman's store is the machine's, whichever agent asks):
  // a task that waited here finds the image its neighbour loaded.
  LoadLock lock("/run/lock/gpool-image-load.lock", deadline);
  if (!lock.held()) return Status::failedPrecondition(too_long + " (another load held the node)");
  GPOOL_ASSIGN_OR_RETURN(present, imageExists(options, image));
  if (present) return std::string();
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return Status::failedPrecondition(too_long);
  std::string out;
  Result<int> loaded_rc = runQuiet({options.podman, "load", "--quiet", "--input", archive}, &out,
                                   /*with_stdout=*/true, left);
  if (!loaded_rc.ok()) return Status::failedPrecondition(too_long);
  int rc = *loaded_rc;
  if (rc != 0) {
    return Status::failedPrecondition("image '" + image + "': cannot load " + archive +
                                      " (not an OCI or Docker image archive?): " + firstLine(out));
  }
  // "Loaded image: <ref>" (or "Loaded image(s): <ref>, ..."): the archive's own name, which
  // need not be the one asked for; the image is tagged with the name the job gave.
  const size_t colon = out.find("Loaded image");
  const size_t from = colon == std::string::npos ? colon : out.find(": ", colon);
  if (from == std::string::npos) {
    return Status::failedPrecondition("image '" + image + "': podman load of " + archive +
                                      " named no image: " + firstLine(out));
  }
  std::string loaded = firstLine(out.substr(from + 2));
  loaded = loaded.substr(0, loaded.find(','));
  std::string err;
  GPOOL_ASSIGN_OR_RETURN(rc, runQuiet({options.podman, "tag", loaded, image}, &err));
  if (rc != 0) {
    return Status::failedPrecondition("image '" + image + "': cannot tag " + loaded +
                                      " loaded from " + archive + ": " + firstLine(err));
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  return "image " + image + " loaded from " + archive + " in " + std::to_string(ms) + " ms";
}

Status checkUserReaches(const UnixUser& user, const std::vector<std::string>& paths) {
  if (paths.empty()) return Status::ok();
  pid_t pid = ::fork();
  if (pid < 0) return errnoStatus("fork failed", paths.front(), errno);
  if (pid == 0) {
    if (switchToUser(user) != 0) ::_exit(255);
    for (size_t i = 0; i < paths.size() && i < 250; ++i) {
      // O_PATH needs search permission on every directory on the way, as the user's own
      // programs would.
      int fd = ::open(paths[i].c_str(), O_PATH | O_CLOEXEC);
      if (fd < 0) ::_exit(static_cast<int>(i) + 1);
      ::close(fd);
    }
    ::_exit(0);
  }
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(ws)) return Status::internal("the access check of the task's paths crashed");
  int code = WEXITSTATUS(ws);
  if (code == 0) return Status::ok();
  if (code == 255) return Status::permissionDenied("cannot switch to user '" + user.name + "'");
  return Status::permissionDenied("user '" + user.name + "' cannot reach '" + paths[code - 1] +
                                  "', so it is not mounted into the container");
}

Status removeContainer(const SupervisorOptions& options, const std::string& name) {
  std::string err;
  GPOOL_ASSIGN_OR_RETURN(
      int rc, runQuiet({options.podman, "--runtime", options.container_runtime, "--cgroup-manager",
                        "cgroupfs", "rm", "--force", "--ignore", "--time", "0", name},
                       &err));
  if (rc != 0) {
    return Status::ioError("podman rm " + name + " failed (" + std::to_string(rc) +
                           "): " + trimmed(err));
  }
  return Status::ok();
}

Result<std::string> chooseContainerRuntime(const std::string& forced) {
  auto installed = [](const std::string& name) {
    for (const char* dir : {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin"}) {
      if (::access((std::string(dir) + "/" + name).c_str(), X_OK) == 0) return true;
    }
    return false;
  };
  if (!forced.empty() && forced != "auto") {
    if (forced != "runc" && forced != "crun") {
      return Status::invalidArgument("container runtime must be auto, runc or crun, not '" +
                                     forced + "'");
    }
    if (!installed(forced)) {
      return Status::failedPrecondition("container runtime " + forced + " is not installed");
    }
    return forced;
  }
  GPOOL_ASSIGN_OR_RETURN(CgroupLayout layout, CgroupLayout::detect());
  // crun 1.8 fails on hosts with v1 controllers beside the v2 tree.
  bool has_v1 = !layout.v1_mounts.empty();
  std::vector<std::string> order =
      has_v1 ? std::vector<std::string>{"runc"} : std::vector<std::string>{"crun", "runc"};
  for (const std::string& r : order) {
    if (installed(r)) return r;
  }
  return Status::failedPrecondition(
      has_v1 ? "no runc installed (crun cannot run containers on this host's v1 cgroups)"
             : "neither crun nor runc is installed");
}

}  // namespace gpool::agent
