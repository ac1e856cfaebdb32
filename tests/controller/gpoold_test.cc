// Drives the gpoold binary: start-up over a fresh SQLite file, clean stop on SIGTERM, one-pass
// mode, and configuration errors. No sleeps: the test blocks on the daemon's "ready" line and on
// waitpid.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "controller/controller_config.h"
#include "controller/controller_fixture.h"
#include "net/client.h"
#include "net/net_test_util.h"
#include "net/plain_http.h"
#include "store/api_codec.h"
#include "store/pg_server.h"
#include "store/postgres_store.h"
#include "store/sql.h"

namespace gpool::controller {
namespace {

const std::string kGpoold = std::string(GPOOL_BINARY_DIR) + "/src/controller/gpoold";

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;  // the child's stdout
};

// Every gpoold spawned and not yet waited for. A test that stops at a failed ASSERT leaves its
// gpoold running; GpooldTest::TearDown kills those, so a failure cannot leave a daemon holding
// CTest's output pipe (which would hang the whole run instead of failing one test).
std::vector<pid_t>& unwaitedChildren() {
  static std::vector<pid_t> pids;
  return pids;
}

Child spawn(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kGpoold.c_str()));
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kGpoold.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  if (pid > 0) unwaitedChildren().push_back(pid);
  return Child{pid, fdopen(fds[0], "r")};
}

