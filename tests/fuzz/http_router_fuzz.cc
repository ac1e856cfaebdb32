// Fuzz target: raw HTTP bytes through gpoold's API as one connection would bring them
// (docs/controller.md): Beast's request parser with the server's limits, the target's decoding,
// authentication (kernel peer or bearer token), the router, and the real route handlers of
// gpoold (jobs, nodes, catalog, tokens, telemetry, the agent and watch upgrades, the dashboard's
// files) over a real SQLite store, without sockets (net::Server::answerBytes).
//
// Input: one byte choosing who sends the bytes, then the bytes of one connection (several
// pipelined requests are answered in turn):
//   0 alice (user, group ml)   1 bob (user, group vision)   2 carol (group admin of ml)
//   3 root (uid 0)             4 a local user without a record   5 a TLS peer (bearer tokens)
// In the bytes, "@TOKEN@" stands for alice's API token and "@JOIN@" for a join token, so that
// token requests get past authentication.
//
// The world (store, pool of two nodes, users, tokens) lives across inputs, as gpoold's does; a
// scheduling pass runs every 64 inputs so that submitted jobs get placed, and everything is
// rebuilt from scratch every 20,000 inputs so that the store stays small.
//
// Beyond "no crash, no undefined behaviour": no request gets a 500 (an internal error or a
// handler that threw), and every error response is a JSON error body {"error": {"code",
// "message"}} naming what is wrong.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "api/user.h"
#include "controller/agent_link.h"
#include "controller/api_routes.h"
#include "controller/api_tokens.h"
#include "controller/controller_fixture.h"
#include "controller/job_service.h"
#include "controller/live_feed.h"
#include "controller/node_registry.h"
#include "controller/scheduling_loop.h"
#include "controller/telemetry_history.h"
#include "controller/web_routes.h"
#include "fuzz/fuzz_util.h"
#include "net/server.h"
#include "store/api_codec.h"
#include "store/sqlite_store.h"

namespace gpool::fuzz {
namespace {

using controller::testing::makeNode;
using nlohmann::json;

struct Peer {
  const char* user;
  uint32_t uid;
};
constexpr Peer kPeers[] = {
    {"alice", 1001}, {"bob", 1002}, {"carol", 1003}, {"root", 0}, {"#4242", 4242}};
constexpr int kTokenPeer = 5;

// gpoold's objects, wired as gpoold_main.cc wires them, on a fresh store.
class World {
 public:
  explicit World(const std::string& dir) : dir_(dir) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = controller::testing::openStore(dir_ + "/gpool.db");
    registry_ = std::make_unique<controller::NodeRegistry>(*store_, clock_);
    check(registry_->registerNode(makeNode("gpu-01", 2)).status(), "register gpu-01");
    check(registry_->registerNode(makeNode("gpu-02", 4)).status(), "register gpu-02");
    for (const Peer& p : kPeers) {
      if (p.user[0] == '#') continue;
      api::User u;
      u.name = p.user;
      u.uid = p.uid;
      u.role = p.uid == 0                       ? api::Role::kAdmin
               : std::string(p.user) == "carol" ? api::Role::kGroupAdmin
                                                : api::Role::kUser;
      u.groups = {std::string(p.user) == "bob" ? "vision" : "ml"};
      check(store::saveApiUser(*store_, u), "save user");
    }
    for (const char* g : {"ml", "vision"}) {
      api::Group group;
      group.name = g;
      group.gid = 2000;
      check(store::saveApiGroup(*store_, group), "save group");
    }
    link_ = std::make_unique<controller::AgentLink>(*store_, *registry_, clock_,
                                                    controller::AgentLinkOptions{});
    loop_ = std::make_unique<controller::SchedulingLoop>(*store_, *registry_, *link_, clock_,
                                                         controller::LoopOptions{});
    link_->attach(*loop_);
    link_->attachTelemetry(telemetry_);
    check(loop_->recover(), "recover");
    jobs_ = std::make_unique<controller::JobService>(*store_, *registry_, clock_, loop_.get());
    feed_ = std::make_unique<controller::LiveFeed>(*store_, *registry_);
    tokens_ = std::make_unique<controller::StoreTokenVerifier>(*store_, clock_);

