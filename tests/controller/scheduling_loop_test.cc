#include "controller/scheduling_loop.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "controller/accounting.h"
#include "controller/controller_fixture.h"
#include "store/api_codec.h"

namespace gpool::controller {
namespace {

using testing::makeNode;
using testing::makeSpec;

class FakeGateway : public AgentGateway {
 public:
  struct Cancel {
    std::string node;
    int64_t job_id;
    uint32_t task;
    int64_t epoch;
    int64_t grace_s;
    std::string reason;
  };
  void assign(const TaskAssignment& a) override { assigned.push_back(a); }
  void cancel(const std::string& node, int64_t job_id, uint32_t task, int64_t lease_epoch,
              int64_t grace_s, const std::string& reason) override {
    cancelled.push_back({node, job_id, task, lease_epoch, grace_s, reason});
  }
  std::vector<TaskAssignment> forJob(int64_t id) const {
    std::vector<TaskAssignment> out;
    for (const auto& a : assigned)
      if (a.job_id == id) out.push_back(a);
    return out;
  }
  std::vector<TaskAssignment> assigned;
  std::vector<Cancel> cancelled;
};

Caller alice() {
  Caller c;
  c.user = "alice";
  c.uid = 1001;
  return c;
}

// The controller's parts over one SQLite file, rebuilt by restart().
struct Controller {
  Controller(const std::string& db, SimClock& clock, AgentGateway& gateway,
             LoopOptions options = {})
      : store(testing::openStore(db)),
        registry(*store, clock, NodeRegistryOptions{std::chrono::seconds(90)}),
        loop(*store, registry, gateway, clock, std::move(options)),
        service(*store, registry, clock, &loop) {}
  std::unique_ptr<store::SqliteStore> store;
  NodeRegistry registry;
  SchedulingLoop loop;
  JobService service;
};

class SchedulingLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    restart();
    testing::addUser(*ctl_->store, "alice", 1001, {"ml", "vision"});
  }
  void restart() {
    ctl_.reset();
    ctl_ = std::make_unique<Controller>(dir_.path() + "/db", clock_, gateway_, options_);
    ASSERT_TRUE(ctl_->registry.load().isOk());
    ASSERT_TRUE(ctl_->loop.recover().isOk());
  }
  int64_t submit(const api::JobSpec& spec, const std::string& group = "ml") {
    auto ids = ctl_->service.submit(alice(), SubmitRequest{spec, "", 0, group});
    EXPECT_TRUE(ids.ok()) << ids.status().toString();
    return ids.ok() ? ids->front() : 0;
  }
  PassReport pass() {
    auto r = ctl_->loop.runOnce();
    EXPECT_TRUE(r.ok()) << r.status().toString();
    return r.ok() ? *r : PassReport{};
  }
  std::string state(int64_t id) {
    return std::string(api::jobStateName(ctl_->store->getJob(id)->state));
  }
  // Sets the quota of user alice or of a group, creating the record it belongs to first.
  void setQuota(store::QuotaSubject subject, const std::string& name, const api::Quota& quota) {
    if (subject == store::QuotaSubject::kUser) {
      if (!ctl_->store->getUser(name).ok()) testing::addUser(*ctl_->store, name, 1001, {});
    } else {
      api::Group group;
      group.name = name;
      ASSERT_TRUE(store::saveApiGroup(*ctl_->store, group).isOk());
    }
    Status s = store::saveApiQuota(*ctl_->store, subject, name, quota, "root", clock_.now());
    ASSERT_TRUE(s.isOk()) << s.toString();
  }

  testing::TempDir dir_;
  SimClock clock_;
  FakeGateway gateway_;
  LoopOptions options_;  // before restart()
  std::unique_ptr<Controller> ctl_;
};

// Idle reclaim on the loop's clock: flagged (an event and the job's reason) after `after` at 0 %
// and not a second sooner; stopped `grace` later and requeued (preemptible) or ended (not
// preemptible, the interactive allocation among them) per QoS, a "warn" QoS only flagged; a
// flagged job seen busy again is unflagged and its count starts over; busy jobs are left alone.
class IdleReclaimTest : public SchedulingLoopTest {
 protected:
  void SetUp() override {
    options_.idle.enabled = true;
    options_.idle.after_s = 2 * 3600;
    options_.idle.grace_s = 3600;
    options_.idle.qos_actions["dev"] = IdleAction::kWarn;
    options_.idle.jobs_idle = [this] { return idle_now_; };
    options_.scheduler.preemption.grace_s = 30;
    SchedulingLoopTest::SetUp();
  }
  std::string reason(int64_t id) { return ctl_->store->getJob(id)->reason; }
  bool cancelled(int64_t id) {
    return std::any_of(gateway_.cancelled.begin(), gateway_.cancelled.end(),
                       [id](const FakeGateway::Cancel& c) { return c.job_id == id; });
  }
  // Time passes; the node's agent keeps heartbeating (it would be DOWN after 90 s of silence).
  void later(Micros d) {
    clock_.advance(d);
    ASSERT_TRUE(ctl_->registry.heartbeat("gpu-01").isOk());
  }
  std::map<int64_t, bool> idle_now_;
};

TEST_F(IdleReclaimTest, FlagsThenRequeuesOrEndsPerQosAndCallsOffWhenUsed) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 8)).ok());
  api::Qos dev_level;  // a level whose idle jobs are only warned ([idle_reclaim.qos] dev = warn)
  dev_level.name = "dev";
  ASSERT_TRUE(store::saveApiQos(*ctl_->store, dev_level).isOk());
  api::JobSpec restartable = makeSpec(1000, "restartable");
  restartable.preemptible = true;
  const int64_t requeued = submit(restartable);
  const int64_t ended = submit(makeSpec(1000, "batch"));
  api::JobSpec alloc = makeSpec(1000, "interactive");
  alloc.interactive = true;
  alloc.command.clear();
  const int64_t interactive = submit(alloc);
  api::JobSpec dev = makeSpec(1000, "dev");
  dev.qos = "dev";
  const int64_t warned_only = submit(dev);
  const int64_t busy = submit(makeSpec(1000, "busy"));
  const int64_t back = submit(makeSpec(1000, "used-again"));
  pass();
  for (int64_t id : {requeued, ended, interactive, warned_only, busy, back}) {
    ASSERT_EQ(state(id), "RUNNING") << id;
  }
  idle_now_ = {{requeued, true},    {ended, true}, {interactive, true},
               {warned_only, true}, {busy, false}, {back, true}};
  pass();  // idle from now

  later(std::chrono::hours(2) - std::chrono::seconds(1));
  pass();
  for (int64_t id : {requeued, ended, interactive, warned_only, back}) {
    EXPECT_EQ(reason(id).rfind(kIdleReasonPrefix, 0), std::string::npos) << id << reason(id);
  }
  later(std::chrono::seconds(1));
  pass();
  for (int64_t id : {requeued, ended, interactive, warned_only, back}) {
    EXPECT_EQ(reason(id).rfind(kIdleReasonPrefix, 0), 0u) << id << ": " << reason(id);
  }
  EXPECT_NE(reason(requeued).find("requeued at"), std::string::npos) << reason(requeued);
  EXPECT_NE(reason(ended).find("ended at"), std::string::npos) << reason(ended);
  EXPECT_NE(reason(warned_only).find("not reclaimed"), std::string::npos) << reason(warned_only);
  EXPECT_EQ(reason(busy).rfind(kIdleReasonPrefix, 0), std::string::npos);
  auto events = ctl_->store->jobEvents(ended);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().from_state, api::JobState::kRunning);
  EXPECT_EQ(events->back().to_state, api::JobState::kRunning);

  // Used again: unflagged, and its idle time counts from the next idle reading.
  idle_now_[back] = false;
  later(std::chrono::minutes(10));
  pass();
  EXPECT_NE(reason(back).find("GPU use seen again"), std::string::npos) << reason(back);
  idle_now_[back] = true;
  pass();

  later(std::chrono::minutes(50) - std::chrono::seconds(1));  // 2h59m59s idle
  pass();
  EXPECT_TRUE(gateway_.cancelled.empty());
  later(std::chrono::seconds(1));  // 3h: after + grace
  pass();
  EXPECT_TRUE(cancelled(requeued));
  EXPECT_TRUE(cancelled(ended));
  EXPECT_TRUE(cancelled(interactive));
  EXPECT_FALSE(cancelled(warned_only));
  EXPECT_FALSE(cancelled(busy));
  EXPECT_FALSE(cancelled(back));
  // The agents stop the tasks (SIGTERM, grace) and report them ended.
  for (int64_t id : {requeued, ended, interactive}) {
    auto epoch = ctl_->store->getJob(id)->epoch;
    ASSERT_TRUE(ctl_->loop.taskEnded(id, 0, epoch, 143, TaskOutcome::kCancelled).isOk()) << id;
  }
  EXPECT_EQ(state(requeued), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(requeued)->requeue_count, 1);
  EXPECT_EQ(state(ended), "PREEMPTED");
  EXPECT_EQ(state(interactive), "PREEMPTED");
  EXPECT_NE(reason(ended).find("idle reclaim: every GPU at 0 % for 03:00:00, ended"),
            std::string::npos)
      << reason(ended);
  auto requeue_events = ctl_->store->jobEvents(requeued);
  ASSERT_TRUE(requeue_events.ok());
  ASSERT_GE(requeue_events->size(), 2u);
  const store::JobEvent& preempted = (*requeue_events)[requeue_events->size() - 2];
  EXPECT_EQ(preempted.to_state, api::JobState::kPreempted);
  EXPECT_NE(preempted.reason.find("idle reclaim"), std::string::npos) << preempted.reason;
  EXPECT_EQ(state(warned_only), "RUNNING");
  EXPECT_EQ(state(busy), "RUNNING");
  EXPECT_EQ(state(back), "RUNNING");
}

