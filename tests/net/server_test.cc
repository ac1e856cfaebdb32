#include "net/server.h"

#include <arpa/inet.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "controller/security_util.h"
#include "net/client.h"
#include "net_test_util.h"
#include "plain_http.h"

namespace gpool::net {
namespace {

using testing::TempDir;
using testing::TestCerts;
using testing::Waiter;

nlohmann::json identityJson(const Request& r) {
  return {{"kind", static_cast<int>(r.peer.kind)},
          {"uid", r.peer.uid},
          {"gid", r.peer.gid},
          {"pid", r.peer.pid},
          {"user", r.peer.user},
          {"token_id", r.peer.token_id},
          {"roles", r.peer.roles}};
}

Router testRouter() {
  Router r;
  EXPECT_TRUE(r.add(Method::kGet, "/v1/whoami", [](const Request& req) {
    return Response::json(200, identityJson(req).dump());
  }));
  EXPECT_TRUE(r.add(
      Method::kGet, "/v1/health",
      [](const Request&) { return Response::json(200, R"({"ok":true})"); },
      RouteOptions{.allow_anonymous = true}));
  EXPECT_TRUE(r.add(Method::kPost, "/v1/echo", [](const Request& req) {
    nlohmann::json j{{"body", req.body}, {"query", req.queryParam("q").value_or("")}};
    return Response::json(201, j.dump());
  }));
  EXPECT_TRUE(r.add(Method::kGet, "/v1/jobs/{id}", [](const Request& req) {
    return Response::json(200, nlohmann::json{{"id", req.pathParam("id")}}.dump());
  }));
  EXPECT_TRUE(r.add(Method::kDelete, "/v1/jobs/{id}", [](const Request& req) {
    if (req.pathParam("id") == "404") return Response::error(Status::notFound("job 404"));
    return Response::json(200, "{}");
  }));
  EXPECT_TRUE(r.add(Method::kGet, "/v1/boom",
                    [](const Request&) -> Response { throw std::runtime_error("handler bug"); }));
  return r;
}

std::string errorCode(const Response& r) {
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("error")) return "<no error body>";
  return j["error"]["code"].get<std::string>();
}

class UnixServerTest : public ::testing::Test {
 public:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    options_.unix_socket_path = dir_.file("api.sock");
    options_.max_body_bytes = 4096;
    options_.max_header_bytes = 2048;
  }
  void startServer(Router router = testRouter()) {
    server_ = std::make_unique<Server>(options_, std::move(router));
    ASSERT_TRUE(server_->start());
  }
  HttpClient client() { return HttpClient(ClientEndpoint::unixSocket(options_.unix_socket_path)); }

  TempDir dir_;
  ServerOptions options_;
  std::unique_ptr<Server> server_;
};

TEST_F(UnixServerTest, PeerCredentialsComeFromTheKernel) {
  startServer();
  HttpClient c = client();
  auto r = c.get("/v1/whoami");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->status, 200);
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["kind"], static_cast<int>(PeerIdentity::Kind::kUnixPeer));
  EXPECT_EQ(j["uid"], getuid());
  EXPECT_EQ(j["gid"], getgid());
  EXPECT_EQ(j["pid"], getpid());
  EXPECT_EQ(j["user"], userNameForUid(getuid()));
  EXPECT_TRUE(r->header("X-Request-Id").has_value());
  struct stat st {};
  ASSERT_EQ(::stat(options_.unix_socket_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
}

// Connects as a second, unprivileged user (created with useradd when missing) from a forked
// child and checks that the server sees that user's uid, not ours.
TEST_F(UnixServerTest, SecondUidIsIdentifiedByTheKernel) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch uid";
  const char* kUser = "gpoolnettest";
  if (getpwnam(kUser) == nullptr) {
    std::string cmd = std::string("useradd --system --no-create-home --shell /usr/sbin/nologin ") +
                      kUser + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0 || getpwnam(kUser) == nullptr) {
      GTEST_SKIP() << "cannot create test user " << kUser;
    }
  }
  struct passwd* pw = getpwnam(kUser);
  ASSERT_NE(pw, nullptr);
  const uid_t uid = pw->pw_uid;
  const gid_t gid = pw->pw_gid;
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  startServer();

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string path = options_.unix_socket_path;
  const std::string request = "GET /v1/whoami HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) _exit(2);
    std::string reply = testing::rawUnixExchange(path, request);
    if (::write(fds[1], reply.data(), reply.size()) < 0) _exit(3);
    _exit(reply.empty() ? 4 : 0);
  }
  ::close(fds[1]);
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;)
    reply.append(buf, n);
  ::close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus));
  ASSERT_EQ(WEXITSTATUS(wstatus), 0) << reply;
  auto body = nlohmann::json::parse(reply.substr(reply.find("\r\n\r\n") + 4));
  EXPECT_EQ(body["uid"], uid);
  EXPECT_EQ(body["gid"], gid);
  EXPECT_EQ(body["pid"], child);
  EXPECT_EQ(body["user"], kUser);
}

