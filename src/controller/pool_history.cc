#include "controller/pool_history.h"

#include <algorithm>
#include <utility>

namespace gpool::controller {

namespace {

constexpr int64_t kMinute = 60;
constexpr int64_t kHour = 3600;

int64_t unixSeconds(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

bool anyUse(const PoolUse& u) {
  return u.gpus_allocated > 0 || u.gpus_used > 0 || u.memory_allocated_mib > 0 ||
         u.memory_used_mib > 0;
}

}  // namespace

PoolSample poolSampleOf(const std::vector<GpuSnapshot>& gpus, TimePoint now, Micros stale_after) {
  PoolSample s;
  for (const GpuSnapshot& g : gpus) {
    const GpuReading& r = g.reading;
    if (now - r.taken_at > stale_after) continue;
    const float total = static_cast<float>(r.memory_total_mib);
    const float util = static_cast<float>(r.utilization_pct) / 100.0f;
    float held = 0;
    float held_memory = 0;
    for (size_t i = 0; i < g.tenants.size(); ++i) {
      const GpuTenant& t = g.tenants[i];
      const float share =
          t.exclusive ? 1.0f : static_cast<float>(std::min<uint32_t>(t.compute_milli, 1000)) / 1000;
      const float memory =
          t.exclusive || t.memory_mib == 0 ? total : static_cast<float>(t.memory_mib);
      const float used = i < g.tenant_memory_mib.size()
                             ? static_cast<float>(g.tenant_memory_mib[i])
                             : (g.tenants.size() == 1 ? static_cast<float>(r.memory_used_mib) : 0);
      held += share;
      held_memory += memory;
      // NVML does not split a shared GPU's utilisation by process: each tenant is counted with
      // the GPU's utilisation times its share (as gpool_user_gpus_used).
      for (PoolUse* u : {&s.users[t.user], &s.groups[t.group]}) {
        u->gpus_allocated += share;
        u->gpus_used += util * share;
        u->memory_allocated_mib += std::min(memory, total);
        u->memory_used_mib += used;
      }
    }
    s.pool.gpus += 1;
    s.pool.gpus_allocated += std::min(held, 1.0f);
    s.pool.gpus_used += util;
    s.pool.memory_mib += total;
    s.pool.memory_allocated_mib += std::min(held_memory, total);
    s.pool.memory_used_mib += static_cast<float>(r.memory_used_mib);
    s.simulated = s.simulated || r.simulated;
  }
  return s;
}

PoolHistory::PoolHistory(const TelemetryHistory& telemetry, Clock& clock,
                         PoolHistoryOptions options)
    : telemetry_(telemetry),
      clock_(clock),
      options_(options),
      pool_(options.minute_capacity, options.hour_capacity) {}

PoolHistory::~PoolHistory() {
  stop();
}

void PoolHistory::start() {
  std::lock_guard lock(thread_mu_);
  if (thread_.joinable()) return;
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

void PoolHistory::stop() {
  std::jthread done;
  {
    std::lock_guard lock(thread_mu_);
    done = std::move(thread_);
  }
  if (done.joinable()) {
    done.request_stop();
    wake_.notify_all();
  }
}

void PoolHistory::run(std::stop_token stop) {
  std::unique_lock lock(thread_mu_);
  while (!stop.stop_requested()) {
    lock.unlock();
    sample();
    lock.lock();
    wake_.wait_for(lock, stop, options_.sample_every, [] { return false; });
  }
}

void PoolHistory::sample() {
  TimePoint now = clock_.now();
  add(now, poolSampleOf(telemetry_.snapshot(), now, options_.stale_after));
}

void PoolHistory::addTo(Series& s, TimePoint at, const PoolUse& use) {
  auto close = [](Accumulator& acc, int64_t bucket_s) {
    PoolPoint p;
    p.at_s = static_cast<uint32_t>(acc.bucket * bucket_s);
    p.samples = acc.samples;
    const double n = acc.samples;
    p.use = PoolUse{static_cast<float>(acc.sum[0] / n), static_cast<float>(acc.sum[1] / n),
                    static_cast<float>(acc.sum[2] / n), static_cast<float>(acc.sum[3] / n),
                    static_cast<float>(acc.sum[4] / n), static_cast<float>(acc.sum[5] / n)};
    acc = Accumulator{};
    return p;
  };
  auto put = [](Accumulator& acc, const PoolUse& u, uint32_t weight) {
    const float v[6] = {u.gpus,       u.gpus_allocated,       u.gpus_used,
                        u.memory_mib, u.memory_allocated_mib, u.memory_used_mib};
    for (int i = 0; i < 6; ++i)
      acc.sum[i] += double(v[i]) * weight;
    acc.samples += weight;
  };
  const int64_t secs = unixSeconds(at);
  const int64_t minute = secs / kMinute;
  if (s.minute_acc.bucket != -1 && s.minute_acc.bucket != minute) {
    if (minute < s.minute_acc.bucket) return;  // the clock went back: drop the sample
    PoolPoint done = close(s.minute_acc, kMinute);
    s.minute.push(done);
    // The hour's average weighs each minute by its samples.
    const int64_t hour = int64_t{done.at_s} / kHour;
    if (s.hour_acc.bucket != -1 && s.hour_acc.bucket != hour) s.hour.push(close(s.hour_acc, kHour));
    s.hour_acc.bucket = hour;
    put(s.hour_acc, done.use, done.samples);
  }
  s.minute_acc.bucket = minute;
  put(s.minute_acc, use, 1);
  if (anyUse(use)) s.last_use = at;
}

void PoolHistory::addAll(std::map<std::string, Series>& all,
                         const std::map<std::string, PoolUse>& used, TimePoint at) {
  for (const auto& [key, use] : used) {
    if (all.find(key) == all.end()) {
      all.emplace(key, Series(options_.minute_capacity, options_.hour_capacity));
    }
  }
  // Everyone known gets this sample, zero when they held nothing, so that averages over a
  // minute count the samples they were absent from.
  static const PoolUse kNothing{};
  for (auto it = all.begin(); it != all.end();) {
    auto found = used.find(it->first);
    addTo(it->second, at, found == used.end() ? kNothing : found->second);
    if (at - it->second.last_use > options_.forget_after) {
      it = all.erase(it);
    } else {
      ++it;
    }
  }
}

void PoolHistory::add(TimePoint at, const PoolSample& s) {
  std::lock_guard lock(mu_);
  addTo(pool_, at, s.pool);
  addAll(users_, s.users, at);
  addAll(groups_, s.groups, at);
  simulated_ = s.simulated;
}

std::vector<PoolPoint> PoolHistory::pointsOf(const Series& s, PoolRange range,
                                             TimePoint now) const {
  const int64_t now_s = unixSeconds(now);
  auto current = [](const Accumulator& acc, int64_t bucket_s) {
    PoolPoint p;
    p.at_s = static_cast<uint32_t>(acc.bucket * bucket_s);
    p.samples = acc.samples;
    const double n = std::max<uint32_t>(acc.samples, 1);
    p.use = PoolUse{static_cast<float>(acc.sum[0] / n), static_cast<float>(acc.sum[1] / n),
                    static_cast<float>(acc.sum[2] / n), static_cast<float>(acc.sum[3] / n),
                    static_cast<float>(acc.sum[4] / n), static_cast<float>(acc.sum[5] / n)};
    return p;
  };
  std::vector<PoolPoint> out;
  if (range == PoolRange::kWeek) {
    const int64_t since = now_s - 7 * 24 * kHour;
    s.hour.forEach([&](const PoolPoint& p) {
      if (int64_t{p.at_s} >= since) out.push_back(p);
    });
    // The hour in progress: its closed minutes and the minute in progress.
    Accumulator acc = s.hour_acc;
    if (s.minute_acc.bucket != -1) {
      PoolPoint m = current(s.minute_acc, kMinute);
      const int64_t hour = int64_t{m.at_s} / kHour;
      if (acc.bucket == -1 || acc.bucket == hour) {
        acc.bucket = hour;
        const float v[6] = {m.use.gpus,       m.use.gpus_allocated,       m.use.gpus_used,
                            m.use.memory_mib, m.use.memory_allocated_mib, m.use.memory_used_mib};
        for (int i = 0; i < 6; ++i)
          acc.sum[i] += double(v[i]) * m.samples;
        acc.samples += m.samples;
      }
    }
    if (acc.bucket != -1 && acc.samples > 0) out.push_back(current(acc, kHour));
    return out;
  }
  const int64_t since = now_s - (range == PoolRange::kHour ? kHour : 24 * kHour);
  std::vector<PoolPoint> minutes;
  s.minute.forEach([&](const PoolPoint& p) {
    if (int64_t{p.at_s} >= since) minutes.push_back(p);
  });
  if (s.minute_acc.bucket != -1 && s.minute_acc.bucket * kMinute >= since) {
    minutes.push_back(current(s.minute_acc, kMinute));
  }
  if (range == PoolRange::kHour) return minutes;
  // Five-minute averages, each minute weighed by its samples.
  constexpr int64_t kFive = 5 * kMinute;
  for (const PoolPoint& m : minutes) {
    const uint32_t bucket = static_cast<uint32_t>(int64_t{m.at_s} / kFive * kFive);
    if (out.empty() || out.back().at_s != bucket) {
      PoolPoint p;
      p.at_s = bucket;
      out.push_back(p);
    }
    PoolPoint& p = out.back();
    const double before = p.samples;
    const double after = before + m.samples;
    if (after == 0) continue;
    auto mix = [&](float& to, float v) {
      to = static_cast<float>((to * before + v * double(m.samples)) / after);
    };
    mix(p.use.gpus, m.use.gpus);
    mix(p.use.gpus_allocated, m.use.gpus_allocated);
    mix(p.use.gpus_used, m.use.gpus_used);
    mix(p.use.memory_mib, m.use.memory_mib);
    mix(p.use.memory_allocated_mib, m.use.memory_allocated_mib);
    mix(p.use.memory_used_mib, m.use.memory_used_mib);
    p.samples += m.samples;
  }
  return out;
}

PoolHistoryAnswer PoolHistory::empty(PoolRange range, TimePoint now) {
  PoolHistoryAnswer a;
  switch (range) {
    case PoolRange::kHour:
      a.resolution = "1m";
      a.since = now - std::chrono::hours(1);
      break;
    case PoolRange::kDay:
      a.resolution = "5m";
      a.since = now - std::chrono::hours(24);
      break;
    case PoolRange::kWeek:
      a.resolution = "1h";
      a.since = now - std::chrono::hours(24 * 7);
      break;
  }
  return a;
}

PoolHistoryAnswer PoolHistory::query(PoolRange range, TimePoint now) const {
  PoolHistoryAnswer a = empty(range, now);
  std::lock_guard lock(mu_);
  a.simulated = simulated_;
  a.pool.points = pointsOf(pool_, range, now);
  auto each = [&](const std::map<std::string, Series>& all, std::vector<PoolSeries>& out) {
    for (const auto& [key, s] : all) {
      std::vector<PoolPoint> points = pointsOf(s, range, now);
      bool used = std::any_of(points.begin(), points.end(),
                              [](const PoolPoint& p) { return anyUse(p.use); });
      if (used) out.push_back(PoolSeries{key, std::move(points)});
    }
  };
  each(users_, a.users);
  each(groups_, a.groups);
  return a;
}

size_t PoolHistory::seriesCount() const {
  std::lock_guard lock(mu_);
  return 1 + users_.size() + groups_.size();
}

}  // namespace gpool::controller
