// Runs the real `gpool` binary against a real gpoold (temp SQLite store, Unix socket). There are
// no agents, so jobs stay PENDING unless a test places one with `gpoold --once` first. No
// sleeps: the test blocks on gpoold's "ready" line and on waitpid.
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "cli/gpoold_cli_fixture.h"
#include "controller/controller_fixture.h"
#include "store/api_codec.h"

namespace gpool::cli {
namespace {

using nlohmann::json;
namespace ct = controller::testing;
using testing::kGpool;
using testing::kGpoold;
using testing::Output;
using testing::readFile;
using testing::runProgram;

// The user running the test, as gpoold names the socket's peer.
std::string me() {
  struct passwd* pw = getpwuid(geteuid());
  return pw ? pw->pw_name : "#" + std::to_string(geteuid());
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

using GpoolCliTest = testing::GpooldCliTest;

TEST_F(GpoolCliTest, SubmitQueueShowCancel) {
  startDaemon();
  Output submitted =
      gpool({"submit", "--gpus", "0.5", "--name", "hello", "--time", "1h", "--", "sleep", "100"});
  ASSERT_EQ(submitted.rc, 0) << submitted.err;
  EXPECT_EQ(submitted.out, "Submitted job 1\n");

  Output queue = gpool({"queue"});
  ASSERT_EQ(queue.rc, 0) << queue.err;
  std::istringstream lines(queue.out);
  std::string header, row, extra;
  std::getline(lines, header);
  std::getline(lines, row);
  EXPECT_FALSE(std::getline(lines, extra));
  EXPECT_EQ(header.rfind("JOBID  NAME   USER", 0), 0u) << queue.out;
  EXPECT_TRUE(contains(header, "ST      TIME  GPUS  NODE(REASON)")) << queue.out;
  EXPECT_EQ(row.rfind("    1  hello  " + me(), 0), 0u) << queue.out;
  EXPECT_TRUE(contains(row, "  PD  00:00:00   0.5  (")) << queue.out;

  Output queue_json = gpool({"queue", "--json"});
  ASSERT_EQ(queue_json.rc, 0) << queue_json.err;
  json listed = json::parse(queue_json.out);
  ASSERT_EQ(listed["jobs"].size(), 1u);
  EXPECT_EQ(listed["jobs"][0]["spec"]["name"], "hello");
  EXPECT_EQ(listed["jobs"][0]["state"], "PENDING");

  Output show = gpool({"show", "1"});
  ASSERT_EQ(show.rc, 0) << show.err;
  EXPECT_TRUE(contains(show.out, "Name:")) << show.out;
  EXPECT_TRUE(contains(show.out, " hello\n")) << show.out;
  EXPECT_TRUE(contains(show.out, "TimeLimit:")) << show.out;
  EXPECT_TRUE(contains(show.out, " 01:00:00\n")) << show.out;
  EXPECT_TRUE(contains(show.out, "Command:")) << show.out;
  EXPECT_TRUE(contains(show.out, " sleep 100\n")) << show.out;
  Output show_json = gpool({"--json", "show", "1"});
  ASSERT_EQ(show_json.rc, 0) << show_json.err;
  json job = json::parse(show_json.out);
  EXPECT_EQ(job["spec"]["resources"]["gpus_milli"], 500);
  EXPECT_EQ(job["spec"]["command"], (json{"sleep", "100"}));

  Output cancelled = gpool({"cancel", "1"});
  EXPECT_EQ(cancelled.rc, 0) << cancelled.err;
  EXPECT_EQ(cancelled.out, "Cancelled job 1\n");
  Output again = gpool({"cancel", "1"});
  EXPECT_EQ(again.rc, 5);  // failed_precondition
  EXPECT_TRUE(contains(again.err, "cannot cancel job 1: ")) << again.err;
  EXPECT_TRUE(contains(again.err, "1 of 1 cancellations failed (jobs 1)")) << again.err;

  // The default queue shows active jobs; --state picks others.
  Output empty = gpool({"queue"});
  EXPECT_EQ(empty.out, "JOBID  NAME  USER  ST  TIME  GPUS  NODE(REASON)\n");
  Output finished = gpool({"queue", "--state", "CA"});
  EXPECT_TRUE(contains(finished.out, "  CA  ")) << finished.out;
}

TEST_F(GpoolCliTest, ArraySubmitAndCancelOfSeveral) {
  startDaemon();
  Output submitted = gpool({"submit", "--array", "0-3", "--gpus", "1", "--", "true"});
  ASSERT_EQ(submitted.rc, 0) << submitted.err;
  EXPECT_EQ(submitted.out, "Submitted array job 1 (4 elements, jobs 1-4)\n");
  Output json_submit = gpool({"submit", "--json", "--", "true"});
  ASSERT_EQ(json_submit.rc, 0) << json_submit.err;
  EXPECT_EQ(json::parse(json_submit.out), (json{{"ids", {5}}}));

  Output queue = gpool({"queue"});
  for (const char* id : {"1_0", "1_1", "1_2", "1_3"}) {
    EXPECT_TRUE(contains(queue.out, std::string(id) + "  true")) << queue.out;
  }
  Output show = gpool({"show", "1_2"});
  ASSERT_EQ(show.rc, 0) << show.err;
  EXPECT_TRUE(contains(show.out, "1_2 (id 3)")) << show.out;
  EXPECT_EQ(gpool({"show", "1_9"}).rc, 3);

  Output cancelled = gpool({"cancel", "1_1", "999", "1_3"});
  EXPECT_EQ(cancelled.rc, 3);  // not_found for 999
  EXPECT_EQ(cancelled.out, "Cancelled job 1_1\nCancelled job 1_3\n");
  EXPECT_TRUE(contains(cancelled.err, "cannot cancel job 999: ")) << cancelled.err;
  EXPECT_TRUE(contains(cancelled.err, "1 of 3 cancellations failed (jobs 999)")) << cancelled.err;

  Output mine = gpool({"cancel", "--mine"});
  EXPECT_EQ(mine.rc, 0) << mine.err;
  EXPECT_EQ(mine.out, "Cancelled job 1\nCancelled job 3\nCancelled job 5\n");
  Output none = gpool({"cancel", "--mine"});
  EXPECT_EQ(none.out, "No jobs of yours to cancel\n");
  Output all = gpool({"queue", "--all", "--state", "all", "--json"});
  ASSERT_EQ(all.rc, 0) << all.err;
  json jobs = json::parse(all.out)["jobs"];
  ASSERT_EQ(jobs.size(), 5u);
  for (const json& j : jobs)
    EXPECT_EQ(j["state"], "CANCELLED");
}

TEST_F(GpoolCliTest, ScriptDirectives) {
  startDaemon();
  std::string script = dir_.path() + "/train.sh";
  std::ofstream(script) << "#!/bin/bash\n"
                           "# trains\n"
                           "#GPOOL --gpus 2 --time 2h\n"
                           "#GPOOL --export A=1 --name fromscript\n"
                           "python train.py \"$@\"\n"
                           "#GPOOL --gpus 8\n";
  Output submitted = gpool({"submit", "--time", "30m", script, "--lr", "3"});
  ASSERT_EQ(submitted.rc, 0) << submitted.err;
  EXPECT_EQ(submitted.out, "Submitted job 1\n");
  Output shown = gpool({"show", "--json", "1"});
  ASSERT_EQ(shown.rc, 0) << shown.err;
  json spec = json::parse(shown.out)["spec"];
  EXPECT_EQ(spec["resources"]["gpus_milli"], 2000);
  EXPECT_EQ(spec["time_limit_seconds"], 1800);  // the command line wins
  EXPECT_EQ(spec["name"], "fromscript");
  EXPECT_EQ(spec["env"], (json{{"A", "1"}}));
  EXPECT_EQ(spec["command"], (json{"/bin/bash", script, "--lr", "3"}));

  std::string bad = dir_.path() + "/bad.sh";
  std::ofstream(bad) << "#!/bin/sh\n#GPOOL --gpu 2\necho\n";
  Output rejected = gpool({"submit", bad});
  EXPECT_EQ(rejected.rc, 2);
  EXPECT_EQ(rejected.err, "gpool: " + bad + ":2: unknown flag '--gpu' (did you mean '--gpus'?)\n");
  std::string bad_value = dir_.path() + "/bad-value.sh";
  std::ofstream(bad_value) << "#GPOOL --mem lots\n";
  Output bad_mem = gpool({"submit", bad_value});
  EXPECT_EQ(bad_mem.rc, 2);
  EXPECT_TRUE(contains(bad_mem.err, bad_value + ":1: --mem: ")) << bad_mem.err;
}

TEST_F(GpoolCliTest, BadArgumentsExitWithTwoAndSayWhy) {
  startDaemon();
  Output gpus = gpool({"submit", "--gpus", "1.5", "--", "true"});
  EXPECT_EQ(gpus.rc, 2);
  EXPECT_EQ(gpus.err.rfind("gpool: --gpus: ", 0), 0u) << gpus.err;
  Output typo = gpool({"submit", "--gpu", "2", "--", "true"});
  EXPECT_EQ(typo.rc, 2);
  EXPECT_EQ(typo.err, "gpool: unknown flag '--gpu' (did you mean '--gpus'?)\n");
  Output missing = gpool({"submit", "nope.sh"});
  EXPECT_EQ(missing.rc, 2);
  EXPECT_TRUE(contains(missing.err, "'nope.sh' is not a file")) << missing.err;
  Output nothing = gpool({"submit"});
  EXPECT_EQ(nothing.rc, 2);
  EXPECT_TRUE(contains(nothing.err, "nothing to run")) << nothing.err;
  Output state = gpool({"queue", "--state", "XX"});
  EXPECT_EQ(state.rc, 2);
  EXPECT_TRUE(contains(state.err, "--state: 'XX' is not a job state")) << state.err;
  Output both = gpool({"queue", "--all", "--user", "bob"});
  EXPECT_EQ(both.rc, 2);
  Output id = gpool({"show", "abc"});
  EXPECT_EQ(id.rc, 2);
  EXPECT_TRUE(contains(id.err, "'abc' is not a job id")) << id.err;
  Output unknown_job = gpool({"show", "999"});
  EXPECT_EQ(unknown_job.rc, 3);
  Output flag = gpool({"queue", "--bogus"});
  EXPECT_EQ(flag.rc, 2);
  Output no_command = gpool({});
  EXPECT_EQ(no_command.rc, 2);
  Output cancel_what = gpool({"cancel"});
  EXPECT_EQ(cancel_what.rc, 2);
  EXPECT_TRUE(contains(cancel_what.err, "--mine")) << cancel_what.err;
  // Nothing was submitted by any of these.
  EXPECT_EQ(gpool({"queue", "--state", "all", "--json"}).out, "{\n  \"jobs\": []\n}\n");
}

// `gpool watch --json`: JSON lines of the live feed; --after replays what was missed first.
TEST_F(GpoolCliTest, WatchPrintsJobEventsAsJsonLines) {
  startDaemon();
  ASSERT_EQ(gpool({"submit", "--", "sleep", "100"}).rc, 0);
  ASSERT_EQ(gpool({"submit", "--", "sleep", "100"}).rc, 0);
  Output watched = gpool({"watch", "--json", "--after", "0", "--count", "2"});
  ASSERT_EQ(watched.rc, 0) << watched.err;
  std::istringstream lines(watched.out);
  std::vector<json> events;
  for (std::string line; std::getline(lines, line);)
    events.push_back(json::parse(line));
  ASSERT_EQ(events.size(), 2u) << watched.out;
  EXPECT_EQ(events[0]["topic"], "jobs");
  EXPECT_EQ(events[0]["data"]["job_id"], 1);
  EXPECT_EQ(events[0]["data"]["to_state"], "PENDING");
  EXPECT_EQ(events[0]["data"]["user"], me());
  EXPECT_LT(events[0]["data"]["seq"].get<int64_t>(), events[1]["data"]["seq"].get<int64_t>());

  Output bad = gpool({"watch", "--topics", "bogus"});
  EXPECT_NE(bad.rc, 0);
  EXPECT_FALSE(bad.err.empty());
}

TEST_F(GpoolCliTest, HelpOnEveryCommand) {
  for (const char* command : {"submit", "queue", "show", "cancel", "nodes"}) {
    Output help = gpool({command, "--help"});
    EXPECT_EQ(help.rc, 0) << command;
    EXPECT_TRUE(contains(help.out, "--json")) << command << ": " << help.out;
  }
  EXPECT_TRUE(contains(gpool({"submit", "--help"}).out, "--gpu-mem SIZE"));
}

TEST_F(GpoolCliTest, UnreachableControllerSaysHowToFixIt) {
  // No daemon: the socket does not exist.
  Output o = gpool({"queue"});
  EXPECT_EQ(o.rc, 7);  // unavailable
  EXPECT_TRUE(contains(o.err, "gpool: cannot reach gpoold at unix:" + socket_)) << o.err;
  EXPECT_TRUE(contains(o.err, "is it running?")) << o.err;
  EXPECT_TRUE(contains(o.err, "GPOOL_SOCKET")) << o.err;
  // Without --socket, $GPOOL_SOCKET names the socket.
  std::string other = dir_.path() + "/other.sock";
  Output env = runProgram(kGpool, {"nodes"}, dir_.path(), {{"GPOOL_SOCKET", other}});
  EXPECT_EQ(env.rc, 7);
  EXPECT_TRUE(contains(env.err, "unix:" + other)) << env.err;
  Output cancel = gpool({"cancel", "1", "2"});
  EXPECT_EQ(cancel.rc, 7);
  EXPECT_TRUE(contains(cancel.err, "cannot reach gpoold")) << cancel.err;
}

TEST_F(GpoolCliTest, NodesAndARunningJob) {
  {
    auto store = ct::openStore(db_);
    ASSERT_TRUE(store::saveApiNode(*store, ct::makeNode("gpu-01", 2)).isOk());
    api::Node drained = ct::makeNode("gpu-02", 1);
    drained.state = api::NodeState::kDrained;
    drained.state_reason = "maintenance";
    ASSERT_TRUE(store::saveApiNode(*store, drained).isOk());
    ASSERT_TRUE(store::submitApiJob(*store, me(), geteuid(), "", ct::makeSpec(500, "placed"),
                                    realClock().now())
                    .ok());
  }
  // One scheduling pass places the job (no agent runs it, so it stays RUNNING).
  Output once = runProgram(kGpoold, {"--config", writeConfig(), "--once"}, dir_.path());
  ASSERT_EQ(once.rc, 0) << once.err;
  ASSERT_EQ(once.out, "pass: started=1 pending=0 nodes=2\n");
  startDaemon();

  Output nodes = gpool({"nodes"});
  ASSERT_EQ(nodes.rc, 0) << nodes.err;
  std::istringstream lines(nodes.out);
  std::string header, first, second, note;
  std::getline(lines, header);
  std::getline(lines, first);
  std::getline(lines, second);
  std::getline(lines, note);
  EXPECT_EQ(header.rfind("NODE    STATE", 0), 0u) << nodes.out;
  EXPECT_TRUE(contains(header, "GPUS     SLICES(free/used)  CPU(used/total)  MEM(used/total)"))
      << nodes.out;
  EXPECT_EQ(first.rfind("gpu-01  ", 0), 0u) << nodes.out;
  EXPECT_TRUE(contains(first, "2x A100  ")) << nodes.out;
  EXPECT_TRUE(contains(first, "  1.5/1  ")) << nodes.out;
  EXPECT_TRUE(contains(first, "  1/64  ")) << nodes.out;
  EXPECT_EQ(second.rfind("gpu-02  DRAINED (maintenance)  1x A100", 0), 0u) << nodes.out;
  EXPECT_TRUE(contains(second, "  0/0  ")) << nodes.out;
  EXPECT_EQ(note, "(some GPUs are simulated by the fake backend)");

  Output nodes_json = gpool({"nodes", "--json"});
  ASSERT_EQ(nodes_json.rc, 0) << nodes_json.err;
  json j = json::parse(nodes_json.out);
  ASSERT_EQ(j["nodes"].size(), 2u);
  EXPECT_EQ(j["nodes"][0]["name"], "gpu-01");
  EXPECT_EQ(j["nodes"][0]["gpus"].size(), 2u);

  Output queue = gpool({"queue"});
  ASSERT_EQ(queue.rc, 0) << queue.err;
  EXPECT_TRUE(contains(queue.out, "    1  placed  " + me())) << queue.out;
  EXPECT_TRUE(contains(queue.out, "  R   ")) << queue.out;
  EXPECT_TRUE(contains(queue.out, "   0.5  gpu-01\n")) << queue.out;
  Output show = gpool({"show", "1"});
  EXPECT_TRUE(contains(show.out, "task 0 on gpu-01")) << show.out;
}

// The shared GpooldProcess helper fails a start when gpoold never prints `ready` (here a bad
// configuration), and leaves nothing running.
TEST_F(GpoolCliTest, ADaemonThatExitsBeforeReadyIsReported) {
  std::string bad = dir_.path() + "/bad.toml";
  std::ofstream(bad) << "[controller]\nstor = \"/x\"\n";
  std::string error = gpoold_.start(bad);
  EXPECT_TRUE(contains(error, "gpoold exited before `ready`")) << error;
  EXPECT_FALSE(gpoold_.running());
}

// Issue 20 item 6: root's job was accepted, placed and then failed on the agent. gpoold now
// refuses it at submission; gpool exits 4 (permission_denied) saying why.
TEST_F(GpoolCliTest, RootsSubmissionIsRefusedWithExitFour) {
  if (geteuid() != 0) GTEST_SKIP() << "checks root's submission: run as root";
  controller_extra_.clear();  // the pool's default: root's jobs are not allowed
  startDaemon();
  Output refused = gpool({"submit", "--gpus", "0.5", "--", "sleep", "1"});
  EXPECT_EQ(refused.rc, 4) << refused.out << refused.err;
  EXPECT_TRUE(contains(refused.err, "does not run jobs as root (controller.allow_root_jobs)"))
      << refused.err;
  EXPECT_EQ(gpool({"queue", "--all"}).out, "JOBID  NAME  USER  ST  TIME  GPUS  NODE(REASON)\n");
}

// Issue 20 item 9 (D14, D18): a job's command was printed raw, so a user's escape sequences
// reached an admin's terminal. Here `nobody` submits a command holding ESC, OSC and BEL, and a
// job stored before names were checked holds U+202E; root's `gpool show` and `gpool queue` print
// escapes instead of the characters.
TEST_F(GpoolCliTest, UntrustedTextReachesTheTerminalEscaped) {
  std::optional<testing::RunAs> nobody = testing::runAsUser("nobody");
  if (geteuid() != 0 || !nobody) GTEST_SKIP() << "runs gpool as nobody: needs root";
  {
    auto store = ct::openStore(db_);
    ASSERT_TRUE(store::saveApiNode(*store, ct::makeNode("gpu-01", 2)).isOk());
    ASSERT_TRUE(store::submitApiJob(*store, "old", 1234, "", ct::makeSpec(500, "cat\u202egnp.exe"),
                                    realClock().now())
                    .ok());
  }
  startDaemon();
  chmod(dir_.path().c_str(), 0755);  // nobody must reach the socket
  const std::string evil = "x\033[2J\033]0;pwned\007\nline2";
  Output submitted = gpool({"submit", "--name", "innocent", "--", "printf", evil}, *nobody);
  ASSERT_EQ(submitted.rc, 0) << submitted.err;
  ASSERT_EQ(submitted.out, "Submitted job 2\n");
  Output show = gpool({"show", "2"});
  ASSERT_EQ(show.rc, 0) << show.err;
  for (char raw : {'\033', '\007'}) {
    EXPECT_EQ(show.out.find(raw), std::string::npos) << "raw control character in: " << show.out;
  }
  EXPECT_TRUE(contains(show.out, "printf $'x\\e[2J\\e]0;pwned\\a\\nline2'\n")) << show.out;
  Output queue = gpool({"queue", "--all"});
  ASSERT_EQ(queue.rc, 0) << queue.err;
  EXPECT_EQ(queue.out.find("\u202e"), std::string::npos) << queue.out;
  EXPECT_TRUE(contains(queue.out, "cat\\u202egnp.exe")) << queue.out;
  // And gpoold refuses such a name today.
  Output named = gpool({"submit", "--name", "a\u202eb", "--", "true"}, *nobody);
  EXPECT_EQ(named.rc, 2) << named.err;
  EXPECT_TRUE(contains(named.err, "contains U+202E")) << named.err;
  EXPECT_FALSE(contains(named.err, "\u202e")) << named.err;
}

}  // namespace
}  // namespace gpool::cli
