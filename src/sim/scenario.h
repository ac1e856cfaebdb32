#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "sched/scheduler.h"

// Policy scenarios: a small pool, its policy, its users and groups, and a timeline of
// submissions and waits, written once and replayed two ways that must decide alike:
// `gpool sim scenario FILE` runs it through the scheduler library with a virtual clock, and
// tests/controller/policy_e2e_test.cc drives the real gpoold and agents through the same file.
// Both write the same trace (a line per wait: job states, starts, preemptions), so a test can
// compare them line by line. The format is in docs/scheduler-policy.md ("Scenarios"); the
// files the docs cite are in data/scenarios/.
namespace gpool::sim {

struct ScenarioServer {
  std::string name;
  uint32_t gpus = 8;
  std::string model = "A100-SXM4-80GB";
  uint64_t gpu_memory_mib = 80 * 1024;
  uint64_t cpu_millis = 64'000;
  uint64_t ram_mib = 512 * 1024;
  // The fake GPU fixture the real agent runs with (src/gpu/fixtures/<fixture>.json); it must
  // describe `gpus` GPUs of `model`.
  std::string fixture = "8x-a100-sxm4-80gb-nvlink";
};

struct ScenarioQos {
  std::string name;
  uint32_t priority = 0;
  bool preemptible = false;
  std::optional<int64_t> grace_s;
  std::optional<uint64_t> max_gpus_per_user_milli;
};

struct ScenarioGroup {
  std::string name;
  uint64_t guaranteed_milli = 0;
  std::optional<uint64_t> max_gpus_milli;
  std::optional<double> gpu_hours;
};

struct ScenarioUser {
  std::string name;
  std::vector<std::string> groups;  // the first is the default
  std::optional<uint64_t> max_gpus_milli;
};

struct ScenarioJob {
  std::string name;
  std::string user;
  std::string group;  // as asked (--group); empty: the user's default
  std::string qos;    // empty: the pool's default
  uint32_t gpus_milli = 1000;
  uint32_t tasks = 1;
  bool preemptible = false;
  int64_t run_s = 0;  // how long it runs; 0: until the scheduler stops it
  // When preempted, how long it takes after SIGTERM to checkpoint and exit; unset: it does
  // not, and is killed when its grace period ends.
  std::optional<int64_t> leaves_s;
};

struct ScenarioStep {
  enum class Kind { kSubmit, kWait, kExpect };
  Kind kind = Kind::kSubmit;
  int line = 0;
  ScenarioJob job;  // kSubmit
  // kWait: every named job is in `state` (RUNNING, PENDING, ENDED) within `within_s`.
  std::string state;
  std::vector<std::string> names;
  int64_t within_s = 60;
  // kExpect: "state", "starts", "reason" with NAME=VALUE words, or "preempted" with
  // "VICTIM... for PREEMPTOR..." (or "none"), compared as traceLine writes them.
  std::string what;
  std::vector<std::string> args;
};

struct Scenario {
  std::string source;  // the file, for messages
  std::vector<ScenarioServer> servers;
  // gpoold.toml [scheduler] keys and schedule_interval, as written ("2s").
  std::map<std::string, std::string> settings;
  std::vector<ScenarioQos> qos;
  std::vector<ScenarioGroup> groups;
  std::vector<ScenarioUser> users;
  std::vector<ScenarioStep> steps;
};

Result<Scenario> parseScenario(const std::string& text, const std::string& source);
Result<Scenario> loadScenario(const std::string& path);

// The scheduler policy a scenario's `set` lines and QoS levels, groups and users give, on top
// of the defaults gpoold runs with. InvalidArgument for an unknown key or a bad value.
Result<sched::SchedulerConfig> scenarioConfig(const Scenario& s);
// The pass interval (`set schedule_interval`, default 1 s).
Result<int64_t> scenarioInterval(const Scenario& s);

// What the decisions came to, as both replays see it at a wait.
struct JobView {
  std::string state;   // PENDING, RUNNING, COMPLETED, ... ; "REFUSED" when not accepted
  std::string reason;  // pending reason
  uint32_t starts = 0;
  // Preemptors, by name, in order, one per preemption of this job.
  std::vector<std::string> preempted_for;
};

// The trace line of a wait: "RUNNING a b; PENDING c; starts a=1 b=1 c=1; preempted c for a",
// jobs by name in submission order (ENDED for every finished state; reasons left out, as two
// replays may reach the same decision through different passes). Preemptions are the jobs
// evicted and the jobs they were evicted for, each sorted: which victim went to which of two
// equal preemptors may depend on start times a few milliseconds apart.
std::string traceLine(const std::vector<std::string>& names,
                      const std::map<std::string, JobView>& jobs);

// Checks a kExpect step against the view; empty when it holds, else what differs.
std::string checkExpectation(const ScenarioStep& step, const std::map<std::string, JobView>& jobs);

// Whether a kWait step's condition holds.
bool waitHolds(const ScenarioStep& step, const std::map<std::string, JobView>& jobs);

// Replays the scenario through the scheduler library (SchedulerPass, BestFit placement as
// gpoold) on a virtual clock: a pass every interval; a job ends `run_s` after it starts, a
// preempted one `grace` after the decision (then it is requeued). Returns one trace line per
// wait, in order. Errors: a wait that does not hold within its time, an expectation that does
// not hold (both naming the line), or a bad scenario.
Result<std::vector<std::string>> replayScenario(const Scenario& s);

}  // namespace gpool::sim
