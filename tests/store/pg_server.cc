#include "store/pg_server.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace gpool::store::testing {
namespace {

namespace fs = std::filesystem;

// The newest /usr/lib/postgresql/<version>/bin holding initdb and pg_ctl.
std::string findBinDir() {
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int version = std::atoi(entry.path().filename().c_str());
    fs::path bin = entry.path() / "bin";
    if (version > best_version && fs::exists(bin / "initdb") && fs::exists(bin / "pg_ctl")) {
      best_version = version;
      best = bin.string();
    }
  }
  return best;
}

Status run(const std::string& command) {
  int rc = std::system(command.c_str());
  if (rc != 0) {
    return Status::internal("command failed (status " + std::to_string(rc) + "): " + command);
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<PgServer>> PgServer::start(const PgServerOptions& options) {
  std::unique_ptr<PgServer> server(new PgServer());
  server->bin_dir_ = findBinDir();
  if (server->bin_dir_.empty()) {
    return Status::failedPrecondition(
        "PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin: "
        "install the Debian package `postgresql` (scripts/install-deps.sh does)");
  }
  uid_t uid = 0;
  gid_t gid = 0;
  if (geteuid() == 0) {
    const passwd* pw = getpwnam("postgres");
    if (!pw) {
      return Status::failedPrecondition(
          "running as root but there is no `postgres` system user to run the test server as: "
          "install the Debian package `postgresql`");
    }
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    server->as_postgres_ = true;
  }
  const std::string as = server->as_postgres_ ? "runuser -u postgres -- " : "";
  const std::string bin = server->bin_dir_ + "/";

  std::string parent = "/tmp";
  struct statvfs shm {};
  constexpr uint64_t kShmNeeded = uint64_t{512} << 20;
  if (options.prefer_memory && ::statvfs("/dev/shm", &shm) == 0 &&
      static_cast<uint64_t>(shm.f_bavail) * shm.f_frsize >= kShmNeeded) {
    parent = "/dev/shm";
  }
  std::string tmpl = parent + "/gpool-pg-XXXXXX";
  if (!mkdtemp(tmpl.data())) {
    return Status::ioError("mkdtemp failed in " + parent + " for the PostgreSQL test server");
  }
  server->root_ = tmpl;
  server->data_dir_ = server->root_ + "/data";
  server->socket_dir_ = server->root_ + "/sock";
  ::chmod(server->root_.c_str(), 0755);
  ::mkdir(server->socket_dir_.c_str(), 0755);
  if (server->as_postgres_ && ::chown(server->socket_dir_.c_str(), uid, gid) != 0) {
    return Status::ioError("cannot chown " + server->socket_dir_ + " to postgres");
  }

  // One initdb per build tree: the template is created under an exclusive lock, then copied.
  std::string cache = std::string(GPOOL_BINARY_DIR) + "/tests/store/pg-template-" +
                      fs::path(server->bin_dir_).parent_path().filename().string() +
                      (server->as_postgres_ ? "-postgres" : "-user");
  std::string lock_path = cache + ".lock";
  std::error_code ec;
  fs::create_directories(fs::path(cache).parent_path(), ec);
  int lock_fd = ::open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock_fd < 0) return Status::ioError("cannot open " + lock_path);
  ::flock(lock_fd, LOCK_EX);
  Status s;
  if (!fs::exists(cache + "/PG_VERSION")) {
    std::string building = cache + ".building";
    fs::remove_all(building, ec);
    ::mkdir(building.c_str(), 0700);
    if (server->as_postgres_ && ::chown(building.c_str(), uid, gid) != 0) {
      s = Status::ioError("cannot chown " + building + " to postgres");
    }
    if (s.isOk()) {
      s = run(as + bin + "initdb --no-sync -A trust -U gpool -E UTF8 --locale=C -D " + building +
              " >/dev/null");
    }
    if (s.isOk()) {
      fs::remove_all(cache, ec);
      fs::rename(building, cache, ec);
      if (ec) s = Status::ioError("cannot move " + building + ": " + ec.message());
    }
  }
  ::flock(lock_fd, LOCK_UN);
  ::close(lock_fd);
  GPOOL_RETURN_IF_ERROR(s.withContext("initdb of the PostgreSQL test template"));
  GPOOL_RETURN_IF_ERROR(run("cp -a " + cache + " " + server->data_dir_));
  if (!options.listen_addresses.empty()) {
    // initdb's pg_hba.conf trusts 127.0.0.1 only; the other loopback addresses too.
    GPOOL_RETURN_IF_ERROR(
        run("echo 'host all all 127.0.0.0/8 trust' >> " + server->data_dir_ + "/pg_hba.conf"));
  }

  std::string opts = "-k " + server->socket_dir_ +
                     " -c listen_addresses=" + options.listen_addresses +
                     " -c max_connections=40 -c shared_buffers=32MB"
                     " -c min_wal_size=32MB -c max_wal_size=256MB" +
                     (options.fsync ? "" : " -c fsync=off -c full_page_writes=off");
  // The watchdog first, so that even a server that fails half-way through starting is cleaned
  // up. Everything it needs is prepared before fork(); the child only reads and execs.
  const std::string cleanup = as + bin + "pg_ctl -D " + server->data_dir_ +
                              " -m immediate -w stop >/dev/null 2>&1; rm -rf " + server->root_;
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Status::ioError("pipe2 failed");
  pid_t pid = ::fork();
  if (pid < 0) return Status::ioError("fork of the PostgreSQL watchdog failed");
  if (pid == 0) {
    ::close(pipe_fds[1]);
    char byte;
    while (::read(pipe_fds[0], &byte, 1) != 0) {
    }
    ::execl("/bin/sh", "sh", "-c", cleanup.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(pipe_fds[0]);
  server->watchdog_fd_ = pipe_fds[1];
  server->watchdog_pid_ = pid;

  const std::string in_netns = options.netns.empty() ? "" : "ip netns exec " + options.netns + " ";
  GPOOL_RETURN_IF_ERROR(run(in_netns + as + bin + "pg_ctl -D " + server->data_dir_ + " -o \"" +
                            opts + "\" -w -t 60 -l " + server->socket_dir_ +
                            "/server.log start >/dev/null")
                            .withContext("starting the PostgreSQL test server"));
  return server;
}

PgServer::~PgServer() {
  // Closing the pipe is what stops the server (see the class comment); wait for it.
  if (watchdog_pid_ > 0) {
    ::close(watchdog_fd_);
    int status = 0;
    ::waitpid(watchdog_pid_, &status, 0);
  }
  std::error_code ec;
  if (!root_.empty()) fs::remove_all(root_, ec);
}

std::string PgServer::conninfo(const std::string& dbname) const {
  return "host=" + socket_dir_ + " port=5432 user=gpool dbname=" + dbname;
}

std::string PgServer::tcpConninfo(const std::string& host, const std::string& dbname) const {
  return "host=" + host + " port=5432 user=gpool dbname=" + dbname;
}

}  // namespace gpool::store::testing
