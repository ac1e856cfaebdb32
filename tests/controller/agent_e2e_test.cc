// The whole path for real: the gpoold binary (SQLite store, API and /v1/agent on its Unix
// socket) and the gpool-agent binary (simulated GPUs from a fixture, no cgroups, state in a temp
// directory). Jobs are submitted over REST by a real non-root test user (the agent refuses root
// tasks), run by the agent as that user, and followed through GET /v1/jobs/{id}. Needs root (to
// create the test user and switch to it); skips otherwise. Waits poll the REST API every 20 ms
// with an overall deadline; no sleeps as synchronisation.
#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "controller/raw_http.h"
#include "net/client.h"
#include "store/pg_server.h"
#include "vgpu/shm_region.h"

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
  // More [controller] keys for gpoold.toml, and more sections after it.
  virtual std::string extraConfig() const { return ""; }
  virtual std::string extraSections() const { return ""; }
  // Where the agent's GPUs come from: a fixture played by the fake backend, or (no arguments)
  // NVML, which agentEnv() may point at the fake NVML.
  virtual std::vector<std::string> agentBackendArgs() { return {"--fake-fixture", fixture()}; }
  // NAME=VALUE pairs added to the agent's environment.
  virtual std::vector<std::string> agentEnv() const { return {}; }
  // The agent's GPUs.
  virtual std::string fixture() {
    return std::string(GPOOL_SOURCE_DIR) + "/src/gpu/fixtures/8x-a100-sxm4-80gb-nvlink.json";
  }

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
                          << "schedule_interval = \"1s\"\n"
                          << extraConfig() << extraSections() << "[log]\nlevel = \"warn\"\n";
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
    // Listener lines ("metrics 127.0.0.1:PORT") come before "ready".
    for (std::string line = readLine(gpoold_.out); line != "ready"; line = readLine(gpoold_.out)) {
      ASSERT_FALSE(line.empty()) << "gpoold did not start";
      if (line.rfind("metrics ", 0) == 0) metrics_address_ = line.substr(8);
    }
    startAgent();
    ASSERT_GT(agent_.pid, 0);
    http_ = std::make_unique<net::HttpClient>(net::ClientEndpoint::unixSocket(socket_),
                                              std::chrono::seconds(10));
    // The agent's hello registers the node.
    ASSERT_TRUE(eventually([&] {
      auto r = http_->get("/v1/nodes");
      return r.ok() && r->status == 200 && json::parse(r->body)["nodes"].size() == 1;
    }));
  }
  // The agent's flags beyond the common ones: no cgroups unless a test needs them.
  virtual std::vector<std::string> agentFlags() const { return {"--no-cgroups"}; }
  void startAgent() {
    std::vector<std::string> args;
    if (!agentEnv().empty()) args.push_back("/usr/bin/env");
    for (const std::string& e : agentEnv())
      args.push_back(e);
    for (const std::string& a :
         {std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-agent", std::string("--node"),
          std::string("n1"), std::string("--unix-socket"), socket_, std::string("--state-dir"),
          dir_.file("state"), std::string("--supervisor"),
          std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-supervisor", std::string("--vgpu-dir"),
          dir_.file("vgpu")}) {
      args.push_back(a);
    }
    for (const std::string& a : agentBackendArgs())
      args.push_back(a);
    for (const std::string& f : agentFlags())
      args.push_back(f);
    agent_ = spawn(args, false);
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
  int64_t submitAsUser(const std::string& command, uint32_t gpus_milli = 1000,
                       std::map<std::string, std::string> env = {}, uint64_t gpu_memory_mib = 0) {
    api::JobSpec spec;
    spec.name = "e2e";
    spec.command = {"/bin/sh", "-c", command};
    spec.working_dir = dir_.path();
    spec.resources.gpus_milli = gpus_milli;
    spec.resources.gpu_memory_mib = gpu_memory_mib;
    spec.env = std::move(env);
    return submitSpecAsUser(spec);
  }
  // Submits `spec` as the test user, over the socket with its uid.
  int64_t submitSpecAsUser(const api::JobSpec& spec) {
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
  // Waits until the job has ended (in any state) and returns its state.
  std::string waitEnd(int64_t id) {
    std::string state;
    eventually([&] {
      state = job(id).value("state", "");
      return state != "PENDING" && state != "RUNNING" && state != "";
    });
    return state;
  }

  // `gpool --socket S args...` as `uid`:`gid` (root: 0), in the test's directory; waits for it.
  struct Output {
    int rc = -1;
    std::string out;
    std::string err;
  };
  Output gpoolAs(uid_t uid, gid_t gid, const std::vector<std::string>& args) {
    std::vector<std::string> argv{std::string(GPOOL_BINARY_DIR) + "/src/cli/gpool", "--socket",
                                  socket_};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string prefix = dir_.file("gpool-" + std::to_string(++runs_));
    Child child = spawn(argv, false, uid, gid, dir_.path(), prefix);
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
  // The same as the test user.
  Output gpoolAsUser(const std::vector<std::string>& args) { return gpoolAs(uid_, gid_, args); }

  OpenTempDir dir_;
  std::string socket_ = dir_.file("gpoold.sock");
  int runs_ = 0;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  Child gpoold_;
  Child agent_;
  std::string metrics_address_;  // gpoold's open scrape listener, when configured
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

// A real Prometheus (Debian's prometheus package) scrapes gpoold's open metrics listener; a
// PromQL query over DCGM_FI_DEV_GPU_UTIL with the running job's hpc_job label returns the
// simulated GPU's value. Skips where the prometheus binary is not installed
// (scripts/install-deps.sh installs it).
class PrometheusScrapeTest : public AgentEndToEndTest {
 protected:
  std::string extraConfig() const override {
    return "metrics_listen = \"127.0.0.1:0\"\ntelemetry_interval = \"1s\"\n";
  }
};

// A port the OS says is free now (Prometheus takes its listen address only as host:port).
// GET `url` with curl (plain HTTP; the API's client speaks TLS or a Unix socket only), with
// `query` as one URL-encoded parameter when given. The body, or "" when curl fails.
std::string curl(const std::string& url, const std::string& query = "") {
  std::string cmd = "curl -sS --max-time 5 -G '" + url + "' 2>/dev/null";
  if (!query.empty()) cmd += " --data-urlencode '" + query + "'";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  for (size_t n; (n = ::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  return ::pclose(p) == 0 ? out : "";
}

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

TEST_F(PrometheusScrapeTest, PromQlOverDcgmGpuUtilWithTheJobLabelReturnsTheSimulatedGpus) {
  const std::string prometheus = "/usr/bin/prometheus";
  if (::access(prometheus.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "no " << prometheus << " (Debian package prometheus)";
  }
  ASSERT_FALSE(metrics_address_.empty()) << "gpoold printed no metrics listener";
  int64_t id = submitAsUser("exec sleep 1000");
  ASSERT_GT(id, 0);
  ASSERT_TRUE(waitState(id, "RUNNING")) << job(id).dump();
  const std::string uuid = job(id)["allocations"][0]["slices"][0].value("gpu_uuid", "");
  ASSERT_FALSE(uuid.empty()) << job(id).dump();

  int port = freePort();
  ASSERT_GT(port, 0);
  std::string config = dir_.file("prometheus.yml");
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        << "scrape_configs:\n  - job_name: gpool\n    static_configs:\n"
                        << "      - targets: ['" << metrics_address_ << "']\n";
  Child prom =
      spawn({prometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir_.file("tsdb"),
             "--web.listen-address=127.0.0.1:" + std::to_string(port)},
            false, 0, 0, dir_.path(), dir_.file("prometheus"));
  ASSERT_GT(prom.pid, 0);
  const std::string query = "DCGM_FI_DEV_GPU_UTIL{hpc_job=\"" + std::to_string(id) + "\"}";
  // gpoold's own value for the GPU, from its page.
  auto served = [&]() -> std::string {
    std::istringstream lines(curl("http://" + metrics_address_ + "/metrics"));
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("DCGM_FI_DEV_GPU_UTIL{", 0) == 0 &&
          line.find("UUID=\"" + uuid + "\"") != std::string::npos)
        return line.substr(line.rfind(' ') + 1);
    }
    return "";
  };
  // Until Prometheus answers with a sample equal to what gpoold serves (the fixture's script
  // changes the value at times, so one pair of reads may straddle a change).
  json result;
  std::string value, page_value;
  bool found = eventually([&] {
    json j = json::parse(
        curl("http://127.0.0.1:" + std::to_string(port) + "/api/v1/query", "query=" + query),
        nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success") return false;
    result = j["data"]["result"];
    if (!result.is_array() || result.size() != 1) return false;
    value = result[0]["value"][1].get<std::string>();
    page_value = served();
    return value == page_value;
  });
  stop(prom);
  ASSERT_TRUE(found) << "Prometheus answered " << result.dump() << " for " << query
                     << " (gpoold serves " << page_value << "); its log:\n"
                     << slurp(dir_.file("prometheus.err"));
  const json& metric = result[0]["metric"];
  EXPECT_EQ(metric.value("UUID", ""), uuid) << result.dump();
  EXPECT_EQ(metric.value("user", ""), kUser);
  EXPECT_EQ(metric.value("Hostname", ""), "n1");
  EXPECT_EQ(metric.value("job", ""), "gpool");  // Prometheus's scrape job, not clobbered
  EXPECT_NE(metric.value("modelName", "").find("(simulated)"), std::string::npos);
  auto cancel = http_->post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
  ASSERT_TRUE(cancel.ok());
  EXPECT_TRUE(waitState(id, "CANCELLED"));
}

// The faults of a pool on simulated GPUs through the real daemons: a stray process and the
// memory it leaves behind, an allocation that uses nothing, and a GPU that fails under a running
// job. gpoold's alerts name each (GET /v1/alerts), the failed GPU ends the job with its reason
// and stays held until an admin clears it. Timings: the fixture's script steps are 2 s.
class FaultScenariosTest : public AgentEndToEndTest {
 protected:
  std::string fixture() override {
    std::string path = dir_.file("faults.json");
    // GPU 0: a stray process (2 s), gone at 8 s leaving 3000 MiB; GPU 1: XID 79 at 14 s. The
    // script keeps both GPUs at 97 % as a load script would; the tasks' telemetry overrides it.
    std::ofstream(path) << R"({"description": "e2e faults", "step_seconds": 2,
      "gpus": [{"count": 2, "model": "NVIDIA A100-SXM4-40GB", "memory_mib": 40960,
                "compute_capability": "8.0"}],
      "telemetry": {"utilization_pct": 97, "memory_used_mib": 0, "temperature_c": 40,
                    "power_w": 60, "sm_clock_mhz": 1410, "memory_clock_mhz": 1215},
      "script": [{"step": 1, "gpu": 0, "process": {"pid": 31337, "used_mib": 6144}},
                 {"step": 4, "gpu": 0, "process_exit": 31337},
                 {"step": 4, "gpu": 0, "set": {"memory_used_mib": 3000}},
                 {"step": 7, "gpu": 1, "xid": 79}]})";
    return path;
  }
  std::string extraConfig() const override { return "telemetry_interval = \"1s\"\n"; }
  std::string extraSections() const override {
    return "[alerts]\nevaluate_every = \"1s\"\n"
           "[alerts.stray_process]\nfor = \"0s\"\nresolve_after = \"1s\"\n"
           "[alerts.leaked_memory]\nfor = \"0s\"\n"
           "[alerts.allocation_idle]\nfor = \"2s\"\n";
  }
  // The alerts gpoold holds, as root sees them.
  json alerts() {
    auto r = http_->get("/v1/alerts?state=all");
    if (!r.ok() || r->status != 200) return json::array();
    return json::parse(r->body)["alerts"];
  }
  std::optional<json> alertNamed(const std::string& name) {
    for (const json& a : alerts()) {
      if (a["alertname"] == name) return a;
    }
    return std::nullopt;
  }
};

TEST_F(FaultScenariosTest, StrayLeakIdleAndFailedGpuAreSeenAndActedOn) {
  // A job on both GPUs that declares it does nothing (a demo job's GPOOL_SIM_LOAD).
  int64_t id = submitAsUser("exec sleep 1000", 2000, {{"GPOOL_SIM_LOAD", "0"}});
  ASSERT_GT(id, 0);
  ASSERT_TRUE(waitState(id, "RUNNING")) << job(id).dump();

  // Idle: the GPUs follow the task (0 %), not the fixture's 97 %, so the allocation is flagged.
  std::optional<json> idle;
  ASSERT_TRUE(eventually([&] { return (idle = alertNamed("AllocationIdle")).has_value(); }))
      << alerts().dump();
  EXPECT_EQ((*idle)["labels"]["hpc_job"], std::to_string(id));
  EXPECT_EQ((*idle)["labels"]["user"], kUser);

  // Stray: reported with its pid and memory; resolved once it exited.
  std::optional<json> stray;
  ASSERT_TRUE(eventually([&] { return (stray = alertNamed("StrayGpuProcess")).has_value(); }))
      << alerts().dump();
  EXPECT_EQ((*stray)["labels"]["pid"], "31337");
  EXPECT_NE((*stray)["summary"].get<std::string>().find("6144 MiB"), std::string::npos);
  ASSERT_TRUE(eventually([&] {
    auto a = alertNamed("StrayGpuProcess");
    return a && (*a)["state"] == "resolved";
  })) << alerts().dump();

  // Memory left behind: 3000 MiB no process holds.
  std::optional<json> leak;
  ASSERT_TRUE(eventually([&] { return (leak = alertNamed("GpuMemoryLeftBehind")).has_value(); }))
      << alerts().dump();
  EXPECT_NE((*leak)["summary"].get<std::string>().find("3000 MiB"), std::string::npos);

  // The GPU fails under the job: XID 79 ends it (not preemptible) with the GPU's reason, the
  // alert fires, and the GPU stays out of scheduling after the XID until it is cleared.
  ASSERT_TRUE(waitState(id, "NODE_FAIL")) << job(id).dump();
  EXPECT_NE(job(id).value("reason", "").find("GPU 1 of n1 failed"), std::string::npos)
      << job(id).dump();
  ASSERT_TRUE(eventually([&] { return alertNamed("GpuXidError").has_value(); })) << alerts().dump();
  auto gpus = http_->get("/v1/gpus");
  ASSERT_TRUE(gpus.ok());
  json g1 = json::parse(gpus->body)["gpus"][1];
  EXPECT_EQ(g1["health"], "unhealthy") << g1.dump();
  EXPECT_NE(g1.value("health_reason", "").find("gpool gpu clear n1/1"), std::string::npos);
  auto cleared = http_->post("/v1/nodes/n1/gpus/1/clear", "");
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->status, 200) << cleared->body;
}

// Idle reclaim through gpoold and gpool-agent on simulated GPUs whose utilisation follows the
// tasks (GPOOL_SIM_LOAD=0: a task that holds its GPU and does nothing). Short durations (after 2 s,
// grace 15 s) stand in for hours; the exact times are IdleReclaimTest's, on an injected clock.
class IdleReclaimScenarioTest : public AgentEndToEndTest {
 protected:
  std::string extraConfig() const override { return "telemetry_interval = \"1s\"\n"; }
  std::string extraSections() const override {
    return "[alerts]\nevaluate_every = \"1s\"\n"
           "[idle_reclaim]\nenabled = true\nafter = \"2s\"\ngrace = \"15s\"\n";
  }
  json events(int64_t id) {
    auto r = http_->get("/v1/jobs/" + std::to_string(id) + "/events");
    if (!r.ok() || r->status != 200) return json::array();
    return json::parse(r->body)["events"];
  }
  // `gpool show ID` (as root), its standard output.
  std::string show(int64_t id) {
    std::string cmd = std::string(GPOOL_BINARY_DIR) + "/src/cli/gpool --socket '" + socket_ +
                      "' show " + std::to_string(id) + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return "";
    std::string out;
    char buf[4096];
    for (size_t n; (n = ::fread(buf, 1, sizeof buf, p)) > 0;)
      out.append(buf, n);
    ::pclose(p);
    return out;
  }
};

TEST_F(IdleReclaimScenarioTest, IdleJobsAreFlaggedThenRequeuedOrEndedAndBusyOnesKeepRunning) {
  // Four one-GPU jobs at a tenth of a CPU each (the test machine may have 2 CPUs).
  auto spec = [&](const std::string& name, bool idle) {
    api::JobSpec s;
    s.name = name;
    s.command = {"/bin/sh", "-c", "exec sleep 1000"};
    s.working_dir = dir_.path();
    s.resources.gpus_milli = 1000;
    s.resources.cpus_milli = 100;
    if (idle) s.env = {{"GPOOL_SIM_LOAD", "0"}};
    return s;
  };
  api::JobSpec restartable = spec("idle-restartable", true);
  restartable.preemptible = true;
  const int64_t requeued = submitSpecAsUser(restartable);
  const int64_t ended = submitSpecAsUser(spec("idle-batch", true));
  // An interactive allocation (gpool alloc): no command, it only holds its GPU.
  api::JobSpec alloc = spec("idle-interactive", true);
  alloc.interactive = true;
  alloc.command.clear();
  const int64_t interactive = submitSpecAsUser(alloc);
  const int64_t busy = submitSpecAsUser(spec("busy", false));  // the simulated GPU at 100 %
  for (int64_t id : {requeued, ended, interactive, busy})
    ASSERT_GT(id, 0);
  ASSERT_TRUE(waitState(ended, "RUNNING")) << job(ended).dump();

  // Flagged: the reason says so (gpool show) and the AllocationIdle alert fires for the job.
  ASSERT_TRUE(eventually([&] {
    return job(ended).value("reason", "").rfind("Idle: every GPU at 0 %", 0) == 0;
  })) << job(ended).dump();
  const std::string shown = show(ended);
  EXPECT_NE(shown.find("Reason=Idle: every GPU at 0 % since"), std::string::npos) << shown;
  EXPECT_NE(shown.find("ended at"), std::string::npos) << shown;
  ASSERT_TRUE(eventually([&] {
    auto r = http_->get("/v1/alerts?state=all");
    if (!r.ok() || r->status != 200) return false;
    const json alerts = json::parse(r->body);
    for (const json& a : alerts["alerts"]) {
      if (a["alertname"] == "AllocationIdle" &&
          a["labels"].value("hpc_job", "") == std::to_string(ended)) {
        return true;
      }
    }
    return false;
  }));

  // After the grace: the restartable job is requeued (and placed again), the others end.
  ASSERT_TRUE(waitState(ended, "PREEMPTED")) << job(ended).dump();
  EXPECT_NE(job(ended).value("reason", "").find("idle reclaim: every GPU at 0 %"),
            std::string::npos)
      << job(ended).dump();
  ASSERT_TRUE(waitState(interactive, "PREEMPTED")) << job(interactive).dump();
  ASSERT_TRUE(eventually([&] { return job(requeued).value("requeue_count", 0) >= 1; }))
      << job(requeued).dump();
  bool flagged = false, reclaimed = false;
  for (const json& e : events(requeued)) {
    const std::string why = e.value("reason", "");
    if (e.value("to_state", "") == "RUNNING" && why.rfind("Idle: ", 0) == 0) flagged = true;
    if (e.value("to_state", "") == "PREEMPTED" && why.find("requeued") != std::string::npos) {
      reclaimed = true;
    }
  }
  EXPECT_TRUE(flagged) << events(requeued).dump();
  EXPECT_TRUE(reclaimed) << events(requeued).dump();
  // The busy job was never flagged and runs on.
  EXPECT_EQ(job(busy).value("state", ""), "RUNNING") << job(busy).dump();
  EXPECT_TRUE(eventually([&] { return !events(busy).empty(); }));
  for (const json& e : events(busy)) {
    EXPECT_EQ(e.value("reason", "").rfind("Idle: ", 0), std::string::npos) << e.dump();
  }
}

// Two servers, each with its own gpool-agent, and leases short enough to lose one in a test:
// lease 2 s, heartbeat 1 s, fence grace 1 s, margin 1 s, node_down_after 4 s.
class TwoNodePoolTest : public ::testing::Test {
 protected:
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
                          << "schedule_interval = \"1s\"\nlease_duration = \"2s\"\n"
                          << "heartbeat_interval = \"1s\"\nnode_down_after = \"4s\"\n"
                          << "fence_grace = \"1s\"\nlease_margin = \"1s\"\n"
                          << "[log]\nlevel = \"warn\"\n";
    gpoold_ =
        spawn({std::string(GPOOL_BINARY_DIR) + "/src/controller/gpoold", "--config", config}, true);
    ASSERT_EQ(readLine(gpoold_.out), "ready");
    for (const std::string node : {"n1", "n2"})
      startAgent(node);
    http_ = std::make_unique<net::HttpClient>(net::ClientEndpoint::unixSocket(socket_),
                                              std::chrono::seconds(10));
    ASSERT_TRUE(eventually([&] {
      auto r = http_->get("/v1/nodes");
      return r.ok() && r->status == 200 && json::parse(r->body)["nodes"].size() == 2;
    }));
  }
  void TearDown() override {
    // Every job's tasks go first (a task's supervisor outlives its agent), then the daemons.
    if (http_) {
      for (int64_t id : jobs_)
        (void)http_->post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
      for (int64_t id : jobs_) {
        EXPECT_TRUE(eventually([&] {
          std::string state = job(id).value("state", "");
          return state != "RUNNING" && state != "PENDING" && state != "COMPLETING";
        }));
      }
      for (pid_t pid : task_pids_) {
        if (eventually([&] { return ::kill(pid, 0) != 0; })) continue;
        ADD_FAILURE() << "task " << pid << " outlived its job";
        ::kill(-pid, SIGKILL);  // its process group: nothing of a failed test runs on
      }
    }
    http_.reset();
    for (auto& [node, agent] : agents_) {
      if (agent.pid > 0) {
        EXPECT_EQ(stop(agent), 0) << node;
      }
    }
    if (gpoold_.pid > 0) {
      EXPECT_EQ(stop(gpoold_), 0);
    }
  }

  // The GPUs of `node`'s agent.
  virtual std::string fixtureOf(const std::string& node) {
    (void)node;
    return std::string(GPOOL_SOURCE_DIR) + "/src/gpu/fixtures/8x-a100-sxm4-80gb-nvlink.json";
  }
  void startAgent(const std::string& node) {
    agents_[node] = spawn(
        {std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-agent", "--node", node, "--unix-socket",
         socket_, "--state-dir", dir_.file("state-" + node), "--fake-fixture", fixtureOf(node),
         "--supervisor", std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-supervisor",
         "--vgpu-dir", dir_.file("vgpu-" + node), "--no-cgroups"},
        false);
    ASSERT_GT(agents_[node].pid, 0);
  }
  void killAgent(const std::string& node) {
    Child& agent = agents_[node];
    ASSERT_GT(agent.pid, 0);
    ::kill(agent.pid, SIGKILL);
    ::waitpid(agent.pid, nullptr, 0);
    agent.pid = -1;
  }

  // Submits a job of `gpus` whole GPUs running `command` (through /bin/sh -c) as the test user.
  int64_t submit(const std::string& command, int gpus, bool preemptible) {
    api::JobSpec spec;
    spec.name = "fence";
    spec.command = {"/bin/sh", "-c", command};
    spec.working_dir = dir_.path();
    spec.resources.gpus_milli = 1000 * gpus;
    spec.preemptible = preemptible;
    return submitSpec(spec);
  }
  // Submits `spec` as the test user.
  int64_t submitSpec(const api::JobSpec& spec) {
    std::string body = api::toJson(spec).dump();
    std::string response = testing::rawRequestAs(
        uid_, gid_, socket_,
        "POST /v1/jobs HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        "Connection: close\r\nContent-Length: " +
            std::to_string(body.size()) + "\r\n\r\n" + body);
    EXPECT_EQ(response.rfind("HTTP/1.1 201", 0), 0u) << response;
    size_t start = response.find("\r\n\r\n");
    json j = start == std::string::npos ? json()
                                        : json::parse(response.substr(start + 4), nullptr, false);
    if (!j.is_object() || !j.contains("ids")) return -1;
    jobs_.push_back(j["ids"][0].get<int64_t>());
    return jobs_.back();
  }
  json job(int64_t id) {
    auto r = http_->get("/v1/jobs/" + std::to_string(id));
    if (!r.ok() || r->status != 200) return json::object();
    return json::parse(r->body, nullptr, false);
  }
  std::string nodeOf(int64_t id) {
    json j = job(id);
    if (j.value("state", "") != "RUNNING" || j["allocations"].empty()) return "";
    return j["allocations"][0].value("node", "");
  }

  // The tick lines "<pid> <unix ns>" the tasks wrote to `file`, by pid.
  std::map<pid_t, std::vector<int64_t>> ticks(const std::string& file) {
    std::map<pid_t, std::vector<int64_t>> out;
    std::istringstream in(slurp(file));
    long pid = 0;
    long long ns = 0;
    while (in >> pid >> ns)
      out[static_cast<pid_t>(pid)].push_back(ns);
    return out;
  }

  OpenTempDir dir_;
  std::string socket_ = dir_.file("gpoold.sock");
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  Child gpoold_;
  std::map<std::string, Child> agents_;
  std::unique_ptr<net::HttpClient> http_;
  std::vector<int64_t> jobs_;
  std::vector<pid_t> task_pids_;
};

// Issue 19, defect 1 (trial D1): the agent of the node running a requeueable job is SIGKILLed.
// The job must run again on the other node, and the old copy must have stopped before the new
// one started: the task's supervisor enforces the lease without its agent, and the controller
// moves the job only once that lease has certainly ended. The tasks tick every 50 ms into one
// file; no tick of the old copy may come after the new copy's first.
TEST_F(TwoNodePoolTest, ARequeuedJobNeverRunsTwiceWhenItsAgentIsKilled) {
  const std::string file = dir_.file("ticks");
  int64_t id = submit("while :; do echo \"$$ $(date +%s%N)\" >> " + file + "; sleep 0.05; done", 8,
                      /*preemptible=*/true);
  ASSERT_GT(id, 0);
  std::string first_node;
  ASSERT_TRUE(eventually([&] { return !(first_node = nodeOf(id)).empty(); })) << job(id).dump();
  ASSERT_TRUE(eventually([&] { return ticks(file).size() == 1; }));
  const pid_t first = ticks(file).begin()->first;
  task_pids_.push_back(first);

  killAgent(first_node);
  // It runs again, on the other node, as a second attempt.
  ASSERT_TRUE(eventually([&] { return ticks(file).size() == 2; })) << job(id).dump();
  json j = job(id);
  EXPECT_EQ(j["state"], "RUNNING");
  EXPECT_EQ(j["requeue_count"], 1) << j.dump();
  EXPECT_NE(nodeOf(id), first_node);
  std::map<pid_t, std::vector<int64_t>> by_pid = ticks(file);
  by_pid.erase(first);
  ASSERT_EQ(by_pid.size(), 1u);
  const pid_t second = by_pid.begin()->first;
  task_pids_.push_back(second);
  // Some more ticks of the new copy, to see that the old one stays quiet.
  ASSERT_TRUE(eventually([&] { return ticks(file)[second].size() >= 5; }));
  by_pid = ticks(file);
  const int64_t old_last = *std::max_element(by_pid[first].begin(), by_pid[first].end());
  const int64_t new_first = *std::min_element(by_pid[second].begin(), by_pid[second].end());
  EXPECT_LT(old_last, new_first) << "the old copy ticked " << (old_last - new_first) / 1000000
                                 << " ms after the new copy started";
  EXPECT_NE(::kill(first, 0), 0) << "the old copy (pid " << first << ") still runs";
}

// Issue 19, defect 2 (trial D6): right after a node's agent is SIGKILLed (long before the node
// goes DOWN), a job that fits only there waits instead of being placed on it: it would show
// RUNNING and never run.
TEST_F(TwoNodePoolTest, ANodeWhoseAgentDiedGetsNoNewWork) {
  int64_t busy = submit("exec sleep 1000", 8, /*preemptible=*/false);
  ASSERT_GT(busy, 0);
  std::string busy_node;
  ASSERT_TRUE(eventually([&] { return !(busy_node = nodeOf(busy)).empty(); }));
  const std::string dead_node = busy_node == "n1" ? "n2" : "n1";
  killAgent(dead_node);
  int64_t id = submit("true", 8, /*preemptible=*/false);
  ASSERT_GT(id, 0);
  // A pass has looked at it: placed, or given its pending reason.
  ASSERT_TRUE(eventually([&] {
    json j = job(id);
    return j.value("state", "") != "PENDING" || j.value("reason", "") == "Resources";
  })) << job(id).dump();
  json j = job(id);
  EXPECT_EQ(j["state"], "PENDING") << j.dump();
  EXPECT_EQ(j["reason"], "Resources");
  // The node it would have taken frees up: it runs there.
  auto r = http_->post("/v1/jobs/" + std::to_string(busy) + "/cancel", "");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(eventually([&] { return job(id).value("state", "") == "COMPLETED"; }))
      << job(id).dump();
}

// Issue 20, item 3 (December trial, features row 3b): an agent without --interposer took slice
// jobs and ran them with nothing enforced, without a word. Its node now says it does not enforce
// slices, and gpoold places no slice there (the job waits, saying why) while whole GPUs still run.
TEST_F(AgentEndToEndTest, ASliceWaitsForANodeThatEnforcesSlices) {
  auto nodes = http_->get("/v1/nodes");
  ASSERT_TRUE(nodes.ok());
  json slices = json::parse(nodes->body)["nodes"][0]["slices"];
  EXPECT_EQ(slices["enforced"], false) << slices;
  EXPECT_EQ(slices["interposer"], false) << slices;
  EXPECT_NE(slices["detail"].get<std::string>().find("no interposer configured"), std::string::npos)
      << slices;
  int64_t slice = submitAsUser("true", 250);
  int64_t whole = submitAsUser("true", 1000);
  ASSERT_GT(slice, 0);
  ASSERT_GT(whole, 0);
  ASSERT_TRUE(waitState(whole, "COMPLETED")) << job(whole).dump();
  ASSERT_TRUE(eventually([&] {
    return job(slice).value("reason_detail", "").find("slice_enforcement") != std::string::npos;
  })) << job(slice).dump();
  json j = job(slice);
  EXPECT_EQ(j["state"], "PENDING") << j.dump();
  EXPECT_EQ(j["reason"], "BadConstraints") << j.dump();
  EXPECT_NE(j.value("reason_detail", "").find("only on nodes that enforce them"), std::string::npos)
      << j.dump();
}

// --min-cuda through the real daemons (issue 22): n1's driver is 470 / CUDA 11.4, n2's 550 /
// CUDA 12.4 (the fixture's). A job needing CUDA 12.2 runs on n2 only, also when n1 is free and
// listed first; one needing 12.9 waits, its reason naming min_cuda.
class MinCudaPoolTest : public TwoNodePoolTest {
 protected:
  std::string fixtureOf(const std::string& node) override {
    std::string fixture = TwoNodePoolTest::fixtureOf(node);
    if (node != "n1") return fixture;
    json j = json::parse(slurp(fixture));
    j["driver_version"] = "470.256.02";
    j["cuda_driver_version"] = "11.4";
    const std::string path = dir_.file("cuda-11.4.json");
    std::ofstream(path) << j.dump();
    return path;
  }
};

TEST_F(MinCudaPoolTest, AJobNeedingCuda122RunsOnlyOnTheNodeThatHasIt) {
  auto nodes = http_->get("/v1/nodes");
  ASSERT_TRUE(nodes.ok());
  std::map<std::string, std::string> cuda;
  const json listed = json::parse(nodes->body);
  for (const json& n : listed["nodes"])
    cuda[n.value("name", "")] = n["gpus"][0].value("cuda_version", "");
  ASSERT_EQ(cuda["n1"], "11.4") << nodes->body;
  ASSERT_EQ(cuda["n2"], "12.4") << nodes->body;
  // Nine one-GPU jobs needing 12.2: eight take n2's eight GPUs, none of n1's, and the ninth
  // waits though all of n1 is free.
  std::vector<int64_t> ids;
  for (int i = 0; i < 9; ++i) {
    api::JobSpec spec;
    spec.name = "cuda";
    spec.command = {"/bin/sh", "-c", "exec sleep 1000"};
    spec.working_dir = dir_.path();
    spec.resources.gpus_milli = 1000;
    spec.resources.cpus_milli = 100;
    spec.constraints.min_cuda = api::CudaVersion{12, 2};
    ids.push_back(submitSpec(spec));
    ASSERT_GT(ids.back(), 0);
  }
  std::map<std::string, int> placed;
  std::string waiting;
  ASSERT_TRUE(eventually([&] {
    placed.clear();
    waiting.clear();
    for (int64_t id : ids) {
      const std::string node = nodeOf(id);
      if (!node.empty()) {
        ++placed[node];
      } else if (job(id).value("reason", "") == "Resources") {
        waiting = std::to_string(id);
      }
    }
    return placed["n2"] == 8 && !waiting.empty();
  })) << "n1 "
      << placed["n1"] << ", n2 " << placed["n2"] << ", waiting " << waiting;
  EXPECT_EQ(placed["n1"], 0);
  // One needing 12.9 waits with min_cuda named.
  api::JobSpec spec;
  spec.name = "cuda";
  spec.command = {"/bin/sh", "-c", "true"};
  spec.working_dir = dir_.path();
  spec.resources.gpus_milli = 1000;
  spec.constraints.min_cuda = api::CudaVersion{12, 9};
  const int64_t newer = submitSpec(spec);
  ASSERT_GT(newer, 0);
  ASSERT_TRUE(eventually([&] {
    return job(newer).value("reason_detail", "").find("min_cuda") != std::string::npos;
  })) << job(newer).dump();
  EXPECT_EQ(job(newer).value("state", ""), "PENDING");
  EXPECT_EQ(job(newer).value("reason", ""), "BadConstraints") << job(newer).dump();
}

// Slices through the real daemons with the interposer (issue 20, items 1-3). The agent reads its
// one GPU through NVML, the fake NVML, and the tasks reach the fake libcuda: both share one
// simulated GPU state file, so the agent sees each process's allocations as NVML reports them.
class SliceEnforcementTest : public AgentEndToEndTest {
 protected:
  void SetUp() override {
    if (::access(interposer().c_str(), R_OK) != 0) {
      GTEST_SKIP() << "no interposer built (no CUDA headers): " << interposer();
    }
    // Made before anyone maps it, writable by the tasks' user.
    const std::string state = dir_.file("fake-gpu-state");
    std::ofstream(state).flush();
    ::chmod(state.c_str(), 0666);
    AgentEndToEndTest::SetUp();
  }
  std::string extraConfig() const override { return "telemetry_interval = \"1s\"\n"; }
  std::vector<std::string> agentBackendArgs() override { return {}; }
  std::vector<std::string> agentEnv() const override {
    std::vector<std::string> env;
    for (const auto& [k, v] : fakeGpuEnv())
      env.push_back(k + "=" + v);
    return env;
  }
  static std::string interposer() {
    return std::string(GPOOL_BINARY_DIR) + "/src/vgpu/libgpool-vgpu.so";
  }
  static std::string client() { return std::string(GPOOL_BINARY_DIR) + "/tests/vgpu/vgpu_client"; }
  std::vector<std::string> agentFlags() const override {
    return {"--no-cgroups", "--interposer", interposer()};
  }
  // What a slice task needs to reach the simulated GPU (16 GiB) through the fakes.
  std::map<std::string, std::string> fakeGpuEnv() const {
    return {{"LD_LIBRARY_PATH", std::string(GPOOL_BINARY_DIR) + "/tests/fakes/lib"},
            {"GPOOL_FAKE_GPU_STATE", dir_.file("fake-gpu-state")},
            {"GPOOL_FAKE_GPU_MEMORY_MIB", "16384"}};
  }
  // Runs `vgpu_client - tamper REGION` as `uid`:`gid` and returns its "key value" lines.
  std::map<std::string, std::string> tamperAs(uid_t uid, gid_t gid, const std::string& region) {
    Child child = spawn({client(), "-", "tamper", region}, true, uid, gid);
    std::map<std::string, std::string> out;
    for (std::string line = readLine(child.out); !line.empty(); line = readLine(child.out)) {
      const size_t space = line.find(' ');
      out[line.substr(0, space)] = space == std::string::npos ? "" : line.substr(space + 1);
    }
    int status = 0;
    ::waitpid(child.pid, &status, 0);
    if (child.out) ::fclose(child.out);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    return out;
  }
};

// Defect D4 of the December trial: any user could rewrite another user's slice limits (the
// region was one 0666 file), and the task itself could raise its own quota. Now the region's
// directory is reachable only by the task's user (and root), the limits part is the agent's
// and read-only, and the interposer still holds the task to its quota.
TEST_F(SliceEnforcementTest, OtherUsersCannotReachARegionAndTheTaskCannotRaiseItsQuota) {
  const char* kOther = "gpool-test-bob";
  std::string why = ensureUser(kOther);
  if (!why.empty()) GTEST_SKIP() << why;
  const passwd* other = ::getpwnam(kOther);
  ASSERT_NE(other, nullptr);
  const uid_t other_uid = other->pw_uid;
  const gid_t other_gid = other->pw_gid;

  // A quarter of a GPU with 1 GiB: the task attacks its own region, allocates 256 MiB at a time
  // until refused, then says where its region is and waits.
  const std::string ready = dir_.file("region");
  const std::string command = client() + " - tamper \"$GPOOL_VGPU_REGIONS\" > " +
                              dir_.file("task-tamper") + " && " + client() +
                              " direct fill 256 1 > " + dir_.file("fill") +
                              " && echo \"$GPOOL_VGPU_REGIONS\" > " + ready + ".tmp && mv " +
                              ready + ".tmp " + ready + " && exec sleep 1000";
  int64_t id = submitAsUser(command, 250, fakeGpuEnv(), 1024);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(eventually([&] { return !slurp(ready).empty(); }))
      << job(id).dump() << "\n"
      << slurp(dir_.file("task-tamper")) << slurp(dir_.file("fill"));
  std::string region = slurp(ready);
  region.pop_back();  // the newline

  // The task reads both parts and writes its usage, but cannot change its limits in any way.
  const std::string task = slurp(dir_.file("task-tamper"));
  for (const char* line :
       {"read_limits ok\n", "map_limits_writable EACCES\n", "mprotect_limits_writable EACCES\n",
        "write_limits EACCES\n", "chmod_limits EPERM\n", "read_usage ok\n", "write_usage ok\n",
        "replace_limits EACCES\n", "create_in_dir EACCES\n", "quota_bytes 1073741824\n"}) {
    EXPECT_NE(task.find(line), std::string::npos) << "the task: missing '" << line << "' in\n"
                                                  << task;
  }
  // The interposer still enforces the quota: four 256 MiB allocations, the fifth refused.
  EXPECT_NE(slurp(dir_.file("fill")).find("allocated 4\nerrors 0\n"), std::string::npos)
      << slurp(dir_.file("fill"));

  // Another local user reaches nothing of it.
  std::map<std::string, std::string> seen = tamperAs(other_uid, other_gid, region);
  for (const char* attempt : {"read_limits", "write_limits", "chmod_limits", "read_usage",
                              "write_usage", "replace_limits", "create_in_dir", "quota_bytes"}) {
    EXPECT_EQ(seen[attempt], "EACCES") << kOther << ": " << attempt;
  }
  auto opened = vgpu::ShmRegion::open(region);
  ASSERT_TRUE(opened.ok()) << opened.status().toString();
  EXPECT_EQ(opened->quotaBytes(), 1024ull << 20);

  auto cancel = http_->post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
  ASSERT_TRUE(cancel.ok());
  EXPECT_TRUE(waitState(id, "CANCELLED"));
}

// Per-slice metrics through the real daemons (issue 22): a quarter-GPU task launches kernels
// through the interposer over the fake libcuda for 3 s or more, then only sleeps. gpoold's
// /metrics shows its compute used (non-zero while it launches) and a recent last launch, then
// the time since that launch growing and nothing used.
TEST_F(SliceEnforcementTest, SliceMetricsShowComputeUsedThenTheTimeSinceTheLastLaunchGrowing) {
  const std::string done = dir_.file("spun");
  int64_t id = submitAsUser(client() + " direct spin 2000 1500 kernel > " + dir_.file("spin") +
                                " && touch " + done + " && exec sleep 1000",
                            250, fakeGpuEnv(), 1024);
  ASSERT_GT(id, 0);
  // This job's sample of `metric` on the page, or nullopt.
  const std::string job_label = "hpc_job=\"" + std::to_string(id) + "\"";
  auto value = [&](const std::string& metric) -> std::optional<double> {
    auto r = http_->get("/metrics");
    if (!r.ok() || r->status != 200) return std::nullopt;
    std::istringstream lines(r->body);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind(metric + "{", 0) == 0 && line.find(job_label) != std::string::npos) {
        return std::stod(line.substr(line.rfind(' ') + 1));
      }
    }
    return std::nullopt;
  };
  std::optional<double> used, since;
  ASSERT_TRUE(eventually([&] {
    used = value("gpool_slice_compute_used_ratio");
    since = value("gpool_slice_since_last_kernel_launch_seconds");
    return used && *used > 0 && since && *since < 2.5;
  })) << "used "
      << used.value_or(-1) << ", since " << since.value_or(-1) << "; " << job(id).dump()
      << slurp(dir_.file("spin"));
  EXPECT_LE(*used, 1.0);
  EXPECT_EQ(value("gpool_slice_compute_share_ratio"), 0.25);

  // Done launching: every launch counted, nothing used, and the time since grows.
  ASSERT_TRUE(eventually([&] { return ::access(done.c_str(), F_OK) == 0; }))
      << slurp(dir_.file("spin"));
  ASSERT_TRUE(eventually([&] {
    used = value("gpool_slice_compute_used_ratio");
    since = value("gpool_slice_since_last_kernel_launch_seconds");
    return used == 0.0 && since && *since >= 1.5;
  })) << "used "
      << used.value_or(-1) << ", since " << since.value_or(-1);
  EXPECT_EQ(value("gpool_slice_kernel_launches_total"), 1500.0);
  const double earlier = *since;
  ASSERT_TRUE(eventually([&] {
    since = value("gpool_slice_since_last_kernel_launch_seconds");
    return since && *since >= earlier + 1;
  })) << "since "
      << since.value_or(-1) << " after " << earlier;
  auto cancel = http_->post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
  ASSERT_TRUE(cancel.ok());
  EXPECT_TRUE(waitState(id, "CANCELLED"));
}