// Issue 22: the idle time survives a controller restart. Idle 40 s of 40 s + 20 s, restarted
// (no telemetry in the restarted controller's first pass), the job is reclaimed 20 s after the
// restart, not 60 s; a job seen busy after the restart loses its stored idle time.
TEST_F(IdleReclaimTest, IdleTimeSurvivesARestart) {
  options_.idle.after_s = 40;
  options_.idle.grace_s = 20;
  restart();
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 8)).ok());
  const int64_t idle = submit(makeSpec(1000, "idle"));
  const int64_t busy_again = submit(makeSpec(1000, "busy-again"));
  pass();
  ASSERT_EQ(state(idle), "RUNNING");
  idle_now_ = {{idle, true}, {busy_again, true}};
  pass();  // idle from now
  later(std::chrono::seconds(40));
  pass();
  EXPECT_EQ(reason(idle).rfind(kIdleReasonPrefix, 0), 0u) << reason(idle);

  restart();
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 8)).ok());  // its agent's hello
  const std::map<int64_t, bool> readings = idle_now_;
  idle_now_.clear();
  pass();  // before the agents' first telemetry: nothing known, nothing forgotten
  idle_now_ = readings;
  idle_now_[busy_again] = false;
  later(std::chrono::seconds(19));
  pass();
  EXPECT_FALSE(cancelled(idle)) << "reclaimed before 60 s of idle";
  later(std::chrono::seconds(1));
  pass();
  EXPECT_TRUE(cancelled(idle))
      << "not reclaimed 60 s after it became idle (20 s after the restart)";
  EXPECT_FALSE(cancelled(busy_again));
  auto stored = ctl_->store->jobsIdleSince();
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->count(busy_again), 0u);
  EXPECT_EQ(stored->count(idle), 1u);
  // Its end takes its idle time with it.
  ASSERT_TRUE(
      ctl_->loop.taskEnded(idle, 0, ctl_->store->getJob(idle)->epoch, 143, TaskOutcome::kCancelled)
          .isOk());
  EXPECT_EQ(state(idle), "PREEMPTED");
  pass();
  stored = ctl_->store->jobsIdleSince();
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->empty());
}

// A held job stays PENDING with its JobHeld reason through passes; released, it is placed.
TEST_F(SchedulingLoopTest, HeldJobIsNotPlacedUntilReleased) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());
  int64_t id = submit(makeSpec(1000));
  ASSERT_TRUE(ctl_->service.hold(alice(), id).isOk());
  pass();
  pass();
  EXPECT_EQ(state(id), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(id)->reason, "JobHeldUser");
  EXPECT_TRUE(gateway_.forJob(id).empty());
  restart();                                                             // the hold is durable
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());  // its agent's hello
  pass();
  EXPECT_EQ(state(id), "PENDING");
  ASSERT_TRUE(ctl_->service.release(alice(), id).isOk());
  pass();
  EXPECT_EQ(state(id), "RUNNING");
  EXPECT_EQ(gateway_.forJob(id).size(), 1u);
}

// --min-cuda (issue 22): a job needing CUDA 12.2 goes only to GPUs whose driver supports it;
// with no such server in the pool it waits with BadConstraints naming min_cuda (the mismatch
// reported to the user), and runs once a server with a newer driver joins.
TEST_F(SchedulingLoopTest, MinCudaIsHonouredByPlacementAndNamedWhenNoServerHasIt) {
  api::Node old_driver = makeNode("gpu-old", 2);
  for (api::Gpu& g : old_driver.gpus)
    g.cuda_version = "11.4";
  ASSERT_TRUE(ctl_->registry.registerNode(old_driver).ok());
  api::JobSpec spec = makeSpec(1000, "needs-12.2");
  spec.constraints.min_cuda = api::CudaVersion{12, 2};
  const int64_t needs = submit(spec);
  const int64_t any = submit(makeSpec(1000, "any"));
  pass();
  EXPECT_EQ(state(any), "RUNNING");
  EXPECT_EQ(state(needs), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(needs)->reason, "BadConstraints");
  auto insight = ctl_->loop.pendingInsight(needs);
  ASSERT_TRUE(insight.has_value());
  EXPECT_NE(insight->detail.find("min_cuda"), std::string::npos) << insight->detail;

  api::Node new_driver = makeNode("gpu-new", 2);
  for (api::Gpu& g : new_driver.gpus)
    g.cuda_version = "12.4";
  ASSERT_TRUE(ctl_->registry.registerNode(new_driver).ok());
  pass();
  ASSERT_EQ(state(needs), "RUNNING");
  ASSERT_EQ(gateway_.forJob(needs).size(), 1u);
  EXPECT_EQ(gateway_.forJob(needs)[0].node, "gpu-new");
  // 12.10 is newer than 12.2 (not a decimal).
  api::Node newest = makeNode("gpu-newest", 1);
  newest.gpus[0].cuda_version = "12.10";
  ASSERT_TRUE(ctl_->registry.registerNode(newest).ok());
  api::JobSpec spec9 = makeSpec(1000, "needs-12.9");
  spec9.constraints.min_cuda = api::CudaVersion{12, 9};
  const int64_t needs9 = submit(spec9);
  pass();
  ASSERT_EQ(gateway_.forJob(needs9).size(), 1u);
  EXPECT_EQ(gateway_.forJob(needs9)[0].node, "gpu-newest");
}

// An admin's priority change (PATCH /v1/jobs/{id}) reorders the queue.
TEST_F(SchedulingLoopTest, PatchedPriorityGoesFirst) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());
  int64_t first = submit(makeSpec(2000));
  int64_t second = submit(makeSpec(2000));
  Caller admin;
  admin.user = "root";
  admin.role = Role::kAdmin;
  EXPECT_EQ(ctl_->service.update(alice(), second, std::nullopt, 100).code(),
            StatusCode::kPermissionDenied);
  ASSERT_TRUE(ctl_->service.update(admin, second, std::nullopt, 100'000).isOk());
  pass();
  EXPECT_EQ(state(second), "RUNNING");
  EXPECT_EQ(state(first), "PENDING");
}

// A pass keeps each job's decoded spec for the next; a spec whose stored text changed is decoded
// again. Here the stored spec of a job waiting on a dependency loses the dependency: the next
// pass starts it (with the spec kept from the first pass it would wait on).
TEST_F(SchedulingLoopTest, ASpecChangedBetweenPassesIsReadAgain) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());
  int64_t a = submit(makeSpec(1000));
  api::JobSpec after_a = makeSpec(1000);
  after_a.dependencies = {api::Dependency{api::DependencyKind::kAfterOk, uint64_t(a)}};
  int64_t b = submit(after_a);
  pass();
  pass();
  EXPECT_EQ(state(a), "RUNNING");
  EXPECT_EQ(state(b), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(b)->reason, "Dependency");
  const std::string plain = api::toJson(makeSpec(1000)).dump();
  ASSERT_TRUE(ctl_->store
                  ->execForTest("UPDATE jobs SET spec_json = '" + plain +
                                "' WHERE id = " + std::to_string(b))
                  .isOk());
  pass();
  EXPECT_EQ(state(b), "RUNNING");
}

