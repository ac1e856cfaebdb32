#include "controller/telemetry_history.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <tuple>
#include <utility>

namespace gpool::controller {

namespace {

constexpr int64_t kMinuteUs = 60'000'000;

int64_t minuteOf(TimePoint t) {
  int64_t us = toUnixMicros(t);
  return us >= 0 ? us / kMinuteUs : (us - kMinuteUs + 1) / kMinuteUs;
}

uint32_t secondsOf(TimePoint t) {
  return static_cast<uint32_t>(std::max<int64_t>(0, toUnixMicros(t) / 1'000'000));
}

}  // namespace

TelemetryHistory::TelemetryHistory(TelemetryHistoryOptions options) : options_(options) {}

TelemetryPoint TelemetryHistory::averageOf(const Accumulator& acc) {
  TelemetryPoint p;
  p.at_s = static_cast<uint32_t>(std::max<int64_t>(0, acc.minute * 60));
  double n = acc.samples == 0 ? 1.0 : static_cast<double>(acc.samples);
  p.utilization_pct = static_cast<float>(acc.util / n);
  p.memory_used_mib = static_cast<float>(acc.memory / n);
  p.temperature_c = static_cast<float>(acc.temperature / n);
  p.power_w = static_cast<float>(acc.power / n);
  p.samples = acc.samples;
  return p;
}

std::optional<TelemetryHistory::Accumulator> TelemetryHistory::closeMinute(Series& s,
                                                                           int64_t before_minute) {
  if (s.acc.samples == 0 || s.acc.minute >= before_minute) return std::nullopt;
  Accumulator done = s.acc;
  s.coarse.push(averageOf(done));
  s.acc = Accumulator{};
  return done;
}

std::optional<TelemetryHistory::Accumulator> TelemetryHistory::addPoint(
    Series& s, TimePoint at, const TelemetryPoint& value, std::optional<int64_t> job) {
  s.touched = ++updates_;
  // Fine ring: one point per second, the latest sample of that second wins. A sample older
  // than the newest point (a delayed frame) is not inserted out of order.
  if (s.fine.size() > 0 && s.fine.back().at_s >= value.at_s) {
    if (s.fine.back().at_s == value.at_s) s.fine.back() = value;
  } else {
    s.fine.push(value);
  }
  int64_t minute = minuteOf(at);
  std::optional<Accumulator> closed = closeMinute(s, minute);
  if (s.acc.samples > 0 && minute < s.acc.minute) return closed;  // late for a closed minute
  Accumulator& acc = s.acc;
  if (acc.samples == 0) {
    acc.minute = minute;
    acc.sole_job = job;
    acc.mixed = !job.has_value();
  } else if (acc.sole_job != job) {
    acc.mixed = true;
  }
  acc.util += value.utilization_pct;
  acc.memory += value.memory_used_mib;
  acc.temperature += value.temperature_c;
  acc.power += value.power_w;
  ++acc.samples;
  return closed;
}

void TelemetryHistory::queueFinished(const std::string& uuid, const Accumulator& done) {
  TelemetryPoint avg = averageOf(done);
  store::TelemetrySample row;
  row.gpu_uuid = uuid;
  if (!done.mixed && done.sole_job) row.job_id = done.sole_job;
  row.time = fromUnixSeconds(avg.at_s);
  row.util_percent = avg.utilization_pct;
  row.memory_used_mib = avg.memory_used_mib;
  row.temperature_c = avg.temperature_c;
  row.power_w = avg.power_w;
  size_t limit = std::max<size_t>(options_.max_gpus * 60, 1);
  if (finished_.size() >= limit) finished_.pop_front();
  finished_.push_back(std::move(row));
}

void TelemetryHistory::queueFinishedTask(const std::pair<int64_t, uint32_t>& key,
                                         const std::string& node, const Accumulator& done) {
  TelemetryPoint avg = averageOf(done);
  store::TaskTelemetrySample row;
  row.job_id = key.first;
  row.task = key.second;
  row.node = node;
  row.time = fromUnixSeconds(avg.at_s);
  row.util_percent = avg.utilization_pct;
  row.memory_used_mib = avg.memory_used_mib;
  row.temperature_c = avg.temperature_c;
  row.power_w = avg.power_w;
  size_t limit = std::max<size_t>(options_.max_tasks * 60, 1);
  if (finished_tasks_.size() >= limit) finished_tasks_.pop_front();
  finished_tasks_.push_back(std::move(row));
}

template <typename Map>
void TelemetryHistory::evictOldest(Map& map, size_t limit) {
  while (map.size() > limit) {
    auto oldest = map.begin();
    for (auto it = map.begin(); it != map.end(); ++it) {
      if (it->second.series.touched < oldest->second.series.touched) oldest = it;
    }
    map.erase(oldest);
  }
}

void TelemetryHistory::ingest(const std::string& node, TimePoint taken_at,
                              const std::vector<GpuReading>& gpus,
                              const std::map<std::string, std::vector<GpuTenant>>& tenants) {
  std::lock_guard lock(mu_);
  uint32_t at_s = secondsOf(taken_at);
  // Per task: the sums over its GPUs in this frame.
  struct TaskSum {
    double util = 0, memory = 0, power = 0;
    float temperature = -1e9f;
    uint32_t gpus = 0;
    std::vector<std::string> uuids;
  };
  std::map<std::pair<int64_t, uint32_t>, TaskSum> sums;
  for (const GpuReading& reading : gpus) {
    auto it = gpus_.find(reading.uuid);
    if (it == gpus_.end()) it = gpus_.emplace(reading.uuid, GpuState(options_)).first;
    GpuState& state = it->second;
    // Energy: the previous reading's power over the time since it, as DCGM's
    // TOTAL_ENERGY_CONSUMPTION counts (gaps over a minute, e.g. a lost node, count nothing).
    if (state.latest.taken_at != TimePoint{} && taken_at > state.latest.taken_at &&
        taken_at - state.latest.taken_at <= std::chrono::minutes(1)) {
      double seconds = std::chrono::duration<double>(taken_at - state.latest.taken_at).count();
      state.energy_mj += state.latest.power_w * seconds * 1000.0;
    }
    if (!reading.xid_errors.empty()) {
      state.last_xid = reading.xid_errors.back();
      state.last_xid_at = taken_at;
    }
    state.latest = reading;
    state.latest.node = node;
    state.latest.taken_at = taken_at;

    auto t = tenants.find(reading.uuid);
    const std::vector<GpuTenant> none;
    const std::vector<GpuTenant>& holders = t == tenants.end() ? none : t->second;
    std::set<int64_t> jobs;
    for (const GpuTenant& h : holders)
      jobs.insert(h.job_id);
    std::optional<int64_t> sole;
    if (jobs.size() == 1) sole = *jobs.begin();

    TelemetryPoint p;
    p.at_s = at_s;
    p.utilization_pct = static_cast<float>(reading.utilization_pct);
    p.memory_used_mib = static_cast<float>(reading.memory_used_mib);
    p.temperature_c = static_cast<float>(reading.temperature_c);
    p.power_w = static_cast<float>(reading.power_w);
    p.samples = 1;
    if (std::optional<Accumulator> done = addPoint(state.series, taken_at, p, sole))
      queueFinished(reading.uuid, *done);

    state.tenants = holders;
    state.tenant_memory_mib.assign(holders.size(), 0.0);
    for (size_t hi = 0; hi < holders.size(); ++hi) {
      const GpuTenant& h = holders[hi];
      bool whole = h.exclusive || holders.size() == 1;
      TaskSum& sum = sums[{h.job_id, h.task}];
      sum.util += reading.utilization_pct;
      sum.temperature = std::max(sum.temperature, static_cast<float>(reading.temperature_c));
      ++sum.gpus;
      sum.uuids.push_back(reading.uuid);
      if (whole) {
        sum.memory += static_cast<double>(reading.memory_used_mib);
        state.tenant_memory_mib[hi] = static_cast<double>(reading.memory_used_mib);
        sum.power += reading.power_w;
        continue;
      }
      for (const GpuProcessUse& proc : reading.processes) {
        bool mine = proc.job_id ? (*proc.job_id == h.job_id && proc.task.value_or(h.task) == h.task)
                                : (h.pid > 0 && proc.pid == h.pid);
        if (mine) {
          sum.memory += static_cast<double>(proc.used_mib);
          state.tenant_memory_mib[hi] += static_cast<double>(proc.used_mib);
        }
      }
      sum.power += reading.power_w * std::min<uint32_t>(h.compute_milli, 1000) / 1000.0;
    }
  }
  for (auto& [key, sum] : sums) {
    auto it = tasks_.find(key);
    if (it == tasks_.end()) it = tasks_.emplace(key, TaskState(options_)).first;
    TaskState& task = it->second;
    task.node = node;
    for (const std::string& uuid : sum.uuids) {
      if (std::find(task.gpus.begin(), task.gpus.end(), uuid) == task.gpus.end())
        task.gpus.push_back(uuid);
    }
    TelemetryPoint p;
    p.at_s = at_s;
    p.utilization_pct = static_cast<float>(sum.util / sum.gpus);
    p.memory_used_mib = static_cast<float>(sum.memory);
    p.temperature_c = sum.temperature;
    p.power_w = static_cast<float>(sum.power);
    p.samples = 1;
    if (std::optional<Accumulator> done = addPoint(task.series, taken_at, p, key.first))
      queueFinishedTask(key, task.node, *done);
  }
  evictOldest(gpus_, options_.max_gpus);
  evictOldest(tasks_, options_.max_tasks);
}

std::optional<GpuReading> TelemetryHistory::latest(const std::string& uuid) const {
  std::lock_guard lock(mu_);
  auto it = gpus_.find(uuid);
  if (it == gpus_.end()) return std::nullopt;
  return it->second.latest;
}

std::map<std::string, GpuReading> TelemetryHistory::latestAll() const {
  std::lock_guard lock(mu_);
  std::map<std::string, GpuReading> out;
  for (const auto& [uuid, state] : gpus_)
    out.emplace(uuid, state.latest);
  return out;
}

std::vector<GpuSnapshot> TelemetryHistory::snapshot() const {
  std::vector<GpuSnapshot> out;
  {
    std::lock_guard lock(mu_);
    out.reserve(gpus_.size());
    for (const auto& [uuid, state] : gpus_) {
      GpuSnapshot s;
      s.reading = state.latest;
      s.tenants = state.tenants;
      s.tenant_memory_mib = state.tenant_memory_mib;
      s.last_xid = state.last_xid;
      s.last_xid_at = state.last_xid_at;
      s.energy_mj = state.energy_mj;
      out.push_back(std::move(s));
    }
  }
  std::sort(out.begin(), out.end(), [](const GpuSnapshot& a, const GpuSnapshot& b) {
    return std::tie(a.reading.node, a.reading.index) < std::tie(b.reading.node, b.reading.index);
  });
  return out;
}

std::vector<TelemetryPoint> TelemetryHistory::pointsOf(const Series& s,
                                                       HistoryResolution resolution,
                                                       TimePoint since) const {
  std::vector<TelemetryPoint> out;
  int64_t from_s = toUnixMicros(since) / 1'000'000;
  if (resolution == HistoryResolution::kSecond) {
    // Only the last fine_span, measured from the newest point.
    int64_t newest = s.fine.size() > 0 ? s.fine.back().at_s : 0;
    int64_t span_s = options_.fine_span.count() / 1'000'000;
    from_s = std::max(from_s, newest - span_s);
    s.fine.forEach([&](const TelemetryPoint& p) {
      if (p.at_s >= from_s) out.push_back(p);
    });
  } else {
    s.coarse.forEach([&](const TelemetryPoint& p) {
      if (p.at_s >= from_s) out.push_back(p);
    });
  }
  return out;
}

std::vector<TelemetryPoint> TelemetryHistory::gpuHistory(const std::string& uuid,
                                                         HistoryResolution resolution,
                                                         TimePoint since) const {
  std::lock_guard lock(mu_);
  auto it = gpus_.find(uuid);
  if (it == gpus_.end()) return {};
  return pointsOf(it->second.series, resolution, since);
}

std::vector<TaskHistory> TelemetryHistory::jobHistory(int64_t job_id, HistoryResolution resolution,
                                                      TimePoint since) const {
  std::lock_guard lock(mu_);
  std::vector<TaskHistory> out;
  for (auto it = tasks_.lower_bound({job_id, 0}); it != tasks_.end() && it->first.first == job_id;
       ++it) {
    TaskHistory h;
    h.task = it->first.second;
    h.node = it->second.node;
    h.gpus = it->second.gpus;
    h.points = pointsOf(it->second.series, resolution, since);
    out.push_back(std::move(h));
  }
  return out;
}

FinishedMinutes TelemetryHistory::takeFinishedMinutes(TimePoint now) {
  std::lock_guard lock(mu_);
  int64_t minute = minuteOf(now);
  for (auto& [uuid, state] : gpus_) {
    if (std::optional<Accumulator> done = closeMinute(state.series, minute))
      queueFinished(uuid, *done);
  }
  for (auto& [key, task] : tasks_) {
    if (std::optional<Accumulator> done = closeMinute(task.series, minute))
      queueFinishedTask(key, task.node, *done);
  }
  FinishedMinutes out;
  out.gpus.assign(std::make_move_iterator(finished_.begin()),
                  std::make_move_iterator(finished_.end()));
  out.tasks.assign(std::make_move_iterator(finished_tasks_.begin()),
                   std::make_move_iterator(finished_tasks_.end()));
  finished_.clear();
  finished_tasks_.clear();
  return out;
}

size_t TelemetryHistory::gpuSeries() const {
  std::lock_guard lock(mu_);
  return gpus_.size();
}

size_t TelemetryHistory::taskSeries() const {
  std::lock_guard lock(mu_);
  return tasks_.size();
}

std::map<int64_t, bool> jobsIdle(const std::vector<GpuSnapshot>& snapshots, TimePoint fresh_since,
                                 double threshold_pct) {
  std::map<int64_t, bool> idle;
  for (const GpuSnapshot& s : snapshots) {
    const bool quiet =
        s.reading.taken_at >= fresh_since && s.reading.utilization_pct <= threshold_pct;
    for (const GpuTenant& t : s.tenants) {
      auto [it, added] = idle.emplace(t.job_id, quiet);
      if (!added) it->second = it->second && quiet;
    }
  }
  return idle;
}

}  // namespace gpool::controller
