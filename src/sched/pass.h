#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sched/scheduler.h"

// The state and the steps of one scheduling pass (SchedulerPass::run), internal to the
// scheduler library. The steps live in one file each, in the order a pass runs them:
//
//   queue_order.cc   what every job holds and asks for, priority factors (fair share, QoS,
//                    age, size) and the order in which pending jobs are considered
//   reclaim.cc       which running work is borrowed beyond its group's guarantee, and the rules
//                    by which a group below its deserved share takes it back
//   idle_reclaim.cc  allocations idle too long: flagged, warned, evicted
//   reservation.cc   preemptors' claims on what their victims free (before the queue walk), and
//                    the reservation of the top blocked job at its shadow time
//   eligibility.cc   whether a job may start at all now: holds, dependencies, array limits,
//                    QoS, GPU-hours and the caps on GPUs and compute held at once
//   scheduler.cc     the walk over the queue that ties them together: place, or explain why
//                    not (poolReason), then evict or reserve; and starts
//   backfill.cc      a job that fits may start around the reservations without delaying them
//   preemption.cc    eviction for a blocked job, by priority or by reclaim: simulate before
//                    evict, least disturbing victims first
//
// SchedulerPass::run = prepare (queue_order.cc, reclaim.cc's markBorrowed), idleReclaim,
// queueOrder, holdClaims, then schedule() per pending job in that order.
//
// Thread-safety: none; a Pass lives for one call of SchedulerPass::run.
namespace gpool::sched::internal {

int64_t secondsBetween(TimePoint from, TimePoint to);
std::string fmtDouble(double v, int digits);
// A key that identifies every request with the same placement outcome on the same cluster, so a
// failure is remembered for the rest of the pass (free resources only shrink during a pass).
std::string shapeKey(const PlacementRequest& r);
// Clamps `alloc` to what is free on its node, so that applying it takes exactly the part of a
// reservation that is free now (the rest is still held by running jobs).
TaskAllocation clampToFree(const ClusterState& cluster, const TaskAllocation& alloc);
// Applies every task or none.
bool applyAll(ClusterState& cluster, const std::vector<TaskAllocation>& tasks);
void applyClamped(ClusterState& cluster, const std::vector<TaskAllocation>& tasks);
void releaseAll(ClusterState& cluster, const std::vector<TaskAllocation>& tasks);
// Whether every dependency of the job is met (eligibility.cc).
bool dependenciesMet(const Job& job);

class Pass {
 public:
  Pass(PlacementPolicy& policy, const ClusterState& snapshot, const std::vector<Job>& jobs,
       const UsageLedger& usage, const SchedulerConfig& config, TimePoint now, Random& random)
      : policy_(policy),
        jobs_(jobs),
        usage_(usage),
        cfg_(config),
        now_(now),
        random_(random),
        work_(snapshot),
        masked_(snapshot) {}

  Decisions run();

 private:
  struct Info {
    const Job* job = nullptr;
    double key = 0;  // larger = more important
    PriorityFactors factors;
    const QosLevel* qos = nullptr;
    uint64_t demand = 0;   // GPU thousandths
    uint64_t compute = 0;  // compute thousandths
    // Running: beyond its group's guaranteed quota (reclaimable).
    bool borrowed = false;
    // Pending: already decided in this pass (started, or waiting on its claim).
    bool decided = false;
  };
  struct Cached {
    PendingReason reason;
    std::string explanation;
  };
  // What a blocked job may evict for itself in this pass (preemption.cc).
  struct EvictionRights {
    bool priority = false;  // less important preemptible work: it waited delay_s
    bool reclaim = false;   // borrowed work of other groups: below its share, reclaim_delay_s
  };
  // A running job that may be evicted for a blocked one.
  struct Candidate {
    const Job* job;
    bool reclaim;  // taken back as borrowed capacity (else evicted by priority)
    double key;
    double lost;  // GPU-seconds of work lost if it has no checkpoint
  };