TEST_F(SchedulingLoopTest, SubmitPlacedRunningCompleted) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());
  int64_t id = submit(makeSpec(1000));
  PassReport r = pass();
  EXPECT_EQ(r.started, 1u);
  ASSERT_EQ(gateway_.assigned.size(), 1u);
  const TaskAssignment& a = gateway_.assigned[0];
  EXPECT_EQ(a.job_id, id);
  EXPECT_EQ(a.node, "gpu-01");
  EXPECT_EQ(a.lease_epoch, 1);
  EXPECT_EQ(a.node_epoch, ctl_->registry.nodeEpoch("gpu-01"));
  ASSERT_EQ(a.allocation.slices.size(), 1u);
  EXPECT_TRUE(a.allocation.slices[0].exclusive);
  EXPECT_EQ(state(id), "RUNNING");

  ASSERT_TRUE(ctl_->loop.taskStarted(id, a.lease_epoch).isOk());
  EXPECT_EQ(ctl_->loop.taskStarted(id, a.lease_epoch + 1).code(), StatusCode::kFailedPrecondition);
  clock_.advance(std::chrono::hours(1));
  ASSERT_TRUE(ctl_->loop.taskEnded(id, 0, a.lease_epoch, 0, TaskOutcome::kExited).isOk());
  EXPECT_EQ(state(id), "COMPLETED");
  // A repeated report records nothing twice.
  EXPECT_EQ(ctl_->loop.taskEnded(id, 0, a.lease_epoch, 0, TaskOutcome::kExited).code(),
            StatusCode::kFailedPrecondition);
  auto hours = jobGpuHours(*ctl_->store, id);
  ASSERT_TRUE(hours.ok());
  EXPECT_NEAR(*hours, 1.0, 1e-9);
  EXPECT_NEAR(ctl_->loop.userUsage("alice"), 3600.0, 1e-6);
  EXPECT_NEAR(ctl_->loop.groupUsage("ml"), 3600.0, 1e-6);
  // Nothing runs twice (the node is alive: it just has nothing new to run).
  ASSERT_TRUE(ctl_->registry.heartbeat("gpu-01").isOk());
  PassReport again = pass();
  EXPECT_TRUE(again.lost_nodes.empty());
  EXPECT_EQ(again.started, 0u);
  EXPECT_EQ(gateway_.assigned.size(), 1u);
}

// Issue 19 defect 5: start and end are the task's own (its supervisor's records). A gpoold
// restart re-reports the running task: its start stays, no second "started" event; its end,
// reported late, is when it ended; the usage covers exactly the run.
TEST_F(SchedulingLoopTest, StartAndEndAreTheTasksOwnAcrossARestartAndALateReport) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());
  int64_t id = submit(makeSpec(1000));
  ASSERT_EQ(pass().started, 1u);
  const TaskAssignment a = gateway_.assigned.at(0);
  const TimePoint started = clock_.now() + std::chrono::milliseconds(300);
  clock_.advance(std::chrono::seconds(1));
  ASSERT_TRUE(ctl_->loop.taskStarted(id, a.lease_epoch, started).isOk());
  clock_.advance(std::chrono::seconds(10));
  restart();  // gpoold restarted: the agent's hello reports the task running again
  ASSERT_TRUE(ctl_->loop.taskStarted(id, a.lease_epoch, started).isOk());
  const TimePoint ended = clock_.now() + std::chrono::seconds(50);
  clock_.advance(std::chrono::seconds(62));  // the end is reported 12 s late
  ASSERT_TRUE(
      ctl_->loop.taskEnded(id, 0, a.lease_epoch, 0, TaskOutcome::kExited, "", ended).isOk());
  auto job = ctl_->store->getJob(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, api::JobState::kCompleted);
  EXPECT_EQ(job->start_time, started);
  EXPECT_EQ(job->end_time, ended);
  auto events = ctl_->store->jobEvents(id);
  ASSERT_TRUE(events.ok());
  int started_events = 0;
  for (const auto& e : *events)
    started_events += e.reason == "started" ? 1 : 0;
  EXPECT_EQ(started_events, 1);
  auto usage = ctl_->store->usageOfJob(id);
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ(usage->at(0).start, started);
  EXPECT_EQ(usage->at(0).end, ended);
  EXPECT_NEAR(ctl_->loop.userUsage("alice"), 60.7, 0.01);  // decayed over 12 s only
}

// Pacing (LoopOptions::min_gap, 50 ms by default): 1,000 submissions over one simulated
// second wake the loop 1,000 times but run about one pass per gap, not one per submission, and
// what was submitted during the burst is placed within one gap after it.
TEST_F(SchedulingLoopTest, BurstOfSubmissionsRunsBoundedPasses) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 8)).ok());
  ctl_->loop.tick();  // the first step always runs a pass
  ASSERT_EQ(ctl_->loop.passesRun(), 1u);
  int64_t last = 0;
  for (int i = 0; i < 1000; ++i) {
    clock_.advance(std::chrono::milliseconds(1));
    ctl_->loop.tick();
    last = submit(makeSpec(i < 999 ? 1000 : 250));
  }
  // 1 s / 50 ms: twenty gap-paced passes, plus the one at the start (without the gap: 1,001).
  EXPECT_EQ(ctl_->loop.passesRun(), 21u);
  // The last submission is still waiting for its gap, and gets its pass when the gap is over.
  bool event_pending = false;
  Micros wait = ctl_->loop.tick(&event_pending);
  EXPECT_TRUE(event_pending);
  EXPECT_GT(wait, Micros{0});
  EXPECT_LE(wait, std::chrono::milliseconds(50));
  clock_.advance(wait);
  uint64_t before = ctl_->loop.passesRun();
  ctl_->loop.tick(&event_pending);
  EXPECT_EQ(ctl_->loop.passesRun(), before + 1);
  EXPECT_FALSE(event_pending);
  // Eight GPUs: eight whole-GPU jobs run, and the last (fractional) job waits its turn.
  EXPECT_EQ(gateway_.assigned.size(), 8u);
  EXPECT_EQ(state(last), "PENDING");
}

TEST_F(SchedulingLoopTest, SingleSubmitStartsWithinOneGap) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());
  ctl_->loop.tick();
  // After a quiet spell (longer than the gap, shorter than the timer) a submission's pass runs
  // at once.
  clock_.advance(std::chrono::seconds(1));
  int64_t first = submit(makeSpec(1000));
  ctl_->loop.tick();
  EXPECT_EQ(ctl_->loop.passesRun(), 2u);
  EXPECT_EQ(state(first), "RUNNING");
  // One right after a pass waits for the rest of the gap, no longer.
  clock_.advance(std::chrono::milliseconds(20));
  int64_t second = submit(makeSpec(1000));
  bool event_pending = false;
  Micros wait = ctl_->loop.tick(&event_pending);
  EXPECT_EQ(ctl_->loop.passesRun(), 2u);
  EXPECT_TRUE(event_pending);
  EXPECT_EQ(wait, std::chrono::milliseconds(30));
  EXPECT_EQ(state(second), "PENDING");
  clock_.advance(wait);
  ctl_->loop.tick();
  EXPECT_EQ(ctl_->loop.passesRun(), 3u);
  EXPECT_EQ(state(second), "RUNNING");
  // Without events, the timer (10 s) still runs passes.
  wait = ctl_->loop.tick(&event_pending);
  EXPECT_FALSE(event_pending);
  EXPECT_EQ(wait, std::chrono::seconds(10));
  clock_.advance(wait);
  ctl_->loop.tick();
  EXPECT_EQ(ctl_->loop.passesRun(), 4u);
}

