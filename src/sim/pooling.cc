#include "sim/pooling.h"

#include <cstdio>
#include <string>

#include "sim/dynamic_report.h"

namespace gpool::sim {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// Whether a replay keeps the target delays (within one scheduling interval: passes run at most
// once per interval, so delays closer than that are the same) and finished every job.
bool keeps(const DynamicResult& r, double p50, double p95, int64_t interval_s) {
  const double slack = static_cast<double>(interval_s);
  return r.unfinished == 0 && r.queue_p50_s <= p50 + slack && r.queue_p95_s <= p95 + slack;
}

uint32_t smallestKeeping(const PoolingResult& res, bool exclusive, int64_t interval_s) {
  uint32_t smallest = 0;
  for (auto it = res.points.rbegin(); it != res.points.rend(); ++it) {
    if (it->exclusive != exclusive) continue;
    if (!keeps(it->result, res.target_p50_s, res.target_p95_s, interval_s)) break;
    smallest = it->servers;
  }
  return smallest;
}

}  // namespace

const PoolingPoint* PoolingResult::find(bool exclusive, uint32_t servers) const {
  for (const PoolingPoint& p : points) {
    if (p.exclusive == exclusive && p.servers == servers) return &p;
  }
  return nullptr;
}

Result<PoolingResult> runPooling(const std::vector<DynJob>& jobs, const PoolingOptions& opt,
                                 const std::string& workload_name) {
  if (opt.min_servers == 0 || opt.max_servers < opt.min_servers || opt.max_servers > 4096) {
    return Status::invalidArgument("pool sizes " + std::to_string(opt.min_servers) + ".." +
                                   std::to_string(opt.max_servers) +
                                   ": expected 1 <= min <= max <= 4096 servers");
  }
  const uint32_t reference = opt.reference_servers == 0 ? opt.max_servers : opt.reference_servers;
  if (reference < opt.min_servers || reference > opt.max_servers) {
    return Status::invalidArgument(
        "reference pool of " + std::to_string(reference) + " servers is outside the range " +
        std::to_string(opt.min_servers) + ".." + std::to_string(opt.max_servers));
  }
  auto one = buildDynamicCluster("1x" + opt.server);
  if (!one.ok()) return one.status().withContext("--server " + opt.server);

  PoolingResult res;
  res.workload = workload_name;
  res.server = opt.server;
  res.gpus_per_server = static_cast<uint32_t>(one->gpuCount());
  res.reference_servers = reference;
  const size_t total = 2 * static_cast<size_t>(opt.max_servers - opt.min_servers + 1);
  size_t done = 0;
  for (bool exclusive : {true, false}) {
    for (uint32_t n = opt.min_servers; n <= opt.max_servers; ++n) {
      GPOOL_ASSIGN_OR_RETURN(sched::ClusterState cluster,
                             buildDynamicCluster(std::to_string(n) + "x" + opt.server));
      DynamicOptions d;
      d.exclusive = exclusive;
      d.order = exclusive ? opt.exclusive_order : opt.pooled_order;
      d.interval_s = opt.interval_s;
      d.placement = opt.placement;
      d.seed = opt.seed;
      GPOOL_ASSIGN_OR_RETURN(DynamicResult r, runDynamic(jobs, cluster, d, workload_name));
      PoolingPoint p;
      p.exclusive = exclusive;
      p.servers = n;
      p.gpus = cluster.gpuCount();
      p.result = std::move(r);
      res.points.push_back(std::move(p));
      if (opt.progress) opt.progress(++done, total);
    }
  }
  const PoolingPoint* ref = res.find(true, reference);
  res.target_p50_s = ref->result.queue_p50_s;
  res.target_p95_s = ref->result.queue_p95_s;
  res.smallest_exclusive = smallestKeeping(res, true, opt.interval_s);
  res.smallest_pooled = smallestKeeping(res, false, opt.interval_s);
  return res;
}

