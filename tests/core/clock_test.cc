#include "core/clock.h"

#include <gtest/gtest.h>

namespace talaria {
namespace {

TEST(ManualClockTest, StartsAtGivenTimeAndMovesOnlyWhenAdvanced) {
  ManualClock clock(AtSeconds(2.5));
  EXPECT_EQ(clock.Now(), AtSeconds(2.5));
  EXPECT_EQ(clock.Now(), AtSeconds(2.5));
  clock.Advance(FromSeconds(0.25));
  EXPECT_EQ(clock.Now(), AtSeconds(2.75));
  clock.AdvanceTo(AtSeconds(10));
  EXPECT_DOUBLE_EQ(ToSeconds(clock.Now()), 10.0);
}

TEST(ManualClockDeathTest, TimeNeverRunsBackwards) {
  ManualClock clock(AtSeconds(1));
  EXPECT_DEATH(clock.AdvanceTo(AtSeconds(0.5)), "in the past");
  EXPECT_DEATH(clock.Advance(FromSeconds(-1)), "negative");
}

TEST(SteadyClockTest, StartsNearZeroAndIsMonotonic) {
  SteadyClock clock;
  const TimePoint a = clock.Now();
  const TimePoint b = clock.Now();
  EXPECT_GE(a, TimePoint{});
  EXPECT_LT(ToSeconds(a), 5.0);
  EXPECT_LE(a, b);
}

TEST(TimeTest, SecondsRoundTripAtNanosecondResolution) {
  EXPECT_EQ(FromSeconds(0.39).count(), 390'000'000);
  EXPECT_EQ(FromSeconds(1e-9).count(), 1);
  EXPECT_DOUBLE_EQ(ToSeconds(FromSeconds(1234.5)), 1234.5);
}

}  // namespace
}  // namespace talaria
