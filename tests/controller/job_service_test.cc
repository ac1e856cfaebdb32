#include "controller/job_service.h"

#include <gtest/gtest.h>

#include <set>

#include "controller/controller_fixture.h"

namespace gpool::controller {
namespace {

using testing::makeNode;
using testing::makeSpec;

class RecordingListener : public JobListener {
 public:
  void jobsChanged() override { ++changed; }
  void runningJobCancelled(const store::JobRecord& before) override {
    cancelled.push_back(before.id);
  }
  int changed = 0;
  std::vector<int64_t> cancelled;
};

Caller user(const std::string& name, Role role = Role::kUser) {
  Caller c;
  c.user = name;
  c.uid = 1000;
  c.role = role;
  return c;
}

class JobServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::addUser(*store_, "alice", 1000, {"ml"});
    testing::addUser(*store_, "bob", 1002, {"ml", "cv"});
    ASSERT_TRUE(registry_.registerNode(makeNode("gpu-01", 8, 81920)).ok());
    api::Node small = makeNode("gpu-02", 2, 16384);
    small.labels["zone"] = "a";
    ASSERT_TRUE(registry_.registerNode(small).ok());
  }

  Status submitStatus(const api::JobSpec& spec) {
    return service_.submit(alice_, SubmitRequest{spec, "", 0, "ml"}).status();
  }
  void expectBadField(const api::JobSpec& spec, const std::string& field) {
    Status s = submitStatus(spec);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << field << ": " << s.toString();
    EXPECT_EQ(s.message().rfind(field, 0), 0u) << "expected '" << field << "' in " << s.message();
  }

  testing::TempDir dir_;
  std::unique_ptr<store::SqliteStore> store_ = testing::openStore(dir_.path() + "/db");
  SimClock clock_;
  NodeRegistry registry_{*store_, clock_};
  RecordingListener listener_;
  JobService service_{*store_, registry_, clock_, &listener_};
  Caller alice_ = user("alice");
};

TEST_F(JobServiceTest, SubmitStoresPendingJobAndWakesTheLoop) {
  auto ids = service_.submit(alice_, SubmitRequest{makeSpec(250), "", 0, "ml"});
  ASSERT_TRUE(ids.ok()) << ids.status().toString();
  ASSERT_EQ(ids->size(), 1u);
  auto job = service_.show(alice_, ids->front());
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, api::JobState::kPending);
  EXPECT_EQ(job->user, "alice");
  EXPECT_EQ(job->group, "ml");
  EXPECT_EQ(job->spec.resources.gpus_milli, 250u);
  EXPECT_EQ(listener_.changed, 1);
}

TEST_F(JobServiceTest, ArrayIsExpanded) {
  api::JobSpec spec = makeSpec(1000);
  spec.array = *api::parseArraySpec("0-9%2");
  auto ids = service_.submit(alice_, SubmitRequest{spec, "", 0, "ml"});
  ASSERT_TRUE(ids.ok()) << ids.status().toString();
  ASSERT_EQ(ids->size(), 10u);
  for (size_t i = 0; i < ids->size(); ++i) {
    auto job = service_.show(alice_, (*ids)[i]);
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->array_job_id, static_cast<uint64_t>(ids->front()));
    EXPECT_EQ(job->array_index, static_cast<uint32_t>(i));
  }
}

TEST_F(JobServiceTest, EveryImpossibleRequestNamesItsField) {
  api::JobSpec s = makeSpec(9000);  // 9 GPUs; the largest server has 8
  expectBadField(s, "job.resources.gpus");
  s = makeSpec(2000);
  s.tasks = 5;
  s.nodes = 1;  // 10 GPUs on one server
  expectBadField(s, "job.tasks");
  s = makeSpec(500);
  s.resources.gpu_memory_mib = 100'000;
  expectBadField(s, "job.resources.gpu_memory");
  s = makeSpec(1000);
  s.constraints.min_gpu_memory_mib = 90'000;
  expectBadField(s, "job.constraints.min_gpu_memory");
  s = makeSpec(1000);
  s.constraints.gpu_models = {"H100"};
  expectBadField(s, "job.constraints.gpu_models");
  s = makeSpec(1000);
  s.constraints.min_compute_capability = api::ComputeCapability{9, 0};
  expectBadField(s, "job.constraints.min_compute_capability");
  s = makeSpec(0);
  s.resources.cpus_milli = 128'000;
  expectBadField(s, "job.resources.cpus");
  s = makeSpec(0);
  s.resources.ram_mib = 1024 * 1024;
  expectBadField(s, "job.resources.ram");
  s = makeSpec(1000);
  s.tasks = 3;
  s.nodes = 3;
  expectBadField(s, "job.nodes");
  s = makeSpec(1000);
  s.constraints.node_labels["zone"] = "b";
  expectBadField(s, "job.constraints.node_labels");
  s = makeSpec(1000);
  s.dependencies = {api::Dependency{api::DependencyKind::kAfterOk, 4242}};
  expectBadField(s, "job.dependencies[0]");
  // The api's own rules come first (an empty command of a batch job).
  s = makeSpec(1000);
  s.command.clear();
  expectBadField(s, "job.command");
  // Nothing of the rejected submissions was stored.
  auto page = service_.list(user("root", Role::kAdmin), store::JobFilter{});
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->jobs.empty());
  EXPECT_EQ(listener_.changed, 0);
}

