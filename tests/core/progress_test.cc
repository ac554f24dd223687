#include "core/progress.h"

#include <gtest/gtest.h>

namespace talaria {
namespace {

TEST(ProgressTest, ABarWithPercentRateAndTimeLeft) {
  EXPECT_EQ(FormatProgress("replay", 250, 1000, "calls", 5.0, 10),
            "replay [##........]  25% 250/1000 calls, 50 calls/s, ETA 15 s");
  EXPECT_EQ(FormatProgress("replay", 1000, 1000, "calls", 20.0, 4), "replay [####] 100% 1000/1000 calls, 50 calls/s");
}

TEST(ProgressTest, PlainLinesHaveNoBarAndNothingIsGuessedBeforeWorkIsDone) {
  EXPECT_EQ(FormatProgress("measure", 0, 40, "points", 0.0, 0), "measure   0% 0/40 points");
  EXPECT_EQ(FormatProgress("measure", 3, 0, "points", 1.5, 20), "measure 3 points, 2 points/s");
}

TEST(ProgressTest, DurationsReadAsPeopleSayThem) {
  EXPECT_EQ(FormatDuration(42.4), "42 s");
  EXPECT_EQ(FormatDuration(185), "3 min 5 s");
  EXPECT_EQ(FormatDuration(7440), "2 h 4 min");
  EXPECT_EQ(FormatDuration(-1), "0 s");
}

}  // namespace
}  // namespace talaria
