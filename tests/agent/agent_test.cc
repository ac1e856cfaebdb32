// The agent's reconciler end to end: the fake GPU backend, the real launcher with real
// supervisors, users and processes in a temp state directory, and a SimClock for the lease,
// the intervals and the stray-process grace. Waits are on events (launcher.wait on the
// supervisor's pidfd, a FIFO the task writes to), never sleeps.
#include "agent/agent.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/task_watch.h"
#include "agent_test_util.h"
#include "common/base64.h"
#include "gpu/fake_backend.h"
#include "vgpu/shm_region.h"

namespace gpool::agent {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = testing::ensureUser(testing::kAlice);
    if (!why.empty()) GTEST_SKIP() << why;
    auto layout = CgroupLayout::detect();
    ASSERT_TRUE(layout.ok());
    layout_ = *layout;
    cgroup_skip_ = testing::cgroupSkipReason(layout_);
    parent_ = testing::uniqueCgroupParent();

    gpu::FakeFixture fixture;
    fixture.description = "agent test";
    for (int i = 0; i < 2; ++i) {
      gpu::FakeGpuSpec g;
      g.uuid = "GPU-agent-test-" + std::to_string(i);
      g.pci_bus_id = "00000000:0" + std::to_string(i + 1) + ":00.0";
      g.model = "NVIDIA A100-SXM4-80GB";
      g.memory_total_mib = 81920;
      g.compute_capability_major = 8;
      fixture.gpus.push_back(g);
    }
    fixture.initial.utilization_pct = 0;
    fixture.initial.memory_utilization_pct = 0;
    fixture.initial.memory_used_mib = 0;
    fixture.initial.temperature_c = 40;
    fixture.initial.power_w = 60;
    fixture.initial.sm_clock_mhz = 1410;
    fixture.initial.memory_clock_mhz = 1593;
    backend_ = std::make_unique<gpu::FakeBackend>(fixture, clock_);

    Launcher::Options o;
    o.state_root = tmp_.file("tasks");
    o.supervisor_path = testing::supervisorPath();
    o.supervisor.use_cgroups = cgroup_skip_.empty();
    o.supervisor.cgroup_parent = parent_;
    launcher_ = std::make_unique<Launcher>(o);
    agent_ = newAgent();
  }

  void TearDown() override {
    if (launcher_) {
      auto tasks = launcher_->adoptAll();
      for (const TaskInfo& t : tasks.ok() ? *tasks : std::vector<TaskInfo>{}) {
        if (isTerminal(t.status.state)) continue;
        (void)launcher_->stop(t.name, StopReason::kCancel, 0);
        (void)launcher_->wait(t.name, milliseconds(10'000));
      }
    }
    if (!parent_.empty()) testing::removeCgroupParent(layout_, parent_);
  }

  // `tweak` adjusts the options a test cares about before the agent starts.
  std::unique_ptr<Agent> newAgent(bool kill_strays = false,
                                  const std::function<void(AgentOptions&)>& tweak = {}) {
    AgentOptions o;
    o.node_name = "node-a";
    o.hpc_job_mapping_dir = tmp_.file("hpc-jobs");
    o.state_dir = tmp_.file("agent");
    o.vgpu_dir = tmp_.file("vgpu");
    o.stray_grace = Micros(30'000'000);
    o.kill_strays = kill_strays;
    if (tweak) tweak(o);
    auto a = std::make_unique<Agent>(o, *backend_, *launcher_, clock_);
    Status s = a->start();
    EXPECT_TRUE(s.isOk()) << s.toString();
    return a;
  }

  json message(const std::string& type, json body) {
    return json{{"v", 1}, {"type", type}, {"seq", ++seq_}, {"body", std::move(body)}};
  }
  void welcome(Agent& a, int64_t epoch = 1) {
    a.handle(message("welcome", {{"node_epoch", epoch}, {"lease", {{"duration_s", 60}}}}));
  }

  // A task entry running the helper with `steps`.
  json entry(int64_t job, int64_t epoch, std::vector<std::string> steps, bool requeueable = false) {
    std::vector<std::string> argv{testing::helperPath()};
    argv.insert(argv.end(), steps.begin(), steps.end());
    return json{
        {"assignment", {{"job_id", job}, {"task", 0}, {"attempt", 0}, {"lease_epoch", epoch}}},
        {"requeueable", requeueable},
        {"launch",
         {{"argv", argv},
          {"user", testing::kAlice},
          {"working_dir", tmp_.path()},
          {"gpus", {"GPU-agent-test-0"}},
          {"grace_seconds", 5}}}};
  }
  json desired(std::vector<json> tasks, int64_t epoch = 1) {
    return message("desired_state", {{"node_epoch", epoch}, {"tasks", tasks}});
  }

  // The messages of `type` in the outbox (which is emptied).
  std::vector<json> take(Agent& a, const std::string& type) {
    std::vector<json> out;
    for (json& m : a.takeOutbox())
      if (m["type"] == type) out.push_back(std::move(m));
    return out;
  }

  TaskStatus waitEnd(const std::string& name) {
    auto s = launcher_->wait(name, milliseconds(10'000));
    EXPECT_TRUE(s.ok()) << s.status().toString();
    return s.ok() ? *s : TaskStatus{};
  }

  testing::TempDir tmp_;
  SimClock clock_;
  CgroupLayout layout_;
  std::string cgroup_skip_;
  std::string parent_;
  std::unique_ptr<gpu::FakeBackend> backend_;
  std::unique_ptr<Launcher> launcher_;
  std::unique_ptr<Agent> agent_;
  int64_t seq_ = 0;
};

TEST_F(AgentTest, HelloListsGpusAndTasks) {
  json hello = agent_->helloMessage();
  EXPECT_EQ(hello["type"], "hello");
  EXPECT_EQ(hello["v"], 1);
  EXPECT_EQ(hello["seq"], 1);
  const json& body = hello["body"];
  EXPECT_EQ(body["node"]["name"], "node-a");
  EXPECT_GT(body["node"]["cpu_millis"].get<int64_t>(), 0);
  ASSERT_EQ(body["gpus"]["gpus"].size(), 2u);
  EXPECT_EQ(body["gpus"]["gpus"][1]["uuid"], "GPU-agent-test-1");
  EXPECT_EQ(body["gpus"]["simulated"], true);
  EXPECT_TRUE(body["tasks"].empty());

  welcome(*agent_);
  agent_->handle(desired({entry(7, 3, {"wait"})}));
  json hello2 = agent_->helloMessage();
  ASSERT_EQ(hello2["body"]["tasks"].size(), 1u);
  const json& t = hello2["body"]["tasks"][0];
  EXPECT_EQ(t["assignment"]["job_id"], 7);
  EXPECT_EQ(t["assignment"]["lease_epoch"], 3);
  EXPECT_EQ(t["state"], "running");
  EXPECT_GT(t["pid"].get<int>(), 0);
  EXPECT_EQ(hello2["body"]["last_node_epoch"], 1);
}

TEST_F(AgentTest, DesiredStateStartsTaskAndReportsItsExit) {
  welcome(*agent_);
  agent_->handle(desired({entry(1, 1, {"echo", "hi", "exit", "3"})}));
  std::vector<json> updates = take(*agent_, "task_update");
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0]["body"]["assignment"]["job_id"], 1);
  EXPECT_NE(updates[0]["body"]["state"], "starting");
  EXPECT_EQ(waitEnd("1.0").exit_code, 3);
  agent_->tick();
  updates = take(*agent_, "task_update");
  // The start may already have been reported as exited; then the tick has nothing new.
  if (!updates.empty()) {
    ASSERT_EQ(updates.size(), 1u);
    EXPECT_EQ(updates[0]["body"]["state"], "exited");
    EXPECT_EQ(updates[0]["body"]["exit_code"], 3);
    EXPECT_EQ(updates[0]["body"]["final_state"], "FAILED");
    EXPECT_EQ(updates[0]["body"]["cancelled"], false);
  }
  EXPECT_EQ(testing::readOr(launcher_->taskDir("1.0") + "/stdout.log"), "hi\n");
  // The exit is reported once; a later tick says nothing more about it.
  agent_->tick();
  EXPECT_TRUE(take(*agent_, "task_update").empty());
}

// DCGM's HPC job mapping (dcgm-exporter --hpc-job-mapping-dir): one file per GPU index with
// the ids of the jobs on it, kept by every tick, also by an agent that re-adopted the tasks.
TEST_F(AgentTest, HpcJobMappingFilesNameTheJobsOnEachGpu) {
  welcome(*agent_);
  json shared = entry(8, 2, {"wait"});
  agent_->handle(desired({entry(7, 1, {"wait"}), shared}));
  agent_->tick();
  EXPECT_EQ(testing::readOr(tmp_.file("hpc-jobs/0")), "7\n8\n");
  EXPECT_EQ(testing::readOr(tmp_.file("hpc-jobs/1"), "<none>"), "<none>");
  // A restarted agent (new Agent over the same directories) writes the same.
  ASSERT_EQ(::unlink(tmp_.file("hpc-jobs/0").c_str()), 0);
  agent_ = newAgent();
  welcome(*agent_);
  agent_->tick();
  EXPECT_EQ(testing::readOr(tmp_.file("hpc-jobs/0")), "7\n8\n");
  // Job 7 ends: only 8 is left; both end: the file goes.
  agent_->handle(desired({shared}));
  EXPECT_EQ(waitEnd("7.0").state, TaskState::kCancelled);
  agent_->tick();
  EXPECT_EQ(testing::readOr(tmp_.file("hpc-jobs/0")), "8\n");
  agent_->handle(desired({}));
  waitEnd("8.0");
  agent_->tick();
  EXPECT_EQ(testing::readOr(tmp_.file("hpc-jobs/0"), "<none>"), "<none>");
}

// Simulated GPUs look like a pool: their telemetry follows the tasks on them (a declared load
// here, no interposer), not the fixture: the busy GPU shows the task's load, power and memory
// and the task's process; the idle one shows nothing.
TEST_F(AgentTest, SimulatedTelemetryFollowsTheTasksOnEachGpu) {
  welcome(*agent_);
  json busy = entry(7, 1, {"wait"});
  busy["launch"]["env"] = {{"GPOOL_SIM_LOAD", "60"}, {"GPOOL_SIM_MEMORY", "20G"}};
  agent_->handle(desired({busy}));
  (void)agent_->takeOutbox();
  clock_.advance(std::chrono::seconds(11));  // the next telemetry interval
  agent_->tick();
  std::vector<json> t, health;
  for (json& m : agent_->takeOutbox()) {
    if (m["type"] == "telemetry") t.push_back(m);
    if (m["type"] == "health") health.push_back(m);
  }
  ASSERT_EQ(t.size(), 1u);
  const json& gpus = t[0]["body"]["gpus"];
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0]["utilization_pct"], 60);
  EXPECT_EQ(gpus[0]["memory_used_mib"], 20480);
  EXPECT_DOUBLE_EQ(gpus[0]["power_w"].get<double>(), 60 + (400 - 60) * 0.6);
  EXPECT_EQ(gpus[0]["temperature_c"], 59);  // 32 + 45 x 0.6
  ASSERT_EQ(gpus[0]["processes"].size(), 1u);
  EXPECT_EQ(gpus[0]["processes"][0]["job_id"], 7);  // the task's own process, tagged
  EXPECT_EQ(gpus[0]["processes"][0]["used_mib"], 20480);
  EXPECT_EQ(gpus[1]["utilization_pct"], 0);
  EXPECT_EQ(gpus[1]["memory_used_mib"], 0);
  EXPECT_DOUBLE_EQ(gpus[1]["power_w"].get<double>(), 60);
  // The task is no stray: no health finding names it.
  for (const json& h : health) {
    for (const json& f : h["body"]["findings"])
      EXPECT_NE(f.value("check", ""), "stray_process") << f.dump();
  }
}

