#pragma once

#include <cstdint>
#include <vector>

#include "common/clock.h"
#include "common/result.h"
#include "common/status.h"
#include "sched/usage.h"
#include "store/store.h"

// GPU-hours counted by slice: a job holding 250 thousandths of a GPU for an hour used 0.25
// GPU-hours. The store writes one usage record per run of a job (Store::recordEnd and friends);
// these helpers read them and feed the decayed-usage ledger that fair-share reads.
namespace gpool::controller {

// GPU-hours of one usage record.
double gpuHours(const store::UsageRecord& record);

// GPU-hours of every run of `job_id` (requeued jobs have several records).
Result<double> jobGpuHours(store::Store& store, int64_t job_id);

// Charges one finished run to its user and group in `ledger` (billed GPU-seconds, dated at the
// run's end).
void chargeRun(sched::UsageLedger& ledger, const store::UsageRecord& record);

// GPU-hours per user or group within [from, to]: the ended runs (usage records) plus, for each
// job that holds GPUs now (RUNNING or COMPLETING), its GPUs times the part of its run so far
// that lies in the period, as Slurm counts running jobs against GrpTRESMins. So usage shows
// while work runs (`gpool usage`, `gpool account`), and one long job cannot outrun a quota
// until it ends. `holding` is the jobs holding GPUs when the caller has read them already;
// null: read from the store. Rows are ordered by key; a running job counts once in `jobs`.
Result<std::vector<store::UsageRow>> usageSoFar(
    store::Store& store, store::UsageGrouping by, TimePoint from, TimePoint to,
    const std::vector<store::JobRecord>* holding = nullptr);

// Rebuilds `ledger` after a restart from the store's usage over the last `lookback`, in buckets
// of `bucket` dated at each bucket's end (decay within a bucket is ignored).
Status rebuildLedger(store::Store& store, sched::UsageLedger& ledger, TimePoint now,
                     Micros lookback, Micros bucket);

}  // namespace gpool::controller
