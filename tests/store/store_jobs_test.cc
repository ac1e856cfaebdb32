#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "store/store_test_fixture.h"

namespace gpool::store::testing {
namespace {

NewJob job(const std::string& user, const std::string& group = "ml", uint32_t gpus = 1000) {
  NewJob j;
  j.user = user;
  j.group = group;
  j.gpu_thousandths = gpus;
  j.spec_json = R"({"command":["train.py"],"gpus":")" + std::to_string(gpus) + "\"}";
  return j;
}

int64_t submitOne(Store& store, const NewJob& j, TimePoint now) {
  auto ids = store.submitJobs({j}, now);
  EXPECT_TRUE(ids.ok()) << ids.status().toString();
  return ids.ok() ? ids->at(0) : -1;
}

using JobsTest = StoreTest;

TEST_P(JobsTest, SubmitStoresEveryFieldAndASubmittedEvent) {
  NewJob j = job("alice", "vision", 250);
  j.priority = 7;
  j.uid = 1001;
  auto ids = store().submitJobs({j}, at(10));
  ASSERT_TRUE(ids.ok()) << ids.status().toString();
  ASSERT_EQ(ids->size(), 1u);
  auto got = store().getJob(ids->at(0));
  ASSERT_TRUE(got.ok()) << got.status().toString();
  EXPECT_EQ(got->id, ids->at(0));
  EXPECT_EQ(got->user, "alice");
  EXPECT_EQ(got->uid, 1001u);
  EXPECT_EQ(got->group, "vision");
  EXPECT_EQ(got->state, api::JobState::kPending);
  EXPECT_EQ(got->spec_json, j.spec_json);
  EXPECT_EQ(got->gpu_thousandths, 250u);
  EXPECT_EQ(got->priority, 7);
  EXPECT_EQ(got->submit_time, at(10));
  EXPECT_FALSE(got->start_time.has_value());
  EXPECT_FALSE(got->end_time.has_value());
  EXPECT_FALSE(got->array_parent.has_value());
  EXPECT_EQ(got->epoch, 0);

  auto events = store().jobEvents(ids->at(0));
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ(events->at(0).from_state, std::nullopt);
  EXPECT_EQ(events->at(0).to_state, api::JobState::kPending);
  EXPECT_EQ(events->at(0).reason, "submitted");
  EXPECT_EQ(events->at(0).time, at(10));
}

TEST_P(JobsTest, MissingJobIsNotFound) {
  EXPECT_EQ(store().getJob(12345).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store().jobEvents(12345).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store().recordPlacement(12345, "{}", at(0), "placed").status().code(),
            StatusCode::kNotFound);
}

// Issue 19 defect 3: every start is a new incarnation, above every earlier one even when the
// clock went back; each placement records the incarnation it was made under; it survives a
// reopen.
TEST_P(JobsTest, EachPlacementRecordsTheStoreIncarnation) {
  EXPECT_EQ(store().currentIncarnation(), 0);
  Result<int64_t> first = store().beginIncarnation(at(100));
  ASSERT_TRUE(first.ok()) << first.status().toString();
  EXPECT_EQ(*first, toUnixMicros(at(100)));
  Result<int64_t> second = store().beginIncarnation(at(50));  // the clock went back
  ASSERT_TRUE(second.ok()) << second.status().toString();
  EXPECT_EQ(*second, *first + 1);
  EXPECT_EQ(store().currentIncarnation(), *second);
  int64_t id = submitOne(store(), job("alice"), at(101));
  ASSERT_TRUE(store().recordPlacement(id, "[]", at(102), "placed").ok());
  EXPECT_EQ(store().getJob(id)->incarnation, *second);
  reopen();
  EXPECT_EQ(store().currentIncarnation(), *second);
  EXPECT_EQ(store().getJob(id)->incarnation, *second);
}

// Issue 19 defect 3: a restored store must not give out the ids of jobs agents still report.
TEST_P(JobsTest, JobIdsContinueAboveAReservedId) {
  int64_t a = submitOne(store(), job("alice"), at(1));
  Result<bool> moved = store().reserveJobIdsThrough(a);
  ASSERT_TRUE(moved.ok()) << moved.status().toString();
  EXPECT_FALSE(*moved);
  moved = store().reserveJobIdsThrough(a + 40);
  ASSERT_TRUE(moved.ok()) << moved.status().toString();
  EXPECT_TRUE(*moved);
  EXPECT_EQ(submitOne(store(), job("alice"), at(2)), a + 41);
  moved = store().reserveJobIdsThrough(a + 5);  // never lowers
  ASSERT_TRUE(moved.ok());
  EXPECT_FALSE(*moved);
  reopen();
  EXPECT_EQ(submitOne(store(), job("alice"), at(3)), a + 42);
}

TEST_P(JobsTest, CountsJobsByState) {
  auto none = store().countJobsByState();
  ASSERT_TRUE(none.ok()) << none.status().toString();
  EXPECT_TRUE(none->empty());
  int64_t a = submitOne(store(), job("alice"), at(1));
  submitOne(store(), job("bob"), at(2));
  submitOne(store(), job("carol"), at(3));
  ASSERT_TRUE(store().recordPlacement(a, "[]", at(4), "placed").ok());
  auto counts = store().countJobsByState();
  ASSERT_TRUE(counts.ok()) << counts.status().toString();
  std::vector<std::pair<api::JobState, int64_t>> want{{api::JobState::kPending, 2},
                                                      {api::JobState::kRunning, 1}};
  EXPECT_EQ(*counts, want);
}

TEST_P(JobsTest, AHeldJobStaysPendingAndIsNotPlaced) {
  int64_t id = submitOne(store(), job("alice"), at(1));
  ASSERT_TRUE(store().setJobHold(id, "user", at(2), "JobHeldUser").isOk());
  auto held = store().getJob(id);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(held->hold, "user");
  EXPECT_EQ(held->reason, "JobHeldUser");
  EXPECT_EQ(held->state, api::JobState::kPending);
  auto placed = store().recordPlacement(id, "[]", at(3), "placed");
  EXPECT_EQ(placed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().getJob(id)->epoch, 0);  // nothing of the placement was written
  EXPECT_EQ(store().setJobHold(id, "later", at(3), "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store().setJobHold(999999, "user", at(3), "x").code(), StatusCode::kNotFound);

  ASSERT_TRUE(store().setJobHold(id, "", at(4), "released").isOk());
  EXPECT_EQ(store().getJob(id)->hold, "");
  auto events = store().jobEvents(id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ(events->at(1).from_state, api::JobState::kPending);
  EXPECT_EQ(events->at(1).to_state, api::JobState::kPending);
  EXPECT_EQ(events->at(1).reason, "JobHeldUser");
  EXPECT_EQ(events->at(2).reason, "released");
  ASSERT_TRUE(store().recordPlacement(id, "[]", at(5), "placed").ok());
  EXPECT_EQ(store().setJobHold(id, "admin", at(6), "JobHeldAdmin").code(),
            StatusCode::kFailedPrecondition);
}

TEST_P(JobsTest, UpdateChangesAPendingJobsSpecAndPriority) {
  int64_t id = submitOne(store(), job("alice"), at(1));
  ASSERT_TRUE(store().updateJob({id, R"({"command":["x"]})", 42, at(2), "priority 42"}).isOk());
  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->spec_json, R"({"command":["x"]})");
  EXPECT_EQ(got->priority, 42);
  EXPECT_EQ(got->reason, "submitted");  // the job's own reason stays
  auto events = store().jobEvents(id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->back().reason, "priority 42");
  EXPECT_EQ(store().updateJob({999999, "{}", 1, at(3), "x"}).code(), StatusCode::kNotFound);
  ASSERT_TRUE(store().recordPlacement(id, "[]", at(4), "placed").ok());
  EXPECT_EQ(store().updateJob({id, "{}", 1, at(5), "x"}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().getJob(id)->priority, 42);
}

TEST_P(JobsTest, ArrayBatchNamesItsFirstJobAsParent) {
  std::vector<NewJob> batch;
  for (int i = 0; i < 4; ++i) {
    NewJob j = job("bob");
    j.array_parent = -1;
    j.array_index = i;
    batch.push_back(j);
  }
  auto ids = store().submitJobs(batch, at(0));
  ASSERT_TRUE(ids.ok()) << ids.status().toString();
  ASSERT_EQ(ids->size(), 4u);
  for (size_t i = 1; i < ids->size(); ++i)
    EXPECT_GT(ids->at(i), ids->at(i - 1));
  // The first element names itself, as Slurm's ArrayJobId does.
  for (size_t i = 0; i < 4; ++i) {
    auto element = store().getJob(ids->at(i));
    ASSERT_TRUE(element.ok());
    EXPECT_EQ(element->array_parent, ids->at(0));
    EXPECT_EQ(element->array_index, static_cast<int32_t>(i));
  }
  JobFilter filter;
  filter.array_parent = ids->at(0);
  auto page = store().listJobs(filter);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.size(), 4u);
  // A later batch can add elements to the same array by naming its id.
  NewJob more = job("bob");
  more.array_parent = ids->at(0);
  more.array_index = 4;
  ASSERT_TRUE(store().submitJobs({more}, at(1)).ok());
  EXPECT_EQ(store().listJobs(filter)->jobs.size(), 5u);
}

TEST_P(JobsTest, TaskFilesGoIntoTheTasksAllocationAtTheCurrentEpochOnly) {
  int64_t id = submitOne(store(), job("dave"), at(0));
  const std::string placement =
      R"([{"task":0,"node":"n1","slices":[],"cpus_milli":1000,"ram_mib":0},)"
      R"({"task":1,"node":"n2","slices":[],"cpus_milli":1000,"ram_mib":0}])";
  TaskFiles files{"/t/1.1/stdout.log", "/t/1.1/stderr.log", "/var/lib/gpool/agent/shell.sock"};
  // Not running yet: nothing to record.
  EXPECT_EQ(store().recordTaskFiles(id, 0, 1, files).code(), StatusCode::kFailedPrecondition);
  auto epoch = store().recordPlacement(id, placement, at(5), "placed");
  ASSERT_TRUE(epoch.ok()) << epoch.status().toString();
  EXPECT_EQ(store().recordTaskFiles(id, *epoch - 1, 1, files).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().recordTaskFiles(id, *epoch, 7, files).code(), StatusCode::kNotFound);
  ASSERT_TRUE(store().recordTaskFiles(id, *epoch, 1, files).isOk());
  ASSERT_TRUE(store().recordTaskFiles(id, *epoch, 1, files).isOk());  // idempotent

  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok()) << got.status().toString();
  auto stored = nlohmann::json::parse(got->placement_json);
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_FALSE(stored[0].contains("stdout_log"));
  EXPECT_EQ(stored[1]["node"], "n2");
  EXPECT_EQ(stored[1]["stdout_log"], "/t/1.1/stdout.log");
  EXPECT_EQ(stored[1]["stderr_log"], "/t/1.1/stderr.log");
  EXPECT_EQ(stored[1]["shell_socket"], "/var/lib/gpool/agent/shell.sock");
  EXPECT_EQ(got->state, api::JobState::kRunning);
}

TEST_P(JobsTest, LifecycleRecordsEventsEpochsAndUsage) {
  int64_t id = submitOne(store(), job("carol", "nlp", 500), at(0));
  auto epoch = store().recordPlacement(id, R"({"node":"n1","gpus":["GPU-1"]})", at(5), "placed");
  ASSERT_TRUE(epoch.ok()) << epoch.status().toString();
  EXPECT_EQ(*epoch, 1);
  // A start reported for another epoch is fenced off.
  EXPECT_EQ(store().recordStart(id, 0, at(6), at(6)).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store().recordStart(id, 1, at(10), at(10)).isOk());
  ASSERT_TRUE(store().recordEnd(id, api::JobState::kCompleted, 0, at(10 + 7200), "exit 0").isOk());

  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, api::JobState::kCompleted);
  EXPECT_EQ(got->placement_json, R"({"node":"n1","gpus":["GPU-1"]})");
  EXPECT_EQ(got->start_time, at(10));
  EXPECT_EQ(got->end_time, at(7210));
  EXPECT_EQ(got->exit_code, 0);
  EXPECT_EQ(got->reason, "exit 0");

  auto events = store().jobEvents(id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ(events->at(1).from_state, api::JobState::kPending);
  EXPECT_EQ(events->at(1).to_state, api::JobState::kRunning);
  EXPECT_EQ(events->at(2).reason, "started");
  EXPECT_EQ(events->at(3).from_state, api::JobState::kRunning);
  EXPECT_EQ(events->at(3).to_state, api::JobState::kCompleted);
  for (size_t i = 1; i < events->size(); ++i)
    EXPECT_GT(events->at(i).seq, events->at(i - 1).seq);

  auto usage = store().usageOfJob(id);
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ(usage->at(0).gpu_thousandths, 500u);
  EXPECT_EQ(usage->at(0).start, at(10));
  EXPECT_EQ(usage->at(0).end, at(7210));
  EXPECT_EQ(usage->at(0).user, "carol");
}

// Issue 19 defect 5: a start reported again (a restarted gpoold or agent re-reports every
// running task) must not move the run's start or add a second "started" event; the start is the
// task's own, not the report's arrival.
TEST_P(JobsTest, AStartIsTheTasksOwnAndIsRecordedOncePerRun) {
  int64_t id = submitOne(store(), job("erin", "nlp", 1000), at(0));
  auto epoch = store().recordPlacement(id, R"({"node":"n1"})", at(5), "placed");
  ASSERT_TRUE(epoch.ok()) << epoch.status().toString();
  // Reported 2 s after the supervisor started the task.
  ASSERT_TRUE(store().recordStart(id, *epoch, at(8), at(10)).isOk());
  // gpoold restarted: the agent's hello reports the same task running, much later.
  ASSERT_TRUE(store().recordStart(id, *epoch, at(8), at(500)).isOk());
  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->start_time, at(8));
  // A second task of the job that started earlier moves the run's start back, without an event.
  ASSERT_TRUE(store().recordStart(id, *epoch, at(7), at(501)).isOk());
  got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->start_time, at(7));
  auto events = store().jobEvents(id);
  ASSERT_TRUE(events.ok());
  int started = 0;
  for (const auto& e : *events) {
    if (e.reason == "started") {
      ++started;
      EXPECT_EQ(e.time, at(8));
    }
  }
  EXPECT_EQ(started, 1);
  ASSERT_TRUE(store().recordEnd(id, api::JobState::kCompleted, 0, at(68), "exit 0").isOk());
  auto usage = store().usageOfJob(id);
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ(usage->at(0).start, at(7));
  EXPECT_EQ(usage->at(0).end, at(68));
}

