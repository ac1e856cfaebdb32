#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "controller/api_routes.h"
#include "controller/controller_fixture.h"
#include "controller/job_service.h"
#include "controller/metrics.h"
#include "controller/node_registry.h"
#include "controller/pool_history.h"
#include "controller/telemetry_history.h"
#include "net/client.h"
#include "net/server.h"
#include "store/sqlite_store.h"

// An in-process API server over a temporary Unix socket, on a SQLite store, with a pool of two
// nodes (gpu-01: 2 GPUs, gpu-02: 4 GPUs) and four users of every role:
//   alice  user         groups [ml]
//   bob    user         groups [vision]
//   carol  group-admin  groups [ml]        (administers ml)
//   root   admin
// Requests name the user they run as in the test-only header x-test-user (the routes'
// caller_for hook, which production never sets); without it a request is unauthenticated.
namespace gpool::controller::testing {

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // One request as `user`; fails the test when no response arrives.
  net::Response call(const std::string& user, net::Method method, const std::string& target,
                     const std::string& body = "");
  net::Response get(const std::string& user, const std::string& target) {
    return call(user, net::Method::kGet, target);
  }
  // The body of a response as JSON (null when it does not parse).
  static nlohmann::json body(const net::Response& r);

  // Submits a one-task job of `gpus_milli` as `user` into `group` (directly through the
  // service); returns its id.
  int64_t submit(const std::string& user, const std::string& group, uint32_t gpus_milli = 500);
  // Places a PENDING job on gpu-01's first GPU (compute share = its GPU thousandths).
  void place(int64_t id);

  TempDir dir_;
  SimClock clock_;
  std::unique_ptr<store::SqliteStore> store_;
  std::unique_ptr<NodeRegistry> registry_;
  std::unique_ptr<JobService> jobs_;
  std::unique_ptr<MetricsExporter> metrics_;  // GET /metrics (no telemetry source)
  // GET /v1/pool/history reads pool_history_ (not sampling by itself: tests add samples).
  std::unique_ptr<TelemetryHistory> telemetry_;
  std::unique_ptr<PoolHistory> pool_history_;
  net::Router router_;  // the routes, kept for inspection (the server gets a copy)
  std::unique_ptr<net::Server> server_;
  std::unique_ptr<net::HttpClient> client_;
};

}  // namespace gpool::controller::testing
