#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "logging/log_config.h"

// gpoold's configuration file (gpoold.toml): every key it reads, with its default and checks.
// One reader serves gpoold at start-up and `gpool config check`, so the check knows exactly the
// keys the daemon accepts. deploy/config/gpoold.toml documents each key.
namespace gpool::controller {

// Twice the machine's hardware threads, at least 4 (at most 256): enough requests in progress to
// fill a group commit, few enough that reads are served nearly in turn. On 2 CPUs shared with 64
// closed-loop clients (bench/controller_bench, 2026-12-05) api_threads 4 / 8 / 16 gave GET
// /v1/jobs a p99 of 37 / 53 / 62 ms, and 2,990 / 3,171 / 2,908-4,939 submissions/s (fewer
// threads share fewer commits; the target is 2,000/s).
int64_t defaultApiThreads();

// One built-in alert rule's settings from [alerts.<rule>]; unset fields keep the rule's
// defaults (controller/alerts.h, defaultAlertRules).
struct AlertRuleSettings {
  std::string name;
  std::optional<bool> enabled;
  std::optional<double> threshold;
  std::optional<double> clear_threshold;
  std::optional<int64_t> for_s;
  std::optional<int64_t> resolve_after_s;
  std::optional<std::string> severity;
};

struct WebhookSettings {
  std::string url;
  std::string bearer_token;  // read from bearer_token_file
};

// [alerts]: the built-in alert engine (docs/alerts.md).
struct AlertSettings {
  bool enabled = true;
  int64_t evaluate_every_s = 10;
  std::string external_url;              // for the webhooks' generatorURL / externalURL
  std::vector<AlertRuleSettings> rules;  // only the rules the file names
  std::vector<WebhookSettings> webhooks;
  int64_t webhook_timeout_s = 5;
  int64_t webhook_max_backoff_s = 300;
  bool strays_off = false;  // set from controller.stray_policy = "off"
};

// [idle_reclaim]: GPUs held and unused (docs/controller.md, "Idle reclaim"). When enabled and
// [alerts.allocation_idle] sets no `for`, that alert fires after `after` too.
struct IdleReclaimSettings {
  bool enabled = false;
  int64_t after_s = 2 * 3600;   // idle this long: flagged (an event, the reason, the alert)
  int64_t grace_s = 3600;       // still idle this much later: requeued or ended
  double threshold_pct = 0;     // a GPU at or below this utilisation is idle
  std::string action = "auto";  // auto, requeue, end, warn
  std::map<std::string, std::string> qos_actions;  // [idle_reclaim.qos] name = action
};

// The rule names [alerts.<rule>] accepts (the engine's built-in rules).
const std::vector<std::string>& alertRuleNames();

// [scheduler]: the policy's switches and durations (docs/scheduler-policy.md). Every duration
// may be seconds, so that tests and small labs need not wait minutes.
struct SchedulerSettings {
  std::string queue_order = "fairshare";  // fairshare, fifo, sjf, las
  bool backfill = true;
  int64_t default_time_limit_s = 24 * 3600;  // assumed for jobs without --time (backfill)
  bool preemption = true;
  int64_t preempt_min_run_time_s = 600;  // Slurm's PreemptExemptTime
  int64_t preempt_delay_s = 300;         // KAI's preemption delay
  int64_t preempt_grace_s = 120;         // Slurm's GraceTime (a QoS may set its own)
  bool reclaim = true;
  int64_t reclaim_min_run_time_s = 600;
  int64_t reclaim_delay_s = 300;
};

// [backup]: gpoold's backup timer (docs/admin-guide.md, "Backups"). Off while `dir` is empty.
struct BackupSettings {
  std::string dir;              // where gpool-<UTC time>.backup files go
  int64_t interval_s = 86'400;  // between two backups (the first one interval after start)
  int keep = 7;                 // the newest `keep` timer backups are kept, older ones removed
};

// [ha]: high availability, several controllers on one PostgreSQL store (docs/ha.md).
struct HaSettings {
  bool enabled = false;
  // The controller lease: renewed every lease/3, taken over by a standby once it has lapsed on
  // the database's clock (a standby tries every lease/6): a takeover happens within about
  // lease + lease/6 of the leader's death, plus the new leader's rebuild from the store.
  int64_t lease_s = 6;
  // How clients reach this controller, shown to them by the standbys ("https://ctl-a:8443");
  // default: tls_listen as https://host:port, else http_listen, else the socket path.
  std::string advertise;
};

struct ControllerSettings {
  std::string store;  // a file path, or "postgresql://..." / "postgres://..." / "host=..."
  std::string sqlite_synchronous;
  std::string socket;  // the API's Unix socket; empty: no API
  // The TLS listener (API tokens, agents with join tokens / node credentials); tls_port -1: none.
  std::string tls_host;
  int tls_port = -1;
  std::string tls_cert;
  std::string tls_key;
  // The plain-HTTP listener for a browser on this machine (the dashboard, the API with API
  // tokens); http_port -1: none. Always a loopback address: tokens cross it unencrypted.
  std::string http_host;
  int http_port = -1;
  // The dashboard's files (index.html, *.js, *.css); empty: found at start (findWebRoot in
  // web_routes.h: the installed share/gpool/web, else the source tree's web/).
  std::string web_root;
  // The open scrape listener: plain HTTP serving only GET /metrics to anyone who reaches it
  // (no token: Prometheus's usual setup); metrics_port -1: none. Any address: the page carries
  // no secrets, but it names users and jobs, so bind it where only the monitoring can reach it.
  std::string metrics_host;
  int metrics_port = -1;
  // Users who may read GET /metrics on the API's listeners besides admins (a token of a
  // "prometheus" user, say).
  std::vector<std::string> metrics_users;
  int64_t node_down_after_s = 90;
  int64_t lease_duration_s = 60;
  int64_t heartbeat_interval_s = 5;
  // How often agents sample and send their GPUs' telemetry and health (welcome's config).
  int64_t telemetry_interval_s = 10;
  // What agents do with a process on a GPU that belongs to no task (or memory no process
  // holds), once it has lasted `stray_grace`: "report" (an alert), "kill" (killed, logged,
  // audited and alerted) or "off" (neither killed nor alerted).
  std::string stray_policy = "report";
  int64_t stray_grace_s = 30;
  // Between SIGTERM at a lost node's lease end and SIGKILL of its fenced tasks (sent to the
  // agents in welcome), and the margin for clocks and kill latency: a lost node's jobs run
  // elsewhere only lease_duration + fence_grace + lease_margin after its last renewal
  // (docs/agent-protocol.md, "Leases and fencing"). Defaults: a third of lease_duration, at
  // least 1 s and at most 5 s (fence_grace) and 2 s (lease_margin).
  int64_t fence_grace_s = 5;
  int64_t lease_margin_s = 2;
  int64_t schedule_interval_s = 10;
  int64_t schedule_min_gap_ms = 50;
  int64_t usage_half_life_s = 7 * 24 * 3600;
  // Threads serving the API. Each request holds one for its whole run, including a submission's
  // wait for its durable commit, so this bounds how many requests (and how many submissions
  // sharing one group commit) are in progress at once. Default: defaultApiThreads().
  int64_t api_threads = defaultApiThreads();
  // Threads for the routes that change a job (submit, cancel, requeue, hold, release, PATCH),
  // which mostly wait for their durable commit: that many can wait at once, sharing fsyncs,
  // without holding the API threads that serve reads. 0 runs them on the API threads.
  int64_t api_blocking_threads = 16;
  // The API's abuse limits (net::ServerOptions): a request must arrive whole within
  // read_timeout of its first byte; a connection may wait idle_timeout for a request; a local
  // user may hold max_connections_per_user connections of the Unix socket, a TCP address
  // max_connections_per_address, and all unprivileged peers together max_connections (0:
  // derived from the open-file limit). 0 means no limit for the three counts.
  int64_t read_timeout_s = 10;
  int64_t idle_timeout_s = 60;
  int64_t max_connections_per_user = 64;
  int64_t max_connections_per_address = 256;
  int64_t max_connections = 0;
  // Who may run jobs: root's jobs are refused at submission unless allow_root_jobs (the agents
  // must allow them too); any other uid below min_job_uid is refused.
  bool allow_root_jobs = false;
  int64_t min_job_uid = 1;
  SchedulerSettings scheduler;
  HaSettings ha;
  logging::LogOptions log;
  AlertSettings alerts;
  IdleReclaimSettings idle_reclaim;
  BackupSettings backup;
};

// Reads `path`. A missing or unreadable file is IoError; every bad value and unknown key is
// reported at once in one InvalidArgument, one "<file>:<line>: key '<key>': <why>" per line.
Result<ControllerSettings> readControllerSettings(const std::string& path);

}  // namespace gpool::controller
