#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/http.h"
#include "net/websocket.h"

namespace gpool::net {

// A request handler. It runs on one of the server's I/O threads; handlers of different
// requests run concurrently, so whatever they share must be thread-safe. An exception escaping
// a handler becomes a 500 with a logged id; the server keeps serving.
using Handler = std::function<Response(const Request&)>;

struct RouteOptions {
  // When false (the default), TLS requests without a valid bearer token are answered 401
  // before the handler runs. Unix-socket peers are always authenticated by the kernel.
  bool allow_anonymous = false;
  // The handler spends most of its run waiting rather than computing (a durable commit): it
  // runs on the server's pool for such handlers (ServerOptions::blocking_threads), so that its
  // wait does not hold one of the few I/O threads that serve every other request.
  bool blocking = false;
  // WebSocket routes: once upgraded, the connection no longer counts against its peer's
  // connection limits (ServerOptions::max_connections*). For the agents' link: a flood of
  // connections from a node's address must not take the place its agent holds.
  bool exempt_from_limits = false;
};

// Maps (method, path) to handlers. Patterns are '/'-separated segments, each either a literal
// or `{name}`, which matches one non-empty segment and is handed to the handler as a path
// parameter: "/v1/jobs/{id}/events". When several patterns match, the one with more literal
// segments wins ("/v1/jobs/summary" beats "/v1/jobs/{id}"). Empty segments are ignored, so a
// trailing slash does not matter.
//
// Thread-safety: add routes before the server starts; afterwards `match` may be called
// concurrently from any thread (the router is then read-only).
class Router {
 public:
  struct Route {
    Method method = Method::kGet;
    std::string pattern;
    std::vector<std::string> segments;  // "{x}" marks a parameter
    Handler handler;
    WebSocketHandler websocket;  // set for WebSocket routes
    bool is_websocket = false;
    RouteOptions options;
  };

  struct Match {
    enum class Kind { kFound, kNotFound, kMethodNotAllowed };
    Kind kind = Kind::kNotFound;
    const Route* route = nullptr;  // kFound only; owned by the router
    std::map<std::string, std::string> params;
    std::string allow;  // kMethodNotAllowed: the methods the path does accept, "GET, POST"
  };

  // Adds an HTTP route. Fails with kInvalidArgument for a malformed pattern (not starting with
  // '/', an empty or unclosed `{}`), kAlreadyExists for a duplicate (method, pattern).
  Status add(Method method, std::string_view pattern, Handler handler, RouteOptions options = {});
  // Adds a WebSocket route, reached by a GET with an Upgrade: websocket header.
  Status addWebSocket(std::string_view pattern, WebSocketHandler handler,
                      RouteOptions options = {});

  // Finds the route for a request. `websocket_upgrade` selects WebSocket routes.
  Match match(Method method, std::string_view path, bool websocket_upgrade) const;

  size_t size() const { return routes_.size(); }
  // Every route added, in the order of `add` (for checks against an API description).
  const std::vector<Route>& routes() const { return routes_; }

 private:
  Status addRoute(Route route);

  std::vector<Route> routes_;
};

}  // namespace gpool::net
