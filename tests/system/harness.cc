#include "system/harness.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "api/node.h"
#include "net/net_test_util.h"
#include "store/pg_server.h"

namespace gpool::system_test {
namespace {

namespace fs = std::filesystem;

constexpr char kUser[] = "gpool-sys-user";
constexpr char kNamespacePrefix[] = "gpsys-";
const std::string kBin = GPOOL_BINARY_DIR;
const std::string kSrc = GPOOL_SOURCE_DIR;

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Creates the test user once (useradd; one at a time across test binaries).
Status ensureUser(const std::string& name) {
  if (::getpwnam(name.c_str()) != nullptr) return Status::ok();
  int lock = ::open("/tmp/gpool-test-users.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  ShellResult r{0, ""};
  if (::getpwnam(name.c_str()) == nullptr) {
    r = shell("useradd --no-create-home --home-dir /nonexistent --shell /bin/sh " + name);
  }
  if (lock >= 0) ::close(lock);
  if (::getpwnam(name.c_str()) == nullptr) {
    return Status::internal("cannot create user " + name + ": " + r.out);
  }
  return Status::ok();
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

bool pidAlive(pid_t pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

}  // namespace

ShellResult shell(const std::string& command) {
  ShellResult r;
  std::string full = "(" + command + "\n) 2>&1";
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, n);
  int status = ::pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

int64_t realNowUs() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000;
}

bool waitFor(const std::function<bool()>& done, std::chrono::milliseconds timeout,
             std::chrono::milliseconds every) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(every);
  }
  return done();
}

bool fullProfile() {
  const char* p = std::getenv("GPOOL_SYSTEM_PROFILE");
  return p != nullptr && std::string(p) == "full";
}

// ---------------------------------------------------------------- TestNetwork

void TestNetwork::removeStale() {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/run/netns", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kNamespacePrefix, 0) != 0) continue;
    // gpsys-<pid>-<n>-<role>
    pid_t owner = static_cast<pid_t>(std::atol(name.c_str() + std::strlen(kNamespacePrefix)));
    if (owner <= 0 || pidAlive(owner)) continue;
    // Whatever still runs in it was started there by that test: its daemons and tasks.
    shell("for p in $(ip netns pids " + name + "); do kill -9 $p; done; ip netns del " + name);
  }
}

std::unique_ptr<TestNetwork> TestNetwork::make(int hosts, std::string* why_loopback) {
  std::unique_ptr<TestNetwork> n(new TestNetwork());
  n->hosts_ = hosts;
  why_loopback->clear();
  const char* force = std::getenv("GPOOL_SYSTEM_LOOPBACK");
  if (force != nullptr && std::string(force) == "1") {
    *why_loopback = "GPOOL_SYSTEM_LOOPBACK=1";
  } else if (::geteuid() != 0) {
    *why_loopback = "not root: cannot make network namespaces";
  } else if (shell("command -v ip").rc != 0) {
    *why_loopback = "no `ip` command (iproute2)";
  }
  if (!why_loopback->empty()) {
    n->description_ = "loopback (" + *why_loopback + ")";
    return n;
  }
  removeStale();
  static std::atomic<int> counter{0};
  n->prefix_ = std::string(kNamespacePrefix) + std::to_string(::getpid()) + "-" +
               std::to_string(counter++) + "-";
  const std::string ctl = n->controllerNamespace();
  std::string script = "set -e\nip netns add " + ctl + "\nip -n " + ctl +
                       " link set lo up\nip -n " + ctl + " addr add 10.77.0.1/32 dev lo\n";
  for (int h = 0; h < hosts; ++h) {
    const std::string ns = n->hostNamespace(h);
    const std::string link = "h" + std::to_string(h);
    const std::string net = "10.77." + std::to_string(h + 1);
    // The veth is made inside the controller's namespace and its peer moved straight into the
    // host's, so no name is ever taken in the machine's own namespace.
    script += "ip netns add " + ns + "\nip -n " + ns + " link set lo up\n" + "ip -n " + ctl +
              " link add " + link + " type veth peer name eth0 netns " + ns + "\n" + "ip -n " +
              ctl + " addr add " + net + ".1/24 dev " + link + "\nip -n " + ctl + " link set " +
              link + " up\nip -n " + ns + " addr add " + net + ".2/24 dev eth0\nip -n " + ns +
              " link set eth0 up\nip -n " + ns + " route add 10.77.0.1/32 via " + net + ".1\n";
  }
  ShellResult r = shell(script);
  if (r.rc != 0) {
    *why_loopback = "ip netns failed: " + r.out;
    n->description_ = "loopback (" + *why_loopback + ")";
    for (int h = 0; h < hosts; ++h)
      shell("ip netns del " + n->hostNamespace(h) + " 2>/dev/null");
    shell("ip netns del " + ctl + " 2>/dev/null");
    n->prefix_.clear();
    return n;
  }
  n->isolated_ = true;
  n->have_nft_ = shell("command -v nft").rc == 0;
  n->description_ = "network namespaces (ip netns + veth, " + std::to_string(hosts) +
                    " hosts; partitions by " + n->partitionMethod() + ")";
  return n;
}

TestNetwork::~TestNetwork() {
  if (!isolated_) return;
  std::vector<std::string> names{controllerNamespace()};
  for (int h = 0; h < hosts_; ++h)
    names.push_back(hostNamespace(h));
  for (const std::string& ns : names)
    shell("for p in $(ip netns pids " + ns + "); do kill -9 $p; done; ip netns del " + ns);
}

