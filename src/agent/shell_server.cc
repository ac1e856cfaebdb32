#include "agent/shell_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <nlohmann/json.hpp>

#include "agent/container.h"
#include "agent/sys_util.h"
#include "agent/task_launch.h"
#include "agent/unix_user.h"

namespace gpool::agent {

using nlohmann::json;

namespace {

constexpr size_t kMaxRequest = 4096;
constexpr int kIoTimeoutMs = 5000;

json failure(const Status& s) {
  return json{
      {"ok", false}, {"code", std::string(statusCodeName(s.code()))}, {"message", s.message()}};
}

StatusCode codeFromName(std::string_view name) {
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    if (statusCodeName(static_cast<StatusCode>(c)) == name) return static_cast<StatusCode>(c);
  }
  return StatusCode::kInternal;
}

// Reads up to the first newline (or EOF) within the deadline; false on error, timeout or an
// oversized line. Descriptors passed with the line (SCM_RIGHTS, at most 3) are appended to
// `fds` when given (the caller closes them), closed otherwise.
bool readLine(int fd, std::string* out, std::vector<int>* fds = nullptr) {
  char buf[512];
  while (out->find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kIoTimeoutMs) <= 0) return false;
    iovec iov{buf, sizeof(buf)};
    alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    for (cmsghdr* c = n >= 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c != nullptr;
         c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int passed;
        std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (fds != nullptr && fds->size() < 3) {
          fds->push_back(passed);
        } else {
          ::close(passed);
        }
      }
    }
    if (n <= 0) return !out->empty();
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > kMaxRequest) return false;
  }
  out->resize(out->find('\n'));
  return true;
}

bool writeAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

bool validTaskName(const std::string& name) {
  // "<job>.<index>": digits and one dot, so the name cannot walk out of the state root.
  size_t dot = name.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == name.size()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    if (i != dot && (name[i] < '0' || name[i] > '9')) return false;
  }
  return name.size() < 40;
}

}  // namespace

json ShellServer::answer(const json& request, uid_t uid, pid_t pid) {
  if (!request.is_object() || !request.contains("task") || !request["task"].is_string()) {
    return failure(Status::invalidArgument("request: expected {\"task\": \"<job>.<index>\"}"));
  }
  const std::string name = request["task"].get<std::string>();
  if (!validTaskName(name)) {
    return failure(Status::invalidArgument("task: '" + name + "' is not <job>.<index>"));
  }
  Result<TaskInfo> info = launcher_.info(name);
  if (!info.ok()) {
    if (info.status().code() == StatusCode::kNotFound) {
      return failure(Status::notFound("task " + name + " does not run on this server"));
    }
    return failure(info.status());
  }
  Result<std::string> user_text = readFile(info->dir + "/user.json");
  if (!user_text.ok()) return failure(user_text.status());
  Result<UnixUser> owner = unixUserFromJson(*user_text);
  if (!owner.ok()) return failure(owner.status());
  if (uid != 0 && uid != owner->uid) {
    return failure(Status::permissionDenied("task " + name + " belongs to " + owner->name +
                                            "; only its owner or root may enter it"));
  }
  if (info->status.state != TaskState::kRunning || !info->supervisor_alive) {
    return failure(Status::failedPrecondition("task " + name + " is not running (" +
                                              std::string(taskStateName(info->status.state)) +
                                              ")"));
  }
  Result<std::string> launch_text = readFile(info->dir + "/launch.json");
  if (!launch_text.ok()) return failure(launch_text.status());
  Result<TaskLaunch> launch = taskLaunchFromJson(*launch_text);
  if (!launch.ok()) return failure(launch.status());
  const bool exec = request.contains("exec");
  if (exec) {
    // `gpool shell` into a container: the command runs in the task's container (podman exec
    // as the task's user), which is in the task's groups already; nothing is adopted.
    if (!launch->container) {
      return failure(Status::failedPrecondition("task " + name + " does not run in a container"));
    }
    if (!request["exec"].is_array() || request["exec"].empty() || request["exec"].size() > 256) {
      return failure(Status::invalidArgument("exec: expected a non-empty list of arguments"));
    }
    for (const json& a : request["exec"]) {
      if (!a.is_string()) return failure(Status::invalidArgument("exec: arguments are strings"));
    }
    return json{{"ok", true},
                {"task", name},
                {"container", containerName(*launch, info->dir)},
                {"user", {{"name", owner->name}, {"uid", owner->uid}, {"gid", owner->gid}}}};
  }
  Result<std::map<std::string, std::string>> env = launcher_.taskEnvironment(name);
  if (!env.ok()) return failure(env.status());
  bool cgroup = launcher_.options().supervisor.use_cgroups;
  if (cgroup) {
    Status s = launcher_.adoptProcess(name, pid);
    if (!s.isOk()) return failure(s);
  }
  json groups = json::array();
  for (gid_t g : owner->groups)
    groups.push_back(g);
  return json{{"ok", true},
              {"task", name},
              {"env", *env},
              {"working_dir", launch->working_dir.empty() ? owner->home : launch->working_dir},
              {"cgroup", cgroup},
              {"user",
               {{"name", owner->name},
                {"uid", owner->uid},
                {"gid", owner->gid},
                {"groups", groups},
                {"home", owner->home},
                {"shell", owner->shell}}}};
}

