// The controller's /v1/agent link in-process: a real net::Server on a Unix socket with the REST
// routes and the agent route, the real SchedulingLoop over a SQLite store (passes run by the
// test, not by a timer), and scripted fake agents (net::WebSocketClient). Every wait is on a
// message arriving or on the REST API showing a state, with a deadline; no sleeps.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "common/base64.h"
#include "controller/agent_link.h"
#include "controller/api_routes.h"
#include "controller/controller_fixture.h"
#include "controller/job_service.h"
#include "controller/node_registry.h"
#include "controller/raw_http.h"
#include "controller/scheduling_loop.h"
#include "controller/telemetry_history.h"
#include "net/client.h"
#include "net/server.h"
#include "store/api_codec.h"

namespace gpool::controller {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr auto kDeadline = seconds(10);

// A scripted agent: records every message and disconnect, sends frames of its own.
class FakeAgent {
 public:
  FakeAgent(const std::string& socket, std::string node, milliseconds backoff = milliseconds(50))
      : node_(std::move(node)) {
    net::WebSocketClientOptions options;
    options.endpoint = net::ClientEndpoint::unixSocket(socket);
    options.target = "/v1/agent";
    options.initial_backoff = backoff;
    options.max_backoff = backoff;
    options.on_connect = [this] {
      std::lock_guard lock(mu_);
      ++connects_;
      cv_.notify_all();
    };
    options.on_message = [this](std::string text) {
      std::lock_guard lock(mu_);
      received_.push_back(json::parse(text, nullptr, false));
      cv_.notify_all();
    };
    options.on_disconnect = [this](const Status& why) {
      std::lock_guard lock(mu_);
      disconnects_.push_back(why.message());
      cv_.notify_all();
    };
    client_ = std::make_unique<net::WebSocketClient>(options);
    client_->start();
  }
  ~FakeAgent() { client_->stop(); }

