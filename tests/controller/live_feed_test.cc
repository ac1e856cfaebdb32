// GET /v1/watch in-process: a real net::Server on a Unix socket, the LiveFeed over a SQLite
// store, watchers as net::WebSocketClient. Job changes are written through the store (as the
// loop and the agent link do), so the test drives PENDING -> RUNNING -> COMPLETED itself. The
// same feed is mounted on two servers, one whose connections run as the admin (root, from the
// peer credentials) and one whose connections run as alice (a test caller_for), so one test
// sees both views. Waits are on messages with a deadline; no sleeps.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/controller_fixture.h"
#include "controller/live_feed.h"
#include "controller/node_registry.h"
#include "net/client.h"
#include "net/server.h"

namespace gpool::controller {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr auto kDeadline = seconds(10);

class Watcher {
 public:
  Watcher(const std::string& socket, const std::string& target) {
    net::WebSocketClientOptions o;
    o.endpoint = net::ClientEndpoint::unixSocket(socket);
    o.target = target;
    o.initial_backoff = std::chrono::milliseconds(50);
    o.max_backoff = std::chrono::milliseconds(50);
    o.on_message = [this](std::string text) {
      std::lock_guard lock(mu_);
      got_.push_back(json::parse(text, nullptr, false));
      cv_.notify_all();
    };
    client_ = std::make_unique<net::WebSocketClient>(o);
    client_->start();
  }
  ~Watcher() { client_->stop(); }
  void stop() { client_->stop(); }

  // Waits for the {"subscribed", "last_event"} message that says the connection is live.
  std::optional<json> waitLive() {
    return waitFor([](const json& m) { return m.is_object() && m.contains("last_event"); });
  }
  std::optional<json> waitFor(const std::function<bool(const json&)>& pred) {
    std::unique_lock lock(mu_);
    std::optional<json> found;
    cv_.wait_for(lock, kDeadline, [&] {
      for (const json& m : got_) {
        if (pred(m)) {
          found = m;
          return true;
        }
      }
      return false;
    });
    return found;
  }
  // Every message received so far, in order.
  std::vector<json> received() {
    std::lock_guard lock(mu_);
    return got_;
  }
  // The job events received so far, in order.
  std::vector<json> jobEvents() {
    std::lock_guard lock(mu_);
    std::vector<json> out;
    for (const json& m : got_) {
      if (m.is_object() && m.value("topic", "") == "jobs") out.push_back(m["data"]);
    }
    return out;
  }
  // Waits until an event for `job_id` reaching `state` arrived.
  bool waitJobState(int64_t job_id, const std::string& state) {
    return waitFor([&](const json& m) {
             return m.is_object() && m.value("topic", "") == "jobs" &&
                    m["data"]["job_id"] == job_id && m["data"]["to_state"] == state;
           })
        .has_value();
  }

 private:
  std::unique_ptr<net::WebSocketClient> client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<json> got_;
};

// Upgrades a raw Unix-socket connection (with a small receive buffer) to a WebSocket on
// `target` and returns its descriptor without ever reading from it again: a client that stops
// reading. -1 on failure.
int rawWebSocketUpgrade(const std::string& path, const std::string& target) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  std::string req = "GET " + target +
                    " HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: "
                    "Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    "Sec-WebSocket-Version: 13\r\n\r\n";
  if (::write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    return -1;
  }
  std::string head;
  char c = 0;
  while (head.find("\r\n\r\n") == std::string::npos && ::read(fd, &c, 1) == 1)
    head.push_back(c);
  if (head.rfind("HTTP/1.1 101", 0) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

class LiveFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = testing::openStore(dir_.path() + "/gpool.db");
    registry_ = std::make_unique<NodeRegistry>(*store_, realClock());
    feed_ = std::make_unique<LiveFeed>(*store_, *registry_);
    net::Router admin_router;
    ASSERT_TRUE(feed_->addRoute(admin_router).isOk());  // root by peer credentials: admin
    net::Router alice_router;
    ASSERT_TRUE(feed_
                    ->addRoute(alice_router,
                               [](const net::Request&) -> Result<Caller> {
                                 Caller c;
                                 c.user = "alice";
                                 c.uid = 1001;
                                 return c;
                               })
                    .isOk());
    ASSERT_TRUE(feed_->start().isOk());
    admin_server_ = start(admin_socket_, std::move(admin_router));
    alice_server_ = start(alice_socket_, std::move(alice_router));
  }
  void TearDown() override {
    if (admin_server_) admin_server_->stop();
    if (alice_server_) alice_server_->stop();
    feed_->stop();
  }
  std::unique_ptr<net::Server> start(const std::string& socket, net::Router router,
                                     size_t max_queued = 1024) {
    net::ServerOptions o;
    o.unix_socket_path = socket;
    o.ws_max_queued_messages = max_queued;
    auto server = std::make_unique<net::Server>(o, std::move(router));
    EXPECT_TRUE(server->start().isOk());
    return server;
  }

