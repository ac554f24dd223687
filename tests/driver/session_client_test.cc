#include "driver/session_client.h"

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

TraceCall Call(std::int32_t index, std::int64_t prompt, std::int64_t prefix, std::int64_t output) {
  TraceCall c;
  c.session_id = "s";
  c.call_index = index;
  c.model = "m";
  c.prompt_tokens = prompt;
  c.prefix_tokens = prefix;
  c.output_tokens = output;
  c.token_seed = 5;
  return c;
}

TEST(TraceSessionContextTest, FullReuseOnlyWhenThePrefixIsTheWholePreviousContext) {
  TraceSessionContext s;
  const TraceCall c0 = Call(0, 200, 0, 56);  // context 256 = 4 blocks of 64
  s.Advance(c0, 64);
  CallRequest r0 = s.Request(c0, 10);
  EXPECT_EQ(r0.id, 10);
  EXPECT_FALSE(r0.full_reuse);  // a first call reuses nothing
  EXPECT_EQ(r0.chain.size(), 4u);
  const std::vector<PrefixHash> first(r0.chain.begin(), r0.chain.end());

  const TraceCall c1 = Call(1, 300, 256, 20);  // the whole previous context
  s.Advance(c1, 64);
  const CallRequest r1 = s.Request(c1, 11);
  EXPECT_TRUE(r1.full_reuse);
  EXPECT_TRUE(r1.continuation);
  EXPECT_EQ(r1.prefix_tokens, 256);
  ASSERT_EQ(r1.chain.size(), 5u);  // 320 tokens
  EXPECT_TRUE(std::equal(first.begin(), first.end(), r1.chain.begin()));  // the shared blocks keep their names

  const TraceCall c2 = Call(2, 400, 300, 10);  // less than the 320 before it
  s.Advance(c2, 64);
  EXPECT_FALSE(s.Request(c2, 12).full_reuse);
}

// A request shares the context's chain: while it (or an instance's session
// entry) holds it, the next call extends a copy and the held chain stays as
// it was; once nobody else holds it, the next call extends it in place.
TEST(TraceSessionContextTest, AHeldChainIsExtendedAsACopy) {
  TraceSessionContext s;
  const TraceCall c0 = Call(0, 200, 0, 56);  // 4 blocks
  s.Advance(c0, 64);
  CallRequest r0 = s.Request(c0, 1);
  ASSERT_NE(r0.chain_owner, nullptr);
  EXPECT_EQ(r0.chain.data(), r0.chain_owner->data());
  const std::vector<PrefixHash> before(r0.chain.begin(), r0.chain.end());

  const TraceCall c1 = Call(1, 300, 256, 84);  // 6 blocks, the first 4 kept
  s.Advance(c1, 64);
  EXPECT_EQ(std::vector<PrefixHash>(r0.chain.begin(), r0.chain.end()), before);  // untouched
  CallRequest r1 = s.Request(c1, 2);
  EXPECT_NE(r1.chain_owner, r0.chain_owner);
  ASSERT_EQ(r1.chain.size(), 6u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), r1.chain.begin()));

  const PrefixHash* in_place = r1.chain.data();
  r0 = CallRequest{};
  r1 = CallRequest{};  // nobody holds it now
  const TraceCall c2 = Call(2, 400, 384, 0);  // the whole context again, no new blocks past it
  s.Advance(c2, 64);
  EXPECT_EQ(s.Request(c2, 3).chain.data(), in_place);
}

// With room reserved, a held chain grows in place: the holder's view (its
// length, its blocks, their address) is unchanged, and the blocks past it
// are the new call's. A call whose prefix cuts into a held chain gets a copy.
TEST(TraceSessionContextTest, AHeldChainWithRoomGrowsInPlaceAndACutOneIsCopied) {
  TraceSessionContext s;
  const TraceCall c0 = Call(0, 200, 0, 56);  // 4 blocks
  s.Advance(c0, 64, /*reserve_tokens=*/640);  // room for 10
  const CallRequest r0 = s.Request(c0, 1);
  const std::vector<PrefixHash> before(r0.chain.begin(), r0.chain.end());

  const TraceCall c1 = Call(1, 300, 256, 84);  // 6 blocks, the first 4 kept
  s.Advance(c1, 64);
  const CallRequest r1 = s.Request(c1, 2);
  EXPECT_EQ(r1.chain_owner, r0.chain_owner);  // the same chain, grown
  EXPECT_EQ(r1.chain.data(), r0.chain.data());
  ASSERT_EQ(r0.chain.size(), 4u);
  EXPECT_EQ(std::vector<PrefixHash>(r0.chain.begin(), r0.chain.end()), before);
  ASSERT_EQ(r1.chain.size(), 6u);
  EXPECT_TRUE(std::equal(before.begin(), before.end(), r1.chain.begin()));

  // Named as a fresh context would name them.
  TraceSessionContext fresh;
  fresh.Advance(c0, 64);
  fresh.Advance(c1, 64);
  const auto expected = fresh.chain();
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), r1.chain.begin(), r1.chain.end()));

  const TraceCall c2 = Call(2, 400, 130, 0);  // keeps 2 blocks of the 6 held
  s.Advance(c2, 64);
  const CallRequest r2 = s.Request(c2, 3);
  EXPECT_NE(r2.chain_owner, r1.chain_owner);
  ASSERT_EQ(r1.chain.size(), 6u);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), r1.chain.begin(), r1.chain.end()));  // untouched
  ASSERT_EQ(r2.chain.size(), 6u);  // 400 tokens: 6 full blocks
  EXPECT_TRUE(std::equal(before.begin(), before.begin() + 2, r2.chain.begin()));
  EXPECT_NE(r2.chain[2], r1.chain[2]);  // renamed past the prefix
}

