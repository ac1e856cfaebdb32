#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "net/http.h"
#include "net/router.h"
#include "net/websocket.h"

namespace gpool::store {
class SqliteStore;
}
namespace gpool::net {
class Server;
}
namespace gpool::controller {
class NodeRegistry;
class AgentLink;
class SchedulingLoop;
class JobService;
class LiveFeed;
class StoreTokenVerifier;
class TelemetryHistory;
}  // namespace gpool::controller

// gpoold's objects for the fuzz targets that drive the controller (http_router,
// agent_protocol): wired as gpoold_main.cc wires them, on a fresh SQLite store in `dir`, with a
// pool of two nodes (gpu-01: 2 GPUs, gpu-02: 4 GPUs), users of every role, an API token of
// alice's and a reusable join token. Single-threaded use; nothing runs in the background.
namespace gpool::fuzz {

// The peers an input may choose (its first byte modulo kPeerCount): Unix peers by the kernel,
// and kTokenPeer, a TLS peer that must bring a bearer token.
//   0 alice (user, group ml)   1 bob (user, group vision)   2 carol (group admin of ml)
//   3 root (uid 0)             4 a local user without a record   5 a TLS peer
inline constexpr int kPeerCount = 6;
inline constexpr int kTokenPeer = 5;

class World {
 public:
  explicit World(const std::string& dir);
  ~World();

  // Answers `bytes`, the bytes of one connection, as sent by peer `who`. "@TOKEN@" in them
  // stands for alice's API token and "@JOIN@" for the join token.
  std::vector<net::Response> answer(int who, std::string bytes);
  // One scheduling pass, as gpoold's loop runs them.
  void schedule();

  // The /v1/agent route's callbacks (AgentLink).
  const net::WebSocketHandler& agentRoute() const;
  // The identity the TLS listener gives an agent that brings the join token.
  net::PeerIdentity joinTokenPeer();
  // The peer `who` of a Unix socket (who < kTokenPeer).
  static net::PeerIdentity unixPeer(int who);

 private:
  std::string createToken(const std::string& target, const std::string& body);

  std::string dir_;
  SimClock clock_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<controller::NodeRegistry> registry_;
  std::unique_ptr<controller::TelemetryHistory> telemetry_;
  std::unique_ptr<controller::AgentLink> link_;
  std::unique_ptr<controller::SchedulingLoop> loop_;
  std::unique_ptr<controller::JobService> jobs_;
  std::unique_ptr<controller::LiveFeed> feed_;
  std::unique_ptr<controller::StoreTokenVerifier> tokens_;
  net::Router router_;  // a copy of the server's, for the WebSocket routes' callbacks
  std::unique_ptr<net::Server> server_;
  std::string user_token_;
  std::string join_token_;
};

}  // namespace gpool::fuzz