TEST_F(AgentTest, TaskNotDesiredIsStopped) {
  welcome(*agent_);
  agent_->handle(desired({entry(1, 1, {"wait"}), entry(2, 2, {"wait"})}));
  EXPECT_EQ(take(*agent_, "task_update").size(), 2u);
  agent_->handle(desired({entry(2, 2, {"wait"})}));
  // The kept task's state is reported again (level-triggered).
  std::vector<json> kept_updates = take(*agent_, "task_update");
  ASSERT_EQ(kept_updates.size(), 1u);
  EXPECT_EQ(kept_updates[0]["body"]["assignment"]["job_id"], 2);
  EXPECT_EQ(kept_updates[0]["body"]["state"], "running");
  EXPECT_EQ(waitEnd("1.0").state, TaskState::kCancelled);
  agent_->tick();
  std::vector<json> updates = take(*agent_, "task_update");
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0]["body"]["assignment"]["job_id"], 1);
  EXPECT_EQ(updates[0]["body"]["state"], "exited");
  EXPECT_EQ(updates[0]["body"]["cancelled"], true);
  auto kept = launcher_->info("2.0");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->status.state, TaskState::kRunning);
}

TEST_F(AgentTest, CancelStopsTheTask) {
  welcome(*agent_);
  agent_->handle(desired({entry(4, 1, {"wait"})}));
  agent_->handle(
      message("cancel", {{"assignment", {{"job_id", 4}, {"task", 0}, {"lease_epoch", 1}}},
                         {"grace_s", 1},
                         {"reason", "preempted"}}));
  EXPECT_EQ(waitEnd("4.0").state, TaskState::kPreempted);
  agent_->tick();
  std::vector<json> updates = take(*agent_, "task_update");
  ASSERT_FALSE(updates.empty());
  EXPECT_EQ(updates.back()["body"]["final_state"], "PREEMPTED");
  EXPECT_EQ(updates.back()["body"]["stop_reason"], "preempted");
}

