#include <libpq-fe.h>

#include <cstdio>
#include <string>
#include <unordered_map>

#include "store/sql.h"

// libpq, not libpqxx: the C API is all the store needs (parameterised statements, prepared
// once per connection) and it keeps the compile cost of this adapter near zero.
namespace gpool::store {
namespace {

Status pgResultError(PGconn* conn, const PGresult* res, std::string_view what) {
  const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string msg = std::string(what) + ": " + (res ? PQresultErrorMessage(res) : "");
  if (!res) msg += PQerrorMessage(conn);
  while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' '))
    msg.pop_back();
  if (PQstatus(conn) != CONNECTION_OK) return Status::unavailable(msg);
  std::string code = state ? state : "";
  if (code == "23505") return Status::alreadyExists(msg);
  if (code.rfind("23", 0) == 0) return Status::failedPrecondition(msg);
  if (code == "40001" || code == "40P01" || code == "55P03") return Status::aborted(msg);
  if (code.rfind("08", 0) == 0 || code.rfind("57", 0) == 0) return Status::unavailable(msg);
  // disk_full and read_only_sql_transaction: expected conditions an operator ends (503).
  if (code == "53100") {
    return Status::unavailable("the store is full (" + msg +
                               "): writes are refused until its disk has space again");
  }
  if (code == "25006") {
    return Status::unavailable("the store is read-only (" + msg +
                               "): writes are refused until it accepts them again");
  }
  if (code.rfind("53", 0) == 0) return Status::resourceExhausted(msg);
  return Status::internal(msg);
}

struct PgResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResultPtr = std::unique_ptr<PGresult, PgResultDeleter>;

class PostgresConnection final : public SqlConnection {
 public:
  explicit PostgresConnection(PGconn* conn) : conn_(conn) {}
  ~PostgresConnection() override { PQfinish(conn_); }

  Dialect dialect() const override { return Dialect::kPostgres; }
  bool healthy() const override { return PQstatus(conn_) == CONNECTION_OK; }

  Result<SqlRows> query(std::string_view sql, const std::vector<SqlParam>& params) override {
    std::string key(sql);
    auto it = statements_.find(key);
    if (it == statements_.end()) {
      std::string name = "s" + std::to_string(statements_.size());
      PgResultPtr res(PQprepare(conn_, name.c_str(), key.c_str(), 0, nullptr));
      if (!res || PQresultStatus(res.get()) != PGRES_COMMAND_OK) {
        return pgResultError(conn_, res.get(), "Failed to prepare '" + key + "'");
      }
      it = statements_.emplace(key, name).first;
    }
    std::vector<std::string> text(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    for (size_t i = 0; i < params.size(); ++i) {
      const SqlParam& p = params[i];
      if (std::holds_alternative<int64_t>(p)) {
        text[i] = std::to_string(std::get<int64_t>(p));
      } else if (std::holds_alternative<double>(p)) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.17g", std::get<double>(p));
        text[i] = buf;
      } else if (std::holds_alternative<std::string>(p)) {
        text[i] = std::get<std::string>(p);
      } else {
        continue;  // stays a null pointer: SQL NULL
      }
      values[i] = text[i].c_str();
    }
    PgResultPtr res(PQexecPrepared(conn_, it->second.c_str(), static_cast<int>(params.size()),
                                   values.data(), nullptr, nullptr, 0));
    ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
      return pgResultError(conn_, res.get(), "Failed to run '" + key + "'");
    }
    SqlRows rows;
    int n = PQntuples(res.get());
    int cols = PQnfields(res.get());
    rows.reserve(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      std::vector<std::optional<std::string>> row;
      row.reserve(static_cast<size_t>(cols));
      for (int c = 0; c < cols; ++c) {
        if (PQgetisnull(res.get(), r, c)) {
          row.emplace_back(std::nullopt);
        } else {
          row.emplace_back(std::string(PQgetvalue(res.get(), r, c),
                                       static_cast<size_t>(PQgetlength(res.get(), r, c))));
        }
      }
      rows.emplace_back(std::move(row));
    }
    return rows;
  }

  Status execScript(std::string_view sql) override {
    std::string text(sql);
    PgResultPtr res(PQexec(conn_, text.c_str()));
    ExecStatusType st = res ? PQresultStatus(res.get()) : PGRES_FATAL_ERROR;
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      return pgResultError(conn_, res.get(), "Failed to run '" + text.substr(0, 60) + "'");
    }
    return Status::ok();
  }

 private:
  PGconn* conn_;
  std::unordered_map<std::string, std::string> statements_;
};

}  // namespace

Result<std::unique_ptr<SqlConnection>> openPostgresConnection(const std::string& conninfo) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (!conn || PQstatus(conn) != CONNECTION_OK) {
    std::string msg = conn ? PQerrorMessage(conn) : "out of memory";
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' '))
      msg.pop_back();
    PQfinish(conn);
    return Status::unavailable("Failed to connect to PostgreSQL ('" + conninfo + "'): " + msg);
  }
  auto c = std::make_unique<PostgresConnection>(conn);
  // Notices (e.g. "relation already exists, skipping") would go to stderr otherwise.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  GPOOL_RETURN_IF_ERROR(c->execScript("SET client_min_messages = warning"));
  return std::unique_ptr<SqlConnection>(std::move(c));
}

}  // namespace gpool::store