  bool waitConnected() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kDeadline, [this] { return connects_ > 0; });
  }

  // Sends one frame with the next sequence number.
  void send(const std::string& type, json body) {
    json msg{{"v", 1}, {"type", type}, {"seq", ++seq_}, {"ack", 0}, {"body", std::move(body)}};
    ASSERT_TRUE(client_->send(msg.dump()));
  }
  void sendRaw(const std::string& text) { ASSERT_TRUE(client_->send(text)); }

  json helloBody(const json& tasks = json::array()) const {
    json gpus = json::array();
    for (int i = 0; i < 2; ++i) {
      gpus.push_back({{"uuid", "GPU-" + node_ + "-" + std::to_string(i)},
                      {"index", i},
                      {"pci_bus_id", ""},
                      {"model", "NVIDIA A100-SXM4-80GB (simulated)"},
                      {"memory_total_mib", 81920},
                      {"compute_capability", "8.0"},
                      {"mig_enabled", false},
                      {"mig_instances", json::array()},
                      {"simulated", true}});
    }
    json links =
        json::array({{{"gpu_a", 0}, {"gpu_b", 1}, {"level", "NV12"}, {"nvlink_count", 12}}});
    return {{"node",
             {{"name", node_},
              {"hostname", node_ + ".test"},
              {"labels", json::object()},
              {"cpu_millis", 16000},
              {"ram_mib", 65536},
              {"agent_version", "test"},
              {"os", "Linux"},
              {"cgroup", "none"}}},
            {"gpus",
             {{"backend", "fake"},
              {"simulated", true},
              {"driver_version", "535.0"},
              {"cuda_driver_version", "12.2"},
              {"gpus", gpus},
              {"links", links}}},
            {"tasks", tasks},
            {"last_node_epoch", 0}};
  }

  // The first message received at or after index `from` satisfying `pred`, within the deadline;
  // its index goes to `at`.
  std::optional<json> waitFor(const std::function<bool(const json&)>& pred, size_t from = 0,
                              size_t* at = nullptr) {
    std::unique_lock lock(mu_);
    std::optional<json> found;
    cv_.wait_for(lock, kDeadline, [&] {
      for (size_t i = from; i < received_.size(); ++i) {
        if (pred(received_[i])) {
          found = received_[i];
          if (at) *at = i;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  std::optional<json> waitType(const std::string& type, size_t from = 0, size_t* at = nullptr) {
    return waitFor([&](const json& m) { return m.value("type", "") == type; }, from, at);
  }
  size_t receivedCount() {
    std::lock_guard lock(mu_);
    return received_.size();
  }
  json message(size_t i) {
    std::lock_guard lock(mu_);
    return i < received_.size() ? received_[i] : json::object();
  }
  size_t countType(const std::string& type) {
    std::lock_guard lock(mu_);
    size_t n = 0;
    for (const json& m : received_)
      n += m.value("type", "") == type ? 1 : 0;
    return n;
  }
  // Waits for a disconnect whose reason contains `text`.
  bool waitDisconnect(const std::string& text) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, kDeadline, [&] {
      for (const std::string& d : disconnects_) {
        if (d.find(text) != std::string::npos) return true;
      }
      return false;
    });
  }
  // A heartbeat and its `lease` answer: every frame sent before has been handled by then
  // (one connection's messages are handled in order).
  bool roundTrip() {
    size_t from = receivedCount();
    send("heartbeat", {{"time_us", 1}, {"lease_ok", true}});
    return waitType("lease", from).has_value();
  }

 private:
  std::string node_;
  std::unique_ptr<net::WebSocketClient> client_;
  int64_t seq_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  int connects_ = 0;
  std::vector<json> received_;
  std::vector<std::string> disconnects_;
};

json taskUpdate(int64_t job, int64_t epoch, const std::string& state, int exit_code = 0,
                uint32_t task = 0) {
  const std::string dir = "/x/" + std::to_string(task);
  json body{
      {"assignment", {{"job_id", job}, {"task", task}, {"attempt", 0}, {"lease_epoch", epoch}}},
      {"state", state},
      {"final_state", state == "running" ? "RUNNING"
                      : exit_code == 0   ? "COMPLETED"
                                         : "FAILED"},
      {"pid", 4242},
      {"started_at_us", 1},
      {"log_paths", json::array({dir + "/stdout.log", dir + "/stderr.log"})}};
  if (state == "exited") {
    body["ended_at_us"] = 2;
    body["exit_code"] = exit_code;
    body["signal"] = 0;
    body["oom_killed"] = false;
    body["timed_out"] = false;
    body["cancelled"] = false;
  }
  return body;
}

class AgentLinkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::chmod(dir_.path().c_str(), 0755);  // the refused-uid case connects as nobody
    store_ = testing::openStore(dir_.path() + "/gpool.db");
    registry_ = std::make_unique<NodeRegistry>(*store_, realClock());
    AgentLinkOptions options;
    options.own_uid = static_cast<uint32_t>(::geteuid());
    link_ = std::make_unique<AgentLink>(*store_, *registry_, realClock(), options);
    loop_ =
        std::make_unique<SchedulingLoop>(*store_, *registry_, *link_, realClock(), LoopOptions{});
    link_->attach(*loop_);
    link_->attachTelemetry(telemetry_);
    JobServiceOptions service_options;
    service_options.log_relay = link_.get();
    service_options.allow_root_jobs = true;  // the test submits as root; its agents are scripted
    service_ = std::make_unique<JobService>(*store_, *registry_, realClock(), loop_.get(),
                                            service_options);
    net::Router router;
    ApiRouteOptions api_options;
    api_options.telemetry = &telemetry_;
    api_options.gpu_cleared = [this](const std::string& node) { (void)link_->reapplyHealth(node); };
    ASSERT_TRUE(addApiRoutes(router, *store_, *service_, *registry_, api_options).isOk());
    ASSERT_TRUE(link_->addRoute(router).isOk());
    net::ServerOptions options_net;
    options_net.unix_socket_path = socket_;
    server_ = std::make_unique<net::Server>(options_net, std::move(router));
    ASSERT_TRUE(server_->start().isOk());
    http_ =
        std::make_unique<net::HttpClient>(net::ClientEndpoint::unixSocket(socket_), seconds(10));
  }
  void TearDown() override {
    http_.reset();
    if (server_) server_->stop();
  }

  // Connects an agent for `node` and completes hello -> welcome + desired_state.
  std::unique_ptr<FakeAgent> helloAgent(const std::string& node, json* desired = nullptr) {
    auto agent = std::make_unique<FakeAgent>(socket_, node);
    EXPECT_TRUE(agent->waitConnected());
    agent->send("hello", agent->helloBody());
    auto welcome = agent->waitType("welcome");
    EXPECT_TRUE(welcome.has_value());
    auto state = agent->waitType("desired_state");
    EXPECT_TRUE(state.has_value());
    if (desired && state) *desired = *state;
    return agent;
  }

  int64_t submit(const std::string& command) {
    api::JobSpec spec = testing::makeSpec(1000);
    spec.command = {"/bin/sh", "-c", command};
    auto r = http_->post("/v1/jobs", api::toJson(spec).dump());
    EXPECT_TRUE(r.ok());
    if (!r.ok()) return -1;
    EXPECT_EQ(r->status, 201) << r->body;
    return json::parse(r->body)["ids"][0].get<int64_t>();
  }

  // Submits `command`, places it on `agent`'s node (one pass) and reports its task running there
  // under the assignment's epoch (to `epoch`); the job id, or -1.
  int64_t startRunning(FakeAgent& agent, const std::string& command, int64_t* epoch) {
    int64_t id = submit(command);
    size_t from = agent.receivedCount();
    if (!loop_->runOnce().ok()) return -1;
    auto assign = agent.waitType("assign", from);
    if (!assign) return -1;
    *epoch = (*assign)["body"]["assignment"]["lease_epoch"].get<int64_t>();
    agent.send("task_update", taskUpdate(id, *epoch, "running"));
    return agent.roundTrip() ? id : -1;
  }

  json job(int64_t id) {
    auto r = http_->get("/v1/jobs/" + std::to_string(id));
    if (!r.ok() || r->status != 200) return json::object();
    return json::parse(r->body);
  }

  // Polls GET /v1/jobs/{id} until its state is `state` (10 ms interval, bounded).
  bool waitJobState(int64_t id, const std::string& state) {
    auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (std::chrono::steady_clock::now() < deadline) {
      if (job(id).value("state", "") == state) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  json getJson(const std::string& target) {
    auto r = http_->get(target);
    if (!r.ok()) return json::object();
    EXPECT_EQ(r->status, 200) << target << ": " << r->body;
    return json::parse(r->body, nullptr, false);
  }

  // GET /v1/gpus as a map by UUID.
  std::map<std::string, json> gpus() {
    std::map<std::string, json> out;
    json all = getJson("/v1/gpus");
    EXPECT_TRUE(all.contains("gpus")) << all.dump();
    for (const json& g : all["gpus"])
      out[g["uuid"].get<std::string>()] = g;
    return out;
  }

  testing::TempDir dir_;
  std::string socket_ = dir_.path() + "/gpoold.sock";
  TelemetryHistory telemetry_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<AgentLink> link_;
  std::unique_ptr<SchedulingLoop> loop_;
  std::unique_ptr<JobService> service_;
  std::unique_ptr<net::Server> server_;
  std::unique_ptr<net::HttpClient> http_;
};

// Issue 19, defect 2 (trial D6): a job submitted right after a node's agent went away is not
// placed there (it would show RUNNING and never run); once the agent says hello again it is.
TEST_F(AgentLinkTest, ANodeWhoseAgentIsGoneGetsNoNewWork) {
  auto agent = helloAgent("n1");
  agent.reset();  // the agent's connection closes
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (registry_->agentConnected("n1") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(10));
  ASSERT_FALSE(registry_->agentConnected("n1"));
  EXPECT_EQ(registry_->node("n1")->state, api::NodeState::kIdle);  // not DOWN (yet)
  int64_t id = submit("true");
  ASSERT_TRUE(loop_->runOnce().ok());
  EXPECT_EQ(job(id)["state"], "PENDING") << job(id).dump();

  auto back = helloAgent("n1");
  size_t from = back->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  EXPECT_TRUE(back->waitType("assign", from).has_value());
  EXPECT_EQ(job(id)["state"], "RUNNING");
}

TEST_F(AgentLinkTest, HelloRegistersTheNodeAndGetsWelcomeAndDesiredState) {
  auto agent = std::make_unique<FakeAgent>(socket_, "n1");
  ASSERT_TRUE(agent->waitConnected());
  agent->send("hello", agent->helloBody());
  size_t welcome_at = 0;
  size_t desired_at = 0;
  auto welcome = agent->waitType("welcome", 0, &welcome_at);
  auto desired = agent->waitType("desired_state", 0, &desired_at);
  ASSERT_TRUE(welcome && desired);
  EXPECT_LT(welcome_at, desired_at);
  int64_t epoch = (*welcome)["body"]["node_epoch"].get<int64_t>();
  EXPECT_GT(epoch, 0);
  EXPECT_EQ((*welcome)["body"]["lease"]["duration_s"], 60);
  EXPECT_EQ((*welcome)["body"]["config"]["heartbeat_interval_s"], 5);
  EXPECT_EQ((*welcome)["seq"], 1);
  EXPECT_EQ((*welcome)["ack"], 1);
  EXPECT_EQ((*desired)["body"]["node_epoch"], epoch);
  EXPECT_EQ((*desired)["body"]["tasks"], json::array());
  EXPECT_TRUE(link_->connected("n1"));

  auto node = registry_->node("n1");
  ASSERT_TRUE(node.ok());
  ASSERT_EQ(node->gpus.size(), 2u);
  EXPECT_EQ(node->gpus[1].uuid, "GPU-n1-1");
  EXPECT_EQ(node->gpus[0].memory_mib, 81920u);
  EXPECT_EQ(node->gpus[0].compute_capability.major, 8u);
  EXPECT_EQ(node->gpus[0].driver_version, "535.0");
  ASSERT_EQ(node->gpus[0].links.size(), 1u);
  EXPECT_EQ(node->gpus[0].links[0].peer_uuid, "GPU-n1-1");
  EXPECT_EQ(node->gpus[0].links[0].nvlinks, 12u);
  EXPECT_EQ(node->cpus_milli, 16000u);
  EXPECT_EQ(registry_->nodeEpoch("n1"), epoch);

  // Heartbeat -> lease under the same node epoch.
  ASSERT_TRUE(agent->roundTrip());
  auto lease = agent->waitType("lease");
  EXPECT_EQ((*lease)["body"]["node_epoch"], epoch);
  EXPECT_GT((*lease)["body"]["valid_until"].get<int64_t>(), 0);
}

TEST_F(AgentLinkTest, SubmitAssignsAndReportsMoveTheJobToCompleted) {
  auto agent = helloAgent("n1");
  int64_t id = submit("echo hi");
  size_t from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  auto assign = agent->waitType("assign", from);
  ASSERT_TRUE(assign.has_value());
  const json& body = (*assign)["body"];
  EXPECT_EQ(body["assignment"]["job_id"], id);
  EXPECT_EQ(body["assignment"]["task"], 0);
  EXPECT_EQ(body["node_epoch"], registry_->nodeEpoch("n1"));
  int64_t epoch = body["assignment"]["lease_epoch"].get<int64_t>();
  EXPECT_GT(epoch, 0);
  EXPECT_EQ(body["launch"]["argv"], json::array({"/bin/sh", "-c", "echo hi"}));
  EXPECT_EQ(body["launch"]["uid"], ::geteuid());
  ASSERT_EQ(body["launch"]["gpus"].size(), 1u);
  EXPECT_EQ(body["launch"]["gpus"][0].get<std::string>().rfind("GPU-n1-", 0), 0u);
  EXPECT_FALSE(body["launch"].contains("slice"));  // a whole GPU
  EXPECT_EQ(job(id)["state"], "RUNNING");

  agent->send("task_update", taskUpdate(id, epoch, "running"));
  ASSERT_TRUE(agent->roundTrip());
  EXPECT_EQ(job(id)["state"], "RUNNING");

  // The job is requeued and placed again under a newer epoch: reports of the old attempt change
  // nothing, and the old attempt still running is told to stop.
  ASSERT_TRUE(store_->recordPreemption(id, /*requeue=*/true, realClock().now(), "test").isOk());
  from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  auto again = agent->waitType("assign", from);
  ASSERT_TRUE(again.has_value());
  int64_t stale = epoch;
  epoch = (*again)["body"]["assignment"]["lease_epoch"].get<int64_t>();
  ASSERT_GT(epoch, stale);
  EXPECT_EQ((*again)["body"]["assignment"]["attempt"], 1);
  from = agent->receivedCount();
  agent->send("task_update", taskUpdate(id, stale, "exited", 0));
  agent->send("task_update", taskUpdate(id, stale, "running"));
  auto cancel = agent->waitType("cancel", from);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ((*cancel)["body"]["assignment"]["lease_epoch"], stale);
  ASSERT_TRUE(agent->roundTrip());
  EXPECT_EQ(job(id)["state"], "RUNNING");

  agent->send("task_update", taskUpdate(id, epoch, "exited", 0));
  ASSERT_TRUE(waitJobState(id, "COMPLETED")) << job(id).dump();
  EXPECT_EQ(job(id)["exit_code"], 0);
}

// Every task of a multi-task job gets its own log files recorded from its first `running`
// report, not only the first task to report (gpool run and gpool logs --task read them).
TEST_F(AgentLinkTest, EveryTaskOfAMultiTaskJobHasItsLogsRecorded) {
  auto agent = helloAgent("n1");
  api::JobSpec spec = testing::makeSpec(0);
  spec.tasks = 2;
  auto r = http_->post("/v1/jobs", api::toJson(spec).dump());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 201) << r->body;
  int64_t id = json::parse(r->body)["ids"][0].get<int64_t>();
  size_t from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  auto assign = agent->waitType("assign", from);
  ASSERT_TRUE(assign.has_value());
  int64_t epoch = (*assign)["body"]["assignment"]["lease_epoch"].get<int64_t>();
  agent->send("task_update", taskUpdate(id, epoch, "running", 0, 1));
  agent->send("task_update", taskUpdate(id, epoch, "running", 0, 0));
  agent->send("task_update", taskUpdate(id, epoch, "running", 0, 1));  // again: nothing new
  ASSERT_TRUE(agent->roundTrip());
  json j = job(id);
  ASSERT_EQ(j["allocations"].size(), 2u) << j.dump();
  for (const json& a : j["allocations"]) {
    const std::string dir = "/x/" + std::to_string(a["task"].get<int>());
    EXPECT_EQ(a.value("stdout_log", ""), dir + "/stdout.log") << j.dump();
    EXPECT_EQ(a.value("stderr_log", ""), dir + "/stderr.log") << j.dump();
  }
  EXPECT_EQ(j["state"], "RUNNING");
}

// A log that is not on the controller's machine comes through the agent of the task's server:
// the route answers `pending` and sends read_log once, the agent's log_data is handed to the
// next identical request (once), a stray answer is dropped, the agent's refusal is 409 and a
// server without its agent 503 naming it.
TEST_F(AgentLinkTest, LogsOfTasksOnOtherServersComeThroughTheirAgent) {
  auto agent = helloAgent("n1");
  int64_t epoch = 0;
  int64_t id = startRunning(*agent, "echo hi", &epoch);  // logs under /x/0: not here
  ASSERT_GT(id, 0);
  const std::string log = "/v1/jobs/" + std::to_string(id) + "/log?stream=stderr&offset=0";

  size_t from = agent->receivedCount();
  json first = getJson(log);
  EXPECT_EQ(first["pending"], true) << first.dump();
  EXPECT_EQ(first["data"], "");
  EXPECT_EQ(first["next_offset"], 0);
  EXPECT_EQ(first["node"], "n1");
  auto read = agent->waitType("read_log", from);
  ASSERT_TRUE(read.has_value());
  const json& ask = (*read)["body"];
  EXPECT_EQ(ask["job_id"], id);
  EXPECT_EQ(ask["task"], 0);
  EXPECT_EQ(ask["lease_epoch"], epoch);
  EXPECT_EQ(ask["stream"], "stderr");
  EXPECT_EQ(ask["offset"], 0);
  EXPECT_EQ(ask["max_bytes"], kMaxRelayedLogBytes);
  // Asked again before the agent answered: still pending, nothing sent twice.
  EXPECT_EQ(getJson(log)["pending"], true);
  ASSERT_TRUE(agent->roundTrip());
  EXPECT_EQ(agent->countType("read_log"), 1u);

  json answer{{"request", ask["request"]},
              {"job_id", id},
              {"task", 0},
              {"lease_epoch", epoch},
              {"stream", "stderr"},
              {"offset", 0},
              {"found", true},
              {"size", 10},
              {"data", base64Encode("hello\nw\xc3")}};  // cut inside the 2-byte "\xc3\xa9"
  json stray = answer;
  stray["request"] = ask["request"].get<int64_t>() + 1000;
  stray["data"] = base64Encode("not this");
  agent->send("log_data", stray);
  agent->send("log_data", answer);
  ASSERT_TRUE(agent->roundTrip());
  json got = getJson(log);
  EXPECT_EQ(got["pending"], false) << got.dump();
  EXPECT_EQ(got["data"], "hello\nw");  // the cut character is left for the next read
  EXPECT_EQ(got["next_offset"], 7);
  EXPECT_EQ(got["size"], 10);
  EXPECT_EQ(got["complete"], false);
  EXPECT_EQ(got["path"], "/x/0/stderr.log");

  // Handed out once: the same request again asks the agent again; this time it refuses.
  from = agent->receivedCount();
  EXPECT_EQ(getJson(log)["pending"], true);
  read = agent->waitType("read_log", from);
  ASSERT_TRUE(read.has_value());
  answer["request"] = (*read)["body"]["request"];
  answer.erase("data");
  answer.erase("found");
  answer["error"] = "the log of job under lease epoch 1 is gone: epoch 2 ran here since";
  agent->send("log_data", answer);
  ASSERT_TRUE(agent->roundTrip());
  auto refused = http_->get(log);
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->status, 409) << refused->body;
  EXPECT_NE(refused->body.find("the agent of node n1"), std::string::npos) << refused->body;

  // Data that is not base64 is an error naming the field.
  from = agent->receivedCount();
  answer["data"] = "!!!!";
  agent->send("log_data", answer);
  auto error = agent->waitType("error", from);
  ASSERT_TRUE(error.has_value());
  EXPECT_NE((*error)["body"]["message"].get<std::string>().find("body.data"), std::string::npos)
      << error->dump();

  // The agent goes away: its server's logs are unavailable, naming it.
  agent.reset();
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (link_->connected("n1") && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  auto gone = http_->get(log);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->status, 503) << gone->body;
  EXPECT_NE(gone->body.find("node n1, whose agent is not connected"), std::string::npos)
      << gone->body;
}