std::string TestNetwork::controllerAddress() const {
  return isolated_ ? "10.77.0.1" : "127.0.0.1";
}
std::string TestNetwork::controllerNamespace() const {
  return isolated_ || !prefix_.empty() ? prefix_ + "ctl" : "";
}
std::string TestNetwork::hostNamespace(int host) const {
  return isolated_ || !prefix_.empty() ? prefix_ + "h" + std::to_string(host) : "";
}
std::string TestNetwork::partitionMethod() const {
  return have_nft_ ? "nftables drop" : "link down";
}

Status TestNetwork::partition(int host) {
  if (!isolated_) return Status::unimplemented("no partition over loopback");
  const std::string ns = hostNamespace(host);
  ShellResult r;
  if (have_nft_) {
    r = shell("ip netns exec " + ns + " nft -f - <<'EOF'\n" +
              "table inet gpool_partition {\n"
              "  chain in { type filter hook input priority 0; policy accept; iifname \"eth0\" "
              "drop; }\n"
              "  chain out { type filter hook output priority 0; policy accept; oifname "
              "\"eth0\" drop; }\n"
              "}\nEOF");
  } else {
    r = shell("ip -n " + ns + " link set eth0 down");
  }
  if (r.rc != 0) return Status::internal("partition of " + ns + " failed: " + r.out);
  return Status::ok();
}

Status TestNetwork::heal(int host) {
  if (!isolated_) return Status::unimplemented("no partition over loopback");
  const std::string ns = hostNamespace(host);
  ShellResult r;
  if (have_nft_) {
    r = shell("ip netns exec " + ns + " nft delete table inet gpool_partition");
  } else {
    r = shell("ip -n " + ns + " link set eth0 up && ip -n " + ns + " route replace " +
              "10.77.0.1/32 via 10.77." + std::to_string(host + 1) + ".1");
  }
  if (r.rc != 0) return Status::internal("healing " + ns + " failed: " + r.out);
  return Status::ok();
}

Status TestNetwork::cutDatabase(const std::string& address) {
  if (!canCutDatabase()) {
    return Status::unimplemented("cutting a controller from the database needs namespaces and nft");
  }
  // Both directions, established connections included: packets vanish, as on a broken link
  // (nothing is refused, so the controller learns of it only by waiting).
  ShellResult r = shell("ip netns exec " + controllerNamespace() + " nft -f - <<'EOF'\n" +
                        "table inet gpool_db_cut {\n"
                        "  chain out { type filter hook output priority 0; policy accept;\n"
                        "    ip daddr " +
                        address +
                        " tcp dport 5432 drop;\n"
                        "    ip saddr " +
                        address +
                        " tcp sport 5432 drop; }\n"
                        "}\nEOF");
  if (r.rc != 0) return Status::internal("cutting " + address + " from the database: " + r.out);
  return Status::ok();
}

Status TestNetwork::healDatabase() {
  ShellResult r =
      shell("ip netns exec " + controllerNamespace() + " nft delete table inet gpool_db_cut");
  if (r.rc != 0) return Status::internal("healing the database cut: " + r.out);
  return Status::ok();
}

// ---------------------------------------------------------------- Daemon

Daemon::Daemon(std::string name, std::vector<std::string> argv, std::string netns, std::string log,
               mode_t umask_value)
    : name_(std::move(name)),
      argv_(std::move(argv)),
      netns_(std::move(netns)),
      log_(std::move(log)),
      umask_(umask_value) {}

Daemon::~Daemon() {
  if (pid_ > 0) (void)kill();
}

Status Daemon::start() {
  if (running()) return Status::failedPrecondition(name_ + " is already running");
  int log = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return Status::ioError("cannot open " + log_ + ": " + std::strerror(errno));
  int ns_fd = -1;
  if (!netns_.empty()) {
    ns_fd = ::open(("/run/netns/" + netns_).c_str(), O_RDONLY | O_CLOEXEC);
    if (ns_fd < 0) {
      ::close(log);
      return Status::ioError("cannot open namespace " + netns_ + ": " + std::strerror(errno));
    }
  }
  std::vector<char*> args;
  for (const std::string& a : argv_)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return Status::ioError(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (ns_fd >= 0 && ::setns(ns_fd, CLONE_NEWNET) != 0) ::_exit(125);
    ::setsid();
    ::umask(umask_);
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(log);
  if (ns_fd >= 0) ::close(ns_fd);
  pid_ = pid;
  exit_status_ = -1;
  return Status::ok();
}

bool Daemon::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pid_ = -1;
    return false;
  }
  return true;
}

int Daemon::wait(std::chrono::milliseconds timeout) {
  if (!waitFor([&] { return !running(); }, timeout, std::chrono::milliseconds(20))) return -1;
  return exit_status_;
}

Status Daemon::signal(int sig) {
  if (!running()) return Status::failedPrecondition(name_ + " is not running");
  if (::kill(pid_, sig) != 0) {
    return Status::ioError("kill " + std::to_string(pid_) + ": " + std::strerror(errno));
  }
  return Status::ok();
}

Status Daemon::kill() {
  if (!running()) return Status::ok();
  ::kill(pid_, SIGCONT);  // a stopped process takes SIGKILL anyway; keeps logs tidy
  ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  exit_status_ = 128 + SIGKILL;
  pid_ = -1;
  return Status::ok();
}

Status Daemon::stop(std::chrono::milliseconds grace) {
  if (!running()) return Status::ok();
  ::kill(pid_, SIGCONT);
  ::kill(pid_, SIGTERM);
  if (wait(grace) >= 0) return Status::ok();
  return kill();
}

std::string Daemon::logTail(size_t lines) const {
  std::string text = readText(log_);
  size_t at = text.size();
  for (size_t n = 0; n <= lines && at > 0; ++n) {
    size_t nl = text.rfind('\n', at - 1);
    if (nl == std::string::npos) {
      at = 0;
      break;
    }
    at = nl;
  }
  return text.substr(at);
}

