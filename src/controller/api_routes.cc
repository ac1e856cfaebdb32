#include "controller/api_routes.h"

#include <charconv>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job.h"
#include "api/job_spec.h"
#include "api/node.h"
#include "api/user.h"
#include "store/api_codec.h"

namespace gpool::controller {

namespace {

using nlohmann::json;

Result<int64_t> parseId(std::string_view text, std::string_view what) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || v < 0) {
    return Status::invalidArgument(std::string(what) + ": '" + std::string(text) +
                                   "' is not a non-negative integer");
  }
  return v;
}

net::Response errorResponse(const Status& s) {
  return net::Response::error(s);
}

// Runs `body` for an authenticated caller; any error becomes its HTTP error response.
template <typename F>
net::Handler withCaller(store::Store& store, F body) {
  return [&store, body](const net::Request& req) -> net::Response {
    Result<Caller> caller = callerFor(store, req.peer);
    if (!caller.ok()) return errorResponse(caller.status());
    Result<net::Response> r = body(*caller, req);
    return r.ok() ? std::move(r).value() : errorResponse(r.status());
  };
}

Result<json> jobJson(const store::JobRecord& record) {
  GPOOL_ASSIGN_OR_RETURN(api::Job job, store::apiJobFrom(record));
  return api::toJson(job);
}

}  // namespace

Result<Caller> callerFor(store::Store& store, const net::PeerIdentity& peer) {
  if (!peer.authenticated()) return Status::unauthenticated("this request needs an identity");
  Caller caller;
  caller.user = peer.user;
  caller.uid = peer.uid;
  if (peer.kind == net::PeerIdentity::Kind::kUnixPeer && peer.uid == 0) {
    caller.role = Role::kAdmin;
    return caller;
  }
  Result<api::User> user = store::loadApiUser(store, peer.user);
  if (!user.ok()) {
    if (user.status().code() == StatusCode::kNotFound) return caller;
    return user.status();
  }
  if (peer.kind != net::PeerIdentity::Kind::kUnixPeer) caller.uid = user->uid;
  switch (user->role) {
    case api::Role::kUser: caller.role = Role::kUser; break;
    case api::Role::kGroupAdmin:
      caller.role = Role::kGroupAdmin;
      caller.admin_groups = user->groups;
      break;
    case api::Role::kAdmin: caller.role = Role::kAdmin; break;
  }
  return caller;
}

Status addApiRoutes(net::Router& router, store::Store& store, JobService& jobs,
                    NodeRegistry& registry) {
  // Plain checks rather than GPOOL_RETURN_IF_ERROR: the handlers use that macro inside, and a
  // nested expansion would shadow its variable.
  Status added;
  added = router.add(
      net::Method::kGet, "/v1/health",
      [](const net::Request&) { return net::Response::json(200, R"({"status":"ok"})"); },
      net::RouteOptions{true});
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kPost, "/v1/jobs",
      withCaller(store,
                 [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
                   json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
                   if (body.is_discarded()) return Status::invalidArgument("body: not valid JSON");
                   SubmitRequest submit;
                   GPOOL_RETURN_IF_ERROR(api::fromJson(body, &submit.spec, "job"));
                   submit.group = req.queryParam("group").value_or("");
                   GPOOL_ASSIGN_OR_RETURN(std::vector<int64_t> ids, jobs.submit(caller, submit));
                   return net::Response::json(201, json{{"ids", ids}}.dump());
                 }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kGet, "/v1/jobs",
      withCaller(store,
                 [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
                   store::JobFilter filter;
                   filter.user = req.queryParam("user");
                   filter.group = req.queryParam("group");
                   for (const std::string& s : req.queryParams("state")) {
                     GPOOL_ASSIGN_OR_RETURN(api::JobState state, api::parseJobState(s));
                     filter.states.emplace_back(api::jobStateName(state));
                   }
                   if (auto after = req.queryParam("after")) {
                     GPOOL_ASSIGN_OR_RETURN(filter.after_id, parseId(*after, "after"));
                   }
                   if (auto limit = req.queryParam("limit")) {
                     GPOOL_ASSIGN_OR_RETURN(int64_t l, parseId(*limit, "limit"));
                     if (l < 1 || l > store::kMaxPageSize) {
                       return Status::invalidArgument("limit: must be in [1, " +
                                                      std::to_string(store::kMaxPageSize) + "]");
                     }
                     filter.limit = static_cast<int32_t>(l);
                   }
                   GPOOL_ASSIGN_OR_RETURN(store::JobPage page, jobs.list(caller, filter));
                   json out = {{"jobs", json::array()}, {"next_after", nullptr}};
                   for (const store::JobRecord& r : page.jobs) {
                     GPOOL_ASSIGN_OR_RETURN(json j, jobJson(r));
                     out["jobs"].push_back(std::move(j));
                   }
                   if (page.next_after_id) out["next_after"] = *page.next_after_id;
                   return net::Response::json(200, out.dump());
                 }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kGet, "/v1/jobs/{id}",
      withCaller(store,
                 [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
                   GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
                   GPOOL_ASSIGN_OR_RETURN(api::Job job, jobs.show(caller, id));
                   return net::Response::json(200, api::toJson(job).dump());
                 }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kPost, "/v1/jobs/{id}/cancel",
      withCaller(store,
                 [&jobs](const Caller& caller, const net::Request& req) -> Result<net::Response> {
                   GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
                   GPOOL_RETURN_IF_ERROR(jobs.cancel(caller, id));
                   return net::Response::json(200, json{{"id", id}, {"state", "CANCELLED"}}.dump());
                 }));
  if (!added.isOk()) return added;

  added = router.add(
      net::Method::kGet, "/v1/nodes",
      withCaller(store, [&registry](const Caller&, const net::Request&) -> Result<net::Response> {
        json out = json::array();
        for (const api::Node& node : registry.nodes())
          out.push_back(api::toJson(node));
        return net::Response::json(200, json{{"nodes", out}}.dump());
      }));
  if (!added.isOk()) return added;
  return Status::ok();
}

}  // namespace gpool::controller
