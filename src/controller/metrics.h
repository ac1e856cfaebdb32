#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "controller/node_registry.h"
#include "controller/telemetry_history.h"
#include "net/router.h"
#include "store/store.h"

// gpoold's Prometheus metrics (GET /metrics, docs/metrics.md).
//
// GPU metrics keep the DCGM exporter's names and labels (DCGM_FI_DEV_GPU_UTIL{gpu, UUID,
// device, modelName, Hostname, pci_bus_id}), so dashboards written for dcgm-exporter (Grafana
// 12239) work unchanged, plus the labels of who holds the GPU: `hpc_job` (DCGM's own label for
// the job on a GPU; "job" would clash with Prometheus's scrape job), `user` and `slice`.
// gpool's own metrics are prefixed gpool_.
//
// A scrape is served from memory: the latest telemetry (TelemetryHistory's copy), the node
// registry, counters kept by the API and the scheduling loop, and job counts that a collector
// thread reads from the store every `job_stats_every`. Nothing here takes the scheduling loop's
// lock or waits for the store.
namespace gpool::controller {

// Writes the Prometheus text exposition format (version 0.0.4).
class PromWriter {
 public:
  using Labels = std::vector<std::pair<std::string_view, std::string_view>>;
  // "# HELP" and "# TYPE" of one family; call once per family, before its samples.
  void family(std::string_view name, std::string_view type, std::string_view help);
  // One sample line; label values are escaped (\\, \", \n). NaN and infinities are written as
  // Prometheus spells them.
  void sample(std::string_view name, const Labels& labels, double value);
  const std::string& text() const { return text_; }
  std::string take() { return std::move(text_); }
  void reserve(size_t bytes) { text_.reserve(bytes); }

 private:
  std::string text_;
};

// A histogram with fixed bucket bounds (seconds); observations are lock-free.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // The _bucket, _sum and _count lines of `name` with `labels` (the family must be written).
  void write(PromWriter& out, std::string_view name, const PromWriter::Labels& labels) const;
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_;  // one per bound, not cumulative
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};  // sum in nanoseconds (whole units keep it atomic)
};

// Job counts from the store, as the collector last read them.
struct JobStats {
  std::vector<std::pair<api::JobState, int64_t>> by_state;
  std::vector<store::PendingReasonCount> pending;
  TimePoint read_at{};
};

struct MetricsOptions {
  // How often the collector thread reads job counts from the store.
  Micros job_stats_every{std::chrono::seconds(5)};
  // A GPU whose latest reading is older than this is left out of the GPU metrics (its node
  // stopped reporting it: a lost GPU or server shows as a missing series, as with DCGM).
  Micros stale_after{std::chrono::seconds(90)};
};

// Collects and renders the metrics. Thread-safety: every method may be called from any thread.
class MetricsExporter {
 public:
  // `store`, `registry` and `clock` must outlive the exporter.
  MetricsExporter(store::Store& store, NodeRegistry& registry, Clock& clock,
                  MetricsOptions options = {});
  ~MetricsExporter();

  // Sources that may be absent (tests): the agents' telemetry, the count of connected agents.
  // Set before the server starts.
  void setTelemetry(const TelemetryHistory* telemetry) { telemetry_ = telemetry; }
  void setAgentCount(std::function<size_t()> count) { agent_count_ = std::move(count); }
  // More families written after the built-in ones (the alert engine's, the webhooks'); each
  // writer must be thread-safe. Set before the server starts.
  void addWriter(std::function<void(PromWriter&)> writer);

  // A scheduling pass took `took` (SchedulingLoop's on_pass).
  void observePass(Micros took);

  // A copy of `router` whose HTTP handlers count requests by route, method and status code and
  // time them (gpool_api_requests_total, gpool_api_request_duration_seconds). WebSocket routes
  // are copied unchanged.
  Result<net::Router> instrument(const net::Router& router);

  // Reads job counts from the store now (the collector's step; tests call it directly).
  Status refreshJobStats();
  // Starts / stops the collector thread (reads at once, then every job_stats_every).
  void start();
  void stop();

  // The whole page.
  std::string render() const;

  // The job counts the collector read last (never null), and how many of its reads failed.
  std::shared_ptr<const JobStats> jobStats() const;
  uint64_t storeErrors() const { return stats_errors_.load(std::memory_order_relaxed); }

 private:
  struct RouteStats;
  void writeGpus(PromWriter& out) const;
  void writeJobs(PromWriter& out) const;
  void writeOwn(PromWriter& out) const;

  store::Store& store_;
  NodeRegistry& registry_;
  Clock& clock_;
  MetricsOptions options_;
  const TelemetryHistory* telemetry_ = nullptr;
  std::function<size_t()> agent_count_;
  std::vector<std::function<void(PromWriter&)>> writers_;

  Histogram pass_seconds_;
  std::vector<std::unique_ptr<RouteStats>> routes_;  // fixed once instrument() ran

  mutable std::mutex stats_mu_;  // guards only the pointer swap
  std::shared_ptr<const JobStats> stats_;
  std::atomic<uint64_t> stats_errors_{0};
  std::jthread collector_;
};

// GET /metrics for everyone who reaches `router`, without authentication: the router of
// gpoold's open scrape listener (controller.metrics_listen). `metrics` must outlive the server.
Status addOpenMetricsRoute(net::Router& router, const MetricsExporter& metrics);

}  // namespace gpool::controller
