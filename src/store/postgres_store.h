#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "common/result.h"
#include "store/sql_store.h"

namespace gpool::store {

struct PostgresOptions {
  // A libpq connection string, e.g. "host=/run/postgresql dbname=gpool" or
  // "postgresql://gpool@db.example:5432/gpool?sslmode=verify-full".
  std::string conninfo;
  // Connections opened at most; also the number of calls that run at once.
  size_t pool_size = 4;
  // High availability (docs/ha.md): every write transaction requires this controller's fencing
  // token to be the current, unexpired one of the controller_lease row (leader_lease.h), and is
  // refused (Unavailable, "not the leader") otherwise; until setFenceToken gives a token, every
  // write is refused. A connection left idle inside a transaction this long is closed by the
  // server, so that a paused controller's open write cannot hold a takeover back.
  bool fenced = false;
  int64_t idle_in_transaction_timeout_ms = 10'000;
};

// The store for larger and highly available sites: a PostgreSQL database reached with libpq.
// Commits are durable as the server is configured (synchronous_commit=on, the default, waits
// for the WAL flush; with a synchronous standby, for the standby too).
//
// Concurrent writers each get a pooled connection; transactions run at READ COMMITTED and every
// job transition names the state it expects in its UPDATE, so two controllers can never both
// move the same job. A broken connection is replaced on the next call.
class PostgresStore final : public SqlStore {
 public:
  // Connects and migrates the schema to kSchemaVersion (serialised between processes by an
  // advisory lock). Unavailable when the server cannot be reached; FailedPrecondition when the
  // database was written by a newer gpool.
  static Result<std::unique_ptr<PostgresStore>> open(const PostgresOptions& options);

  // The fencing token the writes of a fenced store carry from now on (0: none, every write is
  // refused). Thread-safe; a write already past its check keeps the token it checked.
  void setFenceToken(int64_t token) { fence_token_.store(token); }
  int64_t fenceToken() const { return fence_token_.load(); }

 private:
  PostgresStore(ConnectionPool::Factory factory, size_t pool_size);
  // The write guard of a fenced store: locks the lease row FOR SHARE (a takeover's UPDATE then
  // waits for this transaction) and requires this store's token, unexpired.
  Status checkFence(Txn& tx);

  std::atomic<int64_t> fence_token_{0};
};

}  // namespace gpool::store
