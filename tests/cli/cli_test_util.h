#pragma once

#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

// What the CLI tests share: running a real program to completion with its output captured.
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

// Runs `program` with `args` (and `env` added) and waits for it. stdout and stderr go to
// files under `dir` (dir/stdout, dir/stderr, overwritten), so neither can fill a pipe while
// the test waits.
inline Output runProgram(const std::string& program, const std::vector<std::string>& args,
                         const std::string& dir,
                         const std::vector<std::pair<std::string, std::string>>& env = {}) {
  const std::string out_path = dir + "/stdout";
  const std::string err_path = dir + "/stderr";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (out < 0 || err < 0) _exit(126);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    for (const auto& [k, v] : env)
      setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(program.c_str()));
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(program.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Output o;
  o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.out = readFile(out_path);
  o.err = readFile(err_path);
  return o;
}

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

}  // namespace gpool::cli::testing
