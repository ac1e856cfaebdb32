#include "store/store_test_fixture.h"

#include <stdlib.h>

#include <filesystem>

#include "store/postgres_store.h"
#include "store/sql.h"
#include "store/sqlite_store.h"

namespace gpool::store::testing {
namespace {

class PgEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { server_.reset(); }

  PgServer* server() {
    if (!server_ && start_error_.isOk()) {
      auto started = PgServer::start();
      if (started.ok()) {
        server_ = std::move(started).value();
      } else {
        start_error_ = started.status();
      }
    }
    if (!server_) ADD_FAILURE() << "PostgreSQL test server: " << start_error_.toString();
    return server_.get();
  }

 private:
  std::unique_ptr<PgServer> server_;
  Status start_error_;
};

PgEnvironment* const g_pg_env =
    static_cast<PgEnvironment*>(::testing::AddGlobalTestEnvironment(new PgEnvironment));

}  // namespace

std::string backendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "sqlite" : "postgres";
}

PgServer* sharedPgServer() {
  return g_pg_env->server();
}

void StoreTest::SetUp() {
  char tmpl[] = "/tmp/gpool-store-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  temp_dir_ = tmpl;
  sqlite_path_ = temp_dir_ + "/gpool.db";
  if (backend() == Backend::kPostgres) {
    PgServer* server = sharedPgServer();
    ASSERT_NE(server, nullptr);
    auto conn = openPostgresConnection(server->conninfo());
    ASSERT_TRUE(conn.ok()) << conn.status().toString();
    ASSERT_TRUE(
        (*conn)->execScript("DROP SCHEMA IF EXISTS public CASCADE; CREATE SCHEMA public;").isOk());
  }
  auto opened = openStore();
  ASSERT_TRUE(opened.ok()) << opened.status().toString();
  store_ = std::move(opened).value();
}

void StoreTest::TearDown() {
  store_.reset();
  std::error_code ec;
  if (!temp_dir_.empty()) std::filesystem::remove_all(temp_dir_, ec);
}

Result<std::unique_ptr<SqlStore>> StoreTest::openStore() {
  if (backend() == Backend::kSqlite) {
    GPOOL_ASSIGN_OR_RETURN(auto s, SqliteStore::open(sqlite_path_));
    return std::unique_ptr<SqlStore>(std::move(s));
  }
  PgServer* server = sharedPgServer();
  if (!server) return Status::unavailable("no PostgreSQL test server");
  GPOOL_ASSIGN_OR_RETURN(auto s, PostgresStore::open({server->conninfo(), 4}));
  return std::unique_ptr<SqlStore>(std::move(s));
}

void StoreTest::reopen() {
  store_.reset();
  auto opened = openStore();
  ASSERT_TRUE(opened.ok()) << opened.status().toString();
  store_ = std::move(opened).value();
}

}  // namespace gpool::store::testing
