#pragma once

#include <functional>

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

// The REST routes gpoold serves over src/net. docs/controller.md has the route table and
// docs/openapi.json describes every route (a test keeps the two in step with the router):
//   GET  /v1/health                          (anonymous)
//   jobs:   POST/GET /v1/jobs, GET /v1/jobs/{id}, GET /v1/jobs/{id}/events,
//           POST /v1/jobs/{id}/cancel, POST /v1/jobs/{id}/requeue
//   nodes:  GET /v1/nodes, GET/DELETE /v1/nodes/{name}, POST /v1/nodes/{name}/drain|resume,
//           POST /v1/nodes/{name}/gpus/{index}/clear (a held GPU back into scheduling),
//           GET /v1/gpus, GET /v1/summary
//   telemetry: GET /v1/gpus/{uuid}/telemetry, GET /v1/jobs/{id}/telemetry
//   catalog: GET /v1/users|groups|quotas|qos, GET/PUT/DELETE /v1/users/{name},
//           /v1/groups/{name}, /v1/quotas/{subject}/{name}, /v1/qos/{name}; GET /v1/usage;
//           GET /v1/account (the caller: identity, role, groups, quotas and use, fair share)
//   tokens: POST/GET /v1/tokens, DELETE /v1/tokens/{id}, POST /v1/join-tokens (api_tokens.h)
//   metrics: GET /metrics (Prometheus text; admins and configured users, metrics.h)
//   alerts: GET /v1/alerts, GET /v1/alerts/{id}, POST /v1/alerts/{id}/ack,
//           GET /v1/alerts/webhooks (alerts.h, webhooks.h)
// Errors are the JSON error bodies of net::Response::error with the Status's HTTP code; bad
// input (bad JSON, unknown fields or query parameters, bad paging, bad names) is always a 4xx
// naming the field.
namespace gpool::controller {

class AlertEngine;
class WebhookSender;

// The JSON of one alert (GET /v1/alerts/{id} without its events) and the user it concerns
// (its `user` label; empty for alerts about the pool).
nlohmann::json alertJson(const store::AlertRecord& alert);
std::string alertUser(const store::AlertRecord& alert);

// Who a request runs as: the peer's user from the kernel (Unix socket) or a token, with the
// role and groups of the store's user record (a group admin administers the groups they belong
// to). uid 0 on the Unix socket is an admin; a user without a record is a plain user. A token's
// user gets the uid of their record, else of the controller machine's account of that name;
// PermissionDenied when neither gives a uid other than 0. Unauthenticated for anonymous peers.
Result<Caller> callerFor(store::Store& store, const net::PeerIdentity& peer);
// The caller for a known user name (the part of callerFor after the peer is identified).
Result<Caller> callerForUser(store::Store& store, const std::string& user, uint32_t uid);

struct ApiRouteOptions {
  // Reads the time (usage defaults, quota timestamps); null: realClock(). Must outlive the
  // server.
  Clock* clock = nullptr;
  // Decides who a request runs as; empty: callerFor(store, request.peer). Tests use it to act
  // as users of every role over one socket.
  std::function<Result<Caller>(const net::Request&)> caller_for;
  // Fair share for GET /v1/account: the scheduler's decayed usage (billed GPU-seconds) of a user
  // and of a group, e.g. SchedulingLoop::userUsage/groupUsage, and its half-life. Empty: the
  // route reports "fair_share": null. Called from the server's threads.
  std::function<double(const std::string&)> user_usage;
  std::function<double(const std::string&)> group_usage;
  int64_t usage_half_life_s = 0;
  // The agents' telemetry (latest readings in /v1/gpus, the history routes); null: none. Must
  // outlive the server.
  TelemetryHistory* telemetry = nullptr;
  // The pool's allocated/used history (GET /v1/pool/history); null: the route answers with no
  // points. Must outlive the server.
  const PoolHistory* pool_history = nullptr;
  // GET /metrics (Prometheus): admins and `metrics_users` read it; null: the route answers 503.
  // Must outlive the server.
  const MetricsExporter* metrics = nullptr;
  std::vector<std::string> metrics_users;
  // The alerts (GET /v1/alerts reads the store; acks go through the engine) and the webhooks'
  // delivery state; null: acks answer 503, no webhooks. Must outlive the server.
  AlertEngine* alerts = nullptr;
  const WebhookSender* webhooks = nullptr;
  // Called with the node's name after an admin cleared a GPU hold (gpoold: the agent link
  // re-applies the node's latest findings). May be empty.
  std::function<void(const std::string&)> gpu_cleared;
  // Called after an admin removed a node (DELETE /v1/nodes/{name}), to disconnect its agent
  // (gpoold: AgentLink::disconnect). Empty: nothing more is done.
  std::function<void(const std::string&)> node_removed;
};

// The body of GET /v1/summary: nodes, GPUs and jobs by state (node states derived from what
// runs, as in /v1/nodes). Reads the store (running jobs, job counts); shared with the live
// feed's summary topic.
Result<nlohmann::json> poolSummary(store::Store& store, const NodeRegistry& registry);

// Adds the routes; every referenced object must outlive the server.
Status addApiRoutes(net::Router& router, store::Store& store, JobService& jobs,
                    NodeRegistry& registry, ApiRouteOptions options = {});

}  // namespace gpool::controller
