// gpoold: the controller daemon. Reads its TOML configuration, opens the store (a SQLite file
// or a PostgreSQL connection string), rebuilds its view (nodes, usage), runs the scheduling loop
// on its own thread and stops cleanly on SIGTERM or SIGINT. docs/controller.md.
//
// With `controller.socket` set it serves, on that Unix socket, the REST API (api_routes.h) and
// the agents' WebSocket `/v1/agent` (agent_link.h) and the clients' live updates `/v1/watch`
// (live_feed.h); without it no agent can connect and the
// assignments wait in the store for one. `controller.tls_listen` and `controller.http_listen`
// (loopback only) serve the same routes with API tokens; every listener also serves the
// dashboard's files at / (web_routes.h).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/status.h"
#include "controller/agent_link.h"
#include "controller/alerts.h"
#include "controller/api_routes.h"
#include "controller/api_tokens.h"
#include "controller/controller_config.h"
#include "controller/job_service.h"
#include "controller/leadership.h"
#include "controller/live_feed.h"
#include "controller/metrics.h"
#include "controller/node_registry.h"
#include "controller/pool_history.h"
#include "controller/scheduling_loop.h"
#include "controller/web_routes.h"
#include "controller/webhooks.h"
#include "logging/logging.h"
#include "net/router.h"
#include "net/server.h"
#include "store/backup.h"
#include "store/postgres_store.h"
#include "store/sqlite_store.h"

