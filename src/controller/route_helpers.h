#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "controller/job_service.h"
#include "controller/metrics.h"
#include "controller/node_registry.h"
#include "controller/permissions.h"
#include "controller/pool_history.h"
#include "controller/telemetry_history.h"
#include "net/http.h"
#include "net/router.h"
#include "store/store.h"

// Shared pieces of the route files (job_routes.cc, node_routes.cc, catalog_routes.cc); not
// part of the controller's interface.
namespace gpool::controller {
class AlertEngine;
class WebhookSender;
}  // namespace gpool::controller

namespace gpool::controller::routes {

// What every handler may use; referenced objects outlive the server (addApiRoutes' contract).
struct Context {
  store::Store* store = nullptr;
  JobService* jobs = nullptr;
  NodeRegistry* registry = nullptr;
  Clock* clock = nullptr;
  std::function<Result<Caller>(const net::Request&)> caller_for;
  std::function<double(const std::string&)> user_usage;   // may be empty (ApiRouteOptions)
  std::function<double(const std::string&)> group_usage;  // may be empty
  int64_t usage_half_life_s = 0;
  TelemetryHistory* telemetry = nullptr;                 // null: no telemetry (empty histories)
  const PoolHistory* pool_history = nullptr;             // null: GET /v1/pool/history is empty
  const MetricsExporter* metrics = nullptr;              // null: GET /metrics answers 503
  std::vector<std::string> metrics_users;                // may read /metrics besides admins
  AlertEngine* alerts = nullptr;                         // null: acks answer 503
  const WebhookSender* webhooks = nullptr;               // null: no webhooks
  std::function<void(const std::string&)> gpu_cleared;   // may be empty (ApiRouteOptions)
  std::function<void(const std::string&)> node_removed;  // may be empty (ApiRouteOptions)
};

using Body = std::function<Result<net::Response>(const Caller&, const net::Request&)>;

// A handler that resolves the caller, rejects query parameters not in `allowed` (400 naming
// the parameter), runs `body` and turns any error into its HTTP error response.
net::Handler authed(const Context& ctx, std::initializer_list<std::string_view> allowed, Body body);

// A non-negative integer path or query value; InvalidArgument naming `what`.
Result<int64_t> parseId(std::string_view text, std::string_view what);

// The request body as a JSON object (an empty body is {} when `empty_ok`). InvalidArgument
// "body: ..." for bad JSON or a non-object.
Result<nlohmann::json> parseObjectBody(const net::Request& req, bool empty_ok);
// For actions without parameters: the body must be empty or {}.
Status expectNoBody(const net::Request& req);

net::Response jsonResponse(int status, const nlohmann::json& body);

Status addJobRoutes(net::Router& router, const Context& ctx);
Status addNodeRoutes(net::Router& router, const Context& ctx);
Status addCatalogRoutes(net::Router& router, const Context& ctx);
Status addTelemetryRoutes(net::Router& router, const Context& ctx);
Status addTokenRoutes(net::Router& router, const Context& ctx);    // api_tokens.cc
Status addMetricsRoutes(net::Router& router, const Context& ctx);  // metrics.cc
Status addAlertRoutes(net::Router& router, const Context& ctx);    // alert_routes.cc
Status addGroupRoutes(net::Router& router, const Context& ctx);    // group_routes.cc

// Deletes group `name`, its quota, and the group from the records of its members, in one
// transaction; the members it was removed from in *members_removed (may be null).
Status removeGroupWithMembers(store::Store& store, const std::string& name,
                              std::vector<std::string>* members_removed);

}  // namespace gpool::controller::routes
