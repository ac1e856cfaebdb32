// The whole path for real: the gpoold binary (SQLite store, API and /v1/agent on its Unix
// socket) and the gpool-agent binary (simulated GPUs from a fixture, no cgroups, state in a temp
// directory). Jobs are submitted over REST by a real non-root test user (the agent refuses root
// tasks), run by the agent as that user, and followed through GET /v1/jobs/{id}. Needs root (to
// create the test user and switch to it); skips otherwise. Waits poll the REST API every 20 ms
// with an overall deadline; no sleeps as synchronisation.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "controller/raw_http.h"
#include "net/client.h"

namespace gpool::controller {
namespace {

using nlohmann::json;

const char* kUser = "gpool-test-alice";  // the agent tests' user
constexpr auto kDeadline = std::chrono::seconds(30);

// Creates the test user once (useradd; one at a time across test binaries) or says why not.
std::string ensureUser(const std::string& name) {
  if (::geteuid() != 0) return "this test needs root (a real user runs the tasks)";
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

// A world-writable temporary directory (the tasks write into it as the test user).
class OpenTempDir {
 public:
  OpenTempDir() {
    char tmpl[] = "/tmp/gpool-e2e-XXXXXX";
    if (::mkdtemp(tmpl) != nullptr) path_ = tmpl;
    ::chmod(path_.c_str(), 0777);
  }
  ~OpenTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};

// Runs `argv` (as `uid`:`gid` when `uid` is not 0, in `cwd` when set); with `capture`, its
// stdout comes back through a pipe; with `out_prefix`, stdout and stderr go to
// `<out_prefix>.out` and `<out_prefix>.err`.
Child spawn(const std::vector<std::string>& args, bool capture, uid_t uid = 0, gid_t gid = 0,
            const std::string& cwd = "", const std::string& out_prefix = "") {
  int fds[2] = {-1, -1};
  if (capture && ::pipe(fds) != 0) return {};
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    if (capture) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
    }
    if (!out_prefix.empty()) {
      int out = ::open((out_prefix + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open((out_prefix + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out < 0 || err < 0) ::_exit(126);
      ::dup2(out, STDOUT_FILENO);
      ::dup2(err, STDERR_FILENO);
    }
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    if (uid != 0 && (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0)) {
      ::_exit(126);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  if (!capture) return Child{pid, nullptr};
  ::close(fds[1]);
  return Child{pid, ::fdopen(fds[0], "r")};
}

int stop(Child& child) {
  if (child.pid <= 0) return -1;
  ::kill(child.pid, SIGTERM);
  int status = 0;
  ::waitpid(child.pid, &status, 0);
  if (child.out) ::fclose(child.out);
  child.pid = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string readLine(FILE* f) {
  char buf[512];
  if (f == nullptr || !::fgets(buf, sizeof buf, f)) return "";
  std::string line(buf);
  if (!line.empty() && line.back() == '\n') line.pop_back();
  return line;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Polls `done` every 20 ms until it holds or the deadline passes.
bool eventually(const std::function<bool()>& done) {
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

class AgentEndToEndTest : public ::testing::Test {
 protected:
  // Whom gpoold runs as: root, or (the Debian package's way) an unprivileged user of its own.
  virtual bool gpooldAsServiceUser() const { return false; }

  void SetUp() override {
    std::string why = ensureUser(kUser);
    if (!why.empty()) GTEST_SKIP() << why;
    const passwd* pw = ::getpwnam(kUser);
    ASSERT_NE(pw, nullptr);
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    std::string config = dir_.file("gpoold.toml");
    std::ofstream(config) << "[controller]\nstore = \"" << dir_.file("gpool.db") << "\"\n"
                          << "sqlite_synchronous = \"NORMAL\"\nsocket = \"" << socket_ << "\"\n"
                          << "schedule_interval = \"1s\"\n[log]\nlevel = \"warn\"\n";
    uid_t gpoold_uid = 0;
    gid_t gpoold_gid = 0;
    if (gpooldAsServiceUser()) {
      const passwd* nobody = ::getpwnam("nobody");
      ASSERT_NE(nobody, nullptr);
      gpoold_uid = nobody->pw_uid;
      gpoold_gid = nobody->pw_gid;
    }
    gpoold_ = spawn({std::string(GPOOL_BINARY_DIR) + "/src/controller/gpoold", "--config", config},
                    true, gpoold_uid, gpoold_gid);
    ASSERT_EQ(readLine(gpoold_.out), "ready");
    agent_ =
        spawn({std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-agent", "--node", "n1",
               "--unix-socket", socket_, "--state-dir", dir_.file("state"), "--fake-fixture",
               std::string(GPOOL_SOURCE_DIR) + "/src/gpu/fixtures/8x-a100-sxm4-80gb-nvlink.json",
               "--supervisor", std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-supervisor",
               "--vgpu-dir", dir_.file("vgpu"), "--no-cgroups"},
              false);
    ASSERT_GT(agent_.pid, 0);
    http_ = std::make_unique<net::HttpClient>(net::ClientEndpoint::unixSocket(socket_),
                                              std::chrono::seconds(10));
    // The agent's hello registers the node.
    ASSERT_TRUE(eventually([&] {
      auto r = http_->get("/v1/nodes");
      return r.ok() && r->status == 200 && json::parse(r->body)["nodes"].size() == 1;
    }));
  }
  void TearDown() override {
    http_.reset();
    if (agent_.pid > 0) {
      EXPECT_EQ(stop(agent_), 0);
    }
    if (gpoold_.pid > 0) {
      EXPECT_EQ(stop(gpoold_), 0);
    }
  }

  // Submits `command` (through /bin/sh -c) as the test user, over the socket with its uid.
  int64_t submitAsUser(const std::string& command) {
    api::JobSpec spec;
    spec.name = "e2e";
    spec.command = {"/bin/sh", "-c", command};
    spec.working_dir = dir_.path();
    spec.resources.gpus_milli = 1000;
    std::string body = api::toJson(spec).dump();
    std::string request =
        "POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
        "application/json\r\nConnection: close\r\nContent-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    std::string response = testing::rawRequestAs(uid_, gid_, socket_, request);
    EXPECT_EQ(response.rfind("HTTP/1.1 201", 0), 0u) << response;
    size_t start = response.find("\r\n\r\n");
    if (start == std::string::npos) return -1;
    json j = json::parse(response.substr(start + 4), nullptr, false);
    if (!j.is_object() || !j.contains("ids")) return -1;
    return j["ids"][0].get<int64_t>();
  }

  json job(int64_t id) {
    auto r = http_->get("/v1/jobs/" + std::to_string(id));
    if (!r.ok() || r->status != 200) return json::object();
    return json::parse(r->body, nullptr, false);
  }
  bool waitState(int64_t id, const std::string& state) {
    return eventually([&] { return job(id).value("state", "") == state; });
  }

  OpenTempDir dir_;
  std::string socket_ = dir_.file("gpoold.sock");
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  Child gpoold_;
  Child agent_;
  std::unique_ptr<net::HttpClient> http_;
};

TEST_F(AgentEndToEndTest, AJobRunsOnTheAgentAndCompletes) {
  std::string out = dir_.file("out");
  int64_t id = submitAsUser("echo done > " + out);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(waitState(id, "COMPLETED")) << job(id).dump();
  json j = job(id);
  EXPECT_EQ(j["exit_code"], 0) << j.dump();
  EXPECT_EQ(j["user"], kUser);
  EXPECT_EQ(slurp(out), "done\n");
  struct stat st {};
  ASSERT_EQ(::stat(out.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, uid_);  // it ran as the submitting user
}

TEST_F(AgentEndToEndTest, ACancelledJobEndsCancelledAndItsProcessIsGone) {
  std::string pid_file = dir_.file("pid");
  int64_t id = submitAsUser("echo $$ > " + pid_file + "; exec sleep 1000");
  ASSERT_GT(id, 0);
  pid_t pid = 0;
  ASSERT_TRUE(eventually([&] {
    std::string text = slurp(pid_file);
    if (text.empty() || text.back() != '\n') return false;
    pid = static_cast<pid_t>(std::stol(text));
    return true;
  }));
  ASSERT_GT(pid, 0);
  EXPECT_EQ(::kill(pid, 0), 0);  // running
  EXPECT_EQ(job(id)["state"], "RUNNING");

  auto r = http_->post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_TRUE(waitState(id, "CANCELLED"));
  EXPECT_TRUE(eventually([&] { return ::kill(pid, 0) != 0 && errno == ESRCH; }))
      << "process " << pid << " still exists";
}

// gpoold as its own unprivileged user (as the Debian package runs it, User=gpool): it may not
// open a task's log (the task user's, mode 0640), so the log comes through the task's agent
// (read_log / log_data), which is how every log of a task on another server comes.
class AgentEndToEndAsServiceUserTest : public AgentEndToEndTest {
 protected:
  bool gpooldAsServiceUser() const override { return true; }

  // `gpool --socket S args...` as the test user, in the test's directory; waits for it.
  struct Output {
    int rc = -1;
    std::string out;
    std::string err;
  };
  Output gpoolAsUser(const std::vector<std::string>& args) {
    std::vector<std::string> argv{std::string(GPOOL_BINARY_DIR) + "/src/cli/gpool", "--socket",
                                  socket_};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string prefix = dir_.file("gpool-" + std::to_string(++runs_));
    Child child = spawn(argv, false, uid_, gid_, dir_.path(), prefix);
    Output o;
    int status = 0;
    if (child.pid > 0 && !eventually([&] { return ::waitpid(child.pid, &status, WNOHANG) > 0; })) {
      ::kill(child.pid, SIGKILL);
      ::waitpid(child.pid, &status, 0);
      return o;
    }
    o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    o.out = slurp(prefix + ".out");
    o.err = slurp(prefix + ".err");
    return o;
  }

  int runs_ = 0;
};

TEST_F(AgentEndToEndAsServiceUserTest, LogsTheControllerCannotOpenComeThroughTheAgent) {
  int64_t id = submitAsUser("echo first; echo second >&2; echo third");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(waitState(id, "COMPLETED")) << job(id).dump();
  const std::string log = job(id)["allocations"][0].value("stdout_log", "");
  struct stat st {};
  ASSERT_EQ(::stat(log.c_str(), &st), 0) << log;
  EXPECT_EQ(st.st_uid, uid_);  // the task user's, not readable by gpoold's user
  EXPECT_EQ(st.st_mode & 0004, 0u);
  const passwd* nobody = ::getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  std::string status = slurp("/proc/" + std::to_string(gpoold_.pid) + "/status");
  EXPECT_NE(status.find("\nUid:\t" + std::to_string(nobody->pw_uid) + "\t"), std::string::npos)
      << status;  // gpoold is not root: only the agent can open the log

  Output out = gpoolAsUser({"logs", std::to_string(id)});
  EXPECT_EQ(out.rc, 0) << out.err;
  EXPECT_EQ(out.out, "first\nthird\n");
  Output err = gpoolAsUser({"logs", std::to_string(id), "--stderr"});
  EXPECT_EQ(err.rc, 0) << err.err;
  EXPECT_EQ(err.out, "");
  EXPECT_EQ(err.err, "second\n");

  // gpool run streams a job's output through the agent too, and exits with its exit code.
  Output run =
      gpoolAsUser({"run", "--gpus", "1", "--", "/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(run.rc, 3) << run.err;
  EXPECT_EQ(run.out, "out\n");
  EXPECT_NE(run.err.find("err\n"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("not on the controller"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace gpool::controller