TEST_P(JobsTest, AStartOutsideThePlacementAndTheReportIsKeptWithinThem) {
  int64_t early = submitOne(store(), job("erin"), at(0));
  auto epoch = store().recordPlacement(early, R"({"node":"n1"})", at(5), "placed");
  ASSERT_TRUE(epoch.ok());
  // A node clock behind gpoold's: the task cannot have started before it was placed.
  ASSERT_TRUE(store().recordStart(early, *epoch, at(2), at(6)).isOk());
  EXPECT_EQ(store().getJob(early)->start_time, at(5));
  int64_t late = submitOne(store(), job("erin"), at(0));
  epoch = store().recordPlacement(late, R"({"node":"n1"})", at(5), "placed");
  ASSERT_TRUE(epoch.ok());
  // A node clock ahead: not after the report arrived.
  ASSERT_TRUE(store().recordStart(late, *epoch, at(90), at(7)).isOk());
  EXPECT_EQ(store().getJob(late)->start_time, at(7));
}

TEST_P(JobsTest, TransitionFromTheWrongStateChangesNothing) {
  int64_t id = submitOne(store(), job("dave"), at(0));
  EXPECT_EQ(store().recordStart(id, 0, at(1), at(1)).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().recordPreemption(id, true, at(1), "x").code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(
      store()
          .recordEnd(id, api::JobState::kCancelled, std::nullopt, at(2), "cancelled by dave")
          .isOk());
  EXPECT_EQ(store().recordEnd(id, api::JobState::kCompleted, 0, at(3), "late").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().recordPlacement(id, "{}", at(3), "placed").status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().recordEnd(id, api::JobState::kRunning, 0, at(3), "not terminal").code(),
            StatusCode::kInvalidArgument);
  auto events = store().jobEvents(id);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 2u);
  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, api::JobState::kCancelled);
  EXPECT_EQ(got->end_time, at(2));
  // A cancel before the job ran uses no GPU time.
  EXPECT_TRUE(store().usageOfJob(id)->empty());
}