TEST_F(JobServiceTest, FeasibleEdgesAreAccepted) {
  api::JobSpec s = makeSpec(8000);  // exactly the largest server
  EXPECT_TRUE(submitStatus(s).isOk());
  s = makeSpec(500);
  s.resources.gpu_memory_mib = 81920;
  EXPECT_TRUE(submitStatus(s).isOk());
  s = makeSpec(1000);
  s.constraints.node_labels["zone"] = "a";
  EXPECT_TRUE(submitStatus(s).isOk());
}

// The checks read the registry's cached pool summary: it follows registrations (a bigger
// server, a new label) and survives a restart of the registry.
TEST_F(JobServiceTest, PoolChecksFollowNewNodes) {
  api::JobSpec big = makeSpec(16'000);
  expectBadField(big, "job.resources.gpus");
  api::JobSpec labelled = makeSpec(1000);
  labelled.constraints.node_labels["zone"] = "b";
  expectBadField(labelled, "job.constraints.node_labels");
  api::Node large = makeNode("gpu-03", 16, 81920);
  large.labels["zone"] = "b";
  ASSERT_TRUE(registry_.registerNode(large).ok());
  EXPECT_TRUE(submitStatus(big).isOk());
  EXPECT_TRUE(submitStatus(labelled).isOk());
  // Re-registered with fewer GPUs and without the label: the summary shrinks again.
  ASSERT_TRUE(registry_.registerNode(makeNode("gpu-03", 4, 81920)).ok());
  expectBadField(big, "job.resources.gpus");
  expectBadField(labelled, "job.constraints.node_labels");
  NodeRegistry reloaded(*store_, clock_);
  ASSERT_TRUE(reloaded.load().isOk());
  std::shared_ptr<const PoolSummary> pool = reloaded.poolSummary();
  EXPECT_EQ(pool->nodes, 3u);
  EXPECT_EQ(pool->max_gpus, 8u);
  EXPECT_EQ(pool->max_gpu_memory_mib, 81920u);
  EXPECT_EQ(pool->labels.count({"zone", "a"}), 1u);
  EXPECT_EQ(pool->labels.count({"zone", "b"}), 0u);
}

TEST_F(JobServiceTest, SubmitAsSomeoneElseNeedsTheRole) {
  Status s = service_.submit(alice_, SubmitRequest{makeSpec(250), "bob", 1002, "ml"}).status();
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  auto ids =
      service_.submit(user("root", Role::kAdmin), SubmitRequest{makeSpec(250), "bob", 1002, "ml"});
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(store_->getJob(ids->front())->uid, 1002u);
}

TEST_F(JobServiceTest, ListPagesThroughEveryJobOnce) {
  for (int i = 0; i < 25; ++i) {
    ASSERT_TRUE(submitStatus(makeSpec(100)).isOk());
  }
  ASSERT_TRUE(service_.submit(user("bob"), SubmitRequest{makeSpec(100), "", 0, "cv"}).ok());
  std::set<int64_t> seen;
  store::JobFilter filter;
  filter.limit = 10;
  int pages = 0;
  while (true) {
    auto page = service_.list(alice_, filter);
    ASSERT_TRUE(page.ok()) << page.status().toString();
    ++pages;
    for (const auto& job : page->jobs) {
      EXPECT_EQ(job.user, "alice");  // a user sees only their own jobs
      EXPECT_TRUE(seen.insert(job.id).second) << "job " << job.id << " listed twice";
    }
    if (!page->next_after_id) break;
    filter.after_id = *page->next_after_id;
  }
  EXPECT_EQ(seen.size(), 25u);
  EXPECT_EQ(pages, 3);
  auto all = service_.list(user("root", Role::kAdmin), store::JobFilter{});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->jobs.size(), 26u);
}