// Both tasks of a two-task job on one server get the rendezvous: ranks by task, the server's
// hostname from its hello as MASTER_ADDR, one port per job; and the desired state after a
// reconnect says the same.
TEST_F(AgentLinkTest, TasksOfAMultiTaskJobGetTheirRendezvous) {
  auto agent = helloAgent("n1");
  api::JobSpec spec = testing::makeSpec(0);
  spec.tasks = 2;
  auto r = http_->post("/v1/jobs", api::toJson(spec).dump());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 201) << r->body;
  int64_t id = json::parse(r->body)["ids"][0].get<int64_t>();
  size_t from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  std::map<uint32_t, json> by_task;
  for (int n = 0; n < 2; ++n) {
    size_t at = 0;
    auto assign = agent->waitType("assign", from, &at);
    ASSERT_TRUE(assign.has_value()) << "assign " << n;
    from = at + 1;
    by_task[(*assign)["body"]["assignment"]["task"].get<uint32_t>()] = (*assign)["body"];
  }
  ASSERT_EQ(by_task.size(), 2u);
  const uint32_t port = kRendezvousBasePort + static_cast<uint32_t>(id % kRendezvousPorts);
  for (uint32_t task : {0u, 1u}) {
    EXPECT_EQ(by_task[task]["launch"]["rendezvous"], (json{{"master_addr", "n1.test"},
                                                           {"master_port", port},
                                                           {"world_size", 2},
                                                           {"rank", task},
                                                           {"local_rank", task},
                                                           {"node_rank", 0}}))
        << by_task[task].dump();
  }

  json desired;
  auto again = helloAgent("n1", &desired);  // takes over from the first connection
  const json& tasks = desired["body"]["tasks"];
  ASSERT_EQ(tasks.size(), 2u) << tasks.dump();
  for (const json& t : tasks) {
    EXPECT_EQ(t["launch"]["rendezvous"]["rank"], t["assignment"]["task"]) << t.dump();
    EXPECT_EQ(t["launch"]["rendezvous"]["master_addr"], "n1.test") << t.dump();
  }
}