TEST_P(JobsTest, PreemptionRequeuesAndCountsTheUsageSoFar) {
  int64_t id = submitOne(store(), job("erin", "ml", 2000), at(0));
  ASSERT_TRUE(store().recordPlacement(id, R"({"node":"a"})", at(1), "placed").ok());
  ASSERT_TRUE(store().recordStart(id, 1, at(100), at(100)).isOk());
  ASSERT_TRUE(store().recordPreemption(id, true, at(100 + 1800), "preempted by qos high").isOk());
  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, api::JobState::kPending);
  EXPECT_EQ(got->requeue_count, 1);
  EXPECT_EQ(got->placement_json, "");
  EXPECT_FALSE(got->start_time.has_value());
  EXPECT_FALSE(got->end_time.has_value());
  auto events = store().jobEvents(id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 5u);
  EXPECT_EQ(events->at(3).from_state, api::JobState::kRunning);
  EXPECT_EQ(events->at(3).to_state, api::JobState::kPreempted);
  EXPECT_EQ(events->at(3).reason, "preempted by qos high");
  EXPECT_EQ(events->at(4).from_state, api::JobState::kPreempted);
  EXPECT_EQ(events->at(4).to_state, api::JobState::kPending);
  // The next placement gets a new epoch; the old epoch's start is refused.
  auto epoch = store().recordPlacement(id, R"({"node":"b"})", at(2000), "placed");
  ASSERT_TRUE(epoch.ok());
  EXPECT_EQ(*epoch, 2);
  EXPECT_EQ(store().recordStart(id, 1, at(2001), at(2001)).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store().recordStart(id, 2, at(2001), at(2001)).isOk());
  ASSERT_TRUE(store().recordPreemption(id, false, at(2001 + 3600), "preempted, no requeue").isOk());
  got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, api::JobState::kPreempted);
  EXPECT_EQ(got->end_time, at(5601));
  // The first attempt is kept with where it ran; the second (not requeued) is the job's own.
  auto attempts = store().jobAttempts(id);
  ASSERT_TRUE(attempts.ok()) << attempts.status().toString();
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_EQ(attempts->at(0).attempt, 1);
  EXPECT_EQ(attempts->at(0).epoch, 1);
  EXPECT_EQ(attempts->at(0).state, api::JobState::kPreempted);
  EXPECT_EQ(attempts->at(0).placement_json, R"({"node":"a"})");
  EXPECT_EQ(attempts->at(0).start_time, at(100));
  EXPECT_EQ(attempts->at(0).end_time, at(1900));
  EXPECT_EQ(store().jobAttempts(id + 1000).status().code(), StatusCode::kNotFound);

  auto usage = store().usageOfJob(id);
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 2u);
  auto report = store().usageReport(UsageGrouping::kUser, at(0), at(10'000));
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->size(), 1u);
  // 2 GPUs x 0.5 h + 2 GPUs x 1 h
  EXPECT_NEAR(report->at(0).gpu_hours, 3.0, 1e-9);
  EXPECT_EQ(report->at(0).jobs, 1);
}

