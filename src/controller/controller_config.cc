#include "controller/controller_config.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <thread>
#include <utility>

#include "config/config.h"

namespace gpool::controller {
namespace {

// "host:port" or "[v6addr]:port"; port 0 lets the OS choose.
Result<std::pair<std::string, int>> parseHostPort(const std::string& text) {
  size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::invalidArgument("'" + text + "' is not host:port (e.g. \"0.0.0.0:6443\")");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  std::string port_text = text.substr(colon + 1);
  int port = -1;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_text.empty() || ec != std::errc() || ptr != port_text.data() + port_text.size() ||
      port < 0 || port > 65535) {
    return Status::invalidArgument("port '" + port_text +
                                   "' is not in 0..65535 (0: chosen by the OS)");
  }
  return std::make_pair(host, port);
}

// Whether `host` names this machine's loopback interface only: "localhost", 127.0.0.0/8, ::1.
bool isLoopbackHost(const std::string& host) {
  if (host == "localhost") return true;
  in_addr v4{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  if (::inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

}  // namespace

int64_t defaultApiThreads() {
  const int64_t cpus = std::max<int64_t>(1, std::thread::hardware_concurrency());
  return std::clamp<int64_t>(2 * cpus, 4, 256);
}

Result<ControllerSettings> readControllerSettings(const std::string& path) {
  GPOOL_ASSIGN_OR_RETURN(config::ConfigFile file, config::ConfigFile::load(path));
  config::ConfigSection root = file.root();
  ControllerSettings s;
  s.log = logging::readLogOptions(root.section("log"), "gpoold");
  config::ConfigSection ctl = root.section("controller");
  s.store = ctl.getString("store", "/var/lib/gpool/gpool.db");
  s.sqlite_synchronous = ctl.getString("sqlite_synchronous", "FULL");
  s.socket = ctl.getString("socket", "");
  std::string tls_listen = ctl.getString("tls_listen", "");
  s.tls_cert = ctl.getString("tls_cert", "");
  s.tls_key = ctl.getString("tls_key", "");
  if (!tls_listen.empty()) {
    Result<std::pair<std::string, int>> hp = parseHostPort(tls_listen);
    if (!hp.ok()) {
      ctl.fail("tls_listen", hp.status().message());
    } else {
      s.tls_host = hp->first;
      s.tls_port = hp->second;
    }
    for (auto [key, pem] : {std::pair<const char*, const std::string*>{"tls_cert", &s.tls_cert},
                            {"tls_key", &s.tls_key}}) {
      if (pem->empty()) {
        ctl.fail(key, "is required with controller.tls_listen (a PEM file)");
      } else if (::access(pem->c_str(), R_OK) != 0) {
        ctl.fail(key, "cannot read '" + *pem + "': " + std::strerror(errno));
      }
    }
  } else if (!s.tls_cert.empty() || !s.tls_key.empty()) {
    ctl.fail(s.tls_cert.empty() ? "tls_key" : "tls_cert",
             "has no effect without controller.tls_listen (host:port)");
  }
  std::string http_listen = ctl.getString("http_listen", "");
  if (!http_listen.empty()) {
    Result<std::pair<std::string, int>> hp = parseHostPort(http_listen);
    if (!hp.ok()) {
      ctl.fail("http_listen", hp.status().message());
    } else if (!isLoopbackHost(hp->first)) {
      ctl.fail("http_listen",
               "'" + hp->first +
                   "' is not a loopback address: this listener carries API tokens unencrypted, "
                   "so it only binds 127.0.0.1, ::1 or localhost (use tls_listen for remote "
                   "browsers)");
    } else {
      s.http_host = hp->first;
      s.http_port = hp->second;
    }
  }
  s.web_root = ctl.getString("web_root", "");
  if (!s.web_root.empty()) {
    struct stat st {};
    if (::stat(s.web_root.c_str(), &st) != 0) {
      ctl.fail("web_root", "cannot read '" + s.web_root + "': " + std::strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
      ctl.fail("web_root", "'" + s.web_root + "' is not a folder");
    }
  }
  if (s.sqlite_synchronous != "FULL" && s.sqlite_synchronous != "NORMAL") {
    ctl.fail("sqlite_synchronous", "must be FULL or NORMAL");
  }
  s.node_down_after_s = ctl.getDuration("node_down_after", 90);
  s.lease_duration_s = ctl.getDuration("lease_duration", 60);
  s.heartbeat_interval_s = ctl.getDuration("heartbeat_interval", 5);
  s.schedule_interval_s = ctl.getDuration("schedule_interval", 10);
  s.schedule_min_gap_ms = ctl.getInt("schedule_min_gap_ms", 250, 0, 60'000);
  s.usage_half_life_s = ctl.getDuration("usage_half_life", 7 * 24 * 3600);
  s.api_threads = ctl.getInt("api_threads", defaultApiThreads(), 1, 256);
  s.api_blocking_threads = ctl.getInt("api_blocking_threads", 16, 0, 1024);
  if (s.node_down_after_s <= 0) ctl.fail("node_down_after", "must be positive");
  if (s.schedule_interval_s <= 0) ctl.fail("schedule_interval", "must be positive");
  if (s.lease_duration_s <= 0) ctl.fail("lease_duration", "must be positive");
  if (s.heartbeat_interval_s <= 0) ctl.fail("heartbeat_interval", "must be positive");
  // An agent must have fenced itself (lease expired) before its node is declared DOWN.
  if (s.lease_duration_s + s.heartbeat_interval_s >= s.node_down_after_s) {
    ctl.fail("node_down_after", "must exceed lease_duration + heartbeat_interval");
  }
  GPOOL_RETURN_IF_ERROR(file.finish());
  return s;
}

}  // namespace gpool::controller
