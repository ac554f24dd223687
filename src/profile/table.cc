#include "profile/table.h"

#include "core/error.h"

namespace talaria {

Table1D::Table1D(std::vector<double> xs, std::vector<double> ys)
    : xs_(std::move(xs)), ys_(std::move(ys)) {
  TALARIA_CHECK(!xs_.empty() && xs_.size() == ys_.size(), "Table1D needs matching points");
}

double Table1D::AtFewPoints() const {
  TALARIA_CHECK(!xs_.empty(), "lookup in an empty table");
  return std::max(0.0, ys_[0]);
}

void Table2D::ThrowEmpty() { CheckFailed("!empty()", "lookup in an empty table", __FILE__, __LINE__); }

Table2D::Table2D(std::vector<double> xs, std::vector<double> ys, const std::vector<std::vector<double>>& z)
    : xs_(std::move(xs)), ys_(std::move(ys)) {
  TALARIA_CHECK(!xs_.empty() && !ys_.empty() && z.size() == xs_.size(), "Table2D shape");
  z_.reserve(xs_.size() * ys_.size());
  for (const auto& row : z) {
    TALARIA_CHECK(row.size() == ys_.size(), "Table2D row length");
    z_.insert(z_.end(), row.begin(), row.end());
  }
}

}  // namespace talaria