TEST_F(AgentTest, StaleLeaseEpochsAreRefused) {
  welcome(*agent_, 5);
  agent_->handle(desired({entry(1, 9, {"wait"})}, 5));
  take(*agent_, "task_update");
  // An older attempt of the same task.
  agent_->handle(message("assign", entry(1, 8, {"exit", "0"})));
  std::vector<json> errors = take(*agent_, "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]["body"]["code"], "stale_epoch");
  EXPECT_NE(errors[0]["body"]["message"].get<std::string>().find("lease_epoch"), std::string::npos);
  EXPECT_EQ(launcher_->info("1.0")->status.state, TaskState::kRunning);
  // A desired state from an older node epoch is ignored: the task keeps running.
  agent_->handle(desired({}, 4));
  errors = take(*agent_, "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0]["body"]["message"].get<std::string>().find("node_epoch"), std::string::npos);
  EXPECT_EQ(launcher_->info("1.0")->status.state, TaskState::kRunning);
  // A newer attempt replaces the running one once it has ended.
  agent_->handle(message("assign", entry(1, 10, {"wait"})));
  EXPECT_EQ(waitEnd("1.0").state, TaskState::kPreempted);
  agent_->tick();
  std::vector<json> updates = take(*agent_, "task_update");
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0]["body"]["assignment"]["lease_epoch"], 9);
  EXPECT_EQ(updates[0]["body"]["state"], "exited");
  EXPECT_EQ(updates[1]["body"]["assignment"]["lease_epoch"], 10);
  // Launched by this tick: "starting" until its supervisor has started it (a loaded machine),
  // then "running"; never an end.
  const std::string replacement = updates[1]["body"]["state"];
  EXPECT_TRUE(replacement == "running" || replacement == "starting") << replacement;
}

// Issue 19 defect 3: after the store was restored from a backup, job 2 of the restored store
// is another job than the job 2 this node ran (another store incarnation). Its ended task must
// not be reported as the new job's end, a still running one is replaced, and neither a cancel
// nor a log read of the other incarnation touches the task of this one.
TEST_F(AgentTest, ATaskOfAnotherStoreIncarnationIsAnotherJob) {
  welcome(*agent_);
  auto of = [](json e, int64_t incarnation) {
    e["assignment"]["incarnation"] = incarnation;
    return e;
  };
  agent_->handle(desired({of(entry(2, 1, {"echo", "OLD", "exit", "7"}), 100)}));
  ASSERT_EQ(waitEnd("2.0").exit_code, 7);
  agent_->tick();
  (void)agent_->takeOutbox();

  // The restored store's job 2, placed under incarnation 200 with the same epoch.
  agent_->handle(desired({of(entry(2, 1, {"echo", "NEW", "exit", "0"}), 200)}));
  for (const json& u : take(*agent_, "task_update")) {
    EXPECT_EQ(u["body"]["assignment"]["incarnation"], 200) << u.dump();
    if (u["body"]["state"] == "exited") {
      EXPECT_EQ(u["body"]["exit_code"], 0) << u.dump();
    }
  }
  EXPECT_EQ(waitEnd("2.0").exit_code, 0);
  EXPECT_EQ(testing::readOr(launcher_->taskDir("2.0") + "/stdout.log"), "NEW\n");

  // A running task of incarnation 100 is stopped for the other job, which then starts.
  agent_->handle(desired({of(entry(3, 1, {"wait"}), 100)}));
  ASSERT_EQ(launcher_->info("3.0")->status.state, TaskState::kRunning);
  agent_->handle(message("assign", of(entry(3, 1, {"wait"}), 200)));
  EXPECT_EQ(waitEnd("3.0").state, TaskState::kPreempted);
  agent_->tick();
  ASSERT_EQ(launcher_->info("3.0")->status.state, TaskState::kRunning);
  (void)agent_->takeOutbox();
  // A cancel or a log read naming incarnation 100 is not about it.
  agent_->handle(message(
      "cancel",
      {{"assignment",
        {{"job_id", 3}, {"task", 0}, {"attempt", 0}, {"lease_epoch", 1}, {"incarnation", 100}}}}));
  EXPECT_TRUE(take(*agent_, "error").empty());
  EXPECT_EQ(launcher_->info("3.0")->status.state, TaskState::kRunning);
  agent_->handle(message("read_log", {{"request", 1},
                                      {"job_id", 3},
                                      {"task", 0},
                                      {"lease_epoch", 1},
                                      {"incarnation", 100},
                                      {"stream", "stdout"},
                                      {"offset", 0},
                                      {"max_bytes", 1024}}));
  std::vector<json> answers = take(*agent_, "log_data");
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_NE(answers[0]["body"].value("error", "").find("incarnation"), std::string::npos)
      << answers[0].dump();
}

// Issue 19 defect 4: a task's end is sent again every heartbeat interval until gpoold
// acknowledges it (after its commit); an ack of another state or attempt does not count.
TEST_F(AgentTest, ATaskEndIsSentAgainUntilAcknowledged) {
  welcome(*agent_);
  agent_->handle(desired({entry(1, 1, {"exit", "4"})}));
  ASSERT_EQ(waitEnd("1.0").exit_code, 4);
  agent_->tick();
  auto exits = [&] {
    int n = 0;
    for (const json& u : take(*agent_, "task_update")) {
      if (u["body"]["state"] == "exited") {
        EXPECT_EQ(u["body"]["exit_code"], 4) << u.dump();
        ++n;
      }
    }
    return n;
  };
  (void)agent_->takeOutbox();
  agent_->tick();  // within the interval: nothing again yet
  EXPECT_EQ(exits(), 0);
  clock_.advance(Micros(5'000'000));
  agent_->tick();
  EXPECT_EQ(exits(), 1);  // not acknowledged: sent again
  json assignment{{"job_id", 1}, {"task", 0}, {"attempt", 0}, {"lease_epoch", 1}};
  agent_->handle(message("task_ack", {{"assignment", assignment}, {"state", "running"}}));
  clock_.advance(Micros(5'000'000));
  agent_->tick();
  EXPECT_EQ(exits(), 1);  // the ack of an earlier state settles nothing
  agent_->handle(message("task_ack", {{"assignment", assignment}, {"state", "exited"}}));
  EXPECT_TRUE(take(*agent_, "error").empty());
  clock_.advance(Micros(5'000'000));
  agent_->tick();
  EXPECT_EQ(exits(), 0);  // acknowledged: done
  // A new connection's hello reports it again, and owes it an ack again.
  json hello = agent_->helloMessage();
  ASSERT_EQ(hello["body"]["tasks"].size(), 1u);
  welcome(*agent_, 2);
  clock_.advance(Micros(5'000'000));
  agent_->tick();
  EXPECT_EQ(exits(), 1);
}

