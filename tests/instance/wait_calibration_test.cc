// W measured against W predicted: adaptive holds use the queues' estimate
// until enough ways back are known, then scale it by what they took.
#include "instance/wait_calibration.h"

#include <gtest/gtest.h>

namespace talaria {
namespace {

TEST(WaitCalibrationTest, UsesThePredictionUntilEnoughWaysBackAreKnown) {
  WaitCalibration c;
  for (std::int64_t i = 1; i < WaitCalibration::kMinSamples; ++i) {
    c.Observe(2.0, 6.0);
    EXPECT_DOUBLE_EQ(c.Scale(), 1.0) << i << " ways back";
  }
  c.Observe(2.0, 6.0);
  EXPECT_DOUBLE_EQ(c.Scale(), 3.0);  // the ways back took 3x the prediction
}

TEST(WaitCalibrationTest, IsTheRatioOfTheMeansNotTheMeanOfRatios) {
  WaitCalibration c;
  for (std::int64_t i = 0; i < WaitCalibration::kMinSamples / 2; ++i) {
    c.Observe(1.0, 4.0);   // ratio 4 on a short way
    c.Observe(9.0, 12.0);  // ratio 4/3 on a long one
  }
  EXPECT_DOUBLE_EQ(c.Scale(), 8.0 / 5.0);  // mean 8 s taken over mean 5 s predicted
}

// A switch out with no other model waiting predicts W = 0 (none is
// recorded as < 0): no ratio to learn from.
TEST(WaitCalibrationTest, IgnoresWaysBackPredictedAsNone) {
  WaitCalibration c;
  for (std::int64_t i = 0; i < 2 * WaitCalibration::kMinSamples; ++i) {
    c.Observe(0.0, 5.0);
    c.Observe(-1.0, 5.0);
  }
  EXPECT_EQ(c.samples(), 0);
  EXPECT_DOUBLE_EQ(c.Scale(), 1.0);
}

}  // namespace
}  // namespace talaria
