#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/sql.h"
#include "store/store.h"

namespace gpool::store {

// A bounded pool of connections. `acquire` blocks until one is free; a connection that broke
// is dropped on release and a new one is opened on the next acquire.
//
// Thread-safety: safe from any thread.
class ConnectionPool {
 public:
  using Factory = std::function<Result<std::unique_ptr<SqlConnection>>()>;

  ConnectionPool(Factory factory, size_t max_size);
  ~ConnectionPool();

  class Lease {
   public:
    Lease(ConnectionPool* pool, std::unique_ptr<SqlConnection> conn)
        : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&&) noexcept = default;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (pool_ && conn_) pool_->release(std::move(conn_));
    }
    SqlConnection& operator*() const { return *conn_; }
    SqlConnection* operator->() const { return conn_.get(); }

   private:
    ConnectionPool* pool_;
    std::unique_ptr<SqlConnection> conn_;
  };

  Result<Lease> acquire();

 private:
  void release(std::unique_ptr<SqlConnection> conn);

  Factory factory_;
  size_t max_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<SqlConnection>> idle_;  // GUARDED_BY(mu_)
  size_t open_ = 0;                                   // GUARDED_BY(mu_): idle + leased
};

// The statements of one transaction on one leased connection. Created by SqlStore::transact.
class Txn {
 public:
  Txn(SqlConnection& conn, std::atomic<int>& fail_countdown)
      : conn_(conn), fail_countdown_(fail_countdown) {}
  Result<SqlRows> query(std::string_view sql, const std::vector<SqlParam>& params = {});
  Status exec(std::string_view sql, const std::vector<SqlParam>& params = {}) {
    auto r = query(sql, params);
    return r.ok() ? Status::ok() : r.status();
  }
  Dialect dialect() const { return conn_.dialect(); }
  // PostgreSQL: takes the transaction-scoped lock that serialises transactions writing job
  // events, so that event seqs commit in increasing order (JobEvent::seq). Not counted by
  // failStatementForTest. SQLite: nothing (one writer already).
  Status lockJobEvents();

 private:
  SqlConnection& conn_;
  std::atomic<int>& fail_countdown_;
};

// The Store implementation shared by SqliteStore and PostgresStore: every operation is SQL
// that both databases accept, run in one transaction on a pooled connection.
class SqlStore : public Store {
 public:
  ~SqlStore() override;

  // Runs `fn` in one transaction: BEGIN (IMMEDIATE for SQLite writes, so that the write lock is
  // taken up front and a busy database fails fast instead of deadlocking), COMMIT when `fn`
  // returns OK, ROLLBACK otherwise. Retries the whole transaction a few times on Aborted
  // (busy / serialisation failure), so `fn` must be safe to run again. With group commit, `fn`
  // may share the transaction with other callers' writes inside its own savepoint; it returns
  // only after the shared COMMIT, and fails when that COMMIT fails.
  Status transact(bool write, const std::function<Status(Txn&)>& fn);

  // Runs raw SQL outside any transaction; for tests that tamper with the database.
  Status execForTest(std::string_view sql);

