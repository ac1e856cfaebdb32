#include <sqlite3.h>

#include <string>
#include <unordered_map>

#include "store/sql.h"

namespace gpool::store {
namespace {

// Rewrites the shared `$N` parameter syntax into SQLite's numbered `?N`.
std::string toSqliteParams(std::string_view sql) {
  std::string out(sql);
  for (char& c : out) {
    if (c == '$') c = '?';
  }
  return out;
}

Status sqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string msg = std::string(what) + ": " + sqlite3_errmsg(db);
  if (rc == (rc & 0xff) && db) rc = sqlite3_extended_errcode(db);
  switch (rc & 0xff) {
    case SQLITE_CONSTRAINT:
      if (rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
        return Status::alreadyExists(msg);
      }
      return Status::failedPrecondition(msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Status::aborted(msg);
    // A full disk, or one that went read-only or fails: an expected condition that ends when
    // an operator acts (issue 19, defect 9): Unavailable, which the API answers with 503 and
    // Retry-After, naming the condition.
    case SQLITE_FULL:
      return Status::unavailable("the store is full (" + msg +
                                 "): writes are refused until its disk has space again");
    case SQLITE_READONLY:
    case SQLITE_IOERR:
      return Status::unavailable("the store cannot write (" + msg +
                                 "): its disk is read-only or failing; writes are refused until "
                                 "it is repaired");
    case SQLITE_CANTOPEN: return Status::ioError(msg);
    default: return Status::internal(msg);
  }
}

class SqliteConnection final : public SqlConnection {
 public:
  explicit SqliteConnection(sqlite3* db) : db_(db) {}
  ~SqliteConnection() override {
    for (auto& [sql, stmt] : statements_)
      sqlite3_finalize(stmt);
    sqlite3_close_v2(db_);
  }

  Dialect dialect() const override { return Dialect::kSqlite; }

  Result<SqlRows> query(std::string_view sql, const std::vector<SqlParam>& params) override {
    sqlite3_stmt* stmt = nullptr;
    auto it = statements_.find(std::string(sql));
    if (it != statements_.end()) {
      stmt = it->second;
    } else {
      std::string text = toSqliteParams(sql);
      int rc = sqlite3_prepare_v3(db_, text.c_str(), static_cast<int>(text.size()),
                                  SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
      if (rc != SQLITE_OK) return sqliteError(db_, rc, "Failed to prepare '" + text + "'");
      statements_.emplace(std::string(sql), stmt);
    }
    // Reset whatever the previous use left, including bindings.
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    for (size_t i = 0; i < params.size(); ++i) {
      int idx = static_cast<int>(i) + 1;
      int rc = SQLITE_OK;
      const SqlParam& p = params[i];
      if (std::holds_alternative<int64_t>(p)) {
        rc = sqlite3_bind_int64(stmt, idx, std::get<int64_t>(p));
      } else if (std::holds_alternative<double>(p)) {
        rc = sqlite3_bind_double(stmt, idx, std::get<double>(p));
      } else if (std::holds_alternative<std::string>(p)) {
        const auto& s = std::get<std::string>(p);
        rc = sqlite3_bind_text(stmt, idx, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
      } else {
        rc = sqlite3_bind_null(stmt, idx);
      }
      if (rc != SQLITE_OK) return sqliteError(db_, rc, "Failed to bind parameter");
    }
    SqlRows rows;
    while (true) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        Status s = sqliteError(db_, rc, "Failed to run '" + std::string(sql) + "'");
        sqlite3_reset(stmt);
        return s;
      }
      int n = sqlite3_column_count(stmt);
      SqlRow& row = rows.emplace_back();
      row.reserve(static_cast<size_t>(n));
      for (int c = 0; c < n; ++c) {
        switch (sqlite3_column_type(stmt, c)) {
          case SQLITE_NULL: row.addNull(); break;
          case SQLITE_INTEGER: row.addInteger(sqlite3_column_int64(stmt, c)); break;
          case SQLITE_FLOAT: row.addReal(sqlite3_column_double(stmt, c)); break;
          default: {
            const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
            row.addText(std::string_view(t, static_cast<size_t>(sqlite3_column_bytes(stmt, c))));
          }
        }
      }
    }
    sqlite3_reset(stmt);
    return rows;
  }

  Status execScript(std::string_view sql) override {
    // The transaction statements every SqlStore::transact runs around its work (two per API
    // read) go through the prepared-statement cache: sqlite3_exec would parse them each time.
    if (sql == "BEGIN" || sql == "BEGIN IMMEDIATE" || sql == "COMMIT" || sql == "ROLLBACK") {
      Result<SqlRows> done = query(sql, {});
      return done.ok() ? Status::ok() : done.status();
    }
    char* err = nullptr;
    std::string text(sql);
    int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string msg = err ? err : sqlite3_errstr(rc);
      sqlite3_free(err);
      Status s = sqliteError(db_, rc, "Failed to run script");
      return Status(s.code(), "Failed to run '" + text.substr(0, 60) + "': " + msg);
    }
    return Status::ok();
  }

 private:
  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> statements_;
};

}  // namespace

Result<std::unique_ptr<SqlConnection>> openSqliteConnection(const std::string& path,
                                                            const std::string& synchronous,
                                                            int busy_timeout_ms) {
  if (synchronous != "FULL" && synchronous != "NORMAL") {
    return Status::invalidArgument("sqlite synchronous must be FULL or NORMAL, not '" +
                                   synchronous + "'");
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return Status::ioError("Failed to open sqlite store '" + path + "': " + msg);
  }
  auto conn = std::make_unique<SqliteConnection>(db);
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  // WAL: readers never block the writer and a commit is one append + fsync of the log.
  // foreign_keys: the schema's references are enforced (off by default in SQLite).
  GPOOL_RETURN_IF_ERROR(conn->execScript("PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON; "
                                         "PRAGMA synchronous=" +
                                         synchronous + ";")
                            .withContext("sqlite store '" + path + "'"));
  auto mode = conn->query("PRAGMA journal_mode", {});
  if (!mode.ok()) return mode.status();
  if (mode->empty() || (*mode)[0].text(0) != "wal") {
    return Status::ioError("sqlite store '" + path + "' could not switch to WAL mode");
  }
  return std::unique_ptr<SqlConnection>(std::move(conn));
}

}  // namespace gpool::store
