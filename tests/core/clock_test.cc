#include "core/clock.h"

#include <cmath>
#include <limits>
#include <random>

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

TEST(TimeTest, RoundsToNearestExactlyAsTheLibraryDoes) {
  // Halfway cases go away from zero; the largest double below one half
  // stays at zero (adding 0.5 and truncating would give 1).
  for (const double x : {0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999999999999994, -0.49999999999999994,
                         4503599627370495.5, -4503599627370495.5, 0x1p52, 0x1p53 + 2, 0x1p62 - 1024, 1e18, -1e18, 0x1p62,
                         0x1p63 - 1024, -0x1p63}) {
    EXPECT_EQ(RoundToNearest(x), std::llround(x)) << x;
  }
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> seconds(-1e6, 1e6);
  std::uniform_int_distribution<std::int64_t> halves(-(std::int64_t{1} << 40), std::int64_t{1} << 40);
  for (int i = 0; i < 100'000; ++i) {
    const double x = seconds(rng) * 1e9;
    ASSERT_EQ(RoundToNearest(x), std::llround(x)) << x;
    const double half = static_cast<double>(halves(rng)) + 0.5;
    ASSERT_EQ(RoundToNearest(half), std::llround(half)) << half;
  }
}

}  // namespace
}  // namespace talaria