  // queue_order.cc: fills infos_ (demand, QoS, priority key), what users and groups hold, the
  // deserved shares, and marks borrowed work (markBorrowed).
  void prepare();
  // Pending jobs, most important first; ties by submit time, then id. Indices into infos_.
  std::vector<size_t> queueOrder() const;
  std::string priorityText(const Info& info) const;

  // reclaim.cc
  // A group's guaranteed quota covers its running jobs in the order they started; the rest
  // is borrowed (Info::borrowed), and reclaimable.
  void markBorrowed();
  // GPUs the group holds minus those of its jobs already leaving.
  uint64_t remainingHeld(const std::string& group);
  // Whether the job's group, with the job, stays within its deserved share (reclaim enabled).
  bool belowShare(const Info& info);
  // Whether `victim`, which ran `ran_s`, is borrowed work `preemptor` may take back: another
  // group's, past reclaim_min_run_time_s, and its group keeps its deserved share without it.
  bool mayReclaimFrom(const Info& victim, const Job& preemptor, int64_t ran_s);

  // idle_reclaim.cc: IdleDecisions for running jobs idle past the configured times; those past
  // preempt_after_s (warned, reclaimable) are evicted with their grace and noted as leaving.
  void idleReclaim();

  // eligibility.cc: kNone when the job may be placed; otherwise why not, with `*detail`.
  QueueReason eligibility(const Info& info, std::string* detail) const;
  std::string capReason(const Info& info, QueueReason* reason) const;
  // Whether one of the job's dependencies can never be met; `*detail` says which.
  bool dependencyNeverMet(const Job& job, std::string* detail) const;

  // reservation.cc
  // Before the queue walk: each pending job with victims leaving takes what they free (starts,
  // or holds a claim on it) so that nobody else is placed there meanwhile.
  void holdClaims(const std::vector<size_t>& order);
  // Reserves for a blocked job what it gets at its shadow time (running jobs ending at their
  // time limits); false when backfill is off, the reservations are used up, or it never fits.
  // Appends "; reserved to start in D" to `*detail`.
  bool reserve(Info& info, std::string* detail);

  // backfill.cc: whether a job that fits on `r` may start although reservations exist, and
  // where (started when true).
  bool backfill(Info& info, PlacementResult& r);

  // preemption.cc
  // Evicts running work so that the blocked job fits (by priority or reclaim), or waits for
  // work already leaving; true when it did either (the job holds a reservation then). Adds to
  // `*detail` what it did, or when it may preempt.
  bool tryPreempt(Info& info, std::string* detail);
  // Whether the job may evict by priority and by reclaim now; when neither, appends "; may
  // preempt in D" if waiting would change that.
  EvictionRights evictionRights(const Info& info, std::string* detail);
  // Reserves, when work already leaving frees enough for the job, what it will free.
  bool waitForLeaving(const Info& info, std::string* detail);
  // The running jobs the job may evict, least disturbing first: reclaimable borrowed work,
  // then the least important, then the least work lost, then the newest.
  std::vector<Candidate> victimCandidates(const Info& info, EvictionRights rights);
  // The first candidates (in order) whose release makes the job fit, minus those that turn out
  // unnecessary; reclaim never takes a group below its deserved share. False: none does.
  bool chooseVictims(const Info& info, const std::vector<Candidate>& candidates,
                     std::vector<const Candidate*>* chosen, PlacementResult* fit);
  // Decides the evictions (PreemptDecisions with each victim's grace) and reserves `fit` for
  // the job from the end of the longest grace.
  void evict(const Info& info, const std::vector<const Candidate*>& chosen,
             const PlacementResult& fit, std::string* detail);

