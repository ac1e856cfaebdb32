// Tests of the dynamic replay: trace readers, cluster specs, metrics, and small hand-checked
// replays whose JCTs follow from the queue policy.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sim/dynamic_replay.h"
#include "sim/dynamic_report.h"
#include "sim/dynamic_trace.h"
#include "sim/pooling.h"

namespace gpool::sim {
namespace {

std::string writeTemp(const std::string& name, const std::string& text) {
  std::string dir_template = (std::filesystem::temp_directory_path() / "gpool-dyn-XXXXXX").string();
  char* dir = ::mkdtemp(dir_template.data());
  EXPECT_NE(dir, nullptr);
  std::string path = std::string(dir_template) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

DynJob job(uint64_t id, int64_t submit, int64_t duration, uint32_t gpus, const std::string& g,
           uint32_t milli = 1000) {
  DynJob j;
  j.id = id;
  j.submit_s = submit;
  j.duration_s = duration;
  j.num_gpus = gpus;
  j.gpu_milli = milli;
  j.group = g;
  j.user = g;
  return j;
}

DynamicResult replay(const std::vector<DynJob>& jobs, const std::string& nodes,
                     sched::QueueOrder order, bool exclusive = false, int64_t interval_s = 1) {
  auto cluster = buildDynamicCluster(nodes);
  EXPECT_TRUE(cluster.ok()) << cluster.status().toString();
  DynamicOptions opt;
  opt.order = order;
  opt.exclusive = exclusive;
  opt.interval_s = interval_s;
  opt.placement = "BestFit";
  auto r = runDynamic(jobs, *cluster, opt, "test");
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? *r : DynamicResult{};
}

TEST(DynamicTrace, ParsesTimestampsAsUtc) {
  EXPECT_EQ(*parseTimestamp("1970-01-02 00:00:01"), 86401);
  EXPECT_EQ(*parseTimestamp("2017-10-09 07:01:55"), 1507532515);
  EXPECT_FALSE(parseTimestamp("2017-13-09 07:01:55").ok());
  EXPECT_FALSE(parseTimestamp("yesterday").ok());
}

TEST(DynamicTrace, ReadsPhillySortedAndFiltered) {
  std::string path = writeTemp("philly.csv",
                               "timestamp,duration,num_gpus,gpu_time,cluster\n"
                               "2017-10-01 00:10:00,50.0,2,100.0,vcB\n"
                               "2017-10-01 00:00:00,100.0,1,100.0,vcA\n"
                               "2017-10-01 00:20:00,0.0,1,0.0,vcA\n"
                               "2017-10-01 01:00:00,10.0,4,40.0,vcC\n");
  auto all = readPhillyJobs(path, {});
  ASSERT_TRUE(all.ok()) << all.status().toString();
  ASSERT_EQ(all->size(), 3u);  // the zero-duration job is dropped
  EXPECT_EQ((*all)[0].group, "vcA");
  EXPECT_EQ((*all)[0].submit_s, 0);
  EXPECT_EQ((*all)[1].submit_s, 600);
  EXPECT_EQ((*all)[1].num_gpus, 2u);
  EXPECT_EQ((*all)[2].submit_s, 3600);
  TraceFilter f;
  f.window_start_s = 300;
  f.window_end_s = 3600;
  auto window = readPhillyJobs(path, f);
  ASSERT_TRUE(window.ok());
  ASSERT_EQ(window->size(), 1u);
  EXPECT_EQ((*window)[0].group, "vcB");
  EXPECT_EQ((*window)[0].submit_s, 0);  // re-based to the window's first job
  TraceFilter two;
  two.max_jobs = 2;
  EXPECT_EQ(readPhillyJobs(path, two)->size(), 2u);
}

TEST(DynamicTrace, RejectsMalformedRowsWithTheLine) {
  std::string path = writeTemp("bad.csv",
                               "timestamp,duration,num_gpus,gpu_time,cluster\n"
                               "2017-10-01 00:10:00,abc,2,100.0,vcB\n");
  auto r = readPhillyJobs(path, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(":2:"), std::string::npos) << r.status().message();
}

// Found by the sim_traces fuzz target (regressions/sim_traces/philly_duration_beyond_int64): a
// duration of 7.8e70 s, or "inf"/"nan", was converted to int64 (undefined behaviour); openb times
// near INT64_MAX overflowed deletion - creation.
TEST(DynamicTrace, RefusesDurationsAndTimesBeyondTheReplaysRange) {
  for (const char* duration : {"7.8e70", "inf", "nan", "3153600001"}) {
    std::string path =
        writeTemp("huge.csv", std::string("timestamp,duration,num_gpus,gpu_time,cluster\n"
                                          "2017-10-01 00:10:00,") +
                                  duration + ",2,100.0,vcB\n");
    auto r = readPhillyJobs(path, {});
    ASSERT_FALSE(r.ok()) << duration;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(":2: duration"), std::string::npos) << r.status().message();
  }
  std::string pods =
      writeTemp("pods-huge.csv",
                "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\n"
                "p0,4000,1024,1,500,-9223372036854775807,9223372036854775807\n");
  auto r = readOpenbJobs(pods, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(":2: creation_time/deletion_time beyond"), std::string::npos)
      << r.status().message();
}

TEST(DynamicTrace, ReadsOpenbLifetimesAndSlices) {
  std::string path =
      writeTemp("pods.csv",
                "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
                "deletion_time,scheduled_time\n"
                "p0,4000,1024,1,500,,LS,Running,100,1100,100\n"
                "p1,4000,1024,0,0,,BE,Running,0,50,0\n"
                "p2,8000,2048,2,1000,,BE,Running,200,300,200\n");
  auto r = readOpenbJobs(path, {});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 2u);  // the CPU-only pod is dropped
  EXPECT_EQ((*r)[0].gpu_milli, 500u);
  EXPECT_EQ((*r)[0].duration_s, 1000);
  EXPECT_EQ((*r)[0].group, "LS");
  EXPECT_EQ((*r)[1].submit_s, 100);
  EXPECT_EQ((*r)[1].computeMilli(), 2000u);
}

TEST(DynamicTrace, BuildsClustersFromSpecs) {
  auto c = buildDynamicCluster("2x8,1x4:T4:16");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->size(), 3u);
  EXPECT_EQ(c->gpuCount(), 20u);
  EXPECT_EQ(c->node(2).gpus[0].model, "T4");
  EXPECT_EQ(c->node(2).gpus[0].memory_total_mib, 16u * 1024);
  EXPECT_FALSE(buildDynamicCluster("8by8").ok());
}

