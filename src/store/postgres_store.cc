#include "store/postgres_store.h"

#include "store/leader_lease.h"

namespace gpool::store {

PostgresStore::PostgresStore(ConnectionPool::Factory factory, size_t pool_size)
    : SqlStore(Dialect::kPostgres, std::move(factory), pool_size, /*group_commit=*/false) {}

Result<std::unique_ptr<PostgresStore>> PostgresStore::open(const PostgresOptions& options) {
  if (options.conninfo.empty()) {
    return Status::invalidArgument("postgres store: empty connection string");
  }
  auto factory =
      [conninfo = options.conninfo, fenced = options.fenced,
       idle_ms =
           options.idle_in_transaction_timeout_ms]() -> Result<std::unique_ptr<SqlConnection>> {
    GPOOL_ASSIGN_OR_RETURN(auto conn, openPostgresConnection(conninfo));
    if (fenced && idle_ms > 0) {
      GPOOL_RETURN_IF_ERROR(
          conn->execScript("SET idle_in_transaction_session_timeout = " + std::to_string(idle_ms)));
    }
    return conn;
  };
  std::unique_ptr<PostgresStore> store(new PostgresStore(factory, options.pool_size));
  GPOOL_RETURN_IF_ERROR(store->migrate().withContext("postgres store"));
  if (options.fenced) {
    {
      GPOOL_ASSIGN_OR_RETURN(auto conn, factory());
      GPOOL_RETURN_IF_ERROR(ensureLeaseTable(*conn).withContext("postgres store"));
    }
    PostgresStore* self = store.get();
    store->setWriteGuard([self](Txn& tx) { return self->checkFence(tx); });
  }
  return store;
}

Status PostgresStore::checkFence(Txn& tx) {
  const int64_t token = fence_token_.load();
  if (token <= 0) {
    return Status::unavailable(
        "not the leader: this controller is a standby and holds no controller lease");
  }
  GPOOL_ASSIGN_OR_RETURN(auto rows, tx.query("SELECT 1 FROM controller_lease WHERE id = 1 AND "
                                             "token = $1 AND expires > clock_timestamp() "
                                             "FOR SHARE",
                                             {SqlParam{token}}));
  if (rows.empty()) {
    return Status::unavailable("not the leader: the controller lease of fencing token " +
                               std::to_string(token) +
                               " has lapsed or passed to another controller; write refused");
  }
  return Status::ok();
}

}  // namespace gpool::store