TEST_F(SchedulingLoopTest, FailedExitAndOomAreRecorded) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());
  int64_t failed = submit(makeSpec(1000));
  int64_t oom = submit(makeSpec(1000));
  EXPECT_EQ(pass().started, 2u);
  ASSERT_TRUE(ctl_->loop.taskEnded(failed, 0, 1, 3, TaskOutcome::kExited).isOk());
  ASSERT_TRUE(ctl_->loop.taskEnded(oom, 0, 1, 137, TaskOutcome::kOomKilled).isOk());
  EXPECT_EQ(state(failed), "FAILED");
  EXPECT_EQ(ctl_->store->getJob(failed)->exit_code, 3);
  EXPECT_EQ(state(oom), "OUT_OF_MEMORY");
  // No words from the agent: the reason is the state.
  EXPECT_EQ(ctl_->store->getJob(oom)->reason, "OUT_OF_MEMORY");
}

// The agent's reason for a task's end reaches the job (`gpool show`, `gpool run`): a task the
// agent could not start says why, not only FAILED.
TEST_F(SchedulingLoopTest, TheAgentsReasonForAnEndIsTheJobsReason) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 8)).ok());
  int64_t single = submit(makeSpec(1000));
  api::JobSpec spec = makeSpec(1000);
  spec.tasks = 3;
  int64_t multi = submit(spec);
  int64_t fine = submit(makeSpec(1000));
  EXPECT_EQ(pass().started, 3u);
  std::string launch_error = "failed_precondition: cgroup gpool/1.0: no cpu controller";
  ASSERT_TRUE(ctl_->loop.taskEnded(single, 0, 1, -1, TaskOutcome::kExited, launch_error).isOk());
  EXPECT_EQ(state(single), "FAILED");
  EXPECT_EQ(ctl_->store->getJob(single)->reason, launch_error);
  // Of several tasks, the one that decided the state is named; a later, milder one is not.
  ASSERT_TRUE(ctl_->loop.taskEnded(multi, 0, 1, 0, TaskOutcome::kExited, "").isOk());
  ASSERT_TRUE(ctl_->loop.taskEnded(multi, 1, 1, 3, TaskOutcome::kExited, "exited with 3").isOk());
  ASSERT_TRUE(ctl_->loop
                  .taskEnded(multi, 2, 1, 137, TaskOutcome::kOomKilled,
                             "the kernel's OOM killer killed 1 process(es)")
                  .isOk());
  EXPECT_EQ(state(multi), "OUT_OF_MEMORY");
  EXPECT_EQ(ctl_->store->getJob(multi)->reason,
            "task 2: the kernel's OOM killer killed 1 process(es)");
  // A completed job has no reason, whatever the agent said; a long one is cut.
  ASSERT_TRUE(ctl_->loop.taskEnded(fine, 0, 1, 0, TaskOutcome::kExited, "exited").isOk());
  EXPECT_EQ(state(fine), "COMPLETED");
  EXPECT_EQ(ctl_->store->getJob(fine)->reason, "");
  int64_t verbose = submit(makeSpec(1000));
  EXPECT_EQ(pass().started, 1u);
  ASSERT_TRUE(
      ctl_->loop.taskEnded(verbose, 0, 1, 1, TaskOutcome::kExited, std::string(5000, 'x')).isOk());
  EXPECT_EQ(ctl_->store->getJob(verbose)->reason, std::string(512, 'x'));
}

TEST_F(SchedulingLoopTest, MultiTaskJobEndsWhenEveryTaskEnded) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 4)).ok());
  api::JobSpec spec = makeSpec(1000);
  spec.tasks = 2;
  int64_t id = submit(spec);
  EXPECT_EQ(pass().started, 1u);
  ASSERT_EQ(gateway_.forJob(id).size(), 2u);
  ASSERT_TRUE(ctl_->loop.taskEnded(id, 1, 1, 0, TaskOutcome::kExited).isOk());
  EXPECT_EQ(state(id), "RUNNING");
  ASSERT_TRUE(ctl_->loop.taskEnded(id, 0, 1, 0, TaskOutcome::kExited).isOk());
  EXPECT_EQ(state(id), "COMPLETED");
}

// Issue 19 defect 4: when the store cannot commit a job's end, every task's end stays (the
// agent sends the failed report again until acknowledged; the other tasks' ends were taken
// before): the same report again ends the job, from every task's end.
TEST_F(SchedulingLoopTest, TaskEndsAreKeptWhenTheStoreCannotCommitTheJobsEnd) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 4)).ok());
  api::JobSpec spec = makeSpec(1000);
  spec.tasks = 2;
  int64_t id = submit(spec);
  ASSERT_EQ(pass().started, 1u);
  bool job_ended = true;
  ASSERT_TRUE(
      ctl_->loop
          .taskEnded(id, 0, 1, 3, TaskOutcome::kExited, "exited with 3", std::nullopt, &job_ended)
          .isOk());
  EXPECT_FALSE(job_ended);  // kept in memory until the job's last task ends
  // The statements a read of the job takes: the next one after them (the job's end) fails.
  int reads = 1;
  for (; reads < 64; ++reads) {
    ctl_->store->failStatementForTest(reads);
    const bool read = ctl_->store->getJob(id).ok();
    ctl_->store->failStatementForTest(0);
    if (read) break;
  }
  ASSERT_LT(reads, 64);
  ctl_->store->failStatementForTest(reads);  // taskEnded reads the job (reads - 1), then ends it
  Status failed =
      ctl_->loop.taskEnded(id, 1, 1, 0, TaskOutcome::kExited, "", std::nullopt, &job_ended);
  ctl_->store->failStatementForTest(0);
  EXPECT_FALSE(failed.isOk());
  EXPECT_FALSE(job_ended);
  EXPECT_EQ(state(id), "RUNNING");
  // Task 1's report again: task 0's end was kept, so the job ends as both tasks did.
  ASSERT_TRUE(
      ctl_->loop.taskEnded(id, 1, 1, 0, TaskOutcome::kExited, "", std::nullopt, &job_ended).isOk());
  EXPECT_TRUE(job_ended);
  auto job = ctl_->store->getJob(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, api::JobState::kFailed);
  EXPECT_EQ(job->exit_code, 3);
  EXPECT_EQ(job->reason, "task 0: exited with 3");
}

// Two jobs of several tasks whose task 0 shares a server never get the same MASTER_PORT, even
// when their ids differ by a multiple of the port range (4096): the later one takes the next
// free port, stored with its placement so that a restarted controller sends the same one.
TEST_F(SchedulingLoopTest, RendezvousPortsOfJobsOnOneServerDiffer) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 4)).ok());
  api::JobSpec two = makeSpec(1000);
  two.tasks = 2;
  int64_t first = submit(two);
  EXPECT_EQ(pass().started, 1u);
  // 4095 array elements between them, waiting on the first job (never placed meanwhile).
  api::JobSpec waiting = makeSpec(1000);
  waiting.array = *api::parseArraySpec("0-4094");
  waiting.dependencies = {
      api::Dependency{api::DependencyKind::kAfterOk, static_cast<uint64_t>(first)}};
  submit(waiting);
  int64_t second = submit(two);
  ASSERT_EQ(second - first, int64_t{kRendezvousPorts});
  EXPECT_EQ(pass().started, 1u);
  ASSERT_EQ(gateway_.forJob(first).size(), 2u);
  ASSERT_EQ(gateway_.forJob(second).size(), 2u);
  const uint32_t port = rendezvousPreferredPort(first);
  ASSERT_EQ(port, rendezvousPreferredPort(second));  // the id formula alone would collide
  for (const TaskAssignment& a : gateway_.forJob(first))
    EXPECT_EQ(a.allocation.rendezvous_port, port);
  for (const TaskAssignment& a : gateway_.forJob(second))
    EXPECT_EQ(a.allocation.rendezvous_port, port + 1);
  // Stored: what a reconnected agent's desired state and the API show.
  auto job = store::loadApiJob(*ctl_->store, second);
  ASSERT_TRUE(job.ok());
  for (const api::Allocation& a : job->allocations)
    EXPECT_EQ(a.rendezvous_port, port + 1);
}

