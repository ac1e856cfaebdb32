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

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz/controller_world.h"
#include "fuzz/fuzz_util.h"

namespace gpool::fuzz {
namespace {

using nlohmann::json;

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
  const int who = data[0] % kPeerCount;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (const gpool::net::Response& r : world->answer(who, std::move(bytes))) {
    checkResponse(r);
  }
  if (runs % 64 == 0) world->schedule();
  return 0;
}
