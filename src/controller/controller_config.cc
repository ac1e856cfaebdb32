#include "controller/controller_config.h"

#include <arpa/inet.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>

#include "config/config.h"
#include "store/store_address.h"

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

const std::vector<std::string>& alertRuleNames() {
  static const std::vector<std::string> names = {
      "gpu_too_hot",   "gpu_xid",          "gpu_ecc",         "gpu_lost",        "server_lost",
      "stray_process", "leaked_memory",    "allocation_idle", "driver_mismatch", "queue_blocked",
      "store_errors",  "slice_unenforced", "cuda_below_need", "unknown_task"};
  return names;
}

namespace {

AlertSettings readAlertSettings(config::ConfigSection alerts) {
  AlertSettings a;
  a.enabled = alerts.getBool("enabled", true);
  a.evaluate_every_s = alerts.getDuration("evaluate_every", 10);
  if (a.evaluate_every_s < 1 || a.evaluate_every_s > 3600) {
    alerts.fail("evaluate_every", "must be between 1s and 1h");
  }
  a.external_url = alerts.getString("external_url", "");
  a.webhook_timeout_s = alerts.getDuration("webhook_timeout", 5);
  if (a.webhook_timeout_s < 1 || a.webhook_timeout_s > 300) {
    alerts.fail("webhook_timeout", "must be between 1s and 5m");
  }
  a.webhook_max_backoff_s = alerts.getDuration("webhook_max_backoff", 300);
  if (a.webhook_max_backoff_s < 1) alerts.fail("webhook_max_backoff", "must be positive");
  for (const std::string& name : alertRuleNames()) {
    if (!alerts.has(name)) continue;
    config::ConfigSection r = alerts.section(name);
    AlertRuleSettings rule;
    rule.name = name;
    if (r.has("enabled")) rule.enabled = r.getBool("enabled", true);
    if (r.has("threshold")) rule.threshold = r.getDouble("threshold", 0, -1e12, 1e12);
    if (r.has("clear_threshold"))
      rule.clear_threshold = r.getDouble("clear_threshold", 0, -1e12, 1e12);
    if (r.has("for")) {
      rule.for_s = r.getDuration("for", 0);
      if (*rule.for_s < 0) r.fail("for", "must not be negative");
    }
    if (r.has("resolve_after")) {
      rule.resolve_after_s = r.getDuration("resolve_after", 0);
      if (*rule.resolve_after_s < 0) r.fail("resolve_after", "must not be negative");
    }
    if (r.has("severity")) {
      rule.severity = r.getString("severity", "warning");
      if (*rule.severity != "warning" && *rule.severity != "critical") {
        r.fail("severity", "must be warning or critical");
      }
    }
    a.rules.push_back(std::move(rule));
  }
  for (config::ConfigSection w : alerts.sectionArray("webhook")) {
    WebhookSettings hook;
    hook.url = w.requireString("url");
    if (!hook.url.empty() && hook.url.rfind("http://", 0) != 0 &&
        hook.url.rfind("https://", 0) != 0) {
      w.fail("url", "'" + hook.url + "' is not an http:// or https:// URL");
    }
    std::string token_file = w.getString("bearer_token_file", "");
    if (!token_file.empty()) {
      std::ifstream in(token_file);
      if (!in) {
        w.fail("bearer_token_file", "cannot read '" + token_file + "': " + std::strerror(errno));
      } else {
        std::getline(in, hook.bearer_token);
      }
    }
    a.webhooks.push_back(std::move(hook));
  }
  return a;
}

bool isIdleAction(const std::string& action) {
  return action == "auto" || action == "requeue" || action == "end" || action == "warn";
}

IdleReclaimSettings readIdleReclaimSettings(config::ConfigSection idle) {
  IdleReclaimSettings r;
  r.enabled = idle.getBool("enabled", false);
  r.after_s = idle.getDuration("after", 2 * 3600);
  if (r.after_s < 1) idle.fail("after", "must be at least 1s");
  r.grace_s = idle.getDuration("grace", 3600);
  r.threshold_pct = idle.getDouble("threshold", 0, 0, 100);
  r.action = idle.getString("action", "auto");
  if (!isIdleAction(r.action)) {
    idle.fail("action", "'" + r.action + "' is not auto, requeue, end or warn");
  }
  r.qos_actions = idle.getStringMap("qos");
  for (const auto& [qos, action] : r.qos_actions) {
    if (!isIdleAction(action)) {
      idle.fail("qos", "'" + qos + "' = '" + action + "' is not auto, requeue, end or warn");
    }
  }
  return r;
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
  std::string metrics_listen = ctl.getString("metrics_listen", "");
  if (!metrics_listen.empty()) {
    Result<std::pair<std::string, int>> hp = parseHostPort(metrics_listen);
    if (!hp.ok()) {
      ctl.fail("metrics_listen", hp.status().message());
    } else {
      s.metrics_host = hp->first;
      s.metrics_port = hp->second;
    }
  }
  s.metrics_users = ctl.getStringList("metrics_users", {});
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
  // Short leases (trial pools, tests) get a proportionally short grace and margin by default,
  // so that a lost node's jobs move about when node_down_after says (a third of the lease
  // each, at least 1 s, at most 5 s and 2 s).
  const int64_t third = std::max<int64_t>(s.lease_duration_s / 3, 1);
  s.fence_grace_s = ctl.getDuration("fence_grace", std::min<int64_t>(third, 5));
  s.lease_margin_s = ctl.getDuration("lease_margin", std::min<int64_t>(third, 2));
  s.schedule_interval_s = ctl.getDuration("schedule_interval", 10);
  s.telemetry_interval_s = ctl.getDuration("telemetry_interval", 10);
  s.stray_policy = ctl.getString("stray_policy", "report");
  if (s.stray_policy != "off" && s.stray_policy != "report" && s.stray_policy != "kill") {
    ctl.fail("stray_policy", "must be off, report or kill");
  }
  s.stray_grace_s = ctl.getDuration("stray_grace", 30);
  if (s.stray_grace_s < 0 || s.stray_grace_s > 86'400) {
    ctl.fail("stray_grace", "must be between 0s and 24h");
  }
  if (s.telemetry_interval_s < 1 || s.telemetry_interval_s > 3600) {
    ctl.fail("telemetry_interval", "must be between 1s and 1h");
  }
  s.schedule_min_gap_ms = ctl.getInt("schedule_min_gap_ms", 50, 0, 60'000);
  s.usage_half_life_s = ctl.getDuration("usage_half_life", 7 * 24 * 3600);
  s.api_threads = ctl.getInt("api_threads", defaultApiThreads(), 1, 256);
  s.api_blocking_threads = ctl.getInt("api_blocking_threads", 16, 0, 1024);
  s.read_timeout_s = ctl.getDuration("read_timeout", 10);
  s.idle_timeout_s = ctl.getDuration("idle_timeout", 60);
  s.max_connections_per_user = ctl.getInt("max_connections_per_user", 64, 0, 1'000'000);
  s.max_connections_per_address = ctl.getInt("max_connections_per_address", 256, 0, 1'000'000);
  s.max_connections = ctl.getInt("max_connections", 0, 0, 10'000'000);
  s.allow_root_jobs = ctl.getBool("allow_root_jobs", false);
  s.min_job_uid = ctl.getInt("min_job_uid", 1, 0, 4'294'967'295);
  if (s.read_timeout_s <= 0) ctl.fail("read_timeout", "must be positive");
  if (s.idle_timeout_s <= 0) ctl.fail("idle_timeout", "must be positive");
  if (s.node_down_after_s <= 0) ctl.fail("node_down_after", "must be positive");
  if (s.schedule_interval_s <= 0) ctl.fail("schedule_interval", "must be positive");
  if (s.lease_duration_s <= 0) ctl.fail("lease_duration", "must be positive");
  if (s.heartbeat_interval_s <= 0) ctl.fail("heartbeat_interval", "must be positive");
  if (s.fence_grace_s > 3600) ctl.fail("fence_grace", "must be at most 1h");
  if (s.lease_margin_s > 3600) ctl.fail("lease_margin", "must be at most 1h");
  // An agent must have fenced itself (lease expired) before its node is declared DOWN.
  if (s.lease_duration_s + s.heartbeat_interval_s >= s.node_down_after_s) {
    ctl.fail("node_down_after", "must exceed lease_duration + heartbeat_interval");
  }
  s.alerts = readAlertSettings(root.section("alerts"));
  s.idle_reclaim = readIdleReclaimSettings(root.section("idle_reclaim"));
  if (s.idle_reclaim.enabled) {
    // One idea of "idle too long": the alert fires when the job is flagged, unless its own
    // `for` says otherwise.
    auto rule =
        std::find_if(s.alerts.rules.begin(), s.alerts.rules.end(),
                     [](const AlertRuleSettings& r) { return r.name == "allocation_idle"; });
    if (rule == s.alerts.rules.end()) {
      AlertRuleSettings idle_rule;
      idle_rule.name = "allocation_idle";
      s.alerts.rules.push_back(idle_rule);
      rule = s.alerts.rules.end() - 1;
    }
    if (!rule->for_s) rule->for_s = s.idle_reclaim.after_s;
  }
  config::ConfigSection sch = root.section("scheduler");
  SchedulerSettings& p = s.scheduler;
  p.queue_order = sch.getString("queue_order", p.queue_order);
  if (p.queue_order != "fairshare" && p.queue_order != "fifo" && p.queue_order != "sjf" &&
      p.queue_order != "las") {
    sch.fail("queue_order", "must be fairshare, fifo, sjf or las");
  }
  p.backfill = sch.getBool("backfill", p.backfill);
  p.default_time_limit_s = sch.getDuration("default_time_limit", p.default_time_limit_s);
  p.preemption = sch.getBool("preemption", p.preemption);
  p.preempt_min_run_time_s = sch.getDuration("preempt_min_run_time", p.preempt_min_run_time_s);
  p.preempt_delay_s = sch.getDuration("preempt_delay", p.preempt_delay_s);
  p.preempt_grace_s = sch.getDuration("preempt_grace", p.preempt_grace_s);
  p.reclaim = sch.getBool("reclaim", p.reclaim);
  p.reclaim_min_run_time_s = sch.getDuration("reclaim_min_run_time", p.reclaim_min_run_time_s);
  p.reclaim_delay_s = sch.getDuration("reclaim_delay", p.reclaim_delay_s);
  if (p.default_time_limit_s <= 0) sch.fail("default_time_limit", "must be positive");
  for (auto [key, value] :
       {std::pair<const char*, int64_t>{"preempt_min_run_time", p.preempt_min_run_time_s},
        {"preempt_delay", p.preempt_delay_s},
        {"preempt_grace", p.preempt_grace_s},
        {"reclaim_min_run_time", p.reclaim_min_run_time_s},
        {"reclaim_delay", p.reclaim_delay_s}}) {
    if (value < 0) sch.fail(key, "must not be negative");
  }
  config::ConfigSection backup = root.section("backup");
  s.backup.dir = backup.getString("dir", "");
  s.backup.interval_s = backup.getDuration("interval", 86'400);
  s.backup.keep = static_cast<int>(backup.getInt("keep", 7, 1, 100'000));
  if (s.backup.interval_s < 1) backup.fail("interval", "must be at least 1s");
  if (!s.backup.dir.empty()) {
    struct stat st {};
    if (store::isPostgresStore(s.store)) {
      backup.fail("dir",
                  "the backup timer copies a SQLite store; back up PostgreSQL with pg_dump "
                  "(docs/admin-guide.md, \"Backups\")");
    } else if (::stat(s.backup.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      backup.fail("dir", "'" + s.backup.dir + "' is not a folder");
    } else if (::access(s.backup.dir.c_str(), W_OK) != 0) {
      backup.fail("dir", "cannot write to '" + s.backup.dir + "': " + std::strerror(errno));
    }
  }
  config::ConfigSection ha = root.section("ha");
  s.ha.enabled = ha.getBool("enabled", false);
  s.ha.lease_s = ha.getDuration("lease", s.ha.lease_s);
  s.ha.advertise = ha.getString("advertise", "");
  if (s.ha.lease_s < 1 || s.ha.lease_s > 600) ha.fail("lease", "must be between 1s and 10m");
  if (s.ha.enabled && !store::isPostgresStore(s.store)) {
    ha.fail("enabled",
            "high availability needs a PostgreSQL store, and controller.store is the SQLite file "
            "'" +
                s.store +
                "': SQLite serves one controller only; set controller.store to a PostgreSQL "
                "connection string (docs/ha.md)");
  }
  if (s.ha.advertise.empty()) {
    if (s.tls_port >= 0) {
      s.ha.advertise = "https://" + s.tls_host + ":" + std::to_string(s.tls_port);
    } else if (s.http_port >= 0) {
      s.ha.advertise = "http://" + s.http_host + ":" + std::to_string(s.http_port);
    } else {
      s.ha.advertise = s.socket;
    }
  }
  GPOOL_RETURN_IF_ERROR(file.finish());
  return s;
}

}  // namespace gpool::controller
