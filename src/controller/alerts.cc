#include "controller/alerts.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <set>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "api/node.h"
#include "gpu/health.h"

namespace gpool::controller {

namespace {

using nlohmann::json;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;

AlertRule makeRule(std::string name, std::string alertname, std::string severity, double threshold,
                   double clear, Micros for_duration, Micros resolve_after,
                   std::string description) {
  AlertRule r;
  r.name = std::move(name);
  r.alertname = std::move(alertname);
  r.severity = std::move(severity);
  r.threshold = threshold;
  r.clear_threshold = clear;
  r.for_duration = for_duration;
  r.resolve_after = resolve_after;
  r.description = std::move(description);
  return r;
}

}  // namespace

std::vector<AlertRule> defaultAlertRules() {
  return {
      makeRule("gpu_too_hot", "GpuTooHot", "critical", 90, 85, minutes(1), minutes(2),
               "A GPU is at or above the temperature limit; gpoold places no new work on it."),
      makeRule("gpu_xid", "GpuXidError", "critical", 900, 0, Micros(0), minutes(1),
               "A GPU reported an XID error; fatal ones keep it unhealthy until an admin runs "
               "gpool gpu clear NODE/GPU."),
      makeRule("gpu_ecc", "GpuEccErrors", "critical", 1000, 0, Micros(0), minutes(5),
               "A GPU has uncorrected ECC errors (or more corrected ones than the threshold)."),
      makeRule("gpu_lost", "GpuLost", "critical", 0, 0, Micros(0), minutes(1),
               "A GPU the server registered is gone (fallen off the bus, or its driver lost it)."),
      makeRule("server_lost", "ServerLost", "critical", 0, 0, Micros(0), seconds(30),
               "A server's agent has been silent for longer than node_down_after: the server is "
               "DOWN and its jobs were failed or requeued."),
      makeRule("stray_process", "StrayGpuProcess", "warning", 0, 0, seconds(30), minutes(1),
               "A process holds a GPU but belongs to no gpool task; the stray policy reports or "
               "kills it."),
      makeRule("leaked_memory", "GpuMemoryLeftBehind", "warning", 0, 0, seconds(30), minutes(1),
               "GPU memory stays in use after the tasks on the GPU ended (no process holds it)."),
      makeRule("allocation_idle", "AllocationIdle", "warning", 0, 0, hours(2), minutes(5),
               "A task's GPUs have been at 0 % utilisation for the whole period."),
      makeRule("driver_mismatch", "DriverMismatch", "warning", 0, 0, Micros(0), minutes(1),
               "A server's driver or CUDA version differs from the one most of the pool runs."),
      makeRule("queue_blocked", "QueueBlocked", "warning", 3600, 0, minutes(5), minutes(5),
               "The oldest pending job (held and dependent jobs aside) has waited too long."),
      makeRule("store_errors", "StoreErrors", "critical", 0, 0, Micros(0), minutes(5),
               "gpoold failed to read or write its store."),
      makeRule("slice_unenforced", "SliceNotEnforced", "warning", 0, 0, Micros(0), minutes(1),
               "A GPU slice runs on a server that does not hold slices to their limits (no "
               "loadable interposer, or the agent's backstop only reports): its memory quota "
               "and compute share are not enforced."),
      makeRule("cuda_below_need", "CudaBelowJobNeed", "warning", 0, 0, Micros(0), minutes(1),
               "Pending jobs ask for a CUDA version (--min-cuda) that no server's driver "
               "supports: they wait until a server with a newer driver joins."),
      makeRule("unknown_task", "TaskUnknownToController", "warning", 3600, 0, Micros(0), minutes(1),
               "A server ran a task that the controller's store never placed: the store was "
               "restored from a backup taken before the task started. gpoold stops such tasks; "
               "the alert stays for threshold seconds after the task stopped."),
  };
}

std::string describeUnknownTask(const UnknownTask& t) {
  std::string s = "job " + std::to_string(t.job_id) + " task " + std::to_string(t.task) + " on " +
                  t.node + " (store incarnation " + std::to_string(t.incarnation) + ", epoch " +
                  std::to_string(t.lease_epoch) + ") is unknown to the restored controller";
  if (t.job_state.empty()) {
    s += ": its store has no job " + std::to_string(t.job_id);
  } else {
    s += ": its store has job " + std::to_string(t.job_id) + " of " + t.user + " " + t.job_state +
         ", not this run";
  }
  s += t.ended_at ? "; stopped" : "; stopping it";
  return s;
}

std::string_view alertChangeName(AlertChange::Kind kind) {
  switch (kind) {
    case AlertChange::Kind::kFired: return "fired";
    case AlertChange::Kind::kResolved: return "resolved";
    case AlertChange::Kind::kAcked: return "acked";
  }
  return "fired";
}

// ---- AlertEngine

AlertEngine::AlertEngine(store::Store& store, Clock& clock, std::vector<AlertRule> rules)
    : store_(store), clock_(clock) {
  for (AlertRule& r : rules)
    rules_.emplace(r.name, std::move(r));
}

std::string AlertEngine::fingerprint(const std::string& rule,
                                     const std::map<std::string, std::string>& labels) {
  // FNV-1a over "rule\0key=value\0...": stable across runs and builds (std::hash is not).
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0;
    h *= 1099511628211ull;
  };
  mix(rule);
  for (const auto& [k, v] : labels) {
    mix(k);
    mix(v);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

const AlertRule* AlertEngine::rule(const std::string& name) const {
  auto it = rules_.find(name);
  return it == rules_.end() ? nullptr : &it->second;
}

Status AlertEngine::load() {
  store::AlertFilter filter;
  filter.state = "firing";
  filter.limit = 10000;
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::AlertRecord> firing, store_.listAlerts(filter));
  std::lock_guard lock(mu_);
  for (store::AlertRecord& r : firing) {
    Active a;
    a.rule = r.rule;
    json labels = json::parse(r.labels_json, nullptr, false);
    if (labels.is_object()) {
      for (const auto& [k, v] : labels.items()) {
        if (v.is_string() && k != "alertname" && k != "severity")
          a.labels[k] = v.get<std::string>();
      }
    }
    a.summary = r.summary;
    a.holding_since = r.started;
    a.firing = true;
    a.id = r.id;
    a.record = r;
    active_[r.fingerprint] = std::move(a);
  }
  return Status::ok();
}

void AlertEngine::addListener(std::function<void(const AlertChange&)> listener) {
  listeners_.push_back(std::move(listener));
}

bool AlertEngine::firing(const std::string& rule,
                         const std::map<std::string, std::string>& labels) const {
  std::lock_guard lock(mu_);
  auto it = active_.find(fingerprint(rule, labels));
  return it != active_.end() && it->second.firing;
}

AlertChange AlertEngine::changeOf(AlertChange::Kind kind, const Active& a) const {
  AlertChange c;
  c.kind = kind;
  c.alert = a.record;
  const AlertRule* r = rule(a.rule);
  c.alertname = r ? r->alertname : a.rule;
  c.description = r ? r->description : "";
  c.labels = a.labels;
  c.labels["alertname"] = c.alertname;
  c.labels["severity"] = a.record.severity;
  return c;
}

Result<std::vector<AlertChange>> AlertEngine::evaluate(const std::vector<AlertCondition>& holding) {
  const TimePoint now = clock_.now();
  std::vector<AlertChange> changes;
  Status failed = Status::ok();
  {
    std::lock_guard lock(mu_);
    std::set<std::string> seen;
    for (const AlertCondition& c : holding) {
      auto r = rules_.find(c.rule);
      if (r == rules_.end() || !r->second.enabled) continue;
      std::string fp = fingerprint(c.rule, c.labels);
      if (!seen.insert(fp).second) continue;
      auto [it, added] = active_.try_emplace(fp);
      Active& a = it->second;
      if (added) {
        a.rule = c.rule;
        a.labels = c.labels;
        a.holding_since = now;
      }
      a.summary = c.summary;
      a.clear_since.reset();
      if (!a.firing && now - a.holding_since >= r->second.for_duration) {
        store::AlertRecord rec;
        rec.rule = c.rule;
        rec.fingerprint = fp;
        rec.severity = r->second.severity;
        json labels = c.labels;
        labels["alertname"] = r->second.alertname;
        labels["severity"] = r->second.severity;
        rec.labels_json = labels.dump();
        rec.summary = c.summary;
        rec.state = "firing";
        rec.started = now;
        Result<int64_t> id = store_.fireAlert(rec);
        if (!id.ok()) {
          failed = id.status();
          continue;
        }
        rec.id = *id;
        a.firing = true;
        a.id = *id;
        a.record = rec;
        ++fired_;
        changes.push_back(changeOf(AlertChange::Kind::kFired, a));
      }
    }
    for (auto it = active_.begin(); it != active_.end();) {
      Active& a = it->second;
      if (seen.count(it->first)) {
        ++it;
        continue;
      }
      if (!a.firing) {  // pending: forgotten as soon as its condition stops
        it = active_.erase(it);
        continue;
      }
      if (!a.clear_since) a.clear_since = now;
      const AlertRule* r = rule(a.rule);
      Micros resolve_after = r ? r->resolve_after : Micros(0);
      if (now - *a.clear_since < resolve_after) {
        ++it;
        continue;
      }
      Status s = store_.resolveAlert(a.id, now,
                                     "the condition has been clear since " +
                                         std::to_string(toUnixMicros(*a.clear_since) / 1'000'000));
      if (!s.isOk() && s.code() != StatusCode::kFailedPrecondition) {
        failed = s;
        ++it;
        continue;
      }
      a.record.state = "resolved";
      a.record.resolved = now;
      ++resolved_;
      changes.push_back(changeOf(AlertChange::Kind::kResolved, a));
      it = active_.erase(it);
    }
  }
  notify(changes);
  if (!failed.isOk()) {
    spdlog::error("alerts: cannot store an alert change: {}", failed.toString());
    return failed;
  }
  return changes;
}

Status AlertEngine::ack(int64_t id, const std::string& actor) {
  GPOOL_RETURN_IF_ERROR(store_.ackAlert(id, actor, clock_.now()));
  GPOOL_ASSIGN_OR_RETURN(store::AlertRecord rec, store_.getAlert(id));
  Active a;
  a.rule = rec.rule;
  a.record = rec;
  json labels = json::parse(rec.labels_json, nullptr, false);
  if (labels.is_object()) {
    for (const auto& [k, v] : labels.items()) {
      if (v.is_string()) a.labels[k] = v.get<std::string>();
    }
  }
  {
    std::lock_guard lock(mu_);
    auto it = active_.find(rec.fingerprint);
    if (it != active_.end() && it->second.id == id) it->second.record = rec;
  }
  notify({changeOf(AlertChange::Kind::kAcked, a)});
  return Status::ok();
}

void AlertEngine::notify(const std::vector<AlertChange>& changes) {
  for (const AlertChange& c : changes) {
    if (c.kind == AlertChange::Kind::kFired) {
      spdlog::warn("alert {} fired: {} ({})", c.alert.id, c.alertname, c.alert.summary);
    } else {
      spdlog::info("alert {} {}: {} ({})", c.alert.id, alertChangeName(c.kind), c.alertname,
                   c.alert.summary);
    }
    for (const auto& l : listeners_)
      l(c);
  }
}

void AlertEngine::writeMetrics(PromWriter& out) const {
  std::map<std::pair<std::string, std::string>, int> firing;
  uint64_t fired = 0, resolved = 0;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, r] : rules_) {
      if (r.enabled) firing[{r.alertname, r.severity}] += 0;
    }
    for (const auto& [fp, a] : active_) {
      if (!a.firing) continue;
      const AlertRule* r = rule(a.rule);
      if (r) ++firing[{r->alertname, r->severity}];
    }
    fired = fired_;
    resolved = resolved_;
  }
  out.family("gpool_alerts_firing", "gauge", "gpoold's built-in alerts firing now, by rule.");
  for (const auto& [key, n] : firing)
    out.sample("gpool_alerts_firing", {{"alertname", key.first}, {"severity", key.second}}, n);
  out.family("gpool_alert_transitions_total", "counter",
             "Alerts fired and resolved since gpoold started.");
  out.sample("gpool_alert_transitions_total", {{"transition", "fired"}}, double(fired));
  out.sample("gpool_alert_transitions_total", {{"transition", "resolved"}}, double(resolved));
}

