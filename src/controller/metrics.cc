#include "controller/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "api/node.h"
#include "controller/route_helpers.h"

namespace gpool::controller {

namespace {

void appendEscaped(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      default: out += c;
    }
  }
}

void appendNumber(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
    return;
  }
  if (std::isinf(value)) {
    out += value > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[32];
  // Integers (most counts and gauges) without a fraction; others with the shortest form that
  // reads back exactly.
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), static_cast<int64_t>(value));
    out.append(buf, end);
    return;
  }
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, end);
}

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

// ---- PromWriter

void PromWriter::family(std::string_view name, std::string_view type, std::string_view help) {
  text_ += "# HELP ";
  text_ += name;
  text_ += ' ';
  text_ += help;
  text_ += "\n# TYPE ";
  text_ += name;
  text_ += ' ';
  text_ += type;
  text_ += '\n';
}

void PromWriter::sample(std::string_view name, const Labels& labels, double value) {
  text_ += name;
  if (!labels.empty()) {
    text_ += '{';
    bool first = true;
    for (const auto& [key, val] : labels) {
      if (!first) text_ += ',';
      first = false;
      text_ += key;
      text_ += "=\"";
      appendEscaped(text_, val);
      text_ += '"';
    }
    text_ += '}';
  }
  text_ += ' ';
  appendNumber(text_, value);
  text_ += '\n';
}

// ---- Histogram

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), buckets_(new std::atomic<uint64_t>[bounds_.size()]) {
  for (size_t i = 0; i < bounds_.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe(double value) {
  auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);
  if (it != bounds_.end()) buckets_[it - bounds_.begin()].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(std::max(0.0, value) * 1e9), std::memory_order_relaxed);
}

void Histogram::write(PromWriter& out, std::string_view name,
                      const PromWriter::Labels& labels) const {
  std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  char le[32];
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += buckets_[i].load(std::memory_order_relaxed);
    std::string text;
    appendNumber(text, bounds_[i]);
    std::snprintf(le, sizeof(le), "%s", text.c_str());
    PromWriter::Labels l = labels;
    l.emplace_back("le", le);
    out.sample(bucket, l, static_cast<double>(cumulative));
  }
  uint64_t count = count_.load(std::memory_order_relaxed);
  PromWriter::Labels l = labels;
  l.emplace_back("le", "+Inf");
  out.sample(bucket, l, static_cast<double>(std::max(count, cumulative)));
  out.sample(std::string(name) + "_sum", labels,
             static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9);
  out.sample(std::string(name) + "_count", labels, static_cast<double>(count));
}

// ---- MetricsExporter

namespace {
const std::vector<double>& latencyBounds() {
  static const std::vector<double> bounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                             0.05,   0.1,   0.25,   0.5,   1,    2.5};
  return bounds;
}
const std::vector<double>& passBounds() {
  static const std::vector<double> bounds = {0.001, 0.005, 0.01, 0.05, 0.1, 0.25,
                                             0.5,   1,     2.5,  5,    10};
  return bounds;
}
}  // namespace

struct MetricsExporter::RouteStats {
  RouteStats() : seconds(latencyBounds()) {}
  std::string method;
  std::string route;
  // Responses by status class: 1xx..5xx (index 1..5).
  std::atomic<uint64_t> by_class[6] = {};
  Histogram seconds;
};

MetricsExporter::MetricsExporter(store::Store& store, NodeRegistry& registry, Clock& clock,
                                 MetricsOptions options)
    : store_(store),
      registry_(registry),
      clock_(clock),
      options_(options),
      pass_seconds_(passBounds()),
      stats_(std::make_shared<JobStats>()) {}

MetricsExporter::~MetricsExporter() {
  stop();
}

void MetricsExporter::addWriter(std::function<void(PromWriter&)> writer) {
  writers_.push_back(std::move(writer));
}

void MetricsExporter::observePass(Micros took) {
  pass_seconds_.observe(std::chrono::duration<double>(took).count());
}