// The rows `sql` selects from gpoold's SQLite store at `db`, each as its columns joined by '|'
// (read-only, beside the running gpoold: what the store keeps that no route shows).
std::vector<std::string> queryStore(const std::string& db, const std::string& sql) {
  std::vector<std::string> out;
  sqlite3* handle = nullptr;
  if (sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(handle);
    return out;
  }
  sqlite3_busy_timeout(handle, 5000);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(handle, sql.c_str(), -1, &st, nullptr) == SQLITE_OK) {
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::string row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        const unsigned char* text = sqlite3_column_text(st, c);
        row += (c ? "|" : "") + std::string(text ? reinterpret_cast<const char*>(text) : "");
      }
      out.push_back(row);
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(handle);
  return out;
}

// A stray through the real daemons (issue 22): another user's real process holds memory on the
// simulated GPU (through the fake libcuda, outside gpool). The alert names its user; with
// stray_policy = "kill" its agent kills it after the grace, and gpoold writes an audit event of
// the kill naming pid, user, GPU, memory and node.
class StrayKillTest : public SliceEnforcementTest {
 protected:
  std::string extraConfig() const override {
    return "telemetry_interval = \"1s\"\nstray_policy = \"kill\"\nstray_grace = \"2s\"\n";
  }
  std::string extraSections() const override {
    return "[alerts]\nevaluate_every = \"1s\"\n[alerts.stray_process]\nfor = \"0s\"\n";
  }
};

