#include "controller/accounting.h"

#include <algorithm>
#include <map>
#include <string>
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

Result<std::vector<store::UsageRow>> usageSoFar(store::Store& store, store::UsageGrouping by,
                                                TimePoint from, TimePoint to,
                                                const std::vector<store::JobRecord>* holding) {
  GPOOL_ASSIGN_OR_RETURN(std::vector<store::UsageRow> ended, store.usageReport(by, from, to));
  std::vector<store::JobRecord> read;
  if (holding == nullptr) {
    GPOOL_ASSIGN_OR_RETURN(
        read, store.jobsInStates({api::JobState::kRunning, api::JobState::kCompleting}));
    holding = &read;
  }
  std::map<std::string, store::UsageRow> rows;
  for (store::UsageRow& row : ended)
    rows[row.key] = std::move(row);
  for (const store::JobRecord& job : *holding) {
    if (!api::holdsResources(job.state) || !job.start_time) continue;
    const TimePoint start = std::max(*job.start_time, from);
    if (to <= start) continue;
    const double hours = std::chrono::duration<double, std::ratio<3600>>(to - start).count();
    const std::string& key = by == store::UsageGrouping::kGroup ? job.group : job.user;
    store::UsageRow& row = rows[key];
    row.key = key;
    row.gpu_hours += job.gpu_thousandths / 1000.0 * hours;
    // A requeued job's earlier runs may have counted it already; a job counts once.
    bool counted = false;
    if (job.requeue_count > 0) {
      GPOOL_ASSIGN_OR_RETURN(std::vector<store::UsageRecord> runs, store.usageOfJob(job.id));
      counted = std::any_of(runs.begin(), runs.end(), [&](const store::UsageRecord& r) {
        return r.end > from && r.start < to;
      });
    }
    if (!counted) ++row.jobs;
  }
  std::vector<store::UsageRow> out;
  out.reserve(rows.size());
  for (auto& [key, row] : rows)
    out.push_back(std::move(row));
  return out;
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
