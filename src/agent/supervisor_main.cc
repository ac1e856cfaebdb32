// gpool-supervisor: supervises one task. Started by the agent's launcher, never by hand:
//   gpool-supervisor --task-dir DIR [--ready-fd=N] [--detach]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "agent/supervisor.h"

int main(int argc, char** argv) {
  std::string task_dir;
  int ready_fd = -1;
  bool detach = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--task-dir" && i + 1 < argc) {
      task_dir = argv[++i];
    } else if (arg == "--detach") {
      detach = true;
    } else if (arg.rfind("--ready-fd=", 0) == 0) {
      ready_fd = std::atoi(argv[i] + 11);
    } else {
      std::fprintf(stderr, "gpool-supervisor: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  if (task_dir.empty()) {
    std::fprintf(stderr, "usage: gpool-supervisor --task-dir DIR [--ready-fd=N] [--detach]\n");
    return 2;
  }
  if (detach) {
    // The second half of the double fork: the launcher's direct child exits at once, and the
    // supervisor goes on as an orphan in the session the launcher created.
    pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("gpool-supervisor: fork");
      return 1;
    }
    if (pid > 0) ::_exit(0);
  }
  return gpool::agent::runSupervisor(task_dir, ready_fd);
}