int waitExit(Child& child) {
  int status = 0;
  waitpid(child.pid, &status, 0);
  std::erase(unwaitedChildren(), child.pid);
  if (child.out) fclose(child.out);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string readLine(FILE* f) {
  char buf[512];
  if (!fgets(buf, sizeof buf, f)) return "";
  std::string line(buf);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

class GpooldTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (pid_t pid : unwaitedChildren()) {
      ADD_FAILURE() << "gpoold " << pid << " was still running at the end of the test; killed";
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    unwaitedChildren().clear();
  }
  std::string writeConfig(const std::string& extra = "") {
    std::string path = dir_.path() + "/gpoold.toml";
    std::ofstream(path) << "[controller]\nstore = \"" << db_ << "\"\n"
                        << "sqlite_synchronous = \"NORMAL\"\n"
                        << extra << "[log]\nlevel = \"warn\"\n";
    return path;
  }
  testing::TempDir dir_;
  std::string db_ = dir_.path() + "/gpool.db";
};

TEST_F(GpooldTest, StartsOpensTheStoreAndStopsOnSigterm) {
  Child child = spawn({"--config", writeConfig()});
  ASSERT_GT(child.pid, 0);
  EXPECT_EQ(readLine(child.out), "ready");
  EXPECT_TRUE(std::filesystem::exists(db_));
  kill(child.pid, SIGTERM);
  EXPECT_EQ(waitExit(child), 0);
}

TEST_F(GpooldTest, OncePlacesWhatTheStoreHolds) {
  {
    auto store = testing::openStore(db_);
    ASSERT_TRUE(store::saveApiNode(*store, testing::makeNode("gpu-01", 2)).isOk());
    ASSERT_TRUE(store::submitApiJob(*store, "alice", 1001, "ml", testing::makeSpec(1000),
                                    fromUnixSeconds(1'700'000'000))
                    .ok());
  }
  Child child = spawn({"--config", writeConfig(), "--once"});
  EXPECT_EQ(readLine(child.out), "pass: started=1 pending=0 nodes=1");
  EXPECT_EQ(waitExit(child), 0);
  auto store = testing::openStore(db_);
  auto running = store->jobsInStates({api::JobState::kRunning});
  ASSERT_TRUE(running.ok());
  EXPECT_EQ(running->size(), 1u);
}

// The REST API over the Unix socket: the test process is the peer (kernel credentials).
TEST_F(GpooldTest, ServesJobsOverItsUnixSocket) {
  {
    auto store = testing::openStore(db_);
    ASSERT_TRUE(store::saveApiNode(*store, testing::makeNode("gpu-01", 2)).isOk());
    testing::addUser(*store, "alice", 1001, {"ml"});  // ?group=ml must name a group
  }
  std::string sock = dir_.path() + "/gpoold.sock";
  // The test submits as root, and no agent runs anything: the pool allows root's jobs.
  Child child =
      spawn({"--config", writeConfig("socket = \"" + sock + "\"\nallow_root_jobs = true\n")});
  ASSERT_EQ(readLine(child.out), "ready");
  {
    net::HttpClient client(net::ClientEndpoint::unixSocket(sock), std::chrono::seconds(10));
    auto health = client.get("/v1/health");
    ASSERT_TRUE(health.ok()) << health.status().toString();
    EXPECT_EQ(health->status, 200);

    auto submitted = client.post("/v1/jobs?group=ml", api::toJson(testing::makeSpec(500)).dump());
    ASSERT_TRUE(submitted.ok());
    ASSERT_EQ(submitted->status, 201) << submitted->body;
    int64_t id = nlohmann::json::parse(submitted->body)["ids"][0].get<int64_t>();

    auto shown = client.get("/v1/jobs/" + std::to_string(id));
    ASSERT_TRUE(shown.ok());
    ASSERT_EQ(shown->status, 200) << shown->body;
    EXPECT_EQ(nlohmann::json::parse(shown->body)["group"], "ml");

    auto listed = client.get("/v1/jobs?limit=10");
    ASSERT_TRUE(listed.ok());
    ASSERT_EQ(listed->status, 200) << listed->body;
    EXPECT_EQ(nlohmann::json::parse(listed->body)["jobs"].size(), 1u);

    auto cancelled = client.post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
    ASSERT_TRUE(cancelled.ok());
    EXPECT_EQ(cancelled->status, 200) << cancelled->body;
    auto again = client.post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->status, 409) << again->body;

    auto nodes = client.get("/v1/nodes");
    ASSERT_TRUE(nodes.ok());
    EXPECT_EQ(nlohmann::json::parse(nodes->body)["nodes"].size(), 1u);

    // Bad input is a 4xx naming the field, never a 500.
    auto bad_json = client.post("/v1/jobs", "{not json");
    ASSERT_TRUE(bad_json.ok());
    EXPECT_EQ(bad_json->status, 400);
    api::JobSpec too_big = testing::makeSpec(9000);
    auto impossible = client.post("/v1/jobs", api::toJson(too_big).dump());
    ASSERT_TRUE(impossible.ok());
    EXPECT_EQ(impossible->status, 400);
    EXPECT_NE(impossible->body.find("job.resources.gpus"), std::string::npos) << impossible->body;
    auto bad_limit = client.get("/v1/jobs?limit=0");
    ASSERT_TRUE(bad_limit.ok());
    EXPECT_EQ(bad_limit->status, 400);
    auto bad_id = client.get("/v1/jobs/abc");
    ASSERT_TRUE(bad_id.ok());
    EXPECT_EQ(bad_id->status, 400);
    auto missing = client.get("/v1/jobs/999999");
    ASSERT_TRUE(missing.ok());
    EXPECT_EQ(missing->status, 404);
  }
  kill(child.pid, SIGTERM);
  EXPECT_EQ(waitExit(child), 0);
}

// "tls HOST:PORT" -> PORT, or -1.
int tlsPort(const std::string& line) {
  if (line.rfind("tls ", 0) != 0) return -1;
  return std::stoi(line.substr(line.rfind(':') + 1));
}

TEST_F(GpooldTest, ServesTlsOnAnOsChosenPort) {
  net::testing::TestCerts certs;
  ASSERT_TRUE(net::testing::makeTestCerts(dir_.path(), &certs).isOk());
  Child child = spawn(
      {"--config", writeConfig("tls_listen = \"127.0.0.1:0\"\ntls_cert = \"" + certs.cert_file +
                               "\"\ntls_key = \"" + certs.key_file + "\"\n")});
  std::string line = readLine(child.out);
  int port = tlsPort(line);
  ASSERT_GT(port, 0) << line;
  ASSERT_EQ(readLine(child.out), "ready");
  {
    net::HttpClient anonymous(net::ClientEndpoint::tls("127.0.0.1", port, certs.ca_file, ""),
                              std::chrono::seconds(10));
    auto health = anonymous.get("/v1/health");
    ASSERT_TRUE(health.ok()) << health.status().toString();
    EXPECT_EQ(health->status, 200);
    auto jobs = anonymous.get("/v1/jobs");
    ASSERT_TRUE(jobs.ok());
    EXPECT_EQ(jobs->status, 401) << jobs->body;
    // The dashboard's page, without a token (web_root found in the source tree).
    auto page = anonymous.get("/");
    ASSERT_TRUE(page.ok());
    EXPECT_EQ(page->status, 200);
    EXPECT_EQ(page->header("Content-Type"), "text/html; charset=utf-8");
    // A client that does not trust the controller's CA does not get through.
    net::HttpClient untrusting(net::ClientEndpoint::tls("127.0.0.1", port, certs.other_ca_file, ""),
                               std::chrono::seconds(10));
    EXPECT_EQ(untrusting.get("/v1/health").status().code(), StatusCode::kUnavailable);
  }
  kill(child.pid, SIGTERM);
  EXPECT_EQ(waitExit(child), 0);
}

// API tokens end to end: root (over the Unix socket) makes tokens for alice and bob; over TLS
// each acts as their user; bob cannot cancel alice's job; a revoked token gets 401.
TEST_F(GpooldTest, ApiTokensOverTls) {
  {
    auto store = testing::openStore(db_);
    ASSERT_TRUE(store::saveApiNode(*store, testing::makeNode("gpu-01", 2)).isOk());
  }
  net::testing::TestCerts certs;
  ASSERT_TRUE(net::testing::makeTestCerts(dir_.path(), &certs).isOk());
  std::string sock = dir_.path() + "/gpoold.sock";
  Child child =
      spawn({"--config",
             writeConfig("socket = \"" + sock + "\"\ntls_listen = \"127.0.0.1:0\"\ntls_cert = \"" +
                         certs.cert_file + "\"\ntls_key = \"" + certs.key_file + "\"\n")});
  int port = tlsPort(readLine(child.out));
  ASSERT_GT(port, 0);
  ASSERT_EQ(readLine(child.out), "ready");
  {
    net::HttpClient root(net::ClientEndpoint::unixSocket(sock), std::chrono::seconds(10));
    auto tokenFor = [&](const std::string& user) {
      // A token's user needs a record with a uid (or a local account) to be served.
      auto made = root.request(net::Method::kPut, "/v1/users/" + user,
                               user == "alice" ? R"({"uid":1001})" : R"({"uid":1002})");
      EXPECT_TRUE(made.ok() && made->status == 201);
      auto r = root.post("/v1/tokens", R"({"name":"t","user":")" + user + "\"}");
      EXPECT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.status().toString());
      return r.ok() ? nlohmann::json::parse(r->body) : nlohmann::json::object();
    };
    nlohmann::json alice_token = tokenFor("alice");
    nlohmann::json bob_token = tokenFor("bob");
    net::HttpClient alice(
        net::ClientEndpoint::tls("127.0.0.1", port, certs.ca_file, alice_token.value("token", "")),
        std::chrono::seconds(10));
    net::HttpClient bob(
        net::ClientEndpoint::tls("127.0.0.1", port, certs.ca_file, bob_token.value("token", "")),
        std::chrono::seconds(10));
    auto submitted = alice.post("/v1/jobs", api::toJson(testing::makeSpec(500)).dump());
    ASSERT_TRUE(submitted.ok()) << submitted.status().toString();
    ASSERT_EQ(submitted->status, 201) << submitted->body;
    int64_t id = nlohmann::json::parse(submitted->body)["ids"][0].get<int64_t>();
    auto shown = alice.get("/v1/jobs/" + std::to_string(id));
    ASSERT_TRUE(shown.ok());
    EXPECT_EQ(nlohmann::json::parse(shown->body)["user"], "alice");
    auto bob_cancel = bob.post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
    ASSERT_TRUE(bob_cancel.ok());
    EXPECT_EQ(bob_cancel->status, 403) << bob_cancel->body;
    EXPECT_EQ(bob.get("/v1/jobs/" + std::to_string(id))->status, 403);
    EXPECT_EQ(bob.post("/v1/nodes/gpu-01/drain", R"({"reason":"x"})")->status, 403);
    EXPECT_EQ(bob.post("/v1/join-tokens", "")->status, 403);
    auto alice_cancel = alice.post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
    ASSERT_TRUE(alice_cancel.ok());
    EXPECT_EQ(alice_cancel->status, 200) << alice_cancel->body;
    // bob sees only his own token; he cannot revoke alice's; she can.
    auto bobs = bob.get("/v1/tokens");
    ASSERT_TRUE(bobs.ok());
    EXPECT_EQ(nlohmann::json::parse(bobs->body)["tokens"].size(), 1u);
    std::string alice_path = "/v1/tokens/" + std::to_string(alice_token.value("id", 0));
    EXPECT_EQ(bob.del(alice_path)->status, 403);
    EXPECT_EQ(alice.del(alice_path)->status, 200);
    auto after = alice.get("/v1/jobs");
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->status, 401) << after->body;
    EXPECT_NE(after->body.find("revoked"), std::string::npos) << after->body;
    EXPECT_EQ(bob.get("/v1/jobs")->status, 200);
  }
  kill(child.pid, SIGTERM);
  EXPECT_EQ(waitExit(child), 0);
}

