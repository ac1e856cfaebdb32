// The admin and account commands of the real `gpool` binary against a real gpoold (temp SQLite
// store, Unix socket): human and JSON output, bad arguments, exit codes, a plain user's denial
// (the binary run as `nobody`), usage CSV read back, and `config check`. No sleeps: the test
// blocks on gpoold's "ready" line and on waitpid.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/allocation.h"
#include "cli/cli_test_util.h"
#include "cli/gpoold_cli_fixture.h"
#include "common/clock.h"
#include "controller/controller_fixture.h"
#include "store/api_codec.h"

namespace gpool::cli {
namespace {

using nlohmann::json;
namespace ct = controller::testing;
using testing::kGpool;
using testing::Output;
using testing::readFile;
using testing::runProgram;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    out.push_back(line);
  return out;
}

// An RFC 4180 reader: records end with CRLF (or LF), fields may be quoted with "" inside.
std::vector<std::vector<std::string>> parseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> record;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      record.push_back(field);
      field.clear();
    } else if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') {
      continue;
    } else if (c == '\n') {
      record.push_back(field);
      field.clear();
      records.push_back(record);
      record.clear();
    } else {
      field += c;
    }
  }
  EXPECT_TRUE(field.empty() && record.empty()) << "the CSV must end with a line break";
  return records;
}

class AdminCliTest : public testing::GpooldCliTest {
 protected:
  // Runs gpool as the unprivileged user `nobody` (a plain user to gpoold: no user record).
  Output gpoolAsNobody(std::vector<std::string> args) {
    std::optional<testing::RunAs> nobody = testing::runAsUser("nobody");
    if (!nobody) return Output{};
    chmod(dir_.path().c_str(), 0755);  // nobody must reach the socket
    return gpool(std::move(args), *nobody);
  }
};

TEST_F(AdminCliTest, UsersAndGroups) {
  startDaemon();
  Output added = gpool({"user", "add", "alice", "--uid", "1001", "--role", "group-admin"});
  ASSERT_EQ(added.rc, 0) << added.err;
  EXPECT_EQ(added.out, "Added user alice (uid 1001, role group-admin, groups -)\n");
  ASSERT_EQ(gpool({"user", "add", "bob", "--uid", "1002"}).rc, 0);

  Output group = gpool({"group", "add", "vision", "--gid", "2001", "--project-dir", "/srv/vision",
                        "--member", "bob", "--admin", "alice"});
  ASSERT_EQ(group.rc, 0) << group.err;
  EXPECT_EQ(group.out, "Added group vision (gid 2001, members alice,bob, admins alice)\n");

  Output list = gpool({"user", "list"});
  ASSERT_EQ(list.rc, 0) << list.err;
  EXPECT_EQ(list.out,
            "USER    UID  ROLE         GROUPS  DEFAULT_QOS\n"
            "alice  1001  group-admin  vision  -\n"
            "bob    1002  user         vision  -\n");
  Output list_json = gpool({"user", "list", "--json"});
  ASSERT_EQ(list_json.rc, 0) << list_json.err;
  json users = json::parse(list_json.out)["users"];
  ASSERT_EQ(users.size(), 2u);
  EXPECT_EQ(users[1]["name"], "bob");
  EXPECT_EQ(users[1]["groups"], json::array({"vision"}));

  Output groups = gpool({"group", "list"});
  ASSERT_EQ(groups.rc, 0) << groups.err;
  EXPECT_EQ(groups.out,
            "GROUP    GID  PROJECT_DIR  MEMBERS    ADMINS\n"
            "vision  2001  /srv/vision  alice,bob  alice\n");
  Output shown = gpool({"group", "show", "vision", "--json"});
  ASSERT_EQ(shown.rc, 0) << shown.err;
  json g = json::parse(shown.out);
  EXPECT_EQ(g["gid"], 2001);
  EXPECT_EQ(g["members"], json::array({"alice", "bob"}));
  EXPECT_EQ(g["admins"], json::array({"alice"}));

  Output set = gpool({"user", "set", "bob", "--role", "admin", "--default-qos", "high"});
  ASSERT_EQ(set.rc, 0) << set.err;
  Output show = gpool({"user", "show", "bob"});
  ASSERT_EQ(show.rc, 0) << show.err;
  EXPECT_EQ(show.out,
            "Name:       bob\n"
            "Uid:        1002\n"
            "Role:       admin\n"
            "Groups:     vision\n"
            "DefaultQoS: high\n"
            "Quota:      none (only the groups' quotas apply)\n");

  ASSERT_EQ(gpool({"group", "set", "vision", "--remove-member", "bob"}).rc, 0);
  Output after = gpool({"group", "show", "vision"});
  EXPECT_TRUE(contains(after.out, "Members:    alice\n")) << after.out;

  // Errors: name the argument, say how to fix it, exit per docs/cli-exit-codes.md.
  Output again = gpool({"user", "add", "alice", "--uid", "1001"});
  EXPECT_EQ(again.rc, 5);
  EXPECT_TRUE(contains(again.err, "already exists (change it with `gpool user set alice"))
      << again.err;
  Output missing = gpool({"user", "show", "carol"});
  EXPECT_EQ(missing.rc, 3);
  EXPECT_TRUE(contains(missing.err, "gpool user add carol")) << missing.err;
  Output bad_uid = gpool({"user", "add", "dave", "--uid", "x1"});
  EXPECT_EQ(bad_uid.rc, 2);
  EXPECT_TRUE(contains(bad_uid.err, "--uid: 'x1' is not a non-negative integer")) << bad_uid.err;
  Output bad_role = gpool({"user", "set", "bob", "--role", "boss"});
  EXPECT_EQ(bad_role.rc, 2);
  EXPECT_TRUE(contains(bad_role.err, "--role: 'boss' is not a role")) << bad_role.err;
  Output bad_name = gpool({"user", "add", "-x", "--uid", "3"});
  EXPECT_EQ(bad_name.rc, 2);
  Output nothing = gpool({"user", "set", "bob"});
  EXPECT_EQ(nothing.rc, 2);
  EXPECT_TRUE(contains(nothing.err, "nothing to change")) << nothing.err;
  Output no_member = gpool({"group", "set", "vision", "--add-member", "zed"});
  EXPECT_EQ(no_member.rc, 3);
  EXPECT_TRUE(contains(no_member.err, "gpool user add zed")) << no_member.err;

  Output removed = gpool({"user", "remove", "bob"});
  ASSERT_EQ(removed.rc, 0) << removed.err;
  EXPECT_EQ(removed.out, "Removed user bob\n");
  EXPECT_EQ(gpool({"user", "show", "bob"}).rc, 3);
  Output group_removed = gpool({"group", "remove", "vision"});
  ASSERT_EQ(group_removed.rc, 0) << group_removed.err;
  EXPECT_EQ(group_removed.out, "Removed group vision (and it from the groups of alice)\n");
  EXPECT_EQ(gpool({"group", "show", "vision"}).rc, 3);
  EXPECT_TRUE(contains(gpool({"user", "show", "alice"}).out, "Groups:     -\n"));
}

