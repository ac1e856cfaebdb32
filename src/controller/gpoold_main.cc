// gpoold: the controller daemon. Reads its TOML configuration, opens the store (a SQLite file
// or a PostgreSQL connection string), rebuilds its view (nodes, usage), runs the scheduling loop
// on its own thread and stops cleanly on SIGTERM or SIGINT. docs/controller.md.
//
// With `controller.socket` set it serves, on that Unix socket, the REST API (api_routes.h) and
// the agents' WebSocket `/v1/agent` (agent_link.h); without it no agent can connect and the
// assignments wait in the store for one.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "common/clock.h"
#include "common/status.h"
#include "config/config.h"
#include "controller/agent_link.h"
#include "controller/api_routes.h"
#include "controller/api_tokens.h"
#include "controller/job_service.h"
#include "controller/node_registry.h"
#include "controller/scheduling_loop.h"
#include "logging/log_config.h"
#include "logging/logging.h"
#include "net/router.h"
#include "net/server.h"
#include "store/postgres_store.h"
#include "store/sqlite_store.h"

namespace gpool::controller {
namespace {

struct Settings {
  std::string store;  // a file path, or "postgresql://..." / "postgres://..." / "host=..."
  std::string sqlite_synchronous;
  std::string socket;  // the API's Unix socket; empty: no API
  // The TLS listener (API tokens, agents with join tokens / node credentials); empty: none.
  std::string tls_host;
  int tls_port = -1;
  std::string tls_cert;
  std::string tls_key;
  int64_t node_down_after_s = 90;
  int64_t lease_duration_s = 60;
  int64_t heartbeat_interval_s = 5;
  int64_t schedule_interval_s = 10;
  int64_t usage_half_life_s = 7 * 24 * 3600;
  logging::LogOptions log;
};

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

Result<Settings> readSettings(const std::string& path) {
  GPOOL_ASSIGN_OR_RETURN(config::ConfigFile file, config::ConfigFile::load(path));
  config::ConfigSection root = file.root();
  Settings s;
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
  if (s.sqlite_synchronous != "FULL" && s.sqlite_synchronous != "NORMAL") {
    ctl.fail("sqlite_synchronous", "must be FULL or NORMAL");
  }
  s.node_down_after_s = ctl.getDuration("node_down_after", 90);
  s.lease_duration_s = ctl.getDuration("lease_duration", 60);
  s.heartbeat_interval_s = ctl.getDuration("heartbeat_interval", 5);
  s.schedule_interval_s = ctl.getDuration("schedule_interval", 10);
  s.usage_half_life_s = ctl.getDuration("usage_half_life", 7 * 24 * 3600);
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

Result<store::StorePtr> openStore(const Settings& s) {
  bool postgres = s.store.rfind("postgresql://", 0) == 0 || s.store.rfind("postgres://", 0) == 0 ||
                  s.store.find('=') != std::string::npos;
  if (postgres) {
    store::PostgresOptions options;
    options.conninfo = s.store;
    GPOOL_ASSIGN_OR_RETURN(auto pg, store::PostgresStore::open(options));
    return store::StorePtr(std::move(pg));
  }
  store::SqliteOptions options;
  options.synchronous = s.sqlite_synchronous;
  GPOOL_ASSIGN_OR_RETURN(auto lite, store::SqliteStore::open(s.store, options));
  return store::StorePtr(std::move(lite));
}

int run(const std::string& config_path, bool once) {
  Result<Settings> settings = readSettings(config_path);
  if (!settings.ok()) {
    std::cerr << "gpoold: " << settings.status().message() << "\n";
    return 2;
  }
  if (Status s = logging::initLogging(settings->log); !s.isOk()) {
    std::cerr << "gpoold: " << s.message() << "\n";
    return 2;
  }
  // SIGTERM and SIGINT are taken by sigwait in this thread only; block them before any other
  // thread starts so every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Result<store::StorePtr> store = openStore(*settings);
  if (!store.ok()) {
    spdlog::error("cannot open the store {}: {}", settings->store, store.status().toString());
    return 1;
  }
  Clock& clock = realClock();
  NodeRegistry registry(**store, clock,
                        NodeRegistryOptions{std::chrono::seconds(settings->node_down_after_s)});
  AgentLinkOptions link_options;
  link_options.lease_duration_s = settings->lease_duration_s;
  link_options.heartbeat_interval_s = settings->heartbeat_interval_s;
  link_options.own_uid = static_cast<uint32_t>(::geteuid());
  AgentLink gateway(**store, registry, clock, link_options);
  LoopOptions options;
  options.interval = std::chrono::seconds(settings->schedule_interval_s);
  options.usage_half_life_s = settings->usage_half_life_s;
  SchedulingLoop loop(**store, registry, gateway, clock, options);
  gateway.attach(loop);
  for (Status s : {registry.load(), loop.recover()}) {
    if (!s.isOk()) {
      spdlog::error("cannot rebuild the controller's state: {}", s.toString());
      return 1;
    }
  }
  JobService service(**store, registry, clock, &loop);
  if (once) {
    Result<PassReport> r = loop.runOnce();
    if (!r.ok()) {
      spdlog::error("scheduling pass failed: {}", r.status().toString());
      return 1;
    }
    std::cout << "pass: started=" << r->started << " pending=" << r->pending
              << " nodes=" << registry.nodes().size() << std::endl;
    return 0;
  }
  std::unique_ptr<net::Server> server;
  StoreTokenVerifier tokens(**store, clock);
  if (!settings->socket.empty() || settings->tls_port >= 0) {
    net::Router router;
    if (Status s = addApiRoutes(router, **store, service, registry); !s.isOk()) {
      spdlog::error("cannot set up the API routes: {}", s.toString());
      return 1;
    }
    if (Status s = gateway.addRoute(router); !s.isOk()) {
      spdlog::error("cannot set up the agent route: {}", s.toString());
      return 1;
    }
    net::ServerOptions server_options;
    server_options.unix_socket_path = settings->socket;
    if (settings->tls_port >= 0) {
      server_options.tcp_host = settings->tls_host;
      server_options.tcp_port = settings->tls_port;
      server_options.tls_cert_file = settings->tls_cert;
      server_options.tls_key_file = settings->tls_key;
      server_options.token_verifier = &tokens;
    }
    server = std::make_unique<net::Server>(server_options, std::move(router));
    if (Status s = server->start(); !s.isOk()) {
      spdlog::error("cannot serve the API: {}", s.toString());
      return 1;
    }
    if (settings->tls_port >= 0) {
      spdlog::info("TLS listener on {}:{}", settings->tls_host, server->tcpPort());
      // Tests read the port (tls_listen may ask for port 0) from this line.
      std::cout << "tls " << settings->tls_host << ":" << server->tcpPort() << std::endl;
    }
  }
  std::jthread scheduler([&loop](std::stop_token stop) { loop.runUntilStopped(stop); });
  spdlog::info("gpoold started (store {}, {} nodes known)", settings->store,
               registry.nodes().size());
  // Tests wait for this line before signalling.
  std::cout << "ready" << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("gpoold stopping on signal {}", sig);
  if (server) server->stop();
  scheduler.request_stop();
  scheduler.join();
  spdlog::info("gpoold stopped");
  return 0;
}

}  // namespace
}  // namespace gpool::controller

int main(int argc, char** argv) {
  CLI::App app{"gpoold: the gpool controller"};
  std::string config_path = "/etc/gpool/gpoold.toml";
  bool once = false;
  app.add_option("-c,--config", config_path, "TOML configuration file");
  app.add_flag("--once", once, "run one scheduling pass and exit (checks and scripts)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return gpool::controller::run(config_path, once);
}
