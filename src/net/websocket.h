#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.h"
#include "net/http.h"

namespace gpool::net {

// WebSocket close codes the transport itself uses; applications (e.g. the agent protocol's
// 4001/4003/4009/4013) may use their own in 4000-4999.
inline constexpr uint16_t kCloseNormal = 1000;
inline constexpr uint16_t kCloseGoingAway = 1001;  // server shutting down
inline constexpr uint16_t kClosePolicy = 1008;     // slow consumer: send queue full
inline constexpr uint16_t kCloseTooBig = 1009;     // message above the read limit
inline constexpr uint16_t kCloseInternal = 1011;   // a handler threw

// One accepted WebSocket connection on the server side, handed to the route's callbacks.
//
// Thread-safety: every method may be called from any thread, including from inside the
// callbacks. The object stays valid for as long as someone holds the shared_ptr, but after the
// connection closes `send` returns false and `close` does nothing.
class WebSocketConnection {
 public:
  virtual ~WebSocketConnection() = default;

  // Queues one text message. Never blocks. Returns false when the connection is closed or
  // closing, or when its bounded send queue is full: then the connection is dropped with
  // kClosePolicy ("slow consumer") and `on_close` follows, so a slow client can never make the
  // server buffer without bound.
  virtual bool send(std::string message) = 0;
  // Starts a close handshake after the messages already queued; idempotent.
  virtual void close(uint16_t code, std::string reason) = 0;
  // The upgrade request (path, query, headers, authenticated peer). Its body is empty.
  virtual const Request& request() const = 0;
  // Unique within the process, across servers (one EventHub may serve several servers).
  virtual uint64_t id() const = 0;
  // Messages queued but not yet written to the socket.
  virtual size_t queuedMessages() const = 0;
};
using WebSocketConnectionPtr = std::shared_ptr<WebSocketConnection>;

// Callbacks for one WebSocket route. They run on the server's I/O threads, one at a time per
// connection (never two callbacks of the same connection concurrently), and must not block for
// long. Exceptions thrown by them are caught: the connection is closed with kCloseInternal.
struct WebSocketHandler {
  // Decides whether to accept the upgrade, after authentication. A non-OK status refuses it
  // with the matching HTTP error before any WebSocket frame. Unset: every authenticated peer
  // (or anyone, on an allow_anonymous route) is accepted.
  std::function<Status(const Request&)> accept;
  // The connection is open; a good place to send a full state.
  std::function<void(const WebSocketConnectionPtr&)> on_open;
  // One complete text (or binary) message from the client.
  std::function<void(const WebSocketConnectionPtr&, std::string message)> on_message;
  // Called exactly once after on_open, when the connection is gone for any reason; `reason`
  // says why (close frame reason, "slow consumer: ...", "connection lost: ...").
  std::function<void(const WebSocketConnectionPtr&, uint16_t code, const std::string& reason)>
      on_close;
};

}  // namespace gpool::net