// A multi-task job's exit code is the highest of its tasks' (srun's rule), whatever their order.
TEST_F(SchedulingLoopTest, MultiTaskJobExitsWithItsTasksHighestCode) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 4)).ok());
  api::JobSpec spec = makeSpec(1000);
  spec.tasks = 3;
  int64_t id = submit(spec);
  EXPECT_EQ(pass().started, 1u);
  ASSERT_TRUE(ctl_->loop.taskEnded(id, 0, 1, 2, TaskOutcome::kExited).isOk());
  ASSERT_TRUE(ctl_->loop.taskEnded(id, 1, 1, 0, TaskOutcome::kExited).isOk());
  ASSERT_TRUE(ctl_->loop.taskEnded(id, 2, 1, 5, TaskOutcome::kExited).isOk());
  EXPECT_EQ(state(id), "FAILED");
  EXPECT_EQ(ctl_->store->getJob(id)->exit_code, 5);
}

TEST_F(SchedulingLoopTest, PendingReasonIsPersistedOnceWhileUnchanged) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 1)).ok());
  int64_t first = submit(makeSpec(1000));
  int64_t second = submit(makeSpec(1000));
  EXPECT_EQ(pass().started, 1u);
  EXPECT_EQ(state(first), "RUNNING");
  auto job = ctl_->store->getJob(second);
  EXPECT_EQ(job->state, api::JobState::kPending);
  EXPECT_EQ(job->reason, "Resources");
  size_t events = ctl_->store->jobEvents(second)->size();
  pass();
  pass();
  EXPECT_EQ(ctl_->store->jobEvents(second)->size(), events);
  // The first ends; the second starts in the next pass.
  ASSERT_TRUE(ctl_->loop.taskEnded(first, 0, 1, 0, TaskOutcome::kExited).isOk());
  EXPECT_EQ(pass().started, 1u);
  EXPECT_EQ(state(second), "RUNNING");
}

TEST_F(SchedulingLoopTest, LostNodeRequeuesOrFailsWithNewEpoch) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("a", 2)).ok());
  api::JobSpec restartable = makeSpec(1000, "restartable");
  restartable.preemptible = true;
  int64_t requeued = submit(restartable);
  int64_t failed = submit(makeSpec(1000, "plain"));
  EXPECT_EQ(pass().started, 2u);
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("b", 2)).ok());

  clock_.advance(std::chrono::seconds(60));
  ASSERT_TRUE(ctl_->registry.heartbeat("b").isOk());
  EXPECT_TRUE(pass().lost_nodes.empty());
  clock_.advance(std::chrono::seconds(31));  // a silent for 91 s, b for 31 s
  ASSERT_TRUE(ctl_->registry.heartbeat("b").isOk());
  PassReport r = pass();
  EXPECT_EQ(r.lost_nodes, std::vector<std::string>{"a"});
  EXPECT_EQ(r.node_failed, 2u);
  EXPECT_EQ(state(failed), "NODE_FAIL");

  // The restartable job went back to PENDING and, in the same pass, to node b with a new epoch.
  auto job = ctl_->store->getJob(requeued);
  EXPECT_EQ(job->state, api::JobState::kRunning);
  EXPECT_EQ(job->requeue_count, 1);
  auto assignments = gateway_.forJob(requeued);
  ASSERT_EQ(assignments.size(), 2u);
  EXPECT_EQ(assignments[0].node, "a");
  EXPECT_EQ(assignments[1].node, "b");
  EXPECT_GT(assignments[1].lease_epoch, assignments[0].lease_epoch);
  EXPECT_EQ(assignments[1].attempt, 1);
  // The old attempt's reports are fenced off; the new one's count.
  EXPECT_EQ(
      ctl_->loop.taskEnded(requeued, 0, assignments[0].lease_epoch, 0, TaskOutcome::kExited).code(),
      StatusCode::kFailedPrecondition);
  EXPECT_EQ(state(requeued), "RUNNING");
  ASSERT_TRUE(ctl_->loop.taskEnded(requeued, 0, assignments[1].lease_epoch, 0, TaskOutcome::kExited)
                  .isOk());
  EXPECT_EQ(state(requeued), "COMPLETED");
  // The failed job is not placed again.
  EXPECT_EQ(gateway_.forJob(failed).size(), 1u);
  pass();
  EXPECT_EQ(gateway_.forJob(failed).size(), 1u);
}

TEST_F(SchedulingLoopTest, CancelRunningStopsTasksAndFencesLateReports) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());
  int64_t id = submit(makeSpec(500));
  EXPECT_EQ(pass().started, 1u);
  ASSERT_TRUE(ctl_->service.cancel(alice(), id).isOk());
  ASSERT_EQ(gateway_.cancelled.size(), 1u);
  EXPECT_EQ(gateway_.cancelled[0].job_id, id);
  EXPECT_EQ(gateway_.cancelled[0].node, "gpu-01");
  EXPECT_EQ(gateway_.cancelled[0].reason, "cancelled");
  EXPECT_EQ(ctl_->loop.taskEnded(id, 0, 1, 143, TaskOutcome::kCancelled).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(state(id), "CANCELLED");
}

TEST_F(SchedulingLoopTest, DependenciesWaitThenStartOrAreCancelled) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 4)).ok());
  int64_t a = submit(makeSpec(1000, "a"));
  int64_t b = submit(makeSpec(1000, "b"));
  api::JobSpec after_a = makeSpec(1000, "after-a");
  after_a.dependencies = {api::Dependency{api::DependencyKind::kAfterOk, uint64_t(a)}};
  int64_t c = submit(after_a);
  api::JobSpec after_b = makeSpec(1000, "after-b");
  after_b.dependencies = {api::Dependency{api::DependencyKind::kAfterOk, uint64_t(b)}};
  int64_t d = submit(after_b);
  EXPECT_EQ(pass().started, 2u);
  EXPECT_EQ(ctl_->store->getJob(c)->reason, "Dependency");
  ASSERT_TRUE(ctl_->loop.taskEnded(a, 0, 1, 0, TaskOutcome::kExited).isOk());
  ASSERT_TRUE(ctl_->loop.taskEnded(b, 0, 1, 1, TaskOutcome::kExited).isOk());
  pass();
  EXPECT_EQ(state(c), "RUNNING");
  EXPECT_EQ(state(d), "CANCELLED");
  EXPECT_EQ(ctl_->store->getJob(d)->reason, "DependencyNeverSatisfied");
}

// What admins keep in the store applies at the next pass: a user's and a group's GPU cap (the
// api's max_gpus; 0 forbids GPUs) and the QoS levels `gpool qos add` creates.
TEST_F(SchedulingLoopTest, StoredQuotasAndQosLevelsApplyAtTheNextPass) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 8)).ok());
  for (const char* name : {"ml", "vision"}) {
    api::Group group;
    group.name = name;
    ASSERT_TRUE(store::saveApiGroup(*ctl_->store, group).isOk());
  }
  api::User user;
  user.name = "alice";
  user.uid = 1001;
  user.groups = {"ml", "vision"};
  ASSERT_TRUE(store::saveApiUser(*ctl_->store, user).isOk());
  api::Quota one_gpu;
  one_gpu.max_gpus_milli = 1000;
  ASSERT_TRUE(store::saveApiQuota(*ctl_->store, store::QuotaSubject::kUser, "alice", one_gpu,
                                  "root", clock_.now())
                  .isOk());
  int64_t first = submit(makeSpec(1000));
  int64_t second = submit(makeSpec(1000));
  pass();
  EXPECT_EQ(state(first), "RUNNING");
  EXPECT_EQ(state(second), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(second)->reason, "AssocMaxGpuPerUser");

  api::Quota two_gpus;
  two_gpus.max_gpus_milli = 2000;
  ASSERT_TRUE(store::saveApiQuota(*ctl_->store, store::QuotaSubject::kUser, "alice", two_gpus,
                                  "root", clock_.now())
                  .isOk());
  pass();
  EXPECT_EQ(state(second), "RUNNING");

  // A group quota of 0 GPUs forbids them to the group's jobs.
  api::Quota none;
  none.max_gpus_milli = 0;
  ASSERT_TRUE(store::saveApiQuota(*ctl_->store, store::QuotaSubject::kGroup, "vision", none, "root",
                                  clock_.now())
                  .isOk());
  ASSERT_TRUE(
      ctl_->store->deleteQuota(store::QuotaSubject::kUser, "alice", "root", clock_.now()).isOk());
  int64_t forbidden = submit(makeSpec(250), "vision");
  pass();
  EXPECT_EQ(state(forbidden), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(forbidden)->reason, "GroupQuota");

  // A QoS level nobody created is refused at submission, naming the field (issue 21: it was
  // accepted and pended forever); a level removed after the submission leaves the job pending
  // with InvalidQOS, and it is placed once the level is back.
  api::JobSpec urgent = makeSpec(1000);
  urgent.qos = "urgent";
  auto refused = ctl_->service.submit(alice(), SubmitRequest{urgent, "", 0, "ml"});
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message().rfind("job.qos: there is no QoS level 'urgent'", 0), 0u)
      << refused.status().message();
  api::Qos level;
  level.name = "urgent";
  level.priority = 100;
  ASSERT_TRUE(store::saveApiQos(*ctl_->store, level).isOk());
  int64_t urgent_id = submit(urgent);
  ASSERT_TRUE(ctl_->store->deleteQos("urgent").isOk());
  pass();
  EXPECT_EQ(state(urgent_id), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(urgent_id)->reason, "InvalidQOS");
  ASSERT_TRUE(store::saveApiQos(*ctl_->store, level).isOk());
  pass();
  EXPECT_EQ(state(urgent_id), "RUNNING");
}

