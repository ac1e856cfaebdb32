#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

// Talks to a Unix socket as another user, for tests of peer-credential checks: a forked child
// setuid()s to `uid` (when it is not ours already), sends `request` and hands back what came
// back. The child uses only system calls and plain C string functions, since the test process
// has threads.
namespace gpool::controller::testing {

// The response (or what arrived of it before the server closed or the headers plus
// Content-Length bytes were in); "child failed: <status>" when the child could not connect.
inline std::string rawRequestAs(uid_t uid, gid_t gid, const std::string& path,
                                const std::string& request) {
  int out[2];
  if (::pipe(out) != 0) return "pipe failed";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  uid_t own = ::geteuid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(out[0]);
    if (uid != own && (::setgid(gid) != 0 || ::setuid(uid) != 0)) ::_exit(2);
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ::_exit(3);
    const char* p = request.data();
    size_t left = request.size();
    while (left > 0) {
      ssize_t n = ::write(fd, p, left);
      if (n <= 0) ::_exit(4);
      p += n;
      left -= static_cast<size_t>(n);
    }
    static char buf[1 << 16];
    size_t have = 0;
    for (;;) {
      ssize_t n = ::read(fd, buf + have, sizeof buf - 1 - have);
      if (n <= 0) break;
      have += static_cast<size_t>(n);
      buf[have] = '\0';
      // Stop once the headers and the body they announce are in (keep-alive, upgrades).
      const char* end = std::strstr(buf, "\r\n\r\n");
      if (end == nullptr) continue;
      size_t header_len = static_cast<size_t>(end - buf) + 4;
      const char* cl = strcasestr(buf, "content-length:");
      size_t body_len = cl != nullptr && cl < end ? std::strtoul(cl + 15, nullptr, 10) : 0;
      if (have >= header_len + body_len) break;
    }
    if (have > 0) (void)!::write(out[1], buf, have);
    ::_exit(0);
  }
  ::close(out[1]);
  std::string got;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0)
    got.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return "child failed: " + std::to_string(status);
  }
  return got;
}

inline std::string rawRequestAs(uid_t uid, const std::string& path, const std::string& request) {
  return rawRequestAs(uid, static_cast<gid_t>(uid), path, request);
}

}  // namespace gpool::controller::testing
