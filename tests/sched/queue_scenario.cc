#include "sched/queue_scenario.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/units.h"

namespace gpool::sched::testing {
namespace {

struct Line {
  std::vector<std::string> words;
  std::map<std::string, std::string> kv;
  std::set<std::string> flags;
};

Line split(const std::string& text) {
  Line l;
  std::istringstream in(text);
  std::string w;
  while (in >> w) {
    auto eq = w.find('=');
    if (eq != std::string::npos) {
      l.kv[w.substr(0, eq)] = w.substr(eq + 1);
    } else if (l.words.size() >= 2 && (w == "preemptible" || w == "warned" || w == "no_preempt" ||
                                       w == "held" || w == "admin_held")) {
      l.flags.insert(w);
    } else {
      l.words.push_back(w);
    }
  }
  return l;
}

Result<int64_t> toInt(const std::string& s) {
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used != s.size()) return Status::invalidArgument("not an integer: '" + s + "'");
    return static_cast<int64_t>(v);
  } catch (...) {
    return Status::invalidArgument("not an integer: '" + s + "'");
  }
}

Result<double> toDouble(const std::string& s) {
  try {
    return std::stod(s);
  } catch (...) {
    return Status::invalidArgument("not a number: '" + s + "'");
  }
}

bool onOff(const std::string& v) {
  return v == "on" || v == "true" || v == "1";
}

Status applyConfig(SchedulerConfig& c, UsageLedger& usage, const std::string& key,
                   const std::string& v) {
  auto dur = [&](int64_t* out) -> Status {
    GPOOL_ASSIGN_OR_RETURN(*out, parseDuration(v));
    return Status::ok();
  };
  auto num = [&](double* out) -> Status {
    GPOOL_ASSIGN_OR_RETURN(*out, toDouble(v));
    return Status::ok();
  };
  if (key == "order") {
    GPOOL_ASSIGN_OR_RETURN(c.order, parseQueueOrder(v));
    return Status::ok();
  }
  if (key == "backfill") return c.backfill.enabled = onOff(v), Status::ok();
  if (key == "default_limit") return dur(&c.backfill.default_time_limit_s);
  if (key == "preemption") return c.preemption.enabled = onOff(v), Status::ok();
  if (key == "min_run") return dur(&c.preemption.min_run_time_s);
  if (key == "delay") return dur(&c.preemption.delay_s);
  if (key == "grace") return dur(&c.preemption.grace_s);
  if (key == "reclaim") return c.preemption.reclaim = onOff(v), Status::ok();
  if (key == "reclaim_min_run") return dur(&c.preemption.reclaim_min_run_time_s);
  if (key == "reclaim_delay") return dur(&c.preemption.reclaim_delay_s);
  if (key == "idle") return c.idle.enabled = onOff(v), Status::ok();
  if (key == "idle_flag") return dur(&c.idle.flag_after_s);
  if (key == "idle_warn") return dur(&c.idle.warn_after_s);
  if (key == "idle_preempt") return dur(&c.idle.preempt_after_s);
  if (key == "idle_evict") return c.idle.preempt = onOff(v), Status::ok();
  if (key == "weight.fairshare") return num(&c.weights.fairshare);
  if (key == "weight.qos") return num(&c.weights.qos);
  if (key == "weight.age") return num(&c.weights.age);
  if (key == "weight.size") return num(&c.weights.job_size);
  if (key == "favor_small") return c.weights.favor_small = onOff(v), Status::ok();
  if (key == "half_life") {
    int64_t h = 0;
    GPOOL_RETURN_IF_ERROR(dur(&h));
    usage = UsageLedger(h);
    return Status::ok();
  }
  if (key == "las_threshold") {
    double t = 0;
    GPOOL_RETURN_IF_ERROR(num(&t));
    c.las_thresholds_gpu_s = {t};
    return Status::ok();
  }
  return Status::invalidArgument("unknown config key '" + key + "'");
}

