#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/job_spec.h"
#include "common/result.h"
#include "common/status.h"
#include "net/client.h"
#include "system/checker.h"
#include "system/records.h"

namespace gpool::store::testing {
class PgServer;
}

// The system test harness: a whole pool on this machine, each host in its own network namespace,
// with faults injected at any moment. docs/reliability.md explains it.
//
//   Pool: gpoold in one namespace (TLS listener for the agents, Unix socket for clients) and
//   agents in others (one namespace per host, several agents per host for load), over veth
//   links the test makes, the agents joining with a join token. Unique names per test process,
//   so parallel runs never collide; everything is torn down by the destructor, and what a
//   killed test process left behind is removed by the next one (names carry the owner's pid).
//   Without root (no namespaces, no mounts, no second user) the same pool runs over loopback
//   and says so; GPOOL_SYSTEM_LOOPBACK=1 asks for loopback as root too.
//
//   High availability (PoolOptions::controllers > 1): that many gpoold with [ha] in the
//   controller's namespace, on a PostgreSQL server the pool starts there (over TCP on one
//   loopback address per controller, so that one controller's way to the database can be cut
//   while the other's is not; over its Unix socket without namespaces).
//
//   Faults: SIGKILL, SIGSTOP/SIGCONT and restart of any daemon; a partition between a host and
//   the controller (nftables DROP in the host's namespace, or its link down without nft) and
//   its healing; a full store (an ext4 image) or agent state folder (a tmpfs); a store whose
//   file system fails and goes read-only; the store restored from a copy taken while gpoold was
//   stopped.
//
//   Tasks are `gpool-system-helper task` (records.h); clients are `gpool-system-helper submit`
//   processes running as the test user; the checker (checker.h) judges the records.
//
// Thread-compatible: one test thread drives a Pool.
namespace gpool::system_test {

using nlohmann::json;

// The output and exit status of `command` run by /bin/sh.
struct ShellResult {
  int rc = -1;
  std::string out;  // stdout and stderr
};
ShellResult shell(const std::string& command);

// Microseconds of CLOCK_REALTIME (the clock the tasks' records use).
int64_t realNowUs();

// Polls `done` every `every` until it holds or `timeout` passes; true when it held.
bool waitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout,
             std::chrono::milliseconds every = std::chrono::milliseconds(50));

// The network of one test: namespaces and veth links, or plain loopback.
class TestNetwork {
 public:
  // `hosts` host namespaces plus the controller's. Loopback (and `why` says why) when this
  // process is not root, `ip netns` fails, or GPOOL_SYSTEM_LOOPBACK=1.
  static std::unique_ptr<TestNetwork> make(int hosts, std::string* why_loopback);
  ~TestNetwork();
  TestNetwork(const TestNetwork&) = delete;
  TestNetwork& operator=(const TestNetwork&) = delete;

  bool isolated() const { return isolated_; }
  // The address the agents reach the controller at (10.77.0.1 on the controller's loopback,
  // routed over each host's veth; 127.0.0.1 without namespaces).
  std::string controllerAddress() const;
  // Namespace names ("" over loopback).
  std::string controllerNamespace() const;
  std::string hostNamespace(int host) const;
  int hosts() const { return hosts_; }

  // Drops every packet between `host` and the controller (both directions), or lets them
  // through again. Unimplemented over loopback.
  Status partition(int host);
  Status heal(int host);
  // "nftables drop" or "link down" (nft missing).
  std::string partitionMethod() const;
  // Drops every packet to and from the database server's port at `address` (a loopback
  // address of the controller's namespace), or lets them through again: one controller cut
  // from the database while its agents and clients still reach it. Needs namespaces and nft.
  Status cutDatabase(const std::string& address);
  Status healDatabase();
  bool canCutDatabase() const { return isolated_ && have_nft_; }
  // "network namespaces (ip netns + veth)" or "loopback (...why...)".
  std::string describe() const { return description_; }