TEST_F(StrayKillTest, AStrayIsReportedWithItsUserThenKilledAndTheKillAudited) {
  const char* kOther = "gpool-test-bob";
  std::string why = ensureUser(kOther);
  if (!why.empty()) GTEST_SKIP() << why;
  const passwd* other = ::getpwnam(kOther);
  ASSERT_NE(other, nullptr);
  std::vector<std::string> args{"/usr/bin/env"};
  for (const auto& [k, v] : fakeGpuEnv())
    args.push_back(k + "=" + v);
  for (const std::string& a :
       {client(), std::string("direct"), std::string("hold"), std::string("512")}) {
    args.push_back(a);
  }
  Child stray = spawn(args, true, other->pw_uid, other->pw_gid);
  ASSERT_GT(stray.pid, 0);
  ASSERT_EQ(readLine(stray.out), "held_mib 512");
  const std::string pid = std::to_string(stray.pid);

  // Reported with its user (before the grace ends), then killed.
  std::optional<json> alert;
  ASSERT_TRUE(eventually([&] {
    auto r = http_->get("/v1/alerts?state=all");
    if (!r.ok() || r->status != 200) return false;
    const json listed = json::parse(r->body);
    for (const json& a : listed["alerts"]) {
      if (a["alertname"] == "StrayGpuProcess" && a["labels"].value("pid", "") == pid) alert = a;
    }
    return alert.has_value();
  }));
  EXPECT_EQ((*alert)["labels"].value("process_user", ""), kOther) << alert->dump();
  EXPECT_NE((*alert)["summary"].get<std::string>().find("(user gpool-test-bob)"), std::string::npos)
      << alert->dump();
  int status = 0;
  ASSERT_TRUE(eventually([&] { return ::waitpid(stray.pid, &status, WNOHANG) == stray.pid; }))
      << "the stray was not killed";
  ::fclose(stray.out);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;

  // One audit event of the kill.
  std::vector<std::string> audit;
  ASSERT_TRUE(eventually([&] {
    audit = queryStore(dir_.file("gpool.db"),
                       "SELECT actor, subject, detail FROM audit_events WHERE action = "
                       "'kill_stray_process' ORDER BY seq");
    return !audit.empty();
  }));
  ASSERT_EQ(audit.size(), 1u);
  const std::string& row = audit[0];
  EXPECT_EQ(row.rfind("agent:n1|n1/0 pid " + pid + "|", 0), 0u) << row;
  json detail = json::parse(row.substr(row.find('|', row.find('|') + 1) + 1), nullptr, false);
  EXPECT_EQ(detail.value("pid", 0), stray.pid) << row;
  EXPECT_EQ(detail.value("user", ""), kOther) << row;
  EXPECT_EQ(detail.value("node", ""), "n1") << row;
  EXPECT_EQ(detail.value("gpu", -1), 0) << row;
  EXPECT_GE(detail.value("used_mib", 0), 512) << row;  // and the context the fake charges
}

