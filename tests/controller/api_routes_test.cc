// Drives the REST routes over a real Unix socket (api_fixture.h): every route as each role,
// and every class of bad input.
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "controller/api_fixture.h"
#include "store/api_codec.h"

namespace gpool::controller::testing {
namespace {

using net::Method;
using nlohmann::json;

std::string jobPath(int64_t id, const std::string& tail = "") {
  return "/v1/jobs/" + std::to_string(id) + tail;
}

// The error message of an error response.
std::string message(const net::Response& r) {
  json j = json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("error")) return "<no error body: " + r.body + ">";
  return j["error"].value("message", "");
}

// Every route that changes a job runs on the server's blocking pool (its handler waits for a
// durable commit), and no read does: reads keep the API threads to themselves.
TEST_F(ApiTest, JobWritesAndOnlyThemRunOnTheBlockingPool) {
  const std::set<std::string> writes = {
      "POST /v1/jobs",       "POST /v1/jobs/{id}/cancel", "POST /v1/jobs/{id}/requeue",
      "PATCH /v1/jobs/{id}", "POST /v1/jobs/{id}/hold",   "POST /v1/jobs/{id}/release"};
  std::set<std::string> blocking;
  size_t reads = 0;
  for (const net::Router::Route& route : router_.routes()) {
    const std::string name = std::string(net::methodName(route.method)) + " " + route.pattern;
    if (route.options.blocking) blocking.insert(name);
    if (route.method == Method::kGet) {
      ++reads;
      EXPECT_FALSE(route.options.blocking) << name;
    }
  }
  EXPECT_EQ(blocking, writes);
  EXPECT_GT(reads, 10u);
}

TEST_F(ApiTest, EventsShowTheJobsHistory) {
  int64_t id = submit("alice", "ml");
  place(id);
  clock_.advance(std::chrono::seconds(60));
  ASSERT_TRUE(store_->recordEnd(id, api::JobState::kCompleted, 0, clock_.now(), "done").isOk());
  auto r = get("alice", jobPath(id, "/events"));
  ASSERT_EQ(r.status, 200) << r.body;
  json j = body(r);
  EXPECT_EQ(j["id"], id);
  ASSERT_EQ(j["events"].size(), 3u) << r.body;
  EXPECT_EQ(j["events"][0]["from_state"], "");
  EXPECT_EQ(j["events"][0]["to_state"], "PENDING");
  EXPECT_EQ(j["events"][1]["to_state"], "RUNNING");
  EXPECT_EQ(j["events"][1]["reason"], "placed");
  EXPECT_EQ(j["events"][2]["from_state"], "RUNNING");
  EXPECT_EQ(j["events"][2]["to_state"], "COMPLETED");
  EXPECT_EQ(j["events"][2]["time_us"].get<int64_t>() - j["events"][1]["time_us"].get<int64_t>(),
            60'000'000);
  EXPECT_LT(j["events"][0]["seq"].get<int64_t>(), j["events"][1]["seq"].get<int64_t>());

  EXPECT_EQ(get("bob", jobPath(id, "/events")).status, 403);
  EXPECT_EQ(get("carol", jobPath(id, "/events")).status, 200);
  EXPECT_EQ(get("root", jobPath(id, "/events")).status, 200);
  EXPECT_EQ(get("alice", jobPath(999999, "/events")).status, 404);
  auto bad = get("alice", "/v1/jobs/x1/events");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(message(bad).find("id:"), std::string::npos) << bad.body;
  EXPECT_EQ(get("", jobPath(id, "/events")).status, 401);
}

TEST_F(ApiTest, RequeueMovesAPreemptedJobBackToPending) {
  int64_t id = submit("alice", "ml");
  auto pending = call("alice", Method::kPost, jobPath(id, "/requeue"));
  EXPECT_EQ(pending.status, 409) << pending.body;  // PENDING -> PENDING is not a requeue
  place(id);
  ASSERT_TRUE(store_->recordPreemption(id, false, clock_.now(), "preempted").isOk());
  EXPECT_EQ(call("bob", Method::kPost, jobPath(id, "/requeue")).status, 403);
  auto body_given = call("alice", Method::kPost, jobPath(id, "/requeue"), R"({"now":true})");
  EXPECT_EQ(body_given.status, 400);
  EXPECT_NE(message(body_given).find("body.now"), std::string::npos) << body_given.body;
  auto ok = call("alice", Method::kPost, jobPath(id, "/requeue"));
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(body(ok)["state"], "PENDING");
  auto job = store_->getJob(id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, api::JobState::kPending);
  EXPECT_EQ(job->requeue_count, 1);
  EXPECT_EQ(call("alice", Method::kPost, jobPath(id, "/requeue")).status, 409);
  EXPECT_EQ(call("root", Method::kPost, jobPath(424242, "/requeue")).status, 404);
}

TEST_F(ApiTest, HoldKeepsAJobPendingUntilReleased) {
  int64_t id = submit("alice", "ml");
  auto held = call("alice", Method::kPost, jobPath(id, "/hold"));
  ASSERT_EQ(held.status, 200) << held.body;
  EXPECT_EQ(body(held)["state"], "PENDING");
  EXPECT_EQ(body(held)["reason"], "JobHeldUser");
  EXPECT_EQ(body(get("alice", jobPath(id)))["reason"], "JobHeldUser");
  EXPECT_EQ(call("alice", Method::kPost, jobPath(id, "/hold")).status, 409);
  EXPECT_EQ(call("bob", Method::kPost, jobPath(id, "/release")).status, 403);
  auto released = call("alice", Method::kPost, jobPath(id, "/release"));
  ASSERT_EQ(released.status, 200) << released.body;
  EXPECT_EQ(body(released)["reason"], "released by alice");
  EXPECT_EQ(call("alice", Method::kPost, jobPath(id, "/release")).status, 409);

  // An admin hold: its owner cannot release it; the group's admin can.
  ASSERT_EQ(call("root", Method::kPost, jobPath(id, "/hold")).status, 200);
  EXPECT_EQ(body(get("alice", jobPath(id)))["reason"], "JobHeldAdmin");
  auto refused = call("alice", Method::kPost, jobPath(id, "/release"));
  EXPECT_EQ(refused.status, 403);
  EXPECT_NE(message(refused).find("administrator"), std::string::npos) << refused.body;
  EXPECT_EQ(call("carol", Method::kPost, jobPath(id, "/release")).status, 200);

  auto events = body(get("alice", jobPath(id, "/events")))["events"];
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[1]["reason"], "JobHeldUser");
  EXPECT_EQ(events[3]["reason"], "JobHeldAdmin");

