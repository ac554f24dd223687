#include "core/stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace talaria {

std::size_t NearestRankIndex(std::size_t n, double q) {
  TALARIA_CHECK(n > 0, "percentile of an empty sample");
  TALARIA_CHECK(q >= 0.0 && q <= 100.0, "percentile outside [0, 100]");
  // q*n/100 is exact for the integral q and n we use; the small epsilon keeps
  // e.g. q=95, n=20 (= 19.000000000000004 in binary) at rank 19.
  const double exact = q * static_cast<double>(n) / 100.0;
  auto rank = static_cast<std::size_t>(std::ceil(exact - 1e-9));
  return std::clamp<std::size_t>(rank, 1, n);
}

double NearestRank(std::span<const double> sorted, double q) {
  return sorted[NearestRankIndex(sorted.size(), q) - 1];
}

void Sample::Add(double x) {
  if (!values_.empty() && x < values_.back()) sorted_ = false;
  values_.push_back(x);
}

void Sample::Sort() const {
  if (!sorted_) {
    std::sort(values_.begin(), values_.end());
    sorted_ = true;
  }
}

double Sample::Percentile(double q) const {
  Sort();
  return NearestRank(values_, q);
}

double Sample::Min() const {
  TALARIA_CHECK(!values_.empty(), "min of an empty sample");
  Sort();
  return values_.front();
}

double Sample::Max() const {
  TALARIA_CHECK(!values_.empty(), "max of an empty sample");
  Sort();
  return values_.back();
}

double Sample::Mean() const {
  TALARIA_CHECK(!values_.empty(), "mean of an empty sample");
  return std::accumulate(values_.begin(), values_.end(), 0.0) /
         static_cast<double>(values_.size());
}

double Sample::FractionAbove(double x) const {
  if (values_.empty()) return 0.0;
  Sort();
  auto it = std::upper_bound(values_.begin(), values_.end(), x);
  return static_cast<double>(values_.end() - it) / static_cast<double>(values_.size());
}

}  // namespace talaria
