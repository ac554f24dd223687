// The memory substrate as an instance uses it: staged switches, session KV
// kept on the host across switches, and hybrid models' recurrent states.
#include "instance/instance.h"

#include <gtest/gtest.h>

#include <vector>

#include "instance/instance_harness.h"

namespace talaria {
namespace {

using testing::Cold;
using testing::Harness;

// Staging: while m serves, n's weights are staged; the switch to n gathers
// them device-to-device. With staging off it reloads everything from host.
TEST(ColdInstanceTest, StagedSwitchIsD2dAndUnstagedIsH2d) {
  for (bool staging : {true, false}) {
    SCOPED_TRACE(staging ? "staging" : "no staging");
    Harness h(Cold({"m", "n"}, {.sp = true, .hkvr = true, .d2d_staging = staging}),
              {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    // m decodes 2 s, long enough to stage 8 GiB at 8 GiB/s; then n has work.
    h.Run({{0, "a", 0, "m", 100, 0, 200}, {1.5, "x", 0, "n", 100, 0, 1}});
    ASSERT_FALSE(h.switches().empty());
    const SwitchRecord& s = h.switches().front();
    EXPECT_EQ(s.to, "n");
    EXPECT_EQ(s.path, staging ? SwitchPath::kD2d : SwitchPath::kH2d);
    EXPECT_EQ(s.staged_bytes, staging ? 8 * kGiB : 0);
    // Phase 2 follows the gather plan: 8 GiB at 640 GiB/s or at 8 GiB/s.
    EXPECT_NEAR(s.timing.open_weights_s, staging ? 8.0 / 640 : 1.0, 1e-9);
  }
}

// Staging copies the model the next switch goes to, not the next in round
// order: the next one with work (restaged when work comes for another), or
// with none waiting the next resident one (a closed model opens whole from
// host, so staging it would gain nothing).
TEST(ColdInstanceTest, StagingFollowsTheModelTheNextSwitchGoesTo) {
  struct Case {
    const char* name;
    std::vector<std::string> resident;  // empty: all three
    double o_arrives_s;                 // o's first call: the only other work
  };
  for (const Case& c : {Case{"work for o, n idle", {}, 0.5}, Case{"n closed, o resident", {"m", "o"}, 1.5}}) {
    SCOPED_TRACE(c.name);
    InstanceConfig config = Cold({"m", "n", "o"}, {.sp = true, .hkvr = true, .d2d_staging = true});
    config.resident = c.resident;
    Harness h(config, {testing::TinyProfile("m"), testing::TinyProfile("n"), testing::TinyProfile("o")});
    h.Warmup("m");
    // m decodes 2 s: time to stage o's 8 GiB at 8 GiB/s once it is the target.
    h.Run({{0, "a", 0, "m", 100, 0, 200}, {c.o_arrives_s, "x", 0, "o", 100, 0, 1}});
    ASSERT_FALSE(h.switches().empty());
    const SwitchRecord& s = h.switches().front();
    EXPECT_EQ(s.to, "o");
    EXPECT_EQ(s.path, SwitchPath::kD2d);
    EXPECT_EQ(s.staged_bytes, 8 * kGiB);
  }
}

// HKVR: a session's KV survives a switch away and back as host-restorable;
// without HKVR the continuation recomputes its prefix.
TEST(ColdInstanceTest, HostRegistryKeepsKvAcrossSwitches) {
  for (bool hkvr : {true, false}) {
    SCOPED_TRACE(hkvr ? "hkvr" : "no hkvr");
    Harness h(Cold({"m", "n"}, {.sp = true, .hkvr = hkvr, .d2d_staging = true}),
              {testing::TinyProfile("m"), testing::TinyProfile("n")});
    h.Warmup("m");
    h.Run({{0, "a", 0, "m", 640, 0, 1},      // a0 finishes at 0.64 s on m
           {0.7, "x", 0, "n", 100, 0, 1},    // n waits out m's 1 s hold, then m switches away
           {2.0, "a", 1, "m", 700, 641, 1}}); // a returns after m's KV was released
    const CallRecord& a1 = h.Finished("a1");
    EXPECT_EQ(a1.kv_source, hkvr ? KvSource::kHost : KvSource::kRecompute);
    EXPECT_EQ(a1.reused_tokens, hkvr ? 640 : 0);
  }
}

// A hybrid model cannot roll its recurrent state back: with states kept
// only at context ends, a continuation that does not reuse the whole
// previous context recomputes (a restore skip).
TEST(ColdInstanceTest, HybridPartialReuseIsARestoreSkip) {
  InstanceConfig c = Cold({"h"});
  c.state_checkpoints = StateCheckpoints::kContextEnd;
  Harness h(c, {testing::TinyProfile("h", AttentionFamily::kHybrid)});
  h.Warmup("h");
  std::vector<Harness::Call> calls = {{0, "a", 0, "h", 640, 0, 1}, {0.7, "a", 1, "h", 700, 320, 1}};
  h.Run(calls);
  EXPECT_EQ(h.Finished("a1").kv_source, KvSource::kRecompute);
  EXPECT_GE(h.instance().counters().restore_skips, 1);
}

// A hybrid model's host checkpoint holds the state at the context's end,
// with the partial block it ends in: a continuation that reuses the whole
// context (not a multiple of a block) restores it after a switch away, and
// one that cuts history back restores to the latest earlier context end.
TEST(ColdInstanceTest, HybridStateRestoresFromHostAtTheContextEnd) {
  Harness h(Cold({"h", "n"}), {testing::TinyProfile("h", AttentionFamily::kHybrid), testing::TinyProfile("n")});
  h.Warmup("h");
  h.Run({{0, "a", 0, "h", 600, 0, 10},       // context 610: 9 blocks of 64 and 34 tokens
         {0.7, "x", 0, "n", 100, 0, 1},      // h switches away: a's KV leaves the device
         {2.5, "a", 1, "h", 700, 610, 10},   // the whole context: restored to its end
         {5.0, "y", 0, "n", 100, 0, 1},
         {7.0, "a", 2, "h", 800, 650, 1}});  // history cut back to 650: a1's end is 720
  const CallRecord& a1 = h.Finished("a1");
  EXPECT_EQ(a1.kv_source, KvSource::kHost);
  EXPECT_EQ(a1.reused_tokens, 610);
  const CallRecord& a2 = h.Finished("a2");
  EXPECT_EQ(a2.kv_source, KvSource::kHost);
  EXPECT_EQ(a2.reused_tokens, 610);  // a0's end, the latest state point inside 650
  EXPECT_EQ(h.instance().counters().restore_skips, 0);
}

// An agent that cuts its history back inside its first context, before any
// context end: with doubling state checkpoints the state at 8 blocks (the
// latest power of two before the cut) is on host with the chain to it, so
// the call restores there and recomputes only the rest; with states at
// context ends only, it recomputes the whole prefix (a restore skip).
TEST(ColdInstanceTest, ARewindInsideAContextRestoresAtTheLatestInteriorState) {
  for (const StateCheckpoints mode : {StateCheckpoints::kDoubling, StateCheckpoints::kContextEnd}) {
    SCOPED_TRACE(ToString(mode));
    InstanceConfig c = Cold({"h", "n"});
    c.state_checkpoints = mode;
    Harness h(c, {testing::TinyProfile("h", AttentionFamily::kHybrid), testing::TinyProfile("n")});
    h.Warmup("h");
    h.Run({{0, "a", 0, "h", 1200, 0, 10},     // context 1210: states at 1, 2, 4, 8, 16 blocks
           {0.7, "x", 0, "n", 100, 0, 1},     // h switches away
           {3.0, "a", 1, "h", 1300, 700, 1}});  // history cut back to 700 tokens
    const CallRecord& a1 = h.Finished("a1");
    if (mode == StateCheckpoints::kDoubling) {
      EXPECT_EQ(a1.kv_source, KvSource::kHost);
      EXPECT_EQ(a1.reused_tokens, 8 * 64);
      EXPECT_EQ(h.instance().counters().restore_skips, 0);
    } else {
      EXPECT_EQ(a1.kv_source, KvSource::kRecompute);
      EXPECT_EQ(h.instance().counters().restore_skips, 1);
    }
  }
}

}  // namespace
}  // namespace talaria