// An agent over TLS: its join token is exchanged for a node credential in `welcome`; the
// credential works on reconnect, the used one-time join token does not, and a credential
// speaks only for its node.
TEST_F(GpooldTest, AgentJoinsWithAJoinTokenAndReconnectsWithItsCredential) {
  net::testing::TestCerts certs;
  ASSERT_TRUE(net::testing::makeTestCerts(dir_.path(), &certs).isOk());
  std::string sock = dir_.path() + "/gpoold.sock";
  Child child =
      spawn({"--config",
             writeConfig("socket = \"" + sock + "\"\ntls_listen = \"127.0.0.1:0\"\ntls_cert = \"" +
                         certs.cert_file + "\"\ntls_key = \"" + certs.key_file + "\"\n")});
  int port = tlsPort(readLine(child.out));
  ASSERT_GT(port, 0);
  ASSERT_EQ(readLine(child.out), "ready");
  {
    net::HttpClient root(net::ClientEndpoint::unixSocket(sock), std::chrono::seconds(10));
    auto made = root.post("/v1/join-tokens", R"({"expires_in":"1h"})");
    ASSERT_TRUE(made.ok() && made->status == 201);
    std::string join = nlohmann::json::parse(made->body)["token"];
    nlohmann::json hello{
        {"v", 1},
        {"type", "hello"},
        {"seq", 1},
        {"ack", 0},
        {"body",
         {{"node",
           {{"name", "edge-01"},
            {"hostname", "edge-01"},
            {"labels", nlohmann::json::object()},
            {"cpu_millis", 16000},
            {"ram_mib", 65536},
            {"agent_version", "test"},
            {"os", "Linux"},
            {"cgroup", "none"}}},
          {"gpus", {{"gpus", nlohmann::json::array()}, {"links", nlohmann::json::array()}}},
          {"tasks", nlohmann::json::array()}}}};
    // Connects with `token`, says hello as `node`; returns the welcome body (or the close
    // reason as {"closed": why}).
    auto exchange = [&](const std::string& token, const std::string& node) {
      net::testing::Waiter waiter;
      nlohmann::json result;
      net::WebSocketClientOptions ws;
      ws.endpoint = net::ClientEndpoint::tls("127.0.0.1", port, certs.ca_file, token);
      ws.target = "/v1/agent";
      ws.initial_backoff = std::chrono::seconds(30);  // one attempt is enough here
      net::WebSocketClient* client = nullptr;
      nlohmann::json h = hello;
      h["body"]["node"]["name"] = node;
      ws.on_connect = [&] { (void)client->send(h.dump()); };
      ws.on_message = [&](std::string text) {
        auto m = nlohmann::json::parse(text, nullptr, false);
        if (m.is_object() && m.value("type", "") == "welcome") {
          waiter.update([&] { result = m["body"]; });
        }
      };
      ws.on_disconnect = [&](const Status& why) {
        waiter.update([&] {
          if (result.is_null()) result = {{"closed", why.toString()}};
        });
      };
      net::WebSocketClient c(ws);
      client = &c;
      c.start();
      EXPECT_TRUE(waiter.waitFor([&] { return !result.is_null(); }));
      c.stop();
      return result;
    };
    nlohmann::json welcome = exchange(join, "edge-01");
    ASSERT_TRUE(welcome.contains("node_credential")) << welcome.dump();
    std::string credential = welcome["node_credential"];
    EXPECT_EQ(credential.rfind("node.", 0), 0u);
    // Reconnect with the credential: welcomed, no new credential.
    nlohmann::json again = exchange(credential, "edge-01");
    EXPECT_TRUE(again.contains("node_epoch")) << again.dump();
    EXPECT_FALSE(again.contains("node_credential"));
    // The one-time join token is spent; the credential is no other node's.
    EXPECT_TRUE(exchange(join, "edge-02").contains("closed"));
    EXPECT_TRUE(exchange(credential, "edge-02").contains("closed"));
    // Nor does the credential open REST routes.
    net::HttpClient as_node(net::ClientEndpoint::tls("127.0.0.1", port, certs.ca_file, credential),
                            std::chrono::seconds(10));
    EXPECT_EQ(as_node.get("/v1/jobs")->status, 403);
  }
  kill(child.pid, SIGTERM);
  EXPECT_EQ(waitExit(child), 0);
}

TEST_F(GpooldTest, BadTlsConfigurationExitsWithTwo) {
  // No certificate, an unreadable key, a bad port, a certificate without a listener.
  for (std::string extra :
       std::vector<std::string>{std::string("tls_listen = \"127.0.0.1:0\"\n"),
                                std::string("tls_listen = \"127.0.0.1:0\"\ntls_cert = "
                                            "\"/nonexistent.pem\"\ntls_key = \"/x.key\"\n"),
                                std::string("tls_listen = \"127.0.0.1:99999\"\n"),
                                std::string("tls_cert = \"/a.pem\"\n")}) {
    Child child = spawn({"--config", writeConfig(extra), "--once"});
    EXPECT_EQ(waitExit(child), 2) << extra;
  }
}