std::string formatPoolingTable(const PoolingResult& r) {
  std::string out = "workload " + r.workload + "; servers of " + r.server + " (" +
                    std::to_string(r.gpus_per_server) + " GPUs each)\n";
  out += padToWidth("way", 26, false) + padToWidth("servers", 8) + padToWidth("GPUs", 6) +
         padToWidth("p50 wait", 10) + padToWidth("p95 wait", 10) + padToWidth("alloc%", 8) +
         padToWidth("used%", 7) + padToWidth("done", 12) + "\n";
  for (const PoolingPoint& p : r.points) {
    std::string way =
        p.exclusive ? "exclusive GPUs, " + p.result.policy : "gpool slices, " + p.result.policy;
    out +=
        padToWidth(way, 26, false) + padToWidth(std::to_string(p.servers), 8) +
        padToWidth(std::to_string(p.gpus), 6) + padToWidth(humanSeconds(p.result.queue_p50_s), 10) +
        padToWidth(humanSeconds(p.result.queue_p95_s), 10) +
        padToWidth(fixed(p.result.alloc_pct, 1), 8) + padToWidth(fixed(p.result.used_pct, 1), 7) +
        padToWidth(std::to_string(p.result.finished) + "/" + std::to_string(p.result.jobs), 12) +
        (p.exclusive && p.servers == r.reference_servers ? "  <- reference" : "") + "\n";
  }
  auto pool = [&](uint32_t servers) {
    return servers == 0 ? std::string("none in the range")
                        : std::to_string(servers) + (servers == 1 ? " server (" : " servers (") +
                              std::to_string(servers * r.gpus_per_server) + " GPUs)";
  };
  out += "target: the exclusive way's wait on " + std::to_string(r.reference_servers) +
         " servers, p50 " + humanSeconds(r.target_p50_s) + " and p95 " +
         humanSeconds(r.target_p95_s) + "\n";
  out += "smallest pool keeping it: exclusive GPUs " + pool(r.smallest_exclusive) +
         ", gpool slices " + pool(r.smallest_pooled);
  if (r.smallest_exclusive > 0 && r.smallest_pooled > 0) {
    double saved = 100.0 * (1.0 - static_cast<double>(r.smallest_pooled) /
                                      static_cast<double>(r.smallest_exclusive));
    out += saved >= 0 ? ": " + fixed(saved, 0) + "% fewer GPUs"
                      : ": " + fixed(-saved, 0) + "% more GPUs";
  }
  if (!r.points.empty() && r.points.front().result.skipped > 0) {
    out += "\n" + std::to_string(r.points.front().result.skipped) +
           " jobs larger than one server's CPU, RAM or GPUs never run and are left out";
  }
  out +=
      "\nalloc% = GPU compute held, used% = compute the jobs use (what they ask for), both "
      "time-averaged over the arrival window\n";
  return out;
}

std::string poolingJsonLines(const PoolingResult& r) {
  std::string out;
  for (const PoolingPoint& p : r.points) {
    out += "{\"way\":\"" + std::string(p.exclusive ? "exclusive" : "pooled") +
           "\",\"servers\":" + std::to_string(p.servers) + ",\"gpus\":" + std::to_string(p.gpus) +
           ",\"result\":" + dynamicJsonLine(p.result) + "}\n";
  }
  out += "{\"summary\":{\"workload\":" + jsonString(r.workload) +
         ",\"server\":" + jsonString(r.server) +
         ",\"reference_servers\":" + std::to_string(r.reference_servers) +
         ",\"target_p50_s\":" + fixed(r.target_p50_s, 1) +
         ",\"target_p95_s\":" + fixed(r.target_p95_s, 1) +
         ",\"smallest_exclusive_servers\":" + std::to_string(r.smallest_exclusive) +
         ",\"smallest_pooled_servers\":" + std::to_string(r.smallest_pooled) +
         ",\"gpus_per_server\":" + std::to_string(r.gpus_per_server) + "}}\n";
  return out;
}

std::string poolingShareSvg(const PoolingResult& r, uint32_t servers) {
  if (servers == 0) servers = r.reference_servers;
  const PoolingPoint* ex = r.find(true, servers);
  const PoolingPoint* sl = r.find(false, servers);
  if (ex == nullptr || sl == nullptr) return "";
  std::vector<ChartSeries> series;
  auto add = [&](const PoolingPoint& p, const std::string& label, bool used) {
    ChartSeries s;
    s.label = label + " " + fixed(used ? p.result.used_pct : p.result.alloc_pct, 0) + "%";
    for (const TimelinePoint& t : p.result.timeline) {
      s.points.emplace_back(static_cast<double>(t.t) / 86400.0, used ? t.used_pct : t.alloc_pct);
    }
    series.push_back(std::move(s));
  };
  add(*ex, "exclusive: held", false);
  add(*ex, "exclusive: used", true);
  add(*sl, "gpool: held", false);
  add(*sl, "gpool: used", true);
  return lineChartSvg("GPU share over time, " + r.workload + " on " + std::to_string(servers) +
                          " x " + r.server + " (legend: mean over arrivals)",
                      "simulated time (days)", "share of the pool's GPU compute (%)", series,
                      false);
}

std::string poolingDelaySvg(const PoolingResult& r) {
  std::vector<ChartSeries> series;
  for (bool exclusive : {true, false}) {
    ChartSeries p50, p95;
    p50.label = std::string(exclusive ? "exclusive" : "gpool") + " p50";
    p95.label = std::string(exclusive ? "exclusive" : "gpool") + " p95";
    for (const PoolingPoint& p : r.points) {
      if (p.exclusive != exclusive) continue;
      // A pool that leaves jobs queued for ever has no finite delay: left out of the lines.
      if (p.result.unfinished > 0) continue;
      p50.points.emplace_back(p.servers, p.result.queue_p50_s / 3600.0);
      p95.points.emplace_back(p.servers, p.result.queue_p95_s / 3600.0);
    }
    series.push_back(std::move(p50));
    series.push_back(std::move(p95));
  }
  ChartSeries target;
  target.label = "target p95";
  if (!r.points.empty()) {
    target.points.emplace_back(r.points.front().servers, r.target_p95_s / 3600.0);
    target.points.emplace_back(r.points.back().servers, r.target_p95_s / 3600.0);
  }
  series.push_back(std::move(target));
  return lineChartSvg("Queueing delay vs pool size, " + r.workload + " (" + r.server + " servers)",
                      "servers in the pool", "queueing delay (hours)", series, false);
}

}  // namespace gpool::sim