Result<net::Router> MetricsExporter::instrument(const net::Router& router) {
  net::Router out;
  for (const net::Router::Route& route : router.routes()) {
    if (route.is_websocket) {
      GPOOL_RETURN_IF_ERROR(out.addWebSocket(route.pattern, route.websocket, route.options));
      continue;
    }
    auto stats = std::make_unique<RouteStats>();
    stats->method = std::string(net::methodName(route.method));
    stats->route = route.pattern;
    RouteStats* s = stats.get();
    routes_.push_back(std::move(stats));
    const Clock* clock = &realClock();
    net::Handler inner = route.handler;
    GPOOL_RETURN_IF_ERROR(out.add(
        route.method, route.pattern,
        [s, clock, inner](const net::Request& req) {
          Micros start = clock->monotonic();
          net::Response r = inner(req);
          s->seconds.observe(std::chrono::duration<double>(clock->monotonic() - start).count());
          int cls = std::clamp(r.status / 100, 1, 5);
          s->by_class[cls].fetch_add(1, std::memory_order_relaxed);
          return r;
        },
        route.options));
  }
  return out;
}

Status MetricsExporter::refreshJobStats() {
  auto stats = std::make_shared<JobStats>();
  Result<std::vector<std::pair<api::JobState, int64_t>>> by_state = store_.countJobsByState();
  if (!by_state.ok()) {
    stats_errors_.fetch_add(1, std::memory_order_relaxed);
    return by_state.status();
  }
  Result<std::vector<store::PendingReasonCount>> pending = store_.pendingByReason();
  if (!pending.ok()) {
    stats_errors_.fetch_add(1, std::memory_order_relaxed);
    return pending.status();
  }
  stats->by_state = std::move(*by_state);
  stats->pending = std::move(*pending);
  stats->read_at = clock_.now();
  std::lock_guard lock(stats_mu_);
  stats_ = std::move(stats);
  return Status::ok();
}

void MetricsExporter::start() {
  if (collector_.joinable()) return;
  collector_ = std::jthread([this](std::stop_token stop) {
    std::mutex mu;
    std::condition_variable_any cv;
    while (!stop.stop_requested()) {
      if (Status s = refreshJobStats(); !s.isOk())
        spdlog::warn("metrics: cannot read job counts: {}", s.toString());
      std::unique_lock lock(mu);
      cv.wait_for(lock, stop, options_.job_stats_every, [] { return false; });
    }
  });
}

void MetricsExporter::stop() {
  if (!collector_.joinable()) return;
  collector_.request_stop();
  collector_.join();
}

