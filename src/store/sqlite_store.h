#pragma once

#include <string>

#include "common/result.h"
#include "store/sql_store.h"

namespace gpool::store {

struct SqliteOptions {
  // FULL (the default) syncs the write-ahead log on every commit, so an acknowledged change
  // survives a power loss as well as a crash. NORMAL syncs only at checkpoints: commits survive
  // a process crash but the last ones may be lost on power loss; it is several times faster on
  // slow disks. See docs/store.md.
  std::string synchronous = "FULL";
  // How long a writer waits for another process's write lock before failing with Aborted.
  int busy_timeout_ms = 5000;
};

// The embedded default store: one SQLite file in WAL mode with foreign keys on.
//
// One writer: every write goes through group commit (SqlStore::groupCommit), so one thread at a
// time writes and concurrent writers share a transaction and its fsync. Reads run in parallel
// on up to kReaders connections (WAL readers never block the writer). Another process may
// open the same file (it then waits up to `busy_timeout_ms` for the write lock).
class SqliteStore final : public SqlStore {
 public:
  // Opens (creating when missing) the database at `path` and migrates it to kSchemaVersion.
  // FailedPrecondition when the file was written by a newer gpool; IoError when it cannot be
  // opened.
  static Result<std::unique_ptr<SqliteStore>> open(const std::string& path,
                                                   const SqliteOptions& options = {});

 private:
  static constexpr size_t kReaders = 4;
  explicit SqliteStore(ConnectionPool::Factory factory);
};

}  // namespace gpool::store
