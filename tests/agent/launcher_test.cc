// The launcher end to end with real processes, supervisors, users and (where the machine
// allows) cgroups. Every wait is on an event: the task writing to a FIFO, or the supervisor's
// exit through a pidfd.
#include "agent/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "agent/container.h"
#include "agent/lease_file.h"
#include "agent_test_util.h"

namespace gpool::agent {
namespace {

using std::chrono::milliseconds;
using testing::ReadyFifo;
using testing::TempDir;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = testing::ensureUser(testing::kAlice);
    if (!why.empty()) GTEST_SKIP() << why;
    auto user = lookupUnixUser(testing::kAlice);
    ASSERT_TRUE(user.ok());
    alice_ = *user;
    auto layout = CgroupLayout::detect();
    ASSERT_TRUE(layout.ok());
    layout_ = *layout;
    cgroup_skip_ = testing::cgroupSkipReason(layout_);
    parent_ = testing::uniqueCgroupParent();
    launcher_ = std::make_unique<Launcher>(makeOptions());
  }
  void TearDown() override {
    // A failed test may leave a task running: stop every one so that nothing outlives the test.
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

  Launcher::Options makeOptions() {
    Launcher::Options o;
    o.state_root = tmp_.file("state");
    o.supervisor_path = testing::supervisorPath();
    o.supervisor.use_cgroups = cgroup_skip_.empty();
    o.supervisor.cgroup_parent = parent_;
    return o;
  }

  TaskLaunch task(const std::string& job, std::vector<std::string> steps) {
    TaskLaunch l;
    l.job_id = job;
    l.argv = {testing::helperPath()};
    l.argv.insert(l.argv.end(), steps.begin(), steps.end());
    l.user = testing::kAlice;
    l.working_dir = tmp_.path();
    l.grace_ms = 5'000;
    return l;
  }

  std::string log(const std::string& name, const char* which = "stdout.log") {
    return testing::readOr(launcher_->taskDir(name) + "/" + which);
  }

  TaskStatus waitEnd(const std::string& name) {
    auto st = launcher_->wait(name, milliseconds(20'000));
    EXPECT_TRUE(st.ok()) << st.status().toString();
    return st.ok() ? *st : TaskStatus{};
  }

  TempDir tmp_;
  UnixUser alice_;
  CgroupLayout layout_;
  std::string cgroup_skip_;
  std::string parent_;
  std::unique_ptr<Launcher> launcher_;
};

TEST_F(LauncherTest, LogsAndExitStatusArrive) {
  auto info =
      launcher_->launch(task("logs", {"echo", "to stdout", "err", "to stderr", "exit", "3"}));
  ASSERT_TRUE(info.ok()) << info.status().toString();
  EXPECT_GT(info->status.task_pid, 0);
  TaskStatus end = waitEnd("logs.0");
  EXPECT_EQ(end.state, TaskState::kFailed);
  EXPECT_EQ(end.exit_code, 3);
  EXPECT_EQ(end.signal, 0);
  EXPECT_GE(end.ended_at_us, end.started_at_us);
  EXPECT_EQ(log("logs.0"), "to stdout\n");
  EXPECT_EQ(log("logs.0", "stderr.log"), "to stderr\n");
  // The logs belong to the user, who can follow them.
  struct stat st;
  ASSERT_EQ(::stat((launcher_->taskDir("logs.0") + "/stdout.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, alice_.uid);

  ASSERT_TRUE(launcher_->launch(task("ok", {"echo", "fine"})).ok());
  EXPECT_EQ(waitEnd("ok.0").state, TaskState::kCompleted);
  // The durable record is what a new reader sees.
  auto again = Launcher(makeOptions()).info("ok.0");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->status.state, TaskState::kCompleted);
  EXPECT_EQ(again->status.exit_code, 0);
}

TEST_F(LauncherTest, RunsAsItsUserWithItsEnvironmentAndLimits) {
  ReadyFifo ready(tmp_.file("ready"));
  TaskLaunch l = task("env", {"ids", "env", "cgroup", "ready", ready.path(), "wait"});
  l.env = {{"MY_SETTING", "42"}, {"CUDA_VISIBLE_DEVICES", "7"}};
  l.cpu_millicores = 500;
  l.memory_mib = 256;
  l.gpus = {{"GPU-11111111-2222-3333-4444-555555555555", 0}};
  l.rendezvous = {"10.1.2.3", 29500, 4, 2, 0, 1};
  auto info = launcher_->launch(l);
  ASSERT_TRUE(info.ok()) << info.status().toString();
  ASSERT_TRUE(ready.wait());

  std::string out = log("env.0");
  EXPECT_TRUE(contains(out, "uid=" + std::to_string(alice_.uid) + " euid=" +
                                std::to_string(alice_.uid) + " gid=" + std::to_string(alice_.gid)))
      << out;
  EXPECT_TRUE(contains(out, "env USER=gpool-test-alice\n"));
  EXPECT_TRUE(contains(out, "env MY_SETTING=42\n"));
  EXPECT_TRUE(contains(out, "env CUDA_VISIBLE_DEVICES=GPU-11111111-2222-3333-4444-555555555555\n"));
  EXPECT_TRUE(contains(out, "env CUDA_DEVICE_ORDER=PCI_BUS_ID\n"));
  EXPECT_TRUE(contains(out, "env GPOOL_JOB_ID=env\n"));
  EXPECT_TRUE(contains(out, "env GPOOL_TASK_INDEX=0\n"));
  EXPECT_TRUE(contains(out, "env MASTER_ADDR=10.1.2.3\n"));
  EXPECT_TRUE(contains(out, "env WORLD_SIZE=4\n"));
  EXPECT_TRUE(contains(out, "env RANK=2\n"));
  EXPECT_TRUE(contains(out, "env NODE_RANK=1\n"));
  EXPECT_FALSE(contains(out, "env GPOOL_VGPU")) << "no slice, no interposer variables";

  if (cgroup_skip_.empty()) {
    EXPECT_TRUE(contains(out, parent_ + "/env.0")) << out;
    TaskCgroup cg = TaskCgroup::open(layout_, parent_, "env.0");
    EXPECT_EQ(cg.processes(), std::vector<pid_t>{info->status.task_pid});
    if (layout_.v1_mounts.count("cpu")) {
      EXPECT_EQ(
          testing::readOr(layout_.v1_mounts.at("cpu") + "/" + parent_ + "/env.0/cpu.cfs_quota_us"),
          "50000\n");
    }
    if (layout_.v1_mounts.count("memory")) {
      EXPECT_EQ(testing::readOr(cg.memoryDir() + "/memory.limit_in_bytes"),
                std::to_string(256ull << 20) + "\n");
    } else {
      EXPECT_EQ(testing::readOr(cg.memoryDir() + "/memory.max"),
                std::to_string(256ull << 20) + "\n");
    }
  }
  ASSERT_TRUE(launcher_->stop("env.0", StopReason::kCancel, 0).isOk());
  EXPECT_EQ(waitEnd("env.0").state, TaskState::kCancelled);
}

TEST_F(LauncherTest, SliceTaskGetsInterposerPreloadAndQuota) {
  if (std::getenv("GPOOL_SANITIZED") && std::string(std::getenv("GPOOL_SANITIZED")) == "1") {
    GTEST_SKIP() << "preloading a library ahead of the sanitizer runtime aborts the task";
  }
  // Any real shared library stands in for libgpool-vgpu.so until the interposer lands.
  std::string interposer = "/lib/x86_64-linux-gnu/libm.so.6";
  struct stat st;
  if (::stat(interposer.c_str(), &st) != 0) GTEST_SKIP() << "no " << interposer;
  TaskLaunch l = task("slice", {"env", "exit", "0"});
  l.gpus = {{"GPU-aaaa", 3}};
  l.slice = SliceQuota{6144, 300, interposer, "/dev/shm/gpool-slice"};
  ASSERT_TRUE(launcher_->launch(l).ok());
  EXPECT_EQ(waitEnd("slice.0").state, TaskState::kCompleted);
  std::string out = log("slice.0");
  EXPECT_TRUE(contains(out, "env LD_PRELOAD=" + interposer + "\n")) << out;
  EXPECT_TRUE(contains(out, "env GPOOL_GPU_MEMORY_MIB=6144\n"));
  EXPECT_TRUE(contains(out, "env GPOOL_GPU_COMPUTE=300\n"));
  EXPECT_TRUE(contains(out, "env GPOOL_VGPU_REGIONS=/dev/shm/gpool-slice\n"));
}

TEST_F(LauncherTest, RootIsRefusedUnlessAllowed) {
  TaskLaunch l = task("root", {"ids"});
  l.user = "root";
  auto info = launcher_->launch(l);
  ASSERT_FALSE(info.ok());
  EXPECT_TRUE(contains(info.status().message(), "may not run as root")) << info.status().toString();
  auto recorded = launcher_->info("root.0");
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ(recorded->status.state, TaskState::kFailed);

  TaskLaunch nouser = task("nouser", {"ids"});
  nouser.user = "gpool-no-such-user";
  auto r = launcher_->launch(nouser);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.status().message(), "no Unix user named")) << r.status().toString();
  // A second launch of the same task is refused while its state directory exists.
  EXPECT_EQ(launcher_->launch(l).status().code(), StatusCode::kAlreadyExists);

  TaskLaunch noexec = task("noexec", {});
  noexec.argv = {tmp_.file("no-such-program")};
  auto e = launcher_->launch(noexec);
  ASSERT_FALSE(e.ok());
  EXPECT_TRUE(contains(e.status().message(), "could not exec")) << e.status().toString();
  EXPECT_EQ(launcher_->info("noexec.0")->status.state, TaskState::kFailed);

  TaskLaunch nodir = task("nodir", {"ids"});
  nodir.working_dir = tmp_.file("missing-dir");
  auto d = launcher_->launch(nodir);
  ASSERT_FALSE(d.ok());
  EXPECT_TRUE(contains(d.status().message(), "working directory")) << d.status().toString();
}

TEST_F(LauncherTest, TimeLimitSendsSigtermThenTheTaskEndsInGrace) {
  ReadyFifo ready(tmp_.file("ready"));
  std::string marker = tmp_.file("marker");
  TaskLaunch l = task("tl", {"trap", marker, "ready", ready.path(), "wait"});
  l.time_limit_ms = 300;
  ASSERT_TRUE(launcher_->launch(l).ok());
  ASSERT_TRUE(ready.wait());
  TaskStatus end = waitEnd("tl.0");
  EXPECT_EQ(end.state, TaskState::kTimeout);
  EXPECT_EQ(end.exit_code, 0);  // the trap exited cleanly within the grace period
  EXPECT_EQ(testing::readOr(marker), "term\n");
}

TEST_F(LauncherTest, TimeLimitKillsAfterGraceWhenSigtermIsIgnored) {
  ReadyFifo ready(tmp_.file("ready"));
  TaskLaunch l = task("tk", {"ignore-term", "fork-wait", "ready", ready.path(), "wait"});
  l.time_limit_ms = 100;
  l.grace_ms = 200;
  ASSERT_TRUE(launcher_->launch(l).ok());
  ASSERT_TRUE(ready.wait());
  TaskStatus end = waitEnd("tk.0");
  EXPECT_EQ(end.state, TaskState::kTimeout);
  EXPECT_EQ(end.signal, SIGKILL);
  EXPECT_TRUE(contains(end.reason, "SIGKILL after the grace period")) << end.reason;
  // The forked child (which also ignored SIGTERM) died with the task: no process is left.
  std::string out = log("tk.0");
  size_t at = out.find("child ");
  ASSERT_NE(at, std::string::npos) << out;
  pid_t child = std::atoi(out.c_str() + at + 6);
  EXPECT_FALSE(processStartTicks(child).ok()) << "child " << child << " survived";
}

// Issue 19, defect 1: a fenced task's supervisor enforces the node's lease itself, so the task
// stops when nothing renews the lease (its agent killed or stopped), before the controller may
// run the job elsewhere. Here the test plays the agent: it renews the lease file twice, then
// never again.
TEST_F(LauncherTest, SupervisorFencesItsTaskWhenTheLeaseEndsWithoutTheAgent) {
  Result<LeaseFile> lease = LeaseFile::create(tmp_.file("lease"));
  ASSERT_TRUE(lease.ok()) << lease.status().toString();
  lease->renew({bootTimeMicros() + 60'000'000, 300});
  ReadyFifo ready(tmp_.file("ready"));
  TaskLaunch fenced = task("fenced", {"ignore-term", "fork-wait", "ready", ready.path(), "wait"});
  fenced.lease_file = lease->path();
  ASSERT_TRUE(launcher_->launch(fenced).ok());
  ASSERT_TRUE(ready.wait());
  // A task launched without the lease (a job that is never requeued) is left alone.
  ReadyFifo kept_ready(tmp_.file("kept.ready"));
  ASSERT_TRUE(launcher_->launch(task("kept", {"ready", kept_ready.path(), "wait"})).ok());
  ASSERT_TRUE(kept_ready.wait());

  // The last renewals (the supervisor re-reads the file at least every second, and again at the
  // end it read), then the agent is gone.
  lease->renew({bootTimeMicros() + 600'000, 300});
  const int64_t end = bootTimeMicros() + 900'000;
  lease->renew({end, 300});
  TaskStatus s = waitEnd("fenced.0");
  const int64_t ended = bootTimeMicros();
  EXPECT_EQ(s.state, TaskState::kPreempted);
  EXPECT_TRUE(contains(s.reason, "fenced: the node's lease ended")) << s.reason;
  // SIGTERM was ignored: SIGKILL came the fence grace after the lease's end, not before.
  EXPECT_EQ(s.signal, SIGKILL);
  EXPECT_GE(ended, end + 300'000);
  // Its forked child went with it: nothing of the task runs on.
  std::string out = log("fenced.0");
  size_t at = out.find("child ");
  ASSERT_NE(at, std::string::npos) << out;
  EXPECT_FALSE(processStartTicks(std::atoi(out.c_str() + at + 6)).ok());
  auto kept = launcher_->info("kept.0");
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->status.state, TaskState::kRunning);
}

TEST_F(LauncherTest, FencedTaskDoesNotStartWithoutItsLeaseFile) {
  TaskLaunch l = task("nolease", {"echo", "ran", "exit", "0"});
  l.lease_file = tmp_.file("no-lease-here");
  auto info = launcher_->launch(l);
  ASSERT_FALSE(info.ok());
  EXPECT_TRUE(contains(info.status().message(), "cannot watch the node's lease"))
      << info.status().toString();
  auto recorded = launcher_->info("nolease.0");
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ(recorded->status.state, TaskState::kFailed);
  EXPECT_EQ(log("nolease.0"), "");
}

TEST_F(LauncherTest, CancelAndPreemptUseTheGraceSignal) {
  for (StopReason reason : {StopReason::kCancel, StopReason::kPreempt}) {
    std::string job = reason == StopReason::kCancel ? "cancel" : "preempt";
    ReadyFifo ready(tmp_.file(job + ".ready"));
    std::string marker = tmp_.file(job + ".marker");
    ASSERT_TRUE(launcher_->launch(task(job, {"trap", marker, "ready", ready.path(), "wait"})).ok());
    ASSERT_TRUE(ready.wait());
    ASSERT_TRUE(launcher_->stop(job + ".0", reason, 10'000).isOk());
    TaskStatus end = waitEnd(job + ".0");
    EXPECT_EQ(end.state,
              reason == StopReason::kCancel ? TaskState::kCancelled : TaskState::kPreempted);
    EXPECT_EQ(end.exit_code, 0);
    EXPECT_EQ(testing::readOr(marker), "term\n");
    EXPECT_EQ(launcher_->stop(job + ".0", reason).code(), StatusCode::kFailedPrecondition);
    EXPECT_TRUE(launcher_->remove(job + ".0").isOk());
    EXPECT_EQ(launcher_->info(job + ".0").status().code(), StatusCode::kNotFound);
  }
}

TEST_F(LauncherTest, OomKillIsReportedAsOutOfMemory) {
  if (!cgroup_skip_.empty()) GTEST_SKIP() << cgroup_skip_;
  TaskLaunch l = task("oom", {"echo", "start", "alloc", "512", "echo", "survived"});
  l.memory_mib = 32;
  ASSERT_TRUE(launcher_->launch(l).ok());
  TaskStatus end = waitEnd("oom.0");
  EXPECT_EQ(end.state, TaskState::kOutOfMemory) << end.reason;
  EXPECT_EQ(end.signal, SIGKILL);
  EXPECT_FALSE(contains(log("oom.0"), "survived"));
}

TEST_F(LauncherTest, TaskCannotOpenAnotherGpusDeviceFile) {
  if (!cgroup_skip_.empty()) GTEST_SKIP() << cgroup_skip_;
  std::string own = tmp_.file("nvidia0"), other = tmp_.file("nvidia1");
  ASSERT_EQ(::mknod(own.c_str(), S_IFCHR | 0666, makedev(195, 0)), 0);
  ASSERT_EQ(::mknod(other.c_str(), S_IFCHR | 0666, makedev(195, 1)), 0);
  ::chmod(own.c_str(), 0666);  // mknod's mode is masked by the umask
  ::chmod(other.c_str(), 0666);
  TaskLaunch l = task("dev", {"open", own, "open", other, "open", "/dev/null"});
  l.gpus = {{"GPU-0000", 0}};
  ASSERT_TRUE(launcher_->launch(l).ok());
  EXPECT_EQ(waitEnd("dev.0").state, TaskState::kCompleted);
  std::string out = log("dev.0");
  EXPECT_TRUE(contains(out, "open " + own + ": ENXIO\n")) << out;  // allowed; no driver
  EXPECT_TRUE(contains(out, "open " + other + ": EPERM\n")) << out;
  EXPECT_TRUE(contains(out, "open /dev/null: ok\n")) << out;
}

// The "agent" is a child process that launches a task and is then killed with SIGKILL; a new
// launcher finds the task still running under its supervisor, and its output and status
// arrive intact.
TEST_F(LauncherTest, TaskSurvivesAgentSigkillAndIsReadopted) {
  ReadyFifo ready(tmp_.file("ready"));
  std::string go = tmp_.file("go");
  ASSERT_EQ(::mkfifo(go.c_str(), 0666), 0);
  ::chmod(go.c_str(), 0666);
  TaskLaunch l = task("survive", {"echo", "before", "ready", ready.path(), "read", go, "echo",
                                  "after", "exit", "7"});
  int agent_done[2];
  ASSERT_EQ(::pipe(agent_done), 0);
  pid_t agent = ::fork();
  if (agent == 0) {
    Launcher doomed(makeOptions());
    auto info = doomed.launch(l);
    char ok = info.ok() ? 'y' : 'n';
    (void)!::write(agent_done[1], &ok, 1);
    for (;;)
      ::pause();  // the agent keeps "running" until it is killed
  }
  ::close(agent_done[1]);
  char ok = 0;
  ASSERT_EQ(::read(agent_done[0], &ok, 1), 1);
  ::close(agent_done[0]);
  ASSERT_EQ(ok, 'y');
  ASSERT_TRUE(ready.wait());
  ::kill(agent, SIGKILL);
  ASSERT_EQ(::waitpid(agent, nullptr, 0), agent);

  Launcher restarted(makeOptions());
  auto tasks = restarted.adoptAll();
  ASSERT_TRUE(tasks.ok()) << tasks.status().toString();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].name, "survive.0");
  EXPECT_EQ((*tasks)[0].status.state, TaskState::kRunning);
  EXPECT_TRUE((*tasks)[0].supervisor_alive);

  { std::ofstream(go) << "go\n"; }
  auto end = restarted.wait("survive.0", milliseconds(20'000));
  ASSERT_TRUE(end.ok()) << end.status().toString();
  EXPECT_EQ(end->state, TaskState::kFailed);
  EXPECT_EQ(end->exit_code, 7);
  EXPECT_EQ(testing::readOr(restarted.taskDir("survive.0") + "/stdout.log"), "before\nafter\n");
}

TEST_F(LauncherTest, DeadSupervisorIsRecordedAsNodeFail) {
  ReadyFifo ready(tmp_.file("ready"));
  auto info = launcher_->launch(task("lost", {"ready", ready.path(), "wait"}));
  ASSERT_TRUE(info.ok());
  ASSERT_TRUE(ready.wait());
  // The supervisor dies without recording an end (as in a crash); its task is killed by hand.
  ::kill(info->status.supervisor_pid, SIGKILL);
  ::kill(info->status.task_pid, SIGKILL);
  auto end = launcher_->wait("lost.0", milliseconds(20'000));
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->state, TaskState::kNodeFail);
  if (cgroup_skip_.empty()) (void)TaskCgroup::open(layout_, parent_, "lost.0").destroy();
}

// Issue 19 defect 6: with the state disk full when the task ended, its exit status (4) became
// NODE_FAIL exit -1 ("supervisor ... ended without recording the task's end"). The supervisor
// writes the end into the record it reserved before the task started.
TEST_F(LauncherTest, ExitStatusSurvivesAFullStateDisk) {
  if (::geteuid() != 0) GTEST_SKIP() << "a full state disk needs a tmpfs of its own (root: mount)";
  const std::string small = tmp_.file("small");
  ASSERT_EQ(::mkdir(small.c_str(), 0755), 0);
  ASSERT_EQ(::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=2m"), 0) << std::strerror(errno);
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{small};
  Launcher::Options options = makeOptions();
  options.state_root = small + "/state";
  Launcher launcher(options);
  ReadyFifo ready(tmp_.file("ready"));
  const std::string go = tmp_.file("go");
  ASSERT_EQ(::mkfifo(go.c_str(), 0666), 0);
  ::chmod(go.c_str(), 0666);
  auto info = launcher.launch(task("full", {"ready", ready.path(), "read", go, "exit", "4"}));
  ASSERT_TRUE(info.ok()) << info.status().toString();
  ASSERT_TRUE(ready.wait());
  // Fill the state disk to its last byte, then let the task end.
  {
    int fd = ::open((small + "/filler").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ASSERT_GE(fd, 0);
    std::string block(4096, 'x');
    for (size_t size : {block.size(), size_t{1}}) {
      while (::write(fd, block.data(), size) > 0) {
      }
    }
    ::close(fd);
    ASSERT_NE(writeFileAtomically(small + "/probe", "x").code(), StatusCode::kOk);
  }
  {
    int fd = ::open(go.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "go\n", 3), 3);
    ::close(fd);
  }
  auto end = launcher.wait("full.0", milliseconds(20'000));
  ASSERT_TRUE(end.ok()) << end.status().toString();
  EXPECT_EQ(end->state, TaskState::kFailed) << end->reason;
  EXPECT_EQ(end->exit_code, 4);
  EXPECT_GE(end->ended_at_us, end->started_at_us);
  // A restarted agent's launcher reads the same end, disk still full.
  auto again = Launcher(options).adoptAll();
  ASSERT_TRUE(again.ok()) << again.status().toString();
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].status.state, TaskState::kFailed);
  EXPECT_EQ((*again)[0].status.exit_code, 4);
}

TEST_F(LauncherTest, HalfCreatedTaskIsRecordedFailedOnAdoption) {
  // The agent died after creating the directory and writing launch.json, before the spawn.
  std::string dir = launcher_->taskDir("half.0");
  ASSERT_TRUE(makeDirs(dir).isOk());
  ASSERT_TRUE(writeFileAtomically(dir + "/launch.json", toJson(task("half", {"ids"}))).isOk());
  auto tasks = Launcher(makeOptions()).adoptAll();
  ASSERT_TRUE(tasks.ok()) << tasks.status().toString();
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ((*tasks)[0].status.state, TaskState::kFailed);
  EXPECT_EQ(launcher_->info("half.0")->status.state, TaskState::kFailed);  // recorded durably
}

TEST_F(LauncherTest, InteractiveProcessesJoinTheRunningTask) {
  if (!cgroup_skip_.empty()) GTEST_SKIP() << cgroup_skip_;
  ReadyFifo ready(tmp_.file("ready"));
  TaskLaunch l = task("inter", {"ready", ready.path(), "wait"});
  l.gpus = {{"GPU-abcd", 1}};
  ASSERT_TRUE(launcher_->launch(l).ok());
  ASSERT_TRUE(ready.wait());

  // An existing process (as an sshd session would be) adopted into the allocation.
  pid_t session = ::fork();
  if (session == 0) {
    for (;;)
      ::pause();
  }
  ASSERT_TRUE(launcher_->adoptProcess("inter.0", session).isOk());
  EXPECT_TRUE(contains(testing::readOr("/proc/" + std::to_string(session) + "/cgroup"),
                       parent_ + "/inter.0"));

  // A command started in the allocation (as `gpool shell` does): its user, cgroup and env.
  auto env = launcher_->taskEnvironment("inter.0");
  ASSERT_TRUE(env.ok());
  EXPECT_EQ((*env)["CUDA_VISIBLE_DEVICES"], "GPU-abcd");
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  auto pid = launcher_->spawnInTask("inter.0", {testing::helperPath(), "ids", "cgroup", "env"}, -1,
                                    out[1], -1);
  ASSERT_TRUE(pid.ok()) << pid.status().toString();
  ::close(out[1]);
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(out[0], buf, sizeof(buf))) > 0)
    text.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int ws = 0;
  ASSERT_EQ(::waitpid(*pid, &ws, 0), *pid);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  EXPECT_TRUE(contains(text, "uid=" + std::to_string(alice_.uid))) << text;
  EXPECT_TRUE(contains(text, parent_ + "/inter.0")) << text;
  EXPECT_TRUE(contains(text, "env GPOOL_JOB_ID=inter\n")) << text;

  // An SSH login of the task's user lands in its allocation; another user's is refused.
  pid_t login = ::fork();
  if (login == 0) {
    for (;;)
      ::pause();
  }
  auto adopted = launcher_->adoptIntoUsersTask(testing::kAlice, login);
  ASSERT_TRUE(adopted.ok()) << adopted.status().toString();
  EXPECT_EQ(*adopted, "inter.0");
  EXPECT_TRUE(contains(testing::readOr("/proc/" + std::to_string(login) + "/cgroup"),
                       parent_ + "/inter.0"));
  EXPECT_EQ(launcher_->adoptIntoUsersTask("gpool-nobody-else", login).status().code(),
            StatusCode::kNotFound);

  // Ending the allocation ends the adopted session too.
  ASSERT_TRUE(launcher_->stop("inter.0", StopReason::kCancel, 0).isOk());
  EXPECT_EQ(waitEnd("inter.0").state, TaskState::kCancelled);
  ASSERT_EQ(::waitpid(session, &ws, 0), session);
  EXPECT_TRUE(WIFSIGNALED(ws));
  ASSERT_EQ(::waitpid(login, &ws, 0), login);
  EXPECT_TRUE(WIFSIGNALED(ws));
  EXPECT_EQ(launcher_->adoptProcess("inter.0", ::getpid()).code(), StatusCode::kFailedPrecondition);
}

// Runs gpool-adopt with `args` and PAM's environment for `user`; returns its exit status and
// puts what it printed (pam_exec shows stdout to the user) into `out`.
int runAdoptHook(const std::string& out_file, const std::string& user, const std::string& type,
                 const std::vector<std::string>& args, std::string* out) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) _exit(126);
    ::dup2(fd, STDOUT_FILENO);
    ::setenv("PAM_USER", user.c_str(), 1);
    ::setenv("PAM_TYPE", type.c_str(), 1);
    std::string path = std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-adopt";
    std::vector<char*> argv{path.data()};
    for (const std::string& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(path.c_str(), argv.data());
    _exit(127);
  }
  int ws = 0;
  ::waitpid(pid, &ws, 0);
  *out = testing::readOr(out_file);
  return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
}

// The PAM account hook (pam_exec runs gpool-adopt as a child of the sshd process): a user with a
// running task gets in and lands in its cgroup; a user without one is refused with a message
// saying why; root is let in untouched; other PAM phases do not decide.
TEST_F(LauncherTest, PamAdoptHookAdmitsOnlyUsersWithARunningTask) {
  if (!cgroup_skip_.empty()) GTEST_SKIP() << cgroup_skip_;
  Launcher::Options options = makeOptions();
  options.state_root = tmp_.file("agent") + "/tasks";  // as gpool-agent --state-dir lays it out
  launcher_ = std::make_unique<Launcher>(options);
  ReadyFifo ready(tmp_.file("ready"));
  ASSERT_TRUE(launcher_->launch(task("ssh", {"ready", ready.path(), "wait"})).ok());
  ASSERT_TRUE(ready.wait());
  const std::vector<std::string> where = {"--state-dir", tmp_.file("agent"), "--cgroup-parent",
                                          parent_};
  const std::string out_file = tmp_.file("hook.out");

  // The real path: the hook adopts its parent, the process that becomes the login session.
  int verdict[2];
  ASSERT_EQ(::pipe(verdict), 0);
  pid_t session = ::fork();
  if (session == 0) {
    std::string out;
    int rc = runAdoptHook(out_file, testing::kAlice, "account", where, &out);
    char byte = static_cast<char>(rc);
    if (::write(verdict[1], &byte, 1) != 1) _exit(1);
    for (;;)
      ::pause();
  }
  ::close(verdict[1]);
  char byte = 0;
  ASSERT_EQ(::read(verdict[0], &byte, 1), 1);
  ::close(verdict[0]);
  EXPECT_EQ(byte, 0) << testing::readOr(out_file);
  EXPECT_TRUE(contains(testing::readOr("/proc/" + std::to_string(session) + "/cgroup"),
                       parent_ + "/ssh.0"));

  // Another user has nothing running here: refused, not adopted.
  pid_t other = ::fork();
  if (other == 0) {
    for (;;)
      ::pause();
  }
  std::vector<std::string> with_pid = where;
  with_pid.insert(with_pid.end(), {"--pid", std::to_string(other)});
  std::string out;
  EXPECT_EQ(runAdoptHook(out_file, testing::kBob, "account", with_pid, &out), 1);
  EXPECT_TRUE(contains(out, std::string(testing::kBob) + " has no running job on this server"))
      << out;
  EXPECT_FALSE(contains(testing::readOr("/proc/" + std::to_string(other) + "/cgroup"), parent_));
  // root is let in without a job; the session phase is not the hook's to decide.
  EXPECT_EQ(runAdoptHook(out_file, "root", "account", with_pid, &out), 0) << out;
  EXPECT_EQ(runAdoptHook(out_file, testing::kBob, "open_session", with_pid, &out), 0) << out;
  EXPECT_FALSE(contains(testing::readOr("/proc/" + std::to_string(other) + "/cgroup"), parent_));
  // No user at all is a usage error, not a silent admit.
  pid_t none = ::fork();
  if (none == 0) {
    ::unsetenv("PAM_USER");
    std::string path = std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-adopt";
    ::execl(path.c_str(), path.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int ws = 0;
  ASSERT_EQ(::waitpid(none, &ws, 0), none);
  EXPECT_TRUE(WIFEXITED(ws) && WEXITSTATUS(ws) == 2);

  // Through a real PAM stack (pam_exec, as /etc/pam.d/sshd would have it), driven by pamtester.
  if (::geteuid() == 0 && ::access("/usr/bin/pamtester", X_OK) == 0) {
    const std::string service = "gpool-adopt-test-" + std::to_string(::getpid());
    const std::string pam_file = "/etc/pam.d/" + service;
    std::ofstream(pam_file) << "account required pam_exec.so quiet stdout " << GPOOL_BINARY_DIR
                            << "/src/agent/gpool-adopt --state-dir " << tmp_.file("agent")
                            << " --cgroup-parent " << parent_ << "\n";
    auto pamtester = [&](const std::string& user, std::string* text) {
      pid_t pid = ::fork();
      if (pid == 0) {
        int fd = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) _exit(126);
        ::dup2(fd, STDOUT_FILENO);
        ::dup2(fd, STDERR_FILENO);
        ::execl("/usr/bin/pamtester", "pamtester", service.c_str(), user.c_str(), "acct_mgmt",
                static_cast<char*>(nullptr));
        _exit(127);
      }
      int status = 0;
      ::waitpid(pid, &status, 0);
      *text = testing::readOr(out_file);
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    };
    std::string text;
    EXPECT_EQ(pamtester(testing::kAlice, &text), 0) << text;
    EXPECT_NE(pamtester(testing::kBob, &text), 0) << text;
    EXPECT_TRUE(contains(text, "has no running job on this server")) << text;
    ::unlink(pam_file.c_str());
  }

  ASSERT_TRUE(launcher_->stop("ssh.0", StopReason::kCancel, 0).isOk());
  EXPECT_EQ(waitEnd("ssh.0").state, TaskState::kCancelled);
  ::kill(other, SIGKILL);
  ASSERT_EQ(::waitpid(other, &ws, 0), other);
  ::kill(session, SIGKILL);  // normally already ended with the task's cgroup
  ASSERT_EQ(::waitpid(session, &ws, 0), session);
}

// The archive of an image in the node's image directory (docs/containers.md): plain names
// only, so that no name reaches a file outside the directory.
TEST(ImageArchivePathTest, PlainNamesMapIntoTheDirectoryAndNothingElseDoes) {
  EXPECT_EQ(imageArchivePath("/srv/images", "localhost/pytorch:24.05"),
            "/srv/images/pytorch/24.05.tar");
  EXPECT_EQ(imageArchivePath("/srv/images", "pytorch:24.05"), "/srv/images/pytorch/24.05.tar");
  EXPECT_EQ(imageArchivePath("/srv/images", "cuda_12-base"), "/srv/images/cuda_12-base/latest.tar");
  EXPECT_EQ(imageArchivePath("", "pytorch:24.05"), "");
  for (const char* refused :
       {"../etc/passwd", "localhost/../x", "docker.io/library/debian:12", "..", ".hidden", "x:.tag",
        ":tag", "x:", "a:b:c", "x y", "localhost/", ""}) {
    EXPECT_EQ(imageArchivePath("/srv/images", refused), "") << refused;
  }
}

}  // namespace
}  // namespace gpool::agent