TEST_P(JobsTest, GeneralTransitionChecksTheExpectedState) {
  int64_t id = submitOne(store(), job("fay"), at(0));
  JobTransition hold{id, {api::JobState::kRunning}, api::JobState::kPending, at(1), "held"};
  EXPECT_EQ(store().transitionJob(hold).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store().recordPlacement(id, "{}", at(1), "placed").ok());
  ASSERT_TRUE(store().recordStart(id, 1, at(2), at(2)).isOk());
  JobTransition completing{
      id, {api::JobState::kRunning}, api::JobState::kCompleting, at(3), "processes exited"};
  ASSERT_TRUE(store().transitionJob(completing).isOk());
  JobTransition timeout{
      id, {api::JobState::kCompleting}, api::JobState::kTimeout, at(4), "time limit"};
  ASSERT_TRUE(store().transitionJob(timeout).isOk());
  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, api::JobState::kTimeout);
  EXPECT_EQ(got->end_time, at(4));
  EXPECT_EQ(store().usageOfJob(id)->size(), 1u);
  EXPECT_EQ(store().transitionJob(JobTransition{id, {}, api::JobState::kFailed, at(5), ""}).code(),
            StatusCode::kInvalidArgument);
}

// The store writes only what the api's lifecycle table allows (api::checkJobTransition),
// whatever the caller expects: an illegal change is refused naming the job, from and to, and
// nothing of it is written.
TEST_P(JobsTest, IllegalTransitionsAreRefusedAndNothingIsWritten) {
  int64_t id = submitOne(store(), job("ivy", "ml", 1000), at(0));
  const std::string job_name = "job " + std::to_string(id) + ": ";
  // PENDING -> TIMEOUT: a job that never ran cannot run out of time.
  Status timeout = store().recordEnd(id, api::JobState::kTimeout, std::nullopt, at(1), "bogus");
  EXPECT_EQ(timeout.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(timeout.message().find(job_name + "illegal job state transition PENDING -> TIMEOUT"),
            std::string::npos)
      << timeout.toString();
  ASSERT_TRUE(store().recordPlacement(id, R"([])", at(2), "placed").ok());
  ASSERT_TRUE(store().recordStart(id, 1, at(3), at(3)).isOk());
  // RUNNING -> PENDING: only an ended attempt (PREEMPTED, NODE_FAIL) is requeued.
  Status back = store().transitionJob(
      {id, {api::JobState::kRunning}, api::JobState::kPending, at(4), "bogus"});
  EXPECT_EQ(back.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(back.message().find(job_name + "illegal job state transition RUNNING -> PENDING"),
            std::string::npos)
      << back.toString();
  // RUNNING -> RUNNING is no transition either.
  EXPECT_EQ(
      store()
          .transitionJob({id, {api::JobState::kRunning}, api::JobState::kRunning, at(4), "bogus"})
          .code(),
      StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store().recordEnd(id, api::JobState::kCompleted, 0, at(5), "exit 0").isOk());
  // COMPLETED -> PENDING: a completed job is never requeued.
  Status requeue = store().transitionJob(
      {id, {api::JobState::kCompleted}, api::JobState::kPending, at(6), "bogus"});
  EXPECT_EQ(requeue.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(requeue.message().find("COMPLETED -> PENDING"), std::string::npos)
      << requeue.toString();
  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, api::JobState::kCompleted);
  EXPECT_EQ(got->requeue_count, 0);
  EXPECT_EQ(got->end_time, at(5));
  auto events = store().jobEvents(id);
  ASSERT_TRUE(events.ok());
  for (const JobEvent& e : *events)
    EXPECT_NE(e.reason, "bogus") << e.fromStateName() << " -> " << api::jobStateName(e.to_state);
  EXPECT_EQ(store().usageOfJob(id)->size(), 1u);
  // A state the api does not know, written behind the store's back, is Internal when read.
  ASSERT_TRUE(store()
                  .execForTest("UPDATE jobs SET state = 'BOGUS' WHERE id = " + std::to_string(id))
                  .isOk());
  EXPECT_EQ(store().getJob(id).status().code(), StatusCode::kInternal);
  auto counts = store().countJobsByState();
  EXPECT_EQ(counts.status().code(), StatusCode::kInternal);
  EXPECT_NE(counts.status().message().find("'BOGUS'"), std::string::npos)
      << counts.status().toString();
  // So is an event's: the events are typed by the same mapping as the jobs' column.
  ASSERT_TRUE(store()
                  .execForTest("UPDATE job_events SET from_state = 'NOSUCH' WHERE job_id = " +
                               std::to_string(id) + " AND to_state = 'COMPLETED'")
                  .isOk());
  auto bad_events = store().jobEvents(id);
  EXPECT_EQ(bad_events.status().code(), StatusCode::kInternal);
  EXPECT_NE(bad_events.status().message().find("'NOSUCH'"), std::string::npos)
      << bad_events.status().toString();
}

// The scheduler's pending reason: a PENDING -> PENDING event, only for a PENDING job.
TEST_P(JobsTest, PendingReasonIsRecordedForPendingJobsOnly) {
  int64_t id = submitOne(store(), job("ivy"), at(0));
  ASSERT_TRUE(store().setJobReason(id, api::JobState::kPending, at(1), "Resources").isOk());
  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, api::JobState::kPending);
  EXPECT_EQ(got->reason, "Resources");
  auto events = store().jobEvents(id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->back().from_state, api::JobState::kPending);
  EXPECT_EQ(events->back().to_state, api::JobState::kPending);
  EXPECT_EQ(events->back().reason, "Resources");
  ASSERT_TRUE(store().recordPlacement(id, R"([])", at(2), "placed").ok());
  EXPECT_EQ(store().setJobReason(id, api::JobState::kPending, at(3), "Priority").code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store().setJobReason(id + 1000, api::JobState::kPending, at(3), "Priority").code(),
            StatusCode::kNotFound);
}

TEST_P(JobsTest, NodeFailRequeueStartsOver) {
  int64_t id = submitOne(store(), job("gus", "ml", 1000), at(0));
  auto epoch = store().recordPlacement(id, R"({"node":"n9"})", at(0), "placed");
  ASSERT_TRUE(epoch.ok());
  ASSERT_TRUE(store().recordStart(id, *epoch, at(0), at(0)).isOk());
  ASSERT_TRUE(
      store()
          .transitionJob(
              {id, {api::JobState::kRunning}, api::JobState::kNodeFail, at(3600), "node n9 down"})
          .isOk());
  ASSERT_TRUE(
      store()
          .transitionJob(
              {id, {api::JobState::kNodeFail}, api::JobState::kPending, at(3601), "requeued"})
          .isOk());
  auto got = store().getJob(id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->state, api::JobState::kPending);
  EXPECT_EQ(got->requeue_count, 1);
  EXPECT_FALSE(got->start_time.has_value());
  EXPECT_FALSE(got->end_time.has_value());
  EXPECT_EQ(got->placement_json, "");
  auto attempts = store().jobAttempts(id);
  ASSERT_TRUE(attempts.ok()) << attempts.status().toString();
  ASSERT_EQ(attempts->size(), 1u);
  EXPECT_EQ(attempts->at(0).attempt, 1);
  EXPECT_EQ(attempts->at(0).state, api::JobState::kNodeFail);
  EXPECT_EQ(attempts->at(0).placement_json, R"({"node":"n9"})");
  // The hour on the failed node is still accounted, once.
  auto usage = store().usageOfJob(id);
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ(usage->at(0).end, at(3600));
}

TEST_P(JobsTest, ListFiltersByUserGroupAndState) {
  std::vector<NewJob> batch;
  for (int i = 0; i < 12; ++i) {
    batch.push_back(job(i % 3 == 0 ? "ann" : "ben", i % 2 == 0 ? "g1" : "g2"));
  }
  auto ids = store().submitJobs(batch, at(0));
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(store().recordPlacement(ids->at(0), "{}", at(1), "placed").ok());
  ASSERT_TRUE(store().recordPlacement(ids->at(1), "{}", at(1), "placed").ok());

  JobFilter by_user;
  by_user.user = "ann";
  auto page = store().listJobs(by_user);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.size(), 4u);
  for (const auto& j : page->jobs)
    EXPECT_EQ(j.user, "ann");
  EXPECT_FALSE(page->next_after_id.has_value());

  JobFilter by_group_state;
  by_group_state.group = "g1";
  by_group_state.states = {api::JobState::kRunning};
  page = store().listJobs(by_group_state);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 1u);
  EXPECT_EQ(page->jobs[0].id, ids->at(0));

  JobFilter pending_or_running;
  pending_or_running.states = {api::JobState::kPending, api::JobState::kRunning};
  page = store().listJobs(pending_or_running);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->jobs.size(), 12u);

  auto active = store().jobsInStates({api::JobState::kRunning});
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(active->size(), 2u);
}

