#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "common/result.h"
#include "net/router.h"
#include "store/leader_lease.h"
#include "store/postgres_store.h"

// Leadership of one gpoold among several that share one PostgreSQL store (docs/ha.md).
//
// A standby polls the controller lease (store/leader_lease.h) until it has lapsed and takes it;
// the leader renews it every third of its duration on a thread of its own. The fencing token of
// the lease goes to the store (PostgresStore::setFenceToken), which checks it in every write
// transaction: whatever this class believes, the database refuses a deposed leader's writes.
// The leader gives up (on_lost) when a renewal finds the lease gone or none has succeeded for
// a whole lease duration; gpoold then exits at once and its service manager restarts it as a
// standby, so that nothing of the deposed leader's memory outlives its lease. That deadline is
// kept by a watchdog thread of its own, not by the renewal: a renewal blocked on a database that
// stopped answering (packets dropped, no error for minutes) must not keep a leader leading.
namespace gpool::controller {

struct LeadershipOptions {
  std::chrono::milliseconds lease{6000};  // the lease's duration (LeaderLeaseOptions)
  // How often a standby tries to take the lease; 0: a sixth of the lease (at least 100 ms).
  std::chrono::milliseconds poll{0};
};

// Thread-safety: waitToLead and keep/stop from one thread (gpoold's main thread); leading,
// token, leaderAddress and the gated routes from any thread.
class Leadership {
 public:
  // `lease` and `store` must outlive this object.
  Leadership(store::LeaderLease& lease, store::PostgresStore& store, LeadershipOptions options);
  ~Leadership();  // stops the renewals (without releasing the lease)

  // Standby: tries to take the lease every poll interval until it does (true: this controller
  // now leads and the store writes with its token) or `stop` is requested (false). Database
  // errors are logged and retried.
  bool waitToLead(std::stop_token stop);

  // Leader: renews the lease every third of its duration until stop(). Calls `on_lost` once,
  // from the renewal thread or the deadline watchdog, when the lease is lost (a renewal found
  // it gone, or none succeeded for a whole lease, even one still blocked); the store then
  // refuses every write.
  void keep(std::function<void(const std::string& why)> on_lost);

  // Stops the renewals and, when still leading, releases the lease so that a standby takes
  // over without waiting for it to lapse (a clean shutdown).
  void stop();

  bool leading() const { return leading_.load(); }
  int64_t token() const { return store_.fenceToken(); }
  // The leader's advertised address as last seen ("" before any was seen).
  std::string leaderAddress() const;

  // `router`'s routes, answering 503 while this controller does not lead: the error names the
  // leader's address, also sent as the Gpool-Leader header, so that clients that know several
  // controllers go to it. WebSocket upgrades (agents, watchers) are refused the same way.
  Result<net::Router> gate(const net::Router& router);

 private:
  Status notLeading() const;
  void renewLoop(std::stop_token stop);
  // Deposes this controller when no renewal has succeeded for a whole lease.
  void watchDeadline(std::stop_token stop);
  // Gives up leading and calls on_lost_, once whichever thread comes first.
  void lose(const std::string& why);

  store::LeaderLease& lease_;
  store::PostgresStore& store_;
  LeadershipOptions options_;
  std::atomic<bool> leading_{false};
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::string leader_address_;                       // GUARDED_BY(mu_)
  std::function<void(const std::string&)> on_lost_;  // set by keep() before its threads start
  std::atomic<bool> lost_{false};
  // The start of the last renewal that succeeded (steady clock, ns since its epoch).
  std::atomic<int64_t> last_ok_ns_{0};
  std::jthread renewer_;
  std::jthread watchdog_;
};

}  // namespace gpool::controller
