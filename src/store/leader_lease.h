#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"
#include "common/status.h"
#include "store/sql.h"

// Leadership among controllers that share one PostgreSQL store (docs/ha.md).
//
// The lease is one row, `controller_lease`, in the store's database: the holder's name and
// address, a fencing token that grows by one at every change of holder, and an expiry time
// kept on the database server's clock (clock_timestamp()), so the controllers' own clocks never
// decide who leads. The leader renews the row well within its duration; a standby takes the row
// once its expiry has passed, and the token it gets is larger than any before.
//
// Every write transaction of a fenced PostgresStore first reads that row FOR SHARE and requires
// its own token and an unexpired lease (postgres_store.h): a deposed leader (paused, partitioned
// from the database, or simply slow) cannot commit anything once the lease has lapsed, and a
// takeover's UPDATE waits until every write that passed the check has committed or aborted, so
// the old leader's writes all come before the new leader's.
namespace gpool::store {

// Creates the lease table and its one row when missing (idempotent, safe from several
// processes at once: serialised by the same advisory lock as the schema migrations). The
// table stands outside the numbered schema: only HA controllers read or write it.
Status ensureLeaseTable(SqlConnection& conn);

// The lease row as one controller sees it.
struct LeaseView {
  bool held = false;         // this controller holds the lease now (token is its fencing token)
  int64_t token = 0;         // the current fencing token (0: nobody has ever led)
  std::string holder;        // the current holder's name ("" when nobody ever led)
  std::string address;       // where the holder serves clients (for redirects)
  int64_t remaining_ms = 0;  // until the lease lapses on the database's clock (<= 0: lapsed)
};

struct LeaderLeaseOptions {
  std::string conninfo;  // the store's libpq connection string
  std::string holder;    // this controller's unique name (host, pid and a random part)
  std::string address;   // where this controller serves clients, shown to the others
  int64_t duration_ms = 10'000;
};

// One controller's handle on the lease, with its own connection (so that a store pool busy
// with long writes never delays a renewal).
//
// Thread-safety: not thread-safe; one thread (gpoold's lease keeper) owns it.
class LeaderLease {
 public:
  // Connects and creates the lease table when missing. Unavailable when the server cannot be
  // reached; InvalidArgument for an empty holder or a duration under 100 ms.
  static Result<std::unique_ptr<LeaderLease>> open(const LeaderLeaseOptions& options);

  // With `held_token` > 0 (this controller leads with that token): renews the lease when it is
  // still this controller's and unexpired; held=false in the answer when it was lost. With 0:
  // takes the lease when it has lapsed (a new, larger token), else reports who holds it.
  // Unavailable when the database cannot be reached (the caller must then act as if it lost
  // the lease once its own duration has passed).
  Result<LeaseView> acquireOrRenew(int64_t held_token);

  // Who holds the lease, without changing it.
  Result<LeaseView> read();

  // Ends this controller's lease at once (graceful shutdown), so a standby need not wait for
  // it to lapse. Nothing happens when `token` is no longer the lease's.
  Status release(int64_t token);

  const LeaderLeaseOptions& options() const { return options_; }

 private:
  LeaderLease(LeaderLeaseOptions options, std::unique_ptr<SqlConnection> conn)
      : options_(std::move(options)), conn_(std::move(conn)) {}
  Status reconnect();

  LeaderLeaseOptions options_;
  std::unique_ptr<SqlConnection> conn_;
};

// A fresh controller name: "<hostname>:<pid>:<random hex>".
std::string newControllerName();

}  // namespace gpool::store
