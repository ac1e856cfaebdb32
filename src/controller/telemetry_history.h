#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "store/store.h"

// The controller's GPU telemetry: the latest sample of every GPU (as the agents' `telemetry`
// frames report it, docs/agent-protocol.md) and a bounded, downsampled history per GPU and per
// running task, in memory. Finished one-minute averages per GPU and per task are handed out for
// the store (takeFinishedMinutes -> store::recordTelemetry, recordTaskTelemetry), whose
// pruneTelemetry downsamples and bounds them on disk; so the minute history survives a restart
// (and a task series evicted from memory) while the one-second history does not.
//
// Per series (one GPU, or one task of a job) two rings of fixed capacity:
//   fine:   one point per second (several samples within one second: the latest), the last
//           `fine_span` (default 10 min, at most `fine_capacity` = 600 points);
//   coarse: one-minute averages, at most `coarse_capacity` (default 1440 = 24 h).
// A ring's storage grows with the points it holds, never beyond its capacity.
//
// Memory bound: sizeof(TelemetryPoint) = 24 bytes; each series holds at most
// (fine_capacity + coarse_capacity) points = 2040 x 24 B = 49 KB by default, plus its latest
// reading. At most `max_gpus` GPU series (default 8192) and `max_tasks` task series (default
// 4096): the least recently updated series is dropped when a new one would exceed the limit.
// Worst case with the defaults (every series full at one sample per second): 12,288 x 49 KB
// = 600 MB; at the agents' default telemetry interval (10 s) a fine ring holds at most 60
// points, so a full pool of 8192 GPUs keeps (60 + 1440) x 24 B = 36 KB per GPU = 295 MB.
// Smaller pools use proportionally less; the options shrink the bound.
//
// Attribution to tasks (`ingest`'s tenants: which tasks hold each GPU, with their slice):
//   - a task alone on a GPU or holding it exclusively gets the GPU's utilisation, memory used
//     and power;
//   - a task sharing a GPU gets the memory of its own processes (the process entries the agent
//     tagged with its job, else those whose pid is the task's reported pid), the GPU's
//     utilisation (NVML does not split it by process) and the GPU's power times its compute
//     share;
//   - over several GPUs of one task: utilisation is the mean, memory and power the sum,
//     temperature the maximum.
//
// Thread-safety: every method may be called from any thread (one mutex).
namespace gpool::controller {

// A process with a context on a GPU. `job_id`/`task`: the task it belongs to, when the agent
// knows (it tags processes that descend from a task's process).
struct GpuProcessUse {
  int64_t pid = 0;
  uint64_t used_mib = 0;
  std::optional<int64_t> job_id;
  std::optional<uint32_t> task;
  bool operator==(const GpuProcessUse&) const = default;
};

// A slice task's use of a GPU as the interposer's region tells it (the agent reads it):
// the share of the GPU's compute it used over the last control period, its kernel launches so
// far, and when it last launched (on the controller's clock; none: no launch seen yet).
struct SliceUse {
  int64_t job_id = 0;
  uint32_t task = 0;
  uint32_t compute_used_permille = 0;
  uint64_t kernel_launches = 0;
  std::optional<TimePoint> last_launch_at;
  bool operator==(const SliceUse&) const = default;
};

// One GPU as the latest `telemetry` frame of its node reported it.
struct GpuReading {
  std::string node;
  std::string uuid;
  uint32_t index = 0;
  TimePoint taken_at{};
  bool simulated = false;
  uint32_t utilization_pct = 0;
  uint32_t memory_utilization_pct = 0;
  uint64_t memory_used_mib = 0;
  uint64_t memory_total_mib = 0;
  int32_t temperature_c = 0;
  double power_w = 0;
  uint32_t sm_clock_mhz = 0;
  uint32_t memory_clock_mhz = 0;
  std::optional<uint64_t> ecc_corrected;
  std::optional<uint64_t> ecc_uncorrected;
  std::vector<uint32_t> xid_errors;  // XIDs reported since the node's previous sample
  std::vector<GpuProcessUse> processes;
  std::vector<SliceUse> slices;  // slice tasks under the interposer
  bool operator==(const GpuReading&) const = default;
};

// A task holding (part of) a GPU when a sample is ingested.
struct GpuTenant {
  int64_t job_id = 0;
  uint32_t task = 0;
  uint32_t compute_milli = 1000;  // its compute share of this GPU
  bool exclusive = true;          // a whole GPU, not a shared slice
  int64_t pid = 0;                // the task's process as last reported (0: unknown)
  std::string user{};             // the job's owner and group (metrics labels)
  std::string group{};
  uint64_t memory_mib = 0;  // a shared slice's memory quota; 0 for a whole GPU
};

// One GPU's latest reading with what the metrics export beside it (GET /metrics): the tasks
// that held it at that reading and the memory attributed to each (as the task history counts
// it), the last XID it ever reported here (DCGM's DCGM_FI_DEV_XID_ERRORS is the value of the
// last XID, not a count) and the energy it used since the controller first saw it.
struct GpuSnapshot {
  GpuReading reading;
  std::vector<GpuTenant> tenants;
  std::vector<double> tenant_memory_mib;  // one per tenant
  uint32_t last_xid = 0;                  // 0: none seen
  TimePoint last_xid_at{};                // when it was reported
  double energy_mj = 0;                   // power integrated over the samples, millijoules
};

// One point of a history. Time in whole seconds since the Unix epoch (the start of the minute
// for one-minute averages) to keep the point at 24 bytes.
struct TelemetryPoint {
  uint32_t at_s = 0;
  float utilization_pct = 0;
  float memory_used_mib = 0;
  float temperature_c = 0;
  float power_w = 0;
  uint32_t samples = 0;  // samples averaged into this point
};
static_assert(sizeof(TelemetryPoint) == 24);

enum class HistoryResolution { kSecond, kMinute };

struct TelemetryHistoryOptions {
  size_t fine_capacity = 600;
  Micros fine_span{std::chrono::minutes(10)};
  size_t coarse_capacity = 1440;
  size_t max_gpus = 8192;
  size_t max_tasks = 4096;
};

// The history of one task of a job, as jobHistory returns it.
struct TaskHistory {
  uint32_t task = 0;
  std::string node;
  std::vector<std::string> gpus;  // the GPUs it was seen on
  std::vector<TelemetryPoint> points;
};

// Minutes closed and not handed out before, as store rows.
struct FinishedMinutes {
  std::vector<store::TelemetrySample> gpus;
  std::vector<store::TaskTelemetrySample> tasks;
};

// A ring of at most `capacity` values, oldest first; storage grows up to the capacity.
template <typename T>
class BoundedRing {
 public:
  explicit BoundedRing(size_t capacity = 0) : capacity_(capacity) {}
  void push(const T& value) {
    if (capacity_ == 0) return;
    if (items_.size() < capacity_) {
      items_.push_back(value);
      return;
    }
    items_[head_] = value;
    head_ = (head_ + 1) % capacity_;
  }
  size_t size() const { return items_.size(); }
  size_t capacity() const { return capacity_; }
  // The newest value; the ring must not be empty.
  T& back() { return items_[(head_ + items_.size() - 1) % items_.size()]; }
  const T& back() const { return items_[(head_ + items_.size() - 1) % items_.size()]; }
  // Oldest first.
  template <typename F>
  void forEach(F&& f) const {
    for (size_t i = 0; i < items_.size(); ++i)
      f(items_[(head_ + i) % items_.size()]);
  }