// A user who used up the GPU-hours of their quota waits with AssocGrpGpuHours (nothing placed,
// one event); raising the quota lets the job start at the next pass.
TEST_F(SchedulingLoopTest, UsedUpGpuHoursHoldNewWorkBack) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());
  api::Quota quota;
  quota.gpu_hours = 3;
  ASSERT_TRUE(store::saveApiQuota(*ctl_->store, store::QuotaSubject::kUser, "alice", quota, "root",
                                  clock_.now())
                  .isOk());
  int64_t first = submit(makeSpec(2000));  // 2 GPUs for 2 hours: 4 GPU-hours
  pass();
  ASSERT_EQ(state(first), "RUNNING");
  const TaskAssignment a = gateway_.forJob(first).at(0);
  ASSERT_TRUE(ctl_->loop.taskStarted(first, a.lease_epoch).isOk());
  clock_.advance(std::chrono::hours(2));
  ASSERT_TRUE(ctl_->registry.heartbeat("gpu-01").isOk());  // its agent kept in touch
  ASSERT_TRUE(ctl_->loop.taskEnded(first, 0, a.lease_epoch, 0, TaskOutcome::kExited).isOk());

  int64_t second = submit(makeSpec(1000));
  pass();
  pass();
  EXPECT_EQ(state(second), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(second)->reason, kGpuHoursReason);
  EXPECT_TRUE(gateway_.forJob(second).empty());
  auto events = ctl_->store->jobEvents(second);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(std::count_if(events->begin(), events->end(),
                          [](const store::JobEvent& e) { return e.reason == kGpuHoursReason; }),
            1);

  quota.gpu_hours = 10;
  ASSERT_TRUE(store::saveApiQuota(*ctl_->store, store::QuotaSubject::kUser, "alice", quota, "root",
                                  clock_.now())
                  .isOk());
  pass();
  EXPECT_EQ(state(second), "RUNNING");
}

// A running job's GPU-hours so far count toward the quota (as Slurm's GrpTRESMins): after 2 hours
// on 2 GPUs, alice's 3 GPU-hours are used although the job has not ended; her next job waits,
// the running one goes on.
TEST_F(SchedulingLoopTest, RunningJobsCountTowardGpuHours) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 4)).ok());
  api::Quota quota;
  quota.gpu_hours = 3;
  ASSERT_TRUE(store::saveApiQuota(*ctl_->store, store::QuotaSubject::kUser, "alice", quota, "root",
                                  clock_.now())
                  .isOk());
  int64_t running = submit(makeSpec(2000));
  pass();
  ASSERT_EQ(state(running), "RUNNING");
  const TaskAssignment a = gateway_.forJob(running).at(0);
  ASSERT_TRUE(ctl_->loop.taskStarted(running, a.lease_epoch).isOk());

  clock_.advance(std::chrono::hours(1));  // 2 GPU-hours: under the quota
  ASSERT_TRUE(ctl_->registry.heartbeat("gpu-01").isOk());
  int64_t early = submit(makeSpec(1000));
  pass();
  EXPECT_EQ(state(early), "RUNNING");

  clock_.advance(std::chrono::hours(1));  // 4 + 1 GPU-hours so far: over
  ASSERT_TRUE(ctl_->registry.heartbeat("gpu-01").isOk());
  int64_t late = submit(makeSpec(1000));
  pass();
  EXPECT_EQ(state(late), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(late)->reason, kGpuHoursReason);
  EXPECT_EQ(state(running), "RUNNING");
  EXPECT_EQ(state(early), "RUNNING");
}

// Slurm's MaxWall: a QoS level's max_wall_time and a user's or group's quota max_run_time refuse
// a longer --time (naming the field, the limit and whose it is) and give a job without one the
// smallest of them as its time limit.
TEST_F(SchedulingLoopTest, WallTimeAndRunTimeLimitsApplyAtSubmission) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 8)).ok());
  auto submitted = [&](const api::JobSpec& spec, const std::string& group) {
    return ctl_->service.submit(alice(), SubmitRequest{spec, "", 0, group});
  };
  auto timeLimit = [&](int64_t id) {
    auto job = store::apiJobFrom(*ctl_->store->getJob(id));
    return job.ok() ? job->spec.time_limit_seconds : -1;
  };
  api::JobSpec plain = makeSpec(1000);     // no --time, the default QoS
  EXPECT_EQ(timeLimit(submit(plain)), 0);  // no limit anywhere: none given

  api::Qos normal;
  normal.name = "normal";  // the default QoS (a job naming none)
  normal.max_wall_time_seconds = 4 * 3600;
  ASSERT_TRUE(store::saveApiQos(*ctl_->store, normal).isOk());
  EXPECT_EQ(timeLimit(submit(plain)), 4 * 3600);
  api::JobSpec five_hours = plain;
  five_hours.time_limit_seconds = 5 * 3600;
  auto refused = submitted(five_hours, "ml");
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "job.time_limit: 05:00:00 is above QoS normal's max_wall_time 04:00:00; ask for at "
            "most that (--time)");
  api::JobSpec three_hours = plain;
  three_hours.time_limit_seconds = 3 * 3600;
  EXPECT_EQ(timeLimit(submit(three_hours)), 3 * 3600);  // within it: kept

  // The user's and the group's max_run_time apply too; the smallest limit wins.
  api::Quota mine;
  mine.max_run_time_seconds = 2 * 3600;
  setQuota(store::QuotaSubject::kUser, "alice", mine);
  EXPECT_EQ(timeLimit(submit(plain)), 2 * 3600);
  refused = submitted(three_hours, "ml");
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(
                "job.time_limit: 03:00:00 is above user alice's quota max_run_time 02:00:00"),
            std::string::npos)
      << refused.status().message();
  api::Quota ours;
  ours.max_run_time_seconds = 1800;
  setQuota(store::QuotaSubject::kGroup, "vision", ours);
  EXPECT_EQ(timeLimit(submit(plain, "vision")), 1800);
  EXPECT_EQ(timeLimit(submit(plain, "ml")), 2 * 3600);  // another group's quota does not apply
  refused = submitted(three_hours, "vision");
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("above user alice's quota max_run_time"),
            std::string::npos)
      << refused.status().message();
  api::JobSpec hour = plain;
  hour.time_limit_seconds = 3600;
  refused = submitted(hour, "vision");
  ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("above group vision's quota max_run_time 00:30:00"),
            std::string::npos)
      << refused.status().message();

  // A QoS level without max_wall_time adds no limit; the quotas still apply.
  api::Qos open;
  open.name = "open";
  ASSERT_TRUE(store::saveApiQos(*ctl_->store, open).isOk());
  api::JobSpec in_open = plain;
  in_open.qos = "open";
  EXPECT_EQ(timeLimit(submit(in_open)), 2 * 3600);
}

