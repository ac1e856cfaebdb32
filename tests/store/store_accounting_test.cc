#include <gtest/gtest.h>

#include "store/store_test_fixture.h"

namespace gpool::store::testing {
namespace {

// An hour boundary, so that 5-minute and hourly buckets start at known offsets.
const TimePoint kBase = fromUnixSeconds(1'699'999'200);

TimePoint minutesAfter(int64_t m) {
  return kBase + std::chrono::minutes(m);
}

using AccountingTest = StoreTest;

int64_t runJob(Store& store, const std::string& user, const std::string& group, uint32_t gpus,
               TimePoint start, TimePoint end) {
  NewJob j;
  j.user = user;
  j.group = group;
  j.gpu_thousandths = gpus;
  j.spec_json = "{}";
  auto ids = store.submitJobs({j}, start);
  EXPECT_TRUE(ids.ok());
  int64_t id = ids->at(0);
  auto epoch = store.recordPlacement(id, "{}", start, "placed");
  EXPECT_TRUE(epoch.ok());
  EXPECT_TRUE(store.recordStart(id, *epoch, start, start).isOk());
  EXPECT_TRUE(store.recordEnd(id, api::JobState::kCompleted, 0, end, "done").isOk());
  return id;
}

TEST_P(AccountingTest, UsageReportCountsSlicesAndClipsToThePeriod) {
  runJob(store(), "u1", "g1", 1000, minutesAfter(0), minutesAfter(120));
  runJob(store(), "u2", "g1", 500, minutesAfter(60), minutesAfter(180));
  runJob(store(), "u2", "g2", 250, minutesAfter(0), minutesAfter(240));
  // A job that never ran adds nothing.
  NewJob pending;
  pending.user = "u3";
  pending.group = "g2";
  pending.gpu_thousandths = 1000;
  ASSERT_TRUE(store().submitJobs({pending}, minutesAfter(0)).ok());

  auto by_user = store().usageReport(UsageGrouping::kUser, minutesAfter(60), minutesAfter(120));
  ASSERT_TRUE(by_user.ok()) << by_user.status().toString();
  ASSERT_EQ(by_user->size(), 2u);
  EXPECT_EQ(by_user->at(0).key, "u1");
  EXPECT_NEAR(by_user->at(0).gpu_hours, 1.0, 1e-9);
  EXPECT_EQ(by_user->at(0).jobs, 1);
  EXPECT_EQ(by_user->at(1).key, "u2");
  EXPECT_NEAR(by_user->at(1).gpu_hours, 0.5 + 0.25, 1e-9);
  EXPECT_EQ(by_user->at(1).jobs, 2);

  auto by_group = store().usageReport(UsageGrouping::kGroup, minutesAfter(0), minutesAfter(600));
  ASSERT_TRUE(by_group.ok());
  ASSERT_EQ(by_group->size(), 2u);
  EXPECT_NEAR(by_group->at(0).gpu_hours, 2.0 + 1.0, 1e-9);  // g1
  EXPECT_NEAR(by_group->at(1).gpu_hours, 1.0, 1e-9);        // g2: 0.25 x 4 h

  auto empty = store().usageReport(UsageGrouping::kUser, minutesAfter(300), minutesAfter(400));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(
      store().usageReport(UsageGrouping::kUser, minutesAfter(1), minutesAfter(1)).status().code(),
      StatusCode::kInvalidArgument);
}

// Per-task history (jobs on shared GPUs included): two tasks of job 5 for two hours, one
// sample a minute; downsampled and bounded like the per-GPU history, in the same prune.
TEST_P(AccountingTest, TaskTelemetryIsDownsampledAndBoundedPerTask) {
  std::vector<TaskTelemetrySample> samples;
  for (int i = 0; i < 120; ++i) {
    for (uint32_t task : {0u, 1u}) {
      samples.push_back(TaskTelemetrySample{5, task, task == 0 ? "n1" : "n2", minutesAfter(i),
                                            static_cast<double>(i), 1000.0 * (task + 1), 50,
                                            task == 0 ? 100.0 : 25.0});
    }
  }
  samples.push_back(TaskTelemetrySample{6, 0, "n1", minutesAfter(0), 10, 1, 40, 50});
  ASSERT_TRUE(store().recordTaskTelemetry(samples).isOk());
  // Recording a minute again replaces it (a controller that stored it before a crash).
  ASSERT_TRUE(
      store()
          .recordTaskTelemetry({TaskTelemetrySample{6, 0, "n1", minutesAfter(0), 20, 1, 40, 50}})
          .isOk());

  auto raw = store().taskTelemetry(5, TelemetryResolution::kRaw, kBase, minutesAfter(1000));
  ASSERT_TRUE(raw.ok()) << raw.status().toString();
  ASSERT_EQ(raw->size(), 240u);
  EXPECT_EQ(raw->front().task, 0u);  // ordered by task, then time
  EXPECT_EQ(raw->at(120).task, 1u);
  EXPECT_EQ(raw->at(120).node, "n2");
  EXPECT_EQ(raw->at(121).time, minutesAfter(1));
  auto six = store().taskTelemetry(6, TelemetryResolution::kRaw, kBase, minutesAfter(1000));
  ASSERT_TRUE(six.ok());
  ASSERT_EQ(six->size(), 1u);
  EXPECT_DOUBLE_EQ(six->at(0).util_percent, 20);

  TelemetryRetention retention;           // raw 1 h, 5-minute 24 h, hourly 90 days
  for (int pass = 0; pass < 2; ++pass) {  // the second pass must change nothing
    ASSERT_TRUE(store().pruneTelemetry(minutesAfter(120), retention).isOk());
    raw = store().taskTelemetry(5, TelemetryResolution::kRaw, kBase, minutesAfter(1000));
    ASSERT_TRUE(raw.ok());
    EXPECT_EQ(raw->size(), 120u);  // the last hour of both tasks
    auto five =
        store().taskTelemetry(5, TelemetryResolution::kFiveMinutes, kBase, minutesAfter(1000));
    ASSERT_TRUE(five.ok());
    ASSERT_EQ(five->size(), 24u);
    for (int k = 0; k < 12; ++k) {
      EXPECT_EQ(five->at(k).task, 0u);
      EXPECT_EQ(five->at(k).time, minutesAfter(5 * k));
      EXPECT_DOUBLE_EQ(five->at(k).util_percent, 5.0 * k + 2);
      EXPECT_DOUBLE_EQ(five->at(k).power_w, 100);
      EXPECT_EQ(five->at(12 + k).task, 1u);
      EXPECT_EQ(five->at(12 + k).node, "n2");
      EXPECT_DOUBLE_EQ(five->at(12 + k).memory_used_mib, 2000);
      EXPECT_DOUBLE_EQ(five->at(12 + k).power_w, 25);
    }
  }

  // A day and more later everything is hourly; after 90 days it is gone.
  ASSERT_TRUE(store().pruneTelemetry(minutesAfter(30 * 60), retention).isOk());
  auto hourly = store().taskTelemetry(5, TelemetryResolution::kHourly, kBase, minutesAfter(100000));
  ASSERT_TRUE(hourly.ok());
  ASSERT_EQ(hourly->size(), 4u);  // two hours of two tasks
  EXPECT_DOUBLE_EQ(hourly->at(0).util_percent, 29.5);
  EXPECT_DOUBLE_EQ(hourly->at(1).util_percent, 89.5);
  EXPECT_TRUE(store()
                  .taskTelemetry(5, TelemetryResolution::kFiveMinutes, kBase, minutesAfter(100000))
                  ->empty());
  ASSERT_TRUE(store().pruneTelemetry(minutesAfter(91 * 24 * 60), retention).isOk());
  EXPECT_TRUE(store()
                  .taskTelemetry(5, TelemetryResolution::kHourly, kBase, minutesAfter(1000000))
                  ->empty());
}

TEST_P(AccountingTest, TelemetryIsDownsampledAndBounded) {
  std::vector<TelemetrySample> samples;
  for (int i = 0; i < 120; ++i) {
    samples.push_back(TelemetrySample{"GPU-0", i < 60 ? 7 : 8, minutesAfter(i),
                                      static_cast<double>(i), 2.0 * i, 50, 100});
  }
  // Two jobs share GPU-1's first bucket, so its average names no job.
  samples.push_back(TelemetrySample{"GPU-1", 1, minutesAfter(0), 10, 1, 40, 50});
  samples.push_back(TelemetrySample{"GPU-1", 2, minutesAfter(1), 30, 1, 40, 50});
  ASSERT_TRUE(store().recordTelemetry(samples).isOk());

  auto raw = store().gpuTelemetry("GPU-0", TelemetryResolution::kRaw, kBase, minutesAfter(1000));
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(raw->size(), 120u);

  TelemetryRetention retention;  // raw 1 h, 5-minute 24 h, hourly 90 days
  const TimePoint now = minutesAfter(120);
  for (int pass = 0; pass < 2; ++pass) {  // the second pass must change nothing
    ASSERT_TRUE(store().pruneTelemetry(now, retention).isOk());
    raw = store().gpuTelemetry("GPU-0", TelemetryResolution::kRaw, kBase, minutesAfter(1000));
    ASSERT_TRUE(raw.ok());
    EXPECT_EQ(raw->size(), 60u);
    EXPECT_EQ(raw->front().time, minutesAfter(60));
    auto five =
        store().gpuTelemetry("GPU-0", TelemetryResolution::kFiveMinutes, kBase, minutesAfter(1000));
    ASSERT_TRUE(five.ok());
    ASSERT_EQ(five->size(), 12u);
    for (int k = 0; k < 12; ++k) {
      EXPECT_EQ(five->at(k).time, minutesAfter(5 * k));
      EXPECT_DOUBLE_EQ(five->at(k).util_percent, 5.0 * k + 2);
      EXPECT_DOUBLE_EQ(five->at(k).memory_used_mib, 2.0 * (5.0 * k + 2));
      EXPECT_EQ(five->at(k).job_id, 7);
    }
  }
  auto mixed =
      store().gpuTelemetry("GPU-1", TelemetryResolution::kFiveMinutes, kBase, minutesAfter(1000));
  ASSERT_TRUE(mixed.ok());
  ASSERT_EQ(mixed->size(), 1u);
  EXPECT_FALSE(mixed->at(0).job_id.has_value());
  EXPECT_DOUBLE_EQ(mixed->at(0).util_percent, 20);

  auto job8 = store().jobTelemetry(8, TelemetryResolution::kRaw, kBase, minutesAfter(1000));
  ASSERT_TRUE(job8.ok());
  EXPECT_EQ(job8->size(), 60u);
  auto job7 = store().jobTelemetry(7, TelemetryResolution::kFiveMinutes, kBase, minutesAfter(1000));
  ASSERT_TRUE(job7.ok());
  EXPECT_EQ(job7->size(), 12u);
  // Job 1 shared its only bucket with job 2, so it has no averages of its own.
  EXPECT_TRUE(store()
                  .jobTelemetry(1, TelemetryResolution::kFiveMinutes, kBase, minutesAfter(1000))
                  ->empty());

  // A day and more later everything is hourly: hour 0 held job 7 (util 0..59), hour 1 job 8.
  ASSERT_TRUE(store().pruneTelemetry(minutesAfter(30 * 60), retention).isOk());
  EXPECT_TRUE(store()
                  .gpuTelemetry("GPU-0", TelemetryResolution::kRaw, kBase, minutesAfter(100000))
                  ->empty());
  EXPECT_TRUE(
      store()
          .gpuTelemetry("GPU-0", TelemetryResolution::kFiveMinutes, kBase, minutesAfter(100000))
          ->empty());
  auto hourly =
      store().gpuTelemetry("GPU-0", TelemetryResolution::kHourly, kBase, minutesAfter(100000));
  ASSERT_TRUE(hourly.ok());
  ASSERT_EQ(hourly->size(), 2u);
  EXPECT_DOUBLE_EQ(hourly->at(0).util_percent, 29.5);
  EXPECT_EQ(hourly->at(0).job_id, 7);
  EXPECT_DOUBLE_EQ(hourly->at(1).util_percent, 89.5);
  EXPECT_EQ(hourly->at(1).job_id, 8);

  // After 90 days the hourly history is gone too.
  ASSERT_TRUE(store().pruneTelemetry(minutesAfter(91 * 24 * 60), retention).isOk());
  EXPECT_TRUE(store()
                  .gpuTelemetry("GPU-0", TelemetryResolution::kHourly, kBase, minutesAfter(1000000))
                  ->empty());
}

INSTANTIATE_TEST_SUITE_P(Backends, AccountingTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), backendName);

}  // namespace
}  // namespace gpool::store::testing
