// Measured-point tables with piecewise-linear interpolation.
//
// Between points the value is interpolated linearly; outside the measured
// range it is extrapolated along the nearest segment (a one-point table is
// constant), and never returned below zero. Profiles are measured at a few
// points, so extrapolation is explicit rather than silently clamped.
#pragma once

#include <string>
#include <vector>

namespace talaria {

class Table1D {
 public:
  Table1D() = default;
  // REQUIRES (checked by the profile loader): xs strictly increasing,
  // xs.size() == ys.size() >= 1.
  Table1D(std::vector<double> xs, std::vector<double> ys);

  double At(double x) const;
  bool empty() const { return xs_.empty(); }
  const std::vector<double>& xs() const { return xs_; }
  const std::vector<double>& ys() const { return ys_; }

 private:
  std::vector<double> xs_;
  std::vector<double> ys_;
};

// z[i][j] measured at (xs[i], ys[j]); bilinear inside, linear extrapolation
// outside.
class Table2D {
 public:
  Table2D() = default;
  Table2D(std::vector<double> xs, std::vector<double> ys, std::vector<std::vector<double>> z);

  double At(double x, double y) const;
  bool empty() const { return xs_.empty(); }

 private:
  std::vector<double> xs_;
  std::vector<double> ys_;
  std::vector<std::vector<double>> z_;
};

// Index i of the segment [v[i], v[i+1]] used for x (0 when v has one point),
// and the position t of x along it (may be < 0 or > 1 when extrapolating).
struct Segment {
  std::size_t i;
  double t;
};
Segment FindSegment(const std::vector<double>& v, double x);

}  // namespace talaria
