#include "cli/up_command.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/agent_config.h"
#include "agent/cgroup.h"
#include "agent/launcher.h"
#include "api/job_spec.h"
#include "api/user.h"
#include "cli/up_config.h"
#include "common/clock.h"
#include "common/status.h"
#include "controller/controller_config.h"
#include "gpu/backend_factory.h"
#include "net/client.h"
#include "net/http.h"

namespace gpool::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kDefaultFixture[] = "8x-a100-sxm4-80gb-nvlink.json";

struct UpArgs {
  std::string dir;
  int servers = 2;
  std::string fixture = kDefaultFixture;
  bool simulate = false;
  bool demo = false;
  bool cgroups = false;
  bool status = false;
  bool ha = false;  // two controllers on a PostgreSQL server of the pool's own (docs/ha.md)
  int timeout_s = 30;
  std::vector<std::string> sets;  // --set KEY=VALUE, in order (a later one wins)
};

struct DownArgs {
  std::string dir;
  bool purge = false;
  int timeout_s = 30;
};

// Ends the command with `s`'s message and exit code (the CLI's exit path).
[[noreturn]] void fail(const Status& s) {
  std::fprintf(stderr, "gpool: %s\n", s.message().c_str());
  throw CLI::RuntimeError(exitCodeFor(s.code()));
}

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string selfDir() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  return fs::path(std::string(buf, static_cast<size_t>(n))).parent_path().string();
}

bool isExecutableFile(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// A process is alive when /proc knows it and it is not a zombie. `exe`, when given, must be the
// program it runs (guards against a recorded pid reused by another program).
bool processAlive(pid_t pid, const std::string& exe = "") {
  if (pid <= 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  char state = text[paren + 2];
  if (state == 'Z' || state == 'X') return false;
  if (exe.empty()) return true;
  char buf[4096];
  std::string link = "/proc/" + std::to_string(pid) + "/exe";
  ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return true;  // not ours to read (another user's process): trust the pid
  std::string actual(buf, static_cast<size_t>(n));
  return actual == exe || actual == exe + " (deleted)";
}

std::string tailOf(const std::string& path, size_t max_lines = 15) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    lines.push_back(line);
    if (lines.size() > max_lines) lines.erase(lines.begin());
  }
  std::string out;
  for (const std::string& l : lines)
    out += "  | " + l + "\n";
  return out;
}

// Starts `argv` in its own session with stdin from /dev/null and stdout/stderr appended to
// `log_path`, under `umask_value`. Fails when the program cannot be executed (reported through a
// close-on-exec pipe).
Result<pid_t> spawnDetached(const std::vector<std::string>& argv, const std::string& log_path,
                            mode_t umask_value) {
  int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log < 0) return Status::ioError("cannot open " + log_path + ": " + std::strerror(errno));
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    ::close(log);
    return Status::ioError(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    ::close(report[0]);
    ::close(report[1]);
    return Status::ioError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setsid();
    ::umask(umask_value);
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execv(args[0], args.data());
    int err = errno;
    ssize_t ignored = ::write(report[1], &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  }
  ::close(log);
  ::close(report[1]);
  int err = 0;
  ssize_t n = ::read(report[0], &err, sizeof err);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof err)) {
    ::waitpid(pid, nullptr, 0);
    return Status::ioError("cannot run " + argv[0] + ": " + std::strerror(err));
  }
  return pid;
}

