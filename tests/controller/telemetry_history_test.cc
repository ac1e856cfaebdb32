// TelemetryHistory: latest readings, one-second and one-minute rings, their bounds, the
// finished minutes for the store, eviction, and attribution of GPUs to tasks.
#include "controller/telemetry_history.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace gpool::controller {
namespace {

// 2023-11-14T22:13:00Z: a whole minute, so that minute boundaries are easy to read.
const TimePoint kStart = fromUnixSeconds(1'700'000'000 - 1'700'000'000 % 60);

TimePoint at(int64_t seconds) {
  return kStart + std::chrono::seconds(seconds);
}

GpuReading reading(const std::string& uuid, uint32_t util, uint64_t mem_used,
                   std::vector<GpuProcessUse> processes = {}) {
  GpuReading r;
  r.uuid = uuid;
  r.utilization_pct = util;
  r.memory_used_mib = mem_used;
  r.memory_total_mib = 81920;
  r.temperature_c = 50;
  r.power_w = 200;
  r.processes = std::move(processes);
  return r;
}

using Tenants = std::map<std::string, std::vector<GpuTenant>>;

TEST(TelemetryHistoryTest, KeepsTheLatestReadingPerGpu) {
  TelemetryHistory h;
  EXPECT_FALSE(h.latest("GPU-a").has_value());
  h.ingest("n1", at(0), {reading("GPU-a", 10, 100), reading("GPU-b", 20, 200)}, {});
  h.ingest("n1", at(5), {reading("GPU-a", 30, 300)}, {});
  auto a = h.latest("GPU-a");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->utilization_pct, 30u);
  EXPECT_EQ(a->node, "n1");
  EXPECT_EQ(a->taken_at, at(5));
  EXPECT_EQ(h.latest("GPU-b")->memory_used_mib, 200u);
  EXPECT_EQ(h.latestAll().size(), 2u);
}

TEST(TelemetryHistoryTest, OnePointPerSecondAndMinuteAverages) {
  TelemetryHistory h;
  // Two samples within second 0: the latest wins; then one every 10 s for two minutes.
  h.ingest("n1", at(0), {reading("GPU-a", 99, 1)}, {});
  h.ingest("n1", at(0) + std::chrono::milliseconds(500), {reading("GPU-a", 0, 0)}, {});
  for (int s = 10; s < 120; s += 10)
    h.ingest("n1", at(s), {reading("GPU-a", s < 60 ? 50 : 100, s < 60 ? 1000 : 3000)}, {});
  auto fine = h.gpuHistory("GPU-a", HistoryResolution::kSecond, at(0));
  ASSERT_EQ(fine.size(), 12u);
  EXPECT_EQ(fine[0].utilization_pct, 0.0f);
  EXPECT_EQ(fine[1].at_s, fine[0].at_s + 10);

  // Minute 0 ended when the first sample of minute 1 arrived; minute 1 is still open.
  auto coarse = h.gpuHistory("GPU-a", HistoryResolution::kMinute, at(0));
  ASSERT_EQ(coarse.size(), 1u);
  // The average counts every sample, also both of second 0.
  EXPECT_EQ(coarse[0].samples, 7u);
  EXPECT_NEAR(coarse[0].utilization_pct, (99.0 + 50 * 5) / 7, 1e-3);
  EXPECT_EQ(int64_t{coarse[0].at_s}, toUnixMicros(at(0)) / 1'000'000);

  // takeFinishedMinutes closes minute 1 once it is over, and hands each minute out once.
  auto rows = h.takeFinishedMinutes(at(119)).gpus;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].gpu_uuid, "GPU-a");
  EXPECT_EQ(rows[0].time, at(0));
  EXPECT_FALSE(rows[0].job_id.has_value());
  rows = h.takeFinishedMinutes(at(120)).gpus;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].time, at(60));
  EXPECT_DOUBLE_EQ(rows[0].util_percent, 100);
  EXPECT_DOUBLE_EQ(rows[0].memory_used_mib, 3000);
  EXPECT_TRUE(h.takeFinishedMinutes(at(600)).gpus.empty());
  EXPECT_EQ(h.gpuHistory("GPU-a", HistoryResolution::kMinute, at(0)).size(), 2u);
  // `since` filters.
  EXPECT_EQ(h.gpuHistory("GPU-a", HistoryResolution::kMinute, at(60)).size(), 1u);
}