TEST_F(JobServiceTest, ListRejectsBadPagingAndForeignFilters) {
  store::JobFilter f;
  f.limit = 0;
  EXPECT_EQ(service_.list(alice_, f).status().code(), StatusCode::kInvalidArgument);
  f.limit = store::kMaxPageSize + 1;
  EXPECT_EQ(service_.list(alice_, f).status().code(), StatusCode::kInvalidArgument);
  f = {};
  f.after_id = -1;
  EXPECT_EQ(service_.list(alice_, f).status().code(), StatusCode::kInvalidArgument);
  f = {};
  f.user = "bob";
  EXPECT_EQ(service_.list(alice_, f).status().code(), StatusCode::kPermissionDenied);
  Caller gadmin = user("gina", Role::kGroupAdmin);
  gadmin.admin_groups = {"ml"};
  f = {};
  f.group = "ml";
  EXPECT_TRUE(service_.list(gadmin, f).ok());
  f.group = "cv";
  EXPECT_EQ(service_.list(gadmin, f).status().code(), StatusCode::kPermissionDenied);
}

TEST_F(JobServiceTest, CancelPendingOnceWithEvent) {
  auto ids = service_.submit(alice_, SubmitRequest{makeSpec(250), "", 0, "ml"});
  ASSERT_TRUE(ids.ok());
  int64_t id = ids->front();
  ASSERT_TRUE(service_.cancel(alice_, id).isOk());
  EXPECT_EQ(store_->getJob(id)->state, api::JobState::kCancelled);
  EXPECT_TRUE(listener_.cancelled.empty());  // it held nothing
  EXPECT_EQ(service_.cancel(alice_, id).code(), StatusCode::kFailedPrecondition);
  auto events = service_.events(alice_, id);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->back().to_state, api::JobState::kCancelled);
  EXPECT_EQ(events->back().reason, "cancelled by alice");
}

TEST_F(JobServiceTest, CancelRunningStopsItsTasks) {
  auto ids = service_.submit(alice_, SubmitRequest{makeSpec(1000), "", 0, "ml"});
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(store_->recordPlacement(ids->front(), "[]", clock_.now(), "placed").ok());
  ASSERT_TRUE(service_.cancel(alice_, ids->front()).isOk());
  EXPECT_EQ(listener_.cancelled, std::vector<int64_t>{ids->front()});
}

// Each role tries each action on a job of another user of group "ml" through the service.
TEST_F(JobServiceTest, RolesActOnAnotherUsersJob) {
  struct Case {
    Caller caller;
    bool allowed;
  };
  Caller gadmin = user("gina", Role::kGroupAdmin);
  gadmin.admin_groups = {"ml"};
  Caller other_gadmin = user("otto", Role::kGroupAdmin);
  other_gadmin.admin_groups = {"cv"};
  std::vector<Case> cases = {{user("eve"), false},
                             {other_gadmin, false},
                             {gadmin, true},
                             {user("root", Role::kAdmin), true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.caller.user);
    auto ids = service_.submit(alice_, SubmitRequest{makeSpec(250), "", 0, "ml"});
    ASSERT_TRUE(ids.ok());
    int64_t id = ids->front();
    EXPECT_EQ(service_.show(c.caller, id).ok(), c.allowed);
    EXPECT_EQ(service_.events(c.caller, id).ok(), c.allowed);
    // Requeue of a pending job is illegal for everyone; the permission check comes first.
    StatusCode requeue = service_.requeue(c.caller, id).code();
    EXPECT_EQ(requeue, c.allowed ? StatusCode::kFailedPrecondition : StatusCode::kPermissionDenied);
    Status cancel = service_.cancel(c.caller, id);
    EXPECT_EQ(cancel.isOk(), c.allowed) << cancel.toString();
    EXPECT_EQ(store_->getJob(id)->state,
              c.allowed ? api::JobState::kCancelled : api::JobState::kPending);
  }
}