// Ranks follow the tasks; node ranks the order in which the job's servers first appear; local
// ranks count the task's earlier siblings on its own server. One task: no rendezvous.
TEST(RendezvousTest, RanksFollowTasksAndServers) {
  auto address = [](const std::string& node) { return node + ".example"; };
  const std::vector<std::string> nodes{"b", "a", "b", "a", "c"};
  const uint32_t expect_local[] = {0, 0, 1, 1, 0};
  const uint32_t expect_node[] = {0, 1, 0, 1, 2};
  for (uint32_t task = 0; task < nodes.size(); ++task) {
    auto r = rendezvousFor(4100, task, nodes, 0, address);
    ASSERT_TRUE(r.has_value()) << task;
    EXPECT_EQ(r->master_addr, "b.example");
    EXPECT_EQ(r->master_port, kRendezvousBasePort + 4);  // 4100 % 4096
    EXPECT_EQ(r->world_size, 5u);
    EXPECT_EQ(r->rank, task);
    EXPECT_EQ(r->local_rank, expect_local[task]) << task;
    EXPECT_EQ(r->node_rank, expect_node[task]) << task;
  }
  EXPECT_EQ(rendezvousFor(7, 5, nodes, 0, address), std::nullopt);  // no such task
  EXPECT_EQ(rendezvousFor(7, 0, {"a"}, 0, address), std::nullopt);  // one task
  EXPECT_EQ(rendezvousFor(7, 1, nodes)->master_addr, "b");          // no address book: the name

  TaskAssignment one;
  one.job_id = 7;
  one.spec = testing::makeSpec(1000);
  one.task_nodes = {"a"};
  EXPECT_FALSE(taskEntryJson(one)["launch"].contains("rendezvous"));
}

// The task entry carries the time limit and, when the job's QoS has one, its grace_time as
// grace_seconds (the agent's SIGTERM-to-SIGKILL at the limit); without one the agent's default.
TEST(TaskEntryJsonTest, CarriesTimeLimitAndQosGrace) {
  TaskAssignment a;
  a.job_id = 7;
  a.user = "alice";
  a.spec = testing::makeSpec(1000);
  a.spec.time_limit_seconds = 3600;
  json entry = taskEntryJson(a);
  EXPECT_EQ(entry["launch"]["time_limit_seconds"], 3600);
  EXPECT_FALSE(entry["launch"].contains("grace_seconds"));
  a.grace_s = 45;
  EXPECT_EQ(taskEntryJson(a)["launch"]["grace_seconds"], 45);
}

// An array element finds its index and its array's id in its environment, as Slurm's
// SLURM_ARRAY_TASK_ID: at its first start, and in the desired state after a reconnect.
TEST_F(AgentLinkTest, ArrayElementsFindTheirIndexInTheirEnvironment) {
  auto agent = helloAgent("n1");
  api::JobSpec spec = testing::makeSpec(1000);
  spec.command = {"/bin/sh", "-c", "echo $GPOOL_ARRAY_TASK_ID"};
  spec.array = *api::parseArraySpec("3-4");
  auto r = http_->post("/v1/jobs", api::toJson(spec).dump());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 201) << r->body;
  const json ids = json::parse(r->body)["ids"];
  ASSERT_EQ(ids.size(), 2u);
  size_t from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  std::map<int64_t, json> env_of;
  for (int i = 0; i < 2; ++i) {
    size_t at = 0;
    auto assign = agent->waitType("assign", from, &at);
    ASSERT_TRUE(assign.has_value());
    env_of[(*assign)["body"]["assignment"]["job_id"].get<int64_t>()] =
        (*assign)["body"]["launch"]["env"];
    from = at + 1;
  }
  const int64_t first = ids[0].get<int64_t>(), second = ids[1].get<int64_t>();
  EXPECT_EQ(env_of[first]["GPOOL_ARRAY_JOB_ID"], std::to_string(first));
  EXPECT_EQ(env_of[first]["GPOOL_ARRAY_TASK_ID"], "3");
  EXPECT_EQ(env_of[second]["GPOOL_ARRAY_JOB_ID"], std::to_string(first));
  EXPECT_EQ(env_of[second]["GPOOL_ARRAY_TASK_ID"], "4");
  // A job that is no array element gets neither.
  TaskAssignment plain;
  plain.job_id = 9;
  plain.spec = testing::makeSpec(1000);
  plain.spec.env = {{"A", "b"}};
  EXPECT_EQ(taskEntryJson(plain)["launch"]["env"], (json{{"A", "b"}}));
}