  // Removes namespaces left by test processes that no longer exist (names carry the pid).
  static void removeStale();

 private:
  TestNetwork() = default;
  bool isolated_ = false;
  int hosts_ = 0;
  std::string prefix_;
  std::string description_;
  bool have_nft_ = false;
};

// A daemon process this test started: in a namespace or not, stdout/stderr appended to a log.
class Daemon {
 public:
  Daemon(std::string name, std::vector<std::string> argv, std::string netns, std::string log,
         mode_t umask_value = 022);
  ~Daemon();  // SIGKILLs it if still running
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  Status start();
  // SIGTERM, then SIGKILL after `grace`; reaps it.
  Status stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  Status kill();  // SIGKILL and reap
  Status signal(int sig);
  bool running();  // started and not exited (a stopped process is running)
  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  const std::string& log() const { return log_; }
  std::string logTail(size_t lines = 20) const;
  // Waits for it to exit by itself; its exit code (128 + signal), or -1 on timeout.
  int wait(std::chrono::milliseconds timeout);
  std::vector<std::string>& argv() { return argv_; }

 private:
  std::string name_;
  std::vector<std::string> argv_;
  std::string netns_;
  std::string log_;
  mode_t umask_;
  pid_t pid_ = -1;
  int exit_status_ = -1;
};

// A small file system mounted by the test for a store or an agent's state (root only): a tmpfs,
// or an ext4 image on a loop device (mounted errors=remount-ro), which can also be made to fail
// as a failing disk does.
class TestDisk {
 public:
  enum class Kind { kTmpfs, kExt4 };
  TestDisk(Kind kind, std::string path, uint64_t size_mib);
  ~TestDisk();  // unmounts (lazily) and removes the image
  TestDisk(const TestDisk&) = delete;
  TestDisk& operator=(const TestDisk&) = delete;

  Status mount();
  // Fills the file system with a filler file to its last byte; `free` removes the filler.
  Status fill();
  Status free();
  // ext4 only: a file system error, after which the kernel remounts it read-only (as the
  // trial's `echo 1 > /sys/fs/ext4/DEV/trigger_fs_error`). Unimplemented for a tmpfs, which
  // cannot go read-only while a file is open for writing.
  Status failReadOnly();
  const std::string& path() const { return path_; }

 private:
  Kind kind_;
  std::string path_;
  std::string image_;
  uint64_t size_mib_;
  bool mounted_ = false;
};

struct PoolOptions {
  int hosts = 2;
  int agents_per_host = 1;
  std::string fixture = "8x-a100-sxm4-80gb-nvlink.json";
  int lease_s = 3;
  int heartbeat_s = 1;
  int node_down_after_s = 5;
  int schedule_interval_s = 1;
  std::string log_level = "info";
  // More lines ("key = value") for [controller] and for every agent's --config [agent].
  std::vector<std::string> controller_keys;
  std::vector<std::string> agent_keys;
  // More sections of gpoold.toml, line by line ("[alerts]", "evaluate_every = \"1s\"").
  std::vector<std::string> controller_sections;
  uint64_t store_disk_mib = 0;   // > 0: the store's folder is an ext4 image of this size
  uint64_t agent_tmpfs_mib = 0;  // > 0: every agent's state folder is a tmpfs of this size
  // > 0 (root): the records and the agents' state folders on one tmpfs of at most this size,
  // so that tens of thousands of task files go with one umount (the load scenario).
  uint64_t scratch_tmpfs_mib = 0;
  int tick_ms = 100;  // the tasks' tick
  // > 1: high availability, this many gpoold with [ha] on one PostgreSQL server; the first
  // leads at the start, the others stand by (docs/ha.md).
  int controllers = 1;
  std::string ha_lease = "2s";  // [ha] lease
};

