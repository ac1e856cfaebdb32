// The dashboard in a real browser: `gpool up --demo` (real gpoold and agents, simulated GPUs)
// prints its dashboard link; a headless Chromium, driven through chromedriver's WebDriver
// protocol, opens it and a user's clicks are checked against the controller's API. No sleeps for
// synchronisation: every wait polls a condition with a deadline.
//
// Skips (with the reason) when chromium or chromedriver is not installed (scripts/install-deps.sh
// installs both) or when not run as root (the demo creates its users with useradd).
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

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
  cli::testing::Output up = cli::testing::runProgram(
      cli::testing::kGpool,
      {"up", "--dir", dir_ + "/pool", "--simulate", "--servers", "2", "--demo", "--timeout", "60"},
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

  // Every GPU of the pool, labelled simulated; the token moved from the address bar into the
  // tab's storage; the live socket (token as access_token) is up.
  auto count = [&](const std::string& css) {
    nlohmann::json n = browser.execute("return document.querySelectorAll(arguments[0]).length;",
                                       json::array({css}));
    return n.is_number() ? n.get<int>() : -1;
  };
  EXPECT_TRUE(waitFor([&] { return count("article.gpu") == 16; }))
      << count("article.gpu") << " GPUs shown; " << browser.lastError();
  json text = browser.execute("return document.getElementById('gpus').innerText;");
  ASSERT_TRUE(text.is_string()) << browser.lastError();
  EXPECT_NE(text.get<std::string>().find("simulated"), std::string::npos);
  EXPECT_EQ(browser.execute("return window.location.hash;"), "");
  EXPECT_EQ(browser.execute("return sessionStorage.getItem('gpool.token');"), token);
  EXPECT_TRUE(waitFor([&] {
    return browser.execute("return document.getElementById('live').textContent;") == "live";
  })) << browser.execute("return document.getElementById('live').textContent;");

  // A job submitted (as a demo user, with the CLI) shows in the queue, then as its GPU's tenant.
  struct passwd* alice = ::getpwnam("gpool-demo-alice");
  ASSERT_NE(alice, nullptr);
  cli::testing::RunAs as;
  as.uid = static_cast<int>(alice->pw_uid);
  as.gid = static_cast<int>(alice->pw_gid);
  as.cwd = alice->pw_dir;
  fs::create_directories(dir_ + "/submit");
  ::chmod((dir_ + "/submit").c_str(), 0777);
  pid_t submit = cli::testing::startProgram(cli::testing::kGpool,
                                            {"submit", "--json", "--gpus", "1", "--name", "web-e2e",
                                             "--time", "1h", "--", "sleep", "600"},
                                            dir_ + "/submit",
                                            {{"GPOOL_SOCKET", dir_ + "/pool/gpoold.sock"}}, as);
  int status = 0;
  ::waitpid(submit, &status, 0);
  std::string submitted = cli::testing::readFile(dir_ + "/submit/stdout");
  ASSERT_EQ(cli::testing::exitCodeOf(status), 0)
      << submitted << cli::testing::readFile(dir_ + "/submit/stderr");
  const int64_t id = json::parse(submitted)["ids"][0].get<int64_t>();
  const std::string row = "#queue tr[data-job=\"" + std::to_string(id) + "\"]";
  EXPECT_TRUE(waitFor([&] { return count(row) == 1; })) << "job " << id << " not in the queue";
  EXPECT_TRUE(waitFor([&] {
    return count(row + "[data-state=\"RUNNING\"]") == 1 &&
           count("li.tenant[data-job=\"" + std::to_string(id) + "\"]") == 1;
  })) << "job "
      << id << " is " << jobState(id) << " and not shown as a tenant";

  // An admin drains a server with a reason: the controller has it DRAINING.
  const std::string node = "sim-node-2";
  EXPECT_TRUE(waitFor([&] {
    std::string input = browser.find("input[data-reason-for=\"" + node + "\"]");
    return !input.empty() && browser.type(input, "fan failure (web test)");
  })) << browser.lastError();
  EXPECT_TRUE(waitFor([&] {
    std::string button = browser.find("button.drain[data-node=\"" + node + "\"]");
    return !button.empty() && browser.click(button);
  })) << browser.lastError();
  json drained;
  EXPECT_TRUE(waitFor([&] {
    auto r = api().get("/v1/nodes/" + node);
    if (!r.ok() || r->status != 200) return false;
    drained = json::parse(r->body);
    return drained.value("state", "") == "DRAINING" || drained.value("state", "") == "DRAINED";
  })) << drained.dump();
  EXPECT_EQ(drained.value("state_reason", ""), "fan failure (web test)");
  EXPECT_TRUE(waitFor([&] { return count("button.resume[data-node=\"" + node + "\"]") == 1; }));

  // Cancel on the job's row cancels it.
  EXPECT_TRUE(waitFor([&] {
    std::string button = browser.find("button.cancel[data-job=\"" + std::to_string(id) + "\"]");
    return !button.empty() && browser.click(button);
  })) << browser.lastError();
  EXPECT_TRUE(waitFor([&] { return jobState(id) == "CANCELLED"; })) << jobState(id);
  EXPECT_TRUE(waitFor([&] { return count(row) == 0; })) << "the cancelled job is still listed";

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
}

}  // namespace
}  // namespace gpool::web
