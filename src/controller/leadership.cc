#include "controller/leadership.h"

#include <spdlog/spdlog.h>

namespace gpool::controller {
namespace {

using SteadyClock = std::chrono::steady_clock;

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
  cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
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
  renewer_ = std::jthread(
      [this, on_lost = std::move(on_lost)](std::stop_token stop) { renewLoop(stop, on_lost); });
}

void Leadership::renewLoop(std::stop_token stop,
                           std::function<void(const std::string& why)> on_lost) {
  const int64_t token = store_.fenceToken();
  const auto every = std::max(options_.lease / 3, std::chrono::milliseconds(10));
  // The lease ends at the latest `lease` after the start of the last renewal that succeeded
  // (the database counts from when it ran the UPDATE, which is later).
  SteadyClock::time_point last_ok = SteadyClock::now();
  while (true) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, stop, every, [] { return false; }) || stop.stop_requested()) return;
    }
    SteadyClock::time_point started = SteadyClock::now();
    Result<store::LeaseView> view = lease_.acquireOrRenew(token);
    std::string why;
    if (view.ok() && view->held && view->token == token) {
      last_ok = started;
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
    } else if (SteadyClock::now() - last_ok >= options_.lease) {
      why = "no renewal of the controller lease succeeded for " +
            std::to_string(options_.lease.count()) + " ms: " + view.status().toString();
    } else {
      spdlog::warn("cannot renew the controller lease (will retry): {}", view.status().toString());
      continue;
    }
    leading_.store(false);
    store_.setFenceToken(0);
    spdlog::error("deposed: {}", why);
    on_lost(why);
    return;
  }
}

void Leadership::stop() {
  renewer_.request_stop();
  cv_.notify_all();
  if (renewer_.joinable()) renewer_.join();
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
