// Drives `gpool up` and `gpool down` as a user would: the real gpool binary starts the real
// gpoold and gpool-agent processes (simulated GPUs) in a temporary directory; the test reads
// what they print and asks the controller over its socket. No sleeps for synchronisation: the
// commands wait for their own steps, and job states are polled with an overall deadline.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "common/clock.h"
#include "net/client.h"
#include "store/sqlite_store.h"

namespace gpool::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using testing::kGpool;
using testing::Output;
using testing::readFile;

class UpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "gpool-up-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // gpool's own output is kept apart from the pool's directory.
    std::string out_tmpl = (fs::temp_directory_path() / "gpool-up-out-XXXXXX").string();
    ASSERT_NE(mkdtemp(out_tmpl.data()), nullptr);
    out_dir_ = out_tmpl;
  }

  void TearDown() override {
    // A failed test must not leave daemons behind.
    if (fs::exists(dir_ + "/pool.json")) gpool({"down", "--dir", dir_, "--timeout", "10"});
    std::error_code ec;
    fs::remove_all(dir_, ec);
    fs::remove_all(out_dir_, ec);
  }

  // Runs gpool with `args`; stdout and stderr go to files, so neither can fill a pipe.
  Output gpool(const std::vector<std::string>& args) {
    return testing::runProgram(kGpool, args, out_dir_);
  }

  json poolFile() { return json::parse(readFile(dir_ + "/pool.json"), nullptr, false); }

  static bool alive(int pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    if (!std::getline(stat, text)) return false;
    size_t paren = text.rfind(')');
    return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
  }

  // The job's state, polled until it is one of `wanted` or 60 s pass.
  std::string waitForState(net::HttpClient& client, int64_t id,
                           const std::vector<std::string>& wanted) {
    const auto deadline = realClock().monotonic() + std::chrono::seconds(60);
    std::string state;
    while (realClock().monotonic() < deadline) {
      auto r = client.get("/v1/jobs/" + std::to_string(id));
      if (r.ok() && r->status == 200) {
        state = json::parse(r->body).value("state", "");
        if (std::find(wanted.begin(), wanted.end(), state) != wanted.end()) return state;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "timed out in " + state;
  }

  // The job's pending reason, polled until it is `wanted` or 60 s pass.
  std::string waitForReason(net::HttpClient& client, int64_t id, const std::string& wanted) {
    const auto deadline = realClock().monotonic() + std::chrono::seconds(60);
    std::string reason;
    while (realClock().monotonic() < deadline) {
      auto r = client.get("/v1/jobs/" + std::to_string(id));
      if (r.ok() && r->status == 200) {
        reason = json::parse(r->body).value("reason", "");
        if (reason == wanted) return reason;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return "timed out in " + reason;
  }

  // The job id `gpool up --demo` printed for `name` ("  name  user  submitted as job 7").
  static int64_t demoJobId(const std::string& out, const std::string& name) {
    std::istringstream lines(out);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("  " + name + " ", 0) != 0) continue;
      size_t at = line.find("submitted as job ");
      if (at == std::string::npos) return -1;
      return std::stoll(line.substr(at + 17));
    }
    return -1;
  }

  std::string dir_;
  std::string out_dir_;
};

TEST_F(UpTest, StartsASimulatedPoolThatDownStops) {
  Output up = gpool({"up", "--dir", dir_, "--servers", "2", "--simulate", "--timeout", "60"});
  ASSERT_EQ(up.rc, 0) << up.out << up.err;
  EXPECT_NE(up.out.find("a pool of 2 server(s) is up (simulated GPUs"), std::string::npos)
      << up.out;
  EXPECT_NE(up.out.find("sim-node-2"), std::string::npos) << up.out;
  // The dashboard's link: gpoold's loopback HTTP port and an API token in the fragment.
  EXPECT_NE(up.out.find("\ndashboard http://127.0.0.1:"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("/#token=gpt."), std::string::npos) << up.out;

  json pool = poolFile();
  ASSERT_TRUE(pool.is_object());
  ASSERT_EQ(pool["agents"].size(), 2u);
  std::vector<int> pids{pool["gpoold_pid"].get<int>()};
  for (const json& a : pool["agents"])
    pids.push_back(a["pid"].get<int>());
  for (int pid : pids)
    EXPECT_TRUE(alive(pid)) << pid;

  // The controller knows both servers, each with 8 simulated GPUs.
  net::HttpClient client(net::ClientEndpoint::unixSocket(pool["socket"].get<std::string>()));
  auto nodes = client.get("/v1/nodes");
  ASSERT_TRUE(nodes.ok());
  json body = json::parse(nodes->body);
  ASSERT_EQ(body["nodes"].size(), 2u) << nodes->body;
  for (const json& n : body["nodes"]) {
    EXPECT_NE(n["state"], "DOWN");
    ASSERT_EQ(n["gpus"].size(), 8u);
    EXPECT_TRUE(n["gpus"][0].value("simulated", false));
  }

  Output status = gpool({"up", "--dir", dir_, "--status"});
  EXPECT_EQ(status.rc, 0) << status.err;
  EXPECT_NE(status.out.find("running"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("(simulated)"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("dashboard    http://127.0.0.1:"), std::string::npos) << status.out;
  EXPECT_EQ(status.out.find("#token="), std::string::npos) << status.out;  // no secret there

  Output again = gpool({"up", "--dir", dir_, "--simulate"});
  EXPECT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.out.find("already up"), std::string::npos) << again.out;
  EXPECT_EQ(poolFile()["gpoold_pid"], pool["gpoold_pid"]);  // the same pool, not a second one

  Output down = gpool({"down", "--dir", dir_});
  ASSERT_EQ(down.rc, 0) << down.out << down.err;
  for (int pid : pids)
    EXPECT_FALSE(alive(pid)) << pid;
  EXPECT_FALSE(fs::exists(dir_ + "/pool.json"));
  EXPECT_TRUE(fs::exists(dir_ + "/gpool.db"));  // the store stays unless --purge
}

TEST_F(UpTest, DemoJobsRunToTheirEndAndDownCancelsTheRest) {
  Output up =
      gpool({"up", "--dir", dir_, "--servers", "2", "--simulate", "--demo", "--timeout", "60"});
  ASSERT_EQ(up.rc, 0) << up.out << up.err;
  const int64_t quick = demoJobId(up.out, "unit-test");
  const int64_t broken = demoJobId(up.out, "broken-run");
  const int64_t training = demoJobId(up.out, "train-resnet50");
  ASSERT_GT(quick, 0) << up.out;
  ASSERT_GT(broken, 0) << up.out;
  ASSERT_GT(training, 0) << up.out;
  // More GPUs than any server has: refused at submission with the reason.
  EXPECT_NE(up.out.find("too-big"), std::string::npos);
  EXPECT_NE(up.out.find("refused (HTTP 400)"), std::string::npos) << up.out;

  net::HttpClient client(net::ClientEndpoint::unixSocket(poolFile()["socket"].get<std::string>()));
  // `up` returns once the scheduler has been over the demo jobs: none still waits as submitted.
  EXPECT_NE(up.out.find("after the scheduler's first pass: "), std::string::npos) << up.out;
  Result<net::Response> pending = client.get("/v1/jobs?state=PENDING&limit=1000");
  ASSERT_TRUE(pending.ok()) << pending.status().toString();
  for (const json& j : json::parse(pending->body).value("jobs", json::array())) {
    EXPECT_NE(j.value("reason", ""), "submitted") << j.dump();
  }
  // Whole-GPU jobs: their tasks really run (as the submitting user) and end as they should.
  EXPECT_EQ(waitForState(client, quick, {"COMPLETED", "FAILED"}), "COMPLETED");
  EXPECT_EQ(waitForState(client, broken, {"COMPLETED", "FAILED"}), "FAILED");
  EXPECT_EQ(waitForState(client, training, {"RUNNING"}), "RUNNING");
  if (::geteuid() == 0) {
    // Root's demo caps its third user at 2 GPUs: their 4-GPU job waits for the quota.
    EXPECT_NE(up.out.find("quota: gpool-demo-carol may hold 2 GPUs at once"), std::string::npos)
        << up.out;
    const int64_t over = demoJobId(up.out, "over-quota");
    ASSERT_GT(over, 0) << up.out;
    EXPECT_EQ(waitForReason(client, over, "AssocMaxGpuPerUser"), "AssocMaxGpuPerUser");
    EXPECT_EQ(waitForState(client, over, {"PENDING"}), "PENDING");
  }

  Output down = gpool({"down", "--dir", dir_});
  ASSERT_EQ(down.rc, 0) << down.out << down.err;
  EXPECT_NE(down.out.find("cancelled"), std::string::npos) << down.out;
  auto store = store::SqliteStore::open(dir_ + "/gpool.db", store::SqliteOptions{});
  ASSERT_TRUE(store.ok()) << store.status().toString();
  auto job = (*store)->getJob(training);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, api::JobState::kCancelled);
  EXPECT_EQ((*store)->getJob(quick)->state, api::JobState::kCompleted);
}

// `--set KEY=VALUE` reaches gpoold (a node whose agent dies is DOWN after the 3 s set here, not
// the default 90 s) and every agent (CPUs and a label as set), and is written to their files.
TEST_F(UpTest, SetChangesKeysOfGpooldAndOfEveryAgent) {
  Output up = gpool({"up", "--dir", dir_, "--servers", "2", "--simulate", "--timeout", "60",
                     "--set", "controller.lease_duration=1s", "--set",
                     "controller.heartbeat_interval=1s", "--set", "controller.node_down_after=3s",
                     "--set", "agent.cpus=8", "--set", "agent.labels.rack=r7"});
  ASSERT_EQ(up.rc, 0) << up.out << up.err;
  EXPECT_NE(readFile(dir_ + "/gpoold.toml").find("lease_duration = \"1s\"\n"), std::string::npos)
      << readFile(dir_ + "/gpoold.toml");
  EXPECT_NE(readFile(dir_ + "/agent-sim-node-2.toml").find("cpus = 8\n"), std::string::npos)
      << readFile(dir_ + "/agent-sim-node-2.toml");

  json pool = poolFile();
  net::HttpClient client(net::ClientEndpoint::unixSocket(pool["socket"].get<std::string>()));
  auto nodes = client.get("/v1/nodes");
  ASSERT_TRUE(nodes.ok());
  json body = json::parse(nodes->body);
  ASSERT_EQ(body["nodes"].size(), 2u) << nodes->body;
  for (const json& n : body["nodes"]) {
    EXPECT_EQ(n.value("cpus_milli", 0), 8000) << n.dump();
    EXPECT_EQ(n["labels"].value("rack", ""), "r7") << n.dump();
  }

  // The agent of sim-node-1 dies: its node is DOWN within node_down_after (3 s) plus a pass.
  int agent_pid = -1;
  for (const json& a : pool["agents"]) {
    if (a["node"] == "sim-node-1") agent_pid = a["pid"].get<int>();
  }
  ASSERT_GT(agent_pid, 0);
  ASSERT_EQ(::kill(agent_pid, SIGKILL), 0);
  const auto killed = realClock().monotonic();
  std::string state;
  while (realClock().monotonic() < killed + std::chrono::seconds(30)) {
    auto r = client.get("/v1/nodes/sim-node-1");
    if (r.ok() && r->status == 200) state = json::parse(r->body).value("state", "");
    if (state == "DOWN") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(state, "DOWN");
  EXPECT_LT(realClock().monotonic() - killed, std::chrono::seconds(20));  // not the default 90 s
}

// A bad key or value stops `up` before anything starts, naming the --set; nothing is left
// running or half-written.
TEST_F(UpTest, SetWithABadKeyOrValueIsAClearErrorAndStartsNothing) {
  struct Case {
    std::vector<std::string> sets;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {{"controller.lease_duratoin=10s"},
       {"--set controller.lease_duratoin=10s: unknown key 'controller.lease_duratoin'",
        "lease_duration"}},
      {{"controller.lease_duration=10x"},
       {"--set controller.lease_duration=10x: key 'controller.lease_duration'", "unit"}},
      {{"controller.api_threads=0"}, {"--set controller.api_threads=0: key"}},
      {{"agent.cpus=lots"}, {"--set agent.cpus=lots: key 'agent.cpus'"}},
      {{"agent.cpuss=8"}, {"--set agent.cpuss=8: unknown key 'agent.cpuss'"}},
      {{"nosuchsection.key=1"}, {"--set nosuchsection.key=1: unknown key 'nosuchsection'"}},
      {{"agent.node=x"}, {"--set agent.node=x: gpool up sets agent.node itself"}},
      {{"lease_duration=10s"}, {"--set lease_duration=10s: key 'lease_duration' names no section"}},
      // A rule between keys, broken by this --set.
      {{"controller.lease_duration=200s"},
       {"--set controller.lease_duration=200s: key 'controller.node_down_after': must exceed"}},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args{"up", "--dir", dir_, "--simulate", "--timeout", "20"};
    for (const std::string& s : c.sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    Output up = gpool(args);
    EXPECT_EQ(up.rc, 2) << c.sets[0] << ": " << up.out << up.err;
    for (const std::string& says : c.says)
      EXPECT_NE(up.err.find(says), std::string::npos) << c.sets[0] << ": " << up.err;
    EXPECT_FALSE(fs::exists(dir_ + "/pool.json")) << c.sets[0];
    EXPECT_FALSE(fs::exists(dir_ + "/gpoold.log")) << c.sets[0];  // gpoold never started
    EXPECT_FALSE(fs::exists(dir_ + "/gpoold.toml.new")) << c.sets[0];
  }
}

TEST_F(UpTest, BadArgumentsAndMissingPoolsAreClearErrors) {
  Output down = gpool({"down", "--dir", dir_});
  EXPECT_EQ(down.rc, 3);  // not_found (docs/cli-exit-codes.md)
  EXPECT_NE(down.err.find("no pool is up in " + dir_), std::string::npos) << down.err;

  Output status = gpool({"up", "--dir", dir_, "--status"});
  EXPECT_EQ(status.rc, 3);

  Output servers = gpool({"up", "--dir", dir_, "--servers", "0", "--simulate"});
  EXPECT_EQ(servers.rc, 2);
  EXPECT_NE(servers.err.find("--servers"), std::string::npos) << servers.err;

  Output fixture = gpool({"up", "--dir", dir_, "--simulate", "--fixture", "no-such-gpus.json"});
  EXPECT_EQ(fixture.rc, 3);
  EXPECT_NE(fixture.err.find("no-such-gpus.json"), std::string::npos) << fixture.err;
  EXPECT_FALSE(fs::exists(dir_ + "/pool.json"));

  Output unknown = gpool({"up", "--dir", dir_, "--no-such-flag"});
  EXPECT_EQ(unknown.rc, 2);
}

// `gpool up --ha`: two controllers on a PostgreSQL server of the pool's own, one leading and
// one standing by; a SIGKILL of the leader hands the pool over (the agent follows), and
// `gpool down` stops both controllers and the database.
TEST_F(UpTest, HaStartsALeaderAndAStandbyAndAKillOfTheLeaderHandsOver) {
  bool have_postgres = false;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec))
    have_postgres = have_postgres || fs::exists(e.path() / "bin/pg_ctl");
  if (!have_postgres) GTEST_SKIP() << "no PostgreSQL server programs (Debian package postgresql)";

  Output up = gpool({"up", "--ha", "--dir", dir_, "--servers", "1", "--simulate", "--timeout", "60",
                     "--set", "ha.lease=2s"});
  ASSERT_EQ(up.rc, 0) << up.out << up.err;
  EXPECT_NE(up.out.find("with two controllers on PostgreSQL"), std::string::npos) << up.out;
  json pool = poolFile();
  ASSERT_TRUE(pool.is_object());
  const int leader = pool["gpoold_pid"].get<int>();
  const int standby = pool.value("standby_pid", -1);
  const std::string socket = pool["socket"].get<std::string>();
  const std::string standby_socket = pool.value("standby_socket", "");
  ASSERT_TRUE(alive(leader));
  ASSERT_TRUE(alive(standby));
  auto health = [](const std::string& s) {
    net::HttpClient c(net::ClientEndpoint::unixSocket(s), std::chrono::seconds(5));
    auto r = c.get("/v1/health");
    return r.ok() ? r->status : -1;
  };
  EXPECT_EQ(health(socket), 200);
  EXPECT_EQ(health(standby_socket), 503);  // a standby, naming the leader
  Output status = gpool({"up", "--dir", dir_, "--status"});
  EXPECT_EQ(status.rc, 0) << status.err;
  EXPECT_NE(status.out.find("(leader)"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("(standby)"), std::string::npos) << status.out;

  ASSERT_EQ(::kill(leader, SIGKILL), 0);
  // The standby leads within the lease (2 s) and a poll, and the agent says hello to it.
  const auto deadline = realClock().monotonic() + std::chrono::seconds(30);
  bool handed_over = false;
  while (!handed_over && realClock().monotonic() < deadline) {
    handed_over = health(standby_socket) == 200 &&
                  readFile(dir_ + "/gpoold-2.log").find("agent of node sim-node-1 said hello") !=
                      std::string::npos;
    if (!handed_over) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(handed_over) << readFile(dir_ + "/gpoold-2.log");
  Output after = gpool({"up", "--dir", dir_, "--status"});
  EXPECT_NE(after.out.find("STOPPED"), std::string::npos) << after.out;
  EXPECT_NE(after.out.find("(leader)"), std::string::npos) << after.out;
  // The dashboard shown is the new leader's own.
  const std::string standby_dashboard = poolFile().value("standby_dashboard", "");
  EXPECT_NE(standby_dashboard, pool.value("dashboard", ""));
  EXPECT_NE(after.out.find("dashboard    " + standby_dashboard), std::string::npos) << after.out;

  Output down = gpool({"down", "--dir", dir_});
  ASSERT_EQ(down.rc, 0) << down.out << down.err;
  EXPECT_NE(down.out.find("postgresql"), std::string::npos) << down.out;
  EXPECT_FALSE(alive(standby));
  EXPECT_FALSE(fs::exists(dir_ + "/postgres/data/postmaster.pid"));  // the server stopped
  EXPECT_FALSE(fs::exists(dir_ + "/pool.json"));
}

}  // namespace
}  // namespace gpool::cli
