// gpool-adopt: lets an SSH login into a GPU server only for users with a running job there, and
// moves the login into that job's cgroup, so that it shares the job's CPU, memory and device
// limits (what pam_slurm_adopt does for Slurm; VS Code Remote-SSH sessions stay inside the
// allocation). It runs from the PAM account stack through pam_exec:
//
//   # /etc/pam.d/sshd, after the other account lines
//   account required pam_exec.so quiet stdout /usr/lib/gpool/gpool-adopt
//
// pam_exec runs it as a child of the sshd process that will become the session, with the user
// in $PAM_USER: that parent (or --pid) is the process adopted. Exit status 0 lets the login in,
// anything else refuses it; the reason goes to stdout, which pam_exec's `stdout` shows to the
// user. The same task-selection logic as the launcher's (Launcher::adoptIntoUsersTask): the
// user's running task that started last.
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent/launcher.h"

int main(int argc, char** argv) {
  using namespace gpool;
  CLI::App app{
      "gpool-adopt: admit an SSH login only into the user's running gpool job on this server "
      "(run from PAM by pam_exec)"};
  std::string state_dir = "/var/lib/gpool/agent";
  std::string cgroup_parent = "gpool";
  std::string user;
  pid_t pid = 0;
  std::vector<std::string> always_allowed = {"root"};
  app.add_option("--state-dir", state_dir, "gpool-agent's --state-dir (tasks are below it)");
  app.add_option("--cgroup-parent", cgroup_parent, "gpool-agent's --cgroup-parent");
  app.add_option("--user", user, "the user logging in (default: $PAM_USER)");
  app.add_option("--pid", pid, "the process to adopt (default: the parent, i.e. sshd's)")
      ->check(CLI::PositiveNumber);
  app.add_option("--allow", always_allowed,
                 "users let in without a job and not adopted (default: root); repeatable");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (user.empty()) {
    const char* pam_user = std::getenv("PAM_USER");
    if (pam_user != nullptr) user = pam_user;
  }
  if (user.empty()) {
    std::printf("gpool-adopt: no user: give --user or run it from PAM (pam_exec sets PAM_USER)\n");
    return 2;
  }
  // pam_exec also runs for the other PAM types when listed there; only `account` decides.
  const char* pam_type = std::getenv("PAM_TYPE");
  if (pam_type != nullptr && std::strcmp(pam_type, "account") != 0) return 0;
  for (const std::string& allowed : always_allowed) {
    if (allowed == user) return 0;
  }
  if (pid == 0) pid = ::getppid();

  agent::Launcher::Options options;
  options.state_root = state_dir + "/tasks";
  options.supervisor.use_cgroups = true;
  options.supervisor.cgroup_parent = cgroup_parent;
  agent::Launcher launcher(options);
  Result<std::string> task = launcher.adoptIntoUsersTask(user, pid);
  if (!task.ok()) {
    if (task.status().code() == StatusCode::kNotFound) {
      std::printf(
          "gpool: access denied: %s has no running job on this server; start one with `gpool "
          "alloc` and log in to the server it runs on\n",
          user.c_str());
    } else {
      std::printf("gpool-adopt: cannot adopt the login of %s: %s\n", user.c_str(),
                  task.status().toString().c_str());
    }
    return 1;
  }
  // Quiet on success: a login prints nothing extra.
  return 0;
}
