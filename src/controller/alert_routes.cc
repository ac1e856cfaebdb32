// The alert routes (docs/alerts.md):
//   GET  /v1/alerts ?state=firing|resolved|all &before= &limit=   newest first
//   GET  /v1/alerts/{id}                                           with its history
//   POST /v1/alerts/{id}/ack                                       admins
//   GET  /v1/alerts/webhooks                                       admins: delivery state
// Admins and group admins see every alert; a plain user sees the alerts whose `user` label is
// theirs (their idle allocation, their stray process).
#include <nlohmann/json.hpp>

#include "controller/alerts.h"
#include "controller/api_routes.h"
#include "controller/route_helpers.h"
#include "controller/webhooks.h"

namespace gpool::controller {

using nlohmann::json;

namespace {

json timeOrNull(const std::optional<TimePoint>& t) {
  return t ? json(toUnixMicros(*t)) : json(nullptr);
}

std::string userOf(const json& labels) {
  if (!labels.is_object()) return "";
  auto it = labels.find("user");
  return it != labels.end() && it->is_string() ? it->get<std::string>() : "";
}

bool maySee(const Caller& caller, const json& labels) {
  return caller.role != Role::kUser || userOf(labels) == caller.user;
}

}  // namespace

json alertJson(const store::AlertRecord& a) {
  json labels = json::parse(a.labels_json, nullptr, false);
  if (!labels.is_object()) labels = json::object();
  return {{"id", a.id},
          {"rule", a.rule},
          {"alertname", labels.value("alertname", a.rule)},
          {"severity", a.severity},
          {"state", a.state},
          {"labels", labels},
          {"summary", a.summary},
          {"fingerprint", a.fingerprint},
          {"started_us", toUnixMicros(a.started)},
          {"resolved_us", timeOrNull(a.resolved)},
          {"acked_by", a.acked_by.empty() ? json(nullptr) : json(a.acked_by)},
          {"acked_us", timeOrNull(a.acked)}};
}

std::string alertUser(const store::AlertRecord& a) {
  return userOf(json::parse(a.labels_json, nullptr, false));
}

namespace routes {

Status addAlertRoutes(net::Router& router, const Context& ctx) {
  auto unavailable = [] { return Status::unavailable("this controller runs no alert engine"); };
  GPOOL_RETURN_IF_ERROR(router.add(
      net::Method::kGet, "/v1/alerts",
      authed(ctx, {"state", "before", "limit"},
             [ctx](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               store::AlertFilter filter;
               std::string state = req.queryParam("state").value_or("all");
               if (state != "firing" && state != "resolved" && state != "all") {
                 return Status::invalidArgument("state: '" + state +
                                                "' is not firing, resolved or all");
               }
               if (state != "all") filter.state = state;
               if (auto b = req.queryParam("before")) {
                 GPOOL_ASSIGN_OR_RETURN(filter.before_id, parseId(*b, "before"));
               }
               if (auto l = req.queryParam("limit")) {
                 GPOOL_ASSIGN_OR_RETURN(int64_t limit, parseId(*l, "limit"));
                 if (limit < 1 || limit > 10000) {
                   return Status::invalidArgument("limit: must be between 1 and 10000");
                 }
                 filter.limit = static_cast<int32_t>(limit);
               }
               GPOOL_ASSIGN_OR_RETURN(std::vector<store::AlertRecord> alerts,
                                      ctx.store->listAlerts(filter));
               json out = json::array();
               for (const store::AlertRecord& a : alerts) {
                 json j = alertJson(a);
                 if (maySee(caller, j["labels"])) out.push_back(std::move(j));
               }
               json next = alerts.size() == static_cast<size_t>(filter.limit)
                               ? json(alerts.back().id)
                               : json(nullptr);
               return jsonResponse(200, json{{"alerts", out}, {"next_before", next}});
             })));
  GPOOL_RETURN_IF_ERROR(router.add(
      net::Method::kGet, "/v1/alerts/webhooks",
      authed(ctx, {}, [ctx](const Caller& caller, const net::Request&) -> Result<net::Response> {
        if (caller.role != Role::kAdmin) {
          return Status::permissionDenied("only admins see the webhooks");
        }
        json hooks = json::array();
        if (ctx.webhooks) {
          for (const WebhookStatus& s : ctx.webhooks->status()) {
            hooks.push_back(
                {{"url", s.url},
                 {"queued", s.queued},
                 {"delivered", s.delivered},
                 {"failed_attempts", s.failed_attempts},
                 {"dropped", s.dropped},
                 {"last_error", s.last_error.empty() ? json(nullptr) : json(s.last_error)},
                 {"last_error_us", timeOrNull(s.last_error_at)},
                 {"last_delivered_us", timeOrNull(s.last_delivered_at)}});
          }
        }
        return jsonResponse(200, json{{"webhooks", hooks}});
      })));
  GPOOL_RETURN_IF_ERROR(router.add(
      net::Method::kGet, "/v1/alerts/{id}",
      authed(ctx, {},
             [ctx](const Caller& caller, const net::Request& req) -> Result<net::Response> {
               GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
               GPOOL_ASSIGN_OR_RETURN(store::AlertRecord a, ctx.store->getAlert(id));
               json j = alertJson(a);
               if (!maySee(caller, j["labels"])) {
                 return Status::permissionDenied("alert " + std::to_string(id) +
                                                 " is not about your jobs");
               }
               GPOOL_ASSIGN_OR_RETURN(std::vector<store::AlertEvent> events,
                                      ctx.store->alertEvents(id));
               json ev = json::array();
               for (const store::AlertEvent& e : events) {
                 ev.push_back({{"seq", e.seq},
                               {"time_us", toUnixMicros(e.time)},
                               {"event", e.event},
                               {"actor", e.actor},
                               {"detail", e.detail}});
               }
               j["events"] = std::move(ev);
               return jsonResponse(200, j);
             })));
  return router.add(net::Method::kPost, "/v1/alerts/{id}/ack",
                    authed(ctx, {},
                           [ctx, unavailable](const Caller& caller,
                                              const net::Request& req) -> Result<net::Response> {
                             GPOOL_ASSIGN_OR_RETURN(int64_t id, parseId(req.pathParam("id"), "id"));
                             GPOOL_RETURN_IF_ERROR(expectNoBody(req));
                             if (caller.role != Role::kAdmin) {
                               return Status::permissionDenied("only admins acknowledge alerts");
                             }
                             if (ctx.alerts == nullptr) return unavailable();
                             GPOOL_RETURN_IF_ERROR(ctx.alerts->ack(id, caller.user));
                             GPOOL_ASSIGN_OR_RETURN(store::AlertRecord a, ctx.store->getAlert(id));
                             return jsonResponse(200, alertJson(a));
                           }));
}

}  // namespace routes
}  // namespace gpool::controller
