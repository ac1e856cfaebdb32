#include "common/clock.h"

namespace gpool {

TimePoint RealClock::now() const {
  return std::chrono::time_point_cast<Micros>(std::chrono::system_clock::now());
}

Micros RealClock::monotonic() const {
  return std::chrono::duration_cast<Micros>(std::chrono::steady_clock::now().time_since_epoch());
}

Clock& realClock() {
  static RealClock* const kClock = new RealClock();
  return *kClock;
}

TimePoint SimClock::now() const {
  std::lock_guard<std::mutex> lock(mu_);
  return now_;
}

Micros SimClock::monotonic() const {
  std::lock_guard<std::mutex> lock(mu_);
  return elapsed_;
}

void SimClock::advance(Micros delta) {
  if (delta.count() < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  now_ += delta;
  elapsed_ += delta;
}

void SimClock::setNow(TimePoint t) {
  std::lock_guard<std::mutex> lock(mu_);
  if (t <= now_) return;
  elapsed_ += t - now_;
  now_ = t;
}

}  // namespace gpool