TEST_P(JobsTest, KeysetPagingIsStableAcrossInserts) {
  for (int i = 0; i < 25; ++i)
    submitOne(store(), job(i % 2 ? "u1" : "u2"), at(i));
  JobFilter filter;
  filter.user = "u1";
  filter.limit = 5;
  std::vector<int64_t> seen;
  int pages = 0;
  while (true) {
    auto page = store().listJobs(filter);
    ASSERT_TRUE(page.ok()) << page.status().toString();
    ++pages;
    for (const auto& j : page->jobs)
      seen.push_back(j.id);
    // Submissions between two pages land after every id already seen.
    if (pages == 1) {
      for (int i = 0; i < 4; ++i)
        submitOne(store(), job("u1"), at(100 + i));
    }
    if (!page->next_after_id) break;
    filter.after_id = *page->next_after_id;
  }
  // 12 + 4 later submissions, each exactly once and in order.
  ASSERT_EQ(seen.size(), 16u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), seen.size());
  for (size_t i = 1; i < seen.size(); ++i)
    EXPECT_LT(seen[i - 1], seen[i]);
  EXPECT_EQ(pages, 4);
}

TEST_P(JobsTest, ListRejectsBadPaging) {
  JobFilter f;
  f.limit = 0;
  EXPECT_EQ(store().listJobs(f).status().code(), StatusCode::kInvalidArgument);
  f.limit = kMaxPageSize + 1;
  EXPECT_EQ(store().listJobs(f).status().code(), StatusCode::kInvalidArgument);
  f.limit = 10;
  f.after_id = -1;
  EXPECT_EQ(store().listJobs(f).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store().submitJobs({job("")}, at(0)).status().code(), StatusCode::kInvalidArgument);
}

