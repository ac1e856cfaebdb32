#include "controller/accounting.h"

#include <vector>

namespace gpool::controller {

double gpuHours(const store::UsageRecord& record) {
  double seconds = std::chrono::duration<double>(record.end - record.start).count();
  if (seconds < 0) seconds = 0;
  return record.gpu_thousandths / 1000.0 * seconds / 3600.0;
}

Result<double> jobGpuHours(store::Store& store, int64_t job_id) {
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::UsageRecord> records, store.usageOfJob(job_id));
  double total = 0;
  for (const store::UsageRecord& r : records)
    total += gpuHours(r);
  return total;
}

void chargeRun(sched::UsageLedger& ledger, const store::UsageRecord& record) {
  ledger.chargeBilled(record.user, record.group, gpuHours(record) * 3600.0, record.end);
}

Status rebuildLedger(store::Store& store, sched::UsageLedger& ledger, TimePoint now,
                     Micros lookback, Micros bucket) {
  if (bucket.count() <= 0) return Status::invalidArgument("rebuildLedger: bucket must be > 0");
  for (TimePoint from = now - lookback; from < now; from += bucket) {
    TimePoint to = std::min(now, from + bucket);
    GPOOL_ASSIGN_OR_RETURN(std::vector<store::UsageRow> users,
                           store.usageReport(store::UsageGrouping::kUser, from, to));
    for (const store::UsageRow& row : users)
      ledger.chargeBilled(row.key, "", row.gpu_hours * 3600.0, to);
    GPOOL_ASSIGN_OR_RETURN(std::vector<store::UsageRow> groups,
                           store.usageReport(store::UsageGrouping::kGroup, from, to));
    for (const store::UsageRow& row : groups)
      ledger.chargeBilled("", row.key, row.gpu_hours * 3600.0, to);
  }
  return Status::ok();
}

}  // namespace gpool::controller
