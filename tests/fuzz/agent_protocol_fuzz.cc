// Fuzz target: the controller <-> agent protocol (docs/agent-protocol.md) as gpoold meets it
// from an agent, and its shared decoder (src/protocol) as either side meets it.
//
// Input: one byte choosing the agent's peer (0: root on the Unix socket; 1: a TLS agent with a
// join token; 2: alice on the Unix socket, whom /v1/agent refuses), then frames separated by
// newlines. Each frame is
//  - decoded as every message type of src/protocol (envelope, then body), and whatever decodes
//    is encoded again and must decode to the same message (the module's stated round trip);
//  - sent to gpoold's /v1/agent route (AgentLink, the real callbacks, on the store and pool of
//    fuzz/controller_world.h) over an in-process connection, as an agent would send it.
// Beyond "no crash, no undefined behaviour, no exception out of a callback": every frame gpoold
// sends back decodes strictly as its type (what gpool-agent will do with it), error frames say
// what is wrong, and whatever an agent reported, GET /v1/nodes, /v1/gpus and /v1/summary still
// answer without a 500.

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "api/json_reader.h"
#include "fuzz/controller_world.h"
#include "fuzz/fuzz_util.h"
#include "protocol/agent_protocol.h"

namespace gpool::fuzz {
namespace {

using nlohmann::json;

// The server side of one WebSocket as the route's callbacks see it; keeps what gpoold sends.
class Connection final : public net::WebSocketConnection {
 public:
  explicit Connection(net::Request request) : request_(std::move(request)) {}
  bool send(std::string message) override {
    if (closed_) return false;
    sent.push_back(std::move(message));
    return true;
  }
  void close(uint16_t code, std::string) override {
    closed_ = true;
    close_code = code;
  }
  const net::Request& request() const override { return request_; }
  uint64_t id() const override { return id_; }
  size_t queuedMessages() const override { return 0; }
  bool closed() const { return closed_; }

  std::vector<std::string> sent;
  uint16_t close_code = 0;