void MetricsExporter::writeGpus(PromWriter& out) const {
  std::vector<GpuSnapshot> gpus;
  if (telemetry_) gpus = telemetry_->snapshot();
  // Per GPU the labels DCGM's exporter writes, then who holds it.
  struct Row {
    const GpuSnapshot* g;
    std::string gpu, device, jobs, users, slice;
    PromWriter::Labels labels;
  };
  std::vector<Row> rows;
  rows.reserve(gpus.size());
  const TimePoint now = clock_.now();
  for (const GpuSnapshot& g : gpus) {
    if (now - g.reading.taken_at > options_.stale_after) continue;
    Row row;
    row.g = &g;
    row.gpu = std::to_string(g.reading.index);
    row.device = "nvidia" + row.gpu;
    std::set<int64_t> jobs;
    std::set<std::string> users;
    bool shared = g.tenants.size() > 1;
    for (const GpuTenant& t : g.tenants) {
      jobs.insert(t.job_id);
      users.insert(t.user);
      if (!t.exclusive) shared = true;
    }
    for (int64_t j : jobs)
      row.jobs += (row.jobs.empty() ? "" : ",") + std::to_string(j);
    for (const std::string& u : users)
      row.users += (row.users.empty() ? "" : ",") + u;
    row.slice = g.tenants.empty() ? "" : (shared ? "shared" : "whole");
    rows.push_back(std::move(row));
  }
  // The model comes from the registry (the agent's inventory); the reading has none.
  std::map<std::string, std::pair<std::string, std::string>> models;  // uuid -> model, pci
  for (const api::Node& node : registry_.nodes()) {
    for (const api::Gpu& gpu : node.gpus)
      models[gpu.uuid] = {gpu.model, gpu.pci_bus_id};
  }
  for (Row& row : rows) {
    const GpuReading& r = row.g->reading;
    auto m = models.find(r.uuid);
    static const std::string kEmpty;
    const std::string& model = m == models.end() ? kEmpty : m->second.first;
    const std::string& pci = m == models.end() ? kEmpty : m->second.second;
    row.labels = {{"gpu", row.gpu},      {"UUID", r.uuid},     {"device", row.device},
                  {"modelName", model},  {"Hostname", r.node}, {"pci_bus_id", pci},
                  {"hpc_job", row.jobs}, {"user", row.users},  {"slice", row.slice}};
  }
  struct Field {
    const char* name;
    const char* type;
    const char* help;
    std::function<std::optional<double>(const GpuSnapshot&)> value;
  };
  const std::vector<Field> fields = {
      {"DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).",
       [](const GpuSnapshot& g) { return double(g.reading.utilization_pct); }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
       [](const GpuSnapshot& g) { return double(g.reading.memory_utilization_pct); }},
      {"DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
       [](const GpuSnapshot& g) { return double(g.reading.memory_used_mib); }},
      {"DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
       [](const GpuSnapshot& g) {
         return double(g.reading.memory_total_mib > g.reading.memory_used_mib
                           ? g.reading.memory_total_mib - g.reading.memory_used_mib
                           : 0);
       }},
      {"DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).",
       [](const GpuSnapshot& g) { return double(g.reading.temperature_c); }},
      {"DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).",
       [](const GpuSnapshot& g) { return g.reading.power_w; }},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
       "Total energy consumption since the controller first saw the GPU (in mJ).",
       [](const GpuSnapshot& g) { return std::floor(g.energy_mj); }},
      {"DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
       [](const GpuSnapshot& g) { return double(g.reading.sm_clock_mhz); }},
      {"DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).",
       [](const GpuSnapshot& g) { return double(g.reading.memory_clock_mhz); }},
      {"DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.",
       [](const GpuSnapshot& g) { return double(g.last_xid); }},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter",
       "Total number of single-bit volatile ECC errors.",
       [](const GpuSnapshot& g) -> std::optional<double> {
         if (!g.reading.ecc_corrected) return std::nullopt;
         return double(*g.reading.ecc_corrected);
       }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
       "Total number of double-bit volatile ECC errors.",
       [](const GpuSnapshot& g) -> std::optional<double> {
         if (!g.reading.ecc_uncorrected) return std::nullopt;
         return double(*g.reading.ecc_uncorrected);
       }},
  };
  for (const Field& f : fields) {
    out.family(f.name, f.type, f.help);
    for (const Row& row : rows) {
      if (std::optional<double> v = f.value(*row.g)) out.sample(f.name, row.labels, *v);
    }
  }

  // Slices: one series per task holding (part of) a GPU.
  out.family("gpool_slice_memory_used_bytes", "gauge",
             "GPU memory held by the task's processes on this GPU (a whole GPU: all of it).");
  std::vector<std::pair<PromWriter::Labels, const GpuTenant*>> slices;
  std::vector<std::string> keep;  // storage for the job and task label values
  size_t tenants = 0;
  for (const Row& row : rows)
    tenants += row.g->tenants.size();
  keep.reserve(tenants * 2);
  for (const Row& row : rows) {
    const GpuSnapshot& g = *row.g;
    for (size_t i = 0; i < g.tenants.size(); ++i) {
      const GpuTenant& t = g.tenants[i];
      keep.push_back(std::to_string(t.job_id));
      const std::string& job = keep.back();
      keep.push_back(std::to_string(t.task));
      const std::string& task = keep.back();
      PromWriter::Labels l = {{"gpu", row.gpu},
                              {"UUID", g.reading.uuid},
                              {"Hostname", g.reading.node},
                              {"hpc_job", job},
                              {"task", task},
                              {"user", t.user},
                              {"group", t.group},
                              {"slice", t.exclusive ? "whole" : "shared"}};
      double used = i < g.tenant_memory_mib.size() ? g.tenant_memory_mib[i] : 0;
      out.sample("gpool_slice_memory_used_bytes", l, used * kMiB);
      slices.emplace_back(std::move(l), &t);
    }
  }
  out.family("gpool_slice_memory_quota_bytes", "gauge",
             "The memory quota of a shared slice (whole GPUs: the GPU's memory).");
  for (const auto& [l, t] : slices) {
    double quota = static_cast<double>(t->memory_mib);
    if (t->exclusive || quota == 0) {
      for (const Row& row : rows) {
        if (row.g->reading.uuid == l[1].second) quota = double(row.g->reading.memory_total_mib);
      }
    }
    out.sample("gpool_slice_memory_quota_bytes", l, quota * kMiB);
  }
  out.family("gpool_slice_compute_share_ratio", "gauge",
             "The compute share the task holds on this GPU (1 for a whole GPU).");
  for (const auto& [l, t] : slices)
    out.sample("gpool_slice_compute_share_ratio", l,
               t->exclusive ? 1.0 : std::min<uint32_t>(t->compute_milli, 1000) / 1000.0);
  // What the interposer's region says, for tasks that run under it (shared slices).
  std::vector<std::pair<const PromWriter::Labels*, const SliceUse*>> uses;
  for (const auto& [l, t] : slices) {
    for (const Row& row : rows) {
      if (row.g->reading.uuid != l[1].second) continue;
      for (const SliceUse& u : row.g->reading.slices) {
        if (u.job_id == t->job_id && u.task == t->task) uses.emplace_back(&l, &u);
      }
    }
  }
  out.family("gpool_slice_compute_used_ratio", "gauge",
             "The share of the GPU's compute the task used over the interposer's last control "
             "period (compare with gpool_slice_compute_share_ratio).");
  for (const auto& [l, u] : uses)
    out.sample("gpool_slice_compute_used_ratio", *l, u->compute_used_permille / 1000.0);
  out.family("gpool_slice_kernel_launches_total", "counter",
             "Kernel and graph launches of the task's processes on this GPU.");
  for (const auto& [l, u] : uses)
    out.sample("gpool_slice_kernel_launches_total", *l, double(u->kernel_launches));
  out.family("gpool_slice_since_last_kernel_launch_seconds", "gauge",
             "Seconds since the task last launched a kernel on this GPU, as of the scrape "
             "(to within the agents' telemetry interval; absent before its first launch).");
  for (const auto& [l, u] : uses) {
    if (!u->last_launch_at) continue;
    out.sample("gpool_slice_since_last_kernel_launch_seconds", *l,
               std::max(0.0, std::chrono::duration<double>(now - *u->last_launch_at).count()));
  }

  // Allocated against used: the utilisation that pooling exists to raise. A GPU counts as
  // allocated by the compute share its tenants hold; as used by its utilisation.
  std::map<std::string, std::pair<double, double>> by_user, by_group;  // allocated, used
  double allocated = 0, used = 0;
  for (const Row& row : rows) {
    const GpuSnapshot& g = *row.g;
    double util = g.reading.utilization_pct / 100.0;
    double held = 0;
    for (const GpuTenant& t : g.tenants) {
      double share = t.exclusive ? 1.0 : std::min<uint32_t>(t.compute_milli, 1000) / 1000.0;
      held += share;
      // A shared GPU's utilisation is not split per process by NVML: each tenant is counted
      // with the utilisation times its share.
      by_user[t.user].first += share;
      by_user[t.user].second += util * share;
      by_group[t.group].first += share;
      by_group[t.group].second += util * share;
    }
    allocated += std::min(held, 1.0);
    used += util;
  }
  out.family("gpool_gpus_allocated", "gauge",
             "GPUs allocated to tasks, counting slices by their compute share (GPUs reporting "
             "telemetry).");
  out.sample("gpool_gpus_allocated", {}, allocated);
  out.family("gpool_gpus_used", "gauge",
             "GPUs in use: the sum of the GPUs' utilisation, as fractions of one GPU.");
  out.sample("gpool_gpus_used", {}, used);
  out.family("gpool_user_gpus_allocated", "gauge", "GPUs a user's tasks hold (compute shares).");
  for (const auto& [user, v] : by_user)
    out.sample("gpool_user_gpus_allocated", {{"user", user}}, v.first);
  out.family("gpool_user_gpus_used", "gauge",
             "GPUs a user's tasks use: each GPU's utilisation times the share held.");
  for (const auto& [user, v] : by_user)
    out.sample("gpool_user_gpus_used", {{"user", user}}, v.second);
  out.family("gpool_group_gpus_allocated", "gauge", "GPUs a group's tasks hold.");
  for (const auto& [group, v] : by_group)
    out.sample("gpool_group_gpus_allocated", {{"group", group}}, v.first);
  out.family("gpool_group_gpus_used", "gauge", "GPUs a group's tasks use.");
  for (const auto& [group, v] : by_group)
    out.sample("gpool_group_gpus_used", {{"group", group}}, v.second);
}