Status ShellServer::start(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status::invalidArgument("shell socket path too long (" + std::to_string(path.size()) +
                                   " bytes): " + path);
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::ioError("socket: " + std::string(std::strerror(errno)));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());  // a stale socket of an earlier agent
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::chmod(path.c_str(), 0666) != 0 || ::listen(fd, 16) != 0) {
    Status s = Status::ioError("shell socket " + path + ": " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  if (::pipe2(wake_fd_, O_CLOEXEC) != 0) {
    ::close(fd);
    return Status::ioError("pipe: " + std::string(std::strerror(errno)));
  }
  listen_fd_ = fd;
  path_ = path;
  thread_ = std::thread([this] { serve(); });
  return Status::ok();
}

void ShellServer::stop() {
  if (!thread_.joinable()) return;
  (void)!::write(wake_fd_[1], "x", 1);
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_fd_[0]);
  ::close(wake_fd_[1]);
  listen_fd_ = -1;
  ::unlink(path_.c_str());
}

void ShellServer::serve() {
  for (;;) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents != 0) return;
    int conn = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    ucred cred{};
    socklen_t len = sizeof(cred);
    std::string line;
    std::vector<int> fds;
    json request;
    json reply;
    if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      reply = failure(Status::internal("cannot read the peer's credentials"));
    } else if (!readLine(conn, &line, &fds)) {
      reply = failure(Status::invalidArgument("no request line"));
    } else {
      request = json::parse(line, nullptr, false);
      reply = answer(request, cred.uid, cred.pid);
    }
    bool handed_over = false;  // the exec's process answers from now on
    if (reply.value("ok", false) && reply.contains("container")) {
      if (fds.size() != 3) {
        reply = failure(Status::invalidArgument(
            "exec: pass the terminal's stdin, stdout and stderr with the request"));
      } else {
        Status started =
            startContainerExec(conn, reply, request["exec"], request.value("tty", false), fds);
        handed_over = started.isOk();
        if (!started.isOk()) reply = failure(started);
      }
    }
    if (!handed_over) (void)writeAll(conn, reply.dump() + "\n");
    for (int f : fds)
      ::close(f);
    ::close(conn);
  }
}

