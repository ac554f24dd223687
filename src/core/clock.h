// Clocks are owned by drivers (the simulator, the servers), never by policy.
//
// ManualClock is the virtual clock of the simulator and of tests: it moves only
// when told to, and is not synchronized (one simulated world per thread).
// SteadyClock reads std::chrono::steady_clock relative to its construction, so
// both clocks start their timelines at 0; it is safe to use from any thread.
// ScaledClock runs another clock's timeline `scale` times faster: the
// emulated time of servers whose sim engine runs at a time scale.
#pragma once

#include <chrono>
#include <memory>

#include "core/time.h"

namespace talaria {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = TimePoint{}) : now_(start) {}
  ManualClock(const ManualClock&) = delete;
  ManualClock& operator=(const ManualClock&) = delete;

  TimePoint Now() const override { return now_; }

  // REQUIRES: d >= 0. Time never runs backwards.
  void Advance(Duration d);
  // REQUIRES: t >= Now().
  void AdvanceTo(TimePoint t);

 private:
  TimePoint now_;
};

class SteadyClock final : public Clock {
 public:
  SteadyClock() : origin_(std::chrono::steady_clock::now()) {}
  SteadyClock(const SteadyClock&) = delete;
  SteadyClock& operator=(const SteadyClock&) = delete;

  TimePoint Now() const override;

 private:
  std::chrono::steady_clock::time_point origin_;
};

class ScaledClock final : public Clock {
 public:
  // REQUIRES: base != nullptr, scale > 0.
  ScaledClock(std::shared_ptr<const Clock> base, double scale);
  TimePoint Now() const override;
  double scale() const { return scale_; }

 private:
  std::shared_ptr<const Clock> base_;
  double scale_;
};

}  // namespace talaria
