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

ScaledClock::ScaledClock(std::shared_ptr<const Clock> base, double scale) : base_(std::move(base)), scale_(scale) {
  TALARIA_CHECK(base_ != nullptr && scale > 0, "ScaledClock needs a base clock and a positive scale");
}

TimePoint ScaledClock::Now() const {
  return TimePoint(std::chrono::duration_cast<Duration>(base_->Now().time_since_epoch() * scale_));
}

}  // namespace talaria