TEST_F(AgentTest, ReconnectReadoptsRunningTasksAndReReportsExits) {
  welcome(*agent_);
  agent_->handle(desired({entry(1, 1, {"wait"}), entry(2, 1, {"exit", "0"})}));
  waitEnd("2.0");
  agent_.reset();  // the agent dies; the supervisors live on

  std::unique_ptr<Agent> again = newAgent();
  json hello = again->helloMessage();
  ASSERT_EQ(hello["body"]["tasks"].size(), 2u);
  const json& running = hello["body"]["tasks"][0];
  EXPECT_EQ(running["assignment"]["job_id"], 1);
  EXPECT_EQ(running["assignment"]["lease_epoch"], 1);
  EXPECT_EQ(running["state"], "running");
  const json& exited = hello["body"]["tasks"][1];
  EXPECT_EQ(exited["state"], "exited");
  EXPECT_EQ(exited["final_state"], "COMPLETED");
  EXPECT_EQ(exited["exit_code"], 0);

  // The controller still wants both: the running one is kept, the exit reported again.
  welcome(*again, 2);
  again->handle(desired({entry(1, 1, {"wait"}), entry(2, 1, {"exit", "0"})}, 2));
  std::vector<json> updates = take(*again, "task_update");
  ASSERT_EQ(updates.size(), 2u);
  EXPECT_EQ(updates[0]["body"]["state"], "running");
  EXPECT_EQ(updates[1]["body"]["state"], "exited");
  EXPECT_EQ(updates[1]["body"]["exit_code"], 0);
  EXPECT_EQ(launcher_->info("1.0")->status.state, TaskState::kRunning);
}

// Issue 19 defect 7: task directories were never removed (15,211 directories, 477 MB after
// 27 minutes, all listed in every hello). An ended task's directory goes once the controller
// has acknowledged its end (`task_ack`: committed to its store) and the retention has passed;
// never before the acknowledgement, however long, whatever else the controller answers.
TEST_F(AgentTest, EndedTaskDirectoriesAreRemovedOnceAcknowledgedAndRetained) {
  agent_ = newAgent(false, [](AgentOptions& o) { o.task_retention = Micros(10'000'000); });
  welcome(*agent_);
  agent_->handle(desired({entry(1, 1, {"exit", "0"}), entry(2, 1, {"wait"})}));
  waitEnd("1.0");
  agent_->tick();  // reports the end (unless the start already did) and a heartbeat
  std::vector<json> beats = take(*agent_, "heartbeat");
  ASSERT_EQ(beats.size(), 1u);
  const std::string dir = launcher_->taskDir("1.0");
  // Longer than the retention, and the controller answered a heartbeat sent after the end's
  // report (it handled the report, but could not commit it: a full store): it stays.
  clock_.advance(Micros(20'000'000));
  agent_->tick();
  beats = take(*agent_, "heartbeat");
  ASSERT_EQ(beats.size(), 1u);
  agent_->handle(message("lease", {{"node_epoch", 1},
                                   {"valid_until", toUnixMicros(clock_.now()) + 60'000'000},
                                   {"renews", beats[0]["seq"]}}));
  agent_->tick();
  EXPECT_TRUE(std::filesystem::exists(dir)) << "removed before its end was acknowledged";
  // The acknowledgement of an earlier state (its start) is not that of its end.
  json assignment{{"job_id", 1}, {"task", 0}, {"attempt", 0}, {"lease_epoch", 1}};
  agent_->handle(message("task_ack", {{"assignment", assignment}, {"state", "running"}}));
  clock_.advance(Micros(20'000'000));
  agent_->tick();
  EXPECT_TRUE(std::filesystem::exists(dir)) << "removed before its end was acknowledged";
  // The end is committed: the retention counts from now.
  agent_->handle(message("task_ack", {{"assignment", assignment}, {"state", "exited"}}));
  agent_->tick();
  EXPECT_TRUE(std::filesystem::exists(dir)) << "removed before its retention";
  clock_.advance(Micros(10'000'001));
  agent_->tick();
  EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_FALSE(std::filesystem::exists(tmp_.file("agent") + "/1.0.assignment.json"));
  // The running task is untouched, and a hello lists it alone.
  EXPECT_TRUE(std::filesystem::exists(launcher_->taskDir("2.0")));
  json hello = agent_->helloMessage();
  ASSERT_EQ(hello["body"]["tasks"].size(), 1u);
  EXPECT_EQ(hello["body"]["tasks"][0]["assignment"]["job_id"], 2);
}

// The count bound: beyond task_retention_max the oldest acknowledged go first, whatever the
// retention; ends reported in a hello are acknowledged by their `task_ack`s, not by the
// desired state that answers the hello.
TEST_F(AgentTest, AtMostTheRetentionMaximumOfEndedTasksIsKept) {
  welcome(*agent_);
  agent_->handle(desired({entry(1, 1, {"exit", "0"})}));
  waitEnd("1.0");
  clock_.advance(Micros(1'000'000));
  agent_->handle(desired({entry(1, 1, {"exit", "0"}), entry(2, 1, {"exit", "0"})}));
  waitEnd("2.0");
  agent_.reset();
  agent_ = newAgent(false, [](AgentOptions& o) { o.max_retained_tasks = 1; });
  json hello = agent_->helloMessage();
  ASSERT_EQ(hello["body"]["tasks"].size(), 2u);
  welcome(*agent_, 2);
  agent_->tick();
  EXPECT_TRUE(std::filesystem::exists(launcher_->taskDir("1.0"))) << "not acknowledged yet";
  agent_->handle(desired({}, 2));  // answers the hello: acknowledges nothing
  agent_->tick();
  EXPECT_TRUE(std::filesystem::exists(launcher_->taskDir("1.0"))) << "not acknowledged yet";
  EXPECT_TRUE(std::filesystem::exists(launcher_->taskDir("2.0"))) << "not acknowledged yet";
  for (int job : {1, 2}) {
    json assignment{{"job_id", job}, {"task", 0}, {"attempt", 0}, {"lease_epoch", 1}};
    agent_->handle(message("task_ack", {{"assignment", assignment}, {"state", "exited"}}));
  }
  agent_->tick();
  int left = std::filesystem::exists(launcher_->taskDir("1.0")) +
             std::filesystem::exists(launcher_->taskDir("2.0"));
  EXPECT_EQ(left, 1);
}

TEST_F(AgentTest, SelfFencingStopsRequeueableTasksAndRefusesNewStarts) {
  welcome(*agent_);
  agent_->handle(desired({entry(1, 1, {"wait"}, true), entry(2, 1, {"wait"}, false)}));
  agent_->tick();
  take(*agent_, "task_update");
  clock_.advance(Micros(61'000'000));  // no lease renewal for longer than the lease
  agent_->tick();
  EXPECT_EQ(waitEnd("1.0").state, TaskState::kPreempted);
  EXPECT_EQ(launcher_->info("2.0")->status.state, TaskState::kRunning);
  std::vector<json> beats = take(*agent_, "heartbeat");
  ASSERT_FALSE(beats.empty());
  EXPECT_EQ(beats.back()["body"]["lease_ok"], false);
  // A new assignment while fenced is not started...
  agent_->handle(message("assign", entry(3, 1, {"wait"})));
  agent_->tick();
  EXPECT_EQ(launcher_->info("3.0").status().code(), StatusCode::kNotFound);
  // ...until the lease is renewed (in answer to the latest heartbeat).
  agent_->handle(message("lease", {{"node_epoch", 1},
                                   {"valid_until", toUnixMicros(clock_.now()) + 60'000'000},
                                   {"renews", beats.back()["seq"]}}));
  agent_->tick();
  auto started = launcher_->info("3.0");
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->status.state, TaskState::kRunning);
}

