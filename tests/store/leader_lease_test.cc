// Leader lease and fencing token (store/leader_lease.h, PostgresStore's fenced writes) against
// the real PostgreSQL server the store tests start: a deposed leader's write is refused by the
// database itself, whatever the deposed controller believes.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "store/leader_lease.h"
#include "store/postgres_store.h"
#include "store/store_test_fixture.h"

namespace gpool::store::testing {
namespace {

NewJob leaseJob(const std::string& user) {
  NewJob j;
  j.user = user;
  j.group = "ml";
  j.gpu_thousandths = 1000;
  j.spec_json = R"({"command":["train.py"],"gpus":"1000"})";
  return j;
}

// The PostgreSQL store tests' fresh database, plus fenced stores and leases of two controllers.
class LeaderLeaseTest : public StoreTest {
 protected:
  std::unique_ptr<PostgresStore> fencedStore() {
    PostgresOptions o;
    o.conninfo = sharedPgServer()->conninfo();
    o.pool_size = 2;
    o.fenced = true;
    auto s = PostgresStore::open(o);
    EXPECT_TRUE(s.ok()) << s.status().toString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::unique_ptr<LeaderLease> lease(const std::string& holder, int64_t duration_ms = 60'000) {
    LeaderLeaseOptions o;
    o.conninfo = sharedPgServer()->conninfo();
    o.holder = holder;
    o.address = holder + ".example:8443";
    o.duration_ms = duration_ms;
    auto l = LeaderLease::open(o);
    EXPECT_TRUE(l.ok()) << l.status().toString();
    return l.ok() ? std::move(l).value() : nullptr;
  }
  // What a lease's end looks like to the database: its expiry is in the past (a leader that
  // was partitioned from the database for longer than the lease, without waiting for it).
  void lapseLease() {
    ASSERT_TRUE(
        store()
            .execForTest("UPDATE controller_lease SET expires = clock_timestamp() - interval '1s'")
            .isOk());
  }
  size_t jobCount() {
    auto page = store().listJobs({});
    EXPECT_TRUE(page.ok()) << page.status().toString();
    return page.ok() ? page->jobs.size() : 0;
  }
};

TEST_P(LeaderLeaseTest, DeposedLeadersWriteIsRefusedByTheDatabase) {
  auto store_a = fencedStore();
  auto store_b = fencedStore();
  auto lease_a = lease("ctl-a");
  auto lease_b = lease("ctl-b");
  ASSERT_TRUE(store_a && store_b && lease_a && lease_b);

  auto a = lease_a->acquireOrRenew(0);
  ASSERT_TRUE(a.ok()) << a.status().toString();
  ASSERT_TRUE(a->held);
  store_a->setFenceToken(a->token);
  ASSERT_TRUE(store_a->submitJobs({leaseJob("alice")}, at(1)).ok());

  // While A's lease runs, B is a standby: it sees who leads and where, and cannot write.
  auto b = lease_b->acquireOrRenew(0);
  ASSERT_TRUE(b.ok()) << b.status().toString();
  EXPECT_FALSE(b->held);
  EXPECT_EQ(b->holder, "ctl-a");
  EXPECT_EQ(b->address, "ctl-a.example:8443");
  EXPECT_GT(b->remaining_ms, 0);
  auto refused = store_b->submitJobs({leaseJob("bob")}, at(2));
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable) << refused.status().toString();

  // A's lease ends while A still believes it leads (it holds its old token): the database
  // refuses A's write, before and after B takes over.
  lapseLease();
  auto late = store_a->submitJobs({leaseJob("alice")}, at(3));
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable) << late.status().toString();
  EXPECT_NE(late.status().message().find("not the leader"), std::string::npos)
      << late.status().toString();
  EXPECT_EQ(jobCount(), 1u);

  b = lease_b->acquireOrRenew(0);
  ASSERT_TRUE(b.ok()) << b.status().toString();
  ASSERT_TRUE(b->held);
  EXPECT_GT(b->token, a->token);
  store_b->setFenceToken(b->token);
  EXPECT_TRUE(store_b->submitJobs({leaseJob("bob")}, at(4)).ok());