  int64_t running = submit("alice", "ml");
  place(running);
  EXPECT_EQ(call("alice", Method::kPost, jobPath(running, "/hold")).status, 409);
  EXPECT_EQ(call("alice", Method::kPost, jobPath(running, "/release")).status, 409);
  EXPECT_EQ(call("root", Method::kPost, jobPath(777777, "/hold")).status, 404);
  EXPECT_EQ(call("alice", Method::kPost, jobPath(id, "/hold"), "[]").status, 400);
}

TEST_F(ApiTest, AdminsPatchTimeLimitAndPriorityOfPendingJobs) {
  int64_t id = submit("alice", "ml");
  EXPECT_EQ(call("alice", Method::kPatch, jobPath(id), R"({"priority":5})").status, 403);
  EXPECT_EQ(call("carol", Method::kPatch, jobPath(id), R"({"priority":5})").status, 403);
  auto patched = call("root", Method::kPatch, jobPath(id), R"({"time_limit":"2h","priority":5})");
  ASSERT_EQ(patched.status, 200) << patched.body;
  EXPECT_EQ(body(patched)["spec"]["time_limit_seconds"], 7200);
  EXPECT_EQ(store_->getJob(id)->priority, 5);
  auto events = body(get("alice", jobPath(id, "/events")))["events"];
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1]["reason"], "time limit set to 7200 s, priority set to 5 by root");
  ASSERT_EQ(call("root", Method::kPatch, jobPath(id), R"({"time_limit_seconds":60})").status, 200);
  EXPECT_EQ(store_->getJob(id)->priority, 5);  // unchanged when not given

  for (const char* bad : {"{}", R"({"priority":"high"})", R"({"priority":2000000})",
                          R"({"time_limit":"soon"})", R"({"nice":1})", "[1]", "{"}) {
    auto r = call("root", Method::kPatch, jobPath(id), bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
  EXPECT_NE(message(call("root", Method::kPatch, jobPath(id), R"({"nice":1})")).find("body.nice"),
            std::string::npos);
  EXPECT_NE(message(call("root", Method::kPatch, jobPath(id), "{}")).find("body.time_limit"),
            std::string::npos);
  EXPECT_EQ(call("root", Method::kPatch, jobPath(888888), R"({"priority":1})").status, 404);
  place(id);
  EXPECT_EQ(call("root", Method::kPatch, jobPath(id), R"({"priority":1})").status, 409);
}

TEST_F(ApiTest, NodeShowDrainAndResume) {
  auto shown = get("bob", "/v1/nodes/gpu-02");
  ASSERT_EQ(shown.status, 200) << shown.body;
  EXPECT_EQ(body(shown)["gpus"].size(), 4u);
  EXPECT_EQ(get("bob", "/v1/nodes/gpu-99").status, 404);
  auto bad_name = get("bob", "/v1/nodes/bad%20name");
  EXPECT_EQ(bad_name.status, 400);
  EXPECT_NE(message(bad_name).find("name"), std::string::npos) << bad_name.body;

  const std::string drain = "/v1/nodes/gpu-01/drain";
  EXPECT_EQ(call("alice", Method::kPost, drain, R"({"reason":"x"})").status, 403);
  EXPECT_EQ(call("carol", Method::kPost, drain, R"({"reason":"x"})").status, 403);
  auto missing = call("root", Method::kPost, drain, "{}");
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(message(missing).find("body.reason"), std::string::npos) << missing.body;
  auto empty = call("root", Method::kPost, drain, R"({"reason":"  "})");
  EXPECT_EQ(empty.status, 400);
  EXPECT_NE(message(empty).find("body.reason"), std::string::npos) << empty.body;
  auto no_body = call("root", Method::kPost, drain);
  EXPECT_EQ(no_body.status, 400);
  auto bad_json = call("root", Method::kPost, drain, R"({"reason": )");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_NE(message(bad_json).find("body"), std::string::npos) << bad_json.body;
  auto not_object = call("root", Method::kPost, drain, R"(["reason"])");
  EXPECT_EQ(not_object.status, 400);
  auto unknown = call("root", Method::kPost, drain, R"({"reason":"fan","force":true})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(message(unknown).find("body.force"), std::string::npos) << unknown.body;
  auto long_reason =
      call("root", Method::kPost, drain, json{{"reason", std::string(300, 'x')}}.dump());
  EXPECT_EQ(long_reason.status, 400);
  EXPECT_EQ(call("root", Method::kPost, "/v1/nodes/gpu-99/drain", R"({"reason":"x"})").status, 404);

  auto drained = call("root", Method::kPost, drain, R"({"reason":"fan failure"})");
  ASSERT_EQ(drained.status, 200) << drained.body;
  // Nothing runs on gpu-01, so it reads DRAINED at once; the registry (and the store) keep the
  // admin's DRAINING, from which the state is derived.
  EXPECT_EQ(body(drained)["state"], "DRAINED");
  EXPECT_EQ(body(drained)["state_reason"], "fan failure");
  EXPECT_EQ(body(get("alice", "/v1/nodes/gpu-01"))["state"], "DRAINED");
  auto stored = store_->getNode("gpu-01");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state, "DRAINING");

  EXPECT_EQ(call("alice", Method::kPost, "/v1/nodes/gpu-01/resume").status, 403);
  EXPECT_EQ(call("root", Method::kPost, "/v1/nodes/gpu-01/resume", R"({"x":1})").status, 400);
  auto resumed = call("root", Method::kPost, "/v1/nodes/gpu-01/resume");
  ASSERT_EQ(resumed.status, 200) << resumed.body;
  EXPECT_EQ(body(resumed)["state"], "IDLE");
  EXPECT_EQ(body(resumed)["state_reason"], "");
  EXPECT_EQ(call("root", Method::kPost, "/v1/nodes/gpu-99/resume").status, 404);
}

TEST_F(ApiTest, GpusListEveryGpuWithItsState) {
  int64_t id = submit("alice", "ml", 500);
  place(id);
  ASSERT_TRUE(registry_->drain("gpu-02", "maintenance").isOk());
  auto r = get("bob", "/v1/gpus");
  ASSERT_EQ(r.status, 200) << r.body;
  json gpus = body(r)["gpus"];
  ASSERT_EQ(gpus.size(), 6u);
  EXPECT_EQ(gpus[0]["node"], "gpu-01");
  EXPECT_EQ(gpus[0]["index"], 0);
  EXPECT_EQ(gpus[0]["model"], "A100");
  EXPECT_EQ(gpus[0]["memory_mib"], 81920);
  EXPECT_EQ(gpus[0]["state"], "mixed");
  EXPECT_EQ(gpus[0]["allocated_milli"], 500);
  EXPECT_EQ(gpus[1]["state"], "idle");
  EXPECT_EQ(gpus[2]["node"], "gpu-02");
  EXPECT_EQ(gpus[2]["state"], "drained");

  auto one = get("bob", "/v1/gpus?node=gpu-01");
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(body(one)["gpus"].size(), 2u);
  EXPECT_EQ(get("bob", "/v1/gpus?node=gpu-99").status, 404);
  auto bad = get("bob", "/v1/gpus?nodes=gpu-01");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(message(bad).find("'nodes'"), std::string::npos) << bad.body;
}

// sinfo's states: IDLE with nothing running, MIXED with part of the GPUs held, ALLOCATED with
// every GPU's whole share held; a draining node is DRAINING while something runs, then DRAINED.
TEST_F(ApiTest, NodeStateIsDerivedFromRunningJobs) {
  auto state = [&](const std::string& node) {
    return body(get("alice", "/v1/nodes/" + node))["state"].get<std::string>();
  };
  EXPECT_EQ(state("gpu-01"), "IDLE");
  int64_t a = submit("alice", "ml", 1000);
  place(a);  // GPU 0 of gpu-01
  EXPECT_EQ(state("gpu-01"), "MIXED");
  int64_t b = submit("alice", "ml", 1000);
  api::Allocation on_gpu1;
  on_gpu1.node = "gpu-01";
  on_gpu1.slices.push_back(api::Slice{});
  on_gpu1.slices.back().gpu_uuid = "GPU-gpu-01-1";
  on_gpu1.slices.back().compute_milli = 1000;
  on_gpu1.slices.back().memory_mib = 1024;
  ASSERT_TRUE(
      store_->recordPlacement(b, store::placementJsonFor({on_gpu1}), clock_.now(), "placed").ok());
  EXPECT_EQ(state("gpu-01"), "ALLOCATED");
  json nodes = body(get("alice", "/v1/nodes"))["nodes"];
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0]["state"], "ALLOCATED");
  EXPECT_EQ(nodes[1]["state"], "IDLE");
  ASSERT_TRUE(registry_->drain("gpu-01", "maintenance").isOk());
  EXPECT_EQ(state("gpu-01"), "DRAINING");
  ASSERT_TRUE(store_->recordEnd(a, api::JobState::kCompleted, 0, clock_.now(), "").isOk());
  ASSERT_TRUE(store_->recordEnd(b, api::JobState::kCompleted, 0, clock_.now(), "").isOk());
  EXPECT_EQ(state("gpu-01"), "DRAINED");
  ASSERT_TRUE(registry_->resume("gpu-01").isOk());
  EXPECT_EQ(state("gpu-01"), "IDLE");
}

