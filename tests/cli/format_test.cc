#include "cli/format.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>

namespace gpool::cli {
namespace {

const TimePoint kT0 = fromUnixSeconds(1'700'000'000);

api::Job pendingJob(uint64_t id, const std::string& name, uint32_t gpus_milli) {
  api::Job job;
  job.id = id;
  job.spec.name = name;
  job.spec.command = {"sleep", "1"};
  job.spec.resources.gpus_milli = gpus_milli;
  job.user = "alice";
  job.uid = 1001;
  job.submit_time = kT0;
  job.reason = "Resources";
  return job;
}

api::Job runningJob(uint64_t id, const std::string& node, TimePoint start) {
  api::Job job = pendingJob(id, "train", 500);
  job.state = api::JobState::kRunning;
  job.reason.clear();
  job.start_time = start;
  api::Allocation a;
  a.node = node;
  a.cpus_milli = 4000;
  a.ram_mib = 8192;
  a.slices.push_back(api::Slice{"GPU-" + node + "-0", 40960, 500, false});
  job.allocations.push_back(a);
  return job;
}

TEST(FormatTable, AlignsColumnsAndTrimsTrailingBlanks) {
  EXPECT_EQ(
      formatTable({"ID", "NAME", "X"}, {{"1", "a", ""}, {"100", "longer", "z"}}, {Align::kRight}),
      " ID  NAME    X\n"
      "  1  a\n"
      "100  longer  z\n");
  EXPECT_EQ(formatTable({"A", "B"}, {}), "A  B\n");
}

TEST(JobElapsed, DaysHoursMinutesSeconds) {
  api::Job job = pendingJob(1, "x", 0);
  EXPECT_EQ(jobElapsed(job, kT0 + std::chrono::hours(5)), "00:00:00");
  job = runningJob(1, "gpu-01", kT0);
  EXPECT_EQ(jobElapsed(job, kT0 + std::chrono::seconds(3725)), "01:02:05");
  EXPECT_EQ(jobElapsed(job, kT0 + std::chrono::seconds(93784)), "1-02:03:04");
  job.state = api::JobState::kCompleted;
  job.end_time = kT0 + std::chrono::seconds(59);
  EXPECT_EQ(jobElapsed(job, kT0 + std::chrono::hours(100)), "00:00:59");
}

TEST(JobGpus, PerTaskTimesTasks) {
  api::JobSpec spec;
  EXPECT_EQ(jobGpus(spec), "0");
  spec.resources.gpus_milli = 250;
  EXPECT_EQ(jobGpus(spec), "0.25");
  spec.tasks = 4;
  EXPECT_EQ(jobGpus(spec), "0.25x4");
  spec.resources.gpus_milli = 2000;
  EXPECT_EQ(jobGpus(spec), "8");
}

TEST(FormatQueue, SqueueLikeRows) {
  api::Job pending = pendingJob(7, "prep", 250);
  api::Job running = runningJob(12, "gpu-02", kT0);
  api::Job element = pendingJob(13, "sweep", 1000);
  element.array_job_id = 13;
  element.array_index = 0;
  element.reason.clear();
  EXPECT_EQ(formatQueue({pending, running, element}, kT0 + std::chrono::seconds(61)),
            "JOBID  NAME   USER   ST      TIME  GPUS  NODE(REASON)\n"
            "    7  prep   alice  PD  00:00:00  0.25  (Resources)\n"
            "   12  train  alice  R   00:01:01   0.5  gpu-02\n"
            " 13_0  sweep  alice  PD  00:00:00     1  (None)\n");
}

TEST(FormatJob, OneLinePerField) {
  setenv("TZ", "UTC", 1);
  tzset();
  api::Job job = runningJob(12, "gpu-02", kT0 + std::chrono::seconds(5));
  job.group = "vision";
  job.spec.time_limit_seconds = 4 * 3600;
  job.spec.env["A"] = "1";
  job.spec.working_dir = "/home/alice";
  std::string text = formatJob(job, kT0 + std::chrono::seconds(65));
  EXPECT_NE(text.find("JobId:       12\n"), std::string::npos) << text;
  EXPECT_NE(text.find("State:       RUNNING\n"), std::string::npos) << text;
  EXPECT_NE(text.find("SubmitTime:  2023-11-14T22:13:20\n"), std::string::npos) << text;
  EXPECT_NE(text.find("RunTime:     00:01:00\n"), std::string::npos) << text;
  EXPECT_NE(text.find("TimeLimit:   04:00:00\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Group:       vision\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Env:         A=1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("Allocation:  task 0 on gpu-02 cpus=4 mem=8G GPU-gpu-02-0(40G,50%)\n"),
            std::string::npos)
      << text;
}

TEST(FormatNodes, GpusSlicesCpuAndMemory) {
  api::Node a;
  a.name = "gpu-01";
  a.cpus_milli = 64000;
  a.ram_mib = 512 * 1024;
  a.state = api::NodeState::kMixed;
  for (uint32_t i = 0; i < 2; ++i) {
    api::Gpu gpu;
    gpu.uuid = "GPU-gpu-01-" + std::to_string(i);
    gpu.index = i;
    gpu.model = "A100";
    gpu.memory_mib = 81920;
    a.gpus.push_back(gpu);
  }
  a.slices = api::SliceEnforcement{true, true, "interposer /usr/lib/gpool/libgpool-vgpu.so"};
  api::Node b = a;
  b.name = "gpu-02";
  b.state = api::NodeState::kDrained;
  b.state_reason = "maintenance";
  b.gpus.resize(1);
  b.gpus[0].model = "H100";
  b.gpus[0].simulated = true;
  b.health_reason = "3 GPUs found, 4 expected";
  b.slices = api::SliceEnforcement{false, true, "interposer not usable: no interposer configured"};
  api::Job one = runningJob(1, "gpu-01", kT0);
  api::Job two = runningJob(2, "gpu-01", kT0);
  api::Job ended = runningJob(3, "gpu-01", kT0);
  ended.state = api::JobState::kCompleted;
  ended.end_time = kT0;
  auto usage = usageByNode({one, two, ended});
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].second.slices, 2u);
  EXPECT_EQ(formatNodes({a, b}, usage),
            "NODE    STATE                  GPUS     SLICES(free/used)  CPU(used/total)  "
            "MEM(used/total)  SLICE_LIMITS\n"
            "gpu-01  MIXED                  2x A100                1/2             8/64         "
            "16G/512G  enforced\n"
            "gpu-02  DRAINED (maintenance)  1x H100                0/0             0/64          "
            "0M/512G  NO\n"
            "(some GPUs are simulated by the fake backend)\n"
            "gpu-02: 3 GPUs found, 4 expected\n"
            "gpu-02: takes no GPU slices: interposer not usable: no interposer configured\n");
}

}  // namespace
}  // namespace gpool::cli
