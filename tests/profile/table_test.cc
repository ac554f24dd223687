#include "profile/table.h"

#include <gtest/gtest.h>

namespace talaria {
namespace {

TEST(Table1DTest, InterpolatesBetweenPoints) {
  Table1D t({0, 25000, 100000}, {0.05, 4.3, 10.9});
  EXPECT_DOUBLE_EQ(t.At(25000), 4.3);
  EXPECT_DOUBLE_EQ(t.At(100000), 10.9);
  EXPECT_NEAR(t.At(62500), (4.3 + 10.9) / 2, 1e-12);
  EXPECT_NEAR(t.At(12500), (0.05 + 4.3) / 2, 1e-12);
}

TEST(Table1DTest, ExtrapolatesAlongEndSegmentsAndNeverBelowZero) {
  Table1D t({10, 20}, {1.0, 3.0});
  EXPECT_DOUBLE_EQ(t.At(30), 5.0);
  EXPECT_DOUBLE_EQ(t.At(5), 0.0);  // would be 0.0 exactly
  EXPECT_DOUBLE_EQ(t.At(0), 0.0);  // would be -1, clamped
}

TEST(Table1DTest, SinglePointIsConstant) {
  Table1D t({8}, {2.5});
  EXPECT_DOUBLE_EQ(t.At(0), 2.5);
  EXPECT_DOUBLE_EQ(t.At(1e6), 2.5);
}

TEST(Table2DTest, BilinearInsideExactAtCorners) {
  Table2D t({1, 3}, {100, 300}, {{1.0, 2.0}, {3.0, 6.0}});
  EXPECT_DOUBLE_EQ(t.At(1, 100), 1.0);
  EXPECT_DOUBLE_EQ(t.At(3, 300), 6.0);
  EXPECT_DOUBLE_EQ(t.At(2, 200), (1.0 + 2.0 + 3.0 + 6.0) / 4);
  EXPECT_DOUBLE_EQ(t.At(1, 200), 1.5);
}

TEST(Table2DTest, ExtrapolatesOnBothAxes) {
  Table2D t({1, 2}, {10, 20}, {{1.0, 2.0}, {2.0, 4.0}});
  EXPECT_DOUBLE_EQ(t.At(3, 10), 3.0);
  EXPECT_DOUBLE_EQ(t.At(1, 30), 3.0);
}

}  // namespace
}  // namespace talaria
