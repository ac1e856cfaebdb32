// gpool-agent end to end over the real transport: a net::Server on a Unix socket plays the
// controller's /v1/agent route; the agent (a child process, simulated GPUs from a fixture, no
// cgroups) says hello, gets welcome + desired_state, runs the task and reports its exit. Waits
// are on the messages arriving (condition variable with a deadline), never sleeps.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent_test_util.h"
#include "net/router.h"
#include "net/server.h"

namespace gpool::agent {
namespace {

using nlohmann::json;

class FakeController {
 public:
  // Waits for a message satisfying `pred`, up to 20 s.
  template <typename Pred>
  std::optional<json> waitFor(Pred pred) {
    std::unique_lock<std::mutex> lock(mu_);
    std::optional<json> found;
    cv_.wait_for(lock, std::chrono::seconds(20), [&] {
      for (const json& m : received_) {
        if (pred(m)) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  void add(std::string text) {
    std::lock_guard<std::mutex> lock(mu_);
    received_.push_back(json::parse(text, nullptr, false));
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> received_;
};

// What one run of gpool-agent against the scripted controller showed.
struct AgentRun {
  std::optional<json> hello;
  std::optional<json> exited;
  int status = -1;
  std::string stdout_log;  // task 42.0's
};

// Serves /v1/agent on tmp/gpoold.sock (welcome, then one task: the helper printing "hello" and
// exiting 5), starts gpool-agent with the arguments `args(tmp)` gives, waits for its hello and
// the task's exit, and stops it.
AgentRun runAgent(const testing::TempDir& tmp,
                  const std::function<std::vector<std::string>()>& args) {
  AgentRun run;
  FakeController controller;
  int64_t seq = 0;
  net::Router router;
  net::WebSocketHandler ws;
  ws.on_message = [&](const net::WebSocketConnectionPtr& conn, std::string text) {
    json msg = json::parse(text, nullptr, false);
    if (msg.is_object() && msg["type"] == "hello") {
      conn->send(json{{"v", 1},
                      {"type", "welcome"},
                      {"seq", ++seq},
                      {"body", {{"node_epoch", 3}, {"lease", {{"duration_s", 60}}}}}}
                     .dump());
      json task{{"assignment", {{"job_id", 42}, {"task", 0}, {"attempt", 0}, {"lease_epoch", 7}}},
                {"launch",
                 {{"argv", {testing::helperPath(), "echo", "hello", "exit", "5"}},
                  {"user", testing::kAlice},
                  {"working_dir", tmp.path()}}}};
      conn->send(json{{"v", 1},
                      {"type", "desired_state"},
                      {"seq", ++seq},
                      {"body", {{"node_epoch", 3}, {"tasks", {task}}}}}
                     .dump());
    }
    controller.add(std::move(text));
  };
  EXPECT_TRUE(router.addWebSocket("/v1/agent", ws).isOk());
  net::ServerOptions options;
  options.unix_socket_path = tmp.file("gpoold.sock");
  net::Server server(options, std::move(router));
  EXPECT_TRUE(server.start().isOk());

  std::string agent = std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-agent";
  std::vector<std::string> argv_strings = args();
  pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv{const_cast<char*>(agent.c_str())};
    for (const std::string& a : argv_strings)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(agent.c_str(), argv.data());
    ::_exit(127);
  }
  EXPECT_GE(pid, 0);
  if (pid < 0) return run;
  run.hello = controller.waitFor([](const json& m) { return m.value("type", "") == "hello"; });
  run.exited = controller.waitFor([](const json& m) {
    return m.value("type", "") == "task_update" && m["body"].value("state", "") == "exited";
  });
  ::kill(pid, SIGTERM);
  ::waitpid(pid, &run.status, 0);
  server.stop();
  run.stdout_log = testing::readOr(tmp.file("state") + "/tasks/42.0/stdout.log");
  return run;
}

const std::string kFixture =
    std::string(GPOOL_SOURCE_DIR) + "/src/gpu/fixtures/8x-a100-sxm4-80gb-nvlink.json";

void expectHelloAndExit(const AgentRun& run, const std::string& node) {
  ASSERT_TRUE(run.hello.has_value());
  EXPECT_EQ((*run.hello)["body"]["node"]["name"], node);
  EXPECT_EQ((*run.hello)["body"]["gpus"]["gpus"].size(), 8u);
  EXPECT_EQ((*run.hello)["body"]["gpus"]["simulated"], true);
  ASSERT_TRUE(run.exited.has_value());
  EXPECT_EQ((*run.exited)["body"]["assignment"]["lease_epoch"], 7);
  EXPECT_EQ((*run.exited)["body"]["exit_code"], 5);
  EXPECT_EQ(run.stdout_log, "hello\n");
  EXPECT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status;
}

TEST(AgentMainTest, HelloWelcomeDesiredStateAndExitOverTheWebSocket) {
  std::string why = testing::ensureUser(testing::kAlice);
  if (!why.empty()) GTEST_SKIP() << why;
  testing::TempDir tmp;
  AgentRun run = runAgent(tmp, [&]() -> std::vector<std::string> {
    return {"--node",         "n1",
            "--unix-socket",  tmp.file("gpoold.sock"),
            "--state-dir",    tmp.file("state"),
            "--fake-fixture", kFixture,
            "--supervisor",   testing::supervisorPath(),
            "--vgpu-dir",     tmp.file("vgpu"),
            "--no-cgroups"};
  });
  expectHelloAndExit(run, "n1");
}

// The same from a configuration file (`--config`, agent/agent_config.h: the socket, the
// directories, the fixture, no cgroups, its labels in the hello); a flag given beside it wins
// over the file's key (--node).
TEST(AgentMainTest, ReadsItsSettingsFromAConfigFile) {
  std::string why = testing::ensureUser(testing::kAlice);
  if (!why.empty()) GTEST_SKIP() << why;
  testing::TempDir tmp;
  std::string config = tmp.file("gpool-agent.toml");
  std::ofstream(config) << "[agent]\nnode = \"from-file\"\nunix_socket = \""
                        << tmp.file("gpoold.sock") << "\"\nstate_dir = \"" << tmp.file("state")
                        << "\"\nfake_fixture = \"" << kFixture << "\"\nsupervisor = \""
                        << testing::supervisorPath() << "\"\nvgpu_dir = \"" << tmp.file("vgpu")
                        << "\"\ncgroups = false\n[agent.labels]\nrack = \"r12\"\n";
  AgentRun from_file = runAgent(tmp, [&]() -> std::vector<std::string> {
    return {"--config", config, "--node", "from-flag"};
  });
  expectHelloAndExit(from_file, "from-flag");
  ASSERT_TRUE(from_file.hello.has_value());
  EXPECT_EQ((*from_file.hello)["body"]["node"]["labels"], (json{{"rack", "r12"}}));
}

// A bad configuration file stops gpool-agent with exit 2 and the file:line: key message; so
// does a file that, with the flags, names no node.
TEST(AgentMainTest, ABadConfigFileStopsTheAgent) {
  testing::TempDir tmp;
  std::string agent = std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-agent";
  std::string bad = tmp.file("bad.toml");
  std::ofstream(bad) << "[agent]\nnode = \"x\"\nstate_dir = \"relative\"\n";
  std::string err = tmp.file("stderr");
  std::string cmd = agent + " --config " + bad + " 2>" + err;
  int rc = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 2) << rc;
  EXPECT_NE(testing::readOr(err).find(bad + ":3: key 'agent.state_dir': must be an absolute path"),
            std::string::npos)
      << testing::readOr(err);
  std::string none = tmp.file("none.toml");
  std::ofstream(none) << "[agent]\n";
  rc = std::system((agent + " --config " + none + " 2>" + err).c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 2) << rc;
  EXPECT_NE(testing::readOr(err).find("--node NAME or agent.node"), std::string::npos)
      << testing::readOr(err);
}

}  // namespace
}  // namespace gpool::agent