TEST_F(AgentLinkTest, NonZeroExitFailsTheJobAndCancelReachesTheAgent) {
  auto agent = helloAgent("n1");
  int64_t failing = submit("exit 3");
  int64_t cancelled = submit("sleep 1000");
  size_t from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  std::map<int64_t, int64_t> epochs;
  for (int i = 0; i < 2; ++i) {
    size_t at = 0;
    auto assign = agent->waitType("assign", from, &at);
    ASSERT_TRUE(assign.has_value());
    epochs[(*assign)["body"]["assignment"]["job_id"].get<int64_t>()] =
        (*assign)["body"]["assignment"]["lease_epoch"].get<int64_t>();
    from = at + 1;
  }
  ASSERT_EQ(epochs.size(), 2u);
  agent->send("task_update", taskUpdate(failing, epochs[failing], "exited", 3));
  ASSERT_TRUE(waitJobState(failing, "FAILED"));
  EXPECT_EQ(job(failing)["exit_code"], 3);

  from = agent->receivedCount();
  auto r = http_->post("/v1/jobs/" + std::to_string(cancelled) + "/cancel", "");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  auto cancel = agent->waitType("cancel", from);
  ASSERT_TRUE(cancel.has_value());
  EXPECT_EQ((*cancel)["body"]["assignment"]["job_id"], cancelled);
  EXPECT_EQ((*cancel)["body"]["assignment"]["lease_epoch"], epochs[cancelled]);
  EXPECT_EQ((*cancel)["body"]["reason"], "cancelled");
  EXPECT_EQ((*cancel)["body"]["signal"], "TERM");
  EXPECT_EQ(job(cancelled)["state"], "CANCELLED");
}

TEST_F(AgentLinkTest, ReconnectGetsTheFullDesiredStateAgain) {
  int64_t id = 0;
  int64_t epoch = 0;
  int64_t first_node_epoch = 0;
  {
    auto agent = helloAgent("n1");
    first_node_epoch = registry_->nodeEpoch("n1");
    id = submit("sleep 1000");
    ASSERT_TRUE(loop_->runOnce().ok());
    auto assign = agent->waitType("assign");
    ASSERT_TRUE(assign.has_value());
    epoch = (*assign)["body"]["assignment"]["lease_epoch"].get<int64_t>();
  }
  // The node is not connected: a job submitted now waits for its agent (issue 19, defect 2).
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (registry_->agentConnected("n1") && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(milliseconds(10));
  int64_t later = submit("sleep 1000");
  ASSERT_TRUE(loop_->runOnce().ok());
  EXPECT_EQ(job(later)["state"], "PENDING");
  json desired;
  auto agent = helloAgent("n1", &desired);
  EXPECT_GT(desired["body"]["node_epoch"].get<int64_t>(), first_node_epoch);
  const json& tasks = desired["body"]["tasks"];
  ASSERT_EQ(tasks.size(), 1u) << desired.dump();
  EXPECT_EQ(tasks[0]["assignment"]["job_id"], id);
  EXPECT_EQ(tasks[0]["assignment"]["lease_epoch"], epoch);
  EXPECT_EQ(tasks[0]["launch"]["argv"][2], "sleep 1000");
  EXPECT_EQ(tasks[0]["requeueable"], false);
  // Back: the waiting job is placed there.
  size_t from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  auto assign = agent->waitType("assign", from);
  ASSERT_TRUE(assign.has_value());
  EXPECT_EQ((*assign)["body"]["assignment"]["job_id"], later);
}

// The desired state after a reconnection carries what the assign carried, the time limit and
// the QoS level's grace at it included (it was missing: a reconnected agent killed a task at its
// limit after its own default grace, not the QoS's).
TEST_F(AgentLinkTest, DesiredStateAfterReconnectKeepsTheTimeLimitAndQosGrace) {
  api::Qos level;
  level.name = "short";
  level.grace_time_seconds = 45;
  ASSERT_TRUE(store::saveApiQos(*store_, level).isOk());
  api::JobSpec spec = testing::makeSpec(1000);
  spec.command = {"/bin/sh", "-c", "sleep 1000"};
  spec.qos = "short";
  spec.time_limit_seconds = 600;
  auto posted = http_->post("/v1/jobs", api::toJson(spec).dump());
  ASSERT_TRUE(posted.ok());
  ASSERT_EQ(posted->status, 201) << posted->body;
  const int64_t id = json::parse(posted->body)["ids"][0].get<int64_t>();
  {
    auto agent = helloAgent("n1");
    ASSERT_TRUE(loop_->runOnce().ok());
    auto assign = agent->waitType("assign");
    ASSERT_TRUE(assign.has_value());
    EXPECT_EQ((*assign)["body"]["launch"]["grace_seconds"], 45) << assign->dump();
  }
  json desired;
  auto agent = helloAgent("n1", &desired);
  const json& tasks = desired["body"]["tasks"];
  ASSERT_EQ(tasks.size(), 1u) << desired.dump();
  EXPECT_EQ(tasks[0]["assignment"]["job_id"], id);
  EXPECT_EQ(tasks[0]["launch"]["time_limit_seconds"], 600);
  EXPECT_EQ(tasks[0]["launch"]["grace_seconds"], 45) << desired.dump();
}

TEST_F(AgentLinkTest, HelloReportsAreAppliedBeforeTheDesiredState) {
  int64_t id = 0;
  int64_t epoch = 0;
  {
    auto agent = helloAgent("n1");
    id = submit("true");
    ASSERT_TRUE(loop_->runOnce().ok());
    auto assign = agent->waitType("assign");
    ASSERT_TRUE(assign.has_value());
    epoch = (*assign)["body"]["assignment"]["lease_epoch"].get<int64_t>();
  }
  // The task ended while the agent was away; its hello says so.
  auto agent = std::make_unique<FakeAgent>(socket_, "n1");
  ASSERT_TRUE(agent->waitConnected());
  json reported = taskUpdate(id, epoch, "exited", 0);
  reported["name"] = std::to_string(id) + ".0";
  agent->send("hello", agent->helloBody(json::array({reported})));
  auto desired = agent->waitType("desired_state");
  ASSERT_TRUE(desired.has_value());
  EXPECT_EQ((*desired)["body"]["tasks"], json::array());
  EXPECT_EQ(job(id)["state"], "COMPLETED");
}

// Issue 19 defect 3: a task is identified by (store incarnation, job id, epoch). A report of
// the same job id and epoch from another incarnation (a job of before a restore of the store)
// is never applied to the current job, and job ids continue above any id an agent reports.
TEST_F(AgentLinkTest, AReportOfAnotherStoreIncarnationIsNeverApplied) {
  Result<int64_t> incarnation = store_->beginIncarnation(realClock().now());
  ASSERT_TRUE(incarnation.ok()) << incarnation.status().toString();
  auto agent = helloAgent("n1");
  int64_t id = submit("true");
  ASSERT_TRUE(loop_->runOnce().ok());
  auto assign = agent->waitType("assign");
  ASSERT_TRUE(assign.has_value());
  const json& a = (*assign)["body"]["assignment"];
  EXPECT_EQ(a.value("incarnation", int64_t{0}), *incarnation) << a.dump();
  const int64_t epoch = a["lease_epoch"].get<int64_t>();

  for (int64_t other : {*incarnation - 1, int64_t{0}}) {
    json stale = taskUpdate(id, epoch, "exited", 7);
    if (other != 0) stale["assignment"]["incarnation"] = other;
    agent->send("task_update", stale);
    ASSERT_TRUE(agent->roundTrip());
    EXPECT_EQ(job(id)["state"], "RUNNING") << "incarnation " << other;
  }
  // An earlier placement than the store's own is stale, not unknown to the store.
  EXPECT_TRUE(link_->unknownTasks().empty());
  json own = taskUpdate(id, epoch, "exited", 0);
  own["assignment"]["incarnation"] = *incarnation;
  agent->send("task_update", own);
  EXPECT_TRUE(waitJobState(id, "COMPLETED"));

  // An agent reporting job 500, which this store never gave out: new ids continue above it.
  auto other = std::make_unique<FakeAgent>(socket_, "n2");
  ASSERT_TRUE(other->waitConnected());
  json old_task = taskUpdate(500, 1, "exited", 7);
  old_task["name"] = "500.0";
  other->send("hello", other->helloBody(json::array({old_task})));
  ASSERT_TRUE(other->waitType("desired_state").has_value());
  EXPECT_GT(submit("true"), 500);
  // Job 500 is unknown to this store: listed for the admins' alert, as ended.
  std::vector<UnknownTask> unknown = link_->unknownTasks();
  ASSERT_EQ(unknown.size(), 1u);
  EXPECT_EQ(unknown[0].node, "n2");
  EXPECT_EQ(unknown[0].job_id, 500);
  EXPECT_EQ(unknown[0].lease_epoch, 1);
  EXPECT_TRUE(unknown[0].user.empty());
  EXPECT_TRUE(unknown[0].ended_at.has_value());
  // A placement later than the store's own of a job it has (its incarnation is newer than the
  // store's, as for a job placed after the backup the store was restored from): unknown too,
  // and told to stop while it runs; the store's job is left as it is.
  json later = taskUpdate(id, epoch, "running", 0);
  later["assignment"]["incarnation"] = *incarnation + 1;
  const size_t from = agent->receivedCount();
  agent->send("task_update", later);
  ASSERT_TRUE(agent->roundTrip());
  bool stopped = false;
  for (size_t i = from; i < agent->receivedCount(); ++i) {
    json m = agent->message(i);
    stopped = stopped || (m["type"] == "cancel" && m["body"]["assignment"]["job_id"] == id);
  }
  EXPECT_TRUE(stopped);
  EXPECT_EQ(job(id)["state"], "COMPLETED");
  unknown = link_->unknownTasks();
  ASSERT_EQ(unknown.size(), 2u);
  const UnknownTask& running = unknown[0].job_id == id ? unknown[0] : unknown[1];
  EXPECT_EQ(running.job_id, id);
  EXPECT_EQ(running.node, "n1");
  EXPECT_EQ(running.incarnation, *incarnation + 1);
  EXPECT_FALSE(running.user.empty());
  EXPECT_EQ(running.job_state, "COMPLETED");
  EXPECT_FALSE(running.ended_at.has_value());
  // A job the store has PENDING whose run it never placed (it ran after the backup): the job's
  // events say that run was stopped; the job stays PENDING, to run again.
  const int64_t waiting = submit("true");
  json ran = taskUpdate(waiting, 1, "running", 0);
  ran["assignment"]["incarnation"] = *incarnation + 1;
  agent->send("task_update", ran);
  ASSERT_TRUE(agent->roundTrip());
  EXPECT_EQ(job(waiting)["state"], "PENDING");
  Result<std::vector<store::JobEvent>> events = store_->jobEvents(waiting);
  ASSERT_TRUE(events.ok());
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->back().reason,
            "an earlier run of this job on n1 (store incarnation " +
                std::to_string(*incarnation + 1) +
                ", epoch 1) is unknown to the restored controller: told to stop");
}