// ---- AlertMonitor

AlertMonitor::AlertMonitor(AlertEngine& engine, Clock& clock, AlertSources sources)
    : engine_(engine), clock_(clock), sources_(std::move(sources)) {}

AlertMonitor::~AlertMonitor() {
  stop();
}

std::vector<AlertCondition> AlertMonitor::conditions() {
  const TimePoint now = clock_.now();
  std::vector<AlertCondition> out;
  auto add = [&out](std::string rule, std::map<std::string, std::string> labels,
                    std::string summary, double value) {
    out.push_back({std::move(rule), std::move(labels), std::move(summary), value});
  };
  auto ruleOf = [this](const char* name) { return engine_.rule(name); };

  std::vector<api::Node> nodes;
  if (sources_.registry) nodes = sources_.registry->nodes();
  std::map<std::string, const api::Gpu*> gpus;  // by UUID
  std::map<std::string, std::string> node_of;   // GPU UUID -> node
  std::map<std::string, const api::Node*> by_name;
  for (const api::Node& n : nodes) {
    by_name[n.name] = &n;
    for (const api::Gpu& g : n.gpus) {
      gpus[g.uuid] = &g;
      node_of[g.uuid] = n.name;
    }
  }
  auto gpuLabels = [&](const std::string& node, uint32_t index, const std::string& uuid) {
    return std::map<std::string, std::string>{
        {"Hostname", node}, {"gpu", std::to_string(index)}, {"UUID", uuid}};
  };

  // Telemetry: temperature, XIDs, ECC, idle allocations.
  std::vector<GpuSnapshot> snapshots;
  if (sources_.telemetry) snapshots = sources_.telemetry->snapshot();
  std::map<std::pair<int64_t, uint32_t>, std::pair<bool, std::map<std::string, std::string>>>
      tasks;  // (job, task) -> (all its GPUs at 0 %, labels)
  for (const GpuSnapshot& s : snapshots) {
    const GpuReading& r = s.reading;
    // A node that stopped reporting is the server_lost rule's; stale readings say nothing.
    bool down = false;
    for (const api::Node& n : nodes) {
      if (n.name == r.node) down = n.state == api::NodeState::kDown;
    }
    // A reading the node has not renewed says nothing about now (a lost GPU is gpu_lost's).
    if (down || now - r.taken_at > sources_.stale_after) continue;
    std::map<std::string, std::string> labels = gpuLabels(r.node, r.index, r.uuid);
    if (const AlertRule* hot = ruleOf("gpu_too_hot")) {
      double level = engine_.firing("gpu_too_hot", labels) ? hot->clear_threshold : hot->threshold;
      if (r.temperature_c >= level) {
        add("gpu_too_hot", labels,
            "GPU " + std::to_string(r.index) + " of " + r.node + " is at " +
                std::to_string(r.temperature_c) + " C (limit " +
                std::to_string(static_cast<int>(hot->threshold)) + " C)",
            r.temperature_c);
      }
    }
    if (const AlertRule* xid = ruleOf("gpu_xid")) {
      if (s.last_xid != 0 && now - s.last_xid_at <= Micros(int64_t(xid->threshold * 1e6))) {
        add("gpu_xid", labels,
            "GPU " + std::to_string(r.index) + " of " + r.node + " reported XID " +
                std::to_string(s.last_xid),
            s.last_xid);
      }
    }
    if (const AlertRule* ecc = ruleOf("gpu_ecc")) {
      if (r.ecc_uncorrected.value_or(0) > 0 || r.ecc_corrected.value_or(0) > ecc->threshold) {
        add("gpu_ecc", labels,
            "GPU " + std::to_string(r.index) + " of " + r.node + " has " +
                std::to_string(r.ecc_uncorrected.value_or(0)) + " uncorrected and " +
                std::to_string(r.ecc_corrected.value_or(0)) + " corrected ECC errors",
            double(r.ecc_uncorrected.value_or(0)));
      }
    }
    // A slice placed before its node stopped enforcing slices (an agent restarted without its
    // interposer, or with --slice-backstop report) runs with nothing holding it to its limits.
    const auto node_it = by_name.find(r.node);
    const api::Node* node = node_it == by_name.end() ? nullptr : node_it->second;
    if (node != nullptr && node->slices && !node->slices->enforced()) {
      for (const GpuTenant& t : s.tenants) {
        if (t.exclusive) continue;
        add("slice_unenforced",
            {{"Hostname", r.node},
             {"hpc_job", std::to_string(t.job_id)},
             {"task", std::to_string(t.task)},
             {"user", t.user}},
            "job " + std::to_string(t.job_id) + " task " + std::to_string(t.task) + " of " +
                t.user + " runs as a GPU slice on " + r.node +
                ", which does not enforce slices: " + node->slices->detail,
            1);
      }
    }
    for (const GpuTenant& t : s.tenants) {
      auto& [idle, tl] = tasks[{t.job_id, t.task}];
      if (tl.empty()) {
        idle = true;
        tl = {{"hpc_job", std::to_string(t.job_id)},
              {"task", std::to_string(t.task)},
              {"user", t.user},
              {"Hostname", r.node}};
      }
      if (r.utilization_pct > 0) idle = false;
    }
  }
  for (const auto& [key, v] : tasks) {
    if (!v.first) continue;
    add("allocation_idle", v.second,
        "job " + std::to_string(key.first) + " task " + std::to_string(key.second) + " of " +
            v.second.at("user") + " holds GPUs at 0 % utilisation",
        0);
  }

  // The registry: lost servers, versions against the pool.
  std::map<std::string, int> drivers, cudas;
  for (const api::Node& n : nodes) {
    if (n.state == api::NodeState::kDown) {
      add("server_lost", {{"Hostname", n.name}},
          "server " + n.name + " is DOWN" + (n.state_reason.empty() ? "" : ": " + n.state_reason),
          1);
    }
    if (!n.gpus.empty() && !n.gpus[0].driver_version.empty()) {
      ++drivers[n.gpus[0].driver_version];
      ++cudas[n.gpus[0].cuda_version];
    }
  }
  auto mostCommon = [](const std::map<std::string, int>& counts) {
    std::string best;
    int best_n = 0;
    for (const auto& [v, n] : counts) {
      if (n > best_n || (n == best_n && gpu::compareVersions(v, best) > 0)) {
        best = v;
        best_n = n;
      }
    }
    return best;
  };
  if (drivers.size() > 1 || cudas.size() > 1) {
    std::string driver = mostCommon(drivers), cuda = mostCommon(cudas);
    for (const api::Node& n : nodes) {
      if (n.gpus.empty() || n.gpus[0].driver_version.empty()) continue;
      const api::Gpu& g = n.gpus[0];
      if (g.driver_version == driver && g.cuda_version == cuda) continue;
      add("driver_mismatch",
          {{"Hostname", n.name},
           {"driver_version", g.driver_version},
           {"cuda_version", g.cuda_version}},
          "server " + n.name + " runs driver " + g.driver_version + " / CUDA " + g.cuda_version +
              ", most of the pool " + driver + " / CUDA " + cuda,
          0);
    }
  }

  // Jobs asking for a CUDA version no server's driver supports (the servers that are not DOWN,
  // as placement sees them): one alert per version, naming the jobs and the newest driver.
  if (ruleOf("cuda_below_need") && sources_.cuda_needs) {
    struct Need {
      int64_t jobs = 0;
      const PendingCudaNeed* first = nullptr;
    };
    std::map<uint32_t, Need> unmet;
    std::string newest;  // the newest CUDA version of the servers up
    std::string newest_on;
    for (const api::Node& n : nodes) {
      if (n.state == api::NodeState::kDown) continue;
      for (const api::Gpu& g : n.gpus) {
        if (g.cuda_version.empty()) continue;
        if (newest.empty() || gpu::compareVersions(g.cuda_version, newest) > 0) {
          newest = g.cuda_version;
          newest_on = n.name;
        }
      }
    }
    const std::vector<PendingCudaNeed> needs = sources_.cuda_needs();
    for (const PendingCudaNeed& need : needs) {
      const std::string wanted =
          std::to_string(need.min_cuda / 100) + "." + std::to_string(need.min_cuda % 100);
      if (!newest.empty() && gpu::compareVersions(newest, wanted) >= 0) continue;
      Need& u = unmet[need.min_cuda];
      ++u.jobs;
      if (u.first == nullptr) u.first = &need;
    }
    for (const auto& [version, u] : unmet) {
      const std::string wanted =
          std::to_string(version / 100) + "." + std::to_string(version % 100);
      add("cuda_below_need", {{"min_cuda", wanted}},
          std::to_string(u.jobs) + (u.jobs == 1 ? " pending job asks" : " pending jobs ask") +
              " for CUDA " + wanted + " or newer (job " + std::to_string(u.first->job_id) + " of " +
              u.first->user + " first); no server's driver supports it" +
              (newest.empty() ? " (no server reports a CUDA version)"
                              : " (the newest: CUDA " + newest + " on " + newest_on + ")"),
          double(u.jobs));
    }
  }

  // The agents' findings: lost GPUs, strays, memory left behind.
  if (sources_.findings) {
    for (const auto& [node, findings] : sources_.findings()) {
      for (const HealthFinding& f : findings) {
        auto g = gpus.find(f.gpu_uuid);
        std::string index = g == gpus.end() ? "" : std::to_string(g->second->index);
        std::map<std::string, std::string> labels = {
            {"Hostname", node}, {"gpu", index}, {"UUID", f.gpu_uuid}};
        if (f.check == "gpu_missing") {
          add("gpu_lost", labels, f.message, 1);
        } else if (f.check == "stray_process" || f.check == "dead_task_process") {
          labels["pid"] = std::to_string(f.pid);
          labels["process_user"] = f.user;
          add("stray_process", labels,
              f.message + (f.user.empty() ? "" : " (user " + f.user + ")") +
                  (f.action.empty() ? "" : "; " + f.action),
              double(f.used_mib));
        } else if (f.check == "leaked_memory") {
          add("leaked_memory", labels, f.message, double(f.used_mib));
        }
      }
    }
  }

  // The queue and the store.
  if (const AlertRule* q = ruleOf("queue_blocked"); q && sources_.job_stats) {
    std::shared_ptr<const JobStats> stats = sources_.job_stats();
    static const std::set<std::string> kWaitingByChoice = {
        "Dependency", "JobHeldUser", "JobHeldAdmin", "BeginTime", "DependencyNeverSatisfied"};
    for (const store::PendingReasonCount& p : stats->pending) {
      if (kWaitingByChoice.count(p.reason) || stats->read_at == TimePoint{}) continue;
      double waited = std::chrono::duration<double>(now - p.oldest_submit).count();
      if (waited > q->threshold) {
        add("queue_blocked", {{"reason", p.reason}},
            std::to_string(p.jobs) + " jobs pending for " + p.reason + ", the oldest for " +
                std::to_string(static_cast<int64_t>(waited / 60)) + " min",
            waited);
      }
    }
  }
  if (sources_.store_errors) {
    uint64_t errors = sources_.store_errors();
    std::lock_guard lock(mu_);
    if (errors > last_store_errors_) {
      add("store_errors", {},
          std::to_string(errors - last_store_errors_) + " store operations failed",
          double(errors - last_store_errors_));
    }
    last_store_errors_ = errors;
  }

  // Tasks of what a restored backup does not hold: while they run, and for a while after
  // they were stopped, so that an admin who looks later still finds them.
  if (const AlertRule* u = ruleOf("unknown_task"); u && sources_.unknown_tasks) {
    const Micros keep(static_cast<int64_t>(u->threshold * 1e6));
    for (const UnknownTask& t : sources_.unknown_tasks()) {
      if (t.ended_at && now - *t.ended_at > keep) continue;
      std::map<std::string, std::string> labels = {{"Hostname", t.node},
                                                   {"hpc_job", std::to_string(t.job_id)},
                                                   {"task", std::to_string(t.task)},
                                                   {"incarnation", std::to_string(t.incarnation)}};
      if (!t.user.empty()) labels["user"] = t.user;
      add("unknown_task", labels, describeUnknownTask(t), t.ended_at ? 0 : 1);
    }
  }
  return out;
}

Result<std::vector<AlertChange>> AlertMonitor::evaluateNow() {
  return engine_.evaluate(conditions());
}

void AlertMonitor::start(Micros every) {
  if (thread_.joinable()) return;
  thread_ = std::jthread([this, every](std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    while (!stop.stop_requested()) {
      Result<std::vector<AlertChange>> r = evaluateNow();
      if (!r.ok()) spdlog::warn("alerts: evaluation failed: {}", r.status().toString());
      std::unique_lock lock(mu);
      cv.wait_for(lock, stop, every, [] { return false; });
    }
  });
}

void AlertMonitor::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

}  // namespace gpool::controller