// ---------------------------------------------------------------- TestDisk

TestDisk::TestDisk(Kind kind, std::string path, uint64_t size_mib)
    : kind_(kind), path_(std::move(path)), size_mib_(size_mib) {}

TestDisk::~TestDisk() {
  if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);  // a loop device detaches itself
  if (!image_.empty()) ::unlink(image_.c_str());
}

Status TestDisk::mount() {
  std::error_code ec;
  fs::create_directories(path_, ec);
  if (kind_ == Kind::kTmpfs) {
    const std::string opts = "size=" + std::to_string(size_mib_) + "m,mode=0755";
    if (::mount("tmpfs", path_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, opts.c_str()) != 0) {
      return Status::ioError("mount tmpfs on " + path_ + ": " + std::strerror(errno));
    }
  } else {
    // No blocks reserved for root: gpoold runs as root here and would use them.
    image_ = path_ + ".img";
    ShellResult r =
        shell("truncate -s " + std::to_string(size_mib_) + "M " + quote(image_) +
              " && mkfs.ext4 -q -F -m 0 " + quote(image_) + " && mount -o loop,errors=remount-ro " +
              quote(image_) + " " + quote(path_));
    if (r.rc != 0) return Status::ioError("ext4 image on " + path_ + ": " + r.out);
  }
  mounted_ = true;
  return Status::ok();
}

Status TestDisk::failReadOnly() {
  if (kind_ != Kind::kExt4) return Status::unimplemented("only an ext4 image fails read-only");
  // The loop device behind the mount: /sys/fs/ext4/<loopN>/trigger_fs_error.
  ShellResult dev = shell("basename $(findmnt -n -o SOURCE --target " + quote(path_) + ")");
  std::string name = dev.out.substr(0, dev.out.find('\n'));
  if (dev.rc != 0 || name.empty())
    return Status::internal("no device for " + path_ + ": " + dev.out);
  ShellResult r = shell("echo 1 > /sys/fs/ext4/" + name + "/trigger_fs_error");
  if (r.rc != 0) return Status::internal("trigger_fs_error on " + name + ": " + r.out);
  return Status::ok();
}

Status TestDisk::fill() {
  const std::string filler = path_ + "/.filler";
  int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return Status::ioError("cannot create " + filler + ": " + std::strerror(errno));
  std::vector<char> block(64 * 1024, 'x');
  // Large blocks, then small ones: to the last byte the file system takes.
  for (size_t size : {block.size(), size_t{4096}, size_t{512}, size_t{1}}) {
    for (;;) {
      ssize_t n = ::write(fd, block.data(), size);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      break;
    }
  }
  ::fsync(fd);
  ::close(fd);
  return Status::ok();
}

Status TestDisk::free() {
  const std::string filler = path_ + "/.filler";
  if (::unlink(filler.c_str()) != 0 && errno != ENOENT) {
    return Status::ioError("cannot remove " + filler + ": " + std::strerror(errno));
  }
  return Status::ok();
}

// ---------------------------------------------------------------- Pool