// controller.api_threads sizes the API server's thread pool and api_blocking_threads the pool
// submissions wait on: they are all running once gpoold says "ready", so its thread count is at
// least their sum (the loop, store and logging add a handful). Without the keys: twice the CPUs,
// at least 4, and 16.
TEST_F(GpooldTest, ApiThreadsSizesTheServerPool) {
  const std::string socket = dir_.path() + "/gpoold.sock";
  const size_t cpus = std::max(1u, std::thread::hardware_concurrency());
  EXPECT_EQ(defaultApiThreads(), static_cast<int64_t>(std::max<size_t>(4, 2 * cpus)));
  const size_t default_api = static_cast<size_t>(defaultApiThreads());
  for (const auto& [setting, expected] :
       {std::pair<std::string, size_t>{"api_threads = 48\n", 48 + 16},
        std::pair<std::string, size_t>{"api_threads = 48\napi_blocking_threads = 0\n", 48},
        std::pair<std::string, size_t>{"api_blocking_threads = 100\n", default_api + 100},
        std::pair<std::string, size_t>{"", default_api + 16}}) {
    Child child = spawn({"--config", writeConfig("socket = \"" + socket + "\"\n" + setting)});
    ASSERT_GT(child.pid, 0);
    ASSERT_EQ(readLine(child.out), "ready");
    size_t threads = 0;
    for ([[maybe_unused]] const auto& entry :
         std::filesystem::directory_iterator("/proc/" + std::to_string(child.pid) + "/task")) {
      ++threads;
    }
    EXPECT_GE(threads, expected) << setting;
    EXPECT_LT(threads, expected + 16u) << setting;
    kill(child.pid, SIGTERM);
    EXPECT_EQ(waitExit(child), 0);
  }
}

// Live updates over the real daemon's socket: a watcher (root: an admin by peer credentials)
// sees the submission and the cancel of a job as they commit, after its "live" message.
TEST_F(GpooldTest, WatchStreamsJobEventsOverItsUnixSocket) {
  std::string sock = dir_.path() + "/gpoold.sock";
  // The test submits as root, and no agent runs anything: the pool allows root's jobs.
  Child child =
      spawn({"--config", writeConfig("socket = \"" + sock + "\"\nallow_root_jobs = true\n")});
  ASSERT_EQ(readLine(child.out), "ready");
  {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<nlohmann::json> got;
    net::WebSocketClientOptions o;
    o.endpoint = net::ClientEndpoint::unixSocket(sock);
    o.target = "/v1/watch?topics=jobs";
    o.on_message = [&](std::string text) {
      std::lock_guard lock(mu);
      got.push_back(nlohmann::json::parse(text, nullptr, false));
      cv.notify_all();
    };
    net::WebSocketClient watcher(o);
    watcher.start();
    auto wait = [&](const std::function<bool(const nlohmann::json&)>& pred) {
      std::unique_lock lock(mu);
      return cv.wait_for(lock, std::chrono::seconds(10), [&] {
        for (const auto& m : got)
          if (pred(m)) return true;
        return false;
      });
    };
    ASSERT_TRUE(wait([](const nlohmann::json& m) { return m.contains("last_event"); }));
    net::HttpClient client(net::ClientEndpoint::unixSocket(sock), std::chrono::seconds(10));
    auto submitted = client.post("/v1/jobs", api::toJson(testing::makeSpec(0)).dump());
    ASSERT_TRUE(submitted.ok());
    ASSERT_EQ(submitted->status, 201) << submitted->body;
    int64_t id = nlohmann::json::parse(submitted->body)["ids"][0].get<int64_t>();
    auto cancelled = client.post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
    ASSERT_TRUE(cancelled.ok());
    auto is = [id](const std::string& state) {
      return [id, state](const nlohmann::json& m) {
        return m.value("topic", "") == "jobs" && m["data"]["job_id"] == id &&
               m["data"]["to_state"] == state;
      };
    };
    EXPECT_TRUE(wait(is("PENDING")));
    EXPECT_TRUE(wait(is("CANCELLED")));
    // Bad query parameters are refused before the upgrade: the watcher never goes live.
    auto bad = client.get("/v1/watch?topics=bogus");
    ASSERT_TRUE(bad.ok());
    EXPECT_NE(bad->status, 101);
    watcher.stop();
  }
  kill(child.pid, SIGTERM);
  EXPECT_EQ(waitExit(child), 0);
}

