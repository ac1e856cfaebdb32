#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "net/client.h"
#include "net/event_hub.h"
#include "net/server.h"
#include "net_test_util.h"

namespace gpool::net {
namespace {

using testing::TempDir;
using testing::Waiter;

// Collects what a WebSocketClient sees, for waiting on from the test thread.
struct ClientLog {
  Waiter waiter;
  std::vector<std::string> messages;
  std::vector<Status> disconnects;
  int connects = 0;

  WebSocketClientOptions options(ClientEndpoint ep, std::string target) {
    WebSocketClientOptions o;
    o.endpoint = std::move(ep);
    o.target = std::move(target);
    o.initial_backoff = std::chrono::milliseconds(10);
    o.max_backoff = std::chrono::milliseconds(100);
    o.connect_timeout = std::chrono::seconds(5);
    o.on_connect = [this] { waiter.update([&] { ++connects; }); };
    o.on_message = [this](std::string m) {
      waiter.update([&] { messages.push_back(std::move(m)); });
    };
    o.on_disconnect = [this](const Status& s) { waiter.update([&] { disconnects.push_back(s); }); };
    return o;
  }
  bool waitConnects(int n) {
    return waiter.waitFor([&] { return connects >= n; });
  }
  bool waitMessages(size_t n) {
    return waiter.waitFor([&] { return messages.size() >= n; });
  }
};

Router echoRouter() {
  Router r;
  WebSocketHandler h;
  h.on_message = [](const WebSocketConnectionPtr& c, std::string m) {
    if (m == "throw") throw std::runtime_error("on_message bug");
    c->send("echo:" + m + ":" + c->request().peer.user);
  };
  EXPECT_TRUE(r.addWebSocket("/v1/echo", std::move(h)));
  return r;
}

class WebSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    options_.unix_socket_path = dir_.file("ws.sock");
  }
  ClientEndpoint unixEndpoint() { return ClientEndpoint::unixSocket(options_.unix_socket_path); }

  TempDir dir_;
  ServerOptions options_;
};

TEST_F(WebSocketTest, EchoOverUnixSocket) {
  Server server(options_, echoRouter());
  ASSERT_TRUE(server.start());
  ClientLog log;
  WebSocketClient client(log.options(unixEndpoint(), "/v1/echo"));
  client.start();
  ASSERT_TRUE(log.waitConnects(1));
  EXPECT_TRUE(client.connected());
  ASSERT_TRUE(client.send("hello"));
  ASSERT_TRUE(client.send("world"));
  ASSERT_TRUE(log.waitMessages(2));
  std::string me = userNameForUid(getuid());
  EXPECT_EQ(log.messages[0], "echo:hello:" + me);
  EXPECT_EQ(log.messages[1], "echo:world:" + me);
  client.stop();
  EXPECT_FALSE(client.connected());
  EXPECT_FALSE(client.send("after stop"));
}

TEST_F(WebSocketTest, HandlerExceptionClosesOnlyThatConnection) {
  Server server(options_, echoRouter());
  ASSERT_TRUE(server.start());
  ClientLog log;
  WebSocketClient client(log.options(unixEndpoint(), "/v1/echo"));
  client.start();
  ASSERT_TRUE(log.waitConnects(1));
  ASSERT_TRUE(client.send("throw"));
  // The server closes with 1011; the client reconnects and works again.
  ASSERT_TRUE(log.waiter.waitFor([&] { return !log.disconnects.empty(); }));
  EXPECT_NE(log.disconnects[0].message().find("1011"), std::string::npos)
      << log.disconnects[0].toString();
  ASSERT_TRUE(log.waitConnects(2));
  ASSERT_TRUE(client.send("again"));
  ASSERT_TRUE(log.waitMessages(1));
  EXPECT_EQ(log.messages[0].rfind("echo:again:", 0), 0u);
}

TEST_F(WebSocketTest, UnknownWebSocketRouteIsRefused) {
  Server server(options_, echoRouter());
  ASSERT_TRUE(server.start());
  ClientLog log;
  WebSocketClient client(log.options(unixEndpoint(), "/v1/nope"));
  client.start();
  ASSERT_TRUE(log.waiter.waitFor([&] { return !log.disconnects.empty(); }));
  client.stop();
  EXPECT_EQ(log.disconnects[0].code(), StatusCode::kNotFound) << log.disconnects[0].toString();
  EXPECT_EQ(log.connects, 0);
}