TEST_F(UnixServerTest, RoutesParamsQueryAndBody) {
  startServer();
  HttpClient c = client();
  auto r = c.get("/v1/jobs/job%2042");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(nlohmann::json::parse(r->body)["id"], "job 42");
  r = c.post("/v1/echo?q=a%26b", R"({"x":1})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 201);
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["body"], R"({"x":1})");
  EXPECT_EQ(j["query"], "a&b");
  r = c.del("/v1/jobs/404");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(errorCode(*r), "not_found");
}

TEST_F(UnixServerTest, KeepAliveReusesOneConnection) {
  startServer();
  HttpClient c = client();
  for (int i = 0; i < 20; ++i) {
    auto r = c.get("/v1/jobs/" + std::to_string(i));
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->status, 200);
  }
  EXPECT_EQ(c.connectionsOpened(), 1u);
  // The counter moves after each response is written, so read it once the server has stopped.
  server_->stop();
  EXPECT_EQ(server_->requestsServed(), 20u);
}

// Responses larger than the client's read buffer (64 KiB) arrive whole, and the bytes of one
// never leak into the next on a kept connection: sizes straddle the buffer and alternate with
// tiny answers.
TEST_F(UnixServerTest, LargeResponsesArriveWholeOnAKeptConnection) {
  Router router = testRouter();
  ASSERT_TRUE(router.add(Method::kGet, "/v1/blob/{n}", [](const Request& req) {
    const size_t n = std::stoul(req.pathParam("n"));
    std::string body(n, '\0');
    for (size_t i = 0; i < n; ++i)
      body[i] = static_cast<char>('a' + (i * 7 + n) % 26);
    return Response::json(200, std::move(body));
  }));
  startServer(std::move(router));
  HttpClient c = client();
  for (size_t n : {size_t{1}, size_t{65535}, size_t{65536}, size_t{65537}, size_t{200000},
                   size_t{3} << 20, size_t{35000}}) {
    SCOPED_TRACE(n);
    auto r = c.get("/v1/blob/" + std::to_string(n));
    ASSERT_TRUE(r.ok()) << r.status().toString();
    ASSERT_EQ(r->status, 200);
    ASSERT_EQ(r->body.size(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i)
      if (r->body[i] != static_cast<char>('a' + (i * 7 + n) % 26)) ++wrong;
    EXPECT_EQ(wrong, 0u);
    auto small = c.get("/v1/jobs/after-" + std::to_string(n));
    ASSERT_TRUE(small.ok());
    EXPECT_EQ(nlohmann::json::parse(small->body)["id"], "after-" + std::to_string(n));
  }
  EXPECT_EQ(c.connectionsOpened(), 1u);
}

TEST_F(UnixServerTest, UnknownPathIs404AndWrongMethodIs405) {
  startServer();
  HttpClient c = client();
  auto r = c.get("/v1/nothing/here");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(errorCode(*r), "not_found");
  r = c.request(Method::kPut, "/v1/jobs/3");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(errorCode(*r), "method_not_allowed");
  EXPECT_EQ(r->header("Allow"), "GET, DELETE");
  // A method token nobody knows is also a 405 on a known path.
  std::string reply =
      testing::rawUnixExchange(options_.unix_socket_path,
                               "BREW /v1/jobs/3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 405", 0), 0u) << reply;
}