TEST_F(ApiTest, SummaryCountsNodesGpusAndJobs) {
  int64_t a = submit("alice", "ml", 1000);
  submit("bob", "vision", 250);
  submit("bob", "vision", 250);
  place(a);
  ASSERT_TRUE(registry_->drain("gpu-02", "maintenance").isOk());
  auto r = get("alice", "/v1/summary");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = body(r);
  EXPECT_EQ(j["nodes"]["total"], 2);
  EXPECT_EQ(j["nodes"]["by_state"]["MIXED"], 1);    // gpu-01: one of its two GPUs held
  EXPECT_EQ(j["nodes"]["by_state"]["DRAINED"], 1);  // gpu-02: drained, nothing running
  EXPECT_EQ(j["gpus"]["total"], 6);
  EXPECT_EQ(j["gpus"]["allocated_milli"], 1000);
  EXPECT_EQ(j["gpus"]["by_state"]["allocated"], 1);
  EXPECT_EQ(j["gpus"]["by_state"]["idle"], 1);
  EXPECT_EQ(j["gpus"]["by_state"]["drained"], 4);
  EXPECT_EQ(j["jobs"]["total"], 3);
  EXPECT_EQ(j["jobs"]["by_state"]["PENDING"], 2);
  EXPECT_EQ(j["jobs"]["by_state"]["RUNNING"], 1);
  EXPECT_EQ(get("alice", "/v1/summary?verbose=1").status, 400);
}