// One job a scenario submits.
struct JobPlan {
  std::string tag;  // unique: becomes the job's name and is written in its records
  int64_t run_ms = 2000;
  int exit_code = 0;
  int64_t gpus_milli = 1000;
  bool preemptible = false;
  std::string node;           // when set, the job may run only there (label node=<node>)
  int64_t term_delay_ms = 0;  // after SIGTERM it goes on this long (saving a checkpoint)
  std::string min_cuda;       // --min-cuda ("12.2"); "" any
};

// The JobSpec of `plan`: the helper's task, writing its records below `records`, working in
// `working_dir`, ticking every `tick_ms`.
json taskSpec(const JobPlan& plan, const std::string& records, const std::string& working_dir,
              int tick_ms);

// Starts a client (`gpool-system-helper submit`) that submits `specs` over `socket` as `user`
// (root: runuser; anyone else: as itself) from `clients` threads, `interval_ms` apart; its
// outcomes go to <dir>/submit-<name>.out (readSubmissions), its own output to .log.
std::unique_ptr<Daemon> startClient(const std::string& socket, const std::vector<json>& specs,
                                    int clients, int interval_ms, const std::string& dir,
                                    const std::string& name, const std::string& user);
std::vector<Submission> readSubmissions(const std::string& path);

// The system tests' user, created when this process is root (useradd); "" and why not otherwise.
Result<std::string> testUser();

class Pool {
 public:
  // Starts gpoold and every agent and waits until every node is up. `scenario` names the run
  // directory and the figures.
  static Result<std::unique_ptr<Pool>> start(const std::string& scenario,
                                             const PoolOptions& options);
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  const std::string& dir() const { return dir_; }
  const std::string& socket() const { return socket_; }
  TestNetwork& network() { return *network_; }
  const PoolOptions& options() const { return options_; }
  bool root() const { return root_; }

  Daemon& gpoold() { return *gpoold_; }
  // High availability: controller `i` (0 is gpoold()), its socket, and the database address
  // it connects to ("" over the server's Unix socket).
  int controllers() const { return options_.controllers; }
  Daemon& controller(int i) {
    return i == 0 ? *gpoold_ : *more_controllers_[static_cast<size_t>(i - 1)];
  }
  std::string controllerSocket(int i) const;
  std::string databaseAddress(int i) const;
  // The controller that leads now (answers GET /v1/health with 200), -1 when none does.
  int leader();
  // Starts controller `i` (again) with its configuration; waits until it leads ("ready") or
  // stands by ("standby").
  Status startController(int i);
  // When controller `i` logged that it took the lease after `mark` (its log's size before):
  // CLOCK_REALTIME microseconds from the log line's own timestamp.
  std::optional<int64_t> ledAfter(int i, uint64_t mark);
  int agents() const { return static_cast<int>(agents_.size()); }
  Daemon& agent(int i) { return *agents_[static_cast<size_t>(i)]; }
  std::string node(int agent) const;
  int hostOf(int agent) const { return agent / options_.agents_per_host; }
  std::string hostDir(int agent) const;  // <run>/hosts/<node>
  std::string agentStateDir(int agent) const { return hostDir(agent) + "/agent"; }

  // gpoold started again with its configuration (same store, socket and TLS port); waits until
  // it serves.
  Status restartGpoold();
  Status startGpoold();
  // The agent started again with its command line (its stored credential); does not wait.
  Status restartAgent(int agent);
  // Waits until every node whose agent runs is up (not DOWN) per GET /v1/nodes and has been
  // heard from since its agent last started.
  Status waitNodesUp(std::chrono::milliseconds timeout);
  // The size of gpoold's log now: a mark for helloAfter.
  uint64_t gpooldLogMark(int which = 0);
  // When gpoold (controller `which`) logged the hello of `node`'s agent after `mark`
  // (CLOCK_REALTIME microseconds, from the log line's own timestamp); nullopt when it has not.
  std::optional<int64_t> helloAfter(const std::string& node, uint64_t mark, int which = 0);
  // Lines of gpoold's log (all its runs in this pool) that contain `text`.
  int gpooldLogLines(const std::string& text);
  // A node's state per GET /v1/nodes ("" when unknown).
  std::string nodeState(const std::string& node);

