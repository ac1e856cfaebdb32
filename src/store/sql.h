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

// One result row. libpq delivers every value as text, converted on access; SQLite's integers
// and reals arrive as numbers (a list of jobs spent 4% of its time formatting integers to text
// and parsing them back). Not thread-safe: a row belongs to the thread that ran the query.
class SqlRow {
 public:
  SqlRow() = default;
  // A row of text values (null: nullopt), as libpq delivers it.
  explicit SqlRow(std::vector<std::optional<std::string>> values);

  // Appending cells, in column order.
  void reserve(size_t columns) { cells_.reserve(columns); }
  void addNull() { cells_.emplace_back(); }
  void addInteger(int64_t v);
  void addReal(double v);
  void addText(std::string_view v);

  bool isNull(size_t i) const { return cells_.at(i).kind == Kind::kNull; }
  const std::string& text(size_t i) const;  // "" for null; a number as decimal text
  // text(i), moved out of the row (the cell is left empty): for the large values (a job's
  // spec) that are otherwise copied once more.
  std::string takeText(size_t i);
  int64_t integer(size_t i) const;  // 0 for null
  double real(size_t i) const;      // 0 for null
  std::optional<int64_t> optInteger(size_t i) const;

 private:
  enum class Kind : uint8_t { kNull, kInteger, kReal, kText };
  struct Cell {
    Kind kind = Kind::kNull;
    int64_t integer = 0;
    double real = 0;
    // The text of a kText cell; of a number, made on the first text() call.
    mutable std::string text;
    mutable bool has_text = false;
  };
  std::vector<Cell> cells_;
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