TEST_P(JobsTest, EventsAfterASeqFollowAllJobsInSeqOrderWithOwnerAndPlacement) {
  EXPECT_EQ(*store().lastJobEventSeq(), 0);
  std::atomic<int> notified{0};
  store().setJobEventListener([&] { ++notified; });
  int64_t a = submitOne(store(), job("alice", "vision"), at(0));
  int64_t b = submitOne(store(), job("bob", "nlp"), at(1));
  ASSERT_TRUE(store().recordPlacement(a, R"({"node":"n1"})", at(2), "placed").ok());
  ASSERT_TRUE(store()
                  .recordEnd(b, api::JobState::kCancelled, std::nullopt, at(3), "cancelled by bob")
                  .isOk());
  EXPECT_EQ(notified.load(), 4);
  // A refused transition writes nothing and tells nobody.
  EXPECT_FALSE(
      store().recordEnd(b, api::JobState::kCancelled, std::nullopt, at(4), "again").isOk());
  EXPECT_EQ(notified.load(), 4);
  // Reads and non-job writes do not call it either.
  ASSERT_TRUE(store().jobEvents(a).ok());
  EXPECT_EQ(notified.load(), 4);

  auto all = store().jobEventsAfter(0, 100);
  ASSERT_TRUE(all.ok()) << all.status().toString();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ(all->at(0).job_id, a);
  EXPECT_EQ(all->at(0).to_state, api::JobState::kPending);
  EXPECT_EQ(all->at(0).user, "alice");
  EXPECT_EQ(all->at(0).group, "vision");
  EXPECT_EQ(all->at(1).job_id, b);
  EXPECT_EQ(all->at(1).user, "bob");
  EXPECT_EQ(all->at(2).to_state, api::JobState::kRunning);
  EXPECT_EQ(all->at(2).placement_json, R"({"node":"n1"})");
  EXPECT_EQ(all->at(2).time, at(2));
  EXPECT_EQ(all->at(3).from_state, api::JobState::kPending);
  EXPECT_EQ(all->at(3).to_state, api::JobState::kCancelled);
  EXPECT_EQ(all->at(3).reason, "cancelled by bob");
  for (size_t i = 1; i < all->size(); ++i)
    EXPECT_GT(all->at(i).seq, all->at(i - 1).seq);
  EXPECT_EQ(*store().lastJobEventSeq(), all->back().seq);

  // Paging: after the second event, at most one.
  auto page = store().jobEventsAfter(all->at(1).seq, 1);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->size(), 1u);
  EXPECT_EQ(page->at(0).seq, all->at(2).seq);
  EXPECT_TRUE(store().jobEventsAfter(all->back().seq, 10)->empty());
  EXPECT_EQ(store().jobEventsAfter(0, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store().jobEventsAfter(0, kMaxPageSize + 1).status().code(),
            StatusCode::kInvalidArgument);

  store().setJobEventListener({});
  submitOne(store(), job("alice"), at(5));
  EXPECT_EQ(notified.load(), 4);
}

