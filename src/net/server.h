#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/status.h"
#include "net/auth.h"
#include "net/router.h"

namespace gpool::net {

struct ServerOptions {
  // Unix-domain listener; empty for none. Peers are identified by SO_PEERCRED. A stale socket
  // file left by a dead server is replaced; a live one makes `start` fail.
  std::string unix_socket_path;
  // Mode of the socket file. World-accessible by default: the kernel tells who connects, and
  // handlers decide what each user may do.
  uint32_t unix_socket_mode = 0666;

  // TCP+TLS listener; tcp_port < 0 for none, 0 for a port chosen by the OS (see tcpPort()).
  std::string tcp_host = "127.0.0.1";
  int tcp_port = -1;
  // PEM certificate chain and private key; required with a TCP listener. TLS 1.2 or newer.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Plain-HTTP TCP listener (no TLS), for a browser on this machine (the dashboard);
  // http_port < 0 for none, 0 for a port chosen by the OS (see httpPort()). Requests are
  // authenticated by bearer token exactly as on the TLS listener. Tokens cross it in the clear,
  // so callers must bind it to a loopback address only (gpoold's config refuses any other); the
  // server itself does not check.
  std::string http_host = "127.0.0.1";
  int http_port = -1;
  // Checks bearer tokens on the TCP listeners; required with a TLS or HTTP listener. Not owned;
  // must outlive the server.
  TokenVerifier* token_verifier = nullptr;

  // I/O threads running the one io_context.
  int threads = 2;
  // Threads for the handlers of routes marked RouteOptions::blocking; 0 runs them on the I/O
  // threads like the others. Many can wait at once: concurrent submissions share one commit.
  int blocking_threads = 16;

