#include "sim/scenario.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "common/random.h"
#include "common/units.h"
#include "sched/policies.h"
#include "sched/usage.h"

namespace gpool::sim {

namespace {

struct Words {
  std::vector<std::string> plain;
  std::map<std::string, std::string> kv;
};

Words splitWords(const std::string& line) {
  Words w;
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    auto eq = word.find('=');
    if (eq != std::string::npos && eq > 0) {
      w.kv[word.substr(0, eq)] = word.substr(eq + 1);
    } else {
      w.plain.push_back(word);
    }
  }
  return w;
}

std::vector<std::string> commaList(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

Result<uint32_t> toCount(const std::string& text, const std::string& what) {
  GPOOL_ASSIGN_OR_RETURN(uint64_t v, parseScaledDecimal(text, 0, 1'000'000, what));
  return static_cast<uint32_t>(v);
}

Result<double> toHours(const std::string& text) {
  GPOOL_ASSIGN_OR_RETURN(uint64_t milli,
                         parseScaledDecimal(text, 3, 1'000'000'000'000ULL, "gpu_hours"));
  return static_cast<double>(milli) / 1000.0;
}

const std::set<std::string>& settingKeys() {
  static const std::set<std::string> keys = {
      "schedule_interval",  "usage_half_life", "queue_order",          "backfill",
      "default_time_limit", "preemption",      "preempt_min_run_time", "preempt_delay",
      "preempt_grace",      "reclaim",         "reclaim_min_run_time", "reclaim_delay"};
  return keys;
}

// Whether `state` counts as `wanted` ("ENDED" is every finished state).
bool stateIs(const std::string& state, const std::string& wanted) {
  if (wanted == "ENDED") {
    return state != "PENDING" && state != "RUNNING" && state != "COMPLETING" && !state.empty();
  }
  return state == wanted;
}

}  // namespace

Result<Scenario> parseScenario(const std::string& text, const std::string& source) {
  Scenario s;
  s.source = source;
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  std::set<std::string> names;
  while (std::getline(in, raw)) {
    ++line_no;
    if (auto hash = raw.find('#'); hash != std::string::npos) raw.resize(hash);
    Words w = splitWords(raw);
    if (w.plain.empty()) continue;
    const std::string where = source + ":" + std::to_string(line_no) + ": ";
    auto bad = [&](const std::string& why) { return Status::invalidArgument(where + why); };
    auto wrap = [&](const Status& st) { return Status::invalidArgument(where + st.message()); };
    const std::string& d = w.plain[0];
    auto need = [&](size_t n, const char* form) -> Status {
      if (w.plain.size() < n) return bad(std::string("expected: ") + form);
      return Status::ok();
    };
    if (d == "server") {
      GPOOL_RETURN_IF_ERROR(need(2,
                                 "server NAME [gpus=N] [model=M] [gpu_mem=SIZE] [cpus=N] "
                                 "[ram=SIZE] [fixture=F]"));
      ScenarioServer srv;
      srv.name = w.plain[1];
      for (const auto& [k, v] : w.kv) {
        if (k == "gpus") {
          auto n = toCount(v, "gpus");
          if (!n.ok()) return wrap(n.status());
          srv.gpus = *n;
        } else if (k == "model") {
          srv.model = v;
        } else if (k == "gpu_mem") {
          auto m = parseMemoryMiB(v);
          if (!m.ok()) return wrap(m.status());
          srv.gpu_memory_mib = *m;
        } else if (k == "cpus") {
          auto c = parseCpuMillis(v);
          if (!c.ok()) return wrap(c.status());
          srv.cpu_millis = *c;
        } else if (k == "ram") {
          auto m = parseMemoryMiB(v);
          if (!m.ok()) return wrap(m.status());
          srv.ram_mib = *m;
        } else if (k == "fixture") {
          srv.fixture = v;
        } else {
          return bad("unknown server field '" + k + "'");
        }
      }
      s.servers.push_back(std::move(srv));
    } else if (d == "set") {
      GPOOL_RETURN_IF_ERROR(need(3, "set KEY VALUE"));
      if (!settingKeys().count(w.plain[1])) {
        return bad("unknown setting '" + w.plain[1] +
                   "' (gpoold.toml's [scheduler] keys, schedule_interval, usage_half_life)");
      }
      s.settings[w.plain[1]] = w.plain[2];
    } else if (d == "qos") {
      GPOOL_RETURN_IF_ERROR(need(2, "qos NAME [priority=N] [preemptible] [grace=D]"));
      ScenarioQos q;
      q.name = w.plain[1];
      for (size_t i = 2; i < w.plain.size(); ++i) {
        if (w.plain[i] != "preemptible") return bad("unknown qos flag '" + w.plain[i] + "'");
        q.preemptible = true;
      }
      for (const auto& [k, v] : w.kv) {
        if (k == "priority") {
          auto n = toCount(v, "priority");
          if (!n.ok()) return wrap(n.status());
          q.priority = *n;
        } else if (k == "grace") {
          auto g = parseDuration(v);
          if (!g.ok()) return wrap(g.status());
          q.grace_s = *g;
        } else if (k == "max_per_user") {
          auto g = parseGpuCount(v);
          if (!g.ok()) return wrap(g.status());
          q.max_gpus_per_user_milli = *g;
        } else {
          return bad("unknown qos field '" + k + "'");
        }
      }
      s.qos.push_back(std::move(q));
    } else if (d == "group") {
      GPOOL_RETURN_IF_ERROR(need(2, "group NAME [quota=G] [max=G] [gpu_hours=H]"));
      ScenarioGroup g;
      g.name = w.plain[1];
      for (const auto& [k, v] : w.kv) {
        if (k == "quota" || k == "max") {
          auto n = parseScaledDecimal(v, 3, uint64_t{1} << 40, k);
          if (!n.ok()) return wrap(n.status());
          (k == "quota" ? g.guaranteed_milli : g.max_gpus_milli.emplace()) = *n;
        } else if (k == "gpu_hours") {
          auto h = toHours(v);
          if (!h.ok()) return wrap(h.status());
          g.gpu_hours = *h;
        } else {
          return bad("unknown group field '" + k + "'");
        }
      }
      s.groups.push_back(std::move(g));
    } else if (d == "user") {
      GPOOL_RETURN_IF_ERROR(need(2, "user NAME [groups=G,G] [max=G]"));
      ScenarioUser u;
      u.name = w.plain[1];
      for (const auto& [k, v] : w.kv) {
        if (k == "groups") {
          u.groups = commaList(v);
        } else if (k == "max") {
          auto n = parseScaledDecimal(v, 3, uint64_t{1} << 40, "max");
          if (!n.ok()) return wrap(n.status());
          u.max_gpus_milli = *n;
        } else {
          return bad("unknown user field '" + k + "'");
        }
      }
      s.users.push_back(std::move(u));
    } else if (d == "submit") {
      GPOOL_RETURN_IF_ERROR(need(3,
                                 "submit NAME USER [group=G] [gpus=G] [qos=Q] [tasks=N] "
                                 "[preemptible] [run=D] [leaves=D]"));
      ScenarioStep step;
      step.kind = ScenarioStep::Kind::kSubmit;
      step.line = line_no;
      ScenarioJob& j = step.job;
      j.name = w.plain[1];
      j.user = w.plain[2];
      if (!names.insert(j.name).second) return bad("job '" + j.name + "' is submitted twice");
      for (size_t i = 3; i < w.plain.size(); ++i) {
        if (w.plain[i] != "preemptible") return bad("unknown submit flag '" + w.plain[i] + "'");
        j.preemptible = true;
      }
      for (const auto& [k, v] : w.kv) {
        if (k == "group") {
          j.group = v;
        } else if (k == "qos") {
          j.qos = v;
        } else if (k == "gpus") {
          auto g = parseGpuCount(v);
          if (!g.ok()) return wrap(g.status());
          j.gpus_milli = *g;
        } else if (k == "tasks") {
          auto n = toCount(v, "tasks");
          if (!n.ok()) return wrap(n.status());
          j.tasks = *n;
        } else if (k == "run") {
          auto r = parseDuration(v);
          if (!r.ok()) return wrap(r.status());
          j.run_s = *r;
        } else if (k == "leaves") {
          auto r = parseDuration(v);
          if (!r.ok()) return wrap(r.status());
          j.leaves_s = *r;
        } else {
          return bad("unknown submit field '" + k + "'");
        }
      }
      s.steps.push_back(std::move(step));
    } else if (d == "wait") {
      GPOOL_RETURN_IF_ERROR(need(3, "wait running|pending|ended NAME... [within=D]"));
      ScenarioStep step;
      step.kind = ScenarioStep::Kind::kWait;
      step.line = line_no;
      std::string state = w.plain[1];
      std::transform(state.begin(), state.end(), state.begin(), ::toupper);
      if (state != "RUNNING" && state != "PENDING" && state != "ENDED") {
        return bad("wait for running, pending or ended, not '" + w.plain[1] + "'");
      }
      step.state = state;
      step.names.assign(w.plain.begin() + 2, w.plain.end());
      for (const std::string& n : step.names)
        if (!names.count(n)) return bad("wait for job '" + n + "', which is not submitted");
      if (w.kv.count("within")) {
        auto d2 = parseDuration(w.kv["within"]);
        if (!d2.ok()) return wrap(d2.status());
        step.within_s = *d2;
      }
      s.steps.push_back(std::move(step));
    } else if (d == "expect") {
      GPOOL_RETURN_IF_ERROR(need(2,
                                 "expect state|starts|reason NAME=VALUE... | expect "
                                 "preempted VICTIM... for PREEMPTOR... | expect preempted "
                                 "none"));
      ScenarioStep step;
      step.kind = ScenarioStep::Kind::kExpect;
      step.line = line_no;
      step.what = w.plain[1];
      if (step.what != "state" && step.what != "starts" && step.what != "reason" &&
          step.what != "preempted") {
        return bad("expect state, starts, reason or preempted, not '" + step.what + "'");
      }
      if (step.what == "preempted") {
        step.args.assign(w.plain.begin() + 2, w.plain.end());
        if (step.args.size() == 1 && step.args[0] == "none") step.args.clear();
      } else {
        if (w.plain.size() > 2) return bad("expect " + step.what + " takes NAME=VALUE words");
        for (const auto& [k, v] : w.kv)
          step.args.push_back(k + "=" + v);
        if (step.args.empty()) return bad("expect " + step.what + " NAME=VALUE...");
      }
      s.steps.push_back(std::move(step));
    } else {
      return bad("unknown directive '" + d + "'");
    }
  }
  if (s.servers.empty()) return Status::invalidArgument(source + ": no server");
  return s;
}

Result<Scenario> loadScenario(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::ioError("cannot open the scenario " + path);
  std::stringstream text;
  text << f.rdbuf();
  return parseScenario(text.str(), path);
}

Result<sched::SchedulerConfig> scenarioConfig(const Scenario& s) {
  sched::SchedulerConfig c;  // gpoold's defaults
  for (const auto& [key, value] : s.settings) {
    auto dur = [&, &value = value](int64_t* out) -> Status {
      GPOOL_ASSIGN_OR_RETURN(*out, parseDuration(value));
      return Status::ok();
    };
    auto flag = [&, &key = key, &value = value](bool* out) -> Status {
      if (value != "true" && value != "false") {
        return Status::invalidArgument(key + ": expected true or false");
      }
      *out = value == "true";
      return Status::ok();
    };
    Status st;
    if (key == "queue_order") {
      GPOOL_ASSIGN_OR_RETURN(c.order, sched::parseQueueOrder(value));
    } else if (key == "backfill") {
      st = flag(&c.backfill.enabled);
    } else if (key == "default_time_limit") {
      st = dur(&c.backfill.default_time_limit_s);
    } else if (key == "preemption") {
      st = flag(&c.preemption.enabled);
    } else if (key == "preempt_min_run_time") {
      st = dur(&c.preemption.min_run_time_s);
    } else if (key == "preempt_delay") {
      st = dur(&c.preemption.delay_s);
    } else if (key == "preempt_grace") {
      st = dur(&c.preemption.grace_s);
    } else if (key == "reclaim") {
      st = flag(&c.preemption.reclaim);
    } else if (key == "reclaim_min_run_time") {
      st = dur(&c.preemption.reclaim_min_run_time_s);
    } else if (key == "reclaim_delay") {
      st = dur(&c.preemption.reclaim_delay_s);
    }
    if (!st.isOk()) return st.withContext(s.source + ": set " + key);
  }
  for (const ScenarioQos& q : s.qos) {
    sched::QosLevel level;
    level.name = q.name;
    level.priority = q.priority;
    level.preemptible = q.preemptible;
    level.grace_s = q.grace_s;  // as a stored level: unset is the configured preempt_grace
    level.max_gpus_per_user = q.max_gpus_per_user_milli.value_or(0);
    auto same = std::find_if(c.qos_levels.begin(), c.qos_levels.end(),
                             [&](const sched::QosLevel& l) { return l.name == q.name; });
    if (same != c.qos_levels.end()) {
      *same = level;
    } else {
      c.qos_levels.push_back(level);
    }
  }
  for (const ScenarioGroup& g : s.groups) {
    sched::GroupPolicy& p = c.groups[g.name];
    p.quota = g.guaranteed_milli;
    if (g.max_gpus_milli) p.max_gpus = std::max<uint64_t>(*g.max_gpus_milli, 1);
    p.gpu_hours = g.gpu_hours;
    c.fairshare.group_shares[g.name] = 1;
  }
  for (const ScenarioUser& u : s.users) {
    if (u.max_gpus_milli) c.users[u.name].max_gpus = std::max<uint64_t>(*u.max_gpus_milli, 1);
  }
  return c;
}

Result<int64_t> scenarioInterval(const Scenario& s) {
  auto it = s.settings.find("schedule_interval");
  if (it == s.settings.end()) return int64_t{1};
  GPOOL_ASSIGN_OR_RETURN(int64_t v, parseDuration(it->second));
  if (v <= 0) return Status::invalidArgument(s.source + ": schedule_interval must be positive");
  return v;
}

namespace {

// "v3 v4 for p" (or "none"): the victims and their preemptors, each sorted.
std::string preemptedText(const std::map<std::string, JobView>& jobs) {
  std::vector<std::string> victims, preemptors;
  for (const auto& [name, v] : jobs) {
    for (const std::string& p : v.preempted_for) {
      victims.push_back(name);
      preemptors.push_back(p);
    }
  }
  if (victims.empty()) return "none";
  std::sort(victims.begin(), victims.end());
  std::sort(preemptors.begin(), preemptors.end());
  std::string out;
  for (const std::string& v : victims)
    out += (out.empty() ? "" : " ") + v;
  out += " for";
  for (const std::string& p : preemptors)
    out += " " + p;
  return out;
}

}  // namespace

std::string traceLine(const std::vector<std::string>& names,
                      const std::map<std::string, JobView>& jobs) {
  std::map<std::string, std::vector<std::string>> by_state;
  std::string starts;
  for (const std::string& n : names) {
    auto it = jobs.find(n);
    if (it == jobs.end()) continue;
    const JobView& v = it->second;
    std::string state = stateIs(v.state, "ENDED") && v.state != "REFUSED" ? "ENDED" : v.state;
    by_state[state].push_back(n);
    starts += (starts.empty() ? "" : " ") + n + "=" + std::to_string(v.starts);
  }
  std::string out;
  for (const char* state : {"RUNNING", "PENDING", "ENDED", "REFUSED"}) {
    auto it = by_state.find(state);
    if (it == by_state.end()) continue;
    out += std::string(state);
    for (const std::string& n : it->second)
      out += " " + n;
    out += "; ";
  }
  return out + "starts " + starts + "; preempted " + preemptedText(jobs);
}

bool waitHolds(const ScenarioStep& step, const std::map<std::string, JobView>& jobs) {
  for (const std::string& n : step.names) {
    auto it = jobs.find(n);
    if (it == jobs.end() || !stateIs(it->second.state, step.state)) return false;
  }
  return true;
}

std::string checkExpectation(const ScenarioStep& step, const std::map<std::string, JobView>& jobs) {
  std::string failed;
  auto add = [&](const std::string& what) { failed += (failed.empty() ? "" : "; ") + what; };
  if (step.what == "preempted") {
    // The expected words in the form preemptedText writes (victims, "for", preemptors).
    std::vector<std::string> victims, preemptors;
    bool after_for = false;
    for (const std::string& w : step.args) {
      if (w == "for") {
        after_for = true;
        continue;
      }
      (after_for ? preemptors : victims).push_back(w);
    }
    std::sort(victims.begin(), victims.end());
    std::sort(preemptors.begin(), preemptors.end());
    std::string want;
    for (const std::string& v : victims)
      want += (want.empty() ? "" : " ") + v;
    if (!victims.empty()) want += " for";
    for (const std::string& p : preemptors)
      want += " " + p;
    if (want.empty()) want = "none";
    const std::string got = preemptedText(jobs);
    if (got != want) add("preempted " + got + ", expected " + want);
    return failed;
  }
  for (const std::string& arg : step.args) {
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const std::string want = arg.substr(eq + 1);
    auto it = jobs.find(name);
    if (it == jobs.end()) {
      add("no job '" + name + "'");
      continue;
    }
    const JobView& v = it->second;
    if (step.what == "state") {
      if (!stateIs(v.state, want)) add(name + " is " + v.state + ", expected " + want);
    } else if (step.what == "starts") {
      if (std::to_string(v.starts) != want) {
        add(name + " started " + std::to_string(v.starts) + " time(s), expected " + want);
      }
    } else if (step.what == "reason") {
      if (v.reason != want) add(name + " waits with " + v.reason + ", expected " + want);
    }
  }
  return failed;
}

namespace {

// One job of the replay.
struct SimJob {
  ScenarioJob spec;
  sched::Job job;
  JobView view;
  int64_t end_at = -1;    // a running job with a run time ends then
  int64_t leave_at = -1;  // a preempted one leaves then (and is requeued)
  int64_t started_at = 0;
  double used_gpu_s = 0;  // GPU-seconds of its ended runs
  std::string group;
};

class Replay {
 public:
  Replay(const Scenario& s, sched::SchedulerConfig config, int64_t interval)
      : s_(s), config_(std::move(config)), interval_(interval), ledger_(halfLife(s)) {
    for (const ScenarioServer& srv : s.servers) {
      sched::Node n;
      n.name = srv.name;
      n.cpu_total_millis = n.cpu_free_millis = srv.cpu_millis;
      n.ram_total_mib = n.ram_free_mib = srv.ram_mib;
      for (uint32_t g = 0; g < srv.gpus; ++g) {
        sched::Gpu gpu;
        gpu.index = g;
        gpu.model = srv.model;
        gpu.memory_total_mib = gpu.memory_free_mib = srv.gpu_memory_mib;
        n.gpus.push_back(std::move(gpu));
      }
      empty_.addNode(std::move(n));
    }
  }