Status ShellServer::startContainerExec(int conn, const json& reply, const json& command, bool tty,
                                       const std::vector<int>& fds) {
  const SupervisorOptions& o = launcher_.options().supervisor;
  const json& user = reply["user"];
  std::vector<std::string> args = {o.podman,   "--runtime", o.container_runtime, "--cgroup-manager",
                                   "cgroupfs", "exec",      "--interactive"};
  if (tty) args.push_back("--tty");
  args.insert(args.end(), {"--user",
                           std::to_string(user["uid"].get<uid_t>()) + ":" +
                               std::to_string(user["gid"].get<gid_t>()),
                           reply["container"].get<std::string>()});
  for (const json& a : command)
    args.push_back(a.get<std::string>());
  std::vector<std::string> env = podmanEnvironment();
  // Everything the children use is made before fork (the agent has threads).
  std::vector<char*> argv;
  for (std::string& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string accepted = json{{"ok", true}, {"container", reply["container"]}}.dump() + "\n";
  // Twice forked, so that the agent neither waits for the session nor leaves a zombie: the
  // grandchild runs podman exec on the client's descriptors and sends its exit code when it
  // ends (the client waits on the connection).
  pid_t pid = ::fork();
  if (pid < 0) return errnoStatus("fork failed", "podman exec", errno);
  if (pid == 0) {
    ::setsid();
    pid_t session = ::fork();
    if (session != 0) ::_exit(session < 0 ? 1 : 0);
    pid_t exec = ::fork();
    if (exec == 0) {
      for (int i = 0; i < 3; ++i)
        ::dup2(fds[i], i);
      ::close_range(3, ~0U, 0);  // nothing of the agent's (its link to gpoold, its sockets)
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
    // The waiter keeps only the connection: an agent that ends or restarts while the session
    // runs must not leave its link to gpoold or its sockets open in here.
    for (int f : fds)
      ::close(f);
    if (conn > 3) ::close_range(3, static_cast<unsigned>(conn) - 1, 0);
    ::close_range(static_cast<unsigned>(conn) + 1, ~0U, 0);
    if (!writeAll(conn, accepted) || exec < 0) ::_exit(1);
    // Until podman exec ends, each "winch" line from the client (its terminal was resized) is
    // passed on as SIGWINCH: podman then reads the new size from the terminal it was given and
    // resizes the container's. Podman is not in the terminal's foreground process group, so the
    // kernel's own SIGWINCH never reaches it. Without a pidfd (kernels before 5.3) the size
    // stays the one at the start.
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, exec, 0));
    bool client_open = true;
    while (pidfd >= 0) {
      pollfd p[2] = {{pidfd, POLLIN, 0}, {client_open ? conn : -1, POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (p[0].revents != 0) break;
      if (p[1].revents == 0) continue;
      char buf[64];
      ssize_t got = ::recv(conn, buf, sizeof(buf), MSG_DONTWAIT);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) {
        client_open = false;  // the client left; the command runs on to its end
        continue;
      }
      for (ssize_t i = 0; i < got; ++i) {
        if (buf[i] == '\n') ::kill(exec, SIGWINCH);
      }
    }
    int ws = 0;
    while (::waitpid(exec, &ws, 0) < 0 && errno == EINTR) {
    }
    int code = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    // {"exit_code": N}, without allocating.
    char text[32] = "{\"exit_code\": ";
    size_t n = std::strlen(text);
    if (code >= 100) text[n++] = static_cast<char>('0' + code / 100);
    if (code >= 10) text[n++] = static_cast<char>('0' + code / 10 % 10);
    text[n++] = static_cast<char>('0' + code % 10);
    text[n++] = '}';
    text[n++] = '\n';
    (void)!::send(conn, text, n, MSG_NOSIGNAL);
    ::_exit(0);
  }
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    return Status::internal("could not start podman exec for task " +
                            reply.value("task", std::string()));
  }
  return Status::ok();
}

namespace {

// A connected stream to the agent's shell socket at `socket_path`; the caller closes it.
Result<int> connectShellSocket(const std::string& socket_path) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof(addr.sun_path)) {
    return Status::invalidArgument("shell socket path too long: " + socket_path);
  }
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::ioError("socket: " + std::string(std::strerror(errno)));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status s = Status::unavailable("cannot connect to the agent's shell socket " + socket_path +
                                   ": " + std::strerror(errno));
    ::close(fd);
    return s;
  }
  return fd;
}

