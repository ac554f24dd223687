#include "trace/tokens.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace talaria {
namespace {

TraceCall Call(int index, std::int64_t prompt, std::int64_t prefix, std::int64_t output) {
  TraceCall c;
  c.session_id = "s";
  c.call_index = index;
  c.model = "m";
  c.prompt_tokens = prompt;
  c.prefix_tokens = prefix;
  c.output_tokens = output;
  return c;
}

TEST(SessionTokensTest, PromptStartsWithExactlyThePrefixOfThePreviousContext) {
  SessionTokens tokens(123, 50000, 16);
  tokens.Advance(Call(0, 1000, 0, 40));
  std::vector<std::int32_t> previous(tokens.prompt().begin(), tokens.prompt().end());
  previous.insert(previous.end(), tokens.output().begin(), tokens.output().end());
  ASSERT_EQ(previous.size(), 1040u);

  tokens.Advance(Call(1, 1500, 1020, 30));  // reuses the prompt and part of the output
  auto prompt = tokens.prompt();
  ASSERT_EQ(prompt.size(), 1500u);
  ASSERT_EQ(tokens.output().size(), 30u);
  EXPECT_TRUE(std::equal(prompt.begin(), prompt.begin() + 1020, previous.begin()));
  // Right after the prefix the call diverges from the previous context.
  int same = 0;
  for (std::size_t p = 1020; p < 1040; ++p) same += prompt[p] == previous[p];
  EXPECT_LT(same, 3);
}

TEST(SessionTokensTest, SameSeedSameIdsAndIdsStayInRange) {
  SessionTokens a(5, 1000, 10), b(5, 1000, 10), c(6, 1000, 10);
  for (auto* t : {&a, &b, &c}) t->Advance(Call(0, 500, 0, 5));
  EXPECT_TRUE(std::equal(a.prompt().begin(), a.prompt().end(), b.prompt().begin()));
  EXPECT_FALSE(std::equal(a.prompt().begin(), a.prompt().end(), c.prompt().begin()));
  for (auto id : a.prompt()) {
    ASSERT_GE(id, 10);
    ASSERT_LT(id, 1000);
  }
}

TEST(SessionTokensTest, CompactionKeepsOnlyTheShortPrefix) {
  SessionTokens tokens(1, 32000);
  tokens.Advance(Call(0, 800, 0, 10));
  std::vector<std::int32_t> first(tokens.prompt().begin(), tokens.prompt().end());
  tokens.Advance(Call(1, 300, 100, 10));
  EXPECT_TRUE(std::equal(first.begin(), first.begin() + 100, tokens.prompt().begin()));
  EXPECT_EQ(tokens.prompt().size(), 300u);
}

TEST(SessionTokensDeathTest, CallsMustComeInOrder) {
  SessionTokens tokens(1, 100);
  EXPECT_DEATH(tokens.Advance(Call(1, 10, 0, 1)), "out of call order");
}

}  // namespace
}  // namespace talaria