// Issue 19, defect 1: a renewal counts from when the renewed heartbeat left, not from when its
// answer arrived (an agent stopped with SIGSTOP reads old answers when it resumes), and the
// lease reaches the supervisors through the lease file.
TEST_F(AgentTest, LeaseCountsFromTheRenewedHeartbeatAndReachesTheLeaseFile) {
  welcome(*agent_);
  agent_->tick();
  std::vector<json> beats = take(*agent_, "heartbeat");
  ASSERT_EQ(beats.size(), 1u);
  clock_.advance(Micros(50'000'000));  // its answer is read 50 s after it left
  agent_->handle(message("lease", {{"node_epoch", 1},
                                   {"valid_until", toUnixMicros(clock_.now()) + 60'000'000},
                                   {"renews", beats[0]["seq"]}}));
  EXPECT_TRUE(take(*agent_, "error").empty());
  Result<LeaseFile> file = LeaseFile::open(tmp_.file("agent") + "/lease");
  ASSERT_TRUE(file.ok()) << file.status().toString();
  // 60 s from the heartbeat's sending: 10 s left, not 60.
  int64_t left = file->read().expires_boot_us - bootTimeMicros();
  EXPECT_LE(left, 10'000'000);
  EXPECT_GT(left, 5'000'000);
  EXPECT_EQ(file->read().fence_grace_ms, 5000);
  EXPECT_TRUE(agent_->leaseOk());
  clock_.advance(Micros(10'000'001));
  EXPECT_FALSE(agent_->leaseOk());

  // An answer to a heartbeat never sent on this connection renews nothing.
  agent_->handle(message("lease", {{"node_epoch", 1}, {"valid_until", 1}, {"renews", 999}}));
  std::vector<json> errors = take(*agent_, "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0]["body"]["message"].get<std::string>().find("body.renews"), std::string::npos)
      << errors[0];
  EXPECT_FALSE(agent_->leaseOk());
}

TEST_F(AgentTest, FencedTasksHandTheLeaseFileToTheirSupervisor) {
  welcome(*agent_);
  agent_->handle(desired({entry(1, 1, {"wait"}, true), entry(2, 1, {"wait"}, false)}));
  auto launchOf = [&](const std::string& name) {
    Result<TaskLaunch> l =
        taskLaunchFromJson(testing::readOr(launcher_->taskDir(name) + "/launch.json"));
    EXPECT_TRUE(l.ok()) << l.status().toString();
    return l.ok() ? *l : TaskLaunch{};
  };
  EXPECT_EQ(launchOf("1.0").lease_file, tmp_.file("agent") + "/lease");  // requeueable
  EXPECT_EQ(launchOf("2.0").lease_file, "");                             // keep-running
  // The controller's fence grace reaches the file with the next renewal.
  agent_->handle(message(
      "welcome", {{"node_epoch", 1}, {"lease", {{"duration_s", 60}, {"fence_grace_s", 2}}}}));
  Result<LeaseFile> file = LeaseFile::open(tmp_.file("agent") + "/lease");
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(file->read().fence_grace_ms, 2000);
}

TEST_F(AgentTest, StrayProcessIsReportedThenKilledByPolicy) {
  welcome(*agent_);
  agent_->handle(message("welcome", {{"node_epoch", 1}, {"config", {{"stray_policy", "kill"}}}}));
  // A pid far above any live process: it belongs to no task.
  const int stray = 4'000'000;
  ASSERT_TRUE(backend_->startProcess("GPU-agent-test-1", stray, 512).isOk());
  agent_->tick();
  std::vector<json> health = take(*agent_, "health");
  ASSERT_EQ(health.size(), 1u);
  json findings = health[0]["body"]["findings"];
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0]["check"], "stray_process");
  EXPECT_EQ(findings[0]["pid"], stray);
  EXPECT_EQ(findings[0]["action"], "reported");
  EXPECT_TRUE(backend_->kills().empty());  // within the grace period
  clock_.advance(Micros(31'000'000));
  agent_->tick();
  ASSERT_EQ(backend_->kills().size(), 1u);
  EXPECT_EQ(backend_->kills()[0].pid, stray);
  health = take(*agent_, "health");
  ASSERT_EQ(health.size(), 1u);
  EXPECT_EQ(health[0]["body"]["findings"][0]["action"], "killed");
  // A task's own GPU process is not stray.
  agent_->handle(desired({entry(5, 1, {"wait"})}));
  int pid = launcher_->info("5.0")->status.task_pid;
  ASSERT_TRUE(backend_->startProcess("GPU-agent-test-0", pid, 100).isOk());
  clock_.advance(Micros(100'000'000));
  agent_->tick();
  health = take(*agent_, "health");
  ASSERT_EQ(health.size(), 1u);
  EXPECT_TRUE(health[0]["body"]["findings"].empty()) << health[0].dump();
  EXPECT_EQ(backend_->kills().size(), 1u);
}

TEST_F(AgentTest, TelemetryAndHeartbeatFollowTheirIntervals) {
  welcome(*agent_);
  agent_->tick();
  std::vector<json> out = agent_->takeOutbox();
  int beats = 0, samples = 0;
  for (const json& m : out) {
    beats += m["type"] == "heartbeat";
    samples += m["type"] == "telemetry";
  }
  EXPECT_EQ(beats, 1);
  EXPECT_EQ(samples, 1);
  EXPECT_EQ(take(*agent_, "telemetry").size(), 0u);
  clock_.advance(Micros(5'000'000));
  agent_->tick();
  out = agent_->takeOutbox();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0]["type"], "heartbeat");
  EXPECT_EQ(out[0]["body"]["lease_ok"], true);
  clock_.advance(Micros(5'000'000));
  agent_->tick();
  EXPECT_EQ(take(*agent_, "telemetry").size(), 1u);
}

TEST_F(AgentTest, SliceTaskGetsAVgpuRegion) {
  welcome(*agent_);
  json e = entry(6, 1, {"env", "exit", "0"});
  e["launch"]["slice"] = {{"memory_mib", 1024}, {"compute_milli", 250}};
  agent_->handle(desired({e}));
  std::string region = tmp_.file("vgpu") + "/6.0/gpu0";
  waitEnd("6.0");
  std::string env = testing::readOr(launcher_->taskDir("6.0") + "/stdout.log");
  EXPECT_NE(env.find("GPOOL_VGPU_REGIONS=" + region), std::string::npos) << env;
  agent_->tick();
  // The region (both parts and its directory) is removed once the exit is reported.
  struct stat st;
  EXPECT_NE(::stat((region + ".limits").c_str(), &st), 0);
  EXPECT_NE(::stat((region + ".usage").c_str(), &st), 0);
  EXPECT_NE(::stat(tmp_.file("vgpu/6.0").c_str(), &st), 0);
}

