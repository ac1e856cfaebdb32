// gpool logs, run, alloc and shell against a real local pool: `gpool up` starts gpoold and one
// gpool-agent with simulated GPUs and real cgroups; the commands run as a real test user (tasks
// never run as root). Needs root (users, cgroups); skips with the reason elsewhere. No sleeps for
// synchronisation: every wait polls a condition with a deadline.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/agent_test_util.h"
#include "cli/cli_test_util.h"
#include "common/clock.h"
#include "net/client.h"

namespace gpool::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::kGpool;
using testing::Output;
using testing::readFile;
using testing::RunAs;

constexpr auto kDeadline = std::chrono::seconds(60);

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// True once `condition` holds, polled until the deadline.
bool eventually(const std::function<bool()>& condition) {
  const auto deadline = realClock().monotonic() + kDeadline;
  while (realClock().monotonic() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

// Waits for `pid` to exit within the deadline; its exit code, or -1 (then it is killed).
int waitExit(pid_t pid) {
  int status = 0;
  bool done = eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; });
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    return -1;
  }
  return testing::exitCodeOf(status);
}

// One pool for the whole suite (starting one takes seconds).
struct Pool {
  std::string dir;
  std::string socket;
  std::string skip;
  bool cgroups = false;
  agent::UnixUser alice;
  agent::UnixUser bob;
};
Pool* g_pool = nullptr;

class InteractiveTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_pool = new Pool;
    Pool& p = *g_pool;
    p.skip = agent::testing::ensureUser(agent::testing::kAlice);
    if (p.skip.empty()) p.skip = agent::testing::ensureUser(agent::testing::kBob);
    if (!p.skip.empty()) return;
    p.alice = *agent::lookupUnixUser(agent::testing::kAlice);
    p.bob = *agent::lookupUnixUser(agent::testing::kBob);
    auto layout = agent::CgroupLayout::detect();
    p.cgroups = layout.ok() && agent::testing::cgroupSkipReason(*layout).empty();
    std::string tmpl = (fs::temp_directory_path() / "gpool-ia-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      p.skip = "mkdtemp failed";
      return;
    }
    p.dir = tmpl;
    std::string out_dir = p.dir + "-out";
    fs::create_directories(out_dir);
    std::vector<std::string> args{"up", "--dir",      p.dir,       "--servers",
                                  "1",  "--simulate", "--timeout", "60"};
    if (p.cgroups) args.push_back("--cgroups");
    Output up = testing::runProgram(kGpool, args, out_dir);
    fs::remove_all(out_dir);
    if (up.rc != 0) {
      p.skip = "gpool up failed: " + up.out + up.err;
      return;
    }
    p.socket = p.dir + "/gpoold.sock";
    std::printf("pool up in %s, tasks %s cgroups\n", p.dir.c_str(), p.cgroups ? "in" : "without");
  }

  static void TearDownTestSuite() {
    if (!g_pool->dir.empty()) {
      std::string out_dir = g_pool->dir + "-out";
      fs::create_directories(out_dir);
      testing::runProgram(kGpool, {"down", "--dir", g_pool->dir, "--purge", "--timeout", "20"},
                          out_dir);
      fs::remove_all(out_dir);
      std::error_code ec;
      fs::remove_all(g_pool->dir, ec);
    }
    delete g_pool;
    g_pool = nullptr;
  }

  void SetUp() override {
    if (!g_pool->skip.empty()) GTEST_SKIP() << g_pool->skip;
    out_dir_ = std::make_unique<agent::testing::TempDir>();
  }

  RunAs as(const agent::UnixUser& user) {
    RunAs r;
    r.uid = static_cast<int>(user.uid);
    r.gid = static_cast<int>(user.gid);
    r.cwd = out_dir_->path();
    return r;
  }
  std::vector<std::pair<std::string, std::string>> env() {
    return {{"GPOOL_SOCKET", g_pool->socket}};
  }

  // gpool `args` as `user`, waited for.
  Output gpoolAs(const agent::UnixUser& user, const std::vector<std::string>& args,
                 const std::string& stdin_path = "") {
    RunAs r = as(user);
    r.stdin_path = stdin_path;
    pid_t pid = testing::startProgram(kGpool, args, out_dir_->path(), env(), r);
    Output o;
    o.rc = waitExit(pid);
    o.out = readFile(out_dir_->file("stdout"));
    o.err = readFile(out_dir_->file("stderr"));
    return o;
  }
  pid_t startAs(const agent::UnixUser& user, const std::vector<std::string>& args) {
    return testing::startProgram(kGpool, args, out_dir_->path(), env(), as(user));
  }
  std::string outSoFar() { return readFile(out_dir_->file("stdout")); }
  std::string errSoFar() { return readFile(out_dir_->file("stderr")); }

  // Submits `command` as alice; the job id.
  int64_t submitAsAlice(const std::vector<std::string>& flags,
                        const std::vector<std::string>& command) {
    std::vector<std::string> args{"submit", "--json", "--workdir", out_dir_->path()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back("--");
    args.insert(args.end(), command.begin(), command.end());
    Output o = gpoolAs(g_pool->alice, args);
    EXPECT_EQ(o.rc, 0) << o.err;
    json answer = json::parse(o.out, nullptr, false);
    if (!answer.is_object() || !answer.contains("ids")) return -1;
    return answer["ids"][0].get<int64_t>();
  }

  // The job as root (an admin) sees it.
  json job(int64_t id) {
    net::HttpClient client(net::ClientEndpoint::unixSocket(g_pool->socket));
    auto r = client.get("/v1/jobs/" + std::to_string(id));
    if (!r.ok() || r->status != 200) return json::object();
    return json::parse(r->body, nullptr, false);
  }
  bool reachesState(int64_t id, const std::string& state) {
    return eventually([&] { return job(id).value("state", "") == state; });
  }
  // Running, and its agent has reported the task started (the shell socket is known).
  bool enterable(int64_t id) {
    return eventually([&] {
      json j = job(id);
      return j.value("state", "") == "RUNNING" && j.contains("allocations") &&
             !j["allocations"].empty() && j["allocations"][0].contains("shell_socket");
    });
  }

  std::unique_ptr<agent::testing::TempDir> out_dir_;
};