// Idle reclaim across a gpoold restart (issue 22): the idle time is kept in the store, so a job
// idle before the restart is flagged and reclaimed counting from when it became idle, not from
// the restart. `after` 4 s, grace 1 s; gpoold is restarted as soon as the store has the job's
// idle-since (well within `after`).
class IdleRestartTest : public AgentEndToEndTest {
 protected:
  std::string extraConfig() const override { return "telemetry_interval = \"1s\"\n"; }
  std::string extraSections() const override {
    return "[idle_reclaim]\nenabled = true\nafter = \"4s\"\ngrace = \"1s\"\n";
  }
  void restartGpoold() {
    ASSERT_EQ(stop(gpoold_), 0);
    gpoold_ = spawn({std::string(GPOOL_BINARY_DIR) + "/src/controller/gpoold", "--config",
                     dir_.file("gpoold.toml")},
                    true);
    for (std::string line = readLine(gpoold_.out); line != "ready"; line = readLine(gpoold_.out))
      ASSERT_FALSE(line.empty()) << "gpoold did not start again";
  }
};

TEST_F(IdleRestartTest, AJobIdleBeforeARestartIsReclaimedCountingFromWhenItBecameIdle) {
  api::JobSpec spec;
  spec.name = "idle";
  spec.command = {"/bin/sh", "-c", "exec sleep 1000"};
  spec.working_dir = dir_.path();
  spec.resources.gpus_milli = 1000;
  spec.env = {{"GPOOL_SIM_LOAD", "0"}};
  const int64_t id = submitSpecAsUser(spec);
  ASSERT_GT(id, 0);
  const std::string row = "SELECT since FROM job_idle WHERE job_id = " + std::to_string(id);
  std::vector<std::string> since;
  ASSERT_TRUE(eventually([&] { return !(since = queryStore(dir_.file("gpool.db"), row)).empty(); }))
      << job(id).dump();
  const int64_t idle_since_s = std::stoll(since[0]) / 1'000'000;
  ASSERT_EQ(job(id).value("reason", "").rfind("Idle: ", 0), std::string::npos)
      << "flagged before the restart (the machine took 4 s to get here): " << job(id).dump();
  restartGpoold();

  // Flagged with the idle time counted from before the restart.
  std::string reason;
  ASSERT_TRUE(eventually([&] {
    reason = job(id).value("reason", "");
    return reason.rfind("Idle: every GPU at 0 % since ", 0) == 0;
  })) << job(id).dump();
  std::tm tm{};
  ASSERT_NE(::strptime(reason.c_str() + std::strlen("Idle: every GPU at 0 % since "),
                       "%Y-%m-%d %H:%M:%S UTC", &tm),
            nullptr)
      << reason;
  EXPECT_EQ(static_cast<int64_t>(::timegm(&tm)), idle_since_s) << reason;
  ASSERT_TRUE(waitState(id, "PREEMPTED")) << job(id).dump();
  EXPECT_NE(job(id).value("reason", "").find("idle reclaim"), std::string::npos) << job(id).dump();
  // The row goes with the job's run.
  EXPECT_TRUE(eventually([&] { return queryStore(dir_.file("gpool.db"), row).empty(); }));
}

// Jobs with an image (docs/containers.md): the real gpoold and gpool-agent with cgroups, real
// Podman with the OCI runtime that works here (runc on hybrid-cgroup hosts), and an image the
// test builds itself from Debian's static busybox (no registry is reachable). Skips, saying
// why, where Podman, an OCI runtime, busybox-static or the cgroup hierarchies are missing
// (scripts/install-deps.sh installs them; CI runs as root).
const char* kTestImage = "localhost/gpool-test-busybox:1";

// "" once kTestImage exists in Podman's store (built here if missing), or why it cannot.
std::string ensureTestImage() {
  if (::access("/usr/bin/podman", X_OK) != 0) return "no /usr/bin/podman (Debian package podman)";
  if (::access("/usr/sbin/runc", X_OK) != 0 && ::access("/usr/bin/crun", X_OK) != 0) {
    return "no OCI runtime (Debian package runc or crun)";
  }
  if (::access("/bin/busybox", X_OK) != 0 && ::access("/usr/bin/busybox", X_OK) != 0) {
    return "no static busybox (Debian package busybox-static) to build the test image from";
  }
  // scripts/make-busybox-image.sh builds and imports it unless it is there; one builder at a
  // time across test processes.
  int lock = ::open("/tmp/gpool-test-image.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  std::string make = std::string(GPOOL_SOURCE_DIR) + "/scripts/make-busybox-image.sh " +
                     kTestImage + " >/dev/null 2>&1";
  int rc = std::system(make.c_str());
  if (lock >= 0) ::close(lock);
  return rc == 0 ? "" : "cannot build the test image with podman import";
}

// Every cgroup and cgroup2 mount point.
std::vector<std::string> cgroupMounts() {
  std::vector<std::string> mounts;
  std::istringstream in(slurp("/proc/self/mountinfo"));
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::vector<std::string> w;
    for (std::string x; f >> x;)
      w.push_back(x);
    auto dash = std::find(w.begin(), w.end(), "-");
    if (w.size() > 4 && dash != w.end() && dash + 1 != w.end() &&
        (*(dash + 1) == "cgroup" || *(dash + 1) == "cgroup2")) {
      mounts.push_back(w[4]);
    }
  }
  return mounts;
}

