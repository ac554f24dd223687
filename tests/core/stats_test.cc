#include "core/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace talaria {
namespace {

TEST(NearestRankTest, SingleObservationIsEveryPercentile) {
  std::vector<double> v{7.0};
  EXPECT_EQ(NearestRank(v, 0), 7.0);
  EXPECT_EQ(NearestRank(v, 50), 7.0);
  EXPECT_EQ(NearestRank(v, 100), 7.0);
}

TEST(NearestRankTest, RankIsCeilingOfQTimesNOver100) {
  std::vector<double> v{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(NearestRank(v, 50), 5);   // ceil(5.0) = 5
  EXPECT_EQ(NearestRank(v, 51), 6);   // ceil(5.1) = 6
  EXPECT_EQ(NearestRank(v, 95), 10);  // ceil(9.5) = 10
  EXPECT_EQ(NearestRank(v, 10), 1);
  EXPECT_EQ(NearestRank(v, 100), 10);
  EXPECT_EQ(NearestRank(v, 0), 1);  // rank clamped to 1
}

TEST(NearestRankTest, ExactProductsDoNotRoundUp) {
  // 95 * 20 / 100 = 19 exactly; floating point must not push it to rank 20.
  EXPECT_EQ(NearestRankIndex(20, 95), 19u);
  EXPECT_EQ(NearestRankIndex(960, 50), 480u);
  EXPECT_EQ(NearestRankIndex(30, 95), 29u);  // ceil(28.5)
  EXPECT_EQ(NearestRankIndex(445, 50), 223u);
}

TEST(NearestRankTest, TiesReturnTheTiedValue) {
  std::vector<double> v{1, 2, 2, 2, 9};
  EXPECT_EQ(NearestRank(v, 40), 2);
  EXPECT_EQ(NearestRank(v, 80), 2);
  EXPECT_EQ(NearestRank(v, 81), 9);
}

TEST(SampleTest, SortsLazilyAndReportsObservedValues) {
  Sample s;
  for (double x : {5.0, 1.0, 4.0, 2.0, 3.0}) s.Add(x);
  EXPECT_EQ(s.Percentile(50), 3);
  EXPECT_EQ(s.Min(), 1);
  EXPECT_EQ(s.Max(), 5);
  EXPECT_DOUBLE_EQ(s.Mean(), 3);
  s.Add(0.5);  // unsorted again
  EXPECT_EQ(s.Min(), 0.5);
  EXPECT_EQ(s.Percentile(100), 5);
}

TEST(SampleTest, FractionAboveIsStrict) {
  Sample s;
  for (double x : {1.0, 2.0, 2.0, 3.0}) s.Add(x);
  EXPECT_DOUBLE_EQ(s.FractionAbove(2.0), 0.25);
  EXPECT_DOUBLE_EQ(s.FractionAbove(0.0), 1.0);
  EXPECT_DOUBLE_EQ(Sample().FractionAbove(1.0), 0.0);
}

TEST(SampleDeathTest, PercentileOfEmptySampleIsABug) {
  EXPECT_DEATH(Sample().Percentile(50), "empty sample");
}

// The first `window` samples average evenly; after that each new one
// weighs 1 / window, so the mean follows a shift instead of diluting it.
TEST(WindowedMeanTest, RunningMeanThenEwmaOfTheWindowsWeight) {
  WindowedMean m;
  m.Add(2, 4);
  EXPECT_DOUBLE_EQ(m.value, 2);
  m.Add(4, 4);
  m.Add(6, 4);
  m.Add(8, 4);
  EXPECT_DOUBLE_EQ(m.value, 5);  // (2 + 4 + 6 + 8) / 4
  EXPECT_EQ(m.samples, 4);
  m.Add(13, 4);
  EXPECT_DOUBLE_EQ(m.value, 7);  // 5 + (13 - 5) / 4, not the running mean 6.6
  EXPECT_EQ(m.samples, 4);
}

// A rate from the mean interval: nothing until two arrivals, then one over
// the mean gap, following a change in pace within the window.
TEST(ArrivalRateTest, OneOverTheMeanInterval) {
  ArrivalRate r;
  EXPECT_EQ(r.PerSecond(), 0);
  r.Observe(TimePoint{});
  EXPECT_EQ(r.PerSecond(), 0);
  r.Observe(TimePoint{} + FromSeconds(0.5));
  r.Observe(TimePoint{} + FromSeconds(1.0));
  EXPECT_NEAR(r.PerSecond(), 2.0, 1e-9);
  TimePoint t = TimePoint{} + FromSeconds(1.0);
  for (std::int64_t i = 0; i < 4 * ArrivalRate::kWindow; ++i) r.Observe(t += FromSeconds(0.1));
  EXPECT_NEAR(r.PerSecond(), 10.0, 0.5);  // the old pace has all but left the window
}

// Output lengths 1, 10, 100, 1000 (ln spread evenly around ln 31.6): half
// lie below the geometric mean, and the heavy tail that puts the plain
// mean at 278 still leaves most draws short.
// Steps of 1 s, each after 3 s idle: busy a quarter of the time. The first
// step only starts the clock (no span before it); a later change of pace is
// followed within the window.
TEST(BusyFractionTest, StepTimeOverTheSpanFromStepEndToStepEnd) {
  BusyFraction b;
  EXPECT_EQ(b.Value(), 0);
  b.Step(AtSeconds(0), AtSeconds(1));
  EXPECT_EQ(b.Value(), 0);  // one step: no span yet
  double t = 1;
  for (int i = 0; i < 10; ++i, t += 4) b.Step(AtSeconds(t + 3), AtSeconds(t + 4));
  EXPECT_NEAR(b.Value(), 0.25, 1e-9);
  for (int i = 0; i < 10 * static_cast<int>(BusyFraction::kWindow); ++i, t += 2) b.Step(AtSeconds(t), AtSeconds(t + 2));
  EXPECT_NEAR(b.Value(), 1.0, 1e-3);  // back to back: the idle pace has all but left the window
}

TEST(WindowedLogNormalTest, CdfOfTheLogsMeanAndSpread) {
  WindowedLogNormal d;
  EXPECT_EQ(d.Cdf(5), 1);  // nothing seen: nothing says it would not fit
  for (double x : {1.0, 10.0, 100.0, 1000.0}) d.Add(x, 64);
  EXPECT_NEAR(d.Cdf(std::sqrt(1000.0)), 0.5, 1e-9);
  EXPECT_NEAR(d.Cdf(278), 0.80, 0.01);  // the plain mean: most draws below it
  EXPECT_LT(d.Cdf(2), d.Cdf(20));
  EXPECT_EQ(d.Cdf(0), 0);
  WindowedLogNormal same;
  for (int i = 0; i < 3; ++i) same.Add(50, 64);
  EXPECT_EQ(same.Cdf(49.9), 0);  // no spread: a step at the value
  EXPECT_EQ(same.Cdf(50.1), 1);
}

}  // namespace
}  // namespace talaria