TEST_F(WebSocketTest, BroadcastByTopic) {
  EventHub hub;
  Waiter opened;
  int open_count = 0;
  WebSocketHandler h = hub.handler();
  auto inner_open = h.on_open;
  h.on_open = [&, inner_open](const WebSocketConnectionPtr& c) {
    inner_open(c);
    opened.update([&] { ++open_count; });
  };
  Router r;
  ASSERT_TRUE(r.addWebSocket("/v1/events", std::move(h)));
  Server server(options_, std::move(r));
  ASSERT_TRUE(server.start());

  ClientLog jobs, nodes;
  WebSocketClient a(jobs.options(unixEndpoint(), "/v1/events?topics=jobs"));
  WebSocketClient b(nodes.options(unixEndpoint(), "/v1/events?topics=nodes"));
  a.start();
  b.start();
  ASSERT_TRUE(opened.waitFor([&] { return open_count == 2; }));
  EXPECT_EQ(hub.publish("jobs", R"({"id":1,"state":"R"})"), 1u);
  EXPECT_EQ(hub.publish("nodes", R"({"name":"gpu01"})"), 1u);
  ASSERT_TRUE(jobs.waitMessages(1));
  ASSERT_TRUE(nodes.waitMessages(1));
  auto j = nlohmann::json::parse(jobs.messages[0]);
  EXPECT_EQ(j["topic"], "jobs");
  EXPECT_EQ(j["data"]["state"], "R");
  // The nodes client's first message is the nodes event: it never saw the jobs one.
  EXPECT_EQ(nlohmann::json::parse(nodes.messages[0])["topic"], "nodes");

  // Subscribing later through a message; the acknowledgement says from when on it applies.
  ASSERT_TRUE(b.send(R"({"subscribe":["jobs"]})"));
  ASSERT_TRUE(nodes.waitMessages(2));
  EXPECT_EQ(nlohmann::json::parse(nodes.messages[1])["subscribed"],
            nlohmann::json::array({"jobs", "nodes"}));
  EXPECT_EQ(hub.publish("jobs", R"({"id":2})"), 2u);
  ASSERT_TRUE(nodes.waitMessages(3));
  EXPECT_EQ(nlohmann::json::parse(nodes.messages[2])["data"]["id"], 2);
  a.stop();
  b.stop();
}

