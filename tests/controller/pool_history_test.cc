// PoolHistory: what one sample counts (allocated against used, GPUs and memory, per user and
// group), one-minute, five-minute and hourly points, averages over absences, and the bounds.
#include "controller/pool_history.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace gpool::controller::pool_history_test {
namespace {

// A whole hour, so that minute and hour boundaries are easy to read.
const TimePoint kStart = fromUnixSeconds(1'700'000'000 - 1'700'000'000 % 3600);

TimePoint at(int64_t seconds) {
  return kStart + std::chrono::seconds(seconds);
}

GpuSnapshot gpu(const std::string& uuid, uint32_t util, uint64_t used_mib, TimePoint taken,
                std::vector<GpuTenant> tenants = {}, std::vector<double> tenant_memory = {}) {
  GpuSnapshot g;
  g.reading.uuid = uuid;
  g.reading.utilization_pct = util;
  g.reading.memory_used_mib = used_mib;
  g.reading.memory_total_mib = 80'000;
  g.reading.taken_at = taken;
  g.reading.simulated = true;
  g.tenants = std::move(tenants);
  g.tenant_memory_mib = std::move(tenant_memory);
  return g;
}

GpuTenant whole(int64_t job, const std::string& user, const std::string& group) {
  GpuTenant t;
  t.job_id = job;
  t.user = user;
  t.group = group;
  return t;
}

GpuTenant slice(int64_t job, const std::string& user, const std::string& group, uint32_t milli,
                uint64_t memory_mib) {
  GpuTenant t = whole(job, user, group);
  t.exclusive = false;
  t.compute_milli = milli;
  t.memory_mib = memory_mib;
  return t;
}

TEST(PoolHistoryTest, ASampleCountsAllocatedAgainstUsedPerUserAndGroup) {
  std::vector<GpuSnapshot> gpus = {
      // alice holds a whole GPU at 40 %, 30,000 MiB used.
      gpu("GPU-a", 40, 30'000, at(0), {whole(1, "alice", "ml")}, {30'000}),
      // bob (vision) and carol (ml) share one at 80 %: 0.25 and 0.5 of it, 10,000 and 20,000
      // MiB quotas, 4,000 and 6,000 MiB used.
      gpu("GPU-b", 80, 10'000, at(0),
          {slice(2, "bob", "vision", 250, 10'000), slice(3, "carol", "ml", 500, 20'000)},
          {4'000, 6'000}),
      // Idle and empty, 100 MiB used by nobody.
      gpu("GPU-c", 0, 100, at(0)),
      // A reading older than stale_after is left out entirely.
      gpu("GPU-old", 100, 80'000, at(-600), {whole(4, "dave", "ml")}, {80'000}),
  };
  PoolSample s = poolSampleOf(gpus, at(5), std::chrono::minutes(2));
  EXPECT_FLOAT_EQ(s.pool.gpus, 3);
  EXPECT_FLOAT_EQ(s.pool.gpus_allocated, 1 + 0.75f);
  EXPECT_FLOAT_EQ(s.pool.gpus_used, 0.4f + 0.8f);
  EXPECT_FLOAT_EQ(s.pool.memory_mib, 240'000);
  EXPECT_FLOAT_EQ(s.pool.memory_allocated_mib, 80'000 + 30'000);
  EXPECT_FLOAT_EQ(s.pool.memory_used_mib, 40'100);
  EXPECT_TRUE(s.simulated);

  ASSERT_EQ(s.users.size(), 3u);  // dave's reading is stale
  EXPECT_FLOAT_EQ(s.users["alice"].gpus_allocated, 1);
  EXPECT_FLOAT_EQ(s.users["alice"].gpus_used, 0.4f);
  EXPECT_FLOAT_EQ(s.users["alice"].memory_allocated_mib, 80'000);
  EXPECT_FLOAT_EQ(s.users["alice"].memory_used_mib, 30'000);
  EXPECT_FLOAT_EQ(s.users["bob"].gpus_allocated, 0.25f);
  EXPECT_FLOAT_EQ(s.users["bob"].gpus_used, 0.8f * 0.25f);
  EXPECT_FLOAT_EQ(s.users["bob"].memory_allocated_mib, 10'000);
  EXPECT_FLOAT_EQ(s.users["bob"].memory_used_mib, 4'000);
  EXPECT_FLOAT_EQ(s.groups["ml"].gpus_allocated, 1.5f);
  EXPECT_FLOAT_EQ(s.groups["ml"].gpus_used, 0.4f + 0.4f);
  EXPECT_FLOAT_EQ(s.groups["ml"].memory_used_mib, 36'000);
  EXPECT_FLOAT_EQ(s.groups["vision"].gpus_allocated, 0.25f);
  EXPECT_EQ(s.groups.count("dave"), 0u);
}

TEST(PoolHistoryTest, OversubscribedSlicesCountAtMostOneGpuAndItsMemory) {
  std::vector<GpuSnapshot> gpus = {
      gpu("GPU-a", 50, 1'000, at(0),
          {slice(1, "u", "g", 800, 60'000), slice(2, "u", "g", 800, 60'000)}, {500, 500})};
  PoolSample s = poolSampleOf(gpus, at(0), std::chrono::minutes(2));
  EXPECT_FLOAT_EQ(s.pool.gpus_allocated, 1);
  EXPECT_FLOAT_EQ(s.pool.memory_allocated_mib, 80'000);
}

PoolSample sampleWith(float allocated, float used, const std::string& user = "") {
  PoolSample s;
  s.pool.gpus = 8;
  s.pool.gpus_allocated = allocated;
  s.pool.gpus_used = used;
  s.pool.memory_mib = 8 * 80'000;
  if (!user.empty()) {
    s.users[user].gpus_allocated = allocated;
    s.users[user].gpus_used = used;
    s.groups["g-" + user].gpus_allocated = allocated;
  }
  return s;
}

TEST(PoolHistoryTest, MinutePointsAverageTheirSamplesAndTheMinuteInProgressIsLast) {
  TelemetryHistory telemetry;
  SimClock clock(kStart);
  PoolHistory h(telemetry, clock);
  // Minute 0: 2 then 4 GPUs allocated; minute 1: 6; minute 2 (in progress): 8.
  h.add(at(0), sampleWith(2, 1));
  h.add(at(30), sampleWith(4, 3));
  h.add(at(60), sampleWith(6, 5));
  h.add(at(120), sampleWith(8, 7));
  PoolHistoryAnswer a = h.query(PoolRange::kHour, at(130));
  EXPECT_EQ(a.resolution, "1m");
  ASSERT_EQ(a.pool.points.size(), 3u);
  EXPECT_EQ(a.pool.points[0].at_s, static_cast<uint32_t>(toUnixMicros(at(0)) / 1'000'000));
  EXPECT_FLOAT_EQ(a.pool.points[0].use.gpus_allocated, 3);
  EXPECT_FLOAT_EQ(a.pool.points[0].use.gpus_used, 2);
  EXPECT_EQ(a.pool.points[0].samples, 2u);
  EXPECT_FLOAT_EQ(a.pool.points[1].use.gpus_allocated, 6);
  EXPECT_FLOAT_EQ(a.pool.points[2].use.gpus_allocated, 8);
  EXPECT_FLOAT_EQ(a.pool.points[2].use.gpus, 8);
  // An hour later the first minutes are out of the hour's range.
  EXPECT_EQ(h.query(PoolRange::kHour, at(3600 + 90)).pool.points.size(), 1u);
}

TEST(PoolHistoryTest, AUserAbsentFromSomeSamplesAveragesWithZeros) {
  TelemetryHistory telemetry;
  SimClock clock(kStart);
  PoolHistory h(telemetry, clock);
  h.add(at(0), sampleWith(4, 2, "alice"));
  h.add(at(10), sampleWith(0, 0));  // alice's job ended
  h.add(at(20), sampleWith(0, 0));
  h.add(at(30), sampleWith(0, 0));
  PoolHistoryAnswer a = h.query(PoolRange::kHour, at(40));
  ASSERT_EQ(a.users.size(), 1u);
  EXPECT_EQ(a.users[0].key, "alice");
  ASSERT_EQ(a.users[0].points.size(), 1u);
  EXPECT_FLOAT_EQ(a.users[0].points[0].use.gpus_allocated, 1);  // 4 in 1 of 4 samples
  EXPECT_FLOAT_EQ(a.users[0].points[0].use.gpus_used, 0.5f);
  ASSERT_EQ(a.groups.size(), 1u);
  EXPECT_EQ(a.groups[0].key, "g-alice");
}

TEST(PoolHistoryTest, DayIsFiveMinuteAveragesAndWeekIsHourly) {
  TelemetryHistory telemetry;
  SimClock clock(kStart);
  PoolHistory h(telemetry, clock);
  // Two hours and a half, one sample a minute; allocation = the minute's index within its hour.
  for (int m = 0; m < 150; ++m)
    h.add(at(m * 60), sampleWith(static_cast<float>(m % 60), 0, "alice"));
  TimePoint now = at(150 * 60 - 1);
  PoolHistoryAnswer day = h.query(PoolRange::kDay, now);
  EXPECT_EQ(day.resolution, "5m");
  ASSERT_EQ(day.pool.points.size(), 30u);
  EXPECT_FLOAT_EQ(day.pool.points[0].use.gpus_allocated, 2);   // minutes 0-4
  EXPECT_FLOAT_EQ(day.pool.points[13].use.gpus_allocated, 7);  // minutes 65-69: 5..9
  EXPECT_EQ(day.pool.points[1].at_s - day.pool.points[0].at_s, 300u);
  PoolHistoryAnswer week = h.query(PoolRange::kWeek, now);
  EXPECT_EQ(week.resolution, "1h");
  ASSERT_EQ(week.pool.points.size(), 3u);  // two whole hours and the hour in progress
  EXPECT_FLOAT_EQ(week.pool.points[0].use.gpus_allocated, 29.5f);
  EXPECT_FLOAT_EQ(week.pool.points[1].use.gpus_allocated, 29.5f);
  EXPECT_FLOAT_EQ(week.pool.points[2].use.gpus_allocated, 14.5f);  // minutes 0-29
  EXPECT_EQ(week.pool.points[1].at_s - week.pool.points[0].at_s, 3600u);
  ASSERT_EQ(week.users.size(), 1u);
  EXPECT_EQ(week.users[0].points.size(), 3u);
}

TEST(PoolHistoryTest, RingsAreBoundedAndIdleUsersAreForgotten) {
  TelemetryHistory telemetry;
  SimClock clock(kStart);
  PoolHistoryOptions o;
  o.minute_capacity = 10;
  o.hour_capacity = 2;
  o.forget_after = std::chrono::hours(1);
  PoolHistory h(telemetry, clock, o);
  h.add(at(0), sampleWith(1, 1, "alice"));
  for (int m = 1; m < 4 * 60; ++m)
    h.add(at(m * 60), sampleWith(1, 1));
  EXPECT_EQ(h.seriesCount(), 1u);  // alice (and her group) dropped after an hour of nothing
  PoolHistoryAnswer hour = h.query(PoolRange::kHour, at(4 * 3600));
  EXPECT_EQ(hour.pool.points.size(), 11u);  // the 10 kept + the minute in progress
  EXPECT_LE(h.query(PoolRange::kWeek, at(4 * 3600)).pool.points.size(), 3u);
}

TEST(PoolHistoryTest, SamplesTheTelemetryOnItsClock) {
  TelemetryHistory telemetry;
  SimClock clock(kStart);
  PoolHistory h(telemetry, clock);
  GpuReading r;
  r.uuid = "GPU-a";
  r.utilization_pct = 50;
  r.memory_used_mib = 1'000;
  r.memory_total_mib = 80'000;
  telemetry.ingest("n1", at(0), {r}, {{"GPU-a", {whole(7, "alice", "ml")}}});
  h.sample();
  clock.advance(std::chrono::minutes(5));  // the reading goes stale
  h.sample();
  PoolHistoryAnswer a = h.query(PoolRange::kHour, clock.now());
  ASSERT_EQ(a.pool.points.size(), 2u);
  EXPECT_FLOAT_EQ(a.pool.points[0].use.gpus, 1);
  EXPECT_FLOAT_EQ(a.pool.points[0].use.gpus_allocated, 1);
  EXPECT_FLOAT_EQ(a.pool.points[0].use.gpus_used, 0.5f);
  EXPECT_FLOAT_EQ(a.pool.points[1].use.gpus, 0);
  ASSERT_EQ(a.users.size(), 1u);
  EXPECT_EQ(a.users[0].key, "alice");
}

TEST(PoolHistoryTest, ItsThreadSamplesUntilStopped) {
  TelemetryHistory telemetry;
  RealClock clock;
  PoolHistoryOptions o;
  o.sample_every = std::chrono::milliseconds(5);
  PoolHistory h(telemetry, clock, o);
  h.start();
  h.start();  // idempotent
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  uint32_t samples = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    PoolHistoryAnswer a = h.query(PoolRange::kHour, clock.now());
    samples = 0;
    for (const PoolPoint& p : a.pool.points)
      samples += p.samples;
    if (samples >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_GE(samples, 3u);
  h.stop();
  h.stop();
  uint32_t after = 0;
  for (const PoolPoint& p : h.query(PoolRange::kHour, clock.now()).pool.points)
    after += p.samples;
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  uint32_t later = 0;
  for (const PoolPoint& p : h.query(PoolRange::kHour, clock.now()).pool.points)
    later += p.samples;
  EXPECT_EQ(after, later);  // nothing samples once stopped
}

}  // namespace
}  // namespace gpool::controller::pool_history_test