void MetricsExporter::writeJobs(PromWriter& out) const {
  std::shared_ptr<const JobStats> stats;
  {
    std::lock_guard lock(stats_mu_);
    stats = stats_;
  }
  out.family("gpool_jobs", "gauge", "Jobs by state (as of gpool_job_stats_read_timestamp).");
  for (const auto& [state, n] : stats->by_state)
    out.sample("gpool_jobs", {{"state", api::jobStateName(state)}}, double(n));
  out.family("gpool_jobs_pending", "gauge", "Pending jobs by pending reason.");
  for (const store::PendingReasonCount& p : stats->pending)
    out.sample("gpool_jobs_pending", {{"reason", p.reason}}, double(p.jobs));
  out.family("gpool_queue_wait_oldest_seconds", "gauge",
             "How long the oldest pending job of each pending reason has waited.");
  for (const store::PendingReasonCount& p : stats->pending) {
    double waited = std::chrono::duration<double>(stats->read_at - p.oldest_submit).count();
    out.sample("gpool_queue_wait_oldest_seconds", {{"reason", p.reason}}, std::max(0.0, waited));
  }
  out.family("gpool_job_stats_read_timestamp_seconds", "gauge",
             "When the job counts above were read from the store (Unix time).");
  out.sample("gpool_job_stats_read_timestamp_seconds", {},
             stats->read_at == TimePoint{} ? 0.0 : toUnixMicros(stats->read_at) / 1e6);
  out.family("gpool_job_stats_errors_total", "counter",
             "Reads of the job counts that failed (the store's errors).");
  out.sample("gpool_job_stats_errors_total", {},
             double(stats_errors_.load(std::memory_order_relaxed)));
}

