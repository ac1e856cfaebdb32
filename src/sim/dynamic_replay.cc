#include "sim/dynamic_replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <unordered_map>

#include "common/random.h"
#include "sched/fragmentation.h"
#include "sched/job.h"
#include "sched/policies.h"
#include "sched/usage.h"

namespace gpool::sim {

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return sorted[std::min(i, sorted.size() - 1)];
}

double jainIndex(const std::vector<double>& x) {
  if (x.empty()) return 0;
  double sum = 0, sq = 0;
  for (double v : x) {
    sum += v;
    sq += v * v;
  }
  return sq > 0 ? sum * sum / (static_cast<double>(x.size()) * sq) : 0;
}

sched::SchedulerConfig replayConfig(sched::QueueOrder order) {
  sched::SchedulerConfig c;
  c.order = order;
  c.backfill.enabled = true;
  c.backfill.max_reservations = 1;
  switch (order) {
    case sched::QueueOrder::kFifo:
    case sched::QueueOrder::kShortestJobFirst: c.preemption.enabled = false; break;
    case sched::QueueOrder::kLeastAttainedService:
      // Tiresias: a job of a higher queue preempts running jobs of lower queues; checkpoints
      // are assumed (progress is kept), so no grace period is needed.
      c.preemption.enabled = true;
      c.preemption.reclaim = false;
      c.preemption.min_run_time_s = 300;
      c.preemption.delay_s = 0;
      c.preemption.grace_s = 0;
      c.las_thresholds_gpu_s = {3200.0};
      break;
    case sched::QueueOrder::kMultifactor:
      // gpool: no job is preemptible by priority; groups below their fair share reclaim
      // capacity from groups above it, after the protections below.
      c.preemption.enabled = true;
      c.preemption.reclaim = true;
      c.preemption.min_run_time_s = 600;
      c.preemption.delay_s = 300;
      c.preemption.grace_s = 60;
      break;
  }
  return c;
}

namespace {

enum class Phase : uint8_t { kFuture, kPending, kRunning, kDone, kSkipped };

struct Track {
  Phase phase = Phase::kFuture;
  int64_t remaining_s = 0;
  int64_t run_start = 0;
  int64_t first_start = -1;
  int64_t finish = -1;
  double attained = 0;
  uint32_t epoch = 0;
  size_t active_pos = 0;
  bool leaving = false;
  uint32_t preemptions = 0;
};

struct Event {
  int64_t t;
  size_t job;  // index into the trace
  uint32_t epoch;
  bool leave;  // end of a preemption grace period (else: completion)
  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (leave != o.leave) return leave;  // completions first
    return job > o.job;
  }
};

std::shared_ptr<const sched::FragmentationModel> modelFor(const std::vector<DynJob>& jobs,
                                                          bool exclusive) {
  std::map<std::tuple<uint64_t, uint32_t, uint32_t>, double> counts;
  for (const DynJob& j : jobs) {
    uint32_t milli = exclusive ? 1000 : j.gpu_milli;
    counts[{j.cpu_millis, j.num_gpus, milli}] += 1;
  }
  std::vector<sched::TaskShape> shapes;
  for (const auto& [k, w] : counts) {
    sched::TaskShape s;
    s.cpu_millis = std::get<0>(k);
    s.gpu_count = std::get<1>(k);
    s.gpu_milli = std::get<2>(k);
    s.weight = w;
    shapes.push_back(s);
  }
  return std::make_shared<const sched::FragmentationModel>(sched::typicalShapes(std::move(shapes)));
}

}  // namespace

