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
#include <mutex>
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

TEST(AgentMainTest, HelloWelcomeDesiredStateAndExitOverTheWebSocket) {
  std::string why = testing::ensureUser(testing::kAlice);
  if (!why.empty()) GTEST_SKIP() << why;
  testing::TempDir tmp;
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
  ASSERT_TRUE(router.addWebSocket("/v1/agent", ws).isOk());
  net::ServerOptions options;
  options.unix_socket_path = tmp.file("gpoold.sock");
  net::Server server(options, std::move(router));
  ASSERT_TRUE(server.start().isOk());

  std::string agent = std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-agent";
  std::string fixture =
      std::string(GPOOL_SOURCE_DIR) + "/src/gpu/fixtures/8x-a100-sxm4-80gb-nvlink.json";
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string state = tmp.file("state");
    std::string sock = tmp.file("gpoold.sock");
    std::string sup = testing::supervisorPath();
    std::string vgpu = tmp.file("vgpu");
    ::execl(agent.c_str(), agent.c_str(), "--node", "n1", "--unix-socket", sock.c_str(),
            "--state-dir", state.c_str(), "--fake-fixture", fixture.c_str(), "--supervisor",
            sup.c_str(), "--vgpu-dir", vgpu.c_str(), "--no-cgroups", nullptr);
    ::_exit(127);
  }
  auto hello = controller.waitFor([](const json& m) { return m.value("type", "") == "hello"; });
  auto exited = controller.waitFor([](const json& m) {
    return m.value("type", "") == "task_update" && m["body"].value("state", "") == "exited";
  });
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  server.stop();

  ASSERT_TRUE(hello.has_value());
  EXPECT_EQ((*hello)["body"]["node"]["name"], "n1");
  EXPECT_EQ((*hello)["body"]["gpus"]["gpus"].size(), 8u);
  EXPECT_EQ((*hello)["body"]["gpus"]["simulated"], true);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ((*exited)["body"]["assignment"]["lease_epoch"], 7);
  EXPECT_EQ((*exited)["body"]["exit_code"], 5);
  EXPECT_EQ(testing::readOr(tmp.file("state") + "/tasks/42.0/stdout.log"), "hello\n");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

}  // namespace
}  // namespace gpool::agent
