#include "controller/api_fixture.h"

#include "api/user.h"
#include "store/api_codec.h"

namespace gpool::controller::testing {

namespace {

api::User user(const std::string& name, uint32_t uid, api::Role role, const std::string& group) {
  api::User u;
  u.name = name;
  u.uid = uid;
  u.role = role;
  u.groups = {group};
  return u;
}

}  // namespace

void ApiTest::SetUp() {
  store_ = openStore(dir_.path() + "/gpool.db");
  registry_ = std::make_unique<NodeRegistry>(*store_, clock_);
  ASSERT_TRUE(registry_->registerNode(makeNode("gpu-01", 2)).ok());
  ASSERT_TRUE(registry_->registerNode(makeNode("gpu-02", 4)).ok());
  jobs_ = std::make_unique<JobService>(*store_, *registry_, clock_, nullptr);
  for (const api::User& u :
       {user("alice", 1001, api::Role::kUser, "ml"), user("bob", 1002, api::Role::kUser, "vision"),
        user("carol", 1003, api::Role::kGroupAdmin, "ml"),
        user("root", 0, api::Role::kAdmin, "ml")}) {
    ASSERT_TRUE(store::saveApiUser(*store_, u).isOk());
  }
  for (const char* g : {"ml", "vision"}) {
    api::Group group;
    group.name = g;
    group.gid = 2000;
    ASSERT_TRUE(store::saveApiGroup(*store_, group).isOk());
  }
  metrics_ = std::make_unique<MetricsExporter>(*store_, *registry_, clock_);
  ApiRouteOptions options;
  options.clock = &clock_;
  options.metrics = metrics_.get();
  telemetry_ = std::make_unique<TelemetryHistory>();
  pool_history_ = std::make_unique<PoolHistory>(*telemetry_, clock_);
  options.pool_history = pool_history_.get();
  store::Store* store = store_.get();
  options.caller_for = [store](const net::Request& req) -> Result<Caller> {
    auto name = req.header("x-test-user");
    if (!name) return Status::unauthenticated("this request needs an identity");
    GPOOL_ASSIGN_OR_RETURN(store::UserRecord record, store->getUser(*name));
    return callerForUser(*store, *name, static_cast<uint32_t>(record.uid.value_or(0)));
  };
  ASSERT_TRUE(addApiRoutes(router_, *store_, *jobs_, *registry_, options).isOk());
  net::ServerOptions server_options;
  server_options.unix_socket_path = dir_.path() + "/api.sock";
  server_ = std::make_unique<net::Server>(server_options, router_);
  ASSERT_TRUE(server_->start().isOk());
  client_ = std::make_unique<net::HttpClient>(
      net::ClientEndpoint::unixSocket(server_options.unix_socket_path), std::chrono::seconds(10));
}

void ApiTest::TearDown() {
  client_.reset();
  if (server_) server_->stop();
  server_.reset();
}

net::Response ApiTest::call(const std::string& user, net::Method method, const std::string& target,
                            const std::string& body) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!user.empty()) headers.emplace_back("x-test-user", user);
  auto r = client_->request(method, target, body, headers);
  EXPECT_TRUE(r.ok()) << target << ": " << r.status().toString();
  return r.ok() ? std::move(r).value() : net::Response{};
}

nlohmann::json ApiTest::body(const net::Response& r) {
  return nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
}

int64_t ApiTest::submit(const std::string& user, const std::string& group, uint32_t gpus_milli) {
  auto caller = callerForUser(*store_, user, 1000);
  EXPECT_TRUE(caller.ok());
  SubmitRequest request;
  request.spec = makeSpec(gpus_milli);
  request.group = group;
  auto ids = jobs_->submit(*caller, request);
  EXPECT_TRUE(ids.ok()) << ids.status().toString();
  return ids.ok() ? ids->front() : -1;
}

void ApiTest::place(int64_t id) {
  auto job = store_->getJob(id);
  ASSERT_TRUE(job.ok());
  api::Allocation a;
  a.node = "gpu-01";
  api::Slice s;
  s.gpu_uuid = "GPU-gpu-01-0";
  s.compute_milli = job->gpu_thousandths;
  s.memory_mib = 1024;
  a.slices.push_back(s);
  ASSERT_TRUE(
      store_->recordPlacement(id, store::placementJsonFor({a}), clock_.now(), "placed").ok());
}

}  // namespace gpool::controller::testing
