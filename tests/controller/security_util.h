#pragma once

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "net/plain_http.h"

// What the tests of gpoold's security boundaries share (tests/controller/security_test.cc,
// authz_matrix_test.cc): real Unix users made with useradd, connections to gpoold's socket made
// as one of them, and a small HTTP/1.1 client over such a connection. Header-only, plain system
// calls (the test processes have threads, so forked children use only async-signal-safe calls).
namespace gpool::controller::testing {

struct UnixUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Creates user `name` with useradd (once; several test binaries may run at the same time) and
// fills *out. Returns "" or why it cannot (not root, useradd failed): the test skips with it.
inline std::string ensureUnixUser(const std::string& name, UnixUser* out) {
  if (::geteuid() != 0) return "tests with real Unix users need root (useradd, setuid)";
  auto lookup = [&]() {
    struct passwd* pw = ::getpwnam(name.c_str());
    if (pw == nullptr) return false;
    *out = UnixUser{name, pw->pw_uid, pw->pw_gid};
    return true;
  };
  if (lookup()) return "";
  int lock = ::open("/tmp/gpool-test-users.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  std::string cmd = "useradd --no-create-home --home-dir /nonexistent --shell /bin/sh " + name +
                    " >/dev/null 2>&1";
  bool made = lookup() || std::system(cmd.c_str()) == 0 || lookup();
  if (lock >= 0) ::close(lock);
  if (!made || !lookup()) return "cannot create test user " + name + " with useradd";
  return "";
}

// A Unix-socket connection to `path` opened by a child running as `uid`/`gid` and handed back
// with SCM_RIGHTS, so that the server's SO_PEERCRED (taken at connect) names that user while
// this process does the talking. -1 when it could not connect.
inline int connectAs(uid_t uid, gid_t gid, const std::string& path) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pair[0]);
    if (::getuid() != uid &&
        (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) {
      ::_exit(2);
    }
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) ::_exit(3);
    char byte = 'x';
    iovec iov{&byte, 1};
    char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ::_exit(::sendmsg(pair[1], &msg, 0) == 1 ? 0 : 4);
  }
  ::close(pair[1]);
  int got = -1;
  if (pid > 0) {
    char byte = 0;
    iovec iov{&byte, 1};
    char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (::recvmsg(pair[0], &msg, MSG_CMSG_CLOEXEC) == 1) {
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      if (c != nullptr && c->cmsg_type == SCM_RIGHTS) std::memcpy(&got, CMSG_DATA(c), sizeof(int));
    }
    ::waitpid(pid, nullptr, 0);
  }
  ::close(pair[0]);
  return got;
}

// The same answer as a plain HTTP client's (status 0: no answer, see error).
using RawResponse = net::testing::PlainResponse;

// One HTTP/1.1 request on a connected socket `fd` (keep-alive: the connection stays usable);
// the answer is read up to its Content-Length, for at most `timeout`.
inline RawResponse rawHttp(int fd, const std::string& method, const std::string& target,
                           const std::string& body = "",
                           const std::vector<std::pair<std::string, std::string>>& headers = {},
                           std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  RawResponse out;
  std::string request = method + " " + target + " HTTP/1.1\r\nHost: gpoold\r\n";
  for (const auto& [k, v] : headers)
    request += k + ": " + v + "\r\n";
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    request +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  for (size_t sent = 0; sent < request.size();) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      out.error = "send failed: " + std::string(std::strerror(errno));
      return out;
    }
    sent += static_cast<size_t>(n);
  }
  auto until = std::chrono::steady_clock::now() + timeout;
  std::string raw;
  size_t head_end = std::string::npos;
  size_t want = 0;
  for (;;) {
    if (head_end != std::string::npos && raw.size() >= head_end + 4 + want) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      out.error = "timed out";
      return out;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[16384];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      if (head_end == std::string::npos) {
        out.error = "connection closed before an answer";
        return out;
      }
      break;
    }
    raw.append(buf, static_cast<size_t>(n));
    if (head_end == std::string::npos && (head_end = raw.find("\r\n\r\n")) != std::string::npos) {
      std::string head = raw.substr(0, head_end);
      for (char& c : head)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t cl = head.find("\r\ncontent-length:");
      want = cl == std::string::npos ? 0 : std::strtoul(head.c_str() + cl + 17, nullptr, 10);
    }
  }
  if (raw.compare(0, 5, "HTTP/") != 0) {
    out.error = "no HTTP answer: " + raw.substr(0, 200);
    return out;
  }
  net::testing::parsePlainHead(raw, head_end, &out);
  out.body = raw.substr(head_end + 4, want);
  return out;
}

// True once the peer closed `fd` (EOF or reset) within `timeout`; what arrived before the close
// is appended to *seen (may be null).
inline bool closedWithin(int fd, std::chrono::milliseconds timeout, std::string* seen = nullptr) {
  auto until = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return true;
    if (seen != nullptr) seen->append(buf, static_cast<size_t>(n));
  }
}

// An agent's hello for node `name` with `gpus` (api::Gpu JSON) and no tasks.
inline nlohmann::json helloFor(const std::string& name,
                               nlohmann::json gpus = nlohmann::json::array()) {
  return nlohmann::json{{"v", 1},
                        {"type", "hello"},
                        {"seq", 1},
                        {"ack", 0},
                        {"body",
                         {{"node",
                           {{"name", name},
                            {"hostname", name},
                            {"labels", nlohmann::json::object()},
                            {"cpu_millis", 16000},
                            {"ram_mib", 65536},
                            {"agent_version", "test"},
                            {"os", "Linux"},
                            {"cgroup", "none"}}},
                          {"gpus", {{"gpus", std::move(gpus)}, {"links", nlohmann::json::array()}}},
                          {"tasks", nlohmann::json::array()}}}};
}

// A simulated A100 with `uuid` at `index`, in the inventory form an agent's hello carries.
inline nlohmann::json gpuJson(const std::string& uuid, uint32_t index) {
  return nlohmann::json{{"uuid", uuid},
                        {"index", index},
                        {"pci_bus_id", ""},
                        {"model", "NVIDIA A100-SXM4-80GB (simulated)"},
                        {"memory_total_mib", 81920},
                        {"compute_capability", "8.0"},
                        {"mig_enabled", false},
                        {"mig_instances", nlohmann::json::array()},
                        {"simulated", true}};
}

}  // namespace gpool::controller::testing