TEST_F(JobServiceTest, RequeueAfterNodeFail) {
  auto ids = service_.submit(alice_, SubmitRequest{makeSpec(1000), "", 0, "ml"});
  ASSERT_TRUE(ids.ok());
  int64_t id = ids->front();
  ASSERT_TRUE(store_->recordPlacement(id, "[]", clock_.now(), "placed").ok());
  ASSERT_TRUE(
      store_
          ->transitionJob(store::JobTransition{
              id, {api::JobState::kRunning}, api::JobState::kNodeFail, clock_.now(), "node lost"})
          .isOk());
  ASSERT_TRUE(service_.requeue(alice_, id).isOk());
  auto job = store_->getJob(id);
  EXPECT_EQ(job->state, api::JobState::kPending);
  EXPECT_EQ(job->requeue_count, 1);
}

// The service's actions go through the one lifecycle (api/job.h): an action its table does not
// allow from the job's state is FailedPrecondition naming the job and the transition, and leaves
// the job, its events, its usage and the scheduling loop untouched.
TEST_F(JobServiceTest, IllegalTransitionsAreRefusedAndNothingIsWritten) {
  auto ids = service_.submit(alice_, SubmitRequest{makeSpec(1000), "", 0, "ml"});
  ASSERT_TRUE(ids.ok());
  const int64_t id = ids->front();
  const std::string job_name = "job " + std::to_string(id) + ": ";
  struct Snapshot {
    store::JobRecord job;
    size_t events = 0;
    size_t usage = 0;
    size_t attempts = 0;
  };
  auto snapshot = [&]() {
    Snapshot s;
    s.job = *store_->getJob(id);
    s.events = store_->jobEvents(id)->size();
    s.usage = store_->usageOfJob(id)->size();
    s.attempts = store_->jobAttempts(id)->size();
    return s;
  };
  auto expectUnchanged = [&](const Snapshot& before) {
    Snapshot after = snapshot();
    EXPECT_EQ(after.job.state, before.job.state);
    EXPECT_EQ(after.job.reason, before.job.reason);
    EXPECT_EQ(after.job.requeue_count, before.job.requeue_count);
    EXPECT_EQ(after.job.epoch, before.job.epoch);
    EXPECT_EQ(after.job.placement_json, before.job.placement_json);
    EXPECT_EQ(after.job.start_time, before.job.start_time);
    EXPECT_EQ(after.job.end_time, before.job.end_time);
    EXPECT_EQ(after.job.exit_code, before.job.exit_code);
    EXPECT_EQ(after.events, before.events);
    EXPECT_EQ(after.usage, before.usage);
    EXPECT_EQ(after.attempts, before.attempts);
  };
  auto expectRefused = [&](const Status& s, const std::string& transition) {
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.toString();
    EXPECT_NE(s.message().find(job_name + "illegal job state transition " + transition),
              std::string::npos)
        << s.toString();
  };

  // PENDING -> PENDING: only a preempted or node-failed job is requeued.
  int changed = listener_.changed;
  Snapshot pending = snapshot();
  expectRefused(service_.requeue(alice_, id), "PENDING -> PENDING");
  expectUnchanged(pending);

  // RUNNING -> PENDING: a running job is not requeued behind its tasks' back.
  ASSERT_TRUE(store_->recordPlacement(id, R"([{"node":"gpu-01"}])", clock_.now(), "placed").ok());
  clock_.advance(std::chrono::seconds(30));
  Snapshot running = snapshot();
  expectRefused(service_.requeue(alice_, id), "RUNNING -> PENDING");
  expectUnchanged(running);

  // COMPLETED -> CANCELLED and COMPLETED -> PENDING: an ended job stays as it ended.
  ASSERT_TRUE(store_->recordEnd(id, api::JobState::kCompleted, 0, clock_.now(), "exit 0").isOk());
  clock_.advance(std::chrono::seconds(30));
  Snapshot completed = snapshot();
  ASSERT_EQ(completed.usage, 1u);
  expectRefused(service_.cancel(alice_, id), "COMPLETED -> CANCELLED");
  expectUnchanged(completed);
  expectRefused(service_.requeue(alice_, id), "COMPLETED -> PENDING");
  expectUnchanged(completed);
  // Nor is the scheduling loop told of a change, or asked to stop tasks.
  EXPECT_EQ(listener_.changed, changed);
  EXPECT_TRUE(listener_.cancelled.empty());
}

TEST_F(JobServiceTest, UnknownJobIsNotFound) {
  EXPECT_EQ(service_.show(alice_, 999).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service_.cancel(alice_, 999).code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gpool::controller