  int64_t submit(const std::string& user, const std::string& group = "ml") {
    store::NewJob j;
    j.user = user;
    j.group = group;
    j.spec_json = "{}";
    auto ids = store_->submitJobs({j}, realClock().now());
    EXPECT_TRUE(ids.ok());
    return ids.ok() ? ids->at(0) : -1;
  }
  void runToCompletion(int64_t id) {
    auto epoch =
        store_->recordPlacement(id, R"([{"task":0,"node":"gpu-01"}])", realClock().now(), "placed");
    ASSERT_TRUE(epoch.ok());
    ASSERT_TRUE(
        store_->recordEnd(id, api::JobState::kCompleted, 0, realClock().now(), "exit 0").isOk());
  }

  testing::TempDir dir_;
  std::string admin_socket_ = dir_.path() + "/admin.sock";
  std::string alice_socket_ = dir_.path() + "/alice.sock";
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<LiveFeed> feed_;
  std::unique_ptr<net::Server> admin_server_;
  std::unique_ptr<net::Server> alice_server_;
};

std::vector<std::string> statesOf(const std::vector<json>& events, int64_t job) {
  std::vector<std::string> out;
  for (const json& e : events) {
    if (e["job_id"] == job) out.push_back(e["to_state"].get<std::string>());
  }
  return out;
}

TEST_F(LiveFeedTest, UsersSeeTheirOwnJobsInOrderAndAdminsSeeAll) {
  Watcher alice(alice_socket_, "/v1/watch?topics=jobs");
  Watcher admin(admin_socket_, "/v1/watch?topics=jobs");
  ASSERT_TRUE(alice.waitLive());
  ASSERT_TRUE(admin.waitLive());
  int64_t mine = submit("alice");
  int64_t theirs = submit("bob", "vision");
  runToCompletion(theirs);
  runToCompletion(mine);
  ASSERT_TRUE(alice.waitJobState(mine, "COMPLETED")) << json(alice.jobEvents()).dump();
  ASSERT_TRUE(admin.waitJobState(mine, "COMPLETED"));
  ASSERT_TRUE(admin.waitJobState(theirs, "COMPLETED"));

  std::vector<json> seen = alice.jobEvents();
  EXPECT_EQ(statesOf(seen, mine), (std::vector<std::string>{"PENDING", "RUNNING", "COMPLETED"}));
  for (const json& e : seen) {
    EXPECT_EQ(e["user"], "alice") << e.dump();  // nothing of bob's job
  }
  std::vector<json> all = admin.jobEvents();
  EXPECT_EQ(statesOf(all, theirs), (std::vector<std::string>{"PENDING", "RUNNING", "COMPLETED"}));
  EXPECT_EQ(all.size(), 6u);
  for (size_t i = 1; i < all.size(); ++i)
    EXPECT_GT(all[i]["seq"].get<int64_t>(), all[i - 1]["seq"].get<int64_t>());
  EXPECT_EQ(all.back()["nodes"], json::array({"gpu-01"}));
}

TEST_F(LiveFeedTest, ResumeAfterAnEventDeliversTheMissedOnesExactlyOnce) {
  int64_t first = submit("alice");
  int64_t last_seen = 0;
  {
    Watcher w(alice_socket_, "/v1/watch?topics=jobs&after_event=0");
    ASSERT_TRUE(w.waitLive());
    ASSERT_EQ(w.jobEvents().size(), 1u);  // the replay of the submission
    last_seen = w.jobEvents().back()["seq"].get<int64_t>();
    w.stop();
  }
  // Missed while disconnected.
  runToCompletion(first);
  submit("bob", "vision");
  int64_t second = submit("alice");
  Watcher w(alice_socket_, "/v1/watch?topics=jobs&after_event=" + std::to_string(last_seen));
  auto live = w.waitLive();
  ASSERT_TRUE(live);
  // And live after the switch.
  runToCompletion(second);
  ASSERT_TRUE(w.waitJobState(second, "COMPLETED"));
  std::vector<json> got = w.jobEvents();
  std::vector<int64_t> seqs;
  for (const json& e : got)
    seqs.push_back(e["seq"].get<int64_t>());
  ASSERT_EQ(got.size(), 5u);  // first: RUNNING, COMPLETED; second: PENDING, RUNNING, COMPLETED
  EXPECT_EQ(statesOf(got, first), (std::vector<std::string>{"RUNNING", "COMPLETED"}));
  EXPECT_EQ(statesOf(got, second), (std::vector<std::string>{"PENDING", "RUNNING", "COMPLETED"}));
  for (size_t i = 1; i < seqs.size(); ++i)
    EXPECT_GT(seqs[i], seqs[i - 1]);
  EXPECT_GT(seqs.front(), last_seen);
}