 private:
  size_t capacity_;
  size_t head_ = 0;  // the oldest value once full
  std::vector<T> items_;
};

class TelemetryHistory {
 public:
  explicit TelemetryHistory(TelemetryHistoryOptions options = {});

  // One `telemetry` frame of `node`, taken at `taken_at`: replaces the latest readings of its
  // GPUs and adds a point to each GPU's history and to the history of every task in `tenants`
  // (by GPU UUID: the tasks holding that GPU now).
  void ingest(const std::string& node, TimePoint taken_at, const std::vector<GpuReading>& gpus,
              const std::map<std::string, std::vector<GpuTenant>>& tenants);

  // The latest reading of one GPU, or nullopt when none arrived (or it was evicted).
  std::optional<GpuReading> latest(const std::string& uuid) const;
  // Every GPU's latest reading, by UUID.
  std::map<std::string, GpuReading> latestAll() const;
  // Every GPU's latest reading with its tenants, ordered by (node, index). A copy: the caller
  // renders it without holding the history's lock.
  std::vector<GpuSnapshot> snapshot() const;

  // One GPU's points at or after `since`, oldest first (the minute in progress is not a point
  // until it ends).
  std::vector<TelemetryPoint> gpuHistory(const std::string& uuid, HistoryResolution resolution,
                                         TimePoint since) const;
  // Every task of `job_id` with its points at or after `since`; tasks ordered by index.
  std::vector<TaskHistory> jobHistory(int64_t job_id, HistoryResolution resolution,
                                      TimePoint since) const;