TEST_F(ApiTest, AccountIsTheCallersOwnViewWithQuotasAndUse) {
  // carol (group admin of ml): 0.5 GPU for 2 h ended (1 GPU-hour), 0.25 GPU running now, one
  // pending; alice (ml) runs 0.5 GPU, which counts against ml's quota but not carol's own.
  int64_t ended = submit("carol", "ml", 500);
  place(ended);
  clock_.advance(std::chrono::hours(2));
  ASSERT_TRUE(store_->recordEnd(ended, api::JobState::kCompleted, 0, clock_.now(), "done").isOk());
  place(submit("carol", "ml", 250));
  submit("carol", "ml", 1000);
  place(submit("alice", "ml", 500));
  ASSERT_EQ(call("root", Method::kPut, "/v1/quotas/user/carol",
                 R"({"max_gpus": "2", "gpu_hours": 10, "gpu_hours_period": "7d"})")
                .status,
            200);
  ASSERT_EQ(call("root", Method::kPut, "/v1/quotas/group/ml", R"({"max_gpus": "4"})").status, 200);
  ASSERT_EQ(call("root", Method::kPut, "/v1/quotas/group/vision", R"({"max_gpus": "1"})").status,
            200);

  auto r = get("carol", "/v1/account");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = body(r);
  EXPECT_EQ(j["user"], "carol");
  EXPECT_EQ(j["uid"], 1003);
  EXPECT_EQ(j["role"], "group-admin");
  EXPECT_EQ(j["has_record"], true);
  EXPECT_EQ(j["groups"], json::array({"ml"}));
  EXPECT_EQ(j["admin_groups"], json::array({"ml"}));
  EXPECT_EQ(j["use"]["running_jobs"], 1);
  EXPECT_EQ(j["use"]["pending_jobs"], 1);
  EXPECT_EQ(j["use"]["gpus"], "0.25");
  ASSERT_EQ(j["quotas"].size(), 2u) << r.body;  // carol's and ml's, not vision's
  for (const json& q : j["quotas"]) {
    if (q["subject"] == "user") {
      EXPECT_EQ(q["name"], "carol");
      EXPECT_EQ(q["used"]["gpus_milli"], 250);
      EXPECT_NEAR(q["used"]["gpu_hours"].get<double>(), 1.0, 1e-9);
      EXPECT_EQ(q["used"]["period_seconds"], 7 * 86400);
    } else {
      EXPECT_EQ(q["name"], "ml");
      EXPECT_EQ(q["used"]["gpus_milli"], 750);  // carol's 0.25 and alice's 0.5
      EXPECT_NEAR(q["used"]["gpu_hours"].get<double>(), 1.0, 1e-9);
    }
  }
  EXPECT_TRUE(j["fair_share"].is_null());  // this server runs no scheduler

  // Another caller sees only their own account.
  json alice = body(get("alice", "/v1/account"));
  EXPECT_EQ(alice["user"], "alice");
  EXPECT_EQ(alice["role"], "user");
  EXPECT_EQ(alice["use"]["gpus"], "0.5");
  ASSERT_EQ(alice["quotas"].size(), 1u);
  EXPECT_EQ(alice["quotas"][0]["name"], "ml");
  EXPECT_EQ(get("alice", "/v1/account?user=carol").status, 400);
  EXPECT_EQ(get("", "/v1/account").status, 401);
}

TEST_F(ApiTest, UsageReportsGpuHoursBySliceAndHidesOthersRows) {
  // alice: 0.5 GPU for 2 h = 1 GPU-hour; bob: 0.25 GPU for 2 h = 0.5 GPU-hours.
  int64_t a = submit("alice", "ml", 500);
  int64_t b = submit("bob", "vision", 250);
  place(a);
  place(b);
  TimePoint start = clock_.now();
  clock_.advance(std::chrono::hours(2));
  ASSERT_TRUE(store_->recordEnd(a, api::JobState::kCompleted, 0, clock_.now(), "done").isOk());
  ASSERT_TRUE(store_->recordEnd(b, api::JobState::kCompleted, 0, clock_.now(), "done").isOk());
  int64_t from = toUnixMicros(start) / 1'000'000 - 10;
  std::string period = "&from=" + std::to_string(from) + "&to=" + std::to_string(from + 86400);

  auto all = get("root", "/v1/usage?by=user" + period);
  ASSERT_EQ(all.status, 200) << all.body;
  json rows = body(all)["rows"];
  ASSERT_EQ(rows.size(), 2u) << all.body;
  EXPECT_EQ(rows[0]["key"], "alice");
  EXPECT_NEAR(rows[0]["gpu_hours"].get<double>(), 1.0, 1e-9);
  EXPECT_EQ(rows[0]["jobs"], 1);
  EXPECT_NEAR(rows[1]["gpu_hours"].get<double>(), 0.5, 1e-9);
  EXPECT_EQ(body(all)["from_us"], from * 1'000'000);

  json own = body(get("bob", "/v1/usage?by=user" + period))["rows"];
  ASSERT_EQ(own.size(), 1u);
  EXPECT_EQ(own[0]["key"], "bob");
  json groups = body(get("carol", "/v1/usage?by=group" + period))["rows"];
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0]["key"], "ml");
  EXPECT_EQ(body(get("root", "/v1/usage?by=group" + period))["rows"].size(), 2u);
  // Defaults: by user, the last 30 days up to now.
  EXPECT_EQ(body(get("root", "/v1/usage"))["rows"].size(), 2u);
  // Dates.
  auto dated = get("root", "/v1/usage?from=2023-11-01&to=2023-12-01T00:00:00Z");
  ASSERT_EQ(dated.status, 200) << dated.body;
  EXPECT_EQ(body(dated)["rows"].size(), 2u);  // the jobs ran on 2023-11-14

  for (const char* bad :
       {"/v1/usage?by=node", "/v1/usage?from=yesterday", "/v1/usage?from=2023-02-30",
        "/v1/usage?to=-5", "/v1/usage?from=200&to=100", "/v1/usage?period=1"}) {
    auto r = get("root", bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
  }
  EXPECT_NE(message(get("root", "/v1/usage?by=node")).find("by:"), std::string::npos);
  EXPECT_NE(message(get("root", "/v1/usage?from=yesterday")).find("from:"), std::string::npos);
}

