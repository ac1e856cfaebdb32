#include "agent/fence.h"

namespace gpool::agent {

Fence::Fence(const Clock& clock, Micros lease)
    : clock_(clock), lease_(lease), last_contact_(clock.monotonic()) {}

void Fence::recordContact(Micros sent_at) {
  if (!contacted_ || sent_at > last_contact_) last_contact_ = sent_at;
  contacted_ = true;
}

bool Fence::expired() const {
  return clock_.monotonic() - last_contact_ >= lease_;
}

bool Fence::mayStartWork() const {
  return contacted_ && !expired();
}

Micros Fence::remaining() const {
  Micros left = lease_ - (clock_.monotonic() - last_contact_);
  return left.count() > 0 ? left : Micros(0);
}

std::vector<std::string> Fence::tasksToStop(const std::vector<RunningTask>& running) const {
  std::vector<std::string> out;
  if (!expired()) return out;
  for (const RunningTask& t : running) {
    if (t.requeueable) out.push_back(t.name);
  }
  return out;
}

}  // namespace gpool::agent