// A client that completes the upgrade and then never reads: the server must drop it (close code
// 1008) instead of buffering without bound, and must not block the publisher.
TEST_F(WebSocketTest, SlowClientIsDropped) {
  options_.ws_max_queued_messages = 4;
  options_.ws_close_timeout = std::chrono::milliseconds(200);
  EventHub hub;
  Waiter w;
  int opened = 0;
  int closed_code = 0;
  std::string closed_reason;
  WebSocketHandler h = hub.handler();
  auto inner_open = h.on_open;
  auto inner_close = h.on_close;
  h.on_open = [&, inner_open](const WebSocketConnectionPtr& c) {
    inner_open(c);
    w.update([&] { ++opened; });
  };
  h.on_close = [&, inner_close](const WebSocketConnectionPtr& c, uint16_t code,
                                const std::string& reason) {
    inner_close(c, code, reason);
    w.update([&] {
      closed_code = code;
      closed_reason = reason;
    });
  };
  Router r;
  ASSERT_TRUE(r.addWebSocket("/v1/events", std::move(h)));
  Server server(options_, std::move(r));
  ASSERT_TRUE(server.start());

  int fd = testing::rawUnixConnect(options_.unix_socket_path);
  ASSERT_GE(fd, 0);
  std::string upgrade =
      "GET /v1/events?topics=jobs HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
      "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      "Sec-WebSocket-Version: 13\r\n\r\n";
  ASSERT_EQ(::write(fd, upgrade.data(), upgrade.size()), static_cast<ssize_t>(upgrade.size()));
  std::string head;
  char c;
  while (head.find("\r\n\r\n") == std::string::npos && ::read(fd, &c, 1) == 1)
    head.push_back(c);
  ASSERT_EQ(head.rfind("HTTP/1.1 101", 0), 0u) << head;
  ASSERT_TRUE(w.waitFor([&] { return opened == 1; }));

  std::string payload = "\"" + std::string(256 << 10, 'x') + "\"";
  int published = 0;
  while (hub.publish("jobs", payload) == 1 && published < 10'000)
    ++published;
  EXPECT_LT(published, 10'000);
  EXPECT_EQ(hub.droppedCount(), 1u);
  ASSERT_TRUE(w.waitFor([&] { return closed_code != 0; }));
  EXPECT_EQ(closed_code, kClosePolicy);
  EXPECT_NE(closed_reason.find("slow consumer"), std::string::npos);
  EXPECT_EQ(hub.connectionCount(), 0u);
  // The server really let go of the socket: reading drains to EOF.
  std::vector<char> sink(1 << 16);
  while (::read(fd, sink.data(), sink.size()) > 0) {
  }
  ::close(fd);
}

TEST_F(WebSocketTest, ClientReconnectsAfterServerRestart) {
  ClientLog log;
  auto server = std::make_unique<Server>(options_, echoRouter());
  ASSERT_TRUE(server->start());
  WebSocketClient client(log.options(unixEndpoint(), "/v1/echo"));
  client.start();
  ASSERT_TRUE(log.waitConnects(1));
  server->stop();
  ASSERT_TRUE(log.waiter.waitFor([&] { return !log.disconnects.empty(); }));
  // The server said goodbye with 1001 before going away.
  EXPECT_NE(log.disconnects[0].message().find("1001"), std::string::npos)
      << log.disconnects[0].toString();
  server = std::make_unique<Server>(options_, echoRouter());
  ASSERT_TRUE(server->start());
  ASSERT_TRUE(log.waitConnects(2));
  EXPECT_EQ(client.connectCount(), 2u);
  ASSERT_TRUE(client.send("back"));
  ASSERT_TRUE(log.waitMessages(1));
  EXPECT_EQ(log.messages[0].rfind("echo:back:", 0), 0u);
  client.stop();
}

// A router whose WebSocket routes all refuse the upgrade as a highly available controller's
// standby does (docs/ha.md): 503 naming the leader in the error message.
Router standbyRouter(const std::string& leader) {
  Router r;
  WebSocketHandler h;
  h.accept = [leader](const Request&) -> Status {
    return Status::unavailable("this controller is a standby; the leader is at " + leader);
  };
  EXPECT_TRUE(r.addWebSocket("/v1/echo", std::move(h)));
  return r;
}

TEST(LeaderAddressTest, NamedLeaderAndFindEndpoint) {
  EXPECT_EQ(namedLeader(503, std::string("https://ctl-b:8443"), ""), "https://ctl-b:8443");
  EXPECT_EQ(namedLeader(503, std::nullopt,
                        R"({"error":{"code":"unavailable","message":"this controller is a )"
                        R"(standby; the leader is at /run/a.sock"}})"),
            "/run/a.sock");
  EXPECT_EQ(namedLeader(503, std::nullopt, "no controller leads yet"), "");
  EXPECT_EQ(namedLeader(500, std::string("x:1"), ""), "");
  std::vector<ClientEndpoint> eps{ClientEndpoint::tls("ctl-a", 8443, "", ""),
                                  ClientEndpoint::tls("ctl-b", 8443, "", "")};
  EXPECT_EQ(findEndpoint(eps, "https://ctl-b:8443/"), 1u);
  EXPECT_EQ(findEndpoint(eps, "ctl-a:8443"), 0u);
  EXPECT_EQ(findEndpoint(eps, "ctl-c:8443"), std::string_view::npos);
  EXPECT_EQ(findEndpoint(eps, ""), std::string_view::npos);
  std::vector<ClientEndpoint> socks{ClientEndpoint::unixSocket("/run/a.sock"),
                                    ClientEndpoint::unixSocket("/run/b.sock")};
  EXPECT_EQ(findEndpoint(socks, "/run/b.sock"), 1u);
}

