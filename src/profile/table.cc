#include "profile/table.h"

#include <algorithm>

#include "core/error.h"

namespace talaria {

Segment FindSegment(const std::vector<double>& v, double x) {
  const std::size_t n = v.size();
  if (n < 2) return {0, 0.0};
  // The first point above x, kept within [1, n-1]. Profiles' tables have a
  // handful of points: a forward scan beats a binary search's
  // unpredictable branches there (the router evaluates ~10 per decision).
  std::size_t hi = 1;
  if (n <= 16) {
    while (hi + 1 < n && v[hi] <= x) ++hi;
  } else {
    auto it = std::upper_bound(v.begin(), v.end(), x);
    hi = std::clamp<std::size_t>(static_cast<std::size_t>(it - v.begin()), 1, n - 1);
  }
  const std::size_t lo = hi - 1;
  return {lo, (x - v[lo]) / (v[hi] - v[lo])};
}

Table1D::Table1D(std::vector<double> xs, std::vector<double> ys)
    : xs_(std::move(xs)), ys_(std::move(ys)) {
  TALARIA_CHECK(!xs_.empty() && xs_.size() == ys_.size(), "Table1D needs matching points");
}

double Table1D::At(double x) const {
  TALARIA_CHECK(!xs_.empty(), "lookup in an empty table");
  if (xs_.size() == 1) return std::max(0.0, ys_[0]);
  const Segment s = FindSegment(xs_, x);
  return std::max(0.0, ys_[s.i] + s.t * (ys_[s.i + 1] - ys_[s.i]));
}

Table2D::Table2D(std::vector<double> xs, std::vector<double> ys, std::vector<std::vector<double>> z)
    : xs_(std::move(xs)), ys_(std::move(ys)), z_(std::move(z)) {
  TALARIA_CHECK(!xs_.empty() && !ys_.empty() && z_.size() == xs_.size(), "Table2D shape");
  for (const auto& row : z_) TALARIA_CHECK(row.size() == ys_.size(), "Table2D row length");
}

double Table2D::At(double x, double y) const {
  TALARIA_CHECK(!xs_.empty(), "lookup in an empty table");
  // Interpolate along y in the (one or two) rows around x, then along x.
  auto along_y = [&](std::size_t row) {
    if (ys_.size() == 1) return z_[row][0];
    const Segment s = FindSegment(ys_, y);
    return z_[row][s.i] + s.t * (z_[row][s.i + 1] - z_[row][s.i]);
  };
  if (xs_.size() == 1) return std::max(0.0, along_y(0));
  const Segment s = FindSegment(xs_, x);
  const double lo = along_y(s.i);
  const double hi = along_y(s.i + 1);
  return std::max(0.0, lo + s.t * (hi - lo));
}

}  // namespace talaria