// Per-slice metrics (issue 22): the telemetry carries what the slice's region says, compute
// used (only while a process of the task runs the interposer's control loop, whose lease
// says so), launches (exited processes' and live ones'), and the time since the count last grew
// on the agent's clock.
TEST_F(AgentTest, TelemetryCarriesASlicesComputeUsedLaunchesAndTimeSinceItsLastLaunch) {
  welcome(*agent_);
  json e = entry(6, 1, {"wait"});
  e["launch"]["slice"] = {{"memory_mib", 1024}, {"compute_milli", 250}};
  agent_->handle(desired({e}));
  (void)agent_->takeOutbox();
  auto region = vgpu::ShmRegion::open(tmp_.file("vgpu") + "/6.0/gpu0");
  ASSERT_TRUE(region.ok()) << region.status().toString();
  vgpu::ShmHeader* h = region->header();
  // What the interposer writes: a process that exited after 100 launches, a live one at 20,
  // the control loop's lease held for a minute and its measured share.
  h->launches_total.store(100);
  h->slots[0].pid.store(::getpid());
  h->slots[0].launches.store(20);
  h->measured_permille.store(240);
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  h->controller_lease_until_us.store((ts.tv_sec + 60) * 1'000'000LL);
  auto slice = [&]() -> json {
    clock_.advance(std::chrono::seconds(11));  // the next telemetry interval
    agent_->tick();
    std::vector<json> t = take(*agent_, "telemetry");
    if (t.size() != 1) return json();
    const json& gpu0 = t[0]["body"]["gpus"][0];
    EXPECT_EQ(t[0]["body"]["gpus"][1].count("slices"), 0u);  // nothing of it on GPU 1
    return gpu0.contains("slices") && gpu0["slices"].size() == 1 ? gpu0["slices"][0] : json();
  };
  json s = slice();
  EXPECT_EQ(s.value("job_id", -1), 6) << s;
  EXPECT_EQ(s.value("compute_used_permille", -1), 240) << s;
  EXPECT_EQ(s.value("kernel_launches", -1), 120) << s;
  EXPECT_EQ(s.value("since_last_launch_us", -1), 0) << s;
  // No launch for 11 s: the time since grows; the lease lapsed: nothing is used any more.
  h->controller_lease_until_us.store(0);
  s = slice();
  EXPECT_EQ(s.value("since_last_launch_us", -1), 11'000'000) << s;
  EXPECT_EQ(s.value("compute_used_permille", -1), 0) << s;
  // The live process exits (its count moves to the total): no launch.
  h->slots[0].pid.store(0);
  h->launches_total.store(120);
  s = slice();
  EXPECT_EQ(s.value("kernel_launches", -1), 120) << s;
  EXPECT_EQ(s.value("since_last_launch_us", -1), 22'000'000) << s;
  // One more launch: the time since starts again.
  h->launches_total.store(160);
  s = slice();
  EXPECT_EQ(s.value("kernel_launches", -1), 160) << s;
  EXPECT_EQ(s.value("since_last_launch_us", -1), 0) << s;
}

// Issue 20, item 2: the backstop counts what NVML says a slice task's processes hold on its GPU.
// Over the quota plus the tolerance (2048 MiB against 1024 + 256) the task is ended OUT_OF_MEMORY
// with a reason naming both; exactly at the limit it is left alone. A process on a slice's GPU
// that belongs to no task is killed after the stray grace, though the stray policy only reports.
TEST_F(AgentTest, SliceBackstopEndsATaskOverItsQuotaAndKillsStraysOnItsGpu) {
  welcome(*agent_);
  json over = entry(8, 1, {"wait"});
  over["launch"]["slice"] = {{"memory_mib", 1024}, {"compute_milli", 250}};
  json at_limit = entry(9, 1, {"wait"});
  at_limit["launch"]["slice"] = {{"memory_mib", 1024}, {"compute_milli", 250}};
  at_limit["launch"]["gpus"] = {"GPU-agent-test-1"};
  agent_->handle(desired({over, at_limit}));
  const int over_pid = launcher_->info("8.0")->status.task_pid;
  const int at_limit_pid = launcher_->info("9.0")->status.task_pid;
  ASSERT_GT(over_pid, 0);
  ASSERT_GT(at_limit_pid, 0);
  ASSERT_TRUE(backend_->startProcess("GPU-agent-test-0", over_pid, 2048).isOk());
  ASSERT_TRUE(backend_->startProcess("GPU-agent-test-1", at_limit_pid, 1024 + 256).isOk());
  agent_->tick();
  TaskStatus end = waitEnd("8.0");
  EXPECT_EQ(end.state, TaskState::kOutOfMemory);
  for (const char* part : {"held 2048 MiB on GPU 0 (GPU-agent-test-0)", "its quota is 1024 MiB",
                           "tolerance 256 MiB", "backstop"}) {
    EXPECT_NE(end.reason.find(part), std::string::npos) << end.reason;
  }
  std::vector<json> health = take(*agent_, "health");
  ASSERT_EQ(health.size(), 1u);
  json findings = health[0]["body"]["findings"];
  ASSERT_EQ(findings.size(), 1u) << findings;
  EXPECT_EQ(findings[0]["check"], "slice_over_quota");
  EXPECT_EQ(findings[0]["used_mib"], 2048);
  EXPECT_EQ(findings[0]["action"], "ended the task OUT_OF_MEMORY");
  EXPECT_FALSE(isTerminal(launcher_->info("9.0")->status.state));

  const int stray = 4'000'001;
  ASSERT_TRUE(backend_->startProcess("GPU-agent-test-1", stray, 100).isOk());
  clock_.advance(Micros(10'000'000));
  agent_->tick();
  EXPECT_TRUE(backend_->kills().empty());  // within the grace period
  clock_.advance(Micros(31'000'000));
  agent_->tick();
  ASSERT_EQ(backend_->kills().size(), 1u);
  EXPECT_EQ(backend_->kills()[0].pid, stray);
  EXPECT_FALSE(isTerminal(launcher_->info("9.0")->status.state));
}

// A container's GPU processes hang under Podman's conmon, which the task's supervisor adopts,
// not under the task's own process: what descends from a running task's supervisor is the
// task's. Its memory counts against the slice's quota, and it is never killed as a stray.
TEST_F(AgentTest, ProcessesUnderTheSupervisorCountAsTheTasks) {
  welcome(*agent_);
  json slice = entry(8, 1, {"wait"});
  slice["launch"]["slice"] = {{"memory_mib", 1024}, {"compute_milli", 250}};
  agent_->handle(desired({slice}));
  // The supervisor stands in for conmon: it is not the task's descendant, but under the
  // supervisor (its own tree).
  const int supervisor = launcher_->info("8.0")->status.supervisor_pid;
  ASSERT_GT(supervisor, 0);
  ASSERT_TRUE(backend_->startProcess("GPU-agent-test-0", supervisor, 2048).isOk());
  agent_->tick();
  TaskStatus end = waitEnd("8.0");
  EXPECT_EQ(end.state, TaskState::kOutOfMemory) << end.reason;
  EXPECT_NE(end.reason.find("held 2048 MiB"), std::string::npos) << end.reason;
  EXPECT_TRUE(backend_->kills().empty());
}