  // Store
  Result<int32_t> schemaVersion() override;
  Result<int64_t> beginIncarnation(TimePoint now) override;
  int64_t currentIncarnation() const override { return incarnation_.load(); }
  Result<bool> reserveJobIdsThrough(int64_t id) override;
  Result<std::vector<int64_t>> submitJobs(const std::vector<NewJob>& jobs, TimePoint now) override;
  Result<JobRecord> getJob(int64_t id) override;
  Result<JobPage> listJobs(const JobFilter& filter) override;
  Result<std::vector<JobEvent>> jobEvents(int64_t job_id) override;
  Result<std::vector<JobAttempt>> jobAttempts(int64_t job_id) override;
  Result<std::vector<JobEvent>> jobEventsAfter(int64_t after_seq, int32_t limit) override;
  Result<int64_t> lastJobEventSeq() override;
  void setJobEventListener(std::function<void()> listener) override;
  Result<int64_t> recordPlacement(int64_t job_id, const std::string& placement_json, TimePoint now,
                                  const std::string& reason) override;
  Status recordStart(int64_t job_id, int64_t epoch, TimePoint started, TimePoint now) override;
  Status recordTaskFiles(int64_t job_id, int64_t epoch, uint32_t task,
                         const TaskFiles& files) override;
  Status recordEnd(int64_t job_id, api::JobState end_state, std::optional<int32_t> exit_code,
                   TimePoint now, const std::string& reason) override;
  Status recordPreemption(int64_t job_id, bool requeue, TimePoint now,
                          const std::string& reason) override;
  Status transitionJob(const JobTransition& transition) override;
  Status updateJob(const JobUpdate& update) override;
  Status setJobReason(int64_t job_id, api::JobState state, TimePoint now,
                      const std::string& reason) override;
  Status setJobHold(int64_t job_id, const std::string& hold, TimePoint now,
                    const std::string& reason) override;
  Result<std::vector<JobRecord>> jobsInStates(const std::vector<api::JobState>& states) override;
  Result<std::vector<std::pair<api::JobState, int64_t>>> countJobsByState() override;
  Result<std::vector<PendingReasonCount>> pendingByReason() override;
  Result<int64_t> fireAlert(const AlertRecord& alert) override;
  Status resolveAlert(int64_t id, TimePoint when, const std::string& detail) override;
  Status ackAlert(int64_t id, const std::string& actor, TimePoint when) override;
  Result<AlertRecord> getAlert(int64_t id) override;
  Result<std::vector<AlertRecord>> listAlerts(const AlertFilter& filter) override;
  Result<std::vector<AlertEvent>> alertEvents(int64_t alert_id) override;
  Status holdGpu(const GpuHold& hold) override;
  Status clearGpuHold(const std::string& uuid, const std::string& actor, TimePoint when) override;
  Result<std::vector<GpuHold>> listGpuHolds() override;
  Status setJobIdleSince(int64_t job_id, std::optional<TimePoint> since) override;
  Result<std::map<int64_t, TimePoint>> jobsIdleSince() override;
  Status upsertNode(const NodeRecord& node) override;
  Result<NodeRecord> getNode(const std::string& name) override;
  Result<std::vector<NodeRecord>> listNodes() override;
  Status deleteNode(const std::string& name) override;
  Status removeNode(const std::string& name, TimePoint now, const std::string& actor) override;
  Status upsertGpu(const GpuRecord& gpu) override;
  Status registerNode(const NodeRecord& node, const std::vector<GpuRecord>& gpus) override;
  Result<std::vector<GpuRecord>> listGpus(const std::string& node) override;
  Status upsertUser(const UserRecord& user) override;
  Result<UserRecord> getUser(const std::string& name) override;
  Result<std::vector<UserRecord>> listUsers() override;
  Status upsertGroup(const GroupRecord& group) override;
  Result<GroupRecord> getGroup(const std::string& name) override;
  Result<std::vector<GroupRecord>> listGroups() override;
  Status deleteUser(const std::string& name) override;
  Status deleteGroup(const std::string& name) override;
  Status writeCatalog(const CatalogWrites& writes) override;
  Status setQuota(const QuotaRecord& quota, const std::string& actor) override;
  Result<QuotaRecord> getQuota(QuotaSubject subject, const std::string& name) override;
  Result<std::vector<QuotaRecord>> listQuotas() override;
  Status deleteQuota(QuotaSubject subject, const std::string& name, const std::string& actor,
                     TimePoint now) override;
  Result<std::vector<AuditEvent>> auditEvents(int64_t after_seq, int32_t limit) override;
  Status recordAuditEvent(const AuditEvent& event) override;
  Status upsertQos(const QosRecord& qos) override;
  Result<std::vector<QosRecord>> listQos() override;
  Status deleteQos(const std::string& name) override;
  Result<int64_t> createToken(const TokenRecord& token, const std::string& actor) override;
  Result<TokenRecord> findToken(const std::string& hash) override;
  Result<TokenRecord> getToken(int64_t id) override;
  Status revokeToken(int64_t id, TimePoint now, const std::string& actor) override;
  Result<std::vector<TokenRecord>> listTokens(const std::string& user) override;
  Status touchToken(int64_t id, TimePoint now) override;
  Result<int64_t> joinNode(int64_t join_token_id, const TokenRecord& credential,
                           TimePoint now) override;
  Result<std::vector<UsageRecord>> usageOfJob(int64_t job_id) override;
  Result<std::vector<UsageRow>> usageReport(UsageGrouping grouping, TimePoint from,
                                            TimePoint to) override;
  Status recordTelemetry(const std::vector<TelemetrySample>& samples) override;
  Result<std::vector<TelemetrySample>> gpuTelemetry(const std::string& gpu_uuid,
                                                    TelemetryResolution resolution, TimePoint from,
                                                    TimePoint to) override;
  Result<std::vector<TelemetrySample>> jobTelemetry(int64_t job_id, TelemetryResolution resolution,
                                                    TimePoint from, TimePoint to) override;
  Status recordTaskTelemetry(const std::vector<TaskTelemetrySample>& samples) override;
  Result<std::vector<TaskTelemetrySample>> taskTelemetry(int64_t job_id,
                                                         TelemetryResolution resolution,
                                                         TimePoint from, TimePoint to) override;
  Status pruneTelemetry(TimePoint now, const TelemetryRetention& retention) override;
  void failStatementForTest(int n) override { fail_countdown_.store(n); }