Result<std::unique_ptr<Pool>> Pool::start(const std::string& scenario, const PoolOptions& options) {
  std::unique_ptr<Pool> p(new Pool());
  p->options_ = options;
  p->scenario_ = scenario;
  std::string tmpl = (fs::temp_directory_path() / ("gpool-sys-" + scenario + "-XXXXXX")).string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return Status::ioError("mkdtemp: " + std::string(std::strerror(errno)));
  }
  p->dir_ = tmpl;
  ::chmod(p->dir_.c_str(), 0755);  // the test user's tasks and clients reach into it
  std::string why;
  p->network_ = TestNetwork::make(options.hosts, &why);
  p->root_ = ::geteuid() == 0 && p->network_->isolated();
  std::printf("[system] %s: %s in %s\n", scenario.c_str(), p->network_->describe().c_str(),
              p->dir_.c_str());
  std::fflush(stdout);
  GPOOL_ASSIGN_OR_RETURN(p->user_, testUser());
  p->socket_ = p->dir_ + "/gpoold.sock";
  p->sockets_.push_back(p->socket_);
  p->tls_ports_.assign(static_cast<size_t>(std::max(1, options.controllers)), 0);
  p->more_controllers_.resize(static_cast<size_t>(std::max(0, options.controllers - 1)));
  if (options.controllers > 1) {
    for (int i = 1; i < options.controllers; ++i) {
      p->sockets_.push_back(p->dir_ + "/gpoold-" + std::to_string(i) + ".sock");
      p->socket_ += "," + p->sockets_.back();  // clients know them all
    }
    store::testing::PgServerOptions pg;
    if (p->network_->isolated()) {
      // In the controller's namespace, on one loopback address per controller.
      pg.netns = p->network_->controllerNamespace();
      for (int i = 0; i < options.controllers; ++i)
        pg.listen_addresses += (i ? "," : "") + p->databaseAddress(i);
    }
    GPOOL_ASSIGN_OR_RETURN(p->pg_, store::testing::PgServer::start(pg));
  }
  if (options.scratch_tmpfs_mib > 0 && ::geteuid() == 0) {
    // The records and the agents' state on a tmpfs: tens of thousands of small files that a
    // disk mounted with `discard` takes minutes to delete.
    p->scratch_disk_ = std::make_unique<TestDisk>(TestDisk::Kind::kTmpfs, p->dir_ + "/scratch",
                                                  options.scratch_tmpfs_mib);
    GPOOL_RETURN_IF_ERROR(p->scratch_disk_->mount());
    fs::create_directories(p->dir_ + "/scratch/hosts");
    fs::create_symlink(p->dir_ + "/scratch/hosts", p->dir_ + "/hosts");
    p->records_ = p->dir_ + "/scratch/records";
  } else {
    p->records_ = p->dir_ + "/records";
  }
  fs::create_directories(p->records_);
  ::chmod(p->records_.c_str(), 0777);
  fs::create_directories(p->dir_ + "/store");
  p->store_ = p->dir_ + "/store/gpool.db";
  if (options.store_disk_mib > 0) {
    if (::geteuid() != 0) return Status::failedPrecondition("a disk for the store needs root");
    p->store_disk_ = std::make_unique<TestDisk>(TestDisk::Kind::kExt4, p->dir_ + "/store",
                                                options.store_disk_mib);
    GPOOL_RETURN_IF_ERROR(p->store_disk_->mount());
  }
  net::testing::TestCerts certs;
  GPOOL_RETURN_IF_ERROR(net::testing::makeTestCerts(p->dir_, &certs, {"10.77.0.1"}));
  p->certs_ca_ = certs.ca_file;
  p->certs_cert_ = certs.cert_file;
  p->certs_key_ = certs.key_file;
  p->admin_ = std::make_unique<net::HttpClient>(net::ClientEndpoint::unixSocket(p->sockets_[0]),
                                                std::chrono::seconds(10));
  GPOOL_RETURN_IF_ERROR(p->startGpoold());

  // One reusable join token for every agent: each exchanges it for its node credential. Only
  // an admin may make one; without root, nobody here is, and the agents use gpoold's socket
  // (where gpoold's own user is let in).
  if (::geteuid() == 0) {
    Result<net::Response> token =
        p->request(net::Method::kPost, "/v1/join-tokens",
                   json{{"name", "system-test"}, {"expires_in", "1h"}, {"reusable", true}}.dump());
    if (!token.ok()) return token.status();
    json token_body = json::parse(token->body, nullptr, false);
    if (token->status != 201 || !token_body.is_object() || !token_body.contains("token")) {
      return Status::internal("POST /v1/join-tokens answered " + std::to_string(token->status) +
                              ": " + token->body);
    }
    p->join_token_ = token_body["token"].get<std::string>();
  } else {
    std::printf(
        "[system] %s: agents over gpoold's Unix socket (not root: no admin to make a "
        "join token)\n",
        scenario.c_str());
  }

  const int total = options.hosts * options.agents_per_host;
  for (int i = 0; i < total; ++i) {
    const std::string node = p->node(i);
    const std::string host_dir = p->hostDir(i);
    fs::create_directories(host_dir);
    if (options.agent_tmpfs_mib > 0) {
      if (::geteuid() != 0) return Status::failedPrecondition("a tmpfs for an agent needs root");
      auto disk = std::make_unique<TestDisk>(TestDisk::Kind::kTmpfs, p->agentStateDir(i),
                                             options.agent_tmpfs_mib);
      GPOOL_RETURN_IF_ERROR(disk->mount());
      p->agent_disks_.push_back(std::move(disk));
    } else {
      fs::create_directories(p->agentStateDir(i));
    }
    const std::string config = host_dir + "/gpool-agent.toml";
    {
      std::ofstream out(config);
      out << "[agent]\n";
      for (const std::string& line : options.agent_keys)
        out << line << "\n";
      // Jobs can be pinned to a node through this label (JobPlan::node).
      out << "[agent.labels]\nnode = \"" << node << "\"\n";
    }
    std::vector<std::string> argv{kBin + "/src/agent/gpool-agent",
                                  "--config",
                                  config,
                                  "--node",
                                  node,
                                  "--token-file",
                                  host_dir + "/credential",
                                  "--state-dir",
                                  p->agentStateDir(i),
                                  "--vgpu-dir",
                                  host_dir + "/vgpu",
                                  "--fake-fixture",
                                  kSrc + "/src/gpu/fixtures/" + options.fixture,
                                  "--supervisor",
                                  kBin + "/src/agent/gpool-supervisor",
                                  "--no-cgroups",
                                  "--cpus",
                                  "128",
                                  "--ram",
                                  "1024G"};
    // Slices run only on nodes that enforce them (issue 20): the interposer, where it is built.
    const std::string interposer = kBin + "/src/vgpu/libgpool-vgpu.so";
    if (::access(interposer.c_str(), R_OK) == 0)
      argv.insert(argv.end(), {"--interposer", interposer});
    if (p->join_token_.empty()) {
      argv.insert(argv.end(), {"--unix-socket", p->socket_});
    } else {
      std::string controllers;  // every controller's TLS listener: agents follow the leader
      for (int port : p->tls_ports_) {
        controllers += (controllers.empty() ? "" : ",") + p->network_->controllerAddress() + ":" +
                       std::to_string(port);
      }
      argv.insert(argv.end(), {"--controller", controllers, "--ca", p->certs_ca_, "--join-token",
                               p->join_token_});
    }
    auto agent = std::make_unique<Daemon>(
        "agent " + node, argv, p->network_->hostNamespace(p->hostOf(i)), host_dir + "/agent.log");
    p->agent_started_us_.push_back(realNowUs());
    GPOOL_RETURN_IF_ERROR(agent->start());
    p->agents_.push_back(std::move(agent));
  }
  GPOOL_RETURN_IF_ERROR(p->waitNodesUp(std::chrono::seconds(60 + total / 2)));
  return p;
}

std::string Pool::node(int agent) const {
  const int host = agent / options_.agents_per_host;
  if (options_.agents_per_host == 1) return "h" + std::to_string(host);
  return "h" + std::to_string(host) + "-a" + std::to_string(agent % options_.agents_per_host);
}

std::string Pool::hostDir(int agent) const {
  return dir_ + "/hosts/" + node(agent);
}

TestDisk* Pool::agentDisk(int agent) {
  if (agent < 0 || static_cast<size_t>(agent) >= agent_disks_.size()) return nullptr;
  return agent_disks_[static_cast<size_t>(agent)].get();
}

