#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "net/websocket.h"

namespace gpool::net {

// Broadcasts live updates to WebSocket clients by topic ("jobs", "nodes", "gpus", ...; "*"
// receives every topic).
//
// Clients choose topics with `?topics=jobs,nodes` on the upgrade request and may change them
// later by sending {"subscribe": ["gpus"]} or {"unsubscribe": ["jobs"]}, which the hub
// acknowledges with {"subscribed": [<every topic now subscribed>]}; it answers a malformed
// message with {"error": {...}} and keeps the connection. Each published event goes
// out as {"topic": "<topic>", "data": <data>}.
//
// Back-pressure: the hub never blocks on a client. Each connection has a bounded send queue
// (ServerOptions::ws_max_queued_messages); a client that falls that far behind is dropped with
// close code 1008 and a reason, and the hub forgets it.
//
// Per-connection filtering: a connection may carry a Filter (setFilter). `publish` takes an
// opaque `scope` string (the controller passes the owner of a job event) and sends the event
// only to subscribers whose filter accepts (topic, scope); a connection without a filter gets
// every event of its topics. This is how one topic serves users who may see different parts
// of it.
//
// Thread-safety: every method may be called from any thread.
class EventHub {
 public:
  // Decides whether one event goes to one connection. Runs on the publishing thread under the
  // hub's lock: it must be fast, must not block and must not call into the hub.
  using Filter = std::function<bool(std::string_view topic, std::string_view scope)>;

  // A WebSocketHandler for Router::addWebSocket that attaches connections to this hub. The hub
  // must outlive the server that uses the handler. `accept` (optional) authorises the upgrade.
  WebSocketHandler handler(std::function<Status(const Request&)> accept = {});

  // Adds `topics` to the connection's subscriptions (registering the connection if new).
  void subscribe(const WebSocketConnectionPtr& conn, const std::vector<std::string>& topics);
  // Adds `topics` only when the connection is still registered (it may have closed meanwhile);
  // returns whether it was.
  bool subscribeExisting(uint64_t conn_id, const std::vector<std::string>& topics);
  void unsubscribe(uint64_t conn_id, const std::vector<std::string>& topics);
  // Sets the connection's filter (registering the connection if new); an empty Filter accepts
  // everything.
  void setFilter(const WebSocketConnectionPtr& conn, Filter filter);
  // Forgets a connection entirely.
  void remove(uint64_t conn_id);

  // Queues {"topic": topic, "data": data_json} on every subscriber of `topic` (and of "*").
  // `data_json` must be serialised JSON. Returns how many connections accepted it; those whose
  // queue was full are dropped (and counted in `droppedCount`).
  // Subscribers with a filter get it only when the filter accepts (topic, scope).
  size_t publish(std::string_view topic, std::string_view data_json, std::string_view scope = {});

  // The text of one event message, {"topic": topic, "data": data_json}: for callers that send
  // an event to one connection themselves (a replay) in the hub's format.
  static std::string message(std::string_view topic, std::string_view data_json);
  // The topics `conn_id` is subscribed to, sorted; empty when it is not registered.
  std::vector<std::string> topicsOf(uint64_t conn_id) const;

  size_t connectionCount() const;
  size_t subscriberCount(std::string_view topic) const;
  // Connections dropped by `publish` because their queue was full, since construction.
  uint64_t droppedCount() const;

 private:
  struct Subscriber {
    WebSocketConnectionPtr conn;
    std::set<std::string> topics;
    Filter filter;
  };
  void onMessage(const WebSocketConnectionPtr& conn, const std::string& message);

  mutable std::mutex mu_;
  std::map<uint64_t, Subscriber> subscribers_;  // GUARDED_BY(mu_)
  uint64_t dropped_ = 0;                        // GUARDED_BY(mu_)
};

// Splits "a,b,,c" into {"a","b","c"}.
std::vector<std::string> splitTopics(std::string_view csv);

}  // namespace gpool::net
