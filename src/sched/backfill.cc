// Backfill (see pass.h): a lower-priority job that fits now starts around the reservations only
// where it delays none of them (Slurm's backfill).
#include "sched/pass.h"

namespace gpool::sched::internal {

// Two ways not to delay a reservation: the job ends (by its time limit) before the earliest
// reservation starts, so it may take what fits now; or it fits beside every reservation (on
// masked_, the pool minus the reserved resources), so it may run as long as it likes.
bool Pass::backfill(Info& info, PlacementResult& r) {
  const Job& j = *info.job;
  if (now_ + std::chrono::seconds(timeLimit(j)) <= earliest_reservation_) {
    if (applyAll(work_, r.tasks)) {
      start(info, std::move(r.tasks), true, r.explanation);
      return true;
    }
  }
  PlacementResult m = tryPlace(masked_, j.request, cache_masked_, true);
  if (m.placed && applyAll(work_, m.tasks)) {
    start(info, std::move(m.tasks), true, m.explanation);
    return true;
  }
  return false;
}

}  // namespace gpool::sched::internal