TEST_F(InteractiveTest, LogsOfAFinishedJobAndOnlyForItsOwner) {
  int64_t id = submitAsAlice({"--gpus", "1"}, {"sh", "-c", "echo one; echo two >&2"});
  ASSERT_GT(id, 0);
  ASSERT_TRUE(reachesState(id, "COMPLETED")) << job(id).dump();
  const std::string ref = std::to_string(id);

  Output out = gpoolAs(g_pool->alice, {"logs", ref});
  EXPECT_EQ(out.rc, 0) << out.err;
  EXPECT_EQ(out.out, "one\n");
  Output err = gpoolAs(g_pool->alice, {"logs", ref, "--stderr"});
  EXPECT_EQ(err.rc, 0) << err.err;
  EXPECT_EQ(err.err, "two\n");
  Output as_json = gpoolAs(g_pool->alice, {"logs", ref, "--json"});
  ASSERT_EQ(as_json.rc, 0) << as_json.err;
  json j = json::parse(as_json.out, nullptr, false);
  EXPECT_EQ(j.value("data", ""), "one\n") << as_json.out;
  EXPECT_TRUE(j.value("complete", false));

  // Another user may not read them (exit 4, permission denied); bad arguments exit 2.
  Output bob = gpoolAs(g_pool->bob, {"logs", ref});
  EXPECT_EQ(bob.rc, 4) << bob.err;
  EXPECT_TRUE(contains(bob.err, "may not")) << bob.err;
  Output bad_task = gpoolAs(g_pool->alice, {"logs", ref, "--task", "3"});
  EXPECT_EQ(bad_task.rc, 2) << bad_task.err;
  EXPECT_TRUE(contains(bad_task.err, "no task 3")) << bad_task.err;
  Output missing = gpoolAs(g_pool->alice, {"logs", "999999"});
  EXPECT_EQ(missing.rc, 3) << missing.err;
}