// The output of `command` (sh -c), or "" when it fails.
std::string shellOutput(const std::string& command) {
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return "";
  std::string out;
  char buf[4096];
  for (size_t n; (n = ::fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  return ::pclose(p) == 0 ? out : "";
}

class ContainerJobTest : public AgentEndToEndTest {
 protected:
  std::vector<std::string> agentFlags() const override {
    return {"--cgroup-parent", cgroup_parent_, "--gpu-device-dir", dir_.file("dev")};
  }
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (Podman as root, cgroups, a test user)";
    if (std::string why = ensureTestImage(); !why.empty()) GTEST_SKIP() << why;
    if (::access("/sys/fs/cgroup/memory", F_OK) != 0 &&
        slurp("/sys/fs/cgroup/cgroup.controllers").find("memory") == std::string::npos) {
      GTEST_SKIP() << "no cgroup memory controller";
    }
    // The simulated GPUs' device nodes (char 195:<minor>, nvidiactl 195:255), as a server's.
    ::mkdir(dir_.file("dev").c_str(), 0755);
    for (int i = 0; i < 8; ++i) {
      std::string node = dir_.file("dev/nvidia" + std::to_string(i));
      ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, makedev(195, i)), 0) << node;
    }
    ASSERT_EQ(::mknod(dir_.file("dev/nvidiactl").c_str(), S_IFCHR | 0666, makedev(195, 255)), 0);
    AgentEndToEndTest::SetUp();
  }
  void TearDown() override {
    AgentEndToEndTest::TearDown();
    for (const std::string& m : cgroupMounts())
      ::rmdir((m + "/" + cgroup_parent_).c_str());
  }

  api::JobSpec containerSpec(const std::string& command) {
    api::JobSpec spec;
    spec.name = "ctr";
    spec.command = {"/bin/sh", "-c", command};
    spec.working_dir = dir_.path();
    spec.image = kTestImage;
    return spec;
  }
  // The task's groups that are left in any hierarchy.
  std::vector<std::string> leftGroups(int64_t id) {
    std::vector<std::string> left;
    for (const std::string& m : cgroupMounts()) {
      std::string g = m + "/" + cgroup_parent_ + "/" + std::to_string(id) + ".0";
      if (::access(g.c_str(), F_OK) == 0) left.push_back(g);
    }
    return left;
  }
  // The containers (any state) of task <id>.0 of this test's agent (labelled with its task
  // directory: other pools on this machine have jobs of the same ids).
  std::string containers(int64_t id) {
    return shellOutput("podman ps -a --format '{{.Names}}' --filter label=gpool.task_dir=" +
                       dir_.file("state/tasks/" + std::to_string(id) + ".0"));
  }

  // One per test: a container another test left behind while its Podman removed it must not
  // hold the groups of this test's tasks (the same job ids).
  static inline int tests_ = 0;
  std::string cgroup_parent_ =
      "gpool-ctr-" + std::to_string(::getpid()) + "-" + std::to_string(++tests_);
};

TEST_F(ContainerJobTest, RunsInItsImageAsItsUserWithItsEnvironmentAndOnlyItsGpu) {
  api::JobSpec spec = containerSpec(
      "cat /etc/gpool-image; id -u; id -g; echo \"$FOO $GPOOL_JOB_ID $CUDA_VISIBLE_DEVICES\"; "
      "ls /dev | grep nvidia; grep memory /proc/self/cgroup; pwd");
  spec.resources.gpus_milli = 1000;
  spec.env = {{"FOO", "bar baz"}};
  int64_t id = submitSpecAsUser(spec);
  ASSERT_GT(id, 0);
  ASSERT_EQ(waitEnd(id), "COMPLETED") << job(id).dump();
  json j = job(id);
  const std::string uuid = j["allocations"][0]["slices"][0].value("gpu_uuid", "");
  int index = -1;
  const std::string node = http_->get("/v1/nodes/n1")->body;
  const json parsed = json::parse(node);
  for (const json& g : parsed["gpus"]) {
    if (g.value("uuid", "") == uuid) index = g.value("index", -1);
  }
  ASSERT_GE(index, 0) << uuid << " " << node;
  std::string out = slurp(j["allocations"][0].value("stdout_log", ""));
  std::istringstream lines(out);
  std::vector<std::string> l;
  for (std::string line; std::getline(lines, line);)
    l.push_back(line);
  ASSERT_EQ(l.size(), 8u) << out << slurp(j["allocations"][0].value("stderr_log", ""));
  EXPECT_EQ(l[0], "gpool-test-image");  // the image's file system, not the host's
  EXPECT_EQ(l[1], std::to_string(uid_));
  EXPECT_EQ(l[2], std::to_string(gid_));
  EXPECT_EQ(l[3], "bar baz " + std::to_string(id) + " " + uuid);
  // Only its own GPU's node (and the control device), not the other seven.
  EXPECT_EQ(l[4], "nvidia" + std::to_string(index));
  EXPECT_EQ(l[5], "nvidiactl");
  // Inside the task's own memory group (below it: Podman's libpod-<id>).
  EXPECT_NE(l[6].find(":/" + cgroup_parent_ + "/" + std::to_string(id) + ".0/"), std::string::npos)
      << l[6];
  EXPECT_EQ(l[7], dir_.path());
  EXPECT_EQ(containers(id), "");
  EXPECT_EQ(leftGroups(id), std::vector<std::string>{});
}

TEST_F(ContainerJobTest, AnAllocationAboveItsMemoryIsOomKilledAndReportedSo) {
  api::JobSpec spec = containerSpec("dd if=/dev/zero of=/dev/null bs=256M count=1; echo survived");
  spec.resources.ram_mib = 64;
  int64_t id = submitSpecAsUser(spec);
  ASSERT_GT(id, 0);
  ASSERT_EQ(waitEnd(id), "OUT_OF_MEMORY") << job(id).dump();
  EXPECT_EQ(containers(id), "");
  EXPECT_EQ(leftGroups(id), std::vector<std::string>{});
}

TEST_F(ContainerJobTest, AMissingImageFailsAtOnceNamingTheImage) {
  api::JobSpec spec = containerSpec("true");
  spec.image = "localhost/gpool-no-such-image:1";
  int64_t id = submitSpecAsUser(spec);
  ASSERT_GT(id, 0);
  ASSERT_EQ(waitEnd(id), "FAILED") << job(id).dump();
  EXPECT_NE(job(id).value("reason", "").find("localhost/gpool-no-such-image:1"), std::string::npos)
      << job(id).dump();
  EXPECT_EQ(leftGroups(id), std::vector<std::string>{});
}

// The node's image cache (issue 23): an image missing from Podman's store is loaded from the
// archive in the agent's image directory on its first task, and later tasks find it in the
// store and load nothing; an archive Podman cannot load fails the job at once with a reason
// naming the image and the archive, as does a name the directory does not hold.
class ImageCacheTest : public ContainerJobTest {
 protected:
  std::vector<std::string> agentFlags() const override {
    std::vector<std::string> flags = ContainerJobTest::agentFlags();
    flags.insert(flags.end(), {"--image-dir", dir_.file("images")});
    return flags;
  }
};

TEST_F(ImageCacheTest, AnImageIsLoadedOnceFromTheNodesDirectoryAndABadArchiveIsRefused) {
  ASSERT_EQ(::mkdir(dir_.file("images").c_str(), 0755), 0);
  // The test's own archive (no registry is reachable here): the busybox image saved as an OCI
  // archive under a name of this test, which is then untagged so that the store lacks it.
  const std::string name =
      "gpool-cache-" + std::to_string(::getpid()) + "-" + std::to_string(tests_);
  const std::string image = "localhost/" + name + ":1";
  const std::string archive = dir_.file("images/" + name + "/1.tar");
  ASSERT_EQ(::mkdir(dir_.file("images/" + name).c_str(), 0755), 0);
  ASSERT_EQ(std::system(("podman tag " + std::string(kTestImage) + " " + image +
                         " && podman save -q --format oci-archive -o '" + archive + "' " + image +
                         " && podman rmi " + image + " >/dev/null")
                            .c_str()),
            0);
  ASSERT_NE(std::system(("podman image exists " + image).c_str()), 0);
  auto supervisorLog = [&](int64_t id) {
    return slurp(dir_.file("state/tasks/" + std::to_string(id) + ".0/supervisor.log"));
  };

  api::JobSpec spec = containerSpec("cat /etc/gpool-image");
  spec.image = image;
  int64_t first = submitSpecAsUser(spec);
  ASSERT_GT(first, 0);
  ASSERT_EQ(waitEnd(first), "COMPLETED") << job(first).dump() << supervisorLog(first);
  EXPECT_EQ(slurp(job(first)["allocations"][0].value("stdout_log", "")), "gpool-test-image\n");
  EXPECT_NE(supervisorLog(first).find("image " + image + " loaded from " + archive),
            std::string::npos)
      << supervisorLog(first);
  EXPECT_EQ(std::system(("podman image exists " + image).c_str()), 0);
  // The second task finds it in the store.
  int64_t second = submitSpecAsUser(spec);
  ASSERT_GT(second, 0);
  ASSERT_EQ(waitEnd(second), "COMPLETED") << job(second).dump() << supervisorLog(second);
  EXPECT_EQ(slurp(job(second)["allocations"][0].value("stdout_log", "")), "gpool-test-image\n");
  EXPECT_EQ(supervisorLog(second).find("loaded from"), std::string::npos) << supervisorLog(second);
  (void)!std::system(("podman rmi " + image + " >/dev/null 2>&1").c_str());

  // Not an image archive: refused, naming the image and the file; nothing is left.
  const std::string bad = "localhost/" + name + "-bad:1";
  const std::string bad_archive = dir_.file("images/" + name + "-bad/1.tar");
  ASSERT_EQ(::mkdir(dir_.file("images/" + name + "-bad").c_str(), 0755), 0);
  {
    std::ofstream out(bad_archive);
    out << "not an image\n";
  }
  spec.image = bad;
  int64_t refused = submitSpecAsUser(spec);
  ASSERT_GT(refused, 0);
  ASSERT_EQ(waitEnd(refused), "FAILED") << job(refused).dump();
  const std::string reason = job(refused).value("reason", "");
  EXPECT_NE(reason.find("image '" + bad + "': cannot load " + bad_archive), std::string::npos)
      << reason;
  EXPECT_NE(std::system(("podman image exists " + bad).c_str()), 0);
  EXPECT_EQ(leftGroups(refused), std::vector<std::string>{});

  // A name the directory does not hold (nor the store).
  spec.image = "localhost/" + name + "-absent:1";
  int64_t absent = submitSpecAsUser(spec);
  ASSERT_GT(absent, 0);
  ASSERT_EQ(waitEnd(absent), "FAILED") << job(absent).dump();
  EXPECT_NE(job(absent)
                .value("reason", "")
                .find("the node's image directory has no " +
                      dir_.file("images/" + name + "-absent/1.tar")),
            std::string::npos)
      << job(absent).dump();
}

TEST_F(ContainerJobTest, CancelAndTimeLimitLeaveNoContainerMountOrCgroup) {
  int64_t cancelled = submitSpecAsUser(containerSpec("echo up > up; exec sleep 1000"));
  api::JobSpec limited = containerSpec("exec sleep 1000");
  limited.time_limit_seconds = 2;
  int64_t timed_out = submitSpecAsUser(limited);
  ASSERT_GT(cancelled, 0);
  ASSERT_GT(timed_out, 0);
  ASSERT_TRUE(eventually([&] { return slurp(dir_.file("up")) == "up\n"; }));
  std::string name = containers(cancelled);
  ASSERT_EQ(name.rfind("gpool-" + std::to_string(cancelled) + ".0-", 0), 0u) << name;
  name.pop_back();
  // Its root file system, mounted by Podman.
  std::string rootfs =
      shellOutput("podman inspect --format '{{.GraphDriver.Data.MergedDir}}' " + name);
  ASSERT_GT(rootfs.size(), 1u);
  rootfs.pop_back();
  EXPECT_NE(slurp("/proc/self/mountinfo").find(rootfs), std::string::npos) << rootfs;
  EXPECT_FALSE(leftGroups(cancelled).empty());

  auto r = http_->post("/v1/jobs/" + std::to_string(cancelled) + "/cancel", "");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(waitEnd(cancelled), "CANCELLED") << job(cancelled).dump();
  EXPECT_EQ(waitEnd(timed_out), "TIMEOUT") << job(timed_out).dump();
  for (int64_t job_id : {cancelled, timed_out}) {
    EXPECT_EQ(containers(job_id), "") << job_id;
    EXPECT_EQ(leftGroups(job_id), std::vector<std::string>{}) << job_id;
  }
  EXPECT_EQ(slurp("/proc/self/mountinfo").find(rootfs), std::string::npos) << rootfs;
}

