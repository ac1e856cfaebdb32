#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/result.h"
#include "common/status.h"

// The small SQL layer under both stores (internal to src/store). Statements are written once
// in the dialect both databases accept ($1-style parameters, RETURNING, ON CONFLICT); the
// SQLite connection rewrites `$N` to `?N`. Each connection caches its prepared statements.
namespace gpool::store {

enum class Dialect { kSqlite, kPostgres };

using SqlParam = std::variant<std::monostate, int64_t, double, std::string>;

inline SqlParam sqlNull() {
  return SqlParam{};
}
template <typename T>
SqlParam sqlOpt(const std::optional<T>& v) {
  if (!v) return SqlParam{};
  return SqlParam{static_cast<int64_t>(*v)};
}

// One result row; every value arrives as text (or null) and is converted on access, which is
// what libpq delivers and costs SQLite little.
class SqlRow {
 public:
  explicit SqlRow(std::vector<std::optional<std::string>> values) : values_(std::move(values)) {}
  bool isNull(size_t i) const { return !values_.at(i).has_value(); }
  const std::string& text(size_t i) const;  // "" for null
  int64_t integer(size_t i) const;          // 0 for null
  double real(size_t i) const;              // 0 for null
  std::optional<int64_t> optInteger(size_t i) const;

 private:
  std::vector<std::optional<std::string>> values_;
};

using SqlRows = std::vector<SqlRow>;

// One database connection. Not thread-safe: the owner (a pool) hands it to one thread at a time.
class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  virtual Dialect dialect() const = 0;
  // Runs one statement with parameters and returns its rows. Errors carry the database's message;
  // a unique-key violation is AlreadyExists, a foreign-key violation FailedPrecondition, a busy
  // or serialisation failure Aborted, a lost connection Unavailable.
  virtual Result<SqlRows> query(std::string_view sql, const std::vector<SqlParam>& params) = 0;
  // Runs one or more statements without parameters or results (DDL, BEGIN/COMMIT).
  virtual Status execScript(std::string_view sql) = 0;
  // False after the connection broke; the pool replaces it.
  virtual bool healthy() const { return true; }
};

// Opens a connection to the SQLite file `path` (created when missing) with the pragmas of
// docs/store.md. `synchronous` is "FULL" or "NORMAL".
Result<std::unique_ptr<SqlConnection>> openSqliteConnection(const std::string& path,
                                                            const std::string& synchronous,
                                                            int busy_timeout_ms);

// Opens a libpq connection from a conninfo string ("host=/run/x dbname=gpool").
Result<std::unique_ptr<SqlConnection>> openPostgresConnection(const std::string& conninfo);

}  // namespace gpool::store
