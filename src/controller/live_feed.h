#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "controller/node_registry.h"
#include "controller/permissions.h"
#include "net/event_hub.h"
#include "net/router.h"
#include "store/store.h"

// Live updates for clients (the dashboard, `gpool watch`, `gpool queue --watch`): the
// WebSocket route GET /v1/watch?topics=jobs,nodes,summary&after_event=N. Message format and
// guarantees: docs/controller.md ("Live updates").
//
// - jobs: every job event, as committed, in seq order. The feed tails the store
//   (Store::jobEventsAfter from the last seq it published), woken by the store's job event
//   listener and, as a safety net, every `poll_interval`. Seq order is commit order, so the
//   tail never skips an event.
// - nodes: NodeRegistry changes (registered, down, drain, resume), published as they happen.
// - alerts: the alert engine's changes (fired, resolved, acked), as they happen (alerts.h).
// - summary: the body of GET /v1/summary, published when it changed, at most once per
//   `summary_interval`.
//
// Permissions: job events go only to connections whose caller may see the job (the rules of
// GET /v1/jobs/{id}: owner, the group's admin, admins), through an EventHub filter; nodes and
// summary go to everyone, as their GET routes do.
//
// Resume: with `after_event=N` a connection first receives the stored events with seq > N it
// may see, then, once it is live, {"subscribed": [...], "last_event": M} and the live events
// with seq > M; every event exactly once, none missed. Replay and the switch to live run on the
// feed's one publishing thread, between two reads of the tail, which is what rules out gaps
// and duplicates.
namespace gpool::controller {

struct LiveFeedOptions {
  // How often the tail is read without a wake-up from the store (events written by another
  // process sharing a PostgreSQL database; a missed wake-up).
  Micros poll_interval{std::chrono::seconds(1)};
  // The summary is recomputed (it reads every running job) at most this often.
  Micros summary_interval{std::chrono::milliseconds(500)};
  // A resume that would scan more stored events than this is refused: the connection is
  // closed with kCloseResumeTooOld and the client should list the jobs instead.
  int64_t max_replay_events = 1'000'000;
};

// Close code for a resume point too far behind (docs/controller.md).
inline constexpr uint16_t kCloseResumeTooOld = 4410;

// Thread-safety: every method may be called from any thread. The store, registry and router
// callbacks reach it from the server's I/O threads, the committing threads and the loop.
class LiveFeed {
 public:
  using CallerFor = std::function<Result<Caller>(const net::Request&)>;

  // `store` and `registry` must outlive the feed.
  LiveFeed(store::Store& store, NodeRegistry& registry, LiveFeedOptions options = {});
  ~LiveFeed();
  LiveFeed(const LiveFeed&) = delete;
  LiveFeed& operator=(const LiveFeed&) = delete;

  // Starts publishing from the store's current last event (earlier events are history, served
  // only by after_event), hooks the store's job event listener and the registry's change
  // listener, and starts the publishing thread. Fails when the store cannot be read.
  Status start();
  // Removes the listeners and stops the thread; idempotent. Open connections stay registered
  // with the hub but receive nothing more (the server closes them when it stops).
  void stop();

  // Adds GET /v1/watch (a WebSocket route). `caller_for` decides who a connection runs as
  // (callerFor over the store by default); it must outlive the server. Query: `topics` (comma
  // separated, from jobs, nodes, summary; default all three) and `after_event` (a
  // non-negative integer); anything else is refused with 400 naming the parameter before the
  // upgrade.
  Status addRoute(net::Router& router, CallerFor caller_for = {});

  net::EventHub& hub() { return hub_; }
  // Publishes an alert change (alerts topic): `data_json` is the alert's JSON (GET
  // /v1/alerts/{id}) with its `change`; `user` is the user it concerns (its user label), whom
  // plain users must be to receive it; admins and group admins receive every alert.
  void publishAlert(const std::string& data_json, const std::string& user);

  // The seq of the last job event published (0 before the first).
  int64_t publishedSeq() const;

 private:
  struct Pending {
    net::WebSocketConnectionPtr conn;
    std::vector<std::string> topics;
    std::optional<int64_t> after_event;
    Caller caller;
  };

  void wake();
  void run(std::stop_token stop);
  void publishNewEvents();
  void goLive(const Pending& p);
  void publishSummaryIfDue();
  Result<std::string> summaryText();
  void onNodeChange(const NodeChange& change);

  store::Store& store_;
  NodeRegistry& registry_;
  LiveFeedOptions options_;
  net::EventHub hub_;

  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  bool woken_ = false;            // GUARDED_BY(mu_)
  bool summary_dirty_ = false;    // GUARDED_BY(mu_)
  std::vector<Pending> pending_;  // GUARDED_BY(mu_)
  int64_t published_seq_ = 0;     // GUARDED_BY(mu_); written by the publishing thread only
  bool started_ = false;          // GUARDED_BY(mu_)
  // Publishing thread only:
  std::string last_summary_;
  std::chrono::steady_clock::time_point last_summary_at_{};
  std::jthread thread_;
};

}  // namespace gpool::controller
