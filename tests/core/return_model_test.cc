#include "core/return_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/random.h"

namespace talaria {
namespace {

TEST(ReturnModelTest, BeforeAnythingIsSeenAReturnIsAsLikelyAsNotAroundASecond) {
  ReturnModel m;
  EXPECT_NEAR(m.ProbabilityWithin(1.0), 0.25, 1e-9);  // rate 0.5, median 1 s
  EXPECT_LT(m.ProbabilityWithin(0.1), m.ProbabilityWithin(1.0));
  EXPECT_EQ(m.ProbabilityWithin(0), 0);
}

TEST(ReturnModelTest, APopulationOfShortGapsPredictsQuickReturns) {
  ReturnModel m;
  for (int i = 0; i < 100; ++i) {
    SessionGaps s;
    m.ObserveCompletion();
    m.ObserveReturn(s, 0.2 * (1 + 0.1 * (i % 5)));  // 0.2-0.28 s
  }
  EXPECT_NEAR(m.return_rate(), 1.0, 1e-9);
  EXPECT_NEAR(m.median_gap_s(), 0.24, 0.02);
  EXPECT_GT(m.ProbabilityWithin(0.5), 0.95);
  EXPECT_LT(m.ProbabilityWithin(0.1), 0.05);
}

// The quantile given a return ignores the sessions that never come back:
// it is where that share of the returns have come, so Within there is the
// rate times the share.
TEST(ReturnModelTest, AQuantileGivenAReturnCountsOnlyTheReturns) {
  const GapDistribution g{0.75, std::log(0.5), 0.3};  // three in four back, around 0.5 s
  EXPECT_NEAR(g.QuantileGivenReturn(0.5), 0.5, 1e-9);
  const double q95 = g.QuantileGivenReturn(0.95);
  EXPECT_NEAR(q95, 0.5 * std::exp(0.3 * 1.6448536), 1e-6);
  EXPECT_NEAR(g.Within(q95), 0.75 * 0.95, 1e-9);
  EXPECT_LT(g.QuantileGivenReturn(0.05), 0.5);
  EXPECT_GT(g.QuantileGivenReturn(1.0), q95);  // clamped short of infinity
  EXPECT_TRUE(std::isfinite(g.QuantileGivenReturn(1.0)));
}

TEST(ReturnModelTest, TheReturnRateIsTheShareOfCompletionsANextCallFollows) {
  ReturnModel m;
  SessionGaps s;
  for (int i = 0; i < 40; ++i) {
    m.ObserveCompletion();
    if (i % 4 != 3) m.ObserveReturn(s, 0.5);  // every fourth completion was a session's last
  }
  EXPECT_NEAR(m.return_rate(), 0.75, 0.03);
  EXPECT_NEAR(m.ProbabilityWithin(s, 60), 0.75, 0.03);
}

TEST(ReturnModelTest, ASessionsOwnGapsOutweighThePopulationOnceItHasAFew) {
  ReturnModel m;
  SessionGaps quick;
  for (int i = 0; i < 200; ++i) {
    m.ObserveCompletion();
    m.ObserveReturn(quick, 0.3);
  }
  SessionGaps slow;  // a session whose tool runs take 10 s
  const double before = m.ProbabilityWithin(slow, 1.0);
  for (int i = 0; i < 6; ++i) {
    m.ObserveCompletion();
    m.ObserveReturn(slow, 10.0 * (1 + 0.05 * i));
  }
  EXPECT_GT(before, 0.9);
  EXPECT_LT(m.ProbabilityWithin(slow, 1.0), 0.1);
  EXPECT_GT(m.ProbabilityWithin(slow, 30.0), 0.9);
  EXPECT_GT(m.ProbabilityWithin(quick, 1.0), 0.9);
}

TEST(ReturnModelTest, ThePopulationFollowsAWorkloadThatChanges) {
  ReturnModel m;
  SessionGaps s;
  for (int i = 0; i < 500; ++i) {
    m.ObserveCompletion();
    m.ObserveReturn(s, 0.2);
  }
  for (int i = 0; i < 1500; ++i) {
    m.ObserveCompletion();
    m.ObserveReturn(s, 5.0);
  }
  EXPECT_NEAR(m.median_gap_s(), 5.0, 0.5);  // the old regime weighs 2^-7.5 by now
}

// Hints: before any is checked, a hint is the median and its spread wide;
// exact hints sharpen it; noisy ones keep it wide; hints that say "soon"
// of sessions that never come back lose their rate.
TEST(ReturnModelTest, HintsAreWeighedByHowWellTheyPredicted) {
  ReturnModel fresh;
  EXPECT_NEAR(fresh.ForHint(2.0).Within(2.0), 0.5, 1e-9);  // median at the hint, rate 1
  EXPECT_GT(fresh.ForHint(2.0).Within(20.0), 0.95);

  ReturnModel exact;
  for (int i = 0; i < 200; ++i) {
    exact.ObserveHintedCompletion();
    exact.ObserveHintedReturn(0.5 + i % 7, 0.5 + i % 7);
  }
  const GapDistribution sharp = exact.ForHint(3.0);
  EXPECT_GT(sharp.Within(3.6), 0.9);  // within 20% of the hint either side
  EXPECT_LT(sharp.Within(2.5), 0.1);

  ReturnModel noisy;
  Rng rng(3);
  for (int i = 0; i < 200; ++i) {
    noisy.ObserveHintedCompletion();
    noisy.ObserveHintedReturn(3.0 * std::exp(rng.Uniform(-std::log(2.0), std::log(2.0))), 3.0);
  }
  const GapDistribution wide = noisy.ForHint(3.0);
  EXPECT_GT(wide.sigma_log, 0.3);  // log-uniform on [ln 1/2, ln 2]: sd 0.40
  EXPECT_LT(wide.sigma_log, 0.5);
  EXPECT_NEAR(wide.Within(3.0), 0.5, 0.1);

  ReturnModel liars;
  for (int i = 0; i < 200; ++i) liars.ObserveHintedCompletion();  // "back in a second", never back
  EXPECT_LT(liars.ForHint(1.0).Within(100.0), 0.05);
}

}  // namespace
}  // namespace talaria
