#include "controller/api_routes.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "api/user.h"
#include "controller/api_tokens.h"
#include "controller/route_helpers.h"
#include "store/api_codec.h"

namespace gpool::controller {

namespace routes {

using nlohmann::json;

namespace {

// The Retry-After of a 503 (Unavailable) answer, in seconds.
constexpr int kRetryAfterSeconds = 5;

// One line per refused request (503: the store cannot write, an agent is away), so that an
// operator sees what was turned away. Refusals come in bursts (every client retries while the
// store is full): at most kMaxRefusalLines lines a second, the rest counted in the next line.
void logRefusal(const net::Request& req, const Caller& caller, const Status& why) {
  constexpr int kMaxRefusalLines = 5;
  static std::mutex mu;
  static std::chrono::steady_clock::time_point window{};
  static int lines = 0;
  static uint64_t suppressed = 0;
  uint64_t untold = 0;
  {
    std::lock_guard lock(mu);
    const auto now = std::chrono::steady_clock::now();
    if (now - window >= std::chrono::seconds(1)) {
      window = now;
      lines = 0;
    }
    if (++lines > kMaxRefusalLines) {
      ++suppressed;
      return;
    }
    untold = std::exchange(suppressed, 0);
  }
  std::string more =
      untold > 0 ? " (and " + std::to_string(untold) + " more refusals not logged)" : "";
  spdlog::warn("refused {} {} for {} (503, retry after {} s): {}{}", net::methodName(req.method),
               req.path, caller.user, kRetryAfterSeconds, why.message(), more);
}

}  // namespace

net::Handler authed(const Context& ctx, std::initializer_list<std::string_view> allowed,
                    Body body) {
  std::vector<std::string> names(allowed.begin(), allowed.end());
  return [ctx, names = std::move(names), body = std::move(body)](const net::Request& req) {
    for (const auto& [key, value] : req.query) {
      if (std::find(names.begin(), names.end(), key) == names.end()) {
        std::string expected;
        for (const std::string& n : names)
          expected += (expected.empty() ? "" : ", ") + n;
        return net::Response::error(
            Status::invalidArgument("query parameter '" + key + "' is not known here" +
                                    (expected.empty() ? std::string(" (this route takes none)")
                                                      : " (expected " + expected + ")")));
      }
    }
    Result<Caller> caller = ctx.caller_for(req);
    if (!caller.ok()) return net::Response::error(caller.status());
    Result<net::Response> r = body(*caller, req);
    if (r.ok()) return std::move(r).value();
    net::Response refused = net::Response::error(r.status());
    if (r.status().code() == StatusCode::kUnavailable) {
      // A condition expected to end (a full or read-only store, an agent away): logged, and
      // the client is told when to try again.
      logRefusal(req, *caller, r.status());
      refused.setHeader("Retry-After", std::to_string(kRetryAfterSeconds));
    }
    return refused;
  };
}

Result<int64_t> parseId(std::string_view text, std::string_view what) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < 0) {
    return Status::invalidArgument(std::string(what) + ": '" + std::string(text) +
                                   "' is not a non-negative integer");
  }
  return v;
}

Result<json> parseObjectBody(const net::Request& req, bool empty_ok) {
  if (empty_ok && req.body.find_first_not_of(" \t\r\n") == std::string::npos) {
    return json::object();
  }
  GPOOL_ASSIGN_OR_RETURN(json body, api::parseJsonText(req.body, "body"));
  if (!body.is_object()) {
    return Status::invalidArgument("body: must be a JSON object, got " +
                                   std::string(api::jsonTypeName(body)));
  }
  return body;
}

Status expectNoBody(const net::Request& req) {
  GPOOL_ASSIGN_OR_RETURN(json body, parseObjectBody(req, true));
  if (!body.empty()) {
    return Status::invalidArgument("body." + body.begin().key() +
                                   ": unknown field (this action takes no parameters)");
  }
  return Status::ok();
}

net::Response jsonResponse(int status, const json& body) {
  return net::Response::json(status, api::dumpJson(body));
}

}  // namespace routes

