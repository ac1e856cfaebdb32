#pragma once

#include <memory>
#include <string>

#include "common/result.h"

namespace gpool::store::testing {

struct PgServerOptions {
  // The test server runs with fsync=off (fast, and crash safety of PostgreSQL is not what the
  // tests check); the benchmark turns it on to measure durable commits.
  bool fsync = false;
  // Put the data directory on /dev/shm when it has room (creating the cluster's ~1,000 files
  // on a busy disk takes seconds; on tmpfs a fraction of one). The benchmark keeps it on disk.
  bool prefer_memory = true;
  // Also listen on TCP at these addresses (PostgreSQL's listen_addresses, port 5432), e.g.
  // "127.0.0.2,127.0.0.3": the system tests cut one controller's path to the database with
  // nftables and keep the other's. "" (the default): the Unix socket only.
  std::string listen_addresses;
  // Start the server inside this network namespace (`ip netns exec`; root only), so that its
  // TCP addresses are the namespace's own. "": this process's namespace.
  std::string netns;
};

// A throw-away PostgreSQL server for tests and benchmarks: a data directory in a fresh temp
// dir, listening only on a Unix socket inside it (no TCP port, so servers of parallel test
// processes never collide). Run as the `postgres` system user when the caller is root
// (PostgreSQL refuses to run as root), as the caller otherwise.
//
// The server never outlives the test process: a watchdog child holds the read end of a pipe
// whose write end only this process has; when the pipe closes (normal exit, crash, sanitizer
// abort or SIGKILL alike) it stops the server and removes its directory.
//
// initdb runs once per build tree: its result is kept as a template under the build directory
// (guarded by a file lock) and copied for each server, which makes a start cost ~0.3 s.
//
// Thread-safety: none needed; one instance per process.
class PgServer {
 public:
  // Starts a server. FailedPrecondition naming the Debian package when PostgreSQL's server
  // binaries are missing.
  static Result<std::unique_ptr<PgServer>> start(const PgServerOptions& options = {});
  ~PgServer();  // stops the server (immediate shutdown) and removes its directory

  // libpq connection string for database `dbname`.
  std::string conninfo(const std::string& dbname = "postgres") const;
  // The same over TCP to `host` (one of PgServerOptions::listen_addresses).
  std::string tcpConninfo(const std::string& host, const std::string& dbname = "postgres") const;
  const std::string& socketDir() const { return socket_dir_; }

 private:
  PgServer() = default;
  std::string bin_dir_;
  std::string root_;
  std::string data_dir_;
  std::string socket_dir_;
  bool as_postgres_ = false;
  int watchdog_fd_ = -1;  // write end of the watchdog's pipe
  int watchdog_pid_ = -1;
};

}  // namespace gpool::store::testing