// With --slice-backstop report the task keeps running and the finding says so.
TEST_F(AgentTest, SliceBackstopOnlyReportsByPolicy) {
  agent_ =
      newAgent(false, [](AgentOptions& o) { o.slice_backstop = AgentOptions::Backstop::kReport; });
  welcome(*agent_);
  json over = entry(8, 1, {"wait"});
  over["launch"]["slice"] = {{"memory_mib", 1024}, {"compute_milli", 250}};
  agent_->handle(desired({over}));
  ASSERT_TRUE(
      backend_->startProcess("GPU-agent-test-0", launcher_->info("8.0")->status.task_pid, 4096)
          .isOk());
  agent_->tick();
  std::vector<json> health = take(*agent_, "health");
  ASSERT_EQ(health.size(), 1u);
  EXPECT_EQ(health[0]["body"]["findings"][0]["action"], "reported");
  EXPECT_FALSE(isTerminal(launcher_->info("8.0")->status.state));
}

// Issue 20, item 3: the hello says whether the node enforces slices: an interposer a program
// can be preloaded with, and the backstop's policy `end`.
TEST_F(AgentTest, HelloSaysWhetherTheNodeEnforcesSlices) {
  json slices = agent_->helloMessage()["body"]["node"]["slices"];
  EXPECT_EQ(slices["interposer"], false) << slices;
  EXPECT_EQ(slices["backstop"], true) << slices;
  EXPECT_NE(slices["detail"].get<std::string>().find("no interposer configured"), std::string::npos)
      << slices;

  const std::string junk = tmp_.file("not-a-library.so");
  ASSERT_TRUE(writeFileAtomically(junk, "not a shared library\n").isOk());
  agent_ = newAgent(false, [&](AgentOptions& o) { o.interposer_path = junk; });
  slices = agent_->helloMessage()["body"]["node"]["slices"];
  EXPECT_EQ(slices["interposer"], false) << slices;
  EXPECT_NE(slices["detail"].get<std::string>().find("cannot be preloaded"), std::string::npos)
      << slices;

  // Any library the loader takes will do here: the C library this test runs with.
  Dl_info info{};
  ASSERT_NE(::dladdr(reinterpret_cast<void*>(&::getpid), &info), 0);
  agent_ = newAgent(false, [&](AgentOptions& o) { o.interposer_path = info.dli_fname; });
  slices = agent_->helloMessage()["body"]["node"]["slices"];
  EXPECT_EQ(slices["interposer"], true) << slices;
  EXPECT_EQ(slices["backstop"], true) << slices;

  agent_ = newAgent(false, [&](AgentOptions& o) {
    o.interposer_path = info.dli_fname;
    o.slice_backstop = AgentOptions::Backstop::kReport;
  });
  EXPECT_EQ(agent_->helloMessage()["body"]["node"]["slices"]["backstop"], false);
}