// A mistyped spec or a corrupt node list is refused before anything is built (tests/fuzz
// sim_traces ran out of time and memory building a server of 12,902,960 GPUs).
TEST(DynamicTrace, RefusesPoolsBeyondTheLimits) {
  EXPECT_TRUE(buildDynamicCluster("1x1024").ok());
  for (const char* spec : {"1x1025", "98x1024", "50x1024,50x1024", "4000000000x8"}) {
    auto c = buildDynamicCluster(spec);
    ASSERT_FALSE(c.ok()) << spec;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << spec;
    EXPECT_NE(c.status().message().find("at most 1024 GPUs per server and 100000 in all"),
              std::string::npos)
        << c.status().message();
  }
  auto big =
      buildDynamicCluster(writeTemp("nodes.csv",
                                    "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,8,V100\n"
                                    "n1,64000,262144,12902960,V100\n"));
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("nodes.csv:3"), std::string::npos)
      << big.status().message();
}

TEST(DynamicMetrics, PercentileAndJain) {
  std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 5);
  EXPECT_DOUBLE_EQ(percentile(v, 99), 10);
  EXPECT_DOUBLE_EQ(jainIndex({1, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(jainIndex({1, 0}), 0.5);
}

TEST(DynamicReplay, FifoOnOneGpuRunsJobsBackToBack) {
  // One GPU; jobs of 100 s, 10 s and 10 s arrive at 0, 1, 2.
  std::vector<DynJob> jobs = {job(1, 0, 100, 1, "a"), job(2, 1, 10, 1, "b"), job(3, 2, 10, 1, "c")};
  DynamicResult r = replay(jobs, "1x1", sched::QueueOrder::kFifo);
  ASSERT_EQ(r.finished, 3u);
  // JCTs: 100, 110 - 1 = 109, 120 - 2 = 118.
  EXPECT_DOUBLE_EQ(r.jct_avg_s, (100.0 + 109.0 + 118.0) / 3.0);
  EXPECT_DOUBLE_EQ(r.jct_p50_s, 109.0);
  EXPECT_DOUBLE_EQ(r.queue_avg_s, (0.0 + 99.0 + 108.0) / 3.0);
}

TEST(DynamicReplay, ShortestJobFirstBeatsFifoOnMeanJct) {
  // The long job arrives first but only once the GPU is busy with a short one.
  std::vector<DynJob> jobs = {job(1, 0, 5, 1, "a"), job(2, 1, 1000, 1, "a"), job(3, 2, 10, 1, "b"),
                              job(4, 3, 10, 1, "c")};
  DynamicResult fifo = replay(jobs, "1x1", sched::QueueOrder::kFifo);
  DynamicResult sjf = replay(jobs, "1x1", sched::QueueOrder::kShortestJobFirst);
  ASSERT_EQ(fifo.finished, 4u);
  ASSERT_EQ(sjf.finished, 4u);
  EXPECT_LT(sjf.jct_avg_s, fifo.jct_avg_s);
}

TEST(DynamicReplay, LeastAttainedServicePreemptsLongJobs) {
  // A 2-hour job holds the only GPU; a short job arriving later preempts it once the long job
  // has used more than the LAS threshold (3200 GPU-s) and run its minimum (300 s).
  std::vector<DynJob> jobs = {job(1, 0, 7200, 1, "a"), job(2, 4000, 60, 1, "b")};
  DynamicResult las = replay(jobs, "1x1", sched::QueueOrder::kLeastAttainedService);
  DynamicResult fifo = replay(jobs, "1x1", sched::QueueOrder::kFifo);
  ASSERT_EQ(las.finished, 2u);
  EXPECT_GE(las.preemptions, 1u);
  EXPECT_EQ(fifo.preemptions, 0u);
  EXPECT_LT(las.jct_avg_s, fifo.jct_avg_s);
  // The preempted job keeps its progress: the total work still ends by 7200 + 60 + a pass.
  EXPECT_LE(las.makespan_s, 7200 + 60 + 2);
}

TEST(DynamicReplay, SlicingPacksFractionalJobsOnOneGpu) {
  // Four quarter-GPU jobs of 100 s: sliced they run together, exclusive one after another.
  std::vector<DynJob> jobs;
  for (uint64_t i = 1; i <= 4; ++i)
    jobs.push_back(job(i, 0, 100, 1, "g", 250));
  DynamicResult sliced = replay(jobs, "1x1", sched::QueueOrder::kFifo, false);
  DynamicResult exclusive = replay(jobs, "1x1", sched::QueueOrder::kFifo, true);
  EXPECT_DOUBLE_EQ(sliced.jct_avg_s, 100.0);
  EXPECT_DOUBLE_EQ(exclusive.jct_avg_s, (100.0 + 200 + 300 + 400) / 4);
  EXPECT_EQ(sliced.makespan_s, 100);
}

TEST(DynamicReplay, SkipsJobsLargerThanTheCluster) {
  std::vector<DynJob> jobs = {job(1, 0, 10, 16, "a"), job(2, 0, 10, 1, "b")};
  DynamicResult r = replay(jobs, "1x8", sched::QueueOrder::kFifo);
  EXPECT_EQ(r.skipped, 1u);
  EXPECT_EQ(r.finished, 1u);
}

TEST(DynamicReplay, MultiServerJobsRunAsGangs) {
  std::vector<DynJob> jobs = {job(1, 0, 100, 16, "a"), job(2, 0, 100, 8, "b")};
  DynamicResult r = replay(jobs, "2x8", sched::QueueOrder::kFifo);
  ASSERT_EQ(r.finished, 2u);
  // The 16-GPU job takes both servers; the 8-GPU job waits for it.
  EXPECT_DOUBLE_EQ(r.jct_avg_s, (100.0 + 200.0) / 2);
}

TEST(DynamicReplay, FairShareKeepsGroupsCloserThanFifo) {
  // Group a floods the queue first; group b's jobs arrive a little later. FIFO serves all of a
  // first; fair-share interleaves b, which raises Jain's index across the two groups.
  std::vector<DynJob> jobs;
  uint64_t id = 1;
  for (int i = 0; i < 20; ++i)
    jobs.push_back(job(id++, i, 100, 1, "a"));
  for (int i = 0; i < 5; ++i)
    jobs.push_back(job(id++, 30 + i, 100, 1, "b"));
  DynamicResult fifo = replay(jobs, "1x2", sched::QueueOrder::kFifo);
  DynamicResult fair = replay(jobs, "1x2", sched::QueueOrder::kMultifactor);
  ASSERT_EQ(fair.finished, jobs.size());
  EXPECT_GT(fair.jain, fifo.jain);
}

TEST(DynamicReport, TableJsonAndSvg) {
  std::vector<DynJob> jobs = {job(1, 0, 100, 1, "a"), job(2, 10, 50, 1, "b")};
  DynamicResult r = replay(jobs, "1x1", sched::QueueOrder::kFifo);
  std::string json = dynamicJsonLine(r);
  EXPECT_EQ(json.front(), '{');
  for (const char* key : {"\"workload\":\"test\"", "\"policy\":\"fifo\"", "\"mode\":\"sliced\"",
                          "\"jct_p99_s\":", "\"util_pct\":", "\"jain_fairness\":"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " in " << json;
  }
  EXPECT_NE(formatDynamicTable({r}).find("fifo"), std::string::npos);
  for (const std::string& svg :
       {utilisationSvg({r}, "u"), queueSvg({r}, "q"), jctCdfSvg({r}, "c")}) {
    EXPECT_EQ(svg.rfind("<svg", 0), 0u);
    EXPECT_NE(svg.find("<polyline"), std::string::npos);
    EXPECT_NE(svg.find("</svg>"), std::string::npos);
  }
}

TEST(DynamicReplay, BundledPhillySampleRuns) {
  std::string path = std::string(GPOOL_SOURCE_DIR) + "/data/traces/pollux-osdi21/philly.csv";
  TraceFilter f;
  f.window_start_s = 56 * 86400;
  f.max_jobs = 150;
  auto jobs = readPhillyJobs(path, f);
  ASSERT_TRUE(jobs.ok()) << jobs.status().toString();
  ASSERT_EQ(jobs->size(), 150u);
  DynamicResult r = replay(*jobs, "4x8", sched::QueueOrder::kMultifactor, false, 60);
  EXPECT_EQ(r.finished + r.skipped + r.unfinished, 150u);
  EXPECT_GT(r.finished, 100u);
  EXPECT_GT(r.alloc_pct, 0.0);
  EXPECT_LE(r.alloc_pct, 100.0 + 1e-9);
  EXPECT_GT(r.jain, 0.0);
  EXPECT_LE(r.jain, 1.0);
}

// Four quarter-GPU jobs of 100 s, one a second, on servers of one GPU. Exclusively (FIFO) each
// holds a whole GPU: on 1 server they run one after another (waits 0, 99, 198, 297 s), on 2 two
// at a time (0, 0, 98, 98), on 3 the fourth waits 97 s, on 4 nobody waits. Sliced, all four
// share one GPU at once. The target (exclusive on 4 servers) is p50 = p95 = 0, within one
// interval (1 s): exclusive needs 4 servers, gpool 1.
std::vector<DynJob> quarterJobs() {
  std::vector<DynJob> jobs;
  for (uint64_t i = 0; i < 4; ++i)
    jobs.push_back(job(i + 1, static_cast<int64_t>(i), 100, 1, "a", 250));
  return jobs;
}

PoolingOptions quarterOptions() {
  PoolingOptions opt;
  opt.server = "1:V100:32:8";
  opt.min_servers = 1;
  opt.max_servers = 4;
  opt.interval_s = 1;
  return opt;
}

TEST(Pooling, SmallestPoolKeepingTheExclusiveDelays) {
  auto r = runPooling(quarterJobs(), quarterOptions(), "quarters");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->points.size(), 8u);
  EXPECT_EQ(r->reference_servers, 4u);
  EXPECT_EQ(r->gpus_per_server, 1u);
  const PoolingPoint* one = r->find(true, 1);
  ASSERT_NE(one, nullptr);
  EXPECT_DOUBLE_EQ(one->result.queue_p50_s, 99);
  EXPECT_DOUBLE_EQ(one->result.queue_p95_s, 297);
  const PoolingPoint* two = r->find(true, 2);
  EXPECT_DOUBLE_EQ(two->result.queue_p50_s, 0);
  EXPECT_DOUBLE_EQ(two->result.queue_p95_s, 98);
  EXPECT_DOUBLE_EQ(r->find(true, 3)->result.queue_p95_s, 97);
  EXPECT_DOUBLE_EQ(r->target_p50_s, 0);
  EXPECT_DOUBLE_EQ(r->target_p95_s, 0);
  EXPECT_EQ(r->smallest_exclusive, 4u);
  EXPECT_EQ(r->smallest_pooled, 1u);
  const PoolingPoint* sliced = r->find(false, 1);
  EXPECT_DOUBLE_EQ(sliced->result.queue_p95_s, 0);
  // Over the arrival window [0, 3] s on 4 servers, 1, 2 then 3 jobs run: 6 job-seconds of 12
  // GPU-seconds. Exclusive holds whole GPUs (50%) and uses a quarter of each (12.5%); sliced
  // holds what it uses.
  const PoolingPoint* ex4 = r->find(true, 4);
  EXPECT_NEAR(ex4->result.alloc_pct, 50.0, 1e-9);
  EXPECT_NEAR(ex4->result.used_pct, 12.5, 1e-9);
  const PoolingPoint* sl4 = r->find(false, 4);
  EXPECT_NEAR(sl4->result.alloc_pct, 12.5, 1e-9);
  EXPECT_NEAR(sl4->result.used_pct, 12.5, 1e-9);
  std::string table = formatPoolingTable(*r);
  EXPECT_NE(table.find("exclusive GPUs 4 servers (4 GPUs), gpool slices 1 server (1 GPUs): 75% "
                       "fewer GPUs"),
            std::string::npos)
      << table;
  std::string json = poolingJsonLines(*r);
  EXPECT_NE(json.find("\"smallest_exclusive_servers\":4"), std::string::npos) << json;
  EXPECT_NE(json.find("\"smallest_pooled_servers\":1"), std::string::npos) << json;
  EXPECT_NE(json.find("\"queue_p95_s\":297"), std::string::npos) << json;
}

TEST(Pooling, ASmallerReferencePoolIsAnEasierTarget) {
  // Against exclusive use of 2 servers (p50 0 s, p95 98 s), 2 exclusive servers are enough;
  // 1 is not (p50 99 s).
  PoolingOptions opt = quarterOptions();
  opt.reference_servers = 2;
  auto r = runPooling(quarterJobs(), opt, "quarters");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_DOUBLE_EQ(r->target_p95_s, 98);
  EXPECT_EQ(r->smallest_exclusive, 2u);
  EXPECT_EQ(r->smallest_pooled, 1u);
}

TEST(Pooling, PlotsShareOverTimeAndDelayPerPoolSize) {
  auto r = runPooling(quarterJobs(), quarterOptions(), "quarters");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  std::string share = poolingShareSvg(*r, 0);
  EXPECT_EQ(share.rfind("<svg", 0), 0u);
  size_t lines = 0;
  for (size_t at = share.find("<polyline"); at != std::string::npos;
       at = share.find("<polyline", at + 1))
    ++lines;
  EXPECT_EQ(lines, 4u);  // held and used, exclusive and sliced
  EXPECT_NE(share.find("exclusive: held 50%"), std::string::npos) << share;
  EXPECT_NE(share.find("gpool: used "), std::string::npos) << share;
  EXPECT_EQ(poolingShareSvg(*r, 9), "");  // not run
  std::string delay = poolingDelaySvg(*r);
  EXPECT_NE(delay.find("target p95"), std::string::npos);
  EXPECT_NE(delay.find("</svg>"), std::string::npos);
}

TEST(Pooling, RejectsBadRanges) {
  PoolingOptions opt = quarterOptions();
  opt.min_servers = 3;
  opt.max_servers = 2;
  auto r = runPooling(quarterJobs(), opt, "quarters");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("pool sizes 3..2"), std::string::npos)
      << r.status().toString();
  opt = quarterOptions();
  opt.reference_servers = 7;
  r = runPooling(quarterJobs(), opt, "quarters");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reference pool of 7 servers"), std::string::npos);
  opt = quarterOptions();
  opt.server = "8:V100:lots";
  r = runPooling(quarterJobs(), opt, "quarters");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().toString().find("--server 8:V100:lots"), std::string::npos)
      << r.status().toString();
}

}  // namespace
}  // namespace gpool::sim