TEST_F(UnixServerTest, MalformedRequestsAre400) {
  startServer();
  std::string reply =
      testing::rawUnixExchange(options_.unix_socket_path, "this is not http\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  EXPECT_NE(reply.find("invalid_argument"), std::string::npos);
  reply =
      testing::rawUnixExchange(options_.unix_socket_path,
                               "GET /v1/jobs/%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  reply =
      testing::rawUnixExchange(options_.unix_socket_path,
                               "POST /v1/echo HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 400", 0), 0u) << reply;
  // The server is still fine.
  auto r = client().get("/v1/jobs/1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST_F(UnixServerTest, OversizeBodyIs413WithMessage) {
  startServer();
  HttpClient c = client();
  auto r = c.post("/v1/echo", std::string(64 * 1024, 'x'));
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->status, 413);
  EXPECT_EQ(errorCode(*r), "payload_too_large");
  EXPECT_NE(r->body.find("4096"), std::string::npos);
  // Exactly at the limit is fine, and the client recovers on a new connection.
  r = c.post("/v1/echo", std::string(4096, 'y'));
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->status, 201);
}

TEST_F(UnixServerTest, OversizeHeadersAre431) {
  startServer();
  HttpClient c = client();
  auto r = c.request(Method::kGet, "/v1/jobs/1", "", {{"X-Big", std::string(4096, 'h')}});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->status, 431);
  EXPECT_EQ(errorCode(*r), "headers_too_large");
}

TEST_F(UnixServerTest, HandlerExceptionIs500AndServerKeepsServing) {
  startServer();
  HttpClient c = client();
  auto r = c.get("/v1/boom");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(errorCode(*r), "internal");
  auto id = r->header("X-Request-Id");
  ASSERT_TRUE(id.has_value());
  EXPECT_NE(r->body.find(*id), std::string::npos);  // the logged id is in the message
  EXPECT_EQ(server_->handlerExceptions(), 1u);
  r = c.get("/v1/jobs/5");  // same connection still works
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(c.connectionsOpened(), 1u);
}

// answerBytes (the entry of the fuzz targets, tests/fuzz) answers what one connection would:
// pipelined requests in turn until one closes, the server's limits, malformed and incomplete
// requests, authentication, handler exceptions. The server is never started.
TEST_F(UnixServerTest, AnswerBytesAnswersLikeAConnection) {
  Server server(options_, testRouter());
  PeerIdentity alice;
  alice.kind = PeerIdentity::Kind::kUnixPeer;
  alice.user = "alice";
  alice.uid = 1001;
  std::vector<Response> r = server.answerBytes(
      "GET /v1/whoami HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /v1/echo?q=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
      "GET /v1/jobs/7 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
      "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n",
      alice, false);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(r[0].body)["user"], "alice");
  EXPECT_EQ(r[1].status, 201);
  EXPECT_EQ(nlohmann::json::parse(r[1].body), (nlohmann::json{{"body", "hi"}, {"query", "1"}}));
  EXPECT_EQ(nlohmann::json::parse(r[2].body)["id"], "7");

  // An incomplete request gets no answer, as from a peer that hung up; a malformed one a 400
  // that ends the connection.
  EXPECT_TRUE(server.answerBytes("GET /v1/whoami HTTP/1.1\r\nHost: x\r\n", alice, false).empty());
  EXPECT_TRUE(
      server.answerBytes("POST /v1/echo HTTP/1.1\r\nContent-Length: 9\r\n\r\nhi", alice, false)
          .empty());
  r = server.answerBytes(
      "GET /v1/health HTTP/1.1\r\n\r\nnot http\r\n\r\nGET /v1/health HTTP/1.1\r\n\r\n", alice,
      false);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].status, 200);
  EXPECT_EQ(r[1].status, 400);
  EXPECT_EQ(errorCode(r[1]), "invalid_argument");
  r = server.answerBytes("GET /v1/jobs/%zz HTTP/1.1\r\n\r\n", alice, false);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 400);

  // The limits of the server's options (4096-byte bodies, 2048 bytes of headers).
  r = server.answerBytes(
      "POST /v1/echo HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'x'), alice,
      false);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 413);
  r = server.answerBytes("GET /v1/health HTTP/1.1\r\nX-Big: " + std::string(3000, 'h') + "\r\n\r\n",
                         alice, false);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 431);

  // A token listener's peer without a token reaches anonymous routes only.
  r = server.answerBytes("GET /v1/whoami HTTP/1.1\r\n\r\nGET /v1/health HTTP/1.1\r\n\r\n",
                         PeerIdentity{}, true);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].status, 401);
  EXPECT_EQ(r[0].header("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(r[1].status, 200);

  // A handler exception is a 500, counted like a connection's.
  r = server.answerBytes("GET /v1/boom HTTP/1.1\r\n\r\n", alice, false);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, 500);
  EXPECT_EQ(server.handlerExceptions(), 1u);
}

