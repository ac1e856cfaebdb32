#include "store/leader_lease.h"

#include <unistd.h>

#include <cstdio>
#include <random>

namespace gpool::store {
namespace {

// The advisory lock the schema migrations hold (SqlStore::migrate): two controllers starting
// at once create the table one after the other.
constexpr const char* kSchemaLock = "SELECT pg_advisory_lock(4711001)";
constexpr const char* kSchemaUnlock = "SELECT pg_advisory_unlock(4711001)";

// The columns every lease query returns: token, holder, address, milliseconds left. Rounded up:
// a cast rounds to the nearest millisecond, so 0.4 ms left read as 0 ("lapsed") while the fence
// (expires > clock_timestamp()) still let the holder write; LeaderLeaseTest.LeaseLapsesOnThe
// DatabasesClockWithoutRenewal failed on it once in a full suite run.
constexpr const char* kLeaseColumns =
    "token, holder, address, "
    "CEIL(EXTRACT(EPOCH FROM (expires - clock_timestamp())) * 1000)::BIGINT";

LeaseView viewOf(const SqlRow& row, bool held) {
  LeaseView v;
  v.held = held;
  v.token = row.integer(0);
  v.holder = row.text(1);
  v.address = row.text(2);
  v.remaining_ms = row.integer(3);
  return v;
}

}  // namespace

Status ensureLeaseTable(SqlConnection& conn) {
  if (conn.dialect() != Dialect::kPostgres) {
    return Status::failedPrecondition(
        "high availability needs a PostgreSQL store; SQLite serves one controller only");
  }
  GPOOL_RETURN_IF_ERROR(conn.execScript(kSchemaLock));
  // 'epoch' rather than '-infinity': PostgreSQL before 17 cannot subtract an infinite time.
  Status s = conn.execScript(
      "CREATE TABLE IF NOT EXISTS controller_lease ("
      " id BIGINT PRIMARY KEY CHECK (id = 1),"
      " token BIGINT NOT NULL,"
      " holder TEXT NOT NULL,"
      " address TEXT NOT NULL,"
      " expires TIMESTAMPTZ NOT NULL);"
      "INSERT INTO controller_lease (id, token, holder, address, expires)"
      " VALUES (1, 0, '', '', 'epoch') ON CONFLICT (id) DO NOTHING");
  (void)conn.execScript(kSchemaUnlock);
  return s.withContext("controller lease table");
}

Result<std::unique_ptr<LeaderLease>> LeaderLease::open(const LeaderLeaseOptions& options) {
  if (options.holder.empty()) return Status::invalidArgument("controller lease: empty holder");
  if (options.duration_ms < 100) {
    return Status::invalidArgument("controller lease: duration " +
                                   std::to_string(options.duration_ms) +
                                   " ms is under the 100 ms minimum");
  }
  std::unique_ptr<LeaderLease> lease(new LeaderLease(options, nullptr));
  GPOOL_RETURN_IF_ERROR(lease->reconnect());
  GPOOL_RETURN_IF_ERROR(ensureLeaseTable(*lease->conn_));
  return lease;
}

Status LeaderLease::reconnect() {
  if (conn_ && conn_->healthy()) return Status::ok();
  conn_.reset();
  GPOOL_ASSIGN_OR_RETURN(auto conn, openPostgresConnection(options_.conninfo));
  // A renewal or takeover that waits longer than the lease is worthless: give up and try again
  // on the next tick. (A takeover waits for the writes that passed the fence to finish.)
  std::string ms = std::to_string(options_.duration_ms);
  GPOOL_RETURN_IF_ERROR(conn->execScript("SET statement_timeout = " + ms));
  GPOOL_RETURN_IF_ERROR(conn->execScript("SET lock_timeout = " + ms));
  conn_ = std::move(conn);
  return Status::ok();
}

Result<LeaseView> LeaderLease::acquireOrRenew(int64_t held_token) {
  GPOOL_RETURN_IF_ERROR(reconnect());
  const SqlParam duration{options_.duration_ms};
  if (held_token > 0) {
    GPOOL_ASSIGN_OR_RETURN(
        auto rows,
        conn_->query(std::string("UPDATE controller_lease SET expires = clock_timestamp() + "
                                 "$2::float8 * interval '1 millisecond' "
                                 "WHERE id = 1 AND token = $1 AND expires > clock_timestamp() "
                                 "RETURNING ") +
                         kLeaseColumns,
                     {SqlParam{held_token}, duration}));
    if (!rows.empty()) return viewOf(rows[0], true);
    // Lost (lapsed, or taken): fall through and try to take it again like any standby, with
    // a new token, so that nothing this controller did under the old one can be mistaken for
    // the new lease's.
  }
  GPOOL_ASSIGN_OR_RETURN(
      auto rows,
      conn_->query(std::string("UPDATE controller_lease SET token = token + 1, holder = $1, "
                               "address = $2, expires = clock_timestamp() + "
                               "$3::float8 * interval '1 millisecond' "
                               "WHERE id = 1 AND expires <= clock_timestamp() RETURNING ") +
                       kLeaseColumns,
                   {SqlParam{options_.holder}, SqlParam{options_.address}, duration}));
  if (!rows.empty()) return viewOf(rows[0], true);
  return read();
}

Result<LeaseView> LeaderLease::read() {
  GPOOL_RETURN_IF_ERROR(reconnect());
  GPOOL_ASSIGN_OR_RETURN(auto rows, conn_->query(std::string("SELECT ") + kLeaseColumns +
                                                     " FROM controller_lease WHERE id = 1",
                                                 {}));
  if (rows.empty()) return Status::internal("controller lease: the lease row is missing");
  return viewOf(rows[0], false);
}

Status LeaderLease::release(int64_t token) {
  GPOOL_RETURN_IF_ERROR(reconnect());
  return conn_
      ->query("UPDATE controller_lease SET expires = 'epoch' WHERE id = 1 AND token = $1",
              {SqlParam{token}})
      .status();
}

std::string newControllerName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device rd;
  char suffix[17];
  std::snprintf(suffix, sizeof(suffix), "%08x%08x", rd(), rd());
  return std::string(host) + ":" + std::to_string(::getpid()) + ":" + suffix;
}

}  // namespace gpool::store