  Result<std::vector<std::string>> run() {
    std::vector<std::string> trace;
    for (const ScenarioStep& step : s_.steps) {
      const std::string where = s_.source + ":" + std::to_string(step.line) + ": ";
      switch (step.kind) {
        case ScenarioStep::Kind::kSubmit: submit(step.job); break;
        case ScenarioStep::Kind::kWait: {
          const int64_t deadline = t_ + step.within_s;
          GPOOL_RETURN_IF_ERROR(pass());
          while (!waitHolds(step, views())) {
            if (t_ >= deadline) {
              return Status::deadlineExceeded(where + "not every job is " + step.state +
                                              " within " + formatDuration(step.within_s) + ": " +
                                              traceLine(order_, views()));
            }
            advance();
            GPOOL_RETURN_IF_ERROR(pass());
          }
          trace.push_back(traceLine(order_, views()));
          break;
        }
        case ScenarioStep::Kind::kExpect: {
          std::string failed = checkExpectation(step, views());
          if (!failed.empty()) return Status::failedPrecondition(where + failed);
          break;
        }
      }
    }
    return trace;
  }

 private:
  static int64_t halfLife(const Scenario& s) {
    auto it = s.settings.find("usage_half_life");
    if (it == s.settings.end()) return 7 * 24 * 3600;
    return parseDuration(it->second).valueOr(7 * 24 * 3600);
  }
  TimePoint at(int64_t t) const { return kOrigin + std::chrono::seconds(t); }