// The jobs topic over the real daemon as a plain user (a token over TLS): bob sees the events
// of his own job and none of alice's, although hers committed first (events go out in commit
// order, so hers would have arrived before his).
TEST_F(GpooldTest, WatchShowsAPlainUserOnlyTheirOwnJobs) {
  net::testing::TestCerts certs;
  ASSERT_TRUE(net::testing::makeTestCerts(dir_.path(), &certs).isOk());
  std::string sock = dir_.path() + "/gpoold.sock";
  Child child =
      spawn({"--config",
             writeConfig("socket = \"" + sock + "\"\ntls_listen = \"127.0.0.1:0\"\ntls_cert = \"" +
                         certs.cert_file + "\"\ntls_key = \"" + certs.key_file + "\"\n")});
  int port = tlsPort(readLine(child.out));
  ASSERT_GT(port, 0);
  ASSERT_EQ(readLine(child.out), "ready");
  {
    net::HttpClient root(net::ClientEndpoint::unixSocket(sock), std::chrono::seconds(10));
    auto tokenFor = [&](const std::string& user) {
      // A token's user needs a record with a uid (or a local account) to be served.
      auto made = root.request(net::Method::kPut, "/v1/users/" + user,
                               user == "alice" ? R"({"uid":1001})" : R"({"uid":1002})");
      EXPECT_TRUE(made.ok() && made->status == 201);
      auto r = root.post("/v1/tokens", R"({"name":"t","user":")" + user + "\"}");
      EXPECT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.status().toString());
      return r.ok() ? nlohmann::json::parse(r->body).value("token", "") : std::string();
    };
    const auto alice_at =
        net::ClientEndpoint::tls("127.0.0.1", port, certs.ca_file, tokenFor("alice"));
    const auto bob_at = net::ClientEndpoint::tls("127.0.0.1", port, certs.ca_file, tokenFor("bob"));
    std::mutex mu;
    std::condition_variable cv;
    std::vector<nlohmann::json> got;
    net::WebSocketClientOptions o;
    o.endpoint = bob_at;
    o.target = "/v1/watch?topics=jobs";
    o.on_message = [&](std::string text) {
      std::lock_guard lock(mu);
      got.push_back(nlohmann::json::parse(text, nullptr, false));
      cv.notify_all();
    };
    net::WebSocketClient watcher(o);
    watcher.start();
    auto wait = [&](const std::function<bool(const nlohmann::json&)>& pred) {
      std::unique_lock lock(mu);
      return cv.wait_for(lock, std::chrono::seconds(10), [&] {
        for (const auto& m : got)
          if (pred(m)) return true;
        return false;
      });
    };
    ASSERT_TRUE(wait([](const nlohmann::json& m) { return m.contains("last_event"); }));
    auto submitAs = [](const net::ClientEndpoint& at) -> int64_t {
      net::HttpClient client(at, std::chrono::seconds(10));
      auto r = client.post("/v1/jobs", api::toJson(testing::makeSpec(0)).dump());
      EXPECT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.status().toString());
      return r.ok() && r->status == 201 ? nlohmann::json::parse(r->body)["ids"][0].get<int64_t>()
                                        : -1;
    };
    const int64_t hers = submitAs(alice_at);
    const int64_t his = submitAs(bob_at);
    ASSERT_GT(hers, 0);
    ASSERT_GT(his, 0);
    EXPECT_TRUE(wait([his](const nlohmann::json& m) {
      return m.value("topic", "") == "jobs" && m["data"]["job_id"] == his;
    }));
    {
      std::lock_guard lock(mu);
      for (const auto& m : got) {
        if (m.value("topic", "") != "jobs") continue;
        EXPECT_NE(m["data"]["job_id"], hers) << m.dump();
        EXPECT_EQ(m["data"]["user"], "bob") << m.dump();
      }
    }
    watcher.stop();
  }
  kill(child.pid, SIGTERM);
  EXPECT_EQ(waitExit(child), 0);
}

TEST_F(GpooldTest, BadConfigurationExitsWithTwo) {
  Child child = spawn({"--config", writeConfig("node_down_afterr = \"90s\"\n"), "--once"});
  EXPECT_EQ(waitExit(child), 2);
  Child bad_gap = spawn({"--config", writeConfig("schedule_min_gap_ms = -1\n"), "--once"});
  EXPECT_EQ(waitExit(bad_gap), 2);
  for (const char* threads : {"0", "257", "\"many\""}) {
    Child bad_threads =
        spawn({"--config", writeConfig(std::string("api_threads = ") + threads + "\n"), "--once"});
    EXPECT_EQ(waitExit(bad_threads), 2) << "api_threads = " << threads;
  }
  for (const char* threads : {"-1", "1025"}) {
    Child bad_blocking =
        spawn({"--config", writeConfig(std::string("api_blocking_threads = ") + threads + "\n"),
               "--once"});
    EXPECT_EQ(waitExit(bad_blocking), 2) << "api_blocking_threads = " << threads;
  }
  Child missing = spawn({"--config", dir_.path() + "/nope.toml", "--once"});
  EXPECT_EQ(waitExit(missing), 2);
  // Agents must fence themselves (lease expired) before their node is declared DOWN.
  Child lease = spawn({"--config", writeConfig("lease_duration = \"90s\"\n"), "--once"});
  EXPECT_EQ(waitExit(lease), 2);
  Child ok =
      spawn({"--config", writeConfig("lease_duration = \"30s\"\nheartbeat_interval = \"2s\"\n"),
             "--once"});
  EXPECT_EQ(readLine(ok.out), "pass: started=0 pending=0 nodes=0");
  EXPECT_EQ(waitExit(ok), 0);
}

// controller.http_listen: the dashboard's files at / without a token, the API with the same
// bearer tokens as over TLS, on an OS-chosen loopback port printed before "ready".
TEST_F(GpooldTest, ServesTheDashboardAndTheApiOnALoopbackHttpListener) {
  std::string sock = dir_.path() + "/gpoold.sock";
  Child child = spawn({"--config", writeConfig("socket = \"" + sock +
                                               "\"\nhttp_listen = \"127.0.0.1:0\"\nweb_root = \"" +
                                               std::string(GPOOL_SOURCE_DIR) + "/web\"\n")});
  std::string line = readLine(child.out);
  ASSERT_EQ(line.rfind("http 127.0.0.1:", 0), 0u) << line;
  const int port = std::stoi(line.substr(line.rfind(':') + 1));
  ASSERT_GT(port, 0);
  ASSERT_EQ(readLine(child.out), "ready");
  using net::testing::plainHttp;
  {
    net::testing::PlainResponse index = plainHttp(port, "GET", "/");
    ASSERT_EQ(index.status, 200) << index.error;
    EXPECT_EQ(index.headers["content-type"], "text/html; charset=utf-8");
    EXPECT_NE(index.body.find("<title>gpool dashboard</title>"), std::string::npos);
    net::testing::PlainResponse app = plainHttp(port, "GET", "/web/app.js");
    EXPECT_EQ(app.status, 200);
    EXPECT_EQ(app.headers["content-type"], "text/javascript; charset=utf-8");
    EXPECT_EQ(plainHttp(port, "GET", "/web/style.css").headers["content-type"],
              "text/css; charset=utf-8");
    EXPECT_EQ(plainHttp(port, "GET", "/web/nope.js").status, 404);
    // Nothing outside web_root, however the path is spelled.
    for (const char* target : {"/web/..", "/web/%2e%2e", "/web/..%2f..%2fREADME.md",
                               "/web/../README.md", "/web/%2e%2e%2fREADME.md", "/README.md"}) {
      int status = plainHttp(port, "GET", target).status;
      EXPECT_TRUE(status == 404 || status == 400) << target << ": " << status;
    }
    // The API wants a token here, as over TLS.
    EXPECT_EQ(plainHttp(port, "GET", "/v1/jobs").status, 401);
    EXPECT_EQ(plainHttp(port, "GET", "/v1/jobs", "", {{"Authorization", "Bearer gpt.x.y"}}).status,
              401);
    net::HttpClient root(net::ClientEndpoint::unixSocket(sock), std::chrono::seconds(10));
    ASSERT_EQ(root.request(net::Method::kPut, "/v1/users/alice", R"({"uid":1001})")->status, 201);
    auto made = root.post("/v1/tokens", R"({"name":"web","user":"alice"})");
    ASSERT_TRUE(made.ok() && made->status == 201) << (made.ok() ? made->body : "");
    std::string token = nlohmann::json::parse(made->body)["token"].get<std::string>();
    net::testing::PlainResponse account =
        plainHttp(port, "GET", "/v1/account", "", {{"Authorization", "Bearer " + token}});
    ASSERT_EQ(account.status, 200) << account.body;
    EXPECT_EQ(nlohmann::json::parse(account.body)["user"], "alice");
  }
  kill(child.pid, SIGTERM);
  EXPECT_EQ(waitExit(child), 0);
}

