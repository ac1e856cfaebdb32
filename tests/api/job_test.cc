#include "api/job.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace gpool::api::testing {
namespace {

using nlohmann::json;

const std::vector<JobState> kAllStates = {
    JobState::kPending,  JobState::kRunning,    JobState::kCompleting, JobState::kCompleted,
    JobState::kFailed,   JobState::kCancelled,  JobState::kTimeout,    JobState::kPreempted,
    JobState::kNodeFail, JobState::kOutOfMemory};

Job sampleJob() {
  Job j;
  j.id = 42;
  j.spec.name = "train";
  j.spec.command = {"python", "train.py"};
  j.spec.resources.gpus_milli = 500;
  j.spec.tasks = 2;
  j.user = "alice";
  j.uid = 1001;
  j.group = "vision";
  j.submit_time = fromUnixSeconds(1'700'000'000);
  return j;
}

TEST(JobStateTest, NamesAndShortCodes) {
  const std::vector<std::pair<const char*, const char*>> expected = {
      {"PENDING", "PD"},   {"RUNNING", "R"},        {"COMPLETING", "CG"}, {"COMPLETED", "CD"},
      {"FAILED", "F"},     {"CANCELLED", "CA"},     {"TIMEOUT", "TO"},    {"PREEMPTED", "PR"},
      {"NODE_FAIL", "NF"}, {"OUT_OF_MEMORY", "OOM"}};
  ASSERT_EQ(expected.size(), kAllStates.size());
  for (size_t i = 0; i < kAllStates.size(); ++i) {
    EXPECT_EQ(jobStateName(kAllStates[i]), expected[i].first);
    EXPECT_EQ(jobStateCode(kAllStates[i]), expected[i].second);
    EXPECT_EQ(*parseJobState(expected[i].first), kAllStates[i]);
    EXPECT_EQ(*parseJobState(expected[i].second), kAllStates[i]);
  }
  EXPECT_EQ(*parseJobState("pd"), JobState::kPending);
  EXPECT_EQ(*parseJobState("node_fail"), JobState::kNodeFail);
  EXPECT_TRUE(failsWith(parseJobState("DONE").status(), "unknown job state 'DONE'"));
  EXPECT_TRUE(failsWith(parseJobState("").status(), "unknown job state ''"));
}

TEST(JobStateTest, TransitionTable) {
  auto legal = [](JobState from, JobState to) { return checkJobTransition(from, to).isOk(); };
  int count = 0;
  for (JobState from : kAllStates) {
    for (JobState to : kAllStates) {
      if (legal(from, to)) ++count;
    }
  }
  // 3 from PENDING, 8 from RUNNING, 7 from COMPLETING, 2 requeues.
  EXPECT_EQ(count, 20);
  EXPECT_TRUE(legal(JobState::kPending, JobState::kRunning));
  EXPECT_TRUE(legal(JobState::kPending, JobState::kCancelled));
  EXPECT_TRUE(legal(JobState::kRunning, JobState::kCompleting));
  EXPECT_TRUE(legal(JobState::kCompleting, JobState::kCompleted));
  EXPECT_TRUE(legal(JobState::kRunning, JobState::kOutOfMemory));
  EXPECT_TRUE(legal(JobState::kPreempted, JobState::kPending));
  EXPECT_TRUE(legal(JobState::kNodeFail, JobState::kPending));
  EXPECT_FALSE(legal(JobState::kRunning, JobState::kPending));
  EXPECT_FALSE(legal(JobState::kPending, JobState::kCompleted));
  EXPECT_FALSE(legal(JobState::kCompleting, JobState::kRunning));
  EXPECT_FALSE(legal(JobState::kRunning, JobState::kRunning));
  for (JobState done : {JobState::kCompleted, JobState::kFailed, JobState::kCancelled,
                        JobState::kTimeout, JobState::kOutOfMemory}) {
    for (JobState to : kAllStates)
      EXPECT_FALSE(legal(done, to)) << jobStateName(done) << " -> " << jobStateName(to);
  }
  Status s = checkJobTransition(JobState::kCompleted, JobState::kRunning);
  EXPECT_TRUE(failsWith(s, "illegal job state transition COMPLETED -> RUNNING",
                        StatusCode::kFailedPrecondition));
}

TEST(JobStateTest, Predicates) {
  EXPECT_FALSE(isFinished(JobState::kPending));
  EXPECT_FALSE(isFinished(JobState::kCompleting));
  EXPECT_TRUE(isFinished(JobState::kPreempted));
  EXPECT_TRUE(isFinished(JobState::kOutOfMemory));
  EXPECT_TRUE(holdsResources(JobState::kRunning));
  EXPECT_TRUE(holdsResources(JobState::kCompleting));
  EXPECT_FALSE(holdsResources(JobState::kPending));
  EXPECT_FALSE(holdsResources(JobState::kCompleted));
}

TEST(JobTransitionTest, KeepsTimestampsConsistentThroughARequeue) {
  Job job = sampleJob();
  const TimePoint t0 = job.submit_time;
  ASSERT_TRUE(applyJobTransition(&job, JobState::kRunning, t0 + Micros(10)).isOk());
  EXPECT_EQ(job.start_time, t0 + Micros(10));
  job.allocations = {Allocation{0, "n1", {{"GPU-1", 1024, 500, false}}, 1000, 1024, {}, {}, {}}};
  ASSERT_TRUE(applyJobTransition(&job, JobState::kPreempted, t0 + Micros(20), "Preempted").isOk());
  EXPECT_EQ(job.end_time, t0 + Micros(20));
  EXPECT_EQ(job.reason, "Preempted");
  EXPECT_TRUE(roundTrips(job));

  ASSERT_TRUE(applyJobTransition(&job, JobState::kPending, t0 + Micros(30), "Requeued").isOk());
  EXPECT_EQ(job.requeue_count, 1u);
  EXPECT_FALSE(job.start_time.has_value());
  EXPECT_FALSE(job.end_time.has_value());
  EXPECT_TRUE(job.allocations.empty());
  EXPECT_TRUE(roundTrips(job));

  ASSERT_TRUE(applyJobTransition(&job, JobState::kRunning, t0 + Micros(40)).isOk());
  ASSERT_TRUE(applyJobTransition(&job, JobState::kCompleting, t0 + Micros(50)).isOk());
  job.exit_code = 0;
  // A clock that went backwards does not put the end before the start.
  ASSERT_TRUE(applyJobTransition(&job, JobState::kCompleted, t0 + Micros(35)).isOk());
  EXPECT_EQ(job.end_time, t0 + Micros(40));
  EXPECT_TRUE(roundTrips(job));

  Job before = job;
  Status s = applyJobTransition(&job, JobState::kRunning, t0 + Micros(60));
  EXPECT_TRUE(failsWith(s, "job 42: illegal job state transition COMPLETED -> RUNNING",
                        StatusCode::kFailedPrecondition));
  EXPECT_EQ(job, before);
}

TEST(JobTransitionTest, CancelWhilePendingHasNoStartTime) {
  Job job = sampleJob();
  ASSERT_TRUE(applyJobTransition(&job, JobState::kCancelled, job.submit_time + Micros(5),
                                 "cancelled by alice")
                  .isOk());
  EXPECT_FALSE(job.start_time.has_value());
  EXPECT_EQ(job.end_time, job.submit_time + Micros(5));
  EXPECT_TRUE(roundTrips(job));
}

TEST(JobJsonTest, RoundTripsArrayElements) {
  Job job = sampleJob();
  job.array_job_id = 40;
  job.array_index = 3;
  EXPECT_EQ(formatJobId(job), "40_3");
  EXPECT_TRUE(roundTrips(job));
  EXPECT_EQ(formatJobId(sampleJob()), "42");
  json j = toJson(job);
  EXPECT_EQ(j.at("state"), "PENDING");
  EXPECT_EQ(j.at("submit_time_us"), int64_t{1'700'000'000'000'000});
  EXPECT_FALSE(j.contains("start_time_us"));
}

// The scheduler's words about a pending job travel with it (issue 21: the expected start of a
// reserved job was shown nowhere).
TEST(JobJsonTest, RoundTripsTheSchedulersWordsAboutAPendingJob) {
  Job job = sampleJob();
  job.reason = "Resources";
  job.reason_detail = "needs 8 GPUs of compute, 0 free; reserved to start in 00:10:00";
  job.expected_start = fromUnixSeconds(1'700'000'600);
  EXPECT_TRUE(roundTrips(job));
  json j = toJson(job);
  EXPECT_EQ(j.at("expected_start_us"), int64_t{1'700'000'600'000'000});
  EXPECT_FALSE(toJson(sampleJob()).contains("reason_detail"));
  EXPECT_FALSE(toJson(sampleJob()).contains("expected_start_us"));
}

// toJsonText writes the document toJson + dumpJson would, byte for byte, for a job with no
// optional member and for one with every member set (strings that need escaping included).
TEST(JobJsonTest, TextIsWhatDumpWrites) {
  Job bare = sampleJob();
  Job full = sampleJob();
  full.state = JobState::kFailed;
  full.reason = "exit \"3\" \\ \u00e9t\u00e9\n";
  full.user = "d\u00f6ra";
  full.group = "";
  full.start_time = fromUnixSeconds(1'700'000'010);
  full.end_time = fromUnixSeconds(1'700'000'020);
  full.exit_code = -3;
  full.array_job_id = 40;
  full.array_index = 3;
  full.requeue_count = 2;
  full.reason_detail = "needs 4 GPUs of compute, 2 free; reserved to start in 00:06:40";
  full.expected_start = fromUnixSeconds(1'700'000'400);
  full.allocations.resize(2);
  for (uint32_t t = 0; t < 2; ++t) {
    full.allocations[t].task = t;
    full.allocations[t].node = "gpu-0" + std::to_string(t);
    full.allocations[t].slices = {Slice{"GPU-" + std::to_string(t), 1024, 500, false}};
    full.allocations[t].stdout_log = "/var/log/gpool/42." + std::to_string(t) + ".out";
  }
  // Invalid UTF-8 is replaced as dumpJson replaces it.
  Job odd = sampleJob();
  odd.reason = std::string("bad \xff byte");
  for (const Job& job : {bare, full, odd}) {
    EXPECT_EQ(toJsonText(job, dumpJson(toJson(job.spec))), dumpJson(toJson(job))) << job.reason;
  }
}

TEST(JobJsonTest, RejectsInconsistentJobs) {
  auto with = [](const std::function<void(json&)>& edit) {
    json j = toJson(sampleJob());
    edit(j);
    return decode<Job>(j);
  };
  EXPECT_TRUE(with([](json&) {}).isOk());
  EXPECT_TRUE(failsWith(with([](json& j) { j["state"] = "R"; }),
                        "job.start_time_us: a RUNNING job has a start time"));
  EXPECT_TRUE(failsWith(with([](json& j) { j["state"] = "COMPLETED"; }),
                        "job.end_time_us: a COMPLETED job has an end time"));
  EXPECT_TRUE(failsWith(with([](json& j) { j["start_time_us"] = 1; }),
                        "job.start_time_us: a PENDING job has not started"));
  EXPECT_TRUE(failsWith(with([](json& j) { j["exit_code"] = 1; }),
                        "job.exit_code: a PENDING job has no exit code yet"));
  EXPECT_TRUE(failsWith(with([](json& j) {
                          j["state"] = "RUNNING";
                          j["start_time_us"] = 5;
                        }),
                        "job.start_time_us: is before submit_time_us"));
  EXPECT_TRUE(failsWith(with([](json& j) { j["array_index"] = 1; }),
                        "job.array_index: array_job_id and array_index come together"));
  EXPECT_TRUE(failsWith(with([](json& j) { j["id"] = 0; }), "job.id: is out of range"));
  EXPECT_TRUE(failsWith(with([](json& j) { j["uid"] = -1; }), "job.uid: is out of range"));
  EXPECT_TRUE(failsWith(with([](json& j) { j["user"] = ""; }), "job.user: must not be empty"));
  EXPECT_TRUE(
      failsWith(with([](json& j) { j["state"] = "DONE"; }), "job.state: unknown job state 'DONE'"));
  EXPECT_TRUE(
      failsWith(with([](json& j) { j["spec"]["tasks"] = 0; }), "job.spec.tasks: is out of range"));
  EXPECT_TRUE(failsWith(with([](json& j) {
                          j["spec"]["resources"].erase("gpu_memory_mib");
                          j["spec"]["resources"]["gpu_memory"] = "24X";
                        }),
                        "job.spec.resources.gpu_memory: memory size '24X' has unknown unit"));
  EXPECT_TRUE(failsWith(with([](json& j) {
                          j["state"] = "RUNNING";
                          j["start_time_us"] = int64_t{1'800'000'000'000'000};
                          j["allocations"] = json::array({{{"task", 5}, {"node", "n"}}});
                        }),
                        "job.allocations[0].task: task 5 is not below the job's task count 2"));
  EXPECT_TRUE(failsWith(with([](json& j) { j["colour"] = "red"; }), "job.colour: unknown field"));
}

}  // namespace
}  // namespace gpool::api::testing
