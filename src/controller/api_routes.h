#pragma once

#include "common/result.h"
#include "common/status.h"
#include "controller/job_service.h"
#include "controller/node_registry.h"
#include "controller/permissions.h"
#include "net/http.h"
#include "net/router.h"
#include "store/store.h"

// The REST routes gpoold serves over src/net (docs/controller.md lists them):
//   GET  /v1/health                 (anonymous)
//   POST /v1/jobs                   body: a JobSpec (api JSON); ?group= charges a group
//   GET  /v1/jobs                   ?user= &group= &state= (repeatable) &after= &limit=
//   GET  /v1/jobs/{id}
//   POST /v1/jobs/{id}/cancel
//   GET  /v1/nodes
// Errors are the JSON error bodies of net::Response::error with the Status's HTTP code; bad
// input is always a 4xx naming the field.
namespace gpool::controller {

// Who a request runs as: the peer's user from the kernel (Unix socket) or a token, with the
// role and groups of the store's user record (a group admin administers the groups they belong
// to). uid 0 is an admin; a user without a record is a plain user. Unauthenticated for
// anonymous peers.
Result<Caller> callerFor(store::Store& store, const net::PeerIdentity& peer);

// Adds the routes; every referenced object must outlive the server.
Status addApiRoutes(net::Router& router, store::Store& store, JobService& jobs,
                    NodeRegistry& registry);

}  // namespace gpool::controller
