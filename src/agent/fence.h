#pragma once

#include <string>
#include <vector>

#include "common/clock.h"

namespace gpool::agent {

// Self-fencing: an agent cut off from the controller for longer than its lease stops starting
// new work and stops its requeueable tasks, because by then the controller may have declared
// the node lost and requeued those tasks elsewhere; no job may run in two places at once.
//
// Time is read from the injected Clock's monotonic reading (wall-clock jumps cannot extend or
// cut a lease). Before the first contact after the agent starts, no new work starts, and the
// lease runs from the Fence's construction (so a restarted agent gets one lease to reconnect
// before it stops anything).
//
// Thread-safety: not thread-safe; the agent's control loop owns it.
class Fence {
 public:
  Fence(const Clock& clock, Micros lease);

  // The controller renewed the lease in answer to a message this agent sent at `sent_at` (its
  // monotonic reading when the `hello` or `heartbeat` left): the lease runs from then, not
  // from the answer's arrival, so an answer delayed in transit (or read by an agent that was
  // stopped) never extends the lease past what the controller granted. An answer to an older
  // message than one already counted changes nothing.
  void recordContact(Micros sent_at);

  // True while the lease holds: contact happened and less than `lease` has passed since.
  bool mayStartWork() const;
  // True once `lease` has passed since the last contact (or since construction).
  bool expired() const;
  // Time left before the lease expires; zero when expired.
  Micros remaining() const;

  struct RunningTask {
    std::string name;
    bool requeueable = false;  // the job's policy: may the controller requeue it elsewhere
  };
  // The tasks to stop now: the requeueable ones once the lease expired, none before. Tasks
  // that may not be requeued keep running; the controller will not start them elsewhere.
  std::vector<std::string> tasksToStop(const std::vector<RunningTask>& running) const;

 private:
  const Clock& clock_;
  Micros lease_;
  Micros last_contact_;
  bool contacted_ = false;
};

}  // namespace gpool::agent