TEST_F(LiveFeedTest, ASlowClientIsDroppedWithoutHoldingUpSubmissions) {
  // A watcher with a tiny queue that never reads: a raw socket that upgrades and stops.
  alice_server_->stop();
  net::Router router;
  ASSERT_TRUE(feed_->addRoute(router).isOk());
  alice_server_ = start(alice_socket_, std::move(router), /*max_queued=*/4);
  int fd = rawWebSocketUpgrade(alice_socket_, "/v1/watch?topics=jobs");
  ASSERT_GE(fd, 0);
  Watcher fast(admin_socket_, "/v1/watch?topics=jobs");
  ASSERT_TRUE(fast.waitLive());
  int64_t last = 0;
  for (int i = 0; i < 3000; ++i)
    last = submit("alice");
  ASSERT_TRUE(fast.waitJobState(last, "PENDING"));
  EXPECT_EQ(fast.jobEvents().size(), 3000u);
  EXPECT_GE(feed_->hub().droppedCount(), 1u) << feed_->hub().connectionCount();
  ::close(fd);
}

TEST_F(LiveFeedTest, SummaryAndNodeTopics) {
  Watcher w(admin_socket_, "/v1/watch?topics=nodes,summary");
  ASSERT_TRUE(w.waitLive());
  ASSERT_TRUE(w.waitFor([](const json& m) { return m.value("topic", "") == "summary"; }));
  api::Node node;
  node.name = "gpu-09";
  ASSERT_TRUE(registry_->registerNode(node).ok());
  ASSERT_TRUE(registry_->drain("gpu-09", "maintenance").isOk());
  auto drained = w.waitFor([](const json& m) {
    return m.value("topic", "") == "nodes" && m["data"]["change"] == "drain";
  });
  ASSERT_TRUE(drained);
  EXPECT_EQ((*drained)["data"]["node"], "gpu-09");
  EXPECT_EQ((*drained)["data"]["reason"], "maintenance");
  EXPECT_TRUE(w.waitFor([](const json& m) {
    return m.value("topic", "") == "summary" && m["data"]["nodes"]["total"] == 1;
  }));
}

// A GPU going unhealthy and coming back is one "health" change each on the nodes topic, naming
// the GPU and the agent's reason; a report that changes nothing publishes nothing.
TEST_F(LiveFeedTest, GpuHealthChangesArePublishedOnTheNodesTopic) {
  Watcher w(admin_socket_, "/v1/watch?topics=nodes");
  ASSERT_TRUE(w.waitLive());
  api::Node node;
  node.name = "gpu-10";
  api::Gpu gpu;
  gpu.uuid = "GPU-10-0";
  gpu.index = 0;
  gpu.model = "NVIDIA A100-SXM4-80GB";
  gpu.memory_mib = 81920;
  node.gpus.push_back(gpu);
  ASSERT_TRUE(registry_->registerNode(node).ok());
  std::map<std::string, std::pair<api::GpuHealth, std::string>> bad{
      {"GPU-10-0", {api::GpuHealth::kUnhealthy, "XID 79: fallen off the bus"}}};
  ASSERT_TRUE(*registry_->setGpuHealth("gpu-10", bad));
  EXPECT_FALSE(*registry_->setGpuHealth("gpu-10", bad));  // unchanged: nothing to publish
  ASSERT_TRUE(*registry_->setGpuHealth("gpu-10", {}));
  auto unhealthy = w.waitFor([](const json& m) {
    return m.value("topic", "") == "nodes" && m["data"]["change"] == "health" &&
           m["data"]["reason"] != "every GPU healthy";
  });
  ASSERT_TRUE(unhealthy);
  EXPECT_EQ((*unhealthy)["data"]["node"], "gpu-10");
  EXPECT_EQ((*unhealthy)["data"]["reason"],
            "GPU 0 (GPU-10-0) unhealthy: XID 79: fallen off the bus");
  EXPECT_TRUE(w.waitFor([](const json& m) {
    return m.value("topic", "") == "nodes" && m["data"]["change"] == "health" &&
           m["data"]["reason"] == "every GPU healthy";
  }));
  int health_messages = 0;
  for (const json& m : w.received()) {
    if (m.value("topic", "") == "nodes" && m["data"]["change"] == "health") ++health_messages;
  }
  EXPECT_EQ(health_messages, 2);
}

}  // namespace
}  // namespace gpool::controller
