// When does an agent session come back? A model of the gap between one of
// a session's calls completing and its next call arriving, learned online
// (issue 18): each session's own gaps, shrunk towards its population's
// (the sessions of one model on an instance, say) until it has a few, and
// the population's return rate (the share of completions a next call
// follows at all: the last call of a session has none).
//
// Gaps are modelled as log-normal (tool latencies are products of many
// factors; the project's and the public traces' gaps are heavy-tailed), so
//   P(return within t) = rate * Phi((ln t - mu) / sigma),
// with mu and sigma the session's log-gap mean and deviation after
// shrinkage: a session with n gaps weighs its own estimate n against the
// population's kPriorWeight. The population's statistics decay with a
// half-life of kHalfLife observations, so it follows a workload that changes.
//
// Agent hints: a call may say how long its tool will take before the next
// call (expected_tool_s). Hints are untrusted, so the model learns how far
// returns fall from them: the log-ratio of each hinted return's gap to its
// hint, decayed like the gaps, with the rate at which hinted calls come
// back at all. A hinted session's gap is then
//   hint * exp(N(mu_err, sigma_err)),
// the error's mean and spread shrunk towards an uninformed prior until a
// few hinted returns are seen: exact hints make the distribution sharp,
// noisy ones wide, and hints that lie are discounted like any bad predictor.
//
// Policy code: no clock, no I/O; O(1) to update and to query. Not synchronized.
#pragma once

#include <cstdint>

namespace talaria {

// Log-gap statistics of one session (Welford's running mean and variance).
struct SessionGaps {
  std::int32_t n = 0;
  double mean_log = 0;
  double m2_log = 0;
};

// One session's gap distribution, as ReturnModel::For resolved it: cheap
// to evaluate many times (a hold's scan over candidate lengths).
struct GapDistribution {
  double rate = 0;   // P(the session comes back at all)
  double mean_log = 0;
  double sigma_log = 1;
  // P(the next call arrives within `t_s` of the last completion).
  double Within(double t_s) const;
  // The same given it had not arrived by a time at which Within was `back`
  // (< 1): P(it arrives by `t_s` | not by then); 0 when nothing is left.
  double WithinGiven(double back, double t_s) const { return Given(back, Within(t_s)); }
  // P(it arrives by a time at which Within is `by` | not by one at which
  // it was `back`), for a caller that has `by` already.
  static double Given(double back, double by) { return back < 1 && by > back ? (by - back) / (1 - back) : 0; }
  // The gap by which a share `q` (in (0, 1)) of the returns that come have
  // come: the q-quantile of the gap given a return.
  double QuantileGivenReturn(double q) const;
};

class ReturnModel {
 public:
  // How many gaps the population's estimate counts as in a session's.
  static constexpr double kPriorWeight = 2;
  // Observations after which the population's older ones weigh half.
  static constexpr double kHalfLife = 200;

  // A call of a session completed (the rate's denominator).
  void ObserveCompletion();
  // A session's next call came `gap_s` after its previous one completed.
  void ObserveReturn(SessionGaps& session, double gap_s);

  // The session's gap distribution: its own gaps shrunk towards the
  // population's, with the population's return rate.
  GapDistribution For(const SessionGaps& session) const;

  // A call that carried a tool-time hint completed; a session came back
  // `gap_s` after a call that hinted `hint_s`.
  void ObserveHintedCompletion();
  void ObserveHintedReturn(double gap_s, double hint_s);
  // The gap distribution after a call that hinted `hint_s` (>= 0).
  GapDistribution ForHint(double hint_s) const;
  // P(the session's next call arrives within `t_s` of its last completion).
  double ProbabilityWithin(const SessionGaps& session, double t_s) const { return For(session).Within(t_s); }
  // The same for a session not seen before (the population alone).
  double ProbabilityWithin(double t_s) const { return ProbabilityWithin(SessionGaps{}, t_s); }

  // The population's estimates (for telemetry and tests).
  double return_rate() const;
  double median_gap_s() const;

 private:
  // Decayed sums of the population: returns, completions, and the log-gap
  // moments (weight, weighted sum, weighted sum of squares).
  double returns_ = 0;
  double completions_ = 0;
  double w_ = 0;
  double sum_log_ = 0;
  double sum_sq_log_ = 0;
  // The same for hinted calls: returns, completions, and the moments of
  // log(gap / hint).
  double hinted_returns_ = 0;
  double hinted_completions_ = 0;
  double hint_w_ = 0;
  double hint_sum_ = 0;
  double hint_sum_sq_ = 0;
};

}  // namespace talaria