TEST_F(UnixServerTest, ConcurrentClients) {
  options_.threads = 4;
  startServer();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      HttpClient c = client();
      for (int i = 0; i < 25; ++i) {
        auto r = c.get("/v1/jobs/" + std::to_string(t * 100 + i));
        if (r.ok() && r->status == 200 &&
            nlohmann::json::parse(r->body)["id"] == std::to_string(t * 100 + i)) {
          ok.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(ok.load(), 200);
}

// A request in progress when stop() is called is answered (with Connection: close), whether its
// handler runs on an I/O thread or on the blocking pool.
void stopLetsRequestInProgressFinish(UnixServerTest& t, bool blocking) {
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> release_f = release.get_future().share();
  Router r;
  ASSERT_TRUE(r.add(
      Method::kGet, "/slow",
      [&](const Request&) {
        entered.set_value();
        release_f.wait();
        return Response::json(200, R"({"done":true})");
      },
      RouteOptions{.blocking = blocking}));
  t.startServer(std::move(r));
  auto reply = std::async(std::launch::async, [&] { return t.client().get("/slow"); });
  entered.get_future().wait();
  // An idle connection must not hold up the stop: the server closes it, which also tells this
  // thread that the stop has begun before the slow handler is released.
  int idle_fd = testing::rawUnixConnect(t.options_.unix_socket_path);
  ASSERT_GE(idle_fd, 0);
  auto stopped = std::async(std::launch::async, [&] { t.server_->stop(); });
  char ch;
  while (::read(idle_fd, &ch, 1) > 0) {
  }
  ::close(idle_fd);
  release.set_value();
  auto res = reply.get();
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->header("Connection"), "close");
  stopped.get();
  EXPECT_EQ(t.server_->openConnections(), 0u);
  struct stat st {};
  EXPECT_NE(::stat(t.options_.unix_socket_path.c_str(), &st), 0);  // socket file removed
  EXPECT_FALSE(t.client().get("/slow").ok());
}

TEST_F(UnixServerTest, StopLetsRequestInProgressFinish) {
  stopLetsRequestInProgressFinish(*this, /*blocking=*/false);
}

TEST_F(UnixServerTest, StopLetsBlockingRequestInProgressFinish) {
  stopLetsRequestInProgressFinish(*this, /*blocking=*/true);
}

// A blocking route's handler waits on the blocking pool, not on the one I/O thread: another
// request is answered meanwhile. With the handler on the I/O thread the second request would
// wait for it (the client's timeout turns that into a failure here rather than a hang).
TEST_F(UnixServerTest, BlockingRoutesDoNotHoldTheIoThreads) {
  options_.threads = 1;
  std::promise<void> entered;
  std::promise<void> release;
  std::shared_future<void> release_f = release.get_future().share();
  Router r = testRouter();
  ASSERT_TRUE(r.add(
      Method::kPost, "/slow",
      [&](const Request& req) {
        entered.set_value();
        release_f.wait();
        return Response::json(201, nlohmann::json{{"body", req.body}}.dump());
      },
      RouteOptions{.blocking = true}));
  startServer(std::move(r));
  auto reply = std::async(std::launch::async, [&] { return client().post("/slow", "{}"); });
  entered.get_future().wait();
  HttpClient other(ClientEndpoint::unixSocket(options_.unix_socket_path),
                   std::chrono::milliseconds(20'000));
  for (int i = 0; i < 3; ++i) {
    auto r2 = other.get("/v1/jobs/" + std::to_string(i));
    ASSERT_TRUE(r2.ok()) << r2.status().toString();
    EXPECT_EQ(nlohmann::json::parse(r2->body)["id"], std::to_string(i));
  }
  release.set_value();
  auto res = reply.get();
  ASSERT_TRUE(res.ok()) << res.status().toString();
  EXPECT_EQ(res->status, 201);
  EXPECT_EQ(nlohmann::json::parse(res->body)["body"], "{}");
}

TEST_F(UnixServerTest, NegativeBlockingThreadsAreRefused) {
  options_.blocking_threads = -1;
  Server server(options_, testRouter());
  Status s = server.start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("blocking_threads"), std::string::npos) << s.toString();
}

TEST_F(UnixServerTest, StartFailures) {
  startServer();
  // A live server owns the socket.
  Server second(options_, testRouter());
  EXPECT_EQ(second.start().code(), StatusCode::kIoError);
  server_->stop();
  // A stale socket file (no server behind it) is replaced.
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", options_.unix_socket_path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
  Server third(options_, testRouter());
  EXPECT_TRUE(third.start());
  third.stop();

  ServerOptions none;
  EXPECT_EQ(Server(none, Router{}).start().code(), StatusCode::kInvalidArgument);
  ServerOptions tls_without_cert;
  tls_without_cert.tcp_port = 0;
  InMemoryTokenStore tokens;
  tls_without_cert.token_verifier = &tokens;
  EXPECT_EQ(Server(tls_without_cert, Router{}).start().code(), StatusCode::kInvalidArgument);
  tls_without_cert.tls_cert_file = dir_.file("missing.pem");
  tls_without_cert.tls_key_file = dir_.file("missing.key");
  Status s = Server(tls_without_cert, Router{}).start();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("missing.pem"), std::string::npos);
}

// The abuse limits (ServerOptions::read_timeout, max_connections_per_user): a second uid may
// hold two connections, the third gets 503 naming the limit while root is still served; a
// request dripped a byte at a time is cut after read_timeout although it never goes quiet for
// that long, while an idle keep-alive connection waits its idle_timeout.
TEST_F(UnixServerTest, PerUserConnectionLimitAndTheWholeRequestDeadline) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to connect as another uid";
  controller::testing::UnixUser user;
  std::string why = controller::testing::ensureUnixUser("gpsec-user", &user);
  if (!why.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);
  options_.max_connections_per_user = 2;
  options_.read_timeout = std::chrono::milliseconds(300);
  options_.idle_timeout = std::chrono::seconds(30);
  startServer();
  const std::string& path = options_.unix_socket_path;
  int first = controller::testing::connectAs(user.uid, user.gid, path);
  int second = controller::testing::connectAs(user.uid, user.gid, path);
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  EXPECT_EQ(controller::testing::rawHttp(first, "GET", "/v1/whoami").status, 200);
  EXPECT_EQ(controller::testing::rawHttp(second, "GET", "/v1/whoami").status, 200);
  int third = controller::testing::connectAs(user.uid, user.gid, path);
  ASSERT_GE(third, 0);
  std::string answer;
  EXPECT_TRUE(controller::testing::closedWithin(third, std::chrono::seconds(10), &answer));
  EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
  EXPECT_NE(answer.find("max_connections_per_user"), std::string::npos) << answer;
  ::close(third);
  EXPECT_EQ(server_->connectionsRefused(), 1u);
  auto root = client().get("/v1/whoami");  // root: never limited
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(root->status, 200);

  // `second` drips a request: cut after read_timeout, although a byte comes every 50 ms.
  ASSERT_EQ(::send(second, "GET /v1/whoami HTTP/1.1\r\nX: ", 29, MSG_NOSIGNAL), 29);
  bool cut = false;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       !cut && std::chrono::steady_clock::now() < until;) {
    cut = ::send(second, "a", 1, MSG_NOSIGNAL) != 1 ||
          controller::testing::closedWithin(second, std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(cut);
  ::close(second);
  // `first` sat idle meanwhile, longer than read_timeout: still open, still served.
  EXPECT_EQ(controller::testing::rawHttp(first, "GET", "/v1/whoami").status, 200);
  // The cut connection's place came back.
  int again = controller::testing::connectAs(user.uid, user.gid, path);
  bool served = false;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       !served && std::chrono::steady_clock::now() < until;) {
    served = controller::testing::rawHttp(again, "GET", "/v1/whoami").status == 200;
    if (!served) {
      ::close(again);
      again = controller::testing::connectAs(user.uid, user.gid, path);
    }
  }
  EXPECT_TRUE(served);
  ::close(again);
  ::close(first);
}