 private:
  static inline std::atomic<uint64_t> next_id_{uint64_t{1} << 40};
  net::Request request_;
  uint64_t id_ = next_id_.fetch_add(1);
  bool closed_ = false;
};

// Decodes `body` as an M; on success, encodes and decodes it again and checks the round trip.
template <typename M>
void roundTrip(const json& body) {
  Result<M> m = protocol::decodeBody<M>(body);
  if (!m.ok()) return;
  const std::string text = api::dumpJson(protocol::encodeMessage(*m, 7, 3));
  Result<json> parsed = api::parseJsonText(text, "encoded");
  if (!parsed.ok()) fail(std::string(M::kType) + ": encoded frame does not parse: " + text);
  Result<protocol::Envelope> env = protocol::decodeEnvelope(*parsed);
  if (!env.ok() || env->type != M::kType || env->seq != 7 || env->ack != 3) {
    fail(std::string(M::kType) + ": encoded envelope does not decode: " + text);
  }
  Result<M> again = protocol::decodeBody<M>(env->body);
  if (!again.ok()) {
    fail(std::string(M::kType) + ": encoded body does not decode: " + again.status().toString() +
         " in " + text);
  }
  if (!(*again == *m)) fail(std::string(M::kType) + ": decode(encode(m)) != m: " + text);
}

void decodeAsEveryType(const json& body) {
  roundTrip<protocol::Hello>(body);
  roundTrip<protocol::Heartbeat>(body);
  roundTrip<protocol::TaskUpdate>(body);
  roundTrip<protocol::Telemetry>(body);
  roundTrip<protocol::Health>(body);
  roundTrip<protocol::LogData>(body);
  roundTrip<protocol::Error>(body);
  roundTrip<protocol::Welcome>(body);
  roundTrip<protocol::DesiredState>(body);
  roundTrip<protocol::Assign>(body);
  roundTrip<protocol::Cancel>(body);
  roundTrip<protocol::ReadLog>(body);
  roundTrip<protocol::Lease>(body);
  roundTrip<protocol::TaskAck>(body);
}

// What gpool-agent does with a frame from gpoold: it must decode strictly as its type.
template <typename M>
bool decodesAs(const protocol::Envelope& env, const std::string& text) {
  if (env.type != M::kType) return false;
  Result<M> m = protocol::decodeBody<M>(env.body);
  if (!m.ok()) {
    fail("gpoold sent a " + env.type + " that the agent cannot decode (" + m.status().toString() +
         "): " + text);
  }
  if constexpr (std::is_same_v<M, protocol::Error>) {
    if (m->message.empty()) fail("gpoold sent an error without a message: " + text);
  }
  return true;
}

void checkSent(const std::string& text) {
  Result<json> parsed = api::parseJsonText(text, "sent");
  if (!parsed.ok()) fail("gpoold sent a frame that is not JSON: " + text);
  Result<protocol::Envelope> env = protocol::decodeEnvelope(*parsed);
  if (!env.ok()) fail("gpoold sent a frame whose envelope does not decode: " + text);
  if (!(decodesAs<protocol::Welcome>(*env, text) || decodesAs<protocol::DesiredState>(*env, text) ||
        decodesAs<protocol::Assign>(*env, text) || decodesAs<protocol::Cancel>(*env, text) ||
        decodesAs<protocol::ReadLog>(*env, text) || decodesAs<protocol::Lease>(*env, text) ||
        decodesAs<protocol::TaskAck>(*env, text) || decodesAs<protocol::Error>(*env, text))) {
    fail("gpoold sent a frame of a type the agent does not know: " + text);
  }
}

void checkApiStillAnswers(World& world) {
  const std::string bytes =
      "GET /v1/nodes HTTP/1.1\r\n\r\nGET /v1/gpus HTTP/1.1\r\n\r\nGET /v1/summary HTTP/1.1\r\n\r\n";
  for (const net::Response& r : world.answer(/*root*/ 3, bytes)) {
    if (r.status >= 500)
      fail("after the agent's frames, status " + std::to_string(r.status) + ": " + r.body);
  }
}

}  // namespace
}  // namespace gpool::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace gpool;
  using namespace gpool::fuzz;
  static std::unique_ptr<World> world;
  static uint64_t runs = 0;
  if (size == 0) return 0;
  // Rebuilt more often than http_router's: every hello may register another node, and each
  // input lists them all.
  if (world == nullptr || runs % 2000 == 0) {
    world.reset();
    world = std::make_unique<World>(scratchDir() + "/world");
  }
  ++runs;

  std::vector<std::string> frames;
  {
    std::istringstream lines(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
    std::string line;
    while (std::getline(lines, line))
      frames.push_back(line);
  }
  for (const std::string& frame : frames) {
    Result<nlohmann::json> parsed = api::parseJsonText(frame, "message");
    if (!parsed.ok()) continue;
    (void)protocol::peekSeq(*parsed);
    Result<protocol::Envelope> env = protocol::decodeEnvelope(*parsed);
    if (env.ok()) decodeAsEveryType(env->body);
  }

  net::Request upgrade;
  upgrade.method = net::Method::kGet;
  upgrade.method_name = "GET";
  upgrade.target = upgrade.path = "/v1/agent";
  switch (data[0] % 3) {
    case 0: upgrade.peer = World::unixPeer(/*root*/ 3); break;
    case 1: upgrade.peer = world->joinTokenPeer(); break;
    default: upgrade.peer = World::unixPeer(/*alice*/ 0); break;
  }
  const net::WebSocketHandler& route = world->agentRoute();
  if (!route.accept(upgrade).isOk()) return 0;
  auto conn = std::make_shared<Connection>(upgrade);
  net::WebSocketConnectionPtr ptr = conn;
  route.on_open(ptr);
  for (const std::string& frame : frames) {
    if (conn->closed()) break;
    route.on_message(ptr, frame);
  }
  route.on_close(ptr, 1000, "done");
  for (const std::string& sent : conn->sent)
    checkSent(sent);
  checkApiStillAnswers(*world);
  if (runs % 64 == 0) world->schedule();
  return 0;
}