// The plain-HTTP listener carries tokens unencrypted: only loopback addresses are accepted, and
// the error names the key.
TEST_F(GpooldTest, HttpListenRefusesANonLoopbackAddress) {
  for (const char* listen : {"0.0.0.0:0", "192.0.2.10:8080", "[::]:0", "example.org:80"}) {
    std::string config = writeConfig(std::string("http_listen = \"") + listen + "\"\n");
    Result<ControllerSettings> s = readControllerSettings(config);
    ASSERT_FALSE(s.ok()) << listen;
    EXPECT_NE(s.status().message().find("http_listen"), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find("not a loopback address"), std::string::npos)
        << s.status().message();
    Child child = spawn({"--config", config, "--once"});
    EXPECT_EQ(waitExit(child), 2) << listen;
  }
  EXPECT_FALSE(readControllerSettings(writeConfig("http_listen = \"127.0.0.1:99999\"\n")).ok());
  EXPECT_FALSE(readControllerSettings(writeConfig("web_root = \"/nonexistent/web\"\n")).ok());
  for (const char* listen : {"127.0.0.1:0", "127.0.0.2:8080", "[::1]:0", "localhost:0"}) {
    Result<ControllerSettings> s =
        readControllerSettings(writeConfig(std::string("http_listen = \"") + listen + "\"\n"));
    ASSERT_TRUE(s.ok()) << listen << ": " << s.status().message();
    EXPECT_GE(s->http_port, 0);
  }
}