// Allocates a running job on its node the simple way: the first free GPUs (whole) or the first
// GPU with room (slice).
Result<std::vector<TaskAllocation>> allocateOn(const ClusterState& cluster, size_t node,
                                               const TaskRequest& task, uint32_t tasks) {
  ClusterState scratch = cluster;
  std::vector<TaskAllocation> out;
  for (uint32_t t = 0; t < tasks; ++t) {
    const Node& n = scratch.node(node);
    TaskAllocation a;
    a.node = node;
    if (task.isSlice()) {
      for (const Gpu& g : n.gpus) {
        if (g.compute_free >= task.gpus && g.memory_free_mib >= task.gpu_memory_mib) {
          a.gpus.push_back({g.index, task.gpu_memory_mib, task.gpus});
          break;
        }
      }
      if (a.gpus.empty()) return Status::invalidArgument("no GPU with room on " + n.name);
    } else {
      for (const Gpu& g : n.gpus) {
        if (a.gpus.size() == task.wholeGpus()) break;
        if (g.idle()) a.gpus.push_back({g.index, g.memory_total_mib, 1000});
      }
      if (a.gpus.size() != task.wholeGpus()) {
        return Status::invalidArgument("not enough idle GPUs on " + n.name);
      }
    }
    GPOOL_RETURN_IF_ERROR(scratch.apply(a));
    out.push_back(std::move(a));
  }
  return out;
}

Result<Job> parseJob(const Line& l, uint64_t gpu_mem) {
  if (l.words.size() < 5) return Status::invalidArgument("expected: <id> <user> <group> <gpus>");
  Job j;
  GPOOL_ASSIGN_OR_RETURN(int64_t id, toInt(l.words[1]));
  j.id = static_cast<JobId>(id);
  j.user = l.words[2];
  j.group = l.words[3];
  GPOOL_ASSIGN_OR_RETURN(uint32_t gpus, parseGpuCount(l.words[4]));
  j.request.job = "job " + l.words[1];
  j.request.task.gpus = gpus;
  if (gpus < 1000) j.request.task.gpu_memory_mib = gpu_mem * gpus / 1000;
  j.request.tasks = 1;
  j.request.scope = GangScope::kSingleServer;
  for (const auto& [k, v] : l.kv) {
    if (k == "submit") {
      GPOOL_ASSIGN_OR_RETURN(int64_t t, toInt(v));
      j.submit_time = kOrigin + std::chrono::seconds(t);
    } else if (k == "limit") {
      GPOOL_ASSIGN_OR_RETURN(j.time_limit_s, parseDuration(v));
    } else if (k == "qos") {
      j.qos = v;
    } else if (k == "nice") {
      GPOOL_ASSIGN_OR_RETURN(j.nice, toInt(v));
    } else if (k == "after" || k == "afternotok" || k == "afterany") {
      // The dependency's state is set once every job is read (end of parseScenario).
      GPOOL_ASSIGN_OR_RETURN(int64_t dep, toInt(v));
      DependencyKind kind = k == "after"        ? DependencyKind::kAfterOk
                            : k == "afternotok" ? DependencyKind::kAfterNotOk
                                                : DependencyKind::kAfterAny;
      j.dependencies.push_back({static_cast<JobId>(dep), kind, DependencyState::kUnknown});
    } else if (k == "victims") {
      // victims=3,4: jobs evicted for this one by earlier passes.
      std::istringstream ids(v);
      std::string item;
      while (std::getline(ids, item, ',')) {
        GPOOL_ASSIGN_OR_RETURN(int64_t victim, toInt(item));
        j.victims.push_back(static_cast<JobId>(victim));
      }
    } else if (k == "array") {
      // array=ID%N: an element of array ID, at most N of whose elements run at once.
      size_t percent = v.find('%');
      if (percent == std::string::npos) return Status::invalidArgument("array: expected ID%N");
      GPOOL_ASSIGN_OR_RETURN(int64_t array, toInt(v.substr(0, percent)));
      GPOOL_ASSIGN_OR_RETURN(int64_t limit, toInt(v.substr(percent + 1)));
      j.array_id = static_cast<JobId>(array);
      j.array_limit = static_cast<uint32_t>(limit);
    } else if (k == "tasks") {
      GPOOL_ASSIGN_OR_RETURN(int64_t n, toInt(v));
      j.request.tasks = static_cast<uint32_t>(n);
      j.request.scope = GangScope::kMultiServer;
    } else if (k == "nodes") {
      GPOOL_ASSIGN_OR_RETURN(int64_t n, toInt(v));
      j.request.nodes = static_cast<uint32_t>(n);
    } else if (k == "model") {
      j.request.task.constraints.gpu_models.push_back(v);
    } else if (k == "duration") {
      GPOOL_ASSIGN_OR_RETURN(j.expected_duration_s, parseDuration(v));
    } else if (k == "attained") {
      GPOOL_ASSIGN_OR_RETURN(j.attained_gpu_seconds, toDouble(v));
    } else if (k == "on" || k == "start" || k == "idle_since" || k == "preempting") {
      // handled by the caller for `run`
    } else {
      return Status::invalidArgument("unknown job field '" + k + "'");
    }
  }
  j.preemptible = l.flags.count("preemptible") > 0;
  if (l.flags.count("held")) j.hold = Hold::kUser;
  if (l.flags.count("admin_held")) j.hold = Hold::kAdmin;
  return j;
}

}  // namespace

