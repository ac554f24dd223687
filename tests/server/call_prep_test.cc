#include "server/call_prep.h"

#include <gtest/gtest.h>

#include <vector>

namespace talaria {
namespace {

TimePoint At(double s) { return TimePoint(FromSeconds(s)); }

TEST(SessionContextsTest, FindsThePrefixSharedWithTheLastContext) {
  SessionContexts table;
  EXPECT_FALSE(table.Find("s", std::vector<std::int32_t>{1, 2, 3}).continuation);
  table.Update("s", {1, 2, 3, 4}, At(0), At(1));
  const auto full = table.Find("s", std::vector<std::int32_t>{1, 2, 3, 4, 9});
  EXPECT_TRUE(full.continuation);
  EXPECT_EQ(full.prefix_tokens, 4);
  EXPECT_TRUE(full.full_reuse);
  const auto edited = table.Find("s", std::vector<std::int32_t>{1, 2, 7, 4, 9});
  EXPECT_EQ(edited.prefix_tokens, 2);
  EXPECT_FALSE(edited.full_reuse);
}

TEST(SessionContextsTest, ASessionEndsAfterItsIdleTimeWithItsCompletionTime) {
  std::vector<double> ended;
  SessionContexts table(100, /*idle_s=*/10, [&](Duration sct) { ended.push_back(ToSeconds(sct)); });
  table.Update("a", {1}, At(0), At(2));
  table.Update("a", {1, 2}, At(3), At(5));  // a's calls span 0 .. 5
  table.Update("b", {7}, At(6), At(8));
  table.Update("b", {7, 8}, At(14), At(15));  // a idle 10 s at 15: not yet over the limit
  EXPECT_TRUE(ended.empty());
  table.Update("b", {7, 8, 9}, At(15.5), At(16));  // a idle 11 s: ended
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_DOUBLE_EQ(ended[0], 5.0);
  EXPECT_FALSE(table.Find("a", std::vector<std::int32_t>{1, 2}).continuation);
  EXPECT_EQ(table.size(), 1u);
}

TEST(SessionContextsTest, TheBoundPushesOutTheLeastRecentlyUsed) {
  std::vector<double> ended;
  SessionContexts table(2, 1e6, [&](Duration sct) { ended.push_back(ToSeconds(sct)); });
  table.Update("a", {1}, At(0), At(1));
  table.Update("b", {2}, At(0), At(2));
  table.Update("a", {1, 1}, At(2), At(3));  // a is now the most recent
  table.Update("c", {3}, At(3), At(4));
  EXPECT_EQ(table.size(), 2u);
  EXPECT_FALSE(table.Find("b", std::vector<std::int32_t>{2}).continuation);
  EXPECT_TRUE(table.Find("a", std::vector<std::int32_t>{1, 1}).continuation);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_DOUBLE_EQ(ended[0], 2.0);
}

}  // namespace
}  // namespace talaria