// A quota's max_memory_per_task (`gpool quota --max-gpu-mem`) refuses a task with more GPU
// memory, counting a whole GPU or a slice without --gpu-mem by the pool's largest GPU (80 GiB).
TEST_F(SchedulingLoopTest, MaxGpuMemRefusesBiggerSharesAtSubmission) {
  api::Quota quota;
  quota.max_memory_per_task_mib = 40 * 1024;
  setQuota(store::QuotaSubject::kUser, "alice", quota);
  auto submitted = [&](const api::JobSpec& spec) {
    return ctl_->service.submit(alice(), SubmitRequest{spec, "", 0, "ml"});
  };
  // No node yet: only an explicit --gpu-mem can be counted.
  EXPECT_TRUE(submitted(makeSpec(1000)).ok());
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 4, 80 * 1024)).ok());
  // A whole GPU is the task's alone: bounded by max_gpus, not by its memory (issue 21: a 40G
  // limit refused every whole 80G GPU).
  EXPECT_TRUE(submitted(makeSpec(1000)).ok());
  EXPECT_TRUE(submitted(makeSpec(2000)).ok());
  EXPECT_TRUE(submitted(makeSpec(500)).ok());  // half of an 80G GPU: 40G
  auto slice = submitted(makeSpec(750));       // 60G of a shared 80G GPU
  ASSERT_EQ(slice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(slice.status().message(),
            "job.resources.gpu_memory: 60G of GPU memory per task (the slice's share of the "
            "pool's largest GPU) is above user alice's quota max_gpu_mem 40G; ask for less with "
            "--gpu-mem (per GPU)");
  api::JobSpec two = makeSpec(2000);
  two.resources.gpu_memory_mib = 20 * 1024;  // 2 x 20G = 40G per task
  EXPECT_TRUE(submitted(two).ok());
  two.resources.gpu_memory_mib = 30 * 1024;  // 60G
  auto too_much = submitted(two);
  ASSERT_EQ(too_much.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_much.status().message().find(
                "job.resources.gpu_memory: 60G of GPU memory per task is above user alice's "
                "quota max_gpu_mem 40G"),
            std::string::npos)
      << too_much.status().message();
  EXPECT_TRUE(submitted(makeSpec(0)).ok());  // no GPU: no GPU memory
}

// A quota's max_compute caps the compute a user or group holds at once (a slice counts its
// share): jobs beyond it wait with AssocMaxComputePerUser / GroupComputeQuota.
TEST_F(SchedulingLoopTest, MaxComputeHoldsJobsBeyondTheCap) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 8)).ok());
  api::Quota mine;
  mine.max_compute_milli = 1500;
  setQuota(store::QuotaSubject::kUser, "alice", mine);
  int64_t whole = submit(makeSpec(1000));
  int64_t quarter = submit(makeSpec(250));
  pass();
  EXPECT_EQ(state(whole), "RUNNING");
  EXPECT_EQ(state(quarter), "RUNNING");
  int64_t half = submit(makeSpec(500));  // 1.25 + 0.5 > 1.5
  pass();
  EXPECT_EQ(state(half), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(half)->reason, "AssocMaxComputePerUser");

  ASSERT_TRUE(
      ctl_->store->deleteQuota(store::QuotaSubject::kUser, "alice", "root", clock_.now()).isOk());
  api::Quota ours;
  ours.max_compute_milli = 0;  // forbids GPU compute to the group's jobs
  setQuota(store::QuotaSubject::kGroup, "vision", ours);
  int64_t in_vision = submit(makeSpec(250), "vision");
  pass();
  EXPECT_EQ(state(half), "RUNNING");
  EXPECT_EQ(state(in_vision), "PENDING");
  EXPECT_EQ(ctl_->store->getJob(in_vision)->reason, "GroupComputeQuota");
}

// A store QoS level's grace_time goes with its jobs' assignments (SIGTERM to SIGKILL at the
// time limit; agent_link_test checks the frame); a level only configured in gpoold leaves the
// agent's default.
TEST_F(SchedulingLoopTest, QosGraceTimeReachesTheAssignment) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 8)).ok());
  api::Qos high;
  high.name = "high";
  high.grace_time_seconds = 45;
  ASSERT_TRUE(store::saveApiQos(*ctl_->store, high).isOk());
  api::JobSpec spec = makeSpec(1000);
  spec.qos = "high";
  int64_t in_high = submit(spec);
  int64_t in_default = submit(makeSpec(1000));
  pass();
  ASSERT_EQ(gateway_.forJob(in_high).size(), 1u);
  EXPECT_EQ(gateway_.forJob(in_high)[0].grace_s, std::optional<int64_t>(45));
  ASSERT_EQ(gateway_.forJob(in_default).size(), 1u);
  EXPECT_FALSE(gateway_.forJob(in_default)[0].grace_s.has_value());
}

// A stored QoS level without grace_time gives its preempted jobs the configured preempt_grace
// (issue 21: they got 0 s, killed at once); an explicit 0 still kills at once. At the time
// limit, the unset level leaves the agent's default, as a level only configured in gpoold does.
TEST_F(SchedulingLoopTest, AStoredQosWithoutGraceTimeGivesTheConfiguredGrace) {
  options_.scheduler.preemption.min_run_time_s = 0;
  options_.scheduler.preemption.delay_s = 0;
  options_.scheduler.preemption.grace_s = 77;
  restart();
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 2)).ok());
  api::Qos low;  // no grace_time
  low.name = "low";
  low.preemptible = true;
  api::Qos at_once;
  at_once.name = "at-once";
  at_once.preemptible = true;
  at_once.grace_time_seconds = 0;
  api::Qos high;
  high.name = "high";
  high.priority = 100;
  for (const api::Qos& q : {low, at_once, high})
    ASSERT_TRUE(store::saveApiQos(*ctl_->store, q).isOk());
  auto inQos = [](uint32_t gpus_milli, const std::string& qos) {
    api::JobSpec spec = makeSpec(gpus_milli);
    spec.qos = qos;
    return spec;
  };
  int64_t in_low = submit(inQos(1000, "low"));
  int64_t in_at_once = submit(inQos(1000, "at-once"));
  pass();
  ASSERT_EQ(state(in_low), "RUNNING");
  ASSERT_EQ(state(in_at_once), "RUNNING");
  ASSERT_EQ(gateway_.forJob(in_low).size(), 1u);
  EXPECT_FALSE(gateway_.forJob(in_low)[0].grace_s.has_value());
  ASSERT_EQ(gateway_.forJob(in_at_once).size(), 1u);
  EXPECT_EQ(gateway_.forJob(in_at_once)[0].grace_s, std::optional<int64_t>(0));

  int64_t urgent = submit(inQos(2000, "high"));
  clock_.advance(std::chrono::seconds(1));
  pass();
  std::map<int64_t, int64_t> grace_of;
  for (const FakeGateway::Cancel& c : gateway_.cancelled)
    grace_of[c.job_id] = c.grace_s;
  ASSERT_EQ(grace_of.size(), 2u) << ctl_->store->getJob(urgent)->reason;
  EXPECT_EQ(grace_of[in_low], 77);
  EXPECT_EQ(grace_of[in_at_once], 0);
  // The preemptor waits for the longest grace of its victims (gpool show's pending detail).
  std::optional<PendingInsight> insight = ctl_->loop.pendingInsight(urgent);
  ASSERT_TRUE(insight.has_value());
  EXPECT_NE(insight->detail.find("grace period of 00:01:17"), std::string::npos) << insight->detail;
}