std::string Pool::controllerSocket(int i) const {
  return sockets_[static_cast<size_t>(i)];
}

std::string Pool::databaseAddress(int i) const {
  if (options_.controllers < 2 || !network_->isolated()) return "";
  return "127.0.0." + std::to_string(2 + i);
}

Status Pool::writeConfigs() {
  for (int i = 0; i < std::max(1, options_.controllers); ++i) {
    const std::string path =
        dir_ + (i == 0 ? "/gpoold.toml" : "/gpoold-" + std::to_string(i) + ".toml");
    std::string store = store_;
    if (pg_) {
      store = databaseAddress(i).empty() ? pg_->conninfo() : pg_->tcpConninfo(databaseAddress(i));
    }
    std::ofstream out(path, std::ios::trunc);
    out << "[controller]\n"
        << "store = \"" << store << "\"\n"
        << "socket = \"" << sockets_[static_cast<size_t>(i)] << "\"\n"
        << "tls_listen = \"" << network_->controllerAddress() << ":"
        << tls_ports_[static_cast<size_t>(i)] << "\"\n"
        << "tls_cert = \"" << certs_cert_ << "\"\n"
        << "tls_key = \"" << certs_key_ << "\"\n"
        << "lease_duration = \"" << options_.lease_s << "s\"\n"
        << "heartbeat_interval = \"" << options_.heartbeat_s << "s\"\n"
        << "node_down_after = \"" << options_.node_down_after_s << "s\"\n"
        << "schedule_interval = \"" << options_.schedule_interval_s << "s\"\n";
    for (const std::string& line : options_.controller_keys)
      out << line << "\n";
    for (const std::string& line : options_.controller_sections)
      out << line << "\n";
    if (pg_) out << "[ha]\nenabled = true\nlease = \"" << options_.ha_lease << "\"\n";
    out << "[log]\nlevel = \"" << options_.log_level << "\"\n";
    if (!out) return Status::ioError("cannot write " + path);
  }
  return Status::ok();
}

Status Pool::startGpoold() {
  GPOOL_RETURN_IF_ERROR(startController(0));
  for (int i = 1; i < options_.controllers; ++i)
    GPOOL_RETURN_IF_ERROR(startController(i));
  return Status::ok();
}

Status Pool::startController(int i) {
  GPOOL_RETURN_IF_ERROR(writeConfigs());
  const std::string suffix = i == 0 ? "" : "-" + std::to_string(i);
  const std::string log = dir_ + "/gpoold" + suffix + ".log";
  std::error_code ec;
  const uintmax_t offset = fs::exists(log, ec) ? fs::file_size(log, ec) : 0;
  std::unique_ptr<Daemon>& handle =
      i == 0 ? gpoold_ : more_controllers_[static_cast<size_t>(i - 1)];
  if (!handle) {
    handle = std::make_unique<Daemon>(
        "gpoold" + suffix,
        std::vector<std::string>{kBin + "/src/controller/gpoold", "--config",
                                 dir_ + "/gpoold" + suffix + ".toml"},
        network_->controllerNamespace(), log, 077);
  }
  GPOOL_RETURN_IF_ERROR(handle->start());
  int& tls_port = tls_ports_[static_cast<size_t>(i)];
  // Serving: the TLS port is printed ("tls HOST:PORT"), and the socket answers (a standby
  // answers only 503: it says "standby" instead).
  bool ok = waitFor(
      [&] {
        if (!handle->running()) return true;
        std::string text = readText(log);
        text.erase(0, std::min<size_t>(offset, text.size()));
        if (tls_port == 0) {
          size_t at = text.find("\ntls ");
          at = at == std::string::npos ? (text.rfind("tls ", 0) == 0 ? 0 : at) : at + 1;
          if (at == std::string::npos) return false;
          size_t colon = text.find(':', at + 4);
          size_t nl = text.find('\n', at + 4);
          if (colon == std::string::npos || nl == std::string::npos || colon > nl) return false;
          tls_port = std::atoi(text.substr(colon + 1, nl - colon - 1).c_str());
          if (tls_port <= 0) return false;
        }
        if (pg_ &&
            (text.find("\nstandby\n") != std::string::npos || text.rfind("standby\n", 0) == 0)) {
          return true;
        }
        if (pg_ && text.find("\nready\n") == std::string::npos && text.rfind("ready\n", 0) != 0)
          return false;
        net::HttpClient health(net::ClientEndpoint::unixSocket(sockets_[static_cast<size_t>(i)]),
                               std::chrono::seconds(10));
        auto r = health.get("/v1/health");
        return r.ok() && r->status == 200;
      },
      std::chrono::seconds(60));
  if (!handle->running()) {
    return Status::unavailable(handle->name() + " exited at start; its log:\n" + handle->logTail());
  }
  if (!ok) {
    return Status::deadlineExceeded(handle->name() + " did not serve within 60 s:\n" +
                                    handle->logTail());
  }
  // Later starts keep the port: the agents' command lines name it.
  return writeConfigs();
}

Status Pool::restartGpoold() {
  if (gpoold_->running()) GPOOL_RETURN_IF_ERROR(gpoold_->stop());
  return startGpoold();
}

Status Pool::restartAgent(int i) {
  Daemon& a = agent(i);
  if (a.running()) GPOOL_RETURN_IF_ERROR(a.kill());
  agent_started_us_[static_cast<size_t>(i)] = realNowUs();
  return a.start();
}

uint64_t Pool::gpooldLogMark(int which) {
  std::error_code ec;
  uintmax_t size = fs::file_size(controller(which).log(), ec);
  return ec ? 0 : static_cast<uint64_t>(size);
}

