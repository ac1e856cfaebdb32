#pragma once

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

 private:
  PostgresStore(ConnectionPool::Factory factory, size_t pool_size);
};

}  // namespace gpool::store