  std::map<std::string, JobView> views() const {
    std::map<std::string, JobView> out;
    for (const SimJob& j : jobs_)
      out[j.spec.name] = j.view;
    return out;
  }

  // The checks gpoold's submission makes that decide where a job belongs: its group (the
  // user's default, or one the user is in) and its QoS.
  void submit(const ScenarioJob& spec) {
    SimJob j;
    j.spec = spec;
    order_.push_back(spec.name);
    const ScenarioUser* user = nullptr;
    for (const ScenarioUser& u : s_.users)
      if (u.name == spec.user) user = &u;
    std::string group = spec.group;
    bool ok = true;
    if (group.empty()) {
      if (user && !user->groups.empty()) group = user->groups.front();
    } else {
      bool exists = std::any_of(s_.groups.begin(), s_.groups.end(),
                                [&](const ScenarioGroup& g) { return g.name == group; });
      bool member =
          user && std::find(user->groups.begin(), user->groups.end(), group) != user->groups.end();
      ok = exists && member;
    }
    if (!spec.qos.empty()) {
      ok = ok && std::any_of(config_.qos_levels.begin(), config_.qos_levels.end(),
                             [&](const sched::QosLevel& l) { return l.name == spec.qos; });
    }
    if (!ok) {
      j.view.state = "REFUSED";
      jobs_.push_back(std::move(j));
      return;
    }
    sched::Job& job = j.job;
    job.id = static_cast<sched::JobId>(jobs_.size() + 1);
    job.user = spec.user;
    job.group = group;
    job.qos = spec.qos.empty() ? config_.qos_levels.front().name : spec.qos;
    job.submit_time = at(t_);
    job.preemptible = spec.preemptible;
    job.request.job = std::to_string(job.id);
    job.request.tasks = spec.tasks;
    job.request.scope = sched::GangScope::kMultiServer;
    job.request.task.gpus = spec.gpus_milli;
    job.request.task.cpu_millis = 1000;  // the API's default for a task
    if (spec.gpus_milli > 0 && spec.gpus_milli < 1000) {
      job.request.task.gpu_memory_mib = s_.servers.front().gpu_memory_mib * spec.gpus_milli / 1000;
    }
    j.group = group;
    j.view.state = "PENDING";
    jobs_.push_back(std::move(j));
  }