Result<Scenario> parseScenario(const std::string& text) {
  Scenario s;
  s.config.qos_levels.clear();
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  uint64_t gpu_mem = 16384;
  std::map<JobId, DependencyState> ended;
  while (std::getline(in, raw)) {
    ++line_no;
    auto hash = raw.find('#');
    if (hash != std::string::npos) raw.resize(hash);
    Line l = split(raw);
    if (l.words.empty()) continue;
    const std::string& d = l.words[0];
    auto fail = [&](const Status& st) { return st.withContext("line " + std::to_string(line_no)); };
    auto at = [&](const std::string& key) -> Result<TimePoint> {
      auto it = l.kv.find(key);
      if (it == l.kv.end()) return Status::invalidArgument("missing " + key + "=");
      GPOOL_ASSIGN_OR_RETURN(int64_t t, toInt(it->second));
      return kOrigin + std::chrono::seconds(t);
    };
    if (d == "node") {
      if (l.words.size() < 3) return fail(Status::invalidArgument("node <name> <gpus>"));
      auto count = toInt(l.words[2]);
      if (!count.ok()) return fail(count.status());
      Node n;
      n.name = l.words[1];
      n.cpu_total_millis = n.cpu_free_millis = 64000;
      n.ram_total_mib = n.ram_free_mib = 512 * 1024;
      uint64_t mem = gpu_mem;
      if (l.kv.count("mem")) mem = static_cast<uint64_t>(toInt(l.kv["mem"]).valueOr(16384));
      for (int64_t i = 0; i < *count; ++i) {
        Gpu g;
        g.index = static_cast<uint32_t>(i);
        g.model = l.kv.count("model") ? l.kv["model"] : "V100";
        g.memory_total_mib = g.memory_free_mib = mem;
        n.gpus.push_back(g);
      }
      s.cluster.addNode(std::move(n));
    } else if (d == "config") {
      if (l.words.size() < 3) return fail(Status::invalidArgument("config <key> <value>"));
      Status st = applyConfig(s.config, s.usage, l.words[1], l.words[2]);
      if (!st.isOk()) return fail(st);
    } else if (d == "qos") {
      QosLevel q;
      q.name = l.words.at(1);
      if (l.kv.count("priority"))
        q.priority = static_cast<uint32_t>(toInt(l.kv["priority"]).valueOr(0));
      if (l.kv.count("max_per_user")) {
        auto g = parseGpuCount(l.kv["max_per_user"]);
        if (!g.ok()) return fail(g.status());
        q.max_gpus_per_user = *g;
      }
      if (l.kv.count("grace")) {
        auto g = parseDuration(l.kv["grace"]);
        if (!g.ok()) return fail(g.status());
        q.grace_s = *g;
      }
      q.preemptible = l.flags.count("preemptible") > 0;
      q.can_preempt = l.flags.count("no_preempt") == 0;
      s.config.qos_levels.push_back(q);
    } else if (d == "group") {
      GroupPolicy& g = s.config.groups[l.words.at(1)];
      for (const auto& [k, v] : l.kv) {
        if (k == "weight") {
          g.over_quota_weight = toDouble(v).valueOr(1);
        } else if (k == "shares") {
          s.config.fairshare.group_shares[l.words[1]] = toDouble(v).valueOr(1);
        } else if (k == "gpu_hours") {  // gpu_hours=USED/LIMIT
          size_t slash = v.find('/');
          if (slash == std::string::npos) return fail(Status::invalidArgument("USED/LIMIT"));
          auto used = toDouble(v.substr(0, slash));
          auto limit = toDouble(v.substr(slash + 1));
          if (!used.ok() || !limit.ok()) return fail(Status::invalidArgument("USED/LIMIT"));
          g.gpu_hours_used = *used;
          g.gpu_hours = *limit;
        } else if (k == "max_compute") {  // a sum of shares: "1.5" is fine here
          auto n = parseScaledDecimal(v, 3, uint64_t{1} << 40, "compute");
          if (!n.ok()) return fail(n.status());
          g.max_compute = *n;
        } else {
          auto n = parseGpuCount(v);
          if (!n.ok()) return fail(n.status());
          if (k == "quota")
            g.quota = *n;
          else if (k == "max")
            g.max_gpus = *n;
          else if (k == "max_per_user")
            g.max_gpus_per_user = *n;
          else
            return fail(Status::invalidArgument("unknown group field '" + k + "'"));
        }
      }
    } else if (d == "user") {
      UserPolicy& u = s.config.users[l.words.at(1)];
      for (const auto& [k, v] : l.kv) {
        if (k == "max") {
          auto n = parseGpuCount(v);
          if (!n.ok()) return fail(n.status());
          u.max_gpus = *n;
        } else if (k == "max_compute") {
          auto n = parseScaledDecimal(v, 3, uint64_t{1} << 40, "compute");
          if (!n.ok()) return fail(n.status());
          u.max_compute = *n;
        } else if (k == "gpu_hours") {  // gpu_hours=USED/LIMIT
          size_t slash = v.find('/');
          if (slash == std::string::npos) return fail(Status::invalidArgument("USED/LIMIT"));
          auto used = toDouble(v.substr(0, slash));
          auto limit = toDouble(v.substr(slash + 1));
          if (!used.ok() || !limit.ok()) return fail(Status::invalidArgument("USED/LIMIT"));
          u.gpu_hours_used = *used;
          u.gpu_hours = *limit;
        } else {
          return fail(Status::invalidArgument("unknown user field '" + k + "'"));
        }
      }
    } else if (d == "usage") {
      if (l.words.size() < 4) return fail(Status::invalidArgument("usage <user> <group> <v>"));
      auto v = toDouble(l.words[3]);
      if (!v.ok()) return fail(v.status());
      s.usage.chargeBilled(l.words[1], l.words[2], *v, s.now);
    } else if (d == "now") {
      auto t = toInt(l.words.at(1));
      if (!t.ok()) return fail(t.status());
      s.now = kOrigin + std::chrono::seconds(*t);
    } else if (d == "job" || d == "run") {
      auto job = parseJob(l, gpu_mem);
      if (!job.ok()) return fail(job.status());
      if (d == "run") {
        job->state = JobState::kRunning;
        auto node = s.cluster.findNode(l.kv["on"]);
        if (!node) return fail(Status::invalidArgument("run needs on=<known node>"));
        auto start = at("start");
        if (!start.ok()) return fail(start.status());
        job->start_time = *start;
        if (!l.kv.count("submit")) job->submit_time = *start;
        auto alloc = allocateOn(s.cluster, *node, job->request.task, job->request.tasks);
        if (!alloc.ok()) return fail(alloc.status());
        for (const auto& a : *alloc) {
          Status st = s.cluster.apply(a);
          if (!st.isOk()) return fail(st);
        }
        job->allocation = std::move(*alloc);
        job->idle_warned = l.flags.count("warned") > 0;
        if (l.kv.count("idle_since")) job->idle_since = *at("idle_since");
        if (l.kv.count("preempting")) job->preempt_deadline = *at("preempting");
      }
      s.jobs.push_back(std::move(*job));
    } else if (d == "ended") {
      // ended <id> <succeeded|failed>: a job no longer in the queue, for dependencies.
      if (l.words.size() < 3) return fail(Status::invalidArgument("ended <id> <how>"));
      auto id = toInt(l.words[1]);
      if (!id.ok()) return fail(id.status());
      ended[static_cast<JobId>(*id)] =
          l.words[2] == "succeeded" ? DependencyState::kSucceeded : DependencyState::kFailed;
    } else if (d == "unhealthy") {
      // unhealthy <node> <gpu index> [reason...]
      if (l.words.size() < 3) return fail(Status::invalidArgument("unhealthy <node> <gpu>"));
      auto node = s.cluster.findNode(l.words[1]);
      auto gpu = toInt(l.words[2]);
      if (!node || !gpu.ok()) return fail(Status::invalidArgument("unhealthy <node> <gpu>"));
      Gpu& g = s.cluster.mutableNode(*node).gpus.at(static_cast<size_t>(*gpu));
      g.healthy = false;
      for (size_t w = 3; w < l.words.size(); ++w)
        g.health_reason += (w > 3 ? " " : "") + l.words[w];
    } else if (d == "expect") {
      if (l.words.size() < 3) return fail(Status::invalidArgument("expect <kind> <id> ..."));
      Expectation e;
      e.kind = l.words[1];
      e.line = line_no;
      auto id = toInt(l.words[2]);
      if (!id.ok()) return fail(id.status());
      e.job = static_cast<JobId>(*id);
      if (l.words.size() > 3) e.arg = l.words[3];
      if (l.kv.count("on")) e.arg = l.kv["on"];
      if (l.kv.count("for")) e.value = toInt(l.kv["for"]).valueOr(-1);
      if (l.kv.count("at")) e.value = toInt(l.kv["at"]).valueOr(-1);
      s.expectations.push_back(e);
    } else {
      return fail(Status::invalidArgument("unknown directive '" + d + "'"));
    }
  }
  if (s.config.qos_levels.empty()) s.config.qos_levels.push_back(QosLevel{});
  // A dependency on a job of the scenario is open; on an `ended` one, as it ended; on any
  // other, unknown.
  std::set<JobId> present;
  for (const Job& j : s.jobs)
    present.insert(j.id);
  for (Job& j : s.jobs) {
    for (Dependency& dep : j.dependencies) {
      if (present.count(dep.job)) {
        dep.state = DependencyState::kOpen;
      } else if (auto e = ended.find(dep.job); e != ended.end()) {
        dep.state = e->second;
      }
    }
  }
  return s;
}

