// The dashboard in a real browser: `gpool up --demo` (real gpoold and agents, simulated GPUs)
// prints its dashboard link; a headless Chromium, driven through chromedriver's WebDriver
// protocol, opens it and a user's clicks are checked against the controller's API: every GPU
// as a tile, a submitted job on its tile, in the queue and on its own page (timeline,
// allocation, GPU use, log tail), an alert acknowledged, the pool's history per user, a drain
// reaching the tiles live, a cancel, a bad token refused, and the live indicator going from live
// to offline when gpoold stops. Screenshots of each view are kept under
// build/<preset>/screenshots/ (CI artefacts). No sleeps for synchronisation: every wait polls a
// condition with a deadline.
//
// Skips (with the reason) when chromium or chromedriver is not installed (scripts/install-deps.sh
// installs both) or when not run as root (the demo creates its users with useradd).
#include <pwd.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli_test_util.h"
#include "net/client.h"
#include "net/plain_http.h"
#include "web/webdriver.h"

namespace gpool::web {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::waitFor;
using testing::WebDriver;

std::string program(const char* env, const std::string& fallback) {
  const char* set = std::getenv(env);
  return set != nullptr && *set != '\0' ? set : fallback;
}

const std::string kChromium = program("GPOOL_CHROMIUM", "/usr/bin/chromium");
const std::string kChromedriver = program("GPOOL_CHROMEDRIVER", "/usr/bin/chromedriver");

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(kChromium.c_str(), X_OK) != 0 || ::access(kChromedriver.c_str(), X_OK) != 0) {
      GTEST_SKIP() << "needs " << kChromium << " and " << kChromedriver
                   << " (Debian: chromium chromium-driver; scripts/install-deps.sh)";
    }
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: gpool up --demo creates its users";
    std::string tmpl = (fs::temp_directory_path() / "gpool-web-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0711);  // the demo users reach the socket inside
    fs::create_directories(dir_ + "/out");
    fs::create_directories(dir_ + "/browser");
  }

  void TearDown() override {
    if (dir_.empty()) return;
    if (fs::exists(dir_ + "/pool/pool.json")) {
      cli::testing::runProgram(cli::testing::kGpool,
                               {"down", "--dir", dir_ + "/pool", "--timeout", "10"}, dir_ + "/out");
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // The job's state over the Unix socket (as root).
  std::string jobState(int64_t id) {
    auto r = api().get("/v1/jobs/" + std::to_string(id));
    return r.ok() && r->status == 200 ? json::parse(r->body).value("state", "") : "";
  }

  net::HttpClient& api() {
    if (!client_) {
      client_ = std::make_unique<net::HttpClient>(
          net::ClientEndpoint::unixSocket(dir_ + "/pool/gpoold.sock"), std::chrono::seconds(10));
    }
    return *client_;
  }

  std::string dir_;
  std::unique_ptr<net::HttpClient> client_;
};

TEST_F(DashboardTest, ShowsThePoolAndItsQueueAndDrivesDrainAndCancel) {
  // Alerts that fire at once on simulated GPUs (any GPU at 30 C or more), for the alerts view.
  cli::testing::Output up = cli::testing::runProgram(
      cli::testing::kGpool,
      {"up", "--dir", dir_ + "/pool", "--simulate", "--servers", "2", "--demo", "--timeout", "60",
       "--set", "alerts.gpu_too_hot.threshold=30", "--set", "alerts.gpu_too_hot.clear_threshold=20",
       "--set", "alerts.gpu_too_hot.for=0s", "--set", "alerts.evaluate_every=1s"},
      dir_ + "/out");
  ASSERT_EQ(up.rc, 0) << up.out << up.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      up.out, m, std::regex(R"(\ndashboard (http://127\.0\.0\.1:([0-9]+)/)#token=(\S+)\n)")))
      << up.out;
  const std::string base = m[1];
  const int port = std::stoi(m[2]);
  const std::string token = m[3];

  // The page itself needs no token; the API does.
  net::testing::PlainResponse page = net::testing::plainHttp(port, "GET", "/");
  EXPECT_EQ(page.status, 200) << page.error;
  EXPECT_EQ(page.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_EQ(net::testing::plainHttp(port, "GET", "/v1/jobs").status, 401);

  WebDriver browser(kChromedriver, kChromium, dir_ + "/browser");
  ASSERT_TRUE(browser.ok()) << browser.lastError();
  browser.navigate(base + "#token=" + token);
  ASSERT_EQ(browser.lastError(), "");

  auto count = [&](const std::string& css) {
    json n = browser.execute("return document.querySelectorAll(arguments[0]).length;",
                             json::array({css}));
    return n.is_number() ? n.get<int>() : -1;
  };
  auto text = [&](const std::string& css) {
    json t = browser.execute(
        "const e = document.querySelector(arguments[0]);"
        "return e ? e.innerText : '';",
        json::array({css}));
    return t.is_string() ? t.get<std::string>() : std::string();
  };
  auto go = [&](const std::string& hash) {
    browser.execute("window.location.hash = arguments[0];", json::array({hash}));
  };
  auto clickOn = [&](const std::string& css) {
    return waitFor([&] {
      std::string e = browser.find(css);
      return !e.empty() && browser.click(e);
    });
  };
  // Screenshots are CI artefacts (build/<preset>/screenshots/), looked at by people.
  const std::string shots = std::string(GPOOL_BINARY_DIR) + "/screenshots";
  fs::create_directories(shots);
  // The whole page: the window grows to the page's height for the capture.
  auto shot = [&](const std::string& name) {
    json height = browser.execute("return document.documentElement.scrollHeight;");
    browser.resize(1400, std::min(4000, height.is_number() ? height.get<int>() + 140 : 1000));
    EXPECT_TRUE(browser.screenshot(shots + "/dashboard-" + name + ".png")) << browser.lastError();
    browser.resize(1400, 1000);
  };

  // The pool view: every GPU as a tile, labelled simulated; the token moved from the address
  // bar into the tab's storage; the live indicator says live once gpoold confirmed the socket.
  EXPECT_TRUE(waitFor([&] { return count("#gpu-grid .tile") == 16; }))
      << count(".tile") << " GPUs shown; " << browser.lastError();
  EXPECT_NE(text("#view-pool").find("simulated"), std::string::npos);
  EXPECT_EQ(browser.execute("return window.location.hash;"), "");
  EXPECT_EQ(browser.execute("return sessionStorage.getItem('gpool.token');"), token);
  EXPECT_TRUE(waitFor([&] {
    return browser.execute("return document.getElementById('live').dataset.state;") == "live" &&
           text("#live") == "live";
  })) << text("#live");
  // Utilisation reaches the tiles (the simulated GPUs of the demo's jobs are busy).
  EXPECT_TRUE(waitFor([&] { return count(".tile[data-util]:not([data-util=''])") == 16; }));
  shot("pool");

  // A job submitted (as a demo user, with the CLI) shows in the queue, then on its GPU's tile.
  struct passwd* alice = ::getpwnam("gpool-demo-alice");
  ASSERT_NE(alice, nullptr);
  cli::testing::RunAs as;
  as.uid = static_cast<int>(alice->pw_uid);
  as.gid = static_cast<int>(alice->pw_gid);
  as.cwd = alice->pw_dir;
  fs::create_directories(dir_ + "/submit");
  ::chmod((dir_ + "/submit").c_str(), 0777);
  pid_t submit = cli::testing::startProgram(
      cli::testing::kGpool,
      {"submit", "--json", "--gpus", "1", "--name", "web-e2e", "--time", "1h", "--", "sh", "-c",
       "echo hello-from-the-web-test; sleep 600"},
      dir_ + "/submit", {{"GPOOL_SOCKET", dir_ + "/pool/gpoold.sock"}}, as);
  int status = 0;
  ::waitpid(submit, &status, 0);
  std::string submitted = cli::testing::readFile(dir_ + "/submit/stdout");
  ASSERT_EQ(cli::testing::exitCodeOf(status), 0)
      << submitted << cli::testing::readFile(dir_ + "/submit/stderr");
  const int64_t id = json::parse(submitted)["ids"][0].get<int64_t>();
  const std::string ids = std::to_string(id);
  const std::string tile = ".tile[data-jobs~=\"" + ids + "\"]";
  EXPECT_TRUE(waitFor([&] { return count(tile) == 1; }))
      << "job " << id << " is " << jobState(id) << " and on no tile";
  // Its tile's panel lists it as a tenant, with a link to its page.
  EXPECT_TRUE(clickOn(tile)) << browser.lastError();
  EXPECT_TRUE(
      waitFor([&] { return count("#gpu-detail li.tenant[data-job=\"" + ids + "\"]") == 1; }));

  go("#/jobs");
  const std::string row = "#queue tr[data-job=\"" + ids + "\"]";
  EXPECT_TRUE(waitFor([&] { return count(row + "[data-state=\"RUNNING\"]") == 1; }))
      << "job " << id << " not running in the queue";
  shot("queue");

  // The job's page: state, timeline, allocation, GPU use and the tail of its log.
  EXPECT_TRUE(clickOn(row + " a.job-link")) << browser.lastError();
  EXPECT_TRUE(waitFor([&] { return count("#job-head dl[data-state=\"RUNNING\"]") == 1; }))
      << text("#job-head");
  EXPECT_GE(count("#job-timeline .seg[data-state=\"RUNNING\"]"), 1);
  EXPECT_EQ(count("#job-alloc tbody tr"), 1);
  EXPECT_TRUE(waitFor([&] {
    return text("#job-log").find("hello-from-the-web-test") != std::string::npos;
  })) << text("#job-log-note");
  EXPECT_TRUE(waitFor([&] {
    std::string note = text("#job-chart-note");
    return !note.empty() && note[0] != '0' && note.find(" point") != std::string::npos;
  })) << text("#job-chart-note");
  shot("job");

  // Alerts: the hot (simulated) GPUs fire; an admin acknowledges one with a click.
  go("#/alerts");
  EXPECT_TRUE(waitFor([&] { return count("#alerts-firing-table tr[data-alert]") >= 1; }))
      << text("#view-alerts");
  std::string first_alert;
  EXPECT_TRUE(waitFor([&] {
    json v = browser.execute(
        "const b = document.querySelector('#alerts-firing-table button.ack');"
        "return b ? b.dataset.alert : '';");
    first_alert = v.is_string() ? v.get<std::string>() : "";
    return !first_alert.empty();
  }));
  EXPECT_TRUE(clickOn("button.ack[data-alert=\"" + first_alert + "\"]")) << browser.lastError();
  json acked;
  EXPECT_TRUE(waitFor([&] {
    auto r = api().get("/v1/alerts/" + first_alert);
    if (!r.ok() || r->status != 200) return false;
    acked = json::parse(r->body);
    return acked["acked_by"].is_string();
  })) << acked.dump();
  EXPECT_EQ(acked.value("acked_by", json()), json("root"));
  EXPECT_TRUE(waitFor([&] {
    return text("tr[data-alert=\"" + first_alert + "\"]").find("acknowledged by root") !=
           std::string::npos;
  }));
  EXPECT_GE(count("#alerts-badge"), 1);
  shot("alerts");

  // The pool's story: allocated against used, per user (sampled every 10 s).
  go("#/history");
  EXPECT_TRUE(
      waitFor([&] { return count("#pool-keys-table tr[data-key=\"gpool-demo-alice\"]") == 1; },
              std::chrono::seconds(40)))
      << text("#view-history");
  EXPECT_NE(text("#pool-note").find("GPUs allocated"), std::string::npos) << text("#pool-note");
  shot("history");

  // An admin drains a server with a reason: the controller has it DRAINING, and the pool view
  // shows its idle GPUs drained (a live node event, then that node's GPUs re-read).
  go("#/servers");
  const std::string node = "sim-node-2";
  EXPECT_TRUE(waitFor([&] {
    std::string input = browser.find("input[data-reason-for=\"" + node + "\"]");
    return !input.empty() && browser.type(input, "fan failure (web test)");
  })) << browser.lastError();
  EXPECT_TRUE(clickOn("button.drain[data-node=\"" + node + "\"]")) << browser.lastError();
  json drained;
  EXPECT_TRUE(waitFor([&] {
    auto r = api().get("/v1/nodes/" + node);
    if (!r.ok() || r->status != 200) return false;
    drained = json::parse(r->body);
    return drained.value("state", "") == "DRAINING" || drained.value("state", "") == "DRAINED";
  })) << drained.dump();
  EXPECT_EQ(drained.value("state_reason", ""), "fan failure (web test)");
  EXPECT_TRUE(waitFor([&] { return count("button.resume[data-node=\"" + node + "\"]") == 1; }));
  shot("servers");
  go("#/pool");
  EXPECT_TRUE(waitFor([&] {
    return count(".tile[data-node=\"" + node + "\"][data-state=\"drained\"]") >= 1;
  })) << text("#gpu-grid");

  // Cancel on the job's page cancels it; the queue drops it.
  go("#/job/" + ids);
  EXPECT_TRUE(clickOn("#job-head button.cancel[data-job=\"" + ids + "\"]")) << browser.lastError();
  EXPECT_TRUE(waitFor([&] { return jobState(id) == "CANCELLED"; })) << jobState(id);
  EXPECT_TRUE(waitFor([&] { return count("#job-head dl[data-state=\"CANCELLED\"]") == 1; }));
  go("#/jobs");
  EXPECT_TRUE(waitFor([&] { return count(row) == 0; })) << "the cancelled job is still listed";

  // A list longer than one read says it is cut (before v2 the queue stopped at 1,000 jobs
  // without a word): an array of 1,001 jobs, one running at a time, comes as a burst of job
  // events, which the page answers with one read of the list's first page (not 1,001 reads of
  // one job); "Load 1,000 more" reads the rest and the notice goes.
  fs::create_directories(dir_ + "/array");
  ::chmod((dir_ + "/array").c_str(), 0777);
  pid_t array = cli::testing::startProgram(
      cli::testing::kGpool,
      {"submit", "--gpus", "1", "--name", "web-array", "--time", "1h", "--array", "0-1000%1", "--",
       "sleep", "600"},
      dir_ + "/array", {{"GPOOL_SOCKET", dir_ + "/pool/gpoold.sock"}}, as);
  ::waitpid(array, &status, 0);
  ASSERT_EQ(cli::testing::exitCodeOf(status), 0) << cli::testing::readFile(dir_ + "/array/stdout")
                                                 << cli::testing::readFile(dir_ + "/array/stderr");
  auto cutShown = [&] {
    return browser.execute("return !document.getElementById('queue-cut').hidden;") == true;
  };
  EXPECT_TRUE(waitFor(cutShown, std::chrono::seconds(60))) << text("#queue-count");
  EXPECT_NE(text("#queue-cut").find("The list is cut"), std::string::npos) << text("#queue-cut");
  EXPECT_EQ(count("#queue tr[data-job]"), 1000) << text("#queue-count");
  shot("queue-cut");
  EXPECT_TRUE(clickOn("#queue-more")) << browser.lastError();
  EXPECT_TRUE(waitFor([&] { return !cutShown() && count("#queue tr[data-job]") > 1000; }))
      << text("#queue-count");

  // A bad token is refused with a message, and the sign-in form comes back.
  browser.navigate(base + "#token=gpt.0123456789abcdef.not-a-valid-secret");
  std::string error;
  EXPECT_TRUE(waitFor([&] {
    json e = browser.execute(
        "const b = document.getElementById('error');"
        "return b.hidden || document.getElementById('login').hidden ? '' : b.textContent;");
    error = e.is_string() ? e.get<std::string>() : "";
    return error.find("refused") != std::string::npos;
  })) << "error shown: '"
      << error << "' " << browser.lastError();
  EXPECT_EQ(text("#live"), "not connected");

  // The live indicator tells the truth: signed in again it is live; gpoold gone, the socket
  // closes and the page says so (the trial's capture said "not connected" while it was up).
  browser.navigate(base + "#token=" + token);
  EXPECT_TRUE(waitFor([&] { return text("#live") == "live"; })) << text("#live");
  json pool = json::parse(cli::testing::readFile(dir_ + "/pool/pool.json"), nullptr, false);
  ASSERT_TRUE(pool.is_object() && pool["gpoold_pid"].is_number_integer())
      << cli::testing::readFile(dir_ + "/pool/pool.json");
  ASSERT_EQ(::kill(static_cast<pid_t>(pool["gpoold_pid"].get<int>()), SIGTERM), 0);
  EXPECT_TRUE(waitFor([&] {
    json state = browser.execute("return document.getElementById('live').dataset.state;");
    return state == "down" || state == "connecting";
  })) << text("#live");
  EXPECT_EQ(text("#live").find("live"), std::string::npos) << text("#live");
  shot("offline");
}

}  // namespace
}  // namespace gpool::web
