// Measured-point tables with piecewise-linear interpolation.
//
// Between points the value is interpolated linearly; outside the measured
// range it is extrapolated along the nearest segment (a one-point table is
// constant), and never returned below zero. Profiles are measured at a few
// points, so extrapolation is explicit rather than silently clamped.
//
// Lookups are inline: the router evaluates about ten per decision and the
// scheduler several per step, so a call, a bounds check and a second
// segment search per lookup were a third of a routing decision's
// instructions (docs/benchmarks.md, "Routing decisions").
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace talaria {

// Index i of the segment [v[i], v[i+1]] used for x (0 when v has one point),
// and the position t of x along it (may be < 0 or > 1 when extrapolating).
struct Segment {
  std::size_t i;
  double t;
};

// REQUIRES: v strictly increasing.
inline Segment FindSegment(const double* v, std::size_t n, double x) {
  if (n < 2) return {0, 0.0};
  // The first point above x, kept within [1, n-1]. Profiles' tables have a
  // handful of points: a forward scan beats a binary search's
  // unpredictable branches there.
  std::size_t hi = 1;
  if (n <= 16) {
    while (hi + 1 < n && v[hi] <= x) ++hi;
  } else {
    hi = std::clamp<std::size_t>(static_cast<std::size_t>(std::upper_bound(v, v + n, x) - v), 1, n - 1);
  }
  const std::size_t lo = hi - 1;
  return {lo, (x - v[lo]) / (v[hi] - v[lo])};
}
inline Segment FindSegment(const std::vector<double>& v, double x) { return FindSegment(v.data(), v.size(), x); }

class Table1D {
 public:
  Table1D() = default;
  // REQUIRES (checked by the profile loader): xs strictly increasing,
  // xs.size() == ys.size() >= 1.
  Table1D(std::vector<double> xs, std::vector<double> ys);

  // Throws on an empty table.
  double At(double x) const {
    if (xs_.size() < 2) return AtFewPoints();
    const Segment s = FindSegment(xs_, x);
    return std::max(0.0, ys_[s.i] + s.t * (ys_[s.i + 1] - ys_[s.i]));
  }
  bool empty() const { return xs_.empty(); }
  const std::vector<double>& xs() const { return xs_; }
  const std::vector<double>& ys() const { return ys_; }

 private:
  double AtFewPoints() const;  // a constant table; throws when empty

  std::vector<double> xs_;
  std::vector<double> ys_;
};

// z[i][j] measured at (xs[i], ys[j]); bilinear inside, linear extrapolation
// outside.
class Table2D {
 public:
  Table2D() = default;
  Table2D(std::vector<double> xs, std::vector<double> ys, const std::vector<std::vector<double>>& z);

  // Throws on an empty table.
  double At(double x, double y) const {
    if (xs_.empty()) ThrowEmpty();
    // Interpolate along y in the (one or two) rows around x, then along x.
    const std::size_t width = ys_.size();
    const Segment sy = FindSegment(ys_, y);
    auto along_y = [&](std::size_t row) {
      const double* z = z_.data() + row * width;
      if (width == 1) return z[0];
      return z[sy.i] + sy.t * (z[sy.i + 1] - z[sy.i]);
    };
    if (xs_.size() == 1) return std::max(0.0, along_y(0));
    const Segment sx = FindSegment(xs_, x);
    const double lo = along_y(sx.i);
    const double hi = along_y(sx.i + 1);
    return std::max(0.0, lo + sx.t * (hi - lo));
  }
  bool empty() const { return xs_.empty(); }

 private:
  [[noreturn]] static void ThrowEmpty();

  std::vector<double> xs_;
  std::vector<double> ys_;
  std::vector<double> z_;  // row-major: z_[i * ys_.size() + j]
};

}  // namespace talaria