 protected:
  // `group_commit`: writes are funnelled through one leader that commits concurrent callers'
  // work in one transaction (see groupCommit); SQLite's one-writer model makes this the way to
  // more than one durable commit per fsync.
  SqlStore(Dialect dialect, ConnectionPool::Factory factory, size_t pool_size, bool group_commit);
  // Creates or upgrades the schema; refuses a database newer than kSchemaVersion.
  Status migrate();
  // A check that every write transaction runs first, right after BEGIN, in the same
  // transaction (PostgresStore's leader fencing); its error fails the write before anything is
  // written. Set once, before the store is shared between threads.
  void setWriteGuard(std::function<Status(Txn&)> guard) { write_guard_ = std::move(guard); }

 private:
  // A write transaction that writes job events: lockJobEvents first, the listener after a
  // successful commit.
  Status transactJobs(const std::function<Status(Txn&)>& fn);
  Status changeJobState(Txn& tx, int64_t job_id, const std::vector<api::JobState>& from_states,
                        api::JobState to_state, TimePoint now, const std::string& reason,
                        JobRecord* before);

  struct PendingWrite {
    const std::function<Status(Txn&)>* fn;
    Status result;
    bool done;  // GUARDED_BY(group_mu_)
  };
  static constexpr size_t kMaxGroup = 256;
  Status groupCommit(const std::function<Status(Txn&)>& fn);
  void runGroup(const std::vector<PendingWrite*>& batch);

  Dialect dialect_;
  bool group_commit_;
  ConnectionPool pool_;
  std::mutex group_mu_;
  std::condition_variable group_cv_;
  std::vector<PendingWrite*> group_queue_;  // GUARDED_BY(group_mu_)
  bool group_leader_active_ = false;        // GUARDED_BY(group_mu_)
  std::atomic<int> fail_countdown_{0};
  std::atomic<int64_t> incarnation_{0};      // read by migrate(), set by beginIncarnation()
  std::function<Status(Txn&)> write_guard_;  // set before concurrent use (setWriteGuard)
  std::mutex listener_mu_;
  std::shared_ptr<const std::function<void()>> listener_;  // GUARDED_BY(listener_mu_)
};

// The schema migrations, in order: migration i (1-based) moves version i-1 to i. Exposed for
// docs and tests.
struct Migration {
  int32_t version;
  std::string description;
  std::string sql;  // one or more statements
};
std::vector<Migration> migrationsFor(Dialect dialect);

}  // namespace gpool::store