TEST_F(InteractiveTest, LogsFollowARunningJobUntilItEnds) {
  const std::string flag = out_dir_->file("go-on");
  int64_t id = submitAsAlice(
      {"--gpus", "0.5"},
      {"sh", "-c", "echo first; while [ ! -e " + flag + " ]; do sleep 0.05; done; echo second"});
  ASSERT_GT(id, 0);
  pid_t pid = startAs(g_pool->alice, {"logs", "-f", std::to_string(id)});
  ASSERT_TRUE(eventually([&] { return contains(outSoFar(), "first"); })) << errSoFar();
  // Still following: the job runs until the flag appears.
  EXPECT_FALSE(contains(outSoFar(), "second"));
  { std::ofstream(flag) << "x"; }
  EXPECT_EQ(waitExit(pid), 0) << errSoFar();
  EXPECT_EQ(outSoFar(), "first\nsecond\n");
  EXPECT_EQ(job(id).value("state", ""), "COMPLETED");
}

TEST_F(InteractiveTest, RunStreamsOutputAndExitsWithTheJobsCode) {
  Output o = gpoolAs(g_pool->alice, {"run", "--gpus", "1", "--workdir", out_dir_->path(), "--",
                                     "sh", "-c", "echo hi-$GPOOL_JOB_ID; echo warn >&2; exit 7"});
  EXPECT_EQ(o.rc, 7) << o.err;
  EXPECT_TRUE(contains(o.out, "hi-")) << o.out;
  EXPECT_TRUE(contains(o.err, "warn")) << o.err;
  EXPECT_TRUE(contains(o.err, "submitted")) << o.err;

  Output ok = gpoolAs(g_pool->alice, {"run", "--workdir", out_dir_->path(), "--", "true"});
  EXPECT_EQ(ok.rc, 0) << ok.err;
  Output bad = gpoolAs(g_pool->alice, {"run", "--gpus", "1.5", "--", "true"});
  EXPECT_EQ(bad.rc, 2) << bad.err;
  EXPECT_TRUE(contains(bad.err, "--gpus")) << bad.err;
}

// A multi-task job: every task's stdout and stderr, each line labelled with its rank as
// `srun --label` does (a last line without a newline gets one), and the highest exit code.
TEST_F(InteractiveTest, RunStreamsEveryTaskLabelledAndExitsWithTheHighestCode) {
  Output o = gpoolAs(g_pool->alice,
                     {"run", "--tasks", "3", "--workdir", out_dir_->path(), "--", "sh", "-c",
                      "echo out-$GPOOL_TASK_INDEX; echo err-$GPOOL_TASK_INDEX >&2; "
                      "printf tail-$GPOOL_TASK_INDEX; exit $((GPOOL_TASK_INDEX * 2))"});
  EXPECT_EQ(o.rc, 4) << o.err;
  std::vector<std::string> out_lines;
  std::istringstream out(o.out);
  for (std::string line; std::getline(out, line);)
    out_lines.push_back(line);
  std::sort(out_lines.begin(), out_lines.end());
  EXPECT_EQ(out_lines, (std::vector<std::string>{"0: out-0", "0: tail-0", "1: out-1", "1: tail-1",
                                                 "2: out-2", "2: tail-2"}))
      << o.out;
  for (const char* line : {"\n0: err-0\n", "\n1: err-1\n", "\n2: err-2\n"})
    EXPECT_TRUE(contains("\n" + o.err, line)) << line << " in " << o.err;

  // One task: unlabelled, as before.
  Output one =
      gpoolAs(g_pool->alice, {"run", "--workdir", out_dir_->path(), "--", "echo", "single"});
  EXPECT_EQ(one.rc, 0) << one.err;
  EXPECT_EQ(one.out, "single\n");
}

