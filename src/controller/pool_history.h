#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "controller/telemetry_history.h"

// The pool's story over time, for the dashboard (GET /v1/pool/history, docs/dashboard.md):
// GPUs allocated against GPUs used, and GPU memory allocated against memory used, for the whole
// pool and per user and per group, over the last hour, day or week.
//
// A sample reads TelemetryHistory::snapshot() (the latest reading of every GPU with the tasks
// holding it) and counts, over the GPUs whose reading is fresh (not older than `stale_after`):
//   gpus                  GPUs reporting;
//   gpus_allocated        the compute share held by tasks (a whole GPU 1, a slice its share;
//                         at most 1 per GPU);
//   gpus_used             the sum of utilisation as fractions of one GPU;
//   memory_mib            their memory;
//   memory_allocated_mib  the memory held: a whole GPU's memory, a shared slice's quota (at
//                         most the GPU's memory);
//   memory_used_mib       the memory used on them.
// Per user and group: the same over their tasks (a shared GPU's utilisation times the task's
// share, as the metrics count it; memory used as TelemetryHistory attributes it), without the
// pool's totals. This is what GET /metrics exports as gpool_gpus_allocated / gpool_gpus_used,
// kept over time.
//
// Storage: per series (the pool, each user, each group) one-minute averages of the samples
// (the last `minute_capacity`, default 1440 = 24 h) and hourly averages of those minutes (the
// last `hour_capacity`, default 168 = 7 days). A point is 32 bytes: a series holds at most
// (1440 + 168) x 32 B = 51 KB; a user or group with no use for `forget_after` (default 7 days)
// is dropped. In memory only: a controller restart starts the story again (the per-GPU history
// in the store is kept; see docs/dashboard.md, "Not done").
//
// Thread-safety: every method may be called from any thread (one mutex). start() runs a thread
// that samples every `sample_every`; tests call sample() with an injected clock instead.
namespace gpool::controller {

struct PoolUse {
  float gpus = 0;
  float gpus_allocated = 0;
  float gpus_used = 0;
  float memory_mib = 0;
  float memory_allocated_mib = 0;
  float memory_used_mib = 0;
};

// One point: a minute's or an hour's average (at_s: its start, Unix seconds).
struct PoolPoint {
  uint32_t at_s = 0;
  PoolUse use;
  uint32_t samples = 0;
};
static_assert(sizeof(PoolPoint) == 32);

// What one sample of the GPUs counts, for the pool and per user and group.
struct PoolSample {
  PoolUse pool;
  std::map<std::string, PoolUse> users;
  std::map<std::string, PoolUse> groups;
  bool simulated = false;  // some GPU counted is simulated
};

// Counts `gpus` (readings older than `stale_after` at `now` are left out).
PoolSample poolSampleOf(const std::vector<GpuSnapshot>& gpus, TimePoint now, Micros stale_after);

enum class PoolRange { kHour, kDay, kWeek };

struct PoolSeries {
  std::string key;  // user or group name; empty for the pool
  std::vector<PoolPoint> points;
};

struct PoolHistoryAnswer {
  std::string resolution;  // "1m", "5m" or "1h"
  TimePoint since{};
  bool simulated = false;
  PoolSeries pool;
  std::vector<PoolSeries> users;   // by name
  std::vector<PoolSeries> groups;  // by name
};

struct PoolHistoryOptions {
  Micros sample_every{std::chrono::seconds(10)};
  Micros stale_after{std::chrono::minutes(2)};
  size_t minute_capacity = 1440;
  size_t hour_capacity = 168;
  Micros forget_after{std::chrono::hours(24 * 7)};
};

class PoolHistory {
 public:
  // `telemetry` and `clock` must outlive the history.
  PoolHistory(const TelemetryHistory& telemetry, Clock& clock, PoolHistoryOptions options = {});
  ~PoolHistory();
  PoolHistory(const PoolHistory&) = delete;
  PoolHistory& operator=(const PoolHistory&) = delete;

  // Starts the sampling thread; stop() (or the destructor) ends it. Idempotent.
  void start();
  void stop();

  // Takes one sample now (the clock's now).
  void sample();
  // Adds a sample taken at `at` (tests; sample() uses it).
  void add(TimePoint at, const PoolSample& s);

  // The points of `range` up to `now`: hour: one-minute points of the last 60 minutes; day:
  // five-minute averages of the last 24 hours; week: hourly points of the last 7 days. The
  // minute (or hour) in progress is the last point, averaged so far. Series with no point in
  // the range are left out.
  PoolHistoryAnswer query(PoolRange range, TimePoint now) const;
  // The answer without any point (its resolution and start), for a controller without history.
  static PoolHistoryAnswer empty(PoolRange range, TimePoint now);

  size_t seriesCount() const;

 private:
  struct Accumulator {
    int64_t bucket = -1;  // minutes (or hours) since the epoch; -1: empty
    double sum[6] = {0, 0, 0, 0, 0, 0};
    uint32_t samples = 0;
  };
  struct Series {
    Series(size_t minutes, size_t hours) : minute(minutes), hour(hours) {}
    BoundedRing<PoolPoint> minute;
    BoundedRing<PoolPoint> hour;
    Accumulator minute_acc;
    Accumulator hour_acc;  // of closed minutes
    TimePoint last_use{};  // the last sample with any allocation or use
  };

  void addTo(Series& s, TimePoint at, const PoolUse& use);
  std::vector<PoolPoint> pointsOf(const Series& s, PoolRange range, TimePoint now) const;
  void addAll(std::map<std::string, Series>& all, const std::map<std::string, PoolUse>& used,
              TimePoint at);
  void run(std::stop_token stop);

  const TelemetryHistory& telemetry_;
  Clock& clock_;
  PoolHistoryOptions options_;
  mutable std::mutex mu_;
  Series pool_;
  std::map<std::string, Series> users_;
  std::map<std::string, Series> groups_;
  bool simulated_ = false;
  std::mutex thread_mu_;
  std::condition_variable_any wake_;
  std::jthread thread_;
};

}  // namespace gpool::controller
