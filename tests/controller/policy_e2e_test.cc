// Issue 21: the scheduling policies as users meet them, through the real daemons. gpoold runs
// with a scenario's [scheduler] settings (data/scenarios/*.txt), one gpool-agent per server with
// simulated GPUs, and jobs are submitted over REST by real Unix users (created here with
// useradd: root only; the tests skip otherwise, saying why). Decisions are read back from the
// jobs and their events; the same scenario replayed by `gpool sim scenario` must give the same
// trace. Waits poll the API with deadlines; nothing sleeps to synchronise.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "cli/cli_test_util.h"
#include "controller/raw_http.h"
#include "net/client.h"
#include "sim/scenario.h"

namespace gpool::policy_e2e {
namespace {

using nlohmann::json;

const std::string kScenarios = std::string(GPOOL_SOURCE_DIR) + "/data/scenarios/";
const std::string kFixtures = std::string(GPOOL_SOURCE_DIR) + "/src/gpu/fixtures/";

// A scenario's user "mia" is the Unix user "gpool-test-mia".
std::string unixName(const std::string& user) {
  return "gpool-test-" + user;
}

// Creates the Unix user once (useradd; one at a time across test binaries), or says why not.
std::string ensureUnixUser(const std::string& name) {
  if (::geteuid() != 0) return "these tests need root (real users submit and run the jobs)";
  if (::getpwnam(name.c_str()) != nullptr) return "";
  int lock = ::open("/tmp/gpool-test-users.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  std::string cmd = "useradd --no-create-home --home-dir /nonexistent --shell /bin/sh " + name +
                    " >/dev/null 2>&1";
  int rc = ::getpwnam(name.c_str()) != nullptr ? 0 : std::system(cmd.c_str());
  if (lock >= 0) ::close(lock);
  if (rc != 0 && ::getpwnam(name.c_str()) == nullptr) return "cannot create user " + name;
  return "";
}

// Polls `done` every 50 ms until it holds or `deadline` passes.
bool eventually(const std::function<bool()>& done,
                std::chrono::milliseconds deadline = std::chrono::seconds(60)) {
  auto until = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

class PolicyPool : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpool-policy-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0777);  // the jobs run in it as the test users
    socket_ = dir_ + "/gpoold.sock";
  }

