#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace gpool {

// Time in gpool is microseconds since the Unix epoch, on the system clock. One type everywhere
// keeps the scheduler, the store and the wire format free of conversions.
using Micros = std::chrono::microseconds;
using TimePoint = std::chrono::time_point<std::chrono::system_clock, Micros>;

inline int64_t toUnixMicros(TimePoint t) {
  return t.time_since_epoch().count();
}
inline TimePoint fromUnixMicros(int64_t us) {
  return TimePoint(Micros(us));
}
inline TimePoint fromUnixSeconds(int64_t s) {
  return TimePoint(Micros(s * 1'000'000));
}

// Clock is how every component reads the time; nothing else in gpool may call the system
// clock, so tests and the simulator can drive time by hand (as Mesos's Clock::advance).
//
// Thread-safety: implementations are safe to call from any thread.
class Clock {
 public:
  virtual ~Clock() = default;
  // Wall-clock time, used for timestamps that users read and that survive restarts.
  virtual TimePoint now() const = 0;
  // A monotonic reading for measuring intervals; never goes backwards.
  virtual Micros monotonic() const = 0;
};

// The real clock. A process-wide instance is returned by `realClock()`.
class RealClock final : public Clock {
 public:
  TimePoint now() const override;
  Micros monotonic() const override;
};

// Returns the process-wide real clock; never destroyed.
Clock& realClock();

// A clock that only moves when told to. Both readings advance together.
class SimClock final : public Clock {
 public:
  explicit SimClock(TimePoint start = fromUnixSeconds(1'700'000'000)) : now_(start) {}

  TimePoint now() const override;
  Micros monotonic() const override;

  // Moves time forward by `delta` (which must be >= 0; negative deltas are ignored).
  void advance(Micros delta);
  // Sets the time; ignored if `t` lies in the past, since time never goes backwards.
  void setNow(TimePoint t);

 private:
  mutable std::mutex mu_;
  TimePoint now_;
  Micros elapsed_{0};
};

}  // namespace gpool