TEST_F(ApiTest, AuditLogIsForAdminsAndRefusesBadPaging) {
  ASSERT_EQ(call("root", net::Method::kPut, "/v1/quotas/group/ml", R"({"max_gpus":"4"})").status,
            200);
  ASSERT_EQ(call("root", net::Method::kDelete, "/v1/quotas/group/ml", "").status, 200);
  auto first = get("root", "/v1/audit?limit=1");
  ASSERT_EQ(first.status, 200) << first.body;
  json page = body(first);
  ASSERT_EQ(page["events"].size(), 1u) << first.body;
  EXPECT_EQ(page["events"][0]["action"], "set_quota");
  EXPECT_EQ(page["events"][0]["subject"], "group:ml");
  EXPECT_EQ(page["events"][0]["actor"], "root");
  ASSERT_EQ(page["next_after"], page["events"][0]["seq"]);
  json rest = body(get("root", "/v1/audit?after=" + page["next_after"].dump()));
  ASSERT_EQ(rest["events"].size(), 1u) << rest;
  EXPECT_EQ(rest["events"][0]["action"], "delete_quota");
  EXPECT_TRUE(rest["next_after"].is_null());

  // carol administers group ml, bob is a plain user: neither reads the log.
  for (const char* who : {"bob", "carol"}) {
    auto r = get(who, "/v1/audit");
    EXPECT_EQ(r.status, 403) << who << ": " << r.body;
    EXPECT_NE(message(r).find("may not read the audit log (admin only)"), std::string::npos)
        << r.body;
  }
  for (const auto& [bad, named] :
       std::vector<std::pair<std::string, std::string>>{{"/v1/audit?limit=0", "limit:"},
                                                        {"/v1/audit?limit=10001", "limit:"},
                                                        {"/v1/audit?after=-1", "after:"},
                                                        {"/v1/audit?after=x", "after:"},
                                                        {"/v1/audit?user=bob", "user"}}) {
    auto r = get("root", bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_NE(message(r).find(named), std::string::npos) << bad << ": " << r.body;
  }
}

TEST_F(ApiTest, UsersAreAdministeredByAdminsAndReadWithinTheirGroups) {
  const std::string dave = R"({"uid":1004,"groups":["vision"],"role":"user"})";
  EXPECT_EQ(call("alice", Method::kPut, "/v1/users/dave", dave).status, 403);
  EXPECT_EQ(call("carol", Method::kPut, "/v1/users/dave", dave).status, 403);
  auto created = call("root", Method::kPut, "/v1/users/dave", dave);
  ASSERT_EQ(created.status, 201) << created.body;
  EXPECT_EQ(body(created)["name"], "dave");
  auto updated = call("root", Method::kPut, "/v1/users/dave",
                      R"({"name":"dave","uid":1004,"groups":["ml"],"role":"group-admin"})");
  ASSERT_EQ(updated.status, 200) << updated.body;
  EXPECT_EQ(body(updated)["role"], "group-admin");

  auto mismatch = call("root", Method::kPut, "/v1/users/dave", R"({"name":"eve","uid":1})");
  EXPECT_EQ(mismatch.status, 400);
  EXPECT_NE(message(mismatch).find("user.name"), std::string::npos) << mismatch.body;
  auto unknown = call("root", Method::kPut, "/v1/users/dave", R"({"uid":1,"shell":"/bin/sh"})");
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(message(unknown).find("user.shell"), std::string::npos) << unknown.body;
  auto no_uid = call("root", Method::kPut, "/v1/users/dave", R"({"groups":[]})");
  EXPECT_EQ(no_uid.status, 400);
  EXPECT_NE(message(no_uid).find("user.uid"), std::string::npos) << no_uid.body;
  auto quota = call("root", Method::kPut, "/v1/users/dave", R"({"uid":1,"quota":{}})");
  EXPECT_EQ(quota.status, 400);
  EXPECT_NE(message(quota).find("user.quota"), std::string::npos) << quota.body;
  EXPECT_EQ(call("root", Method::kPut, "/v1/users/-bad", R"({"uid":1})").status, 400);
  EXPECT_EQ(call("root", Method::kPut, "/v1/users/dave", "{oops").status, 400);

  auto names = [](const json& users) {
    std::vector<std::string> out;
    for (const json& u : users)
      out.push_back(u["name"]);
    return out;
  };
  EXPECT_EQ(names(body(get("root", "/v1/users"))["users"]),
            (std::vector<std::string>{"alice", "bob", "carol", "dave", "root"}));
  EXPECT_EQ(names(body(get("alice", "/v1/users"))["users"]), (std::vector<std::string>{"alice"}));
  // carol administers ml: its members (alice, dave, root, herself), not bob.
  EXPECT_EQ(names(body(get("carol", "/v1/users"))["users"]),
            (std::vector<std::string>{"alice", "carol", "dave", "root"}));
  EXPECT_EQ(get("alice", "/v1/users/alice").status, 200);
  EXPECT_EQ(get("alice", "/v1/users/bob").status, 403);
  EXPECT_EQ(get("carol", "/v1/users/bob").status, 403);
  EXPECT_EQ(get("carol", "/v1/users/alice").status, 200);
  EXPECT_EQ(get("root", "/v1/users/nobody").status, 404);

  EXPECT_EQ(call("alice", Method::kDelete, "/v1/users/dave").status, 403);
  EXPECT_EQ(call("root", Method::kDelete, "/v1/users/dave").status, 200);
  EXPECT_EQ(call("root", Method::kDelete, "/v1/users/dave").status, 404);
  EXPECT_EQ(get("root", "/v1/users/dave").status, 404);
}

TEST_F(ApiTest, GroupsQuotasAndQos) {
  EXPECT_EQ(call("carol", Method::kPut, "/v1/groups/nlp", R"({"gid":3000})").status, 403);
  auto created = call("root", Method::kPut, "/v1/groups/nlp", R"({"gid":3000,"project_dir":"/p"})");
  ASSERT_EQ(created.status, 201) << created.body;
  auto rel = call("root", Method::kPut, "/v1/groups/nlp", R"({"gid":3000,"project_dir":"p"})");
  EXPECT_EQ(rel.status, 400);
  EXPECT_NE(message(rel).find("group.project_dir"), std::string::npos) << rel.body;
  EXPECT_EQ(body(get("bob", "/v1/groups"))["groups"].size(), 3u);
  EXPECT_EQ(body(get("bob", "/v1/groups/nlp"))["project_dir"], "/p");
  EXPECT_EQ(get("bob", "/v1/groups/none").status, 404);

  // Quotas: carol administers ml, not vision.
  const std::string q = R"({"max_gpus":"4","gpu_hours":100})";
  EXPECT_EQ(call("alice", Method::kPut, "/v1/quotas/group/ml", q).status, 403);
  auto set = call("carol", Method::kPut, "/v1/quotas/group/ml", q);
  ASSERT_EQ(set.status, 200) << set.body;
  EXPECT_EQ(body(set)["limits"]["max_gpus_milli"], 4000);
  EXPECT_EQ(body(set)["subject"], "group");
  EXPECT_EQ(call("carol", Method::kPut, "/v1/quotas/group/vision", q).status, 403);
  EXPECT_EQ(call("carol", Method::kPut, "/v1/quotas/user/alice", q).status, 403);
  ASSERT_EQ(call("root", Method::kPut, "/v1/quotas/user/bob", q).status, 200);
  auto bad_subject = call("root", Method::kPut, "/v1/quotas/team/ml", q);
  EXPECT_EQ(bad_subject.status, 400);
  EXPECT_NE(message(bad_subject).find("subject"), std::string::npos);
  auto bad_limit = call("root", Method::kPut, "/v1/quotas/group/ml", R"({"max_gpus":"-1"})");
  EXPECT_EQ(bad_limit.status, 400);
  EXPECT_NE(message(bad_limit).find("quota.max_gpus"), std::string::npos) << bad_limit.body;
  EXPECT_EQ(call("root", Method::kPut, "/v1/quotas/group/nobody", q).status, 404);

  EXPECT_EQ(body(get("root", "/v1/quotas"))["quotas"].size(), 2u);
  EXPECT_EQ(body(get("carol", "/v1/quotas"))["quotas"].size(), 1u);
  json bobs = body(get("bob", "/v1/quotas"))["quotas"];
  ASSERT_EQ(bobs.size(), 1u);
  EXPECT_EQ(bobs[0]["name"], "bob");
  EXPECT_EQ(get("bob", "/v1/quotas/group/ml").status, 403);
  EXPECT_EQ(get("carol", "/v1/quotas/group/ml").status, 200);
  EXPECT_EQ(get("root", "/v1/quotas/group/vision").status, 404);
  EXPECT_EQ(body(get("alice", "/v1/groups/ml"))["quota"]["gpu_hours"], 100);
  EXPECT_EQ(call("carol", Method::kDelete, "/v1/quotas/group/ml").status, 200);
  EXPECT_EQ(call("carol", Method::kDelete, "/v1/quotas/group/ml").status, 404);
  auto audit = store_->auditEvents(0, 100);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 3u);
  EXPECT_EQ(audit->at(0).actor, "carol");
  EXPECT_EQ(audit->at(2).action, "delete_quota");

  EXPECT_EQ(call("root", Method::kDelete, "/v1/groups/nlp").status, 200);
  EXPECT_EQ(call("root", Method::kDelete, "/v1/groups/nlp").status, 404);

  // QoS.
  const std::string high = R"({"priority":100,"preemptible":false,"grace_time":"2m"})";
  EXPECT_EQ(call("carol", Method::kPut, "/v1/qos/high", high).status, 403);
  ASSERT_EQ(call("root", Method::kPut, "/v1/qos/high", high).status, 201);
  ASSERT_EQ(call("root", Method::kPut, "/v1/qos/high", high).status, 200);
  auto bad_qos = call("root", Method::kPut, "/v1/qos/high", R"({"priority":-1})");
  EXPECT_EQ(bad_qos.status, 400);
  EXPECT_NE(message(bad_qos).find("qos.priority"), std::string::npos) << bad_qos.body;
  json qos = body(get("alice", "/v1/qos"))["qos"];
  ASSERT_EQ(qos.size(), 1u);
  EXPECT_EQ(qos[0]["grace_time_seconds"], 120);
  // Without grace_time the level keeps the controller's preempt_grace: the field stays absent
  // (it read 0, killed at once); an explicit 0 is kept as 0.
  ASSERT_EQ(call("root", Method::kPut, "/v1/qos/low", R"({"preemptible":true})").status, 201);
  ASSERT_EQ(call("root", Method::kPut, "/v1/qos/zero", R"({"grace_time":"0"})").status, 201);
  qos = body(get("alice", "/v1/qos"))["qos"];
  ASSERT_EQ(qos.size(), 3u);
  EXPECT_FALSE(qos[1].contains("grace_time_seconds")) << qos[1].dump();
  EXPECT_EQ(qos[2]["grace_time_seconds"], 0) << qos[2].dump();
  EXPECT_EQ(call("root", Method::kDelete, "/v1/qos/low").status, 200);
  EXPECT_EQ(call("root", Method::kDelete, "/v1/qos/zero").status, 200);
  EXPECT_EQ(call("root", Method::kDelete, "/v1/qos/high").status, 200);
  EXPECT_EQ(call("root", Method::kDelete, "/v1/qos/high").status, 404);
}