Result<Scenario> loadScenario(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::ioError("cannot open scenario " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  auto s = parseScenario(ss.str());
  if (!s.ok()) return s.status().withContext(path);
  return s;
}

std::vector<std::string> checkExpectations(const Scenario& s, const Decisions& d) {
  std::vector<std::string> errors;
  std::set<JobId> want_start, want_preempt, got_start, got_preempt;
  for (const auto& st : d.starts)
    got_start.insert(st.job);
  for (const auto& p : d.preemptions)
    got_preempt.insert(p.job);
  auto where = [](const Expectation& e) { return "line " + std::to_string(e.line) + ": "; };
  for (const Expectation& e : s.expectations) {
    std::string id = std::to_string(e.job);
    if (e.kind == "start") {
      want_start.insert(e.job);
      auto it = std::find_if(d.starts.begin(), d.starts.end(),
                             [&](const StartDecision& x) { return x.job == e.job; });
      if (it == d.starts.end()) {
        errors.push_back(where(e) + "job " + id + " did not start");
      } else if (!e.arg.empty() && s.cluster.node(it->allocation.at(0).node).name != e.arg) {
        errors.push_back(where(e) + "job " + id + " started on " +
                         s.cluster.node(it->allocation[0].node).name + ", expected " + e.arg);
      }
    } else if (e.kind == "preempt") {
      want_preempt.insert(e.job);
      auto it = std::find_if(d.preemptions.begin(), d.preemptions.end(),
                             [&](const PreemptDecision& x) { return x.job == e.job; });
      if (it != d.preemptions.end() && e.value >= 0 && it->for_job != static_cast<JobId>(e.value)) {
        errors.push_back(where(e) + "job " + id + " preempted for " + std::to_string(it->for_job));
      }
    } else if (e.kind == "pending") {
      auto it = std::find_if(d.pending.begin(), d.pending.end(),
                             [&](const PendingDecision& x) { return x.job == e.job; });
      if (it == d.pending.end()) {
        errors.push_back(where(e) + "job " + id + " is not pending");
      } else if (queueReasonName(it->reason) != e.arg) {
        errors.push_back(where(e) + "job " + id + " pends with " +
                         std::string(queueReasonName(it->reason)) + " (" + it->detail +
                         "), expected " + e.arg);
      }
    } else if (e.kind == "reservation") {
      auto it = std::find_if(d.reservations.begin(), d.reservations.end(),
                             [&](const ReservationDecision& x) { return x.job == e.job; });
      if (it == d.reservations.end()) {
        errors.push_back(where(e) + "job " + id + " has no reservation");
      } else if (e.value >= 0 && it->start != kOrigin + std::chrono::seconds(e.value)) {
        errors.push_back(where(e) + "job " + id + " reserved at " +
                         std::to_string((it->start - kOrigin).count() / 1000000) + ", expected " +
                         std::to_string(e.value));
      }
    } else if (e.kind == "cancel") {
      auto it = std::find_if(d.cancels.begin(), d.cancels.end(),
                             [&](const CancelDecision& x) { return x.job == e.job; });
      if (it == d.cancels.end()) errors.push_back(where(e) + "job " + id + " was not cancelled");
    } else if (e.kind == "idle") {
      auto it = std::find_if(d.idle.begin(), d.idle.end(),
                             [&](const IdleDecision& x) { return x.job == e.job; });
      if (it == d.idle.end()) {
        errors.push_back(where(e) + "job " + id + " not flagged idle");
      } else if (idleActionName(it->action) != e.arg) {
        errors.push_back(where(e) + "job " + id + " idle action " +
                         std::string(idleActionName(it->action)) + ", expected " + e.arg);
      }
    } else {
      errors.push_back(where(e) + "unknown expectation '" + e.kind + "'");
    }
  }
  for (JobId j : got_start) {
    if (!want_start.count(j))
      errors.push_back("job " + std::to_string(j) + " started unexpectedly");
  }
  for (JobId j : want_preempt) {
    if (!got_preempt.count(j)) errors.push_back("job " + std::to_string(j) + " was not preempted");
  }
  for (JobId j : got_preempt) {
    if (!want_preempt.count(j)) {
      errors.push_back("job " + std::to_string(j) + " was preempted unexpectedly");
    }
  }
  return errors;
}

}  // namespace gpool::sched::testing
