#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "store/pg_server.h"
#include "store/sql_store.h"
#include "store/store.h"

namespace gpool::store::testing {

enum class Backend { kSqlite, kPostgres };

std::string backendName(const ::testing::TestParamInfo<Backend>& info);

// The process's PostgreSQL test server, started on first use (so that SQLite-only test runs
// never pay for it) and stopped by the gtest environment at exit. Fails the calling test when the
// server cannot start.
PgServer* sharedPgServer();

// A fixed instant `seconds` after 2023-11-14 22:13:20 UTC, the store tests' epoch.
inline TimePoint at(int64_t seconds) {
  return fromUnixSeconds(1'700'000'000 + seconds);
}

// Base of every store test: one fresh database per test, on the backend of the parameter.
// SQLite: a file in a fresh temp dir. PostgreSQL: the shared server's `postgres` database with
// an emptied `public` schema.
class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Opens a new store on this test's database (as a restarted controller would).
  Result<std::unique_ptr<SqlStore>> openStore();
  SqlStore& store() { return *store_; }
  // Closes the current store and opens it again.
  void reopen();

  Backend backend() const { return GetParam(); }
  const std::string& tempDir() const { return temp_dir_; }
  const std::string& sqlitePath() const { return sqlite_path_; }

  std::unique_ptr<SqlStore> store_;

 private:
  std::string temp_dir_;
  std::string sqlite_path_;
};

}  // namespace gpool::store::testing
