// A task program for the launcher tests and benchmark. Runs its arguments as a list of steps:
//   echo TEXT | err TEXT | env | ids | cgroup | open PATH | ready FIFO | read FIFO
//   trap MARKER | ignore-term | wait | fork-wait | sleep-ms N | alloc MIB | exit N
// `trap` makes SIGTERM create MARKER and exit 0; `ready` writes one byte to FIFO (the test's
// "task is running" event); `read` blocks until a line arrives on FIFO.
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

extern char** environ;

namespace {

char g_marker[4096];

void onTerm(int) {
  int fd = ::open(g_marker, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    (void)!::write(fd, "term\n", 5);
    ::close(fd);
  }
  ::_exit(0);
}

void printFile(const char* path) {
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return;
  char line[1024];
  while (std::fgets(line, sizeof(line), f))
    std::fputs(line, stdout);
  std::fclose(f);
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string step = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "task_helper: %s needs an argument\n", step.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (step == "echo") {
      std::printf("%s\n", next());
    } else if (step == "err") {
      std::fprintf(stderr, "%s\n", next());
    } else if (step == "env") {
      for (char** e = environ; *e != nullptr; ++e)
        std::printf("env %s\n", *e);
    } else if (step == "ids") {
      gid_t groups[64];
      int n = ::getgroups(64, groups);
      std::printf("uid=%d euid=%d gid=%d groups=%d\n", ::getuid(), ::geteuid(), ::getgid(), n);
    } else if (step == "cgroup") {
      printFile("/proc/self/cgroup");
    } else if (step == "open") {
      const char* path = next();
      int fd = ::open(path, O_RDWR);
      int err = errno;
      if (fd >= 0) {
        std::printf("open %s: ok\n", path);
        ::close(fd);
      } else {
        std::printf("open %s: %s\n", path, strerrorname_np(err));
      }
    } else if (step == "ready") {
      std::fflush(stdout);
      std::fflush(stderr);
      int fd = ::open(next(), O_WRONLY);
      if (fd < 0 || ::write(fd, "x", 1) != 1) return 3;
      ::close(fd);
    } else if (step == "read") {
      std::fflush(stdout);
      FILE* f = std::fopen(next(), "r");
      char line[256];
      if (f == nullptr || std::fgets(line, sizeof(line), f) == nullptr) return 4;
      std::fclose(f);
    } else if (step == "trap") {
      std::snprintf(g_marker, sizeof(g_marker), "%s", next());
      struct sigaction sa {};
      sa.sa_handler = onTerm;
      ::sigaction(SIGTERM, &sa, nullptr);
    } else if (step == "ignore-term") {
      ::signal(SIGTERM, SIG_IGN);
    } else if (step == "wait") {
      std::fflush(stdout);
      for (;;)
        ::pause();
    } else if (step == "fork-wait") {
      std::fflush(stdout);
      pid_t pid = ::fork();
      if (pid == 0) {
        ::signal(SIGTERM, SIG_IGN);  // only SIGKILL of the whole cgroup ends it
        for (;;)
          ::pause();
      }
      std::printf("child %d\n", pid);
    } else if (step == "sleep-ms") {
      ::usleep(static_cast<useconds_t>(std::atoi(next())) * 1000);
    } else if (step == "alloc") {
      size_t bytes = static_cast<size_t>(std::atoll(next())) << 20;
      std::fflush(stdout);
      std::vector<char> block(bytes);
      for (size_t off = 0; off < bytes; off += 4096)
        block[off] = 1;
      std::printf("allocated %zu\n", bytes);
    } else if (step == "exit") {
      std::fflush(stdout);
      return std::atoi(next());
    } else {
      std::fprintf(stderr, "task_helper: unknown step %s\n", step.c_str());
      return 2;
    }
  }
  return 0;
}
