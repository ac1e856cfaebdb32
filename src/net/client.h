#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/status.h"
#include "net/http.h"

namespace gpool::net {

// Where a client connects: the controller's Unix socket (identity from the kernel) or its TLS
// listener (identity from a bearer token).
struct ClientEndpoint {
  std::string unix_socket_path;  // set for a Unix-socket endpoint
  std::string host;              // TLS: host name or address
  int port = 0;                  // TLS: port
  // TLS: PEM file of the CA(s) trusted for the server's certificate; empty means the system's
  // default trust store. The certificate must name `server_name` (default: `host`).
  std::string ca_file;
  std::string server_name;
  // TLS: sent as "Authorization: Bearer <token>"; empty for none.
  std::string bearer_token;
  // Plain HTTP over TCP to host:port (no TLS): for webhook receivers and scrapes on a trusted
  // network; HttpClient only.
  bool plain_http = false;

  static ClientEndpoint unixSocket(std::string path);
  static ClientEndpoint tls(std::string host, int port, std::string ca_file,
                            std::string bearer_token);
  // Plain HTTP to host:port (see plain_http).
  static ClientEndpoint http(std::string host, int port);
  bool isUnix() const { return !unix_socket_path.empty(); }
  // "unix:/run/gpool.sock" or "host:port", for messages.
  std::string describe() const;
};

// The leader a standby of a highly available controller names in its 503 (docs/ha.md): the
// Gpool-Leader header when there is one, else the address after "the leader is at " in the
// body (a refused WebSocket upgrade carries only the body). "" when the answer names none.
std::string namedLeader(int status, const std::optional<std::string>& leader_header,
                        std::string_view body);

// The index in `endpoints` of the one `address` names: a Unix socket by its path, a TLS
// endpoint by "host:port" with or without a scheme ("https://ctl-a:8443"). npos when none.
size_t findEndpoint(const std::vector<ClientEndpoint>& endpoints, std::string_view address);

// A blocking HTTP/1.1 client for the CLI, tests and benchmarks. Keeps one keep-alive
// connection and reconnects (once per call) when the server closed it in between.
//
// Errors: HTTP error statuses are returned as a Response (check `status`); the Result fails
// only when no response was received: kUnavailable (cannot connect, TLS or certificate
// failure, connection lost), kDeadlineExceeded (the per-call timeout ran out).
//
// Thread-safety: none; use one client per thread.
class HttpClient {
 public:
  explicit HttpClient(ClientEndpoint endpoint,
                      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends one request; `target` is the path with its query ("/v1/jobs?state=R"). A non-empty
  // body without a Content-Type header goes as application/json.
  Result<Response> request(Method method, std::string_view target, std::string body = {},
                           std::vector<std::pair<std::string, std::string>> headers = {});
  Result<Response> get(std::string_view target) { return request(Method::kGet, target); }
  Result<Response> post(std::string_view target, std::string body) {
    return request(Method::kPost, target, std::move(body));
  }
  Result<Response> del(std::string_view target) { return request(Method::kDelete, target); }

  // Closes the kept connection (the next request opens a new one).
  void close();
  // Connections opened so far (1 when keep-alive worked throughout).
  uint64_t connectionsOpened() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

struct WebSocketClientOptions {
  ClientEndpoint endpoint;
  // Other addresses of the same service (the standbys of a highly available controller, which
  // refuse the upgrade with 503 until they lead): after a failed attempt or a lost connection
  // the client tries the address a 503 names as the leader when it is one of these (namedLeader),
  // else the next one, round robin. The backoff grows once per round of failed attempts over all
  // the addresses, not per attempt. Of endpoint's kind (all Unix sockets, or all TLS with
  // endpoint's CA); the bearer token goes to each.
  std::vector<ClientEndpoint> alternates;
  std::string target = "/";  // e.g. "/v1/agent" or "/v1/events?topics=jobs"
  // Reconnect backoff: initial_backoff doubling up to max_backoff, each delay multiplied by a
  // random factor in [1 - jitter, 1 + jitter] (seeded, so tests are reproducible).
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30'000};
  double jitter = 0.2;
  uint64_t seed = 1;
  // Time allowed for connect + TLS + WebSocket handshake, and for the close handshake.
  std::chrono::milliseconds connect_timeout{10'000};
  // A server silent for this long (no data, no pong to our pings) counts as gone.
  std::chrono::milliseconds idle_timeout{30'000};
  size_t max_message_bytes = 16 << 20;

  // Callbacks run on the client's own I/O thread, one at a time; they must not block and must
  // not call stop(). `send` may be called from them.
  // After each successful (re)connect; the place to send a full state.
  std::function<void()> on_connect;
  std::function<void(std::string message)> on_message;
  // After a connection ends or an attempt fails; `why` says what happened (e.g.
  // kUnauthenticated for a 401 on the upgrade, kUnavailable for a lost connection).
  std::function<void(const Status& why)> on_disconnect;
};

// A persistent WebSocket client: connects, and reconnects with exponential backoff and jitter
// whenever the connection drops, until stopped. Messages are not kept across connections: a
// message `send` accepted may be lost if the connection drops before it is written, which the
// level-triggered agent protocol tolerates by resending full state in `on_connect`.
//
// Thread-safety: `send`, `connected` and the counters may be called from any thread; `start`
// and `stop` from one controlling thread.
class WebSocketClient {
 public:
  explicit WebSocketClient(WebSocketClientOptions options);
  ~WebSocketClient();  // stop()
  WebSocketClient(const WebSocketClient&) = delete;
  WebSocketClient& operator=(const WebSocketClient&) = delete;

  // Starts the I/O thread, which connects in the background.
  void start();
  // Closes the connection with code 1000 (waiting at most connect_timeout for the handshake)
  // and joins the I/O thread. Idempotent.
  void stop();

  // Queues a text message on the current connection; false when not connected.
  bool send(std::string message);
  bool connected() const;
  // Successful connections so far (the first connect counts 1).
  uint64_t connectCount() const;
  // The bearer token of the next (re)connect (an agent swaps its join token for its node
  // credential); the current connection is unaffected. Any thread, callbacks included.
  void setBearerToken(std::string token);

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace gpool::net