  void TearDown() override {
    if (http_) {
      // Every job ends before the agents stop: their tasks would outlive the pool otherwise.
      for (const auto& [name, id] : ids_) {
        (void)http_->post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
      }
      EXPECT_TRUE(eventually([&] {
        for (const auto& [name, id] : ids_) {
          std::string s = job(id).value("state", "");
          if (s == "PENDING" || s == "RUNNING" || s == "COMPLETING") return false;
        }
        return true;
      })) << "jobs still running at the end of the test";
      http_.reset();
    }
    for (pid_t pid : agents_) {
      ::kill(pid, SIGTERM);
      ::waitpid(pid, nullptr, 0);
    }
    if (gpoold_.running()) {
      EXPECT_EQ(gpoold_.stop(), 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // Users, or a skip with the reason.
  std::string ensureUsers(const std::vector<std::string>& users) {
    for (const std::string& u : users) {
      std::string why = ensureUnixUser(unixName(u));
      if (!why.empty()) return why;
    }
    return "";
  }

  // gpoold with the scenario's settings, one agent per server, its QoS levels, groups, users
  // and quotas (set by root over REST, as `gpool qos/group/user/quota` do).
  void startPool(const sim::Scenario& s) {
    std::string scheduler = "[scheduler]\n";
    std::string controller =
        s.settings.count("schedule_interval") ? "" : "schedule_interval = \"1s\"\n";
    for (const auto& [key, value] : s.settings) {
      const bool quoted = value != "true" && value != "false";
      const std::string line = key + " = " + (quoted ? "\"" + value + "\"" : value) + "\n";
      if (key == "schedule_interval" || key == "usage_half_life") {
        controller += line;
      } else {
        scheduler += line;
      }
    }
    const std::string config = dir_ + "/gpoold.toml";
    std::ofstream(config) << "[controller]\nstore = \"" << dir_ << "/gpool.db\"\n"
                          << "sqlite_synchronous = \"NORMAL\"\nsocket = \"" << socket_ << "\"\n"
                          << controller << scheduler << "[log]\nlevel = \"warn\"\n";
    ASSERT_EQ(gpoold_.start(config), "");
    http_ = std::make_unique<net::HttpClient>(net::ClientEndpoint::unixSocket(socket_),
                                              std::chrono::seconds(30));
    for (const sim::ScenarioServer& srv : s.servers) {
      std::vector<std::string> args = {
          std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-agent",
          "--node",
          srv.name,
          "--unix-socket",
          socket_,
          "--state-dir",
          dir_ + "/state-" + srv.name,
          "--fake-fixture",
          srv.fixture.front() == '/' ? srv.fixture : kFixtures + srv.fixture + ".json",
          "--supervisor",
          std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-supervisor",
          "--vgpu-dir",
          dir_ + "/vgpu-" + srv.name,
          "--no-cgroups",
          "--cpus",
          std::to_string(srv.cpu_millis / 1000),
          "--ram",
          std::to_string(srv.ram_mib) + "M"};
      pid_t pid = spawn(args, dir_ + "/agent-" + srv.name);
      ASSERT_GT(pid, 0);
      agents_.push_back(pid);
    }
    ASSERT_TRUE(eventually([&] {
      auto r = http_->get("/v1/nodes");
      return r.ok() && r->status == 200 && json::parse(r->body)["nodes"].size() == s.servers.size();
    })) << "the agents did not register";
    for (const sim::ScenarioQos& q : s.qos) {
      json body{{"name", q.name}, {"priority", q.priority}, {"preemptible", q.preemptible}};
      if (q.grace_s) body["grace_time_seconds"] = *q.grace_s;
      if (q.max_gpus_per_user_milli) body["max_gpus_per_user_milli"] = *q.max_gpus_per_user_milli;
      put("/v1/qos/" + q.name, body);
    }
    uint32_t gid = 62000;
    for (const sim::ScenarioGroup& g : s.groups) {
      put("/v1/groups/" + g.name, json{{"name", g.name}, {"gid", ++gid}});
      json quota{{"guaranteed_gpus_milli", g.guaranteed_milli}};
      if (g.max_gpus_milli) quota["max_gpus_milli"] = *g.max_gpus_milli;
      if (g.gpu_hours) quota["gpu_hours"] = *g.gpu_hours;
      put("/v1/quotas/group/" + g.name, quota);
    }
    for (const sim::ScenarioUser& u : s.users) {
      const passwd* pw = ::getpwnam(unixName(u.name).c_str());
      ASSERT_NE(pw, nullptr) << unixName(u.name);
      put("/v1/users/" + unixName(u.name),
          json{{"name", unixName(u.name)}, {"uid", pw->pw_uid}, {"groups", u.groups}});
      if (u.max_gpus_milli) {
        put("/v1/quotas/user/" + unixName(u.name), json{{"max_gpus_milli", *u.max_gpus_milli}});
      }
    }
  }

  void put(const std::string& path, const json& body) {
    auto r = http_->request(net::Method::kPut, path, body.dump());
    ASSERT_TRUE(r.ok()) << path;
    ASSERT_LT(r->status, 300) << path << ": " << r->body;
  }

  static pid_t spawn(const std::vector<std::string>& args, const std::string& out_prefix) {
    pid_t pid = ::fork();
    if (pid == 0) {
      int out = ::open((out_prefix + ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out >= 0) {
        ::dup2(out, STDOUT_FILENO);
        ::dup2(out, STDERR_FILENO);
      }
      std::vector<char*> argv;
      for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  }

  // The command of a scenario job: it runs for run_s, or until stopped; when preempted it
  // exits `leaves_s` after SIGTERM, or ignores SIGTERM and is killed when the grace ends.
  static std::string commandOf(const sim::ScenarioJob& j) {
    if (j.run_s > 0) return "exec sleep " + std::to_string(j.run_s);
    if (j.leaves_s) {
      return "trap 'sleep " + std::to_string(*j.leaves_s) + "; exit 0' TERM; sleep 300 & wait";
    }
    return "trap '' TERM; exec sleep 300";
  }

  // POST /v1/jobs as the job's user; returns the HTTP status and body.
  std::pair<int, json> submitAs(const std::string& user, const api::JobSpec& spec,
                                const std::string& group) {
    const passwd* pw = ::getpwnam(unixName(user).c_str());
    if (pw == nullptr) return {0, json()};
    std::string body = api::toJson(spec).dump();
    std::string target = "/v1/jobs" + (group.empty() ? "" : "?group=" + group);
    std::string request = "POST " + target +
                          " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                          "Connection: close\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
    std::string response =
        controller::testing::rawRequestAs(pw->pw_uid, pw->pw_gid, socket_, request);
    int status = 0;
    if (response.rfind("HTTP/1.1 ", 0) == 0) status = std::atoi(response.c_str() + 9);
    size_t start = response.find("\r\n\r\n");
    json j = start == std::string::npos ? json()
                                        : json::parse(response.substr(start + 4), nullptr, false);
    return {status, j};
  }

  api::JobSpec specOf(const sim::ScenarioJob& j) const {
    api::JobSpec spec;
    spec.name = j.name;
    spec.command = {"/bin/sh", "-c", commandOf(j)};
    spec.working_dir = dir_;
    spec.resources.gpus_milli = j.gpus_milli;
    spec.tasks = j.tasks;
    spec.qos = j.qos;
    spec.preemptible = j.preemptible;
    return spec;
  }

  json job(int64_t id) {
    auto r = http_->get("/v1/jobs/" + std::to_string(id));
    if (!r.ok() || r->status != 200) return json::object();
    return json::parse(r->body, nullptr, false);
  }
  json events(int64_t id) {
    auto r = http_->get("/v1/jobs/" + std::to_string(id) + "/events");
    if (!r.ok() || r->status != 200) return json::array();
    return json::parse(r->body, nullptr, false).value("events", json::array());
  }

  // What gpoold decided, in the scenario's terms: states, reasons, starts (events into
  // RUNNING) and the preemptors named by each PREEMPTED event ("... for job N ...").
  std::map<std::string, sim::JobView> views() {
    std::map<int64_t, std::string> names;
    for (const auto& [name, id] : ids_)
      names[id] = name;
    std::map<std::string, sim::JobView> out;
    static const std::regex kFor("for job ([0-9]+)");
    for (const std::string& name : order_) {
      sim::JobView& v = out[name];
      auto id = ids_.find(name);
      if (id == ids_.end()) {
        v.state = "REFUSED";
        continue;
      }
      json j = job(id->second);
      v.state = j.value("state", "");
      v.reason = j.value("reason", "");
      for (const json& e : events(id->second)) {
        const std::string to = e.value("to_state", "");
        // A placement (PENDING -> RUNNING); the agent's report is RUNNING -> RUNNING.
        if (to == "RUNNING" && e.value("from_state", "") == "PENDING") ++v.starts;
        std::smatch m;
        const std::string why = e.value("reason", "");
        if (to == "PREEMPTED" && std::regex_search(why, m, kFor)) {
          auto p = names.find(std::stoll(m[1].str()));
          v.preempted_for.push_back(p == names.end() ? m[1].str() : p->second);
        }
      }
    }
    return out;
  }

  // Drives the scenario: its steps against the pool, a trace line per wait (as the simulator
  // writes them). Failed expectations and waits are test failures naming the scenario's line.
  std::vector<std::string> play(const sim::Scenario& s) {
    std::vector<std::string> trace;
    for (const sim::ScenarioStep& step : s.steps) {
      const std::string where = s.source + ":" + std::to_string(step.line);
      switch (step.kind) {
        case sim::ScenarioStep::Kind::kSubmit: {
          order_.push_back(step.job.name);
          submitted_at_[step.job.name] = std::chrono::steady_clock::now();
          auto [status, body] = submitAs(step.job.user, specOf(step.job), step.job.group);
          if (status == 201) ids_[step.job.name] = body["ids"][0].get<int64_t>();
          refusals_[step.job.name] = status == 201 ? "" : body.dump();
          break;
        }
        case sim::ScenarioStep::Kind::kWait: {
          // Real time runs slower than the simulator's under load: three times its bound.
          bool held = eventually([&] { return sim::waitHolds(step, views()); },
                                 std::chrono::seconds(3 * step.within_s + 10));
          EXPECT_TRUE(held) << where << ": " << sim::traceLine(order_, views());
          trace.push_back(sim::traceLine(order_, views()));
          break;
        }
        case sim::ScenarioStep::Kind::kExpect: {
          std::string failed = sim::checkExpectation(step, views());
          EXPECT_EQ(failed, "") << where;
          break;
        }
      }
    }
    return trace;
  }

  // `gpool sim scenario FILE`: its trace lines.
  static std::vector<std::string> simulate(const std::string& file) {
    cli::testing::Output out = cli::testing::runProgram(
        cli::testing::kGpool, {"sim", "scenario", file}, std::filesystem::temp_directory_path());
    EXPECT_EQ(out.rc, 0) << out.err;
    std::vector<std::string> lines;
    std::istringstream in(out.out);
    std::string line;
    while (std::getline(in, line)) {
      size_t colon = line.find(": ");
      if (line.rfind("wait ", 0) == 0 && colon != std::string::npos) {
        lines.push_back(line.substr(colon + 2));
      }
    }
    return lines;
  }

  // When the events of job `name` first entered `state` (steady clock, from the event's time).
  std::optional<double> eventSeconds(const std::string& name, const std::string& state,
                                     bool last = false) {
    auto id = ids_.find(name);
    if (id == ids_.end()) return std::nullopt;
    std::optional<double> at;
    for (const json& e : events(id->second)) {
      if (e.value("to_state", "") != state) continue;
      at = static_cast<double>(e.value("time_us", int64_t{0})) / 1e6;
      if (!last) break;
    }
    return at;
  }

  std::string dir_;
  std::string socket_;
  cli::testing::GpooldProcess gpoold_;
  std::vector<pid_t> agents_;
  std::unique_ptr<net::HttpClient> http_;
  std::vector<std::string> order_;
  std::map<std::string, int64_t> ids_;
  std::map<std::string, std::string> refusals_;
  std::map<std::string, std::chrono::steady_clock::time_point> submitted_at_;
};

// Runs a scenario file through gpoold and through `gpool sim scenario`, checks its
// expectations in both, and that both traced the same decisions.
class ScenarioTest : public PolicyPool {
 protected:
  void run(const std::string& file) {
    Result<sim::Scenario> s = sim::loadScenario(kScenarios + file);
    ASSERT_TRUE(s.ok()) << s.status().toString();
    std::vector<std::string> users;
    for (const sim::ScenarioUser& u : s->users)
      users.push_back(u.name);
    std::string why = ensureUsers(users);
    if (!why.empty()) GTEST_SKIP() << why;
    startPool(*s);
    if (HasFatalFailure()) return;
    std::vector<std::string> real = play(*s);
    std::vector<std::string> simulated = simulate(kScenarios + file);
    EXPECT_EQ(real, simulated) << "gpoold and gpool sim decided differently";
  }
};

// Item 1: a preemptor owns what it preempts. Its victims leave one after the other; the first
// one's GPUs are not given back to it, the preemptor starts within one pass of the second
// leaving, and nothing is preempted twice.
TEST_F(ScenarioTest, PreemptorStartsOnWhatItPreemptedAndNoVictimReturns) {
  run("preemption.txt");
  if (IsSkipped() || HasFailure()) return;
  std::optional<double> gone = eventSeconds("v4", "PREEMPTED");
  std::optional<double> started = eventSeconds("p", "RUNNING");
  ASSERT_TRUE(gone && started);
  // One pass (1 s) after the last victim left, with room for a loaded machine.
  EXPECT_LE(*started - *gone, 3.0) << "p started " << *started - *gone << " s after v4 left";
}

// Item 2: a group below its guarantee gets its capacity back within the reclaim delay plus the
// grace (the victims had run their minimum already).
TEST_F(ScenarioTest, GroupBelowItsGuaranteeReclaimsWithinDelayAndGrace) {
  run("reclaim.txt");
  if (IsSkipped() || HasFailure()) return;
  std::optional<double> submitted = eventSeconds("b4", "PENDING");
  std::optional<double> started = eventSeconds("b4", "RUNNING");
  ASSERT_TRUE(submitted && started);
  // reclaim_delay 2 s + grace 3 s, plus a pass and a loaded machine's slack.
  EXPECT_LE(*started - *submitted, 2.0 + 3.0 + 3.0);
}

// Item 3: a job's group is its user's default group, so group caps bind jobs without --group;
// --group must be a group the user is in, an unknown group or QoS is refused (item 4).
TEST_F(ScenarioTest, GroupQuotasBindEveryJobOfTheGroupAndNoOneElses) {
  run("groups.txt");
  if (IsSkipped() || HasFailure()) return;
  EXPECT_NE(refusals_["m1"].find("not a member of group 'gB'"), std::string::npos)
      << refusals_["m1"];
  EXPECT_NE(refusals_["m2"].find("there is no group 'nosuch'"), std::string::npos)
      << refusals_["m2"];
  EXPECT_NE(refusals_["m3"].find("job.qos: there is no QoS level 'nosuch'"), std::string::npos)
      << refusals_["m3"];
  EXPECT_EQ(job(ids_["b1"]).value("group", ""), "gB");
  EXPECT_EQ(job(ids_["m4"]).value("group", ""), "gA");
}

// Fair share between groups: once gA has used the pool, gB's later job starts before gA's older
// one, in gpoold as in gpool sim (seen failing with queue_order fifo: m2 starts first).
TEST_F(ScenarioTest, FairShareServesTheGroupThatUsedLessFirst) {
  run("fairshare.txt");
  if (IsSkipped() || HasFailure()) return;
  std::optional<double> ended = eventSeconds("m1", "COMPLETED");
  std::optional<double> started = eventSeconds("b1", "RUNNING");
  ASSERT_TRUE(ended && started);
  // The pass after m1's end places b1 (1 s interval; slack for a loaded machine).
  EXPECT_LE(*started - *ended, 3.0) << "b1 started " << *started - *ended << " s after m1 ended";
}

// The other items, each on a small pool of its own: one server, scheduler settings in seconds,
// users mia and bob (mia in group gA).
class PolicyTest : public PolicyPool {
 protected:
  void SetUp() override {
    PolicyPool::SetUp();
    std::string why = ensureUsers({"mia", "bob"});
    if (!why.empty()) GTEST_SKIP() << why;
  }
  void start(const std::string& fixture = "8x-a100-sxm4-80gb-nvlink",
             const std::map<std::string, std::string>& settings = {}) {
    sim::Scenario s;
    s.source = "test";
    sim::ScenarioServer srv;
    srv.name = "n1";
    srv.fixture = fixture;
    s.servers.push_back(srv);
    s.settings = {{"preempt_grace", "1s"}};
    for (const auto& [key, value] : settings)
      s.settings[key] = value;
    sim::ScenarioGroup g;
    g.name = "gA";
    s.groups.push_back(g);
    sim::ScenarioUser mia;
    mia.name = "mia";
    mia.groups = {"gA"};
    sim::ScenarioUser bob;
    bob.name = "bob";
    s.users = {mia, bob};
    startPool(s);
  }
  // Submits a job as `user` (by name, for the views and the teardown) and returns its status.
  int submit(const std::string& name, const std::string& user, api::JobSpec spec,
             json* body = nullptr) {
    spec.name = name;
    if (spec.command.empty()) spec.command = {"/bin/sh", "-c", "trap '' TERM; exec sleep 300"};
    spec.working_dir = dir_;
    order_.push_back(name);
    auto [status, answer] = submitAs(user, spec, "");
    if (status == 201) ids_[name] = answer["ids"][0].get<int64_t>();
    if (body) *body = answer;
    return status;
  }
  static api::JobSpec gpus(uint32_t milli) {
    api::JobSpec spec;
    spec.resources.gpus_milli = milli;
    return spec;
  }
  bool waitFor(const std::string& name, const std::string& state) {
    return eventually([&] { return job(ids_[name]).value("state", "") == state; });
  }
  cli::testing::Output gpoolAs(const std::string& user, std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", socket_});
    cli::testing::RunAs as;
    if (!user.empty()) {
      std::optional<cli::testing::RunAs> u = cli::testing::runAsUser(unixName(user));
      if (u) as = *u;
    }
    as.cwd = dir_;
    return cli::testing::runProgram(cli::testing::kGpool, args, dir_, {}, as);
  }
};

// Item 4: a gang no set of servers can hold is refused at submission, naming the field.
TEST_F(PolicyTest, ImpossibleGangIsRefusedAtSubmission) {
  start();
  api::JobSpec spec = gpus(8000);
  spec.tasks = 4;
  spec.nodes = 2;
  json body;
  EXPECT_EQ(submit("gang", "mia", spec, &body), 400) << body.dump();
  EXPECT_NE(body.dump().find("job.tasks: 4 tasks of 8 GPUs over exactly 2 nodes"),
            std::string::npos)
      << body.dump();
  spec.tasks = 1;
  spec.nodes = 0;
  EXPECT_EQ(submit("fits", "mia", spec), 201);
}

// Item 5: usage counts running jobs (GET /v1/usage, by user and by group), and a quota's
// GPU-hours may be a fraction (gpool quota set --gpu-hours 0.001: 3.6 GPU-seconds) that binds
// while the job that used it still runs.
TEST_F(PolicyTest, RunningJobsCountInUsageAndFractionalGpuHoursBind) {
  start();
  cli::testing::Output set = gpoolAs("", {"quota", "set", "--group", "gA", "--gpu-hours", "0.001"});
  ASSERT_EQ(set.rc, 0) << set.err;
  EXPECT_NE(set.out.find("gpu_hours=0.001/"), std::string::npos) << set.out;
  ASSERT_EQ(submit("first", "mia", gpus(1000)), 201);
  ASSERT_TRUE(waitFor("first", "RUNNING"));
  auto used = [&](const std::string& by, const std::string& key) {
    auto r = http_->get("/v1/usage?by=" + by);
    if (!r.ok() || r->status != 200) return 0.0;
    const json answer = json::parse(r->body);
    for (const json& row : answer["rows"]) {
      if (row.value("key", "") == key) return row.value("gpu_hours", 0.0);
    }
    return 0.0;
  };
  EXPECT_TRUE(eventually([&] { return used("group", "gA") > 0.001; }))
      << "the running job's GPU-hours do not show: " << http_->get("/v1/usage?by=group")->body;
  EXPECT_GT(used("user", unixName("mia")), 0.0);
  EXPECT_EQ(job(ids_["first"]).value("state", ""), "RUNNING");
  ASSERT_EQ(submit("second", "mia", gpus(1000)), 201);
  EXPECT_TRUE(eventually([&] {
    return job(ids_["second"]).value("reason", "") == "AssocGrpGpuHours";
  })) << job(ids_["second"]).dump();
  EXPECT_EQ(job(ids_["first"]).value("state", ""), "RUNNING");  // running work goes on
  ASSERT_EQ(submit("bobs", "bob", gpus(1000)), 201);            // not gA's: not bound
  EXPECT_TRUE(waitFor("bobs", "RUNNING"));
}

// Item 5: --max-gpu-mem bounds what a task takes of shared GPUs; a whole GPU is not refused.
TEST_F(PolicyTest, MaxGpuMemoryBoundsSlicesNotWholeGpus) {
  start();
  cli::testing::Output set =
      gpoolAs("", {"quota", "set", "--user", unixName("mia"), "--max-gpu-mem", "40G"});
  ASSERT_EQ(set.rc, 0) << set.err;
  EXPECT_EQ(submit("whole", "mia", gpus(1000)), 201);
  api::JobSpec slice = gpus(500);
  slice.resources.gpu_memory_mib = 50 * 1024;
  json body;
  EXPECT_EQ(submit("big-slice", "mia", slice, &body), 400);
  EXPECT_NE(body.dump().find("job.resources.gpu_memory"), std::string::npos) << body.dump();
  slice.resources.gpu_memory_mib = 30 * 1024;
  EXPECT_EQ(submit("small-slice", "mia", slice), 201);
}

// Item 6: a job held back by a reservation shows when it is expected to start (the API,
// gpool show, gpool queue --start), and why it waits.
TEST_F(PolicyTest, ReservedJobShowsItsExpectedStart) {
  start();
  api::JobSpec all = gpus(8000);
  all.time_limit_seconds = 600;
  ASSERT_EQ(submit("first", "mia", all), 201);
  ASSERT_TRUE(waitFor("first", "RUNNING"));
  ASSERT_EQ(submit("next", "bob", all), 201);
  ASSERT_TRUE(eventually([&] { return job(ids_["next"]).contains("expected_start_us"); }))
      << job(ids_["next"]).dump();
  json next = job(ids_["next"]);
  json first = job(ids_["first"]);
  const int64_t expected = next["expected_start_us"].get<int64_t>();
  const int64_t ends = first["start_time_us"].get<int64_t>() + int64_t{600} * 1'000'000;
  EXPECT_NEAR(static_cast<double>(expected - ends) / 1e6, 0.0, 5.0);
  EXPECT_NE(next.value("reason_detail", "").find("reserved to start in"), std::string::npos)
      << next.dump();
  cli::testing::Output show = gpoolAs("bob", {"show", std::to_string(ids_["next"])});
  EXPECT_EQ(show.rc, 0) << show.err;
  EXPECT_NE(show.out.find("ExpectedStart:"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("Waiting:"), std::string::npos) << show.out;
  cli::testing::Output queue = gpoolAs("bob", {"queue", "--start"});
  EXPECT_EQ(queue.rc, 0) << queue.err;
  EXPECT_NE(queue.out.find("START_TIME"), std::string::npos) << queue.out;
  EXPECT_EQ(queue.out.find("N/A"), std::string::npos) << queue.out;
}

// Item 6: a job that would fit but for an unhealthy GPU says so (GpusUnhealthy, naming the GPU
// and why), and gpool nodes does not count the unhealthy GPU as free.
TEST_F(PolicyTest, UnhealthyGpusAreThePendingReasonAndNotFree) {
  const std::string fixture = dir_ + "/ecc.json";
  std::ofstream(fixture) << R"({"description": "2 GPUs; GPU 1 gets uncorrected ECC errors",
    "driver_version": "535.129.03", "cuda_driver_version": "12.2", "step_seconds": 1,
    "gpus": [{"count": 2, "model": "NVIDIA A100-SXM4-80GB", "memory_mib": 81920,
              "compute_capability": "8.0"}],
    "topology": {"default": "SYS"},
    "telemetry": {"utilization_pct": 5, "memory_used_mib": 0, "temperature_c": 35,
                  "power_w": 55, "sm_clock_mhz": 1410, "memory_clock_mhz": 1215},
    "script": [{"step": 1, "gpu": 1, "ecc": {"corrected": 0, "uncorrected": 2}}]})";
  start(fixture);
  ASSERT_TRUE(eventually([&] {
    auto r = http_->get("/v1/nodes");
    return r.ok() && r->body.find("\"unhealthy\"") != std::string::npos;
  })) << "GPU 1 never became unhealthy";
  ASSERT_EQ(submit("first", "mia", gpus(1000)), 201);
  ASSERT_TRUE(waitFor("first", "RUNNING"));
  ASSERT_EQ(submit("second", "bob", gpus(1000)), 201);
  ASSERT_TRUE(eventually([&] {
    return job(ids_["second"]).value("reason", "") == "GpusUnhealthy";
  })) << job(ids_["second"]).dump();
  const std::string detail = job(ids_["second"]).value("reason_detail", "");
  EXPECT_NE(detail.find("n1 GPU 1"), std::string::npos) << detail;
  EXPECT_NE(detail.find("uncorrected ECC"), std::string::npos) << detail;
  cli::testing::Output nodes = gpoolAs("", {"nodes"});
  EXPECT_EQ(nodes.rc, 0) << nodes.err;
  EXPECT_NE(nodes.out.find("(1 unhealthy)"), std::string::npos) << nodes.out;
  EXPECT_NE(nodes.out.find(" 0/1 "), std::string::npos) << nodes.out;  // nothing free
}

// Item 6: a preempted attempt's output is not overwritten by the next attempt, even on the same
// server: gpool logs --attempt 1 shows the first run's, --attempt 2 (and the default) the
// second's, and an attempt the job has not had is refused naming it and how many there were.
TEST_F(PolicyTest, EachAttemptOfARequeuedJobKeepsItsOwnLog) {
  start("8x-a100-sxm4-80gb-nvlink", {{"preempt_min_run_time", "1s"}, {"preempt_delay", "0s"}});
  put("/v1/qos/low", json{{"name", "low"}, {"priority", 10}, {"preemptible", true}});
  put("/v1/qos/high", json{{"name", "high"}, {"priority", 100}});
  // Each run says which it is (a file in the working directory counts them), then runs until
  // it is stopped.
  api::JobSpec victim = gpus(8000);
  victim.qos = "low";
  victim.preemptible = true;
  victim.command = {"/bin/sh", "-c",
                    "n=$(cat runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > runs; "
                    "echo \"run $n\"; trap 'exit 0' TERM; sleep 300 & wait"};
  ASSERT_EQ(submit("v", "mia", victim), 201);
  ASSERT_TRUE(waitFor("v", "RUNNING"));
  const std::string id = std::to_string(ids_["v"]);
  auto logs = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"logs", id};
    args.insert(args.end(), extra.begin(), extra.end());
    return gpoolAs("mia", args);
  };
  ASSERT_TRUE(eventually([&] { return logs({}).out == "run 1\n"; })) << logs({}).err;
  // bob's high-QoS job preempts it, ends at once, and v runs again on the same GPUs.
  api::JobSpec high = gpus(8000);
  high.qos = "high";
  high.command = {"/bin/true"};
  ASSERT_EQ(submit("p", "bob", high), 201);
  ASSERT_TRUE(eventually([&] {
    json j = job(ids_["v"]);
    return j.value("state", "") == "RUNNING" && j.value("requeue_count", 0) == 1;
  })) << job(ids_["v"]).dump();
  ASSERT_TRUE(eventually([&] { return logs({}).out == "run 2\n"; })) << logs({}).err;
  cli::testing::Output first = logs({"--attempt", "1"});
  EXPECT_EQ(first.rc, 0) << first.err;
  EXPECT_EQ(first.out, "run 1\n") << first.err;
  cli::testing::Output second = logs({"--attempt", "2"});
  EXPECT_EQ(second.rc, 0) << second.err;
  EXPECT_EQ(second.out, "run 2\n") << second.err;
  cli::testing::Output as_json = logs({"--attempt", "1", "--json"});
  json j = json::parse(as_json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << as_json.out << as_json.err;
  EXPECT_EQ(j.value("attempt", 0), 1) << as_json.out;
  EXPECT_EQ(j.value("state", ""), "PREEMPTED") << as_json.out;
  EXPECT_TRUE(j.value("complete", false)) << as_json.out;
  cli::testing::Output none = logs({"--attempt", "3"});
  EXPECT_EQ(none.rc, 2) << none.err;
  EXPECT_NE(none.err.find("has had 2 attempt(s), numbered from 1; there is no attempt 3"),
            std::string::npos)
      << none.err;
}

// Item 7: --gpu-model as users name models; gpool nodes --models lists the names.
TEST_F(PolicyTest, GpuModelsMatchAsUsersNameThem) {
  start();
  for (const std::string name : {"A100", "a100-80gb", "NVIDIA A100-SXM4-80GB"}) {
    api::JobSpec spec = gpus(1000);
    spec.constraints.gpu_models = {name};
    spec.command = {"/bin/true"};
    ASSERT_EQ(submit("m-" + name, "mia", spec), 201) << name;
    EXPECT_TRUE(waitFor("m-" + name, "COMPLETED")) << name;
  }
  api::JobSpec spec = gpus(1000);
  spec.constraints.gpu_models = {"H100"};
  json body;
  EXPECT_EQ(submit("h100", "mia", spec, &body), 400);
  EXPECT_NE(body.dump().find("the pool has A100 (or A100-80GB, A100-SXM4-80GB)"), std::string::npos)
      << body.dump();
  cli::testing::Output models = gpoolAs("mia", {"nodes", "--models"});
  EXPECT_EQ(models.rc, 0) << models.err;
  EXPECT_NE(models.out.find("A100, A100-80GB, A100-SXM4-80GB"), std::string::npos) << models.out;
}

}  // namespace
}  // namespace gpool::policy_e2e