// A hybrid model's state is checkpointed where each context ended; a call
// names the latest such point inside its prefix, and the partial block it
// ends in (the one its predecessor named as its context's).
TEST(TraceSessionContextTest, ACallNamesTheLatestStatePointInsideItsPrefix) {
  TraceSessionContext s;
  const TraceCall c0 = Call(0, 200, 0, 50);  // context 250: 3 blocks of 64 and 58 tokens
  s.Advance(c0, 64);
  const CallRequest r0 = s.Request(c0, 0);
  EXPECT_EQ(r0.state_tokens, 0);
  EXPECT_NE(r0.context_partial, 0u);

  const TraceCall c1 = Call(1, 300, 250, 20);  // reuses all 250: context 320, on a boundary
  s.Advance(c1, 64);
  const CallRequest r1 = s.Request(c1, 1);
  EXPECT_EQ(r1.state_tokens, 250);
  EXPECT_EQ(r1.state_partial, r0.context_partial);
  EXPECT_EQ(r1.context_partial, 0u);

  const TraceCall c2 = Call(2, 400, 320, 10);  // reuses all 320
  s.Advance(c2, 64);
  const CallRequest r2 = s.Request(c2, 2);
  EXPECT_EQ(r2.state_tokens, 320);
  EXPECT_EQ(r2.state_partial, 0u);  // on a boundary: the last full block carries it

  const TraceCall c3 = Call(3, 500, 300, 10);  // history cut back to 300 tokens
  s.Advance(c3, 64);
  const CallRequest r3 = s.Request(c3, 3);
  EXPECT_FALSE(r3.full_reuse);
  EXPECT_EQ(r3.state_tokens, 250);  // c0's context end is the latest point inside
  EXPECT_EQ(r3.state_partial, r0.context_partial);

  const TraceCall c4 = Call(4, 600, 100, 10);  // cut back before any state point
  s.Advance(c4, 64);
  EXPECT_EQ(s.Request(c4, 4).state_tokens, 0);
}

TEST(ReleaseRuleTest, TheRecordedGapIsCappedAndTheUncappedOneWins) {
  ReleaseRule rule;
  rule.gap_cap_s = 10;
  TraceCall c = Call(1, 10, 0, 1);
  c.gap_s = 0.5;
  EXPECT_DOUBLE_EQ(rule.GapSeconds(c), 0.5);
  c.gap_s = 10;
  c.gap_uncapped_s = 30;  // the trace was written capped at 10; replayed with the rule's cap
  EXPECT_DOUBLE_EQ(rule.GapSeconds(c), 10);
  rule.gap_cap_s = 20;
  EXPECT_DOUBLE_EQ(rule.GapSeconds(c), 20);
}

TEST(PromptRequestTest, AContinuationCarriesItsMatchAndReferencesThePrompt) {
  SessionContexts table;
  table.Update("s", {5, 6, 7}, At(0), At(1));
  const std::vector<std::int32_t> prompt{5, 6, 7, 8};
  const std::vector<PrefixHash> chain{1};
  const CallRequest r = PromptRequest(3, "s", "m", prompt, chain, 16, table.Find("s", prompt));
  EXPECT_TRUE(r.continuation);
  EXPECT_EQ(r.prefix_tokens, 3);
  EXPECT_TRUE(r.full_reuse);
  EXPECT_EQ(r.prompt_tokens, 4);
  EXPECT_EQ(r.output_tokens, 16);
  EXPECT_EQ(r.prompt_ids.data(), prompt.data());
  EXPECT_EQ(r.chain.data(), chain.data());
  const CallRequest fresh = PromptRequest(4, "t", "m", prompt, chain, 16, table.Find("t", prompt));
  EXPECT_FALSE(fresh.continuation);
  EXPECT_FALSE(fresh.full_reuse);
}

}  // namespace
}  // namespace talaria