// Ctrl-C cancels a multi-task job too, once every task is streaming.
TEST_F(InteractiveTest, RunCancelsAMultiTaskJobOnCtrlC) {
  pid_t pid = startAs(g_pool->alice, {"run", "--tasks", "2", "--workdir", out_dir_->path(), "--",
                                      "sh", "-c", "echo started-$GPOOL_TASK_INDEX; sleep 300"});
  ASSERT_TRUE(eventually([&] {
    std::string out = outSoFar();
    return contains(out, "0: started-0\n") && contains(out, "1: started-1\n");
  })) << outSoFar()
      << errSoFar();
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  EXPECT_EQ(waitExit(pid), 130) << errSoFar();
  EXPECT_TRUE(contains(errSoFar(), "cancelled")) << errSoFar();
}

TEST_F(InteractiveTest, RunCancelsTheJobOnCtrlC) {
  pid_t pid = startAs(g_pool->alice, {"run", "--workdir", out_dir_->path(), "--", "sh", "-c",
                                      "echo started; sleep 300"});
  ASSERT_TRUE(eventually([&] { return contains(outSoFar(), "started"); })) << errSoFar();
  std::string err = errSoFar();
  size_t at = err.find("gpool: job ");
  ASSERT_NE(at, std::string::npos) << err;
  int64_t id = std::stoll(err.substr(at + 11));
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  EXPECT_EQ(waitExit(pid), 130) << errSoFar();
  EXPECT_TRUE(contains(errSoFar(), "cancelling job " + std::to_string(id))) << errSoFar();
  EXPECT_TRUE(contains(errSoFar(), "cancelled")) << errSoFar();
  EXPECT_EQ(job(id).value("state", ""), "CANCELLED");
}

TEST_F(InteractiveTest, ShellRunsACommandInsideTheJobOnlyForItsOwner) {
  int64_t id = submitAsAlice({"--gpus", "1", "--time", "10m"}, {"sleep", "300"});
  ASSERT_GT(id, 0);
  ASSERT_TRUE(enterable(id)) << job(id).dump();
  const std::string ref = std::to_string(id);
  const std::string gpu = job(id)["allocations"][0]["slices"][0].value("gpu_uuid", "?");

  Output o = gpoolAs(g_pool->alice, {"shell", ref, "--", "sh", "-c",
                                     "cat /proc/self/cgroup; echo CVD=$CUDA_VISIBLE_DEVICES; "
                                     "echo JOB=$GPOOL_JOB_ID; id -un"});
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "CVD=" + gpu + "\n")) << o.out;
  EXPECT_TRUE(contains(o.out, "JOB=" + ref + "\n")) << o.out;
  EXPECT_TRUE(contains(o.out, std::string(agent::testing::kAlice) + "\n")) << o.out;
  if (g_pool->cgroups) {
    EXPECT_TRUE(contains(o.out, "/" + ref + ".0\n")) << o.out;
  }
  // The command's exit code is gpool shell's.
  Output code = gpoolAs(g_pool->alice, {"shell", ref, "--", "sh", "-c", "exit 9"});
  EXPECT_EQ(code.rc, 9) << code.err;

  // Root may enter (as the job's user); another user may not.
  Output bob = gpoolAs(g_pool->bob, {"shell", ref, "--", "true"});
  EXPECT_EQ(bob.rc, 4) << bob.err;
  Output root =
      testing::runProgram(kGpool, {"shell", ref, "--", "id", "-un"}, out_dir_->path(), env());
  EXPECT_EQ(root.rc, 0) << root.err;
  EXPECT_EQ(root.out, std::string(agent::testing::kAlice) + "\n");

  // A job that is not running: a clear error (wrong state, exit 5).
  ASSERT_EQ(gpoolAs(g_pool->alice, {"cancel", ref}).rc, 0);
  ASSERT_TRUE(reachesState(id, "CANCELLED"));
  Output ended = gpoolAs(g_pool->alice, {"shell", ref});
  EXPECT_EQ(ended.rc, 5) << ended.err;
  EXPECT_TRUE(contains(ended.err, "not running")) << ended.err;
}

