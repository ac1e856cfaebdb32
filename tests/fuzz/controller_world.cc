#include "fuzz/controller_world.h"

#include <unistd.h>

#include <filesystem>
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

void check(const Status& s, std::string_view what) {
  if (!s.isOk()) fail(std::string(what) + ": " + s.toString());
}

void replaceAll(std::string* s, std::string_view from, const std::string& to) {
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, at + to.size())) {
    s->replace(at, from.size(), to);
  }
}

}  // namespace

World::World(const std::string& dir) : dir_(dir) {
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
  telemetry_ = std::make_unique<controller::TelemetryHistory>();
  link_ = std::make_unique<controller::AgentLink>(*store_, *registry_, clock_,
                                                  controller::AgentLinkOptions{});
  loop_ = std::make_unique<controller::SchedulingLoop>(*store_, *registry_, *link_, clock_,
                                                       controller::LoopOptions{});
  link_->attach(*loop_);
  link_->attachTelemetry(*telemetry_);
  check(loop_->recover(), "recover");
  jobs_ = std::make_unique<controller::JobService>(*store_, *registry_, clock_, loop_.get());
  feed_ = std::make_unique<controller::LiveFeed>(*store_, *registry_);
  tokens_ = std::make_unique<controller::StoreTokenVerifier>(*store_, clock_);

  controller::ApiRouteOptions options;
  options.clock = &clock_;
  options.user_usage = [this](const std::string& u) { return loop_->userUsage(u); };
  options.group_usage = [this](const std::string& g) { return loop_->groupUsage(g); };
  options.usage_half_life_s = 7 * 24 * 3600;
  options.telemetry = telemetry_.get();
  check(controller::addApiRoutes(router_, *store_, *jobs_, *registry_, options), "api routes");
  check(link_->addRoute(router_), "agent route");
  check(feed_->addRoute(router_), "watch route");
  check(controller::addWebRoutes(router_, std::string(GPOOL_SOURCE_DIR) + "/web"), "web routes");
  net::ServerOptions server_options;
  server_options.token_verifier = tokens_.get();
  server_ = std::make_unique<net::Server>(server_options, router_);

  user_token_ = createToken("/v1/tokens", R"({"name": "fuzz"})");
  join_token_ = createToken("/v1/join-tokens", R"({"name": "fuzz", "reusable": true})");
}

World::~World() = default;

net::PeerIdentity World::unixPeer(int who) {
  net::PeerIdentity peer;
  peer.kind = net::PeerIdentity::Kind::kUnixPeer;
  peer.user = kPeers[who].user;
  peer.uid = kPeers[who].uid;
  peer.gid = kPeers[who].uid;
  peer.pid = ::getpid();
  return peer;
}

std::vector<net::Response> World::answer(int who, std::string bytes) {
  replaceAll(&bytes, "@TOKEN@", user_token_);
  replaceAll(&bytes, "@JOIN@", join_token_);
  if (who == kTokenPeer) return server_->answerBytes(bytes, net::PeerIdentity{}, true);
  return server_->answerBytes(bytes, unixPeer(who), false);
}

void World::schedule() {
  (void)loop_->runOnce();
}

const net::WebSocketHandler& World::agentRoute() const {
  for (const net::Router::Route& r : router_.routes()) {
    if (r.is_websocket && r.pattern == "/v1/agent") return r.websocket;
  }
  fail("no /v1/agent route");
}

net::PeerIdentity World::joinTokenPeer() {
  Result<net::TokenIdentity> id = tokens_->verify(join_token_);
  if (!id.ok()) fail("the join token does not verify: " + id.status().toString());
  net::PeerIdentity peer;
  peer.kind = net::PeerIdentity::Kind::kToken;
  peer.user = id->user;
  peer.token_id = id->token_id;
  peer.roles = id->roles;
  return peer;
}

std::string World::createToken(const std::string& target, const std::string& body) {
  const bool join = target == "/v1/join-tokens";
  std::string request = "POST " + target +
                        " HTTP/1.1\r\nHost: gpoold\r\nContent-Type: application/json\r\n"
                        "Content-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body;
  // Join tokens are an admin's to make.
  std::vector<net::Response> r = server_->answerBytes(request, unixPeer(join ? 3 : 0), false);
  if (r.size() != 1 || r[0].status != 201) {
    fail("cannot create a token at " + target + ": " + (r.empty() ? "" : r[0].body));
  }
  return json::parse(r[0].body).at("token").get<std::string>();
}

}  // namespace gpool::fuzz