namespace gpool::controller {
namespace {

using Settings = ControllerSettings;

// The built-in rules with the overrides of [alerts.<rule>].
std::vector<AlertRule> alertRulesFrom(const AlertSettings& settings) {
  std::vector<AlertRule> rules = defaultAlertRules();
  for (AlertRule& r : rules) {
    // stray_policy = "off": strays are neither killed nor alerted.
    if (r.name == "stray_process" && settings.strays_off) r.enabled = false;
  }
  for (const AlertRuleSettings& o : settings.rules) {
    for (AlertRule& r : rules) {
      if (r.name != o.name) continue;
      if (o.enabled) r.enabled = *o.enabled;
      if (o.threshold) r.threshold = *o.threshold;
      if (o.clear_threshold) r.clear_threshold = *o.clear_threshold;
      if (o.for_s) r.for_duration = std::chrono::seconds(*o.for_s);
      if (o.resolve_after_s) r.resolve_after = std::chrono::seconds(*o.resolve_after_s);
      if (o.severity) r.severity = *o.severity;
    }
  }
  if (!settings.enabled) {
    for (AlertRule& r : rules)
      r.enabled = false;
  }
  return rules;
}

// `fenced`: set to the PostgreSQL store when [ha] is on, whose writes then carry the fencing
// token of the controller lease (leadership.h).
Result<store::StorePtr> openStore(const Settings& s, store::PostgresStore** fenced) {
  if (store::isPostgresStore(s.store)) {
    store::PostgresOptions options;
    options.conninfo = s.store;
    options.fenced = s.ha.enabled;
    options.idle_in_transaction_timeout_ms = s.ha.lease_s * 1000;
    GPOOL_ASSIGN_OR_RETURN(auto pg, store::PostgresStore::open(options));
    if (s.ha.enabled) *fenced = pg.get();
    return store::StorePtr(std::move(pg));
  }
  store::SqliteOptions options;
  options.synchronous = s.sqlite_synchronous;
  GPOOL_ASSIGN_OR_RETURN(auto lite, store::SqliteStore::open(s.store, options));
  return store::StorePtr(std::move(lite));
}

// gpoold.toml's [scheduler] section into the policy every pass starts from.
void applySchedulerSettings(const SchedulerSettings& in, sched::SchedulerConfig* out) {
  if (Result<sched::QueueOrder> order = sched::parseQueueOrder(in.queue_order); order.ok()) {
    out->order = *order;  // checked when the file was read
  }
  out->backfill.enabled = in.backfill;
  out->backfill.default_time_limit_s = in.default_time_limit_s;
  sched::PreemptionConfig& p = out->preemption;
  p.enabled = in.preemption;
  p.min_run_time_s = in.preempt_min_run_time_s;
  p.delay_s = in.preempt_delay_s;
  p.grace_s = in.preempt_grace_s;
  p.reclaim = in.reclaim;
  p.reclaim_min_run_time_s = in.reclaim_min_run_time_s;
  p.reclaim_delay_s = in.reclaim_delay_s;
}

int run(const std::string& config_path, bool once, bool list_routes) {
  Result<Settings> settings = readControllerSettings(config_path);
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

  if (settings->ha.enabled && once) {
    std::cerr << "gpoold: --once cannot run with [ha] enabled (it would write without the "
                 "controller lease); run it against a stopped pool without [ha]\n";
    return 2;
  }
  // Held while gpoold runs, so that `gpool admin restore` never replaces the file under it.
  store::StoreFileLock store_lock;
  if (!store::isPostgresStore(settings->store)) {
    Result<store::StoreFileLock> lock = store::StoreFileLock::acquire(settings->store, false);
    if (!lock.ok()) {
      spdlog::error("cannot open the store {}: {}", settings->store, lock.status().toString());
      return 1;
    }
    store_lock = std::move(*lock);
  }
  store::PostgresStore* fenced_store = nullptr;
  Result<store::StorePtr> store = openStore(*settings, &fenced_store);
  if (!store.ok()) {
    spdlog::error("cannot open the store {}: {}", settings->store, store.status().toString());
    return 1;
  }
  // [ha]: this controller starts as a standby; everything that writes or runs on a timer
  // waits until it holds the controller lease (leadership.h, docs/ha.md).
  std::unique_ptr<store::LeaderLease> lease;
  std::unique_ptr<Leadership> leadership;
  if (fenced_store != nullptr) {
    store::LeaderLeaseOptions lease_options;
    lease_options.conninfo = settings->store;
    lease_options.holder = store::newControllerName();
    lease_options.address = settings->ha.advertise;
    lease_options.duration_ms = settings->ha.lease_s * 1000;
    Result<std::unique_ptr<store::LeaderLease>> opened = store::LeaderLease::open(lease_options);
    if (!opened.ok()) {
      spdlog::error("cannot open the controller lease: {}", opened.status().toString());
      return 1;
    }
    lease = std::move(opened).value();
    LeadershipOptions leadership_options;
    leadership_options.lease = std::chrono::milliseconds(lease_options.duration_ms);
    leadership = std::make_unique<Leadership>(*lease, *fenced_store, leadership_options);
    spdlog::info("high availability: controller {} (advertised as {}), lease {} s",
                 lease_options.holder, lease_options.address, settings->ha.lease_s);
  }
  Clock& clock = realClock();
  // Every start is a new incarnation of the store (docs/store.md): placements made from now on
  // carry it, so that after a restore from a backup no task of the lost era is taken for a job
  // of the restored store. Without it that could happen, so a store that cannot write it now
  // keeps gpoold from starting (the store is needed writable for any placement anyway). With
  // [ha] it is a write like any other: a standby begins one once it holds the lease.
  auto begin_incarnation = [&]() -> bool {
    Result<int64_t> incarnation = (*store)->beginIncarnation(clock.now());
    if (!incarnation.ok()) {
      spdlog::error("cannot start: the store {} cannot write: {}", settings->store,
                    incarnation.status().toString());
      return false;
    }
    spdlog::info("store incarnation {}", *incarnation);
    return true;
  };
  if (!leadership && !begin_incarnation()) return 1;
  NodeRegistryOptions registry_options;
  registry_options.down_after = std::chrono::seconds(settings->node_down_after_s);
  registry_options.lease_ends_after = std::chrono::seconds(
      settings->lease_duration_s + settings->fence_grace_s + settings->lease_margin_s);
  NodeRegistry registry(**store, clock, registry_options);
  AgentLinkOptions link_options;
  link_options.lease_duration_s = settings->lease_duration_s;
  link_options.fence_grace_s = settings->fence_grace_s;
  link_options.heartbeat_interval_s = settings->heartbeat_interval_s;
  link_options.telemetry_interval_s = settings->telemetry_interval_s;
  link_options.stray_policy = settings->stray_policy == "kill" ? "kill" : "report";
  link_options.stray_grace_s = settings->stray_grace_s;
  link_options.own_uid = static_cast<uint32_t>(::geteuid());
  AgentLink gateway(**store, registry, clock, link_options);
  MetricsExporter metrics(**store, registry, clock);
  LoopOptions options;
  options.on_pass = [&metrics](Micros took) { metrics.observePass(took); };
  options.interval = std::chrono::seconds(settings->schedule_interval_s);
  options.min_gap = std::chrono::milliseconds(settings->schedule_min_gap_ms);
  options.usage_half_life_s = settings->usage_half_life_s;
  options.require_connected_agents = !once;  // --once has no agent link
  applySchedulerSettings(settings->scheduler, &options.scheduler);
  // Declared before the loop, whose idle reclaim reads it.
  TelemetryHistory telemetry;
  if (const IdleReclaimSettings& idle = settings->idle_reclaim; idle.enabled) {
    options.idle.enabled = true;
    options.idle.after_s = idle.after_s;
    options.idle.grace_s = idle.grace_s;
    options.idle.threshold_pct = idle.threshold_pct;
    // The configuration reader checked every action.
    options.idle.action = parseIdleAction(idle.action).valueOr(IdleAction::kAuto);
    for (const auto& [qos, action] : idle.qos_actions) {
      options.idle.qos_actions[qos] = parseIdleAction(action).valueOr(IdleAction::kAuto);
    }
    const double threshold = idle.threshold_pct;
    options.idle.jobs_idle = [&telemetry, &clock, threshold] {
      // A reading older than this says nothing about now (as for the alert rules).
      return jobsIdle(telemetry.snapshot(), clock.now() - std::chrono::seconds(90), threshold);
    };
  }
  SchedulingLoop loop(**store, registry, gateway, clock, options);
  gateway.attach(loop);
  gateway.attachTelemetry(telemetry);
  metrics.setTelemetry(&telemetry);
  metrics.setAgentCount([&gateway] { return gateway.connectedCount(); });
  // The dashboard's story of the pool: allocated against used, sampled every 10 s.
  PoolHistory pool_history(telemetry, clock);
  // The controller's view, rebuilt from the store as after a restart: at start, or (HA) once
  // this controller has taken the lease, so that it sees every write of the leader before it.
  auto rebuild = [&]() -> bool {
    for (Status s : {registry.load(), loop.recover()}) {
      if (!s.isOk()) {
        spdlog::error("cannot rebuild the controller's state: {}", s.toString());
        return false;
      }
    }
    return true;
  };
  if (!leadership && !rebuild()) return 1;
  JobServiceOptions service_options;
  service_options.log_relay = &gateway;  // logs of tasks on other servers, through their agents
  service_options.allow_root_jobs = settings->allow_root_jobs;
  service_options.min_job_uid = static_cast<uint32_t>(settings->min_job_uid);
  service_options.default_qos = options.scheduler.qos_levels.front().name;
  service_options.configured_qos.clear();
  for (const sched::QosLevel& level : options.scheduler.qos_levels)
    service_options.configured_qos.push_back(level.name);
  JobService service(**store, registry, clock, &loop, service_options);
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
  // Declared before the server, so that it outlives the server's callbacks into its hub.
  LiveFeed feed(**store, registry);
  // Alerts: the engine (its changes go to the webhooks, the live feed and the log), the
  // monitor that feeds it every evaluate_every, the webhooks' sender thread.
  AlertSettings alert_settings = settings->alerts;
  alert_settings.strays_off = settings->stray_policy == "off";
  AlertEngine alerts(**store, clock, alertRulesFrom(alert_settings));
  if (Status s = leadership ? Status::ok() : alerts.load(); !s.isOk()) {
    spdlog::error("cannot read the firing alerts: {}", s.toString());
    return 1;
  }
  std::vector<WebhookConfig> hooks;
  for (const WebhookSettings& w : settings->alerts.webhooks)
    hooks.push_back({w.url, w.bearer_token});
  WebhookOptions webhook_options;
  webhook_options.external_url = settings->alerts.external_url;
  webhook_options.timeout = std::chrono::seconds(settings->alerts.webhook_timeout_s);
  webhook_options.max_backoff = std::chrono::seconds(settings->alerts.webhook_max_backoff_s);
  WebhookSender webhooks(std::move(hooks), clock, webhook_options);
  alerts.addListener([&webhooks](const AlertChange& c) { webhooks.enqueue(c); });
  alerts.addListener([&feed](const AlertChange& c) {
    nlohmann::json j = alertJson(c.alert);
    j["change"] = std::string(alertChangeName(c.kind));
    feed.publishAlert(j.dump(), alertUser(c.alert));
  });
  metrics.addWriter([&alerts](PromWriter& out) { alerts.writeMetrics(out); });
  metrics.addWriter([&webhooks](PromWriter& out) { webhooks.writeMetrics(out); });
  AlertSources alert_sources;
  alert_sources.telemetry = &telemetry;
  alert_sources.registry = &registry;
  alert_sources.findings = [&gateway] { return gateway.healthFindings(); };
  alert_sources.job_stats = [&metrics] { return metrics.jobStats(); };
  alert_sources.store_errors = [&metrics] { return metrics.storeErrors(); };
  alert_sources.unknown_tasks = [&gateway] { return gateway.unknownTasks(); };
  alert_sources.cuda_needs = [&loop] { return loop.pendingCudaNeeds(); };
  AlertMonitor monitor(alerts, clock, alert_sources);
  std::unique_ptr<net::Server> server;
  std::unique_ptr<net::Server> scrape_server;
  StoreTokenVerifier tokens(**store, clock);
  if (!settings->socket.empty() || settings->tls_port >= 0 || settings->http_port >= 0 ||
      list_routes) {
    net::Router router;
    ApiRouteOptions api_options;
    api_options.user_usage = [&loop](const std::string& user) { return loop.userUsage(user); };
    api_options.group_usage = [&loop](const std::string& group) { return loop.groupUsage(group); };
    api_options.usage_half_life_s = settings->usage_half_life_s;
    api_options.telemetry = &telemetry;
    api_options.pool_history = &pool_history;
    api_options.metrics = &metrics;
    api_options.metrics_users = settings->metrics_users;
    api_options.alerts = &alerts;
    api_options.webhooks = &webhooks;
    api_options.gpu_cleared = [&gateway](const std::string& node) {
      if (Status s = gateway.reapplyHealth(node); !s.isOk())
        spdlog::warn("node {}: {}", node, s.toString());
    };
    api_options.node_removed = [&gateway](const std::string& node) {
      gateway.disconnect(node, "node " + node + " was removed by an admin");
    };
    if (Status s = addApiRoutes(router, **store, service, registry, api_options); !s.isOk()) {
      spdlog::error("cannot set up the API routes: {}", s.toString());
      return 1;
    }
    if (Status s = gateway.addRoute(router); !s.isOk()) {
      spdlog::error("cannot set up the agent route: {}", s.toString());
      return 1;
    }
    if (Status s = feed.addRoute(router); !s.isOk()) {
      spdlog::error("cannot set up the watch route: {}", s.toString());
      return 1;
    }
    std::string web_root = settings->web_root.empty() ? findWebRoot() : settings->web_root;
    if (web_root.empty()) {
      spdlog::warn(
          "the dashboard's files were not found (share/gpool/web beside this gpoold, "
          "/usr/share/gpool/web or the source tree's web/); set controller.web_root; / answers "
          "404");
    } else {
      spdlog::info("dashboard files from {}", web_root);
    }
    if (Status s = addWebRoutes(router, web_root); !s.isOk()) {
      spdlog::error("cannot set up the dashboard routes: {}", s.toString());
      return 1;
    }
    if (list_routes) {
      // Every route the listeners serve, one JSON object a line: what the authorisation matrix
      // test (tests/controller/authz_matrix_test.cc) walks, so that a new route without a rule
      // fails it.
      for (const net::Router::Route& r : router.routes()) {
        std::cout << nlohmann::json{{"method", std::string(net::methodName(r.method))},
                                    {"pattern", r.pattern},
                                    {"websocket", r.is_websocket},
                                    {"anonymous", r.options.allow_anonymous}}
                         .dump()
                  << "\n";
      }
      return 0;
    }
    if (Status s = feed.start(); !s.isOk()) {
      spdlog::error("cannot start the live feed: {}", s.toString());
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
    if (settings->http_port >= 0) {
      server_options.http_host = settings->http_host;
      server_options.http_port = settings->http_port;
      server_options.token_verifier = &tokens;
    }
    server_options.threads = static_cast<int>(settings->api_threads);
    server_options.blocking_threads = static_cast<int>(settings->api_blocking_threads);
    if (leadership) {
      Result<net::Router> gated = leadership->gate(router);
      if (!gated.ok()) {
        spdlog::error("cannot set up the standby's routes: {}", gated.status().toString());
        return 1;
      }
      router = std::move(*gated);
    }
    Result<net::Router> counted = metrics.instrument(router);
    if (!counted.ok()) {
      spdlog::error("cannot set up the API's metrics: {}", counted.status().toString());
      return 1;
    }
    server_options.read_timeout = std::chrono::seconds(settings->read_timeout_s);
    server_options.idle_timeout = std::chrono::seconds(settings->idle_timeout_s);
    server_options.max_connections_per_user =
        static_cast<size_t>(settings->max_connections_per_user);
    server_options.max_connections_per_address =
        static_cast<size_t>(settings->max_connections_per_address);
    server_options.max_connections = static_cast<size_t>(settings->max_connections);
    server = std::make_unique<net::Server>(server_options, std::move(*counted));
    if (Status s = server->start(); !s.isOk()) {
      spdlog::error("cannot serve the API: {}", s.toString());
      return 1;
    }
    if (settings->tls_port >= 0) {
      spdlog::info("TLS listener on {}:{}", settings->tls_host, server->tcpPort());
      // Tests read the port (tls_listen may ask for port 0) from this line.
      std::cout << "tls " << settings->tls_host << ":" << server->tcpPort() << std::endl;
    }
    spdlog::info("connection limits: {} per user, {} per address, {} in all (0: none)",
                 server_options.max_connections_per_user,
                 server_options.max_connections_per_address, server->connectionLimit());
    if (settings->http_port >= 0) {
      spdlog::info("HTTP listener (loopback) on {}:{}", settings->http_host, server->httpPort());
      // Tests and `gpool up` read the port (http_listen may ask for port 0) from this line.
      std::cout << "http " << settings->http_host << ":" << server->httpPort() << std::endl;
    }
  }
  if (settings->metrics_port >= 0) {
    // The open scrape listener: only /metrics, no token (Prometheus's usual setup).
    net::Router scrape;
    if (Status s = addOpenMetricsRoute(scrape, metrics); !s.isOk()) {
      spdlog::error("cannot set up the metrics route: {}", s.toString());
      return 1;
    }
    net::ServerOptions scrape_options;
    scrape_options.http_host = settings->metrics_host;
    scrape_options.http_port = settings->metrics_port;
    scrape_options.token_verifier = &tokens;
    scrape_options.threads = 1;
    scrape_options.blocking_threads = 0;
    scrape_server = std::make_unique<net::Server>(scrape_options, std::move(scrape));
    if (Status s = scrape_server->start(); !s.isOk()) {
      spdlog::error("cannot serve the metrics: {}", s.toString());
      return 1;
    }
    spdlog::info("metrics listener (open, GET /metrics only) on {}:{}", settings->metrics_host,
                 scrape_server->httpPort());
    // Tests read the port (metrics_listen may ask for port 0) from this line.
    std::cout << "metrics " << settings->metrics_host << ":" << scrape_server->httpPort()
              << std::endl;
  }
  if (leadership) {
    // Standby: the listeners answer 503 naming the leader; nothing is scheduled, alerted or
    // sampled here. A SIGTERM or SIGINT while waiting stops this controller cleanly.
    std::cout << "standby" << std::endl;
    std::stop_source standby_stop;
    std::jthread signal_waiter([&signals, &standby_stop](std::stop_token done) {
      timespec tick{0, 200'000'000};
      while (!done.stop_requested()) {
        if (sigtimedwait(&signals, nullptr, &tick) > 0) {
          standby_stop.request_stop();
          return;
        }
      }
    });
    bool leads = leadership->waitToLead(standby_stop.get_token());
    signal_waiter.request_stop();
    signal_waiter.join();
    if (!leads || !begin_incarnation() || !rebuild()) {
      if (server) server->stop();
      feed.stop();
      leadership->stop();
      return leads ? 1 : 0;
    }
    if (Status s = alerts.load(); !s.isOk()) {
      spdlog::error("cannot read the firing alerts: {}", s.toString());
      leadership->stop();
      return 1;
    }
    // A deposed leader stops at once: its memory of the pool is no longer the truth, and its
    // writes are refused anyway. The service manager restarts it as a standby.
    leadership->keep([](const std::string& why) {
      spdlog::error("gpoold exits: {}", why);
      spdlog::default_logger()->flush();
      std::fflush(stdout);
      ::_exit(1);
    });
    std::cout << "leader " << leadership->token() << std::endl;
  }
  pool_history.start();
  metrics.start();
  monitor.start(std::chrono::seconds(settings->alerts.evaluate_every_s));
  webhooks.start();
  std::jthread scheduler([&loop](std::stop_token stop) { loop.runUntilStopped(stop); });
  // [backup]: a backup of the store every interval into backup.dir, the newest `keep` kept. It
  // reads through its own connection (SQLite's online backup API), so the API is not blocked.
  std::jthread backups;
  if (!settings->backup.dir.empty()) {
    backups = std::jthread([&settings, &clock](std::stop_token stop) {
      const BackupSettings& b = settings->backup;
      std::mutex mu;
      std::condition_variable_any cv;
      while (true) {
        {
          std::unique_lock lock(mu);
          cv.wait_for(lock, stop, std::chrono::seconds(b.interval_s),
                      [&stop] { return stop.stop_requested(); });
          if (stop.stop_requested()) return;
        }
        Result<std::string> taken =
            store::takeTimerBackup(settings->store, b.dir, b.keep, clock.now());
        if (taken.ok()) {
          spdlog::info("backup written to {} (keeping the newest {})", *taken, b.keep);
        } else {
          spdlog::error("backup into {} failed: {}", b.dir, taken.status().toString());
        }
      }
    });
    spdlog::info("backups every {} s into {}, the newest {} kept", settings->backup.interval_s,
                 settings->backup.dir, settings->backup.keep);
  }
  spdlog::info("gpoold started (store {}, {} nodes known)", settings->store,
               registry.nodes().size());
  // Tests wait for this line before signalling.
  std::cout << "ready" << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("gpoold stopping on signal {}", sig);
  if (scrape_server) scrape_server->stop();
  if (server) server->stop();
  monitor.stop();
  webhooks.stop();
  metrics.stop();
  if (backups.joinable()) {
    backups.request_stop();
    backups.join();
  }
  scheduler.request_stop();
  scheduler.join();
  feed.stop();
  // Last, after every writer stopped: a standby takes over without waiting for a lapse.
  if (leadership) leadership->stop();
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
  bool list_routes = false;
  app.add_flag("--routes", list_routes,
               "print every route of the API (method, pattern) as JSON lines and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return gpool::controller::run(config_path, once, list_routes);
}