// Issue 25: a client that knows several controllers goes from a standby straight to the leader
// it names (not to the next address of the list, where nothing listens), and after the leader
// is gone, to whichever controller leads next.
TEST_F(WebSocketTest, ClientFollowsTheLeaderAStandbyNames) {
  const std::string standby_path = dir_.file("standby.sock");
  const std::string absent_path = dir_.file("absent.sock");  // nothing listens there
  const std::string leader_path = dir_.file("leader.sock");
  ServerOptions standby_options = options_;
  standby_options.unix_socket_path = standby_path;
  ServerOptions leader_options = options_;
  leader_options.unix_socket_path = leader_path;
  auto standby = std::make_unique<Server>(standby_options, standbyRouter(leader_path));
  ASSERT_TRUE(standby->start());
  auto leader = std::make_unique<Server>(leader_options, echoRouter());
  ASSERT_TRUE(leader->start());

  ClientLog log;
  WebSocketClientOptions o = log.options(ClientEndpoint::unixSocket(standby_path), "/v1/echo");
  o.alternates = {ClientEndpoint::unixSocket(absent_path), ClientEndpoint::unixSocket(leader_path)};
  WebSocketClient client(o);
  client.start();
  ASSERT_TRUE(log.waitConnects(1));
  std::vector<Status> refusals;
  log.waiter.waitFor([&] {  // a copy under the waiter's lock
    refusals = log.disconnects;
    return true;
  });
  // One refusal (the standby's), none from the address in between.
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(refusals[0].code(), StatusCode::kUnavailable);
  EXPECT_NE(refusals[0].message().find("HTTP 503"), std::string::npos) << refusals[0].toString();
  ASSERT_TRUE(client.send("one"));
  ASSERT_TRUE(log.waitMessages(1));

  // The leader dies; the standby takes over (a new server on its address).
  leader->stop();
  leader.reset();
  ASSERT_TRUE(log.waiter.waitFor([&] { return log.disconnects.size() >= 2; }));
  standby->stop();
  standby = std::make_unique<Server>(standby_options, echoRouter());
  ASSERT_TRUE(standby->start());
  ASSERT_TRUE(log.waitConnects(2));
  ASSERT_TRUE(client.send("two"));
  ASSERT_TRUE(log.waitMessages(2));
  EXPECT_EQ(log.messages[1].rfind("echo:two:", 0), 0u);
  client.stop();
}

TEST_F(WebSocketTest, TlsWithTokenAndRevocation) {
  testing::TestCerts certs;
  ASSERT_TRUE(testing::makeTestCerts(dir_.path(), &certs));
  InMemoryTokenStore tokens;
  auto token = tokens.issue("agent-gpu01");
  ASSERT_TRUE(token.ok());
  ServerOptions o;
  o.tcp_port = 0;
  o.tls_cert_file = certs.cert_file;
  o.tls_key_file = certs.key_file;
  o.token_verifier = &tokens;
  Server server(o, echoRouter());
  ASSERT_TRUE(server.start());
  auto ep = ClientEndpoint::tls("127.0.0.1", server.tcpPort(), certs.ca_file, token->token);

  ClientLog log;
  WebSocketClient client(log.options(ep, "/v1/echo"));
  client.start();
  ASSERT_TRUE(log.waitConnects(1));
  ASSERT_TRUE(client.send("hi"));
  ASSERT_TRUE(log.waitMessages(1));
  EXPECT_EQ(log.messages[0], "echo:hi:agent-gpu01");
  client.stop();

  ASSERT_TRUE(tokens.revoke(token->id));
  ClientLog refused;
  WebSocketClient again(refused.options(ep, "/v1/echo"));
  again.start();
  ASSERT_TRUE(refused.waiter.waitFor([&] { return !refused.disconnects.empty(); }));
  again.stop();
  EXPECT_EQ(refused.disconnects[0].code(), StatusCode::kUnauthenticated)
      << refused.disconnects[0].toString();
  EXPECT_EQ(refused.connects, 0);
}

}  // namespace
}  // namespace gpool::net
