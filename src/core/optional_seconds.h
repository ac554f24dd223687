// An optional duration in seconds in the 8 bytes of a double: absent is a
// quiet NaN, which no duration is (std::optional<double> takes 16). A trace
// call carries three of them, and a replay holds millions of calls.
//
// The interface is std::optional's, as far as the trace uses it. Assigning
// NaN is a bug (CHECKed): a NaN duration is invalid input, rejected where
// it is read.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <ostream>

#include "core/error.h"

namespace talaria {

class OptionalSeconds {
 public:
  constexpr OptionalSeconds() noexcept = default;
  constexpr OptionalSeconds(std::nullopt_t) noexcept {}  // NOLINT(google-explicit-constructor)
  OptionalSeconds(double s) : s_(Checked(s)) {}          // NOLINT(google-explicit-constructor)
  OptionalSeconds(std::optional<double> s) : s_(s ? Checked(*s) : kAbsent) {}  // NOLINT(google-explicit-constructor)

  bool has_value() const noexcept { return !std::isnan(s_); }
  explicit operator bool() const noexcept { return has_value(); }
  // REQUIRES: has_value().
  double operator*() const noexcept { return s_; }
  double value_or(double otherwise) const noexcept { return has_value() ? s_ : otherwise; }
  void reset() noexcept { s_ = kAbsent; }

  friend bool operator==(const OptionalSeconds& a, std::nullopt_t) noexcept { return !a.has_value(); }
  friend bool operator==(const OptionalSeconds& a, double b) noexcept { return a.has_value() && a.s_ == b; }
  friend bool operator==(const OptionalSeconds& a, const OptionalSeconds& b) noexcept {
    return a.has_value() == b.has_value() && (!a.has_value() || a.s_ == b.s_);
  }
  friend std::ostream& operator<<(std::ostream& out, const OptionalSeconds& s) {
    return s.has_value() ? out << s.s_ : out << "(none)";
  }

 private:
  static constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();
  static double Checked(double s) {
    TALARIA_CHECK(!std::isnan(s), "OptionalSeconds: NaN is not a duration");
    return s;
  }
  double s_ = kAbsent;
};

}  // namespace talaria