TEST(TelemetryHistoryTest, RingsAreBounded) {
  TelemetryHistoryOptions o;
  o.fine_capacity = 30;
  o.fine_span = std::chrono::seconds(20);
  o.coarse_capacity = 5;
  TelemetryHistory h(o);
  for (int s = 0; s < 20 * 60; ++s)
    h.ingest("n1", at(s), {reading("GPU-a", static_cast<uint32_t>(s % 100), 1)}, {});
  auto fine = h.gpuHistory("GPU-a", HistoryResolution::kSecond, at(0));
  // The span (20 s) limits before the capacity (30 points) does.
  ASSERT_EQ(fine.size(), 21u);
  EXPECT_EQ(int64_t{fine.back().at_s}, toUnixMicros(at(20 * 60 - 1)) / 1'000'000);
  auto coarse = h.gpuHistory("GPU-a", HistoryResolution::kMinute, at(0));
  ASSERT_EQ(coarse.size(), 5u);  // minutes 14..18; 19 is open
  EXPECT_EQ(coarse.front().at_s + 4 * 60, coarse.back().at_s);
  EXPECT_EQ(int64_t{coarse.back().at_s}, toUnixMicros(at(18 * 60)) / 1'000'000);
  EXPECT_EQ(coarse.back().samples, 60u);
}

TEST(TelemetryHistoryTest, LeastRecentlyUpdatedSeriesAreEvicted) {
  TelemetryHistoryOptions o;
  o.max_gpus = 2;
  o.max_tasks = 1;
  TelemetryHistory h(o);
  h.ingest("n1", at(0), {reading("GPU-a", 1, 1)}, {{"GPU-a", {GpuTenant{7, 0}}}});
  h.ingest("n1", at(1), {reading("GPU-b", 1, 1)}, {{"GPU-b", {GpuTenant{8, 0}}}});
  h.ingest("n1", at(2), {reading("GPU-a", 1, 1)}, {});
  h.ingest("n1", at(3), {reading("GPU-c", 1, 1)}, {});
  EXPECT_EQ(h.gpuSeries(), 2u);
  EXPECT_TRUE(h.latest("GPU-a").has_value());
  EXPECT_FALSE(h.latest("GPU-b").has_value());
  EXPECT_TRUE(h.latest("GPU-c").has_value());
  EXPECT_EQ(h.taskSeries(), 1u);
  EXPECT_TRUE(h.jobHistory(7, HistoryResolution::kSecond, at(0)).empty());
  EXPECT_EQ(h.jobHistory(8, HistoryResolution::kSecond, at(0)).size(), 1u);
}

