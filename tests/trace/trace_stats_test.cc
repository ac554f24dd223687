#include "trace/trace_stats.h"

#include <gtest/gtest.h>

#include <sstream>

namespace talaria {
namespace {

TraceCall Call(const std::string& session, const std::string& model, int index,
               std::int64_t prompt, std::int64_t prefix, std::int64_t output, double gap) {
  TraceCall c;
  c.session_id = session;
  c.model = model;
  c.call_index = index;
  c.prompt_tokens = prompt;
  c.prefix_tokens = prefix;
  c.output_tokens = output;
  c.gap_s = gap;
  return c;
}

Trace Sample() {
  Trace t;
  // Session a (model x): 3 calls. Call 1 reuses 100 of 110 (> half); call 2
  // reuses 100 of 310 (not > half); call 2's gap was capped from 30 s.
  t.calls.push_back(Call("a", "x", 0, 100, 0, 10, 5.0));
  t.calls.push_back(Call("a", "x", 1, 300, 100, 10, 0.2));
  t.calls.push_back(Call("a", "x", 2, 400, 100, 10, 10.0));
  t.calls.back().gap_uncapped_s = 30.0;
  // Session b (model y): 1 call.
  t.calls.push_back(Call("b", "y", 0, 50, 0, 5, 0.0));
  return t;
}

TEST(TraceStatsTest, ComputesCharacterizationFigures) {
  const TraceStats s = ComputeTraceStats(Sample());
  EXPECT_EQ(s.sessions, 2);
  EXPECT_EQ(s.calls, 4);
  EXPECT_EQ(s.continuations, 2);
  EXPECT_EQ(s.calls_per_session_p50, 1);  // {1, 3}: rank ceil(1.0) = 1
  EXPECT_EQ(s.calls_per_session_p95, 3);
  EXPECT_EQ(s.calls_per_session_max, 3);
  // Gaps of continuations only, uncapped: {0.2, 30}.
  EXPECT_EQ(s.gap_p50_s, 0.2);
  EXPECT_EQ(s.gap_p95_s, 30.0);
  EXPECT_EQ(s.prompt_tokens_p50, 100);  // {50, 100, 300, 400}
  EXPECT_EQ(s.prompt_tokens_p95, 400);
  EXPECT_DOUBLE_EQ(s.reuse_over_half_fraction, 0.5);
}

TEST(TraceStatsTest, SplitsByModel) {
  const auto by = ComputeTraceStatsByModel(Sample());
  ASSERT_EQ(by.size(), 2u);
  EXPECT_EQ(by.at("x").calls, 3);
  EXPECT_EQ(by.at("y").sessions, 1);
  EXPECT_EQ(by.at("y").continuations, 0);
}

TEST(TraceStatsTest, JsonHasExactlyTheDocumentedKeys) {
  const auto j = ToJson(ComputeTraceStats(Sample()));
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{
                      "sessions", "calls", "calls_per_session_p50", "calls_per_session_p95",
                      "calls_per_session_max", "gap_p50_s", "gap_p95_s", "prompt_tokens_p50",
                      "prompt_tokens_p95", "reuse_over_half_fraction"}));
  EXPECT_EQ(j["calls"], 4);
}

TEST(TraceStatsTest, EmptyTraceIsAllZeros) {
  const TraceStats s = ComputeTraceStats(Trace{});
  EXPECT_EQ(s.sessions, 0);
  EXPECT_EQ(s.gap_p50_s, 0);
}

}  // namespace
}  // namespace talaria