// A group's project directory (issue 23): made by the agent on the group's first job there,
// root:<gid>, setgid, mode 2770; $GPOOL_PROJECT_DIR in bare and container tasks, mounted into
// containers; files made in it belong to the group.
TEST_F(ContainerJobTest, AGroupsProjectDirectoryIsMadeSharedAndMounted) {
  const std::string project = dir_.file("projects/vision");
  const uint32_t gid = 54000 + static_cast<uint32_t>(::getpid() % 1000);
  auto user = http_->request(net::Method::kPut, std::string("/v1/users/") + kUser,
                             json{{"name", kUser}, {"uid", uid_}}.dump());
  ASSERT_TRUE(user.ok());
  ASSERT_EQ(user->status, 201) << user->body;
  auto made = http_->post(
      "/v1/groups",
      json{
          {"name", "gpool-proj-test"}, {"gid", gid}, {"project_dir", project}, {"members", {kUser}}}
          .dump());
  ASSERT_TRUE(made.ok());
  ASSERT_EQ(made->status, 201) << made->body;

  api::JobSpec bare;
  bare.name = "bare";
  bare.command = {"/bin/sh", "-c",
                  "echo $GPOOL_PROJECT_DIR > where; echo b > $GPOOL_PROJECT_DIR/bare"};
  bare.working_dir = dir_.path();
  int64_t first = submitSpecAsUser(bare);
  ASSERT_GT(first, 0);
  ASSERT_EQ(waitEnd(first), "COMPLETED") << job(first).dump();
  int64_t second = submitSpecAsUser(containerSpec("echo c > $GPOOL_PROJECT_DIR/ctr"));
  ASSERT_GT(second, 0);
  ASSERT_EQ(waitEnd(second), "COMPLETED") << job(second).dump();

  EXPECT_EQ(slurp(dir_.file("where")), project + "\n");
  struct stat st {};
  ASSERT_EQ(::stat(project.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 02770u);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_gid, gid);
  for (const char* name : {"bare", "ctr"}) {
    std::string file = project + "/" + name;
    ASSERT_EQ(::stat(file.c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_uid, uid_) << file;
    EXPECT_EQ(st.st_gid, gid) << file;  // setgid: the group's, not the user's own
  }
  EXPECT_EQ(slurp(project + "/ctr"), "c\n");
}

// `gpool shell` into a container job (issue 23): the command runs inside the job's container
// (podman exec) as the job's user, in its working directory and groups; only its owner or root
// enters it, and the agent itself refuses anyone else (not only the client).
TEST_F(ContainerJobTest, ShellEntersTheJobsContainerOnlyForItsOwner) {
  const char* kOther = "gpool-test-bob";
  std::string why = ensureUser(kOther);
  if (!why.empty()) GTEST_SKIP() << why;
  const passwd* other = ::getpwnam(kOther);
  ASSERT_NE(other, nullptr);
  const uid_t other_uid = other->pw_uid;
  const gid_t other_gid = other->pw_gid;
  int64_t id = submitSpecAsUser(containerSpec("echo up > up; exec sleep 1000"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(eventually([&] { return slurp(dir_.file("up")) == "up\n"; })) << job(id).dump();
  const std::string ref = std::to_string(id);

  Output o = gpoolAsUser({"shell", ref, "--", "sh", "-c",
                          "cat /etc/gpool-image; id -u; echo $GPOOL_JOB_ID; pwd; "
                          "grep memory /proc/self/cgroup; exit 7"});
  EXPECT_EQ(o.rc, 7) << o.err;
  std::istringstream lines(o.out);
  std::vector<std::string> l;
  for (std::string line; std::getline(lines, line);)
    l.push_back(line);
  ASSERT_EQ(l.size(), 5u) << o.out << o.err;
  EXPECT_EQ(l[0], "gpool-test-image");  // the image's file system, not the host's
  EXPECT_EQ(l[1], std::to_string(uid_));
  EXPECT_EQ(l[2], ref);
  EXPECT_EQ(l[3], dir_.path());
  EXPECT_NE(l[4].find(":/" + cgroup_parent_ + "/" + ref + ".0/"), std::string::npos) << l[4];

  // Root enters as the job's user; another user is refused by the CLI and by the agent.
  Output root = gpoolAs(0, 0, {"shell", ref, "--", "id", "-u"});
  EXPECT_EQ(root.rc, 0) << root.err;
  EXPECT_EQ(root.out, std::to_string(uid_) + "\n");
  Output bob = gpoolAs(other_uid, other_gid, {"shell", ref, "--", "true"});
  EXPECT_EQ(bob.rc, 4) << bob.err;
  const std::string exec = "{\"task\": \"" + ref + ".0\", \"exec\": [\"id\"]}\n";
  std::string refused =
      testing::rawRequestAs(other_uid, other_gid, dir_.file("state/shell.sock"), exec);
  EXPECT_NE(refused.find("only its owner or root may enter it"), std::string::npos) << refused;

  auto r = http_->post("/v1/jobs/" + ref + "/cancel", "");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(waitEnd(id), "CANCELLED") << job(id).dump();
  EXPECT_TRUE(eventually([&] { return containers(id).empty(); })) << containers(id);
}

// `gpool shell` on a real pseudo-terminal follows its window size (issue 23): the command
// starts with the terminal's size, and a resize during the session reaches it. A bare job's
// shell runs on the terminal itself; a container job's runs on the container's own terminal,
// which podman exec (started by the agent, outside the terminal's foreground) resizes only when
// the CLI passes the SIGWINCH on.
TEST_F(ContainerJobTest, ShellFollowsTheTerminalsWindowSizeInAContainerAndBare) {
  int64_t boxed = submitSpecAsUser(containerSpec("echo up > up-boxed; exec sleep 1000"));
  ASSERT_GT(boxed, 0);
  api::JobSpec bare_spec;
  bare_spec.name = "bare";
  bare_spec.command = {"/bin/sh", "-c", "echo up > up-bare; exec sleep 1000"};
  bare_spec.working_dir = dir_.path();
  int64_t bare = submitSpecAsUser(bare_spec);
  ASSERT_GT(bare, 0);
  ASSERT_TRUE(eventually([&] {
    return slurp(dir_.file("up-boxed")) == "up\n" && slurp(dir_.file("up-bare")) == "up\n";
  })) << job(boxed).dump()
      << job(bare).dump();

  for (const int64_t id : {boxed, bare}) {
    SCOPED_TRACE(id == boxed ? "container job" : "bare job");
    // The CLI as the test user, on the slave side of a new terminal that is its controlling
    // terminal (so the kernel sends it SIGWINCH), 30 rows by 100 columns.
    int master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    ASSERT_GE(master, 0);
    ASSERT_EQ(::grantpt(master), 0);
    ASSERT_EQ(::unlockpt(master), 0);
    const std::string slave_name = ::ptsname(master);
    winsize size{};
    size.ws_row = 30;
    size.ws_col = 100;
    ASSERT_EQ(::ioctl(master, TIOCSWINSZ, &size), 0);
    const std::string gpool = std::string(GPOOL_BINARY_DIR) + "/src/cli/gpool";
    const std::string ref = std::to_string(id);
    std::vector<std::string> args = {
        gpool,     "--socket", socket_,
        "shell",   ref,        "--",
        "/bin/sh", "-c",       "while read x; do busybox stty size; done"};
    std::vector<char*> argv;
    for (std::string& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setsid();
      int slave = ::open(slave_name.c_str(), O_RDWR);
      if (slave < 0 || ::ioctl(slave, TIOCSCTTY, 0) != 0) ::_exit(126);
      for (int i = 0; i < 3; ++i)
        ::dup2(slave, i);
      if (::chdir(dir_.path().c_str()) != 0 || ::setgroups(0, nullptr) != 0 ||
          ::setgid(gid_) != 0 || ::setuid(uid_) != 0) {
        ::_exit(126);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ASSERT_GT(pid, 0);
    // Sends a line to the command until what it printed holds `want` (it prints the size it
    // sees on each line it reads) or the deadline passes.
    std::string seen;
    auto sizeSeen = [&](const std::string& want) {
      return eventually([&] {
        (void)!::write(master, "\n", 1);
        for (;;) {
          pollfd p{master, POLLIN, 0};
          if (::poll(&p, 1, 100) <= 0) break;
          char buf[256];
          ssize_t n = ::read(master, buf, sizeof(buf));
          if (n <= 0) break;
          seen.append(buf, static_cast<size_t>(n));
        }
        return seen.find(want) != std::string::npos;
      });
    };
    EXPECT_TRUE(sizeSeen("30 100")) << seen;
    size.ws_row = 50;
    size.ws_col = 132;
    ASSERT_EQ(::ioctl(master, TIOCSWINSZ, &size), 0);
    EXPECT_TRUE(sizeSeen("50 132")) << seen;
    // End of input: the loop ends, and so does the CLI, with the command's code.
    (void)!::write(master, "\x04", 1);
    int status = 0;
    if (!eventually([&] { return ::waitpid(pid, &status, WNOHANG) == pid; })) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << " " << seen;
    ::close(master);
  }
  for (const int64_t id : {boxed, bare}) {
    auto r = http_->post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(waitEnd(id), "CANCELLED") << job(id).dump();
  }
}

// A container job preempted for a more important one (issue 23): its container gets SIGTERM
// through Podman and ends within the grace period, nothing of it is left, and the requeued
// attempt runs in a new container once the node is free again.
class ContainerPreemptionTest : public ContainerJobTest {
 protected:
  std::string extraSections() const override {
    return "[scheduler]\npreempt_min_run_time = \"1s\"\npreempt_delay = \"1s\"\n";
  }
};

TEST_F(ContainerPreemptionTest, APreemptedContainerStopsWithinGraceAndItsRequeueRunsAnew) {
  // A 20 s grace for the victim's level, set on the level (one stored without grace_time gets
  // [scheduler] preempt_grace, 2 minutes here).
  for (const auto& [name, priority, preemptible] :
       {std::tuple{"low", 10, true}, std::tuple{"high", 100, false}}) {
    auto put = http_->request(net::Method::kPut, std::string("/v1/qos/") + name,
                              json{{"name", name},
                                   {"priority", priority},
                                   {"preemptible", preemptible},
                                   {"grace_time", "20s"}}
                                  .dump());
    ASSERT_TRUE(put.ok());
    ASSERT_LT(put->status, 300) << put->body;
  }
  // The victim takes the node's eight GPUs, says when it starts and when it got SIGTERM.
  api::JobSpec victim = containerSpec(
      "trap 'echo term >> terms; exit 0' TERM; echo $$ >> starts; "
      "while :; do sleep 0.05; done");
  victim.resources.gpus_milli = 8000;
  victim.qos = "low";
  victim.preemptible = true;
  int64_t id = submitSpecAsUser(victim);
  ASSERT_GT(id, 0);
  auto starts = [&] {
    std::vector<pid_t> pids;
    std::istringstream in(slurp(dir_.file("starts")));
    for (long pid = 0; in >> pid;)
      pids.push_back(static_cast<pid_t>(pid));
    return pids;
  };
  // Container ids (any state) of the victim's task.
  auto ids = [&] {
    return shellOutput("podman ps -a --format '{{.ID}}' --filter label=gpool.task_dir=" +
                       dir_.file("state/tasks/" + std::to_string(id) + ".0"));
  };
  ASSERT_TRUE(eventually([&] { return starts().size() == 1; })) << job(id).dump();
  const pid_t first = starts()[0];
  const std::string first_id = ids();
  ASSERT_FALSE(first_id.empty());

  api::JobSpec preemptor;
  preemptor.name = "high";
  preemptor.command = {"/bin/sh", "-c", "echo ran > preemptor"};
  preemptor.working_dir = dir_.path();
  preemptor.resources.gpus_milli = 8000;
  preemptor.qos = "high";
  int64_t high = submitSpecAsUser(preemptor);
  ASSERT_GT(high, 0);
  ASSERT_EQ(waitEnd(high), "COMPLETED") << job(high).dump() << job(id).dump();
  // The victim ended on SIGTERM (its trap ran, long before the 20 s grace), before the
  // preemptor ran; its container is gone.
  EXPECT_EQ(slurp(dir_.file("terms")), "term\n");
  EXPECT_NE(::kill(first, 0), 0) << first;
  EXPECT_EQ(slurp(dir_.file("preemptor")), "ran\n");
  // Requeued, it runs again in a new container.
  ASSERT_TRUE(eventually([&] { return starts().size() == 2; })) << job(id).dump();
  json j = job(id);
  EXPECT_EQ(j.value("state", ""), "RUNNING") << j.dump();
  EXPECT_EQ(j.value("requeue_count", 0), 1) << j.dump();
  const std::string second_id = ids();
  EXPECT_FALSE(second_id.empty());
  EXPECT_NE(second_id, first_id);
  EXPECT_EQ(std::count(second_id.begin(), second_id.end(), '\n'), 1) << second_id;

  auto cancel = http_->post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
  ASSERT_TRUE(cancel.ok());
  EXPECT_EQ(waitEnd(id), "CANCELLED") << job(id).dump();
  EXPECT_TRUE(eventually([&] { return containers(id).empty(); })) << containers(id);
  EXPECT_TRUE(eventually([&] { return leftGroups(id).empty(); }));
}

// A slice inside a container (issue 23): the interposer is mounted read-only and named in the
// container's /etc/ld.so.preload, and the slice's region directory (reachable by the task's user
// only) is mounted, so the quota holds inside the container even for a program run with
// `env -u LD_PRELOAD`. The image is a root filesystem directory the test builds: busybox, the
// test's CUDA client and the host libraries it and the interposer need, and the fake libcuda
// and NVML (a simulated 16 GiB GPU whose state file is in the mounted working directory).
class SliceContainerTest : public ContainerJobTest {
 protected:
  static std::string interposer() {
    return std::string(GPOOL_BINARY_DIR) + "/src/vgpu/libgpool-vgpu.so";
  }
  std::vector<std::string> agentFlags() const override {
    std::vector<std::string> flags = ContainerJobTest::agentFlags();
    flags.insert(flags.end(), {"--interposer", interposer()});
    return flags;
  }
  void SetUp() override {
    if (::access(interposer().c_str(), R_OK) != 0) {
      GTEST_SKIP() << "no interposer built (no CUDA headers): " << interposer();
    }
    ContainerJobTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    const std::string bin = std::string(GPOOL_BINARY_DIR);
    const std::string client = bin + "/tests/vgpu/vgpu_client";
    const std::string fakes = bin + "/tests/fakes/lib";
    const std::string busybox =
        ::access("/bin/busybox", X_OK) == 0 ? "/bin/busybox" : "/usr/bin/busybox";
    // Every library the client and the interposer load, at its host path.
    std::string libs = shellOutput("ldd " + client + " " + interposer() + " " + fakes + "/*");
    ASSERT_FALSE(libs.empty()) << "ldd failed";
    std::string script = "set -e; r=" + rootfs_ + "; mkdir -p $r/bin $r/etc $r/tmp $r/fakes; cp " +
                         busybox + " $r/bin/busybox; for a in sh env cat echo mv; do ln -s " +
                         "busybox $r/bin/$a; done; cp " + client + " $r/bin/vgpu_client; cp " +
                         fakes + "/* $r/fakes/; chmod 1777 $r/tmp";
    std::istringstream words(libs);
    for (std::string w; words >> w;) {
      if (w.rfind("/lib", 0) == 0 || w.rfind("/usr/lib", 0) == 0) {
        script += "; mkdir -p $r$(dirname " + w + "); cp -L " + w + " $r" + w;
      }
    }
    ASSERT_EQ(std::system(("/bin/sh -c '" + script + "'").c_str()), 0) << script;
    ASSERT_EQ(::mkdir(work_.c_str(), 0777), 0);
    ASSERT_EQ(::chmod(work_.c_str(), 0777), 0);
  }
  std::string rootfs_ = dir_.file("rootfs");
  // The job's working directory: not the test's, which holds the agent's vgpu directory (the
  // region must reach the container through its own mount, not through the working one).
  std::string work_ = dir_.file("work");
};

TEST_F(SliceContainerTest, TheQuotaHoldsInsideTheContainerEvenWithoutLdPreload) {
  // A quarter of a GPU with 1 GiB: the task looks at its region, then fills the GPU 256 MiB at
  // a time until refused, once as is and once with LD_PRELOAD unset.
  const std::string w = work_ + "/";
  api::JobSpec spec = containerSpec(
      "cat /etc/ld.so.preload > " + w + "preload; vgpu_client - tamper \"$GPOOL_VGPU_REGIONS\" > " +
      w + "tamper; vgpu_client direct fill 256 1 > " + w + "fill; env -u LD_PRELOAD " +
      "vgpu_client direct fill 256 1 > " + w + "fill-unset");
  spec.image = rootfs_;
  spec.working_dir = work_;
  spec.resources.gpus_milli = 250;
  spec.resources.gpu_memory_mib = 1024;
  spec.env = {{"LD_LIBRARY_PATH", "/fakes"},
              {"GPOOL_FAKE_GPU_STATE", w + "fake-gpu-state"},
              {"GPOOL_FAKE_GPU_MEMORY_MIB", "16384"}};
  int64_t id = submitSpecAsUser(spec);
  ASSERT_GT(id, 0);
  ASSERT_EQ(waitEnd(id), "COMPLETED") << job(id).dump();
  const json j = job(id);
  const std::string err = slurp(j["allocations"][0].value("stderr_log", ""));
  EXPECT_EQ(slurp(w + "preload"), interposer() + "\n");
  // The region is reachable inside (its user's), its limits are not writable.
  const std::string tamper = slurp(w + "tamper");
  for (const char* line : {"read_limits ok\n", "write_limits EACCES\n", "read_usage ok\n",
                           "quota_bytes 1073741824\n"}) {
    EXPECT_NE(tamper.find(line), std::string::npos) << "missing '" << line << "' in\n"
                                                    << tamper << err;
  }
  // Four 256 MiB allocations, the fifth refused: with and without LD_PRELOAD (of 16 GiB).
  EXPECT_NE(slurp(w + "fill").find("allocated 4\nerrors 0\n"), std::string::npos)
      << slurp(w + "fill") << err;
  EXPECT_NE(slurp(w + "fill-unset").find("allocated 4\nerrors 0\n"), std::string::npos)
      << slurp(w + "fill-unset") << err;
  EXPECT_EQ(containers(id), "");
  EXPECT_EQ(leftGroups(id), std::vector<std::string>{});
}

TEST_F(ContainerJobTest, ARestartedAgentReadoptsARunningContainer) {
  int64_t id = submitSpecAsUser(
      containerSpec("echo up > up; while [ ! -e go ]; do sleep 0.05; done; echo after > out"));
  ASSERT_GT(id, 0);
  ASSERT_TRUE(eventually([&] { return slurp(dir_.file("up")) == "up\n"; }));
  ::kill(agent_.pid, SIGKILL);
  ::waitpid(agent_.pid, nullptr, 0);
  agent_.pid = -1;
  startAgent();
  ASSERT_GT(agent_.pid, 0);
  EXPECT_EQ(job(id).value("state", ""), "RUNNING");
  std::ofstream(dir_.file("go")) << "go\n";
  ASSERT_EQ(waitEnd(id), "COMPLETED") << job(id).dump();
  EXPECT_EQ(slurp(dir_.file("out")), "after\n");
  EXPECT_EQ(containers(id), "");
  EXPECT_EQ(leftGroups(id), std::vector<std::string>{});
}

// Issue 25: two gpoold with [ha] on one real PostgreSQL server and a real agent that knows both
// sockets (a first: the agent must follow the leader when a dies). The CLI's submissions know
// both too, the standby first (it answers 503 naming the leader, and the CLI goes there).
class HaPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = ensureUser(kUser);
    if (!why.empty()) GTEST_SKIP() << why;
    const passwd* pw = ::getpwnam(kUser);
    ASSERT_NE(pw, nullptr);
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    auto pg = store::testing::PgServer::start();
    ASSERT_TRUE(pg.ok()) << pg.status().toString();
    pg_ = std::move(pg).value();
    a_ = startController("a");
    ASSERT_TRUE(readUntil(a_, "ready"));
    b_ = startController("b");
    ASSERT_EQ(readLine(b_.out), "standby");
    agent_ = spawn(
        {std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-agent", "--node", "n1", "--unix-socket",
         socket("a") + "," + socket("b"), "--state-dir", dir_.file("state"), "--fake-fixture",
         std::string(GPOOL_SOURCE_DIR) + "/src/gpu/fixtures/8x-a100-sxm4-80gb-nvlink.json",
         "--supervisor", std::string(GPOOL_BINARY_DIR) + "/src/agent/gpool-supervisor",
         "--vgpu-dir", dir_.file("vgpu"), "--no-cgroups", "--cpus", "64"},
        false);
    ASSERT_GT(agent_.pid, 0);
    ASSERT_TRUE(eventually([&] { return nodeCount("a") == 1; }));
  }
  void TearDown() override {
    stopSubmitting();
    // Whichever controller leads takes the cancel; the other answers 503.
    for (const std::string name : {"a", "b"}) {
      Child& c = name == "a" ? a_ : b_;
      for (int64_t id : tickers_) {
        if (c.pid > 0) (void)client(name).post("/v1/jobs/" + std::to_string(id) + "/cancel", "");
      }
    }
    for (pid_t pid : task_pids_) {
      if (eventually([&] { return ::kill(pid, 0) != 0; })) continue;
      ADD_FAILURE() << "task " << pid << " outlived its job";
      ::kill(-pid, SIGKILL);
    }
    clients_.clear();
    if (agent_.pid > 0) {
      EXPECT_EQ(stop(agent_), 0);
    }
    if (a_.pid > 0) stop(a_);
    if (b_.pid > 0) stop(b_);
  }
  std::string socket(const std::string& name) { return dir_.file(name + ".sock"); }
  // [ha] lease: 2 s (fast tests), or $GPOOL_HA_LEASE for the long profile.
  static std::string lease() {
    const char* env = std::getenv("GPOOL_HA_LEASE");
    return env != nullptr && *env != '\0' ? env : "2s";
  }
  Child startController(const std::string& name) {
    std::string config = dir_.file(name + ".toml");
    std::ofstream(config) << "[controller]\nstore = \"" << pg_->conninfo() << "\"\n"
                          << "socket = \"" << socket(name) << "\"\n"
                          << "schedule_interval = \"1s\"\nheartbeat_interval = \"1s\"\n"
                          << "[ha]\nenabled = true\nlease = \"" << lease() << "\"\n"
                          << "[log]\nlevel = \"warn\"\n";
    return spawn({std::string(GPOOL_BINARY_DIR) + "/src/controller/gpoold", "--config", config},
                 true);
  }
  bool readUntil(Child& c, const std::string& prefix) {
    for (std::string line = readLine(c.out); !line.empty(); line = readLine(c.out)) {
      if (line.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }
  void killController(Child& c) {
    ::kill(c.pid, SIGKILL);
    ::waitpid(c.pid, nullptr, 0);
    if (c.out) ::fclose(c.out);
    c = Child{};
  }
  net::HttpClient& client(const std::string& name) {
    auto& c = clients_[name];
    if (!c) {
      c = std::make_unique<net::HttpClient>(net::ClientEndpoint::unixSocket(socket(name)),
                                            std::chrono::seconds(10));
    }
    return *c;
  }
  size_t nodeCount(const std::string& name) {
    auto r = client(name).get("/v1/nodes");
    if (!r.ok() || r->status != 200) return 0;
    return json::parse(r->body, nullptr, false).value("nodes", json::array()).size();
  }
  // `gpool submit` as the test user through both controllers' sockets (the standby's first);
  // the id when gpool acknowledged it (exit 0 and {"ids": [id]}), else -1.
  int64_t gpoolSubmit(const std::string& name, const std::string& command) {
    std::string prefix = dir_.file("submit-" + name);
    Child c = spawn({std::string(GPOOL_BINARY_DIR) + "/src/cli/gpool", "--socket",
                     socket("b") + "," + socket("a"), "submit", "--json", "--name", name, "--gpus",
                     "1", "--", "/bin/sh", "-c", command},
                    false, uid_, gid_, dir_.path(), prefix);
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    json j = json::parse(slurp(prefix + ".out"), nullptr, false);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !j.is_object() || !j.contains("ids") ||
        j["ids"].size() != 1) {
      std::lock_guard lock(mu_);
      last_refusal_ = slurp(prefix + ".err");
      return -1;
    }
    return j["ids"][0].get<int64_t>();
  }
  void addSubmission(const std::string& name, int64_t id) {
    std::lock_guard lock(mu_);
    submitted_.push_back({name, id});
  }
  // Steady submissions (5 a second at most) from a thread: job s-N appends "s-N" to the file `runs`
  // when it runs.
  void startSubmitting() {
    stop_submitting_ = false;
    submitter_ = std::thread([this, first = submitted_.size()] {
      for (size_t n = first; !stop_submitting_.load(); ++n) {
        std::string name = "s-" + std::to_string(n);
        int64_t id = gpoolSubmit(name, "echo " + name + " >> " + dir_.file("runs"));
        addSubmission(name, id);
        // A steady rate (not synchronisation): about what the agent's 7 free GPUs drain with
        // one scheduling pass a second, so that the queue does not grow without bound.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  void stopSubmitting() {
    stop_submitting_ = true;
    if (submitter_.joinable()) submitter_.join();
  }
  std::string lastRefusal() {
    std::lock_guard lock(mu_);
    return last_refusal_;
  }
  size_t acknowledged() {
    std::lock_guard lock(mu_);
    return std::count_if(submitted_.begin(), submitted_.end(),
                         [](const auto& s) { return s.second > 0; });
  }
  json jobs(const std::string& name) {
    auto r = client(name).get("/v1/jobs?limit=1000");
    if (!r.ok() || r->status != 200) return json::array();
    return json::parse(r->body, nullptr, false).value("jobs", json::array());
  }
  std::string state(const std::string& name, int64_t id) {
    auto r = client(name).get("/v1/jobs/" + std::to_string(id));
    if (!r.ok() || r->status != 200) return "";
    return json::parse(r->body, nullptr, false).value("state", "");
  }
  // A job that ticks "<pid> <ns>" into `file` every 50 ms until cancelled; returns its pid.
  pid_t startTicker(const std::string& file) {
    int64_t id = gpoolSubmit(
        "ticker", "while :; do echo \"$$ $(date +%s%N)\" >> " + file + "; sleep 0.05; done");
    EXPECT_GT(id, 0);
    if (id <= 0) return -1;
    tickers_.push_back(id);
    if (!eventually([&] { return ticks(file).size() == 1; })) return -1;
    pid_t pid = ticks(file).begin()->first;
    task_pids_.push_back(pid);
    return pid;
  }
  std::map<pid_t, std::vector<int64_t>> ticks(const std::string& file) {
    std::map<pid_t, std::vector<int64_t>> out;
    std::istringstream in(slurp(file));
    long pid = 0;
    long long ns = 0;
    while (in >> pid >> ns)
      out[static_cast<pid_t>(pid)].push_back(ns);
    return out;
  }
  static int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  static std::string nameOf(const json& job) {
    return job.value("spec", json::object()).value("name", "");
  }
  // Every acknowledged submission exists exactly once under its id, no name twice; each
  // submitted job ran at most once, and each that completed exactly once.
  void expectEverySubmissionOnce(const std::string& leader) {
    std::vector<std::pair<std::string, int64_t>> submitted;
    {
      std::lock_guard lock(mu_);
      submitted = submitted_;
    }
    std::set<std::string> ours;
    for (const auto& [name, id] : submitted)
      ours.insert(name);
    // Every submitted job that exists ends (they are `echo`).
    ASSERT_TRUE(eventually([&] {
      for (const json& j : jobs(leader)) {
        std::string s = j.value("state", "");
        if (ours.count(nameOf(j)) && (s == "PENDING" || s == "RUNNING")) return false;
      }
      return true;
    }));
    std::map<std::string, std::vector<json>> by_name;
    for (const json& j : jobs(leader))
      by_name[nameOf(j)].push_back(j);
    std::map<std::string, int> runs;
    std::istringstream in(slurp(dir_.file("runs")));
    for (std::string line; std::getline(in, line);)
      ++runs[line];
    size_t lost = 0;
    for (const auto& [name, id] : submitted) {
      const std::vector<json>& found = by_name[name];
      EXPECT_LE(found.size(), 1u) << name << " was stored " << found.size() << " times";
      EXPECT_LE(runs[name], 1) << name << " ran " << runs[name] << " times";
      if (id <= 0) continue;  // not acknowledged: may or may not be there
      if (found.size() != 1) {
        ADD_FAILURE() << name << " (job " << id << ") acknowledged, found " << found.size();
        ++lost;
        continue;
      }
      EXPECT_EQ(found[0].value("id", int64_t{0}), id) << name;
      EXPECT_EQ(found[0].value("state", ""), "COMPLETED") << found[0].dump();
      EXPECT_EQ(runs[name], 1) << name << " (COMPLETED) ran " << runs[name] << " times";
    }
    EXPECT_EQ(lost, 0u) << "acknowledged submissions missing after the takeover";
  }

  OpenTempDir dir_;
  std::unique_ptr<store::testing::PgServer> pg_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  Child a_;
  Child b_;
  Child agent_;
  std::map<std::string, std::unique_ptr<net::HttpClient>> clients_;
  std::vector<int64_t> tickers_;
  std::vector<pid_t> task_pids_;
  std::thread submitter_;
  std::atomic<bool> stop_submitting_{false};
  std::mutex mu_;
  std::vector<std::pair<std::string, int64_t>> submitted_;  // GUARDED_BY(mu_): name, id or -1
  std::string last_refusal_;                                // GUARDED_BY(mu_): gpool's stderr
};

// The leader is SIGKILLed while a job runs and submissions go on: b takes over, the agent
// follows it and reconciles, the running task never stops, every acknowledged submission is
// there exactly once and no job runs twice; the new leader schedules new work on the agent.
TEST_F(HaPoolTest, LeaderKilledUnderSubmissionsTheAgentFollowsAndNothingRunsTwice) {
  const std::string file = dir_.file("ticks");
  const pid_t task = startTicker(file);
  ASSERT_GT(task, 0);
  startSubmitting();
  ASSERT_TRUE(eventually([&] { return acknowledged() >= 3; }));

  killController(a_);
  const int64_t killed_ns = nowNs();
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(readUntil(b_, "ready"));
  const auto took = std::chrono::steady_clock::now() - killed;
  const size_t before = acknowledged();
  // Submissions go on through b; the agent reconnects to b, which runs them.
  ASSERT_TRUE(eventually([&] { return acknowledged() >= before + 3; })) << lastRefusal();
  std::cout << "takeover (lease 2 s): b ready "
            << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
            << " ms after the SIGKILL\n";
  stopSubmitting();
  expectEverySubmissionOnce("b");
  EXPECT_EQ(state("b", tickers_[0]), "RUNNING");
  // The first job never stopped and never ran twice: one pid, ticking after the takeover.
  ASSERT_TRUE(eventually([&] {
    auto t = ticks(file);
    return t.size() == 1 && !t[task].empty() && t[task].back() > killed_ns + 1'000'000'000;
  }));
  EXPECT_EQ(ticks(file).size(), 1u);
  EXPECT_EQ(::kill(task, 0), 0) << "the task stopped";
}

// Both controllers SIGKILLed at once and started again together: one leads, nothing
// acknowledged is lost, the running task goes on under the agent, which follows the new leader.
TEST_F(HaPoolTest, BothControllersRestartedTogetherLoseNothing) {
  const std::string file = dir_.file("ticks");
  const pid_t task = startTicker(file);
  ASSERT_GT(task, 0);
  startSubmitting();
  ASSERT_TRUE(eventually([&] { return acknowledged() >= 5; }));
  stopSubmitting();
  killController(a_);
  killController(b_);
  const int64_t killed_ns = nowNs();
  a_ = startController("a");
  b_ = startController("b");
  // Whichever takes the lease (after the old one lapses) becomes ready; the other stands by.
  std::string leader;
  ASSERT_TRUE(eventually([&] {
    for (const std::string name : {"a", "b"}) {
      auto r = client(name).get("/v1/nodes");
      if (r.ok() && r->status == 200) leader = name;
    }
    return !leader.empty();
  }));
  ASSERT_TRUE(eventually([&] { return nodeCount(leader) == 1; }));
  startSubmitting();  // more work, through whichever leads
  size_t before = acknowledged();
  ASSERT_TRUE(eventually([&] { return acknowledged() >= before + 3; })) << lastRefusal();
  stopSubmitting();
  expectEverySubmissionOnce(leader);
  EXPECT_EQ(state(leader, tickers_[0]), "RUNNING");
  ASSERT_TRUE(eventually([&] {
    auto t = ticks(file);
    return t.size() == 1 && !t[task].empty() && t[task].back() > killed_ns + 1'000'000'000;
  }));
  EXPECT_EQ(::kill(task, 0), 0) << "the task stopped";
}

// The long profile (scripts/ha-takeovers.sh; skipped unless GPOOL_HA_TAKEOVERS is set): the
// leader SIGKILLed GPOOL_HA_TAKEOVERS times under steady submissions and a running job, each
// time started again as a standby. Prints p50/max of the time from the SIGKILL to the new
// leader's `ready` and to the end of a job submitted right after the SIGKILL (the CLI finds the
// new leader, which places it on the agent once the agent has followed). The same checks as
// above, once at the end.
class HaTakeoverProfileTest : public HaPoolTest {
 protected:
  void SetUp() override {
    const char* n = std::getenv("GPOOL_HA_TAKEOVERS");
    if (n == nullptr || std::atoi(n) <= 0) {
      GTEST_SKIP() << "the long profile: GPOOL_HA_TAKEOVERS=20 (scripts/ha-takeovers.sh)";
    }
    takeovers_ = std::atoi(n);
    HaPoolTest::SetUp();
  }
  int takeovers_ = 0;
};

TEST_F(HaTakeoverProfileTest, RepeatedTakeoversUnderLoad) {
  const int takeovers = takeovers_;
  const std::string file = dir_.file("ticks");
  const pid_t task = startTicker(file);
  ASSERT_GT(task, 0);
  startSubmitting();
  std::vector<double> ready_ms;
  std::vector<double> served_ms;
  std::string leader = "a";
  int64_t last_kill_ns = 0;
  for (int i = 0; i < takeovers; ++i) {
    const std::string next = leader == "a" ? "b" : "a";
    Child& old_leader = leader == "a" ? a_ : b_;
    Child& standby = leader == "a" ? b_ : a_;
    killController(old_leader);
    last_kill_ns = nowNs();
    const auto killed = std::chrono::steady_clock::now();
    auto since = [&] {
      return static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::steady_clock::now() - killed)
                                     .count());
    };
    // A submission right after the SIGKILL, from another thread: the CLI looks for the leader
    // while this thread times the standby's `ready`.
    const std::string probe = "probe-" + std::to_string(i);
    std::future<int64_t> submitted = std::async(std::launch::async, [&] {
      return gpoolSubmit(probe, "echo " + probe + " >> " + dir_.file("runs"));
    });
    ASSERT_TRUE(readUntil(standby, "ready"));
    ready_ms.push_back(since());
    const int64_t id = submitted.get();
    addSubmission(probe, id);
    ASSERT_GT(id, 0) << lastRefusal();
    ASSERT_TRUE(eventually([&] { return state(next, id) == "COMPLETED"; }))
        << "takeover " << i << ": " << client(next).get("/v1/jobs/" + std::to_string(id))->body
        << "\n"
        << client(next).get("/v1/nodes")->body;
    served_ms.push_back(since());
    old_leader = startController(leader);
    ASSERT_TRUE(readUntil(old_leader, "standby"));
    leader = next;
  }
  stopSubmitting();
  auto summary = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return "p50 " + std::to_string(static_cast<int64_t>(v[(v.size() - 1) / 2])) + " ms, max " +
           std::to_string(static_cast<int64_t>(v.back())) + " ms";
  };
  std::cout << takeovers << " takeovers (lease " << lease() << ", " << acknowledged()
            << " acknowledged submissions): new leader ready after the SIGKILL: "
            << summary(ready_ms)
            << "; a job submitted right after the SIGKILL completed: " << summary(served_ms)
            << "\n";
  expectEverySubmissionOnce(leader);
  EXPECT_EQ(state(leader, tickers_[0]), "RUNNING");
  ASSERT_TRUE(eventually([&] {
    auto t = ticks(file);
    return t.size() == 1 && !t[task].empty() && t[task].back() > last_kill_ns + 1'000'000'000;
  }));
  EXPECT_EQ(::kill(task, 0), 0) << "the task stopped";
}

// The December trial's `env -u LD_PRELOAD prog` inside a slice job took 15 GiB against a 4 GiB
// quota. The interposer cannot stop a program that does not load it; the agent's backstop,
// which watches the GPU's processes through NVML, ends the task OUT_OF_MEMORY and says why.
TEST_F(SliceEnforcementTest, ATaskThatShedsTheInterposerIsEndedOutOfMemory) {
  // The node says it enforces slices: the interposer loads and the backstop ends tasks.
  auto nodes = http_->get("/v1/nodes");
  ASSERT_TRUE(nodes.ok());
  json slices = json::parse(nodes->body)["nodes"][0]["slices"];
  EXPECT_EQ(slices["enforced"], true) << slices;

  const std::string out = dir_.file("hold");
  int64_t id = submitAsUser("env -u LD_PRELOAD " + client() + " direct hold 3072 > " + out, 250,
                            fakeGpuEnv(), 1024);
  ASSERT_GT(id, 0);
  ASSERT_TRUE(waitState(id, "OUT_OF_MEMORY")) << job(id).dump() << "\n" << slurp(out);
  // It did get past the interposer: the fake driver gave it all 3 GiB.
  EXPECT_EQ(slurp(out), "held_mib 3072\n");
  const std::string reason = job(id).value("reason", "");
  for (const char* part : {"held 3", "its quota is 1024 MiB", "tolerance 256 MiB", "backstop"}) {
    EXPECT_NE(reason.find(part), std::string::npos) << "'" << part << "' not in: " << reason;
  }
}

}  // namespace
}  // namespace gpool::controller
