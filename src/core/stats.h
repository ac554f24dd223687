// Summary statistics with the paper's percentile definition (§5.1): for N
// observations, p_q is the observation at 1-based rank ceil(q*N/100), with
// rank clamped to [1, N]. No interpolation, so every reported percentile is a
// value that was actually observed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/time.h"

namespace talaria {

// One step of an exponentially weighted moving average: the newest sample
// moves `average` by `newest_weight` of the way to it, so a change is
// followed within about 1 / newest_weight samples.
inline double EwmaStep(double average, double sample, double newest_weight) {
  return (1 - newest_weight) * average + newest_weight * sample;
}

// A mean that follows drift: the running mean of the first `window`
// samples, then an EWMA of weight 1 / window.
struct WindowedMean {
  double value = 0;
  std::int64_t samples = 0;
  void Add(double sample, std::int64_t window) {
    samples = samples < window ? samples + 1 : window;
    value = EwmaStep(value, sample, 1.0 / static_cast<double>(samples));
  }
};

// A positive quantity's distribution lately, as a log-normal: the
// windowed means (WindowedMean) of its logarithm and of the square of it.
// Adaptive holds read a model's output lengths with it: how likely a
// caught return's decode is to end before its slot does.
struct WindowedLogNormal {
  WindowedMean log;
  WindowedMean log_sq;
  void Add(double sample, std::int64_t window) {
    const double ln = std::log(std::max(sample, 1e-300));
    log.Add(ln, window);
    log_sq.Add(ln * ln, window);
  }
  // P(a draw <= x); 1 before any sample (nothing says it would not fit).
  double Cdf(double x) const {
    if (log.samples == 0) return 1;
    if (x <= 0) return 0;
    const double var = std::max(0.0, log_sq.value - log.value * log.value);
    const double z = std::log(x) - log.value;
    if (var <= 1e-12) return z >= 0 ? 1 : 0;  // every sample alike
    return 0.5 * std::erfc(-z / std::sqrt(2 * var));
  }
};

// Events per second lately, from the mean interval between them over
// `kWindow` of them (WindowedMean); 0 until two have been seen. Adaptive
// holds count with it the calls that arrive while a missed return waits.
struct ArrivalRate {
  static constexpr std::int64_t kWindow = 64;
  void Observe(TimePoint now) {
    if (seen_) interval_s_.Add(ToSeconds(now - last_), kWindow);
    seen_ = true;
    last_ = now;
  }
  double PerSecond() const { return interval_s_.samples > 0 && interval_s_.value > 0 ? 1 / interval_s_.value : 0; }

 private:
  WindowedMean interval_s_;
  TimePoint last_;
  bool seen_ = false;
};

// The share of time spent working lately: the mean length of the last
// `kWindow` steps over the mean time from one step's end to the next's
// (the idle time before a step included); 0 until two steps have ended.
// Adaptive holds read an instance's with it how long a delay inserted now
// keeps shifting the slots after it (the rest of the busy period).
struct BusyFraction {
  static constexpr std::int64_t kWindow = 64;
  void Step(TimePoint start, TimePoint end) {
    if (seen_) {
      busy_s_.Add(ToSeconds(end - start), kWindow);
      span_s_.Add(ToSeconds(end - last_end_), kWindow);
    }
    seen_ = true;
    last_end_ = end;
  }
  double Value() const { return span_s_.value > 0 ? std::min(1.0, busy_s_.value / span_s_.value) : 0; }

 private:
  WindowedMean busy_s_;
  WindowedMean span_s_;
  TimePoint last_end_;
  bool seen_ = false;
};

// 1-based nearest rank of p_q among n observations. REQUIRES: n > 0, 0 <= q <= 100.
std::size_t NearestRankIndex(std::size_t n, double q);

// p_q of `sorted` (ascending). REQUIRES: !sorted.empty(), 0 <= q <= 100.
double NearestRank(std::span<const double> sorted, double q);

// A bag of observations; sorts once, lazily, when a percentile is asked for.
// Not synchronized.
class Sample {
 public:
  void Add(double x);
  void Reserve(std::size_t n) { values_.reserve(n); }

  std::size_t count() const { return values_.size(); }
  bool empty() const { return values_.empty(); }

  // REQUIRES: !empty().
  double Percentile(double q) const;
  double Min() const;
  double Max() const;
  double Mean() const;
  // Fraction of observations strictly greater than `x`; 0 when empty.
  double FractionAbove(double x) const;

 private:
  void Sort() const;

  mutable std::vector<double> values_;
  mutable bool sorted_ = true;
};

}  // namespace talaria