    net::Router router;
    controller::ApiRouteOptions options;
    options.clock = &clock_;
    options.user_usage = [this](const std::string& u) { return loop_->userUsage(u); };
    options.group_usage = [this](const std::string& g) { return loop_->groupUsage(g); };
    options.usage_half_life_s = 7 * 24 * 3600;
    options.telemetry = &telemetry_;
    check(controller::addApiRoutes(router, *store_, *jobs_, *registry_, options), "api routes");
    check(link_->addRoute(router), "agent route");
    check(feed_->addRoute(router), "watch route");
    check(controller::addWebRoutes(router, std::string(GPOOL_SOURCE_DIR) + "/web"), "web routes");
    net::ServerOptions server_options;
    server_options.token_verifier = tokens_.get();
    server_ = std::make_unique<net::Server>(server_options, std::move(router));

    user_token_ = createToken("/v1/tokens", R"({"name": "fuzz"})");
    join_token_ = createToken("/v1/join-tokens", R"({"name": "fuzz", "reusable": true})");
  }

  // Answers `bytes` as sent by peer `who` (see the top of the file).
  std::vector<net::Response> answer(int who, std::string bytes) {
    replaceAll(&bytes, "@TOKEN@", user_token_);
    replaceAll(&bytes, "@JOIN@", join_token_);
    if (who == kTokenPeer) return server_->answerBytes(bytes, net::PeerIdentity{}, true);
    net::PeerIdentity peer;
    peer.kind = net::PeerIdentity::Kind::kUnixPeer;
    peer.user = kPeers[who].user;
    peer.uid = kPeers[who].uid;
    peer.gid = kPeers[who].uid;
    peer.pid = ::getpid();
    return server_->answerBytes(bytes, peer, false);
  }

  void schedule() { (void)loop_->runOnce(); }

 private:
  static void check(const Status& s, std::string_view what) {
    if (!s.isOk()) fail(std::string(what) + ": " + s.toString());
  }

  static void replaceAll(std::string* s, std::string_view from, const std::string& to) {
    for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size())) {
      s->replace(at, from.size(), to);
    }
  }

  std::string createToken(const std::string& target, const std::string& body) {
    net::PeerIdentity root;
    root.kind = net::PeerIdentity::Kind::kUnixPeer;
    root.user = "alice";
    root.uid = 1001;
    if (target == "/v1/join-tokens") {
      root.user = "root";
      root.uid = 0;
    }
    std::string request = "POST " + target +
                          " HTTP/1.1\r\nHost: gpoold\r\nContent-Type: application/json\r\n"
                          "Content-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
    std::vector<net::Response> r = server_->answerBytes(request, root, false);
    if (r.size() != 1 || r[0].status != 201) {
      fail("cannot create a token at " + target + ": " + (r.empty() ? "" : r[0].body));
    }
    return json::parse(r[0].body).at("token").get<std::string>();
  }

  std::string dir_;
  SimClock clock_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<controller::NodeRegistry> registry_;
  controller::TelemetryHistory telemetry_;
  std::unique_ptr<controller::AgentLink> link_;
  std::unique_ptr<controller::SchedulingLoop> loop_;
  std::unique_ptr<controller::JobService> jobs_;
  std::unique_ptr<controller::LiveFeed> feed_;
  std::unique_ptr<controller::StoreTokenVerifier> tokens_;
  std::unique_ptr<net::Server> server_;
  std::string user_token_;
  std::string join_token_;
};

void checkResponse(const net::Response& r) {
  if (r.status >= 500 && r.status != 503) {
    fail("status " + std::to_string(r.status) + ": " + r.body);
  }
  if (r.status >= 400) {
    json body = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (!body.is_object() || !body.contains("error") || !body["error"].is_object() ||
        !body["error"].contains("code") || !body["error"].contains("message") ||
        !body["error"]["message"].is_string() ||
        body["error"]["message"].get<std::string>().empty()) {
      fail("error response " + std::to_string(r.status) + " without a JSON error body: " + r.body);
    }
  }
}

}  // namespace
}  // namespace gpool::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The handlers log refusals and changes; only errors are worth a line among millions of runs.
  spdlog::set_level(spdlog::level::err);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpool::fuzz;
  static std::unique_ptr<World> world;
  static uint64_t runs = 0;
  if (size == 0) return 0;
  if (world == nullptr || runs % 20000 == 0) {
    world.reset();
    world = std::make_unique<World>(scratchDir() + "/world");
  }
  ++runs;
  const int who = data[0] % 6;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (const gpool::net::Response& r : world->answer(who, std::move(bytes))) {
    checkResponse(r);
  }
  if (runs % 64 == 0) world->schedule();
  return 0;
}
