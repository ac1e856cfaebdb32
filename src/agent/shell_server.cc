#include "agent/shell_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

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
// oversized line.
bool readLine(int fd, std::string* out) {
  char buf[512];
  while (out->find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kIoTimeoutMs) <= 0) return false;
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
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
    json reply;
    if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      reply = failure(Status::internal("cannot read the peer's credentials"));
    } else if (!readLine(conn, &line)) {
      reply = failure(Status::invalidArgument("no request line"));
    } else {
      reply = answer(json::parse(line, nullptr, false), cred.uid, cred.pid);
    }
    (void)writeAll(conn, reply.dump() + "\n");
    ::close(conn);
  }
}

Result<json> requestShellAdoption(const std::string& socket_path, const std::string& task) {
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

}  // namespace gpool::agent