void MetricsExporter::writeOwn(PromWriter& out) const {
  std::vector<api::Node> nodes = registry_.nodes();
  std::map<std::string, int> node_states;
  std::map<std::string, int> gpu_health;
  for (const api::Node& n : nodes) {
    ++node_states[std::string(api::nodeStateName(n.state))];
    for (const api::Gpu& g : n.gpus)
      ++gpu_health[std::string(api::gpuHealthName(g.health))];
  }
  out.family("gpool_nodes", "gauge", "Registered servers by registry state.");
  for (const auto& [state, n] : node_states)
    out.sample("gpool_nodes", {{"state", state}}, n);
  out.family("gpool_node_state", "gauge",
             "1 for each registered server, labelled with its registry state (DOWN: lost).");
  for (const api::Node& n : nodes) {
    out.sample("gpool_node_state", {{"Hostname", n.name}, {"state", api::nodeStateName(n.state)}},
               1);
  }
  out.family("gpool_node_info", "gauge",
             "1 for each server with GPUs, labelled with its driver and CUDA versions (pool-wide "
             "differences: count(count by (driver_version) (gpool_node_info)) > 1).");
  for (const api::Node& n : nodes) {
    if (n.gpus.empty()) continue;
    out.sample("gpool_node_info",
               {{"Hostname", n.name},
                {"driver_version", n.gpus[0].driver_version},
                {"cuda_version", n.gpus[0].cuda_version},
                {"simulated", n.gpus[0].simulated ? "true" : "false"}},
               1);
  }
  out.family("gpool_gpus", "gauge", "GPUs of registered servers by health.");
  for (const auto& [health, n] : gpu_health)
    out.sample("gpool_gpus", {{"health", health}}, n);
  out.family("gpool_gpu_health", "gauge",
             "1 for each GPU that is not healthy, labelled with its health and node.");
  for (const api::Node& n : nodes) {
    for (const api::Gpu& g : n.gpus) {
      if (g.health == api::GpuHealth::kHealthy) continue;
      std::string index = std::to_string(g.index);
      out.sample("gpool_gpu_health",
                 {{"Hostname", n.name},
                  {"gpu", index},
                  {"UUID", g.uuid},
                  {"health", api::gpuHealthName(g.health)}},
                 1);
    }
  }
  out.family("gpool_agents_connected", "gauge", "Agents connected to the controller now.");
  out.sample("gpool_agents_connected", {}, agent_count_ ? double(agent_count_()) : 0.0);

  out.family("gpool_scheduling_pass_duration_seconds", "histogram",
             "How long the scheduling loop's passes took.");
  pass_seconds_.write(out, "gpool_scheduling_pass_duration_seconds", {});

  out.family("gpool_api_requests_total", "counter",
             "API requests answered, by route, method and status class.");
  static const char* kClasses[] = {"", "1xx", "2xx", "3xx", "4xx", "5xx"};
  for (const auto& r : routes_) {
    for (int c = 1; c <= 5; ++c) {
      uint64_t n = r->by_class[c].load(std::memory_order_relaxed);
      if (n == 0) continue;
      out.sample("gpool_api_requests_total",
                 {{"method", r->method}, {"route", r->route}, {"code", kClasses[c]}}, double(n));
    }
  }
  out.family("gpool_api_request_duration_seconds", "histogram",
             "How long the API's handlers took, by route and method.");
  for (const auto& r : routes_) {
    if (r->seconds.count() == 0) continue;
    r->seconds.write(out, "gpool_api_request_duration_seconds",
                     {{"method", r->method}, {"route", r->route}});
  }
}