// The store's QoS levels and quotas, as the pass's scheduler sees them.
TEST(ReadStorePolicyTest, MapsQosLevelsAndQuotas) {
  testing::TempDir dir;
  auto store = testing::openStore(dir.path() + "/db");
  SimClock clock;
  api::Group vision;
  vision.name = "vision";
  ASSERT_TRUE(store::saveApiGroup(*store, vision).isOk());
  api::User alice;
  alice.name = "alice";
  alice.uid = 1001;
  ASSERT_TRUE(store::saveApiUser(*store, alice).isOk());
  api::Qos normal;
  normal.name = "normal";
  normal.priority = 5;
  api::Qos high;
  high.name = "high";
  high.priority = 100;
  high.preemptible = true;
  high.max_gpus_per_user_milli = 2000;
  high.grace_time_seconds = 30;
  ASSERT_TRUE(store::saveApiQos(*store, normal).isOk());
  ASSERT_TRUE(store::saveApiQos(*store, high).isOk());
  api::Quota user_quota;
  user_quota.max_gpus_milli = 0;  // forbids GPUs
  user_quota.priority_weight = 7;
  ASSERT_TRUE(store::saveApiQuota(*store, store::QuotaSubject::kUser, "alice", user_quota, "root",
                                  clock.now())
                  .isOk());
  api::Quota group_quota;
  group_quota.max_gpus_milli = 8000;
  group_quota.guaranteed_gpus_milli = 3000;
  group_quota.priority_weight = 3;
  group_quota.max_compute_milli = 2500;
  ASSERT_TRUE(store::saveApiQuota(*store, store::QuotaSubject::kGroup, "vision", group_quota,
                                  "root", clock.now())
                  .isOk());

  sched::SchedulerConfig base;  // one configured level, "normal", priority 0
  auto policy = readStorePolicy(*store, base, clock.now());
  ASSERT_TRUE(policy.ok()) << policy.status().toString();
  const sched::SchedulerConfig* cfg = &policy->config;
  ASSERT_EQ(cfg->qos_levels.size(), 2u);
  EXPECT_EQ(cfg->qos_levels[0].name, "normal");
  EXPECT_EQ(cfg->qos_levels[0].priority, 5u);  // the store's level replaced the configured one
  EXPECT_EQ(cfg->qos_levels[1].name, "high");
  EXPECT_EQ(cfg->qos_levels[1].priority, 100u);
  EXPECT_TRUE(cfg->qos_levels[1].preemptible);
  EXPECT_EQ(cfg->qos_levels[1].max_gpus_per_user, 2000u);
  EXPECT_EQ(cfg->users.at("alice").max_gpus, 1u);  // 0 GPUs: below any slice
  EXPECT_EQ(cfg->fairshare.user_shares.at("alice"), 7.0);
  EXPECT_EQ(cfg->groups.at("vision").max_gpus, 8000u);
  EXPECT_EQ(cfg->groups.at("vision").quota, 3000u);
  EXPECT_EQ(cfg->fairshare.group_shares.at("vision"), 3.0);
  EXPECT_EQ(cfg->qos_levels[1].grace_s, std::optional<int64_t>(30));
  EXPECT_EQ(cfg->groups.at("vision").max_compute, 2500u);
  EXPECT_EQ(cfg->users.at("alice").max_compute, 0u);  // none set: no cap
  // The base stays as it was: the next pass starts from the configuration again.
  EXPECT_EQ(base.qos_levels.size(), 1u);
  EXPECT_TRUE(base.users.empty());
}

// "--array 0-3%2": at most two elements run at once, although the node has room for all four;
// the others wait with JobArrayTaskLimit and start as running ones end.
TEST_F(SchedulingLoopTest, ArrayLimitRunsAtMostNElementsAtOnce) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 8)).ok());
  api::JobSpec spec = makeSpec(1000, "sweep");
  auto array = api::parseArraySpec("0-3%2");
  ASSERT_TRUE(array.ok());
  spec.array = *array;
  auto ids = ctl_->service.submit(alice(), SubmitRequest{spec, "", 0, "ml"});
  ASSERT_TRUE(ids.ok()) << ids.status().toString();
  ASSERT_EQ(ids->size(), 4u);
  EXPECT_EQ(pass().started, 2u);
  std::vector<int64_t> running, waiting;
  for (int64_t id : *ids)
    (state(id) == "RUNNING" ? running : waiting).push_back(id);
  ASSERT_EQ(running.size(), 2u);
  ASSERT_EQ(waiting.size(), 2u);
  for (int64_t id : waiting)
    EXPECT_EQ(ctl_->store->getJob(id)->reason, "JobArrayTaskLimit");
  ASSERT_TRUE(ctl_->loop.taskEnded(running[0], 0, 1, 0, TaskOutcome::kExited).isOk());
  EXPECT_EQ(pass().started, 1u);
  int now_running = 0;
  for (int64_t id : *ids)
    now_running += state(id) == "RUNNING" ? 1 : 0;
  EXPECT_EQ(now_running, 2);
}

TEST_F(SchedulingLoopTest, SlicesShareOneGpuAndAreCountedBySlice) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 1, 40960)).ok());
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i)
    ids.push_back(submit(makeSpec(250)));
  EXPECT_EQ(pass().started, 4u);
  for (int64_t id : ids) {
    auto a = gateway_.forJob(id);
    ASSERT_EQ(a.size(), 1u);
    ASSERT_EQ(a[0].allocation.slices.size(), 1u);
    EXPECT_FALSE(a[0].allocation.slices[0].exclusive);
    EXPECT_EQ(a[0].allocation.slices[0].compute_milli, 250u);
  }
  clock_.advance(std::chrono::hours(1));
  for (int64_t id : ids)
    ASSERT_TRUE(ctl_->loop.taskEnded(id, 0, 1, 0, TaskOutcome::kExited).isOk());
  for (int64_t id : ids)
    EXPECT_NEAR(*jobGpuHours(*ctl_->store, id), 0.25, 1e-9);
  auto report = ctl_->store->usageReport(store::UsageGrouping::kUser,
                                         clock_.now() - std::chrono::hours(2), clock_.now());
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->size(), 1u);
  EXPECT_NEAR((*report)[0].gpu_hours, 1.0, 1e-9);
  EXPECT_NEAR(ctl_->loop.userUsage("alice"), 3600.0, 1e-6);
}

TEST_F(SchedulingLoopTest, RestartKeepsEveryJobInItsStateAndUsage) {
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 3)).ok());
  int64_t completed = submit(makeSpec(1000, "completed"));
  int64_t running = submit(makeSpec(1000, "running"));
  int64_t failed = submit(makeSpec(1000, "failed"));
  int64_t pending = submit(makeSpec(3000, "pending"));
  int64_t cancelled = submit(makeSpec(1000, "cancelled"));
  ASSERT_TRUE(ctl_->service.cancel(alice(), cancelled).isOk());
  EXPECT_EQ(pass().started, 3u);
  clock_.advance(std::chrono::hours(2));
  ASSERT_TRUE(ctl_->loop.taskEnded(completed, 0, 1, 0, TaskOutcome::kExited).isOk());
  ASSERT_TRUE(ctl_->loop.taskEnded(failed, 0, 1, 2, TaskOutcome::kExited).isOk());
  double usage_before = ctl_->loop.userUsage("alice");
  std::map<int64_t, std::string> before;
  for (int64_t id : {completed, running, failed, pending, cancelled})
    before[id] = state(id);
  size_t assigned_before = gateway_.assigned.size();

  restart();
  for (const auto& [id, s] : before)
    EXPECT_EQ(state(id), s) << "job " << id;
  auto all = ctl_->store->jobsInStates({});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), before.size());
  // Usage is rebuilt from the store (daily buckets: equal here, nothing decayed in between).
  EXPECT_NEAR(ctl_->loop.userUsage("alice"), usage_before, usage_before * 0.01);
  // The running job keeps its placement: the pass does not start it again, and the pending job
  // (3 GPUs) still does not fit beside it.
  ASSERT_TRUE(ctl_->registry.registerNode(makeNode("gpu-01", 3)).ok());
  EXPECT_EQ(pass().started, 0u);
  EXPECT_EQ(gateway_.assigned.size(), assigned_before);
  ASSERT_TRUE(ctl_->loop.taskEnded(running, 0, 1, 0, TaskOutcome::kExited).isOk());
  EXPECT_EQ(pass().started, 1u);
  EXPECT_EQ(state(pending), "RUNNING");
  // New ids continue after the old ones.
  EXPECT_GT(submit(makeSpec(1000)), cancelled);
}

}  // namespace
}  // namespace gpool::controller