// A TCP connection to 127.0.0.1:`port` (or -1).
int tcpConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// max_connections_per_address on a TCP listener: one address holds two connections, the third
// gets 503; a connection upgraded to a route marked exempt_from_limits (the agents' link) gives
// its place back, so users of the same address cannot crowd an agent out.
TEST(ServerLimitsTest, PerAddressLimitAndAnExemptUpgrade) {
  InMemoryTokenStore tokens;
  ServerOptions options;
  options.http_port = 0;
  options.token_verifier = &tokens;
  options.max_connections_per_address = 2;
  Router router = testRouter();
  WebSocketHandler ws;
  ASSERT_TRUE(router.addWebSocket(
      "/v1/agentish", ws, RouteOptions{.allow_anonymous = true, .exempt_from_limits = true}));
  Server server(options, std::move(router));
  ASSERT_TRUE(server.start());
  const int port = server.httpPort();
  int agent = tcpConnect(port);
  ASSERT_GE(agent, 0);
  const std::string upgrade =
      "GET /v1/agentish HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
  ASSERT_EQ(::send(agent, upgrade.data(), upgrade.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(upgrade.size()));
  std::string head;
  char c = 0;
  while (head.find("\r\n\r\n") == std::string::npos && ::recv(agent, &c, 1, 0) == 1)
    head += c;
  ASSERT_EQ(head.rfind("HTTP/1.1 101", 0), 0u) << head;
  // The upgraded agent no longer counts: two more connections fit, and are served.
  int a = tcpConnect(port);
  int b = tcpConnect(port);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  EXPECT_EQ(controller::testing::rawHttp(a, "GET", "/v1/health").status, 200);
  EXPECT_EQ(controller::testing::rawHttp(b, "GET", "/v1/health").status, 200);
  int over = tcpConnect(port);
  ASSERT_GE(over, 0);
  std::string answer;
  EXPECT_TRUE(controller::testing::closedWithin(over, std::chrono::seconds(10), &answer));
  EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
  EXPECT_NE(answer.find("max_connections_per_address"), std::string::npos) << answer;
  for (int fd : {agent, a, b, over})
    ::close(fd);
}

// A server that refuses a request before reading it (answers, then closes with the request
// unread: gpoold when too many refused connections are draining already, or any other server)
// leaves its answer in the client's receive buffer while the client's write of a large body
// fails. The client reads that answer instead of saying it could not send (issue 19: clients
// over a connection limit could not tell whether their submission was taken).
TEST(HttpClientTest, ReadsTheAnswerOfAServerThatClosedWhileTheRequestWasBeingSent) {
  TempDir dir;
  const std::string path = dir.file("early.sock");
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  std::thread server([listener] {
    int fd = ::accept(listener, nullptr, nullptr);
    if (fd < 0) return;
    const std::string answer =
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 7\r\n"
        "Connection: close\r\n\r\nrefused";
    (void)!::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
    ::close(fd);  // the request unread
  });
  HttpClient client(ClientEndpoint::unixSocket(path), std::chrono::seconds(20));
  // Far more than the socket's buffers hold: the write cannot finish before the close.
  auto r = client.request(Method::kPost, "/v1/jobs", std::string(4 << 20, ' '));
  server.join();
  ::close(listener);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->header("Retry-After").value_or(""), "5");
  EXPECT_EQ(r->body, "refused");
}

class TlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::makeTestCerts(dir_.path(), &certs_));
    options_.tcp_port = 0;
    options_.tls_cert_file = certs_.cert_file;
    options_.tls_key_file = certs_.key_file;
    options_.token_verifier = &tokens_;
    server_ = std::make_unique<Server>(options_, testRouter());
    ASSERT_TRUE(server_->start());
    ASSERT_GT(server_->tcpPort(), 0);
  }
  ClientEndpoint endpoint(std::string token) {
    return ClientEndpoint::tls("127.0.0.1", server_->tcpPort(), certs_.ca_file, std::move(token));
  }

  TempDir dir_;
  TestCerts certs_;
  InMemoryTokenStore tokens_;
  ServerOptions options_;
  std::unique_ptr<Server> server_;
};

TEST_F(TlsServerTest, TokenAcceptedRejectedRevoked) {
  auto token = tokens_.issue("alice", {"admin"});
  ASSERT_TRUE(token.ok());
  HttpClient c(endpoint(token->token));
  auto r = c.get("/v1/whoami");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["kind"], static_cast<int>(PeerIdentity::Kind::kToken));
  EXPECT_EQ(j["user"], "alice");
  EXPECT_EQ(j["token_id"], token->id);
  EXPECT_EQ(j["roles"], nlohmann::json::array({"admin"}));

  // No token.
  HttpClient anonymous(endpoint(""));
  r = anonymous.get("/v1/whoami");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(errorCode(*r), "unauthenticated");
  EXPECT_EQ(r->header("WWW-Authenticate"), "Bearer");
  // ...is fine on a route that allows it.
  r = anonymous.get("/v1/health");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);

  // A forged secret.
  std::string forged = token->token;
  forged.back() = forged.back() == 'A' ? 'B' : 'A';
  HttpClient bad(endpoint(forged));
  r = bad.get("/v1/whoami");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
  r = bad.get("/v1/health");  // a bad token is refused even where none is needed
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);

  // Revocation takes effect on the next request, even on a kept-alive connection.
  ASSERT_TRUE(tokens_.revoke(token->id));
  r = c.get("/v1/whoami");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 401);
  EXPECT_NE(r->body.find("revoked"), std::string::npos);
  EXPECT_EQ(c.connectionsOpened(), 1u);
}