// [idle_reclaim]: its keys and their errors, and the AllocationIdle alert's `for` following
// `after` unless [alerts.allocation_idle] sets one.
TEST_F(GpooldTest, IdleReclaimSettingsAreCheckedAndTheAlertFollowsThem) {
  Result<ControllerSettings> s = readControllerSettings(
      writeConfig("[idle_reclaim]\nenabled = true\nafter = \"3h\"\ngrace = \"30m\"\n"
                  "threshold = 2.5\naction = \"requeue\"\n[idle_reclaim.qos]\ndev = \"warn\"\n"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_TRUE(s->idle_reclaim.enabled);
  EXPECT_EQ(s->idle_reclaim.after_s, 3 * 3600);
  EXPECT_EQ(s->idle_reclaim.grace_s, 1800);
  EXPECT_DOUBLE_EQ(s->idle_reclaim.threshold_pct, 2.5);
  EXPECT_EQ(s->idle_reclaim.action, "requeue");
  EXPECT_EQ(s->idle_reclaim.qos_actions.at("dev"), "warn");
  bool follows = false;
  for (const AlertRuleSettings& r : s->alerts.rules) {
    if (r.name == "allocation_idle") follows = r.for_s == 3 * 3600;
  }
  EXPECT_TRUE(follows);
  s = readControllerSettings(writeConfig(
      "[alerts.allocation_idle]\nfor = \"4h\"\n[idle_reclaim]\nenabled = true\nafter = \"1h\"\n"));
  ASSERT_TRUE(s.ok()) << s.status().message();
  for (const AlertRuleSettings& r : s->alerts.rules) {
    if (r.name == "allocation_idle") {
      EXPECT_EQ(r.for_s, 4 * 3600);
    }
  }
  for (const char* bad : {"action = \"kill\"\n", "after = \"0s\"\n", "threshold = 101\n",
                          "[idle_reclaim.qos]\ndev = \"later\"\n"}) {
    std::string config = writeConfig(std::string("[idle_reclaim]\n") + bad);
    s = readControllerSettings(config);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("idle_reclaim."), std::string::npos)
        << s.status().message();
    Child child = spawn({"--config", config, "--once"});
    EXPECT_EQ(waitExit(child), 2) << bad;
  }
}

// [ha] asks for several controllers on one database; SQLite serves one only, and says so.
TEST_F(GpooldTest, HaRefusesASqliteStoreWithAClearMessage) {
  std::string config = writeConfig("[ha]\nenabled = true\n");
  Result<ControllerSettings> s = readControllerSettings(config);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(
      s.status().message().find("key 'ha.enabled': high availability needs a PostgreSQL store, and "
                                "controller.store is the SQLite file '" +
                                db_ + "'"),
      std::string::npos)
      << s.status().message();
  Child child = spawn({"--config", config});
  EXPECT_EQ(waitExit(child), 2);
}

// Reads the child's stdout until a line starting with `prefix` (returned) or its end ("").
std::string readUntil(Child& child, const std::string& prefix) {
  while (true) {
    std::string line = readLine(child.out);
    if (line.empty() && feof(child.out)) return "";
    if (line.rfind(prefix, 0) == 0) return line;
  }
}

// gpoold on a real PostgreSQL server (started per test), whose store holds node gpu-01 and user
// alice of group ml.
class GpooldOnPostgresTest : public GpooldTest {
 protected:
  void SetUp() override {
    auto pg = store::testing::PgServer::start();
    ASSERT_TRUE(pg.ok()) << pg.status().toString();
    pg_ = std::move(pg).value();
    auto st = store::PostgresStore::open({pg_->conninfo(), 2});
    ASSERT_TRUE(st.ok()) << st.status().toString();
    ASSERT_TRUE(store::saveApiNode(**st, testing::makeNode("gpu-01", 2)).isOk());
    testing::addUser(**st, "alice", 1001, {"ml"});
  }
  std::unique_ptr<store::testing::PgServer> pg_;
};

// Two gpoold processes on one real PostgreSQL server with [ha]: one leads, the other is a
// standby that answers 503 naming the leader; the leader SIGKILLed, the standby takes the lease
// once it lapses and serves what the leader acknowledged; a leader paused past its lease is
// deposed, its write refused, and it exits when it wakes.
class GpooldHaTest : public GpooldOnPostgresTest {
 protected:
  std::string haConfig(const std::string& name) {
    std::string path = dir_.path() + "/" + name + ".toml";
    std::ofstream(path) << "[controller]\nstore = \"" << pg_->conninfo() << "\"\n"
                        << "socket = \"" << socket(name) << "\"\nallow_root_jobs = true\n"
                        << "[ha]\nenabled = true\nlease = \"1s\"\n[log]\nlevel = \"warn\"\n";
    return path;
  }
  std::string socket(const std::string& name) { return dir_.path() + "/" + name + ".sock"; }
  Result<net::Response> submit(const std::string& name) {
    net::HttpClient client(net::ClientEndpoint::unixSocket(socket(name)), std::chrono::seconds(10));
    return client.post("/v1/jobs?group=ml", api::toJson(testing::makeSpec(500)).dump());
  }
  size_t jobCount(const std::string& name) {
    net::HttpClient client(net::ClientEndpoint::unixSocket(socket(name)), std::chrono::seconds(10));
    auto listed = client.get("/v1/jobs?limit=100");
    EXPECT_TRUE(listed.ok() && listed->status == 200);
    return listed.ok() ? nlohmann::json::parse(listed->body)["jobs"].size() : 0;
  }
};

TEST_F(GpooldHaTest, StandbyRedirectsAndTakesOverWhenTheLeaderIsKilled) {
  Child a = spawn({"--config", haConfig("a")});
  ASSERT_EQ(readLine(a.out), "standby");
  std::string a_leads = readUntil(a, "leader ");
  ASSERT_FALSE(a_leads.empty());
  ASSERT_EQ(readLine(a.out), "ready");
  Child b = spawn({"--config", haConfig("b")});
  ASSERT_EQ(readLine(b.out), "standby");

  auto first = submit("a");
  ASSERT_TRUE(first.ok()) << first.status().toString();
  ASSERT_EQ(first->status, 201) << first->body;
  // The standby neither reads nor writes: 503, naming the leader's address once it has read
  // the lease (right after "standby" it may not have yet: "no controller leads yet").
  auto redirected = submit("b");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (redirected.ok() && !redirected->header("Gpool-Leader") &&
         std::chrono::steady_clock::now() < deadline) {
    EXPECT_EQ(redirected->status, 503) << redirected->body;
    redirected = submit("b");
  }
  ASSERT_TRUE(redirected.ok()) << redirected.status().toString();
  EXPECT_EQ(redirected->status, 503) << redirected->body;
  EXPECT_EQ(redirected->header("Gpool-Leader").value_or(""), socket("a"));
  EXPECT_NE(redirected->body.find("the leader is at " + socket("a")), std::string::npos)
      << redirected->body;

  kill(a.pid, SIGKILL);
  auto killed = std::chrono::steady_clock::now();
  EXPECT_EQ(waitExit(a), 128 + SIGKILL);
  std::string b_leads = readUntil(b, "leader ");
  ASSERT_FALSE(b_leads.empty());
  auto took = std::chrono::steady_clock::now() - killed;
  ASSERT_EQ(readLine(b.out), "ready");
  std::cout << "takeover after SIGKILL (lease 1 s): "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
  EXPECT_GT(std::stoll(b_leads.substr(7)), std::stoll(a_leads.substr(7)));
  EXPECT_EQ(jobCount("b"), 1u);  // the acknowledged job, once
  auto second = submit("b");
  ASSERT_TRUE(second.ok()) << second.status().toString();
  EXPECT_EQ(second->status, 201) << second->body;
  EXPECT_EQ(jobCount("b"), 2u);
  kill(b.pid, SIGTERM);
  EXPECT_EQ(waitExit(b), 0);
}

TEST_F(GpooldHaTest, LeaderPausedPastItsLeaseIsDeposedAndItsWriteRefused) {
  Child a = spawn({"--config", haConfig("a")});
  ASSERT_FALSE(readUntil(a, "ready").empty());
  Child b = spawn({"--config", haConfig("b")});
  ASSERT_EQ(readLine(b.out), "standby");
  // A stops (a long pause, or cut off from the database): its lease lapses, B takes over.
  kill(a.pid, SIGSTOP);
  ASSERT_FALSE(readUntil(b, "ready").empty());
  // A wakes still believing it leads, and a client's write reaches it before its renewal
  // finds the lease gone: the database refuses it (or A has already exited).
  kill(a.pid, SIGCONT);
  auto late = submit("a");
  if (late.ok()) {
    EXPECT_EQ(late->status, 503) << late->body;
  }
  EXPECT_EQ(waitExit(a), 1);  // deposed: exits for its service manager to restart it
  EXPECT_EQ(jobCount("b"), 0u);
  kill(b.pid, SIGTERM);
  EXPECT_EQ(waitExit(b), 0);
}

// A clean stop hands the lease over at once instead of letting it lapse.
TEST_F(GpooldHaTest, SigtermReleasesTheLeaseToTheStandby) {
  Child a = spawn({"--config", haConfig("a")});
  ASSERT_FALSE(readUntil(a, "ready").empty());
  Child b = spawn({"--config", haConfig("b")});
  ASSERT_EQ(readLine(b.out), "standby");
  kill(a.pid, SIGTERM);
  EXPECT_EQ(waitExit(a), 0);
  ASSERT_FALSE(readUntil(b, "ready").empty());
  kill(b.pid, SIGTERM);
  EXPECT_EQ(waitExit(b), 0);
}

// A PostgreSQL store that refuses writes is an expected condition, as a full SQLite file is
// (issue 19 defect 9): gpoold answers 503 with Retry-After naming it, and nothing is half
// written. Read-only for real: the server's default_transaction_read_only turned on and its
// configuration reloaded, so every write of gpoold's open connections gets SQLSTATE 25006.
// A full disk (53100) is not caused for real: PostgreSQL stops (PANIC) when its WAL cannot be
// written, so a trigger raises that SQLSTATE from the submission's second statement (its
// event), and the job row inserted before it in the same transaction must go with it.
class GpooldPgTest : public GpooldOnPostgresTest {
 protected:
  void SetUp() override {
    GpooldOnPostgresTest::SetUp();
    if (HasFatalFailure()) return;
    auto admin = store::openPostgresConnection(pg_->conninfo());
    ASSERT_TRUE(admin.ok()) << admin.status().toString();
    admin_ = std::move(admin).value();
  }
  std::string config() {
    std::string path = dir_.path() + "/pg.toml";
    std::ofstream(path) << "[controller]\nstore = \"" << pg_->conninfo() << "\"\n"
                        << "socket = \"" << socket() << "\"\nallow_root_jobs = true\n"
                        << "[log]\nlevel = \"warn\"\n";
    return path;
  }
  std::string socket() { return dir_.path() + "/pg.sock"; }
  // A submission's answer; its status 0 when there was none.
  net::Response submit() {
    net::HttpClient client(net::ClientEndpoint::unixSocket(socket()), std::chrono::seconds(10));
    auto r = client.post("/v1/jobs?group=ml", api::toJson(testing::makeSpec(500)).dump());
    if (r.ok()) return std::move(r).value();
    ADD_FAILURE() << "no answer: " << r.status().toString();
    net::Response none;
    none.status = 0;
    return none;
  }
  // Submits until the answer is not `status` (at most 10 s); the last answer, and how many
  // were `status` before it.
  net::Response submitWhile(int status, int* count) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    net::Response r = submit();
    while (r.status == status && std::chrono::steady_clock::now() < deadline) {
      ++*count;
      r = submit();
    }
    return r;
  }
  int64_t count(const std::string& sql) {
    auto rows = admin_->query(sql, {});
    EXPECT_TRUE(rows.ok()) << rows.status().toString();
    return rows.ok() && !rows->empty() ? (*rows)[0].integer(0) : -1;
  }
  void expectRefused(const net::Response& r, const std::string& naming) {
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_EQ(r.header("Retry-After").value_or(""), "5") << r.body;
    EXPECT_NE(r.body.find(naming), std::string::npos) << r.body;
  }
  std::unique_ptr<store::SqlConnection> admin_;
};

