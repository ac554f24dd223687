#include "core/return_model.h"

#include <algorithm>
#include <cmath>

#include <boost/math/special_functions/erf.hpp>

namespace talaria {
namespace {

// Before anything is seen: a return is as likely as not, around 1 s, with a
// wide spread (no gap is ruled out).
constexpr double kDefaultRate = 0.5;
constexpr double kDefaultMeanLog = 0.0;  // ln 1 s
constexpr double kDefaultSigma = 1.5;
constexpr double kMinSigma = 0.05;  // a session whose gaps are all equal still has some spread
constexpr double kMinGapS = 1e-3;   // ln of a zero gap
// Before hinted returns are seen: a hint is right to within a factor of e
// (one standard deviation of the log-ratio), and a hinted call comes back.
constexpr double kDefaultHintSigma = 1.0;
constexpr double kDefaultHintRate = 1.0;

const double kDecay = std::exp2(-1.0 / ReturnModel::kHalfLife);

}  // namespace

void ReturnModel::ObserveCompletion() {
  completions_ = completions_ * kDecay + 1;
  returns_ *= kDecay;
}

void ReturnModel::ObserveReturn(SessionGaps& s, double gap_s) {
  const double x = std::log(std::max(gap_s, kMinGapS));
  returns_ += 1;
  // The rate's numerator and denominator decay together at completions; a
  // return counts against the completion before it.
  returns_ = std::min(returns_, completions_);
  w_ = w_ * kDecay + 1;
  sum_log_ = sum_log_ * kDecay + x;
  sum_sq_log_ = sum_sq_log_ * kDecay + x * x;
  ++s.n;
  const double delta = x - s.mean_log;
  s.mean_log += delta / s.n;
  s.m2_log += delta * (x - s.mean_log);
}

double ReturnModel::return_rate() const {
  return completions_ > 0 ? std::clamp(returns_ / completions_, 0.0, 1.0) : kDefaultRate;
}

double ReturnModel::median_gap_s() const { return std::exp(w_ > 0 ? sum_log_ / w_ : kDefaultMeanLog); }

double GapDistribution::Within(double t_s) const {
  if (!(t_s > 0)) return 0;
  const double z = (std::log(t_s) - mean_log) / sigma_log;
  return rate * 0.5 * std::erfc(-z / std::sqrt(2.0));
}

double GapDistribution::QuantileGivenReturn(double q) const {
  const double z = std::sqrt(2.0) * boost::math::erf_inv(2 * std::clamp(q, 1e-9, 1 - 1e-9) - 1);
  return std::exp(mean_log + sigma_log * z);
}

GapDistribution ReturnModel::For(const SessionGaps& s) const {
  // The population's log-normal, then the session's shrunk towards it.
  double mean = kDefaultMeanLog;
  double var = kDefaultSigma * kDefaultSigma;
  if (w_ > 0) {
    mean = sum_log_ / w_;
    // With one observation the spread is unknown: keep the default's.
    if (w_ > 1.5) var = std::max(sum_sq_log_ / w_ - mean * mean, kMinSigma * kMinSigma);
  }
  if (s.n > 0) {
    const double n = s.n;
    const double own_var = s.n > 1 ? s.m2_log / (n - 1) : var;
    mean = (n * s.mean_log + kPriorWeight * mean) / (n + kPriorWeight);
    var = (n * own_var + kPriorWeight * var) / (n + kPriorWeight);
  }
  return GapDistribution{return_rate(), mean, std::max(std::sqrt(var), kMinSigma)};
}

void ReturnModel::ObserveHintedCompletion() {
  hinted_completions_ = hinted_completions_ * kDecay + 1;
  hinted_returns_ *= kDecay;
}

void ReturnModel::ObserveHintedReturn(double gap_s, double hint_s) {
  const double x = std::log(std::max(gap_s, kMinGapS)) - std::log(std::max(hint_s, kMinGapS));
  hinted_returns_ = std::min(hinted_returns_ + 1, hinted_completions_);
  hint_w_ = hint_w_ * kDecay + 1;
  hint_sum_ = hint_sum_ * kDecay + x;
  hint_sum_sq_ = hint_sum_sq_ * kDecay + x * x;
}

GapDistribution ReturnModel::ForHint(double hint_s) const {
  // The observed error's mean and variance, shrunk towards the prior's
  // (mean 0, kDefaultHintSigma) with kPriorWeight; likewise the rate.
  double mean = 0;
  double var = kDefaultHintSigma * kDefaultHintSigma;
  if (hint_w_ > 0) {
    const double own_mean = hint_sum_ / hint_w_;
    const double own_var = std::max(hint_sum_sq_ / hint_w_ - own_mean * own_mean, 0.0);
    mean = hint_w_ * own_mean / (hint_w_ + kPriorWeight);
    var = (hint_w_ * own_var + kPriorWeight * var) / (hint_w_ + kPriorWeight);
  }
  const double rate = (hinted_returns_ + kPriorWeight * kDefaultHintRate) / (hinted_completions_ + kPriorWeight);
  return GapDistribution{std::clamp(rate, 0.0, 1.0), std::log(std::max(hint_s, kMinGapS)) + mean,
                         std::max(std::sqrt(var), kMinSigma)};
}

}  // namespace talaria