Result<Caller> callerForUser(store::Store& store, const std::string& name, uint32_t uid) {
  Caller caller;
  caller.user = name;
  caller.uid = uid;
  Result<api::User> user = store::loadApiUser(store, name);
  if (!user.ok()) {
    if (user.status().code() == StatusCode::kNotFound) return caller;
    return user.status();
  }
  caller.role = user->role;
  if (caller.role == Role::kGroupAdmin) caller.admin_groups = user->groups;
  return caller;
}

Result<Caller> callerFor(store::Store& store, const net::PeerIdentity& peer) {
  if (!peer.authenticated()) return Status::unauthenticated("this request needs an identity");
  if (peer.kind == net::PeerIdentity::Kind::kUnixPeer && peer.uid == 0) {
    Caller caller;
    caller.user = peer.user;
    caller.uid = 0;
    caller.role = Role::kAdmin;
    return caller;
  }
  if (peer.kind == net::PeerIdentity::Kind::kToken) {
    for (const std::string& role : peer.roles) {
      if (role == kAgentJoinRole || role == kAgentNodeRole) {
        return Status::permissionDenied(
            "agent join tokens and node credentials open only /v1/agent");
      }
    }
  }
  GPOOL_ASSIGN_OR_RETURN(Caller caller, callerForUser(store, peer.user, peer.uid));
  if (peer.kind != net::PeerIdentity::Kind::kUnixPeer) {
    // A token's user has no uid from the kernel. The rule (docs/security.md): the uid of their
    // user record; without one, the uid of the controller machine's account of that name, but
    // never root's; without either the request is refused here, before anything runs as a
    // wrong uid.
    Result<store::UserRecord> record = store.getUser(peer.user);
    if (!record.ok() && record.status().code() != StatusCode::kNotFound) return record.status();
    if (record.ok() && record->uid) {
      caller.uid = static_cast<uint32_t>(*record->uid);
    } else {
      std::optional<uint32_t> local = net::uidForUserName(peer.user);
      if (!local || *local == 0) {
        return Status::permissionDenied(
            "the API token's user '" + peer.user + "' has no user record with a uid" +
            (local ? " (and is root on the controller's machine, which a token never becomes)"
                   : " and no account on the controller's machine") +
            ", so gpoold cannot tell which Unix user they are; an admin adds one: gpool user "
            "add " +
            peer.user + " --uid UID");
      }
      caller.uid = *local;
    }
  }
  return caller;
}

Status addApiRoutes(net::Router& router, store::Store& store, JobService& jobs,
                    NodeRegistry& registry, ApiRouteOptions options) {
  routes::Context ctx;
  ctx.store = &store;
  ctx.jobs = &jobs;
  ctx.registry = &registry;
  ctx.clock = options.clock ? options.clock : &realClock();
  ctx.caller_for = options.caller_for;
  ctx.user_usage = options.user_usage;
  ctx.group_usage = options.group_usage;
  ctx.usage_half_life_s = options.usage_half_life_s;
  ctx.telemetry = options.telemetry;
  ctx.pool_history = options.pool_history;
  ctx.metrics = options.metrics;
  ctx.metrics_users = options.metrics_users;
  ctx.alerts = options.alerts;
  ctx.webhooks = options.webhooks;
  ctx.gpu_cleared = options.gpu_cleared;
  ctx.node_removed = options.node_removed;
  if (!ctx.caller_for) {
    ctx.caller_for = [&store](const net::Request& req) { return callerFor(store, req.peer); };
  }
  Status added = router.add(
      net::Method::kGet, "/v1/health",
      [](const net::Request&) { return net::Response::json(200, R"({"status":"ok"})"); },
      net::RouteOptions{true});
  if (!added.isOk()) return added;
  if (added = routes::addJobRoutes(router, ctx); !added.isOk()) return added;
  if (added = routes::addNodeRoutes(router, ctx); !added.isOk()) return added;
  if (added = routes::addTelemetryRoutes(router, ctx); !added.isOk()) return added;
  if (added = routes::addTokenRoutes(router, ctx); !added.isOk()) return added;
  if (added = routes::addMetricsRoutes(router, ctx); !added.isOk()) return added;
  if (added = routes::addAlertRoutes(router, ctx); !added.isOk()) return added;
  if (added = routes::addGroupRoutes(router, ctx); !added.isOk()) return added;
  return routes::addCatalogRoutes(router, ctx);
}

}  // namespace gpool::controller