  // GPU-hours of a user or group in the quota's period: ended and running work so far.
  double gpuHours(const std::string& who, bool group) const {
    double gpu_s = 0;
    for (const SimJob& j : jobs_) {
      if ((group ? j.group : j.spec.user) != who) continue;
      gpu_s += j.used_gpu_s;
      if (j.view.state == "RUNNING") {
        gpu_s += static_cast<double>(sched::gpuDemand(j.job)) / 1000.0 *
                 static_cast<double>(t_ - j.started_at);
      }
    }
    return gpu_s / 3600.0;
  }

  Status pass() {
    sched::ClusterState cluster = empty_;
    std::vector<sched::Job> active;
    for (SimJob& j : jobs_) {
      if (j.view.state != "PENDING" && j.view.state != "RUNNING") continue;
      if (j.view.state == "RUNNING") {
        for (const auto& a : j.job.allocation)
          GPOOL_RETURN_IF_ERROR(cluster.apply(a));
      }
      active.push_back(j.job);
    }
    sched::SchedulerConfig cfg = config_;
    for (auto& [name, g] : cfg.groups)
      if (g.gpu_hours) g.gpu_hours_used = gpuHours(name, true);
    for (auto& [name, u] : cfg.users)
      if (u.gpu_hours) u.gpu_hours_used = gpuHours(name, false);
    sched::Decisions d = pass_.run(cluster, active, ledger_, cfg, at(t_), random_);
    for (const sched::StartDecision& st : d.starts) {
      SimJob& j = byId(st.job);
      j.job.state = sched::JobState::kRunning;
      j.job.allocation = st.allocation;
      j.job.start_time = at(t_);
      j.job.victims.clear();
      j.started_at = t_;
      j.end_at = j.spec.run_s > 0 ? t_ + j.spec.run_s : -1;
      j.view.state = "RUNNING";
      j.view.reason.clear();
      ++j.view.starts;
    }
    for (const sched::PreemptDecision& p : d.preemptions) {
      SimJob& j = byId(p.job);
      j.leave_at = t_ + std::min(p.grace_s, j.spec.leaves_s.value_or(p.grace_s));
      j.job.preempt_deadline = at(t_ + p.grace_s);  // what gpoold knows: the grace's end
      if (p.for_job != 0) {
        SimJob& f = byId(p.for_job);
        f.job.victims.push_back(p.job);
        j.view.preempted_for.push_back(f.spec.name);
      } else {
        j.view.preempted_for.push_back("idle");
      }
    }
    for (const sched::PendingDecision& p : d.pending)
      byId(p.job).view.reason = std::string(sched::queueReasonName(p.reason));
    for (const sched::CancelDecision& c : d.cancels) {
      SimJob& j = byId(c.job);
      j.view.state = "CANCELLED";
      j.view.reason = c.reason;
    }
    return Status::ok();
  }