  // Closes every GPU and task minute that ended before `now` and returns the one-minute
  // averages not handed out before, as store rows (a GPU's row names its job when one job alone
  // held the GPU during every sample of the minute). Each minute is returned once. Call it at
  // least every few minutes: beyond max_gpus x 60 queued GPU minutes (max_tasks x 60 task
  // minutes) the oldest are dropped.
  FinishedMinutes takeFinishedMinutes(TimePoint now);

  // Series held now (for tests and the bound).
  size_t gpuSeries() const;
  size_t taskSeries() const;

 private:
  struct Accumulator {
    int64_t minute = -1;  // minutes since the epoch; -1: empty
    double util = 0, memory = 0, temperature = 0, power = 0;
    uint32_t samples = 0;
    std::optional<int64_t> sole_job;  // one job alone in every sample so far
    bool mixed = false;               // several or no jobs in some sample
  };
  struct Series {
    explicit Series(const TelemetryHistoryOptions& o)
        : fine(o.fine_capacity), coarse(o.coarse_capacity) {}
    BoundedRing<TelemetryPoint> fine;
    BoundedRing<TelemetryPoint> coarse;
    Accumulator acc;
    uint64_t touched = 0;  // update counter value at the last update (for eviction)
  };
  struct GpuState {
    explicit GpuState(const TelemetryHistoryOptions& o) : series(o) {}
    Series series;
    GpuReading latest;
    std::vector<GpuTenant> tenants;
    std::vector<double> tenant_memory_mib;
    uint32_t last_xid = 0;
    TimePoint last_xid_at{};
    double energy_mj = 0;
  };
  struct TaskState {
    explicit TaskState(const TelemetryHistoryOptions& o) : series(o) {}
    Series series;
    std::string node;
    std::vector<std::string> gpus;
  };

  // Adds one sample to `s` (`job`: the one job alone on a GPU, nullopt for none or several).
  // Returns the minute it closed, if any (already pushed to the coarse ring).
  std::optional<Accumulator> addPoint(Series& s, TimePoint at, const TelemetryPoint& value,
                                      std::optional<int64_t> job);
  // Closes the minute of `s` when it ended before `before_minute`.
  std::optional<Accumulator> closeMinute(Series& s, int64_t before_minute);
  // Queue a closed GPU or task minute for takeFinishedMinutes (bounded: the oldest go first).
  void queueFinished(const std::string& uuid, const Accumulator& done);
  void queueFinishedTask(const std::pair<int64_t, uint32_t>& key, const std::string& node,
                         const Accumulator& done);
  static TelemetryPoint averageOf(const Accumulator& acc);
  std::vector<TelemetryPoint> pointsOf(const Series& s, HistoryResolution resolution,
                                       TimePoint since) const;
  template <typename Map>
  void evictOldest(Map& map, size_t limit);

  TelemetryHistoryOptions options_;
  mutable std::mutex mu_;
  uint64_t updates_ = 0;
  std::map<std::string, GpuState> gpus_;
  std::map<std::pair<int64_t, uint32_t>, TaskState> tasks_;
  // Minutes not yet taken; at most max_gpus x 60 (an hour of a full pool) are kept.
  std::deque<store::TelemetrySample> finished_;
  std::deque<store::TaskTelemetrySample> finished_tasks_;
};

// Idle reclaim's input (SchedulingLoop, LoopOptions::idle): for each job holding a GPU in
// `snapshots`, whether it is idle now: every GPU it holds has a reading taken at or after
// `fresh_since` with at most `threshold_pct` utilisation. One GPU busy, or one whose reading is
// older (its node stopped reporting it), makes the job not idle: a job is never called idle
// without a fresh reading of each of its GPUs. A shared GPU is idle only when all its tenants
// are (NVML does not split utilisation per process).
std::map<int64_t, bool> jobsIdle(const std::vector<GpuSnapshot>& snapshots, TimePoint fresh_since,
                                 double threshold_pct);

}  // namespace gpool::controller
