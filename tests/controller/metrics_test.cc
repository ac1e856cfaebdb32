// GET /metrics (metrics.h): the Prometheus text page, its DCGM names and labels, gpool's own
// metrics, who may read it, and the API's request counters.
#include <gtest/gtest.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "controller/api_fixture.h"
#include "controller/metrics.h"
#include "controller/telemetry_history.h"

namespace gpool::controller::testing {
namespace {

bool hasLine(const std::string& page, const std::string& line) {
  return page.find("\n" + line + "\n") != std::string::npos || page.rfind(line + "\n", 0) == 0;
}

TEST(PromWriterTest, EscapesLabelValuesAndWritesNumbersAsPrometheusReadsThem) {
  PromWriter w;
  w.family("m", "gauge", "help text");
  w.sample("m", {{"a", "x\"y\\z\nw"}, {"b", ""}}, 1.5);
  w.sample("m", {}, 42);
  w.sample("m", {}, std::numeric_limits<double>::infinity());
  EXPECT_EQ(
      w.text(),
      "# HELP m help text\n# TYPE m gauge\nm{a=\"x\\\"y\\\\z\\nw\",b=\"\"} 1.5\nm 42\nm +Inf\n");
}

TEST(PromWriterTest, HistogramBucketsAreCumulative) {
  Histogram h({0.1, 1});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(5);
  PromWriter w;
  h.write(w, "d", {{"r", "x"}});
  EXPECT_EQ(w.text(),
            "d_bucket{r=\"x\",le=\"0.1\"} 1\nd_bucket{r=\"x\",le=\"1\"} 2\n"
            "d_bucket{r=\"x\",le=\"+Inf\"} 3\nd_sum{r=\"x\"} 5.55\nd_count{r=\"x\"} 3\n");
}

TEST_F(ApiTest, MetricsExportEveryGpuUnderDcgmNamesWithItsJobAndUser) {
  TelemetryHistory telemetry;
  metrics_->setTelemetry(&telemetry);
  GpuReading g0;
  g0.uuid = "GPU-gpu-01-0";
  g0.index = 0;
  g0.utilization_pct = 63;
  g0.memory_used_mib = 30000;
  g0.memory_total_mib = 81920;
  g0.temperature_c = 61;
  g0.power_w = 250.5;
  g0.ecc_corrected = 3;
  g0.ecc_uncorrected = 0;
  g0.xid_errors = {79};
  g0.processes = {{100, 20000, 7, 0}, {200, 10000, 8, 0}};
  GpuReading g1 = g0;
  g1.uuid = "GPU-gpu-01-1";
  g1.index = 1;
  g1.utilization_pct = 0;
  g1.xid_errors.clear();
  g1.processes.clear();
  GpuTenant a{7, 0, 250, false, 100, "alice", "ml", 20480};
  GpuTenant b{8, 0, 500, false, 200, "bob", "vision", 40960};
  telemetry.ingest("gpu-01", clock_.now(), {g0, g1}, {{"GPU-gpu-01-0", {a, b}}});
  clock_.advance(std::chrono::seconds(10));
  g0.xid_errors.clear();
  telemetry.ingest("gpu-01", clock_.now(), {g0, g1}, {{"GPU-gpu-01-0", {a, b}}});

  auto r = get("root", "/metrics");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("Content-Type").value_or(""), "text/plain; version=0.0.4; charset=utf-8");
  const std::string& page = r.body;
  const std::string held =
      "gpu=\"0\",UUID=\"GPU-gpu-01-0\",device=\"nvidia0\",modelName=\"A100\",Hostname=\"gpu-01\","
      "pci_bus_id=\"\",hpc_job=\"7,8\",user=\"alice,bob\",slice=\"shared\"";
  EXPECT_TRUE(hasLine(page, "DCGM_FI_DEV_GPU_UTIL{" + held + "} 63")) << page;
  EXPECT_TRUE(hasLine(page, "DCGM_FI_DEV_FB_USED{" + held + "} 30000"));
  EXPECT_TRUE(hasLine(page, "DCGM_FI_DEV_FB_FREE{" + held + "} 51920"));
  EXPECT_TRUE(hasLine(page, "DCGM_FI_DEV_POWER_USAGE{" + held + "} 250.5"));
  // The last XID stays (DCGM's meaning); 10 s at 250.5 W is 2,505 J.
  EXPECT_TRUE(hasLine(page, "DCGM_FI_DEV_XID_ERRORS{" + held + "} 79"));
  EXPECT_TRUE(hasLine(page, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" + held + "} 2505000"));
  EXPECT_TRUE(hasLine(page, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{" + held + "} 3"));
  const std::string idle =
      "gpu=\"1\",UUID=\"GPU-gpu-01-1\",device=\"nvidia1\",modelName=\"A100\",Hostname=\"gpu-01\","
      "pci_bus_id=\"\",hpc_job=\"\",user=\"\",slice=\"\"";
  EXPECT_TRUE(hasLine(page, "DCGM_FI_DEV_GPU_UTIL{" + idle + "} 0"));
  // Per slice: the memory of its own processes against its quota, its compute share.
  const std::string slice_a =
      "gpu=\"0\",UUID=\"GPU-gpu-01-0\",Hostname=\"gpu-01\",hpc_job=\"7\",task=\"0\","
      "user=\"alice\",group=\"ml\",slice=\"shared\"";
  EXPECT_TRUE(hasLine(page, "gpool_slice_memory_used_bytes{" + slice_a + "} 20971520000"));
  EXPECT_TRUE(hasLine(page, "gpool_slice_memory_quota_bytes{" + slice_a + "} 21474836480"));
  EXPECT_TRUE(hasLine(page, "gpool_slice_compute_share_ratio{" + slice_a + "} 0.25"));
  // Allocated vs used: 0.75 of GPU 0 held, 0.63 used; bob holds 0.5 of it.
  EXPECT_TRUE(hasLine(page, "gpool_gpus_allocated 0.75"));
  EXPECT_TRUE(hasLine(page, "gpool_gpus_used 0.63"));
  EXPECT_TRUE(hasLine(page, "gpool_user_gpus_allocated{user=\"bob\"} 0.5"));
  EXPECT_TRUE(hasLine(page, "gpool_group_gpus_used{group=\"ml\"} 0.1575"));
  EXPECT_TRUE(hasLine(page, "gpool_nodes{state=\"IDLE\"} 2"));
  EXPECT_TRUE(hasLine(page, "gpool_gpus{health=\"healthy\"} 6"));
  // Every sample line belongs to a family declared before it.
  std::set<std::string> families;
  size_t pos = 0;
  while (pos < page.size()) {
    size_t end = page.find('\n', pos);
    std::string line = page.substr(pos, end - pos);
    pos = end + 1;
    if (line.rfind("# TYPE ", 0) == 0) {
      families.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (!line.empty() && line[0] != '#') {
      std::string name = line.substr(0, line.find_first_of("{ "));
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (name.size() > strlen(suffix) && name.ends_with(suffix) &&
            families.count(name.substr(0, name.size() - strlen(suffix))))
          name = name.substr(0, name.size() - strlen(suffix));
      }
      EXPECT_EQ(families.count(name), 1u) << line;
    }
  }
}

// Per slice, what the interposer's region says (the agent reads it): compute used against the
// share, launches, and the time since the last launch, which grows while the task launches
// nothing. A whole GPU (no region) has none of the three.
TEST_F(ApiTest, MetricsExportASlicesComputeUsedAndTimeSinceItsLastLaunch) {
  TelemetryHistory telemetry;
  metrics_->setTelemetry(&telemetry);
  GpuReading g0;
  g0.uuid = "GPU-gpu-01-0";
  g0.index = 0;
  g0.utilization_pct = 30;
  g0.memory_total_mib = 81920;
  g0.slices = {SliceUse{7, 0, 240, 5000, clock_.now() - std::chrono::seconds(2)},
               SliceUse{8, 0, 0, 0, std::nullopt}};
  GpuReading g1 = g0;
  g1.uuid = "GPU-gpu-01-1";
  g1.index = 1;
  g1.slices.clear();
  GpuTenant a{7, 0, 250, false, 100, "alice", "ml", 20480};
  GpuTenant b{8, 0, 500, false, 200, "bob", "vision", 40960};
  GpuTenant whole{9, 0, 1000, true, 300, "carol", "ml", 0};
  telemetry.ingest("gpu-01", clock_.now(), {g0, g1},
                   {{"GPU-gpu-01-0", {a, b}}, {"GPU-gpu-01-1", {whole}}});
  const std::string slice_a =
      "gpu=\"0\",UUID=\"GPU-gpu-01-0\",Hostname=\"gpu-01\",hpc_job=\"7\",task=\"0\","
      "user=\"alice\",group=\"ml\",slice=\"shared\"";
  const std::string slice_b =
      "gpu=\"0\",UUID=\"GPU-gpu-01-0\",Hostname=\"gpu-01\",hpc_job=\"8\",task=\"0\","
      "user=\"bob\",group=\"vision\",slice=\"shared\"";
  auto r = get("root", "/metrics");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(hasLine(r.body, "gpool_slice_compute_used_ratio{" + slice_a + "} 0.24")) << r.body;
  EXPECT_TRUE(hasLine(r.body, "gpool_slice_compute_share_ratio{" + slice_a + "} 0.25"));
  EXPECT_TRUE(hasLine(r.body, "gpool_slice_kernel_launches_total{" + slice_a + "} 5000"));
  EXPECT_TRUE(hasLine(r.body, "gpool_slice_since_last_kernel_launch_seconds{" + slice_a + "} 2"));
  // Bob's task never launched: used 0, no time since.
  EXPECT_TRUE(hasLine(r.body, "gpool_slice_compute_used_ratio{" + slice_b + "} 0"));
  EXPECT_EQ(r.body.find("gpool_slice_since_last_kernel_launch_seconds{" + slice_b),
            std::string::npos);
  // Carol's whole GPU runs under no interposer: a share, no used ratio.
  size_t used_series = 0;
  for (size_t at = 0;
       (at = r.body.find("\ngpool_slice_compute_used_ratio{", at)) != std::string::npos; ++at) {
    ++used_series;
  }
  EXPECT_EQ(used_series, 2u) << r.body;
  EXPECT_NE(r.body.find("gpool_slice_compute_share_ratio{gpu=\"1\""), std::string::npos);
  // Quiet for 8 s, the agent's next sample reports the same count: the time since grows.
  clock_.advance(std::chrono::seconds(8));
  telemetry.ingest("gpu-01", clock_.now(), {g0, g1},
                   {{"GPU-gpu-01-0", {a, b}}, {"GPU-gpu-01-1", {whole}}});
  r = get("root", "/metrics");
  EXPECT_TRUE(hasLine(r.body, "gpool_slice_since_last_kernel_launch_seconds{" + slice_a + "} 10"))
      << r.body;
}

TEST_F(ApiTest, MetricsCountJobsByStateAndPendingReason) {
  int64_t running = submit("alice", "ml");
  place(running);
  submit("bob", "vision");
  submit("bob", "vision");
  clock_.advance(std::chrono::seconds(30));
  ASSERT_TRUE(metrics_->refreshJobStats().isOk());
  metrics_->observePass(std::chrono::milliseconds(30));
  auto r = get("root", "/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(hasLine(r.body, "gpool_jobs{state=\"PENDING\"} 2")) << r.body;
  EXPECT_TRUE(hasLine(r.body, "gpool_jobs{state=\"RUNNING\"} 1"));
  EXPECT_TRUE(hasLine(r.body, "gpool_jobs_pending{reason=\"submitted\"} 2"));
  EXPECT_TRUE(hasLine(r.body, "gpool_queue_wait_oldest_seconds{reason=\"submitted\"} 30"));
  EXPECT_TRUE(hasLine(r.body, "gpool_scheduling_pass_duration_seconds_bucket{le=\"0.05\"} 1"));
  EXPECT_TRUE(hasLine(r.body, "gpool_scheduling_pass_duration_seconds_count 1"));
}

TEST_F(ApiTest, MetricsAreForAdminsAndConfiguredUsersOnly) {
  EXPECT_EQ(get("root", "/metrics").status, 200);
  EXPECT_EQ(get("alice", "/metrics").status, 403);
  EXPECT_EQ(get("carol", "/metrics").status, 403);
  EXPECT_EQ(get("", "/metrics").status, 401);
  EXPECT_EQ(get("root", "/metrics?x=1").status, 400);
}

TEST_F(ApiTest, InstrumentedRouterCountsRequestsByRouteAndStatus) {
  Result<net::Router> counted = metrics_->instrument(router_);
  ASSERT_TRUE(counted.ok()) << counted.status().toString();
  EXPECT_EQ(counted->size(), router_.size());
  net::ServerOptions options;
  options.unix_socket_path = dir_.path() + "/counted.sock";
  net::Server server(options, std::move(*counted));
  ASSERT_TRUE(server.start().isOk());
  net::HttpClient client(net::ClientEndpoint::unixSocket(options.unix_socket_path),
                         std::chrono::seconds(10));
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(client.request(net::Method::kGet, "/v1/health").ok());
  ASSERT_TRUE(client.request(net::Method::kGet, "/v1/jobs/1", "", {{"x-test-user", "alice"}}).ok());
  server.stop();
  std::string page = metrics_->render();
  EXPECT_TRUE(
      hasLine(page, "gpool_api_requests_total{method=\"GET\",route=\"/v1/health\",code=\"2xx\"} 3"))
      << page;
  EXPECT_TRUE(hasLine(
      page, "gpool_api_requests_total{method=\"GET\",route=\"/v1/jobs/{id}\",code=\"4xx\"} 1"));
  EXPECT_TRUE(hasLine(
      page, "gpool_api_request_duration_seconds_count{method=\"GET\",route=\"/v1/health\"} 3"));
}

// The metric names an expression reads: DCGM_FI_* and gpool_* identifiers, a histogram's
// _bucket/_sum/_count folded into its family.
std::set<std::string> metricNames(const std::string& expr) {
  std::set<std::string> names;
  for (size_t i = 0; i < expr.size();) {
    bool start =
        (i == 0 || !(std::isalnum(static_cast<unsigned char>(expr[i - 1])) || expr[i - 1] == '_'));
    if (start && (expr.compare(i, 8, "DCGM_FI_") == 0 || expr.compare(i, 6, "gpool_") == 0)) {
      size_t end = i;
      while (end < expr.size() &&
             (std::isalnum(static_cast<unsigned char>(expr[end])) || expr[end] == '_'))
        ++end;
      std::string name = expr.substr(i, end - i);
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        if (name.ends_with(suffix) && name.find("_duration_seconds") != std::string::npos)
          name = name.substr(0, name.size() - strlen(suffix));
      }
      names.insert(name);
      i = end;
    } else {
      ++i;
    }
  }
  return names;
}

std::set<std::string> exportedFamilies(const std::string& page) {
  std::set<std::string> families;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("# TYPE ", 0) == 0) families.insert(line.substr(7, line.find(' ', 7) - 7));
  }
  return families;
}

std::string readSourceFile(const std::string& relative) {
  std::ifstream in(std::string(GPOOL_SOURCE_DIR) + "/" + relative);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(ApiTest, ShippedGrafanaDashboardIsValidAndReadsOnlyExportedMetrics) {
  std::set<std::string> exported = exportedFamilies(metrics_->render());
  ASSERT_TRUE(exported.count("DCGM_FI_DEV_GPU_UTIL"));
  std::string text = readSourceFile("deploy/grafana/gpool-dashboard.json");
  ASSERT_FALSE(text.empty());
  nlohmann::json dash = nlohmann::json::parse(text, nullptr, false);
  ASSERT_TRUE(dash.is_object()) << "deploy/grafana/gpool-dashboard.json is not valid JSON";
  ASSERT_TRUE(dash.contains("title") && dash["panels"].is_array());
  size_t targets = 0;
  std::set<int> ids;
  std::vector<std::string> exprs;
  for (const auto& panel : dash["panels"]) {
    ASSERT_TRUE(panel.contains("id") && panel.contains("type") && panel.contains("gridPos"));
    EXPECT_TRUE(ids.insert(panel["id"].get<int>()).second) << "duplicate panel id " << panel["id"];
    for (const auto& t : panel.value("targets", nlohmann::json::array()))
      exprs.push_back(t.value("expr", ""));
  }
  for (const auto& v : dash["templating"]["list"]) {
    if (v.contains("definition")) exprs.push_back(v["definition"].get<std::string>());
  }
  for (const std::string& expr : exprs) {
    std::set<std::string> names = metricNames(expr);
    EXPECT_FALSE(names.empty()) << "reads no gpool metric: " << expr;
    for (const std::string& name : names) {
      EXPECT_TRUE(exported.count(name)) << name << " (in " << expr << ") is not exported";
      ++targets;
    }
  }
  EXPECT_GE(targets, 20u);
  // The checker catches a name gpoold does not export (a test that cannot fail is a defect).
  EXPECT_FALSE(exported.count(*metricNames("rate(gpool_no_such_metric[5m])").begin()));
}

TEST_F(ApiTest, ShippedPrometheusRulesReadOnlyExportedMetrics) {
  std::set<std::string> exported = exportedFamilies(metrics_->render());
  std::istringstream lines(readSourceFile("deploy/prometheus/gpool-rules.yml"));
  size_t rules = 0;
  for (std::string line; std::getline(lines, line);) {
    size_t at = line.find("expr:");
    if (at == std::string::npos || line.find('#') < at) continue;
    std::string expr = line.substr(at + 5);
    ++rules;
    for (const std::string& name : metricNames(expr))
      EXPECT_TRUE(exported.count(name)) << name << " (in " << expr << ") is not exported";
  }
  EXPECT_GE(rules, 10u);
}

}  // namespace
}  // namespace gpool::controller::testing