// Issue 19 defect 4: a task report is acknowledged (`task_ack`) only once applied for good; a
// report the store failed on is not, and is applied when the agent sends it again.
TEST_F(AgentLinkTest, ATaskEndIsAcknowledgedOnlyOnceTheStoreHasIt) {
  auto agent = helloAgent("n1");
  int64_t epoch = 0;
  int64_t id = startRunning(*agent, "exit 4", &epoch);
  ASSERT_GT(id, 0);
  auto acks = [&](const std::string& state, size_t from) {
    size_t n = 0;
    for (size_t i = from; i < agent->receivedCount(); ++i) {
      json m = agent->message(i);
      if (m["type"] == "task_ack" && m["body"]["state"] == state &&
          m["body"]["assignment"]["job_id"] == id) {
        ++n;
      }
    }
    return n;
  };
  EXPECT_EQ(acks("running", 0), 1u);
  size_t from = agent->receivedCount();
  store_->failStatementForTest(1);  // the store fails on the report
  agent->send("task_update", taskUpdate(id, epoch, "exited", 4));
  ASSERT_TRUE(agent->roundTrip());
  EXPECT_EQ(acks("exited", from), 0u);
  EXPECT_EQ(job(id)["state"], "RUNNING");
  agent->send("task_update", taskUpdate(id, epoch, "exited", 4));  // sent again
  ASSERT_TRUE(agent->roundTrip());
  EXPECT_EQ(acks("exited", from), 1u);
  EXPECT_EQ(job(id)["state"], "FAILED");
  // Recorded already: acknowledged again, recorded once.
  agent->send("task_update", taskUpdate(id, epoch, "exited", 4));
  ASSERT_TRUE(agent->roundTrip());
  EXPECT_EQ(acks("exited", from), 2u);
}

TEST_F(AgentLinkTest, ANewerConnectionForTheNodeClosesTheOlderWith4009) {
  // A long backoff: the old agent must not come back and take over in turn.
  auto old_agent = std::make_unique<FakeAgent>(socket_, "n1", seconds(60));
  ASSERT_TRUE(old_agent->waitConnected());
  old_agent->send("hello", old_agent->helloBody());
  ASSERT_TRUE(old_agent->waitType("desired_state").has_value());
  auto agent = helloAgent("n1");
  EXPECT_TRUE(old_agent->waitDisconnect("4009"));
  EXPECT_TRUE(link_->connected("n1"));
  // Assignments go to the new connection.
  submit("true");
  size_t from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  EXPECT_TRUE(agent->waitType("assign", from).has_value());
}

TEST_F(AgentLinkTest, BadFramesAreAnsweredWithErrorsNamingTheField) {
  auto agent = std::make_unique<FakeAgent>(socket_, "n1");
  ASSERT_TRUE(agent->waitConnected());
  auto error_after = [&](const std::function<void()>& act) {
    size_t from = agent->receivedCount();
    act();
    auto e = agent->waitType("error", from);
    return e ? (*e)["body"] : json();
  };
  json e = error_after([&] { agent->sendRaw("{not json"); });
  EXPECT_EQ(e["code"], "invalid_argument");

  e = error_after([&] { agent->sendRaw(R"({"v":1,"type":"hello","body":{}})"); });
  EXPECT_NE(e["message"].get<std::string>().find("seq"), std::string::npos) << e.dump();

  e = error_after([&] { agent->send("heartbeat", {{"time_us", 1}}); });
  EXPECT_EQ(e["code"], "failed_precondition") << e.dump();

  json hello = agent->helloBody();
  hello["node"]["bogus"] = 1;
  e = error_after([&] { agent->send("hello", hello); });
  EXPECT_EQ(e["code"], "invalid_argument");
  EXPECT_NE(e["message"].get<std::string>().find("node.bogus"), std::string::npos) << e.dump();

  hello = agent->helloBody();
  hello["gpus"]["gpus"][0]["memory_total_mib"] = "lots";
  e = error_after([&] { agent->send("hello", hello); });
  EXPECT_NE(e["message"].get<std::string>().find("gpus.gpus[0].memory_total_mib"),
            std::string::npos)
      << e.dump();
  EXPECT_FALSE(link_->connected("n1"));

  agent->send("hello", agent->helloBody());
  ASSERT_TRUE(agent->waitType("desired_state").has_value());
  e = error_after([&] { agent->send("task_update", {{"state", "flying"}}); });
  EXPECT_NE(e["message"].get<std::string>().find("state"), std::string::npos) << e.dump();

  e = error_after([&] { agent->send("dance", json::object()); });
  EXPECT_EQ(e["code"], "unimplemented");
  EXPECT_EQ(e["in_reply_to"], 6);  // the sixth frame with a sequence number

  // A newer protocol version closes the connection with 4001.
  agent->sendRaw(R"({"v":2,"type":"hello","seq":9,"body":{}})");
  EXPECT_TRUE(agent->waitDisconnect("4001"));
}