  EXPECT_FALSE(store_a->submitJobs({leaseJob("alice")}, at(5)).ok());
  EXPECT_FALSE(store_a->recordEnd(1, api::JobState::kCompleted, 0, at(5), "deposed").isOk());
  // A's renewal finds the lease gone and tells it who leads now.
  auto renewed = lease_a->acquireOrRenew(a->token);
  ASSERT_TRUE(renewed.ok()) << renewed.status().toString();
  EXPECT_FALSE(renewed->held);
  EXPECT_EQ(renewed->holder, "ctl-b");
  EXPECT_EQ(jobCount(), 2u);
  auto first = store().getJob(1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->state, api::JobState::kPending);  // A's recordEnd never landed
}

TEST_P(LeaderLeaseTest, LeaseLapsesOnTheDatabasesClockWithoutRenewal) {
  auto store_a = fencedStore();
  auto lease_a = lease("ctl-a", /*duration_ms=*/100);
  auto lease_b = lease("ctl-b");
  ASSERT_TRUE(store_a && lease_a && lease_b);
  auto a = lease_a->acquireOrRenew(0);
  ASSERT_TRUE(a.ok() && a->held);
  store_a->setFenceToken(a->token);
  // Nobody renews: poll (with a deadline) until the database says the lease lapsed.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  Result<LeaseView> seen = lease_b->read();
  while (seen.ok() && seen->remaining_ms > 0 && std::chrono::steady_clock::now() < deadline)
    seen = lease_b->read();
  ASSERT_TRUE(seen.ok() && seen->remaining_ms <= 0);
  EXPECT_EQ(store_a->submitJobs({leaseJob("alice")}, at(1)).status().code(),
            StatusCode::kUnavailable);
  auto b = lease_b->acquireOrRenew(0);
  ASSERT_TRUE(b.ok() && b->held);
  EXPECT_EQ(b->token, a->token + 1);
  EXPECT_EQ(jobCount(), 0u);
}

TEST_P(LeaderLeaseTest, RenewalKeepsTheTokenAndReleaseHandsOverAtOnce) {
  auto lease_a = lease("ctl-a");
  auto lease_b = lease("ctl-b");
  ASSERT_TRUE(lease_a && lease_b);
  auto a = lease_a->acquireOrRenew(0);
  ASSERT_TRUE(a.ok() && a->held);
  auto again = lease_a->acquireOrRenew(a->token);
  ASSERT_TRUE(again.ok() && again->held);
  EXPECT_EQ(again->token, a->token);
  ASSERT_TRUE(lease_a->release(a->token).isOk());
  auto b = lease_b->acquireOrRenew(0);
  ASSERT_TRUE(b.ok() && b->held);
  EXPECT_EQ(b->token, a->token + 1);
  // A stale release changes nothing.
  ASSERT_TRUE(lease_a->release(a->token).isOk());
  auto view = lease_b->read();
  ASSERT_TRUE(view.ok());
  EXPECT_GT(view->remaining_ms, 0);
  EXPECT_EQ(view->holder, "ctl-b");
}

TEST_P(LeaderLeaseTest, AnUnfencedStoreWritesWithoutALeaseAndSqliteRefusesOne) {
  // Single-controller PostgreSQL sites open the store without fencing: no lease needed.
  EXPECT_TRUE(store().submitJobs({leaseJob("alice")}, at(1)).ok());
  auto lite = openSqliteConnection(tempDir() + "/lease.db", "FULL", 1000);
  ASSERT_TRUE(lite.ok()) << lite.status().toString();
  Status s = ensureLeaseTable(**lite);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("needs a PostgreSQL store"), std::string::npos) << s.toString();
}

INSTANTIATE_TEST_SUITE_P(Postgres, LeaderLeaseTest, ::testing::Values(Backend::kPostgres),
                         backendName);

}  // namespace
}  // namespace gpool::store::testing
