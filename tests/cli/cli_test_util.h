#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

// What the CLI tests share: running a real program to completion with its output captured, and
// a real gpoold to run it against.
// Header-only: each CLI test binary is one or two translation units.
namespace gpool::cli::testing {

inline const std::string kGpool = std::string(GPOOL_BINARY_DIR) + "/src/cli/gpool";
inline const std::string kGpoold = std::string(GPOOL_BINARY_DIR) + "/src/controller/gpoold";

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Output {
  int rc = -1;  // the exit code, or 128 + the signal that ended the program
  std::string out;
  std::string err;
};

// Who runs a program, where: `uid`/`gid` other than -1 switch to that user (root only) after
// the output files are opened; `cwd` when set; `stdin_path` when set replaces stdin.
struct RunAs {
  int uid = -1;
  int gid = -1;
  std::string cwd;
  std::string stdin_path;
};

// Starts `program` like runProgram but does not wait: returns its pid (the caller waits).
inline pid_t startProgram(const std::string& program, const std::vector<std::string>& args,
                          const std::string& dir,
                          const std::vector<std::pair<std::string, std::string>>& env,
                          const RunAs& as) {
  const std::string out_path = dir + "/stdout";
  const std::string err_path = dir + "/stderr";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) _exit(126);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    int in = open(as.stdin_path.empty() ? "/dev/null" : as.stdin_path.c_str(), O_RDONLY);
    if (in >= 0) dup2(in, STDIN_FILENO);
    for (const auto& [k, v] : env)
      setenv(k.c_str(), v.c_str(), 1);
    if (!as.cwd.empty() && chdir(as.cwd.c_str()) != 0) _exit(126);
    if (as.gid >= 0 && (setgroups(0, nullptr) != 0 || setgid(static_cast<gid_t>(as.gid)) != 0)) {
      _exit(126);
    }
    if (as.uid >= 0 && setuid(static_cast<uid_t>(as.uid)) != 0) _exit(126);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// The exit code of a finished program (128 + signal when a signal ended it).
inline int exitCodeOf(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs `program` with `args` (and `env` added) as `as` says and waits for it. stdout and
// stderr go to files under `dir` (dir/stdout, dir/stderr, overwritten), so neither can fill a
// pipe while the test waits; stdin is /dev/null unless `as.stdin_path` names a file.
inline Output runProgram(const std::string& program, const std::vector<std::string>& args,
                         const std::string& dir,
                         const std::vector<std::pair<std::string, std::string>>& env = {},
                         const RunAs& as = {}) {
  pid_t pid = startProgram(program, args, dir, env, as);
  int status = 0;
  Output o;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return o;
  o.rc = exitCodeOf(status);
  o.out = readFile(dir + "/stdout");
  o.err = readFile(dir + "/stderr");
  return o;
}

// RunAs for the passwd user `name` (uid and primary gid); nullopt when there is none.
inline std::optional<RunAs> runAsUser(const std::string& name) {
  struct passwd* pw = getpwnam(name.c_str());
  if (!pw) return std::nullopt;
  RunAs as;
  as.uid = static_cast<int>(pw->pw_uid);
  as.gid = static_cast<int>(pw->pw_gid);
  return as;
}

// Writes a gpoold configuration for the CLI tests to `path` and returns `path`: SQLite store
// `db` (synchronous NORMAL: tests need no durability), Unix socket `socket`, log level warn;
// `controller_extra` (whole `key = value` lines) is added to the [controller] table.
inline std::string writeGpooldConfig(const std::string& path, const std::string& db,
                                     const std::string& socket,
                                     const std::string& controller_extra = "") {
  std::ofstream(path) << "[controller]\nstore = \"" << db << "\"\n"
                      << "sqlite_synchronous = \"NORMAL\"\nsocket = \"" << socket << "\"\n"
                      << controller_extra << "[log]\nlevel = \"warn\"\n";
  return path;
}

// A real gpoold started with `--config <file>` (and `extra_args`), for the CLI tests that drive
// the `gpool` binary against it. start() returns once gpoold has printed `ready` on stdout (no
// sleeps: it reads the pipe with a deadline); the lines printed before it (e.g. `tls HOST:PORT`)
// are kept in banner(). stop() sends SIGTERM and reaps it; the destructor does the same for a
// daemon a test left running, and SIGKILLs one that does not exit within the deadline, so no
// gpoold outlives its test (a leaked one holds CTest's output pipe and hangs the run).
// Not thread-safe; one object per daemon; not copyable.
class GpooldProcess {
 public:
  GpooldProcess() = default;
  GpooldProcess(const GpooldProcess&) = delete;
  GpooldProcess& operator=(const GpooldProcess&) = delete;
  ~GpooldProcess() {
    if (pid_ > 0) stop();
  }

  // Starts gpoold and waits up to `deadline` for its `ready` line. On failure (it exited, printed
  // something else last, or the deadline passed) the daemon is killed and reaped, and the
  // returned string says what happened; empty on success.
  std::string start(const std::string& config, const std::vector<std::string>& extra_args = {},
                    std::chrono::milliseconds deadline = std::chrono::seconds(60)) {
    if (pid_ > 0) return "gpoold is already running (pid " + std::to_string(pid_) + ")";
    banner_.clear();
    int fds[2];
    if (pipe(fds) != 0) return "pipe() failed";
    std::vector<std::string> args = {"--config", config};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> argv{const_cast<char*>(kGpoold.c_str())};
      for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(kGpoold.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    if (pid_ < 0) {
      close(fds[0]);
      return "fork() failed";
    }
    std::string error = readUntilReady(fds[0], deadline);
    // gpoold prints nothing on stdout after `ready` (logs go to stderr), so the pipe closes here.
    close(fds[0]);
    if (!error.empty()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    return error;
  }

  // SIGTERM, then waits up to `deadline` for gpoold to exit (SIGKILL after it) and reaps it.
  // A test checks for a clean stop with EXPECT_EQ(stop(), 0).
  // Returns its exit code (128 + signal when a signal ended it); -1 when none was running.
  int stop(std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
    if (pid_ <= 0) return -1;
    // A pidfd becomes readable when the process exits: a bounded wait without polling naps.
    int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    kill(pid_, SIGTERM);
    if (pidfd >= 0) {
      struct pollfd p {
        pidfd, POLLIN, 0
      };
      int n;
      while ((n = poll(&p, 1, static_cast<int>(deadline.count()))) < 0 && errno == EINTR) {
      }
      close(pidfd);
      if (n == 0) kill(pid_, SIGKILL);
    }
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return exitCodeOf(status);
  }

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0; }
  // The stdout lines gpoold printed before `ready`, without their newlines.
  const std::vector<std::string>& banner() const { return banner_; }

 private:
  std::string readUntilReady(int fd, std::chrono::milliseconds deadline) {
    auto until = std::chrono::steady_clock::now() + deadline;
    std::string pending;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return "gpoold printed no `ready` line in time";
      struct pollfd p {
        fd, POLLIN, 0
      };
      int n = poll(&p, 1, static_cast<int>(left.count()));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) continue;
      char buf[512];
      ssize_t got = read(fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return "gpoold exited before `ready` (stdout: '" + pending + "')";
      pending.append(buf, static_cast<size_t>(got));
      size_t eol;
      while ((eol = pending.find('\n')) != std::string::npos) {
        std::string line = pending.substr(0, eol);
        pending.erase(0, eol + 1);
        if (line == "ready") return "";
        banner_.push_back(line);
      }
    }
  }

  pid_t pid_ = -1;
  std::vector<std::string> banner_;
};

}  // namespace gpool::cli::testing
