#pragma once

// A tiny reader for the hand-checked queue scenarios in tests/sched/scenarios/queue_*.txt. One
// directive per line, `#` starts a comment; times are seconds after a fixed origin; GPU amounts
// use units.h forms ("2" whole GPUs, "0.5" a slice); durations use parseDuration forms ("30s",
// "1h"). The directives:
//
//   node <name> <gpus> [mem=MiB] [model=M]
//   config <key> <value>             see applyConfig() in queue_scenario.cc for the keys
//   qos <name> [priority=N] [max_per_user=G] [grace=D] [preemptible] [no_preempt]
//   group <name> [quota=G] [weight=W] [max=G] [max_per_user=G] [max_compute=G] [shares=S]
//   user <name> [max=G] [max_compute=G]
//   usage <user> <group> <billed GPU-seconds>
//   now <t>
//   user <name> [max=G] [max_compute=G] [gpu_hours=USED/LIMIT]
//   group <name> ... [gpu_hours=USED/LIMIT]
//   job <id> <user> <group> <gpus> [submit=t] [limit=D] [qos=Q] [nice=N] [preemptible]
//       [after=ID] [afternotok=ID] [afterany=ID] [array=ID%N] [tasks=N] [nodes=N] [model=M]
//       [duration=D] [attained=GPU-s] [victims=ID,ID] [held] [admin_held]
//   run <id> <user> <group> <gpus> on=<node> start=<t> [limit=D] [qos=Q] [preemptible]
//       [idle_since=t] [warned] [preempting=t]
//   ended <id> <succeeded|failed>    a job no longer queued (dependencies on it)
//   unhealthy <node> <gpu> [reason]  marks a GPU unhealthy
//   expect start <id> [on=<node>]    the started jobs are exactly those listed
//   expect preempt <id> [for=<id>]   the preempted jobs are exactly those listed
//   expect pending <id> <Reason>
//   expect cancel <id>
//   expect reservation <id> at=<t>
//   expect idle <id> <flag|warn|preempt>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "sched/cluster.h"
#include "sched/job.h"
#include "sched/scheduler.h"
#include "sched/usage.h"

namespace gpool::sched::testing {

inline const TimePoint kOrigin = fromUnixSeconds(1'700'000'000);

struct Expectation {
  std::string kind;  // start, preempt, pending, reservation, idle
  JobId job = 0;
  std::string arg;     // node, Reason, idle action
  int64_t value = -1;  // for=, at=
  int line = 0;
};

struct Scenario {
  ClusterState cluster;
  std::vector<Job> jobs;
  SchedulerConfig config;
  UsageLedger usage{0};
  TimePoint now = kOrigin;
  std::vector<Expectation> expectations;
};

Result<Scenario> parseScenario(const std::string& text);
Result<Scenario> loadScenario(const std::string& path);

// Checks `d` against the scenario's expectations; returns one line per mismatch.
std::vector<std::string> checkExpectations(const Scenario& s, const Decisions& d);

}  // namespace gpool::sched::testing