TEST_F(InteractiveTest, AllocEntersTheAllocationAndReleasesItOnExit) {
  const std::string script = out_dir_->file("typed");
  { std::ofstream(script) << "echo inside-$GPOOL_JOB_ID-$CUDA_VISIBLE_DEVICES\nexit 0\n"; }
  Output o = gpoolAs(g_pool->alice, {"alloc", "--gpus", "0.5", "--time", "5m"}, script);
  EXPECT_EQ(o.rc, 0) << o.err;
  EXPECT_TRUE(contains(o.out, "inside-")) << o.out;
  size_t at = o.err.find("gpool: allocation ");
  ASSERT_NE(at, std::string::npos) << o.err;
  int64_t id = std::stoll(o.err.substr(at + 18));
  EXPECT_TRUE(contains(o.out, "inside-" + std::to_string(id) + "-GPU-")) << o.out;
  EXPECT_TRUE(contains(o.err, "allocation " + std::to_string(id) + " released")) << o.err;
  EXPECT_EQ(job(id).value("state", ""), "CANCELLED");
  EXPECT_TRUE(job(id)["spec"].value("interactive", false)) << job(id).dump();
}

// A terminal session (tmux) drives an interactive `gpool shell`: type a command, read the
// screen, exit.
TEST_F(InteractiveTest, TmuxDrivesAnInteractiveShell) {
  if (std::system("command -v tmux >/dev/null 2>&1") != 0) GTEST_SKIP() << "tmux not installed";
  int64_t id = submitAsAlice({"--gpus", "1", "--time", "10m"}, {"sleep", "300"});
  ASSERT_GT(id, 0);
  ASSERT_TRUE(enterable(id)) << job(id).dump();
  const std::string ref = std::to_string(id);
  const std::string tmux = "tmux -L gpool-ia-" + std::to_string(::getpid()) + " ";
  const std::string screen = out_dir_->file("screen");
  // root enters alice's job (as alice); the shell is alice's (/bin/sh).
  std::string start = tmux +
                      "new-session -d -s t -x 160 -y 40 'env GPOOL_SOCKET=" + g_pool->socket + " " +
                      kGpool + " shell " + ref + "; sleep 0.5'";
  ASSERT_EQ(std::system(start.c_str()), 0);
  auto capture = [&] {
    (void)std::system((tmux + "capture-pane -p -t t > " + screen + " 2>/dev/null").c_str());
    return readFile(screen);
  };
  ASSERT_TRUE(eventually([&] { return contains(capture(), "entering job " + ref); })) << capture();
  ASSERT_EQ(
      std::system((tmux + "send-keys -t t 'echo MARK-$GPOOL_JOB_ID-$(id -un)' Enter").c_str()), 0);
  EXPECT_TRUE(eventually([&] {
    return contains(capture(), "MARK-" + ref + "-" + std::string(agent::testing::kAlice));
  })) << capture();
  ASSERT_EQ(std::system((tmux + "send-keys -t t 'exit' Enter").c_str()), 0);
  EXPECT_TRUE(eventually([&] {
    return std::system((tmux + "has-session -t t 2>/dev/null").c_str()) != 0;
  })) << capture();
  (void)std::system((tmux + "kill-server 2>/dev/null").c_str());
  // Leaving a shell does not end the job (only gpool alloc releases its allocation).
  EXPECT_EQ(job(id).value("state", ""), "RUNNING");
  gpoolAs(g_pool->alice, {"cancel", ref});
}

}  // namespace
}  // namespace gpool::cli
