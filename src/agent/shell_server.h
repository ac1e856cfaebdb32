#pragma once

#include <sys/types.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "agent/launcher.h"
#include "common/result.h"

namespace gpool::agent {

// The agent's local entry point for `gpool shell` (docs/launcher.md, "Interactive
// allocations"): a Unix socket, open to every local user, where a process asks to be moved into
// one of this node's running tasks. The kernel says who asks (SO_PEERCRED: uid and pid), so the
// request carries no identity: only the task's owner or root is let in, and only the asking
// process itself is adopted (as gpool-adopt does for SSH logins). The answer gives the task's
// environment, working directory and user; the client then sets them and execs the shell, so
// the shell keeps the client's terminal.
//
// Protocol: one request line `{"task": "<job>.<index>"}`, one answer line, then the server
// closes: `{"ok": true, "env": {...}, "working_dir": "...", "cgroup": bool, "user": {"name",
// "uid", "gid", "groups", "home", "shell"}}` or `{"ok": false, "code": "<status code name>",
// "message": "..."}`.
//
// A container task (docs/containers.md) is entered instead with `{"task": ..., "exec": [argv],
// "tty": bool}` sent together with the client's stdin, stdout and stderr (SCM_RIGHTS): the
// agent runs `podman exec` as the task's user in the task's container on those descriptors
// (a process of its own, so the server is not held), answers `{"ok": true, "container":
// "<name>"}` at once and `{"exit_code": N}` when the command ends. Until then the client may
// send a line `winch` whenever its terminal was resized: the agent passes SIGWINCH on to podman
// exec, which reads the new size from the terminal and resizes the container's. Only the
// task's owner or root, as for a bare task.
//
// Thread-safety: start/stop from one thread; connections are served one at a time on the
// server's own thread (each is a few file reads and a cgroup write).
class ShellServer {
 public:
  explicit ShellServer(Launcher& launcher) : launcher_(launcher) {}
  ~ShellServer() { stop(); }
  ShellServer(const ShellServer&) = delete;
  ShellServer& operator=(const ShellServer&) = delete;

  // Binds `path` (replacing a stale socket file), makes it connectable by everyone (0666) and
  // starts serving. IoError when the socket cannot be created.
  Status start(const std::string& path);
  void stop();

  // Answers one request from a peer with `uid` and `pid` (the serving logic without the
  // socket; exposed for tests).
  nlohmann::json answer(const nlohmann::json& request, uid_t uid, pid_t pid);

 private:
  void serve();
  // Starts `podman exec` of `command` in the container `reply` names, on `fds` (stdin, stdout,
  // stderr), in a detached process that writes the answers to `conn`.
  Status startContainerExec(int conn, const nlohmann::json& reply, const nlohmann::json& command,
                            bool tty, const std::vector<int>& fds);

  Launcher& launcher_;
  std::string path_;
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};
  std::thread thread_;
};

// The client side: asks the agent at `socket_path` to adopt the calling process into `task`
// and returns its answer (the "ok": true object). The error's code is the agent's (NotFound:
// no such task on this node; PermissionDenied: not the owner; FailedPrecondition: not
// running); Unavailable when nothing listens at `socket_path`.
Result<nlohmann::json> requestShellAdoption(const std::string& socket_path,
                                            const std::string& task);

// The client side for a container task: runs `command` in `task`'s container through the agent
// at `socket_path`, on this process's stdin, stdout and stderr (`tty`: with a terminal), and
// returns the command's exit code once it ends. With `tty`, the call installs a SIGWINCH
// handler while the command runs (restoring the caller's afterwards) that tells the agent of
// each resize of the terminal. Errors as requestShellAdoption's, and FailedPrecondition when
// the task is not in a container.
Result<int> requestContainerExec(const std::string& socket_path, const std::string& task,
                                 const std::vector<std::string>& command, bool tty);

}  // namespace gpool::agent