Result<DynamicResult> runDynamic(const std::vector<DynJob>& jobs,
                                 const sched::ClusterState& initial, const DynamicOptions& opt,
                                 const std::string& workload_name) {
  auto wall_start = std::chrono::steady_clock::now();
  GPOOL_ASSIGN_OR_RETURN(std::unique_ptr<sched::PlacementPolicy> policy,
                         sched::makePolicy(opt.placement, modelFor(jobs, opt.exclusive)));
  sched::SchedulerConfig config = replayConfig(opt.order);
  sched::SchedulerPass pass(*policy);
  sched::UsageLedger usage(opt.half_life_s);
  sched::BillingWeights billing;
  SeededRandom random(opt.seed);
  sched::ClusterState cluster = initial;

  DynamicResult res;
  res.workload = workload_name;
  res.policy = std::string(sched::queueOrderName(opt.order));
  res.mode = opt.exclusive ? "exclusive" : "sliced";
  res.placement = std::string(policy->name());
  res.jobs = jobs.size();

  const double capacity = static_cast<double>(cluster.gpuCount()) * 1000.0;
  uint32_t max_gpus_per_node = 0;
  for (const sched::Node& n : cluster.nodes()) {
    max_gpus_per_node = std::max<uint32_t>(max_gpus_per_node, static_cast<uint32_t>(n.gpus.size()));
  }
  const TimePoint origin = fromUnixSeconds(1'500'000'000);
  auto at = [&](int64_t s) { return origin + std::chrono::seconds(s); };

  std::vector<Track> track(jobs.size());
  std::unordered_map<uint64_t, size_t> by_id;
  by_id.reserve(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i)
    by_id[jobs[i].id] = i;
  std::vector<sched::Job> active;
  std::vector<size_t> active_src;

  auto makeJob = [&](size_t i) {
    const DynJob& d = jobs[i];
    sched::Job j;
    j.id = d.id;
    j.user = d.user;
    j.group = d.group;
    j.submit_time = at(d.submit_s);
    j.time_limit_s =
        std::max<int64_t>(1, static_cast<int64_t>(std::ceil(d.duration_s * opt.limit_factor)));
    j.expected_duration_s = d.duration_s;
    j.preemptible = opt.order == sched::QueueOrder::kLeastAttainedService;
    uint32_t milli = opt.exclusive ? 1000 : d.gpu_milli;
    sched::PlacementRequest& r = j.request;
    r.job = "job " + std::to_string(d.id);
    r.task.cpu_millis = d.cpu_millis;
    r.task.ram_mib = d.ram_mib;
    if (milli < 1000) {
      r.task.gpus = milli;
      r.tasks = 1;
    } else if (d.num_gpus <= max_gpus_per_node) {
      r.task.gpus = d.num_gpus * 1000;
      r.tasks = 1;
    } else if (max_gpus_per_node > 0 && d.num_gpus % max_gpus_per_node == 0) {
      r.task.gpus = max_gpus_per_node * 1000;
      r.tasks = d.num_gpus / max_gpus_per_node;
      r.scope = sched::GangScope::kMultiServer;
    } else {
      r.task.gpus = 1000;
      r.tasks = d.num_gpus;
      r.scope = sched::GangScope::kMultiServer;
    }
    return j;
  };
  auto allocatedCompute = [&](const sched::Job& j) { return sched::computeDemand(j); };
  auto usedCompute = [&](size_t i) { return static_cast<double>(jobs[i].computeMilli()); };

  auto removeActive = [&](size_t i) {
    size_t pos = track[i].active_pos;
    size_t last = active.size() - 1;
    if (pos != last) {
      active[pos] = std::move(active[last]);
      active_src[pos] = active_src[last];
      track[active_src[pos]].active_pos = pos;
    }
    active.pop_back();
    active_src.pop_back();
  };

  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  size_t next_arrival = 0;
  size_t pending = 0, running = 0;
  double alloc_now = 0, used_now = 0;  // compute thousandths
  double alloc_integral = 0, used_integral = 0;
  const int64_t window_end = jobs.empty() ? 0 : std::max<int64_t>(1, jobs.back().submit_s);
  std::vector<TimelinePoint> series;
  int64_t t = jobs.empty() ? 0 : jobs.front().submit_s;
  int64_t last_pass = std::numeric_limits<int64_t>::min() / 2;
  bool dirty = false;
  const bool periodic = config.preemption.enabled;
  double pass_ms_total = 0;

  auto finishJob = [&](size_t i, int64_t now) {
    Track& tr = track[i];
    sched::Job& j = active[tr.active_pos];
    for (const auto& a : j.allocation)
      (void)cluster.release(a);
    alloc_now -= static_cast<double>(allocatedCompute(j));
    used_now -= usedCompute(i);
    --running;
    tr.phase = Phase::kDone;
    tr.finish = now;
    removeActive(i);
  };
  auto requeue = [&](size_t i, int64_t now) {
    Track& tr = track[i];
    sched::Job& j = active[tr.active_pos];
    for (const auto& a : j.allocation)
      (void)cluster.release(a);
    alloc_now -= static_cast<double>(allocatedCompute(j));
    used_now -= usedCompute(i);
    --running;
    ++pending;
    int64_t ran = now - tr.run_start;
    tr.remaining_s = std::max<int64_t>(1, tr.remaining_s - ran);
    tr.attained += static_cast<double>(allocatedCompute(j)) / 1000.0 * static_cast<double>(ran);
    tr.phase = Phase::kPending;
    tr.leaving = false;
    ++tr.epoch;
    j.state = sched::JobState::kPending;
    j.allocation.clear();
    j.preempt_deadline.reset();
    j.attained_gpu_seconds = tr.attained;
  };

  auto advance = [&](int64_t to) {
    int64_t dt = to - t;
    if (dt <= 0) return;
    int64_t w0 = std::min(t, window_end), w1 = std::min(to, window_end);
    if (w1 > w0) {
      alloc_integral += alloc_now * static_cast<double>(w1 - w0);
      used_integral += used_now * static_cast<double>(w1 - w0);
    }
    if (opt.order == sched::QueueOrder::kMultifactor) {
      for (size_t p = 0; p < active.size(); ++p) {
        const sched::Job& j = active[p];
        if (j.state != sched::JobState::kRunning) continue;
        usage.charge(j.user, j.group, static_cast<uint32_t>(allocatedCompute(j)), "",
                     static_cast<double>(dt), at(to), billing);
      }
    }
    t = to;
  };

  auto runPass = [&]() -> bool {
    if (opt.order == sched::QueueOrder::kLeastAttainedService) {
      for (size_t p = 0; p < active.size(); ++p) {
        sched::Job& j = active[p];
        const Track& tr = track[active_src[p]];
        j.attained_gpu_seconds = tr.attained;
        if (j.state == sched::JobState::kRunning) {
          j.attained_gpu_seconds += static_cast<double>(allocatedCompute(j)) / 1000.0 *
                                    static_cast<double>(t - tr.run_start);
        }
      }
    }
    auto p0 = std::chrono::steady_clock::now();
    sched::Decisions d = pass.run(cluster, active, usage, config, at(t), random);
    pass_ms_total +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p0).count();
    ++res.passes;
    bool progress = !d.starts.empty() || !d.preemptions.empty();
    for (const sched::StartDecision& s : d.starts) {
      size_t i = by_id.at(s.job);
      Track& tr = track[i];
      sched::Job& j = active[tr.active_pos];
      for (const auto& a : s.allocation) {
        // The pass placed on this very state (and told the policy), so this cannot fail.
        if (!cluster.apply(a).isOk()) return false;
      }
      j.state = sched::JobState::kRunning;
      j.allocation = s.allocation;
      j.start_time = at(t);
      j.victims.clear();  // its claim on what they freed is used
      tr.phase = Phase::kRunning;
      tr.run_start = t;
      if (tr.first_start < 0) tr.first_start = t;
      alloc_now += static_cast<double>(allocatedCompute(j));
      used_now += usedCompute(i);
      --pending;
      ++running;
      events.push({t + tr.remaining_s, i, tr.epoch, false});
    }
    for (const sched::PreemptDecision& p : d.preemptions) {
      size_t i = by_id.at(p.job);
      Track& tr = track[i];
      if (tr.phase != Phase::kRunning || tr.leaving) continue;
      tr.leaving = true;
      ++tr.preemptions;
      ++res.preemptions;
      active[tr.active_pos].preempt_deadline = at(t + p.grace_s);
      // The preemptor owns what its victims free until it starts (sched::Job::victims).
      if (p.for_job != 0) {
        auto f = by_id.find(p.for_job);
        if (f != by_id.end() && track[f->second].phase == Phase::kPending) {
          active[track[f->second].active_pos].victims.push_back(p.job);
        }
      }
      events.push({t + p.grace_s, i, tr.epoch, true});
    }
    for (const sched::PendingDecision& p : d.pending) {
      if (p.reason != sched::QueueReason::kBadConstraints) continue;
      size_t i = by_id.at(p.job);
      track[i].phase = Phase::kSkipped;
      --pending;
      ++res.skipped;
      removeActive(i);
    }
    series.push_back(
        {t, alloc_now / capacity * 100.0, used_now / capacity * 100.0, pending, running});
    return progress;
  };

  const int64_t kInf = std::numeric_limits<int64_t>::max();
  constexpr int64_t kPeriodicEvery = 5;
  size_t reported = 0;
  while (true) {
    int64_t next_arrival_t = next_arrival < jobs.size() ? jobs[next_arrival].submit_s : kInf;
    int64_t next_event_t = events.empty() ? kInf : events.top().t;
    // Without news, passes that may only preempt run every kPeriodicEvery intervals.
    int64_t gap = dirty ? opt.interval_s : opt.interval_s * kPeriodicEvery;
    bool want_pass = dirty || (periodic && pending > 0 && running > 0);
    int64_t next_pass_t = want_pass ? std::max(t, last_pass + gap) : kInf;
    int64_t tn = std::min({next_arrival_t, next_event_t, next_pass_t});
    if (tn == kInf) break;
    advance(tn);
    while (next_arrival < jobs.size() && jobs[next_arrival].submit_s <= t) {
      size_t i = next_arrival++;
      const DynJob& d = jobs[i];
      Track& tr = track[i];
      tr.remaining_s = d.duration_s;
      if (d.num_gpus > cluster.gpuCount()) {
        tr.phase = Phase::kSkipped;
        ++res.skipped;
        continue;
      }
      tr.phase = Phase::kPending;
      tr.active_pos = active.size();
      active.push_back(makeJob(i));
      active_src.push_back(i);
      ++pending;
      dirty = true;
    }
    while (!events.empty() && events.top().t <= t) {
      Event e = events.top();
      events.pop();
      Track& tr = track[e.job];
      if (e.epoch != tr.epoch || tr.phase != Phase::kRunning) continue;
      if (e.leave) {
        requeue(e.job, t);
      } else {
        finishJob(e.job, t);
      }
      dirty = true;
    }
    if ((dirty && t >= last_pass + opt.interval_s) ||
        (periodic && pending > 0 && running > 0 &&
         t >= last_pass + opt.interval_s * kPeriodicEvery)) {
      bool progress = runPass();
      last_pass = t;
      dirty = false;
      if (!progress && running == 0 && events.empty() && next_arrival == jobs.size() &&
          pending > 0) {
        break;  // nothing runs and nothing ever will: the rest never fits
      }
    }
    if (opt.progress && jobs.size() > 0 && next_arrival * 100 / jobs.size() != reported) {
      reported = next_arrival * 100 / jobs.size();
      opt.progress(static_cast<double>(next_arrival) / static_cast<double>(jobs.size()));
    }
  }
  res.makespan_s = jobs.empty() ? 0 : t - jobs.front().submit_s;

  std::vector<double> queue_delays;
  std::map<std::string, std::pair<double, size_t>> per_group;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Track& tr = track[i];
    if (tr.phase == Phase::kPending) ++res.unfinished;
    if (tr.phase != Phase::kDone) continue;
    double jct = static_cast<double>(tr.finish - jobs[i].submit_s);
    double dur = static_cast<double>(jobs[i].duration_s);
    res.jcts.push_back(jct);
    queue_delays.push_back(std::max(0.0, jct - dur));
    auto& g = per_group[jobs[i].group];
    g.first += jct > 0 ? dur / jct : 1.0;
    g.second += 1;
  }
  res.finished = res.jcts.size();
  std::sort(res.jcts.begin(), res.jcts.end());
  std::sort(queue_delays.begin(), queue_delays.end());
  auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v)
      s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
  };
  res.jct_avg_s = mean(res.jcts);
  res.jct_p50_s = percentile(res.jcts, 50);
  res.jct_p99_s = percentile(res.jcts, 99);
  res.queue_avg_s = mean(queue_delays);
  res.queue_p50_s = percentile(queue_delays, 50);
  res.queue_p95_s = percentile(queue_delays, 95);
  res.queue_p99_s = percentile(queue_delays, 99);
  std::vector<double> xs;
  for (const auto& [g, v] : per_group)
    xs.push_back(v.first / static_cast<double>(v.second));
  res.jain = jainIndex(xs);
  res.groups = xs.size();
  double window = static_cast<double>(window_end - (jobs.empty() ? 0 : jobs.front().submit_s));
  if (window > 0 && capacity > 0) {
    res.alloc_pct = alloc_integral / (capacity * window) * 100.0;
    res.used_pct = used_integral / (capacity * window) * 100.0;
  }
  res.pass_ms_avg = res.passes ? pass_ms_total / static_cast<double>(res.passes) : 0;
  // Keep at most timeline_points evenly spaced samples.
  if (opt.timeline_points > 0 && series.size() > opt.timeline_points) {
    std::vector<TimelinePoint> thin;
    for (size_t k = 0; k < opt.timeline_points; ++k) {
      thin.push_back(series[k * (series.size() - 1) / (opt.timeline_points - 1)]);
    }
    series = std::move(thin);
  }
  res.timeline = std::move(series);
  res.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return res;
}

}  // namespace gpool::sim
