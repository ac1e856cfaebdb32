#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "controller/job_service.h"
#include "controller/metrics.h"
#include "controller/node_registry.h"
#include "controller/telemetry_history.h"
#include "store/store.h"

// gpoold's built-in alerts (docs/alerts.md).
//
// Rules (thresholds and durations from gpoold.toml's [alerts]) look at what the controller
// knows: the agents' telemetry and health findings, the node registry, the job counts and the
// store's errors. Each evaluation hands the engine every condition that holds now; an alert
// fires once its condition has held for the rule's `for` and resolves once it has been clear for
// the rule's `resolve_after` (time hysteresis), and value thresholds have a lower level to clear
// (gpu_too_hot fires at 90 C, clears below 85 C). Alerts and their history (fired, resolved,
// acknowledged) are kept in the store; listeners (webhooks, the live feed, the log) hear every
// change. Time comes from the injected Clock.
namespace gpool::controller {

// One built-in rule and its settings.
struct AlertRule {
  std::string name;       // "gpu_too_hot": the config key and the store's rule
  std::string alertname;  // "GpuTooHot": the alertname label (Prometheus style)
  std::string severity;   // "warning" or "critical"
  bool enabled = true;
  double threshold = 0;        // the rule's level (see defaultAlertRules)
  double clear_threshold = 0;  // the level to fall below to clear, where the rule has one
  Micros for_duration{0};      // how long the condition must hold before the alert fires
  Micros resolve_after{0};     // how long it must be clear before the alert resolves
  std::string description;     // what the rule means, for the annotation
};

// The built-in rules with their defaults:
//   gpu_too_hot        temperature >= threshold (90 C), clears below clear_threshold (85 C)
//   gpu_xid            an XID reported within the last threshold seconds (900)
//   gpu_ecc            uncorrected ECC errors > 0, or corrected > threshold (1000)
//   gpu_lost           a GPU the node registered is missing (agent finding) or unhealthy and
//                      silent
//   server_lost        a node is DOWN
//   stray_process      a process on a GPU that belongs to no task (agent finding)
//   leaked_memory      GPU memory no process holds after tasks ended (agent finding)
//   allocation_idle    a task's GPUs at 0 % utilisation for `for` (2 h)
//   driver_mismatch    a node's driver or CUDA version differs from the pool's most common
//   queue_blocked      the oldest pending job (reasons other than holds and dependencies) has
//                      waited longer than threshold seconds (3600)
//   store_errors       the store failed (job-count reads) since the previous evaluation
//   slice_unenforced   a GPU slice runs on a node that does not enforce slices (its agent
//                      reports no loadable interposer, or a backstop that only reports)
//   cuda_below_need    pending jobs ask for a CUDA version (--min-cuda) that no server's driver
//                      supports (one alert per version asked for)
//   unknown_task       an agent reported a task the store never placed (after a restore from
//                      a backup: a task of what the backup does not hold), still running or
//                      stopped within the last threshold seconds (3600)
std::vector<AlertRule> defaultAlertRules();

// Something a rule finds true now. `labels` identify what it is about (Hostname, gpu, UUID,
// hpc_job, user, pid, ...); together with the rule they make the alert's identity.
struct AlertCondition {
  std::string rule;
  std::map<std::string, std::string> labels;
  std::string summary;
  double value = 0;
};

// A change of one alert, as listeners hear it.
struct AlertChange {
  enum class Kind { kFired, kResolved, kAcked };
  Kind kind = Kind::kFired;
  store::AlertRecord alert;  // after the change
  std::string alertname;
  std::map<std::string, std::string> labels;  // with alertname and severity
  std::string description;
};
std::string_view alertChangeName(AlertChange::Kind kind);  // "fired", "resolved", "acked"

// The engine. Thread-safety: every method may be called from any thread (one mutex, never held
// while calling listeners or the store... except for the store writes of one evaluation, which
// are few).
class AlertEngine {
 public:
  // `store` and `clock` must outlive the engine. Rules not in `rules` are off.
  AlertEngine(store::Store& store, Clock& clock, std::vector<AlertRule> rules);

  // Takes the alerts the store has firing (after a restart): they stay firing until their
  // condition has been clear for resolve_after.
  Status load();

  // Called after each change, outside the engine's lock; must return quickly. Add before use.
  void addListener(std::function<void(const AlertChange&)> listener);

  const AlertRule* rule(const std::string& name) const;
  // Whether the alert of (rule, labels) is firing now (rules with a clear level use it).
  bool firing(const std::string& rule, const std::map<std::string, std::string>& labels) const;

