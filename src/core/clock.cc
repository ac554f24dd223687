#include "core/clock.h"

#include "core/error.h"

namespace talaria {

void ManualClock::Advance(Duration d) {
  TALARIA_CHECK(d >= Duration::zero(), "ManualClock::Advance by a negative duration");
  now_ += d;
}

void ManualClock::AdvanceTo(TimePoint t) {
  TALARIA_CHECK(t >= now_, "ManualClock::AdvanceTo a time in the past");
  now_ = t;
}

TimePoint SteadyClock::Now() const {
  return TimePoint(std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - origin_));
}

}  // namespace talaria