TEST_F(AgentLinkTest, OnlyRootAndTheControllersOwnUidMayConnect) {
  const std::string upgrade =
      "GET /v1/agent HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: "
      "Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: "
      "13\r\n\r\n";
  // Our own uid (root or not) is accepted.
  std::string own = testing::rawRequestAs(::geteuid(), socket_, upgrade);
  EXPECT_EQ(own.rfind("HTTP/1.1 101", 0), 0u) << own;
  if (::geteuid() != 0) GTEST_SKIP() << "trying another uid needs root";
  std::string other = testing::rawRequestAs(65534, socket_, upgrade);  // nobody
  EXPECT_EQ(other.rfind("HTTP/1.1 403", 0), 0u) << other;
  EXPECT_NE(other.find("uid 65534"), std::string::npos) << other;
}

}  // namespace
}  // namespace gpool::controller

namespace gpool::controller {
namespace {

json finding(const std::string& check, const std::string& gpu, bool unhealthy,
             const std::string& message) {
  return json{{"check", check},    {"severity", unhealthy ? "critical" : "warning"},
              {"gpu_uuid", gpu},   {"pid", 0},
              {"used_mib", 0},     {"unhealthy", unhealthy},
              {"message", message}};
}

json gpuSample(const std::string& uuid, int index, int util, int mem_used,
               json processes = json::array()) {
  return json{{"uuid", uuid},
              {"index", index},
              {"utilization_pct", util},
              {"memory_utilization_pct", 10},
              {"memory_used_mib", mem_used},
              {"memory_total_mib", 81920},
              {"temperature_c", 61},
              {"power_w", 250.5},
              {"sm_clock_mhz", 1410},
              {"memory_clock_mhz", 1593},
              {"ecc_corrected", 0},
              {"ecc_uncorrected", nullptr},
              {"xid_errors", json::array()},
              {"processes", std::move(processes)}};
}

TEST_F(AgentLinkTest, UnhealthyGpusLeaveSchedulingAndComeBackWhenHealthy) {
  auto agent = helloAgent("n1");
  // A job runs on one GPU (`used`) before the GPUs go bad.
  int64_t epoch = 0;
  int64_t first = startRunning(*agent, "sleep 100", &epoch);
  ASSERT_GT(first, 0);
  ASSERT_TRUE(waitJobState(first, "RUNNING"));
  const std::string used = job(first)["allocations"][0]["slices"][0].value("gpu_uuid", "");
  const std::string other = used == "GPU-n1-0" ? "GPU-n1-1" : "GPU-n1-0";
  const std::string used_index = used.substr(used.size() - 1);

  agent->send("health",
              {{"findings", json::array({finding("xid", used, true, "XID 79 (fell off the bus)"),
                                         finding("too_hot", other, true, "95 C"),
                                         finding("stray_process", other, false, "pid 7"),
                                         finding("driver_mismatch", "", false,
                                                 "driver 535 here, 550 on "
                                                 "the other servers")})},
               {"time_us", 1}});
  ASSERT_TRUE(agent->roundTrip());
  auto g = gpus();
  EXPECT_EQ(g[used]["health"], "unhealthy");
  EXPECT_EQ(g[used]["state"], "unhealthy");
  // A fatal XID holds the GPU: the reason says so and how to return it.
  EXPECT_NE(g[used]["health_reason"].get<std::string>().find("XID 79 (fell off the bus)"),
            std::string::npos);
  EXPECT_NE(g[used]["health_reason"].get<std::string>().find("gpool gpu clear n1/" + used_index),
            std::string::npos);
  EXPECT_EQ(g[other]["health_reason"], "95 C");  // the stray is no GPU fault
  json node = getJson("/v1/nodes/n1");
  ASSERT_EQ(node["gpus"].size(), 2u);
  // A finding about the server itself shows on the node.
  EXPECT_EQ(node.value("health_reason", ""), "driver 535 here, 550 on the other servers");

  // The job on the failed GPU ends (not preemptible: NODE_FAIL) with the GPU's reason, and its
  // task is told to stop; no new work lands on the node.
  int64_t second = submit("echo hi");
  size_t from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  EXPECT_EQ(job(second)["state"], "PENDING");
  json failed = job(first);
  EXPECT_EQ(failed["state"], "NODE_FAIL");
  EXPECT_NE(failed.value("reason", "").find("GPU " + used_index + " of n1 failed: XID 79"),
            std::string::npos)
      << failed.dump();
  auto cancel = agent->waitFor(
      [&](const json& m) {
        return m.value("type", "") == "cancel" && m["body"]["assignment"]["job_id"] == first;
      },
      from);
  EXPECT_TRUE(cancel.has_value());
  ASSERT_TRUE(agent->roundTrip());
  for (size_t i = from; i < agent->receivedCount(); ++i) {
    auto m = agent->waitFor([](const json&) { return true; }, i);
    ASSERT_TRUE(m.has_value());
    EXPECT_NE((*m)["type"], "assign") << m->dump();
  }

  // A warning only degrades: the GPU stays schedulable.
  agent->send("health",
              {{"findings",
                json::array({finding("ecc_corrected", other, false, "5000 corrected ECC errors")})},
               {"time_us", 2}});
  ASSERT_TRUE(agent->roundTrip());
  g = gpus();
  // The held GPU stays out although its agent no longer reports it, until an admin clears it;
  // then it takes what its agent reports (nothing: healthy).
  EXPECT_EQ(g[used]["health"], "unhealthy");
  EXPECT_EQ(g[other]["health"], "degraded");
  EXPECT_FALSE(getJson("/v1/nodes/n1").contains("health_reason"));  // no longer reported
  const std::string clear = "/v1/nodes/n1/gpus/" + used_index + "/clear";
  auto cleared = http_->post(clear, "");
  ASSERT_TRUE(cleared.ok());
  ASSERT_EQ(cleared->status, 200) << cleared->body;
  EXPECT_EQ(http_->post(clear, "")->status, 409);  // no longer held
  EXPECT_EQ(http_->post("/v1/nodes/n1/gpus/9/clear", "")->status, 404);
  g = gpus();
  EXPECT_EQ(g[used]["health"], "healthy");
  EXPECT_EQ(g[used]["health_reason"], "");
  from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  auto placed = agent->waitFor(
      [&](const json& m) {
        return m.value("type", "") == "assign" && m["body"]["assignment"]["job_id"] == second;
      },
      from);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(job(second)["state"], "RUNNING");
}

// A preemptible (restartable) job on a GPU that fell off the bus is requeued with the reason.
TEST_F(AgentLinkTest, APreemptibleJobOnAFailedGpuIsRequeued) {
  auto agent = helloAgent("n1");
  api::JobSpec spec;
  spec.name = "restartable";
  spec.command = {"sleep", "100"};
  spec.resources.gpus_milli = 1000;
  spec.preemptible = true;
  auto r = http_->post("/v1/jobs", api::toJson(spec).dump());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 201) << r->body;
  int64_t id = json::parse(r->body)["ids"][0];
  size_t from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  auto assign = agent->waitType("assign", from);
  ASSERT_TRUE(assign.has_value());
  const std::string gpu = (*assign)["body"]["launch"]["gpus"][0];
  agent->send("health",
              {{"findings",
                json::array({finding("gpu_missing", gpu, true, "the GPU is gone from the bus")})},
               {"time_us", 1}});
  ASSERT_TRUE(agent->roundTrip());
  ASSERT_TRUE(loop_->runOnce().ok());
  json j = job(id);
  auto events = getJson("/v1/jobs/" + std::to_string(id) + "/events")["events"];
  bool requeued = false;
  for (const json& e : events) {
    if (e["from_state"] == "NODE_FAIL" && e["to_state"] == "PENDING")
      requeued = e["reason"].get<std::string>().find("requeued after GPU failure") == 0;
  }
  EXPECT_TRUE(requeued) << events.dump();
  // Placed again, not on the failed GPU (the other one).
  if (j["state"] == "RUNNING") {
    EXPECT_NE(j["allocations"][0]["slices"][0]["gpu_uuid"], gpu) << j.dump();
  }
}

TEST_F(AgentLinkTest, TelemetryShowsInGpusAndHistoriesAttributedToTheJob) {
  auto agent = helloAgent("n1");
  int64_t id = submit("sleep 100");
  size_t from = agent->receivedCount();
  ASSERT_TRUE(loop_->runOnce().ok());
  auto assign = agent->waitType("assign", from);
  ASSERT_TRUE(assign.has_value());
  int64_t epoch = (*assign)["body"]["assignment"]["lease_epoch"].get<int64_t>();
  std::string held = (*assign)["body"]["launch"]["gpus"][0].get<std::string>();
  agent->send("task_update", taskUpdate(id, epoch, "running"));
  ASSERT_TRUE(waitJobState(id, "RUNNING"));

  std::string other = held == "GPU-n1-0" ? "GPU-n1-1" : "GPU-n1-0";
  json tagged = json::array({{{"pid", 4242}, {"used_mib", 30000}, {"job_id", id}, {"task", 0}}});
  agent->send(
      "telemetry",
      {{"taken_at_us", 1},
       {"simulated", true},
       {"gpus", json::array({gpuSample(held, 0, 87, 30500, tagged), gpuSample(other, 1, 0, 0)})}});
  ASSERT_TRUE(agent->roundTrip());

  auto g = gpus();
  ASSERT_TRUE(g[held]["telemetry"].is_object()) << g[held].dump();
  EXPECT_EQ(g[held]["telemetry"]["utilization_pct"], 87);
  EXPECT_EQ(g[held]["telemetry"]["memory_used_mib"], 30500);
  EXPECT_EQ(g[held]["telemetry"]["power_w"], 250.5);
  EXPECT_EQ(g[held]["telemetry"]["processes"][0]["job_id"], id);
  ASSERT_EQ(g[held]["tenants"].size(), 1u);
  EXPECT_EQ(g[held]["tenants"][0]["job_id"], id);
  EXPECT_EQ(g[held]["tenants"][0]["compute_milli"], 1000);
  EXPECT_EQ(g[held]["tenants"][0]["user"], job(id)["user"]);
  EXPECT_EQ(g[other]["tenants"], json::array());
  EXPECT_EQ(g[other]["telemetry"]["utilization_pct"], 0);

  json history = getJson("/v1/gpus/" + held + "/telemetry?resolution=1s");
  EXPECT_EQ(history["node"], "n1");
  EXPECT_EQ(history["simulated"], true);
  ASSERT_EQ(history["points"].size(), 1u);
  EXPECT_EQ(history["points"][0]["utilization_pct"], 87.0);

  json jt = getJson("/v1/jobs/" + std::to_string(id) + "/telemetry?resolution=1s");
  ASSERT_EQ(jt["tasks"].size(), 1u);
  EXPECT_EQ(jt["tasks"][0]["gpus"], json::array({held}));
  ASSERT_EQ(jt["tasks"][0]["points"].size(), 1u);
  EXPECT_EQ(jt["tasks"][0]["points"][0]["memory_used_mib"], 30500.0);

  // Minutes stored before a restart come from the store.
  TimePoint minute = realClock().now() - std::chrono::minutes(30);
  ASSERT_TRUE(store_->recordTelemetry({store::TelemetrySample{held, id, minute, 55, 1234, 60, 300}})
                  .isOk());
  json stored = getJson("/v1/gpus/" + held + "/telemetry?resolution=1m&since=1h");
  ASSERT_GE(stored["points"].size(), 1u);
  EXPECT_EQ(stored["points"][0]["utilization_pct"], 55.0);
  EXPECT_EQ(stored["points"][0]["job_id"], id);
  // Its tasks' own minutes too (kept for shared slices as well): task 0's stored minute comes
  // before what memory holds; task 1, known only to the store (memory lost it), comes with its
  // node and no GPUs.
  ASSERT_TRUE(
      store_
          ->recordTaskTelemetry({store::TaskTelemetrySample{id, 0, "n1", minute, 44, 4321, 61, 120},
                                 store::TaskTelemetrySample{id, 1, "n2", minute, 33, 1000, 50, 60}})
          .isOk());
  json stored_job = getJson("/v1/jobs/" + std::to_string(id) + "/telemetry?since=1h");
  ASSERT_EQ(stored_job["stored_gpus"].size(), 1u);
  EXPECT_EQ(stored_job["stored_gpus"][0]["uuid"], held);
  ASSERT_EQ(stored_job["tasks"].size(), 2u) << stored_job.dump();
  EXPECT_EQ(stored_job["tasks"][0]["task"], 0);
  EXPECT_EQ(stored_job["tasks"][0]["gpus"], json::array({held}));
  ASSERT_EQ(stored_job["tasks"][0]["points"].size(), 1u);
  EXPECT_EQ(stored_job["tasks"][0]["points"][0]["utilization_pct"], 44.0);
  EXPECT_EQ(stored_job["tasks"][0]["points"][0]["memory_used_mib"], 4321.0);
  EXPECT_EQ(stored_job["tasks"][1]["task"], 1);
  EXPECT_EQ(stored_job["tasks"][1]["node"], "n2");
  EXPECT_EQ(stored_job["tasks"][1]["gpus"], json::array());
  EXPECT_EQ(stored_job["tasks"][1]["points"][0]["power_w"], 60.0);
  // One second's points come from memory only.
  json fine = getJson("/v1/jobs/" + std::to_string(id) + "/telemetry?resolution=1s");
  ASSERT_EQ(fine["tasks"].size(), 1u);
  EXPECT_EQ(fine["tasks"][0]["points"][0]["memory_used_mib"], 30500.0);

  // Bad queries name the parameter; unknown GPUs are 404.
  auto bad = http_->get("/v1/gpus/" + held + "/telemetry?resolution=2s");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("resolution"), std::string::npos);
  bad = http_->get("/v1/gpus/" + held + "/telemetry?since=yesterday");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(bad->body.find("since"), std::string::npos);
  bad = http_->get("/v1/gpus/GPU-nope/telemetry");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 404);
  bad = http_->get("/v1/jobs/999999/telemetry");
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 404);
}

TEST_F(AgentLinkTest, BadTelemetryAndHealthFramesAreAnsweredWithErrors) {
  auto agent = helloAgent("n1");
  size_t from = agent->receivedCount();
  json g = gpuSample("GPU-n1-0", 0, 150, 0);
  agent->send("telemetry", {{"gpus", json::array({g})}});
  auto err = agent->waitType("error", from);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE((*err)["body"]["message"].get<std::string>().find("gpus[0].utilization_pct"),
            std::string::npos)
      << err->dump();
  from = agent->receivedCount();
  agent->send("health", {{"findings", json::array({{{"check", "xid"}, {"bogus", 1}}})}});
  err = agent->waitType("error", from);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE((*err)["body"]["message"].get<std::string>().find("findings[0].bogus"),
            std::string::npos)
      << err->dump();
}

}  // namespace
}  // namespace gpool::controller