TEST_F(GpooldPgTest, AStoreThatRefusesWritesAnswers503WithRetryAfterAndWritesNothing) {
  Child child = spawn({"--config", config()});
  ASSERT_EQ(readLine(child.out), "ready");
  ASSERT_EQ(submit().status, 201);
  int accepted = 1;

  // Read-only (25006): the reload reaches gpoold's connections at their next statement.
  ASSERT_TRUE(admin_->execScript("ALTER SYSTEM SET default_transaction_read_only = on").isOk());
  ASSERT_TRUE(admin_->execScript("SELECT pg_reload_conf()").isOk());
  net::Response refused = submitWhile(201, &accepted);
  expectRefused(refused, "the store is read-only");
  EXPECT_NE(refused.body.find("read-only transaction"), std::string::npos) << refused.body;
  expectRefused(submit(), "the store is read-only");
  // Nothing of the refused submissions: every job there has its one "submitted" event.
  ASSERT_TRUE(admin_->execScript("SET default_transaction_read_only = off").isOk());
  EXPECT_EQ(count("SELECT count(*) FROM jobs"), accepted);
  EXPECT_EQ(count("SELECT count(*) FROM job_events WHERE reason = 'submitted'"), accepted);

  ASSERT_TRUE(admin_->execScript("ALTER SYSTEM RESET default_transaction_read_only").isOk());
  ASSERT_TRUE(admin_->execScript("SELECT pg_reload_conf()").isOk());
  int refused_after = 0;
  EXPECT_EQ(submitWhile(503, &refused_after).status, 201);
  ++accepted;

  // Disk full (53100), raised by the event's insert after the job's row was inserted.
  ASSERT_TRUE(admin_
                  ->execScript("CREATE FUNCTION disk_full() RETURNS trigger LANGUAGE plpgsql AS "
                               "$$ BEGIN RAISE EXCEPTION 'could not extend file: No space left "
                               "on device' USING ERRCODE = 'disk_full'; END $$")
                  .isOk());
  ASSERT_TRUE(admin_
                  ->execScript("CREATE TRIGGER full_disk BEFORE INSERT ON job_events FOR EACH "
                               "ROW EXECUTE FUNCTION disk_full()")
                  .isOk());
  expectRefused(submit(), "the store is full");
  EXPECT_EQ(count("SELECT count(*) FROM jobs"), accepted);
  EXPECT_EQ(count("SELECT count(*) FROM job_events WHERE reason = 'submitted'"), accepted);
  ASSERT_TRUE(admin_->execScript("DROP TRIGGER full_disk ON job_events").isOk());
  EXPECT_EQ(submit().status, 201);
  EXPECT_EQ(count("SELECT count(*) FROM jobs"), accepted + 1);

  kill(child.pid, SIGTERM);
  EXPECT_EQ(waitExit(child), 0);
}

}  // namespace
}  // namespace gpool::controller