namespace {

// When the first line of `log` after `mark` that contains `needle` was logged, from its own
// timestamp; nullopt when there is none yet.
std::optional<int64_t> loggedAfter(const std::string& log, uint64_t mark,
                                   const std::string& needle) {
  std::ifstream in(log);
  in.seekg(static_cast<std::streamoff>(mark));
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(needle) == std::string::npos) continue;
    // "2026-12-02T16:05:03.123456Z info gpoold[4242]: ..."
    std::tm tm{};
    int micros = 0;
    if (line.size() < 27 || ::strptime(line.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr ||
        line[19] != '.') {
      return realNowUs();  // not the text format: when we saw it
    }
    micros = std::atoi(line.substr(20, 6).c_str());
    return static_cast<int64_t>(::timegm(&tm)) * 1'000'000 + micros;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> Pool::helloAfter(const std::string& node, uint64_t mark, int which) {
  return loggedAfter(controller(which).log(), mark, "agent of node " + node + " said hello");
}

std::optional<int64_t> Pool::ledAfter(int i, uint64_t mark) {
  return loggedAfter(controller(i).log(), mark, "leading: took the controller lease");
}

int Pool::leader() {
  for (int i = 0; i < std::max(1, options_.controllers); ++i) {
    if (!controller(i).running()) continue;
    net::HttpClient c(net::ClientEndpoint::unixSocket(sockets_[static_cast<size_t>(i)]),
                      std::chrono::seconds(5));
    auto r = c.get("/v1/health");
    if (r.ok() && r->status == 200) return i;
  }
  return -1;
}

int Pool::gpooldLogLines(const std::string& text) {
  std::ifstream in(gpoold_->log());
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.find(text) != std::string::npos) ++n;
  }
  return n;
}

std::string Pool::nodeState(const std::string& node) {
  Result<json> nodes = get("/v1/nodes");
  if (!nodes.ok()) return "";
  for (const json& n : nodes->value("nodes", json::array())) {
    if (n.value("name", "") == node) return n.value("state", "");
  }
  return "";
}

Status Pool::waitNodesUp(std::chrono::milliseconds timeout) {
  std::vector<std::string> names;
  std::vector<int64_t> started_us;
  for (int i = 0; i < agents(); ++i) {
    if (!agent(i).running()) continue;
    names.push_back(node(i));
    started_us.push_back(agent_started_us_[static_cast<size_t>(i)]);
  }
  std::string last;
  bool ok = waitFor(
      [&] {
        Result<json> nodes = get("/v1/nodes");
        if (!nodes.ok()) {
          last = nodes.status().toString();
          return false;
        }
        size_t up = 0;
        for (const json& n : nodes->value("nodes", json::array())) {
          const std::string name = n.value("name", "");
          auto it = std::find(names.begin(), names.end(), name);
          if (it == names.end()) continue;
          // Up, and heard from since its agent last started.
          const int64_t since = started_us[static_cast<size_t>(it - names.begin())];
          if (n.value("state", "DOWN") != "DOWN" && n.value("last_seen_us", int64_t{0}) >= since) {
            ++up;
          }
        }
        last = std::to_string(up) + " of " + std::to_string(names.size()) + " up";
        return up == names.size();
      },
      timeout, std::chrono::milliseconds(50));
  if (ok) return Status::ok();
  std::string logs;
  for (int i = 0; i < agents() && i < 2; ++i)
    logs += "\n-- " + agent(i).name() + ":\n" + agent(i).logTail(10);
  return Status::deadlineExceeded("nodes not up: " + last + logs + "\n-- gpoold:\n" +
                                  gpoold_->logTail(10));
}

Result<net::Response> Pool::request(net::Method method, const std::string& target,
                                    const std::string& body) {
  if (sockets_.size() > 1) return requestLeader(method, target, body);
  Result<net::Response> r = admin_->request(method, target, body);
  if (!r.ok()) admin_->close();
  return r;
}

Result<net::Response> Pool::requestLeader(net::Method method, const std::string& target,
                                          const std::string& body) {
  Result<net::Response> r = Status::unavailable("no controller");
  for (size_t tried = 0; tried < sockets_.size(); ++tried) {
    r = admin_->request(method, target, body);
    // Another controller only when this one certainly did nothing: no connection, or it
    // does not lead (a standby, or a deposed leader whose write was refused).
    const bool refused = !r.ok() && r.status().message().rfind("cannot connect to", 0) == 0;
    const bool not_leading =
        r.ok() && r->status == 503 &&
        (r->header("Gpool-Leader").has_value() || r->body.find("standby") != std::string::npos ||
         r->body.find("not the leader") != std::string::npos);
    if (!r.ok()) admin_->close();
    if (!refused && !not_leading) return r;
    admin_at_ = (admin_at_ + 1) % sockets_.size();
    admin_ = std::make_unique<net::HttpClient>(net::ClientEndpoint::unixSocket(sockets_[admin_at_]),
                                               std::chrono::seconds(10));
  }
  return r;
}

Result<json> Pool::get(const std::string& target) {
  GPOOL_ASSIGN_OR_RETURN(net::Response r, request(net::Method::kGet, target));
  if (r.status != 200) {
    return Status::unavailable("GET " + target + " answered " + std::to_string(r.status) + ": " +
                               r.body.substr(0, 300));
  }
  json body = json::parse(r.body, nullptr, false);
  if (body.is_discarded()) return Status::internal("GET " + target + ": not JSON");
  return body;
}

Result<json> Pool::job(int64_t id) {
  return get("/v1/jobs/" + std::to_string(id));
}