  // scheduler.cc
  void schedule(Info& info);
  void pend(const Info& info, QueueReason reason, std::string detail);
  PlacementResult tryPlace(const ClusterState& cluster, const PlacementRequest& request,
                           std::unordered_map<std::string, Cached>& cache, bool use_cache);
  void start(Info& info, std::vector<TaskAllocation> alloc, bool backfilled,
             const std::string& placement_explanation);
  // Why a job that does not fit now waits, when the pool itself is the cause: it would fit if
  // its unhealthy GPUs were usable (kGpusUnhealthy), or it fits on no set of servers even when
  // they are empty (kBadConstraints). kResources otherwise.
  QueueReason poolReason(const Info& info, std::string* detail);

  int64_t timeLimit(const Job& job) const {
    return job.time_limit_s > 0 ? job.time_limit_s : cfg_.backfill.default_time_limit_s;
  }
  const Info& infoOf(const Job& job) const {
    return infos_[static_cast<size_t>(&job - jobs_.data())];
  }
  // The preemption grace of a job: its QoS level's, else the configured one.
  int64_t graceOf(const Job& job) const {
    const Info& info = infoOf(job);
    return info.qos && info.qos->grace_s ? *info.qos->grace_s : cfg_.preemption.grace_s;
  }
  bool preempting(const Job& j) const {
    return j.preempt_deadline.has_value() || victims_.count(j.id) > 0;
  }
  // Marks job `index` of jobs_ as leaving (evicted in this pass).
  void noteLeaving(size_t index);

  PlacementPolicy& policy_;
  const std::vector<Job>& jobs_;
  const UsageLedger& usage_;
  const SchedulerConfig& cfg_;
  TimePoint now_;
  Random& random_;

  ClusterState work_;    // what is free now, minus this pass's starts and preemptors' claims
  ClusterState masked_;  // work_ minus the reserved resources: where long backfill may go
  uint64_t free_compute_ = 0;
  uint64_t capacity_ = 0;
  size_t unhealthy_gpus_ = 0;

  std::vector<Info> infos_;
  std::unordered_map<JobId, size_t> by_id_;
  std::unordered_map<std::string, uint64_t> user_held_, group_held_, user_qos_held_;
  // GPU compute (computeDemand) held per user and group, for the compute caps.
  std::unordered_map<std::string, uint64_t> user_compute_held_, group_compute_held_;
  std::unordered_map<std::string, uint64_t> deserved_;
  // GPUs of jobs already told to leave (earlier passes or this one), per group.
  std::unordered_map<std::string, uint64_t> group_leaving_;
  std::unordered_map<std::string, Cached> cache_work_, cache_masked_;
  std::unordered_set<std::string> preempt_failed_;
  // Per request shape: the pool-level reason (poolReason) and its detail.
  std::unordered_map<std::string, std::pair<QueueReason, std::string>> pool_reason_;
  // The pool with everything free (built on first use by poolReason).
  std::unique_ptr<ClusterState> empty_;
  std::unordered_set<JobId> victims_;
  // Leaving jobs whose resources a pending job holds a claim or reservation on: what they free
  // is not planned for anyone else (reserve() leaves them out).
  std::unordered_set<JobId> claimed_;
  // Running elements per job array (Job::array_id), counting those started in this pass.
  std::unordered_map<JobId, uint32_t> array_running_;
  // Indices into jobs_ of the running jobs that are leaving (a preemption deadline, or chosen
  // as victims in this pass), so preemption attempts need not scan every job.
  std::vector<size_t> leaving_;
  // Indices into infos_ of the running jobs past the shorter minimum run time (built on the
  // first preemption attempt): the only possible victims.
  std::vector<size_t> evictable_;
  bool evictable_built_ = false;
  // Jobs started in this pass, with their expected ends (for reservations).
  std::vector<std::pair<TimePoint, std::vector<TaskAllocation>>> started_;
  std::vector<ReservationDecision> reservations_;
  TimePoint earliest_reservation_ = TimePoint::max();
  bool blocked_ = false;  // without backfill: a job is blocked and everything behind it waits
  Decisions out_;
};

}  // namespace gpool::sched::internal
