#include "controller/api_tokens.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "api/json_reader.h"
#include "api/node.h"
#include "api/text.h"
#include "common/units.h"
#include "controller/route_helpers.h"

namespace gpool::controller {

using nlohmann::json;

namespace {

// last_used is a convenience for `gpool token list`, not an audit trail: one write a minute.
constexpr Micros kTouchEvery = std::chrono::minutes(1);

std::string_view storeKindFor(std::string_view token_kind) {
  if (token_kind == net::kUserTokenKind) return store::kTokenKindUser;
  if (token_kind == kJoinTokenKind) return store::kTokenKindJoin;
  if (token_kind == kNodeTokenKind) return store::kTokenKindNode;
  return "";
}

}  // namespace

Result<int64_t> tokenRecordId(std::string_view token_id) {
  int64_t id = 0;
  auto [ptr, ec] = std::from_chars(token_id.data(), token_id.data() + token_id.size(), id);
  if (token_id.empty() || ec != std::errc() || ptr != token_id.data() + token_id.size()) {
    return Status::internal("token id '" + std::string(token_id) + "' is not a record id");
  }
  return id;
}

StoreTokenVerifier::StoreTokenVerifier(store::Store& store, Clock& clock)
    : store_(store), clock_(clock) {}

Result<net::TokenIdentity> StoreTokenVerifier::verify(std::string_view token) {
  GPOOL_ASSIGN_OR_RETURN(net::TokenParts parts, net::parseApiToken(token));
  std::string_view kind = storeKindFor(parts.kind);
  if (kind.empty()) {
    return Status::unauthenticated("unknown token kind '" + parts.kind + "'");
  }
  Result<store::TokenRecord> record = store_.findToken(net::hashApiToken(parts.id, parts.secret));
  if (!record.ok()) {
    if (record.status().code() == StatusCode::kNotFound) {
      return Status::unauthenticated("unknown token id " + parts.id);
    }
    spdlog::error("token lookup failed: {}", record.status().toString());
    return Status::unavailable("cannot check the token now: the store failed");
  }
  if (record->kind != kind) return Status::unauthenticated("unknown token id " + parts.id);
  TimePoint now = clock_.now();
  if (record->revoked) return Status::unauthenticated("token " + parts.id + " was revoked");
  if (record->expires && *record->expires <= now) {
    return Status::unauthenticated("token " + parts.id + " has expired");
  }
  if (record->kind == store::kTokenKindJoin && !record->reusable && record->uses > 0) {
    return Status::unauthenticated("join token " + parts.id + " was already used");
  }
  bool touch = false;
  {
    std::lock_guard lock(mu_);
    auto it = touched_.find(record->id);
    if (it == touched_.end() || now - it->second >= kTouchEvery) {
      touched_[record->id] = now;
      touch = true;
    }
  }
  if (touch) {
    if (Status s = store_.touchToken(record->id, now); !s.isOk()) {
      spdlog::warn("cannot record the use of token {}: {}", record->id, s.toString());
    }
  }
  net::TokenIdentity identity;
  identity.token_id = std::to_string(record->id);
  if (record->kind == store::kTokenKindUser) {
    identity.user = record->user;
  } else if (record->kind == store::kTokenKindJoin) {
    identity.user = "join-token-" + identity.token_id;
    identity.roles.emplace_back(kAgentJoinRole);
  } else {
    identity.user = record->node;
    identity.roles.emplace_back(kAgentNodeRole);
  }
  return identity;
}

Result<NewNodeCredential> makeNodeCredential(const std::string& node, TimePoint now) {
  GPOOL_ASSIGN_OR_RETURN(net::NewApiToken t, net::generateApiToken(kNodeTokenKind));
  NewNodeCredential out;
  out.record.kind = store::kTokenKindNode;
  out.record.user = node;
  out.record.node = node;
  out.record.hash = t.hash;
  out.record.public_id = t.id;
  out.record.description = "node credential of " + node;
  out.record.created = now;
  out.token = std::move(t.token);
  return out;
}

namespace routes {
namespace {

json tokenJson(const store::TokenRecord& t) {
  json j{{"id", t.id},
         {"kind", t.kind},
         {"public_id", t.public_id},
         {"name", t.description},
         {"user", t.user},
         {"created_us", toUnixMicros(t.created)}};
  auto put = [&j](const char* key, const std::optional<TimePoint>& v) {
    if (v) j[key] = toUnixMicros(*v);  // absent when unset
  };
  put("expires_us", t.expires);
  put("last_used_us", t.last_used);
  put("revoked_us", t.revoked);
  if (t.kind == store::kTokenKindNode || (t.kind == store::kTokenKindJoin && !t.node.empty())) {
    j["node"] = t.node;
  }
  if (t.kind == store::kTokenKindJoin) {
    j["reusable"] = t.reusable;
    j["uses"] = t.uses;
  }
  return j;
}

// "30d", "12h", "1-00:00:00": a positive duration from now.
Result<std::optional<TimePoint>> expiryFrom(const std::optional<std::string>& text, TimePoint now,
                                            std::string_view field) {
  if (!text) return std::optional<TimePoint>();
  Result<int64_t> seconds = parseDuration(*text);
  if (!seconds.ok() || *seconds <= 0) {
    return Status::invalidArgument(std::string(field) + ": '" + *text +
                                   "' is not a positive duration (e.g. \"30d\", \"12h\")" +
                                   (seconds.ok() ? "" : ": " + seconds.status().message()));
  }
  return std::optional<TimePoint>(now + Micros(*seconds * 1'000'000));
}

Status checkName(const std::string& name) {
  if (name.size() > 200) return Status::invalidArgument("body.name: longer than 200 characters");
  return api::validateDisplayText(name, "body.name");
}

}  // namespace

Status addTokenRoutes(net::Router& router, const Context& ctx) {
  Status s = router.add(
      net::Method::kPost, "/v1/tokens",
      authed(
          ctx, {}, [ctx](const Caller& caller, const net::Request& req) -> Result<net::Response> {
            GPOOL_ASSIGN_OR_RETURN(json body, parseObjectBody(req, true));
            std::string name;
            std::optional<std::string> user;
            std::optional<std::string> expires_in;
            api::ObjectReader r(body, "body");
            r.string("name", &name);
            r.optionalString("user", &user);
            r.optionalString("expires_in", &expires_in);
            GPOOL_RETURN_IF_ERROR(r.finish());
            GPOOL_RETURN_IF_ERROR(checkName(name));
            std::string owner = user.value_or(caller.user);
            if (owner.empty()) return Status::invalidArgument("body.user: must not be empty");
            if (owner != caller.user) {
              GPOOL_RETURN_IF_ERROR(
                  checkCatalogAdmin(caller, "create an API token for user '" + owner + "'"));
            }
            TimePoint now = ctx.clock->now();
            GPOOL_ASSIGN_OR_RETURN(std::optional<TimePoint> expires,
                                   expiryFrom(expires_in, now, "body.expires_in"));
            GPOOL_ASSIGN_OR_RETURN(net::NewApiToken t, net::generateApiToken(net::kUserTokenKind));
            store::TokenRecord record;
            record.kind = store::kTokenKindUser;
            record.user = owner;
            record.hash = t.hash;
            record.public_id = t.id;
            record.description = name;
            record.created = now;
            record.expires = expires;
            GPOOL_ASSIGN_OR_RETURN(record.id, ctx.store->createToken(record, caller.user));
            spdlog::info("{} created API token {} ({}) for {}", caller.user, record.id, t.id,
                         owner);
            json out = tokenJson(record);
            out["token"] = t.token;
            return jsonResponse(201, out);
          }));
  if (!s.isOk()) return s;
  s = router.add(
      net::Method::kGet, "/v1/tokens",
      authed(ctx, {}, [ctx](const Caller& caller, const net::Request&) -> Result<net::Response> {
        // Admins see every token; everyone else their own API tokens.
        bool all = caller.role == Role::kAdmin;
        GPOOL_ASSIGN_OR_RETURN(auto tokens, ctx.store->listTokens(all ? "" : caller.user));
        json list = json::array();
        for (const store::TokenRecord& t : tokens) {
          if (!all && t.kind != store::kTokenKindUser) continue;
          list.push_back(tokenJson(t));
        }
        return jsonResponse(200, json{{"tokens", std::move(list)}});
      }));
  if (!s.isOk()) return s;
  s = router.add(
      net::Method::kDelete, "/v1/tokens/{id}",
      authed(ctx, {},
             [ctx](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
               GPOOL_ASSIGN_OR_RETURN(store::TokenRecord t, ctx.store->getToken(id));
               bool own = t.kind == store::kTokenKindUser && t.user == caller.user;
               if (!own) {
                 GPOOL_RETURN_IF_ERROR(checkCatalogAdmin(
                     caller, "revoke token " + std::to_string(id) + " of '" + t.user + "'"));
               }
               TimePoint now = ctx.clock->now();
               GPOOL_RETURN_IF_ERROR(ctx.store->revokeToken(id, now, caller.user));
               spdlog::info("{} revoked {} token {} of {}", caller.user, t.kind, id, t.user);
               GPOOL_ASSIGN_OR_RETURN(t, ctx.store->getToken(id));
               return jsonResponse(200, tokenJson(t));
             }));
  if (!s.isOk()) return s;
  return router.add(
      net::Method::kPost, "/v1/join-tokens",
      authed(
          ctx, {}, [ctx](const Caller& caller, const net::Request& req) -> Result<net::Response> {
            GPOOL_RETURN_IF_ERROR(checkCatalogAdmin(caller, "create a join token"));
            GPOOL_ASSIGN_OR_RETURN(json body, parseObjectBody(req, true));
            std::string name;
            std::optional<std::string> expires_in;
            std::optional<std::string> node;
            bool reusable = false;
            api::ObjectReader r(body, "body");
            r.string("name", &name);
            r.optionalString("expires_in", &expires_in);
            r.boolean("reusable", &reusable);
            // A token for one node: lets a machine join under an existing node's name (a
            // reinstalled server), which an ordinary join token refuses.
            r.optionalString("node", &node);
            GPOOL_RETURN_IF_ERROR(r.finish());
            GPOOL_RETURN_IF_ERROR(checkName(name));
            if (node) {
              Status valid = api::validateNodeName(*node);
              if (!valid.isOk()) return valid.withContext("body.node");
            }
            TimePoint now = ctx.clock->now();
            // A join token always expires: it is a shared secret typed into machines.
            GPOOL_ASSIGN_OR_RETURN(std::optional<TimePoint> expires,
                                   expiryFrom(expires_in.value_or("1h"), now, "body.expires_in"));
            GPOOL_ASSIGN_OR_RETURN(net::NewApiToken t, net::generateApiToken(kJoinTokenKind));
            store::TokenRecord record;
            record.kind = store::kTokenKindJoin;
            record.user = caller.user;
            record.hash = t.hash;
            record.public_id = t.id;
            record.description = name;
            record.created = now;
            record.expires = expires;
            record.reusable = reusable;
            record.node = node.value_or("");
            GPOOL_ASSIGN_OR_RETURN(record.id, ctx.store->createToken(record, caller.user));
            spdlog::info("{} created {} join token {} ({})", caller.user,
                         reusable ? "a reusable" : "a one-time", record.id, t.id);
            json out = tokenJson(record);
            out["token"] = t.token;
            return jsonResponse(201, out);
          }));
}

}  // namespace routes
}  // namespace gpool::controller
