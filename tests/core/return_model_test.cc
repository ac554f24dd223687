#include "core/return_model.h"

#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace talaria