  // Limits. A body above max_body_bytes gets 413, headers above max_header_bytes 431; both
  // close the connection after the response.
  size_t max_body_bytes = 1 << 20;
  size_t max_header_bytes = 16 << 10;
  // Time allowed to receive one whole request, headers and body, once its first byte arrived
  // (and for the TLS handshake); the connection is closed when it runs out, however the client
  // paces its bytes (a client dripping one byte at a time is cut too).
  std::chrono::milliseconds read_timeout{10'000};
  // How long a connection may wait for the first byte of a request: after it opened, and
  // between requests on a keep-alive connection.
  std::chrono::milliseconds idle_timeout{60'000};

  // Connection limits, so that one local user or one address cannot take every connection
  // (and every file descriptor) of the server; 0 means no limit.
  //  - max_connections_per_user: Unix-socket connections of one uid open at once.
  //  - max_connections_per_address: TCP connections (TLS and HTTP) of one IP address at once.
  //    The loopback HTTP listener's peers all share 127.0.0.1.
  //  - max_connections: connections of unprivileged peers open at once; 0 derives it from the
  //    process's open-file limit at start (RLIMIT_NOFILE's soft limit minus reserved_fds).
  // Privileged peers, Unix-socket peers with uid 0 or the server's own uid (admins, local
  // agents), are never refused by a limit: they are served from the reserved descriptors even
  // while unprivileged peers are refused. A refused connection is answered 503 with code
  // unavailable and Retry-After, naming the limit (TLS connections are closed without an
  // answer), then half-closed, and what its client still sends is read and discarded for up to
  // 1 s before it closes (at most 64, and half of reserved_fds, at once; beyond, it is closed
  // at once), so that a client still writing its request reads the answer. Connections
  // upgraded to a route marked RouteOptions::exempt_from_limits
  // stop counting against their peer once upgraded.
  size_t max_connections_per_user = 64;
  size_t max_connections_per_address = 256;
  size_t max_connections = 0;
  size_t reserved_fds = 128;
  // How long `stop` waits for requests in progress before cutting connections.
  std::chrono::milliseconds shutdown_grace{5'000};

  // WebSocket: messages queued per connection before it counts as a slow consumer and is
  // dropped; the largest message accepted from a client; the time a close handshake (or a
  // blocked write after a drop) may take before the socket is cut.
  size_t ws_max_queued_messages = 1024;
  size_t ws_max_message_bytes = 16 << 20;
  std::chrono::milliseconds ws_close_timeout{2'000};
  // Ping period for idle WebSocket connections; a peer that answers nothing within two periods
  // is dropped.
  std::chrono::milliseconds ws_ping_interval{15'000};
};

// The HTTP/1.1 + WebSocket server behind gpoold's API.
//
// Listeners: a Unix socket (identity from the kernel), TCP with TLS and plain HTTP on TCP (for
// loopback use; both: identity from a bearer token checked by the TokenVerifier; a WebSocket
// upgrade may carry it as the query parameter `access_token`, which browsers need). Each request is
// parsed, authenticated, routed and answered; transport errors become JSON error bodies (400
// malformed, 401, 404, 405, 413, 431, 500). Keep-alive is supported; a handler exception becomes a
// 500 whose id is logged, and the server keeps serving.
//
// Threading: one io_context runs on `threads` I/O threads. Each connection lives on its own
// strand, so one connection's requests are handled in order, while requests of different
// connections run concurrently: handlers must be thread-safe. `start` and `stop` must be called
// from one controlling thread (not from a handler). The Router is read-only once started.
//
// Abuse: a request must arrive whole within read_timeout of its first byte; connections are
// limited per uid, per address and in all (see ServerOptions), with descriptors reserved for
// root and the server's own uid; when the process nevertheless runs out of descriptors, the
// accept loop uses a spare one to take the next waiting connection, serves it if its peer is
// privileged and closes it otherwise, so that waiting connections are neither left hanging nor
// retried in a busy loop.
//
// Lifetime: `stop` (also run by the destructor) stops accepting, lets requests in progress
// finish for up to shutdown_grace, closes idle keep-alive connections and WebSocket connections
// (close code 1001), joins the I/O threads and removes the socket file. A stopped server cannot
// be restarted; create a new one.
class Server {
 public:
  Server(ServerOptions options, Router router);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds the listeners and starts the I/O threads. Fails (and leaves nothing running) with
  // kInvalidArgument for inconsistent options, kIoError naming the path/port for bind errors,
  // kInvalidArgument naming the file for unreadable or mismatched TLS certificate/key.
  Status start();
  void stop();

  // The bound TCP port (useful with tcp_port = 0); -1 without a TCP listener.
  int tcpPort() const;
  // The bound plain-HTTP port (useful with http_port = 0); -1 without an HTTP listener.
  int httpPort() const;
  const std::string& unixSocketPath() const;

  // Answers the requests in `bytes` as one connection would, without a socket: each request is
  // parsed with this server's limits, authenticated (`token_auth`: by bearer token through
  // token_verifier, which must then be set, as on the TCP listeners; otherwise `peer` is who the
  // kernel said, as on the Unix socket), routed and handled on the calling thread. Stops after a
  // response that closes the connection (an error of the transport, no keep-alive) and at an
  // incomplete request, which gets no answer, like a peer that hung up. An upgrade that a WebSocket
  // route accepts gets 101 and ends the bytes; no WebSocket session runs. Needs no start();
  // thread-safe like the routes. For the fuzz targets (tests/fuzz) and tests.
  std::vector<Response> answerBytes(std::string_view bytes, const PeerIdentity& peer,
                                    bool token_auth);

  // Counters for tests and metrics.
  uint64_t requestsServed() const;
  uint64_t handlerExceptions() const;
  size_t openConnections() const;
  // Connections refused by a connection limit, or dropped because the process ran out of file
  // descriptors, since start.
  uint64_t connectionsRefused() const;
  // The limit on unprivileged connections in force (ServerOptions::max_connections, or the one
  // derived from the open-file limit); 0 when there is none. Valid after start().
  size_t connectionLimit() const;

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace gpool::net
