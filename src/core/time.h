// Time for policy code: a Duration and a TimePoint on the driver's timeline.
//
// The simulator's timeline is virtual (starts at 0 when a replay starts); the
// servers' timeline is a steady clock's. Policy code only ever sees these types
// and a `now` argument; it never asks a clock itself (DESIGN.md rule 1).
// Integer nanoseconds keep virtual-time runs exactly reproducible.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>

namespace talaria {

using Duration = std::chrono::nanoseconds;

// The clock type of TimePoint. It has no now(): time comes from a Clock object.
struct Timeline {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = Duration;
  using time_point = std::chrono::time_point<Timeline, Duration>;
  static constexpr bool is_steady = true;
};

using TimePoint = Timeline::time_point;

// std::llround(x) (to nearest, halfway cases away from zero) without the
// library call, which the simulator would pay on every time it computes:
// the truncation and the fraction it drops are both exact below 2^62.
// Beyond that, and for NaN, the library answers.
inline std::int64_t RoundToNearest(double x) {
  if (!(std::abs(x) < 0x1p62)) return std::llround(x);
  const auto whole = static_cast<std::int64_t>(x);  // toward zero
  const double fraction = x - static_cast<double>(whole);
  return fraction >= 0.5 ? whole + 1 : fraction <= -0.5 ? whole - 1 : whole;
}

// Converts seconds to a Duration, rounding to the nearest nanosecond.
inline Duration FromSeconds(double seconds) { return Duration(RoundToNearest(seconds * 1e9)); }

inline double ToSeconds(Duration d) { return static_cast<double>(d.count()) * 1e-9; }
inline double ToSeconds(TimePoint t) { return ToSeconds(t.time_since_epoch()); }

// The point `seconds` after the timeline's origin.
inline TimePoint AtSeconds(double seconds) { return TimePoint(FromSeconds(seconds)); }

}  // namespace talaria