json taskSpec(const JobPlan& plan, const std::string& records, const std::string& working_dir,
              int tick_ms) {
  api::JobSpec spec;
  spec.name = plan.tag;
  spec.command = {kBin + "/tests/system/gpool-system-helper",
                  "task",
                  "--records",
                  records,
                  "--tag",
                  plan.tag,
                  "--run-ms",
                  std::to_string(plan.run_ms),
                  "--tick-ms",
                  std::to_string(tick_ms),
                  "--exit",
                  std::to_string(plan.exit_code),
                  "--term-delay-ms",
                  std::to_string(plan.term_delay_ms)};
  spec.working_dir = working_dir;
  spec.resources.gpus_milli = static_cast<uint32_t>(plan.gpus_milli);
  spec.preemptible = plan.preemptible;
  if (!plan.node.empty()) spec.constraints.node_labels["node"] = plan.node;
  if (!plan.min_cuda.empty()) {
    Result<api::CudaVersion> cuda = api::parseCudaVersion(plan.min_cuda);
    if (cuda.ok()) spec.constraints.min_cuda = *cuda;
  }
  return api::toJson(spec);
}

Result<std::string> testUser() {
  if (::geteuid() != 0) {
    const passwd* pw = ::getpwuid(::geteuid());
    return std::string(pw ? pw->pw_name : "");
  }
  GPOOL_RETURN_IF_ERROR(ensureUser(kUser));
  return std::string(kUser);
}