// Per-job limits at POST /v1/jobs: a QoS level's max_wall_time and a quota's max_run_time and
// max_gpu_mem (max_memory_per_task) answer 400 naming the field and the limit; a job without a
// time limit gets the QoS's max_wall_time.
TEST_F(ApiTest, SubmissionsAboveQosAndQuotaLimitsAre400) {
  ASSERT_EQ(call("root", Method::kPut, "/v1/qos/short", R"({"max_wall_time":"1h"})").status, 201);
  api::JobSpec spec = makeSpec(1000);
  spec.qos = "short";
  auto none = call("alice", Method::kPost, "/v1/jobs", api::toJson(spec).dump());
  ASSERT_EQ(none.status, 201) << none.body;
  int64_t id = body(none)["ids"][0].get<int64_t>();
  EXPECT_EQ(body(get("alice", jobPath(id)))["spec"]["time_limit_seconds"], 3600);

  spec.time_limit_seconds = 2 * 3600;
  auto too_long = call("alice", Method::kPost, "/v1/jobs", api::toJson(spec).dump());
  EXPECT_EQ(too_long.status, 400);
  EXPECT_EQ(message(too_long),
            "job.time_limit: 02:00:00 is above QoS short's max_wall_time 01:00:00; ask for at "
            "most that (--time)");

  ASSERT_EQ(call("root", Method::kPut, "/v1/quotas/user/alice",
                 R"({"max_memory_per_task":"20G","max_run_time":"30m"})")
                .status,
            200);
  spec.time_limit_seconds = 3600;
  auto over_run_time = call("alice", Method::kPost, "/v1/jobs", api::toJson(spec).dump());
  EXPECT_EQ(over_run_time.status, 400);
  EXPECT_NE(message(over_run_time).find("user alice's quota max_run_time 00:30:00"),
            std::string::npos)
      << over_run_time.body;
  spec.time_limit_seconds = 0;
  spec.resources.gpus_milli = 500;  // a slice of an 80G GPU: 40G of shared memory
  auto slice = call("alice", Method::kPost, "/v1/jobs", api::toJson(spec).dump());
  EXPECT_EQ(slice.status, 400);
  EXPECT_NE(message(slice).find("job.resources.gpu_memory: 40G of GPU memory per task"),
            std::string::npos)
      << slice.body;
  EXPECT_NE(message(slice).find("max_gpu_mem 20G"), std::string::npos) << slice.body;
  // Other users are not bound by alice's quota.
  EXPECT_EQ(call("bob", Method::kPost, "/v1/jobs", api::toJson(spec).dump()).status, 201);
}

