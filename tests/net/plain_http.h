#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

// A minimal HTTP/1.1 client over plain TCP on 127.0.0.1, for tests that talk to gpoold's
// loopback HTTP listener or to chromedriver (the project's HttpClient speaks Unix sockets and
// TLS only). One request per connection (Connection: close); the whole answer is read until the
// server closes. Header-only, plain system calls.
namespace gpool::net::testing {

struct PlainResponse {
  int status = 0;                              // 0 when no answer came (see `error`)
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
  std::string error;  // why there is no answer: "connect: ...", "timed out", ...
};

// The status line and headers of the answer in `raw`, whose head ends at `head_end` (where its
// "\r\n\r\n" starts): sets out->status and out->headers (names lower-cased).
inline void parsePlainHead(const std::string& raw, size_t head_end, PlainResponse* out) {
  out->status = std::atoi(raw.c_str() + raw.find(' ') + 1);
  size_t pos = raw.find("\r\n") + 2;
  while (pos < head_end) {
    size_t eol = raw.find("\r\n", pos);
    std::string line = raw.substr(pos, eol - pos);
    size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ')
        ++v;
      out->headers[name] = line.substr(v);
    }
    pos = eol + 2;
  }
}

inline PlainResponse plainHttp(int port, const std::string& method, const std::string& target,
                               const std::string& body = "",
                               const std::vector<std::pair<std::string, std::string>>& headers = {},
                               std::chrono::seconds timeout = std::chrono::seconds(60)) {
  PlainResponse out;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    out.error = "socket failed";
    return out;
  }
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count());
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    out.error = "connect to 127.0.0.1:" + std::to_string(port) + " failed";
    return out;
  }
  bool own_connection = false;  // the caller's Connection header (an upgrade) replaces ours
  for (const auto& [k, v] : headers)
    own_connection = own_connection || k == "Connection";
  std::string request = method + " " + target +
                        " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n" +
                        (own_connection ? "" : "Connection: close\r\n");
  for (const auto& [k, v] : headers)
    request += k + ": " + v + "\r\n";
  if (!body.empty() || method == "POST") {
    request +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  request += "\r\n" + body;
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      out.error = "send failed";
      return out;
    }
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[16384];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0) {
      out.error = "timed out or failed reading the answer";
      break;
    }
    if (n == 0) break;
    raw.append(buf, static_cast<size_t>(n));
    // Some servers (chromedriver) keep the connection open despite Connection: close: stop once
    // the headers and the Content-Length they announce are in.
    size_t head_end = raw.find("\r\n\r\n");
    if (head_end == std::string::npos) continue;
    std::string head = raw.substr(0, head_end);
    for (char& c : head)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (head.rfind("http/1.1 101", 0) == 0) break;  // an upgrade: the connection stays open
    size_t cl = head.find("\r\ncontent-length:");
    if (cl != std::string::npos && raw.size() >= head_end + 4 + std::stoul(head.substr(cl + 17))) {
      break;
    }
  }
  ::close(fd);
  size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos || raw.compare(0, 5, "HTTP/") != 0) {
    if (out.error.empty()) out.error = "no HTTP answer: " + raw.substr(0, 200);
    return out;
  }
  parsePlainHead(raw, end, &out);
  out.body = raw.substr(end + 4);
  if (out.headers.count("transfer-encoding") && out.headers["transfer-encoding"] == "chunked") {
    std::string decoded;
    size_t at = 0;
    for (;;) {
      size_t eol = out.body.find("\r\n", at);
      if (eol == std::string::npos) break;
      size_t len = std::stoul(out.body.substr(at, eol - at), nullptr, 16);
      if (len == 0) break;
      decoded += out.body.substr(eol + 2, len);
      at = eol + 2 + len + 2;
    }
    out.body = decoded;
  }
  return out;
}

}  // namespace gpool::net::testing
