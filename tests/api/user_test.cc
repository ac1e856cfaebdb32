#include "api/user.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace gpool::api::testing {
namespace {

using nlohmann::json;

Quota fullQuota() {
  Quota q;
  q.max_gpus_milli = 8000;
  q.gpu_hours = 500;
  q.period_seconds = 7 * 86400;
  q.max_memory_per_task_mib = 40 * 1024;
  q.max_compute_milli = 2500;
  q.max_run_time_seconds = 3 * 86400;
  q.priority_weight = 3;
  q.guaranteed_gpus_milli = 2000;
  return q;
}

TEST(RoleTest, NamesParseBack) {
  for (Role r : {Role::kUser, Role::kGroupAdmin, Role::kAdmin})
    EXPECT_EQ(*parseRole(roleName(r)), r);
  EXPECT_EQ(roleName(Role::kGroupAdmin), "group-admin");
  EXPECT_TRUE(failsWith(parseRole("root").status(), "unknown role 'root'"));
}

TEST(UserJsonTest, RoundTrips) {
  User u;
  u.name = "alice";
  u.uid = 1001;
  u.groups = {"gpu", "vision"};
  u.role = Role::kGroupAdmin;
  u.default_qos = "normal";
  u.quota = fullQuota();
  EXPECT_TRUE(roundTrips(u));
  u.quota.reset();
  EXPECT_TRUE(roundTrips(u));
  Group g;
  g.name = "vision";
  g.gid = 2000;
  g.project_dir = "/srv/projects/vision";
  g.quota = Quota{};
  EXPECT_TRUE(roundTrips(g));
  Qos q;
  q.name = "high";
  q.description = "deadline work";
  q.priority = 100;
  q.preemptible = false;
  q.max_gpus_per_user_milli = 4000;
  q.max_wall_time_seconds = 86400;
  q.grace_time_seconds = 300;
  EXPECT_TRUE(roundTrips(q));
  EXPECT_TRUE(roundTrips(Qos{"scavenger", "", 0, true, std::nullopt, std::nullopt, 60}));
  // Unset grace (the controller's preempt_grace) and an explicit 0 (killed at once) differ.
  q.grace_time_seconds.reset();
  EXPECT_TRUE(roundTrips(q));
  EXPECT_FALSE(toJson(q).contains("grace_time_seconds"));
  q.grace_time_seconds = 0;
  EXPECT_TRUE(roundTrips(q));
  EXPECT_EQ(toJson(q)["grace_time_seconds"], 0);
}

TEST(QuotaJsonTest, UnsetMeansUnlimitedAndZeroForbids) {
  Quota q;
  ASSERT_TRUE(
      decode(J(R"({"max_gpus":0,"max_run_time":"2-00:00:00","max_compute":"1.5"})"), &q).isOk());
  EXPECT_EQ(q.max_gpus_milli, uint64_t{0});
  EXPECT_EQ(q.max_run_time_seconds, int64_t{2 * 86400});
  EXPECT_EQ(q.max_compute_milli, uint64_t{1500});
  EXPECT_FALSE(q.gpu_hours.has_value());
  EXPECT_FALSE(q.max_memory_per_task_mib.has_value());
  json j = toJson(Quota{});
  EXPECT_FALSE(j.contains("max_gpus_milli"));
  EXPECT_EQ(j.at("guaranteed_gpus_milli"), 0);
  EXPECT_TRUE(roundTrips(Quota{}));
  EXPECT_TRUE(roundTrips(fullQuota()));
}

TEST(AccountJsonTest, RejectsMalformed) {
  EXPECT_TRUE(
      failsWith(decode<User>(J(R"({"name":"alice"})")), "user.uid: required field is missing"));
  EXPECT_TRUE(failsWith(decode<User>(J(R"({"name":"-x","uid":1})")),
                        "user.name: user name '-x' may only contain"));
  EXPECT_TRUE(
      failsWith(decode<User>(J(R"({"name":"a","uid":4294967295})")), "user.uid: is out of range"));
  EXPECT_TRUE(failsWith(decode<User>(J(R"({"name":"a","uid":1,"role":"root"})")),
                        "user.role: unknown role 'root'"));
  EXPECT_TRUE(failsWith(decode<User>(J(R"({"name":"a","uid":1,"groups":["g","g"]})")),
                        "user.groups[1]: group 'g' is listed twice"));
  EXPECT_TRUE(failsWith(decode<User>(J(R"({"name":"a","uid":1,"quota":{"max_gpu":2}})")),
                        "user.quota.max_gpu: unknown field (did you mean 'max_gpus'?)"));
  EXPECT_TRUE(failsWith(decode<User>(J(R"({"name":"a","uid":1,"quota":{"max_gpus":-1}})")),
                        "user.quota.max_gpus"));
  EXPECT_TRUE(failsWith(decode<Quota>(J(R"({"max_gpus":2,"guaranteed_gpus":4})")),
                        "quota.guaranteed_gpus: is larger than max_gpus"));
  EXPECT_TRUE(failsWith(decode<Quota>(J(R"({"priority_weight":2000000})")),
                        "quota.priority_weight: is out of range"));
  EXPECT_TRUE(failsWith(decode<Quota>(J(R"({"gpu_hours_period":"0s"})")),
                        "quota.gpu_hours_period: must be > 0"));
  EXPECT_TRUE(failsWith(decode<Quota>(J(R"({"max_memory_per_task":"lots"})")),
                        "quota.max_memory_per_task: memory size 'lots'"));
  EXPECT_TRUE(failsWith(decode<Group>(J(R"({"name":"g","gid":5,"project_dir":"srv"})")),
                        "group.project_dir: must be an absolute path"));
  EXPECT_TRUE(failsWith(decode<Qos>(J(R"({"name":"bad name"})")), "qos.name: must have"));
  EXPECT_TRUE(failsWith(decode<Qos>(J(R"({"name":"q","grace_time":"-5m"})")),
                        "qos.grace_time: duration '-5m' is negative"));
  EXPECT_TRUE(failsWith(decode<Qos>(J(R"({"name":"q","max_wall_time":"0s"})")),
                        "qos.max_wall_time: must be > 0"));
}

}  // namespace
}  // namespace gpool::api::testing
