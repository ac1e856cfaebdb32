#include "store/postgres_store.h"

namespace gpool::store {

PostgresStore::PostgresStore(ConnectionPool::Factory factory, size_t pool_size)
    : SqlStore(Dialect::kPostgres, std::move(factory), pool_size, /*group_commit=*/false) {}

Result<std::unique_ptr<PostgresStore>> PostgresStore::open(const PostgresOptions& options) {
  if (options.conninfo.empty()) {
    return Status::invalidArgument("postgres store: empty connection string");
  }
  auto factory = [conninfo = options.conninfo]() { return openPostgresConnection(conninfo); };
  std::unique_ptr<PostgresStore> store(new PostgresStore(factory, options.pool_size));
  GPOOL_RETURN_IF_ERROR(store->migrate().withContext("postgres store"));
  return store;
}

}  // namespace gpool::store