  // The next interval: jobs whose run time is over complete, preempted ones leave (their
  // usage is charged, as gpoold charges a run when it ends).
  void advance() {
    t_ += interval_;
    for (SimJob& j : jobs_) {
      if (j.view.state != "RUNNING") continue;
      const bool leaves = j.leave_at >= 0 && j.leave_at <= t_;
      const bool ends = j.end_at >= 0 && j.end_at <= t_;
      if (!leaves && !ends) continue;
      const int64_t stop = leaves ? j.leave_at : j.end_at;
      const double seconds = static_cast<double>(stop - j.started_at);
      const uint64_t gpus = sched::gpuDemand(j.job);
      j.used_gpu_s += static_cast<double>(gpus) / 1000.0 * seconds;
      ledger_.charge(j.spec.user, j.group, static_cast<uint32_t>(gpus), "", seconds, at(stop),
                     billing_);
      j.job.allocation.clear();
      j.job.preempt_deadline.reset();
      j.leave_at = j.end_at = -1;
      if (leaves) {
        j.job.state = sched::JobState::kPending;  // requeued
        j.view.state = "PENDING";
      } else {
        j.view.state = "COMPLETED";
      }
    }
  }

  SimJob& byId(sched::JobId id) { return jobs_[static_cast<size_t>(id) - 1]; }

  const Scenario& s_;
  sched::SchedulerConfig config_;
  int64_t interval_;
  sched::UsageLedger ledger_;
  sched::BillingWeights billing_;
  sched::ClusterState empty_;
  sched::BestFitPolicy policy_;
  sched::SchedulerPass pass_{policy_};
  SeededRandom random_{1};
  std::vector<SimJob> jobs_;  // by id - 1 (refused ones keep their slot)
  std::vector<std::string> order_;
  int64_t t_ = 0;
  static inline const TimePoint kOrigin = fromUnixSeconds(1'700'000'000);
};

}  // namespace

Result<std::vector<std::string>> replayScenario(const Scenario& s) {
  GPOOL_ASSIGN_OR_RETURN(sched::SchedulerConfig config, scenarioConfig(s));
  GPOOL_ASSIGN_OR_RETURN(int64_t interval, scenarioInterval(s));
  Replay replay(s, std::move(config), interval);
  return replay.run();
}

}  // namespace gpool::sim