  // The store's file, and its folder's disk (null unless store_disk_mib).
  std::string storePath() const { return store_; }
  TestDisk* storeDisk() { return store_disk_.get(); }
  TestDisk* agentDisk(int agent);  // null unless agent_tmpfs_mib

  // The test user's identity (root's pool: a user of its own; otherwise this process's user).
  const std::string& user() const { return user_; }

  // Submits `jobs` as the test user from `clients` client threads (each waiting `interval_ms`
  // between submissions) and returns what the clients were told, once all are done.
  std::vector<Submission> submit(const std::vector<JobPlan>& jobs, int clients = 1,
                                 int interval_ms = 0);
  // The same in the background: the client process (its output file is read by submissions()).
  std::unique_ptr<Daemon> submitInBackground(const std::vector<JobPlan>& jobs, int clients,
                                             int interval_ms, const std::string& name);
  std::vector<Submission> submissions(const std::string& name);

  // GET over the socket as root (an admin); the parsed body, or why not.
  Result<json> get(const std::string& target);
  Result<net::Response> request(net::Method method, const std::string& target,
                                const std::string& body = "");
  // Every job the controller has (GET /v1/jobs, all states, every page).
  Result<std::vector<ControllerJob>> jobs();
  // The tasks' records so far.
  std::vector<TaskRun> runs();
  // Waits until no job is PENDING, RUNNING or COMPLETING.
  Status waitAllFinished(std::chrono::milliseconds timeout);
  // Runs the checker over `subs`, the controller's jobs and the records.
  CheckResult check(const std::vector<Submission>& subs, CheckOptions options = {});

  // The job's task records by tag, and the controller's record of a job.
  Result<json> job(int64_t id);

  // Processes of this pool still alive that no daemon of it is (tasks, supervisors): their pids.
  std::vector<pid_t> leftoverProcesses();

 private:
  Pool() = default;
  Status writeConfigs();
  // Over the socket of each controller in turn until one that leads answers.
  Result<net::Response> requestLeader(net::Method method, const std::string& target,
                                      const std::string& body);

  PoolOptions options_;
  bool root_ = false;
  std::string scenario_;
  std::string dir_;
  std::string socket_;
  std::string store_;
  std::string records_;
  std::string certs_ca_;
  std::string certs_cert_;
  std::string certs_key_;
  std::vector<int> tls_ports_;        // per controller; 0 until its first start printed it
  std::vector<std::string> sockets_;  // per controller
  std::string join_token_;
  std::string user_;
  std::unique_ptr<TestNetwork> network_;
  std::unique_ptr<TestDisk> store_disk_;
  std::unique_ptr<TestDisk> scratch_disk_;
  std::vector<std::unique_ptr<TestDisk>> agent_disks_;
  std::unique_ptr<store::testing::PgServer> pg_;
  std::unique_ptr<Daemon> gpoold_;
  std::vector<std::unique_ptr<Daemon>> more_controllers_;  // controllers 1.. (HA)
  std::vector<std::unique_ptr<Daemon>> agents_;
  std::vector<int64_t> agent_started_us_;  // when each agent was last started
  std::unique_ptr<net::HttpClient> admin_;
  size_t admin_at_ = 0;  // the controller admin_ talks to
  int submit_runs_ = 0;
};

// The figures of one scenario, printed and appended (one JSON line) to $GPOOL_SYSTEM_FIGURES
// when set (scripts/system-tests.sh makes its table from them).
struct Figures {
  std::string scenario;
  std::string network;
  json values = json::object();
  void record() const;
};
// Adds the checker's figures to `f`.
void addCheck(Figures* f, const CheckResult& r);

// "short" (CI) or "full" ($GPOOL_SYSTEM_PROFILE).
bool fullProfile();

}  // namespace gpool::system_test