std::shared_ptr<const JobStats> MetricsExporter::jobStats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

std::string MetricsExporter::render() const {
  PromWriter out;
  writeGpus(out);
  writeJobs(out);
  writeOwn(out);
  for (const auto& w : writers_)
    w(out);
  return out.take();
}

namespace {
net::Response metricsPage(const MetricsExporter* metrics) {
  if (metrics == nullptr) {
    return net::Response::error(Status::unavailable("this controller exports no metrics"));
  }
  net::Response r;
  r.status = 200;
  r.body = metrics->render();
  r.setHeader("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  return r;
}
}  // namespace

namespace routes {

Status addMetricsRoutes(net::Router& router, const Context& ctx) {
  return router.add(
      net::Method::kGet, "/metrics",
      authed(ctx, {}, [ctx](const Caller& caller, const net::Request&) -> Result<net::Response> {
        bool allowed = caller.role == Role::kAdmin ||
                       std::find(ctx.metrics_users.begin(), ctx.metrics_users.end(), caller.user) !=
                           ctx.metrics_users.end();
        if (!allowed) {
          return Status::permissionDenied(
              "the metrics name every user's jobs: admins and the users of "
              "controller.metrics_users may read them");
        }
        return metricsPage(ctx.metrics);
      }));
}

}  // namespace routes

Status addOpenMetricsRoute(net::Router& router, const MetricsExporter& metrics) {
  return router.add(
      net::Method::kGet, "/metrics",
      [&metrics](const net::Request& req) {
        if (!req.query.empty()) {
          return net::Response::error(
              Status::invalidArgument("query parameter '" + req.query.begin()->first +
                                      "' is not known here (this route takes none)"));
        }
        return metricsPage(&metrics);
      },
      net::RouteOptions{true});
}

}  // namespace gpool::controller