// read_log (what gpoold relays for a task on another server) answers log_data with the bytes of
// the task's own log from the offset, base64, and the file's size; a log that does not exist is
// found=false; another attempt's log is refused, since a later attempt replaced it here.
TEST_F(AgentTest, ReadLogAnswersWithAPieceOfTheTasksLog) {
  welcome(*agent_);
  agent_->handle(desired({entry(1, 4, {"echo", "hello world", "exit", "0"})}));
  waitEnd("1.0");
  (void)agent_->takeOutbox();
  auto readLog = [&](json body) {
    json request{{"request", 5},       {"job_id", 1}, {"task", 0},        {"lease_epoch", 4},
                 {"stream", "stdout"}, {"offset", 0}, {"max_bytes", 1024}};
    request.update(body);
    agent_->handle(message("read_log", request));
    std::vector<json> answers = take(*agent_, "log_data");
    EXPECT_EQ(answers.size(), 1u) << request.dump();
    return answers.empty() ? json::object() : answers[0]["body"];
  };
  json piece = readLog({{"offset", 6}, {"max_bytes", 3}});
  EXPECT_EQ(piece["request"], 5);
  EXPECT_EQ(piece["job_id"], 1);
  EXPECT_EQ(piece["offset"], 6);
  EXPECT_EQ(piece["found"], true);
  EXPECT_EQ(piece["size"], 12);  // "hello world\n"
  Result<std::string> bytes = base64Decode(piece.value("data", "?"));
  ASSERT_TRUE(bytes.ok()) << piece.dump();
  EXPECT_EQ(*bytes, "wor");
  piece = readLog({{"offset", 12}});  // at the end: nothing more
  EXPECT_EQ(piece["size"], 12);
  EXPECT_EQ(piece["data"], "");
  piece = readLog({{"stream", "stderr"}});
  EXPECT_EQ(piece["found"], true);
  EXPECT_EQ(piece["size"], 0);

  piece = readLog({{"job_id", 99}});  // never ran here
  EXPECT_EQ(piece["found"], false);
  EXPECT_FALSE(piece.contains("error"));

  piece = readLog({{"lease_epoch", 3}});
  EXPECT_NE(piece.value("error", "").find("epoch 4 ran here since"), std::string::npos)
      << piece.dump();
  EXPECT_FALSE(piece.contains("data"));

  agent_->handle(message("read_log", {{"request", 6},
                                      {"job_id", 1},
                                      {"task", 0},
                                      {"lease_epoch", 4},
                                      {"stream", "both"},
                                      {"offset", 0},
                                      {"max_bytes", 1024}}));
  std::vector<json> errors = take(*agent_, "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0]["body"]["message"].get<std::string>().find("body.stream"), std::string::npos)
      << errors[0].dump();
}

// A later attempt of the same task on this server does not overwrite the earlier one's output:
// read_log of the earlier epoch answers the earlier attempt's bytes, of the later epoch the later
// one's, and both go when the task's directory is retired.
TEST_F(AgentTest, ReadLogOfAnEarlierAttemptAnswersItsOwnOutput) {
  welcome(*agent_);
  agent_->handle(desired({entry(1, 4, {"echo", "first attempt", "exit", "0"})}));
  waitEnd("1.0");
  agent_->tick();
  (void)agent_->takeOutbox();
  // The requeued job's next placement (a newer epoch) on the same server.
  agent_->handle(desired({entry(1, 5, {"echo", "second", "exit", "0"})}, 2));
  waitEnd("1.0");
  (void)agent_->takeOutbox();
  auto readLog = [&](int64_t epoch) {
    agent_->handle(message("read_log", {{"request", 7},
                                        {"job_id", 1},
                                        {"task", 0},
                                        {"lease_epoch", epoch},
                                        {"stream", "stdout"},
                                        {"offset", 0},
                                        {"max_bytes", 1024}}));
    std::vector<json> answers = take(*agent_, "log_data");
    EXPECT_EQ(answers.size(), 1u);
    if (answers.empty()) return std::string("?");
    json body = answers[0]["body"];
    if (body.contains("error")) return "error: " + body["error"].get<std::string>();
    Result<std::string> bytes = base64Decode(body.value("data", ""));
    return bytes.ok() ? *bytes : std::string("?");
  };
  EXPECT_EQ(readLog(4), "first attempt\n");
  EXPECT_EQ(readLog(5), "second\n");
  EXPECT_NE(readLog(3).find("epoch 5 ran here since"), std::string::npos);
  // The kept attempt is no task of its own: a restarted agent does not adopt it.
  auto names = launcher_->adoptAll();
  ASSERT_TRUE(names.ok()) << names.status().toString();
  EXPECT_EQ(names->size(), 1u);
  struct stat st;
  EXPECT_EQ(::stat(launcher_->attemptDir("1.0", 4).c_str(), &st), 0);
  ASSERT_TRUE(launcher_->removeAttempts("1.0").isOk());
  EXPECT_NE(::stat(launcher_->attemptDir("1.0", 4).c_str(), &st), 0);
  EXPECT_NE(readLog(4).find("is gone"), std::string::npos);
}

TEST_F(AgentTest, MalformedMessagesGetAnErrorNamingTheField) {
  auto errorFor = [&](const json& msg) {
    agent_->handle(msg);
    std::vector<json> errors = take(*agent_, "error");
    EXPECT_EQ(errors.size(), 1u) << msg.dump();
    return errors.empty() ? json() : errors[0]["body"];
  };
  json e = errorFor(json{{"v", 1}, {"type", "welcome"}, {"body", json::object()}});
  EXPECT_EQ(e["code"], "invalid_argument");
  EXPECT_NE(e["message"].get<std::string>().find("seq"), std::string::npos) << e;

  e = errorFor(json{{"v", 2}, {"type", "welcome"}, {"seq", 1}, {"body", json::object()}});
  EXPECT_EQ(e["code"], "unsupported_version");

  e = errorFor(message("reboot", json::object()));
  EXPECT_EQ(e["code"], "unimplemented");

  json bad = entry(1, 1, {"wait"});
  bad["launch"]["argvv"] = bad["launch"]["argv"];
  e = errorFor(desired({bad}));
  EXPECT_EQ(e["code"], "invalid_argument");
  EXPECT_NE(e["message"].get<std::string>().find("body.tasks[0].launch.argvv"), std::string::npos)
      << e;
  EXPECT_EQ(e["in_reply_to"], seq_);

  bad = entry(1, 1, {"wait"});
  bad["assignment"].erase("lease_epoch");
  e = errorFor(message("assign", bad));
  EXPECT_NE(e["message"].get<std::string>().find("assignment.lease_epoch"), std::string::npos) << e;

  e = errorFor(message("cancel", {{"assignment", {{"job_id", 1}, {"task", 0}, {"lease_epoch", 1}}},
                                  {"signal", "HUP"}}));
  EXPECT_NE(e["message"].get<std::string>().find("signal"), std::string::npos) << e;
  // Nothing was started by any of them.
  EXPECT_EQ(launcher_->info("1.0").status().code(), StatusCode::kNotFound);
}

// The transport's wake-up (agent/task_watch.h): a task's end, written by its supervisor, ends
// the watcher's wait at once, so that gpool-agent reports it without waiting for its
// one-second tick (issue 24: that tick capped short jobs at about one per GPU per second).
TEST_F(AgentTest, ATasksEndWakesTheWatcherOfItsDirectory) {
  auto watcher = TaskDirWatcher::create();
  ASSERT_TRUE(watcher.ok()) << watcher.status().toString();
  welcome(*agent_);
  testing::ReadyFifo ready(tmp_.file("ready"));
  const std::string gate = tmp_.file("gate");
  ASSERT_EQ(::mkfifo(gate.c_str(), 0666), 0);
  ::chmod(gate.c_str(), 0666);
  agent_->handle(desired({entry(1, 1, {"ready", ready.path(), "read", gate, "exit", "0"})}));
  ASSERT_TRUE(ready.wait());
  agent_->tick();
  (void)agent_->takeOutbox();
  const std::vector<std::string> dirs = agent_->unfinishedTaskDirs();
  ASSERT_EQ(dirs, std::vector<std::string>{launcher_->taskDir("1.0")});
  EXPECT_TRUE((*watcher)->watchOnly(dirs));
  EXPECT_FALSE((*watcher)->watchOnly(dirs));  // nothing new
  (void)(*watcher)->wait(milliseconds(0));    // nothing the task wrote before matters here

  // Let the task end: its supervisor records the end in the watched directory.
  int fd = ::open(gate.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, "go\n", 3), 3);
  ::close(fd);
  EXPECT_TRUE((*watcher)->wait(milliseconds(30'000))) << "the end raised no event";
  EXPECT_EQ(waitEnd("1.0").exit_code, 0);
  agent_->tick();
  std::vector<json> updates = take(*agent_, "task_update");
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0]["body"]["state"], "exited");
  // Reported: nothing more to watch, and the watcher drops the directory.
  EXPECT_TRUE(agent_->unfinishedTaskDirs().empty());
  EXPECT_FALSE((*watcher)->watchOnly(agent_->unfinishedTaskDirs()));
  EXPECT_EQ((*watcher)->watched(), 0u);
}

TEST(TaskDirWatcherTest, ARenameIntoAWatchedDirectoryOrAWakeEndsTheWait) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("1.0");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  auto watcher = TaskDirWatcher::create();
  ASSERT_TRUE(watcher.ok()) << watcher.status().toString();
  EXPECT_FALSE((*watcher)->wait(milliseconds(0)));  // nothing watched, nothing happened
  EXPECT_TRUE((*watcher)->watchOnly({dir, tmp.file("missing")}));
  EXPECT_EQ((*watcher)->watched(), 1u);  // a directory that cannot be watched is left out
  ASSERT_TRUE(writeFileAtomically(dir + "/status.json", "{}").isOk());  // as supervisors do
  EXPECT_TRUE((*watcher)->wait(milliseconds(0)));
  EXPECT_FALSE((*watcher)->wait(milliseconds(0)));  // drained
  // A file written outside the watched directories wakes nothing.
  ASSERT_TRUE(writeFileAtomically(tmp.file("other.json"), "{}").isOk());
  EXPECT_FALSE((*watcher)->wait(milliseconds(0)));
  (*watcher)->wake();
  EXPECT_TRUE((*watcher)->wait(milliseconds(0)));
  EXPECT_FALSE((*watcher)->watchOnly({}));
  EXPECT_EQ((*watcher)->watched(), 0u);
  (void)(*watcher)->wait(milliseconds(0));  // the kernel's IN_IGNORED for the dropped watch
  ASSERT_TRUE(writeFileAtomically(dir + "/status.json", "{}").isOk());
  EXPECT_FALSE((*watcher)->wait(milliseconds(0)));  // no longer watched
}

}  // namespace
}  // namespace gpool::agent
