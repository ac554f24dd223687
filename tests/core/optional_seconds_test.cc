#include "core/optional_seconds.h"

#include <optional>
#include <sstream>

#include <gtest/gtest.h>

namespace talaria {
namespace {

TEST(OptionalSecondsTest, HoldsEveryDurationIncludingZeroAndNegatives) {
  static_assert(sizeof(OptionalSeconds) == sizeof(double));
  OptionalSeconds s;
  EXPECT_FALSE(s.has_value());
  EXPECT_EQ(s, std::nullopt);
  EXPECT_EQ(s.value_or(-1.0), -1.0);
  for (const double v : {0.0, -0.0, -1.5, 31.25, 1e300}) {
    s = v;
    ASSERT_TRUE(s) << v;
    EXPECT_EQ(*s, v);
    EXPECT_EQ(s, v);
    EXPECT_EQ(s.value_or(7.0), v);
  }
  s.reset();
  EXPECT_FALSE(s);
  EXPECT_NE(s, 0.0);  // absent equals no value
}

TEST(OptionalSecondsTest, ConvertsFromAStdOptional) {
  EXPECT_EQ(OptionalSeconds(std::optional<double>()), std::nullopt);
  EXPECT_EQ(OptionalSeconds(std::optional<double>(2.5)), 2.5);
  EXPECT_EQ(OptionalSeconds(2.5), OptionalSeconds(std::optional<double>(2.5)));
  EXPECT_NE(OptionalSeconds(2.5), OptionalSeconds());
  std::ostringstream out;
  out << OptionalSeconds() << ' ' << OptionalSeconds(1.5);
  EXPECT_EQ(out.str(), "(none) 1.5");
}

TEST(OptionalSecondsDeathTest, NaNIsNotADuration) {
  EXPECT_DEATH(OptionalSeconds(std::numeric_limits<double>::quiet_NaN()), "NaN is not a duration");
}

}  // namespace
}  // namespace talaria