// Calls `check` every 100 ms until it says yes, `timeout_s` runs out, or one of `children`
// (processes this command started) exits.
Status waitUntil(const std::function<bool()>& check, int timeout_s, const std::string& what,
                 const std::vector<std::pair<pid_t, std::string>>& children) {
  const auto deadline = realClock().monotonic() + std::chrono::seconds(timeout_s);
  for (;;) {
    if (check()) return Status::ok();
    for (const auto& [pid, log] : children) {
      int ws = 0;
      if (::waitpid(pid, &ws, WNOHANG) == pid) {
        return Status::unavailable(what + ": process " + std::to_string(pid) + " exited (" +
                                   (WIFEXITED(ws) ? "status " + std::to_string(WEXITSTATUS(ws))
                                                  : "signal " + std::to_string(WTERMSIG(ws))) +
                                   "); the end of " + log + ":\n" + tailOf(log));
      }
    }
    if (realClock().monotonic() >= deadline) {
      std::string logs;
      for (const auto& child : children)
        logs += " " + child.second;
      return Status::deadlineExceeded(what + ": not done after " + std::to_string(timeout_s) +
                                      " s (--timeout); see" + logs);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Result<json> getJson(net::HttpClient& client, const std::string& target) {
  GPOOL_ASSIGN_OR_RETURN(net::Response r, client.get(target));
  json body = json::parse(r.body, nullptr, false);
  if (r.status != 200 || body.is_discarded()) {
    return Status::unavailable("GET " + target + " answered " + std::to_string(r.status) + ": " +
                               r.body);
  }
  return body;
}

// The nodes of `names` the controller lists as up (any state but DOWN).
size_t nodesUp(net::HttpClient& client, const std::vector<std::string>& names) {
  Result<json> nodes = getJson(client, "/v1/nodes");
  if (!nodes.ok() || !nodes->contains("nodes")) return 0;
  size_t up = 0;
  for (const json& n : (*nodes)["nodes"]) {
    std::string name = n.value("name", "");
    if (n.value("state", "DOWN") == "DOWN") continue;
    if (std::find(names.begin(), names.end(), name) != names.end()) ++up;
  }
  return up;
}

std::string hostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

struct PoolFile {
  std::string socket;
  std::string dashboard;  // "http://127.0.0.1:PORT/" (no token); empty if gpoold serves none
  bool simulated = true;
  pid_t gpoold = -1;
  std::string gpoold_exe;
  std::vector<std::pair<std::string, pid_t>> agents;  // node, pid
  std::string agent_exe;
  // --ha: the second controller, and the PostgreSQL server both use (pg_ctl, its data folder,
  // run as the postgres user when gpool up ran as root).
  pid_t standby = -1;
  std::string standby_socket;
  std::string standby_dashboard;  // the second controller's own (another port)
  std::string pg_ctl;
  std::string pg_data;
  bool pg_as_postgres = false;
};

json toJson(const PoolFile& p) {
  json agents = json::array();
  for (const auto& [node, pid] : p.agents)
    agents.push_back({{"node", node}, {"pid", pid}});
  json j = {{"socket", p.socket},         {"simulated", p.simulated}, {"gpoold_pid", p.gpoold},
            {"gpoold_exe", p.gpoold_exe}, {"agents", agents},         {"agent_exe", p.agent_exe},
            {"dashboard", p.dashboard}};
  if (!p.standby_socket.empty()) {
    j["standby_pid"] = p.standby;
    j["standby_socket"] = p.standby_socket;
    j["standby_dashboard"] = p.standby_dashboard;
    j["pg_ctl"] = p.pg_ctl;
    j["pg_data"] = p.pg_data;
    j["pg_as_postgres"] = p.pg_as_postgres;
  }
  return j;
}

Result<PoolFile> readPoolFile(const std::string& dir) {
  const std::string path = dir + "/pool.json";
  std::ifstream in(path);
  if (!in) return Status::notFound("no pool is up in " + dir + " (no " + path + ")");
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status::invalidArgument(path + ": not valid JSON; remove it if no pool runs");
  }
  PoolFile p;
  try {
    p.socket = j.at("socket").get<std::string>();
    p.simulated = j.at("simulated").get<bool>();
    p.gpoold = j.at("gpoold_pid").get<pid_t>();
    p.gpoold_exe = j.value("gpoold_exe", "");
    p.agent_exe = j.value("agent_exe", "");
    p.dashboard = j.value("dashboard", "");
    for (const json& a : j.at("agents"))
      p.agents.emplace_back(a.at("node").get<std::string>(), a.at("pid").get<pid_t>());
    p.standby = j.value("standby_pid", pid_t{-1});
    p.standby_socket = j.value("standby_socket", "");
    p.standby_dashboard = j.value("standby_dashboard", "");
    p.pg_ctl = j.value("pg_ctl", "");
    p.pg_data = j.value("pg_data", "");
    p.pg_as_postgres = j.value("pg_as_postgres", false);
  } catch (const json::exception& e) {
    return Status::invalidArgument(path + ": " + e.what());
  }
  return p;
}

Status writePoolFile(const std::string& dir, const PoolFile& p) {
  const std::string path = dir + "/pool.json";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << toJson(p).dump(2) << "\n";
    if (!out) return Status::ioError("cannot write " + tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::ioError("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return Status::ok();
}

// Stops `pid` with SIGTERM, then SIGKILL after `timeout_s`. True when it is gone.
bool stopProcess(pid_t pid, const std::string& exe, int timeout_s) {
  if (!processAlive(pid, exe)) return true;
  ::kill(pid, SIGTERM);
  const auto deadline = realClock().monotonic() + std::chrono::seconds(timeout_s);
  while (processAlive(pid, exe)) {
    int ws = 0;
    ::waitpid(pid, &ws, WNOHANG);  // our own child (a failed `up`): reap it
    if (realClock().monotonic() >= deadline) {
      ::kill(pid, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      ::waitpid(pid, &ws, WNOHANG);
      return !processAlive(pid, exe);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// Whether `socket`'s controller leads (a standby answers 503).
bool leads(const std::string& socket) {
  net::HttpClient client(net::ClientEndpoint::unixSocket(socket), std::chrono::seconds(5));
  Result<net::Response> r = client.get("/v1/health");
  return r.ok() && r->status == 200;
}

// The socket of the controller that leads now ("" when none does): with --ha either one.
std::string leaderSocket(const PoolFile& p) {
  if (processAlive(p.gpoold, p.gpoold_exe) && leads(p.socket)) return p.socket;
  if (!p.standby_socket.empty() && processAlive(p.standby, p.gpoold_exe) &&
      leads(p.standby_socket)) {
    return p.standby_socket;
  }
  return "";
}

// The newest /usr/lib/postgresql/<version>/bin holding initdb and pg_ctl ("" when none).
std::string postgresBinDir() {
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const int version = std::atoi(entry.path().filename().c_str());
    const fs::path bin = entry.path() / "bin";
    if (version > best_version && fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl")) {
      best_version = version;
      best = bin.string();
    }
  }
  return best;
}

// Runs `argv` (as the postgres user when `as_postgres`), its output appended to `log`; Ok when
// it exits 0.
Status runPostgresTool(std::vector<std::string> argv, bool as_postgres, const std::string& log) {
  if (as_postgres) argv.insert(argv.begin(), {"/usr/sbin/runuser", "-u", "postgres", "--"});
  Result<pid_t> pid = spawnDetached(argv, log, 077);
  if (!pid.ok()) return pid.status();
  int ws = 0;
  ::waitpid(*pid, &ws, 0);
  if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
    return Status::unavailable(argv[as_postgres ? 4 : 0] + " failed; the end of " + log + ":\n" +
                               tailOf(log));
  }
  return Status::ok();
}

// --ha: a PostgreSQL server of the pool's own in <dir>/postgres (initdb on the first `up`),
// listening on a Unix socket in that folder only (no TCP port; mode 0700, so only its owner and
// root connect). Fills p's pg_* fields; the libpq connection string of its database.
Result<std::string> startPostgres(const std::string& dir, PoolFile* p) {
  const std::string bin = postgresBinDir();
  if (bin.empty()) {
    return Status::failedPrecondition(
        "--ha needs PostgreSQL's server programs (initdb, pg_ctl under /usr/lib/postgresql/*/bin): "
        "install the Debian package `postgresql`");
  }
  const std::string root = dir + "/postgres";
  p->pg_ctl = bin + "/pg_ctl";
  p->pg_data = root + "/data";
  p->pg_as_postgres = ::geteuid() == 0;
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) return Status::ioError("cannot create " + root + ": " + ec.message());
  ::chmod(root.c_str(), 0700);
  if (p->pg_as_postgres) {
    // PostgreSQL refuses to run as root.
    const passwd* pw = ::getpwnam("postgres");
    if (pw == nullptr) {
      return Status::failedPrecondition(
          "--ha as root runs PostgreSQL as the `postgres` user, and there is none: install the "
          "Debian package `postgresql`");
    }
    if (::chown(root.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      return Status::ioError("cannot chown " + root + " to postgres: " + std::strerror(errno));
    }
  }
  // The tools' output apart from the server's log, which pg_ctl opens as the server's user.
  const std::string log = root + "/tools.log";
  if (!fs::exists(p->pg_data + "/PG_VERSION")) {
    GPOOL_RETURN_IF_ERROR(runPostgresTool({bin + "/initdb", "--no-sync", "-A", "trust", "-U",
                                           "gpool", "-E", "UTF8", "--locale=C", "-D", p->pg_data},
                                          p->pg_as_postgres, log));
  }
  GPOOL_RETURN_IF_ERROR(runPostgresTool(
      {p->pg_ctl, "-D", p->pg_data, "-o", "-k " + root + " -c listen_addresses=", "-w", "-t", "60",
       "-l", root + "/server.log", "start"},
      p->pg_as_postgres, log));
  return "host=" + root + " port=5432 user=gpool dbname=postgres";
}

Status stopPostgres(const PoolFile& p) {
  if (p.pg_ctl.empty() || !fs::exists(p.pg_data + "/postmaster.pid")) return Status::ok();
  return runPostgresTool({p.pg_ctl, "-D", p.pg_data, "-m", "fast", "-w", "stop"}, p.pg_as_postgres,
                         fs::path(p.pg_data).parent_path().string() + "/tools.log");
}

void printStatus(const PoolFile& p, const std::string& dir) {
  bool ctl_up = processAlive(p.gpoold, p.gpoold_exe);
  std::printf("pool in %s (%s)\n", dir.c_str(), p.simulated ? "simulated GPUs" : "real GPUs");
  const std::string leader = p.standby_socket.empty() ? p.socket : leaderSocket(p);
  auto role = [&](const std::string& socket) {
    return p.standby_socket.empty() ? "" : leader == socket ? " (leader)" : " (standby)";
  };
  std::printf("  gpoold       pid %-8d %s   socket %s%s\n", p.gpoold,
              ctl_up ? "running" : "STOPPED", p.socket.c_str(), ctl_up ? role(p.socket) : "");
  if (!p.standby_socket.empty()) {
    const bool up = processAlive(p.standby, p.gpoold_exe);
    std::printf("  gpoold       pid %-8d %s   socket %s%s\n", p.standby, up ? "running" : "STOPPED",
                p.standby_socket.c_str(), up ? role(p.standby_socket) : "");
    std::printf("  postgresql   %s\n", p.pg_data.c_str());
  }
  // With --ha, the dashboard of the controller that leads (each serves its own port).
  const std::string& dashboard =
      !p.standby_socket.empty() && leader == p.standby_socket ? p.standby_dashboard : p.dashboard;
  if (!dashboard.empty()) {
    std::printf("  dashboard    %s (sign in with an API token: gpool token create)\n",
                dashboard.c_str());
  }
  for (const auto& [node, pid] : p.agents) {
    std::printf("  gpool-agent  pid %-8d %s   node %s\n", pid,
                processAlive(pid, p.agent_exe) ? "running" : "STOPPED", node.c_str());
  }
  if (leader.empty() || (p.standby_socket.empty() && !ctl_up)) return;
  net::HttpClient client(net::ClientEndpoint::unixSocket(leader), std::chrono::seconds(5));
  Result<json> nodes = getJson(client, "/v1/nodes");
  if (!nodes.ok()) return;
  for (const json& n : nodes->value("nodes", json::array())) {
    size_t gpus = n.contains("gpus") ? n["gpus"].size() : 0;
    std::string model = gpus ? n["gpus"][0].value("model", "?") : "-";
    // The fake backend already names its models "... (simulated)".
    bool simulated = gpus && n["gpus"][0].value("simulated", false) &&
                     model.find("simulated") == std::string::npos;
    std::printf("  node %-16s %-10s %zu x %s%s\n", n.value("name", "?").c_str(),
                n.value("state", "?").c_str(), gpus, model.c_str(),
                simulated ? " (simulated)" : "");
  }
}

// The port gpoold printed as "http 127.0.0.1:PORT" in its log, reading from `offset` (the log's
// size before this gpoold started: the log keeps earlier runs' lines); -1 if none.
int httpPortFromLog(const std::string& log_path, std::uintmax_t offset) {
  std::ifstream in(log_path);
  in.seekg(static_cast<std::streamoff>(offset));
  std::string line;
  const std::string prefix = "http 127.0.0.1:";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) {
      if (in.eof()) return -1;  // no newline yet: the line may still be being written
      try {
        return std::stoi(line.substr(prefix.size()));
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  return -1;
}

// A fresh API token for whoever runs `gpool up`, for the dashboard link. Root's pool makes root an
// admin record first when it has none (a token carries the role of its user's record; root over
// the socket is an admin without one), so that the dashboard can drain servers and cancel any
// job. Returns the token text, or the reason there is none.
Result<std::string> dashboardToken(net::HttpClient& client) {
  if (::geteuid() == 0) {
    Result<net::Response> existing = client.get("/v1/users/root");
    if (existing.ok() && existing->status == 404) {
      api::User root;
      root.name = "root";
      root.uid = 0;
      root.role = api::Role::kAdmin;
      Result<net::Response> made =
          client.request(net::Method::kPut, "/v1/users/root", api::toJson(root).dump());
      if (!made.ok()) return made.status();
      if (made->status >= 300) return Status::internal("cannot make root an admin: " + made->body);
    }
  }
  Result<net::Response> r =
      client.post("/v1/tokens", json{{"name", "dashboard (gpool up)"}}.dump());
  if (!r.ok()) return r.status();
  json body = json::parse(r->body, nullptr, false);
  if (r->status != 201 || !body.is_object() || !body.contains("token")) {
    return Status::internal("cannot create an API token: " + r->body);
  }
  return body["token"].get<std::string>();
}

// The demo's job mix, submitted as whoever runs `gpool up --demo`: whole GPUs, slices, a
// multi-GPU job, an array, a job that fails, one that finishes at once, one that asks for more
// than any server has (refused at submission, with the reason) and, in root's demo, one held back
// by its user's quota.
struct DemoJob {
  std::string name;
  uint32_t gpus_milli;
  uint64_t gpu_memory_mib;
  std::string script;
  int64_t time_limit_s;
  std::string array;
};

std::vector<DemoJob> demoJobs() {
  return {
      {"train-resnet50", 2000, 0, "echo epoch 1; sleep 1800", 4 * 3600, ""},
      {"finetune-llama", 4000, 0, "echo loading weights; sleep 3600", 8 * 3600, ""},
      {"notebook", 250, 20 * 1024, "echo jupyter on :8888; sleep 7200", 2 * 3600, ""},
      {"hparam-sweep", 500, 0, "echo trial $GPOOL_ARRAY_TASK_ID; sleep 900", 3600, "0-7%4"},
      {"inference", 100, 8 * 1024, "echo serving; sleep 3600", 3600, ""},
      {"unit-test", 1000, 0, "echo all tests passed", 600, ""},
      {"broken-run", 1000, 0, "echo CUDA error: device-side assert >&2; exit 3", 600, ""},
      {"too-big", 16000, 0, "sleep 60", 3600, ""},
      // The third demo user's quota caps them at 2 GPUs at once (demoQuota): this one waits.
      {"over-quota", 4000, 0, "echo never starts; sleep 60", 3600, ""},
  };
}

// Root's demo gives its third user a record and a quota of 2 GPUs at once, so the pool shows a
// job held back by a quota (AssocMaxGpuPerUser) beside the running ones. Prints what it did.
bool demoQuota(const std::string& socket, const std::string& user) {
  struct passwd* pw = ::getpwnam(user.c_str());
  if (pw == nullptr) return false;
  api::User record;
  record.name = user;
  record.uid = pw->pw_uid;
  api::Quota quota;
  quota.max_gpus_milli = 2000;
  net::HttpClient client(net::ClientEndpoint::unixSocket(socket), std::chrono::seconds(10));
  Result<net::Response> made =
      client.request(net::Method::kPut, "/v1/users/" + user, api::toJson(record).dump());
  if (made.ok() && (made->status == 200 || made->status == 201)) {
    made = client.request(net::Method::kPut, "/v1/quotas/user/" + user, api::toJson(quota).dump());
  }
  if (!made.ok() || made->status >= 300) {
    std::printf("  (no demo quota for %s: %s)\n", user.c_str(),
                made.ok() ? made->body.c_str() : made.status().message().c_str());
    return false;
  }
  std::printf("  quota: %s may hold 2 GPUs at once (gpool quota show --user %s)\n", user.c_str(),
              user.c_str());
  return true;
}

// Submits one demo job over `socket` and prints what became of it.
void submitOne(const std::string& socket, const DemoJob& d, const std::string& home,
               const std::string& as_user) {
  api::JobSpec spec;
  spec.name = d.name;
  spec.command = {"/bin/sh", "-c", d.script};
  spec.working_dir = home;
  spec.resources.gpus_milli = d.gpus_milli;
  spec.resources.gpu_memory_mib = d.gpu_memory_mib;
  spec.time_limit_seconds = d.time_limit_s;
  if (!d.array.empty()) {
    Result<api::ArraySpec> array = api::parseArraySpec(d.array);
    if (array.ok()) spec.array = *array;
  }
  net::HttpClient client(net::ClientEndpoint::unixSocket(socket), std::chrono::seconds(10));
  Result<net::Response> r = client.post("/v1/jobs", api::toJson(spec).dump());
  if (!r.ok()) {
    std::string hint;
    if (r.status().message().find("Permission denied") != std::string::npos) {
      // Root's demo submits as the demo users, who must be able to enter every folder above
      // the socket; a private --dir (or GPOOL_UP_DIR) such as one under /root stops them.
      hint = " (" + as_user + " cannot reach " + socket +
             ": give the pool a --dir that every user can enter, such as the default " +
             "/var/lib/gpool/up)";
    }
    std::printf("  %-16s %-18s not submitted: %s%s\n", d.name.c_str(), as_user.c_str(),
                r.status().message().c_str(), hint.c_str());
    return;
  }
  json body = json::parse(r->body, nullptr, false);
  if (r->status == 201 && body.contains("ids")) {
    std::string ids;
    for (const json& id : body["ids"])
      ids += (ids.empty() ? "" : ",") + std::to_string(id.get<int64_t>());
    std::printf("  %-16s %-18s submitted as job %s\n", d.name.c_str(), as_user.c_str(),
                ids.c_str());
  } else {
    std::string message = body.is_object() && body.contains("error")
                              ? body["error"].value("message", r->body)
                              : r->body;
    std::printf("  %-16s %-18s refused (HTTP %d): %s\n", d.name.c_str(), as_user.c_str(), r->status,
                message.c_str());
  }
}

// Root's pool runs tasks as real users, never as root: the demo creates three accounts
// (useradd) and submits each job as one of them, from a child that has become that user, so the
// controller sees them through the socket's peer credentials like any local user.
std::vector<std::string> demoUsers() {
  std::vector<std::string> users;
  for (const char* name : {"gpool-demo-alice", "gpool-demo-bob", "gpool-demo-carol"}) {
    if (::getpwnam(name) == nullptr) {
      pid_t pid = ::fork();
      if (pid == 0) {
        int null_fd = ::open("/dev/null", O_WRONLY);
        if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
        ::execl("/usr/sbin/useradd", "useradd", "--create-home", "--shell", "/bin/bash", name,
                static_cast<char*>(nullptr));
        ::_exit(127);
      }
      int ws = 0;
      if (pid > 0) ::waitpid(pid, &ws, 0);
    }
    if (::getpwnam(name) != nullptr) users.emplace_back(name);
  }
  return users;
}

void submitDemo(const std::string& socket) {
  std::vector<std::string> users;
  bool quota_set = false;
  if (::geteuid() == 0) {
    users = demoUsers();
    if (users.empty()) {
      std::printf("  (could not create demo users with useradd; root's jobs will be refused)\n");
    }
    quota_set = users.size() == 3 && demoQuota(socket, users[2]);
  }
  std::fflush(stdout);
  size_t turn = 0;
  for (const DemoJob& d : demoJobs()) {
    if (d.name == "over-quota" && !quota_set) continue;  // without the quota it would just run
    if (users.empty()) {
      submitOne(socket, d, envOr("HOME", "/tmp"), envOr("USER", "me"));
      continue;
    }
    const std::string& user = users[turn++ % users.size()];
    struct passwd* pw = ::getpwnam(user.c_str());
    if (pw == nullptr) continue;
    const uid_t uid = pw->pw_uid;
    const gid_t gid = pw->pw_gid;
    const std::string home = pw->pw_dir;
    pid_t pid = ::fork();
    if (pid == 0) {
      // `gpool up` has no other threads (HttpClient is synchronous), so the child may use it.
      if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(1);
      submitOne(socket, d, home, user);
      std::fflush(stdout);
      ::_exit(0);
    }
    int ws = 0;
    if (pid > 0) ::waitpid(pid, &ws, 0);
  }
}

// Waits for the scheduler's first pass over the demo jobs: until no pending job still carries
// the reason it was submitted with ("submitted"), so that what follows `up` (the README's run
// command prints the queue next) shows where each job runs or why it waits. Prints the outcome.
void waitForFirstPass(const std::string& socket, int timeout_s) {
  net::HttpClient client(net::ClientEndpoint::unixSocket(socket), std::chrono::seconds(5));
  size_t running = 0;
  size_t pending = 0;
  Status passed = waitUntil(
      [&] {
        Result<json> jobs = getJson(client, "/v1/jobs?state=PENDING&state=RUNNING&limit=1000");
        if (!jobs.ok()) return false;
        running = pending = 0;
        for (const json& j : jobs->value("jobs", json::array())) {
          if (j.value("state", "") != "PENDING") {
            ++running;
            continue;
          }
          if (j.value("reason", "") == "submitted") return false;
          ++pending;
        }
        return true;
      },
      timeout_s, "the scheduler's first pass over the demo jobs", {});
  if (!passed.ok()) {
    std::printf("  (%s)\n", passed.message().c_str());
    return;
  }
  std::printf("after the scheduler's first pass: %zu running, %zu pending\n", running, pending);
}

// Writes `draft` to `path` once `check` (the daemon's own reader) accepts it: the file is
// written beside `path` first and renamed, so that a rejected configuration leaves the previous
// file as it was. The reader's errors name the `--set` that caused them.
Status writeCheckedConfig(const TomlDraft& draft, const std::string& comment,
                          const std::string& path,
                          const std::function<Status(const std::string&)>& check) {
  const std::string tmp = path + ".new";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << draft.text(comment);
    if (!out) return Status::ioError("cannot write " + tmp);
  }
  Status checked = check(tmp);
  if (!checked.isOk()) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    std::string message = draft.explain(checked.message(), tmp, comment);
    // What no --set caused names the file as it would be called.
    for (size_t at = message.find(tmp); at != std::string::npos; at = message.find(tmp, at))
      message.replace(at, tmp.size(), path);
    return Status(checked.code(), message);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return Status::ioError("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  return Status::ok();
}

void runUp(const UpArgs& a) {
  const std::string dir = a.dir.empty() ? defaultUpDir() : a.dir;
  if (a.status) {
    Result<PoolFile> pool = readPoolFile(dir);
    if (!pool.ok()) fail(pool.status());
    printStatus(*pool, dir);
    return;
  }
  std::vector<ConfigOverride> overrides;
  for (const std::string& arg : a.sets) {
    Result<ConfigOverride> o = parseConfigOverride(arg);
    if (!o.ok()) fail(o.status());
    overrides.push_back(std::move(*o));
  }
  if (Result<PoolFile> pool = readPoolFile(dir);
      pool.ok() &&
      (processAlive(pool->gpoold, pool->gpoold_exe) ||
       (!pool->standby_socket.empty() && processAlive(pool->standby, pool->gpoold_exe)))) {
    if (!overrides.empty()) {
      std::fprintf(stderr, "gpool: --set applies to a new pool; this one keeps its settings\n");
    }
    std::printf("a pool is already up:\n");
    printStatus(*pool, dir);
    std::printf("stop it with: gpool down%s\n", a.dir.empty() ? "" : (" --dir " + dir).c_str());
    return;
  }
  if (a.servers < 1 || a.servers > 128) {
    fail(Status::invalidArgument("--servers: must be in [1, 128], got " +
                                 std::to_string(a.servers)));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(Status::ioError("cannot create " + dir + ": " + ec.message()));
  // Traversable but not listable: other local users (root's demo users) reach the socket, which
  // the server makes 0666, while the store and its log stay private (gpoold runs with umask 077).
  ::chmod(dir.c_str(), 0711);

  Result<std::string> gpoold = findGpoolFile("gpoold");
  Result<std::string> agent = findGpoolFile("gpool-agent");
  Result<std::string> supervisor = findGpoolFile("gpool-supervisor");
  for (const auto* r : {&gpoold, &agent, &supervisor}) {
    if (!r->ok()) fail(r->status());
  }
  Result<std::string> interposer = findGpoolFile("libgpool-vgpu.so");

  // Real GPUs when NVML finds some (one agent: this server); otherwise simulated servers.
  bool simulated = true;
  if (!a.simulate) {
    gpu::GpuBackendOptions probe;
    probe.node_name = hostName();
    Result<gpu::GpuBackendPtr> backend = gpu::makeGpuBackend(probe, realClock());
    if (backend.ok()) {
      Result<gpu::Inventory> inventory = (*backend)->inventory();
      simulated = !(inventory.ok() && !inventory->gpus.empty());
    }
  }
  std::string fixture;
  if (simulated) {
    Result<std::string> found = findFixture(a.fixture);
    if (!found.ok()) fail(found.status());
    fixture = *found;
  }

  PoolFile pool;
  pool.socket = dir + "/gpoold.sock";
  pool.simulated = simulated;
  pool.gpoold_exe = fs::canonical(*gpoold, ec).string();
  pool.agent_exe = fs::canonical(*agent, ec).string();
  if (a.ha) pool.standby_socket = dir + "/gpoold-2.sock";
  if (pool.socket.size() >= 100 || pool.standby_socket.size() >= 100) {
    fail(Status::invalidArgument("the socket path " + pool.socket +
                                 " is too long for a Unix socket; use a shorter --dir"));
  }
  // The servers' names, and each one's configuration: written and checked before anything
  // starts, so that a bad --set stops `up` with nothing running.
  std::vector<std::string> names;
  const int servers = simulated ? a.servers : 1;
  for (int i = 1; i <= servers; ++i)
    names.push_back(simulated ? "sim-node-" + std::to_string(i) : hostName());
  // --ha: both controllers share a PostgreSQL server of the pool's own, started first.
  std::string store = dir + "/gpool.db";
  if (a.ha) {
    Result<std::string> pg = startPostgres(dir, &pool);
    if (!pg.ok()) fail(pg.status());
    store = *pg;
  }
  const std::string config = dir + "/gpoold.toml";
  const std::string standby_config = dir + "/gpoold-2.toml";
  for (const std::string& socket : {pool.socket, pool.standby_socket}) {
    if (socket.empty()) continue;
    TomlDraft draft;
    draft.set({"controller", "store"}, tomlString(store));
    draft.set({"controller", "socket"}, tomlString(socket));
    draft.set({"controller", "http_listen"}, tomlString("127.0.0.1:0"));
    draft.set({"controller", "schedule_interval"}, tomlString("2s"));
    if (a.ha) draft.set({"ha", "enabled"}, "true");
    for (const ConfigOverride& o : overrides) {
      if (!o.forAgent()) draft.set(o.path, o.toml_value, o.arg);
    }
    const std::string comment =
        std::string(a.ha ? "written by `gpool up --ha`; one of the two controllers of this "
                           "machine's pool (docs/ha.md)\n"
                         : "written by `gpool up`; the controller of this machine's pool\n") +
        "http_listen: the dashboard and the API for a browser on this machine; port chosen by "
        "the OS";
    Status written = writeCheckedConfig(
        draft, comment, socket == pool.socket ? config : standby_config,
        [](const std::string& path) { return controller::readControllerSettings(path).status(); });
    if (!written.isOk()) {
      (void)stopPostgres(pool);
      fail(written);
    }
  }
  std::vector<std::string> agent_configs;
  for (const std::string& node : names) {
    const std::string state = dir + "/agents/" + node;
    fs::create_directories(state, ec);
    TomlDraft draft;
    draft.set({"agent", "node"}, tomlString(node));
    // --ha: both controllers; the agent follows the leader.
    draft.set({"agent", "unix_socket"},
              tomlString(pool.socket + (a.ha ? "," + pool.standby_socket : "")));
    draft.set({"agent", "state_dir"}, tomlString(state));
    draft.set({"agent", "vgpu_dir"}, tomlString(dir + "/vgpu/" + node));
    draft.set({"agent", "supervisor"}, tomlString(*supervisor));
    if (simulated) {
      // A simulated server offers what such a server has (a DGX A100: 128 cores, 1 TiB), not
      // this machine's CPUs and memory, or a few default jobs would fill it.
      draft.set({"agent", "fake_fixture"}, tomlString(fixture));
      draft.set({"agent", "cpus"}, "128");
      draft.set({"agent", "ram"}, tomlString("1024G"));
    }
    if (interposer.ok()) draft.set({"agent", "interposer"}, tomlString(*interposer));
    if (a.cgroups) {
      draft.set({"agent", "cgroup_parent"}, tomlString("gpool-up"));
    } else {
      draft.set({"agent", "cgroups"}, "false");
    }
    for (const ConfigOverride& o : overrides) {
      if (o.forAgent()) draft.set(o.path, o.toml_value, o.arg);
    }
    const std::string path = dir + "/agent-" + node + ".toml";
    Status written = writeCheckedConfig(
        draft, "written by `gpool up`; the agent of server " + node, path,
        [](const std::string& p) { return agent::readAgentSettings(p).status(); });
    if (!written.isOk()) {
      (void)stopPostgres(pool);
      fail(written);
    }
    agent_configs.push_back(path);
  }
  const std::string ctl_log = dir + "/gpoold.log";
  std::uintmax_t log_offset = 0;  // the log keeps earlier runs: read this run's lines only
  {
    std::error_code size_ec;
    std::uintmax_t size = fs::file_size(ctl_log, size_ec);
    if (!size_ec) log_offset = size;
  }
  Result<pid_t> ctl = spawnDetached({*gpoold, "--config", config}, ctl_log, 077);
  if (!ctl.ok()) {
    (void)stopPostgres(pool);
    fail(ctl.status());
  }
  pool.gpoold = *ctl;
  std::vector<std::pair<pid_t, std::string>> children{{*ctl, ctl_log}};

  net::HttpClient client(net::ClientEndpoint::unixSocket(pool.socket), std::chrono::seconds(5));
  // gpoold serves the socket a moment before it prints "http HOST:PORT" (the port is known only
  // once the listener is bound), so ready means both: answering, and the port in the log.
  int http_port = -1;
  Status ready = waitUntil(
      [&] {
        Result<net::Response> r = client.get("/v1/health");
        if (!r.ok() || r->status != 200) return false;
        http_port = httpPortFromLog(ctl_log, log_offset);
        return http_port > 0;
      },
      a.timeout_s, "waiting for gpoold to serve " + pool.socket + " and print its HTTP port",
      children);
  auto abandon = [&](const Status& why) {
    for (const auto& [node, pid] : pool.agents)
      stopProcess(pid, pool.agent_exe, 5);
    stopProcess(pool.gpoold, pool.gpoold_exe, 5);
    if (pool.standby > 0) stopProcess(pool.standby, pool.gpoold_exe, 5);
    (void)stopPostgres(pool);
    std::error_code ignored;
    fs::remove(dir + "/pool.json", ignored);
    fail(why);
  };
  if (!ready.isOk()) abandon(ready);
  if (http_port > 0) pool.dashboard = "http://127.0.0.1:" + std::to_string(http_port) + "/";
  if (a.ha) {
    // The second controller stands by: it says so once it has opened the store and found the
    // lease held.
    const std::string log = dir + "/gpoold-2.log";
    std::error_code size_ec;
    std::uintmax_t offset = fs::file_size(log, size_ec);
    if (size_ec) offset = 0;
    Result<pid_t> standby = spawnDetached({*gpoold, "--config", standby_config}, log, 077);
    if (!standby.ok()) abandon(standby.status());
    pool.standby = *standby;
    children.emplace_back(*standby, log);
    Status standing = waitUntil(
        [&] {
          std::ifstream in(log);
          in.seekg(static_cast<std::streamoff>(offset));
          std::string line;
          bool standing_by = false;
          while (std::getline(in, line))
            standing_by = standing_by || line == "standby";
          const int port = httpPortFromLog(log, offset);
          if (standing_by && port > 0) {
            pool.standby_dashboard = "http://127.0.0.1:" + std::to_string(port) + "/";
          }
          return standing_by && port > 0;
        },
        a.timeout_s, "waiting for the second gpoold to stand by", children);
    if (!standing.isOk()) abandon(standing);
  }

  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& node = names[i];
    std::vector<std::string> argv{*agent, "--config", agent_configs[i]};
    const std::string log = dir + "/agent-" + node + ".log";
    Result<pid_t> pid = spawnDetached(argv, log, 022);
    if (!pid.ok()) abandon(pid.status());
    pool.agents.emplace_back(node, *pid);
    children.emplace_back(*pid, log);
  }
  if (Status s = writePoolFile(dir, pool); !s.isOk()) abandon(s);
  Status joined =
      waitUntil([&] { return nodesUp(client, names) == names.size(); }, a.timeout_s,
                "waiting for " + std::to_string(names.size()) + " server(s) to join the controller",
                children);
  if (!joined.isOk()) abandon(joined);

  std::printf("gpool: a pool of %d server(s) is up (%s)%s\n", servers,
              simulated ? "simulated GPUs: no NVIDIA GPU was found on this machine"
                        : "the real GPUs of this machine",
              a.ha ? ", with two controllers on PostgreSQL: one leads, one stands by" : "");
  printStatus(pool, dir);
  if (!pool.dashboard.empty()) {
    Result<std::string> token = dashboardToken(client);
    if (token.ok()) {
      // Jupyter-style: the page takes the token from the fragment (never sent to the server),
      // keeps it for the tab and clears the address bar.
      std::printf("dashboard %s#token=%s\n", pool.dashboard.c_str(), token->c_str());
    } else {
      std::printf("dashboard %s (no token: %s; create one with gpool token create)\n",
                  pool.dashboard.c_str(), token.status().message().c_str());
    }
  }
  std::printf(
      "\nuse it with:\n  export GPOOL_SOCKET=%s\n  gpool nodes\n  gpool queue\n"
      "stop it with: gpool down%s\n",
      (pool.socket + (a.ha ? "," + pool.standby_socket : "")).c_str(),
      a.dir.empty() ? "" : (" --dir " + dir).c_str());
  if (a.ha) {
    std::printf(
        "try a takeover: kill -9 %d (the leader); the other controller leads within the lease "
        "(ha.lease, 6 s unless --set), and gpool and the agents follow it\n",
        pool.gpoold);
  }
  if (a.demo) {
    std::printf("\ndemo jobs:\n");
    submitDemo(pool.socket);
    waitForFirstPass(pool.socket, a.timeout_s);
  }
}

// The parent pid of `pid` (/proc), 0 when unknown.
pid_t parentOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return 0;
  size_t paren = text.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream rest(text.substr(paren + 1));
  std::string state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// The tasks of one agent of the pool, read from its state directory: the supervisors there
// are what runs a task, whether the agent is alive or not.
struct PoolTasks {
  std::string node;
  std::unique_ptr<agent::Launcher> launcher;
  std::string cgroup_parent;
  bool cgroups = true;
};

std::vector<PoolTasks> poolTasks(const std::string& dir, const PoolFile& pool) {
  std::vector<PoolTasks> out;
  for (const auto& [node, pid] : pool.agents) {
    // The agent's own file says where its state is (a --set may have moved it).
    std::string state = dir + "/agents/" + node;
    PoolTasks t;
    t.node = node;
    Result<agent::AgentSettings> settings =
        agent::readAgentSettings(dir + "/agent-" + node + ".toml");
    if (settings.ok()) {
      state = settings->state_dir;
      t.cgroup_parent = settings->cgroup_parent;
      t.cgroups = settings->cgroups;
    }
    agent::Launcher::Options options;
    options.state_root = state + "/tasks";  // as gpool-agent lays it out (agent_main.cc)
    t.launcher = std::make_unique<agent::Launcher>(options);
    out.push_back(std::move(t));
  }
  return out;
}

// The tasks whose supervisor still runs, with their agent.
std::vector<std::pair<PoolTasks*, agent::TaskInfo>> liveTasks(std::vector<PoolTasks>& pool) {
  std::vector<std::pair<PoolTasks*, agent::TaskInfo>> live;
  for (PoolTasks& p : pool) {
    std::error_code ec;
    const std::string& root = p.launcher->options().state_root;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      if (!entry.is_directory(ec)) continue;
      Result<agent::TaskInfo> info = p.launcher->info(entry.path().filename().string());
      if (!info.ok()) continue;
      if (info->supervisor_alive) live.emplace_back(&p, std::move(*info));
    }
  }
  return live;
}

// Stops what is left of the pool's tasks without their agents: each supervisor is told to
// cancel its task (SIGTERM, SIGKILL after `grace_ms`), and whatever still runs at the deadline
// is killed: the task's process group and cgroup, then its supervisor. Returns what is left.
size_t stopLeftoverTasks(std::vector<PoolTasks>& pool, int timeout_s) {
  auto live = liveTasks(pool);
  if (live.empty()) return 0;
  const int64_t grace_ms = std::min<int64_t>(5'000, timeout_s * 1000 / 2);
  for (auto& [p, t] : live) {
    std::printf("task %s on %s: still running without its agent; stopping it\n", t.name.c_str(),
                p->node.c_str());
    (void)p->launcher->stop(t.name, agent::StopReason::kCancel, grace_ms);
  }
  (void)waitUntil([&] { return liveTasks(pool).empty(); }, timeout_s,
                  "waiting for the tasks' supervisors to stop them", {});
  for (auto& [p, t] : liveTasks(pool)) {
    std::printf("task %s on %s: did not stop; killing it\n", t.name.c_str(), p->node.c_str());
    // The task's process group, while its pid is still the supervisor's child (not reused).
    if (t.status.task_pid > 0 && parentOf(t.status.task_pid) == t.status.supervisor_pid) {
      ::kill(-t.status.task_pid, SIGKILL);
    }
    if (p->cgroups) {
      Result<agent::CgroupLayout> layout = agent::CgroupLayout::detect();
      if (layout.ok())
        agent::TaskCgroup::open(*layout, p->cgroup_parent, t.name).signalAll(SIGKILL);
    }
    if (t.supervisor_alive) ::kill(t.status.supervisor_pid, SIGKILL);
  }
  (void)waitUntil([&] { return liveTasks(pool).empty(); }, 5, "waiting for killed tasks to end",
                  {});
  return liveTasks(pool).size();
}

void runDown(const DownArgs& a) {
  const std::string dir = a.dir.empty() ? defaultUpDir() : a.dir;
  Result<PoolFile> pool = readPoolFile(dir);
  if (!pool.ok()) fail(pool.status());
  std::vector<PoolTasks> tasks = poolTasks(dir, *pool);
  // Cancel what still runs while the agents are there to stop it: a task's supervisor outlives
  // its agent by design, so stopping the agents first would leave the tasks behind.
  if (const std::string leader = leaderSocket(*pool); !leader.empty()) {
    net::HttpClient client(net::ClientEndpoint::unixSocket(leader), std::chrono::seconds(5));
    size_t cancelled = 0;
    // Page by page: a cancelled job leaves the list, so the first page is read again.
    for (int round = 0; round < 1000; ++round) {
      Result<json> jobs = getJson(client, "/v1/jobs?state=PENDING&state=RUNNING&limit=1000");
      if (!jobs.ok()) break;
      size_t now = 0;
      for (const json& j : jobs->value("jobs", json::array())) {
        int64_t id = j.value("id", int64_t{0});
        if (id > 0 && client.post("/v1/jobs/" + std::to_string(id) + "/cancel", "").ok()) ++now;
      }
      cancelled += now;
      if (now == 0) break;
    }
    std::printf("cancelled %zu job(s)\n", cancelled);
  }
  // A cancelled job is CANCELLED in the store at once; its tasks end when their supervisors
  // have stopped them (after the job's grace): wait for those, not for the store.
  // Tasks whose agent is gone are not waited for here: nobody would stop them (below).
  auto agentStopsAny = [&] {
    for (const auto& [p, t] : liveTasks(tasks)) {
      for (const auto& [node, pid] : pool->agents) {
        if (node == p->node && processAlive(pid, pool->agent_exe)) return true;
      }
    }
    return false;
  };
  if (agentStopsAny()) {
    Status drained = waitUntil([&] { return !agentStopsAny(); }, a.timeout_s,
                               "waiting for the cancelled jobs' tasks to stop", {});
    if (!drained.isOk()) std::fprintf(stderr, "gpool: %s\n", drained.message().c_str());
  }
  bool all_stopped = true;
  for (const auto& [node, pid] : pool->agents) {
    bool stopped = stopProcess(pid, pool->agent_exe, a.timeout_s);
    all_stopped = all_stopped && stopped;
    std::printf("gpool-agent %s (pid %d): %s\n", node.c_str(), pid,
                stopped ? "stopped" : "DID NOT STOP");
  }
  bool ctl_stopped = stopProcess(pool->gpoold, pool->gpoold_exe, a.timeout_s);
  std::printf("gpoold (pid %d): %s\n", pool->gpoold, ctl_stopped ? "stopped" : "DID NOT STOP");
  if (!pool->standby_socket.empty()) {
    const bool stopped = stopProcess(pool->standby, pool->gpoold_exe, a.timeout_s);
    std::printf("gpoold (pid %d): %s\n", pool->standby, stopped ? "stopped" : "DID NOT STOP");
    ctl_stopped = ctl_stopped && stopped;
    // The database goes last, once no controller writes to it.
    if (Status s = stopPostgres(*pool); s.isOk()) {
      std::printf("postgresql (%s): stopped\n", pool->pg_data.c_str());
    } else {
      std::fprintf(stderr, "gpool: %s\n", s.message().c_str());
      ctl_stopped = false;
    }
  }
  // Tasks whose agent was gone (or did not stop them in time): their supervisors are stopped
  // directly, so that nothing of the pool runs on once its state is removed.
  const size_t left = stopLeftoverTasks(tasks, a.timeout_s);
  if (!all_stopped || !ctl_stopped || left > 0) {
    fail(Status::unavailable("some processes of the pool in " + dir + " did not stop" +
                             (left > 0 ? " (" + std::to_string(left) + " task(s))" : "") +
                             "; nothing was removed"));
  }
  std::error_code ec;
  if (a.purge) {
    fs::remove_all(dir, ec);
    std::printf("removed %s\n", dir.c_str());
  } else {
    fs::remove(dir + "/pool.json", ec);
    std::printf("the store and logs stay in %s (gpool down --purge removes them)\n", dir.c_str());
  }
}

}  // namespace

std::string defaultUpDir() {
  if (const char* d = std::getenv("GPOOL_UP_DIR"); d && *d) return d;
  // Root's pool serves every local user, whose connections must reach the socket: not under
  // /root (mode 0700).
  if (::geteuid() == 0) return "/var/lib/gpool/up";
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/gpool/up";
  return envOr("HOME", "/tmp") + "/.local/share/gpool/up";
}

Result<std::string> findGpoolFile(const std::string& name) {
  const fs::path self = selfDir();
  // Installed: everything in one bin (libexec) folder; build tree: src/cli/gpool beside
  // src/controller/gpoold, src/agent/gpool-agent, src/vgpu/libgpool-vgpu.so.
  std::vector<fs::path> candidates{self / name,
                                   self / "../controller" / name,
                                   self / "../agent" / name,
                                   self / "../vgpu" / name,
                                   self / "../lib/gpool" / name,
                                   self / "../lib" / name,
                                   self / "../libexec/gpool" / name};
  bool is_library = name.size() > 3 && name.compare(name.size() - 3, 3, ".so") == 0;
  if (!is_library) {
    std::stringstream path(envOr("PATH", ""));
    std::string item;
    while (std::getline(path, item, ':')) {
      if (!item.empty()) candidates.push_back(fs::path(item) / name);
    }
  }
  std::string looked;
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (is_library ? fs::is_regular_file(p, ec) : isExecutableFile(p)) {
      return fs::weakly_canonical(p, ec).string();
    }
    if (looked.size() < 400) looked += (looked.empty() ? "" : ", ") + p.lexically_normal().string();
  }
  return Status::notFound("cannot find " + name + " (looked in " + looked +
                          "); build it, or install the gpool package");
}

Result<std::string> findFixture(const std::string& file_name) {
  if (file_name.find('/') != std::string::npos) {
    std::error_code ec;
    if (fs::is_regular_file(file_name, ec)) return file_name;
    return Status::notFound("--fixture: no file " + file_name);
  }
  std::vector<fs::path> dirs;
  if (const char* d = std::getenv("GPOOL_FIXTURE_DIR"); d && *d) dirs.emplace_back(d);
  dirs.push_back(fs::path(selfDir()) / "../share/gpool/fixtures");
  dirs.emplace_back("/usr/share/gpool/fixtures");
  dirs.push_back(fs::path(GPOOL_SOURCE_DIR) / "src/gpu/fixtures");
  for (const fs::path& d : dirs) {
    std::error_code ec;
    if (fs::is_regular_file(d / file_name, ec)) return (d / file_name).lexically_normal().string();
  }
  return Status::notFound("--fixture: cannot find " + file_name + " in $GPOOL_FIXTURE_DIR, " +
                          "share/gpool/fixtures or " + GPOOL_SOURCE_DIR + "/src/gpu/fixtures");
}

void registerUpCommands(CLI::App& app) {
  auto up_args = std::make_shared<UpArgs>();
  CLI::App* up = app.add_subcommand(
      "up", "Start a whole pool on this machine: gpoold and one agent per (simulated) server");
  up->add_option("--dir", up_args->dir, "data directory (default: " + defaultUpDir() + ")");
  up->add_option("--servers", up_args->servers,
                 "simulated servers to start when no real GPU is found")
      ->capture_default_str();
  up->add_option("--fixture", up_args->fixture, "GPU fixture of each simulated server")
      ->capture_default_str();
  up->add_flag("--simulate", up_args->simulate, "simulated GPUs even when NVML finds real ones");
  up->add_flag("--demo", up_args->demo, "also submit a mix of demo jobs");
  up->add_flag("--cgroups", up_args->cgroups,
               "run tasks in cgroups (needs root and a writable /sys/fs/cgroup)");
  up->add_flag("--status", up_args->status, "show the pool that is up and exit");
  up->add_flag("--ha", up_args->ha,
               "two controllers (one leads, one stands by) on a PostgreSQL server of the pool's "
               "own, to try high availability on one machine (docs/ha.md)");
  up->add_option("--set", up_args->sets,
                 "set a gpoold or agent configuration key for this pool, e.g. "
                 "controller.lease_duration=10s or agent.cpus=8 (repeatable; docs/gpool-up.md)")
      ->type_name("KEY=VALUE")
      ->allow_extra_args(false);
  up->add_option("--timeout", up_args->timeout_s, "seconds to wait for each step")
      ->capture_default_str()
      ->check(CLI::Range(1, 600));
  up->callback([up_args] { runUp(*up_args); });

  auto down_args = std::make_shared<DownArgs>();
  CLI::App* down =
      app.add_subcommand("down", "Stop the pool `gpool up` started: jobs, agents, controller");
  down->add_option("--dir", down_args->dir, "data directory (default: " + defaultUpDir() + ")");
  down->add_flag("--purge", down_args->purge, "also delete the store and the logs");
  down->add_option("--timeout", down_args->timeout_s, "seconds to wait for each process")
      ->capture_default_str()
      ->check(CLI::Range(1, 600));
  down->callback([down_args] { runDown(*down_args); });
}

}  // namespace gpool::cli
