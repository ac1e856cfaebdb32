#include "controller/leadership.h"

#include <spdlog/spdlog.h>

namespace gpool::controller {
namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t steadyNs(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

Leadership::Leadership(store::LeaderLease& lease, store::PostgresStore& store,
                       LeadershipOptions options)
    : lease_(lease), store_(store), options_(options) {
  if (options_.poll.count() <= 0) {
    options_.poll = std::max(options_.lease / 6, std::chrono::milliseconds(100));
  }
}

Leadership::~Leadership() {
  renewer_.request_stop();
  watchdog_.request_stop();
  cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (watchdog_.joinable()) watchdog_.join();
}

bool Leadership::waitToLead(std::stop_token stop) {
  std::string last_holder;
  while (!stop.stop_requested()) {
    Result<store::LeaseView> view = lease_.acquireOrRenew(0);
    if (view.ok() && view->held) {
      store_.setFenceToken(view->token);
      {
        std::lock_guard lock(mu_);
        leader_address_ = lease_.options().address;
      }
      leading_.store(true);
      spdlog::info("leading: took the controller lease (fencing token {})", view->token);
      return true;
    }
    if (!view.ok()) {
      spdlog::warn("standby: cannot read the controller lease: {}", view.status().toString());
    } else {
      std::lock_guard lock(mu_);
      leader_address_ = view->address;
      if (view->holder != last_holder) {
        last_holder = view->holder;
        spdlog::info("standby: {} leads (at {}, token {}, {} ms left)", view->holder, view->address,
                     view->token, view->remaining_ms);
      }
    }
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, stop, options_.poll, [] { return false; });
  }
  return false;
}

void Leadership::keep(std::function<void(const std::string& why)> on_lost) {
  on_lost_ = std::move(on_lost);
  last_ok_ns_.store(steadyNs(SteadyClock::now()));
  renewer_ = std::jthread([this](std::stop_token stop) { renewLoop(stop); });
  watchdog_ = std::jthread([this](std::stop_token stop) { watchDeadline(stop); });
}

void Leadership::lose(const std::string& why) {
  if (lost_.exchange(true)) return;
  leading_.store(false);
  store_.setFenceToken(0);
  spdlog::error("deposed: {}", why);
  cv_.notify_all();
  on_lost_(why);
}

void Leadership::renewLoop(std::stop_token stop) {
  const int64_t token = store_.fenceToken();
  const auto every = std::max(options_.lease / 3, std::chrono::milliseconds(10));
  while (!lost_.load()) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, stop, every, [this] { return lost_.load(); }) ||
          stop.stop_requested()) {
        return;
      }
    }
    SteadyClock::time_point started = SteadyClock::now();
    Result<store::LeaseView> view = lease_.acquireOrRenew(token);
    if (lost_.load()) return;  // the watchdog gave up while this renewal was blocked
    std::string why;
    if (view.ok() && view->held && view->token == token) {
      // The lease ends at the latest `lease` after the start of the last renewal that
      // succeeded (the database counts from when it ran the UPDATE, which is later).
      last_ok_ns_.store(steadyNs(started));
      continue;
    }
    if (view.ok() && view->held) {
      // It lapsed and was taken again under a new token: another controller may have led in
      // between, so this one's memory is stale. Hand it back at once.
      (void)lease_.release(view->token);
      why = "the controller lease lapsed between two renewals (token " + std::to_string(token) +
            " became " + std::to_string(view->token) + ")";
    } else if (view.ok()) {
      why = "the controller lease passed to " + view->holder + " at " + view->address + " (token " +
            std::to_string(view->token) + ")";
    } else if (steadyNs(SteadyClock::now()) - last_ok_ns_.load() >=
               std::chrono::duration_cast<std::chrono::nanoseconds>(options_.lease).count()) {
      why = "no renewal of the controller lease succeeded for " +
            std::to_string(options_.lease.count()) + " ms: " + view.status().toString();
    } else {
      spdlog::warn("cannot renew the controller lease (will retry): {}", view.status().toString());
      continue;
    }
    lose(why);
    return;
  }
}

void Leadership::watchDeadline(std::stop_token stop) {
  while (!lost_.load()) {
    const auto deadline =
        SteadyClock::time_point(std::chrono::nanoseconds(last_ok_ns_.load())) + options_.lease;
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_until(lock, stop, deadline, [this] { return lost_.load(); }) ||
          stop.stop_requested()) {
        return;
      }
    }
    // A renewal may have succeeded meanwhile and moved the deadline.
    if (SteadyClock::now() >=
        SteadyClock::time_point(std::chrono::nanoseconds(last_ok_ns_.load())) + options_.lease) {
      lose("no renewal of the controller lease succeeded for " +
           std::to_string(options_.lease.count()) +
           " ms (the last one may still be waiting for the database)");
      return;
    }
  }
}

void Leadership::stop() {
  renewer_.request_stop();
  watchdog_.request_stop();
  cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
  if (watchdog_.joinable()) watchdog_.join();
  if (leading_.exchange(false)) {
    const int64_t token = store_.fenceToken();
    store_.setFenceToken(0);
    if (Status s = lease_.release(token); !s.isOk()) {
      spdlog::warn("cannot release the controller lease: {}", s.toString());
    } else {
      spdlog::info("released the controller lease (token {})", token);
    }
  }
}

std::string Leadership::leaderAddress() const {
  std::lock_guard lock(mu_);
  return leader_address_;
}

Status Leadership::notLeading() const {
  std::string address = leaderAddress();
  return Status::unavailable(address.empty()
                                 ? "this controller is a standby and no controller leads yet"
                                 : "this controller is a standby; the leader is at " + address);
}

Result<net::Router> Leadership::gate(const net::Router& router) {
  net::Router out;
  for (const net::Router::Route& route : router.routes()) {
    if (route.is_websocket) {
      net::WebSocketHandler ws = route.websocket;
      ws.accept = [this, inner = route.websocket.accept](const net::Request& req) -> Status {
        if (!leading()) return notLeading();
        return inner ? inner(req) : Status::ok();
      };
      GPOOL_RETURN_IF_ERROR(out.addWebSocket(route.pattern, std::move(ws), route.options));
      continue;
    }
    GPOOL_RETURN_IF_ERROR(out.add(
        route.method, route.pattern,
        [this, inner = route.handler](const net::Request& req) -> net::Response {
          if (leading()) return inner(req);
          net::Response r = net::Response::error(notLeading());
          std::string address = leaderAddress();
          if (!address.empty()) r.setHeader("Gpool-Leader", address);
          return r;
        },
        route.options));
  }
  return out;
}

}  // namespace gpool::controller
