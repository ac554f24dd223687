#include "core/random.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/stats.h"

namespace talaria {
namespace {

TEST(RngTest, SameSeedSameStream) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.NextU64();
    EXPECT_EQ(x, b.NextU64());
    differs |= x != c.NextU64();
  }
  EXPECT_TRUE(differs);
}

TEST(RngTest, StreamIsFixedByTheStandardEngine) {
  // std::mt19937_64's 10000th output for the default seed is specified by
  // the C++ standard; reproducible traces depend on it.
  std::mt19937_64 reference;
  reference.discard(9999);
  EXPECT_EQ(reference(), 9981545732273789042ULL);
}

TEST(RngTest, UniformStaysInRange) {
  Rng r(1);
  for (int i = 0; i < 10000; ++i) {
    const double u = r.Uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    const auto k = r.UniformInt(3, 5);
    ASSERT_GE(k, 3);
    ASSERT_LE(k, 5);
  }
}

TEST(RngTest, LogNormalMedianAndSpreadWithinTolerance) {
  Rng r(7);
  Sample s;
  for (int i = 0; i < 20000; ++i) s.Add(r.LogNormal(0.39, 0.74));
  EXPECT_NEAR(s.Percentile(50), 0.39, 0.39 * 0.03);
  // p95 of a log-normal: median * exp(1.645 sigma) = 1.32.
  EXPECT_NEAR(s.Percentile(95), 0.39 * std::exp(1.6449 * 0.74), 0.06);
}

TEST(RngTest, ForkedStreamsAreIndependentOfLaterDraws) {
  Rng a(5), b(5);
  Rng fa = a.Fork(1);
  Rng fb = b.Fork(1);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(fa.NextU64(), fb.NextU64());
  Rng other = Rng(5).Fork(2);
  EXPECT_NE(Rng(5).Fork(1).NextU64(), other.NextU64());
}

}  // namespace
}  // namespace talaria