// GET /v1/jobs/{id}/log reads the file the agent reported, by offsets.
TEST_F(ApiTest, LogRouteReadsTheReportedFileByOffsets) {
  int64_t id = submit("alice", "ml");
  place(id);
  char tmpl[] = "/tmp/gpool-log-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  { std::ofstream(dir + "/stdout.log") << "hello\nworld\n"; }
  store::TaskFiles files{dir + "/stdout.log", dir + "/stderr.log", dir + "/shell.sock"};
  ASSERT_TRUE(store_->recordTaskFiles(id, store_->getJob(id)->epoch, 0, files).isOk());

  json first = body(get("alice", jobPath(id, "/log?limit=6")));
  EXPECT_EQ(first["data"], "hello\n");
  EXPECT_EQ(first["next_offset"], 6);
  EXPECT_EQ(first["size"], 12);
  EXPECT_FALSE(first["complete"]);  // the job still runs
  json rest = body(get("alice", jobPath(id, "/log?offset=6")));
  EXPECT_EQ(rest["data"], "world\n");
  // No stderr written yet: empty, not an error (the task's directory is here).
  json err = body(get("alice", jobPath(id, "/log?stream=stderr")));
  EXPECT_EQ(err["data"], "");
  EXPECT_EQ(get("alice", jobPath(id, "/log?stream=both")).status, 400);
  EXPECT_EQ(get("alice", jobPath(id, "/log?task=1")).status, 400);
  EXPECT_EQ(get("alice", jobPath(id, "/log?bogus=1")).status, 400);
  EXPECT_EQ(get("bob", jobPath(id, "/log")).status, 403);
  // Attempts: a job never requeued has had one; attempt 1 is the latest.
  json one = body(get("alice", jobPath(id, "/log?attempt=1")));
  EXPECT_EQ(one["data"], "hello\nworld\n");
  EXPECT_EQ(one["attempt"], 1);
  EXPECT_EQ(one["attempts"], 1);
  auto two = get("alice", jobPath(id, "/log?attempt=2"));
  EXPECT_EQ(two.status, 400);
  EXPECT_NE(two.body.find("has had 1 attempt(s), numbered from 1; there is no attempt 2"),
            std::string::npos)
      << two.body;
  EXPECT_EQ(get("alice", jobPath(id, "/log?attempt=0")).status, 400);

  // Finished: complete once read to the end.
  ASSERT_TRUE(store_->recordEnd(id, api::JobState::kCompleted, 0, clock_.now(), "done").isOk());
  EXPECT_TRUE(body(get("alice", jobPath(id, "/log?offset=12")))["complete"]);

  // A log on another server (its directory is not on this machine): 404 with the ssh hint.
  int64_t remote = submit("alice", "ml");
  place(remote);
  store::TaskFiles elsewhere{"/nonexistent/gpool/1.0/stdout.log", "", ""};
  ASSERT_TRUE(store_->recordTaskFiles(remote, store_->getJob(remote)->epoch, 0, elsewhere).isOk());
  auto r = get("alice", jobPath(remote, "/log"));
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.body.find("ssh gpu-01"), std::string::npos) << r.body;
  std::filesystem::remove_all(dir);
}