std::unique_ptr<Daemon> startClient(const std::string& socket, const std::vector<json>& specs,
                                    int clients, int interval_ms, const std::string& dir,
                                    const std::string& name, const std::string& user) {
  const std::string plan = dir + "/submit-" + name + ".plan";
  {
    std::ofstream out(plan, std::ios::trunc);
    for (const json& spec : specs)
      out << spec.dump() << "\n";
  }
  ::chmod(plan.c_str(), 0644);
  const std::string out = dir + "/submit-" + name + ".out";
  std::ofstream(out, std::ios::app).flush();
  if (const passwd* pw = ::getpwnam(user.c_str()); pw != nullptr) {
    if (::chown(out.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      std::fprintf(stderr, "[system] chown %s: %s\n", out.c_str(), std::strerror(errno));
    }
  }
  std::string cmd = quote(kBin + "/tests/system/gpool-system-helper") + " submit --socket " +
                    quote(socket) + " --plan " + quote(plan) + " --out " + quote(out) +
                    " --clients " + std::to_string(clients) + " --interval-ms " +
                    std::to_string(interval_ms);
  // The client runs as the test user: gpoold takes its identity from the socket.
  std::vector<std::string> argv{"/bin/sh", "-c", cmd};
  if (::geteuid() == 0) argv = {"/usr/sbin/runuser", "-u", user, "--", "/bin/sh", "-c", cmd};
  auto d = std::make_unique<Daemon>("client " + name, argv, "", dir + "/submit-" + name + ".log");
  Status s = d->start();
  if (!s.isOk()) std::fprintf(stderr, "[system] cannot start a client: %s\n", s.toString().c_str());
  return d;
}

std::vector<Submission> readSubmissions(const std::string& path) {
  std::vector<Submission> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    Submission s;
    words >> s.outcome >> s.tag;
    if (s.outcome == "ack") {
      words >> s.id >> s.sent_us >> s.latency_us;
    } else {
      words >> s.sent_us >> s.latency_us;
      std::getline(words, s.detail);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::unique_ptr<Daemon> Pool::submitInBackground(const std::vector<JobPlan>& jobs, int clients,
                                                 int interval_ms, const std::string& name) {
  std::vector<json> specs;
  specs.reserve(jobs.size());
  for (const JobPlan& j : jobs)
    specs.push_back(taskSpec(j, records_, dir_, options_.tick_ms));
  return startClient(socket_, specs, clients, interval_ms, dir_, name, user_);
}

std::vector<Submission> Pool::submissions(const std::string& name) {
  return readSubmissions(dir_ + "/submit-" + name + ".out");
}

std::vector<Submission> Pool::submit(const std::vector<JobPlan>& jobs, int clients,
                                     int interval_ms) {
  const std::string name = "s" + std::to_string(++submit_runs_);
  std::unique_ptr<Daemon> client = submitInBackground(jobs, clients, interval_ms, name);
  const int rc = client->wait(std::chrono::minutes(30));
  if (rc != 0) {
    std::fprintf(stderr, "[system] client %s exited %d: %s\n", name.c_str(), rc,
                 client->logTail().c_str());
  }
  return submissions(name);
}

Result<std::vector<ControllerJob>> Pool::jobs() {
  std::vector<ControllerJob> out;
  const char* states[] = {"PENDING",   "RUNNING", "COMPLETING", "COMPLETED", "FAILED",
                          "CANCELLED", "TIMEOUT", "PREEMPTED",  "NODE_FAIL", "OUT_OF_MEMORY"};
  std::string query = "/v1/jobs?limit=1000";
  for (const char* s : states)
    query += std::string("&state=") + s;
  std::string cursor;
  for (int page = 0; page < 1000; ++page) {
    GPOOL_ASSIGN_OR_RETURN(json body, get(query + (cursor.empty() ? "" : "&after=" + cursor)));
    const json& list = body.value("jobs", json::array());
    for (const json& j : list) {
      ControllerJob c;
      c.id = j.value("id", int64_t{0});
      c.name = j.contains("spec") ? j["spec"].value("name", "") : "";
      c.state = j.value("state", "");
      if (j.contains("exit_code")) c.exit_code = j["exit_code"].get<int>();
      c.submit_us = j.value("submit_time_us", int64_t{0});
      if (j.contains("start_time_us")) c.start_us = j["start_time_us"].get<int64_t>();
      if (j.contains("end_time_us")) c.end_us = j["end_time_us"].get<int64_t>();
      c.requeues = j.value("requeue_count", 0);
      if (j.contains("spec") && j["spec"].contains("resources")) {
        c.gpus = j["spec"]["resources"].value("gpus_milli", 0) / 1000.0;
      }
      for (const json& a : j.value("allocations", json::array()))
        c.nodes.push_back(a.value("node", ""));
      out.push_back(std::move(c));
    }
    if (!body.contains("next_after") || body["next_after"].is_null() || list.empty()) break;
    cursor = body["next_after"].dump();
  }
  return out;
}

std::vector<TaskRun> Pool::runs() {
  Result<std::vector<TaskRun>> r = readRuns(records_);
  if (!r.ok()) {
    std::fprintf(stderr, "[system] records: %s\n", r.status().toString().c_str());
    return {};
  }
  return *r;
}

Status Pool::waitAllFinished(std::chrono::milliseconds timeout) {
  std::string last;
  bool ok = waitFor(
      [&] {
        Result<json> body = get("/v1/jobs?limit=5&state=PENDING&state=RUNNING&state=COMPLETING");
        if (!body.ok()) {
          last = body.status().toString();
          return false;
        }
        last = body->value("jobs", json::array()).dump().substr(0, 600);
        return body->value("jobs", json::array()).empty();
      },
      timeout, std::chrono::milliseconds(200));
  if (ok) return Status::ok();
  return Status::deadlineExceeded("jobs still unfinished: " + last);
}

CheckResult Pool::check(const std::vector<Submission>& subs, CheckOptions options) {
  options.now_us = realNowUs();
  if (options.silent_after_us < 10LL * options_.tick_ms * 1000) {
    options.silent_after_us = 10LL * options_.tick_ms * 1000;
  }
  if (!options.usage_gpu_s) {
    // The test user's row: the scenario's jobs are all theirs (a pool per scenario).
    Result<json> usage = get("/v1/usage?by=user");
    if (usage.ok()) {
      double hours = 0;
      for (const json& row : usage->value("rows", json::array())) {
        if (row.value("key", "") == user_) hours = row.value("gpu_hours", 0.0);
      }
      options.usage_gpu_s = hours * 3600;
    }
  }
  Result<std::vector<ControllerJob>> all = jobs();
  CheckResult r;
  if (!all.ok()) {
    r.problems.push_back("cannot list the controller's jobs: " + all.status().toString());
    r.lost = static_cast<int>(subs.size());
    return r;
  }
  return system_test::check(subs, *all, runs(), options);
}

std::vector<pid_t> Pool::leftoverProcesses() {
  // Ours are those whose command line names this run's directory (tasks, supervisors, clients)
  // and that no daemon handle stands for.
  std::vector<pid_t> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    const pid_t pid = static_cast<pid_t>(std::atol(name.c_str()));
    if (pid == ::getpid()) continue;
    bool daemon = gpoold_ && gpoold_->pid() == pid;
    for (const auto& c : more_controllers_)
      daemon = daemon || (c && c->pid() == pid);
    for (const auto& a : agents_)
      daemon = daemon || a->pid() == pid;
    if (daemon) continue;
    std::string cmdline = readText("/proc/" + name + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(dir_ + "/") != std::string::npos) out.push_back(pid);
  }
  return out;
}

Pool::~Pool() {
  for (auto& a : agents_)
    if (a) (void)a->kill();
  if (gpoold_) (void)gpoold_->kill();
  for (auto& c : more_controllers_)
    if (c) (void)c->kill();
  pg_.reset();  // before the namespace it runs in goes
  // Tasks and supervisors outlive their agents by design: end them by pid.
  for (int round = 0; round < 3; ++round) {
    std::vector<pid_t> left = leftoverProcesses();
    if (left.empty()) break;
    for (pid_t pid : left)
      ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  network_.reset();  // also ends whatever still runs in its namespaces
  agent_disks_.clear();
  store_disk_.reset();
  scratch_disk_.reset();
  const char* keep = std::getenv("GPOOL_SYSTEM_KEEP");
  if (keep == nullptr || std::string(keep) != "1") {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  } else {
    std::printf("[system] kept %s\n", dir_.c_str());
  }
}

// ---------------------------------------------------------------- Figures

void addCheck(Figures* f, const CheckResult& r) {
  json& v = f->values;
  v["jobs"] = r.submitted;
  v["acked"] = r.acked;
  v["refused"] = r.refused;
  v["runs"] = r.runs;
  v["double_run_s"] = r.double_run_s;
  v["reruns"] = r.reruns;
  v["attempt_mismatch"] = r.attempt_mismatch;
  v["lost"] = r.lost;
  v["duplicated"] = r.duplicated;
  v["stuck_running"] = r.stuck_running;
  v["state_mismatch"] = r.state_mismatch;
  v["id_mismatch"] = r.id_mismatch;
  v["time_mismatch"] = r.time_mismatch;
  v["max_time_error_s"] = r.max_time_error_s;
  if (r.usage_gpu_s >= 0) {
    v["usage_charged_gpu_s"] = r.usage_gpu_s;
    v["usage_used_gpu_s"] = r.task_gpu_s;
  }
  v["usage_mismatch"] = r.usage_mismatch;
  v["unfinished"] = r.unfinished;
  v["final_states"] = r.final_states;
}

void Figures::record() const {
  json row = values;
  row["scenario"] = scenario;
  row["network"] = network;
  std::printf("[system] figures %s\n", row.dump().c_str());
  std::fflush(stdout);
  const char* path = std::getenv("GPOOL_SYSTEM_FIGURES");
  if (path == nullptr || *path == '\0') return;
  int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  ::flock(fd, LOCK_EX);
  std::string line = row.dump() + "\n";
  ssize_t n = ::write(fd, line.data(), line.size());
  (void)n;
  ::close(fd);
}

}  // namespace gpool::system_test