TEST(TelemetryHistoryTest, AttributesWholeGpusAndSharedSlicesToTasks) {
  TelemetryHistory h;
  // GPU-a: job 1 alone (whole GPU). GPU-b: jobs 2 and 3 share it (0.25 and 0.5); job 2's
  // process is tagged by the agent, job 3's is matched by its reported pid. GPU-c: job 1's
  // second GPU.
  Tenants tenants{
      {"GPU-a", {GpuTenant{1, 0, 1000, true, 0}}},
      {"GPU-b", {GpuTenant{2, 0, 250, false, 0}, GpuTenant{3, 0, 500, false, 4242}}},
      {"GPU-c", {GpuTenant{1, 0, 1000, true, 0}}},
  };
  std::vector<GpuProcessUse> procs{{100, 2000, 2, 0},
                                   {4242, 5000, std::nullopt, std::nullopt},
                                   {999, 700, std::nullopt, std::nullopt}};
  GpuReading c = reading("GPU-c", 60, 6000);
  c.temperature_c = 70;
  h.ingest("n1", at(0),
           {reading("GPU-a", 80, 10000), reading("GPU-b", 40, 7700, procs), std::move(c)}, tenants);

  auto job1 = h.jobHistory(1, HistoryResolution::kSecond, at(0));
  ASSERT_EQ(job1.size(), 1u);
  EXPECT_EQ(job1[0].node, "n1");
  EXPECT_EQ(job1[0].gpus, (std::vector<std::string>{"GPU-a", "GPU-c"}));
  ASSERT_EQ(job1[0].points.size(), 1u);
  EXPECT_FLOAT_EQ(job1[0].points[0].utilization_pct, 70);     // mean of 80 and 60
  EXPECT_FLOAT_EQ(job1[0].points[0].memory_used_mib, 16000);  // sum
  EXPECT_FLOAT_EQ(job1[0].points[0].temperature_c, 70);       // max
  EXPECT_FLOAT_EQ(job1[0].points[0].power_w, 400);            // sum

  auto job2 = h.jobHistory(2, HistoryResolution::kSecond, at(0));
  ASSERT_EQ(job2.size(), 1u);
  EXPECT_FLOAT_EQ(job2[0].points[0].memory_used_mib, 2000);  // its own process only
  EXPECT_FLOAT_EQ(job2[0].points[0].power_w, 50);            // 200 W x 0.25
  EXPECT_FLOAT_EQ(job2[0].points[0].utilization_pct, 40);    // the GPU's
  auto job3 = h.jobHistory(3, HistoryResolution::kSecond, at(0));
  ASSERT_EQ(job3.size(), 1u);
  EXPECT_FLOAT_EQ(job3[0].points[0].memory_used_mib, 5000);

  // The stored minute names the job only where one job held the GPU the whole minute.
  h.ingest("n1", at(30), {reading("GPU-a", 80, 10000)}, {{"GPU-a", {GpuTenant{1, 0}}}});
  FinishedMinutes minutes = h.takeFinishedMinutes(at(60));
  std::map<std::string, store::TelemetrySample> by_gpu;
  for (const auto& r : minutes.gpus)
    by_gpu[r.gpu_uuid] = r;
  ASSERT_EQ(by_gpu.size(), 3u);
  EXPECT_EQ(by_gpu["GPU-a"].job_id, std::optional<int64_t>(1));
  EXPECT_FALSE(by_gpu["GPU-b"].job_id.has_value());
  EXPECT_EQ(by_gpu["GPU-c"].job_id, std::optional<int64_t>(1));

  // Every task's minute is handed out too, the shared GPU's tenants with their own share: what
  // the store keeps of jobs on shared GPUs.
  std::map<int64_t, store::TaskTelemetrySample> by_job;
  for (const auto& r : minutes.tasks)
    by_job[r.job_id] = r;
  ASSERT_EQ(by_job.size(), 3u);
  EXPECT_EQ(by_job[1].node, "n1");
  EXPECT_EQ(by_job[1].time, at(0));
  EXPECT_DOUBLE_EQ(by_job[1].util_percent, 75);        // (70 + 80) / 2
  EXPECT_DOUBLE_EQ(by_job[1].memory_used_mib, 13000);  // (16000 + 10000) / 2
  EXPECT_DOUBLE_EQ(by_job[2].memory_used_mib, 2000);
  EXPECT_DOUBLE_EQ(by_job[2].power_w, 50);
  EXPECT_DOUBLE_EQ(by_job[3].memory_used_mib, 5000);
  EXPECT_TRUE(h.takeFinishedMinutes(at(600)).tasks.empty());
}

TEST(TelemetryHistoryTest, AMinuteWithAChangeOfTenantNamesNoJob) {
  TelemetryHistory h;
  h.ingest("n1", at(0), {reading("GPU-a", 80, 1)}, {{"GPU-a", {GpuTenant{1, 0}}}});
  h.ingest("n1", at(30), {reading("GPU-a", 80, 1)}, {{"GPU-a", {GpuTenant{2, 0}}}});
  auto rows = h.takeFinishedMinutes(at(60)).gpus;
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].job_id.has_value());
}

TEST(BoundedRingTest, WrapsAroundKeepingTheNewest) {
  BoundedRing<int> ring(3);
  for (int i = 1; i <= 5; ++i)
    ring.push(i);
  std::vector<int> seen;
  ring.forEach([&](int v) { seen.push_back(v); });
  EXPECT_EQ(seen, (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(ring.back(), 5);
  EXPECT_EQ(ring.size(), 3u);
}

}  // namespace
}  // namespace gpool::controller