// Issue 20 item 10 (D17): `gpool group add vision --member X` with a member without a record
// failed but left the group created, and the next attempt said "already exists". The group and
// its members are now one transaction: nothing is left behind.
TEST_F(AdminCliTest, AGroupCommandWithABadMemberChangesNothing) {
  startDaemon();
  ASSERT_EQ(gpool({"user", "add", "alice", "--uid", "1001"}).rc, 0);
  Output refused =
      gpool({"group", "add", "vision", "--gid", "5000", "--member", "alice", "--member", "relb"});
  EXPECT_EQ(refused.rc, 3) << refused.err;
  EXPECT_TRUE(contains(refused.err, "--member")) << refused.err;
  EXPECT_TRUE(contains(refused.err, "gpool user add relb")) << refused.err;
  EXPECT_EQ(gpool({"group", "show", "vision"}).rc, 3);
  EXPECT_TRUE(contains(gpool({"user", "show", "alice"}).out, "Groups:     -\n"));
  Output added = gpool({"group", "add", "vision", "--gid", "5000", "--member", "alice"});
  ASSERT_EQ(added.rc, 0) << added.err;
  EXPECT_EQ(added.out, "Added group vision (gid 5000, members alice, admins -)\n");
  // A change with a bad member changes neither the gid nor the members.
  Output set = gpool({"group", "set", "vision", "--gid", "6000", "--remove-member", "alice",
                      "--add-member", "relb"});
  EXPECT_EQ(set.rc, 3) << set.err;
  Output shown = gpool({"group", "show", "vision", "--json"});
  ASSERT_EQ(shown.rc, 0) << shown.err;
  EXPECT_EQ(json::parse(shown.out)["gid"], 5000);
  EXPECT_EQ(json::parse(shown.out)["members"], json::array({"alice"}));
}