TEST_F(TlsServerTest, ClientVerifiesTheServerCertificate) {
  auto token = tokens_.issue("alice");
  ASSERT_TRUE(token.ok());
  ClientEndpoint wrong_ca = endpoint(token->token);
  wrong_ca.ca_file = certs_.other_ca_file;
  auto r = HttpClient(wrong_ca).get("/v1/health");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);

  ClientEndpoint wrong_name = endpoint(token->token);
  wrong_name.server_name = "controller.example.org";
  r = HttpClient(wrong_name).get("/v1/health");
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);

  ClientEndpoint by_name = endpoint(token->token);
  by_name.host = "localhost";
  r = HttpClient(by_name).get("/v1/health");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->status, 200);
}

TEST_F(TlsServerTest, LimitsAndErrorsOverTls) {
  auto token = tokens_.issue("bob");
  ASSERT_TRUE(token.ok());
  HttpClient c(endpoint(token->token));
  auto r = c.post("/v1/echo", std::string(2 << 20, 'x'));
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->status, 413);
  r = c.get("/v1/boom");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 500);
  r = c.get("/v1/jobs/9");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST_F(TlsServerTest, PlainHttpOnTheTlsPortIsRefused) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->tcpPort()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  std::string req = "GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::string reply;
  char buf[1024];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;)
    reply.append(buf, n);
  ::close(fd);
  EXPECT_EQ(reply.find("HTTP/1.1 200"), std::string::npos);
  // A client that cannot connect at all gets kUnavailable, never a hang.
  ClientEndpoint nowhere = ClientEndpoint::unixSocket(dir_.file("no.sock"));
  EXPECT_EQ(HttpClient(nowhere).get("/").status().code(), StatusCode::kUnavailable);
  // And the TLS listener still serves.
  auto r = HttpClient(endpoint("")).get("/v1/health");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->status, 200);
}