  // One evaluation at the clock's time: `holding` are the conditions that hold now (those of
  // disabled rules are ignored). Fires and resolves what is due, in the store first; returns
  // the changes. A store failure leaves the alert as it was (it is tried again next time).
  Result<std::vector<AlertChange>> evaluate(const std::vector<AlertCondition>& holding);

  // An admin acknowledges alert `id` (it keeps firing until its condition clears).
  Status ack(int64_t id, const std::string& actor);

  // gpool_alerts_firing{alertname, severity} and gpool_alert_transitions_total.
  void writeMetrics(PromWriter& out) const;

  // A stable identity of (rule, labels).
  static std::string fingerprint(const std::string& rule,
                                 const std::map<std::string, std::string>& labels);

 private:
  struct Active {
    std::string rule;
    std::map<std::string, std::string> labels;
    std::string summary;
    TimePoint holding_since{};
    std::optional<TimePoint> clear_since;
    bool firing = false;
    int64_t id = 0;  // the store's, once firing
    store::AlertRecord record;
  };
  AlertChange changeOf(AlertChange::Kind kind, const Active& a) const;
  void notify(const std::vector<AlertChange>& changes);

  store::Store& store_;
  Clock& clock_;
  std::map<std::string, AlertRule> rules_;
  mutable std::mutex mu_;
  std::map<std::string, Active> active_;  // by fingerprint
  uint64_t fired_ = 0, resolved_ = 0;
  std::vector<std::function<void(const AlertChange&)>> listeners_;
};

// One finding an agent reported in its last `health` message (docs/agent-protocol.md).
struct HealthFinding {
  std::string check;
  std::string severity;
  std::string gpu_uuid;
  int64_t pid = 0;
  uint64_t used_mib = 0;
  bool unhealthy = false;
  std::string message;
  std::string action;  // reported / killed / kill failed: ...
  std::string user;    // the process's user, where the agent knows it
};

// A task an agent reported that the controller's store never placed: its (store incarnation,
// epoch) is later than the store's placement of the job, or the store has no such job. A store
// only goes back like that when it was restored from a backup (docs/admin-guide.md, "Tasks
// unknown to the restored controller"); gpoold tells the agent to stop such a task.
struct UnknownTask {
  std::string node;
  int64_t job_id = 0;
  uint32_t task = 0;
  int64_t lease_epoch = 0;
  int64_t incarnation = 0;  // the store incarnation it was placed under (0: not said)
  std::string user;         // the store's owner of job_id; "" when the store has no such job
  std::string job_state;    // the store's state of job_id (e.g. PENDING); "" when it has none
  int64_t pid = 0;          // as the agent reported it; 0 unknown
  TimePoint seen_at{};      // when gpoold first heard of it
  std::optional<TimePoint> ended_at;  // when the agent reported it ended (stopped)
};
// One line for people (the alert's summary, gpoold's log): the task, its node, incarnation and
// epoch, what the store has under that job id, and whether it is stopped yet.
std::string describeUnknownTask(const UnknownTask& t);

// What the monitor reads; every source may be absent.
struct AlertSources {
  const TelemetryHistory* telemetry = nullptr;
  NodeRegistry* registry = nullptr;
  // The latest findings of every node's agent, by node.
  std::function<std::map<std::string, std::vector<HealthFinding>>()> findings;
  // The job counts (pending by reason, with the oldest submit).
  std::function<std::shared_ptr<const JobStats>()> job_stats;
  // A count of store failures so far (growing).
  std::function<uint64_t()> store_errors;
  // The pending jobs' --min-cuda (SchedulingLoop::pendingCudaNeeds).
  std::function<std::vector<PendingCudaNeed>()> cuda_needs;
  // The tasks agents reported that the store never placed (AgentLink::unknownTasks).
  std::function<std::vector<UnknownTask>()> unknown_tasks;
  // Telemetry older than this is ignored (its node stopped reporting the GPU).
  Micros stale_after{std::chrono::seconds(90)};
};

// Gathers the conditions of every rule from its sources and runs the engine: evaluateNow() for
// tests, a thread every `every` in gpoold. Thread-safety: as the engine.
class AlertMonitor {
 public:
  AlertMonitor(AlertEngine& engine, Clock& clock, AlertSources sources);
  ~AlertMonitor();

  std::vector<AlertCondition> conditions();
  Result<std::vector<AlertChange>> evaluateNow();

  void start(Micros every);
  void stop();

 private:
  AlertEngine& engine_;
  Clock& clock_;
  AlertSources sources_;
  std::mutex mu_;
  uint64_t last_store_errors_ = 0;
  std::jthread thread_;
};

}  // namespace gpool::controller