// Each role against each route that acts on someone's job or on the pool: alice owns the job
// (group ml), bob is another user, carol administers ml, root is an admin.
TEST_F(ApiTest, PermissionMatrix) {
  // `fresh`: the target is a new job of alice's for each call (1: pending, 2: preempted,
  // 3: held by alice).
  struct Case {
    Method method;
    std::string target;
    std::string body;
    int alice, bob, carol, root;
    int fresh = 0;
  };
  int64_t shown = submit("alice", "ml");
  store::TokenRecord alices;
  alices.user = "alice";
  alices.hash = "matrix-token-hash";
  alices.created = clock_.now();
  auto alices_token = store_->createToken(alices, "alice");
  ASSERT_TRUE(alices_token.ok());
  std::vector<Case> cases = {
      {Method::kGet, jobPath(shown), "", 200, 403, 200, 200},
      {Method::kGet, jobPath(shown, "/events"), "", 200, 403, 200, 200},
      // A pending job has no log yet (409) but the permission check comes first.
      {Method::kGet, jobPath(shown, "/log"), "", 409, 403, 409, 409},
      {Method::kGet, jobPath(shown, "/telemetry"), "", 200, 403, 200, 200},
      {Method::kGet, "/v1/gpus/GPU-gpu-01-0/telemetry", "", 200, 200, 200, 200},
      {Method::kPost, "/cancel", "", 200, 403, 200, 200, 1},
      {Method::kPost, "/requeue", "", 200, 403, 200, 200, 2},
      {Method::kPost, "/hold", "", 200, 403, 200, 200, 1},
      {Method::kPost, "/release", "", 200, 403, 200, 200, 3},
      {Method::kPost, jobPath(shown, "/requeue"), "", 409, 403, 409, 409},
      {Method::kGet, "/v1/nodes", "", 200, 200, 200, 200},
      {Method::kGet, "/v1/nodes/gpu-01", "", 200, 200, 200, 200},
      {Method::kPost, "/v1/nodes/gpu-01/drain", R"({"reason":"r"})", 403, 403, 403, 200},
      {Method::kPost, "/v1/nodes/gpu-01/resume", "", 403, 403, 403, 200},
      {Method::kGet, "/v1/gpus", "", 200, 200, 200, 200},
      {Method::kGet, "/v1/summary", "", 200, 200, 200, 200},
      {Method::kGet, "/v1/usage", "", 200, 200, 200, 200},
      {Method::kGet, "/v1/pool/history", "", 200, 200, 200, 200},
      {Method::kGet, "/v1/account", "", 200, 200, 200, 200},
      {Method::kGet, "/v1/users", "", 200, 200, 200, 200},
      {Method::kGet, "/v1/users/alice", "", 200, 403, 200, 200},
      {Method::kPut, "/v1/users/zed", R"({"uid":7})", 403, 403, 403, 201},
      {Method::kDelete, "/v1/users/zed", "", 403, 403, 403, 200},
      {Method::kGet, "/v1/groups", "", 200, 200, 200, 200},
      {Method::kPut, "/v1/groups/zed", R"({"gid":7})", 403, 403, 403, 201},
      {Method::kDelete, "/v1/groups/zed", "", 403, 403, 403, 200},
      {Method::kPut, "/v1/quotas/group/ml", R"({"gpu_hours":1})", 403, 403, 200, 200},
      {Method::kGet, "/v1/quotas/group/ml", "", 403, 403, 200, 200},
      {Method::kDelete, "/v1/quotas/group/ml", "", 403, 403, 200, 404},
      {Method::kGet, "/v1/quotas", "", 200, 200, 200, 200},
      {Method::kPut, "/v1/qos/low", R"({"priority":1})", 403, 403, 403, 201},
      {Method::kGet, "/v1/qos", "", 200, 200, 200, 200},
      {Method::kDelete, "/v1/qos/low", "", 403, 403, 403, 200},
      {Method::kPost, "/v1/tokens", R"({"name":"laptop"})", 201, 201, 201, 201},
      {Method::kPost, "/v1/tokens", R"({"user":"alice"})", 201, 403, 403, 201},
      {Method::kGet, "/v1/tokens", "", 200, 200, 200, 200},
      // alice revokes her own; only an admin may revoke another's (again: it stays revoked).
      {Method::kDelete, "/v1/tokens/" + std::to_string(*alices_token), "", 200, 403, 403, 200},
      {Method::kPost, "/v1/join-tokens", R"({"expires_in":"1h"})", 403, 403, 403, 201},
  };
  for (const Case& c : cases) {
    const std::pair<std::string, int> roles[] = {
        {"alice", c.alice}, {"bob", c.bob}, {"carol", c.carol}, {"root", c.root}};
    for (const auto& [user, want] : roles) {
      std::string target = c.target;
      if (c.fresh > 0) {
        int64_t id = submit("alice", "ml");
        if (c.fresh == 2) {
          place(id);
          ASSERT_TRUE(store_->recordPreemption(id, false, clock_.now(), "preempted").isOk());
        }
        if (c.fresh == 3) {
          ASSERT_TRUE(store_->setJobHold(id, "user", clock_.now(), "JobHeldUser").isOk());
        }
        target = jobPath(id, c.target);
      }
      auto r = call(user, c.method, target, c.body);
      EXPECT_EQ(r.status, want) << net::methodName(c.method) << " " << target << " as " << user
                                << ": " << r.body;
    }
  }
}

// GET /v1/pool/history: the pool's totals for everyone, the series of the users and groups the
// caller may see (as /v1/usage), and bad ranges named.
TEST_F(ApiTest, PoolHistoryShowsThePoolToAllAndSeriesToWhoMaySeeThem) {
  PoolSample s;
  s.pool.gpus = 6;
  s.pool.gpus_allocated = 2.5f;
  s.pool.gpus_used = 1;
  s.pool.memory_mib = 6 * 81920;
  s.users["alice"].gpus_allocated = 2;
  s.users["bob"].gpus_allocated = 0.5f;
  s.groups["ml"].gpus_allocated = 2;
  s.groups["vision"].gpus_allocated = 0.5f;
  s.simulated = true;
  pool_history_->add(clock_.now(), s);

  auto keys = [&](const std::string& user, const std::string& by) {
    json h = body(get(user, "/v1/pool/history?by=" + by));
    std::vector<std::string> out;
    for (const json& series : h["series"])
      out.push_back(series["key"].get<std::string>());
    return out;
  };
  json root = body(get("root", "/v1/pool/history?range=hour"));
  EXPECT_EQ(root["resolution"], "1m");
  EXPECT_EQ(root["simulated"], true);
  ASSERT_EQ(root["pool"]["points"].size(), 1u);
  EXPECT_EQ(root["pool"]["points"][0]["gpus"], 6.0);
  EXPECT_EQ(root["pool"]["points"][0]["gpus_allocated"], 2.5);
  EXPECT_EQ(keys("root", "user"), (std::vector<std::string>{"alice", "bob"}));
  EXPECT_EQ(keys("alice", "user"), (std::vector<std::string>{"alice"}));
  // A plain user sees no group's series (as in /v1/usage); a group admin sees their groups.
  EXPECT_EQ(keys("bob", "group"), (std::vector<std::string>{}));
  EXPECT_EQ(keys("carol", "group"), (std::vector<std::string>{"ml"}));
  // The pool itself is everyone's, as the summary is.
  EXPECT_EQ(body(get("bob", "/v1/pool/history"))["pool"]["points"].size(), 1u);
  EXPECT_EQ(body(get("root", "/v1/pool/history?range=week"))["resolution"], "1h");
  EXPECT_EQ(body(get("root", "/v1/pool/history?range=day"))["resolution"], "5m");

  auto bad = get("root", "/v1/pool/history?range=month");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("range: 'month' is not one of hour, day, week"), std::string::npos)
      << bad.body;
  bad = get("root", "/v1/pool/history?by=node");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("by: 'node'"), std::string::npos) << bad.body;
  EXPECT_EQ(get("root", "/v1/pool/history?since=1h").status, 400);
  EXPECT_EQ(get("", "/v1/pool/history").status, 401);
}

}  // namespace
}  // namespace gpool::controller::testing