// The connection of the running requestContainerExec, for forwardWinch.
volatile sig_atomic_t winch_fd = -1;

void forwardWinch(int) {
  const int saved = errno;
  const int fd = winch_fd;
  if (fd >= 0) (void)!::send(fd, "winch\n", 6, MSG_NOSIGNAL | MSG_DONTWAIT);
  errno = saved;
}

}  // namespace

Result<json> requestShellAdoption(const std::string& socket_path, const std::string& task) {
  GPOOL_ASSIGN_OR_RETURN(int fd, connectShellSocket(socket_path));
  std::string line;
  bool ok = writeAll(fd, json{{"task", task}}.dump() + "\n") && readLine(fd, &line);
  ::close(fd);
  if (!ok) return Status::unavailable("the agent at " + socket_path + " did not answer");
  json reply = json::parse(line, nullptr, false);
  if (!reply.is_object()) return Status::internal("the agent's answer is not JSON: " + line);
  if (!reply.value("ok", false)) {
    return Status(codeFromName(reply.value("code", "internal")), reply.value("message", ""));
  }
  return reply;
}

Result<int> requestContainerExec(const std::string& socket_path, const std::string& task,
                                 const std::vector<std::string>& command, bool tty) {
  GPOOL_ASSIGN_OR_RETURN(int fd, connectShellSocket(socket_path));
  std::string request = json{{"task", task}, {"exec", command}, {"tty", tty}}.dump() + "\n";
  iovec iov{request.data(), request.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c == nullptr) {
    ::close(fd);
    return Status::internal("no room for the descriptors in the request");
  }
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(3 * sizeof(int));
  const int stdio[3] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
  std::memcpy(CMSG_DATA(c), stdio, sizeof(stdio));
  ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  bool ok = sent > 0 && (static_cast<size_t>(sent) == request.size() ||
                         writeAll(fd, request.substr(static_cast<size_t>(sent))));
  std::string line;
  ok = ok && readLine(fd, &line);
  if (!ok) {
    ::close(fd);
    return Status::unavailable("the agent at " + socket_path + " did not answer");
  }
  json reply = json::parse(line, nullptr, false);
  if (!reply.is_object() || !reply.value("ok", false)) {
    ::close(fd);
    if (!reply.is_object()) return Status::internal("the agent's answer is not JSON: " + line);
    return Status(codeFromName(reply.value("code", "internal")), reply.value("message", ""));
  }
  // While the command runs, a resize of this terminal (SIGWINCH, which reaches this process and
  // not the agent's podman exec) is passed on as a "winch" line.
  struct sigaction old_winch {};
  if (tty) {
    winch_fd = fd;
    struct sigaction on_winch {};
    on_winch.sa_handler = forwardWinch;
    on_winch.sa_flags = SA_RESTART;
    ::sigemptyset(&on_winch.sa_mask);
    ::sigaction(SIGWINCH, &on_winch, &old_winch);
  }
  // The command runs as long as it likes: wait for its end without a deadline.
  std::string end;
  char buf[256];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    end.append(buf, static_cast<size_t>(n));
    if (end.find('\n') != std::string::npos || end.size() > kMaxRequest) break;
  }
  if (tty) {
    ::sigaction(SIGWINCH, &old_winch, nullptr);
    winch_fd = -1;
  }
  ::close(fd);
  json done = json::parse(end.substr(0, end.find('\n')), nullptr, false);
  if (!done.is_object() || !done.contains("exit_code") || !done["exit_code"].is_number()) {
    return Status::unavailable("the agent's podman exec in task " + task +
                               " ended without an exit code");
  }
  return done["exit_code"].get<int>();
}

}  // namespace gpool::agent