// The plain-HTTP listener (http_port): the same bearer tokens as TLS, anonymous routes open,
// and a WebSocket upgrade may carry its token as ?access_token= (browsers cannot set headers),
// which the route then does not see; a plain request may not.
class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    options_.http_port = 0;
    options_.token_verifier = &tokens_;
    Router router = testRouter();
    WebSocketHandler ws;
    ws.accept = [this](const Request& req) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_user_ = req.peer.user;
      seen_query_ = req.query.size();
      return Status::ok();
    };
    ASSERT_TRUE(router.addWebSocket("/v1/ws", ws));
    server_ = std::make_unique<Server>(options_, std::move(router));
    ASSERT_TRUE(server_->start());
    ASSERT_GT(server_->httpPort(), 0);
    EXPECT_EQ(server_->tcpPort(), -1);
  }
  testing::PlainResponse get(const std::string& target,
                             std::vector<std::pair<std::string, std::string>> headers = {}) {
    return testing::plainHttp(server_->httpPort(), "GET", target, "", headers,
                              std::chrono::seconds(10));
  }
  static std::vector<std::pair<std::string, std::string>> upgradeHeaders() {
    return {{"Upgrade", "websocket"},
            {"Connection", "Upgrade"},
            {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
            {"Sec-WebSocket-Version", "13"}};
  }

  InMemoryTokenStore tokens_;
  ServerOptions options_;
  std::unique_ptr<Server> server_;
  std::mutex mu_;
  std::string seen_user_;
  size_t seen_query_ = 99;
};

TEST_F(HttpServerTest, BearerTokensAsOverTls) {
  auto token = tokens_.issue("alice");
  ASSERT_TRUE(token.ok());
  testing::PlainResponse r = get("/v1/whoami", {{"Authorization", "Bearer " + token->token}});
  ASSERT_EQ(r.status, 200) << r.error << r.body;
  EXPECT_EQ(nlohmann::json::parse(r.body)["user"], "alice");
  EXPECT_EQ(get("/v1/whoami").status, 401);
  EXPECT_EQ(get("/v1/health").status, 200);
  // A token in the query counts only for a WebSocket upgrade.
  EXPECT_EQ(get("/v1/whoami?access_token=" + token->token).status, 401);
}

TEST_F(HttpServerTest, WebSocketUpgradeTakesTheTokenFromTheQuery) {
  auto token = tokens_.issue("alice");
  ASSERT_TRUE(token.ok());
  testing::PlainResponse ok = get("/v1/ws?access_token=" + token->token, upgradeHeaders());
  EXPECT_EQ(ok.status, 101) << ok.error << ok.body;
  {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(seen_user_, "alice");
    EXPECT_EQ(seen_query_, 0u);  // consumed by the server, so routes that check their
                                 // parameters do not see it
  }
  EXPECT_EQ(get("/v1/ws?access_token=gpt.0123456789abcdef.bad", upgradeHeaders()).status, 401);
  EXPECT_EQ(get("/v1/ws", upgradeHeaders()).status, 401);
}

TEST(HttpServerStartTest, NeedsATokenVerifier) {
  ServerOptions options;
  options.http_port = 0;
  EXPECT_EQ(Server(options, Router{}).start().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpool::net