TEST_F(AdminCliTest, QuotasAndQos) {
  startDaemon();
  Output no_user = gpool({"quota", "set", "--user", "alice", "--max-gpus", "1"});
  EXPECT_EQ(no_user.rc, 3);
  EXPECT_TRUE(contains(no_user.err, "add it first (`gpool user add alice`)")) << no_user.err;
  ASSERT_EQ(gpool({"user", "add", "alice", "--uid", "1001"}).rc, 0);
  ASSERT_EQ(gpool({"group", "add", "vision", "--gid", "2001"}).rc, 0);
  Output set = gpool({"quota", "set", "--user", "alice", "--max-gpus", "1.5", "--gpu-hours", "100",
                      "--max-gpu-mem", "40G", "--max-run-time", "2d"});
  ASSERT_EQ(set.rc, 0) << set.err;
  EXPECT_EQ(set.out,
            "Set the quota of user alice: max_gpus=1.5 gpu_hours=100/30-00:00:00 "
            "max_gpu_mem=40G max_run_time=2-00:00:00 priority_weight=1\n");
  // A second set changes only the limits it names.
  ASSERT_EQ(
      gpool({"quota", "set", "--user", "alice", "--max-gpus", "none", "--priority-weight", "3"}).rc,
      0);
  ASSERT_EQ(gpool({"quota", "set", "--group", "vision", "--max-gpus", "8"}).rc, 0);

  Output list = gpool({"quota", "list"});
  ASSERT_EQ(list.rc, 0) << list.err;
  std::vector<std::string> rows = lines(list.out);
  ASSERT_EQ(rows.size(), 3u) << list.out;
  EXPECT_EQ(rows[0],
            "SUBJECT  NAME    MAX_GPUS  GPU_HOURS       PERIOD  MAX_GPU_MEM  MAX_COMPUTE  "
            "MAX_RUN_TIME  WEIGHT  GUARANTEED");
  EXPECT_EQ(rows[1],
            "group    vision         8          -  30-00:00:00            -            -       "
            "      -       1           0");
  EXPECT_EQ(rows[2],
            "user     alice          -        100  30-00:00:00          40G            -    "
            "2-00:00:00       3           0");
  Output one = gpool({"quota", "list", "--user", "alice", "--json"});
  ASSERT_EQ(one.rc, 0) << one.err;
  json quotas = json::parse(one.out)["quotas"];
  ASSERT_EQ(quotas.size(), 1u);
  EXPECT_EQ(quotas[0]["limits"]["gpu_hours"], 100);
  EXPECT_FALSE(quotas[0]["limits"].contains("max_gpus_milli"));
  EXPECT_EQ(quotas[0]["limits"]["priority_weight"], 3);

  Output bad = gpool({"quota", "set", "--user", "alice", "--max-gpus", "lots"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_TRUE(contains(bad.err, "--max-gpus")) << bad.err;
  Output whose = gpool({"quota", "set", "--max-gpus", "2"});
  EXPECT_EQ(whose.rc, 2);
  EXPECT_TRUE(contains(whose.err, "give exactly one of --user NAME and --group NAME")) << whose.err;
  Output removed = gpool({"quota", "remove", "--group", "vision"});
  ASSERT_EQ(removed.rc, 0) << removed.err;
  EXPECT_EQ(removed.out, "Removed the quota of group vision\n");
  EXPECT_EQ(gpool({"quota", "show", "--group", "vision"}).rc, 3);

  Output qos = gpool({"qos", "add", "high", "--priority", "100", "--preemptible", "--description",
                      "deadline work"});
  ASSERT_EQ(qos.rc, 0) << qos.err;
  EXPECT_EQ(qos.out, "Added QoS high\n");
  ASSERT_EQ(gpool({"qos", "set", "high", "--no-preemptible", "--max-wall-time", "1d"}).rc, 0);
  Output qlist = gpool({"qos", "list"});
  ASSERT_EQ(qlist.rc, 0) << qlist.err;
  EXPECT_EQ(qlist.out,
            "QOS   PRIORITY  PREEMPTIBLE  MAX_GPUS/USER    MAX_WALL    GRACE  DESCRIPTION\n"
            "high       100  no                       -  1-00:00:00  default  deadline work\n");
  json qjson = json::parse(gpool({"qos", "list", "--json"}).out);
  EXPECT_EQ(qjson["qos"][0]["max_wall_time_seconds"], 86400);
  // No --grace-time: gpoold's preempt_grace (absent from the API); 0 is given explicitly, and
  // "default" goes back to the configured grace.
  EXPECT_FALSE(qjson["qos"][0].contains("grace_time_seconds")) << qjson.dump();
  ASSERT_EQ(gpool({"qos", "set", "high", "--grace-time", "0"}).rc, 0);
  qjson = json::parse(gpool({"qos", "list", "--json"}).out);
  EXPECT_EQ(qjson["qos"][0]["grace_time_seconds"], 0) << qjson.dump();
  EXPECT_TRUE(contains(gpool({"qos", "list"}).out, "1-00:00:00  00:00:00  deadline work"));
  ASSERT_EQ(gpool({"qos", "set", "high", "--grace-time", "default"}).rc, 0);
  qjson = json::parse(gpool({"qos", "list", "--json"}).out);
  EXPECT_FALSE(qjson["qos"][0].contains("grace_time_seconds")) << qjson.dump();
  Output none_grace = gpool({"qos", "set", "high", "--grace-time", "none"});
  EXPECT_EQ(none_grace.rc, 2);
  EXPECT_TRUE(contains(none_grace.err,
                       "--grace-time: 'none' is not allowed here (give a value, "
                       "or 'default')"))
      << none_grace.err;
  EXPECT_EQ(gpool({"qos", "add", "high"}).rc, 5);
  Output bad_qos = gpool({"qos", "set", "high", "--grace-time", "soon"});
  EXPECT_EQ(bad_qos.rc, 2);
  EXPECT_TRUE(contains(bad_qos.err, "--grace-time")) << bad_qos.err;
  EXPECT_EQ(gpool({"qos", "set", "low", "--priority", "1"}).rc, 3);
  ASSERT_EQ(gpool({"qos", "remove", "high"}).rc, 0);
  EXPECT_EQ(gpool({"qos", "list"}).out,
            "No QoS levels (add one with `gpool qos add NAME --priority N`)\n");
}

TEST_F(AdminCliTest, DrainAndResume) {
  {
    auto store = ct::openStore(db_);
    ASSERT_TRUE(store::saveApiNode(*store, ct::makeNode("gpu-01", 2)).isOk());
  }
  startDaemon();
  Output drained = gpool({"drain", "gpu-01", "--reason", "disk replacement"});
  ASSERT_EQ(drained.rc, 0) << drained.err;
  EXPECT_TRUE(contains(drained.out, "Node gpu-01 DRAINED (disk replacement)")) << drained.out;
  Output nodes = gpool({"nodes"});
  EXPECT_TRUE(contains(nodes.out, "gpu-01  DRAINED (disk replacement)")) << nodes.out;
  Output resumed = gpool({"resume", "gpu-01", "--json"});
  ASSERT_EQ(resumed.rc, 0) << resumed.err;
  EXPECT_EQ(json::parse(resumed.out)["state"], "IDLE");

  Output no_reason = gpool({"drain", "gpu-01"});
  EXPECT_EQ(no_reason.rc, 2);
  EXPECT_TRUE(contains(no_reason.err, "--reason: say why")) << no_reason.err;
  Output unknown = gpool({"drain", "gpu-09", "--reason", "x"});
  EXPECT_EQ(unknown.rc, 3);
  EXPECT_TRUE(contains(unknown.err, "node 'gpu-09' is not registered")) << unknown.err;
}

// Admin changes show up in `gpool audit`, oldest first, with who made them; --limit pages and
// the "more" line's --after reads the next page; --json is gpoold's answer.
TEST_F(AdminCliTest, AuditListsAdminChangesAndPages) {
  startDaemon();
  Output empty = gpool({"audit"});
  ASSERT_EQ(empty.rc, 0) << empty.err;
  EXPECT_EQ(empty.out, "No audit events.\n");
  ASSERT_EQ(gpool({"user", "add", "alice", "--uid", "1001"}).rc, 0);
  ASSERT_EQ(gpool({"group", "add", "vision", "--gid", "2001"}).rc, 0);
  ASSERT_EQ(gpool({"quota", "set", "--user", "alice", "--max-gpus", "2"}).rc, 0);
  ASSERT_EQ(gpool({"quota", "set", "--group", "vision", "--gpu-hours", "100"}).rc, 0);
  ASSERT_EQ(gpool({"quota", "remove", "--user", "alice"}).rc, 0);

  Output all = gpool({"audit"});
  ASSERT_EQ(all.rc, 0) << all.err;
  std::vector<std::string> rows = lines(all.out);
  ASSERT_EQ(rows.size(), 4u) << all.out;
  EXPECT_EQ(rows[0].substr(0, 4), "SEQ ") << all.out;
  for (const char* column : {"TIME", "ACTOR", "ACTION", "SUBJECT", "DETAIL"})
    EXPECT_TRUE(contains(rows[0], column)) << rows[0];
  // SEQ, TIME (two words: date and time of day), ACTOR, ACTION, SUBJECT, DETAIL.
  auto words = [](const std::string& row) {
    std::istringstream in(row);
    std::vector<std::string> w;
    for (std::string word; in >> word;)
      w.push_back(word);
    return w;
  };
  const std::vector<std::tuple<std::string, std::string>> want = {
      {"set_quota", "user:alice"}, {"set_quota", "group:vision"}, {"delete_quota", "user:alice"}};
  for (size_t i = 0; i < want.size(); ++i) {
    std::vector<std::string> w = words(rows[i + 1]);
    ASSERT_GE(w.size(), 7u) << rows[i + 1];
    EXPECT_EQ(w[3], "root") << rows[i + 1];
    EXPECT_EQ(w[4], std::get<0>(want[i])) << rows[i + 1];
    EXPECT_EQ(w[5], std::get<1>(want[i])) << rows[i + 1];
  }
  // A quota's limits are longer than the DETAIL column: cut, with --json holding them whole.
  EXPECT_EQ(rows[1].substr(rows[1].size() - 3), "...") << rows[1];
  EXPECT_LE(rows[1].size() - rows[1].find('{'), 60u) << rows[1];

  Output as_json = gpool({"audit", "--json"});
  ASSERT_EQ(as_json.rc, 0) << as_json.err;
  json page = json::parse(as_json.out);
  ASSERT_EQ(page["events"].size(), 3u) << as_json.out;
  EXPECT_TRUE(page["next_after"].is_null());
  const json& first = page["events"][0];
  EXPECT_EQ(first["actor"], "root");
  EXPECT_EQ(first["action"], "set_quota");
  EXPECT_EQ(first["subject"], "user:alice");
  EXPECT_TRUE(contains(first["detail"].get<std::string>(), "max_gpus")) << first;
  EXPECT_GT(first["time_us"].get<int64_t>(), 0);
  int64_t second = page["events"][1]["seq"].get<int64_t>();
  EXPECT_LT(first["seq"].get<int64_t>(), second);

  // Two a page: the first page says where the next starts; the next holds only the third.
  Output paged = gpool({"audit", "--limit", "2"});
  ASSERT_EQ(paged.rc, 0) << paged.err;
  std::vector<std::string> first_page = lines(paged.out);
  ASSERT_EQ(first_page.size(), 4u) << paged.out;
  EXPECT_EQ(first_page[3], "(more: gpool audit --after " + std::to_string(second) + ")");
  Output next = gpool({"audit", "--after", std::to_string(second), "--json"});
  ASSERT_EQ(next.rc, 0) << next.err;
  json next_page = json::parse(next.out);
  ASSERT_EQ(next_page["events"].size(), 1u) << next.out;
  EXPECT_EQ(next_page["events"][0]["action"], "delete_quota");
  Output past = gpool({"audit", "--after", std::to_string(second + 1)});
  EXPECT_EQ(past.out, "No audit events after " + std::to_string(second + 1) + ".\n");

  Output bad = gpool({"audit", "--limit", "0"});
  EXPECT_EQ(bad.rc, 2);
  EXPECT_TRUE(contains(bad.err, "--limit")) << bad.err;
}

TEST_F(AdminCliTest, PlainUsersAreDeniedWithExitFour) {
  if (geteuid() != 0 || !getpwnam("nobody")) GTEST_SKIP() << "needs root and a nobody user";
  {
    auto store = ct::openStore(db_);
    ASSERT_TRUE(store::saveApiNode(*store, ct::makeNode("gpu-01", 1)).isOk());
  }
  startDaemon();
  for (const std::vector<std::string>& cmd :
       std::vector<std::vector<std::string>>{{"user", "add", "eve", "--uid", "7"},
                                             {"group", "add", "g", "--gid", "7"},
                                             {"qos", "add", "x"},
                                             {"drain", "gpu-01", "--reason", "mine"},
                                             {"resume", "gpu-01"},
                                             {"quota", "set", "--user", "eve", "--max-gpus", "9"},
                                             {"audit"}}) {
    Output o = gpoolAsNobody(cmd);
    EXPECT_EQ(o.rc, 4) << cmd[0] << ": " << o.err;
    EXPECT_TRUE(contains(o.err, "gpool: permission denied: `gpool " + cmd[0])) << o.err;
    EXPECT_TRUE(contains(o.err, "needs the admin role")) << o.err;
  }
  // Reading what is public still works for them.
  Output qos = gpoolAsNobody({"qos", "list"});
  EXPECT_EQ(qos.rc, 0) << qos.err;
}

TEST_F(AdminCliTest, UsageReportAndCsvReadBack) {
  TimePoint now = realClock().now();
  {
    auto store = ct::openStore(db_);
    // alice: half a GPU for 2 hours (1 GPU-hour); bob: a quarter for 2 hours (0.5).
    for (auto [user, group, milli] :
         {std::tuple<std::string, std::string, uint32_t>{"alice", "ml", 500},
          {"bob", "vision", 250}}) {
      auto ids = store::submitApiJob(*store, user, 1000, group, ct::makeSpec(milli, "run"),
                                     now - std::chrono::hours(3));
      ASSERT_TRUE(ids.ok());
      api::Allocation a;
      a.node = "gpu-01";
      api::Slice s;
      s.gpu_uuid = "GPU-gpu-01-0";
      s.compute_milli = milli;
      s.memory_mib = 1024;
      a.slices.push_back(s);
      int64_t id = (*ids)[0];
      ASSERT_TRUE(store
                      ->recordPlacement(id, store::placementJsonFor({a}),
                                        now - std::chrono::hours(3), "placed")
                      .ok());
      ASSERT_TRUE(
          store->recordEnd(id, api::JobState::kCompleted, 0, now - std::chrono::hours(1), "done")
              .isOk());
    }
  }
  startDaemon();
  Output human = gpool({"usage"});
  ASSERT_EQ(human.rc, 0) << human.err;
  std::vector<std::string> rows = lines(human.out);
  ASSERT_EQ(rows.size(), 5u) << human.out;
  EXPECT_EQ(rows[0].rfind("GPU-hours by user (slices counted by their share), ", 0), 0u);
  EXPECT_EQ(rows[1], "USER   GPU-HOURS  JOBS");
  EXPECT_EQ(rows[2], "alice       1.00     1");
  EXPECT_EQ(rows[3], "bob         0.50     1");
  EXPECT_EQ(rows[4], "TOTAL       1.50     2");

  Output by_group = gpool({"usage", "--by", "group", "--json"});
  ASSERT_EQ(by_group.rc, 0) << by_group.err;
  json j = json::parse(by_group.out);
  EXPECT_EQ(j["by"], "group");
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["key"], "ml");

  Output csv = gpool({"usage", "--csv"});
  ASSERT_EQ(csv.rc, 0) << csv.err;
  EXPECT_TRUE(contains(csv.out, "\r\n"));
  auto records = parseCsv(csv.out);
  ASSERT_EQ(records.size(), 3u) << csv.out;
  EXPECT_EQ(records[0], (std::vector<std::string>{"user", "gpu_hours", "jobs", "from", "to"}));
  EXPECT_EQ(records[1][0], "alice");
  EXPECT_NEAR(std::stod(records[1][1]), 1.0, 1e-6);
  EXPECT_EQ(records[1][2], "1");
  EXPECT_EQ(records[2][0], "bob");
  EXPECT_NEAR(std::stod(records[2][1]), 0.5, 1e-6);
  EXPECT_EQ(records[1][3].size(), 20u);  // "YYYY-MM-DD HH:MM:SSZ"

  // A period that ends before the jobs ran is empty.
  Output old = gpool({"usage", "--from", "2020-01-01", "--to", "2020-02-01"});
  ASSERT_EQ(old.rc, 0) << old.err;
  EXPECT_TRUE(contains(old.out, "2020-01-01 00:00:00 to 2020-02-01 00:00:00 UTC\n"));
  EXPECT_TRUE(contains(old.out, "No GPU use in this period")) << old.out;

  Output bad_by = gpool({"usage", "--by", "node"});
  EXPECT_EQ(bad_by.rc, 2);
  EXPECT_TRUE(contains(bad_by.err, "--by: 'node' is not one of user, group")) << bad_by.err;
  Output bad_from = gpool({"usage", "--from", "yesterday"});
  EXPECT_EQ(bad_from.rc, 2);
  EXPECT_TRUE(contains(bad_from.err, "--from: 'yesterday'")) << bad_from.err;
  EXPECT_EQ(gpool({"usage", "--csv", "--json"}).rc, 2);
}

TEST_F(AdminCliTest, AccountQuotaAndUsageOfMine) {
  if (geteuid() != 0 || !getpwnam("nobody")) GTEST_SKIP() << "needs root and a nobody user";
  TimePoint now = realClock().now();
  {
    // nobody used half a GPU for 2 hours (1 GPU-hour) in group ml; alice used some too.
    auto store = ct::openStore(db_);
    for (auto [user, milli] : {std::pair<std::string, uint32_t>{"nobody", 500}, {"alice", 1000}}) {
      auto ids = store::submitApiJob(*store, user, 1000, "ml", ct::makeSpec(milli, "run"),
                                     now - std::chrono::hours(3));
      ASSERT_TRUE(ids.ok());
      api::Allocation a;
      a.node = "gpu-01";
      api::Slice s;
      s.gpu_uuid = "GPU-gpu-01-0";
      s.compute_milli = milli;
      s.memory_mib = 1024;
      a.slices.push_back(s);
      ASSERT_TRUE(store
                      ->recordPlacement((*ids)[0], store::placementJsonFor({a}),
                                        now - std::chrono::hours(3), "placed")
                      .ok());
      ASSERT_TRUE(store
                      ->recordEnd((*ids)[0], api::JobState::kCompleted, 0,
                                  now - std::chrono::hours(1), "done")
                      .isOk());
    }
  }
  startDaemon();
  ASSERT_EQ(gpool({"group", "add", "ml", "--gid", "3000"}).rc, 0);
  ASSERT_EQ(gpool({"user", "add", "nobody", "--group", "ml"}).rc, 0);  // uid from passwd
  ASSERT_EQ(gpool({"quota", "set", "--user", "nobody", "--max-gpus", "2", "--gpu-hours", "10"}).rc,
            0);
  ASSERT_EQ(gpool({"quota", "set", "--group", "ml", "--max-gpus", "4"}).rc, 0);

  Output account = gpoolAsNobody({"account"});
  ASSERT_EQ(account.rc, 0) << account.err;
  std::string uid = std::to_string(getpwnam("nobody")->pw_uid);
  EXPECT_TRUE(contains(account.out, "User:               nobody (uid " + uid + ")\n"))
      << account.out;
  EXPECT_TRUE(contains(account.out, "Role:               user\n")) << account.out;
  EXPECT_TRUE(contains(account.out, "Groups:             ml\n")) << account.out;
  EXPECT_TRUE(contains(account.out, "Jobs:               0 running, 0 pending\n")) << account.out;
  EXPECT_TRUE(contains(account.out, "Quota(user nobody): max_gpus=2 gpu_hours=10/30-00:00:00"))
      << account.out;
  EXPECT_TRUE(contains(account.out,
                       "Used(user nobody):  gpus 0/2, gpu_hours 1.00/10 in the "
                       "last 30-00:00:00\n"))
      << account.out;
  EXPECT_TRUE(contains(account.out, "Quota(group ml):    max_gpus=4")) << account.out;
  EXPECT_TRUE(contains(account.out, "FairShare:          decayed usage ")) << account.out;

  Output as_json = gpoolAsNobody({"account", "--json"});
  ASSERT_EQ(as_json.rc, 0) << as_json.err;
  json j = json::parse(as_json.out);
  EXPECT_EQ(j["user"], "nobody");
  EXPECT_EQ(j["has_record"], true);
  ASSERT_EQ(j["quotas"].size(), 2u);
  ASSERT_TRUE(j["fair_share"].is_object()) << as_json.out;
  double decayed = j["fair_share"]["user_gpu_hours"].get<double>();
  EXPECT_GT(decayed, 0.5);  // 1 GPU-hour, decayed by hours of a 7-day half-life
  EXPECT_LE(decayed, 1.0 + 1e-9);

  Output quota = gpoolAsNobody({"quota", "--mine"});
  ASSERT_EQ(quota.rc, 0) << quota.err;
  std::vector<std::string> rows = lines(quota.out);
  ASSERT_EQ(rows.size(), 7u) << quota.out;
  EXPECT_EQ(rows[0].rfind("SUBJECT  NAME    MAX_GPUS", 0), 0u) << quota.out;
  EXPECT_EQ(rows[4], "SUBJECT  NAME    GPUS(now/max)  GPU_HOURS(period/max)");
  EXPECT_EQ(rows[5], "group    ml                0/4                   3.00");
  EXPECT_EQ(rows[6], "user     nobody            0/2                1.00/10");
  Output quota_json = gpoolAsNobody({"account", "quota", "--json"});
  ASSERT_EQ(quota_json.rc, 0) << quota_json.err;
  EXPECT_EQ(json::parse(quota_json.out)["quotas"].size(), 2u);

  Output usage = gpoolAsNobody({"usage", "--mine"});
  ASSERT_EQ(usage.rc, 0) << usage.err;
  rows = lines(usage.out);
  ASSERT_EQ(rows.size(), 4u) << usage.out;
  EXPECT_EQ(rows[1], "USER    GPU-HOURS  JOBS");
  EXPECT_EQ(rows[2], "nobody       1.00     1");
  EXPECT_EQ(rows[3].rfind("Fair share: decayed usage ", 0), 0u) << usage.out;
  // As root (an admin), --mine still means root's own rows: none here.
  Output root_usage = gpool({"usage", "--mine", "--json"});
  ASSERT_EQ(root_usage.rc, 0) << root_usage.err;
  EXPECT_TRUE(json::parse(root_usage.out)["rows"].empty());
  Output both = gpool({"quota", "list", "--mine"});
  EXPECT_EQ(both.rc, 2);
}

TEST_F(AdminCliTest, ConfigCheck) {
  std::string good = writeConfig();
  Output ok = gpool({"config", "check", good});
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_EQ(ok.out, "OK: " + good + " is a valid gpoold configuration\n");

  std::string bad = dir_.path() + "/bad.toml";
  std::ofstream(bad) << "[controller]\nstor = \"/x\"\nnode_down_after = \"5x\"\n";
  Output errors = gpool({"config", "check", bad});
  EXPECT_EQ(errors.rc, 2);
  EXPECT_TRUE(contains(errors.err, bad + ":2: unknown key 'controller.stor' (did you mean "
                                         "'store'?)"))
      << errors.err;
  EXPECT_TRUE(contains(errors.err, bad + ":3: key 'controller.node_down_after'")) << errors.err;
  EXPECT_TRUE(contains(errors.err, "2 problems")) << errors.err;
  Output as_json = gpool({"config", "check", bad, "--json"});
  EXPECT_EQ(as_json.rc, 2);
  json j = json::parse(as_json.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["errors"].size(), 2u);

  Output missing = gpool({"config", "check", dir_.path() + "/none.toml"});
  EXPECT_EQ(missing.rc, 1) << missing.err;
  EXPECT_EQ(gpool({"config", "check", good, "--kind", "slurm"}).rc, 2);
}

// --kind agent checks a gpool-agent.toml with the agent's own reader, in the same style.
TEST_F(AdminCliTest, ConfigCheckOfAnAgentConfiguration) {
  std::string good = dir_.path() + "/gpool-agent.toml";
  std::ofstream(good) << "[agent]\nnode = \"gpu-01\"\nunix_socket = \"/run/gpool/gpoold.sock\"\n"
                      << "cpus = \"8\"\nram = \"64G\"\n[agent.labels]\nrack = \"r1\"\n";
  Output ok = gpool({"config", "check", "--kind", "agent", good});
  EXPECT_EQ(ok.rc, 0) << ok.err;
  EXPECT_EQ(ok.out, "OK: " + good + " is a valid gpool-agent configuration\n");
  std::string example = std::string(GPOOL_SOURCE_DIR) + "/deploy/config/gpool-agent.toml";
  Output shipped = gpool({"config", "check", "--kind", "agent", example});
  EXPECT_EQ(shipped.rc, 0) << shipped.err;

  std::string bad = dir_.path() + "/bad-agent.toml";
  std::ofstream(bad) << "[agent]\ncontroler = \"ctl:6443\"\nram = \"lots\"\n";
  Output errors = gpool({"config", "check", "--kind", "agent", bad});
  EXPECT_EQ(errors.rc, 2);
  EXPECT_TRUE(contains(errors.err, bad + ":2: unknown key 'agent.controler' (did you mean "
                                         "'controller'?)"))
      << errors.err;
  EXPECT_TRUE(contains(errors.err, bad + ":3: key 'agent.ram'")) << errors.err;
  EXPECT_TRUE(contains(errors.err, "2 problems")) << errors.err;
  Output as_json = gpool({"config", "check", "--kind", "agent", bad, "--json"});
  EXPECT_EQ(as_json.rc, 2);
  json j = json::parse(as_json.out);
  EXPECT_EQ(j["kind"], "agent");
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["errors"].size(), 2u);
  // A gpoold configuration is not an agent's: its keys are unknown to the agent's reader.
  Output wrong_kind = gpool({"config", "check", "--kind", "agent", writeConfig()});
  EXPECT_EQ(wrong_kind.rc, 2);
  EXPECT_TRUE(contains(wrong_kind.err, ":1: unknown key 'controller'")) << wrong_kind.err;
}

TEST_F(AdminCliTest, HelpOnEveryCommand) {
  for (const std::vector<std::string>& cmd :
       std::vector<std::vector<std::string>>{{"user"},
                                             {"user", "add"},
                                             {"user", "set"},
                                             {"group", "add"},
                                             {"group", "set"},
                                             {"quota"},
                                             {"quota", "set"},
                                             {"qos", "add"},
                                             {"qos", "set"},
                                             {"drain"},
                                             {"resume"},
                                             {"usage"},
                                             {"audit"},
                                             {"account"},
                                             {"account", "quota"},
                                             {"config", "check"}}) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    Output o = gpool(args);
    EXPECT_EQ(o.rc, 0) << cmd.back() << ": " << o.err;
    EXPECT_TRUE(contains(o.out, "Exit codes:")) << cmd.back() << ": " << o.out;
  }
  Output bare = gpool({"user"});
  EXPECT_EQ(bare.rc, 2);
}

}  // namespace
}  // namespace gpool::cli
