#pragma once

#include <cstdint>

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

// Rebuilds `ledger` after a restart from the store's usage over the last `lookback`, in buckets
// of `bucket` dated at each bucket's end (decay within a bucket is ignored).
Status rebuildLedger(store::Store& store, sched::UsageLedger& ledger, TimePoint now,
                     Micros lookback, Micros bucket);

}  // namespace gpool::controller