// The property a live feed relies on: a reader that keeps asking for "events after the last
// seq I saw" while writers commit concurrently never skips one (seq order is commit order, also
// on PostgreSQL with concurrent transactions).
TEST_P(JobsTest, TailingEventsAfterTheLastSeqMissesNoneUnderConcurrentWriters) {
  constexpr int kWriters = 4;
  constexpr int kJobsEach = 40;
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; i < kJobsEach; ++i) {
        int64_t id = submitOne(store(), job("user" + std::to_string(w)), at(i));
        EXPECT_TRUE(store().recordPlacement(id, "{}", at(i), "placed").ok());
        EXPECT_TRUE(
            store().recordEnd(id, api::JobState::kCompleted, 0, at(i + 1), "exit 0").isOk());
      }
    });
  }
  std::vector<int64_t> seen;
  int64_t last = 0;
  auto drain = [&] {
    auto page = store().jobEventsAfter(last, 50);
    ASSERT_TRUE(page.ok()) << page.status().toString();
    for (const JobEvent& e : *page) {
      seen.push_back(e.seq);
      last = e.seq;
    }
  };
  std::thread stopper([&] {
    for (auto& t : writers)
      t.join();
    done = true;
  });
  while (!done.load())
    drain();
  stopper.join();
  for (size_t before = 0; before != seen.size() || before == 0;) {
    before = seen.size();
    drain();
    if (before == seen.size()) break;
  }
  // Everything the writers committed, each once: compare with a fresh full read.
  std::vector<int64_t> expected;
  int64_t after = 0;
  while (true) {
    auto page = store().jobEventsAfter(after, kMaxPageSize);
    ASSERT_TRUE(page.ok());
    if (page->empty()) break;
    for (const JobEvent& e : *page)
      expected.push_back(e.seq);
    after = page->back().seq;
  }
  EXPECT_EQ(expected.size(), static_cast<size_t>(kWriters * kJobsEach * 3));
  EXPECT_EQ(seen, expected);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobsTest,
                         ::testing::Values(Backend::kSqlite, Backend::kPostgres), backendName);

}  // namespace
}  // namespace gpool::store::testing
