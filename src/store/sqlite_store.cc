#include "store/sqlite_store.h"

namespace gpool::store {

SqliteStore::SqliteStore(ConnectionPool::Factory factory)
    : SqlStore(Dialect::kSqlite, std::move(factory), kReaders, /*group_commit=*/true) {}

Result<std::unique_ptr<SqliteStore>> SqliteStore::open(const std::string& path,
                                                       const SqliteOptions& options) {
  // Fail here, with the real error, rather than on the first call.
  GPOOL_ASSIGN_OR_RETURN(auto probe,
                         openSqliteConnection(path, options.synchronous, options.busy_timeout_ms));
  probe.reset();
  auto factory = [path, options]() {
    return openSqliteConnection(path, options.synchronous, options.busy_timeout_ms);
  };
  std::unique_ptr<SqliteStore> store(new SqliteStore(factory));
  GPOOL_RETURN_IF_ERROR(store->migrate().withContext("sqlite store '" + path + "'"));
  return store;
}

}  // namespace gpool::store
