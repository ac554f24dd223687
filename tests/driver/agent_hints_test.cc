#include "driver/agent_hints.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace talaria {
namespace {

Trace TwoSessions() {
  Trace t;
  for (const char* id : {"a", "b"}) {
    for (int k = 0; k < 3; ++k) {
      TraceCall c;
      c.session_id = id;
      c.call_index = k;
      c.model = "m";
      c.gap_s = k == 0 ? 0 : 4.0 * k;  // 4 s, then 8 s
      c.gap_uncapped_s = k == 2 ? std::optional<double>(30.0) : std::nullopt;
      t.calls.push_back(c);
    }
  }
  return t;
}

TEST(AgentHintsTest, ExactHintsAreTheReplayedGapsAndTheLastCallEnds) {
  Trace t = TwoSessions();
  ReleaseRule release;
  release.gap_cap_s = 10;
  ApplyHints(t, ParseHintOptions("exact"), release);
  EXPECT_EQ(t.calls[0].expected_tool_s, 4.0);
  EXPECT_EQ(t.calls[1].expected_tool_s, 10.0);  // the uncapped 30 s, capped as replayed
  EXPECT_EQ(t.calls[2].expected_tool_s, std::nullopt);
  EXPECT_FALSE(t.calls[1].session_end);
  EXPECT_TRUE(t.calls[2].session_end);
  ApplyHints(t, ParseHintOptions("none"), release);
  for (const auto& c : t.calls) {
    EXPECT_EQ(c.expected_tool_s, std::nullopt);
    EXPECT_FALSE(c.session_end);
  }
}

TEST(AgentHintsTest, NoisyHintsStayWithinTheFactorAndAreSeeded) {
  Trace a = TwoSessions(), b = TwoSessions();
  ReleaseRule release;
  release.gap_cap_s = 100;
  ApplyHints(a, ParseHintOptions("noisy:2"), release);
  ApplyHints(b, ParseHintOptions("noisy:2"), release);
  bool moved = false;
  for (std::size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].expected_tool_s, b.calls[i].expected_tool_s);  // deterministic
    if (!a.calls[i].expected_tool_s) continue;
    const double exact = a.calls[i + 1].gap_uncapped_s.value_or(a.calls[i + 1].gap_s);
    const double ratio = *a.calls[i].expected_tool_s / exact;
    EXPECT_GE(ratio, 0.5);
    EXPECT_LE(ratio, 2.0);
    moved |= std::abs(ratio - 1) > 1e-6;
  }
  EXPECT_TRUE(moved);
}

TEST(AgentHintsTest, TheSpecIsCheckedAndRoundTrips) {
  for (const char* spec : {"none", "trace", "exact", "noisy:2", "noisy:1.5"}) {
    EXPECT_EQ(ToString(ParseHintOptions(spec)), spec);
  }
  for (const char* bad : {"", "all", "noisy", "noisy:", "noisy:0.5", "noisy:x", "noisy:inf"}) {
    EXPECT_THROW(ParseHintOptions(bad), InputError) << bad;
  }
}

}  // namespace
}  // namespace talaria
